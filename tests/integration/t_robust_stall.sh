#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_robust_stall.sh - the target is faster than the collector: sqlprof
# record is stopped (SIGSTOP) while 8 threads are half-way through 50,000
# executions each at --rate 1, and continued (SIGCONT) only after the
# target has exited. The target must run to the end unchanged and not be
# held up (it finishes while the collector is stopped); the executions it
# could not send are dropped, and the profile must say so: every missing
# execution is covered by the reported loss (JSON "lost" and the table
# header), never silently absent. (Executions of a statement whose SQL
# record was dropped count under "<sql text lost>"; they are noted.)
. "$(dirname "$0")/lib.sh"
need_prog robust_threads
T=8 N=50000

"$PROGS/robust_threads" $T $N >"$TMP/plain.out" || fail "robust_threads without sqlprof failed"
cat >"$TMP/run.sh" <<EOS
"$PROGS/robust_threads" $T $N "$TMP/started" "$TMP/go" >"$TMP/rec.out" 2>"$TMP/rec.err"
echo \$? >"$TMP/rc.tmp" && mv "$TMP/rc.tmp" "$TMP/rc"
EOS
TMPDIR=$TMP "$SQLPROF" record -q --rate 1 -o "$TMP/p.db" -- sh "$TMP/run.sh" \
	>"$TMP/coll.out" 2>"$TMP/coll.err" &
coll=$!
wait_started "$TMP/started" "$coll"
if [ ! -e "$TMP/started" ]; then
	touch "$TMP/go"
	fail "robust_threads never got half-way under sqlprof: $(cat "$TMP/coll.err" "$TMP/rec.err" 2>/dev/null)"
fi
kill -STOP "$coll" || fail "cannot stop the collector"
touch "$TMP/go"
for _ in $(seq 1 2000); do
	[ -e "$TMP/rc" ] && break
	sleep 0.02
done
finished=0
[ -e "$TMP/rc" ] && finished=1
kill -CONT "$coll"
wait "$coll"
crc=$?
[ "$finished" = 1 ] || fail "the target did not finish within 40 s while the collector was stopped"
[ "$(cat "$TMP/rc")" = 0 ] || fail "robust_threads exited $(cat "$TMP/rc"): $(cat "$TMP/rec.err")"
[ "$crc" = 0 ] || fail "sqlprof record exited $crc: $(cat "$TMP/coll.err")"
same_file "robust_threads stdout" "$TMP/plain.out" "$TMP/rec.out"

report_json "$TMP/p.db" "$TMP/r.json"
"$SQLPROF" report "$TMP/p.db" >"$TMP/table" 2>&1 || fail "sqlprof report failed"
"$PYTHON" - "$TMP/r.json" "$TMP/table" $T $N <<'EOF_PY' || exit 1
import json, re, sys
doc = json.load(open(sys.argv[1]))
head = "".join(open(sys.argv[2]).readlines()[:2])  # the header's two lines
T, N = int(sys.argv[3]), int(sys.argv[4])
lost = doc["lost"]
# Executions whose SQL record was lost count under "<sql text lost>": they
# are in the profile, only not under their own fingerprint.
named = sum(r["count"] for r in doc["queries"]
            if r["kind"] == "stmt" and r["fingerprint"].startswith("SELECT ? AS rthread_"))
textless = sum(r["count"] for r in doc["queries"]
               if r["kind"] == "stmt" and r["fingerprint"] == "<sql text lost>")
total = named + textless
missing = T * N - total
print("counted %d of %d executions, missing %d, reported lost %d" % (total, T * N, missing, lost))
if textless:
    print("NOTE: %d executions counted under '<sql text lost>': the SQL record of their "
          "statement was in a dropped message and never sent again" % textless)
print("table header: " + head.strip().replace("\n", " / "))
bad = []
if missing < 0:
    bad.append("%d executions counted, more than the %d that ran" % (total, T * N))
if lost < missing:
    bad.append("%d executions missing but the profile reports lost %d: a silent loss" % (missing, lost))
m = re.search(r"lost (\d+)", head)
if not m or int(m.group(1)) != lost:
    bad.append("table header does not show lost %d: %r" % (lost, head))
for b in bad:
    print("FAIL: " + b, file=sys.stderr)
if bad:
    for r in doc["queries"]:
        print("    %-6s %8d  %s" % (r["kind"], r["count"], r["fingerprint"][:70]), file=sys.stderr)
sys.exit(1 if bad else 0)
EOF_PY
exit 0
