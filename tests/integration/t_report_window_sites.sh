#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `report --last` site lines split the window's counts (issue 27, item 7).
# A profile of tests/progs/shop.c slow (60 lookups from one site, exact
# per caller) is split into two intervals, as an agent writes them: the
# first, long ago, with 50 of the lookups, the last second with 10. In
# `report --last 10s` the row counts 10 and its site line ~10 (before:
# "-> 60 execs", the whole profile's exact per-caller count, under a row
# of 10); the whole report still says 60 at the site, exact.
. "$(dirname "$0")/lib.sh"
need_prog shop
command -v sqlite3 >/dev/null || skip "no sqlite3 shell"

"$SQLPROF" record -q -o "$TMP/p.db" -- "$PROGS/shop" slow >/dev/null || fail "record"
sql='SELECT sum(amount) FROM orders WHERE customer_id = ?'
[ "$(sqlite3 "$TMP/p.db" "SELECT COUNT(*) FROM intervals")" = 1 ] || fail "not one interval"
sqlite3 "$TMP/p.db" "
CREATE TEMP TABLE iv AS SELECT end_ns e FROM intervals;
CREATE TEMP TABLE q AS SELECT fp_id FROM queries WHERE fingerprint = '$sql';
UPDATE interval_queries SET start_ns = (SELECT e FROM iv) - 100000000000;
UPDATE intervals SET start_ns = (SELECT e FROM iv) - 100000000000, end_ns = (SELECT e FROM iv) - 50000000000;
INSERT INTO intervals VALUES ((SELECT e FROM iv) - 1000000000, (SELECT e FROM iv), 1);
INSERT INTO interval_queries SELECT (SELECT e FROM iv) - 1000000000, fp_id, kind, 10, total_ns / 6,
	self_ns / 6, wall_ns / 6, 10, vm_steps / 6, fullscan_steps / 6, sorts, autoindex, 0, 0, samples,
	prepares, prepare_ns, 1, buckets FROM interval_queries WHERE fp_id IN (SELECT fp_id FROM q);
UPDATE interval_queries SET count = 50, rows = 50 WHERE start_ns = (SELECT e FROM iv) - 100000000000
	AND fp_id IN (SELECT fp_id FROM q);" || fail "cannot split the profile's interval"

"$SQLPROF" report --last 10s "$TMP/p.db" >"$TMP/win.txt" || fail "report --last exited $?"
grep -q '^# window: .*(1.000 s, 1 interval)' "$TMP/win.txt" || fail "not the last interval: $(head -5 "$TMP/win.txt")"
grep -A1 -F "  $sql" "$TMP/win.txt" >"$TMP/row.txt"
grep -Eq '^ +10 ' "$TMP/row.txt" || fail "the window's row does not count 10: $(cat "$TMP/row.txt")"
grep -Eq -- '-> ~?(9|10|11)( \(est\.\))? execs?,.* at run \(shop\.c:[0-9]+\)' "$TMP/row.txt" ||
	fail "the site line does not split the window's 10: $(cat "$TMP/row.txt")"
"$SQLPROF" report "$TMP/p.db" | grep -A1 -F "  $sql" | grep -q -- '-> 60 execs, .* at run (shop.c:' ||
	fail "the whole report's site line is not 60, exact"
echo "ok: --last's site line splits the window's 10, the whole report's is 60"
