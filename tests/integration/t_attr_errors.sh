#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_attr_errors.sh - failed executions of the attribution fixture, recorded
# at --rate 0 (a failure's stack is taken whatever the rate): the table
# report's "# failed executions" section lists each failing query with its
# count, extended result code and sqlite3_errmsg text, and a backtrace whose
# first frame outside libsqlite3/libsqlprof is the function and line that
# stepped it; the profile's errors and frames tables agree.
#   INSERT INTO u(a) VALUES (?)  3 x rc=2067 (SQLITE_CONSTRAINT_UNIQUE) in q_fail_unique
#   SELECT abs(?) AS overflow    2 x rc=1 "integer overflow" in q_fail_overflow
. "$(dirname "$0")/lib.sh"
. "$ITDIR/../fixtures/attr/fixture.sh"

attr_record "$TMP/p.db" --rate 0 --seed 1 -- "$FIX/attr_main"
"$SQLPROF" report "$TMP/p.db" >"$TMP/table.txt" || fail "sqlprof report failed"
sed -n '/^# failed executions/,$p' "$TMP/table.txt"
echo "--"
"${CHECK[@]}" errors "$TMP/table.txt" "$TMP/p.db" "$FIX/markers.txt" \
	'INSERT INTO u(a) VALUES (?)|3|2067|UNIQUE constraint failed: u.a|q_fail_unique|q_fail_unique' \
	'SELECT abs(?) AS overflow|2|1|integer overflow|q_fail_overflow|q_fail_overflow'
