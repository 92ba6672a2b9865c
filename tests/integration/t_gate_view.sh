#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_gate_view.sh - plan capture leaves the application's view intact.
# tests/progs/gate_view.c prints errcode, errmsg, changes, total_changes,
# last_insert_rowid and autocommit just before and after preparing new
# SELECTs (outside and inside a transaction, after a failed step, a failed
# exec and a failed prepare, with another statement open), and the call
# counts of an authorizer and a trace_v2 callback; it exits 1 if a prepare
# moved what a prepare never moves. Its output must be byte-identical with
# and without sqlprof, and plans must have been captured (on the plain
# connection only: the ones with callbacks are skipped by design).
. "$(dirname "$0")/lib.sh"
need_prog gate_view

"$PROGS/gate_view" >"$TMP/plain.out" 2>"$TMP/plain.err" ||
	fail "gate_view without sqlprof exited $?: $(cat "$TMP/plain.out" "$TMP/plain.err")"
"$SQLPROF" record -q -o "$TMP/v.db" -- "$PROGS/gate_view" >"$TMP/rec.out" 2>"$TMP/rec.err" ||
	fail "gate_view under sqlprof exited $?: $(cat "$TMP/rec.out" "$TMP/rec.err")"
same_file "gate_view's view of SQLite under sqlprof" "$TMP/plain.out" "$TMP/rec.out"
grep -q '^authorizer calls: [1-9]' "$TMP/rec.out" || fail "the authorizer was never called"
grep -q '^trace calls: [1-9]' "$TMP/rec.out" || fail "the trace callback was never called"

# The prepares did trigger plan capture on the plain connection ...
n=$(sqlite3 "$TMP/v.db" "SELECT count(*) FROM plans p JOIN statements s USING (sql_id)
	WHERE s.sql LIKE '% va %' OR s.sql LIKE '% va'") || fail "cannot read plans"
[ "$n" -ge 7 ] || fail "only $n plans captured for the va statements (expected the 7 SELECTs and more)"
# ... and none on the connections with an authorizer or a trace callback.
n=$(sqlite3 "$TMP/v.db" "SELECT count(*) FROM plans p JOIN statements s USING (sql_id)
	WHERE s.sql LIKE '%vb%' OR s.sql LIKE '%vc%'") || fail "cannot read plans"
[ "$n" -eq 0 ] || fail "$n plans captured on connections with callbacks"
exit 0
