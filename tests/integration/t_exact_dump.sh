#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_exact_dump.sh - restoring a dump through the sqlite3 shell at default
# settings: 100,000 INSERTs, each a distinct SQL text (the values are in
# the text, as .dump writes them), all counted, in one query. Every text
# is a statement prepared once and run once, so the totals never wait for
# the collector. Each first text is walked, but only the first of its
# shape at that stack leaves an event (its query has the site then), not
# each of the 100,000. (The time record takes after the program
# exits is measured by `make bench`, not asserted here.)
. "$(dirname "$0")/lib.sh"
command -v sqlite3 >/dev/null || skip "no sqlite3 shell"
N=100000

"$PYTHON" - "$N" >"$TMP/dump.sql" <<'EOF_PY'
import sys
n = int(sys.argv[1])
print("BEGIN TRANSACTION;")
print("CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, v REAL);")
for i in range(n):
    print("INSERT INTO t VALUES(%d,'name %d',%d.5);" % (i, i * 7, i))
print("COMMIT;")
EOF_PY
"$SQLPROF" record -q -o "$TMP/p.db" -- sqlite3 "$TMP/new.db" <"$TMP/dump.sql" >"$TMP/out" 2>"$TMP/err" ||
	fail "sqlite3 under sqlprof failed: $(cat "$TMP/err")"
[ "$(sqlite3 "$TMP/new.db" 'SELECT count(*) FROM t')" = $N ] || fail "the restore did not load $N rows"
report_json "$TMP/p.db" "$TMP/r.json"
expect "$TMP/r.json" -q stmt "INSERT INTO t VALUES (?, ?, ?)" count=$N rows=0
n=$(sqlite3 "$TMP/p.db" "SELECT samples FROM queries WHERE fingerprint = 'INSERT INTO t VALUES (?, ?, ?)'")
echo "dump restore: $N distinct INSERT texts counted $N times, $n with a stack"
[ "$n" -ge 1 ] && [ "$n" -lt 2000 ] || fail "$n of the INSERTs have a stack: expected the first of its shape and the ~1% drawn (not one per text)"

# Past the first 64 texts of the INSERT's fingerprint (SQLPROF_TEXTS_PER_SHAPE),
# each new text is counted in the fingerprint's folded text (issue 25: a
# dump restore's cost): the header and JSON say how many, the count is the
# same, and only 64 + 1 texts of it reached the profile.
folded=$("$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["texts_folded"])' "$TMP/r.json")
[ "$folded" = $((N - 64)) ] || fail "texts_folded $folded, expected $((N - 64))"
"$SQLPROF" report "$TMP/p.db" | head -3 | grep -q "$folded texts folded into their fingerprint" ||
	fail "the report's header does not say the texts were folded"
texts=$(sqlite3 "$TMP/p.db" "SELECT count(*) FROM statements WHERE fp_id =
	(SELECT fp_id FROM queries WHERE fingerprint = 'INSERT INTO t VALUES (?, ?, ?)')")
[ "$texts" = 65 ] || fail "$texts texts of the INSERT in the profile, expected 64 and the folded one"

# The statistics full (SQLPROF_STATS_MB=1: room for ~1,700 texts, and no
# folding by fingerprint): the program is unharmed, and the texts that
# found no room for a record of their own are folded into the thread's
# fold record (issue 24 item 2), with their rows and times - the totals
# still add up, none without a record at all.
rm -f "$TMP/new2.db"
SQLPROF_TEXTS_PER_SHAPE=0 SQLPROF_STATS_MB=1 "$SQLPROF" record -q -o "$TMP/full.db" -- sqlite3 "$TMP/new2.db" <"$TMP/dump.sql" \
	>"$TMP/out2" 2>"$TMP/err2" || fail "sqlite3 under sqlprof with full statistics failed ($?): $(cat "$TMP/err2")"
[ "$(sqlite3 "$TMP/new2.db" 'SELECT count(*) FROM t')" = $N ] || fail "full statistics: the restore did not load $N rows"
res=$(sqlite3 "$TMP/full.db" "SELECT (SELECT sum(count) FROM queries), (SELECT sum(executions) FROM processes),
	(SELECT coalesce(sum(count), 0) FROM queries WHERE fingerprint LIKE '<texts folded together%'),
	(SELECT coalesce(sum(count), 0) FROM queries WHERE fingerprint LIKE '<executions with no room%')") ||
	fail "cannot read the profile"
IFS='|' read -r total execs folded noroom <<<"$res"
echo "statistics full: $total executions in queries, $execs in processes, $folded folded, $noroom with no record"
[ "$total" = "$execs" ] && [ "$total" -ge $N ] || fail "full statistics: queries count $total, processes $execs"
[ "$folded" -gt 0 ] || fail "full statistics: nothing folded (the test checks nothing)"
[ "$noroom" = 0 ] || fail "full statistics: $noroom executions with no record"
exit 0
