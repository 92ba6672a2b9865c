/* SPDX-License-Identifier: MIT */
/*
 * gate_view.c - what the application sees must not change when the
 * preload captures a plan (an EXPLAIN QUERY PLAN run on the application's
 * connection right after each first prepare of a SQL text).
 *
 * Around the prepare of a new SELECT, in each situation below, it reads
 * sqlite3_errcode, sqlite3_extended_errcode, sqlite3_errmsg,
 * sqlite3_changes, sqlite3_total_changes, sqlite3_last_insert_rowid and
 * sqlite3_get_autocommit just before and just after, and prints both:
 *   - outside a transaction, after an INSERT;
 *   - inside an explicit transaction, after an INSERT;
 *   - after a failed statement (a UNIQUE violation, not yet reset);
 *   - after a failed prepare (a syntax error);
 *   - while another SELECT is part-way through its rows.
 * changes, total_changes, last_insert_rowid and autocommit must be equal
 * before and after (a prepare never moves them): exit 1 otherwise. The
 * error state legitimately changes (a successful prepare clears it); the
 * test compares this program's whole output with and without sqlprof.
 *
 * A second connection has an authorizer and a third a trace_v2 callback;
 * each counts its calls, which must be the application's own only: the
 * counts are printed, and the test compares them with and without sqlprof.
 * Table names va (first connection) and vb/vc (the others) let the test
 * check in the profile that plans were captured on the first connection
 * only.
 */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct view {
	int errcode, xerrcode, autocommit;
	long long changes, total, rowid;
	char errmsg[256];
};

static int bad;

static void look(sqlite3 *db, struct view *v)
{
	v->errcode = sqlite3_errcode(db);
	v->xerrcode = sqlite3_extended_errcode(db);
	snprintf(v->errmsg, sizeof(v->errmsg), "%s", sqlite3_errmsg(db));
	v->changes = sqlite3_changes(db);
	v->total = sqlite3_total_changes(db);
	v->rowid = sqlite3_last_insert_rowid(db);
	v->autocommit = sqlite3_get_autocommit(db);
}

static void show(const char *when, const struct view *v)
{
	printf("  %-6s errcode=%d xerrcode=%d errmsg='%s' changes=%lld total_changes=%lld"
	       " last_insert_rowid=%lld autocommit=%d\n",
	       when, v->errcode, v->xerrcode, v->errmsg, v->changes, v->total, v->rowid,
	       v->autocommit);
}

/* Prepare sql (a SELECT never prepared before on db) and compare. */
static sqlite3_stmt *prepare_and_compare(sqlite3 *db, const char *what, const char *sql)
{
	struct view before, after;
	sqlite3_stmt *st = NULL;
	int rc;

	look(db, &before);
	rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
	look(db, &after);
	printf("%s: prepare rc=%d\n", what, rc);
	show("before", &before);
	show("after", &after);
	if (before.changes != after.changes || before.total != after.total ||
	    before.rowid != after.rowid || before.autocommit != after.autocommit) {
		printf("  MISMATCH: a prepare moved changes, total_changes, last_insert_rowid or"
		       " autocommit\n");
		bad = 1;
	}
	return st;
}

static long drain(sqlite3_stmt *st)
{
	long sum = 0;

	while (sqlite3_step(st) == SQLITE_ROW)
		sum += sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	return sum;
}

static int auth_calls;

static int authorizer(void *arg, int action, const char *a, const char *b, const char *c,
		      const char *d)
{
	(void)arg, (void)action, (void)a, (void)b, (void)c, (void)d;
	auth_calls++;
	return SQLITE_OK;
}

static int trace_calls;

static int tracer(unsigned type, void *arg, void *p, void *x)
{
	(void)type, (void)arg, (void)p, (void)x;
	trace_calls++;
	return 0;
}

static void must(sqlite3 *db, const char *sql)
{
	if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK) {
		fprintf(stderr, "gate_view: %s: %s\n", sql, sqlite3_errmsg(db));
		exit(2);
	}
}

int main(void)
{
	sqlite3 *db, *db2, *db3;
	sqlite3_stmt *st, *open_st;
	long sum = 0;
	int i;

	if (sqlite3_open(":memory:", &db) != SQLITE_OK)
		return 2;
	must(db, "CREATE TABLE va(id INTEGER PRIMARY KEY, k TEXT UNIQUE, n INTEGER)");
	for (i = 1; i <= 20; i++) {
		char sql[128];

		snprintf(sql, sizeof(sql), "INSERT INTO va(k, n) VALUES ('k%d', %d)", i, i);
		must(db, sql);
	}

	/* outside a transaction, after an INSERT */
	must(db, "INSERT INTO va(k, n) VALUES ('x1', 100)");
	st = prepare_and_compare(db, "autocommit after insert", "SELECT n FROM va WHERE k = 'k3'");
	sum += drain(st);

	/* inside an explicit transaction, after an INSERT */
	must(db, "BEGIN");
	must(db, "INSERT INTO va(k, n) VALUES ('x2', 200)");
	st = prepare_and_compare(db, "in transaction", "SELECT n FROM va WHERE n > 5 ORDER BY k");
	sum += drain(st);
	st = prepare_and_compare(db, "in transaction, join",
				 "SELECT a.n FROM va a JOIN va b ON a.n = b.id WHERE b.k = 'k4'");
	sum += drain(st);
	must(db, "COMMIT");

	/* after a failed statement, not yet reset */
	if (sqlite3_prepare_v2(db, "INSERT INTO va(k, n) VALUES ('k1', 0)", -1, &st, NULL) !=
	    SQLITE_OK)
		return 2;
	printf("failing insert: step rc=%d\n", sqlite3_step(st));
	{
		sqlite3_stmt *q = prepare_and_compare(db, "after failed step",
						      "SELECT count(*) FROM va WHERE n < 10");

		sum += drain(q);
	}
	sqlite3_finalize(st);

	/* failed statement inside a transaction */
	must(db, "BEGIN");
	if (sqlite3_exec(db, "INSERT INTO va(k, n) VALUES ('k2', 0)", NULL, NULL, NULL) == SQLITE_OK)
		return 2;
	st = prepare_and_compare(db, "after failed exec in transaction",
				 "SELECT max(n) FROM va WHERE k LIKE 'x%'");
	sum += drain(st);
	must(db, "ROLLBACK");

	/* after a failed prepare */
	printf("bad prepare: rc=%d\n", sqlite3_prepare_v2(db, "SELEC oops", -1, &st, NULL));
	st = prepare_and_compare(db, "after failed prepare", "SELECT sum(n) FROM va WHERE id > 2");
	sum += drain(st);

	/* while another SELECT is part-way through */
	if (sqlite3_prepare_v2(db, "SELECT n FROM va ORDER BY id", -1, &open_st, NULL) != SQLITE_OK)
		return 2;
	for (i = 0; i < 3 && sqlite3_step(open_st) == SQLITE_ROW; i++)
		sum += sqlite3_column_int(open_st, 0);
	st = prepare_and_compare(db, "statement open", "SELECT min(n) FROM va WHERE k > 'k5'");
	sum += drain(st);
	sum += drain(open_st);
	printf("checksum %ld\n", sum);

	/* an authorizer: called for its own prepares only */
	if (sqlite3_open(":memory:", &db2) != SQLITE_OK)
		return 2;
	must(db2, "CREATE TABLE vb(id INTEGER PRIMARY KEY, n INTEGER)");
	must(db2, "INSERT INTO vb(n) VALUES (1), (2), (3)");
	sqlite3_set_authorizer(db2, authorizer, NULL);
	for (i = 0; i < 3; i++) {
		static const char *const q[] = { "SELECT n FROM vb WHERE id = 1",
						 "SELECT count(*) FROM vb WHERE n > 1",
						 "SELECT a.n FROM vb a, vb b WHERE a.id = b.n" };

		if (sqlite3_prepare_v2(db2, q[i], -1, &st, NULL) != SQLITE_OK)
			return 2;
		drain(st);
	}
	printf("authorizer calls: %d\n", auth_calls);

	/* a trace_v2 callback: statements, rows, profile, close */
	if (sqlite3_open(":memory:", &db3) != SQLITE_OK)
		return 2;
	must(db3, "CREATE TABLE vc(id INTEGER PRIMARY KEY, n INTEGER)");
	must(db3, "INSERT INTO vc(n) VALUES (1), (2), (3)");
	sqlite3_trace_v2(db3, SQLITE_TRACE_STMT | SQLITE_TRACE_PROFILE | SQLITE_TRACE_ROW, tracer,
			 NULL);
	if (sqlite3_prepare_v2(db3, "SELECT n FROM vc WHERE n >= 2", -1, &st, NULL) != SQLITE_OK)
		return 2;
	drain(st);
	printf("trace calls: %d\n", trace_calls);

	sqlite3_close(db3);
	sqlite3_close(db2);
	sqlite3_close(db);
	return bad;
}
