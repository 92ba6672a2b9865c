#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_agent_logflood.sh - issue 23, item 14 (the log): a client of the
# agent's own uid that sends nothing but bad messages (5,000 over 5
# connections) flooded the agent's log with a line each (5,677 lines in
# the review, with -q too). The lines a peer can cause are rate-limited:
# at most 10 per minute and kind, then one line with the count of those
# not shown; with -q as without. Every bad message is still counted: the
# lines shown plus the count not shown are the profile's bad_messages.
. "$(dirname "$0")/lib.sh"
agent_setup

for q in "" -q; do
	rm -f "$P" "$TMP/agent.err" "$S"
	if [ -z "$q" ]; then
		agent_start
	else # no "listening" line to wait for
		"$SQLPROF" agent -q -o "$P" --socket "$S" --interval 0.5 2>>"$TMP/agent.err" &
		AG=$!
		wait_started "$S" "$AG" || fail "agent -q did not listen: $(cat "$TMP/agent.err")"
	fi
	"$PYTHON" - "$S" <<'PY' || fail "the flooding client failed"
import socket, sys
for c in range(5):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.connect(sys.argv[1])
    for i in range(1000):
        s.send(b"\xff" * 24 + i.to_bytes(4, "little"))
    s.close()
PY
	kill -TERM "$AG"
	wait "$AG" || fail "agent ${q:-without -q} exited $?: $(tail -5 "$TMP/agent.err")"
	AG=
	lines=$(wc -l <"$TMP/agent.err")
	shown=$(grep -c "dropped a bad message" "$TMP/agent.err")
	hidden=$(sed -n 's/.*: \([0-9]*\) more bad messages dropped not shown.*/\1/p' "$TMP/agent.err" |
		awk '{ n += $1 } END { print n + 0 }')
	bad=$(sqlite3 "$P" "SELECT value FROM meta WHERE key = 'bad_messages'")
	echo "agent ${q:-without -q}: $lines lines, $shown bad messages shown, $hidden counted, $bad in the profile"
	[ "$bad" = 5000 ] || fail "the profile counts $bad bad messages, not 5000"
	[ "$lines" -le 40 ] || fail "$lines lines in the agent's log: $(head -5 "$TMP/agent.err")"
	[ $((shown + hidden)) = "$bad" ] || fail "$shown shown + $hidden not shown != $bad"
done
exit 0
