#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_robust_abort.sh - a program that abort()s after ~2.5 s of queries
# (tests/progs/robust_abort.c): 8 batches of 1000 executions, each followed
# by a pause of 3 flush periods (SQLPROF_FLUSH_MS=100), then one more batch
# and abort(). Every batch before the last pause has been through a
# periodic flush, so the profile holds at least 8000 executions (at most
# 9000), the process shows no clean exit, and the program's stdout and
# exit status (134) are as without sqlprof. A second run checks the same
# with the default 1 s flush period (one batch, a 2.1 s pause).
. "$(dirname "$0")/lib.sh"
need_prog robust_abort
ulimit -c 0 # no core files from the aborts

# run NAME BATCHES PER PAUSE_MS: record robust_abort and check the profile.
run() {
	local name=$1 b=$2 per=$3 ms=$4 prc rc res count clean nproc
	"$PROGS/robust_abort" "$b" "$per" "$ms" >"$TMP/$name.plain.out" 2>"$TMP/$name.plain.err"
	prc=$?
	[ "$prc" -eq 134 ] || fail "$name: robust_abort without sqlprof exited $prc, expected 134"
	"$SQLPROF" record -q -o "$TMP/$name.db" -- "$PROGS/robust_abort" "$b" "$per" "$ms" \
		>"$TMP/$name.rec.out" 2>"$TMP/$name.rec.err"
	rc=$?
	[ "$rc" -eq 134 ] || fail "$name: sqlprof record exited $rc, expected 134 (the program's abort): $(cat "$TMP/$name.rec.err")"
	same_file "$name: stdout" "$TMP/$name.plain.out" "$TMP/$name.rec.out"
	same_file "$name: stderr" "$TMP/$name.plain.err" "$TMP/$name.rec.err"
	res=$(sqlite3 "$TMP/$name.db" "SELECT
		(SELECT coalesce(sum(count), 0) FROM queries WHERE fingerprint = 'SELECT ? AS abort_q'),
		(SELECT coalesce(sum(clean_exit), 0) FROM processes), (SELECT count(*) FROM processes)") ||
		fail "$name: cannot read the profile"
	IFS='|' read -r count clean nproc <<<"$res"
	echo "$name: $count executions in the profile of $(((b + 1) * per)) run, $((b * per)) before the last flush; clean_exit $clean"
	[ "$count" -ge $((b * per)) ] ||
		fail "$name: only $count executions in the profile, expected at least the $((b * per)) flushed before abort()"
	[ "$count" -le $(((b + 1) * per)) ] || fail "$name: $count executions, more than ran"
	[ "$nproc" = 1 ] || fail "$name: $nproc processes, expected 1"
	[ "$clean" = 0 ] || fail "$name: the aborted process is marked as a clean exit"
}

SQLPROF_FLUSH_MS=100 run flush100 8 1000 300
run flush1000 1 1000 2100
exit 0
