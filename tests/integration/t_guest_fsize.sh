#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_guest_fsize.sh - issue 23 item 4: RLIMIT_FSIZE never makes the preload
# raise SIGXFSZ. Under `ulimit -f 100000` (the 512 MiB statistics memfd was
# sized past it before main: exit 153, and record blamed the environment)
# and in a worker that lowers its own limit to 64 KiB before its queries,
# with 4 threads at once needing rings (a ring's memfd is 128 KiB): exit
# status and output as without sqlprof, counts exact, and record says what
# was made smaller or lost.
. "$(dirname "$0")/lib.sh"
need_prog fsize

"$PROGS/fsize" 100 >"$TMP/plain.out" 2>&1 || fail "fsize without sqlprof: $(cat "$TMP/plain.out")"
(
	ulimit -f 100000
	"$SQLPROF" record -o "$TMP/u.db" -- "$PROGS/fsize" 100 >"$TMP/u.out" 2>"$TMP/u.err"
) || fail "fsize under ulimit -f 100000 and record exited $?: $(cat "$TMP/u.err")"
same_file "fsize's output under ulimit -f" "$TMP/plain.out" "$TMP/u.out"
grep -q "file size limit" "$TMP/u.err" || fail "ulimit -f: record did not say the statistics were made smaller: $(cat "$TMP/u.err")"
grep -qi "LD_PRELOAD" "$TMP/u.err" && fail "ulimit -f: record blames the environment: $(cat "$TMP/u.err")"
n=$(sqlite3 "$TMP/u.db" "SELECT count FROM queries WHERE sql = 'INSERT INTO t(b) VALUES (?1)'")
[ "$n" = 200 ] || fail "ulimit -f: the INSERT counted ${n:-0} times, expected 200"

"$PROGS/fsize" 100 65536 4 >"$TMP/plain4.out" 2>&1 || fail "fsize 100 65536 4 without sqlprof: $(cat "$TMP/plain4.out")"
for rate in 1 0.01; do
	"$SQLPROF" record --rate "$rate" -o "$TMP/s.db" -- "$PROGS/fsize" 100 65536 4 >"$TMP/s.out" 2>"$TMP/s.err" ||
		fail "rate $rate: fsize limiting itself to 64 KiB exited $?: $(cat "$TMP/s.err")"
	same_file "rate $rate: fsize's output (self-limited)" "$TMP/plain4.out" "$TMP/s.out"
	n=$(sqlite3 "$TMP/s.db" "SELECT count FROM queries WHERE sql = 'INSERT INTO t(b) VALUES (?1)'")
	[ "$n" = 500 ] || fail "rate $rate: self-limited: the INSERT counted ${n:-0} times, expected 500"
	n=$(sqlite3 "$TMP/s.db" "SELECT count FROM queries WHERE sql = 'SELECT count(*) FROM t WHERE b < ?1'")
	[ "$n" = 500 ] || fail "rate $rate: self-limited: the SELECT counted ${n:-0} times, expected 500"
	grep -q "file size limit" "$TMP/s.err" ||
		fail "rate $rate: self-limited: record did not say threads had no ring: $(cat "$TMP/s.err")"
done
exit 0
