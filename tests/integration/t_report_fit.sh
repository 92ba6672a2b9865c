#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_report_fit.sh - the table fits the terminal: with COLUMNS=80 (and 60,
# 120) no line of the report is wider, for tests/progs/counts with
# --stacks and --plans, --by site and --by function, manyfp and the
# attribution-style long paths of a recording in a deep directory: the SQL
# is shortened first, then P50, P95, P99... are left out (said in a "#
# left out" line), and what is still too wide wraps (before: every row of
# the table was ~110 columns). Without a terminal or COLUMNS the layout
# is the fixed one scripts parse.
. "$(dirname "$0")/lib.sh"
need_prog counts
need_prog manyfp

deep="$TMP/a/very/long/build/directory/path/that/users/have/on/ci/machines/work"
mkdir -p "$deep" && cp "$PROGS/counts" "$deep/counts" || fail "cannot copy counts"
"$SQLPROF" record -q --rate 1 -o "$TMP/c.db" -- "$PROGS/counts" >/dev/null
"$SQLPROF" record -q -o "$TMP/m.db" -- "$PROGS/manyfp" 50 >/dev/null
"$SQLPROF" record -q --rate 1 -o "$TMP/d.db" -- "$deep/counts" >/dev/null

widest() { awk '{ n = length($0); if (n > m) m = n } END { print m + 0 }' "$1"; }

for cols in 80 60 120; do
	for args in "c.db" "--stacks --plans c.db" "--by site c.db" "--by function c.db" "m.db" \
		"--stacks d.db" "--top 3 m.db"; do
		# shellcheck disable=SC2086
		(cd "$TMP" && COLUMNS=$cols LC_ALL=C.UTF-8 "$SQLPROF" report $args) >"$TMP/out" ||
			fail "report $args failed"
		w=$(LC_ALL=C.UTF-8 widest "$TMP/out")
		echo "COLUMNS=$cols report $args: widest line $w"
		[ "$w" -le "$cols" ] || { awk -v c="$cols" 'length($0) > c' "$TMP/out" | head -3 >&2; fail "COLUMNS=$cols report $args: a line of $w columns"; }
	done
done
COLUMNS=80 "$SQLPROF" report "$TMP/c.db" >"$TMP/80.txt"
sed 's/^/    /' "$TMP/80.txt" | head -12
grep -q '^# left out to fit 80 columns:' "$TMP/80.txt" || fail "no line saying which columns were left out"
# the percentiles go first, MEAN stays (issue 27: it went before P99 and MAX)
grep -q '^COUNT .*TOTAL .*MEAN .*MAX .*SQL$' "$TMP/80.txt" || fail "COUNT, TOTAL, MEAN and MAX not kept"
grep -q ' SELECT a FROM t WHERE a = ?$' "$TMP/80.txt" || fail "a short SQL text was shortened"

# not a terminal, no COLUMNS: the fixed layout
env -u COLUMNS "$SQLPROF" report "$TMP/c.db" >"$TMP/fixed.txt"
grep -q '^     COUNT      TOTAL    PREPARE       MEAN        P50        P95        P99        MAX       ROWS  SQL$' \
	"$TMP/fixed.txt" || fail "the fixed layout changed: $(grep COUNT "$TMP/fixed.txt")"
exit 0
