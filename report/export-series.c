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

	if (sqlite3_prepare_v2(db,
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
	      "p50_ns,p95_ns,p99_ns,self_ns,wall_ns,rows,errors\n", f);
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
			kind && !strcmp(kind, "exec") ? "exec" : "stmt");
		sp_csv_str(f, fp ? fp : "");
		fprintf(f, ",%lld,%lld,%.0f,%llu,%llu,%llu,%lld,%lld,%lld,%lld\n", (long long)count,
			(long long)total, count > 0 ? (double)total / (double)count : 0.0,
			(unsigned long long)p[0], (unsigned long long)p[1], (unsigned long long)p[2],
			(long long)sqlite3_column_int64(st, 7), (long long)sqlite3_column_int64(st, 8),
			(long long)sqlite3_column_int64(st, 9), (long long)sqlite3_column_int64(st, 10));
	}
	rc = r == SQLITE_DONE ? 0 : -1;
out:
	sqlite3_finalize(st);
	return rc;
}
