/* SPDX-License-Identifier: MIT */
/*
 * hot.c - the per-execution path: the sqlite3_step, sqlite3_reset and
 * sqlite3_finalize interposers, with everything an ordinary execution
 * does inline. What is rare (a thread to set up, a statement not looked
 * up last, a first execution, nesting, a sampled, slow or failing
 * execution) is a call into run.c, stmt.c or stats.c.
 *
 * An execution of `SELECT ...` read to the end, then reset:
 *
 *   sqlite3_step #1   dispatch: one test of the thread's state word
 *                     statement: this thread's last one? (key compare)
 *                     clock; no execution in progress -> start it:
 *                       start, db, rows, slow_at, SQLite's counters;
 *                       sampling countdown (1 in 1/rate: run.c walks the
 *                       stack instead)
 *                     cur = this run; real step; clock; cur = outer
 *                     db += t1 - t0; ROW: rows++, slow? (run.c)
 *   sqlite3_step #2   the same, DONE: the end, inline:
 *                       counters now - at start; the thread's query
 *                       record (stats.c) += count, db, wall, rows, min,
 *                       max, counters, histogram bucket; N+1 run goes on
 *   sqlite3_reset     nothing in progress: straight to the original
 *
 * No lock, malloc, stdio, system call or record: the totals live in the
 * thread's arena of the shared statistics (stats.c), which the collector
 * reads itself whenever it likes. Records (SQL texts, stacks, sampled
 * executions, errors) are written by run.c only.
 *
 * Each shim returns exactly what the original returned and leaves errno
 * as the original left it.
 */
#include <errno.h>
#include <stddef.h>

#include "sp_preload.h"

#define NEED()                                                                \
	do {                                                                  \
		if (unlikely(!atomic_load_explicit(&sp_resolved,              \
						   memory_order_acquire)))    \
			sp_resolve();                                         \
	} while (0)

/* Never jump to NULL: a program calling sqlite3_* without libsqlite3. */
#define MISSING SQLITE_MISUSE

/* &sp_tls, computed afresh: after the real call nothing of ours is kept
 * in a register, so sqlite3_step saves none (the compiler would keep the
 * thread pointer in a callee-saved one, for twelve pushes and pops a
 * call). */
SP_INLINE struct sp_thread *tls_fresh(void)
{
	struct sp_thread *t;

	__asm__ volatile("movq %%fs:0, %0\n\taddq sp_tls@gottpoff(%%rip), %0" : "=r"(t));
	return t;
}

/* End of an execution at a step that returned rc (SQLITE_DONE or an
 * error), or at reset/finalize (abandoned). A plain one is added to the
 * query record here; anything else goes to run.c. Returns rc. */
static __attribute__((noinline)) int end_exec(struct sp_thread *t, struct sp_run *r, int rc,
					      uint64_t end, int abandoned)
{
	struct sp_stmt *s = (struct sp_stmt *)((char *)r - offsetof(struct sp_stmt, run));
	sqlite3_stmt *st = (sqlite3_stmt *)atomic_load_explicit(&s->key, memory_order_relaxed);

	/* flags == 0: not nested, sampled, first, failed or slow-noted */
	if (likely(r->flags == 0 && (abandoned || rc == SQLITE_DONE) && end < r->slow_at &&
		   s->agg_arena == t->arena_id)) {
		struct sp_agg_query *q = s->agg;

		sp_agg_add(q, r, end, sp_status_delta(r, st));
		r->start = 0;
		sp_run_note(t, q, s->shape);
		return rc;
	}
	if (abandoned)
		r->flags |= SP_EXEC_ABANDONED;
	sp_run_end_slow(t, s, st, abandoned ? SQLITE_ROW : rc, end);
	return rc;
}

/* A row came back after the slow threshold: take the stack while the
 * caller is still on it. */
static __attribute__((noinline)) int row_slow(struct sp_thread *t, struct sp_run *r, uint64_t now)
{
	sp_run_on_row(t, (struct sp_stmt *)((char *)r - offsetof(struct sp_stmt, run)), now);
	return SQLITE_ROW;
}

/*
 * A step of a tracked statement, for everything but sqlite3_step's own
 * case: a statement we never saw prepared or not looked up last, a thread
 * to set up, the monotonic clock, an execution starting nested or drawn
 * for a stack (drawn: the countdown already hit). Reached from
 * sqlite3_step by a tail call, so its frame address is the one an exec
 * call's is compared with (run.c, close_vanished).
 */
static __attribute__((noinline)) int step_general(sqlite3_stmt *st, int drawn)
{
	struct sp_thread *t = &sp_tls;
	uintptr_t frame = (uintptr_t)__builtin_frame_address(0);
	struct sp_stmt *s;
	struct sp_run *r, *outer;
	uint64_t t0, t1;
	int rc;

	sp_thread_ready(t);
	s = sp_stmt_lookup(t, st);
	if (unlikely(!s)) {
		s = sp_stmt_adopt(t, st);
		if (!s)
			return sp_real.step(st);
	}
	r = &s->run;
	t0 = sp_now();
	if (!r->start)
		t0 = sp_run_begin_slow(t, s, st, drawn, frame);
	r->db -= t0;
	outer = t->cur;
	t->cur = r;
	rc = sp_real.step(st);
	t1 = sp_now();
	t->cur = outer;
	r->db += t1;
	if (likely(rc == SQLITE_ROW)) {
		r->rows++;
		if (unlikely(t1 >= r->slow_at))
			sp_run_on_row(t, s, t1);
		return rc;
	}
	return end_exec(t, r, rc, t1, 0);
}

/* The countdown hit: draw the next gap, and take the stack. */
static __attribute__((noinline)) int step_drawn(sqlite3_stmt *st)
{
	struct sp_thread *t = &sp_tls;

	t->skip = sp_cfg.rate_one ? 1 : sp_draw_gap(t);
	return step_general(st, 1);
}

/* Not resolved yet, profiling off, inside the profiler, a NULL statement,
 * or step_general's cases. Small, without a frame of its own: a program
 * that preloads the library without a collector pays a few instructions
 * a call. */
static __attribute__((noinline)) int step_cold(sqlite3_stmt *st)
{
	struct sp_thread *t = &sp_tls;

	NEED();
	if (unlikely(!sp_real.step))
		return MISSING;
	if (!sp_hot || sp_guarded(t) || !st)
		return sp_real.step(st);
	return step_general(st, -1);
}

/*
 * The common case inline: a set-up thread on the TSC clock stepping the
 * statement it looked up last. An execution starts here when the thread
 * is in no other execution's call, the statement's query record is this
 * thread's and the countdown does not pick it for a stack.
 */
SP_EXPORT int sqlite3_step(sqlite3_stmt *st)
{
	struct sp_thread *t = &sp_tls;
	struct sp_stmt *s;
	struct sp_run *r;
	uint64_t t0, t1;
	int rc;

	if (unlikely(t->state != SP_TS_FAST || !st))
		return step_cold(st);
	s = t->last_stmt;
	if (unlikely(atomic_load_explicit(&s->key, memory_order_acquire) != (uintptr_t)st))
		return step_general(st, -1);
	r = &s->run;
	if (!r->start) {
		int off = atomic_load_explicit(&sp_status_off, memory_order_relaxed);
		sp_v4u base;

		if (unlikely(t->cur != NULL || s->agg_arena != t->arena_id || off < 0))
			return step_general(st, -1);
		if (unlikely(--t->skip == 0))
			return step_drawn(st);
		t0 = sp_rdtsc();
		r->start = t0;
		r->db = -t0;
		r->rows = 0;
		r->slow_at = t0 + sp_cfg.slow_span;
		__builtin_memcpy(&base, (const char *)st + off + 4 * SQLITE_STMTSTATUS_FULLSCAN_STEP,
				 sizeof(base));
		__builtin_memcpy(r->base, &base, sizeof(base));
	} else {
		t0 = sp_rdtsc();
		r->db -= t0;
	}
	r->outer = t->cur;
	t->cur = r;
	rc = sp_real.step(st);
	t1 = sp_rdtsc();
	t = tls_fresh();
	r = t->cur;
	t->cur = r->outer;
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
	return end_exec(t, r, rc, t1, 0);
}

/* reset and finalize end an execution still in progress (rows not all
 * consumed). sqlite3_step resets the statement itself when it re-prepares
 * an expired one (a schema change, a LIKE pattern rebound): that reset,
 * inside this statement's own step (t->cur), is not the end. */
static __attribute__((noinline)) void abandon(struct sp_thread *t, struct sp_stmt *s)
{
	end_exec(t, &s->run, SQLITE_ROW, sp_now(), 1);
}

SP_INLINE void end_if_running(struct sp_thread *t, sqlite3_stmt *st)
{
	struct sp_stmt *s = sp_stmt_lookup(t, st);

	/* the common reset follows SQLITE_DONE: nothing in progress */
	if (unlikely(s && s->run.start && t->cur != &s->run))
		abandon(t, s);
}

static __attribute__((noinline)) int reset_cold(sqlite3_stmt *st)
{
	struct sp_thread *t = &sp_tls;

	NEED();
	if (unlikely(!sp_real.reset))
		return MISSING;
	if (!sp_hot || sp_guarded(t) || !st)
		return sp_real.reset(st);
	sp_thread_ready(t);
	end_if_running(t, st);
	return sp_real.reset(st);
}

SP_EXPORT int sqlite3_reset(sqlite3_stmt *st)
{
	struct sp_thread *t = &sp_tls;

	if (unlikely(t->state != SP_TS_FAST || !st))
		return reset_cold(st);
	end_if_running(t, st);
	return sp_real.reset(st);
}

SP_EXPORT int sqlite3_finalize(sqlite3_stmt *st)
{
	struct sp_thread *t = &sp_tls;

	NEED();
	if (unlikely(!sp_real.finalize))
		return MISSING;
	if (st && sp_hot && !sp_guarded(t)) {
		int saved = errno;
		struct sp_stmt *s;

		sp_thread_ready(t);
		s = sp_stmt_find_hot(st);
		if (s && s->run.start && t->cur != &s->run)
			abandon(t, s);
		if (s)
			sp_stmt_forget(st);
		errno = saved;
	}
	return sp_real.finalize(st);
}
