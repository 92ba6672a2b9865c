/* SPDX-License-Identifier: MIT */
/*
 * check_untrusted.c - unit tests for reading untrusted input safely
 * (report/profile/untrusted.c, and the terminal-safe strings and streams of
 * report/util.c). Tested: a database opened by sp_untrusted_open cannot
 * be written, runs no view, refuses a view, a virtual table or generated
 * columns under a table's name, and stops a statement that would run for
 * ever at its work budget with SQLITE_INTERRUPT (sp_untrusted_exhausted
 * then names the file); sp_term_clean and sp_term_stream let no control
 * character or stray byte through, keep valid UTF-8, also cut across
 * writes.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "untrusted.h"
#include "util.h"

static char dbpath[64];

/* A fresh database at dbpath made of sql. */
static void make_db(const char *sql)
{
	sqlite3 *db;

	snprintf(dbpath, sizeof(dbpath), "/tmp/check_untrusted.%d.db", (int)getpid());
	unlink(dbpath);
	ck_assert_int_eq(sqlite3_open(dbpath, &db), SQLITE_OK);
	ck_assert_msg(sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK, "%s",
		      sqlite3_errmsg(db));
	sqlite3_close(db);
}

static const char *const tables[] = { "meta", "queries", NULL };

static sqlite3 *open_it(char *err, size_t errlen)
{
	struct stat sb;

	ck_assert_int_eq(stat(dbpath, &sb), 0);
	return sp_untrusted_open(dbpath, 0, sb.st_size, tables, err, errlen);
}

START_TEST(test_read_only)
{
	char err[256] = "";
	sqlite3 *db;

	make_db("CREATE TABLE meta(key, value); CREATE TABLE other(a);"
		"CREATE VIEW v AS SELECT 1;");
	db = open_it(err, sizeof(err));
	ck_assert_msg(db != NULL, "%s", err);
	ck_assert_int_eq(sqlite3_exec(db, "INSERT INTO meta VALUES (1, 2)", NULL, NULL, NULL) &
				 0xff,
			 SQLITE_READONLY);
	/* views are off, even those not named like a table of ours */
	ck_assert_int_ne(sqlite3_exec(db, "SELECT * FROM v", NULL, NULL, NULL), SQLITE_OK);
	ck_assert_int_eq(sqlite3_exec(db, "SELECT * FROM other", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	unlink(dbpath);
}
END_TEST

START_TEST(test_refused)
{
	static const struct {
		const char *sql, *why;
	} c[] = {
		{ "CREATE TABLE m0(key, value); CREATE VIEW meta AS SELECT * FROM m0;",
		  "meta is a view" },
		{ "CREATE VIEW QUERIES AS SELECT 1 AS fp_id;", "QUERIES is a view" },
		{ "CREATE VIRTUAL TABLE queries USING fts5(a);", "queries is a virtual table" },
		{ "CREATE TABLE queries(a, b GENERATED ALWAYS AS (a + 1));", "generated columns" },
	};
	char err[256];
	size_t i;

	for (i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		sqlite3 *db;

		make_db(c[i].sql);
		err[0] = 0;
		db = open_it(err, sizeof(err));
		ck_assert_msg(db == NULL, "case %zu accepted", i);
		ck_assert_msg(strstr(err, c[i].why) != NULL, "case %zu: %s", i, err);
		unlink(dbpath);
	}
}
END_TEST

START_TEST(test_budget)
{
	char err[512] = "";
	sqlite3 *db;
	sqlite3_stmt *st;
	struct timespec a, b;
	double s;

	make_db("CREATE TABLE meta(key, value);");
	ck_assert_int_eq(sp_untrusted_exhausted(err, sizeof(err)), 0);
	db = open_it(err, sizeof(err));
	ck_assert_msg(db != NULL, "%s", err);
	ck_assert_int_eq(
		sqlite3_prepare_v2(db,
				   "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1"
				   " FROM r) SELECT max(n) FROM r",
				   -1, &st, NULL),
		SQLITE_OK);
	clock_gettime(CLOCK_MONOTONIC, &a);
	ck_assert_int_eq(sqlite3_step(st), SQLITE_INTERRUPT);
	clock_gettime(CLOCK_MONOTONIC, &b);
	s = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
	fprintf(stderr, "budget of a %s: stopped after %.2f s\n", dbpath, s);
	sqlite3_finalize(st);
	ck_assert_int_eq(sp_untrusted_exhausted(err, sizeof(err)), 1);
	ck_assert_msg(strstr(err, dbpath) == err, "%s", err);
	/* every later statement fails at once */
	ck_assert_int_eq(
		sqlite3_exec(db,
			     "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r"
			     " LIMIT 10000) SELECT count(*) FROM r",
			     NULL, NULL, NULL),
		SQLITE_INTERRUPT);
	sqlite3_close(db);
	unlink(dbpath);
}
END_TEST

START_TEST(test_term_clean)
{
	char s[] = "a\x1b[31mb\x07"
		   "c\td\ne\x7f"
		   "f\xc2\x9b"
		   "1m\x9b"
		   "g\xc3\xa9h\xe2\x82\xac\xff";

	sp_term_clean(s);
	ck_assert_str_eq(s, "a?[31mb?c d e?f?1m?g\xc3\xa9h\xe2\x82\xac?");
}
END_TEST

START_TEST(test_term_stream)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *mem = open_memstream(&buf, &len), *t;

	ck_assert_ptr_nonnull(mem);
	t = sp_term_stream(mem);
	ck_assert_ptr_nonnull(t);
	setvbuf(t, NULL, _IONBF, 0);
	fputs("x\x1b]0;t\x07y\n\tz\r", t);
	fputs("\xe2\x82", t); /* a euro sign cut in two writes */
	fputs("\xac.\xc2", t);
	fputs("\x9b.\xe2", t); /* C1, then a sequence the output ends in */
	ck_assert_int_eq(fclose(t), 0);
	fclose(mem);
	ck_assert_str_eq(buf, "x?]0;t?y\n\tz?\xe2\x82\xac.?.?");
	free(buf);
}
END_TEST

static Suite *untrusted_suite(void)
{
	Suite *s = suite_create("untrusted");
	TCase *tc = tcase_create("open");

	tcase_add_test(tc, test_read_only);
	tcase_add_test(tc, test_refused);
	suite_add_tcase(s, tc);

	tc = tcase_create("budget");
	tcase_set_timeout(tc, 120); /* the floor is seconds of VM work */
	tcase_add_test(tc, test_budget);
	suite_add_tcase(s, tc);

	tc = tcase_create("terminal");
	tcase_add_test(tc, test_term_clean);
	tcase_add_test(tc, test_term_stream);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(untrusted_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
