/* SPDX-License-Identifier: MIT */
/*
 * gate.c - see gate.h: which rules a comparison breaks. Nothing is
 * printed here.
 */
#include <math.h>
#include <strings.h>
#include <stdlib.h>
#include <string.h>

#include "gate.h"
#include "util.h"

const char *const sp_check_rule_names[SP_CHK_N] = {
	[SP_CHK_NEW_QUERY] = "new-query",       [SP_CHK_PLAN_CHANGE] = "plan-change",
	[SP_CHK_NEW_FULLSCAN] = "new-fullscan", [SP_CHK_NPLUS1] = "n-plus-one",
	[SP_CHK_REPREPARE] = "reprepare",       [SP_CHK_TEMPBTREE] = "temp-btree",
	[SP_CHK_AUTOINDEX] = "auto-index",      [SP_CHK_FULLSCAN] = "full-scan",
	[SP_CHK_DUPLICATE] = "duplicate",       [SP_CHK_COUNT] = "count-increase",
	[SP_CHK_VM] = "vm-steps-increase",      [SP_CHK_TIME] = "time-increase",
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

/* ---- what the gate sets aside ------------------------------------------- */

/* 1 if s starts with keyword kw (case-insensitive), followed by a blank,
 * '(' or the end. */
static int kw(const char *s, const char *k)
{
	size_t n = strlen(k);

	return !strncasecmp(s, k, n) && (!s[n] || s[n] == ' ' || s[n] == '(');
}

/* 1 for a statement that changes the schema or the transaction, not a
 * query of the workload: CREATE, DROP, ALTER, ANALYZE, REINDEX, BEGIN,
 * COMMIT, END, ROLLBACK, SAVEPOINT, RELEASE. */
int sp_check_schema_stmt(const char *fp)
{
	static const char *const k[] = { "CREATE",   "DROP",      "ALTER",  "ANALYZE",
					 "REINDEX",  "BEGIN",     "COMMIT", "END",
					 "ROLLBACK", "SAVEPOINT", "RELEASE" };

	while (*fp == ' ')
		fp++;
	for (size_t i = 0; i < sizeof(k) / sizeof(k[0]); i++)
		if (kw(fp, k[i]))
			return 1;
	return 0;
}

/* Copy the identifier at s (quoted or not, without a schema prefix
 * "main".) into out; returns the text after it. */
static const char *ident(const char *s, char *out, size_t len)
{
	size_t n;

	for (;;) {
		const char *e;

		while (*s == ' ')
			s++;
		if (*s == '"' || *s == '`' || *s == '[') {
			char q = *s == '[' ? ']' : *s;

			e = strchr(s + 1, q);
			if (!e)
				e = s + strlen(s);
			n = (size_t)(e - s - 1);
			snprintf(out, len, "%.*s", (int)(n < len ? n : len - 1), s + 1);
			s = *e ? e + 1 : e;
		} else {
			for (e = s; *e && *e != ' ' && *e != '(' && *e != '.' && *e != ','; e++)
				;
			n = (size_t)(e - s);
			snprintf(out, len, "%.*s", (int)(n < len ? n : len - 1), s);
			s = e;
		}
		if (*s != '.')
			return s;
		s++; /* schema.table: the table */
	}
}

/* The table an INSERT, REPLACE, UPDATE or DELETE writes, into t; 0 if fp
 * is none of them. */
static int write_table(const char *fp, char *t, size_t len)
{
	while (*fp == ' ')
		fp++;
	if (kw(fp, "INSERT") || kw(fp, "REPLACE")) {
		const char *into = strstr(fp, " INTO ");

		if (!into)
			return 0;
		ident(into + 6, t, len);
	} else if (kw(fp, "UPDATE")) {
		fp += 6;
		while (*fp == ' ')
			fp++;
		if (kw(fp, "OR")) { /* UPDATE OR REPLACE t */
			fp += 2;
			while (*fp == ' ')
				fp++;
			while (*fp && *fp != ' ')
				fp++;
		}
		ident(fp, t, len);
	} else if (kw(fp, "DELETE") && !strncasecmp(fp + 6, " FROM ", 6)) {
		ident(fp + 12, t, len);
	} else {
		return 0;
	}
	return t[0] != 0;
}

/* "CREATE [UNIQUE] INDEX [IF NOT EXISTS] name ON table": name and table;
 * 0 if fp is not one. */
static int create_index(const char *fp, char *name, char *table, size_t len)
{
	const char *p;

	while (*fp == ' ')
		fp++;
	if (!kw(fp, "CREATE") || !(p = strcasestr(fp, " INDEX ")) || p - fp > 14)
		return 0;
	p += 7;
	if (!strncasecmp(p, "IF NOT EXISTS ", 14))
		p += 14;
	p = ident(p, name, len);
	while (*p == ' ')
		p++;
	if (!kw(p, "ON"))
		return 0;
	ident(p + 2, table, len);
	return name[0] && table[0];
}

struct new_index {
	char name[128], table[128], sql[256];
};

/* The indexes the candidate creates and the baseline did not (new CREATE
 * INDEX statements), at most max; returns how many. */
static size_t new_indexes(const struct sp_diff *d, struct new_index *ix, size_t max)
{
	size_t i, n = 0;

	for (i = 0; i < d->nq && n < max; i++) {
		const struct sp_qdiff *q = &d->q[i];

		if (!(q->flags & SP_QD_NEW) || q->kind != SP_QK_STMT ||
		    !create_index(q->cand->fingerprint, ix[n].name, ix[n].table,
				  sizeof(ix[n].name)))
			continue;
		snprintf(ix[n].sql, sizeof(ix[n].sql), "%s", q->cand->fingerprint);
		n++;
	}
	return n;
}

/* 1 if every statement of a new sqlite3_exec text (its fingerprint,
 * statements joined by "; ") ran in the baseline or is a schema
 * statement: the exec's text changed, not its work. base NULL: 1 if
 * every one is a schema statement. */
static int exec_known(const char *fp, const struct sp_side *base)
{
	char *t = strdup(fp), *part, *save = NULL;
	int ok = t != NULL;

	for (part = t ? strtok_r(t, ";", &save) : NULL; part && ok;
	     part = strtok_r(NULL, ";", &save)) {
		size_t j;

		while (*part == ' ')
			part++;
		if (!*part || sp_check_schema_stmt(part))
			continue;
		for (j = 0; base && j < base->agg.n && strcmp(base->agg.rows[j].fingerprint, part);
		     j++)
			;
		ok = base && j < base->agg.n;
	}
	free(t);
	return ok;
}

static struct sp_check_note *note(struct sp_check_result *res, const struct sp_qdiff *q,
				  int improved)
{
	struct sp_check_note *n;

	if (SP_GROW(res->notes, res->capnotes, res->nnotes + 1, 16) < 0)
		return NULL;
	n = &res->notes[res->nnotes++];
	memset(n, 0, sizeof(*n));
	n->q = q;
	n->improved = improved;
	return n;
}

/* Why q is not judged at all (SQLite's own statement, a schema statement
 * or an exec whose text changed): a note, and 1; 0 to judge it; -1 on
 * ENOMEM. */
static int set_aside(const struct sp_check_opts *o, const struct sp_side *base,
		     const struct sp_qdiff *q, struct sp_check_result *res)
{
	const struct sp_qrow *r = q->cand;
	struct sp_check_note *n;
	const char *why;

	if (sp_sqlite_own(r) && !o->judge_own)
		why = "SQLite's own work (a schema load, or a statement without SQL text): not judged"
		      " (--gate-sqlite-internal judges it)";
	else if ((q->flags & SP_QD_NEW) && q->kind == SP_QK_EXEC &&
		 exec_known(r->fingerprint, NULL))
		why = "schema or transaction statements, not queries of the workload: their effect"
		      " is judged on the queries";
	else if ((q->flags & SP_QD_NEW) && q->kind == SP_QK_EXEC &&
		 exec_known(r->fingerprint, base))
		why = "the text of this sqlite3_exec changed; each of its statements ran in the"
		      " baseline or changes the schema, and is judged on its own";
	else if ((q->flags & SP_QD_NEW) && q->kind == SP_QK_STMT &&
		 sp_check_schema_stmt(r->fingerprint))
		why = "a schema or transaction statement, not a query of the workload: its effect is"
		      " judged on the queries";
	else
		return 0;
	if (!(q->flags & (SP_QD_NEW | SP_QD_CHANGED | SP_QD_PLAN_CHANGED)))
		return 1; /* nothing to say */
	if (!(n = note(res, q, 0)))
		return -1;
	snprintf(n->detail, sizeof(n->detail), "%s", why);
	return 1;
}

/* More VM steps on a write to a table that gained an index: the index's
 * maintenance. 1 (with a note) when that explains it, 0 otherwise, -1 on
 * ENOMEM. */
static int index_cost(const struct sp_qdiff *q, const struct new_index *ix, size_t nix,
		      struct sp_check_result *res)
{
	char t[128];
	struct sp_check_note *n;
	size_t i, o = 0;

	if (!write_table(q->cand->fingerprint, t, sizeof(t)))
		return 0;
	for (i = 0; i < nix && strcmp(ix[i].table, t); i++)
		;
	if (i == nix)
		return 0;
	if (!(n = note(res, q, 0)))
		return -1;
	o = (size_t)snprintf(n->detail, sizeof(n->detail),
			     "VM steps %llu -> %llu per run (%+.0f%%): the cost of maintaining ",
			     (unsigned long long)q->m[0][SP_M_VM_STEPS],
			     (unsigned long long)q->m[1][SP_M_VM_STEPS],
			     ((double)q->m[1][SP_M_VM_STEPS] - (double)q->m[0][SP_M_VM_STEPS]) *
				     100 / (double)q->m[0][SP_M_VM_STEPS]);
	for (i = 0; i < nix && o < sizeof(n->detail); i++)
		if (!strcmp(ix[i].table, t))
			o += (size_t)snprintf(n->detail + o, sizeof(n->detail) - o, "%s%s",
					      o > 80 ? ", " : "", ix[i].sql);
	if (o < sizeof(n->detail))
		snprintf(n->detail + o, sizeof(n->detail) - o,
			 " (new in the candidate) on writes to %s", t);
	return 1;
}

/* Improvements of q: a plan change that is not worse and cut full-scan
 * or VM steps, and each doctor finding of the baseline the candidate no
 * longer has. 0, or -1 on ENOMEM. */
static int improvements(const struct sp_qdiff *q, const struct sp_findings *fb,
			const struct sp_findings *fc, struct sp_check_result *res)
{
	struct sp_check_note *n;

	if ((q->flags & SP_QD_PLAN_CHANGED) && !(q->flags & SP_QD_PLAN_WORSE) &&
	    (q->m[1][SP_M_FULLSCAN] < q->m[0][SP_M_FULLSCAN] ||
	     q->m[1][SP_M_VM_STEPS] < q->m[0][SP_M_VM_STEPS])) {
		if (!(n = note(res, q, 1)))
			return -1;
		snprintf(n->detail, sizeof(n->detail),
			 "plan: %s; full-scan steps %llu -> %llu, VM steps %llu -> %llu per run",
			 q->plan_note, (unsigned long long)q->m[0][SP_M_FULLSCAN],
			 (unsigned long long)q->m[1][SP_M_FULLSCAN],
			 (unsigned long long)q->m[0][SP_M_VM_STEPS],
			 (unsigned long long)q->m[1][SP_M_VM_STEPS]);
	}
	for (size_t i = 0; i < fb->n; i++) {
		const struct sp_finding *f = &fb->f[i];

		if (f->q->fp_id != q->fp_id || f->q->kind != q->kind ||
		    has_finding(fc, (int)f->rule, q->fp_id, q->kind))
			continue;
		if (!(n = note(res, q, 1)))
			return -1;
		snprintf(n->detail, sizeof(n->detail), "%s fixed (the baseline's evidence: %s)",
			 sp_rule_name(f->rule), f->evidence);
	}
	return 0;
}

/* An n-plus-one whose loop the baseline ran too (a run of >= k), found
 * or not then (a profile from before a rule change): not new. 1 with a
 * note, 0 when the loop is new, -1 on ENOMEM. */
static int loop_was_there(const struct sp_qdiff *q, const struct sp_finding *f, uint64_t k,
			  struct sp_check_result *res)
{
	struct sp_check_note *n;

	if (!q->base || q->base->max_run < k)
		return 0;
	if (!(n = note(res, q, 0)))
		return -1;
	snprintf(
		n->detail, sizeof(n->detail),
		"n-plus-one: the baseline ran this loop too (%llu consecutive executions), not new;"
		" %s",
		(unsigned long long)q->base->max_run, f->evidence);
	return 1;
}

void sp_check_result_free(struct sp_check_result *res)
{
	free(res->r);
	free(res->notes);
	memset(res, 0, sizeof(*res));
}

static int pct_over(uint64_t a, uint64_t b, double pct)
{
	return pct >= 0 && a > 0 && (double)b > (double)a * (1 + pct / 100.0);
}

/* Apply thresholds and rules. Returns 0, or -1 on ENOMEM. */
int sp_check_judge(const struct sp_check_opts *o, const struct sp_side *base,
		   const struct sp_side *cand, const struct sp_diff *d,
		   const struct sp_findings *fb, const struct sp_findings *fc,
		   struct sp_check_result *res)
{
	struct sp_regression *g;
	size_t i;
	char x[32], y[32];
	double base_ns = 0; /* the baseline's db time per run (self: nothing twice) */
	struct new_index ix[32];
	size_t nix = new_indexes(d, ix, sizeof(ix) / sizeof(ix[0]));
	uint64_t k = SP_DOCTOR_DEFAULTS.nplus1_min_run;

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
		if ((r = set_aside(o, base, q, res)) != 0) {
			if (r < 0)
				return -1;
			continue;
		}
		if (q->base && improvements(q, fb, fc, res) < 0)
			return -1;
		if ((q->flags & SP_QD_NEW) && (o->fail_on & (1u << SP_CHK_NEW_QUERY))) {
			if (!(g = add(res, q, SP_CHK_NEW_QUERY, base, cand)))
				return -1;
			snprintf(
				g->detail, sizeof(g->detail),
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
			if (r == SP_CHK_NPLUS1 && (dr = loop_was_there(q, f, k, res)) != 0) {
				if (dr < 0)
					return -1;
				continue;
			}
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
		if (q->base &&
		    pct_over(q->m[0][SP_M_VM_STEPS], q->m[1][SP_M_VM_STEPS], o->max_vm) &&
		    (r = index_cost(q, ix, nix, res)) != 1) {
			if (r < 0 || !(g = add(res, q, SP_CHK_VM, base, cand)))
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
				 (q->t_median[1] - q->t_median[0]) * 100 / q->t_median[0],
				 o->max_time, q->p_value, SP_CHECK_ALPHA, q->nt[0], q->nt[1]);
		}
		if (res->n > before)
			res->nfailing++;
	}
	return 0;
}
