#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_exec_deep.sh - sqlite3_exec calls nested 12 deep, 100 times
# (tests/progs/exec_deep.c): all 1200 exec calls are counted, those deeper
# than the 8 the preload keeps a run for included (timed by the shim,
# counted as nested); the top-level ones are the only ones not nested.
. "$(dirname "$0")/lib.sh"
need_prog exec_deep
"$SQLPROF" record -q --rate 0 -o "$TMP/p.db" -- "$PROGS/exec_deep" >"$TMP/out" 2>"$TMP/err" ||
	fail "exec_deep under sqlprof failed: $(cat "$TMP/err")"
[ "$(cat "$TMP/out")" = "1200 callbacks" ] || fail "exec_deep printed $(cat "$TMP/out")"
res=$(sqlite3 "$TMP/p.db" "SELECT sum(count), sum(nested) FROM queries WHERE kind = 'exec'
	AND fingerprint = 'SELECT ? AS deep_exec'") || fail "cannot read the profile"
IFS='|' read -r count nested <<<"$res"
echo "exec calls 12 deep: $count counted, $nested of them nested"
[ "$count" = 1200 ] || fail "$count exec calls counted, expected 1200"
[ "$nested" = 1100 ] || fail "$nested nested exec calls, expected 1100"
exit 0
