#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_export.sh - sqlprof export on the synthetic fixture profile
# (tests/golden/export/): folded, folded --weight count, CSV, Chrome and
# speedscope output equal their golden files; every format is produced
# (svg well-formed XML, chrome and speedscope valid JSON, perfetto
# non-empty); the folded lines have flamegraph.pl's shape; usage errors
# exit 2, bad profiles 3 with one line on stderr and no output file.
# UPDATE_GOLDEN=1 rewrites the golden files instead of comparing.
. "$(dirname "$0")/lib.sh"

command -v sqlite3 >/dev/null || skip "sqlite3 shell not installed"
GOLD=$ITDIR/../golden/export
SQLPROF=$SQLPROF "$GOLD/mkfixture.sh" "$TMP/fixture.db" || fail "mkfixture.sh failed"
cd "$TMP" || exit 1

gold() { # NAME ARGS...: export with ARGS, compare with NAME.golden
	local name=$1
	shift
	"$SQLPROF" export "$@" fixture.db >"$name.out" 2>"$name.err" ||
		fail "export $* exited $?: $(cat "$name.err")"
	if [ -n "${UPDATE_GOLDEN:-}" ]; then
		cp "$name.out" "$GOLD/$name.golden"
	else
		same_file "export $*" "$GOLD/$name.golden" "$name.out"
	fi
}
gold folded -f folded
gold folded-count -f folded --weight count
gold csv -f csv
gold chrome -f chrome
gold speedscope -f speedscope

# every format, to a file
for f in folded svg perfetto chrome speedscope csv html; do
	"$SQLPROF" export -f "$f" -o "out.$f" fixture.db 2>err || fail "export -f $f: $(cat err)"
	[ -s "out.$f" ] || fail "export -f $f wrote nothing"
done
"$PYTHON" - out.chrome out.speedscope <<'PY' || fail "JSON output does not parse"
import json, sys
for p in sys.argv[1:]:
    json.load(open(p, encoding="utf-8"))
PY
"$PYTHON" -c 'import sys, xml.dom.minidom as m; m.parse(sys.argv[1])' out.svg ||
	fail "svg is not well-formed XML"
grep -q '<!DOCTYPE html>' out.html || fail "html has no doctype"
grep -Eiq '(src|href)="(https?:)?//' out.html && fail "html refers to an external resource"

# flamegraph.pl's input: "frame;frame;... weight", integer weight >= 1
awk '!/^[^;\n]+(;[^;\n]+)* [1-9][0-9]*$/ { print "bad line " NR ": " $0; bad = 1 }
     END { exit bad }' out.folded || fail "folded lines malformed"
# total weight = the profile's db time (self) and executions
total=$(awk '{ s += $NF } END { print s }' out.folded)
[ "$total" = 1437000 ] || fail "folded total $total, want 1437000"
count=$("$SQLPROF" export -f folded --weight count fixture.db | awk '{ s += $NF } END { print s }')
[ "$count" = 118 ] || fail "folded count total $count, want 118"

# usage errors: 2; bad profiles: 3, one line, no output file
for args in "" "-f nope" "-f csv --weight bytes" "-f csv --bogus" "-f csv a.db b.db"; do
	# shellcheck disable=SC2086
	"$SQLPROF" export $args >/dev/null 2>&1
	rc=$?
	[ $rc = 2 ] || fail "export $args exited $rc, want 2"
done
echo "not a database" >text.db
for p in missing.db text.db; do
	"$SQLPROF" export -f csv -o never.csv "$p" >/dev/null 2>err
	rc=$?
	[ $rc = 3 ] || fail "export of $p exited $rc, want 3"
	[ "$(wc -l <err)" = 1 ] || fail "export of $p: stderr not one line: $(cat err)"
	[ -e never.csv ] && fail "export of $p left an output file"
done
"$SQLPROF" export --help | grep -q perfetto || fail "help does not list formats"
exit 0
