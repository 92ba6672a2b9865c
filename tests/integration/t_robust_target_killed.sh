#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_robust_target_killed.sh - kill -9 the profiled program mid-run: every
# execution it finished before the kill is in the profile, exactly. The
# records are in rings shared with the collector, so a target that dies
# without any chance to send (no destructor, no shim) loses nothing.
#
# longrun creates $TMP/started after exactly 1000 executions and then
# waits for $TMP/go, which never comes: it is killed there. The profile
# must hold 1000 executions of its statement, the process without a clean
# exit, and sqlprof record must pass the signal death on (exit 137).
. "$(dirname "$0")/lib.sh"
need_prog longrun

TMPDIR=$TMP "$SQLPROF" record -q -o "$TMP/p.db" -- "$PROGS/longrun" 100000 "$TMP/started" "$TMP/go" \
	>"$TMP/rec.out" 2>"$TMP/rec.err" &
coll=$!
wait_started "$TMP/started" "$coll" || fail "longrun never started under sqlprof: $(cat "$TMP/rec.err")"
target=$(pgrep -P "$coll" -x longrun) || fail "cannot find longrun under the collector"
kill -9 "$target" || fail "longrun $target already gone before kill"
wait "$coll"
rc=$?
[ "$rc" -eq 137 ] || fail "sqlprof record exited $rc, expected 137 (the program's SIGKILL): $(cat "$TMP/rec.err")"
res=$(sqlite3 "$TMP/p.db" "SELECT
	(SELECT coalesce(sum(count), 0) FROM queries WHERE fingerprint = 'SELECT ? * ? + ?'),
	(SELECT coalesce(sum(clean_exit), 0) FROM processes), (SELECT count(*) FROM processes),
	(SELECT coalesce(sum(lost), 0) FROM processes)") || fail "cannot read the profile"
IFS='|' read -r count clean nproc lost <<<"$res"
echo "killed after 1000 executions: $count in the profile, clean_exit $clean, lost $lost"
[ "$count" = 1000 ] || fail "$count executions in the profile, expected exactly the 1000 run before the kill"
[ "$nproc" = 1 ] || fail "$nproc processes, expected 1"
[ "$clean" = 0 ] || fail "the killed process is marked as a clean exit"
[ "$lost" = 0 ] || fail "$lost records reported lost"
exit 0
