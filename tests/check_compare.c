/* SPDX-License-Identifier: MIT */
/*
 * check_compare.c - unit tests for report/analysis/compare.c and report/analysis/doctor.c.
 *
 * Mann-Whitney U against published and independently computed values
 * (scipy's documented example: U = 17, exact p = 0.1111, asymptotic
 * p = 0.11134688653314041); plan-line parsing; .expert-style index
 * suggestions; the doctor's rules on hand-made rows; and matching two
 * sides built from small hand-written profiles (new, vanished, changed,
 * plan lost its index, per-run normalization of `record --repeat`
 * profiles, medians over several profiles).
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "compare.h"
#include "doctor.h"
#include "query.h"
#include "util.h"

/* ---- Mann-Whitney ----------------------------------------------------------- */

START_TEST(test_mw_scipy_example)
{
	/* scipy.stats.mannwhitneyu documentation example */
	const double males[] = { 19, 22, 16, 29, 24 }, females[] = { 20, 11, 17, 12 };
	double u, p = sp_mann_whitney(males, 5, females, 4, &u);

	ck_assert_double_eq_tol(u, 17, 1e-12);
	ck_assert_double_eq_tol(p, 14.0 / 126.0, 1e-12); /* exact: no ties, n < 8 */
	p = sp_mann_whitney(females, 4, males, 5, &u);
	ck_assert_double_eq_tol(u, 3, 1e-12);
	ck_assert_double_eq_tol(p, 14.0 / 126.0, 1e-12);
}
END_TEST

START_TEST(test_mw_exact_small)
{
	const double a3[] = { 1, 2, 3 }, b3[] = { 4, 5, 6 };
	const double a5[] = { 1, 2, 3, 4, 5 }, b5[] = { 6, 7, 8, 9, 10 };
	double u, p;

	/* 3 runs a side can never reach alpha = 0.05: the best is 0.1 */
	p = sp_mann_whitney(a3, 3, b3, 3, &u);
	ck_assert_double_eq_tol(u, 0, 1e-12);
	ck_assert_double_eq_tol(p, 0.1, 1e-12);
	p = sp_mann_whitney(b5, 5, a5, 5, &u);
	ck_assert_double_eq_tol(u, 25, 1e-12);
	ck_assert_double_eq_tol(p, 2.0 / 252.0, 1e-12);
	ck_assert(p < 0.05);
}
END_TEST

START_TEST(test_mw_normal_ties)
{
	/* ties: normal approximation with tie and continuity correction;
	 * reference computed independently (sum over pairs, tie term) */
	const double a[] = { 1, 2, 2, 3, 3, 3, 4, 5, 9, 10 };
	const double b[] = { 2, 3, 4, 4, 5, 6, 7, 8, 8, 11 };
	double u, p = sp_mann_whitney(a, 10, b, 10, &u);

	ck_assert_double_eq_tol(u, 31, 1e-12);
	ck_assert_double_eq_tol(p, 0.15880458231023745, 1e-9);
}
END_TEST

START_TEST(test_mw_normal_large)
{
	const double a[] = { 10.1, 10.4, 9.8, 10.0, 10.3, 10.2, 9.9, 10.5, 10.6, 9.7 };
	const double b[] = { 10.9, 11.2, 10.8, 11.5, 10.7, 11.0, 11.1, 10.45, 11.3, 11.4 };
	double u, p = sp_mann_whitney(b, 10, a, 10, &u);

	ck_assert_double_eq_tol(u, 98, 1e-12);
	ck_assert_double_eq_tol(p, 0.00032983852077799424, 1e-12);
}
END_TEST

START_TEST(test_mw_degenerate)
{
	const double a[] = { 5, 5, 5 }, b[] = { 5, 5, 5, 5 };
	double u, p;

	ck_assert_double_eq(sp_mann_whitney(a, 0, b, 4, &u), 1);
	ck_assert_double_eq(sp_mann_whitney(a, 3, b, 0, &u), 1);
	p = sp_mann_whitney(a, 3, b, 4, &u);
	ck_assert_double_eq(p, 1);
	ck_assert_double_eq_tol(u, 6, 1e-12);
}
END_TEST

START_TEST(test_median)
{
	double v[] = { 5, 1, 3 }, w[] = { 4, 1, 3, 2 };

	ck_assert_double_eq(sp_median(v, 3), 3);
	ck_assert_double_eq(sp_median(w, 4), 2.5);
	ck_assert_double_eq(sp_median(w, 0), 0);
}
END_TEST

/* ---- plans and suggestions -------------------------------------------------- */

START_TEST(test_plan_access)
{
	struct sp_plan_access a;

	ck_assert_int_eq(sp_plan_access("SCAN orders", &a), 1);
	ck_assert_str_eq(a.name, "orders");
	ck_assert(a.full_scan && !a.indexed);
	ck_assert_int_eq(sp_plan_access("SEARCH o USING INDEX ou (user_id=?)", &a), 1);
	ck_assert_str_eq(a.name, "o");
	ck_assert(!a.full_scan && a.indexed);
	ck_assert_str_eq(a.cols, "user_id=?");
	ck_assert_int_eq(sp_plan_access("SCAN orders USING COVERING INDEX ou", &a), 1);
	ck_assert(!a.full_scan && a.indexed);
	ck_assert_int_eq(sp_plan_access("SEARCH users USING INTEGER PRIMARY KEY (rowid=?)", &a), 1);
	ck_assert(a.indexed);
	ck_assert_int_eq(sp_plan_access("SEARCH t USING AUTOMATIC COVERING INDEX (b=?)", &a), 1);
	ck_assert(a.automatic && a.indexed);
	ck_assert_str_eq(a.cols, "b=?");
	ck_assert_int_eq(sp_plan_access("SCAN TABLE t1", &a), 1); /* before 3.36 */
	ck_assert_str_eq(a.name, "t1");
	ck_assert(a.full_scan);
	ck_assert_int_eq(sp_plan_access("SCAN CONSTANT ROW", &a), 0);
	ck_assert_int_eq(sp_plan_access("SCAN (subquery-1)", &a), 0);
	ck_assert_int_eq(sp_plan_access("USE TEMP B-TREE FOR ORDER BY", &a), 0);
	ck_assert_int_eq(sp_plan_access("CO-ROUTINE (subquery-1)", &a), 0);

	ck_assert(sp_plan_has("2|0|SCAN t\n5|0|USE TEMP B-TREE FOR ORDER BY\n", "USE TEMP B-TREE"));
	ck_assert(!sp_plan_has("2|0|SCAN t\n", "USE TEMP B-TREE"));
	ck_assert(!sp_plan_has(NULL, "SCAN"));
}
END_TEST

static const char *suggest(const char *fp, const char *detail)
{
	static char buf[512];
	struct sp_plan_access a;

	ck_assert_int_eq(sp_plan_access(detail, &a), 1);
	sp_doctor_suggest_index(fp, &a, buf, sizeof(buf));
	return buf;
}

START_TEST(test_suggest)
{
	ck_assert_str_eq(suggest("SELECT sum(amount) FROM orders WHERE user_id = ?", "SCAN orders"),
			 "CREATE INDEX orders_user_id ON orders(user_id);");
	ck_assert_str_eq(suggest("SELECT * FROM t WHERE a = ? AND b = ? AND c > ?", "SCAN t"),
			 "CREATE INDEX t_a_b_c ON t(a, b, c);");
	ck_assert_str_eq(suggest("SELECT * FROM t AS x WHERE x.a IN (...) AND ? = x.b", "SCAN x"),
			 "CREATE INDEX t_a_b ON t(a, b);");
	ck_assert_str_eq(suggest("SELECT * FROM t WHERE a = ? ORDER BY b DESC, c", "SCAN t"),
			 "CREATE INDEX t_a_b_c ON t(a, b, c);");
	ck_assert_str_eq(suggest("SELECT * FROM t WHERE a BETWEEN ? AND ? AND b = ?", "SCAN t"),
			 "CREATE INDEX t_b_a ON t(b, a);");
	ck_assert_str_eq(suggest("UPDATE t SET x = ? WHERE k = ?", "SCAN t"),
			 "CREATE INDEX t_k ON t(k);");
	ck_assert_str_eq(suggest("DELETE FROM main.t WHERE k = ?", "SCAN t"),
			 "CREATE INDEX t_k ON t(k);");
	/* automatic index: SQLite's own columns, join or not */
	ck_assert_str_eq(suggest("SELECT * FROM a JOIN b ON a.x = b.y",
				 "SEARCH b USING AUTOMATIC COVERING INDEX (y=?)"),
			 "CREATE INDEX b_y ON b(y);");
	/* nothing derivable: said so */
	ck_assert_str_eq(
		suggest("SELECT * FROM t WHERE a = ? OR b = ?", "SCAN t") + 0,
		"no suggestion (not a single-table query with simple WHERE/ORDER BY columns)");
	ck_assert(!strncmp(suggest("SELECT * FROM a, b WHERE a.x = b.y", "SCAN a"), "no suggestion",
			   13));
	ck_assert(!strncmp(suggest("SELECT * FROM a JOIN b ON a.x = b.y WHERE a.k = ?", "SCAN a"),
			   "no suggestion", 13));
	ck_assert(!strncmp(suggest("SELECT * FROM t WHERE a = b", "SCAN t"), "no suggestion", 13));
	ck_assert(!strncmp(suggest("SELECT * FROM t WHERE lower(a) = ?", "SCAN t"), "no suggestion",
			   13));
	ck_assert(!strncmp(suggest("SELECT count(*) FROM t", "SCAN t"), "no suggestion", 13));
	ck_assert(!strncmp(suggest("SELECT 1 FROM t WHERE a = ? UNION SELECT 2 FROM u", "SCAN t"),
			   "no suggestion", 13));
}
END_TEST

/* ---- doctor on hand-made rows ---------------------------------------------- */

static struct sp_qrow row(const char *fp, uint64_t count)
{
	struct sp_qrow r;

	memset(&r, 0, sizeof(r));
	r.fp_id = (int64_t)sp_hash_bytes(fp, strlen(fp));
	r.kind = SP_QK_STMT;
	r.fingerprint = (char *)fp;
	r.sql = (char *)fp;
	r.count = count;
	r.total_ns = count * 2000;
	r.mean_ns = 2000;
	r.prepares = 1;
	r.max_run = 1;
	return r;
}

static const struct sp_finding *finding(const struct sp_findings *fs, enum sp_rule rule,
					const char *fp)
{
	for (size_t i = 0; i < fs->n; i++)
		if (fs->f[i].rule == rule && !strcmp(fs->f[i].q->fingerprint, fp))
			return &fs->f[i];
	return NULL;
}

START_TEST(test_doctor_rules)
{
	struct sp_qrow r[7];
	struct sp_qset qs = { .rows = r, .n = 7 };
	struct sp_doctor_opts o = SP_DOCTOR_DEFAULTS;
	struct sp_findings fs;
	const struct sp_finding *f;
	sqlite3 *db;

	r[0] = row("SELECT name FROM users WHERE id = ?", 200);
	r[0].max_run = 200; /* N+1 */
	r[1] = row("SELECT x FROM t WHERE id = ?", 200);
	r[1].max_run = 9; /* below K = 10 */
	r[2] = row("INSERT INTO t(a) VALUES (?)", 5000);
	r[2].max_run = 5000; /* not a SELECT */
	r[3] = row("SELECT v FROM kv WHERE k = ?", 50);
	r[3].prepares = 50; /* re-prepared */
	r[4] = row("SELECT sum(amount) FROM orders WHERE user_id = ?", 10);
	r[4].plan = "2|0|SCAN orders\n";
	r[4].fullscan_steps = 20000; /* 2000 rows per execution */
	r[5] = row("SELECT * FROM small WHERE a = ?", 10);
	r[5].plan = "2|0|SCAN small\n";
	r[5].fullscan_steps = 500; /* small table: fine */
	r[6] = row("SELECT * FROM a JOIN b ON a.x = b.y", 3);
	r[6].plan = "3|0|SCAN a\n5|0|SEARCH b USING AUTOMATIC COVERING INDEX (y=?)\n";
	r[6].autoindex = 3000;
	r[6].rows = 3000;
	/* without a profile, no schema: an index cannot be checked, so none
	 * is suggested */
	ck_assert_int_eq(sp_doctor_find(NULL, &qs, NULL, &o, &fs), 0);
	f = finding(&fs, SP_RULE_FULLSCAN, r[4].fingerprint);
	ck_assert_ptr_nonnull(f);
	ck_assert(!strncmp(f->suggestion, "no suggestion (the schema was not recorded", 42));
	sp_findings_free(&fs);
	/* with the schema each query was planned under, the index is checked */
	ck_assert_int_eq(sqlite3_open(":memory:", &db), SQLITE_OK);
	ck_assert_int_eq(
		sqlite3_exec(db,
			     "CREATE TABLE plans(fp_id, sql_id, plan, connections, schema_id);"
			     "CREATE TABLE statements(sql_id, fp_id, sql);"
			     "CREATE TABLE schemas(schema_id INTEGER PRIMARY KEY, sql TEXT);"
			     "INSERT INTO schemas VALUES(7, 'CREATE TABLE orders(id INTEGER"
			     " PRIMARY KEY, user_id, amount);\nCREATE TABLE a(x);\n"
			     "CREATE TABLE b(y, z);\n');",
			     NULL, NULL, NULL),
		SQLITE_OK);
	for (int i = 4; i <= 6; i += 2) {
		sqlite3_stmt *st;

		ck_assert_int_eq(sqlite3_prepare_v2(db,
						    "INSERT INTO plans VALUES(?1, ?2, '', 1, 7);",
						    -1, &st, NULL),
				 SQLITE_OK);
		sqlite3_bind_int64(st, 1, r[i].fp_id);
		sqlite3_bind_int(st, 2, i);
		ck_assert_int_eq(sqlite3_step(st), SQLITE_DONE);
		sqlite3_finalize(st);
		ck_assert_int_eq(sqlite3_prepare_v2(db,
						    "INSERT INTO statements VALUES(?2, ?1, ?3);",
						    -1, &st, NULL),
				 SQLITE_OK);
		sqlite3_bind_int64(st, 1, r[i].fp_id);
		sqlite3_bind_int(st, 2, i);
		sqlite3_bind_text(st, 3, r[i].sql, -1, SQLITE_STATIC);
		ck_assert_int_eq(sqlite3_step(st), SQLITE_DONE);
		sqlite3_finalize(st);
	}
	ck_assert_int_eq(sp_doctor_find(db, &qs, NULL, &o, &fs), 0);

	f = finding(&fs, SP_RULE_NPLUS1, r[0].fingerprint);
	ck_assert_ptr_nonnull(f);
	ck_assert(strstr(f->evidence, "200 consecutive executions"));
	ck_assert_str_eq(f->site, "(no stack sample)");
	ck_assert_ptr_null(finding(&fs, SP_RULE_NPLUS1, r[1].fingerprint));
	ck_assert_ptr_null(finding(&fs, SP_RULE_NPLUS1, r[2].fingerprint));
	f = finding(&fs, SP_RULE_REPREPARE, r[3].fingerprint);
	ck_assert_ptr_nonnull(f);
	ck_assert(strstr(f->evidence, "50 prepares for 50 executions"));
	ck_assert_ptr_null(finding(&fs, SP_RULE_REPREPARE, r[0].fingerprint));
	f = finding(&fs, SP_RULE_FULLSCAN, r[4].fingerprint);
	ck_assert_ptr_nonnull(f);
	ck_assert(strstr(f->evidence, "2000 rows per execution"));
	ck_assert_str_eq(f->suggestion, "CREATE INDEX orders_user_id ON orders(user_id);");
	ck_assert_ptr_null(finding(&fs, SP_RULE_FULLSCAN, r[5].fingerprint));
	f = finding(&fs, SP_RULE_AUTOINDEX, r[6].fingerprint);
	ck_assert_ptr_nonnull(f);
	ck_assert_str_eq(f->suggestion, "CREATE INDEX b_y ON b(y);");
	ck_assert(strstr(f->evidence, "3000 rows inserted into automatic indexes"));
	ck_assert_uint_eq(fs.n, 4);
	sp_findings_free(&fs);
	sqlite3_close(db);
}
END_TEST

/* ---- matching two sides ---------------------------------------------------- */

static char tmpdir[64];

/* A minimal profile: the tables the readers use. q: rows of
 * "fingerprint|count|vm_steps|fullscan|prepares|total_ns|plan" */
static const char *mkprofile(const char *name, int runs, const char *const *q, size_t nq)
{
	static char path[256];
	sqlite3 *db;
	char *sql;
	size_t i;

	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	unlink(path);
	ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
	sql = sqlite3_mprintf(
		"PRAGMA synchronous=OFF;" /* no fsync: many profiles, a busy machine */
		"CREATE TABLE meta(key TEXT PRIMARY KEY, value);"
		"INSERT INTO meta VALUES('format', 2), ('runs', %d);"
		"CREATE TABLE processes(pid INTEGER PRIMARY KEY, ppid INTEGER, exe TEXT,"
		" executions INTEGER, lost INTEGER, untracked INTEGER, sqlite_found INTEGER,"
		" clean_exit INTEGER, messages INTEGER, bad_messages INTEGER);"
		"CREATE TABLE queries(" SP_QUERIES_COLUMNS ");"
		"CREATE TABLE histograms(fp_id INTEGER, kind TEXT, bucket_ns INTEGER, count INTEGER);"
		"CREATE TABLE plans(fp_id INTEGER, sql_id INTEGER, plan TEXT, connections INTEGER);"
		"CREATE TABLE statements(sql_id INTEGER PRIMARY KEY, fp_id INTEGER, sql TEXT,"
		" full_len INTEGER, truncated INTEGER);"
		"CREATE TABLE stack_samples(fp_id INTEGER, kind TEXT, pid INTEGER, stack_id INTEGER,"
		" samples INTEGER, total_ns INTEGER, rows INTEGER, vm_steps INTEGER,"
		" random_samples INTEGER, random_ns INTEGER);"
		"CREATE TABLE frames(pid INTEGER, stack_id INTEGER, idx INTEGER, pc INTEGER,"
		" module TEXT, function TEXT, file TEXT, line INTEGER, inlined INTEGER);"
		"CREATE TABLE runs(fp_id INTEGER, kind TEXT, min_len INTEGER, max_len INTEGER,"
		" count INTEGER);"
		"CREATE TABLE run_totals(run INTEGER, fp_id INTEGER, kind TEXT, count INTEGER,"
		" total_ns INTEGER);"
		"INSERT INTO frames VALUES(1, 7, 0, 4096, '/bin/app', 'handler', 'app.c', 42, 0);",
		runs);
	ck_assert_int_eq(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
	sqlite3_free(sql);
	for (i = 0; i < nq; i++) {
		char fp[256], plan[256];
		long long count, vm, fs, prep, ns;
		int n = sscanf(q[i], "%255[^|]|%lld|%lld|%lld|%lld|%lld|%255[^\n]", fp, &count, &vm,
			       &fs, &prep, &ns, plan);
		long long id = (long long)sp_hash_bytes(fp, strlen(fp));

		ck_assert_int_ge(n, 6);
		sql = sqlite3_mprintf(
			"INSERT INTO queries(" SP_QUERIES_SELECT ") VALUES(%lld, 'stmt', %Q, %Q,"
			" %lld, %lld, %lld,"
			" %lld, %lld, %lld, 0, %lld, %lld, 0, 0, 0, 0, 1, %lld, 0, 1, 1);"
			"INSERT INTO stack_samples VALUES(%lld, 'stmt', 1, 7, 1, %lld, 0, %lld, 1, %lld);",
			id, fp, fp, count, ns, ns, ns, ns / (count ? count : 1),
			ns / (count ? count : 1), vm, fs, prep, id, ns, vm, ns);
		ck_assert_int_eq(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
		sqlite3_free(sql);
		if (n == 7) {
			char *p = plan;

			for (; *p; p++)
				if (*p == ';')
					*p = '\n';
			sql = sqlite3_mprintf("INSERT INTO plans VALUES(%lld, 1, %Q, 1)", id, plan);
			ck_assert_int_eq(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
			sqlite3_free(sql);
		}
	}
	sqlite3_close(db);
	return path;
}

static void load(struct sp_side *s, const char *const *paths, size_t n)
{
	char err[512];
	int inerr;

	ck_assert_msg(sp_side_load(s, paths, n, NULL, err, sizeof(err), &inerr) == 0, "%s", err);
}

static const struct sp_qdiff *qd(const struct sp_diff *d, const char *fp)
{
	for (size_t i = 0; i < d->nq; i++) {
		const struct sp_qrow *r = d->q[i].cand ? d->q[i].cand : d->q[i].base;

		if (!strcmp(r->fingerprint, fp))
			return &d->q[i];
	}
	return NULL;
}

START_TEST(test_match)
{
	static const char *const base_q[] = {
		"SELECT a FROM t WHERE k = ?|10|100|0|1|10000|2|0|SEARCH t USING INDEX tk (k=?);",
		"SELECT b FROM u|5|50|25|1|5000",
		"DELETE FROM old|1|10|0|1|1000",
	};
	static const char *const cand_q[] = {
		"SELECT a FROM t WHERE k = ?|10|4000|3990|1|90000|2|0|SCAN t;",
		"SELECT b FROM u|5|50|25|1|5100",
		"SELECT c FROM v|1|20|0|1|1000",
	};
	char bp[256], cp[256];
	const char *b[1] = { bp }, *c[1] = { cp };
	struct sp_side base, cand;
	struct sp_diff d;
	const struct sp_qdiff *q;

	snprintf(bp, sizeof(bp), "%s", mkprofile("base.db", 1, base_q, 3));
	snprintf(cp, sizeof(cp), "%s", mkprofile("cand.db", 1, cand_q, 3));
	load(&base, b, 1);
	load(&cand, c, 1);
	ck_assert_int_eq(sp_diff_build(&base, &cand, &d), 0);
	ck_assert_uint_eq(d.nq, 4);
	ck_assert_uint_eq(d.n_new, 1);
	ck_assert_uint_eq(d.n_vanished, 1);
	ck_assert_uint_eq(d.n_changed, 1);
	ck_assert_uint_eq(d.n_plan, 1);
	ck_assert_uint_eq(d.n_same, 1);

	q = qd(&d, "SELECT a FROM t WHERE k = ?");
	ck_assert_ptr_nonnull(q);
	ck_assert(q->flags & SP_QD_PLAN_WORSE);
	ck_assert(q->flags & SP_QD_NEW_FULLSCAN);
	ck_assert_str_eq(q->plan_note, "SEARCH t USING INDEX tk (k=?) -> SCAN t");
	ck_assert_uint_eq(q->m[0][SP_M_VM_STEPS], 100);
	ck_assert_uint_eq(q->m[1][SP_M_VM_STEPS], 4000);
	ck_assert_ptr_eq(q, &d.q[0]); /* the plan regression sorts first */
	ck_assert(!q->time_tested);   /* one run a side */

	q = qd(&d, "SELECT b FROM u");
	ck_assert_uint_eq(q->flags, 0); /* time changed, nothing deterministic */
	ck_assert(qd(&d, "SELECT c FROM v")->flags & SP_QD_NEW);
	ck_assert(qd(&d, "DELETE FROM old")->flags & SP_QD_VANISHED);

	/* per site: handler (app.c:42) issues all of them */
	ck_assert_uint_ge(d.ns, 4);
	ck_assert_str_eq(d.s[0].display, "handler (app.c:42)");
	ck_assert_str_eq(d.s[0].fingerprint, "SELECT a FROM t WHERE k = ?");
	ck_assert_double_eq_tol(d.s[0].vm_steps[0], 100, 1e-9);
	ck_assert_double_eq_tol(d.s[0].vm_steps[1], 4000, 1e-9);
	sp_diff_free(&d);
	sp_side_free(&base);
	sp_side_free(&cand);
}
END_TEST

START_TEST(test_match_runs)
{
	/* one profile of 3 runs (totals x3) against three single-run profiles */
	static const char *const r3[] = { "SELECT a FROM t|30|300|0|3|30000" };
	static const char *const r1a[] = { "SELECT a FROM t|10|100|0|1|9000" };
	static const char *const r1b[] = { "SELECT a FROM t|10|100|0|1|11000" };
	static const char *const r1c[] = { "SELECT a FROM t|12|120|0|1|10000" };
	char p[4][256];
	const char *b[1] = { p[0] }, *c[3] = { p[1], p[2], p[3] };
	struct sp_side base, cand;
	struct sp_diff d;
	double t[8];

	snprintf(p[0], sizeof(p[0]), "%s", mkprofile("r3.db", 3, r3, 1));
	snprintf(p[1], sizeof(p[1]), "%s", mkprofile("r1a.db", 1, r1a, 1));
	snprintf(p[2], sizeof(p[2]), "%s", mkprofile("r1b.db", 1, r1b, 1));
	snprintf(p[3], sizeof(p[3]), "%s", mkprofile("r1c.db", 1, r1c, 1));
	load(&base, b, 1);
	load(&cand, c, 3);
	ck_assert_uint_eq(base.total_repeats, 3);
	ck_assert_uint_eq(cand.total_repeats, 3);
	ck_assert_uint_eq(base.agg.rows[0].count, 10); /* 30 / 3 runs */
	ck_assert_uint_eq(base.agg.rows[0].vm_steps, 100);
	ck_assert_uint_eq(cand.agg.rows[0].count, 10); /* median of 10, 10, 12 */
	ck_assert_uint_eq(cand.agg.rows[0].vm_steps, 100);
	/* time samples: one per profile without run_totals */
	ck_assert_uint_eq(sp_side_time_samples(&cand, cand.agg.rows[0].fp_id, SP_QK_STMT, t, 8), 3);
	ck_assert_int_eq(sp_diff_build(&base, &cand, &d), 0);
	ck_assert_uint_eq(d.nq, 1);
	ck_assert_uint_eq(d.differences, 0);
	ck_assert_uint_eq(d.n_same, 1);
	sp_diff_free(&d);
	sp_side_free(&base);
	sp_side_free(&cand);
}
END_TEST

/* Rewrite path's queries in key order (ORDER BY fp_id, kind; how
 * profiles are written), in the reverse, or with the first row again as
 * a second row of its key (kind 'STMT': a statement, as "stmt"). */
static void reorder(const char *path, const char *how)
{
	sqlite3 *db;
	char *sql;

	ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
	sql = sqlite3_mprintf(
		"PRAGMA synchronous=OFF;"
		"CREATE TABLE s2 AS SELECT * FROM stack_samples; DELETE FROM stack_samples;"
		"INSERT INTO stack_samples SELECT * FROM s2 ORDER BY fp_id %s; DROP TABLE s2;"
		"CREATE TABLE q2 AS SELECT * FROM queries; DELETE FROM queries;"
		"INSERT INTO queries SELECT * FROM q2 %s; DROP TABLE q2;",
		strcmp(how, "desc") ? "" : "DESC",
		!strcmp(how, "asc") ? "ORDER BY fp_id, kind"
		: !strcmp(how, "desc")
			? "ORDER BY fp_id DESC, kind DESC"
			: "ORDER BY fp_id, kind; INSERT INTO queries SELECT fp_id,"
			  " 'STMT', fingerprint, sql, count * 7, total_ns, self_ns,"
			  " wall_ns, min_ns, max_ns, rows, vm_steps * 7,"
			  " fullscan_steps, sorts, autoindex, errors, nested, samples,"
			  " prepares, prepare_ns, runs, max_run FROM queries"
			  " ORDER BY fp_id LIMIT 1");
	ck_assert_int_eq(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
	sqlite3_free(sql);
	sqlite3_close(db);
}

/* base: queries 0..39, candidate 20..59 (24..27 with more VM steps), or
 * none (empty) */
static void mkside(struct sp_side *s, int cand, int empty, const char *how)
{
	static char rows[40][128];
	const char *q[40], *p[1];
	char name[64];

	for (int i = 0; i < 40; i++) {
		int k = i + (cand ? 20 : 0);

		snprintf(rows[i], sizeof(rows[i]), "SELECT x FROM t%d|%d|%d|0|1|%d", k, 10 + k,
			 100 + k + (cand && k >= 24 && k < 28 ? 50 : 0), 1000 * (k + 1));
		q[i] = rows[i];
	}
	snprintf(name, sizeof(name), "walk-%d-%d-%s.db", cand, empty, how);
	p[0] = mkprofile(name, 1, q, empty ? 0 : 40);
	reorder(p[0], how);
	load(s, p, 1);
}

/* The diff of a base and a candidate in order how (each side). */
static void walk_diff(const char *bhow, const char *chow, int bempty, int cempty, struct sp_side *b,
		      struct sp_side *c, struct sp_diff *d)
{
	mkside(b, 0, bempty, bhow);
	mkside(c, 1, cempty, chow);
	ck_assert_int_eq(sp_diff_build(b, c, d), 0);
}

/* a and b the same diff (its sites too when sites) */
static void walk_same(const struct sp_diff *a, const struct sp_diff *b, int sites)
{
	ck_assert_uint_eq(a->nq, b->nq);
	ck_assert_uint_eq(a->ns, b->ns);
	ck_assert_uint_eq(a->differences, b->differences);
	for (size_t i = 0; i < a->nq; i++) {
		ck_assert_int_eq(a->q[i].fp_id, b->q[i].fp_id);
		ck_assert_uint_eq(a->q[i].flags, b->q[i].flags);
		ck_assert_uint_eq(a->q[i].m[0][SP_M_VM_STEPS], b->q[i].m[0][SP_M_VM_STEPS]);
		ck_assert_uint_eq(a->q[i].m[1][SP_M_VM_STEPS], b->q[i].m[1][SP_M_VM_STEPS]);
		ck_assert_int_eq(!a->q[i].base, !b->q[i].base);
		ck_assert_int_eq(!a->q[i].cand, !b->q[i].cand);
	}
	for (size_t i = 0; sites && i < a->ns; i++) { /* ties in impact: in either order */
		size_t j;

		for (j = 0; j < b->ns && b->s[j].fp_id != a->s[i].fp_id; j++)
			;
		ck_assert_uint_lt(j, b->ns);
		ck_assert_str_eq(a->s[i].display, b->s[j].display);
		ck_assert_str_eq(a->s[i].fingerprint, b->s[j].fingerprint);
		ck_assert_double_eq(a->s[i].vm_steps[0], b->s[j].vm_steps[0]);
		ck_assert_double_eq(a->s[i].vm_steps[1], b->s[j].vm_steps[1]);
		ck_assert_double_eq(a->s[i].count[1], b->s[j].count[1]);
	}
}

static void walk_free(struct sp_side *b, struct sp_side *c, struct sp_diff *d)
{
	sp_diff_free(d);
	sp_side_free(b);
	sp_side_free(c);
}

START_TEST(test_match_walk)
{
	/* sides in key order are matched by a walk, others through a map:
	 * the same diff, whatever the order */
	struct sp_side b[3], c[3];
	struct sp_diff d[3];

	walk_diff("asc", "asc", 0, 0, &b[0], &c[0], &d[0]);
	ck_assert_uint_eq(d[0].nq, 60);
	ck_assert_uint_eq(d[0].n_vanished, 20);
	ck_assert_uint_eq(d[0].n_new, 20);
	ck_assert_uint_eq(d[0].n_changed, 4); /* 24..27: VM steps */
	ck_assert_uint_eq(d[0].ns, 60);
	ck_assert(b[0].agg_shared && !b[0].agg_idx.cap); /* sorted: no index */
	walk_diff("desc", "asc", 0, 0, &b[1], &c[1], &d[1]);
	ck_assert(b[1].agg_idx.cap); /* not sorted: an index */
	walk_same(&d[0], &d[1], 1);
	walk_diff("asc", "desc", 0, 0, &b[2], &c[2], &d[2]);
	walk_same(&d[0], &d[2], 1);
	for (int i = 0; i < 3; i++)
		walk_free(&b[i], &c[i], &d[i]);

	/* empty sides */
	walk_diff("asc", "asc", 1, 0, &b[0], &c[0], &d[0]);
	ck_assert_uint_eq(d[0].nq, 40);
	ck_assert_uint_eq(d[0].n_new, 40);
	walk_diff("asc", "asc", 0, 1, &b[1], &c[1], &d[1]);
	ck_assert_uint_eq(d[1].nq, 40);
	ck_assert_uint_eq(d[1].n_vanished, 40);
	walk_diff("asc", "asc", 1, 1, &b[2], &c[2], &d[2]);
	ck_assert_uint_eq(d[2].nq, 0);
	for (int i = 0; i < 3; i++)
		walk_free(&b[i], &c[i], &d[i]);

	/* a key twice (hostile): its first row is the query, on either side */
	walk_diff("dup", "dup", 0, 0, &b[0], &c[0], &d[0]);
	walk_diff("asc", "asc", 0, 0, &b[1], &c[1], &d[1]);
	walk_same(&d[0], &d[1], 0); /* sites: the later row's estimates */
	ck_assert_uint_eq(b[0].agg.n, 40);
	for (int i = 0; i < 2; i++)
		walk_free(&b[i], &c[i], &d[i]);
}
END_TEST

START_TEST(test_load_errors)
{
	const char *missing[1] = { "/nonexistent/sqlprof.db" };
	struct sp_side s;
	char err[512];
	int inerr = 0;

	ck_assert_int_eq(sp_side_load(&s, missing, 1, NULL, err, sizeof(err), &inerr), -1);
	ck_assert_int_eq(inerr, 1);
	ck_assert(strstr(err, "/nonexistent/sqlprof.db"));
}
END_TEST

static Suite *compare_suite(void)
{
	Suite *s = suite_create("compare");
	TCase *tc;

	tc = tcase_create("mann_whitney");
	tcase_add_test(tc, test_mw_scipy_example);
	tcase_add_test(tc, test_mw_exact_small);
	tcase_add_test(tc, test_mw_normal_ties);
	tcase_add_test(tc, test_mw_normal_large);
	tcase_add_test(tc, test_mw_degenerate);
	tcase_add_test(tc, test_median);
	suite_add_tcase(s, tc);
	tc = tcase_create("plans");
	tcase_add_test(tc, test_plan_access);
	tcase_add_test(tc, test_suggest);
	suite_add_tcase(s, tc);
	tc = tcase_create("doctor");
	tcase_add_test(tc, test_doctor_rules);
	suite_add_tcase(s, tc);
	tc = tcase_create("matching");
	tcase_add_test(tc, test_match);
	tcase_add_test(tc, test_match_runs);
	tcase_add_test(tc, test_match_walk);
	tcase_set_timeout(tc, 120); /* 18 profiles written on a loaded machine */
	tcase_add_test(tc, test_load_errors);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(compare_suite());
	int failed;

	snprintf(tmpdir, sizeof(tmpdir), "%s", "/tmp/check_compare.XXXXXX");
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 1;
	}
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	{
		char cmd[128];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
		if (system(cmd) != 0)
			fprintf(stderr, "check_compare: could not remove %s\n", tmpdir);
	}
	return failed ? 1 : 0;
}
