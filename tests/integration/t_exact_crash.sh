#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_exact_crash.sh - a program that dies after N executions leaves exactly
# N in the profile: killed with SIGKILL while waiting, crashed by a
# segmentation fault, or abort()ed (tests/progs/exact_crash.c). The totals
# are in shared statistics the collector reads after the process is gone;
# an execution still in progress at the death is not one of them. sqlprof
# record passes the signal death on (128 + signal).
. "$(dirname "$0")/lib.sh"
need_prog exact_crash
N=1234
ulimit -c 0 # no core files

check() { # MODE EXPECTED_RC
	local count clean
	res=$(sqlite3 "$TMP/$1.db" "SELECT
		(SELECT coalesce(sum(count), 0) FROM queries WHERE fingerprint = 'SELECT ? AS exact_crash'),
		(SELECT coalesce(sum(clean_exit), 0) FROM processes)") || fail "$1: cannot read the profile"
	IFS='|' read -r count clean <<<"$res"
	echo "$1 after $N executions: $count in the profile, clean_exit $clean, record exited $2"
	[ "$count" = $N ] || fail "$1: $count executions in the profile, expected exactly $N"
	[ "$clean" = 0 ] || fail "$1: the dead process is marked as a clean exit"
}

for mode in segv abort; do
	# under make check SANITIZE=address the program must die of the
	# signal, not of ASan's report (exit 1)
	ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}handle_segv=0:handle_abort=0 \
		"$SQLPROF" record -q -o "$TMP/$mode.db" -- "$PROGS/exact_crash" $mode $N >/dev/null 2>"$TMP/$mode.err"
	rc=$?
	want=$([ $mode = segv ] && echo 139 || echo 134)
	[ "$rc" = "$want" ] || fail "$mode: sqlprof record exited $rc, expected $want: $(cat "$TMP/$mode.err")"
	check $mode $rc
done

TMPDIR=$TMP "$SQLPROF" record -q -o "$TMP/kill.db" -- "$PROGS/exact_crash" wait $N "$TMP/ready" \
	>/dev/null 2>"$TMP/kill.err" &
coll=$!
wait_started "$TMP/ready" "$coll" || fail "exact_crash never got ready: $(cat "$TMP/kill.err")"
target=$(pgrep -P "$coll" -x exact_crash) || fail "cannot find exact_crash under the collector"
kill -9 "$target"
wait "$coll"
rc=$?
[ "$rc" = 137 ] || fail "kill: sqlprof record exited $rc, expected 137: $(cat "$TMP/kill.err")"
check kill $rc
exit 0
