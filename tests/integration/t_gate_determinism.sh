#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_gate_determinism.sh - two recordings of the same workload differ by
# zero in every deterministic metric: count, rows, VM steps, full-scan
# steps, sorts, automatic-index rows, prepares, errors, longest run, and
# plans; per site too. gate_app at --rate 0 (only the always-taken stacks)
# and counts at --rate 0.5 with a fixed --seed (repeatable sampling).
# Also: a profile recorded with --repeat 3 equals a single run per run.
. "$(dirname "$0")/lib.sh"
need_prog gate_app
need_prog counts

# zero_diff A B WHAT: sqlprof diff --all --format json A B shows no difference.
zero_diff() {
	"$SQLPROF" diff --all --format json "$1" "$2" >"$TMP/d.json" 2>"$TMP/d.err" ||
		fail "diff $3 exited $?: $(cat "$TMP/d.err")"
	"$PYTHON" - "$TMP/d.json" "$3" <<'PY' || exit 1
import json, sys
d = json.load(open(sys.argv[1]))
what = sys.argv[2]
s = d["summary"]
bad = []
if s["differences"] != 0 or s["new"] or s["vanished"] or s["changed"] or s["plan_changes"]:
    bad.append("summary %s" % s)
for q in d["queries"]:
    for m, v in q["metrics"].items():
        if v["delta"] != 0:
            bad.append("%s %s: %s -> %s" % (q["fingerprint"], m, v["base"], v["new"]))
    if q["plan_base"] != q["plan_new"]:
        bad.append("%s: plan %r -> %r" % (q["fingerprint"], q["plan_base"], q["plan_new"]))
for st in d["sites"]:
    if abs(st["est_count_base"] - st["est_count_new"]) > 1e-6 or \
       abs(st["est_vm_steps_base"] - st["est_vm_steps_new"]) > 1e-6:
        bad.append("site %s %s: %s" % (st["site"], st["fingerprint"], st))
plans = sum(1 for q in d["queries"] if q["plan_base"])
if bad:
    print("FAIL: %s: %d differences:" % (what, len(bad)))
    print("\n".join(bad[:20]))
    sys.exit(1)
print("%s: %d queries (%d with plans), %d sites, 0 differences" %
      (what, len(d["queries"]), plans, len(d["sites"])))
PY
}

for i in 1 2; do
	"$SQLPROF" record -q --rate 0 -o "$TMP/g$i.db" -- "$PROGS/gate_app" clean >/dev/null ||
		fail "record gate_app $i"
	"$SQLPROF" record -q --rate 0.5 --seed 7 -o "$TMP/c$i.db" -- "$PROGS/counts" >/dev/null
	[ $? -eq 3 ] || fail "record counts $i: unexpected exit"
done
zero_diff "$TMP/g1.db" "$TMP/g2.db" "gate_app --rate 0"
zero_diff "$TMP/c1.db" "$TMP/c2.db" "counts --rate 0.5 --seed 7"

# Plans were captured, so "zero plan differences" means something.
n=$(sqlite3 "$TMP/g1.db" "SELECT count(*) FROM plans") || fail "cannot read plans"
[ "$n" -ge 3 ] || fail "only $n plans captured in gate_app's profile"

# The text form says so too.
"$SQLPROF" diff "$TMP/g1.db" "$TMP/g2.db" | grep -q '; 0 deterministic differences$' ||
	fail "diff text does not report 0 deterministic differences"

# --repeat 3: totals of 3 runs, compared per run, equal one run.
"$SQLPROF" record -q --rate 0 --repeat 3 -o "$TMP/g3.db" -- "$PROGS/gate_app" clean >/dev/null ||
	fail "record --repeat 3"
zero_diff "$TMP/g1.db" "$TMP/g3.db" "one run vs --repeat 3"
"$SQLPROF" check --baseline "$TMP/g1.db" "$TMP/g3.db" >"$TMP/chk.txt" ||
	fail "check one run vs --repeat 3 exited $?: $(cat "$TMP/chk.txt")"
exit 0
