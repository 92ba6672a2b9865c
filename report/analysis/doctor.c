/* SPDX-License-Identifier: MIT */
/*
 * doctor.c - see doctor.h. The rules, with their defaults and why:
 *
 *  n-plus-one  a SELECT (or WITH) fingerprint that reads a table (its plan
 *              scans or searches one), executed K >= 10 times in a row on
 *              one thread, each starting within 1 ms of the previous end
 *              (the preload's runs: queries.max_run; runs table for how
 *              many runs reached K), whatever its speed: a slow query per
 *              row (an unindexed lookup) is the costliest N+1 of all.
 *              Sentry flags >= 5 sequential similar queries, but counts
 *              spans of any similar query; ours are runs of one
 *              fingerprint with nothing in between, which a short helper
 *              loop (a handful of settings, the rows of a small join) also
 *              produces, so K is doubled to keep those quiet while per-row
 *              loops, which run tens to thousands of times, are still
 *              caught. What keeps other repeats quiet: the run's 1 ms gap
 *              (a service loop's executions, each after a pause, make runs
 *              of 2 at most) and the table (SELECT ? * 2 reads none).
 *  reprepare   prepares >= 0.9 x executions with >= 10 executions: the
 *              statement is prepared (parsed and planned) every time.
 *  full-scan   the plan reads a table with a bare SCAN (no index) and the
 *              query steps >= 1000 rows of full scans per execution.
 *  temp-btree  the plan sorts in a temporary B-tree (ORDER BY, GROUP BY,
 *              DISTINCT) and each execution reads >= 100 rows.
 *  auto-index  SQLite built an automatic index (autoindex > 0 or a plan
 *              line with AUTOMATIC): it does that on every execution.
 *  duplicate   >= 10 randomly drawn executions with a hash of their bound
 *              values (duplicates table), at least half of them with the
 *              values of an earlier one: the same query asked again.
 *
 * Index suggestions are derived only when they are unambiguous: a query
 * on one table (no join, subquery in FROM or compound), its WHERE equality
 * columns, then one range column or the ORDER BY / GROUP BY columns; or
 * the columns SQLite itself chose for an automatic index. Anything else
 * says "no suggestion" rather than guess. A derived index is then checked
 * (verify_index): built with the schema the profile recorded in a private
 * in-memory database, it must leave a plan that neither scans the table
 * nor sorts; otherwise it is not printed.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "doctor.h"
#include "util.h"

static const char *const rule_names[SP_RULE_NDOCTOR] = {
	[SP_RULE_NPLUS1] = "n-plus-one",    [SP_RULE_REPREPARE] = "reprepare",
	[SP_RULE_FULLSCAN] = "full-scan",   [SP_RULE_TEMPBTREE] = "temp-btree",
	[SP_RULE_AUTOINDEX] = "auto-index", [SP_RULE_DUPLICATE] = "duplicate",
};

#define TEMPBTREE_MIN_ROWS 100

const char *sp_rule_name(enum sp_rule r)
{
	return (unsigned)r < SP_RULE_NDOCTOR ? rule_names[r] : "?";
}

/* ---- findings ----------------------------------------------------------- */

void sp_doctor_site(const struct sp_attrib *at, int64_t fp_id, int kind_exec, char *buf, size_t len)
{
	const struct sp_qsite *best = NULL;
	size_t j, n = 0;
	const size_t *ix = at ? sp_attrib_query_sites(at, fp_id, kind_exec, &n) : NULL;

	for (j = 0; j < n; j++) {
		const struct sp_qsite *q = &at->qs[ix[j]];

		if (!best || q->samples > best->samples ||
		    (q->samples == best->samples && best->site < 0 && q->site >= 0))
			best = q;
	}
	if (!best)
		snprintf(buf, len, "(no stack sample)");
	else if (best->site < 0)
		snprintf(buf, len, "(unattributed: no frame outside SQLite)");
	else
		sp_where(buf, len, at->sites[best->site].function, at->sites[best->site].file,
			 at->sites[best->site].line, at->sites[best->site].module,
			 at->sites[best->site].offset);
}

static struct sp_finding *add(struct sp_findings *fs, enum sp_rule rule, const struct sp_qrow *q,
			      const struct sp_attrib *at)
{
	struct sp_finding *f;

	if (SP_GROW(fs->f, fs->cap, fs->n + 1, 16) < 0)
		return NULL;
	f = &fs->f[fs->n++];
	memset(f, 0, sizeof(*f));
	f->rule = rule;
	f->q = q;
	sp_doctor_site(at, q->fp_id, q->kind == SP_QK_EXEC, f->site, sizeof(f->site));
	return f;
}

/* 1 for SQLite's own work: a statement without SQL text (SQLite's
 * internal ones), or a statement SQLite runs itself nested in the
 * program's (every execution nested) on one of its own tables named with
 * the schema as SQLite writes it: `"main".sqlite_master` (a schema load
 * or reload; sqlite_schema, sqlite_temp_master alike) or, with the name
 * as a literal, `?.sqlite_stat1` (ANALYZE's statistics loaded with the
 * schema). A program's own read of sqlite_master is not nested, or not
 * written so. */
int sp_sqlite_own(const struct sp_qrow *r)
{
	const char *fp = r->fingerprint ? r->fingerprint : "", *p;

	if (!strcmp(fp, "<statement without SQL text>"))
		return 1;
	if (!r->count || r->nested < r->count)
		return 0;
	for (p = strstr(fp, ".sqlite_"); p; p = strstr(p + 1, ".sqlite_"))
		if (p > fp && (p[-1] == '"' || p[-1] == '?'))
			return 1;
	return 0;
}

static int is_select(const char *fp)
{
	while (*fp == ' ' || *fp == '(')
		fp++;
	return !strncmp(fp, "SELECT", 6) || !strncmp(fp, "WITH", 4) || !strncmp(fp, "VALUES", 6);
}

static void table_cb(const char *detail, void *arg)
{
	struct sp_plan_access a;

	if (sp_plan_access(detail, &a))
		*(int *)arg = 1;
}

/* 1 if the query reads a table: its plan has a SCAN or SEARCH of one (not
 * "SCAN CONSTANT ROW"); without a plan, its fingerprint has a FROM. A
 * query that reads none (SELECT ? * 2) costs no round trip to any data,
 * however often a loop runs it. */
static int reads_table(const struct sp_qrow *q)
{
	int found = 0;

	if (!q->plan)
		return strstr(q->fingerprint, " FROM ") != NULL;
	sp_plan_foreach(q->plan, table_cb, &found);
	return found;
}

/* What the rules look up per query, read in one pass per table when
 * first needed (a statement per finding took 25 s for 20,000 findings on a
 * profile without indexes). */
struct dcache {
	sqlite3 *db;
	int runs_loaded, texts_loaded;
	struct hmap runs; /* fp_id of a stmt query -> {first, n} in rl */
	struct {
		int64_t min_len, max_len, count;
	} * rl; /* as stored: signed */
	size_t nrl, caprl;
	struct hmap texts; /* fp_id -> SQL texts (statements rows) */
	/* index checks (verify_index) */
	int plans_loaded;
	struct hmap fpschema; /* fp_id -> {schema_id, index in ptexts} */
	char **ptexts;        /* the SQL text planned, per fp_id with a schema */
	size_t nptexts;
	sqlite3 *priv; /* the private database, holding priv_schema's */
	int64_t priv_schema;
	int priv_ok;
	int dups_loaded;
	struct hmap dups; /* fp_id of a stmt query -> {samples, repeats, top} */
	int firsts_loaded;
	struct hmap firsts; /* {fp_id, kind_exec} -> struct first_ev */
	int byth_built;
	struct first_at *byth; /* c->firsts' places, by thread then start */
	size_t nbyth;
};

/* A query's first top-level execution (events with flag 16, which every
 * text's first execution has whatever the rate). */
struct first_ev {
	int64_t pid, tid, start, wall, rows;
};

/* Where a query's first execution ran: its thread and start. */
struct first_at {
	int64_t pid, tid, start;
};

static void dcache_load_loops(struct dcache *c)
{
	sqlite3_stmt *st;

	c->runs_loaded = 1;
	if (!c->db || sqlite3_prepare_v2(c->db,
					 "SELECT fp_id, min_len, max_len, count FROM runs"
					 " WHERE kind = 'stmt' ORDER BY fp_id",
					 -1, &st, NULL) != SQLITE_OK)
		return;
	while (sqlite3_step(st) == SQLITE_ROW) {
		int64_t fp = sqlite3_column_int64(st, 0);
		int created;
		size_t *v = hmap_get(&c->runs, &fp, 1, &created);

		if (!v)
			break;
		if (created)
			v[0] = c->nrl;
		if (v[0] + v[1] != c->nrl)
			continue; /* cannot happen: ordered by fp_id */
		if (SP_GROW(c->rl, c->caprl, c->nrl + 1, 256) < 0)
			break;
		c->rl[c->nrl].min_len = sqlite3_column_int64(st, 1);
		c->rl[c->nrl].max_len = sqlite3_column_int64(st, 2);
		c->rl[c->nrl].count = sqlite3_column_int64(st, 3);
		c->nrl++;
		v[1]++;
	}
	sqlite3_finalize(st);
}

/* Runs of at least k executions of a stmt query: the sum of the rows whose
 * range reaches k; exact when each of them lies wholly at or above k. */
static uint64_t runs_at_least(struct dcache *c, int64_t fp_id, uint64_t k, int *exact)
{
	const size_t *v;
	uint64_t n = 0;
	size_t i;

	*exact = 1;
	if (!c->runs_loaded)
		dcache_load_loops(c);
	v = hmap_get(&c->runs, &fp_id, 0, NULL);
	for (i = 0; v && i < v[1]; i++) {
		const __typeof__(*c->rl) *r = &c->rl[v[0] + i];

		if (r->max_len < (int64_t)k)
			continue;
		n += (uint64_t)r->count;
		if (r->min_len < (int64_t)k)
			*exact = 0;
	}
	return n;
}

static uint64_t distinct_texts(struct dcache *c, int64_t fp_id)
{
	const uint64_t *v;

	if (!c->texts_loaded) {
		sqlite3_stmt *st;

		c->texts_loaded = 1;
		if (c->db && sqlite3_prepare_v2(
				     c->db, "SELECT fp_id, COUNT(*) FROM statements GROUP BY fp_id",
				     -1, &st, NULL) == SQLITE_OK) {
			while (sqlite3_step(st) == SQLITE_ROW) {
				int64_t fp = sqlite3_column_int64(st, 0);
				uint64_t *n = hmap_get(&c->texts, &fp, 1, NULL);

				if (!n)
					break;
				*n = (uint64_t)sqlite3_column_int64(st, 1);
			}
			sqlite3_finalize(st);
		}
	}
	v = hmap_get(&c->texts, &fp_id, 0, NULL);
	return v ? *v : 0;
}

/* ---- checking an index before it is suggested --------------------------- */

/* The plan and SQL text each fingerprint was planned with, under a schema
 * the profile holds (plans.schema_id; the plan of the most connections). */
static void dcache_load_plans(struct dcache *c)
{
	sqlite3_stmt *st;

	c->plans_loaded = 1;
	if (!c->db || sqlite3_prepare_v2(c->db,
					 "SELECT p.fp_id, p.schema_id, s.sql FROM plans p"
					 " JOIN statements s ON s.sql_id = p.sql_id"
					 " WHERE p.schema_id IS NOT NULL"
					 " ORDER BY p.fp_id, p.connections DESC, p.rowid",
					 -1, &st, NULL) != SQLITE_OK)
		return; /* a profile written before schemas were recorded */
	while (sqlite3_step(st) == SQLITE_ROW) {
		int64_t fp = sqlite3_column_int64(st, 0);
		const char *sql = (const char *)sqlite3_column_text(st, 2);
		int created;
		int64_t *v;
		char **nt;

		if (!sql)
			continue;
		v = hmap_get(&c->fpschema, &fp, 1, &created);
		if (!v)
			break;
		if (!created)
			continue;
		nt = realloc(c->ptexts, (c->nptexts + 1) * sizeof(*nt));
		if (!nt || !(nt[c->nptexts] = strdup(sql))) {
			if (nt)
				c->ptexts = nt;
			v[0] = 0;
			break;
		}
		c->ptexts = nt;
		v[0] = sqlite3_column_int64(st, 1);
		v[1] = (int64_t)c->nptexts++;
	}
	sqlite3_finalize(st);
}

/* Work budget of the private database: the schema and the statements come
 * from the profile, which is untrusted (a CREATE TABLE ... AS SELECT of a
 * recursive CTE would run for ever). */
static int priv_progress(void *arg)
{
	long *left = arg;

	return --*left < 0;
}
static long priv_left;

/* Only what a schema of tables needs: CREATE TABLE, INDEX and VIEW. */
static int schema_stmt_ok(const char *sql)
{
	static const char *const ok[] = { "CREATE TABLE ", "CREATE INDEX ", "CREATE UNIQUE INDEX ",
					  "CREATE VIEW " };
	size_t i;

	while (isspace((unsigned char)*sql))
		sql++;
	for (i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
		if (!strncasecmp(sql, ok[i], strlen(ok[i])))
			return !strcasestr(sql, " AS SELECT") ||
			       !strncasecmp(sql, "CREATE VIEW ", 12);
	return 0;
}

/* Make c->priv hold schema id's tables: a private in-memory database,
 * defensive, without extensions. Returns 0, or -1 when the schema cannot
 * be built (not in the profile, or one of its statements fails). */
static int priv_schema(struct dcache *c, int64_t id)
{
	sqlite3_stmt *st = NULL;
	const char *p;
	char *text = NULL;
	int bad = 0;

	if (c->priv && c->priv_schema == id)
		return c->priv_ok ? 0 : -1;
	if (c->priv)
		sqlite3_close(c->priv);
	c->priv = NULL;
	c->priv_schema = id;
	c->priv_ok = 0;
	if (sqlite3_prepare_v2(c->db, "SELECT sql FROM schemas WHERE schema_id = ?", -1, &st,
			       NULL) != SQLITE_OK)
		return -1;
	sqlite3_bind_int64(st, 1, id);
	if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
		text = strdup((const char *)sqlite3_column_text(st, 0));
	sqlite3_finalize(st);
	if (!text)
		return -1;
	if (sqlite3_open_v2(":memory:", &c->priv, SQLITE_OPEN_READWRITE | SQLITE_OPEN_MEMORY,
			    NULL) != SQLITE_OK) {
		free(text);
		return -1;
	}
	sqlite3_db_config(c->priv, SQLITE_DBCONFIG_DEFENSIVE, 1, NULL);
	sqlite3_db_config(c->priv, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, NULL);
	sqlite3_db_config(c->priv, SQLITE_DBCONFIG_ENABLE_TRIGGER, 0, NULL);
	sqlite3_limit(c->priv, SQLITE_LIMIT_ATTACHED, 0);
	priv_left = 1000000;
	sqlite3_progress_handler(c->priv, 100, priv_progress, &priv_left);
	for (p = text; *p && !bad;) {
		const char *tail = NULL;

		st = NULL;
		if (sqlite3_prepare_v2(c->priv, p, -1, &st, &tail) != SQLITE_OK) {
			bad = 1;
			break;
		}
		if (!st)
			break; /* only blanks left */
		if (!schema_stmt_ok(sqlite3_sql(st)) || sqlite3_step(st) != SQLITE_DONE)
			bad = 1;
		sqlite3_finalize(st);
		p = tail ? tail : "";
	}
	free(text);
	c->priv_ok = !bad;
	return bad ? -1 : 0;
}

/* EXPLAIN QUERY PLAN of sql in the private database, as "id|parent|detail"
 * lines, malloc'd; NULL when it cannot be planned. */
static char *priv_plan(struct dcache *c, const char *sql)
{
	sqlite3_stmt *st = NULL;
	char *q, *out = NULL;
	size_t n = 0;
	int rc;

	if (!(q = malloc(strlen(sql) + 20)))
		return NULL;
	memcpy(q, "EXPLAIN QUERY PLAN ", 19);
	strcpy(q + 19, sql);
	priv_left = 1000000;
	rc = sqlite3_prepare_v2(c->priv, q, -1, &st, NULL);
	free(q);
	if (rc != SQLITE_OK || !st)
		return NULL;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		const char *d = (const char *)sqlite3_column_text(st, 3);
		size_t l = (d ? strlen(d) : 0) + 48;
		char *x = realloc(out, n + l);

		if (!x) {
			rc = SQLITE_NOMEM;
			break;
		}
		out = x;
		n += (size_t)snprintf(out + n, l, "%d|%d|%s\n", sqlite3_column_int(st, 0),
				      sqlite3_column_int(st, 1), d ? d : "");
	}
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE || !out) {
		free(out);
		return NULL;
	}
	return out;
}

struct bad_ctx {
	const char *name;
	int bad;
};

static void bad_cb(const char *detail, void *arg)
{
	struct bad_ctx *b = arg;
	struct sp_plan_access a;

	if (!strncmp(detail, "USE TEMP B-TREE", 15))
		b->bad = 1;
	else if (sp_plan_access(detail, &a) && !strcmp(a.name, b->name) &&
		 (a.automatic || !strncmp(detail, "SCAN ", 5)))
		b->bad = 1;
}

/* 1 if plan still reads table `name` (as the plan names it) row by row or
 * through an automatic index, or sorts in a temporary B-tree. A SCAN
 * through an index reads every row too: it is not an index doing its job. */
static int plan_bad(const char *plan, const char *name)
{
	struct bad_ctx b = { name, 0 };

	sp_plan_foreach(plan, bad_cb, &b);
	return b.bad;
}

/*
 * Check the index in buf ("CREATE INDEX ...;", derived for the query q,
 * whose plan reads table `name`) against the schema the query was planned
 * under: in the private database, the query's plan must show the problem
 * without the index and neither a scan of that table, an automatic index
 * nor a temporary B-tree with it. Otherwise buf is rewritten to say why
 * there is no suggestion. Returns 1 when the index stands.
 */
static int verify_index(struct dcache *c, const struct sp_qrow *q, const char *name, char *buf,
			size_t len, int hidden)
{
	const int64_t *v;
	char *before = NULL, *after = NULL, *idx = NULL;
	const char *why;
	int ok = 0;

	if (!c->plans_loaded)
		dcache_load_plans(c);
	v = hmap_get(&c->fpschema, &q->fp_id, 0, NULL);
	why = "no suggestion (the schema was not recorded, so no index could be checked)";
	if (!v || !v[0] || priv_schema(c, v[0]) < 0)
		goto out;
	why = "no suggestion (the recorded schema does not reproduce the plan)";
	before = priv_plan(c, c->ptexts[v[1]]);
	if (!before || (!hidden && !plan_bad(before, name)))
		goto out;
	why = "no suggestion (no index on the WHERE and ORDER BY columns avoids the scan and the"
	      " sort: checked with EXPLAIN QUERY PLAN on the recorded schema)";
	if (!(idx = strdup(buf)))
		goto out;
	priv_left = 1000000;
	if (sqlite3_exec(c->priv, "SAVEPOINT sp_doctor", NULL, NULL, NULL) != SQLITE_OK)
		goto out;
	if (sqlite3_exec(c->priv, idx, NULL, NULL, NULL) == SQLITE_OK) {
		after = priv_plan(c, c->ptexts[v[1]]);
		/* hidden: the plan showed no scan; the index must change it */
		ok = after && !plan_bad(after, name) &&
		     (!hidden || (strcmp(after, before) && strstr(after, " INDEX ")));
	}
	sqlite3_exec(c->priv, "ROLLBACK TO sp_doctor; RELEASE sp_doctor", NULL, NULL, NULL);
out:
	if (!ok)
		snprintf(buf, len, "%s", why);
	free(before);
	free(after);
	free(idx);
	return ok;
}

/* sp_doctor_suggest_index, then verify_index. */
static void suggest(struct dcache *c, const struct sp_qrow *q, const struct sp_plan_access *a,
		    char *buf, size_t len)
{
	if (sp_doctor_suggest_index(q->fingerprint, a, buf, len))
		verify_index(c, q, a->name, buf, len, 0);
}

struct access_ctx {
	struct sp_plan_access first; /* the first table the plan reads */
	int n, scans;
	char lines[256];
};

static void access_cb(const char *detail, void *arg)
{
	struct access_ctx *x = arg;
	struct sp_plan_access a;
	size_t o;

	if (!sp_plan_access(detail, &a))
		return;
	if (!x->n++)
		x->first = a;
	x->scans += a.full_scan;
	o = strlen(x->lines);
	snprintf(x->lines + o, sizeof(x->lines) - o, "%s\"%s\"", o ? ", " : "", detail);
}

/*
 * The counters as evidence: SQLite counted >= fullscan_min_rows full-scan
 * steps per execution (SQLITE_STMTSTATUS_FULLSCAN_STEP) of a query whose
 * plan shows no bare SCAN (`SELECT max(a) FROM t WHERE b = ?` plans as
 * "SEARCH t" and steps through the whole table), or that has no plan (said
 * why). A full-scan finding with an index only when one, checked in the
 * recorded schema, changes the plan to use it. 0, or -1 on ENOMEM.
 */
static int hidden_scan(struct dcache *c, const struct sp_qrow *q, const struct sp_attrib *at,
		       const struct sp_doctor_opts *o, struct sp_findings *out)
{
	struct access_ctx x;
	struct sp_finding *f;
	double per = (double)q->fullscan_steps / (double)q->count;

	memset(&x, 0, sizeof(x));
	if (q->plan)
		sp_plan_foreach(q->plan, access_cb, &x);
	if (per < (double)o->fullscan_min_rows || x.scans)
		return 0; /* a bare SCAN: the plan-based rule's */
	if (!(f = add(out, SP_RULE_FULLSCAN, q, at)))
		return -1;
	if (q->plan)
		snprintf(
			f->evidence, sizeof(f->evidence),
			"plan %s shows no full scan, yet SQLite counted %llu full-scan steps in %llu"
			" executions (%.0f rows per execution)",
			x.n ? x.lines : "(no table)", (unsigned long long)q->fullscan_steps,
			(unsigned long long)q->count, per);
	else
		snprintf(
			f->evidence, sizeof(f->evidence),
			"no plan (%s); SQLite counted %llu full-scan steps in %llu executions (%.0f rows"
			" per execution)",
			q->plan_gap ? q->plan_gap : "none was captured",
			(unsigned long long)q->fullscan_steps, (unsigned long long)q->count, per);
	if (x.n == 1 &&
	    sp_doctor_suggest_index(q->fingerprint, &x.first, f->suggestion, sizeof(f->suggestion)))
		verify_index(c, q, x.first.name, f->suggestion, sizeof(f->suggestion), 1);
	else
		snprintf(f->suggestion, sizeof(f->suggestion), "no suggestion (%s)",
			 q->plan ? "the plan reads more than one table, or none"
				 : "without a plan no index can be checked");
	return 0;
}

/* The duplicates row of a stmt query ({samples, repeats, top}), NULL if
 * none (or a profile from before the rule). */
static const uint64_t *dups_of(struct dcache *c, int64_t fp_id)
{
	if (!c->dups_loaded) {
		sqlite3_stmt *st;

		c->dups_loaded = 1;
		if (c->db &&
		    sqlite3_prepare_v2(c->db,
				       "SELECT fp_id, samples, repeats, top FROM duplicates"
				       " WHERE kind = 'stmt'",
				       -1, &st, NULL) == SQLITE_OK) {
			while (sqlite3_step(st) == SQLITE_ROW) {
				int64_t fp = sqlite3_column_int64(st, 0);
				uint64_t *v = hmap_get(&c->dups, &fp, 1, NULL);

				if (!v)
					break;
				for (int i = 0; i < 3; i++) {
					int64_t x = sqlite3_column_int64(st, i + 1);

					v[i] = x > 0 ? (uint64_t)x : 0;
				}
			}
			sqlite3_finalize(st);
		}
	}
	return hmap_get(&c->dups, &fp_id, 0, NULL);
}

struct scan_ctx {
	const struct sp_qrow *q;
	struct sp_plan_access first_scan, first_auto;
	int nscan, nauto;
	char scans[256], autos[256];
	const char *temp; /* first "USE TEMP B-TREE ..." line */
	char tempbuf[128];
};

static void scan_cb(const char *detail, void *arg)
{
	struct scan_ctx *s = arg;
	struct sp_plan_access a;
	size_t o;

	if (!strncmp(detail, "USE TEMP B-TREE", 15) && !s->temp) {
		snprintf(s->tempbuf, sizeof(s->tempbuf), "%s", detail);
		s->temp = s->tempbuf;
		return;
	}
	if (!sp_plan_access(detail, &a))
		return;
	if (a.full_scan) {
		if (!s->nscan++)
			s->first_scan = a;
		o = strlen(s->scans);
		snprintf(s->scans + o, sizeof(s->scans) - o, "%s\"%s\"", o ? ", " : "", detail);
	}
	if (a.automatic) {
		if (!s->nauto++)
			s->first_auto = a;
		o = strlen(s->autos);
		snprintf(s->autos + o, sizeof(s->autos) - o, "%s\"%s\"", o ? ", " : "", detail);
	}
}

/* ---- N+1 driven by an outer query's rows ---------------------------------- */

/* the events of each query's first executions (load_firsts) */
#define FIRSTS_SQL                                                          \
	"SELECT fp_id, kind, pid, tid, start_ns, wall_ns, rows FROM events" \
	" WHERE (flags & 16) != 0 AND parent_seq = 0"

/* Each query's first execution into c->firsts: the earliest start of its
 * events with flag 16, the first row of the table (events_start's order)
 * among equal starts. Read in table order, keeping the earliest (ORDER BY
 * start_ns walked events_start with a seek into the table a row: 5 % of
 * report's CPU at 200,000 fingerprints), or (ordered) in start order
 * when a start is not an integer (SQL's order of mixed types decides
 * then). -1 when the table read so has a start not an integer, else 0. */
static int load_firsts(struct dcache *c, int ordered)
{
	sqlite3_stmt *st;
	int ret = 0;

	if (!c->db ||
	    sqlite3_prepare_v2(c->db, ordered ? FIRSTS_SQL " ORDER BY start_ns" : FIRSTS_SQL, -1,
			       &st, NULL) != SQLITE_OK)
		return 0;
	while (sqlite3_step(st) == SQLITE_ROW) {
		const char *kind = (const char *)sqlite3_column_text(st, 1);
		int64_t key[2] = { sqlite3_column_int64(st, 0), kind && !strcmp(kind, "exec") };
		int64_t start = sqlite3_column_int64(st, 4);
		int created;
		struct first_ev *e;

		if (!ordered && sqlite3_column_type(st, 4) != SQLITE_INTEGER) {
			ret = -1;
			break;
		}
		if (!(e = hmap_get(&c->firsts, key, 1, &created)))
			break;
		if (!created && (ordered || start >= e->start))
			continue;
		e->pid = sqlite3_column_int64(st, 2);
		e->tid = sqlite3_column_int64(st, 3);
		e->start = start;
		e->wall = sqlite3_column_int64(st, 5);
		e->rows = sqlite3_column_int64(st, 6);
	}
	sqlite3_finalize(st);
	return ret;
}

/* The first execution of each query (earliest first: ordered by time). */
static const struct first_ev *first_of(struct dcache *c, const struct sp_qrow *q)
{
	int64_t k[2] = { q->fp_id, q->kind == SP_QK_EXEC };

	if (!c->firsts_loaded) {
		c->firsts_loaded = 1;
		if (load_firsts(c, 0) < 0) {
			hmap_free(&c->firsts);
			hmap_init(&c->firsts, 2 * sizeof(int64_t), sizeof(struct first_ev));
			load_firsts(c, 1);
		}
	}
	return hmap_get(&c->firsts, k, 0, NULL);
}

static int has_rule(const struct sp_findings *fs, enum sp_rule r, const struct sp_qrow *q)
{
	for (size_t i = 0; i < fs->n; i++)
		if (fs->f[i].rule == r && fs->f[i].q == q)
			return 1;
	return 0;
}

static int first_at_cmp(const void *a, const void *b)
{
	const struct first_at *x = a, *y = b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	return (x->start > y->start) - (x->start < y->start);
}

/* The index in c->byth of the first place not before k (with after: not
 * before nor equal to k). */
static size_t first_at_bound(const struct dcache *c, const struct first_at *k, int after)
{
	size_t lo = 0, hi = c->nbyth;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int r = first_at_cmp(&c->byth[mid], k);

		if (r < 0 || (after && !r))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* How many queries had their first execution (c->firsts, which first_of
 * loads) on thread {pid, tid} after from and before to, both excluded.
 * SIZE_MAX on ENOMEM. */
static size_t firsts_between(struct dcache *c, int64_t pid, int64_t tid, int64_t from, int64_t to)
{
	struct first_at lo = { pid, tid, from }, hi = { pid, tid, to };
	size_t a, b;

	if (!c->byth_built) {
		const struct first_ev *e;
		size_t it = 0;

		c->byth_built = 1;
		if (!(c->byth = malloc((c->firsts.count ? c->firsts.count : 1) * sizeof(*c->byth))))
			return SIZE_MAX;
		while ((e = hmap_next(&c->firsts, &it, NULL)))
			c->byth[c->nbyth++] = (struct first_at){ e->pid, e->tid, e->start };
		qsort(c->byth, c->nbyth, sizeof(*c->byth), first_at_cmp);
	}
	if (!c->byth)
		return SIZE_MAX;
	a = first_at_bound(c, &lo, 1);
	b = first_at_bound(c, &hi, 0);
	return b > a ? b - a : 0;
}

/* 1 if query a (a SELECT reading a table, run >= K times, not already an
 * N+1) is driven by the rows of p, whose first execution fp returned >= K
 * rows: a's first execution started on p's thread while p ran, or after
 * p ended with fewer than LOOP_NEXT_FIRSTS other queries run for the first
 * time on that thread in between, and a ran once per row of p, or at
 * least every other row (count between half p's rows and p's rows).
 * Order, not time, after the end: a thread descheduled between its fetch
 * and its loop (20 ms beside 8 busy loops on its CPU; 10 ms was the
 * limit) still loops over the rows. LOOP_NEXT_FIRSTS leaves room for the
 * other lookups of a row (up to 5) and a few more. */
#define LOOP_NEXT_FIRSTS 8
static int driven_by(struct dcache *c, const struct sp_qrow *p, const struct first_ev *fp,
		     const struct sp_qrow *a, const struct sp_doctor_opts *o,
		     const struct sp_findings *out)
{
	const struct first_ev *fa;

	if (a == p || a->kind != SP_QK_STMT || a->count < o->nplus1_min_run || !a->fp_id ||
	    a->count > p->rows || 2 * a->count < p->rows || !is_select(a->fingerprint) ||
	    !reads_table(a) || has_rule(out, SP_RULE_NPLUS1, a))
		return 0;
	fa = first_of(c, a);
	if (!fa || fa->pid != fp->pid || fa->tid != fp->tid || fa->start < fp->start)
		return 0;
	return fa->start <= fp->start + fp->wall ||
	       firsts_between(c, fp->pid, fp->tid, fp->start + fp->wall, fa->start) <
		       LOOP_NEXT_FIRSTS;
}

/* One n-plus-one finding per query run once per row of an outer query p
 * (members m[0..n) of qs), naming p and the others of the row. 0, or -1
 * on ENOMEM. */
static int add_row_loop(const struct sp_qset *qs, const struct sp_qrow *p, const size_t *m,
			size_t n, const struct sp_attrib *at, struct sp_findings *out)
{
	char *outer = sp_shorten(p->fingerprint, 80), b1[32];

	for (size_t i = 0; i < n; i++) {
		const struct sp_qrow *a = &qs->rows[m[i]];
		struct sp_finding *f = add(out, SP_RULE_NPLUS1, a, at);
		size_t o;

		if (!f) {
			free(outer);
			return -1;
		}
		o = (size_t)snprintf(
			f->evidence, sizeof(f->evidence),
			"%llu executions, one per row of the outer query \"%s\" (%llu rows in"
			" %llu execution%s), mean %s",
			(unsigned long long)a->count, outer ? outer : "?",
			(unsigned long long)p->rows, (unsigned long long)p->count,
			p->count == 1 ? "" : "s", sp_fmt_ns(b1, sizeof(b1), a->mean_ns));
		if (n > 1 && o < sizeof(f->evidence))
			o += (size_t)snprintf(f->evidence + o, sizeof(f->evidence) - o,
					      "; in turn with %zu other quer%s per row:", n - 1,
					      n == 2 ? "y" : "ies");
		for (size_t j = 0; j < n && o < sizeof(f->evidence); j++) {
			char *other = j == i ? NULL : sp_shorten(qs->rows[m[j]].fingerprint, 60);

			if (other)
				o += (size_t)snprintf(f->evidence + o, sizeof(f->evidence) - o,
						      " \"%s\" (%llu)", other,
						      (unsigned long long)qs->rows[m[j]].count);
			free(other);
		}
		snprintf(
			f->suggestion, sizeof(f->suggestion),
			"fetch what the loop needs with the outer query (a JOIN), or in one query per"
			" table (WHERE ... IN (...) over the outer rows), instead of %s per row",
			n > 1 ? "these queries" : "one query");
	}
	free(outer);
	return 0;
}

/*
 * N+1 as ORMs write it (Bullet's per-row loads, Django debug toolbar's
 * similar queries): an outer query returns R >= K rows and, per row, 1 to 5
 * lookups run in turn (an author, a comment count), so no one of them
 * runs back to back and max_run stays 1. Found from exact counts and rows
 * and the first execution of each query (always in events): a lookup
 * whose first execution started on the outer query's thread while it ran
 * (or just after: fetched first, then looped; the thread's next queries
 * first run, whatever the time between), and that ran once per row.
 * A service loop (one request, one outer row) has R = 1; a table-less
 * SELECT is not a lookup.
 */
static int find_row_loops(struct dcache *c, const struct sp_qset *qs, const struct sp_attrib *at,
			  const struct sp_doctor_opts *o, struct sp_findings *out)
{
	char *used = calloc(qs->n ? qs->n : 1, 1);

	if (!used)
		return -1;
	for (size_t i = 0; i < qs->n; i++) {
		const struct sp_qrow *p = &qs->rows[i];
		const struct first_ev *fp;
		size_t m[5], n = 0;

		if (!p->count || !p->fp_id || p->rows < o->nplus1_min_run || sp_sqlite_own(p))
			continue;
		fp = first_of(c, p);
		if (!fp || fp->rows < (int64_t)o->nplus1_min_run)
			continue;
		for (size_t j = 0; j < qs->n && n < 5; j++)
			if (!used[j] && driven_by(c, p, fp, &qs->rows[j], o, out))
				m[n++] = j;
		for (size_t j = 0; j < n; j++)
			used[m[j]] = 1;
		if (n && add_row_loop(qs, p, m, n, at, out) < 0) {
			free(used);
			return -1;
		}
	}
	free(used);
	return 0;
}

/* The language of a site label "function (FILE:line)": by FILE's
 * extension; "c" for C and C++, "" when unknown. */
static const char *site_lang(const char *site)
{
	static const struct {
		const char *ext, *lang;
	} m[] = {
		{ ".py", "python" }, { ".rb", "ruby" }, { ".php", "php" }, { ".js", "node" },
		{ ".ts", "node" },   { ".go", "go" },   { ".c", "c" },     { ".cc", "c" },
		{ ".cpp", "c" },     { ".cxx", "c" },   { ".h", "c" },     { ".hpp", "c" },
	};
	const char *p = strstr(site, " ("), *colon;

	if (!p || !(colon = strchr(p, ':')))
		return "";
	for (size_t i = 0; i < sizeof(m) / sizeof(m[0]); i++) {
		size_t n = strlen(m[i].ext);

		if ((size_t)(colon - p) > n && !strncmp(colon - n, m[i].ext, n))
			return m[i].lang;
	}
	return "";
}

/* The reprepare rule's advice, in the terms of the program's language
 * (the site's file): the C API for C, the sqlite3 module's statement
 * cache and connections for Python, the driver's cache otherwise. */
static void reprepare_advice(struct sp_finding *f, uint64_t texts)
{
	const char *lang = site_lang(f->site);
	char pre[128] = "";

	if (texts > 1)
		snprintf(pre, sizeof(pre), "%llu distinct SQL texts share this fingerprint: ",
			 (unsigned long long)texts);
	if (!strcmp(lang, "c"))
		snprintf(
			f->suggestion, sizeof(f->suggestion),
			"%skeep the prepared statement and reuse it (sqlite3_reset + sqlite3_bind_*"
			" instead of finalize + prepare%s), or use a statement cache",
			pre,
			texts > 1 ? "; bind parameters instead of writing values into the SQL"
				  : "");
	else if (!strcmp(lang, "python"))
		snprintf(
			f->suggestion, sizeof(f->suggestion),
			"%sPython's sqlite3 reuses a prepared statement from its per-connection cache"
			" (cached_statements, 128) only for the same text on the same connection: pass"
			" values as parameters (execute(sql, params)), keep one connection per thread"
			" instead of one per request (a new one prepares everything again and reloads"
			" the schema), and raise cached_statements if more statements run",
			pre);
	else
		snprintf(
			f->suggestion, sizeof(f->suggestion),
			"%skeep the prepared statement (the driver's statement cache, or a prepared"
			" statement object kept between calls), pass values as parameters, and keep"
			" the connection open instead of opening one per request",
			pre);
}

static void dcache_free(struct dcache *c)
{
	size_t i;

	hmap_free(&c->runs);
	hmap_free(&c->texts);
	hmap_free(&c->fpschema);
	hmap_free(&c->dups);
	hmap_free(&c->firsts);
	free(c->byth);
	free(c->rl);
	for (i = 0; i < c->nptexts; i++)
		free(c->ptexts[i]);
	free(c->ptexts);
	if (c->priv)
		sqlite3_close(c->priv);
}

/* N+1: one SELECT repeated back to back on one thread. */
static int find_nplus1(struct dcache *dc, const struct sp_qrow *q, const struct sp_attrib *at,
		       const struct sp_doctor_opts *o, struct sp_findings *out)
{
	struct sp_finding *f;
	char b1[32];
	int stmt = q->kind == SP_QK_STMT;

	/* N+1 */
	if (stmt && q->max_run >= o->nplus1_min_run && is_select(q->fingerprint) &&
	    reads_table(q)) {
		int exact;
		uint64_t nr = runs_at_least(dc, q->fp_id, o->nplus1_min_run, &exact);

		if (!(f = add(out, SP_RULE_NPLUS1, q, at)))
			return -1;
		if (nr)
			snprintf(f->evidence, sizeof(f->evidence),
				 "%llu consecutive executions on one thread at most; %s%llu run%s"
				 " of >= %llu; %llu executions in all, mean %s",
				 (unsigned long long)q->max_run, exact ? "" : "about ",
				 (unsigned long long)nr, nr == 1 ? "" : "s",
				 (unsigned long long)o->nplus1_min_run,
				 (unsigned long long)q->count,
				 sp_fmt_ns(b1, sizeof(b1), q->mean_ns));
		else
			snprintf(f->evidence, sizeof(f->evidence),
				 "%llu consecutive executions on one thread at most;"
				 " %llu executions in all, mean %s",
				 (unsigned long long)q->max_run, (unsigned long long)q->count,
				 sp_fmt_ns(b1, sizeof(b1), q->mean_ns));
		snprintf(f->suggestion, sizeof(f->suggestion),
			 "fetch the rows in one query (a JOIN, or WHERE ... IN (...)) instead of"
			 " one query per row of the caller's loop");
	}
	return 0;
}

/* Re-prepare churn: a statement prepared again for almost every execution. */
static int find_reprepare(struct dcache *dc, const struct sp_qrow *q, const struct sp_attrib *at,
			  const struct sp_doctor_opts *o, struct sp_findings *out)
{
	struct sp_finding *f;
	char b1[32], b2[32];
	int stmt = q->kind == SP_QK_STMT;

	/* re-prepare churn */
	if (stmt && q->count >= o->reprepare_min_execs &&
	    (double)q->prepares >= o->reprepare_ratio * (double)q->count) {
		uint64_t texts = distinct_texts(dc, q->fp_id);

		if (!(f = add(out, SP_RULE_REPREPARE, q, at)))
			return -1;
		snprintf(f->evidence, sizeof(f->evidence),
			 "%llu prepares for %llu executions; %s preparing vs %s executing",
			 (unsigned long long)q->prepares, (unsigned long long)q->count,
			 sp_fmt_ns(b1, sizeof(b1), (double)q->prepare_ns),
			 sp_fmt_ns(b2, sizeof(b2), (double)q->total_ns));
		reprepare_advice(f, texts);
	}
	return 0;
}

/* The same SQL with the same values, again and again. */
static int find_duplicate(struct dcache *dc, const struct sp_qrow *q, const struct sp_attrib *at,
			  const struct sp_doctor_opts *o, struct sp_findings *out)
{
	struct sp_finding *f;
	int stmt = q->kind == SP_QK_STMT;

	/* the same SQL with the same values */
	if (stmt) {
		const uint64_t *d = dups_of(dc, q->fp_id);

		if (d && d[0] >= o->duplicate_min_samples && d[1] <= d[0] &&
		    (double)d[1] >= o->duplicate_min_share * (double)d[0]) {
			double share = (double)d[1] / (double)d[0];

			if (!(f = add(out, SP_RULE_DUPLICATE, q, at)))
				return -1;
			snprintf(f->evidence, sizeof(f->evidence),
				 "%llu of %llu drawn executions had the bound values of an"
				 " earlier one (one set of values: %llu); ~%.0f of %llu"
				 " executions (est.) repeat a query already run",
				 (unsigned long long)d[1], (unsigned long long)d[0],
				 (unsigned long long)d[2], share * (double)q->count,
				 (unsigned long long)q->count);
			snprintf(f->suggestion, sizeof(f->suggestion),
				 "the same query with the same values: keep its result (run it"
				 " once before the loop, or cache it) instead of asking again");
		}
	}
	return 0;
}

/* Full scans of big tables (the plan's bare SCANs). */
static int find_fullscan(struct dcache *dc, const struct sp_qrow *q, const struct sp_attrib *at,
			 const struct sp_doctor_opts *o, struct sp_findings *out,
			 const struct scan_ctx *sc)
{
	struct sp_finding *f;

	/* full scans of big tables */
	if (sc->nscan &&
	    (double)q->fullscan_steps / (double)q->count >= (double)o->fullscan_min_rows) {
		if (!(f = add(out, SP_RULE_FULLSCAN, q, at)))
			return -1;
		snprintf(f->evidence, sizeof(f->evidence),
			 "plan %s; %llu full-scan steps in %llu executions (%.0f rows per"
			 " execution)",
			 sc->scans, (unsigned long long)q->fullscan_steps,
			 (unsigned long long)q->count,
			 (double)q->fullscan_steps / (double)q->count);
		suggest(dc, q, &sc->first_scan, f->suggestion, sizeof(f->suggestion));
	}
	return 0;
}

/* Temporary B-trees over many rows. */
static int find_tempbtree(struct dcache *dc, const struct sp_qrow *q, const struct sp_attrib *at,
			  const struct sp_doctor_opts *o, struct sp_findings *out,
			  const struct scan_ctx *sc)
{
	struct sp_finding *f;

	/* temp B-trees */
	if (sc->temp && (double)(q->rows > q->fullscan_steps ? q->rows : q->fullscan_steps) /
					(double)q->count >=
				TEMPBTREE_MIN_ROWS) {
		struct sp_plan_access a;

		if (!(f = add(out, SP_RULE_TEMPBTREE, q, at)))
			return -1;
		snprintf(f->evidence, sizeof(f->evidence),
			 "plan \"%s\"; %llu sorts in %llu executions, %llu rows returned,"
			 " %llu full-scan steps",
			 sc->temp, (unsigned long long)q->sorts, (unsigned long long)q->count,
			 (unsigned long long)q->rows, (unsigned long long)q->fullscan_steps);
		/* the table read: the first scanned or searched one */
		memset(&a, 0, sizeof(a));
		if (sc->nscan)
			a = sc->first_scan;
		else if (sc->nauto)
			a = sc->first_auto;
		if (a.name[0]) {
			a.automatic = 0;
			suggest(dc, q, &a, f->suggestion, sizeof(f->suggestion));
		} else {
			snprintf(f->suggestion, sizeof(f->suggestion),
				 "no suggestion (an index matching the ORDER BY / GROUP BY"
				 " would avoid the sort)");
		}
	}
	return 0;
}

/* Automatic indexes SQLite builds on every execution. */
static int find_autoindex(struct dcache *dc, const struct sp_qrow *q, const struct sp_attrib *at,
			  const struct sp_doctor_opts *o, struct sp_findings *out,
			  const struct scan_ctx *sc)
{
	struct sp_finding *f;

	/* automatic indexes */
	if (q->autoindex || sc->nauto) {
		if (!(f = add(out, SP_RULE_AUTOINDEX, q, at)))
			return -1;
		if (sc->nauto)
			snprintf(f->evidence, sizeof(f->evidence),
				 "plan %s; %llu rows inserted into automatic indexes in %llu"
				 " executions",
				 sc->autos, (unsigned long long)q->autoindex,
				 (unsigned long long)q->count);
		else
			snprintf(f->evidence, sizeof(f->evidence),
				 "%llu rows inserted into automatic indexes in %llu executions",
				 (unsigned long long)q->autoindex, (unsigned long long)q->count);
		if (sc->nauto)
			suggest(dc, q, &sc->first_auto, f->suggestion, sizeof(f->suggestion));
		else
			snprintf(f->suggestion, sizeof(f->suggestion),
				 "no suggestion (no plan captured; SQLite builds this index on"
				 " every execution: create a permanent one on the join column)");
	}
	return 0;
}

int sp_doctor_find(sqlite3 *db, const struct sp_qset *qs, const struct sp_attrib *at,
		   const struct sp_doctor_opts *o, struct sp_findings *out)
{
	struct dcache dc = { .db = db };
	size_t i;

	hmap_init(&dc.runs, sizeof(int64_t), 2 * sizeof(size_t));
	hmap_init(&dc.texts, sizeof(int64_t), sizeof(uint64_t));
	hmap_init(&dc.fpschema, sizeof(int64_t), 2 * sizeof(int64_t));
	hmap_init(&dc.dups, sizeof(int64_t), 3 * sizeof(uint64_t));
	hmap_init(&dc.firsts, 2 * sizeof(int64_t), sizeof(struct first_ev));
	memset(out, 0, sizeof(*out));
	for (i = 0; i < qs->n; i++) {
		const struct sp_qrow *q = &qs->rows[i];
		struct scan_ctx sc;

		if (!q->count || q->fp_id == 0 || sp_sqlite_own(q))
			continue; /* SQLite's own statements: nothing the program can change */
		if (find_nplus1(&dc, q, at, o, out) < 0 || find_reprepare(&dc, q, at, o, out) < 0 ||
		    find_duplicate(&dc, q, at, o, out) < 0 || hidden_scan(&dc, q, at, o, out) < 0)
			goto nomem;
		if (!q->plan && !q->autoindex)
			continue;
		memset(&sc, 0, sizeof(sc));
		sc.q = q;
		if (q->plan)
			sp_plan_foreach(q->plan, scan_cb, &sc);
		if (find_fullscan(&dc, q, at, o, out, &sc) < 0 ||
		    find_tempbtree(&dc, q, at, o, out, &sc) < 0 ||
		    find_autoindex(&dc, q, at, o, out, &sc) < 0)
			goto nomem;
	}
	if (find_row_loops(&dc, qs, at, o, out) < 0)
		goto nomem;
	dcache_free(&dc);
	return 0;
nomem:
	dcache_free(&dc);
	sp_findings_free(out);
	return -1;
}

void sp_findings_free(struct sp_findings *fs)
{
	free(fs->f);
	memset(fs, 0, sizeof(*fs));
}

static const char *doctor_root; /* sp_doctor_set_root */

void sp_doctor_set_root(const char *root)
{
	doctor_root = root;
}

/* A site label "function (FILE:line) ..." with the report's common
 * directory taken off FILE, as on the report's "->" lines. */
static void print_site(FILE *f, const char *site)
{
	size_t n = doctor_root ? strlen(doctor_root) : 0;
	const char *p = n ? strstr(site, " (") : NULL;

	if (p && !strncmp(p + 2, doctor_root, n) && p[2 + n]) {
		fprintf(f, "%.*s (%s", (int)(p - site), site, p + 2 + n);
		return;
	}
	fputs(site, f);
}

void sp_doctor_print_text(const struct sp_findings *fs, FILE *f)
{
	size_t i, shown[SP_RULE_NDOCTOR] = { 0 }, more[SP_RULE_NDOCTOR] = { 0 };

	if (!fs->n)
		return;
	fprintf(f, "\n# query doctor: %zu finding%s\n", fs->n, fs->n == 1 ? "" : "s");
	for (i = 0; i < fs->n; i++) {
		const struct sp_finding *x = &fs->f[i];
		char *sql;

		/* the costliest SP_DOCTOR_TEXT_MAX of a rule (findings come in
		 * the table's order): 10,000 texts each prepared per execution
		 * made 40,000 lines of the same advice */
		if ((unsigned)x->rule < SP_RULE_NDOCTOR && shown[x->rule]++ >= SP_DOCTOR_TEXT_MAX) {
			more[x->rule]++;
			continue;
		}
		sql = sp_shorten(x->q->fingerprint, 100);
		if (sql)
			sp_term_clean(sql);
		fprintf(f, "%-10s  %s%s\n", sp_rule_name(x->rule),
			x->q->kind != SP_QK_EXEC ? "" : "[exec] ", sql ? sql : "?");
		fputs("            at ", f);
		print_site(f, x->site);
		fputc('\n', f);
		fprintf(f, "            evidence: %s\n", x->evidence);
		fprintf(f, "            suggestion: %s\n", x->suggestion);
		free(sql);
	}
	for (i = 0; i < SP_RULE_NDOCTOR; i++)
		if (more[i])
			fprintf(f,
				"%-10s  ... and %zu more queries with this finding, the same advice "
				"(every one: --format json, or --format csv --findings)\n",
				sp_rule_name((enum sp_rule)i), more[i]);
}

void sp_doctor_print(sqlite3 *db, const struct sp_qset *qs, const struct sp_attrib *at, FILE *f)
{
	struct sp_doctor_opts o = SP_DOCTOR_DEFAULTS;
	struct sp_findings fs;

	if (sp_doctor_find(db, qs, at, &o, &fs) < 0) {
		fprintf(f, "\n# query doctor: out of memory\n");
		return;
	}
	sp_doctor_print_text(&fs, f);
	sp_findings_free(&fs);
}
