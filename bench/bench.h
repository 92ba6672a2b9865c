/* SPDX-License-Identifier: MIT */
/*
 * bench.h - helpers shared by the workload programs of `make bench`
 * (the programs in bench/): a monotonic clock, the process's peak RSS, and the one
 * result line each program prints last on stdout,
 *
 *   BENCH name=NAME n=EXECUTIONS loop_ns=NS maxrss_kb=KB check=SUM
 *
 * which scripts/bench_run.py parses. loop_ns covers only the timed loop
 * (CLOCK_MONOTONIC), so a profiler's start-up and shut-down are excluded;
 * maxrss_kb is the peak RSS (VmHWM) at the end. check is a
 * value computed from the query results, so the work cannot be optimised
 * away and a run that returned wrong rows is visible.
 *
 * What this header does not do: time anything itself, or retry.
 */
#ifndef SP_BENCH_H
#define SP_BENCH_H

#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static inline uint64_t bench_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Peak RSS of this program image: VmHWM from /proc/self/status, not
 * getrusage's ru_maxrss, which Linux carries across execve and so would
 * report the RSS of whatever process forked us (a Python driver, say) when
 * that was larger. -1 when unavailable. */
static inline long bench_maxrss_kb(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long kb = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmHWM: %ld kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

/* Parse argv[i] as a positive count, or return def when absent; exits 2
 * with a message on garbage. */
static inline long bench_arg(int argc, char **argv, int i, long def)
{
	char *end;
	long v;

	if (argc <= i)
		return def;
	v = strtol(argv[i], &end, 10);
	if (*argv[i] == 0 || *end || v <= 0) {
		fprintf(stderr, "%s: argument %d must be a positive integer, not '%s'\n", argv[0],
			i, argv[i]);
		exit(2);
	}
	return v;
}

/* Exit 1 with SQLite's message when rc is not what was expected. */
static inline void bench_ok(sqlite3 *db, int rc, int want, const char *what)
{
	if (rc != want) {
		fprintf(stderr, "bench: %s: rc=%d %s\n", what, rc, db ? sqlite3_errmsg(db) : "");
		exit(1);
	}
}

static inline void bench_result(const char *name, long n, uint64_t loop_ns, long long check)
{
	printf("BENCH name=%s n=%ld loop_ns=%llu maxrss_kb=%ld check=%lld\n", name, n,
	       (unsigned long long)loop_ns, bench_maxrss_kb(), check);
	fflush(stdout);
}

#endif /* SP_BENCH_H */
