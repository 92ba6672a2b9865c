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
# loop under callgrind, default 100000). scripts/overhead.sh is the quick
# version: the callgrind ratio of the trivial loop alone.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-build}
py=$(command -v python3) || { echo "bench: python3 is required" >&2; exit 1; }
"$root/scripts/bench_build.sh" "$build/bench"
"$py" "$root/scripts/bench_run.py" --build "$build" --out "$build/bench/results.json"
cp "$build/bench/results.json" "$root/docs/benchmarks.json"
"$py" "$root/scripts/bench_doc.py" "$build/bench/results.json" "$root/docs/benchmarks.md"
echo "bench: docs/benchmarks.md and docs/benchmarks.json updated from $build/bench/results.json"
