#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_agent_fds.sh - issue 23, item 11: more services at once than the agent
# has descriptors (the review: 80 against 64; here 24 against 16, alive
# at the same time, the machine being shared). Before, a HELLO whose memfd
# the agent could not take ("control data truncated") was dropped: 16,000
# executions -> 11,800 recorded and "0 events lost". Now the agent raises
# its soft RLIMIT_NOFILE to the hard limit at start: with the soft limit
# at 16 and the usual hard one, every process row is exact. With the hard
# limit at 16 too, new connections wait in the listener's backlog while
# few descriptors are left (said once), so that a HELLO never finds none;
# every row exact again. Should a descriptor be lost all the same, it is
# counted and said (the agent's last line, meta descriptors_lost and
# statistics_lost, the report's header): never "0 lost" next to missing
# executions.
. "$(dirname "$0")/lib.sh"
# agent_setup without its address-space cap: the agent maps every service's
# statistics memfd, 512 MiB each (under a cap of 4 GB those beyond are
# lost, said as statistics_lost)
need_prog service
mkdir -m 700 "$TMP/run"
S=$TMP/run/s/sock
P=$TMP/agent.db
AG=
trap '[ -n "$AG" ] && kill -9 "$AG" 2>/dev/null; rm -rf "$TMP"' EXIT
N=24 # services, alive at once
hard=$(ulimit -Hn)
[ "$hard" = unlimited ] || [ "$hard" -ge 512 ] || skip "the hard RLIMIT_NOFILE is $hard here (512 wanted)"

# wave LIMITS...: an agent under `ulimit LIMITS`, N services of 30
# executions, alive at once, the agent ended; sets ran (their sum) and got (the
# profile's)
wave() {
	rm -f "$P" "$TMP"/c.* "$TMP/agent.err" "$S"
	(ulimit "$@" && exec "$SQLPROF" agent -o "$P" --socket "$S" --interval 0.5) 2>>"$TMP/agent.err" &
	AG=$!
	wait_started "$S" "$AG" || fail "the agent did not listen: $(cat "$TMP/agent.err")"
	eval "$("$SQLPROF" env --socket "$S")"
	pids=()
	rm -f "$TMP/stop"
	for k in $(seq 1 $N); do
		"$PROGS/service" 100 300 "$TMP/c.$k" "$TMP/stop" &
		pids+=($!)
	done
	unset LD_PRELOAD SQLPROF_SOCK
	# all alive at once: each waits for the file stop once it has run
	for k in $(seq 1 $N); do
		wait_started "$TMP/c.$k" "${pids[$((k - 1))]}" || fail "service $k ended early"
	done
	: >"$TMP/stop"
	for p in "${pids[@]}"; do wait "$p" || fail "service $p exited $?"; done
	kill -TERM "$AG"
	wait "$AG" || fail "agent exited $?: $(tail -5 "$TMP/agent.err")"
	AG=
	ran=$(cat "$TMP"/c.* | awk '{ n += $1 } END { print n }')
	got=$(sqlite3 "$P" "SELECT coalesce(sum(count), 0) FROM queries WHERE sql LIKE 'SELECT ?%'")
	dl=$(sqlite3 "$P" "SELECT coalesce((SELECT value FROM meta WHERE key = 'descriptors_lost'), 0)")
	miss=$(sqlite3 "$P" "SELECT coalesce((SELECT value FROM meta WHERE key = 'executions_missing'), 0)")
	"$SQLPROF" report "$P" >"$TMP/report.txt" 2>&1 || fail "report exited $?"
	echo "ulimit $*: $got of $ran executions in the profile, descriptors_lost $dl, executions_missing $miss; agent: $(tail -1 "$TMP/agent.err")"
}

# rows_exact WHAT: every service's process row holds what it ran
rows_exact() {
	local k p n
	for k in $(seq 1 $N); do
		p=${pids[$((k - 1))]}
		n=$(sqlite3 "$P" "SELECT executions FROM processes WHERE pid = $p")
		[ "$n" = "$(cat "$TMP/c.$k")" ] || fail "$1: service $p ran $(cat "$TMP/c.$k"), its row says '$n'"
	done
}

# the soft limit at 16, the hard one as it is: raised, every process exact
wave -Sn 16
[ "$got" = "$ran" ] || fail "soft limit 16 (hard $hard): $got of $ran executions"
[ "$dl" = 0 ] || fail "descriptors_lost $dl with the limit raised"
rows_exact "soft limit 16"

# the hard limit at 16 too: connections wait for descriptors (said once),
# and whatever is lost all the same is said
wave -n 16
grep -q "descriptors open of RLIMIT_NOFILE 16 (hard limit 16)" "$TMP/agent.err" ||
	fail "the agent did not say it ran short of descriptors: $(cat "$TMP/agent.err")"
if [ "$got" != "$ran" ]; then
	grep -q "descriptors* lost\|out of descriptors\|missing" "$TMP/report.txt" ||
		fail "$got of $ran executions, the report's header does not say it: $(head -3 "$TMP/report.txt")"
	tail -1 "$TMP/agent.err" | grep -q "descriptors* lost\|out of descriptors\|missing" ||
		fail "$got of $ran executions, the agent's last line does not say it: $(tail -1 "$TMP/agent.err")"
	echo "(losses with 16 descriptors, said: $(head -2 "$TMP/report.txt" | tail -1))"
else
	[ "$dl" = 0 ] || fail "descriptors_lost $dl, yet nothing missing"
	rows_exact "hard limit 16"
fi
exit 0
