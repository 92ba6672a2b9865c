# SPDX-License-Identifier: MIT
# lib.sh - helpers sourced by the integration tests (tests/integration/t_*.sh).
# Expects SQLPROF, BUILD, PROGS and TMP from tests/run-integration.sh; when a
# test is run by hand it falls back to build/ and a private temp directory.

set -u
ITDIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
: "${BUILD:=$ITDIR/../../build}"
: "${SQLPROF:=$BUILD/bin/sqlprof}"
: "${PROGS:=$BUILD/progs}"
if [ -z "${TMP:-}" ]; then
	TMP=$(mktemp -d)
	trap 'rm -rf "$TMP"' EXIT
fi
# The tests' own Python (JSON checks, expect.py): Debian's when there is
# one, as it starts in 0.03 s of CPU; a pyenv shim on PATH takes 0.3 s and
# several bash scripts per start (3-4 s each at load 10). Tests of Python
# programs under sqlprof choose their interpreters themselves.
if [ -x /usr/bin/python3 ]; then
	PYTHON=/usr/bin/python3
else
	PYTHON=$(command -v python3 || echo /usr/bin/python3)
fi
# Each test starts with an empty symbolization cache of its own (sym.h,
# sym_set_cache_dir), so that no test sees another's results.
export XDG_CACHE_HOME="$TMP/xdg-cache"

# fail MSG...: print the reason and exit 1.
fail() {
	echo "FAIL: $*" >&2
	exit 1
}

# skip MSG...: print the reason and exit 77.
skip() {
	echo "skip: $*"
	exit 77
}

# not_checked WHAT: a case the test claims that cannot be checked here
# (a tool missing, a kernel too old): the test goes on with the rest, and
# when it exits 0 the runner shows it as a skip naming WHAT, never as a
# pass (the file SQLPROF_IT_UNCHECKED, which the runner gives each test).
not_checked() {
	echo "not checked: $*"
	[ -n "${SQLPROF_IT_UNCHECKED:-}" ] && echo "$*" >>"$SQLPROF_IT_UNCHECKED"
	return 0
}

# HANG_S: the cap of a command that must end, for a hang only, never a
# verdict on speed (no test's verdict depends on wall time): beside
# stress.sh 8 a loaded machine took chromium past the 50 s it had.
HANG_S=600

# chrome ARGS...: $CHROMIUM headless with a private profile ($TMP/chrome)
# and no network services, its stderr appended to ./chrome.log.
chrome() {
	timeout "$HANG_S" "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-background-networking \
		--disable-component-update --disable-sync --no-first-run --user-data-dir="$TMP/chrome" \
		"$@" 2>>chrome.log
}

# need_prog NAME: skip unless $PROGS/NAME was built.
need_prog() {
	[ -x "$PROGS/$1" ] || skip "$PROGS/$1 not built (make progs)"
}

# report_json PROFILE OUT: sqlprof report --format json PROFILE > OUT,
# failing the test if the report does not succeed.
report_json() {
	"$SQLPROF" report --format json "$1" >"$2" 2>"$2.err" ||
		fail "sqlprof report $1 exited $?: $(cat "$2.err")"
}

# expect REPORT.json ARGS...: see expect.py.
expect() {
	"$PYTHON" "$ITDIR/expect.py" "$@" || exit 1
}

# same_file WHAT EXPECTED ACTUAL: fail with a diff unless identical.
same_file() {
	cmp -s "$2" "$3" || { diff -u "$2" "$3" | head -40 >&2; fail "$1 differs"; }
}

# wait_started FILE PID: wait (up to 30 s) until FILE exists, as long as
# process PID lives; succeeds when FILE exists.
wait_started() {
	local i
	for i in $(seq 1 1500); do
		[ -e "$1" ] && return 0
		kill -0 "$2" 2>/dev/null || break
		sleep 0.02
	done
	[ -e "$1" ]
}

# wait_file FILE [SECONDS]: wait until FILE exists, at most SECONDS
# (default 120: a cap for a hang, never a verdict on speed); succeeds when
# it does. For waiting on a condition instead of sleeping a fixed time.
wait_file() {
	local end=$((SECONDS + ${2:-120}))
	while [ ! -e "$1" ]; do
		[ "$SECONDS" -ge "$end" ] && return 1
		sleep 0.02
	done
}

# wait_until SECONDS COMMAND...: run COMMAND every 0.05 s until it
# succeeds, at most SECONDS (a cap); succeeds when COMMAND did.
wait_until() {
	local end=$((SECONDS + $1))
	shift
	until "$@"; do
		[ "$SECONDS" -ge "$end" ] && return 1
		sleep 0.05
	done
}

# agent_setup: a private run directory, the agent's socket S there and its
# profile P, need_prog service, a memory cap; the agent (AG) is killed on
# exit. agent_start [ARGS...]: start `sqlprof agent --interval 0.5 ARGS`
# on them, its stderr appended to $TMP/agent.err, and wait (up to 60 s:
# a cap, for a loaded machine) for its new "listening" line.
agent_setup() {
	need_prog service
	# ASan reserves terabytes of shadow address space up front: no cap
	# for a sanitized build (make check SANITIZE=address)
	ldd "$SQLPROF" 2>/dev/null | grep -q libasan || ulimit -v 4000000
	mkdir -m 700 "$TMP/run"
	S=$TMP/run/s/sock
	P=$TMP/agent.db
	AG=
	trap '[ -n "$AG" ] && kill -9 "$AG" 2>/dev/null; rm -rf "$TMP"' EXIT
}
agent_start() {
	local before
	before=$(grep -c listening "$TMP/agent.err" 2>/dev/null)
	"$SQLPROF" agent -o "$P" --socket "$S" --interval 0.5 "$@" 2>>"$TMP/agent.err" &
	AG=$!
	local end=$((SECONDS + 60))
	while [ "$SECONDS" -lt "$end" ]; do
		[ "$(grep -c listening "$TMP/agent.err")" -gt "${before:-0}" ] && return 0
		kill -0 "$AG" 2>/dev/null || break
		sleep 0.02
	done
	fail "the agent did not listen on $S: $(cat "$TMP/agent.err")"
}

# need_amalgamation: SQLite's amalgamation for tests of SQLite compiled
# into a program (t_embedded_*): AMALG_DIR (sqlite3.c, sqlite3.h) from
# $SQLPROF_AMALGAMATION, else from npm's `sqlite3` package (its
# deps/sqlite-autoconf-*.tar.gz, fetched with `npm pack` into
# $BUILD/amalgamation), and AMALG_OBJ, its object (-O1 -g), compiled
# once and kept there. Skips when neither can be had.
need_amalgamation() {
	local cache=$BUILD/amalgamation am sum obj tgz inner
	mkdir -p "$cache" || fail "cannot make $cache"
	# tests run in parallel (run-integration.sh): one fetches and builds,
	# the others wait for it
	exec 8>"$cache/lock" && flock 8 || fail "cannot lock $cache/lock"
	am=${SQLPROF_AMALGAMATION:-}
	if [ -z "$am" ]; then
		am=$(ls -d "$cache"/sqlite-autoconf-* 2>/dev/null | head -n 1)
		if [ -z "$am" ] || [ ! -f "$am/sqlite3.c" ]; then
			command -v npm >/dev/null || skip "no amalgamation: set SQLPROF_AMALGAMATION or install npm"
			(cd "$cache" && timeout 120 npm pack --silent sqlite3 >npm.log 2>&1) ||
				skip "npm pack sqlite3 failed (registry unreachable?): $(tail -n 1 "$cache/npm.log")"
			tgz=$(ls "$cache"/sqlite3-*.tgz | head -n 1)
			inner=$(tar tzf "$tgz" | grep 'deps/sqlite-autoconf-.*\.tar\.gz$' | head -n 1)
			[ -n "$inner" ] || fail "$tgz ships no deps/sqlite-autoconf-*.tar.gz"
			tar xzf "$tgz" -C "$cache" "$inner" || fail "unpacking $tgz"
			tar xzf "$cache/$inner" -C "$cache" --wildcards '*/sqlite3.c' '*/sqlite3.h' ||
				fail "unpacking $inner"
			am=$(ls -d "$cache"/sqlite-autoconf-* | head -n 1)
		fi
	fi
	[ -f "$am/sqlite3.c" ] && [ -f "$am/sqlite3.h" ] || fail "$am has no sqlite3.c and sqlite3.h"
	sum=$(sha256sum "$am/sqlite3.c" | cut -c1-16)
	obj=$cache/sqlite3-$sum.o
	if [ ! -f "$obj" ]; then
		echo "compiling $am/sqlite3.c (once; kept as $obj)"
		timeout 900 gcc -c -O1 -g -o "$obj.tmp" "$am/sqlite3.c" || fail "compiling sqlite3.c"
		mv "$obj.tmp" "$obj"
	fi
	AMALG_DIR=$am
	AMALG_OBJ=$obj
	exec 8>&-
}
