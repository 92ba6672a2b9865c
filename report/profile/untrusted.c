/* SPDX-License-Identifier: MIT */
/*
 * untrusted.c - open a SQLite file from elsewhere without trusting it (see
 * untrusted.h). A profile is a database its author could have edited: a
 * view named like one of our tables can recurse for ever, a trigger or a
 * virtual table can run code, and the query planner believes the file's
 * statistics. So the connection is read-only and defensive, runs no
 * view, trigger or extension, and has a budget of work proportional to
 * the file's size, which no reader of a real profile comes near. What the
 * tables hold is still checked by every reader, row by row.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "untrusted.h"
#include "util.h"

const char *const sp_profile_tables[] = {
	"meta",       "processes",  "queries",          "runs",          "run_totals",
	"plans",      "histograms", "statements",       "stack_samples", "frames",
	"errors",     "events",     "modules",          "callers",       "schemas",
	"duplicates", "intervals",  "interval_queries", "plan_gaps",     NULL,
};

/* The work budget of one connection, in progress-handler calls. Owned by
 * the connection: freed by the destructor of a function registered with
 * it, which SQLite calls when the connection closes. */
struct budget {
	long long left, ops; /* calls left; the budget in VM instructions */
	char name[256];
};

#define STEP_OPS 1000 /* VM instructions between two progress-handler calls */

static char exhausted[400]; /* why the first database that ran out stopped */
static long long work_set;  /* SQLPROF_READ_WORK, 0 if not set */

int sp_untrusted_config(char *err, size_t errlen)
{
	const char *v = getenv("SQLPROF_READ_WORK");
	uint64_t n;

	work_set = 0;
	if (!v)
		return 0;
	if (sp_parse_u64(v, &n) < 0 || n < (uint64_t)SP_UNTRUSTED_MIN_WORK ||
	    n > (uint64_t)SP_UNTRUSTED_MAX_WORK) {
		snprintf(
			err, errlen,
			"SQLPROF_READ_WORK wants a number of SQLite VM instructions from %lld to %lld",
			SP_UNTRUSTED_MIN_WORK, SP_UNTRUSTED_MAX_WORK);
		return -1;
	}
	work_set = (long long)n;
	return 0;
}

static int on_progress(void *arg)
{
	struct budget *b = arg;

	if (b->left > 0) {
		b->left--;
		return 0;
	}
	if (!exhausted[0])
		snprintf(
			exhausted, sizeof(exhausted),
			"%s: reading it needs more than %lld SQLite VM instructions, %s; a hostile or"
			" damaged file? stopped",
			b->name, b->ops,
			work_set ? "the budget SQLPROF_READ_WORK sets"
				 : "far more than a profile of its size takes");
	return 1; /* SQLITE_INTERRUPT, for this and every later statement */
}

static void budget_fn(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
	sqlite3_result_null(ctx);
}

int sp_untrusted_exhausted(char *err, size_t errlen)
{
	if (!exhausted[0])
		return 0;
	snprintf(err, errlen, "%s", exhausted);
	sp_term_clean(err);
	return 1;
}

/* 0 when every object of db's main schema named like one of tables is an
 * ordinary table without generated columns; -1 with the reason in err. */
static int check_tables(sqlite3 *db, const char *const *tables, char *err, size_t errlen)
{
	sqlite3_stmt *st = NULL, *cols = NULL;
	size_t i;
	int rc = -1, r;

	if (sqlite3_prepare_v2(db,
			       "SELECT type, name, rootpage, sql LIKE 'CREATE TABLE%' FROM"
			       " main.sqlite_schema WHERE lower(name) = lower(?1)",
			       -1, &st, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(db, "SELECT count(*) FROM pragma_table_xinfo(?1) WHERE hidden <> 0",
			       -1, &cols, NULL) != SQLITE_OK) {
		snprintf(err, errlen, "not a sqlprof profile (%s)", sqlite3_errmsg(db));
		goto out;
	}
	for (i = 0; tables[i]; i++) {
		sqlite3_bind_text(st, 1, tables[i], -1, SQLITE_STATIC);
		while ((r = sqlite3_step(st)) == SQLITE_ROW) {
			const char *type = (const char *)sqlite3_column_text(st, 0);
			const char *name = (const char *)sqlite3_column_text(st, 1);

			if (!type || strcmp(type, "table") || sqlite3_column_int64(st, 2) <= 0 ||
			    !sqlite3_column_int(st, 3)) {
				const char *what = type && !strcmp(type, "table") ? "virtual table"
						   : type                         ? type
							  : "schema entry without a type";

				snprintf(
					err, errlen,
					"not a sqlprof profile (%.64s is a%s %.32s, not a plain table)",
					name ? name : tables[i],
					what[0] && strchr("aeiou", what[0]) ? "n" : "", what);
				goto out;
			}
		}
		if (r != SQLITE_DONE) {
			snprintf(err, errlen, "not a sqlprof profile (%s)", sqlite3_errmsg(db));
			goto out;
		}
		sqlite3_reset(st);
		sqlite3_bind_text(cols, 1, tables[i], -1, SQLITE_STATIC);
		if (sqlite3_step(cols) != SQLITE_ROW) {
			snprintf(err, errlen, "not a sqlprof profile (%s)", sqlite3_errmsg(db));
			goto out;
		}
		if (sqlite3_column_int64(cols, 0)) {
			snprintf(err, errlen,
				 "not a sqlprof profile (table %s has generated columns)",
				 tables[i]);
			goto out;
		}
		sqlite3_reset(cols);
	}
	rc = 0;
out:
	sqlite3_finalize(st);
	sqlite3_finalize(cols);
	return rc;
}

sqlite3 *sp_untrusted_open(const char *name, int flags, off_t size, const char *const *tables,
			   char *err, size_t errlen)
{
	sqlite3 *db = NULL;
	struct budget *b = NULL;
	long long ops;

	/* NOMUTEX: a reader's connection is used by one thread at a time,
	 * and each sqlite3_column_* took the connection's mutex: 20 % of
	 * report's instructions at 200,000 fingerprints */
	if (sqlite3_open_v2(name, &db,
			    SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX | (flags & SQLITE_OPEN_URI),
			    NULL) != SQLITE_OK) {
		snprintf(err, errlen, "not a sqlprof profile (%s)",
			 db ? sqlite3_errmsg(db) : "out of memory");
		goto fail;
	}
	/* Read-only already keeps the file as it is; these keep its schema
	 * from running anything: no view, no trigger, no function or
	 * virtual table that is not innocuous used from the schema, no
	 * writes to it through pragmas, no extension. */
	if (sqlite3_db_config(db, SQLITE_DBCONFIG_DEFENSIVE, 1, NULL) != SQLITE_OK ||
	    sqlite3_db_config(db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, NULL) != SQLITE_OK ||
	    sqlite3_db_config(db, SQLITE_DBCONFIG_ENABLE_VIEW, 0, NULL) != SQLITE_OK ||
	    sqlite3_db_config(db, SQLITE_DBCONFIG_ENABLE_TRIGGER, 0, NULL) != SQLITE_OK ||
	    sqlite3_db_config(db, SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, 0, NULL) != SQLITE_OK) {
		snprintf(err, errlen, "cannot configure SQLite (%s)", sqlite3_errmsg(db));
		goto fail;
	}
	sqlite3_limit(db, SQLITE_LIMIT_ATTACHED, 0);
	/* no value sqlprof writes comes near (SQL texts are at most 16 KiB) */
	sqlite3_limit(db, SQLITE_LIMIT_LENGTH, 64 << 20);
	b = calloc(1, sizeof(*b));
	if (!b) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	snprintf(b->name, sizeof(b->name), "%s", name);
	ops = SP_UNTRUSTED_FLOOR_OPS;
	if (size > 0)
		ops += size > (1LL << 40) / SP_UNTRUSTED_OPS_PER_BYTE
			       ? 1LL << 40
			       : SP_UNTRUSTED_OPS_PER_BYTE * size;
	if (work_set)
		ops = work_set;
	b->ops = ops;
	b->left = ops / STEP_OPS;
	/* b is freed with the connection, whether this succeeds or not */
	if (sqlite3_create_function_v2(db, "sqlprof_budget", 0, SQLITE_UTF8, b, budget_fn, NULL,
				       NULL, free) != SQLITE_OK) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	sqlite3_progress_handler(db, STEP_OPS, on_progress, b);
	if (tables && check_tables(db, tables, err, errlen) < 0)
		goto fail;
	return db;
fail:
	sp_term_clean(err);
	sqlite3_close(db);
	return NULL;
}

uint64_t sp_col_u64(sqlite3_stmt *st, int i)
{
	sqlite3_int64 v = sqlite3_column_int64(st, i);

	return v > 0 ? (uint64_t)v : 0;
}
