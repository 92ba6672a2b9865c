/* SPDX-License-Identifier: MIT */
/*
 * fit.h - output that fits the terminal, and paths relative to a common
 * root (fit.c).
 */
#ifndef SP_FIT_H
#define SP_FIT_H

#include <stddef.h>
#include <stdio.h>

#define SP_FIT_MIN 20 /* narrower than this, nothing is fitted */

/* The width to fit: $COLUMNS when it is a number (SP_FIT_MIN or more),
 * else the width of the terminal fd is (TIOCGWINSZ), else 0 (not a
 * terminal: no limit). */
size_t sp_fit_width(int fd);

/* Columns of the first n bytes of s (UTF-8: one per character). */
size_t sp_fit_cols(const char *s, size_t n);

/* A stream writing to `to` in which every line wider than width columns
 * is wrapped (continuation lines indented); NULL on error or when width
 * is below SP_FIT_MIN. fclose flushes it and leaves `to` open. */
FILE *sp_fit_stream(FILE *to, size_t width);

/* The common directory of absolute paths, added one by one. */
struct sp_path_root {
	char root[4096];
	size_t n;
	int none;
};
void sp_path_root_add(struct sp_path_root *r, const char *path);
/* The root ("/a/b/", slash-terminated), or NULL when there is none worth
 * stripping (fewer than two directories deep). */
const char *sp_path_root_get(const struct sp_path_root *r);
/* path without root when it starts with it, else path. */
const char *sp_path_rel(const char *path, const char *root);

#endif
