#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_robust_closefds.sh - a program that takes every descriptor above stderr
# away mid-run (tests/progs/robust_closefds.c): close_range(3, ~0U, 0),
# closefrom(3), a loop over /proc/self/fd, and dup2() of its own socket
# over every fd from 3 up. In each case the program behaves exactly as
# without sqlprof (same stdout, stderr, exit code 0, and nothing stray
# written into its own sockets), and the profile either holds all 2 x 2000
# executions or shows the loss (lost > 0 or the process without a clean
# exit): never a silent loss.
. "$(dirname "$0")/lib.sh"
need_prog robust_closefds
N=2000 MS=300 # the program sleeps this long before and after

errors=0

for mode in close_range closefrom procfd dup2; do
	"$PROGS/robust_closefds" $mode $N $MS >"$TMP/$mode.plain.out" 2>"$TMP/$mode.plain.err"
	prc=$?
	[ "$prc" -eq 0 ] || fail "$mode: robust_closefds without sqlprof exited $prc: $(cat "$TMP/$mode.plain.err")"
	"$SQLPROF" record -q -o "$TMP/$mode.db" -- "$PROGS/robust_closefds" $mode $N $MS \
		>"$TMP/$mode.rec.out" 2>"$TMP/$mode.rec.err"
	rc=$?
	if [ "$rc" -ne "$prc" ]; then
		echo "FAIL: $mode: exit $rc under sqlprof, $prc without; stdout: $(cat "$TMP/$mode.rec.out"); stderr: $(cat "$TMP/$mode.rec.err")" >&2
		errors=$((errors + 1))
		continue
	fi
	cmp -s "$TMP/$mode.plain.out" "$TMP/$mode.rec.out" ||
		{ echo "FAIL: $mode: stdout differs: $(cat "$TMP/$mode.rec.out")" >&2; errors=$((errors + 1)); }
	cmp -s "$TMP/$mode.plain.err" "$TMP/$mode.rec.err" ||
		{ echo "FAIL: $mode: stderr differs: $(cat "$TMP/$mode.rec.err")" >&2; errors=$((errors + 1)); }
	res=$(sqlite3 "$TMP/$mode.db" "SELECT
		(SELECT coalesce(sum(count), 0) FROM queries WHERE fingerprint = 'SELECT ? AS before_close'),
		(SELECT coalesce(sum(count), 0) FROM queries WHERE fingerprint = 'SELECT ? AS after_close'),
		(SELECT coalesce(sum(lost), 0) FROM processes),
		(SELECT count(*) FROM processes WHERE clean_exit = 0),
		(SELECT count(*) FROM processes)") || fail "$mode: cannot read the profile"
	IFS='|' read -r before after lost unclean nproc <<<"$res"
	echo "$mode: before_close $before, after_close $after, lost $lost, processes $nproc ($unclean without a clean exit)"
	if { [ "$before" != $N ] || [ "$after" != $N ]; } && [ "$lost" = 0 ] && [ "$unclean" = 0 ]; then
		echo "FAIL: $mode: counted $before + $after of $N + $N executions and the profile shows no loss" >&2
		errors=$((errors + 1))
	fi
	if [ "$before" -gt $N ] || [ "$after" -gt $N ] || [ "$nproc" != 1 ]; then
		echo "FAIL: $mode: counts $before/$after over $N, or $nproc processes instead of 1" >&2
		errors=$((errors + 1))
	fi
done
[ "$errors" -eq 0 ] || fail "$errors problem(s)"
exit 0
