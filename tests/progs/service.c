/* SPDX-License-Identifier: MIT */
/*
 * service.c - a long-running service for the agent's tests
 * (tests/integration/t_agent_*.sh): runs one query, SELECT ?1 + 1 from a
 * prepared statement, RATE times a second for MS milliseconds (MS 0 with
 * STOP: until the file STOP exists, so that a test's events fall inside
 * the service's life however loaded the machine; bounded all the same:
 * 600 s at most, and no longer than STOP's directory exists), then writes the number
 * of executions it ran to COUNTFILE (written to a temporary and renamed)
 * and exits 0; with STOP, it then waits for the file STOP to exist before
 * it exits (to be killed). It does not check what the profiler recorded.
 *
 * usage: service RATE MS COUNTFILE [STOP]
 */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* MS 0: STOP exists, or its directory does not (the test that made it
 * has gone), or 600 s have passed */
static int stop_now(const char *stop, long long ran_ms)
{
	char dir[4096];
	const char *slash = strrchr(stop, '/');
	size_t n = slash ? (size_t)(slash - stop) : 0;

	if (ran_ms >= 600000 || access(stop, F_OK) == 0)
		return 1;
	if (!n || n >= sizeof(dir))
		return 0;
	memcpy(dir, stop, n);
	dir[n] = 0;
	return access(dir, F_OK) != 0;
}

int main(int argc, char **argv)
{
	long rate, ms, n = 0;
	long long t0, end;
	sqlite3 *db;
	sqlite3_stmt *st;
	char tmp[4096];
	FILE *f;

	if (argc < 4)
		return 2;
	rate = strtol(argv[1], NULL, 10);
	ms = strtol(argv[2], NULL, 10);
	if (rate <= 0 || ms < 0 || (ms == 0 && argc < 5) || sqlite3_open(":memory:", &db) != SQLITE_OK ||
	    sqlite3_prepare_v2(db, "SELECT ?1 + 1", -1, &st, NULL) != SQLITE_OK)
		return 1;
	t0 = now_ms();
	end = t0 + ms;
	for (;;) {
		long long t = now_ms(), due = t0 + n * 1000 / rate;

		if (ms ? t >= end : stop_now(argv[4], t - t0))
			break;
		if (t < due) {
			struct timespec ts = { 0, (long)(due - t) * 1000000L };

			nanosleep(&ts, NULL);
			continue;
		}
		sqlite3_bind_int64(st, 1, n);
		while (sqlite3_step(st) == SQLITE_ROW)
			;
		sqlite3_reset(st);
		n++;
	}
	snprintf(tmp, sizeof(tmp), "%s.tmp", argv[3]);
	f = fopen(tmp, "w");
	if (!f)
		return 1;
	fprintf(f, "%ld\n", n);
	if (fclose(f) != 0 || rename(tmp, argv[3]) != 0)
		return 1;
	while (argc > 4 && access(argv[4], F_OK) != 0) {
		struct timespec ts = { 0, 20000000 };

		nanosleep(&ts, NULL);
	}
	sqlite3_finalize(st);
	sqlite3_close(db);
	return 0;
}
