/* SPDX-License-Identifier: MIT */
/*
 * threads.c - 4 threads, each on its own connection, each running 5000
 * executions of its own statement ("SELECT ?1 AS thread_<k>"), for
 * tests/integration/t_threads.sh. Prints a checksum; exits 0.
 */
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>

#define NTHREADS 4
#define NEXEC 5000

static long sums[NTHREADS];

static void *worker(void *arg)
{
	int k = (int)(long)arg;
	char sql[64];
	sqlite3 *db;
	sqlite3_stmt *st;
	long sum = 0;

	snprintf(sql, sizeof(sql), "SELECT ?1 AS thread_%d", k);
	if (sqlite3_open(":memory:", &db) != SQLITE_OK ||
	    sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
		fprintf(stderr, "threads: thread %d: cannot prepare\n", k);
		exit(1);
	}
	for (int i = 0; i < NEXEC; i++) {
		sqlite3_bind_int(st, 1, i + k);
		while (sqlite3_step(st) == SQLITE_ROW)
			sum += sqlite3_column_int(st, 0);
		sqlite3_reset(st);
	}
	sqlite3_finalize(st);
	sqlite3_close(db);
	sums[k] = sum;
	return NULL;
}

int main(void)
{
	pthread_t th[NTHREADS];
	long total = 0;

	for (long k = 0; k < NTHREADS; k++)
		if (pthread_create(&th[k], NULL, worker, (void *)k) != 0) {
			fprintf(stderr, "threads: pthread_create failed\n");
			return 1;
		}
	for (int k = 0; k < NTHREADS; k++) {
		pthread_join(th[k], NULL);
		total += sums[k];
	}
	printf("sum=%ld\n", total);
	return 0;
}
