#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# report's text lists at most 10 findings of a rule (SP_DOCTOR_TEXT_MAX),
# the costliest, and counts the rest in one line; JSON keeps every one.
# Before: a program preparing 10,000 distinct texts once per execution got
# 10,000 "reprepare" findings of the same advice, 40,000 lines. Here the
# sqlite3 shell runs 25 shapes (distinct column names) 12 times each, each
# execution prepared anew: 25 reprepare findings.
. "$(dirname "$0")/lib.sh"
command -v sqlite3 >/dev/null || skip "sqlite3 shell not installed"
for i in $(seq 1 25); do
	for j in $(seq 1 12); do echo "SELECT $j AS c$i;"; done
done >"$TMP/q.sql"
"$SQLPROF" record -q -o "$TMP/p.db" -- sqlite3 :memory: <"$TMP/q.sql" >/dev/null 2>"$TMP/rec.err" ||
	fail "record: $(cat "$TMP/rec.err")"
report_json "$TMP/p.db" "$TMP/p.json"
n=$("$PYTHON" -c 'import json,sys; print(sum(1 for f in json.load(open(sys.argv[1]))["findings"] if f["kind"] == "reprepare"))' "$TMP/p.json")
[ "$n" = 25 ] || fail "JSON: $n reprepare findings, expected 25 (every one)"
"$SQLPROF" report "$TMP/p.db" >"$TMP/r.txt" 2>&1 || fail "report: $(cat "$TMP/r.txt")"
shown=$(grep -c '^reprepare   SELECT' "$TMP/r.txt")
[ "$shown" = 10 ] || fail "text: $shown reprepare findings printed, expected 10"
grep -q '^reprepare   \.\.\. and 15 more queries with this finding' "$TMP/r.txt" ||
	fail "text: no line counting the 15 others: $(grep -A2 'query doctor' "$TMP/r.txt")"
grep -q '^# query doctor: 25 findings' "$TMP/r.txt" || fail "text: the header does not count all 25"
exit 0
