/* SPDX-License-Identifier: MIT */
/*
 * exec_longjmp.c - a callback that leaves sqlite3_exec by longjmp (as a
 * C++ exception through it would), then 1000 executions of a statement,
 * with a local array of the program's next to where the exec call's frame
 * was. For tests/integration/t_exec_unwound.sh: the array must not change
 * (nothing of the profiler's may live in the vanished frame), and the 1000
 * executions must be top-level ones (not nested in the exec call that is
 * gone), one run of 1000. Prints the array's checksum; exits 0.
 */
#include <setjmp.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

static jmp_buf out;

static int leave(void *arg, int n, char **v, char **c)
{
	(void)arg, (void)n, (void)v, (void)c;
	longjmp(out, 1);
}

static __attribute__((noinline)) void call_exec(sqlite3 *db)
{
	if (setjmp(out) == 0)
		sqlite3_exec(db, "SELECT 1 AS left_by_longjmp", leave, NULL, NULL);
}

static __attribute__((noinline)) long run(sqlite3 *db)
{
	volatile unsigned char local[4096];
	sqlite3_stmt *st;
	long sum = 0, i;

	memset((void *)local, 0x5a, sizeof(local));
	if (sqlite3_prepare_v2(db, "SELECT ?1 AS after_longjmp", -1, &st, NULL) != SQLITE_OK)
		return -1;
	for (i = 0; i < 1000; i++) {
		sqlite3_bind_int64(st, 1, i);
		while (sqlite3_step(st) == SQLITE_ROW)
			;
		sqlite3_reset(st);
	}
	sqlite3_finalize(st);
	for (i = 0; i < (long)sizeof(local); i++)
		sum += local[i];
	return sum;
}

int main(void)
{
	sqlite3 *db;

	if (sqlite3_open(":memory:", &db) != SQLITE_OK)
		return 2;
	call_exec(db);
	printf("%ld\n", run(db));
	sqlite3_close(db);
	return 0;
}
