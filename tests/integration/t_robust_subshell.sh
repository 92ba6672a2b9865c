#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_robust_subshell.sh - forked children that never touch SQLite (bash
# subshells and command substitutions, which fork without exec) must not
# show up in the profile as anonymous processes: every row of the processes
# table names its program (exe) and its parent (ppid), and the report counts
# only processes that said who they were.
. "$(dirname "$0")/lib.sh"
need_prog counts

"$SQLPROF" record -q -o "$TMP/p.db" -- bash -c \
	'( echo sub ); x=$(echo hi); echo $x; "$1" >/dev/null; echo rc=$?' sh "$PROGS/counts" \
	>"$TMP/rec.out" 2>"$TMP/rec.err"
rc=$?
[ "$rc" -eq 0 ] || fail "sqlprof record exited $rc: $(cat "$TMP/rec.err")"
printf 'sub\nhi\nrc=3\n' >"$TMP/want.out"
same_file "stdout" "$TMP/want.out" "$TMP/rec.out"
sqlite3 "$TMP/p.db" "SELECT pid, ppid, exe, executions, clean_exit, messages FROM processes" >"$TMP/procs" ||
	fail "cannot read the processes table"
sed 's/^/    process: /' "$TMP/procs"
anon=$(sqlite3 "$TMP/p.db" "SELECT count(*) FROM processes WHERE exe = '' OR exe IS NULL OR ppid = 0")
[ "$anon" = 0 ] || fail "$anon process row(s) without exe/ppid (a BYE without HELLO from a forked child that never connected)"
n=$(sqlite3 "$TMP/p.db" "SELECT count(*) FROM processes WHERE exe LIKE '%counts'")
[ "$n" = 1 ] || fail "counts is in $n process rows, expected 1"
exit 0
