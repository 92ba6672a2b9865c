/* SPDX-License-Identifier: MIT */
/*
 * sigstep.c - sqlite3_step from a SIGALRM handler, on the thread that the
 * signal interrupts (for tests/integration/t_guest_signal.sh).
 *
 * usage: sigstep N [INTERVAL_US]
 * The main thread runs N executions of `SELECT count(*) FROM t WHERE a > ?`
 * and N/10 of ten other texts (each its first execution while the timer
 * runs: the profiler makes query records then); a setitimer(ITIMER_REAL)
 * every INTERVAL_US microseconds (default 50) delivers SIGALRM, whose
 * handler runs one execution of `SELECT ?1 + 1` on a second connection
 * prepared in advance (INTERVAL_US 0: no timer, a debugger delivers the
 * signal: t_guest_signal_drawn.sh). Correct without a profiler: SQLite is configured
 * single-threaded without memory statistics (no mutex a handler could
 * meet held), the handler's connection is its own and its statement was
 * stepped once before the timer starts (nothing left to allocate), and
 * the main thread's prepares, which allocate, run with SIGALRM blocked.
 * Prints the executions each side ran; exits 0, or 1 on an SQLite error.
 */
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

static sqlite3_stmt *hs; /* the handler's statement */
static volatile sig_atomic_t handler_execs, handler_errs, in_main_step;
static volatile sig_atomic_t during_step; /* handler runs inside main's step */

static void on_alarm(int sig)
{
	(void)sig;
	if (in_main_step)
		during_step++;
	sqlite3_bind_int(hs, 1, (int)handler_execs);
	if (sqlite3_step(hs) != SQLITE_ROW)
		handler_errs++;
	while (sqlite3_step(hs) == SQLITE_ROW)
		;
	sqlite3_reset(hs);
	handler_execs++;
}

static void die(sqlite3 *db, const char *what)
{
	fprintf(stderr, "sigstep: %s: %s\n", what, sqlite3_errmsg(db));
	exit(1);
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 20000, i, main_execs = 0;
	long us = argc > 2 ? atol(argv[2]) : 50;
	sqlite3 *db, *hdb;
	sqlite3_stmt *st;
	struct itimerval it;
	sigset_t alrm, old;
	struct sigaction sa;

	if (n < 10 || us < 0 || us >= 1000000) {
		fprintf(stderr, "usage: sigstep N [INTERVAL_US]\n");
		return 2;
	}
	sqlite3_config(SQLITE_CONFIG_SINGLETHREAD);
	sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
	if (sqlite3_open(":memory:", &db) != SQLITE_OK || sqlite3_open(":memory:", &hdb) != SQLITE_OK)
		return 1;
	if (sqlite3_exec(db, "CREATE TABLE t(a INTEGER PRIMARY KEY, b TEXT)", NULL, NULL, NULL) !=
	    SQLITE_OK)
		die(db, "create");
	main_execs++; /* the exec's statement */
	if (sqlite3_prepare_v2(db, "INSERT INTO t(b) VALUES ('x')", -1, &st, NULL) != SQLITE_OK)
		die(db, "prepare insert");
	for (i = 0; i < 100; i++) {
		if (sqlite3_step(st) != SQLITE_DONE)
			die(db, "insert");
		sqlite3_reset(st);
		main_execs++;
	}
	sqlite3_finalize(st);
	if (sqlite3_prepare_v2(hdb, "SELECT ?1 + 1", -1, &hs, NULL) != SQLITE_OK)
		die(hdb, "prepare handler's");
	on_alarm(0); /* once before the timer: its first execution */

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGALRM, &sa, NULL);
	sigemptyset(&alrm);
	sigaddset(&alrm, SIGALRM);
	it.it_interval.tv_sec = 0;
	it.it_interval.tv_usec = us;
	it.it_value = it.it_interval;
	if (us > 0 && setitimer(ITIMER_REAL, &it, NULL) != 0) {
		perror("sigstep: setitimer");
		return 1;
	}

	if (sqlite3_prepare_v2(db, "SELECT count(*) FROM t WHERE a > ?", -1, &st, NULL) != SQLITE_OK)
		die(db, "prepare select");
	for (i = 0; i < n; i++) {
		sqlite3_bind_int(st, 1, (int)(i % 50));
		in_main_step = 1;
		if (sqlite3_step(st) != SQLITE_ROW)
			die(db, "select");
		while (sqlite3_step(st) == SQLITE_ROW)
			;
		in_main_step = 0;
		sqlite3_reset(st);
		main_execs++;
		if (i % (n / 10) == 0) {
			/* a new text: prepared with SIGALRM blocked (it allocates),
			 * its first execution (a new query record) not */
			sqlite3_stmt *o;
			char sql[64];

			snprintf(sql, sizeof(sql), "SELECT %ld + count(*) FROM t", i);
			sigprocmask(SIG_BLOCK, &alrm, &old);
			if (sqlite3_prepare_v2(db, sql, -1, &o, NULL) != SQLITE_OK)
				die(db, "prepare other");
			sigprocmask(SIG_SETMASK, &old, NULL);
			while (sqlite3_step(o) == SQLITE_ROW)
				;
			main_execs++;
			sigprocmask(SIG_BLOCK, &alrm, &old);
			sqlite3_finalize(o);
			sigprocmask(SIG_SETMASK, &old, NULL);
		}
	}
	memset(&it, 0, sizeof(it));
	setitimer(ITIMER_REAL, &it, NULL);
	sigprocmask(SIG_BLOCK, &alrm, NULL);
	sqlite3_finalize(st);
	sqlite3_finalize(hs);
	sqlite3_close(db);
	sqlite3_close(hdb);
	if (handler_errs) {
		fprintf(stderr, "sigstep: %d handler errors\n", (int)handler_errs);
		return 1;
	}
	/* to stderr: the counts vary from run to run */
	fprintf(stderr, "main %ld handler %ld total %ld during_step %ld\n", main_execs,
		(long)handler_execs, main_execs + (long)handler_execs, (long)during_step);
	printf("done\n");
	return 0;
}
