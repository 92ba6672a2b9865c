/* SPDX-License-Identifier: MIT */
/*
 * attrib.c - see attrib.h.
 */
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include "attrib.h"

struct stkey {
	uint64_t pid, stack_id;
};

static const char *base_name(const char *p)
{
	const char *s = strrchr(p, '/');

	return s ? s + 1 : p;
}

/* Frames of the profiler and of SQLite itself are never the origin. */
static int builtin_skip(const struct sp_frame *f)
{
	const char *b = base_name(f->module);

	return !strncmp(b, "libsqlite3.so", 13) || !strncmp(b, "libsqlprof.so", 13);
}

static int user_skip(const struct sp_frame *f, const char *const *skip)
{
	for (; skip && *skip; skip++)
		if (!fnmatch(*skip, f->function, 0) || !fnmatch(*skip, f->module, 0) ||
		    !fnmatch(*skip, base_name(f->module), 0) ||
		    (f->py && (!fnmatch(*skip, f->file, 0) || !fnmatch(*skip, base_name(f->file), 0))))
			return 1;
	return 0;
}

static int unknown(const struct sp_frame *f);

/* Python frames of the sqlite3 package (dbapi2.py's wrappers) are never
 * the origin either. */
static int py_skip(const struct sp_frame *f)
{
	return !fnmatch("*/sqlite3/*.py", f->file, 0) || !strcmp(f->function, "??");
}

/* The site of a stack: its first frame, from the leaf up, outside SQLite,
 * the profiler and the user's --skip patterns. A stack holding Python
 * frames takes the first Python frame outside the sqlite3 package and
 * --skip (which match Python functions and file paths too): the line of
 * the program, not the interpreter's C code; when there is none, the
 * native rule. -1: none. */
static int stack_site(const struct sp_stk *s, const char *const *skip)
{
	uint32_t i;

	for (i = 0; i < s->nframes; i++) {
		const struct sp_frame *f = &s->frames[i];

		if (f->py && !py_skip(f) && !user_skip(f, skip))
			return (int)i;
	}
	for (i = 0; i < s->nframes; i++) {
		const struct sp_frame *f = &s->frames[i];

		if (f->py || builtin_skip(f) || user_skip(f, skip) || unknown(f))
			continue;
		return (int)i;
	}
	return -1;
}

/* A frame is unknown when its pc lies in no module we know. A frame in a
 * known module without symbols is a site of its own ("??" in that
 * module): passing over it would credit an outer caller - in a stripped
 * program, main or libc - with a query it did not issue. */
static int unknown(const struct sp_frame *f)
{
	return !strcmp(f->module, "??") || !*f->module;
}

static int site_intern(struct sp_attrib *a, const struct sp_frame *f)
{
	size_t i;

	for (i = 0; i < a->nsites; i++) {
		const struct sp_site *s = &a->sites[i];

		if (s->line == f->line && !strcmp(s->function, f->function) &&
		    !strcmp(s->file, f->file) && !strcmp(s->module, f->module))
			return (int)i;
	}
	if (a->nsites == a->sites_cap) {
		size_t nc = a->sites_cap ? a->sites_cap * 2 : 64;
		struct sp_site *ns = realloc(a->sites, nc * sizeof(*ns));

		if (!ns)
			return -2;
		a->sites = ns;
		a->sites_cap = nc;
	}
	a->sites[a->nsites] = (struct sp_site){ f->function, f->file, f->module, f->line };
	return (int)a->nsites++;
}

static char *col(sqlite3_stmt *st, int i)
{
	const unsigned char *t = sqlite3_column_text(st, i);

	return strdup(t ? (const char *)t : "??");
}

int sp_attrib_load(sqlite3 *db, const char *const *skip, struct sp_attrib *a, char *err,
		   size_t errlen)
{
	sqlite3_stmt *st = NULL;
	size_t it;
	struct sp_stk *s;
	int rc;

	memset(a, 0, sizeof(*a));
	hmap_init(&a->stacks, sizeof(struct stkey), sizeof(struct sp_stk));
	if (sqlite3_prepare_v2(db,
			       "SELECT pid, stack_id, module, function, file, line, inlined, pc FROM frames"
			       " ORDER BY pid, stack_id, idx",
			       -1, &st, NULL) != SQLITE_OK)
		goto sqlerr;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct stkey k = { (uint64_t)sqlite3_column_int64(st, 0),
				   (uint64_t)sqlite3_column_int64(st, 1) };
		struct sp_frame *f;

		s = hmap_get(&a->stacks, &k, 1, NULL);
		if (!s)
			goto nomem;
		if ((s->nframes & (s->nframes - 1)) == 0) { /* grow at powers of two */
			struct sp_frame *nf =
				realloc(s->frames, (s->nframes ? s->nframes * 2 : 1) * sizeof(*nf));

			if (!nf)
				goto nomem;
			s->frames = nf;
		}
		f = &s->frames[s->nframes++];
		f->module = col(st, 2);
		f->function = col(st, 3);
		f->file = col(st, 4);
		f->line = sqlite3_column_int(st, 5);
		f->inlined = sqlite3_column_int(st, 6);
		f->py = sqlite3_column_int64(st, 7) < 0;
		if (!f->module || !f->function || !f->file)
			goto nomem;
	}
	if (rc != SQLITE_DONE)
		goto sqlerr;
	sqlite3_finalize(st);
	st = NULL;

	/* Attribute every stack once. */
	for (it = 0; (s = hmap_next(&a->stacks, &it, NULL));) {
		int at = stack_site(s, skip);

		s->site = -1;
		if (at >= 0) {
			s->site = site_intern(a, &s->frames[at]);
			if (s->site == -2)
				goto nomem;
		}
	}

	if (sqlite3_prepare_v2(db,
			       "SELECT fp_id, kind, pid, stack_id, samples, total_ns,"
			       " COALESCE(random_samples, 0), COALESCE(random_ns, 0) FROM stack_samples",
			       -1, &st, NULL) != SQLITE_OK)
		goto sqlerr;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct stkey k = { (uint64_t)sqlite3_column_int64(st, 2),
				   (uint64_t)sqlite3_column_int64(st, 3) };
		const struct sp_stk *sk = hmap_get(&a->stacks, &k, 0, NULL);
		int64_t fp = sqlite3_column_int64(st, 0);
		const char *kind = (const char *)sqlite3_column_text(st, 1);
		int kx = kind && !strcmp(kind, "exec"); /* hostile profile: NULL */
		int site = sk ? sk->site : -1;
		size_t j;

		for (j = 0; j < a->nqs; j++)
			if (a->qs[j].fp_id == fp && a->qs[j].kind_exec == kx && a->qs[j].site == site)
				break;
		if (j == a->nqs) {
			if (a->nqs == a->qs_cap) {
				size_t nc = a->qs_cap ? a->qs_cap * 2 : 64;
				struct sp_qsite *nq = realloc(a->qs, nc * sizeof(*nq));

				if (!nq)
					goto nomem;
				a->qs = nq;
				a->qs_cap = nc;
			}
			memset(&a->qs[j], 0, sizeof(a->qs[j]));
			a->qs[j].fp_id = fp;
			a->qs[j].kind_exec = kx;
			a->qs[j].site = site;
			a->qs[j].pid = k.pid;
			a->qs[j].stack_id = k.stack_id;
			a->nqs++;
		}
		a->qs[j].samples += (uint64_t)sqlite3_column_int64(st, 4);
		a->qs[j].sample_ns += (uint64_t)sqlite3_column_int64(st, 5);
		a->qs[j].random_samples += (uint64_t)sqlite3_column_int64(st, 6);
		a->qs[j].random_ns += (uint64_t)sqlite3_column_int64(st, 7);
		if (site < 0)
			a->unattributed_samples += (uint64_t)sqlite3_column_int64(st, 4);
	}
	if (rc != SQLITE_DONE)
		goto sqlerr;
	sqlite3_finalize(st);
	return 0;
nomem:
	snprintf(err, errlen, "out of memory");
	goto fail;
sqlerr:
	snprintf(err, errlen, "corrupt profile: %s", sqlite3_errmsg(db));
fail:
	sqlite3_finalize(st);
	sp_attrib_free(a);
	return -1;
}

/*
 * Estimates for one query: its exact count and time shared out by the
 * samples at each site. The randomly drawn samples are an unbiased share
 * of the executions; forced ones (first, failed, slow) are not, so they
 * are used only when a query has no random sample at all (rate 0, or a
 * query run too few times to be drawn).
 */
void sp_attrib_estimate(struct sp_attrib *a, int64_t fp_id, int kind_exec, uint64_t count,
			uint64_t total_ns, uint64_t self_ns)
{
	uint64_t samples = 0, ns = 0, rsamples = 0, rns = 0;
	size_t j;
	int use_random;

	for (j = 0; j < a->nqs; j++)
		if (a->qs[j].fp_id == fp_id && a->qs[j].kind_exec == kind_exec) {
			samples += a->qs[j].samples;
			ns += a->qs[j].sample_ns;
			rsamples += a->qs[j].random_samples;
			rns += a->qs[j].random_ns;
		}
	use_random = rsamples > 0;
	for (j = 0; j < a->nqs; j++) {
		struct sp_qsite *q = &a->qs[j];
		double share, tshare;

		if (q->fp_id != fp_id || q->kind_exec != kind_exec)
			continue;
		if (use_random) {
			share = (double)q->random_samples / (double)rsamples;
			tshare = rns ? (double)q->random_ns / (double)rns : share;
		} else {
			share = samples ? (double)q->samples / (double)samples : 0;
			tshare = ns ? (double)q->sample_ns / (double)ns : share;
		}
		q->est_count = share * (double)count;
		q->est_total_ns = tshare * (double)total_ns;
		q->est_self_ns = total_ns ? q->est_total_ns * ((double)self_ns / (double)total_ns) : 0;
		if (q->site < 0)
			a->unattributed_est += q->est_count;
	}
}

const struct sp_stk *sp_attrib_stack(const struct sp_attrib *a, uint64_t pid, uint64_t stack_id)
{
	struct stkey k = { pid, stack_id };

	return hmap_get((struct hmap *)&a->stacks, &k, 0, NULL);
}

void sp_attrib_free(struct sp_attrib *a)
{
	size_t it = 0;
	struct sp_stk *s;

	while ((s = hmap_next(&a->stacks, &it, NULL))) {
		for (uint32_t i = 0; i < s->nframes; i++) {
			free(s->frames[i].module);
			free(s->frames[i].function);
			free(s->frames[i].file);
		}
		free(s->frames);
	}
	hmap_free(&a->stacks);
	free(a->sites);
	free(a->qs);
	memset(a, 0, sizeof(*a));
}
