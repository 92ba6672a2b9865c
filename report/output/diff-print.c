/* SPDX-License-Identifier: MIT */
/*
 * diff-print.c - the printers of a comparison (struct sp_diff, compare.c)
 * as text, JSON or GitHub Markdown, shared by `sqlprof diff` and
 * `sqlprof check`. What to compare and what fails a check is not decided
 * here.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "diff-print.h"
#include "util.h"

/* ---- formatting helpers -------------------------------------------------- */

void sp_side_describe(const struct sp_side *s, char *buf, size_t len)
{
	size_t o;

	if (s->np == 1) {
		snprintf(buf, len, "%s (%llu run%s)", s->p[0].path,
			 (unsigned long long)s->total_repeats, s->total_repeats == 1 ? "" : "s");
		return;
	}
	o = (size_t)snprintf(buf, len, "%zu profiles, %llu runs (", s->np,
			     (unsigned long long)s->total_repeats);
	for (size_t i = 0; i < s->np && o < len; i++)
		o += (size_t)snprintf(buf + o, len - o, "%s%s", i ? ", " : "", s->p[i].path);
	if (o < len)
		snprintf(buf + o, len - o, ")");
}

char *sp_diff_sql(const char *fingerprint, enum sp_qkind kind, size_t width)
{
	char *s = sp_shorten(fingerprint, width), *out;
	size_t n;

	if (!s)
		return NULL;
	sp_term_clean(s); /* one line, and no terminal escapes from hostile SQL */
	if (kind != SP_QK_EXEC)
		return s;
	n = strlen(s) + 8;
	out = malloc(n);
	if (out)
		snprintf(out, n, "[exec] %s", s);
	free(s);
	return out;
}

/* "3 -> 200 (+197, +6567%)", or "3" when unchanged. */
static const char *delta(char *buf, size_t len, uint64_t a, uint64_t b, const char *arrow)
{
	if (a == b)
		snprintf(buf, len, "%llu", (unsigned long long)a);
	else if (a == 0)
		snprintf(buf, len, "0 %s %llu (+%llu)", arrow, (unsigned long long)b,
			 (unsigned long long)b);
	else
		snprintf(buf, len, "%llu %s %llu (%s%lld, %+.0f%%)", (unsigned long long)a, arrow,
			 (unsigned long long)b, b > a ? "+" : "", (long long)(b - a),
			 ((double)b - (double)a) * 100.0 / (double)a);
	return buf;
}

static const char *tdelta(char *buf, size_t len, double a, double b, const char *arrow)
{
	char x[32], y[32];

	if (a <= 0 && b <= 0)
		snprintf(buf, len, "-");
	else if (a <= 0)
		snprintf(buf, len, "%s", sp_fmt_ns(y, sizeof(y), b));
	else if (b <= 0)
		snprintf(buf, len, "%s %s -", sp_fmt_ns(x, sizeof(x), a), arrow);
	else
		snprintf(buf, len, "%s %s %s (%+.0f%%)", sp_fmt_ns(x, sizeof(x), a), arrow,
			 sp_fmt_ns(y, sizeof(y), b), (b - a) * 100.0 / a);
	return buf;
}

static const char *status(const struct sp_qdiff *q)
{
	if (q->flags & SP_QD_NEW)
		return "new";
	if (q->flags & SP_QD_VANISHED)
		return "vanished";
	if (q->flags & SP_QD_PLAN_WORSE)
		return "plan-worse";
	if (q->flags & SP_QD_CHANGED)
		return "changed";
	if (q->flags & SP_QD_PLAN_CHANGED)
		return "plan-changed";
	return "same";
}

static int listed(const struct sp_qdiff *q, int all)
{
	return all || (q->flags & (SP_QD_NEW | SP_QD_VANISHED | SP_QD_CHANGED | SP_QD_PLAN_CHANGED |
				   SP_QD_NEW_FULLSCAN));
}

static int site_changed(const struct sp_sdiff *s)
{
	return fabs(s->count[0] - s->count[1]) >= 0.5 ||
	       fabs(s->vm_steps[0] - s->vm_steps[1]) >= 0.5;
}

static void time_note(char *buf, size_t len, const struct sp_qdiff *q)
{
	char t[96];

	tdelta(t, sizeof(t), q->t_median[0], q->t_median[1], "->");
	if (q->time_tested)
		snprintf(
			buf, len,
			"mean per execution, median of runs %s; Mann-Whitney p = %.3g (%zu vs %zu runs)",
			t, q->p_value, q->nt[0], q->nt[1]);
	else
		snprintf(buf, len,
			 "mean per execution %s; not tested (%zu vs %zu runs, need >= 3 a side)", t,
			 q->nt[0], q->nt[1]);
}

/* ---- text ---------------------------------------------------------------- */

static void print_text(FILE *f, const struct sp_side *base, const struct sp_side *cand,
		       const struct sp_diff *d, int all, size_t top)
{
	char bd[1024], cd[1024], b[320];
	size_t i, shown = 0;

	sp_side_describe(base, bd, sizeof(bd));
	sp_side_describe(cand, cd, sizeof(cd));
	fprintf(f, "# sqlprof diff: %s -> %s\n", bd, cd);
	fprintf(f,
		"# %zu queries: %zu new, %zu vanished, %zu changed, %zu plan changes, %zu unchanged;"
		" %llu deterministic differences\n",
		d->nq, d->n_new, d->n_vanished, d->n_changed, d->n_plan, d->n_same,
		(unsigned long long)d->differences);
	fprintf(f,
		"# per run; time is informational (judged by sqlprof check with >= 3 runs a side)\n");
	for (i = 0; i < d->nq; i++) {
		const struct sp_qdiff *q = &d->q[i];
		const struct sp_qrow *r = q->cand ? q->cand : q->base;
		char *sql;
		int m, first = 1;

		if (!listed(q, all))
			continue;
		if (top && shown == top) {
			fprintf(f, "# ... more queries (--top)\n");
			break;
		}
		shown++;
		sql = sp_diff_sql(r->fingerprint, r->kind, 200);
		fprintf(f, "\n%-12s %s\n", status(q), sql ? sql : "?");
		free(sql);
		fprintf(f, "%13s", "");
		for (m = 0; m < SP_M_N; m++) {
			if (q->m[0][m] == q->m[1][m] && !(m == SP_M_COUNT))
				continue;
			fprintf(f, "%s%s %s", first ? "" : "; ", sp_metric_names[m],
				delta(b, sizeof(b), q->m[0][m], q->m[1][m], "->"));
			first = 0;
		}
		fprintf(f, "\n");
		if (q->flags & SP_QD_PLAN_CHANGED)
			fprintf(f, "%13splan%s: %s\n", "",
				q->flags & SP_QD_PLAN_WORSE ? " (worse)" : "", q->plan_note);
		if (q->flags & SP_QD_NEW_FULLSCAN)
			fprintf(f, "%13snew full scan: %llu full-scan steps per run\n", "",
				(unsigned long long)q->m[1][SP_M_FULLSCAN]);
		time_note(b, sizeof(b), q);
		fprintf(f, "%13stime: %s\n", "", b);
	}
	shown = 0;
	for (i = 0; i < d->ns; i++) {
		const struct sp_sdiff *s = &d->s[i];
		char c1[96], c2[96], *sql;

		if (!all && !site_changed(s))
			continue;
		if (!shown)
			fprintf(f,
				"\n# per site (estimated from stack samples; exact at --rate 1)\n"
				"%-28s %-28s  %s\n",
				"EST_COUNT", "EST_VM_STEPS", "SITE: SQL");
		if (top && shown == top) {
			fprintf(f, "# ... more sites (--top)\n");
			break;
		}
		shown++;
		sql = sp_diff_sql(s->fingerprint, s->kind, 80);
		fprintf(f, "%-28s %-28s  %s: %s\n",
			delta(c1, sizeof(c1), (uint64_t)llround(s->count[0]),
			      (uint64_t)llround(s->count[1]), "->"),
			delta(c2, sizeof(c2), (uint64_t)llround(s->vm_steps[0]),
			      (uint64_t)llround(s->vm_steps[1]), "->"),
			s->display, sql ? sql : "?");
		free(sql);
	}
}

/* ---- JSON ---------------------------------------------------------------- */

static void json_side(FILE *f, const struct sp_side *s)
{
	fprintf(f, "{\"runs\": %llu, \"profiles\": [", (unsigned long long)s->total_repeats);
	for (size_t i = 0; i < s->np; i++) {
		fprintf(f, "%s", i ? ", " : "");
		sp_json_str(f, s->p[i].path);
	}
	fprintf(f, "]}");
}

static void json_num(FILE *f, double v)
{
	if (isfinite(v))
		fprintf(f, "%.6g", v);
	else
		fprintf(f, "null");
}

static void print_json(FILE *f, const struct sp_side *base, const struct sp_side *cand,
		       const struct sp_diff *d, int all, size_t top)
{
	size_t i, shown = 0;
	int first = 1;

	fprintf(f, "{\"base\": ");
	json_side(f, base);
	fprintf(f, ", \"new\": ");
	json_side(f, cand);
	fprintf(f,
		", \"summary\": {\"queries\": %zu, \"new\": %zu, \"vanished\": %zu, \"changed\": %zu,"
		" \"plan_changes\": %zu, \"unchanged\": %zu, \"differences\": %llu},\n \"queries\": [",
		d->nq, d->n_new, d->n_vanished, d->n_changed, d->n_plan, d->n_same,
		(unsigned long long)d->differences);
	for (i = 0; i < d->nq; i++) {
		const struct sp_qdiff *q = &d->q[i];
		const struct sp_qrow *r = q->cand ? q->cand : q->base;
		int m;

		if (!listed(q, all))
			continue;
		if (top && shown++ == top)
			break;
		fprintf(f,
			"%s\n  {\"fingerprint_id\": \"%016llx\", \"kind\": \"%s\", \"status\": \"%s\","
			" \"fingerprint\": ",
			first ? "" : ",", (unsigned long long)q->fp_id, sp_qkind_name(q->kind),
			status(q));
		first = 0;
		sp_json_str(f, r->fingerprint);
		fprintf(f, ", \"flags\": [");
		{
			static const struct {
				unsigned bit;
				const char *name;
			} fl[] = {
				{ SP_QD_NEW, "new" },
				{ SP_QD_VANISHED, "vanished" },
				{ SP_QD_CHANGED, "changed" },
				{ SP_QD_PLAN_CHANGED, "plan-changed" },
				{ SP_QD_PLAN_WORSE, "plan-worse" },
				{ SP_QD_NEW_FULLSCAN, "new-fullscan" },
			};
			int k = 0;

			for (size_t j = 0; j < sizeof(fl) / sizeof(fl[0]); j++)
				if (q->flags & fl[j].bit)
					fprintf(f, "%s\"%s\"", k++ ? ", " : "", fl[j].name);
		}
		fprintf(f, "], \"metrics\": {");
		for (m = 0; m < SP_M_N; m++)
			fprintf(f, "%s\"%s\": {\"base\": %llu, \"new\": %llu, \"delta\": %lld}",
				m ? ", " : "", sp_metric_names[m], (unsigned long long)q->m[0][m],
				(unsigned long long)q->m[1][m],
				(long long)(q->m[1][m] - q->m[0][m]));
		fprintf(f, "}, \"plan_base\": ");
		if (q->base && q->base->plan)
			sp_json_str(f, q->base->plan);
		else
			fprintf(f, "null");
		fprintf(f, ", \"plan_new\": ");
		if (q->cand && q->cand->plan)
			sp_json_str(f, q->cand->plan);
		else
			fprintf(f, "null");
		fprintf(f, ", \"plan_note\": ");
		sp_json_str(f, q->plan_note);
		fprintf(f,
			", \"time\": {\"runs_base\": %zu, \"runs_new\": %zu, \"median_mean_ns_base\": ",
			q->nt[0], q->nt[1]);
		json_num(f, q->t_median[0]);
		fprintf(f, ", \"median_mean_ns_new\": ");
		json_num(f, q->t_median[1]);
		fprintf(f,
			", \"p50_ns_base\": %.0f, \"p50_ns_new\": %.0f, \"p95_ns_base\": %.0f,"
			" \"p95_ns_new\": %.0f, \"tested\": %s, \"p_value\": ",
			q->p50[0], q->p50[1], q->p95[0], q->p95[1],
			q->time_tested ? "true" : "false");
		if (q->time_tested)
			json_num(f, q->p_value);
		else
			fprintf(f, "null");
		fprintf(f, "}}");
	}
	fprintf(f, "\n ],\n \"sites\": [");
	first = 1;
	shown = 0;
	for (i = 0; i < d->ns; i++) {
		const struct sp_sdiff *s = &d->s[i];

		if (!all && !site_changed(s))
			continue;
		if (top && shown++ == top)
			break;
		fprintf(f, "%s\n  {\"site\": ", first ? "" : ",");
		first = 0;
		sp_json_str(f, s->display);
		fprintf(f, ", \"fingerprint_id\": \"%016llx\", \"kind\": \"%s\", \"fingerprint\": ",
			(unsigned long long)s->fp_id, sp_qkind_name(s->kind));
		sp_json_str(f, s->fingerprint);
		fprintf(f,
			", \"est_count_base\": %.1f, \"est_count_new\": %.1f, \"est_vm_steps_base\": %.1f,"
			" \"est_vm_steps_new\": %.1f, \"est_rows_base\": %.1f, \"est_rows_new\": %.1f}",
			s->count[0], s->count[1], s->vm_steps[0], s->vm_steps[1], s->rows[0],
			s->rows[1]);
	}
	fprintf(f, "\n ]}\n");
}

/* ---- Markdown ------------------------------------------------------------ */

void sp_md_cell(FILE *f, const char *s, int code)
{
	const char *p;

	if (code) {
		size_t run = 0, best = 0, k;

		for (p = s; *p; p++) {
			run = *p == '`' ? run + 1 : 0;
			if (run > best)
				best = run;
		}
		for (k = 0; k <= best; k++)
			fputc('`', f);
		if (*s == '`' || (*s && s[strlen(s) - 1] == '`'))
			fputc(' ', f);
		for (p = s; *p; p++) {
			if (*p == '|')
				fputc('\\', f);
			fputc(*p == '\n' || *p == '\r' ? ' ' : *p, f);
		}
		if (*s == '`' || (*s && s[strlen(s) - 1] == '`'))
			fputc(' ', f);
		for (k = 0; k <= best; k++)
			fputc('`', f);
		return;
	}
	for (p = s; *p; p++) {
		switch (*p) {
		case '<': fputs("&lt;", f); break;
		case '>': fputs("&gt;", f); break;
		case '&': fputs("&amp;", f); break;
		case '\n':
		case '\r': fputc(' ', f); break;
		case '|':
		case '\\':
		case '*':
		case '_':
		case '`':
		case '[':
		case ']':
		case '#':
		case '~':
			fputc('\\', f);
			/* fall through */
		default: fputc(*p, f);
		}
	}
}

static void md_delta(FILE *f, uint64_t a, uint64_t b)
{
	char buf[160];

	fputs(" | ", f);
	if (a != b)
		fputs("**", f);
	fputs(delta(buf, sizeof(buf), a, b, "→"), f);
	if (a != b)
		fputs("**", f);
}

static void print_md(FILE *f, const struct sp_side *base, const struct sp_side *cand,
		     const struct sp_diff *d, int all, size_t top)
{
	static const int cols[] = { SP_M_COUNT,     SP_M_VM_STEPS, SP_M_FULLSCAN, SP_M_SORTS,
				    SP_M_AUTOINDEX, SP_M_PREPARES, SP_M_ROWS };
	char bd[1024], cd[1024], b[160];
	size_t i, shown = 0;

	sp_side_describe(base, bd, sizeof(bd));
	sp_side_describe(cand, cd, sizeof(cd));
	fprintf(f, "### sqlprof diff\n\n");
	fprintf(f, "Baseline: ");
	sp_md_cell(f, bd, 0);
	fprintf(f, "  \nCandidate: ");
	sp_md_cell(f, cd, 0);
	fprintf(f,
		"\n\n**%zu queries**: %zu new, %zu vanished, %zu changed, %zu plan changes, %zu"
		" unchanged; %llu deterministic differences. Values are per run; time is"
		" informational.\n\n",
		d->nq, d->n_new, d->n_vanished, d->n_changed, d->n_plan, d->n_same,
		(unsigned long long)d->differences);
	for (i = 0; i < d->nq; i++) {
		const struct sp_qdiff *q = &d->q[i];
		const struct sp_qrow *r = q->cand ? q->cand : q->base;
		char *sql;

		if (!listed(q, all))
			continue;
		if (!shown)
			fprintf(f, "| Status | Query | Count | VM steps | Full-scan steps | Sorts |"
				   " Auto-index rows | Prepares | Rows | Mean time | Plan |\n"
				   "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
		if (top && shown == top) {
			fprintf(f, "\n_… more queries not shown (--top)_\n");
			break;
		}
		shown++;
		sql = sp_diff_sql(r->fingerprint, r->kind, 120);
		fprintf(f, "| %s%s%s | ",
			q->flags & (SP_QD_PLAN_WORSE | SP_QD_NEW_FULLSCAN) ? "**" : "", status(q),
			q->flags & (SP_QD_PLAN_WORSE | SP_QD_NEW_FULLSCAN) ? "**" : "");
		sp_md_cell(f, sql ? sql : "?", 1);
		free(sql);
		for (size_t c = 0; c < sizeof(cols) / sizeof(cols[0]); c++)
			md_delta(f, q->m[0][cols[c]], q->m[1][cols[c]]);
		fprintf(f, " | %s | ", tdelta(b, sizeof(b), q->t_median[0], q->t_median[1], "→"));
		if (q->flags & SP_QD_PLAN_CHANGED) {
			if (q->flags & SP_QD_PLAN_WORSE)
				fputs("**worse:** ", f);
			sp_md_cell(f, q->plan_note, 1);
		} else {
			fputs("same", f);
		}
		fputs(" |\n", f);
	}
	if (!shown)
		fprintf(f, "No query changed.\n");
	shown = 0;
	for (i = 0; i < d->ns; i++) {
		const struct sp_sdiff *s = &d->s[i];
		char *sql;

		if (!all && !site_changed(s))
			continue;
		if (!shown)
			fprintf(f, "\n#### Per site (estimated from stack samples)\n\n"
				   "| Site | Query | Est. count | Est. VM steps |\n"
				   "|---|---|---:|---:|\n");
		if (top && shown == top) {
			fprintf(f, "\n_… more sites not shown (--top)_\n");
			break;
		}
		shown++;
		fputs("| ", f);
		sp_md_cell(f, s->display, 0);
		fputs(" | ", f);
		sql = sp_diff_sql(s->fingerprint, s->kind, 80);
		sp_md_cell(f, sql ? sql : "?", 1);
		free(sql);
		md_delta(f, (uint64_t)llround(s->count[0]), (uint64_t)llround(s->count[1]));
		md_delta(f, (uint64_t)llround(s->vm_steps[0]), (uint64_t)llround(s->vm_steps[1]));
		fputs(" |\n", f);
	}
}

void sp_diff_print(FILE *f, const char *fmt, const struct sp_side *base, const struct sp_side *cand,
		   const struct sp_diff *d, int all, size_t top)
{
	if (!strcmp(fmt, "json"))
		print_json(f, base, cand, d, all, top);
	else if (!strcmp(fmt, "markdown"))
		print_md(f, base, cand, d, all, top);
	else
		print_text(f, base, cand, d, all, top);
}
