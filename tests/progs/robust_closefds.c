/* SPDX-License-Identifier: MIT */
/*
 * robust_closefds.c - a program that takes every descriptor above stderr
 * away from under the preload mid-run, for
 * tests/integration/t_robust_closefds.sh.
 *
 * usage: robust_closefds MODE N SLEEP_MS
 * Runs N executions of "SELECT ?1 AS before_close", sleeps SLEEP_MS (so a
 * periodic flush happens), then, by MODE:
 *   close_range  close_range(3, ~0U, 0)
 *   closefrom    closefrom(3)
 *   procfd       closes every fd >= 3 listed in /proc/self/fd
 *   dup2         dup2()s one end of a socketpair over every fd from 3 up
 *                to 4096 (or RLIMIT_NOFILE), so whatever the preload held is
 *                replaced by a socket of ours
 * After that it makes a socketpair of its own (in dup2 mode, the one
 * already spread over the fds), runs N executions of "SELECT ?1 AS
 * after_close", sleeps SLEEP_MS again and counts the bytes that arrived on
 * its socketpair: anything there was written by someone else (the
 * profiler). It prints "MODE before=SUM after=SUM stray=BYTES" and exits 0
 * when the counts are right and nothing stray arrived, 1 otherwise.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static long run(sqlite3 *db, const char *sql, long n)
{
	sqlite3_stmt *st;
	long sum = 0;

	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
		fprintf(stderr, "robust_closefds: prepare: %s\n", sqlite3_errmsg(db));
		exit(1);
	}
	for (long i = 0; i < n; i++) {
		sqlite3_bind_int64(st, 1, i);
		while (sqlite3_step(st) == SQLITE_ROW)
			sum += sqlite3_column_int64(st, 0);
		sqlite3_reset(st);
	}
	sqlite3_finalize(st);
	return sum;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static void close_procfd(void)
{
	int fds[4096], n = 0;
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;

	if (!d) {
		perror("robust_closefds: /proc/self/fd");
		exit(1);
	}
	while ((e = readdir(d)) && n < 4096) {
		int fd = atoi(e->d_name);

		if (e->d_name[0] != '.' && fd >= 3 && fd != dirfd(d))
			fds[n++] = fd;
	}
	closedir(d);
	for (int i = 0; i < n; i++)
		close(fds[i]);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	long n = argc > 2 ? atol(argv[2]) : 2000, ms = argc > 3 ? atol(argv[3]) : 300;
	long before, after, want = n * (n - 1) / 2;
	int sv[2] = { -1, -1 }, hi = 4096;
	struct rlimit rl;
	sqlite3 *db;
	char buf[65536];
	long stray = 0;
	ssize_t r;

	if (sqlite3_open(":memory:", &db) != SQLITE_OK) {
		fprintf(stderr, "robust_closefds: cannot open\n");
		return 1;
	}
	before = run(db, "SELECT ?1 AS before_close", n);
	sleep_ms(ms);
	fflush(stdout);
	if (!strcmp(mode, "close_range")) {
		if (close_range(3, ~0U, 0) < 0) {
			perror("robust_closefds: close_range");
			return 1;
		}
	} else if (!strcmp(mode, "closefrom")) {
		closefrom(3);
	} else if (!strcmp(mode, "procfd")) {
		close_procfd();
	} else if (!strcmp(mode, "dup2")) {
		if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0) {
			perror("robust_closefds: socketpair");
			return 1;
		}
		if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (rlim_t)hi)
			hi = (int)rl.rlim_cur;
		/* Keep the reading end out of the way, at the top. */
		if (dup2(sv[1], hi - 1) < 0) {
			perror("robust_closefds: dup2");
			return 1;
		}
		close(sv[1]);
		sv[1] = hi - 1;
		for (int fd = 3; fd < hi - 1; fd++)
			if (fd != sv[0] && dup2(sv[0], fd) < 0) {
				perror("robust_closefds: dup2");
				return 1;
			}
	} else {
		fprintf(stderr, "usage: robust_closefds close_range|closefrom|procfd|dup2 [N [SLEEP_MS]]\n");
		return 2;
	}
	if (sv[0] < 0 && socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0) {
		perror("robust_closefds: socketpair");
		return 1;
	}
	after = run(db, "SELECT ?1 AS after_close", n);
	sleep_ms(ms);
	sqlite3_close(db);
	/* What arrived on our socket that we did not write ourselves? */
	fcntl(sv[1], F_SETFL, O_NONBLOCK);
	while ((r = read(sv[1], buf, sizeof(buf))) > 0)
		stray += r;
	printf("%s before=%ld after=%ld stray=%ld\n", mode, before, after, stray);
	return before == want && after == want && stray == 0 ? 0 : 1;
}
