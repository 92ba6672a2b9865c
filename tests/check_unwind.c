/* SPDX-License-Identifier: MIT */
/*
 * check_unwind.c - the preload's cached CFI unwinder (preload/unwind.c)
 * against glibc's backtrace() on the same stacks: recursion through
 * noinline functions built -O2 without frame pointers, in the main thread
 * and in a second thread, cold and warm cache. Prints the cost of both
 * (not asserted: timing is noisy here).
 */
#include <check.h>
#include <execinfo.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "../preload/unwind.c"

#define MAXF 128

struct cap {
	uintptr_t ours[MAXF];
	void *ref[MAXF];
	int n_ours, n_ref;
};

__attribute__((noinline)) static void capture(struct cap *c)
{
	c->n_ours = sp_unwind(c->ours, MAXF);
	c->n_ref = backtrace(c->ref, MAXF);
	__asm__ volatile("" ::: "memory");
}

static volatile int sink;

__attribute__((noinline)) static int recurse(int d, struct cap *c)
{
	int r;

	if (d == 0) {
		capture(c);
		return 1;
	}
	/* work on both sides of the call so it is no tail call and the
	 * frame has something to restore */
	sink += d;
	r = recurse(d - 1, c) + d;
	sink -= r;
	return r;
}

static void check_same(const struct cap *c)
{
	int i;

	int n = c->n_ours < c->n_ref ? c->n_ours : c->n_ref;

	ck_assert_int_gt(c->n_ours, 20);
	/* [0] are two different return addresses inside capture(); from [1]
	 * on both walks see the same callers, to the outermost frame. */
	int shift = 0;

#if defined(__SANITIZE_ADDRESS__)
	/* ASan intercepts backtrace(): its walk starts with a frame of the
	 * interceptor. Align the two walks on our caller's frame. */
	while (shift < c->n_ref - 1 && (uintptr_t)c->ref[1 + shift] != c->ours[1])
		shift++;
	n = c->n_ours < c->n_ref - shift ? c->n_ours : c->n_ref - shift;
	ck_assert_int_gt(n, 20);
#else
	ck_assert_int_eq(c->n_ours, c->n_ref);
#endif
	for (i = 1; i < n; i++)
		ck_assert_msg(c->ours[i] == (uintptr_t)c->ref[i + shift], "frame %d: %#lx vs %p", i,
			      (unsigned long)c->ours[i], c->ref[i + shift]);
}

START_TEST(test_main_thread)
{
	struct cap c;

	ck_assert_int_eq(sp_unwind_init(), 0);
	recurse(20, &c); /* cold cache */
	check_same(&c);
	recurse(20, &c); /* warm */
	check_same(&c);
	recurse(7, &c);
#if !defined(__SANITIZE_ADDRESS__)
	ck_assert_int_eq(c.n_ours, c.n_ref);
#endif
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

	ck_assert_int_eq(sp_unwind_init(), 0);
	ck_assert_int_eq(pthread_create(&th, NULL, thread_main, &c), 0);
	pthread_join(th, NULL);
	check_same(&c);
}
END_TEST

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
	printf("unwind: %d frames: cached CFI %.0f ns, backtrace() %.0f ns (not asserted)\n", frames,
	       (t1 - t0) / n, (t2 - t1) / n);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("unwind");
	TCase *tc = tcase_create("matches backtrace");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_main_thread);
	tcase_add_test(tc, test_other_thread);
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
