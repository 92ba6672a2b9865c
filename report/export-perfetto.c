/* SPDX-License-Identifier: MIT */
/*
 * export-perfetto.c - a Perfetto trace (ui.perfetto.dev), protobuf encoded
 * by hand: no libprotobuf. Field numbers are those of Perfetto's
 * perfetto_trace.proto (listed in docs/exports.md).
 *
 * The file is a Trace: repeated `packet` (1) TracePackets, all on one
 * sequence (trusted_packet_sequence_id 1), the first with
 * SEQ_INCREMENTAL_STATE_CLEARED. It holds a track descriptor per process,
 * per thread, per overlap lane and a counter track of sampled executions
 * per second per process; then, in time order, a slice begin and end
 * (TrackEvent TYPE_SLICE_BEGIN / TYPE_SLICE_END) for every sampled
 * execution in the events table, named by its fingerprint through interned
 * event names, with debug annotations sql, rows, rc, vm_steps, site and
 * db_ns. Executions nested in time (an exec and its statements) are nested
 * slices; two whose wall times overlap without nesting (interleaved
 * statements) cannot share a track, so the later one goes to an overlap
 * lane, a child track of its thread (export-common.c assigns lanes).
 */
#include <stdlib.h>

#include "util.h"
#include <string.h>

#include "export.h"

/* TracePacket */
enum { PK_TIMESTAMP = 8, PK_SEQ_ID = 10, PK_TRACK_EVENT = 11, PK_INTERNED = 12,
       PK_SEQ_FLAGS = 13, PK_TRACK_DESC = 60 };
enum { SEQ_CLEARED = 1, SEQ_NEEDS_STATE = 2 };
/* TrackDescriptor, ProcessDescriptor, ThreadDescriptor */
enum { TD_UUID = 1, TD_NAME = 2, TD_PROCESS = 3, TD_THREAD = 4, TD_PARENT = 5, TD_COUNTER = 8 };
enum { PD_PID = 1, PD_NAME = 6 };
enum { THD_PID = 1, THD_TID = 2, THD_NAME = 5 };
/* TrackEvent */
enum { TE_DEBUG = 4, TE_TYPE = 9, TE_NAME_IID = 10, TE_TRACK = 11, TE_CATEGORIES = 22,
       TE_COUNTER_VALUE = 30 };
enum { TYPE_BEGIN = 1, TYPE_END = 2, TYPE_COUNTER = 4 };
/* DebugAnnotation */
enum { DA_UINT = 3, DA_INT = 4, DA_STRING = 6, DA_NAME = 10 };
/* InternedData / EventName */
enum { ID_EVENT_NAMES = 2, EN_IID = 1, EN_NAME = 2 };

#define SEQ_ID 1
#define MAX_DEPTH 8

struct pb {
	uint8_t *b;
	size_t n, cap;
	size_t open[MAX_DEPTH];
	int depth, oom;
};

static void put(struct pb *p, const void *d, size_t len)
{
	if (p->oom)
		return;
	if (p->n + len > p->cap) {
		size_t nc = p->cap ? p->cap : 4096;
		uint8_t *nb;

		while (nc < p->n + len)
			nc *= 2;
		nb = realloc(p->b, nc);
		if (!nb) {
			p->oom = 1;
			return;
		}
		p->b = nb;
		p->cap = nc;
	}
	memcpy(p->b + p->n, d, len);
	p->n += len;
}

static size_t varint_enc(uint8_t *o, uint64_t v)
{
	size_t n = 0;

	do {
		o[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
		v >>= 7;
	} while (v);
	return n;
}

static void tag(struct pb *p, unsigned field, unsigned wt)
{
	uint8_t o[10];

	put(p, o, varint_enc(o, (uint64_t)field << 3 | wt));
}

static void f_varint(struct pb *p, unsigned field, uint64_t v)
{
	uint8_t o[10];

	tag(p, field, 0);
	put(p, o, varint_enc(o, v));
}

static void f_str(struct pb *p, unsigned field, const char *s)
{
	uint8_t o[10];
	size_t len = strlen(s);

	tag(p, field, 2);
	put(p, o, varint_enc(o, len));
	put(p, s, len);
}

/* Nested message: its length is written at end(), moving the body. */
static void begin(struct pb *p, unsigned field)
{
	tag(p, field, 2);
	if (p->depth < MAX_DEPTH)
		p->open[p->depth] = p->n;
	p->depth++;
}

static void end(struct pb *p)
{
	uint8_t o[10];
	size_t start, len, vl;

	if (--p->depth >= MAX_DEPTH || p->oom)
		return;
	start = p->open[p->depth];
	len = p->n - start;
	vl = varint_enc(o, len);
	put(p, o, vl); /* grow by vl bytes, then shift the body right */
	if (p->oom)
		return;
	memmove(p->b + start + vl, p->b + start, len);
	memcpy(p->b + start, o, vl);
}

/* Write the packet built in p as one Trace.packet and reset p. */
static void flush_packet(FILE *f, struct pb *p, struct pb *outer)
{
	outer->n = 0;
	if (p->oom)
		return;
	tag(outer, 1, 2);
	{
		uint8_t o[10];

		put(outer, o, varint_enc(o, p->n));
	}
	put(outer, p->b, p->n);
	if (!outer->oom)
		fwrite(outer->b, 1, outer->n, f);
	p->n = 0;
}

static void packet_start(struct pb *p, int *first)
{
	f_varint(p, PK_SEQ_ID, SEQ_ID);
	if (*first) {
		f_varint(p, PK_SEQ_FLAGS, SEQ_CLEARED);
		*first = 0;
	}
}

struct op {
	uint64_t ts, serial, track, value;
	size_t ev;
	int type;
};

static int cmp_op(const void *pa, const void *pb)
{
	const struct op *a = pa, *b = pb;

	if (a->ts != b->ts)
		return a->ts < b->ts ? -1 : 1;
	return a->serial < b->serial ? -1 : a->serial > b->serial;
}

struct ops {
	struct op *v;
	size_t n, cap;
};

static int push_op(struct ops *o, struct op op)
{
	if (o->n == o->cap) {
		size_t nc = o->cap ? o->cap * 2 : 1024;
		struct op *n = realloc(o->v, nc * sizeof(*n));

		if (!n)
			return -1;
		o->v = n;
		o->cap = nc;
	}
	op.serial = o->n;
	o->v[o->n++] = op;
	return 0;
}

static void annot_str(struct pb *p, const char *name, const char *v)
{
	begin(p, TE_DEBUG);
	f_str(p, DA_NAME, name);
	f_str(p, DA_STRING, v);
	end(p);
}

static void annot_u(struct pb *p, const char *name, uint64_t v)
{
	begin(p, TE_DEBUG);
	f_str(p, DA_NAME, name);
	f_varint(p, DA_UINT, v);
	end(p);
}

static void annot_i(struct pb *p, const char *name, int64_t v)
{
	begin(p, TE_DEBUG);
	f_str(p, DA_NAME, name);
	f_varint(p, DA_INT, (uint64_t)v); /* int64: two's complement varint */
	end(p);
}

/* Start a track-descriptor packet; the caller adds fields and end()s it. */
static void track_desc(struct pb *p, int *first, uint64_t uuid, uint64_t parent, const char *name)
{
	packet_start(p, first);
	begin(p, PK_TRACK_DESC);
	f_varint(p, TD_UUID, uuid);
	if (parent)
		f_varint(p, TD_PARENT, parent);
	if (name)
		f_str(p, TD_NAME, name);
}

static int cmp_u64(const void *pa, const void *pb)
{
	uint64_t a = *(const uint64_t *)pa, b = *(const uint64_t *)pb;

	return a < b ? -1 : a > b;
}

/* Counter ops of one process (threads first .. end-1 of x->th): sampled
 * executions started in each second, back to 0 after a gap. */
static int counter_ops(struct sp_export *x, size_t first, size_t endth, uint64_t track,
		       struct ops *ops)
{
	uint64_t *secs = NULL;
	size_t ne = 0, k, e, j;
	int ret = -1;

	for (k = first; k < endth; k++)
		ne += x->th[k].n;
	secs = malloc((ne ? ne : 1) * sizeof(*secs));
	if (!secs)
		return -1;
	for (ne = 0, k = first; k < endth; k++)
		for (e = x->th[k].first; e < x->th[k].first + x->th[k].n; e++)
			secs[ne++] = x->ev[e].start_ns / 1000000000ULL;
	if (ne > 1)
		sp_qsort(secs, ne, sizeof(*secs), cmp_u64);
	for (e = 0; e < ne; e = j) {
		for (j = e; j < ne && secs[j] == secs[e]; j++)
			;
		if (push_op(ops, (struct op){ .ts = secs[e] * 1000000000ULL, .track = track,
					      .value = j - e, .type = TYPE_COUNTER }) < 0)
			goto out;
		if ((j == ne || secs[j] != secs[e] + 1) &&
		    push_op(ops, (struct op){ .ts = (secs[e] + 1) * 1000000000ULL, .track = track,
					      .value = 0, .type = TYPE_COUNTER }) < 0)
			goto out;
	}
	ret = 0;
out:
	free(secs);
	return ret;
}

struct lstack {
	size_t *ev;
	size_t n;
};

/* Begin and end ops of one thread's slices, lane by lane: the same walk
 * as the lane assignment, so every lane nests properly. */
static int slice_ops(struct sp_export *x, const struct sp_xthread *t, uint64_t base_uuid,
		     struct ops *ops)
{
	struct lstack *ls = calloc((size_t)t->lanes, sizeof(*ls));
	size_t i;
	int l, ret = -1;

	if (!ls)
		return -1;
	for (l = 0; l < t->lanes; l++)
		if (!(ls[l].ev = malloc((t->n ? t->n : 1) * sizeof(size_t))))
			goto out;
	for (i = t->first; i < t->first + t->n; i++) {
		const struct sp_xevent *e = &x->ev[i];
		struct lstack *s = &ls[e->lane];

		while (s->n && x->ev[s->ev[s->n - 1]].start_ns + x->ev[s->ev[s->n - 1]].wall_ns <=
				       e->start_ns) {
			const struct sp_xevent *d = &x->ev[s->ev[--s->n]];

			if (push_op(ops, (struct op){ .ts = d->start_ns + d->wall_ns,
						      .track = base_uuid + (uint64_t)d->lane,
						      .type = TYPE_END }) < 0)
				goto out;
		}
		if (push_op(ops, (struct op){ .ts = e->start_ns, .track = base_uuid + (uint64_t)e->lane,
					      .ev = i, .type = TYPE_BEGIN }) < 0)
			goto out;
		s->ev[s->n++] = i;
	}
	for (l = 0; l < t->lanes; l++)
		while (ls[l].n) {
			const struct sp_xevent *d = &x->ev[ls[l].ev[--ls[l].n]];

			if (push_op(ops, (struct op){ .ts = d->start_ns + d->wall_ns,
						      .track = base_uuid + (uint64_t)l,
						      .type = TYPE_END }) < 0)
				goto out;
		}
	ret = 0;
out:
	for (l = 0; l < t->lanes; l++)
		free(ls[l].ev);
	free(ls);
	return ret;
}

static void emit_op(struct pb *p, struct sp_export *x, const struct op *op, uint64_t *iid,
		    uint64_t *next_iid, int *first)
{
	const struct sp_xevent *e = op->type == TYPE_BEGIN ? &x->ev[op->ev] : NULL;
	uint64_t name_iid = 0;

	f_varint(p, PK_TIMESTAMP, op->ts);
	f_varint(p, PK_SEQ_ID, SEQ_ID);
	f_varint(p, PK_SEQ_FLAGS, *first ? SEQ_CLEARED : SEQ_NEEDS_STATE);
	*first = 0;
	if (e) {
		size_t qi = e->q ? (size_t)(e->q - x->qs.rows) : x->qs.n; /* qs.n: unknown */

		if (!iid[qi]) {
			iid[qi] = (*next_iid)++;
			begin(p, PK_INTERNED);
			begin(p, ID_EVENT_NAMES);
			f_varint(p, EN_IID, iid[qi]);
			f_str(p, EN_NAME, sp_export_qname(x, e->q) ? sp_export_qname(x, e->q) : "?");
			end(p);
			end(p);
		}
		name_iid = iid[qi];
	}
	begin(p, PK_TRACK_EVENT);
	f_varint(p, TE_TYPE, (uint64_t)op->type);
	f_varint(p, TE_TRACK, op->track);
	if (e) {
		f_varint(p, TE_NAME_IID, name_iid);
		f_str(p, TE_CATEGORIES, "sql");
		if (e->q && !strcmp(e->q->kind, "exec"))
			f_str(p, TE_CATEGORIES, "exec");
		annot_str(p, "sql", e->sql);
		annot_u(p, "rows", e->rows);
		annot_i(p, "rc", e->rc);
		annot_u(p, "vm_steps", e->vm_steps);
		annot_str(p, "site", e->site);
		annot_u(p, "db_ns", e->db_ns);
	}
	if (op->type == TYPE_COUNTER)
		f_varint(p, TE_COUNTER_VALUE, op->value);
	end(p);
}

int sp_export_perfetto(FILE *f, struct sp_export *x)
{
	struct pb p = { 0 }, o = { 0 };
	struct ops ops = { 0 };
	uint64_t *iid = NULL, next_iid = 1, uuid = 1;
	size_t i, j, k;
	int first = 1, ret = -1;

	if (sp_export_events(x) < 0)
		goto out;
	iid = calloc(x->qs.n + 1, sizeof(*iid));
	if (!iid)
		goto out;
	for (i = 0; i < x->nth; i = j) {
		uint64_t pid = x->th[i].pid, proc_uuid, counter_uuid;
		const char *pname = sp_export_proc_name(x, pid);

		for (j = i; j < x->nth && x->th[j].pid == pid; j++)
			;
		if (!pname)
			goto out;
		proc_uuid = uuid++;
		track_desc(&p, &first, proc_uuid, 0, pname);
		begin(&p, TD_PROCESS);
		f_varint(&p, PD_PID, pid);
		f_str(&p, PD_NAME, pname);
		end(&p);
		end(&p);
		flush_packet(f, &p, &o);
		counter_uuid = uuid++;
		track_desc(&p, &first, counter_uuid, proc_uuid, "sampled executions/s");
		begin(&p, TD_COUNTER);
		end(&p);
		end(&p);
		flush_packet(f, &p, &o);
		if (counter_ops(x, i, j, counter_uuid, &ops) < 0)
			goto out;
		for (k = i; k < j; k++) {
			const struct sp_xthread *t = &x->th[k];
			uint64_t tu = uuid;
			char *tname = NULL;
			int l;

			uuid += (uint64_t)t->lanes;
			if (t->tid == t->pid ? !(tname = strdup(pname))
					     : asprintf(&tname, "thread %llu", (unsigned long long)t->tid) < 0)
				goto out;
			track_desc(&p, &first, tu, proc_uuid, tname);
			begin(&p, TD_THREAD);
			f_varint(&p, THD_PID, t->pid);
			f_varint(&p, THD_TID, t->tid);
			f_str(&p, THD_NAME, tname);
			end(&p);
			end(&p);
			flush_packet(f, &p, &o);
			for (l = 1; l < t->lanes; l++) {
				char lname[400];

				snprintf(lname, sizeof(lname), "%s: overlapping executions %d", tname, l);
				track_desc(&p, &first, tu + (uint64_t)l, tu, lname);
				end(&p);
				flush_packet(f, &p, &o);
			}
			free(tname);
			if (slice_ops(x, t, tu, &ops) < 0)
				goto out;
		}
	}
	if (ops.n > 1)
		sp_qsort(ops.v, ops.n, sizeof(*ops.v), cmp_op);
	for (i = 0; i < ops.n; i++) {
		emit_op(&p, x, &ops.v[i], iid, &next_iid, &first);
		flush_packet(f, &p, &o);
	}
	ret = p.oom || o.oom ? -1 : 0;
out:
	free(iid);
	free(ops.v);
	free(p.b);
	free(o.b);
	return ret;
}
