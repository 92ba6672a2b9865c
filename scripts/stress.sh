#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# stress.sh - load beside a test: N busy processes of four kinds, to find
# what breaks only on a loaded machine (a collector that drains late, a
# restart that races a reconnect). Nothing here measures anything.
#
#   scripts/stress.sh N -- CMD [ARGS...]   run CMD with N workers beside it;
#                                          they are stopped when CMD ends (or
#                                          on SIGINT/SIGTERM); exits CMD's code
#   scripts/stress.sh start N              start N workers in the background
#   scripts/stress.sh stop                 stop the workers `start` started
#   scripts/stress.sh status               list them
#
# Worker i is of kind i mod 4 in STRESS_KINDS (default "cpu churn io mem"):
#   cpu    a shell loop spinning on one CPU
#   churn  fork/exec of short processes (/bin/true) in a loop
#   io     dd of STRESS_IO_MB (32) MiB to a temporary file, fsync'd, again
#   mem    touches STRESS_MEM_MB (256) MiB page by page, again and again
# Bounded: each worker is killed after STRESS_MAX_S seconds (600) whatever
# happens, runs under `ulimit -v` (STRESS_MEM_MB + 256 MiB), at `nice`
# STRESS_NICE (0), and N is at most 64. Workers of `start` are recorded in
# STRESS_DIR (default /tmp/sqlprof-stress.$UID); `stop` ends exactly those
# process groups, never anything by name.
set -u

MAX_S=${STRESS_MAX_S:-600}
MEM_MB=${STRESS_MEM_MB:-256}
IO_MB=${STRESS_IO_MB:-32}
NICE=${STRESS_NICE:-0}
KINDS=(${STRESS_KINDS:-cpu churn io mem})
DIR=${STRESS_DIR:-/tmp/sqlprof-stress.$(id -u)}
PYTHON=$(command -v python3 || echo /usr/bin/python3)

usage() {
	sed -n '/^#   scripts/p' "$0" | sed 's/^#   //' >&2
	exit 2
}

is_count() {
	case $1 in '' | *[!0-9]*) return 1 ;; esac
	[ "$1" -ge 1 ] && [ "$1" -le 64 ]
}

# worker KIND I: the body of one worker (runs in its own session)
worker_cmd() {
	case $1 in
	cpu) echo 'while :; do :; done' ;;
	churn) echo 'while :; do /bin/true; done' ;;
	io) echo "while :; do dd if=/dev/zero of='$DIR/io.$2' bs=1M count=$IO_MB conv=fsync status=none || sleep 1; done" ;;
	mem) echo "exec '$PYTHON' -c '
import mmap, sys
n = $MEM_MB << 20
m = mmap.mmap(-1, n)
v = 0
while True:
    v = (v + 1) & 255
    for off in range(0, n, 4096):
        m[off] = v
'" ;;
	*) echo "stress.sh: unknown kind '$1' (STRESS_KINDS: cpu churn io mem)" >&2; return 1 ;;
	esac
}

# start_workers N: start them, their pids (= process groups) in $DIR/pids
start_workers() {
	local n=$1 i kind body pid
	mkdir -p -m 700 "$DIR" || exit 1
	if [ -s "$DIR/pids" ]; then
		echo "stress.sh: workers already started ($DIR/pids): stop them first" >&2
		exit 1
	fi
	: >"$DIR/pids"
	for ((i = 0; i < n; i++)); do
		kind=${KINDS[i % ${#KINDS[@]}]}
		body=$(worker_cmd "$kind" "$i") || exit 2
		# setsid: the worker leads its own process group (a background
		# job of a script is no group leader, so setsid execs in place
		# and $! is the group's id); timeout bounds its life, ulimit -v
		# its memory
		setsid bash -c "ulimit -v $(((MEM_MB + 256) * 1024)); exec nice -n $NICE timeout -s KILL $MAX_S bash -c \"\$0\"" \
			"$body" </dev/null >/dev/null 2>&1 &
		pid=$!
		disown "$pid" # no "Killed" job notice when it is stopped
		echo "$pid $kind" >>"$DIR/pids"
	done
	echo "stress.sh: $n workers started ($(cut -d' ' -f2 "$DIR/pids" | sort | uniq -c | awk '{printf "%s%s %s", s, $1, $2; s=", "}')), each for at most ${MAX_S} s" >&2
}

stop_workers() {
	local pid kind
	[ -f "$DIR/pids" ] || return 0
	while read -r pid kind; do
		# the group of a worker we started: still its group (the
		# leader's pgid is its own pid) before it is signalled
		if [ "$(ps -o pgid= -p "$pid" 2>/dev/null | tr -d ' ')" = "$pid" ]; then
			kill -KILL -- "-$pid" 2>/dev/null
		fi
	done <"$DIR/pids"
	rm -f "$DIR/pids" "$DIR"/io.*
	rmdir "$DIR" 2>/dev/null
	return 0
}

case ${1:-} in
start)
	is_count "${2:-}" || usage
	start_workers "$2"
	;;
stop)
	stop_workers
	;;
status)
	[ -f "$DIR/pids" ] || { echo "no workers"; exit 0; }
	while read -r pid kind; do
		if kill -0 "$pid" 2>/dev/null; then echo "$pid $kind running"; else echo "$pid $kind gone"; fi
	done <"$DIR/pids"
	;;
*)
	is_count "${1:-}" && [ "${2:-}" = "--" ] && [ $# -ge 3 ] || usage
	n=$1
	shift 2
	DIR=$(mktemp -d /tmp/sqlprof-stress.XXXXXX) || exit 1
	trap 'stop_workers' EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	start_workers "$n"
	"$@"
	rc=$?
	exit $rc
	;;
esac
