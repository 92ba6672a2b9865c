/* SPDX-License-Identifier: MIT */
/*
 * compare.c - see compare.h.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compare.h"
#include "profile.h"
#include "untrusted.h"
#include "util.h"

const char *const sp_metric_names[SP_M_N] = {
	[SP_M_COUNT] = "count",       [SP_M_ROWS] = "rows",
	[SP_M_VM_STEPS] = "vm_steps", [SP_M_FULLSCAN] = "fullscan_steps",
	[SP_M_SORTS] = "sorts",       [SP_M_AUTOINDEX] = "autoindex",
	[SP_M_PREPARES] = "prepares", [SP_M_ERRORS] = "errors",
	[SP_M_MAX_RUN] = "max_run",
};

struct qkey {
	int64_t fp_id;
	int64_t kind_exec;
};

static int cmp_double(const void *pa, const void *pb)
{
	double a = *(const double *)pa, b = *(const double *)pb;

	return a < b ? -1 : a > b ? 1 : 0;
}

double sp_median(double *v, size_t n)
{
	if (!n)
		return 0;
	sp_qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* ---- Mann-Whitney U ------------------------------------------------------ */

struct obs {
	double v;
	int g;
};

static int cmp_obs(const void *pa, const void *pb)
{
	return cmp_double(&((const struct obs *)pa)->v, &((const struct obs *)pb)->v);
}

/* P(U <= u) under H0 for sample sizes m, n without ties: counts of
 * arrangements, f(m, n, u) = f(m-1, n, u-n) + f(m, n-1, u). */
static double exact_cdf(size_t m, size_t n, double u)
{
	size_t maxu = m * n, i, j, k, stride = maxu + 1;
	double *f = calloc((m + 1) * (n + 1) * stride, sizeof(*f)), tot = 0, le = 0;

	if (!f)
		return -1;
#define F(a, b, c) f[((a) * (n + 1) + (b)) * stride + (c)]
	for (i = 0; i <= m; i++)
		for (j = 0; j <= n; j++) {
			if (i == 0 || j == 0) {
				F(i, j, 0) = 1;
				continue;
			}
			for (k = 0; k <= i * j; k++)
				F(i, j, k) = (k >= j ? F(i - 1, j, k - j) : 0) + F(i, j - 1, k);
		}
	for (k = 0; k <= maxu; k++) {
		tot += F(m, n, k);
		if ((double)k <= u + 1e-9)
			le += F(m, n, k);
	}
#undef F
	free(f);
	return le / tot;
}

double sp_mann_whitney(const double *a, size_t na, const double *b, size_t nb, double *u)
{
	size_t n = na + nb, i, j;
	struct obs *o;
	double r1 = 0, ties = 0, u1, mu, sigma, z, p;

	*u = 0;
	if (!na || !nb)
		return 1;
	o = malloc(n * sizeof(*o));
	if (!o)
		return 1;
	for (i = 0; i < na; i++)
		o[i] = (struct obs){ a[i], 0 };
	for (i = 0; i < nb; i++)
		o[na + i] = (struct obs){ b[i], 1 };
	sp_qsort(o, n, sizeof(*o), cmp_obs);
	for (i = 0; i < n; i = j) {
		double rank, t;

		for (j = i + 1; j < n && o[j].v == o[i].v; j++)
			;
		rank = ((double)i + 1 + (double)j) / 2; /* average of ranks i+1..j */
		t = (double)(j - i);
		ties += t * t * t - t;
		for (size_t k = i; k < j; k++)
			if (o[k].g == 0)
				r1 += rank;
	}
	free(o);
	u1 = r1 - (double)na * ((double)na + 1) / 2;
	*u = u1;
	if (ties >= (double)n * n * n - (double)n)
		return 1; /* every value equal */
	mu = (double)na * (double)nb / 2;
	if (ties == 0 && (na < 8 || nb < 8) && n <= 40) {
		double lo = u1 < (double)na * (double)nb - u1 ? u1 : (double)na * (double)nb - u1;
		double c = exact_cdf(na, nb, lo);

		if (c >= 0) {
			p = 2 * c;
			return p > 1 ? 1 : p;
		}
	}
	sigma = sqrt((double)na * (double)nb / 12 *
		     (((double)n + 1) - ties / ((double)n * ((double)n - 1))));
	if (sigma <= 0)
		return 1;
	z = (fabs(u1 - mu) - 0.5) / sigma;
	if (z < 0)
		z = 0;
	p = erfc(z / sqrt(2));
	return p > 1 ? 1 : p;
}

/* ---- loading a side ------------------------------------------------------ */

static uint64_t meta_repeats(sqlite3 *db)
{
	sqlite3_stmt *st;
	sqlite3_int64 v = 1;

	if (sqlite3_prepare_v2(db, "SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'runs'", -1,
			       &st, NULL) != SQLITE_OK)
		return 1;
	if (sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return v >= 1 ? (uint64_t)v : 1;
}

/* The order of keys a profile's rows come in (its writer's: ORDER BY
 * fp_id, kind, "exec" before "stmt"): < 0, 0, > 0. */
static int kcmp(int64_t fa, int ka, int64_t fb, int kb)
{
	if (fa != fb)
		return fa < fb ? -1 : 1;
	return kb - ka;
}

static int key_cmp(const struct sp_qrow *r, int64_t fp, int kx)
{
	return sp_qrow_key_cmp(r, fp, kx);
}

/* Index qs by (fp_id, kind) into ix (initialized here), the first row of
 * a key; left empty when qs is sorted by key_cmp with each key once, as
 * profiles are written (find_row searches it then: the index was 3.7 % of
 * diff's CPU at 200,000 fingerprints). 0, or -1 on ENOMEM. */
static int index_rows(struct hmap *ix, const struct sp_qset *qs)
{
	size_t i;

	hmap_init(ix, sizeof(struct qkey), sizeof(size_t));
	for (i = 1; i < qs->n; i++)
		if (key_cmp(&qs->rows[i - 1], qs->rows[i].fp_id, qs->rows[i].kind == SP_QK_EXEC) >=
		    0)
			break;
	if (i >= qs->n)
		return 0;
	for (i = 0; i < qs->n; i++) {
		struct qkey k = { qs->rows[i].fp_id, qs->rows[i].kind == SP_QK_EXEC };
		int created;
		size_t *v = hmap_get(ix, &k, 1, &created);

		if (!v)
			return -1;
		if (created) /* the first row of a key, as a search would find */
			*v = i;
	}
	return 0;
}

/* 1 when index_rows left ix empty: its rows are sorted, each key once. */
static int by_key(const struct hmap *ix)
{
	return ix->cap == 0;
}

/* The row of (fp, kx) in qs through its index ix (a linear search per
 * lookup made diff quadratic: 195 s for 20,000 fingerprints), or by a
 * search from *cur when qs is sorted (by_key; cur NULL: from the start). */
static const struct sp_qrow *find_row(const struct hmap *ix, const struct sp_qset *qs, int64_t fp,
				      int kx, size_t *cur)
{
	struct qkey k = { fp, kx };
	const size_t *v;
	size_t i;

	if (by_key(ix)) {
		i = sp_qset_seek(qs, fp, kx, cur ? *cur : 0);
		if (cur)
			*cur = i;
		return i < qs->n && !key_cmp(&qs->rows[i], fp, kx) ? &qs->rows[i] : NULL;
	}
	v = hmap_get((struct hmap *)ix, &k, 0, NULL);
	return v ? &qs->rows[*v] : NULL;
}

static char *xstrdup(const char *s)
{
	return strdup(s ? s : "");
}

/* s->agg: one row of each (fp_id, kind) of any of s's profiles, a copy of
 * the first profile's row that has it (texts copied, no plan). 0, or -1
 * on ENOMEM (the rows made so far stay in s->agg). */
static int agg_union(struct sp_side *s)
{
	struct hmap keys;
	size_t i, j, cap = 0;
	int ret = 0;

	hmap_init(&keys, sizeof(struct qkey), sizeof(size_t));
	memset(&s->agg, 0, sizeof(s->agg));
	for (i = 0; !ret && i < s->np; i++)
		for (j = 0; !ret && j < s->p[i].qs.n; j++) {
			const struct sp_qrow *r = &s->p[i].qs.rows[j];
			struct qkey k = { r->fp_id, r->kind == SP_QK_EXEC };
			int created;
			size_t *idx = hmap_get(&keys, &k, 1, &created);
			struct sp_qrow *a;

			if (!idx || (created && SP_GROW(s->agg.rows, cap, s->agg.n + 1, 64) < 0)) {
				ret = -1;
				break;
			}
			if (!created)
				continue;
			*idx = s->agg.n;
			a = &s->agg.rows[s->agg.n++];
			*a = *r;
			a->fingerprint = xstrdup(r->fingerprint);
			a->sql = xstrdup(r->sql);
			a->plan = NULL;
			/* the profile's row owns it: a copy, or none (freed twice
			 * by sp_qset_free before) */
			a->plan_gap = r->plan_gap ? xstrdup(r->plan_gap) : NULL;
			if (!a->fingerprint || !a->sql)
				ret = -1;
		}
	hmap_free(&keys);
	return ret;
}

#define AGG_SUMMED(c, sum) AGG_SUMMED_##sum(c)
#define AGG_SUMMED_1(c) offsetof(struct sp_qrow, c),
#define AGG_SUMMED_0(c)

/* Row a of s->agg from rp[i], its row in profile i (NULL: none there):
 * the counters summed over a profile's runs as the median per run, the
 * rest as the median of the profiles that have it, the first plan. 0, or
 * -1 on ENOMEM. v: room for s->np values. */
static int agg_medians(const struct sp_side *s, struct sp_qrow *a, const struct sp_qrow *const *rp,
		       double *v)
{
	/* summed over runs: the subtractable counters of SP_QROW_COLS */
	static const size_t off[] = { SP_QROW_COLS(AGG_SUMMED) };
	/* not summed over runs: medians as they are */
	static const size_t off_plain[] = {
		offsetof(struct sp_qrow, max_run), offsetof(struct sp_qrow, p50_ns),
		offsetof(struct sp_qrow, p95_ns),  offsetof(struct sp_qrow, p99_ns),
		offsetof(struct sp_qrow, min_ns),  offsetof(struct sp_qrow, max_ns),
	};
	size_t i, m;

	for (m = 0; m < sizeof(off) / sizeof(off[0]); m++) {
		for (i = 0; i < s->np; i++)
			v[i] = rp[i] ? (double)*(const uint64_t *)((const char *)rp[i] + off[m]) /
					       (double)s->p[i].runs
				     : 0;
		*(uint64_t *)((char *)a + off[m]) = (uint64_t)llround(sp_median(v, s->np));
	}
	for (m = 0; m < sizeof(off_plain) / sizeof(off_plain[0]); m++) {
		size_t nv = 0;

		for (i = 0; i < s->np; i++)
			if (rp[i])
				v[nv++] = (double)*(const uint64_t *)((const char *)rp[i] +
								      off_plain[m]);
		*(uint64_t *)((char *)a + off_plain[m]) = (uint64_t)llround(sp_median(v, nv));
	}
	a->mean_ns = a->count ? (double)a->total_ns / (double)a->count : 0;
	a->nplans = 0;
	for (i = 0; i < s->np; i++) {
		if (rp[i] && rp[i]->plan && !a->plan && !(a->plan = strdup(rp[i]->plan)))
			return -1;
		if (rp[i] && rp[i]->nplans > a->nplans)
			a->nplans = rp[i]->nplans;
	}
	return 0;
}

/* 1 when agg_medians would give x back (a double holds it exactly). */
static int median_exact(const struct sp_qrow *r)
{
	static const size_t off[] = { SP_QROW_COLS(AGG_SUMMED) offsetof(struct sp_qrow, max_run),
				      offsetof(struct sp_qrow, p50_ns),
				      offsetof(struct sp_qrow, p95_ns),
				      offsetof(struct sp_qrow, p99_ns),
				      offsetof(struct sp_qrow, min_ns),
				      offsetof(struct sp_qrow, max_ns) };

	for (size_t m = 0; m < sizeof(off) / sizeof(off[0]); m++)
		if (*(const uint64_t *)((const char *)r + off[m]) > (1ULL << 53))
			return 0;
	return r->count > 0;
}

/* A side of one profile of one run (what diff compares): the medians of
 * its rows are the rows, so agg shares them and their index instead of
 * a copy of every query, its texts and a second index (10.7 % of diff's
 * CPU at 200,000 fingerprints, and the copy's memory). Not when the
 * profile holds a key twice (a hostile kind spelling: agg keeps its first
 * row only), a row ran 0 times or a counter is past 2^53 (agg_medians
 * rounds it through a double). 1 when shared, else 0. */
static int agg_share(struct sp_side *s)
{
	const struct sp_prof *p = &s->p[0];

	if (s->np != 1 || p->runs != 1 || (!by_key(&p->qidx) && p->qidx.count != p->qs.n))
		return 0;
	for (size_t i = 0; i < p->qs.n; i++)
		if (!median_exact(&p->qs.rows[i]))
			return 0;
	memset(&s->agg, 0, sizeof(s->agg));
	s->agg.rows = p->qs.rows;
	s->agg.n = p->qs.n;
	s->agg_idx = p->qidx;
	s->agg_shared = 1;
	return 1;
}

/* The side's per-fingerprint rows: per-run medians over its profiles. */
static int build_agg(struct sp_side *s)
{
	size_t i, j, np = s->np ? s->np : 1;
	double *v;
	const struct sp_qrow **rp;
	size_t *cur;
	int ret = -1;

	if (agg_share(s))
		return 0;
	v = malloc(np * sizeof(*v));
	rp = malloc(np * sizeof(*rp));
	cur = calloc(np, sizeof(*cur));
	if (!v || !rp || !cur || agg_union(s) < 0)
		goto out;
	for (j = 0; j < s->agg.n; j++) {
		struct sp_qrow *a = &s->agg.rows[j];

		/* each profile's row looked up once (22 lookups a row and
		 * profile before) */
		for (i = 0; i < s->np; i++)
			rp[i] = find_row(&s->p[i].qidx, &s->p[i].qs, a->fp_id,
					 a->kind == SP_QK_EXEC, &cur[i]);
		if (agg_medians(s, a, rp, v) < 0)
			goto out;
	}
	/* a query in a minority of the profiles has a median count of 0: drop it */
	for (i = j = 0; i < s->agg.n; i++) {
		if (s->agg.rows[i].count) {
			s->agg.rows[j++] = s->agg.rows[i];
		} else {
			free(s->agg.rows[i].fingerprint);
			free(s->agg.rows[i].sql);
			free(s->agg.rows[i].plan);
			free(s->agg.rows[i].plan_gap);
		}
	}
	s->agg.n = j;
	ret = index_rows(&s->agg_idx, &s->agg);
out:
	free(v);
	free(rp);
	free(cur);
	return ret;
}

struct skey {
	uint64_t h;
	int64_t fp_id, kind_exec;
};

/* A site's key and display in one profile (sp_sitestat), made once. */
struct site_str {
	const char *key, *disp;
	uint64_t h;
};

/* s->site_strs takes str (malloc'd, or NULL: out of memory). */
static const char *side_keep(struct sp_side *s, size_t *cap, char *str)
{
	if (!str || SP_GROW(s->site_strs, *cap, s->nsite_strs + 1, 64) < 0) {
		free(str);
		return NULL;
	}
	return s->site_strs[s->nsite_strs++] = str;
}

/* The key and display of site (NULL: unattributed) relative to root, into
 * *ss (kept by s). 0, or -1 on ENOMEM. */
static int site_str_make(struct sp_side *s, size_t *cap, const struct sp_site *site,
			 const char *root, struct site_str *ss)
{
	char key[1024], disp[1024];

	if (site) {
		const char *file = sp_path_rel(site->file, root);

		snprintf(key, sizeof(key), "%s\t%s\t%s", site->function, file,
			 sp_basename(site->module));
		sp_where(disp, sizeof(disp), site->function, file, site->line, site->module,
			 site->offset);
	} else {
		snprintf(key, sizeof(key), "(unattributed)");
		snprintf(disp, sizeof(disp), "(unattributed)");
	}
	ss->key = side_keep(s, cap, strdup(key));
	ss->disp = ss->key ? side_keep(s, cap, strdup(disp)) : NULL;
	ss->h = sp_hash_bytes(key, strlen(key));
	return ss->disp ? 0 : -1;
}

/* Per (site, fingerprint) estimates, per run, averaged over the profiles:
 * the sites' estimates of attrib.c (sp_estimate, the estimator report and
 * the exports use), summed per site key. A site's file is taken relative
 * to its profile's source root (the common directory of its sites, as the
 * report strips it), so that two checkouts of one program built in
 * different directories have the same sites. A site's key and display
 * are made once per profile (per site and fingerprint before: 776,000
 * strings at 200,000 fingerprints). */
/* Most sites a query may have for a walk over them (build_sites,
 * add_sites) instead of a map: a query's sites are searched one by one. */
#define GROUP_MAX 64

/* 1 when n keys (key(i): fp_id and kind_exec) are in key_cmp's order,
 * at most GROUP_MAX of each. */
static int grouped(size_t n, const void *base, size_t size, size_t fp_off, size_t kx_off,
		   int kx_int)
{
	size_t run = 1;

	for (size_t i = 1; i < n; i++) {
		const char *a = (const char *)base + (i - 1) * size, *b = a + size;
		int ka = kx_int ? *(const int *)(const void *)(a + kx_off)
				: *(const enum sp_qkind *)(const void *)(a + kx_off) == SP_QK_EXEC;
		int kb = kx_int ? *(const int *)(const void *)(b + kx_off)
				: *(const enum sp_qkind *)(const void *)(b + kx_off) == SP_QK_EXEC;
		int c = kcmp(*(const int64_t *)(const void *)(a + fp_off), ka,
			     *(const int64_t *)(const void *)(b + fp_off), kb);

		if (c > 0 || (run = c ? 1 : run + 1) > GROUP_MAX)
			return 0;
	}
	return 1;
}

static int build_sites(struct sp_side *s)
{
	struct hmap idx;
	struct site_str *ss = NULL;
	size_t i, j, cap = 0, scap = 0, g = 0;

	hmap_init(&idx, sizeof(struct skey), sizeof(size_t));
	for (i = 0; i < s->np; i++) {
		struct sp_prof *p = &s->p[i];
		static struct sp_path_root pr; /* 4 KiB: not on the stack */
		const char *root;
		size_t cur = 0;

		memset(&pr, 0, sizeof(pr));
		for (j = 0; j < p->at.nsites; j++)
			if (strcmp(p->at.sites[j].file, "??"))
				sp_path_root_add(&pr, p->at.sites[j].file);
		root = sp_path_root_get(&pr);
		free(ss); /* [nsites]: unattributed */
		if (!(ss = calloc(p->at.nsites + 1, sizeof(*ss))))
			goto nomem;
		/* one profile whose sites come by query (stack_samples' order):
		 * a query's sites are found among its own, no map of them all */
		int walk = s->np == 1 && grouped(p->at.nqs, p->at.qs, sizeof(*p->at.qs),
						 offsetof(struct sp_qsite, fp_id),
						 offsetof(struct sp_qsite, kind_exec), 1);

		for (j = 0; j < p->at.nqs; j++) {
			const struct sp_qsite *q = &p->at.qs[j];
			const struct sp_qrow *r =
				find_row(&p->qidx, &p->qs, q->fp_id, q->kind_exec, &cur);
			const struct sp_site *site = q->site >= 0 ? &p->at.sites[q->site] : NULL;
			struct site_str *st = &ss[site ? (size_t)q->site : p->at.nsites];
			double runs = (double)p->runs * (double)s->np;
			struct skey k;
			size_t *ix, wi;
			int created;
			struct sp_sitestat *x;

			if (!r)
				continue;
			if (!st->key && site_str_make(s, &scap, site, root, st) < 0)
				goto nomem;
			k = (struct skey){ st->h, q->fp_id, q->kind_exec };
			if (walk) {
				if (j && (p->at.qs[j - 1].fp_id != q->fp_id ||
					  p->at.qs[j - 1].kind_exec != q->kind_exec))
					g = s->nsites; /* the query's first site */
				for (wi = g; wi < s->nsites && s->sites[wi].key_hash != st->h; wi++)
					;
				created = wi == s->nsites;
				ix = &wi;
			} else if (!(ix = hmap_get(&idx, &k, 1, &created))) {
				goto nomem;
			}
			if (created) {
				if (SP_GROW(s->sites, cap, s->nsites + 1, 64) < 0)
					goto nomem;
				*ix = s->nsites;
				x = &s->sites[s->nsites++];
				memset(x, 0, sizeof(*x));
				x->key = st->key;
				x->display = st->disp;
				x->key_hash = st->h;
				x->fp_id = q->fp_id;
				x->kind = q->kind_exec ? SP_QK_EXEC : SP_QK_STMT;
			}
			x = &s->sites[*ix];
			x->samples += (double)q->samples / (double)s->np;
			x->est_count += q->est_count / runs;
			x->est_rows += q->est_rows / runs;
			x->est_vm_steps += q->est_vm_steps / runs;
		}
	}
	free(ss);
	hmap_free(&idx);
	return 0;
nomem:
	free(ss);
	hmap_free(&idx);
	return -1;
}

/* Per-run mean db time per execution of every query of a repeated
 * profile, in one pass over run_totals (ordered by run within a query). */
static int load_repeat_means(struct sp_prof *p)
{
	sqlite3_stmt *st;
	size_t n = 0, cap = 0;

	hmap_init(&p->rt_idx, sizeof(struct qkey), 2 * sizeof(size_t));
	if (p->runs <= 1 ||
	    sqlite3_prepare_v2(p->db,
			       "SELECT fp_id, kind, count, total_ns FROM run_totals WHERE count > 0"
			       " ORDER BY fp_id, kind, run",
			       -1, &st, NULL) != SQLITE_OK)
		return 0;
	while (sqlite3_step(st) == SQLITE_ROW) {
		const char *kind = (const char *)sqlite3_column_text(st, 1);
		struct qkey k = { sqlite3_column_int64(st, 0), sp_qkind_parse(kind) };
		int created;
		size_t *v = hmap_get(&p->rt_idx, &k, 1, &created);

		if (!v)
			goto nomem;
		if (created)
			v[0] = n;
		else if (v[0] + v[1] != n)
			continue; /* not adjacent: a hostile kind spelling; keep the first run */
		if (SP_GROW(p->rt_means, cap, n + 1, 256) < 0)
			goto nomem;
		p->rt_means[n++] =
			(double)sqlite3_column_int64(st, 3) / (double)sqlite3_column_int64(st, 2);
		v[1]++;
	}
	sqlite3_finalize(st);
	return 0;
nomem:
	sqlite3_finalize(st);
	return -1;
}

static const struct sp_winreq *side_window; /* sp_side_set_window */

void sp_side_set_window(const struct sp_winreq *r)
{
	side_window = sp_winreq_on(r) ? r : NULL;
}

int sp_side_load(struct sp_side *s, const char *const *paths, size_t n, const char *const *skip,
		 char *err, size_t errlen, int *input_error)
{
	struct sp_window w = { 0 };
	size_t i, j;
	char e[512];
	int rc;

	memset(s, 0, sizeof(*s));
	*input_error = 0;
	s->p = calloc(n ? n : 1, sizeof(*s->p));
	if (!s->p)
		goto nomem;
	s->np = n;
	for (i = 0; i < n; i++) {
		struct sp_prof *p = &s->p[i];

		p->path = strdup(paths[i]);
		if (!p->path)
			goto nomem;
		p->db = sp_profile_open(paths[i], e, sizeof(e));
		if (!p->db) {
			snprintf(err, errlen, "%s", e);
			*input_error = 1;
			goto fail;
		}
		if (side_window && sp_window_resolve(p->db, side_window, &w, e, sizeof(e)) < 0) {
			snprintf(err, errlen, "%s: %s", paths[i], e);
			*input_error = 2;
			sqlite3_close(p->db);
			p->db = NULL;
			goto fail;
		}
		if ((rc = sp_qset_load_window(p->db, &w, &p->qs, e, sizeof(e))) < 0) {
			/* stopped by the work budget: say so (it names the file) */
			if (!sp_untrusted_exhausted(err, errlen))
				snprintf(err, errlen, "%s: %s", paths[i], e);
			*input_error = rc != SP_ERR_NOMEM;
			sqlite3_close(p->db);
			p->db = NULL;
			goto fail;
		}
		if ((rc = sp_attrib_load(p->db, skip, &p->at, e, sizeof(e))) < 0) {
			if (!sp_untrusted_exhausted(err, errlen))
				snprintf(err, errlen, "%s: %s", paths[i], e);
			*input_error = rc != SP_ERR_NOMEM;
			sp_qset_free(&p->qs);
			sqlite3_close(p->db);
			p->db = NULL;
			goto fail;
		}
		for (j = 0; j < p->qs.n; j++) {
			const struct sp_qrow *r = &p->qs.rows[j];
			struct sp_est_tot tot = { r->count, r->total_ns, r->self_ns, r->rows,
						  r->vm_steps };

			sp_attrib_estimate_q(&p->at, r->fp_id, r->kind == SP_QK_EXEC, &tot);
		}
		p->runs = meta_repeats(p->db);
		s->total_repeats += p->runs;
		if (index_rows(&p->qidx, &p->qs) < 0 || load_repeat_means(p) < 0)
			goto nomem;
		/* all read: the page cache (8 MiB) back for the next
		 * profile's, not one each (check's doctor reads again) */
		sqlite3_db_release_memory(p->db);
	}
	if (build_agg(s) < 0 || build_sites(s) < 0)
		goto nomem;
	if (sp_untrusted_exhausted(err, errlen)) { /* what was read is not all there is */
		*input_error = 1;
		goto fail;
	}
	return 0;
nomem:
	snprintf(err, errlen, "out of memory");
fail:
	sp_side_free(s);
	return -1;
}

void sp_side_free(struct sp_side *s)
{
	size_t i;

	for (i = 0; s->p && i < s->np; i++) {
		hmap_free(&s->p[i].qidx);
		hmap_free(&s->p[i].rt_idx);
		free(s->p[i].rt_means);
		if (s->p[i].db) {
			sp_qset_free(&s->p[i].qs);
			sp_attrib_free(&s->p[i].at);
			sqlite3_close(s->p[i].db);
		}
		free(s->p[i].path);
	}
	free(s->p);
	if (!s->agg_shared) {
		sp_qset_free(&s->agg);
		hmap_free(&s->agg_idx);
	}
	for (i = 0; i < s->nsite_strs; i++)
		free(s->site_strs[i]);
	free(s->site_strs);
	free(s->sites);
	memset(s, 0, sizeof(*s));
}

size_t sp_side_time_samples(const struct sp_side *s, int64_t fp_id, enum sp_qkind kind, double *out,
			    size_t max)
{
	size_t n = 0, i;

	for (i = 0; i < s->np && n < max; i++) {
		const struct sp_prof *p = &s->p[i];
		const struct sp_qrow *r =
			find_row(&p->qidx, &p->qs, fp_id, kind == SP_QK_EXEC, NULL);
		struct qkey k = { fp_id, kind == SP_QK_EXEC };
		const size_t *v =
			p->runs > 1 ? hmap_get((struct hmap *)&p->rt_idx, &k, 0, NULL) : NULL;
		size_t got = 0;

		if (!r)
			continue;
		for (; v && got < v[1] && n < max; got++)
			out[n++] = p->rt_means[v[0] + got];
		if (!got && n < max)
			out[n++] = r->mean_ns;
	}
	return n;
}

/* ---- the diff ------------------------------------------------------------ */

struct plan_lines {
	char d[64][256];
	int n;
};

static void collect_cb(const char *detail, void *arg)
{
	struct plan_lines *pl = arg;

	if (pl->n < 64)
		snprintf(pl->d[pl->n++], sizeof(pl->d[0]), "%s", detail);
}

/* q's plan_note: "" or a copy of note. 0, or -1 on ENOMEM. */
static int set_note(struct sp_qdiff *q, const char *note)
{
	return note[0] && !(q->plan_note = strdup(note)) ? -1 : 0;
}

/* Compare q's plans: flags, and what changed into q->plan_note. 0, or -1
 * on ENOMEM. */
static int plan_compare(struct sp_qdiff *q)
{
	static struct plan_lines b, c;
	static char note[512];
	int i, j, k;
	size_t o = 0;

	note[0] = 0;
	b.n = c.n = 0;
	sp_plan_foreach(q->base->plan, collect_cb, &b);
	sp_plan_foreach(q->cand->plan, collect_cb, &c);
	if (b.n == c.n) {
		for (i = 0; i < b.n && !strcmp(b.d[i], c.d[i]); i++)
			;
		if (i == b.n)
			return 0;
	}
	q->flags |= SP_QD_PLAN_CHANGED;
	/* a table read through an index before, scanned now */
	for (i = 0; i < b.n; i++) {
		struct sp_plan_access ba, ca;

		if (!sp_plan_access(b.d[i], &ba) || !ba.indexed)
			continue;
		for (j = 0; j < c.n; j++)
			if (sp_plan_access(c.d[j], &ca) && !strcmp(ca.name, ba.name) &&
			    ca.full_scan) {
				q->flags |= SP_QD_PLAN_WORSE | SP_QD_NEW_FULLSCAN;
				if (o < sizeof(note))
					o += (size_t)snprintf(note + o, sizeof(note) - o,
							      "%s%s -> %s", o ? "; " : "", b.d[i],
							      c.d[j]);
			}
	}
	/* temp B-trees and automatic indexes that were not there */
	for (j = 0; j < c.n; j++) {
		struct sp_plan_access ca;
		int worse = !strncmp(c.d[j], "USE TEMP B-TREE", 15) ||
			    (sp_plan_access(c.d[j], &ca) && ca.automatic);

		if (!worse)
			continue;
		for (k = 0; k < b.n && strcmp(b.d[k], c.d[j]); k++)
			;
		if (k < b.n)
			continue;
		q->flags |= SP_QD_PLAN_WORSE;
		if (o < sizeof(note))
			o += (size_t)snprintf(note + o, sizeof(note) - o, "%snew: %s",
					      o ? "; " : "", c.d[j]);
	}
	if (!o) {
		/* some other change: show the first differing line */
		for (i = 0; i < b.n && i < c.n && !strcmp(b.d[i], c.d[i]); i++)
			;
		snprintf(note, sizeof(note), "%s -> %s", i < b.n ? b.d[i] : "(none)",
			 i < c.n ? c.d[i] : "(none)");
	}
	return set_note(q, note);
}

static void metrics(const struct sp_qrow *r, uint64_t *m)
{
	if (!r) {
		memset(m, 0, SP_M_N * sizeof(*m));
		return;
	}
	m[SP_M_COUNT] = r->count;
	m[SP_M_ROWS] = r->rows;
	m[SP_M_VM_STEPS] = r->vm_steps;
	m[SP_M_FULLSCAN] = r->fullscan_steps;
	m[SP_M_SORTS] = r->sorts;
	m[SP_M_AUTOINDEX] = r->autoindex;
	m[SP_M_PREPARES] = r->prepares;
	m[SP_M_ERRORS] = r->errors;
	m[SP_M_MAX_RUN] = r->max_run;
}

static int plan_has_full_scan(const char *plan)
{
	struct plan_lines pl;
	struct sp_plan_access a;
	int i;

	pl.n = 0;
	if (plan)
		sp_plan_foreach(plan, collect_cb, &pl);
	for (i = 0; i < pl.n; i++)
		if (sp_plan_access(pl.d[i], &a) && a.full_scan)
			return 1;
	return 0;
}

static int tier(const struct sp_qdiff *q)
{
	if (q->flags & (SP_QD_PLAN_WORSE | SP_QD_NEW_FULLSCAN))
		return 3;
	if (q->flags & (SP_QD_NEW | SP_QD_VANISHED))
		return 2;
	if (q->flags & (SP_QD_CHANGED | SP_QD_PLAN_CHANGED))
		return 1;
	return 0;
}

static double absd(double a, double b)
{
	return a > b ? a - b : b - a;
}

/* A query's place in the diff's order, its terms made once (they were
 * made again at each compare, through a 280-byte entry: 4 % of check's
 * instructions at 20,000 fingerprints): by tier, then the absolute
 * changes of VM steps, count and time (larger first), then fp_id; i, its
 * index, keeps the order of equals as the merge sort did. */
struct qd_key {
	double x[3];
	int64_t fp_id;
	int tier;
	size_t i;
};

static void qd_key_make(const struct sp_qdiff *q, size_t i, struct qd_key *k)
{
	k->tier = tier(q);
	k->x[0] = absd((double)q->m[0][SP_M_VM_STEPS], (double)q->m[1][SP_M_VM_STEPS]);
	k->x[1] = absd((double)q->m[0][SP_M_COUNT], (double)q->m[1][SP_M_COUNT]);
	k->x[2] = absd(q->t_median[0] * (double)q->m[0][SP_M_COUNT],
		       q->t_median[1] * (double)q->m[1][SP_M_COUNT]);
	k->fp_id = q->fp_id;
	k->i = i;
}

static int cmp_qd_key(const void *pa, const void *pb)
{
	const struct qd_key *a = pa, *b = pb;

	if (a->tier != b->tier)
		return b->tier - a->tier;
	for (int j = 0; j < 3; j++)
		if (a->x[j] != b->x[j])
			return a->x[j] < b->x[j] ? 1 : -1;
	if (a->fp_id != b->fp_id)
		return a->fp_id < b->fp_id ? -1 : 1;
	return a->i < b->i ? -1 : a->i > b->i;
}

/* Sort d->q by cmp_qd_key: the keys sorted, then the entries moved along
 * the permutation's cycles (no second array of them). 0, or -1 on ENOMEM. */
static int sort_qdiff(struct sp_diff *d)
{
	struct qd_key *k = malloc((d->nq ? d->nq : 1) * sizeof(*k));
	size_t i, j, from;

	if (!k)
		return -1;
	for (i = 0; i < d->nq; i++)
		qd_key_make(&d->q[i], i, &k[i]);
	sp_qsort(k, d->nq, sizeof(*k), cmp_qd_key);
	for (i = 0; i < d->nq; i++) { /* k[j].i: the entry that goes to j */
		struct sp_qdiff t;

		if (k[i].i == i || k[i].i == SIZE_MAX)
			continue;
		t = d->q[i];
		for (j = i; (from = k[j].i) != i; j = from) {
			d->q[j] = d->q[from];
			k[j].i = SIZE_MAX; /* placed */
		}
		d->q[j] = t;
		k[j].i = SIZE_MAX;
	}
	free(k);
	return 0;
}

static int cmp_sdiff(const void *pa, const void *pb)
{
	const struct sp_sdiff *a = pa, *b = pb;

	return a->impact < b->impact ? 1 : a->impact > b->impact ? -1 : 0;
}

#define MAX_TSAMPLES 4096

/* 1 when s's sites are by query in key order (sites_walk). */
static int sites_grouped(const struct sp_side *s)
{
	return grouped(s->nsites, s->sites, sizeof(*s->sites), offsetof(struct sp_sitestat, fp_id),
		       offsetof(struct sp_sitestat, kind), 0);
}

/* The index of x's site among cand's sites of x's query, from *g (cand's
 * first site of a query not before x's, kept for the next x), or
 * SIZE_MAX when cand has none. */
static size_t site_match(const struct sp_side *cand, const struct sp_sitestat *x, size_t *g)
{
	int kx = x->kind == SP_QK_EXEC;
	size_t i;

	while (*g < cand->nsites &&
	       kcmp(cand->sites[*g].fp_id, cand->sites[*g].kind == SP_QK_EXEC, x->fp_id, kx) < 0)
		++*g;
	for (i = *g; i < cand->nsites && cand->sites[i].fp_id == x->fp_id &&
		     (cand->sites[i].kind == SP_QK_EXEC) == kx;
	     i++)
		if (cand->sites[i].key_hash == x->key_hash)
			return i;
	return SIZE_MAX;
}

static int add_sites(const struct sp_side *base, const struct sp_side *cand, struct sp_diff *d)
{
	struct hmap idx;
	size_t i, cap = 0;
	int side;

	/* both sides' sites by query (as build_sites makes them of one
	 * profile): a baseline site is found among its query's sites of the
	 * candidate, the candidate's i-th site being entry i (a map of all
	 * the sites was 5.8 % of diff's CPU at 200,000 fingerprints) */
	int walk = sites_grouped(base) && sites_grouped(cand);
	size_t g = 0, wi;

	hmap_init(&idx, sizeof(struct skey), sizeof(size_t));
	for (side = 1; side >= 0; side--) { /* candidate first: its display wins */
		const struct sp_side *s = side ? cand : base;
		size_t cur = 0;

		for (i = 0; i < s->nsites; i++) {
			const struct sp_sitestat *x = &s->sites[i];
			struct skey k = { x->key_hash, x->fp_id, (x->kind == SP_QK_EXEC) };
			int created;
			size_t *ix = walk ? &wi : hmap_get(&idx, &k, 1, &created);
			struct sp_sdiff *sd;

			if (walk) {
				wi = side ? d->ns : site_match(cand, x, &g);
				created = side || wi == SIZE_MAX;
			}
			if (!ix)
				goto nomem;
			if (created) {
				const struct sp_qrow *r = find_row(&s->agg_idx, &s->agg, x->fp_id,
								   (int)k.kind_exec, &cur);

				if (SP_GROW(d->s, cap, d->ns + 1, 64) < 0)
					goto nomem;
				*ix = d->ns;
				sd = &d->s[d->ns++];
				memset(sd, 0, sizeof(*sd));
				sd->display = x->display;
				sd->fp_id = x->fp_id;
				sd->kind = x->kind;
				sd->fingerprint = r ? r->fingerprint : "?";
			}
			sd = &d->s[*ix];
			sd->count[side] += x->est_count;
			sd->vm_steps[side] += x->est_vm_steps;
			sd->rows[side] += x->est_rows;
		}
	}
	hmap_free(&idx);
	for (i = 0; i < d->ns; i++)
		d->s[i].impact = absd(d->s[i].vm_steps[0], d->s[i].vm_steps[1]) +
				 absd(d->s[i].count[0], d->s[i].count[1]);
	sp_qsort(d->s, d->ns, sizeof(*d->s), cmp_sdiff);
	return 0;
nomem:
	hmap_free(&idx);
	return -1;
}

/* sp_side_time_samples of r, a row of s->agg, into out (MAX_TSAMPLES):
 * a shared row is its one profile's of one run, whose one sample is its
 * mean (a lookup of each query in the profile's index before). */
static size_t time_samples(const struct sp_side *s, const struct sp_qrow *r, double *out)
{
	if (s->agg_shared) {
		out[0] = r->mean_ns;
		return 1;
	}
	return sp_side_time_samples(s, r->fp_id, r->kind, out, MAX_TSAMPLES);
}

/* q, a new entry of the diff for row r's key. */
static void qd_new(struct sp_qdiff *q, const struct sp_qrow *r)
{
	memset(q, 0, sizeof(*q));
	q->plan_note = (char *)"";
	q->fp_id = r->fp_id;
	q->kind = r->kind;
}

/* d->q as the map of sp_diff_build makes it (the baseline's queries in
 * its order, then the candidate's own in its), by one walk of both sides
 * in key order when both are sorted (by_key): no map of every query. 0,
 * or -1 on ENOMEM. */
static int match_sorted(const struct sp_side *base, const struct sp_side *cand, struct sp_diff *d,
			size_t *cap)
{
	size_t i, j, nb = base->agg.n;

	if (SP_GROW(d->q, *cap, nb ? nb : 1, 64) < 0)
		return -1;
	for (i = 0; i < nb; i++) {
		qd_new(&d->q[i], &base->agg.rows[i]);
		d->q[i].base = &base->agg.rows[i];
	}
	d->nq = nb;
	for (i = j = 0; j < cand->agg.n;) {
		const struct sp_qrow *r = &cand->agg.rows[j];
		int c = i < nb ? key_cmp(&base->agg.rows[i], r->fp_id, r->kind == SP_QK_EXEC) : 1;

		if (c < 0) {
			i++; /* vanished */
			continue;
		}
		j++;
		if (!c) {
			d->q[i++].cand = r;
			continue;
		}
		if (SP_GROW(d->q, *cap, d->nq + 1, 64) < 0)
			return -1;
		qd_new(&d->q[d->nq], r);
		d->q[d->nq++].cand = r; /* new */
	}
	return 0;
}

int sp_diff_build(const struct sp_side *base, const struct sp_side *cand, struct sp_diff *d)
{
	struct hmap idx;
	size_t i, cap = 0;
	int side;
	double *ta = NULL, *tb = NULL;

	memset(d, 0, sizeof(*d));
	hmap_init(&idx, sizeof(struct qkey), sizeof(size_t));
	ta = malloc(MAX_TSAMPLES * sizeof(*ta));
	tb = malloc(MAX_TSAMPLES * sizeof(*tb));
	if (!ta || !tb)
		goto nomem;
	if (by_key(&base->agg_idx) && by_key(&cand->agg_idx)) {
		if (match_sorted(base, cand, d, &cap) < 0)
			goto nomem;
		side = 2; /* matched */
	} else {
		side = 0;
	}
	for (; side < 2; side++) {
		const struct sp_side *s = side ? cand : base;

		for (i = 0; i < s->agg.n; i++) {
			const struct sp_qrow *r = &s->agg.rows[i];
			struct qkey k = { r->fp_id, r->kind == SP_QK_EXEC };
			int created;
			size_t *ix = hmap_get(&idx, &k, 1, &created);
			struct sp_qdiff *q;

			if (!ix)
				goto nomem;
			if (created) {
				if (SP_GROW(d->q, cap, d->nq + 1, 64) < 0)
					goto nomem;
				*ix = d->nq;
				qd_new(&d->q[d->nq++], r);
			}
			q = &d->q[*ix];
			if (side)
				q->cand = r;
			else
				q->base = r;
		}
	}
	hmap_free(&idx);
	for (i = 0; i < d->nq; i++) {
		struct sp_qdiff *q = &d->q[i];
		int m;

		metrics(q->base, q->m[0]);
		metrics(q->cand, q->m[1]);
		if (!q->base) {
			q->flags |= SP_QD_NEW;
			if (q->cand->fullscan_steps > 0 || plan_has_full_scan(q->cand->plan))
				q->flags |= SP_QD_NEW_FULLSCAN;
			d->n_new++;
			d->differences++;
		} else if (!q->cand) {
			q->flags |= SP_QD_VANISHED;
			d->n_vanished++;
			d->differences++;
		} else {
			for (m = 0; m < SP_M_N; m++)
				if (q->m[0][m] != q->m[1][m]) {
					q->flags |= SP_QD_CHANGED;
					d->differences++;
				}
			if (q->base->plan && q->cand->plan && plan_compare(q) < 0)
				goto nomem;
			if (q->flags & SP_QD_PLAN_CHANGED) {
				d->n_plan++;
				d->differences++;
			}
			if (q->base->fullscan_steps == 0 && q->cand->fullscan_steps > 0)
				q->flags |= SP_QD_NEW_FULLSCAN;
			if (q->flags & SP_QD_CHANGED)
				d->n_changed++;
			else if (!(q->flags & SP_QD_PLAN_CHANGED))
				d->n_same++;
		}
		/* time */
		q->nt[0] = q->base ? time_samples(base, q->base, ta) : 0;
		q->nt[1] = q->cand ? time_samples(cand, q->cand, tb) : 0;
		q->p_value = 1;
		if (q->nt[0] >= 3 && q->nt[1] >= 3) {
			q->time_tested = 1;
			q->p_value = sp_mann_whitney(tb, q->nt[1], ta, q->nt[0], &q->u);
		}
		q->t_median[0] = sp_median(ta, q->nt[0]);
		q->t_median[1] = sp_median(tb, q->nt[1]);
		if (q->base) {
			q->p50[0] = (double)q->base->p50_ns;
			q->p95[0] = (double)q->base->p95_ns;
		}
		if (q->cand) {
			q->p50[1] = (double)q->cand->p50_ns;
			q->p95[1] = (double)q->cand->p95_ns;
		}
	}
	if (sort_qdiff(d) < 0)
		goto nomem_noidx;
	for (i = 0; i < d->nq; i++)
		d->q[i].impact = (double)(d->nq - i);
	if (add_sites(base, cand, d) < 0)
		goto nomem_noidx;
	free(ta);
	free(tb);
	return 0;
nomem:
	hmap_free(&idx);
nomem_noidx:
	free(ta);
	free(tb);
	sp_diff_free(d);
	return -1;
}

void sp_diff_free(struct sp_diff *d)
{
	for (size_t i = 0; i < d->nq; i++)
		if (d->q[i].plan_note[0])
			free(d->q[i].plan_note);
	free(d->q);
	free(d->s);
	memset(d, 0, sizeof(*d));
}
