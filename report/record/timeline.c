/* SPDX-License-Identifier: MIT */
/*
 * timeline.c - `sqlprof record`'s timeline writer. Sampled executions wait
 * in the spill file (collect.c) until the profile is written; inserting
 * them into the profile's events table and indexing them was most of
 * record's work after the command's exit (10 M executions of the trivial
 * loop at the default rate, 100,000 events: ~190 of ~230 ms). This thread
 * does that while the command runs, into a database file of the profile's
 * events schema in the recording's private directory, and the profile is
 * then written into that file (sp_profile_write): after the exit only the
 * events the thread had not reached yet are inserted.
 *
 * What it shares with the collector's thread: the model (struct sp_coll),
 * only under the model lock, which the collector holds except while it
 * waits in poll (sp_srv's model_lock): the spill file's length in events
 * and the SQL texts, for each event's fingerprint id. It reads the spill
 * file with pread, below that length: those bytes never change. An event
 * whose text has not arrived yet stops it there until the text comes (or
 * the profile writes it: it gets the same id either way, since a text is
 * never changed once known). It does not touch the socket, the rings or
 * the statistics. On any failure of its own it stops and the file is not
 * used: the profile writes every event as before.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sym.h"
#include "timeline.h"

#define TLW_BATCH 4096  /* events per transaction */
#define TLW_SLEEP_MS 50 /* between looks when nothing new is in the file */
#define TLW_WARM_MS 200 /* between looks for modules to open, at least */

struct sp_tlw {
	struct sp_coll *c;
	pthread_mutex_t *lock; /* the model's */
	pthread_t th;
	int running;
	pthread_mutex_t mx; /* stop, and the thread's sleep */
	pthread_cond_t cv;
	int stop;
	int fd; /* the spill file's descriptor (c->spill's), pread only */
	sqlite3 *db;
	struct sp_evins ins;
	uint64_t done; /* the first done events of the spill file are in db */
	int failed;
	char path[4096];
	/* the profile's symbolizer, its modules opened as stacks come
	 * (sp_profile_sym_prewarm); NULL: not done here */
	struct sym_ctx *sym;
	struct hmap opened;
	size_t warm_stacks; /* c->stacks.count at the last look */
	uint64_t warm_at;   /* monotonic ms of the last look */
	uint64_t warm_gap;  /* ms until the next one */
};

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Events [from, from + n) of the spill file into ev; 0, or -1. */
static int read_events(const struct sp_tlw *w, uint64_t from, struct sp_event *ev, size_t n)
{
	size_t len = n * sizeof(*ev), off = 0;

	while (off < len) {
		ssize_t r = pread(w->fd, (char *)ev + off, len - off,
				  (off_t)(from * sizeof(*ev) + off));

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		off += (size_t)r;
	}
	return 0;
}

/* Insert ev[0, n) with their ids in one transaction; 0, or -1. With the
 * journal off a failed transaction cannot be undone: the file is then
 * not used at all (w->failed). */
static int insert_events(struct sp_tlw *w, const struct sp_event *ev, const uint64_t *fp, size_t n)
{
	if (sqlite3_exec(w->db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK)
		return -1;
	for (size_t i = 0; i < n; i++)
		if (sp_evins_add(&w->ins, &ev[i], fp[i]) < 0)
			return -1;
	if (sp_evins_flush(&w->ins) < 0)
		return -1;
	return sqlite3_exec(w->db, "COMMIT", NULL, NULL, NULL) == SQLITE_OK ? 0 : -1;
}

/* The database file, made by this thread when the first events are to go
 * in: a command with no sampled execution never has one, and one that has
 * makes it while the command runs, not in the collector's start-up (1.75 M
 * instructions, a fifth of a one-query record's own work before the
 * command). 0, or -1 (then the profile writes every event). */
static int open_db(struct sp_tlw *w)
{
	char err[256];
	/* 0600 before SQLite opens it, as the profile it becomes */
	int fd = open(w->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);

	if (fd < 0)
		return -1;
	close(fd);
	if (sqlite3_open_v2(w->path, &w->db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK ||
	    sp_profile_timeline_init(w->db, err, sizeof(err)) < 0 ||
	    sp_evins_open(&w->ins, w->db) < 0)
		return -1;
	return 0;
}

static void *tlw_main(void *arg)
{
	struct sp_tlw *w = arg;
	static struct sp_event ev[TLW_BATCH]; /* one writer per process */
	uint64_t fp[TLW_BATCH];

	for (;;) {
		uint64_t avail;
		size_t n = 0, k = 0;
		int stop;

		size_t nstacks;

		pthread_mutex_lock(w->lock);
		avail = w->c->nspilled - w->c->spill_nbatch; /* in the file */
		nstacks = w->c->stacks.count;
		pthread_mutex_unlock(w->lock);
		if (w->sym && nstacks != w->warm_stacks && mono_ms() - w->warm_at >= w->warm_gap) {
			/* a look reads every stack under the lock: after one that
			 * found no new module, wait twice as long (up to 6.4 s),
			 * so that 40,000 stacks do not hold the collector up */
			w->warm_stacks = nstacks;
			if (sp_profile_sym_prewarm(w->sym, w->c, w->lock, &w->opened))
				w->warm_gap = TLW_WARM_MS;
			else if (w->warm_gap < 32 * TLW_WARM_MS)
				w->warm_gap *= 2;
			w->warm_at = mono_ms();
		}
		if (avail > w->done)
			n = avail - w->done < TLW_BATCH ? (size_t)(avail - w->done) : TLW_BATCH;
		if (n) {
			if (read_events(w, w->done, ev, n) < 0) {
				w->failed = 1;
				break;
			}
			pthread_mutex_lock(w->lock);
			for (k = 0; k < n; k++) {
				const struct sp_sql *s;

				if (k && ev[k].sql_id == ev[k - 1].sql_id) {
					fp[k] = fp[k - 1]; /* a loop's events: one lookup */
					continue;
				}
				s = hmap_get(&w->c->sqls, &ev[k].sql_id, 0, NULL);
				if (!s || !(fp[k] = sp_profile_sql_fp_id(s)))
					break; /* its text is not here yet */
			}
			pthread_mutex_unlock(w->lock);
			if (k && !w->db && open_db(w) < 0) {
				w->failed = 1;
				break;
			}
			if (k && insert_events(w, ev, fp, k) < 0) {
				w->failed = 1;
				break;
			}
			w->done += k;
		}
		pthread_mutex_lock(&w->mx);
		if (!w->stop && !(n == TLW_BATCH && k == n)) { /* more waiting: go on */
			struct timespec ts;

			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += TLW_SLEEP_MS * 1000000L;
			if (ts.tv_nsec >= 1000000000L) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000L;
			}
			pthread_cond_timedwait(&w->cv, &w->mx, &ts);
		}
		stop = w->stop;
		pthread_mutex_unlock(&w->mx);
		if (stop)
			break;
	}
	return NULL;
}

struct sp_tlw *sp_tlw_start(struct sp_coll *c, pthread_mutex_t *lock, const char *dir,
			    const char *debug_path)
{
	struct sp_tlw *w;
	sigset_t all, old;
	int rc;

	if (!c->spill || c->nevents || c->nspilled)
		return NULL;
	w = calloc(1, sizeof(*w));
	if (!w)
		return NULL;
	w->c = c;
	w->lock = lock;
	w->fd = fileno(c->spill);
	pthread_mutex_init(&w->mx, NULL);
	pthread_cond_init(&w->cv, NULL);
	hmap_init(&w->opened, sizeof(uint64_t), 1);
	w->warm_gap = TLW_WARM_MS;
	/* the profile's symbolizer, here unless it would ask debuginfod
	 * servers (write_frames unsets DEBUGINFOD_URLS first, which this
	 * thread cannot do: the command is yet to inherit the environment) */
	if (!(getenv("DEBUGINFOD_URLS") && *getenv("DEBUGINFOD_URLS")))
		w->sym = sp_sym_open(debug_path);
	snprintf(w->path, sizeof(w->path), "%s/timeline", dir); /* open_db makes it */
	/* the thread takes no signal: SIGCHLD, SIGINT and the others the
	 * supervisor forwards are the collector's thread's, and none
	 * interrupts a system call of the writer */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&w->th, NULL, tlw_main, w);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0)
		goto fail;
	w->running = 1;
	return w;
fail:
	sp_tlw_free(w);
	return NULL;
}

void sp_tlw_stop(struct sp_tlw *w, pthread_mutex_t *lock, struct sp_timeline *tl)
{
	memset(tl, 0, sizeof(*tl));
	if (!w)
		return;
	if (w->running) {
		pthread_mutex_lock(&w->mx);
		w->stop = 1;
		pthread_cond_signal(&w->cv);
		pthread_mutex_unlock(&w->mx);
		pthread_mutex_unlock(lock); /* the thread may be waiting for it */
		pthread_join(w->th, NULL);
		pthread_mutex_lock(lock);
		w->running = 0;
	}
	sp_evins_close(&w->ins);
	if (w->db && sqlite3_close(w->db) != SQLITE_OK)
		w->failed = 1;
	w->db = NULL;
	if (w->failed || !w->done)
		return;
	snprintf(tl->path, sizeof(tl->path), "%s", w->path);
	tl->events = w->done;
}

struct sym_ctx *sp_tlw_sym(const struct sp_tlw *w)
{
	return w && !w->running ? w->sym : NULL;
}

void sp_tlw_free(struct sp_tlw *w)
{
	if (!w)
		return;
	if (w->running) {
		struct sp_timeline tl;

		sp_tlw_stop(w, w->lock, &tl);
	}
	sp_evins_close(&w->ins);
	if (w->db)
		sqlite3_close(w->db);
	unlink(w->path); /* gone already when the profile took it */
	if (w->sym)
		sym_close(w->sym);
	hmap_free(&w->opened);
	pthread_cond_destroy(&w->cv);
	pthread_mutex_destroy(&w->mx);
	free(w);
}
