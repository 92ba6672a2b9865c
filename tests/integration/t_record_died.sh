#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_record_died.sh - a process that dies in the middle of an execution is
# named, with the statement it was running, by record's summary and by
# the report header (text and JSON): tests/progs/die_running, after 50
# executions and one row of `SELECT x FROM t`, (1) raises SIGSEGV, (2) is
# SIGKILLed, (3) does it in a forked child while the command exits 0.
# Before: record exited 139 and said nothing, and nothing in the report
# said a process had died.
. "$(dirname "$0")/lib.sh"
need_prog die_running
cd "$TMP" || exit 1
ulimit -c 0
for how in segv:139:11 kill:137:9 child:0:; do
	IFS=: read -r mode want sig <<<"$how"
	"$SQLPROF" record -o $mode.db -- "$PROGS/die_running" $mode >$mode.out 2>$mode.err
	rc=$?
	[ "$rc" = "$want" ] || fail "$mode: record exited $rc, not $want: $(cat $mode.err)"
	if [ -n "$sig" ]; then
		grep -q "^sqlprof: the command was killed by signal $sig (" $mode.err ||
			fail "$mode: the summary does not say the command was killed: $(cat $mode.err)"
	fi
	grep -qE "^sqlprof: warning: process [0-9]+ \(.*die_running\) ended without exiting \(a signal or a crash\), running 1 execution of: SELECT x FROM t$" $mode.err ||
		fail "$mode: the summary does not name the process and its statement: $(cat $mode.err)"
	"$SQLPROF" report $mode.db >$mode.txt || fail "$mode: report"
	grep -qE "^# died: process [0-9]+ \(.*die_running\) ended without exiting .*running 1 execution of: SELECT x FROM t$" $mode.txt ||
		fail "$mode: the report header does not name the death: $(head -5 $mode.txt)"
	grep -q "^# run: exit status $want" $mode.txt || fail "$mode: no exit status in the header: $(head -5 $mode.txt)"
	report_json $mode.db $mode.json
	"$PYTHON" - $mode.json "$want" <<'PY' || fail "$mode: JSON"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["exit_status"] == int(sys.argv[2]), d["exit_status"]
assert len(d["died"]) == 1 and d["died"][0]["sql"] == "SELECT x FROM t" and d["died"][0]["running"] == 1, d["died"]
q = [q for q in d["queries"] if q["fingerprint"] == "SELECT ? + ?"][0]
assert q["count"] == 50, q["count"]
PY
	echo "$mode: $(grep '^# died' $mode.txt)"
done
# a clean run names no death
"$SQLPROF" record -o ok.db -- "$PROGS/counts" >/dev/null 2>ok.err
grep -q "ended without exiting" ok.err && fail "a clean run reports a death: $(cat ok.err)"
"$SQLPROF" report ok.db | grep -q "^# died" && fail "a clean run's report names a death"
exit 0
