/* SPDX-License-Identifier: MIT */
/*
 * formats_app.c - a workload for the "every format has everything" tests
 * (t_report_formats, t_export_html_findings): single-statement
 * sqlite3_exec calls (BEGIN, COMMIT, 5 times each), one failing
 * single-statement exec, a failing prepared statement, an N+1 loop (50
 * executions), another failing exec, a full scan of 2000 rows with a sort (temp B-tree), and
 * a join with a two-level plan.
 */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>

static sqlite3 *db;

static void die(const char *what)
{
	fprintf(stderr, "formats_app: %s: %s\n", what, sqlite3_errmsg(db));
	exit(1);
}

static void exec(const char *sql)
{
	if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK)
		die(sql);
}

int main(void)
{
	sqlite3_stmt *st;
	long sum = 0;
	int i;

	if (sqlite3_open(":memory:", &db) != SQLITE_OK)
		die("open");
	exec("CREATE TABLE item(id INTEGER PRIMARY KEY, name TEXT, price INTEGER, owner INTEGER)");
	exec("CREATE TABLE owner(id INTEGER PRIMARY KEY, name TEXT)");
	for (i = 0; i < 5; i++) {
		exec("BEGIN");
		exec("COMMIT");
	}
	exec("BEGIN");
	if (sqlite3_prepare_v2(db, "INSERT INTO item(name, price, owner) VALUES(?1, ?2, ?3)", -1,
			       &st, NULL) != SQLITE_OK)
		die("prepare insert");
	for (i = 0; i < 2000; i++) {
		sqlite3_bind_text(st, 1, "thing", -1, SQLITE_STATIC);
		sqlite3_bind_int(st, 2, (i * 7919) % 1000);
		sqlite3_bind_int(st, 3, i % 50);
		if (sqlite3_step(st) != SQLITE_DONE)
			die("insert");
		sqlite3_reset(st);
	}
	sqlite3_finalize(st);
	for (i = 0; i < 50; i++) {
		char sql[96];

		snprintf(sql, sizeof(sql), "INSERT INTO owner(id, name) VALUES(%d, 'o%d')", i, i);
		exec(sql);
	}
	exec("COMMIT");
	/* a failing single-statement exec (no transaction to commit) */
	if (sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) == SQLITE_OK)
		die("expected COMMIT to fail");
	/* a failing single-statement exec with the same error as the
	 * prepared statement below: two failures, each listed */
	if (sqlite3_exec(db, "INSERT INTO owner(id, name) VALUES(2, 'dup')", NULL, NULL, NULL) ==
	    SQLITE_OK)
		die("expected a constraint error");
	/* a failing prepared statement */
	if (sqlite3_prepare_v2(db, "INSERT INTO owner(id, name) VALUES(1, 'dup')", -1, &st, NULL) !=
	    SQLITE_OK)
		die("prepare dup");
	if (sqlite3_step(st) != SQLITE_CONSTRAINT)
		die("expected a constraint error");
	sqlite3_finalize(st);
	/* N+1: one query per owner */
	if (sqlite3_prepare_v2(db, "SELECT name FROM owner WHERE id = ?1", -1, &st, NULL) != SQLITE_OK)
		die("prepare n+1");
	for (i = 0; i < 50; i++) {
		sqlite3_bind_int(st, 1, i);
		while (sqlite3_step(st) == SQLITE_ROW)
			sum += sqlite3_column_bytes(st, 0);
		sqlite3_reset(st);
	}
	sqlite3_finalize(st);
	/* a full scan with a sort */
	if (sqlite3_prepare_v2(db, "SELECT id FROM item WHERE price > ?1 ORDER BY name", -1, &st,
			       NULL) != SQLITE_OK)
		die("prepare scan");
	sqlite3_bind_int(st, 1, 10);
	while (sqlite3_step(st) == SQLITE_ROW)
		sum += sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	/* a join: a plan with two levels */
	if (sqlite3_prepare_v2(db,
			       "SELECT o.name, (SELECT count(*) FROM item i WHERE i.owner = o.id)"
			       " FROM owner o WHERE o.id IN (SELECT owner FROM item WHERE price < ?1)",
			       -1, &st, NULL) != SQLITE_OK)
		die("prepare join");
	sqlite3_bind_int(st, 1, 5);
	while (sqlite3_step(st) == SQLITE_ROW)
		sum += sqlite3_column_int(st, 1);
	sqlite3_finalize(st);
	sqlite3_close(db);
	printf("sum=%ld\n", sum);
	return 0;
}
