/* SPDX-License-Identifier: MIT */
/*
 * exec_abort.c - 1000 sqlite3_exec calls whose callback returns non-zero
 * at the first row, so that each call returns SQLITE_ABORT with its
 * statement (SELECT a FROM t, 3 rows) stepped once and never finished:
 * SQLite frees it itself (sqlite3VdbeFinalize), not through
 * sqlite3_finalize. Before them, 10 calls that read every row. For
 * tests/integration/t_exec_abort.sh. Prints the callbacks run and the
 * calls that returned SQLITE_ABORT. The aborted calls come last: no later
 * prepare reuses the address of the last one's statement.
 */
#include <sqlite3.h>
#include <stdio.h>

static long calls;

static int cb(void *arg, int n, char **v, char **c)
{
	(void)n, (void)v, (void)c;
	calls++;
	return arg != NULL; /* non-zero: abort the exec call */
}

int main(void)
{
	sqlite3 *db;
	int aborted = 0;

	if (sqlite3_open(":memory:", &db) != SQLITE_OK)
		return 2;
	if (sqlite3_exec(db, "CREATE TABLE t(a); INSERT INTO t VALUES (1), (2), (3)", NULL, NULL,
			 NULL) != SQLITE_OK)
		return 2;
	for (int i = 0; i < 10; i++)
		sqlite3_exec(db, "SELECT a FROM t WHERE a > 0", cb, NULL, NULL);
	for (int i = 0; i < 1000; i++)
		aborted += sqlite3_exec(db, "SELECT a FROM t", cb, (void *)1, NULL) == SQLITE_ABORT;
	sqlite3_close(db);
	printf("%ld callbacks, %d aborted\n", calls, aborted);
	return 0;
}
