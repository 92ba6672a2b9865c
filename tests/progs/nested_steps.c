/* SPDX-License-Identifier: MIT */
/*
 * nested_steps.c - executions nested in another's step: an SQL function
 * that steps a statement of its own (prepared once) for every row of the
 * query that calls it, and sqlite3_exec callbacks that step a statement
 * the program also steps at top level between them. The inner statement
 * is stepped at top level just before each outer one, so that it is the
 * statement sqlite3_step last ran inline when the nesting begins, and
 * each function call runs it twice to the end (so that a step of it
 * could run inline while nested). For
 * tests/integration/t_nested_steps.sh: every inner execution counted
 * nested, every top-level one not. Prints "inner N nested M top K".
 */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>

static sqlite3 *db;
static sqlite3_stmt *inner;
static long nested, top;

static void die(const char *what)
{
	fprintf(stderr, "nested_steps: %s: %s\n", what, sqlite3_errmsg(db));
	exit(1);
}

static sqlite3_int64 twice(sqlite3_int64 v)
{
	sqlite3_int64 r = 0;

	sqlite3_bind_int64(inner, 1, v);
	while (sqlite3_step(inner) == SQLITE_ROW) /* to SQLITE_DONE: two steps */
		r = sqlite3_column_int64(inner, 0);
	sqlite3_reset(inner);
	return r;
}

static void fn(sqlite3_context *c, int n, sqlite3_value **v)
{
	(void)n;
	nested += 2; /* two executions of the inner statement a call */
	sqlite3_result_int64(c, twice(sqlite3_value_int64(v[0])) + twice(1));
}

static int cb(void *arg, int n, char **vals, char **cols)
{
	(void)arg;
	(void)n;
	(void)cols;
	nested++;
	twice(atoll(vals[0]));
	return 0;
}

int main(void)
{
	sqlite3_stmt *outer;
	sqlite3_int64 sum = 0;
	int i;

	if (sqlite3_open(":memory:", &db) != SQLITE_OK)
		die("open");
	if (sqlite3_create_function(db, "twice", 1, SQLITE_UTF8, NULL, fn, NULL, NULL) != SQLITE_OK)
		die("function");
	if (sqlite3_exec(db,
			 "CREATE TABLE t(a INTEGER);"
			 "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 20)"
			 " INSERT INTO t SELECT x FROM n;",
			 NULL, NULL, NULL) != SQLITE_OK)
		die("schema");
	if (sqlite3_prepare_v2(db, "SELECT ?1 * 2 AS inner_step", -1, &inner, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(db, "SELECT twice(a) AS outer_step FROM t", -1, &outer, NULL) != SQLITE_OK)
		die("prepare");
	for (i = 0; i < 50; i++) {
		twice(i); /* top level: the statement stepped inline last */
		top++;
		while (sqlite3_step(outer) == SQLITE_ROW)
			sum += sqlite3_column_int64(outer, 0);
		sqlite3_reset(outer);
		twice(i);
		top++;
		if (sqlite3_exec(db, "SELECT a FROM t WHERE a <= 5", cb, NULL, NULL) != SQLITE_OK)
			die("exec");
	}
	sqlite3_finalize(outer);
	sqlite3_finalize(inner);
	sqlite3_close(db);
	printf("inner %ld nested %ld top %ld sum %lld\n", nested + top, nested, top, (long long)sum);
	return 0;
}
