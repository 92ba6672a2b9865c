#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_guest_fit.sh - issue 23 item 3: the preload fits in any process. Static
# TLS at most 1 KiB and no preload frame above 2 KiB but the listed ones
# (scripts/fit-check.sh); threads with 16 and 24 KiB stacks start under the
# preload (EINVAL with 20 KiB of static TLS); a program started with an
# audit library (LD_AUDIT, glibc's sotruss-lib.so) starts and is profiled
# ("cannot allocate memory in static TLS block" before); a thread with a
# 32 KiB stack runs its queries under record (SIGSEGV before).
. "$(dirname "$0")/lib.sh"
need_prog tinystack
need_prog trivial

"$ITDIR/../../scripts/fit-check.sh" "$BUILD" >"$TMP/fit.out" 2>&1 ||
	fail "scripts/fit-check.sh: $(cat "$TMP/fit.out")"

# small stacks, no SQLite: preloaded as `sqlprof env` does, and under record
"$PROGS/tinystack" threads >"$TMP/plain.out" 2>&1 || fail "tinystack threads without sqlprof: $(cat "$TMP/plain.out")"
LD_PRELOAD=$BUILD/lib/libsqlprof.so "$PROGS/tinystack" threads >"$TMP/pre.out" 2>&1 ||
	fail "tinystack threads with LD_PRELOAD=libsqlprof.so exited $?: $(cat "$TMP/pre.out")"
same_file "tinystack threads output with LD_PRELOAD" "$TMP/plain.out" "$TMP/pre.out"
"$SQLPROF" record -q -o "$TMP/t.db" -- "$PROGS/tinystack" threads >"$TMP/rec.out" 2>"$TMP/rec.err" ||
	fail "tinystack threads under record exited $?: $(cat "$TMP/rec.out" "$TMP/rec.err")"
same_file "tinystack threads output under record" "$TMP/plain.out" "$TMP/rec.out"

# a 32 KiB thread running queries
"$PROGS/tinystack" query 300 >"$TMP/q.plain" 2>&1 || fail "tinystack query without sqlprof: $(cat "$TMP/q.plain")"
for rate in 1 0.01; do
	"$SQLPROF" record -q --rate "$rate" -o "$TMP/q.db" -- "$PROGS/tinystack" query 300 >"$TMP/q.out" 2>"$TMP/q.err" ||
		fail "tinystack query 300 under record --rate $rate exited $?: $(cat "$TMP/q.err")"
	same_file "tinystack query output (rate $rate)" "$TMP/q.plain" "$TMP/q.out"
	n=$(sqlite3 "$TMP/q.db" "SELECT count FROM queries WHERE sql = 'INSERT INTO t(b) VALUES (?1)'")
	[ "$n" = 300 ] || fail "rate $rate: the 32 KiB thread's INSERT counted ${n:-0} times, expected 300"
	n=$(sqlite3 "$TMP/q.db" "SELECT count FROM queries WHERE sql = 'SELECT count(*) FROM t WHERE b >= ?1'")
	[ "$n" = 300 ] || fail "rate $rate: the 32 KiB thread's SELECT counted ${n:-0} times, expected 300"
done

# an audit library: the program starts and is profiled
audit=
for f in /usr/lib/x86_64-linux-gnu/audit/sotruss-lib.so /usr/lib64/audit/sotruss-lib.so /usr/lib/audit/sotruss-lib.so; do
	[ -f "$f" ] && audit=$f && break
done
[ -n "$audit" ] || skip "no sotruss-lib.so (glibc's audit library) here: the LD_AUDIT case was not run"
LD_AUDIT=$audit "$SQLPROF" record -q -o "$TMP/a.db" -- "$PROGS/trivial" 200 >"$TMP/a.out" 2>"$TMP/a.err" ||
	fail "trivial under LD_AUDIT=$audit and record exited $?: $(grep -v ' -> ' "$TMP/a.err" | head -5)"
grep -q "static TLS" "$TMP/a.err" && fail "LD_AUDIT: $(grep "static TLS" "$TMP/a.err" | head -2)"
n=$(sqlite3 "$TMP/a.db" "SELECT count FROM queries WHERE sql = 'SELECT ?1+1'")
[ "$n" = 200 ] || fail "LD_AUDIT: trivial's query counted ${n:-0} times, expected 200"
exit 0
