/* SPDX-License-Identifier: MIT */
/*
 * robust_abort.c - a program that dies by abort() after a run of queries,
 * for tests/integration/t_robust_abort.sh.
 *
 * usage: robust_abort BATCHES PER_BATCH PAUSE_MS
 * Runs BATCHES batches of PER_BATCH executions of "SELECT ?1 AS
 * abort_q"; after each batch it prints "batch K done" (flushed) and sleeps
 * PAUSE_MS. Then it runs one more batch of PER_BATCH executions and calls
 * abort() at once. With PAUSE_MS at least 3 of the profiler's flush
 * periods, every finished batch has been through a periodic flush before
 * the program dies; only the last, unpaused batch may be lost.
 */
#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv)
{
	long batches = argc > 1 ? atol(argv[1]) : 8, per = argc > 2 ? atol(argv[2]) : 1000;
	long ms = argc > 3 ? atol(argv[3]) : 300, sum = 0;
	sqlite3 *db;
	sqlite3_stmt *st;

	if (sqlite3_open(":memory:", &db) != SQLITE_OK ||
	    sqlite3_prepare_v2(db, "SELECT ?1 AS abort_q", -1, &st, NULL) != SQLITE_OK) {
		fprintf(stderr, "robust_abort: cannot prepare\n");
		return 1;
	}
	for (long b = 0; b <= batches; b++) {
		for (long i = 0; i < per; i++) {
			sqlite3_bind_int64(st, 1, i);
			while (sqlite3_step(st) == SQLITE_ROW)
				sum += sqlite3_column_int64(st, 0);
			sqlite3_reset(st);
		}
		if (b == batches)
			break;
		printf("batch %ld done sum %ld\n", b + 1, sum);
		fflush(stdout);
		{
			struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

			while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
				;
		}
	}
	abort();
}
