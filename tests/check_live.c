/* SPDX-License-Identifier: MIT */
/*
 * check_live.c - unit tests for report/record/live.c: the fixed latency buckets
 * (every bound goes to the bucket above it), the viewer answer's
 * encoding read back field by field, its decoder on every truncation and
 * on lengths that lie (refused, never read past the buffer), and
 * db.query.summary on the statement shapes it names.
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "live.h"

START_TEST(buckets)
{
	ck_assert_int_eq(sp_live_bucket_of(0), 0);
	ck_assert_int_eq(sp_live_bucket_of(999), 0);
	ck_assert_int_eq(sp_live_bucket_of(1000), 1);
	ck_assert_int_eq(sp_live_bucket_of(4999), 1);
	for (int i = 0; i < SP_LIVE_NB; i++) {
		ck_assert_int_eq(sp_live_bucket_of(sp_live_bounds_ns[i] - 1), i);
		ck_assert_int_eq(sp_live_bucket_of(sp_live_bounds_ns[i]), i + 1);
		if (i)
			ck_assert(sp_live_bounds_ns[i] > sp_live_bounds_ns[i - 1]);
	}
	ck_assert_int_eq(sp_live_bucket_of(UINT64_MAX), SP_LIVE_NB);
}
END_TEST

static void sample(struct sp_live *l)
{
	memset(l, 0, sizeof(*l));
	l->n = 3;
	l->rows = calloc(3, sizeof(*l->rows));
	for (int i = 0; i < 3; i++) {
		struct sp_live_row *r = &l->rows[i];

		r->fp_id = 0x1234567890abcdefull + (uint64_t)i;
		r->kind = i == 2 ? SP_KIND_EXEC : SP_KIND_STMT;
		r->count = 100u + (uint64_t)i;
		r->total_ns = 1000000u * (uint64_t)(i + 1);
		r->rows = 7;
		r->errors = (uint64_t)i;
		r->min_ns = 10;
		r->max_ns = 99999;
		r->p50_ns = 500;
		r->p95_ns = 900;
		for (int b = 0; b <= SP_LIVE_NB; b++)
			r->bucket[b] = (uint64_t)(b * 10 + i);
		r->text = strdup(i == 1 ? "SELECT \"a\"\"b\" FROM t\x1b[2J" : "SELECT ?");
		r->site = i == 0 ? strdup("main (app.c:12)") : NULL;
	}
	l->lost = 5;
	l->processes = 2;
	l->executions = 303;
	l->restarts = 1;
	l->time_ns = 1700000000123456789ll;
	l->pending = 1;
	l->profile = strdup("/var/lib/sqlprof/app.db");
}

START_TEST(round_trip)
{
	struct sp_live a, b;
	uint8_t *buf;
	size_t len;
	char err[256];

	sample(&a);
	ck_assert_int_eq(sp_live_encode(&a, &buf, &len), 0);
	ck_assert_int_eq(len % 8, 0);
	ck_assert_int_eq(sp_live_decode(buf, len, &b, err, sizeof(err)), 0);
	ck_assert_uint_eq(b.n, 3);
	ck_assert_uint_eq(b.lost, 5);
	ck_assert_uint_eq(b.processes, 2);
	ck_assert_uint_eq(b.executions, 303);
	ck_assert_uint_eq(b.restarts, 1);
	ck_assert_uint_eq(b.pending, 1);
	ck_assert(b.time_ns == a.time_ns);
	ck_assert_str_eq(b.profile, a.profile);
	for (int i = 0; i < 3; i++) {
		ck_assert_uint_eq(b.rows[i].fp_id, a.rows[i].fp_id);
		ck_assert_uint_eq(b.rows[i].kind, a.rows[i].kind);
		ck_assert_uint_eq(b.rows[i].count, a.rows[i].count);
		ck_assert_uint_eq(b.rows[i].total_ns, a.rows[i].total_ns);
		ck_assert_uint_eq(b.rows[i].errors, a.rows[i].errors);
		ck_assert_uint_eq(b.rows[i].p95_ns, 900);
		ck_assert_mem_eq(b.rows[i].bucket, a.rows[i].bucket, sizeof(a.rows[i].bucket));
		ck_assert_str_eq(b.rows[i].text, a.rows[i].text);
		if (a.rows[i].site)
			ck_assert_str_eq(b.rows[i].site, a.rows[i].site);
		else
			ck_assert_ptr_null(b.rows[i].site);
	}
	sp_live_free(&b);
	/* every truncation is refused, none read past its end (ASan builds) */
	for (size_t cut = 0; cut < len; cut++) {
		uint8_t *part = malloc(cut ? cut : 1);

		memcpy(part, buf, cut);
		ck_assert_int_eq(sp_live_decode(part, cut, &b, err, sizeof(err)), -1);
		free(part);
	}
	/* a row count that cannot fit */
	{
		uint32_t huge = 0xffffffffu;

		memcpy(buf + 8, &huge, sizeof(huge));
		ck_assert_int_eq(sp_live_decode(buf, len, &b, err, sizeof(err)), -1);
	}
	/* another magic */
	buf[0] ^= 1;
	ck_assert_int_eq(sp_live_decode(buf, len, &b, err, sizeof(err)), -1);
	free(buf);
	sp_live_free(&a);
}
END_TEST

START_TEST(lying_lengths)
{
	struct sp_live a, b;
	uint8_t *buf;
	size_t len, off;
	char err[256];
	uint32_t plen, big = 0x7fffffffu;

	sample(&a);
	ck_assert_int_eq(sp_live_encode(&a, &buf, &len), 0);
	/* the profile path's length, then the first row's text length */
	memcpy(&plen, buf + 12, sizeof(plen));
	memcpy(buf + 12, &big, sizeof(big));
	ck_assert_int_eq(sp_live_decode(buf, len, &b, err, sizeof(err)), -1);
	memcpy(buf + 12, &plen, sizeof(plen));
	ck_assert_int_eq(sp_live_decode(buf, len, &b, err, sizeof(err)), 0);
	sp_live_free(&b);
	/* header: 4 u32 + 5 u64 + 1 u64 = 64 bytes; the path padded to 8 */
	off = 64 + ((plen + 7u) & ~7u);
	memcpy(buf + off + 12, &big, sizeof(big)); /* text_len of row 0 */
	ck_assert_int_eq(sp_live_decode(buf, len, &b, err, sizeof(err)), -1);
	free(buf);
	sp_live_free(&a);
}
END_TEST

START_TEST(summary)
{
	char s[128];

	sp_live_summary("SELECT a FROM users WHERE id = ?", s, sizeof(s));
	ck_assert_str_eq(s, "SELECT users");
	sp_live_summary("INSERT INTO orders(a, b) VALUES (?, ?)", s, sizeof(s));
	ck_assert_str_eq(s, "INSERT orders");
	sp_live_summary("UPDATE OR REPLACE t SET a = ?", s, sizeof(s));
	ck_assert_str_eq(s, "UPDATE t");
	sp_live_summary("DELETE FROM \"my table\" WHERE x", s, sizeof(s));
	ck_assert_str_eq(s, "DELETE \"my table\"");
	sp_live_summary("CREATE TABLE IF NOT EXISTS k(v)", s, sizeof(s));
	ck_assert_str_eq(s, "CREATE k");
	sp_live_summary("SELECT ? + ?", s, sizeof(s));
	ck_assert_str_eq(s, "SELECT");
	sp_live_summary("COMMIT", s, sizeof(s));
	ck_assert_str_eq(s, "COMMIT");
	sp_live_summary("", s, sizeof(s));
	ck_assert_str_eq(s, "");
	sp_live_summary("(((", s, sizeof(s));
	ck_assert_str_eq(s, "");
	/* issue 27: a qualified name is one name, not its schema */
	sp_live_summary("SELECT * FROM \"main\".\"users\" WHERE id = ?", s, sizeof(s));
	ck_assert_str_eq(s, "SELECT users");
	sp_live_summary("SELECT * FROM \"main\".sqlite_master WHERE name = ?", s, sizeof(s));
	ck_assert_str_eq(s, "SELECT sqlite_master");
	sp_live_summary("SELECT a FROM main.users", s, sizeof(s));
	ck_assert_str_eq(s, "SELECT users");
	sp_live_summary("INSERT INTO aux.log(a) VALUES (?)", s, sizeof(s));
	ck_assert_str_eq(s, "INSERT aux.log");
	sp_live_summary("UPDATE \"temp\".[t 1] SET a = ?", s, sizeof(s));
	ck_assert_str_eq(s, "UPDATE temp.[t 1]");
	sp_live_summary("SELECT a FROM t WHERE b = 1.5", s, sizeof(s));
	ck_assert_str_eq(s, "SELECT t");
}
END_TEST

static Suite *live_suite(void)
{
	Suite *s = suite_create("live");
	TCase *tb = tcase_create("buckets"), *tw = tcase_create("wire"),
	      *ts = tcase_create("summary");

	tcase_add_test(tb, buckets);
	tcase_add_test(tw, round_trip);
	tcase_add_test(tw, lying_lengths);
	tcase_add_test(ts, summary);
	suite_add_tcase(s, tb);
	suite_add_tcase(s, tw);
	suite_add_tcase(s, ts);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(live_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
