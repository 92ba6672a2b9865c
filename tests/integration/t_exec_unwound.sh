#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_exec_unwound.sh - a callback leaves sqlite3_exec by longjmp (what a C++
# exception through it does), then the program runs 1000 executions with
# a local array where the exec call's frames were
# (tests/progs/exec_longjmp.c). The exec call's state lives in thread-local
# storage, never in its frame, and the next execution finds it gone: the
# program's output is as without sqlprof (the array untouched), and the
# 1000 executions are top-level, not nested in the vanished call, one run
# of 1000.
. "$(dirname "$0")/lib.sh"
need_prog exec_longjmp

"$PROGS/exec_longjmp" >"$TMP/plain.out" || fail "exec_longjmp without sqlprof failed"
"$SQLPROF" record -q --rate 1 -o "$TMP/p.db" -- "$PROGS/exec_longjmp" >"$TMP/rec.out" 2>"$TMP/rec.err" ||
	fail "exec_longjmp under sqlprof failed: $(cat "$TMP/rec.err")"
same_file "exec_longjmp's output (a checksum of its local array)" "$TMP/plain.out" "$TMP/rec.out"
report_json "$TMP/p.db" "$TMP/r.json"
expect "$TMP/r.json" -q stmt "SELECT ? AS after_longjmp" count=1000 nested=0 max_run=1000 \
	-q exec "SELECT ? AS left_by_longjmp" count=1
echo "after a longjmp out of sqlite3_exec: array intact, 1000 top-level executions in one run"
exit 0
