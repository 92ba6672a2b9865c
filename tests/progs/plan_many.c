/* SPDX-License-Identifier: MIT */
/*
 * plan_many.c - N distinct query fingerprints, each with a plan to take (a
 * table read), each run as two SQL texts that differ only in a literal:
 * "SELECT v AS c<i> FROM t WHERE id = 1" and "... = 2" (the alias makes
 * the fingerprint distinct, the literal does not). The scale workload of
 * issue 24 item 4 (plans for 100,000 fingerprints) and issue 25's literal
 * texts (a plan per fingerprint, not per text).
 * With a second argument, "literal": N texts of one fingerprint instead,
 * "SELECT v FROM t WHERE id = <i % 3 + 1> AND v > -<i>" (a program that
 * writes its values into the text), each prepared, run and finalized once.
 * Usage: plan_many [N [literal]]   (default 1000); prints the sum of the
 * results.
 */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long run(sqlite3 *db, const char *sql)
{
	sqlite3_stmt *st;
	long sum = 0;

	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
		fprintf(stderr, "plan_many: %s\n", sqlite3_errmsg(db));
		exit(1);
	}
	while (sqlite3_step(st) == SQLITE_ROW)
		sum += sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return sum;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000, i, sum = 0;
	char sql[96];
	sqlite3 *db;

	if (sqlite3_open(":memory:", &db) != SQLITE_OK ||
	    sqlite3_exec(db, "CREATE TABLE t(id INTEGER PRIMARY KEY, v INT);"
			     "INSERT INTO t VALUES(1, 10), (2, 20), (3, 30);",
			 NULL, NULL, NULL) != SQLITE_OK) {
		fprintf(stderr, "plan_many: cannot set up\n");
		return 1;
	}
	for (i = 0; argc > 2 && !strcmp(argv[2], "literal") && i < n; i++) {
		snprintf(sql, sizeof(sql), "SELECT v FROM t WHERE id = %ld AND v > -%ld", i % 3 + 1, i);
		sum += run(db, sql);
	}
	for (i = 0; !(argc > 2 && !strcmp(argv[2], "literal")) && i < n; i++) {
		snprintf(sql, sizeof(sql), "SELECT v AS c%ld FROM t WHERE id = 1", i);
		sum += run(db, sql);
		snprintf(sql, sizeof(sql), "SELECT v AS c%ld FROM t WHERE id = 2", i);
		sum += run(db, sql);
	}
	sqlite3_close(db);
	printf("%ld\n", sum);
	return 0;
}
