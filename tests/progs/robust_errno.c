/* SPDX-License-Identifier: MIT */
/*
 * robust_errno.c - errno as the program sees it around SQLite calls, for
 * tests/integration/t_robust_errno.sh. C guarantees errno 0 at the start
 * of main, and none of the calls below sets it (they succeed): the
 * profiler must not change it either, whatever becomes of its collector.
 *
 * usage: robust_errno [STARTED GO]
 * Prints errno at the start of main, then runs a few queries in this
 * process. With STARTED and GO: creates STARTED, waits (up to 30 s) for
 * GO (the test kills the collector meanwhile), then forks; the child
 * steps a statement prepared before (its first SQLite call, where the
 * profiler connects again), then prepares, steps, resets, finalizes and
 * execs, and the parent does the same, with errno set to EXDEV before
 * every call. Every line says the errno
 * seen after the call; exits 0.
 */
#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static sqlite3 *db;
static sqlite3_stmt *kept; /* prepared at the start: a child's first call steps it */

/* errno after each kind of call, EXDEV before it. */
static void calls(const char *who)
{
	sqlite3_stmt *st = NULL;
	int e[8];

	errno = EXDEV;
	sqlite3_step(kept);
	e[0] = errno;
	errno = EXDEV;
	sqlite3_reset(kept);
	e[1] = errno;
	errno = EXDEV;
	sqlite3_prepare_v2(db, "SELECT ?1 + 1", -1, &st, NULL);
	e[2] = errno;
	errno = EXDEV;
	sqlite3_step(st);
	e[3] = errno;
	errno = EXDEV;
	sqlite3_step(st);
	e[4] = errno;
	errno = EXDEV;
	sqlite3_reset(st);
	e[5] = errno;
	errno = EXDEV;
	sqlite3_finalize(st);
	e[6] = errno;
	errno = EXDEV;
	sqlite3_exec(db, "SELECT 2", NULL, NULL, NULL);
	e[7] = errno;
	printf("%s: errno after step %d, reset %d, prepare %d, step %d, step %d, reset %d, "
	       "finalize %d, exec %d (EXDEV is %d)\n",
	       who, e[0], e[1], e[2], e[3], e[4], e[5], e[6], e[7], EXDEV);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	int at_main = errno;
	pid_t pid;

	printf("errno at the start of main: %d\n", at_main);
	fflush(stdout);
	if (sqlite3_open(":memory:", &db) != SQLITE_OK ||
	    sqlite3_prepare_v2(db, "SELECT 1", -1, &kept, NULL) != SQLITE_OK)
		return 2;
	calls("first");
	if (argc < 3)
		return 0;
	{
		FILE *f = fopen(argv[1], "w");

		if (!f)
			return 2;
		fclose(f);
		for (int w = 0; w < 3000 && access(argv[2], F_OK) != 0; w++) {
			struct timespec ts = { 0, 10000000 };

			nanosleep(&ts, NULL);
		}
	}
	pid = fork();
	if (pid < 0)
		return 2;
	if (pid == 0) {
		calls("child");
		_exit(0);
	}
	waitpid(pid, NULL, 0);
	calls("parent");
	return 0;
}
