#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_output_unchanged.sh - `sqlprof record -q` changes nothing a program
# prints or returns: stdout, stderr and exit code of counts, of the sqlite3
# shell running a failing statement, and of outerr (writes to both streams,
# exits 7) are identical with and without the profiler.
. "$(dirname "$0")/lib.sh"
need_prog counts
need_prog outerr

# compare NAME EXPECTED_RC CMD...: run CMD plain and under record -q.
compare() {
	local name=$1 want=$2 rc1 rc2
	shift 2
	"$@" <"$TMP/stdin" >"$TMP/$name.out1" 2>"$TMP/$name.err1"
	rc1=$?
	rm -f "$TMP/shell.sqlite"
	"$SQLPROF" record -q -o "$TMP/$name.db" -- "$@" <"$TMP/stdin" \
		>"$TMP/$name.out2" 2>"$TMP/$name.err2"
	rc2=$?
	rm -f "$TMP/shell.sqlite"
	[ "$rc1" -eq "$want" ] || fail "$name: exit code $rc1 without sqlprof, expected $want"
	[ "$rc2" -eq "$rc1" ] || fail "$name: exit code $rc2 under sqlprof, $rc1 without"
	same_file "$name stdout" "$TMP/$name.out1" "$TMP/$name.out2"
	same_file "$name stderr" "$TMP/$name.err1" "$TMP/$name.err2"
	[ -f "$TMP/$name.db" ] || fail "$name: no profile written"
}

: >"$TMP/stdin"
compare counts 3 "$PROGS/counts"
compare outerr 7 "$PROGS/outerr"
[ -s "$TMP/outerr.err1" ] && [ -s "$TMP/outerr.out1" ] || fail "outerr wrote nothing"

if [ -x /usr/bin/sqlite3 ]; then
	printf '%s\n' "CREATE TABLE x(a);" "INSERT INTO x VALUES(1);" \
		"SELECT * FROM no_such_table;" "SELECT a FROM x;" >"$TMP/stdin"
	compare shell 1 /usr/bin/sqlite3 -bail "$TMP/shell.sqlite"
	grep -q 'no such table' "$TMP/shell.err1" || fail "shell: expected an error message"
else
	not_checked "/usr/bin/sqlite3 missing: the shell case"
fi
exit 0
