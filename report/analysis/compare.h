/* SPDX-License-Identifier: MIT */
/*
 * compare.h - the diff model behind `sqlprof diff` and `sqlprof check`:
 * two sides (baseline and candidate), each one or more profiles, matched
 * per fingerprint and per site, with the change in every deterministic
 * metric, plan changes, and a Mann-Whitney U test of per-run mean times.
 *
 * A side's deterministic metrics are per run: a profile recorded with
 * `record --repeat N` holds N runs' totals, divided here by N; across
 * several profiles the side's value is the median. Timing samples are one
 * per run: the mean db time per execution (total_ns / count) of each run,
 * from run_totals for repeated profiles, from queries otherwise.
 *
 * Loading and matching only; printing lives in output/diff-print.c, gating in
 * cmd-check.c.
 */
#ifndef SP_COMPARE_H
#define SP_COMPARE_H

#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "attrib.h"
#include "doctor.h"
#include "query.h"

/* One profile of a side. */
/* --since/--until/--last for every profile sp_side_load loads from now
 * on (each resolved against its own intervals); NULL or empty: none.
 * r must outlive the loads. A profile the window cannot apply to fails
 * the load with *input_error 2 (a usage error). */
void sp_side_set_window(const struct sp_winreq *r);

struct sp_prof {
	char *path;
	sqlite3 *db;
	uint64_t runs; /* meta.runs, 1 when absent */
	struct sp_qset qs;
	struct sp_attrib at;
	struct hmap qidx;   /* {fp_id, kind_exec} -> index in qs */
	struct hmap rt_idx; /* {fp_id, kind_exec} -> {first, n} in rt_means (runs > 1) */
	double *rt_means;   /* per-run mean db time per execution, by query and run */
};

/* Per (site, fingerprint) estimates of one side, per run. */
struct sp_sitestat {
	/* both owned by the side (site_strs): one copy per site and profile,
	 * not per site and fingerprint */
	const char *key;     /* "function\tfile\tmodule base name": matched across sides */
	const char *display; /* "function (file:line)" */
	uint64_t key_hash;   /* of key */
	int64_t fp_id;
	enum sp_qkind kind;
	double est_count, est_vm_steps, est_rows, samples;
};

struct sp_side {
	struct sp_prof *p;
	size_t np;
	uint64_t total_repeats; /* sum of runs over profiles */
	struct sp_qset agg;     /* per fingerprint: medians over profiles, per run */
	struct hmap agg_idx;    /* {fp_id, kind_exec} -> index in agg */
	/* 1: agg's rows and agg_idx are p[0]'s qs rows and qidx (one profile
	 * of one run: the medians are the rows as they are), owned there */
	int agg_shared;
	struct sp_sitestat *sites;
	size_t nsites;
	char **site_strs; /* the sites' keys and displays */
	size_t nsite_strs;
};

/*
 * Open and load paths[0..n) as one side, with --skip patterns for site
 * attribution. Returns 0, or -1 with a one-line reason in err (the profile
 * that could not be read is named); *input_error is 1 when the failure is
 * the input's (missing, unreadable, corrupt), 0 when it is ours (ENOMEM).
 */
int sp_side_load(struct sp_side *s, const char *const *paths, size_t n, const char *const *skip,
		 char *err, size_t errlen, int *input_error);
void sp_side_free(struct sp_side *s);

/* Per-execution db-time samples of one fingerprint, one per run: returns
 * how many were written to out (at most max). */
size_t sp_side_time_samples(const struct sp_side *s, int64_t fp_id, enum sp_qkind kind, double *out,
			    size_t max);

/* What changed in one fingerprint. */
enum {
	SP_QD_NEW = 1 << 0,          /* only in the candidate */
	SP_QD_VANISHED = 1 << 1,     /* only in the baseline */
	SP_QD_CHANGED = 1 << 2,      /* some deterministic metric differs */
	SP_QD_PLAN_CHANGED = 1 << 3, /* the plan text differs */
	SP_QD_PLAN_WORSE = 1 << 4,   /* a table lost its index, or a temp B-tree or
					automatic index appeared */
	SP_QD_NEW_FULLSCAN = 1 << 5, /* full-scan steps from 0 (or absent) to > 0, or
					a bare SCAN appeared in the plan */
};

/* Deterministic metrics compared, in this order. */
enum {
	SP_M_COUNT,
	SP_M_ROWS,
	SP_M_VM_STEPS,
	SP_M_FULLSCAN,
	SP_M_SORTS,
	SP_M_AUTOINDEX,
	SP_M_PREPARES,
	SP_M_ERRORS,
	SP_M_MAX_RUN,
	SP_M_N,
};
extern const char *const sp_metric_names[SP_M_N]; /* "count", "rows", ... */

struct sp_qdiff {
	int64_t fp_id;
	enum sp_qkind kind;
	const struct sp_qrow *base, *cand; /* NULL when absent; point into the sides' agg */
	unsigned flags;
	uint64_t m[2][SP_M_N]; /* [0] base, [1] candidate */
	/* e.g. "orders: SEARCH ... -> SCAN orders"; "" when the plan did not
	 * change, else malloc'd (at most 511 bytes; a 512-byte array in every
	 * query was 150 MB to clear at 200,000 fingerprints) */
	char *plan_note;
	/* time: per-run means of db time per execution */
	size_t nt[2];
	double t_median[2];    /* median of the per-run means, ns */
	double p50[2], p95[2]; /* per-execution percentiles (informational) */
	double u, p_value;     /* Mann-Whitney, when both nt >= 3 */
	int time_tested;
	double impact; /* sort key, larger first */
};

/* What changed at one site for one fingerprint (estimates from samples). */
struct sp_sdiff {
	const char *display; /* from the candidate when present */
	int64_t fp_id;
	enum sp_qkind kind;
	const char *fingerprint;
	double count[2], vm_steps[2], rows[2];
	double impact;
};

struct sp_diff {
	struct sp_qdiff *q;
	size_t nq;
	struct sp_sdiff *s;
	size_t ns;
	size_t n_new, n_vanished, n_changed, n_plan, n_same;
	uint64_t
		differences; /* deterministic metric or plan differences, summed over fingerprints */
};

/*
 * Match base and cand. Fingerprints are matched by (fp_id, kind); sites by
 * function, file and module (not line, so code that moves keeps its
 * site). The diff points into both sides, which must outlive it. Sorted by
 * impact: flagged plan regressions first, then new and vanished queries,
 * then by the change in VM steps (SQLite's deterministic cost), count and
 * time. Returns 0, or -1 on ENOMEM.
 */
int sp_diff_build(const struct sp_side *base, const struct sp_side *cand, struct sp_diff *d);
void sp_diff_free(struct sp_diff *d);

/*
 * Two-sided Mann-Whitney U test of a[0..na) against b[0..nb). *u is U of a
 * (the number of pairs with a > b, ties counting one half). The p-value is
 * exact when there are no ties and either sample has fewer than 8 values
 * (as scipy's method="auto", which Google Benchmark's compare.py uses),
 * else from the normal approximation with tie and continuity correction.
 * Returns 1 (no evidence) when a sample is empty or all values are equal.
 */
double sp_mann_whitney(const double *a, size_t na, const double *b, size_t nb, double *u);

double sp_median(double *v, size_t n); /* sorts v; 0 when n == 0 */

#endif
