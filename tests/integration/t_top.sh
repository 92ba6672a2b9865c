#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_top.sh - `sqlprof top`: (1) as soon as (polled, not after a fixed 3 s) a service running 100
# queries/s under `sqlprof agent --interval 1`, `top --once --socket S`
# lists its query with a count > 0 and a rate over its 1 s interval, and
# `top --once PROFILE` lists it from the agent's profile; no escape
# sequence in either, also for a query whose identifier holds U+009B (a
# C1 CSI) and ESC; (2) in a tmux pane, top draws the query and quits on
# q (exit 0), C-c (exit 130) or SIGTERM (143), the terminal's settings
# (stty -g) as before and the main screen back; resized (SIGWINCH), no
# line wider than the new width; the agent killed under it: a line says
# so, and the restarted agent's readings come; (3) bad arguments: exit 2 and a
# message.
. "$(dirname "$0")/lib.sh"
agent_setup
PY3=/usr/bin/python3
[ -x $PY3 ] || PY3=$PYTHON
agent_start --interval 1
eval "$("$SQLPROF" env --socket "$S")"
SQLPROF_RATE=0.1 "$PROGS/service" 100 8000 "$TMP/count" &
SV=$!
$PY3 -c '
import sqlite3
db = sqlite3.connect(":memory:")
for _ in range(20):
    db.execute("SELECT 1 AS \"x\u009b31mred\x1b[2Jy\"").fetchall()' || fail "the Python program failed"
unset LD_PRELOAD SQLPROF_SOCK
# the first frames with the query and a rate (an interval after it ran:
# ~2 s on an idle machine), and the first profile written with it: polled
# (up to 60 s each, a cap), not a fixed 3 s
has_rate() {
	"$SQLPROF" top --once --socket "$S" 2>/dev/null | grep -F 'SELECT ? + ?' |
		awk '$1 != "-" && $1 + 0 >= 1 { ok = 1 } END { exit !ok }'
}
wait_until 60 has_rate || fail "after 60 s top --once --socket shows no rate for the service's query"
in_profile() { "$SQLPROF" top --once "$P" 2>/dev/null | grep -qF 'SELECT ? + ?'; }
wait_until 60 in_profile || fail "after 60 s the agent's profile has not the service's query"

# (1) one frame, from the agent and from the profile
"$SQLPROF" top --once --socket "$S" >"$TMP/top1.txt" 2>"$TMP/top1.err" ||
	fail "top --once --socket exited $?: $(cat "$TMP/top1.err")"
cat "$TMP/top1.txt"
row=$(grep -F 'SELECT ? + ?' "$TMP/top1.txt") || fail "top --once --socket does not list the service's query"
read -r rate _ count _ <<<"$row"
[ "$count" -gt 0 ] 2>/dev/null || fail "count '$count' in: $row"
[ "$rate" != - ] && [ "${rate%.*}" -gt 0 ] || fail "no rate over the interval in: $row"
grep -Eq '^last [0-9]+\.[0-9] s: ' "$TMP/top1.txt" || fail "no interval line" # its length is the agent's measured interval (1.1 s on a loaded machine)
"$SQLPROF" top --once "$P" >"$TMP/top2.txt" 2>"$TMP/top2.err" ||
	fail "top --once PROFILE exited $?: $(cat "$TMP/top2.err")"
cat "$TMP/top2.txt"
row=$(grep -F 'SELECT ? + ?' "$TMP/top2.txt") || fail "top --once PROFILE does not list the service's query"
read -r _ _ count _ <<<"$row"
[ "$count" -gt 0 ] 2>/dev/null || fail "count '$count' in the profile's frame: $row"
for f in top1 top2; do
	grep -q 'AS "x?31mred?\[2Jy"' "$TMP/$f.txt" || fail "$f: the identifier with C1 and ESC is not shown made safe"
	if LC_ALL=C grep -q $'\x1b\|\xc2\x9b' "$TMP/$f.txt"; then
		fail "$f: an escape sequence reached the output"
	fi
done

# (2) on a terminal
command -v tmux >/dev/null || skip "tmux not installed (the --once checks passed)"
cd "$TMP" || exit 1
export TMUX_TMPDIR=$TMP
sock=$TMP/tmux.sock
t() { tmux -S "$sock" "$@"; }
trap '[ -n "$AG" ] && kill -9 "$AG" 2>/dev/null; kill -9 "$SV" 2>/dev/null; t kill-server 2>/dev/null; rm -rf "$TMP"' EXIT
tmux -S "$sock" -D >/dev/null 2>&1 </dev/null &
for _ in $(seq 1 50); do [ -S "$sock" ] && break; sleep 0.1; done
[ -S "$sock" ] || skip "the tmux server did not start"
capture() { t capture-pane -p -t s 2>/dev/null | sed 's/[[:space:]]*$//'; }
shows() { capture | grep -qF -- "$1"; }
wait_for() { # text: polled up to 60 s (a cap)
	wait_until 60 shows "$1" || fail "the pane never showed '$1': $(capture)"
}
widest() { capture | awk '{ if (length($0) > m) m = length($0) } END { print m + 0 }'; }
narrow() { shows 'SELECT ? + ?' && [ "$(widest)" -le 90 ]; }
for key in q C-c TERM; do
	rm -f rc.txt before.txt after.txt
	echo 'shell prompt line' >marker
	t new-session -d -s s -x 160 -y 30 "cat marker; stty -g >before.txt; $SQLPROF top --socket $S --delay 0.5; echo \$? >rc.txt; stty -g >after.txt; sleep 30"
	wait_for 'SELECT ? + ?'
	wait_for 'last ' # a frame with an interval (0.5 s, or more on a loaded machine)
	if [ "$key" = q ]; then
		# SIGWINCH: redrawn to the new width
		t resize-window -t s -x 90 -y 25
		wait_until 60 narrow || fail "after a resize to 90 columns, a line of $(widest): $(capture)"
		w=$(widest)
		echo "resized to 90 columns: widest line $w"
	fi
	if [ "$key" = C-c ]; then
		# the agent restarts: top says so and goes on
		kill -9 "$AG"
		wait "$AG" 2>/dev/null
		AG=
		wait_for 'no new reading: no agent at'
		agent_start --interval 1
		taken_up() { ! shows 'no new reading'; }
		wait_until 60 taken_up || fail "top did not take up the restarted agent: $(capture)"
		wait_for 'SELECT ? + ?'
		echo "agent killed and restarted: top said so, then went on"
	fi
	if [ "$key" = TERM ]; then
		tp=$(pgrep -f "^$SQLPROF top --socket $S --delay 0.5\$") || fail "no top process"
		kill -TERM $tp
	else
		t send-keys -t s "$key"
	fi
	wait_until 60 test -s after.txt || fail "top did not quit on $key: $(capture)"
	rc=$(cat rc.txt)
	want=0
	[ "$key" = C-c ] && want=130
	[ "$key" = TERM ] && want=143
	[ "$rc" = "$want" ] || fail "top exited $rc on $key, not $want"
	same_file "terminal settings after $key" before.txt after.txt
	capture >pane.txt
	grep -q 'shell prompt line' pane.txt || fail "the main screen is not back after $key: $(cat pane.txt)"
	if grep -q 'EXEC/S' pane.txt; then fail "top's table is still on the screen after $key"; fi
	echo "$key: exit $rc, terminal restored"
	t kill-session -t s
done

# (3) bad arguments
for args in "--delay 0" "--delay x" "-n 0" "--socket $S $P" "--bogus" "$P extra"; do
	# shellcheck disable=SC2086
	"$SQLPROF" top --once $args >/dev/null 2>"$TMP/bad.err"
	rc=$?
	[ "$rc" = 2 ] && [ -s "$TMP/bad.err" ] || fail "top $args: exit $rc, $(cat "$TMP/bad.err")"
done
"$SQLPROF" top --once --socket "$TMP/run/none/sock" >/dev/null 2>"$TMP/bad.err"
rc=$?
[ "$rc" = 3 ] && grep -q "no agent at" "$TMP/bad.err" || fail "no agent: exit $rc, $(cat "$TMP/bad.err")"
wait "$SV" || fail "the service exited $?"
exit 0
