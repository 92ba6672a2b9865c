/* SPDX-License-Identifier: MIT */
/*
 * phased.c - a service whose rate changes, for t_agent_series.sh: runs
 * SELECT ?1 + 1 exactly N1 times at RATE1 a second (phase A), sleeps
 * GAP_MS, then exactly N2 times at RATE2 (phase B). It writes, each to a
 * temporary renamed into DIR: DIR/gap when phase A is over, holding the
 * Unix time of the middle of the gap as "@SECONDS.NANOSECONDS" (a time
 * `sqlprof report --since/--until` takes); DIR/b when phase B has begun.
 * With GO, phase B waits, after the gap, for the file GO to exist (a test
 * then places its bound inside the gap however loaded the machine; 600 s
 * at most, and exit 1 when GO's directory goes). With GO2 as well, phase
 * B runs its first half, then waits the same way for GO2 (a test that
 * restarts the agent lets the second half run once the new one listens,
 * so that it sees sampled executions however loaded the machine). It does
 * not check what the profiler recorded.
 *
 * usage: phased N1 RATE1 GAP_MS N2 RATE2 DIR [GO [GO2]]
 */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static long long mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(long long ms)
{
	struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) != 0)
		;
}

/* n executions of st, rate a second */
static void phase(sqlite3_stmt *st, long n, long rate)
{
	long long t0 = mono_ms();

	for (long i = 0; i < n; i++) {
		long long due = t0 + (long long)i * 1000 / rate, t = mono_ms();

		if (t < due)
			sleep_ms(due - t);
		sqlite3_bind_int64(st, 1, i);
		while (sqlite3_step(st) == SQLITE_ROW)
			;
		sqlite3_reset(st);
	}
}

/* 1 when GO exists, 0 after 600 s of waiting, -1 when its directory
 * is gone (the test that made it has) */
static int wait_go(const char *go)
{
	char dir[4096];
	const char *slash = strrchr(go, '/');
	size_t n = slash ? (size_t)(slash - go) : 0;

	if (n >= sizeof(dir))
		return -1;
	memcpy(dir, go, n);
	dir[n] = 0;
	for (int i = 0; i < 30000; i++) {
		if (access(go, F_OK) == 0)
			return 1;
		if (n && access(dir, F_OK) != 0)
			return -1;
		sleep_ms(20);
	}
	return 0;
}

static int put(const char *dir, const char *name, const char *text)
{
	char tmp[4096], path[4096];
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s/%s.tmp", dir, name);
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(tmp, "w");
	if (!f)
		return -1;
	fputs(text, f);
	if (fclose(f) != 0 || rename(tmp, path) != 0)
		return -1;
	return 0;
}

int main(int argc, char **argv)
{
	long n1, r1, gap, n2, r2;
	struct timespec now;
	long long mid;
	sqlite3 *db;
	sqlite3_stmt *st;
	char buf[64];

	if (argc < 7 || argc > 9)
		return 2;
	n1 = strtol(argv[1], NULL, 10);
	r1 = strtol(argv[2], NULL, 10);
	gap = strtol(argv[3], NULL, 10);
	n2 = strtol(argv[4], NULL, 10);
	r2 = strtol(argv[5], NULL, 10);
	if (n1 < 0 || r1 <= 0 || gap < 0 || n2 < 0 || r2 <= 0 ||
	    sqlite3_open(":memory:", &db) != SQLITE_OK ||
	    sqlite3_prepare_v2(db, "SELECT ?1 + 1", -1, &st, NULL) != SQLITE_OK)
		return 1;
	phase(st, n1, r1);
	clock_gettime(CLOCK_REALTIME, &now);
	mid = (long long)now.tv_sec * 1000000000LL + now.tv_nsec + (long long)gap * 500000LL;
	snprintf(buf, sizeof(buf), "@%lld.%09lld\n", mid / 1000000000LL, mid % 1000000000LL);
	if (put(argv[6], "gap", buf) < 0)
		return 1;
	sleep_ms(gap);
	if (argc >= 8 && wait_go(argv[7]) < 0)
		return 1;
	if (put(argv[6], "b", "") < 0)
		return 1;
	if (argc == 9) { /* the first half, then GO2 */
		phase(st, n2 / 2, r2);
		if (wait_go(argv[8]) < 0)
			return 1;
		n2 -= n2 / 2;
	}
	phase(st, n2, r2);
	sqlite3_finalize(st);
	sqlite3_close(db);
	return 0;
}
