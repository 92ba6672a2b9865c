/* SPDX-License-Identifier: MIT */
/*
 * doctor.h - the query doctor: anti-patterns found in one profile's
 * per-fingerprint totals, plans and run lengths, each with the site that
 * issued the query, the evidence numbers and, where it can be derived, a
 * suggestion (an index, as the sqlite3 shell's .expert would propose).
 *
 * Used by `sqlprof report` (printed after the table) and by `sqlprof check`
 * (a finding present in the candidate and absent from the baseline is a
 * regression). The plan-text helpers it reads plans with are plan.c's
 * (also used by compare.c), its index suggestions suggest.c's. No profile
 * I/O beyond reading the runs table; printing in one function per format.
 */
#ifndef SP_DOCTOR_H
#define SP_DOCTOR_H

#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>

#include "attrib.h"
#include "plan.h"
#include "query.h"

enum sp_rule {
	SP_RULE_NPLUS1,    /* "n-plus-one" */
	SP_RULE_REPREPARE, /* "reprepare" */
	SP_RULE_FULLSCAN,  /* "full-scan" */
	SP_RULE_TEMPBTREE, /* "temp-btree" */
	SP_RULE_AUTOINDEX, /* "auto-index" */
	SP_RULE_DUPLICATE, /* "duplicate": the same SQL with the same values */
	SP_RULE_NDOCTOR,
};

/* report's text lists at most this many findings of a rule (the costliest,
 * in the table's order) and counts the rest; JSON and CSV list them all. */
#define SP_DOCTOR_TEXT_MAX 10

/* Thresholds; SP_DOCTOR_DEFAULTS is what report and check use. */
struct sp_doctor_opts {
	uint64_t nplus1_min_run;        /* K: consecutive executions (10) */
	uint64_t reprepare_min_execs;   /* executions before churn matters (10) */
	double reprepare_ratio;         /* prepares >= ratio * executions (0.9) */
	uint64_t fullscan_min_rows;     /* full-scan steps per execution (1000) */
	uint64_t duplicate_min_samples; /* drawn executions with their values (10) */
	double duplicate_min_share;     /* of them, repeating earlier values (0.5) */
};
#define SP_DOCTOR_DEFAULTS                                     \
	((struct sp_doctor_opts){ .nplus1_min_run = 10,        \
				  .reprepare_min_execs = 10,   \
				  .reprepare_ratio = 0.9,      \
				  .fullscan_min_rows = 1000,   \
				  .duplicate_min_samples = 10, \
				  .duplicate_min_share = 0.5 })

struct sp_finding {
	enum sp_rule rule;
	const struct sp_qrow *q; /* the query (points into the caller's set) */
	char site[512];          /* "function (file:line)", or why there is none */
	char evidence[512];      /* the numbers */
	char suggestion[512];    /* what to do; "no suggestion" when none derivable */
};

struct sp_findings {
	struct sp_finding *f;
	size_t n, cap;
};

const char *sp_rule_name(enum sp_rule r);

/* 1 for SQLite's own work: a statement without SQL text (SQLite's
 * internal ones), or a statement SQLite ran nested in the program's (every
 * execution nested) on one of its own tables, named as SQLite writes it
 * ("main".sqlite_master: a schema load or reload; ?.sqlite_stat1). The
 * doctor has nothing to say about them, the gate does not judge them
 * (unless --gate-sqlite-internal), and report lists them apart. */
int sp_sqlite_own(const struct sp_qrow *r);

/*
 * Find every anti-pattern in qs. db (may be NULL) is read for the runs
 * table (how many runs reached K); at (may be NULL) names the sites: the
 * site with the most stack samples of the query. Findings point into qs,
 * which must outlive them. Returns 0, or -1 on ENOMEM.
 */
int sp_doctor_find(sqlite3 *db, const struct sp_qset *qs, const struct sp_attrib *at,
		   const struct sp_doctor_opts *o, struct sp_findings *out);
void sp_findings_free(struct sp_findings *fs);

/* The report hook: find with the defaults and print as text ("# query
 * doctor" section); prints nothing when there are no findings. */
void sp_doctor_print(sqlite3 *db, const struct sp_qset *qs, const struct sp_attrib *at, FILE *f);
void sp_doctor_print_text(const struct sp_findings *fs, FILE *f);

/* Site of a query: the site with the most samples, as "function
 * (file:line)"; "(no stack sample)" / "(unattributed)" otherwise. */
void sp_doctor_site(const struct sp_attrib *at, int64_t fp_id, int kind_exec, char *buf,
		    size_t len);

/*
 * Suggest an index for a query whose plan scans table `name` (or searches
 * it through an automatic index, cols from the plan), as .expert does:
 * from the fingerprint's WHERE equality columns (then one range column, or
 * the ORDER BY columns) when it reads one table; from the plan's automatic
 * index columns otherwise. Writes "CREATE INDEX ...;" or "no suggestion
 * (...)" into buf; returns 1 if an index was suggested.
 */
int sp_doctor_suggest_index(const char *fingerprint, const struct sp_plan_access *a, char *buf,
			    size_t len);

/* Source paths in the text findings relative to root (the report's
 * common directory; NULL: whole). */
void sp_doctor_set_root(const char *root);

#endif
