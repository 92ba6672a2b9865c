#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_gate.sh - sqlprof check catches each regression planted by
# tests/progs/gate_app.c, by name, with exit 1, in its text output, its
# Markdown and its JUnit XML; the unchanged program passes with exit 0.
# The JUnit file parses as XML (python3, and xmllint when installed); the
# Markdown has a GitHub table (header row, then a |---| separator).
. "$(dirname "$0")/lib.sh"
need_prog gate_app

rec() { # rec MODE OUT
	"$SQLPROF" record -q --rate 0 -o "$2" -- "$PROGS/gate_app" "$1" >"$TMP/$1.out" 2>"$TMP/$1.err" ||
		fail "record gate_app $1 exited $?: $(cat "$TMP/$1.err")"
}

rec clean "$TMP/base.db"
rec clean "$TMP/clean.db"
for m in dropindex nplus1 reprepare extraquery; do rec "$m" "$TMP/$m.db"; done

# check_one MODE EXPECTED_EXIT RULE...: run check, then look for each rule
# in the text output, the Markdown and the JUnit failures.
check_one() {
	local m=$1 want=$2 rc
	shift 2
	"$SQLPROF" check --baseline "$TMP/base.db" "$TMP/$m.db" --junit "$TMP/$m.xml" \
		>"$TMP/$m.txt" 2>"$TMP/$m.cerr"
	rc=$?
	[ "$rc" -eq "$want" ] ||
		fail "check $m exited $rc, expected $want: $(cat "$TMP/$m.txt" "$TMP/$m.cerr")"
	"$SQLPROF" check --baseline "$TMP/base.db" "$TMP/$m.db" --format markdown >"$TMP/$m.md" 2>&1
	rc=$?
	[ "$rc" -eq "$want" ] || fail "check --format markdown $m exited $rc, expected $want"
	"$PYTHON" - "$TMP/$m.xml" "$@" <<'PY' || fail "JUnit of $m: see above"
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
cases = [c for s in suites for c in s.findall("testcase")]
failures = [f for c in cases for f in c.findall("failure")]
assert cases, "no test cases"
want = sys.argv[2:]
names = " ".join((f.get("message") or "") + " " + (f.text or "") for f in failures)
for rule in want:
    assert rule in names, "rule %s not among the JUnit failures: %s" % (rule, names)
if not want:
    assert not failures, "unexpected failures: %s" % names
tests = int(suites[0].get("tests")); nfail = int(suites[0].get("failures"))
assert tests == len(cases), (tests, len(cases))
assert nfail == sum(1 for c in cases if c.find("failure") is not None), nfail
PY
	for rule in "$@"; do
		grep -q "^REGRESSION $rule:" "$TMP/$m.txt" || fail "check $m does not name $rule: $(cat "$TMP/$m.txt")"
		grep -q "| \*\*$rule\*\* |" "$TMP/$m.md" || fail "Markdown of $m does not name $rule"
	done
	if command -v xmllint >/dev/null; then
		xmllint --noout "$TMP/$m.xml" || fail "xmllint rejects the JUnit of $m"
	else
		not_checked "xmllint not installed: JUnit checked with python3 only"
	fi
}

check_one clean 0
grep -q '^sqlprof check: PASS' "$TMP/clean.txt" || fail "clean: no PASS line"
check_one dropindex 1 plan-change new-fullscan
grep -q 'SEARCH orders USING INDEX orders_user (user_id=?) -> SCAN orders' "$TMP/dropindex.txt" ||
	fail "dropindex: the plan change is not shown"
grep -q 'at order_total (.*gate_app.c:[0-9]*)' "$TMP/dropindex.txt" || fail "dropindex: site not named"
check_one nplus1 1 n-plus-one count-increase
grep -q '20 consecutive executions' "$TMP/nplus1.txt" || fail "nplus1: run length not shown"
check_one reprepare 1 reprepare
grep -q '50 prepares for 50 executions' "$TMP/reprepare.txt" || fail "reprepare: evidence not shown"
grep -q 'at user_name (.*gate_app.c:[0-9]*)' "$TMP/reprepare.txt" || fail "reprepare: site not named"
check_one extraquery 1 new-query
grep -q 'SELECT count(\*) FROM audit WHERE what = ?' "$TMP/extraquery.txt" || fail "extraquery: query not named"

# The Markdown renders as a table: a header row followed by a separator row.
"$PYTHON" - "$TMP/nplus1.md" <<'PY' || fail "Markdown table malformed"
import re, sys
lines = open(sys.argv[1], encoding="utf-8").read().splitlines()
tables = 0
for i in range(len(lines) - 1):
    if lines[i].startswith("|") and re.fullmatch(r"\|(\s*:?-{3,}:?\s*\|)+", lines[i + 1]):
        cols = lines[i].count("|") - 1
        assert lines[i + 1].count("|") - 1 == cols, "separator width differs from header"
        j = i + 2
        while j < len(lines) and lines[j].startswith("|"):
            # escaped pipes do not count as cell boundaries
            assert len(re.findall(r"(?<!\\)\|", lines[j])) - 1 == cols, "row %d has a wrong cell count" % j
            j += 1
        assert j > i + 2, "table without rows"
        tables += 1
assert tables >= 2, "expected the regressions table and the diff table, got %d" % tables
PY

# Hostile SQL text (control characters, invalid UTF-8, XML and Markdown
# metacharacters) still gives well-formed JUnit and JSON.
cp "$TMP/clean.db" "$TMP/hostile.db" && chmod u+w "$TMP/hostile.db"
"$PYTHON" - "$TMP/hostile.db" <<'PY' || fail "cannot plant hostile SQL"
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
bad = b"SELECT '\x01<&\"'']]>|`x`\xff\xfe\xed\xa0\x80 \xf0\x9f\x98\x80' FROM t WHERE a = ?"
db.execute("UPDATE queries SET fingerprint = CAST(? AS TEXT), fp_id = fp_id + 1"
           " WHERE fingerprint LIKE 'SELECT name%'", (bad,))
db.commit()
PY
"$SQLPROF" check --baseline "$TMP/base.db" "$TMP/hostile.db" --junit "$TMP/h.xml" >"$TMP/h.txt"; rc=$?
[ "$rc" -eq 1 ] || fail "hostile: exit $rc, expected 1 (new-query)"
"$PYTHON" -c 'import sys, xml.etree.ElementTree as E; E.parse(sys.argv[1])' "$TMP/h.xml" ||
	fail "hostile SQL broke the JUnit XML"
"$SQLPROF" check --baseline "$TMP/base.db" "$TMP/hostile.db" --format json >"$TMP/h.json"
"$PYTHON" -c 'import sys, json; json.load(open(sys.argv[1], encoding="utf-8", errors="strict"))' "$TMP/h.json" ||
	fail "hostile SQL broke the JSON (not valid UTF-8 JSON)"
grep -q "$(printf '\001')" "$TMP/h.txt" && fail "a control character reached the text output"

# Usage and input errors.
"$SQLPROF" check "$TMP/clean.db" >/dev/null 2>&1; rc=$?
[ "$rc" -eq 2 ] || fail "check without --baseline exited $rc, expected 2"
"$SQLPROF" check --baseline "$TMP/base.db" >/dev/null 2>&1; rc=$?
[ "$rc" -eq 2 ] || fail "check without a candidate exited $rc, expected 2"
"$SQLPROF" check --baseline "$TMP/base.db" --fail-on bogus "$TMP/clean.db" >/dev/null 2>&1; rc=$?
[ "$rc" -eq 2 ] || fail "check --fail-on bogus exited $rc, expected 2"
"$SQLPROF" check --baseline "$TMP/missing.db" "$TMP/clean.db" >/dev/null 2>&1; rc=$?
[ "$rc" -eq 3 ] || fail "check with a missing baseline exited $rc, expected 3"
echo "not a profile" >"$TMP/junk.db"
"$SQLPROF" check --baseline "$TMP/base.db" "$TMP/junk.db" >/dev/null 2>&1; rc=$?
[ "$rc" -eq 3 ] || fail "check with a junk candidate exited $rc, expected 3"
"$SQLPROF" diff "$TMP/base.db" >/dev/null 2>&1; rc=$?
[ "$rc" -eq 2 ] || fail "diff with one profile exited $rc, expected 2"

# --fail-on none turns the rules off; the count threshold remains.
"$SQLPROF" check --baseline "$TMP/base.db" --fail-on none "$TMP/reprepare.db" >/dev/null; rc=$?
[ "$rc" -eq 0 ] || fail "reprepare with --fail-on none exited $rc, expected 0"

# The report shows the doctor's findings (and --no-doctor hides them).
"$SQLPROF" report "$TMP/dropindex.db" >"$TMP/rep.txt" || fail "report dropindex failed"
grep -q '^full-scan' "$TMP/rep.txt" || fail "report: no full-scan finding"
grep -q 'suggestion: CREATE INDEX orders_user_id ON orders(user_id);' "$TMP/rep.txt" ||
	fail "report: no index suggestion: $(sed -n '/query doctor/,$p' "$TMP/rep.txt")"
"$SQLPROF" report --no-doctor "$TMP/dropindex.db" | grep -q 'query doctor' && fail "--no-doctor still prints findings"
"$SQLPROF" report "$TMP/nplus1.db" | grep -q '^n-plus-one' || fail "report: no n-plus-one finding"
"$SQLPROF" report "$TMP/clean.db" | grep -q 'query doctor' && fail "report: findings on the clean run"
exit 0
