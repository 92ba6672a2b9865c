/* SPDX-License-Identifier: MIT */
/*
 * util.h - small helpers shared by the sqlprof CLI: growing arrays, an
 * open-addressing hash map with fixed-size keys, file names and site
 * labels, number formatting and escaping for JSON, CSV and terminals. No
 * I/O policy lives here.
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

/* How a loader of a profile failed (sp_qset_load, sp_attrib_load,
 * sp_export_load): returned instead of -1, so that the exit code follows
 * from the return value, never from the text of the message. */
enum sp_load_err {
	SP_ERR_INPUT = -1, /* the profile: corrupt, not one, too much work */
	SP_ERR_NOMEM = -2, /* out of memory */
};

/* The exit code for a loader's failure e. */
static inline int sp_err_exit(int e)
{
	return e == SP_ERR_NOMEM ? SP_EXIT_INTERNAL : SP_EXIT_INPUT;
}

/* Map from a fixed-size key (keylen bytes, compared with memcmp) to a
 * value of vallen bytes stored inline. Values move when the map grows:
 * do not keep pointers across an insert. */
struct hmap {
	uint8_t *slots; /* cap entries of (8-byte hash or 0, key, value), each 8-aligned */
	size_t cap, count, keylen, vallen, stride;
};
void hmap_init(struct hmap *m, size_t keylen, size_t vallen);
void hmap_free(struct hmap *m);
/* Room for n entries without growing (n known ahead saves the copies and
 * page faults of each doubling). 0, or -1 on ENOMEM (m unchanged). */
int hmap_reserve(struct hmap *m, size_t n);
/* Find key; with create, insert a zeroed value when missing (*created=1).
 * Returns the value or NULL (missing, or ENOMEM on create). */
void *hmap_get(struct hmap *m, const void *key, int create, int *created);
/* Ask the cache for the slot key would be looked up in first: a lookup
 * in a big map is a cache miss, and issued some lookups ahead it
 * overlaps theirs. Changes nothing; the map may still change before. */
void hmap_prefetch(const struct hmap *m, const void *key);
/* Remove key, its value copied to val (may be NULL) first. 1 when it was
 * there, else 0. Entries move (backward shift): pointers into m and
 * iterators over it are no longer valid. */
int hmap_del(struct hmap *m, const void *key, void *val);
/* Iterate: returns the next used index >= *it and advances it; NULL at end. */
void *hmap_next(const struct hmap *m, size_t *it, const void **key);
/* Entry e (a key, then a value, laid out as m's, taken out of m) put
 * under key: merged by merge into the entry there, or a new entry; when
 * that cannot be made, put back under its own key, its sums whole. 0, or
 * -1 when it went back (or, with no memory even for that, was lost). */
int hmap_put_merge(struct hmap *m, const void *key, void *e, void (*merge)(void *dst, void *src));

/* A well-mixed 64-bit hash of p[0..n) for hash maps (FNV-1a, hash.h, and
 * a final mix): not stored anywhere, so it may change. */
uint64_t sp_hash_bytes(const void *p, size_t n);

/*
 * Make room in a growing array: *parr (a T **, passed as void *) holds
 * *cap elements of elem bytes; after a return of 0 it holds at least need
 * (the capacity doubled as often as needed, starting at first when it is
 * 0). Returns -1 (ENOMEM, or a size that would overflow) with *parr and
 * *cap unchanged: the elements already there are still the caller's.
 * An array of 4 MiB or more is asked to be on huge pages (see util.c).
 * SP_GROW(arr, cap, need, first) is the typed form for an array variable
 * and its size_t capacity:
 *
 *	if (SP_GROW(v->items, v->cap, v->n + 1, 16) < 0)
 *		return -1;
 *	v->items[v->n++] = item;
 */
int sp_grow(void *parr, size_t *cap, size_t need, size_t elem, size_t first);
#define SP_GROW(arr, cap, need, first) sp_grow(&(arr), &(cap), (need), sizeof(*(arr)), (first))

/* The last component of path (after its last '/'; all of it without one). */
const char *sp_basename(const char *path);

/* A site's label, "function (file:line)", into buf; returns buf. */
char *sp_site_label(char *buf, size_t len, const char *function, const char *file, int line);

/* "1.23 ms" style; buf >= 32 bytes. */
const char *sp_fmt_ns(char *buf, size_t len, double ns);
void sp_json_str(FILE *f, const char *s); /* quoted, escaped JSON string */
/* RFC 4180 field, every byte kept (t_robust_secrets): CSV is data, not
 * text for a terminal */
void sp_csv_str(FILE *f, const char *s);
/* Copy s shortened to at most max display bytes, visibly: "... (N more
 * bytes)"; whole when that note is no shorter than the N bytes it replaces. */
char *sp_shorten(const char *s, size_t max);
/* One-line version of SQL: newlines and tabs become spaces. */
void sp_one_line(char *s);

/* Make s safe to print on a terminal, in place: tabs and newlines become
 * spaces; other control characters (C0, DEL, C1) and bytes that are not
 * UTF-8 become '?'. Every string from a profile goes through it (or
 * sp_term_str) before it reaches a text output. */
void sp_term_clean(char *s);
/* Print s (NULL: nothing) to f as sp_term_clean would leave it. */
void sp_term_str(FILE *f, const char *s);

/* A stream that writes to `to` what it is given, terminal-safe: newlines
 * and tabs pass, other control characters (C0, DEL, C1) and bytes that
 * are not UTF-8 become '?'. Text outputs (report's table, diff and check
 * in text and Markdown, every message on stderr) are written through one,
 * so that no string from a profile reaches a terminal as an escape
 * sequence. fclose flushes it and leaves `to` open. NULL: out of memory. */
FILE *sp_term_stream(FILE *to);
/* Route *std (&stdout or &stderr) through sp_term_stream until
 * sp_term_end; returns what *std was, for sp_term_end. When no stream can
 * be made, *std stays as it is. */
FILE *sp_term_begin(FILE **std);
/* Put real back into *std and close the terminal-safe stream there.
 * Returns 0, or -1 when writing through it failed. */
int sp_term_end(FILE **std, FILE *real);

/* base's n elements of size bytes put in the order from gives (element
 * i becomes the one at from[i] before: from is a permutation), in place,
 * cycle by cycle (no second array: at 200,000 queries a new one was
 * 12,000 page faults). 0, or -1 on ENOMEM (base as it was). */
int sp_permute(void *base, size_t n, size_t size, const size_t *from);

/* qsort that accepts an empty (possibly NULL) array: qsort(NULL, 0, ...)
 * is undefined behaviour. */
static inline void sp_qsort(void *base, size_t n, size_t size,
			    int (*cmp)(const void *, const void *))
{
	if (base && n > 1)
		qsort(base, n, size, cmp);
}

int sp_parse_u64(const char *s, uint64_t *out);
/* /proc/PID/stat read into buf (len bytes at most): where its fields after
 * the command name begin (the last ')', since the name, field 2, may hold
 * anything), or NULL when it cannot be read. */
const char *sp_proc_stat(uint32_t pid, char *buf, size_t len);
/* The second line of a usage error, after its one-line message:
 * "Try 'sqlprof help CMD' for the options." on stderr. */
void sp_usage_hint(const char *cmd);
int sp_parse_double(const char *s, double lo, double hi, double *out);

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
