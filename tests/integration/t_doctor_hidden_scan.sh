#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The counters as evidence (issue 27, item 4): in the sqlite3 shell,
# `SELECT max(a) FROM t WHERE b = 5` on 20,000 rows without an index on b
# plans as "SEARCH t" (no bare SCAN) yet steps through the whole table:
# SQLite counts 19,999 full-scan steps. The doctor reports full-scan with
# the plan and the counter, and suggests CREATE INDEX t_b ON t(b), checked
# in the recorded schema to change the plan (before: no finding, the rule
# wanted a SCAN line).
. "$(dirname "$0")/lib.sh"
command -v sqlite3 >/dev/null || skip "no sqlite3 shell"

"$PYTHON" - "$TMP/app.sqlite" <<'PY' || fail "cannot make the database"
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.execute("CREATE TABLE t(a INTEGER, b INTEGER)")
db.executemany("INSERT INTO t VALUES (?, ?)", [(i, i % 100) for i in range(20000)])
db.commit()
PY
echo 'SELECT max(a) FROM t WHERE b = 5;' >"$TMP/q.sql"
"$SQLPROF" record -q -o "$TMP/p.db" -- sqlite3 "$TMP/app.sqlite" <"$TMP/q.sql" >"$TMP/out" 2>"$TMP/err" ||
	fail "record sqlite3: $(cat "$TMP/err")"
[ "$(cat "$TMP/out")" = 19905 ] || fail "the shell printed $(cat "$TMP/out")"
"$SQLPROF" report "$TMP/p.db" >"$TMP/r.txt" || fail "report"
sed -n '/# query doctor/,$p' "$TMP/r.txt" >"$TMP/doc"
grep -A3 '^full-scan   SELECT max(a) FROM t WHERE b = ?$' "$TMP/doc" >"$TMP/f" ||
	fail "no full-scan finding: $(cat "$TMP/r.txt")"
grep -q 'evidence: plan "SEARCH t" shows no full scan, yet SQLite counted 19999 full-scan steps' "$TMP/f" ||
	fail "the evidence does not name the plan and the counter: $(cat "$TMP/f")"
grep -q 'suggestion: CREATE INDEX t_b ON t(b);' "$TMP/f" || fail "no checked index: $(cat "$TMP/f")"
echo "ok: a scan behind a SEARCH plan found by its counter, with a checked index"
