/* SPDX-License-Identifier: MIT */
/*
 * after_bye.c - queries that run after the profiler's goodbye (BYE), for
 * tests/integration/t_robust_after_bye.sh.
 *
 * usage: after_bye failexec N
 *          runs 10 queries, fails to exec a program that does not exist
 *          (the exec wrapper says BYE first), then runs N queries.
 *        after_bye thread COUNTFILE
 *          a worker thread runs queries and counts each finished one in
 *          COUNTFILE (a shared 8-byte counter); main writes 1 MiB into a
 *          full stdout buffer and calls exit(0): our destructor says BYE,
 *          then exit flushes stdout - slowly, if the reader is slow - while
 *          the worker goes on until the process is gone.
 * Prints nothing else; exits 0.
 */
#include <fcntl.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static _Atomic long *counter;

static void run(sqlite3 *db, const char *sql, long n)
{
	sqlite3_stmt *st;
	long i;

	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
		fprintf(stderr, "after_bye: %s\n", sqlite3_errmsg(db));
		exit(1);
	}
	for (i = 0; i < n; i++) {
		sqlite3_bind_int64(st, 1, i);
		while (sqlite3_step(st) == SQLITE_ROW)
			;
		sqlite3_reset(st);
	}
	sqlite3_finalize(st);
}

static void *worker(void *arg)
{
	sqlite3 *db;
	sqlite3_stmt *st;

	(void)arg;
	sqlite3_open(":memory:", &db);
	sqlite3_prepare_v2(db, "SELECT ? AS worker_q", -1, &st, NULL);
	for (long i = 0;; i++) {
		sqlite3_bind_int64(st, 1, i);
		while (sqlite3_step(st) == SQLITE_ROW)
			;
		sqlite3_reset(st);
		atomic_fetch_add(counter, 1);
		usleep(50);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	sqlite3 *db;

	if (argc < 3) {
		fprintf(stderr, "usage: after_bye failexec N | thread COUNTFILE\n");
		return 2;
	}
	if (!strcmp(argv[1], "failexec")) {
		char *args[] = { "/nonexistent/after_bye", NULL };

		sqlite3_open(":memory:", &db);
		run(db, "SELECT ? AS before_exec", 10);
		execvp(args[0], args); /* fails */
		run(db, "SELECT ? AS after_exec", atol(argv[2]));
		sqlite3_close(db);
		return 0;
	}
	if (!strcmp(argv[1], "thread")) {
		static char buf[2 << 20], big[1 << 20];
		int fd = open(argv[2], O_RDWR | O_CREAT | O_TRUNC, 0600);
		pthread_t t;

		if (fd < 0 || ftruncate(fd, 4096) != 0)
			return 1;
		counter = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (counter == MAP_FAILED)
			return 1;
		setvbuf(stdout, buf, _IOFBF, sizeof(buf));
		memset(big, 'x', sizeof(big));
		fwrite(big, 1, sizeof(big), stdout); /* flushed by exit(), after destructors */
		pthread_create(&t, NULL, worker, NULL);
		usleep(20000);
		exit(0);
	}
	return 2;
}
