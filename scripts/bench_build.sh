#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench_build.sh - build the programs of `make bench` (bench/) into
# OUT (default $BUILD/bench, BUILD default build). Rebuilds only what is
# older than its sources. Used by scripts/bench.sh and by
# tests/integration/t_bench_smoke.sh, so the Makefile needs no rules for
# them.
#
# Workloads are built as users ship: -O2 -g without frame pointers, so
# stacks are unwound from DWARF CFI. The preloads are built without
# linking libsqlite3, as libsqlprof.so is: they find it at run time.
#
# usage: scripts/bench_build.sh [OUT]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-${BUILD:-build}/bench}
mkdir -p "$out"
CC=${CC:-gcc}
cflags=(-std=gnu11 -O2 -g -fomit-frame-pointer -D_GNU_SOURCE -Wall -Wextra -Wno-unused-parameter)

# build OUTPUT SOURCE ARGS...: compile unless OUTPUT is newer than SOURCE
# and bench/bench.h.
build() {
	local o=$1 src=$2
	shift 2
	if [ "$o" -nt "$src" ] && [ "$o" -nt "$root/bench/bench.h" ] && [ "$o" -nt "$0" ]; then
		return 0
	fi
	"$CC" "${cflags[@]}" -o "$o" "$src" "$@"
}

for p in trivial lookup insert threads deep; do
	build "$out/$p" "$root/bench/$p.c" -lsqlite3 -lpthread
done
# streamgen speaks the wire format and must export sqlprof_is_collector.
build "$out/streamgen" "$root/bench/streamgen.c" -I"$root/preload" -rdynamic
for p in fwd_preload timing_preload tracev2_preload rusage_preload; do
	build "$out/$p.so" "$root/bench/$p.c" -shared -fPIC -fvisibility=hidden -Wl,-z,now -ldl
done
cp "$root/bench/workload.py" "$out/workload.py"
# The scale workloads (issue 12): many fingerprints, many processes.
build "$out/manyfp" "$root/tests/progs/manyfp.c" -lsqlite3
cp "$root/bench/procs.sh" "$out/procs.sh"

# speedtest1, SQLite's own benchmark, from outside the repository (never
# copied into it): built as /work/shared/bench/README.md says, against the
# system library, when ../shared/bench/speedtest1.c exists next to the
# repository. bench_run.py skips its section, and says so, when it does not.
st1=$(dirname "$root")/shared/bench/speedtest1.c
if [ -f "$st1" ]; then
	if ! { [ "$out/speedtest1" -nt "$st1" ] && [ "$out/speedtest1" -nt "$0" ]; }; then
		"$CC" -O2 -g -o "$out/speedtest1" "$st1" -lsqlite3 -lm
	fi
else
	rm -f "$out/speedtest1"
	echo "bench_build: $st1 not found: speedtest1 not built (make bench skips it)" >&2
fi
