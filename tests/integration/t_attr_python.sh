#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_attr_python.sh - a Python program's queries (attr_py_workload.py, at
# --rate 1) are attributed to the Python lines that issued them (module
# python3.X, file attr_py_workload.py, the line of the call), every
# execution of them, none unattributed (before Python frames: to
# stmt_step in the _sqlite3 extension). Run with /usr/bin/python3
# (Debian's, whose _sqlite3 is stripped) and with python3 from PATH when
# that is another interpreter (e.g. pyenv's); an interpreter whose
# _sqlite3 has SQLite built in (not a dynamic libsqlite3) is skipped.
. "$(dirname "$0")/lib.sh"

pys=()
for py in /usr/bin/python3 "$(command -v python3 || true)"; do
	[ -n "$py" ] && [ -x "$py" ] || continue
	# the interpreter itself, not a wrapper such as pyenv's shim
	py=$("$py" -c 'import sys; print(sys.executable)' 2>/dev/null) && [ -x "$py" ] || continue
	real=$(readlink -f "$py")
	for p in "${pys[@]}"; do [ "$(readlink -f "$p")" = "$real" ] && continue 2; done
	mod=$("$py" -c 'import _sqlite3; print(_sqlite3.__file__)' 2>/dev/null) || {
		echo "note: $py has no sqlite3 module"
		continue
	}
	ldd "$mod" 2>/dev/null | grep -q 'libsqlite3\.so' || {
		echo "note: $mod does not link libsqlite3.so dynamically (SQLite built in)"
		continue
	}
	pys+=("$py")
done
[ ${#pys[@]} -gt 0 ] || skip "no python3 whose _sqlite3 links libsqlite3 dynamically"

rc=0
n=0
for py in "${pys[@]}"; do
	n=$((n + 1))
	echo "== $py ($("$py" -c 'import _sqlite3; print(_sqlite3.__file__)'))"
	"$SQLPROF" record -q --rate 1 -o "$TMP/py$n.db" -- "$py" "$ITDIR/attr_py_workload.py" \
		>"$TMP/py$n.out" 2>"$TMP/py$n.err" ||
		fail "sqlprof record $py exited $?: $(cat "$TMP/py$n.err")"
	grep -qx 'total=129500' "$TMP/py$n.out" || fail "$py printed $(cat "$TMP/py$n.out")"
	report_json "$TMP/py$n.db" "$TMP/py$n.json"
	"$PYTHON" "$ITDIR/attr_check.py" python "$TMP/py$n.json" \
		'CREATE TABLE t(x integer PRIMARY KEY, y integer)=1@15' \
		'INSERT INTO t(x, y) VALUES (?, ?)=300@16' \
		'SELECT y FROM t WHERE x = ?=500@20' \
		'UPDATE t SET y = y + ? WHERE x = ?=40@11' || rc=1
done
exit $rc
