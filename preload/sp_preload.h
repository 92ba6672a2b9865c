/* SPDX-License-Identifier: MIT */
/*
 * sp_preload.h - internal interface of libsqlprof.so. Declarations only,
 * plus the few small inlines that several files share (the clock, the
 * statement lookup, the counters, the sampling countdown). The hot path
 * itself is in hot.c. Nothing here is exported from the shared object.
 *
 * Files: hot.c (step, reset, finalize: the per-execution path), shims.c
 * (every other interposer), exec.c (execution slow paths: start, end,
 * nesting, errors, stacks, events), stats.c (the shared statistics:
 * arenas and query records), stmt.c (the statement table, SQL texts, the
 * id sets, the counter probe), config.c (configuration, clock), resolve.c
 * (the originals, from sp_api.h's list of functions and interposers),
 * life.c (constructor, fork, destructor), stream.c
 * (rings, connection, module map, BYE), plan.c and shims_plan.c (query
 * plans, invisible to the program), unwind.c (the frame-pointer and CFI
 * stack walk), params.c (the bound values' hash of drawn executions),
 * pyframes.c (CPython's frames), iframes.c, rbframes.c and phpframes.c
 * (Ruby's and PHP's frames), gostack.c (Go's goroutine frames past
 * runtime.asmcgocall), deepbind.c (libraries loaded with
 * RTLD_DEEPBIND), elfdyn.c (ELF dynamic sections), embed.c (SQLite
 * compiled into the program: its own hooks).
 */
#ifndef SP_PRELOAD_H
#define SP_PRELOAD_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <link.h>
#include <pthread.h>
#include <emmintrin.h>
#include <sqlite3.h>

#include "sp_api.h"
#include "sp_wire.h"

#define SP_EXPORT __attribute__((visibility("default")))
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define SP_INLINE static inline __attribute__((always_inline))

/* Originals, resolved lazily (libsqlite3 may be dlopen'd after we start):
 * a field per entry of sp_api.h's list, then libc's dlopen. */
#define SP_API_FIELD(field, sym, export, need, ret, args) ret(*field) args;
struct sp_real {
	SP_API_CORE(SP_API_FIELD)
	void *(*dlopen)(const char *, int); /* libc's (RTLD_NEXT): resolve.c */
};
extern struct sp_real sp_real __attribute__((visibility("hidden")));
extern atomic_int sp_resolved; /* 1 once libsqlite3's functions are resolved */
/* 1 when profiling is on and the originals are known. */
extern int sp_hot;
int sp_resolve(void); /* 0 when the sqlite3 originals are known */
/* Another copy of libsqlprof.so comes before this one in the search
 * order (this one then stays inert) / after it (resolve.c). */
int sp_copy_before_us(void);
int sp_copy_after_us(void);

/* In a shim: resolve the originals if that has not happened yet. */
#define NEED()                                                                           \
	do {                                                                             \
		if (unlikely(!atomic_load_explicit(&sp_resolved, memory_order_acquire))) \
			sp_resolve();                                                    \
	} while (0)

/* What a shim returns when the original cannot be found at all (a program
 * calling sqlite3_* without libsqlite3 cannot happen): never jump to NULL. */
#define MISSING SQLITE_MISUSE

/* ---- config.c ---- */

struct sp_config {
	int enabled;  /* 0: pass everything through untouched */
	double rate;  /* SQLPROF_RATE */
	int rate_one; /* rate == 1: every gap is 1 */
	double log_q; /* log(1 - rate), for the gaps between draws */
	uint64_t seed;
	uint64_t slow_ticks; /* SQLPROF_SLOW_MS in clock units, 0 = off */
	uint64_t slow_span;  /* slow_ticks, or 2^63 when off: run.slow_at */
	uint64_t loop_gap;   /* SP_LOOP_GAP_NS in clock units: an N+1 loop
				 * goes on only with an execution starting
				 * less than this after the last one ended */
	int depth;           /* stack depth limit */
	int depth_interp;    /* that of a process with Ruby's or PHP's frames
			      * (set by iframes.c when it finds them), 0: none */
	int send_timeout_ms;
	int follow;
	int plans;            /* SQLPROF_PLANS: capture query plans */
	long plans_max;       /* SQLPROF_PLANS_MAX: (connection, fingerprint) pairs */
	int params;           /* SQLPROF_PARAMS: hash drawn executions' values */
	long texts_per_shape; /* SQLPROF_TEXTS_PER_SHAPE: distinct texts of
				  * one fingerprint with records of their own;
				  * the next ones share one (stmt.c); 0: no
				  * limit */
	int inline_path;      /* SQLPROF_INLINE=0: every step through
				  * step_general (the differential test of the
				  * inline paths, t_clock_paths) */
	uint64_t params_keep; /* a drawn execution is hashed when a draw of
				  * 64 random bits is below this: 0.01 / rate of
				  * them above rate 0.01, all below */
};
extern struct sp_config sp_cfg __attribute__((visibility("hidden")));
void sp_read_config(void);
void sp_warn_bad(const char *var, const char *val, const char *why);
extern int sp_env_bad; /* sp_warn_bad was called (before the statistics existed) */

/* Clock: TSC when the kernel itself uses it as clocksource, else
 * CLOCK_MONOTONIC. Units are opaque to the preload; HELLO says which. */
extern int sp_clock_tsc;
uint64_t sp_mono_ns(void);
double sp_tsc_per_ns(void); /* calibrated once in the constructor */
SP_INLINE uint64_t sp_rdtsc(void)
{
	uint64_t v, hi;

	/* rdtsc clears the upper halves of rax and rdx: no zero extension */
	__asm__ volatile("rdtsc\n\tshlq $32, %%rdx\n\torq %%rdx, %%rax" : "=a"(v), "=&d"(hi));
	return v;
}

/* CLOCK_MONOTONIC in ns, inline: the vDSO's read through libc, without
 * sp_mono_ns's call */
SP_INLINE uint64_t sp_mono_inline(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

SP_INLINE uint64_t sp_now(void)
{
	if (likely(sp_clock_tsc))
		return sp_rdtsc();
	return sp_mono_ns();
}

/* ---- executions ---- */

/* Bits of sp_exec.flags that are ours and never sent. */
#define SP_RUN_HAS_NESTED (1u << 15) /* a nested execution credited its time */
#define SP_RUN_API (1u << 14)        /* counters read through the API at start */
#define SP_RUN_NOREC \
	(1u << 13) /* no query record (agg NULL): never the
				      * inline end, which reads through agg */
#define SP_RUN_NOSEG \
	(1u << 12) /* its statement does not own its record's
				      * counter segment (stats.c): base holds
				      * its counters at start */
#define SP_RUN_PRIVATE (SP_RUN_HAS_NESTED | SP_RUN_API | SP_RUN_NOREC | SP_RUN_NOSEG)

/*
 * State of one execution in progress (a statement's, or an exec call's).
 * Between executions every field from seq to parent_seq is 0: the fast
 * start stores only start, db, rows, slow_at and the counter base.
 */
struct sp_exec {
	uint64_t start; /* first step; 0: no execution in progress */
	uint64_t db;    /* time inside the step calls; 0 while start
			       * is (every end clears both) */
	uint64_t rows;
	uint64_t slow_at; /* clock value from which it is slow; UINT64_MAX
			       * once noted */
	uint32_t base[4] __attribute__((aligned(16))); /* counters at start:
			       * fullscan, sort, autoindex, vm (SQLite's order) */
	uint64_t seq;                                  /* per-thread execution number, given when an
			       * event or a nested execution needs it */
	uint64_t nested_time; /* db time of executions nested in this one */
	uint64_t stack_id;
	struct sp_exec *parent;
	uint64_t parent_seq;
	uint16_t flags; /* SP_EXEC_* and SP_RUN_* */
	uint16_t kind;  /* enum sp_exec_kind */
	uint32_t pad;
	uintptr_t frame;                 /* exec calls: the shim's frame address, and */
	uintptr_t frame_link, frame_ret; /* the saved frame pointer and return
			       * address there while the call is live */
	uint64_t sql_id, shape;          /* exec calls: their text's */
};

/* One tracked prepared statement (slot of the lock-free table, stmt.c).
 * run comes first: the hot path's run pointer is the slot's. */
struct sp_stmt {
	struct sp_exec exec;
	_Atomic uintptr_t key;    /* sqlite3_stmt*, 0 empty, 1 tombstone */
	struct sp_agg_query *agg; /* its totals in the arena agg_arena */
	uint64_t agg_arena;       /* id of that arena (pid << 32 | number); 0:
				* none: the next start binds it */
	uint64_t sql_id;
	uint64_t db;
	uint64_t shape;            /* run key: the text without its literals */
	uint32_t nexec;            /* executions started (first-exec sampling) */
	uint32_t folded;           /* 1: sql_id is its fingerprint's folded text's
				* (stmt.c, sql_fold) until a second execution
				* gives it its own (sp_stmt_unfold) */
	struct sp_stmt *next_free; /* stmt.c's free list, under its lock */
	uintptr_t agg_caller;      /* the caller agg is the record of: an execution
				* started from another return address rebinds */
	uint64_t agg_tag;          /* agg_caller ^ the arena's tag (bits 48-63):
				* sqlite3_step's one test of both; 0: none */
	uintptr_t counters;        /* where SQLite's four counters are in the
				* statement object: set with agg_tag, which
				* needs them read in place */
};

/* ---- stats.c: the shared statistics ---- */

struct sp_thread;

/* One thread's arena (private part; the shared part is its chunks). */
struct sp_arena {
	uint64_t id;  /* pid << 32 | number */
	uint64_t tag; /* number << 48, or 0 from number 65536 on:
				      * numbers go on in a forked child, so no
				      * arena of this process has another's tag,
				      * and a return address is below 2^48 */
	uint32_t number;
	struct sp_agg_arena *sh;      /* its SP_AGG_ARENA record */
	struct sp_stats_chunk *chunk; /* current chunk */
	uint8_t *free, *end;          /* free space in it */
	uint64_t loop_shape;          /* shape of the open loop */
	struct sp_agg_query *fold[2]; /* per kind: texts with no room of
				      * their own (SP_SQL_FOLDED), made with
				      * the arena; NULL: none */
	struct sp_aslot *tab;         /* (sql_id, kind) -> query record */
	size_t tab_cap, tab_used;
	struct sp_arena *next; /* registry, under its lock */
	struct sp_arena *next_idle;
	int busy; /* being changed (stats.c, arena_enter) */
};

extern struct sp_stats_hdr *sp_stats; /* NULL: no shared statistics */
extern struct sp_agg_query sp_no_loop;
int sp_stats_init(void); /* constructor (and a forked child) */
/* An image that could neither connect nor leave a file: counted in the
 * statistics header of the nearest ancestor that shared its own (a
 * forked child keeps that page mapped). Nothing without one. */
void sp_stats_count_unreported(void);
extern int sp_stats_shared;     /* stream.c: the collector holds our memfd */
int sp_stats_fd(void);          /* the memfd, to send with HELLO; -1 none */
uint32_t sp_stats_ino_lo(void); /* its inode's low 32 bits (0: none), for BYE */
void sp_stats_fork_child(void);
/* The calling thread's arena (made or reused on first use); NULL when
 * there is no room or no statistics. */
struct sp_arena *sp_arena_get(struct sp_thread *t);
/* The query record of (sql_id, kind) in arena a, made on first use; NULL
 * when there is no room (the execution is counted as unattributed). */
/* The arena's record of (sql_id, kind, caller), made if new (*created 1). */
struct sp_agg_query *sp_agg_get(struct sp_arena *a, uint64_t sql_id, uint32_t kind, uint64_t caller,
				int *created);
/* Slow halves of the hot path's updates. */
uint64_t *sp_agg_hist_block(struct sp_agg_query *q, uint32_t block);
void sp_agg_error(struct sp_agg_query *q, int rc);
void sp_loop_switch(struct sp_thread *t, struct sp_agg_query *q, uint64_t shape, uint64_t start);
/* The longest pause between two executions of one N+1 loop: a caller's
 * loop issues its queries back to back, a service loop waits for its
 * requests (10 ms apart in issue 13's case). */
#define SP_LOOP_GAP_NS 1000000
void sp_loop_close(struct sp_thread *t);
uint64_t sp_stats_executions(void); /* executions counted so far (BYE) */
void sp_stats_unattributed(void);

/* ---- per thread ---- */

struct sp_ring;

/* Per-thread state, in initial-exec TLS: no allocation on access. */
struct sp_thread {
	/* The one word the hot path tests: SP_TS_FAST when the inline path
	 * may run (profiling on, thread set up, TSC clock, SQLite's counters
	 * at a known offset, not inside the profiler). SP_TS_SETUP: set up (sp_thread_ready). Entering the
	 * profiler adds SP_TS_GUARD (sp_guard_in). */
	uint32_t state;
	uint32_t tid;        /* 0 until sp_thread_init (also after fork) */
	uint32_t pid;        /* set with tid */
	uint32_t exec_depth; /* exec calls running (exec_stack in use) */
	struct sp_exec *cur; /* execution whose call (step, exec) we are in */
	uint64_t arena_id;   /* arena ? arena->id : an id no statement has */
	uint64_t arena_tag;  /* arena ? arena->tag : 0 */
	struct sp_arena *arena;
	/* the open N+1 loop: the query record it is credited to (&sp_no_loop:
	 * none), which holds its length and the clock value before which the
	 * next execution must start to go on with it (loop_open, loop_until:
	 * shared, so the collector sees an open loop) */
	struct sp_agg_query *loop_q;
	uint64_t loop_pauses;      /* longer pauses the open loop went on across */
	struct sp_stmt *last_stmt; /* the statement this thread looked up last;
				    * valid while its slot's key is still that
				    * statement (never NULL once set up) */
	struct sp_stmt *fast_stmt; /* the statement sqlite3_step may run inline:
				    * last_stmt, set by step_general while the
				    * state is SP_TS_FAST, or sp_stmt_none (key
				    * 1, never a statement's). Whatever takes
				    * the state off SP_TS_FAST or changes
				    * last_stmt resets it (sp_fast_off), so
				    * sqlite3_step tests the key alone */
	uint64_t skip;             /* executions until the next random draw hits */
	struct sp_ring *ring;      /* NULL until the thread's first record */
	uint64_t seq;              /* last execution number given */
	uint64_t rng;
	uint64_t last_stack; /* id of the last stack this thread sent or saw sent */
	/* Below: not read by the inline path. */
	struct sp_thread_more *more; /* the thread's larger state (life.c,
				      * sp_thread_more): &sp_more_none until
				      * it is set up, or when no page was to
				      * be had */
	uint32_t rec_busy;           /* 1 from sp_rec_reserve to sp_rec_commit (or
				* sp_rec_cancel): a signal handler that
				* writes a record meanwhile on this thread
				* counts it lost instead (stream.c) */
};
extern __thread struct sp_thread sp_tls;

/* sqlite3_exec calls run nested at most this deep per thread are
 * profiled; their state lives in the thread's sp_thread_more, never on a
 * stack frame that an exception or longjmp could take away. */
#define SP_EXEC_DEPTH 8

#define SP_TS_SETUP 1u
#define SP_TS_TSC 2u
#define SP_TS_COUNTERS 4u /* sp_status_off >= 0: SQLite's counters read in place */
#define SP_TS_FAST (SP_TS_SETUP | SP_TS_TSC | SP_TS_COUNTERS)
/* The same without the TSC: the inline path on the monotonic clock
 * (hot.c, step_mono), where the TSC is not invariant or is forced off */
#define SP_TS_FAST_MONO (SP_TS_SETUP | SP_TS_COUNTERS)
#define SP_TS_GUARD 8u /* and above: a count (sp_guard_in nests) */

/* 0 in a child made by a raw clone() that has not noticed yet (life.c) */
extern volatile uint8_t *sp_alive;
SP_INLINE int sp_same_process(void)
{
	return !sp_alive || sp_alive[0];
}
void sp_raw_clone_child(void);
SP_INLINE void sp_guard_in(struct sp_thread *t)
{
	t->state += SP_TS_GUARD;
}

SP_INLINE void sp_guard_out(struct sp_thread *t)
{
	t->state -= SP_TS_GUARD;
}

SP_INLINE int sp_guarded(const struct sp_thread *t)
{
	return t->state >= SP_TS_GUARD;
}

/* The thread leaves SP_TS_FAST (or last_stmt changes): sqlite3_step
 * stops running anything inline until step_general sees the state
 * SP_TS_FAST again. */
extern struct sp_stmt sp_stmt_none;
SP_INLINE void sp_fast_off(struct sp_thread *t)
{
	t->fast_stmt = &sp_stmt_none;
}

/* Make the thread ready for the inline path (ids, fork child restart,
 * sampling state, arena). Only when profiling is on and not guarded. */
void sp_thread_ready(struct sp_thread *t);
void sp_thread_init(struct sp_thread *t);

/* ---- stmt.c: the table of live statements ---- */
/*
 * Live statements, keyed by sqlite3_stmt pointer: an open-addressing
 * index (linear probing, at most half full counting tombstones) of
 * pointers to slots that never move (slabs, stmt.c). The index grows by
 * doubling: a new one is built and published, the old one kept, since a
 * reader may still be probing it; what it finds there is checked against
 * the slot's own key, the truth. Any number of live statements is held.
 */
struct sp_stmt_ent {
	_Atomic uintptr_t key; /* sqlite3_stmt*, 0 empty, 1 tombstone */
	struct sp_stmt *s;     /* its slot (set before key is published) */
};
struct sp_stmt_index {
	uint64_t mask;  /* entries - 1 */
	uint32_t shift; /* 64 - log2(entries) */
	uint32_t pad;
	struct sp_stmt_index *older; /* the index this one replaced */
	size_t used, live;           /* entries with a key; live ones */
	struct sp_stmt_ent e[];
};
extern struct sp_stmt_index *_Atomic sp_stmt_idx; /* NULL: no table */
extern struct sp_stmt sp_stmt_none;               /* last_stmt before any lookup */

/* A statement's hash, its top bits: the address folded (k ^ k >> 7)
 * before the multiply. SQLite's statements come from one allocator in
 * strides (1,792 bytes apart on Debian's 3.40), and a multiply alone puts
 * some strides in few buckets: 1,000 statements 1,792 bytes apart made
 * 539 collisions in 4,096 entries with the golden-ratio multiplier alone;
 * folded, the worst stride from 16 to 16,384 bytes makes 172 (a random
 * hash ~115). */
SP_INLINE uint64_t sp_stmt_hash(const void *p, uint32_t shift)
{
	uint64_t k = (uint64_t)(uintptr_t)p;

	return ((k ^ (k >> 7)) * 0xff51afd7ed558ccdULL) >> shift;
}

/* The tracked state of a statement, or NULL (also with no table, and for
 * a NULL statement). */
SP_INLINE struct sp_stmt *sp_stmt_find_hot(sqlite3_stmt *st)
{
	const struct sp_stmt_index *x = atomic_load_explicit(&sp_stmt_idx, memory_order_acquire);
	uintptr_t key = (uintptr_t)st;
	uint64_t i;

	if (unlikely(!x || key < 2))
		return NULL;
	for (i = sp_stmt_hash(st, x->shift);; i = (i + 1) & x->mask) {
		uintptr_t k = atomic_load_explicit(&x->e[i].key, memory_order_acquire);

		if (likely(k == key)) {
			struct sp_stmt *s = x->e[i].s;

			/* an older index's entry may be stale: the slot says */
			return atomic_load_explicit(&s->key, memory_order_acquire) == key ? s
											  : NULL;
		}
		if (k == 0)
			return NULL;
	}
}

/* sp_stmt_find_hot, trying first the statement this thread looked up
 * last: programs run one statement in a loop (step, step, reset). The slot
 * is checked by its key, so a slot freed or reused since is never taken
 * for another statement's. */
SP_INLINE struct sp_stmt *sp_stmt_lookup(struct sp_thread *t, sqlite3_stmt *st)
{
	struct sp_stmt *s = t->last_stmt;

	if (likely(atomic_load_explicit(&s->key, memory_order_acquire) == (uintptr_t)st))
		return s;
	s = sp_stmt_find_hot(st);
	if (s) {
		t->last_stmt = s;
		t->fast_stmt = &sp_stmt_none; /* step_general sets it again */
	}
	return s;
}

struct sp_stmt *sp_stmt_adopt(struct sp_thread *t, sqlite3_stmt *st);
void sp_stmt_unfold(struct sp_thread *t, struct sp_stmt *s, sqlite3_stmt *st);
void sp_stmt_forget(sqlite3_stmt *st);
void sp_stmt_prepared_text(struct sp_thread *t, sqlite3_stmt *st, const char *sql, size_t len,
			   uint64_t t0, uint64_t t1);
/* Note an SQL text: its id, its shape (*shape, may be NULL), and its SQL
 * record the first time in the process. */
uint64_t sp_sql_note(struct sp_thread *t, const char *sql, size_t len, uint64_t *shape);
/* SQL records that were lost (ring full): send them now if there is room. */
extern atomic_int sp_sql_pending;
void sp_sql_flush(struct sp_thread *t);
int sp_sql_pending_each(int (*fn)(void *arg, const void *rec, uint32_t len), void *arg);
int sp_sql_flush_room(struct sp_thread *t, int (*room)(struct sp_thread *t, uint32_t len));
/* Does a record of len bytes fit in the thread's ring now (stream.c)? */
int sp_ring_room(struct sp_thread *t, uint32_t len);
/* 1 the first time a text of this kind runs in the process */
int sp_first_exec(uint64_t sql_id, uint32_t kind);
/* 1 the first time a first execution of this shape has this stack */
int sp_first_site(uint64_t shape, uint64_t stack_id);
extern atomic_ullong sp_untracked;
void sp_stmt_tables_init(void);
void sp_stmt_fork_child(void); /* the table's lock, free in the child */
void sp_probe_status_once(void);
/* Before the program's sqlite3_auto_extension: the probe's connection
 * must not run the program's extensions (keeps errno). */
void sp_probe_before_auto_extension(void);

/* ---- exec.c: execution slow paths ---- */

/* drawn: the random draw already made by the caller (1 = hit), -1 if
 * none. frame: the frame address of the interposer entered from the
 * program (step_general), 0 when no exec call can be running. Returns the
 * clock value at which the execution starts. */
uint64_t sp_exec_begin_slow(struct sp_thread *t, struct sp_stmt *s, sqlite3_stmt *st, int drawn,
			    uintptr_t caller, uintptr_t frame);
void sp_exec_end_slow(struct sp_thread *t, struct sp_stmt *s, sqlite3_stmt *st, int rc,
		      uint64_t end);
void sp_exec_on_row(struct sp_thread *t, struct sp_stmt *s, uint64_t now);
/* An exec call: its run (NULL: too deep, not profiled). */
struct sp_exec *sp_exec_begin(struct sp_thread *t, uint64_t sql_id, uint64_t shape,
			      uintptr_t frame);
void sp_exec_end(struct sp_thread *t, struct sp_exec *r, sqlite3 *db, int rc, uint64_t end);
/* The callback of exec call r on db returned non-zero: s (stepped last,
 * its key then) is the call's statement, about to be freed by SQLite
 * with its execution open; end it now (abandoned). */
void sp_exec_callback_abort(struct sp_thread *t, struct sp_exec *r, sqlite3 *db, struct sp_stmt *s,
			    uintptr_t key);
/* An exec call nested deeper than SP_EXEC_DEPTH, timed t0..t1 by the shim:
 * counted (nested, its error if any) with no run of its own. */
void sp_exec_deep(struct sp_thread *t, uint64_t sql_id, uint64_t shape, sqlite3 *db, int rc,
		  uint64_t t0, uint64_t t1);
/* An execution whose statement SQLite freed without our finalize shim. */
void sp_exec_stale(struct sp_thread *t, struct sp_stmt *s);
/* Executions until the next random draw hits (>= 1): geometric gaps give
 * the same choices as one draw per execution, for a decrement each. */
uint64_t sp_draw_gap(struct sp_thread *t);

extern _Atomic int sp_status_off; /* offset of SQLite's aCounter[], -1: use the API */

/* Statement counters: fullscan, sort, autoindex, vm steps, as one 16-byte
 * vector. See stmt.c (probe_status_layout) for why they are read from
 * memory: SQLite keeps them as u32 aCounter[], these four at [1..4]. */
typedef uint32_t sp_v4u __attribute__((vector_size(16)));
typedef uint64_t sp_v2q __attribute__((vector_size(16)));

SP_INLINE sp_v4u sp_status_read(sqlite3_stmt *st)
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

SP_INLINE void sp_status_base(struct sp_exec *r, sqlite3_stmt *st)
{
	sp_v4u v = sp_status_read(st);

	__builtin_memcpy(r->base, &v, sizeof(v));
}

/* ---- SQLite's counters in segments (stats.c; sp_wire.h, seg_*) ---- */

/* s (key st, whose counters are read in place) takes q's segment: the
 * open one is closed, a new one opens at st's counters now; a statement
 * that had it and is still bound to q gives it up (and rebinds at its
 * next start). The calling thread owns q. */
void sp_seg_take(struct sp_thread *t, struct sp_agg_query *q, struct sp_stmt *s, sqlite3_stmt *st);
/* q's owner is gone (finalized, freed, or left for good): the segment is
 * closed at its last end. */
void sp_seg_close(struct sp_agg_query *q);
/* A lane of the open segment reached 2^31: closed and opened again at
 * the owner's counters of its last end. */
void sp_seg_fold(struct sp_agg_query *q);

/* Does the execution r of s end in q's segment (s owns it, and r's start
 * counters are the segment's)? */
SP_INLINE int sp_seg_owned(const struct sp_agg_query *q, const struct sp_stmt *s,
			   const struct sp_exec *r)
{
	return q && q->seg_owner == (uint64_t)(uintptr_t)s &&
	       !(r->flags & (SP_RUN_API | SP_RUN_NOSEG));
}

/* The program resets counter op (1-4) of st, s, which owns q's segment,
 * through sqlite3_stmt_status: the segment is closed at the counters
 * before the reset and opened at them after it. Returns the original's
 * result. */
int sp_seg_status_reset(struct sp_thread *t, struct sp_agg_query *q, struct sp_stmt *s,
			sqlite3_stmt *st, int op);

/* sp_seg_fold, returning rc: the inline end's tail call, so that nothing
 * of sqlite3_step's is kept across it. */
int sp_seg_fold_rc(struct sp_agg_query *q, int rc);

/* The owner's execution ended with its statement's counters at now: one
 * store. Returns non-zero when a lane passed 2^31: the segment must be
 * folded (sp_seg_fold). */
SP_INLINE int sp_seg_store(struct sp_agg_query *q, __m128i now)
{
	_mm_store_si128((__m128i *)(void *)q->seg_cur, now);
	return _mm_movemask_ps(_mm_castsi128_ps(
		_mm_sub_epi32(now, _mm_load_si128((const __m128i *)(const void *)q->seg_base))));
}

SP_INLINE void sp_seg_end(struct sp_agg_query *q, __m128i now)
{
	if (unlikely(sp_seg_store(q, now)))
		sp_seg_fold(q);
}

/* SQLite's counters of an execution of s ending in q: now (*now), and
 * since its start - for an owner, its segment's last end, for anyone
 * else, its base. *owned: whether it ends in the segment. */
SP_INLINE sp_v4u sp_exec_delta(const struct sp_agg_query *q, const struct sp_stmt *s,
			       const struct sp_exec *r, sqlite3_stmt *st, sp_v4u *now, int *owned)
{
	sp_v4u b;

	*now = sp_status_read(st);
	*owned = sp_seg_owned(q, s, r);
	if (*owned)
		__builtin_memcpy(&b, q->seg_cur, sizeof(b));
	else
		__builtin_memcpy(&b, r->base, sizeof(b));
	return *now - b;
}

/*
 * Add one ended execution to its query record (the arena's owner only),
 * but for SQLite's counters (sp_seg_end, or sp_agg_add's sums): bucket,
 * its histogram bucket. Plain stores and no call: a reader sees every
 * field only grow.
 */
SP_INLINE void sp_agg_add_in(struct sp_agg_query *q, const struct sp_exec *r, uint64_t end,
			     uint64_t *bucket)
{
	uint64_t db = r->db;

	q->count++;
	q->db += db;
	{
		uint64_t w = end - r->start; /* in a register: one add to memory */

		__asm__("" : "+r"(w));
		q->wall += w;
	}
	q->rows += r->rows;
	if (unlikely(db < q->min))
		q->min = db;
	if (unlikely(db > q->max))
		q->max = db;
	++*bucket;
}

/* An execution's times came out negative, or its db time above its wall
 * time (the clock went back: config.c, tsc_invariant): clamped, and
 * counted in the statistics header (stats.c). */
void sp_exec_clamp_slow(struct sp_exec *r, uint64_t *end);
SP_INLINE void sp_exec_clamp(struct sp_exec *r, uint64_t *end)
{
	if (unlikely((int64_t)(*end - r->start) < 0 || r->db > *end - r->start))
		sp_exec_clamp_slow(r, end);
}

/* The histogram bucket of db in q, its block made if need be; NULL when
 * there is no room (the value is counted in hist_lost). */
SP_INLINE uint64_t *sp_agg_bucket(struct sp_agg_query *q, uint64_t db)
{
	uint32_t i = sp_hist_index(db);
	uint64_t blk = q->hist[i / SP_HIST_PER_BLOCK], *b;

	if (likely(blk != 0))
		return &((struct sp_agg_hist *)(uintptr_t)blk)->bucket[i % SP_HIST_PER_BLOCK];
	b = sp_agg_hist_block(q, i / SP_HIST_PER_BLOCK);
	return b ? &b[i % SP_HIST_PER_BLOCK] : NULL;
}

/* sp_agg_add_in for any execution. SQLite's counters: seg_now, the
 * owner's at its end (sp_exec_delta), or NULL: d, the deltas, go to the
 * sums. */
SP_INLINE void sp_agg_add(struct sp_agg_query *q, const struct sp_exec *r, uint64_t end, sp_v4u d,
			  const sp_v4u *seg_now)
{
	uint64_t *bucket = sp_agg_bucket(q, r->db), lost = 0;

	sp_agg_add_in(q, r, end, bucket ? bucket : &lost);
	if (!bucket)
		q->hist_lost++;
	if (seg_now) {
		__m128i v;

		__builtin_memcpy(&v, seg_now, sizeof(v));
		sp_seg_end(q, v);
	} else {
		q->fullscan_steps += d[0];
		q->sorts += d[1];
		q->autoindex += d[2];
		q->vm_steps += d[3];
	}
}

/* A top-level execution of q, from start to end, ended: its thread's N+1
 * run goes on (the same query, started within loop_gap of the last end) or
 * switches to q. */
SP_INLINE void sp_loop_note(struct sp_thread *t, struct sp_agg_query *q, uint64_t shape,
			    uint64_t start, uint64_t end)
{
	/* loop_until is 0 but in the open loop's record */
	if (likely(start < q->loop_until))
		q->loop_open++;
	else
		sp_loop_switch(t, q, shape, start);
	if (t->loop_q == q) /* not when q could not open a loop */
		q->loop_until = end + sp_cfg.loop_gap;
}

SP_INLINE uint64_t sp_rng_next(struct sp_thread *t)
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
SP_INLINE int sp_draw(struct sp_thread *t)
{
	if (likely(--t->skip != 0))
		return 0;
	t->skip = sp_cfg.rate_one ? 1 : sp_draw_gap(t);
	return 1;
}

/* ---- stacks (exec.c, unwind.c) ---- */

/* Text range of libsqlprof itself: leading frames inside it are dropped. */
extern uintptr_t sp_self_lo, sp_self_hi;
/* A stack not known to be sent by this thread lately: note it in the set
 * and write its STACK record the first time in the process. Keeps errno. */
uint64_t sp_stack_note(struct sp_thread *t, const uintptr_t *pcs, int depth, uint64_t h);
int sp_unwind(uintptr_t *pcs, int max);
extern int sp_use_cfi_unwinder;
int sp_backtrace_keep_errno(uintptr_t *pcs, int max);
/* Libraries unloaded (dlclose) so far, and a salt of this process image:
 * both are mixed into stack ids, so that the same pcs in a library loaded
 * where an unloaded one was, or in a new image of the same pid (exec
 * without address randomization), make another stack, sent again with its
 * own module map. */
extern atomic_ulong sp_unloads;
extern uint64_t sp_image_salt;

/* gostack.c: a Go program's goroutine frames past runtime.asmcgocall.
 * The walk met pc (no CFI for it), rsp and rbp as the frame below left
 * them: when pc is asmcgocall's return from C, the goroutine's pcs go on
 * at end[i] (i < 0, as in unwind.c's walk_slow) and the walk's result is
 * returned; else -1. hi8: the thread stack's top - 8. */
int sp_go_walk(uintptr_t *end, intptr_t i, int max, uintptr_t rsp, uintptr_t rbp, uintptr_t pc,
	       uintptr_t hi8);
int sp_go_restore_code(const uint8_t *code, int *goff, int *doff);

/* pyframes.c: the Python frames of a CPython process */
#define SP_PY_STATE_OFF 4
extern atomic_int sp_py_state;
/* pcs: t->more->pcs, the caller holding walk_busy (its buffers are used) */
int sp_py_splice(struct sp_thread *t, uintptr_t *pcs, int n, int cap);
void sp_py_fork_child(void);
void sp_py_modules_changed(void); /* stream.c: the map changed, look again */

/* iframes.c: Ruby's and PHP's frames (rbframes.c, phpframes.c), found by
 * pyframes.c's detection when there is no CPython, spliced instead */
#define SP_IF_RUBY 1
#define SP_IF_PHP 2
#define SP_IF_NAME_MAX 255
#define SP_IF_FILE_MAX 1023
struct sp_if_lang {
	uint8_t id; /* SP_IF_*: the minor of its SP_REC_PYCODE records (major 0) */
	/* 1: its interpreter runs here and is read (*text: an address in its
	 * code); 0: not here; -1: here but not read (said: SP_REC_PYINFO) */
	int (*detect)(struct sp_thread *t, uintptr_t *text);
	/* the calling thread's frames, innermost first: a handle and a line
	 * each; their number (0: none, or not this thread) */
	int (*frames)(struct sp_thread *t, uintptr_t *fr, uint32_t *line, int max);
	/* a frame's identity: its function and the objects of its name and
	 * file (a function freed and another one at its address differs in
	 * them); -1: the frame is left out */
	int (*ident)(uintptr_t fr, uintptr_t k[3]);
	/* its name and file, at most SP_IF_NAME_MAX and SP_IF_FILE_MAX bytes */
	int (*describe)(uintptr_t fr, const uintptr_t k[3], char *name, int *nl, char *file,
			int *fl);
};
extern const struct sp_if_lang sp_if_ruby, sp_if_php;
extern const struct sp_if_lang *sp_if_lang; /* NULL: neither read */
extern atomic_int sp_if_direct;             /* sp_if_rd: plain loads from now on */
int sp_if_detect(struct sp_thread *t);
int sp_if_splice(struct sp_thread *t, uintptr_t *pcs, int n, int cap);
int sp_if_rd_checked(uintptr_t addr, void *out, size_t n);
/* 0, or -1: not readable: a user-space address, read through
 * process_vm_readv until sp_if_direct, then with a plain load */
SP_INLINE int sp_if_rd(uintptr_t addr, void *out, size_t n)
{
	if (addr < 4096 || addr + n < addr || addr + n > (1ULL << 47))
		return -1;
	if (likely(atomic_load_explicit(&sp_if_direct, memory_order_relaxed))) {
		__builtin_memcpy(out, (const void *)addr, n);
		return 0;
	}
	return sp_if_rd_checked(addr, out, n);
}
void sp_if_info(struct sp_thread *t, uint32_t status, const char *text);

/* The next time (mono ns) a slow path looks at the connection: whether
 * the collector is still there, and if not whether one listens (again)
 * at our socket (sp_stream_check). At most once a second. */
extern _Atomic uint64_t sp_stream_check_at;
void sp_stream_check(void);
/* A slow path with no record in flight and no lock of ours held: a clock
 * read, and once a second the look above. */
/* sp_stream_check's own deadline is monotonic ns; this one, in sp_now()'s
 * units, spares a slow path the clock_gettime call (some 25 instructions
 * in the vDSO, a tenth of a sampled execution's cost) the rest of each
 * second. 0 after fork and a stream reset: check at once. */
extern _Atomic uint64_t sp_stream_tick_at;
void sp_stream_tick_slow(uint64_t now);
SP_INLINE void sp_stream_tick(void)
{
	uint64_t now = sp_now();

	if (unlikely(now >= atomic_load_explicit(&sp_stream_tick_at, memory_order_relaxed)))
		sp_stream_tick_slow(now);
}

/* Where pcs[0..n) (pcs[0] always ours: the walk's caller) leaves
 * libsqlprof, and how many frames from there the stack keeps. */
SP_INLINE int sp_stack_span(const uintptr_t *pcs, int n, int *skip)
{
	uintptr_t lo = sp_self_lo, span = sp_self_hi - sp_self_lo;
	int k = 1, depth;

	while (k < n && pcs[k] - lo < span)
		k++;
	*skip = k;
	depth = n - k;
	/* Ruby's and PHP's stacks are deep (an ActiveRecord query is 60 to
	 * 150 frames below the user's line): depth_interp (iframes.c) */
	if (unlikely(sp_cfg.depth_interp))
		return depth > sp_cfg.depth_interp ? sp_cfg.depth_interp : depth;
	return depth > sp_cfg.depth ? sp_cfg.depth : depth;
}

/* The stack id of pcs[0..n) as a walk from inside libsqlprof gave them:
 * FNV-1a of the pcs above our own frames (at most sp_cfg.depth of them),
 * their number, the image salt and the unloads so far; 0: no frame. */
SP_INLINE uint64_t sp_stack_id(const uintptr_t *pcs, int n)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	int skip, depth = sp_stack_span(pcs, n, &skip), i;

	if (depth <= 0)
		return 0;
	for (i = 0; i < depth; i++)
		h = (h ^ (uint64_t)pcs[skip + i]) * 0x100000001b3ULL;
	h ^= (uint64_t)depth;
	h ^= sp_image_salt +
	     atomic_load_explicit(&sp_unloads, memory_order_relaxed) * 0x9E3779B97F4A7C15ULL;
	return h | 1; /* 0 means no stack */
}

/*
 * The last walk of this thread (unwind.c): where it started, and the
 * stack words that decided it, so that the next walk from there can tell
 * it would climb the same frames by checking those words (sp_memo_same).
 */
#define SP_MEMO_MAX 64
struct sp_memo_word {
	uintptr_t at, val;
};
struct sp_walk_memo {
	uintptr_t rsp0, pc0, rbp0; /* the walk's start; rsp0 0: no memo */
	uint64_t unloads;          /* sp_unloads then */
	uint64_t id;               /* its stack id (not 0) */
	uint32_t n;                /* words in w */
	uint8_t rbp0_used;         /* a frame-pointer CFA came from rbp0 */
	uint8_t state;             /* bit 0: being checked or written (busy);
				    * above: walks since the memo last told
				    * (a check that tells stores 1, then 0) */
	uint8_t rest;              /* walks left without a memo (unwind.c) */
	struct sp_memo_word w[SP_MEMO_MAX];
};

/*
 * What a thread keeps beyond sp_tls: too large for static TLS, whose every
 * byte each thread of the program pays for in its stack (a thread made
 * with a 16 KiB stack failed with EINVAL when it was 20 KiB) and which an
 * audit library's loading needs room in ("cannot allocate memory in
 * static TLS block"). One page, mapped when the thread is set up
 * (sp_thread_ready) and kept for the next thread when this one exits
 * (life.c). sp_more_none stands for it meanwhile, or when no page was to
 * be had: its memo never tells (rsp0 0) and is never written, and it has
 * no exec runs (sp_exec_begin: not tracked).
 */
#define SP_PY_FRAMES_MAX 128 /* Python frames read per stack (pyframes.c) */
/* The thread's statement cache (sp_thread_more.stmt_cache): slots of
 * statements it stepped, direct-mapped by the statement's address, so
 * that a program stepping several statements in turn (every ORM) finds
 * each one's slot with a load and a compare, without a probe of the index
 * (hot.c, sqlite3_step). An entry holds its slot's address XOR
 * &sp_stmt_none, so that the zero pages of a fresh mapping hold
 * sp_stmt_none everywhere and only the entries used are ever touched
 * (64 KiB of address space a thread, a page or two of memory). An entry
 * is checked by its slot's key like last_stmt: a slot freed or reused
 * since never matches. */
#define SP_STMT_CACHE_BITS 13
#define SP_STMT_CACHE (1u << SP_STMT_CACHE_BITS)
SP_INLINE uint64_t sp_stmt_cache_slot(const void *st)
{
	return sp_stmt_hash(st, 64 - SP_STMT_CACHE_BITS);
}
SP_INLINE struct sp_stmt *sp_stmt_cache_get(const uintptr_t *e)
{
	return (struct sp_stmt *)(*e ^ (uintptr_t)&sp_stmt_none);
}
SP_INLINE void sp_stmt_cache_put(uintptr_t *e, const struct sp_stmt *s)
{
	*e = (uintptr_t)s ^ (uintptr_t)&sp_stmt_none;
}

struct sp_thread_more {
	uintptr_t stmt_cache[SP_STMT_CACHE]; /* first: one load from more */
	struct sp_walk_memo memo;
	struct sp_exec exec_stack[SP_EXEC_DEPTH];
	struct sp_thread_more *next_idle; /* life.c's idle list */
	/* A stack walk's buffers (exec.c, sp_stack_walk; pyframes.c,
	 * sp_py_splice), 6 KiB that were on the stack: walk_busy from the
	 * walk's start to its end, so a signal handler's walk on this
	 * thread meanwhile takes a small buffer of its own instead */
	uint32_t walk_busy;
	uintptr_t pcs[SP_STACK_MAX + 8];
	uintptr_t py_out[SP_STACK_MAX + 8];
	uintptr_t py_code[SP_PY_FRAMES_MAX];
	uint32_t py_off[SP_PY_FRAMES_MAX];
	uint8_t py_entry[SP_PY_FRAMES_MAX];
};
extern struct sp_thread_more sp_more_none;
/* t's sp_thread_more, mapped (or taken from the idle list) on first use;
 * &sp_more_none when none can be had. Async-signal-safe. */
struct sp_thread_more *sp_thread_more(struct sp_thread *t);
#define SP_MEMO(t) (&(t)->more->memo) /* the thread's memo: one load */

/* Walk the stack from a frame of ours (rsp: its caller's stack pointer,
 * rbp and pc as that frame left them), as sp_unwind does from its own,
 * noting the walk in memo m (the thread's) when the fast loop alone made
 * it: then *noted is 1 and the memo stays busy until sp_memo_done gives
 * its id. sp_more_none's memo is never noted in. Returns sp_unwind's
 * result. Keeps errno. */
int sp_unwind_noting(struct sp_walk_memo *m, uintptr_t *pcs, int max, uintptr_t rsp, uintptr_t rbp,
		     uintptr_t pc, int *noted);

SP_INLINE void sp_memo_done(struct sp_walk_memo *m, uint64_t id)
{
	m->id = id;
	if (!id)
		m->rsp0 = 0; /* no stack: nothing to remember */
	atomic_signal_fence(memory_order_seq_cst);
	m->state &= (uint8_t)~1u;
}

/* 1 when a walk from (rsp, rbp, pc) would be this thread's last noted
 * one: same start, and every word it read unchanged (unwind.c, "the last
 * walk"). Its id is then m->id (m: SP_MEMO(t)). The walk's max is not compared: each
 * place a walk starts from (pc) always asks for the same one. */
SP_INLINE int sp_memo_same(struct sp_walk_memo *m, uintptr_t rsp, uintptr_t rbp, uintptr_t pc)
{
	const struct sp_memo_word *wend;
	uint8_t state = m->state;
	intptr_t i;

	if (!(m->rsp0 == rsp && m->pc0 == pc && !(state & 1) &&
	      m->unloads == atomic_load_explicit(&sp_unloads, memory_order_relaxed) &&
	      (!m->rbp0_used || m->rbp0 == rbp)))
		return 0;
	/* counted up to 0 from -n: one add and branch a word (n >= 1: a
	 * walk that read no word is not noted) */
	wend = m->w + m->n;
	i = -(intptr_t)m->n;
	m->state = 1; /* busy */
	atomic_signal_fence(memory_order_seq_cst);
	do {
		if (*(const uintptr_t *)wend[i].at != wend[i].val) {
			atomic_signal_fence(memory_order_seq_cst);
			m->state = state; /* not told: the misses stand */
			return 0;
		}
	} while (++i);
	atomic_signal_fence(memory_order_seq_cst);
	m->state = 0; /* told: no miss since */
	return 1;
}

/* The calling thread's stack above libsqlprof, as a stack id (0: none),
 * its STACK record written if it is new to this thread (exec.c). The walk
 * starts at its own frame. Keeps errno. */
uint64_t sp_stack_take(struct sp_thread *t);
/* The same, for a walk from (rsp, rbp, pc): the frame of a function of
 * ours (its caller's stack pointer, the rbp and return address it saved),
 * or with entered 1 the state at the entry of one the program jumped to
 * (pc is the program's); the memo could not tell (sp_memo_same). */
uint64_t sp_stack_walk(struct sp_thread *t, uintptr_t rsp, uintptr_t rbp, uintptr_t pc,
		       int entered);
void sp_emit_exec(struct sp_thread *t, struct sp_exec *r, uint64_t sql_id, uint64_t db, int rc,
		  uint64_t end, sp_v4u delta, uint64_t params);
/* The key of the bound values' hashes (sp_rec_exec.params): drawn at
 * start-up, never sent. */
extern uint64_t sp_params_key[2];
/* sqlite3_step on a thread inside the profiler's own work (sp_guarded):
 * the original's result; a program's execution starting there counted
 * (exec.c). */
int sp_step_guarded(struct sp_thread *t, sqlite3_stmt *st);
/* The end of a drawn execution that is otherwise plain (end_drawn's
 * tests hold); returns rc. */
int sp_exec_end_sampled(struct sp_stmt *s, int rc, uint64_t end); /* on this thread */
void sp_stack_sets_reset(void); /* fork child: stacks are resent per pid */
int sp_unwind_init(void);       /* unwind.c: cached CFI unwinder; -1: backtrace() */
/* 1 when [addr, addr + len) lies in the calling thread's stack. */
int sp_stack_contains(uintptr_t addr, size_t len);

/* ---- stream.c ---- */
/* Per-thread ring of encoded records, in memory shared with the collector
 * (struct sp_ring_shared in a memfd, see sp_wire.h): the owner thread
 * writes records and publishes its head; the collector reads them and
 * publishes its tail. This private part holds what only the owner uses,
 * so nothing the collector writes can steer the owner's writes. */
#define SP_RING_SIZE (128u * 1024u)
#define SP_RING_MASK (SP_RING_SIZE - 1u)
struct sp_ring {
	uint32_t head;   /* end of the committed records (also in sh), or
				* where the next record goes after a PAD the
				* slow path wrote (published with that record) */
	uint32_t wlimit; /* head value up to which writing needs no check,
				* as of the last slow reservation */
	uint32_t poked;  /* tail value at which we last woke the collector */
	uint8_t *data;   /* sh->data */
	struct sp_ring_shared *sh;
	int orphan;                /* the collector never got the ring: writes are lost */
	int dontfork;              /* sh is not inherited by a forked child */
	struct sp_ring *next;      /* registry, under the registry lock */
	struct sp_ring *next_idle; /* idle list (thread gone), same lock */
	int mfd;                   /* its memfd, kept above 800 to announce it again
				* to a collector that comes back; -1: none */
	dev_t mfd_dev;             /* what mfd is, checked before it is sent or closed */
	ino_t mfd_ino;
};

void *sp_rec_reserve_slow(struct sp_thread *t, uint32_t len); /* NULL: lost */

/* A record reserved while another of the same thread is between its
 * reserve and commit: a signal handler's on that thread (lost, counted). */
void *sp_rec_reentered(void);

/* Reserve len bytes (multiple of 8) in the thread's ring; NULL when the
 * record is lost (counted). The common case is a compare against the
 * producer's own limit (wlimit: where the free linear space ends, as of
 * the last slow reservation). A reservation that succeeds must be
 * followed by sp_rec_commit or sp_rec_cancel: until then the thread is
 * writing (rec_busy) and a record that a signal handler on the same
 * thread reserves meanwhile is lost, counted, instead of written over
 * this one (issue 23: "bad record length 2614792021"). */
SP_INLINE void *sp_rec_reserve(struct sp_thread *t, uint32_t len)
{
	struct sp_ring *r;
	void *p;

	if (unlikely(t->rec_busy))
		return sp_rec_reentered();
	t->rec_busy = 1;
	atomic_signal_fence(memory_order_seq_cst);
	r = t->ring;
	if (likely(r != NULL)) {
		uint32_t hd = r->head;

		if (likely(r->wlimit - hd >= len)) /* wlimit never falls behind head */
			return r->data + (hd & SP_RING_MASK);
	}
	p = sp_rec_reserve_slow(t, len);
	if (unlikely(!p)) {
		atomic_signal_fence(memory_order_seq_cst);
		t->rec_busy = 0;
	}
	return p;
}

SP_INLINE void sp_rec_commit(struct sp_thread *t, uint32_t len)
{
	struct sp_ring *r = t->ring;

	r->head += len;
	__atomic_store_n(&r->sh->head, r->head, __ATOMIC_RELEASE);
	atomic_signal_fence(memory_order_seq_cst);
	t->rec_busy = 0;
}

/* A reservation given up: nothing written counts (the head stays). */
SP_INLINE void sp_rec_cancel(struct sp_thread *t)
{
	atomic_signal_fence(memory_order_seq_cst);
	t->rec_busy = 0;
}
int sp_stream_init(void); /* constructor: connect, hello */
/* Move our descriptor out of the program's way: the descriptor to use,
 * or -1 (fd untouched) when the limit leaves no room (stream.c). */
int sp_fd_high(int fd);
void sp_stream_before_uid_change(void); /* setuid and friends (shims.c) */
void sp_stream_fork_child(void);
void sp_stream_exit(void); /* destructor: BYE */
/* Before _exit or exec: say BYE, unless this is a vfork child
 * sharing its parent's memory (then the parent's state is not ours). */
void sp_stream_leaving(void);
extern uint32_t sp_proc_pid;
/* Set in a forked child: connect at the next execution (not in the fork
 * handler, where that is not allowed). */
extern int sp_stream_restart;
void sp_stream_child_start(void);
void sp_stream_spares(void); /* first SQLite thread: the spare rings */
/* Set when the image could not connect at start-up: its first SQLite
 * call (sp_thread_ready) says so (sp_stream_unrep_start). */
extern int sp_unrep_pending;
void sp_stream_unrep_start(void);
void sp_modules_changed(void);        /* resend the map if libraries came or went */
uint32_t sp_modules_generation(void); /* the map last sent (0: none yet) */
void sp_modules_maybe_send(void);
void sp_modules_resend(void); /* send the map again (embed.c: new flags) */
extern atomic_ullong sp_lost;
extern atomic_int sp_stream_dead;
/* stmt.c: forget which SQL texts were sent (a new collector has none). */
void sp_sql_sent_reset(void);
uint32_t sp_my_pid(void);

/* ---- plan.c ---- */
void sp_plan_capture(struct sp_thread *t, sqlite3_stmt *st, uint64_t sql_id, uint64_t shape,
		     uint64_t db);
void sp_plan_fork_child(void);
/* Send the PLAN and SCHEMA records kept for want of room; 1 while some
 * are still kept (sp_sql_pending stays set). */
int sp_plan_flush(struct sp_thread *t);
/* stmt.c: per-connection notes for plan.c */
void sp_db_note_callbacks(sqlite3 *db);
int sp_db_has_callbacks(uint64_t db);

/* ---- shims_plan.c: keeping plan capture invisible (used by plan.c) ---- */
/* Originals only plan capture and its shims need, resolved lazily by
 * sp_plan_resolve (0 when limit and the mutex functions are known). */
struct sp_plan_real {
	SP_API_PLAN(SP_API_FIELD)
};
extern struct sp_plan_real sp_plan_real;
int sp_plan_resolve(void);
void sp_plan_resolve_from(void *h, struct sp_plan_real *p);

/* ---- more than one SQLite in the process (resolve.c) ---- */

/* A foreign SQLite library: one the primary (sp_real) is not. Its calls
 * are passed through untouched. */
struct sp_lib {
	struct sp_real fn;
	struct sp_plan_real plan;
	const void *lm; /* link map of the object defining its sqlite3_step */
};
/* Number of foreign libraries found so far; 0 in almost every process. */
extern atomic_int sp_libs_foreign;
/* The foreign library a call from return address ra binds to, or NULL
 * for the primary. Keeps errno. */
const struct sp_lib *sp_lib_of(const void *ra);
void sp_stats_note_foreign_lib(void);   /* stats.c: counted for the collector */
void sp_stats_note_seen(uint32_t bits); /* stats.c: enum sp_seen bits into the header */
/* The size a file of ours may grow to without SIGXFSZ: RLIMIT_FSIZE's
 * soft limit, UINT64_MAX without one (life.c). */
uint64_t sp_fsize_room(void);
/* In an exported shim, after NEED(): its caller's foreign library, or
 * NULL when the call is the primary's. */
#define SP_FOREIGN() sp_lib_of(__builtin_return_address(0))
/* The same, for the per-statement paths: only once a foreign library
 * exists, and only for a statement that is not ours. */
#define SP_FOREIGN_STMT(st, ra)                                                    \
	(unlikely(atomic_load_explicit(&sp_libs_foreign, memory_order_relaxed)) && \
			 !sp_stmt_find_hot(st)                                     \
		 ? sp_lib_of(ra)                                                   \
		 : NULL)
/* The link map of the object holding addr (NULL: none); the primary's. */
const void *sp_lm_of(const void *addr);
const void *sp_primary_lm(void);
/* Calls from the object lm go to the primary (deepbind.c patched it). */
void sp_lib_note_primary_caller(const void *lm);

/* ---- RTLD_DEEPBIND (deepbind.c) ---- */

/* The original dlopen; the stub jumps to it. */
extern void *(*sp_dlopen_real)(const char *, int);
/* 1: every dlopen goes by sp_dlopen_route (embed.c looks at new objects) */
extern int sp_dlopen_watch;
/* 1 when a RTLD_DEEPBIND'd library was loaded that could not be patched
 * at once: the next shim to see it patches. */
extern atomic_int sp_deepbind_pending;
unsigned sp_deepbind_patch(void);
void sp_stats_note_deepbind_late(void); /* stats.c: counted for the collector */
#define SP_DEEPBIND_CATCH_UP()                                                                  \
	do {                                                                                    \
		if (unlikely(atomic_load_explicit(&sp_deepbind_pending, memory_order_relaxed))) \
			sp_deepbind_patch();                                                    \
	} while (0)
#define SP_STR2(x) #x
#define SP_STR(x) SP_STR2(x)

/* > 0 while this thread is inside plan capture: what SQLite logs then is
 * not passed to the program's SQLITE_CONFIG_LOG callback. */
extern __thread int sp_plan_quiet;
/* 1 when no plan may be captured anywhere: extension code was loaded (its
 * modules are registered unseen), or the program's log callback is
 * installed without our filter. */
int sp_plan_blocked(void);
/* 1 once the program installed an allocator of its own for SQLite
 * (SQLITE_CONFIG_MALLOC with methods outside libsqlite3, or
 * SQLITE_CONFIG_HEAP): plan capture would take its turns. */
int sp_plan_alloc_foreign(void);

/* ---- a loaded object's dynamic section (elfdyn.c) ---- */

struct dl_phdr_info;
struct sp_dyn {
	uintptr_t base;        /* load bias */
	const ElfW(Sym) * sym; /* dynamic symbols */
	size_t nsym;
	const char *str; /* their names */
	size_t strsz;
	const ElfW(Rela) * rela, *jmprel; /* DT_RELA, DT_JMPREL */
	size_t relasz, jmprelsz;          /* in entries */
	uintptr_t relro_lo, relro_hi;     /* PT_GNU_RELRO, 0 0 when none */
	const uint32_t *gnu;              /* DT_GNU_HASH, NULL when none */
};
/* Fill d from the object's PT_DYNAMIC; -1 when it has none (or no
 * symbols). */
int sp_dyn_read(const struct dl_phdr_info *info, struct sp_dyn *d);
/* Count the dynamic symbols (nsym) of an object with DT_GNU_HASH only:
 * sp_dyn_read leaves nsym 0 for it, since walking the table costs. */
void sp_dyn_count(struct sp_dyn *d);
/* Name of dynamic symbol i ("" when out of range). */
const char *sp_dyn_name(const struct sp_dyn *d, uint32_t i);
/* SP_MODULE_SQLITE, SP_MODULE_SQLITE_MIXED or 0 (sp_wire.h). */
int sp_dyn_sqlite_kind(const struct dl_phdr_info *info);

/* ---- SQLite compiled into the program (embed.c) ---- */
/* The constructor: the program and its libraries; the number of objects
 * with SQLite compiled in (their flags go out with the module map). */
int sp_embed_init(void);
void sp_embed_rescan(void); /* objects loaded since (module map changes) */
/* At exit: objects loaded since and never looked at, flagged (not hooked);
 * the number found. */
int sp_embed_exit_scan(void);
void sp_embed_fork_child(void);
/* SP_MODULE_EMBED* (and SQLITE_MIXED) of the object at load bias base. */
unsigned sp_embed_module_flags(uintptr_t base);

#endif /* SP_PRELOAD_H */
