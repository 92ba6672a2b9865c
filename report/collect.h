/* SPDX-License-Identifier: MIT */
/*
 * collect.h - the collector's model of a recording: decoding of stream
 * messages (untrusted input) and their aggregation in memory that grows
 * with distinct queries, stacks and sites, not with executions.
 *
 * What it does not do: sockets (cmd-record.c), symbols and the profile
 * file (profile.c).
 */
#ifndef SP_COLLECT_H
#define SP_COLLECT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "hist.h"
#include "sp_wire.h"
#include "util.h"

struct sp_module {
	uint32_t pid, generation;
	uint64_t bias, lo, hi;
	uint8_t build_id[64];
	uint32_t build_id_len;
	char *path;
};

struct sp_proc {
	uint32_t pid, ppid;
	char *exe;
	int hello, bye, sqlite_found, clock;
	uint64_t tsc_ref, mono_ref;
	uint64_t lost;        /* max of the message headers' cumulative counts */
	uint64_t execs;       /* EXEC records received */
	uint64_t bye_execs;   /* executions the process says it ended */
	uint64_t untracked;
	uint64_t msgs, bad_msgs, gaps;
	uint64_t reconnects;  /* the program closed our descriptor this often */
	uint64_t last_seq;
};

/* Aggregate per (sql_id, kind): exact over every execution. */
#define SP_RUN_BUCKETS 64

struct sp_qagg {
	uint64_t count, total_ns, self_ns, wall_ns, rows;
	uint64_t vm_steps, fullscan_steps, sorts, autoindex;
	uint64_t errors, nested, samples, prepares, prepare_ns;
	struct sp_hist *hist; /* db time per execution, ns */
	/* Runs: maximal sequences of consecutive top-level executions of this
	 * SQL on one thread (N+1 detection). runs_by_len[i]: runs of length
	 * i+1 for i < 16, then of length in [2^(i-12), 2^(i-11)). */
	uint64_t runs, max_run;
	uint64_t runs_by_len[SP_RUN_BUCKETS];
};

/* Aggregate per (sql_id, kind, pid, stack_id) over sampled executions. */
struct sp_sagg {
	uint64_t samples, total_ns, rows, vm_steps;
	uint64_t random_samples, random_ns; /* of those, the randomly drawn */
};

struct sp_stack {
	uint32_t depth;
	uint64_t *pcs;
};

struct sp_plan {
	uint64_t connections; /* how many connections reported this plan */
	char *text;           /* "id|parent|detail" lines */
};

struct sp_thr {
	uint64_t key, kind;    /* last top-level execution: fingerprint id when
				* its text is known, else its sql_id */
	uint64_t sql_id;       /* where the run is credited */
	uint64_t run;          /* its run length so far */
};

void sp_run_bucket_bounds(int b, uint64_t *lo, uint64_t *hi);

struct sp_err {
	uint64_t count;
	char *msg;
};

/* One sampled execution, kept individually up to a cap (timelines). */
struct sp_event {
	uint32_t pid, tid;
	uint64_t seq, parent_seq, sql_id, stack_id;
	uint64_t start_ns, wall_ns, db_ns, self_ns, rows;
	uint32_t vm_steps, flags;
	int32_t rc;
	uint16_t kind;
};

struct sp_coll {
	struct hmap procs;   /* pid -> struct sp_proc */
	struct hmap sqls;    /* sql_id -> struct { char *text; uint32_t full_len; int truncated; } */
	struct hmap queries; /* {sql_id, kind} -> struct sp_qagg */
	struct hmap sites;   /* {sql_id, kind, pid, stack_id} -> struct sp_sagg */
	struct hmap stacks;  /* {pid, stack_id} -> struct sp_stack */
	struct hmap errors;  /* {sql_id, rc, pid, stack_id, msg hash} -> struct sp_err */
	struct hmap modules; /* {pid, generation, lo} -> struct sp_module */
	struct hmap plans;   /* {sql_id, plan hash} -> struct sp_plan */
	struct hmap threads; /* {pid, tid} -> struct sp_thr (run tracking) */
	struct sp_event *events;
	size_t nevents, events_cap, events_max;
	uint64_t events_dropped;
	/* With a spill file, sampled executions go to it (fixed-size records)
	 * instead of memory, so the collector's memory does not grow with
	 * them; events_max then bounds the file. */
	FILE *spill;
	uint64_t nspilled;
	uint64_t records, messages, bad_messages;
	double ns_per_tick; /* collector's TSC calibration */
	char last_error[256];
};

struct sp_sql {
	char *text;
	uint32_t full_len;
	int truncated;
	uint64_t fp_id; /* fingerprint id, for runs of one query with literals */
};

void sp_coll_init(struct sp_coll *c);
void sp_coll_free(struct sp_coll *c);
/* Close every open run (end of recording). */
void sp_coll_finish(struct sp_coll *c);
/* Validate the whole message, then apply it. Returns 0, or -1 with a
 * one-line reason in c->last_error and nothing applied. peer_pid, when
 * nonzero, is the pid the kernel vouches for (SO_PEERCRED). */
int sp_coll_message(struct sp_coll *c, const uint8_t *msg, size_t len, uint32_t peer_pid);
uint64_t sp_coll_lost(const struct sp_coll *c);
/* Send sampled executions to f (owned by the caller, opened w+) from now
 * on, keeping at most max of them. */
void sp_coll_spill(struct sp_coll *c, FILE *f, size_t max);
uint64_t sp_coll_executions(const struct sp_coll *c);

#endif
