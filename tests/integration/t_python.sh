#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_python.sh - Python's sqlite3 module: _sqlite3 is dlopened (and with it
# libsqlite3) long after the preload initialised. 10,000 executions of one
# parameterized SELECT must be counted exactly, and the output unchanged.
. "$(dirname "$0")/lib.sh"
PY=$(command -v python3 || true)
[ -n "$PY" ] || PY=/usr/bin/python3
[ -x "$PY" ] || skip "no python3"
"$PY" -c 'import sqlite3' 2>/dev/null || skip "$PY has no sqlite3 module"
mod=$("$PY" -c 'import _sqlite3; print(_sqlite3.__file__)')
ldd "$mod" 2>/dev/null | grep -q 'libsqlite3\.so' ||
	skip "$mod does not link libsqlite3.so dynamically (SQLite built in)"

"$PY" "$ITDIR/queries10k.py" >"$TMP/plain.out" 2>"$TMP/plain.err" ||
	fail "python without sqlprof failed: $(cat "$TMP/plain.err")"
"$SQLPROF" record -q -o "$TMP/p.db" -- "$PY" "$ITDIR/queries10k.py" \
	>"$TMP/rec.out" 2>"$TMP/rec.err"
rc=$?
[ "$rc" -eq 0 ] || fail "python under sqlprof exited $rc: $(cat "$TMP/rec.err")"
same_file "python stdout" "$TMP/plain.out" "$TMP/rec.out"
same_file "python stderr" "$TMP/plain.err" "$TMP/rec.err"

report_json "$TMP/p.db" "$TMP/r.json"
expect "$TMP/r.json" -t lost=0 \
	-q stmt 'SELECT sq FROM nums WHERE x = ?' count=10000 rows=10000 errors=0 \
	-q stmt 'INSERT INTO nums(x, sq) VALUES (?, ?)' count=100 errors=0
exit 0
