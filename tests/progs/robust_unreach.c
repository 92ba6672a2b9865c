/* SPDX-License-Identifier: MIT */
/*
 * robust_unreach.c - processes that run SQLite where the profiler cannot
 * reach its collector the usual way, for
 * tests/integration/t_robust_unreach.sh and t_robust_fds.sh. Each mode
 * runs N executions (100) of a statement whose text names the mode and
 * the process, and prints one line per process that ran them.
 *
 * usage: robust_unreach MODE
 *   clearenv      clearenv() (SQLPROF_SOCK gone from the environment),
 *                 then fork: the child runs them ("clearenv child")
 *   seccomp-exec  a seccomp filter makes socket() fail with EPERM, then
 *                 the program execs itself: the new image runs them
 *   seccomp-fork  the same filter, then fork: the child runs them
 *   seccomp-true  runs them, sets the same filter, then execs /bin/true,
 *                 which runs no SQLite
 *   uid           fork; the child drops to uid and gid 65534 (nobody)
 *                 with setresgid/setresuid and runs them (needs root)
 *   uid-grandchild  fork; the child drops to nobody and forks again: the
 *                 grandchild runs them (needs root)
 *   fds LIMIT     sets RLIMIT_NOFILE to LIMIT and execs itself: the new
 *                 image opens /dev/null until EMFILE, prints how many
 *                 and the first descriptor, closes them, runs them
 * Exits 0, or 2 when a step of its own fails.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sqlite3.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define N 100

/* N executions of "SELECT 'who', ?1" on a fresh connection. */
static int run(const char *who)
{
	sqlite3 *db;
	sqlite3_stmt *st;
	char sql[128];
	long sum = 0;

	snprintf(sql, sizeof(sql), "SELECT '%s', ?1", who);
	if (sqlite3_open(":memory:", &db) != SQLITE_OK ||
	    sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		return 2;
	for (int i = 0; i < N; i++) {
		sqlite3_bind_int(st, 1, i);
		if (sqlite3_step(st) != SQLITE_ROW)
			return 2;
		sum += sqlite3_column_int(st, 1);
		sqlite3_reset(st);
	}
	sqlite3_finalize(st);
	sqlite3_close(db);
	printf("%s: %d executions, sum %ld\n", who, N, sum);
	fflush(stdout);
	return 0;
}

static int no_socket(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_socket, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = sizeof(f) / sizeof(f[0]), .filter = f };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
		perror("robust_unreach: seccomp");
		return -1;
	}
	return 0;
}

static int drop_to_nobody(void)
{
	if (setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0) {
		perror("robust_unreach: setresuid");
		return -1;
	}
	return 0;
}

/* Run fn(arg) in a forked child; its exit status. */
static int in_child(int (*fn)(const char *), const char *arg)
{
	pid_t pid = fork();
	int st;

	if (pid < 0)
		return 2;
	if (pid == 0)
		exit(fn(arg));
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return 2;
	return WEXITSTATUS(st);
}

static int uid_then_run(const char *who)
{
	return drop_to_nobody() < 0 ? 2 : run(who);
}

static int uid_then_fork(const char *who)
{
	return drop_to_nobody() < 0 ? 2 : in_child(run, who);
}

/* The fds mode's second image: fill the descriptor table, then run. */
static int fds_inner(void)
{
	int first = -1, n = 0, fd, last = -1;

	while (n < 100000 && (fd = open("/dev/null", O_RDONLY)) >= 0) {
		if (first < 0)
			first = fd;
		last = fd;
		n++;
	}
	printf("opened %d files, first fd %d\n", n, first);
	fflush(stdout);
	for (fd = first; first >= 0 && fd <= last; fd++)
		close(fd);
	return run("fds inner");
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";

	if (!strcmp(mode, "clearenv")) {
		if (run("clearenv parent"))
			return 2;
		clearenv();
		return in_child(run, "clearenv child");
	}
	if (!strcmp(mode, "seccomp-exec")) {
		if (run("seccomp parent") || no_socket() < 0)
			return 2;
		execl("/proc/self/exe", argv[0], "seccomp-inner", (char *)NULL);
		return 2;
	}
	if (!strcmp(mode, "seccomp-true")) {
		if (run("seccomp parent") || no_socket() < 0)
			return 2;
		execl("/bin/true", "true", (char *)NULL);
		return 2;
	}
	if (!strcmp(mode, "seccomp-inner"))
		return run("seccomp exec image");
	if (!strcmp(mode, "seccomp-fork")) {
		if (run("seccomp parent") || no_socket() < 0)
			return 2;
		return in_child(run, "seccomp child");
	}
	if (!strcmp(mode, "uid")) {
		if (run("uid parent"))
			return 2;
		return in_child(uid_then_run, "uid child");
	}
	if (!strcmp(mode, "uid-grandchild")) {
		if (run("uid parent"))
			return 2;
		return in_child(uid_then_fork, "uid grandchild");
	}
	if (!strcmp(mode, "fds") && argc > 2) {
		struct rlimit rl = { (rlim_t)atol(argv[2]), (rlim_t)atol(argv[2]) };

		if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
			return 2;
		execl("/proc/self/exe", argv[0], "fds-inner", (char *)NULL);
		return 2;
	}
	if (!strcmp(mode, "fds-inner"))
		return fds_inner();
	fprintf(stderr, "usage: robust_unreach clearenv|seccomp-exec|seccomp-fork|seccomp-true|uid|"
			"uid-grandchild|fds LIMIT\n");
	return 2;
}
