/* SPDX-License-Identifier: MIT */
/*
 * tinystack.c - threads with small stacks (for
 * tests/integration/t_guest_fit.sh): what a program may do whatever is
 * preloaded into it.
 *
 * usage: tinystack threads      a thread with a 16 KiB stack, then one
 *                               with 24 KiB, neither touching SQLite
 *        tinystack query N      a thread with a 32 KiB stack that opens a
 *                               database and runs N executions each of a
 *                               prepared SELECT and INSERT, and one
 *                               sqlite3_exec
 * Prints what each thread did; exits 0, 1 when pthread_create failed
 * (with its error), 2 on bad usage or an SQLite error.
 */
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long n_exec;

static void *small_work(void *arg)
{
	volatile char buf[2048]; /* some of the stack really used */
	size_t i;
	long sum = 0;

	for (i = 0; i < sizeof(buf); i++)
		buf[i] = (char)i;
	for (i = 0; i < sizeof(buf); i++)
		sum += buf[i];
	*(long *)arg = sum;
	return NULL;
}

static void *query_work(void *arg)
{
	sqlite3 *db;
	sqlite3_stmt *ins, *sel;
	long i, rows = 0;

	(void)arg;
	if (sqlite3_open(":memory:", &db) != SQLITE_OK)
		return (void *)2;
	if (sqlite3_exec(db, "CREATE TABLE t(a INTEGER PRIMARY KEY, b)", NULL, NULL, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(db, "INSERT INTO t(b) VALUES (?1)", -1, &ins, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(db, "SELECT count(*) FROM t WHERE b >= ?1", -1, &sel, NULL) != SQLITE_OK)
		return (void *)2;
	for (i = 0; i < n_exec; i++) {
		sqlite3_bind_int64(ins, 1, i);
		if (sqlite3_step(ins) != SQLITE_DONE)
			return (void *)2;
		sqlite3_reset(ins);
		sqlite3_bind_int64(sel, 1, i / 2);
		while (sqlite3_step(sel) == SQLITE_ROW)
			rows += sqlite3_column_int64(sel, 0);
		sqlite3_reset(sel);
	}
	sqlite3_finalize(ins);
	sqlite3_finalize(sel);
	sqlite3_close(db);
	printf("query thread: %ld executions each, sum %ld\n", n_exec, rows);
	return NULL;
}

static int run(size_t stack, void *(*fn)(void *), void *arg)
{
	pthread_attr_t a;
	pthread_t th;
	void *ret = NULL;
	int rc;

	pthread_attr_init(&a);
	rc = pthread_attr_setstacksize(&a, stack);
	if (rc == 0)
		rc = pthread_create(&th, &a, fn, arg);
	pthread_attr_destroy(&a);
	if (rc != 0) {
		printf("pthread_create with a %zu KiB stack: %s\n", stack / 1024, strerror(rc));
		return 1;
	}
	pthread_join(th, &ret);
	return ret ? (int)(long)ret : 0;
}

int main(int argc, char **argv)
{
	long sum = 0;
	int rc;

	if (argc >= 2 && !strcmp(argv[1], "threads")) {
		rc = run(16 * 1024, small_work, &sum);
		if (rc)
			return rc;
		printf("16 KiB thread: sum %ld\n", sum);
		rc = run(24 * 1024, small_work, &sum);
		if (rc)
			return rc;
		printf("24 KiB thread: sum %ld\n", sum);
		return 0;
	}
	if (argc >= 3 && !strcmp(argv[1], "query")) {
		n_exec = atol(argv[2]);
		return run(32 * 1024, query_work, NULL);
	}
	fprintf(stderr, "usage: tinystack threads | tinystack query N\n");
	return 2;
}
