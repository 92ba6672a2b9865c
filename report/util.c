/* SPDX-License-Identifier: MIT */
/*
 * util.c - see util.h.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

uint64_t sp_hash_bytes(const void *p, size_t n)
{
	const unsigned char *s = p;
	uint64_t h = 0xcbf29ce484222325ULL;

	while (n--) {
		h ^= *s++;
		h *= 0x100000001b3ULL;
	}
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

static int grow(struct hmap *m)
{
	size_t ncap = m->cap ? m->cap * 2 : 64, i;
	uint8_t *old = m->slots;
	size_t ocap = m->cap;

	m->slots = calloc(ncap, m->stride);
	if (!m->slots) {
		m->slots = old;
		return -1;
	}
	m->cap = ncap;
	for (i = 0; i < ocap; i++) {
		uint8_t *s = old + i * m->stride;

		if (s[0]) {
			size_t j = sp_hash_bytes(s + 8, m->keylen) & (ncap - 1);

			while (SLOT(m, j)[0])
				j = (j + 1) & (ncap - 1);
			memcpy(SLOT(m, j), s, m->stride);
		}
	}
	free(old);
	return 0;
}

void *hmap_get(struct hmap *m, const void *key, int create, int *created)
{
	size_t i;

	if (created)
		*created = 0;
	if (m->cap == 0 || (create && (m->count + 1) * 4 > m->cap * 3)) {
		if (!create && m->cap == 0)
			return NULL;
		if (grow(m) < 0)
			return NULL;
	}
	for (i = sp_hash_bytes(key, m->keylen) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
		uint8_t *s = SLOT(m, i);

		if (!s[0]) {
			if (!create)
				return NULL;
			s[0] = 1;
			memcpy(s + 8, key, m->keylen);
			m->count++;
			if (created)
				*created = 1;
			return s + VALOFF(m);
		}
		if (memcmp(s + 8, key, m->keylen) == 0)
			return s + VALOFF(m);
	}
}

void *hmap_next(const struct hmap *m, size_t *it, const void **key)
{
	for (; *it < m->cap; (*it)++) {
		uint8_t *s = SLOT(m, *it);

		if (s[0]) {
			(*it)++;
			if (key)
				*key = s + 8;
			return s + VALOFF(m);
		}
	}
	return NULL;
}

const char *sp_fmt_ns(char *buf, size_t len, double ns)
{
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

				if (n) { /* a valid sequence: copy it */
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

	if (n <= max)
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
