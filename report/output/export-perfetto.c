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
 * per second per process, and, from the profile's intervals, counter
 * tracks of executions/s and p95 latency of the top queries; then, in time order, a slice begin and end
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
#include "series.h"

/* TracePacket */
enum {
	PK_TIMESTAMP = 8,
	PK_SEQ_ID = 10,
	PK_TRACK_EVENT = 11,
	PK_INTERNED = 12,
	PK_SEQ_FLAGS = 13,
	PK_TRACK_DESC = 60
};
enum { SEQ_CLEARED = 1, SEQ_NEEDS_STATE = 2 };
/* TrackDescriptor, ProcessDescriptor, ThreadDescriptor */
enum { TD_UUID = 1, TD_NAME = 2, TD_PROCESS = 3, TD_THREAD = 4, TD_PARENT = 5, TD_COUNTER = 8 };
enum { PD_PID = 1, PD_NAME = 6 };
enum { THD_PID = 1, THD_TID = 2, THD_NAME = 5 };
/* TrackEvent */
enum {
	TE_DEBUG = 4,
	TE_TYPE = 9,
	TE_NAME_IID = 10,
	TE_TRACK = 11,
	TE_CATEGORIES = 22,
	TE_COUNTER_VALUE = 30
};
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

/* A counter value at ts on track (sampled executions/s of a process). */
struct cop {
	uint64_t ts, track, value;
};

/* An open execution's end, waiting in a min-heap by (ts, key): key is the
 * begin's serial inverted, so of ends at the same time the inner (later
 * begun) one comes first. */
struct pend {
	uint64_t ts, key, track;
};

struct heap {
	struct pend *v;
	size_t n, cap;
};

static int pend_less(const struct pend *a, const struct pend *b)
{
	return a->ts != b->ts ? a->ts < b->ts : a->key < b->key;
}

static int heap_push(struct heap *h, struct pend e)
{
	size_t i;

	if (SP_GROW(h->v, h->cap, h->n + 1, 64) < 0)
		return -1;
	for (i = h->n++; i && pend_less(&e, &h->v[(i - 1) / 2]); i = (i - 1) / 2)
		h->v[i] = h->v[(i - 1) / 2];
	h->v[i] = e;
	return 0;
}

static struct pend heap_pop(struct heap *h)
{
	struct pend top = h->v[0], last = h->v[--h->n];
	size_t i = 0, c;

	while ((c = 2 * i + 1) < h->n) {
		if (c + 1 < h->n && pend_less(&h->v[c + 1], &h->v[c]))
			c++;
		if (!pend_less(&h->v[c], &last))
			break;
		h->v[i] = h->v[c];
		i = c;
	}
	if (h->n)
		h->v[i] = last;
	return top;
}

/* One lane of a thread: the ends of the slices still open on it (a proper
 * slice stack), and its track. */
struct lane {
	uint64_t *ends;
	size_t n, cap;
	uint64_t uuid;
};

struct pthr {
	uint64_t uuid;
	char *name;
	struct lane *ln;
	size_t nl;
};

struct pctx {
	FILE *f;
	struct pb p, o;
	int first;
	uint64_t uuid, serial, *iid, next_iid;
	struct pthr *th;        /* parallel to x->th */
	struct hmap thidx;      /* {pid, tid} -> index in th */
	uint64_t *counter_uuid; /* per x->th index: its process's counter track */
	struct cop *c;
	size_t nc, ci;
	struct heap h;
};

/* A timed packet: on our sequence, needing its interned state (the very
 * first packet clears it instead). */
static void timed_packet(struct pctx *c, uint64_t ts)
{
	int first = c->first;

	packet_start(&c->p, &c->first);
	f_varint(&c->p, PK_TIMESTAMP, ts);
	if (!first)
		f_varint(&c->p, PK_SEQ_FLAGS, SEQ_NEEDS_STATE);
}

static void emit_counter(struct pctx *c, const struct cop *op)
{
	timed_packet(c, op->ts);
	begin(&c->p, PK_TRACK_EVENT);
	f_varint(&c->p, TE_TYPE, TYPE_COUNTER);
	f_varint(&c->p, TE_TRACK, op->track);
	f_varint(&c->p, TE_COUNTER_VALUE, op->value);
	end(&c->p);
	flush_packet(c->f, &c->p, &c->o);
}

static void emit_end(struct pctx *c, const struct pend *e)
{
	timed_packet(c, e->ts);
	begin(&c->p, PK_TRACK_EVENT);
	f_varint(&c->p, TE_TYPE, TYPE_END);
	f_varint(&c->p, TE_TRACK, e->track);
	end(&c->p);
	flush_packet(c->f, &c->p, &c->o);
}

/* Everything due by ts (all of it with ts UINT64_MAX): counter values
 * first, then ends, in time order. */
static void flush_until(struct pctx *c, uint64_t ts)
{
	for (;;) {
		int have_c = c->ci < c->nc && c->c[c->ci].ts <= ts;
		int have_e = c->h.n && c->h.v[0].ts <= ts;

		if (have_c && (!have_e || c->c[c->ci].ts <= c->h.v[0].ts))
			emit_counter(c, &c->c[c->ci++]);
		else if (have_e) {
			struct pend e = heap_pop(&c->h);

			emit_end(c, &e);
		} else
			return;
	}
}

/* The lane of an execution starting at start and ending at stop on thread
 * t: the first whose open slices it nests in (each lane stays a proper
 * slice stack; wall times of two interleaved statements overlap without
 * nesting). A new lane is a child track of the thread, described here. */
static struct lane *lane_for(struct pctx *c, struct pthr *t, uint64_t start, uint64_t stop)
{
	size_t l;

	for (l = 0;; l++) {
		if (l == t->nl) {
			struct lane *nl = realloc(t->ln, (t->nl + 1) * sizeof(*nl));

			if (!nl)
				return NULL;
			t->ln = nl;
			t->ln[t->nl] = (struct lane){ .uuid = l ? c->uuid++ : t->uuid };
			if (l) {
				char lname[400];

				snprintf(lname, sizeof(lname), "%s: overlapping executions %zu",
					 t->name, l);
				track_desc(&c->p, &c->first, t->ln[l].uuid, t->uuid, lname);
				end(&c->p);
				flush_packet(c->f, &c->p, &c->o);
			}
			t->nl++;
		}
		while (t->ln[l].n && t->ln[l].ends[t->ln[l].n - 1] <= start)
			t->ln[l].n--;
		if (!t->ln[l].n || t->ln[l].ends[t->ln[l].n - 1] >= stop)
			break;
	}
	if (SP_GROW(t->ln[l].ends, t->ln[l].cap, t->ln[l].n + 1, 16) < 0)
		return NULL;
	t->ln[l].ends[t->ln[l].n++] = stop;
	return &t->ln[l];
}

/* One sampled execution, in start order over every thread: what is due
 * before it, then its slice begin; its end waits in the heap. */
static int slice(struct sp_export *x, const struct sp_xevent *e, void *arg)
{
	struct pctx *c = arg;
	uint64_t k[2] = { e->pid, e->tid }, end_ts = e->start_ns + e->wall_ns, name_iid;
	const size_t *ti = hmap_get(&c->thidx, k, 0, NULL);
	size_t qi = e->q ? (size_t)(e->q - x->qs.rows) : x->qs.n; /* qs.n: unknown */
	struct lane *ln;

	if (!ti)
		return 0; /* cannot happen: the threads came from the same table */
	flush_until(c, e->start_ns);
	ln = lane_for(c, &c->th[*ti], e->start_ns, end_ts);
	if (!ln)
		return -1;
	timed_packet(c, e->start_ns);
	if (!c->iid[qi]) {
		const char *name = sp_export_qname(x, e->q);

		c->iid[qi] = c->next_iid++;
		begin(&c->p, PK_INTERNED);
		begin(&c->p, ID_EVENT_NAMES);
		f_varint(&c->p, EN_IID, c->iid[qi]);
		f_str(&c->p, EN_NAME, name ? name : "?");
		end(&c->p);
		end(&c->p);
	}
	name_iid = c->iid[qi];
	begin(&c->p, PK_TRACK_EVENT);
	f_varint(&c->p, TE_TYPE, TYPE_BEGIN);
	f_varint(&c->p, TE_TRACK, ln->uuid);
	f_varint(&c->p, TE_NAME_IID, name_iid);
	f_str(&c->p, TE_CATEGORIES, "sql");
	if (e->q && e->q->kind == SP_QK_EXEC)
		f_str(&c->p, TE_CATEGORIES, "exec");
	annot_str(&c->p, "sql", e->sql);
	annot_u(&c->p, "rows", e->rows);
	annot_i(&c->p, "rc", e->rc);
	annot_u(&c->p, "vm_steps", e->vm_steps);
	annot_str(&c->p, "site", e->site);
	annot_u(&c->p, "db_ns", e->db_ns);
	end(&c->p);
	flush_packet(c->f, &c->p, &c->o);
	return heap_push(&c->h, (struct pend){ end_ts, UINT64_MAX - c->serial++, ln->uuid });
}

static int cmp_cop(const void *pa, const void *pb)
{
	const struct cop *a = pa, *b = pb;

	if (a->ts != b->ts)
		return a->ts < b->ts ? -1 : 1;
	return a->track < b->track ? -1 : a->track > b->track;
}

/* Counter values of every process: sampled executions started in each
 * second, back to 0 after a gap, in one pass over the events grouped by
 * process and second (times clamped as the events are). */
static int load_counters(struct sp_export *x, struct pctx *c)
{
	sqlite3_stmt *st;
	size_t cap = 0;
	uint64_t lastpid = 0, lastsec = 0, track = 0;
	int have = 0, rc;

	if (sqlite3_prepare_v2(
		    x->db,
		    "SELECT pid, (CASE WHEN start_ns > 4611686018427387904 THEN"
		    " 4611686018427387904 WHEN start_ns > 0 THEN start_ns ELSE 0 END)"
		    " / 1000000000 AS s, COUNT(*) FROM events GROUP BY pid, s ORDER BY pid, s",
		    -1, &st, NULL) != SQLITE_OK)
		return -1;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW || rc == SQLITE_DONE) {
		uint64_t pid = rc == SQLITE_ROW ? (uint64_t)sqlite3_column_int64(st, 0) : 0;
		uint64_t sec = rc == SQLITE_ROW ? (uint64_t)sqlite3_column_int64(st, 1) : 0;

		if (SP_GROW(c->c, cap, c->nc + 2, 64) < 0)
			goto fail;
		/* the previous second's drop to 0, unless the next follows it */
		if (have && (rc == SQLITE_DONE || pid != lastpid || sec != lastsec + 1))
			c->c[c->nc++] = (struct cop){ (lastsec + 1) * 1000000000ULL, track, 0 };
		if (rc == SQLITE_DONE)
			break;
		if (!have || pid != lastpid) {
			size_t i;

			track = 0;
			for (i = 0; i < x->nth && !track; i++) /* the process's first thread */
				if (x->th[i].pid == pid)
					track = c->counter_uuid[i];
		}
		c->c[c->nc++] = (struct cop){ sec * 1000000000ULL, track,
					      (uint64_t)sqlite3_column_int64(st, 2) };
		have = 1;
		lastpid = pid;
		lastsec = sec;
	}
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE)
		return -1;
	if (c->nc > 1)
		sp_qsort(c->c, c->nc, sizeof(*c->c), cmp_cop);
	return 0;
fail:
	sqlite3_finalize(st);
	return -1;
}

/* The profile's time series (series.h): a counter track of executions/s
 * and one of p95 latency for each of the SERIES_TOP costliest queries,
 * top-level tracks described here, their values merged into c->c. */
#define SERIES_TOP 8
static int series_counters(struct sp_export *x, struct pctx *c)
{
	struct sp_series_point *pts;
	char **names;
	size_t nt, np, base = c->uuid;
	struct cop *n;
	int rc = -1;

	if (sp_series_points(x->db, SERIES_TOP, &names, &nt, &pts, &np) < 0)
		return -1;
	if (!np) {
		rc = 0;
		goto out;
	}
	for (size_t t = 0; t < nt; t++) {
		track_desc(&c->p, &c->first, c->uuid++, 0, names[t]);
		begin(&c->p, TD_COUNTER);
		end(&c->p);
		end(&c->p);
		flush_packet(c->f, &c->p, &c->o);
	}
	n = realloc(c->c, (c->nc + np) * sizeof(*n));
	if (!n)
		goto out;
	c->c = n;
	for (size_t i = 0; i < np; i++)
		c->c[c->nc++] = (struct cop){ pts[i].ts, base + pts[i].track, pts[i].value };
	sp_qsort(c->c, c->nc, sizeof(*c->c), cmp_cop);
	rc = 0;
out:
	for (size_t t = 0; t < nt; t++)
		free(names[t]);
	free(names);
	free(pts);
	return rc;
}

/*
 * The trace, streamed: track descriptors of every process (with its
 * counter track) and thread first; then, in start order over all threads,
 * each sampled execution's slice begin, with the ends and counter values
 * due before it. The executions come from the profile one at a time
 * (SQLite sorts them), so memory holds the open slices, not the events
 * (1 M events: 268 MB when every event and every begin and end were held
 * and sorted).
 */
int sp_export_perfetto(FILE *f, struct sp_export *x)
{
	struct pctx c = { .f = f, .first = 1, .uuid = 1, .next_iid = 1 };
	size_t i, j, k;
	int ret = -1;

	hmap_init(&c.thidx, 2 * sizeof(uint64_t), sizeof(size_t));
	if (sp_export_events_each(x, 0, NULL, NULL) < 0)
		goto out;
	c.iid = calloc(x->qs.n + 1, sizeof(*c.iid));
	c.th = calloc(x->nth + 1, sizeof(*c.th));
	c.counter_uuid = calloc(x->nth + 1, sizeof(*c.counter_uuid));
	if (!c.iid || !c.th || !c.counter_uuid)
		goto out;
	for (i = 0; i < x->nth; i = j) {
		uint64_t pid = x->th[i].pid, proc_uuid, counter_uuid;
		const char *pname = sp_export_proc_name(x, pid);

		for (j = i; j < x->nth && x->th[j].pid == pid; j++)
			;
		if (!pname)
			goto out;
		proc_uuid = c.uuid++;
		track_desc(&c.p, &c.first, proc_uuid, 0, pname);
		begin(&c.p, TD_PROCESS);
		f_varint(&c.p, PD_PID, pid);
		f_str(&c.p, PD_NAME, pname);
		end(&c.p);
		end(&c.p);
		flush_packet(f, &c.p, &c.o);
		counter_uuid = c.uuid++;
		track_desc(&c.p, &c.first, counter_uuid, proc_uuid, "sampled executions/s");
		begin(&c.p, TD_COUNTER);
		end(&c.p);
		end(&c.p);
		flush_packet(f, &c.p, &c.o);
		for (k = i; k < j; k++) {
			const struct sp_xthread *t = &x->th[k];
			uint64_t key[2] = { t->pid, t->tid };
			size_t *v = hmap_get(&c.thidx, key, 1, NULL);

			if (!v)
				goto out;
			*v = k;
			c.counter_uuid[k] = counter_uuid;
			c.th[k].uuid = c.uuid++;
			if (t->tid == t->pid ? !(c.th[k].name = strdup(pname))
					     : asprintf(&c.th[k].name, "thread %llu",
							(unsigned long long)t->tid) < 0) {
				c.th[k].name = NULL;
				goto out;
			}
			track_desc(&c.p, &c.first, c.th[k].uuid, proc_uuid, c.th[k].name);
			begin(&c.p, TD_THREAD);
			f_varint(&c.p, THD_PID, t->pid);
			f_varint(&c.p, THD_TID, t->tid);
			f_str(&c.p, THD_NAME, c.th[k].name);
			end(&c.p);
			end(&c.p);
			flush_packet(f, &c.p, &c.o);
		}
	}
	{
		char note[400];

		/* what the window and --max-events left out, said in the
		 * trace: a track named so, at the top */
		if (*sp_export_window_note(x, note, sizeof(note))) {
			track_desc(&c.p, &c.first, c.uuid++, 0, note);
			end(&c.p);
			flush_packet(f, &c.p, &c.o);
		}
	}
	if (load_counters(x, &c) < 0 || series_counters(x, &c) < 0)
		goto out;
	if (sp_export_events_each(x, 1, slice, &c) < 0)
		goto out;
	flush_until(&c, UINT64_MAX);
	ret = c.p.oom || c.o.oom ? -1 : 0;
out:
	for (i = 0; c.th && i < x->nth; i++) {
		for (k = 0; k < c.th[i].nl; k++)
			free(c.th[i].ln[k].ends);
		free(c.th[i].ln);
		free(c.th[i].name);
	}
	free(c.th);
	free(c.counter_uuid);
	free(c.iid);
	free(c.c);
	free(c.h.v);
	hmap_free(&c.thidx);
	free(c.p.b);
	free(c.o.b);
	return ret;
}
