#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_record_signals.sh - interrupting record while its command (longrun,
# paused after 1000 executions) runs, signals sent to record alone:
# 1. the command ignores SIGINT: the first interrupt is passed on with a
#    line saying so, the second sends SIGTERM (a line), the command ends
#    (record exits 143) and the profile holds its 1000 executions;
# 2. it ignores SIGINT and SIGTERM: the third interrupt sends SIGKILL (a
#    line), exit 137, profile written;
# 3. SIGQUIT is forwarded: the command dies of it (exit 131), record still
#    writes the profile and removes its socket directory;
# 4. the command has exited but a descendant keeps sending data (record
#    would wait for it forever): an interrupt stops the waiting, with a
#    line saying so and the warning about the process still connected.
. "$(dirname "$0")/lib.sh"
need_prog longrun
command -v pgrep >/dev/null || skip "pgrep (procps) not installed"
cd "$TMP" || exit 1
ulimit -c 0
mkdir sock
# Job control: a background job of a shell without it starts with SIGINT
# and SIGQUIT ignored, and so would the command.
set -m
export TMPDIR=$TMP/sock
pid=

cleanup() {
	: >"$TMP/go"
	[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null
}
trap 'cleanup; [ -f bg.pid ] && kill "$(cat bg.pid)" 2>/dev/null; rm -rf "$TMP"' EXIT

# start NAME IGNORED: record longrun into NAME.db with the signals IGNORED
# ignored (inherited through exec), and wait until it is mid-run.
start() {
	rm -f started
	"$SQLPROF" record -o "$1.db" -- \
		bash -c "${2:+trap '' $2; }exec \"\$0\" 2000 \"\$1\" \"\$2\"" "$PROGS/longrun" \
		"$TMP/started" "$TMP/go" >"$1.out" 2>"$1.err" &
	pid=$!
	wait_started started "$pid" || fail "$1: longrun did not start: $(cat "$1.err")"
}

# wait_line FILE TEXT: wait (up to 10 s) until FILE has a line with TEXT.
wait_line() {
	local i
	for i in $(seq 1 500); do
		grep -qF "$2" "$1" && return 0
		sleep 0.02
	done
	fail "no line '$2' in $1: $(cat "$1")"
}

# finish NAME WANT_RC: wait (up to 20 s) for record to end, check its exit
# status and that the profile holds longrun's first 1000 executions.
finish() {
	local i rc
	for i in $(seq 1 1000); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.02
	done
	kill -0 "$pid" 2>/dev/null && fail "$1: record still running: $(cat "$1.err")"
	wait "$pid"
	rc=$?
	pid=
	[ "$rc" = "$2" ] || fail "$1: exit $rc, expected $2: $(cat "$1.err")"
	report_json "$1.db" "$1.json"
	expect "$1.json" -q stmt 'SELECT ? * ? + ?' count=1000
	[ -z "$(ls sock)" ] || fail "$1: socket directory left behind: $(ls sock)"
	echo "ok: $1 -> exit $rc"
	sed 's/^/    /' "$1.err"
}

start int INT
kill -INT "$pid"
wait_line int.err "interrupt passed on to the command"
kill -0 "$pid" 2>/dev/null || fail "int: record ended at the first interrupt: $(cat int.err)"
kill -INT "$pid"
wait_line int.err "sending SIGTERM"
finish int 143

start intterm "INT TERM"
kill -INT "$pid"
wait_line intterm.err "interrupt passed on"
kill -INT "$pid"
wait_line intterm.err "sending SIGTERM"
kill -INT "$pid"
wait_line intterm.err "sending SIGKILL"
finish intterm 137

start quit ""
kill -QUIT "$pid"
finish quit 131

rm -f started
"$SQLPROF" record -o late.db -- sh -c '
	"$0" 100000000 "$1" >/dev/null &
	echo $! >bg.pid
	while [ ! -e "$1" ]; do sleep 0.02; done' "$PROGS/longrun" "$TMP/started" >late.out 2>late.err &
pid=$!
wait_started started "$pid" || fail "late: longrun did not start: $(cat late.err)"
for i in $(seq 1 500); do
	sh_gone=1
	pgrep -P "$pid" >/dev/null && sh_gone=0
	[ $sh_gone = 1 ] && break
	sleep 0.02
done
[ $sh_gone = 1 ] || fail "late: the command did not exit"
kill -INT "$pid"
wait_line late.err "not waiting any longer"
for i in $(seq 1 1000); do
	kill -0 "$pid" 2>/dev/null || break
	sleep 0.02
done
kill -0 "$pid" 2>/dev/null && fail "late: record still running: $(cat late.err)"
wait "$pid" || fail "late: record exited $?: $(cat late.err)"
pid=
grep -q "1 process still running and connected" late.err ||
	fail "late: no warning about the process still connected: $(cat late.err)"
kill "$(cat bg.pid)" 2>/dev/null
report_json late.db late.json
echo "ok: late interrupt"
sed 's/^/    /' late.err
exit 0
