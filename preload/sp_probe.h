/* SPDX-License-Identifier: MIT */
/*
 * sp_probe.h - where a libsqlite3 keeps its statement counters
 * (SQLITE_STMTSTATUS_*, the u32 aCounter[] of the statement object), found
 * by experiment: a private in-memory connection without lookaside (so the
 * statement object comes from sqlite3_malloc and sqlite3_msize bounds the
 * scan) runs a statement several times, so the counters take distinct
 * values, and only an offset where all eight match the API after every
 * run is kept. Shared by the preload (stmt.c) and by `sqlprof record`,
 * which probes its own libsqlite3 once and hands the result to the
 * processes it starts (SQLPROF_STATUS_LAYOUT), so that each of them does
 * not pay for a connection of its own.
 *
 * Header-only: the caller passes the functions to use (the preload's are
 * the uninterposed originals).
 */
#ifndef SP_PROBE_H
#define SP_PROBE_H

#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <stdio.h>
#include <sys/uio.h>
#include <unistd.h>

#include "sp_params.h"
#if defined(__has_include)
#if __has_include(<valgrind/memcheck.h>)
#include <valgrind/memcheck.h>
#endif
#endif
#ifndef VALGRIND_MAKE_MEM_DEFINED
#define VALGRIND_MAKE_MEM_DEFINED(p, n) ((void)(p), (void)(n))
#endif

struct sp_probe_api {
	int (*open_v2)(const char *, sqlite3 **, int, const char *);
	int (*close)(sqlite3 *);
	int (*db_config)(sqlite3 *, int, ...);
	sqlite3_uint64 (*msize)(void *);
	int (*prepare_v2)(sqlite3 *, const char *, int, sqlite3_stmt **, const char **);
	int (*step)(sqlite3_stmt *);
	int (*reset)(sqlite3_stmt *);
	int (*finalize)(sqlite3_stmt *);
	int (*stmt_status)(sqlite3_stmt *, int, int);
	/* the bound values' probe only (sp_probe_params) */
	int (*bind_int64)(sqlite3_stmt *, int, sqlite3_int64);
	int (*bind_double)(sqlite3_stmt *, int, double);
	int (*bind_text)(sqlite3_stmt *, int, const char *, int, void (*)(void *));
	int (*bind_blob)(sqlite3_stmt *, int, const void *, int, void (*)(void *));
	int (*bind_null)(sqlite3_stmt *, int);
	int (*bind_zeroblob)(sqlite3_stmt *, int, int);
	int (*bind_parameter_count)(sqlite3_stmt *);
	int (*clear_bindings)(sqlite3_stmt *);
};

/* The API of the SQLite a program is linked with (record, the unit
 * tests); the preload fills its own from the library it resolved. */
#define SP_PROBE_API_LINKED                                                                     \
	{                                                                                       \
		.open_v2 = sqlite3_open_v2, .close = sqlite3_close,                             \
		.db_config = sqlite3_db_config, .msize = sqlite3_msize,                         \
		.prepare_v2 = sqlite3_prepare_v2, .step = sqlite3_step, .reset = sqlite3_reset, \
		.finalize = sqlite3_finalize, .stmt_status = sqlite3_stmt_status,               \
		.bind_int64 = sqlite3_bind_int64, .bind_double = sqlite3_bind_double,           \
		.bind_text = sqlite3_bind_text, .bind_blob = sqlite3_bind_blob,                 \
		.bind_null = sqlite3_bind_null, .bind_zeroblob = sqlite3_bind_zeroblob,         \
		.bind_parameter_count = sqlite3_bind_parameter_count,                           \
		.clear_bindings = sqlite3_clear_bindings                                        \
	}

#define PROBE_OPS 8 /* SQLITE_STMTSTATUS_FULLSCAN_STEP (1) .. FILTER_HIT (8) */

/* Candidate offsets where aCounter[1..8] equal the API's values. */
static inline int sp_probe_match(const struct sp_probe_api *api, sqlite3_stmt *st, size_t size,
				 int *cand, int ncand, int first)
{
	uint32_t want[PROBE_OPS + 1];
	int op, n = 0;
	size_t off;

	for (op = 1; op <= PROBE_OPS; op++)
		want[op] = (uint32_t)api->stmt_status(st, op, 0);
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

/* A private in-memory connection without lookaside (so that statement
 * objects come from sqlite3_malloc and sqlite3_msize bounds a scan of
 * them), or NULL. */
static inline sqlite3 *sp_probe_open(const struct sp_probe_api *api)
{
	sqlite3 *db = NULL;

	if (!api->open_v2 || !api->close || !api->db_config)
		return NULL;
	if (api->open_v2(":memory:", &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) !=
	    SQLITE_OK) {
		if (db)
			api->close(db);
		return NULL;
	}
	api->db_config(db, SQLITE_DBCONFIG_LOOKASIDE, NULL, 0, 0);
	return db;
}

/*
 * Find where this libsqlite3 keeps its statement counters, on db (from
 * sp_probe_open). The probe runs a statement several times so the
 * counters take distinct values, and keeps only an offset where all eight
 * match the API after every run. Called at the first prepare, when the
 * application has initialised SQLite (we never initialise it first: that
 * would break its sqlite3_config calls). SQLPROF_STATUS=api skips it.
 */
/* The offset of aCounter[0] in a statement object, or -1. */
static inline int sp_probe_counters_db(const struct sp_probe_api *api, sqlite3 *db)
{
	sqlite3_stmt *st = NULL;
	int cand[8], n = 0, run, off = -1;
	size_t size;

	if (!db || !api->msize || !api->prepare_v2 || !api->step || !api->reset || !api->finalize ||
	    !api->stmt_status)
		return -1;
	if (api->prepare_v2(db,
			    "WITH RECURSIVE c(x) AS (VALUES(1) UNION ALL SELECT x+1 FROM c "
			    "WHERE x<20) SELECT x FROM c ORDER BY x DESC",
			    -1, &st, NULL) != SQLITE_OK)
		goto out;
	size = (size_t)api->msize(st);
	if (size < 64 || size > 65536)
		goto out;
	/* the scan reads the whole object, padding included: under memcheck
	 * (the CLI's valgrind test) that is not an error of ours */
	VALGRIND_MAKE_MEM_DEFINED(st, size);
	for (run = 0; run < 3; run++) {
		while (api->step(st) == SQLITE_ROW)
			;
		api->reset(st);
		n = sp_probe_match(api, st, size, cand, n, run == 0);
		if (n == 0)
			goto out;
	}
	if (n == 1)
		off = cand[0];
out:
	if (st)
		api->finalize(st);
	return off;
}

/* The same on a connection of its own. */
static inline int sp_probe_counters(const struct sp_probe_api *api)
{
	sqlite3 *db = sp_probe_open(api);
	int off = sp_probe_counters_db(api, db);

	if (db)
		api->close(db);
	return off;
}

/* ---- the bound values (sp_params.h) ---- */

/*
 * A read of our own memory that fails (EFAULT) instead of faulting: the
 * probe follows pointers it only guesses are pointers. The bytes read, or
 * -1 (seccomp may forbid the call: then the probe fails, and the
 * fallback is used).
 */
static inline long sp_probe_read(uintptr_t addr, void *out, size_t n)
{
	struct iovec l = { out, n }, r = { (void *)addr, n };
	ssize_t got;

	if (addr < 4096 || addr + n < addr || addr + n > (1ULL << 47))
		return -1;
	got = process_vm_readv(getpid(), &l, 1, &r, 1, 0);
	if (got > 0)
		VALGRIND_MAKE_MEM_DEFINED(out, (size_t)got);
	return got < 0 ? -1 : (long)got;
}

/* One bound value as the probe set it. */
struct sp_probe_val {
	int kind;         /* SP_PV_* */
	uint64_t u;       /* INT, REAL: the 64 bits; ZEROBLOB: the zeros */
	const void *p;    /* TEXT, BLOB: the bytes (NULL: any copy of them) */
	int n;            /* their length */
	const void *same; /* bound SQLITE_STATIC: z must be this pointer */
};

#define SP_PROBE_NVAR 10
#define SP_PROBE_MEM_MAX 128 /* sizeof(Mem) is 56 in 3.40 (64-bit), 48 .. 72 in others */

static inline int sp_probe_popcount1(unsigned x)
{
	return x && !(x & (x - 1));
}

/* Bind v[0..SP_PROBE_NVAR) to st. 0, or -1. */
static inline int sp_probe_bind(const struct sp_probe_api *api, sqlite3_stmt *st,
				const struct sp_probe_val *v)
{
	for (int i = 0; i < SP_PROBE_NVAR; i++) {
		int rc, j = i + 1;
		double d;

		switch (v[i].kind) {
		case SP_PV_NULL: rc = api->bind_null(st, j); break;
		case SP_PV_INT: rc = api->bind_int64(st, j, (sqlite3_int64)v[i].u); break;
		case SP_PV_REAL:
			memcpy(&d, &v[i].u, sizeof(d));
			rc = api->bind_double(st, j, d);
			break;
		case SP_PV_TEXT:
			rc = api->bind_text(st, j, (const char *)v[i].p, v[i].n,
					    v[i].same ? SQLITE_STATIC : SQLITE_TRANSIENT);
			break;
		case SP_PV_BLOB:
			rc = api->bind_blob(st, j, v[i].p, v[i].n,
					    v[i].same ? SQLITE_STATIC : SQLITE_TRANSIENT);
			break;
		case SP_PV_ZEROBLOB: rc = api->bind_zeroblob(st, j, (int)v[i].u); break;
		default: return -1;
		}
		if (rc != SQLITE_OK)
			return -1;
	}
	return 0;
}

/* Do the bytes at addr (read safely) equal p[0..n)? */
static inline int sp_probe_same_bytes(uintptr_t addr, const void *p, int n)
{
	unsigned char buf[512];

	if (n < 0 || n > (int)sizeof(buf))
		return 0;
	if (n == 0)
		return 1;
	return sp_probe_read(addr, buf, (size_t)n) == n && memcmp(buf, p, (size_t)n) == 0;
}

/* Does the parameter array of st, read through L with safe reads only,
 * hold exactly v[0..SP_PROBE_NVAR)? 1 or 0. */
static inline int sp_probe_params_check(const struct sp_params_layout *L, sqlite3_stmt *st,
					const struct sp_probe_val *v)
{
	uintptr_t var;
	unsigned char m[SP_PROBE_MEM_MAX];

	memcpy(&var, (const char *)st + L->var_off, sizeof(var)); /* inside st: msize said so */
	for (int i = 0; i < SP_PROBE_NVAR; i++) {
		uint16_t flags;
		uint64_t u;
		uintptr_t z;
		int n, kind, zeros;

		if (sp_probe_read(var + (uintptr_t)i * (uintptr_t)L->mem_size, m,
				  (size_t)L->mem_size) != L->mem_size)
			return 0;
		memcpy(&flags, m + L->flags_off, sizeof(flags));
		memcpy(&u, m + L->u_off, sizeof(u));
		memcpy(&zeros, m + L->u_off, sizeof(zeros));
		memcpy(&z, m + L->z_off, sizeof(z));
		memcpy(&n, m + L->n_off, sizeof(n));
		kind = sp_params_kind(L, flags);
		if (kind != v[i].kind)
			return 0;
		switch (kind) {
		case SP_PV_INT:
		case SP_PV_REAL:
			if (u != v[i].u)
				return 0;
			break;
		case SP_PV_TEXT:
		case SP_PV_BLOB:
			if (n != v[i].n || (v[i].same && (const void *)z != v[i].same) ||
			    (n && !sp_probe_same_bytes(z, v[i].p, n)))
				return 0;
			break;
		case SP_PV_ZEROBLOB:
			if (n != 0 || (uint64_t)(uint32_t)zeros != v[i].u)
				return 0;
			break;
		}
	}
	return 1;
}

/* The layouts of a candidate Mem array buf[0..got) (SP_PROBE_NVAR Mems
 * of set a, see sp_probe_params_db) of size ms: how many fit, the last
 * one in *L. */
static inline int sp_probe_params_fit(const unsigned char *buf, long got, int ms,
				      const struct sp_probe_val *a, struct sp_params_layout *L)
{
	int found = 0;

#define PW(i, o)                                    \
	({                                          \
		uint64_t w_;                        \
		memcpy(&w_, buf + (i)*ms + (o), 8); \
		w_;                                 \
	})
#define PI(i, o)                                    \
	({                                          \
		int32_t i_;                         \
		memcpy(&i_, buf + (i)*ms + (o), 4); \
		i_;                                 \
	})
#define PF(i, o)                                    \
	({                                          \
		uint16_t f_;                        \
		memcpy(&f_, buf + (i)*ms + (o), 2); \
		(unsigned)f_;                       \
	})
#define OVER(a_, na, b_, nb) ((a_) < (b_) + (nb) && (b_) < (a_) + (na))
	if (got < (long)SP_PROBE_NVAR * ms)
		return 0;
	for (int u = 0; u + 8 <= ms; u += 8) {
		if (PW(0, u) != a[0].u || PW(1, u) != a[1].u || PW(8, u) != a[8].u ||
		    (uint64_t)(uint32_t)PI(5, u) != a[5].u)
			continue;
		for (int z = 0; z + 8 <= ms; z += 8) {
			if (z == u || PW(6, z) != (uint64_t)(uintptr_t)a[6].same ||
			    PW(7, z) != (uint64_t)(uintptr_t)a[7].same ||
			    PW(9, z) != (uint64_t)(uintptr_t)a[9].same ||
			    !sp_probe_same_bytes((uintptr_t)PW(2, z), a[2].p, a[2].n) ||
			    !sp_probe_same_bytes((uintptr_t)PW(3, z), a[3].p, a[3].n))
				continue;
			for (int n = 0; n + 4 <= ms; n += 4) {
				if (OVER(n, 4, u, 8) || OVER(n, 4, z, 8))
					continue;
				if (PI(2, n) != a[2].n || PI(3, n) != a[3].n ||
				    PI(6, n) != a[6].n || PI(7, n) != a[7].n ||
				    PI(9, n) != a[9].n || PI(5, n) != 0)
					continue;
				for (int f = 0; f + 2 <= ms; f += 2) {
					struct sp_params_layout c = { 0 };
					unsigned F[SP_PROBE_NVAR];
					int i;

					if (OVER(f, 2, u, 8) || OVER(f, 2, z, 8) ||
					    OVER(f, 2, n, 4))
						continue;
					for (i = 0; i < SP_PROBE_NVAR; i++)
						F[i] = PF(i, f);
					/* NULL, integer and real are one bit each, by
					 * themselves; a text's and a blob's bits are those
					 * all three of a kind share and the other kind has
					 * none of (storage bits differ: transient, static) */
					c.f_null = F[4];
					c.f_int = F[0];
					c.f_real = F[1];
					c.f_str = F[2] & F[6] & F[9] & ~(F[3] | F[7] | F[5]);
					c.f_blob = F[3] & F[7] & F[5] & ~(F[2] | F[6] | F[9]);
					c.f_zero = F[5] & ~(F[3] | F[7]);
					if (!sp_probe_popcount1(c.f_null) ||
					    !sp_probe_popcount1(c.f_int) ||
					    !sp_probe_popcount1(c.f_real) ||
					    !sp_probe_popcount1(c.f_str) ||
					    !sp_probe_popcount1(c.f_blob) ||
					    !sp_probe_popcount1(c.f_zero) || F[8] != F[0])
						continue;
					if (__builtin_popcount(c.f_null | c.f_int | c.f_real |
							       c.f_str | c.f_blob | c.f_zero) != 6)
						continue;
					c.mem_size = ms;
					c.u_off = u;
					c.z_off = z;
					c.n_off = n;
					c.flags_off = f;
					for (i = 0; i < SP_PROBE_NVAR &&
						    sp_params_kind(&c, F[i]) == a[i].kind;
					     i++)
						;
					if (i < SP_PROBE_NVAR)
						continue;
					*L = c;
					found++;
				}
			}
		}
	}
#undef PW
#undef PI
#undef PF
#undef OVER
	return found;
}

#define SP_PROBE_CANDS 4

/* The layouts that fit st (set a bound): every pointer-sized word of the
 * statement object (sqlite3_msize bounds it) taken as a candidate array,
 * read with process_vm_readv only. Up to SP_PROBE_CANDS in c; returns how
 * many fit (more than that: SP_PROBE_CANDS + 1), or -1. */
static inline int sp_probe_params_scan(const struct sp_probe_api *api, sqlite3_stmt *st,
				       const struct sp_probe_val *a, struct sp_params_layout *c)
{
	unsigned char buf[SP_PROBE_NVAR * SP_PROBE_MEM_MAX];
	size_t size = (size_t)api->msize(st);
	int nfound = 0;

	if (size < 64 || size > 65536)
		return -1;
	VALGRIND_MAKE_MEM_DEFINED(st, size);
	for (size_t off = 0; off + 8 <= size; off += 8) {
		uintptr_t p;
		long got;

		memcpy(&p, (const char *)st + off, sizeof(p));
		if (!p || (p & 7))
			continue;
		got = sp_probe_read(p, buf, sizeof(buf));
		if (got <= 0)
			continue;
		for (int ms = 32; ms <= SP_PROBE_MEM_MAX; ms += 8) {
			struct sp_params_layout L;

			if (sp_probe_params_fit(buf, got, ms, a, &L) != 1)
				continue;
			if (nfound == SP_PROBE_CANDS)
				return SP_PROBE_CANDS + 1;
			L.var_off = (int)off;
			c[nfound++] = L;
		}
	}
	return nfound;
}

/* Bind b, run st, check; clear the bindings, check; bind a, check. */
static inline int sp_probe_params_validate(const struct sp_probe_api *api, sqlite3_stmt *st,
					   const struct sp_params_layout *L,
					   const struct sp_probe_val *a,
					   const struct sp_probe_val *b)
{
	struct sp_probe_val nul[SP_PROBE_NVAR];

	memset(nul, 0, sizeof(nul));
	for (int i = 0; i < SP_PROBE_NVAR; i++)
		nul[i].kind = SP_PV_NULL;
	/* the statement runs: its values stay where they are */
	if (sp_probe_bind(api, st, b) < 0)
		return 0;
	while (api->step(st) == SQLITE_ROW)
		;
	api->reset(st);
	if (!sp_probe_params_check(L, st, b))
		return 0;
	api->clear_bindings(st);
	if (!sp_probe_params_check(L, st, nul))
		return 0;
	return sp_probe_bind(api, st, a) == 0 && sp_probe_params_check(L, st, a);
}

/*
 * Find where this libsqlite3 keeps a statement's bound values and how it
 * lays them out, on db (from sp_probe_open). Three statements with ten
 * parameters (of different shapes, so that their parameter arrays sit at
 * different places in SQLite's allocations: in the first, 3.40's pFree,
 * the block holding it, has the array's address too; in the second it
 * does not) are bound known values of every type (integers, a real, texts
 * and blobs both copied and SQLITE_STATIC - whose pointers we know -,
 * NULL, a zeroblob); every pointer-sized word of each statement object is
 * taken as a candidate array (read safely: sp_probe_params_scan), and a
 * layout is kept when exactly one fits them all. It is then validated on
 * each: other values of every type in other places (a text longer than
 * any buffer, '1' and 1, NULL and '') after the statement ran, then
 * sqlite3_clear_bindings, must read back exactly through it (safe reads
 * again). 0 and *L filled, or -1: no layout (the caller uses
 * sqlite3_expanded_sql).
 */
#define NST 3
static inline int sp_probe_params_db(const struct sp_probe_api *api, sqlite3 *db,
				     struct sp_params_layout *L)
{
	static const char text7[] = "abcdefgh", empty[] = "";
	static const unsigned char blob4[13] = { 0xb1, 0,    0xb3, 0xb4, 0xff, 0,   0,
						 0x7f, 0x80, 1,    2,    3,    0xbd };
	static const unsigned char blob8[9] = { 0xc1, 0xc2, 0, 0xc4, 0xc5, 0xc6, 0xc7, 0xc8, 0xc9 };
	static const unsigned char blob_b[4] = { 0, 0, 0, 1 };
	static const char *const sql[NST] = {
		"SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10",
		"SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10 FROM sqlite_schema",
		"SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, "
		"11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, "
		"31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, "
		"51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65, 66, 67, 68, 69, 70",
	};
	char long_text[300];
	double d1 = -6.02214076e23 * 3.25, d2 = -0.5;
	struct sp_probe_val a[SP_PROBE_NVAR] = {
		{ SP_PV_INT, 0x5f1a2b3c4d5e6f71ULL, NULL, 0, NULL },
		{ SP_PV_REAL, 0, NULL, 0, NULL },
		{ SP_PV_TEXT, 0, "sqlprof-probe-text", 18, NULL },
		{ SP_PV_BLOB, 0, blob4, 13, NULL },
		{ SP_PV_NULL, 0, NULL, 0, NULL },
		{ SP_PV_ZEROBLOB, 777, NULL, 0, NULL },
		{ SP_PV_TEXT, 0, text7, 5, text7 }, /* not NUL-terminated at 5 */
		{ SP_PV_BLOB, 0, blob8, 9, blob8 },
		{ SP_PV_INT, (uint64_t)-2, NULL, 0, NULL },
		{ SP_PV_TEXT, 0, empty, 0, empty },
	};
	struct sp_probe_val b[SP_PROBE_NVAR] = {
		{ SP_PV_TEXT, 0, "xyz", 3, NULL },
		{ SP_PV_NULL, 0, NULL, 0, NULL },
		{ SP_PV_INT, 42, NULL, 0, NULL },
		{ SP_PV_ZEROBLOB, 3, NULL, 0, NULL },
		{ SP_PV_REAL, 0, NULL, 0, NULL },
		{ SP_PV_BLOB, 0, blob_b, 4, NULL },
		{ SP_PV_INT, 0x8000000000000000ULL, NULL, 0, NULL },
		{ SP_PV_TEXT, 0, long_text, (int)sizeof(long_text), NULL },
		{ SP_PV_TEXT, 0, "1", 1, NULL },
		{ SP_PV_INT, 1, NULL, 0, NULL },
	};
	sqlite3_stmt *st[NST] = { NULL };
	struct sp_params_layout c[NST][SP_PROBE_CANDS], found = { 0 };
	int n[NST], nfound = 0, rc = -1, i, j, k;

	if (!db || !api->msize || !api->prepare_v2 || !api->step || !api->reset || !api->finalize ||
	    !api->bind_int64 || !api->bind_double || !api->bind_text || !api->bind_blob ||
	    !api->bind_null || !api->bind_zeroblob || !api->bind_parameter_count ||
	    !api->clear_bindings)
		return -1;
	memcpy(&a[1].u, &d1, sizeof(d1));
	memcpy(&b[4].u, &d2, sizeof(d2));
	for (size_t x = 0; x < sizeof(long_text); x++)
		long_text[x] = (char)('a' + x % 26);
	for (i = 0; i < NST; i++) {
		if (api->prepare_v2(db, sql[i], -1, &st[i], NULL) != SQLITE_OK || !st[i] ||
		    api->bind_parameter_count(st[i]) != SP_PROBE_NVAR ||
		    sp_probe_bind(api, st[i], a) < 0)
			goto out;
		n[i] = sp_probe_params_scan(api, st[i], a, c[i]);
		if (n[i] <= 0 || n[i] > SP_PROBE_CANDS)
			goto out;
	}
	/* the candidates of the first statement that fit all the others */
	for (i = 0; i < n[0]; i++) {
		for (k = 1; k < NST; k++) {
			for (j = 0; j < n[k] && memcmp(&c[0][i], &c[k][j], sizeof(c[0][i])); j++)
				;
			if (j == n[k])
				break;
		}
		if (k == NST) {
			found = c[0][i];
			nfound++;
		}
	}
	if (nfound != 1)
		goto out;
	for (i = 0; i < NST; i++)
		if (!sp_probe_params_validate(api, st[i], &found, a, b))
			goto out;
	*L = found;
	rc = 0;
out:
	for (i = 0; i < NST; i++)
		if (st[i])
			api->finalize(st[i]);
	return rc;
}
#undef NST

/* SQLPROF_PARAMS_LAYOUT: "VAR:SIZE:U:Z:N:FLAGS:NULL:INT:REAL:STR:BLOB:ZERO:DEV:INO",
 * the layout found (sp_params_layout, flag bits in hex) for the
 * libsqlite3 file with that device and inode: sqlprof record probes once
 * and hands it over with SQLPROF_STATUS_LAYOUT. */
#define SP_ENV_PARAMS_LAYOUT "SQLPROF_PARAMS_LAYOUT"

static inline int sp_params_layout_format(char *out, size_t n, const struct sp_params_layout *L,
					  unsigned long long dev, unsigned long long ino)
{
	return snprintf(out, n, "%d:%d:%d:%d:%d:%d:%x:%x:%x:%x:%x:%x:%llu:%llu", L->var_off,
			L->mem_size, L->u_off, L->z_off, L->n_off, L->flags_off, L->f_null,
			L->f_int, L->f_real, L->f_str, L->f_blob, L->f_zero, dev, ino);
}

/* Parse s (sp_params_layout_format's text): 0, or -1 for anything else or
 * any field out of range (an offset outside a Mem, a flag not one bit). */
static inline int sp_params_layout_parse(const char *s, struct sp_params_layout *L,
					 unsigned long long *dev, unsigned long long *ino)
{
	struct sp_params_layout c;
	int end = 0;

	if (!s ||
	    sscanf(s, "%d:%d:%d:%d:%d:%d:%x:%x:%x:%x:%x:%x:%llu:%llu%n", &c.var_off, &c.mem_size,
		   &c.u_off, &c.z_off, &c.n_off, &c.flags_off, &c.f_null, &c.f_int, &c.f_real,
		   &c.f_str, &c.f_blob, &c.f_zero, dev, ino, &end) != 14 ||
	    s[end])
		return -1;
	if (c.var_off < 0 || c.var_off > 65536 - 8 || (c.var_off & 7) || c.mem_size < 32 ||
	    c.mem_size > SP_PROBE_MEM_MAX || c.u_off < 0 || c.u_off + 8 > c.mem_size ||
	    c.z_off < 0 || c.z_off + 8 > c.mem_size || c.n_off < 0 || c.n_off + 4 > c.mem_size ||
	    c.flags_off < 0 || c.flags_off + 2 > c.mem_size)
		return -1;
	if (!sp_probe_popcount1(c.f_null) || !sp_probe_popcount1(c.f_int) ||
	    !sp_probe_popcount1(c.f_real) || !sp_probe_popcount1(c.f_str) ||
	    !sp_probe_popcount1(c.f_blob) || !sp_probe_popcount1(c.f_zero) ||
	    ((c.f_null | c.f_int | c.f_real | c.f_str | c.f_blob | c.f_zero) >> 16))
		return -1;
	*L = c;
	return 0;
}

/* SQLPROF_STATUS_LAYOUT: "OFFSET:DEV:INO", the offset found for the
 * libsqlite3 file with that device and inode. */
#define SP_ENV_STATUS_LAYOUT "SQLPROF_STATUS_LAYOUT"

#endif /* SP_PROBE_H */
