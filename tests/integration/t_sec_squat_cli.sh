#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_sec_squat_cli.sh - issue 23, items 1a (the CLI's half) and 1c: without
# XDG_RUNTIME_DIR, `sqlprof env` and `sqlprof agent` use
# /tmp/sqlprof-UID/sock. Another local user who creates that directory
# first would receive the victim's processes (their SQL and their
# statistics memfds). As two users made for the test (useradd, as root; run as them
# with setpriv):
# a directory the other user made (also 0700, also with the victim's
# name), a symbolic link to a directory of the victim's, and a directory of
# the victim's that is not 0700 are refused by `env` and by the agent with
# exit 2 and a line naming the path, why, and what to do (XDG_RUNTIME_DIR,
# --socket); when nothing is there, `env` makes it 0700 and the agent
# listens in it. The agent takes peers of its own uid and root only:
# 20 connections of the other user are refused with one line and counted
# at the end; root's `sqlprof top --once` is answered.
# run-integration: alone (it adds users and uses their /tmp/sqlprof-UID directories)
. "$(dirname "$0")/lib.sh"

[ "$(id -u)" = 0 ] || skip "needs root to make two users (useradd) and run as them"
for t in useradd setpriv; do
	command -v "$t" >/dev/null || skip "no $t"
done
VICTIM=sqlprof-v ATTACKER=sqlprof-a
for u in $VICTIM $ATTACKER; do
	id -u "$u" >/dev/null 2>&1 ||
		useradd --system --no-create-home --shell /usr/sbin/nologin "$u" 2>"$TMP/useradd.err" ||
		skip "useradd $u failed: $(cat "$TMP/useradd.err")"
done
V=$(id -u $VICTIM)
[ -x /usr/bin/python3 ] || skip "no /usr/bin/python3 (the other user runs it)"
# setpriv execs (no process in between): $! is the agent's pid
as() {
	local u=$1
	shift
	setpriv --reuid="$(id -u "$u")" --regid="$(id -g "$u")" --clear-groups env -u XDG_RUNTIME_DIR "$@"
}
as_v() { as $VICTIM "$@"; }
# as_v_bg ...: as_v for `as_v_bg ... &` (the subshell becomes the command)
as_v_bg() { exec setpriv --reuid="$V" --regid="$(id -g $VICTIM)" --clear-groups env -u XDG_RUNTIME_DIR "$@"; }
as_a() { as $ATTACKER "$@"; }
as_v "$SQLPROF" --help >/dev/null 2>&1 || skip "$VICTIM cannot run $SQLPROF (a directory on its path is closed)"
chmod 0711 "$TMP"
D=/tmp/sqlprof-$V
cleanup() {
	[ -n "${AG:-}" ] && kill -9 "$AG" 2>/dev/null
	rm -rf "$D" "$TMP"
}
AG=
trap cleanup EXIT
rm -rf "$D"
mkdir -m 0777 "$TMP/w" # the agents' profiles, written as the victim

# refused WHAT WANT: env and the agent, as the victim, exit 2 with a line
# that names $D, says WANT, and says what to do
refused() {
	local what=$1 want=$2 rc
	as_v "$SQLPROF" env >"$TMP/env.out" 2>"$TMP/env.err"
	rc=$?
	[ "$rc" = 2 ] || fail "$what: env exit $rc, printed: $(cat "$TMP/env.out" "$TMP/env.err")"
	grep -q "$D" "$TMP/env.err" && grep -q "$want" "$TMP/env.err" &&
		grep -q XDG_RUNTIME_DIR "$TMP/env.err" && grep -q -- --socket "$TMP/env.err" ||
		fail "$what: env's message: $(cat "$TMP/env.err")"
	[ ! -s "$TMP/env.out" ] || fail "$what: env printed $(cat "$TMP/env.out")"
	as_v timeout "$HANG_S" "$SQLPROF" agent -o "$TMP/w/x.db" >"$TMP/ag.out" 2>"$TMP/ag.err"
	rc=$?
	[ "$rc" = 2 ] || fail "$what: agent exit $rc: $(cat "$TMP/ag.err")"
	grep -q "$D" "$TMP/ag.err" && grep -q "$want" "$TMP/ag.err" ||
		fail "$what: agent's message: $(cat "$TMP/ag.err")"
	echo "ok: $what -> $(cat "$TMP/env.err")"
}

# the other user's directory, 0700 (it would listen there), and 0755
as_a mkdir -m 0700 "$D"
refused "a directory of $ATTACKER's (0700)" "owned by uid $(id -u $ATTACKER)"
chmod 0755 "$D"
refused "a directory of $ATTACKER's (0755)" "owned by uid $(id -u $ATTACKER)"
rm -rf "$D"
# a symbolic link (the other user's) to a directory of the victim's
mkdir -m 0700 "$TMP/vdir" && chown $VICTIM "$TMP/vdir"
as_a ln -s "$TMP/vdir" "$D"
refused "a symbolic link to a directory of $VICTIM's" "symbolic link"
rm -f "$D"
# the victim's own, but others may read it
as_v mkdir -m 0755 "$D"
refused "a directory of $VICTIM's, 0755" "mode 0755"
rm -rf "$D"

# nothing there: env makes it, 0700, the victim's; the agent listens in it
as_v "$SQLPROF" env >"$TMP/env.out" 2>"$TMP/env.err" || fail "env with nothing there: exit $?: $(cat "$TMP/env.err")"
grep -q "SQLPROF_SOCK='$D/sock'" "$TMP/env.out" || fail "env printed $(cat "$TMP/env.out")"
[ "$(stat -c '%U %a %F' "$D")" = "$VICTIM 700 directory" ] || fail "$D is $(stat -c '%U %a %F' "$D")"
rm -rf "$D"
as_v_bg "$SQLPROF" agent -o "$TMP/w/v.db" --interval 0.5 2>"$TMP/agent.err" &
AG=$!
wait_started "$D/sock" "$AG" || fail "the victim's agent did not listen in $D: $(cat "$TMP/agent.err")"
[ "$(stat -c '%U %a' "$D")" = "$VICTIM 700" ] || fail "$D is $(stat -c '%U %a' "$D")"
kill -TERM "$AG"
wait "$AG" || fail "agent exit $?: $(cat "$TMP/agent.err")"
AG=

# peers: an agent of the victim's on a socket the other user can reach
# (umask 0, a directory of the victim's others may search but not write)
mkdir -m 0711 "$TMP/open" && chown $VICTIM "$TMP/open"
S=$TMP/open/sock
as_v_bg sh -c 'umask 0; exec "$0" agent -o "$1" --socket "$2" --interval 0.5' \
	"$SQLPROF" "$TMP/w/p.db" "$S" 2>"$TMP/peer.err" &
AG=$!
wait_started "$S" "$AG" || fail "no agent on $S: $(cat "$TMP/peer.err")"
as_a /usr/bin/python3 -c '
import socket, sys
for _ in range(20):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.connect(sys.argv[1])
    s.settimeout(10)
    try:
        s.send(b"x" * 64)
        if s.recv(1) != b"":  # closed by the agent
            sys.exit(1)
    except (ConnectionResetError, BrokenPipeError):
        pass  # closed by the agent, the message unread
    s.close()
' "$S" || fail "a connection of $ATTACKER's was not closed by the agent"
timeout "$HANG_S" "$SQLPROF" top --once --socket "$S" >"$TMP/top.out" 2>"$TMP/top.err" ||
	fail "root's sqlprof top --once: exit $?: $(cat "$TMP/top.err")"
kill -TERM "$AG"
wait "$AG" || fail "agent exit $?: $(cat "$TMP/peer.err")"
AG=
n=$(grep -c "refused" "$TMP/peer.err")
[ "$n" = 2 ] || fail "$n lines about refused peers (want the first and the count): $(cat "$TMP/peer.err")"
grep -q "refused a connection from uid $(id -u $ATTACKER)" "$TMP/peer.err" &&
	grep -q "20 connections refused" "$TMP/peer.err" || fail "the agent's log: $(cat "$TMP/peer.err")"
grep -q "bad message" "$TMP/peer.err" && fail "a refused peer's message was read: $(cat "$TMP/peer.err")"
echo "ok: 20 connections of uid $(id -u $ATTACKER) refused with $n lines; root's top answered"
exit 0
