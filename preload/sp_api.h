/* SPDX-License-Identifier: MIT */
/*
 * sp_api.h - the one list of the functions libsqlprof.so resolves in a
 * SQLite library and of those it interposes. Each entry makes
 *   - a field of struct sp_real (SP_API_CORE) or struct sp_plan_real
 *     (SP_API_PLAN), sp_preload.h;
 *   - its dlsym in resolve_from (resolve.c) or sp_plan_resolve_from
 *     (shims_plan.c), and for SP_REQ entries the test that a library
 *     without it is not used;
 *   - for SP_SHIM entries, the symbol's line in the version script: the
 *     Makefile runs libsqlprof.map.in, which includes this file, through
 *     the C preprocessor. The libc entry points we interpose are
 *     SP_API_LIBC.
 * A shim is still written by hand (shims.c, shims_plan.c, life.c...):
 * t_layout checks that every SP_SHIM entry has a definition.
 *
 * X(field, symbol, export, need, return type, (parameter types))
 *   export: SP_SHIM (an interposer: exported) or SP_USE (called only)
 *   need:   SP_REQ (a library without it is not profiled) or SP_OPT
 *
 * This file holds macros only: the types are read where X expands them.
 */
#ifndef SP_API_H
#define SP_API_H

#define SP_USE 0
#define SP_SHIM 1
#define SP_OPT 0
#define SP_REQ 1

#define SP_API_CORE(X)                                                                            \
	X(open, sqlite3_open, SP_SHIM, SP_OPT, int, (const char *, sqlite3 **))                   \
	X(open_v2, sqlite3_open_v2, SP_SHIM, SP_OPT, int,                                         \
	  (const char *, sqlite3 **, int, const char *))                                          \
	X(open16, sqlite3_open16, SP_SHIM, SP_OPT, int, (const void *, sqlite3 **))               \
	X(close, sqlite3_close, SP_SHIM, SP_OPT, int, (sqlite3 *))                                \
	X(close_v2, sqlite3_close_v2, SP_SHIM, SP_OPT, int, (sqlite3 *))                          \
	X(prepare, sqlite3_prepare, SP_SHIM, SP_OPT, int,                                         \
	  (sqlite3 *, const char *, int, sqlite3_stmt **, const char **))                         \
	X(prepare_v2, sqlite3_prepare_v2, SP_SHIM, SP_REQ, int,                                   \
	  (sqlite3 *, const char *, int, sqlite3_stmt **, const char **))                         \
	/* 3.20+ */                                                                               \
	X(prepare_v3, sqlite3_prepare_v3, SP_SHIM, SP_OPT, int,                                   \
	  (sqlite3 *, const char *, int, unsigned int, sqlite3_stmt **, const char **))           \
	X(prepare16, sqlite3_prepare16, SP_SHIM, SP_OPT, int,                                     \
	  (sqlite3 *, const void *, int, sqlite3_stmt **, const void **))                         \
	X(prepare16_v2, sqlite3_prepare16_v2, SP_SHIM, SP_OPT, int,                               \
	  (sqlite3 *, const void *, int, sqlite3_stmt **, const void **))                         \
	X(prepare16_v3, sqlite3_prepare16_v3, SP_SHIM, SP_OPT, int,                               \
	  (sqlite3 *, const void *, int, unsigned int, sqlite3_stmt **, const void **))           \
	X(step, sqlite3_step, SP_SHIM, SP_REQ, int, (sqlite3_stmt *))                             \
	X(reset, sqlite3_reset, SP_SHIM, SP_REQ, int, (sqlite3_stmt *))                           \
	X(finalize, sqlite3_finalize, SP_SHIM, SP_REQ, int, (sqlite3_stmt *))                     \
	X(exec, sqlite3_exec, SP_SHIM, SP_OPT, int,                                               \
	  (sqlite3 *, const char *, int (*)(void *, int, char **, char **), void *, char **))     \
	/* interposed for its reset flag (shims.c), and called */                                 \
	X(stmt_status, sqlite3_stmt_status, SP_SHIM, SP_REQ, int, (sqlite3_stmt *, int, int))     \
	/* called by the profiler itself, never interposed */                                     \
	X(sql, sqlite3_sql, SP_USE, SP_REQ, const char *, (sqlite3_stmt *))                       \
	X(db_handle, sqlite3_db_handle, SP_USE, SP_OPT, sqlite3 *, (sqlite3_stmt *))              \
	X(errmsg, sqlite3_errmsg, SP_USE, SP_OPT, const char *, (sqlite3 *))                      \
	X(extended_errcode, sqlite3_extended_errcode, SP_USE, SP_OPT, int, (sqlite3 *))           \
	/* 3.28+ */                                                                               \
	X(stmt_isexplain, sqlite3_stmt_isexplain, SP_USE, SP_OPT, int, (sqlite3_stmt *))          \
	X(column_text, sqlite3_column_text, SP_USE, SP_OPT, const unsigned char *,                \
	  (sqlite3_stmt *, int))                                                                  \
	X(column_int, sqlite3_column_int, SP_USE, SP_OPT, int, (sqlite3_stmt *, int))             \
	/* the duplicate rule (exec.c) */                                                         \
	X(expanded_sql, sqlite3_expanded_sql, SP_USE, SP_OPT, char *, (sqlite3_stmt *))           \
	X(bind_parameter_count, sqlite3_bind_parameter_count, SP_USE, SP_OPT, int,                \
	  (sqlite3_stmt *))                                                                       \
	X(free, sqlite3_free, SP_USE, SP_OPT, void, (void *))                                     \
	/* a guarded step (exec.c) */                                                             \
	X(stmt_busy, sqlite3_stmt_busy, SP_USE, SP_OPT, int, (sqlite3_stmt *))                    \
	/* callback registrations, interposed only to note them (plan.c) */                       \
	X(trace_v2, sqlite3_trace_v2, SP_SHIM, SP_OPT, int,                                       \
	  (sqlite3 *, unsigned, int (*)(unsigned, void *, void *, void *), void *))               \
	X(trace, sqlite3_trace, SP_SHIM, SP_OPT, void *,                                          \
	  (sqlite3 *, void (*)(void *, const char *), void *))                                    \
	X(profile, sqlite3_profile, SP_SHIM, SP_OPT, void *,                                      \
	  (sqlite3 *, void (*)(void *, const char *, sqlite3_uint64), void *))                    \
	X(set_authorizer, sqlite3_set_authorizer, SP_SHIM, SP_OPT, int,                           \
	  (sqlite3 *,                                                                             \
	   int (*)(void *, int, const char *, const char *, const char *, const char *), void *)) \
	X(progress_handler, sqlite3_progress_handler, SP_SHIM, SP_OPT, void,                      \
	  (sqlite3 *, int, int (*)(void *), void *))

/* What plan capture (plan.c) needs and the registrations that turn it off
 * (shims_plan.c). */
#define SP_API_PLAN(X)                                                                    \
	X(config, sqlite3_config, SP_SHIM, SP_OPT, int, (int, ...))                       \
	X(create_module, sqlite3_create_module, SP_SHIM, SP_OPT, int,                     \
	  (sqlite3 *, const char *, const sqlite3_module *, void *))                      \
	X(create_module_v2, sqlite3_create_module_v2, SP_SHIM, SP_OPT, int,               \
	  (sqlite3 *, const char *, const sqlite3_module *, void *, void (*)(void *)))    \
	X(load_extension, sqlite3_load_extension, SP_SHIM, SP_OPT, int,                   \
	  (sqlite3 *, const char *, const char *, char **))                               \
	X(enable_load_extension, sqlite3_enable_load_extension, SP_SHIM, SP_OPT, int,     \
	  (sqlite3 *, int))                                                               \
	X(auto_extension, sqlite3_auto_extension, SP_SHIM, SP_OPT, int, (void (*)(void))) \
	X(limit, sqlite3_limit, SP_USE, SP_OPT, int, (sqlite3 *, int, int))               \
	X(db_mutex, sqlite3_db_mutex, SP_USE, SP_OPT, sqlite3_mutex *, (sqlite3 *))       \
	X(mutex_enter, sqlite3_mutex_enter, SP_USE, SP_OPT, void, (sqlite3_mutex *))      \
	X(mutex_leave, sqlite3_mutex_leave, SP_USE, SP_OPT, void, (sqlite3_mutex *))      \
	/* the schema a plan is taken under (plan.c) */                                   \
	X(db_filename, sqlite3_db_filename, SP_USE, SP_OPT, const char *,                 \
	  (sqlite3 *, const char *))                                                      \
	X(txn_state, sqlite3_txn_state, SP_USE, SP_OPT, int, (sqlite3 *, const char *))

/* The C library's entry points a profiler must follow (life.c, shims.c,
 * deepbind.c): uid changes, exits, execs, loads; and sqlprof_next_sym,
 * the address a second copy of us asks for (resolve.c). X(symbol) */
#define SP_API_LIBC(X) \
	X(setuid)      \
	X(seteuid)     \
	X(setreuid)    \
	X(setresuid)   \
	X(_exit)       \
	X(_Exit)       \
	X(execve)      \
	X(execv)       \
	X(execvp)      \
	X(execvpe)     \
	X(fexecve)     \
	X(execl)       \
	X(execlp)      \
	X(execle)      \
	X(dlopen)      \
	X(dlclose)     \
	X(sqlprof_next_sym)

#endif
