#!/usr/bin/env bash
# Overhead of libsqlprof.so on a trivial prepared statement, as callgrind
# instruction counts (repeatable, unlike wall time on a shared machine).
# Runs tests/progs/trivial N times `SELECT ?1+1` (bind, step, reset) with no
# preload and under sqlprof record at several rates, and prints the ratio
# of instructions against no preload.
#
# Usage: scripts/overhead.sh [BUILD_DIR] [N]    (default build, 100000)
# Output: one line per configuration, then a JSON object on the last line.
set -euo pipefail
build=${1:-build}
n=${2:-100000}
prog=$build/progs/trivial
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
command -v valgrind >/dev/null || { echo "overhead: valgrind is required" >&2; exit 1; }

count() { # prints the instruction count of the program run by "$@"
	"$@" >/dev/null 2>"$tmp/err" || true
	grep -Eo 'refs: +[0-9,]+' "$tmp/err" | tr -dc '0-9'
}
vg=(valgrind --tool=callgrind --callgrind-out-file=/dev/null)
base=$(count "${vg[@]}" "$prog" "$n")
[ -n "$base" ] || { echo "overhead: no callgrind count" >&2; cat "$tmp/err" >&2; exit 1; }
echo "no preload:     $base instructions"
json="{\"n\": $n, \"baseline\": $base"
for rate in 0 0.01 1; do
	c=$(SQLPROF_SEED=1 count "$build/bin/sqlprof" record -q --rate "$rate" -o "$tmp/p.db" -- "${vg[@]}" "$prog" "$n")
	ratio=$(awk -v a="$c" -v b="$base" 'BEGIN{printf "%.3f", a/b}')
	per=$(awk -v a="$c" -v b="$base" -v n="$n" 'BEGIN{printf "%.0f", (a-b)/n}')
	echo "rate $rate: $c instructions, ratio $ratio, +$per per execution"
	json="$json, \"rate_$rate\": {\"instructions\": $c, \"ratio\": $ratio}"
done
echo "$json}"
