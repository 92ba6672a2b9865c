/* SPDX-License-Identifier: MIT */
/*
 * trivial.c - the trivial-statement loop of `make bench`: N executions of
 * SELECT ?1+1 on an in-memory database (bind, step to DONE, reset), the
 * cheapest execution SQLite has, so the profiler's per-execution cost is
 * as visible as it can be. Same statement as tests/progs/trivial.c, plus
 * the timed loop and the BENCH line (bench.h).
 *
 * Usage: trivial [N]   (default 1000000)
 */
#include "bench.h"

int main(int argc, char **argv)
{
	long n = bench_arg(argc, argv, 1, 1000000), i;
	long long sum = 0;
	sqlite3 *db = NULL;
	sqlite3_stmt *st;
	uint64_t t0, t1;

	bench_ok(db, sqlite3_open(":memory:", &db), SQLITE_OK, "open");
	bench_ok(db, sqlite3_prepare_v2(db, "SELECT ?1+1", -1, &st, NULL), SQLITE_OK, "prepare");
	t0 = bench_now_ns();
	for (i = 0; i < n; i++) {
		sqlite3_bind_int64(st, 1, i);
		while (sqlite3_step(st) == SQLITE_ROW)
			sum += sqlite3_column_int64(st, 0);
		sqlite3_reset(st);
	}
	t1 = bench_now_ns();
	sqlite3_finalize(st);
	sqlite3_close(db);
	bench_result("trivial", n, t1 - t0, sum);
	return 0;
}
