#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_robust_unreach.sh - processes that run SQLite where they cannot reach
# the collector the usual way (tests/progs/robust_unreach.c, 100
# executions per process) are profiled, or at least counted:
#  - clearenv() then fork: the socket path was taken at start-up, so the
#    child connects (before: it vanished, 100 of 200 executions);
#  - a seccomp filter denying socket(), then exec, or fork: the image
#    that cannot connect leaves its totals in a file in the collector's
#    directory; they are in the profile, and record says 1 process could
#    not connect (before: 100 of 200, the forked child a row with 0); an
#    exec of a program that runs no SQLite there is not counted;
#  - a child that drops to uid nobody (as root): it connects before the
#    change and reports as any other (before: 100 of 200);
#  - a grandchild forked after that change cannot connect nor write a
#    file: it is counted in its ancestor's statistics, and record says 1
#    process's executions are missing (before: nothing said).
# Output as without sqlprof in every case.
. "$(dirname "$0")/lib.sh"
need_prog robust_unreach

# MODE EXPECT_PROCS EXPECT_EXECS UNREPORTED MISSING
check() {
	local mode=$1 procs=$2 execs=$3 unrep=$4 missing=$5 res
	"$PROGS/robust_unreach" $mode >"$TMP/plain.out" 2>&1 || fail "$mode: robust_unreach without sqlprof failed"
	"$SQLPROF" record -o "$TMP/$mode.db" -- "$PROGS/robust_unreach" $mode >"$TMP/out" 2>"$TMP/err" ||
		fail "$mode: record failed: $(cat "$TMP/err")"
	same_file "$mode: output" "$TMP/plain.out" "$TMP/out"
	res=$(sqlite3 "$TMP/$mode.db" "SELECT (SELECT count(*) FROM processes),
		(SELECT sum(executions) FROM processes), (SELECT sum(clean_exit) FROM processes),
		(SELECT value FROM meta WHERE key = 'unreported'),
		(SELECT value FROM meta WHERE key = 'unreported_missing'),
		(SELECT sum(count) FROM queries WHERE fingerprint = 'SELECT ?, ?')") ||
		fail "$mode: cannot read the profile"
	IFS='|' read -r np ne nc nu nm nq <<<"$res"
	echo "$mode: $np processes, $ne executions ($nq of the query), $nu could not connect, $nm missing"
	[ "$np" = "$procs" ] || fail "$mode: $np processes, expected $procs"
	[ "$ne" = "$execs" ] && [ "$nq" = "$execs" ] || fail "$mode: $ne executions ($nq of the query), expected $execs"
	[ "$nc" = "$procs" ] || fail "$mode: $nc clean exits of $np processes"
	[ "$nu" = "$unrep" ] || fail "$mode: $nu processes that could not connect, expected $unrep"
	[ "$nm" = "$missing" ] || fail "$mode: $nm processes missing, expected $missing"
	if [ "$unrep" = 0 ]; then
		! grep -q "could not connect" "$TMP/err" || fail "$mode: record warned: $(cat "$TMP/err")"
	else
		grep -q "$unrep process\(es\)\? ran SQLite but could not connect.*; $missing could not" "$TMP/err" ||
			fail "$mode: record did not say so: $(cat "$TMP/err")"
	fi
	# every text is known: none without SQL
	[ "$(sqlite3 "$TMP/$mode.db" "SELECT count(*) FROM statements WHERE sql LIKE 'SELECT ''%'', ?1'")" = \
		"$(grep -c executions "$TMP/plain.out")" ] || fail "$mode: SQL texts missing from the profile"
}

check clearenv 2 200 0 0
check seccomp-exec 1 200 1 0
check seccomp-fork 2 200 1 0
check seccomp-true 1 100 0 0
if [ "$(id -u)" = 0 ] && id nobody >/dev/null 2>&1; then
	check uid 2 200 0 0
	# the grandchild's executions and text are missing; only counted
	"$PROGS/robust_unreach" uid-grandchild >"$TMP/plain.out" 2>&1 || fail "uid-grandchild without sqlprof failed"
	"$SQLPROF" record -o "$TMP/g.db" -- "$PROGS/robust_unreach" uid-grandchild >"$TMP/out" 2>"$TMP/err" ||
		fail "uid-grandchild: record failed: $(cat "$TMP/err")"
	same_file "uid-grandchild: output" "$TMP/plain.out" "$TMP/out"
	res=$(sqlite3 "$TMP/g.db" "SELECT (SELECT sum(executions) FROM processes),
		(SELECT value FROM meta WHERE key = 'unreported'),
		(SELECT value FROM meta WHERE key = 'unreported_missing')")
	echo "uid-grandchild: $res (executions, could not connect, missing)"
	[ "$res" = "100|1|1" ] || fail "uid-grandchild: executions|unreported|missing $res, expected 100|1|1"
	grep -q "1 process ran SQLite but could not connect.*; 1 could not" "$TMP/err" ||
		fail "uid-grandchild: record did not say so: $(cat "$TMP/err")"
else
	not_checked "the uid cases (not root, or no user nobody)"
fi
exit 0
