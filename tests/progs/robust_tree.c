/* SPDX-License-Identifier: MIT */
/*
 * robust_tree.c - a tree of N processes (default 20) made by fork and by
 * fork + exec of this same program, for tests/integration/t_robust_tree.sh.
 *
 * usage: robust_tree [N [ID]]
 * Node ID (0 for the first) opens its own in-memory connection, runs
 * 100 + ID executions of "SELECT ?1 AS tree_q", prints one line
 * "node ID pid PID ppid PPID" and starts its children 2*ID+1 and 2*ID+2
 * (when < N): the odd one by fork + execv("/proc/self/exe", ...), the even
 * one by fork alone (the child calls node() itself and leaves with exit()).
 * Every node waits for its children and exits 0 only if they all did.
 * Children run their own queries after the fork, so each process's count
 * is its own: 100 + ID.
 */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int n_nodes = 20;
static const char *self;

static int node(int id);

static pid_t start_child(int id)
{
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid < 0) {
		perror("robust_tree: fork");
		return -1;
	}
	if (pid > 0)
		return pid;
	if (id % 2) {
		char n[16], i[16];

		snprintf(n, sizeof(n), "%d", n_nodes);
		snprintf(i, sizeof(i), "%d", id);
		execl("/proc/self/exe", self, n, i, (char *)NULL);
		perror("robust_tree: exec");
		_exit(126);
	}
	exit(node(id));
}

static int node(int id)
{
	sqlite3 *db;
	sqlite3_stmt *st;
	long sum = 0;
	pid_t kids[2];
	int nk = 0, bad = 0;
	char line[128];

	if (sqlite3_open(":memory:", &db) != SQLITE_OK ||
	    sqlite3_prepare_v2(db, "SELECT ?1 AS tree_q", -1, &st, NULL) != SQLITE_OK) {
		fprintf(stderr, "robust_tree: node %d: cannot prepare\n", id);
		return 1;
	}
	for (int i = 0; i < 100 + id; i++) {
		sqlite3_bind_int(st, 1, i);
		while (sqlite3_step(st) == SQLITE_ROW)
			sum += sqlite3_column_int(st, 0);
		sqlite3_reset(st);
	}
	sqlite3_finalize(st);
	sqlite3_close(db);
	/* One write per line: lines of concurrent processes never interleave. */
	snprintf(line, sizeof(line), "node %d pid %d ppid %d sum %ld\n", id, (int)getpid(),
		 (int)getppid(), sum);
	if (write(1, line, strlen(line)) < 0)
		return 1;
	for (int c = 2 * id + 1; c <= 2 * id + 2 && c < n_nodes; c++) {
		pid_t p = start_child(c);

		if (p < 0)
			bad = 1;
		else
			kids[nk++] = p;
	}
	for (int k = 0; k < nk; k++) {
		int status;

		if (waitpid(kids[k], &status, 0) != kids[k] || !WIFEXITED(status) ||
		    WEXITSTATUS(status) != 0)
			bad = 1;
	}
	return bad;
}

int main(int argc, char **argv)
{
	int id = 0;

	self = argv[0];
	if (argc > 1)
		n_nodes = atoi(argv[1]);
	if (argc > 2)
		id = atoi(argv[2]);
	if (n_nodes < 1 || n_nodes > 1000 || id < 0 || id >= n_nodes) {
		fprintf(stderr, "usage: robust_tree [N(1..1000) [ID]]\n");
		return 2;
	}
	return node(id);
}
