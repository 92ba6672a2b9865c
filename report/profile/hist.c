/* SPDX-License-Identifier: MIT */
/*
 * hist.c - log-linear histograms and nearest-rank percentiles.
 *
 * Layout: 59 groups of 64 counters.  Group 0 holds the values 0..63 one per
 * bucket; group g >= 1 holds [2^(g+5), 2^(g+6)) split into 64 buckets of
 * width 2^(g-1), so groups 0 and 1 (values below 128) are exact and a
 * bucket is never wider than 1/64 of its lower bound.  Up to NSPARSE
 * buckets are kept in the histogram itself (112 bytes); beyond, a group's
 * counters are allocated the first time a value lands in it: latencies of
 * one query usually span a handful of powers of two, so a histogram costs
 * a few KiB however many executions it has seen (at most 59 * 512 bytes).
 *
 * What it does not do: locking, or decay of old values.  Counts are not
 * checked for overflow (2^64 additions); the sum saturates.
 */
#include "hist.h"

#include <math.h>
#include <stdlib.h>

#include "util.h"
#include <string.h>

#define SUB_BITS 6
#define SUB (1u << SUB_BITS) /* buckets per group */
#define NGROUPS 59           /* group 0, then one per power of two 2^6..2^63 */

/* Buckets a histogram keeps in itself, sorted, before it takes groups:
 * most histograms of a recording hold one to three (a text's few
 * executions), and the groups' 59 pointers and a 512-byte group cost
 * about 1 KB a histogram (200,000 fingerprints: 200 MB of the
 * collector's 944 MB); sparse, 112 bytes. */
#define NSPARSE 6

struct sp_hist {
	uint64_t count; /* sum of all bucket counts */
	uint64_t min, max, sum;
	uint64_t lost;  /* values dropped because a group could not be allocated */
	uint64_t **grp; /* NGROUPS groups once dense; NULL while sparse */
	uint64_t scnt[NSPARSE];
	uint16_t sidx[NSPARSE]; /* bucket g * SUB + s, increasing */
	uint8_t nsparse;
};

static inline void bucket_of(uint64_t v, unsigned *g, unsigned *s)
{
	if (v < SUB) {
		*g = 0;
		*s = (unsigned)v;
		return;
	}
	unsigned e = 63u - (unsigned)__builtin_clzll(v); /* 6..63 */
	*g = e - (SUB_BITS - 1);
	*s = (unsigned)(v >> (e - SUB_BITS)) & (SUB - 1);
}

static uint64_t bucket_lo(unsigned g, unsigned s)
{
	if (g == 0)
		return s;
	unsigned e = g + (SUB_BITS - 1);
	return (UINT64_C(1) << e) | ((uint64_t)s << (e - SUB_BITS));
}

static uint64_t bucket_width(unsigned g)
{
	return g <= 1 ? 1 : UINT64_C(1) << (g - 1);
}

/* The value reported for a bucket: its middle (rounded down). */
static uint64_t bucket_mid(unsigned g, unsigned s)
{
	return bucket_lo(g, s) + (bucket_width(g) - 1) / 2;
}

static uint64_t sat_add(uint64_t a, uint64_t b)
{
	uint64_t r;
	return __builtin_add_overflow(a, b, &r) ? UINT64_MAX : r;
}

static uint64_t sat_mul(uint64_t a, uint64_t b)
{
	uint64_t r;
	return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

struct sp_hist *sp_hist_new(void)
{
	struct sp_hist *h = calloc(1, sizeof(*h));
	if (h)
		h->min = UINT64_MAX;
	return h;
}

void sp_hist_free(struct sp_hist *h)
{
	if (!h)
		return;
	if (h->grp) {
		for (unsigned g = 0; g < NGROUPS; g++)
			free(h->grp[g]);
		free(h->grp);
	}
	free(h);
}

/* The counters of group g, allocated on first use; NULL on ENOMEM. */
static uint64_t *group(struct sp_hist *h, unsigned g)
{
	if (!h->grp[g])
		h->grp[g] = calloc(SUB, sizeof(uint64_t));
	return h->grp[g];
}

/* From the sparse buckets to groups. 0, or -1 (ENOMEM: still sparse). */
static int densify(struct sp_hist *h)
{
	uint64_t **grp = calloc(NGROUPS, sizeof(*grp));
	unsigned i;

	if (!grp)
		return -1;
	for (i = 0; i < h->nsparse; i++) {
		unsigned g = h->sidx[i] / SUB;

		if (!grp[g] && !(grp[g] = calloc(SUB, sizeof(uint64_t)))) {
			for (g = 0; g < NGROUPS; g++)
				free(grp[g]);
			free(grp);
			return -1;
		}
	}
	for (i = 0; i < h->nsparse; i++)
		grp[h->sidx[i] / SUB][h->sidx[i] % SUB] = h->scnt[i];
	h->grp = grp;
	h->nsparse = 0;
	return 0;
}

/* The counter of bucket s of group g, made on first use; NULL on ENOMEM. */
static uint64_t *counter(struct sp_hist *h, unsigned g, unsigned s)
{
	unsigned idx = g * SUB + s, i, j;

	if (!h->grp) {
		for (i = 0; i < h->nsparse && h->sidx[i] < idx; i++)
			;
		if (i < h->nsparse && h->sidx[i] == idx)
			return &h->scnt[i];
		if (h->nsparse < NSPARSE) {
			for (j = h->nsparse; j > i; j--) {
				h->sidx[j] = h->sidx[j - 1];
				h->scnt[j] = h->scnt[j - 1];
			}
			h->sidx[i] = (uint16_t)idx;
			h->scnt[i] = 0;
			h->nsparse++;
			return &h->scnt[i];
		}
		if (densify(h) < 0)
			return NULL;
	}
	uint64_t *b = group(h, g);
	return b ? &b[s] : NULL;
}

/* Call fn(g, s, count) for each bucket with a count, in increasing
 * order; stops at and returns fn's first non-zero value. */
static int each(const struct sp_hist *h, int (*fn)(unsigned g, unsigned s, uint64_t n, void *a),
		void *a)
{
	int rc;

	if (!h->grp) {
		for (unsigned i = 0; i < h->nsparse; i++)
			if (h->scnt[i] &&
			    (rc = fn(h->sidx[i] / SUB, h->sidx[i] % SUB, h->scnt[i], a)))
				return rc;
		return 0;
	}
	for (unsigned g = 0; g < NGROUPS; g++) {
		const uint64_t *b = h->grp[g];
		if (!b)
			continue;
		for (unsigned s = 0; s < SUB; s++)
			if (b[s] && (rc = fn(g, s, b[s], a)))
				return rc;
	}
	return 0;
}

void sp_hist_add_n(struct sp_hist *h, uint64_t v, uint64_t n)
{
	unsigned g, s;

	if (n == 0)
		return;
	bucket_of(v, &g, &s);
	uint64_t *b = counter(h, g, s);
	if (__builtin_expect(!b, 0)) {
		h->lost += n;
		return;
	}
	*b += n;
	h->count += n;
	if (v < h->min)
		h->min = v;
	if (v > h->max)
		h->max = v;
	h->sum = sat_add(h->sum, n == 1 ? v : sat_mul(v, n));
}

void sp_hist_add(struct sp_hist *h, uint64_t v)
{
	sp_hist_add_n(h, v, 1);
}

static int merge_one(unsigned g, unsigned s, uint64_t n, void *a)
{
	struct sp_hist *dst = a;
	uint64_t *b = counter(dst, g, s);

	if (b) {
		*b += n;
		dst->count += n;
	} else {
		dst->lost += n;
	}
	return 0;
}

void sp_hist_merge(struct sp_hist *dst, const struct sp_hist *src)
{
	each(src, merge_one, dst);
	if (src->count > 0) {
		if (src->min < dst->min)
			dst->min = src->min;
		if (src->max > dst->max)
			dst->max = src->max;
		dst->sum = sat_add(dst->sum, src->sum);
	}
	dst->lost += src->lost;
}

uint64_t sp_hist_count(const struct sp_hist *h)
{
	return h->count;
}

uint64_t sp_hist_min(const struct sp_hist *h)
{
	return h->count ? h->min : 0;
}

uint64_t sp_hist_max(const struct sp_hist *h)
{
	return h->count ? h->max : 0;
}

uint64_t sp_hist_sum(const struct sp_hist *h)
{
	return h->count ? h->sum : 0;
}

uint64_t sp_hist_lost(const struct sp_hist *h)
{
	return h->lost;
}

/*
 * Nearest rank ceil(q*n) in [1,n] for n > 0.  q*n is computed in double,
 * where e.g. 0.07*100 comes out as 7.000000000000001; a product within a
 * relative 1e-12 of an integer is taken to be that integer.
 */
static uint64_t nearest_rank(double q, uint64_t n)
{
	if (!(q > 0)) /* also NaN */
		return 1;
	if (q >= 1)
		return n;
	double r = q * (double)n;
	double f = floor(r);
	if (f >= 18446744073709551615.0)
		return n;
	uint64_t k = (uint64_t)f;
	if (r - f > r * 1e-12)
		k++;
	if (k < 1)
		k = 1;
	if (k > n)
		k = n;
	return k;
}

struct rank {
	const struct sp_hist *h;
	uint64_t k, cum, v;
};

static int rank_one(unsigned g, unsigned s, uint64_t n, void *a)
{
	struct rank *r = a;

	r->cum += n;
	if (r->cum < r->k)
		return 0;
	r->v = bucket_mid(g, s);
	if (r->v < r->h->min)
		r->v = r->h->min;
	if (r->v > r->h->max)
		r->v = r->h->max;
	return 1;
}

uint64_t sp_hist_quantile(const struct sp_hist *h, double q)
{
	if (h->count == 0)
		return 0;
	uint64_t k = nearest_rank(q, h->count);
	if (k == 1)
		return h->min;
	if (k == h->count)
		return h->max;

	struct rank r = { h, k, 0, 0 };
	if (each(h, rank_one, &r))
		return r.v;
	return h->max; /* not reached while count matches the buckets */
}

struct visit {
	int (*fn)(uint64_t bucket_lo, uint64_t count, void *arg);
	void *arg;
};

static int visit_one(unsigned g, unsigned s, uint64_t n, void *a)
{
	const struct visit *v = a;

	return v->fn(bucket_lo(g, s), n, v->arg);
}

int sp_hist_foreach(const struct sp_hist *h,
		    int (*fn)(uint64_t bucket_lo, uint64_t count, void *arg), void *arg)
{
	struct visit v = { fn, arg };

	return each(h, visit_one, &v);
}

void sp_hist_add_bucket(struct sp_hist *h, uint64_t lo, uint64_t count)
{
	unsigned g, s;

	if (count == 0)
		return;
	bucket_of(lo, &g, &s);
	uint64_t *b = counter(h, g, s);
	if (!b) {
		h->lost += count;
		return;
	}
	*b += count;
	h->count += count;
	uint64_t first = bucket_lo(g, s), last = first + (bucket_width(g) - 1);
	if (first < h->min)
		h->min = first;
	if (last > h->max)
		h->max = last;
	h->sum = sat_add(h->sum, sat_mul(bucket_mid(g, s), count));
}

void sp_hist_sub_bucket(struct sp_hist *h, uint64_t lo, uint64_t count)
{
	unsigned g, s;

	uint64_t *b;

	bucket_of(lo, &g, &s);
	if (h->grp) {
		if (!h->grp[g])
			return;
		b = &h->grp[g][s];
	} else {
		unsigned i;

		for (i = 0; i < h->nsparse && h->sidx[i] != g * SUB + s; i++)
			;
		if (i == h->nsparse)
			return;
		b = &h->scnt[i];
	}
	if (count > *b)
		count = *b;
	*b -= count;
	h->count -= count;
}

void sp_hist_set_minmax_sum(struct sp_hist *h, uint64_t min, uint64_t max, uint64_t sum)
{
	h->min = min;
	h->max = max;
	h->sum = sum;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

uint64_t sp_percentile_exact(const uint64_t *v, size_t n, double q)
{
	if (n == 0 || n > SIZE_MAX / sizeof(uint64_t))
		return 0;
	uint64_t *c = malloc(n * sizeof(*c));
	if (!c)
		return 0;
	memcpy(c, v, n * sizeof(*c));
	sp_qsort(c, n, sizeof(*c), cmp_u64);
	uint64_t r = c[nearest_rank(q, n) - 1];
	free(c);
	return r;
}
