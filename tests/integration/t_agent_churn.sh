#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_agent_churn.sh - issue 15, acceptance 4: `sqlprof agent` under 50
# service processes starting and stopping (10 waves of 5 at a time, each
# ~60 queries; one of each wave killed by SIGKILL once it has run its
# queries and waits). Every process is a row whose executions are exactly
# what it ran (the killed ones too: their statistics outlive them); the
# agent's descriptors after the last wave are those it had after the
# second (no leak), it maps no process's memfd any more (every ring and
# statistics let go), and its resident memory grew by less than 16 MiB
# from the 10th process to the 50th (what it keeps per process is a row,
# its module map and stacks).
. "$(dirname "$0")/lib.sh"
agent_setup
agent_start

rss() { awk '/^VmRSS:/ { print $2 }' "/proc/$AG/status"; }
nfd() { ls "/proc/$AG/fd" | wc -l; }
memfds() { grep -c -e 'memfd:sqlprof' "/proc/$AG/maps"; }
no_memfds() { [ "$(memfds)" -eq 0 ]; }

# the environment of the services only (every program started with it is
# a process of the agent's)
eval "$("$SQLPROF" env --socket "$S")"
PRE=$LD_PRELOAD SOCK=$SQLPROF_SOCK
unset LD_PRELOAD SQLPROF_SOCK
: >"$TMP/expect"
for wave in $(seq 1 10); do
	pids=()
	for k in 1 2 3 4; do
		LD_PRELOAD=$PRE SQLPROF_SOCK=$SOCK SQLPROF_RATE=0.1 "$PROGS/service" 200 300 "$TMP/c.$wave.$k" &
		pids+=($!)
	done
	# the fifth runs its queries, says how many, then waits for a file
	# that never comes: killed
	LD_PRELOAD=$PRE SQLPROF_SOCK=$SOCK SQLPROF_RATE=0.1 "$PROGS/service" 200 300 "$TMP/c.$wave.5" "$TMP/never" &
	kp=$!
	for p in "${pids[@]}"; do wait "$p" || fail "service $p exited $?"; done
	for k in 1 2 3 4; do echo "${pids[$((k - 1))]} $(cat "$TMP/c.$wave.$k")" >>"$TMP/expect"; done
	wait_started "$TMP/c.$wave.5" "$kp" || fail "service $kp ended early"
	kill -9 "$kp"
	wait "$kp" 2>/dev/null
	echo "$kp $(cat "$TMP/c.$wave.5") killed" >>"$TMP/expect"
	if [ "$wave" = 2 ]; then
		# the agent let go of every gone process (the killed one too):
		# polled, cap 60 s, instead of a fixed 1.2 s
		wait_until 60 no_memfds
		rss10=$(rss)
		fd10=$(nfd)
	fi
done
wait_until 60 no_memfds # or the check below fails, naming how many
# a descriptor the agent holds for a moment (a connection being closed;
# a snapshot holds none of its own since the agent keeps one answer memfd,
# t_agent_fdsteady) is not a leak: polled, cap 30 s; a leak stays
fds_back() { [ "$(nfd)" -le "$fd10" ]; }
wait_until 30 fds_back
rss50=$(rss)
fd50=$(nfd)
maps50=$(memfds)
echo "agent: RSS ${rss10} -> ${rss50} KiB, descriptors $fd10 -> $fd50, memfd mappings $maps50"
kill -TERM "$AG"
wait "$AG" || fail "the agent exited $?: $(cat "$TMP/agent.err")"
[ "$fd50" -le "$fd10" ] || fail "descriptors grew from $fd10 to $fd50"
[ "$maps50" -eq 0 ] || fail "$maps50 memfds of gone processes still mapped"
[ $((rss50 - rss10)) -lt 16384 ] || fail "RSS grew by $((rss50 - rss10)) KiB over 40 processes"
rows=$(sqlite3 "$P" "SELECT count(*) FROM processes")
[ "$rows" -eq 50 ] || fail "$rows process rows, not 50"
total=0
killed=0
while read -r pid n how; do
	got=$(sqlite3 "$P" "SELECT executions || ' ' || clean_exit FROM processes WHERE pid = $pid")
	[ "${got% *}" = "$n" ] || fail "process $pid ran $n, its row says '$got'"
	if [ "${how:-}" = killed ]; then
		[ "${got#* }" = 0 ] || fail "killed process $pid has a clean exit"
		killed=$((killed + 1))
	fi
	total=$((total + n))
done <"$TMP/expect"
q=$(sqlite3 "$P" "SELECT sum(count) FROM queries WHERE sql LIKE 'SELECT ?%'")
[ "$q" -eq "$total" ] || fail "query count $q, the processes ran $total"
[ "$killed" -eq 10 ] || fail "$killed killed processes checked"
echo "50 processes ($killed killed), $total executions, each exact"
exit 0
