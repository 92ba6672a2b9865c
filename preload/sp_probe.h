/* SPDX-License-Identifier: MIT */
/*
 * sp_probe.h - where a libsqlite3 keeps its statement counters
 * (SQLITE_STMTSTATUS_*, the u32 aCounter[] of the statement object), found
 * by experiment: a private in-memory connection without lookaside (so the
 * statement object comes from sqlite3_malloc and sqlite3_msize bounds the
 * scan) runs a statement several times, so the counters take distinct
 * values, and only an offset where all eight match the API after every
 * run is kept. Shared by the preload (stmt.c) and by `sqlprof record`,
 * which probes its own libsqlite3 once and hands the result to the
 * processes it starts (SQLPROF_STATUS_LAYOUT), so that each of them does
 * not pay for a connection of its own.
 *
 * Header-only: the caller passes the functions to use (the preload's are
 * the uninterposed originals).
 */
#ifndef SP_PROBE_H
#define SP_PROBE_H

#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>
#if defined(__has_include)
#if __has_include(<valgrind/memcheck.h>)
#include <valgrind/memcheck.h>
#endif
#endif
#ifndef VALGRIND_MAKE_MEM_DEFINED
#define VALGRIND_MAKE_MEM_DEFINED(p, n) ((void)(p), (void)(n))
#endif

struct sp_probe_api {
	int (*open_v2)(const char *, sqlite3 **, int, const char *);
	int (*close)(sqlite3 *);
	int (*db_config)(sqlite3 *, int, ...);
	sqlite3_uint64 (*msize)(void *);
	int (*prepare_v2)(sqlite3 *, const char *, int, sqlite3_stmt **, const char **);
	int (*step)(sqlite3_stmt *);
	int (*reset)(sqlite3_stmt *);
	int (*finalize)(sqlite3_stmt *);
	int (*stmt_status)(sqlite3_stmt *, int, int);
};

#define PROBE_OPS 8 /* SQLITE_STMTSTATUS_FULLSCAN_STEP (1) .. FILTER_HIT (8) */

/* Candidate offsets where aCounter[1..8] equal the API's values. */
static inline int sp_probe_match(const struct sp_probe_api *api, sqlite3_stmt *st, size_t size,
				 int *cand, int ncand, int first)
{
	uint32_t want[PROBE_OPS + 1];
	int op, n = 0;
	size_t off;

	for (op = 1; op <= PROBE_OPS; op++)
		want[op] = (uint32_t)api->stmt_status(st, op, 0);
	if (first) {
		for (off = 0; off + sizeof(uint32_t) * (PROBE_OPS + 1) <= size && n < 8; off += 4) {
			const uint32_t *c = (const uint32_t *)((const char *)st + off);

			for (op = 1; op <= PROBE_OPS && c[op] == want[op]; op++)
				;
			if (op > PROBE_OPS)
				cand[n++] = (int)off;
		}
		return n;
	}
	for (int i = 0; i < ncand; i++) {
		const uint32_t *c = (const uint32_t *)((const char *)st + cand[i]);

		for (op = 1; op <= PROBE_OPS && c[op] == want[op]; op++)
			;
		if (op > PROBE_OPS)
			cand[n++] = cand[i];
	}
	return n;
}

/*
 * Find where this libsqlite3 keeps its statement counters, on a private
 * in-memory connection without lookaside (so the statement object comes
 * from sqlite3_malloc and sqlite3_msize bounds the scan). The probe runs a
 * statement several times so the counters take distinct values, and keeps
 * only an offset where all eight match the API after every run. Called at
 * the first prepare, when the application has initialised SQLite (we never
 * initialise it first: that would break its sqlite3_config calls).
 * SQLPROF_STATUS=api skips it.
 */
/* The offset of aCounter[0] in a statement object, or -1. */
static inline int sp_probe_counters(const struct sp_probe_api *api)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *st = NULL;
	int cand[8], n = 0, run, off = -1;
	size_t size;

	if (!api->open_v2 || !api->close || !api->db_config || !api->msize || !api->prepare_v2 ||
	    !api->step || !api->reset || !api->finalize || !api->stmt_status)
		return -1;
	if (api->open_v2(":memory:", &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) != SQLITE_OK)
		goto out;
	api->db_config(db, SQLITE_DBCONFIG_LOOKASIDE, NULL, 0, 0);
	if (api->prepare_v2(db,
			    "WITH RECURSIVE c(x) AS (VALUES(1) UNION ALL SELECT x+1 FROM c "
			    "WHERE x<20) SELECT x FROM c ORDER BY x DESC",
			    -1, &st, NULL) != SQLITE_OK)
		goto out;
	size = (size_t)api->msize(st);
	if (size < 64 || size > 65536)
		goto out;
	/* the scan reads the whole object, padding included: under memcheck
	 * (the CLI's valgrind test) that is not an error of ours */
	VALGRIND_MAKE_MEM_DEFINED(st, size);
	for (run = 0; run < 3; run++) {
		while (api->step(st) == SQLITE_ROW)
			;
		api->reset(st);
		n = sp_probe_match(api, st, size, cand, n, run == 0);
		if (n == 0)
			goto out;
	}
	if (n == 1)
		off = cand[0];
out:
	if (st)
		api->finalize(st);
	if (db)
		api->close(db);
	return off;
}

/* SQLPROF_STATUS_LAYOUT: "OFFSET:DEV:INO", the offset found for the
 * libsqlite3 file with that device and inode. */
#define SP_ENV_STATUS_LAYOUT "SQLPROF_STATUS_LAYOUT"

#endif /* SP_PROBE_H */
