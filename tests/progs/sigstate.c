/* SPDX-License-Identifier: MIT */
/*
 * sigstate.c - the signal state a program starts with, and the SIGINTs it
 * receives, for the tests of how `sqlprof record` starts and signals its
 * command (tests/integration/t_record_sigstate.sh, t_record_tty_int.sh).
 *
 * usage: sigstate show
 *   Runs one query, then prints one line: the signals it started with
 *   ignored and those blocked, by name ("ignored: HUP INT PIPE blocked:
 *   USR1"); exits 0.
 * usage: sigstate count READY [MS]
 *   Counts SIGINTs: creates the file READY once its handler is in place,
 *   waits (up to 20 s) for the first SIGINT, then MS milliseconds more
 *   (default 1000), prints "SIGINT N" and exits 0. It does not check what
 *   the profiler recorded.
 */
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static volatile sig_atomic_t ints;

static void on_int(int sig)
{
	(void)sig;
	ints++;
}

static void query(void)
{
	sqlite3 *db;
	sqlite3_stmt *st;

	if (sqlite3_open(":memory:", &db) != SQLITE_OK ||
	    sqlite3_prepare_v2(db, "SELECT 6 * 7", -1, &st, NULL) != SQLITE_OK) {
		fprintf(stderr, "sigstate: sqlite: %s\n", sqlite3_errmsg(db));
		exit(1);
	}
	sqlite3_step(st);
	sqlite3_finalize(st);
	sqlite3_close(db);
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) != 0)
		;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "show")) {
		struct sigaction sa;
		sigset_t mask;

		/* before the query: nothing but the start-up state */
		sigprocmask(SIG_BLOCK, NULL, &mask);
		printf("ignored:");
		for (int s = 1; s < SIGRTMIN; s++)
			if (sigaction(s, NULL, &sa) == 0 && sa.sa_handler == SIG_IGN)
				printf(" %s", sigabbrev_np(s));
		printf(" blocked:");
		for (int s = 1; s < SIGRTMIN; s++)
			if (sigismember(&mask, s) == 1)
				printf(" %s", sigabbrev_np(s));
		printf("\n");
		query();
		return 0;
	}
	if (argc >= 3 && !strcmp(argv[1], "count")) {
		long ms = argc > 3 ? atol(argv[3]) : 1000;
		struct sigaction sa;
		FILE *f;

		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_int;
		sigemptyset(&sa.sa_mask);
		sigaction(SIGINT, &sa, NULL);
		query();
		f = fopen(argv[2], "w");
		if (!f) {
			perror(argv[2]);
			return 1;
		}
		fclose(f);
		for (int i = 0; i < 2000 && !ints; i++)
			sleep_ms(10);
		if (ints)
			sleep_ms(ms);
		printf("SIGINT %d\n", (int)ints);
		return 0;
	}
	fprintf(stderr, "usage: sigstate show | sigstate count READY [MS]\n");
	return 2;
}
