/* SPDX-License-Identifier: MIT */
/*
 * seg_counters.c - SQLite's statement counters (VM steps, full-scan
 * steps, sorts, automatic-index rows) under every pattern that moves the
 * preload's counter segments (stats.c): a statement prepared and
 * finalized per call, two statements of one text stepped in turns from
 * one call site (the segment changes hands at every start), executions
 * abandoned by reset, failures, a long loop of one statement, automatic
 * indexes, a statement that moves between two threads within an
 * execution, and counters the program resets (sqlite3_stmt_status with
 * its reset flag) between executions and in the middle of one. The
 * ground truth is SQLite's own: each statement's counters
 * (sqlite3_stmt_status), read just before it is finalized or reset,
 * summed per SQL text. Prints one line per text: "sql|vm|fullscan|sorts|autoindex".
 * For tests/integration/t_seg_counters.sh.
 *
 * Usage: seg_counters [kill]   kill: prints the lines, then SIGKILLs
 * itself with its statements alive (the counters of a process that died).
 */
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NTEXT 8
static const char *texts[NTEXT] = {
	"SELECT count(*) FROM t WHERE b > ?1",
	"SELECT a FROM t ORDER BY b",
	"INSERT INTO t(b) VALUES (?1)",
	"SELECT ?1 + 1",
	"SELECT count(*) FROM u AS x, u AS y WHERE x.c = y.c",
	"SELECT a FROM t ORDER BY length(b), b DESC LIMIT 5",
	"SELECT b FROM t WHERE a % 7 = ?1 ORDER BY substr(b, 3)",
	"SELECT count(*) FROM u WHERE c LIKE ?1",
};
static long long want[NTEXT][4];
static sqlite3 *db;

static void die(const char *what)
{
	fprintf(stderr, "seg_counters: %s: %s\n", what, sqlite3_errmsg(db));
	exit(1);
}

static sqlite3_stmt *prep(int i)
{
	sqlite3_stmt *st;

	if (sqlite3_prepare_v2(db, texts[i], -1, &st, NULL) != SQLITE_OK)
		die(texts[i]);
	return st;
}

/* The statement's counters so far, added to its text's. */
static void count(int i, sqlite3_stmt *st)
{
	static const int ops[4] = { SQLITE_STMTSTATUS_VM_STEP, SQLITE_STMTSTATUS_FULLSCAN_STEP,
				    SQLITE_STMTSTATUS_SORT, SQLITE_STMTSTATUS_AUTOINDEX };
	int k;

	for (k = 0; k < 4; k++)
		want[i][k] += sqlite3_stmt_status(st, ops[k], 0);
}

/* The program resets counter op of st: what it held is counted. */
static void reset_counter(int i, sqlite3_stmt *st, int op)
{
	int k = op == SQLITE_STMTSTATUS_VM_STEP ? 0 : op == SQLITE_STMTSTATUS_FULLSCAN_STEP ? 1 : op == SQLITE_STMTSTATUS_SORT ? 2 : 3;

	want[i][k] += sqlite3_stmt_status(st, op, 1);
}

static void done(int i, sqlite3_stmt *st)
{
	count(i, st);
	sqlite3_finalize(st);
}

/* One call site for every step below: statements of one text stepped
 * from here share one query record. Steps st up to n rows (n < 0: to the
 * end), then resets it. Returns the last result code. */
static __attribute__((noinline)) int run(sqlite3_stmt *st, int n)
{
	int rc;

	while ((rc = sqlite3_step(st)) == SQLITE_ROW && n != 0)
		if (n > 0)
			n--;
	sqlite3_reset(st);
	return rc;
}

static sqlite3_stmt *handed;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int turn, rounds = 100;

/* Thread B: the rest of each execution thread A began. */
static void *other(void *arg)
{
	int k;

	(void)arg;
	for (k = 0; k < rounds; k++) {
		pthread_mutex_lock(&mu);
		while (turn != 1)
			pthread_cond_wait(&cv, &mu);
		while (sqlite3_step(handed) == SQLITE_ROW)
			;
		sqlite3_reset(handed);
		turn = 0;
		pthread_cond_broadcast(&cv);
		pthread_mutex_unlock(&mu);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	sqlite3_stmt *a, *b, *ins, *one, *keep[3];
	pthread_t th;
	char v[32];
	int i, k;

	if (sqlite3_open(":memory:", &db) != SQLITE_OK)
		die("open");
	if (sqlite3_exec(db,
			 "CREATE TABLE t(a INTEGER PRIMARY KEY, b TEXT UNIQUE);"
			 "CREATE TABLE u(c TEXT);"
			 "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 300)"
			 " INSERT INTO t(b) SELECT printf('v%05d', x) FROM n;"
			 "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 200)"
			 " INSERT INTO u(c) SELECT printf('v%05d', x * 3) FROM n;",
			 NULL, NULL, NULL) != SQLITE_OK)
		die("schema");

	/* prepared and finalized per call, from one site */
	for (i = 0; i < 300; i++) {
		sqlite3_stmt *st = prep(0);

		snprintf(v, sizeof(v), "v%05d", i);
		sqlite3_bind_text(st, 1, v, -1, SQLITE_TRANSIENT);
		run(st, -1);
		done(0, st);
	}
	/* two statements of one text in turns, the first abandoned after
	 * two rows every time */
	a = prep(1);
	b = prep(1);
	for (i = 0; i < 200; i++) {
		run(a, 2);
		run(b, -1);
	}
	/* failures: every other value is already there (UNIQUE) */
	ins = prep(2);
	for (i = 0; i < 200; i++) {
		snprintf(v, sizeof(v), "w%05d", i / 2);
		sqlite3_bind_text(ins, 1, v, -1, SQLITE_TRANSIENT);
		run(ins, -1);
	}
	/* a long loop of one statement */
	one = prep(3);
	for (i = 0; i < 5000; i++) {
		sqlite3_bind_int(one, 1, i);
		run(one, -1);
	}
	/* automatic indexes (u.c has no index) */
	for (i = 0; i < 20; i++) {
		sqlite3_stmt *st = prep(4);

		run(st, -1);
		done(4, st);
	}
	/* moved between threads within each execution */
	handed = prep(5);
	if (pthread_create(&th, NULL, other, NULL) != 0)
		return 1;
	for (k = 0; k < rounds; k++) {
		pthread_mutex_lock(&mu);
		while (turn != 0)
			pthread_cond_wait(&cv, &mu);
		if (sqlite3_step(handed) != SQLITE_ROW)
			die("handoff");
		turn = 1;
		pthread_cond_broadcast(&cv);
		pthread_mutex_unlock(&mu);
	}
	pthread_join(th, NULL);
	/* three statements of one text, alive at the end (kill: at death) */
	for (k = 0; k < 3; k++)
		keep[k] = prep(6);
	for (i = 0; i < 300; i++) {
		sqlite3_bind_int(keep[i % 3], 1, i % 7);
		run(keep[i % 3], i % 5 == 0 ? 1 : -1);
	}
	{
		sqlite3_stmt *st = prep(7);

		for (i = 0; i < 50; i++) {
			sqlite3_bind_text(st, 1, i % 2 ? "v%1%" : "%9", -1, SQLITE_STATIC);
			if (i % 10 == 9) {
				/* reset in the middle of an execution */
				if (sqlite3_step(st) != SQLITE_ROW)
					die("mid-reset");
				reset_counter(7, st, SQLITE_STMTSTATUS_VM_STEP);
				run(st, -1);
			} else {
				run(st, -1);
			}
			if (i % 10 == 4) { /* and between two */
				reset_counter(7, st, SQLITE_STMTSTATUS_VM_STEP);
				reset_counter(7, st, SQLITE_STMTSTATUS_FULLSCAN_STEP);
			}
		}
		done(7, st);
	}

	count(1, a);
	count(1, b);
	count(2, ins);
	count(3, one);
	count(5, handed);
	for (k = 0; k < 3; k++)
		count(6, keep[k]);
	for (i = 0; i < NTEXT; i++)
		printf("%s|%lld|%lld|%lld|%lld\n", texts[i], want[i][0], want[i][1], want[i][2],
		       want[i][3]);
	fflush(stdout);
	if (argc > 1 && strcmp(argv[1], "kill") == 0)
		raise(SIGKILL);
	sqlite3_finalize(a);
	sqlite3_finalize(b);
	sqlite3_finalize(ins);
	sqlite3_finalize(one);
	sqlite3_finalize(handed);
	for (k = 0; k < 3; k++)
		sqlite3_finalize(keep[k]);
	sqlite3_close(db);
	return 0;
}
