/* SPDX-License-Identifier: MIT */
/*
 * profile-write.h - the profile file, write side: profile.c writes a
 * finished recording (the collector's struct sp_coll, collect.h) to a
 * profile, symbolizing every stack on the way. Included by the writers
 * (record, agent, outfile.c); readers include profile.h only.
 */
#ifndef SP_PROFILE_WRITE_H
#define SP_PROFILE_WRITE_H

#include <pthread.h>
#include <sqlite3.h>

#include "recording.h"
#include "profile.h"

/* What one run of `record --repeat` added to one query. */
struct sp_repeat_total {
	uint32_t run, kind;
	uint64_t sql_id, count, total_ns;
};

/* The events table built while the command ran (report/record/timeline.c):
 * a database file holding the first `events` events of the spill file,
 * each with its fingerprint's id, under the profile's events table and
 * indexes (sp_profile_timeline_init). sp_profile_write takes the file for
 * the profile and writes only the events after those; once (used). */
struct sp_timeline {
	char path[4096];
	uint64_t events;
	int used;
};

struct sp_meta {
	const char *command; /* the profiled command line */
	long long started;   /* unix time */
	long long duration_ns;
	int exit_status; /* as sqlprof record exits */
	double rate;
	const char *debug_path;             /* extra debug-file dirs for the symbolizer */
	const struct sp_repeat_total *runs; /* per-run totals, NULL if none */
	size_t nruns;
	int repeat; /* runs recorded */
	/* processes may still be running (the agent's snapshots): no plan is
	 * taken on their database files (plan_gaps stay gaps) */
	int live;
	/* Called inside the profile's transaction, after every table of the
	 * format is filled: a writer's own tables and meta rows (the agent's
	 * state, profile-format.md). NULL: none. Returns 0 or -1. */
	int (*extra)(struct sqlite3 *db, void *arg);
	void *extra_arg;
	/* record's one interval [series[0], series[1]) (Unix ns), written
	 * from the writer's queries (sp_series_first); NULL: none */
	const int64_t *series;
	struct sp_timeline *timeline; /* NULL: every event written here */
	/* the symbolizer to use, its modules opened while the command ran
	 * (sp_profile_sym_prewarm) and its debug path set; the caller closes
	 * it. NULL: one of the profile's own */
	struct sym_ctx *sym;
};

/* Write c to path (created 0600, replaced atomically). Returns 0, or -1
 * with a one-line reason in err. */
int sp_profile_write(const char *path, struct sp_coll *c, const struct sp_meta *m, char *err,
		     size_t errlen);

/* For a timeline's writer: make its events table and indexes in db (the
 * profile's own statements). Returns 0, or -1 with the reason in err. */
int sp_profile_timeline_init(sqlite3 *db, char *err, size_t errlen);
/* Inserting events into a profile's events table (or a timeline's), 32
 * rows a statement: SQLite opens the table's and both indexes' cursors
 * once for all of them (one row a statement took 1.2 us an event at
 * 100,000 events). Added events are in the table once flushed. Each call
 * returns 0, or -1 (sqlite3_errmsg of the db). */
#define SP_EVINS_ROWS 32
struct sp_evins {
	sqlite3_stmt *one, *many;
	int n; /* added, not inserted yet */
	struct sp_event ev[SP_EVINS_ROWS];
	uint64_t fp[SP_EVINS_ROWS];
};
int sp_evins_open(struct sp_evins *x, sqlite3 *db);
/* e, with its fingerprint's id fp_id */
int sp_evins_add(struct sp_evins *x, const struct sp_event *e, uint64_t fp_id);
int sp_evins_flush(struct sp_evins *x);
void sp_evins_close(struct sp_evins *x);
/*
 * Open in sym the modules c's stacks need that are not in opened (a hmap
 * of uint64_t keys, no value; they are added), as the profile's
 * symbolization would: the costly part of it, a debug file read and its
 * compressed DWARF sections inflated (libc6-dbg's: ~40 ms), done while the
 * command runs. c is read holding lock, which is let go of while sym
 * works. Returns the modules opened.
 */
struct sym_ctx;
size_t sp_profile_sym_prewarm(struct sym_ctx *sym, struct sp_coll *c, pthread_mutex_t *lock,
			      struct hmap *opened);
/*
 * A symbolizer for the CLI: sym_open with debug_path (NULL: the default
 * dirs) and the persistent cache of results in $XDG_CACHE_HOME/sqlprof/sym
 * (else $HOME/.cache/sqlprof/sym), unless SQLPROF_SYMCACHE is 0 or no such
 * directory can be ours (then without it). The caller closes it (which
 * writes the cache back). NULL on ENOMEM.
 */
struct sym_ctx *sp_sym_open(const char *debug_path);
/* The fingerprint id the profile gives text s (as its statements row). */
uint64_t sp_profile_sql_fp_id(const struct sp_sql *s);

#endif
