/* SPDX-License-Identifier: MIT */
/*
 * prepare_variants.c - every sqlite3_prepare* variant, each preparing its
 * own statement and stepping it N times (argv[1], default 100): the
 * legacy sqlite3_prepare with a tail (two statements in one string),
 * _v2, _v3, and the UTF-16 three. Prints each statement's row sum, so
 * that a run under sqlprof can be compared with a bare one.
 */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static sqlite3 *db;

static void die(const char *what)
{
	fprintf(stderr, "prepare_variants: %s: %s\n", what, sqlite3_errmsg(db));
	exit(1);
}

/* Steps st n times to the end (reset between), returns the sum of column 0. */
static long long run_n(sqlite3_stmt *st, int n)
{
	long long sum = 0;

	for (int i = 0; i < n; i++) {
		while (sqlite3_step(st) == SQLITE_ROW)
			sum += sqlite3_column_int64(st, 0);
		sqlite3_reset(st);
	}
	sqlite3_finalize(st);
	return sum;
}

/* The UTF-16 (native order) copy of an ASCII string. */
static void *utf16(const char *s)
{
	size_t n = strlen(s);
	unsigned short *w = calloc(n + 1, sizeof(*w));

	if (!w)
		exit(1);
	for (size_t i = 0; i < n; i++)
		w[i] = (unsigned char)s[i];
	return w;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 100;
	const char *two = "SELECT 1 AS legacy_a; SELECT 2 AS legacy_b", *tail = NULL;
	const char *u16 = "SELECT 4 AS utf16_legacy", *u16v2 = "SELECT 5 AS utf16_v2",
		   *u16v3 = "SELECT 6 AS utf16_v3";
	const void *t16 = NULL;
	sqlite3_stmt *st;
	void *w;

	if (sqlite3_open(":memory:", &db) != SQLITE_OK)
		die("open");
	if (sqlite3_prepare(db, two, -1, &st, &tail) != SQLITE_OK || !tail)
		die("prepare");
	printf("legacy_a %lld\n", run_n(st, n));
	if (sqlite3_prepare(db, tail, -1, &st, NULL) != SQLITE_OK)
		die("prepare tail");
	printf("legacy_b %lld\n", run_n(st, n));
	if (sqlite3_prepare_v2(db, "SELECT 3 AS v2", -1, &st, NULL) != SQLITE_OK)
		die("prepare_v2");
	printf("v2 %lld\n", run_n(st, n));
	if (sqlite3_prepare_v3(db, "SELECT 7 AS v3", -1, SQLITE_PREPARE_PERSISTENT, &st, NULL) !=
	    SQLITE_OK)
		die("prepare_v3");
	printf("v3 %lld\n", run_n(st, n));
	w = utf16(u16);
	if (sqlite3_prepare16(db, w, -1, &st, &t16) != SQLITE_OK)
		die("prepare16");
	printf("utf16_legacy %lld\n", run_n(st, n));
	free(w);
	w = utf16(u16v2);
	if (sqlite3_prepare16_v2(db, w, -1, &st, &t16) != SQLITE_OK)
		die("prepare16_v2");
	printf("utf16_v2 %lld\n", run_n(st, n));
	free(w);
	w = utf16(u16v3);
	if (sqlite3_prepare16_v3(db, w, -1, 0, &st, &t16) != SQLITE_OK)
		die("prepare16_v3");
	printf("utf16_v3 %lld\n", run_n(st, n));
	free(w);
	sqlite3_close(db);
	return 0;
}
