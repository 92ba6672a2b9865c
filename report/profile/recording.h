/* SPDX-License-Identifier: MIT */
/*
 * recording.h - the model of a recording: the processes, texts, queries,
 * sites, stacks, modules, plans and sampled executions the collector
 * (record/collect.h) builds from the stream and the profile writer
 * (profile-write.h) reads. It grows with distinct queries, stacks and
 * sites, not with executions. Here, in the profile layer, so that the
 * writer needs nothing of record/; the functions declared here read the
 * model (recording.c), the collector's own are in collect.h.
 */
#ifndef SP_RECORDING_H
#define SP_RECORDING_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "hist.h"
#include "sp_wire.h"
#include "util.h"

struct sp_module {
	uint32_t pid, generation;
	uint32_t image; /* the process image that sent it (exec) */
	uint64_t bias, lo, hi;
	uint8_t build_id[64];
	uint32_t build_id_len;
	char *path;
	/* the file mapped, as it was when the map was sent (found 0: not
	 * known; replaced: path named another file already): a file without
	 * a build-id that is another one at the end is not symbolized
	 * (sp_module_changed) */
	uint64_t dev, ino, size;
	int64_t mtime_ns;
	int found, replaced;
	int sqlite;     /* 1: a SQLite library, 2: SQLite compiled into it, 0 (SP_MODULE_SQLITE*) */
	unsigned embed; /* SP_MODULE_EMBED* bits: SQLite compiled in, hooked or why not */
	int changed;    /* sp_module_changed, worked out once by write_frames */
};

/* 1 when m's file has no build-id and is not the file that was mapped
 * (replaced or rebuilt on disk since): its lines would be another
 * program's. */
int sp_module_changed(const struct sp_module *m);

struct sp_proc {
	uint32_t pid, ppid; /* as we name them (SO_PEERCRED: our pid namespace) */
	uint32_t ns_pid;    /* the pid it knows itself by (its HELLO's), when it
			       * runs in another pid namespace; else 0 */
	uint32_t stats_ino; /* its statistics memfd's inode, low 32 bits (a
			       * BYE file names it: sp_rec_bye.stats_ino) */
	char *exe;
	int hello, bye, sqlite_found, clock;
	uint64_t tsc_ref, mono_ref;
	uint64_t lost;          /* event records dropped: max of the message
			       * headers' cumulative counts */
	uint64_t execs;         /* executions in its statistics (merged so far) */
	uint64_t events;        /* EXEC events received */
	uint64_t bye_execs;     /* executions the process says it ended */
	uint64_t bye_base;      /* bye_execs of its earlier images (a BYE's count
			       * is cumulative: a failed exec's BYE and the
			       * exit's of one image are not added up) */
	uint32_t merged_image;  /* images up to this one had their statistics
				* merged: a resend (a reconnect after BYE) is
				* not counted again */
	uint64_t unattributed;  /* executions counted with no query (no room) */
	uint64_t stats_bad;     /* statistics records refused (corrupt) */
	uint32_t foreign_libs;  /* other SQLite libraries it called (not profiled) */
	uint32_t deepbind_late; /* RTLD_DEEPBIND loads not patched at once */
	uint32_t clamped;       /* executions whose times were clamped (the
				 * clock went back: sp_stats_hdr.clamped) */
	uint32_t texts_folded;  /* texts counted in their fingerprint's folded
				 * text (sp_stats_hdr.texts_folded) */
	uint32_t seen;          /* enum sp_seen bits of its images' statistics */

	/* SQL texts (sql_id) of the executions its last merged image was
	 * running (started, never ended), the first SP_PROC_RUNNING of them;
	 * nrunning counts all. Only what a process that died was doing. */
#define SP_PROC_RUNNING 4
	uint64_t running[SP_PROC_RUNNING];
	uint32_t nrunning;
	int died;       /* its image's connection ended without BYE, and it did not
		   * exit (a signal, a crash), or its end is not known */
	int pidfd;      /* 1 + a pidfd of the process while its connection
			       * ended without BYE and its end is not known
			       * (sp_coll_settle); 0: none */
	int exit_known; /* exit_status is its wait status */
	int exit_status;
	int no_stats; /* an image came without shared statistics */
	uint64_t untracked;
	uint64_t msgs, bad_msgs, gaps;
	uint64_t reconnects; /* the program closed our descriptor this often */
	uint64_t last_seq;
	uint32_t image;     /* process images seen: HELLOs that were not
			       * reconnects (exec starts a new one) */
	uint32_t bye_image; /* image + 1 when that image said BYE, else 0:
			       * its rings go when its connection closes */
	int carried;        /* loaded from the profile of an earlier agent
			       * (cmd-agent.c): its next HELLO is no exec */
	int unreported;     /* an image could not connect: its data came from
			       * a file it left (SP_HELLO_UNREPORTED) */
};

/*
 * One thread's ring as the collector holds it. The mapping is the
 * collector's own (the writer has another); everything needed to read it
 * (size, pid, tail) is kept here and never re-read from the shared page,
 * which the writer may scribble on. Rings belong to a pid and a process
 * image, not to a connection: the writer reconnects and keeps its rings.
 */
struct sp_ring {
	struct sp_ring_shared *sh; /* map_len bytes, MAP_SHARED */
	size_t map_len;
	uint32_t pid;       /* the process's key (sp_proc.pid) */
	uint32_t rpid;      /* the pid its header and records carry (the
				    * process's own: another namespace's) */
	uint32_t tid, size; /* as announced and checked */
	uint32_t tail;      /* ours: every record before it was read */
	uint32_t image;     /* sp_proc.image when it was announced */
	int broken;         /* reported once; never read again */
};

/*
 * An image's shared statistics (sp_wire.h), mapped read-only. Kept per pid and image until merged: when the
 * image is over (its BYE and then the end of its connection, or a later
 * image's HELLO), or at the end of the recording.
 */
struct sp_statmap {
	void *map;
	size_t size;
	uint32_t pid, image;
	int clock;    /* the image's clock, for tick conversion */
	int copy;     /* map is our malloc'd copy (STATS_COPY) */
	uint64_t ino; /* the memfd's inode: names the image's statistics
				   * across reconnects (0: a copy) */
};

/* A fingerprint's histogram, with its exact extremes and sum. */
struct sp_fphist {
	struct sp_hist *hist;
	uint64_t min_ns, max_ns, sum_ns, count;
};

/* Aggregate per (sql_id, kind): exact over every execution. */
#define SP_RUN_BUCKETS 64

struct sp_qagg {
	uint64_t count, total_ns, self_ns, wall_ns, rows;
	uint64_t vm_steps, fullscan_steps, sorts, autoindex;
	uint64_t errors, nested, samples, prepares, prepare_ns;
	uint64_t min_ns, max_ns; /* exact; min_ns valid when count > 0 */
	struct sp_hist *hist;    /* db time per execution, ns; NULL when it went
			       * to its fingerprint's (c->fphists) */
	/* Runs: maximal sequences of consecutive top-level executions of this
	 * SQL on one thread (N+1 detection). loops_by_len[i]: runs of length
	 * i+1 for i < 16, then of length in [2^(i-12), 2^(i-11)). */
	uint64_t runs, max_run;
	uint64_t *loops_by_len; /* runs_nb counts (of SP_RUN_BUCKETS); NULL until
				* a run is credited (sp_qagg_loops): most texts
				* of a dump restore have none, and the table
				* of 100,000 of them stays small */
	uint32_t runs_nb;       /* counts loops_by_len holds: up to the longest
				* run's bucket (200,000 texts with runs of 1-3
				* took 512 bytes each for 64 buckets, 105 MB) */
};

/* q's run-length counts, made or grown to hold at least nb (at most
 * SP_RUN_BUCKETS), the new ones 0; NULL on ENOMEM (q unchanged). */
uint64_t *sp_qagg_loops(struct sp_qagg *q, uint32_t nb);

/* Aggregate per (sql_id, kind, pid, stack_id) over sampled executions. */
struct sp_sagg {
	uint64_t samples, total_ns, rows, vm_steps;
	uint64_t random_samples, random_ns; /* of those, the randomly drawn */
};

/* d += s, field by field (a merge of two processes' or two images' rows) */
static inline void sp_sagg_add(struct sp_sagg *d, const struct sp_sagg *s)
{
	d->samples += s->samples;
	d->total_ns += s->total_ns;
	d->rows += s->rows;
	d->vm_steps += s->vm_steps;
	d->random_samples += s->random_samples;
	d->random_ns += s->random_ns;
}

struct sp_stack {
	uint32_t depth;
	uint32_t generation; /* module map current when it was taken (0: unknown) */
	uint32_t image;      /* process image that sent it */
	uint64_t *pcs;
};

struct sp_plan {
	uint64_t connections; /* how many connections reported this plan */
	char *text;           /* "id|parent|detail" lines; with none, why no plan */
	uint64_t schema_id;   /* the first schema it was reported under, 0: none */
	int none;             /* SP_PLAN_NONE: no plan could be taken, text says why */
};

/* Per SQL text: its randomly drawn statement executions with a hash of
 * their bound values, how many of them had the values of an earlier one
 * of the same process, and the most executions one set of values had. */
struct sp_dup {
	uint64_t samples, repeats, top;
};
#define SP_DUPVALS_MAX \
	(1u << 14) /* distinct values kept (about 1.5 MB); beyond, new ones
				    * are not noted: their repeats are missed, never
				    * invented. 1 << 20 let the collector grow by 10 MB
				    * over 10 M executions at the default rate */

/* A schema plans were taken under (SP_REC_SCHEMA): CREATE statements, or
 * (file) the database file's path, read when the profile is written. */
struct sp_schema {
	int file;
	char *text;
};

void sp_loop_bucket_bounds(int b, uint64_t *lo, uint64_t *hi);
int sp_loop_bucket(uint64_t len); /* the bucket of a run length */

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

/* Exact totals of a text's executions from one calling return address. */
struct sp_caller {
	uint64_t count, total_ns;
};

/* A Python code object (SP_REC_PYCODE), for its frames' names and lines. */
struct sp_pycode {
	char *name, *qualname, *file; /* qualname NULL before 3.11 */
	uint8_t *table;
	uint32_t table_len;
	int32_t firstlineno;
	uint8_t major, minor, cut;
};

struct sp_coll {
	struct hmap procs; /* pid -> struct sp_proc */
	struct hmap sqls;  /* sql_id -> struct { char *text; uint32_t full_len; int truncated; } */
	struct hmap queries;   /* {sql_id, kind} -> struct sp_qagg */
	struct hmap sites;     /* {sql_id, kind, pid, stack_id} -> struct sp_sagg */
	struct hmap stacks;    /* {pid, stack_id} -> struct sp_stack */
	struct hmap errors;    /* {sql_id, rc, pid, stack_id, msg hash} -> struct sp_err */
	struct hmap fphists;   /* {fp_id, kind} -> struct sp_fphist: the db-time
			      * histogram of every text of a fingerprint, so
			      * that 100,000 texts of one INSERT share one */
	struct hmap errcodes;  /* {sql_id, rc, pid} -> uint64_t: failures by code
			       * from the statistics (exact), to find those
			       * whose ERROR record was lost */
	struct hmap modules;   /* {pid, generation, lo} -> struct sp_module */
	struct hmap plans;     /* {sql_id, plan hash} -> struct sp_plan; a plan
			      * stands for every text of its fingerprint */
	uint32_t plans_bound;  /* processes whose table of plans was full */
	char *plans_bound_why; /* the first one's words (SP_PLAN_BOUND) */
	struct hmap schemas;   /* schema_id -> struct sp_schema */
	/* the duplicate rule: bound values of randomly drawn executions */
	struct hmap dupvals;     /* {sql_id, pid, params hash} -> executions */
	struct hmap dups;        /* sql_id -> struct sp_dup */
	struct hmap pycodes;     /* {pid, code number} -> struct sp_pycode */
	struct hmap callers;     /* {sql_id, kind, pid, caller pc} -> struct sp_caller:
			      * exact executions per calling return address */
	uint32_t py_unsupported; /* processes whose CPython had no layout */
	uint32_t py_unreadable;  /* processes whose memory could not be read */
	char py_version[64];     /* the first unsupported version, for the warning */
	char *sym_notes;         /* the symbolizer's notes, a line each (write_frames) */
	uint64_t text_clock;     /* texts' recency (sp_sql.last) */
	uint64_t texts_folded;   /* texts sp_coll_fold_texts folded */
	struct sp_event *events;
	size_t nevents, events_cap, events_max;
	uint64_t events_dropped;
	/* With a spill file, sampled executions go to it (fixed-size records)
	 * instead of memory, so the collector's memory does not grow with
	 * them; events_max then bounds the file. They are written in batches
	 * of SP_SPILL_BATCH with write(2) on its descriptor, never through
	 * its stdio buffer: when the file system is full, the events that did
	 * not fit are known, dropped and counted (events_dropped, and
	 * spill_failed with the errno in spill_errno), and nspilled is always
	 * the number of whole events in the file or the batch. */
	FILE *spill;
	uint64_t nspilled;
	struct sp_event *spill_batch; /* NULL until the first event */
	size_t spill_nbatch;          /* events in spill_batch, the last of nspilled */
	uint64_t spill_failed;
	int spill_errno;
	/* While the agent's snapshot child reads the spill file (the two
	 * share it), neither changes the events in it (spill_shared set in
	 * both): what folds would change there is kept pending instead - the
	 * texts folded (spill_remap: sql_id -> fold id) and the processes
	 * whose events lose their stack (spill_unstack: pid as uint64_t).
	 * The writer applies them to the spilled events it reads; the agent
	 * writes them into the file once the child is done
	 * (sp_coll_events_settle). NULL: none. */
	int spill_shared;
	struct hmap *spill_remap, *spill_unstack;
	uint64_t records, messages, bad_messages;
	/* Messages whose descriptor could not be received (MSG_CTRUNC: the
	 * collector was out of descriptors): applied without it. Of them,
	 * images whose statistics (their totals) were lost that way, or
	 * could not be mapped (sp_coll_stats_add); rings lost. Said in the
	 * profile's meta (descriptors_lost, statistics_lost) and the
	 * report's header: executions missing are never silent. */
	uint64_t fds_lost, stats_lost, rings_lost;
	/* times connections were left waiting for descriptors (serve.c): a
	 * process that waits may lose what it cannot send meanwhile */
	uint64_t fd_waits;
	int fd_missing;     /* the message being applied lost its descriptor */
	double ns_per_tick; /* collector's TSC calibration */
	char last_error[256];
	/* Rings being read, in no order. A ring leaves this list (unmapped)
	 * when its thread is dead and it is read, when its process image
	 * says BYE (or a new image says HELLO), when it is broken, or at
	 * sp_coll_rings_close. */
	struct sp_ring **rings;
	size_t nrings, rings_cap;
	uint8_t *ring_buf; /* one synthesized message, header + SP_MSG_MAX */
	uint64_t rings_opened, rings_broken;
	/* Shared statistics not merged yet, in no order. */
	struct sp_statmap *stats;
	size_t nstats, stats_cap;
	int stats_drop;    /* sp_coll_stats_merge lets go of the pages it merged
			 * (a retired image's memfd mapping, not a copy) */
	int stats_keep;    /* set by the caller: the pages stay mapped, not let
			 * go of as merged (the agent's snapshot child, which
			 * faults them in at once and exits after) */
	size_t copy_bytes; /* taken by STATS_COPY maps so far, at most 1 GiB */
	/* Broken rings are reported here, one line each; NULL: nowhere. */
	FILE *diag;
	/* First pages of the merged statistics mappings of images that
	 * forked, kept to the end: their unreported counts (descendants that
	 * could neither connect nor leave a file) may still grow after the
	 * merge. */
	void **hdr_pages;
	size_t nhdr, hdr_cap;
	uint64_t unreported_counted; /* their sum, at sp_coll_finish */
	/* Called when an image's shared statistics are mapped (pid, the
	 * memfd's inode), before anything of them is merged; NULL: nothing.
	 * The agent takes an earlier agent's part of a reconnected image off
	 * its totals here. */
	void (*stats_added)(struct sp_coll *c, uint32_t pid, uint64_t ino);
	void *stats_added_arg;
	/* Texts the agent folded in its own collector while processes that
	 * ran them still live (sql_id -> fold id, an hmap of uint64_t to
	 * uint64_t; NULL: none, as in record): their statistics' records and
	 * sampled executions go to the fold (sp_coll_text_fold), unless the
	 * text came again. Owned by the caller. When text_folds_hit is not
	 * NULL (an hmap of uint64_t -> int), each folded sql_id met is put
	 * there: the agent lets go of the ones no process holds. */
	struct hmap *text_folds, *text_folds_hit;
};

/* Processes that could not reach the collector: those that left their
 * data in a file (of which *complete said goodbye there too: their
 * totals are in the profile; the others were killed first) plus those
 * only counted by an ancestor (their executions are missing). */
uint64_t sp_coll_unreported(const struct sp_coll *c, uint64_t *complete);

struct sp_sql {
	char *text;
	uint32_t full_len;
	int truncated;
	uint64_t fp_id;  /* fingerprint id, for runs of one query with literals */
	uint64_t last;   /* c->text_clock when it came or last had a sampled
			 * execution: its recency, for sp_coll_fold_texts */
	uint64_t folded; /* a fold record (sp_coll_fold_texts): texts in it */
};

uint64_t sp_coll_lost(const struct sp_coll *c);
/* Executions that processes said they ran (their BYE) beyond those their
 * merged statistics hold, over the processes whose statistics are
 * merged (none mapped still): totals that never reached us (a descriptor
 * or a message lost). Said in meta executions_missing and the report. */
uint64_t sp_coll_missing(const struct sp_coll *c);
/* Send sampled executions to f (owned by the caller, opened w+, empty)
 * from now on, keeping at most max of them. */
void sp_coll_spill(struct sp_coll *c, FILE *f, size_t max);
/* Write the batch of sampled executions still in memory to the spill file;
 * those that do not fit are dropped and counted. Afterwards the file holds
 * exactly nspilled events, from offset 0. Returns 0, or -1 (errno) when
 * some were dropped (ever). */
int sp_coll_spill_flush(struct sp_coll *c);
/* Read up to n spilled events from index i into out; returns the number
 * read (0 at the end), or -1 (errno). Call sp_coll_spill_flush first. */
ssize_t sp_coll_spill_read(const struct sp_coll *c, uint64_t i, struct sp_event *out, size_t n);
/* Change every sampled execution kept, in memory, in the spill batch and
 * in the spill file (unless spill_shared: then those in memory only):
 * fn changes *e and returns 1 when it did. Returns 0, or -1 (errno) when
 * the file could not be read or written again. */
int sp_coll_events_rewrite(struct sp_coll *c, int (*fn)(struct sp_event *e, void *arg), void *arg);
/* The texts of fold (sql_id -> fold id, as sp_coll_fold_texts makes it)
 * folded in the sampled executions kept; with spill_shared, pending for
 * the spilled ones. Returns 0, or -1 (errno). */
int sp_coll_events_fold(struct sp_coll *c, const struct hmap *fold);
/* The sampled executions of the processes in pids (uint64_t keys) lose
 * their stack, as sp_coll_events_fold. */
int sp_coll_events_unstack(struct sp_coll *c, const struct hmap *pids);
/* What is pending applied to e (a spilled event read back): 1 if it
 * changed. */
int sp_coll_event_pending(const struct sp_coll *c, struct sp_event *e);
/* With spill_shared clear: what is pending written into the spill file
 * and forgotten. Returns 0, or -1 (errno; then it is forgotten all the
 * same: those events keep their ids). */
int sp_coll_events_settle(struct sp_coll *c);
/* What is pending forgotten (a collector's end). */
void sp_coll_events_forget(struct sp_coll *c);
/* Executions so far: merged, plus those in statistics still mapped
 * (read live: may be behind by the executions being added). */
uint64_t sp_coll_executions(const struct sp_coll *c);
/* Executions that processes said they ran (their BYE's count) and that
 * their merged statistics do not hold: lost on the way (statistics never
 * read, copies not all received). After sp_coll_finish. *nproc (may be
 * NULL): how many processes they are. */
uint64_t sp_coll_missing_bye(const struct sp_coll *c, uint64_t *nproc);
/* Processes whose connection ended without BYE (killed by a signal, or
 * crashed), one line each: "PID<TAB>EXE<TAB>N<TAB>SQL" with the number of
 * executions it was running and the text of the first (up to 200 bytes,
 * on one line), "" when none. malloc'd, NULL when no process died. */
char *sp_coll_deaths(const struct sp_coll *c);

/* For the collector (record/collect.c): queue ev for the spill file
 * (nspilled is counted by the caller); a full batch is written first.
 * Returns 0, or -1 when ev cannot be kept. */
int sp_coll_spill_add(struct sp_coll *c, const struct sp_event *ev);

#endif
