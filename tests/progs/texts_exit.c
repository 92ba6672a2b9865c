/* SPDX-License-Identifier: MIT */
/*
 * texts_exit.c - N distinct SQL texts made just before the program exits
 * (issue 24, item 3): "SELECT <i> + 1" for i in 0..N-1, each prepared,
 * stepped once and finalized, then a normal exit (return from main). All
 * of them are one query, "SELECT ? + ?", in the profile; a text that never
 * reached the collector puts its execution under "<sql text lost>".
 *
 * With STARTED and GO: after one first execution (so the process has a
 * ring), writes the file STARTED and waits (up to 60 s) for the file GO
 * before the N texts, so that a test can stop the collector first.
 *
 * usage: texts_exit N [STARTED GO]   prints the sum of the results
 */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static long run(sqlite3 *db, const char *sql)
{
	sqlite3_stmt *st;
	long v = 0;

	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
		fprintf(stderr, "texts_exit: %s: %s\n", sql, sqlite3_errmsg(db));
		exit(1);
	}
	while (sqlite3_step(st) == SQLITE_ROW)
		v += sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return v;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 50000, i, sum = 0;
	char sql[64];
	sqlite3 *db;

	if (n < 0 || sqlite3_open(":memory:", &db) != SQLITE_OK)
		return 2;
	sum += run(db, "SELECT 0 AS warm_up");
	if (argc > 3) {
		FILE *f = fopen(argv[2], "w");
		int w;

		if (!f || fclose(f) != 0)
			return 2;
		for (w = 0; w < 6000 && access(argv[3], F_OK) != 0; w++) {
			struct timespec ts = { 0, 10000000 };

			nanosleep(&ts, NULL);
		}
	}
	for (i = 0; i < n; i++) {
		snprintf(sql, sizeof(sql), "SELECT %ld + 1", i);
		sum += run(db, sql);
	}
	sqlite3_close(db);
	printf("%ld\n", sum);
	return 0;
}
