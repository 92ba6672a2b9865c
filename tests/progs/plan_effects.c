/* SPDX-License-Identifier: MIT */
/*
 * plan_effects.c - what a program could notice of the preload's plan
 * capture (an EXPLAIN QUERY PLAN it runs on the program's connection right
 * after the first prepare of each SQL text). It prints what it observes;
 * tests/integration/t_plan_invisible.sh compares the output with and
 * without sqlprof, which must be byte-identical.
 *
 *  1. The error state after a successful prepare of a SELECT whose text is
 *     a few bytes below SQLITE_LIMIT_SQL_LENGTH (set low with sqlite3_limit):
 *     errcode, extended errcode, errmsg and error offset. The preload's own
 *     statement, 19 bytes longer, would not fit; at exactly 19 bytes below
 *     (it fits); and under a low SQLITE_LIMIT_VDBE_OP, where the preload's
 *     statement (more opcodes) fails with SQLITE_NOMEM, which SQLite logs.
 *  2. The SQLITE_CONFIG_LOG callback: the number of SQLITE_WARNING_AUTOINDEX
 *     messages for a join on an unindexed column (an automatic index), and
 *     that a second SQLITE_CONFIG_LOG after initialization fails (MISUSE)
 *     and leaves the first callback and its argument in place. A few other
 *     sqlite3_config options are set before initialization, and their
 *     effects printed, to check that the call is forwarded faithfully.
 *  3. Virtual tables: the number of xBestIndex calls of a module the
 *     program registers (sqlite3_create_module), and of an eponymous-only
 *     one (sqlite3_create_module_v2, no xCreate), for one SELECT each; and
 *     of one an automatic extension registers through the
 *     sqlite3_api_routines it is handed (as loadable extensions do; in
 *     Debian's build those entries are the preload's shims too, elsewhere
 *     they may bypass them). That one comes last: after it, the preload
 *     takes no plans.
 *
 * Table and module names: pe_* on the plain connection (its plans may be
 * captured), vt_* on the connection with modules.
 */
#include <sqlite3.h>
#define SQLITE_CORE 1 /* sqlite3ext.h: the api structure without its macros */
#include <sqlite3ext.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int log_calls, log_autoindex, log_wrong_arg;
static int log_cookie = 42, other_cookie = 7;

static void on_log(void *arg, int code, const char *msg)
{
	if (arg != &log_cookie)
		log_wrong_arg++;
	log_calls++;
	if (code == SQLITE_WARNING_AUTOINDEX)
		log_autoindex++;
	printf("  log: code=%d msg='%s'\n", code, msg);
}

static void on_log_other(void *arg, int code, const char *msg)
{
	(void)arg, (void)code, (void)msg;
	printf("  log: SECOND CALLBACK code=%d\n", code);
}

/* ---- a tiny virtual table: rows a = 1..5, counting xBestIndex ---- */

static int best_index_calls;

struct vt {
	sqlite3_vtab base;
};

struct vt_cur {
	sqlite3_vtab_cursor base;
	int row;
};

static int vt_connect(sqlite3 *db, void *aux, int argc, const char *const *argv,
		      sqlite3_vtab **out, char **err)
{
	struct vt *v;
	int rc;

	(void)aux, (void)argc, (void)argv, (void)err;
	rc = sqlite3_declare_vtab(db, "CREATE TABLE x(a INTEGER)");
	if (rc != SQLITE_OK)
		return rc;
	v = calloc(1, sizeof(*v));
	if (!v)
		return SQLITE_NOMEM;
	*out = &v->base;
	return SQLITE_OK;
}

static int vt_best_index(sqlite3_vtab *tab, sqlite3_index_info *info)
{
	(void)tab;
	best_index_calls++;
	info->estimatedCost = 5;
	info->estimatedRows = 5;
	return SQLITE_OK;
}

static int vt_disconnect(sqlite3_vtab *tab)
{
	free(tab);
	return SQLITE_OK;
}

static int vt_open(sqlite3_vtab *tab, sqlite3_vtab_cursor **out)
{
	struct vt_cur *c = calloc(1, sizeof(*c));

	(void)tab;
	if (!c)
		return SQLITE_NOMEM;
	*out = &c->base;
	return SQLITE_OK;
}

static int vt_close(sqlite3_vtab_cursor *cur)
{
	free(cur);
	return SQLITE_OK;
}

static int vt_filter(sqlite3_vtab_cursor *cur, int idx, const char *idxs, int argc,
		     sqlite3_value **argv)
{
	(void)idx, (void)idxs, (void)argc, (void)argv;
	((struct vt_cur *)cur)->row = 1;
	return SQLITE_OK;
}

static int vt_next(sqlite3_vtab_cursor *cur)
{
	((struct vt_cur *)cur)->row++;
	return SQLITE_OK;
}

static int vt_eof(sqlite3_vtab_cursor *cur)
{
	return ((struct vt_cur *)cur)->row > 5;
}

static int vt_column(sqlite3_vtab_cursor *cur, sqlite3_context *ctx, int i)
{
	(void)i;
	sqlite3_result_int(ctx, ((struct vt_cur *)cur)->row);
	return SQLITE_OK;
}

static int vt_rowid(sqlite3_vtab_cursor *cur, sqlite3_int64 *rowid)
{
	*rowid = ((struct vt_cur *)cur)->row;
	return SQLITE_OK;
}

static const sqlite3_module vt_module = {
	.iVersion = 1,
	.xCreate = vt_connect,
	.xConnect = vt_connect,
	.xBestIndex = vt_best_index,
	.xDisconnect = vt_disconnect,
	.xDestroy = vt_disconnect,
	.xOpen = vt_open,
	.xClose = vt_close,
	.xFilter = vt_filter,
	.xNext = vt_next,
	.xEof = vt_eof,
	.xColumn = vt_column,
	.xRowid = vt_rowid,
};

/* eponymous-only: no xCreate */
static const sqlite3_module vt_epo_module = {
	.iVersion = 1,
	.xCreate = NULL,
	.xConnect = vt_connect,
	.xBestIndex = vt_best_index,
	.xDisconnect = vt_disconnect,
	.xDestroy = vt_disconnect,
	.xOpen = vt_open,
	.xClose = vt_close,
	.xFilter = vt_filter,
	.xNext = vt_next,
	.xEof = vt_eof,
	.xColumn = vt_column,
	.xRowid = vt_rowid,
};

static int auto_entry(sqlite3 *db, char **err, const sqlite3_api_routines *api)
{
	(void)err;
	return api->create_module(db, "vt_auto", &vt_module, NULL);
}

static void must(sqlite3 *db, const char *sql)
{
	if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK) {
		fprintf(stderr, "plan_effects: %s: %s\n", sql, sqlite3_errmsg(db));
		exit(2);
	}
}

static void show_error_state(sqlite3 *db, const char *what, int rc)
{
	printf("%s: rc=%d errcode=%d xerrcode=%d errmsg='%s' offset=%d\n", what, rc,
	       sqlite3_errcode(db), sqlite3_extended_errcode(db), sqlite3_errmsg(db),
	       sqlite3_error_offset(db));
}

static long drain(sqlite3_stmt *st)
{
	long sum = 0;

	while (sqlite3_step(st) == SQLITE_ROW)
		sum += sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	return sum;
}

/* Prepare sql and print the error state, the log and xBestIndex counts
 * just after the prepare, then run it. */
static long prepare_and_show(sqlite3 *db, const char *what, const char *sql)
{
	sqlite3_stmt *st = NULL;
	int rc, logs = log_calls, bi = best_index_calls;
	long sum;

	rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
	show_error_state(db, what, rc);
	printf("  during prepare: log calls=%d xBestIndex calls=%d\n", log_calls - logs,
	       best_index_calls - bi);
	if (rc != SQLITE_OK)
		return -1;
	sum = drain(st);
	printf("  rows sum=%ld, after run: log calls=%d xBestIndex calls=%d\n", sum,
	       log_calls - logs, best_index_calls - bi);
	return sum;
}

int main(void)
{
	sqlite3 *db, *vdb;
	sqlite3_int64 hwm = 0;
	int rc, hdrsz = -1, limit;
	char sql[256];

	/* ---- sqlite3_config before initialization ---- */
	printf("config LOG: rc=%d\n", sqlite3_config(SQLITE_CONFIG_LOG, on_log, &log_cookie));
	printf("config MEMSTATUS 1: rc=%d\n", sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 1));
	printf("config MMAP_SIZE: rc=%d\n",
	       sqlite3_config(SQLITE_CONFIG_MMAP_SIZE, (sqlite3_int64)65536, (sqlite3_int64)1048576));
	printf("config LOOKASIDE: rc=%d\n", sqlite3_config(SQLITE_CONFIG_LOOKASIDE, 128, 20));
	rc = sqlite3_config(SQLITE_CONFIG_PCACHE_HDRSZ, &hdrsz);
	printf("config PCACHE_HDRSZ: rc=%d hdrsz>0=%d\n", rc, hdrsz > 0);
	printf("config SERIALIZED: rc=%d\n", sqlite3_config(SQLITE_CONFIG_SERIALIZED));
	printf("config bad op 9999: rc=%d\n", sqlite3_config(9999, 1, 2, 3));

	if (sqlite3_open(":memory:", &db) != SQLITE_OK)
		return 2;
	/* after initialization, sqlite3_config is a misuse and changes nothing */
	printf("config LOG after init: rc=%d\n",
	       sqlite3_config(SQLITE_CONFIG_LOG, on_log_other, &other_cookie));
	printf("config MEMSTATUS after init: rc=%d\n", sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0));
	{
		sqlite3_stmt *st;

		if (sqlite3_prepare_v2(db, "PRAGMA mmap_size", -1, &st, NULL) != SQLITE_OK)
			return 2;
		if (sqlite3_step(st) == SQLITE_ROW)
			printf("pragma mmap_size: %lld\n", sqlite3_column_int64(st, 0));
		sqlite3_finalize(st);
	}
	{
		int cur = -1, hi = -1;

		sqlite3_db_status(db, SQLITE_DBSTATUS_LOOKASIDE_USED, &cur, &hi, 0);
		printf("lookaside slots used <= 20: %d\n", cur >= 0 && cur <= 20 && hi <= 20);
	}
	hwm = sqlite3_memory_used();
	printf("memstatus on: %d\n", hwm > 0);

	must(db, "CREATE TABLE pe_a(x INTEGER, v INTEGER)");
	must(db, "CREATE TABLE pe_b(y INTEGER, w INTEGER)");
	must(db, "WITH RECURSIVE c(i) AS (VALUES(1) UNION ALL SELECT i+1 FROM c WHERE i<200)"
		 " INSERT INTO pe_a SELECT i, i*2 FROM c");
	must(db, "WITH RECURSIVE c(i) AS (VALUES(1) UNION ALL SELECT i+1 FROM c WHERE i<200)"
		 " INSERT INTO pe_b SELECT i, i*3 FROM c");

	/* ---- 1. a plain SELECT: its plan may be captured ---- */
	prepare_and_show(db, "plain select", "SELECT v FROM pe_a WHERE x < 10");

	/* ---- 2. an automatic index ---- */
	prepare_and_show(db, "autoindex join",
			 "SELECT sum(pe_b.w) FROM pe_a JOIN pe_b ON pe_b.y = pe_a.v");
	printf("log totals: calls=%d autoindex=%d wrong arg=%d\n", log_calls, log_autoindex,
	       log_wrong_arg);

	/* ---- 3. near SQLITE_LIMIT_SQL_LENGTH ---- */
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM pe_a WHERE x > 3 AND v < 300");
	limit = (int)strlen(sql) + 5;
	printf("limit SQL_LENGTH: old=%d\n", sqlite3_limit(db, SQLITE_LIMIT_SQL_LENGTH, limit));
	/* an error first, so that the successful prepare has one to clear */
	{
		sqlite3_stmt *st = NULL;

		rc = sqlite3_prepare_v2(db, "SELECT nosuch FROM pe_a", -1, &st, NULL);
		show_error_state(db, "failing prepare", rc);
	}
	prepare_and_show(db, "near the length limit", sql);
	/* the same text, prepared again (the plan is not taken twice) */
	prepare_and_show(db, "near the length limit, again", sql);
	/* a text exactly at the limit */
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM pe_b WHERE y > 3 AND w < 300 AND 1");
	sqlite3_limit(db, SQLITE_LIMIT_SQL_LENGTH, (int)strlen(sql));
	prepare_and_show(db, "at the length limit", sql);
	/* room for exactly the preload's 19-byte prefix: its plan may be taken */
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM pe_b WHERE y > 4 AND w < 300");
	sqlite3_limit(db, SQLITE_LIMIT_SQL_LENGTH, (int)strlen(sql) + 19);
	prepare_and_show(db, "19 bytes below the length limit", sql);
	sqlite3_limit(db, SQLITE_LIMIT_SQL_LENGTH, 1000000);

	/* SQLITE_LIMIT_VDBE_OP: the program's statement fits, the same one
	 * under EXPLAIN QUERY PLAN (more opcodes) fails with SQLITE_NOMEM -
	 * a failure the length check cannot foresee */
	snprintf(sql, sizeof(sql), "SELECT pe_a.v, pe_b.w FROM pe_a, pe_b"
		 " WHERE pe_a.x = pe_b.y AND pe_a.v > 1 ORDER BY 1");
	sqlite3_limit(db, SQLITE_LIMIT_VDBE_OP, 42);
	prepare_and_show(db, "under SQLITE_LIMIT_VDBE_OP", sql);
	{
		char eqp[300];
		sqlite3_stmt *st = NULL;

		snprintf(eqp, sizeof(eqp), "EXPLAIN QUERY PLAN %s", sql);
		rc = sqlite3_prepare_v2(db, eqp, -1, &st, NULL);
		printf("  the same under EXPLAIN QUERY PLAN: rc=%d\n", rc);
		sqlite3_finalize(st);
	}
	sqlite3_limit(db, SQLITE_LIMIT_VDBE_OP, 250000000);

	/* ---- 4. virtual tables on their own connection ---- */
	if (sqlite3_open(":memory:", &vdb) != SQLITE_OK)
		return 2;
	printf("create_module: rc=%d\n", sqlite3_create_module(vdb, "vt_counter", &vt_module, NULL));
	printf("create_module_v2 (eponymous only): rc=%d\n",
	       sqlite3_create_module_v2(vdb, "vt_epo", &vt_epo_module, NULL, NULL));
	must(vdb, "CREATE VIRTUAL TABLE vt_t USING vt_counter");
	must(vdb, "CREATE TABLE vt_plain(n INTEGER)");
	must(vdb, "INSERT INTO vt_plain VALUES (1), (2), (3)");
	prepare_and_show(vdb, "vtab select", "SELECT a FROM vt_t WHERE a > 1");
	prepare_and_show(vdb, "eponymous vtab select", "SELECT a FROM vt_epo WHERE a < 4");
	prepare_and_show(vdb, "vtab join", "SELECT t.a FROM vt_t t JOIN vt_plain p ON p.n = t.a");
	/* a built-in table-valued function (json_each: libsqlite3's own module) */
	prepare_and_show(db, "json_each", "SELECT value FROM json_each('[1,2,3]') WHERE value > 1");
	printf("xBestIndex total: %d\n", best_index_calls);
	printf("log totals: calls=%d autoindex=%d wrong arg=%d\n", log_calls, log_autoindex,
	       log_wrong_arg);

	/* ---- 5. an automatic extension registering a module through the
	 * sqlite3_api_routines it is handed (as loadable extensions do) ---- */
	{
		sqlite3 *adb;

		printf("auto_extension: rc=%d\n", sqlite3_auto_extension((void (*)(void))auto_entry));
		if (sqlite3_open(":memory:", &adb) != SQLITE_OK)
			return 2;
		must(adb, "CREATE VIRTUAL TABLE vt_a USING vt_auto");
		prepare_and_show(adb, "vtab of an auto-extension", "SELECT a FROM vt_a WHERE a > 2");
		prepare_and_show(adb, "plain table next to it", "SELECT 1 FROM sqlite_schema");
		sqlite3_close(adb);
		sqlite3_reset_auto_extension();
	}
	printf("xBestIndex total: %d\n", best_index_calls);

	sqlite3_close(vdb);
	sqlite3_close(db);
	return 0;
}
