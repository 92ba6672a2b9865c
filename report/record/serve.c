/* SPDX-License-Identifier: MIT */
/*
 * serve.c - the collector's side of the socket, shared by `sqlprof record`
 * and `sqlprof agent` (see serve.h): libsqlprof.so's path, the TSC
 * calibration, the listening socket, one poll round over the listener,
 * the connections and the rings, and the BYE files.
 *
 * Peers are accepted only from our own uid or root (SO_PEERCRED); others
 * are closed unread, the first said and all counted. A message is
 * accepted only with the pid the kernel gives for its connection
 * (collect.c checks). What a peer can make us log is rate-limited
 * (sp_ratelog): a same-uid client sending nothing but bad messages gets
 * SP_RATELOG_BURST lines per period and a count. It does not decide when
 * collecting ends.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "live.h"
#include "serve.h"

int sp_srv_preload_unsafe(const char *path)
{
	/* the loader splits LD_PRELOAD at spaces and colons (glibc's rtld),
	 * and a tab or newline is no better */
	return strpbrk(path, " :\t\n") != NULL;
}

/* $SQLPROF_LIB is kept as given when it is an absolute path LD_PRELOAD
 * can carry (a symbolic link to an installation whose path cannot);
 * otherwise its real path. Else beside the binary in the build tree
 * (build/bin/sqlprof -> build/lib/) or installed (PREFIX/bin/sqlprof ->
 * PREFIX/lib/sqlprof/). */
int sp_srv_find_lib(char *out, size_t len)
{
	static const char *const rel[] = { "../lib/sqlprof/libsqlprof.so", "../lib/libsqlprof.so",
					   "libsqlprof.so" };
	char exe[PATH_MAX], *slash;
	const char *env = getenv("SQLPROF_LIB");
	ssize_t n;
	size_t i;

	if (env && *env) {
		if (access(env, R_OK) == 0 && env[0] == '/' && !sp_srv_preload_unsafe(env) &&
		    strlen(env) < len) {
			strcpy(out, env);
			return 0;
		}
		if (access(env, R_OK) == 0 && realpath(env, out))
			return 0;
		fprintf(stderr, "sqlprof: SQLPROF_LIB=%s: %s\n", env, strerror(errno));
		return -1;
	}
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n < 0)
		return -1;
	exe[n] = 0;
	slash = strrchr(exe, '/');
	if (!slash)
		return -1;
	slash[1] = 0;
	for (i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
		char cand[PATH_MAX + 64];

		snprintf(cand, sizeof(cand), "%s%s", exe, rel[i]);
		if (access(cand, R_OK) == 0 && realpath(cand, out) && strlen(out) < len)
			return 0;
	}
	fprintf(stderr, "sqlprof: cannot find libsqlprof.so next to %s (set SQLPROF_LIB)\n", exe);
	return -1;
}

uint64_t sp_srv_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline uint64_t rdtsc(void)
{
	uint32_t lo, hi;

	__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
	return ((uint64_t)hi << 32) | lo;
}

/* Ticks to ns over 2 ms: the clock reads that bracket it are some 50 ns
 * apart at most, an error below 3e-5 (20 ms, the old span, put 20 ms
 * before every command record runs). */
void sp_srv_calib_begin(struct sp_calib *k)
{
	k->m0 = sp_srv_mono_ns();
	k->c0 = rdtsc();
}

double sp_srv_calib_end(const struct sp_calib *k)
{
	uint64_t m1 = sp_srv_mono_ns(), c1;

	if (m1 - k->m0 < 2000000u) {
		struct timespec ts = { 0, (long)(2000000u - (m1 - k->m0)) };

		nanosleep(&ts, NULL);
		m1 = sp_srv_mono_ns();
	}
	c1 = rdtsc();
	if (c1 <= k->c0)
		return 1.0;
	return (double)(m1 - k->m0) / (double)(c1 - k->c0);
}

double sp_srv_calibrate_tsc(void)
{
	struct sp_calib k;

	sp_srv_calib_begin(&k);
	return sp_srv_calib_end(&k);
}

uint64_t sp_srv_proc_start(uint32_t pid)
{
	char buf[1024];
	const char *p = sp_proc_stat(pid, buf, sizeof(buf));
	unsigned long long st = 0;
	int field;

	if (!p)
		return 0;
	for (field = 2; *p && field < 22; p++)
		if (*p == ' ')
			field++;
	if (sscanf(p, "%llu", &st) != 1)
		return 0;
	return st;
}

int sp_srv_init(struct sp_srv *s, struct sp_coll *c, const char *who)
{
	memset(s, 0, sizeof(*s));
	s->c = c;
	s->lfd = -1;
	s->who = who;
	s->buf = malloc(SP_MSG_MAX + 64);
	return s->buf ? 0 : -1;
}

int sp_srv_listen(struct sp_srv *s, const char *path, char *err, size_t errlen)
{
	struct sockaddr_un sa;

	memset(&sa, 0, sizeof(sa));
	if (strlen(path) >= sizeof(sa.sun_path)) {
		snprintf(err, errlen, "socket path too long: %s", path);
		return -ENAMETOOLONG;
	}
	s->lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	sa.sun_family = AF_UNIX;
	strcpy(sa.sun_path, path);
	if (s->lfd < 0 || bind(s->lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(s->lfd, 512) < 0) {
		snprintf(err, errlen, "cannot listen on %s: %s", path, strerror(errno));
		if (s->lfd >= 0)
			close(s->lfd);
		s->lfd = -1;
		return -1;
	}
	return 0;
}

/* Messages read from one client per wakeup at most, so that a client
 * that never stops sending cannot keep the rings from being read. */
#define DRAIN_BATCH 1024

/* Longest wait between two readings of the rings while they bring
 * records: a writer whose ring is full waits for us, then drops records.
 * The preload wakes us (SP_MSG_WAKE) when a ring is half full; this bounds
 * the delay when such a wake-up cannot be sent. Rounds that find nothing
 * double it, up to 100 ms (sp_srv_round); without rings: 100 ms. */
#define RING_POLL_MS 10

/* Read the pending messages of one client (descriptors included, see
 * sp_coll_recv). Returns 0, or -1 at the end of the connection (its
 * process's rings were read and are kept: it may reconnect), -2 when it
 * was a viewer's, answered (close it). */
static int drain(struct sp_srv *s, struct sp_client *cl)
{
	if (!cl->greeted && s->on_view) {
		uint32_t magic = 0;
		ssize_t n;

		/* a viewer (sqlprof top) is told apart by its first message,
		 * looked at without taking it */
		n = recv(cl->fd, &magic, sizeof(magic), MSG_PEEK | MSG_DONTWAIT);
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		if (n <= 0)
			return -1;
		cl->greeted = 1;
		if (magic == SP_VIEW_MAGIC) {
			s->on_view(s, cl);
			return -2;
		}
	}
	for (int i = 0; i < DRAIN_BATCH; i++) {
		int r = sp_coll_recv(s->c, cl->fd, cl->pid, s->buf, SP_MSG_MAX + 64);

		if (r == 0)
			return 0;
		if (r == -1)
			return -1;
		if (r == -2 && sp_ratelog(&s->log_bad, stderr, s->who, "bad messages dropped"))
			fprintf(stderr, "\n%s: dropped a bad message from pid %u: %s\n", s->who,
				cl->pid, s->c->last_error);
	}
	return 0;
}

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif

/* A pidfd of the peer of the client cl (SO_PEERPIDFD, Linux 6.5; for a
 * peer already reaped, 6.16), else one opened on its pid (5.3) when that
 * pid still names the process (its start time), else -1. Taken when a
 * connection ends without BYE, to learn how the process ended: not held
 * for every connection (an agent's descriptors go to its clients). */
static int peer_pidfd(const struct sp_client *cl)
{
	int pfd = -1;
	socklen_t len = sizeof(pfd);

	if (getsockopt(cl->fd, SOL_SOCKET, SO_PEERPIDFD, &pfd, &len) == 0 && pfd >= 0) {
		(void)fcntl(pfd, F_SETFD, FD_CLOEXEC);
		return pfd;
	}
	pfd = (int)syscall(SYS_pidfd_open, (pid_t)cl->pid, 0);
	if (pfd >= 0 && (!cl->start || sp_srv_proc_start(cl->pid) != cl->start)) {
		close(pfd);
		pfd = -1;
	}
	return pfd;
}

int sp_srv_raise_nofile(struct rlimit *old)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return -1;
	if (old)
		*old = rl;
	if (rl.rlim_cur == rl.rlim_max)
		return 0;
	rl.rlim_cur = rl.rlim_max;
	return setrlimit(RLIMIT_NOFILE, &rl);
}

/* Descriptors open in this process (/proc/self/fd, less the one reading
 * it), or 0 when it cannot be read. */
static unsigned long open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	unsigned long n = 0;

	if (!d)
		return 0;
	while (readdir(d))
		n++;
	closedir(d);
	return n > 3 ? n - 3 : 0; /* ".", ".." and d's own */
}

/* Whether a connection may be taken now: not when the descriptors left
 * under RLIMIT_NOFILE are SP_SRV_FD_HEADROOM or fewer, since a message
 * that comes with a descriptor (a HELLO's statistics, a thread's ring)
 * and finds none left loses it ("control data truncated"): the process
 * then waits in the listener's backlog, its messages queued and its
 * totals in its own memory, until a process ends. Said once. */
static int fds_left(struct sp_srv *s)
{
	struct rlimit rl;
	unsigned long n;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY ||
	    rl.rlim_cur > 1UL << 20)
		return 1;
	n = open_fds();
	/* a quarter of a small limit; and never none at all connected (a
	 * limit so low would keep everything out) */
	if (n + (rl.rlim_cur / 4 < SP_SRV_FD_HEADROOM ? rl.rlim_cur / 4 : SP_SRV_FD_HEADROOM) <
		    rl.rlim_cur ||
	    !s->ncl)
		return 1;
	if (!s->c->fd_waits++)
		fprintf(stderr,
			"\n%s: %lu descriptors open of RLIMIT_NOFILE %llu (hard limit %llu): new "
			"processes wait until others end; raise the hard limit (ulimit -Hn, "
			"systemd's LimitNOFILE=)\n",
			s->who, n, (unsigned long long)rl.rlim_cur,
			(unsigned long long)rl.rlim_max);
	return 0;
}

/* Accept every pending connection of our uid. -1 when out of memory. */
static int accept_all(struct sp_srv *s)
{
	for (;;) {
		int fd;
		struct ucred cr;
		socklen_t crl = sizeof(cr);

		if (!fds_left(s)) {
			/* not looked at again for 50 ms: no spinning on it */
			s->accept_after = sp_srv_mono_ns() + 50000000u;
			return 0;
		}
		fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE)
				s->accept_after = sp_srv_mono_ns() + 50000000u;
			return 0;
		}
		/* our uid, or root: another user's process is refused before
		 * anything of it is read (the first one said, all counted) */
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crl) < 0 ||
		    (cr.uid != getuid() && cr.uid != 0)) {
			if (!s->refused++)
				fprintf(stderr,
					"\n%s: refused a connection from uid %d\n%s: (pid %d; only "
					"uid %u and root may connect; more of these are counted)\n",
					s->who, crl == sizeof(cr) ? (int)cr.uid : -1, s->who,
					crl == sizeof(cr) ? (int)cr.pid : -1, (unsigned)getuid());
			close(fd);
			continue;
		}
		if (SP_GROW(s->cl, s->capcl, s->ncl + 1, 16) < 0) {
			close(fd);
			return -1;
		}
		s->cl[s->ncl].fd = fd;
		s->cl[s->ncl].pid = (uint32_t)cr.pid;
		s->cl[s->ncl].start = sp_srv_proc_start((uint32_t)cr.pid);
		s->cl[s->ncl].greeted = 0;
		s->ncl++;
		s->accepted++;
	}
}

int sp_srv_round(struct sp_srv *s, int extra, int timeout_ms, int accept_anyway)
{
	struct pollfd *pf = calloc(s->ncl + 2, sizeof(*pf));
	size_t i, j, npf = s->ncl;
	int n, r, rc = 0;

	if (!pf)
		return -1;
	/* the listener, unless connections wait for descriptors (accept_all) */
	pf[0].fd = s->accept_after && sp_srv_mono_ns() < s->accept_after ? -1 : s->lfd;
	pf[0].events = POLLIN;
	for (i = 0; i < npf; i++) {
		pf[i + 1].fd = s->cl[i].fd;
		pf[i + 1].events = POLLIN;
	}
	/* the last slot: the caller's (a signal's pipe, so it is seen at once) */
	pf[npf + 1].fd = extra;
	pf[npf + 1].events = POLLIN;
	/* With rings, every RING_POLL_MS while they bring records, longer
	 * (doubled up to 100 ms) after rounds that found none: an idle
	 * program's collector woke 100 times a second for nothing, and a ring
	 * filling up wakes us anyway (SP_MSG_WAKE at half full). */
	if (timeout_ms < 0)
		timeout_ms = !s->c->nrings
				     ? 100
				     : RING_POLL_MS << (s->idle_rounds < 4 ? s->idle_rounds : 4);
	if (timeout_ms > 100)
		timeout_ms = 100;
	if (s->model_lock)
		pthread_mutex_unlock(s->model_lock);
	n = poll(pf, npf + 2, timeout_ms);
	if (s->model_lock)
		pthread_mutex_lock(s->model_lock);
	if (n > 0 && extra >= 0 && (pf[npf + 1].revents & POLLIN))
		rc |= SP_SRV_EXTRA;
	if (((n > 0 && (pf[0].revents & POLLIN)) || accept_anyway ||
	     (s->accept_after && sp_srv_mono_ns() >= s->accept_after)) &&
	    s->lfd >= 0 && (s->accept_after = 0, accept_all(s) < 0)) {
		free(pf);
		return -1;
	}
	for (i = 0; n > 0 && i < npf; i++) {
		if (!(pf[i + 1].revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		rc |= SP_SRV_DATA;
		r = drain(s, &s->cl[i]);
		if (r < 0) {
			if (r == -1) {
				/* ended without BYE: how did the process end? */
				const struct sp_proc *p =
					hmap_get(&s->c->procs, &s->cl[i].pid, 0, NULL);

				sp_coll_conn_end(s->c, s->cl[i].pid,
						 p && p->died ? peer_pidfd(&s->cl[i]) : -1);
			}
			close(s->cl[i].fd);
			s->cl[i].fd = -1;
			if (r == -1 && s->on_close)
				s->on_close(s, &s->cl[i]);
		}
	}
	free(pf);
	/* every wakeup, and at least every RING_POLL_MS: the rings */
	if (s->c->nrings && sp_coll_rings_drain(s->c, 0)) {
		rc |= SP_SRV_DATA;
		s->idle_rounds = 0;
	} else if (n == 0) {
		s->idle_rounds += s->idle_rounds < 16;
	} else {
		s->idle_rounds = 0; /* a message: the program is busy again */
	}
	for (i = j = 0; i < s->ncl; i++)
		if (s->cl[i].fd >= 0)
			s->cl[j++] = s->cl[i];
	s->ncl = j;
	return rc;
}

int sp_srv_pending(const struct sp_srv *s)
{
	struct pollfd p = { .fd = s->lfd, .events = POLLIN };

	return s->lfd >= 0 && poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

int sp_srv_flush(struct sp_srv *s, uint64_t budget_ns)
{
	uint64_t end = sp_srv_mono_ns() + budget_ns;

	for (;;) {
		size_t acc = s->accepted;
		int r = sp_srv_round(s, -1, 0, 1);

		if (r < 0)
			return -1;
		if (!(r & SP_SRV_DATA) && s->accepted == acc)
			return 0;
		if (sp_srv_mono_ns() >= end)
			return -1;
	}
}

void sp_srv_close(struct sp_srv *s)
{
	sp_ratelog_flush(&s->log_bad, stderr, s->who, "bad messages dropped");
	if (s->refused)
		fprintf(stderr, "%s: %llu connection%s refused (peers of another uid)\n", s->who,
			(unsigned long long)s->refused, s->refused == 1 ? "" : "s");
	s->refused = 0;
	for (size_t i = 0; i < s->ncl; i++)
		close(s->cl[i].fd);
	free(s->cl);
	s->cl = NULL;
	s->ncl = s->capcl = 0;
	if (s->lfd >= 0)
		close(s->lfd);
	s->lfd = -1;
	free(s->buf);
	s->buf = NULL;
}

int sp_ratelog(struct sp_ratelog *r, FILE *f, const char *who, const char *what)
{
	uint64_t now = sp_srv_mono_ns();

	if (r->n && now - r->start >= (uint64_t)SP_RATELOG_PERIOD_S * 1000000000u) {
		sp_ratelog_flush(r, f, who, what);
		r->n = 0;
	}
	if (!r->n)
		r->start = now;
	if (r->n < SP_RATELOG_BURST) {
		r->n++;
		return 1;
	}
	r->suppressed++;
	return 0;
}

void sp_ratelog_flush(struct sp_ratelog *r, FILE *f, const char *who, const char *what)
{
	if (!r->suppressed)
		return;
	fprintf(f, "%s: %llu more %s not shown (at most %d lines every %d s)\n", who,
		(unsigned long long)r->suppressed, what, SP_RATELOG_BURST, SP_RATELOG_PERIOD_S);
	r->suppressed = 0;
}

/* Goodbyes the preload could not send (collector stalled or gone) are
 * left as files in our private directory: read them like messages. So
 * are the SQL texts a process still held when it exited (texts files),
 * and the totals of a process that exited while no collector listened
 * (gone files, before its BYE file if both are there). */
void sp_srv_read_bye_files(struct sp_coll *c, const char *dir, const char *who)
{
	static struct sp_ratelog bye_log;
	DIR *d;
	struct dirent *e;
	size_t bad = 0;

	sp_coll_read_texts(c, dir, &bad);
	if (bad)
		fprintf(stderr, "%s: ignored %zu bad part%s of texts files: %s\n", who, bad,
			bad == 1 ? "" : "s", c->last_error);
	sp_coll_read_gone(c, dir, &bad);
	if (bad)
		fprintf(stderr,
			"%s: %zu file%s of processes that exited without a collector "
			"could not be read whole: %s\n",
			who, bad, bad == 1 ? "" : "s", c->last_error);
	d = opendir(dir);
	if (!d)
		return;
	while ((e = readdir(d))) {
		char path[PATH_MAX + 300];
		uint8_t msg[256];
		ssize_t n;
		int fd;

		if (strncmp(e->d_name, "bye.", 4))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		if (fd < 0)
			continue;
		n = read(fd, msg, sizeof(msg));
		close(fd);
		unlink(path);
		if (n > 0 && sp_coll_message(c, msg, (size_t)n, 0) < 0 &&
		    sp_ratelog(&bye_log, stderr, who, "bad goodbye files ignored"))
			fprintf(stderr, "%s: ignored %s: %s\n", who, e->d_name, c->last_error);
	}
	closedir(d);
}

int sp_srv_default_socket(char *out, size_t len)
{
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	int n, shared = 0;

	if (getuid() == 0) {
		n = snprintf(out, len, "/run/sqlprof/sock");
	} else if (xdg && xdg[0] == '/') {
		n = snprintf(out, len, "%s/sqlprof/sock", xdg);
	} else {
		n = snprintf(out, len, "%s/sqlprof-%u/sock", "/tmp", (unsigned)getuid());
		shared = 1;
	}
	return n > 0 && (size_t)n < len ? shared : -1;
}

int sp_srv_own_dir(const char *dir, int strict, char *err, size_t errlen)
{
	struct stat st, fst;
	unsigned uid = (unsigned)getuid();
	int made = 0, fd, rc = -1;

	if (mkdir(dir, 0700) == 0)
		made = 1;
	else if (errno != EEXIST) {
		snprintf(err, errlen, "cannot create %s: %s", dir, strerror(errno));
		return -1;
	}
	if (lstat(dir, &st) < 0) {
		snprintf(err, errlen, "%s: %s", dir, strerror(errno));
		return -1;
	}
	if (S_ISLNK(st.st_mode)) {
		snprintf(err, errlen, "%s is a symbolic link (of uid %u), not a directory of yours",
			 dir, (unsigned)st.st_uid);
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "%s is not a directory", dir);
		return -1;
	}
	if (st.st_uid != uid) {
		snprintf(
			err, errlen,
			"%s is owned by uid %u, not by you (uid %u): another user may be listening "
			"there for your processes' SQL and statistics",
			dir, (unsigned)st.st_uid, uid);
		return -1;
	}
	/* the directory itself, to check what was looked at is what is
	 * there (nobody else can rename or remove a directory of ours in
	 * a sticky /tmp, nor anywhere they may not write) */
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &fst) < 0) {
		snprintf(err, errlen, "%s: %s", dir, strerror(errno));
		goto out;
	}
	if (fst.st_dev != st.st_dev || fst.st_ino != st.st_ino || fst.st_uid != uid) {
		snprintf(err, errlen, "%s changed while it was checked", dir);
		goto out;
	}
	if (made && (fst.st_mode & 07777) != 0700 && fchmod(fd, 0700) == 0)
		fst.st_mode = (fst.st_mode & ~07777u) | 0700; /* a umask took bits of ours */
	if (strict && (fst.st_mode & 07777) != 0700) {
		snprintf(err, errlen, "%s has mode %04o, not 0700", dir,
			 (unsigned)(fst.st_mode & 07777));
		goto out;
	}
	if (!strict && (fst.st_mode & 022)) {
		snprintf(err, errlen, "%s has mode %04o: others may write in it", dir,
			 (unsigned)(fst.st_mode & 07777));
		goto out;
	}
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	return rc;
}
