/* SPDX-License-Identifier: MIT */
/*
 * params_cases.c - statements run with repeated or distinct bound values,
 * for the doctor's duplicate rule and the bound values' hash
 * (t_params_hash.sh). Usage: params_cases CASE, where CASE is
 *
 *   repeat    SELECT ?1 || ?2, ?3, ?4 (text, integer, blob, real) with the
 *             same four values, 200 times
 *   distinct  the same statement with 200 distinct integers, the rest equal
 *   typed     SELECT typeof(?1), ?2 200 times, no two with the same
 *             values: ?2 counts 0, 0, ... (8 times each) up to 24, and ?1
 *             takes 8 values that look alike: 1, '1', 1.0, x'31', NULL,
 *             '', x'' and zeroblob(0)
 *   near      SELECT ?1 * 2 with 200 distinct reals 0.3, 0.3 + 1 ulp, ...:
 *             all "0.3" to 15 significant digits, as sqlite3_expanded_sql
 *             writes them
 *   long      SELECT length(?1) with 200 distinct 5000-byte texts that
 *             differ only in their last bytes
 *   none      SELECT 40 + 2 AS answer (no parameters) and SELECT ?1 * 3
 *             with 200 distinct integers, in turn, 200 times each
 *
 * Deterministic; prints "ok"; exits 1 on a SQLite error, 2 on usage.
 */
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static sqlite3 *db;

static void die(const char *what)
{
	fprintf(stderr, "params_cases: %s: %s\n", what, sqlite3_errmsg(db));
	exit(1);
}

static sqlite3_stmt *prep(const char *sql)
{
	sqlite3_stmt *st;

	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		die(sql);
	return st;
}

static void run(sqlite3_stmt *st)
{
	int rc;

	while ((rc = sqlite3_step(st)) == SQLITE_ROW)
		;
	if (rc != SQLITE_DONE)
		die("step");
	sqlite3_reset(st);
}

int main(int argc, char **argv)
{
	static const unsigned char blob[5] = { 1, 2, 0, 4, 5 };
	const char *c = argc == 2 ? argv[1] : "";
	sqlite3_stmt *st;
	int i;

	if (sqlite3_open(":memory:", &db) != SQLITE_OK)
		die("open");
	if (!strcmp(c, "repeat") || !strcmp(c, "distinct")) {
		st = prep("SELECT ?1 || ?2, ?3, ?4");
		for (i = 0; i < 200; i++) {
			sqlite3_bind_text(st, 1, "customer-", -1, SQLITE_STATIC);
			sqlite3_bind_int64(st, 2, !strcmp(c, "repeat") ? 42 : i);
			sqlite3_bind_blob(st, 3, blob, sizeof(blob), SQLITE_STATIC);
			sqlite3_bind_double(st, 4, 2.5);
			run(st);
		}
	} else if (!strcmp(c, "typed")) {
		/* 200 executions, each (?1, ?2) distinct: ?2 counts up to 25
		 * and ?1 takes 8 values whose text is the same or empty */
		st = prep("SELECT typeof(?1), ?2");
		for (i = 0; i < 200; i++) {
			switch (i % 8) {
			case 0: sqlite3_bind_int64(st, 1, 1); break;
			case 1: sqlite3_bind_text(st, 1, "1", 1, SQLITE_STATIC); break;
			case 2: sqlite3_bind_double(st, 1, 1.0); break;
			case 3: sqlite3_bind_blob(st, 1, "1", 1, SQLITE_STATIC); break;
			case 4: sqlite3_bind_null(st, 1); break;
			case 5: sqlite3_bind_text(st, 1, "", 0, SQLITE_STATIC); break;
			case 6: sqlite3_bind_blob(st, 1, "", 0, SQLITE_STATIC); break;
			default: sqlite3_bind_zeroblob(st, 1, 0); break;
			}
			sqlite3_bind_int64(st, 2, i / 8);
			run(st);
		}
	} else if (!strcmp(c, "near")) {
		double v = 0.3;

		st = prep("SELECT ?1 * 2");
		for (i = 0; i < 200; i++) {
			uint64_t bits;

			sqlite3_bind_double(st, 1, v);
			run(st);
			memcpy(&bits, &v, sizeof(bits)); /* the next double up */
			bits++;
			memcpy(&v, &bits, sizeof(v));
		}
	} else if (!strcmp(c, "long")) {
		char text[5000];

		memset(text, 'x', sizeof(text));
		st = prep("SELECT length(?1)");
		for (i = 0; i < 200; i++) {
			snprintf(text + sizeof(text) - 4, 4, "%03d", i); /* its last 3 bytes */
			sqlite3_bind_text(st, 1, text, (int)sizeof(text) - 1, SQLITE_TRANSIENT);
			run(st);
		}
	} else if (!strcmp(c, "none")) {
		sqlite3_stmt *other = prep("SELECT ?1 * 3");

		st = prep("SELECT 40 + 2 AS answer");
		for (i = 0; i < 200; i++) {
			run(st);
			sqlite3_bind_int64(other, 1, i);
			run(other);
		}
		sqlite3_finalize(other);
	} else {
		fprintf(stderr, "usage: params_cases repeat|distinct|typed|near|long|none\n");
		return 2;
	}
	sqlite3_finalize(st);
	sqlite3_close(db);
	printf("ok\n");
	return 0;
}
