#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_agent_env.sh - what `sqlprof env` prints and where `sqlprof agent`
# listens: export lines that eval sets (LD_PRELOAD first, the caller's kept
# after it; SQLPROF_SOCK), Environment= lines with --systemd, the default
# socket $XDG_RUNTIME_DIR/sqlprof/sock in a directory the agent makes 0700;
# a second agent on the same socket, a socket directory others may write
# in and a bad --interval are refused (exit 2); a stale socket left by a
# killed agent is taken over; SIGINT ends the agent with exit 0.
. "$(dirname "$0")/lib.sh"

LIB=$(cd "$BUILD/lib" && pwd -P)/libsqlprof.so
out=$("$SQLPROF" env --socket /run/a/sock) || fail "env exited $?"
(
	LD_PRELOAD=/x/other.so
	eval "$out"
	[ "$LD_PRELOAD" = "$LIB:/x/other.so" ] || fail "LD_PRELOAD after eval: $LD_PRELOAD"
	[ "$SQLPROF_SOCK" = /run/a/sock ] || fail "SQLPROF_SOCK after eval: $SQLPROF_SOCK"
) || exit 1
printf 'Environment=LD_PRELOAD=%s\nEnvironment=SQLPROF_SOCK=/run/a/sock\n' "$LIB" >"$TMP/want"
"$SQLPROF" env --systemd --socket /run/a/sock >"$TMP/got" || fail "env --systemd exited $?"
same_file "env --systemd" "$TMP/want" "$TMP/got"
"$SQLPROF" env --socket relative/sock >/dev/null 2>&1
[ $? = 2 ] || fail "env --socket with a relative path: not exit 2"

if [ "$(id -u)" != 0 ]; then
	mkdir -m 700 "$TMP/xdg"
	def=$(XDG_RUNTIME_DIR=$TMP/xdg "$SQLPROF" env | sed -n 's/^export SQLPROF_SOCK=//p')
	[ "$def" = "'$TMP/xdg/sqlprof/sock'" ] || fail "default socket $def"
	XDG_RUNTIME_DIR=$TMP/xdg "$SQLPROF" agent -o "$TMP/d.db" 2>"$TMP/d.err" &
	AG=$!
	wait_started "$TMP/xdg/sqlprof/sock" "$AG" || fail "no agent socket: $(cat "$TMP/d.err")"
	[ "$(stat -c %a "$TMP/xdg/sqlprof")" = 700 ] || fail "socket directory not 0700"
	kill -INT "$AG"
	wait "$AG" || fail "agent exited $? on SIGINT"
else
	def=$("$SQLPROF" env | sed -n 's/^export SQLPROF_SOCK=//p')
	[ "$def" = "'/run/sqlprof/sock'" ] || fail "default socket for root: $def"
fi

mkdir -m 700 "$TMP/run"
S=$TMP/run/s/sock
"$SQLPROF" agent -o "$TMP/a.db" --socket "$S" 2>"$TMP/a.err" &
AG=$!
trap 'kill -9 $AG 2>/dev/null; rm -rf "$TMP"' EXIT
wait_started "$S" "$AG" || fail "no agent socket: $(cat "$TMP/a.err")"
[ "$(stat -c %a "$TMP/run/s")" = 700 ] || fail "socket directory not 0700"
"$SQLPROF" agent -o "$TMP/b.db" --socket "$S" 2>"$TMP/b.err"
[ $? = 2 ] && grep -q "already listening" "$TMP/b.err" || fail "a second agent was not refused: $(cat "$TMP/b.err")"
kill -9 "$AG"
wait "$AG" 2>/dev/null
[ -S "$S" ] || fail "the killed agent's socket is gone (the test needs it stale)"
"$SQLPROF" agent -o "$TMP/a.db" --socket "$S" 2>"$TMP/a2.err" &
AG=$!
for _ in $(seq 1 250); do grep -q listening "$TMP/a2.err" && break; sleep 0.02; done
grep -q listening "$TMP/a2.err" || fail "stale socket not taken over: $(cat "$TMP/a2.err")"
kill -TERM "$AG"
wait "$AG" || fail "agent exited $? on SIGTERM"
sqlite3 "$TMP/a.db" "SELECT value FROM meta WHERE key = 'command'" | grep -q "sqlprof agent" ||
	fail "no profile written at SIGTERM"

mkdir -m 777 "$TMP/open"
"$SQLPROF" agent -o "$TMP/c.db" --socket "$TMP/open/sock" 2>"$TMP/c.err"
[ $? = 2 ] || fail "a socket directory others may write in was accepted"
"$SQLPROF" agent --interval 0 --socket "$TMP/run/s/sock" 2>/dev/null
[ $? = 2 ] || fail "--interval 0 was accepted"
exit 0
