/* SPDX-License-Identifier: MIT */
/*
 * bigalloc.c - a program that maps MB MiB of its own (malloc, every page
 * touched) and then runs N executions of a prepared statement: under an
 * address-space limit (ulimit -v) that leaves it room, it must run the
 * same under sqlprof (issue 23 item 5: the preload's 512 MiB of
 * statistics made the program's own allocation fail).
 * Usage: bigalloc [MB [N]]   (default 600 1000); prints the sum of the
 * results; exits 3 when the allocation fails.
 */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
	long mb = argc > 1 ? atol(argv[1]) : 600, n = argc > 2 ? atol(argv[2]) : 1000, i, sum = 0;
	char *big = malloc((size_t)mb << 20);
	sqlite3 *db;
	sqlite3_stmt *st;

	if (!big) {
		fprintf(stderr, "bigalloc: cannot allocate %ld MiB\n", mb);
		return 3;
	}
	for (i = 0; i < mb << 20; i += 4096)
		big[i] = 1;
	if (sqlite3_open(":memory:", &db) != SQLITE_OK ||
	    sqlite3_prepare_v2(db, "SELECT ?1+1", -1, &st, NULL) != SQLITE_OK)
		return 1;
	for (i = 0; i < n; i++) {
		sqlite3_bind_int64(st, 1, i);
		while (sqlite3_step(st) == SQLITE_ROW)
			sum += sqlite3_column_int64(st, 0);
		sqlite3_reset(st);
	}
	sqlite3_finalize(st);
	sqlite3_close(db);
	free(big);
	printf("%ld\n", sum);
	return 0;
}
