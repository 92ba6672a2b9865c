#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_agent_series.sh - issue 15, acceptance 5: per-interval totals and time
# windows. A service started with eval "$(sqlprof env --socket S)" under
# `sqlprof agent --interval 1` runs exactly N1 queries at 200/s (with a
# second, short process beside it), then waits: at least 5 s, and until
# the profile the agent writes holds all N1 in its intervals; then N2 at
# 100/s. The agent is SIGKILLed and started again during the second
# phase (whose second half waits for the new agent). With GAP, the end of
# the interval that holds phase A's last execution (it lies in the gap
# however loaded the machine), as the bound: `report --until GAP` counts exactly N1, `--since GAP` exactly N2,
# the whole report N1 + N2, and `--last D` (D from GAP to the profile's
# end, to the ns) N2; GAP as ISO 8601 (UTC and local) gives the same.
# Every query's interval rows (and histogram buckets) sum to its totals.
# Counts only: no wall time is asserted.
. "$(dirname "$0")/lib.sh"
agent_setup
command -v sqlite3 >/dev/null || skip "no sqlite3 shell"
need_prog phased

N1=300
N2=400
start_agent() {
	local before
	before=$(grep -c listening "$TMP/agent.err" 2>/dev/null)
	"$SQLPROF" agent -o "$P" --socket "$S" --interval 1 2>>"$TMP/agent.err" &
	AG=$!
	for _ in $(seq 1 250); do
		[ "$(grep -c listening "$TMP/agent.err")" -gt "${before:-0}" ] && return 0
		kill -0 "$AG" 2>/dev/null || break
		sleep 0.02
	done
	fail "the agent did not listen on $S: $(cat "$TMP/agent.err")"
}
# count: the executions of the service's query in `report --format json ARGS`
count() {
	"$SQLPROF" report --format json "$@" "$P" >"$TMP/w.json" 2>"$TMP/w.err" ||
		fail "report $* exited $?: $(cat "$TMP/w.err")"
	"$PYTHON" -c '
import json, sys
d = json.load(open(sys.argv[1]))
print(sum(q["count"] for q in d["queries"] if "?" in q["sql"] and "+" in q["sql"]))' "$TMP/w.json"
}

start_agent
mkdir "$TMP/out"
eval "$("$SQLPROF" env --socket "$S")" || fail "sqlprof env failed"
SQLPROF_RATE=0.1 timeout 600 "$PROGS/phased" $N1 200 5000 $N2 100 "$TMP/out" "$TMP/out/go" "$TMP/out/go2" &
SV=$!
# a second process in phase A, over before the agent is killed: its part
# of the totals (and of the latency histogram) is carried by the profile
SQLPROF_RATE=0.1 timeout "$HANG_S" "$PROGS/service" 100 800 "$TMP/count2" &
SV2=$!
unset LD_PRELOAD SQLPROF_SOCK
wait "$SV2" || fail "the second process exited $?"
N1=$((N1 + $(cat "$TMP/count2")))
wait_started "$TMP/out/gap" "$SV" || fail "the service did not end its first phase"
# Phase B waits until the profile's intervals hold all of phase A (polled,
# up to 120 s), so that an interval boundary lies between the phases
# however late the agent is (with a fixed gap, a loaded machine, stress.sh
# 8, delayed it past the gap)
in_intervals() {
	sqlite3 -cmd '.timeout 5000' "$P" "SELECT COALESCE(SUM(iq.count), 0)
	  FROM interval_queries iq JOIN queries q USING (fp_id, kind)
	  WHERE q.sql = 'SELECT ?1 + 1'" 2>/dev/null
}
phase_a_in() { [ -e "$P" ] && r=$(in_intervals) && [ "$r" = "$N1" ]; }
wait_until 120 phase_a_in || fail "after 120 s the profile's intervals hold '${r:-}' of phase A's $N1"
touch "$TMP/out/go"
wait_started "$TMP/out/b" "$SV" || fail "the service did not reach its second phase"
sleep 1
kill -9 "$AG"
wait "$AG" 2>/dev/null
AG=
start_agent
# phase B's second half once the new agent listens: the service connects
# to it again and its sampled executions (the slices of the Perfetto
# check below) reach it; the first agent's are not carried over
# (docs/service.md, Restarting the agent), and beside stress.sh 8 the
# restart took past the whole phase B, which left no slice at all
touch "$TMP/out/go2"
wait "$SV" || fail "the service exited $?"
sleep 1.5 # one more write of the profile after the service's end
kill -TERM "$AG"
wait "$AG" || fail "the agent exited $? on SIGTERM: $(cat "$TMP/agent.err")"
AG=
grep -q "continued" "$TMP/agent.err" || fail "the second agent did not continue the profile"
# The bound: the end of the interval that holds phase A's last execution,
# in the final profile (the one read while phase B waited may have grown
# since: an interval that saw nothing new is extended by the next write)
b=$(sqlite3 "$P" "SELECT MIN(end_ns) FROM (SELECT i.end_ns, SUM(COALESCE(x.c, 0)) OVER
  (ORDER BY i.start_ns) cum FROM intervals i LEFT JOIN (SELECT start_ns, SUM(iq.count) c
  FROM interval_queries iq JOIN queries q USING (fp_id, kind) WHERE q.sql = 'SELECT ?1 + 1'
  GROUP BY start_ns) x USING (start_ns)) WHERE cum = $N1")
[ -n "$b" ] || fail "no interval boundary has phase A's $N1 executions before it: $(sqlite3 "$P" 'SELECT * FROM intervals')"
GAP=$("$PYTHON" -c 'import sys; n = int(sys.argv[1]); print("@%d.%09d" % (n // 10**9, n % 10**9))' "$b")
echo "bound (the end of the interval with phase A's last execution) $GAP"

all=$(count)
until_gap=$(count --until "$GAP")
since_gap=$(count --since "$GAP")
echo "whole $all, --until GAP $until_gap, --since GAP $since_gap (ran $N1 + $N2)"
[ "$all" -eq $((N1 + N2)) ] || fail "the whole profile counts $all, the service ran $((N1 + N2))"
[ "$until_gap" -eq $N1 ] || fail "--until GAP counts $until_gap, phase A ran $N1"
[ "$since_gap" -eq $N2 ] || fail "--since GAP counts $since_gap, phase B ran $N2"
# the window is in the JSON: it ends at or before GAP
"$PYTHON" - "$TMP/w.json" "$b" <<'PY' || fail "the JSON window is wrong: $(head -c 600 "$TMP/w.json")"
import json, sys
w = json.load(open(sys.argv[1]))["window"]
gap = int(sys.argv[2])
assert w["since_ns"] == gap and w["until_ns"] is None, w
assert w["intervals"] > 0 and w["start_ns"] < gap + 2e9 and w["end_ns"] == w["profile_end_ns"], w
PY
# the same bound in ISO 8601, UTC and local
secs=${GAP#@}
iso_utc=$(date -u -d "@$secs" +%Y-%m-%dT%H:%M:%S.%NZ)
iso_local=$(date -d "@$secs" +%Y-%m-%dT%H:%M:%S.%N)
[ "$(count --until "$iso_utc")" -eq $N1 ] || fail "--until $iso_utc does not count $N1"
[ "$(count --since "$iso_local")" -eq $N2 ] || fail "--since $iso_local does not count $N2"
# --last D, D from GAP to the profile's last interval end
D=$("$PYTHON" -c '
import json, sys
w = json.load(open(sys.argv[1]))["window"]
n = w["profile_end_ns"] - int(sys.argv[2])
print("%d.%09ds" % (n // 10**9, n % 10**9))' "$TMP/w.json" "$b")
last=$(count --last "$D")
echo "--last $D: $last"
[ "$last" -eq $N2 ] || fail "--last $D counts $last, phase B ran $N2"
# the table prints the window it used
"$SQLPROF" report --until "$GAP" "$P" >"$TMP/t.txt" 2>&1 || fail "report --until: $(cat "$TMP/t.txt")"
grep -q "^# window: .* to .*interval" "$TMP/t.txt" || fail "no window line: $(head -5 "$TMP/t.txt")"
# every query's intervals sum to its totals, columns and histogram buckets
bad=$(sqlite3 "$P" "
SELECT q.fp_id, q.kind FROM queries q LEFT JOIN (SELECT fp_id, kind, SUM(count) c,
  SUM(total_ns) t, SUM(wall_ns) w, SUM(rows) r, SUM(errors) e FROM interval_queries
  GROUP BY fp_id, kind) s USING (fp_id, kind)
WHERE COALESCE(s.c, 0) <> q.count OR COALESCE(s.t, 0) <> q.total_ns OR
  COALESCE(s.w, 0) <> q.wall_ns OR COALESCE(s.r, 0) <> q.rows OR COALESCE(s.e, 0) <> q.errors;
SELECT 'hist', fp_id, kind, bucket_ns FROM (SELECT fp_id, kind, bucket_ns, count FROM histograms
  UNION ALL SELECT q.fp_id, q.kind, json_extract(j.value, '\$[0]'), -json_extract(j.value, '\$[1]')
  FROM interval_queries q, json_each(q.buckets) j)
  GROUP BY fp_id, kind, bucket_ns HAVING SUM(count) <> 0;")
[ -z "$bad" ] || fail "intervals that do not sum to the totals: $bad"
# the window's latency histogram: its buckets add up to its count across
# the agent's restart (the dead agent's histograms are carried; a bucket
# may move by one when the new agent's clock calibration differs)
h=$(sqlite3 "$P" "SELECT SUM(c), MIN(c) FROM (SELECT SUM(json_extract(j.value, '\$[1]')) c
  FROM interval_queries q JOIN intervals i USING (start_ns), json_each(q.buckets) j WHERE i.end_ns > $b GROUP BY json_extract(j.value, '\$[0]'))")
echo "phase B's histogram: $h"
[ "${h%|*}" = $N2 ] || fail "phase B's histogram (sum|min bucket) is $h, not $N2 executions"
# the export over time: one CSV row per query and interval
"$SQLPROF" export -f csv --intervals -o "$TMP/all.csv" "$P" || fail "export --intervals exited $?"
"$SQLPROF" export -f csv --intervals --since "$GAP" "$P" >"$TMP/b.csv" ||
	fail "export --intervals --since exited $?"
"$PYTHON" - "$TMP/all.csv" "$TMP/b.csv" $((N1 + N2)) $N2 <<'PY' || fail "the interval CSV is wrong"
import csv, sys
for path, want in ((sys.argv[1], int(sys.argv[3])), (sys.argv[2], int(sys.argv[4]))):
    rows = [r for r in csv.DictReader(open(path)) if "+" in r["fingerprint"]]
    n = sum(int(r["count"]) for r in rows)
    print("%s: %d rows, %d executions" % (path.split("/")[-1], len(rows), n))
    assert n == want, (n, want)
    assert len(rows) >= 2 and all(int(r["end_ns"]) > int(r["start_ns"]) for r in rows)
    assert all(int(r["p50_ns"]) > 0 and int(r["p95_ns"]) >= int(r["p50_ns"])
               for r in rows if int(r["count"]) > 0)
PY
# the Perfetto export: counter tracks of the query over time, on the
# events' clock
if command -v protoc >/dev/null; then
	"$SQLPROF" export -f perfetto -o "$TMP/t.pftrace" "$P" || fail "export perfetto exited $?"
	protoc --decode_raw <"$TMP/t.pftrace" >"$TMP/t.txt" || fail "protoc cannot decode the trace"
	"$PYTHON" - "$TMP/t.txt" $((N1 + N2)) <<'PY' || fail "the Perfetto counter tracks are wrong"
import re, sys
names, ev, ts, cur = {}, [], None, {}
for line in open(sys.argv[1]):
    m = re.match(r"^( *)(\d+)(?:: (.*))?", line.rstrip("\n").replace(" {", ""))
    if not m:
        continue
    depth, f, v = len(m.group(1)) // 2, m.group(2), m.group(3)
    if depth == 0:
        if cur.get("t") == 4:
            ev.append((cur["ts"], cur["track"], cur.get("v", 0)))
        elif cur.get("b") == 1:
            ev.append((cur["ts"], None, None))
        cur = {}
    elif depth == 1 and f == "8":
        cur["ts"] = int(v)
    elif depth == 2 and f == "1" and v and v.isdigit():
        cur["uuid"] = int(v)
    elif depth == 2 and f == "2" and v:
        names[cur.get("uuid")] = v.strip('"')
    elif depth == 2 and f == "9":
        cur["t"] = int(v); cur["b"] = int(v)
    elif depth == 2 and f == "11":
        cur["track"] = int(v)
    elif depth == 2 and f == "30":
        cur["v"] = int(v)
if cur.get("t") == 4:
    ev.append((cur["ts"], cur["track"], cur.get("v", 0)))
rate = [u for u, n in names.items() if n.startswith("executions/s: SELECT ? + ?")]
assert rate, names
pts = sorted((t, v) for t, k, v in ev if k == rate[0])
slices = [t for t, k, v in ev if k is None]
assert slices, "no slices"
total = sum(v * (b[0] - a[0]) / 1e9 for a, b in zip(pts, pts[1:]) for v in [a[1]])
print("counter track %r: %d values, about %.0f executions; slices from %d to %d, counters %d to %d"
      % (names[rate[0]], len(pts), total, min(slices), max(slices), pts[0][0], pts[-1][0]))
want = int(sys.argv[2])
assert abs(total - want) <= 0.02 * want + len(pts), (total, want)
assert pts[0][0] <= min(slices) and pts[-1][0] >= max(slices), "counters on another clock"
assert pts[-1][0] - pts[0][0] < 120e9
PY
else
	not_checked "protoc not installed: the Perfetto counter tracks"
fi
"$SQLPROF" export -f html --intervals "$P" >/dev/null 2>&1
[ $? -eq 2 ] || fail "export -f html --intervals did not exit 2"
n=$(sqlite3 "$P" "SELECT COUNT(*) FROM intervals")
gaps=$(sqlite3 "$P" "SELECT COUNT(*) FROM intervals a WHERE end_ns <= start_ns OR (SELECT MIN(start_ns)
  FROM intervals b WHERE b.start_ns > a.start_ns) <> end_ns")
echo "$n intervals"
[ "$gaps" -eq 0 ] || fail "$gaps intervals do not end where the next starts"
exit 0
