#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_tcl.sh - a real Tcl program (Debian's tclsh with libsqlite3-tcl, which
# `package require sqlite3` loads with dlopen, as Python loads _sqlite3):
# tests/fixtures/tcl_app.tcl inserts N rows through the binding's cached
# statement inside `db transaction`, reads a query row by row, catches 3
# constraint failures, and runs itself again as a child process (exec).
#   - output and exit status unchanged, with and without a collector;
#   - every count exact: N + 7 inserts, 303 rows (150 + 153), 6 failures with
#     SQLite's extended code 1555 and its message, 2 processes;
#   - the site is the binding's C code (libtclsqlite3.so has no debug
#     information here, so the module and offset): Tcl's own frames are
#     not read (docs/attribution.md, "Interpreters").
. "$(dirname "$0")/lib.sh"
command -v tclsh >/dev/null || skip "tclsh not installed"
echo 'package require sqlite3' | tclsh >/dev/null 2>&1 || skip "libsqlite3-tcl not installed"
app=$(cd "$(dirname "$0")/../fixtures" && pwd)/tcl_app.tcl
cd "$TMP" || exit 1
N=300

rm -f plain.db
tclsh "$app" $N plain.db >plain.out 2>&1
st=$?
rm -f rec.db
"$SQLPROF" record -q -o p.prof -- tclsh "$app" $N rec.db >rec.out 2>rec.err
[ $? = $st ] || fail "exit status changed: $(cat rec.err)"
same_file "output under record" plain.out rec.out
[ -s rec.err ] && fail "record said: $(cat rec.err)"
rm -f pre.db
LD_PRELOAD=$BUILD/lib/libsqlprof.so tclsh "$app" $N pre.db >pre.out 2>&1
same_file "output without a collector" plain.out pre.out
grep -q "^evens 150$" rec.out || fail "unexpected output: $(cat rec.out)"

q() { sqlite3 p.prof "$1"; }
[ "$(q "SELECT count FROM queries WHERE kind = 'stmt' AND fingerprint = 'INSERT INTO t(b) VALUES (?)'")" = $((N + 7)) ] ||
	fail "inserts: $(q "SELECT kind, fingerprint, count FROM queries")"
[ "$(q "SELECT rows FROM queries WHERE kind = 'stmt' AND fingerprint = 'SELECT a FROM t WHERE a % ? = ?'")" = 303 ] ||
	fail "rows of the even query: $(q "SELECT fingerprint, count, rows FROM queries")"
[ "$(q "SELECT count, errors FROM queries WHERE fingerprint = 'INSERT INTO t(a, b) VALUES (?, ?)'")" = "6|6" ] ||
	fail "failing insert: $(q "SELECT fingerprint, count, errors FROM queries")"
[ "$(q "SELECT sum(count), min(rc), max(rc), min(message) FROM errors")" = "6|1555|1555|UNIQUE constraint failed: t.a" ] ||
	fail "errors: $(q "SELECT * FROM errors")"
[ "$(q "SELECT count(*) FROM processes")" = 2 ] || fail "processes: $(q "SELECT * FROM processes")"
report_json p.prof r.json
"$PYTHON" - r.json <<'PY' || fail "site of the inserts"
import json, sys
d = json.load(open(sys.argv[1]))
q = [q for q in d["queries"] if q["fingerprint"] == "INSERT INTO t(b) VALUES (?)"][0]
mods = {s.get("module", "") for s in q["sites"]}
assert q["sites"] and all(m.endswith("/libtclsqlite3.so") for m in mods), q["sites"]
assert sum(s["est_count"] for s in q["sites"]) == q["count"], q["sites"]
PY
echo "tcl: $N+7 inserts, 303 rows, 6 failures, 2 processes; output unchanged"
