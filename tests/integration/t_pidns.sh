#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_pidns.sh - issue 23 item 9: processes in another pid namespace are
# recorded under the pid the kernel gives the collector for their
# connection (SO_PEERCRED), and keep the pid they know themselves by
# (processes.ns_pid). `record -- unshare --pid --fork --mount-proc counts`:
# every count exact (before: 0 of 1046, "pid does not match the connected
# peer", and a warning that the program never loaded libsqlite3); forker
# inside the namespace (3 children of pid 1): 4 processes, 100 each; a BYE
# file from pid 1 of the namespace reaches its process (t_agent_pidns: the
# agent). Needs unshare --pid (root, or unprivileged user namespaces):
# skips without.
. "$(dirname "$0")/lib.sh"
need_prog counts
need_prog forker
# exit_quiet (optional): the BYE file case
command -v unshare >/dev/null || skip "no unshare"
UNS=(unshare --pid --fork --mount-proc)
"${UNS[@]}" true 2>/dev/null || {
	UNS=(unshare --user --map-root-user --pid --fork --mount-proc)
	"${UNS[@]}" true 2>/dev/null || skip "cannot make a pid namespace here (unshare --pid)"
}
cd "$TMP" || exit 1

"$PROGS/counts" >plain.out
"$SQLPROF" record -o c.db -- "${UNS[@]}" "$PROGS/counts" >c.out 2>c.err
rc=$?
[ "$rc" = 3 ] || fail "record exited $rc, not counts' 3: $(cat c.err)"
same_file "counts' stdout in a pid namespace" plain.out c.out
grep -q "does not match\|never loaded libsqlite3\|dropped a bad message" c.err && fail "record: $(cat c.err)"
report_json c.db c.json
expect c.json -t lost=0 \
	-q stmt 'SELECT a FROM t WHERE a = ?' count=1000 rows=1000 errors=0 \
	-q stmt 'SELECT count(*) FROM t WHERE b <> ?' count=37 rows=37 errors=0 \
	-q stmt 'INSERT INTO t(a, b) VALUES (?, ?)' count=1 errors=1 \
	-q stmt 'INSERT INTO t(b) VALUES (?)' count=2
row=$(sqlite3 c.db "SELECT pid, ns_pid, clean_exit, executions FROM processes WHERE exe LIKE '%/counts'")
IFS='|' read -r pid ns clean n <<<"$row"
[ "$ns" = 1 ] || fail "counts knew itself as pid 1 in its namespace; ns_pid: $row"
[ "$pid" != 1 ] && [ "$pid" -gt 1 ] || fail "counts' pid is not the one we know it by: $row"
[ "$clean" = 1 ] && [ "$n" = 1046 ] || fail "counts: clean_exit, executions: $row"
echo "counts in a pid namespace: pid $pid (ns_pid $ns), $n executions"

# fork inside the namespace: pid 1 and its children 2, 3, 4 there
"$SQLPROF" record -q -o f.db -- "${UNS[@]}" "$PROGS/forker" >f.out 2>f.err ||
	fail "record forker exited $?: $(cat f.err)"
report_json f.db f.json
expect f.json -t lost=0 \
	-q stmt 'SELECT ? AS parent_q' count=100 rows=100 \
	-q stmt 'SELECT ? AS child_0' count=100 rows=100 \
	-q stmt 'SELECT ? AS child_1' count=100 rows=100 \
	-q stmt 'SELECT ? AS child_2' count=100 rows=100
sqlite3 f.db "SELECT pid, ppid, ns_pid, executions, clean_exit FROM processes WHERE exe LIKE '%/forker' ORDER BY ns_pid" >f.rows
"$PYTHON" - f.rows <<'EOF_PY' || { cat f.rows >&2; exit 1; }
import sys
rows = [tuple(int(x) for x in l.split("|")) for l in open(sys.argv[1]) if l.strip()]
assert len(rows) == 4, rows
assert [r[2] for r in rows] == [1, 2, 3, 4], rows          # ns_pid
assert all(r[3] == 100 and r[4] == 1 for r in rows), rows  # executions, clean exit
parent = rows[0][0]
assert all(r[1] == parent for r in rows[1:]), rows         # ppid as we see it
assert len({r[0] for r in rows}) == 4 and parent not in (1, 2, 3, 4), rows
EOF_PY
echo "forker in a pid namespace: $(tr '\n' ' ' <f.rows)"

# a goodbye left in a BYE file (sends refused by a seccomp filter) names
# the process by its own pid, 1: it reaches the process we know (by its
# statistics memfd), not a new row for pid 1
if [ -x "$PROGS/exit_quiet" ]; then
	"$SQLPROF" record -o b.db -- "${UNS[@]}" "$PROGS/exit_quiet" nosend >b.out 2>b.err ||
		fail "record exit_quiet nosend exited $?: $(cat b.err)"
	rows=$(sqlite3 b.db "SELECT count(*), sum(pid = 1), sum(executions) FROM processes")
	[ "$rows" = "2|0|300" ] || fail "BYE file in a pid namespace: processes, pid-1 rows, executions: $rows"
	echo "BYE file from pid 1 of a namespace: $rows (processes, rows of pid 1, executions)"
fi

exit 0
