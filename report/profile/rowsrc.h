/* SPDX-License-Identifier: MIT */
/*
 * rowsrc.h - rows made by C code inserted into a table in one statement:
 * `INSERT INTO t SELECT c0, c1, ... FROM sp_rows(?1)`, the eponymous
 * virtual table sp_rows reading a struct sp_rowsrc bound to ?1 as a
 * pointer. A prepared one-row INSERT costs a step, a reset and a bind a
 * column for each row (0.75 us a row of 10 integers here); through the
 * virtual table SQLite runs one loop (0.32 us). Used by the profile's
 * writer (profile.c).
 */
#ifndef SP_ROWSRC_H
#define SP_ROWSRC_H

#include <sqlite3.h>
#include <stdint.h>

#define SP_ROWSRC_MAXCOL 24

enum sp_rowval_type { SP_RV_INT, SP_RV_TEXT, SP_RV_NULL };

struct sp_rowval {
	int type; /* enum sp_rowval_type */
	int len;  /* text: its length in bytes, or -1 (NUL-terminated) */
	union {
		int64_t i;
		const char *s; /* kept unchanged until the statement is done */
	};
};

/* A source of rows: next fills v[0..ncol) with the next row and returns 1,
 * or returns 0 at the end, -1 on an error (SQLite then fails the statement:
 * the caller knows why). */
struct sp_rowsrc {
	int (*next)(struct sp_rowsrc *s);
	void *arg; /* the caller's */
	int ncol;
	struct sp_rowval v[SP_ROWSRC_MAXCOL];
};

static inline void sp_rv_int(struct sp_rowval *v, int64_t i)
{
	v->type = SP_RV_INT;
	v->i = i;
}

static inline void sp_rv_text(struct sp_rowval *v, const char *s)
{
	v->type = SP_RV_TEXT;
	v->len = -1;
	v->s = s;
}

/* Make sp_rows known to db (once per connection). SQLITE_OK or an error. */
int sp_rowsrc_register(sqlite3 *db);
/* Insert every row of src into table (ncol columns, in their order) with
 * one statement. 0, or -1: sqlite3_errmsg(db) says why (src may have set
 * its own reason elsewhere). */
int sp_rowsrc_insert(sqlite3 *db, const char *table, struct sp_rowsrc *src);

#endif
