/* SPDX-License-Identifier: MIT */
/*
 * timing_preload.c - the lower bound of any design that meets the spec:
 * an interposer that does only what the spec mandates for every execution
 * and nothing else. The spec requires the time inside every sqlite3_step
 * call of every execution, so whatever else a design does, it pays at
 * least this:
 *
 *   - interposition itself (bench/fwd_preload.c, the floor of LD_PRELOAD);
 *   - two clock reads per sqlite3_step call, around the real call: rdtsc
 *     on x86-64 (what libsqlprof.so reads when the kernel's clocksource is
 *     the TSC), clock_gettime(CLOCK_MONOTONIC) elsewhere;
 *   - accumulation in one thread-local struct (initial-exec TLS: a
 *     %fs-relative access, no __tls_get_addr): time inside step, rows,
 *     the first step's start, and at the end of an execution (a step
 *     returning anything but SQLITE_ROW, or a reset or finalize while one
 *     is in progress) a count and a sum of first step to end.
 *
 * What it does not do, and a profiler must: find the statement (there is
 * one execution in progress per thread, whatever statement it is, so
 * interleaved statements and steps nested in a user function's step are
 * conflated), nesting, per-statement or per-execution figures, SQLite's
 * counters, sampling, stacks, records, transport. Each of those only adds
 * to this, which is why its instruction count is a lower bound: a design
 * meeting the spec can shave a few instructions off this C (hand-written
 * assembly, fewer bits of the TSC), not the two clock reads and the stores
 * per step call.
 *
 * The totals are not sent anywhere. At exit, when $TIMING_OUT names a file,
 * a destructor appends the totals of the thread that calls exit() (other
 * threads' are not harvested: that would be transport) as one line:
 *
 *   TIMING pid=PID clock=tsc|ns execs=N rows=N step=TICKS wall=TICKS
 *
 * which scripts/bench_run.py uses to check that every execution was timed.
 *
 * Built by scripts/bench_build.sh; used as a `make bench` configuration
 * and by scripts/overhead.sh.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

#if defined(__x86_64__)
#define CLOCK_NAME "tsc"
/* Plain rdtsc, not serialized (no lfence, no rdtscp), as libsqlprof.so. */
static inline uint64_t now(void)
{
	uint32_t lo, hi;

	__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
	return ((uint64_t)hi << 32) | lo;
}
#else
#define CLOCK_NAME "ns"
/* CLOCK_MONOTONIC cannot fail, so errno is left alone. */
static inline uint64_t now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
#endif

/* Everything this preload keeps: one per thread, in clock units. */
struct timing {
	uint64_t start; /* clock at the first step of the execution in
			   progress; 0: none (the clock is never 0 here) */
	uint64_t step;  /* time inside sqlite3_step, every call */
	uint64_t rows;  /* steps that returned SQLITE_ROW */
	uint64_t execs; /* executions ended */
	uint64_t wall;  /* first step to end, summed over ended executions */
};

static __thread struct timing tl __attribute__((tls_model("initial-exec")));

typedef int (*stmt_fn)(sqlite3_stmt *);

/* The original of name, or abort with a message: a program calling
 * sqlite3_* has libsqlite3 loaded, so failing here is a broken set-up.
 * Tried with RTLD_NEXT, then in a libsqlite3 loaded RTLD_LOCAL (Python's
 * _sqlite3 dlopens it after this preload's constructors ran), so it is
 * resolved at the first call, not in a constructor. Stores it in *slot
 * (races are benign: every thread stores the same pointer). */
__attribute__((noinline, cold)) static stmt_fn resolve(stmt_fn *slot, const char *name)
{
	void *f = dlsym(RTLD_NEXT, name), *h;

	if (!f && (h = dlopen("libsqlite3.so.0", RTLD_NOLOAD | RTLD_LAZY)))
		f = dlsym(h, name);
	if (!f) {
		static const char msg[] = "timing_preload: cannot resolve a sqlite3 symbol\n";

		(void)!write(2, msg, sizeof(msg) - 1);
		abort();
	}
	__atomic_store_n(slot, (stmt_fn)f, __ATOMIC_RELAXED);
	return (stmt_fn)f;
}

/* real_<name> starts as a resolver that replaces itself with the original
 * and calls it, as lazy PLT binding does: the hot path is a load and an
 * indirect call, without a test for "not resolved yet". */
#define LAZY(name)                                                  \
	static int first_##name(sqlite3_stmt *st);                  \
	static stmt_fn real_##name = first_##name;                  \
	static int first_##name(sqlite3_stmt *st)                   \
	{                                                           \
		return resolve(&real_##name, "sqlite3_" #name)(st); \
	}
LAZY(step)
LAZY(reset)
LAZY(finalize)

/* The original behind real_<name>. */
#define REAL(name) __atomic_load_n(&real_##name, __ATOMIC_RELAXED)

/* End the execution in progress on this thread at time at: count it and
 * add its first step to end. */
static inline void end_execution(struct timing *t, uint64_t at)
{
	t->execs++;
	t->wall += at - t->start;
	t->start = 0;
}

/* The real sqlite3_step between two clock reads; returns its result. */
EXPORT int sqlite3_step(sqlite3_stmt *st)
{
	stmt_fn f = REAL(step);
	uint64_t t0, t1;
	struct timing *t;
	int rc;

	t0 = now();
	rc = f(st);
	t1 = now();
	t = &tl;
	t->step += t1 - t0;
	if (!t->start)
		t->start = t0;
	if (rc == SQLITE_ROW)
		t->rows++;
	else
		end_execution(t, t1);
	return rc;
}

/* Ends the execution in progress (stopped before SQLITE_DONE), then calls
 * the real sqlite3_reset and returns its result. */
EXPORT int sqlite3_reset(sqlite3_stmt *st)
{
	stmt_fn f = REAL(reset);
	struct timing *t = &tl;

	if (__builtin_expect(t->start != 0, 0))
		end_execution(t, now());
	return f(st);
}

/* As sqlite3_reset, for a statement finalized mid-execution. */
EXPORT int sqlite3_finalize(sqlite3_stmt *st)
{
	stmt_fn f = REAL(finalize);
	struct timing *t = &tl;

	if (t->start)
		end_execution(t, now());
	return f(st);
}

/* At exit, the exiting thread's totals to $TIMING_OUT (appended), if set.
 * Safe where it runs: exit() has left main, the thread's TLS is still
 * there, and it uses only getenv, open, dprintf and close. */
__attribute__((destructor)) static void report(void)
{
	const char *path = getenv("TIMING_OUT");
	int fd;

	if (!path || (fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644)) < 0)
		return;
	dprintf(fd, "TIMING pid=%d clock=%s execs=%llu rows=%llu step=%llu wall=%llu\n",
		(int)getpid(), CLOCK_NAME, (unsigned long long)tl.execs,
		(unsigned long long)tl.rows, (unsigned long long)tl.step,
		(unsigned long long)tl.wall);
	close(fd);
}
