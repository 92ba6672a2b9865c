#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_agent_lock.sh - issue 23, item 12: two agents writing the same -o.
# Before, the second one ran beside the first and the last writer won
# without a word (2,500 executions -> 500). The profile is locked for the
# agent's life: a second agent on the same profile (by another name of it
# too: a relative path from its directory, and through a symbolic link to
# that directory) on another socket exits 2 at once, naming the profile
# and the first agent's pid; once the first has ended (SIGTERM, or SIGKILL:
# the lock goes with the process), the next one takes it; no lock file is
# left after a clean end. A service's executions are all in the profile.
. "$(dirname "$0")/lib.sh"
agent_setup
agent_start

# second -o NAME WHAT: an agent on another socket, refused with the pid
second() {
	(cd "$TMP" && timeout "$HANG_S" "$SQLPROF" agent -o "$1" --socket "$TMP/run/t/sock" --interval 0.5) \
		>"$TMP/second.out" 2>"$TMP/second.err"
	local rc=$?
	[ "$rc" = 2 ] || fail "$2: a second agent on the same profile exited $rc: $(cat "$TMP/second.err")"
	grep -q "pid $AG" "$TMP/second.err" && grep -q "agent.db" "$TMP/second.err" ||
		fail "$2: the message does not name the profile and pid $AG: $(cat "$TMP/second.err")"
	echo "ok: $2 -> $(cat "$TMP/second.err")"
}
second "$P" "the same path"
second agent.db "a relative path"
ln -s "$TMP" "$TMP/link"
second "$TMP/link/agent.db" "through a symbolic link"

eval "$("$SQLPROF" env --socket "$S")"
"$PROGS/service" 200 500 "$TMP/count" || fail "service exited $?"
unset LD_PRELOAD SQLPROF_SOCK
kill -TERM "$AG"
wait "$AG" || fail "agent exited $?: $(cat "$TMP/agent.err")"
AG=
ls "$TMP" | grep -q lock && fail "a lock file is left: $(ls "$TMP")"
n=$(sqlite3 "$P" "SELECT sum(count) FROM queries WHERE sql LIKE 'SELECT ?%'")
[ "$n" = "$(cat "$TMP/count")" ] || fail "the profile has $n executions, the service ran $(cat "$TMP/count")"

# the lock goes with its process, even killed
agent_start
kill -9 "$AG"
wait "$AG" 2>/dev/null
agent_start
kill -TERM "$AG"
wait "$AG" || fail "agent after a killed one exited $?: $(cat "$TMP/agent.err")"
AG=
echo "ok: $n executions, the profile free again after SIGTERM and SIGKILL"
exit 0
