#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_agent_service.sh - issue 15, acceptance 2 and 3: a service started with
# eval "$(sqlprof env --socket S)" runs 8 s at ~100 queries/s under
# `sqlprof agent` (until told to stop: the events below fall inside its
# life however loaded the machine). As soon as it does (polled up to 60 s; ~1 s when idle)
# the profile (read while the agent runs) shows its query with a count
# > 0, so do the agent's /metrics and `sqlprof top --once --socket S`; a
# second later the agent is SIGKILLed and started again on the same
# profile, the service stopped a second after that; when it ends, the profile's count is
# the number of queries it ran, exactly. A second process of the service
# afterwards: 2 process rows, each with its own exact count, the query's
# count their sum. Counts only: no wall time is asserted (the sleeps only
# place the events in the service's life).
. "$(dirname "$0")/lib.sh"
agent_setup

# count of the query in a JSON report of the profile (0: not there)
count_of() {
	"$SQLPROF" report --format json "$P" 2>"$TMP/rep.err" | "$PYTHON" -c '
import json, sys
d = json.load(sys.stdin)
print(sum(q["count"] for q in d["queries"] if "?" in q["sql"] and "+" in q["sql"]))'
}

PORT=$("$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
agent_start --metrics "127.0.0.1:$PORT"
# the service's slow paths (sampled executions) look for the agent: a
# higher rate than the default makes that at least ten times a second
eval "$("$SQLPROF" env --socket "$S")" || fail "sqlprof env failed"
SQLPROF_RATE=0.1 "$PROGS/service" 100 0 "$TMP/count1" "$TMP/stop1" &
SV=$!
unset LD_PRELOAD SQLPROF_SOCK
# the first profile that shows the query: after ~1 s when the machine is
# idle; a loaded one may take longer to write it (polled, up to 60 s: no
# wall time is asserted)
t0=$SECONDS
c3=0
while [ $((SECONDS - t0)) -lt 60 ]; do
	[ -e "$P" ] || { sleep 0.1; continue; } # not written yet
	c3=$(count_of) || fail "report while the agent runs: $(cat "$TMP/rep.err")"
	[ "$c3" -gt 0 ] && break
	sleep 0.25
done
[ "$c3" -gt 0 ] || fail "after 60 s the profile shows no execution of the service's query"
echo "after $((SECONDS - t0)) s: $c3"
if command -v curl >/dev/null; then
	m=$(curl -s -m 5 "http://127.0.0.1:$PORT/metrics" |
		grep '^sqlprof_query_executions_total{.*query="SELECT ? + ?"' | awk '{print $NF}')
	[ "${m:-0}" -gt 0 ] || fail "/metrics has no sqlprof_query_executions_total for the query"
	echo "then /metrics: $m"
fi
"$SQLPROF" top --once --delay 0.2 --socket "$S" >"$TMP/top.txt" 2>&1 || fail "top --once: $(cat "$TMP/top.txt")"
grep -qF 'SELECT ? + ?' "$TMP/top.txt" || fail "top --once does not list the query: $(cat "$TMP/top.txt")"
kill -0 "$SV" 2>/dev/null || fail "the service ended before it was told to"
kill -9 "$AG"
wait "$AG" 2>/dev/null
AG=
agent_start --metrics "127.0.0.1:$PORT"
sleep 1 # more executions, after the restart
touch "$TMP/stop1"
wait "$SV" || fail "the service exited $?"
n1=$(cat "$TMP/count1")
# a second process of the same service, afterwards
eval "$("$SQLPROF" env --socket "$S")"
SQLPROF_RATE=0.1 "$PROGS/service" 100 1000 "$TMP/count2" &
SV2=$!
unset LD_PRELOAD SQLPROF_SOCK
wait "$SV2" || fail "the second service exited $?"
n2=$(cat "$TMP/count2")
kill -TERM "$AG"
wait "$AG" || fail "the agent exited $? on SIGTERM: $(cat "$TMP/agent.err")"
grep -q "continued" "$TMP/agent.err" || fail "the second agent did not continue the profile"
AG=
total=$(count_of) || fail "report: $(cat "$TMP/rep.err")"
echo "service ran $n1 and $n2, profile $total"
[ "$total" -eq $((n1 + n2)) ] || fail "profile count $total, the services ran $n1 + $n2"
rows=$(sqlite3 "$P" "SELECT pid || ' ' || executions FROM processes ORDER BY pid")
echo "$rows"
[ "$(echo "$rows" | wc -l)" -eq 2 ] || fail "expected 2 process rows: $rows"
[ "$(sqlite3 "$P" "SELECT executions FROM processes WHERE pid = $SV")" = "$n1" ] ||
	fail "first process's row: $rows (ran $n1)"
[ "$(sqlite3 "$P" "SELECT executions FROM processes WHERE pid = $SV2")" = "$n2" ] ||
	fail "second process's row: $rows (ran $n2)"
[ "$(sqlite3 "$P" "SELECT value FROM meta WHERE key = 'agent_restarts'")" = 1 ] ||
	fail "meta agent_restarts is not 1"
[ ! -e "$S" ] || fail "the agent left its socket behind"
exit 0
