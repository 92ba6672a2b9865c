#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_nested_steps.sh - an execution that runs inside another's step (an
# SQL function that steps a statement of its own, a sqlite3_exec callback
# that does) is counted nested, with its time credited to its parent as
# nested time, even when its statement is the one sqlite3_step ran
# inline just before: sqlite3_step does not test whether it is inside
# another call (tests/progs/nested_steps.c; preload/hot.c, fast_stmt).
. "$(dirname "$0")/lib.sh"
need_prog nested_steps
"$PROGS/nested_steps" >"$TMP/plain.out" 2>&1 || fail "nested_steps alone failed: $(cat "$TMP/plain.out")"
read -r _ n _ nn _ nt _ <"$TMP/plain.out"
[ "$n" = 2350 ] && [ "$nn" = 2250 ] && [ "$nt" = 100 ] || fail "nested_steps printed $(cat "$TMP/plain.out")"
for rate in 0 0.01 1; do
	"$SQLPROF" record -q --rate $rate -o "$TMP/p$rate.db" -- "$PROGS/nested_steps" >"$TMP/out" 2>"$TMP/err" ||
		fail "record --rate $rate failed: $(cat "$TMP/err")"
	same_file "nested_steps' output at rate $rate" "$TMP/plain.out" "$TMP/out"
	got=$(sqlite3 "$TMP/p$rate.db" "SELECT count || ' ' || nested FROM queries
		WHERE kind = 'stmt' AND fingerprint LIKE '%inner_step%'")
	[ "$got" = "$n $nn" ] || fail "rate $rate: the inner statement: count nested '$got', not '$n $nn'"
	got=$(sqlite3 "$TMP/p$rate.db" "SELECT count || ' ' || nested || ' ' || (self_ns < total_ns) FROM queries
		WHERE kind = 'stmt' AND fingerprint LIKE '%outer_step%'")
	[ "$got" = "50 0 1" ] || fail "rate $rate: the outer query: count nested self<total '$got', not '50 0 1'"
	echo "rate $rate: $n inner executions, $nn of them nested in a step or an exec call; 50 outer, none nested"
done
exit 0
