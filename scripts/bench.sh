#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# make bench: the benchmark suite (docs/benchmarks.md says what it measures).
# Builds the programs of bench/ (scripts/bench_build.sh), runs them
# (scripts/bench_run.py: several minutes), writes BUILD/bench/results.json,
# copies it to docs/benchmarks.json, and regenerates the measured section
# of docs/benchmarks.md (scripts/bench_doc.py); the hand-written analysis
# around it is kept.
#
# Environment: BUILD (default build), BENCH_N (executions of the trivial
# loop under callgrind, default 100000), SOAK_SECONDS (each of the agent's
# two soaks, default 600; 0: none), SOAK_EVERY_TEXT (0: the defaults' soak
# only). scripts/overhead.sh is the quick
# version: the callgrind ratio of the trivial loop alone.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-build}
py=$(command -v python3) || { echo "bench: python3 is required" >&2; exit 1; }
"$root/scripts/bench_build.sh" "$build/bench"
"$py" "$root/scripts/bench_run.py" --build "$build" --out "$build/bench/results.json"
# the agent's soak (issue 24, item 5): SOAK_SECONDS (600) of a service
# making 2,000 new SQL texts a second and 3 short processes a second under
# one agent, twice: at the preload's defaults (the service as deployed: it
# folds texts past 64 of a fingerprint itself; BUILD/bench/agent_soak.json)
# and with every text sent to the agent (SQLPROF_TEXTS_PER_SHAPE=0, the
# agent's worst case; agent_soak_every_text.json, skipped with
# SOAK_EVERY_TEXT=0). Figures (RSS, scrapes, profile age, SIGTERM,
# totals) described in docs/benchmarks.md
soak() { # NAME TEXTS_PER_SHAPE
	echo "bench: agent soak ($1), ${SOAK_SECONDS:-600} s" >&2
	"$py" "$root/scripts/agent_soak.py" --build "$build" --seconds "${SOAK_SECONDS:-600}" \
		--texts-per-shape "$2" >"$build/bench/$1.json" || echo "bench: the agent soak failed" >&2
	"$py" -c 'import json, sys
d = json.load(open(sys.argv[1]))
print("%s: %d of %d executions in the profile; RSS max %.0f MB (RssAnon %.0f MB, grown %.0f MB after 60 s); "
      "scrape max %.2f s; profile age max %.0f s; SIGTERM %.1f s; profile %.1f MB"
      % (sys.argv[2], d["profiled"], d["ran"], d["rss_max_kb"] / 1024, d["rss_anon_max_kb"] / 1024,
         d["rss_after_warmup_growth_kb"] / 1024, d["scrape_max_s"], d["profile_age_max_s"],
         d["sigterm_s"], d["profile_bytes"] / 1e6))' "$build/bench/$1.json" "$1" || true
}
if [ "${SOAK_SECONDS:-600}" != 0 ]; then
	soak agent_soak -1
	[ "${SOAK_EVERY_TEXT:-1}" = 0 ] || soak agent_soak_every_text 0
fi
cp "$build/bench/results.json" "$root/docs/benchmarks.json"
"$py" "$root/scripts/bench_doc.py" "$build/bench/results.json" "$root/docs/benchmarks.md"
echo "bench: docs/benchmarks.md and docs/benchmarks.json updated from $build/bench/results.json"
