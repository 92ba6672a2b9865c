/* SPDX-License-Identifier: MIT */
/*
 * check_unwind.c - the preload's cached CFI unwinder (preload/unwind.c)
 * against glibc's backtrace() on the same stacks: recursion through
 * noinline functions built -O2 without frame pointers (and some with one),
 * in the main thread and in other threads, cold and warm cache, with four
 * threads walking at once while another scribbles on their cache slots;
 * the edges (max, signal handlers, an alternate signal stack). Prints the
 * cost of both (not asserted: timing is noisy here).
 *
 * Instructions per warm frame: `check_unwind --walks N` does N warm walks
 * of 23 frames (as test_cost) and nothing else. Under
 *   valgrind --tool=callgrind --toggle-collect=sp_unwind \
 *            --callgrind-out-file=/dev/null build/tests/check_unwind --walks N
 * the "Collected" count of N = 2000 minus that of N = 1000, over 1000 * 23,
 * is the cost of a frame of a warm walk, the walk's own overhead included.
 */
#include <check.h>
#include <execinfo.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../preload/unwind.c"
#include "../preload/gostack.c"

#define MAXF 128

/* What sp_stack_id reads, defined elsewhere in the preload: no frame is
 * ours past pcs[0] (an empty text range), ids keep MAXF frames. */
uintptr_t sp_self_lo, sp_self_hi;
struct sp_config sp_cfg = { .depth = MAXF };
uint64_t sp_image_salt = 0x5a5a5a5a00000000ULL;
atomic_ulong sp_unloads;
/* The preload keeps a thread's memo in its sp_thread_more page (life.c);
 * here, a thread-local one. sp_more_none's is never noted in. */
struct sp_thread_more sp_more_none;
static __thread struct sp_walk_memo thread_memo;
#define sp_memo thread_memo

struct cap {
	uintptr_t ours[MAXF];
	void *ref[MAXF];
	int n_ours, n_ref;
	int max; /* given to sp_unwind; MAXF if 0 */
	int mix; /* recurse: frames of three kinds */
};

__attribute__((noinline)) static void capture(struct cap *c)
{
	c->n_ours = sp_unwind(c->ours, c->max ? c->max : MAXF);
	c->n_ref = backtrace(c->ref, MAXF);
	__asm__ volatile("" ::: "memory");
}

static __thread volatile unsigned sink; /* per thread: no race between walkers */

__attribute__((noinline)) static int recurse(int d, struct cap *c);

/* Its frame saves rbp (K_SP with a saved rbp): it keeps two values across
 * the call, in rbx and rbp. */
__attribute__((noinline)) static int rec_rbp(int d, struct cap *c)
{
	unsigned a = sink + (unsigned)d, b = sink * (unsigned)d;
	int r;

	r = recurse(d - 1, c);
	sink += a * b;
	return r + (int)((a - b) & 0xff);
}

/* Its frame has a frame pointer (K_FP): a variable-length array. */
__attribute__((noinline)) static int rec_fp2(int d, struct cap *c)
{
	volatile char buf[d + 8];
	int r;

	buf[d] = (char)d;
	r = recurse(d - 1, c);
	return r + buf[d];
}

/* The same, calling rec_fp2: its CFA depends on the rbp of rec_fp2's step. */
__attribute__((noinline)) static int rec_fp(int d, struct cap *c)
{
	volatile char buf[d + 16];
	int r;

	buf[d] = (char)d;
	r = rec_fp2(d, c);
	return r + buf[d];
}

/* Recursion to depth d, then capture(c); with c->mix, frames of three
 * kinds: rec_rbp, rec_fp and recurse's own (rbx only: K_SP without rbp). */
__attribute__((noinline)) static int recurse(int d, struct cap *c)
{
	int r;

	if (d == 0) {
		capture(c);
		return 1;
	}
	if (c->mix && d % 3 == 1)
		return rec_rbp(d, c) + 1;
	if (c->mix && d % 3 == 2)
		return rec_fp(d, c) + 1;
	/* work on both sides of the call so it is no tail call and the
	 * frame has something to restore */
	sink += d;
	r = recurse(d - 1, c) + d;
	sink -= r;
	return r;
}

/* 1 if the two walks agree, 0 if not (no check macros: threads use it);
 * *shift: where ours[1] is in ref, less 1. */
static int same(const struct cap *c, int *shift_out)
{
	int i, n, shift = 0;

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	/* ASan and TSan intercept backtrace(): its walk starts with a frame of
	 * the interceptor. Align the two walks on our caller's frame. */
	while (shift < c->n_ref - 1 && (uintptr_t)c->ref[1 + shift] != c->ours[1])
		shift++;
	n = c->n_ours < c->n_ref - shift ? c->n_ours : c->n_ref - shift;
#else
	if (c->n_ours != c->n_ref)
		return 0;
	n = c->n_ours;
#endif
	if (shift_out)
		*shift_out = shift;
	/* [0] are two different return addresses inside capture(); from [1]
	 * on both walks see the same callers, to the outermost frame. */
	for (i = 1; i < n; i++)
		if (c->ours[i] != (uintptr_t)c->ref[i + shift])
			return 0;
	return n > 1;
}

static void check_same(const struct cap *c)
{
	int i, shift = 0;

	ck_assert_int_gt(c->n_ours, 20);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
	ck_assert_int_eq(c->n_ours, c->n_ref);
#endif
	if (same(c, &shift))
		return;
	for (i = 1; i < c->n_ours && i + shift < c->n_ref; i++)
		ck_assert_msg(c->ours[i] == (uintptr_t)c->ref[i + shift], "frame %d: %#lx vs %p", i,
			      (unsigned long)c->ours[i], c->ref[i + shift]);
	ck_abort_msg("the walks differ (%d frames, backtrace %d)", c->n_ours, c->n_ref);
}

/* The class of pc's cache slot (0, SALT_FP, SALT_END, SALT_GEN), or 1 on a
 * miss. */
static uint64_t class_of(uintptr_t pc)
{
	char *c = (char *)atomic_load(&cache);
	uint64_t key = atomic_load((_Atomic uint64_t *)(c + slot_of(pc)));
	uint64_t val = atomic_load((_Atomic uint64_t *)(c + slot_of(pc) + 8));
	uint64_t x = key ^ val ^ pc;

	return x == 0 || x == SALT_FP || x == SALT_END || x == SALT_GEN ? x : 1;
}

START_TEST(test_main_thread)
{
	struct cap c;

	memset(&c, 0, sizeof(c));
	ck_assert_int_eq(sp_unwind_init(), 0);
	ck_assert_int_eq(sp_unwind_init(), 0); /* once per process */
	recurse(20, &c);                       /* cold cache */
	check_same(&c);
	recurse(20, &c); /* warm */
	check_same(&c);
	recurse(7, &c);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
	ck_assert_int_eq(c.n_ours, c.n_ref);
#endif
}
END_TEST

/* Every class of the fast path is taken, and gives what backtrace gives. */
START_TEST(test_kinds)
{
	struct cap c;
	int i, sp = 0, sp_rbp = 0, fp = 0, end = 0;

	memset(&c, 0, sizeof(c));
	ck_assert_int_eq(sp_unwind_init(), 0);
	c.mix = 1;
	recurse(24, &c); /* cold */
	check_same(&c);
	recurse(24, &c); /* warm */
	check_same(&c);
	for (i = 1; i < c.n_ours; i++) {
		uintptr_t pc = c.ours[i];
		char *base = (char *)atomic_load(&cache);
		uint64_t val = atomic_load((_Atomic uint64_t *)(base + slot_of(pc) + 8));

		switch (class_of(pc)) {
		case 0:
			if (val >> 32)
				sp_rbp++;
			else
				sp++;
			break;
		case SALT_FP: fp++; break;
		case SALT_END: end++; break;
		}
	}
	ck_assert_int_gt(sp, 0);
	ck_assert_int_gt(sp_rbp, 0);
	ck_assert_int_gt(fp, 0);
	/* the warm walk took every slot */
	for (i = 1; i < c.n_ours; i++)
		ck_assert_msg(class_of(c.ours[i]) != 1, "frame %d missed", i);
	ck_assert_int_eq(end, 1); /* the outermost frame */
}
END_TEST

/* max: the first max frames of the whole walk, cold and warm; 0 -> 0. */
START_TEST(test_max)
{
	struct cap full, c;
	int k, max, i;

	memset(&full, 0, sizeof(full));
	ck_assert_int_eq(sp_unwind_init(), 0);
	for (k = 0; k < 2 * 40; k++) {
		max = k % 40; /* 0: all of it, first */
		memset(&c, 0, sizeof(c));
		c.max = max;
		recurse(15, &c); /* one call site for all */
		if (max == 0) {
			check_same(&c);
			full = c;
			continue;
		}
		ck_assert_int_eq(c.n_ours, max < full.n_ours ? max : full.n_ours);
		for (i = 0; i < c.n_ours; i++)
			ck_assert(c.ours[i] == full.ours[i]);
	}
	ck_assert_int_lt(full.n_ours, 39);
	ck_assert_int_eq(sp_unwind(full.ours, 0), 0);
	ck_assert_int_eq(sp_unwind(full.ours, -1), 0);
}
END_TEST

/* errno is what it was, on the first walk of a thread too. */
static void *errno_main(void *arg)
{
	uintptr_t pcs[MAXF];
	int *ok = arg;

	errno = 1234;
	*ok = sp_unwind(pcs, MAXF) > 2 && errno == 1234;
	errno = 4321;
	*ok &= sp_unwind(pcs, MAXF) > 2 && errno == 4321;
	return NULL;
}

START_TEST(test_errno)
{
	pthread_t th;
	int ok = 0;

	ck_assert_int_eq(sp_unwind_init(), 0);
	ck_assert_int_eq(pthread_create(&th, NULL, errno_main, &ok), 0);
	pthread_join(th, NULL);
	ck_assert_int_eq(ok, 1);
}
END_TEST

static void *thread_main(void *arg)
{
	recurse(25, arg);
	return NULL;
}

START_TEST(test_other_thread)
{
	struct cap c;
	pthread_t th;

	memset(&c, 0, sizeof(c));
	ck_assert_int_eq(sp_unwind_init(), 0);
	ck_assert_int_eq(pthread_create(&th, NULL, thread_main, &c), 0);
	pthread_join(th, NULL);
	check_same(&c);
}
END_TEST

/* ---- four threads at once, and one that scribbles on their slots ---- */

#define WALKERS 4
#define WALKS 3000

static _Atomic int walkers_left;
static _Atomic uintptr_t seen[256]; /* pcs the walkers met, for the scribbler */

struct walker {
	int id, bad, walks;
};

static void *walker_main(void *arg)
{
	struct walker *w = arg;
	struct cap *c = calloc(1, sizeof(*c));
	int k, i;

	for (k = 0; k < WALKS; k++) {
		int d = 3 + (k * 7 + w->id * 5) % 30;

		c->mix = k % 2;
		recurse(d, c);
		if (!same(c, NULL))
			w->bad++;
		for (i = 1; i < c->n_ours && i < 16; i++)
			atomic_store_explicit(&seen[(k * 16 + i) % 256], c->ours[i],
					      memory_order_relaxed);
		w->walks++;
	}
	free(c);
	atomic_fetch_sub(&walkers_left, 1);
	return NULL;
}

/* Writes whole slots for pcs that share a slot with a pc the walkers use
 * (pc + k * 2^18: slot_of depends on bits 0..17 only), in every class,
 * as a walker that unwinds those pcs would: the walkers then miss, take
 * torn slots, compute and write again, and must still get every frame. */
static void *scribbler_main(void *arg)
{
	static const struct rule rules[] = {
		{ .cfa_off = 48, .ra_off8 = -1, .flags = RULE_OK },
		{ .cfa_off = 64, .rbp_off = -24, .ra_off8 = -1, .flags = RULE_OK | RBP_SAVED },
		{ .cfa_off = 16,
		  .rbp_off = -16,
		  .ra_off8 = -1,
		  .flags = RULE_OK | CFA_RBP | RBP_SAVED },
		{ .flags = RULE_END },
		{ .flags = RULE_BAD },
	};
	unsigned long n = 0, *writes = arg;

	while (atomic_load(&walkers_left) > 0) {
		uintptr_t pc = atomic_load_explicit(&seen[n % 256], memory_order_relaxed);
		uintptr_t other = pc + ((n % 7) + 1) * ((uintptr_t)1 << 18);
		char *c = (char *)atomic_load(&cache);
		_Atomic uint64_t *sl = (_Atomic uint64_t *)(c + slot_of(other));
		uint64_t salt, val;

		n++;
		if (!pc || encode(rules[n % 5], &salt, &val) != 0)
			continue;
		atomic_store_explicit(&sl[1], val, memory_order_relaxed);
		atomic_store_explicit(&sl[0], other ^ val ^ salt, memory_order_relaxed);
	}
	*writes = n;
	return NULL;
}

START_TEST(test_threads)
{
	pthread_t th[WALKERS], scr;
	struct walker w[WALKERS];
	unsigned long writes = 0;
	int i, bad = 0, walks = 0;

	ck_assert_int_eq(sp_unwind_init(), 0);
	atomic_store(&walkers_left, WALKERS);
	for (i = 0; i < WALKERS; i++) {
		w[i] = (struct walker){ .id = i };
		ck_assert_int_eq(pthread_create(&th[i], NULL, walker_main, &w[i]), 0);
	}
	ck_assert_int_eq(pthread_create(&scr, NULL, scribbler_main, &writes), 0);
	for (i = 0; i < WALKERS; i++) {
		pthread_join(th[i], NULL);
		bad += w[i].bad;
		walks += w[i].walks;
	}
	pthread_join(scr, NULL);
	ck_assert_int_eq(walks, WALKERS * WALKS);
	ck_assert_int_eq(bad, 0);
	ck_assert_uint_gt(writes, 0);
}
END_TEST

/* ---- signal handlers ---- */

static volatile int handler_n = 99;
static char altstack[64 * 1024];

static void on_signal(int sig)
{
	uintptr_t pcs[MAXF];

	(void)sig;
	/* the signal frame (__restore_rt) has no rule of ours: -1, and the
	 * caller falls back to backtrace() */
	handler_n = sp_unwind(pcs, MAXF);
}

static void raise_with(int flags)
{
	struct sigaction sa, old;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sa.sa_flags = flags;
	sigaction(SIGUSR1, &sa, &old);
	handler_n = 99;
	raise(SIGUSR1);
	sigaction(SIGUSR1, &old, NULL);
}

START_TEST(test_signal)
{
	stack_t ss = { .ss_sp = altstack, .ss_size = sizeof(altstack) };
	uintptr_t pcs[MAXF];

	ck_assert_int_eq(sp_unwind_init(), 0);
	ck_assert_int_gt(sp_unwind(pcs, MAXF), 2); /* the bounds are known */
	raise_with(0);
	ck_assert_int_eq(handler_n, -1);
	raise_with(0); /* cached */
	ck_assert_int_eq(handler_n, -1);
	ck_assert_int_eq(sigaltstack(&ss, NULL), 0);
	raise_with(SA_ONSTACK); /* not on the thread's stack */
	ck_assert_int_eq(handler_n, -1);
}
END_TEST

/* ---- the last walk (sp_memo) ---- */

struct idcap;
__attribute__((noinline)) static int deep_id(int d, struct idcap *c);

/* The id a walk from capture_id's caller gives (as step_sampled takes
 * its stack: the memo checked in this frame, else a noting walk from the
 * caller's frame), and the one a full walk gives. n: that walk's result,
 * or SAME when the memo told. */
#define SAME (-2)
struct idcap {
	uint64_t id, ref;
	int n;
	uintptr_t frame; /* capture_id's */
};

__attribute__((noinline)) static void capture_id(struct idcap *c)
{
	const uintptr_t *fp = __builtin_frame_address(0);
	uintptr_t pcs[MAXF], ref[MAXF];
	int n, noted;

	if (sp_memo_same(&sp_memo, (uintptr_t)(fp + 2), fp[0], fp[1])) {
		c->id = sp_memo.id;
		c->n = SAME;
	} else {
		pcs[0] = 1; /* stands for this frame: sp_stack_id skips it */
		n = sp_unwind_noting(&sp_memo, pcs + 1, MAXF - 1, (uintptr_t)(fp + 2), fp[0], fp[1],
				     &noted);
		c->id = n >= 0 ? sp_stack_id(pcs, n + 1) : 0;
		if (noted)
			sp_memo_done(&sp_memo, c->id);
		c->n = n;
	}
	c->frame = (uintptr_t)fp;
	n = sp_unwind(ref, MAXF);
	c->ref = n >= 0 ? sp_stack_id(ref, n) : 0;
	__asm__ volatile("" ::: "memory");
}

/* Two callers of capture_id with one frame layout: capture_id's frame is
 * at the same address under either, only the return address differs. */
__attribute__((noinline)) static void via_a(struct idcap *c)
{
	sink += 1;
	capture_id(c);
	sink += 2;
}

__attribute__((noinline)) static void via_b(struct idcap *c)
{
	sink += 3;
	capture_id(c);
	sink += 4;
}

/* via_a from two call sites of one frame: the stacks differ three frames
 * up, at a word the memo checks. */
__attribute__((noinline)) static void top(int which, struct idcap *c)
{
	if (which) {
		sink += 5;
		via_a(c);
		sink -= 7;
	} else {
		sink += 11;
		via_a(c);
		sink -= 13;
	}
}

/* c's id is the full walk's; the memo's (same 1) or walked (0) */
#define CK_ID(c, same)                                 \
	do {                                           \
		ck_assert_uint_ne((c).ref, 0);         \
		ck_assert_uint_eq((c).id, (c).ref);    \
		if (same)                              \
			ck_assert_int_eq((c).n, SAME); \
		else                                   \
			ck_assert_int_gt((c).n, 2);    \
	} while (0)

/* One call site for many walks (a loop in the test itself would be
 * unrolled into several): r[k] from fn(k, &r[k]) for k < n. */
static volatile int n_sink;

__attribute__((noinline)) static void each(void (*fn)(int, struct idcap *), struct idcap *r, int n)
{
	int k;

	for (k = 0; k < n + n_sink; k++)
		fn(k, &r[k]);
}

static int deep_n; /* deep_k's depth */

static void a_k(int k, struct idcap *c)
{
	(void)k;
	via_a(c);
}
static void a_then_b(int k, struct idcap *c)
{
	(k < 4 ? via_a : via_b)(c);
}
static void a_or_b(int k, struct idcap *c)
{
	(k % 2 ? via_b : via_a)(c);
}
static void top_k(int k, struct idcap *c)
{
	top(k / 2 % 2, c);
}
static void unload_k(int k, struct idcap *c)
{
	if (k == 3)
		atomic_fetch_add(&sp_unloads, 1);
	via_a(c);
}
static void deep_k(int k, struct idcap *c)
{
	(void)k;
	deep_id(deep_n, c);
}

/* Frame-pointer frames whose CFAs move while the leaf's frame does not:
 * fp_p1 with a 256-byte array and fp_p2 with a smaller one (fp_n2,
 * found by the test) each call fp_leaf with the rest of 512, so
 * capture_id's frame is at the same address under both, and the return
 * address into fp_p1 stays in memory (in fp_leaf's array, never written)
 * under fp_p2. Only the saved rbp the walk computed fp_leaf's CFA from
 * tells the stacks apart. */
static int fp_n2;
__attribute__((noinline)) static void fp_leaf(int m, struct idcap *c)
{
	volatile char buf[m];

	buf[0] = 1;
	capture_id(c);
	sink += buf[0];
}

__attribute__((noinline)) static void fp_p1(int n, struct idcap *c)
{
	volatile char pad[n];

	pad[0] = 0;
	fp_leaf(512 - n, c);
	sink += pad[0];
}

__attribute__((noinline)) static void fp_p2(int n, struct idcap *c)
{
	volatile char pad[n];

	pad[0] = 0;
	fp_leaf(512 - n, c);
	sink += 2u * pad[0];
}

/* Forget the walks the memo missed (and a rest from it): for patterns
 * that miss every time, so that the memo is still checked. */
static void memo_keen(void)
{
	sp_memo.state &= 1;
	sp_memo.rest = 0;
}

static void fp_k(int k, struct idcap *c)
{
	memo_keen();
	if (k % 2)
		fp_p2(fp_n2, c);
	else
		fp_p1(256, c);
}

START_TEST(test_memo)
{
	struct idcap r[12];
	int k;

	ck_assert_int_eq(sp_unwind_init(), 0);
	/* a walk from a new place is cold (rules computed), then noted,
	 * then the memo's */
	each(a_k, r, 4);
	for (k = 0; k < 4; k++)
		ck_assert_uint_eq(r[k].id, r[k].ref);
	CK_ID(r[1], 0);
	CK_ID(r[2], 1);
	CK_ID(r[3], 1);
	/* the same frame under another caller: the first word differs (each
	 * new call site is cold, then noted) */
	each(a_then_b, r, 8);
	CK_ID(r[1], 0);
	CK_ID(r[2], 1);
	CK_ID(r[3], 1);
	CK_ID(r[4], 0);
	CK_ID(r[6], 1);
	ck_assert_uint_ne(r[3].id, r[4].id);
	ck_assert_uint_eq(r[6].id, r[4].id);
	each(a_or_b, r, 8);
	for (k = 0; k < 8; k++)
		CK_ID(r[k], 0); /* every one walked */
	ck_assert_uint_eq(r[0].id, r[2].id);
	ck_assert_uint_ne(r[0].id, r[1].id);
	/* the first words are the same, the third is not: pairs */
	memo_keen();
	each(top_k, r, 12);
	for (k = 4; k < 12; k++)
		CK_ID(r[k], k % 2);
	ck_assert_uint_ne(r[4].id, r[6].id);
	ck_assert_uint_eq(r[4].id, r[8].id);
	/* the same first words, another saved rbp under fp_p2 */
	fp_p1(256, &r[0]);
	for (fp_n2 = 16; fp_n2 < 256; fp_n2 += 8) {
		fp_p2(fp_n2, &r[1]);
		if (r[1].frame == r[0].frame)
			break;
	}
	ck_assert_int_lt(fp_n2, 256);
	each(fp_k, r, 8);
	for (k = 1; k < 8; k++)
		ck_assert_uint_eq(r[k].frame, r[0].frame);
	for (k = 2; k < 8; k++)
		CK_ID(r[k], 0);
	ck_assert_uint_ne(r[6].id, r[7].id);
	/* stacks that keep changing: after 4 walks the memo did not tell, 16
	 * without it (neither checked nor noted), then it is tried again */
	memo_keen();
	each(a_or_b, r, 8);
	for (k = 0; k < 8; k++)
		CK_ID(r[k], 0);
	ck_assert_int_gt(sp_memo.rest, 8);
	ck_assert_uint_eq(sp_memo.rsp0, 0);
	{
		struct idcap many[24];

		each(a_k, many, 24);
		for (k = 0; k < 24; k++)
			ck_assert_uint_eq(many[k].id, many[k].ref);
		ck_assert_int_ge(many[4].n, 0); /* resting */
		CK_ID(many[22], 1);
		CK_ID(many[23], 1);
		ck_assert_int_eq(sp_memo.rest, 0);
	}
	/* a library unloaded: the rules may be another's, so the walk is
	 * made again (the unloads are in the id too) */
	memo_keen();
	each(unload_k, r, 5);
	CK_ID(r[2], 1);
	CK_ID(r[3], 0);
	CK_ID(r[4], 1);
	ck_assert_uint_ne(r[2].id, r[3].id);
	/* too deep to note (SP_MEMO_MAX words): walked every time, same ids */
	memo_keen();
	deep_n = SP_MEMO_MAX;
	each(deep_k, r, 4);
	for (k = 0; k < 4; k++) {
		ck_assert_uint_eq(r[k].id, r[k].ref);
		ck_assert_int_gt(r[k].n, SP_MEMO_MAX);
	}
	ck_assert_uint_eq(r[3].id, r[1].id);
	/* a walk that read no word (max 1) is not noted: sp_memo_same checks
	 * one at least */
	{
		const uintptr_t *fp = __builtin_frame_address(0);
		uintptr_t pcs[2];
		int noted = 1;

		ck_assert_int_eq(sp_unwind_noting(&sp_memo, pcs, 1, (uintptr_t)(fp + 2), fp[0],
						  fp[1], &noted),
				 1);
		ck_assert_int_eq(noted, 0);
		ck_assert_int_eq(sp_memo.state & 1, 0);
		ck_assert_int_eq(sp_unwind_noting(&sp_memo, pcs, 2, (uintptr_t)(fp + 2), fp[0],
						  fp[1], &noted),
				 2);
		ck_assert_int_eq(noted, 1);
		sp_memo_done(&sp_memo, 0);
		ck_assert(!sp_memo_same(&sp_memo, (uintptr_t)(fp + 2), fp[0], fp[1]));
	}
	/* deep, but not too deep: noted */
	memo_keen();
	deep_n = SP_MEMO_MAX / 3;
	each(deep_k, r, 4);
	CK_ID(r[2], 1);
	CK_ID(r[3], 1);
}
END_TEST

/* Mixed recursion to depth d (all three kinds of frames), then
 * capture_id; returns 0. */
__attribute__((noinline)) static int deep_id(int d, struct idcap *c)
{
	volatile char buf[(d & 7) + 16];
	int r;

	if (d == 0) {
		capture_id(c);
		return 0;
	}
	buf[d & 7] = (char)d;
	if (d % 2) {
		r = deep_id(d - 1, c);
		return r + buf[d & 7] - (char)d;
	}
	sink += d;
	r = deep_id(d - 1, c);
	sink -= (unsigned)d;
	return r;
}

/* Walks of every depth and kind from several threads at once, each twice:
 * every id capture_id gives, memo or not, is the full walk's. */
static void *memo_main(void *arg)
{
	int *bad = arg, k;
	struct idcap c;

	for (k = 0; k < 3000; k++) {
		deep_id(1 + (k / 3) % 24, &c);
		if (c.id != c.ref || !c.ref)
			(*bad)++;
		/* the third of three once warm: the memo's */
		if (k >= 24 * 3 && k % 3 == 2 && c.n != SAME)
			(*bad)++;
	}
	return NULL;
}

START_TEST(test_memo_threads)
{
	pthread_t th[WALKERS];
	int bad[WALKERS] = { 0 }, i;
	struct idcap c;

	ck_assert_int_eq(sp_unwind_init(), 0);
	for (i = 0; i < WALKERS; i++)
		ck_assert_int_eq(pthread_create(&th[i], NULL, memo_main, &bad[i]), 0);
	for (i = 0; i < WALKERS; i++) {
		pthread_join(th[i], NULL);
		ck_assert_int_eq(bad[i], 0);
	}
	deep_id(5, &c);
	ck_assert_uint_eq(c.id, c.ref);
}
END_TEST

/* ---- cost ---- */

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

__attribute__((noinline)) static int timed(int d, int which, uintptr_t *buf)
{
	int r;

	if (d == 0)
		return which ? backtrace((void **)buf, MAXF) : sp_unwind(buf, MAXF);
	sink += d;
	r = timed(d - 1, which, buf);
	sink -= r;
	return r;
}

START_TEST(test_cost)
{
	uintptr_t buf[MAXF];
	double t0, t1, t2;
	int i, n = 20000, frames;

	ck_assert_int_eq(sp_unwind_init(), 0);
	frames = timed(17, 0, buf);
	t0 = now_ns();
	for (i = 0; i < n; i++)
		timed(17, 0, buf);
	t1 = now_ns();
	for (i = 0; i < n; i++)
		timed(17, 1, buf);
	t2 = now_ns();
	printf("unwind: %d frames: cached CFI %.0f ns, backtrace() %.0f ns (not asserted)\n",
	       frames, (t1 - t0) / n, (t2 - t1) / n);
}
END_TEST

/* check_unwind --walks N: see the top of the file. */
static int walks(const char *arg)
{
	uintptr_t buf[MAXF];
	long i, n = strtol(arg, NULL, 10);
	int frames;

	if (n <= 0 || sp_unwind_init() != 0)
		return 2;
	frames = timed(19, 0, buf); /* from main: 2 frames less than test_cost */
	for (i = 0; i < n; i++)
		timed(19, 0, buf);
	printf("unwind: %ld warm walks of %d frames\n", n, frames);
	return 0;
}

/* gostack.c reads where asmcgocall keeps g and depth from its code after
 * the call of C: Go 1.19's (objdump of a go1.19.8 cgo program: g at
 * 0x30(SP), depth at 0x28(SP)), the newer one (8(SP), 0(SP)), a
 * position-independent build's get_tls first; other code is not it. */
START_TEST(test_go_restore_code)
{
	static const uint8_t go119[] = { 0x48, 0x8b, 0x7c, 0x24, 0x30, 0x48, 0x8b, 0x77,
					 0x08, 0x48, 0x2b, 0x74, 0x24, 0x28, 0x64, 0x48,
					 0x89, 0x3c, 0x25, 0xf8, 0xff, 0xff, 0xff, 0x90 };
	static const uint8_t go122[] = { 0x48, 0x8b, 0x7c, 0x24, 0x08, 0x48, 0x8b, 0x77,
					 0x08, 0x48, 0x2b, 0x34, 0x24, 0x90, 0x90, 0x90,
					 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90 };
	static const uint8_t pie[] = { 0x48, 0x8b, 0x0d, 0x10, 0x20, 0x30, 0x00, 0x48,
				       0x8b, 0x7c, 0x24, 0x30, 0x48, 0x8b, 0x77, 0x08,
				       0x48, 0x2b, 0x74, 0x24, 0x28, 0x90, 0x90, 0x90 };
	/* asmcgocall's nosave path: MOVQ 0x28(SP), SI; MOVQ SI, SP */
	static const uint8_t nosave[] = { 0x48, 0x8b, 0x74, 0x24, 0x28, 0x48, 0x89, 0xf4,
					  0x89, 0x44, 0x24, 0x18, 0xc3, 0xcc, 0xcc, 0xcc,
					  0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc };
	int g = -1, d = -1;

	ck_assert_int_eq(sp_go_restore_code(go119, &g, &d), 1);
	ck_assert_int_eq(g, 0x30);
	ck_assert_int_eq(d, 0x28);
	ck_assert_int_eq(sp_go_restore_code(go122, &g, &d), 1);
	ck_assert_int_eq(g, 8);
	ck_assert_int_eq(d, 0);
	ck_assert_int_eq(sp_go_restore_code(pie, &g, &d), 1);
	ck_assert_int_eq(g, 0x30);
	ck_assert_int_eq(d, 0x28);
	ck_assert_int_eq(sp_go_restore_code(nosave, &g, &d), 0);
	/* not a Go program: a C return address meets no Go code */
	ck_assert_int_eq(sp_go_walk(NULL, -1, 1, 0, 0, (uintptr_t)&test_go_restore_code, 0), -1);
}
END_TEST

int main(int argc, char **argv)
{
	Suite *s = suite_create("unwind");
	TCase *tc = tcase_create("matches backtrace");
	SRunner *sr;
	int failed;

	if (argc == 3 && !strcmp(argv[1], "--walks"))
		return walks(argv[2]);
	tcase_add_test(tc, test_main_thread);
	tcase_add_test(tc, test_kinds);
	tcase_add_test(tc, test_other_thread);
	suite_add_tcase(s, tc);
	tc = tcase_create("edges");
	tcase_add_test(tc, test_max);
	tcase_add_test(tc, test_errno);
	tcase_add_test(tc, test_signal);
	tcase_add_test(tc, test_memo);
	tcase_add_test(tc, test_go_restore_code);
	suite_add_tcase(s, tc);
	tc = tcase_create("threads");
	tcase_add_test(tc, test_threads);
	tcase_add_test(tc, test_memo_threads);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);
	tc = tcase_create("cost");
	tcase_add_test(tc, test_cost);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
