#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_plan_invisible.sh - plan capture has no effect a program can see.
# tests/progs/plan_effects.c prints the error state after a successful
# prepare just below SQLITE_LIMIT_SQL_LENGTH (the preload's EXPLAIN QUERY
# PLAN statement is 19 bytes longer) and after one under a low
# SQLITE_LIMIT_VDBE_OP (where the preload's statement fails with
# SQLITE_NOMEM, and SQLite logs that), every message its SQLITE_CONFIG_LOG
# callback receives (an automatic index is logged while a join is
# planned), the results of other sqlite3_config calls before and after
# initialization, and the xBestIndex calls of its own virtual table
# modules (one created with CREATE VIRTUAL TABLE, one eponymous-only).
# Its output must be byte-identical with and without sqlprof, and plans
# must still be captured where that is harmless: the plain SELECT, the
# automatic-index join, a SELECT with room for exactly the 19-byte prefix
# under the length limit, all on the plain connection, and the built-in json_each
# table-valued function; none on the connection with the program's modules.
. "$(dirname "$0")/lib.sh"
need_prog plan_effects

"$PROGS/plan_effects" >"$TMP/plain.out" 2>"$TMP/plain.err" ||
	fail "plan_effects without sqlprof exited $?: $(cat "$TMP/plain.out" "$TMP/plain.err")"
"$SQLPROF" record -q -o "$TMP/p.db" -- "$PROGS/plan_effects" >"$TMP/rec.out" 2>"$TMP/rec.err" ||
	fail "plan_effects under sqlprof exited $?: $(cat "$TMP/rec.out" "$TMP/rec.err")"
same_file "plan_effects' view of SQLite under sqlprof" "$TMP/plain.out" "$TMP/rec.out"
same_file "plan_effects' stderr under sqlprof" "$TMP/plain.err" "$TMP/rec.err"
# the program saw what the test is about (not a vacuous comparison)
grep -q "^log totals: calls=7 autoindex=3 wrong arg=0$" "$TMP/rec.out" ||
	fail "the log callback did not see exactly its 3 automatic-index messages"
grep -q "^xBestIndex total: 4$" "$TMP/rec.out" || fail "xBestIndex was not called exactly 4 times"
grep -q "^near the length limit: rc=0 errcode=0 xerrcode=0 errmsg='not an error' offset=-1$" \
	"$TMP/rec.out" || fail "the error state after the near-limit prepare is not SQLITE_OK"
grep -q "^under SQLITE_LIMIT_VDBE_OP: rc=0 errcode=0 xerrcode=0 errmsg='not an error' offset=-1$" \
	"$TMP/rec.out" || fail "the error state after the prepare under SQLITE_LIMIT_VDBE_OP is not SQLITE_OK"
grep -q "^  the same under EXPLAIN QUERY PLAN: rc=7$" "$TMP/rec.out" ||
	fail "EXPLAIN QUERY PLAN under SQLITE_LIMIT_VDBE_OP did not fail: the case tests nothing"

plans() {
	sqlite3 "$TMP/p.db" "SELECT count(*) FROM plans p JOIN statements s USING (sql_id)
		WHERE $1" || fail "cannot read plans"
}
[ "$(plans "s.sql = 'SELECT v FROM pe_a WHERE x < 10'")" -ge 1 ] ||
	fail "no plan captured for the plain SELECT"
[ "$(plans "s.sql LIKE '%JOIN pe_b%' AND p.plan LIKE '%AUTOMATIC%'")" -ge 1 ] ||
	fail "no plan with the automatic index captured for the join"
[ "$(plans "s.sql = 'SELECT count(*) FROM pe_b WHERE y > 4 AND w < 300'")" -ge 1 ] ||
	fail "no plan captured for the SELECT with room for exactly the EXPLAIN QUERY PLAN prefix"
[ "$(plans "s.sql LIKE '%json_each%'")" -ge 1 ] ||
	fail "no plan captured for the json_each query (a built-in module)"
n=$(plans "s.sql LIKE '%vt\_%' ESCAPE '\\'")
[ "$n" -eq 0 ] || fail "$n plans captured on the connection with the program's modules"
exit 0
