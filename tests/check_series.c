/* SPDX-License-Identifier: MIT */
/*
 * check_series.c - unit tests for report/series.c.
 *
 * The time and duration parsers (ISO 8601 in UTC, with an offset and in
 * two local time zones, @seconds, relative times; what they refuse), the
 * SQLPROF_SERIES_TIERS syntax, the retention hist_sub_bucket inverse, and
 * the series itself: 360 writes of random totals into one in-memory
 * database with small tiers, after each of which every query's interval
 * rows and histogram buckets sum to its totals, the intervals follow each
 * other, the old ones are merged into their buckets, and their number
 * stays bounded; record's interval made from the writer's rows
 * (sp_series_first) equal to the one sp_series_add makes from the tables.
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sqlite3.h>

#include "hist.h"
#include "query.h"
#include "rowsrc.h"
#include "series.h"

#define S_NS 1000000000LL
#define T14Z 1796133600LL /* 2026-12-01T14:00:00Z */

static int64_t at(const char *s)
{
	int64_t ns = -1;
	int rel = -1;

	ck_assert_msg(sp_parse_time(s, &ns, &rel) == 0, "'%s' refused", s);
	ck_assert_int_eq(rel, 0);
	return ns;
}

START_TEST(test_time_utc)
{
	ck_assert_int_eq(at("2026-12-01T14:00:00Z"), T14Z * S_NS);
	ck_assert_int_eq(at("2026-12-01T14:00Z"), T14Z * S_NS);
	ck_assert_int_eq(at("2026-12-01 14:00:00Z"), T14Z * S_NS);
	ck_assert_int_eq(at("2026-12-01T14:00:00.25Z"), T14Z * S_NS + 250000000);
	ck_assert_int_eq(at("2026-12-01T14:00:00.000000001Z"), T14Z * S_NS + 1);
	ck_assert_int_eq(at("2026-12-01T16:00:00+02:00"), T14Z * S_NS);
	ck_assert_int_eq(at("2026-12-01T09:30:00-0430"), T14Z * S_NS);
	ck_assert_int_eq(at("@1796133600"), T14Z * S_NS);
	ck_assert_int_eq(at("@1796133600.5"), T14Z * S_NS + 500000000);
	/* to the ns (through a double it was 1796215031152138496) */
	ck_assert_int_eq(at("@1796215031.152138519"), 1796215031152138519LL);
	ck_assert_int_eq(at("@0.000000001"), 1);
}
END_TEST

START_TEST(test_time_local)
{
	setenv("TZ", "UTC0", 1);
	tzset();
	ck_assert_int_eq(at("2026-12-01T14:00:00"), T14Z * S_NS);
	ck_assert_int_eq(at("2026-12-01"), (T14Z - 14 * 3600) * S_NS);
	setenv("TZ", "EST5", 1);
	tzset();
	ck_assert_int_eq(at("2026-12-01T09:00:00"), T14Z * S_NS);
	ck_assert_int_eq(at("2026-12-01T09:00:00Z"), (T14Z - 5 * 3600) * S_NS);
	unsetenv("TZ");
	tzset();
}
END_TEST

START_TEST(test_time_relative)
{
	int64_t ns;
	int rel;

	ck_assert_int_eq(sp_parse_time("-5m", &ns, &rel), 0);
	ck_assert_int_eq(rel, 1);
	ck_assert_int_eq(ns, -300 * S_NS);
	ck_assert_int_eq(sp_parse_time("-1.5h", &ns, &rel), 0);
	ck_assert_int_eq(ns, -5400 * S_NS);
	ck_assert_int_eq(sp_parse_time("-250ms", &ns, &rel), 0);
	ck_assert_int_eq(ns, -250000000);
}
END_TEST

START_TEST(test_time_bad)
{
	static const char *const bad[] = {
		"",
		"yesterday",
		"2026-13-01",
		"2026-00-10",
		"2026-02-30",
		"2026-12-01T24:00",
		"2026-12-01T14:60",
		"2026-12-01T14",
		"2026-12-01T14:00:00+2",
		"2026-12-01T14:00:00+25:00",
		"2026-12-01T14:00:00Zx",
		"2026-12-01T14:00:00.",
		"26-12-01",
		"1969-12-31",
		"@",
		"@-1",
		"@abc",
		"@1e30",
		"@1796133600.",
		"@1796133600.5x",
		"@99999999999",
		"@1.5.5",
		"-0s",
		"-5x",
		"--5m",
		"5m",
		"- 5m",
		"2026-12-01X14:00",
	};
	int64_t ns;
	int rel;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(sp_parse_time(bad[i], &ns, &rel) < 0, "'%s' accepted", bad[i]);
}
END_TEST

START_TEST(test_duration)
{
	static const struct {
		const char *s;
		int64_t ns;
	} good[] = {
		{ "30s", 30 * S_NS },   { "5m", 300 * S_NS },   { "5min", 300 * S_NS },
		{ "2h", 7200 * S_NS },  { "1d", 86400 * S_NS }, { "1.5h", 5400 * S_NS },
		{ "500ms", 500000000 }, { "10", 10 * S_NS },
	};
	static const char *const bad[] = { "",    "0",   "0s",  "-5m",   "+5m", "5x", "5 m",
					   " 5m", "inf", "nan", "1e30d", "5mm", "m" };
	int64_t ns;

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		ck_assert_msg(sp_parse_duration(good[i].s, &ns) == 0, "'%s' refused", good[i].s);
		ck_assert_int_eq(ns, good[i].ns);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(sp_parse_duration(bad[i], &ns) < 0, "'%s' accepted", bad[i]);
}
END_TEST

START_TEST(test_tiers)
{
	static const char *const bad[] = { "x",         "10",  "10@",   "@5",   "10@5,15@10",
					   "10@5,20@5", "0@5", "10@5,", "10@-1" };
	char err[256];
	const struct sp_tier *t;
	size_t n;

	unsetenv("SQLPROF_SERIES_TIERS");
	t = sp_series_tiers(&n, err, sizeof(err));
	ck_assert_ptr_nonnull(t);
	ck_assert_int_eq(n, 4);
	ck_assert_int_eq(t[0].width_ns, 10 * S_NS);
	ck_assert_int_eq(t[3].age_ns, 30 * 86400 * S_NS);
	setenv("SQLPROF_SERIES_TIERS", "0.5@1,1@2,4@3", 1);
	t = sp_series_tiers(&n, err, sizeof(err));
	ck_assert_ptr_nonnull(t);
	ck_assert_int_eq(n, 3);
	ck_assert_int_eq(t[0].width_ns, S_NS / 2);
	ck_assert_int_eq(t[2].age_ns, 3 * S_NS);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		setenv("SQLPROF_SERIES_TIERS", bad[i], 1);
		ck_assert_msg(!sp_series_tiers(&n, err, sizeof(err)), "'%s' accepted", bad[i]);
		ck_assert_ptr_nonnull(strstr(err, "SQLPROF_SERIES_TIERS wants"));
	}
	unsetenv("SQLPROF_SERIES_TIERS");
}
END_TEST

START_TEST(test_hist_sub)
{
	struct sp_hist *h = sp_hist_new();

	sp_hist_add_bucket(h, 1000, 5);
	sp_hist_add_bucket(h, 90000, 3);
	sp_hist_sub_bucket(h, 1000, 2);
	ck_assert_int_eq(sp_hist_count(h), 6);
	sp_hist_sub_bucket(h, 1000, 10);   /* at most what it holds */
	sp_hist_sub_bucket(h, 5000000, 1); /* a group never used */
	ck_assert_int_eq(sp_hist_count(h), 3);
	sp_hist_free(h);
}
END_TEST

/* xorshift64*: deterministic, so a failure reproduces */
static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static uint64_t rnd(void)
{
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * 0x2545f4914f6cdd1dULL;
}

static int64_t one(sqlite3 *db, const char *sql)
{
	sqlite3_stmt *st;
	int64_t v = -1;

	ck_assert_msg(sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK, "%s: %s", sql,
		      sqlite3_errmsg(db));
	if (sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return v;
}

static void run(sqlite3 *db, const char *sql)
{
	ck_assert_msg(sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK, "%s: %s", sql,
		      sqlite3_errmsg(db));
}

/* SERIES_STEPS writes a second apart, tiers 2 s after 12 s, 6 s after
 * 30 s, 30 s after 60 s: every sum exact after every write. Each tier is
 * passed many times over (the last one's buckets 10 times), as with the
 * 3000 writes and 10@60,60@300,600@1200 this test had before, which took
 * 35 s of CPU (85 s on a loaded machine) for the same paths. */
#define SERIES_STEPS 360
#define SERIES_TIERS "2@12,6@30,30@60"
#define W1 2 /* the first tier's width and age, s */
#define A1 12
#define W3 30 /* the last one's */
#define A3 60
START_TEST(test_series_exact)
{
	const int64_t t0 = T14Z * S_NS + 123456789; /* not on a bucket boundary */
	char sql[1024], err[512];
	sqlite3 *db;
	int64_t maxn = 0;

	setenv("SQLPROF_SERIES_TIERS", SERIES_TIERS, 1);
	ck_assert_int_eq(sqlite3_open(":memory:", &db), SQLITE_OK);
	run(db,
	    "CREATE TABLE queries(" SP_QUERIES_COLUMNS ", PRIMARY KEY(fp_id, kind));"
	    "CREATE TABLE histograms(fp_id INTEGER, kind TEXT, bucket_ns INTEGER, count INTEGER,"
	    " PRIMARY KEY(fp_id, kind, bucket_ns));");
	for (int step = 1; step <= SERIES_STEPS; step++) {
		/* five queries; each runs in about half the writes */
		for (int q = 1; q <= 5; q++) {
			uint64_t n = rnd() % 2 ? rnd() % 50 : 0, b = 1000u << (rnd() % 8);

			if (!n)
				continue;
			snprintf(
				sql, sizeof(sql),
				"INSERT INTO queries(fp_id, kind, " SP_SERIES_COLS
				") VALUES(%d, '%s',"
				" %llu, %llu, 0, %llu, %llu, 0, 0, 0, 0, %llu, 0, 0, 0, 0, 0) ON CONFLICT DO UPDATE SET count = count +"
				" excluded.count, total_ns = total_ns + excluded.total_ns, wall_ns ="
				" wall_ns + excluded.wall_ns, rows = rows + excluded.rows, errors ="
				" errors + excluded.errors;"
				"INSERT INTO histograms VALUES(%d, '%s', %llu, %llu) ON CONFLICT DO"
				" UPDATE SET count = count + excluded.count;",
				q, q == 5 ? "exec" : "stmt", (unsigned long long)n,
				(unsigned long long)(n * b), (unsigned long long)(n * b * 2),
				(unsigned long long)(n * 3), (unsigned long long)(n % 3), q,
				q == 5 ? "exec" : "stmt", (unsigned long long)b,
				(unsigned long long)n);
			run(db, sql);
		}
		ck_assert_msg(sp_series_add(db, NULL, t0, t0 + step * S_NS, err, sizeof(err)) == 0,
			      "step %d: %s", step, err);
		ck_assert_int_eq(one(db,
				     "SELECT COUNT(*) FROM queries q LEFT JOIN (SELECT fp_id, kind,"
				     " SUM(count) c, SUM(total_ns) t, SUM(wall_ns) w, SUM(rows) r,"
				     " SUM(errors) e FROM interval_queries GROUP BY fp_id, kind) s"
				     " USING (fp_id, kind) WHERE s.c IS NOT q.count OR s.t IS NOT"
				     " q.total_ns OR s.w IS NOT q.wall_ns OR s.r IS NOT q.rows OR"
				     " s.e IS NOT q.errors"),
				 0);
		ck_assert_int_eq(
			one(db, "SELECT COUNT(*) FROM (SELECT 1 FROM (SELECT fp_id, kind,"
				" bucket_ns, count FROM histograms UNION ALL SELECT q.fp_id,"
				" q.kind, json_extract(j.value, '$[0]'), -json_extract(j.value,"
				" '$[1]') FROM interval_queries q, json_each(q.buckets) j)"
				" GROUP BY fp_id, kind, bucket_ns HAVING SUM(count) <> 0)"),
			0);
		/* they follow each other from t0 to the last write */
		ck_assert_int_eq(one(db, "SELECT MIN(start_ns) FROM intervals"), t0);
		ck_assert_int_eq(one(db, "SELECT MAX(end_ns) FROM intervals"), t0 + step * S_NS);
		ck_assert_int_eq(one(db,
				     "SELECT COUNT(*) FROM intervals a WHERE end_ns <= start_ns OR"
				     " (SELECT MIN(start_ns) FROM intervals b WHERE b.start_ns >"
				     " a.start_ns) <> end_ns"),
				 0);
		ck_assert_int_eq(one(db, "SELECT SUM(snapshots) FROM intervals"), step);
		/* old ones alone in their buckets */
		snprintf(sql, sizeof(sql),
			 "SELECT COUNT(*) FROM (SELECT start_ns / %lld g FROM intervals WHERE"
			 " end_ns <= %lld GROUP BY g HAVING COUNT(*) > 1)",
			 W3 * S_NS, (long long)(t0 + (step - A3) * S_NS));
		ck_assert_int_eq(one(db, sql), 0);
		snprintf(sql, sizeof(sql),
			 "SELECT COUNT(*) FROM (SELECT start_ns / %lld g FROM intervals WHERE"
			 " end_ns <= %lld GROUP BY g HAVING COUNT(*) > 1)",
			 W1 * S_NS, (long long)(t0 + (step - A1) * S_NS));
		ck_assert_int_eq(one(db, sql), 0);
		if (one(db, "SELECT COUNT(*) FROM intervals") > maxn)
			maxn = one(db, "SELECT COUNT(*) FROM intervals");
	}
	/* 12 raw + 9 of 2 s + 5 of 6 s + 360/30 of 30 s, and the buckets
	 * partly old at each edge */
	ck_assert_msg(maxn <= A1 + 10 + 6 + SERIES_STEPS / W3 + 1 + 3, "%lld intervals",
		      (long long)maxn);
	/* and the last tier was reached: fewer intervals than writes */
	ck_assert_int_ge(
		one(db, "SELECT COUNT(*) FROM intervals WHERE end_ns - start_ns >= 30000000000"),
		(SERIES_STEPS - A3) / W3 - 1);
	printf("check_series: %d writes kept in at most %lld intervals\n", SERIES_STEPS,
	       (long long)maxn);
	sqlite3_close(db);
	unsetenv("SQLPROF_SERIES_TIERS");
}
END_TEST

/* The queries of test_series_first: as rows of queries and histograms for
 * sp_series_add, and as sp_series_query for sp_series_first. */
static const struct first_q {
	int64_t fp_id;
	const char *kind;
	int64_t count, total_ns, prepares;
	uint64_t lo[3], cnt[3];
	size_t nb;
} first_qs[] = {
	{ -9000000000000000000LL, "stmt", 3, 700, 1, { 144, 206, 5000000000ULL }, { 1, 1, 1 }, 3 },
	{ -5, "exec", 2, 90, 0, { 0 }, { 0 }, 0 },           /* no histogram: "[]" */
	{ 1, "exec", 0, 0, 0, { 0 }, { 0 }, 0 },             /* nothing: no row */
	{ 1, "stmt", 0, 0, 0, { 1000 }, { 4 }, 1 },          /* only buckets */
	{ 7, "stmt", 0, 0, 3, { 1000, 2000 }, { 0, 2 }, 2 }, /* prepares, a 0 bucket */
};
#define NFIRST (sizeof(first_qs) / sizeof(first_qs[0]))

static int first_next(struct sp_series_query *q, void *arg)
{
	size_t *i = arg;
	const struct first_q *f;

	if (*i == NFIRST)
		return 0;
	f = &first_qs[(*i)++];
	memset(q, 0, sizeof(*q));
	q->fp_id = (uint64_t)f->fp_id;
	q->kind = f->kind;
	q->sums[0] = f->count;
	q->sums[1] = f->total_ns;
	q->sums[2] = f->total_ns / 2; /* self_ns */
	q->sums[12] = f->prepares;
	q->lo = f->lo;
	q->cnt = f->cnt;
	q->nb = f->nb;
	return 1;
}

/* db's intervals and interval_queries as one text */
static char *series_text(sqlite3 *db)
{
	sqlite3_stmt *st;
	char *t = NULL;

	ck_assert_int_eq(
		sqlite3_prepare_v2(db,
				   "SELECT (SELECT group_concat(start_ns || '-' || end_ns ||"
				   " '-' || snapshots) FROM intervals) || ';' ||"
				   " group_concat(quote(start_ns) || ',' || quote(fp_id) ||"
				   " ',' || quote(kind) || ',' || quote(count) || ',' ||"
				   " quote(total_ns) || ',' || quote(self_ns) || ',' ||"
				   " quote(prepares) || ',' || quote(runs) || ',' ||"
				   " quote(buckets), ';') FROM (SELECT * FROM"
				   " interval_queries ORDER BY start_ns, fp_id, kind)",
				   -1, &st, NULL),
		SQLITE_OK);
	if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
		t = strdup((const char *)sqlite3_column_text(st, 0));
	sqlite3_finalize(st);
	ck_assert_ptr_nonnull(t);
	return t;
}

/* record's interval made from the writer's rows (sp_series_first) is the
 * one sp_series_add makes from the tables */
START_TEST(test_series_first)
{
	const int64_t t0 = T14Z * S_NS, t1 = t0 + 5 * S_NS;
	sqlite3 *a, *b;
	char err[512], sql[512], *ta, *tb;
	size_t i = 0;

	ck_assert_int_eq(sqlite3_open(":memory:", &a), SQLITE_OK);
	ck_assert_int_eq(sqlite3_open(":memory:", &b), SQLITE_OK);
	run(a,
	    "CREATE TABLE queries(" SP_QUERIES_COLUMNS ", PRIMARY KEY(fp_id, kind));"
	    "CREATE TABLE histograms(fp_id INTEGER, kind TEXT, bucket_ns INTEGER, count INTEGER);"
	    "CREATE INDEX histograms_query ON histograms(fp_id, kind);");
	for (size_t k = 0; k < NFIRST; k++) {
		const struct first_q *f = &first_qs[k];

		snprintf(
			sql, sizeof(sql),
			"INSERT INTO queries(fp_id, kind, " SP_SERIES_COLS
			") VALUES(%lld, '%s', %lld, %lld, %lld, 0, 0, 0, 0, 0, 0, 0, 0, 0, %lld, 0,"
			" 0)",
			(long long)f->fp_id, f->kind, (long long)f->count, (long long)f->total_ns,
			(long long)(f->total_ns / 2), (long long)f->prepares);
		run(a, sql);
		for (size_t j = 0; j < f->nb; j++) {
			snprintf(sql, sizeof(sql),
				 "INSERT INTO histograms VALUES(%lld, '%s', %llu, %llu)",
				 (long long)f->fp_id, f->kind, (unsigned long long)f->lo[j],
				 (unsigned long long)f->cnt[j]);
			run(a, sql);
		}
	}
	ck_assert_msg(sp_series_add(a, NULL, t0, t1, err, sizeof(err)) == 0, "%s", err);
	ck_assert_int_eq(sp_rowsrc_register(b), SQLITE_OK);
	run(b, "CREATE TABLE meta(key TEXT PRIMARY KEY, value);");
	ck_assert_msg(sp_series_first(b, t0, t1, first_next, &i, err, sizeof(err)) == 0, "%s", err);
	ta = series_text(a);
	tb = series_text(b);
	ck_assert_str_eq(tb, ta);
	ck_assert_ptr_nonnull(strstr(tb, "'[]'"));
	ck_assert_int_eq(one(b, "SELECT COUNT(*) FROM interval_queries"), NFIRST - 1);
	ck_assert_int_eq(one(b, "SELECT COUNT(*) FROM meta WHERE key = 'clock_offset_ns'"), 1);
	free(ta);
	free(tb);
	sqlite3_close(a);
	sqlite3_close(b);
}
END_TEST

static Suite *series_suite(void)
{
	Suite *s = suite_create("series");
	TCase *tc = tcase_create("parse");

	tcase_add_test(tc, test_time_utc);
	tcase_add_test(tc, test_time_local);
	tcase_add_test(tc, test_time_relative);
	tcase_add_test(tc, test_time_bad);
	tcase_add_test(tc, test_duration);
	tcase_add_test(tc, test_tiers);
	suite_add_tcase(s, tc);

	tc = tcase_create("series");
	tcase_add_test(tc, test_hist_sub);
	tcase_add_test(tc, test_series_exact);
	tcase_add_test(tc, test_series_first);
	tcase_set_timeout(tc, 120); /* slow under sanitizers */
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(series_suite());

	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);

	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
