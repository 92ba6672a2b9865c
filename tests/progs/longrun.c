/* SPDX-License-Identifier: MIT */
/*
 * longrun.c - a long run of trivial queries, for the integration test that
 * kills the collector mid-run (tests/integration/t_collector_killed.sh).
 *
 * usage: longrun [N [STARTED [GO]]]
 * Runs N executions (default 200000) of one statement and prints a
 * checksum; exits 5. With STARTED, creates that file after the first 1000
 * executions; with GO as well, then waits (up to 30 s) for GO to exist
 * before running the rest, so a test can act while this program is
 * certainly mid-run. It does not check what the profiler recorded.
 */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static sqlite3 *db;

static void die(const char *what)
{
	fprintf(stderr, "longrun: %s: %s\n", what, sqlite3_errmsg(db));
	exit(1);
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 200000, i;
	const char *started = argc > 2 ? argv[2] : NULL;
	const char *go = argc > 3 ? argv[3] : NULL;
	unsigned long long sum = 0;
	sqlite3_stmt *st;

	if (sqlite3_open(":memory:", &db) != SQLITE_OK)
		die("open");
	if (sqlite3_prepare_v2(db, "SELECT ?1 * 3 + 1", -1, &st, NULL) != SQLITE_OK)
		die("prepare");
	for (i = 0; i < n; i++) {
		if (i == 1000 && started) {
			FILE *f = fopen(started, "w");

			if (!f)
				die("cannot create the started marker");
			fclose(f);
			for (int w = 0; go && w < 3000 && access(go, F_OK) != 0; w++) {
				struct timespec ts = { 0, 10000000 };

				nanosleep(&ts, NULL);
			}
		}
		sqlite3_bind_int64(st, 1, i);
		if (sqlite3_step(st) != SQLITE_ROW)
			die("step");
		sum = sum * 31 + (unsigned long long)sqlite3_column_int64(st, 0);
		if (sqlite3_step(st) != SQLITE_DONE)
			die("step done");
		sqlite3_reset(st);
	}
	sqlite3_finalize(st);
	sqlite3_close(db);
	printf("n=%ld checksum=%llu\n", n, sum);
	return 5;
}
