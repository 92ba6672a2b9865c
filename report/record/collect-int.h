/* SPDX-License-Identifier: MIT */
/*
 * collect-int.h - what the collector's files share (collect.c: messages
 * and records; collect-ring.c: rings; collect-stats.c: shared statistics;
 * collect-files.c: files left by processes; collect-proc.c: how a process
 * ended; collect-fold.c: folding texts). Not for anything outside them:
 * their API is collect.h.
 */
#ifndef SP_COLLECT_INT_H
#define SP_COLLECT_INT_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "collect.h"

struct qkey {
	uint64_t sql_id;
	uint64_t kind;
};
struct skey {
	uint64_t sql_id, kind, pid, stack_id;
};
struct stkey {
	uint64_t pid, stack_id;
};
struct ekey {
	uint64_t sql_id, rc, pid, stack_id, msg_hash;
	uint64_t kind; /* enum sp_exec_kind */
};
struct mkey {
	uint64_t pid, image, generation, lo;
};

/* The part of a statistics mapping kept after its merge: the header. */
#define HDR_PAGE 4096

static inline struct sp_proc *proc_get(struct sp_coll *c, uint32_t pid)
{
	int created;
	struct sp_proc *p = hmap_get(&c->procs, &pid, 1, &created);

	if (p && created)
		p->pid = pid;
	return p;
}

static inline int fail(struct sp_coll *c, const char *why, size_t off)
{
	snprintf(c->last_error, sizeof(c->last_error), "%s at byte %zu", why, off);
	c->bad_messages++;
	return -1;
}

static inline char *dup_n(const uint8_t *p, size_t n)
{
	char *s = malloc(n + 1);

	if (s) {
		memcpy(s, p, n);
		s[n] = 0;
		/* NULs inside would cut the text silently later; make them visible */
		for (size_t i = 0; i < n; i++)
			if (!s[i])
				s[i] = '?';
	}
	return s;
}

/* double -> u64 without undefined behaviour on hostile values */
static inline uint64_t clamp_u64(double d)
{
	if (!(d > 0))
		return 0;
	if (d >= 18446744073709549568.0)
		return UINT64_MAX;
	return (uint64_t)d;
}

static inline uint64_t to_ns(const struct sp_coll *c, const struct sp_proc *p, uint64_t v)
{
	if (p->clock == SP_CLOCK_TSC)
		return clamp_u64((double)v * c->ns_per_tick);
	return v;
}

static inline uint64_t to_mono(const struct sp_coll *c, const struct sp_proc *p, uint64_t t)
{
	if (p->clock == SP_CLOCK_TSC)
		return clamp_u64((double)p->mono_ref +
				 (double)(int64_t)(t - p->tsc_ref) * c->ns_per_tick);
	return t;
}

static inline void statmap_free(struct sp_statmap *m)
{
	if (m->copy)
		free(m->map);
	else
		munmap(m->map, m->size);
}

/* What the validation of a message found out, for sp_coll_input. */
struct msg_info {
	struct sp_msg_hdr mh;
	unsigned nring;            /* RING records */
	struct sp_rec_ring ring;   /* the last of them */
	unsigned nstats;           /* STATS records */
	struct sp_rec_stats stats; /* the last of them */
	int fresh_hello;           /* a HELLO not flagged SP_HELLO_RECONNECT */
	int bye;                   /* a BYE record */
	uint32_t bye_ino;          /* its stats_ino (0: none) */
};

/* Size of the aligned copy of one record (the largest fits a message). */
#define REC_BUF_WORDS ((SP_MSG_MAX + 7) / 8)

/* Like fail(), with a formatted reason (no byte offset). */
static inline int failf(struct sp_coll *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static inline int failf(struct sp_coll *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->last_error, sizeof(c->last_error), fmt, ap);
	va_end(ap);
	c->bad_messages++;
	return -1;
}

static inline uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a + b < a ? UINT64_MAX : a + b;
}

/* collect.c: validate a whole message (header and every record) without
 * changing anything but the failure counters; apply one it accepted. */
int coll_msg_check(struct sp_coll *c, const uint8_t *msg, size_t len, uint32_t peer_pid,
		   struct msg_info *mi, uint64_t *rec_buf);
int coll_msg_apply(struct sp_coll *c, const uint8_t *msg, size_t len, const struct sp_msg_hdr *mh,
		   uint32_t key, int from_ring, uint64_t *rec_buf);
/* collect.c: apply one validated record (rec 8-aligned; p NULL: a
 * texts file's SQL record, no process) */
void coll_apply(struct sp_coll *c, struct sp_proc *p, const uint8_t *rec, uint16_t type);
/* collect-ring.c: map the memfd fd (closed) of the ring rec announces
 * and check it; 0, or -1 (failf(), nothing mapped) */
int coll_ring_map(struct sp_coll *c, int fd, const struct sp_rec_ring *rec, void **map,
		  size_t *map_len, uint32_t *tail);
/* collect-ring.c: put a checked mapping into the registry under the
 * process key; 0, or -1 (unmapped) */
int coll_ring_register(struct sp_coll *c, void *map, size_t map_len, const struct sp_rec_ring *rec,
		       uint32_t key, uint32_t tail);
/* collect-proc.c: a process that exited did not die, goodbye or not */
void coll_proc_verdict(struct sp_proc *p);
/* collect-ring.c: unmap and forget c->rings[i]; read pid's rings of
 * images up to image one last time and free them */
void coll_ring_free(struct sp_coll *c, size_t i);
void coll_rings_retire(struct sp_coll *c, uint32_t pid, uint32_t image);

#endif
