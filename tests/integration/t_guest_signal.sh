#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_guest_signal.sh - issue 23 item 7: sqlite3_step from a SIGALRM handler
# on the thread it interrupts (tests/progs/sigstep: a setitimer every 50 us,
# the handler steps a statement of its own connection) at --rate 1 and at
# the default rate: no ring is corrupted (before: "record payload overruns
# its length", "bad record length"), and the counts are exact: the main
# loop's statement has its N, and the handler's statement has the
# program's own count of the handler's executions, those that interrupted
# the profiler's own work counted as unattributed.
. "$(dirname "$0")/lib.sh"
need_prog sigstep
N=20000

"$PROGS/sigstep" "$N" 50 >"$TMP/plain.out" 2>"$TMP/plain.err" ||
	fail "sigstep without sqlprof exited $?: $(cat "$TMP/plain.err")"
for rate in 1 default; do
	args=(-q -o "$TMP/p.db")
	[ "$rate" = default ] || args+=(--rate "$rate")
	"$SQLPROF" record "${args[@]}" -- "$PROGS/sigstep" "$N" 50 >"$TMP/rec.out" 2>"$TMP/rec.err" ||
		fail "rate $rate: sigstep under record exited $?: $(cat "$TMP/rec.err")"
	same_file "rate $rate: sigstep's stdout" "$TMP/plain.out" "$TMP/rec.out"
	if grep -Ei "stopped reading|bad record|overruns|corrupt" "$TMP/rec.err"; then
		fail "rate $rate: a ring was misread"
	fi
	# main H handler K total T during_step D
	read -r _ main _ handler _ _ _ during < <(grep '^main ' "$TMP/rec.err") ||
		fail "rate $rate: no counts from sigstep: $(cat "$TMP/rec.err")"
	[ "${during:-0}" -gt 0 ] || skip "rate $rate: no handler ran inside a step (timer too coarse here?)"
	n=$(sqlite3 "$TMP/p.db" "SELECT count FROM queries WHERE sql = 'SELECT count(*) FROM t WHERE a > ?'")
	[ "$n" = "$N" ] || fail "rate $rate: the main loop's query counted ${n:-0} times, expected $N"
	h=$(sqlite3 "$TMP/p.db" "SELECT count FROM queries WHERE sql = 'SELECT ?1 + 1'")
	u=$(sqlite3 "$TMP/p.db" "SELECT coalesce(sum(count), 0) FROM queries WHERE sql LIKE '<executions with no room%'")
	[ $((h + u)) = "$handler" ] ||
		fail "rate $rate: the handler ran $handler executions, the profile has $h under its query and $u unattributed"
	n=$(sqlite3 "$TMP/p.db" "SELECT count FROM queries WHERE sql LIKE 'SELECT % + count(*) FROM t'")
	[ "$n" = 10 ] || fail "rate $rate: the ten other texts counted ${n:-0} times, expected 10"
	echo "rate $rate: main $main, handler $handler = $h + $u unattributed, $during inside a step"
done
exit 0
