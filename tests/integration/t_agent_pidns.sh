#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_agent_pidns.sh - issue 23 item 9 under the agent: a service started
# with `sqlprof env`'s environment in another pid namespace (unshare
# --pid --fork --mount-proc) is counted exactly (before: 0, every message
# "pid does not match the connected peer"). Skips without unshare --pid.
. "$(dirname "$0")/lib.sh"
command -v unshare >/dev/null || skip "no unshare"
UNS=(unshare --pid --fork --mount-proc)
"${UNS[@]}" true 2>/dev/null || {
	UNS=(unshare --user --map-root-user --pid --fork --mount-proc)
	"${UNS[@]}" true 2>/dev/null || skip "cannot make a pid namespace here (unshare --pid)"
}
# under the agent: a service in a pid namespace
agent_setup
agent_start
eval "$("$SQLPROF" env --socket "$S")" || fail "sqlprof env failed"
"${UNS[@]}" "$PROGS/service" 200 1000 "$TMP/count1" || fail "service in a pid namespace exited $?"
unset LD_PRELOAD SQLPROF_SOCK
kill -TERM "$AG"
wait "$AG" || fail "agent exited $?"
AG=
n1=$(cat "$TMP/count1")
got=$("$SQLPROF" report --format json "$P" | "$PYTHON" -c '
import json, sys
d = json.load(sys.stdin)
print(sum(q["count"] for q in d["queries"] if "?" in q["sql"] and "+" in q["sql"]))')
[ "$got" = "$n1" ] || fail "agent: $got executions of the service's $n1 in a pid namespace: $(cat "$TMP/agent.err")"
echo "agent: $got of $n1"
exit 0
