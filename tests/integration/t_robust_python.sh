#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_robust_python.sh - a real Python program under the preload: 4 threads,
# each with its own sqlite3 connection and its own statement (2000
# executions each), then subprocess.run() of a second Python that runs
# 3000 executions of its own statement. All queries of both processes are
# in the profile with exact counts, each Python process under its own pid
# (the child's ppid is the parent), nothing lost, both exited cleanly, and
# the output is as without sqlprof.
. "$(dirname "$0")/lib.sh"
PY=$(command -v python3 || true)
[ -n "$PY" ] || PY=/usr/bin/python3
[ -x "$PY" ] || skip "no python3"
"$PY" -c 'import sqlite3' 2>/dev/null || skip "$PY has no sqlite3 module"
mod=$("$PY" -c 'import _sqlite3; print(_sqlite3.__file__)')
ldd "$mod" 2>/dev/null | grep -q 'libsqlite3\.so' ||
	skip "$mod does not link libsqlite3.so dynamically (SQLite built in)"

cat >"$TMP/child.py" <<'EOF_PY'
import os, sqlite3
con = sqlite3.connect(":memory:")
total = 0
for i in range(3000):
    total += con.execute("SELECT ? AS py_child", (i,)).fetchone()[0]
con.close()
print("child pid %d ppid %d total %d" % (os.getpid(), os.getppid(), total), flush=True)
EOF_PY
cat >"$TMP/parent.py" <<'EOF_PY'
import os, sqlite3, subprocess, sys, threading
sums = [0] * 4
def work(k):
    con = sqlite3.connect(":memory:")
    s = 0
    for i in range(2000):
        s += con.execute("SELECT ? AS py_thread_%d" % k, (i,)).fetchone()[0]
    con.close()
    sums[k] = s
threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print("parent pid %d sums %r" % (os.getpid(), sums), flush=True)
r = subprocess.run([sys.executable, sys.argv[1]])
sys.exit(r.returncode)
EOF_PY

"$PY" "$TMP/parent.py" "$TMP/child.py" >"$TMP/plain.out" 2>"$TMP/plain.err" ||
	fail "python without sqlprof failed: $(cat "$TMP/plain.err")"
"$SQLPROF" record -q -o "$TMP/p.db" -- "$PY" "$TMP/parent.py" "$TMP/child.py" \
	>"$TMP/rec.out" 2>"$TMP/rec.err"
rc=$?
[ "$rc" -eq 0 ] || fail "python under sqlprof exited $rc: $(cat "$TMP/rec.err")"
sed 's/pid [0-9]* ppid [0-9]*/pid P ppid P/; s/pid [0-9]*/pid P/' "$TMP/plain.out" >"$TMP/plain.cmp"
sed 's/pid [0-9]* ppid [0-9]*/pid P ppid P/; s/pid [0-9]*/pid P/' "$TMP/rec.out" >"$TMP/rec.cmp"
same_file "python stdout (pids left out)" "$TMP/plain.cmp" "$TMP/rec.cmp"
same_file "python stderr" "$TMP/plain.err" "$TMP/rec.err"

report_json "$TMP/p.db" "$TMP/r.json"
expect "$TMP/r.json" -t lost=0 \
	-q stmt 'SELECT ? AS py_thread_0' count=2000 errors=0 \
	-q stmt 'SELECT ? AS py_thread_1' count=2000 errors=0 \
	-q stmt 'SELECT ? AS py_thread_2' count=2000 errors=0 \
	-q stmt 'SELECT ? AS py_thread_3' count=2000 errors=0 \
	-q stmt 'SELECT ? AS py_child' count=3000 errors=0

# Both Python processes, under the pids they printed, with their own
# executions (the parent's 8000 and the child's 3000, plus whatever the
# sqlite3 module runs itself), the child's parent being the parent.
parent=$(sed -n 's/^parent pid \([0-9]*\).*/\1/p' "$TMP/rec.out")
read -r child cppid <<<"$(sed -n 's/^child pid \([0-9]*\) ppid \([0-9]*\).*/\1 \2/p' "$TMP/rec.out")"
[ -n "$parent" ] && [ -n "$child" ] || fail "no pids in the output: $(cat "$TMP/rec.out")"
[ "$cppid" = "$parent" ] || fail "the child's ppid $cppid is not the parent $parent"
sqlite3 "$TMP/p.db" "SELECT pid, ppid, executions, lost, clean_exit FROM processes" >"$TMP/procs"
sed 's/^/    process: /' "$TMP/procs"
row() { sqlite3 "$TMP/p.db" "SELECT ppid, executions, lost, clean_exit FROM processes WHERE pid = $1"; }
IFS='|' read -r pp pe pl pc <<<"$(row "$parent")"
IFS='|' read -r cp ce cl cc <<<"$(row "$child")"
[ -n "$pe" ] || fail "the parent (pid $parent) is not in the profile"
[ -n "$ce" ] || fail "the child (pid $child) is not in the profile"
[ "$cp" = "$parent" ] || fail "the child's ppid in the profile is $cp, not $parent"
[ "$pe" -ge 8000 ] && [ "$pe" -lt 8100 ] || fail "the parent has $pe executions, expected 8000 (+ a few of the module's own)"
[ "$ce" -ge 3000 ] && [ "$ce" -lt 3100 ] || fail "the child has $ce executions, expected 3000 (+ a few of the module's own)"
[ "$pl$cl" = 00 ] && [ "$pc$cc" = 11 ] || fail "lost $pl/$cl, clean_exit $pc/$cc for parent/child"
exit 0
