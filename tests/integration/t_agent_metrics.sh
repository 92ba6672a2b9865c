#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_agent_metrics.sh - `sqlprof agent --metrics`: (1) counters continue
# across an agent SIGKILL and restart on the same profile (every series of
# a running service's query, buckets and sum included, at least what it
# was before the kill; 503 while the service reconnects, never a lower
# value) and end at the service's exact count, its query_id the report's
# fingerprint_id; (2) a Python program with
# 302 fingerprints under --metrics-top 200: the exposition passes
# `promtool check metrics`, 200 fingerprints have series of their own and
# the rest is query_id="other", with executions, histogram counts and
# +Inf buckets summing to the exact 700, and the agent's profile, once it
# stopped, holds the same 700 with each named series' count under its
# fingerprint_id; a quoted identifier with "",
# a backslash and a newline is escaped as the format wants and reads back
# as its fingerprint; (3) 404 for other paths, 405 for POST; (4) no
# descriptor more after 200 connections (50 scrapes, 150 404s); (5) bound only where told
# (127.0.0.1, [::1]); bad addresses and a port in use: exit 2.
. "$(dirname "$0")/lib.sh"
command -v curl >/dev/null || skip "curl not installed"
command -v promtool >/dev/null || skip "promtool not installed (Debian package prometheus)"
agent_setup
PY3=/usr/bin/python3
[ -x $PY3 ] || PY3=$PYTHON
PORT=$("$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
URL=http://127.0.0.1:$PORT/metrics
ITD=$(cd "$(dirname "$0")" && pwd)

scrape() { # OUT: the exposition into OUT; prints the HTTP status
	curl -s -m 5 -o "$1" -w '%{http_code}' "$URL"
}
# values FILE QID: "name{labels} value" lines of one query id, sorted
values() {
	"$PYTHON" - "$1" "$2" "$ITD" <<'EOF'
import json, sys
sys.path.insert(0, sys.argv[3])
import prom
for n, l, v in sorted(prom.series(open(sys.argv[1]).read()), key=lambda s: (s[0], json.dumps(s[1], sort_keys=True))):
    if l.get("query_id") == sys.argv[2]:
        print("%s %s %r" % (n, json.dumps(l, sort_keys=True), v))
EOF
}

# (1) a restart in the middle of a service's life: killed just after a
# scrape that saw at least 20 executions more than the agent's profile
# held (polled, not a fixed 2.5 s). --interval 10: the kill must come
# before the agent's next write, which with --interval 2 a loaded machine
# (stress.sh 8) often missed, and the part was not checked
agent_start --metrics "127.0.0.1:$PORT" --interval 10
eval "$("$SQLPROF" env --socket "$S")"
# the service runs until told to stop: the kill falls inside its life
SQLPROF_RATE=0.1 "$PROGS/service" 100 0 "$TMP/count" "$TMP/stop" &
SV=$!
unset LD_PRELOAD SQLPROF_SOCK
in_profile() { # executions of the service's query in the agent's profile
	[ -e "$P" ] && sqlite3 -cmd '.timeout 5000' "$P" \
		"SELECT coalesce(sum(count), 0) FROM queries WHERE sql = 'SELECT ?1 + 1'" 2>/dev/null
}
in_scrape() { # FILE: its executions_total of the service's query
	grep '^sqlprof_query_executions_total{.*query="SELECT ? + ?"' "$1" | awk '{ print int($NF) }'
}
ahead() { # the profile written once with the query, the scrape 20 ahead
	local p m
	p=$(in_profile) && [ "${p:-0}" -gt 0 ] && [ "$(scrape "$TMP/m1.txt")" = 200 ] &&
		m=$(in_scrape "$TMP/m1.txt") && [ "${m:-0}" -ge $((p + 20)) ]
}
wait_until 60 ahead || fail "after 60 s no scrape 20 executions ahead of the profile: $(in_profile), $(head -c 2000 "$TMP/m1.txt")"
code=200
kill -9 "$AG"
wait "$AG" 2>/dev/null
AG=
if ! kill -0 "$SV" 2>/dev/null; then
	wait "$SV"
	fail "(1): the service ended before it was told to ($?)"
else
	part1=1
	[ "$(in_profile)" -lt "$(in_scrape "$TMP/m1.txt")" ] ||
		not_checked "a restart with the profile behind the scrape (the agent wrote just before its kill)"
fi
if [ "$part1" = 1 ]; then
[ "$code" = 200 ] || fail "no metrics from the agent"
QID=$(grep '^sqlprof_query_executions_total{.*query="SELECT ? + ?"' "$TMP/m1.txt" |
	sed 's/.*query_id="\([0-9a-f]*\)".*/\1/')
[ -n "$QID" ] || fail "the service's query is not in the metrics: $(head -c 2000 "$TMP/m1.txt")"
values "$TMP/m1.txt" "$QID" >"$TMP/v1.txt"
echo "before the kill: $(grep executions_total "$TMP/v1.txt")"
agent_start --metrics "127.0.0.1:$PORT" --interval 2
seen503=0
for _ in $(seq 1 100); do
	code=$(scrape "$TMP/m2.txt")
	[ "$code" = 503 ] && seen503=$((seen503 + 1))
	[ "$code" = 200 ] && grep -q "query_id=\"$QID\"" "$TMP/m2.txt" && break
	sleep 0.1
done
[ "$code" = 200 ] || fail "the restarted agent answered $code"
values "$TMP/m2.txt" "$QID" >"$TMP/v2.txt"
echo "after the restart ($seen503 scrapes answered 503 meanwhile): $(grep executions_total "$TMP/v2.txt")"
"$PYTHON" - "$TMP/v1.txt" "$TMP/v2.txt" <<'EOF' || fail "a series went down across the restart"
import sys
def load(p):
    d = {}
    for ln in open(p):
        k, v = ln.rsplit(" ", 1)
        d[k] = float(v)
    return d
a, b = load(sys.argv[1]), load(sys.argv[2])
assert len(a) == 21, "%d series of the query before" % len(a)
bad = [k for k in a if k not in b or b[k] < a[k]]
for k in bad:
    print("went down or vanished: %s %s -> %s" % (k, a[k], b.get(k)))
sys.exit(1 if bad else 0)
EOF
touch "$TMP/stop"
wait "$SV" || fail "the service exited $?"
n=$(cat "$TMP/count")
# the service's last executions reach the agent: polled (cap 60 s)
at_n() { scrape "$TMP/m3.txt" >/dev/null && [ "$(in_scrape "$TMP/m3.txt")" = "$n" ]; }
wait_until 60 at_n
got=$(values "$TMP/m3.txt" "$QID" | grep '^sqlprof_query_executions_total' | awk '{print $NF}')
echo "service ran $n, the counter says $got"
[ "${got%.0}" = "$n" ] || fail "executions_total is $got at the end, the service ran $n"
values "$TMP/m3.txt" "$QID" >"$TMP/v3.txt"
grep -q "duration_seconds_count.* $n.0\$" "$TMP/v3.txt" ||
	fail "the histogram's count is not $n"
kill -TERM "$AG"
wait "$AG" || fail "the agent exited $? on SIGTERM"
AG=
"$SQLPROF" report --format json "$P" | "$PYTHON" -c '
import json, sys
d = json.load(sys.stdin)
print(" ".join(q["fingerprint_id"] for q in d["queries"] if q["fingerprint"] == "SELECT ? + ?"))' >"$TMP/fpid.txt"
[ "$(cat "$TMP/fpid.txt")" = "$QID" ] || fail "query_id $QID, the report's fingerprint_id $(cat "$TMP/fpid.txt")"
fi # part1

# (2) cardinality, escaping, the format
P=$TMP/agent2.db
agent_start --metrics "127.0.0.1:$PORT" --metrics-top 200
cat >"$TMP/many.py" <<'EOF'
import sqlite3
db = sqlite3.connect(":memory:")
for i in range(300):
    for _ in range(i % 3 + 1):
        db.execute("SELECT %d AS c%d" % (i, i)).fetchall()
# 50 times each: among the costliest, so they have series of their own
for _ in range(50):
    db.execute('SELECT 1 AS "a""b\\c\nd", 2 AS [x\\y]\nFROM\n (SELECT 1)').fetchall()
    db.execute("SELECT\n2\nAS\nnl").fetchall()
db.close()
EOF
eval "$("$SQLPROF" env --socket "$S")"
$PY3 "$TMP/many.py" || fail "the Python program failed"
unset LD_PRELOAD SQLPROF_SOCK
# all 700 reach the agent: polled (cap 60 s), then checked below
all_in() {
	[ "$(scrape "$TMP/m4.txt")" = 200 ] &&
		[ "$(awk '/^sqlprof_query_executions_total\{/ { s += $NF } END { print s + 0 }' "$TMP/m4.txt")" = 700 ]
}
wait_until 60 all_in
[ "$(scrape "$TMP/m4.txt")" = 200 ] || fail "no metrics"
promtool check metrics <"$TMP/m4.txt" >"$TMP/promtool.out" 2>&1 ||
	fail "promtool check metrics: $(head -20 "$TMP/promtool.out")"
echo "promtool check metrics: ok ($(wc -l <"$TMP/m4.txt") lines)"
"$PYTHON" - "$TMP/m4.txt" "$ITD" "$TMP/named.txt" <<'EOF' || fail "cardinality or escaping"
import sys
sys.path.insert(0, sys.argv[2])
import prom
text = open(sys.argv[1]).read()
s = prom.series(text)
ex = [(l, v) for n, l, v in s if n == "sqlprof_query_executions_total"]
named = {l["query_id"] for l, v in ex if l["query_id"] != "other"}
other = [v for l, v in ex if l["query_id"] == "other"]
total = sum(v for l, v in ex)
cnt = sum(v for n, l, v in s if n == "sqlprof_query_duration_seconds_count")
inf = sum(v for n, l, v in s if n == "sqlprof_query_duration_seconds_bucket" and l["le"] == "+Inf")
print("named %d, other %s, executions %d, histogram count %d, +Inf %d" % (len(named), other, total, cnt, inf))
assert len(named) == 200, len(named)
with open(sys.argv[3], "w") as f:
    for l, v in ex:
        if l["query_id"] != "other":
            f.write("%s %d\n" % (l["query_id"], v))
assert other and other[0] > 0
assert total == cnt == inf == 700, (total, cnt, inf)
want = 'SELECT ? AS "a""b\\c?d", ? AS [x\\y] FROM (SELECT ?)'
qs = {l["query"] for l, v in ex}
assert want in qs, [q for q in qs if "a" in q and '"' in q]
# on the wire: the quotes and the backslashes escaped, on one line
assert 'query="SELECT ? AS \\"a\\"\\"b\\\\c?d\\", ? AS [x\\\\y] FROM (SELECT ?)"' in text
assert "SELECT ? AS nl" in qs
# every bucket series is cumulative
b = {}
for n, l, v in s:
    if n == "sqlprof_query_duration_seconds_bucket":
        k = (l["query_id"], l["kind"])
        b.setdefault(k, []).append(v)
assert all(x == sorted(x) for x in b.values())
EOF

# (3) nothing but GET /metrics
for path in / /metric /metrics/x /favicon.ico; do
	c=$(curl -s -m 5 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT$path")
	[ "$c" = 404 ] || fail "GET $path answered $c, not 404"
done
c=$(curl -s -m 5 -o /dev/null -w '%{http_code}' -X POST -d x=1 "$URL")
[ "$c" = 405 ] || fail "POST /metrics answered $c, not 405"
c=$(curl -s -m 5 -o /dev/null -w '%{http_code}' -X DELETE "$URL")
[ "$c" = 405 ] || fail "DELETE /metrics answered $c, not 405"

# (4) descriptors: 200 connections, each its own, 50 of them scrapes of
# the 4,000-line exposition and 150 answered 404 (from one Python process:
# 200 curl scrapes took 120 s at load 12, most of it the agent's writing)
fd0=$(ls /proc/"$AG"/fd | wc -l)
"$PYTHON" - "$URL" <<'EOF' || fail "a scrape failed"
import sys, urllib.error, urllib.request
for i in range(200):
    try:
        with urllib.request.urlopen(sys.argv[1] + ("" if i % 4 == 0 else "/x"), timeout=30) as r:
            assert r.status == 200 and i % 4 == 0, (i, r.status)
            r.read()
    except urllib.error.HTTPError as e:
        assert e.code == 404 and i % 4, (i, e.code)
EOF
# the agent closes its side after the client: polled (cap 10 s)
fds_back() { [ "$(ls /proc/"$AG"/fd | wc -l)" -le "$fd0" ]; }
wait_until 10 fds_back
fd1=$(ls /proc/"$AG"/fd | wc -l)
echo "agent descriptors: $fd0 before 200 connections (50 scrapes), $fd1 after"
[ "$fd1" -le "$fd0" ] || fail "the agent holds $fd1 descriptors after 200 connections, $fd0 before"

# bound where told only: the one listener on PORT is 127.0.0.1's
listeners() { # PORT: the addresses listening on it (/proc/net/tcp, tcp6)
	"$PYTHON" - "$1" <<'EOF'
import socket, struct, sys
port = int(sys.argv[1])
for f, fam in (("/proc/net/tcp", socket.AF_INET), ("/proc/net/tcp6", socket.AF_INET6)):
    try:
        lines = open(f).read().split("\n")[1:]
    except OSError:
        continue
    for ln in lines:
        p = ln.split()
        if len(p) < 4 or p[3] != "0A":
            continue
        addr, prt = p[1].split(":")
        if int(prt, 16) != port:
            continue
        raw = bytes.fromhex(addr)
        raw = b"".join(struct.pack("<I", w) for w in struct.unpack(">%dI" % (len(raw) // 4), raw))
        print(socket.inet_ntop(fam, raw))
EOF
}
[ "$(listeners "$PORT")" = 127.0.0.1 ] || fail "listening on port $PORT: $(listeners "$PORT")"

# a bad address: exit 2 with one line
for bad in nohost 127.0.0.1 127.0.0.1:0 127.0.0.1:99999 127.0.0.1:x "[::1" 256.1.1.1:80; do
	"$SQLPROF" agent -o "$TMP/x.db" --socket "$TMP/run/x/sock" --metrics "$bad" 2>"$TMP/bad.err"
	rc=$?
	[ "$rc" = 2 ] && [ "$(wc -l <"$TMP/bad.err")" = 1 ] && grep -q -- "--metrics" "$TMP/bad.err" ||
		fail "--metrics $bad: exit $rc, $(cat "$TMP/bad.err")"
done
"$SQLPROF" agent -o "$TMP/x.db" --socket "$TMP/run/x/sock" --metrics "127.0.0.1:$PORT" 2>"$TMP/bad.err"
rc=$?
[ "$rc" = 2 ] && grep -q "in use" "$TMP/bad.err" || fail "a port in use: exit $rc, $(cat "$TMP/bad.err")"
kill -TERM "$AG"
wait "$AG" || fail "the agent exited $? on SIGTERM"
AG=
# the profile of (2), complete now the agent stopped: what /metrics said
report_json "$P" "$TMP/r.json"
"$PYTHON" - "$TMP/r.json" "$TMP/named.txt" <<'EOF' || fail "the profile of (2) differs from its metrics"
import json, sys
d = json.load(open(sys.argv[1]))
ids = {}
for q in d["queries"]:
    ids[q["fingerprint_id"]] = ids.get(q["fingerprint_id"], 0) + q["count"]
total = sum(ids.values())
named = dict(ln.split() for ln in open(sys.argv[2]))
bad = [(k, v, ids.get(k)) for k, v in named.items() if ids.get(k) != int(v)]
print("profile: %d executions of %d fingerprints; %d named series, %d of them differ" % (total, len(ids), len(named), len(bad)))
assert total == 700 and len(ids) == 302, (total, len(ids))
assert not bad, bad[:5]
EOF
# IPv6, where the machine has it: [::1] only
if "$PYTHON" -c 'import socket; socket.socket(socket.AF_INET6).bind(("::1", 0))' 2>/dev/null; then
	agent_start --metrics "[::1]:$PORT"
	[ "$(curl -s -g -m 5 -o /dev/null -w '%{http_code}' "http://[::1]:$PORT/metrics")" = 200 ] ||
		fail "no metrics on [::1]:$PORT"
	[ "$(listeners "$PORT")" = ::1 ] || fail "listening on port $PORT: $(listeners "$PORT")"
	echo "[::1]:$PORT: metrics served, the only listener"
	kill -TERM "$AG"
	wait "$AG" || fail "the agent exited $? on SIGTERM"
	AG=
fi
exit 0
