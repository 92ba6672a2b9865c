/* SPDX-License-Identifier: MIT */
/*
 * roundrobin.c - N executions of K trivial prepared statements taken in
 * turn (SELECT ?1+k: bind, step to DONE, reset), the alternating-statement
 * workload of scripts/overhead.sh (issue 25: any real program, every ORM,
 * steps several statements, not one over and over). With L > 0, L more
 * statements are prepared and kept alive, never stepped (live statements
 * the table must hold: issue 24).
 * Usage: roundrobin [N [K [L]]]   (default 100000 2 0); prints the sum.
 */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 100000, i, sum = 0;
	long k = argc > 2 ? atol(argv[2]) : 2, l = argc > 3 ? atol(argv[3]) : 0, j;
	sqlite3 *db;
	sqlite3_stmt **st, **idle;
	char sql[64];

	if (k < 1 || l < 0 || sqlite3_open(":memory:", &db) != SQLITE_OK)
		return 1;
	st = calloc((size_t)k, sizeof(*st));
	idle = calloc((size_t)l + 1, sizeof(*idle));
	if (!st || !idle)
		return 1;
	for (j = 0; j < k; j++) {
		snprintf(sql, sizeof(sql), "SELECT ?1+%ld", j);
		if (sqlite3_prepare_v2(db, sql, -1, &st[j], NULL) != SQLITE_OK) {
			fprintf(stderr, "roundrobin: %s\n", sqlite3_errmsg(db));
			return 1;
		}
	}
	for (j = 0; j < l; j++) {
		if (sqlite3_prepare_v2(db, "SELECT 1", -1, &idle[j], NULL) != SQLITE_OK) {
			fprintf(stderr, "roundrobin: %s\n", sqlite3_errmsg(db));
			return 1;
		}
	}
	for (i = 0; i < n; i++) {
		sqlite3_stmt *s = st[i % k];

		sqlite3_bind_int64(s, 1, i);
		while (sqlite3_step(s) == SQLITE_ROW)
			sum += sqlite3_column_int64(s, 0);
		sqlite3_reset(s);
	}
	for (j = 0; j < k; j++)
		sqlite3_finalize(st[j]);
	for (j = 0; j < l; j++)
		sqlite3_finalize(idle[j]);
	sqlite3_close(db);
	printf("%ld\n", sum);
	free(st);
	free(idle);
	return 0;
}
