/* SPDX-License-Identifier: MIT */
/*
 * tracev2_preload.c - what a user could write instead of sqlprof: a tiny
 * preload that interposes sqlite3_open, _open_v2 and _open16 and registers
 * SQLite's own SQLITE_TRACE_PROFILE callback (sqlite3_trace_v2) on every
 * connection. The callback adds each finished statement's count and
 * nanoseconds to an in-memory table keyed by statement; a destructor
 * prints a summary (to $TRACEV2_OUT, else stderr) at exit.
 *
 * What it does not do, and sqlprof does: stacks, rows, per-statement
 * counters, percentiles, nesting, errors, sqlite3_exec as a unit, or
 * sub-millisecond times: SQLite computes the PROFILE time from a
 * millisecond clock (docs/benchmarks.md). A statement pointer reused
 * after finalize for another SQL text gets a slot of its own when its
 * text differs (compared by the statement's text pointer).
 *
 * Built by scripts/bench_build.sh; used as a `make bench` configuration.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))
#define SLOTS 4096

struct slot {
	sqlite3_stmt *stmt;  /* key, set once by CAS */
	const char *sql_ptr; /* sqlite3_sql() of the statement, part of the key */
	char *sql;           /* copy of the text, for the summary */
	uint64_t count, ns;
};

static struct slot table[SLOTS];
static uint64_t dropped;
static int opened; /* a connection was opened: print a summary at exit */

static void *resolve(const char *name)
{
	void *f = dlsym(RTLD_NEXT, name), *h;

	if (!f && (h = dlopen("libsqlite3.so.0", RTLD_NOLOAD | RTLD_LAZY)))
		f = dlsym(h, name);
	if (!f) {
		static const char msg[] = "tracev2_preload: cannot resolve a sqlite3 symbol\n";

		(void)!write(2, msg, sizeof(msg) - 1);
		abort();
	}
	return f;
}

static int (*real_open)(const char *, sqlite3 **);
static int (*real_open_v2)(const char *, sqlite3 **, int, const char *);
static int (*real_open16)(const void *, sqlite3 **);
static int (*real_trace_v2)(sqlite3 *, unsigned, int (*)(unsigned, void *, void *, void *), void *);
static const char *(*real_sql)(sqlite3_stmt *);

/* Resolve everything once; called from the open shims, which run before
 * any statement exists, so the callback always finds real_sql set. */
static void resolve_all(void)
{
	if (__atomic_load_n(&real_sql, __ATOMIC_ACQUIRE))
		return;
	real_open = resolve("sqlite3_open");
	real_open_v2 = resolve("sqlite3_open_v2");
	real_open16 = resolve("sqlite3_open16");
	real_trace_v2 = resolve("sqlite3_trace_v2");
	__atomic_store_n(&real_sql, (const char *(*)(sqlite3_stmt *))resolve("sqlite3_sql"),
			 __ATOMIC_RELEASE);
}

/* SQLITE_TRACE_PROFILE: p is the statement, x points to its run time in
 * ns (millisecond resolution). Lock-free: a slot is claimed by CAS on its
 * statement pointer, counters are atomic adds. */
static int on_trace(unsigned type, void *ctx, void *p, void *x)
{
	sqlite3_stmt *st = p;
	const char *sql = real_sql(st);
	uint64_t ns = (uint64_t) * (const sqlite3_int64 *)x;
	size_t h = ((uintptr_t)st >> 4) * 0x9e3779b97f4a7c15ull >> 52, i;

	for (i = 0; i < SLOTS; i++) {
		struct slot *s = &table[(h + i) % SLOTS];
		sqlite3_stmt *k = __atomic_load_n(&s->stmt, __ATOMIC_ACQUIRE);

		if (!k) {
			sqlite3_stmt *expect = NULL;

			if (!__atomic_compare_exchange_n(&s->stmt, &expect, st, 0, __ATOMIC_ACQ_REL,
							 __ATOMIC_ACQUIRE)) {
				if (expect != st)
					continue;
			} else {
				s->sql = sql ? strdup(sql) : NULL;
				__atomic_store_n(&s->sql_ptr, sql, __ATOMIC_RELEASE);
			}
			k = st;
		}
		if (k != st)
			continue;
		if (__atomic_load_n(&s->sql_ptr, __ATOMIC_ACQUIRE) != sql)
			continue; /* same pointer, another statement (or still being claimed) */
		__atomic_fetch_add(&s->count, 1, __ATOMIC_RELAXED);
		__atomic_fetch_add(&s->ns, ns, __ATOMIC_RELAXED);
		return 0;
	}
	__atomic_fetch_add(&dropped, 1, __ATOMIC_RELAXED);
	return 0;
}

static int after_open(int rc, sqlite3 **db)
{
	if (rc == SQLITE_OK && db && *db) {
		real_trace_v2(*db, SQLITE_TRACE_PROFILE, on_trace, NULL);
		__atomic_store_n(&opened, 1, __ATOMIC_RELAXED);
	}
	return rc;
}

EXPORT int sqlite3_open(const char *f, sqlite3 **db)
{
	resolve_all();
	return after_open(real_open(f, db), db);
}

EXPORT int sqlite3_open_v2(const char *f, sqlite3 **db, int flags, const char *vfs)
{
	resolve_all();
	return after_open(real_open_v2(f, db, flags, vfs), db);
}

EXPORT int sqlite3_open16(const void *f, sqlite3 **db)
{
	resolve_all();
	return after_open(real_open16(f, db), db);
}

/* At exit (after main returns or exit(); the program's threads are done
 * or about to be killed, so counts read here may miss a last addition):
 * one summary line and the five statements with the most time; nothing
 * in a process that opened no connection. */
__attribute__((destructor)) static void summary(void)
{
	const char *out = getenv("TRACEV2_OUT");
	FILE *f;
	uint64_t n = 0, ns = 0, stmts = 0;
	struct slot *top[5] = { 0 };
	size_t i, j;

	if (!__atomic_load_n(&opened, __ATOMIC_RELAXED))
		return;
	f = out && *out ? fopen(out, "a") : stderr;
	if (!f)
		return;
	for (i = 0; i < SLOTS; i++) {
		struct slot *s = &table[i];

		if (!s->stmt)
			continue;
		stmts++;
		n += s->count;
		ns += s->ns;
		for (j = 0; j < 5; j++) {
			if (!top[j] || s->ns > top[j]->ns) {
				memmove(&top[j + 1], &top[j], (4 - j) * sizeof(top[0]));
				top[j] = s;
				break;
			}
		}
	}
	fprintf(f, "tracev2: %llu executions of %llu statements, %.3f ms, %llu not recorded\n",
		(unsigned long long)n, (unsigned long long)stmts, ns / 1e6,
		(unsigned long long)dropped);
	for (j = 0; j < 5 && top[j]; j++)
		fprintf(f, "tracev2: %10llu %12.3f ms  %.60s\n", (unsigned long long)top[j]->count,
			top[j]->ns / 1e6, top[j]->sql ? top[j]->sql : "?");
	if (f != stderr)
		fclose(f);
}
