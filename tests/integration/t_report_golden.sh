#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_report_golden.sh - `sqlprof report`'s table on the synthetic fixture
# profile of tests/golden/export/ (fixed numbers, no recording, no time of
# day): the default table, --by site, --by function, --sort/--top/--width
# with --full-paths, --stacks without the doctor, --skip, and the table
# fitted to COLUMNS=100 each equal their golden file in tests/golden/report/.
# The fixture holds no wall-clock time of this run, so the output has none
# to normalise. UPDATE_GOLDEN=1 rewrites the golden files instead.
. "$(dirname "$0")/lib.sh"

command -v sqlite3 >/dev/null || skip "sqlite3 shell not installed"
GOLD=$ITDIR/../golden/report
SQLPROF=$SQLPROF "$ITDIR/../golden/export/mkfixture.sh" "$TMP/fixture.db" || fail "mkfixture.sh failed"
cd "$TMP" || exit 1
unset COLUMNS

gold() { # NAME ARGS...: report with ARGS, compare with NAME.golden
	local name=$1
	shift
	"$SQLPROF" report "$@" fixture.db >"$name.out" 2>"$name.err" ||
		fail "report $* exited $?: $(cat "$name.err")"
	[ -s "$name.err" ] && fail "report $* wrote to stderr: $(cat "$name.err")"
	if [ -n "${UPDATE_GOLDEN:-}" ]; then
		cp "$name.out" "$GOLD/$name.golden"
	else
		same_file "report $*" "$GOLD/$name.golden" "$name.out"
	fi
}
gold table
gold by-site --by site
gold by-function --by function
gold count-top3-w30 -s count -n 3 -w 30 --full-paths
gold stacks --stacks --no-doctor
gold skip --skip db_insert --skip 'author_*'
COLUMNS=100 gold columns100
# the same as the default table when asked for in the other spellings
"$SQLPROF" report -f table -s total -w 80 fixture.db >again.out || fail "report -f table exited $?"
same_file "report -f table -s total -w 80" "$GOLD/table.golden" again.out
echo "7 tables equal their golden files"
exit 0
