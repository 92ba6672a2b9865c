/* SPDX-License-Identifier: MIT */
/*
 * trivial.c - N executions of a trivial prepared statement (SELECT ?1+1:
 * bind, step to DONE, reset), the workload of scripts/overhead.sh.
 * Usage: trivial [N]   (default 100000); prints the sum of the results.
 */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 100000, i, sum = 0;
	sqlite3 *db;
	sqlite3_stmt *st;

	if (sqlite3_open(":memory:", &db) != SQLITE_OK ||
	    sqlite3_prepare_v2(db, "SELECT ?1+1", -1, &st, NULL) != SQLITE_OK) {
		fprintf(stderr, "trivial: %s\n", sqlite3_errmsg(db));
		return 1;
	}
	for (i = 0; i < n; i++) {
		sqlite3_bind_int64(st, 1, i);
		while (sqlite3_step(st) == SQLITE_ROW)
			sum += sqlite3_column_int64(st, 0);
		sqlite3_reset(st);
	}
	sqlite3_finalize(st);
	sqlite3_close(db);
	printf("%ld\n", sum);
	return 0;
}
