/* SPDX-License-Identifier: MIT */
/*
 * recording.c - the model of a recording (recording.h), the part the
 * profile writer reads besides the structs: processes' deaths and losses,
 * modules changed on disk, N+1 loop buckets, and the spill file of sampled
 * executions. The collector (record/collect*.c) builds the model; these
 * functions only read it (the spill file: also write its batch, and
 * rewrite the events kept when texts or processes are folded).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "recording.h"

char *sp_coll_deaths(const struct sp_coll *c)
{
	size_t it = 0, len = 0, cap = 0;
	const struct sp_proc *p;
	char *out = NULL;

	while ((p = hmap_next(&c->procs, &it, NULL))) {
		char line[512], sql[201] = "";
		int n;

		if (!p->died || !p->hello)
			continue;
		if (p->nrunning) {
			uint64_t id = p->running[0];
			const struct sp_sql *s = hmap_get((struct hmap *)&c->sqls, &id, 0, NULL);

			if (s && s->text) {
				snprintf(sql, sizeof(sql), "%s", s->text);
				for (char *q = sql; *q; q++)
					if (*q == '\n' || *q == '\t' || *q == '\r')
						*q = ' ';
			}
		}
		n = snprintf(line, sizeof(line), "%u\t%s\t%u\t%s\n", p->pid, p->exe ? p->exe : "",
			     p->nrunning, sql);
		if (n < 0)
			continue;
		if (SP_GROW(out, cap, len + (size_t)n + 1, 1024) < 0)
			break;
		memcpy(out + len, line, (size_t)n + 1);
		len += (size_t)n;
	}
	return out;
}

int sp_module_changed(const struct sp_module *m)
{
	struct stat st;

	if (m->build_id_len)
		return 0; /* a build-id is checked by the symbolizer itself */
	if (m->replaced)
		return 1;
	if (!m->found)
		return 0; /* no identity sent (no /proc): trust the path */
	if (stat(m->path, &st) != 0)
		return 1;
	return (uint64_t)st.st_dev != m->dev || (uint64_t)st.st_ino != m->ino ||
	       (uint64_t)st.st_size != m->size ||
	       (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec != m->mtime_ns;
}

uint64_t *sp_qagg_loops(struct sp_qagg *q, uint32_t nb)
{
	uint64_t *r;

	if (nb > SP_RUN_BUCKETS)
		nb = SP_RUN_BUCKETS;
	if (q->loops_by_len && q->runs_nb >= nb)
		return q->loops_by_len;
	nb = nb < 4 ? 4 : nb; /* a malloc chunk's least */
	r = realloc(q->loops_by_len, nb * sizeof(*r));
	if (!r)
		return NULL;
	memset(r + q->runs_nb, 0, (nb - q->runs_nb) * sizeof(*r));
	q->loops_by_len = r;
	q->runs_nb = nb;
	return r;
}

int sp_loop_bucket(uint64_t len)
{
	return sp_loop_len_bucket(len); /* the preload's own (sp_wire.h) */
}

void sp_loop_bucket_bounds(int b, uint64_t *lo, uint64_t *hi)
{
	if (b < 16) {
		*lo = *hi = (uint64_t)b + 1;
		return;
	}
	*lo = (uint64_t)1 << (b - 12);
	*hi = b - 11 < 64 ? ((uint64_t)1 << (b - 11)) - 1 : UINT64_MAX;
}

/* Events per write(2) to the spill file: 64 KiB. */
#define SP_SPILL_BATCH (65536 / sizeof(struct sp_event))

/* Write the batch to the spill file after the events already there (the
 * first nspilled - spill_nbatch). What does not fit (a full file system)
 * is dropped and counted; a partial event at the end is cut off, so the
 * file always holds whole events. Returns 0, or -1 if any was dropped. */
static int spill_write(struct sp_coll *c)
{
	const size_t sz = sizeof(struct sp_event);
	uint64_t done = c->nspilled - c->spill_nbatch; /* events in the file */
	const char *p = (const char *)c->spill_batch;
	size_t len = c->spill_nbatch * sz, off = 0;
	int fd = fileno(c->spill);

	while (off < len) {
		ssize_t n = pwrite(fd, p + off, len - off, (off_t)(done * sz + off));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			c->spill_errno = n < 0 ? errno : ENOSPC;
			break;
		}
		off += (size_t)n;
	}
	if (off < len) {
		size_t lost = c->spill_nbatch - off / sz;

		if (off % sz) /* half an event: not one */
			(void)!ftruncate(fd, (off_t)((done + off / sz) * sz));
		c->nspilled -= lost;
		c->events_dropped += lost;
		c->spill_failed += lost;
	}
	c->spill_nbatch = 0;
	return off < len ? -1 : 0;
}

/* Queue ev for the spill file (nspilled is counted by the caller); a full
 * batch is written first. Returns 0, or -1 when ev cannot be kept. */
int sp_coll_spill_add(struct sp_coll *c, const struct sp_event *ev)
{
	if (!c->spill_batch) {
		c->spill_batch = malloc(SP_SPILL_BATCH * sizeof(*ev));
		if (!c->spill_batch)
			return -1;
	}
	if (c->spill_nbatch == SP_SPILL_BATCH)
		spill_write(c);
	c->spill_batch[c->spill_nbatch++] = *ev;
	return 0;
}

int sp_coll_spill_flush(struct sp_coll *c)
{
	if (c->spill && c->spill_nbatch)
		spill_write(c);
	if (c->spill_failed) {
		errno = c->spill_errno;
		return -1;
	}
	return 0;
}

ssize_t sp_coll_spill_read(const struct sp_coll *c, uint64_t i, struct sp_event *out, size_t n)
{
	const size_t sz = sizeof(*out);
	uint64_t left = c->nspilled - c->spill_nbatch;
	size_t off = 0;

	if (!c->spill || i >= left)
		return 0;
	if (n > left - i)
		n = (size_t)(left - i);
	while (off < n * sz) {
		ssize_t r = pread(fileno(c->spill), (char *)out + off, n * sz - off,
				  (off_t)(i * sz + off));

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -1;
		if (r == 0)
			break;
		off += (size_t)r;
	}
	return (ssize_t)(off / sz);
}

/* Events read, changed and written again at a time: 64 KiB. */
#define SP_REWRITE_CHUNK (65536 / sizeof(struct sp_event))

/* fn over the spill file's events (the first nspilled - spill_nbatch),
 * each chunk that changed written back in place. */
static int rewrite_file(struct sp_coll *c, int (*fn)(struct sp_event *, void *), void *arg)
{
	struct sp_event *buf;
	uint64_t infile = c->nspilled - c->spill_nbatch;
	int rc = 0;

	if (!infile)
		return 0;
	buf = malloc(SP_REWRITE_CHUNK * sizeof(*buf));
	if (!buf)
		return -1;
	for (uint64_t i = 0; i < infile && rc == 0;) {
		ssize_t n = sp_coll_spill_read(c, i, buf, SP_REWRITE_CHUNK);
		size_t len, off = 0;
		int changed = 0;

		if (n <= 0) {
			rc = n < 0 ? -1 : 0;
			break;
		}
		for (ssize_t k = 0; k < n; k++)
			changed |= fn(&buf[k], arg);
		len = (size_t)n * sizeof(*buf);
		while (changed && off < len) {
			ssize_t w = pwrite(fileno(c->spill), (char *)buf + off, len - off,
					   (off_t)(i * sizeof(*buf) + off));

			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0) { /* in place: only an I/O error */
				rc = -1;
				break;
			}
			off += (size_t)w;
		}
		i += (uint64_t)n;
	}
	free(buf);
	return rc;
}

int sp_coll_events_rewrite(struct sp_coll *c, int (*fn)(struct sp_event *e, void *arg), void *arg)
{
	for (size_t i = 0; i < c->nevents; i++)
		fn(&c->events[i], arg);
	if (!c->spill || c->spill_shared)
		return 0;
	for (size_t i = 0; i < c->spill_nbatch; i++)
		fn(&c->spill_batch[i], arg);
	return rewrite_file(c, fn, arg);
}

static int fold_event(struct sp_event *e, void *arg)
{
	const uint64_t *to = hmap_get((struct hmap *)arg, &e->sql_id, 0, NULL);

	if (!to)
		return 0;
	e->sql_id = *to;
	return 1;
}

static int unstack_event(struct sp_event *e, void *set)
{
	uint64_t k = e->pid;

	if (!e->stack_id || !hmap_get(set, &k, 0, NULL))
		return 0;
	e->stack_id = 0;
	return 1;
}

/* Every entry of from into *to (made on first use): 0, or -1 (ENOMEM). */
static int pending_add(struct hmap **to, const struct hmap *from)
{
	size_t it = 0;
	const void *k;
	const void *v;

	if (!*to) {
		*to = malloc(sizeof(**to));
		if (!*to)
			return -1;
		hmap_init(*to, from->keylen, from->vallen);
	}
	while ((v = hmap_next(from, &it, &k))) {
		void *d = hmap_get(*to, k, 1, NULL);

		if (!d)
			return -1;
		memcpy(d, v, from->vallen);
	}
	return 0;
}

/* fn(arg) over the events kept; while the file is shared, arg's entries
 * kept pending in *pending for the spilled ones instead. */
static int events_change(struct sp_coll *c, int (*fn)(struct sp_event *, void *),
			 const struct hmap *arg, struct hmap **pending)
{
	int rc;

	if (!arg->count || (!c->nevents && !c->nspilled))
		return 0;
	rc = sp_coll_events_rewrite(c, fn, (void *)arg);
	if (c->spill && c->spill_shared) /* only those in memory were */
		rc = pending_add(pending, arg);
	return rc;
}

int sp_coll_events_fold(struct sp_coll *c, const struct hmap *fold)
{
	/* a fold is never folded again: one level of names */
	return events_change(c, fold_event, fold, &c->spill_remap);
}

int sp_coll_events_unstack(struct sp_coll *c, const struct hmap *pids)
{
	return events_change(c, unstack_event, pids, &c->spill_unstack);
}

int sp_coll_event_pending(const struct sp_coll *c, struct sp_event *e)
{
	int changed = 0;

	if (c->spill_remap)
		changed |= fold_event(e, c->spill_remap);
	if (c->spill_unstack)
		changed |= unstack_event(e, c->spill_unstack);
	return changed;
}

static int pending_event(struct sp_event *e, void *c)
{
	return sp_coll_event_pending(c, e);
}

int sp_coll_events_settle(struct sp_coll *c)
{
	int rc = 0;

	if (c->spill_shared)
		return 0;
	if (c->spill_remap || c->spill_unstack)
		rc = sp_coll_events_rewrite(c, pending_event, c);
	sp_coll_events_forget(c);
	return rc;
}

void sp_coll_events_forget(struct sp_coll *c)
{
	if (c->spill_remap)
		hmap_free(c->spill_remap);
	if (c->spill_unstack)
		hmap_free(c->spill_unstack);
	free(c->spill_remap);
	free(c->spill_unstack);
	c->spill_remap = c->spill_unstack = NULL;
}

uint64_t sp_coll_unreported(const struct sp_coll *c, uint64_t *complete)
{
	size_t it = 0;
	const struct sp_proc *p;
	uint64_t n = 0, done = 0;

	while ((p = hmap_next(&c->procs, &it, NULL))) {
		n += p->unreported != 0;
		done += p->unreported && p->bye;
	}
	if (complete)
		*complete = done;
	return n + c->unreported_counted;
}

void sp_coll_spill(struct sp_coll *c, FILE *f, size_t max)
{
	c->spill = f;
	c->events_max = max;
}

uint64_t sp_coll_missing(const struct sp_coll *c)
{
	size_t it = 0, i;
	const struct sp_proc *p;
	uint64_t n = 0;

	while ((p = hmap_next(&c->procs, &it, NULL))) {
		if (!p->bye || p->carried || p->bye_execs <= p->execs)
			continue;
		for (i = 0; i < c->nstats && c->stats[i].pid != p->pid; i++)
			;
		if (i == c->nstats)
			n += p->bye_execs - p->execs;
	}
	return n;
}

uint64_t sp_coll_lost(const struct sp_coll *c)
{
	size_t it = 0;
	const struct sp_proc *p;
	uint64_t n = 0;

	while ((p = hmap_next(&c->procs, &it, NULL)))
		n += p->lost;
	return n;
}

uint64_t sp_coll_missing_bye(const struct sp_coll *c, uint64_t *nproc)
{
	size_t it = 0;
	const struct sp_proc *p;
	uint64_t n = 0, np = 0;

	while ((p = hmap_next(&c->procs, &it, NULL)))
		if (p->bye && p->bye_execs > p->execs) {
			n += p->bye_execs - p->execs;
			np++;
		}
	if (nproc)
		*nproc = np;
	return n;
}

uint64_t sp_coll_executions(const struct sp_coll *c)
{
	size_t it = 0, i;
	const struct sp_proc *p;
	uint64_t n = 0;

	while ((p = hmap_next(&c->procs, &it, NULL)))
		n += p->execs;
	/* live: the query records' counts, published chunks only */
	for (i = 0; i < c->nstats; i++) {
		const uint8_t *map = c->stats[i].map;
		uint32_t nch = __atomic_load_n(
				 &((const struct sp_stats_hdr *)(const void *)map)->nchunks,
				 __ATOMIC_ACQUIRE),
			 ci;

		if (nch > c->stats[i].size / SP_STATS_CHUNK)
			continue;
		for (ci = 1; ci < nch; ci++) {
			const uint8_t *cb = map + (size_t)ci * SP_STATS_CHUNK;
			uint32_t u = __atomic_load_n(
				&((const struct sp_stats_chunk *)(const void *)cb)->used,
				__ATOMIC_ACQUIRE);
			size_t off = sizeof(struct sp_stats_chunk);

			if (u > SP_STATS_CHUNK)
				continue;
			while (off + sizeof(struct sp_rec_hdr) <= u) {
				struct sp_rec_hdr rh;

				memcpy(&rh, cb + off, sizeof(rh));
				if (rh.len < sizeof(rh) || rh.len % 8 || rh.len > u - off)
					break;
				if (rh.type == SP_AGG_QUERY &&
				    rh.len == sizeof(struct sp_agg_query)) {
					uint64_t k;

					memcpy(&k, cb + off + offsetof(struct sp_agg_query, count),
					       sizeof(k));
					n += k;
				}
				off += rh.len;
			}
		}
	}
	return n;
}
