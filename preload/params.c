/* SPDX-License-Identifier: MIT */
/*
 * params.c - the bound values' hash of a drawn execution (sp_rec_exec.
 * params, the doctor's duplicate rule): which of sp_params.h's two ways
 * this process takes, and the hash itself.
 *
 * The way is chosen once and never changes, so that two executions with
 * the same values always get the same hash: the statement's parameter
 * array, read with the layout the start-up probe validated (stmt.c runs
 * it with the counter probe, or sqlprof record hands it over in
 * SQLPROF_PARAMS_LAYOUT), or else sqlite3_expanded_sql's text. A hash
 * asked for before any probe (a statement prepared before we were loaded,
 * stepped before any prepare) settles it on the text. Statements of
 * another SQLite in the process never come here: their calls are passed
 * through (SP_FOREIGN_STMT), so the layout only ever reads statements of
 * the library it was found in.
 *
 * What it does not do: decide which executions are hashed (exec.c,
 * params_hash).
 */
#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>

#include "sp_preload.h"
#include "sp_probe.h"

enum { WAY_UNSET, WAY_MEMORY, WAY_TEXT };

static struct sp_params_layout layout; /* written before way is WAY_MEMORY */
static atomic_int way;

/* A statement without parameters hashes as its sql_id alone: the last
 * few, per thread, so that a loop over one does not SipHash each time
 * (~90 instructions). The key never changes, a forked child's neither. */
#define NONE_SLOTS 8
static __thread struct {
	uint64_t sql_id, h;
} none_cache[NONE_SLOTS] __attribute__((tls_model("initial-exec")));

/* Settle the way: WAY_MEMORY with *L when L is given and nothing was
 * settled yet, WAY_TEXT otherwise. Returns the way that holds. */
static int settle(const struct sp_params_layout *L)
{
	int unset = WAY_UNSET;

	if (L) {
		layout = *L;
		if (atomic_compare_exchange_strong_explicit(
			    &way, &unset, WAY_MEMORY, memory_order_release, memory_order_acquire))
			return WAY_MEMORY;
		return unset;
	}
	if (atomic_compare_exchange_strong_explicit(&way, &unset, WAY_TEXT, memory_order_acq_rel,
						    memory_order_acquire))
		return WAY_TEXT;
	return unset;
}

/* The layout sqlprof record found for its own libsqlite3, when ours is the
 * same file (dev, ino of the object holding sqlite3_step): 0, or -1. */
static int layout_from_env(struct sp_params_layout *L, unsigned long long dev,
			   unsigned long long ino)
{
	unsigned long long d, i;

	if (sp_params_layout_parse(getenv(SP_ENV_PARAMS_LAYOUT), L, &d, &i) < 0)
		return -1;
	return d == dev && i == ino ? 0 : -1;
}

int sp_params_probe_wanted(unsigned long long dev, unsigned long long ino, int have_file)
{
	struct sp_params_layout L;

	if (atomic_load_explicit(&way, memory_order_acquire) != WAY_UNSET)
		return 0;
	if (sp_cfg.params != 1) {
		settle(NULL); /* off, or SQLPROF_PARAMS=2: the text */
		return 0;
	}
	if (!sp_real.bind_parameter_count || !sp_real.db_handle || sp_plan_resolve() < 0) {
		settle(NULL);
		return 0;
	}
	if (have_file && layout_from_env(&L, dev, ino) == 0) {
		settle(&L);
		return 0;
	}
	return 1;
}

void sp_params_probe(const struct sp_probe_api *api, sqlite3 *db)
{
	struct sp_params_layout L;

	if (sp_probe_params_db(api, db, &L) == 0)
		settle(&L);
	else
		settle(NULL);
}

/* The hash of a statement without parameters. */
static uint64_t hash_none(uint64_t sql_id)
{
	unsigned slot = (unsigned)(sql_id ^ sql_id >> 29) % NONE_SLOTS;
	uint64_t h;

	if (none_cache[slot].sql_id == sql_id && none_cache[slot].h)
		return none_cache[slot].h;
	h = sp_params_hash_none(sp_params_key, sql_id);
	none_cache[slot].sql_id = sql_id;
	none_cache[slot].h = h;
	return h;
}

/*
 * The keyed hash of sql_id with st's bound values (never 0), or 0 when it
 * cannot be had (the text way, out of memory). From the parameter array:
 * ~400 instructions for `SELECT ?1+1` (callgrind), ~110 of them the
 * connection's mutex, held so that another thread's sqlite3_bind,
 * clear_bindings or step (a re-prepare) cannot free what we read, as
 * sqlite3_expanded_sql holds it too; from the text: ~2,200
 * (sqlite3_expanded_sql formats and allocates). Keeps errno; calls into
 * SQLite under the guard.
 */
__attribute__((noinline)) uint64_t sp_params_hash(struct sp_thread *t, sqlite3_stmt *st,
						  uint64_t sql_id)
{
	int saved = errno, n, w;
	uint64_t h = 0;

	n = sp_real.bind_parameter_count ? sp_real.bind_parameter_count(st) : -1;
	if (n == 0) {
		h = hash_none(sql_id);
		errno = saved;
		return h;
	}
	w = atomic_load_explicit(&way, memory_order_acquire);
	if (unlikely(w == WAY_UNSET))
		w = settle(NULL);
	sp_guard_in(t);
	if (w == WAY_MEMORY && n > 0) {
		sqlite3 *db = sp_real.db_handle(st);
		sqlite3_mutex *mx = db ? sp_plan_real.db_mutex(db) : NULL;

		if (mx)
			sp_plan_real.mutex_enter(mx);
		h = sp_params_hash_mem(sp_params_key, &layout, st, n, sql_id);
		if (mx)
			sp_plan_real.mutex_leave(mx);
	} else if (sp_real.expanded_sql && sp_real.free) {
		h = sp_params_hash_text(sp_params_key, st, sp_real.expanded_sql, sp_real.free);
	}
	sp_guard_out(t);
	errno = saved;
	return h;
}
