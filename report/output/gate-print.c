/* SPDX-License-Identifier: MIT */
/*
 * gate-print.c - see gate-print.h. What the verdict is, is gate.c's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gate-print.h"
#include "diff-print.h"
#include "export.h" /* sp_xml_str */
#include "util.h"

static void timing_note(char *buf, size_t len, const struct sp_side *base,
			const struct sp_side *cand, const struct sp_check_result *res)
{
	if (base->total_repeats < SP_CHECK_MIN_TIME_RUNS ||
	    cand->total_repeats < SP_CHECK_MIN_TIME_RUNS)
		snprintf(buf, len,
			 "time informational only: %llu baseline run(s), %llu candidate run(s);"
			 " judged with >= %d runs a side (Mann-Whitney U, alpha %.2f)",
			 (unsigned long long)base->total_repeats,
			 (unsigned long long)cand->total_repeats, SP_CHECK_MIN_TIME_RUNS,
			 SP_CHECK_ALPHA);
	else
		snprintf(buf, len,
			 "time judged on %zu queries: Mann-Whitney U over %llu vs %llu runs,"
			 " alpha %.2f%s",
			 res->timed, (unsigned long long)base->total_repeats,
			 (unsigned long long)cand->total_repeats, SP_CHECK_ALPHA,
			 base->total_repeats == 3 || cand->total_repeats == 3
				 ? " (with 3 runs a side p cannot go below 0.1: record 5 or more)"
				 : "");
}

/* The notes of one kind (improved 1: improvements; 0: set aside), as
 * text lines "LABEL: query" + detail. */
static void notes_text(const struct sp_check_result *res, int improved, const char *label)
{
	for (size_t i = 0; i < res->nnotes; i++) {
		const struct sp_check_note *n = &res->notes[i];
		const struct sp_qrow *r = n->q->cand ? n->q->cand : n->q->base;
		char *sql;

		if (n->improved != improved)
			continue;
		sql = sp_diff_sql(r->fingerprint, r->kind, 160);
		printf("%s: %s\n    %s\n", label, sql ? sql : "?", n->detail);
		free(sql);
	}
}

static void notes_md(const struct sp_check_result *res, int improved, const char *title)
{
	size_t i, n = 0;

	for (i = 0; i < res->nnotes; i++)
		n += res->notes[i].improved == improved;
	if (!n)
		return;
	printf("### %s\n\n| Query | Detail |\n|---|---|\n", title);
	for (i = 0; i < res->nnotes; i++) {
		const struct sp_check_note *x = &res->notes[i];
		const struct sp_qrow *r = x->q->cand ? x->q->cand : x->q->base;
		char *sql;

		if (x->improved != improved)
			continue;
		sql = sp_diff_sql(r->fingerprint, r->kind, 120);
		printf("| ");
		sp_md_cell(stdout, sql ? sql : "?", 1);
		printf(" | ");
		sp_md_cell(stdout, x->detail, 0);
		printf(" |\n");
		free(sql);
	}
	printf("\n");
}

static void notes_json(const struct sp_check_result *res, int improved)
{
	int first = 1;

	printf("[");
	for (size_t i = 0; i < res->nnotes; i++) {
		const struct sp_check_note *n = &res->notes[i];
		const struct sp_qrow *r = n->q->cand ? n->q->cand : n->q->base;

		if (n->improved != improved)
			continue;
		printf("%s\n  {\"fingerprint_id\": \"%016llx\", \"kind\": \"%s\", \"fingerprint\": ",
		       first ? "" : ",", (unsigned long long)n->q->fp_id,
		       sp_qkind_name(n->q->kind));
		sp_json_str(stdout, r->fingerprint);
		printf(", \"detail\": ");
		sp_json_str(stdout, n->detail);
		printf("}");
		first = 0;
	}
	printf("\n ]");
}

void sp_check_print_text(const struct sp_side *base, const struct sp_side *cand,
			 const struct sp_diff *d, const struct sp_check_result *res)
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
		const struct sp_regression *g = &res->r[i];
		const struct sp_qrow *r = g->q->cand ? g->q->cand : g->q->base;
		char *sql = sp_diff_sql(r->fingerprint, r->kind, 160);

		printf("REGRESSION %s: %s\n", sp_check_rule_names[g->rule], sql ? sql : "?");
		printf("    at %s\n    %s\n", g->site, g->detail);
		free(sql);
	}
	notes_text(res, 1, "IMPROVED");
	notes_text(res, 0, "EXPECTED");
	printf("# %zu new, %zu vanished, %zu changed, %zu plan changes;"
	       " sqlprof diff shows every change\n",
	       d->n_new, d->n_vanished, d->n_changed, d->n_plan);
	timing_note(note, sizeof(note), base, cand, res);
	printf("# %s\n", note);
}

void sp_check_print_json(const struct sp_side *base, const struct sp_side *cand,
			 const struct sp_diff *d, const struct sp_check_result *res)
{
	char note[256];
	size_t i;

	timing_note(note, sizeof(note), base, cand, res);
	printf("{\"result\": \"%s\", \"regressions\": [", res->n ? "fail" : "pass");
	for (i = 0; i < res->n; i++) {
		const struct sp_regression *g = &res->r[i];
		const struct sp_qrow *r = g->q->cand ? g->q->cand : g->q->base;

		printf("%s\n  {\"rule\": \"%s\", \"fingerprint_id\": \"%016llx\", \"kind\": \"%s\","
		       " \"fingerprint\": ",
		       i ? "," : "", sp_check_rule_names[g->rule], (unsigned long long)g->q->fp_id,
		       sp_qkind_name(g->q->kind));
		sp_json_str(stdout, r->fingerprint);
		printf(", \"site\": ");
		sp_json_str(stdout, g->site);
		printf(", \"detail\": ");
		sp_json_str(stdout, g->detail);
		printf("}");
	}
	printf("\n ], \"improvements\": ");
	notes_json(res, 1);
	printf(", \"expected\": ");
	notes_json(res, 0);
	printf(", \"timing\": ");
	sp_json_str(stdout, note);
	printf(",\n \"diff\": ");
	sp_diff_print(stdout, "json", base, cand, d, 0, 0);
	printf("}\n");
}

void sp_check_print_md(const struct sp_side *base, const struct sp_side *cand,
		       const struct sp_diff *d, const struct sp_check_result *res)
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
			const struct sp_regression *g = &res->r[i];
			const struct sp_qrow *r = g->q->cand ? g->q->cand : g->q->base;
			char *sql = sp_diff_sql(r->fingerprint, r->kind, 120);

			printf("| **%s** | ", sp_check_rule_names[g->rule]);
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
	notes_md(res, 1, "Improved");
	notes_md(res, 0, "Expected, not failing");
	timing_note(note, sizeof(note), base, cand, res);
	printf("_");
	sp_md_cell(stdout, note, 0);
	printf("_\n\n");
	sp_diff_print(stdout, "markdown", base, cand, d, 0, 50);
}

int sp_check_write_junit(const char *path, const struct sp_side *base, const struct sp_side *cand,
			 const struct sp_diff *d, const struct sp_check_result *res)
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
	fprintf(f,
		"<testsuites name=\"sqlprof check\" tests=\"%zu\" failures=\"%zu\" errors=\"0\" time=\"%.6f\">\n",
		d->nq, res->nfailing, total);
	fprintf(f,
		"  <testsuite name=\"sqlprof check\" tests=\"%zu\" failures=\"%zu\" errors=\"0\""
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
				fprintf(f,
					">\n      <system-out>vanished: not run by the candidate</system-out>\n    </testcase>\n");
			else
				fprintf(f, "/>\n");
			continue;
		}
		fprintf(f, ">\n      <failure type=\"");
		for (j = 0; j < res->n; j++)
			if (res->r[j].q == q) {
				sp_xml_str(f, sp_check_rule_names[res->r[j].rule]);
				break;
			}
		fprintf(f, "\" message=\"");
		{
			int first = 1;

			for (j = 0; j < res->n; j++)
				if (res->r[j].q == q) {
					fprintf(f, "%s", first ? "" : ", ");
					sp_xml_str(f, sp_check_rule_names[res->r[j].rule]);
					first = 0;
				}
		}
		fprintf(f, "\">");
		for (j = 0; j < res->n; j++)
			if (res->r[j].q == q) {
				sp_xml_str(f, sp_check_rule_names[res->r[j].rule]);
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
