#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_raw_clone.sh - a child made by the raw clone system call runs no fork
# handler, so it starts with the parent's profiler state. It must not be
# harmed: tests/progs/raw_clone.c's child runs 400 executions at --rate 1
# (every one sampled: stack walks, ring writes, the statistics) and exits
# with 7, as without sqlprof; the parent's own executions are all counted.
# The child is a process of its own from its first slow call on (a page
# the kernel empties in it, MADV_WIPEONFORK, tells it): its own statement
# is counted under its pid with its SQL text (before: "<sql text lost>",
# and now and then the parent's text lost too, as both wrote into the
# parent's rings), every total adds up to 600, and at --rate 1 (every
# step a slow call) the split is exact: the parent 200, the child 400.
. "$(dirname "$0")/lib.sh"
need_prog raw_clone

"$PROGS/raw_clone" >"$TMP/plain.out" 2>&1 || fail "raw_clone without sqlprof failed: $(cat "$TMP/plain.out")"
grep -qx "child exited 7" "$TMP/plain.out" || fail "raw_clone without sqlprof: $(cat "$TMP/plain.out")"
for rate in 1 0.01; do
	"$SQLPROF" record -q --rate $rate -o "$TMP/p$rate.db" -- "$PROGS/raw_clone" >"$TMP/rec.out" 2>"$TMP/rec.err" ||
		fail "raw_clone under sqlprof (rate $rate) failed: $(cat "$TMP/rec.out" "$TMP/rec.err")"
	same_file "raw_clone's output at rate $rate" "$TMP/plain.out" "$TMP/rec.out"
	db=$TMP/p$rate.db
	n=$(sqlite3 "$db" "SELECT coalesce(sum(count), 0) FROM queries WHERE fingerprint = 'SELECT ? AS in_parent'")
	own=$(sqlite3 "$db" "SELECT coalesce(sum(count), 0) FROM queries WHERE fingerprint = 'SELECT ? AS in_raw_child'")
	procs=$(sqlite3 "$db" "SELECT count(*) FROM processes")
	split=$(sqlite3 "$db" "SELECT group_concat(executions, ' ') FROM (SELECT executions FROM processes ORDER BY pid)")
	child=$(sqlite3 "$db" "SELECT count(*) FROM processes c JOIN processes p ON c.ppid = p.pid")
	echo "rate $rate: the raw clone child exited 7; in_parent $n, in_raw_child $own; processes $procs ($split)"
	[ "$n" = 400 ] || fail "in_parent counted $n, not 400"
	[ "$own" = 200 ] || fail "in_raw_child counted $own, not 200 (its text lost?)"
	[ "$procs" = 2 ] && [ "$child" = 1 ] || fail "$procs process rows ($child a child of the other): the raw clone child is not a process of its own"
	if [ "$rate" = 1 ]; then
		[ "$split" = "200 400" ] || fail "at rate 1 the parent and the child ran 200 and 400: $split"
	fi
done
exit 0
