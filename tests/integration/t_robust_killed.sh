#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_robust_killed.sh - kill -9 the collector while 8 threads are half-way
# through 50,000 executions each at --rate 1 (every thread's ring in use):
# the target finishes with the same stdout, stderr and exit code as without
# sqlprof - no SIGPIPE, no hang, no message of ours. The threaded variant of
# t_collector_killed.sh.
. "$(dirname "$0")/lib.sh"
need_prog robust_threads
T=8 N=50000

"$PROGS/robust_threads" $T $N >"$TMP/plain.out" 2>"$TMP/plain.err"
[ $? -eq 0 ] || fail "robust_threads without sqlprof failed"
cat >"$TMP/run.sh" <<EOS
"$PROGS/robust_threads" $T $N "$TMP/started" "$TMP/go" >"$TMP/rec.out" 2>"$TMP/rec.err"
echo \$? >"$TMP/rc.tmp" && mv "$TMP/rc.tmp" "$TMP/rc"
EOS
TMPDIR=$TMP "$SQLPROF" record -q --rate 1 -o "$TMP/p.db" -- sh "$TMP/run.sh" \
	>"$TMP/coll.out" 2>"$TMP/coll.err" &
coll=$!
wait_started "$TMP/started" "$coll"
if [ ! -e "$TMP/started" ]; then
	kill -9 "$coll" 2>/dev/null
	touch "$TMP/go"
	fail "robust_threads never got half-way under sqlprof: $(cat "$TMP/coll.err" "$TMP/rec.err" 2>/dev/null)"
fi
[ ! -e "$TMP/rc" ] || fail "robust_threads finished before the collector was killed"
kill -9 "$coll" || fail "collector $coll already gone before kill"
wait "$coll" 2>/dev/null
[ $? -eq 137 ] || fail "collector did not die of SIGKILL"
touch "$TMP/go"
for _ in $(seq 1 2000); do
	[ -e "$TMP/rc" ] && break
	sleep 0.02
done
[ -e "$TMP/rc" ] || fail "robust_threads did not finish within 40 s after the collector died (hang?)"
rc=$(cat "$TMP/rc")
[ "$rc" -eq 0 ] || fail "robust_threads exited $rc after the collector died, expected 0 (141 = SIGPIPE); stderr: $(cat "$TMP/rec.err")"
same_file "robust_threads stdout" "$TMP/plain.out" "$TMP/rec.out"
same_file "robust_threads stderr" "$TMP/plain.err" "$TMP/rec.err"
exit 0
