/* SPDX-License-Identifier: MIT */
/*
 * profile-write.h - the profile file, write side: profile.c writes a
 * finished recording (the collector's struct sp_coll, collect.h) to a
 * profile, symbolizing every stack on the way. Included by the writers
 * (record, agent, outfile.c); readers include profile.h only.
 */
#ifndef SP_PROFILE_WRITE_H
#define SP_PROFILE_WRITE_H

#include <sqlite3.h>

#include "collect.h"
#include "profile.h"

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

#endif
