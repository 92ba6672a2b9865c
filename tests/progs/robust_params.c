/* SPDX-License-Identifier: MIT */
/*
 * robust_params.c - bound parameter values that must never reach a
 * profile, and SQL texts that need escaping, for
 * tests/integration/t_robust_security.sh.
 *
 * usage: robust_params TEXTS_FILE
 * Binds marker values that appear nowhere in any SQL text (a text, an
 * integer, a blob and a real) to INSERTs, SELECTs, an UPDATE, a LIKE and
 * a failing INSERT (UNIQUE constraint, so the error path runs with them
 * bound), and runs statements whose own text holds quotes, backslashes,
 * newlines, tabs, control characters, HTML metacharacters, CSV separators,
 * a leading '=', UTF-8 and a byte that is not UTF-8. It writes each of
 * those texts to TEXTS_FILE, each followed by a NUL byte, so the test can
 * compare them with what the reports print. Exits 0.
 */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SECRET_TEXT "SQLPROF_SECRET_TEXT_7f3a9c"
#define SECRET_INT 9137428851234LL /* digits found nowhere else */
#define SECRET_BLOB "SQLPROF_SECRET_BLOB_51e2"
#define SECRET_REAL 27182.8182846  /* printed as 27182.8182846 */

static sqlite3 *db;

static void die(const char *what)
{
	fprintf(stderr, "robust_params: %s: %s\n", what, sqlite3_errmsg(db));
	exit(1);
}

static sqlite3_stmt *prep(const char *sql)
{
	sqlite3_stmt *st;

	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		die(sql);
	return st;
}

static void bind_all(sqlite3_stmt *st)
{
	sqlite3_bind_text(st, 1, SECRET_TEXT, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, SECRET_INT);
	sqlite3_bind_blob(st, 3, SECRET_BLOB, (int)strlen(SECRET_BLOB), SQLITE_STATIC);
	sqlite3_bind_double(st, 4, SECRET_REAL);
}

static int step_all(sqlite3_stmt *st)
{
	int rc;

	while ((rc = sqlite3_step(st)) == SQLITE_ROW)
		;
	sqlite3_reset(st);
	return rc;
}

static const char *const weird[] = {
	"SELECT 'double \" quote', 'single '' quote', 'back\\slash' AS \"we\"\"ird\"",
	"SELECT 'new\nline', 'carriage\rreturn', 'tab\there' AS \"multi\nline\tname\"",
	"SELECT 'ctl \x01\x02\x1b[31m\x1f\x7f' AS \"ctl\x01name\"",
	"SELECT '</script><script>alert(1)</script>', 'a&b', '<!--' AS \"<html>&amp;\"",
	"SELECT 'comma,semi;colon', '\"quoted\",field' AS \"a,b\" /* comment, with \"quotes\" */",
	"SELECT '=HYPERLINK(\"http://x\")' AS \"=cmd|' /C calc'!A0\"",
	"SELECT 'caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80' AS \"\xc3\xa9t\xc3\xa9\"",
	"SELECT 'not utf-8: \xff\xfe\xc3' AS \"bad\xffname\"",
};

int main(int argc, char **argv)
{
	sqlite3_stmt *ins, *sel, *upd, *like, *st;
	FILE *f;
	size_t i;

	if (argc < 2) {
		fprintf(stderr, "usage: robust_params TEXTS_FILE\n");
		return 2;
	}
	if (sqlite3_open(":memory:", &db) != SQLITE_OK)
		die("open");
	if (sqlite3_exec(db, "CREATE TABLE t(a TEXT UNIQUE, b INTEGER, c BLOB, d REAL)", NULL, NULL,
			 NULL) != SQLITE_OK)
		die("create");
	ins = prep("INSERT INTO t(a, b, c, d) VALUES (?1, ?2, ?3, ?4)");
	bind_all(ins);
	if (step_all(ins) != SQLITE_DONE)
		die("insert");
	/* The same values again: UNIQUE constraint failed, with them bound. */
	if (step_all(ins) == SQLITE_DONE)
		die("the duplicate insert succeeded");
	sel = prep("SELECT count(*) FROM t WHERE a = ?1 OR b = ?2 OR c = ?3 OR d = ?4");
	upd = prep("UPDATE t SET d = ?4 + 1 WHERE a = ?1 AND b = ?2 AND c = ?3");
	for (int k = 0; k < 50; k++) {
		bind_all(sel);
		step_all(sel);
		bind_all(upd);
		step_all(upd);
	}
	like = prep("SELECT count(*) FROM t WHERE a LIKE ?1");
	sqlite3_bind_text(like, 1, SECRET_TEXT "%", -1, SQLITE_STATIC);
	step_all(like);
	sqlite3_finalize(ins);
	sqlite3_finalize(sel);
	sqlite3_finalize(upd);
	sqlite3_finalize(like);

	f = fopen(argv[1], "wb");
	if (!f) {
		perror(argv[1]);
		return 1;
	}
	for (i = 0; i < sizeof(weird) / sizeof(weird[0]); i++) {
		st = prep(weird[i]);
		if (step_all(st) != SQLITE_DONE)
			die(weird[i]);
		sqlite3_finalize(st);
		fwrite(weird[i], 1, strlen(weird[i]) + 1, f);
	}
	fclose(f);
	sqlite3_close(db);
	return 0;
}
