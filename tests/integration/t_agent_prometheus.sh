#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_agent_prometheus.sh - issue 15, acceptance 1: a real Prometheus
# (Debian's 2.42, on a loopback port, scrape_interval 1s) scrapes `sqlprof
# agent --metrics`; a Python service started with eval "$(sqlprof env
# --socket S)" runs one query at a paced ~100/s for 10 s, logging its own
# count with timestamps. Over the HTTP API, rate(...[4s]) of the query's
# sqlprof_query_executions_total at a moment of the service's steady state
# is the rate the service measured itself over the same 4 s, within 10 %;
# the last sample is the exact count the service ran. No wall time is
# asserted: the rates compared are both measured.
# run-integration: alone (it compares a rate Prometheus measured with the service's own)
. "$(dirname "$0")/lib.sh"
PROM=/usr/bin/prometheus
[ -x "$PROM" ] || skip "prometheus not installed (Debian package prometheus)"
command -v curl >/dev/null || skip "curl not installed"
agent_setup
PR=
SV=
trap '[ -n "$SV" ] && kill -9 "$SV" 2>/dev/null; [ -n "$PR" ] && kill -9 "$PR" 2>/dev/null
[ -n "$AG" ] && kill -9 "$AG" 2>/dev/null; wait 2>/dev/null; rm -rf "$TMP"' EXIT
PY3=/usr/bin/python3
[ -x $PY3 ] || PY3=$PYTHON
read -r MPORT QPORT < <("$PYTHON" -c '
import socket
a, b = socket.socket(), socket.socket()
a.bind(("127.0.0.1", 0)); b.bind(("127.0.0.1", 0))
print(a.getsockname()[1], b.getsockname()[1])')

agent_start --metrics "127.0.0.1:$MPORT" --interval 1
cat >"$TMP/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: sqlprof
    static_configs:
      - targets: ['127.0.0.1:$MPORT']
EOF
"$PROM" --config.file="$TMP/prometheus.yml" --storage.tsdb.path="$TMP/tsdb" \
	--web.listen-address="127.0.0.1:$QPORT" >"$TMP/prom.log" 2>&1 &
PR=$!
API=http://127.0.0.1:$QPORT/api/v1
for _ in $(seq 1 300); do
	[ "$(curl -s -m 2 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$QPORT/-/ready")" = 200 ] && break
	kill -0 "$PR" 2>/dev/null || fail "prometheus exited: $(tail -5 "$TMP/prom.log")"
	sleep 0.1
done
# its first scrape of the agent: up == 1
for _ in $(seq 1 100); do
	curl -s -m 2 "$API/query" --data-urlencode 'query=up{job="sqlprof"}' | grep -q '"1"\]' && break
	sleep 0.1
done
curl -s -m 2 "$API/query" --data-urlencode 'query=up{job="sqlprof"}' | grep -q '"1"\]' ||
	fail "prometheus does not scrape the agent: $(curl -s "$API/targets")"

cat >"$TMP/paced.py" <<'EOF'
import sqlite3, sys, time
secs, log = float(sys.argv[1]), sys.argv[2]
db = sqlite3.connect(":memory:")
out = open(log, "w")
t0 = time.time()
n, next_log = 0, t0
while True:
    t = time.time()
    if t - t0 >= secs:
        break
    due = t0 + n / 100.0
    if t < due:
        time.sleep(due - t)
        continue
    db.execute("SELECT ?1 * 2 AS paced", (n,)).fetchall()
    n += 1
    if t >= next_log:
        out.write("%.6f %d\n" % (time.time(), n))
        out.flush()
        next_log += 0.1
out.write("%.6f %d\n" % (time.time(), n))
out.close()
open(log + ".count", "w").write("%d\n" % n)
EOF
eval "$("$SQLPROF" env --socket "$S")"
SQLPROF_RATE=0.1 $PY3 "$TMP/paced.py" 10 "$TMP/paced.log" &
SV=$!
unset LD_PRELOAD SQLPROF_SOCK
wait "$SV" || fail "the service exited $?"
SV=
n=$(cat "$TMP/paced.log.count")
QID=$(curl -s -m 5 "http://127.0.0.1:$MPORT/metrics" | grep '^sqlprof_query_executions_total{.*AS paced"' |
	sed 's/.*query_id="\([0-9a-f]*\)".*/\1/')
[ -n "$QID" ] || fail "the service's query is not in the metrics"
SEL="sqlprof_query_executions_total{query_id=\"$QID\",kind=\"statement\"}"
# the last scrape holds the whole count
for _ in $(seq 1 100); do
	v=$(curl -s -m 2 "$API/query" --data-urlencode "query=$SEL" |
		"$PYTHON" -c 'import json,sys; r = json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else "")')
	[ "$v" = "$n" ] && break
	sleep 0.1
done
echo "the service ran $n; prometheus's last sample: $v"
[ "$v" = "$n" ] || fail "prometheus's last sample is $v, the service ran $n"

# the rate at the 7th second: prometheus's, and the service's own
"$PYTHON" - "$TMP/paced.log" "$API" "$SEL" <<'EOF' || fail "the rates differ"
import json, sys, urllib.parse, urllib.request
log = [tuple(map(float, l.split())) for l in open(sys.argv[1])]
def count_at(t):  # the service's count at t, between two of its log lines
    for (t0, n0), (t1, n1) in zip(log, log[1:]):
        if t0 <= t <= t1:
            return n0 + (n1 - n0) * (t - t0) / (t1 - t0) if t1 > t0 else n1
    raise SystemExit("no log line around %f" % t)
T = log[0][0] + 7.0
own = (count_at(T) - count_at(T - 4)) / 4.0
q = urllib.parse.urlencode({"query": "rate(%s[4s])" % sys.argv[3], "time": "%.3f" % T})
res = json.load(urllib.request.urlopen(sys.argv[2] + "/query?" + q, timeout=5))["data"]["result"]
assert res, "no rate at %.3f" % T
prom = float(res[0]["value"][1])
print("at +7 s: rate(...[4s]) = %.2f/s, the service measured %.2f/s (%.1f %%)" % (prom, own, 100 * (prom - own) / own))
sys.exit(0 if abs(prom - own) <= 0.10 * own else 1)
EOF
kill -TERM "$AG"
wait "$AG" || fail "the agent exited $? on SIGTERM"
AG=
exit 0
