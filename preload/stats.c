/* SPDX-License-Identifier: MIT */
/*
 * stats.c - the shared statistics: exact totals by construction.
 *
 * A process image keeps the totals of every execution in one memfd (the
 * layout is in sp_wire.h), sent to the collector with HELLO and kept open
 * here (above descriptor 800) so that it can be sent again. Each thread
 * writes into its own arena of chunks, so the hot path updates its query
 * records with plain stores; the collector reads them whenever it likes,
 * also after the process died. No record travels for an ordinary
 * execution, and nothing here waits for the collector.
 *
 * What this file does not do: decide what an execution is (hot.c, exec.c)
 * or send anything (stream.c).
 *
 * Memory: the memfd is sized once (SQLPROF_STATS_MB, 512 MiB by default,
 * halved until the mapping succeeds) and is sparse: pages exist only once
 * written. A query record is 320 bytes, a histogram block 264 bytes (a
 * query whose db times span a factor of 16 needs one or two), so a thread
 * that runs 10,000 distinct SQL texts uses about 5.8 MiB.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sp_preload.h"

#define CHUNK SP_STATS_CHUNK
#ifndef F_SEAL_FUTURE_WRITE
#define SP_SEAL_FUTURE_WRITE 0x0010 /* Linux 5.1 */
#else
#define SP_SEAL_FUTURE_WRITE F_SEAL_FUTURE_WRITE
#endif
#define ARENA_NONE \
	1 /* the arena_id of a thread without an arena: no
		      * statement is ever bound to it */

struct sp_stats_hdr *sp_stats;
/* t->loop_q when no run is open: never a statement's record, nor NULL (a
 * statement with no record has agg NULL; end_plain's run test must fail
 * for it before anything is read through it) */
struct sp_agg_query sp_no_loop;
static uint8_t *stats_base;
static size_t stats_size;
static int stats_fd = -1;
static dev_t stats_dev;
static ino_t stats_ino;
static _Atomic uint32_t next_chunk;
static atomic_uint arena_numbers;

/* The first page of the statistics of the nearest ancestor that shared
 * its own with the collector (kept mapped by the fork handler), where an
 * image that cannot report counts itself; NULL in an image started by
 * exec. */
static struct sp_stats_hdr *inherited_hdr;
#define HDR_PAGE 4096

static pthread_mutex_t arena_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sp_arena *arenas, *idle_arenas;
static pthread_key_t arena_key;
static int arena_key_ok;

/* One entry of an arena's private index: (sql_id, kind, caller) -> record. */
struct sp_aslot {
	uint64_t sql_id;
	uint32_t kind, used;
	uint64_t caller;
	struct sp_agg_query *q;
};

/* The table is indexed by the low bits: mixed (murmur3's finalizer), since
 * sql_id is FNV-1a, whose low bits follow the text's last bytes' low bits:
 * a dump restore's 100,000 INSERT texts, differing in digits, fell in
 * long clusters (sp_agg_get 15 % of the restore's CPU) */
static inline size_t aslot_hash(uint64_t sql_id, uint32_t kind, uint64_t caller)
{
	uint64_t k = sql_id ^ kind ^ (caller * 0x9E3779B97F4A7C15ULL);

	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdULL;
	k ^= k >> 33;
	k *= 0xc4ceb9fe1a85ec53ULL;
	k ^= k >> 33;
	return (size_t)k;
}

static void *map_private(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

/*
 * Create this image's statistics: a sealed memfd mapped shared, or, when
 * memfd_create is refused, anonymous shared memory that no collector can
 * see (the totals are then kept but not delivered; BYE says so). Returns
 * 0, or -1 with no statistics at all.
 */
int sp_stats_init(void)
{
	long mb = 512;
	int fsize_cut = 0, as_cut = 0;
	const char *env = getenv("SQLPROF_STATS_MB");
	size_t size;
	void *m = MAP_FAILED;
	int fd;

	if (env && *env) {
		char *end;
		long v;

		errno = 0;
		v = strtol(env, &end, 10);
		if (errno || *end || v < 1 || v > 4095)
			sp_warn_bad("SQLPROF_STATS_MB", env, "expected an integer from 1 to 4095");
		else
			mb = v;
	}
	size = (size_t)mb << 20;
	{
		/* Under an address-space limit (ulimit -v, RLIMIT_AS) the
		 * mapping is the program's room too: at most a sixteenth of
		 * the limit (a program that maps 600 MiB under 1 GiB must not
		 * fail only under sqlprof: issue 23). Texts past what fits are
		 * folded, their totals exact (agg_get); SP_SEEN_ASLIMIT says so. */
		struct rlimit rl;

		if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
			size_t cap = (size_t)(rl.rlim_cur / 16);

			if (size > cap) {
				while (size > cap && size > ((size_t)1 << 20))
					size /= 2;
				as_cut = 1;
			}
		}
	}
	/* MFD_CLOEXEC | MFD_ALLOW_SEALING */
	fd = (int)syscall(SYS_memfd_create, "sqlprof-stats", 1u | 2u);
	if (fd >= 0) {
		struct stat st;
		int hi;

		/* within RLIMIT_FSIZE (a larger size raises SIGXFSZ: issue
		 * 23), said (SP_SEEN_FSIZE, below) when that made it smaller */
		uint64_t room = sp_fsize_room();

		for (; size >= ((size_t)1 << 20); size /= 2) {
			if ((uint64_t)size > room) {
				fsize_cut = 1;
				continue;
			}
			if (ftruncate(fd, (off_t)size) < 0)
				continue;
			m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
			if (m != MAP_FAILED)
				break;
		}
		if (m == MAP_FAILED || ftruncate(fd, (off_t)size) < 0) {
			if (m != MAP_FAILED)
				munmap(m, size);
			m = MAP_FAILED;
			close(fd);
			fd = -1;
		} else {
			/* the collector maps it too: never shrunk under it;
			 * and written only through the mapping made above
			 * (F_SEAL_FUTURE_WRITE: no process, the collector
			 * included, can map it writable or write to it; the
			 * hot path follows addresses kept in it: docs/design.md,
			 * "Threat model"). A kernel without that seal (before
			 * 5.1) gets no shared statistics: copies at exit. */
			if (fcntl(fd, F_ADD_SEALS,
				  F_SEAL_SHRINK | F_SEAL_GROW | SP_SEAL_FUTURE_WRITE) < 0) {
				close(fd);
				fd = -1;
			}
			/* out of the program's way; with no room that high, do
			 * without it (the mapping stays): the totals then go as
			 * copies at exit, as without memfd */
			hi = fd < 0 ? -1 : sp_fd_high(fd);
			if (hi < 0) {
				if (fd >= 0)
					close(fd);
				fd = -1;
			} else {
				fd = hi;
			}
			if (fd >= 0 && fstat(fd, &st) == 0) {
				stats_dev = st.st_dev;
				stats_ino = st.st_ino;
			}
		}
	}
	if (m == MAP_FAILED) {
		for (size = (size_t)mb << 20; size >= ((size_t)1 << 20); size /= 2) {
			m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1,
				 0);
			if (m != MAP_FAILED)
				break;
		}
		if (m == MAP_FAILED)
			return -1;
	}
	stats_fd = fd;
	stats_base = m;
	stats_size = size;
	atomic_store(&next_chunk, 1);
	sp_stats = m;
	sp_stats->magic = SP_STATS_MAGIC;
	sp_stats->version = SP_WIRE_VERSION;
	sp_stats->pid = (uint32_t)getpid();
	sp_stats->chunk_size = CHUNK;
	sp_stats->size = size;
	sp_stats->base = (uint64_t)(uintptr_t)m;
	sp_stats->seen = (sp_env_bad ? SP_SEEN_BAD_ENV : 0) | (fsize_cut ? SP_SEEN_FSIZE : 0) |
			 (as_cut ? SP_SEEN_ASLIMIT : 0);
	__atomic_store_n(&sp_stats->nchunks, 1, __ATOMIC_RELEASE);
	return 0;
}

uint32_t sp_stats_ino_lo(void)
{
	return stats_fd >= 0 ? (uint32_t)stats_ino : 0;
}

/* The memfd, while it is still ours (the program may have closed it). */
int sp_stats_fd(void)
{
	struct stat st;

	if (stats_fd < 0 || fstat(stats_fd, &st) < 0 || st.st_dev != stats_dev ||
	    st.st_ino != stats_ino)
		return -1;
	return stats_fd;
}

/* A fresh chunk for arena number, or NULL when the memfd is full. */
static struct sp_stats_chunk *chunk_take(uint32_t number)
{
	uint32_t n = atomic_fetch_add(&next_chunk, 1), cur;
	struct sp_stats_chunk *c;

	if (!sp_stats || (uint64_t)(n + 1) * CHUNK > stats_size)
		return NULL;
	c = (struct sp_stats_chunk *)(stats_base + (size_t)n * CHUNK);
	c->magic = SP_CHUNK_MAGIC;
	c->arena = number;
	__atomic_store_n(&c->used, (uint32_t)sizeof(*c), __ATOMIC_RELEASE);
	cur = __atomic_load_n(&sp_stats->nchunks, __ATOMIC_RELAXED);
	while (cur < n + 1 && !__atomic_compare_exchange_n(&sp_stats->nchunks, &cur, n + 1, 0,
							   __ATOMIC_RELEASE, __ATOMIC_RELAXED))
		;
	return c;
}

/* len bytes for a new record of a (zeroed: chunks are fresh memory), or
 * NULL. The record is published by arena_publish once filled. */
static void *arena_reserve(struct sp_arena *a, uint32_t len)
{
	void *p;

	if (a->free + len > a->end) {
		struct sp_stats_chunk *c = chunk_take(a->number);

		if (!c)
			return NULL;
		a->chunk = c;
		a->free = (uint8_t *)c + sizeof(*c);
		a->end = (uint8_t *)c + CHUNK;
	}
	p = a->free;
	a->free += len;
	return p;
}

static void arena_publish(struct sp_arena *a)
{
	__atomic_store_n(&a->chunk->used, (uint32_t)(a->free - (uint8_t *)a->chunk),
			 __ATOMIC_RELEASE);
}

static int tab_grow(struct sp_arena *a)
{
	size_t cap = a->tab_cap ? a->tab_cap * 2 : 1024, i;
	struct sp_aslot *nt = map_private(cap * sizeof(*nt));

	if (!nt)
		return -1;
	for (i = 0; i < a->tab_cap; i++) {
		struct sp_aslot *e = &a->tab[i];
		size_t j;

		if (!e->used)
			continue;
		for (j = aslot_hash(e->sql_id, e->kind, e->caller) & (cap - 1); nt[j].used;
		     j = (j + 1) & (cap - 1))
			;
		nt[j] = *e;
	}
	if (a->tab)
		munmap(a->tab, a->tab_cap * sizeof(*a->tab));
	a->tab = nt;
	a->tab_cap = cap;
	return 0;
}

/*
 * A signal handler that runs SQLite on the thread it interrupted may come
 * here while the thread itself is half-way through changing its arena
 * (a record made, the table grown: issue 23). Each change marks the arena
 * busy (arena_enter); a handler's call that finds it busy makes nothing:
 * its execution is counted as unattributed (sp_agg_get's NULL), its
 * histogram value in hist_lost, its error code in errors alone.
 */
static int arena_enter(struct sp_arena *a)
{
	if (!a || a->busy)
		return -1;
	a->busy = 1;
	atomic_signal_fence(memory_order_seq_cst);
	return 0;
}

static void arena_leave(struct sp_arena *a)
{
	atomic_signal_fence(memory_order_seq_cst);
	a->busy = 0;
}

/* The statements' fold record gets its whole histogram with it (16
 * blocks, 4.2 KB an arena, sparse until used): when it is used, nothing
 * else has room. Exec calls' fold record keeps count and times only. */
static void fold_hist(struct sp_arena *a, struct sp_agg_query *q)
{
	uint32_t b;

	for (b = 0; q && b < SP_HIST_BLOCKS; b++) {
		struct sp_agg_hist *h = arena_reserve(a, sizeof(*h));

		if (!h)
			return;
		h->h.type = SP_AGG_HIST;
		h->h.flags = (uint16_t)b;
		h->h.len = sizeof(*h);
		arena_publish(a);
		q->hist[b] = (uint64_t)(uintptr_t)h;
	}
}

/* A new query record in a's chunks, published; NULL without room. */
static struct sp_agg_query *agg_new(struct sp_arena *a, uint64_t sql_id, uint32_t kind,
				    uint64_t caller)
{
	struct sp_agg_query *q = arena_reserve(a, sizeof(*q));

	if (!q)
		return NULL;
	q->h.type = SP_AGG_QUERY;
	q->h.len = sizeof(*q);
	q->kind = kind;
	q->sql_id = sql_id;
	q->caller = caller;
	q->min = UINT64_MAX;
	arena_publish(a);
	return q;
}

static struct sp_agg_query *agg_get(struct sp_arena *a, uint64_t sql_id, uint32_t kind,
				    uint64_t caller, int *created)
{
	struct sp_agg_query *q;
	size_t j;

	/* no room for a record of its own: the arena's fold record of its kind */
	struct sp_agg_query *fold = kind <= SP_KIND_EXEC ? a->fold[kind] : NULL;

	if ((a->tab_used + 1) * 2 > a->tab_cap && tab_grow(a) < 0 && !a->tab)
		return fold;
	for (j = aslot_hash(sql_id, kind, caller) & (a->tab_cap - 1); a->tab[j].used;
	     j = (j + 1) & (a->tab_cap - 1))
		if (a->tab[j].sql_id == sql_id && a->tab[j].kind == kind &&
		    a->tab[j].caller == caller)
			return a->tab[j].q;
	if (a->tab_used + 1 >= a->tab_cap)
		return fold; /* could not grow, and full */
	q = agg_new(a, sql_id, kind, caller);
	if (!q)
		return fold;
	a->tab[j].sql_id = sql_id;
	a->tab[j].kind = kind;
	a->tab[j].caller = caller;
	a->tab[j].used = 1;
	if (created)
		*created = 1;
	a->tab[j].q = q;
	a->tab_used++;
	return q;
}

struct sp_agg_query *sp_agg_get(struct sp_arena *a, uint64_t sql_id, uint32_t kind, uint64_t caller,
				int *created)
{
	struct sp_agg_query *q;

	if (created)
		*created = 0;
	if (arena_enter(a) < 0)
		return NULL;
	q = agg_get(a, sql_id, kind, caller, created);
	arena_leave(a);
	return q;
}

/* Histogram block `block` of q, made now (its first value); NULL when
 * there is no room (the value is counted in hist_lost). */
uint64_t *sp_agg_hist_block(struct sp_agg_query *q, uint32_t block)
{
	struct sp_arena *a = sp_tls.arena /* only the owner adds to its records */;
	struct sp_agg_hist *h;

	if (block >= SP_HIST_BLOCKS || arena_enter(a) < 0)
		return NULL;
	h = arena_reserve(a, sizeof(*h));
	if (!h) {
		arena_leave(a);
		return NULL;
	}
	h->h.type = SP_AGG_HIST;
	h->h.flags = (uint16_t)block;
	h->h.len = sizeof(*h);
	arena_publish(a);
	q->hist[block] = (uint64_t)(uintptr_t)h;
	arena_leave(a);
	return h->bucket;
}

void sp_agg_error(struct sp_agg_query *q, int rc)
{
	struct sp_agg_errs *e = (struct sp_agg_errs *)(uintptr_t)q->errs;
	int i;

	if (!e) {
		struct sp_arena *a = sp_tls.arena /* only the owner adds to its records */;

		if (arena_enter(a) < 0)
			return; /* the failure is still in q->errors */
		e = arena_reserve(a, sizeof(*e));
		if (!e) {
			arena_leave(a);
			return;
		}
		e->h.type = SP_AGG_ERRS;
		e->h.len = sizeof(*e);
		arena_publish(a);
		q->errs = (uint64_t)(uintptr_t)e;
		arena_leave(a);
	}
	for (i = 0; i < SP_AGG_ERR_CODES; i++) {
		if (e->code[i].rc == rc && e->code[i].count) {
			e->code[i].count++;
			return;
		}
		if (!e->code[i].count) {
			e->code[i].rc = rc;
			e->code[i].count = 1;
			return;
		}
	}
	e->other++;
}

/*
 * SQLite's counters in segments (sp_wire.h, seg_*). A transaction: the
 * record's figure so far goes to the shadow, seg_gen turns odd, the open
 * segment is added to the sums and a new one opens at open (NULL: closed,
 * at its last end) for owner, and seg_gen turns even. A reader that sees
 * seg_gen odd (a live one mid-way, or the record of a process that died
 * there) takes the shadow; one that sees it change reads again.
 */
static void seg_move(struct sp_agg_query *q, const uint32_t *open, uint64_t owner)
{
	uint32_t v[4], now[4];
	int i;

	for (i = 0; i < 4; i++)
		v[i] = q->seg_cur[i] - q->seg_base[i];
	memcpy(now, open ? open : q->seg_cur, sizeof(now));
	q->seg_shadow_sums[0] = q->fullscan_steps;
	q->seg_shadow_sums[1] = q->sorts;
	q->seg_shadow_sums[2] = q->autoindex;
	q->seg_shadow_sums[3] = q->vm_steps;
	memcpy(q->seg_shadow_open, v, sizeof(v));
	__atomic_store_n(&q->seg_gen, q->seg_gen + 1, __ATOMIC_RELEASE);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	q->fullscan_steps += v[0];
	q->sorts += v[1];
	q->autoindex += v[2];
	q->vm_steps += v[3];
	memcpy(q->seg_base, now, sizeof(now));
	memcpy(q->seg_cur, now, sizeof(now));
	q->seg_owner = owner;
	__atomic_store_n(&q->seg_gen, q->seg_gen + 1, __ATOMIC_RELEASE);
}

void sp_seg_take(struct sp_thread *t, struct sp_agg_query *q, struct sp_stmt *s, sqlite3_stmt *st)
{
	struct sp_stmt *prev = (struct sp_stmt *)(uintptr_t)q->seg_owner;
	sp_v4u now = sp_status_read(st);
	uint32_t open[4];

	if (prev && prev != s && prev->agg == q && prev->agg_arena == t->arena_id) {
		/* still bound here (a slot is never unmapped, whatever it holds
		 * now): it starts through exec.c next, and takes the segment
		 * back; an execution of it in progress ends outside it, from
		 * its counters at start, which are the segment's last end */
		prev->agg_tag = 0;
		if (prev->exec.start && !(prev->exec.flags & SP_RUN_NOSEG)) {
			memcpy(prev->exec.base, q->seg_cur, sizeof(prev->exec.base));
			prev->exec.flags |= SP_RUN_NOSEG;
		}
	}
	memcpy(open, &now, sizeof(open));
	seg_move(q, open, (uint64_t)(uintptr_t)s);
}

int sp_seg_status_reset(struct sp_thread *t, struct sp_agg_query *q, struct sp_stmt *s,
			sqlite3_stmt *st, int op)
{
	sp_v4u now = sp_status_read(st);
	int rc;

	/* everything so far is the segment's, an execution in progress
	 * included; it goes on from the counters after the reset */
	memcpy(q->seg_cur, &now, sizeof(q->seg_cur));
	rc = sp_real.stmt_status(st, op, 1);
	sp_seg_take(t, q, s, st);
	return rc;
}

void sp_seg_close(struct sp_agg_query *q)
{
	seg_move(q, NULL, 0);
}

void sp_seg_fold(struct sp_agg_query *q)
{
	seg_move(q, NULL, q->seg_owner);
}

int sp_seg_fold_rc(struct sp_agg_query *q, int rc)
{
	sp_seg_fold(q);
	return rc;
}

/* Credit a closed loop of len executions to q. */
static void loop_credit(struct sp_agg_query *q, uint64_t len)
{
	q->runs++;
	if (len > q->max_run)
		q->max_run = len;
	if (len >= 2) {
		struct sp_agg_loops *r = (struct sp_agg_loops *)(uintptr_t)q->loops_by_len;

		if (!r) {
			struct sp_arena *a = sp_tls.arena /* only the owner adds to its records */;

			if (arena_enter(a) < 0)
				return; /* counted in runs and max_run only */
			r = arena_reserve(a, sizeof(*r));
			if (!r) {
				arena_leave(a);
				return;
			}
			r->h.type = SP_AGG_LOOPS;
			r->h.len = sizeof(*r);
			arena_publish(a);
			q->loops_by_len = (uint64_t)(uintptr_t)r;
			arena_leave(a);
		}
		r->by_len[sp_loop_len_bucket(len)]++;
	}
}

/*
 * A top-level execution of q (whose text has shape shape) ended and q is
 * not the open loop's record (or started too long after the run's last
 * execution ended): the same shape (the same SQL but for its literals),
 * started within sp_cfg.loop_gap, goes on with the loop, now credited to q; anything else closes
 * the run and opens one of q.
 */
void sp_loop_switch(struct sp_thread *t, struct sp_agg_query *q, uint64_t shape, uint64_t start)
{
	struct sp_arena *a = t->arena;

	if (!a)
		return;
	/* A pause longer than loop_gap ends the loop, unless the run has
	 * pauses to spare: one, and one more per 16 executions. A thread
	 * preempted inside a caller's loop (a loaded machine: make check)
	 * keeps its loop; a service loop, every execution after a pause,
	 * makes runs of 2 at most. */
	struct sp_agg_query *old = t->loop_q;

	if (old != &sp_no_loop && a->loop_shape == shape &&
	    (start < old->loop_until || t->loop_pauses < 1 + old->loop_open / 16)) {
		uint64_t len = old->loop_open + 1;

		if (start >= old->loop_until)
			t->loop_pauses++;
		/* the loop moves to q: there first, so that a reader never
		 * misses it (it may see it twice for a moment) */
		if (old != q) {
			q->loop_open = len;
			old->loop_open = 0;
			old->loop_until = 0;
			t->loop_q = q;
		} else {
			q->loop_open = len;
		}
		return;
	}
	if (old != &sp_no_loop) {
		loop_credit(old, old->loop_open);
		old->loop_open = 0;
		old->loop_until = 0;
	}
	a->loop_shape = shape;
	t->loop_pauses = 0;
	q->loop_open = 1;
	t->loop_q = q;
}

/* Close the thread's open loop (thread exit: the arena goes to another). */
void sp_loop_close(struct sp_thread *t)
{
	struct sp_arena *a = t->arena;

	if (!a || t->loop_q == &sp_no_loop)
		return;
	loop_credit(t->loop_q, t->loop_q->loop_open);
	t->loop_q->loop_open = 0;
	t->loop_q->loop_until = 0;
	t->loop_q = &sp_no_loop;
}

/* Thread exit: close its loop; the arena waits for the next new thread. */
static void arena_gone(void *arg)
{
	struct sp_arena *a = arg;
	struct sp_thread *t = &sp_tls;

	if (t->arena == a)
		sp_loop_close(t);
	t->arena = NULL;
	t->arena_id = ARENA_NONE;
	t->arena_tag = 0;
	pthread_mutex_lock(&arena_lock);
	a->next_idle = idle_arenas;
	idle_arenas = a;
	pthread_mutex_unlock(&arena_lock);
}

struct sp_arena *sp_arena_get(struct sp_thread *t)
{
	struct sp_arena *a;
	struct sp_agg_arena *rec;

	if (t->arena)
		return t->arena;
	t->arena_id = ARENA_NONE;
	t->arena_tag = 0;
	if (!sp_stats)
		return NULL;
	pthread_mutex_lock(&arena_lock);
	if (!arena_key_ok)
		arena_key_ok = pthread_key_create(&arena_key, arena_gone) == 0 ? 1 : -1;
	a = idle_arenas;
	if (a)
		idle_arenas = a->next_idle;
	pthread_mutex_unlock(&arena_lock);
	if (!a) {
		a = map_private(sizeof(*a));
		if (!a)
			return NULL;
		a->number = atomic_fetch_add(&arena_numbers, 1) + 1;
		a->id = (uint64_t)sp_my_pid() << 32 | a->number;
		a->tag = a->number < 65536 ? (uint64_t)a->number << 48 : 0;
		rec = arena_reserve(a, sizeof(*rec));
		if (!rec) {
			munmap(a, sizeof(*a));
			return NULL;
		}
		rec->h.type = SP_AGG_ARENA;
		rec->h.len = sizeof(*rec);
		rec->arena = a->number;
		rec->tid = t->tid;
		arena_publish(a);
		a->sh = rec;
		/* made now, in the arena's first chunk: there when nothing
		 * else has room any more */
		a->fold[SP_KIND_STMT] = agg_new(a, SP_SQL_FOLDED, SP_KIND_STMT, 0);
		a->fold[SP_KIND_EXEC] = agg_new(a, SP_SQL_FOLDED, SP_KIND_EXEC, 0);
		fold_hist(a, a->fold[SP_KIND_STMT]);
		pthread_mutex_lock(&arena_lock);
		a->next = arenas;
		arenas = a;
		pthread_mutex_unlock(&arena_lock);
	}
	if (arena_key_ok > 0)
		pthread_setspecific(arena_key, a);
	t->arena = a;
	t->arena_id = a->id;
	t->arena_tag = a->tag;
	t->loop_q = &sp_no_loop;
	return a;
}

void sp_stats_count_unreported(void)
{
	if (inherited_hdr)
		__atomic_fetch_add(&inherited_hdr->unreported, 1, __ATOMIC_RELAXED);
}

void sp_stats_unattributed(void)
{
	if (sp_stats)
		__atomic_fetch_add(&sp_stats->unattributed, 1, __ATOMIC_RELAXED);
}

void sp_stats_note_deepbind_late(void)
{
	if (sp_stats)
		__atomic_fetch_add(&sp_stats->deepbind_late, 1, __ATOMIC_RELAXED);
}

void sp_stats_note_foreign_lib(void)
{
	if (sp_stats)
		__atomic_fetch_add(&sp_stats->foreign_libs, 1, __ATOMIC_RELAXED);
}

void sp_stats_note_seen(uint32_t bits)
{
	if (sp_stats)
		__atomic_fetch_or(&sp_stats->seen, bits, __ATOMIC_RELAXED);
}

/* Executions counted so far, for BYE: every arena's records. */
uint64_t sp_stats_executions(void)
{
	struct sp_arena *a;
	uint64_t n = 0;
	int locked = pthread_mutex_trylock(&arena_lock) == 0;

	for (a = arenas; a; a = a->next)
		for (size_t i = 0; i < a->tab_cap; i++)
			if (a->tab[i].used)
				n += a->tab[i].q->count;
	if (locked)
		pthread_mutex_unlock(&arena_lock);
	if (sp_stats)
		n += sp_stats->unattributed;
	return n;
}

/*
 * In the child after fork() (async-signal-safe work only): the statistics
 * are the parent's. Let go of them - the mapping is not marked
 * MADV_DONTFORK, so that a child made by a raw clone(), which runs no
 * fork handler, finds memory there rather than a hole - and start afresh
 * at the next execution (sp_stream_child_start).
 */
void sp_stats_fork_child(void)
{
	struct sp_arena *a, *next;
	struct sp_stats_hdr *keep = inherited_hdr;

	/* the page this child counts itself in if it cannot report: the
	 * parent's header when the collector has it, else the parent's own
	 * inherited one */
	if (stats_base && sp_stats_shared && stats_fd >= 0 && stats_size > HDR_PAGE)
		keep = (struct sp_stats_hdr *)(void *)stats_base;
	if (inherited_hdr && inherited_hdr != keep)
		munmap(inherited_hdr, HDR_PAGE);
	inherited_hdr = keep;
	if (stats_base && keep == (struct sp_stats_hdr *)(void *)stats_base)
		munmap(stats_base + HDR_PAGE, stats_size - HDR_PAGE);
	else if (stats_base)
		munmap(stats_base, stats_size);
	if (sp_stats_fd() >= 0)
		close(stats_fd);
	stats_fd = -1;
	stats_base = NULL;
	sp_stats = NULL;
	for (a = arenas; a; a = next) {
		next = a->next;
		if (a->tab)
			munmap(a->tab, a->tab_cap * sizeof(*a->tab));
		munmap(a, sizeof(*a));
	}
	arenas = idle_arenas = NULL;
	pthread_mutex_init(&arena_lock, NULL);
	if (arena_key_ok > 0)
		pthread_setspecific(arena_key, NULL);
	sp_tls.arena = NULL;
	sp_tls.arena_id = ARENA_NONE;
	sp_tls.arena_tag = 0;
	sp_tls.loop_q = &sp_no_loop;
}

void sp_exec_clamp_slow(struct sp_exec *r, uint64_t *end)
{
	if ((int64_t)(*end - r->start) < 0)
		*end = r->start;
	if (r->db > *end - r->start)
		r->db = *end - r->start;
	if (sp_stats)
		__atomic_fetch_add(&sp_stats->clamped, 1, __ATOMIC_RELAXED);
}
