/* SPDX-License-Identifier: MIT */
/*
 * ticker.c - a daemon that keeps querying, for the test of how long
 * `sqlprof record` waits for descendants after its command exits
 * (tests/integration/t_record_daemon.sh).
 *
 * usage: ticker N MS PIDFILE
 * Forks, the child starts a session of its own and forks again (the
 * classic double fork of a daemon); the grandchild points its standard
 * descriptors at /dev/null, writes its pid to PIDFILE and runs one query
 * every MS milliseconds, N times, then exits. The command itself exits 0
 * as soon as PIDFILE is written. It does not check what the profiler
 * recorded.
 */
#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	long n, ms;
	pid_t pid;
	sqlite3 *db;
	sqlite3_stmt *st;
	FILE *f;
	char tmp[4096];
	int fd;

	if (argc != 4) {
		fprintf(stderr, "usage: ticker N MS PIDFILE\n");
		return 2;
	}
	n = atol(argv[1]);
	ms = atol(argv[2]);
	pid = fork();
	if (pid < 0)
		return 1;
	if (pid > 0) {
		int status;

		/* the middle child exits once the daemon said where it is */
		waitpid(pid, &status, 0);
		return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
	}
	setsid();
	pid = fork();
	if (pid < 0)
		_exit(1);
	if (pid > 0) {
		for (int i = 0; i < 3000 && access(argv[3], F_OK) != 0; i++)
			usleep(10000);
		_exit(0);
	}
	fd = open("/dev/null", O_RDWR);
	if (fd >= 0) {
		dup2(fd, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		if (fd > 2)
			close(fd);
	}
	if (sqlite3_open(":memory:", &db) != SQLITE_OK ||
	    sqlite3_prepare_v2(db, "SELECT ?1 + 1", -1, &st, NULL) != SQLITE_OK)
		_exit(1);
	/* written under another name and renamed: PIDFILE is never seen empty */
	snprintf(tmp, sizeof(tmp), "%s.tmp", argv[3]);
	f = fopen(tmp, "w");
	if (!f)
		_exit(1);
	fprintf(f, "%d\n", (int)getpid());
	fclose(f);
	rename(tmp, argv[3]);
	for (long i = 0; i < n; i++) {
		struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };

		sqlite3_bind_int64(st, 1, i);
		sqlite3_step(st);
		sqlite3_reset(st);
		nanosleep(&ts, NULL);
	}
	sqlite3_finalize(st);
	sqlite3_close(db);
	return 0;
}
