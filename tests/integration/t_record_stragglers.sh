#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_record_stragglers.sh - a descendant still running (and connected)
# when record stops waiting for it: the command (a shell) starts longrun
# in the background and exits once longrun is paused after 1000
# executions; record waits its 2 s without data, stops, and must say that
# 1 process was still running and connected, why it stopped waiting, the
# process's pid and program, and that its later queries were not
# collected. The profile holds the 1000. A subshell (forked, never
# connected) still running when record stops is named as well.
. "$(dirname "$0")/lib.sh"
need_prog longrun
cd "$TMP" || exit 1
trap ': >"$TMP/go"; rm -rf "$TMP"' EXIT

timeout "$HANG_S" "$SQLPROF" record -o p.db -- sh -c '
	"$0" 2000 "$1" "$2" >/dev/null &
	echo $! >bg.pid
	while [ ! -e "$1" ]; do sleep 0.02; done' "$PROGS/longrun" "$TMP/started" "$TMP/go" \
	>out 2>err
rc=$?
[ "$rc" = 0 ] || fail "record exited $rc: $(cat err)"
bg=$(cat bg.pid)
kill -0 "$bg" 2>/dev/null || fail "longrun ended too early"
: >go
grep -E "^sqlprof: warning: 1 process still running and connected when recording stopped, 2 s without data from them: pid $bg \(longrun\); its later queries were not collected$" err >/dev/null ||
	fail "no warning about the process still running: $(cat err)"
report_json p.db r.json
expect r.json -q stmt 'SELECT ? * ? + ?' count=1000
echo "ok: $(grep warning err)"
# A descendant that never connected (a subshell: fork without exec, no
# SQLite) still running when record stops: named too, found by record's
# socket in its environment.
rm -f sub.pid
timeout "$HANG_S" "$SQLPROF" record -o s.db -- sh -c '( sleep 4; true ) & echo $! >sub.pid; exit 0' >out 2>err
rc=$?
[ "$rc" = 0 ] || fail "subshell: record exited $rc: $(cat err)"
sub=$(cat sub.pid)
kill -0 "$sub" 2>/dev/null || fail "subshell: it ended too early"
# (its sleep may not have connected yet either, or even exec'd: sh)
grep -E "^sqlprof: warning: [12] more process(es)? of the command still running, not connected: pid ([0-9]+ \([a-z]+\), )*$sub \(sh\)(, [0-9]+ \([a-z]+\))?; any query (it|each) makes from now on is not collected$" err >/dev/null ||
	fail "subshell: no warning naming it: $(cat err)"
echo "ok: $(grep 'not connected' err)"
# -q: no warnings, as documented
rm -f started go
timeout "$HANG_S" "$SQLPROF" record -q -o q.db -- sh -c '
	"$0" 2000 "$1" "$2" >/dev/null &
	while [ ! -e "$1" ]; do sleep 0.02; done' "$PROGS/longrun" "$TMP/started" "$TMP/go" \
	>out 2>err
: >go
[ ! -s err ] || fail "record -q printed: $(cat err)"
exit 0
