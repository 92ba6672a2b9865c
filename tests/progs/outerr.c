/* SPDX-License-Identifier: MIT */
/*
 * outerr.c - writes to both stdout and stderr around a few queries (one of
 * them failing) and exits 7, for tests/integration/t_output_unchanged.sh.
 */
#include <sqlite3.h>
#include <stdio.h>

int main(void)
{
	sqlite3 *db;
	sqlite3_stmt *st;
	char *err = NULL;
	int i;

	setvbuf(stdout, NULL, _IONBF, 0);
	printf("out: start\n");
	fprintf(stderr, "err: start\n");
	if (sqlite3_open(":memory:", &db) != SQLITE_OK)
		return 1;
	sqlite3_exec(db, "CREATE TABLE k(v INTEGER); INSERT INTO k VALUES(1),(2),(3);", NULL, NULL, NULL);
	if (sqlite3_prepare_v2(db, "SELECT v FROM k ORDER BY v", -1, &st, NULL) != SQLITE_OK)
		return 1;
	while (sqlite3_step(st) == SQLITE_ROW) {
		i = sqlite3_column_int(st, 0);
		printf("out: row %d\n", i);
		fprintf(stderr, "err: row %d\n", i);
	}
	sqlite3_finalize(st);
	if (sqlite3_exec(db, "SELECT * FROM no_such_table", NULL, NULL, &err) != SQLITE_OK) {
		fprintf(stderr, "err: %s\n", err ? err : "?");
		sqlite3_free(err);
	}
	sqlite3_close(db);
	printf("out: end\n");
	fprintf(stderr, "err: end\n");
	return 7;
}
