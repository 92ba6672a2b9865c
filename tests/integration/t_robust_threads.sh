#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_robust_threads.sh - 8 threads x 50,000 executions, each thread on its
# own connection and statement, at --rate 1 (every execution sampled, the
# heaviest stream). When the profile reports nothing lost, each
# fingerprint's count is exactly 50,000 and so is its samples column (every
# sampled record arrived); every sampled execution is an event row or
# counted in meta.events_dropped. When something was lost, no count
# exceeds 50,000 and the loss covers every missing execution.
. "$(dirname "$0")/lib.sh"
need_prog robust_threads
T=8 N=50000

"$PROGS/robust_threads" $T $N >"$TMP/plain.out" || fail "robust_threads without sqlprof failed"
"$SQLPROF" record -q --rate 1 -o "$TMP/p.db" -- "$PROGS/robust_threads" $T $N \
	>"$TMP/rec.out" 2>"$TMP/rec.err"
rc=$?
[ "$rc" -eq 0 ] || fail "sqlprof record exited $rc: $(cat "$TMP/rec.err")"
same_file "robust_threads stdout" "$TMP/plain.out" "$TMP/rec.out"
report_json "$TMP/p.db" "$TMP/r.json"
sqlite3 "$TMP/p.db" "SELECT (SELECT count(*) FROM events e JOIN queries q USING (fp_id, kind)
		WHERE q.fingerprint LIKE 'SELECT ? AS rthread_%'),
	(SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'events_dropped'),
	(SELECT count(*) FROM events), (SELECT coalesce(sum(clean_exit), 0) FROM processes),
	(SELECT count(*) FROM processes)" >"$TMP/ev" || fail "cannot query the profile"

"$PYTHON" - "$TMP/r.json" "$TMP/ev" $T $N <<'EOF_PY' || exit 1
import json, sys
doc = json.load(open(sys.argv[1]))
ev_mine, dropped, ev_all, clean, nproc = map(int, open(sys.argv[2]).read().strip().split("|"))
T, N = int(sys.argv[3]), int(sys.argv[4])
lost = doc["lost"]
rows = {}
for r in doc["queries"]:
    if r["kind"] == "stmt" and r["fingerprint"].startswith("SELECT ? AS rthread_"):
        rows[r["fingerprint"]] = r
want = ["SELECT ? AS rthread_%d" % k for k in range(T)]
bad = []
if set(rows) != set(want) and lost == 0:
    bad.append("fingerprints %r, expected %r" % (sorted(rows), want))
total = 0
for fp in want:
    r = rows.get(fp, {"count": 0, "samples": 0})
    total += r["count"]
    if r["count"] > N:
        bad.append("%r: count %d > %d (duplicates)" % (fp, r["count"], N))
    if lost == 0 and r["count"] != N:
        bad.append("%r: count %d, expected %d (lost 0)" % (fp, r["count"], N))
    if lost == 0 and r["samples"] != r["count"]:
        bad.append("%r: samples %d != count %d at --rate 1 (lost 0)" % (fp, r["samples"], r["count"]))
textless = sum(r["count"] for r in doc["queries"]
               if r["kind"] == "stmt" and r["fingerprint"] == "<sql text lost>")
if textless:
    print("NOTE: %d executions under '<sql text lost>' (their SQL record was dropped)" % textless)
if lost and total + textless + lost < T * N:
    bad.append("counts %d (+ %d without text) + lost %d < %d executions: some vanished silently"
               % (total, textless, lost, T * N))
# Every sampled execution is an event row or counted as dropped (the
# collector keeps a bounded number of events).
if lost == 0 and ev_all + dropped < T * N:
    bad.append("events %d + events_dropped %d < %d sampled executions" % (ev_all, dropped, T * N))
if clean != nproc:
    bad.append("%d of %d processes without a clean exit" % (nproc - clean, nproc))
for b in bad:
    print("FAIL: " + b, file=sys.stderr)
print("lost %d, total %d, events %d (%d of these queries), events_dropped %d"
      % (lost, total, ev_all, ev_mine, dropped))
sys.exit(1 if bad else 0)
EOF_PY

# One tid per thread in the events.
n=$(sqlite3 "$TMP/p.db" "SELECT count(DISTINCT tid) FROM events e JOIN queries q USING (fp_id, kind)
	WHERE q.fingerprint LIKE 'SELECT ? AS rthread_%'") || fail "cannot query events"
[ "$n" = $T ] || fail "events of the $T statements come from $n threads, expected $T"
exit 0
