/* SPDX-License-Identifier: MIT */
/*
 * exec.c - the slow halves of an execution: a start that is nested, first,
 * drawn for a stack or on a thread without its query record; an end that
 * is sampled, failing, slow, nested or on another thread (or process)
 * than its start; sqlite3_exec calls; stacks; and the records such
 * executions leave (EXEC events, ERROR, STACK).
 *
 * Totals are never in records: every execution, sampled or not, is added
 * to its query record in the shared statistics (sp_agg_add). A record
 * lost with a full ring loses an event, counted, never a count.
 */
#include <errno.h>
#include <stddef.h>
#include <execinfo.h>
#include <math.h>
#include <string.h>

#include "sp_params.h"
#include "sp_preload.h"

int sp_use_cfi_unwinder;
uintptr_t sp_self_lo, sp_self_hi;

/*
 * Gap to the next execution the random draw picks, counting this one: a
 * geometric variable with p = SQLPROF_RATE, so that counting it down
 * gives exactly the choices of one Bernoulli draw per execution, at the
 * price of a decrement instead of a random number each time.
 */
/* ln(u) for u in (0, 1], within 1e-7 of it and never above it: the
 * exponent, and for the mantissa m in [1, 2) the series of
 * 2 atanh((m - 1) / (m + 1)) to its eleventh power - some 25
 * instructions, against libm's log and its call, 44 more, once a drawn
 * execution. About one gap in a million comes out one execution off. */
static double draw_ln(double u)
{
	uint64_t b;
	double m, s, s2;
	int e;

	memcpy(&b, &u, sizeof(b));
	e = (int)((b >> 52) & 0x7ff) - 1023;
	b = (b & 0x000fffffffffffffULL) | 0x3ff0000000000000ULL;
	memcpy(&m, &b, sizeof(m));
	s = (m - 1.0) / (m + 1.0);
	s2 = s * s;
	return e * 0.6931471805599453 +
	       2.0 * s *
		       (1.0 + s2 * (1.0 / 3 +
				    s2 * (1.0 / 5 + s2 * (1.0 / 7 + s2 * (1.0 / 9 + s2 / 11)))));
}

uint64_t sp_draw_gap(struct sp_thread *t)
{
	double u, g;

	if (sp_cfg.rate >= 1.0)
		return 1;
	if (sp_cfg.rate <= 0.0)
		return UINT64_MAX;
	/* u uniform in (0, 1] from the top 53 bits: normal, so draw_ln's
	 * exponent is its own */
	u = (double)((sp_rng_next(t) >> 11) + 1) * 0x1p-53;
	g = floor(draw_ln(u) / sp_cfg.log_q);
	if (g < 0.0) /* not for an ln at or below 0, but a gap is never below 1 */
		g = 0.0;
	if (!(g < 1e18))
		return (uint64_t)1e18;
	return (uint64_t)g + 1;
}

/* ---- stacks ---- */

/* A stack not known to be sent by this thread lately: note it in the set
 * and write its STACK record the first time in the process. */
extern int sp_stack_first(uint64_t h);
extern void sp_stack_unsent(uint64_t h);

__attribute__((noinline)) uint64_t sp_stack_note(struct sp_thread *t, const uintptr_t *pcs,
						 int depth, uint64_t h)
{
	int saved = errno, i;

	if (sp_stack_first(h)) {
		uint32_t rl = sizeof(struct sp_rec_stack) + 8u * (uint32_t)depth;
		struct sp_rec_stack *r;

		sp_guard_in(t);
		/* A new stack may hold pcs of a library loaded since the map was
		 * last sent. */
		sp_modules_changed();
		r = sp_rec_reserve(t, rl);
		sp_guard_out(t);
		if (!r) {
			sp_stack_unsent(h);
			errno = saved;
			return 0; /* the execution keeps its time, loses its stack */
		}
		r->h.type = SP_REC_STACK;
		r->h.flags = 0;
		r->h.len = rl;
		r->pid = sp_my_pid();
		r->tid = t->tid;
		r->stack_id = h;
		r->depth = (uint32_t)depth;
		r->generation = sp_modules_generation();
		for (i = 0; i < depth; i++)
			((uint64_t *)(r + 1))[i] = (uint64_t)pcs[i];
		sp_rec_commit(t, rl);
	}
	t->last_stack = h;
	errno = saved;
	return h;
}

/* backtrace(), for frames our unwinder cannot climb; keeps errno */
int sp_backtrace_keep_errno(uintptr_t *pcs, int max)
{
	int saved = errno, n = backtrace((void **)pcs, max);

	errno = saved;
	return n;
}

/* A walk that cannot have its thread's page (a signal handler's inside
 * another walk of the thread, or no page): this many pcs on the stack,
 * without CPython's frames. */
#define WALK_SMALL 72

uint64_t sp_stack_walk(struct sp_thread *t, uintptr_t rsp, uintptr_t rbp, uintptr_t pc, int entered)
{
	struct sp_thread_more *m = t->more;
	uintptr_t small[WALK_SMALL], *pcs = small;
	int max = sp_cfg.depth + 8, n = -1, noted = 0, skip, depth, own = 0;
	int py = atomic_load_explicit(&sp_py_state, memory_order_relaxed) != SP_PY_STATE_OFF;
	uint64_t h;

	if (likely(m != &sp_more_none && !m->walk_busy)) {
		m->walk_busy = 1;
		atomic_signal_fence(memory_order_seq_cst);
		pcs = m->pcs;
		own = 1;
	} else {
		py = 0;
		if (max > WALK_SMALL)
			max = WALK_SMALL;
	}
	/* entered: the walk starts in the program's frame; pcs[0] stands for
	 * the frame of ours it was entered from, as for any other walk */
	pcs[0] = (uintptr_t)&sp_stack_walk;
	if (likely(sp_use_cfi_unwinder))
		n = sp_unwind_noting(SP_MEMO(t), pcs + entered, max - entered, rsp, rbp, pc,
				     &noted);
	if (likely(n >= 0))
		n += entered;
	else /* not ours to unwind (signal frame, no CFI): libgcc's */
		n = sp_backtrace_keep_errno(pcs, max);
	if (unlikely(py)) /* CPython's frames: not in the memo's words */
		n = sp_py_splice(t, pcs, n, SP_STACK_MAX + 8);
	h = sp_stack_id(pcs, n);
	if (noted)
		sp_memo_done(SP_MEMO(t), py ? 0 : h);
	if (h) {
		/* a sampled execution is a slow path: the collector gone, or
		 * one to connect to (a new one has no stack: last_stack is
		 * forgotten) */
		sp_stream_tick();
		/* the same stack as this thread's last one: sent already */
		if (unlikely(h != t->last_stack)) {
			depth = sp_stack_span(pcs, n, &skip);
			h = sp_stack_note(t, pcs + skip, depth, h);
		}
	}
	if (own) {
		atomic_signal_fence(memory_order_seq_cst);
		m->walk_busy = 0;
	}
	return h;
}

/*
 * The common case first, in the frame the walk starts from: this
 * thread's last stack again (sp_memo_same: a few words checked, no walk,
 * no hash), sent already. CPython's frames are not in the memo: with them
 * on, every stack is walked.
 */
__attribute__((noinline)) uint64_t sp_stack_take(struct sp_thread *t)
{
	/* __builtin_frame_address(0) gives this function a frame pointer:
	 * fp[0] is our caller's rbp, fp[1] our return address, fp + 2 our
	 * caller's rsp (as in sp_unwind) */
	const uintptr_t *fp = __builtin_frame_address(0);
	struct sp_walk_memo *m = SP_MEMO(t);

	if (likely(atomic_load_explicit(&sp_py_state, memory_order_relaxed) == SP_PY_STATE_OFF) &&
	    likely(sp_memo_same(m, (uintptr_t)(fp + 2), fp[0], fp[1]))) {
		sp_stream_tick();
		if (likely(m->id == t->last_stack))
			return m->id;
	}
	return sp_stack_walk(t, (uintptr_t)(fp + 2), fp[0], fp[1], 0);
}

static void take_stack(struct sp_thread *t, struct sp_exec *r)
{
	r->stack_id = sp_stack_take(t);
	if (r->stack_id)
		r->flags |= SP_EXEC_SAMPLED;
}

/* ---- events ---- */

static inline uint64_t exec_seq(struct sp_thread *t, struct sp_exec *r)
{
	if (!r->seq)
		r->seq = ++t->seq;
	return r->seq;
}

/* The counters' deltas into x in the record's order (vm_steps first),
 * from SQLite's (fullscan, sort, autoindex, vm): one shuffle, one store.
 * (Copied as they came, vm landed on rc and vm_steps was never written:
 * every event's and site's VM steps were whatever the ring held.) */
SP_INLINE void exec_counters(struct sp_rec_exec *x, sp_v4u delta)
{
	sp_v4u v = __builtin_shufflevector(delta, delta, 3, 0, 1, 2);

	__builtin_memcpy(&x->vm_steps, &v, sizeof(v));
}

/* The EXEC event of a sampled execution that ended at end: every field
 * stored once (no clearing first), header and ids in one store each.
 * Inline in the sampled end, which keeps its values in registers. */
SP_INLINE void emit_exec_in(struct sp_thread *t, struct sp_exec *r, uint64_t sql_id, uint64_t db,
			    int rc, uint64_t end, sp_v4u delta, uint64_t params)
{
	struct sp_rec_exec *x = sp_rec_reserve(t, sizeof(*x));
	uint64_t w;

	if (!x)
		return;
	w = SP_REC_EXEC | (uint64_t)(r->flags & ~SP_RUN_PRIVATE) << 16 | (uint64_t)sizeof(*x) << 32;
	__builtin_memcpy(&x->h, &w, sizeof(w));
	w = (uint64_t)t->pid | (uint64_t)t->tid << 32;
	__builtin_memcpy(&x->pid, &w, sizeof(w));
	x->sql_id = sql_id;
	x->seq = exec_seq(t, r);
	x->parent_seq = r->parent_seq;
	x->db = db;
	x->start = r->start;
	x->wall = end - r->start;
	x->db_time = r->db;
	x->nested_time = r->nested_time;
	x->rows = r->rows;
	x->stack_id = r->stack_id;
	exec_counters(x, delta);
	x->rc = rc;
	x->kind = r->kind;
	x->pad = 0;
	x->params = params;
	sp_rec_commit(t, sizeof(*x));
}

void sp_emit_exec(struct sp_thread *t, struct sp_exec *r, uint64_t sql_id, uint64_t db, int rc,
		  uint64_t end, sp_v4u delta, uint64_t params)
{
	emit_exec_in(t, r, sql_id, db, rc, end, delta, params);
}

#define emit_exec sp_emit_exec

/* ---- the bound values of a drawn execution (the duplicate rule) ---- */

uint64_t sp_params_key[2];

/* The keyed hash of st's bound values with its sql_id (never 0), or 0
 * when it cannot be had (params.c: from the statement's parameter array,
 * ~400 instructions for `SELECT ?1+1`, or sqlite3_expanded_sql's text
 * where the start-up probe did not validate that array's layout, ~2,200).
 * Only for randomly drawn executions of statements; a statement without
 * parameters is its sql_id. SQLPROF_PARAMS=0 turns it off. Keeps errno. */

/* The test, inline at the sampled end: most drawn executions at rates
 * above 0.01 are passed over, and a call for them cost ~30 instructions. */
static inline __attribute__((always_inline)) uint64_t
params_hash(struct sp_thread *t, const struct sp_exec *r, sqlite3_stmt *st, uint64_t sql_id,
	    uint32_t nexec /* of its query record */)
{
	if (!(r->flags & SP_EXEC_RANDOM) || r->kind != SP_KIND_STMT || !st || !sp_cfg.params)
		return 0;
	if (sp_cfg.params_keep != UINT64_MAX && nexec > 64) {
		/* above rate 0.01, past a statement's first 64 executions, a
		 * drawn execution is hashed with probability 0.01 / rate, so
		 * about 1 % of all executions are (hashing them all makes the
		 * trivial loop 1.64 times slower at rate 1 instead of 1.38,
		 * even from the parameter array: 2.78 with the text); the
		 * duplicate rule counts hashed executions only */
		t->rng ^= t->rng << 13;
		t->rng ^= t->rng >> 7;
		t->rng ^= t->rng << 17;
		if (t->rng >= sp_cfg.params_keep)
			return 0;
	}
	return sp_params_hash(t, st, sql_id);
}

static void write_error(struct sp_thread *t, struct sp_exec *ex, uint64_t sql_id, sqlite3 *db,
			int rc)
{
	const char *msg = db && sp_real.errmsg ? sp_real.errmsg(db) : NULL;
	size_t n = msg ? strnlen(msg, 4096) : 0;
	uint32_t rl = SP_ALIGN8(sizeof(struct sp_rec_error) + n);
	struct sp_rec_error *r = sp_rec_reserve(t, rl);

	if (!r)
		return;
	memset(r, 0, rl);
	r->h.type = SP_REC_ERROR;
	r->h.flags = ex->kind == SP_KIND_EXEC ? SP_ERROR_EXEC : 0;
	r->h.len = rl;
	r->pid = t->pid;
	r->tid = t->tid;
	r->exec_seq = exec_seq(t, ex);
	r->sql_id = sql_id;
	r->stack_id = ex->stack_id;
	r->rc = rc;
	r->msg_len = (uint32_t)n;
	memcpy(r + 1, msg ? msg : "", n);
	sp_rec_commit(t, rl);
}

/* ---- nesting ---- */

/*
 * Exec calls whose shim frame is gone (an exception or longjmp went
 * through it) are still t->cur. frame is the frame address of an
 * interposer entered now (the exec shim, or step_general, each reached
 * from the program's frame). Everything that runs inside a live exec call
 * is deeper on the stack (lower: stacks grow down), so an exec frame at or
 * below frame is gone. One above it may be live (we run inside it) or
 * gone with its memory reused by the program's deeper frames since: the
 * shim's frame still holds the saved frame pointer and return address it
 * held at entry while the call is live, so other words there prove it
 * gone. The frame is read only when it lies in this thread's stack (a
 * coroutine's stack may be gone: then the call is taken as live). End the
 * gone ones as abandoned, so that nothing is ever added to a run whose
 * call is not running.
 */
static void exec_account(struct sp_thread *t, struct sp_exec *r, sqlite3 *db, int rc, uint64_t end,
			 uint16_t flags);

static int exec_gone(const struct sp_exec *r, uintptr_t frame)
{
	const uintptr_t *f = (const uintptr_t *)r->frame;

	if (r->frame <= frame)
		return 1;
	if (!sp_stack_contains(r->frame, 2 * sizeof(uintptr_t)))
		return 0;
	return f[0] != r->frame_link || f[1] != r->frame_ret;
}

static void close_vanished(struct sp_thread *t, uintptr_t frame)
{
	if (!frame)
		return;
	while (t->exec_depth && t->cur == &t->more->exec_stack[t->exec_depth - 1] &&
	       exec_gone(t->cur, frame)) {
		struct sp_exec *r = t->cur;

		t->cur = r->parent;
		/* counted, abandoned: its time is that of the call until now */
		exec_account(t, r, NULL, SQLITE_OK, sp_now(), SP_EXEC_ABANDONED);
		t->exec_depth--;
	}
}

static void exec_link(struct sp_thread *t, struct sp_exec *r, uintptr_t frame)
{
	close_vanished(t, frame);
	r->parent = t->cur;
	if (unlikely(r->parent != NULL)) {
		r->parent_seq = exec_seq(t, r->parent);
		r->flags |= SP_EXEC_NESTED;
	} else {
		r->parent_seq = 0;
	}
}

/* Credit our time to the enclosing execution only while we are inside
 * its call (t->cur) and it is still the same execution. */
static void exec_unlink(struct sp_thread *t, struct sp_exec *r)
{
	struct sp_exec *p = r->parent;

	if (unlikely(p != NULL) && p == t->cur && p->seq == r->parent_seq && p->start) {
		p->nested_time += r->db;
		p->flags |= SP_RUN_HAS_NESTED;
	}
}

/* Between executions, every field but the fast start's is 0. */
static void exec_clear(struct sp_exec *r)
{
	r->start = 0;
	r->db = 0; /* the inline start subtracts its clock from it */
	r->flags = 0;
	r->seq = 0;
	r->nested_time = 0;
	r->stack_id = 0;
	r->parent = NULL;
	r->parent_seq = 0;
}

/* ---- statements ---- */

/* Bind s to the calling thread's query record for its text and caller.
 * Returns 1 when that record is new: the first execution of the text
 * from this caller on this thread, which takes a stack (so that every
 * calling site is seen, however few its executions). */
static int bind_stmt(struct sp_thread *t, struct sp_stmt *s, uintptr_t caller)
{
	struct sp_arena *a = sp_arena_get(t);
	int created = 0;
	struct sp_agg_query *q =
		a ? sp_agg_get(a, s->sql_id, SP_KIND_STMT, caller, &created) : NULL;

	if (q) {
		sqlite3_stmt *st =
			(sqlite3_stmt *)atomic_load_explicit(&s->key, memory_order_relaxed);

		s->agg = q;
		s->agg_arena = t->arena_id;
		s->agg_caller = caller;
		s->agg_tag = 0;
		/* Its counters follow q's segment when they can be read in place
		 * (through the API, every end adds its deltas). Only then may
		 * sqlite3_step start it inline, which reads no counters: agg_tag
		 * is 0 (never equal to caller ^ a tag) otherwise, and when the
		 * caller or the tag does not fit. */
		int off = atomic_load_explicit(&sp_status_off, memory_order_relaxed);

		if (off >= 0 && (uintptr_t)st > 1) {
			sp_seg_take(t, q, s, st);
			s->counters = (uintptr_t)st + (uintptr_t)off +
				      4 * SQLITE_STMTSTATUS_FULLSCAN_STEP;
			/* a folded text's statement: its second start comes
			 * to sp_exec_begin_slow (sp_stmt_unfold) */
			if (t->arena_tag && caller < (1ULL << 48) && !s->folded)
				s->agg_tag = caller ^ t->arena_tag;
		}
	} else {
		s->agg = NULL;
		s->agg_arena = 0; /* every execution comes here: unattributed */
		s->agg_tag = 0;
	}
	return created;
}

uint64_t sp_exec_begin_slow(struct sp_thread *t, struct sp_stmt *s, sqlite3_stmt *st, int drawn,
			    uintptr_t caller, uintptr_t frame)
{
	struct sp_exec *r = &s->exec;
	int new_site = 0;

	if (unlikely(s->folded) && s->nexec)
		sp_stmt_unfold(t, s, st);
	if (s->agg_arena != t->arena_id || s->agg_caller != caller ||
	    (s->agg && s->agg->seg_owner != (uint64_t)(uintptr_t)s &&
	     atomic_load_explicit(&sp_status_off, memory_order_relaxed) >= 0))
		new_site = bind_stmt(t, s, caller); /* (and take its segment back) */
	sp_stream_tick();                           /* a collector gone, or one to connect to */
	if (unlikely(atomic_load_explicit(&sp_sql_pending, memory_order_relaxed)))
		sp_sql_flush(t);
	exec_clear(r);
	r->kind = SP_KIND_STMT;
	exec_link(t, r, frame);
	/* The random draw is made for every execution, forced or not, so the
	 * random samples stay an unbiased share of them. */
	if (unlikely(s->nexec++ == 0) && sp_first_exec(s->sql_id, SP_KIND_STMT))
		r->flags |= SP_EXEC_FIRST;
	if (drawn < 0)
		drawn = sp_draw(t);
	if (drawn)
		r->flags |= SP_EXEC_RANDOM;
	if (new_site && !(r->flags & SP_EXEC_FIRST) && sp_cfg.rate > 0) {
		/* a caller not seen on this thread: a forced stack, for its
		 * site (not a random one: it does not weigh in estimates) */
		r->flags |= SP_EXEC_FIRST;
	}
	if (r->flags & (SP_EXEC_FIRST | SP_EXEC_RANDOM))
		take_stack(t, r);
	if ((r->flags & (SP_EXEC_FIRST | SP_EXEC_RANDOM)) == SP_EXEC_FIRST && r->stack_id &&
	    !sp_first_site(s->shape, r->stack_id)) {
		/* a first text of a shape already seen first at this stack (a
		 * dump restore's 100,000 INSERTs): its query has that site
		 * already, the event would add nothing */
		r->flags &= (uint16_t) ~(SP_EXEC_FIRST | SP_EXEC_SAMPLED);
		r->stack_id = 0;
	}
	r->db = 0;
	r->rows = 0;
	sp_status_base(r, st);
	if (atomic_load_explicit(&sp_status_off, memory_order_relaxed) < 0) {
		r->flags |= SP_RUN_API; /* its end reads them through the API too */
		t->state &= ~SP_TS_COUNTERS;
		sp_fast_off(t);
	} else {
		/* the inline start may read them; SQLPROF_INLINE=0: never
		 * SP_TS_FAST nor SP_TS_FAST_MONO, every step is step_general's */
		t->state |= sp_cfg.inline_path ? SP_TS_COUNTERS : 0;
	}
	/* the walk's time is not the execution's */
	if (s->agg)
		s->agg->started++;
	else
		r->flags |= SP_RUN_NOREC;
	/* the inline end stores the counters of a segment's owner only */
	if (s->agg && s->agg->seg_owner != (uint64_t)(uintptr_t)s)
		r->flags |= SP_RUN_NOSEG;
	r->start = sp_now();
	r->slow_at = r->start + sp_cfg.slow_span;
	return r->start;
}

void sp_exec_on_row(struct sp_thread *t, struct sp_stmt *s, uint64_t now)
{
	struct sp_exec *r = &s->exec;

	(void)now;
	r->slow_at = UINT64_MAX; /* noted once */
	r->flags |= SP_EXEC_SLOW;
	if (!(r->flags & SP_EXEC_SAMPLED))
		take_stack(t, r);
}

/* The query record an execution of s that ends on this thread goes to:
 * the one bound at its start, another of this thread's if it started on
 * another thread, none if it started in the parent before fork(). */
static struct sp_agg_query *end_record(struct sp_thread *t, struct sp_stmt *s, int *inherited)
{
	*inherited = 0;
	if (likely(s->agg_arena == t->arena_id && s->agg))
		return s->agg;
	if (s->agg_arena && (uint32_t)(s->agg_arena >> 32) != sp_my_pid()) {
		/* started before fork(), in the parent: the parent counts it */
		*inherited = 1;
		return NULL;
	}
	/* Begun on another thread: its counters at start are that record's
	 * segment's last end when the statement owned it (read only: that
	 * thread closes it), its base otherwise. It ends outside the segment
	 * it opens here. */
	if (s->agg && s->agg->seg_owner == (uint64_t)(uintptr_t)s &&
	    !(s->exec.flags & SP_RUN_NOSEG))
		__builtin_memcpy(s->exec.base, s->agg->seg_cur, sizeof(s->exec.base));
	bind_stmt(t, s, s->agg_caller); /* the caller it started from */
	s->exec.flags |= SP_RUN_NOSEG;
	return s->agg;
}

/* The additions of a non-plain execution beyond sp_agg_add. */
static void agg_extra(struct sp_agg_query *q, const struct sp_exec *r, int rc)
{
	if (r->flags & SP_EXEC_ERROR) {
		q->errors++;
		sp_agg_error(q, rc);
	}
	if (r->flags & SP_EXEC_NESTED)
		q->nested++;
	q->nested_time += r->nested_time;
	if (r->stack_id)
		q->samples++;
}

void sp_exec_end_slow(struct sp_thread *t, struct sp_stmt *s, sqlite3_stmt *st, int rc,
		      uint64_t end)
{
	struct sp_exec *r = &s->exec;
	struct sp_agg_query *q;
	sp_v4u delta, now;
	int inherited, saved, owned;

	if (!r->start)
		return;
	sp_exec_clamp(r, &end);
	q = end_record(t, s, &inherited);
	if (inherited) {
		exec_clear(r);
		return;
	}
	saved = errno;
	if (unlikely(end >= r->slow_at) && !(r->flags & SP_EXEC_SLOW)) {
		/* Slow, and no row came back to notice it earlier: we are still
		 * in the caller's step, so its stack is the right one. */
		r->flags |= SP_EXEC_SLOW;
		if (!(r->flags & SP_EXEC_SAMPLED))
			take_stack(t, r);
	}
	delta = sp_exec_delta(q, s, r, st, &now, &owned);
	if (unlikely(rc != SQLITE_DONE && rc != SQLITE_ROW)) {
		sqlite3 *db = (sqlite3 *)(uintptr_t)s->db;

		r->flags |= SP_EXEC_ERROR;
		if (db && sp_real.extended_errcode)
			rc = sp_real.extended_errcode(db);
		/* The stack at the failing call: we are in the step shim. */
		take_stack(t, r);
		sp_guard_in(t);
		write_error(t, r, s->sql_id, db, rc);
		sp_guard_out(t);
	} else {
		rc = SQLITE_OK;
	}
	if (q) {
		sp_agg_add(q, r, end, delta, owned ? &now : NULL);
		agg_extra(q, r, rc);
		if (!(r->flags & SP_EXEC_NESTED))
			sp_loop_note(t, q, s->shape, r->start, end);
	} else {
		sp_stats_unattributed();
	}
	if (r->stack_id)
		emit_exec(t, r, s->sql_id, s->db, rc, end, delta,
			  params_hash(t, r, st, s->sql_id, s->agg ? (uint32_t)s->agg->count : 0));
	exec_unlink(t, r);
	exec_clear(r);
	errno = saved;
}

/* The EXEC event of a drawn execution that ended plainly, with its stack
 * (sp_exec_end_sampled): what end_drawn's tests make constant is stored as
 * a constant - flags RANDOM | SAMPLED (nothing private: not nested, no
 * nested time), no parent, rc 0 and kind SP_KIND_STMT (0) - the rest
 * straight from the run. */
SP_INLINE void emit_sampled(struct sp_thread *t, const struct sp_exec *r, uint64_t sql_id,
			    uint64_t db, uint64_t end, sp_v4u delta, uint64_t params)
{
	struct sp_rec_exec *x = sp_rec_reserve(t, sizeof(*x));
	uint64_t w;

	if (!x)
		return;
	w = SP_REC_EXEC | (uint64_t)(SP_EXEC_RANDOM | SP_EXEC_SAMPLED) << 16 |
	    (uint64_t)sizeof(*x) << 32;
	__builtin_memcpy(&x->h, &w, sizeof(w));
	/* tid, pid are adjacent in sp_thread: one load, turned to pid, tid */
	_Static_assert(offsetof(struct sp_thread, pid) == offsetof(struct sp_thread, tid) + 4,
		       "sp_thread: pid right after tid");
	__builtin_memcpy(&w, &t->tid, sizeof(w));
	w = w >> 32 | w << 32;
	__builtin_memcpy(&x->pid, &w, sizeof(w));
	x->sql_id = sql_id;
	x->seq = r->seq ? r->seq : ++t->seq; /* a nested one may have asked */
	x->parent_seq = 0;
	x->db = db;
	x->start = r->start;
	x->wall = end - r->start;
	x->db_time = r->db;
	x->nested_time = 0;
	x->rows = r->rows;
	x->stack_id = r->stack_id;
	exec_counters(x, delta);
	w = 0; /* rc SQLITE_OK, kind SP_KIND_STMT, pad */
	__builtin_memcpy(&x->rc, &w, sizeof(w));
	x->params = params;
	sp_rec_commit(t, sizeof(*x));
}

/* The end of a randomly sampled execution that is otherwise plain
 * (flags RANDOM and perhaps SAMPLED, DONE or abandoned, not slow, its
 * record this thread's): the plain additions, SQLite's counters in its
 * segment when the statement owns it, and its event written here
 * (emit_sampled).
 * Takes end_drawn's arguments as they come (the thread is the calling
 * one's) and returns rc, so that end_drawn's call is a bare jump. */
int sp_exec_end_sampled(struct sp_stmt *s, int rc, uint64_t end)
{
	struct sp_thread *t = &sp_tls;
	sqlite3_stmt *st = (sqlite3_stmt *)atomic_load_explicit(&s->key, memory_order_relaxed);
	struct sp_exec *r = &s->exec;
	struct sp_agg_query *q = s->agg;
	sp_v4u now;
	int owned;
	sp_v4u delta = sp_exec_delta(q, s, r, st, &now, &owned);
	uint64_t start = r->start;

	{
		uint32_t i = sp_hist_index(r->db);
		uint64_t blk = q->hist[i / SP_HIST_PER_BLOCK];

		if (likely(blk && owned)) {
			/* end_plain's: its bucket's block there, its counters
			 * stored in the segment it owns */
			__m128i v;

			sp_agg_add_in(q, r, end,
				      &((struct sp_agg_hist *)(uintptr_t)blk)
					       ->bucket[i % SP_HIST_PER_BLOCK]);
			__builtin_memcpy(&v, &now, sizeof(v));
			sp_seg_end(q, v);
		} else {
			sp_agg_add(q, r, end, delta, owned ? &now : NULL);
		}
	}
	if (r->stack_id) {
		q->samples++;
		emit_sampled(t, r, s->sql_id, s->db, end, delta,
			     params_hash(t, r, st, s->sql_id, (uint32_t)q->count));
	}
	r->start = 0;
	r->db = 0;
	r->flags = 0;
	r->seq = 0;
	r->stack_id = 0;
	sp_loop_note(t, q, s->shape, start, end);
	return rc;
}

/* An execution whose statement SQLite freed without our finalize shim
 * (its memory now reused): end it without reading counters from memory
 * that is no longer it. */
void sp_exec_stale(struct sp_thread *t, struct sp_stmt *s)
{
	static const sp_v4u zero;
	struct sp_exec *r = &s->exec;
	struct sp_agg_query *q;
	int inherited;

	if (!t->tid)
		sp_thread_init(t);
	q = end_record(t, s, &inherited);
	if (!inherited) {
		r->flags |= SP_EXEC_ABANDONED | SP_EXEC_STATUS_RESET;
		if (q) {
			sp_agg_add(q, r, r->start + r->db, zero, NULL);
			agg_extra(q, r, 0);
			/* its counters up to its last end are in the segment */
			if (q->seg_owner == (uint64_t)(uintptr_t)s)
				sp_seg_close(q);
		} else {
			sp_stats_unattributed();
		}
		if (r->stack_id)
			emit_exec(t, r, s->sql_id, s->db, SQLITE_OK, r->start + r->db, zero, 0);
	}
	exec_clear(r);
}

/*
 * A step while this thread is inside our own work (the guard): our own
 * SQLite calls (a plan's, the probe's, a schema load inside them: their
 * statements are never in the table, which only the shims fill, and not
 * while guarded), or a signal handler's that interrupted us (issue 23).
 * Nothing of ours may run for it - what it interrupted may be half done -
 * but a program's execution that starts here (a tracked statement, not
 * busy) is counted, in the statistics' unattributed executions, so the
 * totals stay exact. Its record (time, rows, query) is not had; an
 * execution started here and ended by a later profiled step would be
 * counted twice (not seen yet).
 */
int sp_step_guarded(struct sp_thread *t, sqlite3_stmt *st)
{
	(void)t;
	if (st && sp_real.stmt_busy && !sp_real.stmt_busy(st) && sp_stmt_find_hot(st))
		sp_stats_unattributed();
	return sp_real.step(st);
}

/* ---- sqlite3_exec ---- */

struct sp_exec *sp_exec_begin(struct sp_thread *t, uint64_t sql_id, uint64_t shape, uintptr_t frame)
{
	struct sp_exec *r;

	close_vanished(t, frame);
	/* too deep, or no page for the thread's runs: sp_exec_deep's */
	if (t->exec_depth >= SP_EXEC_DEPTH || t->more == &sp_more_none)
		return NULL;
	if (!t->exec_depth)
		sp_stream_tick();
	if (unlikely(atomic_load_explicit(&sp_sql_pending, memory_order_relaxed)))
		sp_sql_flush(t);
	r = &t->more->exec_stack[t->exec_depth++];
	exec_clear(r);
	r->kind = SP_KIND_EXEC;
	r->frame = frame;
	r->sql_id = sql_id;
	r->shape = shape;
	/* what the shim's frame holds while the call is live */
	r->frame_link = ((const uintptr_t *)frame)[0];
	r->frame_ret = ((const uintptr_t *)frame)[1];
	r->db = r->rows = 0;
	exec_link(t, r, 0);
	/* an exec call and a statement of the same text are not the same
	 * query: their "first" marks are kept apart */
	if (sp_first_exec(sql_id, SP_KIND_EXEC))
		r->flags |= SP_EXEC_FIRST;
	if (sp_draw(t))
		r->flags |= SP_EXEC_RANDOM;
	r->slow_at = UINT64_MAX; /* exec calls are checked at their end */
	if (r->flags & (SP_EXEC_FIRST | SP_EXEC_RANDOM))
		take_stack(t, r);
	return r;
}

/*
 * The callback of exec call r returned non-zero: SQLite ends the call
 * with SQLITE_ABORT and frees the statement it was stepping itself
 * (sqlite3VdbeFinalize, which no shim sees), its execution open; left
 * so, it would be counted only if a later statement took its address,
 * with counters read from freed memory, and never if none did. End it
 * here, while the statement is alive, as a reset before the last row
 * would (abandoned, nested in r), and forget the statement. s is the
 * slot this thread stepped last when the callback was called, key its
 * statement then: the call's own statement, whose step had just returned
 * the row - unless SQLite stepped it past our shims, which the checks
 * (still that statement, open, nested in r, on db) catch.
 */
void sp_exec_callback_abort(struct sp_thread *t, struct sp_exec *r, sqlite3 *db, struct sp_stmt *s,
			    uintptr_t key)
{
	struct sp_exec *sr = &s->exec;

	if (s == &sp_stmt_none || key < 2 ||
	    atomic_load_explicit(&s->key, memory_order_relaxed) != key || !sr->start ||
	    sr->parent != r || t->cur != r || s->db != (uint64_t)(uintptr_t)db)
		return;
	sr->flags |= SP_EXEC_ABANDONED;
	sp_exec_end_slow(t, s, (sqlite3_stmt *)key, SQLITE_ROW, sp_now());
	sp_stmt_forget((sqlite3_stmt *)key);
}

/* An exec call ended (rc; flags: SP_EXEC_ABANDONED when its frame was
 * found gone): added to its query record, its event if sampled; r is
 * free again. */
static void exec_account(struct sp_thread *t, struct sp_exec *r, sqlite3 *db, int rc, uint64_t end,
			 uint16_t flags)
{
	static const sp_v4u zero;
	struct sp_agg_query *q = sp_agg_get(sp_arena_get(t), r->sql_id, SP_KIND_EXEC, 0, NULL);

	r->flags |= flags;
	if (flags & SP_EXEC_ABANDONED)
		r->db = end - r->start;
	if (q) {
		sp_agg_add(q, r, end, zero, NULL);
		agg_extra(q, r, rc);
		if (!(r->flags & SP_EXEC_NESTED))
			sp_loop_note(t, q, r->shape ^ 0x9E3779B97F4A7C15ULL, r->start, end);
	} else {
		sp_stats_unattributed();
	}
	if (r->stack_id)
		emit_exec(t, r, r->sql_id, (uint64_t)(uintptr_t)db, rc, end, zero, 0);
	exec_unlink(t, r);
	exec_clear(r);
}

/* The end of an exec call that returned rc at end: a slow one's stack, a
 * failure's stack and ERROR record, then its totals (exec_account). */
static void exec_finish(struct sp_thread *t, struct sp_exec *r, sqlite3 *db, int rc, uint64_t end)
{
	if (sp_cfg.slow_ticks && end - r->start >= sp_cfg.slow_ticks) {
		r->flags |= SP_EXEC_SLOW;
		if (!(r->flags & SP_EXEC_SAMPLED))
			take_stack(t, r);
	}
	if (rc != SQLITE_OK && rc != SQLITE_ABORT) {
		r->flags |= SP_EXEC_ERROR;
		if (db && sp_real.extended_errcode)
			rc = sp_real.extended_errcode(db);
		take_stack(t, r);
		sp_guard_in(t);
		write_error(t, r, r->sql_id, db, rc);
		sp_guard_out(t);
	}
	exec_account(t, r, db, rc, end, 0);
}

void sp_exec_deep(struct sp_thread *t, uint64_t sql_id, uint64_t shape, sqlite3 *db, int rc,
		  uint64_t t0, uint64_t t1)
{
	struct sp_exec r;

	memset(&r, 0, sizeof(r));
	r.kind = SP_KIND_EXEC;
	r.flags = SP_EXEC_NESTED;
	r.sql_id = sql_id;
	r.shape = shape;
	r.start = t0;
	r.db = t1 - t0;
	exec_finish(t, &r, db, rc, t1);
}

void sp_exec_end(struct sp_thread *t, struct sp_exec *r, sqlite3 *db, int rc, uint64_t end)
{
	/* The call returned, so its frame is live: the exec calls inside it
	 * whose frames vanished are counted, abandoned; r is the innermost
	 * exec again. */
	while (t->exec_depth && &t->more->exec_stack[t->exec_depth - 1] != r) {
		exec_account(t, &t->more->exec_stack[t->exec_depth - 1], NULL, SQLITE_OK, end,
			     SP_EXEC_ABANDONED);
		t->exec_depth--;
	}
	if (!t->exec_depth)
		return; /* closed as vanished meanwhile: not ours any more */
	sp_exec_clamp(r, &end);
	exec_finish(t, r, db, rc, end);
	t->exec_depth--;
}
