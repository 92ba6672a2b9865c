/* SPDX-License-Identifier: MIT */
/*
 * plan_stack.c - SQLite used only from a thread with a small stack (32 KiB
 * unless given: pthread_attr_setstacksize; glibc takes the static TLS of
 * every loaded object out of it, so the thread gets less): the first
 * prepare of the process, then queries with plans to take (table reads,
 * a join, a subquery), an exec, all from that thread. Prints each
 * result; a profiler whose paths need much stack crashes it.
 * With "depth" instead of a size, the thread runs on a 1 MiB stack of
 * ours, painted first, and prints to stderr how deep below its first
 * frame the work reached ("depth N"): the same run with and without the
 * profiler tells how much stack the profiler's paths add (static TLS, at
 * the top of the stack, is not in it).
 * Usage: plan_stack [STACK_BYTES | depth]
 */
#include <pthread.h>
#include <stdint.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const queries[] = {
	"SELECT count(*) FROM t",
	"SELECT v FROM t WHERE id = 3",
	"SELECT sum(a.v) FROM t a JOIN t b ON a.v = b.id",
	"SELECT count(*) FROM t WHERE v IN (SELECT id FROM t WHERE v > 20)",
	"SELECT max(v) FROM t WHERE v < 50 ORDER BY 1",
	"UPDATE t SET v = v + 1 WHERE id = 2",
	"SELECT v FROM t WHERE id = 2",
};

#define PAINT 0xa5
static unsigned char *painted; /* the painted stack (depth mode), 1 MiB */
static uintptr_t top;          /* an address in work()'s first frame */

static void *work(void *arg)
{
	char here;
	sqlite3 *db;
	sqlite3_stmt *st;
	size_t i;
	int r;

	(void)arg;
	top = (uintptr_t)&here;
	if (sqlite3_open(":memory:", &db) != SQLITE_OK)
		return (void *)1;
	if (sqlite3_exec(db, "CREATE TABLE t(id INTEGER PRIMARY KEY, v INT);"
			     "INSERT INTO t VALUES(1, 10), (2, 20), (3, 30), (4, 40);",
			 NULL, NULL, NULL) != SQLITE_OK)
		return (void *)2;
	for (r = 0; r < 3; r++)
		for (i = 0; i < sizeof(queries) / sizeof(queries[0]); i++) {
			if (sqlite3_prepare_v2(db, queries[i], -1, &st, NULL) != SQLITE_OK)
				return (void *)3;
			while (sqlite3_step(st) == SQLITE_ROW)
				printf("%zu: %lld\n", i, (long long)sqlite3_column_int64(st, 0));
			sqlite3_finalize(st);
		}
	sqlite3_close(db);
	return NULL;
}

int main(int argc, char **argv)
{
	int depth = argc > 1 && !strcmp(argv[1], "depth");
	size_t size = argc > 1 && !depth ? strtoul(argv[1], NULL, 0) : 32768, i;
	pthread_attr_t a;
	pthread_t th;
	void *ret;
	int rc;

	pthread_attr_init(&a);
	if (depth) {
		size = 1 << 20;
		painted = aligned_alloc(4096, size);
		if (!painted)
			return 2;
		memset(painted, PAINT, size);
		rc = pthread_attr_setstack(&a, painted, size);
	} else {
		rc = pthread_attr_setstacksize(&a, size);
	}
	if (rc != 0 || (rc = pthread_create(&th, &a, work, NULL)) != 0) {
		fprintf(stderr, "plan_stack: cannot start a thread with a %zu-byte stack (%d)\n", size,
			rc);
		return 2;
	}
	pthread_join(th, &ret);
	if (depth) {
		for (i = 0; i < size && painted[i] == PAINT; i++)
			;
		fprintf(stderr, "depth %lu\n", (unsigned long)(top - (uintptr_t)(painted + i)));
	}
	printf("done %ld\n", (long)(intptr_t)ret);
	return ret ? 1 : 0;
}
