#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_handoff.sh - a statement that moves between threads within one
# execution (tests/progs/handoff.c: thread A steps the first row, thread B
# the rest and resets, 2000 times): each execution is added once, with
# its 3 rows, to the query record of the thread that ends it - never to
# another thread's record from the wrong thread.
. "$(dirname "$0")/lib.sh"
need_prog handoff
for rate in 0 1; do
	"$SQLPROF" record -q --rate $rate -o "$TMP/p$rate.db" -- "$PROGS/handoff" 2000 >"$TMP/out" 2>"$TMP/err" ||
		fail "handoff under sqlprof failed: $(cat "$TMP/err")"
	[ "$(cat "$TMP/out")" = "6000 rows" ] || fail "handoff printed $(cat "$TMP/out")"
	report_json "$TMP/p$rate.db" "$TMP/r$rate.json"
	expect "$TMP/r$rate.json" -q stmt "SELECT ? AS handoff UNION ALL SELECT ? UNION ALL SELECT ?" count=2000 rows=6000
	echo "rate $rate: 2000 executions handed between two threads, counted 2000 with 6000 rows"
done
exit 0
