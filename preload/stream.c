/* SPDX-License-Identifier: MIT */
/*
 * stream.c - how records leave the process: per-thread rings shared with
 * the collector, the one connection to it, the module map, and what
 * happens at fork, thread exit and process exit.
 *
 * Each thread appends records to its own single-producer ring without a
 * lock (a release store of the head). The ring is a memfd mapped by both
 * sides: its descriptor goes to the collector once, in the message that
 * announces the ring, and from then on the collector reads the records
 * itself (every few milliseconds, and at once when woken). So nothing here
 * sends records, no thread of ours runs in the target, and a record is
 * safe once its head is published - even if the target then crashes.
 *
 * The socket carries the rest: HELLO, the ring announcements, the module
 * map, wake-ups and BYE. A message that cannot be sent within
 * SQLPROF_SEND_TIMEOUT_MS is dropped; after a hard error (collector gone)
 * nothing more is sent. Sends use MSG_NOSIGNAL: the target never sees
 * SIGPIPE. A full ring wakes the collector and waits for it at most as
 * long; then the record is dropped and counted in sp_lost.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "sp_preload.h"

#define RING_SIZE SP_RING_SIZE
#define RING_MASK SP_RING_MASK
#define REC_PAD SP_REC_PAD

atomic_ullong sp_lost;
atomic_int sp_stream_dead; /* the collector is gone: a hint, read by every thread */

static inline int stream_dead(void)
{
	return atomic_load_explicit(&sp_stream_dead, memory_order_relaxed);
}

static inline void set_stream_dead(int v)
{
	atomic_store_explicit(&sp_stream_dead, v, memory_order_relaxed);
}

/* The collector's socket, read from SQLPROF_SOCK once at start-up: a
 * program that clears its environment and then forks still has it. */
static char sock_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
/* errno of the last failed connect (socket, connect, no high descriptor) */
static int conn_errno;
/* What became of an image that could not connect (unrep_mark). */
enum {
	UNREP_NO,      /* reporting over the socket (or trying to) */
	UNREP_IDLE,    /* could not connect at start-up, ran no SQLite yet:
			* nothing to say (sp_unrep_pending) */
	UNREP_FILE,    /* leaves its data in a file in the collector's
			* directory (unrep_write) */
	UNREP_COUNTED, /* could not write that file either: counted in an
			* ancestor's statistics instead */
};
static int unreported;
int sp_unrep_pending; /* UNREP_IDLE: the next thread set up marks it */
static char unrep_path[sizeof(sock_path) + 64];
/* Connected before a uid change (sp_stream_before_uid_change), HELLO not
 * sent yet: it goes with the first execution's statistics. */
static int hello_owed;
/* This image had a connection: it has a collector to say goodbye to (a
 * BYE file when the collector is gone), and rings it may announce again. */
static int ever_connected;
/* Times a collector that went away was replaced by one that listens at
 * our socket (an agent restarted). */
static int agent_reconnects;
_Atomic uint64_t sp_stream_check_at;
_Atomic uint64_t sp_stream_tick_at; /* sp_now() units: sp_stream_tick */

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t conn_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sp_ring *rings;
static pthread_key_t thread_key;
/* _Atomic: conn_get_hello reads it without conn_lock, other threads
 * write it under the lock (a reconnect); every access is a plain move on
 * x86-64 but for the stores' xchg, and none is on a per-execution path. */
static _Atomic int sock_fd = -1;
static dev_t sock_dev;
static ino_t sock_ino;
static atomic_ullong msg_seq;
static atomic_int modules_pending;
static atomic_uint module_gen;
static int reconnects;                   /* times our descriptor was taken from us */
static _Atomic uint64_t congested_until; /* mono ns: do not wait before then */
/* Ring memfds kept to announce the rings again to a later collector: the
 * first RING_FDS_KEPT rings (threads writing at a time); the others' later
 * records are lost when the collector changes (counted). Each is a
 * descriptor the program cannot have above 800. */
#define RING_FDS_KEPT 8
static atomic_int ring_fds_kept;
static double tsc_per_ns = 1.0;
static uint64_t tsc_ref, mono_ref;

/* ------------------------------------------------------------------ */
/* Clock calibration                                                   */

/* The TSC rate, once per process image: the one `sqlprof record`
 * measured over 2 ms and hands over (SQLPROF_TSC_PER_NS, ticks per ns),
 * else measured against CLOCK_MONOTONIC over ~200 us. The slow-query
 * threshold, the loops' gap and the HELLO's calibration depend on it; the
 * constructor asked for it twice, and each asked spun 200 us. */
double sp_tsc_per_ns(void)
{
	static int measured;
	const char *env;
	uint64_t m0, m1, c0, c1;
	char *end;
	double v;

	if (measured)
		return tsc_per_ns;
	measured = 1;
	env = getenv(SP_ENV_TSC_PER_NS);
	if (env && *env) {
		int saved = errno;

		errno = 0;
		v = strtod(env, &end);
		if (!errno && !*end && v >= 0.01 && v <= 100.0) {
			errno = saved;
			tsc_ref = sp_rdtsc();
			mono_ref = sp_mono_ns();
			tsc_per_ns = v;
			return tsc_per_ns;
		}
		errno = saved; /* not a rate (set by hand): measured instead */
	}
	m0 = sp_mono_ns();
	c0 = sp_rdtsc();
	do
		m1 = sp_mono_ns();
	while (m1 - m0 < 200000);
	c1 = sp_rdtsc();
	tsc_ref = c0;
	mono_ref = m0;
	tsc_per_ns = (double)(c1 - c0) / (double)(m1 - m0);
	if (tsc_per_ns <= 0)
		tsc_per_ns = 1.0;
	return tsc_per_ns;
}

/* ------------------------------------------------------------------ */
/* Descriptors                                                         */

/* Descriptors of ours go at or above FD_HIGH, out of the low numbers
 * programs get and dup2() onto, when RLIMIT_NOFILE leaves FD_TOP above
 * it; under a lower limit, into the top FD_TOP numbers below the limit,
 * as long as FD_LOW_MIN stay below them for the program. */
#define FD_HIGH 800
#define FD_TOP 16
#define FD_LOW_MIN 64

/*
 * Move our descriptor fd out of the program's way (above). Returns the
 * descriptor to use: fd itself when it is high enough already, or its
 * copy (close-on-exec; fd is closed). Returns -1, fd untouched, when the
 * limit leaves no room that high: the caller does without rather than
 * keep a descriptor the program would have got. Keeps errno.
 */
int sp_fd_high(int fd)
{
	struct rlimit rl;
	long lim, base;
	int hi, saved = errno;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY ||
	    rl.rlim_cur > INT32_MAX)
		lim = INT32_MAX;
	else
		lim = (long)rl.rlim_cur;
	base = lim > FD_HIGH + FD_TOP ? FD_HIGH : lim - FD_TOP;
	if (base < FD_LOW_MIN)
		return -1;
	if (fd >= base)
		return fd;
	hi = fcntl(fd, F_DUPFD_CLOEXEC, (int)base);
	if (hi >= 0)
		close(fd);
	errno = saved;
	return hi;
}

/* ------------------------------------------------------------------ */
/* The connection                                                      */

static int send_msg_fd(const void *body1, size_t len1, const void *body2, size_t len2,
		       uint16_t flags, int pass_fd, int wait);

static int send_msg(const void *body1, size_t len1, const void *body2, size_t len2, uint16_t flags)
{
	return send_msg_fd(body1, len1, body2, len2, flags, -1, 1);
}

static int fd_is_ours(void)
{
	struct stat st;

	/* The program may have closed our descriptor or dup2()'d something
	 * else over it: never write into a file that is not our socket. */
	return sock_fd >= 0 && fstat(sock_fd, &st) == 0 && st.st_dev == sock_dev &&
	       st.st_ino == sock_ino && S_ISSOCK(st.st_mode);
}

/*
 * Let go of our connection to connect again, under conn_lock. Another
 * thread may have read sock_fd a moment ago and be about to send on that
 * number, and a number closed now could be the program's next open - its
 * own socket, even. So the number is not closed: an unconnected socket of
 * ours is put in its place (dup3), where a late send fails (ENOTCONN), and
 * it is closed at the next connection let go of, a second or more later
 * (sp_stream_check's pace), if it is still that socket. Without a spare
 * socket, the number is closed as before.
 */
static int retired_fd = -1;
static dev_t retired_dev;
static ino_t retired_ino;

static int retired_is_ours(void)
{
	struct stat st;

	return retired_fd >= 0 && fstat(retired_fd, &st) == 0 && st.st_dev == retired_dev &&
	       st.st_ino == retired_ino && S_ISSOCK(st.st_mode);
}

static void sock_let_go(void)
{
	struct stat st;
	int spare;

	if (sock_fd < 0)
		return;
	if (!fd_is_ours()) { /* the program's number now: never touched */
		sock_fd = -1;
		return;
	}
	if (retired_is_ours())
		close(retired_fd);
	retired_fd = -1;
	spare = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (spare >= 0 && fstat(spare, &st) == 0 && dup3(spare, sock_fd, O_CLOEXEC) >= 0) {
		retired_fd = sock_fd;
		retired_dev = st.st_dev;
		retired_ino = st.st_ino;
	} else {
		close(sock_fd);
	}
	if (spare >= 0)
		close(spare);
	sock_fd = -1;
}

/* The collector holds our statistics' memfd (HELLO carried it). */
int sp_stats_shared;
#define stats_shared sp_stats_shared

#define HELLO_MAX (sizeof(struct sp_rec_hello) + 4096 + 8)

/* This image's HELLO record into buf (HELLO_MAX bytes); its length. */
static uint32_t hello_build(char *buf, uint16_t flags)
{
	char exe[4096];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	struct sp_rec_hello h;
	uint32_t len;

	if (n < 0)
		n = 0;
	len = SP_ALIGN8(sizeof(h) + (uint32_t)n);
	memset(&h, 0, sizeof(h));
	h.h.type = SP_REC_HELLO;
	h.h.flags = flags;
	h.h.len = len;
	h.pid = (uint32_t)getpid();
	h.tid = sp_tls.tid;
	h.ppid = (uint32_t)getppid();
	h.clock = sp_clock_tsc ? SP_CLOCK_TSC : SP_CLOCK_MONOTONIC;
	h.start_mono_ns = sp_mono_ns();
	h.tsc_ref = tsc_ref;
	h.mono_ref_ns = mono_ref;
	h.tsc_per_ns_x1e9 = (uint64_t)(tsc_per_ns * 1e9);
	h.sqlite_found = atomic_load(&sp_resolved) ? 1 : 0;
	h.exe_len = (uint32_t)n;
	memset(buf, 0, len);
	memcpy(buf, &h, sizeof(h));
	memcpy(buf + sizeof(h), exe, (size_t)n);
	return len;
}

static void hello(void)
{
	char buf[HELLO_MAX];
	uint32_t len = hello_build(buf, reconnects ? SP_HELLO_RECONNECT : 0);
	struct sp_rec_hello h;

	memcpy(&h, buf, sizeof(h));
	{
		/* the shared statistics travel with HELLO, in the same message:
		 * a process the collector knows always has its totals there */
		struct sp_rec_stats sr;
		int sfd = sp_stats_fd();

		memset(&sr, 0, sizeof(sr));
		sr.h.type = SP_REC_STATS;
		sr.h.len = sizeof(sr);
		sr.pid = h.pid;
		sr.tid = h.tid;
		sr.size = sp_stats ? sp_stats->size : 0;
		if (sfd >= 0 && sp_stats) {
			if (send_msg_fd(buf, len, &sr, sizeof(sr), 0, sfd, 1) == 0)
				stats_shared = 1;
		} else {
			send_msg(buf, len, NULL, 0, 0);
		}
	}
}

/*
 * Who the collector may be (docs/design.md, "Threat model"). The program's
 * SQL texts, its statistics and its rings go only to a listener that runs
 * as the program's own user - its real or effective uid now or at start-up
 * - or as root when SQLPROF_TRUST_ROOT=1, and only through a socket in a
 * directory such a user owns and nobody else may enter or write (0700, not
 * a symbolic link: another local user who made /tmp/sqlprof-UID first
 * could otherwise listen there). Checked at every connect; a refusal is
 * EPERM, and nothing is written into that directory either.
 */
static uid_t trust_uid0, trust_euid0; /* the uids at start-up */
static int trust_root;                /* SQLPROF_TRUST_ROOT=1 */
static int sock_untrusted;            /* the last connect was refused so */

static int uid_trusted(uid_t u)
{
	return u == trust_uid0 || u == trust_euid0 || u == getuid() || u == geteuid() ||
	       (u == 0 && trust_root);
}

/* 0 when sock_path's directory may hold our collector's socket, else an
 * errno: ENOENT/ENOTDIR (none yet: a collector may come), EPERM. */
static int sock_dir_check(void)
{
	char dir[sizeof(sock_path)];
	const char *slash = strrchr(sock_path, '/');
	struct stat st;

	if (!slash)
		strcpy(dir, ".");
	else if (slash == sock_path)
		strcpy(dir, "/");
	else
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - sock_path), sock_path);
	if (lstat(dir, &st) < 0)
		return errno == ENOENT || errno == ENOTDIR ? errno : EPERM;
	if (!S_ISDIR(st.st_mode) || (st.st_mode & 077) || !uid_trusted(st.st_uid))
		return EPERM;
	return 0;
}

/* 0 when the peer of connected socket fd is a trusted uid (SO_PEERCRED:
 * the listener's credentials when it called listen), else EPERM. */
static int sock_peer_check(int fd)
{
	struct ucred uc;
	socklen_t len = sizeof(uc);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &len) < 0 || len != sizeof(uc))
		return EPERM;
	return uid_trusted(uc.uid) ? 0 : EPERM;
}

/* Connect once per process (again after fork). Returns the fd or -1.
 * Takes conn_lock; callers never hold reg_lock. */
/* Set while this thread connects: HELLO, sent then, must not take the
 * reconnect path of send_msg_fd (it would take conn_lock again). */
static __thread int in_conn_get __attribute__((tls_model("initial-exec")));

static int conn_get_hello(int say_hello)
{
	struct sockaddr_un sa;
	struct stat st;
	int fd, cancel, saved;

	if (stream_dead())
		return -1;
	if (sock_fd >= 0)
		return sock_fd;
	saved = errno; /* a refused connect must not show in the program */
	/* connect and send are cancellation points: the program's own
	 * thread must not be cancelled inside our work (or with our lock) */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
	pthread_mutex_lock(&conn_lock);
	in_conn_get = 1;
	if (sock_fd >= 0 || stream_dead())
		goto out;
	if (!sock_path[0]) {
		conn_errno = ENOENT;
		set_stream_dead(1);
		goto out;
	}
	sock_untrusted = 0;
	conn_errno = sock_dir_check();
	if (conn_errno) {
		sock_untrusted = conn_errno == EPERM;
		set_stream_dead(1);
		goto out;
	}
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		conn_errno = errno; /* a seccomp filter, no descriptor left */
		set_stream_dead(1);
		goto out;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	memcpy(sa.sun_path, sock_path, sizeof(sock_path));
	{
		/* a stalled collector with a full backlog must not block us
		 * for good: connect waits at most the send timeout */
		int ms = sp_cfg.send_timeout_ms > 0 ? sp_cfg.send_timeout_ms : 1;
		struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	}
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || fstat(fd, &st) < 0) {
		conn_errno = errno;
		close(fd);
		set_stream_dead(1);
		goto out;
	}
	/* before anything is sent: a listener of another user gets nothing */
	conn_errno = sock_peer_check(fd);
	if (conn_errno) {
		sock_untrusted = 1;
		close(fd);
		set_stream_dead(1);
		goto out;
	}
	{
		int sz = 1 << 20, hi;

		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
		/* Out of the program's way; with no room that high, do
		 * without the connection rather than hold a low descriptor */
		hi = sp_fd_high(fd);
		if (hi < 0) {
			conn_errno = EMFILE;
			close(fd);
			set_stream_dead(1);
			goto out;
		}
		fd = hi;
		if (fstat(fd, &st) < 0) {
			conn_errno = errno;
			close(fd);
			set_stream_dead(1);
			goto out;
		}
	}
	sock_dev = st.st_dev;
	sock_ino = st.st_ino;
	sock_fd = fd;
	ever_connected = 1;
	atomic_store(&modules_pending, 1);
	if (say_hello)
		hello();
	else
		hello_owed = 1;
out:
	in_conn_get = 0;
	pthread_mutex_unlock(&conn_lock);
	pthread_setcancelstate(cancel, NULL);
	errno = saved;
	return stream_dead() ? -1 : sock_fd;
}

static int conn_get(void)
{
	return conn_get_hello(1);
}

/*
 * Send one message: header + up to two body pieces, and pass_fd (>= 0) as
 * SCM_RIGHTS. With wait, waits at most SQLPROF_SEND_TIMEOUT_MS for room,
 * less while the collector has recently been too slow; without, gives up
 * at once. Returns 0 when sent, -1 when dropped.
 */
/* A message's header (the next sequence number, the loss count so far)
 * and its three pieces, for the socket (sendmsg) and for a file (writev). */
static void msg_frame(struct sp_msg_hdr *mh, struct iovec iov[3], uint16_t flags, const void *b1,
		      size_t l1, const void *b2, size_t l2)
{
	memset(mh, 0, sizeof(*mh));
	mh->magic = SP_WIRE_MAGIC;
	mh->version = SP_WIRE_VERSION;
	mh->flags = flags;
	mh->pid = (uint32_t)getpid();
	mh->len = (uint32_t)(sizeof(*mh) + l1 + l2);
	mh->seq = atomic_fetch_add(&msg_seq, 1) + 1;
	mh->lost = atomic_load(&sp_lost);
	iov[0].iov_base = mh;
	iov[0].iov_len = sizeof(*mh);
	iov[1].iov_base = (void *)b1;
	iov[1].iov_len = l1;
	iov[2].iov_base = (void *)b2;
	iov[2].iov_len = l2;
}

static int send_msg_body(const void *body1, size_t len1, const void *body2, size_t len2,
			 uint16_t flags, int pass_fd, int wait)
{
	struct sp_msg_hdr mh;
	struct iovec iov[3];
	struct msghdr m;
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} ctl;
	uint64_t deadline = 0;
	int fd = conn_get();

	if (fd < 0)
		return -1;
	if (!fd_is_ours()) {
		if (in_conn_get)
			return -1; /* taken from us while we connect: give up */
		/* The program closed our descriptor (close_range, closefrom, a
		 * loop over /proc/self/fd) or dup2()'d something over it. Never
		 * write to it or close it - the number may be the program's now;
		 * connect again instead (at most a few times). */
		pthread_mutex_lock(&conn_lock);
		if (sock_fd == fd) {
			sock_fd = -1;
			reconnects++;
		}
		pthread_mutex_unlock(&conn_lock);
		if (reconnects > 16) {
			set_stream_dead(1);
			return -1;
		}
		fd = conn_get();
		if (fd < 0 || !fd_is_ours())
			return -1;
	}
	msg_frame(&mh, iov, flags, body1, len1, body2, len2);
	memset(&m, 0, sizeof(m));
	m.msg_iov = iov;
	m.msg_iovlen = len2 ? 3 : 2;
	if (pass_fd >= 0) {
		struct cmsghdr *c;

		memset(&ctl, 0, sizeof(ctl));
		m.msg_control = ctl.buf;
		m.msg_controllen = sizeof(ctl.buf);
		c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
	}
	for (;;) {
		ssize_t n = sendmsg(fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
		uint64_t now;
		struct pollfd p;

		if (n >= 0)
			return 0;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != ENOBUFS) {
			set_stream_dead(1); /* EPIPE, ECONNRESET...: collector gone */
			return -1;
		}
		if (!wait)
			return -1;
		now = sp_mono_ns();
		if (!deadline) {
			if (now < atomic_load_explicit(&congested_until, memory_order_relaxed))
				return -1;
			deadline = now + (uint64_t)sp_cfg.send_timeout_ms * 1000000u;
		}
		if (now >= deadline) {
			/* Do not wait again for a second: the target must not
			 * crawl behind a stuck collector. */
			atomic_store_explicit(&congested_until, now + 1000000000u,
					      memory_order_relaxed);
			return -1;
		}
		p.fd = fd;
		p.events = POLLOUT;
		p.revents = 0;
		poll(&p, 1, (int)((deadline - now) / 1000000u) + 1);
	}
}

/* The program's own threads send (and poll): never a cancellation point
 * inside our work. Keeps errno (EAGAIN, EPIPE... are ours). */
static int send_msg_fd(const void *body1, size_t len1, const void *body2, size_t len2,
		       uint16_t flags, int pass_fd, int wait)
{
	int cancel, rc, saved = errno;

	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
	rc = send_msg_body(body1, len1, body2, len2, flags, pass_fd, wait);
	pthread_setcancelstate(cancel, NULL);
	errno = saved;
	return rc;
}

/* ------------------------------------------------------------------ */
/* Rings                                                               */

#define SHARED_LEN (sizeof(struct sp_ring_shared) + RING_SIZE)

/* Rings of exited threads, for the next thread that needs one: a program
 * that starts many short threads pays for a ring (a memfd, two mappings,
 * an announcement) once per thread it runs at a time, not per thread. A
 * ring carries records of any thread: each record says its own tid. */
static struct sp_ring *idle_rings;

/* Thread exit: its ring goes to the idle list, everything in it already
 * published for the collector. */
static void thread_gone(void *arg)
{
	struct sp_ring *r = arg;

	sp_tls.ring = NULL;
	pthread_mutex_lock(&reg_lock);
	r->next_idle = idle_rings;
	idle_rings = r;
	pthread_mutex_unlock(&reg_lock);
}

/* An idle ring for thread t, or NULL. */
static struct sp_ring *ring_reuse(struct sp_thread *t)
{
	struct sp_ring *r;

	pthread_mutex_lock(&reg_lock);
	r = idle_rings;
	if (r)
		idle_rings = r->next_idle;
	pthread_mutex_unlock(&reg_lock);
	if (r) {
		pthread_setspecific(thread_key, r);
		t->ring = r;
	}
	return r;
}

/* Tell the collector about a new ring: a RING record, the memfd attached. */
static int ring_announce(const struct sp_ring_shared *sh, int mfd)
{
	struct sp_rec_ring rr;

	memset(&rr, 0, sizeof(rr));
	rr.h.type = SP_REC_RING;
	rr.h.len = sizeof(rr);
	rr.pid = sh->pid;
	rr.tid = sh->tid;
	rr.size = sh->size;
	return send_msg_fd(&rr, sizeof(rr), NULL, 0, 0, mfd, 1);
}

/* After a failed announcement, the thread tries again no sooner than this
 * (mono ns): a stuck collector must not cost a memfd per record. */
static __thread uint64_t ring_retry_at __attribute__((tls_model("initial-exec")));

/*
 * A ring's memory: its memfd, sized, and both mappings, the private part
 * set up but for the owner (pid, tid). 0, or -1 with nothing left over.
 * RLIMIT_FSIZE applies to a memfd: sizing one beyond it raises SIGXFSZ
 * (blocked, it stays pending), so a limit below the ring's size makes no
 * ring (the thread's records are lost, counted, and record says why).
 */
static int ring_make(struct sp_ring **rp, int *mfdp)
{
	struct sp_ring *r = MAP_FAILED;
	struct sp_ring_shared *sh = MAP_FAILED;
	int mfd;

	if (sp_fsize_room() < (uint64_t)SHARED_LEN) {
		sp_stats_note_seen(SP_SEEN_FSIZE);
		return -1;
	}
	/* MFD_CLOEXEC | MFD_ALLOW_SEALING: the collector seals it against shrinking */
	mfd = (int)syscall(SYS_memfd_create, "sqlprof-ring", 1u | 2u);
	if (mfd < 0)
		return -1;
	if (ftruncate(mfd, (off_t)SHARED_LEN) < 0)
		goto fail;
	sh = mmap(NULL, SHARED_LEN, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
	r = mmap(NULL, sizeof(*r), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED || r == MAP_FAILED)
		goto fail;
	/* Inherited by a child (not MADV_DONTFORK): a forked child lets go
	 * of it in its fork handler and makes its own, and a child made by
	 * a raw clone(), which runs no handler, must find memory where its
	 * copy of our state points rather than a hole (SIGSEGV at its first
	 * sampled execution). */
	r->dontfork = 0;
	r->mfd = -1;
	sh->magic = SP_RING_MAGIC;
	sh->size = RING_SIZE;
	r->sh = sh;
	r->data = sh->data;
	r->poked = (uint32_t)-1; /* no tail yet woken for */
	*rp = r;
	*mfdp = mfd;
	return 0;
fail:
	close(mfd);
	if (sh != MAP_FAILED)
		munmap(sh, SHARED_LEN);
	if (r != MAP_FAILED)
		munmap(r, sizeof(*r));
	return -1;
}

/*
 * Rings made ahead, at start-up (the constructor, a forked child's first
 * SQLite call), once connected: announced to the collector at once, their
 * descriptors closed (they cost the program none), so a thread that
 * starts writing later takes one with no system call at all - a program
 * that confines itself with a seccomp allowlist after its first queries
 * is not killed for our memfd_create (issue 23). A ring carries any
 * thread's records (each says its tid). A spare is not kept to announce
 * again: after a reconnect the untaken ones are dropped (a new collector
 * does not know them). Under reg_lock.
 */
#define RING_SPARES 2
static struct sp_ring *spares[RING_SPARES];
static int nspares;

/*
 * Keep ring r's memfd (consumed), out of the program's way, to announce
 * the ring again to the next collector (an agent restarted): its records
 * not read yet are read by that one. At most RING_FDS_KEPT, and only in
 * the range above FD_HIGH: under a low limit the top slots are the
 * socket's and the statistics', and the descriptor is closed (r->mfd -1:
 * the ring cannot be announced again).
 */
static void ring_keep_fd(struct sp_ring *r, int mfd)
{
	struct stat st;
	int hi = sp_fd_high(mfd);

	r->mfd = -1;
	if (hi >= FD_HIGH && atomic_fetch_add(&ring_fds_kept, 1) >= RING_FDS_KEPT) {
		atomic_fetch_sub(&ring_fds_kept, 1);
		close(hi);
		hi = -2;
	} else if (hi >= 0 && hi < FD_HIGH) {
		close(hi);
		hi = -2;
	}
	if (hi >= 0 && fstat(hi, &st) == 0) {
		r->mfd = hi;
		r->mfd_dev = st.st_dev;
		r->mfd_ino = st.st_ino;
	} else if (hi >= 0) {
		close(hi);
	} else if (hi == -1) {
		close(mfd);
	}
}

/* A spare let go of: its kept descriptor too, if it is still ours. */
static void spare_fd_close(struct sp_ring *r)
{
	struct stat st;

	if (r->mfd >= 0 && fstat(r->mfd, &st) == 0 && st.st_dev == r->mfd_dev &&
	    st.st_ino == r->mfd_ino) {
		close(r->mfd);
		atomic_fetch_sub(&ring_fds_kept, 1);
	}
	r->mfd = -1;
}

static void spares_make(void);

/* The process's first thread set up for SQLite (life.c): the spare
 * rings, made and announced once connected. Keeps errno. */
void sp_stream_spares(void)
{
	static atomic_int done;
	int saved = errno;

	if (!atomic_exchange(&done, 1))
		spares_make();
	errno = saved;
}

static void spares_make(void)
{
	for (int i = 0; i < RING_SPARES; i++) {
		struct sp_ring *r;
		int mfd, n;

		pthread_mutex_lock(&reg_lock);
		n = nspares;
		pthread_mutex_unlock(&reg_lock);
		if (n >= RING_SPARES || stream_dead() || sock_fd < 0 || ring_make(&r, &mfd) < 0)
			return;
		r->sh->pid = (uint32_t)getpid();
		r->sh->tid = sp_tls.tid ? sp_tls.tid : r->sh->pid;
		n = ring_announce(r->sh, mfd);
		/* kept like any ring's (a taken spare is a thread's ring, to
		 * announce again to a restarted agent: t_agent_series lost
		 * every event after the restart without it) */
		if (n == 0)
			ring_keep_fd(r, mfd);
		else
			close(mfd);
		if (n == 0) {
			pthread_mutex_lock(&reg_lock);
			if (nspares < RING_SPARES) {
				spares[nspares++] = r;
				r = NULL;
			}
			pthread_mutex_unlock(&reg_lock);
		}
		if (r) { /* not announced, or another thread filled them */
			spare_fd_close(r);
			munmap(r->sh, SHARED_LEN);
			munmap(r, sizeof(*r));
			return;
		}
	}
}

/* A spare ring, announced already, or NULL when none is left. */
static struct sp_ring *spare_take(void)
{
	struct sp_ring *r = NULL;

	pthread_mutex_lock(&reg_lock);
	if (nspares > 0)
		r = spares[--nspares];
	pthread_mutex_unlock(&reg_lock);
	return r;
}

/* Let go of the spares not taken: a forked child's (the parent's rings;
 * async-signal-safe), or after a reconnect (unknown to the new
 * collector). The caller holds reg_lock or is alone. */
static void spares_drop(void)
{
	while (nspares > 0) {
		struct sp_ring *r = spares[--nspares];

		spare_fd_close(r);
		munmap(r->sh, SHARED_LEN);
		munmap(r, sizeof(*r));
	}
}

static struct sp_ring *ring_new(struct sp_thread *t)
{
	struct sp_ring *r = NULL;
	struct sp_ring_shared *sh;
	int mfd = -1;

	if (stream_dead() || (ring_retry_at && sp_mono_ns() < ring_retry_at))
		return NULL;
	if ((r = ring_reuse(t)) != NULL)
		return r;
	if (!t->tid)
		sp_thread_init(t);
	if ((r = spare_take()) != NULL)
		goto registered; /* announced at start-up */
	if (ring_make(&r, &mfd) < 0) {
		r = NULL;
		goto fail;
	}
	sh = r->sh;
	sh->pid = (uint32_t)getpid();
	sh->tid = t->tid;
	/* the collector is gone or not taking messages now: fail */
	if (ring_announce(sh, mfd) < 0)
		goto fail;
	ring_keep_fd(r, mfd);
	mfd = -1;
registered:
	pthread_mutex_lock(&reg_lock);
	r->next = rings;
	rings = r;
	pthread_mutex_unlock(&reg_lock);
	pthread_setspecific(thread_key, r);
	t->ring = r;
	return r;
fail:
	/* No ring (no memfd under a seccomp filter, no memory, no room under
	 * RLIMIT_FSIZE, no collector taking it): the thread's records are
	 * lost, counted, and it tries again a second later - not a failing
	 * system call per record. */
	if (mfd >= 0)
		close(mfd);
	if (r) {
		munmap(r->sh, SHARED_LEN);
		munmap(r, sizeof(*r));
	}
	ring_retry_at = sp_mono_ns() + 1000000000u;
	return NULL;
}

/* Wake the collector (a header-only message, never waited for) and note
 * the tail it had then. */
static void ring_wake(struct sp_ring *r, uint32_t tl)
{
	send_msg_fd(NULL, 0, NULL, 0, SP_MSG_WAKE, -1, 0);
	r->poked = tl;
}

/* The ring is full: wake the collector and give it at most
 * SQLPROF_SEND_TIMEOUT_MS (none while it has recently been too slow) to
 * make room for need bytes. Returns the tail then. */
static uint32_t ring_wait(struct sp_ring *r, uint32_t need)
{
	uint32_t tl = __atomic_load_n(&r->sh->tail, __ATOMIC_ACQUIRE);
	uint64_t now = sp_mono_ns(), deadline;

	if (stream_dead() || now < atomic_load_explicit(&congested_until, memory_order_relaxed))
		return tl;
	ring_wake(r, tl);
	deadline = now + (uint64_t)sp_cfg.send_timeout_ms * 1000000u;
	while (RING_SIZE - (r->head - tl) < need) {
		struct timespec ts = { 0, 50000 };

		if (now >= deadline || stream_dead()) {
			/* Do not wait again for a second: the target must not
			 * crawl behind a stuck collector. */
			atomic_store_explicit(&congested_until, now + 1000000000u,
					      memory_order_relaxed);
			break;
		}
		nanosleep(&ts, NULL);
		tl = __atomic_load_n(&r->sh->tail, __ATOMIC_ACQUIRE);
		now = sp_mono_ns();
	}
	return tl;
}

/*
 * Slow path of sp_rec_reserve: no ring yet, the ring wraps, is half full
 * (wake the collector) or full (wait for it). Returns where to write len
 * bytes, or NULL when the record is lost (counted). Not reentrant per
 * thread. Keeps errno.
 */
static void *reserve_slow(struct sp_thread *t, uint32_t len)
{
	struct sp_ring *r = t->ring;
	uint32_t hd, tl, off, need, used, half;
	int saved = errno;
	void *p = NULL;

	if (unlikely(!r)) {
		r = ring_new(t);
		if (!r)
			goto lost;
	}
	if (unlikely(len > RING_SIZE / 2 || r->orphan))
		goto lost;
	hd = r->head;
	off = hd & RING_MASK;
	need = RING_SIZE - off < len ? RING_SIZE - off + len : len;
	tl = __atomic_load_n(&r->sh->tail, __ATOMIC_ACQUIRE);
	used = hd - tl;
	if (unlikely(used > RING_SIZE)) {
		/* the collector wrote nonsense: stop using the ring */
		r->orphan = 1;
		r->wlimit = r->head;
		goto lost;
	}
	if (used >= RING_SIZE / 2 && r->poked != tl) {
		/* half full: wake the collector, once per tail it has published */
		ring_wake(r, tl);
	}
	if (unlikely(RING_SIZE - used < need)) {
		tl = ring_wait(r, need);
		used = hd - tl;
		if (used > RING_SIZE || RING_SIZE - used < need)
			goto lost;
	}
	if (unlikely(RING_SIZE - off < len)) {
		struct sp_rec_hdr *pad = (void *)(r->data + off);

		pad->type = REC_PAD;
		pad->flags = 0;
		pad->len = RING_SIZE - off;
		hd += RING_SIZE - off;
		off = 0;
	}
	r->head = hd; /* past the PAD, if one was written */
	p = r->data + off;
	{
		/* No check needed up to the end of the free space (the tail's
		 * wrap) or of the buffer, whichever comes first - or up to half
		 * full, to wake the collector then, unless done for this tail. */
		uint32_t lim = hd - off + RING_SIZE;

		half = tl + RING_SIZE / 2;
		if ((int32_t)(tl + RING_SIZE - lim) < 0)
			lim = tl + RING_SIZE;
		if (r->poked != tl && (int32_t)(half - lim) < 0 && (int32_t)(half - hd) > 0)
			lim = half;
		/* never behind the head after this record: the fast path
		 * compares unsigned differences */
		if ((int32_t)(lim - (hd + len)) < 0)
			lim = hd + len;
		r->wlimit = lim;
	}
	errno = saved;
	return p;
lost:
	atomic_fetch_add(&sp_lost, 1);
	errno = saved;
	return NULL;
}

void *sp_rec_reentered(void)
{
	atomic_fetch_add(&sp_lost, 1);
	return NULL;
}

void *sp_rec_reserve_slow(struct sp_thread *t, uint32_t len)
{
	int cancel;
	void *p;

	/* a new ring, a wake-up, a wait for room: system calls that are
	 * cancellation points, in the program's thread */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
	p = reserve_slow(t, len);
	pthread_setcancelstate(cancel, NULL);
	return p;
}

/* ------------------------------------------------------------------ */
/* Module map                                                          */

struct map_line {
	uint64_t lo, hi;
	const char *at; /* just past "lo-hi" in the maps text */
};

struct modbuf {
	uint8_t *p;
	size_t len, cap;
	uint32_t gen;
	char exe[4096];
	char *rel;              /* the mapped file's path (malloc'd, PATH_MAX) */
	char *maps;             /* /proc/self/maps, read once */
	struct map_line *lines; /* its lines by address (malloc'd), nlines */
	size_t nlines;
	int counted; /* the loader's add/sub counters taken from this walk */
};

/* last dlpi_adds/dlpi_subs seen (by a module map or sp_modules_changed);
 * read and written by any thread */
static _Atomic unsigned long long seen_adds, seen_subs;

static const uint8_t *find_build_id(const struct dl_phdr_info *info, size_t *len)
{
	int i;

	for (i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		const uint8_t *p, *end;

		if (ph->p_type != PT_NOTE)
			continue;
		p = (const uint8_t *)(info->dlpi_addr + ph->p_vaddr);
		end = p + ph->p_memsz;
		while (p + sizeof(ElfW(Nhdr)) <= end) {
			const ElfW(Nhdr) *n = (const void *)p;
			const uint8_t *name = p + sizeof(*n);
			const uint8_t *desc = name + ((n->n_namesz + 3) & ~3u);

			if (desc + n->n_descsz > end)
				break;
			if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 &&
			    memcmp(name, "GNU", 4) == 0) {
				*len = n->n_descsz;
				return desc;
			}
			p = desc + ((n->n_descsz + 3) & ~3u);
		}
	}
	*len = 0;
	return NULL;
}

/*
 * This process's /proc/self/maps, whole, NUL-terminated (malloc'd), or
 * NULL. Read once per module map sent.
 */
static char *read_maps(void)
{
	size_t cap = 65536, len = 0;
	char *buf = malloc(cap);
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (!buf || fd < 0) {
		free(buf);
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	while ((n = read(fd, buf + len, cap - 1 - len)) > 0) {
		len += (size_t)n;
		if (len == cap - 1) {
			char *nb = cap < (16u << 20) ? realloc(buf, cap * 2) : NULL;

			if (!nb)
				break;
			buf = nb;
			cap *= 2;
		}
	}
	close(fd);
	buf[len] = 0;
	return buf;
}

/* A hexadecimal (base 16) or decimal number at *p, moving *p past it. */
static unsigned long long parse_num(const char **p, int base)
{
	unsigned long long v = 0;

	for (;; (*p)++) {
		unsigned c = (unsigned char)**p, d;

		if (c >= '0' && c <= '9')
			d = c - '0';
		else if (base == 16 && (c | 32) >= 'a' && (c | 32) <= 'f')
			d = (c | 32) - 'a' + 10;
		else
			return v;
		v = v * (unsigned)base + d;
	}
}

/*
 * The mapping holding addr in maps: the device and inode of its file and
 * its path (absolute; a library dlopen'd by a relative name, "./plug.so",
 * keeps that name in the loader's list, which means nothing in the
 * collector's directory nor in ours after a chdir). 0 when found. A line
 * is "lo-hi perms offset major:minor inode   path"; parsed by hand (sscanf
 * cost 15 instructions an execution over a 100,000-execution run, for
 * the lines of one map).
 */
static int mapped_file(const struct modbuf *mb, uint64_t addr, uint64_t *dev, uint64_t *ino,
		       char *path, size_t cap)
{
	size_t lo = 0, hi = mb->nlines;
	const char *q, *nl, *slash;
	unsigned long long maj, min, inode;
	size_t len;

	while (lo < hi) { /* the last line starting at or below addr */
		size_t mid = lo + (hi - lo) / 2;

		if (mb->lines[mid].lo <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo || addr >= mb->lines[lo - 1].hi)
		return -1;
	q = mb->lines[lo - 1].at;
	nl = strchr(q, '\n');
	for (int field = 0; field < 2; field++) { /* perms, offset */
		while (*q == ' ')
			q++;
		while (*q && *q != ' ' && *q != '\n')
			q++;
	}
	while (*q == ' ')
		q++;
	maj = parse_num(&q, 16);
	if (*q++ != ':')
		return -1;
	min = parse_num(&q, 16);
	while (*q == ' ')
		q++;
	inode = parse_num(&q, 10);
	slash = strchr(q, '/');
	if (!slash || (nl && slash > nl))
		return -1;
	len = nl ? (size_t)(nl - slash) : strlen(slash);
	if (len >= 10 && !memcmp(slash + len - 10, " (deleted)", 10))
		len -= 10;
	if (len >= cap)
		return -1;
	memcpy(path, slash, len);
	path[len] = 0;
	*dev = makedev((unsigned)maj, (unsigned)min);
	*ino = inode;
	return 0;
}

/* Index mb->maps by address (the kernel lists mappings in address
 * order): one parse of each line's range per module map, where looking
 * each module up from the first line cost modules x lines (a Python
 * process: ~100 modules over ~400 lines at every map). No index (no
 * memory): no module gets its file's identity. */
static void index_maps(struct modbuf *mb)
{
	size_t cap = 0;

	for (const char *line = mb->maps; line && *line;) {
		const char *nl = strchr(line, '\n'), *q = line;
		uint64_t lo, hi;

		lo = parse_num(&q, 16);
		if (*q++ == '-') {
			hi = parse_num(&q, 16);
			if (mb->nlines == cap) {
				struct map_line *nv = realloc(
					mb->lines, (cap = cap ? 2 * cap : 256) * sizeof(*nv));

				if (!nv) {
					mb->nlines = 0;
					return;
				}
				mb->lines = nv;
			}
			mb->lines[mb->nlines++] = (struct map_line){ lo, hi, q };
		}
		line = nl ? nl + 1 : NULL;
	}
}

/* Which objects provide the sqlite3 API (sp_dyn_sqlite_kind), worked
 * out once per mapped file and address: the scan of libsqlite3's symbols
 * at every module map cost 2 instructions an execution over the
 * 100,000-execution loop. Used only in module_cb, which glibc's
 * dl_iterate_phdr runs under the loader's lock; kind_lock makes that
 * explicit (a libc or a sanitizer's interceptor need not hold one). */
#define KIND_CACHE 64
static struct {
	uint64_t lo, dev, ino;
	int kind;
} kind_cache[KIND_CACHE];
static unsigned kind_cached;
static pthread_mutex_t kind_lock = PTHREAD_MUTEX_INITIALIZER;

static int module_kind(struct dl_phdr_info *info, uint64_t lo, uint64_t dev, uint64_t ino)
{
	unsigned n, i;
	int kind;

	pthread_mutex_lock(&kind_lock);
	n = kind_cached < KIND_CACHE ? kind_cached : KIND_CACHE;
	for (i = 0; i < n; i++)
		if (kind_cache[i].lo == lo && kind_cache[i].dev == dev &&
		    kind_cache[i].ino == ino) {
			kind = kind_cache[i].kind;
			pthread_mutex_unlock(&kind_lock);
			return kind;
		}
	pthread_mutex_unlock(&kind_lock);
	kind = sp_dyn_sqlite_kind(info);
	if (ino) { /* a file we know: the same file at the same address */
		pthread_mutex_lock(&kind_lock);
		i = kind_cached++ % KIND_CACHE;
		kind_cache[i].lo = lo;
		kind_cache[i].dev = dev;
		kind_cache[i].ino = ino;
		kind_cache[i].kind = kind;
		pthread_mutex_unlock(&kind_lock);
	}
	return kind;
}

static int module_cb(struct dl_phdr_info *info, size_t info_size, void *arg)
{
	struct modbuf *mb = arg;
	const char *path = info->dlpi_name;
	const uint8_t *bid;
	size_t bid_len, plen, rl;
	uint64_t lo = UINT64_MAX, hi = 0, dev = 0, ino = 0, size = 0;
	int64_t mtime = 0;
	uint16_t flags = 0;
	struct sp_rec_module *r;
	struct stat st;
	int i;

	/* The map being sent is what the loader's counters say now (the walk
	 * holds its lock): sp_modules_changed must not walk and send it again
	 * at the first stack (it did: 50,000 instructions at every start). */
	if (!mb->counted &&
	    info_size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs)) {
		atomic_store_explicit(&seen_adds, info->dlpi_adds, memory_order_relaxed);
		atomic_store_explicit(&seen_subs, info->dlpi_subs, memory_order_relaxed);
		mb->counted = 1;
	}
	for (i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
			uint64_t a = info->dlpi_addr + ph->p_vaddr;

			if (a < lo)
				lo = a;
			if (a + ph->p_memsz > hi)
				hi = a + ph->p_memsz;
		}
	}
	if (hi == 0)
		return 0;
	if (!path || !*path)
		path = mb->exe;
	if (!mb->rel)
		mb->rel = malloc(4096);
	if (mb->nlines && mb->rel && mapped_file(mb, lo, &dev, &ino, mb->rel, 4096) == 0) {
		if (path[0] != '/')
			path = mb->rel; /* dlopen'd by a relative path */
		if (stat(path, &st) == 0 && (uint64_t)st.st_dev == dev &&
		    (uint64_t)st.st_ino == ino) {
			size = (uint64_t)st.st_size;
			mtime = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
		} else {
			flags = SP_MODULE_REPLACED;
		}
	}
	if (!((uintptr_t)module_cb >= lo && (uintptr_t)module_cb < hi)) /* not libsqlprof.so */
		flags |= (uint16_t)(module_kind(info, lo, dev, ino) |
				    sp_embed_module_flags(info->dlpi_addr));
	bid = find_build_id(info, &bid_len);
	if (bid_len > 64)
		bid_len = 64;
	plen = strnlen(path, 4095);
	rl = SP_ALIGN8(sizeof(*r) + bid_len + plen);
	if (mb->len + rl > mb->cap) {
		size_t cap = (mb->cap ? mb->cap * 2 : 16384) + rl;
		uint8_t *np = realloc(mb->p, cap);

		if (!np)
			return 1;
		mb->p = np;
		mb->cap = cap;
	}
	r = (void *)(mb->p + mb->len);
	memset(r, 0, rl);
	r->h.type = SP_REC_MODULE;
	r->h.flags = flags;
	r->h.len = (uint32_t)rl;
	r->dev = dev;
	r->ino = ino;
	r->size = size;
	r->mtime_ns = mtime;
	r->pid = (uint32_t)getpid();
	r->tid = sp_tls.tid;
	r->bias = info->dlpi_addr;
	r->lo = lo;
	r->hi = hi;
	r->generation = mb->gen;
	r->build_id_len = (uint16_t)bid_len;
	r->path_len = (uint16_t)plen;
	if (bid_len)
		memcpy(r + 1, bid, bid_len); /* bid is NULL without a build-id */
	memcpy((uint8_t *)(r + 1) + bid_len, path, plen);
	mb->len += rl;
	return 0;
}

/*
 * Send the module map if it changed. Called only where we hold no lock
 * of our own (dl_iterate_phdr takes the loader's lock, and a dlopen'd
 * constructor may call into SQLite and so into us).
 */
void sp_modules_maybe_send(void)
{
	struct modbuf mb;
	size_t off;
	ssize_t n;

	if (!atomic_load_explicit(&modules_pending, memory_order_relaxed) || sock_fd < 0 ||
	    stream_dead())
		return;
	if (!atomic_exchange(&modules_pending, 0))
		return;
	memset(&mb, 0, sizeof(mb));
	mb.gen = atomic_fetch_add(&module_gen, 1) + 1;
	n = readlink("/proc/self/exe", mb.exe, sizeof(mb.exe) - 1);
	mb.exe[n > 0 ? n : 0] = 0;
	mb.maps = read_maps();
	index_maps(&mb);
	sp_py_modules_changed();
	sp_guard_in(&sp_tls);
	dl_iterate_phdr(module_cb, &mb);
	sp_guard_out(&sp_tls);
	/* Split into messages below the size limit, on record boundaries. */
	for (off = 0; off < mb.len;) {
		size_t chunk = 0;

		while (off + chunk < mb.len) {
			const struct sp_rec_hdr *h = (const void *)(mb.p + off + chunk);

			if (chunk + h->len > SP_MSG_MAX / 2)
				break;
			chunk += h->len;
		}
		if (!chunk)
			break;
		send_msg(mb.p + off, chunk, NULL, 0, 0);
		off += chunk;
	}
	free(mb.p);
	free(mb.rel);
	free(mb.maps);
	free(mb.lines);
}

uint32_t sp_modules_generation(void)
{
	return atomic_load_explicit(&module_gen, memory_order_acquire);
}

static int counters_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	unsigned long long *c = arg;

	if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs)) {
		c[0] = info->dlpi_adds;
		c[1] = info->dlpi_subs;
	}
	return 1; /* the counters are the same in every entry: stop */
}

/*
 * Resend the module map when libraries were loaded or unloaded since the
 * last look (glibc's dlpi_adds/dlpi_subs counters). Called before a new
 * stack is sent; never under our locks.
 */
void sp_modules_resend(void)
{
	atomic_store(&modules_pending, 1);
	sp_modules_maybe_send();
}

void sp_modules_changed(void)
{
	unsigned long long c[2] = { 0, 0 };

	dl_iterate_phdr(counters_cb, c);
	if (c[0] != atomic_load_explicit(&seen_adds, memory_order_relaxed) ||
	    c[1] != atomic_load_explicit(&seen_subs, memory_order_relaxed)) {
		atomic_store_explicit(&seen_adds, c[0], memory_order_relaxed);
		atomic_store_explicit(&seen_subs, c[1], memory_order_relaxed);
		atomic_store(&modules_pending, 1);
	}
	SP_DEEPBIND_CATCH_UP();
	sp_embed_rescan();
	sp_modules_maybe_send();
}

/* ------------------------------------------------------------------ */
/* A collector that goes away and one that comes (back)                */

/* Announce every ring of ours again to a new collector, with the memfd
 * kept for it. The registry only grows (rings are never freed but in a
 * forked child), so it is walked without the lock from its head. */
static void rings_announce_again(void)
{
	struct sp_ring *r;

	pthread_mutex_lock(&reg_lock);
	r = rings;
	spares_drop(); /* announced to the last collector only */
	pthread_mutex_unlock(&reg_lock);
	for (; r; r = r->next) {
		struct stat st;

		if (r->orphan || r->mfd < 0 || fstat(r->mfd, &st) < 0 || st.st_dev != r->mfd_dev ||
		    st.st_ino != r->mfd_ino)
			continue; /* that ring's later records are lost, counted when full */
		r->poked = (uint32_t)-1;
		(void)ring_announce(r->sh, r->mfd);
	}
}

/*
 * At most once a second, from a slow path (sp_stream_tick): is the
 * collector still there (a peek at the socket: end of file when it is
 * gone)? If it is gone, or none was there, connect when one listens at
 * our socket again, and send what it needs: HELLO with the statistics
 * (cumulative: it reads every total there is), the rings (their records
 * the last collector did not read are read by this one), the module map,
 * and from now on every SQL text and stack again (it knows none). The
 * program is never held up: the connect waits at most the send timeout,
 * and a refused one costs one system call a second. Keeps errno.
 */
void sp_stream_tick_slow(uint64_t now)
{
	/* a quarter of a second in sp_now()'s units, so that a check the
	 * ns deadline allows is never put off by more than that (the
	 * constructor's calibration: sp_tsc_per_ns() would calibrate again) */
	uint64_t span = sp_clock_tsc ? (uint64_t)(250e6 * tsc_per_ns) : 250000000u;

	atomic_store_explicit(&sp_stream_tick_at, now + (span ? span : 1), memory_order_relaxed);
	sp_stream_check();
}

void sp_stream_check(void)
{
	uint64_t now = sp_mono_ns(), at = atomic_load(&sp_stream_check_at);
	int saved = errno, cancel;
	char b;

	if (now < at ||
	    !atomic_compare_exchange_strong(&sp_stream_check_at, &at, now + 1000000000u))
		return;
	if (!sp_cfg.enabled || (uint32_t)getpid() != sp_proc_pid || sp_stream_restart ||
	    hello_owed || unreported != UNREP_NO || !sock_path[0] || sp_guarded(&sp_tls))
		return;
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
	if (!stream_dead() && sock_fd >= 0 && fd_is_ours()) {
		ssize_t n = recv(sock_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);

		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
			set_stream_dead(1);
	}
	if (stream_dead() && reconnects <= 16) {
		int had = ever_connected;

		pthread_mutex_lock(&conn_lock);
		sock_let_go();
		set_stream_dead(0);
		atomic_store(&congested_until, 0);
		pthread_mutex_unlock(&conn_lock);
		stats_shared = 0;
		if (conn_get() >= 0) {
			if (had)
				agent_reconnects++;
			rings_announce_again();
			sp_sql_sent_reset();
			ring_retry_at = 0;
			sp_modules_maybe_send();
			/* texts that found no ring while no collector listened */
			if (atomic_load_explicit(&sp_sql_pending, memory_order_relaxed))
				sp_sql_flush(&sp_tls);
		}
		/* else conn_get left the stream dead: again in a second */
	}
	pthread_setcancelstate(cancel, NULL);
	errno = saved;
}

/* ------------------------------------------------------------------ */
/* Process life                                                        */

int sp_stream_restart;

static void unrep_mark(void);

/* The collector is gone (its socket refused, or its directory removed):
 * nobody would read what we leave. Any other failure to connect (a
 * seccomp filter, permissions after a uid change, no descriptor, a
 * stalled collector) makes the image one that could not report. */
static int collector_gone(int err)
{
	return err == ECONNREFUSED || err == ENOENT || err == ENOTDIR;
}

void sp_stream_child_start(void)
{
	sp_stream_restart = 0;
	if (!sp_stats)
		sp_stats_init(); /* the child's own totals, sent with its HELLO */
	if (hello_owed) {
		/* connected before a uid change: say hello now */
		int cancel;

		pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
		pthread_mutex_lock(&conn_lock);
		in_conn_get = 1;
		hello_owed = 0;
		hello();
		in_conn_get = 0;
		pthread_mutex_unlock(&conn_lock);
		pthread_setcancelstate(cancel, NULL);
		return;
	}
	if (conn_get() < 0) { /* connects and says hello */
		if (!collector_gone(conn_errno))
			unrep_mark();
		return;
	}
	spares_make(); /* its own: the parent's were let go of at fork */
}

/*
 * Before the program changes its uid (setuid and friends): a forked child
 * that has not connected yet connects now, while the collector's private
 * directory and its uid check still let it in. The connection outlives
 * the change; its HELLO waits for the first execution, so a child that
 * never runs SQLite still leaves no process row. Keeps errno.
 */
void sp_stream_before_uid_change(void)
{
	int saved = errno;

	if (sp_cfg.enabled && sp_stream_restart && sock_fd < 0 && !stream_dead() &&
	    (uint32_t)getpid() == sp_proc_pid && !sp_guarded(&sp_tls))
		conn_get_hello(0);
	errno = saved;
}

/* Constructor: take the socket's path now, connect and say hello.
 * Returns 0 when the image is profiled: connected, or unable to connect
 * for a reason that leaves a collector to tell (its data then go to a
 * file at exit); -1 when the collector is gone. */
int sp_stream_init(void)
{
	const char *path = getenv(SP_ENV_SOCK);

	if (!path || strlen(path) >= sizeof(sock_path))
		return -1;
	strcpy(sock_path, path);
	trust_uid0 = getuid();
	trust_euid0 = geteuid();
	{
		const char *tr = getenv("SQLPROF_TRUST_ROOT");

		trust_root = tr && !strcmp(tr, "1");
	}
	if (pthread_key_create(&thread_key, thread_gone) != 0)
		return -1;
	if (conn_get() >= 0) {
		/* the spares wait for the first SQLite call (sp_stream_spares):
		 * a program that never runs SQLite pays no ring */
		return 0;
	}
	if (collector_gone(conn_errno)) {
		/* no collector listens yet (an agent not started, or
		 * restarting): profiled all the same, into our statistics;
		 * a slow path connects when one appears (sp_stream_check) */
		atomic_store(&sp_stream_check_at, sp_mono_ns() + 1000000000u);
		return 0;
	}
	/* profiled all the same; it says so at its first SQLite call */
	unreported = UNREP_IDLE;
	sp_unrep_pending = 1;
	return 0;
}

/* In the child after fork(): one thread, a copy of everything. The rings
 * are the parent's (shared with its collector reader): the child lets go
 * of them and, on first use, opens its own connection and rings. */
void sp_stream_fork_child(void)
{
	struct sp_ring *r, *next;

	pthread_mutex_init(&reg_lock, NULL);
	pthread_mutex_init(&conn_lock, NULL);
	pthread_mutex_init(&kind_lock, NULL);
	for (r = rings; r; r = next) {
		struct stat st;

		next = r->next;
		/* the parent's ring: its memfd copy is ours to close, if it is
		 * still what we kept there */
		if (r->mfd >= 0 && fstat(r->mfd, &st) == 0 && st.st_dev == r->mfd_dev &&
		    st.st_ino == r->mfd_ino)
			close(r->mfd);
		if (!r->dontfork) /* else not mapped here: never munmap an
				   * address someone else may have by now */
			munmap(r->sh, SHARED_LEN);
		munmap(r, sizeof(*r));
	}
	rings = NULL;
	idle_rings = NULL;
	spares_drop();
	sp_tls.ring = NULL;
	/* the thread-exit handler must not see the parent's ring */
	pthread_setspecific(thread_key, NULL);
	if (sock_fd >= 0 && fd_is_ours())
		close(sock_fd); /* ours: the parent keeps its own copy */
	sock_fd = -1;
	if (retired_is_ours()) /* one thread here: no late sender */
		close(retired_fd);
	retired_fd = -1;
	set_stream_dead(0);
	atomic_store(&congested_until, 0);
	atomic_store(&msg_seq, 0);
	atomic_store(&sp_lost, 0);
	sp_stream_restart = 1;
	unreported = UNREP_NO;
	sp_unrep_pending = 0;
	hello_owed = 0;
	ever_connected = 0;
	atomic_store(&ring_fds_kept, 0);
	agent_reconnects = 0;
	atomic_store(&sp_stream_check_at, 0);
	atomic_store(&sp_stream_tick_at, 0);
	conn_errno = 0;
	reconnects = 0;
	ring_retry_at = 0;
	stats_shared = 0;
	atomic_store(&sp_untracked, 0);
	sp_stack_sets_reset();
}

/*
 * When the collector cannot take our goodbye (stalled, gone), leave it in
 * the private directory as a file holding the same message; the collector
 * reads those files when the recording ends, so a loss is still counted.
 */
static void bye_file(const struct sp_rec_bye *b)
{
	const char *sock = sock_path;
	const char *slash = strrchr(sock, '/');
	char path[512];
	struct sp_msg_hdr mh;
	int fd;

	if (!slash || (size_t)(slash - sock) > sizeof(path) - 32)
		return;
	/* pid and time: an exec'd image of the same pid writes its own */
	snprintf(path, sizeof(path), "%.*s/bye.%u.%llu", (int)(slash - sock), sock, b->pid,
		 (unsigned long long)sp_mono_ns());
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return;
	memset(&mh, 0, sizeof(mh));
	mh.magic = SP_WIRE_MAGIC;
	mh.version = SP_WIRE_VERSION;
	mh.flags = SP_MSG_FINAL;
	mh.pid = b->pid;
	mh.len = sizeof(mh) + sizeof(*b);
	mh.seq = atomic_fetch_add(&msg_seq, 1) + 1;
	mh.lost = b->lost;
	if (write(fd, &mh, sizeof(mh)) == (ssize_t)sizeof(mh))
		(void)!write(fd, b, sizeof(*b));
	close(fd);
}

/* One message (header, then two pieces) written to the file fd. */
static int file_msg(int fd, uint16_t flags, const void *b1, size_t l1, const void *b2, size_t l2)
{
	struct sp_msg_hdr mh;
	struct iovec iov[3];
	ssize_t n;

	msg_frame(&mh, iov, flags, b1, l1, b2, l2);
	n = writev(fd, iov, 3);
	return n == (ssize_t)mh.len ? 0 : -1;
}

static int stats_copy_to(int file_fd);

/* One pending SQL record into the file (sp_sql_pending_each). */
static int file_sql(void *arg, const void *rec, uint32_t len)
{
	return file_msg(*(int *)arg, 0, rec, len, NULL, 0);
}

/*
 * An image that could not connect leaves its data in a file of the
 * collector's directory, unrep.PID.TIME: the messages it would have sent
 * - HELLO (flagged SP_HELLO_UNREPORTED), and with bye (at exit) its SQL
 * texts (they had no ring to go to), a copy of every chunk of its
 * statistics and BYE - written to a temporary name and renamed,
 * so the collector reads a whole file or the previous one. Called when
 * the connect fails (HELLO only: a process killed later still counts)
 * and at exit. Returns 0, or -1 when the file cannot be made (the
 * directory is another uid's). Keeps errno. No malloc (also runs in the
 * _exit shim).
 */
static int data_file(const char *path, uint16_t hello_flags, const struct sp_rec_bye *bye);

static int unrep_write(const struct sp_rec_bye *bye)
{
	return data_file(unrep_path, SP_HELLO_UNREPORTED, bye);
}

/* The messages of data_file's comment into path (through tmp--.NAME,
 * renamed), HELLO flagged hello_flags. */
static int data_file(const char *path, uint16_t hello_flags, const struct sp_rec_bye *bye)
{
	char tmp[sizeof(unrep_path) + 8];
	const char *slash;
	char buf[HELLO_MAX];
	uint32_t len;
	int fd, rc = -1, saved = errno;

	if (!path[0])
		return -1;
	slash = strrchr(path, '/');
	if (!slash || strlen(path) + 8 > sizeof(tmp))
		return -1;
	/* "tmp--.unrep.PID.TIME": no reader takes it */
	snprintf(tmp, sizeof(tmp), "%.*s/tmp--.%s", (int)(slash - path), path, slash + 1);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		goto out;
	atomic_store(&msg_seq, 0); /* each file is read alone: its messages from 1 */
	len = hello_build(buf, hello_flags);
	if (file_msg(fd, 0, buf, len, NULL, 0) < 0 ||
	    (bye && sp_sql_pending_each(file_sql, &fd) < 0) || (bye && stats_copy_to(fd) < 0) ||
	    (bye && file_msg(fd, SP_MSG_FINAL, bye, sizeof(*bye), NULL, 0) < 0)) {
		close(fd);
		unlink(tmp);
		goto out;
	}
	close(fd);
	if (rename(tmp, path) == 0)
		rc = 0;
	else
		unlink(tmp);
out:
	errno = saved;
	return rc;
}

/*
 * The collector this image reported to is gone (an agent killed or
 * restarting) and none listens now, at exit: its totals would die with
 * it, and only a BYE file said how many there were. So it leaves them
 * in a file gone.PID.INO.NS of the collector's directory (INO: its
 * statistics memfd's inode, which names the image to an agent that
 * holds its earlier part): HELLO, the texts still pending, a copy of
 * every chunk of its statistics and BYE, as an unreported image's file.
 * The next agent on that socket reads it (sp_coll_read_gone). Returns 0,
 * or -1 (then a BYE file is left, as before).
 */
static int gone_write(const struct sp_rec_bye *bye)
{
	const char *slash = strrchr(sock_path, '/');
	char path[sizeof(unrep_path)];
	struct stat st;
	int sfd = sp_stats_fd();

	if (!slash || (size_t)(slash - sock_path) >= sizeof(sock_path) || sfd < 0 ||
	    fstat(sfd, &st) < 0)
		return -1;
	snprintf(path, sizeof(path), "%.*s/gone.%u.%llu.%llu", (int)(slash - sock_path), sock_path,
		 (unsigned)getpid(), (unsigned long long)st.st_ino,
		 (unsigned long long)sp_mono_ns());
	return data_file(path, 0, bye);
}

/* The image could not connect (at start-up, and it now runs SQLite, or
 * at a forked child's first execution): it runs on, profiled into its own statistics, and says so
 * in a file now. When the directory takes no file (another uid's), it
 * adds itself to the count in the statistics of its nearest ancestor that
 * reported, which the collector holds (stats.c). */
static void unrep_mark(void)
{
	const char *slash = strrchr(sock_path, '/');

	unreported = UNREP_FILE;
	if (sock_untrusted) {
		/* nothing goes into another user's directory */
		unreported = UNREP_COUNTED;
		sp_stats_count_unreported();
		return;
	}
	if (slash && (size_t)(slash - sock_path) < sizeof(sock_path))
		snprintf(unrep_path, sizeof(unrep_path), "%.*s/unrep.%u.%llu",
			 (int)(slash - sock_path), sock_path, (unsigned)getpid(),
			 (unsigned long long)sp_mono_ns());
	if (unrep_write(NULL) < 0) {
		unreported = UNREP_COUNTED;
		sp_stats_count_unreported();
	}
}

/* The first SQLite call of an image that could not connect at start-up
 * (sp_thread_ready): only now is it a process that ran SQLite and could
 * not report - a shell or any other program that never uses SQLite is
 * not one. */
void sp_stream_unrep_start(void)
{
	if (__atomic_exchange_n(&sp_unrep_pending, 0, __ATOMIC_ACQ_REL))
		unrep_mark();
}

/* Statistics the collector could not map (no memfd): send a copy of
 * every chunk, so that a process that exits still delivers exact totals.
 * A process killed first loses them; the collector says so. */
static void stats_copy(void)
{
	(void)stats_copy_to(-1);
}

/* The copies, sent (file_fd < 0) or written to file_fd. Returns 0, or -1
 * when one could not be written (a send that fails ends the copies). */
static int stats_copy_to(int file_fd)
{
	uint32_t n = sp_stats ? __atomic_load_n(&sp_stats->nchunks, __ATOMIC_ACQUIRE) : 0, ci;
	uint8_t *base = (uint8_t *)sp_stats;
	struct sp_rec_stats_copy rc;

	for (ci = 0; ci < n; ci++) {
		const uint8_t *chunk = base + (size_t)ci * SP_STATS_CHUNK;
		uint32_t used =
			ci ? __atomic_load_n(
				     &((const struct sp_stats_chunk *)(const void *)chunk)->used,
				     __ATOMIC_ACQUIRE)
			   : (uint32_t)sizeof(struct sp_stats_hdr);

		if (used < sizeof(struct sp_stats_chunk) || used > SP_STATS_CHUNK)
			continue;
		memset(&rc, 0, sizeof(rc));
		rc.h.type = SP_REC_STATS_COPY;
		rc.h.len = (uint32_t)sizeof(rc) + SP_ALIGN8(used);
		rc.pid = (uint32_t)getpid();
		rc.tid = sp_tls.tid;
		rc.chunk = ci;
		rc.len = used;
		if (file_fd >= 0) {
			if (file_msg(file_fd, 0, &rc, sizeof(rc), chunk, SP_ALIGN8(used)) < 0)
				return -1;
		} else if (send_msg(&rc, sizeof(rc), chunk, SP_ALIGN8(used), 0) < 0) {
			break;
		}
	}
	return 0;
}

static int sqlite_mapped_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	const char *n = info->dlpi_name, *b = n ? strrchr(n, '/') : NULL;

	(void)size;
	(void)arg;
	b = b ? b + 1 : n;
	return b && !strncmp(b, "libsqlite3.so", 13);
}

/* For record's warnings, in an image that counted no execution: was a
 * libsqlite3 mapped (loaded, but no call reached us: RTLD_DEEPBIND) or
 * not at all? dl_iterate_phdr holds the loader's lock only; none of ours
 * is held here. */
static void note_sqlite_seen(uint64_t executions)
{
	if (executions || !sp_stats)
		return;
	sp_stats_note_seen(dl_iterate_phdr(sqlite_mapped_cb, NULL) ? SP_SEEN_SQLITE_MAPPED
								   : SP_SEEN_NO_SQLITE);
}

/* ---- SQL texts still pending at exit ---------------------------------- */

/* A process that exits with SQL texts still pending (their ring was full
 * when they were made: sp_sql_note kept copies) waits for its collector
 * to make room for them at most EXIT_TEXTS_WAIT_NS in all, and at most
 * EXIT_TEXTS_STALL_NS while the collector reads nothing (stopped,
 * starved, gone); the texts still pending then go to a file. So a text
 * is never lost at a normal exit, and the exit is never held up long. */
#define EXIT_TEXTS_WAIT_NS 3000000000ull
#define EXIT_TEXTS_STALL_NS 300000000ull

/* Does a record of len bytes fit in t's ring now, without waiting
 * (sp_sql_flush_room)? */
int sp_ring_room(struct sp_thread *t, uint32_t len)
{
	struct sp_ring *r = t->ring;
	uint32_t hd, off, need, used;

	if (!r || r->orphan || len > RING_SIZE / 2)
		return 0;
	hd = r->head;
	off = hd & RING_MASK;
	need = RING_SIZE - off < len ? RING_SIZE - off + len : len;
	used = hd - __atomic_load_n(&r->sh->tail, __ATOMIC_ACQUIRE);
	return used <= RING_SIZE && RING_SIZE - used >= need;
}

/* A file of SQL messages being written (texts_file). */
struct texts_out {
	int fd, err;
	uint32_t len;
	uint8_t buf[64 * 1024]; /* records of one message */
};
static struct texts_out texts_out; /* touched at exit only */

static void texts_out_flush(struct texts_out *o)
{
	struct sp_msg_hdr mh;
	struct iovec iov[2];

	if (!o->len || o->err)
		return;
	/* seq 0: not a message of the connection (no gap in its numbers,
	 * whenever the file is read); only SQL records (sp_coll_texts) */
	memset(&mh, 0, sizeof(mh));
	mh.magic = SP_WIRE_MAGIC;
	mh.version = SP_WIRE_VERSION;
	mh.pid = (uint32_t)getpid();
	mh.len = (uint32_t)sizeof(mh) + o->len;
	mh.lost = atomic_load(&sp_lost);
	iov[0].iov_base = &mh;
	iov[0].iov_len = sizeof(mh);
	iov[1].iov_base = o->buf;
	iov[1].iov_len = o->len;
	if (writev(o->fd, iov, 2) != (ssize_t)mh.len)
		o->err = 1;
	o->len = 0;
}

static int texts_out_add(void *arg, const void *rec, uint32_t len)
{
	struct texts_out *o = arg;

	if (len > sizeof(o->buf))
		return -1;
	if (o->len + len > sizeof(o->buf))
		texts_out_flush(o);
	memcpy(o->buf + o->len, rec, len);
	o->len += len;
	return o->err ? -1 : 0;
}

/*
 * The SQL texts still pending into a file texts.PID.NS of the collector's
 * directory (written as tmp-t.PID.NS and renamed: the collector reads a
 * whole file or none), which the collector reads with the BYE files: at
 * the end of a recording, at each of the agent's intervals. Returns 0, or
 * -1 (no directory, no file, a failed write). No malloc. Keeps errno.
 */
static int texts_file(void)
{
	const char *slash = strrchr(sock_path, '/');
	char tmp[sizeof(sock_path) + 64], path[sizeof(sock_path) + 64];
	unsigned long long ns = (unsigned long long)sp_mono_ns();
	int saved = errno, rc = -1;
	struct texts_out *o = &texts_out;

	if (!slash || (size_t)(slash - sock_path) >= sizeof(sock_path))
		return -1;
	snprintf(tmp, sizeof(tmp), "%.*s/tmp-t.%u.%llu", (int)(slash - sock_path), sock_path,
		 (unsigned)getpid(), ns);
	snprintf(path, sizeof(path), "%.*s/texts.%u.%llu", (int)(slash - sock_path), sock_path,
		 (unsigned)getpid(), ns);
	o->fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (o->fd < 0)
		goto out;
	o->err = 0;
	o->len = 0;
	if (sp_sql_pending_each(texts_out_add, o) == 0) {
		texts_out_flush(o);
		if (!o->err)
			rc = 0;
	}
	close(o->fd);
	if (rc == 0 && rename(tmp, path) < 0)
		rc = -1;
	if (rc < 0)
		unlink(tmp);
out:
	errno = saved;
	return rc;
}

/*
 * The exiting thread hands the SQL texts still pending to the collector:
 * into its ring while the collector makes room (woken, and waited for
 * within the bounds above), the rest into a texts file. Called before BYE,
 * which has the collector read the rings. Not for an image that could not
 * connect (unrep_write writes its texts).
 */
static void exit_texts(void)
{
	struct sp_thread *t = &sp_tls;
	uint64_t start, last, now;
	uint32_t tl = 0;
	int left = 1;

	if (!atomic_load_explicit(&sp_sql_pending, memory_order_relaxed))
		return;
	if (sock_fd >= 0 && !stream_dead()) {
		if (!t->ring)
			ring_new(t); /* a thread that wrote nothing yet */
		start = last = sp_mono_ns();
		if (t->ring)
			tl = __atomic_load_n(&t->ring->sh->tail, __ATOMIC_ACQUIRE);
		while (t->ring && (left = sp_sql_flush_room(t, sp_ring_room)) != 0) {
			struct timespec ts = { 0, 1000000 };
			uint32_t now_tl;

			now = sp_mono_ns();
			if (now - start >= EXIT_TEXTS_WAIT_NS ||
			    now - last >= EXIT_TEXTS_STALL_NS || stream_dead())
				break;
			if (left > 0 && t->ring->poked != tl)
				ring_wake(t->ring, tl); /* once per tail it publishes */
			nanosleep(&ts, NULL);
			now_tl = __atomic_load_n(&t->ring->sh->tail, __ATOMIC_ACQUIRE);
			if (now_tl != tl) {
				tl = now_tl;
				last = sp_mono_ns();
			}
		}
	}
	if (left && atomic_load_explicit(&sp_sql_pending, memory_order_relaxed))
		(void)texts_file();
}

void sp_stream_exit(void)
{
	struct sp_rec_bye b;
	int sent = -1, cancel, locked, gone;

	memset(&b, 0, sizeof(b));
	if (!stream_dead() && sock_fd >= 0 && fd_is_ours()) {
		/* is the collector still there? (a peek: end of file when not) */
		char c1;
		ssize_t n = recv(sock_fd, &c1, 1, MSG_PEEK | MSG_DONTWAIT);

		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
			set_stream_dead(1);
	}
	if (stream_dead() && unreported == UNREP_NO && !hello_owed && sock_path[0] && sp_stats &&
	    reconnects <= 16 && !sp_guarded(&sp_tls)) {
		/* No collector since start-up, or it went away: one last look
		 * whether one listens now (an agent restarted), so that an
		 * image leaving before its next slow path still hands over its
		 * totals: HELLO with the statistics, the rings, then BYE. */
		pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
		pthread_mutex_lock(&conn_lock);
		sock_let_go();
		set_stream_dead(0);
		pthread_mutex_unlock(&conn_lock);
		stats_shared = 0;
		if (conn_get() >= 0)
			rings_announce_again();
		pthread_setcancelstate(cancel, NULL);
	}
	/* Still no collector, and none is there to take our totals (an agent
	 * restarting, or down): they go to a gone file, for the next one */
	gone = unreported == UNREP_NO && !hello_owed && stream_dead() && sock_path[0] && sp_stats &&
	       collector_gone(conn_errno) && !sp_guarded(&sp_tls) && sp_stats_executions() > 0;
	sp_guard_in(&sp_tls);
	if (hello_owed || unreported == UNREP_IDLE || unreported == UNREP_COUNTED ||
	    (unreported == UNREP_NO && !ever_connected && !gone) ||
	    (sock_fd < 0 && !stream_dead() && atomic_load(&sp_lost) == 0)) {
		/* Nothing was ever sent (a forked child that made no query,
		 * or one connected before a uid change that ran none), or
		 * the image was counted in an ancestor's statistics: there is
		 * no process to say goodbye for. */
		sp_guard_out(&sp_tls);
		return;
	}
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
	/* SQLite compiled into a module loaded since and never looked at:
	 * named in the map, for record's warning (embed.c) */
	if (sp_embed_exit_scan() && sock_fd >= 0 && !stream_dead()) {
		atomic_store(&modules_pending, 1);
		sp_guard_out(&sp_tls);
		sp_modules_maybe_send();
		sp_guard_in(&sp_tls);
	}
	note_sqlite_seen(sp_stats_executions()); /* before the copies, if any */
	if (!stats_shared && sp_stats && sock_fd >= 0 && !stream_dead())
		stats_copy();
	b.h.type = SP_REC_BYE;
	b.h.len = sizeof(b);
	b.pid = (uint32_t)getpid();
	b.tid = sp_tls.tid;
	/* _exit from a signal handler may interrupt a thread holding the
	 * lock: then count without it rather than hang */
	(void)locked;
	b.executions = sp_stats_executions();
	b.untracked = atomic_load(&sp_untracked);
	b.lost = atomic_load(&sp_lost);
	b.status = -1;
	b.stats_ino = sp_stats_ino_lo(); /* names us in a BYE file, across pid namespaces */
	if (unreported == UNREP_NO && !gone)
		exit_texts(); /* before BYE: the collector reads the rings then */
	if (unreported == UNREP_FILE) {
		/* no connection: everything goes to our file */
		unrep_write(&b);
		pthread_setcancelstate(cancel, NULL);
		sp_guard_out(&sp_tls);
		return;
	}
	if (sock_fd >= 0 && !stream_dead())
		sent = send_msg(&b, sizeof(b), NULL, 0, SP_MSG_FINAL);
	if (sent < 0) {
		b.lost = atomic_load(&sp_lost);
		if (!gone || gone_write(&b) < 0)
			bye_file(&b);
	}
	pthread_setcancelstate(cancel, NULL);
	sp_guard_out(&sp_tls);
}

void sp_stream_leaving(void)
{
	int saved = errno;

	if (sp_cfg.enabled && (uint32_t)getpid() == sp_proc_pid)
		sp_stream_exit();
	errno = saved;
}
