#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# N+1 needs a table and executions close together in time (issue 13, "The
# doctor: right, or silent"), with tests/progs/doctor_cases.c:
# - nplus1: one query 100 times back to back is flagged, with its run of
#   100;
# - constant: `SELECT ? * 2` 100 times in a row reads no table: not
#   flagged (before: n-plus-one, 100 consecutive executions);
# - service: the same query as nplus1, 40 times with 10 ms between them (a
#   service loop): no run longer than 2 (the preload extends a run across
#   a pause of 1 ms or more, SP_RUN_GAP_NS, only while the run has pauses
#   to spare: one, and one per 16 executions), not flagged (before: n-plus-one, 40 consecutive
#   executions).
. "$(dirname "$0")/lib.sh"
need_prog doctor_cases

for c in nplus1 constant service; do
	"$SQLPROF" record -q -o "$TMP/$c.db" -- "$PROGS/doctor_cases" $c >/dev/null || fail "record $c"
	"$SQLPROF" report "$TMP/$c.db" >"$TMP/$c.txt" || fail "report $c"
done
sql='SELECT length(name) FROM users WHERE id = ?'
grep -q "^n-plus-one  $sql" "$TMP/nplus1.txt" || fail "nplus1 not flagged: $(sed -n '/query doctor/,$p' "$TMP/nplus1.txt")"
grep -q 'evidence: 100 consecutive executions' "$TMP/nplus1.txt" || fail "nplus1: not a run of 100"
! grep -q '^n-plus-one' "$TMP/constant.txt" ||
	fail "SELECT ? * 2 flagged: $(sed -n '/query doctor/,$p' "$TMP/constant.txt")"
! grep -q '^n-plus-one' "$TMP/service.txt" ||
	fail "service loop flagged: $(sed -n '/query doctor/,$p' "$TMP/service.txt")"
r=$(sqlite3 "$TMP/service.db" "SELECT max_run || ' ' || runs FROM queries WHERE fingerprint = '$sql'")
[ "$r" = "2 20" ] || fail "service loop: max_run and runs are '$r', not '2 20'"
echo "ok: back-to-back loop flagged; SELECT ? * 2 and a 10 ms service loop not"
