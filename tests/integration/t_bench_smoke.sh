#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_bench_smoke.sh - the programs of `make bench` (bench/) at a tiny size,
# so they cannot rot: scripts/bench_build.sh builds them, and
# scripts/bench_run.py --smoke runs every workload without a preload, with
# the forwarding and trace_v2 preloads and under sqlprof record (the
# trivial loop under every configuration), plus callgrind, ltrace when
# installed, the capture program, the stream generator, sqlprof report, and
# the scale workloads (many fingerprints, exec'd processes, events).
# It fails when a program exits non-zero, prints no BENCH line, or computes
# a different result under a preload. No time is asserted.
. "$(dirname "$0")/lib.sh"
case "${SANITIZE:-}" in
*address*) skip "the bench tools preload a measuring .so into sqlprof, which an ASan-built sqlprof refuses (ASan must come first)";;
esac
root=$(cd "$ITDIR/../.." && pwd)

"$root/scripts/bench_build.sh" "$BUILD/bench" >"$TMP/build.log" 2>&1 ||
	fail "scripts/bench_build.sh failed: $(tail -20 "$TMP/build.log")"
"$PYTHON" "$root/scripts/bench_run.py" --build "$BUILD" --smoke --out "$TMP/results.json" \
	>"$TMP/run.log" 2>&1 || fail "bench_run.py --smoke failed: $(tail -20 "$TMP/run.log")"

"$PYTHON" - "$TMP/results.json" <<'PY' || exit 1
import json, sys
r = json.load(open(sys.argv[1]))
errs = []
for w in ("trivial", "lookup", "insert", "threads", "python"):
    cfgs = r["workloads"][w]["wall"]["configs"]
    want = ["none", "fwd", "tracev2", "sqlprof_default"]
    if w == "trivial":
        want += ["sqlprof_r0", "sqlprof_r1"]
    for c in want:
        if c not in cfgs or not cfgs[c]["loop_ns_median"] > 0:
            errs.append("%s/%s: no loop time" % (w, c))
    if not cfgs.get("sqlprof_default", {}).get("collector_rss_kb"):
        errs.append("%s: no collector RSS (rusage_preload.so)" % w)
cg = r["workloads"]["trivial"].get("callgrind")
if cg is None:
    print("note: valgrind not installed, callgrind skipped")
elif not cg["configs"]["none"]["instructions"] > 0:
    errs.append("callgrind: no instruction count")
if r["capture"]["frames"] != 20:
    errs.append("capture: backtrace() at the bottom of bench/deep saw %s frames, not 20"
                % r["capture"]["frames"])
if not r["collector"]["streamgen"]["records_per_s_cpu"] > 0:
    errs.append("streamgen: no ingest rate")
# 22, and the clock paths' (issue 25): 4 per clock and one per K in turn;
# 5 of 200,000 fingerprints (issue 24: scale_fp_big)
if len(r["targets"]) != 37:
    errs.append("expected 37 targets, got %d" % len(r["targets"]))
cp = r.get("clock_paths")
if cg is not None and (not cp or not cp.get("clocksource") or
                       set(cp.get("trivial", {})) != {"tsc", "monotonic"}):
    errs.append("clock paths: no figures for both clocks")
fc = (r.get("fixed_cost") or {}).get("commands", {})
for name in ("sqlite3", "python"):
    e = fc.get(name)
    if not e or not e["record_ms_median"] > 0 or not e["bare_ms_median"] > 0:
        errs.append("fixed cost: no figures for %s" % name)
if not (r.get("fixed_cost") or {}).get("clocksource"):
    errs.append("fixed cost: no clocksource")
sc = r.get("scale") or {}
for k in ("fingerprints", "events"):
    if not sc.get(k):
        errs.append("scale: no %s runs" % k)
big = sc.get("fingerprints_big")
if not big or big["queries"] != big["n"] or not big["report"]["time_ns"] > 0:
    errs.append("scale: no figures of scale_fp_big, or not every fingerprint a query")
for e in sc.get("processes", []):
    if e["processes_with_queries"] != e["n"]:
        errs.append("scale: %d of %d processes in the profile" % (e["processes_with_queries"], e["n"]))
for e in errs:
    print("FAIL:", e, file=sys.stderr)
sys.exit(1 if errs else 0)
PY
grep -q 'ltrace: not installed' "$TMP/results.json" && not_checked "ltrace not installed: its run"
exit 0
