/* SPDX-License-Identifier: MIT */
/*
 * resolve.c - finding the originals, and which SQLite a call was meant
 * for.
 *
 * A process may hold more than one SQLite: the system libsqlite3, linked
 * in or dlopen'd RTLD_LOCAL (Python's _sqlite3 loads it so), and copies
 * that plugins carry under another soname or compiled into themselves
 * (vendored wheels, SQLCipher). libsqlprof.so comes first in the global
 * scope, so every sqlite3_* call a copy does not bind within its own
 * object reaches our shims, whichever copy the caller was linked with.
 * Each call must go where the dynamic linker would have bound it without
 * us: to the global scope's definition (what dlsym(RTLD_NEXT) finds),
 * else to the caller's own local scope (its object and its dependencies:
 * dlsym on its handle).
 *
 * One library is profiled, the primary (sp_real, sp_plan_real): the
 * global one, else a loaded libsqlite3.so.0, else the first one a caller
 * reaches. Any other - a foreign one - is passed through untouched, and
 * its statements are never ours. Which library a calling object binds to
 * is decided once per object (its link map, which _dl_find_object gives
 * without a lock) and kept. The SQLite libraries themselves are entered
 * as their own callers when they are found, so the calls SQLite makes to
 * itself through the PLT (sqlite3_initialize's sqlite3_config, under its
 * own mutex) never need the loader's lock.
 *
 * Handles are kept (a library we resolved through stays mapped), so a
 * function pointer of ours never outlives its code.
 */
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <string.h>

#include "sp_preload.h"

struct sp_real sp_real;
atomic_int sp_resolved;
atomic_int sp_libs_foreign;
int sp_hot;

#define SP_LIBS_MAX 8     /* foreign SQLite libraries */
#define SP_CALLERS_MAX 64 /* calling objects remembered */

static struct sp_lib libs[SP_LIBS_MAX];
static atomic_int libs_ready[SP_LIBS_MAX];
static atomic_int libs_claimed;

/* Calling object (link map) -> 0 (the primary) or 1 + index in libs. An
 * entry is published by its map pointer (release) after its value. */
static struct {
	_Atomic(const void *) lm;
	atomic_int lib;
} callers[SP_CALLERS_MAX];
static atomic_int callers_claimed;

static _Atomic(const void *) primary_lm; /* the object defining sp_real.step */
static void *_Atomic primary_handle;     /* where sp_real was resolved from */
static const void *self_lm;              /* libsqlprof.so's own map */
static int (*find_object)(void *, struct dl_find_object *);

#define RESOLVE(field, sym, export, need, ret, args) *(void **)&r->field = dlsym(h, #sym);

static void resolve_from(void *h, struct sp_real *r)
{
	SP_API_CORE(RESOLVE)
}

/* 1 when r has every SP_REQ function of sp_api.h's core list. */
static int resolve_complete(const struct sp_real *r)
{
#define REQUIRED(field, sym, export, need, ret, args) \
	if (need == SP_REQ && !r->field)              \
		return 0;
	SP_API_CORE(REQUIRED)
#undef REQUIRED
	return 1;
}

/* The link map of the object holding addr; NULL for code no object
 * holds (generated code). _dl_find_object (glibc 2.35) takes no lock;
 * dladdr1, its stand-in before that, takes the loader's. */
static const void *lm_of(const void *addr)
{
	struct dl_find_object fo;
	Dl_info info;
	void *lm = NULL;

	if (find_object)
		return find_object((void *)(uintptr_t)addr, &fo) == 0 ? fo.dlfo_link_map : NULL;
	if (!dladdr1(addr, &info, &lm, RTLD_DL_LINKMAP))
		return NULL;
	return lm;
}

static int caller_find(const void *lm)
{
	int n = atomic_load_explicit(&callers_claimed, memory_order_acquire);

	if (n > SP_CALLERS_MAX)
		n = SP_CALLERS_MAX;
	for (int i = 0; i < n; i++)
		if (atomic_load_explicit(&callers[i].lm, memory_order_acquire) == lm)
			return atomic_load_explicit(&callers[i].lib, memory_order_relaxed);
	return -1;
}

/* Remember that calls from the object lm go to lib (0: the primary).
 * Racing threads may enter one object twice, with the same value. When
 * the table is full the answer is worked out again at each call. */
static void caller_note(const void *lm, int lib)
{
	int i;

	if (!lm || caller_find(lm) >= 0)
		return;
	i = atomic_fetch_add(&callers_claimed, 1);
	if (i >= SP_CALLERS_MAX)
		return;
	atomic_store_explicit(&callers[i].lib, lib, memory_order_relaxed);
	atomic_store_explicit(&callers[i].lm, lm, memory_order_release);
}

/*
 * Make the object lm, defining sqlite3_step as found through handle h,
 * the primary, unless another object is. Every claimer of the winning
 * object fills sp_real and sp_plan_real itself, with the same values, so
 * the primary is complete when this returns 0 (-1: another one is).
 */
static int claim_primary(void *h, const void *lm)
{
	const void *none = NULL;

	if (!lm)
		return -1;
	if (!atomic_compare_exchange_strong(&primary_lm, &none, lm) && none != lm)
		return -1;
	resolve_from(h, &sp_real);
	sp_plan_resolve_from(h, &sp_plan_real);
	atomic_store(&primary_handle, h);
	caller_note(lm, 0);
	if (!resolve_complete(&sp_real))
		return -1;
	atomic_store_explicit(&sp_resolved, 1, memory_order_release);
	if (sp_cfg.enabled)
		sp_hot = 1;
	return 0;
}

/* ---- a second copy of libsqlprof.so in LD_PRELOAD (an installed one
 * from `sqlprof env` and a build tree's from `record`). Both export the
 * same shims, so the program's calls reach the first copy only, but that
 * copy's dlsym(RTLD_NEXT) finds the second copy's shims: every execution
 * would be timed twice and counted by two collectors' clients. The first
 * copy in the search order profiles; a later one sees it (its exported
 * sqlprof_next_sym is not its own) and stays inert, passing every call
 * through; the first resolves the originals past it, asking each copy in
 * the way for what comes after it. ---- */

/* Exported: the definition of name after this copy in the search order.
 * Another copy, earlier in it, calls this to see past us. Never a tail
 * call: RTLD_NEXT is taken from the return address, which must be ours. */
SP_EXPORT void *sqlprof_next_sym(const char *name);
SP_EXPORT __attribute__((noinline)) void *sqlprof_next_sym(const char *name)
{
	void *sym = dlsym(RTLD_NEXT, name);

	__asm__ volatile("" : "+r"(sym)::"memory");
	return sym;
}

typedef void *(*sp_next_fn)(const char *);

static void find_tools(void);

/* The sqlprof_next_sym of the object lm when it is another copy of
 * libsqlprof.so; else NULL. Takes the loader's lock (once per lookup). */
static sp_next_fn copy_next(const void *lm)
{
	const struct link_map *m = lm;
	void *h, *f;

	if (!lm || lm == self_lm || !m->l_name || !m->l_name[0] || !sp_real.dlopen)
		return NULL;
	h = sp_real.dlopen(m->l_name, RTLD_LAZY | RTLD_NOLOAD);
	if (!h)
		return NULL;
	f = dlsym(h, "sqlprof_next_sym");
	dlclose(h); /* NOLOAD: it stays loaded as it was */
	return f && lm_of(f) == lm ? (sp_next_fn)(uintptr_t)f : NULL;
}

/*
 * dlsym(RTLD_NEXT, name), past the other copies of libsqlprof.so (inert:
 * their shims would only add their own time). *h is RTLD_NEXT, or when a
 * copy was passed over, a handle of the object defining name (kept, so
 * that the rest is resolved from it too), or RTLD_NEXT again when that
 * object has none (the program itself): its calls then go through the
 * inert copy, which passes them on.
 */
static void *next_past_copies(const char *name, void **h)
{
	void *sym = dlsym(RTLD_NEXT, name), *past;
	sp_next_fn next;
	int hops = 0;

	*h = RTLD_NEXT;
	find_tools();
	for (past = sym; past && hops < 8 && (next = copy_next(lm_of(past))); hops++)
		past = next(name);
	if (hops && past && !copy_next(lm_of(past))) {
		const struct link_map *m = lm_of(past);
		void *own = m && m->l_name && m->l_name[0] && sp_real.dlopen
				    ? sp_real.dlopen(m->l_name, RTLD_LAZY | RTLD_NOLOAD)
				    : NULL;

		if (own) {
			*h = own;
			sym = past;
		}
	}
	return sym;
}

int sp_copy_before_us(void)
{
	void *f = dlsym(RTLD_DEFAULT, "sqlprof_next_sym");

	find_tools();
	return f && self_lm && lm_of(f) != self_lm;
}

int sp_copy_after_us(void)
{
	return dlsym(RTLD_NEXT, "sqlprof_next_sym") != NULL;
}

static void find_tools(void)
{
	if (!sp_real.dlopen)
		sp_real.dlopen = (void *(*)(const char *, int))dlsym(RTLD_NEXT, "dlopen");
	if (!find_object)
		*(void **)&find_object = dlsym(RTLD_DEFAULT, "_dl_find_object");
	if (!self_lm)
		self_lm = lm_of((const void *)(uintptr_t)resolve_from);
}

/*
 * Find the primary's functions. RTLD_NEXT finds a library in the global
 * scope (linked at start-up); a library dlopen'd with RTLD_LOCAL as a
 * dependency (Python's _sqlite3 module) is only reachable through its own
 * handle, which RTLD_NOLOAD gives without loading anything. (A copy under
 * another name becomes the primary through sp_lib_of, when it is the
 * first a caller reaches.) Returns 0 when the required originals are
 * known. Keeps errno.
 */
int sp_resolve(void)
{
	static const char *const names[] = { "libsqlite3.so.0", "libsqlite3.so" };
	int saved = errno, rc = -1;
	void *h = RTLD_NEXT, *step;
	size_t i;

	if (atomic_load_explicit(&sp_resolved, memory_order_acquire))
		return 0;
	find_tools();
	step = next_past_copies("sqlite3_step", &h);
	for (i = 0; !step && sp_real.dlopen && i < sizeof(names) / sizeof(names[0]); i++) {
		h = sp_real.dlopen(names[i], RTLD_LAZY | RTLD_NOLOAD);
		if (h)
			step = dlsym(h, "sqlite3_step"); /* the handle is kept */
	}
	if (step)
		rc = claim_primary(h, lm_of(step));
	errno = saved;
	return rc;
}

/* A new foreign library: the object lm, reached through handle h. Returns
 * 1 + its index, or 0 when there is no room (its calls then go to the
 * primary, as before this file knew of more than one SQLite). */
static int lib_add(void *h, const void *lm)
{
	int n = atomic_load(&libs_claimed), i;

	for (i = 0; i < n && i < SP_LIBS_MAX; i++)
		if (atomic_load_explicit(&libs_ready[i], memory_order_acquire) && libs[i].lm == lm)
			return i + 1;
	i = atomic_fetch_add(&libs_claimed, 1);
	if (i >= SP_LIBS_MAX)
		return 0;
	resolve_from(h, &libs[i].fn);
	sp_plan_resolve_from(h, &libs[i].plan);
	libs[i].lm = lm;
	atomic_store_explicit(&libs_ready[i], 1, memory_order_release);
	atomic_fetch_add(&sp_libs_foreign, 1);
	sp_stats_note_foreign_lib();
	return i + 1;
}

/*
 * The library calls from the object lm bind to: 0 for the primary (or
 * when none can be found: the call then goes to the primary, or gets
 * MISSING), 1 + index for a foreign one. Takes the loader's lock (dlsym,
 * dlopen RTLD_NOLOAD); only for an object not seen before.
 */
static int lib_lookup(const void *lm)
{
	const struct link_map *map = lm;
	void *h = RTLD_NEXT, *step, *own = NULL;
	const void *def;
	int lib = 0;

	step = next_past_copies("sqlite3_step", &h); /* the global scope comes first */
	if (!step && sp_real.dlopen && map->l_name && map->l_name[0]) {
		own = sp_real.dlopen(map->l_name, RTLD_LAZY | RTLD_NOLOAD);
		if (own)
			step = dlsym(own, "sqlite3_step");
		h = own;
	}
	def = step ? lm_of(step) : NULL;
	if (!def || def == self_lm) {
		/* nothing to bind to (the program itself, or code that lost its
		 * way): the primary's answer, whatever it is */
		if (own)
			dlclose(own);
		return 0;
	}
	if (def == atomic_load(&primary_lm) || claim_primary(h, def) == 0)
		lib = 0;
	else
		lib = lib_add(h, def); /* its handle is kept */
	if (own && lib == 0 && h != atomic_load(&primary_handle))
		dlclose(own);
	caller_note(def, lib);
	caller_note(lm, lib);
	return lib;
}

const void *sp_lm_of(const void *addr)
{
	find_tools();
	return lm_of(addr);
}

const void *sp_primary_lm(void)
{
	return atomic_load(&primary_lm);
}

void sp_lib_note_primary_caller(const void *lm)
{
	caller_note(lm, 0);
}

const struct sp_lib *sp_lib_of(const void *ra)
{
	const void *lm;
	int lib, saved;

	find_tools();
	lm = lm_of(ra);
	if (!lm)
		return NULL;
	lib = caller_find(lm);
	if (lib < 0) {
		saved = errno;
		lib = lib_lookup(lm);
		errno = saved;
	}
	return lib > 0 ? &libs[lib - 1] : NULL;
}
