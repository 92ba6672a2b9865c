/* SPDX-License-Identifier: MIT */
/*
 * shop.c - a small shop as a new user writes it, for the doctor and the
 * gate (issue 27, tests/integration/t_gate_fix.sh and t_doctor_loops.sh).
 * Usage:
 *
 *   shop MODE
 *
 *   slow     the schema in one sqlite3_exec, 80,000 orders, then per
 *            customer (60) SELECT sum(amount) FROM orders WHERE
 *            customer_id = ?: an N+1 whose every execution scans the
 *            table (slow: milliseconds each)
 *   indexed  the same, with the doctor's advice applied: CREATE INDEX
 *            orders_customer_id ON orders(customer_id) in the schema exec
 *   orm      per post (150), the author's name and the post's comment
 *            count, interleaved (two statements per row of the outer
 *            loop, as an ORM's lazy loading issues them)
 *
 * In memory, deterministic data; prints a checksum; exits 1 on a SQLite
 * error, 2 on usage.
 */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CUSTOMERS 60
#define ORDERS 80000
#define POSTS 150

static sqlite3 *db;

static void die(const char *what)
{
	fprintf(stderr, "shop: %s: %s\n", what, sqlite3_errmsg(db));
	exit(1);
}

static sqlite3_stmt *prep(const char *sql)
{
	sqlite3_stmt *st;

	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		die(sql);
	return st;
}

/* Step st (one integer bound to ?1) to its end; sum of column 0; reset. */
static long long run(sqlite3_stmt *st, long long v)
{
	long long sum = 0;
	int rc;

	sqlite3_bind_int64(st, 1, v);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW)
		sum += sqlite3_column_int64(st, 0);
	if (rc != SQLITE_DONE)
		die("step");
	sqlite3_reset(st);
	return sum;
}

static void fill(int indexed)
{
	sqlite3_stmt *c, *o;
	unsigned seed = 4242;
	int i;

	if (sqlite3_exec(db,
			 indexed ? "CREATE TABLE customers(id INTEGER PRIMARY KEY, name TEXT);"
				   "CREATE TABLE orders(id INTEGER PRIMARY KEY, customer_id INTEGER,"
				   " amount INTEGER);"
				   "CREATE INDEX orders_customer_id ON orders(customer_id);"
				 : "CREATE TABLE customers(id INTEGER PRIMARY KEY, name TEXT);"
				   "CREATE TABLE orders(id INTEGER PRIMARY KEY, customer_id INTEGER,"
				   " amount INTEGER);",
			 NULL, NULL, NULL) != SQLITE_OK)
		die("schema");
	sqlite3_exec(db, "BEGIN", NULL, NULL, NULL);
	c = prep("INSERT INTO customers(id, name) VALUES (?1, 'customer')");
	for (i = 1; i <= CUSTOMERS; i++)
		run(c, i);
	o = prep("INSERT INTO orders(customer_id, amount) VALUES (?1, 7)");
	for (i = 0; i < ORDERS; i++) {
		seed = seed * 1103515245u + 12345u;
		run(o, 1 + (seed >> 16) % CUSTOMERS);
	}
	sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
	sqlite3_finalize(c);
	sqlite3_finalize(o);
}

static long long shop(void)
{
	sqlite3_stmt *l = prep("SELECT id FROM customers ORDER BY id");
	sqlite3_stmt *t = prep("SELECT sum(amount) FROM orders WHERE customer_id = ?1");
	long long sum = 0;

	while (sqlite3_step(l) == SQLITE_ROW)
		sum += run(t, sqlite3_column_int64(l, 0));
	sqlite3_finalize(l);
	sqlite3_finalize(t);
	return sum;
}

static long long blog(void)
{
	sqlite3_stmt *p, *a, *n;
	long long sum = 0;
	int i;

	if (sqlite3_exec(db,
			 "CREATE TABLE authors(id INTEGER PRIMARY KEY, name TEXT);"
			 "CREATE TABLE posts(id INTEGER PRIMARY KEY, author_id INTEGER, title TEXT);"
			 "CREATE TABLE comments(id INTEGER PRIMARY KEY, post_id INTEGER, body TEXT);"
			 "CREATE INDEX comments_post ON comments(post_id);",
			 NULL, NULL, NULL) != SQLITE_OK)
		die("schema");
	sqlite3_exec(db, "BEGIN", NULL, NULL, NULL);
	a = prep("INSERT INTO authors(id, name) VALUES (?1, 'author')");
	for (i = 1; i <= 20; i++)
		run(a, i);
	sqlite3_finalize(a);
	p = prep("INSERT INTO posts(id, author_id, title) VALUES (?1, ?1 % 20 + 1, 'post')");
	for (i = 1; i <= POSTS; i++)
		run(p, i);
	sqlite3_finalize(p);
	n = prep("INSERT INTO comments(post_id, body) VALUES (?1 % 150 + 1, 'comment')");
	for (i = 0; i < 1000; i++)
		run(n, i);
	sqlite3_finalize(n);
	sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
	p = prep("SELECT id, author_id FROM posts ORDER BY id");
	a = prep("SELECT length(name) FROM authors WHERE id = ?1");
	n = prep("SELECT count(*) FROM comments WHERE post_id = ?1");
	while (sqlite3_step(p) == SQLITE_ROW) {
		sum += run(a, sqlite3_column_int64(p, 1));
		sum += run(n, sqlite3_column_int64(p, 0));
	}
	sqlite3_finalize(p);
	sqlite3_finalize(a);
	sqlite3_finalize(n);
	return sum;
}

int main(int argc, char **argv)
{
	long long sum;

	if (argc != 2 || (strcmp(argv[1], "slow") && strcmp(argv[1], "indexed") &&
			  strcmp(argv[1], "orm"))) {
		fprintf(stderr, "usage: shop slow|indexed|orm\n");
		return 2;
	}
	if (sqlite3_open(":memory:", &db) != SQLITE_OK)
		die("open");
	if (!strcmp(argv[1], "orm")) {
		sum = blog();
	} else {
		fill(!strcmp(argv[1], "indexed"));
		sum = shop();
	}
	printf("%lld\n", sum);
	sqlite3_close(db);
	return 0;
}
