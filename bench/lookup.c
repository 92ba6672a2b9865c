/* SPDX-License-Identifier: MIT */
/*
 * lookup.c - indexed point lookups: a table of ROWS rows (default
 * 100,000) with a secondary index, filled by one INSERT ... SELECT from a
 * recursive CTE (a single execution, so the set-up costs a profiler
 * nothing), then N lookups `SELECT v FROM t WHERE k = ?` on keys spread
 * over the whole table. Only the lookups are timed.
 *
 * Usage: lookup [N [ROWS]]   (default 200000 100000)
 */
#include "bench.h"

int main(int argc, char **argv)
{
	long n = bench_arg(argc, argv, 1, 200000), rows = bench_arg(argc, argv, 2, 100000), i;
	long long sum = 0;
	sqlite3 *db = NULL;
	sqlite3_stmt *ins, *sel;
	uint64_t t0, t1;

	bench_ok(db, sqlite3_open(":memory:", &db), SQLITE_OK, "open");
	bench_ok(db,
		 sqlite3_exec(db,
			      "CREATE TABLE t(id INTEGER PRIMARY KEY, k INTEGER NOT NULL, v TEXT);"
			      "CREATE INDEX t_k ON t(k);",
			      NULL, NULL, NULL),
		 SQLITE_OK, "schema");
	/* Keys in insertion order keep the fill cheap (the index is appended
	 * to); the lookups below visit them in a scattered order. */
	bench_ok(
		db,
		sqlite3_prepare_v2(db,
				   "WITH RECURSIVE c(x) AS (SELECT 0 UNION ALL SELECT x + 1 FROM c "
				   "WHERE x + 1 < ?1) INSERT INTO t(id, k, v) "
				   "SELECT x, x * 3, 'row ' || x FROM c",
				   -1, &ins, NULL),
		SQLITE_OK, "prepare insert");
	sqlite3_bind_int64(ins, 1, rows);
	bench_ok(db, sqlite3_step(ins), SQLITE_DONE, "fill");
	sqlite3_finalize(ins);
	bench_ok(db, sqlite3_prepare_v2(db, "SELECT v FROM t WHERE k = ?", -1, &sel, NULL),
		 SQLITE_OK, "prepare select");
	t0 = bench_now_ns();
	for (i = 0; i < n; i++) {
		sqlite3_bind_int64(sel, 1, (i * 104729) % rows * 3);
		while (sqlite3_step(sel) == SQLITE_ROW)
			sum += sqlite3_column_bytes(sel, 0);
		sqlite3_reset(sel);
	}
	t1 = bench_now_ns();
	sqlite3_finalize(sel);
	sqlite3_close(db);
	bench_result("lookup", n, t1 - t0, sum);
	return 0;
}
