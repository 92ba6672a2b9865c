#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_exact_stalled.sh - totals are exact whatever the collector does: sqlprof
# record is stopped (SIGSTOP) while 4 threads run 100,000 executions each
# over 10 statements each (tests/progs/exact_threads.c), until the program
# has exited (up to 300 s; before: a fixed 3 s, which on a loaded machine
# could end before the threads had run),
# at the default rate. Every count and row total must be exact: the
# totals live in the program's shared statistics, not in records that the
# collector must drain in time. Only sampled events may be lost, and the
# report must then say so as events, never as missing executions.
. "$(dirname "$0")/lib.sh"
need_prog exact_threads
T=4 N=100000 S=10

cat >"$TMP/run.sh" <<EOS
"$PROGS/exact_threads" $T $N $S "$TMP/started" "$TMP/go" >"$TMP/rec.out" 2>"$TMP/rec.err"
echo \$? >"$TMP/rc.tmp" && mv "$TMP/rc.tmp" "$TMP/rc"
EOS
TMPDIR=$TMP "$SQLPROF" record -q -o "$TMP/p.db" -- sh "$TMP/run.sh" \
	>"$TMP/coll.out" 2>"$TMP/coll.err" &
coll=$!
wait_started "$TMP/started" "$coll"
if [ ! -e "$TMP/started" ]; then
	touch "$TMP/go"
	fail "exact_threads never started under sqlprof: $(cat "$TMP/coll.err" "$TMP/rec.err" 2>/dev/null)"
fi
kill -STOP "$coll" || fail "cannot stop the collector"
touch "$TMP/go"
wait_file "$TMP/rc" 300 || { kill -CONT "$coll"; fail "exact_threads did not exit in 300 s under a stopped collector"; }
kill -CONT "$coll"
wait "$coll"
crc=$?
[ "$crc" = 0 ] || fail "sqlprof record exited $crc: $(cat "$TMP/coll.err")"
[ "$(cat "$TMP/rc")" = 0 ] || fail "exact_threads exited $(cat "$TMP/rc"): $(cat "$TMP/rec.err")"

report_json "$TMP/p.db" "$TMP/r.json"
"$SQLPROF" report "$TMP/p.db" >"$TMP/table" 2>&1 || fail "sqlprof report failed"
"$PYTHON" - "$TMP/r.json" "$TMP/table" $T $N $S <<'EOF_PY' || exit 1
import json, sys
doc = json.load(open(sys.argv[1]))
with open(sys.argv[2]) as f:  # the header: its first two lines (events lost on the second)
    head = f.readline().strip() + " " + f.readline().strip()
T, N, S = (int(x) for x in sys.argv[3:6])
bad = []
got = {r["fingerprint"]: r for r in doc["queries"] if r["kind"] == "stmt"}
total = 0
for t in range(T):
    for j in range(S):
        fp = "SELECT value AS x%d_%d FROM (SELECT ? AS value UNION ALL SELECT ? UNION ALL SELECT ?) LIMIT ?" % (t, j)
        r = got.get(fp)
        want = N // S + (1 if j < N % S else 0)
        rows = want * (j % 3 + 1)
        if r is None:
            bad.append("no row for %r" % fp)
            continue
        total += r["count"]
        if r["count"] != want or r["rows"] != rows:
            bad.append("%s: count %d rows %d, expected %d and %d" % (fp, r["count"], r["rows"], want, rows))
print("collector stopped until the program exited: %d of %d executions counted; %d sampled events lost" % (total, T * N, doc["lost"]))
print("table header: " + head)
if doc["executions"] != T * N:
    bad.append("report says %d executions, expected %d" % (doc["executions"], T * N))
if doc["lost"] and "events lost %d" % doc["lost"] not in head:
    bad.append("the header does not say the lost records are events: %r" % head)
for b in bad:
    print("FAIL: " + b, file=sys.stderr)
sys.exit(1 if bad else 0)
EOF_PY
