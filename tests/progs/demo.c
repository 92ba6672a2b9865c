/* SPDX-License-Identifier: MIT */
/*
 * demo.c - the bundled example for `make demo`: a tiny bookstore that
 * issues its queries from different functions, with the usual sins - a
 * query per row (N+1), a scan on an unindexed column, a statement
 * re-prepared on every call - so the report has something to show.
 */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>

static sqlite3 *db;

static void check(int rc, const char *what)
{
	if (rc != SQLITE_OK && rc != SQLITE_DONE && rc != SQLITE_ROW) {
		fprintf(stderr, "demo: %s: %s\n", what, sqlite3_errmsg(db));
		exit(1);
	}
}

static void load_catalog(int nbooks)
{
	sqlite3_stmt *st;
	int i;

	check(sqlite3_exec(db,
			   "CREATE TABLE authors(id INTEGER PRIMARY KEY, name TEXT);"
			   "CREATE TABLE books(id INTEGER PRIMARY KEY, author_id INTEGER,"
			   " title TEXT, year INTEGER, price REAL);",
			   NULL, NULL, NULL), "schema");
	check(sqlite3_exec(db, "BEGIN", NULL, NULL, NULL), "begin");
	check(sqlite3_prepare_v2(db, "INSERT INTO authors(id, name) VALUES(?1, ?2)", -1, &st, NULL),
	      "prepare");
	for (i = 1; i <= 50; i++) {
		char name[32];

		snprintf(name, sizeof(name), "Author %d", i);
		sqlite3_bind_int(st, 1, i);
		sqlite3_bind_text(st, 2, name, -1, SQLITE_TRANSIENT);
		check(sqlite3_step(st), "insert author");
		sqlite3_reset(st);
	}
	sqlite3_finalize(st);
	check(sqlite3_prepare_v2(db,
				 "INSERT INTO books(author_id, title, year, price) VALUES(?1, ?2, ?3, ?4)",
				 -1, &st, NULL), "prepare");
	for (i = 0; i < nbooks; i++) {
		char title[32];

		snprintf(title, sizeof(title), "Book %d", i);
		sqlite3_bind_int(st, 1, 1 + i % 50);
		sqlite3_bind_text(st, 2, title, -1, SQLITE_TRANSIENT);
		sqlite3_bind_int(st, 3, 1950 + i % 70);
		sqlite3_bind_double(st, 4, 5.0 + (i % 40));
		check(sqlite3_step(st), "insert book");
		sqlite3_reset(st);
	}
	sqlite3_finalize(st);
	check(sqlite3_exec(db, "COMMIT", NULL, NULL, NULL), "commit");
}

/* N+1: one query for the list, then one query per row for its author. */
static double list_books_with_authors(int year)
{
	sqlite3_stmt *list, *author;
	double total = 0;

	check(sqlite3_prepare_v2(db, "SELECT id, author_id, price FROM books WHERE year = ?1", -1,
				 &list, NULL), "prepare");
	check(sqlite3_prepare_v2(db, "SELECT name FROM authors WHERE id = ?1", -1, &author, NULL),
	      "prepare");
	sqlite3_bind_int(list, 1, year);
	while (sqlite3_step(list) == SQLITE_ROW) {
		sqlite3_bind_int(author, 1, sqlite3_column_int(list, 1));
		if (sqlite3_step(author) == SQLITE_ROW)
			total += sqlite3_column_double(list, 2);
		sqlite3_reset(author);
	}
	sqlite3_finalize(author);
	sqlite3_finalize(list);
	return total;
}

/* Re-prepared on every call instead of kept. */
static int count_by_author(int author_id)
{
	sqlite3_stmt *st;
	int n = 0;

	check(sqlite3_prepare_v2(db, "SELECT count(*) FROM books WHERE author_id = ?1", -1, &st, NULL),
	      "prepare");
	sqlite3_bind_int(st, 1, author_id);
	if (sqlite3_step(st) == SQLITE_ROW)
		n = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	return n;
}

/* A title search: LIKE with a leading wildcard scans the table. */
static int search_titles(const char *pattern)
{
	sqlite3_stmt *st;
	int n = 0;

	check(sqlite3_prepare_v2(db, "SELECT id FROM books WHERE title LIKE ?1 ORDER BY price", -1,
				 &st, NULL), "prepare");
	sqlite3_bind_text(st, 1, pattern, -1, SQLITE_STATIC);
	while (sqlite3_step(st) == SQLITE_ROW)
		n++;
	sqlite3_finalize(st);
	return n;
}

int main(int argc, char **argv)
{
	int nbooks = argc > 1 ? atoi(argv[1]) : 20000, i, n = 0;
	double total = 0;

	check(sqlite3_open(":memory:", &db), "open");
	load_catalog(nbooks);
	for (i = 0; i < 5; i++)
		total += list_books_with_authors(1960 + i);
	for (i = 1; i <= 50; i++)
		n += count_by_author(i);
	for (i = 0; i < 20; i++)
		n += search_titles("%7%");
	/* a duplicate key: the report lists it with its backtrace */
	if (sqlite3_exec(db, "INSERT INTO authors(id, name) VALUES(1, 'again')", NULL, NULL, NULL) !=
	    SQLITE_CONSTRAINT)
		return 1;
	sqlite3_close(db);
	printf("demo: total %.0f, %d rows counted\n", total, n);
	return 0;
}
