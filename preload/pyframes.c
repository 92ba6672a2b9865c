/* SPDX-License-Identifier: MIT */
/*
 * pyframes.c - the Python frames of the calling thread, put into a sampled
 * stack where the interpreter's C frames that ran them were.
 *
 * Python's sqlite3 module calls sqlite3_step with the GIL released, so
 * nothing here may need it. It reads the calling thread's own frame
 * chain: that thread is blocked in our shim, so its frames cannot change
 * under us (other threads never touch another thread's frames). Its
 * thread state comes from PyGILState_GetThisThreadState, a thread-local
 * lookup. The layouts are per minor version (py_layouts.h); a version
 * without one is said once (SP_REC_PYINFO) and gets native frames only.
 *
 * The first stacks are read through process_vm_readv on ourselves, which
 * fails (EFAULT) instead of faulting, and checked (see rd): a wrong layout
 * is found there and turns Python frames off, it never crashes the
 * program; after that, plain loads of checked addresses. A frame is one
 * read, a code object's identity another. A code object is sent once
 * (SP_REC_PYCODE: names, file, line table) under a number, and a frame
 * is then (number, instruction offset) in a tagged pc (SP_PYFRAME); the
 * CLI turns offsets into lines.
 *
 * Only sampled executions come here.
 */
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include "py_layouts.h"
#include "sp_preload.h"

#define PY_FRAMES_MAX SP_PY_FRAMES_MAX
#define PY_NAME_MAX 255
#define PY_FILE_MAX 1023
#define PY_TABLE_MAX 16384
#define CODE_SLOTS 8192 /* remembered code objects (power of two) */

/* sp_py_state: PY_UNKNOWN (0) at first; SP_PY_STATE_OFF when the process
 * runs no CPython we can read, for good, or not yet (py_absent: looked
 * for again when the module map changes, sp_py_modules_changed, since
 * CPython may be dlopen'd by an embedding program). The stack capture
 * tests it inline: a process without Python pays nothing per stack. */
enum { PY_UNKNOWN = 0, PY_DETECTING = 2, PY_ON = 3, PY_OFF = SP_PY_STATE_OFF };
atomic_int sp_py_state;
#define py_state sp_py_state
static atomic_int py_absent;
static const struct sp_py_layout *L;
static void *(*get_tstate)(void);
static int (*is_initialized)(void);
static uintptr_t code_type;        /* &PyCode_Type */
static uintptr_t str_type;         /* &PyUnicode_Type */
static uintptr_t eval_lo, eval_hi; /* _PyEval_EvalFrameDefault */
static pid_t self_pid;

/* Code objects sent: identity (address, name, file, first line: an
 * address reused by another code object is another entry) -> number. */
struct code_slot {
	uintptr_t addr, name, file;
	int32_t firstlineno;
	uint32_t num;
};
static struct code_slot *codes;
static uint32_t ncodes, code_salt;
static pthread_mutex_t codes_lock = PTHREAD_MUTEX_INITIALIZER;

/*
 * Reading. A process_vm_readv of our own memory fails on an address that
 * is not mapped instead of faulting, but it costs ~3 us here (11 of them
 * a sample made a Python query 15 times slower at --rate 1). So the first
 * PY_CHECKS stacks with Python frames are read that way and checked: each
 * frame's code object must be of PyCode_Type, its file a str, the chain
 * must end. Once they all were, the layout is known to be this
 * interpreter's, and the same chains (live objects of the calling thread,
 * which is blocked in our shim, held by its frames) are read with plain
 * loads, each address still checked to be a user-space one (py_direct).
 * A check that fails in the first stacks turns Python frames off for the
 * process (SP_PY_UNREADABLE).
 */
#define PY_CHECKS 4
static atomic_int py_checked; /* stacks read and checked with process_vm_readv */
static atomic_int py_direct;

static int rd(uintptr_t addr, void *out, size_t n)
{
	struct iovec l = { out, n }, r = { (void *)addr, n };

	if (addr < 4096 || addr + n < addr || addr + n > (1ULL << 47))
		return -1;
	if (atomic_load_explicit(&py_direct, memory_order_relaxed)) {
		memcpy(out, (const void *)addr, n);
		return 0;
	}
	return process_vm_readv(self_pid, &l, 1, &r, 1, 0) == (ssize_t)n ? 0 : -1;
}

static uintptr_t rd_ptr(uintptr_t addr)
{
	uintptr_t v = 0;

	return rd(addr, &v, sizeof(v)) == 0 ? v : 0;
}

/* Is this CPython, of a version we have a layout for? Only dlsym and
 * dladdr: nothing is loaded. */
static void py_detect(struct sp_thread *t)
{
	const char *(*version)(void);
	const struct sp_py_layout *l = NULL;
	void *eval;
	Dl_info info;
	const ElfW(Sym) *sym = NULL;
	int major = 0, minor = 0;
	char probe;

	const char *off = getenv("SQLPROF_PY_FRAMES");

	if (off && !strcmp(off, "0")) {
		atomic_store(&py_state, PY_OFF); /* native frames only, as asked */
		return;
	}
	*(void **)&version = dlsym(RTLD_DEFAULT, "Py_GetVersion");
	if (!version && sp_if_detect(t)) { /* Ruby or PHP (iframes.c) */
		atomic_store(&py_state, PY_ON);
		return;
	}
	if (!version) {
		atomic_store(&py_absent, 1); /* dlopen'd later, perhaps */
		atomic_store(&py_state, PY_OFF);
		return;
	}
	*(void **)&get_tstate = dlsym(RTLD_DEFAULT, "PyGILState_GetThisThreadState");
	*(void **)&is_initialized = dlsym(RTLD_DEFAULT, "Py_IsInitialized");
	code_type = (uintptr_t)dlsym(RTLD_DEFAULT, "PyCode_Type");
	str_type = (uintptr_t)dlsym(RTLD_DEFAULT, "PyUnicode_Type");
	eval = dlsym(RTLD_DEFAULT, "_PyEval_EvalFrameDefault");
	if (eval && dladdr1(eval, &info, (void **)&sym, RTLD_DL_SYMENT) && sym && sym->st_size) {
		eval_lo = (uintptr_t)eval;
		eval_hi = eval_lo + sym->st_size;
	}
	/* SQLPROF_PY_LAYOUT=3.X reads this CPython with 3.X's layout (to try
	 * a version without one; the tests use it to check that a wrong
	 * layout cuts stacks short and harms nothing) */
	if (getenv("SQLPROF_PY_LAYOUT") &&
	    sscanf(getenv("SQLPROF_PY_LAYOUT"), "%d.%d", &major, &minor) == 2)
		;
	else if (sscanf(version(), "%d.%d", &major, &minor) != 2)
		major = minor = 0;
	if (major)
		for (size_t i = 0; i < sizeof(sp_py_layouts) / sizeof(sp_py_layouts[0]); i++)
			if (sp_py_layouts[i].major == major && sp_py_layouts[i].minor == minor)
				l = &sp_py_layouts[i];
	self_pid = getpid();
	if (!l || !get_tstate || !is_initialized || !code_type || !str_type || !eval_lo) {
		sp_if_info(t, SP_PY_UNSUPPORTED, version());
		atomic_store(&py_state, PY_OFF);
		return;
	}
	if (rd((uintptr_t)&py_state, &probe, 1) < 0) {
		sp_if_info(t, SP_PY_UNREADABLE, version()); /* seccomp, or no such call */
		atomic_store(&py_state, PY_OFF);
		return;
	}
	if (!codes) {
		void *m = mmap(NULL, CODE_SLOTS * sizeof(*codes), PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (m == MAP_FAILED) {
			atomic_store(&py_state, PY_OFF);
			return;
		}
		codes = m;
	}
	/* numbers differ between the images a pid runs (exec): the CLI keys
	 * code objects by pid and number */
	code_salt = ((uint32_t)sp_now() ^ (uint32_t)self_pid << 7) & 0xfff;
	L = l;
	sp_if_info(t, SP_PY_ON, version());
	atomic_store(&py_state, PY_ON);
}

/* A str object's text (compact ASCII, or compact 1-byte latin-1), at
 * most max bytes; returns its length, or -1. */
static int read_str(uintptr_t o, char *out, size_t max)
{
	uint8_t hdr[80];
	uint32_t state;
	int64_t len;
	size_t n, at;

	if (!o || L->s_compact_size > sizeof(hdr) || rd(o, hdr, L->s_compact_size) < 0)
		return -1;
	memcpy(&len, hdr + 16, sizeof(len));
	memcpy(&state, hdr + L->s_state, sizeof(state));
	if (len < 0 || !(state & L->m_compact))
		return -1;
	if (state & L->m_ascii)
		at = L->s_ascii_size;
	else if ((state & L->m_kind) == (1u << __builtin_ctz(L->m_kind))) /* 1-byte */
		at = L->s_compact_size;
	else
		return -1;
	n = (size_t)len < max ? (size_t)len : max;
	if (rd(o + at, out, n) < 0)
		return -1;
	if (!(state & L->m_ascii)) /* latin-1 above 127: not UTF-8, say '?' */
		for (size_t i = 0; i < n; i++)
			if ((unsigned char)out[i] > 127)
				out[i] = '?';
	return (int)n;
}

/* A bytes object's contents, at most max; returns its whole length. */
static int64_t read_bytes(uintptr_t o, uint8_t *out, size_t max, size_t *got)
{
	int64_t len = 0;

	*got = 0;
	if (!o || rd(o + 16, &len, sizeof(len)) < 0 || len < 0)
		return -1;
	*got = (size_t)len < max ? (size_t)len : max;
	if (*got && rd(o + 32, out, *got) < 0)
		return -1;
	return len;
}

/* Send the code object at addr, whose name, file and first line are
 * known, under number num. 0 when sent. The strings and the table are
 * read straight into the record, reserved at its largest (~17.7 KiB, one
 * record per code object) and committed at its length: no buffer of
 * that size in static TLS (each thread's stack paid for it) or on the
 * stack. */
static int send_code(struct sp_thread *t, uintptr_t addr, uintptr_t name, uintptr_t file,
		     int32_t firstlineno, uint32_t num)
{
	const uint32_t rmax = (uint32_t)((sizeof(struct sp_rec_pycode) + PY_NAME_MAX * 2 +
					  PY_FILE_MAX + PY_TABLE_MAX + 7) &
					 ~(size_t)7);
	uint8_t *table;
	char *buf;
	int nl, ql = 0, fl;
	size_t tl = 0;
	int64_t whole;
	uint32_t rl;
	struct sp_rec_pycode *r;

	r = sp_rec_reserve(t, rmax);
	if (!r)
		return -1;
	buf = (char *)(r + 1);
	nl = read_str(name, buf, PY_NAME_MAX);
	if (nl < 0)
		goto cancel;
	if (L->co_qualname) {
		ql = read_str(rd_ptr(addr + L->co_qualname), buf + nl, PY_NAME_MAX);
		if (ql < 0)
			ql = 0;
	}
	fl = read_str(file, buf + nl + ql, PY_FILE_MAX);
	if (fl < 0)
		goto cancel;
	table = (uint8_t *)buf + nl + ql + fl;
	whole = read_bytes(rd_ptr(addr + L->co_table), table, PY_TABLE_MAX, &tl);
	if (whole < 0)
		goto cancel;
	rl = (uint32_t)((sizeof(*r) + (size_t)nl + (size_t)ql + (size_t)fl + tl + 7) & ~(size_t)7);
	memset(r, 0, sizeof(*r));
	r->h.type = SP_REC_PYCODE;
	r->h.flags = (size_t)whole > tl ? SP_PYCODE_TABLE_CUT : 0;
	r->h.len = rl;
	r->pid = sp_my_pid();
	r->tid = t->tid;
	r->code = num;
	r->firstlineno = firstlineno;
	r->major = L->major;
	r->minor = L->minor;
	r->name_len = (uint16_t)nl;
	r->qualname_len = (uint16_t)ql;
	r->file_len = (uint16_t)fl;
	r->table_len = (uint32_t)tl;
	memset((char *)(r + 1) + nl + ql + fl + tl, 0,
	       rl - sizeof(*r) - (size_t)nl - (size_t)ql - (size_t)fl - tl);
	sp_rec_commit(t, rl);
	return 0;
cancel:
	sp_rec_cancel(t);
	return -1;
}

/* Checking a layout: a code object whose file is a str. */
static int code_ok(uintptr_t addr)
{
	uintptr_t type = 0, file = 0, ftype = 0;

	return rd(addr + 8, &type, 8) == 0 && type == code_type &&
	       rd(addr + L->co_filename, &file, 8) == 0 && file && !(file & 7) &&
	       rd(file + 8, &ftype, 8) == 0 && ftype == str_type;
}

/* The number of the code object at addr, sending it first if it is new;
 * 0 when it cannot be read or sent (the frame is left out). */
static uint32_t code_number(struct sp_thread *t, uintptr_t addr)
{
	uint8_t hdr[128];
	uintptr_t type, name, file;
	int32_t first;
	uint64_t h;
	uint32_t num = 0, i, n;

	if (addr & 7)
		return 0;
	/* type, name, file and first line: one read (they are near) */
	{
		uint16_t lo = 8, hi = L->co_firstlineno + 4;

		if (L->co_filename + 8u > hi)
			hi = L->co_filename + 8;
		if (L->co_name + 8u > hi)
			hi = L->co_name + 8;
		if ((size_t)(hi - lo) > sizeof(hdr) || rd(addr + lo, hdr, (size_t)(hi - lo)) < 0)
			return 0;
		memcpy(&type, hdr, 8);
		memcpy(&file, hdr + L->co_filename - lo, 8);
		memcpy(&name, hdr + L->co_name - lo, 8);
		memcpy(&first, hdr + L->co_firstlineno - lo, 4);
	}
	if (type != code_type || !file || !name || (file & 7) || (name & 7))
		return 0;
	h = ((uint64_t)addr * 0x9E3779B97F4A7C15ULL) >> 51; /* 13 bits */
	pthread_mutex_lock(&codes_lock);
	for (n = 0; n < 16; n++) {
		struct code_slot *c = &codes[(h + n) & (CODE_SLOTS - 1)];

		if (c->num && c->addr == addr && c->name == name && c->file == file &&
		    c->firstlineno == first) {
			num = c->num;
			break;
		}
		if (!c->num || n == 15) {
			/* a free slot, or the last probed one is replaced */
			if (ncodes >= (1u << 19) - 1)
				break;
			i = code_salt << 19 | ++ncodes;
			if (send_code(t, addr, name, file, first, i) < 0) {
				ncodes--; /* not sent: tried again next time */
				break;
			}
			*c = (struct code_slot){ addr, name, file, first, i };
			num = i;
			break;
		}
	}
	pthread_mutex_unlock(&codes_lock);
	return num;
}

/* The thread's Python frames, innermost first: code object address and
 * byte offset, with entry[i] set on the last frame one C-level call of
 * the interpreter ran (3.11+; before, every frame is one). Returns the
 * number of frames. */
static int read_frames(uintptr_t *code, uint32_t *off, uint8_t *entry, int max)
{
	uintptr_t ts = (uintptr_t)get_tstate(), f;
	uint8_t fr[128];
	int n = 0;
	size_t need = (size_t)L->f_instr + 8;

	if (!ts)
		return 0;
	if (L->f_entry + 1u > need)
		need = L->f_entry + 1u;
	if (L->f_code + 8u > need)
		need = L->f_code + 8u;
	if (L->f_back + 8u > need)
		need = L->f_back + 8u;
	if (need > sizeof(fr))
		return 0;
	f = rd_ptr(ts + L->ts_frame);
	if (L->cframe)
		f = f ? rd_ptr(f + L->cf_frame) : 0;
	while (f && n < max) {
		uintptr_t c, back;
		int64_t instr = 0;

		if ((f & 7) || rd(f, fr, need) < 0)
			break;
		memcpy(&c, fr + L->f_code, 8);
		memcpy(&back, fr + L->f_back, 8);
		if (L->minor >= 12 && fr[L->f_entry] == 3) {
			/* FRAME_OWNED_BY_CSTACK: the shim one C-level call of the
			 * interpreter pushes below its frames */
			if (n)
				entry[n - 1] = 1;
			f = back;
			continue;
		}
		if (L->minor >= 11) {
			uintptr_t p;

			memcpy(&p, fr + L->f_instr, 8);
			instr = (int64_t)(p - (c + L->co_code));
		} else {
			int32_t lasti;

			memcpy(&lasti, fr + L->f_instr, 4);
			instr = L->minor >= 10 ? 2 * (int64_t)lasti : lasti;
		}
		code[n] = c;
		off[n] = instr < 0 || instr > INT32_MAX ? 0 : (uint32_t)instr;
		entry[n] = L->minor < 11 || (L->minor == 11 && fr[L->f_entry]);
		n++;
		f = back;
	}
	if (n)
		entry[n - 1] = 1;
	return n;
}

/*
 * Put the calling thread's Python frames into the native stack pcs[0..n)
 * (innermost first, room for cap): each C frame of the interpreter's loop
 * (_PyEval_EvalFrameDefault) is replaced by the Python frames it ran, in
 * order; frames left when the native stack ends (it was cut at its depth)
 * follow it. Returns the new number of pcs. Keeps errno.
 */
int sp_py_splice(struct sp_thread *t, uintptr_t *pcs, int n, int cap)
{
	/* in the thread's page, not on the stack (3.8 KiB): the caller holds
	 * the page's walk buffers (walk_busy) */
	uintptr_t *code = t->more->py_code, *out = t->more->py_out;
	uint32_t *off = t->more->py_off;
	uint8_t *entry = t->more->py_entry;
	int state = atomic_load_explicit(&py_state, memory_order_acquire), saved = errno;
	int np, i, j = 0, k = 0;

	if (state != PY_ON) {
		int expect = state;

		/* one thread looks, without a lock of ours held (dlsym takes the
		 * loader's); the others go on without Python frames meanwhile */
		if (state == PY_OFF || state == PY_DETECTING ||
		    !atomic_compare_exchange_strong(&py_state, &expect, PY_DETECTING)) {
			errno = saved;
			return n;
		}
		py_detect(t);
		if (atomic_load(&py_state) != PY_ON) {
			errno = saved;
			return n;
		}
	}
	if (sp_if_lang) /* Ruby's or PHP's frames */
		return sp_if_splice(t, pcs, n, cap);
	if (!is_initialized()) {
		errno = saved;
		return n;
	}
	np = read_frames(code, off, entry, PY_FRAMES_MAX);
	if (np > 0 && !atomic_load_explicit(&py_direct, memory_order_relaxed)) {
		int ok = 1;

		for (i = 0; i < np && ok; i++)
			ok = code_ok(code[i]);
		if (!ok) {
			/* not this interpreter's layout after all */
			atomic_store(&py_state, PY_OFF);
			sp_if_info(t, SP_PY_UNREADABLE, "frames do not hold code objects");
			errno = saved;
			return n;
		}
		if (atomic_fetch_add(&py_checked, 1) + 1 >= PY_CHECKS)
			atomic_store(&py_direct, 1);
	}
	if (cap > SP_STACK_MAX + 8)
		cap = SP_STACK_MAX + 8;
	for (i = 0; i < n && j < cap; i++) {
		if (pcs[i] - eval_lo >= eval_hi - eval_lo || k >= np) {
			out[j++] = pcs[i];
			continue;
		}
		/* this C frame ran the frames up to the next entry mark */
		do {
			uint32_t num = code_number(t, code[k]);

			if (num && j < cap)
				out[j++] = (uintptr_t)SP_PYFRAME(num, off[k]);
		} while (!entry[k++] && k < np);
	}
	for (; k < np && j < cap; k++) {
		uint32_t num = code_number(t, code[k]);

		if (num)
			out[j++] = (uintptr_t)SP_PYFRAME(num, off[k]);
	}
	memcpy(pcs, out, (size_t)j * sizeof(*pcs));
	errno = saved;
	return j;
}

/* The module map changed (stream.c): a process without CPython so far
 * looks for it again at its next stack. */
void sp_py_modules_changed(void)
{
	int off = PY_OFF;

	if (atomic_exchange(&py_absent, 0))
		atomic_compare_exchange_strong(&py_state, &off, PY_UNKNOWN);
}

/* In a forked child: numbers and sent code objects are per process. */
void sp_py_fork_child(void)
{
	pthread_mutex_init(&codes_lock, NULL);
	if (codes)
		memset(codes, 0, CODE_SLOTS * sizeof(*codes));
	ncodes = 0;
	self_pid = getpid();
	code_salt = ((uint32_t)sp_now() ^ (uint32_t)self_pid << 7) & 0xfff;
	if (atomic_load(&py_state) != PY_OFF || atomic_exchange(&py_absent, 0))
		atomic_store(&py_state, PY_UNKNOWN); /* sends its PYINFO again */
}
