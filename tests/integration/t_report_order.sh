#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_report_order.sh - the readers take the writer's row order as a
# shortcut (attrib.c: stack_samples a query at a time, the callers in an
# array; report's sites left in place; diff's walk) and fall back to maps
# for any other order. A profile with its queries, stack_samples and
# callers rows in reverse order (a profile written otherwise, or edited)
# must read the same: report (table, JSON, --by function), diff and
# check give the same output as for the profile as written, at
# --rate 0 (sites from the exact per-caller counts) and --rate 1 (every
# execution sampled).
. "$(dirname "$0")/lib.sh"
need_prog manyfp
command -v sqlite3 >/dev/null || skip "no sqlite3 shell"

reverse() { # reverse DB TABLE...: the rows of each TABLE in reverse rowid order
	local db=$1 t sql=""
	shift
	for t in "$@"; do
		sql="$sql CREATE TEMP TABLE r AS SELECT * FROM $t ORDER BY rowid DESC;
		DELETE FROM $t; INSERT INTO $t SELECT * FROM r; DROP TABLE r;"
	done
	sqlite3 "$db" "BEGIN; $sql COMMIT;" || fail "cannot reverse $*"
}

for rate in 0 1; do
	p=$TMP/p$rate.db r=$TMP/r$rate.db
	"$SQLPROF" record -q --rate $rate -o "$p" -- "$PROGS/manyfp" 300 >/dev/null ||
		fail "record --rate $rate failed"
	cp "$p" "$r"
	reverse "$r" queries stack_samples callers
	# the reversal took: the rows are out of the writer's order now
	[ "$(sqlite3 "$r" "SELECT fp_id FROM callers ORDER BY rowid LIMIT 1")" -gt \
		"$(sqlite3 "$r" "SELECT fp_id FROM callers ORDER BY rowid DESC LIMIT 1")" ] ||
		fail "--rate $rate: the callers were not reversed"
	for args in "report" "report --format json" "report --by function" \
		"diff $p" "check --baseline $p"; do
		# shellcheck disable=SC2086
		"$SQLPROF" $args "$p" >"$TMP/a.out" 2>&1
		echo "exit $?" >>"$TMP/a.out"
		# shellcheck disable=SC2086
		"$SQLPROF" $args "$r" >"$TMP/b.out" 2>&1
		echo "exit $?" >>"$TMP/b.out"
		sed -i "s|$r|PROFILE|g; s|$p|PROFILE|g" "$TMP/a.out" "$TMP/b.out"
		cmp -s "$TMP/a.out" "$TMP/b.out" ||
			fail "--rate $rate, $args: the reversed profile reads otherwise: $(diff "$TMP/a.out" "$TMP/b.out" | head -8)"
	done
	echo "--rate $rate: report, JSON, --by function, diff and check the same in both orders"
done
