#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_sec_slowloris.sh - issue 23, item 2: 64 slow clients of the agent's
# /metrics (each a request that never ends: a byte every 5 s) kept it
# unreachable, its 64 connections all taken and each kept alive by the
# idle timeout its bytes reset. Now a request has 10 s from its
# connection to its answer, and a new connection when all are taken
# closes the oldest one that is not being answered: with the 64 slow
# clients connected (and reconnecting when closed), a normal scrape gets
# its answer (curl bounded by `timeout`, no time asserted), twice; the
# agent still serves its processes and exits 0.
. "$(dirname "$0")/lib.sh"
agent_setup
command -v curl >/dev/null || skip "no curl"
PORT=$("$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
URL=http://127.0.0.1:$PORT/metrics
agent_start --metrics "127.0.0.1:$PORT"

# 64 slow clients for at most 40 s; "ready" once all 64 are connected and
# have sent their first bytes; a client closed by the agent reconnects
timeout 45 "$PYTHON" - "$PORT" "$TMP/ready" "$TMP/slow.log" <<'PY' &
import socket, sys, time
port, ready, log = int(sys.argv[1]), sys.argv[2], sys.argv[3]
def slow():
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
    return s
socks = [slow() for _ in range(64)]
open(ready, "w").close()
closed = reconnected = 0
end = time.time() + 40
while time.time() < end:
    time.sleep(5)
    for i, s in enumerate(socks):
        try:
            s.sendall(b"X")
        except OSError:
            closed += 1
            try:
                socks[i] = slow()
                reconnected += 1
            except OSError:
                pass
    with open(log, "w") as f:
        f.write("%d closed, %d reconnected\n" % (closed, reconnected))
PY
SL=$!
for _ in $(seq 1 500); do [ -e "$TMP/ready" ] && break; kill -0 "$SL" 2>/dev/null || break; sleep 0.02; done
[ -e "$TMP/ready" ] || fail "the 64 slow clients did not connect"
for n in 1 2; do
	timeout 20 curl -s -o "$TMP/scrape" "$URL" || fail "scrape $n with 64 slow clients connected: curl exit $? (timeout 20 s)"
	grep -q '^sqlprof_processes ' "$TMP/scrape" || fail "scrape $n: no sqlprof_processes: $(head -3 "$TMP/scrape")"
	echo "ok: scrape $n answered with 64 slow clients connected"
done
kill "$SL" 2>/dev/null
wait "$SL" 2>/dev/null
echo "slow clients: $(cat "$TMP/slow.log" 2>/dev/null || echo "none closed yet")"
kill -TERM "$AG"
wait "$AG" || fail "agent exited $?: $(cat "$TMP/agent.err")"
AG=
exit 0
