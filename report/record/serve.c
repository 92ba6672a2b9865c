/* SPDX-License-Identifier: MIT */
/*
 * serve.c - the collector's side of the socket, shared by `sqlprof record`
 * and `sqlprof agent` (see serve.h): libsqlprof.so's path, the TSC
 * calibration, the listening socket, one poll round over the listener,
 * the connections and the rings, and the BYE files.
 *
 * Peers are accepted only from our own uid (SO_PEERCRED); a message is
 * accepted only with the pid the kernel gives for its connection
 * (collect.c checks). It does not decide when collecting ends.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
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
double sp_srv_calibrate_tsc(void)
{
	uint64_t m0 = sp_srv_mono_ns(), c0 = rdtsc(), m1, c1;
	struct timespec ts = { 0, 2000000 };

	nanosleep(&ts, NULL);
	m1 = sp_srv_mono_ns();
	c1 = rdtsc();
	if (c1 <= c0)
		return 1.0;
	return (double)(m1 - m0) / (double)(c1 - c0);
}

uint64_t sp_srv_proc_start(uint32_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long st = 0;
	ssize_t n;
	int fd, field;

	snprintf(path, sizeof(path), "/proc/%u/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	/* the command name, field 2, is in parentheses and may hold
	 * anything: count fields from the last ')' */
	p = strrchr(buf, ')');
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
		if (r == -2)
			fprintf(stderr, "\n%s: dropped a bad message from pid %u: %s\n", "sqlprof",
				cl->pid, s->c->last_error);
	}
	return 0;
}

/* Accept every pending connection of our uid. -1 when out of memory. */
static int accept_all(struct sp_srv *s)
{
	for (;;) {
		int fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		struct ucred cr;
		socklen_t crl = sizeof(cr);

		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE) {
				/* out of descriptors: the pending connection
				 * stays readable; do not spin on it */
				struct timespec ts = { 0, 10000000 };

				nanosleep(&ts, NULL);
			}
			return 0;
		}
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crl) < 0 || cr.uid != getuid()) {
			fprintf(stderr, "\nsqlprof: refused a connection from uid %d\n", (int)cr.uid);
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
	pf[0].fd = s->lfd;
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
		timeout_ms = !s->c->nrings ? 100 :
			     RING_POLL_MS << (s->idle_rounds < 4 ? s->idle_rounds : 4);
	if (timeout_ms > 100)
		timeout_ms = 100;
	if (s->model_lock)
		pthread_mutex_unlock(s->model_lock);
	n = poll(pf, npf + 2, timeout_ms);
	if (s->model_lock)
		pthread_mutex_lock(s->model_lock);
	if (n > 0 && extra >= 0 && (pf[npf + 1].revents & POLLIN))
		rc |= SP_SRV_EXTRA;
	if (((n > 0 && (pf[0].revents & POLLIN)) || accept_anyway) && s->lfd >= 0 &&
	    accept_all(s) < 0) {
		free(pf);
		return -1;
	}
	for (i = 0; n > 0 && i < npf; i++) {
		if (!(pf[i + 1].revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		rc |= SP_SRV_DATA;
		r = drain(s, &s->cl[i]);
		if (r < 0) {
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

/* Goodbyes the preload could not send (collector stalled or gone) are
 * left as files in our private directory: read them like messages. So
 * are the SQL texts a process still held when it exited (texts files),
 * and the totals of a process that exited while no collector listened
 * (gone files, before its BYE file if both are there). */
void sp_srv_read_bye_files(struct sp_coll *c, const char *dir, const char *who)
{
	DIR *d;
	struct dirent *e;
	size_t bad = 0;

	sp_coll_read_texts(c, dir, &bad);
	if (bad)
		fprintf(stderr, "%s: ignored %zu bad part%s of texts files: %s\n", who, bad,
			bad == 1 ? "" : "s", c->last_error);
	sp_coll_read_gone(c, dir, &bad);
	if (bad)
		fprintf(stderr, "%s: %zu file%s of processes that exited without a collector "
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
		if (n > 0 && sp_coll_message(c, msg, (size_t)n, 0) < 0)
			fprintf(stderr, "%s: ignored %s: %s\n", who, e->d_name, c->last_error);
	}
	closedir(d);
}

int sp_srv_default_socket(char *out, size_t len)
{
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	int n;

	if (getuid() == 0)
		n = snprintf(out, len, "/run/sqlprof/sock");
	else if (xdg && xdg[0] == '/')
		n = snprintf(out, len, "%s/sqlprof/sock", xdg);
	else
		n = snprintf(out, len, "%s/sqlprof-%u/sock", "/tmp", (unsigned)getuid());
	return n > 0 && (size_t)n < len ? 0 : -1;
}
