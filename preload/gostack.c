/* SPDX-License-Identifier: MIT */
/*
 * gostack.c - a Go program's goroutine frames past runtime.asmcgocall, for
 * the stack walk of a sampled execution (unwind.c's walk_slow).
 *
 * A cgo call (go-sqlite3's, or the program's own C) runs its C code on the
 * thread's system stack (g0), not on the goroutine's: asmcgocall switches
 * stacks and calls the C function. Go's code has no .eh_frame, so the CFI
 * walk stopped at asmcgocall, and no frame of the program's Go code (its
 * main.go line) was ever seen. asmcgocall keeps on the system stack, just
 * above the C function's frame, the goroutine's g and its depth, how far
 * its stack pointer was below the top of the goroutine's stack
 * (g.stack.hi - SP: "can't just save SP, as stack might be copied during
 * a callback", runtime/asm_amd64.s), so the goroutine's stack pointer at
 * the call is g.stack.hi - depth, where the return address into Go lies.
 * From there Go's frame pointers (kept on amd64 since Go 1.7) climb the
 * goroutine's frames: rbp, as the C frames' CFI restored it, is the frame
 * pointer of asmcgocall's caller; each frame holds its caller's frame
 * pointer at [bp] and its return address at [bp + 8].
 *
 * Where g and depth are is read from asmcgocall's own code after the call
 * of C (the return address): MOVQ G(SP), DI; MOVQ 8(DI), SI (g.stack.hi);
 * SUBQ D(SP), SI. Go 1.19 has G = 0x30, D = 0x28; newer ones 8 and 0. A
 * return address there is recognised only in the program's own text and
 * only with that code (any G and D); then it is remembered, so the next
 * walks compare one word. Nothing is looked up by name: a stripped Go
 * program (go build -ldflags=-s) is read the same way. Go code in a shared
 * object (a Go c-shared library) is not followed.
 *
 * Reading: g and the goroutine's stack are the Go runtime's memory, not
 * the thread's stack, whose bounds protect the CFI walk. The first
 * GO_CHECKS walks read them through process_vm_readv on ourselves, which
 * fails (EFAULT) instead of faulting, and check what they read: g's stack
 * bounds ordered and at most 1 GiB apart, the goroutine's stack pointer in
 * them, every frame pointer above the last and inside them, every return
 * address in the program's text. When they all passed, the same chains are
 * read with plain loads and the same checks (as pyframes.c does with
 * CPython's frames); a check that fails in the first walks turns Go frames
 * off for the process (so does a process_vm_readv that a seccomp filter
 * refuses: the stack then ends at asmcgocall, as before). The goroutine is
 * blocked in the C call we are inside, so its stack neither moves nor
 * shrinks meanwhile (the runtime does not shrink the stack of a goroutine
 * in a system call or cgo call).
 *
 * Only sampled executions come here, and only when the walk meets a pc
 * it has no CFI for: a process without Go pays nothing.
 */
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/uio.h>
#include <unistd.h>

#include "sp_preload.h"

#if defined(__x86_64__)

#define GO_CHECKS 4
#define GO_STACK_MAX ((uintptr_t)1 << 30) /* the runtime's maxstacksize on 64-bit */

/* go_state: GO_UNKNOWN until the program's text is known; GO_OFF when
 * Go frames are not read in this process (no text, or a check failed) */
enum { GO_UNKNOWN = 0, GO_ON = 1, GO_OFF = 2 };
static atomic_int go_state;
#define TEXT_MAX 4
static struct {
	uintptr_t lo, hi;
} text[TEXT_MAX]; /* the program's executable segments, as mapped */
static int ntext;
/* asmcgocall's return address from C (0: not met yet), and where it
 * keeps g and depth, relative to its stack pointer */
static _Atomic uintptr_t go_ret;
static atomic_int go_goff, go_doff;
static atomic_int go_checked; /* walks read and checked with process_vm_readv */
static atomic_int go_direct;

/* The program's executable PT_LOAD segments, from the auxiliary vector
 * (no loader lock, no system call). Every thread that calls it finds the
 * same. Returns 0, or -1 when there is none. */
static int find_text(void)
{
	const ElfW(Phdr) *ph = (const ElfW(Phdr) *)getauxval(AT_PHDR);
	size_t n = getauxval(AT_PHNUM);
	uintptr_t bias = 0;
	int k = 0;

	if (!ph || !n)
		return -1;
	for (size_t i = 0; i < n; i++)
		if (ph[i].p_type == PT_PHDR)
			bias = (uintptr_t)ph - ph[i].p_vaddr;
	for (size_t i = 0; i < n && k < TEXT_MAX; i++) {
		if (ph[i].p_type != PT_LOAD || !(ph[i].p_flags & PF_X) || !ph[i].p_filesz)
			continue;
		text[k].lo = bias + ph[i].p_vaddr;
		text[k].hi = bias + ph[i].p_vaddr + ph[i].p_filesz;
		k++;
	}
	ntext = k;
	return k ? 0 : -1;
}

/* Is [pc, pc + len) in one of the program's executable segments? */
static int in_text(uintptr_t pc, size_t len)
{
	for (int k = 0; k < ntext; k++)
		if (pc >= text[k].lo && pc < text[k].hi && text[k].hi - pc >= len)
			return 1;
	return 0;
}

/*
 * Does the code at pc (a return address in the program's text, 24 bytes
 * readable) restore g and the goroutine's stack pointer as asmcgocall does
 * after its call of C? An optional get_tls (MOVQ tlsg(IP), CX: 48 8b 0d
 * rel32, in a position-independent build), then MOVQ G(SP), DI (48 8b 7c
 * 24 G, or 48 8b 3c 24 for 0), MOVQ 8(DI), SI (48 8b 77 08), SUBQ D(SP),
 * SI (48 2b 74 24 D, or 48 2b 34 24). Sets *goff, *doff. Returns 1 or 0.
 */
int sp_go_restore_code(const uint8_t *c, int *goff, int *doff)
{
	if (c[0] == 0x48 && c[1] == 0x8b && c[2] == 0x0d)
		c += 7;
	if (c[0] != 0x48 || c[1] != 0x8b)
		return 0;
	if (c[2] == 0x7c && c[3] == 0x24) {
		*goff = c[4];
		c += 5;
	} else if (c[2] == 0x3c && c[3] == 0x24) {
		*goff = 0;
		c += 4;
	} else {
		return 0;
	}
	if (c[0] != 0x48 || c[1] != 0x8b || c[2] != 0x77 || c[3] != 0x08)
		return 0;
	c += 4;
	if (c[0] != 0x48 || c[1] != 0x2b)
		return 0;
	if (c[2] == 0x74 && c[3] == 0x24)
		*doff = c[4];
	else if (c[2] == 0x34 && c[3] == 0x24)
		*doff = 0;
	else
		return 0;
	return *goff != *doff && !(*goff & 7) && !(*doff & 7) && *goff < 0x80 && *doff < 0x80;
}

/* Is pc asmcgocall's return address from C? Learns it the first time. */
static int is_cgo_return(uintptr_t pc)
{
	uintptr_t known = atomic_load_explicit(&go_ret, memory_order_acquire);
	int st = atomic_load_explicit(&go_state, memory_order_relaxed), goff, doff;

	if (known)
		return pc == known;
	if (st == GO_OFF)
		return 0;
	if (st == GO_UNKNOWN) {
		/* every thread finds the same span: no lock needed */
		if (find_text() < 0) {
			atomic_store(&go_state, GO_OFF);
			return 0;
		}
		atomic_store(&go_state, GO_ON);
	}
	if (!in_text(pc, 24) || !sp_go_restore_code((const uint8_t *)pc, &goff, &doff))
		return 0;
	atomic_store_explicit(&go_goff, goff, memory_order_relaxed);
	atomic_store_explicit(&go_doff, doff, memory_order_relaxed);
	atomic_store_explicit(&go_ret, pc, memory_order_release);
	return 1;
}

/* n bytes at addr into out: a plain load once the first walks checked
 * out, process_vm_readv before (it fails instead of faulting). */
static int rd(uintptr_t addr, void *out, size_t n, int direct)
{
	struct iovec l = { out, n }, r = { (void *)addr, n };

	if (addr < 4096 || addr + n < addr || addr + n > ((uintptr_t)1 << 47))
		return -1;
	if (direct) {
		memcpy(out, (const void *)addr, n);
		return 0;
	}
	return process_vm_readv(getpid(), &l, 1, &r, 1, 0) == (ssize_t)n ? 0 : -1;
}

/*
 * The walk of unwind.c met pc, with no CFI for it; rsp and rbp are as the
 * frame below left them (rsp: the CFA of the C function asmcgocall
 * called). When pc is asmcgocall's return address from C, the goroutine's
 * frames go to end[i], end[i + 1], ... (i < 0; end - max is the walk's
 * first pc) and the walk's result (max + the last i) is returned; else
 * -1 (the walk cannot go on: the caller falls back as before). hi8: the
 * thread stack's top - 8, the bound of reads from the system stack.
 * Keeps errno.
 */
int sp_go_walk(uintptr_t *end, intptr_t i, int max, uintptr_t rsp, uintptr_t rbp, uintptr_t pc,
	       uintptr_t hi8)
{
	uintptr_t g, depth, st[2], sp, fr[2], ra;
	int goff, doff, direct, saved, ok = 0;

	saved = errno;
	if (!is_cgo_return(pc)) {
		errno = saved; /* getauxval may set it */
		return -1;
	}
	goff = atomic_load_explicit(&go_goff, memory_order_relaxed);
	doff = atomic_load_explicit(&go_doff, memory_order_relaxed);
	direct = atomic_load_explicit(&go_direct, memory_order_acquire);
	if (atomic_load_explicit(&go_state, memory_order_relaxed) == GO_OFF)
		goto out; /* a check failed: asmcgocall's frame alone */
	/* g and depth: on the system stack, within the walk's bounds */
	if (rsp + (uintptr_t)goff > hi8 || rsp + (uintptr_t)doff > hi8)
		goto out;
	g = *(const uintptr_t *)(rsp + (uintptr_t)goff);
	depth = *(const uintptr_t *)(rsp + (uintptr_t)doff);
	if ((g & 7) || (depth & 7) || depth < 8 || depth > GO_STACK_MAX)
		goto out;
	/* g.stack: {lo, hi}, g's first field in every Go release */
	if (rd(g, st, sizeof(st), direct) < 0 || st[0] >= st[1] || st[1] - st[0] > GO_STACK_MAX ||
	    depth > st[1] - st[0])
		goto out;
	sp = st[1] - depth; /* the goroutine's stack pointer: the return address */
	if (rd(sp, &ra, sizeof(ra), direct) < 0 || !in_text(ra, 1))
		goto out;
	end[i] = ra;
	if (++i == 0)
		goto done;
	/* the frame-pointer chain from asmcgocall's caller's frame */
	while (rbp > sp && rbp <= st[1] - 16 && !(rbp & 7)) {
		if (rd(rbp, fr, sizeof(fr), direct) < 0)
			goto out;
		if (!fr[1])
			break; /* the goroutine's outermost frame */
		if (!in_text(fr[1], 1))
			goto out;
		end[i] = fr[1];
		if (++i == 0)
			break;
		sp = rbp;
		rbp = fr[0];
	}
done:
	ok = 1;
out:
	if (!direct) {
		if (!ok) {
			/* not the layout we read it as: no more Go frames here */
			atomic_store(&go_state, GO_OFF);
		} else if (atomic_fetch_add(&go_checked, 1) + 1 >= GO_CHECKS) {
			atomic_store_explicit(&go_direct, 1, memory_order_release);
		}
	}
	errno = saved;
	return (int)(max + i);
}

#else

int sp_go_walk(uintptr_t *end, intptr_t i, int max, uintptr_t rsp, uintptr_t rbp, uintptr_t pc,
	       uintptr_t hi8)
{
	(void)end, (void)i, (void)max, (void)rsp, (void)rbp, (void)pc, (void)hi8;
	return -1;
}

#endif
