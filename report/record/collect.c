/* SPDX-License-Identifier: MIT */
/*
 * collect.c - decode and aggregate stream messages and the threads'
 * shared rings; see collect.h.
 *
 * Every byte is hostile: each record's length is checked against the
 * message and against its type's fixed part before it is copied into an
 * aligned local. A message is validated completely before any of it is
 * applied, so a bad message changes nothing and other processes' data is
 * never touched by it.
 *
 * Rings are read through the same code: the records between tail and head
 * are copied out of the shared memory, whole records at a time, behind a
 * synthesized message header, and that copy is validated and applied like
 * a message of the ring's pid. The ring's framing (head, tail, record
 * lengths, the end of the buffer) is checked first, against the size and
 * tail the collector keeps itself. A broken ring is counted, reported once
 * and no longer read; the writer is never trusted with an index.
 *
 * Rings are kept per pid and process image, not per connection: see
 * sp_coll_input (BYE, a new image's HELLO) and sp_coll_recv (end of a
 * connection) for when they are freed.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <linux/magic.h>
#include <unistd.h>

#include "collect.h"
#include "fingerprint.h"
#include "hash.h"

struct qkey {
	uint64_t sql_id;
	uint64_t kind;
};
struct skey {
	uint64_t sql_id, kind, pid, stack_id;
};
struct stkey {
	uint64_t pid, stack_id;
};
struct ekey {
	uint64_t sql_id, rc, pid, stack_id, msg_hash;
	uint64_t kind; /* enum sp_exec_kind */
};
struct mkey {
	uint64_t pid, image, generation, lo;
};

/* The part of a statistics mapping kept after its merge: the header. */
#define HDR_PAGE 4096

static void ring_free(struct sp_coll *c, size_t i);
static void statmap_free(struct sp_statmap *m);

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

void sp_coll_init(struct sp_coll *c)
{
	memset(c, 0, sizeof(*c));
	hmap_init(&c->procs, sizeof(uint32_t), sizeof(struct sp_proc));
	hmap_init(&c->sqls, sizeof(uint64_t), sizeof(struct sp_sql));
	hmap_init(&c->queries, sizeof(struct qkey), sizeof(struct sp_qagg));
	hmap_init(&c->sites, sizeof(struct skey), sizeof(struct sp_sagg));
	hmap_init(&c->stacks, sizeof(struct stkey), sizeof(struct sp_stack));
	hmap_init(&c->errors, sizeof(struct ekey), sizeof(struct sp_err));
	hmap_init(&c->errcodes, 4 * sizeof(uint64_t), sizeof(uint64_t));
	hmap_init(&c->fphists, 2 * sizeof(uint64_t), sizeof(struct sp_fphist));
	hmap_init(&c->modules, sizeof(struct mkey), sizeof(struct sp_module));
	hmap_init(&c->plans, 2 * sizeof(uint64_t), sizeof(struct sp_plan));
	hmap_init(&c->schemas, sizeof(uint64_t), sizeof(struct sp_schema));
	hmap_init(&c->dupvals, 3 * sizeof(uint64_t), sizeof(uint64_t));
	hmap_init(&c->dups, sizeof(uint64_t), sizeof(struct sp_dup));
	hmap_init(&c->pycodes, 2 * sizeof(uint64_t), sizeof(struct sp_pycode));
	hmap_init(&c->callers, 4 * sizeof(uint64_t), sizeof(struct sp_caller));
	c->events_max = 200000;
	c->ns_per_tick = 1.0;
}

void sp_coll_free(struct sp_coll *c)
{
	size_t it;
	void *v;

	for (it = 0; (v = hmap_next(&c->procs, &it, NULL));) {
		free(((struct sp_proc *)v)->exe);
		if (((struct sp_proc *)v)->pidfd)
			close(((struct sp_proc *)v)->pidfd - 1);
	}
	for (it = 0; (v = hmap_next(&c->sqls, &it, NULL));)
		free(((struct sp_sql *)v)->text);
	for (it = 0; (v = hmap_next(&c->queries, &it, NULL));) {
		sp_hist_free(((struct sp_qagg *)v)->hist);
		free(((struct sp_qagg *)v)->runs_by_len);
	}
	for (it = 0; (v = hmap_next(&c->stacks, &it, NULL));)
		free(((struct sp_stack *)v)->pcs);
	for (it = 0; (v = hmap_next(&c->errors, &it, NULL));)
		free(((struct sp_err *)v)->msg);
	for (it = 0; (v = hmap_next(&c->modules, &it, NULL));)
		free(((struct sp_module *)v)->path);
	for (it = 0; (v = hmap_next(&c->plans, &it, NULL));)
		free(((struct sp_plan *)v)->text);
	hmap_free(&c->plans);
	free(c->plans_bound_why);
	c->plans_bound_why = NULL;
	for (it = 0; (v = hmap_next(&c->schemas, &it, NULL));)
		free(((struct sp_schema *)v)->text);
	hmap_free(&c->schemas);
	hmap_free(&c->dupvals);
	hmap_free(&c->dups);
	for (it = 0; (v = hmap_next(&c->pycodes, &it, NULL));) {
		struct sp_pycode *pc = v;

		free(pc->name);
		free(pc->qualname);
		free(pc->file);
		free(pc->table);
	}
	hmap_free(&c->pycodes);
	hmap_free(&c->callers);
	free(c->sym_notes);
	hmap_free(&c->procs);
	hmap_free(&c->sqls);
	hmap_free(&c->queries);
	hmap_free(&c->sites);
	hmap_free(&c->stacks);
	hmap_free(&c->errors);
	hmap_free(&c->errcodes);
	for (it = 0; (v = hmap_next(&c->fphists, &it, NULL));)
		sp_hist_free(((struct sp_fphist *)v)->hist);
	hmap_free(&c->fphists);
	hmap_free(&c->modules);
	free(c->events);
	free(c->spill_batch);
	while (c->nrings)
		ring_free(c, c->nrings - 1);
	free(c->rings);
	for (size_t i = 0; i < c->nstats; i++)
		statmap_free(&c->stats[i]);
	free(c->stats);
	for (size_t i = 0; i < c->nhdr; i++)
		munmap(c->hdr_pages[i], HDR_PAGE);
	free(c->hdr_pages);
	free(c->ring_buf);
	memset(c, 0, sizeof(*c));
}

static struct sp_proc *proc_get(struct sp_coll *c, uint32_t pid)
{
	int created;
	struct sp_proc *p = hmap_get(&c->procs, &pid, 1, &created);

	if (p && created)
		p->pid = pid;
	return p;
}

/* The parent of the process pid as we name it (/proc/PID/stat, field 4),
 * 0 when it cannot be read. */
static uint32_t proc_ppid(uint32_t pid)
{
	char buf[1024];
	const char *q = sp_proc_stat(pid, buf, sizeof(buf));
	unsigned ppid = 0;

	if (!q || sscanf(q + 1, " %*c %u", &ppid) != 1)
		return 0;
	return ppid;
}

/* The pid we know the one process by that knows itself by ns_pid, 0 when
 * none or more than one do. */
static uint32_t ns_parent(struct sp_coll *c, uint32_t ns_pid)
{
	const struct sp_proc *q;
	uint32_t found = 0;
	size_t it = 0, n = 0;

	while ((q = hmap_next(&c->procs, &it, NULL)))
		if (q->ns_pid == ns_pid) {
			found = q->pid;
			n++;
		}
	return n == 1 ? found : 0;
}

/* Fixed part of each known record type; 0 = unknown (skipped). */
static size_t fixed_len(uint16_t type)
{
	switch (type) {
	case SP_REC_HELLO: return sizeof(struct sp_rec_hello);
	case SP_REC_SQL: return sizeof(struct sp_rec_sql);
	case SP_REC_EXEC: return sizeof(struct sp_rec_exec);
	case SP_REC_STACK: return sizeof(struct sp_rec_stack);
	case SP_REC_MODULE: return sizeof(struct sp_rec_module);
	case SP_REC_ERROR: return sizeof(struct sp_rec_error);
	case SP_REC_BYE: return sizeof(struct sp_rec_bye);
	case SP_REC_PLAN: return sizeof(struct sp_rec_plan);
	case SP_REC_RING: return sizeof(struct sp_rec_ring);
	case SP_REC_STATS: return sizeof(struct sp_rec_stats);
	case SP_REC_STATS_COPY: return sizeof(struct sp_rec_stats_copy);
	case SP_REC_PYCODE: return sizeof(struct sp_rec_pycode);
	case SP_REC_PYINFO: return sizeof(struct sp_rec_pyinfo);
	case SP_REC_SCHEMA: return sizeof(struct sp_rec_schema);
	default: return 0;
	}
}

/* Variable part a record declares, to check against its length. */
static size_t var_len(uint16_t type, const uint8_t *p)
{
	switch (type) {
	case SP_REC_HELLO: {
		struct sp_rec_hello r;

		memcpy(&r, p, sizeof(r));
		return r.exe_len;
	}
	case SP_REC_SQL: {
		struct sp_rec_sql r;

		memcpy(&r, p, sizeof(r));
		return r.text_len > SP_SQL_MAX ? SIZE_MAX : r.text_len;
	}
	case SP_REC_STACK: {
		struct sp_rec_stack r;

		memcpy(&r, p, sizeof(r));
		return r.depth > SP_STACK_MAX ? SIZE_MAX : (size_t)r.depth * 8;
	}
	case SP_REC_MODULE: {
		struct sp_rec_module r;

		memcpy(&r, p, sizeof(r));
		return r.build_id_len > 64 ? SIZE_MAX : (size_t)r.build_id_len + r.path_len;
	}
	case SP_REC_ERROR: {
		struct sp_rec_error r;

		memcpy(&r, p, sizeof(r));
		return r.msg_len;
	}
	case SP_REC_PLAN: {
		struct sp_rec_plan r;

		memcpy(&r, p, sizeof(r));
		return r.text_len;
	}
	case SP_REC_STATS_COPY: {
		struct sp_rec_stats_copy r;

		memcpy(&r, p, sizeof(r));
		return r.len > SP_STATS_CHUNK || r.chunk >= SP_STATS_COPY_MAX_CHUNKS ? SIZE_MAX
										     : r.len;
	}
	case SP_REC_PYCODE: {
		struct sp_rec_pycode r;

		memcpy(&r, p, sizeof(r));
		return (size_t)r.name_len + r.qualname_len + r.file_len + r.table_len;
	}
	case SP_REC_PYINFO: {
		struct sp_rec_pyinfo r;

		memcpy(&r, p, sizeof(r));
		return r.text_len;
	}
	case SP_REC_SCHEMA: {
		struct sp_rec_schema r;

		memcpy(&r, p, sizeof(r));
		return r.text_len > SP_SCHEMA_MAX ? SIZE_MAX : r.text_len;
	}
	default: return 0;
	}
}

static int fail(struct sp_coll *c, const char *why, size_t off)
{
	snprintf(c->last_error, sizeof(c->last_error), "%s at byte %zu", why, off);
	c->bad_messages++;
	return -1;
}

static char *dup_n(const uint8_t *p, size_t n)
{
	char *s = malloc(n + 1);

	if (s) {
		memcpy(s, p, n);
		s[n] = 0;
		/* NULs inside would cut the text silently later; make them visible */
		for (size_t i = 0; i < n; i++)
			if (!s[i])
				s[i] = '?';
	}
	return s;
}

/* double -> u64 without undefined behaviour on hostile values */
static uint64_t clamp_u64(double d)
{
	if (!(d > 0))
		return 0;
	if (d >= 18446744073709549568.0)
		return UINT64_MAX;
	return (uint64_t)d;
}

static uint64_t to_ns(const struct sp_coll *c, const struct sp_proc *p, uint64_t v)
{
	if (p->clock == SP_CLOCK_TSC)
		return clamp_u64((double)v * c->ns_per_tick);
	return v;
}

static uint64_t to_mono(const struct sp_coll *c, const struct sp_proc *p, uint64_t t)
{
	if (p->clock == SP_CLOCK_TSC)
		return clamp_u64((double)p->mono_ref +
				 (double)(int64_t)(t - p->tsc_ref) * c->ns_per_tick);
	return t;
}

uint64_t *sp_qagg_runs(struct sp_qagg *q)
{
	if (!q->runs_by_len)
		q->runs_by_len = calloc(SP_RUN_BUCKETS, sizeof(uint64_t));
	return q->runs_by_len;
}

int sp_run_bucket(uint64_t len)
{
	return sp_run_len_bucket(len); /* the preload's own (sp_wire.h) */
}

void sp_run_bucket_bounds(int b, uint64_t *lo, uint64_t *hi)
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
static int spill_add(struct sp_coll *c, const struct sp_event *ev)
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

/* A sampled execution's event: its site and, up to the cap, the event
 * itself. Its totals are in the statistics like every other execution's:
 * nothing here adds to a query's count or time. */
static void apply_exec(struct sp_coll *c, struct sp_proc *p, const struct sp_rec_exec *x)
{
	uint64_t db = to_ns(c, p, x->db_time), nested = to_ns(c, p, x->nested_time);
	uint64_t self = db > nested ? db - nested : 0;
	struct sp_event ev;

	p->events++;
	{
		struct sp_sql *sq = hmap_get(&c->sqls, &x->sql_id, 0, NULL);

		if (sq)
			sq->last = ++c->text_clock;
	}
	if (x->params && (x->h.flags & SP_EXEC_RANDOM) && x->kind == SP_KIND_STMT) {
		uint64_t k[3] = { x->sql_id, p->pid, x->params };
		uint64_t *n = hmap_get(&c->dupvals, k, c->dupvals.count < SP_DUPVALS_MAX, NULL);
		struct sp_dup *d = hmap_get(&c->dups, &x->sql_id, 1, NULL);

		if (d) {
			d->samples++;
			if (n && (*n)++)
				d->repeats++;
			if (n && *n > d->top)
				d->top = *n;
		}
	}
	if (!x->stack_id)
		return;
	{
		struct skey sk = { x->sql_id, x->kind, p->pid, x->stack_id };
		struct sp_sagg *s = hmap_get(&c->sites, &sk, 1, NULL);

		if (s) {
			s->samples++;
			s->total_ns += db;
			if (x->h.flags & SP_EXEC_RANDOM) {
				s->random_samples++;
				s->random_ns += db;
			}
			s->rows += x->rows;
			s->vm_steps += x->vm_steps;
		}
	}
	memset(&ev, 0, sizeof(ev)); /* padding too: it may go to a file */
	ev.pid = p->pid;
	ev.tid = x->tid;
	ev.seq = x->seq;
	ev.parent_seq = x->parent_seq;
	ev.sql_id = x->sql_id;
	ev.stack_id = x->stack_id;
	ev.start_ns = to_mono(c, p, x->start);
	ev.wall_ns = to_ns(c, p, x->wall);
	ev.db_ns = db;
	ev.self_ns = self;
	ev.rows = x->rows;
	ev.vm_steps = x->vm_steps;
	ev.flags = x->h.flags;
	ev.rc = x->rc;
	ev.kind = x->kind;
	if (c->spill) {
		if (c->nspilled < c->events_max && spill_add(c, &ev) == 0)
			c->nspilled++;
		else
			c->events_dropped++;
	} else if (c->nevents < c->events_max) {
		if (SP_GROW(c->events, c->events_cap, c->nevents + 1, 1024) < 0) {
			c->events_dropped++;
			return;
		}
		c->events[c->nevents++] = ev;
	} else {
		c->events_dropped++;
	}
}

static void statmap_free(struct sp_statmap *m)
{
	if (m->copy)
		free(m->map);
	else
		munmap(m->map, m->size);
}

/* One chunk of the statistics of an image that could not share them:
 * kept in a copy of the memfd's layout, merged like a mapping. Ignored
 * when the image's memfd is mapped. */
static void stats_copy_apply(struct sp_coll *c, struct sp_proc *p,
			     const struct sp_rec_stats_copy *r)
{
	const uint8_t *data = (const uint8_t *)(r + 1);
	struct sp_statmap *m = NULL;
	size_t i, need = ((size_t)r->chunk + 1) * SP_STATS_CHUNK;

	for (i = 0; i < c->nstats; i++)
		if (c->stats[i].pid == p->pid && c->stats[i].image == p->image) {
			m = &c->stats[i];
			break;
		}
	if (m && !m->copy)
		return;
	if (!m && p->merged_image && p->merged_image >= p->image)
		return; /* merged already: not counted twice */
	if (!m) {
		if (SP_GROW(c->stats, c->stats_cap, c->nstats + 1, 16) < 0)
			return;
		m = &c->stats[c->nstats++];
		*m = (struct sp_statmap){
			.pid = p->pid, .image = p->image, .clock = p->clock, .copy = 1
		};
	}
	if (m->size < need) {
		uint8_t *nm;

		/* copies take at most 1 GiB over the recording: beyond, the
		 * chunk is refused (counted) rather than memory exhausted */
		if (c->copy_bytes + (need - m->size) > ((size_t)1 << 30) ||
		    !(nm = realloc(m->map, need))) {
			p->stats_bad++;
			return;
		}
		memset(nm + m->size, 0, need - m->size);
		c->copy_bytes += need - m->size;
		m->map = nm;
		m->size = need;
	}
	memcpy((uint8_t *)m->map + (size_t)r->chunk * SP_STATS_CHUNK, data, r->len);
	/* every chunk held so far is readable: those not sent are zero */
	((struct sp_stats_hdr *)m->map)->nchunks = (uint32_t)(m->size / SP_STATS_CHUNK);
	p->no_stats = 0;
}

/* Apply one validated record. rec is 8-aligned (copied by the caller). */
static void apply(struct sp_coll *c, struct sp_proc *p, const uint8_t *rec, uint16_t type)
{
	switch (type) {
	case SP_REC_HELLO: {
		const struct sp_rec_hello *h = (const void *)rec;

		/* in another pid namespace: the pid it knows itself by, for
		 * display (msg_check verified it) */
		p->ns_pid = h->pid != p->pid ? h->pid : 0;
		if (p->hello && (h->h.flags & SP_HELLO_RECONNECT)) {
			p->reconnects++;
			p->died = 0;
			break; /* same image: nothing else changes */
		}
		p->died = 0;
		p->image++;
		p->hello = 1;
		p->ppid = h->ppid;
		/* its parent as we name it, not as it does: from /proc, else
		 * (it is gone already) the one process that knows itself by
		 * the pid it gave, else 0 */
		if (p->ns_pid)
			p->ppid = proc_ppid(p->pid);
		if (p->ns_pid && !p->ppid && h->ppid)
			p->ppid = ns_parent(c, h->ppid);
		p->clock = h->clock == SP_CLOCK_TSC ? SP_CLOCK_TSC : SP_CLOCK_MONOTONIC;
		p->tsc_ref = h->tsc_ref;
		p->mono_ref = h->mono_ref_ns;
		p->sqlite_found |= (int)h->sqlite_found;
		p->bye = 0;
		if (h->h.flags & SP_HELLO_UNREPORTED)
			p->unreported = 1;
		if (p->exe && p->carried) {
			/* the row an earlier agent wrote: the same process */
			p->carried = 0;
		} else if (p->exe) {
			/* exec: the same pid runs a new program; keep its row */
			char *next = dup_n(rec + sizeof(*h), h->exe_len), *both = NULL;

			if (next && asprintf(&both, "%s -> %s", p->exe, next) >= 0) {
				free(p->exe);
				p->exe = both;
			}
			free(next);
		} else {
			p->exe = dup_n(rec + sizeof(*h), h->exe_len);
		}
		break;
	}
	case SP_REC_SQL: {
		const struct sp_rec_sql *r = (const void *)rec;
		int created;
		struct sp_sql *s = hmap_get(&c->sqls, &r->sql_id, 1, &created);

		if (s)
			s->last = ++c->text_clock;
		if (s && created) {
			s->text = dup_n(rec + sizeof(*r), r->text_len);
			s->full_len = r->full_len;
			s->truncated = (r->h.flags & SP_SQL_TRUNCATED) != 0;
			if (s->text) {
				char *fp = sp_fingerprint(s->text, strlen(s->text), &s->fp_id);

				free(fp);
			}
		}
		break;
	}
	case SP_REC_EXEC: {
		struct sp_rec_exec x;

		memcpy(&x, rec, sizeof(x));
		if (x.kind > SP_KIND_EXEC)
			x.kind = SP_KIND_STMT;
		x.sql_id = sp_coll_text_fold(c, x.sql_id); /* the agent's folds */
		apply_exec(c, p, &x);
		break;
	}
	case SP_REC_STACK: {
		const struct sp_rec_stack *r = (const void *)rec;
		struct stkey k = { p->pid, r->stack_id };
		int created;
		struct sp_stack *s = hmap_get(&c->stacks, &k, 1, &created);

		if (s && created) {
			s->generation = r->generation;
			s->image = p->image;
			s->pcs = malloc(sizeof(uint64_t) * (r->depth ? r->depth : 1));
			if (s->pcs) {
				memcpy(s->pcs, rec + sizeof(*r), sizeof(uint64_t) * r->depth);
				s->depth = r->depth;
			}
		}
		break;
	}
	case SP_REC_MODULE: {
		const struct sp_rec_module *r = (const void *)rec;
		struct mkey k = { p->pid, p->image, r->generation, r->lo };
		int created;
		struct sp_module *m = hmap_get(&c->modules, &k, 1, &created);

		if (m && created) {
			m->pid = p->pid;
			m->image = p->image;
			m->generation = r->generation;
			m->bias = r->bias;
			m->lo = r->lo;
			m->hi = r->hi;
			m->build_id_len = r->build_id_len;
			memcpy(m->build_id, rec + sizeof(*r), r->build_id_len);
			m->path = dup_n(rec + sizeof(*r) + r->build_id_len, r->path_len);
			m->dev = r->dev;
			m->ino = r->ino;
			m->size = r->size;
			m->mtime_ns = r->mtime_ns;
			m->found = r->ino != 0;
			m->replaced = (r->h.flags & SP_MODULE_REPLACED) != 0;
			m->sqlite = (r->h.flags & SP_MODULE_SQLITE)         ? 1
				    : (r->h.flags & SP_MODULE_SQLITE_MIXED) ? 2
									    : 0;
			m->embed = r->h.flags & (SP_MODULE_EMBED | SP_MODULE_EMBED_BLIND |
						 SP_MODULE_EMBED_STRIPPED | SP_MODULE_EMBED_CONFIG |
						 SP_MODULE_EMBED_NOTRACE | SP_MODULE_EMBED_LATE |
						 SP_MODULE_EMBED_OWNTRACE);
		}
		break;
	}
	case SP_REC_ERROR: {
		const struct sp_rec_error *r = (const void *)rec;
		const uint8_t *msg = rec + sizeof(*r);
		struct ekey k = { sp_coll_text_fold(c, r->sql_id), /* the agent's folds */
				  (uint64_t)(int64_t)r->rc,
				  p->pid,
				  r->stack_id,
				  sp_hash_bytes(msg, r->msg_len),
				  r->h.flags & SP_ERROR_EXEC ? SP_KIND_EXEC : SP_KIND_STMT };
		int created;
		struct sp_err *e = hmap_get(&c->errors, &k, 1, &created);

		if (e) {
			if (created)
				e->msg = dup_n(msg, r->msg_len);
			e->count++;
		}
		break;
	}
	case SP_REC_BYE: {
		const struct sp_rec_bye *r = (const void *)rec;

		p->bye = 1;
		p->died = 0; /* a BYE read from a file after its connection ended */
		/* its rings go when its connection closes (sp_coll_recv) */
		if (p->bye_image != p->image + 1)
			p->bye_base = p->bye_execs; /* this image's first BYE */
		p->bye_image = p->image + 1;
		p->bye_execs = p->bye_base + r->executions;
		p->untracked = r->untracked;
		if (r->lost > p->lost)
			p->lost = r->lost;
		break;
	}
	case SP_REC_PLAN: {
		const struct sp_rec_plan *r = (const void *)rec;
		const uint8_t *text = rec + sizeof(*r);
		int none = (r->h.flags & SP_PLAN_NONE) != 0;
		/* a reason is kept apart from a plan of the same bytes */
		uint64_t k[2] = { sp_coll_text_fold(c, r->sql_id), /* the agent's folds */
				  sp_hash_bytes(text, r->text_len) ^ (uint64_t)none };
		int created;
		struct sp_plan *pl;

		if (none && (r->h.flags & SP_PLAN_BOUND)) {
			/* once per process: its later queries have no plan */
			c->plans_bound++;
			if (!c->plans_bound_why)
				c->plans_bound_why = dup_n(text, r->text_len);
			break;
		}
		pl = hmap_get(&c->plans, k, 1, &created);
		if (pl) {
			if (created) {
				pl->text = dup_n(text, r->text_len);
				pl->none = none;
			}
			if (!pl->schema_id)
				pl->schema_id = r->schema_id;
			pl->connections++;
		}
		break;
	}
	case SP_REC_SCHEMA: {
		const struct sp_rec_schema *r = (const void *)rec;
		int created;
		struct sp_schema *sc =
			r->schema_id ? hmap_get(&c->schemas, &r->schema_id, 1, &created) : NULL;

		if (sc && created) {
			sc->file = (r->h.flags & SP_SCHEMA_FILE) != 0;
			sc->text = dup_n(rec + sizeof(*r), r->text_len);
		}
		break;
	}
	case SP_REC_STATS_COPY: stats_copy_apply(c, p, (const void *)rec); break;
	case SP_REC_PYCODE: {
		const struct sp_rec_pycode *r = (const void *)rec;
		const uint8_t *t = rec + sizeof(*r);
		uint64_t k[2] = { r->pid, r->code };
		int created;
		struct sp_pycode *pc = hmap_get(&c->pycodes, k, 1, &created);

		if (!pc || !created)
			break; /* sent once per number; a repeat changes nothing */
		pc->name = (char *)dup_n(t, r->name_len);
		pc->qualname =
			r->qualname_len ? (char *)dup_n(t + r->name_len, r->qualname_len) : NULL;
		pc->file = (char *)dup_n(t + r->name_len + r->qualname_len, r->file_len);
		pc->table_len = r->table_len;
		pc->table = r->table_len ? malloc(r->table_len) : NULL;
		if (pc->table)
			memcpy(pc->table, t + r->name_len + r->qualname_len + r->file_len,
			       r->table_len);
		else
			pc->table_len = 0;
		pc->firstlineno = r->firstlineno;
		pc->major = r->major;
		pc->minor = r->minor;
		pc->cut = (r->h.flags & SP_PYCODE_TABLE_CUT) != 0;
		break;
	}
	case SP_REC_PYINFO: {
		const struct sp_rec_pyinfo *r = (const void *)rec;
		size_t n = r->text_len < sizeof(c->py_version) - 1 ? r->text_len
								   : sizeof(c->py_version) - 1;

		if (r->status == SP_PY_UNSUPPORTED)
			c->py_unsupported++;
		else if (r->status == SP_PY_UNREADABLE)
			c->py_unreadable++;
		else
			break;
		if (!c->py_version[0]) {
			memcpy(c->py_version, rec + sizeof(*r), n);
			c->py_version[n] = 0;
			for (size_t i = 0; i < n; i++)
				if (c->py_version[i] == '\n' ||
				    (unsigned char)c->py_version[i] < 32)
					c->py_version[i] = ' ';
		}
		break;
	}
	default:
		break; /* RING and STATS (registered by sp_coll_input), PAD
			* and unknown types change nothing here */
	}
}

/* What the validation of a message found out, for sp_coll_input. */
struct msg_info {
	struct sp_msg_hdr mh;
	unsigned nring;            /* RING records */
	struct sp_rec_ring ring;   /* the last of them */
	unsigned nstats;           /* STATS records */
	struct sp_rec_stats stats; /* the last of them */
	int fresh_hello;           /* a HELLO not flagged SP_HELLO_RECONNECT */
	int bye;                   /* a BYE record */
	uint32_t bye_ino;          /* its stats_ino (0: none) */
};

/*
 * The pid a process in another pid namespace knows itself by (the last
 * of the NSpid line of /proc/PID/status, which names it in every
 * namespace from ours down to its own), 0 when it is in ours, -1 when
 * /proc has no such process (gone). World-readable: a process that
 * dropped its privileges still answers.
 */
static int64_t ns_pid_of(uint32_t pid)
{
	char path[64], buf[4096], *l, *end;
	unsigned long v, last = 0;
	ssize_t n;
	int fd, levels = 0;

	snprintf(path, sizeof(path), "/proc/%u/status", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT || errno == ESRCH ? -1 : 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return n < 0 && errno == ESRCH ? -1 : 0;
	buf[n] = 0;
	l = strstr(buf, "\nNSpid:");
	if (!l)
		return 0;
	for (l += 7; *l && *l != '\n'; l = end) {
		errno = 0;
		v = strtoul(l, &end, 10);
		if (end == l || errno || v == 0 || v > UINT32_MAX)
			break;
		last = v;
		levels++;
	}
	return levels >= 2 ? (uint32_t)last : 0;
}

/* Size of the aligned copy of one record (the largest fits a message). */
#define REC_BUF_WORDS ((SP_MSG_MAX + 7) / 8)

/*
 * Validate a whole message (header and every record) without changing
 * anything but the failure counters. rec_buf holds REC_BUF_WORDS words.
 * Returns 0 with *mi filled, or -1 (fail()).
 */
static int msg_check(struct sp_coll *c, const uint8_t *msg, size_t len, uint32_t peer_pid,
		     struct msg_info *mi, uint64_t *rec_buf)
{
	struct sp_msg_hdr mh;
	size_t off;

	memset(mi, 0, sizeof(*mi));
	if (len < sizeof(mh))
		return fail(c, "message shorter than its header", 0);
	memcpy(&mh, msg, sizeof(mh));
	if (mh.magic != SP_WIRE_MAGIC)
		return fail(c, "bad magic", 0);
	if (mh.version < SP_WIRE_MIN_VERSION || mh.version > SP_WIRE_VERSION)
		return fail(c, "unsupported stream version", 4);
	if (mh.len != len || len > SP_MSG_MAX + sizeof(mh))
		return fail(c, "message length mismatch", 12);
	if (peer_pid && mh.pid != peer_pid) {
		/* Only a peer in another pid namespace knows itself by another
		 * pid: the one the kernel names it by there (checked once per
		 * process). Its records are kept under peer_pid (the key) in
		 * any case. A peer already gone (a short-lived child whose
		 * messages we read late) cannot be checked: its claim only
		 * names its own row, unless that pid is known to us as a
		 * process of our namespace. */
		const struct sp_proc *p = hmap_get(&c->procs, &peer_pid, 0, NULL);
		int64_t ns;

		if (!(p && p->ns_pid == mh.pid) && (ns = ns_pid_of(peer_pid)) != (int64_t)mh.pid &&
		    (ns != -1 || (p && p->hello)))
			return fail(c, "pid does not match the connected peer", 8);
	}
	mi->mh = mh;
	for (off = sizeof(mh); off < len;) {
		struct sp_rec_hdr rh;
		size_t fl;

		if (len - off < sizeof(rh))
			return fail(c, "truncated record header", off);
		memcpy(&rh, msg + off, sizeof(rh));
		if (rh.len < sizeof(rh) || rh.len % 8 || rh.len > len - off)
			return fail(c, "bad record length", off);
		fl = fixed_len(rh.type);
		if (fl) {
			size_t vl;
			uint32_t rpid;

			if (rh.len < fl)
				return fail(c, "record shorter than its type", off);
			memcpy(rec_buf, msg + off, rh.len);
			vl = var_len(rh.type, (const uint8_t *)rec_buf);
			if (vl > rh.len - fl)
				return fail(c, "record payload overruns its length", off);
			memcpy(&rpid, (const uint8_t *)rec_buf + sizeof(rh), sizeof(rpid));
			if (rpid != mh.pid)
				return fail(c, "record pid differs from message pid", off);
			if (rh.type == SP_REC_RING) {
				mi->nring++;
				memcpy(&mi->ring, rec_buf, sizeof(mi->ring));
			} else if (rh.type == SP_REC_STATS) {
				mi->nstats++;
				memcpy(&mi->stats, rec_buf, sizeof(mi->stats));
			} else if (rh.type == SP_REC_HELLO && !(rh.flags & SP_HELLO_RECONNECT)) {
				mi->fresh_hello = 1;
			} else if (rh.type == SP_REC_BYE) {
				mi->bye = 1;
				mi->bye_ino = ((const struct sp_rec_bye *)(const void *)rec_buf)
						      ->stats_ino;
			}
		}
		off += rh.len;
	}
	return 0;
}

/*
 * Apply a message msg_check accepted. A message synthesized from a ring
 * (from_ring) is not a message of the connection: it does not count in
 * the message totals and carries no sequence number or loss count. The
 * records go to the process key (the pid we know it by: sp_coll_input),
 * whatever pid they carry (checked: the header's).
 * Returns 0, or -1 when the process entry cannot be allocated (nothing
 * applied).
 */
static int msg_apply(struct sp_coll *c, const uint8_t *msg, size_t len, const struct sp_msg_hdr *mh,
		     uint32_t key, int from_ring, uint64_t *rec_buf)
{
	struct sp_proc *p = proc_get(c, key);
	size_t off;

	if (!p)
		return fail(c, "out of memory", 0);
	if (!from_ring) {
		p->msgs++;
		if (mh->lost > p->lost)
			p->lost = mh->lost;
		if (p->last_seq && mh->seq > p->last_seq + 1)
			p->gaps += mh->seq - p->last_seq - 1;
		if (mh->seq > p->last_seq)
			p->last_seq = mh->seq;
	}
	for (off = sizeof(*mh); off < len;) {
		struct sp_rec_hdr rh;

		memcpy(&rh, msg + off, sizeof(rh));
		if (fixed_len(rh.type)) {
			memcpy(rec_buf, msg + off, rh.len);
			apply(c, p, (const uint8_t *)rec_buf, rh.type);
			c->records++;
		}
		off += rh.len;
	}
	if (!from_ring)
		c->messages++;
	return 0;
}

int sp_coll_message(struct sp_coll *c, const uint8_t *msg, size_t len, uint32_t peer_pid)
{
	return sp_coll_input(c, msg, len, peer_pid, -1);
}

/* ---- rings ------------------------------------------------------------------- */

/* Largest ring the collector maps. */
#define RING_MAX_SIZE (1u << 30)

/* Like fail(), with a formatted reason (no byte offset). */
static int failf(struct sp_coll *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int failf(struct sp_coll *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->last_error, sizeof(c->last_error), fmt, ap);
	va_end(ap);
	c->bad_messages++;
	return -1;
}

static int ring_size_ok(uint32_t size)
{
	return size >= 4096 && size <= RING_MAX_SIZE && !(size & (size - 1));
}

/* Check the shared header of a mapped ring against its announcement.
 * Returns 0 with the writer's tail in *tail, or -1 (failf()). */
static int ring_check(struct sp_coll *c, const struct sp_ring_shared *sh, size_t map_len,
		      const struct sp_rec_ring *rec, uint32_t *tail)
{
	/* The writer may change these at any time: read each once. */
	uint32_t magic = __atomic_load_n(&sh->magic, __ATOMIC_RELAXED);
	uint32_t size = __atomic_load_n(&sh->size, __ATOMIC_RELAXED);
	uint32_t pid = __atomic_load_n(&sh->pid, __ATOMIC_RELAXED);
	uint32_t tid = __atomic_load_n(&sh->tid, __ATOMIC_RELAXED);

	if (!ring_size_ok(rec->size))
		return failf(c, "ring size %u is not a power of two from 4096 to %u", rec->size,
			     RING_MAX_SIZE);
	if (map_len < sizeof(*sh) + (size_t)rec->size)
		return failf(c, "ring mapping of %zu bytes is smaller than its size %u", map_len,
			     rec->size);
	if (magic != SP_RING_MAGIC)
		return failf(c, "bad ring magic 0x%08x", magic);
	if (size != rec->size || pid != rec->pid || tid != rec->tid)
		return failf(c,
			     "ring header (size %u, pid %u, tid %u) differs from its RING record "
			     "(size %u, pid %u, tid %u)",
			     size, pid, tid, rec->size, rec->pid, rec->tid);
	*tail = __atomic_load_n(&sh->tail, __ATOMIC_ACQUIRE);
	if (*tail % 8)
		return failf(c, "ring tail %u is not a multiple of 8", *tail);
	return 0;
}

/* Put a checked mapping into the registry. Returns 0, or -1 (unmapped). */
static int ring_register(struct sp_coll *c, void *map, size_t map_len,
			 const struct sp_rec_ring *rec, uint32_t key, uint32_t tail)
{
	struct sp_proc *p = hmap_get(&c->procs, &key, 0, NULL);
	struct sp_ring *r;

	if (SP_GROW(c->rings, c->rings_cap, c->nrings + 1, 16) < 0)
		goto nomem;
	r = calloc(1, sizeof(*r));
	if (!r)
		goto nomem;
	r->sh = map;
	r->map_len = map_len;
	r->pid = key;
	r->rpid = rec->pid;
	r->tid = rec->tid;
	r->size = rec->size;
	r->tail = tail;
	r->image = p ? p->image : 0;
	c->rings[c->nrings++] = r;
	c->rings_opened++;
	return 0;
nomem:
	munmap(map, map_len);
	return failf(c, "out of memory for a ring");
}

int sp_coll_ring_add(struct sp_coll *c, void *map, size_t map_len, const struct sp_rec_ring *rec)
{
	uint32_t tail;

	if (ring_check(c, map, map_len, rec, &tail) < 0) {
		munmap(map, map_len);
		return -1;
	}
	return ring_register(c, map, map_len, rec, rec->pid, tail);
}

/*
 * Map the memfd fd of the ring rec announces and check it. fd is closed
 * in every case. Returns 0 with the mapping in *map (*map_len bytes) and
 * the writer's tail in *tail, or -1 (failf(), nothing mapped).
 */
static int ring_map(struct sp_coll *c, int fd, const struct sp_rec_ring *rec, void **map,
		    size_t *map_len, uint32_t *tail)
{
	size_t need = sizeof(struct sp_ring_shared) + (size_t)rec->size;
	struct stat st;
	struct statfs sfs;
	int seals;
	void *m;

	*map = NULL;
	if (!ring_size_ok(rec->size)) {
		close(fd);
		return failf(c, "ring size %u is not a power of two from 4096 to %u", rec->size,
			     RING_MAX_SIZE);
	}
	/* Only a memfd (shmem) knows seals: a file, pipe or socket is refused. */
	seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0) {
		close(fd);
		return failf(c, "ring descriptor is not a memfd");
	}
	/* A writer that shrank the memfd under our mapping would make our
	 * reads fault (SIGBUS). Seal it against shrinking when the writer
	 * allows sealing (MFD_ALLOW_SEALING); otherwise we have to rely on
	 * it not doing so. */
	if (!(seals & F_SEAL_SHRINK))
		(void)fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK);
	seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0 || !(seals & F_SEAL_SHRINK)) {
		/* it could be shrunk under our reads: refused */
		close(fd);
		return failf(c, "ring memfd cannot be sealed against shrinking "
				"(made without MFD_ALLOW_SEALING?)");
	}
	/* shmem only: a hugetlbfs memfd can fault on a punched hole */
	if (fstatfs(fd, &sfs) < 0 || sfs.f_type != TMPFS_MAGIC) {
		close(fd);
		return failf(c, "ring descriptor is not a shmem memfd");
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return failf(c, "ring descriptor is not a memfd");
	}
	if (st.st_size < 0 || (uint64_t)st.st_size < need) {
		close(fd);
		return failf(c, "ring memfd of %lld bytes is smaller than %zu",
			     (long long)st.st_size, need);
	}
	m = mmap(NULL, need, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		return failf(c, "cannot map the ring: %s", strerror(errno));
	if (ring_check(c, m, need, rec, tail) < 0) {
		munmap(m, need);
		return -1;
	}
	*map = m;
	*map_len = need;
	return 0;
}

static void ring_free(struct sp_coll *c, size_t i)
{
	struct sp_ring *r = c->rings[i];

	munmap(r->sh, r->map_len);
	free(r);
	c->rings[i] = c->rings[--c->nrings];
}

/* The ring cannot be read any further: count, say so once, return -1.
 * counted: c->bad_messages was counted already (by fail()). */
static int ring_broken(struct sp_coll *c, struct sp_ring *r, int counted, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int ring_broken(struct sp_coll *c, struct sp_ring *r, int counted, const char *fmt, ...)
{
	struct sp_proc *p = proc_get(c, r->pid);
	char why[sizeof(c->last_error)];
	va_list ap;

	if (r->broken)
		return -1;
	r->broken = 1;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	snprintf(c->last_error, sizeof(c->last_error), "ring of pid %u thread %u: %.200s", r->pid,
		 r->tid, why);
	if (!counted)
		c->bad_messages++;
	if (p)
		p->bad_msgs++;
	c->rings_broken++;
	if (c->diag)
		fprintf(c->diag, "\nsqlprof: stopped reading a ring: %s\n", c->last_error);
	return -1;
}

/* Validate and apply clen bytes of records in c->ring_buf, read from r
 * at ring position from. Returns 0 or -1 (ring_broken()). */
static int ring_chunk(struct sp_coll *c, struct sp_ring *r, size_t clen, uint32_t from)
{
	uint64_t rec_buf[REC_BUF_WORDS];
	struct sp_proc *p = hmap_get(&c->procs, &r->pid, 0, NULL);
	struct sp_msg_hdr mh = {
		.magic = SP_WIRE_MAGIC,
		.version = SP_WIRE_VERSION,
		.pid = r->rpid,
		.len = (uint32_t)(sizeof(mh) + clen),
		.seq = 0,
		.lost = p ? p->lost : 0,
	};
	struct msg_info mi;

	memcpy(c->ring_buf, &mh, sizeof(mh));
	if (msg_check(c, c->ring_buf, sizeof(mh) + clen, 0, &mi, rec_buf) < 0)
		return ring_broken(c, r, 1, "%s of the records from position %u", c->last_error,
				   from);
	if (mi.nring || mi.nstats)
		return ring_broken(c, r, 0, "a %s record inside a ring (from position %u)",
				   mi.nring ? "RING" : "STATS", from);
	if (msg_apply(c, c->ring_buf, sizeof(mh) + clen, &mh, r->pid, 1, rec_buf) < 0)
		return ring_broken(c, r, 1, "%s", c->last_error);
	return 0;
}

int sp_coll_ring_drain(struct sp_coll *c, struct sp_ring *r)
{
	const uint32_t mask = r->size - 1;
	/* dead before head: the writer stores dead after its last head */
	uint32_t dead = __atomic_load_n(&r->sh->dead, __ATOMIC_ACQUIRE);
	uint32_t head = __atomic_load_n(&r->sh->head, __ATOMIC_ACQUIRE);
	uint32_t pos = r->tail, from = pos;
	size_t clen = 0;
	uint8_t *body;
	char why[128] = "";

	if (r->broken)
		return -1;
	if (head - pos > r->size)
		return ring_broken(c, r, 0, "head - tail = %u exceeds the ring size %u", head - pos,
				   r->size);
	if (head % 8)
		return ring_broken(c, r, 0, "head %u is not a multiple of 8", head);
	if (head == pos)
		return dead ? 1 : 0;
	if (!c->ring_buf) {
		c->ring_buf = malloc(sizeof(struct sp_msg_hdr) + SP_MSG_MAX);
		if (!c->ring_buf)
			return 0; /* read it later */
	}
	body = c->ring_buf + sizeof(struct sp_msg_hdr);
	/* Whole records only, each copied out of the shared memory before
	 * it is looked at again: the copy is what gets validated. */
	while (pos != head) {
		uint32_t off = pos & mask, left = head - pos;
		struct sp_rec_hdr rh;

		memcpy(&rh, r->sh->data + off, sizeof(rh)); /* left >= 8: both multiples of 8 */
		if (rh.len < sizeof(rh) || rh.len % 8 || rh.len > left) {
			snprintf(why, sizeof(why), "bad record length %u at position %u", rh.len,
				 pos);
			break;
		}
		if (rh.len > r->size - off) {
			snprintf(why, sizeof(why),
				 "record of %u bytes at position %u crosses the end "
				 "of the ring",
				 rh.len, pos);
			break;
		}
		if (rh.type != SP_REC_PAD) {
			if (rh.len > SP_MSG_MAX) {
				snprintf(why, sizeof(why),
					 "record of %u bytes at position %u is longer "
					 "than a message",
					 rh.len, pos);
				break;
			}
			if (clen + rh.len > SP_MSG_MAX) {
				if (ring_chunk(c, r, clen, from) < 0)
					return -1;
				clen = 0;
				from = pos;
			}
			memcpy(body + clen, r->sh->data + off, rh.len);
			/* the length checked above, whatever the writer did since */
			memcpy(body + clen, &rh, sizeof(rh));
			clen += rh.len;
		}
		pos += rh.len;
	}
	/* the whole records before a broken one still count */
	if (clen && ring_chunk(c, r, clen, from) < 0)
		return -1;
	if (why[0])
		return ring_broken(c, r, 0, "%s", why);
	r->tail = head;
	__atomic_store_n(&r->sh->tail, head, __ATOMIC_RELEASE);
	return dead ? 1 : 0;
}

uint64_t sp_coll_rings_drain(struct sp_coll *c, uint32_t pid)
{
	uint64_t before = c->records;
	size_t i = 0;

	while (i < c->nrings) {
		if ((pid && c->rings[i]->pid != pid) || sp_coll_ring_drain(c, c->rings[i]) == 0)
			i++;
		else
			ring_free(c, i); /* the last one moved to i */
	}
	return c->records - before;
}

/* Read the rings of pid's images up to image one last time and free them:
 * the image said BYE, or a later image said HELLO. */
static void rings_retire(struct sp_coll *c, uint32_t pid, uint32_t image)
{
	size_t i = 0;

	while (i < c->nrings) {
		struct sp_ring *r = c->rings[i];

		if (r->pid != pid || r->image > image) {
			i++;
			continue;
		}
		(void)sp_coll_ring_drain(c, r);
		ring_free(c, i);
	}
}

void sp_coll_proc_gone(struct sp_coll *c, uint32_t pid)
{
	struct sp_proc *p = hmap_get(&c->procs, &pid, 0, NULL);

	if (!p)
		return;
	rings_retire(c, pid, p->image);
	sp_coll_stats_retire(c, pid, p->image);
}

void sp_coll_rings_close(struct sp_coll *c)
{
	while (c->nrings) {
		(void)sp_coll_ring_drain(c, c->rings[c->nrings - 1]);
		ring_free(c, c->nrings - 1);
	}
}

/*
 * The process a message read from a file (no peer: a BYE file, an
 * unreported image's file) belongs to. Its pid is the one the process
 * knows itself by: in another pid namespace, not the one we know it by.
 * A BYE names its image's statistics (the memfd's inode, low 32 bits):
 * the process that shared them and knows itself by that pid; else the
 * process of ours with that pid; else the one process that knows itself
 * by it; else the pid as it is.
 */
static uint32_t file_key(struct sp_coll *c, const struct msg_info *mi)
{
	uint32_t pid = mi->mh.pid, found;
	const struct sp_proc *p = hmap_get(&c->procs, &pid, 0, NULL), *q;
	size_t it = 0;

	if (mi->bye_ino) {
		while ((q = hmap_next(&c->procs, &it, NULL)))
			if (q->stats_ino == mi->bye_ino && (q->ns_pid ? q->ns_pid : q->pid) == pid)
				return q->pid;
	}
	if (p && !p->ns_pid)
		return pid;
	found = ns_parent(c, pid);
	return found ? found : pid;
}

int sp_coll_input(struct sp_coll *c, const uint8_t *msg, size_t len, uint32_t peer_pid, int fd)
{
	uint64_t rec_buf[REC_BUF_WORDS];
	struct msg_info mi;
	struct sp_proc *p;
	void *map = NULL;
	size_t map_len = 0;
	uint32_t tail = 0, pid;

	if (msg_check(c, msg, len, peer_pid, &mi, rec_buf) < 0)
		goto bad;
	pid = peer_pid ? peer_pid : file_key(c, &mi);
	if (fd >= 0 && mi.nring + mi.nstats != 1) {
		failf(c,
		      mi.nring + mi.nstats ? "%u RING and STATS records with one descriptor"
					   : "a descriptor without a RING or STATS record",
		      mi.nring + mi.nstats);
		goto bad;
	}
	if (fd < 0 && (mi.nring || mi.nstats) && c->fd_missing) {
		/* the kernel could not hand it to us (out of descriptors): the
		 * message without it, its loss counted (a HELLO's process gets
		 * its row, without its totals) */
		if (mi.nstats)
			c->stats_lost++;
		else
			c->rings_lost++;
		mi.nring = 0;
	} else if (fd < 0 && (mi.nring || mi.nstats)) {
		failf(c, "a %s record without its descriptor", mi.nring ? "RING" : "STATS");
		goto bad;
	}
	if (fd >= 0 && mi.nring) {
		int rc = ring_map(c, fd, &mi.ring, &map, &map_len, &tail);

		fd = -1; /* closed by ring_map */
		if (rc < 0)
			goto bad;
	}
	/* A new image of a pid we know (exec): the old image's rings are
	 * read, and its statistics merged, under the old image's clock,
	 * before its HELLO changes it. */
	p = hmap_get(&c->procs, &pid, 0, NULL);
	if (mi.fresh_hello && p && p->hello) {
		if (c->nrings)
			rings_retire(c, pid, p->image);
		sp_coll_stats_retire(c, pid, p->image);
	}
	if (msg_apply(c, msg, len, &mi.mh, pid, 0, rec_buf) < 0)
		goto bad;
	if (map && ring_register(c, map, map_len, &mi.ring, pid, tail) < 0)
		return -1; /* the message itself was applied */
	if (fd >= 0) {
		/* STATS: the message is applied; a mapping that fails is
		 * counted and said, the process keeps its row */
		int rc = sp_coll_stats_add(c, pid, fd, &mi.stats);

		fd = -1;
		if (rc < 0)
			return -1;
	} else if (mi.fresh_hello) {
		p = hmap_get(&c->procs, &pid, 0, NULL);
		if (p)
			p->no_stats = 1; /* its totals cannot reach us */
	}
	p = hmap_get(&c->procs, &pid, 0, NULL);
	if (mi.bye && p) {
		/* Read them, but keep them: other threads, and library
		 * destructors that run after ours, can still write until the
		 * process is gone (or a failed exec goes on). The connection's
		 * end frees them (sp_coll_recv). */
		sp_coll_rings_drain(c, pid);
	} else if (mi.mh.flags & SP_MSG_WAKE) {
		sp_coll_rings_drain(c, pid);
	}
	return 0;
bad:
	if (fd >= 0)
		close(fd);
	if (map)
		munmap(map, map_len);
	return -1;
}

/* ---- shared statistics ------------------------------------------------------- */

int sp_coll_stats_add(struct sp_coll *c, uint32_t pid, int fd, const struct sp_rec_stats *rec)
{
	struct sp_proc *p = hmap_get(&c->procs, &pid, 0, NULL);
	struct sp_stats_hdr h;
	struct stat st;
	struct statfs sfs;
	int seals;
	void *m;
	size_t i;

	if (!p || !p->hello) {
		close(fd);
		return failf(c, "statistics of pid %u before its HELLO", pid);
	}
	for (i = 0; i < c->nstats; i++) {
		if (c->stats[i].pid == pid && c->stats[i].image == p->image) {
			close(fd); /* sent again (a reconnect): we have it */
			return 0;
		}
	}
	if (p->merged_image && p->merged_image >= p->image) {
		/* merged already (its BYE, then the end of its connection):
		 * counting it again would count it twice */
		close(fd);
		return 0;
	}
	seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0 || !(seals & F_SEAL_SHRINK)) {
		close(fd);
		p->no_stats = 1;
		return failf(c, "statistics of pid %u: not a memfd sealed against shrinking", pid);
	}
	if (fstatfs(fd, &sfs) < 0 || sfs.f_type != TMPFS_MAGIC || fstat(fd, &st) < 0 ||
	    !S_ISREG(st.st_mode) || st.st_size < (off_t)SP_STATS_CHUNK ||
	    (uint64_t)st.st_size > SP_STATS_MAX_SIZE || (uint64_t)st.st_size != rec->size) {
		close(fd);
		p->no_stats = 1;
		return failf(c, "statistics of pid %u: not a shmem memfd of %llu bytes", pid,
			     (unsigned long long)rec->size);
	}
	m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (m == MAP_FAILED) {
		p->no_stats = 1;
		c->stats_lost++; /* its totals: counted, said in the profile */
		return failf(c, "cannot map the statistics of pid %u: %s", pid, strerror(errno));
	}
	memcpy(&h, m, sizeof(h));
	if (h.magic != SP_STATS_MAGIC || h.chunk_size != SP_STATS_CHUNK || h.size != rec->size) {
		munmap(m, (size_t)st.st_size);
		p->no_stats = 1;
		return failf(c, "statistics of pid %u: bad header", pid);
	}
	if (SP_GROW(c->stats, c->stats_cap, c->nstats + 1, 16) < 0) {
		munmap(m, (size_t)st.st_size);
		return failf(c, "out of memory for statistics");
	}
	c->stats[c->nstats++] = (struct sp_statmap){ .map = m,
						     .size = (size_t)st.st_size,
						     .pid = pid,
						     .image = p->image,
						     .clock = p->clock,
						     .ino = (uint64_t)st.st_ino };
	p->no_stats = 0;
	p->stats_ino = (uint32_t)st.st_ino;
	if (c->stats_added)
		c->stats_added(c, pid, (uint64_t)st.st_ino);
	return 0;
}

/* The offset in [0, size) of a writer's address, when it names a whole
 * record of type type and len bytes inside a published part of a chunk;
 * else SIZE_MAX. used[]: each chunk's published length, as read. */
static size_t stats_ref(uint64_t addr, uint64_t base, const uint32_t *used, uint32_t nchunks,
			size_t len)
{
	uint64_t off = addr - base, ci, in;

	if (!addr || addr < base || off % 8)
		return SIZE_MAX;
	ci = off / SP_STATS_CHUNK;
	in = off % SP_STATS_CHUNK;
	if (ci == 0 || ci >= nchunks || in < sizeof(struct sp_stats_chunk) || in + len > used[ci])
		return SIZE_MAX;
	return (size_t)off;
}

/* Copy a referenced record out, checking its header. 0 or -1. */
static int stats_get(const uint8_t *map, size_t off, uint16_t type, void *out, size_t len)
{
	struct sp_rec_hdr h;

	if (off == SIZE_MAX)
		return -1;
	memcpy(&h, map + off, sizeof(h));
	if (h.type != type || h.len != len)
		return -1;
	memcpy(out, map + off, len);
	return 0;
}

/* A QUERY record copied out whole: its counter segment's transaction
 * count (seg_gen) the same before and after the copy, or the last of a
 * few tries (a writer that keeps moving it; any copy is then one of its
 * states but perhaps for a lane). */
static void copy_query(const uint8_t *p, struct sp_agg_query *a)
{
	const uint64_t *gen =
		(const uint64_t *)(const void *)(p + offsetof(struct sp_agg_query, seg_gen));
	int tries;

	for (tries = 0; tries < 8; tries++) {
		uint64_t g = __atomic_load_n(gen, __ATOMIC_ACQUIRE);

		memcpy(a, p, sizeof(*a));
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(gen, __ATOMIC_ACQUIRE) == g)
			return;
	}
}

static uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a + b < a ? UINT64_MAX : a + b;
}

/* What the image was running when its statistics were merged (started
 * holds sql_id -> executions started - ended): for a process that died,
 * the statements it died in. */
static void note_running(struct sp_proc *p, const struct hmap *started)
{
	size_t it = 0;
	const uint64_t *id;
	uint32_t *d;

	p->nrunning = 0;
	while ((d = hmap_next(started, &it, (const void **)&id)))
		if (*d && *d < (1u << 31)) {
			if (p->nrunning < SP_PROC_RUNNING)
				p->running[p->nrunning] = *id;
			p->nrunning++;
		}
}

/* With c->stats_drop (map is a shared mapping of the memfd), this process
 * lets go of the pages (MADV_DONTNEED) as the chunks are merged: read
 * whole, the mapping of 400,000 texts' statistics (512 MB) was in the
 * collector's resident memory on top of the queries it grew into (peak
 * 1.24 GB for 200,000 fingerprints; with this, 944 MB). The data stays in
 * the memfd: a record that refers to a chunk let go of reads it again. */
void sp_coll_stats_merge(struct sp_coll *c, uint32_t pid, const void *mapv, size_t size, int clock)
{
	const uint8_t *map = mapv;
	struct sp_proc *p = proc_get(c, pid);
	struct sp_proc conv;
	struct sp_stats_hdr h;
	uint32_t *used = NULL, nchunks, ci, dropped = 1;
	int drop = c->stats_drop;
	struct hmap started; /* sql_id -> executions started - ended (mod 2^32) */

	if (!p || size < SP_STATS_CHUNK)
		return;
	hmap_init(&started, sizeof(uint64_t), sizeof(uint32_t));
	memset(&conv, 0, sizeof(conv));
	conv.clock = clock;
	memcpy(&h, map, sizeof(h));
	nchunks = __atomic_load_n(&((const struct sp_stats_hdr *)mapv)->nchunks, __ATOMIC_ACQUIRE);
	if (h.magic != SP_STATS_MAGIC || nchunks > size / SP_STATS_CHUNK) {
		p->stats_bad++;
		return;
	}
	p->unattributed += h.unattributed;
	if (h.foreign_libs > p->foreign_libs)
		p->foreign_libs = h.foreign_libs;
	if (h.deepbind_late > p->deepbind_late)
		p->deepbind_late = h.deepbind_late;
	if (h.clamped > p->clamped)
		p->clamped = h.clamped;
	if (h.texts_folded > p->texts_folded)
		p->texts_folded = h.texts_folded;
	p->seen |= h.seen;
	p->execs += h.unattributed;
	if (h.unattributed) {
		/* counted, under a query of their own: the totals add up */
		struct qkey uk = { SP_SQL_UNATTRIBUTED, SP_KIND_STMT };
		struct sp_qagg *uq = hmap_get(&c->queries, &uk, 1, NULL);
		uint64_t id = SP_SQL_UNATTRIBUTED;
		int created;
		struct sp_sql *us = hmap_get(&c->sqls, &id, 1, &created);

		if (uq)
			uq->count = sat_add(uq->count, h.unattributed);
		if (us && created) {
			us->text = dup_n((const uint8_t *)SP_SQL_UNATTRIBUTED_TEXT,
					 sizeof(SP_SQL_UNATTRIBUTED_TEXT) - 1);
			us->full_len = sizeof(SP_SQL_UNATTRIBUTED_TEXT) - 1;
		}
	}
	used = calloc(nchunks ? nchunks : 1, sizeof(*used));
	if (!used)
		return;
	/* each chunk's published length, read once */
	for (ci = 1; ci < nchunks; ci++) {
		const struct sp_stats_chunk *ch = (const void *)(map + (size_t)ci * SP_STATS_CHUNK);
		uint32_t u = __atomic_load_n(&ch->used, __ATOMIC_ACQUIRE);

		if (ch->magic != SP_CHUNK_MAGIC || u < sizeof(*ch) || u > SP_STATS_CHUNK || u % 8) {
			if (ch->magic || u)
				p->stats_bad++;
			u = 0;
		}
		used[ci] = u;
	}
	for (ci = 1; ci < nchunks; ci++) {
		const uint8_t *cb = map + (size_t)ci * SP_STATS_CHUNK;
		size_t off = sizeof(struct sp_stats_chunk);

		while (used[ci] && off + sizeof(struct sp_rec_hdr) <= used[ci]) {
			struct sp_rec_hdr rh;

			memcpy(&rh, cb + off, sizeof(rh));
			if (rh.len < sizeof(rh) || rh.len % 8 || rh.len > used[ci] - off) {
				p->stats_bad++;
				break;
			}
			if (rh.type == SP_AGG_QUERY && rh.len == sizeof(struct sp_agg_query)) {
				struct sp_agg_query a;
				struct qkey qk;
				struct sp_qagg *q;
				uint64_t db_ns, counters[4];
				uint32_t b;

				copy_query(cb + off, &a);
				a.sql_id = sp_coll_text_fold(c, a.sql_id); /* the agent's folds */
				sp_agg_counters(&a, counters);
				if (a.kind == SP_KIND_STMT && a.started != (uint32_t)a.count) {
					uint32_t *d = hmap_get(&started, &a.sql_id, 1, NULL);

					if (d)
						*d += a.started - (uint32_t)a.count;
				}
				if (a.sql_id == SP_SQL_FOLDED && !a.count && !a.prepares)
					goto next; /* every arena has one: only used ones show */
				if (a.sql_id == SP_SQL_FOLDED) {
					uint64_t id = SP_SQL_FOLDED;
					int created;
					struct sp_sql *fs = hmap_get(&c->sqls, &id, 1, &created);

					if (fs && created) {
						fs->text =
							dup_n((const uint8_t *)SP_SQL_FOLDED_TEXT,
							      sizeof(SP_SQL_FOLDED_TEXT) - 1);
						fs->full_len = sizeof(SP_SQL_FOLDED_TEXT) - 1;
					}
				}
				qk.sql_id = a.sql_id;
				qk.kind = a.kind > SP_KIND_EXEC ? SP_KIND_STMT : a.kind;
				q = hmap_get(&c->queries, &qk, 1, NULL);
				if (!q)
					goto next;
				db_ns = to_ns(c, &conv, a.db);
				p->execs += a.count;
				if (a.caller && a.count && a.kind == SP_KIND_STMT) {
					uint64_t ck[4] = { a.sql_id, SP_KIND_STMT, pid, a.caller };
					struct sp_caller *cr = hmap_get(&c->callers, ck, 1, NULL);

					if (cr) {
						cr->count = sat_add(cr->count, a.count);
						cr->total_ns = sat_add(cr->total_ns, db_ns);
					}
				}
				if (a.count && (!q->count || to_ns(c, &conv, a.min) < q->min_ns))
					q->min_ns = to_ns(c, &conv, a.min);
				if (a.count && to_ns(c, &conv, a.max) > q->max_ns)
					q->max_ns = to_ns(c, &conv, a.max);
				q->count = sat_add(q->count, a.count);
				q->total_ns = sat_add(q->total_ns, db_ns);
				{
					uint64_t nested_ns = to_ns(c, &conv, a.nested_time);

					q->self_ns =
						sat_add(q->self_ns,
							db_ns > nested_ns ? db_ns - nested_ns : 0);
				}
				q->wall_ns = sat_add(q->wall_ns, to_ns(c, &conv, a.wall));
				q->rows = sat_add(q->rows, a.rows);
				q->fullscan_steps = sat_add(q->fullscan_steps, counters[0]);
				q->sorts = sat_add(q->sorts, counters[1]);
				q->autoindex = sat_add(q->autoindex, counters[2]);
				q->vm_steps = sat_add(q->vm_steps, counters[3]);
				q->errors = sat_add(q->errors, a.errors);
				q->nested = sat_add(q->nested, a.nested);
				q->samples = sat_add(q->samples, a.samples);
				q->prepares = sat_add(q->prepares, a.prepares);
				q->prepare_ns =
					sat_add(q->prepare_ns, to_ns(c, &conv, a.prepare_time));
				q->runs = sat_add(q->runs, a.runs);
				if (a.max_run > q->max_run)
					q->max_run = a.max_run;
				/* a run closed: one of 1 at least (the preload's inline
				 * close of a run of 1 stores no max_run) */
				if (a.runs && !q->max_run)
					q->max_run = 1;
				if (a.runs && sp_qagg_runs(q)) {
					struct sp_agg_runs rl;
					uint64_t longer = 0;

					if (stats_get(map,
						      stats_ref(a.runs_by_len, h.base, used,
								nchunks, sizeof(rl)),
						      SP_AGG_RUNS, &rl, sizeof(rl)) == 0) {
						for (b = 1;
						     b < SP_AGG_RUN_BUCKETS && b < SP_RUN_BUCKETS;
						     b++) {
							q->runs_by_len[b] = sat_add(
								q->runs_by_len[b], rl.by_len[b]);
							longer = sat_add(longer, rl.by_len[b]);
						}
					} else if (a.runs_by_len) {
						p->stats_bad++;
					}
					q->runs_by_len[0] =
						sat_add(q->runs_by_len[0],
							a.runs > longer ? a.runs - longer : 0);
				}
				/* the thread's open N+1 run, when it is credited
				 * here: it ends with the image */
				if (a.run_open) {
					q->runs = sat_add(q->runs, 1);
					if (a.run_open > q->max_run)
						q->max_run = a.run_open;
					if (sp_qagg_runs(q))
						q->runs_by_len[sp_run_bucket(a.run_open)]++;
				}
				if (a.errs) {
					struct sp_agg_errs er;

					if (stats_get(map,
						      stats_ref(a.errs, h.base, used, nchunks,
								sizeof(er)),
						      SP_AGG_ERRS, &er, sizeof(er)) == 0) {
						for (b = 0; b < SP_AGG_ERR_CODES; b++) {
							uint64_t ek[4] = {
								a.sql_id,
								(uint64_t)(int64_t)er.code[b].rc,
								pid,
								a.kind == SP_KIND_EXEC
									? SP_KIND_EXEC
									: SP_KIND_STMT
							};
							uint64_t *n;

							if (!er.code[b].count)
								continue;
							n = hmap_get(&c->errcodes, ek, 1, NULL);
							if (n)
								*n = sat_add(*n, er.code[b].count);
						}
					} else {
						p->stats_bad++;
					}
				}
				if (a.count) {
					/* into its fingerprint's histogram when the
					 * text is known, else its own */
					const struct sp_sql *sq =
						hmap_get(&c->sqls, &a.sql_id, 0, NULL);
					struct sp_fphist *fh = NULL;
					struct sp_hist *hist;
					uint64_t mn = to_ns(c, &conv, a.min),
						 mx = to_ns(c, &conv, a.max);

					if (sq && sq->fp_id && sq->text && sq->text[0] != '<') {
						uint64_t fk[2] = { sq->fp_id, qk.kind };
						int created;

						fh = hmap_get(&c->fphists, fk, 1, &created);
						if (fh && created)
							fh->min_ns = UINT64_MAX;
						if (fh && !fh->hist)
							fh->hist = sp_hist_new();
						hist = fh ? fh->hist : NULL;
					} else {
						if (!q->hist)
							q->hist = sp_hist_new();
						hist = q->hist;
					}
					for (b = 0; hist && b < SP_HIST_BLOCKS; b++) {
						struct sp_agg_hist hb;
						uint32_t k;

						if (!a.hist[b])
							continue;
						if (stats_get(map,
							      stats_ref(a.hist[b], h.base, used,
									nchunks, sizeof(hb)),
							      SP_AGG_HIST, &hb, sizeof(hb)) < 0) {
							p->stats_bad++;
							continue;
						}
						for (k = 0; k < SP_HIST_PER_BLOCK; k++) {
							uint64_t lo, w;

							if (!hb.bucket[k])
								continue;
							sp_hist_bucket(b * SP_HIST_PER_BLOCK + k,
								       &lo, &w);
							sp_hist_add_n(hist,
								      to_ns(c, &conv, lo + w / 2),
								      hb.bucket[k]);
						}
					}
					if (fh && hist) {
						if (mn < fh->min_ns)
							fh->min_ns = mn;
						if (mx > fh->max_ns)
							fh->max_ns = mx;
						fh->sum_ns = sat_add(fh->sum_ns, db_ns);
						fh->count = sat_add(fh->count, a.count);
						sp_hist_set_minmax_sum(hist, fh->min_ns, fh->max_ns,
								       fh->sum_ns);
					} else if (hist) {
						sp_hist_set_minmax_sum(hist, q->min_ns, q->max_ns,
								       q->total_ns);
					}
				}
			} else if (rh.type == SP_AGG_QUERY) {
				p->stats_bad++; /* a query record of another length */
			}
next:
			off += rh.len;
		}
		/* in batches of 4 MB: a call a chunk took twice the CPU */
		if (drop && (ci + 1 - dropped >= 64 || ci + 1 == nchunks)) {
			(void)madvise((void *)(map + (size_t)dropped * SP_STATS_CHUNK),
				      (size_t)(ci + 1 - dropped) * SP_STATS_CHUNK, MADV_DONTNEED);
			dropped = ci + 1;
		}
	}
	free(used);
	note_running(p, &started);
	hmap_free(&started);
}

/* Keep the header page of a merged mapping (see hdr_pages). */
static int hdr_keep(struct sp_coll *c, void *map)
{
	if (SP_GROW(c->hdr_pages, c->hdr_cap, c->nhdr + 1, 16) < 0)
		return -1;
	c->hdr_pages[c->nhdr++] = map;
	return 0;
}

void sp_coll_stats_retire(struct sp_coll *c, uint32_t pid, uint32_t image)
{
	size_t i = 0;

	while (i < c->nstats) {
		struct sp_statmap *m = &c->stats[i];

		if (pid && (m->pid != pid || m->image > image)) {
			i++;
			continue;
		}
		{
			struct sp_proc *mp = hmap_get(&c->procs, &m->pid, 0, NULL);

			if (mp && m->image > mp->merged_image)
				mp->merged_image = m->image;
		}
		c->stats_drop = !m->copy;
		sp_coll_stats_merge(c, m->pid, m->map, m->size, m->clock);
		c->stats_drop = 0;
		/* an image that forked: its children may still count
		 * themselves in its header (only that page is kept, but the
		 * memfd with it: so only for these) */
		if (!m->copy && m->size > HDR_PAGE &&
		    __atomic_load_n(&((const struct sp_stats_hdr *)m->map)->forked,
				    __ATOMIC_RELAXED) &&
		    hdr_keep(c, m->map) == 0)
			munmap((uint8_t *)m->map + HDR_PAGE, m->size - HDR_PAGE);
		else
			statmap_free(m);
		c->stats[i] = c->stats[--c->nstats];
	}
}

/*
 * Failures the statistics counted (exact, by code) beyond those whose
 * ERROR record arrived: their records were lost with a full ring. Each
 * such (text, code, process) gets an errors entry "<message lost>" for
 * the difference, so the failures' table adds up to the queries' errors.
 */
static void errors_reconcile(struct sp_coll *c)
{
	static const char lost[] = "<message lost: its record was dropped>";
	struct hmap got;
	size_t it = 0;
	const uint64_t *ek;
	const struct ekey *k;
	struct sp_err *e;
	uint64_t *n;

	if (!c->errcodes.count)
		return;
	/* what arrived as records, per (text, code, process): one pass */
	hmap_init(&got, 4 * sizeof(uint64_t), sizeof(uint64_t));
	while ((e = hmap_next(&c->errors, &it, (const void **)&k))) {
		uint64_t gk[4] = { k->sql_id, k->rc, k->pid, k->kind },
			 *g = hmap_get(&got, gk, 1, NULL);

		if (g)
			*g += e->count;
	}
	it = 0;
	while ((n = hmap_next(&c->errcodes, &it, (const void **)&ek))) {
		uint64_t *g = hmap_get(&got, ek, 0, NULL), have = g ? *g : 0;

		if (have < *n) {
			struct ekey nk = { ek[0],
					   ek[1],
					   ek[2],
					   0,
					   sp_hash_bytes((const uint8_t *)lost, sizeof(lost) - 1),
					   ek[3] };
			int created;

			e = hmap_get(&c->errors, &nk, 1, &created);
			if (e) {
				if (created)
					e->msg = dup_n((const uint8_t *)lost, sizeof(lost) - 1);
				e->count += *n - have;
			}
		}
		*n = 0; /* reconciled: a later finish adds nothing twice */
	}
	hmap_free(&got);
}

void sp_coll_finish(struct sp_coll *c)
{
	uint64_t n = 0;

	sp_coll_stats_retire(c, 0, 0);
	errors_reconcile(c);
	/* written by the descendants: a count each, trusted no further */
	for (size_t i = 0; i < c->nhdr; i++) {
		uint64_t u =
			__atomic_load_n(&((const struct sp_stats_hdr *)c->hdr_pages[i])->unreported,
					__ATOMIC_RELAXED);

		if (u < ((uint64_t)1 << 32))
			n += u;
	}
	c->unreported_counted = n;
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

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Largest file read: every chunk of a statistics copy, as messages. */
#define UNREP_FILE_MAX ((size_t)SP_STATS_COPY_MAX_CHUNKS * (SP_STATS_CHUNK + 256) + SP_MSG_MAX)

/* Apply the messages of the file at path (unlinked once opened), each
 * checked as any message; buf holds SP_MSG_MAX bytes. Returns 0 when the
 * whole file was applied, 1 when a message of it was refused (those
 * before it are applied), -1 when it is no file of ours to read. */
static int read_msg_file(struct sp_coll *c, const char *path, uint8_t *buf)
{
	struct stat st;
	off_t off = 0;
	int rc = -1;
	FILE *f = fopen(path, "rbe");

	unlink(path);
	if (!f)
		return -1;
	/* a file of our own uid's, in our 0700 directory; still checked
	 * record by record like any message */
	if (fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) &&
	    (size_t)st.st_size <= UNREP_FILE_MAX) {
		while (off + (off_t)sizeof(struct sp_msg_hdr) <= st.st_size) {
			struct sp_msg_hdr mh;

			if (fread(&mh, sizeof(mh), 1, f) != 1 || mh.len < sizeof(mh) ||
			    mh.len > SP_MSG_MAX || off + (off_t)mh.len > st.st_size)
				break;
			memcpy(buf, &mh, sizeof(mh));
			if (fread(buf + sizeof(mh), mh.len - sizeof(mh), 1, f) != 1 &&
			    mh.len > sizeof(mh))
				break;
			if (sp_coll_message(c, buf, mh.len, 0) < 0)
				break;
			off += mh.len;
		}
		rc = off == st.st_size ? 0 : 1;
	}
	fclose(f);
	return rc;
}

/* The names in dir that start with prefix, sorted (oldest first for
 * PREFIX.PID.TIME of one pid); *n of them, or NULL. */
static char **dir_names(const char *dir, const char *prefix, size_t *n)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char **names = NULL;
	size_t cap = 0, plen = strlen(prefix);

	*n = 0;
	if (!d)
		return NULL;
	while ((e = readdir(d))) {
		if (strncmp(e->d_name, prefix, plen))
			continue;
		if (SP_GROW(names, cap, *n + 1, 16) < 0)
			break;
		if (!(names[*n] = strdup(e->d_name)))
			break;
		(*n)++;
	}
	closedir(d);
	if (*n)
		qsort(names, *n, sizeof(*names), name_cmp);
	return names;
}

size_t sp_coll_read_unreported(struct sp_coll *c, const char *dir)
{
	size_t n = 0, done = 0;
	char **names = dir_names(dir, "unrep.", &n);
	uint8_t *buf = n ? malloc(SP_MSG_MAX) : NULL;

	/* unrep.PID.TIME: an exec'd image after the one before it */
	for (size_t i = 0; buf && i < n; i++) {
		char path[4096];

		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		if (read_msg_file(c, path, buf) >= 0)
			done++;
	}
	free(buf);
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return done;
}

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

static void proc_verdict(struct sp_proc *p)
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
		proc_verdict(p);
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
	proc_verdict(p);
}

size_t sp_coll_read_gone(struct sp_coll *c, const char *dir, size_t *bad)
{
	size_t n = 0, done = 0, nbad = 0;
	char **names = dir_names(dir, "gone.", &n);
	uint8_t *buf = n ? malloc(SP_MSG_MAX) : NULL;

	for (size_t i = 0; buf && i < n; i++) {
		char path[4096], *end;
		unsigned long long pid, ino;
		const char *q = names[i] + 5;

		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		/* gone.PID.INO.NS */
		errno = 0;
		pid = strtoull(q, &end, 10);
		ino = *end == '.' ? strtoull(end + 1, &end, 10) : 0;
		if (errno || *end != '.' || !pid || pid > UINT32_MAX || !ino) {
			unlink(path);
			nbad++;
			continue;
		}
		if (read_msg_file(c, path, buf) != 0) {
			nbad++;
			continue;
		}
		/* the image's statistics, come again in full (as copies):
		 * what an earlier agent held of them is taken off */
		if (c->stats_added)
			c->stats_added(c, (uint32_t)pid, (uint64_t)ino);
		done++;
	}
	free(buf);
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	if (bad)
		*bad = nbad;
	return done;
}

int sp_coll_texts(struct sp_coll *c, const uint8_t *msg, size_t len)
{
	uint64_t *rec_buf = malloc(REC_BUF_WORDS * sizeof(uint64_t));
	struct msg_info mi;
	size_t off;

	if (!rec_buf)
		return fail(c, "out of memory", 0);
	if (msg_check(c, msg, len, 0, &mi, rec_buf) < 0) {
		free(rec_buf);
		return -1;
	}
	for (off = sizeof(mi.mh); off < len;) { /* every record: SQL only */
		struct sp_rec_hdr rh;

		memcpy(&rh, msg + off, sizeof(rh));
		if (rh.type != SP_REC_SQL) {
			free(rec_buf);
			return fail(c, "a texts file holds a record other than SQL", off);
		}
		off += rh.len;
	}
	for (off = sizeof(mi.mh); off < len;) {
		struct sp_rec_hdr rh;

		memcpy(&rh, msg + off, sizeof(rh));
		memcpy(rec_buf, msg + off, rh.len);
		apply(c, NULL, (const uint8_t *)rec_buf, SP_REC_SQL);
		c->records++;
		off += rh.len;
	}
	free(rec_buf);
	return 0;
}

/* Largest texts file read: the preload keeps at most 16 MiB of texts,
 * each with a record header (48 bytes) and a message header per 64 KiB. */
#define TEXTS_FILE_MAX ((size_t)64 << 20)

size_t sp_coll_read_texts(struct sp_coll *c, const char *dir, size_t *bad)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	uint8_t *buf = NULL;
	size_t texts = 0, nbad = 0;

	if (!d)
		goto out;
	while ((e = readdir(d))) {
		char path[4096];
		struct stat st;
		uint64_t before;
		off_t off = 0;
		FILE *f;

		if (strncmp(e->d_name, "texts.", 6))
			continue;
		if (!buf && !(buf = malloc(SP_MSG_MAX)))
			break;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		f = fopen(path, "rbe");
		unlink(path);
		if (!f)
			continue;
		before = c->sqls.count;
		/* a file of our own uid's, in our 0700 directory; still
		 * checked record by record like any message */
		if (fstat(fileno(f), &st) < 0 || !S_ISREG(st.st_mode) ||
		    (size_t)st.st_size > TEXTS_FILE_MAX) {
			nbad++;
			fclose(f);
			continue;
		}
		while (off + (off_t)sizeof(struct sp_msg_hdr) <= st.st_size) {
			struct sp_msg_hdr mh;

			if (fread(&mh, sizeof(mh), 1, f) != 1 || mh.len < sizeof(mh) ||
			    mh.len > SP_MSG_MAX || off + (off_t)mh.len > st.st_size) {
				nbad++;
				break;
			}
			memcpy(buf, &mh, sizeof(mh));
			if (mh.len > sizeof(mh) &&
			    fread(buf + sizeof(mh), mh.len - sizeof(mh), 1, f) != 1) {
				nbad++;
				break;
			}
			if (sp_coll_texts(c, buf, mh.len) < 0) {
				nbad++;
				break;
			}
			off += mh.len;
		}
		texts += c->sqls.count - before;
		fclose(f);
	}
	closedir(d);
out:
	free(buf);
	if (bad)
		*bad = nbad;
	return texts;
}

/* Descriptors received with one message at most: more make it bad. */
#define RECV_FDS 8

int sp_coll_recv(struct sp_coll *c, int sock, uint32_t peer_pid, uint8_t *buf, size_t cap)
{
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int) * RECV_FDS)];
	} cm;
	struct iovec iov = { .iov_base = buf, .iov_len = cap };
	struct msghdr mh;
	struct cmsghdr *ch;
	int fds[RECV_FDS], nfd = 0, rc;
	struct sp_proc *p;
	ssize_t n;

	for (;;) {
		memset(&mh, 0, sizeof(mh));
		mh.msg_iov = &iov;
		mh.msg_iovlen = 1;
		mh.msg_control = cm.b;
		mh.msg_controllen = sizeof(cm.b);
		n = recvmsg(sock, &mh, MSG_DONTWAIT | MSG_TRUNC | MSG_CMSG_CLOEXEC);
		if (n >= 0 || errno != EINTR)
			break;
	}
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return 0;
	if (n >= 0) {
		for (ch = CMSG_FIRSTHDR(&mh); ch; ch = CMSG_NXTHDR(&mh, ch)) {
			size_t k;

			if (ch->cmsg_level != SOL_SOCKET || ch->cmsg_type != SCM_RIGHTS ||
			    ch->cmsg_len < CMSG_LEN(0))
				continue;
			for (k = 0; k < (ch->cmsg_len - CMSG_LEN(0)) / sizeof(int); k++) {
				int f;

				memcpy(&f, CMSG_DATA(ch) + k * sizeof(int), sizeof(f));
				if (nfd < RECV_FDS)
					fds[nfd++] = f;
				else
					close(f); /* cannot happen: the buffer holds RECV_FDS */
			}
		}
	}
	if (n <= 0) {
		/* End of the connection. After the image's BYE the process is
		 * gone or exec'd (the socket closes only then): read its rings
		 * one last time and free them. Without a BYE, read and keep
		 * them: the program may have closed our descriptor, and the
		 * preload reconnects and goes on writing into them. */
		while (nfd)
			close(fds[--nfd]);
		p = hmap_get(&c->procs, &peer_pid, 0, NULL);
		if (p && p->bye_image == p->image + 1) {
			rings_retire(c, peer_pid, p->image);
			sp_coll_stats_retire(c, peer_pid, p->image);
		} else {
			sp_coll_rings_drain(c, peer_pid);
			if (p) {
				p->died = 1; /* unless it reconnects (it closed our
					      * descriptor): see SP_HELLO_RECONNECT,
					      * or it exited (sp_coll_settle) */
				proc_verdict(p);
			}
		}
		return -1;
	}
	if ((mh.msg_flags & MSG_CTRUNC) && nfd < RECV_FDS) {
		/* out of descriptors (the kernel stops installing them at the
		 * first that fails; more than RECV_FDS is a bad message, below):
		 * whatever came is let go, the message applied without it and
		 * the loss counted (sp_coll_input); one without a RING or STATS
		 * record is refused as before */
		c->fds_lost++;
		while (nfd)
			close(fds[--nfd]);
		if ((size_t)n > cap) {
			failf(c, "oversized message (%zd bytes)", n);
			goto bad;
		}
		c->fd_missing = 1;
		rc = sp_coll_input(c, buf, (size_t)n, peer_pid, -1);
		c->fd_missing = 0;
		if (rc == 0)
			return 1;
		goto bad; /* counted and said by sp_coll_input */
	}
	if (mh.msg_flags & MSG_CTRUNC) {
		failf(c, "control data truncated (more than %d descriptors)", RECV_FDS);
		goto bad;
	}
	if (nfd > 1) {
		failf(c, "%d descriptors with one message", nfd);
		goto bad;
	}
	if ((size_t)n > cap) {
		failf(c, "oversized message (%zd bytes)", n);
		goto bad;
	}
	rc = sp_coll_input(c, buf, (size_t)n, peer_pid, nfd ? fds[0] : -1);
	nfd = 0; /* consumed */
	if (rc == 0)
		return 1;
bad:
	while (nfd)
		close(fds[--nfd]);
	p = hmap_get(&c->procs, &peer_pid, 0, NULL);
	if (p)
		p->bad_msgs++;
	return -2;
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

/* Folding texts (sp_coll_fold_texts). */

uint64_t sp_coll_text_fold(struct sp_coll *c, uint64_t sql_id)
{
	const uint64_t *to;

	if (!c->text_folds || !c->text_folds->count || hmap_get(&c->sqls, &sql_id, 0, NULL) ||
	    !(to = hmap_get(c->text_folds, &sql_id, 0, NULL)))
		return sql_id;
	if (c->text_folds_hit)
		hmap_get(c->text_folds_hit, &sql_id, 1, NULL);
	return *to;
}

uint64_t sp_coll_fold_id(uint64_t fp_id)
{
	/* a name no text's id takes: the FNV of a fixed tag and the
	 * fingerprint id, never 0 */
	uint64_t h = sp_fnv1a64(0xcbf29ce484222325ull, "sqlprof texts folded", 20);

	h = sp_fnv1a64(h, &fp_id, sizeof(fp_id));
	return h ? h : 1;
}

/* Merge src into dst (same key); src's owned pointers are dst's or
 * freed. */
typedef int (*fold_merge_fn)(void *dst, void *src);

static int merge_qagg(void *dv, void *sv)
{
	struct sp_qagg *d = dv, *s = sv;

	if (s->count && (!d->count || s->min_ns < d->min_ns))
		d->min_ns = s->min_ns;
	if (s->max_ns > d->max_ns)
		d->max_ns = s->max_ns;
	d->count = sat_add(d->count, s->count);
	d->total_ns = sat_add(d->total_ns, s->total_ns);
	d->self_ns = sat_add(d->self_ns, s->self_ns);
	d->wall_ns = sat_add(d->wall_ns, s->wall_ns);
	d->rows = sat_add(d->rows, s->rows);
	d->vm_steps = sat_add(d->vm_steps, s->vm_steps);
	d->fullscan_steps = sat_add(d->fullscan_steps, s->fullscan_steps);
	d->sorts = sat_add(d->sorts, s->sorts);
	d->autoindex = sat_add(d->autoindex, s->autoindex);
	d->errors = sat_add(d->errors, s->errors);
	d->nested = sat_add(d->nested, s->nested);
	d->samples = sat_add(d->samples, s->samples);
	d->prepares = sat_add(d->prepares, s->prepares);
	d->prepare_ns = sat_add(d->prepare_ns, s->prepare_ns);
	d->runs = sat_add(d->runs, s->runs);
	if (s->max_run > d->max_run)
		d->max_run = s->max_run;
	if (s->runs_by_len) {
		if (!d->runs_by_len) {
			d->runs_by_len = s->runs_by_len;
			s->runs_by_len = NULL;
		} else {
			for (int b = 0; b < SP_RUN_BUCKETS; b++)
				d->runs_by_len[b] += s->runs_by_len[b];
		}
	}
	free(s->runs_by_len);
	if (s->hist) {
		if (!d->hist) {
			d->hist = s->hist;
			s->hist = NULL;
		} else {
			sp_hist_merge(d->hist, s->hist);
		}
	}
	sp_hist_free(s->hist);
	return 0;
}

static int merge_sagg(void *dv, void *sv)
{
	struct sp_sagg *d = dv, *s = sv;

	d->samples += s->samples;
	d->total_ns += s->total_ns;
	d->rows += s->rows;
	d->vm_steps += s->vm_steps;
	d->random_samples += s->random_samples;
	d->random_ns += s->random_ns;
	return 0;
}

static int merge_err(void *dv, void *sv)
{
	struct sp_err *d = dv, *s = sv;

	d->count += s->count;
	free(s->msg);
	return 0;
}

static int merge_u64(void *dv, void *sv)
{
	*(uint64_t *)dv += *(uint64_t *)sv;
	return 0;
}

static int merge_caller(void *dv, void *sv)
{
	struct sp_caller *d = dv, *s = sv;

	d->count = sat_add(d->count, s->count);
	d->total_ns = sat_add(d->total_ns, s->total_ns);
	return 0;
}

static int merge_dup(void *dv, void *sv)
{
	struct sp_dup *d = dv, *s = sv;

	d->samples += s->samples;
	d->repeats += s->repeats;
	if (s->top > d->top)
		d->top = s->top;
	return 0;
}

static int merge_plan(void *dv, void *sv)
{
	struct sp_plan *d = dv, *s = sv;

	d->connections += s->connections;
	free(s->text);
	return 0;
}

/* Every entry of m whose key's first uint64_t is a folded sql_id (in
 * fold) renamed to its fold's, entries that meet merged by fn. In place:
 * only the entries that move are copied (a rebuilt map of 60,000 texts'
 * aggregates cost 7 us a text, most of it first touches of new pages).
 * -1 on ENOMEM (m keeps what was not moved yet: sums stay whole). */
static int fold_rekey(struct hmap *m, const struct hmap *fold, fold_merge_fn fn)
{
	size_t it = 0, n = 0, cap = 0, ent = m->keylen + m->vallen;
	const void *k;
	uint8_t *moved = NULL;
	int rc = 0;

	if (m->keylen > 8 * sizeof(uint64_t))
		return -1;
	while (hmap_next(m, &it, &k)) {
		if (!hmap_get((struct hmap *)fold, k, 0, NULL))
			continue;
		if (SP_GROW(moved, cap, (n + 1) * ent, 4096) < 0) {
			rc = -1;
			break;
		}
		memcpy(moved + n * ent, k, m->keylen); /* the value when deleted */
		n++;
	}
	for (size_t i = 0; i < n; i++) {
		uint8_t *e = moved + i * ent;

		hmap_del(m, e, e + m->keylen);
	}
	for (size_t i = 0; i < n; i++) {
		uint8_t *e = moved + i * ent;
		uint64_t key[8];
		const uint64_t *to;
		void *d;
		int created;

		memcpy(key, e, m->keylen);
		to = hmap_get((struct hmap *)fold, &key[0], 0, NULL);
		key[0] = *to;
		d = hmap_get(m, key, 1, &created);
		if (!d) {
			/* put back as it was: its sums stay in the map */
			d = hmap_get(m, e, 1, &created);
			rc = -1;
		}
		if (!d)
			continue; /* no memory even for that: lost from the map */
		if (created)
			memcpy(d, e + m->keylen, m->vallen);
		else
			fn(d, e + m->keylen);
	}
	free(moved);
	return rc;
}

struct fold_cand {
	uint64_t last, sql_id;
};

static int cand_cmp(const void *a, const void *b)
{
	const struct fold_cand *x = a, *y = b;

	return x->last < y->last ? 1 : x->last > y->last ? -1 : 0; /* newest first */
}

size_t sp_coll_fold_texts(struct sp_coll *c, size_t max, struct hmap *map)
{
	struct fold_cand *cand;
	struct hmap fold;
	size_t n = 0, it = 0, folded = 0;
	const void *k;
	struct sp_sql *s;

	if (c->sqls.count <= max)
		return 0;
	cand = malloc(c->sqls.count * sizeof(*cand));
	if (!cand)
		return (size_t)-1;
	while ((s = hmap_next(&c->sqls, &it, &k)))
		if (s->text && s->text[0] != '<' && s->fp_id && !s->folded &&
		    *(const uint64_t *)k != sp_coll_fold_id(s->fp_id)) /* a fold, loaded */
			cand[n++] = (struct fold_cand){ s->last, *(const uint64_t *)k };
	if (n <= max) {
		free(cand);
		return 0;
	}
	qsort(cand, n, sizeof(*cand), cand_cmp);
	hmap_init(&fold, sizeof(uint64_t), sizeof(uint64_t));
	/* the fold records, and which text goes to which */
	for (size_t i = max; i < n; i++) {
		struct sp_sql *t = hmap_get(&c->sqls, &cand[i].sql_id, 0, NULL);
		uint64_t fid = sp_coll_fold_id(t->fp_id), *to;
		struct sp_sql *f;
		int created;

		f = hmap_get(&c->sqls, &fid, 1, &created);
		t = hmap_get(&c->sqls, &cand[i].sql_id, 0, NULL); /* the map may have grown */
		if (!f || !(to = hmap_get(&fold, &cand[i].sql_id, 1, NULL)))
			goto oom;
		if (created || !f->text) {
			uint64_t id;

			f->text = sp_fingerprint(t->text, strlen(t->text), &id);
			if (!f->text)
				goto oom;
			f->full_len = (uint32_t)strlen(f->text);
			f->fp_id = t->fp_id;
		}
		f->folded++;
		if (t->last > f->last)
			f->last = t->last;
		*to = fid;
		if (map) {
			uint64_t *mv = hmap_get(map, &cand[i].sql_id, 1, NULL);

			if (!mv)
				goto oom;
			*mv = fid;
		}
	}
	if (fold_rekey(&c->queries, &fold, merge_qagg) < 0 ||
	    fold_rekey(&c->sites, &fold, merge_sagg) < 0 ||
	    fold_rekey(&c->errors, &fold, merge_err) < 0 ||
	    fold_rekey(&c->errcodes, &fold, merge_u64) < 0 ||
	    fold_rekey(&c->callers, &fold, merge_caller) < 0 ||
	    fold_rekey(&c->dups, &fold, merge_dup) < 0 ||
	    fold_rekey(&c->dupvals, &fold, merge_u64) < 0 ||
	    fold_rekey(&c->plans, &fold, merge_plan) < 0)
		goto oom;
	for (size_t i = 0; i < c->nevents; i++) {
		const uint64_t *to = hmap_get(&fold, &c->events[i].sql_id, 0, NULL);

		if (to)
			c->events[i].sql_id = *to;
	}
	/* the folded texts go */
	for (size_t i = max; i < n; i++) {
		struct sp_sql gone;

		if (hmap_del(&c->sqls, &cand[i].sql_id, &gone)) {
			free(gone.text);
			folded++;
		}
	}
	hmap_free(&fold);
	free(cand);
	c->texts_folded += folded;
	return folded;
oom:
	hmap_free(&fold);
	free(cand);
	return (size_t)-1;
}
