/* SPDX-License-Identifier: MIT */
/*
 * multisite.c - one SQL text from several call sites, for t_attr_sites:
 * once from main, 300 times from each of 4 worker threads (worker), and
 * interleaved on the main thread 2000 times from site_a, 500 from site_b
 * and 300 from site_c. Each site is its own function, never inlined.
 */
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>

static sqlite3 *db;

static __attribute__((noinline)) void run(sqlite3_stmt *st, int v)
{
	sqlite3_bind_int(st, 1, v);
	while (sqlite3_step(st) == SQLITE_ROW)
		;
	sqlite3_reset(st);
}

/* three sites, each with its own body (identical ones would be folded
 * into one function by gcc's -fipa-icf) */
static __attribute__((noinline)) void site_a(sqlite3_stmt *st, int v)
{
	sqlite3_bind_int(st, 1, v + 1);
	while (sqlite3_step(st) == SQLITE_ROW)
		;
	sqlite3_reset(st);
}

static __attribute__((noinline)) void site_b(sqlite3_stmt *st, int v)
{
	sqlite3_bind_int(st, 1, v * 3);
	while (sqlite3_step(st) == SQLITE_ROW)
		;
	sqlite3_reset(st);
}

static __attribute__((noinline)) void site_c(sqlite3_stmt *st, int v)
{
	sqlite3_bind_int(st, 1, v - 5);
	while (sqlite3_step(st) == SQLITE_ROW)
		;
	sqlite3_reset(st);
}

static void *worker(void *arg)
{
	sqlite3 *conn;
	sqlite3_stmt *st;

	(void)arg;
	if (sqlite3_open(":memory:", &conn) != SQLITE_OK ||
	    sqlite3_prepare_v2(conn, "SELECT ?1 * 7", -1, &st, NULL) != SQLITE_OK)
		exit(2);
	for (int i = 0; i < 300; i++) {
		sqlite3_bind_int(st, 1, i);
		while (sqlite3_step(st) == SQLITE_ROW)
			;
		sqlite3_reset(st);
	}
	sqlite3_finalize(st);
	sqlite3_close(conn);
	return NULL;
}

int main(void)
{
	sqlite3_stmt *st;
	pthread_t th[4];

	if (sqlite3_open(":memory:", &db) != SQLITE_OK ||
	    sqlite3_prepare_v2(db, "SELECT ?1 * 7", -1, &st, NULL) != SQLITE_OK)
		return 2;
	run(st, 1);
	for (int i = 0; i < 4; i++)
		pthread_create(&th[i], NULL, worker, NULL);
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < 2000; i++) {
		site_a(st, i);
		if (i % 4 == 0)
			site_b(st, i);
		if (i % 20 < 3)
			site_c(st, i);
	}
	sqlite3_finalize(st);
	sqlite3_close(db);
	printf("ok\n");
	return 0;
}
