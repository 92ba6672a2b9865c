#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_robust_abort.sh - a program that abort()s after queries
# (tests/progs/robust_abort.c): 8 batches of 1000 executions with pauses of
# 300 ms, then one more batch and abort() right after it. Records live in
# rings shared with the collector, so nothing written before abort() is
# lost: the profile holds exactly all 9000 executions, the process shows no
# clean exit, and the program's stdout and exit status (134) are as without
# sqlprof. A second run: one batch, a 2.1 s pause, one batch, abort().
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
	echo "$name: $count executions in the profile of $(((b + 1) * per)) run before abort(); clean_exit $clean"
	[ "$count" -eq $(((b + 1) * per)) ] ||
		fail "$name: $count executions in the profile, expected all $(((b + 1) * per)) run before abort()"
	[ "$nproc" = 1 ] || fail "$name: $nproc processes, expected 1"
	[ "$clean" = 0 ] || fail "$name: the aborted process is marked as a clean exit"
}

run batches 8 1000 300
run pause 1 1000 2100
exit 0
