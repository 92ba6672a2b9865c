/* SPDX-License-Identifier: MIT */
/*
 * deep.c - the cost of one stack capture. Recurses DEPTH levels through
 * four noinline functions (built -O2 without frame pointers, so the
 * unwinder must use the DWARF CFI, as in most shipped binaries) and, at
 * the bottom, times each of N operations one by one with CLOCK_MONOTONIC:
 *
 *   query      one execution of SELECT ?1+1 (bind, step to DONE, reset);
 *              run under sqlprof at --rate 1 and --rate 0, the difference
 *              of the per-execution times is what taking the stack costs
 *              (backtrace, hash, stack-id lookup, the larger record);
 *   backtrace  one call of glibc's backtrace() into a 64-entry buffer,
 *              the floor for any in-process unwinder of this design.
 *
 * The first N/10 operations warm up and are not counted. Prints the
 * BENCH line (bench.h) with frames (what backtrace() returns at the
 * bottom: the recursion, bottom, main and libc's start frames),
 * median_ns and p99_ns of the counted operations.
 *
 * Usage: deep query|backtrace [N [DEPTH]]   (default 200000 15)
 */
#include <execinfo.h>
#include <string.h>

#include "bench.h"

struct ctx {
	int query;
	long n;
	sqlite3_stmt *st;
	uint64_t *ns;
	int frames;
};

#define NOINLINE __attribute__((noinline, noclone))

static NOINLINE long bottom(struct ctx *c)
{
	void *pcs[64];
	long i, warm = c->n / 10, sum = 0;

	c->frames = backtrace(pcs, 64);
	for (i = -warm; i < c->n; i++) {
		uint64_t t0 = bench_now_ns(), t1;

		if (c->query) {
			sqlite3_bind_int64(c->st, 1, i);
			while (sqlite3_step(c->st) == SQLITE_ROW)
				sum += sqlite3_column_int64(c->st, 0);
			sqlite3_reset(c->st);
		} else {
			sum += backtrace(pcs, 64);
		}
		t1 = bench_now_ns();
		if (i >= 0)
			c->ns[i] = t1 - t0;
	}
	return sum;
}

/* Four distinct functions, so the unwinder sees different return
 * addresses as a real call chain would; the empty asm after each call
 * keeps it from being a tail call, so every level is a real frame. */
static long fa(int d, struct ctx *c);
#define LEVEL(name, next)                                    \
	static NOINLINE long name(int d, struct ctx *c)      \
	{                                                    \
		long r = d > 0 ? next(d - 1, c) : bottom(c); \
		__asm__ volatile("" : "+r"(r));              \
		return r + 1;                                \
	}
LEVEL(fd, fa)
LEVEL(fc, fd)
LEVEL(fb, fc)
LEVEL(fa, fb)

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	struct ctx c = { 0 };
	long depth;
	sqlite3 *db = NULL;
	uint64_t t0, t1;
	long long sum;

	if (argc < 2 || (strcmp(argv[1], "query") && strcmp(argv[1], "backtrace"))) {
		fprintf(stderr, "usage: deep query|backtrace [N [DEPTH]]\n");
		return 2;
	}
	c.query = !strcmp(argv[1], "query");
	c.n = bench_arg(argc, argv, 2, 200000);
	depth = bench_arg(argc, argv, 3, 15);
	c.ns = malloc((size_t)c.n * sizeof(*c.ns));
	if (!c.ns)
		return 1;
	bench_ok(db, sqlite3_open(":memory:", &db), SQLITE_OK, "open");
	bench_ok(db, sqlite3_prepare_v2(db, "SELECT ?1+1", -1, &c.st, NULL), SQLITE_OK, "prepare");
	t0 = bench_now_ns();
	sum = fa((int)depth - 1, &c);
	t1 = bench_now_ns();
	qsort(c.ns, (size_t)c.n, sizeof(*c.ns), cmp_u64);
	printf("BENCH name=deep mode=%s frames=%d median_ns=%llu p99_ns=%llu n=%ld loop_ns=%llu "
	       "maxrss_kb=%ld check=%lld\n",
	       argv[1], c.frames, (unsigned long long)c.ns[c.n / 2],
	       (unsigned long long)c.ns[c.n * 99 / 100], c.n, (unsigned long long)(t1 - t0),
	       bench_maxrss_kb(), sum);
	sqlite3_finalize(c.st);
	sqlite3_close(db);
	free(c.ns);
	return 0;
}
