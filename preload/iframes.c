/* SPDX-License-Identifier: MIT */
/*
 * iframes.c - Ruby's and PHP's frames in a sampled stack (the readers:
 * rbframes.c, phpframes.c), the way pyframes.c puts CPython's there.
 *
 * pyframes.c's detection calls sp_if_detect when the process runs no
 * CPython; when it finds Ruby or PHP, pyframes.c's state is on (so the
 * walk memo, which knows native frames only, is not used) and every
 * sampled stack comes to sp_if_splice. Unsampled executions never come
 * here: their cost is pyframes.c's, one load of its state.
 *
 * A frame is a function of a file (a Ruby iseq or C method, a PHP
 * zend_function): sent once under a number as an SP_REC_PYCODE record
 * whose major is 0 and minor the language (SP_IF_RUBY, SP_IF_PHP), its
 * name and file, no line table; a frame is then an SP_PYFRAME pc of
 * (number, line): the line itself where a Python frame has its
 * instruction offset. The CLI names their module "ruby" or "php".
 *
 * The interpreter's frames stand, innermost first, where the stack first
 * enters the interpreter's own code (libruby, the php binary): between
 * the extension that called SQLite and the interpreter's C frames that
 * ran the script.
 */
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include "sp_preload.h"

#define IF_SLOTS 8192 /* remembered functions (power of two) */

const struct sp_if_lang *sp_if_lang; /* NULL: no Ruby or PHP read */
static uintptr_t text_lo, text_hi;   /* the interpreter's executable code */
static pid_t self_pid;
static pid_t said_pid; /* the process whose interpreter is not read */

struct if_slot {
	uintptr_t k[3];
	uint32_t num;
};
static struct if_slot *slots;
static uint32_t nslots, salt;
static pthread_mutex_t slots_lock = PTHREAD_MUTEX_INITIALIZER;

/* Reading: process_vm_readv of ourselves for the first stacks (an
 * address that is not mapped fails instead of faulting), plain loads of
 * checked addresses once the reader said its layout checked out
 * (sp_if_direct). */
atomic_int sp_if_direct;

int sp_if_rd_checked(uintptr_t addr, void *out, size_t n)
{
	struct iovec l = { out, n }, r = { (void *)addr, n };

	return process_vm_readv(self_pid, &l, 1, &r, 1, 0) == (ssize_t)n ? 0 : -1;
}

void sp_if_info(struct sp_thread *t, uint32_t status, const char *text)
{
	size_t n = text ? strnlen(text, 200) : 0;
	uint32_t rl = (uint32_t)((sizeof(struct sp_rec_pyinfo) + n + 7) & ~(size_t)7);
	struct sp_rec_pyinfo *r = sp_rec_reserve(t, rl);

	if (!r)
		return;
	memset(r, 0, rl);
	r->h.type = SP_REC_PYINFO;
	r->h.len = rl;
	r->pid = sp_my_pid();
	r->tid = t->tid;
	r->status = status;
	r->text_len = (uint32_t)n;
	memcpy(r + 1, text, n);
	sp_rec_commit(t, rl);
}

struct text_find {
	uintptr_t addr, lo, hi;
};

static int text_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct text_find *f = arg;
	uintptr_t lo = UINTPTR_MAX, hi = 0;
	int in = 0;

	(void)size;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *p = &info->dlpi_phdr[i];
		uintptr_t a = info->dlpi_addr + p->p_vaddr;

		if (p->p_type != PT_LOAD || !(p->p_flags & PF_X))
			continue;
		if (a < lo)
			lo = a;
		if (a + p->p_memsz > hi)
			hi = a + p->p_memsz;
		in |= f->addr >= a && f->addr < a + p->p_memsz;
	}
	if (!in)
		return 0;
	f->lo = lo;
	f->hi = hi;
	return 1;
}

/* Ruby, then PHP. 1 when one of them is read from now on. Only dlsym,
 * dladdr and dl_iterate_phdr: nothing is loaded. */
int sp_if_detect(struct sp_thread *t)
{
	static const struct sp_if_lang *const langs[] = { &sp_if_ruby, &sp_if_php };
	const struct sp_if_lang *found = NULL;
	struct text_find tf = { 0, 0, 0 };

	if (self_pid != getpid()) { /* a new process (fork): new numbers */
		self_pid = getpid();
		pthread_mutex_init(&slots_lock, NULL);
		if (slots)
			memset(slots, 0, IF_SLOTS * sizeof(*slots));
		nslots = 0;
		salt = ((uint32_t)sp_now() ^ (uint32_t)self_pid << 7) & 0xfff;
	}
	if (said_pid == self_pid)
		return 0; /* said already: looked for again at each new module */
	for (size_t i = 0; i < sizeof(langs) / sizeof(langs[0]) && !found; i++) {
		int r = langs[i]->detect(t, &tf.addr);

		if (r > 0)
			found = langs[i];
		else if (r < 0) {
			said_pid = self_pid; /* its interpreter, not read: said once */
			return 0;
		}
	}
	if (!found)
		return 0;
	if (!slots) {
		void *m = mmap(NULL, IF_SLOTS * sizeof(*slots), PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (m == MAP_FAILED)
			return 0;
		slots = m;
	}
	if (tf.addr && dl_iterate_phdr(text_cb, &tf) > 0) {
		text_lo = tf.lo;
		text_hi = tf.hi;
	}
	/* 4 times the depth, at most SP_STACK_MAX (sp_stack_span) */
	sp_cfg.depth_interp = sp_cfg.depth * 4 < SP_STACK_MAX ? sp_cfg.depth * 4 : SP_STACK_MAX;
	sp_if_lang = found;
	return 1;
}

/* The number of the function whose identity is k, sending its name and
 * file first if it is new; 0 when they cannot be read or sent. The
 * caller holds slots_lock. */
static uint32_t number(struct sp_thread *t, const uintptr_t k[3], uintptr_t frame)
{
	const uint32_t rmax =
		(uint32_t)((sizeof(struct sp_rec_pycode) + SP_IF_NAME_MAX + SP_IF_FILE_MAX + 7) &
			   ~(size_t)7);
	uint64_t h = ((uint64_t)(k[0] ^ k[1] * 31 ^ k[2] * 17) * 0x9E3779B97F4A7C15ULL) >> 51;
	uint32_t num = 0;

	for (uint32_t n = 0; n < 16; n++) {
		struct if_slot *c = &slots[(h + n) & (IF_SLOTS - 1)];

		if (c->num && !memcmp(c->k, k, sizeof(c->k))) {
			num = c->num;
			break;
		}
		if (!c->num || n == 15) {
			struct sp_rec_pycode *r;
			char *buf;
			int nl, fl;
			uint32_t rl;

			if (nslots >= (1u << 19) - 1)
				break;
			r = sp_rec_reserve(t, rmax);
			if (!r)
				break;
			buf = (char *)(r + 1);
			if (sp_if_lang->describe(frame, k, buf, &nl, buf + SP_IF_NAME_MAX, &fl) <
			    0) {
				sp_rec_cancel(t);
				break;
			}
			memmove(buf + nl, buf + SP_IF_NAME_MAX, (size_t)fl);
			rl = (uint32_t)((sizeof(*r) + (size_t)nl + (size_t)fl + 7) & ~(size_t)7);
			memset(buf + nl + fl, 0, rl - sizeof(*r) - (size_t)nl - (size_t)fl);
			memset(r, 0, sizeof(*r));
			num = salt << 19 | ++nslots;
			r->h.type = SP_REC_PYCODE;
			r->h.len = rl;
			r->pid = sp_my_pid();
			r->tid = t->tid;
			r->code = num;
			r->major = 0; /* not CPython: the line is the frame's offset */
			r->minor = sp_if_lang->id;
			r->name_len = (uint16_t)nl;
			r->file_len = (uint16_t)fl;
			sp_rec_commit(t, rl);
			memcpy(c->k, k, sizeof(c->k));
			c->num = num;
			break;
		}
	}
	return num;
}

/*
 * Put the calling thread's interpreter frames into pcs[0..n) (innermost
 * first, room for cap) before its first pc in the interpreter's code, or
 * after the last one when none is (the walk was cut at its depth).
 * Returns the new number of pcs. Keeps errno.
 */
int sp_if_splice(struct sp_thread *t, uintptr_t *pcs, int n, int cap)
{
	/* the thread's page: the caller holds its walk buffers (walk_busy) */
	uintptr_t *fr = t->more->py_code, *out = t->more->py_out;
	uint32_t *line = t->more->py_off;
	int saved = errno, nf, at, i, j = 0;

	nf = sp_if_lang->frames(t, fr, line, SP_PY_FRAMES_MAX);
	if (nf <= 0) {
		errno = saved;
		return n;
	}
	if (cap > SP_STACK_MAX + 8)
		cap = SP_STACK_MAX + 8;
	for (at = 1; at < n && pcs[at] - text_lo >= text_hi - text_lo; at++)
		;
	for (i = 0; i < at && j < cap; i++)
		out[j++] = pcs[i];
	pthread_mutex_lock(&slots_lock);
	for (i = 0; i < nf && j < cap; i++) {
		uintptr_t k[3];
		uint32_t num;

		if (sp_if_lang->ident(fr[i], k) < 0)
			continue;
		num = number(t, k, fr[i]);
		if (num)
			out[j++] = (uintptr_t)SP_PYFRAME(num, line[i]);
	}
	pthread_mutex_unlock(&slots_lock);
	for (i = at; i < n && j < cap; i++)
		out[j++] = pcs[i];
	memcpy(pcs, out, (size_t)j * sizeof(*pcs));
	errno = saved;
	return j;
}
