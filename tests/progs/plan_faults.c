/* SPDX-License-Identifier: MIT */
/*
 * plan_faults.c - malloc fault injection through SQLite's own hook: for K
 * = 1..N, SQLite is shut down, given an allocator (SQLITE_CONFIG_MALLOC)
 * that fails its K-th allocation (only that one), initialized again, and
 * runs the same workload: open a
 * database, create and fill a table, queries with plans to take (table
 * reads, a join, an index; their texts new for each K), each result or
 * error printed. One line per
 * K: what the program saw. A profiler whose own SQLite work allocates
 * through the program's allocator moves the failure elsewhere and changes
 * these lines.
 * Usage: plan_faults [N]   (default 400)
 */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>

static sqlite3_mem_methods real_mem;
static long calls, fail_at;

static void *f_malloc(int n)
{
	if (fail_at && ++calls == fail_at)
		return NULL;
	return real_mem.xMalloc(n);
}

static void *f_realloc(void *p, int n)
{
	if (fail_at && ++calls == fail_at)
		return NULL;
	return real_mem.xRealloc(p, n);
}

static void f_free(void *p) { real_mem.xFree(p); }
static int f_size(void *p) { return real_mem.xSize(p); }
static int f_roundup(int n) { return real_mem.xRoundup(n); }
static int f_init(void *a) { return real_mem.xInit(a); }
static void f_shutdown(void *a) { real_mem.xShutdown(a); }

static const sqlite3_mem_methods faulty = { f_malloc, f_free,  f_realloc,  f_size,
					    f_roundup, f_init, f_shutdown, NULL };

static const char *const work[] = {
	"CREATE TABLE t(id INTEGER PRIMARY KEY, a INT, b TEXT)",
	"INSERT INTO t(a, b) VALUES (1, 'x'), (2, 'y'), (3, 'z'), (2, 'w')",
	"SELECT count(*) AS k%ld FROM t WHERE a = 2",
	"SELECT t1.b AS k%ld FROM t t1 JOIN t t2 ON t1.a = t2.id WHERE t2.b = 'y'",
	"CREATE INDEX t_a ON t(a)",
	"SELECT b AS k%ld FROM t WHERE a = 3",
	"SELECT max(id) AS k%ld FROM t WHERE b IN (SELECT b FROM t WHERE a > 1)",
	"UPDATE t SET b = b || '!' WHERE a = 1",
	"SELECT group_concat(b) AS k%ld FROM t ORDER BY 1",
};

/* The workload, its queries' texts made K's own (an alias: a new query
 * for the profiler each time); prints what it saw on one line. */
static void run(long k)
{
	char sql[160];
	sqlite3 *db = NULL;
	size_t i;
	int rc = sqlite3_open(":memory:", &db);

	printf(" open=%d", rc);
	if (rc != SQLITE_OK) {
		sqlite3_close(db);
		return;
	}
	for (i = 0; i < sizeof(work) / sizeof(work[0]); i++) {
		sqlite3_stmt *st = NULL;

		snprintf(sql, sizeof(sql), work[i], k);
		rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
		printf(" p%zu=%d", i, rc);
		if (rc != SQLITE_OK)
			continue;
		while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
			const unsigned char *v = sqlite3_column_text(st, 0);

			printf(" [%s]", v ? (const char *)v : "null");
		}
		printf(" s%zu=%d", i, rc);
		sqlite3_finalize(st);
	}
	sqlite3_close(db);
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 400, k;

	sqlite3_config(SQLITE_CONFIG_GETMALLOC, &real_mem);
	for (k = 1; k <= n; k++) {
		int rc;

		sqlite3_shutdown();
		rc = sqlite3_config(SQLITE_CONFIG_MALLOC, &faulty);
		calls = 0;
		fail_at = k;
		printf("k=%ld config=%d init=%d", k, rc, sqlite3_initialize());
		run(k);
		fail_at = 0;
		printf(" calls=%ld\n", calls);
	}
	return 0;
}
