#!/usr/bin/env bash
# Profile the bundled example program (tests/progs/demo.c) and print a
# report. Usage: scripts/demo.sh [BUILD_DIR]
set -euo pipefail
build=${1:-build}
out=$build/demo.db
echo "== sqlprof record -o $out -- $build/progs/demo"
"$build/bin/sqlprof" record --rate 0.2 -o "$out" -- "$build/progs/demo"
echo
echo "== sqlprof report --top 8 $out"
"$build/bin/sqlprof" report --top 8 "$out"
echo
echo "== sqlprof report --by function $out"
"$build/bin/sqlprof" report --by function "$out"
