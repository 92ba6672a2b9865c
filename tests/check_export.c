/* SPDX-License-Identifier: MIT */
/*
 * check_export.c - unit tests for `sqlprof export` (report/output/export-*.c).
 *
 * The profile is the synthetic fixture of tests/golden/export/: an empty
 * profile written by sp_profile_write (the current schema), then
 * fixture.sql applied ($EXPORT_FIXTURE_SQL, default the path relative to
 * the repository root, where `make unit` runs). Tested: UTF-8 clean-up and
 * XML escaping; the folded stacks (libsqlprof frames left out, estimates,
 * ';' and newlines in frames replaced); overlap lanes; and the Perfetto
 * trace, decoded here by a small protobuf reader that accepts only the
 * field numbers sqlprof means to write (docs/exports.md), resolves
 * interned names, and checks that begins and ends pair up and nest per
 * track in time order, the nested statement inside its exec.
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collect.h"
#include "export.h"
#include "profile-write.h"

static char fixture[64];

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *b;
	long n;

	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	b = malloc((size_t)n + 1);
	if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
		free(b);
		b = NULL;
	}
	if (b)
		b[n] = 0;
	fclose(f);
	return b;
}

/* Write the fixture profile to path, with extra SQL applied after it. */
static void make_fixture(const char *path, const char *extra)
{
	const char *sqlpath = getenv("EXPORT_FIXTURE_SQL");
	struct sp_meta m = { .command = "fixture", .rate = 1 };
	struct sp_coll c;
	char err[256], *sql;
	sqlite3 *db;

	sp_coll_init(&c);
	ck_assert_msg(sp_profile_write(path, &c, &m, err, sizeof(err)) == 0, "%s", err);
	sp_coll_free(&c);
	sql = slurp(sqlpath ? sqlpath : "tests/golden/export/fixture.sql");
	ck_assert_msg(sql, "fixture.sql not found (run from the repository root)");
	ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
	ck_assert_msg(sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK, "%s",
		      sqlite3_errmsg(db));
	if (extra)
		ck_assert_msg(sqlite3_exec(db, extra, NULL, NULL, NULL) == SQLITE_OK, "%s",
			      sqlite3_errmsg(db));
	sqlite3_close(db);
	free(sql);
}

static void load(struct sp_export *x, const char *extra, int weight)
{
	char err[256];

	snprintf(fixture, sizeof(fixture), "/tmp/check_export.%d.db", (int)getpid());
	make_fixture(fixture, extra);
	ck_assert_msg(sp_export_load(x, fixture, NULL, weight, err, sizeof(err)) == 0, "%s", err);
}

static void unload(struct sp_export *x)
{
	sp_export_free(x);
	unlink(fixture);
}

/* Run a printer into memory. */
static char *run(int (*p)(FILE *, struct sp_export *), struct sp_export *x, size_t *len)
{
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);

	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(p(f, x), 0);
	fclose(f);
	if (len)
		*len = n;
	return buf;
}

/* ---- text -------------------------------------------------------------------- */

START_TEST(test_utf8)
{
	char *s = sp_export_utf8("ok \xC3\xA9 \xFF \xC0\xAF \xED\xA0\x80 \xEF\xBF\xBE end");

	ck_assert_str_eq(
		s, "ok \xC3\xA9 \xEF\xBF\xBD \xEF\xBF\xBD\xEF\xBF\xBD "
		   "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD \xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD end");
	free(s);
	s = sp_export_utf8("\xE2\x82"); /* truncated at the end */
	ck_assert_str_eq(s, "\xEF\xBF\xBD\xEF\xBF\xBD");
	free(s);
}
END_TEST

START_TEST(test_xml)
{
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);

	sp_xml_str(f, "<script>alert(1)</script> ]]> \"q\" 'a' & \x01\n");
	fclose(f);
	ck_assert_str_eq(buf,
			 "&lt;script&gt;alert(1)&lt;/script&gt; ]]&gt; &quot;q&quot; &#39;a&#39;"
			 " &amp; \xEF\xBF\xBD&#10;");
	free(buf);
}
END_TEST

/* ---- flame stacks ---------------------------------------------------------------- */

START_TEST(test_folded)
{
	struct sp_export x;
	char *out;
	size_t i;
	uint64_t total = 0;

	load(&x, NULL, SP_XW_TIME);
	ck_assert_uint_eq(x.nfs, 9);
	for (i = 0; i < x.nfs; i++) {
		ck_assert_ptr_null(strstr(x.fs[i].line, "libsqlprof"));
		ck_assert_ptr_null(strstr(x.fs[i].line, "shims.c"));
		total += sp_export_fweight(&x, &x.fs[i]);
	}
	ck_assert_uint_eq(total, 1437000); /* sum of self_ns */
	out = run(sp_export_folded, &x, NULL);
	/* 1001 at author_name: 20+10 of 50 samples, 150000 of 250000 ns of 500000 */
	ck_assert_ptr_nonnull(strstr(out, "author_name (/src/shop/shop.c:40);"
					  "SELECT name FROM authors WHERE id = ? 300000\n"));
	/* the exec's own time only; its statement under sqlite3_exec */
	ck_assert_ptr_nonnull(
		strstr(out, ";[exec] CREATE TABLE t(a), INSERT INTO t VALUES (?) 30000\n"));
	ck_assert_ptr_nonnull(strstr(out, "setup_schema (/src/shop/shop.c:20);sqlite3_exec "
					  "(libsqlite3.so.0);INSERT INTO t VALUES (?) 60000\n"));
	ck_assert_ptr_nonnull(strstr(out, "[no stack recorded];SELECT count(*) FROM books 7000\n"));
	free(out);
	unload(&x);
}
END_TEST

START_TEST(test_folded_hostile)
{
	struct sp_export x;
	char *out, *p;
	int lines = 0;

	load(&x,
	     "UPDATE frames SET function = 'a;b' || char(10) || 'c' WHERE function = 'main';"
	     "UPDATE queries SET fingerprint = 'SELECT 1;' || char(10) || 'SELECT 2' WHERE fp_id = 1002;",
	     SP_XW_COUNT);
	out = run(sp_export_folded, &x, NULL);
	for (p = out; *p; p++)
		lines += *p == '\n';
	ck_assert_int_eq(lines, 9);
	ck_assert_ptr_nonnull(
		strstr(out, "a,b c (/src/shop/shop.c:95);search_titles (/src/shop/shop.c:60);"
			    "SELECT 1, SELECT 2 4\n"));
	free(out);
	unload(&x);
}
END_TEST

START_TEST(test_lanes)
{
	struct sp_export x;
	size_t i;

	load(&x, NULL, SP_XW_TIME);
	ck_assert_uint_eq(x.nth, 0); /* only the timelines load the events */
	ck_assert_int_eq(sp_export_events(&x), 0);
	ck_assert_uint_eq(x.nth, 2);
	ck_assert_uint_eq(x.th[0].n, 7);
	ck_assert_int_eq(x.th[0].lanes, 2);
	for (i = 0; i < x.nev; i++)
		ck_assert_int_eq(x.ev[i].lane, x.ev[i].seq == 6 && x.ev[i].pid == 100);
	unload(&x);
}
END_TEST

/* ---- perfetto ------------------------------------------------------------------ */

struct rd {
	const uint8_t *p, *end;
};

static int rd_varint(struct rd *r, uint64_t *v)
{
	int shift = 0;

	*v = 0;
	while (r->p < r->end && shift < 64) {
		uint8_t b = *r->p++;

		*v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return 0;
		shift += 7;
	}
	return -1;
}

/* Next field: number, wire type, varint value or sub-reader. */
static int rd_field(struct rd *r, unsigned *field, unsigned *wt, uint64_t *v, struct rd *sub)
{
	uint64_t key;

	if (r->p >= r->end || rd_varint(r, &key) < 0)
		return -1;
	*field = (unsigned)(key >> 3);
	*wt = (unsigned)(key & 7);
	if (*wt == 0)
		return rd_varint(r, v);
	if (*wt == 2) {
		if (rd_varint(r, v) < 0 || *v > (uint64_t)(r->end - r->p))
			return -1;
		sub->p = r->p;
		sub->end = r->p + *v;
		r->p += *v;
		return 0;
	}
	return -1; /* sqlprof writes only varints and length-delimited fields */
}

static int allowed(unsigned f, const unsigned *ok)
{
	for (; *ok; ok++)
		if (*ok == f)
			return 1;
	return 0;
}

/* Check every field of a message is in ok[] with wire type wt[i]. */
static void check_fields(struct rd m, const unsigned *ok, const char *what)
{
	unsigned f, wt;
	uint64_t v;
	struct rd s;

	while (m.p < m.end) {
		ck_assert_msg(rd_field(&m, &f, &wt, &v, &s) == 0, "%s: bad encoding", what);
		ck_assert_msg(allowed(f, ok), "%s: unexpected field %u", what, f);
	}
}

struct slice {
	uint64_t track, iid;
};

START_TEST(test_perfetto)
{
	static const unsigned pk_ok[] = { 8, 10, 11, 12, 13, 60, 0 };
	static const unsigned td_ok[] = { 1, 2, 3, 4, 5, 8, 0 };
	static const unsigned pd_ok[] = { 1, 6, 0 };
	static const unsigned thd_ok[] = { 1, 2, 5, 0 };
	static const unsigned te_ok[] = { 4, 9, 10, 11, 22, 30, 0 };
	static const unsigned da_ok[] = { 3, 4, 6, 10, 0 };
	static const unsigned id_ok[] = { 2, 0 };
	static const unsigned en_ok[] = { 1, 2, 0 };
	char names[64][128] = { { 0 } };
	uint64_t parent[64] = { 0 }, last_ts = 0, exec_track = 0;
	struct slice open[64][16];
	int nopen[64] = { 0 }, npk = 0, begins = 0, ends = 0, threads = 0, counters = 0;
	int nested_ok = 0, lane_ok = 0;
	struct sp_export x;
	struct rd trace;
	size_t len;
	char *buf;

	load(&x, NULL, SP_XW_TIME);
	buf = run(sp_export_perfetto, &x, &len);
	trace = (struct rd){ (const uint8_t *)buf, (const uint8_t *)buf + len };
	while (trace.p < trace.end) {
		unsigned f, wt;
		uint64_t v, ts = 0, seq = 0, flags = 0, type = 0, track = 0, iid = 0;
		struct rd pk, s, te = { 0 };
		int has_te = 0;

		ck_assert_int_eq(rd_field(&trace, &f, &wt, &v, &pk), 0);
		ck_assert_uint_eq(f, 1); /* Trace.packet */
		ck_assert_uint_eq(wt, 2);
		check_fields(pk, pk_ok, "TracePacket");
		while (pk.p < pk.end) {
			ck_assert_int_eq(rd_field(&pk, &f, &wt, &v, &s), 0);
			if (f == 8)
				ts = v;
			else if (f == 10)
				seq = v;
			else if (f == 13)
				flags = v;
			else if (f == 60) { /* TrackDescriptor */
				uint64_t uuid = 0, par = 0;
				struct rd sub;

				check_fields(s, td_ok, "TrackDescriptor");
				while (s.p < s.end) {
					ck_assert_int_eq(rd_field(&s, &f, &wt, &v, &sub), 0);
					if (f == 1)
						uuid = v;
					if (f == 5)
						par = v;
					if (f == 3)
						check_fields(sub, pd_ok, "ProcessDescriptor");
					if (f == 4) {
						check_fields(sub, thd_ok, "ThreadDescriptor");
						threads++;
					}
					if (f == 8)
						counters++;
				}
				ck_assert(uuid > 0 && uuid < 64);
				parent[uuid] = par;
			} else if (f == 12) { /* InternedData */
				struct rd en, fld;

				check_fields(s, id_ok, "InternedData");
				while (s.p < s.end) {
					uint64_t id = 0;

					ck_assert_int_eq(rd_field(&s, &f, &wt, &v, &en), 0);
					check_fields(en, en_ok, "EventName");
					while (en.p < en.end) {
						ck_assert_int_eq(rd_field(&en, &f, &wt, &v, &fld),
								 0);
						if (f == 1)
							id = v;
						else if (id > 0 && id < 64)
							snprintf(names[id], sizeof(names[id]),
								 "%.*s", (int)(fld.end - fld.p),
								 (const char *)fld.p);
					}
					ck_assert_msg(id > 0 && id < 64 && names[id][0],
						      "bad interned name");
				}
			} else if (f == 11) {
				te = s;
				has_te = 1;
			}
		}
		ck_assert_uint_eq(seq, 1);
		if (npk++ == 0)
			ck_assert_uint_eq(flags, 1); /* SEQ_INCREMENTAL_STATE_CLEARED */
		if (!has_te)
			continue;
		ck_assert_uint_eq(flags, 2); /* SEQ_NEEDS_INCREMENTAL_STATE */
		ck_assert_msg(ts >= last_ts, "track events out of time order");
		last_ts = ts;
		check_fields(te, te_ok, "TrackEvent");
		while (te.p < te.end) {
			struct rd sub;

			ck_assert_int_eq(rd_field(&te, &f, &wt, &v, &sub), 0);
			if (f == 9)
				type = v;
			else if (f == 11)
				track = v;
			else if (f == 10)
				iid = v;
			else if (f == 4)
				check_fields(sub, da_ok, "DebugAnnotation");
		}
		ck_assert(track > 0 && track < 64);
		if (type == 1) {
			ck_assert_msg(iid > 0 && iid < 64 && names[iid][0],
				      "name_iid %llu not interned", (unsigned long long)iid);
			ck_assert_int_lt(nopen[track], 16);
			if (!strcmp(names[iid], "INSERT INTO t VALUES (?)"))
				nested_ok = nopen[track] == 1 &&
					    !strncmp(names[open[track][0].iid], "[exec] ", 7);
			if (!strncmp(names[iid], "[exec] ", 7))
				exec_track = track;
			/* seq 6 (1550000 ns) overlaps the LIKE scan: a child lane */
			if (ts == 1550000)
				lane_ok = parent[track] != 0 && nopen[parent[track]] == 1;
			open[track][nopen[track]++] = (struct slice){ track, iid };
			begins++;
		} else if (type == 2) {
			ck_assert_msg(nopen[track] > 0, "slice end without begin on track %llu",
				      (unsigned long long)track);
			nopen[track]--;
			ends++;
		} else {
			ck_assert_uint_eq(type, 4);
		}
	}
	ck_assert_int_eq(begins, 8);
	ck_assert_int_eq(ends, 8);
	ck_assert_int_eq(threads, 2);
	ck_assert_int_eq(counters, 2);
	ck_assert_msg(nested_ok, "nested statement not inside its exec slice");
	ck_assert_msg(exec_track != 0, "no exec slice");
	ck_assert_msg(lane_ok, "overlapping execution not on a child lane of its thread");
	for (int t = 0; t < 64; t++)
		ck_assert_int_eq(nopen[t], 0);
	free(buf);
	unload(&x);
}
END_TEST

/* ---- escaping in the text formats ------------------------------------------------ */

START_TEST(test_escaping)
{
	struct sp_export x;
	char *out;

	load(&x,
	     "UPDATE queries SET fingerprint = '"
	     "<script>alert(1)</script> ]]> \"q\" ''a'' ;x"
	     "'"
	     " || char(10) || '=cmd|' WHERE fp_id = 1002;"
	     "UPDATE frames SET function = '<img src=x onerror=alert(2)>' WHERE function = 'main';",
	     SP_XW_TIME);
	out = run(sp_export_svg_file, &x, NULL);
	ck_assert_ptr_null(strstr(out, "<script>alert"));
	ck_assert_ptr_null(strstr(out, "<img"));
	ck_assert_ptr_nonnull(strstr(out, "&lt;script&gt;alert(1)&lt;/script&gt; ]]&gt;"));
	/* the one CDATA section is the script's own */
	ck_assert_ptr_eq(strstr(out, "]]>"), strrchr(out, ']') - 1);
	free(out);
	out = run(sp_export_html, &x, NULL);
	ck_assert_ptr_null(strstr(out, "<script>alert"));
	ck_assert_ptr_null(strstr(out, "<img"));
	free(out);
	out = run(sp_export_chrome, &x, NULL);
	ck_assert_ptr_null(strstr(out, "<script>"));
	ck_assert_ptr_nonnull(strstr(out, "\\u003cscript\\u003e"));
	free(out);
	out = run(sp_export_csv, &x, NULL);
	ck_assert_ptr_nonnull(
		strstr(out, "\"<script>alert(1)</script> ]]> \"\"q\"\" 'a' ;x\n=cmd|\""));
	free(out);
	unload(&x);
}
END_TEST

static Suite *export_suite(void)
{
	Suite *s = suite_create("export");
	TCase *tc;

	tc = tcase_create("text");
	tcase_add_test(tc, test_utf8);
	tcase_add_test(tc, test_xml);
	suite_add_tcase(s, tc);

	tc = tcase_create("flame");
	tcase_add_test(tc, test_folded);
	tcase_add_test(tc, test_folded_hostile);
	tcase_add_test(tc, test_lanes);
	suite_add_tcase(s, tc);

	tc = tcase_create("perfetto");
	tcase_add_test(tc, test_perfetto);
	suite_add_tcase(s, tc);

	tc = tcase_create("escaping");
	tcase_add_test(tc, test_escaping);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(export_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
