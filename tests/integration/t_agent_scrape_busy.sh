#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_agent_scrape_busy.sh - a /metrics scrape never waits for the agent's
# loop: while the loop is held (SQLPROF_AGENT_TEST_HOLD, standing for the
# merge of a large service that ended, 6.4 s in the soak), a scrape is
# answered with the last exposition the loop rendered, said in a comment
# line, with the same counters (never lower); once the loop runs again, a
# scrape is fresh. Before, the scrape waited for the loop (here: until
# curl's 20 s gave up).
. "$(dirname "$0")/lib.sh"
command -v curl >/dev/null || skip "curl not installed"
agent_setup
PORT=$("$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
URL=http://127.0.0.1:$PORT/metrics
scrape() { # OUT: the exposition into OUT; prints the HTTP status
	curl -s -m 20 -o "$1" -w '%{http_code}' "$URL"
}
execs() { # FILE: the sum of its executions counters
	awk '/^sqlprof_query_executions_total/ { n += $NF } END { print n + 0 }' "$1"
}
export SQLPROF_AGENT_TEST_HOLD=$TMP/hold
agent_start --metrics "127.0.0.1:$PORT" --interval 1
unset SQLPROF_AGENT_TEST_HOLD
eval "$("$SQLPROF" env --socket "$S")"
"$PROGS/service" 200 100 "$TMP/count" || fail "the service failed"
unset LD_PRELOAD SQLPROF_SOCK
ran=$(cat "$TMP/count")
all_in() { [ "$(scrape "$TMP/m1.txt")" = 200 ] && [ "$(execs "$TMP/m1.txt")" = "$ran" ]; }
wait_until 60 all_in || fail "no scrape with the service's $ran executions: $(head -c 1000 "$TMP/m1.txt")"
grep -q '^# sqlprof: the agent was busy' "$TMP/m1.txt" && fail "an answer said busy while the agent was not"

: >"$TMP/hold"
wait_until 60 test -e "$TMP/hold.held" || fail "the agent's loop did not hold"
code=$(scrape "$TMP/m2.txt")
[ -e "$TMP/hold" ] || fail "the hold went away"
[ "$code" = 200 ] || fail "a scrape while the agent's loop is busy: HTTP $code (curl gave up: it waited for the loop)"
grep -q '^# sqlprof: the agent was busy: this answer is [0-9.]* s old$' "$TMP/m2.txt" ||
	fail "the busy answer does not say so: $(head -3 "$TMP/m2.txt")"
[ "$(execs "$TMP/m2.txt")" = "$ran" ] || fail "the busy answer holds $(execs "$TMP/m2.txt") executions, not $ran"
grep -v '^# sqlprof: the agent was busy' "$TMP/m2.txt" | cmp -s - "$TMP/m1.txt" ||
	fail "the busy answer is not the last one rendered"

rm -f "$TMP/hold"
fresh() { [ "$(scrape "$TMP/m3.txt")" = 200 ] && ! grep -q '^# sqlprof: the agent was busy' "$TMP/m3.txt"; }
wait_until 60 fresh || fail "no fresh answer after the hold: $(head -3 "$TMP/m3.txt")"
[ "$(execs "$TMP/m3.txt")" = "$ran" ] || fail "after the hold: $(execs "$TMP/m3.txt") executions, not $ran"
kill -TERM "$AG"
wait "$AG" || fail "the agent exited $?"
AG=
exit 0
