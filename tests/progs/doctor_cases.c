/* SPDX-License-Identifier: MIT */
/*
 * doctor_cases.c - the query doctor's hard cases (issue 13, "The doctor:
 * right, or silent"), for tests/integration/t_doctor_*.sh. Usage:
 *
 *   doctor_cases CASE [DBFILE]
 *
 * with the database in memory, or in DBFILE (created afresh). Cases:
 *
 *   missing   SELECT sum(amount) FROM orders WHERE user_id = ?, no index
 *             on user_id: the one index worth suggesting
 *   like      SELECT id FROM books WHERE title LIKE ? ORDER BY price with
 *             '%x%': no index helps (one on price still scans)
 *   rowid     SELECT v FROM kv WHERE k = ? ... where k is the INTEGER
 *             PRIMARY KEY, and ORDER BY k of a scan: the rowid is the index
 *   constant  SELECT ? * 2, 100 times in a row: no table, no N+1
 *   service   SELECT name FROM users WHERE id = ?, 40 times, 10 ms apart
 *             (a service loop): not N+1
 *   nplus1    the same query 100 times back to back: N+1
 *   duplicate SELECT value FROM settings WHERE key = ? with the same key,
 *             200 times among other queries; and with 200 distinct keys
 *
 * Deterministic data; prints "ok"; exits 1 on a SQLite error, 2 on usage.
 */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static sqlite3 *db;

static void die(const char *what)
{
	fprintf(stderr, "doctor_cases: %s: %s\n", what, sqlite3_errmsg(db));
	exit(1);
}

static void exec(const char *sql)
{
	if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK)
		die(sql);
}

static sqlite3_stmt *prep(const char *sql)
{
	sqlite3_stmt *st;

	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		die(sql);
	return st;
}

/* Run st once with one integer (or text, when s) parameter; reset. */
static long long run(sqlite3_stmt *st, long long v, const char *s)
{
	long long sum = 0;
	int rc;

	if (s)
		sqlite3_bind_text(st, 1, s, -1, SQLITE_STATIC);
	else
		sqlite3_bind_int64(st, 1, v);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW)
		sum += sqlite3_column_int64(st, 0);
	if (rc != SQLITE_DONE)
		die("step");
	sqlite3_reset(st);
	return sum;
}

static void fill(void)
{
	exec("BEGIN;"
	     "CREATE TABLE users(id INTEGER PRIMARY KEY, name TEXT);"
	     "CREATE TABLE orders(id INTEGER PRIMARY KEY, user_id INTEGER, amount INTEGER);"
	     "CREATE TABLE books(id INTEGER PRIMARY KEY, title TEXT, price INTEGER);"
	     "CREATE TABLE kv(k INTEGER PRIMARY KEY, v TEXT, note TEXT);"
	     "CREATE TABLE settings(key TEXT PRIMARY KEY, value INTEGER);"
	     "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000)"
	     " INSERT INTO users SELECT i, 'user' || i FROM n;"
	     "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000)"
	     " INSERT INTO orders SELECT i, i % 300, i * 7 % 101 FROM n;"
	     "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000)"
	     " INSERT INTO books SELECT i, 'title ' || (i * 37 % 1000), i * 13 % 997 FROM n;"
	     "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000)"
	     " INSERT INTO kv SELECT i, 'v' || i, 'note ' || (i % 50) FROM n;"
	     "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 300)"
	     " INSERT INTO settings SELECT 'key' || i, i FROM n;"
	     "COMMIT;");
}

int main(int argc, char **argv)
{
	const char *c = argc > 1 ? argv[1] : "";
	long long sum = 0;
	sqlite3_stmt *st, *other;
	int i;

	if (argc < 2 || argc > 3) {
		fprintf(stderr, "usage: doctor_cases CASE [DBFILE]\n");
		return 2;
	}
	if (argc == 3)
		unlink(argv[2]);
	if (sqlite3_open(argc == 3 ? argv[2] : ":memory:", &db) != SQLITE_OK)
		die("open");
	fill();
	if (!strcmp(c, "missing")) {
		st = prep("SELECT sum(amount) FROM orders WHERE user_id = ?");
		other = prep("SELECT count(*) FROM users WHERE id < ?");
		for (i = 0; i < 20; i++) {
			sum += run(st, i * 7, NULL);
			sum += run(other, i, NULL); /* not a run */
		}
	} else if (!strcmp(c, "like")) {
		st = prep("SELECT id FROM books WHERE title LIKE ? ORDER BY price");
		for (i = 0; i < 5; i++)
			sum += run(st, 0, "%x%");
		for (i = 0; i < 5; i++)
			sum += run(st, 0, "%1%");
	} else if (!strcmp(c, "rowid")) {
		st = prep("SELECT length(v) FROM kv WHERE k = ?");
		for (i = 0; i < 5; i++)
			sum += run(st, i, NULL);
		st = prep("SELECT length(v) FROM kv WHERE note LIKE ? ORDER BY k");
		for (i = 0; i < 5; i++)
			sum += run(st, 0, "%7%");
		st = prep("SELECT length(v) FROM kv WHERE k > ? ORDER BY note");
		for (i = 0; i < 5; i++)
			sum += run(st, 10, NULL);
	} else if (!strcmp(c, "constant")) {
		st = prep("SELECT ? * 2");
		for (i = 0; i < 100; i++)
			sum += run(st, i, NULL);
	} else if (!strcmp(c, "service") || !strcmp(c, "nplus1")) {
		int service = !strcmp(c, "service");

		st = prep("SELECT length(name) FROM users WHERE id = ?");
		for (i = 0; i < (service ? 40 : 100); i++) {
			struct timespec ts = { 0, 10 * 1000 * 1000 };

			sum += run(st, i + 1, NULL);
			if (service)
				nanosleep(&ts, NULL);
		}
	} else if (!strcmp(c, "duplicate")) {
		st = prep("SELECT value FROM settings WHERE key = ?");
		other = prep("SELECT count(*) FROM users WHERE id < ?");
		for (i = 0; i < 200; i++) {
			char key[32];

			sum += run(st, 0, "key42"); /* the same value every time */
			snprintf(key, sizeof(key), "key%d", i + 1);
			sum += run(other, i, NULL);
		}
		st = prep("SELECT value + 1 FROM settings WHERE key = ?");
		for (i = 0; i < 200; i++) {
			char key[32];

			snprintf(key, sizeof(key), "key%d", i + 1); /* distinct values */
			sum += run(st, 0, key);
			sum += run(other, i + 1000, NULL);
		}
	} else {
		fprintf(stderr, "doctor_cases: unknown case %s\n", c);
		return 2;
	}
	sqlite3_close_v2(db);
	printf("ok %lld\n", sum);
	return 0;
}
