#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_seg_counters.sh - SQLite's statement counters are exact when the
# preload keeps them in segments (stats.c: the statement that owns its
# query record's segment stores its counters at each end, the rest add
# deltas). tests/progs/seg_counters.c moves the segments in every way a
# program can - a statement per call, two of one text in turns from one
# call site, executions abandoned by reset, failures, a long loop, a
# statement moved between threads mid-execution, three statements alive
# at the end - and prints SQLite's own counters per text. The profile
# must show the same VM steps, full-scan steps, sorts and
# automatic-index rows for every text: at rates 0, 0.01 and 1, through
# the API (SQLPROF_STATUS=api, no segments), and for a process that
# SIGKILLs itself with its statements alive.
. "$(dirname "$0")/lib.sh"
need_prog seg_counters

check() { # LABEL PROFILE EXPECTED
	local label=$1 db=$2 want=$3 line sql vm fs so ai got
	while IFS='|' read -r sql vm fs so ai; do
		got=$(sqlite3 "$db" "SELECT vm_steps || '|' || fullscan_steps || '|' || sorts || '|' || autoindex
			FROM queries WHERE kind = 'stmt' AND sql = '$sql'") || fail "$label: cannot read $db"
		[ "$got" = "$vm|$fs|$so|$ai" ] ||
			fail "$label: $sql: profile has ${got:-nothing}, SQLite counted $vm|$fs|$so|$ai"
	done <"$want"
	echo "$label: $(wc -l <"$want") texts, every counter SQLite's own"
}

"$PROGS/seg_counters" >"$TMP/plain.out" 2>&1 || fail "seg_counters alone failed: $(cat "$TMP/plain.out")"
[ "$(wc -l <"$TMP/plain.out")" = 8 ] || fail "seg_counters printed: $(cat "$TMP/plain.out")"
for rate in 0 0.01 1; do
	"$SQLPROF" record -q --rate $rate -o "$TMP/p$rate.db" -- "$PROGS/seg_counters" >"$TMP/out$rate" 2>"$TMP/err" ||
		fail "record --rate $rate failed: $(cat "$TMP/err")"
	same_file "seg_counters' output at rate $rate" "$TMP/plain.out" "$TMP/out$rate"
	check "rate $rate" "$TMP/p$rate.db" "$TMP/plain.out"
done
SQLPROF_STATUS=api "$SQLPROF" record -q --rate 0 -o "$TMP/api.db" -- "$PROGS/seg_counters" >"$TMP/outapi" 2>"$TMP/err" ||
	fail "record (api) failed: $(cat "$TMP/err")"
check "through the API" "$TMP/api.db" "$TMP/plain.out"
# SIGKILL with the statements alive: what they counted is in the segments
set +e
"$SQLPROF" record -q --rate 0 -o "$TMP/kill.db" -- "$PROGS/seg_counters" kill >"$TMP/outkill" 2>"$TMP/err"
rc=$?
set -e
[ "$rc" = 137 ] || fail "record of a SIGKILLed program exited $rc, not 137: $(cat "$TMP/err")"
same_file "seg_counters' output before its SIGKILL" "$TMP/plain.out" "$TMP/outkill"
check "SIGKILLed" "$TMP/kill.db" "$TMP/plain.out"
exit 0
