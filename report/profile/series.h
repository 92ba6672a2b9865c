/* SPDX-License-Identifier: MIT */
/*
 * series.h - per-interval totals per query (a time series) in a profile,
 * and the time windows that read them (docs/profile-format.md,
 * "Intervals"; docs/service.md, "Time series").
 *
 * Writing: every write of an agent's profile adds one interval, the
 * difference between the totals it writes and the sum of the intervals
 * the previous profile at the same path held, so the intervals of a query
 * always sum to its totals, whatever happened in between (processes that
 * came and went, an agent killed and started again). Old intervals are
 * merged into coarser ones (sums kept) so that the series stays small.
 * `record` writes one interval, the whole run.
 *
 * Reading: --since/--until/--last are parsed into a request
 * (sp_winreq_set), resolved against a profile's intervals
 * (sp_window_resolve), and sp_qset_load_window (query.h) then loads the
 * window's sums instead of the totals.
 */
#ifndef SP_SERIES_H
#define SP_SERIES_H

#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>

/* The subtractable columns of an interval_queries row, in order. */
#define SP_SERIES_COLS                                                                         \
	"count, total_ns, self_ns, wall_ns, rows, vm_steps, fullscan_steps, sorts, autoindex," \
	" errors, nested, samples, prepares, prepare_ns, runs"
#define SP_SERIES_NCOLS 15

/*
 * In the writer's transaction, after `queries` and `histograms` are
 * filled: create the interval tables, copy the intervals of the profile
 * at prev (the agent's profile this write replaces; NULL, unreadable or
 * not an agent's: none), add
 * the interval [last end, end_ns) holding the difference (the first one
 * starts at first_ns), and merge old intervals (sp_series_tiers). Times
 * are Unix time in nanoseconds. Returns 0, or -1 with a reason in err.
 */
int sp_series_add(sqlite3 *db, const char *prev, int64_t first_ns, int64_t end_ns, char *err,
		  size_t errlen);

/*
 * record's one interval [first_ns, end_ns) (no profile before it), in the
 * writer's transaction: the interval tables, the interval, and a row for
 * each query next gives, as sp_series_add would make them from `queries`
 * and `histograms` (a query with a total or a bucket that is not 0; its
 * buckets as JSON, "[]" for none), but from the writer's own rows: at
 * 20,000 queries sp_series_add's statement was a third of the writer's
 * instructions. next fills *q and returns 1, or returns 0 at the end, -1
 * on an error (ENOMEM); the queries come in (fp_id, kind) order, as
 * SQLite orders them. db has sp_rows (sp_rowsrc_register). Returns 0,
 * or -1 with a reason in err.
 */
struct sp_series_query {
	uint64_t fp_id;
	const char *kind;              /* "stmt" or "exec" */
	int64_t sums[SP_SERIES_NCOLS]; /* SP_SERIES_COLS, in order */
	const uint64_t *lo, *cnt;      /* its latency histogram's buckets, */
	size_t nb;                     /* in increasing lo, nb of them */
};
int sp_series_first(sqlite3 *db, int64_t first_ns, int64_t end_ns,
		    int (*next)(struct sp_series_query *q, void *arg), void *arg, char *err,
		    size_t errlen);

/* Call fn for each [bucket_ns, count] pair of an interval_queries row's
 * buckets (JSON text, NULL: none), in order. Returns how many, or -1 at
 * the first thing that is not such a pair (those before it were given). */
int sp_series_buckets(const char *text, void (*fn)(uint64_t lo, int64_t count, void *arg),
		      void *arg);

/* Counter tracks of the top queries by total time, for the Perfetto
 * export: per query "executions/s" and "p95 ns" of each interval, at
 * the interval's start on the events' clock (meta.clock_offset_ns), and
 * 0 at the last end. names[t] is track t's name (malloc'd), points in no
 * order. None (0 tracks) without intervals or the offset. Returns 0, or
 * -1 on ENOMEM or a bad read; the caller frees names, each name and pts. */
struct sp_series_point {
	uint64_t ts;
	size_t track;
	uint64_t value;
};
int sp_series_points(sqlite3 *db, size_t top, char ***names, size_t *ntracks,
		     struct sp_series_point **pts, size_t *npts);

/* Unix time now, in nanoseconds (CLOCK_REALTIME). */
int64_t sp_series_now_ns(void);

/* The retention rule: intervals that ended more than age_s before the
 * newest end are merged into buckets of width_s (aligned to Unix time).
 * SQLPROF_SERIES_TIERS="W@A,W@A,..." (seconds; for tests) replaces the
 * default; each width a multiple of the one before, ages increasing. */
struct sp_tier {
	int64_t width_ns, age_ns;
};
#define SP_SERIES_MAX_TIERS 8
/* The tiers in use (*n of them); NULL with a message in err when
 * SQLPROF_SERIES_TIERS is malformed. */
const struct sp_tier *sp_series_tiers(size_t *n, char *err, size_t errlen);

/* What the user asked for: the option texts (NULL: not given). */
struct sp_winreq {
	const char *since, *until, *last;
};

/* Take --since/--until/--last (which: 's', 'u' or 'l') into r, checking
 * the syntax now. Returns 0, or -1 after printing "sqlprof CMD: ..." to
 * stderr (the caller exits 2). */
int sp_winreq_set(struct sp_winreq *r, int which, const char *arg, const char *cmd);
static inline int sp_winreq_on(const struct sp_winreq *r)
{
	return r && (r->since || r->until || r->last);
}

/* A resolved window: the intervals whose end is in (since_ns, until_ns]
 * (so that --until T and --since T split a profile in two, and --last 5m
 * is the intervals that ended in the last five minutes); first_ns and
 * end_ns are the first one's start and the last one's end (the time
 * they cover), n how many. Readers select the rows whose start_ns is in
 * [lo_start, hi_start]. */
struct sp_window {
	int on;
	int64_t since_ns, until_ns; /* asked, absolute; INT64_MIN/INT64_MAX: open */
	int64_t first_ns, end_ns;   /* covered; both 0 when no interval is in */
	int64_t lo_start, hi_start; /* the first and last interval's start; 1 > 0 when none */
	uint64_t n;
	int64_t profile_first_ns, profile_end_ns; /* the profile's whole series */
};

/* Resolve r against db's intervals (relative times count from the last
 * interval's end). Returns 0; -1 with a reason in err when the profile
 * has no intervals or the window is empty by construction (since >=
 * until): the caller exits 2. */
int sp_window_resolve(sqlite3 *db, const struct sp_winreq *r, struct sp_window *w, char *err,
		      size_t errlen);

/* "2026-12-01T14:00:00.250Z" (UTC) into buf. */
const char *sp_series_iso(int64_t ns, char *buf, size_t len);

/* The window as the report's header says it: "# LABEL: ISO to ISO (D s,
 * N intervals)". */
void sp_window_print(FILE *f, const char *label, const struct sp_window *w);

/* Parsers, exposed for the unit tests. A time: ISO 8601 date and time
 * (local, or with Z / +HH:MM), @UNIX seconds, or -DURATION (relative:
 * *rel set to 1 and *ns negative). A duration: a number with s, m, h or d
 * (or ms; a bare number is seconds), above 0. Return 0 or -1. */
int sp_parse_time(const char *s, int64_t *ns, int *rel);
int sp_parse_duration(const char *s, int64_t *ns);

#endif
