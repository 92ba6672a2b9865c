#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_prepare_variants.sh - all six sqlite3_prepare* interposers
# (tests/progs/prepare_variants.c: legacy with a tail, _v2, _v3, and the
# three UTF-16 ones), 300 executions each at --rate 0 and --rate 1: the
# program's output unchanged, every execution counted under its own text,
# the legacy sqlite3_prepare's statements under the text up to its tail
# (each of the two statements of one string), the UTF-8 text of the
# UTF-16 statements (SQLite keeps one for the legacy sqlite3_prepare16
# too, since 3.x: sqlprof's "<sql from sqlite3_prepare16>" is only for a
# library that does not).
. "$(dirname "$0")/lib.sh"
need_prog prepare_variants
"$PROGS/prepare_variants" 300 >"$TMP/plain.out" 2>&1 || fail "prepare_variants without sqlprof failed"
for rate in 0 1; do
	"$SQLPROF" record -q --rate $rate -o "$TMP/p$rate.db" -- "$PROGS/prepare_variants" 300 \
		>"$TMP/out" 2>"$TMP/err" || fail "prepare_variants under sqlprof failed: $(cat "$TMP/err")"
	same_file "prepare_variants stdout" "$TMP/plain.out" "$TMP/out"
	for fp in "SELECT ? AS legacy_a" "SELECT ? AS legacy_b" "SELECT ? AS v2" "SELECT ? AS v3" \
		"SELECT ? AS utf16_legacy" "SELECT ? AS utf16_v2" "SELECT ? AS utf16_v3"; do
		n=$(sqlite3 "$TMP/p$rate.db" "SELECT sum(count) FROM queries
			WHERE kind = 'stmt' AND fingerprint = '$fp'") || fail "cannot read the profile"
		echo "rate $rate: $fp: ${n:-0} executions"
		[ "$n" = 300 ] || fail "rate $rate: '$fp' counted ${n:-0} executions, expected 300"
	done
	n=$(sqlite3 "$TMP/p$rate.db" "SELECT count(*) FROM queries WHERE sql LIKE '%legacy_b%'
		AND sql LIKE '%legacy_a%'")
	[ "$n" = 0 ] || fail "rate $rate: a legacy sqlite3_prepare text runs past its tail"
done
exit 0
