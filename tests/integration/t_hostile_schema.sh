#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_hostile_schema.sh - a profile whose schema runs code (issue 17, item
# 14): a recursive view in place of meta, queries or frames, a virtual
# table in place of statements, a table with a generated column. Every
# command that reads a profile (report in each format, export in each
# format, diff and check on either side) must refuse it promptly: exit 3
# with one line on stderr naming the object, within 10 s each (the views
# spun for ever before: every form timed out). record -o and export -o
# over such a file refuse it as no profile (exit 2) unless, for record,
# its header carries a profile's application id: then it is kept unread
# as the .old. Nothing reads or writes the file other than read-only:
# its bytes are unchanged.
. "$(dirname "$0")/lib.sh"
need_prog counts
command -v sqlite3 >/dev/null || skip "sqlite3 shell not installed"
"$SQLPROF" record -q --rate 1 -o "$TMP/base.db" -- "$PROGS/counts" >/dev/null 2>&1
[ -s "$TMP/base.db" ] || fail "cannot record counts"
errors=0
R="WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r)"
NEVER="(SELECT max(n) FROM r) IS NOT NULL" # counts for ever

forms=("report" "report --format json" "report --format csv" "report --by site --stacks"
	"report -w 0 --plans")
for f in folded svg perfetto chrome speedscope csv html; do forms+=("export -f $f"); done

# run WHAT WANT CMD...: CMD must exit WANT within 10 s with one line on stderr.
run() {
	local what=$1 want=$2 rc
	shift 2
	timeout "$HANG_S" "$@" >"$TMP/out" 2>"$TMP/err" </dev/null
	rc=$?
	if [ "$rc" -ne "$want" ]; then
		[ "$rc" -eq 124 ] && rc="124 (hung: killed after 10 s)"
		echo "FAIL: $what: exit $rc, want $want: $(head -c 200 "$TMP/err")" >&2
		errors=$((errors + 1))
	elif [ "$(wc -l <"$TMP/err")" -ne 1 ]; then
		echo "FAIL: $what: want one line on stderr, got:" >&2
		sed 's/^/    /' "$TMP/err" >&2
		errors=$((errors + 1))
	fi
}

# case_ NAME OBJECT SQL: apply SQL to a copy of the profile; every reader
# must refuse it with a message naming OBJECT.
case_() {
	local name=$1 obj=$2 sql=$3 form db=$TMP/$1.db sum
	cp "$TMP/base.db" "$db"
	sqlite3 "$db" "$sql" || fail "$name: cannot make the profile"
	sum=$(cksum <"$db")
	for form in "${forms[@]}"; do
		# shellcheck disable=SC2086
		run "$name: $form" 3 "$SQLPROF" $form "$db"
		grep -q "$obj" "$TMP/err" || { echo "FAIL: $name: $form: '$obj' not named" >&2; errors=$((errors + 1)); }
	done
	run "$name: diff (base)" 3 "$SQLPROF" diff "$db" "$TMP/base.db"
	run "$name: diff (new)" 3 "$SQLPROF" diff "$TMP/base.db" "$db"
	run "$name: check (baseline)" 3 "$SQLPROF" check --baseline "$db" "$TMP/base.db"
	run "$name: check (candidate)" 3 "$SQLPROF" check --baseline "$TMP/base.db" "$db"
	[ "$(cksum <"$db")" = "$sum" ] || { echo "FAIL: $name: the profile changed" >&2; errors=$((errors + 1)); }
	echo "case $name done"
}

case_ view_meta "meta is a view" \
	"ALTER TABLE meta RENAME TO m0; CREATE VIEW meta AS $R SELECT key, value FROM m0 WHERE $NEVER"
case_ view_queries "queries is a view" \
	"ALTER TABLE queries RENAME TO q0; CREATE VIEW queries AS $R SELECT * FROM q0 WHERE $NEVER"
case_ view_frames "frames is a view" \
	"ALTER TABLE frames RENAME TO f0; CREATE VIEW frames AS $R SELECT * FROM f0 WHERE $NEVER"
case_ view_upper_case "STACK_SAMPLES is a view" \
	"DROP TABLE stack_samples; CREATE VIEW STACK_SAMPLES AS $R SELECT n AS fp_id FROM r"
case_ virtual_statements "statements is a virtual table" \
	"DROP TABLE statements; CREATE VIRTUAL TABLE statements USING fts5(sql_id, fp_id, sql, full_len, truncated)"
case_ generated_column "generated columns" \
	"ALTER TABLE queries ADD COLUMN g GENERATED ALWAYS AS (length(fingerprint)) VIRTUAL"

# The outputs' own checks read such a file too: without a profile's
# application id in its header it is looked inside, found no profile and
# not replaced.
cp "$TMP/view_meta.db" "$TMP/out.db"
sqlite3 "$TMP/out.db" "PRAGMA application_id = 0" || fail "clearing the application id"
sum=$(cksum <"$TMP/out.db")
run "record -o over a hostile file" 2 "$SQLPROF" record -q -o "$TMP/out.db" -- true
run "export -o over a hostile file" 2 "$SQLPROF" export -f folded -o "$TMP/out.db" "$TMP/base.db"
[ "$(cksum <"$TMP/out.db")" = "$sum" ] || { echo "FAIL: record/export changed the file" >&2; errors=$((errors + 1)); }
# With a profile's application id (copied from a real one), record takes
# the header's word without reading the schema: the file is kept, unread
# and unchanged, as the .old, and a new profile written.
cp "$TMP/view_meta.db" "$TMP/out2.db"
sum=$(cksum <"$TMP/out2.db")
timeout "$HANG_S" "$SQLPROF" record -q -o "$TMP/out2.db" -- true 2>"$TMP/err2" ||
	fail "record -o over a hostile file with the id: exit $?: $(cat "$TMP/err2")"
[ "$(cksum <"$TMP/out2.db.old")" = "$sum" ] || fail "the hostile file was not kept unchanged as .old"
"$SQLPROF" report "$TMP/out2.db" >/dev/null 2>&1 || fail "the new profile over it does not read"

# A real profile still reads.
"$SQLPROF" report "$TMP/base.db" >/dev/null || fail "report on the real profile failed"
"$SQLPROF" check --baseline "$TMP/base.db" "$TMP/base.db" >/dev/null || fail "check of a profile against itself failed"
[ "$errors" -eq 0 ] || fail "$errors form(s) did not refuse a hostile schema"
exit 0
