/* SPDX-License-Identifier: MIT */
/*
 * collect.c - the collector's messages: decode and apply stream messages
 * and the records read from the threads' shared rings (collect-ring.c);
 * see collect.h, which also lists the collector's other files.
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

#include "collect-int.h"
#include "fingerprint.h"
#include "hash.h"

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
		free(((struct sp_qagg *)v)->loops_by_len);
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
	sp_coll_events_forget(c);
	while (c->nrings)
		coll_ring_free(c, c->nrings - 1);
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
		if (c->nspilled < c->events_max && sp_coll_spill_add(c, &ev) == 0)
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

/* A HELLO: a new image of the process (an exec), or the same one
 * reconnecting. */
static void apply_hello(struct sp_coll *c, struct sp_proc *p, const uint8_t *rec)
{
	const struct sp_rec_hello *h = (const void *)rec;

	/* in another pid namespace: the pid it knows itself by, for
	 * display (msg_check verified it) */
	p->ns_pid = h->pid != p->pid ? h->pid : 0;
	if (p->hello && (h->h.flags & SP_HELLO_RECONNECT)) {
		p->reconnects++;
		p->died = 0;
		return; /* same image: nothing else changes */
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
}

/* A text, the first time its sql_id comes (later: its recency only). */
static void apply_sql(struct sp_coll *c, struct sp_proc *p, const uint8_t *rec)
{
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
}

/* A sampled execution (apply_exec), counted under the agent's fold. */
static void apply_exec_rec(struct sp_coll *c, struct sp_proc *p, const uint8_t *rec)
{
	struct sp_rec_exec x;

	memcpy(&x, rec, sizeof(x));
	if (x.kind > SP_KIND_EXEC)
		x.kind = SP_KIND_STMT;
	x.sql_id = sp_coll_text_fold(c, x.sql_id); /* the agent's folds */
	apply_exec(c, p, &x);
}

/* A stack, kept the first time its id comes in its process. */
static void apply_stack(struct sp_coll *c, struct sp_proc *p, const uint8_t *rec)
{
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
}

/* A module of the process's map. */
static void apply_module(struct sp_coll *c, struct sp_proc *p, const uint8_t *rec)
{
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
		m->embed = r->h.flags &
			   (SP_MODULE_EMBED | SP_MODULE_EMBED_BLIND | SP_MODULE_EMBED_STRIPPED |
			    SP_MODULE_EMBED_CONFIG | SP_MODULE_EMBED_NOTRACE |
			    SP_MODULE_EMBED_LATE | SP_MODULE_EMBED_OWNTRACE);
	}
}

/* A failed execution's code and message. */
static void apply_error(struct sp_coll *c, struct sp_proc *p, const uint8_t *rec)
{
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
}

/* The image's goodbye: its executions, losses. */
static void apply_bye(struct sp_coll *c, struct sp_proc *p, const uint8_t *rec)
{
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
}

/* A plan (or why none), counted per connection that reported it. */
static void apply_plan(struct sp_coll *c, struct sp_proc *p, const uint8_t *rec)
{
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
		return;
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
}

/* A schema plans were taken under. */
static void apply_schema(struct sp_coll *c, struct sp_proc *p, const uint8_t *rec)
{
	const struct sp_rec_schema *r = (const void *)rec;
	int created;
	struct sp_schema *sc =
		r->schema_id ? hmap_get(&c->schemas, &r->schema_id, 1, &created) : NULL;

	if (sc && created) {
		sc->file = (r->h.flags & SP_SCHEMA_FILE) != 0;
		sc->text = dup_n(rec + sizeof(*r), r->text_len);
	}
}

/* A Python code object, for its frames' names and lines. */
static void apply_pycode(struct sp_coll *c, struct sp_proc *p, const uint8_t *rec)
{
	const struct sp_rec_pycode *r = (const void *)rec;
	const uint8_t *t = rec + sizeof(*r);
	uint64_t k[2] = { r->pid, r->code };
	int created;
	struct sp_pycode *pc = hmap_get(&c->pycodes, k, 1, &created);

	if (!pc || !created)
		return; /* sent once per number; a repeat changes nothing */
	pc->name = (char *)dup_n(t, r->name_len);
	pc->qualname = r->qualname_len ? (char *)dup_n(t + r->name_len, r->qualname_len) : NULL;
	pc->file = (char *)dup_n(t + r->name_len + r->qualname_len, r->file_len);
	pc->table_len = r->table_len;
	pc->table = r->table_len ? malloc(r->table_len) : NULL;
	if (pc->table)
		memcpy(pc->table, t + r->name_len + r->qualname_len + r->file_len, r->table_len);
	else
		pc->table_len = 0;
	pc->firstlineno = r->firstlineno;
	pc->major = r->major;
	pc->minor = r->minor;
	pc->cut = (r->h.flags & SP_PYCODE_TABLE_CUT) != 0;
}

/* A process whose Python frames cannot be read. */
static void apply_pyinfo(struct sp_coll *c, struct sp_proc *p, const uint8_t *rec)
{
	const struct sp_rec_pyinfo *r = (const void *)rec;
	size_t n =
		r->text_len < sizeof(c->py_version) - 1 ? r->text_len : sizeof(c->py_version) - 1;

	if (r->status == SP_PY_UNSUPPORTED)
		c->py_unsupported++;
	else if (r->status == SP_PY_UNREADABLE)
		c->py_unreadable++;
	else
		return;
	if (!c->py_version[0]) {
		memcpy(c->py_version, rec + sizeof(*r), n);
		c->py_version[n] = 0;
		for (size_t i = 0; i < n; i++)
			if (c->py_version[i] == '\n' || (unsigned char)c->py_version[i] < 32)
				c->py_version[i] = ' ';
	}
}

/* Apply one validated record. rec is 8-aligned (copied by the caller). */
void coll_apply(struct sp_coll *c, struct sp_proc *p, const uint8_t *rec, uint16_t type)
{
	switch (type) {
	case SP_REC_HELLO: apply_hello(c, p, rec); break;
	case SP_REC_SQL: apply_sql(c, p, rec); break;
	case SP_REC_EXEC: apply_exec_rec(c, p, rec); break;
	case SP_REC_STACK: apply_stack(c, p, rec); break;
	case SP_REC_MODULE: apply_module(c, p, rec); break;
	case SP_REC_ERROR: apply_error(c, p, rec); break;
	case SP_REC_BYE: apply_bye(c, p, rec); break;
	case SP_REC_PLAN: apply_plan(c, p, rec); break;
	case SP_REC_SCHEMA: apply_schema(c, p, rec); break;
	case SP_REC_STATS_COPY: stats_copy_apply(c, p, (const void *)rec); break;
	case SP_REC_PYCODE: apply_pycode(c, p, rec); break;
	case SP_REC_PYINFO: apply_pyinfo(c, p, rec); break;
	default:
		break; /* RING and STATS (registered by sp_coll_input), PAD
			* and unknown types change nothing here */
	}
}

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

/*
 * Validate a whole message (header and every record) without changing
 * anything but the failure counters. rec_buf holds REC_BUF_WORDS words.
 * Returns 0 with *mi filled, or -1 (fail()).
 */
int coll_msg_check(struct sp_coll *c, const uint8_t *msg, size_t len, uint32_t peer_pid,
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
int coll_msg_apply(struct sp_coll *c, const uint8_t *msg, size_t len, const struct sp_msg_hdr *mh,
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
			coll_apply(c, p, (const uint8_t *)rec_buf, rh.type);
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

	if (coll_msg_check(c, msg, len, peer_pid, &mi, rec_buf) < 0)
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
		int rc = coll_ring_map(c, fd, &mi.ring, &map, &map_len, &tail);

		fd = -1; /* closed by coll_ring_map */
		if (rc < 0)
			goto bad;
	}
	/* A new image of a pid we know (exec): the old image's rings are
	 * read, and its statistics merged, under the old image's clock,
	 * before its HELLO changes it. */
	p = hmap_get(&c->procs, &pid, 0, NULL);
	if (mi.fresh_hello && p && p->hello) {
		if (c->nrings)
			coll_rings_retire(c, pid, p->image);
		sp_coll_stats_retire(c, pid, p->image);
	}
	if (coll_msg_apply(c, msg, len, &mi.mh, pid, 0, rec_buf) < 0)
		goto bad;
	if (map && coll_ring_register(c, map, map_len, &mi.ring, pid, tail) < 0)
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
			coll_rings_retire(c, peer_pid, p->image);
			sp_coll_stats_retire(c, peer_pid, p->image);
		} else {
			sp_coll_rings_drain(c, peer_pid);
			if (p) {
				p->died = 1; /* unless it reconnects (it closed our
					      * descriptor): see SP_HELLO_RECONNECT,
					      * or it exited (sp_coll_settle) */
				coll_proc_verdict(p);
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
