/* SPDX-License-Identifier: MIT */
/*
 * sp_preload.h - internal interface of libsqlprof.so, shared by the shims
 * (shims.c), the execution tracker (core.c) and the transport (stream.c).
 * Nothing here is exported from the shared object.
 */
#ifndef SP_PRELOAD_H
#define SP_PRELOAD_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <sqlite3.h>

#include "sp_wire.h"

#define SP_EXPORT __attribute__((visibility("default")))
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

/* Originals, resolved lazily (libsqlite3 may be dlopen'd after we start). */
struct sp_real {
	int (*open)(const char *, sqlite3 **);
	int (*open_v2)(const char *, sqlite3 **, int, const char *);
	int (*open16)(const void *, sqlite3 **);
	int (*close)(sqlite3 *);
	int (*close_v2)(sqlite3 *);
	int (*prepare)(sqlite3 *, const char *, int, sqlite3_stmt **, const char **);
	int (*prepare_v2)(sqlite3 *, const char *, int, sqlite3_stmt **, const char **);
	int (*prepare_v3)(sqlite3 *, const char *, int, unsigned int, sqlite3_stmt **, const char **);
	int (*prepare16)(sqlite3 *, const void *, int, sqlite3_stmt **, const void **);
	int (*prepare16_v2)(sqlite3 *, const void *, int, sqlite3_stmt **, const void **);
	int (*prepare16_v3)(sqlite3 *, const void *, int, unsigned int, sqlite3_stmt **, const void **);
	int (*step)(sqlite3_stmt *);
	int (*reset)(sqlite3_stmt *);
	int (*finalize)(sqlite3_stmt *);
	int (*exec)(sqlite3 *, const char *, int (*)(void *, int, char **, char **), void *, char **);
	/* Used by the profiler itself, never interposed. */
	const char *(*sql)(sqlite3_stmt *);
	int (*stmt_status)(sqlite3_stmt *, int, int);
	sqlite3 *(*db_handle)(sqlite3_stmt *);
	const char *(*errmsg)(sqlite3 *);
	int (*extended_errcode)(sqlite3 *);
	void *(*dlopen)(const char *, int);
	int (*stmt_isexplain)(sqlite3_stmt *);
	const unsigned char *(*column_text)(sqlite3_stmt *, int);
	int (*column_int)(sqlite3_stmt *, int);
	/* callback registrations, interposed only to note them (plan.c) */
	int (*trace_v2)(sqlite3 *, unsigned, int (*)(unsigned, void *, void *, void *), void *);
	void *(*trace)(sqlite3 *, void (*)(void *, const char *), void *);
	void *(*profile)(sqlite3 *, void (*)(void *, const char *, sqlite3_uint64), void *);
	int (*set_authorizer)(sqlite3 *, int (*)(void *, int, const char *, const char *,
						  const char *, const char *), void *);
	void (*progress_handler)(sqlite3 *, int, int (*)(void *), void *);
};
extern struct sp_real sp_real;
extern atomic_int sp_resolved; /* 1 once libsqlite3's functions are resolved */
/* 1 when profiling is on and the originals are known: the one flag the hot
 * path tests. */
extern int sp_hot;
int sp_resolve(void);            /* 0 when the sqlite3 originals are known */

/* Configuration, read once in the constructor (core.c). */
struct sp_config {
	int enabled;            /* 0: pass everything through untouched */
	double rate;            /* SQLPROF_RATE */
	int rate_one;           /* rate == 1: every gap is 1 */
	double log_q;           /* log(1 - rate), for the gaps between draws */
	uint64_t seed;
	uint64_t slow_ticks;    /* SQLPROF_SLOW_MS in clock units, 0 = off */
	uint64_t slow_span;     /* slow_ticks, or 2^63 when off: run.slow_at */
	int depth;              /* stack depth limit */
	int send_timeout_ms;
	int follow;
	int plans;               /* SQLPROF_PLANS: capture query plans */
};

extern struct sp_config sp_cfg;

/* Clock: TSC when the kernel itself uses it as clocksource, else
 * CLOCK_MONOTONIC. Units are opaque to the preload; HELLO says which. */
extern int sp_clock_tsc;
uint64_t sp_mono_ns(void);
double sp_tsc_per_ns(void); /* calibrated once in the constructor */
static inline uint64_t sp_rdtsc(void)
{
	uint32_t lo, hi;

	__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
	return ((uint64_t)hi << 32) | lo;
}

static inline uint64_t sp_now(void)
{
	if (likely(sp_clock_tsc))
		return sp_rdtsc();
	return sp_mono_ns();
}

/* State of one execution in progress (a statement's, or an exec call's). */
struct sp_run {
	uint64_t seq;         /* 0: no execution in progress */
	uint64_t start;
	uint64_t slow_at;     /* clock value from which it is slow; UINT64_MAX
			       * once noted (or for an exec call) */
	/* zeroed together when an execution starts */
	uint64_t db_time, rows, nested_time, stack_id;
	struct sp_run *parent;
	uint64_t parent_seq;
	uint32_t base[4] __attribute__((aligned(16))); /* counters at start:
			       * fullscan, sort, autoindex, vm (SQLite's order) */
	uint16_t flags;       /* SP_EXEC_* */
};

/* One tracked prepared statement (slot of the lock-free table in core.c). */
struct sp_stmt {
	_Atomic uintptr_t key; /* sqlite3_stmt*, 0 empty, 1 tombstone */
	uint64_t sql_id;
	uint64_t db;
	uint32_t nexec;        /* executions started (first-exec sampling) */
	uint32_t sql_gen;      /* sp_sql_gen when its SQL text was noted */
	/* sp_sql_gen when an execution last went through sp_run_begin_slow:
	 * the inline start is allowed while it is current (0 = never, so the
	 * first execution of a statement always takes the slow start) */
	uint32_t fast_gen;
	struct sp_run run;
};

/* Per-thread ring of encoded records, in memory shared with the collector
 * (struct sp_ring_shared in a memfd, see sp_wire.h): the owner thread
 * writes records and publishes its head; the collector reads them and
 * publishes its tail. This private part holds what only the owner uses,
 * so nothing the collector writes can steer the owner's writes. Defined
 * here so the reserve fast path inlines into the shims. */
#define SP_RING_SIZE (128u * 1024u)
#define SP_RING_MASK (SP_RING_SIZE - 1u)
struct sp_ring {
	uint32_t head;         /* end of the committed records (also in sh), or
				* where the next record goes after a PAD the
				* slow path wrote (published with that record) */
	uint32_t wlimit;       /* head value up to which writing needs no check,
				* as of the last slow reservation */
	uint32_t poked;        /* tail value at which we last woke the collector */
	uint8_t *data;         /* sh->data */
	struct sp_ring_shared *sh;
	uint64_t execs;        /* executions ended by the owner */
	int orphan;            /* the collector never got the ring: writes are lost */
	int dontfork;          /* sh is not inherited by a forked child */
	struct sp_ring *next;  /* registry, under the registry lock */
	struct sp_ring *next_idle; /* idle list (thread gone), same lock */
};

/* Per-thread state, in initial-exec TLS: no allocation on access. */
struct sp_thread {
	/* The one word the hot path tests: SP_TS_FAST when the inline path
	 * may run (profiling on, thread set up, TSC clock, not inside the
	 * profiler). SP_TS_SETUP: set up (sp_thread_ready). Entering the
	 * profiler adds SP_TS_GUARD (sp_guard_in). */
	uint32_t state;
	uint32_t tid;          /* 0 until sp_thread_init (also after fork) */
	uint32_t pid;          /* set with tid */
	struct sp_ring *ring;  /* NULL until the thread's first record */
	struct sp_run *cur;    /* execution whose call (step, exec) we are in */
	uint64_t seq;          /* last execution number */
	uint64_t skip;         /* executions until the next random draw hits */
	/* the first 16 bytes of this thread's EXEC_LITE records: header,
	 * pid, tid (set with tid by sp_thread_init) */
	uint64_t lite_head[2] __attribute__((aligned(16)));
	uint64_t rng;
	uint64_t last_stack;   /* id of the last stack this thread sent or saw sent */
	struct sp_stmt *last_stmt; /* the statement this thread looked up last;
				    * valid while its slot's key is still that
				    * statement (sp_stmt_lookup) */
};
extern __thread struct sp_thread sp_tls;

#define SP_TS_SETUP 1u
#define SP_TS_TSC 2u
#define SP_TS_FAST (SP_TS_SETUP | SP_TS_TSC)
#define SP_TS_GUARD 4u
static inline void sp_guard_in(struct sp_thread *t)
{
	t->state += SP_TS_GUARD;
}

static inline void sp_guard_out(struct sp_thread *t)
{
	t->state -= SP_TS_GUARD;
}

static inline int sp_guarded(const struct sp_thread *t)
{
	return t->state >= SP_TS_GUARD;
}

/* Make the thread ready for the inline path (ids, fork child restart,
 * sampling state). Only when profiling is on and not guarded. */
void sp_thread_ready(struct sp_thread *t);

/* core.c: the table of live statements (lock-free, open addressing). */
#define STMT_BITS 16
#define STMT_N (1u << STMT_BITS)
#define STMT_MAX_PROBE 64
extern struct sp_stmt *sp_stmts;

static inline uint64_t sp_stmt_hash(const void *p)
{
	return ((uint64_t)(uintptr_t)p * 0x9E3779B97F4A7C15ULL) >> (64 - STMT_BITS);
}

/* The tracked state of a statement, or NULL. Inlined: it is on the path of
 * every step. The _hot variant is for a thread set up (SP_TS_SETUP),
 * which implies the table exists. */
static inline struct sp_stmt *sp_stmt_find_hot(sqlite3_stmt *st)
{
	uint64_t i = sp_stmt_hash(st);
	uintptr_t key = (uintptr_t)st;
	int n;

	for (n = 0; n < STMT_MAX_PROBE; n++, i = (i + 1) & (STMT_N - 1)) {
		uintptr_t k = atomic_load_explicit(&sp_stmts[i].key, memory_order_acquire);

		if (likely(k == key))
			return &sp_stmts[i];
		if (k == 0)
			return NULL;
	}
	return NULL;
}

/* sp_stmt_find_hot, trying first the statement this thread looked up
 * last: programs run one statement in a loop (step, step, reset). The slot
 * is checked by its key, so a slot freed or reused since is never taken
 * for another statement's. */
static inline struct sp_stmt *sp_stmt_lookup(struct sp_thread *t, sqlite3_stmt *st)
{
	struct sp_stmt *s = t->last_stmt;

	if (likely(s != NULL &&
		   atomic_load_explicit(&s->key, memory_order_acquire) == (uintptr_t)st))
		return s;
	s = sp_stmt_find_hot(st);
	if (s)
		t->last_stmt = s;
	return s;
}

static inline struct sp_stmt *sp_stmt_find(sqlite3_stmt *st)
{
	if (unlikely(!sp_stmts))
		return NULL;
	return sp_stmt_find_hot(st);
}

struct sp_stmt *sp_stmt_adopt(struct sp_thread *t, sqlite3_stmt *st);
void sp_stmt_forget(sqlite3_stmt *st);
/* drawn: the random draw already made by the caller (1 = hit), -1 if none.
 * Returns the clock value at which the execution starts. */
uint64_t sp_run_begin_slow(struct sp_thread *t, struct sp_stmt *s, sqlite3_stmt *st, int drawn);
void sp_run_end_slow(struct sp_thread *t, struct sp_stmt *s, sqlite3_stmt *st, int rc, uint64_t end);
extern _Atomic int sp_status_off; /* offset of SQLite's aCounter[], -1: use the API */
/* Bumped after an SQL record was lost (its ring full): statements noted
 * before note their text again (sent if it was forgotten) at their next
 * start. Never 0. */
extern _Atomic uint32_t sp_sql_gen;
/* An SQL record was lost: bump sp_sql_gen when records can be written
 * again (not at once, or a ring-less thread would retry every time). */
extern atomic_int sp_sql_lost;
extern int sp_stream_restart; /* forked child: connect at the next execution */
void sp_stmt_prepared_text(struct sp_thread *t, sqlite3_stmt *st, const char *sql, size_t len,
			   uint64_t t0, uint64_t t1);
uint64_t sp_stream_executions(void);
void sp_run_on_row(struct sp_thread *t, struct sp_stmt *s, sqlite3_stmt *st, uint64_t now);
uint64_t sp_sql_note(struct sp_thread *t, const char *sql, size_t len);
void sp_exec_begin(struct sp_thread *t, struct sp_run *r, uint64_t sql_id);
void sp_exec_end(struct sp_thread *t, struct sp_run *r, uint64_t sql_id, sqlite3 *db, int rc, uint64_t end);
void sp_thread_init(struct sp_thread *t);
extern atomic_ullong sp_untracked;
/* Executions until the next random draw hits (>= 1): geometric gaps give
 * the same choices as one draw per execution, for a decrement each. */
uint64_t sp_draw_gap(struct sp_thread *t);

/* stream.c */
void *sp_rec_reserve_slow(struct sp_thread *t, uint32_t len); /* NULL: lost */

/* Reserve len bytes (multiple of 8) in the thread's ring; NULL when the
 * record is lost (counted). The common case is a compare against the
 * producer's own limit (wlimit: where the free linear space ends, as of
 * the last slow reservation). */
static inline void *sp_rec_reserve(struct sp_thread *t, uint32_t len)
{
	struct sp_ring *r = t->ring;

	if (likely(r != NULL)) {
		uint32_t hd = r->head;

		if (likely(r->wlimit - hd >= len)) /* wlimit never falls behind head */
			return r->data + (hd & SP_RING_MASK);
	}
	return sp_rec_reserve_slow(t, len);
}

static inline void sp_rec_commit(struct sp_thread *t, uint32_t len)
{
	struct sp_ring *r = t->ring;

	r->head += len;
	__atomic_store_n(&r->sh->head, r->head, __ATOMIC_RELEASE);
}
int sp_stream_init(void);       /* constructor: connect, hello */
void sp_stream_fork_child(void);
void sp_stream_exit(void);      /* destructor: BYE */
/* Before _exit or exec: say BYE, unless this is a vfork child
 * sharing its parent's memory (then the parent's state is not ours). */
void sp_stream_leaving(void);
extern uint32_t sp_proc_pid;
/* Set in a forked child: connect at the next execution (not in the fork
 * handler, where that is not allowed). */
extern int sp_stream_restart;
void sp_stream_child_start(void);
void sp_modules_changed(void);  /* resend the map if libraries came or went */
void sp_modules_maybe_send(void);
extern atomic_ullong sp_lost;
extern atomic_int sp_stream_dead;

/* Statement counters: fullscan, sort, autoindex, vm steps, as one 16-byte
 * vector. See core.c (probe_status_layout) for why they are read from
 * memory: SQLite keeps them as u32 aCounter[], these four at [1..4]. */
typedef uint32_t sp_v4u __attribute__((vector_size(16)));

static inline sp_v4u sp_status_read(sqlite3_stmt *st)
{
	int off = atomic_load_explicit(&sp_status_off, memory_order_relaxed);
	sp_v4u v;

	if (likely(off >= 0)) {
		__builtin_memcpy(&v, (const char *)st + off + 4 * SQLITE_STMTSTATUS_FULLSCAN_STEP,
				 sizeof(v));
		return v;
	}
	v[0] = (uint32_t)sp_real.stmt_status(st, SQLITE_STMTSTATUS_FULLSCAN_STEP, 0);
	v[1] = (uint32_t)sp_real.stmt_status(st, SQLITE_STMTSTATUS_SORT, 0);
	v[2] = (uint32_t)sp_real.stmt_status(st, SQLITE_STMTSTATUS_AUTOINDEX, 0);
	v[3] = (uint32_t)sp_real.stmt_status(st, SQLITE_STMTSTATUS_VM_STEP, 0);
	return v;
}

static inline void sp_status_base(struct sp_run *r, sqlite3_stmt *st)
{
	sp_v4u v = sp_status_read(st);

	__builtin_memcpy(r->base, &v, sizeof(v));
}

/* Counters since the execution started: fullscan, sort, autoindex, vm. */
static inline sp_v4u sp_status_delta(const struct sp_run *r, sqlite3_stmt *st)
{
	sp_v4u b, now = sp_status_read(st);

	__builtin_memcpy(&b, r->base, sizeof(b));
	return now - b;
}

static inline uint64_t sp_rng_next(struct sp_thread *t)
{
	/* xorshift64*, per thread */
	uint64_t x = t->rng;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	t->rng = x;
	return x * 0x2545F4914F6CDD1DULL;
}

/* The random draw of one execution: 1 with probability SQLPROF_RATE
 * (a countdown of the gap to the next pick; at rate 1 every gap is 1). */
static inline __attribute__((always_inline)) int sp_draw(struct sp_thread *t)
{
	if (likely(--t->skip != 0))
		return 0;
	t->skip = sp_cfg.rate_one ? 1 : sp_draw_gap(t);
	return 1;
}

/* Stacks (core.c). Text range of libsqlprof itself: leading frames inside
 * it are dropped. */
extern uintptr_t sp_self_lo, sp_self_hi;
/* A stack not known to be sent by this thread lately: note it in the set
 * and write its STACK record the first time in the process. Keeps errno. */
uint64_t sp_stack_note(struct sp_thread *t, const uintptr_t *pcs, int depth, uint64_t h);
int sp_unwind(uintptr_t *pcs, int max);
extern int sp_use_cfi_unwinder;
int sp_backtrace_keep_errno(uintptr_t *pcs, int max);

/* The stack of the calling thread above libsqlprof, as a stack id (0:
 * none). Inlined where a walk starts, so that it has fewer frames of ours
 * to climb. Keeps errno. */
static inline __attribute__((always_inline)) uint64_t sp_stack_capture_inline(struct sp_thread *t)
{
	uintptr_t pcs[SP_STACK_MAX + 8], lo, span;
	int n = -1, skip = 1, depth, i, max;
	uint64_t h = 0xcbf29ce484222325ULL;

	if (likely(sp_use_cfi_unwinder))
		n = sp_unwind(pcs, sp_cfg.depth + 8);
	if (unlikely(n < 0)) /* not ours to unwind (signal frame, no CFI): libgcc's */
		n = sp_backtrace_keep_errno(pcs, sp_cfg.depth + 8);
	/* read after the walk, so that nothing waits in memory across it */
	lo = sp_self_lo;
	span = sp_self_hi - sp_self_lo;
	max = sp_cfg.depth;
	/* pcs[0] is always ours: the function this is inlined into */
	while (skip < n && pcs[skip] - lo < span)
		skip++;
	depth = n - skip;
	if (depth > max)
		depth = max;
	if (depth <= 0)
		return 0;
	for (i = 0; i < depth; i++)
		h = (h ^ (uint64_t)pcs[skip + i]) * 0x100000001b3ULL;
	h ^= (uint64_t)depth;
	h |= 1; /* 0 means no stack */
	/* the same stack as this thread's last one: sent already */
	if (likely(h == t->last_stack))
		return h;
	return sp_stack_note(t, pcs + skip, depth, h);
}

/* A full EXEC record of an execution that ended at end (the thread is set
 * up: t->pid, t->tid). */
static inline __attribute__((always_inline)) void sp_emit_exec(struct sp_thread *t,
							       const struct sp_run *r,
							       uint64_t sql_id, uint64_t db,
							       int rc, uint64_t end,
							       sp_v4u delta, int kind)
{
	struct sp_rec_exec *x = sp_rec_reserve(t, sizeof(*x));

	if (t->ring)
		t->ring->execs++;
	if (!x)
		return;
	{
		/* header in one store, pid and tid in another (lite_head[1]) */
		uint64_t hw = SP_REC_EXEC | (uint64_t)r->flags << 16 | (uint64_t)sizeof(*x) << 32;

		__builtin_memcpy(&x->h, &hw, sizeof(hw));
		__builtin_memcpy(&x->pid, &t->lite_head[1], sizeof(uint64_t));
	}
	x->sql_id = sql_id;
	x->seq = r->seq;
	x->parent_seq = r->parent_seq;
	x->db = db;
	x->start = r->start;
	x->wall = end - r->start;
	x->db_time = r->db_time;
	x->nested_time = r->nested_time;
	x->rows = r->rows;
	x->stack_id = r->stack_id;
	x->fullscan_steps = delta[0];
	x->sorts = delta[1];
	x->autoindex = delta[2];
	x->vm_steps = delta[3];
	x->rc = rc;
	x->kind = (uint16_t)kind;
	x->pad = 0;
	sp_rec_commit(t, sizeof(*x));
}

/* First step of an execution: returns its start time (now, unless the
 * slow start took time of its own). The common case (not nested, the
 * statement started inline before, not drawn for a stack) is inline. */
static inline __attribute__((always_inline)) uint64_t sp_run_begin(struct sp_thread *t, struct sp_stmt *s, sqlite3_stmt *st,
				    uint64_t now, const int tsc)
{
	struct sp_run *r = &s->run;

	if (unlikely(t->cur != NULL ||
		     s->fast_gen != atomic_load_explicit(&sp_sql_gen, memory_order_relaxed)))
		return sp_run_begin_slow(t, s, st, -1);
	r->seq = ++t->seq;
	r->db_time = r->rows = r->nested_time = r->stack_id = 0;
	r->parent = NULL;
	r->parent_seq = 0;
	r->flags = 0;
	sp_status_base(r, st);
	if (unlikely(sp_draw(t))) {
		/* drawn: the stack is taken here, inline, so that the walk
		 * climbs one frame of ours (the step shim) */
		r->flags = SP_EXEC_RANDOM;
		r->stack_id = sp_stack_capture_inline(t);
		if (r->stack_id)
			r->flags |= SP_EXEC_SAMPLED;
		/* the walk's time is not the execution's */
		now = tsc ? sp_rdtsc() : sp_mono_ns();
	}
	r->start = now;
	r->slow_at = now + sp_cfg.slow_span;
	return now;
}

/* A plain execution ended: its 64-byte EXEC_LITE record. */
static inline __attribute__((always_inline)) void sp_run_lite(struct sp_thread *t, struct sp_stmt *s, sqlite3_stmt *st,
			       uint64_t end, uint16_t flags)
{
	struct sp_run *r = &s->run;
	struct sp_rec_exec_lite *x;
	sp_v4u d;

	r->seq = 0;
	x = (struct sp_rec_exec_lite *)sp_rec_reserve(t, sizeof(*x));
	if (unlikely(!x))
		return;
	d = sp_status_delta(r, st);
	t->ring->execs++;
	__builtin_memcpy(x, t->lite_head, 16);
	if (flags)
		x->h.flags = flags;
	x->sql_id = s->sql_id;
	x->wall = end - r->start;
	x->db_time = r->db_time;
	__builtin_memcpy(&x->fullscan_steps, &d, sizeof(d));
	x->rows = (uint32_t)r->rows;
	x->pad = 0;
	sp_rec_commit(t, sizeof(*x));
}

/* End of an execution at a step that returned rc (SQLITE_DONE or an
 * error). A plain one leaves an EXEC_LITE record, inline; anything else
 * goes to sp_run_end_slow. */
static inline __attribute__((always_inline)) void sp_run_end(struct sp_thread *t, struct sp_stmt *s, sqlite3_stmt *st, int rc,
			      uint64_t end)
{
	struct sp_run *r = &s->run;

	if (unlikely(r->flags != 0 || rc != SQLITE_DONE || (r->rows >> 32) != 0 ||
		     end >= r->slow_at)) {
		/* a randomly sampled execution that ended plainly: its full
		 * record, inline too */
		if ((r->flags & ~(SP_EXEC_RANDOM | SP_EXEC_SAMPLED)) == 0 && rc == SQLITE_DONE &&
		    end < r->slow_at) {
			sp_emit_exec(t, r, s->sql_id, s->db, SQLITE_OK, end, sp_status_delta(r, st),
				     SP_KIND_STMT);
			r->seq = 0; /* not nested: no parent to credit */
			return;
		}
		sp_run_end_slow(t, s, st, rc, end);
		return;
	}
	sp_run_lite(t, s, st, end, 0);
}

/* End of an execution at reset or finalize, before SQLITE_DONE. */
static inline __attribute__((always_inline)) void sp_run_abandon(struct sp_thread *t, struct sp_stmt *s, sqlite3_stmt *st,
				  uint64_t end)
{
	struct sp_run *r = &s->run;

	if (unlikely(r->flags != 0 || (r->rows >> 32) != 0 || end >= r->slow_at)) {
		r->flags |= SP_EXEC_ABANDONED;
		sp_run_end_slow(t, s, st, SQLITE_ROW, end);
		return;
	}
	sp_run_lite(t, s, st, end, SP_EXEC_ABANDONED);
}

/* plan.c */
void sp_plan_capture(struct sp_thread *t, sqlite3_stmt *st, uint64_t sql_id, uint64_t db);
/* core.c: per-connection notes for plan.c */
void sp_db_note_callbacks(sqlite3 *db);
int sp_db_has_callbacks(uint64_t db);
int sp_plan_once(uint64_t db, uint64_t sql_id); /* 1 the first time */

void sp_stack_sets_reset(void); /* fork child: stacks are resent per pid */

/* unwind.c: cached CFI unwinder; -1 means "use backtrace()". */
int sp_unwind_init(void);

/* ---- shims_plan.c: keeping plan capture invisible (used by plan.c) ---- */
/* Originals only plan capture and its shims need, resolved lazily by
 * sp_plan_resolve (0 when limit and the mutex functions are known). */
struct sp_plan_real {
	int (*config)(int, ...);
	int (*create_module)(sqlite3 *, const char *, const sqlite3_module *, void *);
	int (*create_module_v2)(sqlite3 *, const char *, const sqlite3_module *, void *,
				void (*)(void *));
	int (*load_extension)(sqlite3 *, const char *, const char *, char **);
	int (*enable_load_extension)(sqlite3 *, int);
	int (*auto_extension)(void (*)(void));
	int (*limit)(sqlite3 *, int, int);
	sqlite3_mutex *(*db_mutex)(sqlite3 *);
	void (*mutex_enter)(sqlite3_mutex *);
	void (*mutex_leave)(sqlite3_mutex *);
};
extern struct sp_plan_real sp_plan_real;
int sp_plan_resolve(void);
/* > 0 while this thread is inside plan capture: what SQLite logs then is
 * not passed to the program's SQLITE_CONFIG_LOG callback. */
extern __thread int sp_plan_quiet;
/* 1 when no plan may be captured anywhere: extension code was loaded (its
 * modules are registered unseen), or the program's log callback is
 * installed without our filter. */
int sp_plan_blocked(void);
/* ---- end of shims_plan.c ---- */

#endif /* SP_PRELOAD_H */
