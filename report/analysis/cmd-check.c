/* SPDX-License-Identifier: MIT */
/*
 * cmd-check.c - `sqlprof check --baseline BASE NEW`: the CI gate. Compares
 * the candidate with the baseline (compare.c), applies the thresholds and
 * rules, prints the verdict (text, JSON or Markdown), optionally writes
 * JUnit XML with one test case per fingerprint, and exits 0 (within
 * bounds), 1 (regression), 2 (usage) or 3 (unreadable profile).
 *
 * What fails a build, and why it does not flake:
 *  - deterministic rules: a new query, a plan that lost an index (or gained
 *    a temp B-tree or automatic index), a new full scan, a doctor finding
 *    (N+1, re-prepare churn, ...) absent from the baseline, and count or VM
 *    steps above the allowed increase. Same program, same data: same
 *    numbers, so these are exact comparisons.
 *  - time, only with >= 3 runs a side (several profiles per side, or
 *    `record --repeat`): per fingerprint, the per-run mean db times of both
 *    sides differ by a two-sided Mann-Whitney U test at alpha = 0.05 AND the
 *    candidate's median is more than --max-time-increase above the
 *    baseline's, and the added time is at least --min-time-share of the
 *    baseline's db time per run (many tiny queries tested at once would
 *    otherwise each get their 5% chance of a false alarm). With fewer runs time is printed, never judged: a single
 *    noisy run never fails a build on time alone.
 */
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cmds.h"
#include "compare.h"
#include "diff-print.h"
#include "doctor.h"
#include "export.h" /* sp_xml_str */
#include "untrusted.h"
#include "util.h"

#define MAX_SKIP 64
#define MAX_PROFILES 1024
#define ALPHA 0.05
#define MIN_TIME_RUNS 3

enum {
	R_NEW_QUERY,
	R_PLAN_CHANGE,
	R_NEW_FULLSCAN,
	R_NPLUS1,
	R_REPREPARE,
	R_TEMPBTREE,
	R_AUTOINDEX,
	R_FULLSCAN,
	R_DUPLICATE,
	R_COUNT,
	R_VM,
	R_TIME,
	R_N,
};

static const char *const rname[R_N] = {
	[R_NEW_QUERY] = "new-query",   [R_PLAN_CHANGE] = "plan-change", [R_NEW_FULLSCAN] = "new-fullscan",
	[R_NPLUS1] = "n-plus-one",     [R_REPREPARE] = "reprepare",     [R_TEMPBTREE] = "temp-btree",
	[R_AUTOINDEX] = "auto-index",  [R_FULLSCAN] = "full-scan",      [R_DUPLICATE] = "duplicate",
	[R_COUNT] = "count-increase",
	[R_VM] = "vm-steps-increase",  [R_TIME] = "time-increase",
};

/* the doctor rule behind each --fail-on name, -1 if none */
static int doctor_rule(int r)
{
	switch (r) {
	case R_NPLUS1: return SP_RULE_NPLUS1;
	case R_REPREPARE: return SP_RULE_REPREPARE;
	case R_TEMPBTREE: return SP_RULE_TEMPBTREE;
	case R_AUTOINDEX: return SP_RULE_AUTOINDEX;
	case R_FULLSCAN: return SP_RULE_FULLSCAN;
	case R_DUPLICATE: return SP_RULE_DUPLICATE;
	default: return -1;
	}
}

#define DEFAULT_FAIL_ON                                                                             \
	((1u << R_NEW_QUERY) | (1u << R_PLAN_CHANGE) | (1u << R_NEW_FULLSCAN) | (1u << R_NPLUS1) |  \
	 (1u << R_REPREPARE) | (1u << R_TEMPBTREE) | (1u << R_AUTOINDEX))

struct check_opts {
	const char *format;
	const char *junit;
	double max_count, max_vm, max_time; /* percent; < 0: off */
	double min_time_share;              /* percent of the baseline's db time per run */
	unsigned fail_on;
	const char *skip[MAX_SKIP + 1];
	int nskip;
	const char *base[MAX_PROFILES];
	size_t nbase;
};

struct regression {
	const struct sp_qdiff *q;
	int rule;
	char detail[1100];
	char site[512];
};

struct result {
	struct regression *r;
	size_t n, cap;
	size_t nfailing;   /* fingerprints with at least one regression */
	size_t timed;      /* fingerprints whose time was tested */
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: sqlprof check --baseline BASE [--baseline BASE2 ...] [OPTIONS] NEW [NEW2 ...]\n"
		"\n"
		"Fail (exit 1) when the candidate profile(s) NEW regress against the baseline(s).\n"
		"Several profiles a side (or profiles recorded with `record --repeat N`) are runs;\n"
		"deterministic metrics are compared per run, as medians over the profiles.\n"
		"\n"
		"  -b, --baseline FILE          baseline profile (required; repeatable)\n"
		"      --max-count-increase P   executions of a query may grow by P%% (default 0;\n"
		"                               'off' to disable)\n"
		"      --max-vm-steps-increase P  VM steps of a query may grow by P%% (default 10)\n"
		"      --max-time-increase P    median time per execution may grow by P%% (default 10);\n"
		"                               judged only with >= %d runs a side, and only when a\n"
		"                               two-sided Mann-Whitney U test gives p < %.2f\n"
		"      --min-time-share P       judge the time of a query only if its added time is\n"
		"                               >= P%% of the baseline's db time per run (default 1)\n"
		"      --fail-on RULES          comma-separated, default new-query,plan-change,\n"
		"                               new-fullscan,n-plus-one,reprepare,temp-btree,auto-index;\n"
		"                               also full-scan (doctor: big-table scans), duplicate\n"
		"                               (doctor: the same values again; needs --rate 1 or a\n"
		"                               fixed --seed on both sides), all, none\n"
		"      --junit FILE             write JUnit XML, one test case per query\n"
		"  -f, --format FMT             text (default), json, markdown\n"
		"      --skip PATTERN           never attribute to frames matching PATTERN (repeatable)\n"
		"  -h, --help                   this text\n"
		"\n"
		"Rules: new-query (a fingerprint the baseline never ran), plan-change (a table read\n"
		"through an index is now scanned, or a temp B-tree / automatic index appeared),\n"
		"new-fullscan (full-scan steps from 0 to > 0, or a new query scanning), and the query\n"
		"doctor's findings that the baseline does not have: n-plus-one, reprepare,\n"
		"temp-btree, auto-index, full-scan, duplicate.\n"
		"\n"
		"Exit status: 0 within bounds, 1 regression, 2 usage, 3 unreadable profile, 4 internal.\n"
		"\n"
		"examples:\n"
		"  sqlprof check --baseline main.db pr.db\n"
		"  sqlprof check --baseline main.db pr.db --junit sqlprof.xml --format markdown\n"
		"  sqlprof check -b m1.db -b m2.db -b m3.db -b m4.db -b m5.db p1.db p2.db p3.db p4.db p5.db\n",
		MIN_TIME_RUNS, ALPHA);
}

static int parse_pct(const char *s, double *out)
{
	if (!strcmp(s, "off")) {
		*out = -1;
		return 0;
	}
	return sp_parse_double(s, 0, 1e9, out);
}

static int parse_rules(const char *s, unsigned *out)
{
	char buf[512], *tok, *save;

	if (strlen(s) >= sizeof(buf))
		return -1;
	snprintf(buf, sizeof(buf), "%s", s);
	*out = 0;
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		int r;

		if (!strcmp(tok, "none"))
			continue;
		if (!strcmp(tok, "all")) {
			*out |= DEFAULT_FAIL_ON | (1u << R_FULLSCAN);
			continue;
		}
		for (r = 0; r <= R_FULLSCAN; r++)
			if (!strcmp(tok, rname[r]))
				break;
		if (r > R_FULLSCAN)
			return -1;
		*out |= 1u << r;
	}
	return 0;
}

static struct regression *add(struct result *res, const struct sp_qdiff *q, int rule,
			      const struct sp_side *base, const struct sp_side *cand)
{
	struct regression *g;
	const struct sp_side *s = q->cand ? cand : base;

	if (SP_GROW(res->r, res->cap, res->n + 1, 16) < 0)
		return NULL;
	g = &res->r[res->n++];
	memset(g, 0, sizeof(*g));
	g->q = q;
	g->rule = rule;
	sp_doctor_site(s->np ? &s->p[0].at : NULL, q->fp_id, q->kind == SP_QK_EXEC, g->site,
		       sizeof(g->site));
	return g;
}

static int has_finding(const struct sp_findings *fs, int rule, int64_t fp, enum sp_qkind kind)
{
	for (size_t i = 0; i < fs->n; i++)
		if ((int)fs->f[i].rule == rule && fs->f[i].q->fp_id == fp &&
		    fs->f[i].q->kind == kind)
			return 1;
	return 0;
}

static const struct sp_finding *find_finding(const struct sp_findings *fs, int rule, int64_t fp,
					     enum sp_qkind kind)
{
	for (size_t i = 0; i < fs->n; i++)
		if ((int)fs->f[i].rule == rule && fs->f[i].q->fp_id == fp &&
		    fs->f[i].q->kind == kind)
			return &fs->f[i];
	return NULL;
}

static int pct_over(uint64_t a, uint64_t b, double pct)
{
	return pct >= 0 && a > 0 && (double)b > (double)a * (1 + pct / 100.0);
}

/* Apply thresholds and rules. Returns 0, or -1 on ENOMEM. */
static int judge(const struct check_opts *o, const struct sp_side *base, const struct sp_side *cand,
		 const struct sp_diff *d, const struct sp_findings *fb, const struct sp_findings *fc,
		 struct result *res)
{
	struct regression *g;
	size_t i;
	char x[32], y[32];
	double base_ns = 0; /* the baseline's db time per run (self: nothing twice) */

	for (i = 0; i < base->agg.n; i++)
		base_ns += (double)base->agg.rows[i].self_ns;

	for (i = 0; i < d->nq; i++) {
		const struct sp_qdiff *q = &d->q[i];
		size_t before = res->n;
		int r;

		if (q->time_tested)
			res->timed++;
		if (!q->cand)
			continue; /* vanished: never a regression */
		if ((q->flags & SP_QD_NEW) && (o->fail_on & (1u << R_NEW_QUERY))) {
			if (!(g = add(res, q, R_NEW_QUERY, base, cand)))
				return -1;
			snprintf(g->detail, sizeof(g->detail),
				 "query not in the baseline: %llu executions, %llu VM steps per run",
				 (unsigned long long)q->m[1][SP_M_COUNT],
				 (unsigned long long)q->m[1][SP_M_VM_STEPS]);
		}
		if ((q->flags & SP_QD_PLAN_WORSE) && (o->fail_on & (1u << R_PLAN_CHANGE))) {
			if (!(g = add(res, q, R_PLAN_CHANGE, base, cand)))
				return -1;
			snprintf(g->detail, sizeof(g->detail), "plan: %s", q->plan_note);
		}
		if ((q->flags & SP_QD_NEW_FULLSCAN) && (o->fail_on & (1u << R_NEW_FULLSCAN))) {
			if (!(g = add(res, q, R_NEW_FULLSCAN, base, cand)))
				return -1;
			snprintf(g->detail, sizeof(g->detail),
				 "full-scan steps %llu -> %llu per run%s%s",
				 (unsigned long long)q->m[0][SP_M_FULLSCAN],
				 (unsigned long long)q->m[1][SP_M_FULLSCAN],
				 q->plan_note[0] ? "; plan: " : "", q->plan_note);
		}
		/* doctor findings the baseline does not have (before the thresholds:
		 * the first regression of a query is its JUnit failure type) */
		for (r = 0; r < R_N; r++) {
			int dr = doctor_rule(r);
			const struct sp_finding *f;

			if (dr < 0 || !(o->fail_on & (1u << r)))
				continue;
			f = find_finding(fc, dr, q->fp_id, q->kind);
			if (!f || has_finding(fb, dr, q->fp_id, q->kind))
				continue;
			if (!(g = add(res, q, r, base, cand)))
				return -1;
			snprintf(g->detail, sizeof(g->detail), "%s; suggestion: %s", f->evidence,
				 f->suggestion);
			snprintf(g->site, sizeof(g->site), "%s", f->site);
		}
		if (q->base && pct_over(q->m[0][SP_M_COUNT], q->m[1][SP_M_COUNT], o->max_count)) {
			if (!(g = add(res, q, R_COUNT, base, cand)))
				return -1;
			snprintf(g->detail, sizeof(g->detail),
				 "executions %llu -> %llu per run (%+.0f%%; allowed +%g%%)",
				 (unsigned long long)q->m[0][SP_M_COUNT],
				 (unsigned long long)q->m[1][SP_M_COUNT],
				 ((double)q->m[1][SP_M_COUNT] - (double)q->m[0][SP_M_COUNT]) * 100 /
					 (double)q->m[0][SP_M_COUNT],
				 o->max_count);
		}
		if (q->base && pct_over(q->m[0][SP_M_VM_STEPS], q->m[1][SP_M_VM_STEPS], o->max_vm)) {
			if (!(g = add(res, q, R_VM, base, cand)))
				return -1;
			snprintf(g->detail, sizeof(g->detail),
				 "VM steps %llu -> %llu per run (%+.0f%%; allowed +%g%%)",
				 (unsigned long long)q->m[0][SP_M_VM_STEPS],
				 (unsigned long long)q->m[1][SP_M_VM_STEPS],
				 ((double)q->m[1][SP_M_VM_STEPS] - (double)q->m[0][SP_M_VM_STEPS]) *
					 100 / (double)q->m[0][SP_M_VM_STEPS],
				 o->max_vm);
		}
		if (q->base && q->time_tested && o->max_time >= 0 && q->p_value < ALPHA &&
		    q->t_median[1] > q->t_median[0] * (1 + o->max_time / 100.0) &&
		    (q->t_median[1] - q->t_median[0]) * (double)q->m[1][SP_M_COUNT] >=
			    o->min_time_share / 100.0 * base_ns) {
			if (!(g = add(res, q, R_TIME, base, cand)))
				return -1;
			snprintf(g->detail, sizeof(g->detail),
				 "median of per-run mean time %s -> %s (%+.0f%%; allowed +%g%%),"
				 " Mann-Whitney p = %.3g < %.2f over %zu vs %zu runs",
				 sp_fmt_ns(x, sizeof(x), q->t_median[0]),
				 sp_fmt_ns(y, sizeof(y), q->t_median[1]),
				 (q->t_median[1] - q->t_median[0]) * 100 / q->t_median[0], o->max_time,
				 q->p_value, ALPHA, q->nt[0], q->nt[1]);
		}
		if (res->n > before)
			res->nfailing++;
	}
	return 0;
}

/* ---- output -------------------------------------------------------------- */

static void timing_note(char *buf, size_t len, const struct sp_side *base, const struct sp_side *cand,
			const struct result *res)
{
	if (base->total_runs < MIN_TIME_RUNS || cand->total_runs < MIN_TIME_RUNS)
		snprintf(buf, len,
			 "time informational only: %llu baseline run(s), %llu candidate run(s);"
			 " judged with >= %d runs a side (Mann-Whitney U, alpha %.2f)",
			 (unsigned long long)base->total_runs, (unsigned long long)cand->total_runs,
			 MIN_TIME_RUNS, ALPHA);
	else
		snprintf(buf, len,
			 "time judged on %zu queries: Mann-Whitney U over %llu vs %llu runs,"
			 " alpha %.2f%s",
			 res->timed, (unsigned long long)base->total_runs,
			 (unsigned long long)cand->total_runs, ALPHA,
			 base->total_runs == 3 || cand->total_runs == 3 ?
				 " (with 3 runs a side p cannot go below 0.1: record 5 or more)" :
				 "");
}

static void print_text(const struct sp_side *base, const struct sp_side *cand,
		       const struct sp_diff *d, const struct result *res)
{
	char bd[1024], cd[1024], note[256];
	size_t i;

	sp_side_describe(base, bd, sizeof(bd));
	sp_side_describe(cand, cd, sizeof(cd));
	if (res->n)
		printf("sqlprof check: FAIL: %zu regression%s in %zu of %zu queries\n", res->n,
		       res->n == 1 ? "" : "s", res->nfailing, d->nq);
	else
		printf("sqlprof check: PASS: no regression in %zu queries\n", d->nq);
	printf("# baseline: %s\n# candidate: %s\n", bd, cd);
	for (i = 0; i < res->n; i++) {
		const struct regression *g = &res->r[i];
		const struct sp_qrow *r = g->q->cand ? g->q->cand : g->q->base;
		char *sql = sp_diff_sql(r->fingerprint, r->kind, 160);

		printf("REGRESSION %s: %s\n", rname[g->rule], sql ? sql : "?");
		printf("    at %s\n    %s\n", g->site, g->detail);
		free(sql);
	}
	printf("# %zu new, %zu vanished, %zu changed, %zu plan changes;"
	       " sqlprof diff shows every change\n",
	       d->n_new, d->n_vanished, d->n_changed, d->n_plan);
	timing_note(note, sizeof(note), base, cand, res);
	printf("# %s\n", note);
}

static void print_json(const struct sp_side *base, const struct sp_side *cand,
		       const struct sp_diff *d, const struct result *res)
{
	char note[256];
	size_t i;

	timing_note(note, sizeof(note), base, cand, res);
	printf("{\"result\": \"%s\", \"regressions\": [", res->n ? "fail" : "pass");
	for (i = 0; i < res->n; i++) {
		const struct regression *g = &res->r[i];
		const struct sp_qrow *r = g->q->cand ? g->q->cand : g->q->base;

		printf("%s\n  {\"rule\": \"%s\", \"fingerprint_id\": \"%016llx\", \"kind\": \"%s\","
		       " \"fingerprint\": ",
		       i ? "," : "", rname[g->rule], (unsigned long long)g->q->fp_id, sp_qkind_name(g->q->kind));
		sp_json_str(stdout, r->fingerprint);
		printf(", \"site\": ");
		sp_json_str(stdout, g->site);
		printf(", \"detail\": ");
		sp_json_str(stdout, g->detail);
		printf("}");
	}
	printf("\n ], \"timing\": ");
	sp_json_str(stdout, note);
	printf(",\n \"diff\": ");
	sp_diff_print(stdout, "json", base, cand, d, 0, 0);
	printf("}\n");
}

static void print_md(const struct sp_side *base, const struct sp_side *cand,
		     const struct sp_diff *d, const struct result *res)
{
	char note[256];
	size_t i;

	if (res->n)
		printf("## sqlprof check: ❌ %zu regression%s in %zu of %zu queries\n\n", res->n,
		       res->n == 1 ? "" : "s", res->nfailing, d->nq);
	else
		printf("## sqlprof check: ✅ no regression in %zu queries\n\n", d->nq);
	if (res->n) {
		printf("| Rule | Query | Site | Detail |\n|---|---|---|---|\n");
		for (i = 0; i < res->n; i++) {
			const struct regression *g = &res->r[i];
			const struct sp_qrow *r = g->q->cand ? g->q->cand : g->q->base;
			char *sql = sp_diff_sql(r->fingerprint, r->kind, 120);

			printf("| **%s** | ", rname[g->rule]);
			sp_md_cell(stdout, sql ? sql : "?", 1);
			printf(" | ");
			sp_md_cell(stdout, g->site, 0);
			printf(" | ");
			sp_md_cell(stdout, g->detail, 0);
			printf(" |\n");
			free(sql);
		}
		printf("\n");
	}
	timing_note(note, sizeof(note), base, cand, res);
	printf("_");
	sp_md_cell(stdout, note, 0);
	printf("_\n\n");
	sp_diff_print(stdout, "markdown", base, cand, d, 0, 50);
}

static int write_junit(const char *path, const struct sp_side *base, const struct sp_side *cand,
		       const struct sp_diff *d, const struct result *res)
{
	FILE *f = fopen(path, "w");
	char bd[1024], cd[1024], note[256];
	size_t i, j;
	double total = 0;

	if (!f)
		return -1;
	for (i = 0; i < d->nq; i++)
		if (d->q[i].cand)
			total += (double)d->q[i].cand->total_ns / 1e9;
	sp_side_describe(base, bd, sizeof(bd));
	sp_side_describe(cand, cd, sizeof(cd));
	timing_note(note, sizeof(note), base, cand, res);
	fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
	fprintf(f, "<testsuites name=\"sqlprof check\" tests=\"%zu\" failures=\"%zu\" errors=\"0\" time=\"%.6f\">\n",
		d->nq, res->nfailing, total);
	fprintf(f, "  <testsuite name=\"sqlprof check\" tests=\"%zu\" failures=\"%zu\" errors=\"0\""
		   " skipped=\"0\" time=\"%.6f\">\n",
		d->nq, res->nfailing, total);
	fprintf(f, "    <properties>\n      <property name=\"baseline\" value=\"");
	sp_xml_str(f, bd);
	fprintf(f, "\"/>\n      <property name=\"candidate\" value=\"");
	sp_xml_str(f, cd);
	fprintf(f, "\"/>\n      <property name=\"timing\" value=\"");
	sp_xml_str(f, note);
	fprintf(f, "\"/>\n    </properties>\n");
	for (i = 0; i < d->nq; i++) {
		const struct sp_qdiff *q = &d->q[i];
		const struct sp_qrow *r = q->cand ? q->cand : q->base;
		char *name = sp_diff_sql(r->fingerprint, r->kind, 200);
		size_t nfail = 0;

		fprintf(f, "    <testcase classname=\"sqlprof.query\" name=\"");
		sp_xml_str(f, name ? name : "?");
		free(name);
		fprintf(f, "\" time=\"%.6f\"", q->cand ? (double)q->cand->total_ns / 1e9 : 0.0);
		for (j = 0; j < res->n; j++)
			if (res->r[j].q == q)
				nfail++;
		if (!nfail) {
			if (q->flags & SP_QD_VANISHED)
				fprintf(f, ">\n      <system-out>vanished: not run by the candidate</system-out>\n    </testcase>\n");
			else
				fprintf(f, "/>\n");
			continue;
		}
		fprintf(f, ">\n      <failure type=\"");
		for (j = 0; j < res->n; j++)
			if (res->r[j].q == q) {
				sp_xml_str(f, rname[res->r[j].rule]);
				break;
			}
		fprintf(f, "\" message=\"");
		{
			int first = 1;

			for (j = 0; j < res->n; j++)
				if (res->r[j].q == q) {
					fprintf(f, "%s", first ? "" : ", ");
					sp_xml_str(f, rname[res->r[j].rule]);
					first = 0;
				}
		}
		fprintf(f, "\">");
		for (j = 0; j < res->n; j++)
			if (res->r[j].q == q) {
				sp_xml_str(f, rname[res->r[j].rule]);
				fprintf(f, ": ");
				sp_xml_str(f, res->r[j].detail);
				fprintf(f, "\n  at ");
				sp_xml_str(f, res->r[j].site);
				fprintf(f, "\n");
			}
		fprintf(f, "</failure>\n    </testcase>\n");
	}
	fprintf(f, "  </testsuite>\n</testsuites>\n");
	if (fflush(f) != 0 || ferror(f)) {
		fclose(f);
		return -1;
	}
	return fclose(f);
}

/* ---- the command --------------------------------------------------------- */

int cmd_check(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "baseline", required_argument, NULL, 'b' },
		{ "max-count-increase", required_argument, NULL, 1 },
		{ "max-vm-steps-increase", required_argument, NULL, 2 },
		{ "max-time-increase", required_argument, NULL, 3 },
		{ "fail-on", required_argument, NULL, 4 },
		{ "junit", required_argument, NULL, 5 },
		{ "skip", required_argument, NULL, 6 },
		{ "min-time-share", required_argument, NULL, 7 },
		{ "format", required_argument, NULL, 'f' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct check_opts o = { .format = "text", .max_count = 0, .max_vm = 10, .max_time = 10,
				.min_time_share = 1, .fail_on = DEFAULT_FAIL_ON };
	struct sp_doctor_opts dopt = SP_DOCTOR_DEFAULTS;
	struct sp_side base, cand;
	struct sp_findings fb = { 0 }, fc = { 0 };
	struct sp_diff d = { 0 };
	struct result res = { 0 };
	char err[1024];
	int opt, inerr, rc, li, werr = 0;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "b:f:h", longopts, &li)) != -1) {
		switch (opt) {
		case 'b':
			if (o.nbase == MAX_PROFILES) {
				fprintf(stderr, "sqlprof check: at most %d baselines\n", MAX_PROFILES);
				return SP_EXIT_USAGE;
			}
			o.base[o.nbase++] = optarg;
			break;
		case 1:
		case 2:
		case 3:
			if (parse_pct(optarg, opt == 1 ? &o.max_count : opt == 2 ? &o.max_vm : &o.max_time) <
			    0) {
				/* long-only options: getopt_long set li, the
				 * option's index (not its value) */
				fprintf(stderr, "sqlprof check: --%s wants a percentage >= 0 or 'off', not '%s'\n",
					longopts[li].name, optarg);
				return SP_EXIT_USAGE;
			}
			break;
		case 4:
			if (parse_rules(optarg, &o.fail_on) < 0) {
				fprintf(stderr, "sqlprof check: --fail-on: unknown rule in '%s' (new-query,"
						" plan-change, new-fullscan, n-plus-one, reprepare, temp-btree,"
						" auto-index, full-scan, all, none)\n",
					optarg);
				return SP_EXIT_USAGE;
			}
			break;
		case 5: o.junit = optarg; break;
		case 6:
			if (o.nskip == MAX_SKIP) {
				fprintf(stderr, "sqlprof check: at most %d --skip patterns\n", MAX_SKIP);
				return SP_EXIT_USAGE;
			}
			o.skip[o.nskip++] = optarg;
			break;
		case 7:
			if (sp_parse_double(optarg, 0, 100, &o.min_time_share) < 0) {
				fprintf(stderr, "sqlprof check: --min-time-share wants a percentage 0..100, not '%s'\n",
					optarg);
				return SP_EXIT_USAGE;
			}
			break;
		case 'f': o.format = optarg; break;
		case 'h': usage(stdout); return SP_EXIT_OK;
		default: sp_usage_hint("check"); return SP_EXIT_USAGE;
		}
	}
	if (strcmp(o.format, "text") && strcmp(o.format, "json") && strcmp(o.format, "markdown")) {
		fprintf(stderr, "sqlprof check: unknown format '%s' (text, json, markdown)\n", o.format);
		return SP_EXIT_USAGE;
	}
	if (!o.nbase) {
		fprintf(stderr, "sqlprof check: --baseline BASE is required\n");
		sp_usage_hint("check");
		return SP_EXIT_USAGE;
	}
	if (optind == argc) {
		fprintf(stderr, "sqlprof check: want at least one candidate profile NEW\n");
		sp_usage_hint("check");
		return SP_EXIT_USAGE;
	}
	if ((size_t)(argc - optind) > MAX_PROFILES) {
		fprintf(stderr, "sqlprof check: at most %d candidates\n", MAX_PROFILES);
		return SP_EXIT_USAGE;
	}
	if (sp_side_load(&base, o.base, o.nbase, o.skip, err, sizeof(err), &inerr) < 0) {
		fprintf(stderr, "sqlprof check: baseline: %s\n", err);
		return inerr ? SP_EXIT_INPUT : SP_EXIT_INTERNAL;
	}
	if (sp_side_load(&cand, (const char *const *)&argv[optind], (size_t)(argc - optind), o.skip,
			 err, sizeof(err), &inerr) < 0) {
		fprintf(stderr, "sqlprof check: candidate: %s\n", err);
		sp_side_free(&base);
		return inerr ? SP_EXIT_INPUT : SP_EXIT_INTERNAL;
	}
	rc = SP_EXIT_INTERNAL;
	if (sp_diff_build(&base, &cand, &d) < 0 ||
	    sp_doctor_find(base.p[0].db, &base.agg, &base.p[0].at, &dopt, &fb) < 0 ||
	    sp_doctor_find(cand.p[0].db, &cand.agg, &cand.p[0].at, &dopt, &fc) < 0 ||
	    judge(&o, &base, &cand, &d, &fb, &fc, &res) < 0) {
		fprintf(stderr, "sqlprof check: out of memory\n");
		goto out;
	}
	if (sp_untrusted_exhausted(err, sizeof(err))) { /* never judge half a profile */
		fprintf(stderr, "sqlprof check: %s\n", err);
		rc = SP_EXIT_INPUT;
		goto out;
	}
	if (!strcmp(o.format, "json")) {
		print_json(&base, &cand, &d, &res);
	} else { /* text for a terminal: no escape sequences */
		FILE *real = sp_term_begin(&stdout);

		if (!strcmp(o.format, "markdown"))
			print_md(&base, &cand, &d, &res);
		else
			print_text(&base, &cand, &d, &res);
		werr = sp_term_end(&stdout, real) < 0;
	}
	if (werr || fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, "sqlprof check: error writing output\n");
		goto out;
	}
	if (o.junit && write_junit(o.junit, &base, &cand, &d, &res) < 0) {
		fprintf(stderr, "sqlprof check: cannot write %s\n", o.junit);
		goto out;
	}
	rc = res.n ? SP_EXIT_REGRESSION : SP_EXIT_OK;
out:
	free(res.r);
	sp_findings_free(&fb);
	sp_findings_free(&fc);
	sp_diff_free(&d);
	sp_side_free(&base);
	sp_side_free(&cand);
	return rc;
}
