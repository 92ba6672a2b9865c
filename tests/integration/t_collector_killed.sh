#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_collector_killed.sh - kill -9 the collector (sqlprof record, the parent)
# while the profiled program is mid-run: the program must finish with the
# same stdout and exit code as without the preload - no SIGPIPE, no hang.
#
# longrun writes $TMP/started after its first 1000 executions and then waits
# for $TMP/go, so the collector certainly dies while the program runs. Its
# output goes to files (the collector's death closes nothing of its stdio).
. "$(dirname "$0")/lib.sh"
need_prog longrun
N=1000000

"$PROGS/longrun" $N >"$TMP/plain.out" 2>"$TMP/plain.err"
plain_rc=$?
[ "$plain_rc" -eq 5 ] || fail "longrun without sqlprof exited $plain_rc, expected 5"

# The target writes its own exit status; 'kill -l' names a signal death.
cat >"$TMP/run.sh" <<EOS
"$PROGS/longrun" $N "$TMP/started" "$TMP/go" >"$TMP/rec.out" 2>"$TMP/rec.err"
echo \$? >"$TMP/rc.tmp" && mv "$TMP/rc.tmp" "$TMP/rc"
EOS
TMPDIR=$TMP "$SQLPROF" record -q -o "$TMP/p.db" -- sh "$TMP/run.sh" >"$TMP/collector.out" 2>"$TMP/collector.err" &
coll=$!

wait_started "$TMP/started" "$coll"
if [ ! -e "$TMP/started" ]; then
	kill -9 "$coll" 2>/dev/null
	touch "$TMP/go"
	fail "longrun never started under sqlprof: $(cat "$TMP/collector.err" "$TMP/rec.err" 2>/dev/null)"
fi
[ ! -e "$TMP/rc" ] || fail "longrun finished before the collector was killed"
kill -9 "$coll" || fail "collector $coll already gone before kill"
wait "$coll" 2>/dev/null
coll_rc=$?
[ "$coll_rc" -eq 137 ] || fail "collector exited $coll_rc, expected 137 (SIGKILL)"
touch "$TMP/go"

# The target is now orphaned; wait for it to write its status.
for _ in $(seq 1 2000); do
	[ -e "$TMP/rc" ] && break
	sleep 0.02
done
[ -e "$TMP/rc" ] || fail "longrun did not finish within 40 s after the collector died (hang?)"
rc=$(cat "$TMP/rc")
[ "$rc" -eq 5 ] || fail "longrun exited $rc after the collector died, expected 5 (141 = SIGPIPE); stderr: $(cat "$TMP/rec.err")"
same_file "longrun stdout" "$TMP/plain.out" "$TMP/rec.out"
same_file "longrun stderr" "$TMP/plain.err" "$TMP/rec.err"
exit 0
