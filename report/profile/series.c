/* SPDX-License-Identifier: MIT */
/*
 * series.c - per-interval totals per query: written with each profile of
 * the agent (and once by record), merged into coarser intervals as they
 * age, and read back through time windows; see series.h.
 *
 * Every number is computed in SQL inside the writer's transaction, from
 * the tables the writer has just filled: an interval is `queries` minus
 * the `queries` of the profile it replaces (which that profile's
 * intervals sum to), per fingerprint and kind, and its latency histogram
 * (`buckets`, one JSON text per row) is `histograms` minus that
 * profile's, per bucket. The sum of a query's intervals is therefore its
 * total by construction, and a merge only adds rows up. `record`'s one
 * interval is the exception: its rows are the writer's queries as they
 * are, given by the writer (sp_series_first). What this file does not do: decide when an
 * interval ends (the agent's snapshots do), or keep anything in memory
 * between two writes (the previous profile is the state).
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kind.h"
#include "profile.h"
#include "rowsrc.h"
#include "series.h"

static const char *const cols[SP_SERIES_NCOLS] = {
	"count",    "total_ns",       "self_ns",  "wall_ns",    "rows",
	"vm_steps", "fullscan_steps", "sorts",    "autoindex",  "errors",
	"nested",   "samples",        "prepares", "prepare_ns", "runs",
};

static const char schema[] =
	"CREATE TABLE IF NOT EXISTS intervals(start_ns INTEGER PRIMARY KEY, end_ns INTEGER NOT NULL,"
	" snapshots INTEGER NOT NULL);"
	"CREATE TABLE IF NOT EXISTS interval_queries(start_ns INTEGER, fp_id INTEGER, kind TEXT,"
	" count INTEGER, total_ns INTEGER, self_ns INTEGER, wall_ns INTEGER, rows INTEGER,"
	" vm_steps INTEGER, fullscan_steps INTEGER, sorts INTEGER, autoindex INTEGER,"
	" errors INTEGER, nested INTEGER, samples INTEGER, prepares INTEGER, prepare_ns INTEGER,"
	" runs INTEGER, buckets TEXT, PRIMARY KEY(start_ns, fp_id, kind)) WITHOUT ROWID;";

int64_t sp_series_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int exec_sql(sqlite3 *db, const char *sql, char *err, size_t errlen)
{
	char *msg = NULL;

	if (sqlite3_exec(db, sql, NULL, NULL, &msg) == SQLITE_OK)
		return 0;
	snprintf(err, errlen, "intervals: %s", msg ? msg : sqlite3_errmsg(db));
	sqlite3_free(msg);
	return -1;
}

/* "a, b, ..." of cols, each as fmt makes it ("SUM(%s)", "-%s"), into buf. */
static const char *col_list(char *buf, size_t len, const char *fmt)
{
	size_t n = 0;

	buf[0] = 0;
	for (int i = 0; i < SP_SERIES_NCOLS && n < len; i++) {
		if (i)
			n += (size_t)snprintf(buf + n, len - n, ", ");
		if (n < len)
			n += (size_t)snprintf(buf + n, len - n, fmt, cols[i], cols[i]);
	}
	return buf;
}

static int has_table(sqlite3 *db, const char *name)
{
	sqlite3_stmt *st;
	int r = 0;

	if (sqlite3_prepare_v2(db, "SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = ?",
			       -1, &st, NULL) != SQLITE_OK)
		return 0;
	sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
	r = sqlite3_step(st) == SQLITE_ROW;
	sqlite3_finalize(st);
	return r;
}

/* Copy rows of one table from the previous profile: every column read as
 * an integer (kind as 'stmt' or 'exec'), so whatever the file holds, the
 * new one gets numbers of our schema. */
static int copy_table(sqlite3 *from, sqlite3 *to, const char *sel, const char *ins, int ncol,
		      int kind_col, char *err, size_t errlen)
{
	sqlite3_stmt *s = NULL, *i = NULL;
	int rc = -1, r;

	if (sqlite3_prepare_v2(from, sel, -1, &s, NULL) != SQLITE_OK) {
		snprintf(err, errlen, "intervals of the previous profile: %s",
			 sqlite3_errmsg(from));
		goto out;
	}
	if (sqlite3_prepare_v2(to, ins, -1, &i, NULL) != SQLITE_OK) {
		snprintf(err, errlen, "intervals: %s", sqlite3_errmsg(to));
		goto out;
	}
	while ((r = sqlite3_step(s)) == SQLITE_ROW) {
		for (int c = 0; c < ncol; c++) {
			if (c == kind_col) {
				const char *k = (const char *)sqlite3_column_text(s, c);

				sqlite3_bind_text(i, c + 1, sp_qkind_name(sp_qkind_parse(k)), -1,
						  SQLITE_STATIC);
			} else if (sqlite3_column_type(s, c) == SQLITE_TEXT) { /* buckets */
				sqlite3_bind_text(i, c + 1, (const char *)sqlite3_column_text(s, c),
						  -1, SQLITE_TRANSIENT);
			} else if (sqlite3_column_type(s, c) == SQLITE_NULL) {
				sqlite3_bind_null(i, c + 1);
			} else {
				sqlite3_bind_int64(i, c + 1, sqlite3_column_int64(s, c));
			}
		}
		if (sqlite3_step(i) != SQLITE_DONE) {
			snprintf(err, errlen, "intervals: %s", sqlite3_errmsg(to));
			goto out;
		}
		sqlite3_reset(i);
	}
	if (r != SQLITE_DONE) {
		snprintf(err, errlen, "intervals of the previous profile: %s",
			 sqlite3_errmsg(from));
		goto out;
	}
	rc = 0;
out:
	sqlite3_finalize(s);
	sqlite3_finalize(i);
	return rc;
}

/* The intervals of the profile at prev, into db, and the totals they
 * sum to (prev's queries and histograms, by the invariant) into the
 * temporary sp_base_q and sp_base_h: the new interval is the difference
 * from them, computed without adding up every interval again (at 200
 * queries in 1150 intervals that sum took most of 22 s). A file that is
 * not a profile, or has no intervals, gives none (0); a read that fails
 * midway is an error (-1), since a half copy would put the rest of the
 * totals in the new interval twice. */
static int copy_prev(sqlite3 *db, const char *prev, char *err, size_t errlen)
{
	char e[512], sel[1024], ins[256], l[512];
	sqlite3 *from = NULL;
	int rc = -1;

	if (exec_sql(db,
		     "DROP TABLE IF EXISTS temp.sp_base_q; DROP TABLE IF EXISTS temp.sp_base_h;"
		     "CREATE TEMP TABLE sp_base_q(fp_id INTEGER, kind TEXT, count INTEGER,"
		     " total_ns INTEGER, self_ns INTEGER, wall_ns INTEGER, rows INTEGER,"
		     " vm_steps INTEGER, fullscan_steps INTEGER, sorts INTEGER, autoindex INTEGER,"
		     " errors INTEGER, nested INTEGER, samples INTEGER, prepares INTEGER,"
		     " prepare_ns INTEGER, runs INTEGER);"
		     "CREATE TEMP TABLE sp_base_h(fp_id INTEGER, kind TEXT, bucket_ns INTEGER,"
		     " count INTEGER);",
		     err, errlen) < 0)
		return -1;
	from = prev ? sp_profile_open(prev, e, sizeof(e)) : NULL;
	if (!from) {
		rc = 0;
		goto out;
	}
	/* only an agent's profile is continued: over a record's, the agent
	 * starts afresh (cmd-agent.c) and so do its intervals */
	if (!has_table(from, "intervals") || !has_table(from, "interval_queries") ||
	    !has_table(from, "agent_queries")) {
		rc = 0;
		goto out;
	}
	if (copy_table(from, db,
		       "SELECT start_ns, end_ns, snapshots FROM intervals WHERE end_ns > start_ns",
		       "INSERT OR IGNORE INTO intervals VALUES(?,?,?)", 3, -1, err, errlen) < 0)
		goto out;
	/* in key order: the new table (clustered on its key) is appended
	 * to. The buckets stay text, valid JSON or none (the merges read
	 * them with json_each). */
	snprintf(sel, sizeof(sel),
		 "SELECT start_ns, fp_id, kind, %s, CASE WHEN json_valid(buckets) THEN buckets END"
		 " FROM interval_queries ORDER BY 1, 2, 3",
		 col_list(l, sizeof(l), "%s"));
	snprintf(ins, sizeof(ins), "INSERT OR IGNORE INTO interval_queries VALUES(?,?,?%s)",
		 ",?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?");
	if (copy_table(from, db, sel, ins, 4 + SP_SERIES_NCOLS, 2, err, errlen) < 0)
		goto out;
	snprintf(sel, sizeof(sel), "SELECT fp_id, kind, %s FROM queries",
		 col_list(l, sizeof(l), "%s"));
	snprintf(ins, sizeof(ins), "INSERT INTO temp.sp_base_q VALUES(?,?%s)",
		 ",?,?,?,?,?,?,?,?,?,?,?,?,?,?,?");
	if (copy_table(from, db, sel, ins, 2 + SP_SERIES_NCOLS, 1, err, errlen) < 0 ||
	    copy_table(from, db, "SELECT fp_id, kind, bucket_ns, count FROM histograms",
		       "INSERT INTO temp.sp_base_h VALUES(?,?,?,?)", 4, 1, err, errlen) < 0)
		goto out;
	rc = 1;
	goto out_close;
out:
	/* nothing copied from prev: the base is what db's intervals sum to */
	if (rc == 0) {
		char sql[2048], l2[512];

		snprintf(sql, sizeof(sql),
			 "INSERT INTO temp.sp_base_q SELECT fp_id, kind, %s FROM interval_queries"
			 " GROUP BY fp_id, kind;"
			 "INSERT INTO temp.sp_base_h SELECT q.fp_id, q.kind, json_extract(j.value,"
			 " '$[0]') b, SUM(json_extract(j.value, '$[1]')) FROM interval_queries q,"
			 " json_each(q.buckets) j GROUP BY q.fp_id, q.kind, b;",
			 col_list(l2, sizeof(l2), "SUM(%s)"));
		rc = exec_sql(db, sql, err, errlen);
	}
out_close:
	sqlite3_close(from);
	return rc < 0 ? -1 : 0;
}

const struct sp_tier *sp_series_tiers(size_t *n, char *err, size_t errlen)
{
	/* 10 s buckets after 2 min, 1 min after 15 min, 1 h after 6 h, 1 day
	 * after 30 days: at most 12-1200 raw intervals (--interval 10 to 0.1),
	 * 78 + 345 + 714 merged ones and one a day per query that ran in them
	 * (the 10 s tier keeps a fast agent's raw intervals few: 9000 of 0.1 s
	 * in 15 minutes without it) */
	static const struct sp_tier def[] = {
		{ 10 * 1000000000LL, 120 * 1000000000LL },
		{ 60 * 1000000000LL, 900 * 1000000000LL },
		{ 3600 * 1000000000LL, 21600 * 1000000000LL },
		{ 86400 * 1000000000LL, 2592000 * 1000000000LL },
	};
	static struct sp_tier env[SP_SERIES_MAX_TIERS];
	const char *s = getenv("SQLPROF_SERIES_TIERS");
	size_t k = 0;

	if (!s || !*s) {
		*n = sizeof(def) / sizeof(def[0]);
		return def;
	}
	while (*s) {
		char *e;
		double w, a;

		errno = 0;
		w = strtod(s, &e);
		if (e == s || *e != '@' || k == SP_SERIES_MAX_TIERS)
			goto bad;
		s = e + 1;
		a = strtod(s, &e);
		if (e == s || (*e && (*e != ',' || !e[1])) || errno || !(w >= 0.001) || !(a >= 0) ||
		    w > 1e9 || a > 1e9)
			goto bad;
		env[k].width_ns = (int64_t)llround(w * 1e9);
		env[k].age_ns = (int64_t)llround(a * 1e9);
		if (k &&
		    (env[k].width_ns % env[k - 1].width_ns || env[k].age_ns <= env[k - 1].age_ns))
			goto bad;
		k++;
		s = *e ? e + 1 : e;
	}
	*n = k;
	return env;
bad:
	snprintf(
		err, errlen,
		"SQLPROF_SERIES_TIERS wants WIDTH@AGE,... in seconds, each width a multiple of the "
		"one before and ages increasing, not '%s'",
		getenv("SQLPROF_SERIES_TIERS"));
	return NULL;
}

/* Merge the intervals that ended at or before cut into buckets of width
 * (by their start): each bucket's rows are added up under its first
 * interval's start, which then ends where its last one ended. */
/* sql with ?1 = width and ?2 = cut, stepped once: its first step's
 * result (SQLITE_ROW, SQLITE_DONE, or an error, the message in db). */
static int step_width_cut(sqlite3 *db, const char *sql, int64_t width, int64_t cut)
{
	sqlite3_stmt *st;
	int rc;

	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		return SQLITE_ERROR;
	sqlite3_bind_int64(st, 1, width);
	sqlite3_bind_int64(st, 2, cut);
	rc = sqlite3_step(st);
	sqlite3_finalize(st); /* a step's error keeps its message */
	return rc;
}

static int merge_tier(sqlite3 *db, int64_t width, int64_t cut, char *err, size_t errlen)
{
	char sql[4096], l[512];
	sqlite3_stmt *st = NULL;
	int some;

	/* nothing to merge (a recording's one interval, an agent's tier
	 * with no full bucket yet): leave before the temporary tables,
	 * whose statements cost a one-query record 11 % of its CPU */
	some = step_width_cut(db,
			      "SELECT 1 FROM intervals WHERE end_ns <= ?2"
			      " GROUP BY start_ns / ?1 HAVING count(*) > 1 LIMIT 1",
			      width, cut);
	if (some != SQLITE_ROW && some != SQLITE_DONE)
		goto sqlerr;
	if (some == SQLITE_DONE)
		return 0;
	if (exec_sql(db,
		     "DROP TABLE IF EXISTS temp.sp_merge;"
		     "CREATE TEMP TABLE sp_merge(s INTEGER PRIMARY KEY, g INTEGER);",
		     err, errlen) < 0)
		return -1;
	if (step_width_cut(db,
			   "INSERT INTO temp.sp_merge SELECT start_ns, MIN(start_ns) OVER"
			   " (PARTITION BY start_ns / ?1) FROM intervals WHERE end_ns <= ?2",
			   width, cut) != SQLITE_DONE)
		goto sqlerr;
	snprintf(
		sql, sizeof(sql),
		/* groups of one interval stay as they are */
		"DELETE FROM temp.sp_merge WHERE g NOT IN (SELECT g FROM temp.sp_merge WHERE s <> g);"
		"CREATE INDEX temp.sp_merge_g ON sp_merge(g);"
		"UPDATE intervals SET"
		" end_ns = (SELECT MAX(i.end_ns) FROM intervals i JOIN temp.sp_merge m"
		"  ON i.start_ns = m.s WHERE m.g = intervals.start_ns),"
		" snapshots = (SELECT SUM(i.snapshots) FROM intervals i JOIN temp.sp_merge m"
		"  ON i.start_ns = m.s WHERE m.g = intervals.start_ns)"
		" WHERE start_ns IN (SELECT g FROM temp.sp_merge);"
		/* the buckets of each group, added up before its rows are */
		"CREATE TEMP TABLE sp_mh AS SELECT m.g, q.fp_id, q.kind,"
		" json_extract(j.value, '$[0]') b, SUM(json_extract(j.value, '$[1]')) c"
		" FROM interval_queries q JOIN temp.sp_merge m ON q.start_ns = m.s,"
		" json_each(q.buckets) j GROUP BY 1, 2, 3, 4 HAVING c <> 0;"
		/* without these the updates scan per row: 1150 intervals
		  * of 200 queries took 566 s to merge, with them 4.6 */
		"CREATE INDEX temp.sp_mh_key ON sp_mh(g, fp_id, kind, b);"
		"INSERT OR REPLACE INTO interval_queries SELECT m.g, q.fp_id, q.kind, %s, NULL"
		" FROM interval_queries q JOIN temp.sp_merge m ON q.start_ns = m.s"
		" GROUP BY m.g, q.fp_id, q.kind;"
		"UPDATE interval_queries SET buckets = (SELECT json_group_array(json_array(b, c))"
		" FROM (SELECT b, c FROM temp.sp_mh h WHERE h.g = interval_queries.start_ns AND"
		" h.fp_id = interval_queries.fp_id AND h.kind = interval_queries.kind ORDER BY b))"
		" WHERE start_ns IN (SELECT g FROM temp.sp_merge);"
		"DELETE FROM interval_queries WHERE start_ns IN"
		" (SELECT s FROM temp.sp_merge WHERE s <> g);"
		"DELETE FROM intervals WHERE start_ns IN (SELECT s FROM temp.sp_merge WHERE s <> g);"
		"DROP TABLE temp.sp_merge; DROP TABLE temp.sp_mh;",
		col_list(l, sizeof(l), "SUM(q.%s)"));
	return exec_sql(db, sql, err, errlen);
sqlerr:
	snprintf(err, errlen, "intervals: %s", sqlite3_errmsg(db));
	sqlite3_finalize(st);
	return -1;
}

/* Unix time minus CLOCK_MONOTONIC, which the events' start_ns count in,
 * into meta (when db has one): the Perfetto export puts the intervals on
 * their clock. 0, or -1 (sqlite3_errmsg). */
static int clock_offset(sqlite3 *db)
{
	struct timespec rt, mt;
	sqlite3_stmt *st;
	int rc;

	if (!has_table(db, "meta"))
		return 0;
	clock_gettime(CLOCK_REALTIME, &rt);
	clock_gettime(CLOCK_MONOTONIC, &mt);
	if (sqlite3_prepare_v2(db, "INSERT OR REPLACE INTO meta VALUES('clock_offset_ns', ?)", -1,
			       &st, NULL) != SQLITE_OK)
		return -1;
	sqlite3_bind_int64(st, 1,
			   ((int64_t)rt.tv_sec - (int64_t)mt.tv_sec) * 1000000000 +
				   (rt.tv_nsec - mt.tv_nsec));
	rc = sqlite3_step(st) == SQLITE_DONE ? 0 : -1;
	sqlite3_finalize(st);
	return rc;
}

/* 1 when db's only interval is the one just added and nothing is in the
 * base (no earlier profile's intervals): the interval is the totals. 0
 * otherwise, -1 on an error. */
static int first_interval(sqlite3 *db)
{
	sqlite3_stmt *st;
	int rc = -1;

	if (sqlite3_prepare_v2(db,
			       "SELECT (SELECT COUNT(*) FROM intervals) = 1 AND"
			       " NOT EXISTS (SELECT 1 FROM interval_queries) AND"
			       " NOT EXISTS (SELECT 1 FROM temp.sp_base_q) AND"
			       " NOT EXISTS (SELECT 1 FROM temp.sp_base_h)",
			       -1, &st, NULL) != SQLITE_OK)
		return -1;
	if (sqlite3_step(st) == SQLITE_ROW)
		rc = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	return rc;
}

/*
 * The first interval's rows (first_interval): each query's totals and
 * histogram as they are, in one statement that reads the histogram of
 * each query through the writer's index histograms_query (made before
 * the intervals: sp_series_add is called after every table is filled),
 * where the general case builds and indexes the differences first:
 * 200,000 queries took 2.6 s of CPU that way, this way 0.6 s. The rows
 * are those the general case makes: a query with a total or a bucket
 * that is not 0, buckets "[]" when it has no histogram.
 */
static int first_rows(sqlite3 *db, int64_t start, char *err, size_t errlen)
{
	char sql[4096], l1[512], l2[1024];
	sqlite3_stmt *st = NULL;
	size_t n = 0;

	for (int i = 0; i < SP_SERIES_NCOLS; i++)
		n += (size_t)snprintf(l2 + n, sizeof(l2) - n, "%sq.%s <> 0", i ? " OR " : "",
				      cols[i]);
	snprintf(sql, sizeof(sql),
		 "INSERT INTO interval_queries SELECT ?1, q.fp_id, q.kind, %s,"
		 " (SELECT json_group_array(json_array(b, c)) FROM (SELECT h.bucket_ns b,"
		 "  SUM(h.count) c FROM histograms h WHERE h.fp_id = q.fp_id AND h.kind = q.kind"
		 "  GROUP BY h.bucket_ns HAVING c <> 0 ORDER BY h.bucket_ns))"
		 " FROM queries q WHERE %s OR EXISTS (SELECT 1 FROM histograms h"
		 "  WHERE h.fp_id = q.fp_id AND h.kind = q.kind AND h.count <> 0)"
		 " ORDER BY q.fp_id, q.kind",
		 col_list(l1, sizeof(l1), "q.%s"), l2);
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		goto sqlerr;
	sqlite3_bind_int64(st, 1, start);
	if (sqlite3_step(st) != SQLITE_DONE)
		goto sqlerr;
	sqlite3_finalize(st);
	return 0;
sqlerr:
	snprintf(err, errlen, "intervals: %s", sqlite3_errmsg(db));
	sqlite3_finalize(st);
	return -1;
}

/* The interval [start, end_ns) into intervals; 0, or -1 (sqlite3_errmsg). */
static int add_interval(sqlite3 *db, int64_t start, int64_t end_ns)
{
	sqlite3_stmt *st;
	int rc;

	if (sqlite3_prepare_v2(db, "INSERT INTO intervals VALUES(?, ?, 1)", -1, &st, NULL) !=
	    SQLITE_OK)
		return -1;
	sqlite3_bind_int64(st, 1, start);
	sqlite3_bind_int64(st, 2, end_ns);
	rc = sqlite3_step(st) == SQLITE_DONE ? 0 : -1;
	sqlite3_finalize(st); /* a step's error keeps its message */
	return rc;
}

/*
 * The first interval of a db with none and no profile before it (record's
 * was, before sp_series_first): the totals as they are, without the base's
 * temporary tables, whose creation and drop were half of sp_series_add's
 * 2.6 M instructions in a one-query record; one interval has nothing to
 * merge. 0, or -1 (err).
 */
static int first_write(sqlite3 *db, int64_t start, int64_t end_ns, char *err, size_t errlen)
{
	if (exec_sql(db, schema, err, errlen) < 0)
		return -1;
	if (end_ns <= start)
		end_ns = start + 1;
	if (add_interval(db, start, end_ns) < 0)
		goto sqlerr;
	if (first_rows(db, start, err, errlen) < 0)
		return -1;
	if (clock_offset(db) < 0)
		goto sqlerr;
	return 0;
sqlerr:
	snprintf(err, errlen, "intervals: %s", sqlite3_errmsg(db));
	return -1;
}

/* The rows of sp_series_first: the caller's queries, those with nothing
 * to count left out, each with its buckets' JSON made in buf. */
struct first_src {
	struct sp_rowsrc src; /* first: the callback's argument */
	int64_t start;
	int (*next)(struct sp_series_query *q, void *arg);
	void *arg;
	struct sp_series_query q;
	char *buf;
	size_t cap;
	int nomem;
};

/* v in decimal at p (at most 20 characters); returns the end. snprintf
 * took 40 % of the rows' making. */
static char *put_int(char *p, int64_t v)
{
	char tmp[20];
	uint64_t u = v < 0 ? -(uint64_t)v : (uint64_t)v;
	int n = 0;

	if (v < 0)
		*p++ = '-';
	do
		tmp[n++] = (char)('0' + u % 10);
	while ((u /= 10) != 0);
	while (n)
		*p++ = tmp[--n];
	return p;
}

/* q's buckets as json_group_array(json_array(b, c)) makes them, into
 * f->buf; 0, or -1 (ENOMEM). */
static int first_buckets(struct first_src *f, const struct sp_series_query *q)
{
	size_t need = 3 + q->nb * 45; /* ",[b,c]" with 20 digits and a sign each */
	char *p;

	if (need > f->cap) {
		char *b = realloc(f->buf, need);

		if (!b)
			return -1;
		f->buf = b;
		f->cap = need;
	}
	p = f->buf;
	*p++ = '[';
	for (size_t i = 0; i < q->nb; i++) {
		if (!q->cnt[i])
			continue;
		if (p > f->buf + 1)
			*p++ = ',';
		*p++ = '[';
		p = put_int(p, (int64_t)q->lo[i]);
		*p++ = ',';
		p = put_int(p, (int64_t)q->cnt[i]);
		*p++ = ']';
	}
	*p++ = ']';
	*p = 0;
	return 0;
}

static int first_next(struct sp_rowsrc *src)
{
	struct first_src *f = (struct first_src *)src;
	struct sp_series_query *q = &f->q;
	int r, some;

	while ((r = f->next(q, f->arg)) > 0) {
		some = 0;
		for (int i = 0; i < SP_SERIES_NCOLS && !some; i++)
			some = q->sums[i] != 0;
		for (size_t i = 0; i < q->nb && !some; i++)
			some = q->cnt[i] != 0;
		if (!some)
			continue;
		if (first_buckets(f, q) < 0) {
			f->nomem = 1;
			return -1;
		}
		sp_rv_int(&src->v[0], f->start);
		sp_rv_int(&src->v[1], (int64_t)q->fp_id);
		sp_rv_text(&src->v[2], q->kind);
		for (int i = 0; i < SP_SERIES_NCOLS; i++)
			sp_rv_int(&src->v[3 + i], q->sums[i]);
		sp_rv_text(&src->v[3 + SP_SERIES_NCOLS], f->buf);
		return 1;
	}
	if (r < 0)
		f->nomem = 1;
	return r;
}

int sp_series_first(sqlite3 *db, int64_t first_ns, int64_t end_ns,
		    int (*next)(struct sp_series_query *q, void *arg), void *arg, char *err,
		    size_t errlen)
{
	struct first_src f = {
		.src = { .next = first_next, .ncol = 4 + SP_SERIES_NCOLS },
		.start = first_ns,
		.next = next,
		.arg = arg,
	};
	size_t ntiers;
	int rc = -1;

	/* the tiers are checked as for every write, though one interval
	 * has nothing to merge */
	if (!sp_series_tiers(&ntiers, err, errlen) || exec_sql(db, schema, err, errlen) < 0)
		return -1;
	if (end_ns <= first_ns)
		end_ns = first_ns + 1;
	if (add_interval(db, first_ns, end_ns) < 0)
		goto sqlerr;
	if (sp_rowsrc_insert(db, "interval_queries", &f.src) < 0) {
		if (f.nomem) {
			snprintf(err, errlen, "intervals: out of memory");
			goto out;
		}
		goto sqlerr;
	}
	if (clock_offset(db) < 0)
		goto sqlerr;
	rc = 0;
	goto out;
sqlerr:
	snprintf(err, errlen, "intervals: %s", sqlite3_errmsg(db));
out:
	free(f.buf);
	return rc;
}

int sp_series_add(sqlite3 *db, const char *prev, int64_t first_ns, int64_t end_ns, char *err,
		  size_t errlen)
{
	char sql[4096], l1[512], l2[512], l3[1024], l4[512];
	const struct sp_tier *tiers;
	sqlite3_stmt *st = NULL;
	int64_t start = first_ns;
	size_t ntiers;

	tiers = sp_series_tiers(&ntiers, err, errlen);
	if (!tiers)
		return -1;
	if (!prev && !has_table(db, "intervals"))
		return first_write(db, first_ns, end_ns, err, errlen);
	if (exec_sql(db, schema, err, errlen) < 0 || copy_prev(db, prev, err, errlen) < 0)
		return -1;
	if (sqlite3_prepare_v2(db, "SELECT MAX(end_ns) FROM intervals", -1, &st, NULL) !=
		    SQLITE_OK ||
	    sqlite3_step(st) != SQLITE_ROW)
		goto sqlerr;
	if (sqlite3_column_type(st, 0) != SQLITE_NULL)
		start = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	st = NULL;
	/* the clock stepped back (or two writes in one ns): the interval
	 * still follows the last one, and is 1 ns long */
	if (end_ns <= start)
		end_ns = start + 1;
	if (add_interval(db, start, end_ns) < 0)
		goto sqlerr;
	/* the first interval of a profile with no base (an agent's first): the
	 * totals as they are, each row made with its buckets at once */
	if (start == first_ns) {
		int fresh = first_interval(db);

		if (fresh < 0)
			goto sqlerr;
		if (fresh) {
			if (first_rows(db, start, err, errlen) < 0)
				return -1;
			goto merged;
		}
	}
	/* what the totals gained since the intervals before: a row for
	 * every query with some difference (negative ones too: a text whose
	 * fingerprint became known moves from fp_id 0 to its own) */
	{
		size_t n = 0;

		for (int i = 0; i < SP_SERIES_NCOLS; i++)
			n += (size_t)snprintf(l3 + n, sizeof(l3) - n, "%sSUM(%s) <> 0",
					      i ? " OR " : "", cols[i]);
	}
	snprintf(sql, sizeof(sql),
		 "INSERT INTO interval_queries SELECT ?1, fp_id, kind, %s, NULL FROM ("
		 " SELECT fp_id, kind, %s FROM queries"
		 " UNION ALL SELECT fp_id, kind, %s FROM temp.sp_base_q)"
		 " GROUP BY fp_id, kind HAVING %s",
		 col_list(l1, sizeof(l1), "SUM(%s)"), col_list(l2, sizeof(l2), "%s"),
		 col_list(l4, sizeof(l4), "-%s"), l3);
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		goto sqlerr;
	sqlite3_bind_int64(st, 1, start);
	if (sqlite3_step(st) != SQLITE_DONE)
		goto sqlerr;
	sqlite3_finalize(st);
	st = NULL;
	/* the histogram's difference, per bucket, as the row's buckets (a
	 * row made for a query whose only change is there) */
	if (exec_sql(db,
		     "CREATE TEMP TABLE sp_dh AS SELECT fp_id, kind, bucket_ns b, SUM(count) c FROM"
		     " (SELECT fp_id, kind, bucket_ns, count FROM histograms UNION ALL SELECT"
		     " fp_id, kind, bucket_ns, -count FROM temp.sp_base_h) GROUP BY 1, 2, 3"
		     " HAVING c <> 0;"
		     "CREATE INDEX temp.sp_dh_key ON sp_dh(fp_id, kind, b);",
		     err, errlen) < 0)
		return -1;
	if (sqlite3_prepare_v2(
		    db,
		    "INSERT OR IGNORE INTO interval_queries SELECT DISTINCT ?1, fp_id, kind,"
		    " 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, NULL FROM temp.sp_dh",
		    -1, &st, NULL) != SQLITE_OK)
		goto sqlerr;
	sqlite3_bind_int64(st, 1, start);
	if (sqlite3_step(st) != SQLITE_DONE)
		goto sqlerr;
	sqlite3_finalize(st);
	if (sqlite3_prepare_v2(
		    db,
		    "UPDATE interval_queries SET buckets = (SELECT json_group_array("
		    "json_array(b, c)) FROM (SELECT b, c FROM temp.sp_dh d WHERE"
		    " d.fp_id = interval_queries.fp_id AND d.kind = interval_queries.kind"
		    " ORDER BY b)) WHERE start_ns = ?1",
		    -1, &st, NULL) != SQLITE_OK)
		goto sqlerr;
	sqlite3_bind_int64(st, 1, start);
	if (sqlite3_step(st) != SQLITE_DONE)
		goto sqlerr;
	sqlite3_finalize(st);
	st = NULL;
	if (exec_sql(db, "DROP TABLE temp.sp_dh;", err, errlen) < 0)
		return -1;
merged:
	for (size_t i = 0; i < ntiers; i++)
		if (merge_tier(db, tiers[i].width_ns, end_ns - tiers[i].age_ns, err, errlen) < 0)
			return -1;
	if (clock_offset(db) < 0)
		goto sqlerr;
	return exec_sql(db, "DROP TABLE temp.sp_base_q; DROP TABLE temp.sp_base_h;", err, errlen);
sqlerr:
	snprintf(err, errlen, "intervals: %s", sqlite3_errmsg(db));
	sqlite3_finalize(st);
	return -1;
}

/* ---- reading ---- */

/* A signed integer at *p (spaces before it skipped), into *v. */
static int json_int(const char **p, int64_t *v)
{
	char *e;

	while (**p == ' ')
		(*p)++;
	if (!((**p >= '0' && **p <= '9') || **p == '-'))
		return -1;
	errno = 0;
	*v = strtoll(*p, &e, 10);
	if (errno || e == *p)
		return -1;
	*p = e;
	return 0;
}

static int json_char(const char **p, char c)
{
	while (**p == ' ')
		(*p)++;
	if (**p != c)
		return -1;
	(*p)++;
	return 0;
}

int sp_series_buckets(const char *t, void (*fn)(uint64_t lo, int64_t count, void *arg), void *arg)
{
	const char *p = t;
	int n = 0;

	if (!t)
		return 0;
	if (json_char(&p, '[') < 0)
		return -1;
	if (json_char(&p, ']') == 0)
		return 0;
	for (;;) {
		int64_t lo, c;

		if (json_char(&p, '[') < 0 || json_int(&p, &lo) < 0 || json_char(&p, ',') < 0 ||
		    json_int(&p, &c) < 0 || json_char(&p, ']') < 0 || lo < 0)
			return -1;
		fn((uint64_t)lo, c, arg);
		n++;
		if (json_char(&p, ']') == 0)
			return n;
		if (json_char(&p, ',') < 0)
			return -1;
	}
}

int sp_parse_duration(const char *s, int64_t *ns)
{
	static const struct {
		const char *unit;
		double ns;
	} units[] = {
		{ "", 1e9 },     { "s", 1e9 },    { "ms", 1e6 },    { "m", 60e9 },
		{ "min", 60e9 }, { "h", 3600e9 }, { "d", 86400e9 },
	};
	char *e;
	double v;

	if (!s || !*s || *s == '-' || *s == '+' || *s == ' ')
		return -1;
	errno = 0;
	v = strtod(s, &e);
	if (e == s || errno || !isfinite(v) || !(v > 0))
		return -1;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (!strcmp(e, units[i].unit)) {
			double x = v * units[i].ns;

			if (x > 3.2e18 || x < 1) /* about a hundred years; at least 1 ns */
				return -1;
			*ns = (int64_t)llround(x);
			return 0;
		}
	return -1;
}

/* Digits at *p, exactly n of them, into *v. */
static int digits(const char **p, int n, int *v)
{
	*v = 0;
	for (int i = 0; i < n; i++) {
		if ((*p)[i] < '0' || (*p)[i] > '9')
			return -1;
		*v = *v * 10 + ((*p)[i] - '0');
	}
	*p += n;
	return 0;
}

int sp_parse_time(const char *s, int64_t *ns, int *rel)
{
	struct tm tm;
	const char *p = s;
	int y, mo, d, h = 0, mi = 0, sec = 0, utc = 0, off = 0;
	int64_t frac = 0, t;

	*rel = 0;
	if (!s || !*s)
		return -1;
	if (*s == '-') {
		if (sp_parse_duration(s + 1, &t) < 0)
			return -1;
		*ns = -t;
		*rel = 1;
		return 0;
	}
	if (*s == '@') {
		/* seconds and up to 9 digits of a fraction, in integers: a
		 * double holds today's times to about 240 ns only, and an
		 * interval's end printed to the ns must read back as itself */
		int64_t sec_part = 0, scale = 100000000;

		p = s + 1;
		if (*p < '0' || *p > '9')
			return -1;
		for (; *p >= '0' && *p <= '9'; p++) {
			if (sec_part > 9200000000LL)
				return -1;
			sec_part = sec_part * 10 + (*p - '0');
		}
		if (sec_part > 9200000000LL)
			return -1;
		if (*p == '.') {
			if (*++p < '0' || *p > '9')
				return -1;
			for (; *p >= '0' && *p <= '9'; p++) {
				frac += (*p - '0') * scale;
				scale /= 10;
			}
		}
		if (*p)
			return -1;
		*ns = sec_part * 1000000000 + frac;
		return 0;
	}
	if (digits(&p, 4, &y) < 0 || *p++ != '-' || digits(&p, 2, &mo) < 0 || *p++ != '-' ||
	    digits(&p, 2, &d) < 0)
		return -1;
	if (*p == 'T' || *p == ' ') {
		p++;
		if (digits(&p, 2, &h) < 0 || *p++ != ':' || digits(&p, 2, &mi) < 0)
			return -1;
		if (*p == ':') {
			p++;
			if (digits(&p, 2, &sec) < 0)
				return -1;
			if (*p == '.' || *p == ',') {
				int64_t scale = 100000000;

				p++;
				if (*p < '0' || *p > '9')
					return -1;
				for (; *p >= '0' && *p <= '9'; p++) {
					frac += (*p - '0') * scale;
					scale /= 10;
				}
			}
		}
		if (*p == 'Z') {
			utc = 1;
			p++;
		} else if (*p == '+' || *p == '-') {
			int sign = *p++ == '-' ? -1 : 1, oh, om = 0;

			if (digits(&p, 2, &oh) < 0 || oh > 23)
				return -1;
			if (*p == ':')
				p++;
			if (*p && (digits(&p, 2, &om) < 0 || om > 59))
				return -1;
			utc = 1;
			off = sign * (oh * 3600 + om * 60);
		}
	}
	if (*p || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60 || y < 1970)
		return -1;
	memset(&tm, 0, sizeof(tm));
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = sec;
	tm.tm_isdst = -1;
	t = utc ? (int64_t)timegm(&tm) - off : (int64_t)mktime(&tm);
	if (tm.tm_mday != d && sec < 60) /* 2026-02-31 */
		return -1;
	if (t < 0 || t > 9200000000LL)
		return -1;
	*ns = t * 1000000000 + frac;
	return 0;
}

int sp_winreq_set(struct sp_winreq *r, int which, const char *arg, const char *cmd)
{
	int64_t v;
	int rel;

	if (which == 'l') {
		if (sp_parse_duration(arg, &v) < 0) {
			fprintf(stderr,
				"sqlprof %s: --last wants a duration such as 30s, 5m, 2h or 1d, not '%s'\n",
				cmd, arg);
			return -1;
		}
		r->last = arg;
		return 0;
	}
	if (sp_parse_time(arg, &v, &rel) < 0) {
		fprintf(stderr,
			"sqlprof %s: --%s wants a time: 2026-12-01T14:00:00 (local), "
			"2026-12-01T14:00:00Z (UTC), @UNIX_SECONDS or -DURATION such as -5m (before "
			"the profile's last interval), not '%s'\n",
			cmd, which == 's' ? "since" : "until", arg);
		return -1;
	}
	if (which == 's')
		r->since = arg;
	else
		r->until = arg;
	return 0;
}

int sp_window_resolve(sqlite3 *db, const struct sp_winreq *r, struct sp_window *w, char *err,
		      size_t errlen)
{
	sqlite3_stmt *st = NULL;
	int64_t v;
	int rel;

	memset(w, 0, sizeof(*w));
	if (!has_table(db, "intervals") || !has_table(db, "interval_queries")) {
		snprintf(
			err, errlen,
			"the profile has no intervals (written by a sqlprof before they were kept); "
			"--since, --until and --last need a profile written by this `sqlprof agent` "
			"or `sqlprof record`");
		return -1;
	}
	if (sqlite3_prepare_v2(db, "SELECT MIN(start_ns), MAX(end_ns) FROM intervals", -1, &st,
			       NULL) != SQLITE_OK ||
	    sqlite3_step(st) != SQLITE_ROW || sqlite3_column_type(st, 0) == SQLITE_NULL) {
		snprintf(err, errlen, "the profile has no intervals yet");
		sqlite3_finalize(st);
		return -1;
	}
	w->profile_first_ns = sqlite3_column_int64(st, 0);
	w->profile_end_ns = sqlite3_column_int64(st, 1);
	sqlite3_finalize(st);
	w->on = 1;
	w->since_ns = INT64_MIN;
	w->until_ns = INT64_MAX;
	if (r->since && sp_parse_time(r->since, &v, &rel) == 0)
		w->since_ns = rel ? w->profile_end_ns + v : v;
	if (r->until && sp_parse_time(r->until, &v, &rel) == 0)
		w->until_ns = rel ? w->profile_end_ns + v : v;
	if (r->last && sp_parse_duration(r->last, &v) == 0)
		w->since_ns = w->profile_end_ns - v;
	if (w->since_ns >= w->until_ns) {
		snprintf(err, errlen, "the window is empty: its start is not before its end");
		return -1;
	}
	if (sqlite3_prepare_v2(db,
			       "SELECT MIN(start_ns), MAX(end_ns), COUNT(*), MAX(start_ns) FROM"
			       " intervals WHERE end_ns > ?1 AND end_ns <= ?2",
			       -1, &st, NULL) != SQLITE_OK) {
		snprintf(err, errlen, "corrupt profile: %s", sqlite3_errmsg(db));
		return -1;
	}
	sqlite3_bind_int64(st, 1, w->since_ns);
	sqlite3_bind_int64(st, 2, w->until_ns);
	w->lo_start = 1;
	w->hi_start = 0;
	if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int64(st, 2) > 0) {
		w->first_ns = sqlite3_column_int64(st, 0);
		w->end_ns = sqlite3_column_int64(st, 1);
		w->n = (uint64_t)sqlite3_column_int64(st, 2);
		w->lo_start = w->first_ns;
		w->hi_start = sqlite3_column_int64(st, 3);
	}
	sqlite3_finalize(st);
	return 0;
}

const char *sp_series_iso(int64_t ns, char *buf, size_t len)
{
	time_t t = (time_t)(ns / 1000000000);
	int ms = (int)(ns % 1000000000 / 1000000);
	struct tm tm;

	if (ns < 0 || !gmtime_r(&t, &tm)) {
		snprintf(buf, len, "?");
		return buf;
	}
	snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
		 tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ms);
	return buf;
}

void sp_window_print(FILE *f, const char *label, const struct sp_window *w)
{
	char a[40], b[40], c[40], d[40];

	if (!w->n) {
		fprintf(f,
			"# %s: no interval ends between %s and %s (the profile covers %s to %s)\n",
			label,
			w->since_ns == INT64_MIN ? "the start"
						 : sp_series_iso(w->since_ns, a, sizeof(a)),
			w->until_ns == INT64_MAX ? "the end"
						 : sp_series_iso(w->until_ns, b, sizeof(b)),
			sp_series_iso(w->profile_first_ns, c, sizeof(c)),
			sp_series_iso(w->profile_end_ns, d, sizeof(d)));
		return;
	}
	fprintf(f, "# %s: %s to %s (%.3f s, %llu interval%s)\n", label,
		sp_series_iso(w->first_ns, a, sizeof(a)), sp_series_iso(w->end_ns, b, sizeof(b)),
		(double)(w->end_ns - w->first_ns) / 1e9, (unsigned long long)w->n,
		w->n == 1 ? "" : "s");
}
