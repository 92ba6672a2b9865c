#!/usr/bin/env bash
# make bench: the overhead measurement (callgrind instruction ratios).
# The full benchmark suite of issue 4 (wall-time medians, RSS, capture
# cost, collector ingest, report time) is not written yet.
set -euo pipefail
build=${BUILD:-build}
mkdir -p "$build/bench"
scripts/overhead.sh "$build" "${BENCH_N:-100000}" | tee "$build/bench/overhead.txt"
tail -n 1 "$build/bench/overhead.txt" > "$build/bench/overhead.json"
