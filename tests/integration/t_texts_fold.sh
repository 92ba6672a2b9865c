#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_texts_fold.sh - issue 25 (the cost of literal texts): past the first
# SQLPROF_TEXTS_PER_SHAPE (64) texts of one fingerprint, a new text is
# counted in the fingerprint's folded text, and a folded statement that
# runs a second time gets its own text and records back. Either way the
# fingerprint's count and prepares are exact.
#  1. 1,000 INSERT texts run once each (the sqlite3 shell): 936 folded,
#     named in the header and JSON; 64 + 1 texts in the profile.
#  2. roundrobin: 200 texts of one fingerprint, live together and run 50
#     times each: 10,000 counted, 200 prepares, each text its own (the
#     folded text keeps the 136 first executions), nothing left folded.
#  3. SQLPROF_TEXTS_PER_SHAPE=0: no folded text at all.
. "$(dirname "$0")/lib.sh"
need_prog roundrobin
command -v sqlite3 >/dev/null || skip "no sqlite3 shell"

fp_of() { # PROFILE FINGERPRINT: "count|prepares|texts"
	sqlite3 "$1" "SELECT count, prepares, (SELECT count(*) FROM statements s WHERE s.fp_id = q.fp_id)
		FROM queries q WHERE fingerprint = '$2'"
}

"$PYTHON" -c '
for i in range(1000):
    print("INSERT INTO t VALUES(%d, %d.5);" % (i, i))' >"$TMP/ins.sql"
(echo "CREATE TABLE t(a, b);"; cat "$TMP/ins.sql") >"$TMP/load.sql"
"$SQLPROF" record -q -o "$TMP/a.db" -- sqlite3 "$TMP/a.sqlite" <"$TMP/load.sql" >"$TMP/a.out" 2>&1 ||
	fail "sqlite3 under sqlprof: $(cat "$TMP/a.out")"
got=$(fp_of "$TMP/a.db" "INSERT INTO t VALUES (?, ?)")
[ "$got" = "1000|1000|65" ] || fail "1,000 INSERT texts: count|prepares|texts $got, expected 1000|1000|65"
report_json "$TMP/a.db" "$TMP/a.json"
n=$("$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["texts_folded"])' "$TMP/a.json")
[ "$n" = 936 ] || fail "texts_folded $n, expected 936"
"$SQLPROF" report "$TMP/a.db" | head -3 | grep -q "936 texts folded into their fingerprint" ||
	fail "the header does not name the 936 folded texts"
sqlite3 "$TMP/a.db" "SELECT sql FROM statements" | grep -q '^/\* sqlprof: more texts of this fingerprint \*/ INSERT' ||
	fail "no folded text in the profile"

"$SQLPROF" record -q -o "$TMP/b.db" -- "$PROGS/roundrobin" 10000 200 >"$TMP/b.out" 2>&1 ||
	fail "roundrobin under sqlprof: $(cat "$TMP/b.out")"
got=$(fp_of "$TMP/b.db" "SELECT ? + ?")
[ "$got" = "10000|200|201" ] || fail "roundrobin 200 texts: count|prepares|texts $got, expected 10000|200|201"
report_json "$TMP/b.db" "$TMP/b.json"
n=$("$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["texts_folded"])' "$TMP/b.json")
[ "$n" = 0 ] || fail "roundrobin: $n texts still folded, expected 0 (each ran again)"

SQLPROF_TEXTS_PER_SHAPE=0 "$SQLPROF" record -q -o "$TMP/c.db" -- sqlite3 "$TMP/c.sqlite" <"$TMP/load.sql" \
	>"$TMP/c.out" 2>&1 || fail "sqlite3 under sqlprof: $(cat "$TMP/c.out")"
got=$(fp_of "$TMP/c.db" "INSERT INTO t VALUES (?, ?)")
[ "$got" = "1000|1000|1000" ] || fail "SQLPROF_TEXTS_PER_SHAPE=0: count|prepares|texts $got, expected 1000|1000|1000"
echo "folded 936 of 1,000 run-once texts; 200 texts run again each got their own; 0 turns it off"
