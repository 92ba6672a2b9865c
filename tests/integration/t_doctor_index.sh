#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Index suggestions are checked before they are printed (issue 13, "The
# doctor: right, or silent"): the profile keeps the schema each query was
# planned under (read by the preload for an in-memory database, by record
# from the file otherwise), the doctor builds it in a private in-memory
# database, creates the index it derived and prints it only if EXPLAIN
# QUERY PLAN then neither scans the table nor sorts
# (tests/progs/doctor_cases.c), for a database in memory and in a file:
# - missing: the index on orders(user_id) is suggested;
# - like: `title LIKE '%x%' ORDER BY price` gets no CREATE INDEX (before:
#   books_price, with which the plan still scans the whole table);
# - rowid: `ORDER BY k`, k the INTEGER PRIMARY KEY, gets none (before:
#   kv_k, an index on the rowid).
# A profile without schemas (a copy with the table dropped) suggests
# nothing either.
. "$(dirname "$0")/lib.sh"
need_prog doctor_cases

for where in memory file; do
	for c in missing like rowid; do
		db=()
		[ $where = file ] && db=("$TMP/$c.sqlite")
		"$SQLPROF" record -q -o "$TMP/$c.$where.db" -- "$PROGS/doctor_cases" $c "${db[@]}" \
			>/dev/null || fail "record $c ($where)"
		"$SQLPROF" report "$TMP/$c.$where.db" >"$TMP/$c.$where.txt" || fail "report $c"
		sed -n '/# query doctor/,$p' "$TMP/$c.$where.txt" >"$TMP/$c.$where.doc"
	done
	d=$TMP/missing.$where.doc
	grep -q '^full-scan   SELECT sum(amount) FROM orders WHERE user_id = ?' "$d" ||
		fail "missing ($where): no full-scan finding: $(cat "$d")"
	grep -q 'suggestion: CREATE INDEX orders_user_id ON orders(user_id);' "$d" ||
		fail "missing ($where): the index is not suggested: $(cat "$d")"
	d=$TMP/like.$where.doc
	grep -q '^full-scan   SELECT id FROM books WHERE title LIKE ? ORDER BY price' "$d" ||
		fail "like ($where): no full-scan finding: $(cat "$d")"
	! grep -q 'CREATE INDEX' "$d" || fail "like ($where): an index suggested: $(cat "$d")"
	grep -q 'no suggestion (no index on the WHERE and ORDER BY columns avoids' "$d" ||
		fail "like ($where): not said why: $(cat "$d")"
	d=$TMP/rowid.$where.doc
	grep -q 'SELECT length(v) FROM kv WHERE note LIKE ? ORDER BY k' "$d" ||
		fail "rowid ($where): no finding: $(cat "$d")"
	! grep -q 'CREATE INDEX' "$d" || fail "rowid ($where): an index suggested: $(cat "$d")"
done

# where the schema came from: the preload (in memory), the file (record)
n=$(sqlite3 "$TMP/missing.memory.db" "SELECT count(*) FROM schemas WHERE sql LIKE '%CREATE TABLE orders%'")
[ "$n" -ge 1 ] || fail "no schema in the in-memory run's profile"
n=$(sqlite3 "$TMP/missing.file.db" "SELECT count(*) FROM plans WHERE schema_id IN (SELECT schema_id FROM schemas)")
[ "$n" -ge 1 ] || fail "no plan with a schema in the file run's profile"

# no schema, no suggestion
cp "$TMP/missing.file.db" "$TMP/old.db"
sqlite3 "$TMP/old.db" "DROP TABLE schemas" || fail "drop schemas"
"$SQLPROF" report "$TMP/old.db" >"$TMP/old.txt" || fail "report of a profile without schemas"
! grep -q 'CREATE INDEX' "$TMP/old.txt" || fail "an unchecked index suggested"
grep -q 'no suggestion (the schema was not recorded' "$TMP/old.txt" || fail "not said why"
echo "ok: missing index suggested, LIKE and rowid silent, in memory and in a file"
