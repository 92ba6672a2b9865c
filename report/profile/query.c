/* SPDX-License-Identifier: MIT */
/*
 * query.c - load per-query rows from a profile; see query.h.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "util.h"
#include <string.h>

#include "hist.h"
#include "query.h"
#include "untrusted.h"

static char *col_dup(sqlite3_stmt *st, int i)
{
	const unsigned char *t = sqlite3_column_text(st, i);

	return strdup(t ? (const char *)t : "");
}

/* The counters of SP_QROW_COLS: where each is in a row, and whether a
 * window sums it. */
#define QCOL_OFF(c, sum) offsetof(struct sp_qrow, c),
#define QCOL_SUM(c, sum) sum,
#define QCOL_U64(c, sum)                                                                      \
	_Static_assert(                                                                       \
		__builtin_types_compatible_p(__typeof__(((struct sp_qrow *)0)->c), uint64_t), \
		#c " is a uint64_t");
SP_QROW_COLS(QCOL_U64)
static const size_t qcol_off[] = { SP_QROW_COLS(QCOL_OFF) };
static const unsigned char qcol_sum[] = { SP_QROW_COLS(QCOL_SUM) };
#define NQCOL (sizeof(qcol_off) / sizeof(qcol_off[0]))

static uint64_t *qcol(struct sp_qrow *r, size_t i)
{
	return (uint64_t *)(void *)((char *)r + qcol_off[i]);
}

/* Loading's failures inside this file: a helper returns 0 or one of
 * these, and sp_qset_load_window turns it into an error code and a reason. */
enum { Q_SQL = -1, Q_NOMEM = -2 };

static uint64_t scalar(sqlite3 *db, const char *sql)
{
	sqlite3_stmt *st;
	uint64_t v = 0;

	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		return 0;
	if (sqlite3_step(st) == SQLITE_ROW)
		v = sp_col_u64(st, 0);
	sqlite3_finalize(st);
	return v;
}

struct qkey {
	int64_t fp_id, kind_exec;
};

int sp_qrow_key_cmp(const struct sp_qrow *r, int64_t fp_id, int kind_exec)
{
	if (r->fp_id != fp_id)
		return r->fp_id < fp_id ? -1 : 1;
	return kind_exec - (r->kind == SP_QK_EXEC);
}

size_t sp_qset_seek(const struct sp_qset *qs, int64_t fp_id, int kind_exec, size_t cur)
{
	const struct sp_qrow *r = qs->rows;
	size_t lo, hi, step = 1;

	if (cur > qs->n)
		cur = qs->n;
	if (cur < qs->n && sp_qrow_key_cmp(&r[cur], fp_id, kind_exec) < 0) {
		/* after cur: forward by doubling steps */
		for (lo = hi = cur + 1; hi < qs->n && sp_qrow_key_cmp(&r[hi], fp_id, kind_exec) < 0;
		     step *= 2) {
			lo = hi + 1;
			hi += step;
		}
		if (hi > qs->n)
			hi = qs->n;
	} else { /* at or before cur: backward so */
		for (lo = hi = cur; lo > 0 && sp_qrow_key_cmp(&r[lo - 1], fp_id, kind_exec) >= 0;
		     step *= 2) {
			hi = lo - 1;
			lo = hi > step ? hi - step : 0;
		}
	}
	while (lo < hi) { /* r[lo - 1] < key (or lo 0), r[hi] >= key (or hi n) */
		size_t mid = lo + (hi - lo) / 2;

		if (sp_qrow_key_cmp(&r[mid], fp_id, kind_exec) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The loaders' index of qs's rows: {fp_id, kind_exec} -> {row index + 1,
 * has a histogram}. Rows in the writer's order, each key once (as
 * profiles are written), have an entry each in v and are found by
 * sp_qset_seek from the last answer (a map look-up was a cache miss at
 * 200,000 fingerprints: 5 % of check's CPU); else the map (a later row of
 * a key wins). */
struct qidx {
	const struct sp_qset *qs;
	size_t (*v)[2]; /* NULL: the map */
	size_t cur;
	struct hmap map;
};

static size_t *qidx_get(struct qidx *x, int64_t fp_id, int64_t kind_exec)
{
	struct qkey k = { fp_id, kind_exec };
	size_t i;

	if (!x->v)
		return hmap_get(&x->map, &k, 0, NULL);
	if (kind_exec != 0 && kind_exec != 1)
		return NULL;
	i = x->cur = sp_qset_seek(x->qs, fp_id, (int)kind_exec, x->cur);
	return i < x->qs->n && !sp_qrow_key_cmp(&x->qs->rows[i], fp_id, (int)kind_exec) ? x->v[i]
											: NULL;
}

int sp_qset_load(sqlite3 *db, struct sp_qset *qs, char *err, size_t errlen)
{
	return sp_qset_load_window(db, NULL, qs, err, errlen);
}

/* One bucket of an interval's histogram difference: a negative one (an
 * agent's restart moved an execution to the next bucket) takes off what
 * an earlier interval added. */
static void window_bucket(uint64_t lo, int64_t count, void *arg)
{
	if (count > 0)
		sp_hist_add_bucket(arg, lo, (uint64_t)count);
	else if (count < 0)
		sp_hist_sub_bucket(arg, lo, (uint64_t)-count);
}

#define QCOL_SUM_SQL(c, sum) QCOL_SUM_SQL_##sum(c)
#define QCOL_SUM_SQL_1(c) ", SUM(" #c ")"
#define QCOL_SUM_SQL_0(c)

/* A window's sums in place of the totals loaded (sp_qset_load_window):
 * the summed columns of SP_QROW_COLS. 0 or Q_SQL. */
static int window_sums(sqlite3 *db, const struct sp_window *w, struct sp_qset *qs, struct qidx *idx)
{
	sqlite3_stmt *st;
	int rc;

	for (size_t i = 0; i < qs->n; i++)
		for (size_t c = 0; c < NQCOL; c++)
			if (qcol_sum[c])
				*qcol(&qs->rows[i], c) = 0;
	if (sqlite3_prepare_v2(
		    db,
		    "SELECT fp_id, kind" SP_QROW_COLS(
			    QCOL_SUM_SQL) " FROM interval_queries"
					  " WHERE start_ns >= ?1 AND start_ns <= ?2 GROUP BY fp_id, kind",
		    -1, &st, NULL) != SQLITE_OK)
		return Q_SQL;
	sqlite3_bind_int64(st, 1, w->lo_start);
	sqlite3_bind_int64(st, 2, w->hi_start);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		const char *kind = (const char *)sqlite3_column_text(st, 1);
		struct qkey k = { sqlite3_column_int64(st, 0), sp_qkind_parse(kind) };
		size_t *ix = qidx_get(idx, k.fp_id, k.kind_exec);
		struct sp_qrow *r;
		int at = 2;

		if (!ix)
			continue; /* not in queries (or never ran): nothing to show */
		r = &qs->rows[*ix - 1];
		for (size_t c = 0; c < NQCOL; c++)
			if (qcol_sum[c])
				*qcol(r, c) = sp_col_u64(st, at++);
		r->mean_ns = r->count ? (double)r->total_ns / (double)r->count : 0;
	}
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? 0 : Q_SQL;
}

/* One fingerprint's group of plans, in the order they are preferred
 * (plan_group_row): the first goes to its rows, the distinct ones are
 * counted. */
struct plan_groups {
	struct sp_qset *qs;
	struct qidx *idx;
	int64_t last;
	int have;
	size_t row[2];  /* last's rows (stmt, exec): index + 1, 0 for none */
	uint64_t *seen; /* hashes of the group's distinct plans */
	size_t nseen, capseen;
};

/* The next plan row (fp, text pt, NULL: none) in preference order, or
 * the end (more 0). take: pt is malloc'd and may be kept by a row (then
 * *take is set to NULL), else it is copied. 0, or -1 on ENOMEM. */
static int plan_group_row(struct plan_groups *g, int more, int64_t fp, const char *pt, char **take)
{
	uint64_t hp;
	size_t i;

	if (g->have && (!more || fp != g->last)) {
		/* the group ends: its count of distinct plans */
		for (int kx = 0; kx < 2; kx++)
			if (g->row[kx])
				g->qs->rows[g->row[kx] - 1].nplans = (int)g->nseen;
		g->nseen = 0;
	}
	if (!more)
		return 0;
	if (!g->have || fp != g->last) {
		/* the first group of a fingerprint wins (a hostile profile's
		 * fp_id of two types sorts apart) */
		for (int kx = 0; kx < 2; kx++) {
			struct qkey k = { fp, kx };
			size_t *ix = qidx_get(g->idx, k.fp_id, k.kind_exec);
			struct sp_qrow *r = ix ? &g->qs->rows[*ix - 1] : NULL;

			g->row[kx] = ix ? *ix : 0; /* for the group's end */
			if (!r || r->plan)
				continue;
			if (take && *take) {
				r->plan = *take;
				*take = NULL;
			} else if (!(r->plan = strdup(pt ? pt : ""))) {
				return -1;
			}
		}
	}
	g->have = 1;
	g->last = fp;
	if (!pt) /* COUNT(DISTINCT) leaves NULL out */
		return 0;
	hp = sp_hash_bytes(pt, strlen(pt));
	for (i = 0; i < g->nseen && g->seen[i] != hp; i++)
		;
	if (i < g->nseen)
		return 0;
	if (SP_GROW(g->seen, g->capseen, g->nseen + 1, 8) < 0)
		return -1;
	g->seen[g->nseen++] = hp;
	return 0;
}

/* A plan row read in table order, for a sort in C. */
struct plan_ent {
	int64_t fp, conn, rowid;
	char *text; /* malloc'd, NULL for a NULL plan */
};

static int cmp_plan_ent(const void *pa, const void *pb)
{
	const struct plan_ent *a = pa, *b = pb;

	if (a->fp != b->fp)
		return a->fp < b->fp ? -1 : 1;
	if (a->conn != b->conn)
		return a->conn > b->conn ? -1 : 1;
	return a->rowid < b->rowid ? -1 : a->rowid > b->rowid;
}

/* The plans table in table order into *out (n of them), for
 * ORDER BY fp_id, connections DESC, rowid sorted in C: SQLite's sorter
 * took 8 % of diff's CPU at 200,000 plans (it carries each row's text
 * through its sort), qsort of 32-byte keys 0.3 %. 1 when done, 0 when
 * the table cannot be read so (no table, a value that is not an integer:
 * SQL's order of mixed types is the SQL path's), -1 on ENOMEM. */
static int plans_read(sqlite3 *db, struct plan_ent **out, size_t *n)
{
	sqlite3_stmt *st;
	size_t cap = 0, want;
	int rc, ret = 1;

	*out = NULL;
	*n = 0;
	/* sized once (see load_rows) */
	if ((want = (size_t)scalar(db, "SELECT COUNT(*) FROM plans")) > 0 &&
	    SP_GROW(*out, cap, want, want) < 0)
		return -1;
	if (sqlite3_prepare_v2(db, "SELECT fp_id, connections, rowid, plan FROM plans", -1, &st,
			       NULL) != SQLITE_OK)
		return 0;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		const unsigned char *t;
		struct plan_ent *e;

		if (sqlite3_column_type(st, 0) != SQLITE_INTEGER ||
		    sqlite3_column_type(st, 1) != SQLITE_INTEGER) {
			ret = 0;
			break;
		}
		if (SP_GROW(*out, cap, *n + 1, 256) < 0) {
			ret = -1;
			break;
		}
		e = &(*out)[*n];
		e->fp = sqlite3_column_int64(st, 0);
		e->conn = sqlite3_column_int64(st, 1);
		e->rowid = sqlite3_column_int64(st, 2);
		t = sqlite3_column_text(st, 3);
		e->text = t ? strdup((const char *)t) : NULL;
		if (t && !e->text) {
			ret = -1;
			break;
		}
		++*n;
	}
	sqlite3_finalize(st);
	if (ret == 1 && rc != SQLITE_DONE)
		ret = 0; /* the SQL path says what failed, or reads what it can */
	if (ret == 1)
		sp_qsort(*out, *n, sizeof(**out), cmp_plan_ent);
	return ret;
}

static void plans_free(struct plan_ent *e, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(e[i].text);
	free(e);
}

/* The plans of qs's rows (idx: {fp_id, kind_exec} -> row index + 1):
 * the one reported by most connections (the first such row), and how many
 * differ, for every fingerprint in one pass (a second one, COUNT(DISTINCT
 * plan) grouped by fingerprint, sorted the plans of 200,000 fingerprints
 * again: 0.85 s of CPU). The table is read in its order and sorted in C
 * (plans_read), or by SQLite when its values are not all integers
 * ("+fp_id": the table read in its order and sorted, not through plans_fp
 * with a seek into the table for each row: 196,797 plans, 0.9 -> 0.2 s of
 * CPU, the order the same). 0, or -1 on ENOMEM. */
static int load_plans(sqlite3 *db, struct sp_qset *qs, struct qidx *idx)
{
	struct plan_groups g = { .qs = qs, .idx = idx };
	struct plan_ent *e;
	sqlite3_stmt *st;
	size_t n;
	int ret = plans_read(db, &e, &n);

	if (ret != 0) {
		for (size_t i = 0; ret > 0 && i < n; i++)
			if (plan_group_row(&g, 1, e[i].fp, e[i].text, &e[i].text) < 0)
				ret = -1;
		ret = ret < 0 || plan_group_row(&g, 0, 0, NULL, NULL) < 0 ? -1 : 0;
		plans_free(e, n);
		free(g.seen);
		return ret;
	}
	plans_free(e, n);
	if (sqlite3_prepare_v2(
		    db, "SELECT fp_id, plan FROM plans ORDER BY +fp_id, connections DESC, rowid",
		    -1, &st, NULL) != SQLITE_OK)
		return 0; /* no plans table: nothing to show */
	for (;;) {
		int more = sqlite3_step(st) == SQLITE_ROW;

		if (plan_group_row(&g, more, more ? sqlite3_column_int64(st, 0) : 0,
				   more ? (const char *)sqlite3_column_text(st, 1) : NULL,
				   NULL) < 0) {
			ret = -1;
			break;
		}
		if (!more)
			break;
	}
	free(g.seen);
	sqlite3_finalize(st);
	return ret;
}

/* SUM(count) over every row of queries, as load_rows adds it up; exact 0
 * when only SQLite can say (a real or a text, an overflow). */
struct qsum {
	int64_t v;
	int exact;
};

/* Whether the queries row at st ran, its count (column col) > 0 as SQL
 * compares it (a text or a blob is greater than any number), its count
 * added to *sum as SUM(count) would. */
static int row_ran(sqlite3_stmt *st, int col, struct qsum *sum)
{
	int t = sqlite3_column_type(st, col);
	sqlite3_int64 v;

	if (t == SQLITE_INTEGER) {
		v = sqlite3_column_int64(st, col);
		if (__builtin_add_overflow(sum->v, v, &sum->v))
			sum->exact = 0;
		return v > 0;
	}
	if (t == SQLITE_NULL) /* SUM leaves it out */
		return 0;
	sum->exact = 0;
	return t == SQLITE_FLOAT ? sqlite3_column_double(st, col) > 0 : 1;
}

/* Every row of queries that ran into qs->rows (qs->n of them), and the
 * sum of every row's count into *sum (the total of executions: a second
 * pass over the table, SUM(count), read it all again). 0, Q_SQL or
 * Q_NOMEM (the rows loaded so far stay in qs, for sp_qset_free). */
static int load_rows(sqlite3 *db, struct sp_qset *qs, struct qsum *sum)
{
	sqlite3_stmt *st;
	size_t cap = 0;
	size_t nrows;
	int rc;

	*sum = (struct qsum){ 0, 1 };
	/* sized once, for every row (those that never ran are left out):
	 * each doubling of 186,431 rows was a copy into new pages, 28 % of
	 * report's page faults at 200,000 fingerprints */
	if ((nrows = (size_t)scalar(db, "SELECT COUNT(*) FROM queries")) > 0 &&
	    SP_GROW(qs->rows, cap, nrows, nrows) < 0)
		return Q_NOMEM;
	if (sqlite3_prepare_v2(db, "SELECT " SP_QUERIES_SELECT " FROM queries", -1, &st, NULL) !=
	    SQLITE_OK)
		return Q_SQL;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct sp_qrow *r;

		if (!row_ran(st, 4, sum)) /* count, the first of SP_QROW_COLS */
			continue;
		if (SP_GROW(qs->rows, cap, qs->n + 1, 64) < 0)
			break;
		r = &qs->rows[qs->n];
		memset(r, 0, sizeof(*r));
		r->fp_id = sqlite3_column_int64(st, 0);
		r->kind = sp_qkind_parse((const char *)sqlite3_column_text(st, 1));
		r->fingerprint = col_dup(st, 2);
		r->sql = col_dup(st, 3);
		qs->n++;
		if (!r->fingerprint || !r->sql)
			break;
		for (size_t c = 0; c < NQCOL; c++)
			*qcol(r, c) = sp_col_u64(st, 4 + (int)c);
		r->mean_ns = r->count ? (double)r->total_ns / (double)r->count : 0;
	}
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? 0 : rc == SQLITE_ROW ? Q_NOMEM : Q_SQL;
}

/* idx (see struct qidx): v when qs's rows are in the writer's order,
 * each key once, else the map, sized once for qs->n rows (a later row of
 * the same key wins). 0 or Q_NOMEM. */
static int index_rows(const struct sp_qset *qs, struct qidx *idx)
{
	size_t i;

	idx->qs = qs;
	for (i = 1; i < qs->n; i++)
		if (sp_qrow_key_cmp(&qs->rows[i - 1], qs->rows[i].fp_id,
				    qs->rows[i].kind == SP_QK_EXEC) >= 0)
			break;
	if (i >= qs->n) {
		if (!(idx->v = calloc(qs->n ? qs->n : 1, sizeof(*idx->v))))
			return Q_NOMEM;
		for (i = 0; i < qs->n; i++)
			idx->v[i][0] = i + 1;
		return 0;
	}
	if (hmap_reserve(&idx->map, qs->n) < 0)
		return Q_NOMEM;
	for (i = 0; i < qs->n; i++) {
		struct qkey k = { qs->rows[i].fp_id, qs->rows[i].kind == SP_QK_EXEC };
		size_t *ix = hmap_get(&idx->map, &k, 1, NULL);

		if (!ix)
			return Q_NOMEM;
		ix[0] = i + 1; /* 0 is "no row" */
	}
	return 0;
}

/* r's percentiles from h, the histogram of its executions (of the window
 * w, whose buckets narrow min and max within the whole profile's). */
static void set_percentiles(struct sp_qrow *r, struct sp_hist *h, const struct sp_window *w)
{
	if (w && sp_hist_count(h)) {
		/* the window's extremes: its buckets', within the whole
		 * profile's exact ones */
		uint64_t mn = sp_hist_min(h), mx = sp_hist_max(h);

		r->min_ns = mn > r->min_ns ? mn : r->min_ns;
		r->max_ns = mx < r->max_ns ? mx : r->max_ns;
		if (r->min_ns > r->max_ns)
			r->min_ns = r->max_ns;
	}
	sp_hist_set_minmax_sum(h, r->min_ns, r->max_ns, r->total_ns);
	r->p50_ns = sp_hist_quantile(h, 0.50);
	r->p95_ns = sp_hist_quantile(h, 0.95);
	r->p99_ns = sp_hist_quantile(h, 0.99);
}

/* hist_pass's answer when the rows it read in table order are not
 * grouped by query. */
#define Q_UNORDERED (-3)

/* One pass over hs's rows (fp_id, kind, then a bucket and its count, or
 * w's interval buckets), grouped by query: each group's percentiles
 * into its row, which gets ix[1] = 1 in idx. check: the rows are in
 * table order, so a query's rows may not be adjacent: Q_UNORDERED when
 * a query's group comes a second time (or its fingerprint goes back),
 * as soon as that is seen. 0, Q_SQL, Q_NOMEM or Q_UNORDERED. */
static int hist_pass(sqlite3_stmt *hs, const struct sp_window *w, struct sp_qset *qs,
		     struct qidx *idx, int check)
{
	struct sp_hist *h = NULL;
	int64_t hfp = 0;
	int hkx = 0, rc, ret = 0, kinds = 0; /* kinds: the groups seen of hfp */

	while ((rc = sqlite3_step(hs)) == SQLITE_ROW || rc == SQLITE_DONE) {
		int64_t fp = rc == SQLITE_ROW ? sqlite3_column_int64(hs, 0) : 0;
		int kx = sp_qkind_parse(rc == SQLITE_ROW ? (const char *)sqlite3_column_text(hs, 1)
							 : NULL);

		if (h && (rc == SQLITE_DONE || fp != hfp || kx != hkx)) {
			struct qkey k = { hfp, hkx };
			size_t *ix = qidx_get(idx, k.fp_id, k.kind_exec);

			if (ix) {
				set_percentiles(&qs->rows[ix[0] - 1], h, w);
				ix[1] = 1;
			}
			sp_hist_free(h);
			h = NULL;
			if (check && rc == SQLITE_ROW &&
			    (fp < hfp || (fp == hfp && (kinds & (1 << kx))))) {
				ret = Q_UNORDERED;
				break;
			}
			kinds = fp == hfp ? kinds : 0;
		}
		if (rc == SQLITE_DONE)
			break;
		if (!h) {
			if (!(h = sp_hist_new())) {
				ret = Q_NOMEM;
				break;
			}
			hfp = fp;
			hkx = kx;
			kinds |= 1 << kx;
		}
		if (w) /* the interval's buckets, in time order */
			sp_series_buckets((const char *)sqlite3_column_text(hs, 2), window_bucket,
					  h);
		else
			sp_hist_add_bucket(h, sp_col_u64(hs, 2), sp_col_u64(hs, 3));
	}
	sp_hist_free(h);
	return ret ? ret : rc == SQLITE_DONE ? 0 : Q_SQL;
}

/* Percentiles: every histogram in one pass, grouped by query (one query
 * per fingerprint took 20,000 statements for 20,000 rows); of the window
 * w's intervals when w is set. The whole profile's histograms are read in
 * table order, which the profile writer makes the queries' order (read
 * through histograms_query, a seek into the table a row: 542,163 rows,
 * 0.6 s of CPU), and again through the index when they are not. A row
 * with a histogram gets ix[1] = 1 in idx, and one without the
 * percentiles of an empty histogram. 0, Q_SQL or Q_NOMEM. */
static int load_percentiles(sqlite3 *db, const struct sp_window *w, struct sp_qset *qs,
			    struct qidx *idx)
{
	sqlite3_stmt *hs;
	struct sp_hist *h;
	int ret = Q_UNORDERED;

	if (!w && sqlite3_prepare_v2(db, "SELECT fp_id, kind, bucket_ns, count FROM histograms", -1,
				     &hs, NULL) == SQLITE_OK) {
		ret = hist_pass(hs, NULL, qs, idx, 1);
		sqlite3_finalize(hs);
	}
	if (ret == Q_UNORDERED) {
		if (sqlite3_prepare_v2(db,
				       w ? "SELECT fp_id, kind, buckets FROM interval_queries"
					   " WHERE start_ns >= ?1 AND start_ns <= ?2"
					   " ORDER BY fp_id, kind, start_ns"
					 : "SELECT fp_id, kind, bucket_ns, count FROM histograms"
					   " ORDER BY fp_id, kind",
				       -1, &hs, NULL) != SQLITE_OK)
			return Q_SQL;
		if (w) {
			sqlite3_bind_int64(hs, 1, w->lo_start);
			sqlite3_bind_int64(hs, 2, w->hi_start);
		}
		ret = hist_pass(hs, w, qs, idx, 0);
		sqlite3_finalize(hs);
	}
	if (ret)
		return ret;
	/* a query with no histogram row: percentiles of an empty histogram */
	for (size_t i = 0; i < qs->n; i++) {
		struct sp_qrow *r = &qs->rows[i];
		struct qkey k = { r->fp_id, r->kind == SP_QK_EXEC };
		size_t *ix = qidx_get(idx, k.fp_id, k.kind_exec);

		if (ix && ix[1])
			continue;
		if (!(h = sp_hist_new()))
			return Q_NOMEM;
		set_percentiles(r, h, NULL);
		sp_hist_free(h);
	}
	return 0;
}

/* Why no plan could be taken, where there is none (profiles before
 * plan_gaps have no such table: nothing to say then). 0 or Q_NOMEM. */
static int load_plan_gaps(sqlite3 *db, struct sp_qset *qs, struct qidx *idx)
{
	sqlite3_stmt *st;
	int ret = 0;

	if (sqlite3_prepare_v2(
		    db,
		    "SELECT fp_id, reason FROM plan_gaps ORDER BY fp_id, connections DESC,"
		    " rowid",
		    -1, &st, NULL) != SQLITE_OK)
		return 0;
	while (!ret && sqlite3_step(st) == SQLITE_ROW)
		for (int kx = 0; kx < 2; kx++) {
			struct qkey k = { sqlite3_column_int64(st, 0), kx };
			size_t *ix = qidx_get(idx, k.fp_id, k.kind_exec);

			if (ix && !qs->rows[*ix - 1].plan_gap &&
			    !(qs->rows[*ix - 1].plan_gap = col_dup(st, 1)))
				ret = Q_NOMEM;
		}
	sqlite3_finalize(st);
	return ret;
}

/* Fold an exec's one statement into the exec's row (see query.h), then
 * drop the rows folded (count set to 0). */
static void fold_exec_rows(struct sp_qset *qs, struct qidx *idx)
{
	size_t j = 0;

	for (size_t i = 0; i < qs->n; i++) {
		struct sp_qrow *e = &qs->rows[i], *t;
		struct qkey k = { e->fp_id, 0 };
		size_t *ix;

		if (e->kind != SP_QK_EXEC || !(ix = qidx_get(idx, k.fp_id, k.kind_exec)))
			continue;
		t = &qs->rows[*ix - 1];
		if (t->count != t->nested || t->count > e->count || t->kind != SP_QK_STMT)
			continue;
		e->rows += t->rows;
		e->vm_steps += t->vm_steps;
		e->fullscan_steps += t->fullscan_steps;
		e->sorts += t->sorts;
		e->autoindex += t->autoindex;
		e->prepares += t->prepares;
		e->prepare_ns += t->prepare_ns;
		e->self_ns += t->self_ns;
		if (t->errors > e->errors)
			e->errors = t->errors;
		if (!e->plan) {
			e->plan = t->plan;
			t->plan = NULL;
			e->nplans = t->nplans;
		}
		if (!e->plan_gap) {
			e->plan_gap = t->plan_gap;
			t->plan_gap = NULL;
		}
		e->folded = 1;
		t->count = 0; /* removed below */
	}
	for (size_t i = 0; i < qs->n; i++) {
		if (!qs->rows[i].count) {
			free(qs->rows[i].fingerprint);
			free(qs->rows[i].sql);
			free(qs->rows[i].plan);
			free(qs->rows[i].plan_gap);
			continue;
		}
		qs->rows[j++] = qs->rows[i];
	}
	qs->n = j;
}

/* The integer meta value of key, 0 when missing. */
static uint64_t meta_u64(sqlite3 *db, const char *key)
{
	sqlite3_stmt *st;
	uint64_t v = 0;

	if (sqlite3_prepare_v2(db, "SELECT CAST(value AS INTEGER) FROM meta WHERE key = ?1", -1,
			       &st, NULL) != SQLITE_OK)
		return 0;
	sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
	if (sqlite3_step(st) == SQLITE_ROW)
		v = sp_col_u64(st, 0);
	sqlite3_finalize(st);
	return v;
}

/* The text meta value of key (malloc'd), NULL when missing. */
static char *meta_text(sqlite3 *db, const char *key)
{
	sqlite3_stmt *st;
	char *v = NULL;

	if (sqlite3_prepare_v2(db, "SELECT value FROM meta WHERE key = ?1", -1, &st, NULL) !=
	    SQLITE_OK)
		return NULL;
	sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
	if (sqlite3_step(st) == SQLITE_ROW)
		v = col_dup(st, 0);
	sqlite3_finalize(st);
	return v;
}

/* The meta value of key when it is set and not NULL: 1 with *v set, else 0. */
static int meta_opt(sqlite3 *db, const char *key, int real, double *d, int64_t *i)
{
	sqlite3_stmt *st;
	int ok = 0;

	if (sqlite3_prepare_v2(db,
			       real ? "SELECT CAST(value AS REAL) FROM meta WHERE key = ?1"
				    : "SELECT CAST(value AS INTEGER) FROM meta WHERE key = ?1",
			       -1, &st, NULL) != SQLITE_OK)
		return 0;
	sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
	if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL) {
		ok = 1;
		if (real)
			*d = sqlite3_column_double(st, 0);
		else
			*i = sqlite3_column_int64(st, 0);
	}
	sqlite3_finalize(st);
	return ok;
}

/* The profile's totals over processes and its meta values (the window w's
 * executions when w is set; else sum's, when exact). */
static void load_totals(sqlite3 *db, const struct sp_window *w, const struct qsum *sum,
			struct sp_qset *qs)
{
	uint64_t folded;

	qs->lost = scalar(db, "SELECT COALESCE(SUM(lost),0) FROM processes");
	if (sum->exact)
		qs->executions = sum->v > 0 ? (uint64_t)sum->v : 0; /* as sp_col_u64 */
	else
		qs->executions = scalar(db, "SELECT COALESCE(SUM(count),0) FROM queries");
	if (w) {
		sqlite3_stmt *ws;

		qs->executions = 0;
		if (sqlite3_prepare_v2(db,
				       "SELECT COALESCE(SUM(count),0) FROM interval_queries"
				       " WHERE start_ns >= ?1 AND start_ns <= ?2",
				       -1, &ws, NULL) == SQLITE_OK) {
			sqlite3_bind_int64(ws, 1, w->lo_start);
			sqlite3_bind_int64(ws, 2, w->hi_start);
			if (sqlite3_step(ws) == SQLITE_ROW)
				qs->executions = sp_col_u64(ws, 0);
			sqlite3_finalize(ws);
		}
	}
	qs->processes = scalar(db, "SELECT COUNT(*) FROM processes");
	/* the ones that used SQLite: exec'd helpers (pyenv's shims, env,
	 * readlink) connect too, and stay in the profile */
	qs->sqlite_processes = scalar(db, "SELECT COUNT(*) FROM processes WHERE executions > 0");
	qs->untracked = scalar(db, "SELECT COALESCE(SUM(untracked),0) FROM processes");
	/* an agent's processes budget: the processes it folded are one row
	 * (pid 0), counted here as what they were */
	if ((folded = meta_u64(db, "agent_processes_folded")) > 0) {
		uint64_t fsql = meta_u64(db, "agent_processes_folded_sqlite");

		qs->processes += folded - 1;
		qs->sqlite_processes += fsql - (fsql > 0);
	}
	qs->bad_messages = meta_u64(db, "bad_messages");
	qs->descriptors_lost = meta_u64(db, "descriptors_lost");
	qs->statistics_lost = meta_u64(db, "statistics_lost");
	qs->executions_missing = meta_u64(db, "executions_missing");
	qs->descriptor_waits = meta_u64(db, "descriptor_waits");
	qs->unreported = meta_u64(db, "unreported");
	qs->unreported_missing = meta_u64(db, "unreported_missing");
	qs->command = meta_text(db, "command");
	qs->died = meta_text(db, "died");
	qs->plans_bound = meta_text(db, "plans_bound");
	qs->events_dropped = meta_u64(db, "events_dropped");
	qs->clock_clamped = meta_u64(db, "clock_clamped");
	qs->texts_folded = meta_u64(db, "texts_folded");
	qs->exit_status = qs->duration_ns = qs->runs = -1;
	qs->rate = -1;
	meta_opt(db, "rate", 1, &qs->rate, NULL);
	meta_opt(db, "runs", 0, NULL, &qs->runs);
	meta_opt(db, "exit_status", 0, NULL, &qs->exit_status);
	meta_opt(db, "duration_ns", 0, NULL, &qs->duration_ns);
}

int sp_qset_load_window(sqlite3 *db, const struct sp_window *w, struct sp_qset *qs, char *err,
			size_t errlen)
{
	struct qidx idx = { 0 };
	struct qsum sum;
	int rc;

	memset(qs, 0, sizeof(*qs));
	if (w && !w->on)
		w = NULL;
	if (w)
		qs->window = *w;
	hmap_init(&idx.map, sizeof(struct qkey), 2 * sizeof(size_t));
	if ((rc = load_rows(db, qs, &sum)) < 0 || (rc = index_rows(qs, &idx)) < 0 ||
	    (w && (rc = window_sums(db, w, qs, &idx)) < 0) ||
	    (rc = load_percentiles(db, w, qs, &idx)) < 0 ||
	    (rc = load_plans(db, qs, &idx) < 0 ? Q_NOMEM : 0) < 0 ||
	    (rc = load_plan_gaps(db, qs, &idx)) < 0)
		goto fail;
	fold_exec_rows(qs, &idx);
	hmap_free(&idx.map);
	free(idx.v);
	for (size_t i = 0; i < qs->n; i++)
		qs->no_plan += !qs->rows[i].plan && !qs->rows[i].plan_gap;
	load_totals(db, w, &sum, qs);
	return 0;
fail:
	if (rc == Q_NOMEM)
		snprintf(err, errlen, "out of memory");
	else
		snprintf(err, errlen, "corrupt profile: %s", sqlite3_errmsg(db));
	hmap_free(&idx.map);
	free(idx.v);
	sp_qset_free(qs);
	return rc == Q_NOMEM ? SP_ERR_NOMEM : SP_ERR_INPUT;
}

uint64_t sp_qset_prepare_ns(const struct sp_qset *qs)
{
	uint64_t n = 0;

	for (size_t i = 0; i < qs->n; i++)
		n += qs->rows[i].prepare_ns;
	return n;
}

uint64_t sp_qset_schema_loads(const struct sp_qset *qs)
{
	uint64_t n = 0;

	for (size_t i = 0; i < qs->n; i++) {
		const struct sp_qrow *r = &qs->rows[i];

		if (r->kind == SP_QK_EXEC && r->fingerprint &&
		    !strcmp(r->fingerprint, "SELECT * FROM \"main\".sqlite_master ORDER BY rowid"))
			n += r->count;
	}
	return n;
}

void sp_qset_free(struct sp_qset *qs)
{
	size_t i;

	for (i = 0; i < qs->n; i++) {
		free(qs->rows[i].fingerprint);
		free(qs->rows[i].sql);
		free(qs->rows[i].plan);
		free(qs->rows[i].plan_gap);
	}
	free(qs->rows);
	free(qs->command);
	free(qs->died);
	free(qs->plans_bound);
	memset(qs, 0, sizeof(*qs));
}

/* A row's place in the sort: its key, total and fingerprint and its
 * index, sorted as copies (comparing rows through pointers read 186,000
 * rows of 240 bytes at random, then moved them in place: 7 % of report's
 * CPU at 200,000 fingerprints). */
struct sort_key {
	uint64_t v; /* the key's counter, or mean_ns's bits (a double >= 0
		     * orders as its bits) */
	uint64_t total;
	const char *fp;
	size_t i; /* the row's index before the sort */
};

#define CMP_DESC(a, b) ((a) < (b) ? 1 : (a) > (b) ? -1 : 0)

/* The key's value descending, then the total's, then the fingerprint,
 * then the rows' order (qsort's merge sort kept equal rows in order). */
static int cmp_keys(const void *pa, const void *pb)
{
	const struct sort_key *a = pa, *b = pb;
	int c = CMP_DESC(a->v, b->v);

	if (!c)
		c = CMP_DESC(a->total, b->total);
	if (!c)
		c = strcmp(a->fp, b->fp);
	if (!c)
		c = a->i < b->i ? -1 : a->i > b->i;
	return c;
}

int sp_qset_sort_perm(struct sp_qset *qs, const char *key, size_t **perm)
{
	static const struct {
		const char *name;
		int off;
	} keys[] = {
		{ "total", offsetof(struct sp_qrow, total_ns) },
		{ "count", offsetof(struct sp_qrow, count) },
		{ "mean", -1 },
		{ "p50", offsetof(struct sp_qrow, p50_ns) },
		{ "p95", offsetof(struct sp_qrow, p95_ns) },
		{ "p99", offsetof(struct sp_qrow, p99_ns) },
		{ "max", offsetof(struct sp_qrow, max_ns) },
		{ "rows", offsetof(struct sp_qrow, rows) },
		{ "self", offsetof(struct sp_qrow, self_ns) },
		{ "errors", offsetof(struct sp_qrow, errors) },
		{ "vm", offsetof(struct sp_qrow, vm_steps) },
		{ "prepare", offsetof(struct sp_qrow, prepare_ns) },
	};
	struct sort_key *k;
	size_t i, j, *from = NULL;

	if (perm)
		*perm = NULL;
	for (i = 0; i < sizeof(keys) / sizeof(keys[0]) && strcmp(key, keys[i].name); i++)
		;
	if (i == sizeof(keys) / sizeof(keys[0]))
		return -1;
	if (!qs->n)
		return 0;
	if (!(k = malloc(qs->n * sizeof(*k))) || !(from = malloc(qs->n * sizeof(*from))))
		goto nomem;
	for (j = 0; j < qs->n; j++) {
		const struct sp_qrow *r = &qs->rows[j];

		uint64_t v = 0;

		if (keys[i].off >= 0)
			memcpy(&v, (const char *)r + keys[i].off, sizeof(v));
		else if (r->mean_ns > 0)
			memcpy(&v, &r->mean_ns, sizeof(v));
		k[j] = (struct sort_key){ v, r->total_ns, r->fingerprint ? r->fingerprint : "", j };
	}
	sp_qsort(k, qs->n, sizeof(*k), cmp_keys);
	for (j = 0; j < qs->n; j++)
		from[j] = k[j].i;
	free(k);
	k = NULL;
	if (sp_permute(qs->rows, qs->n, sizeof(*qs->rows), from) < 0)
		goto nomem;
	if (perm)
		*perm = from;
	else
		free(from);
	return 0;
nomem:
	free(k);
	free(from);
	return -2;
}

int sp_qset_sort(struct sp_qset *qs, const char *key)
{
	return sp_qset_sort_perm(qs, key, NULL);
}

void sp_failures_free(struct sp_failures *fs)
{
	for (size_t i = 0; i < fs->n; i++) {
		free(fs->f[i].message);
		free(fs->f[i].fingerprint);
	}
	free(fs->f);
	memset(fs, 0, sizeof(*fs));
}

int sp_failures_load(sqlite3 *db, struct sp_failures *out)
{
	sqlite3_stmt *st;
	size_t cap = 0;

	memset(out, 0, sizeof(*out));
	/* kind is absent from old profiles' rows only as a value: the
	 * column has always existed */
	if (sqlite3_prepare_v2(
		    db,
		    "SELECT e.fp_id, e.kind, e.rc, e.message, SUM(e.count), e.pid, e.stack_id,"
		    " (SELECT fingerprint FROM queries q WHERE q.fp_id = e.fp_id LIMIT 1)"
		    " FROM errors e"
		    " WHERE NOT (COALESCE(e.kind, 'stmt') <> 'exec' AND EXISTS (SELECT 1 FROM errors x"
		    "  WHERE x.kind = 'exec' AND x.pid = e.pid AND x.rc = e.rc"
		    "  AND x.message IS e.message) AND EXISTS (SELECT 1 FROM frames f"
		    "  WHERE f.pid = e.pid AND f.stack_id = e.stack_id AND f.function = 'sqlite3_exec'))"
		    " GROUP BY e.fp_id, e.kind, e.rc, e.message, e.pid, e.stack_id"
		    " ORDER BY SUM(e.count) DESC, e.fp_id, e.rc",
		    -1, &st, NULL) != SQLITE_OK)
		return 0; /* no errors table: nothing failed */
	while (sqlite3_step(st) == SQLITE_ROW) {
		struct sp_failure *x;
		const char *kind = (const char *)sqlite3_column_text(st, 1);

		if (SP_GROW(out->f, cap, out->n + 1, 16) < 0)
			goto nomem;
		x = &out->f[out->n];
		memset(x, 0, sizeof(*x));
		x->fp_id = sqlite3_column_int64(st, 0);
		x->kind = sp_qkind_parse(kind);
		x->rc = sqlite3_column_int(st, 2);
		x->message = col_dup(st, 3);
		x->count = sp_col_u64(st, 4);
		x->pid = sp_col_u64(st, 5);
		x->stack_id = (uint64_t)sqlite3_column_int64(st, 6);
		x->fingerprint = sqlite3_column_type(st, 7) == SQLITE_NULL
					 ? strdup("<sql text lost>")
					 : col_dup(st, 7);
		out->n++;
		if (!x->message || !x->fingerprint)
			goto nomem;
	}
	sqlite3_finalize(st);
	return 0;
nomem:
	sqlite3_finalize(st);
	sp_failures_free(out);
	return -1;
}
