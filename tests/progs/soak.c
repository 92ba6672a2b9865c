/* SPDX-License-Identifier: MIT */
/*
 * soak.c - a service that makes new SQL texts all the time, for the
 * agent's soak (scripts/agent_soak.sh, tests/integration/t_agent_soak.sh):
 * RATE times a second for MS milliseconds it prepares a text it never ran
 * before, "SELECT ?1 + <n> AS c<n mod 50>" (50 fingerprints, a new literal
 * each time, as a service building its SQL with literals), runs it once
 * and finalizes it. Then it writes the number of executions it ran to
 * COUNTFILE (a temporary renamed) and exits 0. It does not check what the
 * profiler recorded.
 *
 * usage: soak RATE MS COUNTFILE
 */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int main(int argc, char **argv)
{
	long rate, ms, n = 0;
	long long t0, end;
	sqlite3 *db;
	char sql[96], tmp[4096];
	FILE *f;

	if (argc < 4)
		return 2;
	rate = strtol(argv[1], NULL, 10);
	ms = strtol(argv[2], NULL, 10);
	if (rate <= 0 || ms < 0 || sqlite3_open(":memory:", &db) != SQLITE_OK)
		return 1;
	t0 = now_ms();
	end = t0 + ms;
	for (;;) {
		long long t = now_ms(), due = t0 + n * 1000 / rate;
		sqlite3_stmt *st;

		if (t >= end)
			break;
		if (t < due) {
			struct timespec ts = { 0, (long)(due - t) * 1000000L };

			nanosleep(&ts, NULL);
			continue;
		}
		snprintf(sql, sizeof(sql), "SELECT ?1 + %ld AS c%ld", n, n % 50);
		if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
			return 1;
		sqlite3_bind_int64(st, 1, n);
		while (sqlite3_step(st) == SQLITE_ROW)
			;
		sqlite3_finalize(st);
		n++;
	}
	snprintf(tmp, sizeof(tmp), "%s.tmp", argv[3]);
	f = fopen(tmp, "w");
	if (!f)
		return 1;
	fprintf(f, "%ld\n", n);
	if (fclose(f) != 0 || rename(tmp, argv[3]) != 0)
		return 1;
	sqlite3_close(db);
	return 0;
}
