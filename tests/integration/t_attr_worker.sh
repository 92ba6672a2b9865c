#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_attr_worker.sh - issue 26: a query run by a worker thread for code on
# another thread (aiosqlite's connection thread, npm sqlite3's libuv pool)
# is said to be: its site is the worker's frame, and the report adds a
# note naming the worker's entry (JSON: "worker_thread"). Python with
# tests/fixtures/worker: aioworker (an aiosqlite stand-in, stdlib only,
# installed in a site-packages directory) runs 200 inserts on its
# connection thread -> note "on a worker thread (Connection.run
# (__init__.py:WORKER_RUN))"; 50 queries from the program's own thread
# function (job, app.py:APP_JOB) and 30 on the main thread (app.py:
# APP_MAIN) are at their lines, without the note (before: no note at
# all, the worker's lambda looked like any site). Then natively: an npm
# sqlite3 stand-in (tests/fixtures/worker/pool.c, built into
# node_modules/) runs the program's 100 inserts on its thread -> the note
# names worker (pool.c:POOL_WORKER); the program's main-thread query
# (through the addon's setup, under main) gets none.
. "$(dirname "$0")/lib.sh"
"$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 8))' 2>/dev/null ||
	skip "$PYTHON is older than 3.8 (Python frames are read from 3.8)"
mod=$("$PYTHON" -c 'import _sqlite3; print(_sqlite3.__file__)' 2>/dev/null) || skip "$PYTHON has no _sqlite3"
ldd "$mod" 2>/dev/null | grep -q 'libsqlite3\.so' || skip "$PYTHON's _sqlite3 does not link libsqlite3 dynamically"
FIX=$(cd "$ITDIR/../fixtures/worker" && pwd) || fail "no fixture"
cd "$TMP" || exit 1
mkdir -p venv/lib/site-packages proj && cp -r "$FIX/aioworker" venv/lib/site-packages/ &&
	cp "$FIX/app.py" proj/ || fail "copying the fixture"
run=$(grep -n "# WORKER_RUN$" "$FIX/aioworker/__init__.py" | cut -d: -f1)
job=$(grep -n "# APP_JOB$" "$FIX/app.py" | cut -d: -f1)
main=$(grep -n "# APP_MAIN$" "$FIX/app.py" | cut -d: -f1)
export PYTHONPATH=$TMP/venv/lib/site-packages
"$SQLPROF" record -q --rate 1 -o w.db -- "$PYTHON" proj/app.py >out 2>err || fail "record: $(cat err)"
grep -qx 'rows 200' out || fail "app.py printed $(cat out)"
report_json w.db w.json
expect w.json -q stmt 'INSERT INTO t VALUES (?)' count=200 -q stmt 'SELECT abs(?)' count=50 \
	-q stmt 'SELECT length(?)' count=30
"$PYTHON" - w.json "$run" "$job" "$main" <<'PY' || fail "sites"
import json, sys
d = json.load(open(sys.argv[1]))
run, job, main = (int(x) for x in sys.argv[2:5])
by = {q["fingerprint"]: q["sites"] for q in d["queries"] if q["kind"] == "stmt"}
bad = 0
def check(fp, fn, file, line, worker):
    global bad
    sites = by.get(fp, [])
    got = [(s["function"], s["file"].rsplit("/", 1)[-1], s["line"], s.get("worker_thread")) for s in sites]
    ok = len(got) == 1 and got[0][0] == fn and got[0][1] == file and (line is None or got[0][2] == line)
    w = got[0][3] if got else None
    ok = ok and (w is None if worker is None else
                 (w or "").startswith(worker[0]) and (w or "").endswith(worker[1]))
    print("  %s: %s%s" % (fp, got, "" if ok else "  <- expected %s (%s:%s), worker %s" % (fn, file, line, worker)))
    bad |= not ok
check("INSERT INTO t VALUES (?)", "Connection.execute.<locals>.<lambda>", "__init__.py", None,
      ("Connection.run (", "/site-packages/aioworker/__init__.py:%d)" % run))
check("SELECT abs(?)", "job", "app.py", job, None)
check("SELECT length(?)", "<module>", "app.py", main, None)
sys.exit(bad)
PY
"$SQLPROF" report w.db >rep || fail "report"
grep -A1 -- "-> 200 execs, .* at Connection.execute.<locals>.<lambda> (" rep |
	grep -q "note: on a worker thread (Connection.run (.*__init__.py:$run)) with no frame of the program's own" ||
	fail "no worker note under the inserts: $(cat rep)"
[ "$(grep -c "note: on a worker thread" rep)" -ge 1 ] || fail "no note"
grep -B1 "note: on a worker thread" rep | grep -q "at job (\|at <module> (" && fail "a note under the program's own thread: $(cat rep)"
echo "200 inserts at aioworker's lambda with the note naming Connection.run (__init__.py:$run); job (app.py:$job) and <module> (app.py:$main) without"

# native: an npm sqlite3 stand-in (pool.c, in node_modules) runs the
# program's 100 inserts on its own thread
command -v gcc >/dev/null || skip "gcc not installed (the Python part passed)"
R=node_modules/sqlite3/build/Release
mkdir -p "$R" && gcc -shared -fPIC -g -O0 -o "$R/node_sqlite3.node" "$FIX/pool.c" -lsqlite3 -lpthread &&
	gcc -g -O0 -o host "$FIX/host.c" "$R/node_sqlite3.node" -Wl,-rpath,"\$ORIGIN/$R" || fail "building pool.c and host.c"
step=$(grep -n "/\* POOL_STEP \*/" "$FIX/pool.c" | cut -d: -f1)
wrk=$(grep -n "/\* POOL_WORKER \*/" "$FIX/pool.c" | cut -d: -f1)
"$SQLPROF" record -q --rate 1 -o n.db -- ./host >nout 2>nerr || fail "record host: $(cat nerr)"
grep -qx 'done 100' nout || fail "host printed $(cat nout)"
"$SQLPROF" report n.db >nrep || fail "report n.db"
grep -A1 -- "-> 100 execs, .* at run_one (pool.c:$step)" nrep |
	grep -q "note: on a worker thread (worker (pool.c:$wrk))" || fail "no worker note for the pool's inserts: $(cat nrep)"
[ "$(grep -c "note: on a worker thread" nrep)" = 1 ] || fail "a note on the main thread's query too: $(cat nrep)"
echo "100 inserts at run_one (pool.c:$step) with the note naming worker (pool.c:$wrk); the main thread's query without"
exit 0
