/* SPDX-License-Identifier: MIT */
/*
 * check_params.c - the bound values' hash (preload/sp_params.h) and its
 * start-up probe (preload/sp_probe.h, sp_probe_params_db) against this
 * machine's libsqlite3, on real statements.
 *
 * The probe must find and validate a layout here (Debian's 3.40: aVar at
 * 128, Mem of 56 bytes); with it, equal values give equal hashes and
 * different values different ones - '1' against 1, NULL against '', 1
 * against 1.0, x'' against zeroblob(0), texts longer than any buffer that
 * differ in their last byte -, whether a value was bound SQLITE_STATIC or
 * copied, after the statement ran and after a rebind. The fallback
 * (sqlite3_expanded_sql's text) keeps the same properties. SipHash-2-4
 * against the reference vector of its paper; the layout's text form
 * (SQLPROF_PARAMS_LAYOUT) round trip and rejects; a wrong layout fails
 * the probe's check instead of reading wrong memory. Prints the cost of
 * both ways (instructions are measured with callgrind, not here).
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sp_probe.h"

static const uint64_t key[2] = { 0x0706050403020100ULL, 0x0f0e0d0c0b0a0908ULL };

static struct sp_probe_api api = SP_PROBE_API_LINKED;

static sqlite3 *db;
static struct sp_params_layout L;
static int have_layout;

static void setup(void)
{
	/* a connection of the program's kind (lookaside on): the layout is
	 * found on the probe's own connection, used on any */
	ck_assert_int_eq(sqlite3_open(":memory:", &db), SQLITE_OK);
	if (!have_layout) {
		sqlite3 *pdb = sp_probe_open(&api);

		ck_assert_ptr_nonnull(pdb);
		have_layout = sp_probe_params_db(&api, pdb, &L) == 0;
		sqlite3_close(pdb);
	}
}

static void teardown(void)
{
	sqlite3_close(db);
	db = NULL;
}

static sqlite3_stmt *prep(const char *sql)
{
	sqlite3_stmt *st = NULL;

	ck_assert_int_eq(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
	return st;
}

/* The hash of st as the preload takes it, by one way (mem 1: the array). */
static uint64_t hash(sqlite3_stmt *st, uint64_t sql_id, int mem)
{
	int n = sqlite3_bind_parameter_count(st);

	if (n == 0)
		return sp_params_hash_none(key, sql_id);
	if (mem)
		return sp_params_hash_mem(key, &L, st, n, sql_id);
	return sp_params_hash_text(key, st, sqlite3_expanded_sql, sqlite3_free);
}

/* ---- the probe ---- */

START_TEST(test_probe_finds_layout)
{
	char buf[160];
	struct sp_params_layout back;
	unsigned long long dev, ino;

	ck_assert_msg(have_layout, "the probe found no layout in libsqlite3 %s",
		      sqlite3_libversion());
	sp_params_layout_format(buf, sizeof(buf), &L, 12, 34);
	printf("check_params: libsqlite3 %s, layout %s\n", sqlite3_libversion(), buf);
	ck_assert_int_eq(sp_params_layout_parse(buf, &back, &dev, &ino), 0);
	ck_assert_int_eq(memcmp(&back, &L, sizeof(L)), 0);
	ck_assert(dev == 12 && ino == 34);
}
END_TEST

START_TEST(test_layout_text_rejects)
{
	static const char *const bad[] = {
		"",
		"128:56:0:8:16:20:1:4:8:2:10:400:1",     /* a field short */
		"128:56:0:8:16:20:1:4:8:2:10:400:1:2:3", /* one too many */
		"128:56:0:8:16:20:1:4:8:2:10:400:1:2x",  /* trailing junk */
		"129:56:0:8:16:20:1:4:8:2:10:400:1:2",   /* misaligned pointer */
		"128:56:52:8:16:20:1:4:8:2:10:400:1:2",  /* u past the Mem */
		"128:56:0:8:16:55:1:4:8:2:10:400:1:2",   /* flags past the Mem */
		"128:20:0:8:16:18:1:4:8:2:10:400:1:2",   /* Mem too small */
		"128:56:0:8:16:20:3:4:8:2:10:400:1:2",   /* NULL two bits */
		"128:56:0:8:16:20:1:4:8:2:10:0:1:2",     /* no zeroblob bit */
		"128:56:0:8:16:20:1:4:8:2:10:10000:1:2", /* a bit past u16 */
	};
	struct sp_params_layout out;
	unsigned long long dev, ino;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(sp_params_layout_parse(bad[i], &out, &dev, &ino) < 0,
			      "accepted \"%s\"", bad[i]);
	ck_assert_int_lt(sp_params_layout_parse(NULL, &out, &dev, &ino), 0);
	ck_assert_int_eq(
		sp_params_layout_parse("128:56:0:8:16:20:1:4:8:2:10:400:1:2", &out, &dev, &ino), 0);
}
END_TEST

/* A layout off by one field reads other bytes: the probe's own check
 * (safe reads only) refuses it. */
START_TEST(test_wrong_layout_refused)
{
	struct sp_probe_val v[SP_PROBE_NVAR];
	struct sp_params_layout w;
	sqlite3_stmt *st = prep("SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10");

	ck_assert(have_layout);
	memset(v, 0, sizeof(v));
	for (int i = 0; i < SP_PROBE_NVAR; i++) {
		v[i].kind = SP_PV_INT;
		v[i].u = 1000u + (unsigned)i;
		ck_assert_int_eq(sqlite3_bind_int64(st, i + 1, 1000 + i), SQLITE_OK);
	}
	ck_assert(sp_probe_params_check(&L, st, v));
	w = L;
	w.mem_size += 8;
	ck_assert(!sp_probe_params_check(&w, st, v));
	w = L;
	w.var_off += 8;
	ck_assert(!sp_probe_params_check(&w, st, v));
	w = L;
	w.u_off = L.z_off;
	ck_assert(!sp_probe_params_check(&w, st, v));
	sqlite3_finalize(st);
}
END_TEST

/* ---- the hash's properties, by both ways ---- */

static void check_properties(int mem)
{
	static const unsigned char one_zero[1] = { 0 };
	sqlite3_stmt *st = prep("SELECT ?1, ?2");
	size_t big = 100000;
	char *t1 = malloc(big), *t2 = malloc(big);
	uint64_t h[16];
	int i;

	ck_assert(!mem || have_layout);
	ck_assert(t1 && t2);
	for (size_t k = 0; k < big; k++)
		t1[k] = t2[k] = (char)('a' + k % 26);
	t2[big - 1] = '!';

	/* same values, same hash: again, after running, copied or static */
	sqlite3_bind_int64(st, 1, 42);
	sqlite3_bind_text(st, 2, "abc", -1, SQLITE_TRANSIENT);
	h[0] = hash(st, 7, mem);
	ck_assert(h[0] != 0);
	ck_assert(hash(st, 7, mem) == h[0]);
	while (sqlite3_step(st) == SQLITE_ROW)
		;
	sqlite3_reset(st);
	ck_assert(hash(st, 7, mem) == h[0]);
	sqlite3_bind_text(st, 2, "abc", 3, SQLITE_STATIC);
	ck_assert(hash(st, 7, mem) == h[0]);
	sqlite3_bind_text(st, 2, "abcdef", 3, SQLITE_STATIC); /* "abc", unterminated */
	ck_assert(hash(st, 7, mem) == h[0]);
	/* another statement text with the same values */
	ck_assert(hash(st, 8, mem) != h[0] || !mem); /* the text way has the SQL in it */

	/* different values: different hashes */
	i = 0;
	sqlite3_bind_int64(st, 2, 1);
	h[i++] = hash(st, 7, mem); /* 1 */
	sqlite3_bind_text(st, 2, "1", -1, SQLITE_STATIC);
	h[i++] = hash(st, 7, mem); /* '1' */
	sqlite3_bind_double(st, 2, 1.0);
	h[i++] = hash(st, 7, mem); /* 1.0 */
	sqlite3_bind_null(st, 2);
	h[i++] = hash(st, 7, mem); /* NULL */
	sqlite3_bind_text(st, 2, "", 0, SQLITE_STATIC);
	h[i++] = hash(st, 7, mem); /* '' */
	sqlite3_bind_blob(st, 2, one_zero, 0, SQLITE_STATIC);
	h[i++] = hash(st, 7, mem); /* x'' */
	sqlite3_bind_zeroblob(st, 2, 0);
	h[i++] = hash(st, 7, mem); /* zeroblob(0) */
	sqlite3_bind_zeroblob(st, 2, 1);
	h[i++] = hash(st, 7, mem); /* zeroblob(1) */
	sqlite3_bind_blob(st, 2, one_zero, 1, SQLITE_STATIC);
	h[i++] = hash(st, 7, mem); /* x'00' */
	sqlite3_bind_int64(st, 2, 2);
	h[i++] = hash(st, 7, mem); /* 2 */
	sqlite3_bind_text(st, 2, t1, (int)big, SQLITE_STATIC);
	h[i++] = hash(st, 7, mem); /* 100,000 bytes */
	sqlite3_bind_text(st, 2, t2, (int)big, SQLITE_STATIC);
	h[i++] = hash(st, 7, mem); /* the same but its last byte */
	sqlite3_bind_text(st, 2, t1, (int)big - 1, SQLITE_STATIC);
	h[i++] = hash(st, 7, mem); /* one byte shorter */
	sqlite3_bind_int64(st, 1, 43);
	h[i++] = hash(st, 7, mem); /* the first value changed */
	for (int a = 0; a < i; a++)
		for (int b = a + 1; b < i; b++) {
			ck_assert_msg(h[a] != h[b], "%s way: values %d and %d hash alike",
				      mem ? "array" : "text", a, b);
		}
	/* a long text hashed whole: equal copies, equal hashes */
	sqlite3_bind_int64(st, 1, 42);
	sqlite3_bind_text(st, 2, t1, (int)big, SQLITE_TRANSIENT);
	h[0] = hash(st, 7, mem);
	memcpy(t2, t1, big);
	sqlite3_bind_text(st, 2, t2, (int)big, SQLITE_STATIC);
	ck_assert(hash(st, 7, mem) == h[0]);
	/* cleared bindings are NULLs */
	sqlite3_bind_null(st, 1);
	sqlite3_bind_null(st, 2);
	h[0] = hash(st, 7, mem);
	sqlite3_bind_int64(st, 1, 5);
	sqlite3_clear_bindings(st);
	ck_assert(hash(st, 7, mem) == h[0]);
	sqlite3_finalize(st);
	free(t1);
	free(t2);
}

START_TEST(test_array_properties)
{
	check_properties(1);
}
END_TEST

START_TEST(test_text_properties)
{
	check_properties(0);
}
END_TEST

/* Many parameters (more than 16 kinds in a word), of mixed kinds. */
START_TEST(test_many_params)
{
	char sql[4096];
	size_t o = 0;
	sqlite3_stmt *st;
	uint64_t h0;

	ck_assert(have_layout);
	o += (size_t)snprintf(sql + o, sizeof(sql) - o, "SELECT ?1");
	for (int i = 2; i <= 40; i++)
		o += (size_t)snprintf(sql + o, sizeof(sql) - o, ", ?%d", i);
	st = prep(sql);
	for (int i = 1; i <= 40; i++)
		if (i % 3 == 0)
			sqlite3_bind_text(st, i, "x", 1, SQLITE_STATIC);
		else if (i % 3 == 1)
			sqlite3_bind_int64(st, i, i);
	h0 = sp_params_hash_mem(key, &L, st, 40, 9);
	ck_assert(sp_params_hash_mem(key, &L, st, 40, 9) == h0);
	/* the 37th parameter's kind only (in the third word of kinds) */
	sqlite3_bind_text(st, 37, "37", 2, SQLITE_STATIC);
	ck_assert(sp_params_hash_mem(key, &L, st, 40, 9) != h0);
	sqlite3_bind_int64(st, 37, 37);
	ck_assert(sp_params_hash_mem(key, &L, st, 40, 9) == h0);
	sqlite3_bind_int64(st, 37, 38);
	ck_assert(sp_params_hash_mem(key, &L, st, 40, 9) != h0);
	sqlite3_bind_null(st, 37);
	ck_assert(sp_params_hash_mem(key, &L, st, 40, 9) != h0);
	sqlite3_finalize(st);
}
END_TEST

/* A statement without parameters is its sql_id: both ways, and what
 * SipHash-2-4 of its 8 bytes gives. */
START_TEST(test_no_params)
{
	sqlite3_stmt *st = prep("SELECT 1");
	uint64_t id = 0x1122334455667788ULL;

	ck_assert(hash(st, id, 1) == hash(st, id, 0));
	ck_assert(hash(st, id, 1) == sp_siphash24(key, (const unsigned char *)&id, 8));
	ck_assert(hash(st, id, 1) != hash(st, id + 1, 1));
	sqlite3_finalize(st);
}
END_TEST

/* The key matters: the same values under another key hash otherwise. */
START_TEST(test_key)
{
	static const uint64_t other[2] = { 1, 2 };
	sqlite3_stmt *st = prep("SELECT ?1");

	ck_assert(have_layout);
	sqlite3_bind_int64(st, 1, 1234);
	ck_assert(sp_params_hash_mem(key, &L, st, 1, 3) != sp_params_hash_mem(other, &L, st, 1, 3));
	sqlite3_finalize(st);
}
END_TEST

/* SipHash-2-4's reference vector (Aumasson and Bernstein, appendix A):
 * key 00..0f, message 00..0e. */
START_TEST(test_siphash_vector)
{
	unsigned char m[15];

	for (int i = 0; i < 15; i++)
		m[i] = (unsigned char)i;
	ck_assert(sp_siphash24(key, m, 15) == 0xa129ca6149be45e5ULL);
}
END_TEST

/* Cost, printed (callgrind gives instructions: see the commit log). */
START_TEST(test_cost)
{
	sqlite3_stmt *st = prep("SELECT ?1+1");
	struct timespec a, b, c;
	uint64_t acc = 0;
	int n = 100000;

	ck_assert(have_layout);
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (int i = 0; i < n; i++) {
		sqlite3_bind_int64(st, 1, i);
		acc += sp_params_hash_mem(key, &L, st, 1, 5);
	}
	clock_gettime(CLOCK_MONOTONIC, &b);
	for (int i = 0; i < n; i++) {
		sqlite3_bind_int64(st, 1, i);
		acc += sp_params_hash_text(key, st, sqlite3_expanded_sql, sqlite3_free);
	}
	clock_gettime(CLOCK_MONOTONIC, &c);
	printf("check_params: SELECT ?1+1: array %.0f ns, text %.0f ns a hash (%llx)\n",
	       ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / n,
	       ((double)(c.tv_sec - b.tv_sec) * 1e9 + (double)(c.tv_nsec - b.tv_nsec)) / n,
	       (unsigned long long)(acc & 0xf));
	sqlite3_finalize(st);
}
END_TEST

static Suite *params_suite(void)
{
	Suite *s = suite_create("params");
	TCase *probe = tcase_create("probe"), *props = tcase_create("properties");
	TCase *hash_tc = tcase_create("siphash"), *cost = tcase_create("cost");

	tcase_add_checked_fixture(probe, setup, teardown);
	tcase_add_test(probe, test_probe_finds_layout);
	tcase_add_test(probe, test_layout_text_rejects);
	tcase_add_test(probe, test_wrong_layout_refused);
	suite_add_tcase(s, probe);
	tcase_add_checked_fixture(props, setup, teardown);
	tcase_add_test(props, test_array_properties);
	tcase_add_test(props, test_text_properties);
	tcase_add_test(props, test_many_params);
	tcase_add_test(props, test_no_params);
	tcase_add_test(props, test_key);
	suite_add_tcase(s, props);
	tcase_add_test(hash_tc, test_siphash_vector);
	suite_add_tcase(s, hash_tc);
	tcase_add_checked_fixture(cost, setup, teardown);
	tcase_add_test(cost, test_cost);
	suite_add_tcase(s, cost);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(params_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
