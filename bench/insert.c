/* SPDX-License-Identifier: MIT */
/*
 * insert.c - inserts in large transactions: N rows inserted with one
 * prepared INSERT into an indexed table of a database file, TXN rows per
 * transaction (BEGIN ... COMMIT). The file lives in $TMPDIR (default
 * /tmp) and is removed at the end; synchronous=OFF keeps fsync, and with
 * it the disk, out of the measurement, so what is timed is SQLite's own
 * work plus page-cache writes.
 *
 * Usage: insert [N [TXN]]   (default 200000 10000)
 */
#include <string.h>
#include <unistd.h>

#include "bench.h"

int main(int argc, char **argv)
{
	long n = bench_arg(argc, argv, 1, 200000), txn = bench_arg(argc, argv, 2, 10000), i;
	long long sum = 0;
	const char *tmp = getenv("TMPDIR");
	char path[4096], side[4200];
	sqlite3 *db = NULL;
	sqlite3_stmt *ins, *begin, *commit;
	uint64_t t0, t1;

	snprintf(path, sizeof(path), "%s/sqlprof-bench-insert-%d.db", tmp && *tmp ? tmp : "/tmp",
		 (int)getpid());
	unlink(path);
	bench_ok(db, sqlite3_open(path, &db), SQLITE_OK, "open");
	bench_ok(db,
		 sqlite3_exec(db,
			      "PRAGMA synchronous=OFF; PRAGMA journal_mode=WAL;"
			      "CREATE TABLE t(id INTEGER PRIMARY KEY, a INTEGER, b TEXT);"
			      "CREATE INDEX t_a ON t(a);",
			      NULL, NULL, NULL),
		 SQLITE_OK, "schema");
	bench_ok(db, sqlite3_prepare_v2(db, "INSERT INTO t(a, b) VALUES (?, ?)", -1, &ins, NULL),
		 SQLITE_OK, "prepare insert");
	bench_ok(db, sqlite3_prepare_v2(db, "BEGIN", -1, &begin, NULL), SQLITE_OK, "prepare begin");
	bench_ok(db, sqlite3_prepare_v2(db, "COMMIT", -1, &commit, NULL), SQLITE_OK,
		 "prepare commit");
	t0 = bench_now_ns();
	for (i = 0; i < n; i++) {
		if (i % txn == 0) {
			bench_ok(db, sqlite3_step(begin), SQLITE_DONE, "begin");
			sqlite3_reset(begin);
		}
		sqlite3_bind_int64(ins, 1, (i * 7919) % 1000003);
		sqlite3_bind_text(ins, 2, "a short text value", -1, SQLITE_STATIC);
		bench_ok(db, sqlite3_step(ins), SQLITE_DONE, "insert");
		sqlite3_reset(ins);
		if (i % txn == txn - 1 || i == n - 1) {
			bench_ok(db, sqlite3_step(commit), SQLITE_DONE, "commit");
			sqlite3_reset(commit);
		}
	}
	t1 = bench_now_ns();
	sum = sqlite3_last_insert_rowid(db);
	sqlite3_finalize(ins);
	sqlite3_finalize(begin);
	sqlite3_finalize(commit);
	sqlite3_close(db);
	unlink(path);
	snprintf(side, sizeof(side), "%s-wal", path);
	unlink(side);
	snprintf(side, sizeof(side), "%s-shm", path);
	unlink(side);
	bench_result("insert", n, t1 - t0, sum);
	return 0;
}
