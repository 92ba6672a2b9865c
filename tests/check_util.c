/* SPDX-License-Identifier: MIT */
/*
 * check_util.c - unit tests for the shared helpers of report/util.c and
 * report/hash.h: growing arrays (contents kept, capacity doubled from the
 * first size, a size that would overflow refused with the array left as
 * it was), base names, site labels, FNV-1a against published vectors, and
 * the query kind's text (profile/kind.h).
 */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fingerprint.h"
#include "hash.h"
#include "kind.h"
#include "util.h"

START_TEST(test_grow)
{
	uint32_t *v = NULL;
	size_t cap = 0, n;

	for (n = 0; n < 1000; n++) {
		ck_assert_int_eq(SP_GROW(v, cap, n + 1, 16), 0);
		ck_assert_uint_ge(cap, n + 1);
		v[n] = (uint32_t)n * 7;
	}
	ck_assert_uint_eq(cap, 1024); /* 16 doubled six times */
	for (n = 0; n < 1000; n++)
		ck_assert_uint_eq(v[n], n * 7);
	/* room already there: nothing moves */
	{
		uint32_t *was = v;

		ck_assert_int_eq(SP_GROW(v, cap, 10, 16), 0);
		ck_assert_ptr_eq(v, was);
		ck_assert_uint_eq(cap, 1024);
	}
	/* several at once (need well past double) */
	ck_assert_int_eq(SP_GROW(v, cap, 5000, 16), 0);
	ck_assert_uint_eq(cap, 8192);
	ck_assert_uint_eq(v[999], 999 * 7);
	free(v);
}
END_TEST

START_TEST(test_grow_overflow)
{
	uint64_t *v = NULL, *was;
	size_t cap = 0;

	ck_assert_int_eq(SP_GROW(v, cap, 4, 4), 0);
	v[3] = 42;
	was = v;
	errno = 0;
	ck_assert_int_eq(SP_GROW(v, cap, SIZE_MAX / 4, 4), -1);
	ck_assert_int_eq(errno, ENOMEM);
	ck_assert_ptr_eq(v, was); /* still the caller's, unchanged */
	ck_assert_uint_eq(cap, 4);
	ck_assert_uint_eq(v[3], 42);
	ck_assert_int_eq(SP_GROW(v, cap, SIZE_MAX, 4), -1);
	ck_assert_uint_eq(cap, 4);
	free(v);
}
END_TEST

START_TEST(test_basename_label)
{
	char buf[64];

	ck_assert_str_eq(sp_basename("/usr/lib/libsqlite3.so.0"), "libsqlite3.so.0");
	ck_assert_str_eq(sp_basename("app"), "app");
	ck_assert_str_eq(sp_basename("dir/"), "");
	ck_assert_str_eq(sp_site_label(buf, sizeof(buf), "main", "app.c", 42), "main (app.c:42)");
	sp_site_label(buf, 8, "function", "f.c", 1); /* cut, terminated */
	ck_assert_str_eq(buf, "functio");
}
END_TEST

START_TEST(test_fnv)
{
	/* FNV-1a test vectors (the FNV authors' list) */
	ck_assert_uint_eq(sp_fnv1a64(SP_FNV64_OFFSET, "", 0), 0xcbf29ce484222325ULL);
	ck_assert_uint_eq(sp_fnv1a64(SP_FNV64_OFFSET, "a", 1), 0xaf63dc4c8601ec8cULL);
	ck_assert_uint_eq(sp_fnv1a64(SP_FNV64_OFFSET, "foobar", 6), 0x85944171f73967e8ULL);
	ck_assert_uint_eq(sp_fnv1a32_str("a"), 0xe40c292cu);
	ck_assert_uint_eq(sp_fnv1a32_str("foobar"), 0xbf9cf968u);
	/* fingerprint ids are stored in profiles: sp_hash64 is plain FNV-1a */
	ck_assert_uint_eq(sp_hash64("foobar", 6), 0x85944171f73967e8ULL);
}
END_TEST

/* sp_shorten: cut with its note, or whole when the note would be no
 * shorter than the bytes it stands for ("(1 more bytes)" never). */
START_TEST(test_shorten)
{
	char big[200], *s;

	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	s = sp_shorten(big, 100);
	ck_assert_ptr_nonnull(s);
	ck_assert_str_eq(s + 100, "... (99 more bytes)");
	free(s);
	big[101] = 0; /* 1 byte over */
	s = sp_shorten(big, 100);
	ck_assert_str_eq(s, big);
	free(s);
	big[101] = 'a';
	big[118] = 0; /* 18 over: "... (18 more bytes)" is 19 */
	s = sp_shorten(big, 100);
	ck_assert_str_eq(s, big);
	free(s);
	big[118] = 'a';
	big[120] = 0; /* 20 over: the note (19) is shorter */
	s = sp_shorten(big, 100);
	ck_assert_str_eq(s + 100, "... (20 more bytes)");
	free(s);
}
END_TEST

START_TEST(test_kind)
{
	/* "exec" is an exec; anything else, NULL included, a statement (what
	 * every reader of the kind column did before the enum) */
	ck_assert_int_eq(sp_qkind_parse("exec"), SP_QK_EXEC);
	ck_assert_int_eq(sp_qkind_parse("stmt"), SP_QK_STMT);
	ck_assert_int_eq(sp_qkind_parse(NULL), SP_QK_STMT);
	ck_assert_int_eq(sp_qkind_parse("EXEC"), SP_QK_STMT);
	ck_assert_int_eq(sp_qkind_parse("execx"), SP_QK_STMT);
	ck_assert_int_eq(sp_qkind_parse(""), SP_QK_STMT);
	ck_assert_str_eq(sp_qkind_name(SP_QK_EXEC), "exec");
	ck_assert_str_eq(sp_qkind_name(SP_QK_STMT), "stmt");
	ck_assert_int_eq(sp_qkind_parse(sp_qkind_name(SP_QK_EXEC)), SP_QK_EXEC);
}
END_TEST

/* sp_fmt_ns prints what "%.2f" of the double prints, whole ns and
 * fractional (a mean, its own path): at each unit's edges, at ties
 * (x.xx5, where the double decides), and at 200,000 pseudo-random values
 * of every size below 1000 s, and as many means (a total over a count) */
static void fmt_ref(char *b, size_t len, double ns)
{
	if (ns < 1e3)
		snprintf(b, len, "%.0f ns", ns);
	else if (ns < 1e6)
		snprintf(b, len, "%.2f us", ns / 1e3);
	else if (ns < 1e9)
		snprintf(b, len, "%.2f ms", ns / 1e6);
	else
		snprintf(b, len, "%.2f s", ns / 1e9);
}

static void fmt_same(double ns)
{
	char got[64], want[64];

	sp_fmt_ns(got, sizeof(got), ns);
	fmt_ref(want, sizeof(want), ns);
	ck_assert_msg(!strcmp(got, want), "%.17g: got '%s', want '%s'", ns, got, want);
}

START_TEST(test_fmt_ns)
{
	static const double edges[] = {
		0,          1,          999,          1000,         1004,
		1005,       1006,       1015,         1025,         9995,
		999994,     999995,     999996,       999999,       1000000,
		1005000,    1015000,    999995000,    999999999,    1000000000,
		1005000000, 1015000000, 999994999999, 999995000000, 999999999999,
		1e12,       1e12 + 1,   5e15,         123.5,        1234.5
	};
	uint64_t x = 88172645463325252ull;

	for (size_t i = 0; i < sizeof(edges) / sizeof(edges[0]); i++)
		fmt_same(edges[i]);
	for (int i = 0; i < 200000; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		fmt_same((double)(x % (1ull << (10 + i % 30))));
		if (i % 1000 == 0)
			fmt_same((double)(x % 1000000000000ull) / 7.0); /* a mean */
		if (i % 4) /* means of every size, and ties: hundredths and halves */
			continue;
		fmt_same((double)(x % (1ull << (10 + i % 30))) / (double)(2 + i % 997));
		fmt_same((double)(x % (1ull << (10 + i % 30))) / 1e2 + 0.005 * (i % 3));
		fmt_same((double)(x % 1000) + 0.5);
	}
}
END_TEST

/* sp_permute puts each element where the permutation says, in place:
 * identity, one cycle, and random permutations of 1 to 300 elements */
START_TEST(test_permute)
{
	uint64_t x = 88172645463325252ull;

	for (size_t n = 0; n <= 300; n++) {
		size_t from[300] = { 0 }, i, j, t;
		struct {
			size_t v;
			char pad[13];
		} e[300];

		for (i = 0; i < n; i++)
			from[i] = i;
		for (i = n; i > 1 && n % 3; i--) { /* every third n: the identity */
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			j = (size_t)(x % i);
			t = from[i - 1], from[i - 1] = from[j], from[j] = t;
		}
		if (n == 7)
			for (i = 0; i < n; i++)
				from[i] = (i + 1) % n; /* one cycle */
		for (i = 0; i < n; i++)
			e[i].v = i;
		ck_assert_int_eq(sp_permute(e, n, sizeof(e[0]), from), 0);
		for (i = 0; i < n; i++)
			ck_assert_uint_eq(e[i].v, from[i]);
	}
}
END_TEST

static Suite *util_suite(void)
{
	Suite *s = suite_create("util");
	TCase *tc = tcase_create("grow");

	tcase_add_test(tc, test_grow);
	tcase_add_test(tc, test_grow_overflow);
	tcase_add_test(tc, test_permute);
	suite_add_tcase(s, tc);
	tc = tcase_create("names_and_hashes");
	tcase_add_test(tc, test_basename_label);
	tcase_add_test(tc, test_fnv);
	tcase_add_test(tc, test_kind);
	tcase_add_test(tc, test_shorten);
	tcase_add_test(tc, test_fmt_ns);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(util_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
