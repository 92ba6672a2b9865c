#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_two_copies.sh - issue 23 item 13: two copies of libsqlprof.so in
# LD_PRELOAD (an installed one from `sqlprof env` plus record's own; here
# build/lib/libsqlprof.so copied elsewhere, set before record prepends its
# own). The first in the search order profiles, the later one stays inert
# and the first resolves SQLite past it. Before: 1048 executions of 1046,
# a phantom exec ("counts -> counts"), 2 phantom statements and every
# execution timed through the second copy's shims (db time x1.5-4). Now:
# counts exact, one process with one program, record says once that a
# second copy was ignored; forker's 4 processes exact; a third copy too.
. "$(dirname "$0")/lib.sh"
need_prog counts
need_prog forker
cd "$TMP" || exit 1
mkdir c2 c3
cp "$BUILD/lib/libsqlprof.so" c2/ && cp "$BUILD/lib/libsqlprof.so" c3/ || fail "cannot copy the library"

"$SQLPROF" record -q -o one.db -- "$PROGS/counts" >/dev/null 2>one.err
# An ASan-built sqlprof (make check SANITIZE=address) refuses to start
# behind a preloaded library unless told not to check the order.
if ldd "$SQLPROF" 2>/dev/null | grep -q libasan; then
	export ASAN_OPTIONS="verify_asan_link_order=0:detect_leaks=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
fi
LD_PRELOAD=$TMP/c2/libsqlprof.so "$SQLPROF" record -o two.db -- "$PROGS/counts" >two.out 2>two.err
rc=$?
[ "$rc" = 3 ] || fail "record exited $rc, not counts' 3: $(cat two.err)"
n=$(grep -c "second copy of libsqlprof.so" two.err)
[ "$n" = 1 ] || fail "record said $n times that a second copy was ignored: $(cat two.err)"
report_json two.db two.json
expect two.json -t lost=0 processes=1 \
	-q stmt 'SELECT a FROM t WHERE a = ?' count=1000 rows=1000 errors=0 \
	-q stmt 'SELECT count(*) FROM t WHERE b <> ?' count=37 rows=37 errors=0 \
	-q stmt 'INSERT INTO t(a, b) VALUES (?, ?)' count=1 errors=1 \
	-q stmt 'CREATE TABLE t(a integer PRIMARY KEY, b text)' count=1 \
	-q stmt 'INSERT INTO t(b) VALUES (?)' count=2
one=$(sqlite3 one.db "SELECT executions, exe FROM processes")
two=$(sqlite3 two.db "SELECT executions, exe FROM processes")
[ "$one" = "$two" ] || fail "one copy: $one; two copies: $two (a phantom exec or phantom executions)"
echo "one copy: $one; two copies: $two; db time one/two (not asserted): $(sqlite3 one.db 'SELECT sum(total_ns) FROM queries') / $(sqlite3 two.db 'SELECT sum(total_ns) FROM queries')"

# three copies, and fork: every child exact, one warning
LD_PRELOAD=$TMP/c2/libsqlprof.so:$TMP/c3/libsqlprof.so "$SQLPROF" record -o f.db -- "$PROGS/forker" >f.out 2>f.err ||
	fail "record forker exited $?: $(cat f.err)"
grep -q "second copy of libsqlprof.so" f.err || fail "no word of the other copies: $(cat f.err)"
report_json f.db f.json
expect f.json -t lost=0 processes=4 \
	-q stmt 'SELECT ? AS parent_q' count=100 rows=100 \
	-q stmt 'SELECT ? AS child_0' count=100 rows=100 \
	-q stmt 'SELECT ? AS child_1' count=100 rows=100 \
	-q stmt 'SELECT ? AS child_2' count=100 rows=100
[ "$(sqlite3 f.db "SELECT count(*) FROM processes WHERE exe LIKE '% -> %'")" = 0 ] || fail "a phantom exec with three copies"
exit 0
