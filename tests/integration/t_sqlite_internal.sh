#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# SQLite's own work is listed apart (issue 27, item 8). tests/progs/shop
# `indexed` runs a schema exec with a CREATE INDEX, so SQLite reloads its
# schema (`[exec] SELECT * FROM "main".sqlite_master WHERE ...`, nested)
# and prepares statements without SQL text. Before, they were rows of the
# program's table, /metrics named the reload `db_query_summary="SELECT
# \"main\""` and check judged them. Now:
# - the table lists them last, under "# SQLite's own work", none of them
#   among the program's rows; the header says how many executions of the
#   totals they are (the totals still include them: the header's count is
#   the sum of all rows);
# - JSON: "sqlite_internal" on each query and a summary whose executions
#   are the flagged rows' sum; CSV: a sqlite_internal column;
# - a program's own read of sqlite_master is the program's query;
# - check leaves them out by default (exit 0), --gate-sqlite-internal
#   judges them (new-query for the reload: exit 1);
# - /metrics (an agent with --metrics, curl): the reload and the
#   statements without SQL text are db_query_summary="SQLite internal",
#   a query on "main"."users" is "SELECT users" (before: SELECT "main").
. "$(dirname "$0")/lib.sh"
need_prog shop

for m in slow indexed; do
	"$SQLPROF" record -q -o "$TMP/$m.db" -- "$PROGS/shop" $m >/dev/null 2>"$TMP/$m.err" ||
		fail "record shop $m: $(cat "$TMP/$m.err")"
done
"$SQLPROF" report --no-doctor "$TMP/indexed.db" >"$TMP/t.txt" || fail "report"
grep -q '^# SQLite.s own work (not the program.s queries' "$TMP/t.txt" ||
	fail "no section of SQLite's own work: $(cat "$TMP/t.txt")"
sed -n '/^# SQLite.s own work/,$p' "$TMP/t.txt" >"$TMP/own.txt"
sed -n '/^ *COUNT /,/^# SQLite.s own work/p' "$TMP/t.txt" >"$TMP/prog.txt"
grep -q '<statement without SQL text>' "$TMP/own.txt" || fail "no statement without SQL text in the section"
grep -q '\[exec\] SELECT \* FROM "main".sqlite_master WHERE' "$TMP/own.txt" ||
	fail "the schema reload is not in the section: $(cat "$TMP/own.txt")"
! grep -q 'sqlite_master\|<statement without SQL text>' "$TMP/prog.txt" ||
	fail "SQLite's own statements among the program's: $(cat "$TMP/prog.txt")"
grep -q 'SELECT sum(amount) FROM orders WHERE customer_id' "$TMP/prog.txt" || fail "the program's query is missing"

report_json "$TMP/indexed.db" "$TMP/r.json"
read -r own_n all_t own_t <<<"$("$PYTHON" - "$TMP/r.json" <<'PY' || echo fail
import json, sys
r = json.load(open(sys.argv[1]))
qs = r["queries"]
own = [q for q in qs if q["sqlite_internal"]]
fps = {q["fingerprint"] for q in own}
assert "<statement without SQL text>" in fps, fps
assert any('"main".sqlite_master' in f for f in fps), fps
assert all(not q["sqlite_internal"] for q in qs if q["fingerprint"].startswith("SELECT sum(amount)")), qs
s = r["sqlite_internal"]
assert s["queries"] == len(own), (s, len(own))
assert s["executions"] == sum(q["count"] for q in own), s
assert s["self_ns"] == sum(q["self_ns"] for q in own), s
assert s["prepare_ns"] == sum(q["prepare_ns"] for q in own), s
def fmt(ns):  # sp_fmt_ns
    return ("%.0f ns" % ns if ns < 1e3 else "%.2f us" % (ns / 1e3) if ns < 1e6
            else "%.2f ms" % (ns / 1e6) if ns < 1e9 else "%.2f s" % (ns / 1e9))
# the header's db time: every row's self time, SQLite's own included
print(s["executions"], fmt(sum(q["self_ns"] for q in qs)).replace(" ", "_"),
      fmt(s["self_ns"]).replace(" ", "_"))
PY
)"
[ "$own_n" != fail ] && [ -n "$own_t" ] || fail "JSON: see above"
grep -q "^# .* executions of .*; db time ${all_t/_/ } (self)" "$TMP/t.txt" ||
	fail "the header's db time is not every row's (${all_t/_/ }): $(head -3 "$TMP/t.txt")"
grep -q "^# of which SQLite's own work (schema loads, statements without SQL text): $own_n executions, ${own_t/_/ } db time" "$TMP/t.txt" ||
	fail "the header does not say $own_n executions (${own_t/_/ }) are SQLite's own: $(head -3 "$TMP/t.txt")"
"$SQLPROF" report -f csv "$TMP/indexed.db" >"$TMP/r.csv" || fail "report csv"
"$PYTHON" - "$TMP/r.csv" <<'PY' || fail "CSV: see above"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
own = [r for r in rows if r["sqlite_internal"] == "1"]
assert any(r["fingerprint"] == "<statement without SQL text>" for r in own), own
assert all(r["sqlite_internal"] == "0" for r in rows if r["fingerprint"].startswith("SELECT sum(amount)"))
PY

# a program's own read of sqlite_master is its query
PY3=/usr/bin/python3
[ -x $PY3 ] || PY3=$PYTHON
"$SQLPROF" record -q -o "$TMP/py.db" -- $PY3 -c '
import sqlite3
db = sqlite3.connect(":memory:")
db.execute("CREATE TABLE users(id INTEGER PRIMARY KEY, name TEXT)")
for i in range(3):
    db.execute("SELECT name FROM sqlite_master WHERE type = ?", ("table",)).fetchall()
    db.execute("SELECT name FROM \"main\".\"users\" WHERE id = ?", (i,)).fetchall()' ||
	fail "record python"
report_json "$TMP/py.db" "$TMP/py.json"
"$PYTHON" - "$TMP/py.json" <<'PY' || fail "the program's sqlite_master read: see above"
import json, sys
qs = json.load(open(sys.argv[1]))["queries"]
mine = [q for q in qs if q["fingerprint"].startswith("SELECT name FROM sqlite_master")]
assert mine and not mine[0]["sqlite_internal"], mine
PY

# the gate: off by default, --gate-sqlite-internal judges them
"$SQLPROF" check --baseline "$TMP/slow.db" "$TMP/indexed.db" >"$TMP/c0.txt" 2>&1; rc=$?
[ "$rc" -eq 0 ] || fail "check exited $rc: $(cat "$TMP/c0.txt")"
grep -q "^EXPECTED: <statement without SQL text>" "$TMP/c0.txt" || fail "not listed as expected: $(cat "$TMP/c0.txt")"
"$SQLPROF" check --gate-sqlite-internal --baseline "$TMP/slow.db" "$TMP/indexed.db" >"$TMP/c1.txt" 2>&1; rc=$?
[ "$rc" -eq 1 ] || fail "check --gate-sqlite-internal exited $rc: $(cat "$TMP/c1.txt")"
grep -q '^REGRESSION new-query: \[exec\] SELECT \* FROM "main".sqlite_master' "$TMP/c1.txt" ||
	fail "--gate-sqlite-internal does not judge the reload: $(cat "$TMP/c1.txt")"

# /metrics: one label for SQLite's own work, names without their schema
if ! command -v curl >/dev/null; then
	not_checked "/metrics labels (curl not installed)"
	echo "ok: SQLite's own work apart in table, JSON, CSV and the gate (metrics not checked)"
	exit 0
fi
agent_setup
PORT=$("$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
agent_start --metrics "127.0.0.1:$PORT"
eval "$("$SQLPROF" env --socket "$S")"
"$PROGS/shop" indexed >/dev/null || fail "shop under the agent"
$PY3 -c '
import sqlite3
db = sqlite3.connect(":memory:")
db.execute("CREATE TABLE users(id INTEGER PRIMARY KEY)")
for i in range(5):
    db.execute("SELECT id FROM \"main\".\"users\" WHERE id = ?", (i,)).fetchall()' || fail "python under the agent"
unset LD_PRELOAD SQLPROF_SOCK
scraped() {
	curl -s -m 5 -o "$TMP/m.txt" "http://127.0.0.1:$PORT/metrics" &&
		grep -q 'query="SELECT id FROM \\"main\\".\\"users\\" WHERE id = ?"' "$TMP/m.txt" &&
		grep -q '<statement without SQL text>' "$TMP/m.txt"
}
wait_until 60 scraped || fail "after 60 s /metrics has not the queries: $(head -c 2000 "$TMP/m.txt")"
grep '^sqlprof_query_executions_total{' "$TMP/m.txt" >"$TMP/m.exec"
grep -q 'query="SELECT id FROM \\"main\\".\\"users\\" WHERE id = ?",db_system_name="sqlite",db_query_summary="SELECT users"}' "$TMP/m.exec" ||
	fail "the summary of \"main\".\"users\": $(grep users "$TMP/m.exec")"
grep -q 'query="<statement without SQL text>",db_system_name="sqlite",db_query_summary="SQLite internal"}' "$TMP/m.exec" ||
	fail "statements without SQL text: $(grep 'without' "$TMP/m.exec")"
grep 'sqlite_master' "$TMP/m.exec" >"$TMP/m.master" || fail "no schema reload in /metrics"
! grep -v 'db_query_summary="SQLite internal"' "$TMP/m.master" ||
	fail "a schema reload outside the SQLite internal label"
! grep -q 'db_query_summary="SELECT \\"main\\""' "$TMP/m.txt" || fail "a summary is still SELECT \"main\""
echo "ok: SQLite's own work apart in table ($own_n executions), JSON, CSV, the gate and /metrics"
