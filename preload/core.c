/* SPDX-License-Identifier: MIT */
/*
 * core.c - what libsqlprof.so knows about statements and executions:
 * configuration, resolution of the originals, the table of live prepared
 * statements, the start and end of executions, sampling and stack capture.
 *
 * It encodes records into the calling thread's ring (stream.c) and never
 * sends anything itself. It holds no lock on the execution path: the
 * statement table and the "already sent" sets are lock-free open-addressing
 * tables updated with compare-and-swap.
 */
#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "sp_preload.h"

struct sp_real sp_real;
atomic_int sp_resolved;
struct sp_config sp_cfg = {
	.enabled = 0,
	.depth = 64,
	.send_timeout_ms = 100,
	.follow = 1,
	.plans = 1,
};
int sp_clock_tsc;
__thread struct sp_thread sp_tls __attribute__((tls_model("initial-exec")));
atomic_ullong sp_untracked;
int sp_hot;
_Atomic uint32_t sp_sql_gen = 1; /* never 0: a statement's fast_gen 0 means never */
atomic_int sp_sql_lost;

static atomic_int status_probed; /* 0 not yet, 1 being probed, 2 done */
static void probe_status_layout(void);

#define DEFAULT_RATE 0.01
#define DEFAULT_SLOW_MS 100

uint64_t sp_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ------------------------------------------------------------------ */
/* Originals                                                           */

#define RESOLVE(h, field, name) \
	(*(void **)&sp_real.field = dlsym(h, name))

static void resolve_from(void *h)
{
	RESOLVE(h, open, "sqlite3_open");
	RESOLVE(h, open_v2, "sqlite3_open_v2");
	RESOLVE(h, open16, "sqlite3_open16");
	RESOLVE(h, close, "sqlite3_close");
	RESOLVE(h, close_v2, "sqlite3_close_v2");
	RESOLVE(h, prepare, "sqlite3_prepare");
	RESOLVE(h, prepare_v2, "sqlite3_prepare_v2");
	RESOLVE(h, prepare_v3, "sqlite3_prepare_v3");       /* optional: 3.20+ */
	RESOLVE(h, prepare16, "sqlite3_prepare16");
	RESOLVE(h, prepare16_v2, "sqlite3_prepare16_v2");
	RESOLVE(h, prepare16_v3, "sqlite3_prepare16_v3");   /* optional: 3.20+ */
	RESOLVE(h, step, "sqlite3_step");
	RESOLVE(h, reset, "sqlite3_reset");
	RESOLVE(h, finalize, "sqlite3_finalize");
	RESOLVE(h, exec, "sqlite3_exec");
	RESOLVE(h, sql, "sqlite3_sql");
	RESOLVE(h, stmt_status, "sqlite3_stmt_status");
	RESOLVE(h, db_handle, "sqlite3_db_handle");
	RESOLVE(h, errmsg, "sqlite3_errmsg");
	RESOLVE(h, extended_errcode, "sqlite3_extended_errcode");
	RESOLVE(h, stmt_isexplain, "sqlite3_stmt_isexplain");  /* optional: 3.28+ */
	RESOLVE(h, column_text, "sqlite3_column_text");
	RESOLVE(h, column_int, "sqlite3_column_int");
	RESOLVE(h, trace_v2, "sqlite3_trace_v2");
	RESOLVE(h, trace, "sqlite3_trace");
	RESOLVE(h, profile, "sqlite3_profile");
	RESOLVE(h, set_authorizer, "sqlite3_set_authorizer");
	RESOLVE(h, progress_handler, "sqlite3_progress_handler");
}

/*
 * Find libsqlite3's functions. RTLD_NEXT finds a library in the global
 * scope (linked at start-up); a library dlopen'd with RTLD_LOCAL as a
 * dependency (Python's _sqlite3 module) is only reachable through its own
 * handle, which RTLD_NOLOAD gives without loading anything.
 * Returns 0 when the required originals are known. Safe to race: every
 * caller stores the same values.
 */
int sp_resolve(void)
{
	static const char *const names[] = { "libsqlite3.so.0", "libsqlite3.so" };
	int saved = errno;
	size_t i;

	if (atomic_load_explicit(&sp_resolved, memory_order_acquire))
		return 0;
	if (!sp_real.dlopen)
		sp_real.dlopen = (void *(*)(const char *, int))dlsym(RTLD_NEXT, "dlopen");
	resolve_from(RTLD_NEXT);
	for (i = 0; !sp_real.step && sp_real.dlopen && i < sizeof(names) / sizeof(names[0]); i++) {
		void *h = sp_real.dlopen(names[i], RTLD_LAZY | RTLD_NOLOAD);

		if (h)
			resolve_from(h); /* the handle is kept: libsqlite3 stays */
	}
	errno = saved;
	if (!sp_real.step || !sp_real.prepare_v2 || !sp_real.reset || !sp_real.finalize ||
	    !sp_real.sql || !sp_real.stmt_status)
		return -1;
	atomic_store_explicit(&sp_resolved, 1, memory_order_release);
	if (sp_cfg.enabled)
		sp_hot = 1;
	return 0;
}

/* ------------------------------------------------------------------ */
/* Configuration                                                       */

static void warn_bad(const char *var, const char *val, const char *why)
{
	fprintf(stderr, "sqlprof: ignoring %s=%s (%s); using the default\n", var, val, why);
}

static int env_double(const char *var, double lo, double hi, double *out)
{
	const char *v = getenv(var);
	char *end;
	double d;

	if (!v || !*v)
		return 0;
	errno = 0;
	d = strtod(v, &end);
	if (errno || *end || !(d >= lo && d <= hi)) { /* also rejects NaN */
		char why[64];

		snprintf(why, sizeof(why), "expected a number from %g to %g", lo, hi);
		warn_bad(var, v, why);
		return 0;
	}
	*out = d;
	return 1;
}

static int env_long(const char *var, long lo, long hi, long *out)
{
	const char *v = getenv(var);
	char *end;
	long l;

	if (!v || !*v)
		return 0;
	errno = 0;
	l = strtol(v, &end, 10);
	if (errno || *end || l < lo || l > hi) {
		char why[64];

		snprintf(why, sizeof(why), "expected an integer from %ld to %ld", lo, hi);
		warn_bad(var, v, why);
		return 0;
	}
	*out = l;
	return 1;
}

static int kernel_clock_is_tsc(void)
{
	char buf[32] = { 0 };
	int fd = open("/sys/devices/system/clocksource/clocksource0/current_clocksource",
		      O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	return n >= 3 && strncmp(buf, "tsc", 3) == 0 && (n == 3 || buf[3] == '\n');
}

static void read_config(void)
{
	double rate = DEFAULT_RATE, slow_ms = DEFAULT_SLOW_MS;
	long l;
	const char *clk;

	env_double("SQLPROF_RATE", 0.0, 1.0, &rate);
	sp_cfg.rate = rate;
	sp_cfg.rate_one = rate >= 1.0;
	sp_cfg.log_q = rate > 0.0 && rate < 1.0 ? log1p(-rate) : 0.0;
	if (env_long("SQLPROF_SEED", 0, LONG_MAX, &l))
		sp_cfg.seed = (uint64_t)l;
	else
		sp_cfg.seed = sp_mono_ns() ^ ((uint64_t)getpid() << 32);
	env_double("SQLPROF_SLOW_MS", 0.0, 86400000.0, &slow_ms);
	if (env_long("SQLPROF_DEPTH", 1, SP_STACK_MAX, &l))
		sp_cfg.depth = (int)l;
	if (env_long("SQLPROF_SEND_TIMEOUT_MS", 0, 10000, &l))
		sp_cfg.send_timeout_ms = (int)l;
	if (env_long("SQLPROF_FOLLOW", 0, 1, &l))
		sp_cfg.follow = (int)l;
	if (env_long("SQLPROF_PLANS", 0, 1, &l))
		sp_cfg.plans = (int)l;

	clk = getenv("SQLPROF_CLOCK");
	if (clk && strcmp(clk, "monotonic") == 0)
		sp_clock_tsc = 0;
	else if (clk && *clk && strcmp(clk, "auto") != 0 && strcmp(clk, "tsc") != 0) {
		warn_bad("SQLPROF_CLOCK", clk, "expected auto, tsc or monotonic");
		sp_clock_tsc = kernel_clock_is_tsc();
	} else
		sp_clock_tsc = kernel_clock_is_tsc();
	sp_cfg.slow_ticks = (uint64_t)(slow_ms * 1e6); /* ns; to ticks in sp_init */
	sp_cfg.slow_span = sp_cfg.slow_ticks ? sp_cfg.slow_ticks : (uint64_t)1 << 63;
}

/* ------------------------------------------------------------------ */
/* Lock-free sets and the statement table                              */

/* Mix a pointer or id into a table index. */
static inline uint64_t mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	return x;
}

/* A set of 64-bit ids (SQL texts and stacks already sent by this
 * process). Insert-only; full means "send again", which is harmless. */
#define IDSET_BITS 16
struct idset {
	_Atomic uint64_t slot[1u << IDSET_BITS];
};
static struct idset *sql_sent, *sql_executed, *stack_sent, *plan_done, *db_callbacks;

/* Returns 1 if id was not in the set (and is now), 0 if it was. Probing is
 * bounded: when IDSET_PROBES slots from the id's home are taken, the set
 * answers `full` (callers choose: resend, or treat as done) instead of
 * scanning a table that a program with unbounded distinct SQL filled. */
#define IDSET_PROBES 64
static int idset_add_or(struct idset *s, uint64_t id, int full)
{
	uint64_t i, n = IDSET_PROBES, mask = (1u << IDSET_BITS) - 1;

	if (!s)
		return full;
	if (id == 0 || id == UINT64_MAX)
		id = 1;
	for (i = mix64(id) & mask; n--; i = (i + 1) & mask) {
		uint64_t cur = atomic_load_explicit(&s->slot[i], memory_order_relaxed);

		if (cur == id)
			return 0;
		if (cur == 0) {
			if (atomic_compare_exchange_strong(&s->slot[i], &cur, id))
				return 1;
			if (cur == id)
				return 0;
		}
	}
	return full;
}

/* Full means "send again": duplicates are harmless, a loss is not. */
static int idset_add(struct idset *s, uint64_t id)
{
	return idset_add_or(s, id, 1);
}

/* The slot holding id, or NULL when id is absent. *unsure is set when the
 * bounded probe ran out before finding id or an empty slot. */
static _Atomic uint64_t *idset_find(struct idset *s, uint64_t id, int *unsure)
{
	uint64_t i, n = IDSET_PROBES, mask = (1u << IDSET_BITS) - 1;

	*unsure = 0;
	if (id == 0 || id == UINT64_MAX)
		id = 1;
	for (i = mix64(id) & mask; n--; i = (i + 1) & mask) {
		uint64_t cur = atomic_load_explicit(&s->slot[i], memory_order_relaxed);

		if (cur == id)
			return &s->slot[i];
		if (cur == 0)
			return NULL;
	}
	*unsure = 1;
	return NULL;
}

/* Forget an id whose record was lost, so that it is sent again. The slot
 * becomes a tombstone (UINT64_MAX, which ids never take). */
static void idset_forget(struct idset *s, uint64_t id)
{
	_Atomic uint64_t *slot;
	uint64_t cur;
	int unsure;

	if (!s || !(slot = idset_find(s, id, &unsure)))
		return;
	cur = atomic_load_explicit(slot, memory_order_relaxed);
	atomic_compare_exchange_strong(slot, &cur, UINT64_MAX);
}

void sp_db_note_callbacks(sqlite3 *db)
{
	if (db)
		idset_add(db_callbacks, (uint64_t)(uintptr_t)db);
}

int sp_db_has_callbacks(uint64_t db)
{
	int unsure;

	if (!db_callbacks)
		return 1; /* unknown: be safe */
	return idset_find(db_callbacks, db, &unsure) != NULL || unsure;
}

int sp_plan_once(uint64_t db, uint64_t sql_id)
{
	/* full: treat as done - never EXPLAIN on every prepare */
	return idset_add_or(plan_done, mix64(db) ^ sql_id, 0);
}

static void *map_zero(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

/*
 * Live statements, keyed by sqlite3_stmt pointer. Open addressing with
 * linear probing; 0 = empty, 1 = tombstone (reused by inserts). A slot's
 * fields other than key belong to whichever thread is using the statement:
 * SQLite forbids stepping one statement from two threads at once.
 * 65536 slots, mapped lazily: a program with more live statements than
 * STMT_MAX_LOAD gets them counted as "untracked" (reported), not lost.
 */
struct sp_stmt *sp_stmts;

static void stale_run_end(struct sp_thread *t, struct sp_stmt *s);

static struct sp_stmt *stmt_insert(sqlite3_stmt *st)
{
	uint64_t i = sp_stmt_hash(st);
	uintptr_t key = (uintptr_t)st;
	int n;

	if (!sp_stmts)
		return NULL;
	for (n = 0; n < STMT_MAX_PROBE; n++, i = (i + 1) & (STMT_N - 1)) {
		uintptr_t k = atomic_load_explicit(&sp_stmts[i].key, memory_order_acquire);

		if (k == key) {
			/* A statement SQLite freed itself (sqlite3VdbeFinalize
			 * inside schema loading), its memory now reused: start
			 * afresh. An execution it left open is reported first. */
			struct sp_stmt *s = &sp_stmts[i];

			if (s->run.seq)
				stale_run_end(&sp_tls, s);
			memset((char *)s + sizeof(s->key), 0, sizeof(*s) - sizeof(s->key));
			return s;
		}
		if (k == 0 || k == 1) {
			/* Fill the slot before publishing the key. */
			if (atomic_compare_exchange_strong(&sp_stmts[i].key, &k, (uintptr_t)2)) {
				struct sp_stmt *s = &sp_stmts[i];

				memset((char *)s + sizeof(s->key), 0, sizeof(*s) - sizeof(s->key));
				atomic_store_explicit(&s->key, key, memory_order_release);
				return s;
			}
		}
	}
	return NULL;
}

void sp_stmt_forget(sqlite3_stmt *st)
{
	struct sp_stmt *s = sp_stmt_find(st);

	if (s)
		atomic_store_explicit(&s->key, (uintptr_t)1, memory_order_release);
}

/* ------------------------------------------------------------------ */
/* Records                                                             */

static inline uint32_t gettid_cached(struct sp_thread *t)
{
	if (unlikely(!t->tid))
		sp_thread_init(t);
	return t->tid;
}

/*
 * Note an SQL text: returns its id (64-bit FNV-1a of the full text) and,
 * the first time this process sees it, writes an SQL record into the
 * thread's ring. The text is cut at SP_SQL_MAX bytes.
 */
uint64_t sp_sql_note(struct sp_thread *t, const char *sql, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	size_t i;

	for (i = 0; i < len; i++) {
		h ^= (unsigned char)sql[i];
		h *= 0x100000001b3ULL;
	}
	if (h == 0)
		h = 1;
	if (idset_add(sql_sent, h)) {
		uint32_t n = len > SP_SQL_MAX ? SP_SQL_MAX : (uint32_t)len;
		uint32_t rl = SP_ALIGN8(sizeof(struct sp_rec_sql) + n);
		struct sp_rec_sql *r = sp_rec_reserve(t, rl);

		if (r) {
			memset(r, 0, rl);
			r->h.type = SP_REC_SQL;
			r->h.len = rl;
			r->h.flags = len > n ? SP_SQL_TRUNCATED : 0;
			r->pid = (uint32_t)getpid();
			r->tid = gettid_cached(t);
			r->sql_id = h;
			r->full_len = len > UINT32_MAX ? UINT32_MAX : (uint32_t)len;
			r->text_len = n;
			memcpy(r + 1, sql, n);
			sp_rec_commit(t, rl);
		} else {
			/* lost (counted): send it with the next use, and once
			 * records can be written again (sp_rec_reserve_slow),
			 * make every statement note its text at its next start */
			idset_forget(sql_sent, h);
			atomic_store_explicit(&sp_sql_lost, 1, memory_order_relaxed);
		}
	}
	return h;
}

static _Atomic uint32_t cached_pid; /* same value from every thread */

/* pid for records written before the thread has its TLS ids */
static inline uint32_t my_pid(void)
{
	uint32_t p = atomic_load_explicit(&cached_pid, memory_order_relaxed);

	if (unlikely(!p)) {
		p = (uint32_t)getpid();
		atomic_store_explicit(&cached_pid, p, memory_order_relaxed);
	}
	return p;
}

void sp_thread_init(struct sp_thread *t)
{
	static atomic_uint thread_index;
	uint32_t idx = atomic_fetch_add(&thread_index, 1) + 1;
	struct sp_rec_hdr h = { SP_REC_EXEC_LITE, 0, sizeof(struct sp_rec_exec_lite) };

	t->tid = (uint32_t)syscall(SYS_gettid);
	t->pid = (uint32_t)getpid();
	memcpy(&t->lite_head[0], &h, sizeof(h));
	t->lite_head[1] = (uint64_t)t->pid | (uint64_t)t->tid << 32;
	/* Repeatable per thread index under SQLPROF_SEED. */
	t->rng = mix64(sp_cfg.seed + 0x9E3779B97F4A7C15ULL * idx) | 1;
	t->skip = 0; /* drawn in sp_thread_ready */
}

/*
 * Gap to the next execution the random draw picks, counting this one: a
 * geometric variable with p = SQLPROF_RATE, so that counting it down
 * gives exactly the choices of one Bernoulli draw per execution, at the
 * price of a decrement instead of a random number each time.
 */
uint64_t sp_draw_gap(struct sp_thread *t)
{
	double u, g;

	if (sp_cfg.rate >= 1.0)
		return 1;
	if (sp_cfg.rate <= 0.0)
		return UINT64_MAX;
	/* u uniform in (0, 1] from the top 53 bits */
	u = (double)((sp_rng_next(t) >> 11) + 1) * 0x1p-53;
	g = floor(log(u) / sp_cfg.log_q);
	if (!(g < 1e18))
		return (uint64_t)1e18;
	return (uint64_t)g + 1;
}

void sp_thread_ready(struct sp_thread *t)
{
	if (t->state & SP_TS_SETUP)
		return;
	if (unlikely(!t->tid))
		sp_thread_init(t);
	if (unlikely(sp_stream_restart))
		sp_stream_child_start();
	if (!t->skip)
		t->skip = sp_draw_gap(t);
	t->state |= SP_TS_SETUP | (sp_clock_tsc ? SP_TS_TSC : 0);
}

/* Give a statement its SQL id. text, when not NULL, is the SQL the caller
 * passed (legacy sqlite3_prepare keeps no copy for sqlite3_sql). */
static void stmt_fill(struct sp_thread *t, struct sp_stmt *s, sqlite3_stmt *st, const char *text,
		      size_t len)
{
	const char *sql = sp_real.sql ? sp_real.sql(st) : NULL;

	s->sql_gen = atomic_load_explicit(&sp_sql_gen, memory_order_relaxed);
	if (sql)
		s->sql_id = sp_sql_note(t, sql, strlen(sql));
	else if (text)
		s->sql_id = sp_sql_note(t, text, len);
	else
		s->sql_id = sp_sql_note(t, "<statement without SQL text>", 28);
	s->db = sp_real.db_handle ? (uint64_t)(uintptr_t)sp_real.db_handle(st) : 0;
}

void sp_stmt_prepared_text(struct sp_thread *t, sqlite3_stmt *st, const char *text, size_t len,
			   uint64_t t0, uint64_t t1)
{
	struct sp_stmt *s;
	struct sp_rec_prepare *r;

	sp_guard_in(t);
	if (unlikely(atomic_load_explicit(&status_probed, memory_order_relaxed) == 0)) {
		int zero = 0;

		/* one thread probes; the others use the API meanwhile */
		if (atomic_compare_exchange_strong(&status_probed, &zero, 1)) {
			probe_status_layout();
			atomic_store(&status_probed, 2);
		}
	}
	s = stmt_insert(st);
	if (!s) {
		sp_guard_out(t);
		return;
	}
	stmt_fill(t, s, st, text, len);
	r = sp_rec_reserve(t, sizeof(*r));
	if (r) {
		r->h.type = SP_REC_PREPARE;
		r->h.flags = 0;
		r->h.len = sizeof(*r);
		r->pid = my_pid();
		r->tid = gettid_cached(t);
		r->sql_id = s->sql_id;
		r->db = s->db;
		r->time = t1 - t0;
		sp_rec_commit(t, sizeof(*r));
	}
	sp_guard_out(t);
	sp_plan_capture(t, st, s->sql_id, s->db);
	sp_modules_maybe_send();
}

/* A statement we did not see prepared (prepared before we were loaded, or
 * inside a libsqlite3 whose internal calls bypass the PLT). */
struct sp_stmt *sp_stmt_adopt(struct sp_thread *t, sqlite3_stmt *st)
{
	struct sp_stmt *s = stmt_insert(st);

	if (!s) {
		atomic_fetch_add_explicit(&sp_untracked, 1, memory_order_relaxed);
		return NULL;
	}
	sp_guard_in(t);
	stmt_fill(t, s, st, NULL, 0);
	sp_guard_out(t);
	return s;
}

/*
 * Statement counters. sqlite3_stmt_status costs ~21 instructions a call
 * and an execution needs eight (before and after) - more than everything
 * else on the hot path. SQLite keeps them as u32 aCounter[op] inside the
 * statement object, so after a probe finds that array (below) we read the
 * four counters straight from memory: the same values, 8 loads.
 * status_off < 0 means "use the API" (probe not run yet, or it failed).
 */
_Atomic int sp_status_off = -1;

#define PROBE_OPS 8 /* SQLITE_STMTSTATUS_FULLSCAN_STEP (1) .. FILTER_HIT (8) */

/* Candidate offsets where aCounter[1..8] equal the API's values. */
static int probe_match(sqlite3_stmt *st, size_t size, int *cand, int ncand, int first)
{
	uint32_t want[PROBE_OPS + 1];
	int op, n = 0;
	size_t off;

	for (op = 1; op <= PROBE_OPS; op++)
		want[op] = (uint32_t)sp_real.stmt_status(st, op, 0);
	if (first) {
		for (off = 0; off + sizeof(uint32_t) * (PROBE_OPS + 1) <= size && n < 8; off += 4) {
			const uint32_t *c = (const uint32_t *)((const char *)st + off);

			for (op = 1; op <= PROBE_OPS && c[op] == want[op]; op++)
				;
			if (op > PROBE_OPS)
				cand[n++] = (int)off;
		}
		return n;
	}
	for (int i = 0; i < ncand; i++) {
		const uint32_t *c = (const uint32_t *)((const char *)st + cand[i]);

		for (op = 1; op <= PROBE_OPS && c[op] == want[op]; op++)
			;
		if (op > PROBE_OPS)
			cand[n++] = cand[i];
	}
	return n;
}

/*
 * Find where this libsqlite3 keeps its statement counters, on a private
 * in-memory connection without lookaside (so the statement object comes
 * from sqlite3_malloc and sqlite3_msize bounds the scan). The probe runs a
 * statement several times so the counters take distinct values, and keeps
 * only an offset where all eight match the API after every run. Called at
 * the first prepare, when the application has initialised SQLite (we never
 * initialise it first: that would break its sqlite3_config calls).
 * SQLPROF_STATUS=api skips it.
 */
static void probe_status_layout(void)
{
	int (*open_v2)(const char *, sqlite3 **, int, const char *) = sp_real.open_v2;
	int (*db_config)(sqlite3 *, int, ...) = (int (*)(sqlite3 *, int, ...))dlsym(RTLD_NEXT, "sqlite3_db_config");
	sqlite3_uint64 (*msize)(void *) = (sqlite3_uint64(*)(void *))dlsym(RTLD_NEXT, "sqlite3_msize");
	const char *env = getenv("SQLPROF_STATUS");
	sqlite3 *db = NULL;
	sqlite3_stmt *st = NULL;
	int cand[8], n = 0, run;
	size_t size;

	if (env && !strcmp(env, "api"))
		return;
	if (!open_v2 || !sp_real.close || !sp_real.prepare_v2 || !sp_real.step || !sp_real.reset ||
	    !sp_real.finalize)
		return;
	if (!db_config || !msize) {
		void *h = sp_real.dlopen ? sp_real.dlopen("libsqlite3.so.0", RTLD_LAZY | RTLD_NOLOAD) : NULL;

		if (!h)
			return;
		db_config = (int (*)(sqlite3 *, int, ...))dlsym(h, "sqlite3_db_config");
		msize = (sqlite3_uint64(*)(void *))dlsym(h, "sqlite3_msize");
		if (!db_config || !msize)
			return;
	}
	if (open_v2(":memory:", &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) != SQLITE_OK)
		goto out;
	db_config(db, SQLITE_DBCONFIG_LOOKASIDE, NULL, 0, 0);
	if (sp_real.prepare_v2(db,
			       "WITH RECURSIVE c(x) AS (VALUES(1) UNION ALL SELECT x+1 FROM c "
			       "WHERE x<20) SELECT x FROM c ORDER BY x DESC",
			       -1, &st, NULL) != SQLITE_OK)
		goto out;
	size = (size_t)msize(st);
	if (size < 64 || size > 65536)
		goto out;
	for (run = 0; run < 3; run++) {
		while (sp_real.step(st) == SQLITE_ROW)
			;
		sp_real.reset(st);
		n = probe_match(st, size, cand, n, run == 0);
		if (n == 0)
			goto out;
	}
	if (n == 1)
		atomic_store_explicit(&sp_status_off, cand[0], memory_order_release);
out:
	if (st)
		sp_real.finalize(st);
	if (db)
		sp_real.close(db);
}


/* The stack of an execution; keeps errno. */
static __attribute__((noinline)) void take_stack(struct sp_thread *t, struct sp_run *r)
{
	r->stack_id = sp_stack_capture_inline(t);
	if (r->stack_id)
		r->flags |= SP_EXEC_SAMPLED;
}

static inline void run_link(struct sp_thread *t, struct sp_run *r)
{
	r->seq = ++t->seq;
	r->parent = t->cur;
	if (unlikely(r->parent != NULL)) {
		r->parent_seq = r->parent->seq;
		r->flags |= SP_EXEC_NESTED;
	} else {
		r->parent_seq = 0;
	}
}

/* First step of an execution: baselines, nesting and the sampling choice. */
uint64_t sp_run_begin_slow(struct sp_thread *t, struct sp_stmt *s, sqlite3_stmt *st, int drawn)
{
	struct sp_run *r = &s->run;
	uint32_t gen;

	/* only reached from the step shim of a set-up thread (sp_thread_ready) */
	gen = atomic_load_explicit(&sp_sql_gen, memory_order_relaxed);
	if (unlikely(s->sql_gen != gen)) {
		/* Its text may have been lost with a full ring: note it again
		 * (sent again only if it was forgotten). */
		const char *sql = sp_real.sql ? sp_real.sql(st) : NULL;

		s->sql_gen = atomic_load_explicit(&sp_sql_gen, memory_order_relaxed);
		if (sql) {
			sp_guard_in(t);
			sp_sql_note(t, sql, strlen(sql));
			sp_guard_out(t);
		}
	}
	r->flags = 0;
	run_link(t, r);
	r->db_time = r->nested_time = r->rows = r->stack_id = 0;
	sp_status_base(r, st);
	/* The random draw is made for every execution, forced or not, so the
	 * random samples stay an unbiased share of them. */
	if (unlikely(s->nexec++ == 0) && idset_add(sql_executed, s->sql_id))
		r->flags |= SP_EXEC_FIRST;
	if (drawn < 0) /* the inline path did not draw for us */
		drawn = sp_draw(t);
	if (drawn)
		r->flags |= SP_EXEC_RANDOM;
	if (r->flags & (SP_EXEC_FIRST | SP_EXEC_RANDOM)) {
		/* inline: one frame less of ours for the walk to climb */
		r->stack_id = sp_stack_capture_inline(t);
		if (r->stack_id)
			r->flags |= SP_EXEC_SAMPLED;
	}
	s->fast_gen = gen; /* its next execution may start inline */
	r->start = sp_now();
	r->slow_at = r->start + sp_cfg.slow_span;
	return r->start;
}

/* A row came back: take the stack of a slow execution while its caller is
 * still on the stack. */
void sp_run_on_row(struct sp_thread *t, struct sp_stmt *s, sqlite3_stmt *st, uint64_t now)
{
	struct sp_run *r = &s->run;

	(void)st;
	r->slow_at = UINT64_MAX; /* noted once */
	r->flags |= SP_EXEC_SLOW;
	if (!(r->flags & SP_EXEC_SAMPLED))
		take_stack(t, r);
}

static void write_error(struct sp_thread *t, const struct sp_run *run, uint64_t sql_id, sqlite3 *db,
			int rc)
{
	const char *msg = db && sp_real.errmsg ? sp_real.errmsg(db) : NULL;
	size_t n = msg ? strnlen(msg, 4096) : 0;
	uint32_t rl = SP_ALIGN8(sizeof(struct sp_rec_error) + n);
	struct sp_rec_error *r = sp_rec_reserve(t, rl);

	if (!r)
		return;
	memset(r, 0, rl);
	r->h.type = SP_REC_ERROR;
	r->h.len = rl;
	r->pid = my_pid();
	r->tid = t->tid;
	r->exec_seq = run->seq;
	r->sql_id = sql_id;
	r->stack_id = run->stack_id;
	r->rc = rc;
	r->msg_len = (uint32_t)n;
	memcpy(r + 1, msg ? msg : "", n);
	sp_rec_commit(t, rl);
}

static inline void run_unlink(struct sp_thread *t, struct sp_run *r)
{
	/* Credit our time to the enclosing execution only while we are inside
	 * its call (t->cur): a parent of sqlite3_exec lives on the exec shim's
	 * stack, and a child finished after that call returned must not touch
	 * it. The usual case - DONE inside a UDF or an exec - is inside. */
	if (unlikely(r->parent != NULL) && r->parent == t->cur && r->parent->seq == r->parent_seq)
		r->parent->nested_time += r->db_time;
	r->seq = 0;
}

/* End of an execution: DONE, an error, or reset/finalize before DONE
 * (rc == SQLITE_ROW then, and SP_EXEC_ABANDONED is set). */
void sp_run_end_slow(struct sp_thread *t, struct sp_stmt *s, sqlite3_stmt *st, int rc,
		     uint64_t end)
{
	struct sp_run *r = &s->run;
	sp_v4u delta;

	if (!r->seq)
		return;
	if (unlikely(end >= r->slow_at) && !(r->flags & SP_EXEC_SLOW)) {
		/* Slow, and no row came back to notice it earlier: we are still
		 * in the caller's step, so its stack is the right one. */
		r->flags |= SP_EXEC_SLOW;
		if (!(r->flags & SP_EXEC_SAMPLED))
			take_stack(t, r);
	}
	delta = sp_status_delta(r, st);
	if (unlikely(rc != SQLITE_DONE && rc != SQLITE_ROW)) {
		sqlite3 *db = (sqlite3 *)(uintptr_t)s->db;
		int saved = errno;

		r->flags |= SP_EXEC_ERROR;
		if (db && sp_real.extended_errcode)
			rc = sp_real.extended_errcode(db);
		/* The stack at the failing call: we are in the step shim. */
		take_stack(t, r);
		sp_guard_in(t);
		write_error(t, r, s->sql_id, db, rc);
		sp_guard_out(t);
		errno = saved;
	}
	sp_emit_exec(t, r, s->sql_id, s->db, rc == SQLITE_ROW || rc == SQLITE_DONE ? SQLITE_OK : rc, end,
		  delta, SP_KIND_STMT);
	run_unlink(t, r);
}

void sp_exec_begin(struct sp_thread *t, struct sp_run *r, uint64_t sql_id)
{
	if (unlikely(!t->tid))
		sp_thread_init(t);
	memset(r, 0, sizeof(*r));
	run_link(t, r);
	/* an exec call and a statement of the same text are not the same
	 * query: their "first" marks are kept apart */
	if (idset_add(sql_executed, sql_id ^ 0x9E3779B97F4A7C15ULL))
		r->flags |= SP_EXEC_FIRST;
	if (!t->skip)
		t->skip = sp_draw_gap(t);
	if (sp_draw(t))
		r->flags |= SP_EXEC_RANDOM;
	r->slow_at = UINT64_MAX; /* exec calls are checked at their end */
	if (r->flags & (SP_EXEC_FIRST | SP_EXEC_RANDOM))
		take_stack(t, r);
}

/* An execution whose statement SQLite freed without our finalize shim:
 * end it without reading counters from memory that is no longer it. */
static void stale_run_end(struct sp_thread *t, struct sp_stmt *s)
{
	static const sp_v4u zero;
	struct sp_run *r = &s->run;

	if (!t->tid)
		sp_thread_init(t);
	r->flags |= SP_EXEC_ABANDONED | SP_EXEC_STATUS_RESET;
	sp_emit_exec(t, r, s->sql_id, s->db, SQLITE_OK, r->start + r->db_time, zero, SP_KIND_STMT);
	r->seq = 0;
}

void sp_exec_end(struct sp_thread *t, struct sp_run *r, uint64_t sql_id, sqlite3 *db, int rc,
		 uint64_t end)
{
	static const sp_v4u zero;

	if (sp_cfg.slow_ticks && end - r->start >= sp_cfg.slow_ticks) {
		r->flags |= SP_EXEC_SLOW;
		if (!(r->flags & SP_EXEC_SAMPLED))
			take_stack(t, r);
	}
	if (rc != SQLITE_OK && rc != SQLITE_ABORT) {
		r->flags |= SP_EXEC_ERROR;
		if (db && sp_real.extended_errcode)
			rc = sp_real.extended_errcode(db);
		take_stack(t, r);
		sp_guard_in(t);
		write_error(t, r, sql_id, db, rc);
		sp_guard_out(t);
	}
	sp_emit_exec(t, r, sql_id, (uint64_t)(uintptr_t)db, rc, end, zero, SP_KIND_EXEC);
	run_unlink(t, r);
}

/* ------------------------------------------------------------------ */
/* Stacks                                                              */

int sp_use_cfi_unwinder;

/* Text range of libsqlprof itself: leading frames inside it are dropped. */
uintptr_t sp_self_lo, sp_self_hi;

/* A stack not known to be sent by this thread lately: note it in the set
 * and write its STACK record the first time in the process. */
__attribute__((noinline)) uint64_t sp_stack_note(struct sp_thread *t, const uintptr_t *pcs, int depth,
						uint64_t h)
{
	int saved = errno, i;

	if (idset_add(stack_sent, h)) {
		uint32_t rl = sizeof(struct sp_rec_stack) + 8u * (uint32_t)depth;
		struct sp_rec_stack *r;

		sp_guard_in(t);
		/* A new stack may hold pcs of a library loaded since the map was
		 * last sent. */
		sp_modules_changed();
		r = sp_rec_reserve(t, rl);
		sp_guard_out(t);
		if (!r) {
			idset_forget(stack_sent, h);
			errno = saved;
			return 0; /* the execution keeps its time, loses its stack */
		}
		r->h.type = SP_REC_STACK;
		r->h.flags = 0;
		r->h.len = rl;
		r->pid = my_pid();
		r->tid = t->tid;
		r->stack_id = h;
		r->depth = (uint32_t)depth;
		r->pad = 0;
		for (i = 0; i < depth; i++)
			((uint64_t *)(r + 1))[i] = (uint64_t)pcs[i];
		sp_rec_commit(t, rl);
	}
	t->last_stack = h;
	errno = saved;
	return h;
}

/* backtrace(), for frames our unwinder cannot climb; keeps errno */
int sp_backtrace_keep_errno(uintptr_t *pcs, int max)
{
	int saved = errno, n = backtrace((void **)pcs, max);

	errno = saved;
	return n;
}

void sp_stack_sets_reset(void)
{
	sp_tls.last_stack = 0; /* the forked child's one thread */
	if (stack_sent)
		memset(stack_sent, 0, sizeof(*stack_sent));
}

static int self_range_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	uintptr_t me = (uintptr_t)arg;
	int i;

	(void)size;
	for (i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *p = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + p->p_vaddr;

		if (p->p_type == PT_LOAD && (p->p_flags & PF_X) && me >= lo && me < lo + p->p_memsz) {
			sp_self_lo = lo;
			sp_self_hi = lo + p->p_memsz;
			return 1;
		}
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* Process life                                                        */

uint32_t sp_proc_pid; /* pid of the process image we initialised */

static void on_fork_child(void)
{
	sp_proc_pid = (uint32_t)getpid();
	/* Only async-signal-safe work: the child has one thread. Statement
	 * state is kept (the child may go on using them); records already in
	 * rings belong to the parent, which sends them. */
	atomic_store_explicit(&cached_pid, 0, memory_order_relaxed);
	sp_tls.tid = 0;
	sp_tls.state &= ~SP_TS_FAST; /* set up again at the next call */
	sp_stream_fork_child();
}

extern char *program_invocation_short_name;

/*
 * Constructor: runs in the loader, single-threaded, before main. It reads
 * the environment, maps the tables (mmap, no malloc), warms up backtrace()
 * (its first call loads libgcc_s) and connects to the collector. It calls
 * dl_iterate_phdr without holding any lock of ours.
 */
__attribute__((constructor)) static void sp_init(void)
{
	void *warm[4];

	if (!getenv(SP_ENV_SOCK))
		return; /* preloaded without a collector: stay inert */
	/* Never profile the collector itself (its own profile writes). */
	if (dlsym(RTLD_DEFAULT, "sqlprof_is_collector"))
		return;
	read_config();
	if (!sp_cfg.follow && getenv("SQLPROF_FOLLOW_ROOT"))
		return; /* an exec'd child under --no-follow */
	if (!sp_cfg.follow)
		setenv("SQLPROF_FOLLOW_ROOT", "1", 1);
	sp_stmts = map_zero(sizeof(struct sp_stmt) * STMT_N);
	sql_sent = map_zero(sizeof(struct idset));
	sql_executed = map_zero(sizeof(struct idset));
	stack_sent = map_zero(sizeof(struct idset));
	plan_done = map_zero(sizeof(struct idset));
	db_callbacks = map_zero(sizeof(struct idset));
	if (!sp_stmts)
		return;
	dl_iterate_phdr(self_range_cb, (void *)(uintptr_t)&sp_init);
	backtrace(warm, 4);
	{
		const char *u = getenv("SQLPROF_UNWIND");

		if (u && !strcmp(u, "libgcc"))
			sp_use_cfi_unwinder = 0;
		else if (u && *u && strcmp(u, "cfi")) {
			warn_bad("SQLPROF_UNWIND", u, "expected cfi or libgcc");
			sp_use_cfi_unwinder = sp_unwind_init() == 0;
		} else
			sp_use_cfi_unwinder = sp_unwind_init() == 0;
	}
	if (sp_clock_tsc && sp_cfg.slow_ticks) {
		sp_cfg.slow_ticks = (uint64_t)((double)sp_cfg.slow_ticks * sp_tsc_per_ns());
		if (!sp_cfg.slow_ticks)
			sp_cfg.slow_ticks = 1;
		sp_cfg.slow_span = sp_cfg.slow_ticks;
	}
	sp_proc_pid = (uint32_t)getpid();
	pthread_atfork(NULL, NULL, on_fork_child);
	sp_resolve();
	if (sp_stream_init() == 0) {
		sp_cfg.enabled = 1;
		if (atomic_load(&sp_resolved))
			sp_hot = 1;
	}
}

/* Destructor: say goodbye. Runs from exit(); _exit and exec have shims
 * that do it; a program killed by a signal has no goodbye, but its
 * records are in the rings the collector holds. */
__attribute__((destructor)) static void sp_fini(void)
{
	if (!sp_cfg.enabled)
		return;
	sp_stream_exit();
}
