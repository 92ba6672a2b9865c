#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# run-integration.sh - run every tests/integration/t_*.sh against the build
# in $BUILD (default build, relative to the repo root; run from the root,
# as `make integration` does).
#
# Each test is a bash script run with SQLPROF, BUILD, PROGS and TMP (a fresh
# private directory, removed afterwards) exported; it exits 0 (pass),
# 1 (fail) or 77 (skip, with its reason printed). Its output is shown only
# when it does not pass, or always with VERBOSE=1. A test running longer
# than TEST_TIMEOUT seconds (default 60) is killed and fails; a test that
# must build something large once says its own cap in a line
# `# test-timeout: SECONDS` (used when larger).
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
timeout_s=${TEST_TIMEOUT:-60}

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

pass=0 fail=0 skip=0
for t in "${tests[@]}"; do
	name=$(basename "$t" .sh)
	TMP=$(mktemp -d "${TMPDIR:-/tmp}/sqlprof-it.XXXXXX") || exit 2
	export TMP
	log=$(mktemp "${TMPDIR:-/tmp}/sqlprof-it-log.XXXXXX") || exit 2
	cap=$(sed -n 's/^# test-timeout: \([0-9][0-9]*\)$/\1/p' "$t" | head -n 1)
	[ -n "$cap" ] && [ "$cap" -gt "$timeout_s" ] || cap=$timeout_s
	timeout -k 5 "$cap" bash "$t" >"$log" 2>&1 </dev/null
	rc=$?
	case $rc in
	0) echo "PASS $name"; pass=$((pass + 1)) ;;
	77) echo "SKIP $name: $(tail -n 1 "$log")"; skip=$((skip + 1)) ;;
	124 | 137) echo "FAIL $name (timed out after ${cap}s)"; fail=$((fail + 1)) ;;
	*) echo "FAIL $name (exit $rc)"; fail=$((fail + 1)) ;;
	esac
	if { [ "$rc" != 0 ] && [ "$rc" != 77 ]; } || [ -n "${VERBOSE:-}" ]; then
		sed 's/^/    /' "$log"
	fi
	rm -rf "$TMP" "$log"
done
echo "integration: $pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
