#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_sec_squat.sh - issue 23 item 1a: the preload sends nothing to a
# listener it does not trust. Another local user (spsquat) who made the
# victim's socket directory first and listens in it, or who listens in a
# directory the victim trusts, receives no byte and no descriptor (before:
# the rings' memfds, SQL texts with their literals, and the statistics
# memfd writable). A victim of another uid (spvictim) and root, each with:
# 1. the directory made by the squatter (0777, or 0700 and its own);
# 2. the victim's own 0700 directory, the listening socket bound there and
#    listen() called after dropping to the squatter's uid (SO_PEERCRED is
#    the listener's at listen);
# 3. the victim's own directory opened to 0755 with the victim's listener;
# and the program's output and exit status are as without the preload.
# run-integration: alone (it adds users and uses their /tmp/sqlprof-UID directories)
. "$(dirname "$0")/lib.sh"
need_prog trivial
[ "$(id -u)" = 0 ] || skip "needs root to make the users"
SYSPY=/usr/bin/python3
[ -x "$SYSPY" ] || SYSPY=$PYTHON
for u in spsquat spvictim; do
	id -u "$u" >/dev/null 2>&1 || useradd -M -r -s /usr/sbin/nologin "$u" >/dev/null 2>&1 ||
		skip "cannot create user $u"
done
SQ=$(id -u spsquat) VI=$(id -u spvictim)
# the victim runs the built tree's files: reachable by every uid
chmod o+x "$TMP"
R=$TMP/res && mkdir "$R" && chmod 1777 "$R" # the listeners' notes
cp "$BUILD/lib/libsqlprof.so" "$PROGS/trivial" "$TMP/" && chmod 0755 "$TMP/libsqlprof.so" "$TMP/trivial"

# listener DIR_MODE LISTEN_UID PATH OUT: bind PATH, drop to LISTEN_UID,
# listen, then note every byte and descriptor received for 3 s.
cat >"$TMP/listen.py" <<'EOF_PY'
import os, socket, sys, array, time
path, uid, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.bind(path)
os.chmod(path, 0o777)
if uid != os.getuid():
    os.setgid(uid); os.setuid(uid)
s.listen(8)
open(out + ".ready", "w").close()
s.settimeout(0.2)
got_bytes = got_fds = 0
end = time.time() + 4
conns = []
while time.time() < end:
    try:
        c, _ = s.accept(); c.setblocking(False); conns.append(c)
    except OSError:
        pass
    for c in conns:
        try:
            fds = array.array("i")
            msg, anc, _, _ = c.recvmsg(1 << 20, socket.CMSG_SPACE(64 * 4))
            got_bytes += len(msg)
            for lvl, typ, data in anc:
                if lvl == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
                    got_fds += len(data) // 4
        except OSError:
            pass
with open(out, "w") as f:
    f.write("%d %d\n" % (got_bytes, got_fds))
EOF_PY

# case NAME VICTIM_UID DIR_OWNER DIR_MODE LISTEN_UID
case_run() {
	local name=$1 vuid=$2 owner=$3 mode=$4 luid=$5 d=$TMP/$1
	mkdir "$d" && chown "$owner" "$d" && chmod "$mode" "$d"
	rm -f "$R/$name.out" "$R/$name.out.ready"
	"$SYSPY" "$TMP/listen.py" "$d/sock" "$luid" "$R/$name.out" &
	local lp=$!
	for i in $(seq 1 200); do [ -e "$R/$name.out.ready" ] && break; sleep 0.02; done
	[ -e "$R/$name.out.ready" ] || fail "$name: listener did not start"
	local out rc
	out=$(cd "$TMP" && timeout "$HANG_S" setpriv --reuid="$vuid" --regid="$vuid" --clear-groups \
		env LD_PRELOAD="$TMP/libsqlprof.so" SQLPROF_SOCK="$d/sock" SQLPROF_RATE=1 ./trivial 2000)
	rc=$?
	[ "$rc" = 0 ] || fail "$name: trivial exited $rc under the preload"
	[ "$out" = "$want" ] || fail "$name: output changed: '$out' vs '$want'"
	wait "$lp"
	read -r b f <"$R/$name.out"
	[ "$b" = 0 ] && [ "$f" = 0 ] || fail "$name: the untrusted listener received $b bytes and $f descriptors"
	echo "$name: 0 bytes, 0 descriptors"
}
want=$(cd "$TMP" && ./trivial 2000)
# the victim's uid for each case: spvictim, and root
for v in "$VI" 0; do
	case_run "squat777.$v" "$v" "$SQ" 0777 "$SQ"
	case_run "squat700.$v" "$v" "$SQ" 0711 "$SQ"
	case_run "peer.$v" "$v" "$v" 0711 "$SQ"
	case_run "open.$v" "$v" "$v" 0755 "$v"
done

# the control: the victim's own 0700 directory and its own listener gets
# the HELLO and its descriptors (so the cases above test the checks)
d=$TMP/own && mkdir "$d" && chown "$VI" "$d" && chmod 0700 "$d"
"$SYSPY" "$TMP/listen.py" "$d/sock" "$VI" "$R/own.out" &
lp=$!
for i in $(seq 1 200); do [ -e "$R/own.out.ready" ] && break; sleep 0.02; done
(cd "$TMP" && timeout "$HANG_S" setpriv --reuid="$VI" --regid="$VI" --clear-groups \
	env LD_PRELOAD="$TMP/libsqlprof.so" SQLPROF_SOCK="$d/sock" ./trivial 2000 >/dev/null)
wait "$lp"
read -r b f <"$R/own.out"
[ "$b" -gt 0 ] && [ "$f" -gt 0 ] || fail "control: the trusted listener received $b bytes, $f descriptors"
echo "control: $b bytes, $f descriptors"
exit 0
