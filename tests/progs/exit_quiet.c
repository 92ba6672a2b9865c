/* SPDX-License-Identifier: MIT */
/*
 * exit_quiet.c - for tests/integration/t_exit_quiet.sh: a process that
 * ends well without libc's exit path. It runs 300 executions of
 * "SELECT ?1 AS quiet_q" (bind, step, reset), prints their sum, then:
 *   raw     syscall(SYS_exit_group, 0), as every Go program ends (no
 *           atexit, no destructor, no _exit shim)
 *   setuid  setuid(65534) (root only), then returns from main
 *   chroot  chroot(DIR) and chdir("/") (root only), then returns from main
 *   seccomp a filter that fails sendmsg, sendto, connect, socket, open,
 *           openat and recvfrom with EPERM (SECCOMP_RET_ERRNO), then
 *           returns from main: no goodbye can leave
 *   nosend  the same for the socket calls only: the goodbye goes to a file
 *   segv    raise(SIGSEGV) (a real death, for contrast)
 * usage: exit_quiet MODE [DIR]
 */
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <sqlite3.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

/* EPERM for sendmsg, sendto, connect, socket (and with all, openat, open
 * and recvfrom too) */
static int deny_io(int all)
{
#define DENY(nr) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1), \
	BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM)
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		DENY(SYS_sendmsg), DENY(SYS_sendto), DENY(SYS_connect), DENY(SYS_socket),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		DENY(SYS_openat), DENY(SYS_open), DENY(SYS_recvfrom),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = sizeof(f) / sizeof(f[0]), .filter = f };

	if (!all) /* the first allow is the end: drop the other denials */
		prog.len = 1 + 4 * 2 + 1;
	else /* jump over the first allow */
		f[1 + 4 * 2] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
							    offsetof(struct seccomp_data, nr));

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -1;
	return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "raw";
	sqlite3 *db;
	sqlite3_stmt *st;
	long sum = 0;

	if (sqlite3_open(":memory:", &db) != SQLITE_OK ||
	    sqlite3_prepare_v2(db, "SELECT ?1 AS quiet_q", -1, &st, NULL) != SQLITE_OK) {
		fprintf(stderr, "exit_quiet: %s\n", sqlite3_errmsg(db));
		return 1;
	}
	for (int i = 0; i < 300; i++) {
		sqlite3_bind_int(st, 1, i);
		while (sqlite3_step(st) == SQLITE_ROW)
			sum += sqlite3_column_int(st, 0);
		sqlite3_reset(st);
	}
	printf("%ld\n", sum);
	fflush(stdout);
	if (!strcmp(mode, "raw")) {
		syscall(SYS_exit_group, 0);
	} else if (!strcmp(mode, "setuid")) {
		if (setuid(65534) < 0) {
			perror("exit_quiet: setuid");
			return 1;
		}
	} else if (!strcmp(mode, "chroot")) {
		if (argc < 3 || chroot(argv[2]) < 0 || chdir("/") < 0) {
			perror("exit_quiet: chroot");
			return 1;
		}
	} else if (!strcmp(mode, "seccomp") || !strcmp(mode, "nosend")) {
		if (deny_io(!strcmp(mode, "seccomp")) < 0) {
			perror("exit_quiet: seccomp");
			return 1;
		}
	} else if (!strcmp(mode, "segv")) {
		raise(SIGSEGV);
	} else {
		fprintf(stderr, "exit_quiet: unknown mode %s\n", mode);
		return 2;
	}
	return 0;
}
