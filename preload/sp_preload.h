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
	uint64_t rate_threshold; /* sample if rng < threshold; see sp_sample */
	int rate_all;           /* rate == 1 */
	uint64_t seed;
	uint64_t slow_ticks;    /* SQLPROF_SLOW_MS in clock units, 0 = off */
	int depth;              /* stack depth limit */
	int send_timeout_ms;
	int flush_ms;
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
	uint64_t parent_seq;
	struct sp_run *parent;
	uint64_t start, db_time, nested_time, rows, stack_id;
	uint32_t base[4];     /* stmt_status at start: fullscan, sort, autoindex, vm */
	uint16_t flags;       /* SP_EXEC_* */
};

/* One tracked prepared statement (slot of the lock-free table in core.c). */
struct sp_stmt {
	_Atomic uintptr_t key; /* sqlite3_stmt*, 0 empty, 1 tombstone */
	uint64_t sql_id;
	uint64_t db;
	uint32_t nexec;        /* executions started (first-exec sampling) */
	uint32_t sql_gen;      /* sp_sql_gen when its SQL text was noted */
	struct sp_run run;
};

/* Per-thread ring of encoded records. The producer (owner thread) writes
 * at head and publishes with a release store; consumers (stream.c) send
 * [tail, head) under send_lock. Defined here so the reserve fast path
 * inlines into the shims. */
#define SP_RING_SIZE (128u * 1024u)
#define SP_RING_MASK (SP_RING_SIZE - 1u)
struct sp_ring {
	_Atomic uint32_t head;
	_Atomic uint32_t tail;
	uint32_t wpos;         /* producer: offset of the reserved record */
	atomic_int dead;       /* owner thread has exited */
	uint64_t execs;        /* executions ended by the owner */
	pthread_mutex_t send_lock;
	struct sp_ring *next;  /* registry, under the registry lock */
	uint8_t data[SP_RING_SIZE] __attribute__((aligned(8)));
};

/* Per-thread state, in initial-exec TLS: no allocation on access. */
struct sp_thread {
	struct sp_ring *ring;  /* NULL until the thread's first record */
	uint32_t tid;          /* 0 until sp_thread_init (also after fork) */
	uint32_t pid;          /* set with tid */
	int guard;             /* >0 while the profiler works: pass through */
	uint64_t seq;          /* last execution number */
	uint64_t rng;
	struct sp_run *cur;    /* execution whose call (step, exec) we are in */
};
extern __thread struct sp_thread sp_tls;

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
 * every step. */
static inline struct sp_stmt *sp_stmt_find(sqlite3_stmt *st)
{
	uint64_t i = sp_stmt_hash(st);
	uintptr_t key = (uintptr_t)st;
	int n;

	if (unlikely(!sp_stmts))
		return NULL;
	for (n = 0; n < STMT_MAX_PROBE; n++, i = (i + 1) & (STMT_N - 1)) {
		uintptr_t k = atomic_load_explicit(&sp_stmts[i].key, memory_order_acquire);

		if (likely(k == key))
			return &sp_stmts[i];
		if (k == 0)
			return NULL;
	}
	return NULL;
}

struct sp_stmt *sp_stmt_adopt(struct sp_thread *t, sqlite3_stmt *st);
void sp_stmt_forget(sqlite3_stmt *st);
/* drawn: the random draw already made by the caller (0 or 1), -1 if none */
void sp_run_begin_slow(struct sp_thread *t, struct sp_stmt *s, sqlite3_stmt *st, int drawn);
void sp_run_end_slow(struct sp_thread *t, struct sp_stmt *s, sqlite3_stmt *st, int rc, uint64_t end);
extern _Atomic int sp_status_off; /* offset of SQLite's aCounter[], -1: use the API */
/* Bumped when a message carrying SQL texts was dropped: statements noted
 * before are noted again (and their text resent) at their next run. */
extern _Atomic uint32_t sp_sql_gen;
/* A dropped message carried these ids: send them again when next used. */
void sp_forget_sent(uint16_t type, uint64_t id);
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

/* stream.c */
void *sp_rec_reserve_slow(struct sp_thread *t, uint32_t len); /* NULL: lost */

/* Reserve len bytes (multiple of 8) in the thread's ring; NULL when the
 * record is lost (counted). The common case is a few instructions. */
static inline void *sp_rec_reserve(struct sp_thread *t, uint32_t len)
{
	struct sp_ring *r = t->ring;

	if (likely(r != NULL)) {
		uint32_t hd = atomic_load_explicit(&r->head, memory_order_relaxed);
		uint32_t off = hd & SP_RING_MASK;
		uint32_t tl = atomic_load_explicit(&r->tail, memory_order_acquire);

		if (likely(SP_RING_SIZE - off >= len && SP_RING_SIZE - (hd - tl) >= len)) {
			r->wpos = hd;
			return r->data + off;
		}
	}
	return sp_rec_reserve_slow(t, len);
}

static inline void sp_rec_commit(struct sp_thread *t, uint32_t len)
{
	struct sp_ring *r = t->ring;

	atomic_store_explicit(&r->head, r->wpos + len, memory_order_release);
}
int sp_stream_init(void);       /* constructor: connect, hello */
void sp_stream_fork_child(void);
void sp_stream_thread_exit(struct sp_thread *t);
void sp_stream_exit(void);      /* destructor: flush everything, BYE */
/* Before _exit or exec: flush and say BYE, unless this is a vfork child
 * sharing its parent's memory (then the parent's state is not ours). */
void sp_stream_leaving(void);
extern uint32_t sp_proc_pid;
/* Set in a forked child: connect and start the flusher at the next
 * execution (not in the fork handler, where that is not allowed). */
extern int sp_stream_restart;
void sp_stream_child_start(void);
void sp_modules_changed(void);  /* resend the map if libraries came or went */
void sp_modules_maybe_send(void);
extern atomic_ullong sp_lost;
extern int sp_stream_dead;

/* Statement counters: fullscan, sort, autoindex, vm steps. See core.c
 * (probe_status_layout) for why they are read from memory. */
static inline void sp_status_read(sqlite3_stmt *st, uint32_t v[4])
{
	int off = atomic_load_explicit(&sp_status_off, memory_order_relaxed);

	if (likely(off >= 0)) {
		const uint32_t *c = (const uint32_t *)((const char *)st + off);

		v[0] = c[SQLITE_STMTSTATUS_FULLSCAN_STEP];
		v[1] = c[SQLITE_STMTSTATUS_SORT];
		v[2] = c[SQLITE_STMTSTATUS_AUTOINDEX];
		v[3] = c[SQLITE_STMTSTATUS_VM_STEP];
		return;
	}
	v[0] = (uint32_t)sp_real.stmt_status(st, SQLITE_STMTSTATUS_FULLSCAN_STEP, 0);
	v[1] = (uint32_t)sp_real.stmt_status(st, SQLITE_STMTSTATUS_SORT, 0);
	v[2] = (uint32_t)sp_real.stmt_status(st, SQLITE_STMTSTATUS_AUTOINDEX, 0);
	v[3] = (uint32_t)sp_real.stmt_status(st, SQLITE_STMTSTATUS_VM_STEP, 0);
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

/* The random sampling draw: 1 with probability SQLPROF_RATE. */
static inline int sp_draw(struct sp_thread *t)
{
	if (sp_cfg.rate_all)
		return 1;
	if (sp_cfg.rate_threshold == 0)
		return 0;
	return sp_rng_next(t) < sp_cfg.rate_threshold;
}

/* First step of an execution. The common case (not nested, not the first
 * execution of its statement, not drawn for a stack) is inline; the rest
 * is in sp_run_begin_slow. */
static inline void sp_run_begin(struct sp_thread *t, struct sp_stmt *s, sqlite3_stmt *st)
{
	struct sp_run *r = &s->run;

	if (unlikely(!t->tid || t->cur || s->nexec == 0 || sp_stream_restart ||
		     s->sql_gen != atomic_load_explicit(&sp_sql_gen, memory_order_relaxed))) {
		sp_run_begin_slow(t, s, st, -1);
		return;
	}
	if (sp_cfg.rate_threshold && unlikely(sp_draw(t))) {
		sp_run_begin_slow(t, s, st, 1);
		return;
	}
	s->nexec++;
	r->seq = ++t->seq;
	r->parent = NULL;
	r->parent_seq = 0;
	r->flags = 0;
	r->db_time = r->nested_time = r->rows = r->stack_id = 0;
	sp_status_read(st, r->base);
	r->start = sp_now();
}

/* End of an execution (DONE, an error, or reset/finalize before DONE with
 * rc == SQLITE_ROW). A plain execution leaves a 64-byte record, inline;
 * anything else goes to sp_run_end_slow. */
static inline void sp_run_end(struct sp_thread *t, struct sp_stmt *s, sqlite3_stmt *st, int rc,
			      uint64_t end)
{
	struct sp_run *r = &s->run;
	struct sp_rec_exec_lite *x;
	uint32_t now[4];

	if (unlikely((r->flags & ~SP_EXEC_ABANDONED) != 0 || (rc != SQLITE_DONE && rc != SQLITE_ROW) ||
		     r->rows > UINT32_MAX ||
		     (sp_cfg.slow_ticks && end - r->start >= sp_cfg.slow_ticks))) {
		sp_run_end_slow(t, s, st, rc, end);
		return;
	}
	r->seq = 0;
	x = (struct sp_rec_exec_lite *)sp_rec_reserve(t, sizeof(*x));
	if (unlikely(!x))
		return;
	sp_status_read(st, now);
	t->ring->execs++;
	x->h.type = SP_REC_EXEC_LITE;
	x->h.flags = r->flags;
	x->h.len = sizeof(*x);
	x->pid = t->pid;
	x->tid = t->tid;
	x->sql_id = s->sql_id;
	x->wall = end - r->start;
	x->db_time = r->db_time;
	x->rows = (uint32_t)r->rows;
	x->fullscan_steps = now[0] - r->base[0];
	x->sorts = now[1] - r->base[1];
	x->autoindex = now[2] - r->base[2];
	x->vm_steps = now[3] - r->base[3];
	x->pad = 0;
	sp_rec_commit(t, sizeof(*x));
}

/* plan.c */
void sp_plan_capture(struct sp_thread *t, sqlite3_stmt *st, uint64_t sql_id, uint64_t db);
/* core.c: per-connection notes for plan.c */
void sp_db_note_callbacks(sqlite3 *db);
int sp_db_has_callbacks(uint64_t db);
int sp_plan_once(uint64_t db, uint64_t sql_id); /* 1 the first time */

/* Stack capture: fills pcs (leaf first), returns the id or 0. */
uint64_t sp_stack_capture(struct sp_thread *t);
void sp_stack_sets_reset(void); /* fork child: stacks are resent per pid */

/* unwind.c: cached CFI unwinder; -1 means "use backtrace()". */
int sp_unwind_init(void);
int sp_unwind(uintptr_t *pcs, int max);
extern int sp_use_cfi_unwinder;

#endif /* SP_PRELOAD_H */
