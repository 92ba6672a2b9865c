/* SPDX-License-Identifier: MIT */
/*
 * autoext.c - a program that registers an automatic extension
 * (sqlite3_auto_extension) and then opens one connection, for
 * tests/integration/t_probe_invisible.sh: SQLite calls the extension once
 * per connection opened, so it must run exactly once - the profiler's
 * private probe connection must not run it. Prints the calls and the
 * connections each saw, then the query's result.
 */
#include <sqlite3.h>
#include <stdio.h>

static int calls;
static sqlite3 *seen[8];

static int entry(sqlite3 *db, const char **err, const struct sqlite3_api_routines *api)
{
	(void)err, (void)api;
	if (calls < 8)
		seen[calls] = db;
	calls++;
	return SQLITE_OK;
}

int main(void)
{
	sqlite3 *db;
	sqlite3_stmt *st;
	int v = -1;

	if (sqlite3_auto_extension((void (*)(void))entry) != SQLITE_OK)
		return 2;
	if (sqlite3_open(":memory:", &db) != SQLITE_OK)
		return 2;
	if (sqlite3_prepare_v2(db, "SELECT 6 * 7", -1, &st, NULL) != SQLITE_OK)
		return 2;
	if (sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	printf("auto extension called %d time(s)", calls);
	for (int i = 0; i < calls && i < 8; i++)
		printf(", %s", seen[i] == db ? "on the program's connection" : "on another connection");
	printf("; result %d\n", v);
	sqlite3_close(db);
	return 0;
}
