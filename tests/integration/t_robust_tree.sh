#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_robust_tree.sh - a tree of 20 processes made by fork and by fork + exec
# of the same program (tests/progs/robust_tree.c): every process is in the
# profile under its own pid with its parent's pid, its own exact count
# (100 + its node id), a clean exit and nothing lost; the fingerprint's
# total is the sum; the program's output (less the pids) and exit code are
# as without sqlprof.
. "$(dirname "$0")/lib.sh"
need_prog robust_tree
N=20

"$PROGS/robust_tree" $N >"$TMP/plain.out" || fail "robust_tree without sqlprof failed"
"$SQLPROF" record -q -o "$TMP/p.db" -- "$PROGS/robust_tree" $N >"$TMP/rec.out" 2>"$TMP/rec.err"
rc=$?
[ "$rc" -eq 0 ] || fail "sqlprof record exited $rc: $(cat "$TMP/rec.err")"
[ ! -s "$TMP/rec.err" ] || fail "unexpected stderr: $(cat "$TMP/rec.err")"
# Lines are "node ID pid PID ppid PPID sum S": compare all but the pids.
awk '{print $1, $2, $7, $8}' "$TMP/plain.out" | sort >"$TMP/plain.cmp"
awk '{print $1, $2, $7, $8}' "$TMP/rec.out" | sort >"$TMP/rec.cmp"
same_file "robust_tree output (pids left out)" "$TMP/plain.cmp" "$TMP/rec.cmp"

sqlite3 "$TMP/p.db" "SELECT pid, ppid, executions, lost, clean_exit, bad_messages FROM processes" \
	>"$TMP/procs" || fail "cannot read the processes table"
total=$(sqlite3 "$TMP/p.db" "SELECT coalesce(sum(count), 0) FROM queries WHERE fingerprint = 'SELECT ? AS tree_q'")
"$PYTHON" - "$TMP/rec.out" "$TMP/procs" "$total" $N <<'EOF_PY' || { sed 's/^/    /' "$TMP/procs" >&2; exit 1; }
import sys
out, procs, total, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
nodes = {}
for l in open(out):
    f = l.split()
    nodes[int(f[3])] = (int(f[1]), int(f[5]))  # pid -> (node id, ppid)
rows = {}
for l in open(procs):
    pid, ppid, execs, lost, clean, bad = map(int, l.strip().split("|"))
    rows[pid] = (ppid, execs, lost, clean, bad)
bad = []
if len(nodes) != n:
    bad.append("the program printed %d nodes, expected %d" % (len(nodes), n))
if set(rows) != set(nodes):
    bad.append("pids in the profile %s != pids of the tree %s (missing %s, extra %s)"
               % (len(rows), len(nodes), sorted(set(nodes) - set(rows)), sorted(set(rows) - set(nodes))))
for pid, (nid, ppid) in sorted(nodes.items(), key=lambda kv: kv[1]):
    if pid not in rows:
        continue
    rppid, execs, lost, clean, badm = rows[pid]
    if rppid != ppid:
        bad.append("node %d (pid %d): ppid %d in the profile, %d really" % (nid, pid, rppid, ppid))
    if execs != 100 + nid:
        bad.append("node %d (pid %d): %d executions, expected %d" % (nid, pid, execs, 100 + nid))
    if lost or not clean or badm:
        bad.append("node %d (pid %d): lost %d, clean_exit %d, bad_messages %d" % (nid, pid, lost, clean, badm))
want = sum(100 + i for i in range(n))
if total != want:
    bad.append("'SELECT ? AS tree_q' counted %d, expected %d" % (total, want))
for b in bad:
    print("FAIL: " + b, file=sys.stderr)
print("%d processes, %d executions" % (len(rows), total))
sys.exit(1 if bad else 0)
EOF_PY
exit 0
