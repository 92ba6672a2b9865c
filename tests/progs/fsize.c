/* SPDX-License-Identifier: MIT */
/*
 * fsize.c - a program under RLIMIT_FSIZE (for
 * tests/integration/t_guest_fsize.sh).
 *
 * usage: fsize N [LIMIT_BYTES [THREADS]]
 * With LIMIT_BYTES (0: none), first lowers its own RLIMIT_FSIZE (soft and
 * hard) to it, as a worker that limits itself does. Then runs N
 * executions of a prepared INSERT and N of a SELECT on an in-memory
 * database in the main thread, and N of each again in each of THREADS
 * threads (default 1) running at the same time, none ending before all
 * ran their queries (each needs a ring of its own), and prints its totals. Exits 0, 1 on an SQLite error, 2 on bad
 * usage.
 */
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

static long n;

static void *work(void *arg)
{
	sqlite3 *db;
	sqlite3_stmt *ins, *sel;
	long i, sum = 0;

	if (sqlite3_open(":memory:", &db) != SQLITE_OK ||
	    sqlite3_exec(db, "CREATE TABLE t(a INTEGER PRIMARY KEY, b)", NULL, NULL, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(db, "INSERT INTO t(b) VALUES (?1)", -1, &ins, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(db, "SELECT count(*) FROM t WHERE b < ?1", -1, &sel, NULL) != SQLITE_OK)
		return (void *)1;
	for (i = 0; i < n; i++) {
		sqlite3_bind_int64(ins, 1, i);
		if (sqlite3_step(ins) != SQLITE_DONE)
			return (void *)1;
		sqlite3_reset(ins);
		sqlite3_bind_int64(sel, 1, i);
		while (sqlite3_step(sel) == SQLITE_ROW)
			sum += sqlite3_column_int64(sel, 0);
		sqlite3_reset(sel);
	}
	sqlite3_finalize(ins);
	sqlite3_finalize(sel);
	sqlite3_close(db);
	*(long *)arg = sum;
	return NULL;
}

static pthread_barrier_t all_started;

static void *thread_work(void *arg)
{
	void *r;

	pthread_barrier_wait(&all_started); /* every thread alive at once */
	r = work(arg);
	pthread_barrier_wait(&all_started); /* and none gone before all ran */
	return r;
}

int main(int argc, char **argv)
{
	long s1 = 0, s2[16] = { 0 }, threads = argc > 3 ? atol(argv[3]) : 1, i;
	pthread_t th[16];
	void *ret = NULL;

	if (argc < 2 || (n = atol(argv[1])) <= 0) {
		fprintf(stderr, "usage: fsize N [LIMIT_BYTES]\n");
		return 2;
	}
	if (threads < 1 || threads > 16) {
		fprintf(stderr, "usage: fsize N [LIMIT_BYTES [THREADS]] (1 to 16 threads)\n");
		return 2;
	}
	if (argc > 2 && atoll(argv[2]) > 0) {
		struct rlimit rl;

		rl.rlim_cur = rl.rlim_max = (rlim_t)atoll(argv[2]);
		if (setrlimit(RLIMIT_FSIZE, &rl) != 0) {
			perror("fsize: setrlimit");
			return 2;
		}
	}
	if (work(&s1))
		return 1;
	pthread_barrier_init(&all_started, NULL, (unsigned)threads);
	for (i = 0; i < threads; i++)
		if (pthread_create(&th[i], NULL, thread_work, &s2[i]) != 0)
			return 1;
	for (i = 0; i < threads; i++) {
		pthread_join(th[i], &ret);
		if (ret)
			return 1;
	}
	printf("main %ld, threads %ld x %ld\n", s1, threads, s2[threads - 1]);
	return 0;
}
