/* SPDX-License-Identifier: MIT */
/*
 * sp_params.h - the keyed hash of a statement execution's bound values
 * (sp_rec_exec.params, the doctor's duplicate rule), in two ways that
 * never meet within a process:
 *
 * - from the statement's own parameter array (the Vdbe's aVar[], an
 *   array of Mem), whose place and layout a start-up probe found and
 *   validated (sp_probe.h, sp_probe_params): per parameter its type and
 *   value are hashed, with no formatting and no allocation;
 * - from sqlite3_expanded_sql's text, when no probe validated the layout.
 *
 * Both are SipHash-2-4 under the process's key, and both hash a statement
 * without parameters as its sql_id alone, so either gives equal values
 * equal hashes and different values different ones (up to 2^-64). What
 * this file does not do: decide which way a process uses (params.c), or
 * read anything it was not told is there. Header-only, so that the unit
 * tests run the same code against a real libsqlite3.
 */
#ifndef SP_PARAMS_H
#define SP_PARAMS_H

#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Where a libsqlite3 keeps a statement's bound values, as found by
 * sp_probe_params: the statement object holds `Mem *aVar` at var_off;
 * each Mem is mem_size bytes, with its union (an i64, a double, or the
 * int nZero of a zeroblob) at u_off, `char *z` at z_off, `int n` at
 * n_off and `u16 flags` at flags_off; the f_* are the flag bits of each
 * type (MEM_Null, MEM_Int, MEM_Real, MEM_Str, MEM_Blob, MEM_Zero). */
struct sp_params_layout {
	int var_off, mem_size, u_off, z_off, n_off, flags_off;
	unsigned f_null, f_int, f_real, f_str, f_blob, f_zero;
};

/* A parameter's kind, as hashed: in the order sqlite3_expanded_sql tests
 * the flags (NULL first: a bound pointer is NULL with a subtype). */
enum {
	SP_PV_NULL = 1,
	SP_PV_INT,
	SP_PV_REAL,
	SP_PV_TEXT,
	SP_PV_BLOB,
	SP_PV_ZEROBLOB, /* a blob of n bytes then nZero zeros */
	SP_PV_OTHER,    /* flags the probe never saw: hashed with the union */
};

static inline int sp_params_kind(const struct sp_params_layout *L, unsigned flags)
{
	if (flags & L->f_null)
		return SP_PV_NULL;
	if (flags & L->f_int)
		return SP_PV_INT;
	if (flags & L->f_real)
		return SP_PV_REAL;
	if (flags & L->f_str)
		return SP_PV_TEXT;
	if (flags & L->f_blob)
		return flags & L->f_zero ? SP_PV_ZEROBLOB : SP_PV_BLOB;
	return SP_PV_OTHER;
}

/* ---- SipHash-2-4, fed 64-bit words ---- */

/* The state lives in four locals of the caller (v0..v3), so that it stays
 * in registers: ~14 instructions a round. */
#define SP_ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define SP_SIPROUND                   \
	do {                          \
		v0 += v1;             \
		v1 = SP_ROTL(v1, 13); \
		v1 ^= v0;             \
		v0 = SP_ROTL(v0, 32); \
		v2 += v3;             \
		v3 = SP_ROTL(v3, 16); \
		v3 ^= v2;             \
		v0 += v3;             \
		v3 = SP_ROTL(v3, 21); \
		v3 ^= v0;             \
		v2 += v1;             \
		v1 = SP_ROTL(v1, 17); \
		v1 ^= v2;             \
		v2 = SP_ROTL(v2, 32); \
	} while (0)
#define SP_SIP_INIT(k)                                                                     \
	uint64_t v0 = 0x736f6d6570736575ULL ^ (k)[0], v1 = 0x646f72616e646f6dULL ^ (k)[1]; \
	uint64_t v2 = 0x6c7967656e657261ULL ^ (k)[0], v3 = 0x7465646279746573ULL ^ (k)[1]
/* one 8-byte block */
#define SP_SIP_WORD(m_)              \
	do {                         \
		uint64_t m__ = (m_); \
		v3 ^= m__;           \
		SP_SIPROUND;         \
		SP_SIPROUND;         \
		v0 ^= m__;           \
	} while (0)
/* the last block b (the length in its top byte), then finalization;
 * the hash is never 0 */
#define SP_SIP_FINAL(b_, out)              \
	do {                               \
		uint64_t b__ = (b_);       \
		v3 ^= b__;                 \
		SP_SIPROUND;               \
		SP_SIPROUND;               \
		v0 ^= b__;                 \
		v2 ^= 0xff;                \
		SP_SIPROUND;               \
		SP_SIPROUND;               \
		SP_SIPROUND;               \
		SP_SIPROUND;               \
		(out) = v0 ^ v1 ^ v2 ^ v3; \
		(out) += !(out);           \
	} while (0)

/* SipHash-2-4 of p[0..n) (any length) under k: a keyed hash, so that a
 * profile holding the hash of a low-entropy value (a small id, a PIN)
 * does not give the value away to someone trying every candidate. Never
 * 0. */
static inline uint64_t sp_siphash24(const uint64_t k[2], const unsigned char *p, size_t n)
{
	SP_SIP_INIT(k);
	uint64_t m = 0, h;
	size_t i;

	for (i = 0; i + 8 <= n; i += 8) {
		memcpy(&m, p + i, 8);
		SP_SIP_WORD(m);
	}
	m = 0;
	memcpy(&m, p + i, n - i); /* little-endian: the bytes in order */
	SP_SIP_FINAL((uint64_t)n << 56 | m, h);
	return h;
}

/* A statement without parameters: its sql_id alone (what both ways give;
 * equal to sp_siphash24 of the 8 bytes of sql_id). */
static inline uint64_t sp_params_hash_none(const uint64_t k[2], uint64_t sql_id)
{
	SP_SIP_INIT(k);
	uint64_t h;

	SP_SIP_WORD(sql_id);
	SP_SIP_FINAL((uint64_t)8 << 56, h);
	return h;
}

/*
 * The hash of sql_id and the first n bound values of st, read from its
 * parameter array with layout L (which must be this libsqlite3's, found
 * by sp_probe_params: nothing here checks an address). The message, in
 * 64-bit words: sql_id with the kinds of the first 16 parameters in it
 * (4 bits each, XORed: for one sql_id, and so one n, different kinds give
 * a different first word), a word of kinds per 16 parameters more; then
 * per parameter its value: the integer's or the real's 64 bits; a text's
 * or blob's byte length, then its bytes (padded to a word); a zeroblob's
 * length, bytes and count of zeros; nothing for NULL. Each kind fixes how
 * many words follow, so the message is never ambiguous: 1 and '1', NULL
 * and '', x'' and zeroblob(0) differ, and texts of any length are read
 * whole. `SELECT ?1+1` with an integer is two words (~270 instructions).
 * The caller holds the connection's mutex (another thread's sqlite3_bind
 * or clear_bindings would free what we read). Never 0.
 */
static inline uint64_t sp_params_hash_mem(const uint64_t k[2], const struct sp_params_layout *L,
					  sqlite3_stmt *st, int n, uint64_t sql_id)
{
	SP_SIP_INIT(k);
	const char *var, *m;
	uint64_t kinds = 0, len = 0, h;
	int i;

	memcpy(&var, (const char *)st + L->var_off, sizeof(var));
	/* the kinds */
	for (i = 0, m = var; i < n; i++, m += L->mem_size) {
		uint16_t flags;

		memcpy(&flags, m + L->flags_off, sizeof(flags));
		kinds |= (uint64_t)sp_params_kind(L, flags) << (4 * (i & 15));
		if ((i & 15) == 15 || i == n - 1) {
			SP_SIP_WORD(i < 16 ? sql_id ^ kinds : kinds);
			len += 8;
			kinds = 0;
		}
	}
	/* the values */
	for (i = 0, m = var; i < n; i++, m += L->mem_size) {
		uint16_t flags;
		uint64_t u, w;
		const unsigned char *z;
		int bytes, zeros, kind;
		size_t j;

		memcpy(&flags, m + L->flags_off, sizeof(flags));
		kind = sp_params_kind(L, flags);
		switch (kind) {
		case SP_PV_INT:
		case SP_PV_REAL:
		case SP_PV_OTHER:
			memcpy(&u, m + L->u_off, sizeof(u));
			SP_SIP_WORD(u);
			len += 8;
			if (kind == SP_PV_OTHER) {
				SP_SIP_WORD((uint64_t)flags);
				len += 8;
			}
			break;
		case SP_PV_TEXT:
		case SP_PV_BLOB:
		case SP_PV_ZEROBLOB:
			memcpy(&bytes, m + L->n_off, sizeof(bytes));
			memcpy(&z, m + L->z_off, sizeof(z));
			if (bytes < 0 || !z)
				bytes = 0;
			SP_SIP_WORD((uint64_t)(uint32_t)bytes);
			len += 8;
			for (j = 0; j + 8 <= (size_t)bytes; j += 8) {
				memcpy(&w, z + j, 8);
				SP_SIP_WORD(w);
				len += 8;
			}
			if (j < (size_t)bytes) {
				w = 0;
				memcpy(&w, z + j, (size_t)bytes - j);
				SP_SIP_WORD(w);
				len += 8;
			}
			if (kind == SP_PV_ZEROBLOB) {
				memcpy(&zeros, m + L->u_off,
				       sizeof(zeros)); /* the union's int nZero */
				SP_SIP_WORD((uint64_t)(uint32_t)zeros);
				len += 8;
			}
			break;
		default: /* NULL */ break;
		}
	}
	if (n <= 0) {
		SP_SIP_WORD(sql_id);
		len += 8;
	}
	SP_SIP_FINAL(len << 56, h);
	return h;
}

/* The fallback: the hash of st's sqlite3_expanded_sql text (its SQL with
 * the values in it), freed with free_fn; 0 when SQLite gives none (out of
 * memory, or a text longer than SQLITE_LIMIT_LENGTH). */
static inline uint64_t sp_params_hash_text(const uint64_t k[2], sqlite3_stmt *st,
					   char *(*expanded_sql)(sqlite3_stmt *),
					   void (*free_fn)(void *))
{
	char *x = expanded_sql(st);
	uint64_t h;

	if (!x)
		return 0;
	h = sp_siphash24(k, (const unsigned char *)x, strlen(x));
	free_fn(x);
	return h;
}

/* The preload's side (params.c), for exec.c and stmt.c. */
struct sp_thread;
struct sp_probe_api;
/* The hash of a drawn execution of st (a statement of the primary
 * library), never 0, or 0 when none can be had. Keeps errno. */
uint64_t sp_params_hash(struct sp_thread *t, sqlite3_stmt *st, uint64_t sql_id);
/* At the counter probe (stmt.c): 1 when the bound values' probe should
 * run on the probe's connection - no layout handed over for the library
 * file dev:ino (have_file 0: not known) and SQLPROF_PARAMS=1 - else 0,
 * the way settled. */
int sp_params_probe_wanted(unsigned long long dev, unsigned long long ino, int have_file);
/* Run it on db (from sp_probe_open; NULL: fails), and settle the way. */
void sp_params_probe(const struct sp_probe_api *api, sqlite3 *db);

#endif /* SP_PARAMS_H */
