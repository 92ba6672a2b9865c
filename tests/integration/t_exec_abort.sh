#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_exec_abort.sh - 1000 sqlite3_exec calls whose callback returns
# non-zero at the first row (tests/progs/exec_abort.c): each returns
# SQLITE_ABORT, and SQLite frees the statement it was stepping itself,
# past sqlite3_finalize, its execution open. Every one of those 1000
# executions is counted, with its row, its VM steps and as nested in its
# exec call, at --rate 0 and --rate 1 (999, no VM steps, before: each was
# counted only when a later prepare reused its address, the last never).
. "$(dirname "$0")/lib.sh"
need_prog exec_abort
"$PROGS/exec_abort" >"$TMP/plain.out" 2>&1 || fail "exec_abort without sqlprof failed"
for rate in 0 1; do
	"$SQLPROF" record -q --rate $rate -o "$TMP/p$rate.db" -- "$PROGS/exec_abort" >"$TMP/out" 2>"$TMP/err" ||
		fail "exec_abort under sqlprof failed: $(cat "$TMP/err")"
	same_file "exec_abort stdout" "$TMP/plain.out" "$TMP/out"
	res=$(sqlite3 "$TMP/p$rate.db" "SELECT count, rows, vm_steps, nested FROM queries
		WHERE kind = 'stmt' AND fingerprint = 'SELECT a FROM t'") || fail "cannot read the profile"
	IFS='|' read -r count rows vm nested <<<"$res"
	echo "rate $rate: the aborted exec calls' statement: $count executions, $rows rows, $vm VM steps, $nested nested"
	[ "$count" = 1000 ] || fail "rate $rate: $count executions of the aborted statement counted, expected 1000"
	[ "$rows" = 1000 ] || fail "rate $rate: $rows rows, expected 1000"
	[ "$nested" = 1000 ] || fail "rate $rate: $nested nested, expected 1000"
	[ "$vm" -gt 0 ] && [ $((vm % 1000)) = 0 ] ||
		fail "rate $rate: $vm VM steps, expected the same non-zero number for each of the 1000"
	report_json "$TMP/p$rate.db" "$TMP/r.json"
	# the report folds each single-statement exec and its statement into
	# one row (the exec's, with the statement's rows and steps)
	expect "$TMP/r.json" -t lost=0 -q exec "SELECT a FROM t" count=1000 rows=1000 folded=True \
		-q exec "SELECT a FROM t WHERE a > ?" count=10 rows=30 folded=True \
		-a stmt "SELECT a FROM t" -a stmt "SELECT a FROM t WHERE a > ?"
done
exit 0
