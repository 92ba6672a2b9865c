/* SPDX-License-Identifier: MIT */
/*
 * robust_threads.c - NTHREADS threads (default 8), each on its own
 * connection, each running NEXEC executions (default 50000) of its own
 * statement "SELECT ?1 AS rthread_<k>", all threads released together by a
 * barrier so their rings fill at the same time. For
 * tests/integration/t_robust_threads.sh (and `make tsan`). Prints a
 * checksum; exits 0.
 *
 * usage: robust_threads [NTHREADS [NEXEC [STARTED GO]]]
 * With STARTED and GO, every thread stops half-way at a second barrier; one
 * of them creates the file STARTED and waits (up to 30 s) for GO to exist,
 * so a test can act (stop the collector) while the program is certainly
 * mid-run.
 */
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define MAXTHREADS 64

static long nexec = 50000;
static long sums[MAXTHREADS];
static pthread_barrier_t start, half;
static const char *started, *go;

static void pause_half_way(void)
{
	if (pthread_barrier_wait(&half) == PTHREAD_BARRIER_SERIAL_THREAD) {
		FILE *f = fopen(started, "w");

		if (!f) {
			perror("robust_threads: STARTED");
			exit(1);
		}
		fclose(f);
		for (int w = 0; w < 3000 && access(go, F_OK) != 0; w++) {
			struct timespec ts = { 0, 10000000 };

			nanosleep(&ts, NULL);
		}
	}
	pthread_barrier_wait(&half);
}

static void *worker(void *arg)
{
	int k = (int)(long)arg;
	char sql[64];
	sqlite3 *db;
	sqlite3_stmt *st;
	long sum = 0;

	snprintf(sql, sizeof(sql), "SELECT ?1 AS rthread_%d", k);
	if (sqlite3_open(":memory:", &db) != SQLITE_OK ||
	    sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
		fprintf(stderr, "robust_threads: thread %d: cannot prepare\n", k);
		exit(1);
	}
	pthread_barrier_wait(&start);
	for (long i = 0; i < nexec; i++) {
		if (started && i == nexec / 2)
			pause_half_way();
		sqlite3_bind_int64(st, 1, i + k);
		while (sqlite3_step(st) == SQLITE_ROW)
			sum += sqlite3_column_int64(st, 0);
		sqlite3_reset(st);
	}
	sqlite3_finalize(st);
	sqlite3_close(db);
	sums[k] = sum;
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t th[MAXTHREADS];
	long n = argc > 1 ? atol(argv[1]) : 8, total = 0;

	if (argc > 2)
		nexec = atol(argv[2]);
	if (argc > 4) {
		started = argv[3];
		go = argv[4];
	}
	if (n < 1 || n > MAXTHREADS || nexec < 0) {
		fprintf(stderr, "usage: robust_threads [NTHREADS(1..%d) [NEXEC]]\n", MAXTHREADS);
		return 2;
	}
	pthread_barrier_init(&start, NULL, (unsigned)n);
	pthread_barrier_init(&half, NULL, (unsigned)n);
	for (long k = 0; k < n; k++)
		if (pthread_create(&th[k], NULL, worker, (void *)k) != 0) {
			fprintf(stderr, "robust_threads: pthread_create failed\n");
			return 1;
		}
	for (long k = 0; k < n; k++) {
		pthread_join(th[k], NULL);
		total += sums[k];
	}
	printf("threads=%ld nexec=%ld sum=%ld\n", n, nexec, total);
	return 0;
}
