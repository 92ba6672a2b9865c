/* SPDX-License-Identifier: MIT */
/*
 * die_running.c - dies in the middle of an execution, for t_record_died:
 * 50 executions of `SELECT ?1 + 1`, then `SELECT x FROM t` stepped once
 * (a row of 100 read), then the death:
 *   die_running segv   raise(SIGSEGV) (the command is killed)
 *   die_running kill   SIGKILL to itself
 *   die_running child  a forked child does the above with SIGSEGV while
 *                      the parent waits, then exits 0 itself
 */
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void run_and_die(int sig)
{
	sqlite3 *db;
	sqlite3_stmt *st;

	if (sqlite3_open(":memory:", &db) != SQLITE_OK)
		_exit(2);
	sqlite3_exec(db, "CREATE TABLE t(x); WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL "
			 "SELECT i + 1 FROM c WHERE i < 100) INSERT INTO t SELECT i FROM c",
		     NULL, NULL, NULL);
	sqlite3_prepare_v2(db, "SELECT ?1 + 1", -1, &st, NULL);
	for (int i = 0; i < 50; i++) {
		sqlite3_bind_int(st, 1, i);
		while (sqlite3_step(st) == SQLITE_ROW)
			;
		sqlite3_reset(st);
	}
	sqlite3_finalize(st);
	sqlite3_prepare_v2(db, "SELECT x FROM t", -1, &st, NULL);
	if (sqlite3_step(st) != SQLITE_ROW)
		_exit(3);
	signal(sig, SIG_DFL);
	raise(sig);
	_exit(4);
}

int main(int argc, char **argv)
{
	const char *how = argc > 1 ? argv[1] : "segv";

	if (!strcmp(how, "child")) {
		pid_t pid = fork();
		int status;

		if (pid == 0)
			run_and_die(SIGSEGV);
		if (waitpid(pid, &status, 0) != pid)
			return 5;
		printf("child %s\n", WIFSIGNALED(status) ? "killed" : "exited");
		return 0;
	}
	run_and_die(!strcmp(how, "kill") ? SIGKILL : SIGSEGV);
	return 0;
}
