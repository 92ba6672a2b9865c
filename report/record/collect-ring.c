/* SPDX-License-Identifier: MIT */
/*
 * collect-ring.c - the threads' shared rings, as the collector maps and
 * reads them (collect.h: sp_coll_ring_add, sp_coll_ring_drain ...): every
 * chunk read is copied out of the shared memory and validated as a
 * message of the ring's process (collect.c) before it is applied.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <linux/magic.h>
#include <unistd.h>

#include "collect-int.h"

/* ---- rings ------------------------------------------------------------------- */

/* Largest ring the collector maps. */
#define RING_MAX_SIZE (1u << 30)

static int ring_size_ok(uint32_t size)
{
	return size >= 4096 && size <= RING_MAX_SIZE && !(size & (size - 1));
}

/* Check the shared header of a mapped ring against its announcement.
 * Returns 0 with the writer's tail in *tail, or -1 (failf()). */
static int ring_check(struct sp_coll *c, const struct sp_ring_shared *sh, size_t map_len,
		      const struct sp_rec_ring *rec, uint32_t *tail)
{
	/* The writer may change these at any time: read each once. */
	uint32_t magic = __atomic_load_n(&sh->magic, __ATOMIC_RELAXED);
	uint32_t size = __atomic_load_n(&sh->size, __ATOMIC_RELAXED);
	uint32_t pid = __atomic_load_n(&sh->pid, __ATOMIC_RELAXED);
	uint32_t tid = __atomic_load_n(&sh->tid, __ATOMIC_RELAXED);

	if (!ring_size_ok(rec->size))
		return failf(c, "ring size %u is not a power of two from 4096 to %u", rec->size,
			     RING_MAX_SIZE);
	if (map_len < sizeof(*sh) + (size_t)rec->size)
		return failf(c, "ring mapping of %zu bytes is smaller than its size %u", map_len,
			     rec->size);
	if (magic != SP_RING_MAGIC)
		return failf(c, "bad ring magic 0x%08x", magic);
	if (size != rec->size || pid != rec->pid || tid != rec->tid)
		return failf(c,
			     "ring header (size %u, pid %u, tid %u) differs from its RING record "
			     "(size %u, pid %u, tid %u)",
			     size, pid, tid, rec->size, rec->pid, rec->tid);
	*tail = __atomic_load_n(&sh->tail, __ATOMIC_ACQUIRE);
	if (*tail % 8)
		return failf(c, "ring tail %u is not a multiple of 8", *tail);
	return 0;
}

/* Put a checked mapping into the registry. Returns 0, or -1 (unmapped). */
int coll_ring_register(struct sp_coll *c, void *map, size_t map_len, const struct sp_rec_ring *rec,
		       uint32_t key, uint32_t tail)
{
	struct sp_proc *p = hmap_get(&c->procs, &key, 0, NULL);
	struct sp_ring *r;

	if (SP_GROW(c->rings, c->rings_cap, c->nrings + 1, 16) < 0)
		goto nomem;
	r = calloc(1, sizeof(*r));
	if (!r)
		goto nomem;
	r->sh = map;
	r->map_len = map_len;
	r->pid = key;
	r->rpid = rec->pid;
	r->tid = rec->tid;
	r->size = rec->size;
	r->tail = tail;
	r->image = p ? p->image : 0;
	c->rings[c->nrings++] = r;
	c->rings_opened++;
	return 0;
nomem:
	munmap(map, map_len);
	return failf(c, "out of memory for a ring");
}

int sp_coll_ring_add(struct sp_coll *c, void *map, size_t map_len, const struct sp_rec_ring *rec)
{
	uint32_t tail;

	if (ring_check(c, map, map_len, rec, &tail) < 0) {
		munmap(map, map_len);
		return -1;
	}
	return coll_ring_register(c, map, map_len, rec, rec->pid, tail);
}

/*
 * Map the memfd fd of the ring rec announces and check it. fd is closed
 * in every case. Returns 0 with the mapping in *map (*map_len bytes) and
 * the writer's tail in *tail, or -1 (failf(), nothing mapped).
 */
int coll_ring_map(struct sp_coll *c, int fd, const struct sp_rec_ring *rec, void **map,
		  size_t *map_len, uint32_t *tail)
{
	size_t need = sizeof(struct sp_ring_shared) + (size_t)rec->size;
	struct stat st;
	struct statfs sfs;
	int seals;
	void *m;

	*map = NULL;
	if (!ring_size_ok(rec->size)) {
		close(fd);
		return failf(c, "ring size %u is not a power of two from 4096 to %u", rec->size,
			     RING_MAX_SIZE);
	}
	/* Only a memfd (shmem) knows seals: a file, pipe or socket is refused. */
	seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0) {
		close(fd);
		return failf(c, "ring descriptor is not a memfd");
	}
	/* A writer that shrank the memfd under our mapping would make our
	 * reads fault (SIGBUS). Seal it against shrinking when the writer
	 * allows sealing (MFD_ALLOW_SEALING); otherwise we have to rely on
	 * it not doing so. */
	if (!(seals & F_SEAL_SHRINK))
		(void)fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK);
	seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0 || !(seals & F_SEAL_SHRINK)) {
		/* it could be shrunk under our reads: refused */
		close(fd);
		return failf(c, "ring memfd cannot be sealed against shrinking "
				"(made without MFD_ALLOW_SEALING?)");
	}
	/* shmem only: a hugetlbfs memfd can fault on a punched hole */
	if (fstatfs(fd, &sfs) < 0 || sfs.f_type != TMPFS_MAGIC) {
		close(fd);
		return failf(c, "ring descriptor is not a shmem memfd");
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return failf(c, "ring descriptor is not a memfd");
	}
	if (st.st_size < 0 || (uint64_t)st.st_size < need) {
		close(fd);
		return failf(c, "ring memfd of %lld bytes is smaller than %zu",
			     (long long)st.st_size, need);
	}
	m = mmap(NULL, need, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		return failf(c, "cannot map the ring: %s", strerror(errno));
	if (ring_check(c, m, need, rec, tail) < 0) {
		munmap(m, need);
		return -1;
	}
	*map = m;
	*map_len = need;
	return 0;
}

void coll_ring_free(struct sp_coll *c, size_t i)
{
	struct sp_ring *r = c->rings[i];

	munmap(r->sh, r->map_len);
	free(r);
	c->rings[i] = c->rings[--c->nrings];
}

/* The ring cannot be read any further: count, say so once, return -1.
 * counted: c->bad_messages was counted already (by fail()). */
static int ring_broken(struct sp_coll *c, struct sp_ring *r, int counted, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int ring_broken(struct sp_coll *c, struct sp_ring *r, int counted, const char *fmt, ...)
{
	struct sp_proc *p = proc_get(c, r->pid);
	char why[sizeof(c->last_error)];
	va_list ap;

	if (r->broken)
		return -1;
	r->broken = 1;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	snprintf(c->last_error, sizeof(c->last_error), "ring of pid %u thread %u: %.200s", r->pid,
		 r->tid, why);
	if (!counted)
		c->bad_messages++;
	if (p)
		p->bad_msgs++;
	c->rings_broken++;
	if (c->diag)
		fprintf(c->diag, "\nsqlprof: stopped reading a ring: %s\n", c->last_error);
	return -1;
}

/* Validate and apply clen bytes of records in c->ring_buf, read from r
 * at ring position from. Returns 0 or -1 (ring_broken()). */
static int ring_chunk(struct sp_coll *c, struct sp_ring *r, size_t clen, uint32_t from)
{
	uint64_t rec_buf[REC_BUF_WORDS];
	struct sp_proc *p = hmap_get(&c->procs, &r->pid, 0, NULL);
	struct sp_msg_hdr mh = {
		.magic = SP_WIRE_MAGIC,
		.version = SP_WIRE_VERSION,
		.pid = r->rpid,
		.len = (uint32_t)(sizeof(mh) + clen),
		.seq = 0,
		.lost = p ? p->lost : 0,
	};
	struct msg_info mi;

	memcpy(c->ring_buf, &mh, sizeof(mh));
	if (coll_msg_check(c, c->ring_buf, sizeof(mh) + clen, 0, &mi, rec_buf) < 0)
		return ring_broken(c, r, 1, "%s of the records from position %u", c->last_error,
				   from);
	if (mi.nring || mi.nstats)
		return ring_broken(c, r, 0, "a %s record inside a ring (from position %u)",
				   mi.nring ? "RING" : "STATS", from);
	if (coll_msg_apply(c, c->ring_buf, sizeof(mh) + clen, &mh, r->pid, 1, rec_buf) < 0)
		return ring_broken(c, r, 1, "%s", c->last_error);
	return 0;
}

int sp_coll_ring_drain(struct sp_coll *c, struct sp_ring *r)
{
	const uint32_t mask = r->size - 1;
	/* dead before head: the writer stores dead after its last head */
	uint32_t dead = __atomic_load_n(&r->sh->dead, __ATOMIC_ACQUIRE);
	uint32_t head = __atomic_load_n(&r->sh->head, __ATOMIC_ACQUIRE);
	uint32_t pos = r->tail, from = pos;
	size_t clen = 0;
	uint8_t *body;
	char why[128] = "";

	if (r->broken)
		return -1;
	if (head - pos > r->size)
		return ring_broken(c, r, 0, "head - tail = %u exceeds the ring size %u", head - pos,
				   r->size);
	if (head % 8)
		return ring_broken(c, r, 0, "head %u is not a multiple of 8", head);
	if (head == pos)
		return dead ? 1 : 0;
	if (!c->ring_buf) {
		c->ring_buf = malloc(sizeof(struct sp_msg_hdr) + SP_MSG_MAX);
		if (!c->ring_buf)
			return 0; /* read it later */
	}
	body = c->ring_buf + sizeof(struct sp_msg_hdr);
	/* Whole records only, each copied out of the shared memory before
	 * it is looked at again: the copy is what gets validated. */
	while (pos != head) {
		uint32_t off = pos & mask, left = head - pos;
		struct sp_rec_hdr rh;

		memcpy(&rh, r->sh->data + off, sizeof(rh)); /* left >= 8: both multiples of 8 */
		if (rh.len < sizeof(rh) || rh.len % 8 || rh.len > left) {
			snprintf(why, sizeof(why), "bad record length %u at position %u", rh.len,
				 pos);
			break;
		}
		if (rh.len > r->size - off) {
			snprintf(why, sizeof(why),
				 "record of %u bytes at position %u crosses the end "
				 "of the ring",
				 rh.len, pos);
			break;
		}
		if (rh.type != SP_REC_PAD) {
			if (rh.len > SP_MSG_MAX) {
				snprintf(why, sizeof(why),
					 "record of %u bytes at position %u is longer "
					 "than a message",
					 rh.len, pos);
				break;
			}
			if (clen + rh.len > SP_MSG_MAX) {
				if (ring_chunk(c, r, clen, from) < 0)
					return -1;
				clen = 0;
				from = pos;
			}
			memcpy(body + clen, r->sh->data + off, rh.len);
			/* the length checked above, whatever the writer did since */
			memcpy(body + clen, &rh, sizeof(rh));
			clen += rh.len;
		}
		pos += rh.len;
	}
	/* the whole records before a broken one still count */
	if (clen && ring_chunk(c, r, clen, from) < 0)
		return -1;
	if (why[0])
		return ring_broken(c, r, 0, "%s", why);
	r->tail = head;
	__atomic_store_n(&r->sh->tail, head, __ATOMIC_RELEASE);
	return dead ? 1 : 0;
}

uint64_t sp_coll_rings_drain(struct sp_coll *c, uint32_t pid)
{
	uint64_t before = c->records;
	size_t i = 0;

	while (i < c->nrings) {
		if ((pid && c->rings[i]->pid != pid) || sp_coll_ring_drain(c, c->rings[i]) == 0)
			i++;
		else
			coll_ring_free(c, i); /* the last one moved to i */
	}
	return c->records - before;
}

/* Read the rings of pid's images up to image one last time and free them:
 * the image said BYE, or a later image said HELLO. */
void coll_rings_retire(struct sp_coll *c, uint32_t pid, uint32_t image)
{
	size_t i = 0;

	while (i < c->nrings) {
		struct sp_ring *r = c->rings[i];

		if (r->pid != pid || r->image > image) {
			i++;
			continue;
		}
		(void)sp_coll_ring_drain(c, r);
		coll_ring_free(c, i);
	}
}

void sp_coll_proc_gone(struct sp_coll *c, uint32_t pid)
{
	struct sp_proc *p = hmap_get(&c->procs, &pid, 0, NULL);

	if (!p)
		return;
	coll_rings_retire(c, pid, p->image);
	sp_coll_stats_retire(c, pid, p->image);
}

void sp_coll_rings_close(struct sp_coll *c)
{
	while (c->nrings) {
		(void)sp_coll_ring_drain(c, c->rings[c->nrings - 1]);
		coll_ring_free(c, c->nrings - 1);
	}
}
