#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_exit_paths.sh - executions of a process that leaves without exit
# handlers must not vanish silently: a forked child leaving with _exit(0),
# and a process that exec()s another program after running queries. Either
# the 100 executions are counted, or the loss is visible in the profile
# (lost > 0, or the process marked as not exited cleanly). The house rule:
# "count the loss and report it - never drop silently".
. "$(dirname "$0")/lib.sh"
need_prog exitpaths
errors=0

# accounted NAME PROFILE FINGERPRINT: 100 executions counted, or a visible loss.
accounted() {
	local name=$1 db=$2 fp=$3 count lost unclean
	count=$(sqlite3 "$db" "SELECT coalesce(sum(count), 0) FROM queries WHERE fingerprint = '$fp'")
	lost=$(sqlite3 "$db" "SELECT coalesce(sum(lost), 0) FROM processes")
	unclean=$(sqlite3 "$db" "SELECT count(*) FROM processes WHERE clean_exit = 0")
	echo "$name: count $count, lost $lost, unclean processes $unclean"
	sqlite3 "$db" "SELECT pid, ppid, exe, executions, lost, clean_exit FROM processes" | sed 's/^/    process: /'
	if [ "$count" != 100 ] && [ "$lost" = 0 ] && [ "$unclean" = 0 ]; then
		echo "FAIL: $name: '$fp' counted $count times, expected 100, and the profile reports no loss" >&2
		errors=$((errors + 1))
	fi
}

"$SQLPROF" record -q -o "$TMP/exit.db" -- "$PROGS/exitpaths" _exit >"$TMP/out" 2>"$TMP/err" ||
	fail "exitpaths _exit under sqlprof failed: $(cat "$TMP/err")"
n=$(sqlite3 "$TMP/exit.db" "SELECT sum(count) FROM queries WHERE fingerprint = 'SELECT ? AS parent_q'")
[ "$n" = 100 ] || fail "parent count $n, expected 100"
procs=$(sqlite3 "$TMP/exit.db" "SELECT count(*) FROM processes")
[ "$procs" = 2 ] || echo "note: $procs process(es) in the profile, expected 2 (the _exit child is missing)"
accounted "_exit child" "$TMP/exit.db" 'SELECT ? AS child_exit'

"$SQLPROF" record -q -o "$TMP/exec.db" -- "$PROGS/exitpaths" exec true >"$TMP/out" 2>"$TMP/err" ||
	fail "exitpaths exec under sqlprof failed: $(cat "$TMP/err")"
accounted "queries before exec" "$TMP/exec.db" 'SELECT ? AS before_exec'

[ "$errors" -eq 0 ] || fail "$errors case(s) lost executions silently"
exit 0
