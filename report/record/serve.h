/* SPDX-License-Identifier: MIT */
/*
 * serve.h - the collector's side of the socket, shared by `sqlprof record`
 * (cmd-record.c) and `sqlprof agent` (cmd-agent.c): finding libsqlprof.so,
 * the TSC calibration, listening, accepting peers of our own uid, reading
 * their messages and the rings in one poll round, and the BYE files left
 * in a private directory.
 *
 * What it does not do: decide when to stop, run commands, or write
 * profiles (the commands do); decode messages (collect.c).
 */
#ifndef SP_SERVE_H
#define SP_SERVE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "collect.h"

/*
 * A rate limit on lines a peer can cause: the first SP_RATELOG_BURST of a
 * period of SP_RATELOG_PERIOD_S seconds are written, the others counted
 * and said in one line when the next period starts, or at sp_ratelog_flush.
 */
#define SP_RATELOG_BURST 10
#define SP_RATELOG_PERIOD_S 60
struct sp_ratelog {
	uint64_t start;      /* mono ns the period began */
	unsigned n;          /* lines written in it */
	uint64_t suppressed; /* lines not written, not said yet */
};
/* 1 when the line may be written (what: the lines' kind, for the count's
 * line, e.g. "bad messages dropped"). */
int sp_ratelog(struct sp_ratelog *r, FILE *f, const char *who, const char *what);
/* Say how many lines were not written, if any. */
void sp_ratelog_flush(struct sp_ratelog *r, FILE *f, const char *who, const char *what);

struct sp_client {
	int fd;
	uint32_t pid;
	uint64_t start; /* the peer's start time (/proc/PID/stat, clock ticks
			 * after boot): with pid, names its process */
	int greeted;    /* its first message was looked at (a viewer's?) */
};

struct sp_srv {
	struct sp_coll *c;
	int lfd;
	struct sp_client *cl;
	size_t ncl, capcl;
	uint8_t *buf;      /* one message, SP_MSG_MAX + 64 */
	const char *who;   /* "sqlprof record": prefix of messages */
	uint64_t accepted; /* connections taken so far */
	/* called when a connection ends (its process's rings were read);
	 * NULL: nothing */
	void (*on_close)(struct sp_srv *s, const struct sp_client *cl);
	/* called when a connection's first message is a viewer's request
	 * (live.h, SP_VIEW_MAGIC) instead of a process's stream: it answers
	 * on cl->fd, which is closed afterwards; NULL: such a connection is
	 * read as a process's (and its message refused) */
	void (*on_view)(struct sp_srv *s, const struct sp_client *cl);
	void *arg;
	/* held by the caller around sp_srv_round and let go of only while
	 * it waits in poll: another thread reads the model meanwhile (record's
	 * timeline writer); NULL: none */
	pthread_mutex_t *model_lock;
	unsigned idle_rounds;      /* rounds in a row that found nothing */
	uint64_t refused;          /* connections of another uid closed unread */
	uint64_t accept_after;     /* mono ns: connections wait for descriptors
				* until then (0: none wait) */
	struct sp_ratelog log_bad; /* "dropped a bad message" lines */
};

/* 1 when path cannot be an element of LD_PRELOAD (spaces, colons...). */
int sp_srv_preload_unsafe(const char *path);
/* Locate libsqlprof.so ($SQLPROF_LIB, else next to the binary, built or
 * installed) into out[len]. Returns 0, or -1 with a line on stderr. */
int sp_srv_find_lib(char *out, size_t len);
uint64_t sp_srv_mono_ns(void);
/* ns per TSC tick, measured over 2 ms against CLOCK_MONOTONIC. */
double sp_srv_calibrate_tsc(void);
/* The same measured across work the caller does meanwhile: begin, then
 * end sleeps only what is left of the 2 ms (record's start-up covers
 * them, and a one-query record waited 2 ms for nothing). */
struct sp_calib {
	uint64_t m0, c0;
};
void sp_srv_calib_begin(struct sp_calib *k);
double sp_srv_calib_end(const struct sp_calib *k);
/* The start time of process pid (field 22 of /proc/PID/stat), 0 when
 * it cannot be read. */
uint64_t sp_srv_proc_start(uint32_t pid);

/* The agent's socket when none is given: $XDG_RUNTIME_DIR/sqlprof/sock,
 * /run/sqlprof/sock for root, else /tmp/sqlprof-UID/sock. Returns 0, 1
 * for the last (in a directory anyone may create first: see
 * sp_srv_own_dir, strict), or -1 when it does not fit. */
int sp_srv_default_socket(char *out, size_t len);
/* The text that says what to do when the default socket's directory is
 * refused (the end of a sentence). */
#define SP_SRV_DIR_ADVICE                                                                         \
	"set XDG_RUNTIME_DIR to a directory of yours (mode 0700), or give --socket PATH in one; " \
	"remove the directory if you do not know who made it"
/*
 * The socket's directory dir: made 0700 when missing (its parent must
 * exist), then checked with lstat and, once opened, fstat: a directory,
 * not a symbolic link, of our uid, with mode exactly 0700 when strict
 * (the /tmp fallback, where another user may make it first), else one
 * others may not write in. Returns 0, or -1 with the path and why in err.
 */
int sp_srv_own_dir(const char *dir, int strict, char *err, size_t errlen);
/* Descriptors kept free for what connected processes send: a new
 * connection waits in the backlog when fewer would be left. */
#define SP_SRV_FD_HEADROOM 16
/* Raise the soft RLIMIT_NOFILE to the hard one (a collector holds a
 * descriptor per process); *old gets the limits before (so that a
 * command started afterwards gets them back). 0 or -1. */
struct rlimit;
int sp_srv_raise_nofile(struct rlimit *old);
/* Set s up for collector c (s->lfd -1, a message buffer). 0 or -1. */
int sp_srv_init(struct sp_srv *s, struct sp_coll *c, const char *who);
/* Listen on a SOCK_SEQPACKET socket at path (which must not exist).
 * Returns 0, or -1 with a reason in err: -ENAMETOOLONG when path does not
 * fit in a socket address (record suggests another TMPDIR then). */
int sp_srv_listen(struct sp_srv *s, const char *path, char *err, size_t errlen);
/*
 * One round: wait at most timeout_ms (negative: 10 ms while there are
 * rings, else 100 ms) for the listener, the clients and extra (a
 * descriptor of the caller's, -1: none); accept every pending peer of our
 * uid (also without a wakeup when accept_anyway); read the clients'
 * messages, then every ring; forget closed connections. Returns -1 when
 * out of memory, else SP_SRV_DATA when something arrived, | SP_SRV_EXTRA
 * when extra was readable.
 */
#define SP_SRV_DATA 1
#define SP_SRV_EXTRA 2
int sp_srv_round(struct sp_srv *s, int extra, int timeout_ms, int accept_anyway);
/* 1 when connections wait to be accepted (for descriptors, say). */
int sp_srv_pending(const struct sp_srv *s);
/*
 * Everything the socket holds now, before a last write: the connections
 * not accepted yet and every message not read yet - a process that ran
 * and exited while we were busy (stopped, starved) left its HELLO, its
 * statistics' memfd and its BYE there, and without them its executions
 * were missing from the profile, silently. Rounds without waiting until
 * one brings nothing, for at most budget_ns (a client that never stops
 * sending cannot hold us). Returns 0, or -1 when the budget ran out with
 * data still coming (or out of memory).
 */
int sp_srv_flush(struct sp_srv *s, uint64_t budget_ns);
/* Close every connection and the listener (its path is the caller's). */
void sp_srv_close(struct sp_srv *s);
/* Read the BYE files ("bye.*") the preload left in dir, then remove them. */
void sp_srv_read_bye_files(struct sp_coll *c, const char *dir, const char *who);

#endif
