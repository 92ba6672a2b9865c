#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_estimate_one.sh - one estimator for per-site counts (issue 12): on one
# profile with forced and randomly drawn samples at two sites per query
# (tests/progs/manyfp at --rate 0.5, fixed seed: each query's first
# executions are forced samples, and some are drawn too), `report --format
# json`, `diff --format json` of the profile against itself and `export -f
# csv` give every site the same estimated count, and each query's site
# estimates add up to its exact count. (diff used to weight every sample
# alike while report counted the random ones only.)
. "$(dirname "$0")/lib.sh"
need_prog manyfp

"$SQLPROF" record -q --rate 0.5 --seed 7 -o "$TMP/p.db" -- "$PROGS/manyfp" 300 >/dev/null ||
	fail "sqlprof record failed"
"$SQLPROF" report --format json "$TMP/p.db" >"$TMP/r.json" || fail "report failed"
"$SQLPROF" diff --format json --all "$TMP/p.db" "$TMP/p.db" >"$TMP/d.json" || fail "diff failed"
"$SQLPROF" export -f csv -o "$TMP/x.csv" "$TMP/p.db" || fail "export -f csv failed"
"$PYTHON" - "$TMP/r.json" "$TMP/d.json" "$TMP/x.csv" <<'PY' || fail "the estimates differ (above)"
import csv, json, sys

r = json.load(open(sys.argv[1]))
d = json.load(open(sys.argv[2]))
rep, forced_differs = {}, 0
for q in r["queries"]:
    tot = 0.0
    for s in q["sites"]:
        if s["function"] is None:
            continue
        rep[(q["fingerprint_id"], s["function"])] = s["est_count"]
        tot += s["est_count"]
    if abs(tot - q["count"]) > len(q["sites"]):
        print("report: %s: sites add up to %s, count %s" % (q["fingerprint"], tot, q["count"]))
        sys.exit(1)
dif = {}
for s in d["sites"]:
    fn = s["site"].split(" (")[0]
    dif[(s["fingerprint_id"], fn)] = s["est_count_base"]
exp = {}
for row in csv.DictReader(open(sys.argv[3])):
    exp[("%016x" % int(row["fingerprint_id"], 16), row["function"])] = float(row["count"])
bad = 0
for k, v in rep.items():
    for name, other in (("diff", dif), ("export csv", exp)):
        if k not in other:
            print("%s has no site %s" % (name, k)); bad += 1
        elif abs(other[k] - v) > 0.5 + 1e-9:
            print("site %s: report %s, %s %s" % (k, v, name, other[k])); bad += 1
if len(rep) < 500:
    print("only %d (query, site) pairs; expected about 600" % len(rep)); bad += 1
sys.exit(1 if bad else 0)
PY
exit 0
