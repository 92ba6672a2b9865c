/* SPDX-License-Identifier: MIT */
/*
 * seclate.c - a program that confines itself with a seccomp allowlist
 * after its first queries, then runs queries in new threads (for
 * tests/integration/t_guest_seccomp.sh).
 *
 * usage: seclate THREADS N
 * Runs N executions on the main thread, then installs (PR_SET_NO_NEW_PRIVS,
 * a raw BPF filter) an allowlist of what it used so far and what glibc
 * needs to make, run and join threads and to allocate; anything else
 * kills the process (SIGSYS). Then THREADS threads one after another each
 * open an in-memory database and run N executions of a prepared INSERT
 * and N of a SELECT, and main prints the totals. Exits 0, 1 on an SQLite
 * or thread error, 2 on bad usage or when the filter cannot be installed.
 */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static long n;

static int run(long *sum)
{
	sqlite3 *db;
	sqlite3_stmt *ins, *sel;
	long i;

	if (sqlite3_open(":memory:", &db) != SQLITE_OK ||
	    sqlite3_exec(db, "CREATE TABLE t(a INTEGER PRIMARY KEY, b)", NULL, NULL, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(db, "INSERT INTO t(b) VALUES (?1)", -1, &ins, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(db, "SELECT count(*) FROM t WHERE b < ?1", -1, &sel, NULL) != SQLITE_OK)
		return 1;
	for (i = 0; i < n; i++) {
		sqlite3_bind_int64(ins, 1, i);
		if (sqlite3_step(ins) != SQLITE_DONE)
			return 1;
		sqlite3_reset(ins);
		sqlite3_bind_int64(sel, 1, i);
		while (sqlite3_step(sel) == SQLITE_ROW)
			*sum += sqlite3_column_int64(sel, 0);
		sqlite3_reset(sel);
	}
	sqlite3_finalize(ins);
	sqlite3_finalize(sel);
	sqlite3_close(db);
	return 0;
}

static void *thread_main(void *arg)
{
	return run(arg) ? (void *)1 : NULL;
}

#define ALLOW(nr) \
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1), BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)

static int confine(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		/* what the program does: output, memory */
		ALLOW(__NR_write), ALLOW(__NR_fstat), ALLOW(__NR_newfstatat), ALLOW(__NR_brk),
		ALLOW(__NR_mmap), ALLOW(__NR_munmap), ALLOW(__NR_mprotect), ALLOW(__NR_madvise),
		/* threads, as glibc makes, runs and joins them */
		ALLOW(__NR_clone), ALLOW(__NR_clone3), ALLOW(__NR_set_robust_list), ALLOW(__NR_rseq),
		ALLOW(__NR_rt_sigprocmask), ALLOW(__NR_rt_sigaction), ALLOW(__NR_futex), ALLOW(__NR_sched_yield),
		ALLOW(__NR_exit), ALLOW(__NR_exit_group),
		/* clocks (the vDSO's fallback), and the calls of a library
		 * that talks to a peer over a descriptor it already holds,
		 * all made by this process before the filter (the profiler's
		 * HELLO and first checks): not memfd_create, ftruncate,
		 * fcntl, prlimit64, openat, socket, connect or
		 * sched_getaffinity, which it made too */
		ALLOW(__NR_clock_gettime), ALLOW(__NR_clock_nanosleep), ALLOW(__NR_nanosleep),
		ALLOW(__NR_getpid), ALLOW(__NR_gettid), ALLOW(__NR_sendmsg), ALLOW(__NR_recvfrom),
		ALLOW(__NR_poll), ALLOW(__NR_close),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
	};
	struct sock_fprog prog = { .len = sizeof(f) / sizeof(f[0]), .filter = f };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
		perror("seclate: seccomp");
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	long threads, i, sum = 0, tsum = 0;
	pthread_t th;
	void *ret;

	if (argc < 3 || (threads = atol(argv[1])) < 0 || (n = atol(argv[2])) <= 0) {
		fprintf(stderr, "usage: seclate THREADS N\n");
		return 2;
	}
	if (run(&sum))
		return 1;
	printf("main: %ld\n", sum);
	fflush(stdout);
	if (confine() < 0)
		return 2;
	for (i = 0; i < threads; i++) {
		long s = 0;

		ret = NULL;
		if (pthread_create(&th, NULL, thread_main, &s) != 0)
			return 1;
		pthread_join(th, &ret);
		if (ret)
			return 1;
		tsum += s;
	}
	printf("threads: %ld x %ld\n", threads, tsum / (threads ? threads : 1));
	fflush(stdout);
	return 0;
}
