/* SPDX-License-Identifier: MIT */
/*
 * stmt.c - what the preload knows about statements and SQL texts: the
 * lock-free table of live prepared statements, the SQL texts (their ids,
 * shapes and SQL records, with the ones lost to a full ring sent again
 * later), the process-wide "already sent" sets, prepares, and the probe
 * that finds SQLite's statement counters in memory.
 *
 * It holds no lock on the execution path: the statement table and the
 * sets are lock-free open-addressing tables updated with compare-and-swap.
 */
#include <dlfcn.h>
#include <sys/stat.h>
#include <stdio.h>
#include <link.h>
#include <errno.h>
#include <stddef.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "fingerprint.h"
#include "sp_preload.h"
#include "sp_params.h"
#include "sp_probe.h"

atomic_ullong sp_untracked;
/* A thread's last_stmt before its first lookup: key 1 (a tombstone) never
 * matches a statement, nor NULL */
struct sp_stmt sp_stmt_none = { .key = 1 };
static atomic_int status_probed; /* 0 not yet, 1 being probed, 2 done */
static void probe_status_layout(void);

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
static struct idset *sql_sent, *sql_executed, *first_sites, *stack_sent, *db_callbacks;

/*
 * Distinct texts per fingerprint (shape): a dump restore, a migration or a
 * program that inlines its values makes one text per execution, each with
 * its query records (~1.2 KB of shared memory, a text record, a merge in
 * the collector) for one execution. Past the first
 * SQLPROF_TEXTS_PER_SHAPE texts of a shape in a process, a new text is
 * counted in its shape's folded text instead: one text, marked, whose
 * records hold the exact totals of all of them (the report groups by
 * fingerprint, which the mark leaves alone). Insert-only, bounded probing
 * like idset: a shape that finds no slot is never folded.
 */
struct shape_slot {
	_Atomic uint64_t shape; /* 0: empty */
	_Atomic uint32_t texts; /* distinct texts noted */
	uint32_t pad;
};
#define SHAPES_BITS 16
static struct shape_slot *shape_texts;
#define FOLD_MARK "/* sqlprof: more texts of this fingerprint */ "

/* The count of distinct texts of shape, this one included; 0 when the
 * shape found no slot. */
static uint32_t shape_text_add(uint64_t shape)
{
	uint64_t i, n = 64, mask = (1u << SHAPES_BITS) - 1; /* idset's bound */

	if (!shape_texts)
		return 0;
	if (shape == 0)
		shape = 1;
	for (i = mix64(shape) & mask; n--; i = (i + 1) & mask) {
		struct shape_slot *e = &shape_texts[i];
		uint64_t cur = atomic_load_explicit(&e->shape, memory_order_relaxed);

		if (cur == 0 && atomic_compare_exchange_strong(&e->shape, &cur, shape))
			cur = shape;
		if (cur == shape)
			return atomic_fetch_add_explicit(&e->texts, 1, memory_order_relaxed) + 1;
	}
	return 0;
}

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

static void *map_zero(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

int sp_first_exec(uint64_t sql_id, uint32_t kind)
{
	/* an exec call and a statement of the same text are kept apart */
	return idset_add(sql_executed,
			 kind == SP_KIND_EXEC ? sql_id ^ 0x9E3779B97F4A7C15ULL : sql_id);
}

int sp_first_site(uint64_t shape, uint64_t stack_id)
{
	/* full: take the sample (a duplicate is harmless) */
	return idset_add(first_sites, mix64(shape) ^ stack_id);
}

int sp_stack_first(uint64_t h);
void sp_stack_unsent(uint64_t h);

/* 1 when stack h was not sent by this process yet (and is now noted). */
int sp_stack_first(uint64_t h)
{
	return idset_add(stack_sent, h);
}

/* Its record was lost: send it again next time. */
void sp_stack_unsent(uint64_t h)
{
	idset_forget(stack_sent, h);
}

void sp_sql_sent_reset(void)
{
	/* racing inserts of other threads at worst send a text twice
	 * (harmless) or keep one they just sent */
	if (sql_sent)
		memset(sql_sent, 0, sizeof(*sql_sent));
	if (stack_sent)
		memset(stack_sent, 0, sizeof(*stack_sent));
	sp_tls.last_stack = 0;
}

void sp_stack_sets_reset(void)
{
	sp_tls.last_stack = 0; /* the forked child's one thread */
	if (stack_sent)
		memset(stack_sent, 0, sizeof(*stack_sent));
}

static void stmt_index_init(void);

void sp_stmt_tables_init(void)
{
	stmt_index_init();
	sql_sent = map_zero(sizeof(struct idset));
	sql_executed = map_zero(sizeof(struct idset));
	first_sites = map_zero(sizeof(struct idset));
	stack_sent = map_zero(sizeof(struct idset));
	db_callbacks = map_zero(sizeof(struct idset));
	shape_texts = map_zero(sizeof(struct shape_slot) << SHAPES_BITS);
}

/*
 * Live statements (sp_preload.h, struct sp_stmt_index): the index and the
 * slots. Lookups take no lock; inserting, forgetting and growing take
 * tab_lock, a spin lock holding the owner thread's sp_tls address: a
 * signal handler that prepares a statement while its thread holds it gets
 * no slot (the statement is untracked, counted) instead of a deadlock. A
 * slot freed by finalize goes to the free list and is reused, as a
 * tombstone slot was in the fixed table before: every holder of a slot
 * pointer (last_stmt, fast_stmt) checks its key. Memory: 16 bytes of
 * index (at most half full) and one slot (sizeof(struct sp_stmt)) per
 * live statement, in slabs that double up to 4 MiB; an index replaced by
 * a larger one is kept (at most as much again).
 */
struct sp_stmt_index *_Atomic sp_stmt_idx;
static _Atomic uintptr_t tab_lock;
static struct sp_stmt *slot_free;            /* free slots, under tab_lock */
static struct sp_stmt *slab_next, *slab_end; /* unused part of the last slab */
static size_t slab_slots = 256;              /* size of the next slab */
#define INDEX_FIRST_BITS 12                  /* 4096 entries, 64 KiB */

static int tab_lock_take(void)
{
	uintptr_t me = (uintptr_t)&sp_tls, cur = 0;

	while (!atomic_compare_exchange_weak_explicit(&tab_lock, &cur, me, memory_order_acquire,
						      memory_order_relaxed)) {
		if (cur == me)
			return -1; /* re-entered from a signal handler */
		cur = 0;
		__builtin_ia32_pause();
	}
	return 0;
}

static void tab_lock_drop(void)
{
	atomic_store_explicit(&tab_lock, 0, memory_order_release);
}

void sp_stmt_fork_child(void)
{
	/* the thread that held it is not in the child; the table is whole
	 * (every change is published with one store) */
	atomic_store_explicit(&tab_lock, 0, memory_order_relaxed);
}

static struct sp_stmt_index *index_new(uint32_t bits)
{
	struct sp_stmt_index *x = map_zero(sizeof(*x) + (sizeof(struct sp_stmt_ent) << bits));

	if (x) {
		x->mask = ((uint64_t)1 << bits) - 1;
		x->shift = 64 - bits;
	}
	return x;
}

static void stmt_index_init(void)
{
	atomic_store(&sp_stmt_idx, index_new(INDEX_FIRST_BITS));
}

/* A slot, from the free list or a slab; NULL without memory. Under tab_lock. */
static struct sp_stmt *slot_alloc(void)
{
	struct sp_stmt *s = slot_free;

	if (s) {
		slot_free = s->next_free;
		return s;
	}
	if (slab_next == slab_end) {
		struct sp_stmt *m = map_zero(slab_slots * sizeof(*m));

		if (!m)
			return NULL;
		slab_next = m;
		slab_end = m + slab_slots;
		if (slab_slots * sizeof(*m) < ((size_t)4 << 20))
			slab_slots *= 2;
	}
	return slab_next++;
}

/* Every field of a slot but its key. */
static void stmt_clear(struct sp_stmt *s)
{
	memset(&s->exec, 0, sizeof(s->exec));
	memset((char *)&s->key + sizeof(s->key), 0,
	       sizeof(*s) - offsetof(struct sp_stmt, key) - sizeof(s->key));
}

/* The entry of key in x (its slot's key still key), or NULL; *hole: the
 * first tombstone or empty entry on the way (where key would go). */
static struct sp_stmt_ent *index_probe(struct sp_stmt_index *x, uintptr_t key,
				       struct sp_stmt_ent **hole)
{
	uint64_t i;

	*hole = NULL;
	for (i = sp_stmt_hash((void *)key, x->shift);; i = (i + 1) & x->mask) {
		struct sp_stmt_ent *e = &x->e[i];
		uintptr_t k = atomic_load_explicit(&e->key, memory_order_relaxed);

		if (k == key)
			return e;
		if (k == 1 && !*hole)
			*hole = e;
		if (k == 0) {
			if (!*hole)
				*hole = e;
			return NULL;
		}
	}
}

/* A larger (or, with many tombstones, a clean) index holding x's live
 * entries, published; x is kept for readers still in it. Under tab_lock. */
static struct sp_stmt_index *index_grow(struct sp_stmt_index *x)
{
	uint32_t bits = 64 - x->shift;
	struct sp_stmt_index *n;
	uint64_t i;

	if (x->live + 1 > (x->mask + 1) / 4)
		bits++;
	n = index_new(bits);
	if (!n)
		return NULL;
	for (i = 0; i <= x->mask; i++) {
		uintptr_t k = atomic_load_explicit(&x->e[i].key, memory_order_relaxed);
		struct sp_stmt_ent *hole;

		if (k < 2)
			continue;
		index_probe(n, k, &hole);
		hole->s = x->e[i].s;
		atomic_store_explicit(&hole->key, k, memory_order_relaxed);
		n->used++;
		n->live++;
	}
	n->older = x;
	atomic_store_explicit(&sp_stmt_idx, n, memory_order_release);
	return n;
}

/*
 * The slot of st, made if new. fresh: st was just prepared, so a slot
 * already under its key belonged to a statement SQLite freed itself
 * (sqlite3VdbeFinalize inside schema loading) whose memory was reused:
 * started afresh, an execution it left open reported first. NULL: no
 * memory, or re-entered from a signal handler (untracked).
 */
static struct sp_stmt *stmt_insert(sqlite3_stmt *st, int fresh)
{
	uintptr_t key = (uintptr_t)st;
	struct sp_stmt_index *x;
	struct sp_stmt_ent *e, *hole;
	struct sp_stmt *s = NULL;

	if (key < 2 || !atomic_load_explicit(&sp_stmt_idx, memory_order_relaxed) ||
	    tab_lock_take() < 0)
		return NULL;
	x = atomic_load_explicit(&sp_stmt_idx, memory_order_relaxed);
	e = index_probe(x, key, &hole);
	if (e) {
		s = e->s;
		if (fresh) {
			if (s->exec.start)
				sp_exec_stale(&sp_tls, s);
			stmt_clear(s);
		}
		goto out;
	}
	if (atomic_load_explicit(&hole->key, memory_order_relaxed) == 0 &&
	    x->used + 1 > (x->mask + 1) / 2) {
		x = index_grow(x);
		if (!x)
			goto out;
		index_probe(x, key, &hole);
	}
	s = slot_alloc();
	if (!s)
		goto out;
	stmt_clear(s);
	atomic_store_explicit(&s->key, key, memory_order_release);
	if (atomic_load_explicit(&hole->key, memory_order_relaxed) == 0)
		x->used++;
	x->live++;
	hole->s = s; /* before the key: a reader that sees the key sees it */
	atomic_store_explicit(&hole->key, key, memory_order_release);
out:
	tab_lock_drop();
	return s;
}

void sp_stmt_forget(sqlite3_stmt *st)
{
	struct sp_stmt_index *x;
	struct sp_stmt_ent *e, *hole;

	if ((uintptr_t)st < 2 || !atomic_load_explicit(&sp_stmt_idx, memory_order_relaxed) ||
	    tab_lock_take() < 0)
		return;
	x = atomic_load_explicit(&sp_stmt_idx, memory_order_relaxed);
	e = index_probe(x, (uintptr_t)st, &hole);
	if (e) {
		struct sp_stmt *s = e->s;

		atomic_store_explicit(&s->key, (uintptr_t)1, memory_order_release);
		atomic_store_explicit(&e->key, (uintptr_t)1, memory_order_release);
		x->live--;
		s->next_free = slot_free;
		slot_free = s;
	}
	tab_lock_drop();
}

/* ------------------------------------------------------------------ */
/* SQL texts                                                           */

/*
 * The shape of an SQL text: a hash of it without its literals (numbers,
 * quoted strings, blobs) and with blanks collapsed, so that a loop that
 * writes its values into the text ("... WHERE id = 7", "= 8") runs one
 * query for the N+1 loops, as the collector's fingerprints group them.
 * Never coarser than the collector's fingerprint (report/profile/
 * fingerprint.c): quoted identifiers and comments are kept verbatim, so
 * that one plan per shape (plan.c) is a plan for every fingerprint.
 * Computed once per text and statement, never per execution.
 */
static uint64_t sql_shape(const char *s, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	size_t i = 0;
	int blank = 0, ident = 0; /* ident: inside a word, whose digits are its own */

#define MIX(c) (h = (h ^ (unsigned char)(c)) * 0x100000001b3ULL)
	while (i < n) {
		unsigned char c = (unsigned char)s[i];

		if (c == '\'' || ((c == 'x' || c == 'X') && i + 1 < n && s[i + 1] == '\'')) {
			if (c != '\'')
				i++;
			for (i++; i < n; i++)
				if (s[i] == '\'' && !(i + 1 < n && s[i + 1] == '\'' && ++i))
					break;
			i++;
			MIX('?');
			blank = ident = 0;
			continue;
		}
		if (c == '"' || c == '`' || c == '[') {
			/* a quoted identifier, verbatim: the collector keeps its
			 * case, and a quote inside it starts no string */
			unsigned char close = c == '[' ? ']' : c;

			MIX(c);
			for (i++; i < n; i++) {
				MIX(s[i]);
				if ((unsigned char)s[i] == close) {
					if (close == ']' || !(i + 1 < n && s[i + 1] == (char)close))
						break;
					i++;
					MIX(s[i]);
				}
			}
			i++;
			blank = ident = 0;
			continue;
		}
		if ((c == '-' && i + 1 < n && s[i + 1] == '-') ||
		    (c == '/' && i + 1 < n && s[i + 1] == '*')) {
			/* a comment, verbatim (a quote inside it starts no string) */
			int line = c == '-';

			for (; i < n; i++) {
				MIX(s[i]);
				if (line ? s[i] == '\n'
					 : (s[i] == '/' && i > 1 && s[i - 1] == '*' &&
					    s[i - 2] != '/'))
					break;
			}
			i++;
			blank = ident = 0;
			continue;
		}
		if (c >= '0' && c <= '9' && !ident) {
			while (i < n &&
			       ((s[i] >= '0' && s[i] <= '9') || s[i] == '.' || (s[i] | 32) == 'e' ||
				(s[i] | 32) == 'x' || ((s[i] | 32) >= 'a' && (s[i] | 32) <= 'f')))
				i++;
			MIX('?');
			blank = ident = 0;
			continue;
		}
		if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
			if (!blank)
				MIX(' ');
			blank = 1;
			ident = 0;
			i++;
			continue;
		}
		MIX(c >= 'A' && c <= 'Z' ? c | 32 : c);
		blank = 0;
		ident = c == '_' || c == '$' || c >= 0x80 || ((c | 32) >= 'a' && (c | 32) <= 'z') ||
			(ident && c >= '0' && c <= '9');
		i++;
	}
#undef MIX
	return h;
}

/* SQL records lost with a full ring, to send again: copies of the texts,
 * under pending_lock. At most PENDING_MAX bytes are kept; beyond, a text
 * is lost for good (counted in sp_lost like the record). */
#define PENDING_MAX (16u << 20)
struct pending_sql {
	struct pending_sql *next;
	uint64_t id;
	uint32_t len, full_len;
	char text[];
};
static pthread_mutex_t pending_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pending_sql *pending;
static size_t pending_bytes;
atomic_int sp_sql_pending;

/* Write one SQL record; 0, or -1 when the ring has no room (counted). */
static int sql_record(struct sp_thread *t, uint64_t id, const char *sql, uint32_t n,
		      size_t full_len)
{
	uint32_t rl = SP_ALIGN8(sizeof(struct sp_rec_sql) + n);
	struct sp_rec_sql *r = sp_rec_reserve(t, rl);

	if (!r)
		return -1;
	memset(r, 0, rl);
	r->h.type = SP_REC_SQL;
	r->h.len = rl;
	r->h.flags = full_len > n ? SP_SQL_TRUNCATED : 0;
	r->pid = sp_my_pid();
	r->tid = t->tid;
	r->sql_id = id;
	r->full_len = full_len > UINT32_MAX ? UINT32_MAX : (uint32_t)full_len;
	r->text_len = n;
	memcpy(r + 1, sql, n);
	sp_rec_commit(t, rl);
	return 0;
}

static void pending_add(uint64_t id, const char *sql, uint32_t n, size_t full_len)
{
	struct pending_sql *p;

	pthread_mutex_lock(&pending_lock);
	if (pending_bytes + n > PENDING_MAX || !(p = malloc(sizeof(*p) + n))) {
		pthread_mutex_unlock(&pending_lock);
		return;
	}
	p->id = id;
	p->len = n;
	p->full_len = full_len > UINT32_MAX ? UINT32_MAX : (uint32_t)full_len;
	memcpy(p->text, sql, n);
	p->next = pending;
	pending = p;
	pending_bytes += n;
	atomic_store_explicit(&sp_sql_pending, 1, memory_order_relaxed);
	pthread_mutex_unlock(&pending_lock);
}

/*
 * At exit (stream.c, exit_texts): write the SQL records still pending
 * into t's ring while room(t, len) says a record of len bytes fits now,
 * so that no write fails (a failed one counts as a lost record).
 * Returns 1 when some remain, 0 when none does; -1 when another thread
 * holds the list (then nothing is written).
 */
int sp_sql_flush_room(struct sp_thread *t, int (*room)(struct sp_thread *t, uint32_t len))
{
	struct pending_sql *p;
	int rc;

	if (pthread_mutex_trylock(&pending_lock) != 0)
		return -1;
	while ((p = pending) != NULL) {
		uint32_t n = p->len > SP_SQL_MAX ? SP_SQL_MAX : p->len;

		if (!room(t, SP_ALIGN8(sizeof(struct sp_rec_sql) + n)) ||
		    sql_record(t, p->id, p->text, n, p->full_len) < 0)
			break;
		pending = p->next;
		pending_bytes -= p->len;
		free(p);
	}
	/* the PLAN and SCHEMA records kept (plan.c) go after the texts */
	rc = pending != NULL || sp_plan_flush(t);
	atomic_store_explicit(&sp_sql_pending, rc, memory_order_relaxed);
	pthread_mutex_unlock(&pending_lock);
	return rc;
}

/* Send the SQL records that were lost, while the ring has room: a text
 * that still finds none stays pending, neither waited for nor counted
 * again as lost (it was when it was kept: every new text while the ring
 * stayed full counted once more, 120,709 "events lost" for 50,000 texts
 * with the collector stopped, all of which arrived). */
void sp_sql_flush(struct sp_thread *t)
{
	if (!t->tid)
		sp_thread_init(t);
	sp_guard_in(t);
	(void)sp_sql_flush_room(t, sp_ring_room);
	sp_guard_out(t);
}

/*
 * Each SQL record still pending, built in turn and handed to fn (which
 * returns < 0 to stop), for an image that leaves its texts in a file
 * (stream.c): one that could not connect (its texts never had a ring to
 * go to), or one that exits while its collector does not make room.
 * Another thread holding the list is waited for, at most ~100 ms (it
 * holds it for a flush only; _exit from a signal handler may have
 * interrupted that thread, hence no lock; the texts are then skipped).
 * Returns 0, or -1 when fn failed.
 */
int sp_sql_pending_each(int (*fn)(void *arg, const void *rec, uint32_t len), void *arg)
{
	static uint64_t rec[(sizeof(struct sp_rec_sql) + SP_SQL_MAX + 8) / 8 + 1];
	const struct pending_sql *p;
	int rc = 0, tries;

	for (tries = 0; pthread_mutex_trylock(&pending_lock) != 0; tries++) {
		struct timespec ts = { 0, 1000000 };

		if (tries == 100)
			return 0; /* the texts are skipped, the file is kept */
		nanosleep(&ts, NULL);
	}
	for (p = pending; p && rc == 0; p = p->next) {
		struct sp_rec_sql *r = (struct sp_rec_sql *)(void *)rec;
		uint32_t n = p->len > SP_SQL_MAX ? SP_SQL_MAX : p->len;
		uint32_t rl = SP_ALIGN8(sizeof(*r) + n);

		memset(r, 0, rl);
		r->h.type = SP_REC_SQL;
		r->h.len = rl;
		r->h.flags = p->full_len > n ? SP_SQL_TRUNCATED : 0;
		r->pid = sp_my_pid();
		r->tid = sp_tls.tid;
		r->sql_id = p->id;
		r->full_len = p->full_len;
		r->text_len = n;
		memcpy(r + 1, p->text, n);
		rc = fn(arg, r, rl);
	}
	pthread_mutex_unlock(&pending_lock);
	return rc < 0 ? -1 : 0;
}

/*
 * Note an SQL text: returns its id (64-bit FNV-1a of the full text) and,
 * the first time this process sees it, writes an SQL record into the
 * thread's ring (or keeps it to send later when the ring is full). A text
 * longer than SP_SQL_MAX bytes is first shortened by sp_sql_shrink (its
 * literal IN lists and VALUES rows left out, so that what is sent
 * fingerprints as the whole text does: 5 long IN lists are one query, not
 * 5), then cut at SP_SQL_MAX bytes if it is still longer. That costs a
 * malloc and one pass over the text, once per long text and process, at
 * prepare time; without memory the text is cut as it is.
 */
static uint64_t sql_id_of(const char *sql, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	size_t i;

	for (i = 0; i < len; i++) {
		h ^= (unsigned char)sql[i];
		h *= 0x100000001b3ULL;
	}
	return h ? h : 1;
}

static uint64_t sql_send(struct sp_thread *t, uint64_t h, const char *sql, size_t len);

/*
 * A statement's text past its shape's first SQLPROF_TEXTS_PER_SHAPE: its
 * id becomes the shape's folded text's (FOLD_MARK and the first such text,
 * sent once). A text seen before (sql_sent: its own records exist) keeps
 * its id. Returns h, or the folded text's id.
 */
static uint64_t sql_fold(struct sp_thread *t, uint64_t h, uint64_t shape, const char *sql,
			 size_t len)
{
	int unsure;
	uint32_t n;
	uint64_t fid;
	char *marked;
	size_t mlen = sizeof(FOLD_MARK) - 1;

	if (idset_find(sql_sent, h, &unsure) || unsure)
		return h;
	n = shape_text_add(shape);
	if (n == 0 || n <= (uint64_t)sp_cfg.texts_per_shape)
		return h;
	if (sp_stats)
		__atomic_fetch_add(&sp_stats->texts_folded, 1, __ATOMIC_RELAXED);
	fid = mix64(shape ^ 0x5f6f6c6465645fULL) | 1; /* never 0 */
	if (idset_find(sql_sent, fid, &unsure))
		return fid;
	marked = malloc(mlen + len + 1);
	if (!marked)
		return sql_send(t, fid, FOLD_MARK, mlen);
	memcpy(marked, FOLD_MARK, mlen);
	memcpy(marked + mlen, sql, len);
	marked[mlen + len] = 0;
	sql_send(t, fid, marked, mlen + len);
	free(marked);
	return fid;
}

/* Note an SQL text for a statement (fold: 1, sql_fold may give it its
 * shape's folded text: then *folded is set) or an exec call (0). */
static uint64_t sql_note_fold(struct sp_thread *t, const char *sql, size_t len, uint64_t *shape,
			      int fold, uint32_t *folded)
{
	uint64_t h = sql_id_of(sql, len), sh = 0;

	if (shape || fold)
		sh = sql_shape(sql, len);
	if (shape)
		*shape = sh;
	if (!t->tid)
		sp_thread_init(t);
	if (fold && sp_cfg.texts_per_shape > 0) {
		uint64_t f = sql_fold(t, h, sh, sql, len);

		if (f != h) {
			*folded = 1;
			return f; /* the folded text's, sent by sql_fold */
		}
	}
	return sql_send(t, h, sql, len);
}

uint64_t sp_sql_note(struct sp_thread *t, const char *sql, size_t len, uint64_t *shape)
{
	return sql_note_fold(t, sql, len, shape, 0, NULL);
}

/* The text's record, unless this process sent it already. Returns h. */
static uint64_t sql_send(struct sp_thread *t, uint64_t h, const char *sql, size_t len)
{
	if (idset_add(sql_sent, h)) {
		char *shrunk = len > SP_SQL_MAX ? malloc(len + 1) : NULL;
		const char *text = sql;
		size_t tlen = len;
		uint32_t n;

		if (shrunk) {
			tlen = sp_sql_shrink(sql, len, shrunk);
			text = shrunk;
		}
		n = tlen > SP_SQL_MAX ? SP_SQL_MAX : (uint32_t)tlen;
		if (atomic_load_explicit(&sp_sql_pending, memory_order_relaxed))
			sp_sql_flush(t);
		if (sql_record(t, h, text, n, len) < 0)
			pending_add(h, text, n, len);
		free(shrunk);
	}
	return h;
}

/*
 * A statement counted in its fingerprint's folded text starts a second
 * execution: it is not a text run once (a dump's INSERT), but one a
 * program keeps and runs again (a statement cache of texts with values
 * in them), whose executions would take the shared record's counter
 * segment from each other (sp_seg_take) at every start. From now on it
 * has its own text and records; the first execution stays in the folded
 * text's (the totals stay exact). Its text is sqlite3_sql's.
 */
void sp_stmt_unfold(struct sp_thread *t, struct sp_stmt *s, sqlite3_stmt *st)
{
	const char *sql = sp_real.sql ? sp_real.sql(st) : NULL;

	s->folded = 0;
	if (!sql)
		return;
	if (sp_stats) /* texts_folded: those only in the folded text */
		__atomic_fetch_sub(&sp_stats->texts_folded, 1, __ATOMIC_RELAXED);
	sp_guard_in(t);
	s->sql_id = sql_send(t, sql_id_of(sql, strlen(sql)), sql, strlen(sql));
	sp_guard_out(t);
	s->agg_caller = ~(uintptr_t)0; /* bound again (sp_exec_begin_slow) */
}

/* Give a statement its SQL id and shape. text, when not NULL, is the SQL
 * the caller passed (legacy sqlite3_prepare keeps no copy for sqlite3_sql). */
static void stmt_fill(struct sp_thread *t, struct sp_stmt *s, sqlite3_stmt *st, const char *text,
		      size_t len)
{
	const char *sql = sp_real.sql ? sp_real.sql(st) : NULL;

	s->folded = 0;
	if (sql)
		s->sql_id = sql_note_fold(t, sql, strlen(sql), &s->shape, 1, &s->folded);
	else if (text)
		s->sql_id = sql_note_fold(t, text, len, &s->shape, 1, &s->folded);
	else
		s->sql_id = sp_sql_note(t, "<statement without SQL text>", 28, &s->shape);
	s->db = sp_real.db_handle ? (uint64_t)(uintptr_t)sp_real.db_handle(st) : 0;
}

void sp_probe_status_once(void)
{
	if (unlikely(atomic_load_explicit(&status_probed, memory_order_relaxed) == 0)) {
		int zero = 0;

		/* one thread probes; the others use the API meanwhile */
		if (atomic_compare_exchange_strong(&status_probed, &zero, 1)) {
			probe_status_layout();
			atomic_store(&status_probed, 2);
		}
	}
}

/*
 * The program registers an automatic extension: SQLite would run it in
 * every connection opened from now on, the probe's private one too (one
 * call more than the program's opens). So probe now, before the
 * extension is registered, and wait for a probe another thread is
 * running. Opening the probe's connection initializes SQLite, which the
 * original sqlite3_auto_extension does first anyway. Nothing when the
 * preload is off or inside our own work (no probe would run then).
 * Extensions registered where no shim sees it (another library's
 * constructor before ours, or past the PLT) still run in the probe.
 */
void sp_probe_before_auto_extension(void)
{
	struct sp_thread *t = &sp_tls;
	int saved = errno;

	NEED();
	if (!sp_hot || sp_guarded(t)) {
		errno = saved;
		return;
	}
	sp_guard_in(t);
	sp_probe_status_once();
	while (atomic_load(&status_probed) == 1) {
		struct timespec ts = { 0, 100000 };

		nanosleep(&ts, NULL);
	}
	sp_guard_out(t);
	errno = saved;
}

/* A successful prepare by the application: track the statement, count
 * the prepare in the thread's query record, capture the plan. */
void sp_stmt_prepared_text(struct sp_thread *t, sqlite3_stmt *st, const char *text, size_t len,
			   uint64_t t0, uint64_t t1)
{
	struct sp_stmt *s;
	struct sp_agg_query *q;

	sp_thread_ready(t);
	sp_guard_in(t);
	sp_probe_status_once();
	s = stmt_insert(st, 1);
	if (!s) {
		atomic_fetch_add_explicit(&sp_untracked, 1, memory_order_relaxed);
		sp_guard_out(t);
		return;
	}
	stmt_fill(t, s, st, text, len);
	q = sp_agg_get(sp_arena_get(t), s->sql_id, SP_KIND_STMT, 0, NULL);
	if (q) {
		q->prepares++;
		q->prepare_time += t1 - t0;
	}
	sp_guard_out(t);
	sp_plan_capture(t, st, s->sql_id, s->shape, s->db);
	sp_modules_maybe_send();
}

/* A statement we did not see prepared (prepared before we were loaded, or
 * inside a libsqlite3 whose internal calls bypass the PLT). */
struct sp_stmt *sp_stmt_adopt(struct sp_thread *t, sqlite3_stmt *st)
{
	struct sp_stmt *s = stmt_insert(st, 0);
	int saved;

	if (!s) {
		atomic_fetch_add_explicit(&sp_untracked, 1, memory_order_relaxed);
		return NULL;
	}
	saved = errno; /* before the original step: its text's record */
	sp_guard_in(t);
	stmt_fill(t, s, st, NULL, 0);
	sp_guard_out(t);
	errno = saved;
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

/* The object file holding pc, as its dl_iterate_phdr name. */
struct file_of {
	uintptr_t pc;
	const char *name;
};

static int file_of_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct file_of *f = arg;
	int i;

	(void)size;
	for (i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;

		if (ph->p_type == PT_LOAD && f->pc >= lo && f->pc < lo + ph->p_memsz) {
			f->name = info->dlpi_name;
			return 1;
		}
	}
	return 0;
}

/* The name, device and inode of the libsqlite3 file holding sp_real.step:
 * 0, or -1 when not known (the program itself, or no such file). */
static int lib_file(const char **name, unsigned long long *dev, unsigned long long *ino)
{
	struct file_of f = { (uintptr_t)sp_real.step, NULL };
	struct stat st;

	dl_iterate_phdr(file_of_cb, &f);
	if (!f.name || !*f.name || stat(f.name, &st) < 0)
		return -1;
	*name = f.name;
	*dev = (unsigned long long)st.st_dev;
	*ino = (unsigned long long)st.st_ino;
	return 0;
}

/* The layout sqlprof record found for its own libsqlite3, when ours is the
 * same file (device and inode): -1 otherwise. */
static int layout_from_env(int have_file, unsigned long long fdev, unsigned long long fino)
{
	const char *env = getenv(SP_ENV_STATUS_LAYOUT);
	unsigned long long dev, ino;
	int off;

	if (!env || sscanf(env, "%d:%llu:%llu", &off, &dev, &ino) != 3 || off < 0 || off > 65536)
		return -1;
	if (!have_file || dev != fdev || ino != fino)
		return -1;
	return off;
}

#define PROBE_SYM(h, field, name) (*(void **)&api.field = dlsym(h, name))

/*
 * Find where this libsqlite3 keeps its statement counters (sp_probe.h)
 * and its statements' bound values (sp_probe_params, for params.c):
 * handed over by sqlprof record when it is the same library file, else
 * probed here, both on one private connection. Called at the first
 * prepare, when the application has initialised SQLite (we never
 * initialise it first: that would break its sqlite3_config calls).
 * SQLPROF_STATUS=api skips the counters' probe.
 */
static void probe_status_layout(void)
{
	struct sp_probe_api api = {
		.open_v2 = sp_real.open_v2,
		.close = sp_real.close,
		.prepare_v2 = sp_real.prepare_v2,
		.step = sp_real.step,
		.reset = sp_real.reset,
		.finalize = sp_real.finalize,
		.stmt_status = sp_real.stmt_status,
		.bind_parameter_count = sp_real.bind_parameter_count,
	};
	const char *env = getenv("SQLPROF_STATUS");
	int counters = !(env && !strcmp(env, "api")), params, have_file, off = -1;
	unsigned long long dev = 0, ino = 0;
	const char *name = NULL;
	sqlite3 *db;
	void *h = NULL;

	have_file = lib_file(&name, &dev, &ino) == 0;
	if (counters)
		off = layout_from_env(have_file, dev, ino);
	params = sp_params_probe_wanted(dev, ino, have_file);
	if ((!counters || off >= 0) && !params)
		goto done;
	/* not interposed: the primary library's own, from the object that
	 * holds sp_real.step (another SQLite may come first in the global
	 * scope), else through RTLD_NEXT or libsqlite3.so.0's handle */
	if (have_file && sp_real.dlopen)
		h = sp_real.dlopen(name, RTLD_LAZY | RTLD_NOLOAD);
	if (!h && dlsym(RTLD_NEXT, "sqlite3_db_config") && dlsym(RTLD_NEXT, "sqlite3_msize"))
		h = RTLD_NEXT;
	if (!h && sp_real.dlopen)
		h = sp_real.dlopen("libsqlite3.so.0", RTLD_LAZY | RTLD_NOLOAD);
	if (!h) {
		if (params)
			sp_params_probe(&api, NULL); /* fails: the text */
		goto done;
	}
	PROBE_SYM(h, db_config, "sqlite3_db_config");
	PROBE_SYM(h, msize, "sqlite3_msize");
	PROBE_SYM(h, bind_int64, "sqlite3_bind_int64");
	PROBE_SYM(h, bind_double, "sqlite3_bind_double");
	PROBE_SYM(h, bind_text, "sqlite3_bind_text");
	PROBE_SYM(h, bind_blob, "sqlite3_bind_blob");
	PROBE_SYM(h, bind_null, "sqlite3_bind_null");
	PROBE_SYM(h, bind_zeroblob, "sqlite3_bind_zeroblob");
	PROBE_SYM(h, clear_bindings, "sqlite3_clear_bindings");
	db = sp_probe_open(&api);
	if (counters && off < 0)
		off = sp_probe_counters_db(&api, db);
	if (params)
		sp_params_probe(&api, db);
	if (db)
		api.close(db);
done:
	if (off >= 0)
		atomic_store_explicit(&sp_status_off, off, memory_order_release);
}
