#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_fork.sh - a parent runs 100 executions, then forks 3 children that each
# run 100 executions of their own statement: the profile has 4 processes,
# each child's count is exact and the parent's records are not duplicated
# by the children (which inherit its buffers at fork).
. "$(dirname "$0")/lib.sh"
need_prog forker

"$PROGS/forker" >"$TMP/plain.out" || fail "forker without sqlprof failed"
"$SQLPROF" record -q -o "$TMP/p.db" -- "$PROGS/forker" >"$TMP/rec.out" 2>"$TMP/rec.err"
rc=$?
[ "$rc" -eq 0 ] || fail "sqlprof record exited $rc: $(cat "$TMP/rec.err")"
same_file "forker stdout" "$TMP/plain.out" "$TMP/rec.out"

report_json "$TMP/p.db" "$TMP/r.json"
expect "$TMP/r.json" -t lost=0 processes=4 \
	-q stmt 'SELECT ? AS parent_q' count=100 rows=100 \
	-q stmt 'SELECT ? AS child_0' count=100 rows=100 \
	-q stmt 'SELECT ? AS child_1' count=100 rows=100 \
	-q stmt 'SELECT ? AS child_2' count=100 rows=100

# The processes table: 4 distinct pids, the 3 children of the 4th, each
# process with exactly its own 100 executions.
sqlite3 "$TMP/p.db" "SELECT pid, ppid, executions FROM processes ORDER BY pid" >"$TMP/procs" ||
	fail "cannot read the processes table"
"$PYTHON" - "$TMP/procs" <<'EOF_PY' || { cat "$TMP/procs" >&2; exit 1; }
import sys
rows = [tuple(map(int, l.split("|"))) for l in open(sys.argv[1]) if l.strip()]
pids = {r[0] for r in rows}
if len(rows) != 4 or len(pids) != 4:
    sys.exit("FAIL: %d processes (%d pids), expected 4" % (len(rows), len(pids)))
parents = [r for r in rows if r[1] not in pids]
kids = [r for r in rows if r[1] in pids]
if len(parents) != 1 or len(kids) != 3 or any(k[1] != parents[0][0] for k in kids):
    sys.exit("FAIL: expected one parent and its 3 children, got %r" % rows)
if any(r[2] != 100 for r in rows):
    sys.exit("FAIL: executions per process %r, expected 100 each" % [r[2] for r in rows])
EOF_PY
exit 0
