/* SPDX-License-Identifier: MIT */
/*
 * export-series.c - `sqlprof export -f csv --intervals`: one CSV row per
 * query and interval (docs/exports.md), for a dashboard or a notebook to
 * plot executions and latency over time. Counts and times are the
 * interval's exact differences (series.c); p50/p95/p99 come from the
 * interval's own histogram buckets. Rows are in time order, then by
 * fingerprint id. It reads the profile's interval tables only: no
 * symbolizing, no sites.
 */
#include <stdlib.h>
#include <string.h>

#include "export.h"
#include "hist.h"
#include "series.h"
#include "util.h"

/* a restart's corrections (< 0) are left out of one interval's buckets */
static void add_bucket(uint64_t lo, int64_t count, void *arg)
{
	if (count > 0)
		sp_hist_add_bucket(arg, lo, (uint64_t)count);
}

int sp_export_series_csv(FILE *f, sqlite3 *db, const struct sp_window *w)
{
	sqlite3_stmt *st = NULL;
	char a[40];
	int rc = -1, r;

	if (sqlite3_prepare_v2(
		    db,
		    "SELECT i.start_ns, i.end_ns, q.fp_id, q.kind,"
		    " (SELECT fingerprint FROM queries x WHERE x.fp_id = q.fp_id"
		    "  AND x.kind = q.kind LIMIT 1), q.count, q.total_ns, q.self_ns, q.wall_ns,"
		    " q.rows, q.errors, q.buckets FROM interval_queries q JOIN intervals i"
		    " USING (start_ns)"
		    " WHERE q.start_ns >= ?1 AND q.start_ns <= ?2"
		    " ORDER BY q.start_ns, q.fp_id, q.kind",
		    -1, &st, NULL) != SQLITE_OK)
		goto out;
	sqlite3_bind_int64(st, 1, w->lo_start);
	sqlite3_bind_int64(st, 2, w->hi_start);
	fputs("start_ns,end_ns,start,fingerprint_id,kind,fingerprint,count,total_ns,mean_ns,"
	      "p50_ns,p95_ns,p99_ns,self_ns,wall_ns,rows,errors\n",
	      f);
	while ((r = sqlite3_step(st)) == SQLITE_ROW) {
		int64_t count = sqlite3_column_int64(st, 5), total = sqlite3_column_int64(st, 6);
		const char *kind = (const char *)sqlite3_column_text(st, 3);
		const char *fp = (const char *)sqlite3_column_text(st, 4);
		struct sp_hist *h = sp_hist_new();
		uint64_t p[3] = { 0, 0, 0 };

		if (!h)
			goto out;
		sp_series_buckets((const char *)sqlite3_column_text(st, 11), add_bucket, h);
		if (sp_hist_count(h)) {
			p[0] = sp_hist_quantile(h, 0.50);
			p[1] = sp_hist_quantile(h, 0.95);
			p[2] = sp_hist_quantile(h, 0.99);
		}
		sp_hist_free(h);
		fprintf(f, "%lld,%lld,%s,%016llx,%s,", (long long)sqlite3_column_int64(st, 0),
			(long long)sqlite3_column_int64(st, 1),
			sp_series_iso(sqlite3_column_int64(st, 0), a, sizeof(a)),
			(unsigned long long)sqlite3_column_int64(st, 2),
			sp_qkind_name(sp_qkind_parse(kind)));
		sp_csv_str(f, fp ? fp : "");
		fprintf(f, ",%lld,%lld,%.0f,%llu,%llu,%llu,%lld,%lld,%lld,%lld\n", (long long)count,
			(long long)total, count > 0 ? (double)total / (double)count : 0.0,
			(unsigned long long)p[0], (unsigned long long)p[1],
			(unsigned long long)p[2], (long long)sqlite3_column_int64(st, 7),
			(long long)sqlite3_column_int64(st, 8),
			(long long)sqlite3_column_int64(st, 9),
			(long long)sqlite3_column_int64(st, 10));
	}
	rc = r == SQLITE_DONE ? 0 : -1;
out:
	sqlite3_finalize(st);
	return rc;
}

struct points {
	struct sp_series_point *p;
	size_t n, cap;
};

static int point(struct points *ps, int64_t ts, size_t track, uint64_t value)
{
	if (SP_GROW(ps->p, ps->cap, ps->n + 1, 256) < 0)
		return -1;
	ps->p[ps->n++] = (struct sp_series_point){ ts > 0 ? (uint64_t)ts : 0, track, value };
	return 0;
}

int sp_series_points(sqlite3 *db, size_t top, char ***names, size_t *ntracks,
		     struct sp_series_point **pts, size_t *npts)
{
	sqlite3_stmt *qs = NULL, *st = NULL;
	struct points ps = { 0 };
	char **nm = NULL;
	size_t nq = 0;
	int64_t off = 0;
	int rc = -1, have = 0, r;

	*names = NULL;
	*ntracks = 0;
	*pts = NULL;
	*npts = 0;
	if (sqlite3_prepare_v2(db,
			       "SELECT CAST(value AS INTEGER) FROM meta WHERE"
			       " key = 'clock_offset_ns'",
			       -1, &st, NULL) == SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW) {
		off = sqlite3_column_int64(st, 0);
		have = 1;
	}
	sqlite3_finalize(st);
	st = NULL;
	/* more intervals than the agent keeps in decades (about 1,200 and
	 * one a day): not ours, and 16 points each would be a lot of memory */
	if (have &&
	    sqlite3_prepare_v2(db, "SELECT COUNT(*) FROM intervals", -1, &st, NULL) == SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int64(st, 0) > 100000)
		have = 0;
	sqlite3_finalize(st);
	st = NULL;
	/* an older profile, one without intervals, or one whose tables
	 * are not what we wrote: no series, the rest of the trace as ever */
	if (!have ||
	    sqlite3_prepare_v2(db,
			       "SELECT fp_id, kind, fingerprint FROM queries WHERE count > 0"
			       " ORDER BY total_ns DESC, fp_id LIMIT ?",
			       -1, &qs, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(db,
			       "SELECT i.start_ns, i.end_ns, q.count, q.buckets FROM intervals i"
			       " LEFT JOIN interval_queries q ON q.start_ns = i.start_ns AND"
			       " q.fp_id = ?1 AND q.kind = ?2 ORDER BY i.start_ns",
			       -1, &st, NULL) != SQLITE_OK) {
		sqlite3_finalize(qs);
		sqlite3_finalize(st);
		return 0;
	}
	nm = calloc(2 * top + 1, sizeof(*nm));
	if (!nm)
		goto out;
	sqlite3_bind_int64(qs, 1, (sqlite3_int64)top);
	while ((r = sqlite3_step(qs)) == SQLITE_ROW) {
		const char *fp = (const char *)sqlite3_column_text(qs, 2);
		const char *kind = (const char *)sqlite3_column_text(qs, 1);
		char *shortfp = sp_shorten(fp ? fp : "", 60);
		int64_t last_end = 0;

		if (!shortfp)
			goto out;
		sp_term_clean(shortfp);
		if (asprintf(&nm[2 * nq], "executions/s: %s", shortfp) < 0)
			nm[2 * nq] = NULL;
		if (asprintf(&nm[2 * nq + 1], "p95 ns: %s", shortfp) < 0)
			nm[2 * nq + 1] = NULL;
		free(shortfp);
		if (!nm[2 * nq] || !nm[2 * nq + 1])
			goto out;
		sqlite3_bind_int64(st, 1, sqlite3_column_int64(qs, 0));
		sqlite3_bind_text(st, 2, sp_qkind_name(sp_qkind_parse(kind)), -1, SQLITE_STATIC);
		while (sqlite3_step(st) == SQLITE_ROW) {
			int64_t s = sqlite3_column_int64(st, 0), e = sqlite3_column_int64(st, 1);
			int64_t n = sqlite3_column_int64(st, 2);
			uint64_t p95 = 0;

			if (n > 0) {
				struct sp_hist *h = sp_hist_new();

				if (!h)
					goto out;
				sp_series_buckets((const char *)sqlite3_column_text(st, 3),
						  add_bucket, h);
				p95 = sp_hist_count(h) ? sp_hist_quantile(h, 0.95) : 0;
				sp_hist_free(h);
			}
			if (point(&ps, s - off, 2 * nq,
				  n > 0 && e > s
					  ? (uint64_t)((double)n * 1e9 / (double)(e - s) + 0.5)
					  : 0) < 0 ||
			    point(&ps, s - off, 2 * nq + 1, p95) < 0)
				goto out;
			last_end = e;
		}
		sqlite3_reset(st);
		if (last_end && (point(&ps, last_end - off, 2 * nq, 0) < 0 ||
				 point(&ps, last_end - off, 2 * nq + 1, 0) < 0))
			goto out;
		nq++;
	}
	if (r != SQLITE_DONE)
		goto out;
	*names = nm;
	*ntracks = 2 * nq;
	*pts = ps.p;
	*npts = ps.n;
	nm = NULL;
	ps.p = NULL;
	rc = 0;
out:
	for (size_t i = 0; nm && nm[i]; i++)
		free(nm[i]);
	free(nm);
	free(ps.p);
	sqlite3_finalize(qs);
	sqlite3_finalize(st);
	return rc;
}
