/* SPDX-License-Identifier: MIT */
/*
 * rusage_preload.c - measure the collector: preloaded into `sqlprof
 * record` by scripts/bench_run.py, it appends one line at exit to the
 * file named by $BENCH_RUSAGE_FILE:
 *
 *   RUSAGE pid=PID maxrss_kb=KB utime_us=US stime_us=US exe=PATH
 *
 * CPU from getrusage(RUSAGE_SELF) and peak RSS from VmHWM in
 * /proc/self/status, i.e. the collector alone: never the command it runs
 * (whose usage the kernel folds into what wait4 and /usr/bin/time report),
 * nor the process that forked it (ru_maxrss survives execve; VmHWM does
 * not). Also used for `sqlprof report`. Its constructor removes its own path from LD_PRELOAD, so the
 * profiled command does not inherit it and runs exactly as in the other
 * configurations. The constructor runs in the loader before main, single-
 * threaded, which is what makes setenv safe there.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

__attribute__((constructor)) static void drop_self(void)
{
	Dl_info di;
	const char *lp = getenv("LD_PRELOAD");
	char *out, *tok, *save = NULL, *copy;
	size_t len;

	if (!lp || !dladdr((void *)drop_self, &di) || !di.dli_fname)
		return;
	len = strlen(lp);
	copy = strdup(lp);
	out = calloc(1, len + 1);
	if (!copy || !out)
		goto done;
	for (tok = strtok_r(copy, ": ", &save); tok; tok = strtok_r(NULL, ": ", &save)) {
		const char *base = strrchr(di.dli_fname, '/');

		if (!strcmp(tok, di.dli_fname) || (base && !strcmp(tok, base + 1)))
			continue;
		if (*out)
			strcat(out, ":");
		strcat(out, tok);
	}
	if (*out)
		setenv("LD_PRELOAD", out, 1);
	else
		unsetenv("LD_PRELOAD");
done:
	free(copy);
	free(out);
}

static long vmhwm_kb(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long kb = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmHWM: %ld kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

__attribute__((destructor)) static void report(void)
{
	const char *path = getenv("BENCH_RUSAGE_FILE");
	struct rusage ru;
	char exe[4096], line[4300];
	ssize_t n;
	int fd, len;

	if (!path || !*path || getrusage(RUSAGE_SELF, &ru) < 0)
		return;
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	exe[n > 0 ? n : 0] = 0;
	len = snprintf(line, sizeof(line),
		       "RUSAGE pid=%d maxrss_kb=%ld utime_us=%lld stime_us=%lld exe=%s\n",
		       (int)getpid(), vmhwm_kb(),
		       (long long)ru.ru_utime.tv_sec * 1000000 + ru.ru_utime.tv_usec,
		       (long long)ru.ru_stime.tv_sec * 1000000 + ru.ru_stime.tv_usec, exe);
	fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	if (fd >= 0) {
		(void)!write(fd, line, (size_t)len);
		close(fd);
	}
}
