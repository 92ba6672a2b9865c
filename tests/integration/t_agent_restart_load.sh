#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_agent_restart_load.sh - issue 24, item 6: the service-mode restart
# scenario of t_agent_service.sh, 3 times, on a loaded machine
# (scripts/stress.sh: a CPU spinner, process churn and dd+fsync beside
# it). Each time a service started with `sqlprof env` runs 3 s at 100
# queries/s; after 1 s the agent is SIGKILLed and started again on the
# same profile; then a second short process runs while the agent is busy
# (stopped, as a starved agent is), and the agent is told to stop
# (SIGTERM) before it has read that process's messages. The profile must
# hold exactly what the two processes ran, each in its own process row,
# and the agent must say nothing is missing. Before, the second process's
# executions were missing, and the agent said "0 events lost". Counts
# only: no wall time is asserted (the sleeps place the events).
# run-integration: alone (it loads the machine itself, with scripts/stress.sh)
. "$(dirname "$0")/lib.sh"
agent_setup
command -v sqlite3 >/dev/null || skip "no sqlite3 shell"
STRESS=$ITDIR/../../scripts/stress.sh
[ -x "$STRESS" ] || skip "no scripts/stress.sh"
export STRESS_DIR=$TMP/stress STRESS_MAX_S=120 STRESS_KINDS="cpu churn io" STRESS_IO_MB=8
"$STRESS" start 3 2>/dev/null || fail "scripts/stress.sh start failed"
trap '"$STRESS" stop; [ -n "$AG" ] && kill -9 "$AG" 2>/dev/null; rm -rf "$TMP"' EXIT

# rfail MSG: fail, with what the agents said
rfail() {
	sed 's/^/agent: /' "$TMP/agent.err" >&2
	fail "$@"
}

count_of() {
	"$SQLPROF" report --format json "$P" 2>"$TMP/rep.err" | "$PYTHON" -c '
import json, sys
d = json.load(sys.stdin)
print(sum(q["count"] for q in d["queries"] if "?" in q["sql"] and "+" in q["sql"]))'
}

for round in 1 2 3; do
	rm -f "$P" "$TMP"/count1 "$TMP"/count2
	: >"$TMP/agent.err"
	agent_start
	eval "$("$SQLPROF" env --socket "$S")" || fail "sqlprof env failed"
	SQLPROF_RATE=0.1 "$PROGS/service" 100 3000 "$TMP/count1" &
	SV=$!
	unset LD_PRELOAD SQLPROF_SOCK
	sleep 1
	kill -9 "$AG"
	wait "$AG" 2>/dev/null
	agent_start
	wait "$SV" || rfail "round $round: the service exited $?"
	# the agent busy (stopped) while a second process runs and exits,
	# then told to stop before it has read that process
	kill -STOP "$AG"
	eval "$("$SQLPROF" env --socket "$S")"
	SQLPROF_RATE=0.1 "$PROGS/service" 100 500 "$TMP/count2"
	rc=$?
	unset LD_PRELOAD SQLPROF_SOCK
	kill -TERM "$AG"
	kill -CONT "$AG"
	[ "$rc" = 0 ] || rfail "round $round: the second process exited $rc"
	wait "$AG" || rfail "round $round: the agent exited $? on SIGTERM: $(cat "$TMP/agent.err")"
	AG=
	grep -q "continued" "$TMP/agent.err" || rfail "round $round: the second agent did not continue the profile"
	n1=$(cat "$TMP/count1") n2=$(cat "$TMP/count2")
	total=$(count_of) || rfail "round $round: report: $(cat "$TMP/rep.err")"
	rows=$(sqlite3 "$P" "SELECT pid || ' ' || executions FROM processes ORDER BY pid" | tr '\n' ' ')
	missing=$(sqlite3 "$P" "SELECT value FROM meta WHERE key = 'agent_missing_executions'")
	echo "round $round: the processes ran $n1 and $n2, the profile holds $total (rows: $rows; missing: ${missing:-?})"
	[ "$total" -eq $((n1 + n2)) ] || rfail "round $round: profile count $total, the processes ran $n1 + $n2"
	[ "$(sqlite3 "$P" "SELECT count(*) FROM processes")" = 2 ] || rfail "round $round: expected 2 process rows: $rows"
	[ "$(sqlite3 "$P" "SELECT executions FROM processes WHERE executions = $n1")" = "$n1" ] ||
		fail "round $round: no process row with the first process's $n1: $rows"
	[ "$(sqlite3 "$P" "SELECT executions FROM processes WHERE executions = $n2")" = "$n2" ] ||
		fail "round $round: no process row with the second process's $n2: $rows"
	[ "$missing" = 0 ] || rfail "round $round: meta agent_missing_executions is '$missing'"
	! grep -q "missing" "$TMP/agent.err" || rfail "round $round: the agent said: $(grep missing "$TMP/agent.err")"
done
exit 0
