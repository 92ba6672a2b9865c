/* SPDX-License-Identifier: MIT */
/*
 * check_collect.c - unit tests for report/record/collect.c, the stream decoder and
 * aggregator.
 *
 * Messages are built here by a small encoder that lays records out exactly
 * as the preload does (sp_msg_hdr, then records each 8-aligned with len
 * counting its header, pid and tid in every body), in stream format 3:
 * EXEC records are events (sites, the event list) and never totals.
 * Tested: a round trip of every record type; SQL text arriving after the
 * events that reference it; skipping of unknown, retired (4, 10) and PAD
 * records; each rejection rule, checking that a rejected message leaves
 * the collector exactly as it was (validate-then-apply); every truncated
 * prefix of a message; 20000 random mutations (fixed seed); that a bad
 * message from one process leaves another's data alone; that every value
 * the maps hand out is aligned for its type (it is not for procs: see
 * test_value_alignment); the threads' shared rings (wrap, PAD, chunking,
 * corruption, a concurrent writer, descriptors over a socket).
 *
 * Totals come from the shared statistics (sp_wire.h): the "stats" tests
 * build statistics buffers by hand in that layout (header chunk, arenas'
 * chunks, query, histogram, runs and arena records, pointers as writer
 * addresses) and merge them with sp_coll_stats_merge, hostile ones
 * included; and deliver them as SP_REC_STATS_COPY records and as a sealed
 * memfd with HELLO (sp_coll_input, sp_coll_recv).
 *
 * "Unchanged" is checked with a digest over every map entry (strings, stack
 * pcs and histograms by content), the event array, the statistics held
 * (copies by content) and the counters; only bad_messages and last_error
 * may change on rejection.
 *
 * The map keys below mirror the private key structs of collect.c (their
 * layout is given in collect.h's comments); a size check fails loudly if
 * they drift.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "collect.h"
#include "fingerprint.h"

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
	uint64_t pid, image, generation, lo;
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

/* One EXEC event (a sampled execution), seq 7, wall = db + 50. */
static size_t put_exec(struct enc *e, uint64_t sql_id, uint16_t flags, uint64_t stack_id,
		       uint64_t db, uint64_t rows, uint32_t vm, int32_t rc)
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

/* A sampled EXEC event on STACK_1 with the given seq and db time: what
 * the ring tests stream (120 bytes). */
static size_t put_ev(struct enc *e, uint64_t sql_id, uint64_t seq, uint64_t db)
{
	size_t off = put_exec(e, sql_id, SP_EXEC_SAMPLED | SP_EXEC_RANDOM, STACK_1, db, 1, 2, 0);

	memcpy(e->buf + off + offsetof(struct sp_rec_exec, seq), &seq, sizeof(seq));
	return off;
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

static size_t put_error(struct enc *e, uint64_t sql_id, uint64_t stack_id, int32_t rc,
			const char *msg)
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

static size_t put_plan(struct enc *e, uint64_t sql_id, const char *text)
{
	struct sp_rec_plan r = { .h.type = SP_REC_PLAN };

	r.sql_id = sql_id;
	r.db = 0x5000;
	r.text_len = (uint32_t)strlen(text);
	return enc_put(e, &r, sizeof(r), text, r.text_len, NULL, 0);
}

/* The STATS record of a HELLO message (its memfd travels beside it). */
static size_t put_stats(struct enc *e, uint64_t size)
{
	struct sp_rec_stats r = { .h.type = SP_REC_STATS };

	r.size = size;
	return enc_put(e, &r, sizeof(r), NULL, 0, NULL, 0);
}

/* A copy of the first len bytes of chunk number chunk, data[len]. */
static size_t put_copy(struct enc *e, uint32_t chunk, const void *data, uint32_t len)
{
	struct sp_rec_stats_copy r = { .h.type = SP_REC_STATS_COPY };

	r.chunk = chunk;
	r.len = len;
	return enc_put(e, &r, sizeof(r), data, len, NULL, 0);
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
static const uint8_t bid20[20] = { 0xde, 0xad, 0xbe, 0xef, 1,  2,  3,  4,  5,  6,
				   7,    8,    9,    10,   11, 12, 13, 14, 15, 16 };
static const char exe_path[] = "/usr/bin/app-under-test"; /* 23 bytes: padded */
static const char sql_x_text[] = "SELECT * FROM t WHERE id = ?";
static const char mod_path[] = "/usr/lib/libsqlite3.so.0";
static const char err_msg[] = "UNIQUE constraint failed: t.id";

static const char plan_text[] = "2|0|SCAN t\n";

/*
 * The full message of the round trip: HELLO, SQL, 3 EXEC events (sampled
 * at random), 1 EXEC (sampled because it failed), PLAN, STACK, MODULE,
 * ERROR, BYE. 11 records; no totals (those are in the statistics).
 */
static size_t build_full(struct enc *e, uint32_t pid, uint64_t seq, uint64_t lost)
{
	enc_begin(e, pid, seq, lost);
	put_hello(e, exe_path, SP_CLOCK_MONOTONIC);
	put_sql(e, SQL_X, sql_x_text);
	put_exec(e, SQL_X, SP_EXEC_SAMPLED | SP_EXEC_RANDOM, STACK_1, 100, 1, 5, 0);
	put_exec(e, SQL_X, SP_EXEC_SAMPLED | SP_EXEC_RANDOM, STACK_1, 200, 2, 6, 0);
	put_exec(e, SQL_X, SP_EXEC_SAMPLED | SP_EXEC_RANDOM, STACK_1, 300, 3, 7, 0);
	put_exec(e, SQL_X, SP_EXEC_SAMPLED | SP_EXEC_ERROR, STACK_1, 1000, 10, 50, 2067);
	put_plan(e, SQL_X, plan_text);
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

static struct sp_sagg *get_site(struct sp_coll *c, uint64_t sql_id, uint32_t pid, uint64_t stack_id)
{
	struct skey k = { sql_id, SP_KIND_STMT, pid, stack_id };

	return hmap_get(&c->sites, &k, 0, NULL);
}

/* Samples of (sql_id, pid) on STACK_1 so far; 0 when there is no site. */
static uint64_t nsamples(struct sp_coll *c, uint64_t sql_id, uint32_t pid)
{
	struct sp_sagg *sa = get_site(c, sql_id, pid, STACK_1);

	return sa ? sa->samples : 0;
}

/* ---- state digest ------------------------------------------------------------- */

/* All uint64_t so that two snapshots compare with memcmp. */
struct snap {
	uint64_t procs, sqls, queries, sites, stacks, errors, modules, plans, nstats;
	uint64_t nevents, events_dropped, nspilled, records, messages;
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

static uint64_t clean_plan(void *v)
{
	struct sp_plan *pl = v;
	uint64_t h = mix_str(7, pl->text);

	pl->text = NULL;
	return h;
}

/* The statistics held (not merged yet): who, and copies by content. */
static uint64_t stats_digest(const struct sp_coll *c)
{
	uint64_t sum = 0;

	for (size_t i = 0; i < c->nstats; i++) {
		const struct sp_statmap *m = &c->stats[i];
		uint64_t f[5] = { m->pid, m->image, m->size, (uint64_t)m->clock,
				  (uint64_t)m->copy };
		uint64_t h = mix(8, f, sizeof(f));

		if (m->copy)
			h = mix(h, m->map, m->size);
		sum += h;
	}
	return sum;
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
	s->plans = c->plans.count;
	s->nstats = c->nstats;
	s->nevents = c->nevents;
	s->events_dropped = c->events_dropped;
	s->nspilled = c->nspilled;
	s->records = c->records;
	s->messages = c->messages;
	d = mix(d, &(uint64_t){ map_digest(&c->procs, clean_proc) }, 8);
	d = mix(d, &(uint64_t){ map_digest(&c->sqls, clean_sql) }, 8);
	d = mix(d, &(uint64_t){ map_digest(&c->queries, clean_qagg) }, 8);
	d = mix(d, &(uint64_t){ map_digest(&c->sites, NULL) }, 8);
	d = mix(d, &(uint64_t){ map_digest(&c->stacks, clean_stack) }, 8);
	d = mix(d, &(uint64_t){ map_digest(&c->errors, clean_err) }, 8);
	d = mix(d, &(uint64_t){ map_digest(&c->modules, clean_module) }, 8);
	d = mix(d, &(uint64_t){ map_digest(&c->plans, clean_plan) }, 8);
	d = mix(d, &(uint64_t){ stats_digest(c) }, 8);
	for (size_t i = 0; i < c->nevents; i++) {
		const struct sp_event *ev = &c->events[i];
		uint64_t f[14] = { ev->pid,      ev->tid,
				   ev->seq,      ev->parent_seq,
				   ev->sql_id,   ev->stack_id,
				   ev->start_ns, ev->wall_ns,
				   ev->db_ns,    ev->self_ns,
				   ev->rows,     ev->vm_steps,
				   ev->flags,    (uint64_t)ev->rc ^ ((uint64_t)ev->kind << 40) };

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
	ck_assert_msg(a->plans == b->plans, "%s: plans changed", what);
	ck_assert_msg(a->nstats == b->nstats, "%s: statistics held %lu -> %lu", what,
		      (unsigned long)a->nstats, (unsigned long)b->nstats);
	ck_assert_msg(a->nevents == b->nevents, "%s: events changed", what);
	ck_assert_msg(a->events_dropped == b->events_dropped, "%s: events_dropped changed", what);
	ck_assert_msg(a->nspilled == b->nspilled, "%s: nspilled changed", what);
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

/* sp_coll_fold_texts: N texts of 7 fingerprints, each with an aggregate,
 * a caller and some sites; folded to MAX, the sums per fingerprint are
 * those before, the MAX most recent texts are kept as they were, and
 * every table keyed by a text names kept texts or folds only. */
START_TEST(test_fold_texts)
{
	enum { N = 20000, MAX = 1000, NFP = 7 };
	struct sp_coll c;
	struct hmap map;
	uint64_t before[NFP] = { 0 }, after[NFP] = { 0 }, calls = 0, calls_after = 0;
	uint64_t fps[NFP] = { 0 };
	size_t it = 0, nf;
	const uint64_t *k;
	struct sp_qagg *q;
	struct sp_caller *cr;

	sp_coll_init(&c);
	for (uint64_t i = 1; i <= N; i++) {
		char text[64];
		int created;
		struct sp_sql *s = hmap_get(&c.sqls, &i, 1, &created);
		uint64_t qk[2] = { i, SP_KIND_STMT }, ck[4] = { i, SP_KIND_STMT, 42, 0x1234 };
		char *fp;

		ck_assert_ptr_nonnull(s);
		snprintf(text, sizeof(text), "SELECT %llu AS c%llu", (unsigned long long)i,
			 (unsigned long long)(i % NFP));
		s->text = strdup(text);
		fp = sp_fingerprint(text, strlen(text), &s->fp_id);
		free(fp);
		fps[i % NFP] = s->fp_id;
		s->last = i; /* the highest ids are the most recent */
		q = hmap_get(&c.queries, qk, 1, NULL);
		q->count = i % 5 + 1;
		q->total_ns = 1000 * i;
		q->min_ns = i;
		q->max_ns = 2 * i;
		before[i % NFP] += q->count;
		cr = hmap_get(&c.callers, ck, 1, NULL);
		cr->count = q->count;
		calls += q->count;
		if (i % 100 == 0) {
			uint64_t sk[4] = { i, SP_KIND_STMT, 42, 7 };
			struct sp_sagg *sa = hmap_get(&c.sites, sk, 1, NULL);

			sa->samples = 1;
		}
	}
	hmap_init(&map, sizeof(uint64_t), sizeof(uint64_t));
	nf = sp_coll_fold_texts(&c, MAX, &map);
	ck_assert_uint_eq(nf, N - MAX);
	ck_assert_uint_eq(c.texts_folded, N - MAX);
	ck_assert_uint_eq(map.count, N - MAX);
	ck_assert_uint_eq(c.sqls.count, MAX + NFP);
	/* the most recent kept, the oldest folded */
	for (uint64_t i = N - MAX + 1; i <= N; i++) {
		const struct sp_sql *s = hmap_get(&c.sqls, &i, 0, NULL);

		ck_assert_ptr_nonnull(s);
		ck_assert_ptr_null(hmap_get(&map, &i, 0, NULL));
	}
	for (uint64_t i = 1; i <= N - MAX; i++) {
		const uint64_t *to = hmap_get(&map, &i, 0, NULL);

		ck_assert_ptr_null(hmap_get(&c.sqls, &i, 0, NULL));
		ck_assert_ptr_nonnull(to);
		ck_assert_uint_eq(*to, sp_coll_fold_id(fps[i % NFP]));
	}
	ck_assert_uint_eq(c.queries.count, MAX + NFP);
	while ((q = hmap_next(&c.queries, &it, (const void **)&k))) {
		const struct sp_sql *s = hmap_get(&c.sqls, &k[0], 0, NULL);
		int f;

		ck_assert_ptr_nonnull(s); /* every aggregate has a text */
		for (f = 0; f < NFP && fps[f] != s->fp_id; f++)
			;
		ck_assert_int_lt(f, NFP);
		after[f] += q->count;
		if (s->folded) {
			ck_assert_uint_eq(k[0], sp_coll_fold_id(s->fp_id));
			ck_assert_uint_eq(q->min_ns, (uint64_t)f ? (uint64_t)f : NFP);
		}
	}
	for (int f = 0; f < NFP; f++)
		ck_assert_uint_eq(after[f], before[f]);
	it = 0;
	while ((cr = hmap_next(&c.callers, &it, (const void **)&k))) {
		ck_assert_ptr_nonnull(hmap_get(&c.sqls, &k[0], 0, NULL));
		calls_after += cr->count;
	}
	ck_assert_uint_eq(calls_after, calls);
	ck_assert_uint_eq(c.callers.count, MAX + NFP);
	it = 0;
	while (hmap_next(&c.sites, &it, (const void **)&k))
		ck_assert_ptr_nonnull(hmap_get(&c.sqls, &k[0], 0, NULL));
	/* a second fold under the budget does nothing */
	ck_assert_uint_eq(sp_coll_fold_texts(&c, MAX + NFP, NULL), 0);
	hmap_free(&map);
	sp_coll_free(&c);
}
END_TEST

/* hmap_del keeps every other key findable (backward shift), at any load. */
START_TEST(test_hmap_del)
{
	struct hmap m;
	enum { N = 20000 };

	hmap_init(&m, sizeof(uint64_t), sizeof(uint64_t));
	for (uint64_t i = 0; i < N; i++)
		*(uint64_t *)hmap_get(&m, &i, 1, NULL) = i * 3;
	for (uint64_t i = 0; i < N; i += 3) {
		uint64_t v = 0;

		ck_assert_int_eq(hmap_del(&m, &i, &v), 1);
		ck_assert_uint_eq(v, i * 3);
		ck_assert_int_eq(hmap_del(&m, &i, NULL), 0);
	}
	for (uint64_t i = 0; i < N; i++) {
		const uint64_t *v = hmap_get(&m, &i, 0, NULL);

		if (i % 3 == 0) {
			ck_assert_ptr_null(v);
		} else {
			ck_assert_ptr_nonnull(v);
			ck_assert_uint_eq(*v, i * 3);
		}
	}
	ck_assert_uint_eq(m.count, N - (N + 2) / 3);
	hmap_free(&m);
}
END_TEST

START_TEST(test_round_trip)
{
	struct sp_coll c;
	struct sp_proc pbuf;
	struct enc e = { 0 };
	size_t len = build_full(&e, PID_A, 1, 5);
	struct sp_proc *p;
	struct sp_sql *s;
	struct sp_sagg *sa;
	struct sp_stack *st;
	struct sp_module *m;
	struct sp_err *er;
	struct sp_plan *pl;
	struct stkey stk = { PID_A, STACK_1 };
	struct mkey mk = { PID_A, 1, 1, 0x7f0000001000ULL }; /* image 1, generation 1 */
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
	ck_assert_uint_eq(p->image, 1);
	ck_assert_uint_eq(p->bye_image, 2);
	ck_assert_int_eq(p->sqlite_found, 1);
	ck_assert_int_eq(p->clock, SP_CLOCK_MONOTONIC);
	ck_assert_ptr_nonnull(p->exe);
	ck_assert_str_eq(p->exe, exe_path);
	/* EXEC records are events: counted as such, never as executions */
	ck_assert_uint_eq(p->events, 4);
	ck_assert_uint_eq(p->execs, 0);
	ck_assert_uint_eq(p->bye_execs, 4);
	ck_assert_uint_eq(p->untracked, 2);
	/* a HELLO without its statistics' memfd: the totals cannot come */
	ck_assert_int_eq(p->no_stats, 1);
	ck_assert_uint_eq(p->stats_bad, 0);
	ck_assert_uint_eq(p->msgs, 1);
	ck_assert_uint_eq(p->last_seq, 1);
	ck_assert_uint_eq(p->lost, 5); /* header 5 > BYE 3 */
	ck_assert_uint_eq(sp_coll_lost(&c), 5);
	ck_assert_uint_eq(sp_coll_executions(&c), 0);

	s = get_sql(&c, SQL_X);
	ck_assert_ptr_nonnull(s);
	ck_assert_str_eq(s->text, sql_x_text);
	ck_assert_uint_eq(s->full_len, strlen(sql_x_text));
	ck_assert_int_eq(s->truncated, 0);

	/* no query aggregate comes from events */
	ck_assert_uint_eq(c.queries.count, 0);
	ck_assert_uint_eq(c.nstats, 0);

	ck_assert_uint_eq(c.sites.count, 1);
	sa = get_site(&c, SQL_X, PID_A, STACK_1);
	ck_assert_ptr_nonnull(sa);
	ck_assert_uint_eq(sa->samples, 4);
	ck_assert_uint_eq(sa->total_ns, 100 + 200 + 300 + 1000);
	ck_assert_uint_eq(sa->random_samples, 3);
	ck_assert_uint_eq(sa->random_ns, 100 + 200 + 300);
	ck_assert_uint_eq(sa->rows, 1 + 2 + 3 + 10);
	ck_assert_uint_eq(sa->vm_steps, 5 + 6 + 7 + 50);

	ck_assert_uint_eq(c.nevents, 4);
	ck_assert_uint_eq(c.events_dropped, 0);
	for (int i = 0; i < 4; i++) {
		ck_assert_uint_eq(c.events[i].pid, PID_A);
		ck_assert_uint_eq(c.events[i].tid, PID_A);
		ck_assert_uint_eq(c.events[i].seq, 7);
		ck_assert_uint_eq(c.events[i].sql_id, SQL_X);
		ck_assert_uint_eq(c.events[i].stack_id, STACK_1);
		ck_assert_uint_eq(c.events[i].start_ns, 123456789);
		ck_assert_uint_eq(c.events[i].kind, SP_KIND_STMT);
	}
	ck_assert_uint_eq(c.events[1].db_ns, 200);
	ck_assert_uint_eq(c.events[1].self_ns, 200);
	ck_assert_uint_eq(c.events[1].wall_ns, 250);
	ck_assert_uint_eq(c.events[1].rows, 2);
	ck_assert_uint_eq(c.events[1].vm_steps, 6);
	ck_assert_uint_eq(c.events[1].flags, SP_EXEC_SAMPLED | SP_EXEC_RANDOM);
	ck_assert_uint_eq(c.events[3].db_ns, 1000);
	ck_assert_int_eq(c.events[3].rc, 2067);
	ck_assert_uint_eq(c.events[3].flags, SP_EXEC_SAMPLED | SP_EXEC_ERROR);

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

	ck_assert_uint_eq(c.plans.count, 1);
	it = 0;
	pl = hmap_next(&c.plans, &it, NULL);
	ck_assert_ptr_nonnull(pl);
	ck_assert_uint_eq(pl->connections, 1);
	ck_assert_str_eq(pl->text, plan_text);

	/* the end of the recording has no statistics to merge: nothing moves */
	sp_coll_finish(&c);
	ck_assert_uint_eq(c.queries.count, 0);
	ck_assert_uint_eq(get_proc(&c, PID_A, &pbuf)->execs, 0);
	sp_coll_free(&c);
	enc_free(&e);
}
END_TEST

/* EXEC events with a stack go to the event list up to events_max (then
 * counted as dropped) or, with a spill file, to the file; an EXEC without
 * a stack is counted in the process's events only. None makes a total. */
START_TEST(test_events_and_spill)
{
	struct sp_coll c;
	struct sp_proc pbuf;
	struct enc e = { 0 };
	struct sp_event ev;
	FILE *f;
	size_t len;

	sp_coll_init(&c);
	c.events_max = 3;
	enc_begin(&e, PID_A, 1, 0);
	for (uint64_t i = 1; i <= 5; i++)
		put_ev(&e, SQL_X, i, 10 * i);
	put_exec(&e, SQL_X, 0, 0, 999, 1, 1, 0); /* no stack */
	len = enc_end(&e);
	ck_assert_int_eq(sp_coll_message(&c, e.buf, len, PID_A), 0);
	ck_assert_uint_eq(c.nevents, 3);
	ck_assert_uint_eq(c.events_dropped, 2);
	for (size_t i = 0; i < 3; i++) {
		ck_assert_uint_eq(c.events[i].seq, i + 1);
		ck_assert_uint_eq(c.events[i].db_ns, 10 * (i + 1));
	}
	ck_assert_uint_eq(get_proc(&c, PID_A, &pbuf)->events, 6);
	ck_assert_uint_eq(get_site(&c, SQL_X, PID_A, STACK_1)->samples, 5); /* sites: all */
	ck_assert_uint_eq(get_site(&c, SQL_X, PID_A, STACK_1)->total_ns, 150);
	ck_assert_ptr_null(get_site(&c, SQL_X, PID_A, 0));
	ck_assert_uint_eq(c.queries.count, 0);

	/* spilled: the events go to the file, memory does not grow */
	f = tmpfile();
	ck_assert_ptr_nonnull(f);
	sp_coll_spill(&c, f, 4);
	ck_assert_int_eq(sp_coll_message(&c, e.buf, len, PID_A), 0);
	ck_assert_uint_eq(c.nevents, 3);
	ck_assert_uint_eq(c.nspilled, 4);
	ck_assert_uint_eq(c.events_dropped, 3);
	ck_assert_int_eq(sp_coll_spill_flush(&c), 0);
	ck_assert_int_eq(fseek(f, 0, SEEK_SET), 0);
	for (uint64_t i = 1; i <= 4; i++) {
		ck_assert_uint_eq(fread(&ev, sizeof(ev), 1, f), 1);
		ck_assert_uint_eq(ev.pid, PID_A);
		ck_assert_uint_eq(ev.seq, i);
		ck_assert_uint_eq(ev.db_ns, 10 * i);
		ck_assert_uint_eq(ev.stack_id, STACK_1);
	}
	ck_assert_uint_eq(fread(&ev, sizeof(ev), 1, f), 0);
	ck_assert_int_eq(sp_coll_spill_read(&c, 1, &ev, 1), 1);
	ck_assert_uint_eq(ev.seq, 2);
	ck_assert_uint_eq(get_proc(&c, PID_A, &pbuf)->events, 12);
	ck_assert_uint_eq(c.queries.count, 0);
	fclose(f);
	sp_coll_free(&c);
	enc_free(&e);
}
END_TEST

/* A spill file that cannot take the events (a full file system: /dev/full
 * fails every write with ENOSPC): they are dropped and counted, nspilled
 * says how many are in the file (none), and flushing says so. */
START_TEST(test_spill_full)
{
	struct sp_coll c;
	struct enc e = { 0 };
	struct sp_event ev;
	FILE *f = fopen("/dev/full", "w+");
	size_t len;

	if (!f)
		return; /* no /dev/full here: nothing to test */
	sp_coll_init(&c);
	sp_coll_spill(&c, f, 1000000);
	enc_begin(&e, PID_A, 1, 0);
	for (uint64_t i = 1; i <= 1500; i++) /* more than a batch */
		put_ev(&e, SQL_X, i, 10 * i);
	len = enc_end(&e);
	ck_assert_int_eq(sp_coll_message(&c, e.buf, len, PID_A), 0);
	ck_assert_int_eq(sp_coll_spill_flush(&c), -1);
	ck_assert_int_eq(errno, ENOSPC);
	ck_assert_uint_eq(c.nspilled, 0);
	ck_assert_uint_eq(c.events_dropped, 1500);
	ck_assert_uint_eq(c.spill_failed, 1500);
	ck_assert_int_eq(sp_coll_spill_read(&c, 0, &ev, 1), 0);
	fclose(f);
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
		ck_assert_msg((uintptr_t)v % align == 0, "%s: value at %p is not %zu-aligned", name,
			      v, align);
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
	put_ev(&e, SQL_X, 1, 1);
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

/* Events arrive in a message before the one carrying their SQL text. */
START_TEST(test_sql_after_exec)
{
	struct sp_coll c;
	struct enc e = { 0 };
	struct sp_sagg *sa;
	struct sp_sql *s;
	size_t len;

	sp_coll_init(&c);
	enc_begin(&e, PID_A, 1, 0);
	put_ev(&e, SQL_Y, 1, 9);
	put_exec(&e, SQL_Y, SP_EXEC_SAMPLED, STACK_1, 20, 3, 4, 0);
	len = enc_end(&e);
	ck_assert_int_eq(sp_coll_message(&c, e.buf, len, PID_A), 0);
	sa = get_site(&c, SQL_Y, PID_A, STACK_1);
	ck_assert_ptr_nonnull(sa);
	ck_assert_uint_eq(sa->samples, 2);
	ck_assert_uint_eq(c.nevents, 2);
	ck_assert_ptr_null(get_sql(&c, SQL_Y));

	enc_begin(&e, PID_A, 2, 0);
	put_sql(&e, SQL_Y, "UPDATE t SET x = x + 1");
	put_ev(&e, SQL_Y, 2, 11);
	len = enc_end(&e);
	ck_assert_int_eq(sp_coll_message(&c, e.buf, len, PID_A), 0);
	s = get_sql(&c, SQL_Y);
	ck_assert_ptr_nonnull(s);
	ck_assert_str_eq(s->text, "UPDATE t SET x = x + 1");
	ck_assert_uint_eq(c.sites.count, 1);
	sa = get_site(&c, SQL_Y, PID_A, STACK_1);
	ck_assert_ptr_nonnull(sa);
	ck_assert_uint_eq(sa->samples, 3);
	ck_assert_uint_eq(sa->total_ns, 9 + 20 + 11);
	ck_assert_uint_eq(sa->rows, 1 + 3 + 1);
	ck_assert_uint_eq(c.nevents, 3);
	ck_assert_uint_eq(c.queries.count, 0);
	sp_coll_free(&c);
	enc_free(&e);
}
END_TEST

/* ---- skipping ----------------------------------------------------------------- */

START_TEST(test_skip_unknown_and_pad)
{
	struct sp_coll c;
	struct sp_proc pbuf;
	struct enc e = { 0 };
	struct sp_sagg *sa;
	size_t len, off;

	sp_coll_init(&c);
	enc_begin(&e, PID_A, 1, 0);
	put_raw(&e, SP_REC_PAD, 8);
	put_sql(&e, SQL_X, sql_x_text);
	off = put_raw(&e, 200, 48);
	memset(e.buf + off + 16, 0xee, 32); /* payload nobody understands */
	put_ev(&e, SQL_X, 1, 4);
	off = put_raw(&e, SP_REC_PAD, 64);
	memset(e.buf + off + 8, 0xff, 56);
	put_raw(&e, 0x7777, 8);
	/* the numbers version 3 retired: unknown now, skipped at any length */
	put_raw(&e, 4, 8);         /* was PREPARE */
	off = put_raw(&e, 10, 64); /* was EXEC_LITE */
	memset(e.buf + off + 16, 0x5a, 48);
	put_ev(&e, SQL_X, 2, 6);
	put_raw(&e, SP_REC_PAD, 24);
	len = enc_end(&e);
	ck_assert_int_eq(sp_coll_message(&c, e.buf, len, PID_A), 0);
	ck_assert_uint_eq(c.records, 3); /* only the known ones */
	sa = get_site(&c, SQL_X, PID_A, STACK_1);
	ck_assert_ptr_nonnull(sa);
	ck_assert_uint_eq(sa->samples, 2);
	ck_assert_uint_eq(sa->total_ns, 10);
	ck_assert_uint_eq(c.nevents, 2);
	ck_assert_uint_eq(get_proc(&c, PID_A, &pbuf)->events, 2);
	ck_assert_uint_eq(c.queries.count, 0);
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

	/* a live peer of our pid namespace (a gone one cannot be checked) */
	expect_reject(&c, m, len, (uint32_t)getppid(), "peer pid differs from header pid");
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
	const uint32_t xl = sizeof(struct sp_rec_exec); /* 120 */

	primed(&c, &e);

	enc_begin(&e, PID_A, 2, 0);
	put_ev(&e, SQL_X, 1, 1);
	r2 = put_ev(&e, SQL_X, 2, 1);
	len = enc_end(&e);
	patch32(&e, RLEN(r2), 0);
	expect_reject(&c, e.buf, len, 0, "record len 0");
	patch32(&e, RLEN(r2), 4);
	expect_reject(&c, e.buf, len, 0, "record len 4 (< its header)");
	patch32(&e, RLEN(r2), xl - 4);
	expect_reject(&c, e.buf, len, 0, "record len 116 (not a multiple of 8)");
	patch32(&e, RLEN(r2), xl + 4);
	expect_reject(&c, e.buf, len, 0, "record len 124 (not a multiple of 8)");
	patch32(&e, RLEN(r2), xl + 8);
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
	r2 = put_ev(&e, SQL_X, 1, 1);
	put_raw(&e, 200, 8);
	len = enc_end(&e) - 4;
	patch32(&e, RLEN(r2), xl + 4);
	patch32(&e, offsetof(struct sp_msg_hdr, len), (uint32_t)len);
	expect_reject(&c, e.buf, len, 0, "EXEC of len 124 ending the message");

	/* Trailing bytes that cannot hold a record header. */
	enc_begin(&e, PID_A, 2, 0);
	put_ev(&e, SQL_X, 1, 1);
	len = enc_end(&e);
	memset(e.buf + len, 0, 4);
	patch32(&e, offsetof(struct sp_msg_hdr, len), (uint32_t)len + 4);
	expect_reject(&c, e.buf, len + 4, 0, "4 trailing bytes");

	/* Shorter than the type's fixed part (but a valid record length). */
	enc_begin(&e, PID_A, 2, 0);
	put_raw(&e, SP_REC_EXEC, xl - 8);
	len = enc_end(&e);
	expect_reject(&c, e.buf, len, 0, "EXEC shorter than fixed part");
	static const uint16_t types[] = { SP_REC_HELLO, SP_REC_SQL,       SP_REC_EXEC,
					  SP_REC_STACK, SP_REC_MODULE,    SP_REC_ERROR,
					  SP_REC_BYE,   SP_REC_PLAN,      SP_REC_RING,
					  SP_REC_STATS, SP_REC_STATS_COPY };
	static const size_t fixed[] = {
		sizeof(struct sp_rec_hello),     sizeof(struct sp_rec_sql),
		sizeof(struct sp_rec_exec),      sizeof(struct sp_rec_stack),
		sizeof(struct sp_rec_module),    sizeof(struct sp_rec_error),
		sizeof(struct sp_rec_bye),       sizeof(struct sp_rec_plan),
		sizeof(struct sp_rec_ring),      sizeof(struct sp_rec_stats),
		sizeof(struct sp_rec_stats_copy)
	};
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		char what[128];

		for (uint32_t l = 8; l < fixed[i]; l += 8) {
			enc_begin(&e, PID_A, 2, 0);
			put_raw(&e, types[i], l);
			len = enc_end(&e);
			snprintf(what, sizeof(what), "type %u with len %u < %zu", types[i], l,
				 fixed[i]);
			expect_reject(&c, e.buf, len, 0, what);
		}
	}
	/* the retired numbers have no fixed part any more: 8 bytes will do */
	enc_begin(&e, PID_A, 2, 0);
	put_raw(&e, 4, 8);
	put_raw(&e, 10, 8);
	len = enc_end(&e);
	expect_accept(&c, e.buf, len, 0, "retired types 4 and 10 of 8 bytes");

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

	/* STATS_COPY: at most one chunk, of a chunk number below the cap */
	{
		uint8_t *chunk = calloc(1, SP_STATS_CHUNK + 8);

		ck_assert_ptr_nonnull(chunk);
		enc_begin(&e, PID_A, 3, 0);
		put_copy(&e, 1, chunk, SP_STATS_CHUNK);
		len = enc_end(&e);
		expect_accept(&c, e.buf, len, 0, "STATS_COPY of a whole chunk");
		ck_assert_uint_eq(c.nstats, 1);
		ck_assert_uint_eq(c.stats[0].size, 2 * SP_STATS_CHUNK);
		enc_begin(&e, PID_A, 3, 0);
		put_copy(&e, 1, chunk, SP_STATS_CHUNK + 8);
		len = enc_end(&e);
		expect_reject(&c, e.buf, len, 0, "STATS_COPY len SP_STATS_CHUNK + 8");
		free(chunk);
	}
	enc_begin(&e, PID_A, 3, 0);
	r = put_copy(&e, 2, bid20, 16); /* 24 + 16: no room beyond */
	len = enc_end(&e);
	expect_accept(&c, e.buf, len, 0, "STATS_COPY of 16 bytes");
	patch32(&e, r + offsetof(struct sp_rec_stats_copy, len), 17);
	expect_reject(&c, e.buf, len, 0, "STATS_COPY len overrunning the record");
	patch32(&e, r + offsetof(struct sp_rec_stats_copy, len), 0xffffffffu);
	expect_reject(&c, e.buf, len, 0, "STATS_COPY len 0xffffffff");
	patch32(&e, r + offsetof(struct sp_rec_stats_copy, len), 16);
	patch32(&e, r + offsetof(struct sp_rec_stats_copy, chunk), SP_STATS_COPY_MAX_CHUNKS);
	expect_reject(&c, e.buf, len, 0, "STATS_COPY chunk SP_STATS_COPY_MAX_CHUNKS");
	patch32(&e, r + offsetof(struct sp_rec_stats_copy, chunk), 0xffffffffu);
	expect_reject(&c, e.buf, len, 0, "STATS_COPY chunk 0xffffffff");
	ck_assert_uint_eq(c.nstats, 1);
	ck_assert_uint_eq(c.stats[0].size, 3 * SP_STATS_CHUNK);

	/* Oversized message: more than SP_MSG_MAX bytes of records. */
	n = MSG_CAP + 8;
	{
		uint8_t *m = calloc(1, n);
		struct sp_msg_hdr mh = { .magic = SP_WIRE_MAGIC,
					 .version = SP_WIRE_VERSION,
					 .pid = PID_A,
					 .len = (uint32_t)n,
					 .seq = 3 };
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
		snprintf(what, sizeof(what), "record %zu with pid %u in a message of %u", i, PID_B,
			 PID_A);
		expect_reject(&c, e.buf, len, 0, what);
		expect_reject(&c, e.buf, len, PID_A, what);
		patch32(&e, r + pid_off, PID_A);
	}
	expect_accept(&c, e.buf, len, PID_A, "restored");

	/* A message that claims to be A from a peer that is B. */
	len = build_full(&e, PID_A, 3, 0);
	expect_reject(&c, e.buf, len, (uint32_t)getppid(), "peer pid mismatch");
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
	put_ev(&e, SQL_X, 1, 1);
	r = put_stack(&e, 77, pcs, 4);
	len = enc_end(&e);
	patch32(&e, r + offsetof(struct sp_rec_stack, depth), SP_STACK_MAX + 1);
	expect_reject(&c, e.buf, len, PID_A, "valid, valid, corrupt STACK");

	enc_begin(&e, PID_A, 2, 1000);
	put_ev(&e, SQL_X, 1, 1);
	r = put_ev(&e, SQL_X, 2, 1);
	len = enc_end(&e);
	patch32(&e, RLEN(r), sizeof(struct sp_rec_exec) + 8);
	expect_reject(&c, e.buf, len, PID_A, "valid, bad length");

	/* a good copy of the statistics, then a bad one: no copy is kept */
	enc_begin(&e, PID_A, 2, 1000);
	put_copy(&e, 0, pcs, sizeof(pcs));
	put_ev(&e, SQL_X, 1, 1);
	r = put_copy(&e, 1, pcs, sizeof(pcs));
	len = enc_end(&e);
	patch32(&e, r + offsetof(struct sp_rec_stats_copy, chunk), SP_STATS_COPY_MAX_CHUNKS);
	expect_reject(&c, e.buf, len, PID_A, "good STATS_COPY, then a chunk too high");
	ck_assert_uint_eq(c.nstats, 0);

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

/* A message with copies of the statistics: HELLO, a copy of the header
 * chunk (48 bytes), an EXEC event, a copy of 200 bytes of chunk 1, BYE. */
static size_t build_copies(struct enc *e, uint32_t pid, uint64_t seq)
{
	static uint8_t blob[200];

	for (size_t i = 0; i < sizeof(blob); i++)
		blob[i] = (uint8_t)(i * 7 + 1);
	enc_begin(e, pid, seq, 0);
	put_hello(e, exe_path, SP_CLOCK_MONOTONIC);
	put_copy(e, 0, blob, sizeof(struct sp_stats_hdr));
	put_ev(e, SQL_X, 1, 5);
	put_copy(e, 1, blob, sizeof(blob));
	put_bye(e, 0, 0);
	return enc_end(e);
}

/* Every prefix of the message build() makes is rejected with nothing
 * changed, both with its header's len left as it was and patched to the
 * prefix's length; patched, a prefix that ends at a record boundary is a
 * whole message and accepted. */
static void sweep(struct sp_coll *c, struct enc *e, size_t len)
{
	uint8_t *orig = malloc(len);
	size_t accepted = 0;

	ck_assert_ptr_nonnull(orig);
	memcpy(orig, e->buf, len);
	for (size_t n = 0; n < len; n++) {
		char what[128];
		uint8_t *m = malloc(n ? n : 1);
		struct snap before, after;
		int rc;

		ck_assert_ptr_nonnull(m);
		memcpy(m, orig, n);
		snprintf(what, sizeof(what), "prefix %zu of %zu, len %zu", n, len, len);
		expect_reject(c, m, n, PID_A, what);

		snprintf(what, sizeof(what), "prefix %zu of %zu, len patched", n, len);
		if (n >= sizeof(struct sp_msg_hdr)) {
			uint32_t l = (uint32_t)n;

			memcpy(m + offsetof(struct sp_msg_hdr, len), &l, sizeof(l));
		}
		snap_take(c, &before);
		rc = sp_coll_message(c, m, n, PID_A);
		if (n >= sizeof(struct sp_msg_hdr) && is_boundary(e, n)) {
			ck_assert_msg(rc == 0, "%s: rejected at a record boundary: %s", what,
				      c->last_error);
			accepted++;
		} else {
			ck_assert_msg(rc == -1, "%s: accepted inside a record", what);
			snap_take(c, &after);
			snap_assert_eq(&before, &after, what);
		}
		free(m);
	}
	ck_assert_uint_eq(accepted, e->nends - 1); /* every boundary but the full length */
	free(orig);
}

START_TEST(test_truncation_sweep)
{
	struct sp_coll c;
	struct enc e = { 0 };

	primed(&c, &e);
	sweep(&c, &e, build_full(&e, PID_A, 2, 0));
	sweep(&c, &e, build_copies(&e, PID_A, 3));
	ck_assert_uint_eq(c.nstats, 1); /* the accepted prefixes' copies */
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
static const uint32_t edge32[] = { 0,
				   1,
				   7,
				   8,
				   9,
				   0x7f,
				   0x80,
				   0xff,
				   0x100,
				   0x101,
				   0xffff,
				   0x10000,
				   SP_SQL_MAX,
				   SP_SQL_MAX + 1,
				   SP_STACK_MAX,
				   SP_STACK_MAX + 1,
				   64,
				   65,
				   0x7fffffff,
				   0x80000000u,
				   0xfffffff8u,
				   0xffffffffu };

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
				uint32_t v =
					edge32[(r >> 40) % (sizeof(edge32) / sizeof(edge32[0]))];

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
	struct sp_sagg sa;
	struct sp_proc *pb;

	primed(&c, &e); /* A: full message, SQL_X */
	da = pid_digest(&c, PID_A);
	memcpy(&sa, get_site(&c, SQL_X, PID_A, STACK_1), sizeof(sa));

	/* B says hello (accepted), then sends bad messages touching SQL_X. */
	enc_begin(&e, PID_B, 1, 0);
	put_hello(&e, "/bin/b", SP_CLOCK_TSC);
	len = enc_end(&e);
	expect_accept(&c, e.buf, len, PID_B, "B hello");

	enc_begin(&e, PID_B, 2, 50);
	put_exec(&e, SQL_X, SP_EXEC_SAMPLED, STACK_1, 9, 9, 9, 0);
	put_stack(&e, STACK_1, pcs3, 3);
	put_copy(&e, 0, pcs3, sizeof(pcs3));
	r = put_error(&e, SQL_X, STACK_1, 1, "x");
	len = enc_end(&e);
	patch32(&e, r + offsetof(struct sp_rec_error, msg_len), 100);
	expect_reject(&c, e.buf, len, PID_B, "B: exec of SQL_X, a copy, then corrupt ERROR");
	patch32(&e, r + offsetof(struct sp_rec_error, msg_len), 1);
	patch32(&e, r + sizeof(struct sp_rec_hdr), PID_A);
	expect_reject(&c, e.buf, len, PID_B, "B: a record claiming pid A");
	patch32(&e, r + sizeof(struct sp_rec_hdr), PID_B);

	/* A message that is A's in every field, sent by B's connection. */
	len = build_full(&e, PID_A, 2, 99);
	expect_reject(&c, e.buf, len, PID_B, "B sending as A");
	len = build_copies(&e, PID_A, 2);
	expect_reject(&c, e.buf, len, PID_B, "B sending A's statistics");

	ck_assert_uint_eq(pid_digest(&c, PID_A), da);
	ck_assert_mem_eq(get_site(&c, SQL_X, PID_A, STACK_1), &sa, sizeof(sa));
	ck_assert_uint_eq(c.nstats, 0);
	pb = get_proc(&c, PID_B, &pbuf);
	ck_assert_ptr_nonnull(pb);
	ck_assert_uint_eq(pb->msgs, 1);
	ck_assert_uint_eq(pb->lost, 0);
	ck_assert_uint_eq(pb->events, 0);

	/* A valid message of B on its own SQL leaves A alone too. */
	enc_begin(&e, PID_B, 2, 1);
	put_sql(&e, SQL_Y, "SELECT 1");
	put_exec(&e, SQL_Y, SP_EXEC_SAMPLED, STACK_1, 9, 9, 9, 0);
	put_stack(&e, STACK_1, pcs3 + 1, 2);
	put_module(&e, bid20, 20, "/lib/b.so");
	len = enc_end(&e);
	expect_accept(&c, e.buf, len, PID_B, "B valid");
	ck_assert_uint_eq(pid_digest(&c, PID_A), da);
	ck_assert_mem_eq(get_site(&c, SQL_X, PID_A, STACK_1), &sa, sizeof(sa));
	ck_assert_uint_eq(get_proc(&c, PID_B, &pbuf)->events, 1);
	ck_assert_uint_eq(get_proc(&c, PID_A, &pbuf)->events, 4);
	ck_assert_uint_eq(sp_coll_lost(&c), 3 + 1);
	sp_coll_free(&c);
	enc_free(&e);
}
END_TEST

/* ---- rings -------------------------------------------------------------------- */

/*
 * A test-side ring writer that lays records out as the preload does:
 * whole records from head, a PAD record filling the end of the buffer
 * when the next record does not fit before it, head published with a
 * release store. The ring lives in an anonymous MAP_SHARED mapping of
 * exactly sizeof(struct sp_ring_shared) + size bytes, so the collector
 * can own and unmap it like a memfd mapping.
 */
struct wring {
	struct sp_ring_shared *sh;
	size_t map_len;
	uint32_t size;
	uint32_t head; /* the writer's own, published by wr_publish */
};

static struct sp_ring_shared *ring_alloc(size_t map_len)
{
	void *m = mmap(NULL, map_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	ck_assert_ptr_ne(m, MAP_FAILED);
	return m;
}

static void ring_hdr_init(struct sp_ring_shared *sh, uint32_t pid, uint32_t tid, uint32_t size,
			  uint32_t start)
{
	sh->magic = SP_RING_MAGIC;
	sh->size = size;
	sh->pid = pid;
	sh->tid = tid;
	sh->head = start;
	sh->tail = start;
}

static void wr_init(struct wring *w, uint32_t pid, uint32_t size, uint32_t start)
{
	w->map_len = sizeof(struct sp_ring_shared) + size;
	w->sh = ring_alloc(w->map_len);
	w->size = size;
	w->head = start;
	ring_hdr_init(w->sh, pid, pid + 1, size, start);
}

static struct sp_rec_ring wr_rec(const struct wring *w)
{
	struct sp_rec_ring rr = { .h.type = SP_REC_RING, .h.len = sizeof(rr) };

	rr.pid = w->sh->pid;
	rr.tid = w->sh->tid;
	rr.size = w->size;
	return rr;
}

/* Room for len more bytes (PAD included) with the reader at tail. */
static int wr_room(const struct wring *w, uint32_t len)
{
	uint32_t tail = __atomic_load_n(&w->sh->tail, __ATOMIC_ACQUIRE);
	uint32_t off = w->head & (w->size - 1);
	uint32_t need = w->size - off < len ? w->size - off + len : len;

	return w->size - (w->head - tail) >= need;
}

/* Append one record (len bytes, a multiple of 8); the caller made room. */
static void wr_put(struct wring *w, const void *rec, uint32_t len)
{
	uint32_t off = w->head & (w->size - 1);

	if (w->size - off < len) {
		struct sp_rec_hdr pad = { .type = SP_REC_PAD, .len = w->size - off };

		memcpy(w->sh->data + off, &pad, sizeof(pad));
		w->head += pad.len;
		off = 0;
	}
	memcpy(w->sh->data + off, rec, len);
	w->head += len;
}

static void wr_publish(struct wring *w)
{
	__atomic_store_n(&w->sh->head, w->head, __ATOMIC_RELEASE);
}

/* Append every record of the message in e (not published). */
static void wr_put_msg(struct wring *w, const struct enc *e)
{
	for (size_t off = sizeof(struct sp_msg_hdr); off < e->len;) {
		struct sp_rec_hdr rh;

		memcpy(&rh, e->buf + off, sizeof(rh));
		ck_assert_msg(wr_room(w, rh.len), "test ring too small");
		wr_put(w, e->buf + off, rh.len);
		off += rh.len;
	}
}

/* Hand the ring to the collector (it owns the mapping from now on). */
static void wr_add(struct sp_coll *c, struct wring *w)
{
	struct sp_rec_ring rr = wr_rec(w);

	ck_assert_msg(sp_coll_ring_add(c, w->sh, w->map_len, &rr) == 0, "ring refused: %s",
		      c->last_error);
}

static struct sp_ring *find_ring(struct sp_coll *c, const struct sp_ring_shared *sh)
{
	for (size_t i = 0; i < c->nrings; i++)
		if (c->rings[i]->sh == sh)
			return c->rings[i];
	return NULL;
}

/* The message-only counters zeroed, so that a collector fed by a ring
 * compares equal to one fed the same records in a message. no_stats is
 * one of them: sp_coll_input sets it for a HELLO message that came
 * without its statistics' memfd, a ring's HELLO says nothing about it. */
static void forget_msg_counters(struct sp_coll *c)
{
	size_t it = 0;
	struct sp_proc *p;

	while ((p = hmap_next(&c->procs, &it, NULL))) {
		p->msgs = 0;
		p->last_seq = 0;
		p->no_stats = 0;
	}
	c->messages = 0;
}

/* The full round-trip message, as records in a ring, gives exactly the
 * state the message gives (but for the message counters), sampled event
 * included; and a message header count of lost is not invented. */
START_TEST(test_ring_same_as_message)
{
	struct sp_coll cm, cr;
	struct sp_proc pbuf;
	struct enc e = { 0 };
	struct wring w;
	struct snap a, b;
	size_t len = build_full(&e, PID_A, 1, 0);

	sp_coll_init(&cm);
	sp_coll_init(&cr);
	ck_assert_int_eq(sp_coll_message(&cm, e.buf, len, PID_A), 0);

	wr_init(&w, PID_A, 4096, 0);
	wr_add(&cr, &w);
	ck_assert_uint_eq(cr.nrings, 1);
	ck_assert_uint_eq(sp_coll_rings_drain(&cr, 0), 0); /* nothing published yet */
	wr_put_msg(&w, &e);
	wr_publish(&w);
	ck_assert_uint_eq(sp_coll_rings_drain(&cr, PID_B), 0); /* another pid's rings only */
	ck_assert_uint_eq(sp_coll_rings_drain(&cr, PID_A), 11);
	ck_assert_uint_eq(cr.records, 11);
	ck_assert_uint_eq(cr.messages, 0);
	ck_assert_uint_eq(cr.bad_messages, 0);
	ck_assert_uint_eq(get_proc(&cr, PID_A, &pbuf)->msgs, 0);
	ck_assert_uint_eq(get_proc(&cr, PID_A, &pbuf)->gaps, 0);
	ck_assert_uint_eq(get_proc(&cr, PID_A, &pbuf)->lost, 3); /* BYE's */
	/* read: the tail moved to the head, in shared memory and in ours */
	ck_assert_uint_eq(__atomic_load_n(&w.sh->tail, __ATOMIC_ACQUIRE), w.head);
	ck_assert_uint_eq(find_ring(&cr, w.sh)->tail, w.head);
	ck_assert_uint_eq(cr.nrings, 1); /* not dead: kept */

	forget_msg_counters(&cm);
	forget_msg_counters(&cr);
	snap_take(&cm, &a);
	snap_take(&cr, &b);
	snap_assert_eq(&a, &b, "ring vs message");

	/* nothing new: nothing applied twice */
	ck_assert_uint_eq(sp_coll_rings_drain(&cr, 0), 0);
	ck_assert_uint_eq(cr.records, 11);
	/* dead and read: freed */
	__atomic_store_n(&w.sh->dead, 1, __ATOMIC_RELEASE);
	sp_coll_rings_drain(&cr, 0);
	ck_assert_uint_eq(cr.nrings, 0);
	sp_coll_free(&cm);
	sp_coll_free(&cr);
	enc_free(&e);
}
END_TEST

/*
 * Records of several sizes through a 4 KiB ring, many times round: PAD
 * at the end of the buffer, and the free-running counters wrapping past
 * 2^32 (start just below). Every record arrives once.
 */
START_TEST(test_ring_wrap_and_pad)
{
	static const uint32_t starts[] = { 0xFFFFF000u, 0xFFFFFF10u, 0xFFFFFFF8u, 0x7FFFFFC0u };
	struct enc e = { 0 };

	for (size_t si = 0; si < sizeof(starts) / sizeof(starts[0]); si++) {
		struct sp_coll c;
		struct wring w;
		struct sp_sagg *sa;
		struct sp_err *er;
		size_t it = 0;
		uint64_t n = 0, sum = 0, nerr = 0, pads = 0, wrapped = 0;

		sp_coll_init(&c);
		wr_init(&w, PID_A, 4096, starts[si]);
		wr_add(&c, &w);
		for (int round = 0; round < 300; round++) {
			uint32_t before = w.head;

			/* 1 to 7 records: EXEC (120), SQL and ERROR of varied length */
			enc_begin(&e, PID_A, 0, 0);
			for (int k = 0; k <= round % 7; k++) {
				if ((round + k) % 3 == 0) {
					char text[200];

					snprintf(text, sizeof(text), "SELECT %d%*s", round,
						 (round * 7 + k) % 150, "");
					put_sql(&e, 1000 + (uint64_t)round * 10 + (uint64_t)k,
						text);
				} else if ((round + k) % 3 == 1) {
					char msg[200];

					/* one error key: the message's hash is of its text */
					memset(msg, 'e', sizeof(msg));
					msg[(round * 11 + k) % 120 + 1] = 0;
					put_error(&e, SQL_X, 0, 1, msg);
					nerr++;
				} else {
					n++;
					put_ev(&e, SQL_X, n, n);
					sum += n;
				}
			}
			wr_put_msg(&w, &e);
			pads += (w.head - before) != (uint32_t)(e.len - sizeof(struct sp_msg_hdr));
			wrapped |= w.head < before;
			wr_publish(&w);
			ck_assert_int_eq(sp_coll_ring_drain(&c, find_ring(&c, w.sh)), 0);
			ck_assert_uint_eq(find_ring(&c, w.sh)->tail, w.head);
		}
		sa = get_site(&c, SQL_X, PID_A, STACK_1);
		ck_assert_ptr_nonnull(sa);
		ck_assert_uint_eq(sa->samples, n);
		ck_assert_uint_eq(sa->total_ns, sum);
		ck_assert_uint_eq(c.nevents, n);
		for (size_t i = 0; i < c.nevents; i++)
			ck_assert_uint_eq(c.events[i].seq, i + 1); /* each once, in order */
		while ((er = hmap_next(&c.errors, &it, NULL)))
			nerr -= er->count;
		ck_assert_uint_eq(nerr, 0);
		ck_assert_uint_eq(c.queries.count, 0);
		ck_assert_uint_eq(c.bad_messages, 0);
		ck_assert_uint_gt(pads, 10); /* the PAD path ran */
		if (starts[si] > 0xF0000000u)
			ck_assert_uint_eq(wrapped, 1); /* and the u32 wrap */
		/* a PAD right at the end of what was published, nothing after it */
		w.head = (w.head | (w.size - 1)) + 1 - 8;
		{
			struct sp_rec_hdr pad = { .type = SP_REC_PAD, .len = 8 };

			memcpy(w.sh->data + (w.head & (w.size - 1)), &pad, sizeof(pad));
			w.head += 8;
			__atomic_store_n(&w.sh->tail, w.head - 8, __ATOMIC_RELEASE);
			find_ring(&c, w.sh)->tail = w.head - 8;
		}
		wr_publish(&w);
		ck_assert_int_eq(sp_coll_ring_drain(&c, find_ring(&c, w.sh)), 0);
		ck_assert_uint_eq(c.bad_messages, 0);
		sp_coll_free(&c);
	}
	enc_free(&e);
}
END_TEST

/* More than SP_MSG_MAX bytes at once, with records of up to SP_MSG_MAX
 * bytes: cut into several messages, whole records each, nothing lost. */
START_TEST(test_ring_chunking)
{
	struct sp_coll c;
	struct sp_proc pbuf;
	struct enc e = { 0 };
	struct wring w;
	struct sp_sagg *sa;
	char *exe = malloc(SP_MSG_MAX);
	size_t n_exe = SP_MSG_MAX - sizeof(struct sp_rec_hello);
	uint64_t n = 0, recs = 0;

	ck_assert_ptr_nonnull(exe);
	memset(exe, 'x', n_exe);
	exe[n_exe] = 0;
	sp_coll_init(&c);
	wr_init(&w, PID_A, 1u << 20, 0xFFFF0000u);
	wr_add(&c, &w);
	/* a record of exactly SP_MSG_MAX bytes first */
	enc_begin(&e, PID_A, 0, 0);
	put_hello(&e, exe, SP_CLOCK_MONOTONIC);
	ck_assert_uint_eq(e.len - sizeof(struct sp_msg_hdr), SP_MSG_MAX);
	wr_put_msg(&w, &e);
	recs++;
	/* then ~900 KiB of EXEC events in batches */
	while (w.head - 0xFFFF0000u < 900 * 1024) {
		enc_begin(&e, PID_A, 0, 0);
		for (int k = 0; k < 60; k++) {
			n++;
			put_ev(&e, SQL_X, n, n);
		}
		wr_put_msg(&w, &e);
		recs += 60;
	}
	wr_publish(&w);
	ck_assert_uint_gt(w.head - 0xFFFF0000u, 3 * SP_MSG_MAX);
	ck_assert_uint_eq(sp_coll_rings_drain(&c, 0), recs);
	ck_assert_uint_eq(c.bad_messages, 0);
	sa = get_site(&c, SQL_X, PID_A, STACK_1);
	ck_assert_ptr_nonnull(sa);
	ck_assert_uint_eq(sa->samples, n);
	ck_assert_uint_eq(sa->total_ns, n * (n + 1) / 2);
	ck_assert_uint_eq(c.nevents, n);
	for (size_t i = 0; i < c.nevents; i++)
		ck_assert_uint_eq(c.events[i].seq, i + 1);
	ck_assert_uint_eq(strlen(get_proc(&c, PID_A, &pbuf)->exe), n_exe);
	sp_coll_free(&c);
	enc_free(&e);
	free(exe);
}
END_TEST

/*
 * One corruption of a ring: the ring at start (pid PID_A, 4 KiB) gets the
 * records of e, published, then corrupt() breaks it. The drain must stop
 * reading it (returns -1), count it once (bad_messages, rings_broken, the
 * process's bad_msgs), say why in last_error and on diag, and free it at
 * sp_coll_rings_drain; records read before the break stay applied.
 */
static void expect_broken(struct sp_coll *c, struct enc *e, uint32_t start,
			  void (*corrupt)(struct wring *w), const char *want, const char *what)
{
	struct wring w;
	struct sp_proc pbuf;
	uint64_t bad = c->bad_messages, broken = c->rings_broken, pbad;
	char *out = NULL;
	size_t outlen = 0;
	FILE *diag = open_memstream(&out, &outlen);

	ck_assert_ptr_nonnull(diag);
	c->diag = diag;
	pbad = get_proc(c, PID_A, &pbuf)->bad_msgs;
	wr_init(&w, PID_A, 4096, start);
	wr_add(c, &w);
	if (e)
		wr_put_msg(&w, e);
	corrupt(&w);
	ck_assert_msg(sp_coll_ring_drain(c, find_ring(c, w.sh)) == -1, "%s: not broken", what);
	ck_assert_msg(c->bad_messages == bad + 1, "%s: bad_messages %lu, was %lu (%s)", what,
		      (unsigned long)c->bad_messages, (unsigned long)bad, c->last_error);
	ck_assert_msg(c->rings_broken == broken + 1, "%s: not counted as broken", what);
	ck_assert_msg(get_proc(c, PID_A, &pbuf)->bad_msgs == pbad + 1, "%s: bad_msgs", what);
	ck_assert_msg(strstr(c->last_error, want), "%s: last_error '%s' lacks '%s'", what,
		      c->last_error, want);
	fclose(diag);
	c->diag = NULL;
	ck_assert_msg(out && strstr(out, "stopped reading a ring") && strstr(out, want),
		      "%s: diag said '%s'", what, out ? out : "");
	free(out);
	/* dropped by the next reading, without another count */
	sp_coll_rings_drain(c, 0);
	ck_assert_msg(c->nrings == 0, "%s: still registered", what);
	ck_assert_uint_eq(c->bad_messages, bad + 1);
}

static void cor_head_far(struct wring *w)
{
	__atomic_store_n(&w->sh->head, w->head + w->size + 8, __ATOMIC_RELEASE);
}

static void cor_head_behind(struct wring *w)
{
	/* head "before" tail: head - tail is a huge unsigned number */
	__atomic_store_n(&w->sh->head, w->sh->tail - 8, __ATOMIC_RELEASE);
}

static void cor_head_odd(struct wring *w)
{
	__atomic_store_n(&w->sh->head, w->head + 4, __ATOMIC_RELEASE);
}

static void put_raw_rec(struct wring *w, uint16_t type, uint32_t len, uint32_t claim)
{
	uint8_t rec[256] = { 0 };
	struct sp_rec_hdr h = { .type = type, .len = claim };

	memcpy(rec, &h, sizeof(h));
	memcpy(rec + 8, &w->sh->pid, 4);
	memcpy(rec + 12, &w->sh->pid, 4);
	memcpy(w->sh->data + (w->head & (w->size - 1)), rec, len);
	w->head += len;
	wr_publish(w);
}

/* The length of an EXEC record. */
#define XL ((uint32_t)sizeof(struct sp_rec_exec))

static void cor_crossing(struct wring *w)
{
	/* started 32 bytes before the end: a 64-byte record claims to cross it */
	put_raw_rec(w, SP_REC_EXEC, 32, 64);
	w->head += 32;
	wr_publish(w);
}

static void cor_pad_crossing(struct wring *w)
{
	put_raw_rec(w, SP_REC_PAD, 32, 64);
	w->head += 32;
	wr_publish(w);
}

static void cor_len_odd(struct wring *w)
{
	put_raw_rec(w, SP_REC_EXEC, XL, XL - 4);
}

static void cor_len_zero(struct wring *w)
{
	put_raw_rec(w, SP_REC_EXEC, XL, 0);
}

static void cor_len_past_head(struct wring *w)
{
	put_raw_rec(w, SP_REC_EXEC, XL, XL + 8);
}

static void cor_len_short(struct wring *w)
{
	put_raw_rec(w, SP_REC_EXEC, XL - 8, XL - 8); /* EXEC is 120 */
}

static void cor_pid(struct wring *w)
{
	uint32_t other = PID_B;
	uint32_t off = w->head & (w->size - 1);

	put_raw_rec(w, SP_REC_EXEC, XL, XL);
	memcpy(w->sh->data + off + 8, &other, 4);
}

static void cor_ring_rec(struct wring *w)
{
	struct sp_rec_ring rr = wr_rec(w);

	ck_assert(wr_room(w, sizeof(rr)));
	wr_put(w, &rr, sizeof(rr));
	wr_publish(w);
}

/* A STATS record in a ring: its memfd cannot come with it. */
static void cor_stats_rec(struct wring *w)
{
	struct sp_rec_stats sr = { .h.type = SP_REC_STATS, .h.len = sizeof(sr) };

	sr.pid = w->sh->pid;
	sr.tid = w->sh->tid;
	sr.size = SP_STATS_CHUNK;
	ck_assert(wr_room(w, sizeof(sr)));
	wr_put(w, &sr, sizeof(sr));
	wr_publish(w);
}

static void cor_none(struct wring *w)
{
	wr_publish(w);
}

START_TEST(test_ring_corrupt)
{
	struct sp_coll c;
	struct enc e = { 0 }, good = { 0 };
	struct sp_sagg *sa;
	uint64_t count;

	primed(&c, &e);
	/* two good records in front of each corruption */
	enc_begin(&good, PID_A, 0, 0);
	put_ev(&good, SQL_Y, 1, 1);
	put_ev(&good, SQL_Y, 2, 1);

	expect_broken(&c, NULL, 0, cor_head_far, "exceeds the ring size", "head - tail > size");
	expect_broken(&c, NULL, 64, cor_head_behind, "exceeds the ring size", "head < tail");
	expect_broken(&c, NULL, 0xFFFFFFF0u, cor_head_odd, "multiple of 8", "head % 8");
	expect_broken(&c, NULL, 4096 - 32, cor_crossing, "crosses the end",
		      "record crossing the end");
	expect_broken(&c, NULL, 0xFFFFFFE0u, cor_pad_crossing, "crosses the end",
		      "PAD crossing the end (u32 wrap)");
	expect_broken(&c, NULL, 0, cor_len_odd, "bad record length", "record len 116");
	expect_broken(&c, NULL, 0, cor_len_zero, "bad record length", "record len 0");
	expect_broken(&c, NULL, 0, cor_len_past_head, "bad record length", "record past head");
	expect_broken(&c, NULL, 0, cor_len_short, "shorter than its type", "EXEC of 112");
	expect_broken(&c, NULL, 0, cor_pid, "pid differs", "record of another pid");
	expect_broken(&c, NULL, 0, cor_ring_rec, "RING record inside a ring", "RING in a ring");
	expect_broken(&c, NULL, 0, cor_stats_rec, "STATS record inside a ring", "STATS in a ring");

	/* a corrupt record after good ones in the same chunk: the chunk
	 * goes (validate-then-apply); nothing of it is applied */
	expect_broken(&c, &good, 0, cor_pid, "pid differs", "good, good, bad pid");
	ck_assert_ptr_null(get_site(&c, SQL_Y, PID_A, STACK_1));
	ck_assert_uint_eq(c.nevents, 4); /* primed's */

	/* framing broken after good records: the whole records before the
	 * break are applied */
	expect_broken(&c, &good, 0, cor_len_past_head, "bad record length", "good, good, bad len");
	sa = get_site(&c, SQL_Y, PID_A, STACK_1);
	ck_assert_ptr_nonnull(sa);
	ck_assert_uint_eq(sa->samples, 2);
	ck_assert_uint_eq(c.nevents, 6);

	/* a record longer than a message, in a big ring */
	{
		struct wring w;
		struct sp_rec_hdr h = { .type = 200, .len = SP_MSG_MAX + 8 };
		uint64_t bad = c.bad_messages;

		wr_init(&w, PID_A, 1u << 20, 0);
		wr_add(&c, &w);
		memcpy(w.sh->data, &h, sizeof(h));
		w.head = h.len;
		wr_publish(&w);
		ck_assert_int_eq(sp_coll_ring_drain(&c, find_ring(&c, w.sh)), -1);
		ck_assert_ptr_nonnull(strstr(c.last_error, "longer than a message"));
		ck_assert_uint_eq(c.bad_messages, bad + 1);
		sp_coll_rings_drain(&c, 0);
		ck_assert_uint_eq(c.nrings, 0);
	}

	/* the collector still works: a good ring after all that */
	count = get_site(&c, SQL_X, PID_A, STACK_1)->samples;
	expect_accept(&c, e.buf, build_full(&e, PID_A, 2, 0), PID_A, "message after broken rings");
	ck_assert_uint_eq(get_site(&c, SQL_X, PID_A, STACK_1)->samples, count + 4);
	{
		struct wring w;

		wr_init(&w, PID_A, 4096, 0);
		wr_add(&c, &w);
		cor_none(&w);
		wr_put_msg(&w, &good);
		wr_publish(&w);
		ck_assert_uint_eq(sp_coll_rings_drain(&c, 0), 2);
		ck_assert_uint_eq(get_site(&c, SQL_Y, PID_A, STACK_1)->samples, 4);
	}
	sp_coll_rings_close(&c);
	ck_assert_uint_eq(c.nrings, 0);
	sp_coll_free(&c);
	enc_free(&e);
	enc_free(&good);
}
END_TEST

/* Announcements the collector refuses: the header does not match, the
 * size is not allowed, the mapping is too small, the tail is misaligned. */
START_TEST(test_ring_add_reject)
{
	struct sp_coll c;
	uint64_t bad;

	sp_coll_init(&c);
	for (int k = 0; k < 9; k++) {
		uint32_t size = 4096;
		size_t map_len = sizeof(struct sp_ring_shared) + 8192;
		struct sp_ring_shared *sh = ring_alloc(map_len);
		struct sp_rec_ring rr = { .h.type = SP_REC_RING, .h.len = sizeof(rr) };
		const char *what = "";

		ring_hdr_init(sh, PID_A, 7, size, 0);
		rr.pid = PID_A;
		rr.tid = 7;
		rr.size = size;
		switch (k) {
		case 0:
			sh->magic ^= 1;
			what = "magic";
			break;
		case 1:
			rr.size = sh->size = 6000;
			what = "size not a power of two";
			break;
		case 2:
			rr.size = sh->size = 2048;
			what = "size below 4096";
			break;
		case 3:
			rr.size = sh->size = 0;
			what = "size 0";
			break;
		case 4:
			sh->pid = PID_B;
			what = "header pid";
			break;
		case 5:
			sh->tid = 8;
			what = "header tid";
			break;
		case 6:
			sh->size = 8192;
			what = "header size";
			break;
		case 7:
			rr.size = sh->size = 16384;
			what = "mapping smaller than the size";
			break;
		case 8:
			sh->tail = sh->head = 12;
			what = "tail not a multiple of 8";
			break;
		}
		bad = c.bad_messages;
		ck_assert_msg(sp_coll_ring_add(&c, sh, map_len, &rr) == -1, "%s: accepted", what);
		ck_assert_msg(c.bad_messages == bad + 1, "%s: not counted", what);
		ck_assert_msg(c.last_error[0], "%s: no reason", what);
		ck_assert_uint_eq(c.nrings, 0);
	}
	sp_coll_free(&c);
}
END_TEST

/* ---- a writer thread ---------------------------------------------------------- */

#define CONC_N 200000

static void *conc_writer(void *arg)
{
	struct wring *w = arg;
	struct enc e = { 0 };

	for (uint64_t i = 1; i <= CONC_N; i++) {
		enc_begin(&e, PID_A, 0, 0);
		if (i % 1000 == 0) {
			/* now and then a longer record */
			put_sql(&e, 5000 + i, "SELECT something rather longer than a plain record");
		}
		put_ev(&e, SQL_X, i, i);
		for (size_t off = sizeof(struct sp_msg_hdr); off < e.len;) {
			struct sp_rec_hdr rh;

			memcpy(&rh, e.buf + off, sizeof(rh));
			while (!wr_room(w, rh.len))
				sched_yield();
			wr_put(w, e.buf + off, rh.len);
			off += rh.len;
		}
		if (i % 7 == 0 || i == CONC_N)
			wr_publish(w);
	}
	__atomic_store_n(&w->sh->dead, 1, __ATOMIC_RELEASE);
	enc_free(&e);
	return NULL;
}

/* A thread appends CONC_N events (and now and then an SQL text) through a
 * 4 KiB ring while the test reads it in a loop: each arrives exactly once
 * and in order, and the ring is freed once it is dead and read. */
START_TEST(test_ring_concurrent)
{
	struct sp_coll c;
	struct wring w;
	pthread_t th;
	struct sp_sagg *sa;
	uint64_t loops = 0;

	sp_coll_init(&c);
	c.events_max = CONC_N;
	wr_init(&w, PID_A, 4096, 0xFFFFF800u);
	wr_add(&c, &w);
	ck_assert_int_eq(pthread_create(&th, NULL, conc_writer, &w), 0);
	while (c.nrings) {
		sp_coll_rings_drain(&c, 0);
		loops++;
	}
	pthread_join(th, NULL);
	ck_assert_uint_eq(c.bad_messages, 0);
	sa = get_site(&c, SQL_X, PID_A, STACK_1);
	ck_assert_ptr_nonnull(sa);
	ck_assert_uint_eq(sa->samples, CONC_N);
	ck_assert_uint_eq(sa->total_ns, (uint64_t)CONC_N * (CONC_N + 1) / 2);
	ck_assert_uint_eq(c.nevents, CONC_N);
	ck_assert_uint_eq(c.events_dropped, 0);
	for (size_t i = 0; i < c.nevents; i++)
		if (c.events[i].seq != i + 1 || c.events[i].db_ns != i + 1)
			ck_abort_msg("event %zu: seq %lu, db %lu", i,
				     (unsigned long)c.events[i].seq,
				     (unsigned long)c.events[i].db_ns);
	ck_assert_uint_eq(c.sqls.count, CONC_N / 1000);
	ck_assert_uint_eq(c.records, CONC_N + CONC_N / 1000);
	ck_assert_uint_eq(c.queries.count, 0);
	printf("concurrent ring: %llu records in %llu readings\n", (unsigned long long)c.records,
	       (unsigned long long)loops);
	sp_coll_free(&c);
}
END_TEST

/* ---- descriptors over a socket ------------------------------------------------ */

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	int n = 0;

	ck_assert_ptr_nonnull(d);
	while ((de = readdir(d)))
		n += de->d_name[0] != '.';
	closedir(d);
	return n - 1; /* the directory's own */
}

/* Send e's message over sock with the descriptors fds[nfd]. */
static void send_fds(int sock, struct enc *e, const int *fds, int nfd)
{
	char cbuf[CMSG_SPACE(sizeof(int) * 16)];
	struct iovec iov = { .iov_base = e->buf, .iov_len = enc_end(e) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

	memset(cbuf, 0, sizeof(cbuf));
	if (nfd) {
		struct cmsghdr *ch;

		ck_assert_int_le(nfd, 16);
		mh.msg_control = cbuf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfd);
		ch = CMSG_FIRSTHDR(&mh);
		ch->cmsg_level = SOL_SOCKET;
		ch->cmsg_type = SCM_RIGHTS;
		ch->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfd);
		memcpy(CMSG_DATA(ch), fds, sizeof(int) * (size_t)nfd);
	}
	ck_assert_int_eq(sendmsg(sock, &mh, MSG_NOSIGNAL), (ssize_t)iov.iov_len);
}

/* A memfd ring as the preload makes it; *sh gets the writer's mapping. */
static int make_memfd_ring(struct wring *w, uint32_t pid, uint32_t size, unsigned flags,
			   size_t file_len)
{
	int fd = memfd_create("check-ring", MFD_CLOEXEC | flags);

	ck_assert_int_ge(fd, 0);
	w->size = size;
	w->map_len = sizeof(struct sp_ring_shared) + size;
	ck_assert_int_eq(ftruncate(fd, (off_t)(file_len ? file_len : w->map_len)), 0);
	w->sh = mmap(NULL, w->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	ck_assert_ptr_ne(w->sh, MAP_FAILED);
	w->head = 0;
	ring_hdr_init(w->sh, pid, pid, size, 0);
	return fd;
}

/* One message from the collector's side of the pair: sp_coll_recv's
 * result, with no descriptor left behind. */
static int recv_one(struct sp_coll *c, int sock, uint32_t peer, uint8_t *buf, size_t cap,
		    const char *what)
{
	int before = count_fds();
	int r = sp_coll_recv(c, sock, peer, buf, cap);
	int after = count_fds();

	/* a ring keeps no descriptor either: mapped, then closed */
	ck_assert_msg(after == before, "%s: %d descriptors before, %d after", what, before, after);
	return r;
}

static void wr_unmap(struct wring *w)
{
	munmap(w->sh, w->map_len);
}

START_TEST(test_ring_fd_passing)
{
	struct sp_coll c;
	struct sp_proc pbuf;
	struct enc e = { 0 };
	struct wring w, w2;
	struct sp_rec_ring rr;
	uint32_t me = (uint32_t)getpid();
	uint8_t *buf = malloc(MSG_CAP + 64);
	int sv[2], mfd, pfd[2], k;
	uint64_t bad;

	ck_assert_ptr_nonnull(buf);
	sp_coll_init(&c);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	ck_assert_int_eq(recv_one(&c, sv[0], me, buf, MSG_CAP, "empty"), 0);

	/* HELLO and a ring in one message, as a new thread's first write */
	mfd = make_memfd_ring(&w, me, 4096, MFD_ALLOW_SEALING, 0);
	enc_begin(&e, me, 1, 0);
	put_hello(&e, "/bin/fd-test", SP_CLOCK_MONOTONIC);
	rr = wr_rec(&w);
	enc_put(&e, &rr, sizeof(rr), NULL, 0, NULL, 0);
	send_fds(sv[1], &e, &mfd, 1);
	ck_assert_int_eq(recv_one(&c, sv[0], me, buf, MSG_CAP, "ring"), 1);
	ck_assert_uint_eq(c.nrings, 1);
	ck_assert_uint_eq(c.rings_opened, 1);
	ck_assert_uint_eq(c.rings[0]->image, 1);
	/* sealed against shrinking: the writer cannot make our reads fault */
	ck_assert_int_eq(ftruncate(mfd, 0), -1);
	ck_assert_int_eq(errno, EPERM);
	close(mfd);

	/* records, then a WAKE (header only): read at once */
	enc_begin(&e, me, 0, 0);
	put_ev(&e, SQL_X, 10, 10);
	put_ev(&e, SQL_X, 20, 20);
	wr_put_msg(&w, &e);
	wr_publish(&w);
	enc_begin(&e, me, 2, 0);
	patch16(&e, offsetof(struct sp_msg_hdr, flags), SP_MSG_WAKE);
	send_fds(sv[1], &e, NULL, 0);
	ck_assert_int_eq(recv_one(&c, sv[0], me, buf, MSG_CAP, "wake"), 1);
	ck_assert_uint_eq(nsamples(&c, SQL_X, me), 2);

	/* bad: a descriptor but no RING record (the descriptor is closed) */
	bad = c.bad_messages;
	k = open("/dev/null", O_RDONLY | O_CLOEXEC);
	enc_begin(&e, me, 3, 0);
	put_ev(&e, SQL_X, 1, 1);
	send_fds(sv[1], &e, &k, 1);
	close(k);
	ck_assert_int_eq(recv_one(&c, sv[0], me, buf, MSG_CAP, "fd without RING"), -2);
	ck_assert_uint_eq(c.bad_messages, bad + 1);
	ck_assert_ptr_nonnull(strstr(c.last_error, "without a RING or STATS record"));
	ck_assert_uint_eq(nsamples(&c, SQL_X, me), 2); /* nothing applied */
	ck_assert_uint_eq(get_proc(&c, me, &pbuf)->bad_msgs, 1);

	/* bad: a RING record without a descriptor */
	enc_begin(&e, me, 4, 0);
	rr = wr_rec(&w);
	enc_put(&e, &rr, sizeof(rr), NULL, 0, NULL, 0);
	send_fds(sv[1], &e, NULL, 0);
	ck_assert_int_eq(recv_one(&c, sv[0], me, buf, MSG_CAP, "RING without fd"), -2);
	ck_assert_ptr_nonnull(strstr(c.last_error, "without its descriptor"));

	/* bad: two descriptors, and more than the collector takes (truncated) */
	ck_assert_int_eq(pipe2(pfd, O_CLOEXEC), 0);
	mfd = make_memfd_ring(&w2, me, 4096, 0, 0);
	enc_begin(&e, me, 5, 0);
	rr = wr_rec(&w2);
	enc_put(&e, &rr, sizeof(rr), NULL, 0, NULL, 0);
	{
		int two[2] = { mfd, pfd[0] }, many[12];

		send_fds(sv[1], &e, two, 2);
		ck_assert_int_eq(recv_one(&c, sv[0], me, buf, MSG_CAP, "two fds"), -2);
		ck_assert_ptr_nonnull(strstr(c.last_error, "2 descriptors"));
		for (k = 0; k < 12; k++)
			many[k] = pfd[k & 1];
		send_fds(sv[1], &e, many, 12);
		ck_assert_int_eq(recv_one(&c, sv[0], me, buf, MSG_CAP, "12 fds"), -2);
		ck_assert_ptr_nonnull(strstr(c.last_error, "truncated"));
	}
	/* out of descriptors (issue 23, item 11): the ring's descriptor
	 * cannot be installed (MSG_CTRUNC, none received); the message is
	 * applied without it and the loss counted, not dropped silently */
	{
		struct rlimit old, low;
		uint64_t fl = c.fds_lost, rl = c.rings_lost, nr = c.nrings;
		int lowest = dup(0);

		ck_assert_int_ge(lowest, 0);
		close(lowest);
		ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &old), 0);
		low = old;
		low.rlim_cur = (rlim_t)lowest; /* no number left to install one at */
		send_fds(sv[1], &e, &mfd, 1);
		ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &low), 0);
		k = sp_coll_recv(&c, sv[0], me, buf, MSG_CAP);
		ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &old), 0);
		ck_assert_int_eq(k, 1);
		ck_assert_uint_eq(c.fds_lost, fl + 1);
		ck_assert_uint_eq(c.rings_lost, rl + 1);
		ck_assert_uint_eq(c.nrings, nr); /* no ring registered */
	}
	/* bad: not a memfd (a pipe) */
	send_fds(sv[1], &e, &pfd[0], 1);
	ck_assert_int_eq(recv_one(&c, sv[0], me, buf, MSG_CAP, "pipe"), -2);
	ck_assert_ptr_nonnull(strstr(c.last_error, "not a memfd"));
	close(pfd[0]);
	close(pfd[1]);
	/* bad: a memfd made without MFD_ALLOW_SEALING: it could be shrunk
	 * under the collector's reads (SIGBUS), so it is refused */
	send_fds(sv[1], &e, &mfd, 1);
	ck_assert_int_eq(recv_one(&c, sv[0], me, buf, MSG_CAP, "unsealable"), -2);
	ck_assert_ptr_nonnull(strstr(c.last_error, "cannot be sealed"));
	close(mfd);
	wr_unmap(&w2);
	/* the rest with a memfd as the preload makes it */
	mfd = make_memfd_ring(&w2, me, 4096, MFD_ALLOW_SEALING, 0);
	enc_begin(&e, me, 5, 0);
	rr = wr_rec(&w2);
	enc_put(&e, &rr, sizeof(rr), NULL, 0, NULL, 0);
	/* bad: the writer's own ring header says another pid */
	w2.sh->pid = PID_B;
	send_fds(sv[1], &e, &mfd, 1);
	ck_assert_int_eq(recv_one(&c, sv[0], me, buf, MSG_CAP, "header pid"), -2);
	ck_assert_ptr_nonnull(strstr(c.last_error, "differs from its RING record"));
	w2.sh->pid = me;
	/* the collector sealed it on the way: it cannot shrink any more */
	ck_assert_int_eq(ftruncate(mfd, 4096), -1);
	/* bad: a RING record (and message) of another pid than the peer */
	ck_assert_int_eq(recv_one(&c, sv[0], me, buf, MSG_CAP, "drained"), 0);
	send_fds(sv[1], &e, &mfd, 1);
	ck_assert_int_eq(recv_one(&c, sv[0], (uint32_t)getppid(), buf, MSG_CAP, "peer pid"), -2);
	ck_assert_ptr_nonnull(strstr(c.last_error, "connected peer"));
	/* bad: memfd smaller than the ring it announces */
	{
		struct wring w3;
		int small = make_memfd_ring(&w3, me, 4096, MFD_ALLOW_SEALING, 4096);

		send_fds(sv[1], &e, &small, 1);
		ck_assert_int_eq(recv_one(&c, sv[0], me, buf, MSG_CAP, "small memfd"), -2);
		ck_assert_ptr_nonnull(strstr(c.last_error, "smaller"));
		close(small);
	}
	/* bad: oversized for the buffer, with its descriptor */
	send_fds(sv[1], &e, &mfd, 1);
	ck_assert_int_eq(recv_one(&c, sv[0], me, buf, 40, "oversized"), -2);
	ck_assert_ptr_nonnull(strstr(c.last_error, "oversized"));
	ck_assert_uint_eq(c.nrings, 1);
	/* good: the second ring */
	send_fds(sv[1], &e, &mfd, 1);
	ck_assert_int_eq(recv_one(&c, sv[0], me, buf, MSG_CAP, "second ring"), 1);
	ck_assert_uint_eq(c.nrings, 2);
	close(mfd);

	/* end of the connection: rings read, kept (the writer reconnects) */
	enc_begin(&e, me, 0, 0);
	put_ev(&e, SQL_X, 30, 30);
	wr_put_msg(&w, &e);
	wr_publish(&w);
	close(sv[1]);
	ck_assert_int_eq(recv_one(&c, sv[0], me, buf, MSG_CAP, "EOF"), -1);
	close(sv[0]);
	ck_assert_uint_eq(nsamples(&c, SQL_X, me), 3);
	ck_assert_uint_eq(c.nrings, 2);

	/* reconnect: the same rings go on */
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	enc_begin(&e, me, 6, 0);
	put_hello(&e, "/bin/fd-test", SP_CLOCK_MONOTONIC);
	patch16(&e, sizeof(struct sp_msg_hdr) + offsetof(struct sp_rec_hdr, flags),
		SP_HELLO_RECONNECT);
	send_fds(sv[1], &e, NULL, 0);
	ck_assert_int_eq(recv_one(&c, sv[0], me, buf, MSG_CAP, "reconnect"), 1);
	ck_assert_uint_eq(c.nrings, 2);
	ck_assert_uint_eq(get_proc(&c, me, &pbuf)->reconnects, 1);
	ck_assert_uint_eq(get_proc(&c, me, &pbuf)->image, 1);
	enc_begin(&e, me, 0, 0);
	put_ev(&e, SQL_X, 40, 40);
	wr_put_msg(&w, &e);
	wr_put_msg(&w2, &e);
	wr_publish(&w);
	wr_publish(&w2);
	ck_assert_uint_eq(sp_coll_rings_drain(&c, 0), 2);
	ck_assert_uint_eq(nsamples(&c, SQL_X, me), 5);

	/* BYE (before exec): its rings are read, and kept - other threads
	 * and later destructors may still write */
	enc_begin(&e, me, 0, 0);
	put_ev(&e, SQL_X, 50, 50);
	wr_put_msg(&w, &e);
	wr_publish(&w);
	enc_begin(&e, me, 7, 0);
	put_bye(&e, 6, 0);
	send_fds(sv[1], &e, NULL, 0);
	ck_assert_int_eq(recv_one(&c, sv[0], me, buf, MSG_CAP, "BYE"), 1);
	ck_assert_uint_eq(c.nrings, 2);
	ck_assert_uint_eq(nsamples(&c, SQL_X, me), 6);
	/* written after BYE (a library destructor), then the process ends:
	 * the connection's end reads it and frees the image's rings */
	enc_begin(&e, me, 0, 0);
	put_ev(&e, SQL_X, 60, 60);
	wr_put_msg(&w2, &e);
	wr_publish(&w2);
	close(sv[1]);
	ck_assert_int_eq(recv_one(&c, sv[0], me, buf, MSG_CAP, "EOF after BYE"), -1);
	close(sv[0]);
	ck_assert_uint_eq(c.nrings, 0);
	ck_assert_uint_eq(nsamples(&c, SQL_X, me), 7);
	wr_unmap(&w);
	wr_unmap(&w2);

	/* the new image, on its own connection: HELLO, its own ring (image 2) */
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	mfd = make_memfd_ring(&w, me, 8192, MFD_ALLOW_SEALING, 0);
	enc_begin(&e, me, 1, 0);
	put_hello(&e, "/bin/after-exec", SP_CLOCK_MONOTONIC);
	send_fds(sv[1], &e, NULL, 0);
	enc_begin(&e, me, 2, 0);
	rr = wr_rec(&w);
	enc_put(&e, &rr, sizeof(rr), NULL, 0, NULL, 0);
	send_fds(sv[1], &e, &mfd, 1);
	close(mfd);
	ck_assert_int_eq(recv_one(&c, sv[0], me, buf, MSG_CAP, "new image"), 1);
	ck_assert_int_eq(recv_one(&c, sv[0], me, buf, MSG_CAP, "new image ring"), 1);
	ck_assert_uint_eq(c.nrings, 1);
	ck_assert_uint_eq(c.rings[0]->image, 2);
	ck_assert_str_eq(get_proc(&c, me, &pbuf)->exe, "/bin/fd-test -> /bin/after-exec");

	/* an image that never said BYE: a third image's HELLO first reads
	 * the second's ring, under the second's clock, and frees it */
	enc_begin(&e, me, 0, 0);
	put_ev(&e, SQL_Y, 1000, 1000);
	wr_put_msg(&w, &e);
	wr_publish(&w);
	c.ns_per_tick = 3.0;
	enc_begin(&e, me, 3, 0);
	put_hello(&e, "/bin/third", SP_CLOCK_TSC);
	send_fds(sv[1], &e, NULL, 0);
	ck_assert_int_eq(recv_one(&c, sv[0], me, buf, MSG_CAP, "third image"), 1);
	ck_assert_uint_eq(c.nrings, 0);
	ck_assert_uint_eq(get_site(&c, SQL_Y, me, STACK_1)->total_ns, 1000); /* not 3000 */
	ck_assert_int_eq(get_proc(&c, me, &pbuf)->clock, SP_CLOCK_TSC);
	wr_unmap(&w);

	close(sv[0]);
	close(sv[1]);
	sp_coll_free(&c);
	enc_free(&e);
	free(buf);
}
END_TEST

/* ---- shared statistics: a writer by hand -------------------------------------- */

#define SBASE 0x7f3a12340000ULL /* the writer's address of byte 0 (made up) */

/*
 * A statistics buffer laid out as the preload writes it (sp_wire.h):
 * chunk 0 holds the header, each further chunk a sp_stats_chunk and whole
 * records, pointers between records the writer's addresses (base +
 * offset). Anonymous memory is followed by an inaccessible page, so that
 * a read past the end faults (CK_FORK turns that into a failed test); a
 * memfd's mapping is used as the preload uses its own (base = address).
 */
struct sbuf {
	uint8_t *map;
	size_t size, map_len;
	uint64_t base;
};

static void sb_header(struct sbuf *b, uint32_t pid)
{
	struct sp_stats_hdr *h = (void *)b->map;

	h->magic = SP_STATS_MAGIC;
	h->version = SP_WIRE_VERSION;
	h->pid = pid;
	h->chunk_size = SP_STATS_CHUNK;
	h->size = b->size;
	h->base = b->base;
	h->nchunks = 1;
}

static void sb_init(struct sbuf *b, uint32_t chunks)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);

	b->size = (size_t)chunks * SP_STATS_CHUNK;
	b->map_len = b->size + pg;
	b->map = mmap(NULL, b->map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(b->map, MAP_FAILED);
	ck_assert_int_eq(mprotect(b->map + b->size, pg, PROT_NONE), 0);
	b->base = SBASE;
	sb_header(b, PID_A);
}

static void sb_free(struct sbuf *b)
{
	munmap(b->map, b->map_len);
	b->map = NULL;
}

static struct sp_stats_hdr *sb_hdr(struct sbuf *b)
{
	return (struct sp_stats_hdr *)(void *)b->map;
}

static struct sp_stats_chunk *sb_ch(struct sbuf *b, uint32_t ci)
{
	return (struct sp_stats_chunk *)(void *)(b->map + (size_t)ci * SP_STATS_CHUNK);
}

static void *sb_at(struct sbuf *b, size_t off)
{
	return b->map + off;
}

static uint64_t sb_addr(const struct sbuf *b, size_t off)
{
	return b->base + off;
}

/* Take the next chunk for arena number arena (published, empty). */
static uint32_t sb_chunk(struct sbuf *b, uint32_t arena)
{
	uint32_t ci = sb_hdr(b)->nchunks;
	struct sp_stats_chunk *ch;

	ck_assert_uint_lt(ci, b->size / SP_STATS_CHUNK);
	ch = sb_ch(b, ci);
	ch->magic = SP_CHUNK_MAGIC;
	ch->used = sizeof(*ch);
	ch->arena = arena;
	sb_hdr(b)->nchunks = ci + 1;
	return ci;
}

/* A zeroed record of type and len at the end of chunk ci, published;
 * returns its offset in the buffer. */
static size_t sb_rec(struct sbuf *b, uint32_t ci, uint16_t type, uint32_t len)
{
	struct sp_stats_chunk *ch = sb_ch(b, ci);
	size_t off = (size_t)ci * SP_STATS_CHUNK + ch->used;
	struct sp_rec_hdr h = { .type = type, .len = len };

	ck_assert_uint_le(ch->used + len, SP_STATS_CHUNK);
	memset(b->map + off, 0, len);
	memcpy(b->map + off, &h, sizeof(h));
	ch->used += len;
	return off;
}

static struct sp_agg_arena *sb_arena(struct sbuf *b, uint32_t ci, uint32_t number, uint32_t tid)
{
	struct sp_agg_arena *a = sb_at(b, sb_rec(b, ci, SP_AGG_ARENA, sizeof(*a)));

	a->arena = number;
	a->tid = tid;
	return a;
}

static struct sp_agg_query *sb_query(struct sbuf *b, uint32_t ci, uint64_t sql_id, uint32_t kind)
{
	struct sp_agg_query *q = sb_at(b, sb_rec(b, ci, SP_AGG_QUERY, sizeof(*q)));

	q->kind = kind;
	q->sql_id = sql_id;
	q->min = UINT64_MAX;
	return q;
}

static uint64_t sb_addr_of(const struct sbuf *b, const void *rec)
{
	return sb_addr(b, (size_t)((const uint8_t *)rec - b->map));
}

/* One execution of db ticks (wall db + 10, one row) added to q as the
 * writer adds it; a histogram block is made in chunk hci at its first
 * value. */
static void sb_exec(struct sbuf *b, struct sp_agg_query *q, uint32_t hci, uint64_t db)
{
	uint32_t i = sp_hist_index(db), blk = i / SP_HIST_PER_BLOCK;
	struct sp_agg_hist *hb;

	q->count++;
	q->db += db;
	q->wall += db + 10;
	q->rows++;
	if (db < q->min)
		q->min = db;
	if (db > q->max)
		q->max = db;
	if (!q->hist[blk]) {
		size_t off = sb_rec(b, hci, SP_AGG_HIST, sizeof(*hb));

		((struct sp_rec_hdr *)sb_at(b, off))->flags = (uint16_t)blk;
		q->hist[blk] = sb_addr(b, off);
	}
	hb = sb_at(b, (size_t)(q->hist[blk] - b->base));
	hb->bucket[i % SP_HIST_PER_BLOCK]++;
}

/* A closed N+1 loop of len executions credited to q, as the writer does
 * (its RUNS record made in chunk ci at the first run of 2 or more). */
static void sb_run(struct sbuf *b, struct sp_agg_query *q, uint32_t ci, uint64_t len)
{
	struct sp_agg_loops *r;

	q->runs++;
	if (len > q->max_run)
		q->max_run = len;
	if (len < 2)
		return;
	if (!q->loops_by_len)
		q->loops_by_len = sb_addr(b, sb_rec(b, ci, SP_AGG_LOOPS, sizeof(*r)));
	r = sb_at(b, (size_t)(q->loops_by_len - b->base));
	r->by_len[sp_loop_bucket(len)]++;
}

/* A copy of the aggregate of (sql_id, kind), or a zeroed one (count 0)
 * when there is none. */
static struct sp_qagg qget(struct sp_coll *c, uint64_t sql_id, uint64_t kind)
{
	struct sp_qagg q, *v = get_q(c, sql_id, kind);

	if (v)
		memcpy(&q, v, sizeof(q));
	else
		memset(&q, 0, sizeof(q));
	return q;
}

static uint64_t hcount(const struct sp_qagg *q)
{
	return q->hist ? sp_hist_count(q->hist) : 0;
}

/*
 * The layout most hostile cases start from: arena 1 in chunk 1 (ARENA,
 * then SQL_X with db times 100 and 5000: two histogram blocks), arena 2
 * in chunk 2 (ARENA, SQL_Y with 300), chunk 3 taken by arena 2 and empty.
 * *qx and *qy: the two query records. sb_fill_basic writes it into a
 * buffer whose header is made, sb_basic into a new anonymous one.
 */
static void sb_fill_basic(struct sbuf *b, struct sp_agg_query **qx, struct sp_agg_query **qy)
{
	uint32_t c1, c2;

	c1 = sb_chunk(b, 1);
	sb_arena(b, c1, 1, 11);
	*qx = sb_query(b, c1, SQL_X, SP_KIND_STMT);
	sb_exec(b, *qx, c1, 100);
	sb_exec(b, *qx, c1, 5000);
	c2 = sb_chunk(b, 2);
	sb_arena(b, c2, 2, 12);
	*qy = sb_query(b, c2, SQL_Y, SP_KIND_STMT);
	sb_exec(b, *qy, c2, 300);
	sb_chunk(b, 2);
}

static void sb_basic(struct sbuf *b, struct sp_agg_query **qx, struct sp_agg_query **qy)
{
	sb_init(b, 4);
	sb_fill_basic(b, qx, qy);
}

/* Merge b into a fresh collector *c (monotonic clock). */
static void sb_merge(struct sp_coll *c, struct sbuf *b)
{
	sp_coll_init(c);
	sp_coll_stats_merge(c, PID_A, b->map, b->size, SP_CLOCK_MONOTONIC);
}

static uint64_t stats_bad(struct sp_coll *c)
{
	struct sp_proc pbuf;

	return get_proc(c, PID_A, &pbuf)->stats_bad;
}

/* ---- shared statistics: merging ------------------------------------------------ */

/* db times of SQL_X in arena 1: every histogram block from 0 to 9 but 4
 * and 6-8, below 16 (exact buckets) up to 2^40 */
static const uint64_t vx1[] = {
	3, 15, 16, 100, 1000, 1000, 1000, 5000, 123456, 7777777, (1ull << 40) + 12345
};
/* and in arena 2 */
static const uint64_t vx2[] = { 200, 200, 300 };

/*
 * Two arenas, three chunks (arena 2's histogram blocks in its second
 * chunk), SQL_X in both and SQL_Y (kind EXEC) in arena 1, closed runs and
 * each arena's open run, unattributed executions and an ERRS record:
 * merged exactly. Then the same under the TSC clock (ticks * ns_per_tick).
 */
START_TEST(test_stats_merge)
{
	struct sp_coll c, ct;
	struct sp_proc pbuf, *p;
	struct sbuf b;
	struct sp_agg_query *q1, *q2, *q1b;
	struct sp_qagg x, y;
	uint64_t all[16], sum1 = 0, sum2 = 0, n = 0;
	uint32_t c1, c2, c3;
	static const double qs[] = { 0, 0.1, 0.25, 0.5, 0.6, 0.75, 0.9, 0.99, 1 };

	sb_init(&b, 5);
	sb_hdr(&b)->unattributed = 2;
	c1 = sb_chunk(&b, 1);
	(void)sb_arena(&b, c1, 1, 101);
	q1 = sb_query(&b, c1, SQL_X, SP_KIND_STMT);
	q2 = sb_query(&b, c1, SQL_Y, SP_KIND_EXEC);
	for (size_t i = 0; i < sizeof(vx1) / sizeof(vx1[0]); i++) {
		sb_exec(&b, q1, c1, vx1[i]);
		sum1 += vx1[i];
		all[n++] = vx1[i];
	}
	q1->fullscan_steps = 5;
	q1->sorts = 2;
	q1->autoindex = 1;
	q1->vm_steps = 1000;
	q1->errors = 1;
	q1->samples = 2;
	q1->prepares = 3;
	q1->prepare_time = 300;
	q1->nested = 1;
	q1->nested_time = 50;
	sb_run(&b, q1, c1, 1);
	sb_run(&b, q1, c1, 1);
	sb_run(&b, q1, c1, 2);
	sb_run(&b, q1, c1, 5);
	sb_run(&b, q1, c1, 40);
	{
		/* failures by code: exact, so the failures whose ERROR record
		 * was lost show as "<message lost...>" (checked below) */
		struct sp_agg_errs *er = sb_at(&b, sb_rec(&b, c1, SP_AGG_ERRS, sizeof(*er)));

		er->code[0].rc = 19;
		er->code[0].count = 1;
		q1->errs = sb_addr_of(&b, er);
	}
	sb_exec(&b, q2, c1, 50);
	sb_exec(&b, q2, c1, 60);
	/* arena 1's open run: two executions of SQL_Y so far */
	q2->loop_open = 2;

	c2 = sb_chunk(&b, 2);
	(void)sb_arena(&b, c2, 2, 102);
	q1b = sb_query(&b, c2, SQL_X, SP_KIND_STMT);
	c3 = sb_chunk(&b, 2); /* arena 2's second chunk: its histogram blocks */
	for (size_t i = 0; i < sizeof(vx2) / sizeof(vx2[0]); i++) {
		sb_exec(&b, q1b, c3, vx2[i]);
		sum2 += vx2[i];
		all[n++] = vx2[i];
	}
	sb_run(&b, q1b, c3, 3);
	q1b->loop_open = 7;
	ck_assert_uint_eq(sb_hdr(&b)->nchunks, 4);

	sb_merge(&c, &b);
	p = get_proc(&c, PID_A, &pbuf);
	ck_assert_ptr_nonnull(p);
	ck_assert_uint_eq(p->stats_bad, 0);
	ck_assert_uint_eq(p->unattributed, 2);
	ck_assert_uint_eq(p->execs, n + 2 + 2);
	ck_assert_uint_eq(sp_coll_executions(&c), n + 2 + 2);
	/* the two queries, and the unattributed executions under a query of
	 * their own, so that the queries' counts add up to the process's */
	ck_assert_uint_eq(c.queries.count, 3);
	ck_assert_uint_eq(qget(&c, SP_SQL_UNATTRIBUTED, SP_KIND_STMT).count, 2);
	{
		/* the failure with code 19 had no ERROR record: after finish
		 * it is one "<message lost...>" entry; finishing again adds
		 * nothing */
		size_t it = 0;
		const uint64_t *ek;
		struct sp_err *er;
		int found = 0;

		ck_assert_uint_eq(c.errors.count, 0);
		sp_coll_finish(&c);
		sp_coll_finish(&c);
		ck_assert_uint_eq(c.errors.count, 1);
		while ((er = hmap_next(&c.errors, &it, (const void **)&ek))) {
			ck_assert_uint_eq(ek[0], SQL_X);
			ck_assert_uint_eq(ek[1], 19);
			ck_assert_uint_eq(er->count, 1);
			ck_assert_ptr_nonnull(strstr(er->msg, "message lost"));
			found = 1;
		}
		ck_assert_int_eq(found, 1);
	}

	x = qget(&c, SQL_X, SP_KIND_STMT);
	ck_assert_uint_eq(x.count, n);
	ck_assert_uint_eq(x.total_ns, sum1 + sum2);
	ck_assert_uint_eq(x.self_ns, sum1 + sum2 - 50);
	ck_assert_uint_eq(x.wall_ns, sum1 + sum2 + 10 * n);
	ck_assert_uint_eq(x.rows, n);
	ck_assert_uint_eq(x.fullscan_steps, 5);
	ck_assert_uint_eq(x.sorts, 2);
	ck_assert_uint_eq(x.autoindex, 1);
	ck_assert_uint_eq(x.vm_steps, 1000);
	ck_assert_uint_eq(x.errors, 1);
	ck_assert_uint_eq(x.samples, 2);
	ck_assert_uint_eq(x.prepares, 3);
	ck_assert_uint_eq(x.prepare_ns, 300);
	ck_assert_uint_eq(x.nested, 1);
	ck_assert_uint_eq(x.min_ns, 3);
	ck_assert_uint_eq(x.max_ns, (1ull << 40) + 12345);
	/* runs: arena 1 closed 1, 1, 2, 5, 40; arena 2 closed 3 and has 7 open */
	ck_assert_uint_eq(x.runs, 7);
	ck_assert_uint_eq(x.max_run, 40);
	/* counts up to the longest run's bucket (sp_qagg.runs_nb) */
	ck_assert_uint_gt(x.runs_nb, (unsigned)sp_loop_bucket(40));
	ck_assert_uint_le(x.runs_nb, SP_RUN_BUCKETS);
	ck_assert_uint_eq(x.loops_by_len[0], 2);
	ck_assert_uint_eq(x.loops_by_len[1], 1);
	ck_assert_uint_eq(x.loops_by_len[2], 1);
	ck_assert_uint_eq(x.loops_by_len[4], 1);
	ck_assert_uint_eq(x.loops_by_len[6], 1);
	ck_assert_uint_eq(x.loops_by_len[sp_loop_bucket(40)], 1);
	{
		uint64_t tot = 0;

		for (uint32_t i = 0; i < x.runs_nb; i++)
			tot += x.loops_by_len[i];
		ck_assert_uint_eq(tot, x.runs);
	}
	/* the histogram: every execution, exact ends, the rest within 1/16 of
	 * the value (the writer's buckets) and 1/128 (the collector's): see
	 * test_stats_percentile_accuracy */
	ck_assert_ptr_nonnull(x.hist);
	ck_assert_uint_eq(sp_hist_count(x.hist), n);
	ck_assert_uint_eq(sp_hist_min(x.hist), 3);
	ck_assert_uint_eq(sp_hist_max(x.hist), (1ull << 40) + 12345);
	ck_assert_uint_eq(sp_hist_sum(x.hist), sum1 + sum2);
	for (size_t i = 0; i < sizeof(qs) / sizeof(qs[0]); i++) {
		uint64_t want = sp_percentile_exact(all, n, qs[i]);
		uint64_t got = sp_hist_quantile(x.hist, qs[i]);
		double err = fabs((double)got - (double)want);

		ck_assert_msg(err <= (double)want * 9 / 128, "p%g: %lu, exact %lu", qs[i] * 100,
			      (unsigned long)got, (unsigned long)want);
		if (want < 16)
			ck_assert_uint_eq(got, want); /* a bucket each */
	}
	ck_assert_uint_eq(sp_hist_quantile(x.hist, 0), 3);
	ck_assert_uint_eq(sp_hist_quantile(x.hist, 1), (1ull << 40) + 12345);

	y = qget(&c, SQL_Y, SP_KIND_EXEC);
	ck_assert_uint_eq(y.count, 2);
	ck_assert_uint_eq(y.total_ns, 110);
	ck_assert_uint_eq(y.min_ns, 50);
	ck_assert_uint_eq(y.max_ns, 60);
	ck_assert_uint_eq(y.runs, 1); /* the open one */
	ck_assert_uint_eq(y.max_run, 2);
	ck_assert_uint_eq(y.loops_by_len[1], 1);
	ck_assert_uint_eq(sp_hist_count(y.hist), 2);
	ck_assert_uint_eq(qget(&c, SQL_Y, SP_KIND_STMT).count, 0);

	/* TSC: every time times ns_per_tick, counts and rows alike unchanged */
	sp_coll_init(&ct);
	ct.ns_per_tick = 2.0;
	sp_coll_stats_merge(&ct, PID_A, b.map, b.size, SP_CLOCK_TSC);
	x = qget(&ct, SQL_X, SP_KIND_STMT);
	ck_assert_uint_eq(x.count, n);
	ck_assert_uint_eq(x.total_ns, 2 * (sum1 + sum2));
	ck_assert_uint_eq(x.self_ns, 2 * (sum1 + sum2 - 50));
	ck_assert_uint_eq(x.wall_ns, 2 * (sum1 + sum2 + 10 * n));
	ck_assert_uint_eq(x.prepare_ns, 600);
	ck_assert_uint_eq(x.min_ns, 6);
	ck_assert_uint_eq(x.max_ns, 2 * ((1ull << 40) + 12345));
	ck_assert_uint_eq(x.rows, n);
	ck_assert_uint_eq(x.runs, 7);
	ck_assert_uint_eq(sp_hist_count(x.hist), n);
	ck_assert_uint_eq(sp_hist_quantile(x.hist, 1), 2 * ((1ull << 40) + 12345));
	{
		uint64_t want = 2 * sp_percentile_exact(all, n, 0.5);
		uint64_t got = sp_hist_quantile(x.hist, 0.5);

		ck_assert_msg(fabs((double)got - (double)want) <= (double)want * 9 / 128,
			      "TSC p50 %lu, exact %lu", (unsigned long)got, (unsigned long)want);
	}

	/* the buffer is only read: merged again, everything twice */
	sp_coll_stats_merge(&c, PID_A, b.map, b.size, SP_CLOCK_MONOTONIC);
	ck_assert_uint_eq(qget(&c, SQL_X, SP_KIND_STMT).count, 2 * n);
	ck_assert_uint_eq(qget(&c, SQL_X, SP_KIND_STMT).runs, 14);
	sp_coll_free(&c);
	sp_coll_free(&ct);
	sb_free(&b);
}
END_TEST

/*
 * How close a merged percentile comes to the value: one value v ten
 * times between 0 and UINT64_MAX, for v at the low edge, the middle and
 * the high edge of every writer bucket. The writer knows a value to
 * within 1/16 from its bucket's middle (sp_wire.h); the collector puts
 * that middle into its own histogram (64 buckets per power of two, 8 to
 * a writer bucket, the middle on a boundary between two) and reports the
 * middle of that bucket: up to 1/128 more. So a value at a bucket's
 * middle comes back within 1/128, any value within 1/16 + 1/128 (= 9/128,
 * reached at a low edge from 128 on), and values below 16 exactly.
 */
START_TEST(test_stats_percentile_accuracy)
{
	double worst[3] = { 0, 0, 0 };
	uint64_t worst_v[3] = { 0, 0, 0 };

	for (uint32_t i = 1; i <= sp_hist_index(UINT64_MAX); i++) {
		uint64_t lo, w;

		sp_hist_bucket(i, &lo, &w);
		for (int k = 0; k < 3; k++) {
			uint64_t v = k == 0 ? lo : k == 1 ? lo + w / 2 : lo + w - 1;
			struct sbuf b;
			struct sp_agg_query *q;
			struct sp_coll c;
			struct sp_qagg x;
			uint32_t c1;
			uint64_t got;
			double err;

			sb_init(&b, 2);
			c1 = sb_chunk(&b, 1);
			q = sb_query(&b, c1, SQL_X, SP_KIND_STMT);
			sb_exec(&b, q, c1, 0);
			for (int j = 0; j < 10; j++)
				sb_exec(&b, q, c1, v);
			sb_exec(&b, q, c1, UINT64_MAX);
			sb_merge(&c, &b);
			x = qget(&c, SQL_X, SP_KIND_STMT);
			ck_assert_uint_eq(sp_hist_count(x.hist), 12);
			ck_assert_uint_eq(sp_hist_quantile(x.hist, 0), 0);
			ck_assert_uint_eq(sp_hist_quantile(x.hist, 1), UINT64_MAX);
			got = sp_hist_quantile(x.hist, 0.5);
			err = fabs((double)got - (double)v) / (double)v;
			if (v < 16)
				ck_assert_uint_eq(got, v);
			ck_assert_msg(err <= (k == 1 ? 1.0 / 128 : 9.0 / 128) * (1 + 1e-9),
				      "v %lu: p50 %lu (error %.5f)", (unsigned long)v,
				      (unsigned long)got, err);
			if (err > worst[k]) {
				worst[k] = err;
				worst_v[k] = v;
			}
			sp_coll_free(&c);
			sb_free(&b);
		}
	}
	printf("stats percentiles: worst relative error %.5f at a low edge (%llu), %.5f at a "
	       "middle (%llu), %.5f at a high edge (%llu); 1/16 = %.5f\n",
	       worst[0], (unsigned long long)worst_v[0], worst[1], (unsigned long long)worst_v[1],
	       worst[2], (unsigned long long)worst_v[2], 1.0 / 16);
}
END_TEST

/* ---- shared statistics: hostile buffers ----------------------------------------- */

/* The basic layout as is: 3 executions, two queries, nothing refused. */
START_TEST(test_stats_basic_layout)
{
	struct sbuf b;
	struct sp_agg_query *qx, *qy;
	struct sp_coll c;
	struct sp_qagg x;

	sb_basic(&b, &qx, &qy);
	sb_merge(&c, &b);
	ck_assert_uint_eq(stats_bad(&c), 0);
	x = qget(&c, SQL_X, SP_KIND_STMT);
	ck_assert_uint_eq(x.count, 2);
	ck_assert_uint_eq(x.total_ns, 5100);
	ck_assert_uint_eq(hcount(&x), 2);
	x = qget(&c, SQL_Y, SP_KIND_STMT);
	ck_assert_uint_eq(x.count, 1);
	ck_assert_uint_eq(hcount(&x), 1);
	sp_coll_free(&c);
	sb_free(&b);
}
END_TEST

/* The header: not ours, more chunks than the buffer holds, a buffer
 * smaller than a chunk. Nothing can be read: nothing merged. */
START_TEST(test_stats_bad_header)
{
	struct sbuf b;
	struct sp_agg_query *qx, *qy;
	struct sp_coll c;
	struct sp_proc pbuf;

	sb_basic(&b, &qx, &qy);
	sb_hdr(&b)->magic ^= 1;
	sb_merge(&c, &b);
	ck_assert_uint_eq(stats_bad(&c), 1);
	ck_assert_uint_eq(c.queries.count, 0);
	ck_assert_uint_eq(get_proc(&c, PID_A, &pbuf)->execs, 0);
	sp_coll_free(&c);
	sb_hdr(&b)->magic ^= 1;

	/* one chunk more than the buffer: chunk 4 would be past the end
	 * (the guard page) */
	sb_hdr(&b)->nchunks = 5;
	sb_merge(&c, &b);
	ck_assert_uint_eq(stats_bad(&c), 1);
	ck_assert_uint_eq(c.queries.count, 0);
	sp_coll_free(&c);
	sb_hdr(&b)->nchunks = UINT32_MAX;
	sb_merge(&c, &b);
	ck_assert_uint_eq(stats_bad(&c), 1);
	ck_assert_uint_eq(c.queries.count, 0);
	sp_coll_free(&c);
	sb_hdr(&b)->nchunks = 4;

	/* a size that is not a whole number of chunks: the last one is cut */
	sp_coll_init(&c);
	sp_coll_stats_merge(&c, PID_A, b.map, b.size - 8, SP_CLOCK_MONOTONIC);
	ck_assert_uint_eq(stats_bad(&c), 1);
	ck_assert_uint_eq(c.queries.count, 0);
	sp_coll_free(&c);
	/* fewer chunks than the buffer holds: the rest is not read */
	sb_hdr(&b)->nchunks = 2;
	sb_merge(&c, &b);
	ck_assert_uint_eq(stats_bad(&c), 0);
	ck_assert_uint_eq(qget(&c, SQL_X, SP_KIND_STMT).count, 2);
	ck_assert_uint_eq(qget(&c, SQL_Y, SP_KIND_STMT).count, 0);
	sp_coll_free(&c);
	sb_hdr(&b)->nchunks = 4;

	/* smaller than one chunk: not statistics at all, nothing read */
	sp_coll_init(&c);
	sp_coll_stats_merge(&c, PID_A, b.map + b.size - 4096, 4096, SP_CLOCK_MONOTONIC);
	ck_assert_uint_eq(c.queries.count, 0);
	sp_coll_free(&c);
	sb_free(&b);
}
END_TEST

/* A chunk's header: used beyond the chunk, not a multiple of 8, shorter
 * than the header, a bad magic. That chunk is skipped and counted; the
 * other chunks are merged. A chunk taken but not written yet (all zero)
 * is no error. */
START_TEST(test_stats_bad_chunk)
{
	static const struct {
		uint32_t magic, used;
		int bad;
		const char *what;
	} cases[] = {
		{ SP_CHUNK_MAGIC, SP_STATS_CHUNK + 8, 1, "used beyond the chunk" },
		{ SP_CHUNK_MAGIC, UINT32_MAX, 1, "used UINT32_MAX" },
		{ SP_CHUNK_MAGIC, 20, 1, "used not a multiple of 8" },
		{ SP_CHUNK_MAGIC, 8, 1, "used shorter than the chunk header" },
		{ SP_CHUNK_MAGIC, 0, 1, "used 0" },
		{ SP_CHUNK_MAGIC ^ 1, 0, 1, "bad magic" },
		{ 0, 64, 1, "no magic, used 64" },
		{ 0, 0, 0, "taken, not written yet" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct sbuf b;
		struct sp_agg_query *qx, *qy;
		struct sp_coll c;

		sb_basic(&b, &qx, &qy);
		if (!cases[i].magic && !cases[i].used)
			memset(sb_ch(&b, 2), 0, SP_STATS_CHUNK);
		sb_ch(&b, 2)->magic = cases[i].magic;
		sb_ch(&b, 2)->used = cases[i].used;
		sb_merge(&c, &b);
		ck_assert_msg(stats_bad(&c) == (uint64_t)cases[i].bad, "%s: stats_bad %lu",
			      cases[i].what, (unsigned long)stats_bad(&c));
		ck_assert_msg(qget(&c, SQL_X, SP_KIND_STMT).count == 2, "%s: chunk 1 lost",
			      cases[i].what);
		ck_assert_msg(qget(&c, SQL_Y, SP_KIND_STMT).count == 0, "%s: chunk 2 read",
			      cases[i].what);
		sp_coll_free(&c);
		sb_free(&b);
	}
}
END_TEST

/* Records whose length is wrong: 0, below a header, not a multiple of 8,
 * running past the chunk's used. The chunk is read up to the bad record
 * (counted once), its later records are lost; other chunks are merged. */
START_TEST(test_stats_bad_record_len)
{
	static const struct {
		uint32_t len; /* 0xffffffff: one byte... see below */
		const char *what;
	} cases[] = {
		{ 0, "len 0" },
		{ 4, "len 4" },
		{ 12, "len 12" },
		{ 0xfffffff8u, "len huge" },
		{ 1, "len past used by 8" }, /* computed */
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct sbuf b;
		struct sp_agg_query *qx, *qy, *qz;
		struct sp_coll c;
		struct sp_rec_hdr *h;
		size_t off;

		sb_basic(&b, &qx, &qy);
		/* chunk 1: ARENA, SQL_X (+ hist blocks), then a bad record
		 * in front of a good SQL_Z */
		off = sb_rec(&b, 1, 0x200, 16);
		qz = sb_query(&b, 1, 0x2222, SP_KIND_STMT);
		sb_exec(&b, qz, 1, 7);
		h = sb_at(&b, off);
		h->len = cases[i].len == 1
				 ? (uint32_t)(sb_ch(&b, 1)->used - (off % SP_STATS_CHUNK) + 8)
				 : cases[i].len;
		sb_merge(&c, &b);
		ck_assert_msg(stats_bad(&c) == 1, "%s: stats_bad %lu", cases[i].what,
			      (unsigned long)stats_bad(&c));
		ck_assert_msg(qget(&c, SQL_X, SP_KIND_STMT).count == 2, "%s: before it",
			      cases[i].what);
		ck_assert_msg(qget(&c, 0x2222, SP_KIND_STMT).count == 0, "%s: after it",
			      cases[i].what);
		ck_assert_msg(qget(&c, SQL_Y, SP_KIND_STMT).count == 1, "%s: other chunk",
			      cases[i].what);
		sp_coll_free(&c);
		sb_free(&b);
	}
	/* the last record running past used by 8, with nothing after it */
	{
		struct sbuf b;
		struct sp_agg_query *qx, *qy;
		struct sp_coll c;

		sb_basic(&b, &qx, &qy);
		sb_ch(&b, 2)->used -= 8; /* SQL_Y's HIST block now runs past it */
		sb_merge(&c, &b);
		ck_assert_uint_eq(stats_bad(&c), 1 + 1); /* the record, and SQL_Y's pointer to it */
		ck_assert_uint_eq(qget(&c, SQL_Y, SP_KIND_STMT).count, 1);
		ck_assert_uint_eq(qget(&c, SQL_X, SP_KIND_STMT).count, 2);
		sp_coll_free(&c);
		sb_free(&b);
	}
}
END_TEST

/*
 * Histogram pointers the collector must not follow: outside the buffer,
 * below its base, into the header chunk or a chunk header, not 8-aligned,
 * at a record that is not a HIST (the query itself, the arena), into the
 * unpublished part of a chunk (a HIST written but not published), past
 * the chunks taken. Each is counted; the query's totals are merged, the
 * histogram has the other block's value.
 */
START_TEST(test_stats_bad_hist_ref)
{
	enum {
		OUTSIDE,
		BELOW,
		HEADER,
		CHUNK_HDR,
		MISALIGNED,
		AT_QUERY,
		AT_ARENA,
		UNPUBLISHED,
		UNTAKEN,
		AT_HIST_OF_OTHER_LEN,
		NCASES
	};
	static const char *const what[NCASES] = {
		"outside the buffer",   "below the base",
		"in the header chunk",  "in a chunk header",
		"not 8-aligned",        "at the query record",
		"at the arena record",  "unpublished",
		"in a chunk not taken", "at a record of HIST type but another length",
	};

	for (int k = 0; k < NCASES; k++) {
		struct sbuf b;
		struct sp_agg_query *qx, *qy;
		struct sp_coll c;
		struct sp_qagg x;
		uint32_t blk = sp_hist_index(5000) / SP_HIST_PER_BLOCK;
		uint64_t *ref;

		sb_basic(&b, &qx, &qy);
		ref = &qx->hist[blk];
		ck_assert_uint_ne(*ref, 0);
		switch (k) {
		case OUTSIDE: *ref = b.base + b.size + 64; break;
		case BELOW: *ref = b.base - 264; break;
		case HEADER: *ref = b.base + 64; break;
		case CHUNK_HDR: *ref = b.base + 2 * SP_STATS_CHUNK + 8; break;
		case MISALIGNED: *ref += 4; break;
		case AT_QUERY: *ref = sb_addr_of(&b, qx); break;
		case AT_ARENA:
			*ref = b.base + SP_STATS_CHUNK + sizeof(struct sp_stats_chunk);
			break;
		case UNPUBLISHED: {
			/* a good HIST record beyond used: written, not published */
			size_t off = sb_rec(&b, 1, SP_AGG_HIST, sizeof(struct sp_agg_hist));

			((struct sp_agg_hist *)sb_at(&b, off))->bucket[0] = 1000;
			sb_ch(&b, 1)->used -= sizeof(struct sp_agg_hist);
			*ref = sb_addr(&b, off);
			break;
		}
		case UNTAKEN:
			*ref = b.base + 4 * SP_STATS_CHUNK - 1024;
			break; /* chunk 3, not taken */
		case AT_HIST_OF_OTHER_LEN: {
			size_t off = sb_rec(&b, 2, SP_AGG_HIST, 16);

			*ref = sb_addr(&b, off);
			break;
		}
		}
		if (k == UNTAKEN)
			sb_hdr(&b)->nchunks = 3;
		sb_merge(&c, &b);
		ck_assert_msg(stats_bad(&c) == 1, "%s: stats_bad %lu", what[k],
			      (unsigned long)stats_bad(&c));
		x = qget(&c, SQL_X, SP_KIND_STMT);
		ck_assert_msg(x.count == 2 && x.total_ns == 5100, "%s: totals", what[k]);
		ck_assert_msg(hcount(&x) == 1, "%s: histogram of %lu", what[k],
			      (unsigned long)hcount(&x));
		ck_assert_msg(sp_hist_quantile(x.hist, 0) == 100, "%s: min", what[k]);
		ck_assert_msg(qget(&c, SQL_Y, SP_KIND_STMT).count == 1, "%s: SQL_Y", what[k]);
		sp_coll_free(&c);
		sb_free(&b);
	}
}
END_TEST

/* Run pointers: a loops_by_len that is not a RUNS record (all the runs
 * are then taken as 1 long) is counted, the rest merged; the open run
 * (loop_open, in the query record itself) is taken either way. */
START_TEST(test_stats_bad_run_refs)
{
	struct sbuf b;
	struct sp_agg_query *qx, *qy;
	struct sp_coll c;
	struct sp_qagg x;

	sb_basic(&b, &qx, &qy);
	sb_run(&b, qx, 1, 3);
	sb_run(&b, qx, 1, 4);
	sb_run(&b, qx, 1, 1);
	qx->loop_open = 2;
	sb_merge(&c, &b);
	x = qget(&c, SQL_X, SP_KIND_STMT);
	ck_assert_uint_eq(stats_bad(&c), 0);
	ck_assert_uint_eq(x.runs, 4);
	ck_assert_uint_eq(x.max_run, 4);
	ck_assert_uint_eq(x.loops_by_len[0], 1);
	ck_assert_uint_eq(x.loops_by_len[1], 1);
	ck_assert_uint_eq(x.loops_by_len[2], 1);
	ck_assert_uint_eq(x.loops_by_len[3], 1);
	sp_coll_free(&c);

	qx->loops_by_len = qx->hist[0] ? qx->hist[0] : sb_addr_of(&b, qy); /* not a RUNS record */
	sb_merge(&c, &b);
	x = qget(&c, SQL_X, SP_KIND_STMT);
	ck_assert_uint_eq(stats_bad(&c), 1);
	ck_assert_uint_eq(x.count, 2);
	ck_assert_uint_eq(x.runs, 4);
	ck_assert_uint_eq(x.max_run, 4);
	ck_assert_uint_eq(x.loops_by_len[0], 3);
	ck_assert_uint_eq(x.loops_by_len[1], 1); /* the open run, 2 long */
	ck_assert_uint_eq(x.loops_by_len[2] + x.loops_by_len[3], 0);
	sp_coll_free(&c);
	sb_free(&b);
}
END_TEST

/* Records the collector does not take: an unknown type (skipped, as in a
 * stream), a QUERY of another length (skipped), an ARENA with no run. */
START_TEST(test_stats_skipped_records)
{
	struct sbuf b;
	struct sp_agg_query *qx, *qy, *odd;
	struct sp_coll c;
	size_t off;

	sb_basic(&b, &qx, &qy);
	/* records are 16-byte multiples (the preload's vector adds need
	 * them 16-aligned): the helpers here write through struct pointers */
	off = sb_rec(&b, 1, 0x1ff, 48);
	memset((uint8_t *)sb_at(&b, off) + 8, 0xa5, 40);
	/* a QUERY record 16 bytes longer than this version's */
	off = sb_rec(&b, 1, SP_AGG_QUERY, sizeof(struct sp_agg_query) + 16);
	odd = sb_at(&b, off);
	odd->sql_id = 0x3333;
	odd->count = 5;
	sb_query(&b, 1, 0x4444, SP_KIND_STMT)->count = 1; /* after them: still read */
	sb_merge(&c, &b);
	ck_assert_uint_eq(qget(&c, SQL_X, SP_KIND_STMT).count, 2);
	ck_assert_uint_eq(qget(&c, SQL_Y, SP_KIND_STMT).count, 1);
	ck_assert_uint_eq(qget(&c, 0x4444, SP_KIND_STMT).count, 1);
	ck_assert_ptr_null(get_q(&c, 0x3333, SP_KIND_STMT));
	ck_assert_uint_eq(c.queries.count, 3);
	sp_coll_free(&c);
	sb_free(&b);
}
END_TEST

/* Counts near the top: the sums saturate instead of wrapping. */
START_TEST(test_stats_saturation)
{
	struct sbuf b;
	struct sp_agg_query *qx, *qy, *q2;
	struct sp_coll c;
	struct sp_qagg x;

	sb_basic(&b, &qx, &qy);
	qx->count = UINT64_MAX - 1;
	qx->db = UINT64_MAX - 10;
	qx->rows = UINT64_MAX;
	qx->runs = UINT64_MAX;
	q2 = sb_query(&b, 3, SQL_X, SP_KIND_STMT); /* the same query in arena 2 */
	q2->count = 5;
	q2->db = 100;
	q2->min = 1;
	q2->max = 100;
	q2->rows = 1;
	q2->runs = 1;
	sb_merge(&c, &b);
	x = qget(&c, SQL_X, SP_KIND_STMT);
	ck_assert_uint_eq(x.count, UINT64_MAX);
	ck_assert_uint_eq(x.total_ns, UINT64_MAX);
	ck_assert_uint_eq(x.rows, UINT64_MAX);
	ck_assert_uint_eq(x.runs, UINT64_MAX);
	ck_assert_uint_eq(x.min_ns, 1);
	ck_assert_uint_eq(x.max_ns, 5000);
	sp_coll_free(&c);
	sb_free(&b);
}
END_TEST

/* ---- shared statistics: delivery -------------------------------------------- */

/* Append a copy of chunk ci of b as the preload sends it: the header
 * chunk's header only, another chunk up to its used. */
static void put_chunk(struct enc *e, struct sbuf *b, uint32_t ci)
{
	uint32_t len = ci ? sb_ch(b, ci)->used : (uint32_t)sizeof(struct sp_stats_hdr);

	put_copy(e, ci, b->map + (size_t)ci * SP_STATS_CHUNK, len);
}

static void send_msg(struct sp_coll *c, struct enc *e, const char *what)
{
	size_t len = enc_end(e);

	expect_accept(c, e->buf, len, e->pid, what);
}

/* The aggregates that must be equal between two ways of merging. */
static void qagg_assert_eq(const struct sp_qagg *a, const struct sp_qagg *b, const char *what)
{
	ck_assert_msg(
		a->count == b->count && a->total_ns == b->total_ns && a->self_ns == b->self_ns &&
			a->wall_ns == b->wall_ns && a->rows == b->rows && a->min_ns == b->min_ns &&
			a->max_ns == b->max_ns && a->runs == b->runs && a->max_run == b->max_run,
		"%s: aggregates differ (count %lu vs %lu)", what, (unsigned long)a->count,
		(unsigned long)b->count);
	ck_assert_msg(hcount(a) == hcount(b), "%s: histograms differ", what);
	if (a->hist && b->hist)
		ck_assert_msg(sp_hist_quantile(a->hist, 0.5) == sp_hist_quantile(b->hist, 0.5),
			      "%s: medians differ", what);
}

/*
 * An image that could not share its statistics sends a copy of every
 * chunk before BYE (SP_REC_STATS_COPY): the copies are kept in the
 * memfd's layout, in any order, a chunk sent twice replaces itself, and
 * they are merged at the end of the recording - exactly as the buffer
 * merged directly - once.
 */
START_TEST(test_stats_copy)
{
	struct sbuf b;
	struct sp_agg_query *qx, *qy;
	struct sp_coll c, ref;
	struct sp_proc pbuf;
	struct enc e = { 0 };
	uint64_t refexecs;

	sb_basic(&b, &qx, &qy);
	sb_run(&b, qx, 1, 3);
	sb_hdr(&b)->unattributed = 1;
	sb_merge(&ref, &b);
	refexecs = get_proc(&ref, PID_A, &pbuf)->execs;
	ck_assert_uint_eq(refexecs, 4);

	sp_coll_init(&c);
	enc_begin(&e, PID_A, 1, 0);
	put_hello(&e, exe_path, SP_CLOCK_MONOTONIC);
	send_msg(&c, &e, "HELLO");
	ck_assert_int_eq(get_proc(&c, PID_A, &pbuf)->no_stats, 1);
	/* chunk 2 first, then 0 and 1 in one message; 3 is empty (sent too) */
	enc_begin(&e, PID_A, 2, 0);
	put_chunk(&e, &b, 2);
	send_msg(&c, &e, "copy of chunk 2");
	ck_assert_uint_eq(c.nstats, 1);
	ck_assert_int_eq(c.stats[0].copy, 1);
	ck_assert_uint_eq(c.stats[0].pid, PID_A);
	ck_assert_uint_eq(c.stats[0].image, 1);
	ck_assert_uint_eq(c.stats[0].size, 3 * SP_STATS_CHUNK);
	ck_assert_int_eq(get_proc(&c, PID_A, &pbuf)->no_stats, 0);
	enc_begin(&e, PID_A, 3, 0);
	put_chunk(&e, &b, 0);
	put_chunk(&e, &b, 1);
	put_chunk(&e, &b, 3);
	send_msg(&c, &e, "copies of chunks 0, 1, 3");
	ck_assert_uint_eq(c.nstats, 1);
	ck_assert_uint_eq(c.stats[0].size, 4 * SP_STATS_CHUNK);
	/* held, not merged: seen live */
	ck_assert_uint_eq(c.queries.count, 0);
	ck_assert_uint_eq(get_proc(&c, PID_A, &pbuf)->execs, 0);
	ck_assert_uint_eq(sp_coll_executions(&c), 3);
	/* chunk 1 again (a retry): replaces, adds nothing */
	enc_begin(&e, PID_A, 4, 0);
	put_chunk(&e, &b, 1);
	put_bye(&e, 4, 0);
	send_msg(&c, &e, "chunk 1 again, BYE");
	ck_assert_uint_eq(c.nstats, 1);
	ck_assert_uint_eq(sp_coll_executions(&c), 3);
	ck_assert_uint_eq(c.queries.count, 0);

	sp_coll_finish(&c);
	ck_assert_uint_eq(c.nstats, 0);
	ck_assert_uint_eq(stats_bad(&c), 0);
	ck_assert_uint_eq(get_proc(&c, PID_A, &pbuf)->execs, refexecs);
	ck_assert_uint_eq(get_proc(&c, PID_A, &pbuf)->unattributed, 1);
	ck_assert_uint_eq(sp_coll_executions(&c), refexecs);
	{
		struct sp_qagg a = qget(&c, SQL_X, SP_KIND_STMT),
			       r = qget(&ref, SQL_X, SP_KIND_STMT);

		ck_assert_uint_eq(a.count, 2);
		ck_assert_uint_eq(a.runs, 1);
		qagg_assert_eq(&a, &r, "SQL_X from copies");
		a = qget(&c, SQL_Y, SP_KIND_STMT);
		r = qget(&ref, SQL_Y, SP_KIND_STMT);
		ck_assert_uint_eq(a.count, 1);
		qagg_assert_eq(&a, &r, "SQL_Y from copies");
	}
	/* merged once */
	sp_coll_finish(&c);
	ck_assert_uint_eq(qget(&c, SQL_X, SP_KIND_STMT).count, 2);
	ck_assert_uint_eq(get_proc(&c, PID_A, &pbuf)->execs, refexecs);
	sp_coll_free(&c);
	sp_coll_free(&ref);

	/* a chunk never sent reads as zero: its records are missing, no error */
	sp_coll_init(&c);
	enc_begin(&e, PID_A, 1, 0);
	put_hello(&e, exe_path, SP_CLOCK_MONOTONIC);
	put_chunk(&e, &b, 0);
	put_chunk(&e, &b, 2);
	send_msg(&c, &e, "HELLO, chunks 0 and 2");
	sp_coll_finish(&c);
	ck_assert_uint_eq(stats_bad(&c), 0);
	ck_assert_uint_eq(qget(&c, SQL_X, SP_KIND_STMT).count, 0);
	ck_assert_uint_eq(qget(&c, SQL_Y, SP_KIND_STMT).count, 1);
	sp_coll_free(&c);

	/* copies without the header chunk: not statistics, counted, nothing */
	sp_coll_init(&c);
	enc_begin(&e, PID_A, 1, 0);
	put_hello(&e, exe_path, SP_CLOCK_MONOTONIC);
	put_chunk(&e, &b, 1);
	send_msg(&c, &e, "HELLO, chunk 1 only");
	sp_coll_finish(&c);
	ck_assert_uint_eq(stats_bad(&c), 1);
	ck_assert_uint_eq(c.queries.count, 0);
	sp_coll_free(&c);
	enc_free(&e);
	sb_free(&b);
}
END_TEST

/* A new image of the pid (exec: a fresh HELLO) merges the copies of the
 * image before it at once, under that image's clock; its own copies are
 * kept apart. A bad copy record rejects its whole message: the copies
 * held are unchanged. */
START_TEST(test_stats_copy_images)
{
	struct sbuf b;
	struct sp_agg_query *qx, *qy;
	struct sp_coll c;
	struct sp_proc pbuf;
	struct enc e = { 0 };
	size_t len, r;

	sb_basic(&b, &qx, &qy);
	sp_coll_init(&c);
	c.ns_per_tick = 3.0;
	enc_begin(&e, PID_A, 1, 0);
	put_hello(&e, "/bin/first", SP_CLOCK_MONOTONIC);
	put_chunk(&e, &b, 0);
	put_chunk(&e, &b, 1);
	put_chunk(&e, &b, 2);
	send_msg(&c, &e, "image 1 and its copies");

	/* the same message with a changed chunk 1 and a bad copy last */
	enc_begin(&e, PID_A, 2, 0);
	qx->count = 1000;
	put_chunk(&e, &b, 1);
	qx->count = 2;
	r = put_copy(&e, 1, pcs3, 8);
	len = enc_end(&e);
	patch32(&e, r + offsetof(struct sp_rec_stats_copy, chunk), SP_STATS_COPY_MAX_CHUNKS);
	expect_reject(&c, e.buf, len, PID_A, "a good copy, then a copy of chunk 16384");
	patch32(&e, r + offsetof(struct sp_rec_stats_copy, chunk), 1);
	patch32(&e, r + offsetof(struct sp_rec_stats_copy, len), SP_STATS_CHUNK + 8);
	expect_reject(&c, e.buf, len, PID_A, "a good copy, then a copy longer than a chunk");

	enc_begin(&e, PID_A, 3, 0);
	put_hello(&e, "/bin/second", SP_CLOCK_TSC);
	send_msg(&c, &e, "image 2 (exec)");
	ck_assert_uint_eq(c.nstats, 0);
	ck_assert_uint_eq(get_proc(&c, PID_A, &pbuf)->image, 2);
	ck_assert_uint_eq(qget(&c, SQL_X, SP_KIND_STMT).count, 2);
	ck_assert_uint_eq(qget(&c, SQL_X, SP_KIND_STMT).total_ns, 5100); /* not 3 x */
	enc_begin(&e, PID_A, 4, 0);
	put_chunk(&e, &b, 0);
	put_chunk(&e, &b, 2);
	send_msg(&c, &e, "image 2's copies");
	ck_assert_uint_eq(c.nstats, 1);
	ck_assert_uint_eq(c.stats[0].image, 2);
	ck_assert_int_eq(c.stats[0].clock, SP_CLOCK_TSC);
	sp_coll_finish(&c);
	ck_assert_uint_eq(qget(&c, SQL_Y, SP_KIND_STMT).count, 2);
	ck_assert_uint_eq(qget(&c, SQL_Y, SP_KIND_STMT).total_ns, 300 + 900); /* image 2 in ticks */
	ck_assert_uint_eq(qget(&c, SQL_X, SP_KIND_STMT).count, 2);
	sp_coll_free(&c);
	enc_free(&e);
	sb_free(&b);
}
END_TEST

/* A statistics memfd as the preload makes it: chunks chunks, mapped
 * shared into b (base: the mapping's address, as the writer's), the
 * header written; flags for memfd_create (MFD_ALLOW_SEALING), sealed
 * against shrinking when seal. Returns the descriptor. */
static int sb_memfd(struct sbuf *b, uint32_t pid, uint32_t chunks, unsigned flags, int seal)
{
	int fd = memfd_create("check-stats", MFD_CLOEXEC | flags);

	ck_assert_int_ge(fd, 0);
	b->size = (size_t)chunks * SP_STATS_CHUNK;
	ck_assert_int_eq(ftruncate(fd, (off_t)b->size), 0);
	b->map = mmap(NULL, b->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	ck_assert_ptr_ne(b->map, MAP_FAILED);
	b->map_len = b->size;
	b->base = (uint64_t)(uintptr_t)b->map;
	sb_header(b, pid);
	if (seal)
		ck_assert_int_eq(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
	return fd;
}

/* HELLO and its STATS record (announcing size) in one message. */
static size_t build_hello_stats(struct enc *e, uint32_t pid, uint64_t seq, uint16_t hello_flags,
				uint64_t size)
{
	size_t off;

	enc_begin(e, pid, seq, 0);
	off = put_hello(e, exe_path, SP_CLOCK_MONOTONIC);
	patch16(e, off + offsetof(struct sp_rec_hdr, flags), hello_flags);
	put_stats(e, size);
	return enc_end(e);
}

/*
 * HELLO with the image's statistics memfd (sp_coll_input): mapped, its
 * descriptor consumed, held per pid and image and read live (the writer
 * goes on adding), sent again with a reconnect's HELLO without a second
 * mapping, copies for it ignored, merged once at the end with the
 * writer's final figures.
 */
START_TEST(test_stats_memfd)
{
	struct sbuf b;
	struct sp_agg_query *qx, *qy;
	struct sp_coll c;
	struct sp_proc pbuf, *p;
	struct enc e = { 0 };
	uint32_t me = (uint32_t)getpid();
	int fd, fds;
	size_t len;

	fd = sb_memfd(&b, me, 4, MFD_ALLOW_SEALING, 1);
	sb_fill_basic(&b, &qx, &qy);
	sp_coll_init(&c);
	len = build_hello_stats(&e, me, 1, 0, b.size);
	fds = count_fds();
	ck_assert_msg(sp_coll_input(&c, e.buf, len, me, dup(fd)) == 0, "refused: %s", c.last_error);
	ck_assert_int_eq(count_fds(), fds); /* mapped, descriptor closed */
	ck_assert_uint_eq(c.nstats, 1);
	ck_assert_int_eq(c.stats[0].copy, 0);
	ck_assert_uint_eq(c.stats[0].pid, me);
	ck_assert_uint_eq(c.stats[0].image, 1);
	ck_assert_uint_eq(c.stats[0].size, b.size);
	p = get_proc(&c, me, &pbuf);
	ck_assert_int_eq(p->hello, 1);
	ck_assert_int_eq(p->no_stats, 0);
	ck_assert_uint_eq(c.bad_messages, 0);
	ck_assert_uint_eq(c.queries.count, 0);
	ck_assert_uint_eq(sp_coll_executions(&c), 3);

	/* the writer goes on: read live */
	sb_exec(&b, qx, 1, 700);
	ck_assert_uint_eq(sp_coll_executions(&c), 4);

	/* a reconnect's HELLO brings the memfd again: kept once */
	len = build_hello_stats(&e, me, 2, SP_HELLO_RECONNECT, b.size);
	ck_assert_int_eq(sp_coll_input(&c, e.buf, len, me, dup(fd)), 0);
	ck_assert_int_eq(count_fds(), fds);
	ck_assert_uint_eq(c.nstats, 1);
	ck_assert_uint_eq(get_proc(&c, me, &pbuf)->reconnects, 1);
	ck_assert_uint_eq(get_proc(&c, me, &pbuf)->image, 1);

	/* copies for an image whose memfd is mapped: ignored */
	enc_begin(&e, me, 3, 0);
	put_chunk(&e, &b, 0);
	put_chunk(&e, &b, 1);
	len = enc_end(&e);
	ck_assert_int_eq(sp_coll_message(&c, e.buf, len, me), 0);
	ck_assert_uint_eq(c.nstats, 1);
	ck_assert_int_eq(c.stats[0].copy, 0);
	ck_assert_uint_eq(sp_coll_executions(&c), 4);

	sb_exec(&b, qy, 2, 30);
	sp_coll_finish(&c);
	ck_assert_uint_eq(c.nstats, 0);
	ck_assert_uint_eq(qget(&c, SQL_X, SP_KIND_STMT).count, 3);
	ck_assert_uint_eq(qget(&c, SQL_X, SP_KIND_STMT).total_ns, 5800);
	ck_assert_uint_eq(qget(&c, SQL_Y, SP_KIND_STMT).count, 2);
	ck_assert_uint_eq(get_proc(&c, me, &pbuf)->execs, 5);
	ck_assert_uint_eq(sp_coll_executions(&c), 5);
	ck_assert_uint_eq(get_proc(&c, me, &pbuf)->stats_bad, 0);
	/* let go: later writes reach nobody */
	sb_exec(&b, qx, 1, 1);
	ck_assert_uint_eq(sp_coll_executions(&c), 5);
	sp_coll_free(&c);
	close(fd);
	sb_free(&b);
	enc_free(&e);
}
END_TEST

/*
 * Statistics descriptors the collector refuses: not sealed against
 * shrinking (with and without MFD_ALLOW_SEALING: the writer could shrink
 * it under our reads), not a memfd (a pipe, /dev/null), smaller than a
 * chunk, another size than announced, a header that is not ours or says
 * another size. Each: -1 with the reason, counted, the descriptor closed,
 * HELLO applied but the process marked as without statistics.
 */
START_TEST(test_stats_memfd_refused)
{
	enum {
		UNSEALED,
		UNSEALABLE,
		PIPE,
		DEVNULL,
		SMALL,
		SIZE_DIFFERS,
		SIZE_ZERO,
		HDR_MAGIC,
		HDR_SIZE,
		HDR_CHUNK,
		NCASES
	};
	static const struct {
		const char *what, *want;
	} cases[NCASES] = {
		{ "not sealed", "sealed against shrinking" },
		{ "made without MFD_ALLOW_SEALING", "sealed against shrinking" },
		{ "a pipe", "not a memfd" },
		{ "/dev/null", "not a memfd" },
		{ "4096 bytes", "not a shmem memfd of 4096 bytes" },
		{ "announced one chunk more", "not a shmem memfd of" },
		{ "announced 0 bytes", "not a shmem memfd of 0 bytes" },
		{ "bad magic", "bad header" },
		{ "header says another size", "bad header" },
		{ "header says another chunk size", "bad header" },
	};
	uint32_t me = (uint32_t)getpid();

	for (int k = 0; k < NCASES; k++) {
		struct sbuf b = { 0 };
		struct sp_agg_query *qx, *qy;
		struct sp_coll c;
		struct sp_proc pbuf, *p;
		struct enc e = { 0 };
		uint64_t size = 4 * SP_STATS_CHUNK;
		int fd = -1, give, pfd[2] = { -1, -1 }, fds, rc;
		size_t len;

		switch (k) {
		case UNSEALED: fd = sb_memfd(&b, me, 4, MFD_ALLOW_SEALING, 0); break;
		case UNSEALABLE: fd = sb_memfd(&b, me, 4, 0, 0); break;
		case PIPE: ck_assert_int_eq(pipe2(pfd, O_CLOEXEC), 0); break;
		case DEVNULL: fd = open("/dev/null", O_RDWR | O_CLOEXEC); break;
		case SMALL:
			fd = memfd_create("check-stats", MFD_CLOEXEC | MFD_ALLOW_SEALING);
			ck_assert_int_eq(ftruncate(fd, 4096), 0);
			ck_assert_int_eq(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
			size = 4096;
			break;
		default: fd = sb_memfd(&b, me, 4, MFD_ALLOW_SEALING, 1); break;
		}
		ck_assert_int_ge(k == PIPE ? pfd[0] : fd, 0);
		if (b.map)
			sb_fill_basic(&b, &qx, &qy);
		if (k == SIZE_DIFFERS)
			size += SP_STATS_CHUNK;
		if (k == SIZE_ZERO)
			size = 0;
		if (k == HDR_MAGIC)
			sb_hdr(&b)->magic = SP_RING_MAGIC;
		if (k == HDR_SIZE)
			sb_hdr(&b)->size = 2 * SP_STATS_CHUNK;
		if (k == HDR_CHUNK)
			sb_hdr(&b)->chunk_size = 4096;
		sp_coll_init(&c);
		len = build_hello_stats(&e, me, 1, 0, size);
		give = dup(k == PIPE ? pfd[0] : fd);
		fds = count_fds();
		rc = sp_coll_input(&c, e.buf, len, me, give);
		ck_assert_msg(rc == -1, "%s: accepted", cases[k].what);
		ck_assert_msg(count_fds() == fds - 1, "%s: the descriptor is not closed",
			      cases[k].what);
		ck_assert_msg(strstr(c.last_error, cases[k].want), "%s: '%s' lacks '%s'",
			      cases[k].what, c.last_error, cases[k].want);
		ck_assert_uint_eq(c.bad_messages, 1);
		ck_assert_uint_eq(c.nstats, 0);
		p = get_proc(&c, me, &pbuf);
		ck_assert_ptr_nonnull(p);
		ck_assert_int_eq(p->hello, 1); /* the message itself is applied */
		ck_assert_int_eq(p->no_stats, 1);
		ck_assert_uint_eq(c.records, 2);
		sp_coll_finish(&c);
		ck_assert_uint_eq(c.queries.count, 0);
		sp_coll_free(&c);
		if (fd >= 0)
			close(fd);
		if (pfd[0] >= 0) {
			close(pfd[0]);
			close(pfd[1]);
		}
		if (b.map)
			sb_free(&b);
		enc_free(&e);
	}
}
END_TEST

/* The message rules for STATS records, checked before anything applies:
 * a STATS record needs its descriptor, a descriptor needs exactly one
 * RING or STATS record, a STATS record inside a message of another pid
 * is refused. */
START_TEST(test_stats_record_rules)
{
	struct sbuf b;
	struct sp_agg_query *qx, *qy;
	struct sp_coll c;
	struct enc e = { 0 };
	struct wring w;
	struct sp_rec_ring rr;
	struct snap before, after;
	uint32_t me = (uint32_t)getpid();
	int fd, mfd, fds;
	size_t len, off;

	fd = sb_memfd(&b, me, 4, MFD_ALLOW_SEALING, 1);
	sb_fill_basic(&b, &qx, &qy);
	sp_coll_init(&c);

	/* no descriptor: the whole message is rejected, HELLO included */
	len = build_hello_stats(&e, me, 1, 0, b.size);
	expect_reject(&c, e.buf, len, me, "STATS without its descriptor");
	ck_assert_ptr_nonnull(strstr(c.last_error, "STATS record without its descriptor"));
	ck_assert_uint_eq(c.procs.count, 0);

	/* two STATS records with one descriptor */
	enc_begin(&e, me, 1, 0);
	put_hello(&e, exe_path, SP_CLOCK_MONOTONIC);
	put_stats(&e, b.size);
	put_stats(&e, b.size);
	len = enc_end(&e);
	snap_take(&c, &before);
	fds = count_fds();
	ck_assert_int_eq(sp_coll_input(&c, e.buf, len, me, dup(fd)), -1);
	ck_assert_int_eq(count_fds(), fds);
	ck_assert_ptr_nonnull(strstr(c.last_error, "2 RING and STATS records with one descriptor"));
	snap_take(&c, &after);
	snap_assert_eq(&before, &after, "two STATS records");

	/* a RING and a STATS record with one descriptor */
	mfd = make_memfd_ring(&w, me, 4096, MFD_ALLOW_SEALING, 0);
	fds = count_fds();
	enc_begin(&e, me, 1, 0);
	put_hello(&e, exe_path, SP_CLOCK_MONOTONIC);
	put_stats(&e, b.size);
	rr = wr_rec(&w);
	enc_put(&e, &rr, sizeof(rr), NULL, 0, NULL, 0);
	len = enc_end(&e);
	ck_assert_int_eq(sp_coll_input(&c, e.buf, len, me, dup(mfd)), -1);
	ck_assert_int_eq(count_fds(), fds);
	ck_assert_ptr_nonnull(strstr(c.last_error, "RING and STATS records with one descriptor"));
	snap_take(&c, &after);
	snap_assert_eq(&before, &after, "RING and STATS");
	close(mfd);
	wr_unmap(&w);
	fds = count_fds();

	/* a STATS record claiming another pid than its message */
	len = build_hello_stats(&e, me, 1, 0, b.size);
	off = e.ends[1];
	patch32(&e, off + sizeof(struct sp_rec_hdr), me + 1);
	ck_assert_int_eq(sp_coll_input(&c, e.buf, len, me, dup(fd)), -1);
	ck_assert_int_eq(count_fds(), fds);
	ck_assert_ptr_nonnull(strstr(c.last_error, "pid differs"));
	snap_take(&c, &after);
	snap_assert_eq(&before, &after, "STATS of another pid");

	/* a STATS record shorter than its type */
	enc_begin(&e, me, 1, 0);
	put_raw(&e, SP_REC_STATS, sizeof(struct sp_rec_stats) - 8);
	len = enc_end(&e);
	ck_assert_int_eq(sp_coll_input(&c, e.buf, len, me, dup(fd)), -1);
	ck_assert_int_eq(count_fds(), fds);
	snap_take(&c, &after);
	snap_assert_eq(&before, &after, "short STATS");

	/* and then the good one */
	len = build_hello_stats(&e, me, 1, 0, b.size);
	ck_assert_int_eq(sp_coll_input(&c, e.buf, len, me, dup(fd)), 0);
	ck_assert_uint_eq(c.nstats, 1);
	sp_coll_finish(&c);
	ck_assert_uint_eq(qget(&c, SQL_X, SP_KIND_STMT).count, 2);
	sp_coll_free(&c);
	close(fd);
	sb_free(&b);
	enc_free(&e);
}
END_TEST

/*
 * Over a socket (sp_coll_recv): HELLO with the memfd, BYE, then the end
 * of the connection merges the image's statistics at once. A later image
 * of the pid (exec) that never says BYE is merged when the next image
 * says HELLO, under its own clock.
 */
START_TEST(test_stats_recv)
{
	struct sbuf b, b2;
	struct sp_agg_query *qx, *qy, *qz;
	struct sp_coll c;
	struct sp_proc pbuf;
	struct enc e = { 0 };
	uint32_t me = (uint32_t)getpid();
	uint8_t *buf = malloc(MSG_CAP + 64);
	int sv[2], fd, fd2;

	ck_assert_ptr_nonnull(buf);
	fd = sb_memfd(&b, me, 4, MFD_ALLOW_SEALING, 1);
	sb_fill_basic(&b, &qx, &qy);
	sp_coll_init(&c);
	c.ns_per_tick = 3.0;
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	build_hello_stats(&e, me, 1, 0, b.size);
	send_fds(sv[1], &e, &fd, 1);
	ck_assert_int_eq(recv_one(&c, sv[0], me, buf, MSG_CAP, "HELLO + STATS"), 1);
	ck_assert_uint_eq(c.nstats, 1);
	enc_begin(&e, me, 2, 0);
	put_bye(&e, 3, 0);
	send_fds(sv[1], &e, NULL, 0);
	ck_assert_int_eq(recv_one(&c, sv[0], me, buf, MSG_CAP, "BYE"), 1);
	ck_assert_uint_eq(c.nstats, 1); /* destructors after BYE may still count */
	ck_assert_uint_eq(c.queries.count, 0);
	sb_exec(&b, qx, 1, 900); /* a library destructor's query after BYE */
	close(sv[1]);
	ck_assert_int_eq(recv_one(&c, sv[0], me, buf, MSG_CAP, "EOF after BYE"), -1);
	close(sv[0]);
	ck_assert_uint_eq(c.nstats, 0);
	ck_assert_uint_eq(qget(&c, SQL_X, SP_KIND_STMT).count, 3);
	ck_assert_uint_eq(qget(&c, SQL_Y, SP_KIND_STMT).count, 1);
	ck_assert_uint_eq(get_proc(&c, me, &pbuf)->execs, 4);
	ck_assert_uint_eq(get_proc(&c, me, &pbuf)->bye_execs, 3);

	/* the same image connects again after that (the program closed our
	 * descriptor after BYE) and sends its statistics and a second BYE:
	 * merged once, and the BYEs' cumulative counts are not added up */
	{
		int fd3 = dup(fd);

		ck_assert_int_ge(fd3, 0);
		ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
		build_hello_stats(&e, me, 3, SP_HELLO_RECONNECT, b.size);
		send_fds(sv[1], &e, &fd3, 1);
		ck_assert_int_eq(recv_one(&c, sv[0], me, buf, MSG_CAP, "reconnect after BYE"), 1);
		ck_assert_uint_eq(c.nstats, 0); /* not mapped again */
		enc_begin(&e, me, 4, 0);
		put_bye(&e, 4, 0);
		send_fds(sv[1], &e, NULL, 0);
		ck_assert_int_eq(recv_one(&c, sv[0], me, buf, MSG_CAP, "second BYE"), 1);
		close(sv[1]);
		ck_assert_int_eq(recv_one(&c, sv[0], me, buf, MSG_CAP, "EOF again"), -1);
		close(sv[0]);
		ck_assert_uint_eq(qget(&c, SQL_X, SP_KIND_STMT).count, 3);
		ck_assert_uint_eq(get_proc(&c, me, &pbuf)->execs, 4);
		ck_assert_uint_eq(get_proc(&c, me, &pbuf)->bye_execs, 4);
	}

	/* image 2 (after exec), its own memfd; no BYE */
	fd2 = sb_memfd(&b2, me, 2, MFD_ALLOW_SEALING, 1);
	qz = sb_query(&b2, sb_chunk(&b2, 1), 0x5151, SP_KIND_STMT);
	sb_exec(&b2, qz, 1, 1000);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	build_hello_stats(&e, me, 1, 0, b2.size);
	send_fds(sv[1], &e, &fd2, 1);
	ck_assert_int_eq(recv_one(&c, sv[0], me, buf, MSG_CAP, "image 2"), 1);
	ck_assert_uint_eq(c.nstats, 1);
	ck_assert_uint_eq(c.stats[0].image, 2);
	/* image 3 says HELLO (TSC) without statistics: image 2's are merged
	 * now, in nanoseconds as image 2 counted them */
	enc_begin(&e, me, 2, 0);
	put_hello(&e, "/bin/third", SP_CLOCK_TSC);
	send_fds(sv[1], &e, NULL, 0);
	ck_assert_int_eq(recv_one(&c, sv[0], me, buf, MSG_CAP, "image 3"), 1);
	ck_assert_uint_eq(c.nstats, 0);
	ck_assert_uint_eq(qget(&c, 0x5151, SP_KIND_STMT).count, 1);
	ck_assert_uint_eq(qget(&c, 0x5151, SP_KIND_STMT).total_ns, 1000);
	ck_assert_int_eq(get_proc(&c, me, &pbuf)->no_stats, 1);
	ck_assert_uint_eq(get_proc(&c, me, &pbuf)->image, 3);
	close(sv[0]);
	close(sv[1]);
	sp_coll_finish(&c);
	ck_assert_uint_eq(qget(&c, SQL_X, SP_KIND_STMT).count, 3); /* once */
	sp_coll_free(&c);
	close(fd);
	close(fd2);
	sb_free(&b);
	sb_free(&b2);
	enc_free(&e);
	free(buf);
}
END_TEST

/* ---- files of processes that could not connect ------------------------------- */

/* path := the concatenation of the n messages in m[]/len[]. */
static void write_msgs(const char *path, uint8_t *const *m, const size_t *len, int n)
{
	FILE *f = fopen(path, "wb");

	ck_assert_ptr_nonnull(f);
	for (int i = 0; i < n; i++)
		ck_assert_uint_eq(fwrite(m[i], 1, len[i], f), len[i]);
	ck_assert_int_eq(fclose(f), 0);
}

/* A message of pid in a fresh buffer: HELLO flagged SP_HELLO_UNREPORTED
 * (hello), or BYE with executions. */
static uint8_t *unrep_msg(uint32_t pid, uint64_t seq, int hello, uint64_t executions, size_t *len)
{
	struct enc e = { 0 };
	uint8_t *m;

	enc_begin(&e, pid, seq, 0);
	if (hello) {
		size_t r = put_hello(&e, exe_path, SP_CLOCK_MONOTONIC);

		patch16(&e, r + offsetof(struct sp_rec_hdr, flags), SP_HELLO_UNREPORTED);
	} else {
		put_bye(&e, executions, 0);
	}
	*len = enc_end(&e);
	m = malloc(*len);
	ck_assert_ptr_nonnull(m);
	memcpy(m, e.buf, *len);
	enc_free(&e);
	return m;
}

/*
 * unrep.PID.TIME files: each a sequence of messages, read oldest first,
 * each message checked like any other, every file removed. A complete
 * one (HELLO, BYE) gives a process flagged unreported with a clean exit;
 * one killed after its HELLO a process without; a file cut inside a
 * message, or of garbage, adds nothing past its last whole message; other
 * files of the directory are left alone.
 */
START_TEST(test_unreported_files)
{
	char dir[] = "/tmp/check_unrep.XXXXXX", path[512];
	struct sp_coll c;
	struct sp_proc pbuf, *p;
	uint8_t *m[2], garbage[100];
	size_t len[2], cut;
	uint64_t complete;
	DIR *d;
	struct dirent *de;
	int left = 0;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	sp_coll_init(&c);
	/* PID_A: complete */
	m[0] = unrep_msg(PID_A, 1, 1, 0, &len[0]);
	m[1] = unrep_msg(PID_A, 2, 0, 5, &len[1]);
	snprintf(path, sizeof(path), "%s/unrep.%u.100", dir, PID_A);
	write_msgs(path, m, len, 2);
	free(m[0]);
	free(m[1]);
	/* PID_B: its HELLO only (killed before exit), then a BYE cut short */
	m[0] = unrep_msg(PID_B, 1, 1, 0, &len[0]);
	m[1] = unrep_msg(PID_B, 2, 0, 7, &len[1]);
	cut = len[1] - 9;
	snprintf(path, sizeof(path), "%s/unrep.%u.200", dir, PID_B);
	len[1] = cut;
	write_msgs(path, m, len, 2);
	free(m[0]);
	free(m[1]);
	/* garbage, and a file that is not ours to read */
	for (size_t i = 0; i < sizeof(garbage); i++)
		garbage[i] = (uint8_t)(i * 37 + 11);
	m[0] = garbage;
	len[0] = sizeof(garbage);
	snprintf(path, sizeof(path), "%s/unrep.1.300", dir);
	write_msgs(path, m, len, 1);
	snprintf(path, sizeof(path), "%s/bye.1.1", dir);
	write_msgs(path, m, len, 1);

	ck_assert_uint_eq(sp_coll_read_unreported(&c, dir), 3);
	p = get_proc(&c, PID_A, &pbuf);
	ck_assert_ptr_nonnull(p);
	ck_assert_int_eq(p->unreported, 1);
	ck_assert_int_eq(p->bye, 1);
	ck_assert_uint_eq(p->bye_execs, 5);
	p = get_proc(&c, PID_B, &pbuf);
	ck_assert_ptr_nonnull(p);
	ck_assert_int_eq(p->unreported, 1);
	ck_assert_int_eq(p->bye, 0);
	ck_assert_ptr_null(get_proc(&c, 1, &pbuf));
	ck_assert_uint_eq(c.procs.count, 2);
	ck_assert_uint_eq(sp_coll_unreported(&c, &complete), 2);
	ck_assert_uint_eq(complete, 1);
	/* the unrep. files are gone, the other one is not */
	d = opendir(dir);
	ck_assert_ptr_nonnull(d);
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		ck_assert_str_eq(de->d_name, "bye.1.1");
		left++;
	}
	closedir(d);
	ck_assert_int_eq(left, 1);
	unlink(path);
	rmdir(dir);
	sp_coll_free(&c);
}
END_TEST

static Suite *collect_suite(void)
{
	Suite *s = suite_create("collect");
	TCase *tc;

	tc = tcase_create("round_trip");
	tcase_add_test(tc, test_round_trip);
	tcase_add_test(tc, test_events_and_spill);
	tcase_add_test(tc, test_spill_full);
	tcase_add_test(tc, test_lost_and_seq);
	tcase_add_test(tc, test_sql_after_exec);
	tcase_add_test(tc, test_value_alignment);
	suite_add_tcase(s, tc);

	tc = tcase_create("skipping");
	tcase_add_test(tc, test_skip_unknown_and_pad);
	tcase_add_test(tc, test_header_only);
	tcase_add_test(tc, test_largest_message);
	suite_add_tcase(s, tc);

	tc = tcase_create("fold");
	tcase_add_test(tc, test_fold_texts);
	tcase_add_test(tc, test_hmap_del);
	tcase_set_timeout(tc, 60); /* slow under sanitizers and on a loaded machine */
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

	tc = tcase_create("rings");
	tcase_add_test(tc, test_ring_same_as_message);
	tcase_add_test(tc, test_ring_wrap_and_pad);
	tcase_add_test(tc, test_ring_chunking);
	tcase_add_test(tc, test_ring_corrupt);
	tcase_add_test(tc, test_ring_add_reject);
	tcase_add_test(tc, test_ring_fd_passing);
	suite_add_tcase(s, tc);

	tc = tcase_create("stats");
	tcase_add_test(tc, test_stats_merge);
	tcase_add_test(tc, test_stats_percentile_accuracy);
	tcase_add_test(tc, test_stats_basic_layout);
	tcase_add_test(tc, test_stats_bad_header);
	tcase_add_test(tc, test_stats_bad_chunk);
	tcase_add_test(tc, test_stats_bad_record_len);
	tcase_add_test(tc, test_stats_bad_hist_ref);
	tcase_add_test(tc, test_stats_bad_run_refs);
	tcase_add_test(tc, test_stats_skipped_records);
	tcase_add_test(tc, test_stats_saturation);
	tcase_add_test(tc, test_stats_copy);
	tcase_add_test(tc, test_stats_copy_images);
	tcase_add_test(tc, test_stats_memfd);
	tcase_add_test(tc, test_stats_memfd_refused);
	tcase_add_test(tc, test_stats_record_rules);
	tcase_add_test(tc, test_stats_recv);
	tcase_add_test(tc, test_unreported_files);
	suite_add_tcase(s, tc);

	tc = tcase_create("ring_concurrent");
	tcase_add_test(tc, test_ring_concurrent);
	tcase_set_timeout(tc, 120); /* slow under sanitizers */
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
