/* SPDX-License-Identifier: MIT */
/*
 * plan.c - EXPLAIN QUERY PLAN of each SQL text, once per connection, taken
 * at prepare time on the application's own connection through the real
 * (uninterposed) functions, and sent as a PLAN record.
 *
 * It must never change what the application observes. What it relies on:
 *  - it runs only right after a successful prepare by the application, on
 *    its thread, outside any execution (not nested in a step or an exec):
 *    the error state is then SQLITE_OK, and preparing, stepping and
 *    finalizing an EXPLAIN statement leaves it SQLITE_OK again;
 *  - an EXPLAIN program touches no table and opens no transaction, so
 *    sqlite3_changes, last_insert_rowid and the autocommit state do not
 *    move (tests/integration checks all three, and errmsg);
 *  - it is skipped on any connection where the application registered a
 *    callback that our statement would trigger (trace, profile, authorizer,
 *    progress handler): the shims note those registrations;
 *  - it is skipped for statements with nothing to plan (DDL, PRAGMA,
 *    transaction control, EXPLAIN itself).
 * SQLPROF_PLANS=0 turns it off.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "sp_preload.h"

#define PLAN_MAX 8192 /* bytes of plan text sent */

static int plannable(const char *sql)
{
	static const char *const kw[] = { "SELECT", "WITH", "INSERT", "UPDATE", "DELETE",
					  "REPLACE", "VALUES" };
	size_t i;

	/* skip leading blanks and comments */
	for (;;) {
		while (*sql == ' ' || *sql == '\t' || *sql == '\n' || *sql == '\r' || *sql == '(')
			sql++;
		if (sql[0] == '-' && sql[1] == '-') {
			sql = strchr(sql, '\n');
			if (!sql)
				return 0;
		} else if (sql[0] == '/' && sql[1] == '*') {
			sql = strstr(sql + 2, "*/");
			if (!sql)
				return 0;
			sql += 2;
		} else {
			break;
		}
	}
	for (i = 0; i < sizeof(kw) / sizeof(kw[0]); i++) {
		size_t n = strlen(kw[i]);

		if (!strncasecmp(sql, kw[i], n) &&
		    !((sql[n] >= 'a' && sql[n] <= 'z') || (sql[n] >= 'A' && sql[n] <= 'Z') ||
		      sql[n] == '_' || (sql[n] >= '0' && sql[n] <= '9')))
			return 1;
	}
	return 0;
}

void sp_plan_capture(struct sp_thread *t, sqlite3_stmt *st, uint64_t sql_id, uint64_t db)
{
	sqlite3 *conn = (sqlite3 *)(uintptr_t)db;
	const char *sql;
	char *q = NULL, text[PLAN_MAX];
	sqlite3_stmt *ex = NULL;
	size_t n = 0, len;
	int saved = errno;

	if (!sp_cfg.plans || !conn || t->cur || !sp_real.stmt_isexplain || !sp_real.column_text ||
	    !sp_real.column_int)
		return;
	if (sp_real.stmt_isexplain(st) || sp_db_has_callbacks(db))
		return;
	if (!sp_plan_once(db, sql_id))
		return;
	sql = sp_real.sql(st);
	if (!sql || !plannable(sql))
		return;
	len = strlen(sql);
	q = malloc(len + 20);
	if (!q)
		return;
	memcpy(q, "EXPLAIN QUERY PLAN ", 19);
	memcpy(q + 19, sql, len + 1);
	sp_guard_in(t);
	if (sp_real.prepare_v2(conn, q, (int)(len + 19), &ex, NULL) == SQLITE_OK && ex) {
		while (sp_real.step(ex) == SQLITE_ROW && n < sizeof(text) - 1) {
			const char *detail = (const char *)sp_real.column_text(ex, 3);
			int w = snprintf(text + n, sizeof(text) - n, "%d|%d|%s\n", sp_real.column_int(ex, 0),
					 sp_real.column_int(ex, 1), detail ? detail : "");

			if (w < 0)
				break;
			n += (size_t)w < sizeof(text) - n ? (size_t)w : sizeof(text) - n - 1;
		}
	}
	if (ex)
		sp_real.finalize(ex);
	sp_guard_out(t);
	free(q);
	if (n) {
		uint32_t rl = SP_ALIGN8(sizeof(struct sp_rec_plan) + n);
		struct sp_rec_plan *r = sp_rec_reserve(t, rl);

		if (r) {
			memset(r, 0, rl);
			r->h.type = SP_REC_PLAN;
			r->h.len = rl;
			r->pid = (uint32_t)getpid();
			r->tid = t->tid;
			r->sql_id = sql_id;
			r->db = db;
			r->text_len = (uint32_t)n;
			memcpy(r + 1, text, n);
			sp_rec_commit(t, rl);
		}
	}
	errno = saved;
}
