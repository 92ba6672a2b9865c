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
 * cache. A warm walk is a hash probe and two loads per frame, about 18
 * instructions.
 *
 * What it does not do: DWARF expressions (signal frames, PLT stubs),
 * register rules other than "saved at CFA+n" for rbp, architectures other
 * than x86-64. Where it meets one it stops and says so (-1), and the
 * caller falls back to backtrace(). Every stack read stays within the
 * thread's stack (one bound test per frame: see the cache), so a wrong
 * rule truncates a stack, it never faults.
 */
#include <errno.h>
#include <execinfo.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

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
	int16_t rbp_off; /* caller's rbp at CFA + rbp_off, if RBP_SAVED */
	int8_t ra_off8;  /* return address at CFA + 8 * ra_off8 */
	uint8_t flags;
};
#define CFA_RBP 1 /* CFA = rbp + off (else rsp + off) */
#define RBP_SAVED 2
#define RULE_OK 4
#define RULE_BAD 8  /* cannot unwind through this pc */
#define RULE_END 16 /* outermost frame: the return address is undefined */

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
		if (end - *p < 8)
			return -1;
		memcpy(&v, *p, 8);
		*p += 8;
		break;
	case 0x01: v = uleb(p, end); break;
	case 0x09: v = (uint64_t)sleb(p, end); break;
	case 0x02: {
		uint16_t x;
		if (end - *p < 2)
			return -1;
		memcpy(&x, *p, 2);
		*p += 2;
		v = x;
		break;
	}
	case 0x03: {
		uint32_t x;
		if (end - *p < 4)
			return -1;
		memcpy(&x, *p, 4);
		*p += 4;
		v = x;
		break;
	}
	case 0x04:
		if (end - *p < 8)
			return -1;
		memcpy(&v, *p, 8);
		*p += 8;
		break;
	case 0x0a: {
		int16_t x;
		if (end - *p < 2)
			return -1;
		memcpy(&x, *p, 2);
		*p += 2;
		v = (uint64_t)(int64_t)x;
		break;
	}
	case 0x0b: {
		int32_t x;
		if (end - *p < 4)
			return -1;
		memcpy(&x, *p, 4);
		*p += 4;
		v = (uint64_t)(int64_t)x;
		break;
	}
	case 0x0c:
		if (end - *p < 8)
			return -1;
		memcpy(&v, *p, 8);
		*p += 8;
		break;
	default: return -1;
	}
	switch (enc & 0x70) {
	case 0x00: break;
	case 0x10: v += (uint64_t)(uintptr_t)start; break;    /* pcrel */
	case 0x20: v += (uint64_t)(uintptr_t)b->tbase; break; /* textrel */
	case 0x30: v += (uint64_t)(uintptr_t)b->dbase; break; /* datarel */
	case 0x40: v += (uint64_t)(uintptr_t)b->func; break;  /* funcrel */
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
			if (lo == R_RBP) {
				st->rbp_how = 1;
				st->rbp_off = off;
			} else if (lo == R_RA) {
				st->ra_how = 1;
				st->ra_off = off;
			}
			continue;
		}
		if (hi == 0xc0) { /* restore */
			if (lo == R_RBP && init) {
				st->rbp_how = init->rbp_how;
				st->rbp_off = init->rbp_off;
			}
			if (lo == R_RA && init) {
				st->ra_how = init->ra_how;
				st->ra_off = init->ra_off;
			}
			continue;
		}
		switch (op) {
		case 0x00: break; /* nop */
		case 0x01:        /* set_loc */
			if (read_enc(&p, end, fde_enc, b, &loc) < 0)
				return -1;
			if (loc > target)
				return 0;
			break;
		case 0x02: delta = *p++; goto adv;
		case 0x03: {
			uint16_t x;
			if (end - p < 2)
				return -1;
			memcpy(&x, p, 2);
			p += 2;
			delta = x;
			goto adv;
		}
		case 0x04: {
			uint32_t x;
			if (end - p < 4)
				return -1;
			memcpy(&x, p, 4);
			p += 4;
			delta = x;
			goto adv;
		}
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
			if (reg == R_RBP) {
				st->rbp_how = 1;
				st->rbp_off = off;
			} else if (reg == R_RA) {
				st->ra_how = 1;
				st->ra_off = off;
			}
			break;
		case 0x06: /* restore_extended */
			reg = uleb(&p, end);
			if (reg == R_RBP && init) {
				st->rbp_how = init->rbp_how;
				st->rbp_off = init->rbp_off;
			}
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
		case 0x0d: /* def_cfa_register */ st->cfa_reg = (int)uleb(&p, end); break;
		case 0x0e: /* def_cfa_offset */ st->cfa_off = (int64_t)uleb(&p, end); break;
		case 0x13: /* def_cfa_offset_sf */ st->cfa_off = sleb(&p, end) * daf; break;
		case 0x2e: /* GNU_args_size */ (void)uleb(&p, end); break;
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
	    st.rbp_off > INT16_MAX || st.ra_off % 8 || st.ra_off / 8 < INT8_MIN ||
	    st.ra_off / 8 > INT8_MAX)
		return bad;
	memset(&r, 0, sizeof(r));
	r.cfa_off = (int32_t)st.cfa_off;
	r.rbp_off = (int16_t)st.rbp_off;
	r.ra_off8 = (int8_t)(st.ra_off / 8);
	r.flags = RULE_OK | (st.cfa_reg == R_RBP ? CFA_RBP : 0) | (st.rbp_how == 1 ? RBP_SAVED : 0);
	return r;
}

/*
 * The cache: return address -> how to step over its frame. SLOTS slots of
 * two words {key, val}, written and read with relaxed atomics, no lock. A
 * writer stores val, then key = pc ^ val ^ salt; a reader takes the slot
 * for pc iff key ^ val ^ pc is the salt of one of the classes below, and
 * the salt says how to read val. A slot torn by concurrent writers (the
 * key of one write, the val of another) fails that test but with
 * negligible probability; then a wrong rule is applied, which may end
 * that walk early or with a wrong frame, never fault (the bounds argument
 * below). The salts differ from each other and from 0 in bits above 47,
 * so a whole slot for pc' never passes for a pc != pc' (user-space pcs are
 * below 2^47), in any class.
 *
 *   K_SP (salt 0): CFA = rsp + lo32(val); the caller's rbp is at
 *          CFA + (int32)hi32(val), or unchanged if hi32 is 0; the return
 *          address at CFA - 8. Frames without a frame pointer (-O2).
 *   K_FP:  CFA = rbp + val, the caller's rbp at CFA - 16, the return
 *          address at CFA - 8. Frame-pointer frames.
 *   K_END: the outermost frame (its return address is undefined); val 0.
 *   K_GEN: anything else, val a packed struct rule (gen_pack), taken by
 *          the slow path (walk_slow), e.g. frames we cannot unwind.
 *
 * Bounds with one test per frame. The walk keeps rsp in [fp + 16, hi - 8]
 * (fp: sp_unwind's frame, hi: the top of the thread's stack; every saved
 * register of a caller lies in that range) and ends where a CFA leaves
 * it. Every val ever written, and the 0 of an empty slot, has (int32)
 * hi32(val) in [-lo32(val), 0] (encode and gen_pack make sure), so
 * whatever class a reader takes a val for, K_SP reads only in
 * [rsp - 8, CFA] with CFA <= hi - 8, and K_FP and K_GEN check addresses.
 */
#ifndef CACHE_BITS
#define CACHE_BITS 14
#endif
#define SLOTS (1u << CACHE_BITS)
#define SALT_FP 0xffffffff80000000ull /* an imm32 for cmp */
#define SALT_GEN (1ull << 62)
#define SALT_END (1ull << 61)

/* SLOTS slots of 16 bytes; NULL before sp_unwind_init */
static _Atomic uint64_t *_Atomic cache;

/* The slot of pc, as a byte offset into the cache: bits 4..17 of the low
 * 32 bits of pc times an odd constant (so they depend on bits 0..17 of pc).
 * Two instructions; pcs that share a slot take turns in it. */
static inline size_t slot_of(uintptr_t pc)
{
	return ((uint32_t)pc * 0x9E3779B1u) & ((SLOTS - 1) << 4);
}

/* K_GEN: lo32 = bit 31 | cfa_off in 31 bits; hi32 = ~(flags | ra_off8 << 5
 * | rbp_off << 13), in [-2^29, -1] as int32. Returns 0, or -1 when
 * cfa_off does not fit. */
static int gen_pack(struct rule r, uint64_t *val)
{
	uint32_t h =
		r.flags | (uint32_t)(uint8_t)r.ra_off8 << 5 | (uint32_t)(uint16_t)r.rbp_off << 13;

	if (r.cfa_off < -(1 << 30) || r.cfa_off >= (1 << 30))
		return -1;
	*val = (0x80000000u | ((uint32_t)r.cfa_off & 0x7fffffffu)) | (uint64_t)~h << 32;
	return 0;
}

static struct rule gen_unpack(uint64_t val)
{
	uint32_t h = ~(uint32_t)(val >> 32);
	struct rule r = {
		.cfa_off = (int32_t)((uint32_t)val << 1) >> 1,
		.rbp_off = (int16_t)(uint16_t)(h >> 13),
		.ra_off8 = (int8_t)(uint8_t)(h >> 5),
		.flags = (uint8_t)(h & 0x1f),
	};

	return r;
}

/* Salt and val of rule r (see the cache). Returns 0, or -1 when r is not
 * to be cached. */
static int encode(struct rule r, uint64_t *salt, uint64_t *val)
{
	int ok = (r.flags & RULE_OK) && r.ra_off8 == -1;

	if (ok && !(r.flags & CFA_RBP) && r.cfa_off >= 8) {
		if (!(r.flags & RBP_SAVED)) {
			*salt = 0;
			*val = (uint64_t)r.cfa_off;
			return 0;
		}
		/* the saved rbp lies in the callee's frame, below the return
		 * address: at rsp or above, at CFA - 16 or below */
		if (r.rbp_off >= -r.cfa_off && r.rbp_off <= -16) {
			*salt = 0;
			*val = (uint64_t)r.cfa_off | (uint64_t)(uint32_t)(int32_t)r.rbp_off << 32;
			return 0;
		}
	}
	if (ok && (r.flags & CFA_RBP) && (r.flags & RBP_SAVED) && r.cfa_off >= 16 &&
	    r.rbp_off == -16) {
		*salt = SALT_FP;
		*val = (uint64_t)r.cfa_off;
		return 0;
	}
	if (r.flags & RULE_END) {
		*salt = SALT_END;
		*val = 0;
		return 0;
	}
	*salt = SALT_GEN;
	return gen_pack(r, val);
}

/* Bounds of the calling thread's stack, looked up once per thread. */
static __thread struct {
	uintptr_t lo, hi;
} stack __attribute__((tls_model("initial-exec")));

/* Fills `stack` for the calling thread; errno is preserved. Returns 0 or
 * -1. Cold: pthread_getattr_np reads /proc/self/maps in the main thread. */
/* The loader's record of the main thread's stack top (ld.so exports it). */
extern void *__libc_stack_end;

__attribute__((noinline, cold)) static int stack_bounds(void)
{
	pthread_attr_t a;
	void *addr;
	size_t size;
	int saved = errno, rc = -1;

	if (syscall(SYS_gettid) == getpid() && __libc_stack_end) {
		/* The main thread: glibc's pthread_getattr_np would read
		 * /proc/self/maps for it (~140,000 instructions, and more in a
		 * process with many mappings). Every frame lies below the
		 * stack end the loader recorded, in its page or below; the
		 * walk never reads beneath the caller's own stack pointer, so
		 * the low bound only has to be below every frame. */
		struct rlimit rl;
		uintptr_t hi = ((uintptr_t)__libc_stack_end + 4095) & ~(uintptr_t)4095;
		uintptr_t span = (uintptr_t)1 << 30;

		if (getrlimit(RLIMIT_STACK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
		    rl.rlim_cur < span)
			span = (uintptr_t)rl.rlim_cur + 65536;
		stack.hi = hi;
		stack.lo = hi > span ? hi - span : 0;
		errno = saved;
		return 0;
	}
	{
		/* Another thread. glibc puts its descriptor (pthread_self(),
		 * the thread pointer) at the top of the thread's stack block,
		 * its static TLS just below, and the stack below that, all in
		 * one mapping (a stack the program gave, pthread_attr_setstack,
		 * too): every frame lies below the descriptor, and the walk
		 * reads nothing beneath the caller's stack pointer, so the low
		 * bound only has to be below the frames of later walks - taken
		 * 1 MiB below this one's (deeper walks go to backtrace()).
		 * pthread_getattr_np, the fallback, would also malloc and ask
		 * the kernel for the thread's CPU affinity (sched_getaffinity:
		 * a system call a seccomp filter installed after the program's
		 * first query may not allow, issue 23). */
		uintptr_t here = (uintptr_t)__builtin_frame_address(0);
		uintptr_t tp = (uintptr_t)pthread_self();

		if (tp > here && tp - here < ((uintptr_t)1 << 30)) {
			stack.hi = tp;
			stack.lo = here > ((uintptr_t)1 << 20) ? here - ((uintptr_t)1 << 20) : 0;
			errno = saved;
			return 0;
		}
	}
	if (pthread_getattr_np(pthread_self(), &a) != 0)
		goto out;
	if (pthread_attr_getstack(&a, &addr, &size) == 0 && size >= 64) {
		stack.lo = (uintptr_t)addr;
		stack.hi = (uintptr_t)addr + size;
		rc = 0;
	}
	pthread_attr_destroy(&a);
out:
	errno = saved;
	return rc;
}

int sp_stack_contains(uintptr_t addr, size_t len)
{
	if (!stack.hi && stack_bounds() < 0)
		return 0;
	return addr >= stack.lo && addr < stack.hi && stack.hi - addr >= len;
}

/* Maps the cache, once per process; later calls return 0. Returns -1 if
 * mmap fails (then sp_unwind always returns -1). */
int sp_unwind_init(void)
{
	_Atomic uint64_t *none = NULL;
	size_t size = 16 * (size_t)SLOTS;
	void *p;

	if (atomic_load_explicit(&cache, memory_order_acquire))
		return 0;
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
		 -1, 0);
	if (p == MAP_FAILED)
		return -1;
	/* Slot 0 is pc 0's: a key of 1 makes it miss, as sp_unwind needs. */
	atomic_store_explicit((_Atomic uint64_t *)p, 1, memory_order_relaxed);
	if (!atomic_compare_exchange_strong_explicit(&cache, &none, p, memory_order_acq_rel,
						     memory_order_acquire))
		munmap(p, size); /* another thread was first */
	return 0;
}

/* The rule of pc from the cache, or computed (and cached) on a miss. */
static struct rule rule_of(char *c, uintptr_t pc)
{
	_Atomic uint64_t *sl = (_Atomic uint64_t *)(c + slot_of(pc));
	uint64_t key = atomic_load_explicit(&sl[0], memory_order_relaxed);
	uint64_t val = atomic_load_explicit(&sl[1], memory_order_relaxed), salt;
	uint64_t x = key ^ val ^ pc;
	struct rule r = { .ra_off8 = -1, .flags = RULE_OK };
	int saved;

	switch (x) {
	case 0: /* K_SP */
		r.cfa_off = (int32_t)(uint32_t)val;
		r.rbp_off = (int16_t)(val >> 32);
		if (val >> 32)
			r.flags |= RBP_SAVED;
		return r;
	case SALT_FP:
		r.cfa_off = (int32_t)val;
		r.rbp_off = -16;
		r.flags |= CFA_RBP | RBP_SAVED;
		return r;
	case SALT_END: r.flags = RULE_END; return r;
	case SALT_GEN: return gen_unpack(val);
	}
	/* A return address may follow a call to a noreturn function at the
	 * very end of its caller: look up the call itself (pc - 1). */
	saved = errno;
	r = compute_rule(pc - 1);
	errno = saved;
	if (encode(r, &salt, &val) == 0) {
		atomic_store_explicit(&sl[1], val, memory_order_relaxed);
		atomic_store_explicit(&sl[0], pc ^ val ^ salt, memory_order_relaxed);
	}
	return r;
}

/*
 * The rest of a walk of sp_unwind, frame by frame with rule_of: after a
 * miss or a K_GEN rule, and for a thread's first walk. pc, stored already
 * at end[i - 1], is the next frame's; rsp and rbp are as its callee left
 * them; the next pc goes to end[i], i < 0, and pcs is end - max. Every
 * read is checked against [rsp, hi8]; the tests are those of the fast
 * path, for the same result cold and warm. Returns what sp_unwind returns.
 */
__attribute__((noinline, cold)) static int walk_slow(uintptr_t *end, intptr_t i, int max,
						     uintptr_t rsp, uintptr_t rbp, uintptr_t pc)
{
	char *c = (char *)atomic_load_explicit(&cache, memory_order_relaxed);
	uintptr_t hi8 = stack.hi - 8, cfa, ra_at, at;
	struct rule r;

	if (!pc)
		return (int)(max + i - 1); /* outermost frame: dropped */
	for (;;) {
		r = rule_of(c, pc);
		if (r.flags & RULE_END)
			break;
		if (!(r.flags & RULE_OK)) /* no CFI: Go's asmcgocall, else -1 */
			return sp_go_walk(end, i, max, rsp, rbp, pc, hi8);
		cfa = ((r.flags & CFA_RBP) ? rbp : rsp) + (intptr_t)r.cfa_off;
		if (cfa < rsp + 8 || cfa > hi8)
			break; /* left the stack: the walk ends here */
		ra_at = cfa + (intptr_t)r.ra_off8 * 8;
		if (ra_at < rsp || ra_at > hi8)
			break;
		if (r.flags & RBP_SAVED) {
			at = cfa + (intptr_t)r.rbp_off;
			if (at < rsp || at > hi8)
				break;
			rbp = *(const uintptr_t *)at;
		}
		rsp = cfa;
		pc = *(const uintptr_t *)ra_at;
		if (!pc)
			break; /* outermost frame */
		end[i] = pc;
		if (++i == 0)
			break;
	}
	return (int)(max + i);
}

/* sp_unwind when the calling thread's stack bounds are not known yet or fp
 * is not on that stack. */
__attribute__((noinline, cold)) static int walk_first(uintptr_t *pcs, int max, const uintptr_t *fp)
{
	if (!atomic_load_explicit(&cache, memory_order_acquire) ||
	    (!stack.hi && stack_bounds() < 0) || (uintptr_t)fp - stack.lo >= stack.hi - stack.lo)
		return -1;
	if (max <= 0)
		return 0;
	pcs[0] = fp[1];
	if (max == 1)
		return 1 - (fp[1] == 0);
	return walk_slow(pcs + max, 1 - (intptr_t)max, max, (uintptr_t)(fp + 2), fp[0], fp[1]);
}

/* sp_unwind's fast loop from (rsp, rbp, pc): pc, then one per frame. */
static inline __attribute__((always_inline)) int walk_plain(uintptr_t *pcs, int max, uintptr_t rsp,
							    uintptr_t rbp, uintptr_t pc)
{
	char *c = (char *)atomic_load_explicit(&cache, memory_order_relaxed);
	uintptr_t hi8 = stack.hi - 8, *end = pcs + max;
	intptr_t i = -(intptr_t)max;
	uint64_t key, val, x;
	int64_t rbp_off;
	size_t off;

	for (;;) {
		/* pc 0 is the outermost frame: it is stored, and dropped when
		 * its lookup misses (slot 0 never matches 0: sp_unwind_init). */
		end[i] = pc;
		if (unlikely(++i == 0))
			return max - (pc == 0);
		off = slot_of(pc);
		key = atomic_load_explicit((_Atomic uint64_t *)(c + off), memory_order_relaxed);
		val = atomic_load_explicit((_Atomic uint64_t *)(c + off + 8), memory_order_relaxed);
		x = key ^ val ^ pc;
		if (likely(x == 0)) { /* K_SP */
			rsp += (uint32_t)val;
			if (unlikely(rsp > hi8))
				break;
			rbp_off = (int64_t)val >> 32;
			if (rbp_off)
				rbp = *(const uintptr_t *)(rsp + rbp_off);
		} else if (x == SALT_FP) {
			uintptr_t cfa = rbp + val;

			if (unlikely(cfa < rsp + 16 || cfa > hi8))
				break;
			rbp = ((const uintptr_t *)cfa)[-2];
			rsp = cfa;
		} else if (x == SALT_END) {
			break;
		} else {
			return walk_slow(end, i, max, rsp, rbp, pc);
		}
		pc = ((const uintptr_t *)rsp)[-1];
	}
	return (int)(max + i);
}

/*
 * Walk the stack of the calling thread. pcs[0] is the return address into
 * the caller of sp_unwind, then one per frame to the outermost. Returns
 * the number of pcs (>= 0), or -1 when the walk met something it cannot
 * unwind before reaching the outermost frame (the caller then uses
 * backtrace()), or when sp_unwind_init was not run or the thread runs on
 * another stack (sigaltstack). errno is preserved.
 *
 * A warm frame is 17 or 18 instructions (K_SP; tests/check_unwind.c says
 * how to count them): a hash, two loads and a test of the slot, a bound
 * test of the CFA, two loads from the stack, the store of the pc. The loop
 * calls nothing, so the walk saves few registers; the slow path takes
 * over the rest of the walk (walk_slow).
 */
__attribute__((noinline)) int sp_unwind(uintptr_t *pcs, int max)
{
	/* __builtin_frame_address(0) gives this function a frame pointer
	 * (push %rbp; mov %rsp,%rbp): fp[0] is our caller's rbp, fp[1] our
	 * return address, fp + 2 our caller's rsp. */
	const uintptr_t *fp = __builtin_frame_address(0);

	/* Not known yet (lo = hi = 0), or not on this stack. The bounds are
	 * set only after the cache, so the cache walk_plain reads is there. */
	if (unlikely((uintptr_t)fp - stack.lo >= stack.hi - stack.lo))
		return walk_first(pcs, max, fp);
	if (unlikely(max <= 0))
		return 0;
	return walk_plain(pcs, max, (uintptr_t)(fp + 2), fp[0], fp[1]);
}

/*
 * The last walk (the thread's memo, SP_MEMO: sp_preload.h). A walk is a function of where it
 * starts (rsp, rbp and the first pc: a frame of ours), of the rules of the
 * pcs it meets (a function of the pc: the code there) and of the words it
 * reads from the stack. So when a walk would start where this thread's
 * last one started and every word that one read that decided something
 * (each return address, and the saved rbp each frame-pointer CFA was
 * computed from; rbp itself when it came from the start) still holds the
 * value it read, it would climb the same frames to the same pcs: the stack
 * id is the last one's, and a program that issues its queries from one
 * place checks a few words (sp_memo_same) instead of climbing and hashing
 * (the trivial loop: 5 words, ~45 instructions, against ~170). A saved
 * rbp that no frame-pointer frame used later is not checked: its value
 * changes nothing. Only walks the fast loop made alone are noted (every
 * rule cached, none K_GEN, at most SP_MEMO_MAX words), and a library
 * unloaded since (sp_unloads: its rules may be another's now) makes a new
 * walk. Every word checked lies between the walk's start
 * and the top of the stack as the walk found it, above the checker's own
 * frame, so checking never faults. busy (state bit 0) keeps a signal
 * handler that walks on the same thread (it would meet a signal frame
 * first, but nothing is assumed) from using or changing the memo while
 * the thread checks or writes it.
 */

/* sp_unwind's fast loop from (rsp, rbp, pc), noting in memo m the words
 * that decide the walk. Returns sp_unwind's result; *ok 1 when m->w
 * holds them all (no slow path, no overflow). */
static int walk_noting(struct sp_walk_memo *m, uintptr_t *pcs, int max, uintptr_t rsp,
		       uintptr_t rbp, uintptr_t pc, int *ok)
{
	char *c = (char *)atomic_load_explicit(&cache, memory_order_relaxed);
	uintptr_t hi8 = stack.hi - 8, *end = pcs + max, rbp_at = 0;
	struct sp_memo_word *w = m->w, *wend = m->w + SP_MEMO_MAX - 1;
	intptr_t i = -(intptr_t)max;
	uint64_t key, val, x;
	int64_t rbp_off;
	size_t off;
	int over = 0;

	*ok = 0;
	m->rbp0_used = 0;
	for (;;) {
		end[i] = pc;
		if (unlikely(++i == 0)) {
			i = -(pc == 0);
			break;
		}
		off = slot_of(pc);
		key = atomic_load_explicit((_Atomic uint64_t *)(c + off), memory_order_relaxed);
		val = atomic_load_explicit((_Atomic uint64_t *)(c + off + 8), memory_order_relaxed);
		x = key ^ val ^ pc;
		if (likely(x == 0)) { /* K_SP */
			rsp += (uint32_t)val;
			if (unlikely(rsp > hi8))
				break;
			rbp_off = (int64_t)val >> 32;
			if (rbp_off) {
				rbp_at = rsp + rbp_off;
				rbp = *(const uintptr_t *)rbp_at;
			}
		} else if (x == SALT_FP) {
			uintptr_t cfa = rbp + val;

			/* this frame's CFA is rbp's doing: where rbp came from */
			if (rbp_at) {
				w->at = rbp_at;
				w->val = rbp;
				w++;
			} else {
				m->rbp0_used = 1;
			}
			if (unlikely(cfa < rsp + 16 || cfa > hi8))
				break;
			rbp_at = cfa - 16;
			rbp = *(const uintptr_t *)rbp_at;
			rsp = cfa;
		} else if (x == SALT_END) {
			break;
		} else {
			return walk_slow(end, i, max, rsp, rbp, pc);
		}
		pc = ((const uintptr_t *)rsp)[-1];
		w->at = rsp - 8;
		w->val = pc;
		w++;
		if (unlikely(w >= wend)) { /* too deep to note: walk on */
			over = 1;
			w = m->w;
		}
	}
	m->n = (uint32_t)(w - m->w);
	*ok = !over;
	return (int)(max + i);
}

/*
 * A thread whose stacks keep changing (a loop over several call paths,
 * each drawn execution from another) pays for noting walks that never
 * tell: after MISS_REST walks in a row that the memo did not tell, the
 * next REST_WALKS walk without one (no check: rsp0 0; no noting), then
 * it is tried again. A check that tells resets the count (state).
 */
#define MISS_REST 4
#define REST_WALKS 16

int sp_unwind_noting(struct sp_walk_memo *m, uintptr_t *pcs, int max, uintptr_t rsp, uintptr_t rbp,
		     uintptr_t pc, int *noted)
{
	uint64_t unloads = atomic_load_explicit(&sp_unloads, memory_order_relaxed);
	unsigned misses;
	int n, ok;

	*noted = 0;
	if (unlikely(rsp - 16 - stack.lo >= stack.hi - stack.lo)) {
		/* bounds not known yet (the thread's first walk), or another
		 * stack (sigaltstack): walk_first's tests */
		if (!atomic_load_explicit(&cache, memory_order_acquire) ||
		    (!stack.hi && stack_bounds() < 0) || rsp - 16 - stack.lo >= stack.hi - stack.lo)
			return -1;
		if (max <= 0)
			return 0;
		pcs[0] = pc;
		if (max == 1)
			return 1 - (pc == 0);
		return walk_slow(pcs + max, 1 - (intptr_t)max, max, rsp, rbp, pc);
	}
	if (unlikely(max <= 0))
		return 0;
	if (unlikely(m == &sp_more_none.memo))
		return walk_plain(pcs, max, rsp, rbp, pc); /* nowhere to note */
	if (unlikely(m->state & 1))
		return -1; /* a signal handler inside a walk of this thread's:
			    * the memo is not ours to change, libgcc's walk is */
	if (unlikely(m->rest)) {
		m->rest--;
		return walk_plain(pcs, max, rsp, rbp, pc);
	}
	/* a memo there that did not tell: one more walk it missed */
	misses = (m->state >> 1) + (m->rsp0 != 0);
	if (unlikely(misses >= MISS_REST)) {
		m->rsp0 = 0;
		m->state = 0;
		m->rest = REST_WALKS - 1;
		return walk_plain(pcs, max, rsp, rbp, pc);
	}
	m->state = (uint8_t)(misses << 1 | 1);
	atomic_signal_fence(memory_order_seq_cst);
	m->rsp0 = 0;
	n = walk_noting(m, pcs, max, rsp, rbp, pc, &ok);
	if (ok && m->n > 0) { /* sp_memo_same checks one word at least */
		m->rsp0 = rsp;
		m->pc0 = pc;
		m->rbp0 = rbp;
		m->unloads = unloads;
		*noted = 1; /* busy until sp_memo_done */
		return n;
	}
	atomic_signal_fence(memory_order_seq_cst);
	m->state &= (uint8_t)~1u;
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

int sp_unwind_noting(struct sp_walk_memo *m, uintptr_t *pcs, int max, uintptr_t rsp, uintptr_t rbp,
		     uintptr_t pc, int *noted)
{
	(void)pcs;
	(void)max;
	(void)rsp;
	(void)rbp;
	(void)pc;
	*noted = 0;
	return -1;
}

#endif
