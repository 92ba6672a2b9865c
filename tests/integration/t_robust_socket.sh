#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_robust_socket.sh - the collector's endpoint while a recording runs:
# 1. the socket ($SQLPROF_SOCK, as the target sees it) lives in a directory
#    of its own, mode 0700, owned by us;
# 2. (as root) a process of another uid (nobody) cannot connect: EACCES;
# 3. (as root) with the directory opened up to 0755 and the socket to 0777,
#    nobody can connect, but the collector refuses it (SO_PEERCRED): it
#    says "refused a connection from uid N" and nothing nobody sent - a
#    well-formed HELLO, SQL and execution - reaches the profile;
# 4. the same forged message sent by our own uid is accepted (so 3 tests
#    the uid check, not a malformed message).
. "$(dirname "$0")/lib.sh"
need_prog longrun
SYSPY=/usr/bin/python3
[ -x "$SYSPY" ] || SYSPY=$PYTHON

# A client that connects to the socket and sends one forged message: a
# HELLO, an SQL text holding MARKER and one execution of it, in its own
# pid's name. Prints connect=ok|errno-name, then sent=N|errno-name, then
# closed=yes when the collector closes the connection (waits up to 10 s).
cat >"$TMP/client.py" <<'EOF_PY'
import errno, os, socket, struct, sys
path, marker = sys.argv[1], sys.argv[2].encode()
pid = os.getpid()
def rec(rtype, body):
    n = 8 + len(body)
    pad = (-n) % 8
    return struct.pack("<HHI", rtype, 0, n + pad) + body + b"\0" * pad
sql = b"SELECT '" + marker + b"'"
sql_id = 0x5eed0000 + pid
exe = b"/forged/" + marker
hello = rec(1, struct.pack("<IIIIQQQQII", pid, pid, 1, 0, 0, 0, 0, 0, 1, len(exe)) + exe)
text = rec(2, struct.pack("<IIQII", pid, pid, sql_id, len(sql), len(sql)) + sql)
body = hello + text
msg = struct.pack("<IHHIIQQ", 0x46525053, 6, 0, pid, 32 + len(body), 1, 0) + body  # version 6
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
try:
    s.connect(path)
except OSError as e:
    print("connect=" + errno.errorcode.get(e.errno, str(e.errno)))
    sys.exit(0)
print("connect=ok")
try:
    print("sent=%d" % s.send(msg))
except OSError as e:
    print("sent=" + errno.errorcode.get(e.errno, str(e.errno)))
if len(sys.argv) > 3:  # wait until the collector hangs up
    s.settimeout(10)
    try:
        print("closed=yes" if s.recv(16) == b"" else "closed=data")
    except ConnectionResetError:
        print("closed=yes")
    except OSError as e:
        print("closed=" + str(e))
s.close()
EOF_PY

as_nobody() {
	setpriv --reuid=nobody --regid=nogroup --clear-groups "$@" 2>/dev/null ||
		su -s /bin/sh nobody -c "$(printf '%q ' "$@")"
}

# The target writes its SQLPROF_SOCK, then longrun waits for $TMP/go.
mkdir -p "$TMP/pub"
chmod 0711 "$TMP" # others may pass through $TMP to $TMP/pub, not list it
cat >"$TMP/run.sh" <<EOS
echo "\$SQLPROF_SOCK" >"$TMP/sockpath"
exec "$PROGS/longrun" 20000 "$TMP/started" "$TMP/go"
EOS
TMPDIR=$TMP/pub "$SQLPROF" record -q -o "$TMP/p.db" -- sh "$TMP/run.sh" \
	>"$TMP/rec.out" 2>"$TMP/rec.err" &
coll=$!
trap 'touch "$TMP/go"' EXIT
wait_started "$TMP/started" "$coll" || fail "longrun never started under sqlprof: $(cat "$TMP/rec.err")"
sock=$(cat "$TMP/sockpath")
dir=$(dirname "$sock")
[ -S "$sock" ] || fail "SQLPROF_SOCK=$sock is not a socket"
case $dir in "$TMP/pub/sqlprof."*) ;; *) fail "socket $sock not in a private directory under TMPDIR" ;; esac
read -r mode owner <<<"$(stat -c '%a %u' "$dir")"
echo "socket $sock, directory mode $mode, owner $owner"
[ "$mode" = 700 ] || fail "socket directory $dir has mode $mode, expected 700"
[ "$owner" = "$(id -u)" ] || fail "socket directory $dir is owned by $owner, not by us"

if [ "$(id -u)" != 0 ] || ! id nobody >/dev/null 2>&1; then
	touch "$TMP/go"
	wait "$coll"
	skip "other-uid checks need root (to become nobody): directory mode checked only"
fi
nobody_uid=$(id -u nobody)

# 2. Another uid, the directory as sqlprof made it.
r=$(as_nobody "$SYSPY" "$TMP/client.py" "$sock" INJECTED_BY_NOBODY_0700)
echo "nobody, directory 0700: $r"
[ "$r" = "connect=EACCES" ] || fail "nobody connecting through the 0700 directory: $r, expected connect=EACCES"

# 3. Opened up: the kernel lets nobody connect; SO_PEERCRED must not.
chmod 0755 "$dir" && chmod 0777 "$sock" || fail "cannot open up $dir"
r=$(as_nobody "$SYSPY" "$TMP/client.py" "$sock" INJECTED_BY_NOBODY_0755 wait)
echo "nobody, directory 0755: $(echo $r)"
case $r in connect=ok*closed=yes) ;; *) fail "nobody with the directory open: $(echo $r), expected connect=ok and closed by the collector" ;; esac
chmod 0700 "$dir"

# 4. The same message from our own uid is taken.
r=$("$SYSPY" "$TMP/client.py" "$sock" INJECTED_BY_SAME_UID)
echo "same uid: $(echo $r)"

touch "$TMP/go"
wait "$coll"
rc=$?
[ "$rc" -eq 5 ] || fail "sqlprof record exited $rc, expected longrun's 5: $(cat "$TMP/rec.err")"
grep -q "refused a connection from uid $nobody_uid\$" "$TMP/rec.err" ||
	fail "no 'refused a connection from uid $nobody_uid' message; stderr: $(cat "$TMP/rec.err")"
[ ! -e "$dir" ] || fail "the socket directory $dir was left behind"
for m in INJECTED_BY_NOBODY_0700 INJECTED_BY_NOBODY_0755; do
	! grep -a -q "$m" "$TMP/p.db" || fail "the profile holds data nobody sent ($m)"
done
grep -a -q INJECTED_BY_SAME_UID "$TMP/p.db" ||
	fail "the well-formed message from our own uid is not in the profile: the uid test proves nothing"
n=$(sqlite3 "$TMP/p.db" "SELECT count(*) FROM processes WHERE exe LIKE '/forged/INJECTED_BY_NOBODY%'")
[ "$n" = 0 ] || fail "$n process rows from nobody"
exit 0
