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

struct sp_qrow {
	int64_t fp_id;
	char kind[8];
	char *fingerprint, *sql;
	uint64_t count, total_ns, self_ns, wall_ns, min_ns, max_ns, rows;
	uint64_t vm_steps, fullscan_steps, sorts, autoindex, errors, nested, samples;
	uint64_t prepares, prepare_ns;
	uint64_t p50_ns, p95_ns, p99_ns;
	uint64_t runs, max_run;   /* consecutive executions on one thread */
	double mean_ns;
	char *plan;               /* EXPLAIN QUERY PLAN lines, NULL if none */
	int nplans;               /* distinct plans seen (>1: it changed) */
};

struct sp_qset {
	struct sp_qrow *rows;
	size_t n;
	uint64_t lost, executions, processes, bad_messages, untracked;
	uint64_t sqlite_processes; /* processes with executions (the rest ran no SQLite) */
	uint64_t runs;             /* meta runs: record --repeat (0: unknown) */
	uint64_t events_dropped;   /* sampled executions left out of the timeline */
	/* processes that could not connect (meta), and of them those whose
	 * executions are missing */
	uint64_t unreported, unreported_missing;
	char *command;
	int64_t exit_status, duration_ns; /* of the command (meta); -1: unknown */
	char *died; /* meta "died": PID\tEXE\tN\tSQL lines (sp_coll_deaths), or NULL */
};

/* Load every query of a profile. Returns 0, or -1 with err set. */
int sp_qset_load(sqlite3 *db, struct sp_qset *qs, char *err, size_t errlen);
void sp_qset_free(struct sp_qset *qs);
/* Sort by a key: total, count, mean, p50, p95, p99, max, rows, self, errors.
 * Returns -1 for an unknown key. */
int sp_qset_sort(struct sp_qset *qs, const char *key);

#endif
