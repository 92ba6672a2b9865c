/* SPDX-License-Identifier: MIT */
/*
 * rowsrc.c - the eponymous virtual table sp_rows (rowsrc.h): one column
 * per value of a struct sp_rowsrc's row, and a hidden column src, the
 * struct bound as a pointer of type "sp_rowsrc". Read once, forward.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rowsrc.h"

#define SRC_COL SP_ROWSRC_MAXCOL

struct rs_cursor {
	sqlite3_vtab_cursor base;
	struct sp_rowsrc *src;
	sqlite3_int64 rowid;
	int eof;
};

static int rs_connect(sqlite3 *db, void *aux, int argc, const char *const *argv, sqlite3_vtab **out,
		      char **err)
{
	char decl[32 + SP_ROWSRC_MAXCOL * 6];
	size_t o = (size_t)snprintf(decl, sizeof(decl), "CREATE TABLE x(");
	sqlite3_vtab *v;
	int rc;

	for (int i = 0; i < SP_ROWSRC_MAXCOL; i++)
		o += (size_t)snprintf(decl + o, sizeof(decl) - o, "c%d,", i);
	snprintf(decl + o, sizeof(decl) - o, "src HIDDEN)");
	rc = sqlite3_declare_vtab(db, decl);
	if (rc != SQLITE_OK)
		return rc;
	v = sqlite3_malloc(sizeof(*v));
	if (!v)
		return SQLITE_NOMEM;
	memset(v, 0, sizeof(*v));
	*out = v;
	return SQLITE_OK;
}

static int rs_disconnect(sqlite3_vtab *v)
{
	sqlite3_free(v);
	return SQLITE_OK;
}

/* Only a scan given src = ?: without it there are no rows to read. */
static int rs_best_index(sqlite3_vtab *v, sqlite3_index_info *ii)
{
	for (int i = 0; i < ii->nConstraint; i++) {
		const struct sqlite3_index_constraint *c = &ii->aConstraint[i];

		if (c->iColumn == SRC_COL && c->op == SQLITE_INDEX_CONSTRAINT_EQ && c->usable) {
			ii->aConstraintUsage[i].argvIndex = 1;
			ii->aConstraintUsage[i].omit = 1;
			ii->idxNum = 1;
			ii->estimatedCost = 1;
			return SQLITE_OK;
		}
	}
	return SQLITE_CONSTRAINT;
}

static int rs_open(sqlite3_vtab *v, sqlite3_vtab_cursor **out)
{
	struct rs_cursor *c = sqlite3_malloc(sizeof(*c));

	if (!c)
		return SQLITE_NOMEM;
	memset(c, 0, sizeof(*c));
	c->eof = 1;
	*out = &c->base;
	return SQLITE_OK;
}

static int rs_close(sqlite3_vtab_cursor *cur)
{
	sqlite3_free(cur);
	return SQLITE_OK;
}

static int rs_next(sqlite3_vtab_cursor *cur)
{
	struct rs_cursor *c = (struct rs_cursor *)cur;
	int r = c->src ? c->src->next(c->src) : 0;

	if (r < 0)
		return SQLITE_ERROR;
	c->eof = r == 0;
	c->rowid++;
	return SQLITE_OK;
}

static int rs_filter(sqlite3_vtab_cursor *cur, int idx, const char *idxs, int argc,
		     sqlite3_value **argv)
{
	struct rs_cursor *c = (struct rs_cursor *)cur;

	c->src = idx == 1 && argc == 1 ? sqlite3_value_pointer(argv[0], "sp_rowsrc") : NULL;
	c->rowid = 0;
	return rs_next(cur);
}

static int rs_eof(sqlite3_vtab_cursor *cur)
{
	return ((struct rs_cursor *)cur)->eof;
}

static int rs_column(sqlite3_vtab_cursor *cur, sqlite3_context *ctx, int i)
{
	const struct sp_rowsrc *s = ((struct rs_cursor *)cur)->src;
	const struct sp_rowval *v;

	if (i < 0 || i >= s->ncol) {
		sqlite3_result_null(ctx);
		return SQLITE_OK;
	}
	v = &s->v[i];
	if (v->type == SP_RV_INT)
		sqlite3_result_int64(ctx, v->i);
	else if (v->type == SP_RV_TEXT)
		sqlite3_result_text(ctx, v->s ? v->s : "", v->s ? v->len : 0, SQLITE_STATIC);
	else
		sqlite3_result_null(ctx);
	return SQLITE_OK;
}

static int rs_rowid(sqlite3_vtab_cursor *cur, sqlite3_int64 *rowid)
{
	*rowid = ((struct rs_cursor *)cur)->rowid;
	return SQLITE_OK;
}

static const sqlite3_module rs_module = {
	.iVersion = 0,
	.xConnect = rs_connect, /* no xCreate: eponymous only */
	.xBestIndex = rs_best_index,
	.xDisconnect = rs_disconnect,
	.xOpen = rs_open,
	.xClose = rs_close,
	.xFilter = rs_filter,
	.xNext = rs_next,
	.xEof = rs_eof,
	.xColumn = rs_column,
	.xRowid = rs_rowid,
};

int sp_rowsrc_register(sqlite3 *db)
{
	return sqlite3_create_module_v2(db, "sp_rows", &rs_module, NULL, NULL);
}

int sp_rowsrc_insert(sqlite3 *db, const char *table, struct sp_rowsrc *src)
{
	char sql[128 + SP_ROWSRC_MAXCOL * 6];
	size_t o;
	sqlite3_stmt *st = NULL;
	int rc;

	if (src->ncol < 1 || src->ncol > SP_ROWSRC_MAXCOL)
		return -1;
	o = (size_t)snprintf(sql, sizeof(sql), "INSERT INTO %s SELECT ", table);
	for (int i = 0; i < src->ncol && o < sizeof(sql); i++)
		o += (size_t)snprintf(sql + o, sizeof(sql) - o, "%sc%d", i ? "," : "", i);
	if (o >= sizeof(sql) - 20)
		return -1;
	snprintf(sql + o, sizeof(sql) - o, " FROM sp_rows(?1)");
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		return -1;
	sqlite3_bind_pointer(st, 1, src, "sp_rowsrc", NULL);
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? 0 : -1;
}
