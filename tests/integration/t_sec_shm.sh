#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_sec_shm.sh - issue 23 item 1b: no other process can write the memory
# whose addresses the preload's hot path follows. A listener of the
# program's own uid (trusted: it gets the HELLO) takes every descriptor it
# is sent and tries to write each statistics memfd: a shared writable
# mapping, write(2), and the same through /proc/self/fd/N opened again
# read-write - all refused (F_SEAL_FUTURE_WRITE; before: the mapping
# succeeded, and rewriting q->hist[] made the program's queries increment
# a word of the attacker's choice). The ring memfds stay writable (their
# tail is the collector's; the preload bounds what it reads there:
# reserve_slow), and
# the program's output and exit status are as without the preload.
. "$(dirname "$0")/lib.sh"
need_prog trivial
SYSPY=/usr/bin/python3
[ -x "$SYSPY" ] || SYSPY=$PYTHON
cat >"$TMP/grab.py" <<'EOF_PY'
import mmap, os, socket, sys, time
path, out = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.bind(path); s.listen(8)
open(out + ".ready", "w").close()
s.settimeout(10)
c, _ = s.accept()
c.settimeout(3)
res = []
def attempt(what, fn):
    try:
        fn(); res.append(what + "=ok")
    except OSError as e:
        res.append(what + "=" + (os.strerror(e.errno) if e.errno else str(e)))
try:
    while True:
        msg, anc, _, _ = c.recvmsg(1 << 20, socket.CMSG_SPACE(64 * 4))
        if not msg:
            break
        for lvl, typ, data in anc:
            if lvl != socket.SOL_SOCKET or typ != socket.SCM_RIGHTS:
                continue
            for i in range(0, len(data) - len(data) % 4, 4):
                fd = int.from_bytes(data[i:i + 4], "little")
                name = os.readlink("/proc/self/fd/%d" % fd)
                kind = "stats" if "sqlprof-stats" in name else "ring"
                size = os.fstat(fd).st_size
                attempt(kind + ".mmap", lambda: mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE))
                attempt(kind + ".write", lambda: os.pwrite(fd, b"x", 64))
                def reopen():
                    f2 = os.open("/proc/self/fd/%d" % fd, os.O_RDWR)
                    mmap.mmap(f2, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
                attempt(kind + ".reopen", reopen)
except (socket.timeout, OSError):
    pass
with open(out, "w") as f:
    f.write("\n".join(res) + "\n")
EOF_PY
mkdir -m 0700 "$TMP/d"
"$SYSPY" "$TMP/grab.py" "$TMP/d/sock" "$TMP/res" &
lp=$!
wait_started "$TMP/res.ready" "$lp" || fail "listener did not start"
want=$("$PROGS/trivial" 3000)
out=$(LD_PRELOAD="$BUILD/lib/libsqlprof.so" SQLPROF_SOCK="$TMP/d/sock" SQLPROF_SEND_TIMEOUT_MS=50 SQLPROF_RATE=1 \
	timeout "$HANG_S" "$PROGS/trivial" 3000) || fail "trivial exited $? under the preload"
[ "$out" = "$want" ] || fail "output changed"
wait "$lp"
cat "$TMP/res"
grep -q '^stats\.' "$TMP/res" || fail "no statistics memfd was sent (the test checks nothing)"
if grep '^stats\..*=ok' "$TMP/res"; then
	fail "another process could write the statistics memfd"
fi
exit 0
