/* SPDX-License-Identifier: MIT */
/*
 * threads.c - T threads (default 4), each on its own in-memory connection
 * with its own 10,000-row indexed table, each running N point lookups.
 * The threads fill their tables, meet at a barrier, and the loop time is
 * from the first thread's start after the barrier to the last one's end. Exercises
 * the profiler's per-thread state and rings, and its collector reading
 * several streams; SQLite itself shares only its global allocator mutex
 * between the connections.
 *
 * Usage: threads [N [T]]   (default 100000 per thread, 4 threads)
 */
#include <pthread.h>

#include "bench.h"

struct worker {
	pthread_t th;
	long n;
	long long sum;
	uint64_t start_ns, end_ns;
};

static pthread_barrier_t start;

static void *work(void *arg)
{
	struct worker *w = arg;
	sqlite3 *db = NULL;
	sqlite3_stmt *sel;
	long i;

	bench_ok(db, sqlite3_open(":memory:", &db), SQLITE_OK, "open");
	bench_ok(db,
		 sqlite3_exec(
			 db,
			 "CREATE TABLE t(id INTEGER PRIMARY KEY, k INTEGER, v INTEGER);"
			 "CREATE INDEX t_k ON t(k);"
			 "WITH RECURSIVE c(x) AS (SELECT 0 UNION ALL SELECT x + 1 FROM c "
			 "WHERE x < 9999) INSERT INTO t SELECT x, (x * 7919) % 10000, x FROM c;",
			 NULL, NULL, NULL),
		 SQLITE_OK, "fill");
	bench_ok(db, sqlite3_prepare_v2(db, "SELECT v FROM t WHERE k = ?", -1, &sel, NULL),
		 SQLITE_OK, "prepare");
	pthread_barrier_wait(&start);
	w->start_ns = bench_now_ns();
	for (i = 0; i < w->n; i++) {
		sqlite3_bind_int64(sel, 1, (i * 104729) % 10000);
		while (sqlite3_step(sel) == SQLITE_ROW)
			w->sum += sqlite3_column_int64(sel, 0);
		sqlite3_reset(sel);
	}
	w->end_ns = bench_now_ns();
	sqlite3_finalize(sel);
	sqlite3_close(db);
	return NULL;
}

int main(int argc, char **argv)
{
	long n = bench_arg(argc, argv, 1, 100000), nt = bench_arg(argc, argv, 2, 4), i;
	struct worker *w = calloc((size_t)nt, sizeof(*w));
	long long sum = 0;
	uint64_t t0 = UINT64_MAX, end = 0;

	if (!w || pthread_barrier_init(&start, NULL, (unsigned)nt + 1) != 0)
		return 1;
	for (i = 0; i < nt; i++) {
		w[i].n = n;
		if (pthread_create(&w[i].th, NULL, work, &w[i]) != 0) {
			fprintf(stderr, "threads: pthread_create failed\n");
			return 1;
		}
	}
	pthread_barrier_wait(&start);
	for (i = 0; i < nt; i++) {
		pthread_join(w[i].th, NULL);
		sum += w[i].sum;
		if (w[i].start_ns < t0)
			t0 = w[i].start_ns;
		if (w[i].end_ns > end)
			end = w[i].end_ns;
	}
	bench_result("threads", n * nt, end - t0, sum);
	free(w);
	return 0;
}
