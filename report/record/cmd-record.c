/* SPDX-License-Identifier: MIT */
/*
 * cmd-record.c - `sqlprof record`: run a command with libsqlprof.so
 * preloaded, collect the streams of it and of every descendant that keeps
 * the environment, and write a profile.
 *
 * The collector listens on an AF_UNIX SOCK_SEQPACKET socket inside a fresh
 * 0700 directory; only peers of our own uid are accepted (SO_PEERCRED).
 * Records arrive mostly in the threads' shared rings, announced over the
 * sockets: the loop reads every ring on each wakeup and wakes at least
 * every RING_POLL_MS while there are rings (collect.c does the reading).
 * It exits with the command's exit status (128+N when killed by signal N).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <dlfcn.h>
#include <sqlite3.h>
#include <sys/stat.h>

#include "cmds.h"
#include "collect.h"
#include "outfile.h"
#include "profile-write.h"
#include "serve.h"
#include "supervise.h"
#include "why.h"
#include "sp_probe.h"

struct record_opts {
	const char *output;
	const char *rate;
	const char *seed;
	const char *slow_ms;
	const char *depth;
	const char *debug_path;
	int follow;
	int quiet;
	double grace_s;
	uint64_t repeat;
	uint64_t max_events;
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: sqlprof record [OPTIONS] -- COMMAND [ARGS...]\n"
		"\n"
		"Run COMMAND with libsqlprof.so preloaded and write a profile.\n"
		"\n"
		"  -o, --output FILE    profile to write (default " SP_PROFILE_DEFAULT "); a previous\n"
		"                       profile there is kept as FILE.old, anything else is refused\n"
		"  -r, --rate R         share of executions whose stack is taken, 0..1 (default 0.01)\n"
		"      --seed N         seed the sampling for repeatable runs\n"
		"      --slow-ms MS     always take the stack of executions slower than MS (default 100)\n"
		"      --depth N        stack depth limit (default 64)\n"
		"      --no-follow      do not profile programs the command executes\n"
		"      --debug-dir DIRS extra directories for separate debug files (colon-separated)\n"
		"      --max-events N   keep at most N sampled executions for timelines (default\n"
		"                       5000000; they wait in a file, not in memory)\n"
		"      --grace S        after the command exits, wait at most S seconds (default 10)\n"
		"                       for its descendants still connected; stop sooner when they\n"
		"                       send nothing for 2 s (or S, if less)\n"
		"      --repeat N       run the command N times into one profile, keeping per-run\n"
		"                       totals for timing comparisons (sqlprof check); stops at the\n"
		"                       first run that fails\n"
		"  -q, --quiet          no live counter, no summary\n"
		"  -h, --help           this text\n"
		"\n"
		"examples:\n"
		"  sqlprof record -- ./app --import data.csv\n"
		"  sqlprof record -o run1.db --rate 1 -- python3 script.py\n");
}

static int chld_pipe[2] = { -1, -1 }; /* SIGCHLD wakes the poll loop */

static void on_sigchld(int sig)
{
	int saved = errno;

	(void)sig;
	if (chld_pipe[1] >= 0)
		(void)!write(chld_pipe[1], "", 1);
	errno = saved;
}

/*
 * A program built with -fsanitize=address checks at start-up that its
 * runtime comes first among the loaded libraries, and aborts when a
 * preload is first: libsqlprof.so defines none of the functions ASan
 * intercepts (malloc and the like), so the order does not matter to it,
 * and verify_asan_link_order=0 (added to ASAN_OPTIONS, whatever else they
 * say) lets such a program run under record. Only ASan reads it.
 */
static void asan_link_order_env(void)
{
	const char *old = getenv("ASAN_OPTIONS");
	char buf[4096];

	if (old && strstr(old, "verify_asan_link_order"))
		return; /* the user's own choice */
	if (old && *old) {
		if (snprintf(buf, sizeof(buf), "%s:verify_asan_link_order=0", old) >= (int)sizeof(buf))
			return;
		setenv("ASAN_OPTIONS", buf, 1);
	} else {
		setenv("ASAN_OPTIONS", "verify_asan_link_order=0", 1);
	}
}

static int setenv_prepend(const char *var, const char *val, char sep)
{
	const char *old = getenv(var);
	char *buf;
	int rc;

	if (!old || !*old)
		return setenv(var, val, 1);
	if (asprintf(&buf, "%s%c%s", val, sep, old) < 0)
		return -1;
	rc = setenv(var, buf, 1);
	free(buf);
	return rc;
}

/*
 * Find where this libsqlite3 keeps its statement counters (sp_probe.h) once,
 * and hand it to every process the command starts: a process whose
 * libsqlite3 is the same file (device and inode) takes it instead of
 * opening a connection of its own to probe (~470,000 instructions each).
 * Anything unusual (no such file, probe fails) sets nothing.
 */
static void status_layout_env(void)
{
	struct sp_probe_api api = {
		.open_v2 = sqlite3_open_v2, .close = sqlite3_close, .db_config = sqlite3_db_config,
		.msize = sqlite3_msize, .prepare_v2 = sqlite3_prepare_v2, .step = sqlite3_step,
		.reset = sqlite3_reset, .finalize = sqlite3_finalize,
		.stmt_status = sqlite3_stmt_status,
	};
	Dl_info info;
	struct stat st;
	char val[96];
	int off;

	if (!dladdr((void *)(uintptr_t)sqlite3_step, &info) || !info.dli_fname ||
	    stat(info.dli_fname, &st) < 0)
		return;
	off = sp_probe_counters(&api);
	if (off < 0)
		return;
	snprintf(val, sizeof(val), "%d:%llu:%llu", off, (unsigned long long)st.st_dev,
		 (unsigned long long)st.st_ino);
	setenv(SP_ENV_STATUS_LAYOUT, val, 1);
}

/* The command killed by a signal, and every process that ended without
 * exiting (no BYE: a signal or a crash), with what it was running. */
static void report_deaths(const struct sp_coll *c, int status)
{
	char *d = sp_coll_deaths(c), *line, *save = NULL;

	if (WIFSIGNALED(status))
		fprintf(stderr, "sqlprof: the command was killed by signal %d (%s)%s\n",
			WTERMSIG(status), strsignal(WTERMSIG(status)),
			WCOREDUMP(status) ? ", core dumped" : "");
	for (line = d ? strtok_r(d, "\n", &save) : NULL; line; line = strtok_r(NULL, "\n", &save)) {
		char *f[4] = { line, NULL, NULL, NULL };

		for (int k = 1; k < 4; k++) {
			f[k] = f[k - 1] ? strchr(f[k - 1], '\t') : NULL;
			if (f[k])
				*f[k]++ = 0;
		}
		if (!f[3])
			continue;
		fprintf(stderr, "sqlprof: warning: process %s (", f[0]);
		sp_term_str(stderr, f[1]);
		fprintf(stderr, ") ended without exiting (a signal or a crash)");
		if (strtoul(f[2], NULL, 10)) {
			fprintf(stderr, ", running %s execution%s of: ", f[2], strcmp(f[2], "1") ? "s" : "");
			sp_term_str(stderr, *f[3] ? f[3] : "<sql text lost>");
		}
		fprintf(stderr, "\n");
	}
	free(d);
}

/* "1 process" / "2 processes" */
static const char *procs(size_t n)
{
	return n == 1 ? "process" : "processes";
}

/* Why the profile holds less than it should, with the cause seen: what
 * the processes saw (enum sp_seen), --no-follow, the command's exit
 * status, the command's binary. */
static void explain_empty(const struct sp_coll *c, int follow, int status, const char *cmd)
{
	size_t it = 0, foreign = 0, mapped = 0, nosqlite = 0, badenv = 0, deep = 0;
	const struct sp_proc *p;
	char why[PATH_MAX + 160];

	while ((p = hmap_next(&c->procs, &it, NULL))) {
		foreign += p->foreign_libs > 0;
		deep += p->deepbind_late > 0;
		badenv += (p->seen & SP_SEEN_BAD_ENV) != 0;
		if (p->execs)
			continue;
		mapped += (p->seen & SP_SEEN_SQLITE_MAPPED) != 0;
		nosqlite += (p->seen & SP_SEEN_NO_SQLITE) && !(p->seen & SP_SEEN_SQLITE_MAPPED);
	}
	if (badenv && !sp_why_env(NULL, NULL))
		fprintf(stderr,
			"sqlprof: warning: %zu %s ignored a bad SQLPROF_* value the program set "
			"(the defaults were used)\n",
			badenv, procs(badenv));
	if (deep)
		fprintf(stderr,
			"sqlprof: warning: %zu %s loaded a library with RTLD_DEEPBIND from "
			"an object with its own search path (RUNPATH, RPATH or a later dlopen'd "
			"library): its SQLite calls bind past the profiler until the next call that "
			"reaches it (open, exec, dlopen, dlclose), and were not seen before\n",
			deep, procs(deep));
	if (foreign)
		fprintf(stderr,
			"sqlprof: warning: %zu %s called a second SQLite library, not "
			"profiled: its calls were passed through untouched (only the first SQLite "
			"a process uses is profiled)\n",
			foreign, procs(foreign));
	if (c->py_unsupported)
		fprintf(stderr,
			"sqlprof: warning: %u %s run a CPython whose frames sqlprof cannot "
			"read (%s): their queries are attributed to native frames\n",
			c->py_unsupported, procs(c->py_unsupported), c->py_version);
	if (c->py_unreadable)
		fprintf(stderr,
			"sqlprof: warning: %u Python %s could not read their interpreter's "
			"frames (process_vm_readv refused, or the frames did not check out): their "
			"queries are attributed to native frames\n",
			c->py_unreadable, procs(c->py_unreadable));
	if (mapped)
		fprintf(stderr,
			"sqlprof: warning: %zu %s loaded libsqlite3 but no call reached the "
			"profiler: the library (or the module calling it) was probably loaded with "
			"RTLD_DEEPBIND, which binds its calls past LD_PRELOAD (PHP's sqlite3 and "
			"pdo_sqlite do), or called through dlsym on its own handle\n",
			mapped, procs(mapped));
	if (c->procs.count == 0) {
		fprintf(stderr, "sqlprof: warning: no process connected: libsqlprof.so was not loaded (%s)\n",
			sp_why_not_loaded(cmd, why, sizeof(why)));
		return;
	}
	if (sp_coll_executions(c) == 0 && sp_coll_lost(c) > 0)
		fprintf(stderr,
			"sqlprof: warning: every record of %zu %s was lost (%llu): the "
			"profiler could not share its buffers with this collector (memfd_create "
			"refused, e.g. by a seccomp filter) or the collector fell behind\n",
			c->procs.count, procs(c->procs.count), (unsigned long long)sp_coll_lost(c));
	else if (sp_coll_executions(c) == 0 && !mapped) {
		const char *cause;

		if (deep)
			cause = "a library loaded with RTLD_DEEPBIND bound its SQLite calls past "
				"the profiler";
		else if (!follow)
			cause = "--no-follow: only the command itself was profiled, not the "
				"programs it ran";
		else if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
			cause = "the command exited 127: a program it tried to run was not found";
		else if (WIFEXITED(status) && WEXITSTATUS(status) == 126)
			cause = "the command exited 126: a program it tried to run could not be "
				"executed";
		else if (nosqlite == c->procs.count)
			cause = c->procs.count == 1
					? "it never loaded libsqlite3 (SQLite compiled or statically "
					  "linked into a program is invisible, and so is a program it "
					  "started without LD_PRELOAD)"
					: "none of them loaded libsqlite3 (SQLite compiled or statically "
					  "linked into a program is invisible, and so is a program "
					  "started without LD_PRELOAD)";
		else
			cause = NULL;
		fprintf(stderr, "sqlprof: warning: %zu %s ran with the profiler but no SQLite "
			"execution reached it%s%s\n",
			c->procs.count, procs(c->procs.count), cause ? ": " : "", cause ? cause : "");
	}
}

/* Processes still connected when recording stops: whatever they run
 * from now on is not collected. Say so, with (some of) their pids and
 * programs, and why we stopped waiting (why). */
static void report_stragglers(const struct sp_coll *c, const struct sp_client *cl, size_t ncl,
			      int tty, const char *why)
{
	char pids[512];
	size_t n = 0, len = 0;

	pids[0] = 0;
	for (size_t i = 0; i < ncl; i++) {
		const struct sp_proc *p = hmap_get((struct hmap *)&c->procs, &cl[i].pid, 0, NULL);
		const char *exe = p && p->exe ? p->exe : NULL, *arrow;
		size_t j;

		for (j = 0; j < i && cl[j].pid != cl[i].pid; j++)
			;
		if (j < i)
			continue; /* one process, several connections */
		/* the program it runs now: the last of "old -> new", its base name */
		while (exe && (arrow = strstr(exe, " -> ")))
			exe = arrow + 4;
		if (exe)
			exe = sp_basename(exe);
		if (n < 8 && len < sizeof(pids) - 64) {
			len += (size_t)snprintf(pids + len, sizeof(pids) - len, "%s%u%s",
						n ? ", " : "", cl[i].pid, exe ? " (" : "");
			/* the program's own name: no control bytes to the terminal */
			for (size_t k = 0; exe && exe[k] && k < 40; k++)
				pids[len++] = exe[k] > 0x20 && exe[k] < 0x7f ? exe[k] : '?';
			if (exe)
				pids[len++] = ')';
			pids[len] = 0;
		} else if (n == 8)
			len += (size_t)snprintf(pids + len, sizeof(pids) - len, ", ...");
		n++;
	}
	if (n)
		fprintf(stderr,
			"%ssqlprof: warning: %zu %s still running and connected when "
			"recording stopped, %s: pid %s; %s later queries were not collected\n",
			"", n, n == 1 ? "process" : "processes", why, pids, n == 1 ? "its" : "their");
}

/* 1 when the environment of process pid holds want (a whole "NAME=value"
 * entry, its NUL included, wl bytes); 0 otherwise (gone, a zombie, not
 * ours to read). buf/cap: a reused buffer. */
static int environ_has(long pid, const char *want, size_t wl, char **buf, size_t *cap)
{
	char path[64];
	size_t len = 0;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%ld/environ", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	for (;;) {
		if (len == *cap) {
			size_t nc = *cap ? *cap * 2 : 16384;
			char *nb = nc <= (1u << 22) ? realloc(*buf, nc) : NULL;

			if (!nb)
				break; /* 4 MiB of environment: not looked at further */
			*buf = nb;
			*cap = nc;
		}
		n = read(fd, *buf + len, *cap - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	for (const char *q = *buf; len >= wl && (q = memmem(q, len - (size_t)(q - *buf), want, wl));
	     q++)
		if (q == *buf || q[-1] == 0)
			return 1;
	return 0;
}

/* Processes the command started that still run but are not connected
 * (they have not used SQLite yet, or closed our socket): found by our
 * socket's path in their environment (/proc/PID/environ keeps the one
 * they started with). Their queries from now on are not collected: say
 * so, with (some of) their pids and names. */
static void report_unconnected(const char *sockpath, const struct sp_client *cl, size_t ncl, int tty)
{
	char want[PATH_MAX + 32], pids[512];
	char *env = NULL;
	size_t cap = 0, n = 0, len = 0, wl;
	DIR *d = opendir("/proc");
	struct dirent *e;

	if (!d)
		return;
	wl = (size_t)snprintf(want, sizeof(want), "%s=%s", SP_ENV_SOCK, sockpath) + 1;
	pids[0] = 0;
	while (wl <= sizeof(want) && (e = readdir(d))) {
		char *end, comm[64] = "", path[64];
		long pid = strtol(e->d_name, &end, 10);
		size_t i;
		ssize_t k;
		int fd;

		if (*end || pid <= 0 || pid == (long)getpid())
			continue;
		for (i = 0; i < ncl && cl[i].pid != (uint32_t)pid; i++)
			;
		if (i < ncl || !environ_has(pid, want, wl, &env, &cap))
			continue;
		snprintf(path, sizeof(path), "/proc/%ld/comm", pid);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		k = fd >= 0 ? read(fd, comm, sizeof(comm) - 1) : -1;
		if (fd >= 0)
			close(fd);
		comm[k > 0 ? k : 0] = 0;
		if (n < 8 && len < sizeof(pids) - 64) {
			len += (size_t)snprintf(pids + len, sizeof(pids) - len, "%s%ld (", n ? ", " : "",
						pid);
			for (size_t j = 0; comm[j] && comm[j] != '\n' && j < 40; j++)
				pids[len++] = comm[j] > 0x20 && comm[j] < 0x7f ? comm[j] : '?';
			pids[len++] = ')';
			pids[len] = 0;
		} else if (n == 8) {
			len += (size_t)snprintf(pids + len, sizeof(pids) - len, ", ...");
		}
		n++;
	}
	closedir(d);
	free(env);
	if (n)
		fprintf(stderr,
			"%ssqlprof: warning: %zu more %s of the command still running, not "
			"connected: pid %s; any query %s makes from now on is not collected\n",
			"", n, n == 1 ? "process" : "processes", pids, n == 1 ? "it" : "each");
}

int cmd_record(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "rate", required_argument, NULL, 'r' },
		{ "seed", required_argument, NULL, 1 },
		{ "slow-ms", required_argument, NULL, 2 },
		{ "depth", required_argument, NULL, 3 },
		{ "no-follow", no_argument, NULL, 4 },
		{ "debug-dir", required_argument, NULL, 5 },
		{ "repeat", required_argument, NULL, 6 },
		{ "max-events", required_argument, NULL, 7 },
		{ "grace", required_argument, NULL, 8 },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct record_opts o = { .output = SP_PROFILE_DEFAULT, .follow = 1, .grace_s = 10.0,
				 .repeat = 1, .max_events = 5000000 };
	FILE *spill = NULL;
	struct hmap snap = { 0 };    /* {sql_id, kind} -> cumulative {count, total_ns}; freed
					at out, also when we leave before hmap_init */
	struct sp_run_total *rt = NULL;
	size_t nrt = 0, caprt = 0;
	uint64_t run;
	char lib[PATH_MAX], dir[PATH_MAX] = "", sockpath[PATH_MAX + 8], err[PATH_MAX + 512];
	char saved[PATH_MAX + 32];
	int xp[2], xerr, wrote;
	const char *tmp;
	struct sp_srv srv = { .lfd = -1 };
	struct sp_coll c;
	int opt, status = 0, exited = 0, rc = SP_EXIT_INTERNAL, tty = 0, lerr;
	uint64_t t_start, t_exit = 0, last_data, grace_ns, idle_ns;
	const char *why = "";
	char whybuf[96];
	pid_t pid;
	double d;
	uint64_t u;
	struct sp_meta meta;
	char *cmdline = NULL;
	size_t cmdlen = 0;
	FILE *cmdf;

	sp_sup_init(); /* before anything changes a disposition */
	optind = 1;
	while ((opt = getopt_long(argc, argv, "+o:r:qh", longopts, NULL)) != -1) {
		switch (opt) {
		case 'o': o.output = optarg; break;
		case 'r':
			if (sp_parse_double(optarg, 0, 1, &d) < 0) {
				fprintf(stderr, "sqlprof record: --rate wants a number from 0 to 1, not '%s'\n", optarg);
				return SP_EXIT_USAGE;
			}
			o.rate = optarg;
			break;
		case 1:
			if (sp_parse_u64(optarg, &u) < 0 || u > LONG_MAX) {
				fprintf(stderr, "sqlprof record: --seed wants a non-negative integer\n");
				return SP_EXIT_USAGE;
			}
			o.seed = optarg;
			break;
		case 2:
			if (sp_parse_double(optarg, 0, 86400000, &d) < 0) {
				fprintf(stderr, "sqlprof record: --slow-ms wants milliseconds\n");
				return SP_EXIT_USAGE;
			}
			o.slow_ms = optarg;
			break;
		case 3:
			if (sp_parse_u64(optarg, &u) < 0 || u < 1 || u > SP_STACK_MAX) {
				fprintf(stderr, "sqlprof record: --depth wants 1 to %d\n", SP_STACK_MAX);
				return SP_EXIT_USAGE;
			}
			o.depth = optarg;
			break;
		case 4: o.follow = 0; break;
		case 5: o.debug_path = optarg; break;
		case 7:
			if (sp_parse_u64(optarg, &o.max_events) < 0 || o.max_events > 1000000000) {
				fprintf(stderr, "sqlprof record: --max-events wants 0 to 1000000000\n");
				return SP_EXIT_USAGE;
			}
			break;
		case 8:
			if (sp_parse_double(optarg, 0, 86400, &o.grace_s) < 0) {
				fprintf(stderr, "sqlprof record: --grace wants seconds, 0 to 86400\n");
				return SP_EXIT_USAGE;
			}
			break;
		case 6:
			if (sp_parse_u64(optarg, &o.repeat) < 0 || o.repeat < 1 || o.repeat > 1000) {
				fprintf(stderr, "sqlprof record: --repeat wants 1 to 1000\n");
				return SP_EXIT_USAGE;
			}
			break;
		case 'q': o.quiet = 1; break;
		case 'h': usage(stdout); return SP_EXIT_OK;
		default: sp_usage_hint("record"); return SP_EXIT_USAGE;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "sqlprof record: no command given\n");
		sp_usage_hint("record");
		return SP_EXIT_USAGE;
	}
	if (sp_srv_find_lib(lib, sizeof(lib)) < 0)
		return SP_EXIT_USAGE;
	if (sp_srv_preload_unsafe(lib)) {
		/* ld.so would split it: its errors on the program's stderr, and
		 * nothing profiled */
		fprintf(stderr,
			"sqlprof record: cannot preload %s: LD_PRELOAD splits paths at spaces and "
			"colons; install sqlprof where the path has neither, or set SQLPROF_LIB to "
			"such a path (a copy or a symbolic link)\n",
			lib);
		return SP_EXIT_USAGE;
	}
	/* Before anything runs: never over someone else's data, and not
	 * only to find out at the end that the profile cannot be written. */
	if (sp_out_check(o.output, err, sizeof(err)) < 0) {
		fprintf(stderr, "sqlprof record: %s\n", err);
		return SP_EXIT_USAGE;
	}

	if (!o.quiet) { /* once per run, here: the preload never writes to the program's stderr */
		const char *set[] = { o.rate ? "SQLPROF_RATE" : "", o.seed ? "SQLPROF_SEED" : "",
				      o.slow_ms ? "SQLPROF_SLOW_MS" : "", o.depth ? "SQLPROF_DEPTH" : "",
				      o.follow ? "" : "SQLPROF_FOLLOW", NULL };

		sp_why_env(stderr, set);
	}
	sp_coll_init(&c);
	c.diag = stderr; /* broken rings */
	if (sp_srv_init(&srv, &c, "sqlprof record") < 0)
		goto out;
	c.ns_per_tick = sp_srv_calibrate_tsc();

	tmp = getenv("TMPDIR");
	snprintf(dir, sizeof(dir), "%s/sqlprof.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(dir)) { /* mkdtemp creates it 0700 */
		fprintf(stderr, "sqlprof record: cannot create a private directory: %s\n", strerror(errno));
		goto out;
	}
	snprintf(sockpath, sizeof(sockpath), "%s/s", dir);
	if ((lerr = sp_srv_listen(&srv, sockpath, err, sizeof(err))) < 0) {
		fprintf(stderr, "sqlprof record: %s%s\n", err,
			lerr == -ENAMETOOLONG ? " (set TMPDIR)" : "");
		goto out;
	}

	/* Sampled executions wait in a file, unlinked at once: the
	 * collector's memory does not grow with them, and nothing is left
	 * behind if we are killed. */
	{
		char sp[PATH_MAX + 16];
		int sfd;

		snprintf(sp, sizeof(sp), "%s/events", dir);
		sfd = open(sp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (sfd >= 0) {
			unlink(sp);
			spill = fdopen(sfd, "w+");
			if (!spill)
				close(sfd);
		}
		if (spill)
			sp_coll_spill(&c, spill, (size_t)o.max_events);
	}

	/* The command line, for the profile. */
	cmdf = open_memstream(&cmdline, &cmdlen);
	for (int i = optind; cmdf && i < argc; i++)
		fprintf(cmdf, "%s%s", i > optind ? " " : "", argv[i]);
	if (cmdf)
		fclose(cmdf);

	hmap_init(&snap, 2 * sizeof(uint64_t), 2 * sizeof(uint64_t));
	grace_ns = (uint64_t)(o.grace_s * 1e9);
	idle_ns = grace_ns < 2000000000u ? grace_ns : 2000000000u;
	t_start = sp_srv_mono_ns();
	status_layout_env();
	for (run = 1; run <= o.repeat; run++) {
	exited = 0;
	sp_sup_exec_pipe(xp);
	sp_sup_prefork();
	pid = fork();
	if (pid < 0) {
		fprintf(stderr, "sqlprof record: fork: %s\n", strerror(errno));
		sp_sup_start(0, o.quiet, 0); /* unblocks them */
		goto out;
	}
	if (pid == 0) {
		sp_sup_child();
		setenv_prepend("LD_PRELOAD", lib, ':');
		asan_link_order_env();
		setenv(SP_ENV_SOCK, sockpath, 1);
		if (o.rate)
			setenv("SQLPROF_RATE", o.rate, 1);
		if (o.seed)
			setenv("SQLPROF_SEED", o.seed, 1);
		if (o.slow_ms)
			setenv("SQLPROF_SLOW_MS", o.slow_ms, 1);
		if (o.depth)
			setenv("SQLPROF_DEPTH", o.depth, 1);
		if (!o.follow)
			setenv("SQLPROF_FOLLOW", "0", 1);
		execvp(argv[optind], argv + optind);
		xerr = errno;
		fprintf(stderr, "sqlprof record: cannot run %s: %s\n", argv[optind], strerror(xerr));
		sp_sup_exec_failed(xp, xerr);
	}
	tty = !o.quiet && isatty(2);
	sp_sup_start(pid, o.quiet, tty);
	if (sp_sup_exec_wait(xp) && run == 1) {
		/* Nothing ran: write nothing, leave the output as it was. */
		waitpid(pid, &status, 0);
		sp_sup_exited();
		if (!o.quiet)
			fprintf(stderr, "sqlprof record: nothing ran; no profile written\n");
		rc = 127;
		goto out;
	}
	if (chld_pipe[0] < 0 && pipe2(chld_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
		chld_pipe[0] = chld_pipe[1] = -1;
	signal(SIGCHLD, on_sigchld);
	signal(SIGPIPE, SIG_IGN);
	last_data = sp_srv_mono_ns();

	for (;;) {
		uint64_t now;
		/* Keep accepting after the command exits: a descendant's
		 * connection may still wait in the listen backlog. */
		int r = sp_srv_round(&srv, chld_pipe[0], -1, exited);

		if (r < 0)
			goto out;
		if (r & SP_SRV_EXTRA) {
			char drainbuf[64];

			while (read(chld_pipe[0], drainbuf, sizeof(drainbuf)) > 0)
				;
		}
		if (r & SP_SRV_DATA)
			last_data = sp_srv_mono_ns();
		now = sp_srv_mono_ns();
		if (!exited) {
			pid_t w = waitpid(pid, &status, WNOHANG);

			if (w == pid) {
				exited = 1;
				t_exit = now;
				sp_sup_exited();
				/* One more round of accept before deciding to
				 * stop: a descendant that exited before the
				 * command may have connected after our last
				 * accept. */
				continue;
			}
		}
		/* No live counter: the command shares the terminal, and a
		 * line drawn there would land in its output or over its
		 * prompt (the summary comes after it is done). */
		/* After the command exits, wait for its descendants' streams to
		 * close, but not forever: a daemon may hold one open, and
		 * keep sending. */
		if (exited && srv.ncl == 0)
			break;
		if (exited && sp_sup_interrupted()) {
			why = "interrupted";
			break;
		}
		if (exited && now - t_exit >= grace_ns) {
			snprintf(whybuf, sizeof(whybuf), "%g s after the command exited (--grace)",
				 o.grace_s);
			why = whybuf;
			break;
		}
		if (exited && now - last_data > idle_ns && now - t_exit > idle_ns) {
			snprintf(whybuf, sizeof(whybuf), "%g s without data from them",
				 (double)idle_ns / 1e9);
			why = whybuf;
			break;
		}
	}
	if (!o.quiet) {
		report_stragglers(&c, srv.cl, srv.ncl, tty, why);
		report_unconnected(sockpath, srv.cl, srv.ncl, tty);
	}
	/* The command and its clients are done (or past the grace time):
	 * read every ring one last time and let them go. */
	sp_coll_rings_close(&c);
	sp_srv_read_bye_files(&c, dir, "sqlprof record");
	sp_coll_read_unreported(&c, dir);
	sp_coll_finish(&c);
	/* Per-run totals: what this run added to each query. */
	{
		size_t it = 0;
		const uint64_t *qk;
		struct sp_qagg *q;

		while ((q = hmap_next(&c.queries, &it, (const void **)&qk))) {
			uint64_t *prev = hmap_get(&snap, qk, 1, NULL);

			if (!prev)
				goto out;
			if (q->count == prev[0])
				continue;
			if (SP_GROW(rt, caprt, nrt + 1, 64) < 0)
				goto out;
			rt[nrt++] = (struct sp_run_total){ .run = (uint32_t)run, .sql_id = qk[0],
							   .kind = (uint32_t)qk[1],
							   .count = q->count - prev[0],
							   .total_ns = q->total_ns - prev[1] };
			prev[0] = q->count;
			prev[1] = q->total_ns;
		}
	}
	if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0) && run < o.repeat) {
		fprintf(stderr, "sqlprof record: run %llu failed; not repeating\n",
			(unsigned long long)run);
		break;
	}
	if (sp_sup_interrupted() && run < o.repeat) {
		fprintf(stderr, "sqlprof record: interrupted after run %llu; not repeating\n",
			(unsigned long long)run);
		break;
	}
	}

	memset(&meta, 0, sizeof(meta));
	meta.command = cmdline;
	meta.started = (long long)time(NULL) - (long long)((sp_srv_mono_ns() - t_start) / 1000000000u);
	meta.duration_ns = (long long)(t_exit - t_start);
	meta.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) :
			   WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1;
	meta.rate = 0.01;
	if (o.rate)
		sp_parse_double(o.rate, 0, 1, &meta.rate);
	meta.debug_path = o.debug_path;
	meta.runs = rt;
	meta.nruns = nrt;
	meta.repeat = (int)(run > o.repeat ? o.repeat : run);
	wrote = sp_out_write(o.output, &c, &meta, saved, sizeof(saved), err, sizeof(err));
	if (wrote < 0) {
		fprintf(stderr, "sqlprof record: %s; the profile could not be saved anywhere\n", err);
		rc = SP_EXIT_INTERNAL;
		goto out;
	}
	if (wrote > 0)
		fprintf(stderr, "sqlprof record: %s; the profile is saved in %s instead\n", err, saved);
	if (!o.quiet) {
		uint64_t complete, unrep = sp_coll_unreported(&c, &complete);

		explain_empty(&c, o.follow, status, argv[optind]);
		report_deaths(&c, status);
		if (c.sym_notes) {
			char *save = NULL, *line;

			for (line = strtok_r(c.sym_notes, "\n", &save); line;
			     line = strtok_r(NULL, "\n", &save)) {
				fprintf(stderr, "sqlprof: warning: ");
				sp_term_str(stderr, line);
				fprintf(stderr, "\n");
			}
		}
		if (unrep)
			fprintf(stderr,
				"sqlprof: warning: %llu %s ran SQLite but could not connect to "
				"the collector (a seccomp filter, another uid, no descriptor left): "
				"%llu left their totals in files, which are in the profile; %llu "
				"could not, and their executions are missing\n",
				(unsigned long long)unrep, procs(unrep), (unsigned long long)complete,
				(unsigned long long)(unrep - complete));
		if (c.spill_failed)
			fprintf(stderr,
				"sqlprof: warning: %llu sampled execution%s dropped from the timeline "
				"(meta.events_dropped; totals are exact): cannot write them in %s: %s\n",
				(unsigned long long)c.spill_failed, c.spill_failed == 1 ? "" : "s",
				tmp && *tmp ? tmp : "/tmp", strerror(c.spill_errno));
		if (c.events_dropped > c.spill_failed)
			fprintf(stderr,
				"sqlprof: warning: %llu sampled execution%s beyond --max-events %llu "
				"left out of the timeline (meta.events_dropped; totals are exact)\n",
				(unsigned long long)(c.events_dropped - c.spill_failed),
				c.events_dropped - c.spill_failed == 1 ? "" : "s",
				(unsigned long long)o.max_events);
		{
			size_t it = 0, used = 0;
			const struct sp_proc *p;
			uint64_t ex = sp_coll_executions(&c), lost = sp_coll_lost(&c);

			/* processes that used SQLite; exec'd helpers (pyenv's
			 * shims) connect too */
			while ((p = hmap_next(&c.procs, &it, NULL)))
				used += p->execs > 0;
			if (!used) /* then say how many ran at all */
				used = c.procs.count;
			fprintf(stderr, "sqlprof: %llu execution%s from %zu %s", (unsigned long long)ex,
				ex == 1 ? "" : "s", used, procs(used));
			if (c.procs.count > used)
				fprintf(stderr, " (and %zu that ran no SQLite)", c.procs.count - used);
			fprintf(stderr, ", %llu event%s lost; profile in %s\n", (unsigned long long)lost,
				lost == 1 ? "" : "s", wrote ? saved : o.output);
		}
	}
	rc = wrote ? SP_EXIT_INTERNAL : meta.exit_status;
out:
	signal(SIGCHLD, SIG_DFL);
	if (chld_pipe[0] >= 0) {
		close(chld_pipe[0]);
		close(chld_pipe[1]);
		chld_pipe[0] = chld_pipe[1] = -1;
	}
	if (srv.lfd >= 0)
		unlink(sockpath);
	sp_srv_close(&srv);
	if (dir[0] && !strstr(dir, "XXXXXX")) /* made by mkdtemp: also when we leave before listening */
		rmdir(dir);
	free(cmdline);
	free(rt);
	if (spill)
		fclose(spill);
	hmap_free(&snap);
	sp_coll_free(&c);
	return rc;
}
