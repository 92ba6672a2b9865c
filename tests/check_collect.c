/* SPDX-License-Identifier: MIT */
/*
 * check_collect.c - unit tests for report/collect.c, the stream decoder and
 * aggregator.
 *
 * Messages are built here by a small encoder that lays records out exactly
 * as the preload does (sp_msg_hdr, then records each 8-aligned with len
 * counting its header, pid and tid in every body). Tested: a round trip of
 * every record type into the aggregates; SQL text arriving after the
 * executions that reference it; skipping of unknown and PAD records; each
 * rejection rule, checking that a rejected message leaves the collector
 * exactly as it was (validate-then-apply); every truncated prefix of a
 * message; 20000 random mutations (fixed seed); and that a bad message from
 * one process leaves another's data alone; and that every value the maps
 * hand out is aligned for its type (it is not for procs: see
 * test_value_alignment).
 *
 * "Unchanged" is checked with a digest over every map entry (strings, stack
 * pcs and histograms by content), the event array and the counters; only
 * bad_messages and last_error may change on rejection.
 *
 * The map keys below mirror the private key structs of collect.c (their
 * layout is given in collect.h's comments); a size check fails loudly if
 * they drift.
 */
#include <check.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collect.h"

struct qkey {
	uint64_t sql_id, kind;
};
struct skey {
	uint64_t sql_id, kind, pid, stack_id;
};
struct stkey {
	uint64_t pid, stack_id;
};
struct mkey {
	uint64_t pid, generation, lo;
};

#define PID_A 4242u
#define PID_B 777u
#define SQL_X 0x1111222233334444ULL
#define SQL_Y 0x5555666677778888ULL
#define STACK_1 0xabcdef01ULL
#define MSG_CAP (SP_MSG_MAX + sizeof(struct sp_msg_hdr))

/* ---- encoder ---------------------------------------------------------------- */

struct enc {
	uint8_t *buf;
	size_t len;
	uint32_t pid;
	size_t ends[64]; /* offsets where a record (or the header) ends */
	size_t nends;
};

static void enc_begin(struct enc *e, uint32_t pid, uint64_t seq, uint64_t lost)
{
	struct sp_msg_hdr mh;

	if (!e->buf)
		e->buf = calloc(1, MSG_CAP);
	ck_assert_ptr_nonnull(e->buf);
	memset(&mh, 0, sizeof(mh));
	mh.magic = SP_WIRE_MAGIC;
	mh.version = SP_WIRE_VERSION;
	mh.pid = pid;
	mh.seq = seq;
	mh.lost = lost;
	memcpy(e->buf, &mh, sizeof(mh));
	e->len = sizeof(mh);
	e->pid = pid;
	e->nends = 0;
	e->ends[e->nends++] = e->len;
}

/* Patch the header's len to the bytes written; returns the length. */
static size_t enc_end(struct enc *e)
{
	uint32_t l = (uint32_t)e->len;

	memcpy(e->buf + offsetof(struct sp_msg_hdr, len), &l, sizeof(l));
	return e->len;
}

static void enc_free(struct enc *e)
{
	free(e->buf);
	e->buf = NULL;
}

/*
 * Append a record: fixed part rec (fixed bytes, type and flags already set
 * by the caller) followed by v1[n1] and v2[n2], zero-padded to 8. Sets
 * h.len, pid and tid (= the message pid) as the preload does. Returns the
 * record's offset in the message.
 */
static size_t enc_put(struct enc *e, const void *rec, size_t fixed, const void *v1, size_t n1,
		      const void *v2, size_t n2)
{
	size_t off = e->len;
	uint32_t rl = SP_ALIGN8((uint32_t)(fixed + n1 + n2));
	struct sp_rec_hdr h;

	ck_assert_uint_le(off + rl, MSG_CAP);
	memset(e->buf + off, 0, rl);
	memcpy(e->buf + off, rec, fixed);
	if (n1)
		memcpy(e->buf + off + fixed, v1, n1);
	if (n2)
		memcpy(e->buf + off + fixed + n1, v2, n2);
	memcpy(&h, e->buf + off, sizeof(h));
	h.len = rl;
	memcpy(e->buf + off, &h, sizeof(h));
	if (fixed >= sizeof(h) + 8) {
		memcpy(e->buf + off + sizeof(h), &e->pid, 4);
		memcpy(e->buf + off + sizeof(h) + 4, &e->pid, 4);
	}
	e->len += rl;
	if (e->nends < sizeof(e->ends) / sizeof(e->ends[0]))
		e->ends[e->nends++] = e->len;
	return off;
}

static size_t put_hello(struct enc *e, const char *exe, uint32_t clock)
{
	struct sp_rec_hello r = { .h.type = SP_REC_HELLO };

	r.ppid = 1;
	r.clock = clock;
	r.start_mono_ns = 1000;
	r.sqlite_found = 1;
	r.exe_len = (uint32_t)strlen(exe);
	return enc_put(e, &r, sizeof(r), exe, r.exe_len, NULL, 0);
}

static size_t put_sql(struct enc *e, uint64_t id, const char *text)
{
	struct sp_rec_sql r = { .h.type = SP_REC_SQL };

	r.sql_id = id;
	r.text_len = (uint32_t)strlen(text);
	r.full_len = r.text_len;
	return enc_put(e, &r, sizeof(r), text, r.text_len, NULL, 0);
}

static size_t put_lite(struct enc *e, uint64_t sql_id, uint64_t wall, uint64_t db, uint32_t rows,
		       uint32_t vm)
{
	struct sp_rec_exec_lite r = { .h.type = SP_REC_EXEC_LITE };

	r.sql_id = sql_id;
	r.wall = wall;
	r.db_time = db;
	r.rows = rows;
	r.vm_steps = vm;
	return enc_put(e, &r, sizeof(r), NULL, 0, NULL, 0);
}

static size_t put_exec(struct enc *e, uint64_t sql_id, uint16_t flags, uint64_t stack_id, uint64_t db,
		       uint64_t rows, uint32_t vm, int32_t rc)
{
	struct sp_rec_exec r = { .h.type = SP_REC_EXEC };

	r.h.flags = flags;
	r.sql_id = sql_id;
	r.seq = 7;
	r.db = 0x5000;
	r.start = 123456789;
	r.wall = db + 50;
	r.db_time = db;
	r.rows = rows;
	r.stack_id = stack_id;
	r.vm_steps = vm;
	r.fullscan_steps = 3;
	r.sorts = 1;
	r.rc = rc;
	r.kind = SP_KIND_STMT;
	return enc_put(e, &r, sizeof(r), NULL, 0, NULL, 0);
}

static size_t put_prepare(struct enc *e, uint64_t sql_id, uint64_t time)
{
	struct sp_rec_prepare r = { .h.type = SP_REC_PREPARE };

	r.sql_id = sql_id;
	r.db = 0x5000;
	r.time = time;
	return enc_put(e, &r, sizeof(r), NULL, 0, NULL, 0);
}

static size_t put_stack(struct enc *e, uint64_t id, const uint64_t *pcs, uint32_t depth)
{
	struct sp_rec_stack r = { .h.type = SP_REC_STACK };

	r.stack_id = id;
	r.depth = depth;
	return enc_put(e, &r, sizeof(r), pcs, (size_t)depth * 8, NULL, 0);
}

static size_t put_module(struct enc *e, const uint8_t *bid, uint16_t bid_len, const char *path)
{
	struct sp_rec_module r = { .h.type = SP_REC_MODULE };

	r.bias = 0x7f0000000000ULL;
	r.lo = 0x7f0000001000ULL;
	r.hi = 0x7f0000100000ULL;
	r.generation = 1;
	r.build_id_len = bid_len;
	r.path_len = (uint16_t)strlen(path);
	return enc_put(e, &r, sizeof(r), bid, bid_len, path, r.path_len);
}

static size_t put_error(struct enc *e, uint64_t sql_id, uint64_t stack_id, int32_t rc, const char *msg)
{
	struct sp_rec_error r = { .h.type = SP_REC_ERROR };

	r.exec_seq = 7;
	r.sql_id = sql_id;
	r.stack_id = stack_id;
	r.rc = rc;
	r.msg_len = (uint32_t)strlen(msg);
	return enc_put(e, &r, sizeof(r), msg, r.msg_len, NULL, 0);
}

static size_t put_bye(struct enc *e, uint64_t executions, uint64_t lost)
{
	struct sp_rec_bye r = { .h.type = SP_REC_BYE };

	r.executions = executions;
	r.untracked = 2;
	r.lost = lost;
	r.status = 0;
	return enc_put(e, &r, sizeof(r), NULL, 0, NULL, 0);
}

/* A record of the given type and total length (multiple of 8), body zero
 * apart from pid/tid when there is room for them. */
static size_t put_raw(struct enc *e, uint16_t type, uint32_t total)
{
	uint8_t tmp[512];
	struct sp_rec_hdr h = { .type = type };

	ck_assert_uint_le(total, sizeof(tmp));
	ck_assert_uint_ge(total, sizeof(h));
	memset(tmp, 0, sizeof(tmp));
	memcpy(tmp, &h, sizeof(h));
	if (total >= 16) {
		memcpy(tmp + 8, &e->pid, 4);
		memcpy(tmp + 12, &e->pid, 4);
	}
	return enc_put(e, tmp, total, NULL, 0, NULL, 0);
}

static void patch32(struct enc *e, size_t off, uint32_t v)
{
	memcpy(e->buf + off, &v, sizeof(v));
}

static void patch16(struct enc *e, size_t off, uint16_t v)
{
	memcpy(e->buf + off, &v, sizeof(v));
}

/* Offset of a record's len field. */
#define RLEN(rec) ((rec) + offsetof(struct sp_rec_hdr, len))

static const uint64_t pcs3[3] = { 0x401000, 0x402345, 0x7f0000001234ULL };
static const uint8_t bid20[20] = { 0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16 };
static const char exe_path[] = "/usr/bin/app-under-test"; /* 23 bytes: padded */
static const char sql_x_text[] = "SELECT * FROM t WHERE id = ?";
static const char mod_path[] = "/usr/lib/libsqlite3.so.0";
static const char err_msg[] = "UNIQUE constraint failed: t.id";

/*
 * The full message of the round trip: HELLO, SQL, 3 EXEC_LITE, 1 EXEC
 * (sampled, failed), PREPARE, STACK, MODULE, ERROR, BYE. 11 records.
 */
static size_t build_full(struct enc *e, uint32_t pid, uint64_t seq, uint64_t lost)
{
	enc_begin(e, pid, seq, lost);
	put_hello(e, exe_path, SP_CLOCK_MONOTONIC);
	put_sql(e, SQL_X, sql_x_text);
	put_lite(e, SQL_X, 110, 100, 1, 5);
	put_lite(e, SQL_X, 220, 200, 2, 6);
	put_lite(e, SQL_X, 330, 300, 3, 7);
	put_exec(e, SQL_X, SP_EXEC_SAMPLED | SP_EXEC_ERROR, STACK_1, 1000, 10, 50, 2067);
	put_prepare(e, SQL_X, 40);
	put_stack(e, STACK_1, pcs3, 3);
	put_module(e, bid20, sizeof(bid20), mod_path);
	put_error(e, SQL_X, STACK_1, 2067, err_msg);
	put_bye(e, 4, 3);
	return enc_end(e);
}

/* ---- lookups ------------------------------------------------------------------ */

static void check_key_sizes(const struct sp_coll *c)
{
	ck_assert_uint_eq(c->procs.keylen, sizeof(uint32_t));
	ck_assert_uint_eq(c->sqls.keylen, sizeof(uint64_t));
	ck_assert_uint_eq(c->queries.keylen, sizeof(struct qkey));
	ck_assert_uint_eq(c->sites.keylen, sizeof(struct skey));
	ck_assert_uint_eq(c->stacks.keylen, sizeof(struct stkey));
	ck_assert_uint_eq(c->modules.keylen, sizeof(struct mkey));
}

/* A copy of pid's process entry in *buf (the map's value may sit
 * misaligned, see test_value_alignment), or NULL when there is none. */
static struct sp_proc *get_proc(struct sp_coll *c, uint32_t pid, struct sp_proc *buf)
{
	void *v = hmap_get(&c->procs, &pid, 0, NULL);

	if (!v)
		return NULL;
	memcpy(buf, v, sizeof(*buf));
	return buf;
}

static struct sp_sql *get_sql(struct sp_coll *c, uint64_t id)
{
	return hmap_get(&c->sqls, &id, 0, NULL);
}

static struct sp_qagg *get_q(struct sp_coll *c, uint64_t sql_id, uint64_t kind)
{
	struct qkey k = { sql_id, kind };

	return hmap_get(&c->queries, &k, 0, NULL);
}

/* ---- state digest ------------------------------------------------------------- */

/* All uint64_t so that two snapshots compare with memcmp. */
struct snap {
	uint64_t procs, sqls, queries, sites, stacks, errors, modules;
	uint64_t nevents, events_dropped, records, messages;
	uint64_t digest;
};

static uint64_t mix(uint64_t acc, const void *p, size_t n)
{
	return (acc ^ sp_hash_bytes(p, n)) * 0x100000001b3ULL + n;
}

static uint64_t mix_str(uint64_t acc, const char *s)
{
	return s ? mix(acc, s, strlen(s) + 1) : mix(acc, "\xff", 1);
}

/* Order-independent digest of a map: the sum of its entries' hashes.
 * clean() turns a value into hashable bytes (pointers replaced by what
 * they point to) and returns the extra hash of the pointed-to data. */
static uint64_t map_digest(const struct hmap *m, uint64_t (*clean)(void *v))
{
	uint64_t tmp[512]; /* aligned for the value structs clean() casts to */
	uint64_t sum = 0;
	size_t it = 0;
	const void *key;
	void *v;

	ck_assert_uint_le(m->vallen, sizeof(tmp));
	while ((v = hmap_next(m, &it, &key))) {
		uint64_t h = mix(0, key, m->keylen), extra = 0;

		memcpy(tmp, v, m->vallen);
		if (clean)
			extra = clean(tmp);
		h = mix(h, tmp, m->vallen) ^ extra;
		sum += h;
	}
	return sum;
}

static uint64_t clean_proc(void *v)
{
	struct sp_proc *p = v;
	uint64_t h = mix_str(1, p->exe);

	p->exe = NULL;
	return h;
}

static uint64_t clean_sql(void *v)
{
	struct sp_sql *s = v;
	uint64_t h = mix_str(2, s->text);

	s->text = NULL;
	return h;
}

static uint64_t clean_qagg(void *v)
{
	struct sp_qagg *q = v;
	uint64_t a[5] = { 0 };

	if (q->hist) {
		a[0] = sp_hist_count(q->hist);
		a[1] = sp_hist_sum(q->hist);
		a[2] = sp_hist_min(q->hist);
		a[3] = sp_hist_max(q->hist);
		a[4] = sp_hist_quantile(q->hist, 0.5);
	}
	q->hist = NULL;
	return mix(3, a, sizeof(a));
}

static uint64_t clean_stack(void *v)
{
	struct sp_stack *s = v;
	uint64_t h = s->pcs ? mix(4, s->pcs, (size_t)s->depth * 8) : 4;

	s->pcs = NULL;
	return h;
}

static uint64_t clean_err(void *v)
{
	struct sp_err *e = v;
	uint64_t h = mix_str(5, e->msg);

	e->msg = NULL;
	return h;
}

static uint64_t clean_module(void *v)
{
	struct sp_module *m = v;
	uint64_t h = mix_str(6, m->path);

	m->path = NULL;
	return h;
}

static void snap_take(const struct sp_coll *c, struct snap *s)
{
	uint64_t d = 0;

	memset(s, 0, sizeof(*s));
	s->procs = c->procs.count;
	s->sqls = c->sqls.count;
	s->queries = c->queries.count;
	s->sites = c->sites.count;
	s->stacks = c->stacks.count;
	s->errors = c->errors.count;
	s->modules = c->modules.count;
	s->nevents = c->nevents;
	s->events_dropped = c->events_dropped;
	s->records = c->records;
	s->messages = c->messages;
	d = mix(d, &(uint64_t){ map_digest(&c->procs, clean_proc) }, 8);
	d = mix(d, &(uint64_t){ map_digest(&c->sqls, clean_sql) }, 8);
	d = mix(d, &(uint64_t){ map_digest(&c->queries, clean_qagg) }, 8);
	d = mix(d, &(uint64_t){ map_digest(&c->sites, NULL) }, 8);
	d = mix(d, &(uint64_t){ map_digest(&c->stacks, clean_stack) }, 8);
	d = mix(d, &(uint64_t){ map_digest(&c->errors, clean_err) }, 8);
	d = mix(d, &(uint64_t){ map_digest(&c->modules, clean_module) }, 8);
	for (size_t i = 0; i < c->nevents; i++) {
		const struct sp_event *ev = &c->events[i];
		uint64_t f[14] = { ev->pid, ev->tid, ev->seq, ev->parent_seq, ev->sql_id, ev->stack_id,
				   ev->start_ns, ev->wall_ns, ev->db_ns, ev->self_ns, ev->rows,
				   ev->vm_steps, ev->flags, (uint64_t)ev->rc ^ ((uint64_t)ev->kind << 40) };

		d = mix(d, f, sizeof(f));
	}
	s->digest = d;
}

static void snap_assert_eq(const struct snap *a, const struct snap *b, const char *what)
{
	ck_assert_msg(a->procs == b->procs, "%s: procs %lu -> %lu", what, (unsigned long)a->procs,
		      (unsigned long)b->procs);
	ck_assert_msg(a->sqls == b->sqls, "%s: sqls changed", what);
	ck_assert_msg(a->queries == b->queries, "%s: queries changed", what);
	ck_assert_msg(a->sites == b->sites, "%s: sites changed", what);
	ck_assert_msg(a->stacks == b->stacks, "%s: stacks changed", what);
	ck_assert_msg(a->errors == b->errors, "%s: errors changed", what);
	ck_assert_msg(a->modules == b->modules, "%s: modules changed", what);
	ck_assert_msg(a->nevents == b->nevents, "%s: events changed", what);
	ck_assert_msg(a->events_dropped == b->events_dropped, "%s: events_dropped changed", what);
	ck_assert_msg(a->records == b->records, "%s: records %lu -> %lu", what,
		      (unsigned long)a->records, (unsigned long)b->records);
	ck_assert_msg(a->messages == b->messages, "%s: messages changed", what);
	ck_assert_msg(a->digest == b->digest, "%s: contents changed", what);
}

/*
 * Feed a copy of msg[0..len) (in an allocation of exactly len bytes, so
 * that the address sanitizer sees any over-read) and require rejection
 * with nothing changed but bad_messages (+1) and last_error.
 */
static void expect_reject(struct sp_coll *c, const uint8_t *msg, size_t len, uint32_t peer,
			  const char *what)
{
	struct snap before, after;
	uint64_t bad = c->bad_messages;
	uint8_t *copy = malloc(len ? len : 1);
	int rc;

	ck_assert_ptr_nonnull(copy);
	if (len)
		memcpy(copy, msg, len);
	snap_take(c, &before);
	c->last_error[0] = 0;
	rc = sp_coll_message(c, copy, len, peer);
	free(copy);
	ck_assert_msg(rc == -1, "%s: accepted (rc %d)", what, rc);
	ck_assert_msg(c->last_error[0] != 0, "%s: no reason in last_error", what);
	ck_assert_msg(c->bad_messages == bad + 1, "%s: bad_messages not counted", what);
	snap_take(c, &after);
	snap_assert_eq(&before, &after, what);
}

static void expect_accept(struct sp_coll *c, const uint8_t *msg, size_t len, uint32_t peer,
			  const char *what)
{
	uint8_t *copy = malloc(len ? len : 1);
	int rc;

	ck_assert_ptr_nonnull(copy);
	memcpy(copy, msg, len);
	rc = sp_coll_message(c, copy, len, peer);
	free(copy);
	ck_assert_msg(rc == 0, "%s: rejected: %s", what, c->last_error);
}

/* ---- round trip --------------------------------------------------------------- */

START_TEST(test_round_trip)
{
	struct sp_coll c;
	struct sp_proc pbuf;
	struct enc e = { 0 };
	size_t len = build_full(&e, PID_A, 1, 5);
	struct sp_proc *p;
	struct sp_sql *s;
	struct sp_qagg *q;
	struct sp_sagg *sa;
	struct sp_stack *st;
	struct sp_module *m;
	struct sp_err *er;
	struct skey sk = { SQL_X, SP_KIND_STMT, PID_A, STACK_1 };
	struct stkey stk = { PID_A, STACK_1 };
	struct mkey mk = { PID_A, 1, 0x7f0000001000ULL };
	size_t it = 0;

	sp_coll_init(&c);
	check_key_sizes(&c);
	ck_assert_int_eq(sp_coll_message(&c, e.buf, len, PID_A), 0);
	ck_assert_uint_eq(c.messages, 1);
	ck_assert_uint_eq(c.bad_messages, 0);
	ck_assert_uint_eq(c.records, 11);

	p = get_proc(&c, PID_A, &pbuf);
	ck_assert_ptr_nonnull(p);
	ck_assert_uint_eq(c.procs.count, 1);
	ck_assert_uint_eq(p->pid, PID_A);
	ck_assert_uint_eq(p->ppid, 1);
	ck_assert_int_eq(p->hello, 1);
	ck_assert_int_eq(p->bye, 1);
	ck_assert_int_eq(p->sqlite_found, 1);
	ck_assert_int_eq(p->clock, SP_CLOCK_MONOTONIC);
	ck_assert_ptr_nonnull(p->exe);
	ck_assert_str_eq(p->exe, exe_path);
	ck_assert_uint_eq(p->execs, 4);
	ck_assert_uint_eq(p->bye_execs, 4);
	ck_assert_uint_eq(p->untracked, 2);
	ck_assert_uint_eq(p->msgs, 1);
	ck_assert_uint_eq(p->last_seq, 1);
	ck_assert_uint_eq(p->lost, 5); /* header 5 > BYE 3 */
	ck_assert_uint_eq(sp_coll_lost(&c), 5);
	ck_assert_uint_eq(sp_coll_executions(&c), 4);

	s = get_sql(&c, SQL_X);
	ck_assert_ptr_nonnull(s);
	ck_assert_str_eq(s->text, sql_x_text);
	ck_assert_uint_eq(s->full_len, strlen(sql_x_text));
	ck_assert_int_eq(s->truncated, 0);

	ck_assert_uint_eq(c.queries.count, 1);
	q = get_q(&c, SQL_X, SP_KIND_STMT);
	ck_assert_ptr_nonnull(q);
	ck_assert_uint_eq(q->count, 4);
	ck_assert_uint_eq(q->total_ns, 100 + 200 + 300 + 1000);
	ck_assert_uint_eq(q->self_ns, 100 + 200 + 300 + 1000);
	ck_assert_uint_eq(q->wall_ns, 110 + 220 + 330 + 1050);
	ck_assert_uint_eq(q->rows, 1 + 2 + 3 + 10);
	ck_assert_uint_eq(q->vm_steps, 5 + 6 + 7 + 50);
	ck_assert_uint_eq(q->fullscan_steps, 3);
	ck_assert_uint_eq(q->sorts, 1);
	ck_assert_uint_eq(q->errors, 1);
	ck_assert_uint_eq(q->samples, 1);
	ck_assert_uint_eq(q->prepares, 1);
	ck_assert_uint_eq(q->prepare_ns, 40);
	ck_assert_ptr_nonnull(q->hist);
	ck_assert_uint_eq(sp_hist_count(q->hist), 4);
	ck_assert_uint_eq(sp_hist_sum(q->hist), 1600);
	ck_assert_uint_eq(sp_hist_min(q->hist), 100);
	ck_assert_uint_eq(sp_hist_max(q->hist), 1000);

	sa = hmap_get(&c.sites, &sk, 0, NULL);
	ck_assert_ptr_nonnull(sa);
	ck_assert_uint_eq(sa->samples, 1);
	ck_assert_uint_eq(sa->total_ns, 1000);
	ck_assert_uint_eq(sa->rows, 10);
	ck_assert_uint_eq(sa->vm_steps, 50);

	ck_assert_uint_eq(c.nevents, 1);
	ck_assert_uint_eq(c.events[0].pid, PID_A);
	ck_assert_uint_eq(c.events[0].sql_id, SQL_X);
	ck_assert_uint_eq(c.events[0].stack_id, STACK_1);
	ck_assert_uint_eq(c.events[0].start_ns, 123456789);
	ck_assert_uint_eq(c.events[0].db_ns, 1000);
	ck_assert_int_eq(c.events[0].rc, 2067);

	st = hmap_get(&c.stacks, &stk, 0, NULL);
	ck_assert_ptr_nonnull(st);
	ck_assert_uint_eq(st->depth, 3);
	ck_assert_mem_eq(st->pcs, pcs3, sizeof(pcs3));

	m = hmap_get(&c.modules, &mk, 0, NULL);
	ck_assert_ptr_nonnull(m);
	ck_assert_uint_eq(m->pid, PID_A);
	ck_assert_uint_eq(m->bias, 0x7f0000000000ULL);
	ck_assert_uint_eq(m->hi, 0x7f0000100000ULL);
	ck_assert_uint_eq(m->build_id_len, sizeof(bid20));
	ck_assert_mem_eq(m->build_id, bid20, sizeof(bid20));
	ck_assert_str_eq(m->path, mod_path);

	ck_assert_uint_eq(c.errors.count, 1);
	er = hmap_next(&c.errors, &it, NULL);
	ck_assert_ptr_nonnull(er);
	ck_assert_uint_eq(er->count, 1);
	ck_assert_str_eq(er->msg, err_msg);

	sp_coll_free(&c);
	enc_free(&e);
}
END_TEST

/*
 * Every value the collector keeps must be aligned for its type: the code
 * that fills and reads them (collect.c, profile.c) accesses them through
 * typed pointers. hmap places a value right after its key, so a map with
 * a 4-byte key (procs: pid) hands out values at 4 mod 8.
 */
static void check_aligned(const struct hmap *m, size_t align, const char *name)
{
	size_t it = 0;
	void *v;

	while ((v = hmap_next(m, &it, NULL)))
		ck_assert_msg((uintptr_t)v % align == 0, "%s: value at %p is not %zu-aligned", name, v,
			      align);
}

START_TEST(test_value_alignment)
{
	struct sp_coll c;
	struct enc e = { 0 };
	size_t len = build_full(&e, PID_A, 1, 0);

	sp_coll_init(&c);
	ck_assert_int_eq(sp_coll_message(&c, e.buf, len, PID_A), 0);
	check_aligned(&c.sqls, _Alignof(struct sp_sql), "sqls");
	check_aligned(&c.queries, _Alignof(struct sp_qagg), "queries");
	check_aligned(&c.sites, _Alignof(struct sp_sagg), "sites");
	check_aligned(&c.stacks, _Alignof(struct sp_stack), "stacks");
	check_aligned(&c.errors, _Alignof(struct sp_err), "errors");
	check_aligned(&c.modules, _Alignof(struct sp_module), "modules");
	check_aligned(&c.procs, _Alignof(struct sp_proc), "procs");
	sp_coll_free(&c);
	enc_free(&e);
}
END_TEST

/* lost is the maximum of the headers' cumulative counts (and BYE's);
 * sequence gaps are counted. */
START_TEST(test_lost_and_seq)
{
	struct sp_coll c;
	struct sp_proc pbuf;
	struct enc e = { 0 };
	struct sp_proc *p;
	size_t len;

	sp_coll_init(&c);
	enc_begin(&e, PID_A, 1, 7);
	put_hello(&e, exe_path, SP_CLOCK_MONOTONIC);
	len = enc_end(&e);
	ck_assert_int_eq(sp_coll_message(&c, e.buf, len, 0), 0);
	enc_begin(&e, PID_A, 3, 2); /* seq 2 missing; lost reported lower */
	put_lite(&e, SQL_X, 1, 1, 0, 0);
	len = enc_end(&e);
	ck_assert_int_eq(sp_coll_message(&c, e.buf, len, 0), 0);
	p = get_proc(&c, PID_A, &pbuf);
	ck_assert_ptr_nonnull(p);
	ck_assert_uint_eq(p->lost, 7);
	ck_assert_uint_eq(p->gaps, 1);
	ck_assert_uint_eq(p->last_seq, 3);
	ck_assert_uint_eq(p->msgs, 2);
	enc_begin(&e, PID_A, 4, 9);
	len = enc_end(&e);
	ck_assert_int_eq(sp_coll_message(&c, e.buf, len, 0), 0);
	ck_assert_uint_eq(get_proc(&c, PID_A, &pbuf)->lost, 9);
	enc_begin(&e, PID_A, 5, 9);
	put_bye(&e, 1, 12); /* BYE's own count may be higher still */
	len = enc_end(&e);
	ck_assert_int_eq(sp_coll_message(&c, e.buf, len, 0), 0);
	ck_assert_uint_eq(get_proc(&c, PID_A, &pbuf)->lost, 12);
	ck_assert_uint_eq(sp_coll_lost(&c), 12);
	sp_coll_free(&c);
	enc_free(&e);
}
END_TEST

/* Executions arrive in a message before the one carrying their SQL text. */
START_TEST(test_sql_after_exec)
{
	struct sp_coll c;
	struct enc e = { 0 };
	struct sp_qagg *q;
	struct sp_sql *s;
	size_t len;

	sp_coll_init(&c);
	enc_begin(&e, PID_A, 1, 0);
	put_lite(&e, SQL_Y, 10, 9, 1, 2);
	put_exec(&e, SQL_Y, 0, 0, 20, 3, 4, 0);
	len = enc_end(&e);
	ck_assert_int_eq(sp_coll_message(&c, e.buf, len, PID_A), 0);
	q = get_q(&c, SQL_Y, SP_KIND_STMT);
	ck_assert_ptr_nonnull(q);
	ck_assert_uint_eq(q->count, 2);
	ck_assert_ptr_null(get_sql(&c, SQL_Y));

	enc_begin(&e, PID_A, 2, 0);
	put_sql(&e, SQL_Y, "UPDATE t SET x = x + 1");
	put_lite(&e, SQL_Y, 10, 11, 1, 2);
	len = enc_end(&e);
	ck_assert_int_eq(sp_coll_message(&c, e.buf, len, PID_A), 0);
	s = get_sql(&c, SQL_Y);
	ck_assert_ptr_nonnull(s);
	ck_assert_str_eq(s->text, "UPDATE t SET x = x + 1");
	ck_assert_uint_eq(c.queries.count, 1);
	q = get_q(&c, SQL_Y, SP_KIND_STMT);
	ck_assert_ptr_nonnull(q);
	ck_assert_uint_eq(q->count, 3);
	ck_assert_uint_eq(q->total_ns, 9 + 20 + 11);
	ck_assert_uint_eq(q->rows, 1 + 3 + 1);
	sp_coll_free(&c);
	enc_free(&e);
}
END_TEST

/* ---- skipping ----------------------------------------------------------------- */

START_TEST(test_skip_unknown_and_pad)
{
	struct sp_coll c;
	struct enc e = { 0 };
	struct sp_qagg *q;
	size_t len, off;

	sp_coll_init(&c);
	enc_begin(&e, PID_A, 1, 0);
	put_raw(&e, SP_REC_PAD, 8);
	put_sql(&e, SQL_X, sql_x_text);
	off = put_raw(&e, 200, 48);
	memset(e.buf + off + 16, 0xee, 32); /* payload nobody understands */
	put_lite(&e, SQL_X, 5, 4, 1, 1);
	off = put_raw(&e, SP_REC_PAD, 64);
	memset(e.buf + off + 8, 0xff, 56);
	put_raw(&e, 0x7777, 8);
	put_lite(&e, SQL_X, 5, 6, 1, 1);
	put_raw(&e, SP_REC_PAD, 24);
	len = enc_end(&e);
	ck_assert_int_eq(sp_coll_message(&c, e.buf, len, PID_A), 0);
	ck_assert_uint_eq(c.records, 3); /* only the known ones */
	q = get_q(&c, SQL_X, SP_KIND_STMT);
	ck_assert_ptr_nonnull(q);
	ck_assert_uint_eq(q->count, 2);
	ck_assert_uint_eq(q->total_ns, 10);
	ck_assert_ptr_nonnull(get_sql(&c, SQL_X));
	sp_coll_free(&c);
	enc_free(&e);
}
END_TEST

START_TEST(test_header_only)
{
	struct sp_coll c;
	struct sp_proc pbuf;
	struct enc e = { 0 };
	struct sp_proc *p;
	size_t len;

	sp_coll_init(&c);
	enc_begin(&e, PID_A, 1, 4);
	len = enc_end(&e);
	ck_assert_uint_eq(len, sizeof(struct sp_msg_hdr));
	ck_assert_int_eq(sp_coll_message(&c, e.buf, len, PID_A), 0);
	ck_assert_uint_eq(c.messages, 1);
	ck_assert_uint_eq(c.records, 0);
	p = get_proc(&c, PID_A, &pbuf);
	ck_assert_ptr_nonnull(p);
	ck_assert_uint_eq(p->msgs, 1);
	ck_assert_uint_eq(p->lost, 4);
	ck_assert_int_eq(p->hello, 0);
	sp_coll_free(&c);
	enc_free(&e);
}
END_TEST

/* The largest message the collector takes: SP_MSG_MAX bytes of records. */
START_TEST(test_largest_message)
{
	struct sp_coll c;
	struct sp_proc pbuf;
	struct enc e = { 0 };
	char *exe = malloc(SP_MSG_MAX);
	struct sp_proc *p;
	size_t len, n = SP_MSG_MAX - sizeof(struct sp_rec_hello);

	ck_assert_ptr_nonnull(exe);
	memset(exe, 'x', n);
	exe[n] = 0;
	sp_coll_init(&c);
	enc_begin(&e, PID_A, 1, 0);
	put_hello(&e, exe, SP_CLOCK_MONOTONIC);
	len = enc_end(&e);
	ck_assert_uint_eq(len, MSG_CAP);
	expect_accept(&c, e.buf, len, PID_A, "largest message");
	p = get_proc(&c, PID_A, &pbuf);
	ck_assert_ptr_nonnull(p);
	ck_assert_uint_eq(strlen(p->exe), n);
	sp_coll_free(&c);
	enc_free(&e);
	free(exe);
}
END_TEST

/* ---- rejection ---------------------------------------------------------------- */

/* A collector that already holds the full message of PID_A, so that a
 * rejected message would have something to disturb. */
static void primed(struct sp_coll *c, struct enc *e)
{
	size_t len;

	sp_coll_init(c);
	len = build_full(e, PID_A, 1, 0);
	ck_assert_int_eq(sp_coll_message(c, e->buf, len, PID_A), 0);
}

START_TEST(test_reject_header)
{
	struct sp_coll c;
	struct enc e = { 0 };
	size_t len;
	struct sp_msg_hdr mh;
	uint8_t *m;

	primed(&c, &e);
	len = build_full(&e, PID_A, 2, 0);
	m = e.buf;
	expect_reject(&c, m, 0, 0, "empty message");
	expect_reject(&c, m, 1, 0, "1-byte message");
	expect_reject(&c, m, sizeof(mh) - 1, 0, "message shorter than its header");

	memcpy(&mh, m, sizeof(mh));
	mh.magic ^= 1;
	memcpy(m, &mh, sizeof(mh));
	expect_reject(&c, m, len, 0, "bad magic");
	mh.magic ^= 1;

	mh.version = 0;
	memcpy(m, &mh, sizeof(mh));
	expect_reject(&c, m, len, 0, "version 0");
	mh.version = SP_WIRE_VERSION + 1;
	memcpy(m, &mh, sizeof(mh));
	expect_reject(&c, m, len, 0, "version too new");
	mh.version = SP_WIRE_VERSION;

	mh.len = (uint32_t)len + 8;
	memcpy(m, &mh, sizeof(mh));
	expect_reject(&c, m, len, 0, "header len > actual");
	mh.len = (uint32_t)len - 8;
	memcpy(m, &mh, sizeof(mh));
	expect_reject(&c, m, len, 0, "header len < actual");
	mh.len = 0;
	memcpy(m, &mh, sizeof(mh));
	expect_reject(&c, m, len, 0, "header len 0");
	mh.len = (uint32_t)len;
	memcpy(m, &mh, sizeof(mh));

	expect_reject(&c, m, len, PID_B, "peer pid differs from header pid");
	expect_accept(&c, m, len, PID_A, "restored message");
	sp_coll_free(&c);
	enc_free(&e);
}
END_TEST

START_TEST(test_reject_record_len)
{
	struct sp_coll c;
	struct enc e = { 0 };
	size_t len, r2, last;

	primed(&c, &e);

	enc_begin(&e, PID_A, 2, 0);
	put_lite(&e, SQL_X, 1, 1, 1, 1);
	r2 = put_lite(&e, SQL_X, 1, 1, 1, 1);
	len = enc_end(&e);
	patch32(&e, RLEN(r2), 0);
	expect_reject(&c, e.buf, len, 0, "record len 0");
	patch32(&e, RLEN(r2), 4);
	expect_reject(&c, e.buf, len, 0, "record len 4 (< its header)");
	patch32(&e, RLEN(r2), 60);
	expect_reject(&c, e.buf, len, 0, "record len 60 (not a multiple of 8)");
	patch32(&e, RLEN(r2), 68);
	expect_reject(&c, e.buf, len, 0, "record len 68 (not a multiple of 8)");
	patch32(&e, RLEN(r2), 72);
	expect_reject(&c, e.buf, len, 0, "record len past the end");
	patch32(&e, RLEN(r2), 0xfffffff8u);
	expect_reject(&c, e.buf, len, 0, "record len huge");

	/* Lengths that fit the message and the type but are not multiples of
	 * 8: only the alignment rule rejects these. */
	enc_begin(&e, PID_A, 2, 0);
	r2 = put_raw(&e, 200, 16);
	len = enc_end(&e) - 4;
	patch32(&e, RLEN(r2), 12);
	patch32(&e, offsetof(struct sp_msg_hdr, len), (uint32_t)len);
	expect_reject(&c, e.buf, len, 0, "unknown record of len 12 ending the message");
	enc_begin(&e, PID_A, 2, 0);
	r2 = put_lite(&e, SQL_X, 1, 1, 1, 1);
	put_raw(&e, 200, 8);
	len = enc_end(&e) - 4;
	patch32(&e, RLEN(r2), sizeof(struct sp_rec_exec_lite) + 4);
	patch32(&e, offsetof(struct sp_msg_hdr, len), (uint32_t)len);
	expect_reject(&c, e.buf, len, 0, "EXEC_LITE of len 68 ending the message");

	/* Trailing bytes that cannot hold a record header. */
	enc_begin(&e, PID_A, 2, 0);
	put_lite(&e, SQL_X, 1, 1, 1, 1);
	len = enc_end(&e);
	memset(e.buf + len, 0, 4);
	patch32(&e, offsetof(struct sp_msg_hdr, len), (uint32_t)len + 4);
	expect_reject(&c, e.buf, len + 4, 0, "4 trailing bytes");

	/* Shorter than the type's fixed part (but a valid record length). */
	enc_begin(&e, PID_A, 2, 0);
	put_raw(&e, SP_REC_EXEC_LITE, sizeof(struct sp_rec_exec_lite) - 8);
	len = enc_end(&e);
	expect_reject(&c, e.buf, len, 0, "EXEC_LITE shorter than fixed part");
	static const uint16_t types[] = { SP_REC_HELLO, SP_REC_SQL, SP_REC_EXEC, SP_REC_PREPARE,
					  SP_REC_STACK, SP_REC_MODULE, SP_REC_ERROR, SP_REC_BYE,
					  SP_REC_PLAN };
	static const size_t fixed[] = { sizeof(struct sp_rec_hello), sizeof(struct sp_rec_sql),
					sizeof(struct sp_rec_exec), sizeof(struct sp_rec_prepare),
					sizeof(struct sp_rec_stack), sizeof(struct sp_rec_module),
					sizeof(struct sp_rec_error), sizeof(struct sp_rec_bye),
					sizeof(struct sp_rec_plan) };
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		char what[128];

		for (uint32_t l = 8; l < fixed[i]; l += 8) {
			enc_begin(&e, PID_A, 2, 0);
			put_raw(&e, types[i], l);
			len = enc_end(&e);
			snprintf(what, sizeof(what), "type %u with len %u < %zu", types[i], l, fixed[i]);
			expect_reject(&c, e.buf, len, 0, what);
		}
	}

	/* The last record's length runs past the end by 8. */
	len = build_full(&e, PID_A, 2, 0);
	last = e.ends[e.nends - 2];
	patch32(&e, RLEN(last), (uint32_t)(len - last + 8));
	expect_reject(&c, e.buf, len, 0, "last record past the end");
	sp_coll_free(&c);
	enc_free(&e);
}
END_TEST

START_TEST(test_reject_payload)
{
	struct sp_coll c;
	struct enc e = { 0 };
	size_t len, r, n;
	char *big = malloc(SP_SQL_MAX + 2);
	uint64_t *pcs = calloc(SP_STACK_MAX + 1, sizeof(uint64_t));
	uint8_t bid[80];

	ck_assert_ptr_nonnull(big);
	ck_assert_ptr_nonnull(pcs);
	primed(&c, &e);

	/* SQL: exactly SP_SQL_MAX is fine, one more is not even when present. */
	memset(big, 'a', SP_SQL_MAX + 1);
	big[SP_SQL_MAX] = 0;
	enc_begin(&e, PID_A, 2, 0);
	put_sql(&e, 99, big);
	len = enc_end(&e);
	expect_accept(&c, e.buf, len, 0, "SQL text_len SP_SQL_MAX");
	ck_assert_uint_eq(strlen(get_sql(&c, 99)->text), SP_SQL_MAX);
	big[SP_SQL_MAX] = 'a';
	big[SP_SQL_MAX + 1] = 0;
	enc_begin(&e, PID_A, 2, 0);
	put_sql(&e, 98, big);
	len = enc_end(&e);
	expect_reject(&c, e.buf, len, 0, "SQL text_len SP_SQL_MAX + 1");

	enc_begin(&e, PID_A, 2, 0);
	r = put_sql(&e, 97, "abc"); /* 32 + 3 -> 40 bytes, room for 8 */
	len = enc_end(&e);
	patch32(&e, r + offsetof(struct sp_rec_sql, text_len), 8);
	expect_accept(&c, e.buf, len, 0, "SQL text_len filling its padding");
	patch32(&e, r + offsetof(struct sp_rec_sql, text_len), 9);
	expect_reject(&c, e.buf, len, 0, "SQL text_len overrunning the record");
	patch32(&e, r + offsetof(struct sp_rec_sql, text_len), 0xffffffffu);
	expect_reject(&c, e.buf, len, 0, "SQL text_len 0xffffffff");

	/* STACK */
	enc_begin(&e, PID_A, 2, 0);
	put_stack(&e, 55, pcs, SP_STACK_MAX);
	len = enc_end(&e);
	expect_accept(&c, e.buf, len, 0, "STACK of SP_STACK_MAX");
	enc_begin(&e, PID_A, 3, 0);
	put_stack(&e, 56, pcs, SP_STACK_MAX + 1);
	len = enc_end(&e);
	expect_reject(&c, e.buf, len, 0, "STACK depth SP_STACK_MAX + 1");
	enc_begin(&e, PID_A, 3, 0);
	r = put_stack(&e, 57, pcs, 3);
	len = enc_end(&e);
	patch32(&e, r + offsetof(struct sp_rec_stack, depth), 4);
	expect_reject(&c, e.buf, len, 0, "STACK depth overrunning the record");
	patch32(&e, r + offsetof(struct sp_rec_stack, depth), 0x20000001u);
	expect_reject(&c, e.buf, len, 0, "STACK depth whose byte count wraps 32 bits");

	/* MODULE */
	memset(bid, 0x5a, sizeof(bid));
	enc_begin(&e, PID_A, 3, 0);
	put_module(&e, bid, 65, "/lib/x.so");
	len = enc_end(&e);
	expect_reject(&c, e.buf, len, 0, "MODULE build_id_len 65");
	enc_begin(&e, PID_A, 3, 0);
	r = put_module(&e, bid, 20, "/lib/x.so"); /* 48 + 29 -> 80 */
	len = enc_end(&e);
	patch16(&e, r + offsetof(struct sp_rec_module, path_len), 13);
	expect_reject(&c, e.buf, len, 0, "MODULE path_len overrunning the record");
	patch16(&e, r + offsetof(struct sp_rec_module, path_len), 9);
	patch16(&e, r + offsetof(struct sp_rec_module, build_id_len), 24);
	expect_reject(&c, e.buf, len, 0, "MODULE build_id_len overrunning the record");

	/* HELLO, ERROR, PLAN lengths */
	enc_begin(&e, PID_A, 3, 0);
	r = put_hello(&e, "/bin/x", SP_CLOCK_MONOTONIC);
	len = enc_end(&e);
	patch32(&e, r + offsetof(struct sp_rec_hello, exe_len), 9);
	expect_reject(&c, e.buf, len, 0, "HELLO exe_len overrunning the record");
	patch32(&e, r + offsetof(struct sp_rec_hello, exe_len), 0xffffffffu);
	expect_reject(&c, e.buf, len, 0, "HELLO exe_len 0xffffffff");
	enc_begin(&e, PID_A, 3, 0);
	r = put_error(&e, SQL_X, 0, 1, "boom");
	len = enc_end(&e);
	patch32(&e, r + offsetof(struct sp_rec_error, msg_len), 9);
	expect_reject(&c, e.buf, len, 0, "ERROR msg_len overrunning the record");
	enc_begin(&e, PID_A, 3, 0);
	r = put_raw(&e, SP_REC_PLAN, sizeof(struct sp_rec_plan) + 8);
	len = enc_end(&e);
	patch32(&e, r + offsetof(struct sp_rec_plan, text_len), 9);
	expect_reject(&c, e.buf, len, 0, "PLAN text_len overrunning the record");

	/* Oversized message: more than SP_MSG_MAX bytes of records. */
	n = MSG_CAP + 8;
	{
		uint8_t *m = calloc(1, n);
		struct sp_msg_hdr mh = { .magic = SP_WIRE_MAGIC, .version = SP_WIRE_VERSION,
					 .pid = PID_A, .len = (uint32_t)n, .seq = 3 };
		struct sp_rec_hdr rh = { .type = 200, .len = (uint32_t)(n - sizeof(mh)) };

		ck_assert_ptr_nonnull(m);
		memcpy(m, &mh, sizeof(mh));
		memcpy(m + sizeof(mh), &rh, sizeof(rh));
		expect_reject(&c, m, n, 0, "message larger than SP_MSG_MAX + header");
		free(m);
	}
	sp_coll_free(&c);
	enc_free(&e);
	free(big);
	free(pcs);
}
END_TEST

START_TEST(test_reject_pid)
{
	struct sp_coll c;
	struct enc e = { 0 };
	size_t len, r;
	static const size_t pid_off = sizeof(struct sp_rec_hdr);

	primed(&c, &e);
	len = build_full(&e, PID_A, 2, 0);
	/* Every known record in turn claims another pid. */
	for (size_t i = 0; i + 1 < e.nends; i++) {
		char what[128];

		r = e.ends[i];
		patch32(&e, r + pid_off, PID_B);
		snprintf(what, sizeof(what), "record %zu with pid %u in a message of %u", i, PID_B, PID_A);
		expect_reject(&c, e.buf, len, 0, what);
		expect_reject(&c, e.buf, len, PID_A, what);
		patch32(&e, r + pid_off, PID_A);
	}
	expect_accept(&c, e.buf, len, PID_A, "restored");

	/* A message that claims to be A from a peer that is B. */
	len = build_full(&e, PID_A, 3, 0);
	expect_reject(&c, e.buf, len, PID_B, "peer pid mismatch");
	sp_coll_free(&c);
	enc_free(&e);
}
END_TEST

/* The first records are valid, a later one is corrupt: nothing applies,
 * not even the process entry or the header's counters. */
START_TEST(test_reject_all_or_nothing)
{
	struct sp_coll c;
	struct sp_proc pbuf;
	struct enc e = { 0 };
	size_t len, r;
	uint64_t pcs[4] = { 1, 2, 3, 4 };

	primed(&c, &e);

	enc_begin(&e, PID_A, 2, 1000);
	put_sql(&e, SQL_Y, "DELETE FROM t");
	put_lite(&e, SQL_X, 1, 1, 1, 1);
	r = put_stack(&e, 77, pcs, 4);
	len = enc_end(&e);
	patch32(&e, r + offsetof(struct sp_rec_stack, depth), SP_STACK_MAX + 1);
	expect_reject(&c, e.buf, len, PID_A, "valid, valid, corrupt STACK");

	enc_begin(&e, PID_A, 2, 1000);
	put_lite(&e, SQL_X, 1, 1, 1, 1);
	r = put_lite(&e, SQL_X, 1, 1, 1, 1);
	len = enc_end(&e);
	patch32(&e, RLEN(r), 72);
	expect_reject(&c, e.buf, len, PID_A, "valid, bad length");

	/* A new pid: its process must not appear. */
	enc_begin(&e, PID_B, 1, 1000);
	put_hello(&e, "/bin/b", SP_CLOCK_MONOTONIC);
	put_exec(&e, SQL_X, SP_EXEC_SAMPLED, 9, 5, 5, 5, 0);
	r = put_module(&e, bid20, 20, "/lib/y.so");
	len = enc_end(&e);
	patch16(&e, r + offsetof(struct sp_rec_module, build_id_len), 65);
	expect_reject(&c, e.buf, len, PID_B, "new pid, corrupt MODULE last");
	ck_assert_ptr_null(get_proc(&c, PID_B, &pbuf));
	ck_assert_uint_eq(get_proc(&c, PID_A, &pbuf)->lost, 3); /* primed: BYE said 3 */
	sp_coll_free(&c);
	enc_free(&e);
}
END_TEST

/* ---- truncation --------------------------------------------------------------- */

static int is_boundary(const struct enc *e, size_t n)
{
	for (size_t i = 0; i < e->nends; i++)
		if (e->ends[i] == n)
			return 1;
	return 0;
}

START_TEST(test_truncation_sweep)
{
	struct sp_coll c;
	struct enc e = { 0 };
	size_t len;
	uint8_t *orig;
	size_t accepted = 0;

	primed(&c, &e);
	len = build_full(&e, PID_A, 2, 0);
	orig = malloc(len);
	ck_assert_ptr_nonnull(orig);
	memcpy(orig, e.buf, len);
	for (size_t n = 0; n < len; n++) {
		char what[128];
		uint8_t *m = malloc(n ? n : 1);
		struct snap before, after;
		int rc;

		ck_assert_ptr_nonnull(m);
		memcpy(m, orig, n);
		snprintf(what, sizeof(what), "prefix %zu of %zu, len %zu", n, len, len);
		expect_reject(&c, m, n, PID_A, what);

		snprintf(what, sizeof(what), "prefix %zu of %zu, len patched", n, len);
		if (n >= sizeof(struct sp_msg_hdr)) {
			uint32_t l = (uint32_t)n;

			memcpy(m + offsetof(struct sp_msg_hdr, len), &l, sizeof(l));
		}
		snap_take(&c, &before);
		rc = sp_coll_message(&c, m, n, PID_A);
		if (n >= sizeof(struct sp_msg_hdr) && is_boundary(&e, n)) {
			ck_assert_msg(rc == 0, "%s: rejected at a record boundary: %s", what,
				      c.last_error);
			accepted++;
		} else {
			ck_assert_msg(rc == -1, "%s: accepted inside a record", what);
			snap_take(&c, &after);
			snap_assert_eq(&before, &after, what);
		}
		free(m);
	}
	ck_assert_uint_eq(accepted, e.nends - 1); /* every boundary but the full length */
	free(orig);
	sp_coll_free(&c);
	enc_free(&e);
}
END_TEST

/* ---- random mutation ---------------------------------------------------------- */

static uint64_t rng_state = 0x243f6a8885a308d3ULL;

static uint64_t rnd(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dULL;
}

/* Values that sit on the edges of the length checks. */
static const uint32_t edge32[] = { 0, 1, 7, 8, 9, 0x7f, 0x80, 0xff, 0x100, 0x101, 0xffff, 0x10000,
				   SP_SQL_MAX, SP_SQL_MAX + 1, SP_STACK_MAX, SP_STACK_MAX + 1, 64, 65,
				   0x7fffffff, 0x80000000u, 0xfffffff8u, 0xffffffffu };

START_TEST(test_mutation)
{
	struct sp_coll c;
	struct enc e = { 0 };
	size_t len, hdr = sizeof(struct sp_msg_hdr);
	uint8_t *orig, *m;
	unsigned accepted = 0, rejected = 0;

	len = build_full(&e, PID_A, 2, 0);
	orig = malloc(len);
	m = malloc(len);
	ck_assert_ptr_nonnull(orig);
	ck_assert_ptr_nonnull(m);
	memcpy(orig, e.buf, len);
	primed(&c, &e);
	for (int i = 0; i < 20000; i++) {
		struct snap before, after;
		uint64_t bad = c.bad_messages, msgs = c.messages;
		unsigned k = 1 + (unsigned)(rnd() % 4);
		int rc;

		if (i % 500 == 499) { /* keep the maps small so snapshots stay cheap */
			sp_coll_free(&c);
			primed(&c, &e);
			bad = c.bad_messages;
			msgs = c.messages;
		}
		memcpy(m, orig, len);
		for (unsigned j = 0; j < k; j++) {
			uint64_t r = rnd();
			/* Mostly leave the header alone so the records get parsed. */
			size_t lo = (r & 3) ? hdr : 0;
			size_t pos = lo + (size_t)((r >> 8) % (len - lo));

			if ((r >> 4) % 3 == 0 && pos + 4 <= len) {
				uint32_t v = edge32[(r >> 40) % (sizeof(edge32) / sizeof(edge32[0]))];

				memcpy(m + pos, &v, sizeof(v));
			} else {
				m[pos] ^= (uint8_t)(1 + (r >> 48) % 255);
			}
		}
		snap_take(&c, &before);
		rc = sp_coll_message(&c, m, len, (i & 1) ? PID_A : 0);
		if (rc == 0) {
			accepted++;
			ck_assert_uint_eq(c.messages, msgs + 1);
			ck_assert_uint_eq(c.bad_messages, bad);
		} else {
			ck_assert_msg(rc == -1, "iteration %d: rc %d", i, rc);
			rejected++;
			ck_assert_uint_eq(c.bad_messages, bad + 1);
			snap_take(&c, &after);
			snap_assert_eq(&before, &after, "mutated message");
		}
	}
	printf("mutation: %u accepted, %u rejected of 20000\n", accepted, rejected);
	/* Both outcomes must be exercised, or the loop tests nothing. */
	ck_assert_uint_gt(accepted, 100);
	ck_assert_uint_gt(rejected, 100);
	free(orig);
	free(m);
	sp_coll_free(&c);
	enc_free(&e);
}
END_TEST

/* ---- isolation between processes ---------------------------------------------- */

/* Everything the collector holds for one pid, as a digest. */
static uint64_t pid_digest(struct sp_coll *c, uint32_t pid)
{
	struct sp_proc pc;
	uint64_t d;
	size_t it;
	const void *key;
	void *v;

	ck_assert_ptr_nonnull(get_proc(c, pid, &pc));
	d = clean_proc(&pc);
	d = mix(d, &pc, sizeof(pc));
	for (it = 0; (v = hmap_next(&c->sites, &it, &key));)
		if (((const struct skey *)key)->pid == pid)
			d += mix(mix(0, key, c->sites.keylen), v, c->sites.vallen);
	for (it = 0; (v = hmap_next(&c->stacks, &it, &key));)
		if (((const struct stkey *)key)->pid == pid)
			d += mix(mix(0, key, c->stacks.keylen), ((struct sp_stack *)v)->pcs,
				 ((struct sp_stack *)v)->depth * 8);
	for (it = 0; (v = hmap_next(&c->modules, &it, &key));)
		if (((const struct mkey *)key)->pid == pid)
			d += mix_str(mix(0, key, c->modules.keylen), ((struct sp_module *)v)->path);
	return d;
}

START_TEST(test_two_processes)
{
	struct sp_coll c;
	struct sp_proc pbuf;
	struct enc e = { 0 };
	size_t len, r;
	uint64_t da;
	struct sp_qagg qa;
	struct sp_proc *pb;

	primed(&c, &e); /* A: full message, SQL_X */
	da = pid_digest(&c, PID_A);
	memcpy(&qa, get_q(&c, SQL_X, SP_KIND_STMT), sizeof(qa));

	/* B says hello (accepted), then sends bad messages touching SQL_X. */
	enc_begin(&e, PID_B, 1, 0);
	put_hello(&e, "/bin/b", SP_CLOCK_TSC);
	len = enc_end(&e);
	expect_accept(&c, e.buf, len, PID_B, "B hello");

	enc_begin(&e, PID_B, 2, 50);
	put_lite(&e, SQL_X, 1, 1, 1, 1);
	put_exec(&e, SQL_X, SP_EXEC_SAMPLED, STACK_1, 9, 9, 9, 0);
	put_stack(&e, STACK_1, pcs3, 3);
	r = put_error(&e, SQL_X, STACK_1, 1, "x");
	len = enc_end(&e);
	patch32(&e, r + offsetof(struct sp_rec_error, msg_len), 100);
	expect_reject(&c, e.buf, len, PID_B, "B: exec of SQL_X then corrupt ERROR");
	patch32(&e, r + offsetof(struct sp_rec_error, msg_len), 1);
	patch32(&e, r + sizeof(struct sp_rec_hdr), PID_A);
	expect_reject(&c, e.buf, len, PID_B, "B: a record claiming pid A");
	patch32(&e, r + sizeof(struct sp_rec_hdr), PID_B);

	/* A message that is A's in every field, sent by B's connection. */
	len = build_full(&e, PID_A, 2, 99);
	expect_reject(&c, e.buf, len, PID_B, "B sending as A");

	ck_assert_uint_eq(pid_digest(&c, PID_A), da);
	ck_assert_mem_eq(get_q(&c, SQL_X, SP_KIND_STMT), &qa, offsetof(struct sp_qagg, hist));
	pb = get_proc(&c, PID_B, &pbuf);
	ck_assert_ptr_nonnull(pb);
	ck_assert_uint_eq(pb->msgs, 1);
	ck_assert_uint_eq(pb->lost, 0);
	ck_assert_uint_eq(pb->execs, 0);

	/* A valid message of B on its own SQL leaves A alone too. */
	enc_begin(&e, PID_B, 2, 1);
	put_sql(&e, SQL_Y, "SELECT 1");
	put_exec(&e, SQL_Y, SP_EXEC_SAMPLED, STACK_1, 9, 9, 9, 0);
	put_stack(&e, STACK_1, pcs3 + 1, 2);
	put_module(&e, bid20, 20, "/lib/b.so");
	len = enc_end(&e);
	expect_accept(&c, e.buf, len, PID_B, "B valid");
	ck_assert_uint_eq(pid_digest(&c, PID_A), da);
	ck_assert_mem_eq(get_q(&c, SQL_X, SP_KIND_STMT), &qa, offsetof(struct sp_qagg, hist));
	ck_assert_uint_eq(get_proc(&c, PID_B, &pbuf)->execs, 1);
	ck_assert_uint_eq(sp_coll_lost(&c), 3 + 1);
	sp_coll_free(&c);
	enc_free(&e);
}
END_TEST

static Suite *collect_suite(void)
{
	Suite *s = suite_create("collect");
	TCase *tc;

	tc = tcase_create("round_trip");
	tcase_add_test(tc, test_round_trip);
	tcase_add_test(tc, test_lost_and_seq);
	tcase_add_test(tc, test_sql_after_exec);
	tcase_add_test(tc, test_value_alignment);
	suite_add_tcase(s, tc);

	tc = tcase_create("skipping");
	tcase_add_test(tc, test_skip_unknown_and_pad);
	tcase_add_test(tc, test_header_only);
	tcase_add_test(tc, test_largest_message);
	suite_add_tcase(s, tc);

	tc = tcase_create("rejection");
	tcase_add_test(tc, test_reject_header);
	tcase_add_test(tc, test_reject_record_len);
	tcase_add_test(tc, test_reject_payload);
	tcase_add_test(tc, test_reject_pid);
	tcase_add_test(tc, test_reject_all_or_nothing);
	suite_add_tcase(s, tc);

	tc = tcase_create("truncation");
	tcase_add_test(tc, test_truncation_sweep);
	tcase_set_timeout(tc, 60); /* slow under sanitizers */
	suite_add_tcase(s, tc);

	tc = tcase_create("mutation");
	tcase_add_test(tc, test_mutation);
	tcase_set_timeout(tc, 120);
	suite_add_tcase(s, tc);

	tc = tcase_create("isolation");
	tcase_add_test(tc, test_two_processes);
	suite_add_tcase(s, tc);

	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(collect_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
