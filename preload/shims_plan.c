/* SPDX-License-Identifier: MIT */
/*
 * shims_plan.c - the interposers that keep plan capture (plan.c) invisible,
 * and the few originals plan.c needs beyond sp_real.
 *
 * Plan capture prepares and steps an EXPLAIN QUERY PLAN statement on the
 * program's own connection. Two things it would otherwise do reach the
 * program's code:
 *  - messages SQLite logs while planning (SQLITE_WARNING_AUTOINDEX) reach
 *    the SQLITE_CONFIG_LOG callback a second time: sqlite3_config installs
 *    a filter in front of the program's callback that drops what is logged
 *    on a thread while it is inside plan capture or other work of the
 *    profiler's own (sp_plan_quiet, the thread guard);
 *  - a virtual table's xBestIndex runs a second time: the module shims
 *    note every connection on which the program registers a module of its
 *    own (sp_db_note_callbacks, as for trace and authorizer callbacks), and
 *    sqlite3_load_extension and sqlite3_auto_extension, whose code reaches
 *    SQLite through sqlite3_api_routines (through these shims only if
 *    libsqlite3's table of them is relocated against the exported
 *    symbols), turn plan capture off for good (sp_plan_blocked).
 * See docs/design.md, "Query plans", for what this covers and what not.
 *
 * Each shim returns exactly what the original returned, with errno as the
 * original left it; with the preload inert (sp_cfg.enabled == 0) they only
 * forward. None of them initializes SQLite: resolving is dlsym only.
 */
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>

#include "sp_preload.h"

struct sp_plan_real sp_plan_real;
__thread int sp_plan_quiet __attribute__((tls_model("initial-exec")));

static atomic_int plan_resolved;  /* 1 once every required original is known */
static atomic_int foreign_code;   /* extension code may register modules unseen */
static atomic_int log_unfiltered; /* a log callback runs without our filter */
static atomic_int alloc_foreign;  /* the program's allocator serves SQLite */

static int in_libsqlite3(const void *addr);

#define PLAN_RESOLVE(field, sym, export, need, ret, args) *(void **)&p->field = dlsym(h, #sym);

void sp_plan_resolve_from(void *h, struct sp_plan_real *p)
{
	SP_API_PLAN(PLAN_RESOLVE)
}

/*
 * The originals of this file are the primary library's (resolve.c fills
 * them with sp_real's). Only dlsym and dlopen(RTLD_NOLOAD): nothing is
 * loaded and SQLite is not initialized. Returns 0 when plan.c's originals
 * are known. Keeps errno.
 */
int sp_plan_resolve(void)
{
	if (likely(atomic_load_explicit(&plan_resolved, memory_order_acquire)))
		return 0;
	sp_resolve();
	if (!sp_plan_real.config || !sp_plan_real.limit || !sp_plan_real.db_mutex ||
	    !sp_plan_real.mutex_enter || !sp_plan_real.mutex_leave)
		return -1;
	atomic_store_explicit(&plan_resolved, 1, memory_order_release);
	return 0;
}

/* Constructor: resolve now, while no SQLite lock can be held, so that
 * the sqlite3_config calls SQLite makes from sqlite3_initialize (under its
 * own main mutex) need no dlsym, which takes the loader's lock. Only dlsym
 * and dlopen(RTLD_NOLOAD): libsqlite3, linked into the program, is mapped
 * already; dlopen'd later (Python), it is resolved at the first call. */
__attribute__((constructor)) static void plan_init(void)
{
	sp_plan_resolve();
}

int sp_plan_blocked(void)
{
	return atomic_load_explicit(&foreign_code, memory_order_relaxed) ||
	       atomic_load_explicit(&log_unfiltered, memory_order_relaxed);
}

int sp_plan_alloc_foreign(void)
{
	return atomic_load_explicit(&alloc_foreign, memory_order_relaxed);
}

/* ---- SQLITE_CONFIG_MALLOC, SQLITE_CONFIG_HEAP ---- */

/* After a successful sqlite3_config: an allocator of the program's own
 * (methods whose xMalloc is not libsqlite3's: SQLite copies the struct,
 * so the function is what tells; or a heap of its memory for memsys5)
 * serves every allocation SQLite makes, ours too. A plan taken then would
 * take the program's turns (a fault-injecting allocator would fail our
 * EXPLAIN instead of the program's statement, or count differently), so
 * plan capture stays off from then on. SQLite's own call from
 * sqlite3_initialize (the default methods) changes nothing. */
static void note_alloc(int op, uint64_t a)
{
	if (op == SQLITE_CONFIG_HEAP) {
		atomic_store(&alloc_foreign, 1);
	} else if (op == SQLITE_CONFIG_MALLOC && a) {
		const sqlite3_mem_methods *m = (const sqlite3_mem_methods *)(uintptr_t)a;

		if (!in_libsqlite3((const void *)(uintptr_t)m->xMalloc))
			atomic_store(&alloc_foreign, 1);
	}
}

/* ---- SQLITE_CONFIG_LOG ---- */

/* The program's callback and argument, as one immutable slot passed to
 * SQLite as the filter's argument: a thread logging while the program
 * installs another callback still sees a consistent pair. Slots are never
 * freed (SQLite may hold one as long as the process lives) and are reused
 * for the same pair, so there is one per distinct pair the program passes. */
struct log_slot {
	void (*fn)(void *, int, const char *);
	void *arg;
	struct log_slot *next;
};
static struct log_slot *_Atomic log_slots;

static struct log_slot *log_slot_for(void (*fn)(void *, int, const char *), void *arg)
{
	struct log_slot *s, *head;
	int saved = errno;

	for (s = atomic_load(&log_slots); s; s = s->next)
		if (s->fn == fn && s->arg == arg)
			return s;
	s = malloc(sizeof(*s));
	errno = saved;
	if (!s)
		return NULL;
	s->fn = fn;
	s->arg = arg;
	head = atomic_load(&log_slots);
	do
		s->next = head;
	while (!atomic_compare_exchange_weak(&log_slots, &head, s));
	return s;
}

/* SQLite's log callback while the program has one: what is logged on this
 * thread inside plan capture (sp_plan_quiet) or other work of ours (the
 * thread guard: the status probe's private connection) is not the
 * program's and is dropped; everything else goes to the program's callback
 * with its own argument, unchanged. */
static void log_filter(void *p, int code, const char *msg)
{
	const struct log_slot *s = p;

	if (sp_plan_quiet || sp_guarded(&sp_tls))
		return;
	s->fn(s->arg, code, msg);
}

/*
 * sqlite3_config is variadic, and every option takes at most three
 * arguments after op, each an int, an unsigned int, a pointer or a
 * sqlite3_int64 (sqlite3.h, "Configuration Options"; none takes a double).
 * Under the x86-64 System V ABI each of those travels in a 64-bit integer
 * register (rsi, rdx, rcx for the first three after op), and a variadic
 * callee reads an int as the low half of its slot. So reading three u64
 * with va_arg and passing them on as three u64 hands the original exactly
 * the registers it would have received: an unused one is read from our
 * register save area (always filled by the prologue of a function that
 * calls va_start) and ignored by the original, an int's upper half is
 * ignored too. Unknown future options obey the same rule as long as they
 * keep to integer-class arguments. Other ABIs would need one case per op.
 *
 * SQLITE_CONFIG_LOG with a callback, profiling on and plans wanted:
 * SQLite gets log_filter with the program's pair as its argument. The
 * call fails exactly as it would have (after initialization: MISUSE) and
 * then changes nothing. SQLite itself calls sqlite3_config (MALLOC and
 * PCACHE2 defaults, from sqlite3_initialize): those are forwarded as is.
 */
#if !defined(__x86_64__) || !defined(__LP64__)
#error "sqlite3_config forwarding assumes the x86-64 System V calling convention"
#endif
SP_EXPORT int sqlite3_config(int op, ...)
{
	const struct sp_lib *L;
	void (*fn)(void *, int, const char *);
	uint64_t a, b, c;
	va_list ap;
	int rc;

	va_start(ap, op);
	a = va_arg(ap, uint64_t);
	b = va_arg(ap, uint64_t);
	c = va_arg(ap, uint64_t);
	va_end(ap);
	if (unlikely(!sp_plan_real.config))
		sp_plan_resolve();
	if (unlikely((L = SP_FOREIGN()) != NULL))
		return L->plan.config ? L->plan.config(op, a, b, c) : MISSING;
	if (unlikely(!sp_plan_real.config))
		return MISSING;
	if (op != SQLITE_CONFIG_LOG) {
		rc = sp_plan_real.config(op, a, b, c);
		if (rc == SQLITE_OK && (op == SQLITE_CONFIG_MALLOC || op == SQLITE_CONFIG_HEAP))
			note_alloc(op, a);
		return rc;
	}
	fn = (void (*)(void *, int, const char *))(uintptr_t)a;
	if (fn && sp_cfg.enabled && sp_cfg.plans) {
		struct log_slot *s = log_slot_for(fn, (void *)(uintptr_t)b);

		if (s) {
			rc = sp_plan_real.config(op, log_filter, (void *)s);
			if (rc == SQLITE_OK)
				atomic_store(&log_unfiltered, 0);
			return rc;
		}
	}
	rc = sp_plan_real.config(op, a, b, c);
	/* a callback in place without the filter (profiling off when it was
	 * installed, or no memory for a slot): plan capture stays off */
	if (rc == SQLITE_OK)
		atomic_store(&log_unfiltered, fn != NULL);
	return rc;
}

/* ---- virtual table modules ---- */

/* 1 when addr lies in libsqlite3's own image (a built-in module: fts3/4/5,
 * rtree, json_each, dbstat, sqlite_stmt...). libsqlite3 registers those
 * through the PLT, so they reach the shims on every open; they are
 * SQLite's code, pure in xBestIndex, and plans are kept for them. Judging
 * by where the module structure lives rather than by the caller copes
 * with libsqlite3's tail calls (sqlite3RtreeInit ends in a jmp to
 * sqlite3_create_module_v2) and with the program's calls from callbacks
 * libsqlite3 makes. */
struct lib_range {
	uintptr_t pc, lo, hi;
};

static int range_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct lib_range *r = arg;
	uintptr_t lo = UINTPTR_MAX, hi = 0;
	int i;

	(void)size;
	for (i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

		if (ph->p_type == PT_LOAD) {
			uintptr_t a = info->dlpi_addr + ph->p_vaddr;

			if (a < lo)
				lo = a;
			if (a + ph->p_memsz > hi)
				hi = a + ph->p_memsz;
		}
	}
	if (r->pc >= lo && r->pc < hi) {
		r->lo = lo;
		r->hi = hi;
		return 1;
	}
	return 0;
}

/* Looked up once (one walk of the loaded objects, the loader's lock held
 * only then), then a range test: libsqlite3 registers some 25 built-in
 * modules at every open, and dladdr cost ~50,000 instructions each. */
static int in_libsqlite3(const void *addr)
{
	static _Atomic uintptr_t lo, hi;
	uintptr_t l = atomic_load_explicit(&lo, memory_order_acquire);
	int saved = errno;

	if (!l && sp_plan_real.create_module) {
		struct lib_range r = { (uintptr_t)sp_plan_real.create_module, 0, 0 };

		dl_iterate_phdr(range_cb, &r);
		if (r.lo) {
			atomic_store_explicit(&hi, r.hi, memory_order_relaxed);
			atomic_store_explicit(&lo, r.lo, memory_order_release);
			l = r.lo;
		}
	}
	errno = saved;
	return l && (uintptr_t)addr >= l &&
	       (uintptr_t)addr < atomic_load_explicit(&hi, memory_order_relaxed);
}

/* Before a module is registered: a module of the program's own (not in
 * libsqlite3) keeps plan capture off that connection for good. */
static void note_module(sqlite3 *db, const sqlite3_module *m)
{
	if (sp_cfg.enabled && db && m && !in_libsqlite3(m))
		sp_db_note_callbacks(db);
}

SP_EXPORT int sqlite3_create_module(sqlite3 *db, const char *name, const sqlite3_module *m,
				    void *aux)
{
	const struct sp_lib *L;

	if (unlikely(!sp_plan_real.create_module))
		sp_plan_resolve();
	if (unlikely((L = SP_FOREIGN()) != NULL))
		return L->plan.create_module ? L->plan.create_module(db, name, m, aux) : MISSING;
	if (unlikely(!sp_plan_real.create_module))
		return MISSING;
	note_module(db, m);
	return sp_plan_real.create_module(db, name, m, aux);
}

SP_EXPORT int sqlite3_create_module_v2(sqlite3 *db, const char *name, const sqlite3_module *m,
				       void *aux, void (*destroy)(void *))
{
	const struct sp_lib *L;

	if (unlikely(!sp_plan_real.create_module_v2))
		sp_plan_resolve();
	if (unlikely((L = SP_FOREIGN()) != NULL))
		return L->plan.create_module_v2
			       ? L->plan.create_module_v2(db, name, m, aux, destroy)
			       : MISSING;
	if (unlikely(!sp_plan_real.create_module_v2))
		return MISSING;
	note_module(db, m);
	return sp_plan_real.create_module_v2(db, name, m, aux, destroy);
}

/* Extensions call SQLite through the sqlite3_api_routines they are
 * handed. In Debian's build that table is filled by R_X86_64_64
 * relocations against the exported symbols, so its entries are these
 * shims (checked: api->create_module is ours); in a libsqlite3 linked
 * with -Bsymbolic they would go past every shim, and what an extension
 * registers (modules on any connection it reaches, auto-extensions for
 * connections opened later) would be unseen. Not relying on the build:
 * from the first load on, plan capture is off everywhere. The SQL
 * function load_extension() calls sqlite3_load_extension through the PLT
 * here; enabling it also marks the connection, should a build bind that
 * call directly. */
SP_EXPORT int sqlite3_load_extension(sqlite3 *db, const char *file, const char *proc, char **err)
{
	const struct sp_lib *L;

	if (unlikely(!sp_plan_real.load_extension))
		sp_plan_resolve();
	if (unlikely((L = SP_FOREIGN()) != NULL))
		return L->plan.load_extension ? L->plan.load_extension(db, file, proc, err)
					      : MISSING;
	if (unlikely(!sp_plan_real.load_extension))
		return MISSING;
	atomic_store(&foreign_code, 1);
	return sp_plan_real.load_extension(db, file, proc, err);
}

SP_EXPORT int sqlite3_enable_load_extension(sqlite3 *db, int onoff)
{
	const struct sp_lib *L;

	if (unlikely(!sp_plan_real.enable_load_extension))
		sp_plan_resolve();
	if (unlikely((L = SP_FOREIGN()) != NULL))
		return L->plan.enable_load_extension ? L->plan.enable_load_extension(db, onoff)
						     : MISSING;
	if (unlikely(!sp_plan_real.enable_load_extension))
		return MISSING;
	if (onoff && sp_cfg.enabled)
		sp_db_note_callbacks(db);
	return sp_plan_real.enable_load_extension(db, onoff);
}

/* An automatic extension runs inside every later open, and may register
 * modules through sqlite3_api_routines: plan capture is off from then on.
 * It would also run inside the open of the counter probe's private
 * connection (stmt.c): the probe runs first, before the program's first
 * extension is registered. */
SP_EXPORT int sqlite3_auto_extension(void (*entry)(void))
{
	const struct sp_lib *L;

	if (unlikely(!sp_plan_real.auto_extension))
		sp_plan_resolve();
	if (unlikely((L = SP_FOREIGN()) != NULL))
		return L->plan.auto_extension ? L->plan.auto_extension(entry) : MISSING;
	if (unlikely(!sp_plan_real.auto_extension))
		return MISSING;
	atomic_store(&foreign_code, 1);
	sp_probe_before_auto_extension();
	return sp_plan_real.auto_extension(entry);
}
