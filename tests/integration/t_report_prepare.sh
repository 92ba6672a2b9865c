#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Prepare time and connection churn are shown, and the advice fits the
# program's language (issue 27, item 5), with py_conn_churn.py: a Python
# service opening a connection per request thread (40 requests, one lookup
# each, every one prepared again):
# - the header's db time adds the prepare time, and counts SQLite's schema
#   loads (one per connection: >= 40); the table has a PREPARE column;
#   JSON has prepare_ns per query and in all, and schema_loads; CSV has
#   prepare_ns (before: none of these);
# - the reprepare finding's advice is Python's (the sqlite3 module's
#   statement cache, one connection per thread), not the C API's
#   (before: "sqlite3_reset + sqlite3_bind_*"), while a C program
#   (tests/progs/gate_app.c reprepare) still gets the C API's;
# - SQLite's own statement without SQL text gets no finding.
. "$(dirname "$0")/lib.sh"
need_prog gate_app
"$PYTHON" -c 'import sqlite3, threading' 2>/dev/null || skip "$PYTHON has no sqlite3 module"

"$SQLPROF" record -q -o "$TMP/p.db" -- "$PYTHON" "$ITDIR/py_conn_churn.py" "$TMP/app.sqlite" \
	>"$TMP/p.out" 2>"$TMP/p.err" || fail "record: $(cat "$TMP/p.err")"
"$SQLPROF" report "$TMP/p.db" >"$TMP/p.txt" || fail "report"
head -1 "$TMP/p.txt" | grep -Eq 'db time [0-9.]+ [mun]?s \(self\) \+ prepare [0-9.]+ [mun]?s; ([4-9][0-9]|[1-9][0-9]{2,}) schema loads' ||
	fail "header without prepare time or schema loads: $(head -1 "$TMP/p.txt")"
grep -Eq '^ +COUNT +TOTAL +PREPARE ' "$TMP/p.txt" || fail "no PREPARE column: $(grep COUNT "$TMP/p.txt")"
"$SQLPROF" report -f json "$TMP/p.db" >"$TMP/p.json" || fail "report -f json"
"$PYTHON" - "$TMP/p.json" <<'PY' || fail "JSON: see above"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["schema_loads"] >= 40, d["schema_loads"]
q = [r for r in d["queries"] if r["fingerprint"] == "SELECT name FROM users WHERE id = ?"]
assert q and q[0]["prepares"] == 40 and q[0]["prepare_ns"] > 0, q
assert d["prepare_ns"] >= q[0]["prepare_ns"], d["prepare_ns"]
PY
"$SQLPROF" report -f csv "$TMP/p.db" >"$TMP/p.csv" || fail "report -f csv"
"$PYTHON" - "$TMP/p.csv" <<'PY' || fail "CSV: see above"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1], newline="")))
q = [r for r in rows if r["fingerprint"] == "SELECT name FROM users WHERE id = ?"]
assert q and int(q[0]["prepare_ns"]) > 0, q
PY
sed -n '/# query doctor/,$p' "$TMP/p.txt" >"$TMP/p.doc"
grep -A3 '^reprepare   SELECT name FROM users WHERE id = ?' "$TMP/p.doc" |
	grep -q "suggestion: Python's sqlite3 reuses a prepared statement" ||
	fail "no Python advice: $(cat "$TMP/p.doc")"
! grep -q 'sqlite3_reset' "$TMP/p.doc" || fail "C advice for a Python program: $(cat "$TMP/p.doc")"
! grep -q '<statement without SQL text>' "$TMP/p.doc" || fail "a finding on SQLite's own statement"

"$SQLPROF" record -q --rate 0 -o "$TMP/c.db" -- "$PROGS/gate_app" reprepare >/dev/null 2>&1 || fail "record gate_app"
"$SQLPROF" report "$TMP/c.db" | grep -A3 '^reprepare' | grep -q 'suggestion: keep the prepared statement and reuse it (sqlite3_reset' ||
	fail "C program: no C advice: $("$SQLPROF" report "$TMP/c.db" | sed -n '/query doctor/,$p')"
echo "ok: prepare time and schema loads in header, table, JSON and CSV; Python advice for Python, C for C"
