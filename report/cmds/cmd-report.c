/* SPDX-License-Identifier: MIT */
/*
 * cmd-report.c - `sqlprof report`: per-query totals from a profile, as a
 * table, CSV or JSON. One printer per format; loading is in query.c.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attrib.h"
#include "cmds.h"
#include "doctor.h"
#include "fit.h"
#include "profile.h"
#include "query.h"
#include "untrusted.h"
#include "util.h"

#define MAX_SKIP 64
#define SORT_KEYS "total, count, mean, p50, p95, p99, max, rows, self, errors, vm, prepare"

struct report_opts {
	const char *sort;
	const char *format;
	const char *by;
	uint64_t top;
	size_t width;
	int stacks;
	int plans;
	int no_doctor;
	int csv_table;    /* --format csv prints: 0 queries, 1 --findings, 2 --failures */
	int width_set;    /* -w given */
	int full_paths;   /* --full-paths */
	size_t fit;       /* columns to fit the table in; 0: no limit */
	const char *root; /* common directory stripped from source paths */
	const char *skip[MAX_SKIP + 1];
	int nskip;
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: sqlprof report [OPTIONS] [PROFILE]\n"
		"\n"
		"Print one row per query fingerprint from PROFILE (default " SP_PROFILE_DEFAULT
		").\n"
		"\n"
		"  -s, --sort KEY       total (default), count, mean, p50, p95, p99, max, rows,\n"
		"                       self, errors, vm, prepare (time spent preparing); self,\n"
		"                       errors and vm add their column (SELF, ERRORS, VM_STEPS)\n"
		"  -n, --top N          only the first N rows\n"
		"  -f, --format FMT     table (default), csv, json\n"
		"  -w, --width N        shorten SQL to N bytes in the table (default 80, 0 = full;\n"
		"                       never by fewer bytes than the \"(M more bytes)\" note);\n"
		"                       on a terminal (or with COLUMNS set) the table is also\n"
		"                       fitted to its width: SQL first, then P50, P95, P99, ROWS,\n"
		"                       MAX, PREPARE and MEAN left out (never the --sort key's)\n"
		"      --full-paths     source paths as recorded, not relative to their common\n"
		"                       directory\n"
		"  -b, --by WHAT        sql (default), function or site (function + file:line)\n"
		"      --skip PATTERN   never attribute to frames whose function or module (or a\n"
		"                       Python frame's file) matches PATTERN (fnmatch;\n"
		"                       repeatable), e.g. your database wrapper\n"
		"      --all-frames     the site may be a frame in an installed library or the\n"
		"                       system's (by default the first frame of your own code\n"
		"                       is, when the stack has one)\n"
		"      --stacks         print the full symbolized stack of every site\n"
		"      --debug-dir DIRS symbolize the frames the profile left unknown again,\n"
		"                       with debug files from DIRS (colon-separated; each\n"
		"                       DIR/.build-id/xx/yyyy.debug or .gnu_debuglink name)\n"
		"      --plans          print each query's plan (EXPLAIN QUERY PLAN)\n"
		"      --no-doctor      leave out the query doctor's findings (N+1, re-prepares,\n"
		"                       full scans, temp B-trees, automatic indexes)\n"
		"      --findings       with --format csv: print the doctor's findings instead\n"
		"                       of the queries (JSON always has \"findings\")\n"
		"      --failures       with --format csv: print the failed executions instead\n"
		"                       of the queries (JSON always has \"failures\")\n"
		"      --since T        only the intervals that start at or after T (a profile\n"
		"                       of `sqlprof agent`; see Time windows in sqlprof(1)): T is\n"
		"                       2026-12-01T14:00:00 (local), ...Z (UTC), @UNIX_SECONDS,\n"
		"                       or -DURATION before the profile's last interval end\n"
		"      --until T        only the intervals that start before T\n"
		"      --last DURATION  the intervals of the last DURATION (30s, 5m, 2h, 1d)\n"
		"                       before the profile's last interval end\n"
		"  -h, --help           this text\n"
		"\n"
		"examples:\n"
		"  sqlprof report --top 10\n"
		"  sqlprof report --last 5m /var/lib/sqlprof/app.db\n"
		"  sqlprof report --sort p99 --format json run1.db\n"
		"  sqlprof report --by site --skip 'db_*' --skip libmywrapper.so\n");
}

/* "s" unless n is 1: "1 sample", "2 samples" */
static const char *pl(double n)
{
	return n >= 0.5 && n < 1.5 ? "" : "s";
}

static int cmp_qsite(const void *pa, const void *pb)
{
	const struct sp_qsite *a = pa, *b = pb;

	return a->est_count < b->est_count ? 1 : a->est_count > b->est_count ? -1 : 0;
}

static const char *root_; /* the report's common source root (--full-paths: NULL) */

static void print_stack(const struct sp_attrib *a, uint64_t pid, uint64_t stack_id,
			const char *indent)
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
		       sp_where(w, sizeof(w), f->function, sp_path_rel(f->file, root_), f->line,
				f->module, f->offset),
		       sp_basename(f->module));
	}
}

static void print_site_name(const struct sp_attrib *a, int site)
{
	const struct sp_site *st = site >= 0 ? &a->sites[site] : NULL;
	char w[1024];

	if (!st)
		printf("(unattributed)");
	else /* no source file: where in which module */
		printf("%s", sp_where(w, sizeof(w), st->function, sp_path_rel(st->file, root_),
				      st->line, st->module, st->offset));
}

/* 1 when every execution of query r has its stack: the site figures are
 * counts, not estimates (--rate 1 with nothing lost). */
static int sites_exact(const struct sp_attrib *a, const struct sp_qrow *r)
{
	size_t j, n;
	const size_t *ix = sp_attrib_query_sites(a, r->fp_id, r->kind == SP_QK_EXEC, &n);
	uint64_t samples = 0;

	for (j = 0; j < n; j++)
		samples += a->qs[ix[j]].samples;
	return n && samples == r->count;
}

static void print_table_sites(const struct sp_attrib *a, const struct sp_qrow *r, int stacks)
{
	size_t j, n;
	const size_t *ix = sp_attrib_query_sites(a, r->fp_id, r->kind == SP_QK_EXEC, &n);
	int exact = sites_exact(a, r);

	for (j = 0; j < n; j++) {
		const struct sp_qsite *q = &a->qs[ix[j]];
		char b[32];

		/* exact: every execution sampled (sites_exact), or this site's
		 * count came whole from its callers' exact counts */
		if (exact || sp_qsite_exact(q, r->count))
			printf("%10s -> %.0f exec%s, %s at ", "", q->est_count, pl(q->est_count),
			       sp_fmt_ns(b, sizeof(b), q->est_total_ns));
		else
			printf("%10s -> ~%.0f (est.) exec%s, ~%s at ", "", q->est_count,
			       pl(q->est_count), sp_fmt_ns(b, sizeof(b), q->est_total_ns));
		print_site_name(a, q->site);
		printf(" [%llu sample%s]\n", (unsigned long long)q->samples,
		       pl((double)q->samples));
		if (q->site >= 0) { /* issue 26: the caller is on another thread */
			const struct sp_frame *w =
				sp_stack_worker(sp_attrib_stack(a, q->pid, q->stack_id));
			char b2[1024];

			if (w)
				printf("%13s note: on a worker thread (%s) with no frame of the program's "
				       "own: its caller is on another thread, not followed "
				       "(docs/attribution.md, Worker threads)\n",
				       "",
				       sp_where(b2, sizeof(b2), w->function,
						sp_path_rel(w->file, root_), w->line, w->module,
						w->offset));
		}
		if (stacks)
			print_stack(a, q->pid, q->stack_id, "                 ");
	}
}

static void print_run(const struct sp_qset *qs);
static int agent_profile_; /* the profile is an agent's snapshot (meta agent_updated) */

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
static char *shorten_bytes(const char *sql, size_t max)
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

/* SQLite's own work (sp_sqlite_own) of qs: queries, executions, self and
 * prepare time. */
struct own_sum {
	uint64_t queries, count, self_ns, total_ns, prepare_ns;
};

static struct own_sum own_sum(const struct sp_qset *qs)
{
	struct own_sum s = { 0 };

	for (size_t i = 0; i < qs->n; i++)
		if (sp_sqlite_own(&qs->rows[i])) {
			s.queries++;
			s.count += qs->rows[i].count;
			s.self_ns += qs->rows[i].self_ns;
			s.total_ns += qs->rows[i].total_ns;
			s.prepare_ns += qs->rows[i].prepare_ns;
		}
	return s;
}

/* The table's header lines: totals (SQLite's own work among them), losses,
 * plans, command, run, window and the paths' root. */
static void print_header(const struct sp_qset *qs, const struct report_opts *o,
			 const struct sp_attrib *a, const struct own_sum *own_)
{
	struct own_sum own = *own_;
	uint64_t total = 0, others = qs->processes - qs->sqlite_processes;
	char b[2][32];
	size_t i;

	for (i = 0; i < qs->n; i++)
		total += qs->rows[i].self_ns;
	printf("# %llu execution%s of %zu quer%s in %llu process%s",
	       (unsigned long long)qs->executions, pl((double)qs->executions), qs->n,
	       qs->n == 1 ? "y" : "ies", (unsigned long long)qs->sqlite_processes,
	       qs->sqlite_processes == 1 ? "" : "es");
	if (qs->processes > qs->sqlite_processes)
		printf(" (and %llu that ran no SQLite)", (unsigned long long)others);
	printf("; db time %s (self) + prepare %s", sp_fmt_ns(b[0], sizeof(b[0]), (double)total),
	       sp_fmt_ns(b[1], sizeof(b[1]), (double)sp_qset_prepare_ns(qs)));
	if (sp_qset_schema_loads(qs))
		printf("; %llu schema load%s (connections opened)",
		       (unsigned long long)sp_qset_schema_loads(qs),
		       pl((double)sp_qset_schema_loads(qs)));
	printf("\n");
	/* totals are exact whatever was lost: only sampled events travel */
	printf("# events lost %llu; unattributed ~%.0f (%llu sample%s)",
	       (unsigned long long)qs->lost, a->unattributed_est,
	       (unsigned long long)a->unattributed_samples, pl((double)a->unattributed_samples));
	if (qs->events_dropped)
		printf("; %llu sampled execution%s left out of the timeline (--max-events)",
		       (unsigned long long)qs->events_dropped, pl((double)qs->events_dropped));
	if (qs->clock_clamped)
		printf("; %llu execution%s' times clamped (the clock went back)",
		       (unsigned long long)qs->clock_clamped, pl((double)qs->clock_clamped));
	if (qs->texts_folded)
		printf("; %llu text%s folded into their fingerprint (past SQLPROF_TEXTS_PER_SHAPE "
		       "texts of one; totals exact)",
		       (unsigned long long)qs->texts_folded, pl((double)qs->texts_folded));
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
	print_run(qs);
	if (own.queries) /* in the totals above */
		printf("# of which SQLite's own work (schema loads, statements without SQL text):"
		       " %llu execution%s, %s db time + prepare %s (in the totals above; listed"
		       " apart, last)\n",
		       (unsigned long long)own.count, pl((double)own.count),
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
	snprintf(b, len, "%llu",
		 (unsigned long long)(!strcmp(k, "errors") ? r->errors : r->vm_steps));
	return b;
}

static void print_table(const struct sp_qset *qs, const struct report_opts *o, size_t n,
			const struct sp_attrib *a)
{
	static const char *const head_fixed[NCOL] = { "COUNT", "TOTAL", "PREPARE", "MEAN", "P50",
						      "P95",   "P99",   "MAX",     "ROWS", "" };
	/* what goes first when the terminal is narrow: the percentiles, then
	 * rows, max, prepare and mean; the columns keep their order at every
	 * width, and the --sort key's column is never left out */
	static const int drop_order[] = { C_P50, C_P95, C_P99, C_ROWS, C_MAX, C_PREP, C_MEAN };
	const char *head[NCOL];
	char b[NCOL][32];
	size_t i, c, w[NCOL], sqlw = 0, room = 0, ndrop = 0, k, nprog = 0, nown = 0;
	int shown[NCOL], dropped[NCOL], keep = sort_col(o->sort), section = 0;
	struct own_sum own = own_sum(qs);

	memcpy(head, head_fixed, sizeof(head));
	head[C_SORT] = !strcmp(o->sort, "self")     ? "SELF"
		       : !strcmp(o->sort, "errors") ? "ERRORS"
						    : "VM_STEPS";
	print_header(qs, o, a, &own);

	/* Column widths: fixed, or fitted to the terminal from the rows
	 * shown, with columns left out when the SQL would get fewer than
	 * 32 columns (or its own length, if shorter). */
	for (c = 0; c < NCOL; c++) {
		w[c] = 10;
		shown[c] = c != C_SORT || keep == C_SORT;
		dropped[c] = 0;
	}
	if (o->fit) {
		size_t longest = 0, used;

		for (c = 0; c < NCOL; c++)
			w[c] = strlen(head[c]);
		for (i = 0; i < qs->n; i++) {
			const struct sp_qrow *r = &qs->rows[i];
			size_t l[NCOL];
			char num[32];

			l[C_COUNT] = (size_t)snprintf(num, sizeof(num), "%llu",
						      (unsigned long long)r->count);
			l[C_TOTAL] = strlen(sp_fmt_ns(num, 32, (double)r->total_ns));
			l[C_PREP] = strlen(sp_fmt_ns(num, 32, (double)r->prepare_ns));
			l[C_MEAN] = strlen(sp_fmt_ns(num, 32, r->mean_ns));
			l[C_P50] = strlen(sp_fmt_ns(num, 32, (double)r->p50_ns));
			l[C_P95] = strlen(sp_fmt_ns(num, 32, (double)r->p95_ns));
			l[C_P99] = strlen(sp_fmt_ns(num, 32, (double)r->p99_ns));
			l[C_MAX] = strlen(sp_fmt_ns(num, 32, (double)r->max_ns));
			l[C_ROWS] = (size_t)snprintf(num, sizeof(num), "%llu",
						     (unsigned long long)r->rows);
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
	}
	for (c = 0; c < NCOL; c++)
		if (shown[c])
			printf("%s%*s", c ? " " : "", (int)w[c], head[c]);
	printf("  SQL\n");
	/* the program's queries (--top of them), then SQLite's own */
	for (k = 0; k < 2 * qs->n; k++) {
		const struct sp_qrow *r = &qs->rows[k % qs->n];
		int exec = r->kind == SP_QK_EXEC;
		char *sql;

		if (sp_sqlite_own(r) != (k >= qs->n) || (k < qs->n ? nprog++ : nown++) >= n)
			continue;
		if (k >= qs->n && !section++)
			printf("# SQLite's own work (not the program's queries; check does not judge"
			       " them): %llu quer%s\n",
			       (unsigned long long)own.queries, own.queries == 1 ? "y" : "ies");

		sqlw = o->width;
		if (o->fit && (!sqlw || sqlw > room - (exec ? 7 : 0)))
			sqlw = room > (exec ? 15u : 8u) ? room - (exec ? 7 : 0) : 8;
		sql = !sqlw    ? strdup(r->fingerprint)
		      : o->fit ? shorten_cols(r->fingerprint, sqlw)
			       : shorten_bytes(r->fingerprint, sqlw);
		if (!sql)
			continue;
		sp_term_clean(sql);
		sp_fmt_ns(b[C_TOTAL], 32, (double)r->total_ns);
		sp_fmt_ns(b[C_PREP], 32, (double)r->prepare_ns);
		sp_fmt_ns(b[C_MEAN], 32, r->mean_ns);
		sp_fmt_ns(b[C_P50], 32, (double)r->p50_ns);
		sp_fmt_ns(b[C_P95], 32, (double)r->p95_ns);
		sp_fmt_ns(b[C_P99], 32, (double)r->p99_ns);
		sp_fmt_ns(b[C_MAX], 32, (double)r->max_ns);
		snprintf(b[C_COUNT], 32, "%llu", (unsigned long long)r->count);
		snprintf(b[C_ROWS], 32, "%llu", (unsigned long long)r->rows);
		sort_value(b[C_SORT], 32, r, o->sort);
		for (c = 0; c < NCOL; c++)
			if (shown[c])
				printf("%s%*s", c ? " " : "", (int)w[c], b[c]);
		printf("  %s%s\n", exec ? "[exec] " : "", sql);
		free(sql);
		print_table_sites(a, r, o->stacks);
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
	nown = nprog > n ? nprog - n : 0;
	nown += own.queries > n ? (size_t)own.queries - n : 0;
	if (nown)
		printf("# ... %zu more quer%s (--top)\n", nown, nown == 1 ? "y" : "ies");
}

static void print_csv(const struct sp_qset *qs, size_t n)
{
	size_t i;

	printf("fingerprint_id,kind,fingerprint,sql,count,total_ns,self_ns,mean_ns,p50_ns,p95_ns,"
	       "p99_ns,max_ns,min_ns,rows,vm_steps,fullscan_steps,sorts,autoindex,errors,prepares,"
	       "prepare_ns,sqlite_internal\n");
	for (i = 0; i < n; i++) {
		const struct sp_qrow *r = &qs->rows[i];

		printf("%016llx,%s,", (unsigned long long)r->fp_id, sp_qkind_name(r->kind));
		sp_csv_str(stdout, r->fingerprint);
		putchar(',');
		sp_csv_str(stdout, r->sql);
		printf(",%llu,%llu,%llu,%.0f,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,"
		       "%llu,%d\n",
		       (unsigned long long)r->count, (unsigned long long)r->total_ns,
		       (unsigned long long)r->self_ns, r->mean_ns, (unsigned long long)r->p50_ns,
		       (unsigned long long)r->p95_ns, (unsigned long long)r->p99_ns,
		       (unsigned long long)r->max_ns, (unsigned long long)r->min_ns,
		       (unsigned long long)r->rows, (unsigned long long)r->vm_steps,
		       (unsigned long long)r->fullscan_steps, (unsigned long long)r->sorts,
		       (unsigned long long)r->autoindex, (unsigned long long)r->errors,
		       (unsigned long long)r->prepares, (unsigned long long)r->prepare_ns,
		       sp_sqlite_own(r));
	}
}

/* A site's JSON fields from "function"'s value on: function, file, line,
 * module and, without symbols, offset. */
static void print_json_site_fields(const struct sp_site *st)
{
	sp_json_str(stdout, st->function);
	printf(", \"file\": ");
	sp_json_str(stdout, st->file);
	printf(", \"line\": %d, \"module\": ", st->line);
	sp_json_str(stdout, st->module);
	if (st->offset) /* no symbols: the pc's offset in the module's file */
		printf(", \"offset\": %llu", (unsigned long long)st->offset);
}

static void print_json_sites(const struct sp_attrib *a, const struct sp_qrow *r)
{
	size_t j, nix;
	const size_t *ix = sp_attrib_query_sites(a, r->fp_id, r->kind == SP_QK_EXEC, &nix);
	int first = 1;

	printf(", \"sites\": [");
	for (j = 0; j < nix; j++) {
		const struct sp_qsite *q = &a->qs[ix[j]];

		printf("%s{\"function\": ", first ? "" : ", ");
		first = 0;
		if (q->site < 0) {
			printf("null, \"file\": null, \"line\": 0, \"module\": null, \"unattributed\": true");
		} else {
			print_json_site_fields(&a->sites[q->site]);
		}
		/* the frame in an installed library that the site passed over
		 * (its example stack's): the site --all-frames would give */
		if (q->lib_site >= 0 && q->lib_site != q->site) {
			printf(", \"library_site\": {\"function\": ");
			print_json_site_fields(&a->sites[q->lib_site]);
			printf("}");
		}
		if (q->site >= 0) { /* issue 26: its example stack is a worker thread's */
			const struct sp_frame *w =
				sp_stack_worker(sp_attrib_stack(a, q->pid, q->stack_id));
			char b2[1024];

			if (w) {
				printf(", \"worker_thread\": ");
				sp_json_str(stdout, sp_where(b2, sizeof(b2), w->function, w->file,
							     w->line, w->module, w->offset));
			}
		}
		printf(", \"samples\": %llu, \"est_count\": %.0f, \"est_total_ns\": %.0f}",
		       (unsigned long long)q->samples, q->est_count, q->est_total_ns);
	}
	printf("]");
}

/* One "died" line of the profile: PID, EXE, running count, SQL. */
struct death {
	long long pid;
	char exe[256], sql[256];
	unsigned running;
};

static int next_death(const char **p, struct death *d)
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
		return next_death(p, d); /* damaged: skipped */
	d->pid = strtoll(f[0], NULL, 10);
	snprintf(d->exe, sizeof(d->exe), "%s", f[1]);
	d->running = (unsigned)strtoul(f[2], NULL, 10);
	snprintf(d->sql, sizeof(d->sql), "%s", f[3]);
	return 1;
}

/* The run's outcome under the header: exit status (and the signal that
 * killed the command), duration, and the processes that died with what
 * they were running. */
static void print_run(const struct sp_qset *qs)
{
	const char *p = qs->died;
	struct death d;

	if (agent_profile_) { /* nothing exited: the agent wrote what it had so far */
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
	while (next_death(&p, &d)) {
		printf("# died: process %lld (%s) ended without exiting (a signal or a crash)",
		       d.pid, d.exe);
		if (d.running)
			printf(", running %u execution%s of: %s", d.running,
			       d.running == 1 ? "" : "s", d.sql[0] ? d.sql : "<sql text lost>");
		printf("\n");
	}
}

static void print_json_deaths(const struct sp_qset *qs)
{
	const char *p = qs->died;
	struct death d;
	int first = 1;

	/* an agent's snapshot: nothing exited (exit_status null) */
	printf(" \"agent_snapshot\": %s, \"exit_status\": ", agent_profile_ ? "true" : "false");
	if (agent_profile_)
		printf("null");
	else
		printf("%lld", (long long)qs->exit_status);
	printf(", \"duration_ns\": %lld, \"died\": [", (long long)qs->duration_ns);
	while (next_death(&p, &d)) {
		printf("%s{\"pid\": %lld, \"exe\": ", first ? "" : ", ", d.pid);
		sp_json_str(stdout, d.exe);
		printf(", \"running\": %u, \"sql\": ", d.running);
		if (d.sql[0])
			sp_json_str(stdout, d.sql);
		else
			printf("null");
		printf("}");
		first = 0;
	}
	printf("],");
}

/* A stack as a JSON list of frames, leaf first, libsqlprof's left out. */
static void print_json_stack(const struct sp_attrib *a, uint64_t pid, uint64_t stack_id)
{
	const struct sp_stk *sk = stack_id ? sp_attrib_stack(a, pid, stack_id) : NULL;
	uint32_t i;
	int first = 1;

	printf("[");
	for (i = 0; sk && i < sk->nframes; i++) {
		const struct sp_frame *f = &sk->frames[i];

		if (sp_is_profiler_module(f->module))
			continue;
		printf("%s{\"function\": ", first ? "" : ", ");
		first = 0;
		sp_json_str(stdout, f->function);
		printf(", \"file\": ");
		sp_json_str(stdout, f->file);
		printf(", \"line\": %d, \"module\": ", f->line);
		sp_json_str(stdout, f->module);
		if (f->offset) /* no source file: the pc's offset in the module's file */
			printf(", \"offset\": %llu", (unsigned long long)f->offset);
		printf(", \"inlined\": %s}", f->inlined ? "true" : "false");
	}
	printf("]");
}

/* The plan's rows as nodes {id, parent, detail}, in the plan's order. */
static void print_json_plan_nodes(const char *plan)
{
	struct sp_plan_node *v = NULL;
	int n = plan ? sp_plan_nodes(plan, &v) : 0, i;

	printf(", \"plan_nodes\": ");
	if (!plan || n < 0) {
		printf("null");
		return;
	}
	printf("[");
	for (i = 0; i < n; i++) {
		char *d = strndup(v[i].detail, (size_t)v[i].detail_len);

		printf("%s{\"id\": %d, \"parent\": %d, \"detail\": ", i ? ", " : "", v[i].id,
		       v[i].parent);
		sp_json_str(stdout, d ? d : "");
		printf("}");
		free(d);
	}
	printf("]");
	free(v);
}

static void print_json_findings(const struct sp_findings *fs)
{
	size_t i;

	printf(", \"findings\": [");
	for (i = 0; fs && i < fs->n; i++) {
		const struct sp_finding *x = &fs->f[i];

		printf("%s\n  {\"kind\": ", i ? "," : "");
		sp_json_str(stdout, sp_rule_name(x->rule));
		printf(", \"fingerprint_id\": \"%016llx\", \"query_kind\": \"%s\", \"fingerprint\": ",
		       (unsigned long long)x->q->fp_id, sp_qkind_name(x->q->kind));
		sp_json_str(stdout, x->q->fingerprint);
		printf(", \"sql\": ");
		sp_json_str(stdout, x->q->sql);
		printf(", \"site\": ");
		sp_json_str(stdout, x->site);
		printf(", \"evidence\": ");
		sp_json_str(stdout, x->evidence);
		printf(", \"suggestion\": ");
		sp_json_str(stdout, x->suggestion);
		printf("}");
	}
	printf("%s]", fs && fs->n ? "\n" : "");
}

static void print_json_failures(const struct sp_failures *fs, const struct sp_attrib *a)
{
	size_t i;

	printf(", \"failures\": [");
	for (i = 0; i < fs->n; i++) {
		const struct sp_failure *x = &fs->f[i];

		printf("%s\n  {\"fingerprint_id\": \"%016llx\", \"kind\": \"%s\", \"fingerprint\": ",
		       i ? "," : "", (unsigned long long)x->fp_id, sp_qkind_name(x->kind));
		sp_json_str(stdout, x->fingerprint);
		printf(", \"code\": %d, \"message\": ", x->rc);
		sp_json_str(stdout, x->message);
		printf(", \"count\": %llu, \"pid\": %llu, \"stack\": ",
		       (unsigned long long)x->count, (unsigned long long)x->pid);
		print_json_stack(a, x->pid, x->stack_id);
		printf("}");
	}
	printf("%s]", fs->n ? "\n" : "");
}

/* "window": the intervals the report sums (null: the whole profile). */
static void print_json_window(const struct sp_window *w)
{
	char a[40];

	if (!w->on) {
		printf(" \"window\": null,");
		return;
	}
	printf(" \"window\": {\"since_ns\": ");
	if (w->since_ns == INT64_MIN)
		printf("null");
	else
		printf("%lld", (long long)w->since_ns);
	printf(", \"until_ns\": ");
	if (w->until_ns == INT64_MAX)
		printf("null");
	else
		printf("%lld", (long long)w->until_ns);
	printf(", \"intervals\": %llu, \"start_ns\": ", (unsigned long long)w->n);
	if (w->n)
		printf("%lld, \"start\": \"%s\"", (long long)w->first_ns,
		       sp_series_iso(w->first_ns, a, sizeof(a)));
	else
		printf("null, \"start\": null");
	printf(", \"end_ns\": ");
	if (w->n)
		printf("%lld, \"end\": \"%s\"", (long long)w->end_ns,
		       sp_series_iso(w->end_ns, a, sizeof(a)));
	else
		printf("null, \"end\": null");
	printf(", \"profile_start_ns\": %lld, \"profile_end_ns\": %lld},",
	       (long long)w->profile_first_ns, (long long)w->profile_end_ns);
}

static void print_json(const struct sp_qset *qs, size_t n, const struct sp_attrib *a,
		       const struct sp_findings *finds, const struct sp_failures *fails)
{
	size_t i;

	printf("{\"lost\": %llu, \"executions\": %llu, \"processes\": %llu,"
	       " \"sqlite_processes\": %llu, \"untracked\": %llu,"
	       " \"unreported\": %llu, \"unreported_missing\": %llu,"
	       " \"unattributed\": %.0f, \"unattributed_samples\": %llu,",
	       (unsigned long long)qs->lost, (unsigned long long)qs->executions,
	       (unsigned long long)qs->processes, (unsigned long long)qs->sqlite_processes,
	       (unsigned long long)qs->untracked, (unsigned long long)qs->unreported,
	       (unsigned long long)qs->unreported_missing, a->unattributed_est,
	       (unsigned long long)a->unattributed_samples);
	print_json_deaths(qs);
	printf(" \"command\": ");
	if (qs->command)
		sp_json_str(stdout, qs->command);
	else
		printf("null");
	if (qs->rate >= 0 && qs->rate <= 1)
		printf(", \"rate\": %.17g", qs->rate);
	else
		printf(", \"rate\": null");
	printf(", \"runs\": %lld, \"events_dropped\": %llu, \"clock_clamped\": %llu,"
	       " \"texts_folded\": %llu,",
	       (long long)qs->runs, (unsigned long long)qs->events_dropped,
	       (unsigned long long)qs->clock_clamped, (unsigned long long)qs->texts_folded);
	printf(" \"plans_bound\": ");
	if (qs->plans_bound)
		sp_json_str(stdout, qs->plans_bound);
	else
		printf("null");
	printf(", \"no_plan\": %llu,", (unsigned long long)qs->no_plan);
	printf(" \"prepare_ns\": %llu, \"schema_loads\": %llu,",
	       (unsigned long long)sp_qset_prepare_ns(qs),
	       (unsigned long long)sp_qset_schema_loads(qs));
	{
		/* included in the totals; its queries have "sqlite_internal": true */
		struct own_sum own = own_sum(qs);

		printf(" \"sqlite_internal\": {\"queries\": %llu, \"executions\": %llu,"
		       " \"total_ns\": %llu, \"self_ns\": %llu, \"prepare_ns\": %llu},",
		       (unsigned long long)own.queries, (unsigned long long)own.count,
		       (unsigned long long)own.total_ns, (unsigned long long)own.self_ns,
		       (unsigned long long)own.prepare_ns);
	}
	print_json_window(&qs->window);
	printf(" \"queries\": [");
	for (i = 0; i < n; i++) {
		const struct sp_qrow *r = &qs->rows[i];

		printf("%s\n  {\"fingerprint_id\": \"%016llx\", \"kind\": \"%s\", \"fingerprint\": ",
		       i ? "," : "", (unsigned long long)r->fp_id, sp_qkind_name(r->kind));
		sp_json_str(stdout, r->fingerprint);
		printf(", \"sql\": ");
		sp_json_str(stdout, r->sql);
		printf(", \"count\": %llu, \"total_ns\": %llu, \"self_ns\": %llu, \"mean_ns\": %.0f,"
		       " \"p50_ns\": %llu, \"p95_ns\": %llu, \"p99_ns\": %llu, \"max_ns\": %llu,"
		       " \"min_ns\": %llu, \"rows\": %llu, \"vm_steps\": %llu, \"fullscan_steps\": %llu,"
		       " \"sorts\": %llu, \"autoindex\": %llu, \"errors\": %llu, \"nested\": %llu,"
		       " \"prepares\": %llu, \"prepare_ns\": %llu, \"samples\": %llu",
		       (unsigned long long)r->count, (unsigned long long)r->total_ns,
		       (unsigned long long)r->self_ns, r->mean_ns, (unsigned long long)r->p50_ns,
		       (unsigned long long)r->p95_ns, (unsigned long long)r->p99_ns,
		       (unsigned long long)r->max_ns, (unsigned long long)r->min_ns,
		       (unsigned long long)r->rows, (unsigned long long)r->vm_steps,
		       (unsigned long long)r->fullscan_steps, (unsigned long long)r->sorts,
		       (unsigned long long)r->autoindex, (unsigned long long)r->errors,
		       (unsigned long long)r->nested, (unsigned long long)r->prepares,
		       (unsigned long long)r->prepare_ns, (unsigned long long)r->samples);
		printf(", \"max_run\": %llu, \"runs\": %llu, \"plan\": ",
		       (unsigned long long)r->max_run, (unsigned long long)r->runs);
		if (r->plan)
			sp_json_str(stdout, r->plan);
		else
			printf("null");
		print_json_plan_nodes(r->plan);
		printf(", \"plan_missing\": ");
		if (!r->plan && r->plan_gap)
			sp_json_str(stdout, r->plan_gap);
		else
			printf("null");
		printf(", \"folded\": %s, \"sqlite_internal\": %s", r->folded ? "true" : "false",
		       sp_sqlite_own(r) ? "true" : "false");
		print_json_sites(a, r);
		printf("}");
	}
	printf("\n]");
	print_json_findings(finds);
	print_json_failures(fails, a);
	printf("}\n");
}

static void print_csv_findings(const struct sp_findings *fs)
{
	size_t i;

	printf("kind,fingerprint_id,query_kind,fingerprint,site,evidence,suggestion\n");
	for (i = 0; i < fs->n; i++) {
		const struct sp_finding *x = &fs->f[i];

		printf("%s,%016llx,%s,", sp_rule_name(x->rule), (unsigned long long)x->q->fp_id,
		       sp_qkind_name(x->q->kind));
		sp_csv_str(stdout, x->q->fingerprint);
		putchar(',');
		sp_csv_str(stdout, x->site);
		putchar(',');
		sp_csv_str(stdout, x->evidence);
		putchar(',');
		sp_csv_str(stdout, x->suggestion);
		putchar('\n');
	}
}

static void print_csv_failures(const struct sp_failures *fs, const struct sp_attrib *a)
{
	size_t i;

	printf("fingerprint_id,kind,fingerprint,code,message,count,pid,site\n");
	for (i = 0; i < fs->n; i++) {
		const struct sp_failure *x = &fs->f[i];
		const struct sp_stk *sk =
			x->stack_id ? sp_attrib_stack(a, x->pid, x->stack_id) : NULL;
		char site[512] = "";

		if (sk && sk->site >= 0)
			sp_where(site, sizeof(site), a->sites[sk->site].function,
				 a->sites[sk->site].file, a->sites[sk->site].line,
				 a->sites[sk->site].module, a->sites[sk->site].offset);
		printf("%016llx,%s,", (unsigned long long)x->fp_id, sp_qkind_name(x->kind));
		sp_csv_str(stdout, x->fingerprint);
		printf(",%d,", x->rc);
		sp_csv_str(stdout, x->message);
		printf(",%llu,%llu,", (unsigned long long)x->count, (unsigned long long)x->pid);
		sp_csv_str(stdout, site);
		putchar('\n');
	}
}

struct group {
	int key; /* site index, or first site index of the function; -1 unattributed */
	double est_count, est_total_ns;
	uint64_t samples, queries;
};

static int cmp_group(const void *pa, const void *pb)
{
	const struct group *a = pa, *b = pb;

	return a->est_total_ns < b->est_total_ns ? 1 : a->est_total_ns > b->est_total_ns ? -1 : 0;
}

#define GROUP_QUERIES_MAX 10 /* queries listed under a --by row in the table */

/* One query of a --by group: its row in the report and its estimates there. */
struct gqe {
	size_t row;
	double count, self_ns;
};

static int cmp_gqe_row(const void *pa, const void *pb)
{
	const struct gqe *a = pa, *b = pb;

	return a->row < b->row ? -1 : a->row > b->row;
}

static int cmp_gqe_self(const void *pa, const void *pb)
{
	const struct gqe *a = pa, *b = pb;

	if (a->self_ns != b->self_ns)
		return a->self_ns < b->self_ns ? 1 : -1;
	return cmp_gqe_row(pa, pb);
}

/* The group key of a->qs[j]: its site, or its function's first site. */
static int group_key(const struct sp_attrib *a, const int *fnkey, int by_fn, size_t j)
{
	int key = a->qs[j].site;

	return by_fn && key >= 0 ? fnkey[key] : key;
}

/* Under a --by site / function row: the queries run there, each with its
 * estimated count and self time there, costliest first, shortened to
 * --width; at most GROUP_QUERIES_MAX, then how many more. */
static void print_group_queries(const struct sp_qset *qs, const struct report_opts *o,
				const struct gqe *q, size_t n)
{
	size_t k;

	for (k = 0; k < n; k++, q++) {
		if (k == GROUP_QUERIES_MAX && n > k + 1) {
			printf("%12s %10s %8s %8s    <- ... %zu more queries\n", "", "", "", "",
			       n - k);
			break;
		}
		const struct sp_qrow *r = &qs->rows[q->row];
		char *sql =
			o->width ? shorten_bytes(r->fingerprint, o->width) : strdup(r->fingerprint);
		char b[32];

		if (!sql)
			continue;
		sp_term_clean(sql);
		printf("%12.0f %10s %8s %8s    <- %s%s\n", q->count,
		       sp_fmt_ns(b, sizeof(b), q->self_ns), "", "",
		       (r->kind != SP_QK_EXEC) ? "" : "[exec] ", sql);
		free(sql);
	}
}

/* --by function / --by site: estimates summed over queries, each group
 * followed by the queries run there. */
static void print_grouped(const struct sp_attrib *a, const struct sp_qset *qs,
			  const struct report_opts *o)
{
	int by_fn = !strcmp(o->by, "function");
	struct group *g = calloc(a->nsites + 1, sizeof(*g));
	/* group of each key (site index + 1, 0 unattributed), + 1; 0 none */
	size_t *gof = calloc(a->nsites + 1, sizeof(*gof));
	int *fnkey = by_fn ? malloc((a->nsites + 1) * sizeof(*fnkey)) : NULL;
	struct hmap fns;   /* {function hash, module hash, n} -> first site of that function */
	struct hmap rowof; /* {fp_id, kind_exec} -> row index + 1 in qs */
	size_t *qrow = calloc(a->nqs + 1, sizeof(*qrow)); /* each qs entry's row + 1, 0: none */
	/* group i's queries: gq[gfirst[i] .. gfirst[i] + gn[i]) */
	size_t *gfirst = NULL, *gn = NULL;
	struct gqe *gq = NULL;
	size_t ng = 0, i, j, n;

	hmap_init(&fns, 3 * sizeof(uint64_t), sizeof(int));
	hmap_init(&rowof, 2 * sizeof(int64_t), sizeof(size_t));
	if (!g || !gof || !qrow || (by_fn && !fnkey))
		goto out;
	/* the queries of the report (a statement folded into its exec is not one) */
	for (i = 0; i < qs->n; i++) {
		int64_t k[2] = { qs->rows[i].fp_id, qs->rows[i].kind == SP_QK_EXEC };
		size_t *v = hmap_get(&rowof, k, 1, NULL);

		if (!v)
			goto out;
		*v = i + 1;
	}
	for (j = 0; j < a->nqs; j++) {
		int64_t k[2] = { a->qs[j].fp_id, a->qs[j].kind_exec };
		size_t *v = hmap_get(&rowof, k, 0, NULL);

		qrow[j] = v ? *v : 0;
	}
	/* group sites by function + module: each site's first site of its
	 * function, through a hash (the next key on a collision) */
	for (i = 0; by_fn && i < a->nsites; i++) {
		const struct sp_site *st = &a->sites[i];
		uint64_t k[3] = { sp_hash_bytes(st->function, strlen(st->function)),
				  sp_hash_bytes(st->module, strlen(st->module)), 0 };

		for (;; k[2]++) {
			int created, *first = hmap_get(&fns, k, 1, &created);

			if (!first)
				goto out;
			if (created)
				*first = (int)i;
			else if (strcmp(a->sites[*first].function, st->function) ||
				 strcmp(a->sites[*first].module, st->module))
				continue;
			fnkey[i] = *first;
			break;
		}
	}
	for (j = 0; j < a->nqs; j++) {
		const struct sp_qsite *q = &a->qs[j];
		int key = q->site;

		if (!qrow[j])
			continue;
		if (by_fn && key >= 0)
			key = fnkey[key];
		if (!gof[key + 1]) {
			g[ng++].key = key;
			gof[key + 1] = ng;
		}
		i = gof[key + 1] - 1;
		g[i].est_count += q->est_count;
		/* self time: an exec and the statements it runs are not
		 * counted twice when they share a site */
		g[i].est_total_ns += q->est_self_ns;
		g[i].samples += q->samples;
		g[i].queries++;
	}
	sp_qsort(g, ng, sizeof(*g), cmp_group);
	n = o->top && o->top < ng ? (size_t)o->top : ng;
	/* each group's queries, in a->qs's order (by estimated count) */
	gfirst = calloc(ng + 2, sizeof(*gfirst));
	gn = calloc(ng + 1, sizeof(*gn));
	gq = malloc((a->nqs + 1) * sizeof(*gq));
	if (!gfirst || !gn || !gq)
		goto out;
	for (i = 0; i < ng; i++)
		gof[g[i].key + 1] = i + 1;
	for (j = 0; j < a->nqs; j++)
		if (qrow[j])
			gfirst[gof[group_key(a, fnkey, by_fn, j) +
				   1]]++; /* group i counts at i + 1 */
	for (i = 1; i <= ng + 1; i++)
		gfirst[i] += gfirst[i - 1];
	{
		size_t *fill = calloc(ng + 1, sizeof(*fill));

		if (!fill)
			goto out;
		for (j = 0; j < a->nqs; j++)
			if (qrow[j]) {
				size_t gi = gof[group_key(a, fnkey, by_fn, j) + 1] - 1;

				gq[gfirst[gi] + fill[gi]++] =
					(struct gqe){ qrow[j] - 1, a->qs[j].est_count,
						      a->qs[j].est_self_ns };
			}
		free(fill);
	}
	/* a query's stacks at one site are one query there; costliest first */
	for (i = 0; i < ng; i++) {
		struct gqe *v = gq + gfirst[i];
		size_t m = gfirst[i + 1] - gfirst[i], k, w = 0;

		qsort(v, m, sizeof(*v), cmp_gqe_row);
		for (k = 0; k < m; k++) {
			if (w && v[w - 1].row == v[k].row) {
				v[w - 1].count += v[k].count;
				v[w - 1].self_ns += v[k].self_ns;
			} else {
				v[w++] = v[k];
			}
		}
		qsort(v, w, sizeof(*v), cmp_gqe_self);
		gn[i] = w;
		g[i].queries = w;
	}
	if (!strcmp(o->format, "json")) {
		printf("{\"lost\": %llu, \"unattributed\": %.0f, \"by\": \"%s\", \"groups\": [",
		       (unsigned long long)qs->lost, a->unattributed_est, o->by);
		for (i = 0; i < n; i++) {
			const struct sp_site *st = g[i].key >= 0 ? &a->sites[g[i].key] : NULL;

			printf("%s\n  {\"function\": ", i ? "," : "");
			sp_json_str(stdout, st ? st->function : "(unattributed)");
			if (!by_fn) {
				printf(", \"file\": ");
				sp_json_str(stdout, st ? st->file : "");
				printf(", \"line\": %d", st ? st->line : 0);
			}
			printf(", \"module\": ");
			sp_json_str(stdout, st ? st->module : "");
			printf(", \"queries\": %llu, \"samples\": %llu, \"est_count\": %.0f,"
			       " \"est_self_ns\": %.0f, \"fingerprints\": [",
			       (unsigned long long)g[i].queries, (unsigned long long)g[i].samples,
			       g[i].est_count, g[i].est_total_ns);
			for (j = gfirst[i]; j < gfirst[i] + gn[i]; j++) {
				const struct gqe *q = &gq[j];
				const struct sp_qrow *r = &qs->rows[q->row];

				printf("%s{\"fingerprint_id\": \"%016llx\", \"kind\": \"%s\", \"fingerprint\": ",
				       j > gfirst[i] ? ", " : "", (unsigned long long)r->fp_id,
				       sp_qkind_name(r->kind));
				sp_json_str(stdout, r->fingerprint);
				printf(", \"est_count\": %.0f, \"est_self_ns\": %.0f}", q->count,
				       q->self_ns);
			}
			printf("]}");
		}
		printf("\n]}\n");
	} else if (!strcmp(o->format, "csv")) {
		printf("function,file,line,module,queries,samples,est_count,est_self_ns\n");
		for (i = 0; i < n; i++) {
			const struct sp_site *st = g[i].key >= 0 ? &a->sites[g[i].key] : NULL;

			sp_csv_str(stdout, st ? st->function : "(unattributed)");
			putchar(',');
			sp_csv_str(stdout, st && !by_fn ? st->file : "");
			printf(",%d,", st && !by_fn ? st->line : 0);
			sp_csv_str(stdout, st ? st->module : "");
			printf(",%llu,%llu,%.0f,%.0f\n", (unsigned long long)g[i].queries,
			       (unsigned long long)g[i].samples, g[i].est_count, g[i].est_total_ns);
		}
	} else {
		char b[32];

		int exact = 1;

		for (i = 0; i < qs->n; i++)
			exact &= sites_exact(a, &qs->rows[i]);
		if (exact) /* --rate 1, nothing lost: every execution's stack */
			printf("# by %s; counts and times are exact (every execution's stack was "
			       "taken); unattributed %.0f\n",
			       o->by, a->unattributed_est);
		else
			printf("# by %s; counts and times are estimates from %s samples; "
			       "unattributed ~%.0f\n",
			       o->by, "stack", a->unattributed_est);
		if (o->root)
			printf("# paths relative to %s (--full-paths)\n", o->root);
		printf("%12s %10s %8s %8s  %s\n", "EST_COUNT", "EST_SELF", "QUERIES", "SAMPLES",
		       by_fn ? "FUNCTION" : "SITE");
		for (i = 0; i < n; i++) {
			printf("%12.0f %10s %8llu %8llu  ", g[i].est_count,
			       sp_fmt_ns(b, sizeof(b), g[i].est_total_ns),
			       (unsigned long long)g[i].queries, (unsigned long long)g[i].samples);
			if (g[i].key < 0)
				printf("(unattributed)\n");
			else if (by_fn)
				printf("%s [%s]\n", a->sites[g[i].key].function,
				       sp_basename(a->sites[g[i].key].module));
			else {
				print_site_name(a, g[i].key);
				putchar('\n');
			}
			print_group_queries(qs, o, gq + gfirst[i], gn[i]);
		}
	}
out:
	free(qrow);
	free(gfirst);
	free(gn);
	free(gq);
	hmap_free(&rowof);
	hmap_free(&fns);
	free(fnkey);
	free(gof);
	free(g);
}

/* Failed executions, with their error text and the stack at the failure. */
static void print_errors(const struct sp_failures *fs, const struct sp_attrib *a)
{
	size_t i;

	for (i = 0; i < fs->n; i++) {
		const struct sp_failure *x = &fs->f[i];
		char *sql = shorten_bytes(x->fingerprint, 100);

		if (!i)
			printf("\n# failed executions\n");
		if (sql)
			sp_term_clean(sql);
		printf("%10llu x rc=%d %s: %s%s\n", (unsigned long long)x->count, x->rc, x->message,
		       (x->kind != SP_QK_EXEC) ? "" : "[exec] ", sql ? sql : "?");
		free(sql);
		if (x->stack_id)
			print_stack(a, x->pid, x->stack_id, "             ");
	}
}

/* Each query's estimates per site (sp_attrib_estimate_q). Under a time
 * window, the whole profile's count and time go along, so that the exact
 * per-caller counts (the whole profile's) are scaled to the window's share
 * (before: "-> 110 execs" under a row of 10). 0, or -1 on ENOMEM. */
static int estimate_sites(sqlite3 *db, const struct sp_qset *qs, struct sp_attrib *at)
{
	struct sp_qset whole = { 0 };
	struct hmap ix;
	char err[256];
	size_t i;

	hmap_init(&ix, 2 * sizeof(int64_t), sizeof(size_t));
	if (qs->window.on && sp_qset_load(db, &whole, err, sizeof(err)) == 0) {
		for (i = 0; i < whole.n; i++) {
			int64_t k[2] = { whole.rows[i].fp_id, whole.rows[i].kind == SP_QK_EXEC };
			size_t *v = hmap_get(&ix, k, 1, NULL);

			if (!v) {
				hmap_free(&ix);
				sp_qset_free(&whole);
				return -1;
			}
			*v = i;
		}
	}
	for (i = 0; i < qs->n; i++) {
		const struct sp_qrow *r = &qs->rows[i];
		int64_t k[2] = { r->fp_id, r->kind == SP_QK_EXEC };
		const size_t *v = whole.n ? hmap_get(&ix, k, 0, NULL) : NULL;
		struct sp_est_tot tot = { r->count, r->total_ns, r->self_ns, 0, 0 };

		sp_attrib_estimate_qw(at, r->fp_id, r->kind == SP_QK_EXEC, &tot,
				      v ? whole.rows[*v].count : 0,
				      v ? whole.rows[*v].total_ns : 0);
	}
	hmap_free(&ix);
	sp_qset_free(&whole);
	return 0;
}

/* 1 for a known sort key; else a message listing the keys, and 0. */
static int sort_key_ok(const char *key)
{
	struct sp_qset none = { 0 };

	if (sp_qset_sort(&none, key) == 0)
		return 1;
	fprintf(stderr, "sqlprof report: unknown sort key '%s' (%s)\n", key, SORT_KEYS);
	return 0;
}

/* 1 when db is an agent's snapshot (its meta has agent_updated): nothing
 * exited. */
static int is_agent_profile(sqlite3 *db)
{
	sqlite3_stmt *st;
	int yes = sqlite3_prepare_v2(db, "SELECT 1 FROM meta WHERE key = 'agent_updated'", -1, &st,
				     NULL) == SQLITE_OK &&
		  sqlite3_step(st) == SQLITE_ROW;

	sqlite3_finalize(st);
	return yes;
}

int cmd_report(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "sort", required_argument, NULL, 's' },
		{ "top", required_argument, NULL, 'n' },
		{ "format", required_argument, NULL, 'f' },
		{ "width", required_argument, NULL, 'w' },
		{ "by", required_argument, NULL, 'b' },
		{ "skip", required_argument, NULL, 1 },
		{ "stacks", no_argument, NULL, 2 },
		{ "plans", no_argument, NULL, 3 },
		{ "no-doctor", no_argument, NULL, 4 },
		{ "findings", no_argument, NULL, 5 },
		{ "failures", no_argument, NULL, 6 },
		{ "debug-dir", required_argument, NULL, 7 },
		{ "full-paths", no_argument, NULL, 8 },
		{ "since", required_argument, NULL, 9 },
		{ "until", required_argument, NULL, 10 },
		{ "last", required_argument, NULL, 11 },
		{ "all-frames", no_argument, NULL, 12 },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct report_opts o = { .sort = "total", .format = "table", .by = "sql", .width = 80 };
	struct sp_attrib at;
	const char *path = SP_PROFILE_DEFAULT;
	struct sp_qset qs;
	struct sp_findings finds = { 0 };
	struct sp_failures fails = { 0 };
	struct sp_winreq wr = { 0 };
	struct sp_window win = { 0 };
	sqlite3 *db;
	FILE *real = NULL, *fitted = NULL, *termed = NULL;
	char err[512];
	uint64_t u;
	size_t n;
	int opt, werr = 0, lrc;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "s:n:f:w:b:h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'b': o.by = optarg; break;
		case 1:
			if (o.nskip == MAX_SKIP) {
				fprintf(stderr, "sqlprof report: at most %d --skip patterns\n",
					MAX_SKIP);
				return SP_EXIT_USAGE;
			}
			o.skip[o.nskip++] = optarg;
			break;
		case 2: o.stacks = 1; break;
		case 3: o.plans = 1; break;
		case 4: o.no_doctor = 1; break;
		case 5: o.csv_table = 1; break;
		case 6: o.csv_table = 2; break;
		case 7: sp_attrib_set_debug_dir(optarg); break;
		case 8: o.full_paths = 1; break;
		case 12: sp_attrib_set_all_frames(1); break;
		case 9:
		case 10:
		case 11:
			if (sp_winreq_set(&wr,
					  opt == 9    ? 's'
					  : opt == 10 ? 'u'
						      : 'l',
					  optarg, "report") < 0)
				return SP_EXIT_USAGE;
			break;
		case 's': o.sort = optarg; break;
		case 'f': o.format = optarg; break;
		case 'n':
			if (sp_parse_u64(optarg, &o.top) < 0) {
				fprintf(stderr,
					"sqlprof report: --top wants a non-negative integer, not '%s'\n",
					optarg);
				return SP_EXIT_USAGE;
			}
			break;
		case 'w':
			if (sp_parse_u64(optarg, &u) < 0 || u > 1000000) {
				fprintf(stderr, "sqlprof report: --width wants an integer\n");
				return SP_EXIT_USAGE;
			}
			o.width = (size_t)u;
			o.width_set = 1;
			break;
		case 'h': usage(stdout); return SP_EXIT_OK;
		default: sp_usage_hint("report"); return SP_EXIT_USAGE;
		}
	}
	if (strcmp(o.format, "table") && strcmp(o.format, "csv") && strcmp(o.format, "json")) {
		fprintf(stderr, "sqlprof report: unknown format '%s' (table, csv, json)\n",
			o.format);
		return SP_EXIT_USAGE;
	}
	if (strcmp(o.by, "sql") && strcmp(o.by, "function") && strcmp(o.by, "site")) {
		fprintf(stderr, "sqlprof report: --by wants sql, function or site, not '%s'\n",
			o.by);
		return SP_EXIT_USAGE;
	}
	if (wr.last && wr.since) {
		fprintf(stderr, "sqlprof report: --last and --since both set the window's start; "
				"give one\n");
		return SP_EXIT_USAGE;
	}
	if (!sort_key_ok(o.sort)) /* before the profile is read */
		return SP_EXIT_USAGE;
	if (optind < argc)
		path = argv[optind++];
	if (optind < argc) {
		fprintf(stderr, "sqlprof report: one profile at a time\n");
		return SP_EXIT_USAGE;
	}
	db = sp_profile_open(path, err, sizeof(err));
	if (!db) {
		fprintf(stderr, "sqlprof report: %s\n", err);
		return SP_EXIT_INPUT;
	}
	agent_profile_ = is_agent_profile(db);
	if (sp_winreq_on(&wr) && sp_window_resolve(db, &wr, &win, err, sizeof(err)) < 0) {
		fprintf(stderr, "sqlprof report: %s: %s\n", path, err);
		sqlite3_close(db);
		return SP_EXIT_USAGE;
	}
	if ((lrc = sp_qset_load_window(db, &win, &qs, err, sizeof(err))) < 0) {
		if (sp_untrusted_exhausted(err, sizeof(err)))
			fprintf(stderr, "sqlprof report: %s\n", err);
		else
			fprintf(stderr, "sqlprof report: %s: %s\n", path, err);
		sqlite3_close(db);
		return sp_err_exit(lrc);
	}
	if ((lrc = sp_attrib_load(db, o.skip, &at, err, sizeof(err))) < 0) {
		if (sp_untrusted_exhausted(err, sizeof(err)))
			fprintf(stderr, "sqlprof report: %s\n", err);
		else
			fprintf(stderr, "sqlprof report: %s: %s\n", path, err);
		sp_qset_free(&qs);
		sqlite3_close(db);
		return sp_err_exit(lrc);
	}
	if (estimate_sites(db, &qs, &at) < 0) {
		fprintf(stderr, "sqlprof report: out of memory\n");
		sp_qset_free(&qs);
		sp_attrib_free(&at);
		sqlite3_close(db);
		return SP_EXIT_INTERNAL;
	}
	sp_qsort(at.qs, at.nqs, sizeof(*at.qs), cmp_qsite);
	if (sp_attrib_index(&at) < 0) {
		fprintf(stderr, "sqlprof report: out of memory\n");
		sp_qset_free(&qs);
		sp_attrib_free(&at);
		sqlite3_close(db);
		return SP_EXIT_INTERNAL;
	}
	if (sp_qset_sort(&qs, o.sort) < 0) {
		fprintf(stderr, "sqlprof report: unknown sort key '%s' (%s)\n", o.sort, SORT_KEYS);
		sp_qset_free(&qs);
		sp_attrib_free(&at);
		sqlite3_close(db);
		return SP_EXIT_USAGE;
	}
	n = o.top && o.top < qs.n ? (size_t)o.top : qs.n;
	if (sp_failures_load(db, &fails) < 0 ||
	    (!strcmp(o.format, "table")
		     ? 0
		     : !o.no_doctor &&
			       sp_doctor_find(db, &qs, &at, &SP_DOCTOR_DEFAULTS, &finds) < 0)) {
		fprintf(stderr, "sqlprof report: out of memory\n");
		sp_failures_free(&fails);
		sp_qset_free(&qs);
		sp_attrib_free(&at);
		sqlite3_close(db);
		return SP_EXIT_INTERNAL;
	}
	if (!strcmp(o.format, "table")) {
		struct sp_path_root pr = { .n = 0 };

		/* source paths relative to the sites' common directory */
		for (size_t k = 0; !o.full_paths && k < at.nqs; k++)
			if (at.qs[k].site >= 0 && strcmp(at.sites[at.qs[k].site].file, "??"))
				sp_path_root_add(&pr, at.sites[at.qs[k].site].file);
		o.root = o.full_paths ? NULL : sp_path_root_get(&pr);
		if (o.root && !(o.root = strdup(o.root)))
			o.full_paths = 1;
		root_ = o.root;
		sp_doctor_set_root(o.root);
		o.fit = sp_fit_width(1);
		real = sp_term_begin(&stdout); /* for a terminal: no escape sequences */
		if (o.fit && (fitted = sp_fit_stream(stdout, o.fit))) {
			termed = stdout;
			stdout = fitted; /* the last resort: lines still too wide wrap */
		}
	}
	if (strcmp(o.by, "sql"))
		print_grouped(&at, &qs, &o);
	else if (!strcmp(o.format, "json"))
		print_json(&qs, n, &at, &finds, &fails);
	else if (!strcmp(o.format, "csv") && o.csv_table == 1)
		print_csv_findings(&finds);
	else if (!strcmp(o.format, "csv") && o.csv_table == 2)
		print_csv_failures(&fails, &at);
	else if (!strcmp(o.format, "csv"))
		print_csv(&qs, n);
	else {
		print_table(&qs, &o, n, &at);
		print_errors(&fails, &at);
		if (!o.no_doctor)
			sp_doctor_print(db, &qs, &at, stdout);
	}
	if (fitted) {
		werr = fclose(fitted) != 0;
		stdout = termed;
	}
	werr |= real && sp_term_end(&stdout, real) < 0;
	sp_doctor_set_root(NULL);
	free((char *)o.root);
	root_ = NULL;
	sp_findings_free(&finds);
	sp_failures_free(&fails);
	sp_qset_free(&qs);
	sp_attrib_free(&at);
	sqlite3_close(db);
	if (sp_untrusted_exhausted(err, sizeof(err))) {
		fprintf(stderr, "sqlprof report: %s\n", err);
		return SP_EXIT_INPUT;
	}
	if (werr || fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, "sqlprof report: error writing output\n");
		return SP_EXIT_INTERNAL;
	}
	return SP_EXIT_OK;
}
