/* SPDX-License-Identifier: MIT */
/*
 * forker.c - for tests/integration/t_fork.sh: the parent runs 100
 * executions of "SELECT ?1 AS parent_q", then forks 3 children; child k
 * opens its own connection, runs 100 executions of "SELECT ?1 AS child_<k>"
 * and exits with exit(0). The parent waits for all of them, prints a
 * checksum and exits 0 (1 if a child failed).
 */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static long run(const char *sql, int n)
{
	sqlite3 *db;
	sqlite3_stmt *st;
	long sum = 0;

	if (sqlite3_open(":memory:", &db) != SQLITE_OK ||
	    sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
		fprintf(stderr, "forker: cannot prepare %s\n", sql);
		exit(1);
	}
	for (int i = 0; i < n; i++) {
		sqlite3_bind_int(st, 1, i);
		while (sqlite3_step(st) == SQLITE_ROW)
			sum += sqlite3_column_int(st, 0);
		sqlite3_reset(st);
	}
	sqlite3_finalize(st);
	sqlite3_close(db);
	return sum;
}

int main(void)
{
	pid_t kids[3];
	long sum = run("SELECT ?1 AS parent_q", 100);
	int bad = 0;

	fflush(stdout);
	for (int k = 0; k < 3; k++) {
		kids[k] = fork();
		if (kids[k] < 0) {
			perror("forker: fork");
			return 1;
		}
		if (kids[k] == 0) {
			char sql[64];

			snprintf(sql, sizeof(sql), "SELECT ?1 AS child_%d", k);
			run(sql, 100);
			exit(0);
		}
	}
	for (int k = 0; k < 3; k++) {
		int st;

		if (waitpid(kids[k], &st, 0) != kids[k] || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
			bad = 1;
	}
	printf("sum=%ld\n", sum);
	return bad;
}
