/* SPDX-License-Identifier: MIT */
/*
 * gate_app.c - the CI gate's fixture: one small "application" whose mode
 * argument plants one regression on purpose, for tests/integration/t_gate.sh.
 *
 *   clean       the reference workload
 *   dropindex   orders_user is not created: order_total's SEARCH becomes a SCAN
 *   nplus1      order_total runs once per team member instead of once
 *   reprepare   user_name prepares and finalizes its statement on every call
 *   extraquery  one extra query (count of audit rows)
 *
 * Everything is deterministic (in-memory database, fixed data), so two runs
 * of one mode give identical counts, rows, VM steps and plans. Prints a
 * checksum; exits 2 on an unknown mode, 1 on a SQLite error.
 */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define USERS 200
#define ORDERS_PER_USER 10
#define TEAMS 10

static sqlite3 *db;
static const char *mode = "clean";

static void die(const char *what)
{
	fprintf(stderr, "gate_app: %s: %s\n", what, sqlite3_errmsg(db));
	exit(1);
}

static sqlite3_stmt *prep(const char *sql)
{
	sqlite3_stmt *st;

	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		die(sql);
	return st;
}

static void exec(const char *sql)
{
	if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK)
		die(sql);
}

static void setup(void)
{
	sqlite3_stmt *u, *o;
	unsigned seed = 12345;
	int i, j;

	exec("CREATE TABLE users(id INTEGER PRIMARY KEY, name TEXT, team INTEGER)");
	exec("CREATE TABLE orders(id INTEGER PRIMARY KEY, user_id INTEGER, amount INTEGER)");
	exec("CREATE TABLE audit(id INTEGER PRIMARY KEY, user_id INTEGER, what TEXT)");
	if (strcmp(mode, "dropindex"))
		exec("CREATE INDEX orders_user ON orders(user_id)");
	exec("BEGIN");
	u = prep("INSERT INTO users(id, name, team) VALUES (?1, ?2, ?3)");
	o = prep("INSERT INTO orders(user_id, amount) VALUES (?1, ?2)");
	for (i = 1; i <= USERS; i++) {
		char name[32];

		snprintf(name, sizeof(name), "user%03d", i);
		sqlite3_bind_int(u, 1, i);
		sqlite3_bind_text(u, 2, name, -1, SQLITE_TRANSIENT);
		sqlite3_bind_int(u, 3, i % TEAMS);
		if (sqlite3_step(u) != SQLITE_DONE)
			die("insert user");
		sqlite3_reset(u);
	}
	/* orders interleaved across users, so that a scan really is a scan */
	for (j = 0; j < ORDERS_PER_USER; j++)
		for (i = 1; i <= USERS; i++) {
			seed = seed * 1103515245u + 12345u;
			sqlite3_bind_int(o, 1, i);
			sqlite3_bind_int(o, 2, (int)(seed >> 16) % 1000);
			if (sqlite3_step(o) != SQLITE_DONE)
				die("insert order");
			sqlite3_reset(o);
		}
	sqlite3_finalize(u);
	sqlite3_finalize(o);
	exec("COMMIT");
}

/* One user's order total: a cached statement, reset between calls. */
static sqlite3_stmt *total_st;

__attribute__((noinline)) static long order_total(int user)
{
	long v = 0;

	if (!total_st)
		total_st = prep("SELECT sum(amount) FROM orders WHERE user_id = ?1");
	sqlite3_bind_int(total_st, 1, user);
	if (sqlite3_step(total_st) == SQLITE_ROW)
		v = sqlite3_column_int64(total_st, 0);
	sqlite3_reset(total_st);
	return v;
}

/* A user's name: cached, except in reprepare mode. */
static sqlite3_stmt *name_st;

__attribute__((noinline)) static long user_name(int user)
{
	sqlite3_stmt *st = name_st;
	long v = 0;

	if (!st)
		st = prep("SELECT name FROM users WHERE id = ?1");
	sqlite3_bind_int(st, 1, user);
	if (sqlite3_step(st) == SQLITE_ROW)
		v = (long)strlen((const char *)sqlite3_column_text(st, 0));
	sqlite3_reset(st);
	if (!strcmp(mode, "reprepare"))
		sqlite3_finalize(st);
	else
		name_st = st;
	return v;
}

__attribute__((noinline)) static void audit(int user, const char *what)
{
	static sqlite3_stmt *st;

	if (!st)
		st = prep("INSERT INTO audit(user_id, what) VALUES (?1, ?2)");
	sqlite3_bind_int(st, 1, user);
	sqlite3_bind_text(st, 2, what, -1, SQLITE_STATIC);
	if (sqlite3_step(st) != SQLITE_DONE)
		die("audit");
	sqlite3_reset(st);
}

/* The team page: members, then the totals shown on it. */
__attribute__((noinline)) static long team_page(int team)
{
	sqlite3_stmt *st = prep("SELECT id, name FROM users WHERE team = ?1 ORDER BY id");
	int ids[USERS], n = 0, i;
	long sum = 0;

	sqlite3_bind_int(st, 1, team);
	while (sqlite3_step(st) == SQLITE_ROW && n < USERS)
		ids[n++] = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	if (!strcmp(mode, "nplus1")) {
		/* the planted N+1: one query per member */
		for (i = 0; i < n; i++)
			sum += order_total(ids[i]);
	} else if (n > 0) {
		/* the reference: only the team lead's total */
		sum += order_total(ids[0]);
	}
	return sum + n;
}

int main(int argc, char **argv)
{
	long sum = 0;
	int i;

	if (argc > 1)
		mode = argv[1];
	if (strcmp(mode, "clean") && strcmp(mode, "dropindex") && strcmp(mode, "nplus1") &&
	    strcmp(mode, "reprepare") && strcmp(mode, "extraquery")) {
		fprintf(stderr, "usage: gate_app [clean|dropindex|nplus1|reprepare|extraquery]\n");
		return 2;
	}
	if (sqlite3_open(":memory:", &db) != SQLITE_OK)
		die("open");
	setup();
	sum += team_page(3);
	/* names and audit rows, interleaved: never a run of one query */
	for (i = 1; i <= 50; i++) {
		sum += user_name(i);
		audit(i, "viewed");
	}
	if (!strcmp(mode, "extraquery")) {
		sqlite3_stmt *st = prep("SELECT count(*) FROM audit WHERE what = ?1");

		sqlite3_bind_text(st, 1, "viewed", -1, SQLITE_STATIC);
		if (sqlite3_step(st) == SQLITE_ROW)
			sum += sqlite3_column_int(st, 0);
		sqlite3_finalize(st);
	}
	sqlite3_finalize(total_st);
	sqlite3_finalize(name_st);
	sqlite3_close_v2(db);
	printf("gate_app %s: checksum %ld\n", mode, sum);
	return 0;
}
