#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_scale_fingerprints.sh - issue 24 items 4 and 7 at a size a test can run:
# tests/progs/manyfp at 5,000 and 20,000 distinct fingerprints (3 executions
# each from two sites), recorded, then report, diff and check of each
# profile against itself, every command under a generous `ulimit -v`. The
# CPU time (user + system, not wall: the machine is shared) of each command
# at 20,000 against 5,000 stays within 10 times: linear work is 4 times
# (less with the fixed start-up), a cost quadratic in the fingerprints 16
# times. Every fingerprint is a query of the profile, and every query has
# a plan, or the report says which bound left some without one.
. "$(dirname "$0")/lib.sh"
need_prog manyfp

# cpu_of KB CMD...: run CMD under `ulimit -v KB` (its output in $TMP/out and
# $TMP/err, its exit status in $TMP/rc) and print its CPU seconds, user and
# system time of it and its children
cpu_of() {
	local kb=$1
	shift
	(
		ulimit -v "$kb"
		TIMEFORMAT='%U %S'
		time {
			"$@" >"$TMP/out" 2>"$TMP/err"
			echo $? >"$TMP/rc"
		}
	) 2>"$TMP/time"
	awk '{ printf "%.3f", $1 + $2 }' "$TMP/time"
}
# ok WHAT CODES...: the last command's status is one of CODES
ok() {
	local what=$1 rc code
	shift
	rc=$(cat "$TMP/rc")
	for code in "$@"; do [ "$rc" = "$code" ] && return 0; done
	fail "$what exited $rc: $(tail -3 "$TMP/err")"
}

for n in 5000 20000; do
	# record: the program maps its statistics (SQLPROF_STATS_MB, 512 MB
	# by default) and so does the collector: 3 GB of address space each
	c=$(cpu_of 3000000 "$SQLPROF" record -q -o "$TMP/p$n.db" -- "$PROGS/manyfp" "$n")
	ok "record of $n fingerprints" 0
	eval "rec_$n=$c"
	q=$("$PYTHON" -c 'import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute(
"SELECT COUNT(*) FROM queries WHERE fingerprint LIKE ?", ("SELECT ? + ? AS c%",)).fetchone()[0])' "$TMP/p$n.db")
	[ "$q" = "$n" ] || fail "$n fingerprints: $q queries in the profile"
	c=$(cpu_of 1500000 "$SQLPROF" report "$TMP/p$n.db")
	ok "report of $n fingerprints" 0
	eval "report_$n=$c"
	cp "$TMP/out" "$TMP/report$n.txt"
	c=$(cpu_of 1500000 "$SQLPROF" report --format json "$TMP/p$n.db")
	ok "report --format json of $n fingerprints" 0
	cp "$TMP/out" "$TMP/report$n.json"
	c=$(cpu_of 1500000 "$SQLPROF" diff "$TMP/p$n.db" "$TMP/p$n.db")
	ok "diff of $n fingerprints" 0
	eval "diff_$n=$c"
	c=$(cpu_of 1500000 "$SQLPROF" check --baseline "$TMP/p$n.db" "$TMP/p$n.db")
	ok "check of $n fingerprints" 0 1
	eval "check_$n=$c"
	# item 4: a plan for every query, or the bound that applied
	noplan=$("$PYTHON" -c 'import json, sys; print(json.load(open(sys.argv[1]))["no_plan"])' "$TMP/report$n.json")
	if [ "$noplan" != 0 ]; then
		grep -q "^# plans: bound reached in .*; $noplan of [0-9]* queries have no plan" "$TMP/report$n.txt" ||
			fail "$n fingerprints: $noplan queries without a plan and no bound said: $(head -3 "$TMP/report$n.txt")"
		echo "    $n: $noplan queries without a plan: $(grep '^# plans:' "$TMP/report$n.txt")"
	fi
done
for what in rec report diff check; do
	eval "a=\$${what}_5000 b=\$${what}_20000"
	echo "    $what: CPU ${a} s at 5,000 fingerprints, ${b} s at 20,000"
	awk -v a="$a" -v b="$b" 'BEGIN { exit !(b <= 10 * (a > 0.05 ? a : 0.05)) }' ||
		fail "$what: CPU $b s at 20,000 fingerprints against $a s at 5,000 (more than 10 times: quadratic?)"
done
exit 0
