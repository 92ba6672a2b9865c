/* SPDX-License-Identifier: MIT */
/*
 * handoff.c - one statement, one connection, two threads taking turns:
 * for each of N executions, thread A steps the first row and thread B
 * reads the other rows to SQLITE_DONE and resets (SQLite allows a
 * statement to move between threads when they do not use it at once).
 * For tests/integration/t_handoff.sh: every execution counted once with
 * its rows, whichever thread started or ended it. Prints the rows read.
 */
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>

static sqlite3_stmt *st;
static long n = 2000, rows;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int turn; /* 0: A's, 1: B's */

static void *side(void *arg)
{
	int me = (int)(long)arg;

	for (long i = 0; i < n; i++) {
		pthread_mutex_lock(&mu);
		while (turn != me)
			pthread_cond_wait(&cv, &mu);
		if (me == 0) {
			if (sqlite3_step(st) == SQLITE_ROW)
				rows++;
		} else {
			while (sqlite3_step(st) == SQLITE_ROW)
				rows++;
			sqlite3_reset(st);
		}
		turn = !me;
		pthread_cond_broadcast(&cv);
		pthread_mutex_unlock(&mu);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	sqlite3 *db;
	pthread_t a, b;

	if (argc > 1)
		n = atol(argv[1]);
	if (sqlite3_open(":memory:", &db) != SQLITE_OK ||
	    sqlite3_prepare_v2(db, "SELECT 1 AS handoff UNION ALL SELECT 2 UNION ALL SELECT 3", -1, &st,
			       NULL) != SQLITE_OK)
		return 2;
	pthread_create(&a, NULL, side, (void *)0L);
	pthread_create(&b, NULL, side, (void *)1L);
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	sqlite3_finalize(st);
	sqlite3_close(db);
	printf("%ld rows\n", rows);
	return 0;
}
