/* SPDX-License-Identifier: MIT */
/*
 * manyfp.c - N distinct query fingerprints, 3 executions each from two call
 * sites: the scale workload of issue 12 (what an ORM or generated SQL
 * gives the profile: many queries, few executions each).
 *
 * Fingerprint i is "SELECT ?1 + <lit> AS c<i>" (the alias makes it
 * distinct, the literal does not). site_a() runs the text with literal 1
 * twice, site_b() the text with literal 2 once; both are first executions
 * of their SQL text, so both sites have a stack at any --rate.
 * Usage: manyfp [N]   (default 20000); prints the sum of the results.
 */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>

/* A macro, not a function: each site's own frame (and line) issues its
 * queries, so the two sites are two functions in the profile. */
#define RUN(db, sql, times, sum)                                                   \
	do {                                                                       \
		sqlite3_stmt *st_;                                                 \
		if (sqlite3_prepare_v2(db, sql, -1, &st_, NULL) != SQLITE_OK) {    \
			fprintf(stderr, "manyfp: %s\n", sqlite3_errmsg(db));      \
			exit(1);                                                   \
		}                                                                  \
		for (int k_ = 0; k_ < (times); k_++) {                             \
			sqlite3_bind_int64(st_, 1, k_);                            \
			while (sqlite3_step(st_) == SQLITE_ROW)                    \
				sum += sqlite3_column_int64(st_, 0);               \
			sqlite3_reset(st_);                                        \
		}                                                                  \
		sqlite3_finalize(st_);                                             \
	} while (0)

__attribute__((noinline)) static long site_a(sqlite3 *db, long i)
{
	char sql[64];

	long sum = 0;

	snprintf(sql, sizeof(sql), "SELECT ?1 + 1 AS c%ld", i);
	RUN(db, sql, 2, sum);
	return sum;
}

__attribute__((noinline)) static long site_b(sqlite3 *db, long i)
{
	char sql[64];

	long sum = 0;

	snprintf(sql, sizeof(sql), "SELECT ?1 + 2 AS c%ld", i);
	RUN(db, sql, 1, sum);
	return sum;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 20000, i, sum = 0;
	sqlite3 *db;

	if (sqlite3_open(":memory:", &db) != SQLITE_OK) {
		fprintf(stderr, "manyfp: cannot open\n");
		return 1;
	}
	for (i = 0; i < n; i++) {
		sum += site_a(db, i);
		sum += site_b(db, i);
	}
	sqlite3_close(db);
	printf("%ld\n", sum);
	return 0;
}
