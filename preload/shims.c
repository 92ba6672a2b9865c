/* SPDX-License-Identifier: MIT */
/*
 * shims.c - the interposers of libsqlprof.so but the per-execution ones
 * (sqlite3_step, sqlite3_reset and sqlite3_finalize are in hot.c): open
 * and close, prepare, exec, the callback registrations, and the libc
 * entry points that change the uid or end or replace the process image.
 *
 * Each shim resolves the original (lazily: libsqlite3 may arrive by dlopen
 * after we start), calls it and hands the result to stmt.c or exec.c. A
 * shim always returns exactly what the original returned, and leaves errno
 * as the original left it.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sp_preload.h"

/* ---- connections: forwarded untouched (kept for completeness of the API
 * surface and to make sure the originals are resolved early). ---- */

SP_EXPORT int sqlite3_open(const char *f, sqlite3 **db)
{
	const struct sp_lib *L;

	NEED();
	SP_DEEPBIND_CATCH_UP();
	if (unlikely((L = SP_FOREIGN()) != NULL))
		return L->fn.open ? L->fn.open(f, db) : MISSING;
	return sp_real.open ? sp_real.open(f, db) : MISSING;
}

SP_EXPORT int sqlite3_open_v2(const char *f, sqlite3 **db, int flags, const char *vfs)
{
	const struct sp_lib *L;

	NEED();
	SP_DEEPBIND_CATCH_UP();
	if (unlikely((L = SP_FOREIGN()) != NULL))
		return L->fn.open_v2 ? L->fn.open_v2(f, db, flags, vfs) : MISSING;
	return sp_real.open_v2 ? sp_real.open_v2(f, db, flags, vfs) : MISSING;
}

SP_EXPORT int sqlite3_open16(const void *f, sqlite3 **db)
{
	const struct sp_lib *L;

	NEED();
	SP_DEEPBIND_CATCH_UP();
	if (unlikely((L = SP_FOREIGN()) != NULL))
		return L->fn.open16 ? L->fn.open16(f, db) : MISSING;
	return sp_real.open16 ? sp_real.open16(f, db) : MISSING;
}

SP_EXPORT int sqlite3_close(sqlite3 *db)
{
	const struct sp_lib *L;

	NEED();
	if (unlikely((L = SP_FOREIGN()) != NULL))
		return L->fn.close ? L->fn.close(db) : MISSING;
	return sp_real.close ? sp_real.close(db) : MISSING;
}

SP_EXPORT int sqlite3_close_v2(sqlite3 *db)
{
	const struct sp_lib *L;

	NEED();
	if (unlikely((L = SP_FOREIGN()) != NULL))
		return L->fn.close_v2 ? L->fn.close_v2(db) : MISSING;
	return sp_real.close_v2 ? sp_real.close_v2(db) : MISSING;
}

/* ---- prepare: one helper for the six variants ---- */

/* text/len: the SQL the caller passed, for the legacy variants whose
 * statements keep no copy (sqlite3_sql returns NULL for them). */
static void after_prepare(int rc, sqlite3_stmt **pp, uint64_t t0, const char *text, size_t len)
{
	struct sp_thread *t = &sp_tls;
	int saved = errno;

	if (rc == SQLITE_OK && pp && *pp && sp_hot && !sp_guarded(t))
		sp_stmt_prepared_text(t, *pp, text, len, t0, sp_now());
	errno = saved;
}

/* Length of the first statement of a UTF-8 sql argument, from the tail. */
static size_t used_len(const char *sql, int n, const char *tail)
{
	if (tail && tail >= sql)
		return (size_t)(tail - sql);
	return n >= 0 ? (size_t)n : strlen(sql);
}

/* The start every prepare shim shares: a foreign caller's pass-through,
 * a missing original, the start time. */
#define PREPARE_ENTER(field, args)                                       \
	do {                                                             \
		const struct sp_lib *L;                                  \
		NEED();                                                  \
		if (unlikely((L = SP_FOREIGN()) != NULL))                \
			return L->fn.field ? L->fn.field args : MISSING; \
		if (!sp_real.field)                                      \
			return MISSING;                                  \
	} while (0)

/* A whole prepare shim: params its parameter list, args the call's
 * arguments; text/len as after_prepare's. */
#define PREPARE_SHIM(name, field, params, args, text, len) \
	SP_EXPORT int name params                          \
	{                                                  \
		uint64_t t0;                               \
		int rc;                                    \
		PREPARE_ENTER(field, args);                \
		t0 = sp_now();                             \
		rc = sp_real.field args;                   \
		after_prepare(rc, pp, t0, text, len);      \
		return rc;                                 \
	}

/* The legacy variant keeps no text: ours is the caller's, up to the tail. */
SP_EXPORT int sqlite3_prepare(sqlite3 *db, const char *sql, int n, sqlite3_stmt **pp,
			      const char **tail)
{
	const char *mytail = NULL;
	uint64_t t0;
	int rc;

	PREPARE_ENTER(prepare, (db, sql, n, pp, tail));
	t0 = sp_now();
	rc = sp_real.prepare(db, sql, n, pp, &mytail);
	if (tail)
		*tail = mytail;
	after_prepare(rc, pp, t0, sql, sql ? used_len(sql, n, mytail) : 0);
	return rc;
}

PREPARE_SHIM(sqlite3_prepare_v2, prepare_v2,
	     (sqlite3 * db, const char *sql, int n, sqlite3_stmt **pp, const char **tail),
	     (db, sql, n, pp, tail), NULL, 0)
PREPARE_SHIM(sqlite3_prepare_v3, prepare_v3,
	     (sqlite3 * db, const char *sql, int n, unsigned int f, sqlite3_stmt **pp,
	      const char **tail),
	     (db, sql, n, f, pp, tail), NULL, 0)
/* sqlite3_sql() gives UTF-8 for statements prepared from UTF-16 too,
 * except with the legacy sqlite3_prepare16, which keeps no text. */
PREPARE_SHIM(sqlite3_prepare16, prepare16,
	     (sqlite3 * db, const void *sql, int n, sqlite3_stmt **pp, const void **tail),
	     (db, sql, n, pp, tail), "<sql from sqlite3_prepare16>", 28)
PREPARE_SHIM(sqlite3_prepare16_v2, prepare16_v2,
	     (sqlite3 * db, const void *sql, int n, sqlite3_stmt **pp, const void **tail),
	     (db, sql, n, pp, tail), NULL, 0)
PREPARE_SHIM(sqlite3_prepare16_v3, prepare16_v3,
	     (sqlite3 * db, const void *sql, int n, unsigned int f, sqlite3_stmt **pp,
	      const void **tail),
	     (db, sql, n, f, pp, tail), NULL, 0)

/* ---- exec: an execution of its own, parent of the statements it runs when
 * they reach our shims (Debian's build: through the PLT). ---- */

/* The program's callback of an exec call, called through exec_callback:
 * on the shim's frame, read only while the call runs (a longjmp out of
 * the callback leaves it behind unread). */
struct exec_cb {
	int (*cb)(void *, int, char **, char **);
	void *arg;
	struct sp_exec *ex;
	sqlite3 *db;
};

/*
 * The callback sqlite3_exec gets from us: the program's, with its own
 * argument and result. When it returns non-zero, SQLite returns
 * SQLITE_ABORT and frees the statement it was stepping itself
 * (sqlite3VdbeFinalize, past our finalize shim), its execution open:
 * exec.c ends that execution first, while the statement is alive. It is
 * the statement this thread stepped last when the callback was called
 * (its step had just returned the row). Keeps errno as the callback left
 * it.
 */
static int exec_callback(void *p, int n, char **vals, char **cols)
{
	const struct exec_cb *e = p;
	struct sp_stmt *s = sp_tls.last_stmt;
	uintptr_t key = atomic_load_explicit(&s->key, memory_order_relaxed);
	int rc = e->cb(e->arg, n, vals, cols);

	if (unlikely(rc != 0)) {
		int saved = errno;

		sp_exec_callback_abort(&sp_tls, e->ex, e->db, s, key);
		errno = saved;
	}
	return rc;
}

/* The ex lives in thread-local storage (exec.c), never in this frame:
 * an exception or longjmp through the call leaves nothing of ours
 * pointing at a dead frame, and the next call finds it closed. */
SP_EXPORT int sqlite3_exec(sqlite3 *db, const char *sql, int (*cb)(void *, int, char **, char **),
			   void *arg, char **errmsg)
{
	struct sp_thread *t = &sp_tls;
	uintptr_t frame = (uintptr_t)__builtin_frame_address(0);
	struct sp_exec *ex;
	uint64_t sql_id, shape, t1;
	int rc, saved;

	const struct sp_lib *L;

	NEED();
	if (unlikely((L = SP_FOREIGN()) != NULL))
		return L->fn.exec ? L->fn.exec(db, sql, cb, arg, errmsg) : MISSING;
	if (unlikely(!sp_real.exec))
		return MISSING;
	if (!sp_hot || sp_guarded(t) || !sql)
		return sp_real.exec(db, sql, cb, arg, errmsg);
	saved = errno;
	sp_thread_ready(t);
	sql_id = sp_sql_note(t, sql, strlen(sql), &shape);
	ex = sp_exec_begin(t, sql_id, shape, frame);
	errno = saved;
	if (unlikely(!ex)) {
		/* deeper than SP_EXEC_DEPTH: timed here and counted as nested,
		 * without an execution of its own (nothing of ours in this frame
		 * outlives the call) */
		uint64_t t0 = sp_now();

		rc = sp_real.exec(db, sql, cb, arg, errmsg);
		t1 = sp_now();
		saved = errno;
		sp_exec_deep(t, sql_id, shape, db, rc, t0, t1);
		errno = saved;
		return rc;
	}
	/* inside the call, every step is nested in it: none runs inline
	 * (sqlite3_step does not test t->cur), until a step outside any
	 * call sets fast_stmt again (step_general) */
	sp_fast_off(t);
	t->cur = ex;
	if (cb) {
		struct exec_cb e = { cb, arg, ex, db };

		ex->start = sp_now();
		rc = sp_real.exec(db, sql, exec_callback, &e, errmsg);
	} else {
		ex->start = sp_now();
		rc = sp_real.exec(db, sql, NULL, arg, errmsg);
	}
	t1 = sp_now();
	t->cur = ex->parent;
	ex->db = t1 - ex->start;
	saved = errno;
	sp_exec_end(t, ex, db, rc, t1);
	errno = saved;
	return rc;
}

/* ---- callback registrations: forwarded untouched, and noted so that
 * plan capture never runs where it would call the application back. ---- */

SP_EXPORT int sqlite3_trace_v2(sqlite3 *db, unsigned mask,
			       int (*cb)(unsigned, void *, void *, void *), void *arg)
{
	const struct sp_lib *L;

	NEED();
	if (unlikely((L = SP_FOREIGN()) != NULL))
		return L->fn.trace_v2 ? L->fn.trace_v2(db, mask, cb, arg) : MISSING;
	if (cb && mask)
		sp_db_note_callbacks(db);
	return sp_real.trace_v2 ? sp_real.trace_v2(db, mask, cb, arg) : MISSING;
}

SP_EXPORT void *sqlite3_trace(sqlite3 *db, void (*cb)(void *, const char *), void *arg)
{
	const struct sp_lib *L;

	NEED();
	if (unlikely((L = SP_FOREIGN()) != NULL))
		return L->fn.trace ? L->fn.trace(db, cb, arg) : NULL;
	if (cb)
		sp_db_note_callbacks(db);
	return sp_real.trace ? sp_real.trace(db, cb, arg) : NULL;
}

SP_EXPORT void *sqlite3_profile(sqlite3 *db, void (*cb)(void *, const char *, sqlite3_uint64),
				void *arg)
{
	const struct sp_lib *L;

	NEED();
	if (unlikely((L = SP_FOREIGN()) != NULL))
		return L->fn.profile ? L->fn.profile(db, cb, arg) : NULL;
	if (cb)
		sp_db_note_callbacks(db);
	return sp_real.profile ? sp_real.profile(db, cb, arg) : NULL;
}

/*
 * sqlite3_stmt_status, for its reset flag: SQLite's counter op of st
 * goes back to 0, which the preload must see. A statement that owns its
 * query record's counter segment has the segment closed before and
 * opened after (stats.c); an execution in progress that adds deltas from
 * its counters at start has that counter's start moved back by the value
 * reset. Anything else is the original's alone.
 */
SP_EXPORT int sqlite3_stmt_status(sqlite3_stmt *st, int op, int reset)
{
	struct sp_thread *t = &sp_tls;
	const struct sp_lib *L;
	struct sp_stmt *s;
	int rc, saved;

	NEED();
	if (unlikely((L = SP_FOREIGN_STMT(st, __builtin_return_address(0))) != NULL))
		return L->fn.stmt_status ? L->fn.stmt_status(st, op, reset) : 0;
	if (unlikely(!sp_real.stmt_status))
		return 0;
	if (!reset || op < SQLITE_STMTSTATUS_FULLSCAN_STEP || op > SQLITE_STMTSTATUS_VM_STEP ||
	    !st || !sp_hot || sp_guarded(t))
		return sp_real.stmt_status(st, op, reset);
	saved = errno;
	sp_thread_ready(t);
	s = sp_stmt_find_hot(st);
	if (s && s->agg && s->agg_arena == t->arena_id &&
	    s->agg->seg_owner == (uint64_t)(uintptr_t)s &&
	    atomic_load_explicit(&sp_status_off, memory_order_relaxed) >= 0) {
		rc = sp_seg_status_reset(t, s->agg, s, st, op);
	} else {
		rc = sp_real.stmt_status(st, op, 1); /* the value it held */
		if (s && s->exec.start)
			s->exec.base[op - SQLITE_STMTSTATUS_FULLSCAN_STEP] -= (uint32_t)rc;
	}
	errno = saved;
	return rc;
}

SP_EXPORT int sqlite3_set_authorizer(sqlite3 *db,
				     int (*cb)(void *, int, const char *, const char *,
					       const char *, const char *),
				     void *arg)
{
	const struct sp_lib *L;

	NEED();
	if (unlikely((L = SP_FOREIGN()) != NULL))
		return L->fn.set_authorizer ? L->fn.set_authorizer(db, cb, arg) : MISSING;
	if (cb)
		sp_db_note_callbacks(db);
	return sp_real.set_authorizer ? sp_real.set_authorizer(db, cb, arg) : MISSING;
}

SP_EXPORT void sqlite3_progress_handler(sqlite3 *db, int n, int (*cb)(void *), void *arg)
{
	const struct sp_lib *L;

	NEED();
	if (unlikely((L = SP_FOREIGN()) != NULL)) {
		if (L->fn.progress_handler)
			L->fn.progress_handler(db, n, cb, arg);
		return;
	}
	if (cb)
		sp_db_note_callbacks(db);
	if (sp_real.progress_handler)
		sp_real.progress_handler(db, n, cb, arg);
}

/* ---- dlclose: a library unloaded leaves its addresses to the next one
 * loaded. Counted (sp_unloads) so that stacks taken after it are new
 * stacks with the module map current then (and the map is looked at
 * again). dlopen is deepbind.c's stub: the caller's RUNPATH and $ORIGIN
 * are the loader's to find from its return address. ---- */

SP_EXPORT int dlclose(void *handle)
{
	static int (*real_dlclose)(void *);
	int rc;

	if (unlikely(!real_dlclose))
		*(void **)&real_dlclose = dlsym(RTLD_NEXT, "dlclose");
	rc = real_dlclose ? real_dlclose(handle) : -1;
	atomic_fetch_add_explicit(&sp_unloads, 1, memory_order_relaxed);
	SP_DEEPBIND_CATCH_UP();
	return rc;
}

/* ---- changing the uid: a forked child not connected yet connects first,
 * while the collector still lets it in (stream.c). ---- */

SP_EXPORT int setuid(uid_t uid)
{
	sp_stream_before_uid_change();
	return ((int (*)(uid_t))dlsym(RTLD_NEXT, "setuid"))(uid);
}

SP_EXPORT int seteuid(uid_t uid)
{
	sp_stream_before_uid_change();
	return ((int (*)(uid_t))dlsym(RTLD_NEXT, "seteuid"))(uid);
}

SP_EXPORT int setreuid(uid_t r, uid_t e)
{
	sp_stream_before_uid_change();
	return ((int (*)(uid_t, uid_t))dlsym(RTLD_NEXT, "setreuid"))(r, e);
}

SP_EXPORT int setresuid(uid_t r, uid_t e, uid_t s)
{
	sp_stream_before_uid_change();
	return ((int (*)(uid_t, uid_t, uid_t))dlsym(RTLD_NEXT, "setresuid"))(r, e, s);
}

/* ---- leaving the process image: _exit skips destructors and exec
 * replaces us, so say goodbye first. exit() runs our destructor itself. ---- */

#define REAL(type, name) ((type)dlsym(RTLD_NEXT, name))

SP_EXPORT void _exit(int status)
{
	sp_stream_leaving();
	REAL(void (*)(int), "_exit")(status);
	__builtin_unreachable();
}

SP_EXPORT void _Exit(int status)
{
	sp_stream_leaving();
	REAL(void (*)(int), "_Exit")(status);
	__builtin_unreachable();
}

SP_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
	sp_stream_leaving();
	return REAL(int (*)(const char *, char *const[], char *const[]), "execve")(path, argv,
										   envp);
}

SP_EXPORT int execv(const char *path, char *const argv[])
{
	sp_stream_leaving();
	return REAL(int (*)(const char *, char *const[]), "execv")(path, argv);
}

SP_EXPORT int execvp(const char *file, char *const argv[])
{
	sp_stream_leaving();
	return REAL(int (*)(const char *, char *const[]), "execvp")(file, argv);
}

SP_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
	sp_stream_leaving();
	return REAL(int (*)(const char *, char *const[], char *const[]), "execvpe")(file, argv,
										    envp);
}

SP_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
	sp_stream_leaving();
	return REAL(int (*)(int, char *const[], char *const[]), "fexecve")(fd, argv, envp);
}

/* The variadic execl family: collect the arguments, then exec as above. */
static int execl_common(int mode, const char *path, const char *arg0, va_list ap)
{
	va_list aq;
	size_t n = 1, i;
	char **argv, *const *envp = NULL;
	int rc;

	va_copy(aq, ap);
	while (va_arg(aq, char *))
		n++;
	va_end(aq);
	argv = alloca((n + 1) * sizeof(*argv));
	argv[0] = (char *)arg0;
	for (i = 1; i <= n; i++)
		argv[i] = va_arg(ap, char *);
	if (mode == 2)
		envp = va_arg(ap, char *const *);
	if (mode == 1)
		rc = execvp(path, argv);
	else if (mode == 2)
		rc = execve(path, argv, envp);
	else
		rc = execv(path, argv);
	return rc;
}

SP_EXPORT int execl(const char *path, const char *arg, ...)
{
	va_list ap;
	int rc;

	va_start(ap, arg);
	rc = execl_common(0, path, arg, ap);
	va_end(ap);
	return rc;
}

SP_EXPORT int execlp(const char *file, const char *arg, ...)
{
	va_list ap;
	int rc;

	va_start(ap, arg);
	rc = execl_common(1, file, arg, ap);
	va_end(ap);
	return rc;
}

SP_EXPORT int execle(const char *path, const char *arg, ...)
{
	va_list ap;
	int rc;

	va_start(ap, arg);
	rc = execl_common(2, path, arg, ap);
	va_end(ap);
	return rc;
}
