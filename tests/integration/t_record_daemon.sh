#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_record_daemon.sh - record does not wait for a daemon's whole life.
# The command (tests/progs/ticker) double-forks a daemon that queries every
# 300 ms for 30 s, at --rate 1 so that every query sends data, and exits at
# once. record must:
# 1. stop 10 s (the default --grace) after the command exited, not after
#    the daemon's 30 s (before: 30 s), saying why and naming the daemon
#    (pid and program) as still running, with a profile of the queries
#    made until then and exit status 0, the command's;
# 2. with --grace 1, stop after 1 s;
# 3. on SIGTERM, SIGINT or SIGHUP while it waits: stop at once, write the
#    profile with everything collected so far and exit 0.
# The bounds on wall time are loose (20 s for the 10 s grace, 8 s for 1 s,
# 6 s after a signal): the daemon lives 30 s.
. "$(dirname "$0")/lib.sh"
need_prog ticker
cd "$TMP" || exit 1
# Job control: a background job of a shell without it starts with SIGINT
# ignored, and record leaves an ignored signal ignored.
set -m
trap 'for f in "$TMP"/*.pid; do [ -s "$f" ] && kill "$(cat "$f")" 2>/dev/null; done; rm -rf "$TMP"' EXIT

now_ms() { date +%s%3N; }

# daemon NAME ARGS...: record ARGS... the daemon (pid in NAME.pid) in the
# background; sets pid (record's) and t0.
daemon() {
	local name=$1
	shift
	t0=$(now_ms)
	"$SQLPROF" record --rate 1 -o "$name.db" "$@" -- "$PROGS/ticker" 100 300 "$TMP/$name.pid" \
		>"$name.out" 2>"$name.err" &
	pid=$!
	wait_started "$name.pid" "$pid" || fail "$name: the daemon did not start: $(cat "$name.err")"
}

# finish NAME MAX_S: wait for record (at most MAX_S seconds), check exit 0,
# the warning naming the daemon and the profile; sets took (ms since t0)
# and t_end.
finish() {
	local name=$1 max=$2 i rc dpid
	for i in $(seq 1 $((max * 50))); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.02
	done
	t_end=$(now_ms)
	took=$((t_end - t0))
	kill -0 "$pid" 2>/dev/null && fail "$name: record still waiting after ${took} ms: $(cat "$name.err")"
	wait "$pid"
	rc=$?
	[ "$rc" = 0 ] || fail "$name: record exited $rc: $(cat "$name.err")"
	dpid=$(cat "$name.pid")
	kill -0 "$dpid" 2>/dev/null || fail "$name: the daemon is gone already"
	grep -E "^sqlprof: warning: 1 process still running and connected when recording stopped, $3: pid $dpid \(ticker\); its later queries were not collected$" \
		"$name.err" >/dev/null || fail "$name: no warning naming the daemon ($3): $(cat "$name.err")"
	report_json "$name.db" "$name.json"
	"$PYTHON" - "$name.json" "$took" <<'PY' || fail "$name: profile"
import json, sys
r = json.load(open(sys.argv[1]))
q = [q for q in r["queries"] if q["fingerprint"] == "SELECT ? + ?"]
took_s = int(sys.argv[2]) / 1000
n = q[0]["count"] if q else 0
# one query every 300 ms while record listened; none lost
if not (1 <= n <= took_s / 0.3 + 2):
    sys.exit("%d executions in %.1f s" % (n, took_s))
print("   %d executions of the daemon collected" % n)
PY
	kill "$dpid" 2>/dev/null
	echo "ok: $name: record returned after $took ms: $(grep warning "$name.err")"
}

daemon grace
finish grace 25 "10 s after the command exited \(--grace\)"
[ "$took" -ge 9500 ] || fail "grace: stopped after $took ms, before its 10 s"
[ "$took" -le 20000 ] || fail "grace: stopped after $took ms, long after its 10 s"

daemon grace1 --grace 1
finish grace1 10 "1 s after the command exited \(--grace\)"
[ "$took" -le 8000 ] || fail "grace1: stopped after $took ms, long after its 1 s"

for sig in TERM INT HUP; do
	daemon sig$sig
	sleep 1
	t_sig=$(now_ms)
	kill -$sig "$pid"
	finish sig$sig 10 "interrupted"
	[ $((t_end - t_sig)) -le 6000 ] || fail "sig$sig: record took $((t_end - t_sig)) ms to stop after SIG$sig"
	grep -q "interrupted: not waiting any longer" sig$sig.err || fail "sig$sig: no line saying so"
done
exit 0
