/* SPDX-License-Identifier: MIT */
/*
 * exact_fork.c - an execution open at fork(): the parent reads one row of
 * a 1000-row SELECT, forks; the child finalizes its copy of the statement
 * and closes its copy of the connection (as Python's and Perl's object
 * destructors do), then exits; the parent reads the other 999 rows to
 * SQLITE_DONE. For tests/integration/t_exact_fork.sh: one execution, 1000
 * rows - the child must not count the parent's execution a second time.
 * The child then runs 5 executions of its own ("SELECT 1 AS in_child"),
 * counted under its own pid. Prints the parent's row count; exits 0.
 */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

int main(void)
{
	sqlite3 *db;
	sqlite3_stmt *st;
	long rows = 0;
	pid_t pid;
	int status;

	if (sqlite3_open(":memory:", &db) != SQLITE_OK ||
	    sqlite3_prepare_v2(db,
			       "WITH RECURSIVE c(x) AS (VALUES(1) UNION ALL SELECT x + 1 FROM c "
			       "WHERE x < 1000) SELECT x AS open_at_fork FROM c",
			       -1, &st, NULL) != SQLITE_OK)
		return 2;
	if (sqlite3_step(st) != SQLITE_ROW)
		return 2;
	rows = 1;
	fflush(stdout);
	pid = fork();
	if (pid < 0)
		return 2;
	if (pid == 0) {
		sqlite3_stmt *own;
		int i;

		sqlite3_finalize(st);
		if (sqlite3_prepare_v2(db, "SELECT 1 AS in_child", -1, &own, NULL) != SQLITE_OK)
			_exit(3);
		for (i = 0; i < 5; i++) {
			while (sqlite3_step(own) == SQLITE_ROW)
				;
			sqlite3_reset(own);
		}
		sqlite3_finalize(own);
		sqlite3_close(db);
		exit(0);
	}
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status))
		return 4;
	while (sqlite3_step(st) == SQLITE_ROW)
		rows++;
	sqlite3_finalize(st);
	sqlite3_close(db);
	printf("%ld rows\n", rows);
	return 0;
}
