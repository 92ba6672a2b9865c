#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_term_inject.sh - terminal injection from a profile (issue 17, item
# 15). A recording of counts (--rate 1: frames, plans, an error) edited so
# that the command line, SQL, fingerprints, function, file and module
# names, plans, error messages and executable carry ESC/CSI/OSC/BEL
# sequences, C1 controls (U+009B in UTF-8) and raw 0x9b bytes. No byte of
# them may reach what the text outputs print - report (table, --stacks,
# --plans, --by site and function), the doctor, diff and check (text and
# Markdown, failing with regressions), JSON (report, diff: escaped),
# export -f folded - nor stderr
# (a schema entry with an escape in its name makes SQLite's error quote
# it). JSON output still gives the texts back exactly; CSV is data and
# keeps every byte (t_robust_secrets), so it is not checked here.
. "$(dirname "$0")/lib.sh"
need_prog counts
command -v sqlite3 >/dev/null || skip "sqlite3 shell not installed"
cd "$TMP" || exit 1
"$SQLPROF" record -q --rate 1 -o base.db -- "$PROGS/counts" >/dev/null 2>&1
[ -s base.db ] || fail "cannot record counts"
cp base.db evil.db
E="char(27)"
sqlite3 evil.db "
UPDATE meta SET value = value || $E || ']0;owned' || char(7) || $E || '[2J' WHERE key = 'command';
UPDATE queries SET fingerprint = fingerprint || $E || '[31m' || char(155) || '[1m' || CAST(x'9b' AS TEXT),
	sql = sql || $E || '[31m';
UPDATE frames SET function = function || $E || '[5m', file = file || $E || ']8;;http://x' || char(7),
	module = module || $E || '[H';
UPDATE plans SET plan = replace(plan, '|', '|' || $E || '[41m');
UPDATE errors SET message = message || $E || '[?1049h' || char(7);
UPDATE processes SET exe = exe || $E || '[K';
" || fail "cannot edit the profile"
# A candidate with more executions, so that check fails and prints sites.
cp evil.db evil2.db
sqlite3 evil2.db "UPDATE queries SET count = count * 3 + 7, vm_steps = vm_steps * 3 + 70" ||
	fail "cannot edit the candidate"
cp base.db badschema.db
sqlite3 badschema.db "PRAGMA writable_schema = ON;
INSERT INTO sqlite_schema VALUES ('table', 'x' || $E || ']0;owned' || char(7), 'x', 0, 'garbage ' || $E || '[2J');" ||
	fail "cannot damage the schema"

n=0
# out NAME CMD...: run CMD, its stdout and stderr kept as NAME.out/.err.
out() {
	local name=$1
	shift
	"$@" >"$name.out" 2>"$name.err" </dev/null
	n=$((n + 1))
}
out report "$SQLPROF" report -w 0 --stacks --plans evil.db
out report_site "$SQLPROF" report --by site evil.db
out report_function "$SQLPROF" report --by function evil.db
out diff "$SQLPROF" diff -a evil.db evil2.db
out diff_md "$SQLPROF" diff -a -f markdown evil.db evil2.db
out check "$SQLPROF" check --baseline evil.db evil2.db
out check_md "$SQLPROF" check -f markdown --baseline evil.db evil2.db
out folded "$SQLPROF" export -f folded evil.db
out report_json "$SQLPROF" report --format json evil.db
out diff_json "$SQLPROF" diff -f json evil.db evil2.db
out bad_report "$SQLPROF" report badschema.db
out bad_check "$SQLPROF" check --baseline base.db badschema.db
out bad_export "$SQLPROF" export -f svg badschema.db
grep -q 'owned' report.out || fail "the command line is not in the report"
grep -q 'rc=' report.out || fail "no failed execution in the report"
grep -q 'REGRESSION' check.out || fail "check did not fail: $(head -3 check.out)"
[ -s bad_report.err ] || fail "no error for the damaged schema"

"$PYTHON" - ./*.out ./*.err <<'PY' || fail "escape sequences reached the terminal"
import sys
bad = 0
for path in sys.argv[1:]:
    text = open(path, "rb").read().decode("utf-8", "surrogateescape")
    # C0 but newline and tab, DEL, C1, and bytes that are not UTF-8
    hits = [i for i, c in enumerate(text)
            if (ord(c) < 0x20 and c not in "\n\t") or 0x7f <= ord(c) <= 0x9f
            or 0xdc80 <= ord(c) <= 0xdcff]
    if hits:
        bad += 1
        h = hits[0]
        print(f"{path}: {len(hits)} control character(s), first: {text[max(0, h - 30):h + 8]!r}")
print(f"{len(sys.argv) - 1} outputs checked, {bad} with control characters")
sys.exit(1 if bad else 0)
PY

"$SQLPROF" report --format json evil.db >evil.json || fail "report --format json failed"
"$PYTHON" - <<'PY' || fail "JSON does not give the texts back"
import json
r = json.load(open("evil.json"))
fps = [q["fingerprint"] for q in r["queries"]]
assert any("\x1b[31m\u009b[1m" in f for f in fps), fps[:2]
print("json keeps the texts")
PY
echo "$n commands' outputs clean"
exit 0
