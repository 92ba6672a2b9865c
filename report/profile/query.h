/* SPDX-License-Identifier: MIT */
/*
 * query.h - per-query rows loaded from a profile, shared by the report
 * printers (and later by export and diff). Loading computes percentiles
 * from the stored histograms; printing lives in the cmd-* files.
 */
#ifndef SP_QUERY_H
#define SP_QUERY_H

#include <sqlite3.h>
#include <stdint.h>

#include "kind.h"
#include "plan.h" /* the rows' plan text and its parser */
#include "series.h"

struct sp_qrow {
	int64_t fp_id;
	enum sp_qkind kind;
	char *fingerprint, *sql;
	uint64_t count, total_ns, self_ns, wall_ns, min_ns, max_ns, rows;
	uint64_t vm_steps, fullscan_steps, sorts, autoindex, errors, nested, samples;
	uint64_t prepares, prepare_ns;
	uint64_t p50_ns, p95_ns, p99_ns;
	uint64_t runs, max_run; /* consecutive executions on one thread */
	double mean_ns;
	char *plan;     /* EXPLAIN QUERY PLAN lines, NULL if none */
	int nplans;     /* distinct plans seen (>1: it changed) */
	char *plan_gap; /* why no plan could be taken (plan_gaps), or NULL */
	int folded;     /* an exec row that took in its one statement's row */
};

/*
 * The queries table's counters after fp_id, kind, fingerprint and sql, in
 * the profile's column order: X(column, summed), each a uint64_t field of
 * struct sp_qrow of the same name; summed: 1 when interval_queries holds
 * it too and a window's value is the sum of its intervals' (the order of
 * SP_SERIES_COLS), 0 when it stays the whole profile's. The one list of
 * them: the loader's SELECT and a test's CREATE TABLE come from it.
 */
/* clang-format off */
#define SP_QROW_COLS(X)                                                              \
	X(count, 1) X(total_ns, 1) X(self_ns, 1) X(wall_ns, 1) X(min_ns, 0)          \
	X(max_ns, 0) X(rows, 1) X(vm_steps, 1) X(fullscan_steps, 1) X(sorts, 1)      \
	X(autoindex, 1) X(errors, 1) X(nested, 1) X(samples, 1) X(prepares, 1)       \
	X(prepare_ns, 1) X(runs, 1) X(max_run, 0)
/* clang-format on */
#define SP_QCOL_NAME_(c, s) ", " #c
#define SP_QCOL_DEF_(c, s) ", " #c " INTEGER"
/* "fp_id, kind, fingerprint, sql, count, ..., max_run" */
#define SP_QUERIES_SELECT "fp_id, kind, fingerprint, sql" SP_QROW_COLS(SP_QCOL_NAME_)
/* the column definitions of a CREATE TABLE queries(...), no key */
#define SP_QUERIES_COLUMNS \
	"fp_id INTEGER, kind TEXT, fingerprint TEXT, sql TEXT" SP_QROW_COLS(SP_QCOL_DEF_)

struct sp_qset {
	struct sp_qrow *rows;
	size_t n;
	uint64_t lost, executions, processes, bad_messages, untracked;
	uint64_t descriptors_lost, statistics_lost, executions_missing,
		descriptor_waits;  /* meta: what the collector could not take */
	uint64_t sqlite_processes; /* processes with executions (the rest ran no SQLite) */
	/* processes that could not connect (meta), and of them those whose
	 * executions are missing */
	uint64_t unreported, unreported_missing;
	char *command;
	int64_t exit_status, duration_ns; /* of the command (meta); -1: unknown */
	char *died;        /* meta "died": PID\tEXE\tN\tSQL lines (sp_coll_deaths), or NULL */
	char *plans_bound; /* meta "plans_bound": processes whose plan table was full, or NULL */
	uint64_t no_plan;  /* queries with neither a plan nor a reason in plan_gaps */
	double rate;       /* meta "rate": the sampling rate; -1: unknown */
	int64_t runs;      /* meta "runs" (record --repeat); -1: unknown */
	uint64_t events_dropped; /* meta "events_dropped" */
	uint64_t clock_clamped;  /* meta "clock_clamped": executions whose
				  * times were clamped (the clock went back) */
	uint64_t texts_folded;   /* meta "texts_folded": distinct texts counted
				  * in their fingerprint's folded text */
	struct sp_window window; /* the window loaded (window.on), see below */
};

/* Load every query of a profile. Returns 0, or -1 with err set.
 * An sqlite3_exec that ran one statement, its own text, is one row: when a
 * fingerprint's statement row ran only nested (count == nested) and no
 * more often than its exec row, the statement row is folded into the exec
 * row (which takes its rows, counters, prepares and plan, and their self
 * time; folded set) instead of being listed as a second query. Returns
 * 0, or SP_ERR_INPUT / SP_ERR_NOMEM (util.h) with a one-line reason in
 * err. */
int sp_qset_load(sqlite3 *db, struct sp_qset *qs, char *err, size_t errlen);
/* The same, with w (resolved, w->on) a time window: count, times, rows,
 * errors and the other subtractable counters, the percentiles (and min
 * and max, from the window's histogram buckets) and the executions are
 * the sums of the window's intervals (interval_queries); a query that did not run in it is left out.
 * max_run, plans and the rest stay the whole profile's. w NULL or off:
 * sp_qset_load. */
int sp_qset_load_window(sqlite3 *db, const struct sp_window *w, struct sp_qset *qs, char *err,
			size_t errlen);
void sp_qset_free(struct sp_qset *qs);
/* Prepare time of every query, ns (sum of prepare_ns). */
uint64_t sp_qset_prepare_ns(const struct sp_qset *qs);
/* Full schema loads SQLite ran (its nested `SELECT * FROM "main".
 * sqlite_master ORDER BY rowid`): one per connection that ran a statement,
 * and one more after each schema change made by another connection. The
 * preload does not see opens themselves: this counts the ones that cost. */
uint64_t sp_qset_schema_loads(const struct sp_qset *qs);
/* Sort by a key: total, count, mean, p50, p95, p99, max, rows, self, errors,
 * vm, prepare.
 * Returns -1 for an unknown key, -2 on ENOMEM (the rows as they were). */
int sp_qset_sort(struct sp_qset *qs, const char *key);
/* sp_qset_sort, and with perm the order it made: row j is the one at
 * (*perm)[j] before (malloc'd, the caller frees it; NULL when qs is
 * empty). */
int sp_qset_sort_perm(struct sp_qset *qs, const char *key, size_t **perm);
/* The order profiles are written in: fp_id ascending, then "exec" before
 * "stmt". < 0, 0 or > 0 as r's key is before, is or is after {fp_id,
 * kind_exec}. */
int sp_qrow_key_cmp(const struct sp_qrow *r, int64_t fp_id, int kind_exec);
/* The first row of qs (in that order) not before {fp_id, kind_exec}, or
 * qs->n: searched from cur (the last answer: a walk in key order finds
 * each next row in a step or two), by doubling steps forward or back,
 * then halving. */
size_t sp_qset_seek(const struct sp_qset *qs, int64_t fp_id, int kind_exec, size_t cur);

/* Failed executions of a profile, grouped by query, kind, code, message,
 * process and stack, most frequent first. A statement's failure that is
 * also an sqlite3_exec's (same process, code and message, and a stack
 * through sqlite3_exec: the statement the exec ran) is listed once, as the
 * exec's. */
struct sp_failure {
	int64_t fp_id;
	enum sp_qkind kind;
	int rc;
	char *message, *fingerprint;
	uint64_t count, pid, stack_id;
};
struct sp_failures {
	struct sp_failure *f;
	size_t n;
};
int sp_failures_load(sqlite3 *db, struct sp_failures *out);
void sp_failures_free(struct sp_failures *fs);

#endif
