/* SPDX-License-Identifier: MIT */
/*
 * exact_threads.c - NTHREADS threads (default 4), each on its own
 * connection with NSTMT statements of its own (default 10, "SELECT ... AS
 * x<t>_<j>", statement j returning j % 3 + 1 rows), each thread running
 * NEXEC executions (default 100000) round-robin over its statements, read
 * to SQLITE_DONE and reset. For tests/integration/t_exact_stalled.sh: the
 * totals must be exact even with the collector stopped.
 *
 * usage: exact_threads [NTHREADS [NEXEC [NSTMT [STARTED GO]]]]
 * With STARTED and GO, the threads prepare their statements, then one of
 * them creates STARTED and all wait (up to 30 s) for GO to exist before
 * the first execution. Prints the number of rows read; exits 0.
 */
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define MAXT 64
#define MAXS 64

static long nexec = 100000, nstmt = 10;
static long rows[MAXT];
static pthread_barrier_t ready;
static const char *started, *go;

static void *worker(void *arg)
{
	long k = (long)arg, i;
	sqlite3 *db;
	sqlite3_stmt *st[MAXS];
	char sql[128];

	if (sqlite3_open(":memory:", &db) != SQLITE_OK)
		exit(2);
	for (i = 0; i < nstmt; i++) {
		snprintf(sql, sizeof(sql),
			 "SELECT value AS x%ld_%ld FROM (SELECT 1 AS value UNION ALL SELECT 2 "
			 "UNION ALL SELECT 3) LIMIT %ld",
			 k, i, i % 3 + 1);
		if (sqlite3_prepare_v2(db, sql, -1, &st[i], NULL) != SQLITE_OK)
			exit(2);
	}
	pthread_barrier_wait(&ready);
	if (k == 0 && started && go) {
		FILE *f = fopen(started, "w");
		int w;

		if (f)
			fclose(f);
		for (w = 0; w < 3000 && access(go, F_OK) != 0; w++) {
			struct timespec ts = { 0, 10000000 };

			nanosleep(&ts, NULL);
		}
	}
	pthread_barrier_wait(&ready);
	for (i = 0; i < nexec; i++) {
		sqlite3_stmt *s = st[i % nstmt];

		while (sqlite3_step(s) == SQLITE_ROW)
			rows[k]++;
		sqlite3_reset(s);
	}
	for (i = 0; i < nstmt; i++)
		sqlite3_finalize(st[i]);
	sqlite3_close(db);
	return NULL;
}

int main(int argc, char **argv)
{
	long nthreads = argc > 1 ? atol(argv[1]) : 4, i, total = 0;
	pthread_t th[MAXT];

	if (argc > 2)
		nexec = atol(argv[2]);
	if (argc > 3)
		nstmt = atol(argv[3]);
	if (argc > 5) {
		started = argv[4];
		go = argv[5];
	}
	if (nthreads < 1 || nthreads > MAXT || nstmt < 1 || nstmt > MAXS || nexec < 0)
		return 2;
	pthread_barrier_init(&ready, NULL, (unsigned)nthreads);
	for (i = 0; i < nthreads; i++)
		pthread_create(&th[i], NULL, worker, (void *)i);
	for (i = 0; i < nthreads; i++) {
		pthread_join(th[i], NULL);
		total += rows[i];
	}
	printf("%ld rows\n", total);
	return 0;
}
