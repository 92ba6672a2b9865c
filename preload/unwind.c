/* SPDX-License-Identifier: MIT */
/*
 * unwind.c - a small CFI unwinder for x86-64 with a cache of unwind rules,
 * used to take the stack of sampled executions in-process.
 *
 * glibc's backtrace() (libgcc's unwinder) interprets the CIE and FDE of
 * every frame on every call: ~3 us for 23 frames on this machine. Code
 * that issues queries has few distinct return addresses, so we compute the
 * rule of each return address once - CFA = rsp|rbp + offset, where the
 * caller's rbp and the return address were saved - from the same .eh_frame
 * data (found with libgcc's _Unwind_Find_FDE) and keep it in a lock-free
 * cache. A warm walk is a hash probe and two loads per frame.
 *
 * What it does not do: DWARF expressions (signal frames, PLT stubs),
 * register rules other than "saved at CFA+n" for rbp, architectures other
 * than x86-64. Where it meets one it stops and says so (-1), and the
 * caller falls back to backtrace(). Every stack read is checked against
 * the thread's stack bounds first, so a wrong rule truncates a stack, it
 * never faults.
 */
#include <errno.h>
#include <execinfo.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include "sp_preload.h"

#if defined(__x86_64__)

struct dwarf_eh_bases {
	void *tbase;
	void *dbase;
	void *func;
};
extern const void *_Unwind_Find_FDE(void *pc, struct dwarf_eh_bases *bases);

/* DWARF register numbers on x86-64 */
#define R_RBP 6
#define R_RSP 7
#define R_RA 16

/* A rule, packed in 8 bytes. */
struct rule {
	int32_t cfa_off;
	int16_t rbp_off;  /* caller's rbp at CFA + rbp_off, if RBP_SAVED */
	int8_t ra_off8;   /* return address at CFA + 8 * ra_off8 */
	uint8_t flags;
};
#define CFA_RBP 1   /* CFA = rbp + off (else rsp + off) */
#define RBP_SAVED 2
#define RULE_OK 4
#define RULE_BAD 8  /* cannot unwind through this pc */
#define RULE_END 16 /* outermost frame: the return address is undefined */

/* Cache: pc -> rule, a seqlock per slot. A writer makes seq odd with a
 * compare-and-swap (a writer that loses just does not cache), writes key
 * and rule, and makes seq even again; a reader takes key and rule only if
 * seq was even and unchanged around its reads. */
#define CACHE_BITS 14
struct slot {
	_Atomic uint64_t seq;
	_Atomic uint64_t key;
	_Atomic uint64_t rule;
	uint64_t pad;
};
static struct slot *cache;

static inline uint64_t pack(struct rule r)
{
	uint64_t v;

	memcpy(&v, &r, sizeof(v));
	return v;
}

static inline struct rule unpack(uint64_t v)
{
	struct rule r;

	memcpy(&r, &v, sizeof(r));
	return r;
}

/* ---- reading .eh_frame ---- */

static uint64_t uleb(const uint8_t **p, const uint8_t *end)
{
	uint64_t v = 0;
	int shift = 0;

	while (*p < end) {
		uint8_t b = *(*p)++;

		if (shift < 64)
			v |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
		if (!(b & 0x80))
			break;
	}
	return v;
}

static int64_t sleb(const uint8_t **p, const uint8_t *end)
{
	int64_t v = 0;
	int shift = 0;
	uint8_t b = 0;

	while (*p < end) {
		b = *(*p)++;
		if (shift < 64)
			v |= (int64_t)(b & 0x7f) << shift;
		shift += 7;
		if (!(b & 0x80))
			break;
	}
	if (shift < 64 && (b & 0x40))
		v |= -((int64_t)1 << shift);
	return v;
}

/* DW_EH_PE pointer encodings */
static int read_enc(const uint8_t **p, const uint8_t *end, uint8_t enc,
		    const struct dwarf_eh_bases *b, uint64_t *out)
{
	const uint8_t *start = *p;
	uint64_t v;

	if (enc == 0xff) /* omit */
		return -1;
	switch (enc & 0x0f) {
	case 0x00: /* absptr */
		if (end - *p < 8) return -1;
		memcpy(&v, *p, 8); *p += 8; break;
	case 0x01: v = uleb(p, end); break;
	case 0x09: v = (uint64_t)sleb(p, end); break;
	case 0x02: { uint16_t x; if (end - *p < 2) return -1; memcpy(&x, *p, 2); *p += 2; v = x; break; }
	case 0x03: { uint32_t x; if (end - *p < 4) return -1; memcpy(&x, *p, 4); *p += 4; v = x; break; }
	case 0x04: if (end - *p < 8) return -1; memcpy(&v, *p, 8); *p += 8; break;
	case 0x0a: { int16_t x; if (end - *p < 2) return -1; memcpy(&x, *p, 2); *p += 2; v = (uint64_t)(int64_t)x; break; }
	case 0x0b: { int32_t x; if (end - *p < 4) return -1; memcpy(&x, *p, 4); *p += 4; v = (uint64_t)(int64_t)x; break; }
	case 0x0c: if (end - *p < 8) return -1; memcpy(&v, *p, 8); *p += 8; break;
	default: return -1;
	}
	switch (enc & 0x70) {
	case 0x00: break;
	case 0x10: v += (uint64_t)(uintptr_t)start; break;          /* pcrel */
	case 0x20: v += (uint64_t)(uintptr_t)b->tbase; break;       /* textrel */
	case 0x30: v += (uint64_t)(uintptr_t)b->dbase; break;       /* datarel */
	case 0x40: v += (uint64_t)(uintptr_t)b->func; break;        /* funcrel */
	default: return -1;
	}
	if (enc & 0x80) /* indirect */
		return -1;
	*out = v;
	return 0;
}

struct cfa_state {
	int cfa_reg;
	int64_t cfa_off;
	int rbp_how; /* 0 same value, 1 saved at offset, 2 unsupported */
	int64_t rbp_off;
	int ra_how;
	int64_t ra_off;
};

/* Run CFA instructions [p, end) until the location passes target. */
static int run_cfa(const uint8_t *p, const uint8_t *end, uint64_t loc, uint64_t target,
		   uint64_t caf, int64_t daf, struct cfa_state *st, const struct cfa_state *init,
		   uint8_t fde_enc, const struct dwarf_eh_bases *b)
{
	struct cfa_state stack[8];
	int depth = 0;

	while (p < end) {
		uint8_t op = *p++, hi = op & 0xc0, lo = op & 0x3f;
		uint64_t reg, delta;
		int64_t off;

		if (hi == 0x40) { /* advance_loc */
			loc += lo * caf;
			if (loc > target)
				return 0;
			continue;
		}
		if (hi == 0x80) { /* offset */
			off = (int64_t)uleb(&p, end) * daf;
			if (lo == R_RBP) { st->rbp_how = 1; st->rbp_off = off; }
			else if (lo == R_RA) { st->ra_how = 1; st->ra_off = off; }
			continue;
		}
		if (hi == 0xc0) { /* restore */
			if (lo == R_RBP && init) { st->rbp_how = init->rbp_how; st->rbp_off = init->rbp_off; }
			if (lo == R_RA && init) { st->ra_how = init->ra_how; st->ra_off = init->ra_off; }
			continue;
		}
		switch (op) {
		case 0x00: break; /* nop */
		case 0x01: /* set_loc */
			if (read_enc(&p, end, fde_enc, b, &loc) < 0)
				return -1;
			if (loc > target)
				return 0;
			break;
		case 0x02: delta = *p++; goto adv;
		case 0x03: { uint16_t x; if (end - p < 2) return -1; memcpy(&x, p, 2); p += 2; delta = x; goto adv; }
		case 0x04: { uint32_t x; if (end - p < 4) return -1; memcpy(&x, p, 4); p += 4; delta = x; goto adv; }
		adv:
			loc += delta * caf;
			if (loc > target)
				return 0;
			break;
		case 0x05: /* offset_extended */
			reg = uleb(&p, end);
			off = (int64_t)uleb(&p, end) * daf;
			goto setoff;
		case 0x11: /* offset_extended_sf */
			reg = uleb(&p, end);
			off = sleb(&p, end) * daf;
		setoff:
			if (reg == R_RBP) { st->rbp_how = 1; st->rbp_off = off; }
			else if (reg == R_RA) { st->ra_how = 1; st->ra_off = off; }
			break;
		case 0x06: /* restore_extended */
			reg = uleb(&p, end);
			if (reg == R_RBP && init) { st->rbp_how = init->rbp_how; st->rbp_off = init->rbp_off; }
			break;
		case 0x07: /* undefined */
			reg = uleb(&p, end);
			if (reg == R_RA)
				st->ra_how = 3; /* outermost frame */
			if (reg == R_RBP)
				st->rbp_how = 2;
			break;
		case 0x08: /* same_value */
			reg = uleb(&p, end);
			if (reg == R_RBP)
				st->rbp_how = 0;
			break;
		case 0x09: /* register */
			reg = uleb(&p, end);
			(void)uleb(&p, end);
			if (reg == R_RBP || reg == R_RA)
				return -1;
			break;
		case 0x0a: /* remember_state */
			if (depth == 8)
				return -1;
			stack[depth++] = *st;
			break;
		case 0x0b: /* restore_state */
			if (depth == 0)
				return -1;
			*st = stack[--depth];
			break;
		case 0x0c: /* def_cfa */
			st->cfa_reg = (int)uleb(&p, end);
			st->cfa_off = (int64_t)uleb(&p, end);
			break;
		case 0x12: /* def_cfa_sf */
			st->cfa_reg = (int)uleb(&p, end);
			st->cfa_off = sleb(&p, end) * daf;
			break;
		case 0x0d: /* def_cfa_register */
			st->cfa_reg = (int)uleb(&p, end);
			break;
		case 0x0e: /* def_cfa_offset */
			st->cfa_off = (int64_t)uleb(&p, end);
			break;
		case 0x13: /* def_cfa_offset_sf */
			st->cfa_off = sleb(&p, end) * daf;
			break;
		case 0x2e: /* GNU_args_size */
			(void)uleb(&p, end);
			break;
		case 0x2f: /* GNU_negative_offset_extended */
			reg = uleb(&p, end);
			off = -(int64_t)uleb(&p, end) * daf;
			goto setoff;
		default:
			/* expressions (0x0f, 0x10, 0x16), val_offset, ...: not ours */
			return -1;
		}
	}
	return 0;
}

/* Compute the rule for pc (already adjusted to lie inside the call). */
static struct rule compute_rule(uintptr_t pc)
{
	struct rule bad = { .flags = RULE_BAD }, r;
	struct dwarf_eh_bases b;
	const uint8_t *fde = _Unwind_Find_FDE((void *)pc, &b), *p, *fend, *cie, *cend;
	uint32_t len, cie_off;
	uint64_t caf, pc_begin, pc_range, ra_reg;
	int64_t daf;
	uint8_t fde_enc = 0, version;
	const char *aug;
	int has_z = 0;
	struct cfa_state st = { .cfa_reg = R_RSP, .cfa_off = 8, .ra_how = 1, .ra_off = -8 }, init;

	if (!fde)
		return bad;
	memcpy(&len, fde, 4);
	if (len == 0 || len == 0xffffffffu)
		return bad;
	fend = fde + 4 + len;
	memcpy(&cie_off, fde + 4, 4);
	cie = fde + 4 - cie_off;
	memcpy(&len, cie, 4);
	if (len == 0 || len == 0xffffffffu)
		return bad;
	cend = cie + 4 + len;
	p = cie + 8; /* length, CIE id */
	version = *p++;
	aug = (const char *)p;
	p += strnlen(aug, (size_t)(cend - p)) + 1;
	if (p >= cend)
		return bad;
	if (aug[0] == 'e' && aug[1] == 'h')
		return bad;
	caf = uleb(&p, cend);
	daf = sleb(&p, cend);
	ra_reg = version == 1 ? *p++ : uleb(&p, cend);
	if (ra_reg != R_RA)
		return bad;
	if (aug[0] == 'z') {
		uint64_t alen = uleb(&p, cend);
		const uint8_t *aend = p + alen, *q = p;
		const char *a;

		has_z = 1;
		if (aend > cend)
			return bad;
		for (a = aug + 1; *a; a++) {
			if (*a == 'R') {
				if (q >= aend)
					return bad;
				fde_enc = *q++;
			} else if (*a == 'P') {
				uint64_t dummy;
				uint8_t enc;

				if (q >= aend)
					return bad;
				enc = *q++;
				if (read_enc(&q, aend, enc & 0x7f, &b, &dummy) < 0)
					return bad;
			} else if (*a == 'L') {
				q++;
			} else if (*a == 'S' || *a == 'B') {
				/* signal frame / BTI: 'S' means the pc is not a return address */
				if (*a == 'S')
					return bad;
			} else {
				return bad;
			}
		}
		p = aend;
	}
	/* CIE initial instructions */
	if (run_cfa(p, cend, 0, UINT64_MAX, caf, daf, &st, NULL, fde_enc, &b) < 0)
		return bad;
	init = st;
	/* FDE */
	p = fde + 8;
	if (read_enc(&p, fend, fde_enc, &b, &pc_begin) < 0 ||
	    read_enc(&p, fend, fde_enc & 0x0f, &b, &pc_range) < 0)
		return bad;
	if (pc < pc_begin || pc >= pc_begin + pc_range)
		return bad;
	if (has_z) {
		uint64_t alen = uleb(&p, fend);

		p += alen;
		if (p > fend)
			return bad;
	}
	if (run_cfa(p, fend, pc_begin, pc, caf, daf, &st, &init, fde_enc, &b) < 0)
		return bad;
	if (st.ra_how == 3) {
		struct rule end = { .flags = RULE_END };

		return end;
	}
	if ((st.cfa_reg != R_RSP && st.cfa_reg != R_RBP) || st.rbp_how == 2 || st.ra_how != 1 ||
	    st.cfa_off < INT32_MIN || st.cfa_off > INT32_MAX || st.rbp_off < INT16_MIN ||
	    st.rbp_off > INT16_MAX || st.ra_off % 8 || st.ra_off / 8 < INT8_MIN || st.ra_off / 8 > INT8_MAX)
		return bad;
	memset(&r, 0, sizeof(r));
	r.cfa_off = (int32_t)st.cfa_off;
	r.rbp_off = (int16_t)st.rbp_off;
	r.ra_off8 = (int8_t)(st.ra_off / 8);
	r.flags = RULE_OK | (st.cfa_reg == R_RBP ? CFA_RBP : 0) | (st.rbp_how == 1 ? RBP_SAVED : 0);
	return r;
}

static inline uint64_t hash_pc(uintptr_t pc)
{
	return ((uint64_t)pc * 0x9E3779B97F4A7C15ULL) >> (64 - CACHE_BITS);
}

static struct rule rule_for(uintptr_t pc)
{
	struct slot *s = &cache[hash_pc(pc)];
	uint64_t q1 = atomic_load_explicit(&s->seq, memory_order_acquire), k, v;
	struct rule r;

	if (!(q1 & 1)) {
		k = atomic_load_explicit(&s->key, memory_order_acquire);
		v = atomic_load_explicit(&s->rule, memory_order_acquire);
		atomic_thread_fence(memory_order_acquire);
		if (k == pc && atomic_load_explicit(&s->seq, memory_order_relaxed) == q1)
			return unpack(v);
	}
	r = compute_rule(pc);
	q1 = atomic_load_explicit(&s->seq, memory_order_relaxed);
	if (!(q1 & 1) && atomic_compare_exchange_strong(&s->seq, &q1, q1 + 1)) {
		atomic_store_explicit(&s->key, pc, memory_order_relaxed);
		atomic_store_explicit(&s->rule, pack(r), memory_order_relaxed);
		atomic_store_explicit(&s->seq, q1 + 2, memory_order_release);
	}
	return r;
}

/* Stack bounds of the calling thread, looked up once per thread. */
static __thread uintptr_t stack_lo, stack_hi __attribute__((tls_model("initial-exec")));

static int stack_bounds(void)
{
	pthread_attr_t a;
	void *addr;
	size_t size;

	if (stack_hi)
		return 0;
	if (pthread_getattr_np(pthread_self(), &a) != 0)
		return -1;
	if (pthread_attr_getstack(&a, &addr, &size) != 0) {
		pthread_attr_destroy(&a);
		return -1;
	}
	pthread_attr_destroy(&a);
	stack_lo = (uintptr_t)addr;
	stack_hi = (uintptr_t)addr + size;
	return 0;
}

int sp_unwind_init(void)
{
	void *p = mmap(NULL, sizeof(struct slot) << CACHE_BITS, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	if (p == MAP_FAILED)
		return -1;
	cache = p;
	return 0;
}

/*
 * Walk the stack of the calling thread. pcs[0] is the return address into
 * our caller's caller... precisely: the frames start with the caller of
 * sp_unwind. Returns the number of pcs (>= 0), or -1 when the walk met
 * something it cannot unwind before reaching the outermost frame (the
 * caller then uses backtrace()).
 */
__attribute__((noinline)) int sp_unwind(uintptr_t *pcs, int max)
{
	uintptr_t rsp, rbp, pc, cfa;
	int n = 0, first = 1;
	int saved = errno;

	if (!cache || stack_bounds() < 0) {
		errno = saved;
		return -1;
	}
	errno = saved;
	__asm__ volatile("lea (%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2"
			 : "=r"(pc), "=r"(rsp), "=r"(rbp));
	while (n < max) {
		/* A return address may follow a call to a noreturn function at
		 * the very end of its caller: look up the call itself (pc - 1). */
		struct rule r = rule_for(first ? pc : pc - 1);
		uintptr_t ra_at;

		if (r.flags & RULE_END)
			return n;
		if (!(r.flags & RULE_OK))
			return -1;
		cfa = ((r.flags & CFA_RBP) ? rbp : rsp) + (intptr_t)r.cfa_off;
		ra_at = cfa + (intptr_t)r.ra_off8 * 8;
		if (cfa <= rsp || ra_at < stack_lo || ra_at + 8 > stack_hi)
			return n; /* left the stack: the walk ends here */
		if (r.flags & RBP_SAVED) {
			uintptr_t at = cfa + (intptr_t)r.rbp_off;

			if (at < stack_lo || at + 8 > stack_hi)
				return n;
			rbp = *(const uintptr_t *)at;
		}
		pc = *(const uintptr_t *)ra_at;
		rsp = cfa;
		first = 0;
		if (pc == 0)
			return n; /* outermost frame */
		pcs[n++] = pc;
	}
	return n;
}

#else /* not x86-64: always fall back to backtrace() */

int sp_unwind_init(void)
{
	return -1;
}

int sp_unwind(uintptr_t *pcs, int max)
{
	(void)pcs;
	(void)max;
	return -1;
}

#endif
