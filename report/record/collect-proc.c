/* SPDX-License-Identifier: MIT */
/*
 * collect-proc.c - how a process whose connection ended without BYE
 * ended (collect.h: sp_coll_conn_end, sp_coll_exit_status,
 * sp_coll_settle).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "collect-int.h"

/* ---- how a process whose connection ended without BYE ended ---------- */

/* PIDFD_GET_INFO (Linux 6.15), declared here: older headers lack it. The
 * first published layout (PIDFD_INFO_SIZE_VER0, 64 bytes); the kernel
 * takes the size from the request. */
struct sp_pidfd_info {
	uint64_t mask, cgroupid;
	uint32_t pid, tgid, ppid, ruid, rgid, euid, egid, suid, sgid, fsuid, fsgid;
	int32_t exit_code;
};
#define SP_PIDFD_GET_INFO _IOWR(0xFF, 11, struct sp_pidfd_info)
#define SP_PIDFD_INFO_EXIT (1ull << 3)

/* 1 with the wait status in *status when the process of pidfd (pid as
 * we name it) has ended and the kernel tells how; 0 while it runs, or
 * ended and cannot tell (yet); -1 when it is gone and nothing will tell. */
static int exit_of(int pidfd, uint32_t pid, int *status)
{
	struct sp_pidfd_info info;
	char path[64], buf[2048], *q;
	int fd, field, code;
	ssize_t n;

	memset(&info, 0, sizeof(info));
	info.mask = SP_PIDFD_INFO_EXIT;
	if (ioctl(pidfd, SP_PIDFD_GET_INFO, &info) == 0 && (info.mask & SP_PIDFD_INFO_EXIT)) {
		*status = info.exit_code; /* reaped */
		return 1;
	}
	/* not reaped yet: a zombie's exit code, while the pid is still its
	 * (a signal 0 through the pidfd reaches a zombie, not a reaped one) */
	snprintf(path, sizeof(path), "/proc/%u/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	if (fd >= 0)
		close(fd);
	if (syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) < 0)
		return errno == ESRCH ? -1 : 0;
	if (n <= 0)
		return 0;
	buf[n] = 0;
	q = strrchr(buf, ')');
	if (!q || q[1] != ' ' || (q[2] != 'Z' && q[2] != 'X'))
		return 0; /* running (it closed our descriptor), or exiting */
	/* exit_code is field 52; q + 2 is field 3 */
	for (field = 3, q += 2; *q && field < 52; q++)
		if (*q == ' ')
			field++;
	if (field != 52 || sscanf(q, "%d", &code) != 1)
		return 0;
	*status = code;
	return 1;
}

void coll_proc_verdict(struct sp_proc *p)
{
	/* it exited: it did not die, goodbye or not */
	if (p->exit_known && WIFEXITED(p->exit_status))
		p->died = 0;
}

static void settle_one(struct sp_proc *p, int final)
{
	int status, r;

	if (!p->pidfd)
		return;
	r = p->died ? exit_of(p->pidfd - 1, p->pid, &status) : -1;
	if (r == 1) {
		p->exit_known = 1;
		p->exit_status = status;
		coll_proc_verdict(p);
	}
	if (r != 0 || final) {
		close(p->pidfd - 1);
		p->pidfd = 0;
	}
}

void sp_coll_settle(struct sp_coll *c, int final)
{
	size_t it = 0;
	struct sp_proc *p;

	while ((p = hmap_next(&c->procs, &it, NULL)))
		settle_one(p, final);
}

void sp_coll_conn_end(struct sp_coll *c, uint32_t pid, int pidfd)
{
	struct sp_proc *p = hmap_get(&c->procs, &pid, 0, NULL);

	if (!p || !p->died || pidfd < 0) {
		if (pidfd >= 0)
			close(pidfd);
		return;
	}
	if (p->pidfd)
		close(p->pidfd - 1);
	p->pidfd = pidfd + 1;
	settle_one(p, 0);
}

void sp_coll_exit_status(struct sp_coll *c, uint32_t pid, int status)
{
	struct sp_proc *p = hmap_get(&c->procs, &pid, 0, NULL);

	if (!p)
		return;
	p->exit_known = 1;
	p->exit_status = status;
	coll_proc_verdict(p);
}
