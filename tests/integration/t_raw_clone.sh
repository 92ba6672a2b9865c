#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_raw_clone.sh - a child made by the raw clone system call runs no fork
# handler, so it starts with the parent's profiler state. It must not be
# harmed: tests/progs/raw_clone.c's child runs 400 executions at --rate 1
# (every one sampled: stack walks, ring writes, the statistics) and exits
# with 7, as without sqlprof; the parent's own executions are all counted.
# (The child's are counted too, under the parent: it runs with the
# parent's statistics and rings, shared memory that outlives neither.)
. "$(dirname "$0")/lib.sh"
need_prog raw_clone

"$PROGS/raw_clone" >"$TMP/plain.out" 2>&1 || fail "raw_clone without sqlprof failed: $(cat "$TMP/plain.out")"
grep -qx "child exited 7" "$TMP/plain.out" || fail "raw_clone without sqlprof: $(cat "$TMP/plain.out")"
for rate in 1 0.01; do
	"$SQLPROF" record -q --rate $rate -o "$TMP/p$rate.db" -- "$PROGS/raw_clone" >"$TMP/rec.out" 2>"$TMP/rec.err" ||
		fail "raw_clone under sqlprof (rate $rate) failed: $(cat "$TMP/rec.out" "$TMP/rec.err")"
	same_file "raw_clone's output at rate $rate" "$TMP/plain.out" "$TMP/rec.out"
	n=$(sqlite3 "$TMP/p$rate.db" "SELECT coalesce(sum(count), 0) FROM queries WHERE fingerprint = 'SELECT ? AS in_parent'")
	echo "rate $rate: the raw clone child exited 7; in_parent counted $n"
	[ "$n" -ge 200 ] || fail "only $n executions of the parent's statement counted (it ran 200 itself)"
done
exit 0
