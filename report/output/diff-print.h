/* SPDX-License-Identifier: MIT */
/*
 * diff-print.h - printing a comparison of profiles (diff-print.c), shared
 * by `sqlprof diff` and `sqlprof check`.
 */
#ifndef SP_DIFF_PRINT_H
#define SP_DIFF_PRINT_H

#include <stddef.h>
#include <stdio.h>

#include "compare.h"

/* The whole diff in fmt ("text", "json", "markdown"); all: list unchanged
 * queries too; top: at most this many query and site rows (0: all). */
void sp_diff_print(FILE *f, const char *fmt, const struct sp_side *base, const struct sp_side *cand,
		   const struct sp_diff *d, int all, size_t top);
/* "a.db" or "3 profiles (a.db, ...)", with the run count. */
void sp_side_describe(const struct sp_side *s, char *buf, size_t len);
/* One GitHub Markdown table cell: code spans or escaped text. */
void sp_md_cell(FILE *f, const char *s, int code);
/* A fingerprint shortened for tables, one line; free() it. */
char *sp_diff_sql(const char *fingerprint, enum sp_qkind kind, size_t width);

#endif
