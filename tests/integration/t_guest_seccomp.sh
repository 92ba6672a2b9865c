#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_guest_seccomp.sh - issue 23 item 6: a program that confines itself with
# a seccomp allowlist after its first queries (tests/progs/seclate: what it
# used so far and what glibc needs for threads; no memfd_create,
# ftruncate, fcntl, prlimit64, openat, sched_getaffinity) runs queries in 3
# new threads: not killed (SIGSYS: exit 159 before, by the preload's
# sched_getaffinity and memfd_create), output as without sqlprof, counts
# exact. SQLPROF_PLANS=0: plan capture's allocations through the program's
# SQLite allocator make glibc's malloc read /proc/sys/vm/overcommit_memory
# in the new threads (openat; issue 23 item 8 moves that work); drop it
# when plan capture no longer allocates there.
. "$(dirname "$0")/lib.sh"
need_prog seclate

"$PROGS/seclate" 3 100 >"$TMP/plain.out" 2>"$TMP/plain.err"
rc=$?
[ "$rc" = 2 ] && skip "no seccomp filter here: $(cat "$TMP/plain.err")"
[ "$rc" = 0 ] || fail "seclate without sqlprof exited $rc: $(cat "$TMP/plain.err")"
for rate in 1 0.01; do
	SQLPROF_PLANS=0 "$SQLPROF" record -q --rate "$rate" -o "$TMP/p.db" -- "$PROGS/seclate" 3 100 \
		>"$TMP/rec.out" 2>"$TMP/rec.err" ||
		fail "rate $rate: seclate under record exited $?: $(cat "$TMP/rec.err")"
	same_file "rate $rate: seclate's output" "$TMP/plain.out" "$TMP/rec.out"
	n=$(sqlite3 "$TMP/p.db" "SELECT count FROM queries WHERE sql = 'INSERT INTO t(b) VALUES (?1)'")
	[ "$n" = 400 ] || fail "rate $rate: the INSERT counted ${n:-0} times, expected 400 (main and 3 threads)"
done
exit 0
