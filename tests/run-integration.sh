#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# run-integration.sh - run every tests/integration/t_*.sh against the build
# in $BUILD (default build, relative to the repo root; run from the root,
# as `make integration` does).
#
# Each test is a bash script run with SQLPROF, BUILD, PROGS and TMP (a fresh
# private directory, removed afterwards) exported; it exits 0 (pass),
# 1 (fail) or 77 (skip, with its reason printed: the runner shows its last
# line). A test that exits 0 after saying (lib.sh not_checked) that a case
# it claims could not be checked here is shown as a skip, with the cases. Its output is shown only when it does not pass, or always with
# VERBOSE=1; each result line gives the test's wall time (for information:
# no verdict depends on it).
#
# TEST_JOBS tests run at once (default 3: most of a test's time is spent
# waiting for processes it started, so 3 keep 2 cores busy). A test whose
# file has the line "# run-integration: alone" (it measures time, or
# loads the machine itself, or shares users or paths of the system with
# another) runs after the others, with nothing beside it. Fixtures that
# several tests build into $BUILD (tests/fixtures/attr) are built once
# before, so that no two tests build them at the same time.
#
# A test running longer than its cap is killed and fails ("timed out"):
# TEST_TIMEOUT seconds when set, else 120 s times the load average per
# core when the test starts (at least 1, so 120 s on an idle machine, 600
# s at load 10 on 2 cores), at most 1200 s. The cap only stops a test that
# hangs; it is not a verdict on how fast a test is. A test that must build
# something large once says its own cap in a line `# test-timeout: SECONDS`
# (used when larger).
#
# usage: BUILD=build tests/run-integration.sh [NAME...]   (e.g. t_counts)
set -u

BUILD=${BUILD:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 2
case $BUILD in /*) ;; *) BUILD=$root/$BUILD ;; esac
SQLPROF=$BUILD/bin/sqlprof
PROGS=$BUILD/progs
export BUILD SQLPROF PROGS
jobs_max=${TEST_JOBS:-3}
case $jobs_max in '' | *[!0-9]* | 0) echo "integration: TEST_JOBS wants a number >= 1, not '$jobs_max'" >&2; exit 2 ;; esac
case ${TEST_TIMEOUT:-} in *[!0-9]*) echo "integration: TEST_TIMEOUT wants seconds, not '$TEST_TIMEOUT'" >&2; exit 2 ;; esac

if [ ! -x "$SQLPROF" ] || [ ! -f "$BUILD/lib/libsqlprof.so" ]; then
	echo "integration: $SQLPROF or $BUILD/lib/libsqlprof.so missing (make all progs)" >&2
	exit 2
fi

if [ $# -gt 0 ]; then
	tests=()
	for n in "$@"; do tests+=("tests/integration/${n%.sh}.sh"); done
else
	tests=(tests/integration/t_*.sh)
fi

res=$(mktemp -d "${TMPDIR:-/tmp}/sqlprof-it-res.XXXXXX") || exit 2
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$res"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# cap: the time limit of a test starting now, in seconds
cap() {
	if [ -n "${TEST_TIMEOUT:-}" ]; then
		echo "$TEST_TIMEOUT"
		return
	fi
	awk -v n="$(nproc 2>/dev/null || echo 1)" '{ f = $1 / n; if (f < 1) f = 1; c = int(120 * f);
		print (c > 1200 ? 1200 : c) }' /proc/loadavg 2>/dev/null || echo 120
}

# run_one T: run test T, print its result (and its output when it did not
# pass, or with VERBOSE) in one piece, record pass/fail/skip in $res
run_one() {
	local t=$1 name rc el line st timeout_s log t0 own
	name=$(basename "$t" .sh)
	TMP=$(mktemp -d "${TMPDIR:-/tmp}/sqlprof-it.XXXXXX") || exit 2
	export TMP
	log=$(mktemp "${TMPDIR:-/tmp}/sqlprof-it-log.XXXXXX") || exit 2
	timeout_s=$(cap)
	own=$(sed -n 's/^# test-timeout: \([0-9][0-9]*\)$/\1/p' "$t" | head -n 1)
	[ -n "$own" ] && [ "$own" -gt "$timeout_s" ] && timeout_s=$own
	SQLPROF_IT_UNCHECKED=$res/$name.unchecked
	export SQLPROF_IT_UNCHECKED
	t0=$EPOCHREALTIME
	timeout -k 5 "$timeout_s" bash "$t" >"$log" 2>&1 </dev/null
	rc=$?
	el=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1fs", b - a }')
	# a pass that left a case unchecked (lib.sh not_checked) is a skip
	if [ "$rc" = 0 ] && [ -s "$SQLPROF_IT_UNCHECKED" ]; then
		rc=77
		echo "passed, but not checked: $(paste -sd';' "$SQLPROF_IT_UNCHECKED")" >>"$log"
	fi
	case $rc in
	0) st=pass line="PASS $name ($el)" ;;
	77) st=skip line="SKIP $name ($el): $(tail -n 1 "$log")" ;;
	124 | 137) st=fail line="FAIL $name (timed out after ${timeout_s}s)" ;;
	*) st=fail line="FAIL $name (exit $rc, $el)" ;;
	esac
	{
		flock 9
		echo "$line"
		if [ "$st" = fail ] || [ -n "${VERBOSE:-}" ]; then
			sed 's/^/    /' "$log"
		fi
	} 9>>"$res/lock"
	echo "$st" >"$res/$name"
	rm -rf "$TMP" "$log"
}

# fixtures several tests build into $BUILD: once, now (each test's own
# build.sh call then finds them up to date)
if command -v "${CC:-gcc}" >/dev/null && command -v "${CXX:-g++}" >/dev/null &&
	command -v objcopy >/dev/null; then
	tests/fixtures/attr/build.sh "$BUILD/fixtures/attr" >"$res/attr-build.log" 2>&1 ||
		echo "integration: building tests/fixtures/attr failed (the t_attr tests will say why)"
fi

alone=()
for t in "${tests[@]}"; do
	if [ -f "$t" ] && grep -q '^# run-integration: alone' "$t"; then
		alone+=("$t")
		continue
	fi
	while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do wait -n; done
	run_one "$t" &
done
wait
for t in "${alone[@]}"; do run_one "$t"; done

count() { grep -lx "$1" "$res"/t_* 2>/dev/null | wc -l; }
pass=$(count pass) fail=$(count fail) skip=$(count skip)
echo "integration: $pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ] && [ $((pass + fail + skip)) -eq ${#tests[@]} ]
