/* SPDX-License-Identifier: MIT */
/*
 * config.c - the preload's configuration (SQLPROF_* variables, read once
 * in the constructor) and its clock. A bad value is one warning line and
 * the default; nothing here runs on the execution path.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "sp_preload.h"

struct sp_config sp_cfg = {
	.enabled = 0,
	.depth = 64,
	.send_timeout_ms = 100,
	.follow = 1,
	.plans = 1,
	.plans_max = SP_PLANS_MAX_DEFAULT,
	.params = 1,
};
int sp_clock_tsc;

#define DEFAULT_RATE 0.01
#define DEFAULT_SLOW_MS 100

uint64_t sp_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int sp_env_bad;

/* A bad SQLPROF_* value: the default is used, and the statistics say so
 * (SP_SEEN_BAD_ENV). Nothing is written to the program's stderr: its
 * output is its own, and one warning per process was 35 lines for one
 * pyenv Python run. sqlprof record checks the same variables itself and
 * warns once per run (unless -q). */
void sp_warn_bad(const char *var, const char *val, const char *why)
{
	(void)var;
	(void)val;
	(void)why;
	sp_env_bad = 1;
	sp_stats_note_seen(SP_SEEN_BAD_ENV);
}

static int env_double(const char *var, double lo, double hi, double *out)
{
	const char *v = getenv(var);
	char *end;
	double d;

	if (!v || !*v)
		return 0;
	errno = 0;
	d = strtod(v, &end);
	if (errno || *end || !(d >= lo && d <= hi)) { /* also rejects NaN */
		char why[64];

		snprintf(why, sizeof(why), "expected a number from %g to %g", lo, hi);
		sp_warn_bad(var, v, why);
		return 0;
	}
	*out = d;
	return 1;
}

static int env_long(const char *var, long lo, long hi, long *out)
{
	const char *v = getenv(var);
	char *end;
	long l;

	if (!v || !*v)
		return 0;
	errno = 0;
	l = strtol(v, &end, 10);
	if (errno || *end || l < lo || l > hi) {
		char why[64];

		snprintf(why, sizeof(why), "expected an integer from %ld to %ld", lo, hi);
		sp_warn_bad(var, v, why);
		return 0;
	}
	*out = l;
	return 1;
}

static int kernel_clock_is_tsc(void)
{
	char buf[32] = { 0 };
	int fd = open("/sys/devices/system/clocksource/clocksource0/current_clocksource",
		      O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	return n >= 3 && strncmp(buf, "tsc", 3) == 0 && (n == 3 || buf[3] == '\n');
}

/*
 * Whether the TSC may time executions when the kernel keeps another
 * clocksource (kvm-clock, hyperv_clocksource, xen: every cloud VM): the
 * CPU says its TSC is invariant - it runs at one rate in every P-, C- and
 * T-state (CPUID 0x80000007 EDX bit 8, which Linux shows as constant_tsc
 * and nonstop_tsc) - and rdtsc is allowed in this process (PR_GET_TSC; a
 * process that sets PR_TSC_SIGSEGV would fault on it). A kernel that
 * prefers its paravirtual clock does so for the wall clock's long-term
 * accuracy, not because the TSC cannot measure microseconds; an interval
 * that still comes out negative (a thread moved between unsynchronised
 * counters, a host that paused) is clamped to 0 and counted
 * (sp_stats_hdr.clamped).
 */
static int tsc_invariant(void)
{
	unsigned a, b, c, d;
	int tsc = 0;

	__asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(0x80000000u), "c"(0));
	if (a < 0x80000007u)
		return 0;
	__asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(0x80000007u), "c"(0));
	if (!(d & (1u << 8)))
		return 0;
	if (prctl(PR_GET_TSC, &tsc, 0, 0, 0) == 0 && tsc == PR_TSC_SIGSEGV)
		return 0;
	return 1;
}

/* SQLPROF_CLOCK=auto: the TSC when the kernel uses it, or the CPU's is
 * invariant. */
static int clock_auto(void)
{
	return kernel_clock_is_tsc() || tsc_invariant();
}

/* SQLPROF_CLOCK=tsc: the TSC whatever the CPU says, unless rdtsc would
 * fault here. */
static int clock_forced_tsc(void)
{
	int tsc = 0;

	return !(prctl(PR_GET_TSC, &tsc, 0, 0, 0) == 0 && tsc == PR_TSC_SIGSEGV);
}

void sp_read_config(void)
{
	double rate = DEFAULT_RATE, slow_ms = DEFAULT_SLOW_MS;
	long l;
	const char *clk;

	env_double("SQLPROF_RATE", 0.0, 1.0, &rate);
	sp_cfg.rate = rate;
	sp_cfg.rate_one = rate >= 1.0;
	sp_cfg.log_q = rate > 0.0 && rate < 1.0 ? log1p(-rate) : 0.0;
	if (env_long("SQLPROF_SEED", 0, LONG_MAX, &l))
		sp_cfg.seed = (uint64_t)l;
	else
		sp_cfg.seed = sp_mono_ns() ^ ((uint64_t)getpid() << 32);
	env_double("SQLPROF_SLOW_MS", 0.0, 86400000.0, &slow_ms);
	if (env_long("SQLPROF_DEPTH", 1, SP_STACK_MAX, &l))
		sp_cfg.depth = (int)l;
	if (env_long("SQLPROF_SEND_TIMEOUT_MS", 0, 10000, &l))
		sp_cfg.send_timeout_ms = (int)l;
	if (env_long("SQLPROF_FOLLOW", 0, 1, &l))
		sp_cfg.follow = (int)l;
	if (env_long("SQLPROF_PARAMS", 0, 2, &l))
		sp_cfg.params = (int)l;
	/* about 1 % of all executions hashed at most, whatever the rate */
	sp_cfg.params_keep =
		rate > 0.01 ? (uint64_t)(0.01 / rate * 18446744073709551615.0) : UINT64_MAX;
	sp_cfg.texts_per_shape = 64;
	if (env_long("SQLPROF_TEXTS_PER_SHAPE", 0, 1L << 30, &l))
		sp_cfg.texts_per_shape = l;
	sp_cfg.inline_path = 1;
	if (env_long("SQLPROF_INLINE", 0, 1, &l))
		sp_cfg.inline_path = (int)l;
	if (env_long("SQLPROF_PLANS", 0, 1, &l))
		sp_cfg.plans = (int)l;
	if (env_long("SQLPROF_PLANS_MAX", 1, SP_PLANS_MAX_LIMIT, &l))
		sp_cfg.plans_max = l;

	clk = getenv("SQLPROF_CLOCK");
	if (clk && strcmp(clk, "monotonic") == 0)
		sp_clock_tsc = 0;
	else if (clk && strcmp(clk, "tsc") == 0)
		sp_clock_tsc = clock_forced_tsc();
	else if (clk && *clk && strcmp(clk, "auto") != 0) {
		sp_warn_bad("SQLPROF_CLOCK", clk, "expected auto, tsc or monotonic");
		sp_clock_tsc = clock_auto();
	} else
		sp_clock_tsc = clock_auto();
	sp_cfg.slow_ticks = (uint64_t)(slow_ms * 1e6); /* ns; to ticks in sp_init */
	sp_cfg.slow_span = sp_cfg.slow_ticks ? sp_cfg.slow_ticks : (uint64_t)1 << 63;
	sp_cfg.loop_gap = SP_LOOP_GAP_NS; /* ns; to ticks in sp_init */
}
