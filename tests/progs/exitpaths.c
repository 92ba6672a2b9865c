/* SPDX-License-Identifier: MIT */
/*
 * exitpaths.c - processes that leave without running exit handlers, for
 * tests/integration/t_exit_paths.sh.
 *
 * usage: exitpaths _exit   the parent runs 100 executions of
 *                          "SELECT ?1 AS parent_q", forks a child that runs
 *                          100 of "SELECT ?1 AS child_exit" and leaves with
 *                          _exit(0) (the usual way out of a forked child);
 *                          the parent waits and exits 0.
 *        exitpaths exec PROG [ARGS...]
 *                          runs 100 executions of "SELECT ?1 AS before_exec"
 *                          then execvp()s PROG in the same process.
 */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void run(const char *sql, int n)
{
	sqlite3 *db;
	sqlite3_stmt *st;

	if (sqlite3_open(":memory:", &db) != SQLITE_OK ||
	    sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
		fprintf(stderr, "exitpaths: cannot prepare %s\n", sql);
		exit(1);
	}
	for (int i = 0; i < n; i++) {
		sqlite3_bind_int(st, 1, i);
		while (sqlite3_step(st) == SQLITE_ROW)
			;
		sqlite3_reset(st);
	}
	sqlite3_finalize(st);
	sqlite3_close(db);
}

int main(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "_exit")) {
		pid_t pid;
		int st;

		run("SELECT ?1 AS parent_q", 100);
		pid = fork();
		if (pid < 0)
			return 1;
		if (pid == 0) {
			run("SELECT ?1 AS child_exit", 100);
			_exit(0);
		}
		if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
			return 1;
		return 0;
	}
	if (argc >= 3 && !strcmp(argv[1], "exec")) {
		run("SELECT ?1 AS before_exec", 100);
		execvp(argv[2], argv + 2);
		perror("exitpaths: exec");
		return 127;
	}
	fprintf(stderr, "usage: exitpaths _exit | exitpaths exec PROG [ARGS...]\n");
	return 2;
}
