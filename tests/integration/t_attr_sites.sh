#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_attr_sites.sh - no call site is missed at the default rate, and a
# site's figures are exact where its caller tells it apart: one SQL text
# (tests/progs/multisite) run once from main (run), 4 x 300 times from
# worker threads (worker), 2000, 500 and 300 times from site_a, site_b and
# site_c on the main thread, recorded at the default rate with 20 seeds:
# in every seed every site is found with exactly its count (each thread's
# first execution from each calling address takes a stack, and the
# statistics count executions per calling address). Before: a site was
# missed in some seeds (the workers' or site_c's few random samples), and
# the others' estimates were off by the sampling noise (+-30 % at 300).
. "$(dirname "$0")/lib.sh"
need_prog multisite
cd "$TMP" || exit 1
bad=0
for seed in $(seq 1 20); do
	"$SQLPROF" record -q --seed "$seed" -o s$seed.db -- "$PROGS/multisite" >out 2>err ||
		fail "seed $seed: $(cat err)"
	report_json s$seed.db s$seed.json
	"$PYTHON" - s$seed.json "$seed" <<'PY' || bad=$((bad + 1))
import json, sys
q = [q for q in json.load(open(sys.argv[1]))["queries"] if q["fingerprint"] == "SELECT ? * ?"][0]
want = {"run": 1, "worker": 1200, "site_a": 2000, "site_b": 500, "site_c": 300}
got = {}
for s in q["sites"]:
    got[s["function"]] = got.get(s["function"], 0) + s["est_count"]
ok = q["count"] == 4001 and set(got) == set(want) and all(
    abs(got[f] - n) <= 0.25 * n for f, n in want.items() if n >= 300)
exact = all(round(got.get(f, -1)) == n for f, n in want.items())
print("seed %s: %s%s" % (sys.argv[2], {f: round(v) for f, v in got.items()},
                         "" if exact else " (not exact)"))
sys.exit(0 if ok and exact else 1)
PY
done
[ "$bad" = 0 ] || fail "$bad of 20 seeds missed a site or got a count wrong"
exit 0
