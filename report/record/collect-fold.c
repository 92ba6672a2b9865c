/* SPDX-License-Identifier: MIT */
/*
 * collect-fold.c - folding the texts of a collector into one record per
 * fingerprint, sums kept exact (collect.h: sp_coll_fold_texts,
 * sp_coll_text_fold).
 */
#include <stdlib.h>
#include <string.h>

#include "collect-int.h"
#include "fingerprint.h"
#include "hash.h"

/* Folding texts (sp_coll_fold_texts). */

uint64_t sp_coll_text_fold(struct sp_coll *c, uint64_t sql_id)
{
	const uint64_t *to;

	if (!c->text_folds || !c->text_folds->count || hmap_get(&c->sqls, &sql_id, 0, NULL) ||
	    !(to = hmap_get(c->text_folds, &sql_id, 0, NULL)))
		return sql_id;
	if (c->text_folds_hit)
		hmap_get(c->text_folds_hit, &sql_id, 1, NULL);
	return *to;
}

uint64_t sp_coll_fold_id(uint64_t fp_id)
{
	/* a name no text's id takes: the FNV of a fixed tag and the
	 * fingerprint id, never 0 */
	uint64_t h = sp_fnv1a64(0xcbf29ce484222325ull, "sqlprof texts folded", 20);

	h = sp_fnv1a64(h, &fp_id, sizeof(fp_id));
	return h ? h : 1;
}

/* Merge src into dst (same key); src's owned pointers are dst's or
 * freed. */
typedef void (*fold_merge_fn)(void *dst, void *src);

static void merge_qagg(void *dv, void *sv)
{
	struct sp_qagg *d = dv, *s = sv;

	if (s->count && (!d->count || s->min_ns < d->min_ns))
		d->min_ns = s->min_ns;
	if (s->max_ns > d->max_ns)
		d->max_ns = s->max_ns;
	d->count = sat_add(d->count, s->count);
	d->total_ns = sat_add(d->total_ns, s->total_ns);
	d->self_ns = sat_add(d->self_ns, s->self_ns);
	d->wall_ns = sat_add(d->wall_ns, s->wall_ns);
	d->rows = sat_add(d->rows, s->rows);
	d->vm_steps = sat_add(d->vm_steps, s->vm_steps);
	d->fullscan_steps = sat_add(d->fullscan_steps, s->fullscan_steps);
	d->sorts = sat_add(d->sorts, s->sorts);
	d->autoindex = sat_add(d->autoindex, s->autoindex);
	d->errors = sat_add(d->errors, s->errors);
	d->nested = sat_add(d->nested, s->nested);
	d->samples = sat_add(d->samples, s->samples);
	d->prepares = sat_add(d->prepares, s->prepares);
	d->prepare_ns = sat_add(d->prepare_ns, s->prepare_ns);
	d->runs = sat_add(d->runs, s->runs);
	if (s->max_run > d->max_run)
		d->max_run = s->max_run;
	if (s->loops_by_len) {
		if (!d->loops_by_len) {
			d->loops_by_len = s->loops_by_len;
			d->runs_nb = s->runs_nb;
			s->loops_by_len = NULL;
		} else if (sp_qagg_loops(d, s->runs_nb)) {
			for (uint32_t b = 0; b < s->runs_nb; b++)
				d->loops_by_len[b] += s->loops_by_len[b];
		}
	}
	free(s->loops_by_len);
	if (s->hist) {
		if (!d->hist) {
			d->hist = s->hist;
			s->hist = NULL;
		} else {
			sp_hist_merge(d->hist, s->hist);
		}
	}
	sp_hist_free(s->hist);
}

static void merge_sagg(void *dv, void *sv)
{
	sp_sagg_add(dv, sv);
}

static void merge_err(void *dv, void *sv)
{
	struct sp_err *d = dv, *s = sv;

	d->count += s->count;
	free(s->msg);
}

static void merge_u64(void *dv, void *sv)
{
	*(uint64_t *)dv += *(uint64_t *)sv;
}

static void merge_caller(void *dv, void *sv)
{
	struct sp_caller *d = dv, *s = sv;

	d->count = sat_add(d->count, s->count);
	d->total_ns = sat_add(d->total_ns, s->total_ns);
}

static void merge_dup(void *dv, void *sv)
{
	struct sp_dup *d = dv, *s = sv;

	d->samples += s->samples;
	d->repeats += s->repeats;
	if (s->top > d->top)
		d->top = s->top;
}

static void merge_plan(void *dv, void *sv)
{
	struct sp_plan *d = dv, *s = sv;

	d->connections += s->connections;
	free(s->text);
}

/* Every entry of m whose key's first uint64_t is a folded sql_id (in
 * fold) renamed to its fold's, entries that meet merged by fn. In place:
 * only the entries that move are copied (a rebuilt map of 60,000 texts'
 * aggregates cost 7 us a text, most of it first touches of new pages).
 * -1 on ENOMEM (m keeps what was not moved yet: sums stay whole). */
static int fold_rekey(struct hmap *m, const struct hmap *fold, fold_merge_fn fn)
{
	size_t it = 0, n = 0, cap = 0, ent = m->keylen + m->vallen;
	const void *k;
	uint8_t *moved = NULL;
	int rc = 0;

	if (m->keylen > 8 * sizeof(uint64_t))
		return -1;
	while (hmap_next(m, &it, &k)) {
		if (!hmap_get((struct hmap *)fold, k, 0, NULL))
			continue;
		if (SP_GROW(moved, cap, (n + 1) * ent, 4096) < 0) {
			rc = -1;
			break;
		}
		memcpy(moved + n * ent, k, m->keylen); /* the value when deleted */
		n++;
	}
	for (size_t i = 0; i < n; i++) {
		uint8_t *e = moved + i * ent;

		hmap_del(m, e, e + m->keylen);
	}
	for (size_t i = 0; i < n; i++) {
		uint8_t *e = moved + i * ent;
		uint64_t key[8];
		const uint64_t *to;

		memcpy(key, e, m->keylen);
		to = hmap_get((struct hmap *)fold, &key[0], 0, NULL);
		key[0] = *to;
		/* else put back as it was: its sums stay in the map */
		if (hmap_put_merge(m, key, e, fn) < 0)
			rc = -1;
	}
	free(moved);
	return rc;
}

struct fold_cand {
	uint64_t last, sql_id;
	size_t at; /* its place in the map's order: ties go to the first */
};

/* x before y: the newer first, then the first in the map's order (the
 * order the stable sort this replaces gave) */
static int cand_before(const struct fold_cand *x, const struct fold_cand *y)
{
	return x->last != y->last ? x->last > y->last : x->at < y->at;
}

static void cand_swap(struct fold_cand *v, size_t i, size_t j)
{
	struct fold_cand t = v[i];

	v[i] = v[j];
	v[j] = t;
}

/* The first k of v[n] in cand_before's order moved to v[0..k), in no
 * order: which texts are kept is all a fold needs, and a sort of every
 * text kept at each fold (22,000 every ~2,000 new texts in the agent) was
 * a tenth of the agent's own CPU. Quickselect, the pivot the median of
 * three. */
static void cand_select(struct fold_cand *v, size_t n, size_t k)
{
	size_t lo = 0, hi = n; /* the k-th is in [lo, hi) */

	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2, st = lo;

		if (cand_before(&v[hi - 1], &v[lo]))
			cand_swap(v, lo, hi - 1);
		if (cand_before(&v[mid], &v[lo]))
			cand_swap(v, mid, lo);
		if (cand_before(&v[hi - 1], &v[mid]))
			cand_swap(v, mid, hi - 1);
		cand_swap(v, mid, hi - 1); /* the pivot at the end */
		for (size_t i = lo; i < hi - 1; i++)
			if (cand_before(&v[i], &v[hi - 1]))
				cand_swap(v, i, st++);
		cand_swap(v, st, hi - 1); /* v[st]: the pivot, in its place */
		if (st == k)
			return;
		if (st < k)
			lo = st + 1;
		else
			hi = st;
	}
}

size_t sp_coll_fold_texts(struct sp_coll *c, size_t max, struct hmap *map)
{
	struct fold_cand *cand;
	struct hmap fold;
	size_t n = 0, it = 0, folded = 0;
	const void *k;
	struct sp_sql *s;

	if (c->sqls.count <= max)
		return 0;
	cand = malloc(c->sqls.count * sizeof(*cand));
	if (!cand)
		return (size_t)-1;
	while ((s = hmap_next(&c->sqls, &it, &k)))
		if (s->text && s->text[0] != '<' && s->fp_id && !s->folded &&
		    *(const uint64_t *)k != sp_coll_fold_id(s->fp_id)) /* a fold, loaded */
			cand[n] = (struct fold_cand){ s->last, *(const uint64_t *)k, n }, n++;
	if (n <= max) {
		free(cand);
		return 0;
	}
	cand_select(cand, n, max);
	hmap_init(&fold, sizeof(uint64_t), sizeof(uint64_t));
	/* the fold records, and which text goes to which */
	for (size_t i = max; i < n; i++) {
		struct sp_sql *t = hmap_get(&c->sqls, &cand[i].sql_id, 0, NULL);
		uint64_t fid = sp_coll_fold_id(t->fp_id), *to;
		struct sp_sql *f;
		int created;

		f = hmap_get(&c->sqls, &fid, 1, &created);
		t = hmap_get(&c->sqls, &cand[i].sql_id, 0, NULL); /* the map may have grown */
		if (!f || !(to = hmap_get(&fold, &cand[i].sql_id, 1, NULL)))
			goto oom;
		if (created || !f->text) {
			uint64_t id;

			f->text = sp_fingerprint(t->text, strlen(t->text), &id);
			if (!f->text)
				goto oom;
			f->full_len = (uint32_t)strlen(f->text);
			f->fp_id = t->fp_id;
		}
		f->folded++;
		if (t->last > f->last)
			f->last = t->last;
		*to = fid;
		if (map) {
			uint64_t *mv = hmap_get(map, &cand[i].sql_id, 1, NULL);

			if (!mv)
				goto oom;
			*mv = fid;
		}
	}
	if (fold_rekey(&c->queries, &fold, merge_qagg) < 0 ||
	    fold_rekey(&c->sites, &fold, merge_sagg) < 0 ||
	    fold_rekey(&c->errors, &fold, merge_err) < 0 ||
	    fold_rekey(&c->errcodes, &fold, merge_u64) < 0 ||
	    fold_rekey(&c->callers, &fold, merge_caller) < 0 ||
	    fold_rekey(&c->dups, &fold, merge_dup) < 0 ||
	    fold_rekey(&c->dupvals, &fold, merge_u64) < 0 ||
	    fold_rekey(&c->plans, &fold, merge_plan) < 0)
		goto oom;
	/* the sampled executions kept, in memory or in the spill file (one
	 * that could not be written again keeps its text's id: no text) */
	(void)sp_coll_events_fold(c, &fold);
	/* the folded texts go */
	for (size_t i = max; i < n; i++) {
		struct sp_sql gone;

		if (hmap_del(&c->sqls, &cand[i].sql_id, &gone)) {
			free(gone.text);
			folded++;
		}
	}
	hmap_free(&fold);
	free(cand);
	c->texts_folded += folded;
	return folded;
oom:
	hmap_free(&fold);
	free(cand);
	return (size_t)-1;
}
