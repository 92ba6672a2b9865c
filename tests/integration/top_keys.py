# SPDX-License-Identifier: MIT
# top_keys.py SQLPROF PROFILE: drive `sqlprof top PROFILE` on a pseudo
# terminal (t_report_small.sh): the key-hint line is drawn; c sorts by
# count; 1 shows the first row's query (its id, whole text and site); any
# key goes back to the table; q quits with exit 0. Every wait is capped
# (30 s), never a verdict on speed.
import os, pty, re, select, sys, time

sqlprof, profile = sys.argv[1], sys.argv[2]
pid, fd = pty.fork()
if pid == 0:
    os.environ["TERM"] = "xterm"
    os.execv(sqlprof, [sqlprof, "top", "--delay", "0.2", profile])
buf = b""


def wait_for(pattern, what):
    global buf
    end = time.time() + 30
    while time.time() < end:
        m = re.search(pattern, buf)
        if m:
            buf = buf[m.end():]
            return m
        r, _, _ = select.select([fd], [], [], 0.5)
        if r:
            try:
                buf += os.read(fd, 65536)
            except OSError:
                break
    sys.exit("top_keys: no %s after 30 s; the screen said: %r" % (what, buf[-1500:]))


wait_for(rb"keys: q quit  sort: t time, c count, x exec/s, m mean, p p95, r rows, e errors  1-9: a row's query",
         "key-hint line")
wait_for(rb"EXEC/S", "table")
os.write(fd, b"c")
wait_for(rb"sorted by count", "sort by count after c")
os.write(fd, b"1")
m = wait_for(rb"query ([0-9a-f]{16}) \((stmt|exec)\)", "drill-down after 1")
wait_for(rb"site: ", "site in the drill-down")
wait_for(rb"per execution: min ", "figures in the drill-down")
print("drill-down: query %s" % m.group(1).decode())
os.write(fd, b"z")
wait_for(rb"EXEC/S", "table again after a key")
os.write(fd, b"q")
end = time.time() + 30
while time.time() < end:
    p, st = os.waitpid(pid, os.WNOHANG)
    if p:
        break
    try:
        select.select([fd], [], [], 0.2) and os.read(fd, 65536)
    except OSError:
        pass
else:
    os.kill(pid, 9)
    sys.exit("top_keys: top did not quit on q")
if not os.WIFEXITED(st) or os.WEXITSTATUS(st) != 0:
    sys.exit("top_keys: top ended with status %r" % st)
