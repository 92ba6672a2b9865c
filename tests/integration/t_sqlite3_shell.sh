#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_sqlite3_shell.sh - the sqlite3 command-line shell (dynamically linked to
# libsqlite3) running a script on a temp database: 50 inserts in one
# transaction are counted, and the shell's output is byte-identical with and
# without sqlprof.
. "$(dirname "$0")/lib.sh"
SHELL_BIN=${SQLITE3_SHELL:-/usr/bin/sqlite3}
[ -x "$SHELL_BIN" ] || skip "no sqlite3 shell at $SHELL_BIN"
ldd "$SHELL_BIN" 2>/dev/null | grep -q 'libsqlite3\.so' ||
	skip "$SHELL_BIN does not link libsqlite3.so dynamically"

{
	echo "CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT, qty INTEGER);"
	echo "BEGIN;"
	for i in $(seq 1 50); do
		echo "INSERT INTO items(name, qty) VALUES('item$i', $i);"
	done
	echo "COMMIT;"
	echo "SELECT count(*), sum(qty) FROM items;"
	echo "SELECT name, qty FROM items WHERE qty > 45 ORDER BY qty;"
	echo "SELECT group_concat(name, ',') FROM items WHERE qty % 10 = 0;"
} >"$TMP/script.sql"

"$SHELL_BIN" "$TMP/plain.sqlite" <"$TMP/script.sql" >"$TMP/plain.out" 2>"$TMP/plain.err"
plain_rc=$?
"$SQLPROF" record -o "$TMP/p.db" -- "$SHELL_BIN" "$TMP/rec.sqlite" \
	<"$TMP/script.sql" >"$TMP/rec.out" 2>"$TMP/rec.err"
rec_rc=$?
[ "$plain_rc" -eq 0 ] || fail "sqlite3 shell failed without sqlprof ($plain_rc): $(cat "$TMP/plain.err")"
[ "$rec_rc" -eq "$plain_rc" ] || fail "exit code $rec_rc under sqlprof, $plain_rc without"
[ -s "$TMP/plain.out" ] || fail "the shell printed nothing"
same_file "shell stdout under sqlprof record" "$TMP/plain.out" "$TMP/rec.out"
grep -q '^sqlprof: .* executions from 1 process' "$TMP/rec.err" ||
	fail "no summary line on stderr: $(cat "$TMP/rec.err")"

report_json "$TMP/p.db" "$TMP/r.json"
expect "$TMP/r.json" -t lost=0 processes=1 \
	-q stmt 'INSERT INTO items(name, qty) VALUES (?, ?)' count=50 errors=0 \
	-q stmt 'SELECT count(*), sum(qty) FROM items' count=1 rows=1 \
	-q stmt 'SELECT name, qty FROM items WHERE qty > ? ORDER BY qty' count=1 rows=5
exit 0
