/* SPDX-License-Identifier: MIT */
/*
 * raw_clone.c - a child made by the raw clone system call (no fork
 * handler runs in it, as in sandboxes, container runtimes and some
 * language runtimes), which then runs SQLite: 200 executions of a
 * statement the parent prepared and ran, and of one of its own, then
 * exits with 7. The parent waits and reports the child's status, then
 * runs 100 more executions. For tests/integration/t_raw_clone.sh: the
 * child must not die because of the profiler.
 */
#include <sched.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static void run(sqlite3_stmt *st, int n)
{
	for (int i = 0; i < n; i++) {
		sqlite3_bind_int(st, 1, i);
		while (sqlite3_step(st) == SQLITE_ROW)
			;
		sqlite3_reset(st);
	}
}

int main(void)
{
	sqlite3 *db;
	sqlite3_stmt *st;
	long pid;
	int status = 0;

	if (sqlite3_open(":memory:", &db) != SQLITE_OK ||
	    sqlite3_prepare_v2(db, "SELECT ?1 AS in_parent", -1, &st, NULL) != SQLITE_OK)
		return 2;
	run(st, 100);
	fflush(stdout);
	pid = syscall(SYS_clone, SIGCHLD, NULL, NULL, NULL, NULL);
	if (pid < 0)
		return 3;
	if (pid == 0) {
		sqlite3_stmt *own;

		run(st, 200);
		if (sqlite3_prepare_v2(db, "SELECT ?1 AS in_raw_child", -1, &own, NULL) != SQLITE_OK)
			syscall(SYS_exit_group, 4);
		run(own, 200);
		sqlite3_finalize(own);
		syscall(SYS_exit_group, 7);
	}
	if (waitpid((pid_t)pid, &status, 0) != (pid_t)pid)
		return 5;
	if (WIFSIGNALED(status))
		printf("child killed by signal %d\n", WTERMSIG(status));
	else
		printf("child exited %d\n", WEXITSTATUS(status));
	run(st, 100);
	sqlite3_finalize(st);
	sqlite3_close(db);
	return 0;
}
