/* SPDX-License-Identifier: MIT */
/*
 * exact_crash.c - runs N executions of "SELECT ?1" (default 1000), then
 * ends badly: "segv" dereferences a null pointer, "wait" creates the file
 * READY and sleeps until killed (a test sends SIGKILL), "abort" calls
 * abort(). For tests/integration/t_exact_crash.sh: every execution ended
 * before the crash is in the profile, exactly.
 *
 * usage: exact_crash segv|wait|abort N [READY]
 */
#include <signal.h>
#include <stdint.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	long n = argc > 2 ? atol(argv[2]) : 1000, i;
	sqlite3 *db;
	sqlite3_stmt *st;

	if (argc < 2 || sqlite3_open(":memory:", &db) != SQLITE_OK ||
	    sqlite3_prepare_v2(db, "SELECT ?1 AS exact_crash", -1, &st, NULL) != SQLITE_OK)
		return 2;
	for (i = 0; i < n; i++) {
		sqlite3_bind_int64(st, 1, i);
		while (sqlite3_step(st) == SQLITE_ROW)
			;
		sqlite3_reset(st);
	}
	/* one more, in progress when the process dies: not counted */
	sqlite3_step(st);
	fflush(stdout);
	if (!strcmp(argv[1], "segv")) {
		/* a store to an unmapped page that is not NULL: UBSan's null
		 * check does not stop the program first (make check
		 * SANITIZE=undefined), and under ASan the test sets
		 * handle_segv=0, so the process dies of the fault itself */
		volatile int *p = (volatile int *)(uintptr_t)16;

		signal(SIGSEGV, SIG_DFL);
		*p = 1;
		return 9;
	}
	if (!strcmp(argv[1], "abort"))
		abort();
	if (argc > 3) {
		FILE *f = fopen(argv[3], "w");

		if (f)
			fclose(f);
	}
	for (;;)
		pause();
}
