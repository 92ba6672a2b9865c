/* SPDX-License-Identifier: MIT */
/*
 * report-table.c - `sqlprof report`'s table (--by sql): the header lines, one row per
 * query with its sites, plans and failed executions, and the helpers the
 * other report printers share (sites, shortened SQL, deaths). No CSV or
 * JSON here (report-csv.c, report-json.c); --by function/site is
 * report-group.c.
 */

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attrib.h"
#include "doctor.h"
#include "fit.h"
#include "query.h"
#include "report.h"
#include "util.h"

/* "s" unless n is 1: "1 sample", "2 samples" */
const char *sp_rep_pl(double n)
{
	return n >= 0.5 && n < 1.5 ? "" : "s";
}

const char *sp_rep_root; /* the report's common source root (--full-paths: NULL) */

void sp_rep_stack(const struct sp_attrib *a, uint64_t pid, uint64_t stack_id, const char *indent)
{
	const struct sp_stk *sk = sp_attrib_stack(a, pid, stack_id);
	uint32_t i, k;

	if (!sk) {
		printf("%s(stack not recorded)\n", indent);
		return;
	}
	for (i = 0, k = 0; i < sk->nframes; i++) {
		const struct sp_frame *f = &sk->frames[i];
		if (sp_is_profiler_module(f->module))
			continue; /* our shims: never a frame of the program */
		char w[1024];

		printf("%s#%-2u %s%s [%s]\n", indent, k++, f->inlined ? "(inlined) " : "",
		       sp_where(w, sizeof(w), f->function, sp_path_rel(f->file, sp_rep_root),
				f->line, f->module, f->offset),
		       sp_basename(f->module));
	}
}

static const char *site_text(char *w, size_t len, const struct sp_attrib *a, int site);

void sp_rep_site_name(const struct sp_attrib *a, int site)
{
	char w[1024];

	fputs(site_text(w, sizeof(w), a, site), stdout);
}

/* 1 when every execution of query r has its stack: the site figures are
 * counts, not estimates (--rate 1 with nothing lost). */
int sp_rep_sites_exact(const struct sp_attrib *a, const struct sp_qrow *r)
{
	size_t j, n;
	const size_t *ix = sp_attrib_query_sites(a, r->fp_id, r->kind == SP_QK_EXEC, &n);
	uint64_t samples = 0;

	for (j = 0; j < n; j++)
		samples += a->qs[ix[j]].samples;
	return n && samples == r->count;
}

/* n in decimal at p; returns the end (no NUL) */
static char *put_u64(char *p, uint64_t n)
{
	char d[24], *q = d + sizeof(d);

	do
		*--q = (char)('0' + n % 10);
	while ((n /= 10));
	memcpy(p, q, (size_t)(d + sizeof(d) - q));
	return p + (d + sizeof(d) - q);
}

/* s at p; returns the end (no NUL) */
static char *put(char *p, const char *s)
{
	size_t n = strlen(s);

	memcpy(p, s, n);
	return p + n;
}

/* "%.0f" of v, without printf's floating point for a whole number (most
 * sites' counts) */
static const char *fmt_count(char *b, size_t len, double v)
{
	if (!(v >= 0 && !signbit(v) && v < 9007199254740992.0 && v == (double)(uint64_t)v) ||
	    len < 24) {
		snprintf(b, len, "%.0f", v);
		return b;
	}
	*put_u64(b, (uint64_t)v) = 0;
	return b;
}

/* The sites' labels (sp_rep_site_name's text), made once a site: the
 * table printed one per line of 370,000 at 200,000 fingerprints, each
 * by snprintf. */
struct site_labels {
	char **l; /* [site + 1]: index 0 for unattributed */
	size_t n;
};

/* sp_rep_site_name's text of site into w (len bytes) */
static const char *site_text(char *w, size_t len, const struct sp_attrib *a, int site)
{
	const struct sp_site *st = site >= 0 ? &a->sites[site] : NULL;

	if (!st)
		snprintf(w, len, "(unattributed)");
	else /* no source file: where in which module */
		sp_where(w, len, st->function, sp_path_rel(st->file, sp_rep_root), st->line,
			 st->module, st->offset);
	return w;
}

/* site's label, kept in sl (into w, 1024 bytes, when it cannot be) */
static const char *site_label(struct site_labels *sl, const struct sp_attrib *a, int site, char *w)
{
	size_t k = (size_t)(site + 1);

	if (site >= -1 && !sl->l && (sl->l = calloc(a->nsites + 1, sizeof(*sl->l))))
		sl->n = a->nsites + 1;
	if (site < -1 || k >= sl->n)
		return site_text(w, 1024, a, site);
	if (!sl->l[k] && !(sl->l[k] = strdup(site_text(w, 1024, a, site))))
		return w;
	return sl->l[k];
}

static void site_labels_free(struct site_labels *sl)
{
	for (size_t i = 0; sl->l && i < sl->n; i++)
		free(sl->l[i]);
	free(sl->l);
}

/* One site's line of the table, in one write: "-> N execs, T at SITE [S
 * samples]" (counts, or "~" estimates unless exact) */
static void print_site_line(const struct sp_attrib *a, const struct sp_qsite *q, int exact,
			    struct site_labels *sl)
{
	char line[64], b[32], w[1024], *p = line;
	const char *label = site_label(sl, a, q->site, w);

	p = put(p, exact ? "           -> " : "           -> ~");
	p = put(p, fmt_count(b, sizeof(b), q->est_count));
	p = put(p, exact ? " exec" : " (est.) exec");
	p = put(p, sp_rep_pl(q->est_count));
	p = put(p, exact ? ", " : ", ~");
	p = put(p, sp_fmt_ns(b, sizeof(b), q->est_total_ns));
	p = put(p, " at ");
	fwrite(line, 1, (size_t)(p - line), stdout);
	fputs(label, stdout);
	p = put(line, " [");
	p = put_u64(p, q->samples);
	p = put(p, " sample");
	p = put(p, sp_rep_pl((double)q->samples));
	p = put(p, "]\n");
	fwrite(line, 1, (size_t)(p - line), stdout);
}

static void print_table_sites(const struct sp_attrib *a, const struct sp_qrow *r, int stacks,
			      struct site_labels *sl)
{
	size_t j, n;
	const size_t *ix = sp_attrib_query_sites(a, r->fp_id, r->kind == SP_QK_EXEC, &n);
	int exact = sp_rep_sites_exact(a, r);

	for (j = 0; j < n; j++) {
		const struct sp_qsite *q = &a->qs[ix[j]];

		/* exact: every execution sampled (sp_rep_sites_exact), or this site's
		 * count came whole from its callers' exact counts */
		print_site_line(a, q, exact || sp_qsite_exact(q, r->count), sl);
		if (q->site >= 0) { /* issue 26: the caller is on another thread */
			const struct sp_frame *w =
				sp_stk_worker(sp_attrib_stack(a, q->pid, q->stack_id));
			char b2[1024];

			if (w)
				printf("%13s note: on a worker thread (%s) with no frame of the program's "
				       "own: its caller is on another thread, not followed "
				       "(docs/attribution.md, Worker threads)\n",
				       "",
				       sp_where(b2, sizeof(b2), w->function,
						sp_path_rel(w->file, sp_rep_root), w->line,
						w->module, w->offset));
		}
		if (stacks)
			sp_rep_stack(a, q->pid, q->stack_id, "                 ");
	}
}

int sp_rep_agent;

static void print_process_end(
	const struct sp_qset *qs); /* the profile is an agent's snapshot (meta agent_updated) */

/* --plans: the query's plan as a tree, as the sqlite3 shell draws it. */
static void print_plan(const struct sp_qrow *r)
{
	char *tree = sp_plan_tree(r->plan), *line, *nl;

	printf("%10s plan%s:\n", "", r->nplans > 1 ? " (changed during the run)" : "");
	for (line = tree; line && *line; line = nl + 1) {
		nl = strchr(line, '\n');
		if (!nl)
			break;
		*nl = 0;
		sp_term_clean(line);
		printf("%14s%s\n", "", line);
	}
	free(tree);
}

/* The byte index that keeps at most cols columns of sql (n bytes), on
 * UTF-8 boundaries. */
static size_t keep_cols(const char *sql, size_t n, size_t cols)
{
	size_t i, w;

	for (i = 0, w = 0; i < n && w < cols; w++)
		for (i++; i < n && ((unsigned char)sql[i] & 0xc0) == 0x80; i++)
			;
	return i;
}

/* -w N without a terminal to fit: the first N bytes of sql and "... (M
 * more bytes)", unless M is no more than that note itself (then sql
 * whole: a text 1 byte too long is not cut to say "1 more bytes").
 * Malloc'd; NULL on ENOMEM. */
char *sp_rep_shorten(const char *sql, size_t max)
{
	size_t n = strlen(sql), i = max;
	char tail[48], *out;

	if (n <= max)
		return strdup(sql);
	while (i > 0 && ((unsigned char)sql[i] & 0xC0) == 0x80) /* a UTF-8 boundary */
		i--;
	if ((size_t)snprintf(tail, sizeof(tail), "... (%zu more bytes)", n - i) >= n - i)
		return strdup(sql);
	out = malloc(i + sizeof(tail));
	if (!out)
		return NULL;
	memcpy(out, sql, i);
	strcpy(out + i, tail);
	return out;
}

/* SQL shortened to at most cols columns, tail included: "... (N more
 * bytes)" when the count takes at most a third of the room and what it
 * stands for is longer than itself, else "..." (which always stands for
 * 4 bytes or more: a text a byte too long is never cut by one byte to say
 * so). Malloc'd; NULL on ENOMEM. */
static char *shorten_cols(const char *sql, size_t cols)
{
	size_t n = strlen(sql), i = 0, t;
	char tail[48] = "...", *out;

	if (sp_fit_cols(sql, n) <= cols)
		return strdup(sql);
	for (t = strlen("... ( more bytes)") + 1; t < strlen("... ( more bytes)") + 21; t++) {
		/* t: the tail's length with a count of t - 17 digits */
		if (3 * t > cols)
			break;
		i = keep_cols(sql, n, cols - t);
		if ((size_t)snprintf(tail, sizeof(tail), "... (%zu more bytes)", n - i) == t &&
		    n - i > t)
			break;
		snprintf(tail, sizeof(tail), "...");
	}
	if (!strcmp(tail, "..."))
		i = keep_cols(sql, n, cols > 3 ? cols - 3 : 0);
	out = malloc(i + sizeof(tail));
	if (!out)
		return NULL;
	memcpy(out, sql, i);
	strcpy(out + i, tail);
	return out;
}

/* C_SORT: the --sort key's column when the table has none (self, errors,
 * vm), last before SQL */
enum { C_COUNT, C_TOTAL, C_PREP, C_MEAN, C_P50, C_P95, C_P99, C_MAX, C_ROWS, C_SORT, NCOL };

/* The column of sort key k: C_SORT for self, errors and vm. */
static int sort_col(const char *k)
{
	static const char *const keys[] = { "count", "total", "prepare", "mean", "p50",
					    "p95",   "p99",   "max",     "rows" };

	for (int c = 0; c < C_SORT; c++)
		if (!strcmp(k, keys[c]))
			return c;
	return C_SORT;
}

/* sp_sqlite_own of each row of qs, in one pass with a prefetch of the
 * fingerprints a few rows ahead (the table asked three times a row, each
 * a cache miss at 186,000 queries). Malloc'd; NULL on ENOMEM. */
static unsigned char *own_flags(const struct sp_qset *qs)
{
	unsigned char *own = malloc(qs->n ? qs->n : 1);

	for (size_t i = 0; own && i < qs->n; i++) {
		if (i + 8 < qs->n && qs->rows[i + 8].fingerprint)
			__builtin_prefetch(qs->rows[i + 8].fingerprint);
		own[i] = (unsigned char)sp_sqlite_own(&qs->rows[i]);
	}
	return own;
}

/* Row i of qs is SQLite's own work (own: own_flags, or NULL) */
static int is_own(const unsigned char *own, const struct sp_qset *qs, size_t i)
{
	return own ? own[i] : sp_sqlite_own(&qs->rows[i]);
}

/* sp_rep_own_sum, with own_flags' answers (or NULL) */
static struct sp_rep_own own_sum(const struct sp_qset *qs, const unsigned char *own)
{
	struct sp_rep_own s = { 0 };

	for (size_t i = 0; i < qs->n; i++)
		if (is_own(own, qs, i)) {
			s.queries++;
			s.count += qs->rows[i].count;
			s.self_ns += qs->rows[i].self_ns;
			s.total_ns += qs->rows[i].total_ns;
			s.prepare_ns += qs->rows[i].prepare_ns;
		}
	return s;
}

struct sp_rep_own sp_rep_own_sum(const struct sp_qset *qs)
{
	return own_sum(qs, NULL);
}

/* The table's header lines: totals (SQLite's own work among them), losses,
 * plans, command, run, window and the paths' root. */
static void print_header(const struct sp_qset *qs, const struct report_opts *o,
			 const struct sp_attrib *a, const struct sp_rep_own *own_)
{
	struct sp_rep_own own = *own_;
	uint64_t total = 0, others = qs->processes - qs->sqlite_processes;
	char b[2][32];
	size_t i;

	for (i = 0; i < qs->n; i++)
		total += qs->rows[i].self_ns;
	printf("# %llu execution%s of %zu quer%s in %llu process%s",
	       (unsigned long long)qs->executions, sp_rep_pl((double)qs->executions), qs->n,
	       qs->n == 1 ? "y" : "ies", (unsigned long long)qs->sqlite_processes,
	       qs->sqlite_processes == 1 ? "" : "es");
	if (qs->processes > qs->sqlite_processes)
		printf(" (and %llu that ran no SQLite)", (unsigned long long)others);
	printf("; db time %s (self) + prepare %s", sp_fmt_ns(b[0], sizeof(b[0]), (double)total),
	       sp_fmt_ns(b[1], sizeof(b[1]), (double)sp_qset_prepare_ns(qs)));
	if (sp_qset_schema_loads(qs))
		printf("; %llu schema load%s (connections opened)",
		       (unsigned long long)sp_qset_schema_loads(qs),
		       sp_rep_pl((double)sp_qset_schema_loads(qs)));
	printf("\n");
	/* totals are exact whatever was lost: only sampled events travel */
	printf("# events lost %llu; unattributed ~%.0f (%llu sample%s)",
	       (unsigned long long)qs->lost, a->unattributed_est,
	       (unsigned long long)a->unattributed_samples,
	       sp_rep_pl((double)a->unattributed_samples));
	if (qs->events_dropped)
		printf("; %llu sampled execution%s left out of the timeline (--max-events)",
		       (unsigned long long)qs->events_dropped,
		       sp_rep_pl((double)qs->events_dropped));
	if (qs->clock_clamped)
		printf("; %llu execution%s' times clamped (the clock went back)",
		       (unsigned long long)qs->clock_clamped, sp_rep_pl((double)qs->clock_clamped));
	if (qs->texts_folded)
		printf("; %llu text%s folded into their fingerprint (past SQLPROF_TEXTS_PER_SHAPE "
		       "texts of one; totals exact)",
		       (unsigned long long)qs->texts_folded, sp_rep_pl((double)qs->texts_folded));
	if (qs->untracked)
		printf("; untracked %llu", (unsigned long long)qs->untracked);
	if (qs->bad_messages)
		printf("; bad messages %llu", (unsigned long long)qs->bad_messages);
	if (qs->statistics_lost)
		printf("; the totals of %llu process%s lost (statistics not received: the "
		       "collector was out of descriptors or memory)",
		       (unsigned long long)qs->statistics_lost,
		       qs->statistics_lost == 1 ? "" : "es");
	if (qs->descriptors_lost)
		printf("; %llu descriptor%s lost", (unsigned long long)qs->descriptors_lost,
		       qs->descriptors_lost == 1 ? "" : "s");
	if (qs->executions_missing)
		printf("; %llu execution%s missing (the processes said they ran them)",
		       (unsigned long long)qs->executions_missing,
		       qs->executions_missing == 1 ? "" : "s");
	if (qs->descriptor_waits)
		printf("; the collector ran out of descriptors (processes waited to connect %llu "
		       "time%s: executions may be missing; raise its RLIMIT_NOFILE)",
		       (unsigned long long)qs->descriptor_waits,
		       qs->descriptor_waits == 1 ? "" : "s");
	if (qs->unreported)
		printf("; %llu process%s could not connect (%llu missing)",
		       (unsigned long long)qs->unreported, qs->unreported == 1 ? "" : "es",
		       (unsigned long long)qs->unreported_missing);
	printf("\n");
	if (qs->plans_bound) { /* the bound that left queries without a plan */
		char *why = strdup(qs->plans_bound);

		if (why) {
			sp_term_clean(why);
			printf("# plans: bound reached in %s; %llu of %zu quer%s have no plan\n",
			       why, (unsigned long long)qs->no_plan, qs->n,
			       qs->n == 1 ? "y" : "ies");
			free(why);
		}
	}
	if (qs->command)
		printf("# command: %s\n", qs->command);
	if (qs->window.on)
		sp_window_print(stdout, "window", &qs->window);
	print_process_end(qs);
	if (own.queries) /* in the totals above */
		printf("# of which SQLite's own work (schema loads, statements without SQL text):"
		       " %llu execution%s, %s db time + prepare %s (in the totals above; listed"
		       " apart, last)\n",
		       (unsigned long long)own.count, sp_rep_pl((double)own.count),
		       sp_fmt_ns(b[0], sizeof(b[0]), (double)own.self_ns),
		       sp_fmt_ns(b[1], sizeof(b[1]), (double)own.prepare_ns));
	if (o->root)
		printf("# paths relative to %s (--full-paths)\n", o->root);
}

/* The C_SORT column's value of r for sort key k. */
static const char *sort_value(char *b, size_t len, const struct sp_qrow *r, const char *k)
{
	if (!strcmp(k, "self"))
		return sp_fmt_ns(b, len, (double)r->self_ns);
	if (len < 24)
		snprintf(b, len, "%llu",
			 (unsigned long long)(!strcmp(k, "errors") ? r->errors : r->vm_steps));
	else
		*put_u64(b, !strcmp(k, "errors") ? r->errors : r->vm_steps) = 0;
	return b;
}

/* The widths of the table's columns and which are shown: fixed (10),
 * or with o->fit fitted to the terminal from the rows, with columns left
 * out (and said so) when the SQL would get fewer than 32 columns (or its
 * own length, if shorter). Returns the room left for the SQL (with fit). */
static size_t fit_columns(const struct sp_qset *qs, const struct report_opts *o,
			  const char *const *head, size_t *w, int *shown)
{
	/* what goes first when the terminal is narrow: the percentiles, then
	 * rows, max, prepare and mean; the columns keep their order at every
	 * width, and the --sort key's column is never left out */
	static const int drop_order[] = { C_P50, C_P95, C_P99, C_ROWS, C_MAX, C_PREP, C_MEAN };
	size_t i, c, k, ndrop = 0, room = 0, longest = 0, used;
	int dropped[NCOL], keep = sort_col(o->sort);

	for (c = 0; c < NCOL; c++) {
		w[c] = o->fit ? strlen(head[c]) : 10;
		shown[c] = c != C_SORT || keep == C_SORT;
		dropped[c] = 0;
	}
	if (!o->fit)
		return 0;
	for (i = 0; i < qs->n; i++) {
		const struct sp_qrow *r = &qs->rows[i];
		size_t l[NCOL];
		char num[32];

		l[C_COUNT] =
			(size_t)snprintf(num, sizeof(num), "%llu", (unsigned long long)r->count);
		l[C_TOTAL] = strlen(sp_fmt_ns(num, 32, (double)r->total_ns));
		l[C_PREP] = strlen(sp_fmt_ns(num, 32, (double)r->prepare_ns));
		l[C_MEAN] = strlen(sp_fmt_ns(num, 32, r->mean_ns));
		l[C_P50] = strlen(sp_fmt_ns(num, 32, (double)r->p50_ns));
		l[C_P95] = strlen(sp_fmt_ns(num, 32, (double)r->p95_ns));
		l[C_P99] = strlen(sp_fmt_ns(num, 32, (double)r->p99_ns));
		l[C_MAX] = strlen(sp_fmt_ns(num, 32, (double)r->max_ns));
		l[C_ROWS] = (size_t)snprintf(num, sizeof(num), "%llu", (unsigned long long)r->rows);
		l[C_SORT] = strlen(sort_value(num, sizeof(num), r, o->sort));
		for (c = 0; c < NCOL; c++)
			if (l[c] > w[c])
				w[c] = l[c];
		l[0] = sp_fit_cols(r->fingerprint, strlen(r->fingerprint)) +
		       (r->kind != SP_QK_EXEC ? 0 : 7);
		if (l[0] > longest)
			longest = l[0];
	}
	for (;;) {
		used = 2; /* before SQL */
		for (c = 0; c < NCOL; c++)
			used += shown[c] ? w[c] + 1 : 0;
		room = o->fit > used ? o->fit - used : 0;
		while (ndrop < sizeof(drop_order) / sizeof(drop_order[0]) &&
		       drop_order[ndrop] == keep)
			ndrop++;
		if (room >= (longest < 32 ? longest : 32) ||
		    ndrop == sizeof(drop_order) / sizeof(drop_order[0]))
			break;
		shown[drop_order[ndrop]] = 0;
		dropped[drop_order[ndrop++]] = 1;
	}
	if (room < 8)
		room = 8; /* the wrap stream takes over */
	/* the columns left out, in the table's order */
	for (c = 0, k = 0; c < NCOL; c++)
		if (dropped[c] && !k++)
			printf("# left out to fit %zu columns:", o->fit);
	for (c = 0; c < NCOL; c++)
		if (dropped[c])
			printf(" %s", head[c]);
	if (k)
		printf(" (--format json has them)\n");
	return room;
}

/* The cells of a row, each right-aligned in its column (w) and one space
 * apart, in one write (ten printf calls a row were a tenth of report's
 * instructions at 20,000 queries) */
static void print_cells(char b[][32], const size_t *w, const int *shown)
{
	char line[NCOL * 64], *p = line;

	for (size_t c = 0; c < NCOL; c++) {
		size_t n = strlen(b[c]), pad = w[c] > n ? w[c] - n : 0;

		if (!shown[c])
			continue;
		if (pad + n + 1 > sizeof(line) - (size_t)(p - line) - 1) {
			*p = 0;
			fputs(line, stdout);
			printf("%s%*s", c ? " " : "", (int)w[c], b[c]);
			p = line;
			continue;
		}
		if (c)
			*p++ = ' ';
		memset(p, ' ', pad);
		memcpy(p + pad, b[c], n);
		p += pad + n;
	}
	*p = 0;
	fputs(line, stdout);
}

/* One query's line of the table (columns w, those shown; room for the
 * SQL when fitted), then its sites and, with --plans, its plan. */
static void print_row(const struct sp_qrow *r, const struct report_opts *o, const size_t *w,
		      const int *shown, size_t room, const struct sp_attrib *a,
		      struct site_labels *sl)
{
	int exec = r->kind == SP_QK_EXEC;
	size_t sqlw = o->width;
	char b[NCOL][32], *sql;

	if (o->fit && (!sqlw || sqlw > room - (exec ? 7 : 0)))
		sqlw = room > (exec ? 15u : 8u) ? room - (exec ? 7 : 0) : 8;
	sql = !sqlw    ? strdup(r->fingerprint)
	      : o->fit ? shorten_cols(r->fingerprint, sqlw)
		       : sp_rep_shorten(r->fingerprint, sqlw);
	if (!sql)
		return;
	sp_term_clean(sql);
	sp_fmt_ns(b[C_TOTAL], 32, (double)r->total_ns);
	sp_fmt_ns(b[C_PREP], 32, (double)r->prepare_ns);
	sp_fmt_ns(b[C_MEAN], 32, r->mean_ns);
	sp_fmt_ns(b[C_P50], 32, (double)r->p50_ns);
	sp_fmt_ns(b[C_P95], 32, (double)r->p95_ns);
	sp_fmt_ns(b[C_P99], 32, (double)r->p99_ns);
	sp_fmt_ns(b[C_MAX], 32, (double)r->max_ns);
	*put_u64(b[C_COUNT], r->count) = 0;
	*put_u64(b[C_ROWS], r->rows) = 0;
	sort_value(b[C_SORT], 32, r, o->sort);
	print_cells(b, w, shown);
	fputs(exec ? "  [exec] " : "  ", stdout);
	fputs(sql, stdout);
	putchar('\n');
	free(sql);
	print_table_sites(a, r, o->stacks, sl);
	if (o->plans && r->plan) {
		print_plan(r);
	} else if (o->plans && r->plan_gap) {
		char *why = strdup(r->plan_gap);

		if (why) {
			sp_term_clean(why);
			printf("%10s no plan: %s\n", "", why);
			free(why);
		}
	}
}

void sp_rep_table(const struct sp_qset *qs, const struct report_opts *o, size_t n,
		  const struct sp_attrib *a)
{
	static const char *const head_fixed[NCOL] = { "COUNT", "TOTAL", "PREPARE", "MEAN", "P50",
						      "P95",   "P99",   "MAX",     "ROWS", "" };
	const char *head[NCOL];
	size_t c, w[NCOL], room, k, nprog = 0, nown = 0;
	int shown[NCOL], section = 0;
	unsigned char *isown = own_flags(qs);
	struct sp_rep_own own = own_sum(qs, isown);
	struct site_labels sl = { 0 };

	memcpy(head, head_fixed, sizeof(head));
	head[C_SORT] = !strcmp(o->sort, "self")     ? "SELF"
		       : !strcmp(o->sort, "errors") ? "ERRORS"
						    : "VM_STEPS";
	print_header(qs, o, a, &own);
	room = fit_columns(qs, o, head, w, shown);
	for (c = 0; c < NCOL; c++)
		if (shown[c])
			printf("%s%*s", c ? " " : "", (int)w[c], head[c]);
	printf("  SQL\n");
	/* the program's queries (--top of them), then SQLite's own */
	for (k = 0; k < 2 * qs->n; k++) {
		const struct sp_qrow *r = &qs->rows[k % qs->n];

		if (is_own(isown, qs, k % qs->n) != (k >= qs->n) ||
		    (k < qs->n ? nprog++ : nown++) >= n)
			continue;
		if (k >= qs->n && !section++)
			printf("# SQLite's own work (not the program's queries; check does not judge"
			       " them): %llu quer%s\n",
			       (unsigned long long)own.queries, own.queries == 1 ? "y" : "ies");
		print_row(r, o, w, shown, room, a, &sl);
	}
	nown = nprog > n ? nprog - n : 0;
	nown += own.queries > n ? (size_t)own.queries - n : 0;
	if (nown)
		printf("# ... %zu more quer%s (--top)\n", nown, nown == 1 ? "y" : "ies");
	site_labels_free(&sl);
	free(isown);
}

int sp_rep_next_death(const char **p, struct sp_rep_death *d)
{
	const char *s = *p, *nl;
	char line[1024];
	size_t n;
	char *f[4], *q;
	int k = 0;

	if (!s || !*s)
		return 0;
	nl = strchr(s, '\n');
	n = nl ? (size_t)(nl - s) : strlen(s);
	*p = nl ? nl + 1 : s + n;
	if (n >= sizeof(line))
		n = sizeof(line) - 1;
	memcpy(line, s, n);
	line[n] = 0;
	for (q = line, f[k++] = q; *q && k < 4; q++)
		if (*q == '\t') {
			*q = 0;
			f[k++] = q + 1;
		}
	if (k < 4)
		return sp_rep_next_death(p, d); /* damaged: skipped */
	d->pid = strtoll(f[0], NULL, 10);
	snprintf(d->exe, sizeof(d->exe), "%s", f[1]);
	d->running = (unsigned)strtoul(f[2], NULL, 10);
	snprintf(d->sql, sizeof(d->sql), "%s", f[3]);
	return 1;
}

/* The run's outcome under the header: exit status (and the signal that
 * killed the command), duration, and the processes that died with what
 * they were running. */
static void print_process_end(const struct sp_qset *qs)
{
	const char *p = qs->died;
	struct sp_rep_death d;

	if (sp_rep_agent) { /* nothing exited: the agent wrote what it had so far */
		if (qs->duration_ns >= 0)
			printf("# agent snapshot covering %.2f s (sqlprof agent; its programs were"
			       " still running)\n",
			       qs->duration_ns / 1e9);
		else
			printf("# agent snapshot (sqlprof agent; its programs were still running)\n");
	} else if (qs->exit_status >= 0 || qs->duration_ns >= 0) {
		printf("# run:");
		if (qs->runs > 1) /* record --repeat: the last run's status, all runs' time */
			printf(" %llu runs (--repeat), the last:", (unsigned long long)qs->runs);
		if (qs->exit_status > 128 && qs->exit_status < 128 + 65)
			printf(" exit status %lld (killed by signal %lld, %s)",
			       (long long)qs->exit_status, (long long)qs->exit_status - 128,
			       strsignal((int)(qs->exit_status - 128)));
		else if (qs->exit_status >= 0)
			printf(" exit status %lld", (long long)qs->exit_status);
		if (qs->duration_ns >= 0)
			printf("%s %.2f s", qs->exit_status >= 0 ? "," : "", qs->duration_ns / 1e9);
		printf("\n");
	}
	while (sp_rep_next_death(&p, &d)) {
		printf("# died: process %lld (%s) ended without exiting (a signal or a crash)",
		       d.pid, d.exe);
		if (d.running)
			printf(", running %u execution%s of: %s", d.running,
			       d.running == 1 ? "" : "s", d.sql[0] ? d.sql : "<sql text lost>");
		printf("\n");
	}
}

/* Failed executions, with their error text and the stack at the failure. */
void sp_rep_errors(const struct sp_failures *fs, const struct sp_attrib *a)
{
	size_t i;

	for (i = 0; i < fs->n; i++) {
		const struct sp_failure *x = &fs->f[i];
		char *sql = sp_rep_shorten(x->fingerprint, 100);

		if (!i)
			printf("\n# failed executions\n");
		if (sql)
			sp_term_clean(sql);
		printf("%10llu x rc=%d %s: %s%s\n", (unsigned long long)x->count, x->rc, x->message,
		       (x->kind != SP_QK_EXEC) ? "" : "[exec] ", sql ? sql : "?");
		free(sql);
		if (x->stack_id)
			sp_rep_stack(a, x->pid, x->stack_id, "             ");
	}
}
