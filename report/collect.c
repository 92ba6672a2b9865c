/* SPDX-License-Identifier: MIT */
/*
 * collect.c - decode and aggregate stream messages; see collect.h.
 *
 * Every byte is hostile: each record's length is checked against the
 * message and against its type's fixed part before it is copied into an
 * aligned local. A message is validated completely before any of it is
 * applied, so a bad message changes nothing and other processes' data is
 * never touched by it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collect.h"
#include "fingerprint.h"

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
};
struct mkey {
	uint64_t pid, generation, lo;
};

void sp_coll_init(struct sp_coll *c)
{
	memset(c, 0, sizeof(*c));
	hmap_init(&c->procs, sizeof(uint32_t), sizeof(struct sp_proc));
	hmap_init(&c->sqls, sizeof(uint64_t), sizeof(struct sp_sql));
	hmap_init(&c->queries, sizeof(struct qkey), sizeof(struct sp_qagg));
	hmap_init(&c->sites, sizeof(struct skey), sizeof(struct sp_sagg));
	hmap_init(&c->stacks, sizeof(struct stkey), sizeof(struct sp_stack));
	hmap_init(&c->errors, sizeof(struct ekey), sizeof(struct sp_err));
	hmap_init(&c->modules, sizeof(struct mkey), sizeof(struct sp_module));
	hmap_init(&c->plans, 2 * sizeof(uint64_t), sizeof(struct sp_plan));
	hmap_init(&c->threads, 2 * sizeof(uint64_t), sizeof(struct sp_thr));
	c->events_max = 200000;
	c->ns_per_tick = 1.0;
}

void sp_coll_free(struct sp_coll *c)
{
	size_t it;
	void *v;

	for (it = 0; (v = hmap_next(&c->procs, &it, NULL));)
		free(((struct sp_proc *)v)->exe);
	for (it = 0; (v = hmap_next(&c->sqls, &it, NULL));)
		free(((struct sp_sql *)v)->text);
	for (it = 0; (v = hmap_next(&c->queries, &it, NULL));)
		sp_hist_free(((struct sp_qagg *)v)->hist);
	for (it = 0; (v = hmap_next(&c->stacks, &it, NULL));)
		free(((struct sp_stack *)v)->pcs);
	for (it = 0; (v = hmap_next(&c->errors, &it, NULL));)
		free(((struct sp_err *)v)->msg);
	for (it = 0; (v = hmap_next(&c->modules, &it, NULL));)
		free(((struct sp_module *)v)->path);
	for (it = 0; (v = hmap_next(&c->plans, &it, NULL));)
		free(((struct sp_plan *)v)->text);
	hmap_free(&c->plans);
	hmap_free(&c->threads);
	hmap_free(&c->procs);
	hmap_free(&c->sqls);
	hmap_free(&c->queries);
	hmap_free(&c->sites);
	hmap_free(&c->stacks);
	hmap_free(&c->errors);
	hmap_free(&c->modules);
	free(c->events);
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

/* Fixed part of each known record type; 0 = unknown (skipped). */
static size_t fixed_len(uint16_t type)
{
	switch (type) {
	case SP_REC_HELLO: return sizeof(struct sp_rec_hello);
	case SP_REC_SQL: return sizeof(struct sp_rec_sql);
	case SP_REC_EXEC: return sizeof(struct sp_rec_exec);
	case SP_REC_PREPARE: return sizeof(struct sp_rec_prepare);
	case SP_REC_STACK: return sizeof(struct sp_rec_stack);
	case SP_REC_MODULE: return sizeof(struct sp_rec_module);
	case SP_REC_ERROR: return sizeof(struct sp_rec_error);
	case SP_REC_BYE: return sizeof(struct sp_rec_bye);
	case SP_REC_PLAN: return sizeof(struct sp_rec_plan);
	case SP_REC_EXEC_LITE: return sizeof(struct sp_rec_exec_lite);
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
	default:
		return 0;
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

static int run_bucket(uint64_t len)
{
	int b = 0;

	if (len <= 16)
		return (int)len - 1;
	while ((len >> b) > 1)
		b++;
	/* len in [2^b, 2^(b+1)), b >= 4 */
	b += 12;
	return b < SP_RUN_BUCKETS ? b : SP_RUN_BUCKETS - 1;
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

static void run_close(struct sp_coll *c, struct sp_thr *th)
{
	struct qkey qk = { th->sql_id, th->kind };
	struct sp_qagg *q;

	if (!th->run)
		return;
	q = hmap_get(&c->queries, &qk, 0, NULL);
	if (q) {
		q->runs++;
		if (th->run > q->max_run)
			q->max_run = th->run;
		q->runs_by_len[run_bucket(th->run)]++;
	}
	th->run = 0;
}

/* A top-level execution on a thread: extend its run or start a new one. */
static void run_track(struct sp_coll *c, uint32_t pid, uint32_t tid, uint64_t sql_id,
		      uint64_t kind)
{
	uint64_t k[2] = { pid, tid };
	struct sp_thr *th = hmap_get(&c->threads, k, 1, NULL);
	const struct sp_sql *sq = hmap_get(&c->sqls, &sql_id, 0, NULL);
	/* A loop that puts its values into the SQL text makes a new text each
	 * time: runs are of one fingerprint when the text is known. */
	uint64_t key = sq && sq->fp_id ? sq->fp_id : sql_id;

	if (!th)
		return;
	if (th->run && th->key == key && th->kind == kind) {
		th->run++;
		th->sql_id = sql_id;
		return;
	}
	run_close(c, th);
	th->key = key;
	th->sql_id = sql_id;
	th->kind = kind;
	th->run = 1;
}

void sp_coll_finish(struct sp_coll *c)
{
	size_t it = 0;
	struct sp_thr *th;

	while ((th = hmap_next(&c->threads, &it, NULL)))
		run_close(c, th);
}

static void apply_exec(struct sp_coll *c, struct sp_proc *p, const struct sp_rec_exec *x)
{
	struct qkey qk = { x->sql_id, x->kind };
	struct sp_qagg *q = hmap_get(&c->queries, &qk, 1, NULL);
	uint64_t db = to_ns(c, p, x->db_time), nested = to_ns(c, p, x->nested_time);
	uint64_t self = db > nested ? db - nested : 0;

	p->execs++;
	if (!q)
		return;
	if (!(x->h.flags & SP_EXEC_NESTED))
		run_track(c, p->pid, x->tid, x->sql_id, x->kind);
	if (!q->hist)
		q->hist = sp_hist_new();
	q->count++;
	q->total_ns += db;
	q->self_ns += self;
	q->wall_ns += to_ns(c, p, x->wall);
	q->rows += x->rows;
	q->vm_steps += x->vm_steps;
	q->fullscan_steps += x->fullscan_steps;
	q->sorts += x->sorts;
	q->autoindex += x->autoindex;
	if (x->h.flags & SP_EXEC_ERROR)
		q->errors++;
	if (x->h.flags & SP_EXEC_NESTED)
		q->nested++;
	if (q->hist)
		sp_hist_add(q->hist, db);
	if (x->stack_id) {
		struct skey sk = { x->sql_id, x->kind, p->pid, x->stack_id };
		struct sp_sagg *s = hmap_get(&c->sites, &sk, 1, NULL);

		q->samples++;
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
		if (c->spill) {
			struct sp_event ev;

			memset(&ev, 0, sizeof(ev)); /* padding too: it goes to a file */
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

			if (c->nspilled < c->events_max && fwrite(&ev, sizeof(ev), 1, c->spill) == 1)
				c->nspilled++;
			else
				c->events_dropped++;
		} else if (c->nevents < c->events_max) {
			if (c->nevents == c->events_cap) {
				size_t cap = c->events_cap ? c->events_cap * 2 : 1024;
				struct sp_event *e = realloc(c->events, cap * sizeof(*e));

				if (!e) {
					c->events_dropped++;
					return;
				}
				c->events = e;
				c->events_cap = cap;
			}
			c->events[c->nevents++] = (struct sp_event){
				.pid = p->pid, .tid = x->tid, .seq = x->seq,
				.parent_seq = x->parent_seq, .sql_id = x->sql_id,
				.stack_id = x->stack_id, .start_ns = to_mono(c, p, x->start),
				.wall_ns = to_ns(c, p, x->wall), .db_ns = db, .self_ns = self,
				.rows = x->rows, .vm_steps = x->vm_steps, .flags = x->h.flags,
				.rc = x->rc, .kind = x->kind,
			};
		} else {
			c->events_dropped++;
		}
	}
}

/* Apply one validated record. rec is 8-aligned (copied by the caller). */
static void apply(struct sp_coll *c, struct sp_proc *p, const uint8_t *rec, uint16_t type)
{
	switch (type) {
	case SP_REC_HELLO: {
		const struct sp_rec_hello *h = (const void *)rec;

		if (p->hello && (h->h.flags & SP_HELLO_RECONNECT)) {
			p->reconnects++;
			break; /* same image: nothing else changes */
		}
		p->hello = 1;
		p->ppid = h->ppid;
		p->clock = h->clock == SP_CLOCK_TSC ? SP_CLOCK_TSC : SP_CLOCK_MONOTONIC;
		p->tsc_ref = h->tsc_ref;
		p->mono_ref = h->mono_ref_ns;
		p->sqlite_found |= (int)h->sqlite_found;
		p->bye = 0;
		if (p->exe) {
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
		apply_exec(c, p, &x);
		break;
	}
	case SP_REC_EXEC_LITE: {
		const struct sp_rec_exec_lite *l = (const void *)rec;
		struct sp_rec_exec x;

		memset(&x, 0, sizeof(x));
		x.h.flags = l->h.flags & SP_EXEC_ABANDONED;
		x.tid = l->tid;
		x.sql_id = l->sql_id;
		x.wall = l->wall;
		x.db_time = l->db_time;
		x.rows = l->rows;
		x.vm_steps = l->vm_steps;
		x.fullscan_steps = l->fullscan_steps;
		x.sorts = l->sorts;
		x.autoindex = l->autoindex;
		x.kind = SP_KIND_STMT;
		apply_exec(c, p, &x);
		break;
	}
	case SP_REC_PREPARE: {
		const struct sp_rec_prepare *r = (const void *)rec;
		struct qkey qk = { r->sql_id, SP_KIND_STMT };
		struct sp_qagg *q = hmap_get(&c->queries, &qk, 1, NULL);

		if (q) {
			q->prepares++;
			q->prepare_ns += to_ns(c, p, r->time);
		}
		break;
	}
	case SP_REC_STACK: {
		const struct sp_rec_stack *r = (const void *)rec;
		struct stkey k = { p->pid, r->stack_id };
		int created;
		struct sp_stack *s = hmap_get(&c->stacks, &k, 1, &created);

		if (s && created) {
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
		struct mkey k = { p->pid, r->generation, r->lo };
		int created;
		struct sp_module *m = hmap_get(&c->modules, &k, 1, &created);

		if (m && created) {
			m->pid = p->pid;
			m->generation = r->generation;
			m->bias = r->bias;
			m->lo = r->lo;
			m->hi = r->hi;
			m->build_id_len = r->build_id_len;
			memcpy(m->build_id, rec + sizeof(*r), r->build_id_len);
			m->path = dup_n(rec + sizeof(*r) + r->build_id_len, r->path_len);
		}
		break;
	}
	case SP_REC_ERROR: {
		const struct sp_rec_error *r = (const void *)rec;
		const uint8_t *msg = rec + sizeof(*r);
		struct ekey k = { r->sql_id, (uint64_t)(int64_t)r->rc, p->pid, r->stack_id,
				  sp_hash_bytes(msg, r->msg_len) };
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
		p->bye_execs += r->executions;
		p->untracked = r->untracked;
		if (r->lost > p->lost)
			p->lost = r->lost;
		break;
	}
	case SP_REC_PLAN: {
		const struct sp_rec_plan *r = (const void *)rec;
		const uint8_t *text = rec + sizeof(*r);
		uint64_t k[2] = { r->sql_id, sp_hash_bytes(text, r->text_len) };
		int created;
		struct sp_plan *pl = hmap_get(&c->plans, k, 1, &created);

		if (pl) {
			if (created)
				pl->text = dup_n(text, r->text_len);
			pl->connections++;
		}
		break;
	}
	default:
		break; /* PAD and unknown types are skipped */
	}
}

int sp_coll_message(struct sp_coll *c, const uint8_t *msg, size_t len, uint32_t peer_pid)
{
	struct sp_msg_hdr mh;
	uint64_t rec_buf[(SP_MSG_MAX + 7) / 8];
	struct sp_proc *p;
	size_t off;
	int pass;

	if (len < sizeof(mh))
		return fail(c, "message shorter than its header", 0);
	memcpy(&mh, msg, sizeof(mh));
	if (mh.magic != SP_WIRE_MAGIC)
		return fail(c, "bad magic", 0);
	if (mh.version < SP_WIRE_MIN_VERSION || mh.version > SP_WIRE_VERSION)
		return fail(c, "unsupported stream version", 4);
	if (mh.len != len || len > SP_MSG_MAX + sizeof(mh))
		return fail(c, "message length mismatch", 12);
	if (peer_pid && mh.pid != peer_pid)
		return fail(c, "pid does not match the connected peer", 8);
	/* Pass 0 validates everything, pass 1 applies. */
	for (pass = 0; pass < 2; pass++) {
		p = NULL;
		if (pass == 1) {
			p = proc_get(c, mh.pid);
			if (!p)
				return fail(c, "out of memory", 0);
			p->msgs++;
			if (mh.lost > p->lost)
				p->lost = mh.lost;
			if (p->last_seq && mh.seq > p->last_seq + 1)
				p->gaps += mh.seq - p->last_seq - 1;
			if (mh.seq > p->last_seq)
				p->last_seq = mh.seq;
		}
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
				if (pass == 1) {
					apply(c, p, (const uint8_t *)rec_buf, rh.type);
					c->records++;
				}
			}
			off += rh.len;
		}
	}
	c->messages++;
	return 0;
}

void sp_coll_spill(struct sp_coll *c, FILE *f, size_t max)
{
	c->spill = f;
	c->events_max = max;
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

uint64_t sp_coll_executions(const struct sp_coll *c)
{
	size_t it = 0;
	const struct sp_proc *p;
	uint64_t n = 0;

	while ((p = hmap_next(&c->procs, &it, NULL)))
		n += p->execs;
	return n;
}
