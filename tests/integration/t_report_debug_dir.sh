#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_report_debug_dir.sh - symbolizing at report time, as perf does: a copy of
# tests/progs/counts.c built here, stripped, its debug file kept only under
# DIR/.build-id/xx/yyyy.debug, recorded without --debug-dir (every site
# '?? (??:0)'). `report --debug-dir DIR` and `export --debug-dir DIR` find
# main (counts.c:40) for the 1000-execution query (before: report and
# export had no --debug-dir; the profile keeps pcs, build-ids and biases).
. "$(dirname "$0")/lib.sh"
for t in gcc objcopy strip readelf; do
	command -v $t >/dev/null || skip "$t not installed (binutils, gcc)"
done
cd "$TMP" || exit 1
gcc -g -O1 -o counts "$ITDIR/../progs/counts.c" -lsqlite3 || fail "gcc failed"
objcopy --only-keep-debug counts counts.debug && strip --strip-all counts || fail "objcopy/strip failed"
bid=$(readelf -n counts | awk '/Build ID/ { print $3 }')
[ -n "$bid" ] || skip "the toolchain writes no build-id"
mkdir -p "dd/.build-id/${bid:0:2}" && mv counts.debug "dd/.build-id/${bid:0:2}/${bid:2}.debug"
"$SQLPROF" record -q --rate 1 -o p.db -- ./counts >/dev/null 2>&1
[ $? = 3 ] || fail "record: counts did not exit 3"
"$SQLPROF" report --by site -f json p.db >a.json || fail "report"
"$SQLPROF" report --by site -f json --debug-dir "$TMP/dd" p.db >b.json || fail "report --debug-dir"
"$SQLPROF" export -f csv --debug-dir "$TMP/dd" p.db >c.csv || fail "export --debug-dir"
"$PYTHON" - a.json b.json c.csv <<'PY' || fail "--debug-dir"
import csv, json, sys
a = json.load(open(sys.argv[1]))["groups"]
b = json.load(open(sys.argv[2]))["groups"]
# without symbols: ?? sites only (one per offset in the file)
assert {g["function"] for g in a} == {"??"}, [g["function"] for g in a]
top = [g for g in b if g["line"] == 40]
assert top and top[0]["function"] == "main" and top[0]["file"].endswith("counts.c") \
    and top[0]["est_count"] == 1000, b
rows = [r for r in csv.DictReader(open(sys.argv[3])) if r["fingerprint"] == "SELECT a FROM t WHERE a = ?"]
assert rows and rows[0]["function"] == "main" and rows[0]["line"] == "40", rows
print("without --debug-dir: site ??; with it: main (counts.c:40), 1000 executions")
PY
exit 0
