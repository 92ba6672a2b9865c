#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_record_tty_int.sh - one C-c on a real terminal (a pty) reaches the
# command once. The terminal sends SIGINT to its whole foreground process
# group, record and the command alike; record forwards only what the
# command did not get itself. tests/progs/sigstate counts the SIGINTs it
# receives, run by record in a pty:
# 1. record is the pty's session leader, C-c: 1 SIGINT (2 before), five
#    times;
# 2. the same, record held up (SIGSTOP) when C-c comes and let go 0.3 s
#    later, so its copy could never merge with the terminal's still
#    pending one: 1 SIGINT (always 2 before);
# 3. record started by a shell on the pty, C-c: 1 SIGINT;
# 4. kill -INT to record's pid alone: forwarded, 1 SIGINT;
# 5. the command moved to a session of its own (setsid), C-c: it is not in
#    the terminal's foreground group any more, record forwards, 1 SIGINT.
# In each case record writes the profile and exits 0 (the command's status).
. "$(dirname "$0")/lib.sh"
need_prog sigstate
"$PYTHON" -c 'import pty' 2>/dev/null || skip "python3 without the pty module"
cd "$TMP" || exit 1

# The pty driver: runs CMD... on a new pty, waits for READY, then sends
# C-c through the terminal (tty), the same with the pty's first process
# stopped meanwhile (stoptty), or SIGINT to that process (kill); prints
# what the terminal showed and "exit N".
cat >ptydrive.py <<'PY'
import os, pty, select, signal, sys, time
mode, ready, cmd = sys.argv[1], sys.argv[2], sys.argv[3:]
pid, fd = pty.fork()
if pid == 0:
    os.execvp(cmd[0], cmd)
out = b""
def pump(t):
    global out
    end = time.time() + t
    while time.time() < end:
        r, _, _ = select.select([fd], [], [], 0.05)
        if r:
            try:
                d = os.read(fd, 4096)
            except OSError:
                return False
            if not d:
                return False
            out += d
    return True
for _ in range(1000):
    if os.path.exists(ready):
        break
    pump(0.02)
else:
    sys.exit("the program did not start: " + out.decode(errors="replace"))
if mode == "tty":
    os.write(fd, b"\x03")
elif mode == "stoptty":
    os.kill(pid, signal.SIGSTOP)
    time.sleep(0.1)
    os.write(fd, b"\x03")
    pump(0.3)
    os.kill(pid, signal.SIGCONT)
else:
    os.kill(pid, signal.SIGINT)
while pump(0.1):
    pass
_, st = os.waitpid(pid, 0)
sys.stdout.write(out.decode(errors="replace").replace("\r", ""))
print("exit", os.waitstatus_to_exitcode(st))
PY

# case NAME MODE CMD...: run CMD (which starts sigstate count NAME.ready)
# on a pty and check that sigstate got exactly one SIGINT.
case_() {
	local name=$1 mode=$2
	shift 2
	timeout "$HANG_S" "$PYTHON" ptydrive.py "$mode" "$name.ready" "$@" >"$name.out" 2>&1 ||
		fail "$name: the pty driver failed: $(cat "$name.out")"
	# the terminal echoes C-c as ^C, on the same line
	sed -i 's/^^C//' "$name.out"
	grep -q '^SIGINT ' "$name.out" || fail "$name: sigstate printed no count: $(cat "$name.out")"
	grep -q '^SIGINT 1$' "$name.out" ||
		fail "$name: the command got $(grep '^SIGINT ' "$name.out"), expected SIGINT 1: $(cat "$name.out")"
	grep -q '^exit 0$' "$name.out" || fail "$name: record did not exit 0: $(cat "$name.out")"
	[ -s "$name.db" ] || fail "$name: no profile"
	echo "ok: $name: $(grep '^SIGINT ' "$name.out")"
}

for i in 1 2 3 4 5; do
	case_ leader$i tty "$SQLPROF" record -q -o leader$i.db -- "$PROGS/sigstate" count leader$i.ready 500
done
case_ stopped stoptty "$SQLPROF" record -q -o stopped.db -- "$PROGS/sigstate" count stopped.ready 1000
case_ shell tty bash -c "\"$SQLPROF\" record -q -o shell.db -- \"$PROGS/sigstate\" count shell.ready 500; exit \$?"
case_ kill kill "$SQLPROF" record -q -o kill.db -- "$PROGS/sigstate" count kill.ready 500
if command -v setsid >/dev/null; then
	case_ setsid tty "$SQLPROF" record -q -o setsid.db -- setsid "$PROGS/sigstate" count setsid.ready 500
else
	not_checked "no setsid(1): case 4"
fi
exit 0
