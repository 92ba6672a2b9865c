#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_record_asan.sh - a program built with -fsanitize=address runs under
# record (before: "ASan runtime does not come first in initial library
# list", exit 1, nothing profiled): tests/progs/trivial.c built with ASan
# prints what it prints without sqlprof and its 500 executions are counted;
# ASan still works (a heap overflow in a second program is still reported,
# with ASan's exit status); an ASAN_OPTIONS the user set is kept.
. "$(dirname "$0")/lib.sh"
command -v gcc >/dev/null || skip "gcc not installed"
src=$(cd "$(dirname "$0")/../progs" && pwd)/trivial.c
cd "$TMP" || exit 1
gcc -fsanitize=address -g -o asan_trivial "$src" -lsqlite3 2>build.err ||
	skip "gcc cannot build with -fsanitize=address: $(head -2 build.err)"
./asan_trivial 500 >plain.out 2>&1 || fail "the ASan program fails without sqlprof: $(cat plain.out)"
"$SQLPROF" record -q -o p.db -- ./asan_trivial 500 >rec.out 2>rec.err ||
	fail "under record: exit $?: $(cat rec.out rec.err)"
same_file "output" plain.out rec.out
n=$(sqlite3 p.db "SELECT coalesce(sum(count), 0) FROM queries WHERE fingerprint = 'SELECT ? + ?'")
[ "$n" = 500 ] || fail "$n executions counted, not 500"
cat >overflow.c <<'C'
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <stddef.h>
int main(void)
{
	sqlite3 *db;
	char *p = malloc(8);

	sqlite3_open(":memory:", &db);
	sqlite3_exec(db, "SELECT 1", NULL, NULL, NULL);
	memset(p, 0, 9); /* one byte too far */
	free(p);
	return sqlite3_close(db);
}
C
gcc -w -fsanitize=address -g -o overflow overflow.c -lsqlite3 || fail "build overflow"
ASAN_OPTIONS=exitcode=42 "$SQLPROF" record -q -o o.db -- ./overflow >o.out 2>o.err
rc=$?
[ "$rc" = 42 ] || fail "ASan's exit status (ASAN_OPTIONS=exitcode=42) not kept: $rc"
grep -q "heap-buffer-overflow" o.err || fail "ASan did not report the overflow: $(head -5 o.err)"
echo "ASan program: 500 counted, output unchanged; an overflow still reported, exit $rc"
