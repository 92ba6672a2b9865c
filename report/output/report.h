/* SPDX-License-Identifier: MIT */
/*
 * report.h - what the printers of `sqlprof report` share: the options,
 * the table's helpers the other formats use, and one entry point per
 * printer (report-table.c, report-csv.c, report-json.c, report-group.c;
 * cmd-report.c parses the options, loads the profile and picks one).
 */
#ifndef SP_REPORT_H
#define SP_REPORT_H

#include <stddef.h>
#include <stdint.h>

#include "attrib.h"
#include "doctor.h"
#include "query.h"

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

/* The report's common source root (--full-paths: NULL), set for the table. */
extern const char *sp_rep_root;
/* The profile is an agent's snapshot (meta agent_updated): nothing exited. */
extern int sp_rep_agent;

/* One "died" line of the profile: PID, EXE, running count, SQL. */
struct sp_rep_death {
	long long pid;
	char exe[256], sql[256];
	unsigned running;
};
/* The next "died" line of *p into d (damaged lines skipped): 1, or 0 at the end. */
int sp_rep_next_death(const char **p, struct sp_rep_death *d);

/* "s" unless n is 1: "1 sample", "2 samples" */
const char *sp_rep_pl(double n);
/* Site site of a (-1: unattributed) as the table names it. */
void sp_rep_site_name(const struct sp_attrib *a, int site);
/* 1 when every execution of query r has its stack (the site figures are
 * counts, not estimates). */
int sp_rep_sites_exact(const struct sp_attrib *a, const struct sp_qrow *r);
/* sql cut to max bytes with "... (M more bytes)"; malloc'd, NULL on ENOMEM. */
char *sp_rep_shorten(const char *sql, size_t max);
/* A stack, leaf first, one frame a line after indent. */
void sp_rep_stack(const struct sp_attrib *a, uint64_t pid, uint64_t stack_id, const char *indent);

/* SQLite's own work (sp_sqlite_own) of qs: queries, executions, self and
 * prepare time. */
struct sp_rep_own {
	uint64_t queries, count, self_ns, total_ns, prepare_ns;
};
struct sp_rep_own sp_rep_own_sum(const struct sp_qset *qs);

/* The printers: the first n rows of qs (sorted), a the sites. */
void sp_rep_table(const struct sp_qset *qs, const struct report_opts *o, size_t n,
		  const struct sp_attrib *a);
void sp_rep_errors(const struct sp_failures *fs, const struct sp_attrib *a);
void sp_rep_csv(const struct sp_qset *qs, size_t n);
void sp_rep_csv_findings(const struct sp_findings *fs);
void sp_rep_csv_failures(const struct sp_failures *fs, const struct sp_attrib *a);
void sp_rep_json(const struct sp_qset *qs, size_t n, const struct sp_attrib *a,
		 const struct sp_findings *finds, const struct sp_failures *fails);
/* --by function / --by site, in o->format. */
void sp_rep_grouped(const struct sp_attrib *a, const struct sp_qset *qs,
		    const struct report_opts *o);

#endif
