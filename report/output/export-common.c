/* SPDX-License-Identifier: MIT */
/*
 * export-common.c - loading a profile for `sqlprof export` and the pieces
 * several printers share: per-stack estimates, merged flame stacks, the
 * sampled executions of each thread laid out in non-overlapping lanes,
 * labels, UTF-8 clean-up and XML escaping. No printer lives here.
 */
#include <stdlib.h>

#include "util.h"
#include <string.h>

#include "export.h"
#include "profile.h"

#define FLAME_SQL_MAX 300 /* bytes of a fingerprint shown as a flame leaf */

const struct sp_frame sp_export_nostack = {
	.module = "",
	.function = "[no stack recorded]",
	.file = "??",
	.line = 0,
	.inlined = 0,
};

char *sp_export_own(struct sp_export *x, char *s)
{
	if (!s)
		return NULL;
	if (SP_GROW(x->strs, x->strs_cap, x->nstrs + 1, 256) < 0) {
		free(s);
		return NULL;
	}
	x->strs[x->nstrs++] = s;
	return s;
}

/* Length of the valid UTF-8 sequence at p (1-4), or 0 if invalid. Rejects
 * overlong forms, surrogates, values above U+10FFFF and U+FFFE/U+FFFF
 * (not allowed in XML). */
static size_t utf8_len(const unsigned char *p)
{
	unsigned c = p[0];

	if (c < 0x80)
		return 1;
	if (c >= 0xC2 && c <= 0xDF)
		return (p[1] & 0xC0) == 0x80 ? 2 : 0;
	if (c >= 0xE0 && c <= 0xEF) {
		if ((p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80)
			return 0;
		if (c == 0xE0 && p[1] < 0xA0)
			return 0;
		if (c == 0xED && p[1] >= 0xA0)
			return 0;
		if (c == 0xEF && p[1] == 0xBF && (p[2] == 0xBE || p[2] == 0xBF))
			return 0;
		return 3;
	}
	if (c >= 0xF0 && c <= 0xF4) {
		if ((p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80 || (p[3] & 0xC0) != 0x80)
			return 0;
		if ((c == 0xF0 && p[1] < 0x90) || (c == 0xF4 && p[1] >= 0x90))
			return 0;
		return 4;
	}
	return 0;
}

char *sp_export_utf8(const char *s)
{
	const unsigned char *p = (const unsigned char *)(s ? s : "");
	size_t n = strlen((const char *)p), o = 0;
	char *out = malloc(n * 3 + 1);

	if (!out)
		return NULL;
	while (*p) {
		size_t l = utf8_len(p);

		if (l) {
			memcpy(out + o, p, l);
			o += l;
			p += l;
		} else {
			memcpy(out + o, "\xEF\xBF\xBD", 3);
			o += 3;
			p++;
		}
	}
	out[o] = 0;
	return out;
}

void sp_xml_str(FILE *f, const char *s)
{
	char *c = sp_export_utf8(s);
	const unsigned char *p = (const unsigned char *)(c ? c : "?");

	for (; *p; p++) {
		switch (*p) {
		case '&': fputs("&amp;", f); break;
		case '<': fputs("&lt;", f); break;
		case '>': fputs("&gt;", f); break;
		case '"': fputs("&quot;", f); break;
		case '\'': fputs("&#39;", f); break;
		case '\n': fputs("&#10;", f); break;
		case '\t': fputs("&#9;", f); break;
		default:
			/* other C0 controls are not allowed in XML 1.0, not even
			 * as character references */
			if (*p < 0x20 || *p == 0x7f)
				fputs("\xEF\xBF\xBD", f);
			else
				fputc(*p, f);
		}
	}
	free(c);
}

static int is_sqlprof_frame(const struct sp_frame *f)
{
	return !strncmp(sp_basename(f->module), "libsqlprof.so", 13);
}

const char *sp_export_frame_label(struct sp_export *x, const struct sp_frame *f)
{
	char *s = NULL, *c;

	char w[2048];

	if (strcmp(f->file, "??") || *f->module) /* without a file: module+0xOFF */
		c = strdup(sp_where(w, sizeof(w), f->function, f->file, f->line, f->module,
				    f->offset));
	else
		c = strdup(f->function);
	if (!c)
		return NULL;
	s = sp_export_utf8(c);
	free(c);
	if (s)
		sp_one_line(s);
	return sp_export_own(x, s);
}

const char *sp_export_query_label(struct sp_export *x, const struct sp_qrow *q, size_t max)
{
	char *c = sp_export_utf8(q->fingerprint), *s, *t;

	if (!c)
		return NULL;
	sp_one_line(c);
	s = max ? sp_shorten(c, max) : strdup(c);
	free(c);
	if (!s)
		return NULL;
	if (q->kind != SP_QK_EXEC)
		return sp_export_own(x, s);
	t = asprintf(&c, "[exec] %s", s) < 0 ? NULL : c;
	free(s);
	return sp_export_own(x, t);
}

const char *sp_export_qname(struct sp_export *x, const struct sp_qrow *q)
{
	size_t i;

	if (!q)
		return "<unknown query>";
	i = (size_t)(q - x->qs.rows);
	if (!x->qnames[i])
		x->qnames[i] = sp_export_query_label(x, q, 200);
	return x->qnames[i];
}

const char *sp_export_proc_name(struct sp_export *x, uint64_t pid)
{
	sqlite3_stmt *st;
	char *r = NULL;

	if (sqlite3_prepare_v2(x->db, "SELECT exe FROM processes WHERE pid = ?", -1, &st, NULL) ==
	    SQLITE_OK) {
		sqlite3_bind_int64(st, 1, (sqlite3_int64)pid);
		if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
			r = sp_export_utf8(sp_basename((const char *)sqlite3_column_text(st, 0)));
		sqlite3_finalize(st);
	}
	if (!r && asprintf(&r, "pid %llu", (unsigned long long)pid) < 0)
		r = NULL;
	return sp_export_own(x, r);
}

const char *sp_export_site_label(struct sp_export *x, int site)
{
	const struct sp_site *st;
	struct sp_frame f;

	if (site < 0 || (size_t)site >= x->at.nsites)
		return "(unattributed)";
	if (x->site_labels && x->site_labels[site])
		return x->site_labels[site];
	st = &x->at.sites[site];
	f = (struct sp_frame){
		(char *)st->module, (char *)st->function, (char *)st->file, st->line, 0, 0, 0,
		st->offset
	};
	if (!x->site_labels)
		return sp_export_frame_label(x, &f);
	return x->site_labels[site] = sp_export_frame_label(x, &f);
}

const size_t *sp_export_query_stacks(const struct sp_export *x, const struct sp_qrow *q, size_t *n)
{
	size_t i = (size_t)(q - x->qs.rows);

	*n = x->xs_first[i + 1] - x->xs_first[i];
	return x->xs_of + x->xs_first[i];
}

/* xs_of / xs_first: a counting sort of xs by query row. */
static int index_xstacks(struct sp_export *x)
{
	size_t i, *pos;

	x->xs_first = calloc(x->qs.n + 2, sizeof(*x->xs_first));
	x->xs_of = malloc((x->nxs ? x->nxs : 1) * sizeof(*x->xs_of));
	pos = calloc(x->qs.n + 1, sizeof(*pos));
	if (!x->xs_first || !x->xs_of || !pos) {
		free(pos);
		return -1;
	}
	for (i = 0; i < x->nxs; i++)
		x->xs_first[(size_t)(x->xs[i].q - x->qs.rows) + 1]++;
	for (i = 0; i < x->qs.n; i++)
		x->xs_first[i + 1] += x->xs_first[i];
	for (i = 0; i < x->nxs; i++) {
		size_t qi = (size_t)(x->xs[i].q - x->qs.rows);

		x->xs_of[x->xs_first[qi] + pos[qi]++] = i;
	}
	free(pos);
	return 0;
}

uint64_t sp_export_fweight(const struct sp_export *x, const struct sp_fstack *f)
{
	double w = x->weight == SP_XW_COUNT ? f->count : f->ns;

	if (!(w >= 1))
		return 1;
	if (w > 9e18)
		return 9000000000000000000ULL;
	return (uint64_t)(w + 0.5);
}

/* ---- loading ------------------------------------------------------------- */

struct qkey {
	int64_t fp_id;
	int64_t kind_exec;
};

static const struct sp_qrow *find_q(struct hmap *qm, const struct sp_export *x, int64_t fp,
				    const unsigned char *kind)
{
	struct qkey k = { fp, sp_qkind_parse(kind) };
	size_t *i = hmap_get(qm, &k, 0, NULL);

	return i ? &x->qs.rows[*i] : NULL;
}

static uint64_t u64col(sqlite3_stmt *st, int i)
{
	sqlite3_int64 v = sqlite3_column_int64(st, i);

	return v < 0 ? 0 : (uint64_t)v;
}

static int push_xstack(struct sp_export *x, size_t *cap, const struct sp_xstack *s)
{
	if (SP_GROW(x->xs, *cap, x->nxs + 1, 64) < 0)
		return -1;
	x->xs[x->nxs++] = *s;
	return 0;
}

static struct sp_est_in xstack_in(const struct sp_xstack *s)
{
	return (struct sp_est_in){ s->samples,  s->sample_ns,      s->rows,
				   s->vm_steps, s->random_samples, s->random_ns };
}

/* stack_samples grouped per (query, process, stack), then the query's
 * exact totals shared out among them by sp_estimate, the estimator of
 * report and diff (its estimates for a site's stacks add up to the
 * site's). */
static int load_xstacks(struct sp_export *x, struct hmap *qm, char *err, size_t errlen)
{
	sqlite3_stmt *st = NULL;
	struct sp_est_in *all = NULL; /* per query row */
	size_t cap = 0, i, j;
	int rc;

	if (sqlite3_prepare_v2(
		    x->db,
		    "SELECT fp_id, kind, pid, stack_id, SUM(samples), SUM(total_ns), SUM(rows),"
		    " SUM(vm_steps), SUM(COALESCE(random_samples, 0)), SUM(COALESCE(random_ns, 0))"
		    " FROM stack_samples GROUP BY fp_id, kind, pid, stack_id"
		    " ORDER BY fp_id, kind, pid, stack_id",
		    -1, &st, NULL) != SQLITE_OK)
		goto sqlerr;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct sp_xstack s = { 0 };

		s.q = find_q(qm, x, sqlite3_column_int64(st, 0), sqlite3_column_text(st, 1));
		if (!s.q)
			continue; /* samples of a query that never completed an execution */
		s.pid = (uint64_t)sqlite3_column_int64(st, 2);
		s.stack_id = (uint64_t)sqlite3_column_int64(st, 3);
		s.samples = u64col(st, 4);
		s.sample_ns = u64col(st, 5);
		s.rows = u64col(st, 6);
		s.vm_steps = u64col(st, 7);
		s.random_samples = u64col(st, 8);
		s.random_ns = u64col(st, 9);
		s.stk = sp_attrib_stack(&x->at, s.pid, s.stack_id);
		s.site = s.stk ? s.stk->site : -1;
		if (!s.samples)
			continue;
		if (push_xstack(x, &cap, &s) < 0)
			goto nomem;
	}
	if (rc != SQLITE_DONE)
		goto sqlerr;
	sqlite3_finalize(st);
	st = NULL;

	/* each query's sample totals, then each stack's share of them */
	all = calloc(x->qs.n + 1, sizeof(*all));
	if (!all)
		goto nomem;
	for (j = 0; j < x->nxs; j++) {
		struct sp_est_in in = xstack_in(&x->xs[j]);

		sp_est_add(&all[x->xs[j].q - x->qs.rows], &in);
	}
	for (j = 0; j < x->nxs; j++) {
		struct sp_xstack *s = &x->xs[j];
		const struct sp_qrow *q = s->q;
		struct sp_est_tot tot = { q->count, q->total_ns, q->self_ns, q->rows, q->vm_steps };
		struct sp_est_in in = xstack_in(s);
		struct sp_est e;
		int kx = q->kind == SP_QK_EXEC;
		double xc, xn, ec, en;

		/* the exact per-caller part (as report's: sp_attrib_estimate_q),
		 * the rest shared by the samples */
		sp_attrib_exact_q(&x->at, q->fp_id, kx, &xc, &xn);
		tot.count = xc < (double)q->count ? q->count - (uint64_t)(xc + 0.5) : 0;
		tot.total_ns = xn < (double)q->total_ns ? q->total_ns - (uint64_t)(xn + 0.5) : 0;
		sp_attrib_exact_row(&x->at, q->fp_id, kx, s->pid, s->stack_id, &in, &ec, &en);
		sp_estimate(&in, &all[q - x->qs.rows], &tot, &e);
		s->est_count = e.count + ec;
		s->est_total_ns = e.total_ns + en;
		s->est_self_ns =
			q->total_ns ? s->est_total_ns * ((double)q->self_ns / (double)q->total_ns)
				    : 0;
	}
	for (i = 0; i < x->qs.n; i++) {
		const struct sp_qrow *q = &x->qs.rows[i];

		if (!all[i].samples) {
			struct sp_xstack s = { .q = q,
					       .site = -1,
					       .est_count = (double)q->count,
					       .est_total_ns = (double)q->total_ns,
					       .est_self_ns = (double)q->self_ns };

			if (push_xstack(x, &cap, &s) < 0)
				goto nomem;
		}
	}
	free(all);
	return 0;
nomem:
	snprintf(err, errlen, "out of memory");
	sqlite3_finalize(st);
	free(all);
	return SP_ERR_NOMEM;
sqlerr:
	snprintf(err, errlen, "corrupt profile: %s", sqlite3_errmsg(x->db));
	sqlite3_finalize(st);
	return SP_ERR_INPUT;
}

/* Folded form of a label: ';' would split a frame, newlines a line, and
 * folded stacks are text that ends up on terminals: no control characters. */
static void fold_clean(char *s)
{
	sp_term_clean(s);
	for (; *s; s++)
		if (*s == ';')
			*s = ',';
}

static int cmp_fstack(const void *pa, const void *pb)
{
	return strcmp(((const struct sp_fstack *)pa)->line, ((const struct sp_fstack *)pb)->line);
}

static int build_fstacks(struct sp_export *x)
{
	const char **lab = NULL;
	size_t i, o;

	x->fs = calloc(x->nxs ? x->nxs : 1, sizeof(*x->fs));
	if (!x->fs)
		return -1;
	for (i = 0; i < x->nxs; i++) {
		const struct sp_xstack *s = &x->xs[i];
		struct sp_fstack *f = &x->fs[x->nfs];
		uint32_t n = s->stk ? s->stk->nframes : 0, k;
		size_t len = 0, pos = 0;
		const char *leaf;
		char *line;
		int64_t j;

		f->fr = calloc(n + 1, sizeof(*f->fr));
		if (!f->fr)
			goto nomem;
		x->nfs++;
		for (j = (int64_t)n - 1; j >= 0; j--)
			if (!is_sqlprof_frame(&s->stk->frames[j]))
				f->fr[f->nfr++] = &s->stk->frames[j];
		if (!f->nfr)
			f->fr[f->nfr++] = &sp_export_nostack;
		f->q = s->q;
		f->ns = s->est_self_ns;
		f->count = s->est_count;
		leaf = sp_export_query_label(x, s->q, FLAME_SQL_MAX);
		if (!leaf)
			goto nomem;
		{
			const char **nl = realloc(lab, (f->nfr + 1) * sizeof(*lab));

			if (!nl) /* lab is still ours to free */
				goto nomem;
			lab = nl;
		}
		len = strlen(leaf) + 1;
		for (k = 0; k < f->nfr; k++) {
			lab[k] = sp_export_frame_label(x, f->fr[k]);
			if (!lab[k])
				goto nomem;
			len += strlen(lab[k]) + 1;
		}
		lab[f->nfr] = leaf;
		line = malloc(len);
		if (!line)
			goto nomem;
		for (k = 0; k <= f->nfr; k++) {
			size_t ll = strlen(lab[k]);

			memcpy(line + pos, lab[k], ll);
			line[pos + ll] = 0;
			fold_clean(line + pos);
			pos += ll;
			line[pos++] = k < f->nfr ? ';' : 0;
		}
		f->line = sp_export_own(x, line);
		if (!f->line)
			goto nomem;
	}
	free(lab);
	sp_qsort(x->fs, x->nfs, sizeof(*x->fs), cmp_fstack);
	for (i = 0, o = 0; i < x->nfs; i++) {
		if (o && !strcmp(x->fs[o - 1].line, x->fs[i].line)) {
			x->fs[o - 1].ns += x->fs[i].ns;
			x->fs[o - 1].count += x->fs[i].count;
			free(x->fs[i].fr);
			continue;
		}
		x->fs[o++] = x->fs[i];
	}
	x->nfs = o;
	return 0;
nomem:
	free(lab);
	return -1;
}

/* clang-format off */
static int cmp_event(const void *pa, const void *pb)
{
	const struct sp_xevent *a = pa, *b = pb;

#define C(f, desc)                                                                               \
	if (a->f != b->f)                                                                        \
		return (a->f < b->f) != (desc) ? -1 : 1;
	C(pid, 0) C(tid, 0) C(start_ns, 0) C(wall_ns, 1) C(seq, 0)
#undef C
	return 0;
}
/* clang-format on */

/* Lanes: a slice goes on the first lane where it nests inside whatever is
 * still open there, so every lane is a proper slice stack (wall times of
 * two interleaved statements overlap without nesting). */
static int assign_lanes(struct sp_export *x, struct sp_xthread *t)
{
	struct lane {
		uint64_t *ends;
		size_t n, cap;
	} *ln = NULL;
	size_t nl = 0, i, l;
	int ret = -1;

	for (i = t->first; i < t->first + t->n; i++) {
		struct sp_xevent *e = &x->ev[i];
		uint64_t end = e->start_ns + e->wall_ns;

		for (l = 0;; l++) {
			if (l == nl) {
				struct lane *nn = realloc(ln, (nl + 1) * sizeof(*nn));

				if (!nn)
					goto out;
				ln = nn;
				ln[nl++] = (struct lane){ 0 };
			}
			while (ln[l].n && ln[l].ends[ln[l].n - 1] <= e->start_ns)
				ln[l].n--;
			if (!ln[l].n || ln[l].ends[ln[l].n - 1] >= end)
				break;
		}
		if (SP_GROW(ln[l].ends, ln[l].cap, ln[l].n + 1, 16) < 0)
			goto out;
		ln[l].ends[ln[l].n++] = end;
		e->lane = (int)l;
	}
	t->lanes = nl ? (int)nl : 1;
	ret = 0;
out:
	for (l = 0; l < nl; l++)
		free(ln[l].ends);
	free(ln);
	return ret;
}

#define EVENTS_SQL                                                                    \
	"SELECT pid, tid, seq, parent_seq, fp_id, kind, stack_id, start_ns, wall_ns," \
	" db_ns, rows, vm_steps, rc, flags, sql_id FROM events"

typedef int (*event_fn)(struct sp_export *x, const struct sp_xevent *e, void *arg);

/* Every row of the events table, in the order order ("" or an ORDER BY),
 * as a struct sp_xevent given to fn (valid during the call; its strings
 * are owned by x: one per distinct SQL text and site). fn returns 0, or
 * -1 to stop on ENOMEM. */
static int each_event(struct sp_export *x, struct hmap *qm, const char *order, event_fn fn,
		      void *arg, char *err, size_t errlen)
{
	sqlite3_stmt *st = NULL, *ss = NULL;
	struct hmap sqls; /* sql_id -> const char * (owned by x) */
	const char **sitel = NULL;
	char *sql = NULL;
	const struct sp_qrow *last_q = NULL;
	const struct sp_stk *last_sk = NULL;
	const char *last_sql = NULL;
	int64_t last_fp = 0, last_sql_id = 0;
	uint64_t last_pid = 0, last_stack = 0;
	int rc, last_kx = 0, have_last = 0;

	hmap_init(&sqls, sizeof(int64_t), sizeof(const char *));
	sitel = calloc(x->at.nsites + 1, sizeof(*sitel));
	if (!sitel ||
	    (x->ev_window ? asprintf(&sql, "%s WHERE start_ns >= %lld AND start_ns < %lld %s",
				     EVENTS_SQL, (long long)x->ev_lo, (long long)x->ev_hi, order)
			  : asprintf(&sql, "%s %s", EVENTS_SQL, order)) < 0) {
		sql = NULL;
		goto nomem;
	}
	if (sqlite3_prepare_v2(x->db, sql, -1, &st, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(x->db, "SELECT sql FROM statements WHERE sql_id = ?", -1, &ss,
			       NULL) != SQLITE_OK)
		goto sqlerr;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct sp_xevent e = { 0 };
		int64_t sql_id = sqlite3_column_int64(st, 14), fp = sqlite3_column_int64(st, 4);
		uint64_t stack_id = (uint64_t)sqlite3_column_int64(st, 6);
		const unsigned char *kind = sqlite3_column_text(st, 5);
		int kx = sp_qkind_parse(kind);
		const struct sp_stk *sk;
		const char **sp;
		int created, site;

		e.pid = (uint64_t)sqlite3_column_int64(st, 0);
		e.tid = (uint64_t)sqlite3_column_int64(st, 1);
		e.seq = u64col(st, 2);
		e.parent_seq = u64col(st, 3);
		/* a loop's events repeat their query, stack and text: the
		 * last look-ups are kept (a third of the time per event) */
		if (!have_last || fp != last_fp || kx != last_kx) {
			last_q = find_q(qm, x, fp, kind);
			last_fp = fp;
			last_kx = kx;
		}
		e.q = last_q;
		if (!have_last || e.pid != last_pid || stack_id != last_stack) {
			last_sk = sp_attrib_stack(&x->at, e.pid, stack_id);
			last_pid = e.pid;
			last_stack = stack_id;
		}
		sk = last_sk;
		e.start_ns = u64col(st, 7);
		e.wall_ns = u64col(st, 8);
		/* hostile values: keep start + wall representable (and in
		 * the range a double or a signed protobuf field holds) */
		if (e.start_ns > (1ULL << 62))
			e.start_ns = 1ULL << 62;
		if (e.wall_ns > (1ULL << 62))
			e.wall_ns = 1ULL << 62;
		e.db_ns = u64col(st, 9);
		e.rows = u64col(st, 10);
		e.vm_steps = u64col(st, 11);
		e.rc = sqlite3_column_int64(st, 12);
		e.flags = u64col(st, 13);
		site = sk ? sk->site : -1;
		if (site < 0) {
			e.site = "(unattributed)";
		} else {
			if (!sitel[site] && !(sitel[site] = sp_export_site_label(x, site)))
				goto nomem;
			e.site = sitel[site];
		}
		sp = have_last && sql_id == last_sql_id ? &last_sql
							: hmap_get(&sqls, &sql_id, 1, &created);
		if (!sp)
			goto nomem;
		if (sp != &last_sql && created) {
			const unsigned char *t;

			sqlite3_bind_int64(ss, 1, sql_id);
			if (sqlite3_step(ss) == SQLITE_ROW && (t = sqlite3_column_text(ss, 0))) {
				*sp = sp_export_own(x, sp_export_utf8((const char *)t));
				if (!*sp)
					goto nomem;
			}
			sqlite3_reset(ss);
		}
		e.sql = *sp ? *sp : e.q ? e.q->fingerprint : "<sql text lost>";
		last_sql_id = sql_id;
		last_sql = *sp; /* the text, or NULL when it has none */
		have_last = 1;
		if (fn(x, &e, arg) < 0)
			goto nomem;
	}
	if (rc != SQLITE_DONE)
		goto sqlerr;
	sqlite3_finalize(st);
	sqlite3_finalize(ss);
	hmap_free(&sqls);
	free(sitel);
	free(sql);
	return 0;
nomem:
	snprintf(err, errlen, "out of memory");
	goto fail;
sqlerr:
	snprintf(err, errlen, "corrupt profile: %s", sqlite3_errmsg(x->db));
fail:
	sqlite3_finalize(st);
	sqlite3_finalize(ss);
	hmap_free(&sqls);
	free(sitel);
	free(sql);
	return -1;
}

static int push_event(struct sp_export *x, const struct sp_xevent *e, void *arg)
{
	size_t *cap = arg;

	if (SP_GROW(x->ev, *cap, x->nev + 1, 256) < 0)
		return -1;
	x->ev[x->nev++] = *e;
	return 0;
}

static int load_events(struct sp_export *x, struct hmap *qm, char *err, size_t errlen)
{
	size_t cap = 0, i;

	if (each_event(x, qm, "", push_event, &cap, err, errlen) < 0)
		return -1;
	if (x->nev > 1)
		sp_qsort(x->ev, x->nev, sizeof(*x->ev), cmp_event);
	for (i = 0; i < x->nev; i++) {
		if (!x->nth || x->th[x->nth - 1].pid != x->ev[i].pid ||
		    x->th[x->nth - 1].tid != x->ev[i].tid) {
			struct sp_xthread *n = realloc(x->th, (x->nth + 1) * sizeof(*n));

			if (!n)
				goto nomem;
			x->th = n;
			x->th[x->nth++] =
				(struct sp_xthread){ x->ev[i].pid, x->ev[i].tid, i, 0, 1 };
		}
		x->th[x->nth - 1].n++;
	}
	for (i = 0; i < x->nth; i++)
		if (assign_lanes(x, &x->th[i]) < 0)
			goto nomem;
	return 0;
nomem:
	snprintf(err, errlen, "out of memory");
	return -1;
}

static int qmap_build(struct sp_export *x, struct hmap *qm)
{
	size_t i;

	hmap_init(qm, sizeof(struct qkey), sizeof(size_t));
	for (i = 0; i < x->qs.n; i++) {
		const struct sp_qrow *r = &x->qs.rows[i];
		struct qkey k = { r->fp_id, r->kind == SP_QK_EXEC };
		size_t *v = hmap_get(qm, &k, 1, NULL);

		if (!v)
			return -1;
		*v = i;
	}
	return 0;
}

int sp_export_events_each(struct sp_export *x, int by_time,
			  int (*fn)(struct sp_export *x, const struct sp_xevent *e, void *arg),
			  void *arg)
{
	struct hmap qm;
	sqlite3_stmt *st = NULL;
	char err[256];
	int ret = -1;

	if (qmap_build(x, &qm) < 0)
		goto out;
	if (fn && x->nth) /* the threads are known */
		goto events;
	/* the threads first, in order, without their events */
	free(x->th);
	x->th = NULL;
	x->nth = 0;
	if (sqlite3_prepare_v2(x->db,
			       "SELECT pid, tid FROM events WHERE ?1 = 0 OR (start_ns >= ?2 AND"
			       " start_ns < ?3) GROUP BY pid, tid ORDER BY pid, tid",
			       -1, &st, NULL) != SQLITE_OK) {
		fprintf(stderr, "sqlprof export: %s: corrupt profile: %s\n", x->path,
			sqlite3_errmsg(x->db));
		goto out;
	}
	sqlite3_bind_int(st, 1, x->ev_window);
	sqlite3_bind_int64(st, 2, x->ev_lo);
	sqlite3_bind_int64(st, 3, x->ev_hi);
	while (sqlite3_step(st) == SQLITE_ROW) {
		struct sp_xthread *n = realloc(x->th, (x->nth + 1) * sizeof(*n));

		if (!n)
			goto out;
		x->th = n;
		x->th[x->nth++] =
			(struct sp_xthread){ (uint64_t)sqlite3_column_int64(st, 0),
					     (uint64_t)sqlite3_column_int64(st, 1), 0, 0, 1 };
	}
events:
	if (fn && each_event(x, &qm,
			     by_time ? "ORDER BY start_ns, wall_ns DESC, seq, pid, tid"
				     : "ORDER BY pid, tid, start_ns, wall_ns DESC, seq",
			     fn, arg, err, sizeof(err)) < 0) {
		fprintf(stderr, "sqlprof export: %s: %s\n", x->path, err);
		goto out;
	}
	ret = 0;
out:
	sqlite3_finalize(st);
	hmap_free(&qm);
	return ret;
}

/* One integer of sql (with ?1 = lo, ?2 = hi bound when present); -1 on
 * error. */
static int64_t one_i64(sqlite3 *db, const char *sql, int64_t lo, int64_t hi, int *ok)
{
	sqlite3_stmt *st = NULL;
	int64_t v = -1;

	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
		*ok = 0;
		return -1;
	}
	if (sqlite3_bind_parameter_count(st) >= 2) {
		sqlite3_bind_int64(st, 1, lo);
		sqlite3_bind_int64(st, 2, hi);
	}
	if (sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_type(st, 0) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return v;
}

int sp_export_window(struct sp_export *x, int64_t since_ns, int64_t until_ns, uint64_t max,
		     char *err, size_t errlen)
{
	int ok = 1;
	int64_t first, cut;

	x->ev_total = (uint64_t)one_i64(x->db, "SELECT count(*) FROM events", 0, 0, &ok);
	first = one_i64(x->db, "SELECT min(start_ns) FROM events", 0, 0, &ok);
	if (!ok) {
		snprintf(err, errlen, "corrupt profile: %s", sqlite3_errmsg(x->db));
		return -1;
	}
	if (first < 0)
		first = 0;
	x->ev_window = 1;
	x->ev_max = max;
	x->ev_lo = since_ns >= 0 && since_ns < INT64_MAX - first ? first + since_ns : INT64_MIN;
	x->ev_hi = until_ns >= 0 && until_ns < INT64_MAX - first ? first + until_ns : INT64_MAX;
	x->ev_in = (uint64_t)one_i64(
		x->db, "SELECT count(*) FROM events WHERE start_ns >= ?1 AND start_ns < ?2",
		x->ev_lo, x->ev_hi, &ok);
	x->ev_kept = x->ev_in;
	if (max && x->ev_in > max) {
		/* the first max in time: those before the start of the one
		 * after them (ties at that start go too) */
		char sql[160];

		snprintf(sql, sizeof(sql),
			 "SELECT start_ns FROM events WHERE start_ns >= ?1 AND start_ns < ?2"
			 " ORDER BY start_ns LIMIT 1 OFFSET %llu",
			 (unsigned long long)max);
		cut = one_i64(x->db, sql, x->ev_lo, x->ev_hi, &ok);
		if (cut >= 0 && cut < x->ev_hi)
			x->ev_hi = cut;
		x->ev_kept = (uint64_t)one_i64(
			x->db, "SELECT count(*) FROM events WHERE start_ns >= ?1 AND start_ns < ?2",
			x->ev_lo, x->ev_hi, &ok);
	}
	if (!ok) {
		snprintf(err, errlen, "corrupt profile: %s", sqlite3_errmsg(x->db));
		return -1;
	}
	return 0;
}

const char *sp_export_window_note(const struct sp_export *x, char *buf, size_t len)
{
	buf[0] = 0;
	if (!x->ev_window || x->ev_kept == x->ev_total)
		return buf;
	if (x->ev_kept < x->ev_in)
		snprintf(buf, len,
			 "%llu of %llu sampled executions exported (of %llu in the window): the "
			 "first in time, --max-events %llu; raise it or narrow --since/--until",
			 (unsigned long long)x->ev_kept, (unsigned long long)x->ev_total,
			 (unsigned long long)x->ev_in, (unsigned long long)x->ev_max);
	else
		snprintf(buf, len, "%llu of %llu sampled executions exported (--since/--until)",
			 (unsigned long long)x->ev_kept, (unsigned long long)x->ev_total);
	return buf;
}

int sp_export_events(struct sp_export *x)
{
	struct hmap qm;
	char err[256];
	int ret = -1;

	if (x->events_loaded)
		return 0;
	if (qmap_build(x, &qm) < 0)
		goto out;
	if (load_events(x, &qm, err, sizeof(err)) < 0) {
		fprintf(stderr, "sqlprof export: %s: %s\n", x->path, err);
		goto out;
	}
	x->events_loaded = 1;
	ret = 0;
out:
	hmap_free(&qm);
	return ret;
}

int sp_export_load(struct sp_export *x, const char *path, const char *const *skip, int weight,
		   char *err, size_t errlen)
{
	struct hmap qm;
	sqlite3_stmt *st;
	size_t i;
	int ret = SP_ERR_INPUT, rc;

	memset(x, 0, sizeof(*x));
	hmap_init(&qm, sizeof(struct qkey), sizeof(size_t));
	x->path = path;
	x->weight = weight;
	x->db = sp_profile_open(path, err, errlen);
	if (!x->db)
		return SP_ERR_INPUT;
	if ((rc = sp_qset_load(x->db, &x->qs, err, errlen)) < 0) {
		ret = rc;
		goto out;
	}
	sp_qset_sort(&x->qs, "total");
	x->qnames = calloc(x->qs.n + 1, sizeof(*x->qnames));
	if (!x->qnames)
		goto nomem;
	if ((rc = sp_attrib_load(x->db, skip, &x->at, err, errlen)) < 0) {
		ret = rc;
		goto out;
	}
	for (i = 0; i < x->qs.n; i++) {
		const struct sp_qrow *r = &x->qs.rows[i];
		struct qkey k = { r->fp_id, r->kind == SP_QK_EXEC };
		size_t *v = hmap_get(&qm, &k, 1, NULL);

		if (!v)
			goto nomem;
		*v = i;
		sp_attrib_estimate(&x->at, r->fp_id, r->kind == SP_QK_EXEC, r->count, r->total_ns,
				   r->self_ns);
	}
	if ((rc = load_xstacks(x, &qm, err, errlen)) < 0) {
		ret = rc;
		goto out;
	}
	x->site_labels = calloc(x->at.nsites + 1, sizeof(*x->site_labels));
	if (!x->site_labels || index_xstacks(x) < 0)
		goto nomem;
	if (build_fstacks(x) < 0)
		goto nomem;
	/* Only the timelines (chrome, perfetto) read the events, through
	 * sp_export_events; the others never hold them (1 M events took
	 * hundreds of MB for an SVG of distinct stacks). The table is checked
	 * here, so that a profile without one is an input error. */
	if (sqlite3_prepare_v2(x->db, EVENTS_SQL, -1, &st, NULL) != SQLITE_OK) {
		snprintf(err, errlen, "corrupt profile: %s", sqlite3_errmsg(x->db));
		goto out;
	}
	sqlite3_finalize(st);
	if (sqlite3_prepare_v2(x->db,
			       "SELECT CAST(value AS INTEGER) FROM meta WHERE key='events_dropped'",
			       -1, &st, NULL) == SQLITE_OK) {
		if (sqlite3_step(st) == SQLITE_ROW)
			x->events_dropped = u64col(st, 0);
		sqlite3_finalize(st);
	}
	ret = 0;
	goto out;
nomem:
	ret = SP_ERR_NOMEM;
	snprintf(err, errlen, "out of memory");
out:
	hmap_free(&qm);
	return ret;
}

void sp_export_free(struct sp_export *x)
{
	size_t i;

	for (i = 0; i < x->nfs; i++)
		free(x->fs[i].fr);
	free(x->fs);
	free(x->xs);
	free(x->ev);
	free(x->th);
	free(x->qnames);
	free(x->site_labels);
	free(x->xs_of);
	free(x->xs_first);
	for (i = 0; i < x->nstrs; i++)
		free(x->strs[i]);
	free(x->strs);
	sp_attrib_free(&x->at);
	sp_qset_free(&x->qs);
	if (x->db)
		sqlite3_close(x->db);
	memset(x, 0, sizeof(*x));
}
