/* SPDX-License-Identifier: MIT */
/*
 * util.c - see util.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <unistd.h>

#include "hash.h"
#include "util.h"

/* Ask for huge pages (THP "madvise", this machine's default) under the
 * whole pages of an array of 4 MiB or more, before it is written: the
 * readers' big arrays (the queries' rows, their sites, the samples, the
 * callers, the plans) were faulted in 4 KiB at a time, 40,000 page
 * faults of report's 57,000 at 200,000 fingerprints, and their TLB misses
 * on every pass after: with the advice report 2.3 -> 1.6 s of CPU. At
 * most 2 MiB an array more is resident (its last huge page). Such an
 * array grows by a copy into a new one advised first (realloc's copy
 * wrote the new pages before they could be advised). */
#define HUGE_ARRAY ((size_t)4 << 20)

static void advise_huge(void *p, size_t len)
{
	const uintptr_t page = 4096;
	uintptr_t lo = ((uintptr_t)p + page - 1) & ~(page - 1);
	uintptr_t hi = ((uintptr_t)p + len) & ~(page - 1);

	if (hi > lo)
		(void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
}

int sp_grow(void *parr, size_t *cap, size_t need, size_t elem, size_t first)
{
	size_t nc = *cap ? *cap : (first ? first : 1);
	void *arr, *na;

	if (need <= *cap)
		return 0;
	while (nc < need) {
		if (nc > SIZE_MAX / 2)
			goto nomem;
		nc *= 2;
	}
	if (elem && nc > SIZE_MAX / elem)
		goto nomem;
	memcpy(&arr, parr, sizeof(arr)); /* *parr is a T *, read as a void * */
	if (nc * elem < HUGE_ARRAY) {
		if (!(na = realloc(arr, nc * elem)))
			goto nomem;
	} else {
		/* advised before the copy writes it */
		if (!(na = malloc(nc * elem)))
			goto nomem;
		advise_huge(na, nc * elem);
		if (*cap)
			memcpy(na, arr, *cap * elem);
		free(arr);
	}
	memcpy(parr, &na, sizeof(na));
	*cap = nc;
	return 0;
nomem:
	errno = ENOMEM;
	return -1;
}

const char *sp_basename(const char *path)
{
	const char *s = strrchr(path, '/');

	return s ? s + 1 : path;
}

char *sp_site_label(char *buf, size_t len, const char *function, const char *file, int line)
{
	snprintf(buf, len, "%s (%s:%d)", function, file, line);
	return buf;
}

uint64_t sp_hash_bytes(const void *p, size_t n)
{
	uint64_t h = sp_fnv1a64(SP_FNV64_OFFSET, p, n);

	h ^= h >> 29;
	h *= 0xbf58476d1ce4e5b9ULL;
	h ^= h >> 32;
	return h;
}

void hmap_init(struct hmap *m, size_t keylen, size_t vallen)
{
	memset(m, 0, sizeof(*m));
	m->keylen = keylen;
	m->vallen = vallen;
	/* values start 8-aligned whatever the key length */
	m->stride = 8 + ((keylen + 7) & ~(size_t)7) + ((vallen + 7) & ~(size_t)7);
}

void hmap_free(struct hmap *m)
{
	free(m->slots);
	m->slots = NULL;
	m->cap = m->count = 0;
}

#define SLOT(m, i) ((m)->slots + (i) * (m)->stride)
#define VALOFF(m) (8 + (((m)->keylen + 7) & ~(size_t)7))
/* A slot's 8-byte header: 0 when free, else its key's hash with the top
 * bit set. Kept so that growing and deleting never hash a key again and a
 * probe compares keys only where the hashes agree (at 371,799 callers,
 * rehashing on growth and memcmp on every probe were a fifth of `report`).
 * The slot a key lands in is that of sp_hash_bytes as before, so the
 * order hmap_next visits entries in is unchanged. */
#define HDR_USED (1ULL << 63)

/* Zeroed slots for ncap entries. A table of 4 MiB and more is asked to be
 * on huge pages (THP "madvise", this machine's default): a lookup in a
 * large table is a cache and TLB miss (hmap_get was 16 % of record's CPU
 * at 200,000 fingerprints, 90 % of it on the slot's first load) and its
 * first touch a page fault each 4 KiB. */
static uint8_t *slots_alloc(size_t ncap, size_t stride)
{
	const size_t huge = (size_t)2 << 20;
	size_t len;
	void *p;

	if (ncap > SIZE_MAX / stride)
		return NULL;
	len = ncap * stride;
	if (len < 2 * huge)
		return calloc(ncap, stride);
	if (posix_memalign(&p, huge, len))
		return NULL;
	(void)madvise(p, len & ~(huge - 1), MADV_HUGEPAGE);
	memset(p, 0, len);
	return p;
}

static uint64_t slot_hdr(const uint8_t *s)
{
	return *(const uint64_t *)(const void *)s;
}

/* Rehash into ncap slots (a power of two); -1 on ENOMEM, m unchanged. */
static int resize(struct hmap *m, size_t ncap)
{
	uint8_t *old = m->slots;
	size_t ocap = m->cap, i;

	m->slots = slots_alloc(ncap, m->stride);
	if (!m->slots) {
		m->slots = old;
		return -1;
	}
	m->cap = ncap;
	for (i = 0; i < ocap; i++) {
		uint8_t *s = old + i * m->stride;
		uint64_t h = slot_hdr(s);

		if (h) {
			size_t j = h & (ncap - 1);

			while (slot_hdr(SLOT(m, j)))
				j = (j + 1) & (ncap - 1);
			memcpy(SLOT(m, j), s, m->stride);
		}
	}
	free(old);
	return 0;
}

static int grow(struct hmap *m)
{
	return resize(m, m->cap ? m->cap * 2 : 64);
}

int hmap_reserve(struct hmap *m, size_t n)
{
	size_t ncap = m->cap ? m->cap : 64;

	while ((n + 1) * 4 > ncap * 3)
		ncap *= 2;
	return ncap == m->cap ? 0 : resize(m, ncap);
}

void *hmap_get(struct hmap *m, const void *key, int create, int *created)
{
	size_t i;
	uint64_t h;

	if (created)
		*created = 0;
	if (m->cap == 0 || (create && (m->count + 1) * 4 > m->cap * 3)) {
		if (!create && m->cap == 0)
			return NULL;
		if (grow(m) < 0)
			return NULL;
	}
	h = sp_hash_bytes(key, m->keylen) | HDR_USED;
	for (i = h & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
		uint8_t *s = SLOT(m, i);
		uint64_t sh = slot_hdr(s);

		if (!sh) {
			if (!create)
				return NULL;
			*(uint64_t *)(void *)s = h;
			memcpy(s + 8, key, m->keylen);
			m->count++;
			if (created)
				*created = 1;
			return s + VALOFF(m);
		}
		if (sh == h && memcmp(s + 8, key, m->keylen) == 0)
			return s + VALOFF(m);
	}
}

void hmap_prefetch(const struct hmap *m, const void *key)
{
	uintptr_t s, end;

	if (!m->cap)
		return;
	s = (uintptr_t)SLOT(m, sp_hash_bytes(key, m->keylen) & (m->cap - 1));
	/* each cache line of the slot: its value is read too (a query's
	 * 192 bytes) */
	for (end = s + m->stride, s &= ~(uintptr_t)63; s < end; s += 64)
		__builtin_prefetch((const void *)s);
}

int hmap_del(struct hmap *m, const void *key, void *val)
{
	size_t i, j, mask = m->cap - 1;
	uint64_t h;

	if (!m->cap)
		return 0;
	h = sp_hash_bytes(key, m->keylen) | HDR_USED;
	for (i = h & mask;; i = (i + 1) & mask) {
		uint8_t *s = SLOT(m, i);
		uint64_t sh = slot_hdr(s);

		if (!sh)
			return 0;
		if (sh == h && memcmp(s + 8, key, m->keylen) == 0)
			break;
	}
	if (val)
		memcpy(val, SLOT(m, i) + VALOFF(m), m->vallen);
	/* backward shift: every entry of the run after i that may live at i
	 * (its home is not cyclically in (i, j]) moves there */
	for (j = (i + 1) & mask; slot_hdr(SLOT(m, j)); j = (j + 1) & mask) {
		size_t hj = slot_hdr(SLOT(m, j)) & mask;

		if (i <= j ? (hj > i && hj <= j) : (hj > i || hj <= j))
			continue;
		memcpy(SLOT(m, i), SLOT(m, j), m->stride);
		i = j;
	}
	memset(SLOT(m, i), 0, m->stride);
	m->count--;
	return 1;
}

int hmap_put_merge(struct hmap *m, const void *key, void *e, void (*merge)(void *dst, void *src))
{
	int created, rc = 0;
	void *d = hmap_get(m, key, 1, &created);

	if (!d) {
		d = hmap_get(m, e, 1, &created);
		rc = -1;
	}
	if (!d)
		return -1;
	if (created)
		memcpy(d, (const uint8_t *)e + m->keylen, m->vallen);
	else
		merge(d, (uint8_t *)e + m->keylen);
	return rc;
}

void *hmap_next(const struct hmap *m, size_t *it, const void **key)
{
	for (; *it < m->cap; (*it)++) {
		uint8_t *s = SLOT(m, *it);

		if (slot_hdr(s)) {
			(*it)++;
			if (key)
				*key = s + 8;
			return s + VALOFF(m);
		}
	}
	return NULL;
}

/* sp_fmt_ns of a whole number of ns below 1000 s without the floating
 * point of printf (a fifth of report's instructions at 20,000 queries):
 * the hundredths of the unit rounded to nearest, the same digits as
 * "%.2f" of ns / unit wherever the ns are not a tie (then the double's
 * own value decides: 0 to have printf do it). Below 1e12 the exact
 * quotient lies at least a millionth of its size from a tie, far more
 * than a double's error. */
/* q in buf as "%.2f" of q / 100 (dec), or "%llu" of q, then unit; 0 when
 * it does not fit in len. */
static int fmt_q(char *buf, size_t len, uint64_t q, int dec, const char *unit)
{
	char d[32], *p = d + sizeof(d);
	size_t k;

	if (dec) {
		*--p = (char)('0' + q % 10);
		*--p = (char)('0' + q / 10 % 10);
		*--p = '.';
		q /= 100;
	}
	do
		*--p = (char)('0' + q % 10);
	while ((q /= 10));
	k = (size_t)(d + sizeof(d) - p);
	if (k + strlen(unit) >= len)
		return 0;
	memcpy(buf, p, k);
	strcpy(buf + k, unit);
	return 1;
}

static int fmt_ns_whole(char *buf, size_t len, uint64_t n)
{
	static const struct {
		uint64_t below, hundredth;
		const char *unit;
	} u[] = { { 1000u, 0, " ns" },
		  { 1000000u, 10u, " us" },
		  { 1000000000u, 10000u, " ms" },
		  { 1000000000000u, 10000000u, " s" } };
	uint64_t q = n, r;
	size_t i;

	for (i = 0; n >= u[i].below; i++)
		;
	if (u[i].hundredth) {
		q = n / u[i].hundredth;
		r = n % u[i].hundredth;
		if (2 * r == u[i].hundredth)
			return 0;
		q += 2 * r > u[i].hundredth;
	}
	return fmt_q(buf, len, q, u[i].hundredth != 0, u[i].unit);
}

/* sp_fmt_ns of a fractional ns in [0, 1e12) (a mean) without printf's
 * floating point (a twentieth of report's instructions at 20,000
 * queries): the quotient printf is given (ns / 1e3 ...), times 100,
 * rounded to nearest. That product is within 1e-11 of the exact one
 * below 1e5, so where its fraction is not within 1e-6 of a half it
 * rounds as printf rounds the exact value; nearer: 0, for printf. */
static int fmt_ns_frac(char *buf, size_t len, double ns)
{
	static const struct {
		double below, div;
		const char *unit;
	} u[] = {
		{ 1e3, 1, " ns" }, { 1e6, 1e3, " us" }, { 1e9, 1e6, " ms" }, { 1e12, 1e9, " s" }
	};
	double y, f;
	size_t i;

	for (i = 0; ns >= u[i].below; i++)
		;
	y = i ? ns / u[i].div * 100 : ns;
	f = y - floor(y);
	if (fabs(f - 0.5) < 1e-6)
		return 0;
	return fmt_q(buf, len, (uint64_t)floor(y) + (f > 0.5), i != 0, u[i].unit);
}

int sp_permute(void *base, size_t n, size_t size, const size_t *from)
{
	unsigned char *done = calloc(n ? n : 1, 1), *tmp = malloc(size ? size : 1);
	char *b = base;
	size_t i, j, k;

	if (!done || !tmp) {
		free(done);
		free(tmp);
		return -1;
	}
	for (i = 0; i < n; i++) {
		if (done[i])
			continue;
		memcpy(tmp, b + i * size, size);
		for (j = i; (k = from[j]) != i; j = k) {
			if (from[k] != i) /* the next step's element: a cache miss */
				__builtin_prefetch(b + from[k] * size);
			memcpy(b + j * size, b + k * size, size);
			done[j] = 1;
		}
		memcpy(b + j * size, tmp, size);
		done[j] = 1;
	}
	free(done);
	free(tmp);
	return 0;
}

const char *sp_fmt_ns(char *buf, size_t len, double ns)
{
	if (ns >= 0 && !signbit(ns) && ns < 1e12 &&
	    (ns == (double)(uint64_t)ns ? fmt_ns_whole(buf, len, (uint64_t)ns)
					: fmt_ns_frac(buf, len, ns)))
		return buf;
	if (ns < 1e3)
		snprintf(buf, len, "%.0f ns", ns);
	else if (ns < 1e6)
		snprintf(buf, len, "%.2f us", ns / 1e3);
	else if (ns < 1e9)
		snprintf(buf, len, "%.2f ms", ns / 1e6);
	else
		snprintf(buf, len, "%.2f s", ns / 1e9);
	return buf;
}

/* Length of the valid UTF-8 sequence starting at p (a byte >= 0x80), or
 * 0 when it is not one (overlong, surrogate, truncated, > U+10FFFF). */
static size_t utf8_len(const unsigned char *p)
{
	unsigned c = p[0];
	size_t n, i;
	uint32_t cp;

	if (c >= 0xc2 && c <= 0xdf)
		n = 2, cp = c & 0x1f;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3, cp = c & 0x0f;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4, cp = c & 0x07;
	else
		return 0;
	for (i = 1; i < n; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (p[i] & 0x3f);
	}
	if ((n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
	    (n == 4 && (cp < 0x10000 || cp > 0x10ffff)))
		return 0;
	return n;
}

void sp_json_str(FILE *f, const char *s)
{
	const unsigned char *p = (const unsigned char *)(s ? s : "");

	fputc('"', f);
	for (; *p; p++) {
		switch (*p) {
		case '"': fputs("\\\"", f); break;
		case '\\': fputs("\\\\", f); break;
		case '\n': fputs("\\n", f); break;
		case '\r': fputs("\\r", f); break;
		case '\t': fputs("\\t", f); break;
		case '<': fputs("\\u003c", f); break; /* safe inside HTML <script> */
		case '>': fputs("\\u003e", f); break;
		case '&': fputs("\\u0026", f); break;
		default:
			if (*p < 0x20 || *p == 0x7f) {
				fprintf(f, "\\u%04x", *p);
			} else if (*p < 0x80) {
				fputc(*p, f);
			} else {
				size_t n = utf8_len(p);

				if (n == 2 && p[0] == 0xc2 && p[1] < 0xa0) { /* C1: escaped */
					fprintf(f, "\\u%04x", p[1]);
					p++;
				} else if (n) { /* a valid sequence: copy it */
					fwrite(p, 1, n, f);
					p += n - 1;
				} else { /* JSON is UTF-8: a stray byte becomes U+FFFD */
					fputs("\\ufffd", f);
				}
			}
		}
	}
	fputc('"', f);
}

void sp_csv_str(FILE *f, const char *s)
{
	const char *p = s ? s : "";

	/* A leading = + - @ would be a formula in spreadsheets: prefix '. */
	fputc('"', f);
	if (*p == '=' || *p == '+' || *p == '-' || *p == '@')
		fputc('\'', f);
	for (; *p; p++) {
		if (*p == '"')
			fputc('"', f);
		fputc(*p, f);
	}
	fputc('"', f);
}

char *sp_shorten(const char *s, size_t max)
{
	size_t n = strlen(s);
	char *out;

	/* whole when the note would be as long as what it stands for: never
	 * "(1 more bytes)", and never longer than the cut text would be */
	if (n <= max || (size_t)snprintf(NULL, 0, "... (%zu more bytes)", n - max) >= n - max)
		return strdup(s);
	out = malloc(max + 48);
	if (!out)
		return NULL;
	/* cut on a UTF-8 boundary */
	while (max > 0 && ((unsigned char)s[max] & 0xC0) == 0x80)
		max--;
	memcpy(out, s, max);
	snprintf(out + max, 48, "... (%zu more bytes)", n - max);
	return out;
}

void sp_one_line(char *s)
{
	for (; *s; s++)
		if (*s == '\n' || *s == '\r' || *s == '\t')
			*s = ' ';
}

void sp_term_clean(char *s)
{
	unsigned char *r = (unsigned char *)s, *w = r;

	while (*r) {
		size_t n = *r < 0x80 ? 1 : utf8_len(r);

		if (n == 1 && (*r == '\n' || *r == '\r' || *r == '\t')) {
			*w++ = ' ';
		} else if (n == 1 && (*r < 0x20 || *r == 0x7f)) {
			*w++ = '?'; /* ESC, BEL, ... */
		} else if (n == 0 || (n == 2 && r[0] == 0xc2 && r[1] < 0xa0)) {
			*w++ = '?'; /* a stray byte (0x9b is CSI to some terminals), C1 */
			n = n ? n : 1;
		} else {
			memmove(w, r, n);
			w += n;
		}
		r += n;
	}
	*w = 0;
}

void sp_term_str(FILE *f, const char *s)
{
	char *c = strdup(s ? s : "");

	if (!c) {
		fputc('?', f);
		return;
	}
	sp_term_clean(c);
	fputs(c, f);
	free(c);
}

/* The state of a terminal-safe stream: where the cleaned bytes go, and
 * the start of a UTF-8 sequence cut by the end of the last write. */
struct term_out {
	FILE *to;
	unsigned char carry[4];
	size_t ncarry;
};

/* Bytes a UTF-8 sequence starting with lead byte c has (2-4), 0 if c
 * starts none. */
static size_t utf8_want(unsigned c)
{
	return c >= 0xc2 && c <= 0xdf   ? 2
	       : c >= 0xe0 && c <= 0xef ? 3
	       : c >= 0xf0 && c <= 0xf4 ? 4
					: 0;
}

static int plain(unsigned c)
{
	return (c >= 0x20 && c < 0x7f) || c == '\n' || c == '\t';
}

/* Bytes at the start of p (n of them) a terminal shows as they are:
 * printable ASCII, newline and tab. Eight at a time while they are all in
 * 0x20 to 0x7e (the lowest byte outside, if any, sets its high bit in one
 * of the three terms: no borrow reaches it from the bytes below), byte
 * by byte for a word with a newline or a tab, or where the run ends:
 * 10 -> 1.5 instructions a byte of the report. */
static size_t plain_run(const unsigned char *p, size_t n)
{
	const uint64_t ones = 0x0101010101010101ull, high = 0x8080808080808080ull;
	size_t i = 0, end;
	uint64_t w;

	for (;;) {
		for (; i + 8 <= n; i += 8) {
			memcpy(&w, p + i, 8);
			if (((w - 0x20 * ones) | ((w ^ 0x7f * ones) - ones) | w) & high)
				break;
		}
		for (end = i + 8 < n ? i + 8 : n; i < end; i++)
			if (!plain(p[i]))
				return i;
		if (i >= n)
			return n;
	}
}

static ssize_t term_write(void *cookie, const char *buf, size_t n)
{
	struct term_out *t = cookie;
	unsigned char in[4 + 4096], out[4 + 4096];
	/* the plain text before anything to clean (a report's buffer is
	 * mostly all plain) straight through: 25 -> 2 instructions a byte */
	size_t off = t->ncarry ? 0 : plain_run((const unsigned char *)buf, n);

	if (off && fwrite(buf, 1, off, t->to) != off)
		return -1;
	while (off < n) {
		size_t piece = n - off < 4096 ? n - off : 4096, len, i = 0, o = 0;

		memcpy(in, t->carry, t->ncarry);
		memcpy(in + t->ncarry, buf + off, piece);
		len = t->ncarry + piece;
		t->ncarry = 0;
		off += piece;
		while (i < len) {
			unsigned c = in[i];
			size_t want = utf8_want(c), k;

			if (c < 0x80) {
				out[o++] = c == '\n' || c == '\t' || (c >= 0x20 && c != 0x7f) ? c
											      : '?';
				i++;
				continue;
			}
			if (want && i + want > len) { /* cut short: wait for the rest */
				for (k = i + 1; k < len && (in[k] & 0xc0) == 0x80; k++)
					;
				if (k == len) {
					t->ncarry = len - i;
					memcpy(t->carry, in + i, t->ncarry);
					break;
				}
			}
			if (want && i + want <= len && utf8_len(in + i) == want) {
				if (c == 0xc2 && in[i + 1] < 0xa0) { /* C1: CSI, OSC, ... */
					out[o++] = '?';
				} else {
					memcpy(out + o, in + i, want);
					o += want;
				}
				i += want;
			} else {
				out[o++] = '?';
				i++;
			}
		}
		if (o && fwrite(out, 1, o, t->to) != o)
			return -1;
	}
	return (ssize_t)n;
}

static int term_close(void *cookie)
{
	struct term_out *t = cookie;
	int rc = 0;

	while (t->ncarry) { /* a sequence the output ended in the middle of */
		t->ncarry--;
		if (fputc('?', t->to) == EOF)
			rc = -1;
	}
	if (fflush(t->to) != 0)
		rc = -1;
	free(t);
	return rc;
}

FILE *sp_term_stream(FILE *to)
{
	static const cookie_io_functions_t io = { .write = term_write, .close = term_close };
	struct term_out *t = calloc(1, sizeof(*t));
	FILE *f;

	if (!t)
		return NULL;
	t->to = to;
	f = fopencookie(t, "w", io);
	if (!f)
		free(t);
	return f;
}

FILE *sp_term_begin(FILE **std)
{
	FILE *real = *std, *t = sp_term_stream(real);

	if (t)
		*std = t;
	return real;
}

int sp_term_end(FILE **std, FILE *real)
{
	FILE *t = *std;

	if (t == real)
		return 0;
	*std = real;
	return fclose(t) == 0 ? 0 : -1;
}

int sp_parse_u64(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (!s || !*s || *s == '-')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end)
		return -1;
	*out = v;
	return 0;
}

int sp_parse_double(const char *s, double lo, double hi, double *out)
{
	char *end;
	double d;

	if (!s || !*s)
		return -1;
	errno = 0;
	d = strtod(s, &end);
	if (errno || *end || !(d >= lo && d <= hi))
		return -1;
	*out = d;
	return 0;
}

void sp_usage_hint(const char *cmd)
{
	fprintf(stderr, "Try 'sqlprof help %s' for the options.\n", cmd);
}

const char *sp_proc_stat(uint32_t pid, char *buf, size_t len)
{
	char path[64];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%u/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n <= 0)
		return NULL;
	buf[n] = 0;
	return strrchr(buf, ')');
}

void sp_path_root_add(struct sp_path_root *r, const char *path)
{
	const char *slash;
	size_t n;

	if (!path || path[0] != '/' || !(slash = strrchr(path, '/')))
		return;
	n = (size_t)(slash - path) + 1; /* its directory, slash included */
	if (!r->n) {
		if (n >= sizeof(r->root))
			return;
		memcpy(r->root, path, n);
		r->root[n] = 0;
		r->n = n;
		return;
	}
	if (n < r->n)
		r->n = n;
	for (size_t i = 0; i < r->n; i++)
		if (r->root[i] != path[i]) {
			r->n = i;
			break;
		}
	while (r->n && r->root[r->n - 1] != '/')
		r->n--;
	r->root[r->n] = 0;
	if (!r->n)
		r->none = 1; /* nothing in common but "/" is no root */
}

const char *sp_path_root_get(const struct sp_path_root *r)
{
	int depth = 0;

	if (r->none || !r->n)
		return NULL;
	for (size_t i = 1; i < r->n; i++)
		depth += r->root[i] == '/';
	return depth >= 2 ? r->root : NULL; /* "/usr/" or "/home/" saves little */
}

const char *sp_path_rel(const char *path, const char *root)
{
	size_t n = root ? strlen(root) : 0;

	return n && path && !strncmp(path, root, n) && path[n] ? path + n : path;
}
