/* SPDX-License-Identifier: MIT */
/*
 * fwd_preload.c - the floor of any LD_PRELOAD design: an interposer that
 * exports the same sqlite3_* symbols as libsqlprof.so and only forwards
 * each call to the original, found once with dlsym(RTLD_NEXT) (or, for a
 * libsqlite3 loaded RTLD_LOCAL as Python's _sqlite3 does, through
 * dlopen(RTLD_NOLOAD)). What it costs per call is what interposition
 * itself costs: an extra PLT hop, a load of the cached pointer and an
 * indirect call. It times nothing and records nothing.
 *
 * Built by scripts/bench_build.sh; used as a `make bench` configuration.
 */
#include <dlfcn.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

/* The original of name, or abort with a message: a program calling
 * sqlite3_* has libsqlite3 loaded, so failing here is a broken set-up. */
static void *resolve(const char *name)
{
	void *f = dlsym(RTLD_NEXT, name), *h;

	if (!f && (h = dlopen("libsqlite3.so.0", RTLD_NOLOAD | RTLD_LAZY)))
		f = dlsym(h, name);
	if (!f) {
		static const char msg[] = "fwd_preload: cannot resolve a sqlite3 symbol\n";

		(void)!write(2, msg, sizeof(msg) - 1);
		abort();
	}
	return f;
}

/* One forwarder: a relaxed load of the cached original, resolved at the
 * first call (races are benign: every thread stores the same pointer). */
#define FWD(ret, name, params, args)                                            \
	EXPORT ret name params                                                  \
	{                                                                       \
		static ret(*real) params;                                       \
		ret(*fwd_fn) params = __atomic_load_n(&real, __ATOMIC_RELAXED); \
		if (__builtin_expect(!fwd_fn, 0)) {                             \
			fwd_fn = (ret(*) params)resolve(#name);                 \
			__atomic_store_n(&real, fwd_fn, __ATOMIC_RELAXED);      \
		}                                                               \
		return fwd_fn args;                                             \
	}

typedef int (*exec_cb)(void *, int, char **, char **);
typedef int (*trace_cb)(unsigned, void *, void *, void *);
typedef void (*legacy_trace_cb)(void *, const char *);
typedef void (*profile_cb)(void *, const char *, sqlite3_uint64);
typedef int (*auth_cb)(void *, int, const char *, const char *, const char *, const char *);
typedef int (*progress_cb)(void *);

FWD(int, sqlite3_open, (const char *f, sqlite3 **db), (f, db))
FWD(int, sqlite3_open_v2, (const char *f, sqlite3 **db, int fl, const char *vfs), (f, db, fl, vfs))
FWD(int, sqlite3_open16, (const void *f, sqlite3 **db), (f, db))
FWD(int, sqlite3_close, (sqlite3 * db), (db))
FWD(int, sqlite3_close_v2, (sqlite3 * db), (db))
FWD(int, sqlite3_prepare, (sqlite3 * db, const char *s, int n, sqlite3_stmt **st, const char **t),
    (db, s, n, st, t))
FWD(int, sqlite3_prepare_v2,
    (sqlite3 * db, const char *s, int n, sqlite3_stmt **st, const char **t), (db, s, n, st, t))
FWD(int, sqlite3_prepare_v3,
    (sqlite3 * db, const char *s, int n, unsigned int fl, sqlite3_stmt **st, const char **t),
    (db, s, n, fl, st, t))
FWD(int, sqlite3_prepare16, (sqlite3 * db, const void *s, int n, sqlite3_stmt **st, const void **t),
    (db, s, n, st, t))
FWD(int, sqlite3_prepare16_v2,
    (sqlite3 * db, const void *s, int n, sqlite3_stmt **st, const void **t), (db, s, n, st, t))
FWD(int, sqlite3_prepare16_v3,
    (sqlite3 * db, const void *s, int n, unsigned int fl, sqlite3_stmt **st, const void **t),
    (db, s, n, fl, st, t))
FWD(int, sqlite3_step, (sqlite3_stmt * st), (st))
FWD(int, sqlite3_reset, (sqlite3_stmt * st), (st))
FWD(int, sqlite3_finalize, (sqlite3_stmt * st), (st))
FWD(int, sqlite3_exec, (sqlite3 * db, const char *s, exec_cb cb, void *a, char **e),
    (db, s, cb, a, e))
FWD(int, sqlite3_trace_v2, (sqlite3 * db, unsigned m, trace_cb cb, void *a), (db, m, cb, a))
FWD(void *, sqlite3_trace, (sqlite3 * db, legacy_trace_cb cb, void *a), (db, cb, a))
FWD(void *, sqlite3_profile, (sqlite3 * db, profile_cb cb, void *a), (db, cb, a))
FWD(int, sqlite3_set_authorizer, (sqlite3 * db, auth_cb cb, void *a), (db, cb, a))

EXPORT void sqlite3_progress_handler(sqlite3 *db, int n, progress_cb cb, void *a)
{
	static void (*real)(sqlite3 *, int, progress_cb, void *);
	void (*f)(sqlite3 *, int, progress_cb, void *) = __atomic_load_n(&real, __ATOMIC_RELAXED);

	if (__builtin_expect(!f, 0)) {
		f = (void (*)(sqlite3 *, int, progress_cb, void *))resolve(
			"sqlite3_progress_handler");
		__atomic_store_n(&real, f, __ATOMIC_RELAXED);
	}
	f(db, n, cb, a);
}
