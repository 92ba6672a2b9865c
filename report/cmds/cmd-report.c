/* SPDX-License-Identifier: MIT */
/*
 * cmd-report.c - `sqlprof report`: per-query totals from a profile, as a
 * table, CSV or JSON: options, loading (query.c, attrib.c) and the
 * choice of printer, one per format (report-table.c, report-csv.c,
 * report-json.c, report-group.c for --by).
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
#include "report.h"
#include "untrusted.h"
#include "util.h"

#define SORT_KEYS "total, count, mean, p50, p95, p99, max, rows, self, errors, vm, prepare"

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

static int cmp_qsite(const void *pa, const void *pb)
{
	const struct sp_qsite *a = pa, *b = pb;

	return a->est_count < b->est_count ? 1 : a->est_count > b->est_count ? -1 : 0;
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

/* Where each query's sites are in at->qord, in qs's order (the
 * profile's, before the sort): rng[2 i] the first, rng[2 i + 1] how many.
 * Malloc'd; NULL on ENOMEM. */
static size_t *site_ranges(const struct sp_attrib *at, const struct sp_qset *qs)
{
	size_t *rng = malloc((qs->n ? qs->n : 1) * 2 * sizeof(*rng));

	for (size_t i = 0; rng && i < qs->n; i++) {
		const size_t *ix = sp_attrib_query_sites(
			at, qs->rows[i].fp_id, qs->rows[i].kind == SP_QK_EXEC, &rng[2 * i + 1]);

		rng[2 * i] = ix ? (size_t)(ix - at->qord) : 0;
	}
	return rng;
}

/*
 * Move each query's sites together in at->qs, the queries in the order
 * they are printed (qs sorted; row j was row perm[j] before, whose sites
 * rng gives: site_ranges), each query's sites in their order (the rest
 * after them, in theirs), and index them again: the table's sites are
 * then read in order, not at random (a cache miss a site, a fifth of
 * report's CPU at 200,000 fingerprints), and found without the index's
 * map (sp_attrib_query_sites' cursor); moved in place (sp_permute).
 * Only --by sql: the grouped report reads at->qs whole. 0, or -1 on
 * ENOMEM.
 */
static int group_sites(struct sp_attrib *at, const struct sp_qset *qs, const size_t *rng,
		       const size_t *perm)
{
	size_t *from = malloc((at->nqs ? at->nqs : 1) * sizeof(*from));
	unsigned char *done = calloc(at->nqs ? at->nqs : 1, 1);
	size_t i, j, n = 0;
	int in_order = 1, rc = -1;

	if (!from || !done)
		goto out;
	for (i = 0; i < qs->n; i++) {
		const size_t *r = &rng[2 * perm[i]];

		for (j = 0; j < r[1]; j++) {
			size_t s = at->qord[r[0] + j];

			if (!done[s]) { /* a hostile profile's query twice */
				done[s] = 1;
				in_order &= s == n;
				from[n++] = s;
			}
		}
	}
	for (i = 0; i < at->nqs; i++)
		if (!done[i]) {
			in_order &= i == n;
			from[n++] = i;
		}
	if (in_order)
		rc = 0;
	else if (sp_permute(at->qs, at->nqs, sizeof(*at->qs), from) == 0)
		rc = sp_attrib_index_runs(at);
out:
	free(from);
	free(done);
	return rc;
}

/*
 * Each query's sites by their estimated executions, the most first (ties
 * in their order in at->qs): the order the global sort by cmp_qsite gave
 * them, without moving any site to another query's slots, so that the
 * index stays as it is (the sort and the index built again were a tenth
 * of report's CPU at 200,000 fingerprints). A stable insertion sort:
 * a query has a few sites.
 */
static void sort_query_sites(struct sp_attrib *at, const struct sp_qset *qs)
{
	for (size_t i = 0; i < qs->n; i++) {
		size_t j, k, n;
		const size_t *ix = sp_attrib_query_sites(at, qs->rows[i].fp_id,
							 qs->rows[i].kind == SP_QK_EXEC, &n);

		for (j = 1; j < n; j++) {
			struct sp_qsite t = at->qs[ix[j]];

			for (k = j; k > 0 && cmp_qsite(&at->qs[ix[k - 1]], &t) > 0; k--)
				at->qs[ix[k]] = at->qs[ix[k - 1]];
			at->qs[ix[k]] = t;
		}
	}
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

/* The options' values that getopt cannot check, and the profile's path
 * (argv after the options). -1 to go on, else the exit code. */
static int check_opts(int argc, char **argv, const struct report_opts *o,
		      const struct sp_winreq *wr, const char **path)
{
	if (strcmp(o->format, "table") && strcmp(o->format, "csv") && strcmp(o->format, "json")) {
		fprintf(stderr, "sqlprof report: unknown format '%s' (table, csv, json)\n",
			o->format);
		return SP_EXIT_USAGE;
	}
	if (strcmp(o->by, "sql") && strcmp(o->by, "function") && strcmp(o->by, "site")) {
		fprintf(stderr, "sqlprof report: --by wants sql, function or site, not '%s'\n",
			o->by);
		return SP_EXIT_USAGE;
	}
	if (wr->last && wr->since) {
		fprintf(stderr, "sqlprof report: --last and --since both set the window's start; "
				"give one\n");
		return SP_EXIT_USAGE;
	}
	if (!sort_key_ok(o->sort)) /* before the profile is read */
		return SP_EXIT_USAGE;
	if (optind < argc)
		*path = argv[optind++];
	if (optind < argc) {
		fprintf(stderr, "sqlprof report: one profile at a time\n");
		return SP_EXIT_USAGE;
	}
	return -1;
}

/* Parse report's options into o, wr and *path. Returns -1 to go on, else
 * the exit code (usage errors, --help). */
static int parse_opts(int argc, char **argv, struct report_opts *o, struct sp_winreq *wr,
		      const char **path)
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
	uint64_t u;
	int opt;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "s:n:f:w:b:h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'b': o->by = optarg; break;
		case 1:
			if (o->nskip == MAX_SKIP) {
				fprintf(stderr, "sqlprof report: at most %d --skip patterns\n",
					MAX_SKIP);
				return SP_EXIT_USAGE;
			}
			o->skip[o->nskip++] = optarg;
			break;
		case 2: o->stacks = 1; break;
		case 3: o->plans = 1; break;
		case 4: o->no_doctor = 1; break;
		case 5: o->csv_table = 1; break;
		case 6: o->csv_table = 2; break;
		case 7: sp_attrib_set_debug_dir(optarg); break;
		case 8: o->full_paths = 1; break;
		case 12: sp_attrib_set_all_frames(1); break;
		case 9:
		case 10:
		case 11:
			if (sp_winreq_set(wr,
					  opt == 9    ? 's'
					  : opt == 10 ? 'u'
						      : 'l',
					  optarg, "report") < 0)
				return SP_EXIT_USAGE;
			break;
		case 's': o->sort = optarg; break;
		case 'f': o->format = optarg; break;
		case 'n':
			if (sp_parse_u64(optarg, &o->top) < 0) {
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
			o->width = (size_t)u;
			o->width_set = 1;
			break;
		case 'h': usage(stdout); return SP_EXIT_OK;
		default: sp_usage_hint("report"); return SP_EXIT_USAGE;
		}
	}
	return check_opts(argc, argv, o, wr, path);
}

/* Source paths relative to the sites' common directory (o->root, malloc'd
 * or NULL), then stdout made ready for a terminal: *real, and the fitting
 * stream *fitted in place of stdout (*termed) when the table is fitted. */
static void table_begin(struct report_opts *o, const struct sp_attrib *at, FILE **real,
			FILE **fitted, FILE **termed)
{
	struct sp_path_root pr = { .n = 0 };

	for (size_t k = 0; !o->full_paths && k < at->nqs; k++)
		if (at->qs[k].site >= 0 && strcmp(at->sites[at->qs[k].site].file, "??"))
			sp_path_root_add(&pr, at->sites[at->qs[k].site].file);
	o->root = o->full_paths ? NULL : sp_path_root_get(&pr);
	if (o->root && !(o->root = strdup(o->root)))
		o->full_paths = 1;
	sp_rep_root = o->root;
	sp_doctor_set_root(o->root);
	o->fit = sp_fit_width(1);
	*real = sp_term_begin(&stdout); /* for a terminal: no escape sequences */
	if (o->fit && (*fitted = sp_fit_stream(stdout, o->fit))) {
		*termed = stdout;
		stdout = *fitted; /* the last resort: lines still too wide wrap */
	}
}

/* The report in o->format (o->by), the first n queries. */
static void print_report(sqlite3 *db, const struct report_opts *o, size_t n,
			 const struct sp_qset *qs, const struct sp_attrib *at,
			 const struct sp_findings *finds, const struct sp_failures *fails)
{
	if (strcmp(o->by, "sql"))
		sp_rep_grouped(at, qs, o);
	else if (!strcmp(o->format, "json"))
		sp_rep_json(qs, n, at, finds, fails);
	else if (!strcmp(o->format, "csv") && o->csv_table == 1)
		sp_rep_csv_findings(finds);
	else if (!strcmp(o->format, "csv") && o->csv_table == 2)
		sp_rep_csv_failures(fails, at);
	else if (!strcmp(o->format, "csv"))
		sp_rep_csv(qs, n);
	else {
		sp_rep_table(qs, o, n, at);
		sp_rep_errors(fails, at);
		if (!o->no_doctor)
			sp_doctor_print(db, qs, at, stdout);
	}
}

/* Load what the report shows: the queries (of the window wr asks for),
 * their sites, sorted, the failures and (not for the table, which runs the
 * doctor as it prints) the findings. 0, or the exit code with a message
 * printed. */
static int load(sqlite3 *db, const char *path, const struct report_opts *o,
		const struct sp_winreq *wr, struct sp_qset *qs, struct sp_attrib *at,
		struct sp_findings *finds, struct sp_failures *fails)
{
	struct sp_window win = { 0 };
	size_t *rng = NULL, *perm = NULL; /* --by sql: group_sites's */
	int lrc, sorted, by_sql = !strcmp(o->by, "sql");
	char err[512];

	if (sp_winreq_on(wr) && sp_window_resolve(db, wr, &win, err, sizeof(err)) < 0) {
		fprintf(stderr, "sqlprof report: %s: %s\n", path, err);
		return SP_EXIT_USAGE;
	}
	if ((lrc = sp_qset_load_window(db, &win, qs, err, sizeof(err))) < 0 ||
	    (lrc = sp_attrib_load(db, o->skip, at, err, sizeof(err))) < 0) {
		if (sp_untrusted_exhausted(err, sizeof(err)))
			fprintf(stderr, "sqlprof report: %s\n", err);
		else
			fprintf(stderr, "sqlprof report: %s: %s\n", path, err);
		return sp_err_exit(lrc);
	}
	/* the estimates in the profile's order; then --by sql: the queries
	 * sorted, their sites moved to the order printed and each query's
	 * sorted; --by function and site read at->qs whole, in that order */
	if ((by_sql && !(rng = site_ranges(at, qs))) || estimate_sites(db, qs, at) < 0 ||
	    (sorted = sp_qset_sort_perm(qs, o->sort, by_sql ? &perm : NULL)) == -2)
		goto nomem;
	if (sorted < 0) {
		fprintf(stderr, "sqlprof report: unknown sort key '%s' (%s)\n", o->sort, SORT_KEYS);
		free(rng);
		return SP_EXIT_USAGE;
	}
	if (by_sql) {
		if (group_sites(at, qs, rng, perm) < 0)
			goto nomem;
		sort_query_sites(at, qs);
	} else {
		sp_qsort(at->qs, at->nqs, sizeof(*at->qs), cmp_qsite);
		if (sp_attrib_index(at) < 0)
			goto nomem;
	}
	free(rng);
	free(perm);
	rng = perm = NULL;
	if (sp_failures_load(db, fails) < 0 ||
	    (strcmp(o->format, "table") && !o->no_doctor &&
	     sp_doctor_find(db, qs, at, &SP_DOCTOR_DEFAULTS, finds) < 0))
		goto nomem;
	return 0;
nomem:
	free(rng);
	free(perm);
	fprintf(stderr, "sqlprof report: out of memory\n");
	return SP_EXIT_INTERNAL;
}

int cmd_report(int argc, char **argv)
{
	struct report_opts o = { .sort = "total", .format = "table", .by = "sql", .width = 80 };
	struct sp_attrib at = { 0 };
	const char *path = SP_PROFILE_DEFAULT;
	struct sp_qset qs = { 0 };
	struct sp_findings finds = { 0 };
	struct sp_failures fails = { 0 };
	struct sp_winreq wr = { 0 };
	sqlite3 *db;
	FILE *real = NULL, *fitted = NULL, *termed = NULL;
	char err[512];
	int rc, werr = 0;

	if ((rc = parse_opts(argc, argv, &o, &wr, &path)) >= 0)
		return rc;
	db = sp_profile_open(path, err, sizeof(err));
	if (!db) {
		fprintf(stderr, "sqlprof report: %s\n", err);
		return SP_EXIT_INPUT;
	}
	sp_rep_agent = is_agent_profile(db);
	if ((rc = load(db, path, &o, &wr, &qs, &at, &finds, &fails)) != 0)
		goto cleanup;
	if (!strcmp(o.format, "table"))
		table_begin(&o, &at, &real, &fitted, &termed);
	print_report(db, &o, o.top && o.top < qs.n ? (size_t)o.top : qs.n, &qs, &at, &finds,
		     &fails);
	if (fitted) {
		werr = fclose(fitted) != 0;
		stdout = termed;
	}
	werr |= real && sp_term_end(&stdout, real) < 0;
	if (sp_untrusted_exhausted(err, sizeof(err))) {
		fprintf(stderr, "sqlprof report: %s\n", err);
		rc = SP_EXIT_INPUT;
	} else if (werr || fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, "sqlprof report: error writing output\n");
		rc = SP_EXIT_INTERNAL;
	}
cleanup:
	sp_doctor_set_root(NULL);
	free((char *)o.root);
	sp_rep_root = NULL;
	sp_findings_free(&finds);
	sp_failures_free(&fails);
	sp_qset_free(&qs);
	sp_attrib_free(&at);
	sqlite3_close(db);
	return rc;
}
