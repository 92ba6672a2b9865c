/* SPDX-License-Identifier: MIT */
/*
 * collect-stats.c - the images' shared statistics (sp_wire.h): mapped
 * when an image sends its memfd, merged into the queries when the image
 * is over (collect.h: sp_coll_stats_add, sp_coll_stats_merge,
 * sp_coll_stats_retire, sp_coll_finish). Every record is checked before
 * it is read: the writer is never trusted with an address or a length.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <linux/magic.h>
#include <unistd.h>

#include "collect-int.h"
#include "hash.h"

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

/* One image's statistics being merged (sp_coll_stats_merge). */
struct merge {
	struct sp_coll *c;
	struct sp_proc *p;
	uint32_t pid;
	struct sp_proc conv; /* the image's clock, for to_ns */
	const uint8_t *map;
	struct sp_stats_hdr h;
	/* each chunk's published length, read once, when first needed
	 * (chunk_used; UNREAD before) */
	uint32_t *used, nchunks;
	struct hmap started; /* sql_id -> executions started - ended (mod 2^32) */
	/* chunks before dropped were let go of (c->stats_drop); cur is being
	 * merged; [ref_lo, ref_hi) holds the chunks outside [dropped, cur]
	 * read by a reference since */
	uint32_t dropped, cur, ref_lo, ref_hi;
};

#define UNREAD UINT32_MAX

/* Chunk ci read outside [dropped, cur]: let go of with the next batch
 * (merge_drop). */
static void merge_touched(struct merge *mg, uint32_t ci)
{
	if (ci >= mg->dropped && ci <= mg->cur)
		return;
	if (mg->ref_hi == 0 || ci < mg->ref_lo)
		mg->ref_lo = ci;
	if (ci + 1 > mg->ref_hi)
		mg->ref_hi = ci + 1;
}

/* The published length of chunk ci (1 <= ci < nchunks), 0 when it is not
 * one, read from its header the first time. Read as the chunks are merged
 * or referred to, not in a pass of their own before: reading a header maps
 * the whole chunk (the kernel's fault-around: 64 KB), and at 200,000
 * fingerprints that pass faulted in all 512 MB of the statistics once more
 * (8,000 page faults) only for them to be let go of again. */
static uint32_t chunk_used(struct merge *mg, uint32_t ci)
{
	const struct sp_stats_chunk *ch;
	uint32_t u;

	if (mg->used[ci] != UNREAD)
		return mg->used[ci];
	ch = (const void *)(mg->map + (size_t)ci * SP_STATS_CHUNK);
	u = __atomic_load_n(&ch->used, __ATOMIC_ACQUIRE);
	if (ch->magic != SP_CHUNK_MAGIC || u < sizeof(*ch) || u > SP_STATS_CHUNK || u % 8) {
		if (ch->magic || u)
			mg->p->stats_bad++;
		u = 0;
	}
	mg->used[ci] = u;
	merge_touched(mg, ci);
	return u;
}

/* The offset in [0, size) of a writer's address, when it names a whole
 * record of type type and len bytes inside a published part of a chunk;
 * else SIZE_MAX. */
static size_t stats_ref(struct merge *mg, uint64_t addr, size_t len)
{
	uint64_t base = mg->h.base, off = addr - base, ci, in;

	if (!addr || addr < base || off % 8)
		return SIZE_MAX;
	ci = off / SP_STATS_CHUNK;
	in = off % SP_STATS_CHUNK;
	if (ci == 0 || ci >= mg->nchunks || in < sizeof(struct sp_stats_chunk) ||
	    in + len > chunk_used(mg, (uint32_t)ci))
		return SIZE_MAX;
	return (size_t)off;
}

/* The text of a placeholder query (SP_SQL_UNATTRIBUTED, SP_SQL_FOLDED),
 * made the first time it is met. */
static void placeholder_text(struct sp_coll *c, uint64_t id, const char *text, size_t len)
{
	int created;
	struct sp_sql *s = hmap_get(&c->sqls, &id, 1, &created);

	if (s && created) {
		s->text = dup_n((const uint8_t *)text, len);
		s->full_len = (uint32_t)len;
	}
}

/* The header's counters: the process's (maxima, bits) and executions
 * counted with no query (under one of their own: the totals add up). */
static void merge_header(struct merge *mg)
{
	struct sp_proc *p = mg->p;
	const struct sp_stats_hdr *h = &mg->h;

	p->unattributed += h->unattributed;
	if (h->foreign_libs > p->foreign_libs)
		p->foreign_libs = h->foreign_libs;
	if (h->deepbind_late > p->deepbind_late)
		p->deepbind_late = h->deepbind_late;
	if (h->clamped > p->clamped)
		p->clamped = h->clamped;
	if (h->texts_folded > p->texts_folded)
		p->texts_folded = h->texts_folded;
	p->seen |= h->seen;
	p->execs += h->unattributed;
	if (h->unattributed) {
		struct qkey uk = { SP_SQL_UNATTRIBUTED, SP_KIND_STMT };
		struct sp_qagg *uq = hmap_get(&mg->c->queries, &uk, 1, NULL);

		if (uq)
			uq->count = sat_add(uq->count, h->unattributed);
		placeholder_text(mg->c, SP_SQL_UNATTRIBUTED, SP_SQL_UNATTRIBUTED_TEXT,
				 sizeof(SP_SQL_UNATTRIBUTED_TEXT) - 1);
	}
}

/* A record the query record a refers to (runs, errors, a histogram
 * block), copied into out; 0, or -1 (not a record of that type there). */
static int merge_ref(struct merge *mg, uint64_t addr, uint16_t type, void *out, size_t len)
{
	size_t off = stats_ref(mg, addr, len);

	if (off != SIZE_MAX)
		merge_touched(mg, (uint32_t)(off / SP_STATS_CHUNK));
	return stats_get(mg->map, off, type, out, len);
}

/* Let go of the chunks merged since the last call, up to chunk end, and
 * of those read by a reference meanwhile, before or after them: a text's
 * histogram and run records are in other chunks than its query record,
 * and each one read maps 64 KB of them (the kernel's fault-around): the
 * collector's RssShmem was 366 MB at 200,000 fingerprints as the merge
 * began. A chunk let go of and read again is only mapped again. */
static void merge_drop(struct merge *mg, uint32_t end)
{
	if (mg->ref_hi)
		(void)madvise((void *)(mg->map + (size_t)mg->ref_lo * SP_STATS_CHUNK),
			      (size_t)(mg->ref_hi - mg->ref_lo) * SP_STATS_CHUNK, MADV_DONTNEED);
	(void)madvise((void *)(mg->map + (size_t)mg->dropped * SP_STATS_CHUNK),
		      (size_t)(end - mg->dropped) * SP_STATS_CHUNK, MADV_DONTNEED);
	mg->dropped = end;
	mg->ref_lo = mg->ref_hi = 0;
}

/* The sums of a query record into q (db_ns: its db time in ns). */
static void merge_sums(const struct merge *mg, struct sp_qagg *q, const struct sp_agg_query *a,
		       uint64_t db_ns)
{
	const struct sp_coll *c = mg->c;
	const struct sp_proc *conv = &mg->conv;
	uint64_t counters[4], nested_ns = to_ns(c, conv, a->nested_time);

	sp_agg_counters(a, counters);
	if (a->count && (!q->count || to_ns(c, conv, a->min) < q->min_ns))
		q->min_ns = to_ns(c, conv, a->min);
	if (a->count && to_ns(c, conv, a->max) > q->max_ns)
		q->max_ns = to_ns(c, conv, a->max);
	q->count = sat_add(q->count, a->count);
	q->total_ns = sat_add(q->total_ns, db_ns);
	q->self_ns = sat_add(q->self_ns, db_ns > nested_ns ? db_ns - nested_ns : 0);
	q->wall_ns = sat_add(q->wall_ns, to_ns(c, conv, a->wall));
	q->rows = sat_add(q->rows, a->rows);
	q->fullscan_steps = sat_add(q->fullscan_steps, counters[0]);
	q->sorts = sat_add(q->sorts, counters[1]);
	q->autoindex = sat_add(q->autoindex, counters[2]);
	q->vm_steps = sat_add(q->vm_steps, counters[3]);
	q->errors = sat_add(q->errors, a->errors);
	q->nested = sat_add(q->nested, a->nested);
	q->samples = sat_add(q->samples, a->samples);
	q->prepares = sat_add(q->prepares, a->prepares);
	q->prepare_ns = sat_add(q->prepare_ns, to_ns(c, conv, a->prepare_time));
}

/* The N+1 loops of a query record into q. */
static void merge_runs(struct merge *mg, struct sp_qagg *q, const struct sp_agg_query *a)
{
	q->runs = sat_add(q->runs, a->runs);
	if (a->max_run > q->max_run)
		q->max_run = a->max_run;
	/* a run closed: one of 1 at least (the preload's inline close of a
	 * run of 1 stores no max_run) */
	if (a->runs && !q->max_run)
		q->max_run = 1;
	if (a->runs) {
		struct sp_agg_loops rl;
		uint64_t longer = 0;
		uint32_t nb = 1, b;
		int got = merge_ref(mg, a->loops_by_len, SP_AGG_LOOPS, &rl, sizeof(rl)) == 0;

		/* counts up to the longest run's bucket only (sp_qagg.runs_nb) */
		for (b = 1; got && b < SP_AGG_RUN_BUCKETS && b < SP_RUN_BUCKETS; b++)
			if (rl.by_len[b])
				nb = b + 1;
		if (sp_qagg_loops(q, nb)) {
			for (b = 1; got && b < nb; b++) {
				q->loops_by_len[b] = sat_add(q->loops_by_len[b], rl.by_len[b]);
				longer = sat_add(longer, rl.by_len[b]);
			}
			if (!got && a->loops_by_len)
				mg->p->stats_bad++;
			q->loops_by_len[0] = sat_add(q->loops_by_len[0],
						     a->runs > longer ? a->runs - longer : 0);
		}
	}
	/* the thread's open N+1 loop, when it is credited here: it ends with
	 * the image */
	if (a->loop_open) {
		int b = sp_loop_bucket(a->loop_open);

		q->runs = sat_add(q->runs, 1);
		if (a->loop_open > q->max_run)
			q->max_run = a->loop_open;
		if (sp_qagg_loops(q, (uint32_t)b + 1))
			q->loops_by_len[b]++;
	}
}

/* A query record's failures by code, into c->errcodes. */
static void merge_errs(struct merge *mg, const struct sp_agg_query *a)
{
	struct sp_agg_errs er;

	if (merge_ref(mg, a->errs, SP_AGG_ERRS, &er, sizeof(er)) < 0) {
		mg->p->stats_bad++;
		return;
	}
	for (uint32_t b = 0; b < SP_AGG_ERR_CODES; b++) {
		uint64_t ek[4] = { a->sql_id, (uint64_t)(int64_t)er.code[b].rc, mg->pid,
				   a->kind == SP_KIND_EXEC ? SP_KIND_EXEC : SP_KIND_STMT };
		uint64_t *n;

		if (!er.code[b].count)
			continue;
		n = hmap_get(&mg->c->errcodes, ek, 1, NULL);
		if (n)
			*n = sat_add(*n, er.code[b].count);
	}
}

/* The histogram a query record's db times go to: its fingerprint's
 * (*fh) when the text is known, else the query's own. NULL on ENOMEM. */
static struct sp_hist *merge_hist_of(struct merge *mg, struct sp_qagg *q, uint64_t sql_id,
				     uint64_t kind, struct sp_fphist **fh)
{
	const struct sp_sql *sq = hmap_get(&mg->c->sqls, &sql_id, 0, NULL);

	*fh = NULL;
	if (sq && sq->fp_id && sq->text && sq->text[0] != '<') {
		uint64_t fk[2] = { sq->fp_id, kind };
		int created;

		*fh = hmap_get(&mg->c->fphists, fk, 1, &created);
		if (*fh && created)
			(*fh)->min_ns = UINT64_MAX;
		if (*fh && !(*fh)->hist)
			(*fh)->hist = sp_hist_new();
		return *fh ? (*fh)->hist : NULL;
	}
	if (!q->hist)
		q->hist = sp_hist_new();
	return q->hist;
}

/* A query record's histogram blocks, with its exact extremes and sum. */
static void merge_hist(struct merge *mg, struct sp_qagg *q, const struct sp_agg_query *a,
		       uint64_t db_ns, uint64_t kind)
{
	const struct sp_coll *c = mg->c;
	struct sp_fphist *fh;
	struct sp_hist *hist = merge_hist_of(mg, q, a->sql_id, kind, &fh);
	uint64_t mn = to_ns(c, &mg->conv, a->min), mx = to_ns(c, &mg->conv, a->max);

	if (!hist)
		return;
	for (uint32_t b = 0; b < SP_HIST_BLOCKS; b++) {
		struct sp_agg_hist hb;

		if (!a->hist[b])
			continue;
		if (merge_ref(mg, a->hist[b], SP_AGG_HIST, &hb, sizeof(hb)) < 0) {
			mg->p->stats_bad++;
			continue;
		}
		for (uint32_t k = 0; k < SP_HIST_PER_BLOCK; k++) {
			uint64_t lo, w;

			if (!hb.bucket[k])
				continue;
			sp_hist_bucket(b * SP_HIST_PER_BLOCK + k, &lo, &w);
			sp_hist_add_n(hist, to_ns(c, &mg->conv, lo + w / 2), hb.bucket[k]);
		}
	}
	if (fh) {
		if (mn < fh->min_ns)
			fh->min_ns = mn;
		if (mx > fh->max_ns)
			fh->max_ns = mx;
		fh->sum_ns = sat_add(fh->sum_ns, db_ns);
		fh->count = sat_add(fh->count, a->count);
		sp_hist_set_minmax_sum(hist, fh->min_ns, fh->max_ns, fh->sum_ns);
	} else {
		sp_hist_set_minmax_sum(hist, q->min_ns, q->max_ns, q->total_ns);
	}
}

/* One QUERY record at rec (whole, in a published part of a chunk). */
static void merge_query(struct merge *mg, const uint8_t *rec)
{
	struct sp_coll *c = mg->c;
	struct sp_agg_query a;
	struct qkey qk;
	struct sp_qagg *q;
	uint64_t db_ns;

	copy_query(rec, &a);
	a.sql_id = sp_coll_text_fold(c, a.sql_id); /* the agent's folds */
	if (a.kind == SP_KIND_STMT && a.started != (uint32_t)a.count) {
		uint32_t *d = hmap_get(&mg->started, &a.sql_id, 1, NULL);

		if (d)
			*d += a.started - (uint32_t)a.count;
	}
	if (a.sql_id == SP_SQL_FOLDED) {
		if (!a.count && !a.prepares)
			return; /* every arena has one: only used ones show */
		placeholder_text(c, SP_SQL_FOLDED, SP_SQL_FOLDED_TEXT,
				 sizeof(SP_SQL_FOLDED_TEXT) - 1);
	}
	qk.sql_id = a.sql_id;
	qk.kind = a.kind > SP_KIND_EXEC ? SP_KIND_STMT : a.kind;
	q = hmap_get(&c->queries, &qk, 1, NULL);
	if (!q)
		return;
	db_ns = to_ns(c, &mg->conv, a.db);
	mg->p->execs += a.count;
	if (a.caller && a.count && a.kind == SP_KIND_STMT) {
		uint64_t ck[4] = { a.sql_id, SP_KIND_STMT, mg->pid, a.caller };
		struct sp_caller *cr = hmap_get(&c->callers, ck, 1, NULL);

		if (cr) {
			cr->count = sat_add(cr->count, a.count);
			cr->total_ns = sat_add(cr->total_ns, db_ns);
		}
	}
	merge_sums(mg, q, &a, db_ns);
	merge_runs(mg, q, &a);
	if (a.errs)
		merge_errs(mg, &a);
	if (a.count)
		merge_hist(mg, q, &a, db_ns, qk.kind);
}

/* The QUERY records a chunk holds at most. */
#define CHUNK_QUERIES (SP_STATS_CHUNK / sizeof(struct sp_agg_query) + 1)
/* How many records ahead of the one merged its look-ups are prefetched
 * (merge_prefetch): the first stage this far, the second half of it. */
#define MERGE_AHEAD 8

/*
 * Start the look-ups the QUERY record at rec will make (merge_query) in
 * two stages: stage 0 the slots of its query and its text, stage 1 (the
 * text's slot in the cache by then) those of its fingerprint's histogram
 * and its caller. Hints only, read from a whole record: nothing is
 * trusted or changed. At 200,000 fingerprints these look-ups are cache
 * misses in maps of 30 to 200 MB, and one at a time they were half the
 * merge's time.
 */
static void merge_prefetch(struct merge *mg, const uint8_t *rec, int stage)
{
	struct sp_coll *c = mg->c;
	uint64_t sql_id, caller;
	uint32_t kind;
	struct qkey qk;

	memcpy(&sql_id, rec + offsetof(struct sp_agg_query, sql_id), sizeof(sql_id));
	memcpy(&kind, rec + offsetof(struct sp_agg_query, kind), sizeof(kind));
	qk = (struct qkey){ sql_id, kind > SP_KIND_EXEC ? SP_KIND_STMT : kind };
	if (stage == 0) {
		hmap_prefetch(&c->queries, &qk);
		hmap_prefetch(&c->sqls, &sql_id);
	} else {
		const struct sp_sql *sq = hmap_get(&c->sqls, &sql_id, 0, NULL);

		memcpy(&caller, rec + offsetof(struct sp_agg_query, caller), sizeof(caller));
		if (sq && sq->fp_id) {
			uint64_t fk[2] = { sq->fp_id, qk.kind };

			hmap_prefetch(&c->fphists, fk);
		}
		if (caller && qk.kind == SP_KIND_STMT) {
			uint64_t ck[4] = { sql_id, SP_KIND_STMT, mg->pid, caller };

			hmap_prefetch(&c->callers, ck);
		}
	}
}

/* The records of chunk ci, the QUERY records merged: found first, then
 * merged in their order with the look-ups of those ahead started. */
static void merge_chunk(struct merge *mg, uint32_t ci)
{
	const uint8_t *cb = mg->map + (size_t)ci * SP_STATS_CHUNK;
	uint32_t used = chunk_used(mg, ci), at[CHUNK_QUERIES], n = 0, i;
	size_t off = sizeof(struct sp_stats_chunk);

	while (used && off + sizeof(struct sp_rec_hdr) <= used) {
		struct sp_rec_hdr rh;

		memcpy(&rh, cb + off, sizeof(rh));
		if (rh.len < sizeof(rh) || rh.len % 8 || rh.len > used - off) {
			mg->p->stats_bad++;
			break;
		}
		if (rh.type == SP_AGG_QUERY && rh.len == sizeof(struct sp_agg_query) &&
		    n < CHUNK_QUERIES)
			at[n++] = (uint32_t)off;
		else if (rh.type == SP_AGG_QUERY)
			mg->p->stats_bad++; /* a query record of another length */
		off += rh.len;
	}
	for (i = 0; i < n && i < MERGE_AHEAD; i++)
		merge_prefetch(mg, cb + at[i], 0);
	for (i = 0; i < n && i < MERGE_AHEAD / 2; i++)
		merge_prefetch(mg, cb + at[i], 1);
	for (i = 0; i < n; i++) {
		if (i + MERGE_AHEAD < n)
			merge_prefetch(mg, cb + at[i + MERGE_AHEAD], 0);
		if (i + MERGE_AHEAD / 2 < n)
			merge_prefetch(mg, cb + at[i + MERGE_AHEAD / 2], 1);
		merge_query(mg, cb + at[i]);
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
	struct merge mg = { .c = c, .pid = pid, .map = mapv, .dropped = 1 };
	uint32_t ci;

	mg.p = proc_get(c, pid);
	if (!mg.p || size < SP_STATS_CHUNK)
		return;
	mg.conv.clock = clock;
	memcpy(&mg.h, mapv, sizeof(mg.h));
	mg.nchunks =
		__atomic_load_n(&((const struct sp_stats_hdr *)mapv)->nchunks, __ATOMIC_ACQUIRE);
	if (mg.h.magic != SP_STATS_MAGIC || mg.nchunks > size / SP_STATS_CHUNK) {
		mg.p->stats_bad++;
		return;
	}
	merge_header(&mg);
	mg.used = malloc((mg.nchunks ? mg.nchunks : 1) * sizeof(*mg.used));
	if (!mg.used)
		return;
	memset(mg.used, 0xff, (mg.nchunks ? mg.nchunks : 1) * sizeof(*mg.used)); /* UNREAD */
	hmap_init(&mg.started, sizeof(uint64_t), sizeof(uint32_t));
	for (ci = 1; ci < mg.nchunks; ci++) {
		mg.cur = ci;
		merge_chunk(&mg, ci);
		/* in batches of 4 MB: a call a chunk took twice the CPU */
		if (c->stats_drop && (ci + 1 - mg.dropped >= 64 || ci + 1 == mg.nchunks))
			merge_drop(&mg, ci + 1);
	}
	free(mg.used);
	note_running(mg.p, &mg.started);
	hmap_free(&mg.started);
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
		c->stats_drop = !m->copy && !c->stats_keep;
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
