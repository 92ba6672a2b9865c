#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_threads.sh - 4 threads on their own connections, 5000 executions each
# of their own statement, at --rate 1 (a stack for every execution, the
# heaviest stream): each fingerprint's count is exact when nothing was
# lost, and counts + lost account for everything when something was.
. "$(dirname "$0")/lib.sh"
need_prog threads

"$PROGS/threads" >"$TMP/plain.out" || fail "threads without sqlprof failed"
"$SQLPROF" record -q --rate 1 -o "$TMP/p.db" -- "$PROGS/threads" >"$TMP/rec.out" 2>"$TMP/rec.err"
rc=$?
[ "$rc" -eq 0 ] || fail "sqlprof record exited $rc: $(cat "$TMP/rec.err")"
same_file "threads stdout" "$TMP/plain.out" "$TMP/rec.out"
report_json "$TMP/p.db" "$TMP/r.json"

"$PYTHON" - "$TMP/r.json" <<'EOF_PY' || exit 1
import json, sys
doc = json.load(open(sys.argv[1]))
lost = doc["lost"]
counts = {}
for r in doc["queries"]:
    if r["kind"] == "stmt" and r["fingerprint"].startswith("SELECT ? AS thread_"):
        counts[r["fingerprint"]] = counts.get(r["fingerprint"], 0) + r["count"]
want = ["SELECT ? AS thread_%d" % k for k in range(4)]
bad = []
for fp in want:
    got = counts.get(fp, 0)
    if lost == 0 and got != 5000:
        bad.append("%r: count %d, expected 5000 (lost 0)" % (fp, got))
    if got > 5000:
        bad.append("%r: count %d > 5000 (duplicates)" % (fp, got))
extra = set(counts) - set(want)
if extra:
    bad.append("unexpected fingerprints: %r" % sorted(extra))
total = sum(counts.get(fp, 0) for fp in want)
if lost and total + lost < 20000:
    bad.append("counts %d + lost %d < 20000 executions: some vanished" % (total, lost))
for b in bad:
    print("FAIL: " + b, file=sys.stderr)
print("lost %d, counts %r" % (lost, [counts.get(fp, 0) for fp in want]))
sys.exit(1 if bad else 0)
EOF_PY

# Every execution was sampled at --rate 1, so each thread's executions are
# all in the events table, on one tid per fingerprint.
n=$(sqlite3 "$TMP/p.db" "SELECT count(DISTINCT tid) FROM events e JOIN queries q USING (fp_id, kind)
	WHERE q.fingerprint LIKE 'SELECT ? AS thread_%'") || fail "cannot query events"
[ "$n" = 4 ] || fail "events of the 4 statements come from $n threads, expected 4"
exit 0
