/* SPDX-License-Identifier: MIT */
/*
 * resolve.c - finding libsqlite3's originals (the real_ table, sp_real):
 * lazily, because libsqlite3 may arrive by dlopen after we start.
 */
#include <dlfcn.h>
#include <errno.h>

#include "sp_preload.h"

struct sp_real sp_real;
atomic_int sp_resolved;
int sp_hot;

#define RESOLVE(h, field, name) \
	(*(void **)&sp_real.field = dlsym(h, name))

static void resolve_from(void *h)
{
	RESOLVE(h, open, "sqlite3_open");
	RESOLVE(h, open_v2, "sqlite3_open_v2");
	RESOLVE(h, open16, "sqlite3_open16");
	RESOLVE(h, close, "sqlite3_close");
	RESOLVE(h, close_v2, "sqlite3_close_v2");
	RESOLVE(h, prepare, "sqlite3_prepare");
	RESOLVE(h, prepare_v2, "sqlite3_prepare_v2");
	RESOLVE(h, prepare_v3, "sqlite3_prepare_v3");       /* optional: 3.20+ */
	RESOLVE(h, prepare16, "sqlite3_prepare16");
	RESOLVE(h, prepare16_v2, "sqlite3_prepare16_v2");
	RESOLVE(h, prepare16_v3, "sqlite3_prepare16_v3");   /* optional: 3.20+ */
	RESOLVE(h, step, "sqlite3_step");
	RESOLVE(h, reset, "sqlite3_reset");
	RESOLVE(h, finalize, "sqlite3_finalize");
	RESOLVE(h, exec, "sqlite3_exec");
	RESOLVE(h, sql, "sqlite3_sql");
	RESOLVE(h, stmt_status, "sqlite3_stmt_status");
	RESOLVE(h, db_handle, "sqlite3_db_handle");
	RESOLVE(h, errmsg, "sqlite3_errmsg");
	RESOLVE(h, extended_errcode, "sqlite3_extended_errcode");
	RESOLVE(h, stmt_isexplain, "sqlite3_stmt_isexplain");  /* optional: 3.28+ */
	RESOLVE(h, column_text, "sqlite3_column_text");
	RESOLVE(h, column_int, "sqlite3_column_int");
	RESOLVE(h, trace_v2, "sqlite3_trace_v2");
	RESOLVE(h, trace, "sqlite3_trace");
	RESOLVE(h, profile, "sqlite3_profile");
	RESOLVE(h, set_authorizer, "sqlite3_set_authorizer");
	RESOLVE(h, progress_handler, "sqlite3_progress_handler");
}

/*
 * Find libsqlite3's functions. RTLD_NEXT finds a library in the global
 * scope (linked at start-up); a library dlopen'd with RTLD_LOCAL as a
 * dependency (Python's _sqlite3 module) is only reachable through its own
 * handle, which RTLD_NOLOAD gives without loading anything.
 * Returns 0 when the required originals are known. Safe to race: every
 * caller stores the same values.
 */
int sp_resolve(void)
{
	static const char *const names[] = { "libsqlite3.so.0", "libsqlite3.so" };
	int saved = errno;
	size_t i;

	if (atomic_load_explicit(&sp_resolved, memory_order_acquire))
		return 0;
	if (!sp_real.dlopen)
		sp_real.dlopen = (void *(*)(const char *, int))dlsym(RTLD_NEXT, "dlopen");
	resolve_from(RTLD_NEXT);
	for (i = 0; !sp_real.step && sp_real.dlopen && i < sizeof(names) / sizeof(names[0]); i++) {
		void *h = sp_real.dlopen(names[i], RTLD_LAZY | RTLD_NOLOAD);

		if (h)
			resolve_from(h); /* the handle is kept: libsqlite3 stays */
	}
	errno = saved;
	if (!sp_real.step || !sp_real.prepare_v2 || !sp_real.reset || !sp_real.finalize ||
	    !sp_real.sql || !sp_real.stmt_status)
		return -1;
	atomic_store_explicit(&sp_resolved, 1, memory_order_release);
	if (sp_cfg.enabled)
		sp_hot = 1;
	return 0;
}
