#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The same SQL with the same bound values is its own finding, `duplicate`
# (issue 13; Django's debug toolbar calls these duplicated queries).
# tests/progs/doctor_cases.c duplicate, at --rate 1 (the rule looks at
# randomly drawn executions only: a keyed hash of their values):
# - `SELECT value FROM settings WHERE key = ?` with 'key42' 200 times:
#   flagged, 199 of 200 drawn executions repeating earlier values (before:
#   no finding of any kind);
# - `SELECT value + 1 FROM settings WHERE key = ?` with 200 distinct keys,
#   and the query between them with distinct values: not flagged;
# - the values are not in the profile (t_robust_secrets checks the rest).
. "$(dirname "$0")/lib.sh"
need_prog doctor_cases

"$SQLPROF" record -q --rate 1 -o "$TMP/d.db" -- "$PROGS/doctor_cases" duplicate >/dev/null ||
	fail "record"
"$SQLPROF" report "$TMP/d.db" >"$TMP/d.txt" || fail "report"
doc=$(sed -n '/# query doctor/,$p' "$TMP/d.txt")
grep -q '^duplicate   SELECT value FROM settings WHERE KEY = ?' <<<"$doc" ||
	fail "the repeated query is not flagged: $doc"
# past a statement's first 64 executions, about 1 % of all are hashed
# above rate 0.01 (~400 instructions a hash; t_params_hash.sh): at --rate 1,
# 65 of 66 hashed executions repeat
grep -qE 'evidence: [0-9]+ of [0-9]+ drawn executions had the bound values of an earlier one \(one set of values: [0-9]+\)' <<<"$doc" ||
	fail "wrong evidence: $doc"
! grep -q '^duplicate   SELECT value + ? FROM settings' <<<"$doc" || fail "distinct values flagged: $doc"
! grep -q '^duplicate   SELECT count' <<<"$doc" || fail "distinct values flagged: $doc"
[ "$(grep -c '^duplicate' <<<"$doc")" = 1 ] || fail "more than one duplicate finding: $doc"
! grep -q 'key42' "$TMP/d.db" || fail "a bound value is in the profile"
echo "ok: one duplicate finding, the repeated values; distinct values silent"
