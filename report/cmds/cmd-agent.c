/* SPDX-License-Identifier: MIT */
/*
 * cmd-agent.c - `sqlprof agent`: a standing collector in the foreground.
 * Any number of processes started with `sqlprof env`'s environment
 * connect over its life, come and go; each is a process row, and the
 * totals accumulate. The profile is brought up to date every --interval
 * and replaced atomically, so report, diff, check and export read it at
 * any moment; SIGTERM or SIGINT end the agent, writing it a last time.
 *
 * Snapshots. Every interval the agent fork()s: the child holds a
 * copy-on-write image of the collector, merges the live statistics of
 * every process still running into its copy (the same memfds, mapped
 * shared, so it reads their current totals), writes the profile to a
 * temporary and renames it over the output, and exits. The parent never
 * stops reading the rings and the sockets meanwhile, and its own state is
 * untouched (the child does not read the rings: their tails are shared).
 *
 * Restarts. Besides the profile's own tables, the agent writes its state
 * (profile-format.md, "The agent's state"): its exact totals per SQL text
 * (agent_queries) and, per process image still running, the part of them
 * that image's statistics held at that moment (agent_live, keyed by pid,
 * start time and the statistics memfd's inode). A new agent writing the
 * same profile starts from agent_queries; when an image of agent_live
 * reconnects, its statistics (cumulative, in its own memory) come again
 * in full, so its agent_live part is taken off first: nothing counted
 * twice, nothing lost that the images still hold.
 *
 * Time series. Every write adds an interval to the profile (series.c):
 * what the totals gained since the profile it replaces, so the intervals
 * sum to the totals across restarts too.
 *
 * Live views. The agent's exact totals now (agent_totals: its collector,
 * with the totals and histograms carried from an earlier agent, and what
 * every live image's statistics hold) are what --metrics serves
 * (metrics.c) and what a viewer (`sqlprof top`) is sent on the socket
 * (live.h).
 *
 * What it does not do: run commands (record does), or render metrics.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "agent-state.h"
#include "cmds.h"
#include "collect.h"
#include "kind.h"
#include "live.h"
#include "metrics.h"
#include "outfile.h"
#include "profile-write.h"
#include "serve.h"
#include "series.h"

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif

struct agent {
	struct sp_coll c;
	struct sp_srv srv;
	const char *output;
	struct sp_agent_rows carried; /* agent_live of the previous agent, not reconnected yet */
	long long started;            /* unix time the profile began (kept over restarts) */
	uint64_t t0;                  /* mono ns we started */
	long long restarts;           /* agents before us that wrote this profile */
	struct sp_agent_rows live;    /* filled just before a write */
	struct sp_agent_hrows carried_h, live_h; /* the same for the histograms */
	int64_t snap_ns;                 /* unix ns the statistics of this write were read */
	int64_t first_ns;                /* unix ns the profile's first interval starts */
	struct sp_live_state ls;         /* the live views' state (live.h) */
	struct sp_metrics *metrics;      /* --metrics, NULL: none */
	double carried_tick;             /* ns per TSC tick of the agent before us, 0: none */
	int lockfd;                      /* the profile's lock (profile_lock), -1: none */
	uint64_t missing, missing_procs; /* sp_coll_missing_bye at the last write */
	/* The live views' totals as the last snapshot child read them
	 * (sp_live_encode'd): answered instead of reading the services'
	 * statistics again when those are large (LIVE_DIRECT_MAX). */
	int answer_fd;       /* snapshots' answers (answer_write), -1: none */
	uint64_t snap_start; /* mono ns the running snapshot was forked */
	uint8_t *cached;     /* the last finished snapshot's totals, NULL: none */
	size_t cached_len;
	uint64_t cached_start; /* mono ns that snapshot was forked */
	uint64_t exact_last;   /* mono ns of the last answer read directly */
	uint8_t *direct;       /* that answer (sp_live_encode'd), NULL: none */
	size_t direct_len;
	uint64_t max_texts; /* --max-texts: SQL texts a profile keeps */
	/* Texts folded in the agent's own collector (agent_fold): sql_id ->
	 * struct fold_ent, while a process may still hold records of them
	 * (c.text_folds); a snapshot child says which ones it met,
	 * the others folded before that snapshot are let go. */
	struct hmap folds;
	uint64_t fold_epoch; /* agent_fold calls so far */
	uint64_t snap_epoch; /* fold_epoch when the running snapshot was forked */
	pid_t snap;          /* the running snapshot, 0: none */
	FILE *spill;         /* sampled executions (agent_spill), NULL: in memory */
	/* The processes budget (agent_fold_procs): --max-processes, the
	 * processes folded into the row of pid 0 so far (kept over restarts)
	 * and of them those that ran SQL; when each pid was last seen active
	 * (pid -> seen_clock then). */
	uint64_t max_procs, procs_folded, procs_folded_sqlite;
	struct hmap seen;
	uint64_t seen_clock;
	uint64_t procs_fold_ns; /* mono ns of the last agent_fold_procs */
	/* the socket, its directory and the locks (cmd_agent) */
	char sockpath[PATH_MAX], sockdir[PATH_MAX], lockpath[PATH_MAX + 16];
	int dirfd;     /* the socket directory's lock (dir_lock), -1: none */
	int listening; /* the socket is ours to remove */
};

struct fold_ent {
	uint64_t to;    /* the fold's sql_id (first: sp_coll_text_fold reads it) */
	uint64_t epoch; /* agent_fold's call that made it */
};

/*
 * Live statistics read directly at a scrape (or a viewer's request), at
 * most: above it, the totals of the last snapshot child (at most an
 * interval and a write old) are answered, so that a scrape's cost does not
 * grow with the SQL texts the services hold (a service with 120,000
 * texts: 138 MB of statistics, 2.9 s a scrape). 8 MiB is about 7,000
 * texts (1.15 KB each) read in some 0.1 s.
 */
#define LIVE_DIRECT_MAX (8u << 20)

/*
 * SQL texts a profile keeps (--max-texts), the most recently used (come,
 * or sampled, last); the others are folded per fingerprint
 * (sp_coll_fold_texts). A write costs about 60 us a text kept (three rows:
 * statements, agent_queries, callers) on this machine: 20,000 keep a
 * snapshot near a second.
 */
#define AGENT_MAX_TEXTS 20000

/*
 * Process rows the agent and its profile keep (--max-processes): beyond,
 * the least recently active of those that are over are folded into one
 * row (sp_agent_fold_procs), their stacks kept in its own map, so their
 * queries keep their callers. A process row costs about 5 KB of the
 * agent's memory (its module map, stacks, callers) and 9.5 KB of profile:
 * 100 are some 0.5 MB and 1 MB, and a service starting 3 processes a
 * second fills them in its first 35 s (1,000 took 6 minutes, the agent's
 * memory growing by 8 MB meanwhile).
 */
#define AGENT_MAX_PROCS 100

static int sig_pipe[2] = { -1, -1 };
static volatile sig_atomic_t stop_sig;

static void on_signal(int sig)
{
	int saved = errno;

	if (sig != SIGCHLD)
		stop_sig = sig;
	if (sig_pipe[1] >= 0)
		(void)!write(sig_pipe[1], "", 1);
	errno = saved;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: sqlprof agent [OPTIONS]\n"
		"\n"
		"Collect from every process started with `sqlprof env`'s environment, for as\n"
		"long as it runs, into one profile brought up to date every interval.\n"
		"\n"
		"  -o, --output FILE     profile to write (default " SP_PROFILE_DEFAULT
		"); a profile an\n"
		"                        earlier agent wrote there is continued; locked (FILE.lock)\n"
		"                        while the agent runs: a second agent on it exits 2\n"
		"      --socket PATH     socket to listen on (default $XDG_RUNTIME_DIR/sqlprof/sock,\n"
		"                        /run/sqlprof/sock for root); its directory is made 0700\n"
		"      --interval S      write the profile at least every S seconds (default 10);\n"
		"                        each write adds an interval to its time series (report\n"
		"                        --since/--until/--last, export -f csv --intervals)\n"
		"      --metrics HOST:PORT  serve GET /metrics (Prometheus text format) there,\n"
		"                        e.g. 127.0.0.1:9187 or [::1]:9187\n"
		"      --metrics-top N   queries with series of their own (default 200); the\n"
		"                        others are summed as query_id=\"other\"\n"
		"      --max-texts N     SQL texts the profile and the agent keep (default\n"
		"                        20000): the least recently used beyond are folded\n"
		"                        into one per fingerprint, its totals exact\n"
		"      --max-processes N process rows the profile and the agent keep (default\n"
		"                        100): the least recently active of those that ended\n"
		"                        are folded into one row, pid 0, its totals exact and\n"
		"                        its queries' callers kept\n"
		"  -q, --quiet           no messages but errors\n"
		"  -h, --help            this text\n"
		"\n"
		"SIGTERM or SIGINT end it, writing the profile. Only processes of the agent's\n"
		"own uid may connect.\n"
		"\n"
		"examples:\n"
		"  sqlprof agent -o /var/lib/sqlprof/app.db --interval 5 &\n"
		"  eval \"$(sqlprof env)\"; ./server\n"
		"  sqlprof report /var/lib/sqlprof/app.db\n"
		"  sqlprof report --last 5m /var/lib/sqlprof/app.db\n"
		"  sqlprof agent --metrics 127.0.0.1:9187 &   # then: curl 127.0.0.1:9187/metrics\n"
		"  sqlprof top\n");
}

/* The socket's directory (sp_srv_own_dir; strict for the /tmp
 * fallback). Returns 0, or -1 with a reason. */
static int socket_dir(const char *path, int shared, char *err, size_t errlen)
{
	char dir[PATH_MAX];
	const char *slash = strrchr(path, '/');
	size_t n;

	if (!slash || slash == path || (size_t)(slash - path) >= sizeof(dir)) {
		snprintf(err, errlen, "--socket wants an absolute path in a directory, not '%s'",
			 path);
		return -1;
	}
	memcpy(dir, path, (size_t)(slash - path));
	dir[slash - path] = 0;
	if (sp_srv_own_dir(dir, shared, err, errlen) < 0) {
		n = strlen(err);
		if (n < errlen)
			snprintf(err + n, errlen - n,
				 shared ? "; " SP_SRV_DIR_ADVICE
					: "; it holds the socket and the files processes leave for "
					  "the agent: use a directory of yours");
		return -1;
	}
	return 0;
}

/*
 * The profile's lock: "PROFILE.lock" in the profile's directory (by its
 * real path, so that every name of the profile finds the same lock),
 * flock'ed for the agent's life: a second agent writing the same profile
 * would replace the first one's totals with its own. The holder's pid is
 * written in it; flock goes with the process however it ends (the
 * snapshot children share it and go before their parent), and a clean
 * end removes the file while holding it (a taker checks that the file it
 * locked is still the one at that name). Returns the descriptor, or -1
 * with a reason; lockpath[len] gets the path.
 */
static int profile_lock(const char *output, char *lockpath, size_t len, char *err, size_t errlen)
{
	char dir[PATH_MAX], real[PATH_MAX];
	const char *slash = strrchr(output, '/'), *base = slash ? slash + 1 : output;

	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == output)
		snprintf(dir, sizeof(dir), "/");
	else
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - output), output);
	if (!realpath(dir, real)) {
		snprintf(err, errlen, "%s: %s", dir, strerror(errno));
		return -1;
	}
	if (snprintf(lockpath, len, "%s/%s.lock", strcmp(real, "/") ? real : "", base) >=
	    (int)len) {
		snprintf(err, errlen, "%s: path too long for its lock", output);
		return -1;
	}
	for (int tries = 0; tries < 100; tries++) {
		struct stat a, b;
		char pid[32];
		ssize_t n;
		int fd = open(lockpath, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);

		if (fd < 0) {
			snprintf(err, errlen, "cannot create the lock %s: %s", lockpath,
				 strerror(errno));
			return -1;
		}
		if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
			int e = errno;

			n = e == EWOULDBLOCK ? pread(fd, pid, sizeof(pid) - 1, 0) : -1;
			close(fd);
			if (e != EWOULDBLOCK) {
				snprintf(err, errlen, "cannot lock %s: %s", lockpath, strerror(e));
				return -1;
			}
			pid[n > 0 ? n : 0] = 0;
			pid[strcspn(pid, "\n")] = 0;
			snprintf(
				err, errlen,
				"%s is being written by another agent (pid %s; lock %s): give this one "
				"another -o, or stop that one first",
				output, pid[0] ? pid : "unknown", lockpath);
			return -1;
		}
		if (fstat(fd, &a) == 0 && stat(lockpath, &b) == 0 && a.st_dev == b.st_dev &&
		    a.st_ino == b.st_ino) {
			n = snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
			/* failing, the lock holds all the same; a second
			 * agent's message lacks the pid */
			if (ftruncate(fd, 0) == 0)
				(void)!pwrite(fd, pid, (size_t)n, 0);
			return fd;
		}
		close(fd); /* removed by the agent that held it: take the new one */
	}
	snprintf(err, errlen, "cannot lock %s: it keeps changing", lockpath);
	return -1;
}

/* A socket left at path by an agent that is gone is removed; one an agent
 * still listens on, or anything else, is refused. */
static int socket_claim(const char *path, char *err, size_t errlen)
{
	struct sockaddr_un sa;
	struct stat st;
	int fd, r;

	if (lstat(path, &st) < 0)
		return errno == ENOENT
			       ? 0
			       : (snprintf(err, errlen, "%s: %s", path, strerror(errno)), -1);
	if (!S_ISSOCK(st.st_mode)) {
		snprintf(err, errlen, "%s exists and is not a socket", path);
		return -1;
	}
	memset(&sa, 0, sizeof(sa));
	if (strlen(path) >= sizeof(sa.sun_path)) {
		snprintf(err, errlen, "socket path too long: %s", path);
		return -1;
	}
	sa.sun_family = AF_UNIX;
	memcpy(sa.sun_path, path, strlen(path));
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		return -1;
	}
	r = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
	close(fd);
	if (r == 0) {
		snprintf(err, errlen, "an agent is already listening on %s", path);
		return -1;
	}
	if (unlink(path) < 0 && errno != ENOENT) {
		snprintf(err, errlen, "cannot remove the stale socket %s: %s", path,
			 strerror(errno));
		return -1;
	}
	return 0;
}

/*
 * Take the lock of the socket's directory (flock, held by this agent and
 * its snapshot children until they end). An agent killed (SIGKILL) while
 * a child wrote its profile left that child writing on: the next agent
 * continued from the profile before, and the child's, older than the new
 * agent's, then replaced that one's (a restarted agent's final profile
 * found holding the killed one's totals). So a new agent waits for such a
 * child - at most 60 s, then goes on and says so - and continues from
 * what it wrote. Returns the descriptor (kept open), or -1.
 */
static int dir_lock(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	for (int i = 0; flock(fd, LOCK_EX | LOCK_NB) < 0; i++) {
		struct timespec ts = { 0, 20000000 };

		if (errno != EWOULDBLOCK && errno != EINTR) {
			close(fd);
			return -1;
		}
		if (i == 3000) {
			fprintf(stderr,
				"sqlprof agent: a snapshot of the agent before still runs after "
				"60 s: continuing without it\n");
			return fd;
		}
		nanosleep(&ts, NULL);
	}
	return fd;
}

struct hist_walk {
	struct sp_agent_hrows *out;
	struct sp_agent_hrow r;
	int rc;
};

static int hist_walk_row(uint64_t lo, uint64_t count, void *arg)
{
	struct hist_walk *w = arg;

	w->r.bucket_ns = lo;
	w->r.count = count;
	w->rc = sp_agent_hrows_add(w->out, &w->r);
	return w->rc;
}

static int sub_bucket(uint64_t lo, uint64_t count, void *arg)
{
	sp_hist_sub_bucket(arg, lo, count);
	return 0;
}

static uint64_t sub_sat(uint64_t a, uint64_t b)
{
	return a > b ? a - b : 0;
}

/* Take an image's part (r) off the totals: its statistics will come again. */
static void row_subtract(struct sp_coll *c, const struct sp_agent_row *r)
{
	uint64_t k[2] = { r->sql_id, r->kind };
	struct sp_qagg *q = hmap_get(&c->queries, k, 0, NULL);
	struct sp_proc *p = hmap_get(&c->procs, &r->pid, 0, NULL);
	size_t i = 0;

	if (q) {
#define QF_SUB(f) q->f = sub_sat(q->f, r->v[i]), i++;
		SP_AGENT_QF(QF_SUB)
#undef QF_SUB
	}
	if (p)
		p->execs = sub_sat(p->execs, r->v[0]);
}

/* Take an image's part of the histograms (its carried_h rows) off the
 * fingerprints' histograms, and drop those rows. */
static void hist_subtract(struct agent *a, uint32_t pid, uint64_t ino)
{
	for (size_t i = 0; i < a->carried_h.n;) {
		const struct sp_agent_hrow *r = &a->carried_h.r[i];

		if (r->pid != pid || r->ino != ino) {
			i++;
			continue;
		}
		{
			uint64_t fk[2] = { r->fp_id, r->kind };
			struct sp_fphist *fh = hmap_get(&a->c.fphists, fk, 0, NULL);

			if (fh && fh->hist) {
				sp_hist_sub_bucket(fh->hist, r->bucket_ns, r->count);
				fh->count = fh->count > r->count ? fh->count - r->count : 0;
			}
		}
		a->carried_h.r[i] = a->carried_h.r[--a->carried_h.n];
	}
}

/* Every image still mapped, its statistics read once into a collector of
 * its own (tmp, freed afterwards), handed to fn. Stops at fn's first
 * nonzero return, and returns it. */
static int each_image(struct agent *a,
		      int (*fn)(struct agent *a, const struct sp_statmap *m, struct sp_coll *tmp,
				void *arg),
		      void *arg)
{
	for (size_t i = 0; i < a->c.nstats; i++) {
		const struct sp_statmap *m = &a->c.stats[i];
		struct sp_coll tmp;
		struct hmap own;
		int rc;

		sp_coll_init(&tmp);
		tmp.ns_per_tick = a->c.ns_per_tick;
		tmp.text_folds = a->c.text_folds;
		tmp.text_folds_hit = a->c.text_folds_hit;
		/* merged with the agent's SQL texts, so that each text's
		 * histogram goes into its fingerprint's, as in the agent's own
		 * merge: a live service that ran 100,000 texts of one INSERT
		 * made 100,000 histograms at every scrape (0.5 s, 175 MB of
		 * RSS). The merge may add a text (the unattributed
		 * executions'): the map is handed back as it is after it. */
		own = tmp.sqls;
		tmp.sqls = a->c.sqls;
		sp_coll_stats_merge(&tmp, m->pid, m->map, m->size, m->clock);
		a->c.sqls = tmp.sqls;
		tmp.sqls = own;
		rc = fn(a, m, &tmp, arg);
		sp_coll_free(&tmp);
		if (rc)
			return rc;
	}
	return 0;
}

/*
 * What the totals were before one image's merge (image_merge): the
 * queries' table copied as it is (its slots: the values' sums are read,
 * their pointers never followed) and a copy of each histogram, keyed
 * {0, fp_id, kind} for a fingerprint's and {1, sql_id, kind} for a
 * text's own (a text not known when merged).
 */
struct before {
	struct hmap q;
	struct hmap h; /* -> struct sp_hist * */
};

static void before_free(struct before *b)
{
	size_t it = 0;
	struct sp_hist **h;

	free(b->q.slots);
	while ((h = hmap_next(&b->h, &it, NULL)))
		sp_hist_free(*h);
	hmap_free(&b->h);
}

/* A copy of h under key k in b->h. 0 or -1. */
static int before_hist(struct before *b, uint64_t src, uint64_t id, uint64_t kind,
		       const struct sp_hist *h)
{
	uint64_t k[3] = { src, id, kind };
	struct sp_hist **cp = hmap_get(&b->h, k, 1, NULL);

	if (!cp || !(*cp = sp_hist_new()))
		return -1;
	sp_hist_merge(*cp, h);
	return 0;
}

static int before_take(const struct sp_coll *c, struct before *b)
{
	size_t it = 0, len = c->queries.cap * c->queries.stride;
	const uint64_t *k;
	const struct sp_qagg *q;
	const struct sp_fphist *fh;

	b->q = c->queries;
	hmap_init(&b->h, 3 * sizeof(uint64_t), sizeof(struct sp_hist *));
	if (!(b->q.slots = malloc(len ? len : 1)))
		return -1;
	memcpy(b->q.slots, c->queries.slots, len);
	while ((q = hmap_next(&c->queries, &it, (const void **)&k)))
		if (q->hist && before_hist(b, 1, k[0], k[1], q->hist) < 0)
			return -1;
	for (it = 0; (fh = hmap_next(&c->fphists, &it, (const void **)&k));)
		if (fh->hist && before_hist(b, 0, k[0], k[1], fh->hist) < 0)
			return -1;
	return 0;
}

/* The buckets h gained since b's copy of it, as rows of w's image. */
static int hist_gain(struct before *b, uint64_t src, uint64_t id, struct hist_walk *w,
		     const struct sp_hist *h)
{
	uint64_t k[3] = { src, id, w->r.kind };
	struct sp_hist **old = hmap_get(&b->h, k, 0, NULL), *d;

	if (old && sp_hist_count(*old) == sp_hist_count(h))
		return 0;
	if (!(d = sp_hist_new()))
		return -1;
	sp_hist_merge(d, h);
	if (old)
		sp_hist_foreach(*old, sub_bucket, d);
	w->rc = 0;
	sp_hist_foreach(d, hist_walk_row, w);
	sp_hist_free(d);
	return w->rc;
}

/* The part of image m (what its merge added to the totals, against b)
 * into a->live and a->live_h. 0 or -1. */
static int image_gain(struct agent *a, uint32_t pid, uint64_t ino, struct before *b)
{
	size_t it = 0;
	const uint64_t *k;
	const struct sp_qagg *q;
	const struct sp_fphist *fh;
	struct sp_agent_row r, o;
	struct hist_walk w = { .out = &a->live_h };

	memset(&r, 0, sizeof(r));
	r.pid = w.r.pid = pid;
	r.ino = w.r.ino = ino;
	r.start = sp_srv_proc_start(pid);
	while ((q = hmap_next(&a->c.queries, &it, (const void **)&k))) {
		const struct sp_qagg *was = hmap_get(&b->q, k, 0, NULL);
		int moved = 0;

		r.sql_id = k[0];
		r.kind = w.r.kind = k[1];
		sp_agent_qagg_to_row(q, &r);
		if (was) {
			sp_agent_qagg_to_row(was, &o);
			for (int f = 0; f < SP_AGENT_NQF; f++)
				moved |= (r.v[f] -= o.v[f]) != 0;
		}
		if ((!was || moved) && sp_agent_rows_add(&a->live, &r) < 0)
			return -1;
		w.r.fp_id = 0;
		if (q->hist && hist_gain(b, 1, k[0], &w, q->hist) < 0)
			return -1;
	}
	for (it = 0; (fh = hmap_next(&a->c.fphists, &it, (const void **)&k));) {
		w.r.fp_id = k[0];
		w.r.kind = k[1];
		if (fh->hist && hist_gain(b, 0, k[0], &w, fh->hist) < 0)
			return -1;
	}
	return 0;
}

/* The parts of the carried images that have not come back, after the
 * live images' (image_merge) in a->live and a->live_h. */
static int carried_parts(struct agent *a)
{
	for (size_t i = 0; i < a->carried.n; i++)
		if (sp_agent_rows_add(&a->live, &a->carried.r[i]) < 0)
			return -1;
	/* the histogram parts of the carried images that may still come back
	 * (their distinct images first: a row per image and query each) */
	if (a->carried_h.n) {
		struct sp_agent_hrow *img = malloc((a->carried.n + 1) * sizeof(*img));
		size_t nimg = 0;

		if (!img)
			return -1;
		for (size_t j = 0; j < a->carried.n; j++) {
			size_t k;

			for (k = nimg; k > 0; k--)
				if (img[k - 1].pid == a->carried.r[j].pid &&
				    img[k - 1].ino == a->carried.r[j].ino)
					break;
			if (!k) {
				img[nimg].pid = a->carried.r[j].pid;
				img[nimg++].ino = a->carried.r[j].ino;
			}
		}
		for (size_t i = 0; i < a->carried_h.n; i++) {
			const struct sp_agent_hrow *h = &a->carried_h.r[i];
			size_t k;

			for (k = 0; k < nimg && (img[k].pid != h->pid || img[k].ino != h->ino); k++)
				;
			if (k < nimg && sp_agent_hrows_add(&a->live_h, h) < 0) {
				free(img);
				return -1;
			}
		}
		free(img);
	}
	return 0;
}

/*
 * Every image still mapped merged into the totals once, read where it is
 * (the services' memory): each image's part (what it added) into
 * a->live and a->live_h, taken as the difference its merge made. Before,
 * each image's statistics were copied whole (up to SQLPROF_STATS_MB
 * each), merged once for the part and once more for the totals: at
 * 2,000 new texts a second a snapshot was 0.8-1.1 s of CPU at 1.5
 * minutes, and 10-25 s on this loaded machine. 0 or -1.
 */
static int image_merge(struct agent *a)
{
	a->live.n = 0;
	a->live_h.n = 0;
	while (a->c.nstats) {
		struct sp_statmap *m = &a->c.stats[0];
		struct before b;
		uint32_t pid, image;
		uint64_t ino;
		int part, rc = 0;

		/* the oldest image of its process: retired alone */
		for (size_t i = 1; i < a->c.nstats; i++)
			if (a->c.stats[i].pid == m->pid && a->c.stats[i].image < m->image)
				m = &a->c.stats[i];
		pid = m->pid;
		image = m->image;
		ino = m->ino;
		part = ino != 0; /* no memfd: it cannot come back with it */
		/* its pages faulted in at once, not one by one as the merge
		 * reads them (it lets them go again as it goes: c.stats_drop) */
		if (!m->copy && m->size >= SP_STATS_CHUNK) {
			uint32_t nch = __atomic_load_n(
				&((const struct sp_stats_hdr *)m->map)->nchunks, __ATOMIC_ACQUIRE);

			if (nch && (size_t)nch * SP_STATS_CHUNK <= m->size)
				(void)madvise(m->map, (size_t)nch * SP_STATS_CHUNK,
					      MADV_POPULATE_READ);
		}
		memset(&b, 0, sizeof(b));
		if (part && before_take(&a->c, &b) < 0)
			rc = -1;
		sp_coll_stats_retire(&a->c, pid, image);
		if (part && rc == 0)
			rc = image_gain(a, pid, ino, &b);
		if (part)
			before_free(&b);
		if (rc < 0)
			return -1;
	}
	return carried_parts(a);
}

/* How long the live views wait for the previous agent's images. */
#define RECONNECT_GRACE_NS (10ull * 1000000000ull)

static int image_totals(struct agent *a, const struct sp_statmap *m, struct sp_coll *tmp, void *arg)
{
	sp_live_add(arg, &a->ls, tmp, &a->c);
	return 0;
}

/*
 * The agent's exact totals now, per fingerprint, into out: its collector
 * (what it merged, and a previous agent's totals and histograms less the
 * parts of the images that came back) and what every image still mapped
 * holds (read once, as a profile's write does). The one source of
 * --metrics and of a viewer's answer. 0 or -1.
 */
static int totals_exact(struct agent *a, struct sp_live *out)
{
	struct sp_live_acc acc;
	struct timespec ts;
	int rc;

	memset(out, 0, sizeof(*out));
	sp_live_acc_init(&acc);
	sp_live_add(&acc, &a->ls, &a->c, &a->c);
	each_image(a, image_totals, &acc);
	rc = sp_live_take(&acc, &a->ls, out);
	sp_live_acc_free(&acc);
	clock_gettime(CLOCK_REALTIME, &ts);
	out->time_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
	out->lost = sp_coll_lost(&a->c);
	out->executions = sp_coll_executions(&a->c);
	out->restarts = (uint64_t)a->restarts;
	/* processes connected now (a viewer has no process row) */
	for (size_t i = 0; i < a->srv.ncl; i++)
		if (hmap_get(&a->c.procs, &a->srv.cl[i].pid, 0, NULL))
			out->processes++;
	/* the previous agent's images that still run and have not come back:
	 * their executions since its last write are missing from the totals
	 * (a counter would go down). Waited for at most RECONNECT_GRACE_NS
	 * after the start (an image at SQLPROF_RATE=0 may come much later). */
	if (a->carried.n && sp_srv_mono_ns() - a->t0 < RECONNECT_GRACE_NS) {
		struct hmap seen; /* {pid, start} looked at */

		hmap_init(&seen, 2 * sizeof(uint64_t), sizeof(int));
		for (size_t i = 0; i < a->carried.n; i++) {
			uint64_t k[2] = { a->carried.r[i].pid, a->carried.r[i].start };
			int created;

			if (hmap_get(&seen, k, 1, &created) && created &&
			    sp_srv_proc_start(a->carried.r[i].pid) == a->carried.r[i].start)
				out->pending++;
		}
		hmap_free(&seen);
	}
	if (a->ls.profile && !(out->profile = strdup(a->ls.profile)))
		rc = -1;
	return rc;
}

/* Bytes of live statistics a direct reading would go through. */
static size_t live_bytes(const struct agent *a)
{
	size_t n = 0;

	for (size_t i = 0; i < a->c.nstats; i++) {
		const struct sp_statmap *m = &a->c.stats[i];
		size_t used = m->size;

		if (!m->copy && m->size >= SP_STATS_CHUNK) {
			uint32_t nch = __atomic_load_n(
				&((const struct sp_stats_hdr *)m->map)->nchunks, __ATOMIC_ACQUIRE);

			if (nch && (size_t)nch * SP_STATS_CHUNK < m->size)
				used = (size_t)nch * SP_STATS_CHUNK;
		}
		n += used;
	}
	return n;
}

/*
 * The agent's exact totals, per fingerprint, into out: read now
 * (totals_exact) while the services' statistics are small, else those the
 * last snapshot child read, provided it was forked after the last direct
 * reading (so that no counter goes down from one answer to the next:
 * every snapshot reads later statistics than the one before). The one
 * source of --metrics and of a viewer's answer. 0 or -1.
 */
static int agent_totals(void *arg, struct sp_live *out)
{
	struct agent *a = arg;
	char err[128];

	int big = live_bytes(a) > LIVE_DIRECT_MAX;
	const uint8_t *ans = NULL;
	size_t len = 0;
	uint8_t *enc = NULL;
	int rc;

	/* the newest of the last snapshot's totals and the last direct
	 * answer: a snapshot forked before that answer is older. Before,
	 * such a scrape read directly again (and moved exact_last on): once
	 * a snapshot took longer than the scrapes' period, every scrape read
	 * the services' whole statistics (2,000 new texts a second: 13 to 54
	 * s a scrape, and their pages in the agent's RSS) */
	if (big && a->cached && a->cached_start >= a->exact_last) {
		ans = a->cached;
		len = a->cached_len;
	} else if (big && a->direct) {
		ans = a->direct;
		len = a->direct_len;
	}
	if (ans) {
		memset(out, 0, sizeof(*out));
		if (sp_live_decode(ans, len, out, err, sizeof(err)) == 0) {
			/* processes connected now, as totals_exact counts them */
			out->processes = 0;
			for (size_t i = 0; i < a->srv.ncl; i++)
				if (hmap_get(&a->c.procs, &a->srv.cl[i].pid, 0, NULL))
					out->processes++;
			return 0;
		}
		sp_live_free(out);
	}
	a->exact_last = sp_srv_mono_ns();
	rc = totals_exact(a, out);
	/* kept, to answer again while a newer snapshot is not there */
	if (rc == 0 && sp_live_encode(out, &enc, &len) == 0) {
		free(a->direct);
		a->direct = enc;
		a->direct_len = len;
	}
	return rc;
}

/* A viewer's request (serve.c's on_view): the totals, sp_live_encode'd
 * into a memfd sent back with one message. Never waits: the socket is
 * non-blocking and the answer one message with a descriptor. */
static void view_answer(struct sp_srv *s, const struct sp_client *cl)
{
	struct agent *a = s->arg;
	struct sp_live l;
	uint32_t hdr[2] = { SP_VIEW_MAGIC, SP_VIEW_VERSION };
	uint8_t *buf = NULL;
	size_t len = 0;
	int fd = -1;

	(void)!recv(cl->fd, hdr, sizeof(hdr), MSG_DONTWAIT); /* the request: taken */
	hdr[0] = SP_VIEW_MAGIC;
	hdr[1] = SP_VIEW_VERSION;
	if (agent_totals(a, &l) == 0 && sp_live_encode(&l, &buf, &len) == 0)
		fd = memfd_create("sqlprof-view", MFD_CLOEXEC);
	if (fd >= 0 && write(fd, buf, len) == (ssize_t)len) {
		struct msghdr mh;
		struct iovec iov = { hdr, sizeof(hdr) };
		union {
			char b[CMSG_SPACE(sizeof(int))];
			struct cmsghdr align;
		} u;
		struct cmsghdr *cm;

		memset(&mh, 0, sizeof(mh));
		memset(&u, 0, sizeof(u));
		mh.msg_iov = &iov;
		mh.msg_iovlen = 1;
		mh.msg_control = u.b;
		mh.msg_controllen = sizeof(u.b);
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &fd, sizeof(int));
		(void)!sendmsg(cl->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
	}
	if (fd >= 0)
		close(fd);
	free(buf);
	sp_live_free(&l);
}

/* The agent's tables and meta rows (profile-write.h's extra callback):
 * its state (agent-state.c), the live views' state and this write's
 * interval. */
static int write_state(sqlite3 *db, void *arg)
{
	struct agent *a = arg;
	struct sp_agent_saved s = {
		.c = &a->c,
		.live = &a->live,
		.live_h = &a->live_h,
		.restarts = a->restarts,
		.max_texts = a->max_texts,
		.max_procs = a->max_procs,
		.procs_folded = a->procs_folded,
		.procs_folded_sqlite = a->procs_folded_sqlite,
	};
	char err[512];

	/* executions processes said they ran (BYE) that their statistics,
	 * as merged, do not hold: never a silent loss */
	a->missing = sp_coll_missing_bye(&a->c, &a->missing_procs);
	s.missing = a->missing;
	if (sp_agent_state_write(db, &s) < 0 || sp_live_state_write(db, &a->ls) < 0)
		return -1;
	/* this write's interval: what the totals gained since the profile
	 * it replaces (series.c) */
	if (sp_series_add(db, a->output, a->first_ns, a->snap_ns, err, sizeof(err)) < 0) {
		fprintf(stderr, "sqlprof agent: %s\n", err);
		return -1;
	}
	return 0;
}

/* Rows of images' parts (a->live, a->carried) of texts folded (map:
 * sql_id -> fold id) renamed to their fold's and merged per image and
 * fold. */
static int fold_rows(struct sp_agent_rows *rs, const struct hmap *map)
{
	struct hmap at; /* {pid, start, ino, sql_id, kind} -> index + 1 in a->live */
	size_t n = 0;
	int rc = 0;

	hmap_init(&at, 5 * sizeof(uint64_t), sizeof(size_t));
	for (size_t i = 0; i < rs->n; i++) {
		struct sp_agent_row r = rs->r[i];
		const uint64_t *to = hmap_get((struct hmap *)map, &r.sql_id, 0, NULL);
		uint64_t k[5];
		size_t *j;
		int created;

		if (to)
			r.sql_id = *to;
		k[0] = r.pid;
		k[1] = r.start;
		k[2] = r.ino;
		k[3] = r.sql_id;
		k[4] = r.kind;
		if (!to) { /* a text kept: its row stays as it is */
			rs->r[n++] = r;
			continue;
		}
		j = hmap_get(&at, k, 1, &created);
		if (!j) {
			rc = -1;
			rs->r[n++] = r;
			continue;
		}
		if (created) {
			*j = n;
			rs->r[n++] = r;
		} else {
			for (int f = 0; f < SP_AGENT_NQF; f++)
				rs->r[*j].v[f] += r.v[f];
		}
	}
	rs->n = n;
	hmap_free(&at);
	return rc;
}

/* Merge what is still mapped into our collector (the caller's copy: a
 * snapshot child, or the agent at its end) and write the profile. */
static int write_profile(struct agent *a, char *err, size_t errlen)
{
	struct sp_meta meta;

	if (image_merge(a) < 0) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	/* the interval ends here: every execution in the statistics just
	 * merged (and in those merged before) ended before this */
	a->snap_ns = sp_series_now_ns();
	sp_coll_finish(&a->c);
	/* the texts budget: the least recently used beyond it folded per
	 * fingerprint, in the profile and in the agent's state alike */
	if (a->max_texts && a->c.sqls.count > a->max_texts) {
		struct hmap map;
		size_t nf;

		hmap_init(&map, sizeof(uint64_t), sizeof(uint64_t));
		nf = sp_coll_fold_texts(&a->c, (size_t)a->max_texts, &map);
		if (nf == (size_t)-1 || (nf && fold_rows(&a->live, &map) < 0)) {
			hmap_free(&map);
			snprintf(err, errlen, "out of memory folding texts");
			return -1;
		}
		hmap_free(&map);
	}
	memset(&meta, 0, sizeof(meta));
	meta.command = "sqlprof agent";
	meta.started = a->started;
	meta.duration_ns = (long long)time(NULL) - a->started > 0
				   ? ((long long)time(NULL) - a->started) * 1000000000LL
				   : 0;
	meta.exit_status = 0;
	meta.rate = 0.01;
	meta.repeat = 1;
	meta.live = 1;
	meta.extra = write_state;
	meta.extra_arg = a;
	return sp_profile_write(a->output, &a->c, &meta, err, errlen);
}

/*
 * The texts budget in the agent's own collector, before a snapshot: the
 * least recently used texts beyond --max-texts folded per fingerprint
 * (sp_coll_fold_texts), as a write folds them, and remembered (a->folds,
 * 16 bytes a text and the map's slack) while a running process may hold
 * records of them: those records, read later, go to the fold too
 * (sp_coll_text_fold). Without it the agent kept every text it was ever
 * sent (about 180 bytes each: 2,000 new texts a second, 1.2 M texts and
 * 222 MB in 10 minutes) and each write sorted and folded them all again.
 */
static void agent_fold(struct agent *a)
{
	struct hmap map;
	size_t it = 0, nf;
	const uint64_t *k;
	uint64_t *to;

	if (!a->max_texts || a->c.sqls.count <= a->max_texts)
		return;
	hmap_init(&map, sizeof(uint64_t), sizeof(uint64_t));
	nf = sp_coll_fold_texts(&a->c, (size_t)a->max_texts, &map);
	if (nf && nf != (size_t)-1) {
		a->fold_epoch++;
		while ((to = hmap_next(&map, &it, (const void **)&k))) {
			struct fold_ent *e = hmap_get(&a->folds, k, 1, NULL);

			if (e) {
				e->to = *to;
				e->epoch = a->fold_epoch;
			}
		}
		/* a previous agent's parts of those texts: under their fold */
		if (a->carried.n)
			fold_rows(&a->carried, &map);
	}
	hmap_free(&map);
}

/* A process still active: connected, its statistics or rings mapped, an
 * earlier agent's part of it waiting for it, or its end not known. */
static int proc_active(const struct agent *a, const struct hmap *busy, const struct sp_proc *p)
{
	return hmap_get((struct hmap *)busy, &p->pid, 0, NULL) || p->pidfd || p->died ||
	       p->unreported || p->pid == SP_AGENT_PID_OTHER;
}

struct proc_cand {
	uint64_t seen;
	uint32_t pid;
};

static int proc_cand_cmp(const void *x, const void *y)
{
	const struct proc_cand *p = x, *q = y;

	return p->seen < q->seen ? -1 : p->seen > q->seen;
}

/*
 * The processes budget: beyond --max-processes rows, the least recently
 * active processes that are over (not proc_active; a death stays named)
 * folded into the row of pid 0 (sp_agent_fold_procs), in the agent's own
 * collector, so in every later profile too. Before, a service starting 3
 * processes a second added a row, its module map and stacks, about 5 KB
 * of the agent's memory and 9.5 KB of profile each, for the agent's
 * life: 1.8 million rows a week.
 */
static void agent_fold_procs(struct agent *a)
{
	struct hmap busy; /* pid -> nothing: active now */
	struct proc_cand *cand = NULL;
	uint32_t *pids = NULL;
	const struct sp_proc *p;
	size_t it = 0, n = 0, nf, over, nsql = 0;
	const uint32_t other = SP_AGENT_PID_OTHER;
	uint64_t *t;

	a->procs_fold_ns = sp_srv_mono_ns();
	hmap_init(&busy, sizeof(uint32_t), 0);
	for (size_t i = 0; i < a->srv.ncl; i++)
		hmap_get(&busy, &a->srv.cl[i].pid, 1, NULL);
	for (size_t i = 0; i < a->c.nstats; i++)
		hmap_get(&busy, &a->c.stats[i].pid, 1, NULL);
	for (size_t i = 0; i < a->c.nrings; i++)
		hmap_get(&busy, &a->c.rings[i]->pid, 1, NULL);
	for (size_t i = 0; i < a->carried.n; i++)
		hmap_get(&busy, &a->carried.r[i].pid, 1, NULL);
	/* recency: the last call that saw each process active */
	a->seen_clock++;
	while ((p = hmap_next(&a->c.procs, &it, NULL)))
		if (proc_active(a, &busy, p) && (t = hmap_get(&a->seen, &p->pid, 1, NULL)))
			*t = a->seen_clock;
	if (a->c.procs.count <= a->max_procs ||
	    !(cand = malloc(a->c.procs.count * sizeof(*cand))) ||
	    !(pids = malloc(a->c.procs.count * sizeof(*pids))))
		goto out;
	for (it = 0; (p = hmap_next(&a->c.procs, &it, NULL));)
		if (!proc_active(a, &busy, p)) {
			t = hmap_get(&a->seen, &p->pid, 0, NULL);
			cand[n].seen = t ? *t : 0;
			cand[n++].pid = p->pid;
		}
	/* the oldest first, as many as the rows beyond the budget (and the
	 * row of pid 0 when it is still to be made) */
	qsort(cand, n, sizeof(*cand), proc_cand_cmp);
	over = a->c.procs.count - a->max_procs;
	if (!hmap_get(&a->c.procs, &other, 0, NULL))
		over++;
	if (n > over)
		n = over;
	for (size_t i = 0; i < n; i++) {
		p = hmap_get(&a->c.procs, &cand[i].pid, 0, NULL);
		pids[i] = cand[i].pid;
		nsql += p && p->execs;
	}
	nf = sp_agent_fold_procs(&a->c, pids, n);
	if (!nf)
		goto out;
	a->procs_folded += nf;
	a->procs_folded_sqlite += nsql;
	for (size_t i = 0; i < n; i++)
		hmap_del(&a->seen, &pids[i], NULL);
out:
	free(cand);
	free(pids);
	hmap_free(&busy);
}

/* In a snapshot child, after its write: the folds made before it was
 * forked (epoch <= snap_epoch) that it did not meet in the statistics it
 * read (hit) are held by no process any more; their ids into *ids (malloc'd,
 * *n of them). The agent lets them go (folds_prune): the child does the
 * walk over every fold, not the agent's loop (which built a set of the
 * 340,000 folds met and walked them all at every snapshot: 0.33 s of CPU
 * at 3 minutes of the soak, more as they grew). 0 or -1. */
static int folds_gone(const struct agent *a, const struct hmap *hit, uint64_t **ids, size_t *n)
{
	size_t it = 0;
	const uint64_t *k;
	const struct fold_ent *e;

	*n = 0;
	if (!(*ids = malloc((a->folds.count + 1) * sizeof(**ids))))
		return -1;
	while ((e = hmap_next(&a->folds, &it, (const void **)&k)))
		if (e->epoch <= a->snap_epoch && !hmap_get((struct hmap *)hit, k, 0, NULL))
			(*ids)[(*n)++] = *k;
	return 0;
}

/* The folds a snapshot child found held by no process (ids[n], folds_gone)
 * let go, unless folded again since it was forked. */
static void folds_prune(struct agent *a, const uint64_t *ids, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const struct fold_ent *e = hmap_get(&a->folds, &ids[i], 0, NULL);

		if (e && e->epoch <= a->snap_epoch)
			hmap_del(&a->folds, &ids[i], NULL);
	}
}

/*
 * A snapshot child's answer, in the agent's one answer memfd (answer_fd,
 * made at the start and kept: a memfd per snapshot was a descriptor more
 * for as long as each snapshot ran - back to back on a loaded machine, so
 * t_agent_metrics and t_agent_churn counted one descriptor more after
 * their connections than before, now and then): a header, the totals it
 * wrote (sp_live_encode'd, O(fingerprints) bytes, for the live views) and
 * the folds no process holds any more (sql_ids, folds_gone, for
 * folds_prune). Written by the child once
 * its profile is in place, read by the agent after it exited 0; one
 * snapshot runs at a time.
 */
struct answer_hdr {
	uint64_t magic;
	uint64_t totals_len; /* 0: none */
	uint64_t nhit;       /* sql_ids after the totals (at an 8-byte offset) */
	uint64_t hits;       /* 1: the folds met were tracked (the ids are the
			      * folds to let go) */
};
#define ANSWER_MAGIC 0x73716c70616e7331ull
#define ANSWER_PAD(n) (((n) + 7) & ~(uint64_t)7)

static void answer_write(struct agent *a, const struct hmap *hit, int tracked)
{
	struct answer_hdr h = { ANSWER_MAGIC, 0, 0, (uint64_t)tracked };
	struct sp_live l;
	uint8_t *buf = NULL;
	size_t len = 0, n = 0;
	uint64_t *ids = NULL;

	if (tracked && folds_gone(a, hit, &ids, &n) < 0)
		h.hits = 0; /* nothing let go */
	h.nhit = n;
	memset(&l, 0, sizeof(l));
	if (totals_exact(a, &l) == 0 && sp_live_encode(&l, &buf, &len) == 0)
		h.totals_len = len;
	else
		len = 0;
	if (ftruncate(a->answer_fd, 0) < 0 ||
	    pwrite(a->answer_fd, buf, len, sizeof(h)) != (ssize_t)len ||
	    pwrite(a->answer_fd, ids, n * 8, (off_t)(sizeof(h) + ANSWER_PAD(len))) !=
		    (ssize_t)(n * 8) ||
	    pwrite(a->answer_fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h))
		(void)!ftruncate(a->answer_fd, 0); /* no answer: nothing taken */
	free(buf);
	free(ids);
	sp_live_free(&l);
}

/* A snapshot: a forked child writes the profile from its copy. Returns
 * the child's pid, or -1 (then nothing was written). */
static pid_t snapshot(struct agent *a)
{
	pid_t pid;

	if (a->answer_fd >= 0)
		(void)!ftruncate(a->answer_fd, 0); /* no answer until it gives one */
	pid = fork();
	if (pid == 0) {
		char err[PATH_MAX + 256];
		struct hmap hit;

		/* keeps the agent's lock on the socket's directory (see
		 * dir_lock) until it has written: a next agent waits for it */

		/* the agent's signals are the agent's: a group-wide SIGTERM
		 * lets this write finish (the agent waits for it) */
		signal(SIGTERM, SIG_IGN);
		signal(SIGINT, SIG_IGN);
		signal(SIGCHLD, SIG_DFL);
		hmap_init(&hit, sizeof(uint64_t), 0);
		/* not ours to hold: the services must see the agent's end */
		for (size_t i = 0; i < a->srv.ncl; i++)
			close(a->srv.cl[i].fd);
		if (a->srv.lfd >= 0)
			close(a->srv.lfd);
		sp_metrics_forget(a->metrics);
		/* nor the profile's lock: an agent started after ours was
		 * killed takes it at once (this write only renames a
		 * complete profile over the output) */
		if (a->lockfd >= 0)
			close(a->lockfd);
		/* the folds it meets, for the agent to let go of the others */
		if (a->folds.count)
			a->c.text_folds_hit = &hit;
		/* the services' statistics read where they are, faulted in at
		 * once (image_merge) and kept mapped: this child ends after its
		 * write. Let go of 4 MB at a time, as the agent does, each chunk
		 * was faulted in twice (its header, then its records) and each
		 * release a TLB flush */
		a->c.stats_keep = 1;
		if (write_profile(a, err, sizeof(err)) < 0) {
			fprintf(stderr, "sqlprof agent: %s\n", err);
			_exit(1);
		}
		/* the totals just written (every image merged) and the folds
		 * met, for the agent */
		if (a->answer_fd >= 0)
			answer_write(a, &hit, a->c.text_folds_hit != NULL);
		_exit(0);
	}
	return pid;
}

/* A snapshot child ended (status): its totals become the live views'
 * when it wrote them whole, and the folds it did not meet are let go. */
static void snapshot_done(struct agent *a, int status)
{
	struct answer_hdr h;
	struct stat st;
	uint8_t *buf;

	/* the spill file is ours again: the folds made meanwhile go in */
	a->c.spill_shared = 0;
	if (sp_coll_events_settle(&a->c) < 0)
		fprintf(stderr, "sqlprof agent: folding sampled executions in their file: %s\n",
			strerror(errno));
	if (a->answer_fd < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0 ||
	    fstat(a->answer_fd, &st) < 0 || (size_t)st.st_size < sizeof(h) ||
	    pread(a->answer_fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h) ||
	    h.magic != ANSWER_MAGIC || h.totals_len > (uint64_t)st.st_size ||
	    h.nhit > (uint64_t)st.st_size / 8 ||
	    sizeof(h) + (h.nhit ? ANSWER_PAD(h.totals_len) : h.totals_len) + h.nhit * 8 !=
		    (uint64_t)st.st_size ||
	    !(buf = malloc((size_t)st.st_size - sizeof(h) + 1)))
		return;
	if (pread(a->answer_fd, buf, (size_t)st.st_size - sizeof(h), sizeof(h)) !=
	    (ssize_t)((size_t)st.st_size - sizeof(h))) {
		free(buf);
		return;
	}
	if (h.hits)
		folds_prune(a, (const uint64_t *)(buf + ANSWER_PAD(h.totals_len)), (size_t)h.nhit);
	if (h.totals_len) {
		uint8_t *t = malloc(h.totals_len);

		if (t) {
			memcpy(t, buf, h.totals_len);
			free(a->cached);
			a->cached = t;
			a->cached_len = h.totals_len;
			a->cached_start = a->snap_start;
		}
	}
	free(buf);
}

/* Processes whose connection ended without BYE and that are gone: their
 * statistics are final, merge and let them go (and their rings). */
static void reap_gone(struct agent *a)
{
	for (size_t i = 0; i < a->c.nstats;) {
		uint32_t pid = a->c.stats[i].pid;
		struct sp_proc *p = hmap_get(&a->c.procs, &pid, 0, NULL);
		size_t j;

		for (j = 0; j < a->srv.ncl && a->srv.cl[j].pid != pid; j++)
			;
		/* no BYE: died, or exited without one (sp_coll_settle) */
		if (j == a->srv.ncl && p && (p->died || !p->bye) && kill((pid_t)pid, 0) < 0 &&
		    errno == ESRCH) {
			sp_coll_proc_gone(&a->c, pid);
			i = 0; /* the list changed */
			continue;
		}
		i++;
	}
	/* carried images that will not come back: their part is final. Gone
	 * at two looks in a row: one that exited while no agent listened
	 * left its totals in a gone file, renamed before it exited, so read
	 * (before this, sp_srv_read_bye_files) by the second look at the
	 * latest, and its part must still be here to be taken off then */
	for (size_t i = 0; i < a->carried.n;) {
		struct sp_agent_row *r = &a->carried.r[i];

		if (sp_srv_proc_start(r->pid) != r->start && r->gone_seen++) {
			a->carried.r[i] = a->carried.r[--a->carried.n];
			continue;
		}
		i++;
	}
}

/* An image's statistics are mapped (collect.c's stats_added): when it is
 * an image of the previous agent that reconnected (same pid and memfd
 * inode), its earlier part is taken off the totals, since its statistics
 * come again in full. The same process with another memfd is a new image
 * (exec): the old one's part is final. */
static void carried_match(struct sp_coll *c, uint32_t pid, uint64_t ino)
{
	struct agent *a = c->stats_added_arg;
	uint64_t start = 0;
	int have_start = 0;

	for (size_t i = 0; i < a->carried.n;) {
		const struct sp_agent_row *r = &a->carried.r[i];

		if (r->pid != pid) {
			i++;
			continue;
		}
		if (r->ino == ino) {
			row_subtract(c, r);
			a->carried.r[i] = a->carried.r[--a->carried.n];
			hist_subtract(a, pid, ino);
			continue;
		}
		if (!have_start) {
			start = sp_srv_proc_start(pid);
			have_start = 1;
		}
		if (start == r->start)
			a->carried.r[i] = a->carried.r[--a->carried.n];
		else
			i++;
	}
}

/* Continue the profile an earlier agent wrote at path: its totals per SQL
 * text, texts, processes, and the parts of the images that were running
 * (agent-state.c), and the live views' state. Returns 0 (also when there
 * is nothing to continue), -1 with a reason. */
static int state_load(struct agent *a, const char *path, char *err, size_t errlen)
{
	struct sp_agent_loaded l;
	sqlite3 *db;
	int rc;

	if (access(path, F_OK) < 0)
		return 0;
	db = sp_profile_open(path, err, errlen);
	if (!db)
		return -1;
	memset(&l, 0, sizeof(l));
	l.started = a->started; /* kept when the profile does not say */
	rc = sp_agent_state_load(db, path, &a->c, &l, err, errlen);
	if (rc > 0) {
		a->started = l.started;
		a->restarts = l.restarts;
		a->carried_tick = l.ns_per_tick;
		a->carried = l.carried;
		a->carried_h = l.carried_h;
		a->procs_folded = l.procs_folded;
		a->procs_folded_sqlite = l.procs_folded_sqlite;
		rc = sp_live_state_load(db, &a->ls, err, errlen) < 0 ? -1 : 0;
	} else {
		free(l.carried.r);
		free(l.carried_h.r);
	}
	sqlite3_close(db);
	return rc;
}

/* The command line (cmd_agent's options). */
struct agent_opts {
	const char *sock, *metrics;
	double interval;
	uint64_t top_n;
	int quiet;
};

/* Parse the options into a and o. Returns -1 to go on, else the exit
 * code (a bad option: usage said). */
static int agent_options(int argc, char **argv, struct agent *a, struct agent_opts *o)
{
	static const struct option longopts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "socket", required_argument, NULL, 1 },
		{ "interval", required_argument, NULL, 2 },
		{ "metrics", required_argument, NULL, 3 },
		{ "metrics-top", required_argument, NULL, 4 },
		{ "max-texts", required_argument, NULL, 5 },
		{ "max-processes", required_argument, NULL, 6 },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int opt;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "o:qh", longopts, NULL)) != -1) {
		switch (opt) {
		case 'o': a->output = optarg; break;
		case 1: o->sock = optarg; break;
		case 2:
			if (sp_parse_double(optarg, 0.1, 86400, &o->interval) < 0) {
				fprintf(stderr,
					"sqlprof agent: --interval wants seconds, 0.1 to 86400\n");
				return SP_EXIT_USAGE;
			}
			break;
		case 3: o->metrics = optarg; break;
		case 4:
			if (sp_parse_u64(optarg, &o->top_n) < 0 || o->top_n < 1 ||
			    o->top_n > 100000) {
				fprintf(stderr,
					"sqlprof agent: --metrics-top wants a number of queries, 1 to 100000\n");
				return SP_EXIT_USAGE;
			}
			break;
		case 5:
			if (sp_parse_u64(optarg, &a->max_texts) < 0 || a->max_texts < 100 ||
			    a->max_texts > 100000000) {
				fprintf(stderr,
					"sqlprof agent: --max-texts wants a number of SQL texts, 100 to 100000000\n");
				return SP_EXIT_USAGE;
			}
			break;
		case 6:
			if (sp_parse_u64(optarg, &a->max_procs) < 0 || a->max_procs < 10 ||
			    a->max_procs > 100000000) {
				fprintf(stderr,
					"sqlprof agent: --max-processes wants a number of processes, 10 to 100000000\n");
				return SP_EXIT_USAGE;
			}
			break;
		case 'q': o->quiet = 1; break;
		case 'h': usage(stdout); return SP_EXIT_OK;
		default: usage(stderr); return SP_EXIT_USAGE;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "sqlprof agent: unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		return SP_EXIT_USAGE;
	}
	return -1;
}

/* The socket's path, the profile's lock, the socket's directory and its
 * lock (a->sockpath, a->lockfd, a->sockdir, a->dirfd). Returns -1 to go
 * on, else the exit code (said). */
static int agent_claim(struct agent *a, const struct agent_opts *o)
{
	char err[2 * PATH_MAX + 512], *slash;
	size_t nt;
	int shared = 0;

	if (!sp_series_tiers(&nt, err, sizeof(err))) {
		fprintf(stderr, "sqlprof agent: %s\n", err);
		return SP_EXIT_USAGE;
	}
	if (!o->sock) {
		if ((shared = sp_srv_default_socket(a->sockpath, sizeof(a->sockpath))) < 0) {
			fprintf(stderr, "sqlprof agent: no default socket path; use --socket\n");
			return SP_EXIT_USAGE;
		}
	} else if (snprintf(a->sockpath, sizeof(a->sockpath), "%s", o->sock) >=
		   (int)sizeof(a->sockpath)) {
		fprintf(stderr, "sqlprof agent: --socket path too long\n");
		return SP_EXIT_USAGE;
	}
	if (sp_out_check(a->output, err, sizeof(err)) < 0 ||
	    (a->lockfd = profile_lock(a->output, a->lockpath, sizeof(a->lockpath), err,
				      sizeof(err))) < 0 ||
	    socket_dir(a->sockpath, shared > 0, err, sizeof(err)) < 0 ||
	    socket_claim(a->sockpath, err, sizeof(err)) < 0) {
		fprintf(stderr, "sqlprof agent: %s\n", err);
		if (a->lockfd >= 0) {
			unlink(a->lockpath);
			close(a->lockfd);
			a->lockfd = -1;
		}
		return SP_EXIT_USAGE;
	}
	snprintf(a->sockdir, sizeof(a->sockdir), "%s", a->sockpath);
	slash = strrchr(a->sockdir, '/');
	if (slash)
		*slash = 0;
	a->dirfd = dir_lock(a->sockdir);
	return -1;
}

/*
 * The sampled executions kept one by one (timelines) wait in a file, as
 * record's do (recording.h: the spill file), not in the agent's memory:
 * kept there, they doubled its anonymous memory in steps for the first 80
 * minutes of a service (up to 9.6 MB). The file is unlinked at once (the
 * page cache holds it), next to the profile, where the agent may write
 * anyway; else in $TMPDIR. Without either, they stay in memory.
 */
static void agent_spill(struct agent *a, size_t max)
{
	char dir[PATH_MAX], path[PATH_MAX + 32];
	const char *tmp = getenv("TMPDIR");
	const char *slash = strrchr(a->output, '/');
	int fd = -1;

	if (slash)
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - a->output) + (slash == a->output),
			 a->output);
	else
		snprintf(dir, sizeof(dir), ".");
	for (int i = 0; i < 2 && fd < 0; i++) {
		const char *d = i == 0 ? dir : tmp && *tmp ? tmp : "/tmp";

		fd = open(d, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
		if (fd < 0) { /* a file system without O_TMPFILE */
			snprintf(path, sizeof(path), "%s/.sqlprof-events.XXXXXX", d);
			fd = mkostemp(path, O_CLOEXEC);
			if (fd >= 0)
				unlink(path);
		}
	}
	if (fd >= 0 && !(a->spill = fdopen(fd, "w+")))
		close(fd);
	if (a->spill)
		sp_coll_spill(&a->c, a->spill, max);
	else
		a->c.events_max = max;
}

/* The collector (continuing the profile), the socket listening, the
 * signals and --metrics. Returns -1 to go on, else the exit code. */
static int agent_start(struct agent *a, const struct agent_opts *o)
{
	char err[2 * PATH_MAX + 512];
	struct sigaction sa;

	/* Each scrape and snapshot merges the live services' statistics
	 * into a collector of its own (each_image), whose tables reach a
	 * few MB and are freed at once. glibc raises its mmap threshold to
	 * the size of each mapped block freed, so the next such tables came
	 * from the heap, which kept them: RssAnon stepped up by 0.2-0.5 MB
	 * at a time for minutes (the soak). A fixed threshold gives every
	 * block of 128 KiB and more back to the system when freed. */
	mallopt(M_MMAP_THRESHOLD, 128 * 1024);
	sp_coll_init(&a->c);
	/* the bound values' hashes (N+1 and duplicate findings) fill up to
	 * their bound, SP_DUPVALS_MAX, over the first ten-odd minutes at a
	 * sampled execution in a hundred: their table at its full size from
	 * the start (1.3 MB, its pages touched within the first minute)
	 * rather than doubling three times on the way (the soak's RssAnon
	 * stepped up at 2.5, 5 and 10 minutes) */
	(void)hmap_reserve(&a->c.dupvals, SP_DUPVALS_MAX);
	a->c.text_folds = &a->folds;
	sp_live_state_init(&a->ls);
	a->ls.profile = sp_live_abspath(a->output);
	a->c.diag = stderr;
	/* sampled executions kept one by one (timelines): a standing agent
	 * keeps the first of them; sites and totals count all */
	agent_spill(a, 100000);
	a->started = (long long)time(NULL);
	a->first_ns = sp_series_now_ns();
	a->t0 = sp_srv_mono_ns();
	if (state_load(a, a->output, err, sizeof(err)) < 0) {
		fprintf(stderr, "sqlprof agent: cannot continue %s: %s\n", a->output, err);
		return SP_EXIT_INPUT;
	}
	if (a->restarts) /* a profile without intervals yet: the first covers it all */
		a->first_ns = (int64_t)a->started * 1000000000;
	a->c.ns_per_tick = a->carried_tick > 0 ? a->carried_tick : sp_srv_calibrate_tsc();
	a->c.stats_added = carried_match;
	a->c.stats_added_arg = a;
	/* a descriptor per connected process: as many as we may have */
	sp_srv_raise_nofile(NULL);
	if (sp_srv_init(&a->srv, &a->c, "sqlprof agent") < 0)
		return SP_EXIT_INTERNAL;
	a->srv.on_view = view_answer;
	a->srv.arg = a;
	/* without it, scrapes read the statistics directly and folds stay */
	a->answer_fd = memfd_create("sqlprof-answer", MFD_CLOEXEC);
	if (pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
		return SP_EXIT_INTERNAL;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGCHLD, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (sp_srv_listen(&a->srv, a->sockpath, err, sizeof(err)) < 0) {
		fprintf(stderr, "sqlprof agent: %s\n", err);
		return SP_EXIT_USAGE;
	}
	a->listening = 1;
	if (o->metrics) {
		a->metrics = sp_metrics_start(o->metrics, (size_t)o->top_n, agent_totals, a, &a->ls,
					      sig_pipe[0], err, sizeof(err));
		if (!a->metrics) {
			fprintf(stderr, "sqlprof agent: %s\n", err);
			return SP_EXIT_USAGE;
		}
	}
	if (!o->quiet)
		fprintf(stderr, "sqlprof agent: listening on %s, profile %s every %g s%s%s%s\n",
			a->sockpath, a->output, o->interval, a->restarts ? " (continued)" : "",
			o->metrics ? ", metrics on http://" : "", o->metrics ? o->metrics : "");
	return -1;
}

/* An interval is up and no snapshot runs: what ended is taken, then a
 * snapshot forked (a->snap). */
static void agent_tick(struct agent *a)
{
	sp_coll_settle(&a->c, 0); /* ended without goodbye: how? */
	/* the files first: a gone file takes its image's part off while
	 * reap_gone still has it */
	sp_srv_read_bye_files(&a->c, a->sockdir, "sqlprof agent");
	reap_gone(a);
	/* the texts and events the rings hold, then the copy */
	if (a->c.nrings)
		sp_coll_rings_drain(&a->c, 0);
	a->snap_start = sp_srv_mono_ns();
	agent_fold(a);
	agent_fold_procs(a);
	a->snap_epoch = a->fold_epoch;
	/* the child reads the spill file while we add to it: neither
	 * changes what is in it until it ends (snapshot_done) */
	a->c.spill_shared = 1;
	a->snap = snapshot(a);
	if (a->snap < 0) {
		fprintf(stderr, "sqlprof agent: fork: %s (profile not updated)\n", strerror(errno));
		a->snap = 0;
		a->c.spill_shared = 0;
	}
}

/* The test hold (agent_loop): 1 while path exists (after 10 ms). */
static int agent_held(const char *path)
{
	char held[PATH_MAX + 8];
	struct timespec ts = { 0, 10000000 };
	int fd;

	if (access(path, F_OK) < 0)
		return 0;
	snprintf(held, sizeof(held), "%s.held", path);
	fd = open(held, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	if (fd >= 0)
		close(fd);
	nanosleep(&ts, NULL);
	return 1;
}

/* Serve until SIGTERM or SIGINT. 0, or -1 (the server failed). */
static int agent_loop(struct agent *a, double interval)
{
	uint64_t next = sp_srv_mono_ns();
	/* tests only (t_agent_scrape_busy): while this file exists the loop
	 * does nothing, as while it merges a large service that ended; it
	 * says so by creating FILE.held */
	const char *hold = getenv("SQLPROF_AGENT_TEST_HOLD");

	while (!stop_sig) {
		if (hold && agent_held(hold))
			continue;
		int t = a->metrics ? sp_metrics_timeout_ms(a->metrics) : -1;
		int r = sp_srv_round(&a->srv, a->metrics ? sp_metrics_fd(a->metrics) : sig_pipe[0],
				     t >= 0 && t < 10 ? t : -1, 0);
		uint64_t now;
		int status;

		if (r < 0)
			return -1;
		/* a scrape's answer: rendered here, between two rounds, and
		 * sent by metrics.c's thread */
		if (a->metrics)
			sp_metrics_run(a->metrics);
		if (r & SP_SRV_EXTRA) {
			char b[64];

			while (read(sig_pipe[0], b, sizeof(b)) > 0)
				;
		}
		/* the texts budget between snapshots too, a tenth of it at a
		 * time: folded all at once before a snapshot, 20,000 texts kept
		 * the agent from its sockets and scrapes for 0.5-1.6 s */
		if (a->max_texts && a->c.sqls.count > a->max_texts + a->max_texts / 10 + 100)
			agent_fold(a);
		if (a->c.procs.count > a->max_procs + a->max_procs / 10 + 10 &&
		    sp_srv_mono_ns() - a->procs_fold_ns > 1000000000ull)
			agent_fold_procs(a);
		if (a->snap > 0 && waitpid(a->snap, &status, WNOHANG) == a->snap) {
			a->snap = 0;
			snapshot_done(a, status);
		}
		now = sp_srv_mono_ns();
		if (now >= next && a->snap == 0) {
			agent_tick(a);
			next = now + (uint64_t)(interval * 1e9);
		}
	}
	return 0;
}

/* What the end says on stderr (losses even with -q). */
static void agent_summary(struct agent *a, int quiet)
{
	const struct sp_coll *c = &a->c;

	/* what could not be taken is said even with -q: executions missing */
	if (!quiet || c->stats_lost || c->fds_lost || c->fd_waits || sp_coll_missing(c)) {
		fprintf(stderr,
			"sqlprof agent: %llu execution%s from %zu process%s, %llu events lost",
			(unsigned long long)sp_coll_executions(c),
			sp_coll_executions(c) == 1 ? "" : "s", c->procs.count,
			c->procs.count == 1 ? "" : "es", (unsigned long long)sp_coll_lost(c));
		if (c->stats_lost)
			fprintf(stderr,
				", the totals of %llu process%s lost (statistics not received)",
				(unsigned long long)c->stats_lost, c->stats_lost == 1 ? "" : "es");
		if (c->fds_lost)
			fprintf(stderr, ", %llu descriptor%s lost (out of descriptors)",
				(unsigned long long)c->fds_lost, c->fds_lost == 1 ? "" : "s");
		if (sp_coll_missing(c))
			fprintf(stderr,
				", %llu executions missing (the processes said they ran them)",
				(unsigned long long)sp_coll_missing(c));
		if (c->fd_waits)
			fprintf(stderr,
				"; out of descriptors %llu time%s (processes waited to "
				"connect: executions may be missing)",
				(unsigned long long)c->fd_waits, c->fd_waits == 1 ? "" : "s");
		fputc('\n', stderr);
	}
	if (a->missing) /* said even with --quiet: the totals are short */
		fprintf(stderr,
			"sqlprof agent: %llu execution%s missing: %llu process%s said goodbye after more "
			"executions than the profile holds for them (meta agent_missing_executions)\n",
			(unsigned long long)a->missing, a->missing == 1 ? " is" : "s are",
			(unsigned long long)a->missing_procs, a->missing_procs == 1 ? "" : "es");
}

/* SIGTERM or SIGINT: everything read, the profile written a last time.
 * 0 or -1. */
static int agent_end(struct agent *a, int quiet)
{
	char err[2 * PATH_MAX + 512];

	/* a snapshot still writing is ours to stop: the last write below
	 * holds all it would and more (waiting for it took up to a whole
	 * write: 7 s with 120,000 texts, SIGTERM to exit). Its temporary
	 * goes with it; the profile it would have replaced stays whole. */
	if (a->snap > 0) {
		char tmp[PATH_MAX + 32];

		kill(a->snap, SIGKILL);
		waitpid(a->snap, NULL, 0);
		snprintf(tmp, sizeof(tmp), "%s.tmp.%d", a->output, (int)a->snap);
		unlink(tmp);
		snprintf(tmp, sizeof(tmp), "%s.tmp.%d-journal", a->output, (int)a->snap);
		unlink(tmp);
		snapshot_done(a, -1);
	}
	if (!quiet)
		fprintf(stderr, "sqlprof agent: %s, writing %s\n", strsignal(stop_sig), a->output);
	/* the end: connections that waited for descriptors (serve.c) taken
	 * and read, as descriptors free up (processes that ended close
	 * theirs; at most 1000 rounds), then everything read and written in
	 * place */
	for (int i = 0; i < 1000; i++) {
		int r = sp_srv_round(&a->srv, -1, 20, 1);

		if (r < 0 || (!(r & SP_SRV_DATA) && !sp_srv_pending(&a->srv)))
			break;
	}
	/* the end: everything read, then written in place - first what the
	 * socket still holds (a process that ran while we were busy: its
	 * totals came in a message not read yet), at most 2 s of it */
	if (sp_srv_flush(&a->srv, 2000000000ull) < 0)
		fprintf(stderr,
			"sqlprof agent: messages still coming after 2 s: the profile is written "
			"without the rest\n");
	sp_coll_rings_drain(&a->c, 0);
	sp_srv_read_bye_files(&a->c, a->sockdir, "sqlprof agent");
	sp_coll_read_unreported(&a->c, a->sockdir);
	sp_coll_settle(&a->c, 1);
	/* the running services' statistics read once, kept mapped until
	 * each is merged (as a snapshot child reads them): the agent ends */
	a->c.stats_keep = 1;
	if (write_profile(a, err, sizeof(err)) < 0) {
		fprintf(stderr, "sqlprof agent: %s\n", err);
		return -1;
	}
	agent_summary(a, quiet);
	return 0;
}

static void agent_free(struct agent *a)
{
	if (a->listening)
		unlink(a->sockpath);
	sp_metrics_stop(a->metrics);
	if (a->dirfd >= 0)
		close(a->dirfd);
	sp_srv_close(&a->srv);
	sp_coll_free(&a->c);
	if (a->spill)
		fclose(a->spill);
	free(a->carried.r);
	free(a->live.r);
	free(a->carried_h.r);
	free(a->live_h.r);
	free(a->cached);
	free(a->direct);
	if (a->answer_fd >= 0)
		close(a->answer_fd);
	hmap_free(&a->folds);
	hmap_free(&a->seen);
	sp_live_state_free(&a->ls);
	/* removed while still held: a new agent takes a new file */
	if (a->lockfd >= 0) {
		unlink(a->lockpath);
		close(a->lockfd);
	}
}

int cmd_agent(int argc, char **argv)
{
	static struct agent a; /* its address goes to the profile writer */
	struct agent_opts o = { .interval = 10, .top_n = 200 };
	int rc;

	a.output = SP_PROFILE_DEFAULT;
	a.lockfd = -1;
	a.dirfd = -1;
	a.answer_fd = -1;
	a.max_texts = AGENT_MAX_TEXTS;
	a.max_procs = AGENT_MAX_PROCS;
	rc = agent_options(argc, argv, &a, &o);
	if (rc < 0)
		rc = agent_claim(&a, &o);
	if (rc >= 0)
		return rc;
	hmap_init(&a.folds, sizeof(uint64_t), sizeof(struct fold_ent));
	hmap_init(&a.seen, sizeof(uint32_t), sizeof(uint64_t));
	rc = agent_start(&a, &o);
	if (rc < 0)
		rc = agent_loop(&a, o.interval) < 0 || agent_end(&a, o.quiet) < 0 ? SP_EXIT_INTERNAL
										  : SP_EXIT_OK;
	agent_free(&a);
	return rc;
}
