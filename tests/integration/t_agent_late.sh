#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_agent_late.sh - issue 15, the preload waits for an agent: a service
# started with `sqlprof env`'s environment while no agent listens (its
# socket's directory does not even exist yet) runs 100 queries/s for 4 s;
# the agent starts 1.5 s later. The service connects by itself (while it
# runs, or at its exit at the latest: it waits to exit until the agent
# listens, so that a loaded machine, where the agent's start can take
# longer than the service's 4 s, tests the same thing): at the end the
# profile holds every execution it ran, exactly, under its SQL
# text (the text it could not send while no agent listened is sent when it
# connects, not "<sql text lost>"), as one process with a clean exit. A
# second service started and ended before any agent listens leaves nothing
# (no row, no file in the agent's directory) and exits as without sqlprof.
# A service at SQLPROF_RATE=0, which takes no slow path after its start,
# whose agent is SIGKILLed and started again while it runs, hands its
# totals to the new agent as it exits (it waits to exit until the new one
# listens): exact (before: what the last snapshot had).
. "$(dirname "$0")/lib.sh"
agent_setup

eval "$("$SQLPROF" env --socket "$S")"
PRE=$LD_PRELOAD SOCK=$SQLPROF_SOCK
unset LD_PRELOAD SQLPROF_SOCK
LD_PRELOAD=$PRE SQLPROF_SOCK=$SOCK "$PROGS/service" 100 300 "$TMP/count0" ||
	fail "a service with no agent exited $?"
[ "$(cat "$TMP/count0")" -gt 0 ] || fail "the service with no agent ran nothing"
LD_PRELOAD=$PRE SQLPROF_SOCK=$SOCK SQLPROF_RATE=0.1 "$PROGS/service" 100 4000 "$TMP/count1" "$TMP/stop1" &
SV=$!
sleep 1.5
agent_start
touch "$TMP/stop1"
wait "$SV" || fail "the service exited $?"
n=$(cat "$TMP/count1")
kill -TERM "$AG"
wait "$AG" || fail "the agent exited $?: $(cat "$TMP/agent.err")"
AG=
got=$(sqlite3 "$P" "SELECT count FROM queries WHERE sql = 'SELECT ?1 + 1'")
echo "service ran $n, profile: '$got'"
[ "$got" = "$n" ] || fail "the profile counts '$got' under its text, the service ran $n: $(sqlite3 "$P" 'SELECT sql, count FROM queries')"
[ "$(sqlite3 "$P" "SELECT count(*) || ' ' || sum(clean_exit) || ' ' || min(pid) FROM processes")" = "1 1 $SV" ] ||
	fail "process rows: $(sqlite3 "$P" 'SELECT * FROM processes')"
left=$(ls "$TMP/run/s" | grep -v '^sock$')
[ -z "$left" ] || fail "files left in the agent's directory: $left"

rm -f "$P"
agent_start
LD_PRELOAD=$PRE SQLPROF_SOCK=$SOCK SQLPROF_RATE=0 "$PROGS/service" 100 3000 "$TMP/count2" "$TMP/stop2" &
SV=$!
sleep 1.6
kill -9 "$AG"
wait "$AG" 2>/dev/null
agent_start
touch "$TMP/stop2"
wait "$SV" || fail "the rate-0 service exited $?"
n=$(cat "$TMP/count2")
kill -TERM "$AG"
wait "$AG" || fail "the agent exited $?: $(cat "$TMP/agent.err")"
AG=
got=$(sqlite3 "$P" "SELECT count FROM queries WHERE sql = 'SELECT ?1 + 1'")
echo "rate-0 service ran $n, profile: '$got'"
[ "$got" = "$n" ] || fail "rate 0 across a restart: the profile counts '$got', the service ran $n"
exit 0
