/* SPDX-License-Identifier: MIT */
/*
 * exec_deep.c - sqlite3_exec calls nested 12 deep (each one's callback
 * runs the next, "SELECT <depth> AS deep_exec"), 100 times. For
 * tests/integration/t_exec_deep.sh: every exec call is counted, also
 * beyond the depth the preload keeps state for. Prints the callbacks run.
 */
#include <sqlite3.h>
#include <stdio.h>

static sqlite3 *db;
static long calls;

static int cb(void *arg, int n, char **v, char **c)
{
	long depth = (long)arg;
	char sql[64];

	(void)n, (void)v, (void)c;
	calls++;
	if (depth < 12) {
		snprintf(sql, sizeof(sql), "SELECT %ld AS deep_exec", depth + 1);
		sqlite3_exec(db, sql, cb, (void *)(depth + 1), NULL);
	}
	return 0;
}

int main(void)
{
	if (sqlite3_open(":memory:", &db) != SQLITE_OK)
		return 2;
	for (int i = 0; i < 100; i++)
		sqlite3_exec(db, "SELECT 1 AS deep_exec", cb, (void *)1L, NULL);
	sqlite3_close(db);
	printf("%ld callbacks\n", calls);
	return 0;
}
