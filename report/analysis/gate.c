/* SPDX-License-Identifier: MIT */
/*
 * gate.c - see gate.h: which rules a comparison breaks. Nothing is
 * printed here.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gate.h"
#include "util.h"

const char *const sp_check_rule_names[SP_CHK_N] = {
	[SP_CHK_NEW_QUERY] = "new-query",   [SP_CHK_PLAN_CHANGE] = "plan-change", [SP_CHK_NEW_FULLSCAN] = "new-fullscan",
	[SP_CHK_NPLUS1] = "n-plus-one",     [SP_CHK_REPREPARE] = "reprepare",     [SP_CHK_TEMPBTREE] = "temp-btree",
	[SP_CHK_AUTOINDEX] = "auto-index",  [SP_CHK_FULLSCAN] = "full-scan",      [SP_CHK_DUPLICATE] = "duplicate",
	[SP_CHK_COUNT] = "count-increase",
	[SP_CHK_VM] = "vm-steps-increase",  [SP_CHK_TIME] = "time-increase",
};

/* the doctor rule behind each --fail-on name, -1 if none */
static int doctor_rule(int r)
{
	switch (r) {
	case SP_CHK_NPLUS1: return SP_RULE_NPLUS1;
	case SP_CHK_REPREPARE: return SP_RULE_REPREPARE;
	case SP_CHK_TEMPBTREE: return SP_RULE_TEMPBTREE;
	case SP_CHK_AUTOINDEX: return SP_RULE_AUTOINDEX;
	case SP_CHK_FULLSCAN: return SP_RULE_FULLSCAN;
	case SP_CHK_DUPLICATE: return SP_RULE_DUPLICATE;
	default: return -1;
	}
}

static struct sp_regression *add(struct sp_check_result *res, const struct sp_qdiff *q, int rule,
			      const struct sp_side *base, const struct sp_side *cand)
{
	struct sp_regression *g;
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
int sp_check_judge(const struct sp_check_opts *o, const struct sp_side *base, const struct sp_side *cand,
		 const struct sp_diff *d, const struct sp_findings *fb, const struct sp_findings *fc,
		 struct sp_check_result *res)
{
	struct sp_regression *g;
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
		if ((q->flags & SP_QD_NEW) && (o->fail_on & (1u << SP_CHK_NEW_QUERY))) {
			if (!(g = add(res, q, SP_CHK_NEW_QUERY, base, cand)))
				return -1;
			snprintf(g->detail, sizeof(g->detail),
				 "query not in the baseline: %llu executions, %llu VM steps per run",
				 (unsigned long long)q->m[1][SP_M_COUNT],
				 (unsigned long long)q->m[1][SP_M_VM_STEPS]);
		}
		if ((q->flags & SP_QD_PLAN_WORSE) && (o->fail_on & (1u << SP_CHK_PLAN_CHANGE))) {
			if (!(g = add(res, q, SP_CHK_PLAN_CHANGE, base, cand)))
				return -1;
			snprintf(g->detail, sizeof(g->detail), "plan: %s", q->plan_note);
		}
		if ((q->flags & SP_QD_NEW_FULLSCAN) && (o->fail_on & (1u << SP_CHK_NEW_FULLSCAN))) {
			if (!(g = add(res, q, SP_CHK_NEW_FULLSCAN, base, cand)))
				return -1;
			snprintf(g->detail, sizeof(g->detail),
				 "full-scan steps %llu -> %llu per run%s%s",
				 (unsigned long long)q->m[0][SP_M_FULLSCAN],
				 (unsigned long long)q->m[1][SP_M_FULLSCAN],
				 q->plan_note[0] ? "; plan: " : "", q->plan_note);
		}
		/* doctor findings the baseline does not have (before the thresholds:
		 * the first regression of a query is its JUnit failure type) */
		for (r = 0; r < SP_CHK_N; r++) {
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
			if (!(g = add(res, q, SP_CHK_COUNT, base, cand)))
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
			if (!(g = add(res, q, SP_CHK_VM, base, cand)))
				return -1;
			snprintf(g->detail, sizeof(g->detail),
				 "VM steps %llu -> %llu per run (%+.0f%%; allowed +%g%%)",
				 (unsigned long long)q->m[0][SP_M_VM_STEPS],
				 (unsigned long long)q->m[1][SP_M_VM_STEPS],
				 ((double)q->m[1][SP_M_VM_STEPS] - (double)q->m[0][SP_M_VM_STEPS]) *
					 100 / (double)q->m[0][SP_M_VM_STEPS],
				 o->max_vm);
		}
		if (q->base && q->time_tested && o->max_time >= 0 && q->p_value < SP_CHECK_ALPHA &&
		    q->t_median[1] > q->t_median[0] * (1 + o->max_time / 100.0) &&
		    (q->t_median[1] - q->t_median[0]) * (double)q->m[1][SP_M_COUNT] >=
			    o->min_time_share / 100.0 * base_ns) {
			if (!(g = add(res, q, SP_CHK_TIME, base, cand)))
				return -1;
			snprintf(g->detail, sizeof(g->detail),
				 "median of per-run mean time %s -> %s (%+.0f%%; allowed +%g%%),"
				 " Mann-Whitney p = %.3g < %.2f over %zu vs %zu runs",
				 sp_fmt_ns(x, sizeof(x), q->t_median[0]),
				 sp_fmt_ns(y, sizeof(y), q->t_median[1]),
				 (q->t_median[1] - q->t_median[0]) * 100 / q->t_median[0], o->max_time,
				 q->p_value, SP_CHECK_ALPHA, q->nt[0], q->nt[1]);
		}
		if (res->n > before)
			res->nfailing++;
	}
	return 0;
}
