/* SPDX-License-Identifier: MIT */
/*
 * memo_sites.c - one statement stepped from one place (query) reached
 * through four call paths of one frame layout, for t_memo_sites: top_1 or
 * top_2 (both called from one call site in main) calls mid_a or mid_b,
 * which calls query. Every path puts query's frame, and so the stack
 * pointer sqlite3_step is called with, at the same address: only the
 * return addresses above it tell the paths apart (what the preload's memo
 * of the last walk must see). The paths follow each other in runs of 1 to
 * 4 drawn from a fixed LCG, N executions in all (default 4000).
 *
 * Prints one line per path, "top_1 mid_a COUNT", and "frames same" when
 * query's frame was at one address on every path ("frames differ"
 * otherwise: the test then tests less, and says so).
 * Usage: memo_sites [N]
 */
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static volatile unsigned sink;
static uintptr_t frame0;
static int frames_differ;

static __attribute__((noinline)) void query(sqlite3_stmt *st, int v)
{
	uintptr_t f = (uintptr_t)__builtin_frame_address(0);

	if (!frame0)
		frame0 = f;
	else if (f != frame0)
		frames_differ = 1;
	sqlite3_bind_int(st, 1, v);
	while (sqlite3_step(st) == SQLITE_ROW)
		sink++;
	sqlite3_reset(st);
}

/* Same shape, other bodies (identical ones would be folded by gcc's
 * -fipa-icf into one function). */
static __attribute__((noinline)) void mid_a(sqlite3_stmt *st, int v)
{
	query(st, v + 1);
	sink += 1;
}

static __attribute__((noinline)) void mid_b(sqlite3_stmt *st, int v)
{
	query(st, v * 3);
	sink += 2;
}

static __attribute__((noinline)) void top_1(sqlite3_stmt *st, int v, int m)
{
	(m ? mid_b : mid_a)(st, v);
	sink ^= 5;
}

static __attribute__((noinline)) void top_2(sqlite3_stmt *st, int v, int m)
{
	(m ? mid_b : mid_a)(st, v);
	sink ^= 9;
}

int main(int argc, char **argv)
{
	void (*top[2])(sqlite3_stmt *, int, int) = { top_1, top_2 };
	long n = argc > 1 ? atol(argv[1]) : 4000, i = 0, count[2][2] = { { 0 } };
	uint32_t x = 12345;
	sqlite3 *db;
	sqlite3_stmt *st;

	if (sqlite3_open(":memory:", &db) != SQLITE_OK ||
	    sqlite3_prepare_v2(db, "SELECT ?1 + 1", -1, &st, NULL) != SQLITE_OK)
		return 2;
	while (i < n) {
		int t, m, run;

		x = x * 1103515245u + 12345u;
		t = (x >> 16) & 1;
		m = (x >> 17) & 1;
		run = 1 + (int)((x >> 18) & 3);
		for (; run > 0 && i < n; run--, i++) {
			top[t](st, (int)i, m); /* one call site for all paths */
			count[t][m]++;
		}
	}
	sqlite3_finalize(st);
	sqlite3_close(db);
	for (int t = 0; t < 2; t++)
		for (int m = 0; m < 2; m++)
			printf("top_%d mid_%c %ld\n", t + 1, "ab"[m], count[t][m]);
	printf("frames %s\n", frames_differ ? "differ" : "same");
	return 0;
}
