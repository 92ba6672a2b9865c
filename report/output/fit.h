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

#endif
