/* SPDX-License-Identifier: MIT */
/*
 * profile.h - the profile file: a SQLite database with a documented schema
 * (docs/profile-format.md). profile.c writes it from a finished recording,
 * symbolizing every stack on the way; readers (report, export, diff) open
 * it with sp_profile_open and query it with plain SQL.
 */
#ifndef SP_PROFILE_H
#define SP_PROFILE_H

#include <sqlite3.h>

#include "collect.h"

#define SP_PROFILE_FORMAT 3 /* 2: runs, run_totals, plans; 3: indexes */
#define SP_PROFILE_FORMAT_MIN 2 /* read too: the same tables without indexes */
#define SP_PROFILE_DEFAULT "sqlprof.db"

/* What one run of `record --repeat` added to one query. */
struct sp_run_total {
	uint32_t run, kind;
	uint64_t sql_id, count, total_ns;
};

struct sp_meta {
	const char *command;   /* the profiled command line */
	long long started;     /* unix time */
	long long duration_ns;
	int exit_status;       /* as sqlprof record exits */
	double rate;
	const char *debug_path; /* extra debug-file dirs for the symbolizer */
	const struct sp_run_total *runs; /* per-run totals, NULL if none */
	size_t nruns;
	int repeat;            /* runs recorded */
	/* Called inside the profile's transaction, after every table of the
	 * format is filled: a writer's own tables and meta rows (the agent's
	 * state, profile-format.md). NULL: none. Returns 0 or -1. */
	int (*extra)(struct sqlite3 *db, void *arg);
	void *extra_arg;
};

/* Write c to path (created 0600, replaced atomically). Returns 0, or -1
 * with a one-line reason in err. */
int sp_profile_write(const char *path, struct sp_coll *c, const struct sp_meta *m, char *err,
		     size_t errlen);

/* Open a profile read-only and check it is one (format version, tables).
 * Returns the handle, or NULL with a one-line reason in err. */
sqlite3 *sp_profile_open(const char *path, char *err, size_t errlen);

#endif
