#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_counts.sh - exact per-fingerprint counts of tests/progs/counts.c, its
# exit code and stdout passed through unchanged.
. "$(dirname "$0")/lib.sh"
need_prog counts

"$PROGS/counts" >"$TMP/plain.out" 2>"$TMP/plain.err"
plain_rc=$?
"$SQLPROF" record -q -o "$TMP/p.db" -- "$PROGS/counts" >"$TMP/rec.out" 2>"$TMP/rec.err"
rec_rc=$?
[ "$plain_rc" -eq 3 ] || fail "counts without sqlprof exited $plain_rc, expected 3"
[ "$rec_rc" -eq 3 ] || fail "sqlprof record exited $rec_rc, expected 3 (counts' exit code); stderr: $(cat "$TMP/rec.err")"
same_file "stdout under sqlprof record" "$TMP/plain.out" "$TMP/rec.out"

report_json "$TMP/p.db" "$TMP/r.json"
expect "$TMP/r.json" \
	-t lost=0 processes=1 \
	-q stmt 'SELECT a FROM t WHERE a = ?' count=1000 rows=1000 errors=0 \
	-q stmt 'SELECT count(*) FROM t WHERE b <> ?' count=37 rows=37 errors=0 \
	-q stmt 'INSERT INTO t(a, b) VALUES (?, ?)' count=1 errors=1 \
	-q exec 'CREATE TABLE t(a integer PRIMARY KEY, b text); INSERT INTO t(b) VALUES (?); INSERT INTO t(b) VALUES (?)' count=1 errors=0 \
	-q stmt 'CREATE TABLE t(a integer PRIMARY KEY, b text)' count=1 \
	-q stmt 'INSERT INTO t(b) VALUES (?)' count=2

# The failing INSERT's error is in the errors table as a constraint error.
n=$(sqlite3 "$TMP/p.db" "SELECT sum(count) FROM errors WHERE rc & 255 = 19") ||
	fail "cannot query the errors table"
[ "$n" = 1 ] || fail "errors table: $n SQLITE_CONSTRAINT errors, expected 1"
exit 0
