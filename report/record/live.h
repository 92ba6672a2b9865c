/* SPDX-License-Identifier: MIT */
/*
 * live.h - a standing agent's current per-query totals, the one model
 * behind its live views: the Prometheus metrics (metrics.c) and
 * `sqlprof top` (cmd-top.c, through the viewer request on the agent's
 * socket). Rows are per fingerprint and kind, like the profile's queries
 * table, with exact counts and times and the executions per fixed
 * latency bucket (sp_live_bounds_ns).
 *
 * Also here: the viewer request and its answer (a versioned binary
 * serialization, passed in a memfd), and the agent's state for them (the
 * fingerprints the metrics name, agent_series in the profile). The
 * buckets go on across an agent restart because the collector's
 * histograms do (cmd-agent.c carries them, agent_live_hist).
 *
 * What it does not do: read the services' statistics or sockets
 * (cmd-agent.c and collect.c do; they hand the merged collectors in), or
 * print anything.
 */
#ifndef SP_LIVE_H
#define SP_LIVE_H

#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

#include "collect.h"
#include "util.h"

/* Upper bounds of the latency buckets, in ns (the metrics' le, in
 * seconds): 1, 5, 10, 50 ... us up to 10 s; an execution above the last
 * is in the +Inf bucket only. */
#define SP_LIVE_NB 15
extern const uint64_t sp_live_bounds_ns[SP_LIVE_NB];

struct sp_live_row {
	uint64_t fp_id;
	uint32_t kind; /* SP_KIND_STMT or SP_KIND_EXEC */
	uint64_t count, total_ns, rows, errors, min_ns, max_ns;
	uint64_t p50_ns, p95_ns;         /* from the collector's histograms */
	uint64_t bucket[SP_LIVE_NB + 1]; /* executions per bucket (not
					   * cumulative); the last: above */
	char *text;                      /* the fingerprint (malloc'd) */
	char *site;                      /* "function (file:line)", NULL: unknown */
};

struct sp_live {
	struct sp_live_row *rows;
	size_t n;
	uint64_t lost, processes, executions, restarts;
	int64_t time_ns;  /* CLOCK_REALTIME of the reading */
	uint64_t pending; /* processes of the previous agent, still running, not
			   * back yet (their executions since its last write
			   * are not in the totals): counted only in the
			   * agent's first seconds, while they reconnect */
	char *profile;    /* the agent's profile (absolute path), NULL: none */
};

void sp_live_free(struct sp_live *l);
/* Sort rows by total_ns, largest first (ties by fp_id, kind). */
void sp_live_sort(struct sp_live *l);
/* The bucket (0..SP_LIVE_NB) of a db time in ns. */
int sp_live_bucket_of(uint64_t ns);

/*
 * The agent's state for its live views, kept for the agent's life: the
 * fingerprint texts made so far (fp_id -> char *), and the fingerprints
 * that have a series of their own in the metrics.
 */
struct sp_live_state {
	struct hmap fptext; /* fp_id -> char * */
	struct hmap series; /* {fp_id, kind} -> int: named in the metrics */
	char *profile;      /* the agent's output, absolute */
};
void sp_live_state_init(struct sp_live_state *s);
void sp_live_state_free(struct sp_live_state *s);

/*
 * An accumulation of collectors into rows. sp_live_add adds every query
 * of src (counts, times, and its histograms: a query's own and src's
 * per-fingerprint ones), its fingerprint taken from names' SQL texts
 * (texts not known yet are left out: they count once their text came,
 * so that a series never goes down). sp_live_take ends it into out.
 */
struct sp_live_acc {
	struct hmap m; /* {fp_id, kind} -> struct sp_live_accv */
	int oom;
};
void sp_live_acc_init(struct sp_live_acc *a);
void sp_live_acc_free(struct sp_live_acc *a);
void sp_live_add(struct sp_live_acc *a, struct sp_live_state *s, const struct sp_coll *src,
		 const struct sp_coll *names);
/* Rows of a, with texts; a is emptied. 0, or -1 when out of memory. */
int sp_live_take(struct sp_live_acc *a, struct sp_live_state *s, struct sp_live *out);

/* path made absolute (against the current directory), malloc'd; NULL
 * on ENOMEM. */
char *sp_live_abspath(const char *path);
/* Write the named series (agent_series) into db. 0 or -1. */
int sp_live_state_write(sqlite3 *db, const struct sp_live_state *s);
/* Load what sp_live_state_write wrote (nothing in a profile without it).
 * 0 or -1 (SQLite's message in err). */
int sp_live_state_load(sqlite3 *db, struct sp_live_state *s, char *err, size_t errlen);

/*
 * The viewer request (`sqlprof top`): a viewer connects to the agent's
 * socket like a process, and its first message is SP_VIEW_MAGIC and
 * SP_VIEW_VERSION (two uint32_t) instead of a stream header. The agent
 * answers with one message, the same 8 bytes and a descriptor: a memfd
 * holding sp_live_encode's bytes, and closes the connection.
 */
#define SP_VIEW_MAGIC 0x57565053u /* "SPVW" little-endian */
#define SP_VIEW_VERSION 1

/* l as bytes (malloc'd into *buf, *len). 0 or -1. */
int sp_live_encode(const struct sp_live *l, uint8_t **buf, size_t *len);
/* Parse sp_live_encode's bytes (hostile: every length checked) into out.
 * 0, or -1 with a reason in err. */
int sp_live_decode(const uint8_t *buf, size_t len, struct sp_live *out, char *err, size_t errlen);

/* A row's OpenTelemetry db.query.summary: its operation and first table,
 * "SELECT t" (the fingerprint's first keyword alone when no table is
 * found), into out[len]. */
void sp_live_summary(const char *fingerprint, char *out, size_t len);

#endif
