#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Overhead of libsqlprof.so on a trivial prepared statement, as callgrind
# instruction counts (repeatable, unlike wall time on a shared machine).
# Runs tests/progs/trivial N times `SELECT ?1+1` (bind, step, reset) with no
# preload, under sqlprof record at several rates, and under two reference
# preloads of bench/ (built by scripts/bench_build.sh into BUILD_DIR/bench
# when missing): the forwarding interposer, the floor of any LD_PRELOAD
# design, and the timing-only interposer, the lower bound of any design
# that times every sqlite3_step call as the spec requires. Prints the ratio
# of instructions against no preload and the extra instructions per
# execution.
#
# Usage: scripts/overhead.sh [BUILD_DIR] [N]    (default build, 100000)
# Output: one line per configuration, then a JSON object on the last line.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
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

# The reference preloads. bench_build.sh rebuilds only what is out of date.
if [ ! -f "$build/bench/fwd_preload.so" ] || [ ! -f "$build/bench/timing_preload.so" ]; then
	"$root/scripts/bench_build.sh" "$build/bench" >"$tmp/build.log" 2>&1 ||
		{ echo "overhead: scripts/bench_build.sh failed" >&2; cat "$tmp/build.log" >&2; exit 1; }
fi
for ref in "fwd forwarding floor" "timing timing-only bound"; do
	key=${ref%% *} label=${ref#* }
	so=$(cd "$build/bench" && pwd)/${key}_preload.so
	c=$(LD_PRELOAD=$so count "${vg[@]}" "$prog" "$n")
	[ -n "$c" ] || { echo "overhead: no callgrind count under $so" >&2; cat "$tmp/err" >&2; exit 1; }
	ratio=$(awk -v a="$c" -v b="$base" 'BEGIN{printf "%.3f", a/b}')
	per=$(awk -v a="$c" -v b="$base" -v n="$n" 'BEGIN{printf "%.0f", (a-b)/n}')
	echo "$label: $c instructions, ratio $ratio, +$per per execution"
	json="$json, \"$key\": {\"instructions\": $c, \"ratio\": $ratio, \"extra_per_execution\": $per}"
done
echo "$json}"
