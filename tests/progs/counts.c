/* SPDX-License-Identifier: MIT */
/*
 * counts.c - a program with known query counts, for the integration tests:
 * 1000 executions of one statement, 37 of another, one failing statement,
 * and one sqlite3_exec running 3 statements. Prints a checksum so runs with
 * and without the preload can be compared.
 */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>

static sqlite3 *db;

static void die(const char *what)
{
	fprintf(stderr, "counts: %s: %s\n", what, sqlite3_errmsg(db));
	exit(1);
}

int main(void)
{
	sqlite3_stmt *st;
	long sum = 0;
	int i;

	if (sqlite3_open(":memory:", &db) != SQLITE_OK)
		die("open");
	/* one exec running 3 statements */
	if (sqlite3_exec(db,
			 "CREATE TABLE t(a INTEGER PRIMARY KEY, b TEXT);"
			 "INSERT INTO t(b) VALUES('x');"
			 "INSERT INTO t(b) VALUES('y');",
			 NULL, NULL, NULL) != SQLITE_OK)
		die("exec");
	/* 1000 executions of one statement */
	if (sqlite3_prepare_v2(db, "SELECT a FROM t WHERE a = ?1", -1, &st, NULL) != SQLITE_OK)
		die("prepare 1");
	for (i = 0; i < 1000; i++) {
		sqlite3_bind_int(st, 1, 1 + i % 2);
		while (sqlite3_step(st) == SQLITE_ROW)
			sum += sqlite3_column_int(st, 0);
		sqlite3_reset(st);
	}
	sqlite3_finalize(st);
	/* 37 of another */
	if (sqlite3_prepare_v2(db, "SELECT count(*) FROM t WHERE b <> ?1", -1, &st, NULL) != SQLITE_OK)
		die("prepare 2");
	for (i = 0; i < 37; i++) {
		sqlite3_bind_text(st, 1, "x", -1, SQLITE_STATIC);
		if (sqlite3_step(st) == SQLITE_ROW)
			sum += sqlite3_column_int(st, 0);
		sqlite3_reset(st);
	}
	sqlite3_finalize(st);
	/* one failing statement: constraint violation at step */
	if (sqlite3_prepare_v2(db, "INSERT INTO t(a, b) VALUES(1, 'dup')", -1, &st, NULL) != SQLITE_OK)
		die("prepare 3");
	if (sqlite3_step(st) != SQLITE_CONSTRAINT)
		die("expected a constraint error");
	sqlite3_finalize(st);
	sqlite3_close(db);
	printf("sum=%ld\n", sum);
	return 3; /* a distinctive exit code, passed through by sqlprof record */
}
