/* SPDX-License-Identifier: MIT */
/*
 * util.h - small helpers shared by the sqlprof CLI: a growable buffer,
 * an open-addressing hash map with fixed-size keys, number formatting and
 * escaping for JSON and CSV. No I/O policy lives here.
 */
#ifndef SP_UTIL_H
#define SP_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Exit codes of the sqlprof CLI (documented in docs/sqlprof.1). */
enum {
	SP_EXIT_OK = 0,
	SP_EXIT_REGRESSION = 1, /* sqlprof check: a regression was found */
	SP_EXIT_USAGE = 2,      /* bad flags or arguments */
	SP_EXIT_INPUT = 3,      /* missing, unreadable or corrupt profile */
	SP_EXIT_INTERNAL = 4,   /* out of memory, I/O error writing output */
};

/* Map from a fixed-size key (keylen bytes, compared with memcmp) to a
 * value of vallen bytes stored inline. Values move when the map grows:
 * do not keep pointers across an insert. */
struct hmap {
	uint8_t *slots; /* cap entries of (8-byte used flag, key, value), each 8-aligned */
	size_t cap, count, keylen, vallen, stride;
};
void hmap_init(struct hmap *m, size_t keylen, size_t vallen);
void hmap_free(struct hmap *m);
/* Find key; with create, insert a zeroed value when missing (*created=1).
 * Returns the value or NULL (missing, or ENOMEM on create). */
void *hmap_get(struct hmap *m, const void *key, int create, int *created);
/* Iterate: returns the next used index >= *it and advances it; NULL at end. */
void *hmap_next(const struct hmap *m, size_t *it, const void **key);

uint64_t sp_hash_bytes(const void *p, size_t n);

/* "1.23 ms" style; buf >= 32 bytes. */
const char *sp_fmt_ns(char *buf, size_t len, double ns);
void sp_json_str(FILE *f, const char *s);   /* quoted, escaped JSON string */
void sp_csv_str(FILE *f, const char *s);    /* RFC 4180 field */
/* Copy s shortened to at most max display bytes, visibly: "... (N more bytes)". */
char *sp_shorten(const char *s, size_t max);
/* One-line version of SQL: newlines and tabs become spaces. */
void sp_one_line(char *s);

/* qsort that accepts an empty (possibly NULL) array: qsort(NULL, 0, ...)
 * is undefined behaviour. */
static inline void sp_qsort(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *))
{
	if (base && n > 1)
		qsort(base, n, size, cmp);
}

int sp_parse_u64(const char *s, uint64_t *out);
int sp_parse_double(const char *s, double lo, double hi, double *out);

#endif
