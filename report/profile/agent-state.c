/* SPDX-License-Identifier: MIT */
/*
 * agent-state.c - the agent's state in its profile (agent-state.h): read
 * back by a restarted agent, written by every snapshot. Each table is read
 * by one row function through each_row, written by one function; the meta
 * rows from one table of keys.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent-state.h"
#include "kind.h"
#include "untrusted.h"

int sp_agent_rows_add(struct sp_agent_rows *rs, const struct sp_agent_row *r)
{
	if (SP_GROW(rs->r, rs->cap, rs->n + 1, 64) < 0)
		return -1;
	rs->r[rs->n++] = *r;
	return 0;
}

int sp_agent_hrows_add(struct sp_agent_hrows *rs, const struct sp_agent_hrow *r)
{
	if (SP_GROW(rs->r, rs->cap, rs->n + 1, 64) < 0)
		return -1;
	rs->r[rs->n++] = *r;
	return 0;
}

void sp_agent_qagg_to_row(const struct sp_qagg *q, struct sp_agent_row *r)
{
	size_t i = 0;
#define QF_GET(f) r->v[i++] = q->f;
	SP_AGENT_QF(QF_GET)
#undef QF_GET
}

/* ---- load ---- */

struct ld {
	sqlite3 *db;
	struct sp_coll *c;
	struct sp_agent_loaded *out;
};

/* 1 when db has a table of that name, else 0. */
static int has_table(sqlite3 *db, const char *name)
{
	sqlite3_stmt *st = NULL;
	int yes = 0;

	if (sqlite3_prepare_v2(db,
			       "SELECT count(*) FROM sqlite_schema WHERE name=? AND type='table'",
			       -1, &st, NULL) == SQLITE_OK) {
		sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
		yes = sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int(st, 0) != 0;
	}
	sqlite3_finalize(st);
	return yes;
}

/* Every row of sql handed to row (0, or -1 out of memory). 0, -1 with a
 * reason. */
static int each_row(struct ld *l, const char *sql, int (*row)(struct ld *l, sqlite3_stmt *st),
		    const char *path, char *err, size_t errlen)
{
	sqlite3_stmt *st = NULL;
	int rc = 0;

	if (sqlite3_prepare_v2(l->db, sql, -1, &st, NULL) != SQLITE_OK) {
		snprintf(err, errlen, "%s: %s", path, sqlite3_errmsg(l->db));
		return -1;
	}
	while (rc == 0 && sqlite3_step(st) == SQLITE_ROW)
		rc = row(l, st);
	if (rc < 0)
		snprintf(err, errlen, "%s: out of memory", path);
	sqlite3_finalize(st);
	return rc;
}

static int meta_row(struct ld *l, sqlite3_stmt *st)
{
	const char *key = (const char *)sqlite3_column_text(st, 0);

	/* losses stay said across restarts */
	if (key && !strcmp(key, "descriptors_lost"))
		l->c->fds_lost = sp_col_u64(st, 1);
	else if (key && !strcmp(key, "statistics_lost"))
		l->c->stats_lost = sp_col_u64(st, 1);
	else if (key && !strcmp(key, "descriptor_waits"))
		l->c->fd_waits = sp_col_u64(st, 1);
	else if (key && !strcmp(key, "started"))
		l->out->started = sqlite3_column_int64(st, 1);
	else if (key && !strcmp(key, "agent_ns_per_tick"))
		l->out->ns_per_tick = sqlite3_column_double(st, 1);
	else if (key && !strcmp(key, "agent_processes_folded"))
		l->out->procs_folded = sp_col_u64(st, 1);
	else if (key && !strcmp(key, "agent_processes_folded_sqlite"))
		l->out->procs_folded_sqlite = sp_col_u64(st, 1);
	else if (key)
		l->out->restarts = sqlite3_column_int64(st, 1) + 1;
	return 0;
}

static int statement_row(struct ld *l, sqlite3_stmt *st)
{
	uint64_t id = (uint64_t)sqlite3_column_int64(st, 0);
	const unsigned char *t = sqlite3_column_text(st, 2);
	int created;
	struct sp_sql *s = hmap_get(&l->c->sqls, &id, 1, &created);

	if (!s)
		return -1;
	if (created && t) {
		s->text = strdup((const char *)t);
		s->full_len = (uint32_t)sqlite3_column_int64(st, 3);
		s->truncated = sqlite3_column_int(st, 4);
		s->fp_id = (uint64_t)sqlite3_column_int64(st, 1);
	}
	return 0;
}

static int query_row(struct ld *l, sqlite3_stmt *st)
{
	uint64_t k[2] = { sp_col_u64(st, 0), sp_col_u64(st, 1) };
	struct sp_qagg *q = hmap_get(&l->c->queries, k, 1, NULL);
	int col = 2;

	if (!q)
		return -1;
#define QF_LOAD(f) q->f += sp_col_u64(st, col), col++;
	SP_AGENT_QF(QF_LOAD)
#undef QF_LOAD
	q->min_ns = sp_col_u64(st, col++);
	q->max_ns = sp_col_u64(st, col++);
	return 0;
}

static int process_row(struct ld *l, sqlite3_stmt *st)
{
	uint32_t pid = (uint32_t)sqlite3_column_int64(st, 0);
	int created;
	struct sp_proc *p = hmap_get(&l->c->procs, &pid, 1, &created);
	const unsigned char *exe = sqlite3_column_text(st, 2);

	if (!p)
		return -1;
	if (!created)
		return 0;
	p->pid = pid;
	p->ppid = (uint32_t)sqlite3_column_int64(st, 1);
	p->exe = exe ? strdup((const char *)exe) : NULL;
	p->execs = sp_col_u64(st, 3);
	p->lost = sp_col_u64(st, 4);
	p->untracked = sp_col_u64(st, 5);
	p->sqlite_found = sqlite3_column_int(st, 6);
	p->bye = sqlite3_column_int(st, 7);
	p->msgs = sp_col_u64(st, 8);
	p->bad_msgs = sp_col_u64(st, 9);
	p->carried = 1;
	return 0;
}

/* A bucket of the totals' latency histograms, so that they (and the
 * intervals' differences) go on from them; an image's part is taken off
 * when it connects again, as its totals are. */
static int histogram_row(struct ld *l, sqlite3_stmt *st)
{
	const char *kind = (const char *)sqlite3_column_text(st, 1);
	uint64_t fk[2] = { (uint64_t)sqlite3_column_int64(st, 0),
			   sp_qkind_parse(kind) == SP_QK_EXEC ? SP_KIND_EXEC : SP_KIND_STMT };
	int created;
	struct sp_fphist *fh = hmap_get(&l->c->fphists, fk, 1, &created);

	if (!fh || (!fh->hist && !(fh->hist = sp_hist_new())))
		return -1;
	if (created) {
		fh->min_ns = sp_col_u64(st, 4);
		fh->max_ns = sp_col_u64(st, 5);
		fh->sum_ns = sp_col_u64(st, 6);
	}
	sp_hist_add_bucket(fh->hist, sp_col_u64(st, 2), sp_col_u64(st, 3));
	fh->count += sp_col_u64(st, 3);
	sp_hist_set_minmax_sum(fh->hist, fh->min_ns, fh->max_ns, fh->sum_ns);
	return 0;
}

static int live_hist_row(struct ld *l, sqlite3_stmt *st)
{
	struct sp_agent_hrow h = {
		.pid = (uint32_t)sqlite3_column_int64(st, 0),
		.ino = sp_col_u64(st, 1),
		.fp_id = (uint64_t)sqlite3_column_int64(st, 2),
		.kind = sp_col_u64(st, 3) == SP_KIND_EXEC ? SP_KIND_EXEC : SP_KIND_STMT,
		.bucket_ns = sp_col_u64(st, 4),
		.count = sp_col_u64(st, 5),
	};

	return sp_agent_hrows_add(&l->out->carried_h, &h);
}

static int live_row(struct ld *l, sqlite3_stmt *st)
{
	struct sp_agent_row r;

	memset(&r, 0, sizeof(r));
	r.pid = (uint32_t)sqlite3_column_int64(st, 0);
	r.start = sp_col_u64(st, 1);
	r.ino = sp_col_u64(st, 2);
	r.sql_id = sp_col_u64(st, 3);
	r.kind = sp_col_u64(st, 4);
	for (int i = 0; i < SP_AGENT_NQF; i++)
		r.v[i] = sp_col_u64(st, 5 + i);
	return sp_agent_rows_add(&l->out->carried, &r);
}

int sp_agent_state_load(sqlite3 *db, const char *path, struct sp_coll *c,
			struct sp_agent_loaded *out, char *err, size_t errlen)
{
	struct ld l = { db, c, out };

	if (!has_table(db, "agent_queries"))
		return 0; /* a profile of record: started afresh */
	if (each_row(&l,
		     "SELECT key, value FROM meta WHERE key IN ('started', 'agent_restarts',"
		     " 'agent_ns_per_tick', 'descriptors_lost', 'statistics_lost',"
		     " 'agent_processes_folded', 'agent_processes_folded_sqlite',"
		     " 'descriptor_waits')",
		     meta_row, path, err, errlen) < 0)
		return -1;
	if (!out->restarts)
		out->restarts = 1;
	if (each_row(&l, "SELECT sql_id, fp_id, sql, full_len, truncated FROM statements",
		     statement_row, path, err, errlen) < 0 ||
	    each_row(&l, "SELECT * FROM agent_queries", query_row, path, err, errlen) < 0 ||
	    each_row(&l,
		     "SELECT pid, ppid, exe, executions, lost, untracked, sqlite_found,"
		     " clean_exit, messages, bad_messages FROM processes",
		     process_row, path, err, errlen) < 0 ||
	    each_row(&l,
		     "SELECT h.fp_id, h.kind, h.bucket_ns, h.count, q.min_ns, q.max_ns,"
		     " q.total_ns FROM histograms h JOIN queries q USING (fp_id, kind)",
		     histogram_row, path, err, errlen) < 0)
		return -1;
	if (has_table(db, "agent_live_hist") &&
	    each_row(&l, "SELECT pid, ino, fp_id, kind, bucket_ns, count FROM agent_live_hist",
		     live_hist_row, path, err, errlen) < 0)
		return -1;
	if (each_row(&l, "SELECT * FROM agent_live", live_row, path, err, errlen) < 0)
		return -1;
	return 1;
}

/* ---- write ---- */

static const char schema[] =
	"CREATE TABLE agent_queries(sql_id INTEGER, kind INTEGER, count INTEGER,"
	" total_ns INTEGER, self_ns INTEGER, wall_ns INTEGER, rows INTEGER,"
	" vm_steps INTEGER, fullscan_steps INTEGER, sorts INTEGER, autoindex INTEGER,"
	" errors INTEGER, nested INTEGER, samples INTEGER, prepares INTEGER,"
	" prepare_ns INTEGER, runs INTEGER, min_ns INTEGER, max_ns INTEGER,"
	" PRIMARY KEY(sql_id, kind));"
	"CREATE TABLE agent_live(pid INTEGER, start INTEGER, ino INTEGER,"
	" sql_id INTEGER, kind INTEGER, count INTEGER, total_ns INTEGER,"
	" self_ns INTEGER, wall_ns INTEGER, rows INTEGER, vm_steps INTEGER,"
	" fullscan_steps INTEGER, sorts INTEGER, autoindex INTEGER, errors INTEGER,"
	" nested INTEGER, samples INTEGER, prepares INTEGER, prepare_ns INTEGER,"
	" runs INTEGER);"
	"CREATE TABLE agent_live_hist(pid INTEGER, ino INTEGER, fp_id INTEGER,"
	" kind INTEGER, bucket_ns INTEGER, count INTEGER);";

/* "INSERT INTO table VALUES(?,...)" with n parameters, prepared. */
static sqlite3_stmt *insert(sqlite3 *db, const char *table, int n)
{
	char sql[1024];
	sqlite3_stmt *st = NULL;
	int len = snprintf(sql, sizeof(sql), "INSERT INTO %s VALUES(?", table);

	for (int i = 1; i < n; i++)
		len += snprintf(sql + len, sizeof(sql) - (size_t)len, ",?");
	snprintf(sql + len, sizeof(sql) - (size_t)len, ")");
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		return NULL;
	return st;
}

/* Bind v[n] from column col on, step and reset st. 0 or -1. */
static int put(sqlite3_stmt *st, int col, const uint64_t *v, int n)
{
	int rc;

	for (int i = 0; i < n; i++)
		sqlite3_bind_int64(st, col + i, (sqlite3_int64)v[i]);
	rc = sqlite3_step(st) == SQLITE_DONE ? 0 : -1;
	sqlite3_reset(st);
	return rc;
}

static int write_queries(sqlite3 *db, const struct sp_coll *c)
{
	sqlite3_stmt *st = insert(db, "agent_queries", SP_AGENT_NQF + 4);
	size_t it = 0;
	const uint64_t *k;
	const struct sp_qagg *q;
	int rc = st ? 0 : -1;

	while (rc == 0 && (q = hmap_next(&c->queries, &it, (const void **)&k))) {
		struct sp_agent_row r;
		uint64_t v[SP_AGENT_NQF + 4];

		sp_agent_qagg_to_row(q, &r);
		v[0] = k[0];
		v[1] = k[1];
		memcpy(v + 2, r.v, sizeof(r.v));
		v[SP_AGENT_NQF + 2] = q->min_ns;
		v[SP_AGENT_NQF + 3] = q->max_ns;
		rc = put(st, 1, v, SP_AGENT_NQF + 4);
	}
	sqlite3_finalize(st);
	return rc;
}

static int write_live(sqlite3 *db, const struct sp_agent_rows *live)
{
	sqlite3_stmt *st = insert(db, "agent_live", SP_AGENT_NQF + 5);
	int rc = st ? 0 : -1;

	for (size_t j = 0; rc == 0 && j < live->n; j++) {
		const struct sp_agent_row *r = &live->r[j];
		uint64_t v[SP_AGENT_NQF + 5] = { r->pid, r->start, r->ino, r->sql_id, r->kind };

		memcpy(v + 5, r->v, sizeof(r->v));
		rc = put(st, 1, v, SP_AGENT_NQF + 5);
	}
	sqlite3_finalize(st);
	return rc;
}

static int write_live_hist(sqlite3 *db, const struct sp_agent_hrows *live_h)
{
	sqlite3_stmt *st = insert(db, "agent_live_hist", 6);
	int rc = st ? 0 : -1;

	for (size_t j = 0; rc == 0 && j < live_h->n; j++) {
		const struct sp_agent_hrow *r = &live_h->r[j];
		uint64_t v[6] = { r->pid, r->ino, r->fp_id, r->kind, r->bucket_ns, r->count };

		rc = put(st, 1, v, 6);
	}
	sqlite3_finalize(st);
	return rc;
}

static int write_meta(sqlite3 *db, const struct sp_agent_saved *s)
{
	const struct {
		const char *key;
		int64_t v;
	} rows[] = {
		{ "agent_restarts", s->restarts },
		/* executions processes said they ran (BYE) that their
		 * statistics, as merged, do not hold: never a silent loss */
		{ "agent_missing_executions", (int64_t)s->missing },
		/* texts folded by the budget (--max-texts), in this write:
		 * their fingerprints' totals are exact, the texts are gone */
		{ "agent_texts_folded", (int64_t)s->c->texts_folded },
		{ "agent_max_texts", (int64_t)s->max_texts },
		/* processes folded by the budget (--max-processes) into the
		 * row of pid 0, over the profile's life: the report counts
		 * them (its processes and those that ran SQL) */
		{ "agent_max_processes", (int64_t)s->max_procs },
		{ "agent_processes_folded", (int64_t)s->procs_folded },
		{ "agent_processes_folded_sqlite", (int64_t)s->procs_folded_sqlite },
		{ "agent_updated", (int64_t)time(NULL) },
	};
	sqlite3_stmt *st = NULL;
	int rc = -1;

	if (sqlite3_prepare_v2(db, "INSERT INTO meta VALUES(?,?)", -1, &st, NULL) != SQLITE_OK)
		goto out;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		sqlite3_bind_text(st, 1, rows[i].key, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 2, rows[i].v);
		if (sqlite3_step(st) != SQLITE_DONE)
			goto out;
		sqlite3_reset(st);
	}
	/* a restarted agent converts the same ticks to the same ns: the parts
	 * it takes off and the statistics that come again in full agree, so
	 * sums and buckets never go down */
	sqlite3_bind_text(st, 1, "agent_ns_per_tick", -1, SQLITE_STATIC);
	sqlite3_bind_double(st, 2, s->c->ns_per_tick);
	if (sqlite3_step(st) != SQLITE_DONE)
		goto out;
	rc = 0;
out:
	sqlite3_finalize(st);
	return rc;
}

int sp_agent_state_write(sqlite3 *db, const struct sp_agent_saved *s)
{
	if (sqlite3_exec(db, schema, NULL, NULL, NULL) != SQLITE_OK ||
	    write_queries(db, s->c) < 0 || write_live(db, s->live) < 0 ||
	    write_live_hist(db, s->live_h) < 0 || write_meta(db, s) < 0)
		return -1;
	return 0;
}
