/* SPDX-License-Identifier: MIT */
/*
 * hot.c - the per-execution path: the sqlite3_step, sqlite3_reset and
 * sqlite3_finalize interposers, with everything an ordinary execution
 * does inline. What is rare (a thread to set up, a statement not looked
 * up last, a first execution, nesting, a sampled, slow or failing
 * execution) is a call into exec.c, stmt.c or stats.c.
 *
 * An execution of `SELECT ...` read to the end, then reset:
 *
 *   sqlite3_step #1   dispatch: the statement sqlite3_step may run inline
 *                     (fast_stmt: none unless the thread's state allows
 *                     it, and inside another execution's call)? one key
 *                     compare
 *                     no execution in progress -> start it: its record
 *                       is this thread's, for this caller (one compare
 *                       of agg_tag); sampling countdown (1 in 1/rate:
 *                       exec.c walks the stack instead); started++;
 *                       clock: start, db, rows, slow_at
 *                     cur = this run; real step; clock; cur = none
 *                     db += t1 - t0; ROW: rows++, slow? (exec.c)
 *   sqlite3_step #2   the same, DONE: the end, inline: the query record
 *                       (stats.c) += count, db, wall, rows, min, max,
 *                       histogram bucket; N+1 loop goes on (loop_until);
 *                       start, db = 0; SQLite's counters now stored in
 *                       the record's segment, which the statement owns
 *   sqlite3_reset     nothing in progress: straight to the original
 *
 * No lock, malloc, stdio, system call or record: the totals live in the
 * thread's arena of the shared statistics (stats.c), which the collector
 * reads itself whenever it likes. Records (SQL texts, stacks, sampled
 * executions, errors) are written by exec.c only.
 *
 * Each shim returns exactly what the original returned and leaves errno
 * as the original left it.
 */
#include <emmintrin.h>
#include <errno.h>
#include <stddef.h>

#include "sp_preload.h"

/* A slot's key as one plain load: on x86-64 an aligned load is atomic and
 * has acquire order already, and the compiler may fold it into the
 * compare (an _Atomic load it keeps apart). */
SP_INLINE uintptr_t stmt_key(const struct sp_stmt *s)
{
	return *(const uintptr_t *)(const void *)&s->key;
}

/* sp_tls through %fs, its offset loaded afresh (one load): sqlite3_step
 * keeps its loop, not the thread, across the real call. ThreadSanitizer
 * would take the offset for an address (its shadow of it faults): there,
 * the plain thread pointer. */
#if defined(__SANITIZE_THREAD__)
SP_INLINE struct sp_thread *tls_fs(void)
{
	return &sp_tls;
}
#else
SP_INLINE __seg_fs struct sp_thread *tls_fs(void)
{
	uintptr_t off;

	__asm__("movq sp_tls@gottpoff(%%rip), %0" : "=r"(off));
	return (__seg_fs struct sp_thread *)off;
}
#endif

/* The slow end: anything but a plain execution whose histogram bucket
 * exists and whose N+1 loop goes on, or a drawn one that ended as a plain
 * one would (end_drawn). Returns rc. */
static __attribute__((noinline)) int end_general(struct sp_thread *t, struct sp_exec *r, int rc,
						 uint64_t end, int abandoned)
{
	struct sp_stmt *s = (struct sp_stmt *)r; /* run comes first */
	sqlite3_stmt *st = (sqlite3_stmt *)atomic_load_explicit(&s->key, memory_order_relaxed);

	sp_exec_clamp(r, &end);
	/* a drawn execution's plain end never comes here: end_drawn took it */
	if (r->flags == 0 && (abandoned || rc == SQLITE_DONE) && end < r->slow_at &&
	    s->agg_arena == t->arena_id && s->agg) {
		/* plain, but a first value in its histogram block, a run that
		 * switches, or SQLite's counters through the API */
		struct sp_agg_query *q = s->agg;
		uint64_t start = r->start;

		sp_v4u now;
		int owned;
		sp_v4u d = sp_exec_delta(q, s, r, st, &now, &owned);

		sp_agg_add(q, r, end, d, owned ? &now : NULL);
		r->start = 0;
		r->db = 0;
		sp_loop_note(t, q, s->shape, start, end);
		return rc;
	}
	if (abandoned)
		r->flags |= SP_EXEC_ABANDONED;
	sp_exec_end_slow(t, s, st, abandoned ? SQLITE_ROW : rc, end);
	return rc;
}

/* Every end end_plain does not take: a drawn execution's (flags RANDOM,
 * perhaps SAMPLED, nothing else) goes to the sampled end straight away,
 * without end_general's frame; anything else to end_general. */
static __attribute__((noinline)) int end_drawn(struct sp_thread *t, struct sp_exec *r, int rc,
					       uint64_t end, int abandoned)
{
	struct sp_stmt *s = (struct sp_stmt *)r; /* run comes first */

	sp_exec_clamp(r, &end);
	if ((r->flags & ~(SP_EXEC_RANDOM | SP_EXEC_SAMPLED)) == 0 && (r->flags & SP_EXEC_RANDOM) &&
	    (abandoned || rc == SQLITE_DONE) && end < r->slow_at && s->agg_arena == t->arena_id &&
	    s->agg) {
		return sp_exec_end_sampled(s, rc, end); /* our arguments: a bare jump */
	}
	return end_general(t, r, rc, end, abandoned);
}

/* end_plain's cases that call: a fold, a switch sp_loop_switch takes
 * whole. A function of its own so that end_plain saves no register. */
static __attribute__((noinline)) int end_plain_slow(struct sp_agg_query *q, const struct sp_stmt *s,
						    uint64_t start, uint64_t end, int rc,
						    int fold_switched)
{
	struct sp_thread *t = &sp_tls;

	if (fold_switched & 1)
		sp_seg_fold(q);
	if (!(fold_switched & 2))
		return rc;
	sp_loop_switch(t, q, s->shape, start);
	if (t->loop_q == q) /* not when q could not open a loop */
		q->loop_until = end + sp_cfg.loop_gap;
	return rc;
}

/* The rest of end_plain's end when the thread's N+1 loop does not go on
 * with q (switched: another statement ran last, the usual case of
 * statements in turn), inline at end_plain's end (nothing is kept across
 * it). The common switch - a run of one execution of another shape closes, one
 * of q opens - is sp_loop_switch's by hand, without its call. */
SP_INLINE int end_plain_switch(struct sp_agg_query *q, const struct sp_stmt *s, uint64_t start,
			       uint64_t end, int rc)
{
	/* the TLS offset loaded here, not kept from the step's start in a
	 * register that sqlite3_step would then save */
	__typeof__(tls_fs()) t = tls_fs();
	struct sp_agg_query *old;
	struct sp_arena *a;

	/* a is set: q is bound to this thread's arena. sp_no_loop's
	 * loop_until and loop_open are 0, and a switch to q itself (a pause)
	 * has q's shape: neither passes the tests below */
	old = t->loop_q;
	a = t->arena;
	if (likely(a->loop_shape == s->shape && start < old->loop_until)) {
		/* sp_loop_switch: the same shape in time, the loop goes on,
		 * moved to q (there first: a reader never misses it) */
		q->loop_open = old->loop_open + 1;
		old->loop_open = 0;
		old->loop_until = 0;
		t->loop_q = q;
		q->loop_until = end + sp_cfg.loop_gap;
		return rc;
	}
	if (likely(old->loop_open == 1 && a->loop_shape != s->shape)) {
		/* sp_loop_switch: loop_credit(old, 1) - max_run 1 the collector
		 * knows from runs - then q opens a loop */
		old->runs++;
		q->loop_open = 1; /* there first: a reader never misses it */
		old->loop_open = 0;
		old->loop_until = 0;
		a->loop_shape = s->shape;
		t->loop_pauses = 0;
		t->loop_q = q;
		q->loop_until = end + sp_cfg.loop_gap;
		return rc;
	}
	return end_plain_slow(q, s, start, end, rc, 2);
}

/*
 * End of a plain execution: DONE (abandoned 0) or reset/finalize before
 * it (abandoned 1; a constant in each copy). It is added to its query
 * record with nothing but loads and stores (sp_agg_add's arithmetic, by
 * hand: no call, so no register to save). Anything else goes to
 * end_drawn (a drawn execution's end) or end_general: flags (nested, sampled, first, failed, slow-noted, counters
 * through the API), the slow threshold, a clock that went back, or a
 * first value in its histogram block. The thread's N+1 loop going on is
 * two stores; switching to q (statements in turn) is end_plain_switch's.
 * The record is this thread's: sqlite3_step runs inline only a statement
 * bound to it (agg_tag, fast_stmt), and the other callers test it; a flag
 * is set for an execution with none (NOREC), tested before anything is
 * read through agg.
 */
SP_INLINE int end_plain(struct sp_thread *t, struct sp_exec *r, int rc, uint64_t end,
			const int abandoned)
{
	struct sp_stmt *s = (struct sp_stmt *)r;
	struct sp_agg_query *q = s->agg;
	uint64_t db = r->db, blk, start = r->start;
	uint32_t i;
	int switched, fold;
	__m128i now;

	/* db above the wall time, or a wall time below 0: the clock went
	 * back (sp_exec_clamp) */
	if (unlikely(r->flags != 0 || end >= r->slow_at || db > end - start ||
		     (int64_t)(end - start) < 0))
		return end_drawn(t, r, rc, end, abandoned);
	i = sp_hist_index(db);
	blk = q->hist[i / SP_HIST_PER_BLOCK];
	if (unlikely(!blk))
		return end_general(t, r, rc, end, abandoned);
	/* SQLite's counters: the statement owns its record's segment (it
	 * took it when bound: agg_tag), so its counters now are all there
	 * is to store */
	now = _mm_loadu_si128((const __m128i *)s->counters); /* set: it owns the segment */
	sp_agg_add_in(q, r, end,
		      &((struct sp_agg_hist *)(uintptr_t)blk)->bucket[i % SP_HIST_PER_BLOCK]);
	/* loop_until is 0 but in the open loop's record */
	switched = start >= q->loop_until;
	if (likely(!switched)) {
		q->loop_open++;
		q->loop_until = end + sp_cfg.loop_gap;
	}
	/* start and db: 0 between executions, one store */
	_mm_store_si128((__m128i *)(void *)&r->start, _mm_setzero_si128());
	fold = sp_seg_store(q, now) != 0;
	if (unlikely(fold)) /* rare */
		return end_plain_slow(q, s, start, end, rc, 1 | switched << 1);
	if (unlikely(switched))
		return end_plain_switch(q, s, start, end, rc);
	return rc;
}

static __attribute__((noinline)) int end_done(struct sp_thread *t, struct sp_exec *r, uint64_t end)
{
	return end_plain(t, r, SQLITE_DONE, end, 0);
}

static __attribute__((noinline)) void end_abandoned(struct sp_thread *t, struct sp_exec *r,
						    uint64_t end)
{
	end_plain(t, r, SQLITE_ROW, end, 1);
}

/* SQLITE_DONE or an error ends the execution. */
SP_INLINE int end_exec(struct sp_thread *t, struct sp_exec *r, int rc, uint64_t end)
{
	if (likely(rc == SQLITE_DONE))
		return end_done(t, r, end);
	return end_general(t, r, rc, end, 0);
}

static int step_cold(sqlite3_stmt *st);

static int row_slow(struct sp_thread *t, struct sp_exec *r, uint64_t now);

/* After the real sqlite3_step of a fast or sampled step returned rc at
 * t1: the call is over (t->cur), its time added; a row, or the end. */
SP_INLINE int step_after(struct sp_thread *t, struct sp_exec *r, int rc, uint64_t t1)
{
	t->cur = NULL;
	r->db += t1;
	if (likely(rc == SQLITE_ROW)) {
		r->rows++;
		if (unlikely(t1 >= r->slow_at))
			return row_slow(t, r, t1);
		return rc;
	}
	/* SQLITE_DONE or an error ends the execution. The statement may be
	 * stepped again without a reset (auto-reset); that starts a new one.
	 * The slow end keeps errno: its rare syscalls save and restore it. */
	return end_exec(t, r, rc, t1);
}

/* A row came back after the slow threshold: take the stack while the
 * caller is still on it. */
static __attribute__((noinline)) int row_slow(struct sp_thread *t, struct sp_exec *r, uint64_t now)
{
	sp_exec_on_row(t, (struct sp_stmt *)r, now);
	return SQLITE_ROW;
}

/*
 * A step of a tracked statement, for everything but sqlite3_step's own
 * case: a statement we never saw prepared or not looked up last, a thread
 * to set up, the monotonic clock, an execution starting nested or drawn
 * for a stack (drawn: the countdown already hit). Reached from
 * sqlite3_step by a tail call, so its frame address is the one an exec
 * call's is compared with (exec.c, close_vanished).
 */
static __attribute__((noinline)) int step_general(sqlite3_stmt *st, int drawn)
{
	struct sp_thread *t = &sp_tls;
	uintptr_t frame = (uintptr_t)__builtin_frame_address(0);
	struct sp_stmt *s;
	struct sp_exec *r, *outer;
	uint64_t t0, t1;
	int rc;

	if (unlikely(!st))
		return step_cold(st);
	sp_thread_ready(t);
	s = sp_stmt_lookup(t, st);
	if (unlikely(!s)) {
		/* not ours: perhaps another SQLite's (reached by jumps only, so
		 * the return address is the caller's) */
		const struct sp_lib *L = SP_FOREIGN_STMT(st, __builtin_return_address(0));

		if (unlikely(L))
			return L->fn.step ? L->fn.step(st) : MISSING;
		s = sp_stmt_adopt(t, st);
		if (!s)
			return sp_real.step(st);
	}
	r = &s->exec;
	t0 = sp_now();
	if (!r->start)
		t0 = sp_exec_begin_slow(t, s, st, drawn, (uintptr_t)__builtin_return_address(0),
					frame);
	outer = t->cur;
	/* sqlite3_step may run the next steps of st inline (sp_fast_off),
	 * when its record is this thread's (the inline end reads through agg
	 * without a test of whose it is) and it is in no other call: while
	 * t->cur is set, fast_stmt is none or the statement in its own call,
	 * so sqlite3_step need not test t->cur */
	if (t->state == SP_TS_FAST && s->agg_arena == t->arena_id && !outer) {
		t->last_stmt = s;
		t->fast_stmt = s;
	}
	r->db -= t0;
	t->cur = r;
	rc = sp_real.step(st);
	t1 = sp_now();
	t->cur = outer;
	r->db += t1;
	if (likely(rc == SQLITE_ROW)) {
		r->rows++;
		if (unlikely(t1 >= r->slow_at))
			sp_exec_on_row(t, s, t1);
		return rc;
	}
	/* an execution whose record is not this thread's (another thread's,
	 * the parent's before fork, none) ends in exec.c */
	if (unlikely(s->agg_arena != t->arena_id))
		return end_general(t, r, rc, t1, 0);
	return end_exec(t, r, rc, t1);
}

/* A drawn execution starts at t0 (read after its stack was taken: the
 * walk's time is not the execution's) with stack h (0: none), the next
 * gap drawn: the rest of sqlite3_step's start, and the step. Only r is
 * kept across the real call, and nothing is called before it.
 * sqlite3_step's checks held for st's slot, fast_stmt, when the countdown
 * hit; a signal handler that stepped another statement since (during the
 * walk) made that one fast_stmt, or left st's execution started: then
 * step_general starts st's (taking the stack again; before, the handler's
 * slot got st's execution, issue 23 item 7). */
static __attribute__((noinline)) int step_drawn(sqlite3_stmt *st, uint64_t h, uint64_t t0)
{
	struct sp_thread *t = &sp_tls;
	struct sp_stmt *s = t->fast_stmt;
	struct sp_exec *r = &s->exec;
	uint64_t t1;
	int rc;

	if (unlikely(stmt_key(s) != (uintptr_t)st || r->start))
		return step_general(st, 1);
	s->agg->started++; /* sqlite3_step's checks hold: bound here */
	r->stack_id = h;
	r->flags = h ? SP_EXEC_RANDOM | SP_EXEC_SAMPLED : SP_EXEC_RANDOM;
	/* no counters read: the statement owns its record's segment (agg_tag
	 * matched), whose last end is this start's; one that gives it up
	 * mid-way gets its base then (sp_seg_take) */
	r->rows = 0;
	r->start = t0;
	r->db = -t0;
	r->slow_at = t0 + sp_cfg.slow_span;
	t->cur = r;
	rc = sp_real.step(st);
	t1 = sp_rdtsc();
	/* r stays in the register the alignment push saves anyway */
	return step_after(&sp_tls, r, rc, t1);
}

/* The next gap to draw, then step_drawn (the draw's time is not the
 * execution's either). */
static __attribute__((noinline)) int step_walk(sqlite3_stmt *st, uint64_t h)
{
	struct sp_thread *t = &sp_tls;

	t->skip = sp_cfg.rate_one ? 1 : sp_draw_gap(t);
	return step_drawn(st, h, sp_rdtsc());
}

/* step_sampled's walk. Reached by a jump from step_sampled, itself
 * reached by a jump from sqlite3_step: this frame's return address is
 * the program's, as step_sampled's was. */
static __attribute__((noinline)) int step_walked(sqlite3_stmt *st)
{
	const uintptr_t *fp = __builtin_frame_address(0);

	if (unlikely(!sp_same_process())) {
		/* a raw clone child: its own process from now on */
		sp_raw_clone_child();
		return step_general(st, -1);
	}
	return step_walk(st, sp_stack_walk(&sp_tls, (uintptr_t)(fp + 2), fp[0], fp[1], 1));
}

/*
 * The countdown hit at the start of an execution that sqlite3_step could
 * otherwise start inline (its checks hold): take the stack, then
 * step_drawn. sqlite3_step jumps here, so this frame's return address is
 * the program's: a walk starts at its caller's frame (fp + 2, fp[0],
 * fp[1]), and most drawn executions only check, here, that the stack is
 * this thread's last one (sp_memo_same) and that the stream's tick is not
 * due (the TSC clock: SP_TS_FAST). Every call is a jump, so this saves no
 * register; anything else is step_walked's. (Were a call not a jump, as
 * without optimization, the frames of ours it added would be skipped like
 * any of ours at the leaf: the stacks stay right, the memo would only
 * never tell here.)
 */
static __attribute__((noinline)) int step_sampled(sqlite3_stmt *st)
{
	const uintptr_t *fp = __builtin_frame_address(0); /* a frame pointer */
	struct sp_thread *t = &sp_tls;
	struct sp_walk_memo *m = SP_MEMO(t); /* a page of its own: one load */
	uint64_t now;

	if (likely(sp_same_process()) &&
	    likely(atomic_load_explicit(&sp_py_state, memory_order_relaxed) == SP_PY_STATE_OFF) &&
	    likely(sp_memo_same(m, (uintptr_t)(fp + 2), fp[0], fp[1])) &&
	    /* the tick is due before the test: a new collector has no stack */
	    likely((now = sp_rdtsc()) <
		   atomic_load_explicit(&sp_stream_tick_at, memory_order_relaxed)) &&
	    likely(m->id == t->last_stack)) {
		if (likely(sp_cfg.rate_one)) {
			t->skip = 1;
			return step_drawn(st, m->id, now); /* now: the start */
		}
		return step_walk(st, m->id);
	}
	return step_walked(st);
}

/* Not resolved yet, profiling off, inside the profiler, a NULL statement,
 * or step_general's cases. Small, without a frame of its own: a program
 * that preloads the library without a collector pays a few instructions
 * a call. */
static __attribute__((noinline)) int step_cold(sqlite3_stmt *st)
{
	struct sp_thread *t = &sp_tls;

	const struct sp_lib *L;

	NEED();
	/* sqlite3_step jumps here: the return address is its caller's */
	if (unlikely((L = SP_FOREIGN_STMT(st, __builtin_return_address(0))) != NULL))
		return L->fn.step ? L->fn.step(st) : MISSING;
	if (unlikely(!sp_real.step))
		return MISSING;
	if (!sp_hot || !st)
		return sp_real.step(st);
	if (sp_guarded(t))
		return sp_step_guarded(t, st); /* ours, or a signal handler's */
	return step_general(st, -1);
}

/* sqlite3_step itself, reached without the PLT (an alias, below) */
int sp_step_self(sqlite3_stmt *st) __attribute__((visibility("hidden")));

/*
 * The common case inline, for statement s (st's slot, fast_stmt): a
 * set-up thread on the TSC clock, in no other execution's call. An
 * execution starts here when the statement's query record is this
 * thread's and the countdown does not pick it for a stack. Inlined in
 * sqlite3_step, reached with the program's return address (the caller
 * agg_tag is tested against); everything else is a jump.
 */
SP_INLINE uint64_t step_clock(const int tsc)
{
	return tsc ? sp_rdtsc() : sp_mono_inline();
}

static int step_mono_drawn(sqlite3_stmt *st);

SP_INLINE int step_fast_clock(struct sp_thread *t, struct sp_stmt *s, sqlite3_stmt *st,
			      const int tsc)
{
	struct sp_exec *r = &s->exec;
	uint64_t t0, t1;
	int rc;

	if (!r->start) {
		/* the record is this thread's, for this caller: one test of
		 * both (agg_tag); a thread without an arena has tag 0, and a
		 * return address alone never equals a tag's bits 48-63 */
		if (unlikely(((uintptr_t)__builtin_return_address(0) ^ t->arena_tag) != s->agg_tag))
			return step_general(st, -1);
		if (unlikely(--t->skip == 0))
			return tsc ? step_sampled(st) : step_mono_drawn(st);
		s->agg->started++; /* bound to this thread's record: not NULL */
		t0 = step_clock(tsc);
		r->start = t0;
		r->db -= t0; /* 0 between executions */
		r->rows = 0;
		r->slow_at = t0 + sp_cfg.slow_span;
		/* no counters read: the statement owns its record's segment,
		 * whose last end is this start's (sp_seg_end) */
	} else {
		t0 = step_clock(tsc);
		r->db -= t0;
	}
	t->cur = r; /* was NULL */
	rc = sp_real.step(st);
	t1 = step_clock(tsc);
	/* r stays in the register the alignment push saves anyway; the
	 * thread's TLS offset is loaded again */
	tls_fs()->cur = NULL;
	r->db += t1;
	/* the end reads db again: kept out of a register, the row's add is
	 * one instruction */
	__asm__ volatile("" ::: "memory");
	if (likely(rc == SQLITE_ROW)) {
		r->rows++;
		if (unlikely(t1 >= r->slow_at))
			return row_slow(&sp_tls, r, t1);
		return rc;
	}
	/* the plain end inline: no call, no arguments to move */
	if (likely(rc == SQLITE_DONE))
		return end_plain(&sp_tls, r, SQLITE_DONE, t1, 0);
	return end_general(&sp_tls, r, rc, t1, 0);
}

SP_INLINE int step_fast(struct sp_thread *t, struct sp_stmt *s, sqlite3_stmt *st)
{
	return step_fast_clock(t, s, st, 1);
}

/* st's slot from the index, put in the thread's cache entry c (its own
 * page only: sp_more_none stays unwritten); NULL when st is not tracked. */
SP_INLINE struct sp_stmt *stmt_cache_fill(struct sp_thread *t, sqlite3_stmt *st, uintptr_t *c)
{
	struct sp_stmt *s = sp_stmt_find_hot(st);

	if (s && t->more != &sp_more_none)
		sp_stmt_cache_put(c, s);
	return s;
}

/* The countdown hit on the monotonic clock: the next gap, and
 * step_general takes the stack (the draw made). */
static __attribute__((noinline)) int step_mono_drawn(sqlite3_stmt *st)
{
	struct sp_thread *t = &sp_tls;

	t->skip = sp_cfg.rate_one ? 1 : sp_draw_gap(t);
	return step_general(st, 1);
}

/*
 * The inline path on the monotonic clock (SP_TS_FAST_MONO: the TSC not
 * invariant, or SQLPROF_CLOCK=monotonic): the statement this thread
 * looked up last or the one its statement cache finds, bound to its
 * arena, runs inline as on the TSC (step_fast_clock), reading
 * CLOCK_MONOTONIC through the vDSO; anything else is step_general's.
 * fast_stmt stays sp_stmt_none in this state, so every step comes here
 * from sqlite3_step by a jump (the return address stays the program's).
 */
static __attribute__((noinline)) int step_mono(sqlite3_stmt *st)
{
	struct sp_thread *t = &sp_tls;
	struct sp_stmt *s = t->last_stmt;

	if (unlikely(stmt_key(s) != (uintptr_t)st)) {
		uintptr_t *c = &t->more->stmt_cache[sp_stmt_cache_slot(st)];

		s = sp_stmt_cache_get(c);
		if (unlikely(stmt_key(s) != (uintptr_t)st)) {
			s = stmt_cache_fill(t, st, c);
			if (unlikely(!s))
				return step_general(st, -1);
		}
		t->last_stmt = s;
	}
	if (unlikely(s->agg_arena != t->arena_id))
		return step_general(st, -1);
	return step_fast_clock(t, s, st, 0);
}

/* sqlite3_step's statement is not in the thread's cache (entry *c): the
 * index, the entry (in the thread's own page only), and sqlite3_step
 * again. */
static __attribute__((noinline)) int step_switch_miss(sqlite3_stmt *st, uintptr_t *c)
{
	struct sp_thread *t = &sp_tls;
	struct sp_stmt *s = stmt_cache_fill(t, st, c);

	if (unlikely(!s || s->agg_arena != t->arena_id))
		return step_cold(st);
	t->last_stmt = s;
	t->fast_stmt = s;
	return sp_step_self(st);
}

/*
 * sqlite3_step: the statement this thread stepped last (fast_stmt), or
 * else - when the thread may run any statement inline (SP_TS_FAST, in no
 * execution's call) and st's slot is bound to this thread's arena - the
 * one the thread's statement cache finds (a load and a compare), which
 * becomes fast_stmt (and last_stmt, for sqlite3_reset): a program that
 * steps several statements in turn (every ORM) runs each inline, not
 * through step_general (issue 25: two statements in turn +470
 * instructions per execution, 1,000 +725). A statement not in the cache
 * is looked up once in the index (step_switch_miss).
 */
SP_EXPORT int sqlite3_step(sqlite3_stmt *st)
{
	struct sp_thread *t = &sp_tls;
	struct sp_stmt *s;

	/* fast_stmt is sp_stmt_none unless the state is SP_TS_FAST, and NULL
	 * never matches: no statement's key is 0 (sp_stmt_none's is 1). In
	 * another execution's call (t->cur) it is none, or that execution's
	 * own statement (a program that steps a statement inside its own
	 * step: r stays in a register, nothing is lost but its time) */
	s = t->fast_stmt;
	if (unlikely(stmt_key(s) != (uintptr_t)st)) {
		uintptr_t *c;

		if (unlikely(t->state != SP_TS_FAST || t->cur)) {
			if (t->state == SP_TS_FAST_MONO && !t->cur)
				return step_mono(st);
			return step_cold(st);
		}
		c = &t->more->stmt_cache[sp_stmt_cache_slot(st)];
		s = sp_stmt_cache_get(c);
		if (unlikely(stmt_key(s) != (uintptr_t)st || s->agg_arena != t->arena_id))
			return step_switch_miss(st, c);
		t->last_stmt = s;
		t->fast_stmt = s;
	}
	return step_fast(t, s, st);
}

extern __typeof__(sqlite3_step) sp_step_self __attribute__((alias("sqlite3_step")));

/* reset and finalize end an execution still in progress (rows not all
 * consumed). sqlite3_step resets the statement itself when it re-prepares
 * an expired one (a schema change, a LIKE pattern rebound): that reset,
 * inside this statement's own step (t->cur), is not the end. */
static __attribute__((noinline)) void abandon(struct sp_thread *t, struct sp_stmt *s)
{
	if (unlikely(s->agg_arena != t->arena_id)) /* see step_general */
		end_general(t, &s->exec, SQLITE_ROW, sp_now(), 1);
	else
		end_abandoned(t, &s->exec, sp_now());
}

/* Any reset but sqlite3_reset's own case: a NULL statement, one not
 * looked up last, an execution in progress, a thread to set up. */
static __attribute__((noinline)) int reset_general(sqlite3_stmt *st)
{
	struct sp_thread *t = &sp_tls;

	const struct sp_lib *L;

	NEED();
	/* sqlite3_reset jumps here: the return address is its caller's */
	if (unlikely((L = SP_FOREIGN_STMT(st, __builtin_return_address(0))) != NULL))
		return L->fn.reset ? L->fn.reset(st) : MISSING;
	if (unlikely(!sp_real.reset))
		return MISSING;
	if (sp_hot && !sp_guarded(t) && st) {
		struct sp_stmt *s;

		sp_thread_ready(t);
		s = sp_stmt_lookup(t, st);
		/* the common reset follows SQLITE_DONE: nothing in progress */
		if (s && s->exec.start && t->cur != &s->exec)
			abandon(t, s);
	}
	return sp_real.reset(st);
}

/* The common case: the statement this thread stepped last, its execution
 * ended at SQLITE_DONE. NULL never matches a key (see sqlite3_step). */
SP_EXPORT int sqlite3_reset(sqlite3_stmt *st)
{
	struct sp_thread *t = &sp_tls;
	struct sp_stmt *s = t->last_stmt;

	/* No test of the state: last_stmt is never NULL (sp_stmt_none until
	 * a lookup), a key matches only a statement a set-up thread looked
	 * up (so the originals are resolved), and whatever the state (the
	 * profiler's own call, profiling off), a reset of a statement with
	 * nothing in progress is the original's alone. */
	if (likely(stmt_key(s) == (uintptr_t)st && !s->exec.start))
		return sp_real.reset(st);
	return reset_general(st);
}

SP_EXPORT int sqlite3_finalize(sqlite3_stmt *st)
{
	struct sp_thread *t = &sp_tls;

	const struct sp_lib *L;

	NEED();
	if (unlikely((L = SP_FOREIGN_STMT(st, __builtin_return_address(0))) != NULL))
		return L->fn.finalize ? L->fn.finalize(st) : MISSING;
	if (unlikely(!sp_real.finalize))
		return MISSING;
	if (st && sp_hot && !sp_guarded(t)) {
		int saved = errno;
		struct sp_stmt *s;

		sp_thread_ready(t);
		s = sp_stmt_find_hot(st);
		if (s && s->exec.start && t->cur != &s->exec)
			abandon(t, s);
		if (s)
			sp_stmt_forget(st);
		errno = saved;
	}
	return sp_real.finalize(st);
}
