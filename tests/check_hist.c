/* SPDX-License-Identifier: MIT */
/*
 * check_hist.c - unit tests for report/profile/hist.c.
 *
 * The exact percentile on known data; histogram quantiles against the exact
 * ones on 100k values from several distributions (relative error <= 1/64);
 * the edges (empty, one value, values near UINT64_MAX, saturating sum);
 * merge against adding everything to one histogram; a foreach/add_bucket
 * round trip; and a throughput figure for 10M adds (printed, not asserted:
 * timing depends on the machine and on sanitizers).
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hist.h"

static const double qs[] = {
	0, 0.001, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999, 0.9999, 1
};
#define NQ (sizeof(qs) / sizeof(qs[0]))

/* xorshift64*: deterministic, so a failure reproduces. */
static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static uint64_t rnd(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dULL;
}

static double rnd01(void)
{
	return (double)(rnd() >> 11) / 9007199254740992.0; /* [0,1) */
}

/* ---- exact percentiles ------------------------------------------------------ */

START_TEST(test_exact_known)
{
	uint64_t v[100];
	for (int i = 0; i < 100; i++)
		v[i] = (uint64_t)(100 - i); /* 100..1: unsorted on purpose */

	ck_assert_uint_eq(sp_percentile_exact(v, 100, 0.50), 50);
	ck_assert_uint_eq(sp_percentile_exact(v, 100, 0.95), 95);
	ck_assert_uint_eq(sp_percentile_exact(v, 100, 0.99), 99);
	ck_assert_uint_eq(sp_percentile_exact(v, 100, 1.0), 100);
	ck_assert_uint_eq(sp_percentile_exact(v, 100, 0.0), 1);
	ck_assert_uint_eq(sp_percentile_exact(v, 100, 0.07), 7); /* 0.07*100 is 7.000000000000001 */
	ck_assert_uint_eq(sp_percentile_exact(v, 100, 0.001), 1);
	ck_assert_uint_eq(sp_percentile_exact(v, 100, 0.501), 51);
	ck_assert_uint_eq(sp_percentile_exact(v, 100, -1), 1);
	ck_assert_uint_eq(sp_percentile_exact(v, 100, 2), 100);
	ck_assert_uint_eq(sp_percentile_exact(v, 100, NAN), 1);
	ck_assert_uint_eq(v[0], 100); /* input untouched */
	ck_assert_uint_eq(sp_percentile_exact(v, 0, 0.5), 0);

	uint64_t three[] = { 30, 10, 20 };
	ck_assert_uint_eq(sp_percentile_exact(three, 3, 0.5), 20);
	ck_assert_uint_eq(sp_percentile_exact(three, 3, 0.34), 20);
	ck_assert_uint_eq(sp_percentile_exact(three, 3, 1.0 / 3), 10);
}
END_TEST

/* Below 128 every bucket has width 1: quantiles equal the exact ones. */
START_TEST(test_hist_known)
{
	struct sp_hist *h = sp_hist_new();
	ck_assert_ptr_nonnull(h);
	uint64_t v[100];
	for (int i = 0; i < 100; i++) {
		v[i] = (uint64_t)(i + 1);
		sp_hist_add(h, v[i]);
	}
	ck_assert_uint_eq(sp_hist_count(h), 100);
	ck_assert_uint_eq(sp_hist_min(h), 1);
	ck_assert_uint_eq(sp_hist_max(h), 100);
	ck_assert_uint_eq(sp_hist_sum(h), 5050);
	ck_assert_uint_eq(sp_hist_quantile(h, 0.5), 50);
	ck_assert_uint_eq(sp_hist_quantile(h, 0.95), 95);
	ck_assert_uint_eq(sp_hist_quantile(h, 0.99), 99);
	ck_assert_uint_eq(sp_hist_quantile(h, 1), 100);
	for (size_t i = 0; i < NQ; i++)
		ck_assert_uint_eq(sp_hist_quantile(h, qs[i]), sp_percentile_exact(v, 100, qs[i]));
	sp_hist_free(h);
}
END_TEST

/* ---- accuracy on random data ----------------------------------------------- */

enum dist {
	D_UNIFORM_SMALL,
	D_UNIFORM_WIDE,
	D_EXP,
	D_LOGNORMAL,
	D_BIMODAL,
	D_PARETO,
	D_CONST,
	D_NDIST
};
static const char *const dist_name[] = { "uniform 0..1000", "uniform 0..1e9", "exponential",
					 "lognormal",       "bimodal",        "pareto",
					 "constant" };

static uint64_t draw(enum dist d)
{
	double u = rnd01();
	switch (d) {
	case D_UNIFORM_SMALL: return rnd() % 1001;
	case D_UNIFORM_WIDE: return rnd() % 1000000001;
	case D_EXP: return (uint64_t)(-log1p(-u) * 50000.0);
	case D_LOGNORMAL: { /* Box-Muller; latencies in ns around 20 us */
		double z = sqrt(-2.0 * log1p(-u)) * cos(2 * M_PI * rnd01());
		return (uint64_t)exp(log(20000.0) + 1.5 * z);
	}
	case D_BIMODAL: return (rnd() & 1) ? 1000 + rnd() % 100 : 5000000 + rnd() % 1000000;
	case D_PARETO: return (uint64_t)(1000.0 / pow(1.0 - u, 1.0 / 1.2));
	default: return 123456789;
	}
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

static void assert_close(uint64_t got, uint64_t want, const char *what, double q)
{
	double err = fabs((double)got - (double)want);
	ck_assert_msg(err <= (double)want / 64.0,
		      "%s q=%g: histogram %llu, exact %llu (rel err %g > 1/64)", what, q,
		      (unsigned long long)got, (unsigned long long)want,
		      want ? err / (double)want : err);
}

START_TEST(test_accuracy)
{
	enum { N = 100000 };
	uint64_t *v = malloc(N * sizeof(*v));
	ck_assert_ptr_nonnull(v);
	for (int d = 0; d < D_NDIST; d++) {
		struct sp_hist *h = sp_hist_new();
		ck_assert_ptr_nonnull(h);
		uint64_t sum = 0, mn = UINT64_MAX, mx = 0;
		for (int i = 0; i < N; i++) {
			v[i] = draw((enum dist)d);
			sp_hist_add(h, v[i]);
			sum += v[i];
			mn = v[i] < mn ? v[i] : mn;
			mx = v[i] > mx ? v[i] : mx;
		}
		ck_assert_uint_eq(sp_hist_count(h), N);
		ck_assert_uint_eq(sp_hist_sum(h), sum);
		ck_assert_uint_eq(sp_hist_min(h), mn);
		ck_assert_uint_eq(sp_hist_max(h), mx);
		for (size_t i = 0; i < NQ; i++)
			assert_close(sp_hist_quantile(h, qs[i]), sp_percentile_exact(v, N, qs[i]),
				     dist_name[d], qs[i]);
		/* A fine sweep against one sorted copy: rank ceil(k*N/1000). */
		uint64_t *sorted = malloc(N * sizeof(*sorted));
		ck_assert_ptr_nonnull(sorted);
		memcpy(sorted, v, N * sizeof(*sorted));
		qsort(sorted, N, sizeof(*sorted), cmp_u64);
		for (uint64_t k = 0; k <= 1000; k++) {
			uint64_t rank = (k * N + 999) / 1000;
			assert_close(sp_hist_quantile(h, (double)k / 1000.0),
				     sorted[rank ? rank - 1 : 0], dist_name[d], (double)k / 1000.0);
		}
		free(sorted);
		ck_assert_uint_eq(sp_hist_quantile(h, 0), mn);
		ck_assert_uint_eq(sp_hist_quantile(h, 1), mx);
		sp_hist_free(h);
	}
	free(v);
}
END_TEST

/* Every value up to 2^20 and a sweep of large ones: bucket error <= 1/64. */
START_TEST(test_bucket_error)
{
	for (uint64_t x = 0; x < (1u << 20); x += 1 + x / 1000) {
		struct sp_hist *h = sp_hist_new();
		sp_hist_add(h, 0);
		sp_hist_add(h, x);
		sp_hist_add(h, UINT64_MAX);
		assert_close(sp_hist_quantile(h, 0.5), x, "single bucket", 0.5);
		sp_hist_free(h);
	}
	for (int e = 6; e < 64; e++) {
		for (int k = 0; k < 200; k++) {
			uint64_t x = (UINT64_C(1) << e) | (rnd() & ((UINT64_C(1) << e) - 1));
			struct sp_hist *h = sp_hist_new();
			sp_hist_add(h, 0);
			sp_hist_add(h, x);
			sp_hist_add(h, UINT64_MAX);
			assert_close(sp_hist_quantile(h, 0.5), x, "single bucket", 0.5);
			sp_hist_free(h);
		}
	}
}
END_TEST

/* ---- edges ------------------------------------------------------------------------ */

START_TEST(test_empty)
{
	struct sp_hist *h = sp_hist_new();
	ck_assert_ptr_nonnull(h);
	ck_assert_uint_eq(sp_hist_count(h), 0);
	ck_assert_uint_eq(sp_hist_min(h), 0);
	ck_assert_uint_eq(sp_hist_max(h), 0);
	ck_assert_uint_eq(sp_hist_sum(h), 0);
	ck_assert_uint_eq(sp_hist_lost(h), 0);
	for (size_t i = 0; i < NQ; i++)
		ck_assert_uint_eq(sp_hist_quantile(h, qs[i]), 0);
	sp_hist_add_n(h, 5, 0); /* adding nothing changes nothing */
	ck_assert_uint_eq(sp_hist_count(h), 0);
	ck_assert_uint_eq(sp_hist_min(h), 0);
	sp_hist_add_bucket(h, 5, 0);
	ck_assert_uint_eq(sp_hist_count(h), 0);

	struct sp_hist *e2 = sp_hist_new();
	sp_hist_merge(h, e2);
	ck_assert_uint_eq(sp_hist_count(h), 0);
	ck_assert_uint_eq(sp_hist_quantile(h, 0.5), 0);
	sp_hist_free(e2);
	sp_hist_free(h);
	sp_hist_free(NULL);
}
END_TEST

START_TEST(test_single)
{
	static const uint64_t vals[] = { 0, 1, 63, 64, 127, 128, 1000, 123456789, UINT64_MAX };
	for (size_t k = 0; k < sizeof(vals) / sizeof(vals[0]); k++) {
		struct sp_hist *h = sp_hist_new();
		sp_hist_add(h, vals[k]);
		ck_assert_uint_eq(sp_hist_count(h), 1);
		ck_assert_uint_eq(sp_hist_min(h), vals[k]);
		ck_assert_uint_eq(sp_hist_max(h), vals[k]);
		ck_assert_uint_eq(sp_hist_sum(h), vals[k]);
		for (size_t i = 0; i < NQ; i++)
			ck_assert_uint_eq(sp_hist_quantile(h, qs[i]), vals[k]);
		sp_hist_free(h);
	}
	/* add_n: the same value many times */
	struct sp_hist *h = sp_hist_new();
	sp_hist_add_n(h, 1000, 1000000);
	ck_assert_uint_eq(sp_hist_count(h), 1000000);
	ck_assert_uint_eq(sp_hist_sum(h), 1000000000);
	ck_assert_uint_eq(sp_hist_quantile(h, 0.5), 1000); /* clamped to [min,max] */
	sp_hist_free(h);
}
END_TEST

START_TEST(test_huge)
{
	struct sp_hist *h = sp_hist_new();
	uint64_t v[] = { UINT64_MAX,
			 UINT64_MAX - 1,
			 UINT64_C(1) << 63,
			 (UINT64_C(1) << 63) - 1,
			 UINT64_MAX / 3,
			 UINT64_MAX - (UINT64_C(1) << 56),
			 1 };
	size_t n = sizeof(v) / sizeof(v[0]);
	for (size_t i = 0; i < n; i++)
		sp_hist_add(h, v[i]);
	ck_assert_uint_eq(sp_hist_count(h), n);
	ck_assert_uint_eq(sp_hist_max(h), UINT64_MAX);
	ck_assert_uint_eq(sp_hist_min(h), 1);
	ck_assert_uint_eq(sp_hist_sum(h), UINT64_MAX); /* saturated, not wrapped */
	ck_assert_uint_eq(sp_hist_quantile(h, 1), UINT64_MAX);
	for (size_t i = 0; i < NQ; i++)
		assert_close(sp_hist_quantile(h, qs[i]), sp_percentile_exact(v, n, qs[i]), "huge",
			     qs[i]);

	sp_hist_add_n(h, UINT64_MAX, UINT64_MAX / 2); /* v*n overflows: still saturates */
	ck_assert_uint_eq(sp_hist_sum(h), UINT64_MAX);
	assert_close(sp_hist_quantile(h, 0.5), UINT64_MAX, "huge", 0.5);
	ck_assert_uint_eq(sp_hist_quantile(h, 1), UINT64_MAX);
	sp_hist_free(h);
}
END_TEST

/* ---- merge and round trip ------------------------------------------------------- */

START_TEST(test_merge)
{
	struct sp_hist *all = sp_hist_new(), *a = sp_hist_new(), *b = sp_hist_new(),
		       *m = sp_hist_new();
	for (int i = 0; i < 50000; i++) {
		uint64_t x = draw(D_LOGNORMAL), y = draw(D_BIMODAL);
		sp_hist_add(all, x);
		sp_hist_add(all, y);
		sp_hist_add(a, x);
		sp_hist_add(b, y);
	}
	sp_hist_merge(m, a); /* into an empty one */
	sp_hist_merge(m, b);
	ck_assert_uint_eq(sp_hist_count(m), sp_hist_count(all));
	ck_assert_uint_eq(sp_hist_min(m), sp_hist_min(all));
	ck_assert_uint_eq(sp_hist_max(m), sp_hist_max(all));
	ck_assert_uint_eq(sp_hist_sum(m), sp_hist_sum(all));
	for (int q = 0; q <= 1000; q++)
		ck_assert_uint_eq(sp_hist_quantile(m, q / 1000.0),
				  sp_hist_quantile(all, q / 1000.0));
	ck_assert_uint_eq(sp_hist_count(a), 50000); /* src unchanged */

	sp_hist_merge(a, b); /* into a non-empty one */
	for (int q = 0; q <= 1000; q++)
		ck_assert_uint_eq(sp_hist_quantile(a, q / 1000.0),
				  sp_hist_quantile(all, q / 1000.0));

	sp_hist_free(all);
	sp_hist_free(a);
	sp_hist_free(b);
	sp_hist_free(m);
}
END_TEST

struct stored {
	uint64_t lo[59 * 64], count[59 * 64];
	size_t n;
};

static int store_bucket(uint64_t lo, uint64_t count, void *arg)
{
	struct stored *st = arg;
	ck_assert_uint_lt(st->n, 59 * 64);
	ck_assert_uint_gt(count, 0);
	if (st->n > 0)
		ck_assert_uint_gt(lo, st->lo[st->n - 1]); /* increasing */
	st->lo[st->n] = lo;
	st->count[st->n++] = count;
	return 0;
}

static int stop_at_third(uint64_t lo, uint64_t count, void *arg)
{
	int *calls = arg;
	(void)lo;
	(void)count;
	return ++*calls == 3 ? 42 : 0;
}

START_TEST(test_round_trip)
{
	struct sp_hist *h = sp_hist_new();
	for (int i = 0; i < 100000; i++)
		sp_hist_add(h, draw((enum dist)(i % D_NDIST)));
	sp_hist_add(h, 0);
	sp_hist_add(h, UINT64_MAX);

	static struct stored st;
	st.n = 0;
	ck_assert_int_eq(sp_hist_foreach(h, store_bucket, &st), 0);
	uint64_t total = 0;
	for (size_t i = 0; i < st.n; i++)
		total += st.count[i];
	ck_assert_uint_eq(total, sp_hist_count(h));

	struct sp_hist *r = sp_hist_new();
	for (size_t i = 0; i < st.n; i++)
		sp_hist_add_bucket(r, st.lo[i], st.count[i]);
	ck_assert_uint_eq(sp_hist_count(r), sp_hist_count(h));
	sp_hist_set_minmax_sum(r, sp_hist_min(h), sp_hist_max(h), sp_hist_sum(h));
	ck_assert_uint_eq(sp_hist_min(r), sp_hist_min(h));
	ck_assert_uint_eq(sp_hist_max(r), sp_hist_max(h));
	ck_assert_uint_eq(sp_hist_sum(r), sp_hist_sum(h));
	for (int q = 0; q <= 10000; q++)
		ck_assert_uint_eq(sp_hist_quantile(r, q / 10000.0),
				  sp_hist_quantile(h, q / 10000.0));

	/* and the rebuilt one stores the same buckets */
	static struct stored st2;
	st2.n = 0;
	sp_hist_foreach(r, store_bucket, &st2);
	ck_assert_uint_eq(st2.n, st.n);
	ck_assert(memcmp(st.lo, st2.lo, st.n * sizeof(st.lo[0])) == 0);
	ck_assert(memcmp(st.count, st2.count, st.n * sizeof(st.count[0])) == 0);

	int calls = 0;
	ck_assert_int_eq(sp_hist_foreach(h, stop_at_third, &calls), 42);
	ck_assert_int_eq(calls, 3);

	sp_hist_free(h);
	sp_hist_free(r);
}
END_TEST

/* Without set_minmax_sum, min and max are the outer bucket bounds. */
START_TEST(test_add_bucket_alone)
{
	struct sp_hist *h = sp_hist_new();
	sp_hist_add_bucket(h, 5, 2);
	sp_hist_add_bucket(h, 1000, 3); /* bucket [1000,1007] */
	ck_assert_uint_eq(sp_hist_count(h), 5);
	ck_assert_uint_eq(sp_hist_min(h), 5);
	ck_assert_uint_eq(sp_hist_max(h), 1007);
	ck_assert_uint_eq(sp_hist_quantile(h, 0.4), 5);
	ck_assert_uint_eq(sp_hist_quantile(h, 0.6), 1003);
	sp_hist_free(h);
}
END_TEST

/* ---- throughput ------------------------------------------------------------------- */

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Few buckets are kept sparse, more in groups (hist.c): the same answers
 * either way, buckets in increasing order whatever the order of adding,
 * and a merge or a bucket taken off across the change. Values below 128
 * are exact, so each quantile is the exact one. */
static int collect_bucket(uint64_t lo, uint64_t count, void *arg)
{
	uint64_t *o = arg;

	ck_assert_uint_gt(lo + 1, o[0]); /* increasing */
	o[0] = lo + 1;
	o[1] += count;
	o[2]++;
	return 0;
}

START_TEST(test_sparse_dense)
{
	uint64_t v[200], o[3];
	size_t n = 0;
	unsigned k, nb;

	for (nb = 1; nb <= 12; nb++) {
		struct sp_hist *h = sp_hist_new(), *m = sp_hist_new();

		ck_assert_ptr_nonnull(h);
		ck_assert_ptr_nonnull(m);
		n = 0;
		for (k = nb; k-- > 0;) /* decreasing: each new bucket goes first */
			for (unsigned r = 0; r <= k; r++) {
				sp_hist_add(h, 10 * k + 3);
				v[n++] = 10 * k + 3;
			}
		for (double q = 0; q <= 1.0; q += 0.05)
			ck_assert_uint_eq(sp_hist_quantile(h, q), sp_percentile_exact(v, n, q));
		memset(o, 0, sizeof(o));
		sp_hist_foreach(h, collect_bucket, o);
		ck_assert_uint_eq(o[1], n);
		ck_assert_uint_eq(o[2], nb);
		sp_hist_add(m, 5);
		sp_hist_merge(m, h);
		ck_assert_uint_eq(sp_hist_count(m), n + 1);
		sp_hist_sub_bucket(m, 5, 1);
		sp_hist_sub_bucket(m, 7, 1); /* no such bucket: nothing */
		ck_assert_uint_eq(sp_hist_count(m), n);
		memset(o, 0, sizeof(o));
		sp_hist_foreach(m, collect_bucket, o);
		ck_assert_uint_eq(o[1], n);
		ck_assert_uint_eq(o[2], nb); /* 5's bucket, emptied, is not visited */
		sp_hist_free(h);
		sp_hist_free(m);
	}
}
END_TEST

START_TEST(test_throughput)
{
	enum { N = 10000000, NV = 1 << 16 };
	static uint64_t vals[NV];
	for (int i = 0; i < NV; i++)
		vals[i] = draw(D_LOGNORMAL);

	struct sp_hist *h = sp_hist_new();
	double t0 = now_s();
	for (int i = 0; i < N; i++)
		sp_hist_add(h, vals[i & (NV - 1)]);
	double dt = now_s() - t0;
	ck_assert_uint_eq(sp_hist_count(h), N);
	printf("hist: %d adds in %.1f ms = %.1f M adds/s (target >= 10 M/s, not asserted)\n", N,
	       dt * 1e3, N / dt / 1e6);
	sp_hist_free(h);
}
END_TEST

static Suite *hist_suite(void)
{
	Suite *s = suite_create("hist");
	TCase *tc;

	tc = tcase_create("exact");
	tcase_add_test(tc, test_exact_known);
	tcase_add_test(tc, test_hist_known);
	suite_add_tcase(s, tc);

	tc = tcase_create("accuracy");
	tcase_add_test(tc, test_accuracy);
	tcase_add_test(tc, test_bucket_error);
	tcase_set_timeout(tc, 60); /* slow under sanitizers */
	suite_add_tcase(s, tc);

	tc = tcase_create("edges");
	tcase_add_test(tc, test_empty);
	tcase_add_test(tc, test_single);
	tcase_add_test(tc, test_huge);
	suite_add_tcase(s, tc);

	tc = tcase_create("merge_and_store");
	tcase_add_test(tc, test_merge);
	tcase_add_test(tc, test_round_trip);
	tcase_add_test(tc, test_add_bucket_alone);
	tcase_add_test(tc, test_sparse_dense);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);

	tc = tcase_create("throughput");
	tcase_add_test(tc, test_throughput);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);

	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(hist_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
