#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# fuzz.sh - run the libFuzzer targets built by `make fuzz` (tests/fuzz/).
#
# usage: scripts/fuzz.sh DIR SECONDS [TARGET...]
#   DIR      where the fuzz_* binaries are ($(BUILD)/fuzz); the working
#            corpus (DIR/corpus-TARGET, seeded from tests/fuzz/corpus/TARGET)
#            and crash files (DIR/crash-TARGET-*) go there too
#   SECONDS  how long to run each target (-max_total_time)
#   TARGET   stream, profile (default: both)
# Environment:
#   FUZZ_RUNS=N     stop each target after N executions instead (SECONDS
#                   still caps the time; give a large SECONDS with it)
#   FUZZ_JOBS=N     run N fuzzing processes per target in parallel
#                   (libFuzzer -fork=N; the executions of all are counted)
#   FUZZ_ARGS=...   extra libFuzzer flags
#   ASAN_OPTIONS    default here: shorter malloc stacks and a smaller
#                   quarantine, for speed; reproduce a crash with the
#                   defaults: DIR/fuzz_TARGET CRASH_FILE
# Prints, per target, the executions run and whether anything crashed;
# exits 1 if a target crashed (the reproducer is named in the output).
set -u
dir=${1:?usage: fuzz.sh DIR SECONDS [TARGET...]}
secs=${2:?usage: fuzz.sh DIR SECONDS [TARGET...]}
shift 2
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(stream profile)
root=$(cd "$(dirname "$0")/.." && pwd)
export ASAN_OPTIONS=${ASAN_OPTIONS:-malloc_context_size=5:quarantine_size_mb=32}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
status=0

for t in "${targets[@]}"; do
	bin=$dir/fuzz_$t
	seeds=$root/tests/fuzz/corpus/$t
	work=$dir/corpus-$t
	log=$dir/fuzz-$t.log
	[ -x "$bin" ] || { echo "fuzz: $bin not built (make fuzz)" >&2; exit 2; }
	mkdir -p "$work"
	args=(-max_total_time="$secs" -print_final_stats=1 -close_fd_mask=2
		-artifact_prefix="$dir/crash-$t-" -timeout=25 -rss_limit_mb=4096)
	[ -n "${FUZZ_RUNS:-}" ] && args+=(-runs="$FUZZ_RUNS")
	[ -n "${FUZZ_JOBS:-}" ] && args+=(-fork="$FUZZ_JOBS")
	echo "fuzz: $t for ${FUZZ_RUNS:+$FUZZ_RUNS runs or }${secs}s (log $log)"
	# shellcheck disable=SC2086
	"$bin" "${args[@]}" ${FUZZ_ARGS:-} "$work" "$seeds" >"$log" 2>&1
	rc=$?
	if [ -n "${FUZZ_JOBS:-}" ]; then
		# fork mode: the parent's last status line holds the total
		runs=$(grep -o '^#[0-9]*' "$log" | tail -1 | tr -d '#')
	else
		runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
	fi
	crash=$(grep -l . "$dir/crash-$t-"* 2>/dev/null | head -1)
	if [ "$rc" -ne 0 ] || grep -q -E '^(==[0-9]+==ERROR|SUMMARY: )' "$log"; then
		echo "fuzz: $t FAILED after ${runs:-?} executions (exit $rc)${crash:+; reproduce: $bin $crash}"
		grep -E -A15 'ERROR: |runtime error|SUMMARY' "$log" | head -40
		status=1
	else
		echo "fuzz: $t: ${runs:-?} executions, no crash"
	fi
done
exit $status
