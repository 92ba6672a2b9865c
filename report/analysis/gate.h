/* SPDX-License-Identifier: MIT */
/*
 * gate.h - the CI gate's rules and verdict: sp_check_judge (gate.c)
 * applies the thresholds and rules to a comparison of profiles
 * (compare.h) and the doctor's findings of both sides; output/
 * gate-print.c prints the verdict, cmd-check.c runs the command.
 *
 * What fails a build, and why it does not flake:
 *  - deterministic rules: a new query, a plan that lost an index (or gained
 *    a temp B-tree or automatic index), a new full scan, a doctor finding
 *    (N+1, re-prepare churn, ...) absent from the baseline, and count or VM
 *    steps above the allowed increase. Same program, same data: same
 *    numbers, so these are exact comparisons.
 *  - set aside, not failing (printed as expected, with the reason): a
 *    new schema statement (CREATE/DROP/ALTER, ANALYZE, REINDEX) or
 *    transaction control; SQLite's own statements (its schema loads, read
 *    from sqlite_master by SQLite itself, and statements without SQL
 *    text; --gate-sqlite-internal judges them); a new sqlite3_exec text whose statements all ran in the
 *    baseline or are schema statements (its statements are judged one by
 *    one); more VM steps on an INSERT, UPDATE or DELETE of a table that
 *    gained an index in the candidate (the index's maintenance, the cost
 *    of the fix); an n-plus-one whose loop the baseline ran too (a run of
 *    >= K executions, found or not then).
 *  - time, only with >= 3 runs a side (several profiles per side, or
 *    `record --repeat`): per fingerprint, the per-run mean db times of both
 *    sides differ by a two-sided Mann-Whitney U test at alpha = 0.05 AND the
 *    candidate's median is more than --max-time-increase above the
 *    baseline's, and the added time is at least --min-time-share of the
 *    baseline's db time per run (many tiny queries tested at once would
 *    otherwise each get their 5% chance of a false alarm). With fewer runs time is printed, never judged: a single
 *    noisy run never fails a build on time alone.
 */
#ifndef SP_GATE_H
#define SP_GATE_H

#include <stddef.h>
#include <stdio.h>

#include "compare.h"
#include "doctor.h"

#define SP_CHECK_MAX_SKIP 64
#define SP_CHECK_MAX_PROFILES 1024
#define SP_CHECK_ALPHA 0.05
#define SP_CHECK_MIN_TIME_RUNS 3

/* The rules, in --fail-on order (their names: sp_check_rule_names). */
enum {
	SP_CHK_NEW_QUERY,
	SP_CHK_PLAN_CHANGE,
	SP_CHK_NEW_FULLSCAN,
	SP_CHK_NPLUS1,
	SP_CHK_REPREPARE,
	SP_CHK_TEMPBTREE,
	SP_CHK_AUTOINDEX,
	SP_CHK_FULLSCAN,
	SP_CHK_DUPLICATE,
	SP_CHK_COUNT,
	SP_CHK_VM,
	SP_CHK_TIME,
	SP_CHK_N,
};

/* the rules that fail a build unless --fail-on says otherwise */
#define SP_CHECK_DEFAULT_FAIL_ON                                                               \
	((1u << SP_CHK_NEW_QUERY) | (1u << SP_CHK_PLAN_CHANGE) | (1u << SP_CHK_NEW_FULLSCAN) | \
	 (1u << SP_CHK_NPLUS1) | (1u << SP_CHK_REPREPARE) | (1u << SP_CHK_TEMPBTREE) |         \
	 (1u << SP_CHK_AUTOINDEX))

/* What the gate is told (cmd-check.c parses it). */
struct sp_check_opts {
	const char *format;
	const char *junit;
	double max_count, max_vm, max_time; /* percent; < 0: off */
	double min_time_share;              /* percent of the baseline's db time per run */
	unsigned fail_on;
	int judge_own; /* --gate-sqlite-internal: judge SQLite's own statements too */
	const char *skip[SP_CHECK_MAX_SKIP + 1];
	int nskip;
	const char *base[SP_CHECK_MAX_PROFILES];
	size_t nbase;
};

/* One rule broken by one query (detail and site say how and where). */
struct sp_regression {
	const struct sp_qdiff *q;
	int rule;
	char detail[1100];
	char site[512];
};

/* What the gate set aside rather than failed (expected: a schema change,
 * SQLite's own statements, an exec whose text changed, index maintenance
 * on writes, an N+1 already in the baseline), and what improved (a plan
 * that now uses an index, a doctor finding gone). Printed, never failing. */
struct sp_check_note {
	const struct sp_qdiff *q;
	int improved; /* 1: an improvement; 0: expected, set aside */
	char detail[1100];
};

/* The verdict: every regression found. */
struct sp_check_result {
	struct sp_regression *r;
	size_t n, cap;
	struct sp_check_note *notes;
	size_t nnotes, capnotes;
	size_t nfailing; /* fingerprints with at least one regression */
	size_t timed;    /* fingerprints whose time was tested */
};

extern const char *const sp_check_rule_names[SP_CHK_N];

/* Judge cand against base: every regression and note into res (res->r
 * and res->notes malloc'd: free them, or sp_check_result_free). Returns 0, or -1 on ENOMEM. */
int sp_check_judge(const struct sp_check_opts *o, const struct sp_side *base,
		   const struct sp_side *cand, const struct sp_diff *d,
		   const struct sp_findings *fb, const struct sp_findings *fc,
		   struct sp_check_result *res);

void sp_check_result_free(struct sp_check_result *res);

/* 1 for a schema or transaction statement (CREATE, DROP, ALTER, ANALYZE,
 * REINDEX, BEGIN, COMMIT, END, ROLLBACK, SAVEPOINT, RELEASE). */
int sp_check_schema_stmt(const char *fingerprint);

#endif
