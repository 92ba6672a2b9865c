/* SPDX-License-Identifier: MIT */
/*
 * fuzz_stream.c - libFuzzer target for the collector's stream decoder
 * (report/record/collect.c, sp_coll_message) and its reader of the shared
 * statistics (sp_coll_stats_merge), the code that reads what profiled
 * processes send and share, and so treats every byte as hostile.
 *
 * Each input is used four times, on fresh collectors:
 *  1. whole, as one message (peer pid 0: not checked);
 *  2. as a sequence of messages, each prefixed by its length as a
 *     little-endian uint32 (a length running past the input takes what is
 *     left), with the peer pid taken from the first message's header, as
 *     the collector does with SO_PEERCRED;
 *  3. as the contents of a thread's shared ring (sp_ring_shared, 8 KiB of
 *     data): the first 8 bytes are its tail and head, the rest its data,
 *     drained twice (with the writer's head moved between, as a live
 *     writer would) and then as a dead ring; the pid of the records is
 *     taken from the first one;
 *  4. as an image's shared statistics (sp_wire.h), held as the collector
 *     holds a copy (read live by sp_coll_executions, then merged by
 *     sp_coll_finish): an input that starts with SP_STATS_MAGIC is the
 *     whole buffer (zero-padded to one chunk when shorter); any other is
 *     a writer's base address (8 bytes) and what follows the header
 *     chunk (chunk 1 on, zero-padded to whole chunks), behind a valid
 *     header chunk made here. An odd-sized input is read as TSC ticks.
 * After the messages, the collector's end-of-recording steps run (the
 * live execution count, sp_coll_finish, the loss and execution totals)
 * and every SQL text it kept is fingerprinted, as the profile writer
 * would. The profile writer itself (file I/O, symbolizer) is not run
 * here: see fuzz_profile.c for the reading side.
 *
 * Seeds: tests/fuzz/corpus/stream/, captured from real recordings by
 * tests/fuzz/make_corpus.py (stats-* seed the 4th reading).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "collect.h"
#include "fingerprint.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void finish(struct sp_coll *c)
{
	size_t it = 0;
	const void *key;
	struct sp_sql *s;
	volatile uint64_t sink;

	sink = sp_coll_executions(c); /* statistics still held: read live */
	sp_coll_finish(c);
	sink += sp_coll_lost(c) + sp_coll_executions(c);
	(void)sink;
	while ((s = hmap_next(&c->sqls, &it, &key))) {
		uint64_t id;
		char *fp;

		if (!s->text)
			continue;
		fp = sp_fingerprint(s->text, strlen(s->text), &id);
		free(fp);
	}
	sp_coll_free(c);
}

/* The 4th reading: the input as an image's shared statistics, held by
 * the collector as a copy is (the map is ours: freed by sp_coll_finish). */
static void stats(const uint8_t *data, size_t size)
{
	struct sp_coll c;
	struct sp_statmap *m;
	uint8_t *buf;
	size_t len;
	uint32_t magic = 0;
	const uint32_t pid = 4242;

	if (size >= 4)
		memcpy(&magic, data, 4);
	if (magic == SP_STATS_MAGIC) {
		/* the whole buffer, header chunk included; the exact length
		 * when it is a chunk or more, so that ASan sees an over-read */
		len = size < SP_STATS_CHUNK ? SP_STATS_CHUNK : size;
		buf = calloc(1, len);
		if (!buf)
			return;
		memcpy(buf, data, size);
	} else {
		struct sp_stats_hdr h;
		uint64_t base = 0x7f0000000000ull;
		size_t body = size > 8 ? size - 8 : 0;

		if (size >= 8)
			memcpy(&base, data, 8);
		len = SP_STATS_CHUNK * (1 + (body + SP_STATS_CHUNK - 1) / SP_STATS_CHUNK);
		if (len < 2 * SP_STATS_CHUNK)
			len = 2 * SP_STATS_CHUNK;
		buf = calloc(1, len);
		if (!buf)
			return;
		memset(&h, 0, sizeof(h));
		h.magic = SP_STATS_MAGIC;
		h.version = SP_WIRE_VERSION;
		h.pid = pid;
		h.chunk_size = SP_STATS_CHUNK;
		h.size = len;
		h.base = base;
		h.nchunks = (uint32_t)(len / SP_STATS_CHUNK);
		memcpy(buf, &h, sizeof(h));
		if (body)
			memcpy(buf + SP_STATS_CHUNK, data + 8, body);
	}
	sp_coll_init(&c);
	c.ns_per_tick = 1.7;
	c.stats = malloc(sizeof(*c.stats));
	if (!c.stats) {
		free(buf);
		sp_coll_free(&c);
		return;
	}
	c.stats_cap = 1;
	m = &c.stats[c.nstats++];
	memset(m, 0, sizeof(*m));
	m->map = buf;
	m->size = len;
	m->pid = pid;
	m->image = 1;
	m->clock = size % 2 ? SP_CLOCK_TSC : SP_CLOCK_MONOTONIC;
	m->copy = 1;
	finish(&c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sp_coll c;
	size_t off = 0;
	uint32_t peer = 0;

	/* 1. One message. The decoder may keep no pointer into it, so hand
	 * it an exact-size copy: ASan then catches any over-read. */
	{
		uint8_t *m = malloc(size ? size : 1);

		if (!m)
			return 0;
		memcpy(m, data, size);
		sp_coll_init(&c);
		sp_coll_message(&c, m, size, 0);
		finish(&c);
		free(m);
	}

	/* 2. Length-prefixed messages. */
	sp_coll_init(&c);
	while (size - off >= 4) {
		uint32_t len;
		uint8_t *m;

		memcpy(&len, data + off, 4);
		off += 4;
		if (len > size - off)
			len = (uint32_t)(size - off);
		if (!peer && len >= 12)
			memcpy(&peer, data + off + 8, 4); /* sp_msg_hdr.pid */
		m = malloc(len ? len : 1);
		if (!m)
			break;
		memcpy(m, data + off, len);
		sp_coll_message(&c, m, len, peer);
		free(m);
		off += len;
	}
	finish(&c);

	/* 3. A ring. */
	if (size >= 8) {
		const uint32_t rsize = 8192;
		size_t map_len = sizeof(struct sp_ring_shared) + rsize;
		struct sp_ring_shared *sh = mmap(NULL, map_len, PROT_READ | PROT_WRITE,
						 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		struct sp_rec_ring rec;
		uint32_t tail, head, pid = 1;

		if (sh == MAP_FAILED)
			return 0;
		memcpy(&tail, data, 4);
		memcpy(&head, data + 4, 4);
		memcpy(sh->data, data + 8, size - 8 < rsize ? size - 8 : rsize);
		if (size >= 8 + 12)
			memcpy(&pid, data + 8 + 8, 4); /* the first record's pid */
		sh->magic = SP_RING_MAGIC;
		sh->size = rsize;
		sh->pid = pid;
		sh->tid = pid;
		sh->tail = tail & ~7u;
		sh->head = head;
		memset(&rec, 0, sizeof(rec));
		rec.h.type = SP_REC_RING;
		rec.h.len = sizeof(rec);
		rec.pid = pid;
		rec.tid = pid;
		rec.size = rsize;
		sp_coll_init(&c);
		if (sp_coll_ring_add(&c, sh, map_len, &rec) == 0) {
			sp_coll_rings_drain(&c, 0);
			if (c.nrings) { /* a live writer moves its head on */
				__atomic_store_n(&sh->head, head + (tail & 0x1ff8u),
						 __ATOMIC_RELEASE);
				sp_coll_rings_drain(&c, 0);
			}
			if (c.nrings) {
				__atomic_store_n(&sh->dead, 1, __ATOMIC_RELEASE);
				sp_coll_rings_drain(&c, 0);
			}
			sp_coll_rings_close(&c);
		}
		finish(&c);
	}

	/* 4. Shared statistics. */
	stats(data, size);
	return 0;
}
