/* SPDX-License-Identifier: MIT */
/*
 * plan.c - EXPLAIN QUERY PLAN of each SQL text, once per connection, taken
 * at prepare time on the application's own connection through the real
 * (uninterposed) functions, and sent as a PLAN record.
 *
 * It must never change what the application observes; a plan may be
 * missing, never a visible side effect. What it relies on:
 *  - it runs only right after a successful prepare by the application, on
 *    its thread, outside any execution (not nested in a step or an exec),
 *    holding the connection's mutex (serialized mode: no other thread sees
 *    the states in between), and only if the error state is still the
 *    SQLITE_OK that prepare left. Preparing, stepping and finalizing an
 *    EXPLAIN statement leaves it SQLITE_OK again; a text that would not fit
 *    SQLITE_LIMIT_SQL_LENGTH with our 19-byte prefix is not tried, and
 *    after any other failure of ours the OK state is restored (restore_ok);
 *  - an EXPLAIN program touches no table and opens no transaction, so
 *    sqlite3_changes, last_insert_rowid and the autocommit state do not
 *    move (tests/integration checks all three, and errmsg);
 *  - it is skipped on any connection where the application registered a
 *    callback that our statement would trigger (trace, profile, authorizer,
 *    progress handler) or a virtual table module of its own (xBestIndex
 *    would run again), or enabled extension loading: the shims note those
 *    registrations (shims.c, shims_plan.c); and everywhere once extension
 *    code was loaded or an auto-extension registered (sp_plan_blocked);
 *  - what SQLite logs meanwhile (an automatic index) does not reach the
 *    application's SQLITE_CONFIG_LOG callback (sp_plan_quiet, shims_plan.c);
 *  - it is skipped for statements with nothing to plan (DDL, PRAGMA,
 *    transaction control, EXPLAIN itself).
 * SQLPROF_PLANS=0 turns it off.
 *
 * With the plan goes the schema it was taken under (a SCHEMA record, once
 * per connection and content), which the doctor needs to check an index
 * before suggesting it: only with a plan that reads a table, other than
 * an INSERT's (no finding could use it otherwise). Reading sqlite_schema is a read of the database,
 * so it is done only where it can take no lock, hence never wait, call a
 * busy handler or hold up another connection: an in-memory or temporary
 * database (sqlite3_db_filename gives ""), or one on which the program's
 * connection already holds a read transaction (sqlite3_txn_state). For
 * any other database file only its path is sent, and `sqlprof record`
 * reads the schema from the file itself at the end, without locking
 * (immutable), after the program is done with it.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "sp_preload.h"

#define PLAN_MAX 8192 /* bytes of plan text sent */

static int plannable(const char *sql)
{
	static const char *const kw[] = { "SELECT", "WITH",    "INSERT", "UPDATE",
					  "DELETE", "REPLACE", "VALUES" };
	size_t i;

	/* skip leading blanks and comments */
	for (;;) {
		while (*sql == ' ' || *sql == '\t' || *sql == '\n' || *sql == '\r' || *sql == '(')
			sql++;
		if (sql[0] == '-' && sql[1] == '-') {
			sql = strchr(sql, '\n');
			if (!sql)
				return 0;
		} else if (sql[0] == '/' && sql[1] == '*') {
			sql = strstr(sql + 2, "*/");
			if (!sql)
				return 0;
			sql += 2;
		} else {
			break;
		}
	}
	for (i = 0; i < sizeof(kw) / sizeof(kw[0]); i++) {
		size_t n = strlen(kw[i]);

		if (!strncasecmp(sql, kw[i], n) &&
		    !((sql[n] >= 'a' && sql[n] <= 'z') || (sql[n] >= 'A' && sql[n] <= 'Z') ||
		      sql[n] == '_' || (sql[n] >= '0' && sql[n] <= '9')))
			return 1;
	}
	return 0;
}

/* Clear the connection's error state after a failure of ours: a
 * successful prepare sets SQLITE_OK, "not an error" and no error offset,
 * as the program's own prepare left them (an empty text prepares no
 * statement). Called with the connection's mutex held. */
static void restore_ok(sqlite3 *conn)
{
	sqlite3_stmt *none = NULL;

	sp_real.prepare_v2(conn, "", 0, &none, NULL);
	if (none)
		sp_real.finalize(none);
}

/* 1 for INSERT and REPLACE texts without a SELECT in them. */
static int insert_text(const char *sql)
{
	while (*sql == ' ' || *sql == '\t' || *sql == '\n' || *sql == '\r')
		sql++;
	return (!strncasecmp(sql, "INSERT", 6) || !strncasecmp(sql, "REPLACE", 7)) &&
	       !strcasestr(sql, "SELECT");
}

/* 1 when a plan line reads a table (or a view, a subquery, a CTE): a
 * SCAN or SEARCH other than "SCAN CONSTANT ROW". Only such a plan can be a
 * doctor's finding (an index checked against the schema); without one the
 * schema is not read: reading it, the first time on a connection that has
 * not loaded it, cost 130,000 instructions for `SELECT ?1+1`. */
static int plan_line_reads(const char *detail)
{
	if (!strncmp(detail, "SEARCH ", 7))
		return 1;
	return !strncmp(detail, "SCAN ", 5) && strcmp(detail + 5, "CONSTANT ROW");
}

static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;

	while (n--)
		h = (h ^ *b++) * 0x100000001b3ULL;
	return h;
}

/*
 * The schema of conn's main database into buf (cap bytes): its CREATE
 * statements, or (*flags = SP_SCHEMA_FILE) the file's path when reading
 * them could take a lock (the file's heading). Called with the
 * connection's mutex held, inside plan capture (sp_plan_quiet, the guard).
 * Returns the length, 0 for none; on a failure of ours the caller finds
 * the error state set and restores it.
 */
static size_t schema_capture(sqlite3 *conn, char *buf, size_t cap, uint16_t *flags)
{
	static const char q[] = "SELECT sql FROM main.sqlite_schema WHERE sql NOT NULL"
				" AND type IN ('table', 'index', 'view') ORDER BY rowid";
	const char *fn;
	sqlite3_stmt *st = NULL;
	size_t n = 0;
	int rc;

	*flags = 0;
	if (!sp_plan_real.db_filename || !sp_plan_real.txn_state)
		return 0;
	fn = sp_plan_real.db_filename(conn, "main");
	if (fn && *fn && sp_plan_real.txn_state(conn, "main") < SQLITE_TXN_READ) {
		n = strlen(fn);
		if (n >= cap)
			return 0;
		memcpy(buf, fn, n);
		*flags = SP_SCHEMA_FILE;
		return n;
	}
	if (sp_real.prepare_v2(conn, q, (int)sizeof(q) - 1, &st, NULL) != SQLITE_OK || !st)
		return 0;
	while ((rc = sp_real.step(st)) == SQLITE_ROW) {
		const char *sql = (const char *)sp_real.column_text(st, 0);
		size_t l = sql ? strlen(sql) : 0;

		if (n + l + 2 >= cap) {
			n = 0; /* all or nothing */
			break;
		}
		memcpy(buf + n, sql, l);
		memcpy(buf + n + l, ";\n", 2);
		n += l + 2;
	}
	if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		n = 0;
	sp_real.finalize(st);
	return n;
}

/* ---- PLAN and SCHEMA records the ring had no room for ---- */

/*
 * Kept (copies, at most PENDING_MAX bytes, under pending_lock) and sent
 * again when the ring has room, as SQL texts are (stmt.c, sp_sql_flush,
 * which calls sp_plan_flush): a busy collector must not leave a
 * fingerprint without its plan, which is taken once. Beyond the bound a
 * record is lost, and its pair forgotten so that a later prepare takes the
 * plan again.
 */
#define PENDING_MAX (8u << 20)
struct pending_rec {
	struct pending_rec *next;
	uint32_t len;
	uint64_t rec[];
};
static pthread_mutex_t pending_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pending_rec *pending_head, **pending_tail = &pending_head;
static size_t pending_bytes;

/* Write rec (rl bytes, rl a multiple of 8) into the thread's ring, or keep
 * a copy to send later. 0, or -1 when it is lost. Keeps errno. */
static int rec_emit(struct sp_thread *t, const void *rec, uint32_t rl)
{
	struct pending_rec *p;
	void *r;
	int saved = errno;

	if (!t->tid)
		sp_thread_init(t);
	r = sp_rec_reserve(t, rl);
	if (r) {
		memcpy(r, rec, rl);
		sp_rec_commit(t, rl);
		errno = saved;
		return 0;
	}
	if (pthread_mutex_trylock(&pending_lock) != 0) {
		errno = saved;
		return -1;
	}
	if (pending_bytes + rl > PENDING_MAX || !(p = malloc(sizeof(*p) + rl))) {
		pthread_mutex_unlock(&pending_lock);
		errno = saved;
		return -1;
	}
	p->next = NULL;
	p->len = rl;
	memcpy(p->rec, rec, rl);
	*pending_tail = p;
	pending_tail = &p->next;
	pending_bytes += rl;
	atomic_store_explicit(&sp_sql_pending, 1, memory_order_relaxed);
	pthread_mutex_unlock(&pending_lock);
	errno = saved;
	return 0;
}

/* Send the records kept, in order, while the ring has room (called by
 * sp_sql_flush, the thread guarded). Returns 1 when some are still kept. */
int sp_plan_flush(struct sp_thread *t)
{
	struct pending_rec *p;
	int more;

	if (!pending_head || pthread_mutex_trylock(&pending_lock) != 0)
		return pending_head != NULL; /* racy reads: at worst a flush more */
	while ((p = pending_head) != NULL) {
		void *r = sp_rec_reserve(t, p->len);

		if (!r)
			break;
		memcpy(r, p->rec, p->len);
		sp_rec_commit(t, p->len);
		pending_head = p->next;
		pending_bytes -= p->len;
		free(p);
	}
	if (!pending_head)
		pending_tail = &pending_head;
	more = pending_head != NULL;
	pthread_mutex_unlock(&pending_lock);
	return more;
}

enum { PLAN_NEW, PLAN_SEEN, PLAN_BUSY, PLAN_FULL };
static int plan_mark(uint64_t k);
static void plan_forget(uint64_t k);
static uint64_t plan_key(uint64_t db, uint64_t shape);

/* Send the SCHEMA record of id unless this connection sent it already. */
static void schema_send(struct sp_thread *t, uint64_t db, uint64_t id, uint16_t flags,
			const char *text, size_t n)
{
	uint32_t rl = SP_ALIGN8(sizeof(struct sp_rec_schema) + n);
	uint64_t key = plan_key(db, id ^ 0x5c4e3a0000000001ULL);
	struct sp_rec_schema *r;

	if (plan_mark(key) != PLAN_NEW)
		return;
	r = calloc(1, rl); /* built here, then into the ring or kept */
	if (!r) {
		plan_forget(key);
		return;
	}
	r->h.type = SP_REC_SCHEMA;
	r->h.len = rl;
	r->h.flags = flags;
	r->pid = sp_my_pid();
	r->tid = t->tid;
	r->schema_id = id;
	r->text_len = (uint32_t)n;
	memcpy(r + 1, text, n);
	if (rec_emit(t, r, rl) < 0)
		plan_forget(key);
	free(r);
}

/* ---- the (connection, fingerprint) pairs planned ---- */

/*
 * Every pair whose plan was taken, or found impossible and said so: an
 * open-addressing set of 64-bit keys (0 empty) in memory of its own,
 * doubled when half full, up to sp_cfg.plans_max keys (SQLPROF_PLANS_MAX,
 * stated in the PLAN record that reports the bound). Used at prepare time
 * only, under plan_lock taken with trylock: a thread that finds it held
 * (another thread inserting, or a signal handler of this one re-entering)
 * skips the plan this time and tries again at the text's next prepare;
 * it never waits.
 */
static pthread_mutex_t plan_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t *plan_keys;
static size_t plan_cap, plan_slots, plan_used; /* slots: keys and tombstones */
static atomic_int plan_bound_said;

#define PLAN_GONE UINT64_MAX /* a tombstone: the pair's record was lost */

static uint64_t plan_key(uint64_t db, uint64_t shape)
{
	uint64_t k = db * 0x9E3779B97F4A7C15ULL;

	k ^= k >> 29;
	k ^= shape;
	return k && k != PLAN_GONE ? k : 1;
}

/* Insert k into a table of cap slots (a power of two) that has room. */
static int set_put(uint64_t *keys, size_t cap, uint64_t k)
{
	size_t i = (size_t)((k * 0xff51afd7ed558ccdULL) >> 20) & (cap - 1);

	for (;; i = (i + 1) & (cap - 1)) {
		if (keys[i] == k)
			return PLAN_SEEN;
		if (!keys[i]) {
			keys[i] = k;
			return PLAN_NEW;
		}
	}
}

static int set_has(const uint64_t *keys, size_t cap, uint64_t k)
{
	size_t i = (size_t)((k * 0xff51afd7ed558ccdULL) >> 20) & (cap - 1);

	if (!keys)
		return 0;
	for (;; i = (i + 1) & (cap - 1)) {
		if (keys[i] == k)
			return 1;
		if (!keys[i])
			return 0;
	}
}

/* Note the pair k: PLAN_NEW the first time (now noted), PLAN_SEEN after,
 * PLAN_BUSY when the set is in use elsewhere, PLAN_FULL when it holds
 * sp_cfg.plans_max pairs (or no memory for more). Keeps errno. */
static int plan_mark(uint64_t k)
{
	int saved = errno, rc;

	if (pthread_mutex_trylock(&plan_lock) != 0)
		return PLAN_BUSY;
	if (set_has(plan_keys, plan_cap, k)) {
		rc = PLAN_SEEN;
	} else if (plan_used >= (size_t)sp_cfg.plans_max) {
		rc = PLAN_FULL;
	} else {
		if ((plan_slots + 1) * 2 > plan_cap) {
			size_t cap = plan_cap ? plan_cap * 2 : 1024, i;
			uint64_t *keys = calloc(cap, sizeof(*keys));

			if (!keys) {
				rc = PLAN_FULL;
				goto unlock;
			}
			for (i = 0; i < plan_cap; i++)
				if (plan_keys[i] && plan_keys[i] != PLAN_GONE)
					set_put(keys, cap, plan_keys[i]);
			free(plan_keys);
			plan_keys = keys;
			plan_cap = cap;
			plan_slots = plan_used;
		}
		rc = set_put(plan_keys, plan_cap, k);
		plan_used += rc == PLAN_NEW;
		plan_slots += rc == PLAN_NEW;
	}
unlock:
	pthread_mutex_unlock(&plan_lock);
	errno = saved;
	return rc;
}

/* The record of pair k was lost (the ring full): forget the pair, so that
 * the next prepare of its fingerprint on that connection tries again.
 * Keeps errno. */
static void plan_forget(uint64_t k)
{
	int saved = errno;
	size_t i;

	if (pthread_mutex_trylock(&plan_lock) != 0)
		return; /* in use: the plan stays missing */
	if (plan_keys) {
		for (i = (size_t)((k * 0xff51afd7ed558ccdULL) >> 20) & (plan_cap - 1); plan_keys[i];
		     i = (i + 1) & (plan_cap - 1))
			if (plan_keys[i] == k) {
				plan_keys[i] = PLAN_GONE;
				plan_used--;
				break;
			}
	}
	pthread_mutex_unlock(&plan_lock);
	errno = saved;
}

/* 1 when the pair k was noted, or the set is in use elsewhere (the pair
 * is then left for a later prepare). Keeps errno. */
static int plan_seen(uint64_t k)
{
	int saved = errno, rc;

	if (pthread_mutex_trylock(&plan_lock) != 0)
		return 1;
	rc = set_has(plan_keys, plan_cap, k);
	pthread_mutex_unlock(&plan_lock);
	errno = saved;
	return rc;
}

/* In the child after fork(): a lock another thread held at the fork is
 * free again (the set is the parent's copy, complete or not). */
void sp_plan_fork_child(void)
{
	static const pthread_mutex_t init = PTHREAD_MUTEX_INITIALIZER;

	memcpy(&plan_lock, &init, sizeof(init));
	memcpy(&pending_lock, &init, sizeof(init));
	/* the records kept are the parent's to send (its pid is in them) */
	pending_head = NULL;
	pending_tail = &pending_head;
	pending_bytes = 0;
	atomic_store_explicit(&plan_bound_said, 0, memory_order_relaxed);
}

/* Send a PLAN record of sql_id on db: the plan (flags 0) or why there is
 * none (SP_PLAN_NONE...), text of n bytes. 0, or -1 when it is lost (no
 * room in the ring, nor to keep it for later). */
static int plan_send(struct sp_thread *t, uint16_t flags, uint64_t sql_id, uint64_t db,
		     uint64_t schema_id, const char *text, size_t n)
{
	uint32_t rl = SP_ALIGN8(sizeof(struct sp_rec_plan) + n);
	struct sp_rec_plan *r = calloc(1, rl); /* built here, then into the ring or kept */
	int rc;

	if (!r)
		return -1;
	if (!t->tid)
		sp_thread_init(t);
	r->h.type = SP_REC_PLAN;
	r->h.len = rl;
	r->h.flags = flags;
	r->pid = sp_my_pid();
	r->tid = t->tid;
	r->sql_id = sql_id;
	r->db = db;
	r->text_len = (uint32_t)n;
	r->schema_id = schema_id;
	memcpy(r + 1, text, n);
	rc = rec_emit(t, r, rl);
	free(r);
	return rc;
}

/* The set is full: say so, once per process, with the text it refused. */
static void plan_bound(struct sp_thread *t, uint64_t sql_id, uint64_t db)
{
	char why[160];
	int n;

	if (atomic_exchange_explicit(&plan_bound_said, 1, memory_order_relaxed))
		return;
	n = snprintf(why, sizeof(why),
		     "the process planned %ld (connection, query) pairs, its bound "
		     "(SQLPROF_PLANS_MAX): later queries have no plan",
		     sp_cfg.plans_max);
	if (n > 0 && plan_send(t, SP_PLAN_NONE | SP_PLAN_BOUND, sql_id, db, 0, why,
			       (size_t)n < sizeof(why) ? (size_t)n : sizeof(why) - 1) < 0)
		atomic_store_explicit(&plan_bound_said, 0, memory_order_relaxed);
}

/* The SCHEMA record naming conn's main database file (sent once per
 * connection and file): its id, 0 for an in-memory or temporary database.
 * Only the name is read here (sqlite3_db_filename: no I/O, no
 * allocation), under the connection's mutex. */
static uint64_t file_schema_id(struct sp_thread *t, sqlite3 *conn, uint64_t db)
{
	sqlite3_mutex *mx;
	const char *fn;
	char *path = NULL;
	uint16_t flags = SP_SCHEMA_FILE;
	uint64_t id = 0;
	size_t n = 0;

	if (!sp_plan_real.db_filename)
		return 0;
	mx = sp_plan_real.db_mutex(conn);
	sp_plan_real.mutex_enter(mx);
	fn = sp_plan_real.db_filename(conn, "main");
	if (fn && *fn && (n = strlen(fn)) < 4096 && (path = malloc(n + 1)))
		memcpy(path, fn, n + 1);
	sp_plan_real.mutex_leave(mx);
	if (!path)
		return 0;
	id = fnv1a(fnv1a(0xcbf29ce484222325ULL, &flags, sizeof(flags)), path, n);
	id += !id;
	schema_send(t, db, id, flags, path, n);
	free(path);
	return id;
}

/* No plan of this fingerprint can be taken on db: say why, once per
 * (connection, fingerprint), with the database file when there is one
 * (the collector may plan the text on the file after the run, where no
 * code of the program's can run). Keeps errno. */
static void plan_none(struct sp_thread *t, uint64_t key, uint64_t sql_id, uint64_t db,
		      const char *why)
{
	switch (plan_mark(key)) {
	case PLAN_NEW:
		if (plan_send(t, SP_PLAN_NONE, sql_id, db,
			      file_schema_id(t, (sqlite3 *)(uintptr_t)db, db), why,
			      strlen(why)) < 0)
			plan_forget(key); /* said again at a later prepare */
		break;
	case PLAN_FULL: plan_bound(t, sql_id, db); break;
	default: break;
	}
}

/*
 * Take the plan of st (just prepared by the program, successfully, on
 * connection db, outside any execution of this thread) and send it as a
 * PLAN record, once per connection and fingerprint (shape: the text
 * without its literals, sp_sql_note): a dump's 100,000 INSERT texts of one
 * shape cost one EXPLAIN, and the plan stands for all of them in the
 * profile. Where a plan cannot be taken without the program seeing it
 * (the file's heading), a PLAN record says why instead. Keeps errno and
 * the connection's error state. Its buffers are on the heap: the program's
 * thread may have a small stack.
 */
void sp_plan_capture(struct sp_thread *t, sqlite3_stmt *st, uint64_t sql_id, uint64_t shape,
		     uint64_t db)
{
	sqlite3 *conn = (sqlite3 *)(uintptr_t)db;
	sqlite3_mutex *mx;
	const char *sql, *why = NULL;
	char *q = NULL, *text = NULL, *schema = NULL;
	sqlite3_stmt *ex = NULL;
	size_t n = 0, len, sn = 0;
	uint64_t schema_id = 0, key = plan_key(db, shape);
	uint16_t sflags = 0;
	int saved = errno, rc, reads = 0, mark = PLAN_BUSY, failed = 0;

	if (!sp_cfg.plans || !conn || t->cur || !sp_real.stmt_isexplain || !sp_real.column_text ||
	    !sp_real.column_int || !sp_real.extended_errcode)
		return;
	if (sp_real.stmt_isexplain(st) || sp_plan_resolve() != 0)
		goto out;
	sql = sp_real.sql(st);
	if (!sql || !plannable(sql))
		goto out;
	/* a pair seen (or the set in use elsewhere) needs nothing more: one
	 * lookup, before any allocation or the connection's mutex */
	if (plan_seen(key))
		goto out;
	if (sp_db_has_callbacks(db))
		why = "the program registered a callback (trace, profile, authorizer, "
		      "progress), a virtual table module or extension loading on this "
		      "connection: EXPLAIN would run its code";
	else if (sp_plan_blocked())
		why = "the program loaded extension code or logs through SQLITE_CONFIG_LOG "
		      "unfiltered: EXPLAIN could run its code";
	else if (sp_plan_alloc_foreign())
		why = "the program gave SQLite an allocator of its own (SQLITE_CONFIG_MALLOC "
		      "or HEAP): EXPLAIN would take its allocations";
	if (why) {
		plan_none(t, key, sql_id, db, why);
		goto out;
	}
	len = strlen(sql);
	if (len > (size_t)INT32_MAX - 20)
		goto out;
	q = malloc(len + 20);
	text = malloc(PLAN_MAX);
	if (!q || !text)
		goto out;
	memcpy(q, "EXPLAIN QUERY PLAN ", 19);
	memcpy(q + 19, sql, len + 1);
	sp_guard_in(t);
	/* Held throughout (recursive; NULL and a no-op unless SQLite is
	 * serialized): another thread using the connection sees neither our
	 * statement nor the error states it passes through. */
	mx = sp_plan_real.db_mutex(conn);
	sp_plan_real.mutex_enter(mx);
	/* Our text is 19 bytes longer than the program's: one that would not
	 * fit SQLITE_LIMIT_SQL_LENGTH is not tried (it would fail with
	 * SQLITE_TOOBIG). The state must be the program's SQLITE_OK, which is
	 * what is restored should anything of ours fail; another thread of a
	 * serialized connection may have changed it since the prepare (then
	 * the pair is left for a later prepare). */
	if (sp_real.extended_errcode(conn) != SQLITE_OK)
		goto unlock;
	if (len + 19 > (size_t)sp_plan_real.limit(conn, SQLITE_LIMIT_SQL_LENGTH, -1)) {
		why = "the text with EXPLAIN QUERY PLAN before it is longer than "
		      "SQLITE_LIMIT_SQL_LENGTH";
		goto unlock;
	}
	if ((mark = plan_mark(key)) != PLAN_NEW)
		goto unlock;
	sp_plan_quiet++;
	rc = sp_real.prepare_v2(conn, q, (int)(len + 19), &ex, NULL);
	if (rc == SQLITE_OK && ex) {
		while (sp_real.step(ex) == SQLITE_ROW && n < PLAN_MAX - 1) {
			const char *detail = (const char *)sp_real.column_text(ex, 3);
			int w = snprintf(text + n, PLAN_MAX - n, "%d|%d|%s\n",
					 sp_real.column_int(ex, 0), sp_real.column_int(ex, 1),
					 detail ? detail : "");

			if (w < 0)
				break;
			reads |= detail && plan_line_reads(detail);
			n += (size_t)w < PLAN_MAX - n ? (size_t)w : PLAN_MAX - n - 1;
		}
	}
	if (ex)
		sp_real.finalize(ex);
	/* Whatever failed (no memory, SQLITE_LIMIT_VDBE_OP, an interrupt...),
	 * the program must find the state its prepare left. */
	if (sp_real.extended_errcode(conn) != SQLITE_OK) {
		n = 0; /* a failed step: no plan rather than part of one */
		failed = sp_real.extended_errcode(conn);
		restore_ok(conn);
	}
	/* an INSERT's plan is never a finding's: a dump restore's 100,000
	 * distinct texts read no schema; nor is one that reads no table */
	if (n && reads && !insert_text(sql) && sp_real.extended_errcode(conn) == SQLITE_OK &&
	    (schema = malloc(SP_SCHEMA_MAX)))
		sn = schema_capture(conn, schema, SP_SCHEMA_MAX, &sflags);
	if (sp_real.extended_errcode(conn) != SQLITE_OK) {
		sn = 0; /* the schema read failed (busy, locked...) */
		restore_ok(conn);
	}
	sp_plan_quiet--;
unlock:
	sp_plan_real.mutex_leave(mx);
	sp_guard_out(t);
	if (mark == PLAN_FULL)
		plan_bound(t, sql_id, db);
	if (why) {
		plan_none(t, key, sql_id, db, why);
		goto out;
	}
	if (failed) {
		int w = snprintf(text, PLAN_MAX, "EXPLAIN QUERY PLAN failed (SQLite error %d)",
				 failed);

		if (w > 0 && plan_send(t, SP_PLAN_NONE, sql_id, db, 0, text, (size_t)w) < 0)
			plan_forget(key);
		goto out;
	}
	if (n && sn) {
		schema_id =
			fnv1a(fnv1a(0xcbf29ce484222325ULL, &sflags, sizeof(sflags)), schema, sn);
		schema_id += !schema_id;
		schema_send(t, db, schema_id, sflags, schema, sn);
	}
	/* a plan lost with a full ring is taken again at the next prepare of
	 * its fingerprint on this connection */
	if (n && plan_send(t, 0, sql_id, db, schema_id, text, n) < 0)
		plan_forget(key);
out:
	free(q);
	free(text);
	free(schema);
	errno = saved;
}
