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
#include <sys/resource.h>
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
#include "series.h"
#include "serve.h"
#include "supervise.h"
#include "timeline.h"
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
		"  -o, --output FILE    profile to write (default " SP_PROFILE_DEFAULT
		"); a previous\n"
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
		if (snprintf(buf, sizeof(buf), "%s:verify_asan_link_order=0", old) >=
		    (int)sizeof(buf))
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
 * Find where this libsqlite3 keeps its statement counters and its
 * statements' bound values (sp_probe.h) once, and hand them to every
 * process the command starts: a process whose libsqlite3 is the same file
 * (device and inode) takes them instead of opening a connection of its
 * own to probe (~470,000 instructions each). Anything unusual (no such
 * file, a probe fails) sets nothing for it.
 */
/* The layouts, worked out on a thread of their own while the collector
 * opens (1.4 ms of a one-query record's start were this probe); set in
 * the environment by layout_env, before the first fork. */
struct layout_job {
	pthread_t th;
	int started;
	char status[160], params[160]; /* "" when not found */
};

static void *layout_probe(void *arg)
{
	struct layout_job *j = arg;
	struct sp_probe_api api = SP_PROBE_API_LINKED;
	struct sp_params_layout params;
	Dl_info info;
	struct stat st;
	sqlite3 *db;
	int off;

	j->status[0] = j->params[0] = 0;
	if (!dladdr((void *)(uintptr_t)sqlite3_step, &info) || !info.dli_fname ||
	    stat(info.dli_fname, &st) < 0)
		return NULL;
	db = sp_probe_open(&api);
	off = sp_probe_counters_db(&api, db);
	if (sp_probe_params_db(&api, db, &params) == 0)
		sp_params_layout_format(j->params, sizeof(j->params), &params,
					(unsigned long long)st.st_dev,
					(unsigned long long)st.st_ino);
	if (db)
		sqlite3_close(db);
	if (off >= 0)
		snprintf(j->status, sizeof(j->status), "%d:%llu:%llu", off,
			 (unsigned long long)st.st_dev, (unsigned long long)st.st_ino);
	return NULL;
}

static void layout_start(struct layout_job *j)
{
	j->started = pthread_create(&j->th, NULL, layout_probe, j) == 0;
}

/* The probe's answers into the environment (here: setenv is not safe
 * beside another thread's getenv). */
static void layout_env(struct layout_job *j)
{
	if (j->started)
		pthread_join(j->th, NULL);
	else
		layout_probe(j);
	j->started = 0;
	if (j->params[0])
		setenv(SP_ENV_PARAMS_LAYOUT, j->params, 1);
	if (j->status[0])
		setenv(SP_ENV_STATUS_LAYOUT, j->status, 1);
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
			fprintf(stderr, ", running %s execution%s of: ", f[2],
				strcmp(f[2], "1") ? "s" : "");
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

/* SQLite compiled into a program or module (preload/embed.c): one
 * warning per object and cause where its executions are not (all) seen,
 * naming the file. Returns the number of objects profiled not at all. */
static size_t explain_embedded(const struct sp_coll *c)
{
	static const struct {
		unsigned bit;
		const char *why;
	} causes[] = {
		{ SP_MODULE_EMBED_STRIPPED,
		  "has SQLite compiled in and no symbol table (stripped): its SQLite cannot be "
		  "found to hook, and its executions were not seen (build it with symbols, or "
		  "link the system libsqlite3)" },
		{ SP_MODULE_EMBED_CONFIG,
		  "has SQLite compiled in and calls sqlite3_config itself: hooking it would "
		  "initialize SQLite first and make that call fail, so it was left alone and its "
		  "executions were not seen" },
		{ SP_MODULE_EMBED_NOTRACE,
		  "has SQLite compiled in without trace hooks (SQLITE_OMIT_TRACE, or no "
		  "sqlite3_trace_v2 / sqlite3_stmt_status symbol): its executions were not seen" },
		{ SP_MODULE_EMBED_LATE,
		  "has SQLite compiled in and was found only after SQLite was in use (loaded with "
		  "dlopen): connections it opened before that were not seen" },
		{ SP_MODULE_EMBED_OWNTRACE,
		  "has SQLite compiled in and sets its own trace callbacks or removes "
		  "auto-extensions (sqlite3_trace_v2, sqlite3_trace, sqlite3_profile, "
		  "sqlite3_reset_auto_extension, sqlite3_shutdown): executions on connections "
		  "where it does were not seen" },
	};
	const char *said[64];
	unsigned said_bits[64];
	size_t nsaid = 0, it = 0, blind = 0;
	const struct sp_module *m;

	while ((m = hmap_next(&c->modules, &it, NULL))) {
		size_t i;

		if (!m->embed || !m->path)
			continue;
		for (i = 0; i < nsaid && strcmp(said[i], m->path); i++)
			;
		if (i == nsaid) {
			if (nsaid == sizeof(said) / sizeof(said[0]))
				continue;
			said[nsaid] = m->path;
			said_bits[nsaid++] = 0;
		}
		for (size_t k = 0; k < sizeof(causes) / sizeof(causes[0]); k++) {
			if (!(m->embed & causes[k].bit) || (said_bits[i] & causes[k].bit))
				continue;
			said_bits[i] |= causes[k].bit;
			fprintf(stderr, "sqlprof: warning: %s %s\n", m->path, causes[k].why);
		}
		if ((m->embed & SP_MODULE_EMBED_BLIND) && !(said_bits[i] & SP_MODULE_EMBED_BLIND)) {
			said_bits[i] |= SP_MODULE_EMBED_BLIND;
			blind++;
		}
	}
	return blind;
}

/* What runs in the processes whose interpreter frames were not read:
 * Ruby's and PHP's say so in their text (preload/iframes.c). */
static const char *interp(const struct sp_coll *c)
{
	return !strncmp(c->py_version, "PHP", 3) || !strncmp(c->py_version, "ruby", 4)
		       ? "an interpreter"
		       : "a CPython";
}

/* Why the profile holds less than it should, with the cause seen: what
 * the processes saw (enum sp_seen), --no-follow, the command's exit
 * status, the command's binary. */
/* What the processes' flags say, counted over them (explain_empty). */
struct seen {
	size_t foreign, mapped, nosqlite, badenv, deep, fsize, copies, aslimit;
	uint64_t clamped;
};

static void seen_count(const struct sp_coll *c, struct seen *n)
{
	size_t it = 0;
	const struct sp_proc *p;

	memset(n, 0, sizeof(*n));
	while ((p = hmap_next(&c->procs, &it, NULL))) {
		n->foreign += p->foreign_libs > 0;
		n->deep += p->deepbind_late > 0;
		n->clamped += p->clamped;
		n->badenv += (p->seen & SP_SEEN_BAD_ENV) != 0;
		n->fsize += (p->seen & SP_SEEN_FSIZE) != 0;
		n->aslimit += (p->seen & SP_SEEN_ASLIMIT) != 0;
		n->copies += (p->seen & SP_SEEN_SECOND_COPY) != 0;
		if (p->execs)
			continue;
		n->mapped += (p->seen & SP_SEEN_SQLITE_MAPPED) != 0;
		n->nosqlite += (p->seen & SP_SEEN_NO_SQLITE) && !(p->seen & SP_SEEN_SQLITE_MAPPED);
	}
}

/* A warning or note for each condition some process met. */
static void explain_seen(const struct sp_coll *c, const struct seen *n)
{
	if (n->badenv && !sp_why_env(NULL, NULL))
		fprintf(stderr,
			"sqlprof: warning: %zu %s ignored a bad SQLPROF_* value the program set "
			"(the defaults were used)\n",
			n->badenv, procs(n->badenv));
	if (n->clamped)
		fprintf(stderr,
			"sqlprof: warning: the clock went back during %llu %s (a thread moved "
			"to a CPU whose time-stamp counter lags, or the host paused): their times "
			"were clamped (SQLPROF_CLOCK=monotonic avoids it)\n",
			(unsigned long long)n->clamped,
			n->clamped == 1 ? "execution" : "executions");
	if (n->aslimit)
		fprintf(stderr,
			"sqlprof: note: %zu %s ran under an address-space limit (RLIMIT_AS, "
			"ulimit -v): the profiler kept its statistics to a sixteenth of it; texts past "
			"them are folded together, their totals exact\n",
			n->aslimit, procs(n->aslimit));
	if (n->fsize)
		fprintf(stderr,
			"sqlprof: warning: %zu %s ran under a file size limit (RLIMIT_FSIZE, "
			"ulimit -f) too low for the profiler's shared memory: its statistics were "
			"made smaller or delivered at exit only, or a thread's records were lost "
			"(counted); nothing was raised in the program\n",
			n->fsize, procs(n->fsize));
	if (n->copies)
		fprintf(stderr,
			"sqlprof: warning: %zu %s had a second copy of libsqlprof.so in "
			"LD_PRELOAD (one from `sqlprof env` as well as record's?): it was ignored, "
			"the first one profiled\n",
			n->copies, procs(n->copies));
	if (n->deep)
		fprintf(stderr,
			"sqlprof: warning: %zu %s loaded a library with RTLD_DEEPBIND from "
			"an object with its own search path (RUNPATH, RPATH or a later dlopen'd "
			"library): its SQLite calls bind past the profiler until the next call that "
			"reaches it (open, exec, dlopen, dlclose), and were not seen before\n",
			n->deep, procs(n->deep));
	if (n->foreign)
		fprintf(stderr,
			"sqlprof: warning: %zu %s called a second SQLite library, not "
			"profiled: its calls were passed through untouched (only the first SQLite "
			"a process uses is profiled)\n",
			n->foreign, procs(n->foreign));
	if (c->py_unsupported)
		fprintf(stderr,
			"sqlprof: warning: %u %s run %s whose frames sqlprof cannot "
			"read (%s): their queries are attributed to native frames\n",
			c->py_unsupported, procs(c->py_unsupported), interp(c), c->py_version);
	if (c->py_unreadable)
		fprintf(stderr,
			"sqlprof: warning: %u %s could not read their interpreter's "
			"frames (process_vm_readv refused, or the frames did not check out): their "
			"queries are attributed to native frames\n",
			c->py_unreadable, procs(c->py_unreadable));
	if (n->mapped)
		fprintf(stderr,
			"sqlprof: warning: %zu %s loaded libsqlite3 but no call reached the "
			"profiler: the library (or the module calling it) was probably loaded with "
			"RTLD_DEEPBIND, which binds its calls past LD_PRELOAD (PHP's sqlite3 and "
			"pdo_sqlite do), or called through dlsym on its own handle\n",
			n->mapped, procs(n->mapped));
}

/* Why no execution reached us, when none did: the likeliest cause. */
static const char *empty_cause(const struct sp_coll *c, const struct seen *n, int follow,
			       int status)
{
	if (n->deep)
		return "a library loaded with RTLD_DEEPBIND bound its SQLite calls past "
		       "the profiler";
	if (!follow)
		return "--no-follow: only the command itself was profiled, not the "
		       "programs it ran";
	if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
		return "the command exited 127: a program it tried to run was not found";
	if (WIFEXITED(status) && WEXITSTATUS(status) == 126)
		return "the command exited 126: a program it tried to run could not be "
		       "executed";
	if (n->nosqlite == c->procs.count)
		return c->procs.count == 1
			       ? "it never loaded libsqlite3 and had no SQLite compiled in "
				 "(a statically linked program it started, which no loader "
				 "preloads with, is not seen, nor one started without "
				 "LD_PRELOAD)"
			       : "none of them loaded libsqlite3 or had SQLite compiled in "
				 "(a statically linked program they started, which no loader "
				 "preloads with, is not seen, nor one started without "
				 "LD_PRELOAD)";
	return NULL;
}

static void explain_empty(const struct sp_coll *c, int follow, int status, const char *cmd)
{
	char why[PATH_MAX + 160];
	size_t blind = explain_embedded(c);
	struct seen n;

	seen_count(c, &n);
	explain_seen(c, &n);
	if (c->procs.count == 0) {
		fprintf(stderr,
			"sqlprof: warning: no process connected: libsqlprof.so was not loaded (%s)\n",
			sp_why_not_loaded(cmd, why, sizeof(why)));
		return;
	}
	if (sp_coll_executions(c) == 0 && sp_coll_lost(c) > 0) {
		fprintf(stderr,
			"sqlprof: warning: every record of %zu %s was lost (%llu): the "
			"profiler could not share its buffers with this collector (memfd_create "
			"refused, e.g. by a seccomp filter) or the collector fell behind\n",
			c->procs.count, procs(c->procs.count), (unsigned long long)sp_coll_lost(c));
	} else if (sp_coll_executions(c) == 0 && !n.mapped && !blind) {
		const char *cause = empty_cause(c, &n, follow, status);

		fprintf(stderr,
			"sqlprof: warning: %zu %s ran with the profiler but no SQLite "
			"execution reached it%s%s\n",
			c->procs.count, procs(c->procs.count), cause ? ": " : "",
			cause ? cause : "");
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
			"", n, n == 1 ? "process" : "processes", why, pids,
			n == 1 ? "its" : "their");
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
static void report_unconnected(const char *sockpath, const struct sp_client *cl, size_t ncl,
			       int tty)
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
			len += (size_t)snprintf(pids + len, sizeof(pids) - len, "%s%ld (",
						n ? ", " : "", pid);
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

/* ---- the command, step by step ------------------------------------------ */

/* One recording: what every step of cmd_record reads and leaves for the
 * next. recording_close releases all of it, whichever step failed. */
struct recording {
	struct record_opts o;
	char **cmd;                  /* the command and its arguments (argv) */
	char lib[PATH_MAX];          /* libsqlprof.so */
	const char *tmp;             /* $TMPDIR, NULL or "" for /tmp */
	char dir[PATH_MAX];          /* the private directory ("" until made) */
	char sockpath[PATH_MAX + 8]; /* the socket in it */
	struct sp_srv srv;
	struct sp_calib calib;    /* the TSC against CLOCK_MONOTONIC, from the start */
	struct layout_job layout; /* SQLite's layouts for the children */
	struct sp_coll c;
	FILE *spill; /* sampled executions, unlinked file */
	/* the timeline writer (NULL: none) and the lock on c it shares: held
	 * by this thread from collector_open on, except in poll */
	struct sp_tlw *tlw;
	pthread_mutex_t model_lock;
	struct sp_timeline timeline;
	char *cmdline;              /* the command line, for the profile */
	struct hmap snap;           /* {sql_id, kind} -> cumulative {count, total_ns} */
	struct sp_repeat_total *rt; /* per-run totals (--repeat) */
	size_t nrt, caprt;
	uint64_t repeat_no;       /* the repeat going on, 1-based */
	uint64_t t_start, t_exit; /* monotonic: start, the command's exit */
	pid_t pid;
	int status, exited, tty;
	const char *why; /* why collecting stopped before every client left */
	char whybuf[96];
	struct rlimit nofile; /* RLIMIT_NOFILE before we raised it */
	int nofile_set;       /* nofile holds it */
};

/* Parse the options into o. Returns -1 to go on (*cmd: the index of the
 * command in argv), or the exit code to return (usage, --help). */
static int parse_options(struct record_opts *o, int argc, char **argv, int *cmd)
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
	double d;
	uint64_t u;
	int opt;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "+o:r:qh", longopts, NULL)) != -1) {
		switch (opt) {
		case 'o': o->output = optarg; break;
		case 'r':
			if (sp_parse_double(optarg, 0, 1, &d) < 0) {
				fprintf(stderr,
					"sqlprof record: --rate wants a number from 0 to 1, not '%s'\n",
					optarg);
				return SP_EXIT_USAGE;
			}
			o->rate = optarg;
			break;
		case 1:
			if (sp_parse_u64(optarg, &u) < 0 || u > LONG_MAX) {
				fprintf(stderr,
					"sqlprof record: --seed wants a non-negative integer\n");
				return SP_EXIT_USAGE;
			}
			o->seed = optarg;
			break;
		case 2:
			if (sp_parse_double(optarg, 0, 86400000, &d) < 0) {
				fprintf(stderr, "sqlprof record: --slow-ms wants milliseconds\n");
				return SP_EXIT_USAGE;
			}
			o->slow_ms = optarg;
			break;
		case 3:
			if (sp_parse_u64(optarg, &u) < 0 || u < 1 || u > SP_STACK_MAX) {
				fprintf(stderr, "sqlprof record: --depth wants 1 to %d\n",
					SP_STACK_MAX);
				return SP_EXIT_USAGE;
			}
			o->depth = optarg;
			break;
		case 4: o->follow = 0; break;
		case 5: o->debug_path = optarg; break;
		case 7:
			if (sp_parse_u64(optarg, &o->max_events) < 0 ||
			    o->max_events > 1000000000) {
				fprintf(stderr,
					"sqlprof record: --max-events wants 0 to 1000000000\n");
				return SP_EXIT_USAGE;
			}
			break;
		case 8:
			if (sp_parse_double(optarg, 0, 86400, &o->grace_s) < 0) {
				fprintf(stderr,
					"sqlprof record: --grace wants seconds, 0 to 86400\n");
				return SP_EXIT_USAGE;
			}
			break;
		case 6:
			if (sp_parse_u64(optarg, &o->repeat) < 0 || o->repeat < 1 ||
			    o->repeat > 1000) {
				fprintf(stderr, "sqlprof record: --repeat wants 1 to 1000\n");
				return SP_EXIT_USAGE;
			}
			break;
		case 'q': o->quiet = 1; break;
		case 'h': usage(stdout); return SP_EXIT_OK;
		default: sp_usage_hint("record"); return SP_EXIT_USAGE;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "sqlprof record: no command given\n");
		sp_usage_hint("record");
		return SP_EXIT_USAGE;
	}
	*cmd = optind;
	return -1;
}

/* Before anything runs: the preload can be found and preloaded, the
 * profile can be written (never over someone else's data, and not only
 * to find out at the end), and bad SQLPROF_* values are warned about.
 * Returns SP_EXIT_OK or the exit code to return. */
static int preflight(struct recording *r)
{
	char err[PATH_MAX + 512];

	if (sp_srv_find_lib(r->lib, sizeof(r->lib)) < 0)
		return SP_EXIT_USAGE;
	if (sp_srv_preload_unsafe(r->lib)) {
		/* ld.so would split it: its errors on the program's stderr, and
		 * nothing profiled */
		fprintf(stderr,
			"sqlprof record: cannot preload %s: LD_PRELOAD splits paths at spaces and "
			"colons; install sqlprof where the path has neither, or set SQLPROF_LIB to "
			"such a path (a copy or a symbolic link)\n",
			r->lib);
		return SP_EXIT_USAGE;
	}
	if (sp_out_check(r->o.output, err, sizeof(err)) < 0) {
		fprintf(stderr, "sqlprof record: %s\n", err);
		return SP_EXIT_USAGE;
	}
	if (!r->o.quiet) { /* once per run, here: the preload never writes to the program's stderr */
		const char *set[] = {
			r->o.rate ? "SQLPROF_RATE" : "",       r->o.seed ? "SQLPROF_SEED" : "",
			r->o.slow_ms ? "SQLPROF_SLOW_MS" : "", r->o.depth ? "SQLPROF_DEPTH" : "",
			r->o.follow ? "" : "SQLPROF_FOLLOW",   NULL
		};

		sp_why_env(stderr, set);
	}
	return SP_EXIT_OK;
}

/* The collector, ready before the first run: its model, a private
 * directory (0700) with the socket listening in it, the file sampled
 * executions wait in, the command line and the per-run snapshot. Returns
 * 0, or -1 after saying why (recording_close cleans up either way). */
static int collector_open(struct recording *r)
{
	char err[PATH_MAX + 512], sp[PATH_MAX + 16];
	FILE *cmdf;
	size_t cmdlen = 0;
	int lerr, sfd;

	sp_coll_init(&r->c);
	hmap_init(&r->snap, 2 * sizeof(uint64_t), 2 * sizeof(uint64_t));
	r->c.diag = stderr; /* broken rings */
	/* a descriptor per connected process: as many as we may have (the
	 * command gets the limits it would have had: exec_command) */
	if (sp_srv_raise_nofile(&r->nofile) == 0)
		r->nofile_set = 1;
	if (sp_srv_init(&r->srv, &r->c, "sqlprof record") < 0)
		return -1;

	r->tmp = getenv("TMPDIR");
	snprintf(r->dir, sizeof(r->dir), "%s/sqlprof.XXXXXX", r->tmp && *r->tmp ? r->tmp : "/tmp");
	if (!mkdtemp(r->dir)) { /* mkdtemp creates it 0700 */
		if (r->tmp && *r->tmp)
			fprintf(stderr,
				"sqlprof record: cannot create a private directory in TMPDIR=%s: "
				"%s; set TMPDIR to a directory you may write in\n",
				r->tmp, strerror(errno));
		else
			fprintf(stderr,
				"sqlprof record: cannot create a private directory in /tmp (TMPDIR "
				"is not set): %s; set TMPDIR to a directory you may write in\n",
				strerror(errno));
		return -1;
	}
	snprintf(r->sockpath, sizeof(r->sockpath), "%s/s", r->dir);
	if ((lerr = sp_srv_listen(&r->srv, r->sockpath, err, sizeof(err))) < 0) {
		fprintf(stderr, "sqlprof record: %s%s\n", err,
			lerr == -ENAMETOOLONG ? " (set TMPDIR)" : "");
		return -1;
	}

	/* Sampled executions wait in a file, unlinked at once: the
	 * collector's memory does not grow with them, and nothing is left
	 * behind if we are killed. */
	snprintf(sp, sizeof(sp), "%s/events", r->dir);
	sfd = open(sp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (sfd >= 0) {
		unlink(sp);
		r->spill = fdopen(sfd, "w+");
		if (!r->spill)
			close(sfd);
	}
	if (r->spill)
		sp_coll_spill(&r->c, r->spill, (size_t)r->o.max_events);
	/* the timeline is written while the command runs (timeline.c);
	 * without the writer, the profile writes it at the end */
	pthread_mutex_lock(&r->model_lock);
	if (r->spill &&
	    (r->tlw = sp_tlw_start(&r->c, &r->model_lock, r->dir, r->o.debug_path)) != NULL)
		r->srv.model_lock = &r->model_lock;

	cmdf = open_memstream(&r->cmdline, &cmdlen);
	for (int i = 0; cmdf && r->cmd[i]; i++)
		fprintf(cmdf, "%s%s", i ? " " : "", r->cmd[i]);
	if (cmdf)
		fclose(cmdf);
	return 0;
}

/* In the child: the preload and its settings in the environment, then the
 * command. Never returns. */
__attribute__((noreturn)) static void exec_command(const struct recording *r, int xp[2])
{
	int xerr;

	sp_sup_child();
	if (r->nofile_set)
		setrlimit(RLIMIT_NOFILE, &r->nofile);
	setenv_prepend("LD_PRELOAD", r->lib, ':');
	asan_link_order_env();
	setenv(SP_ENV_SOCK, r->sockpath, 1);
	if (r->c.ns_per_tick > 0) {
		char tpn[32];

		snprintf(tpn, sizeof(tpn), "%.9g", 1.0 / r->c.ns_per_tick);
		setenv(SP_ENV_TSC_PER_NS, tpn, 1);
	}
	if (r->o.rate)
		setenv("SQLPROF_RATE", r->o.rate, 1);
	if (r->o.seed)
		setenv("SQLPROF_SEED", r->o.seed, 1);
	if (r->o.slow_ms)
		setenv("SQLPROF_SLOW_MS", r->o.slow_ms, 1);
	if (r->o.depth)
		setenv("SQLPROF_DEPTH", r->o.depth, 1);
	if (!r->o.follow)
		setenv("SQLPROF_FOLLOW", "0", 1);
	execvp(r->cmd[0], r->cmd);
	xerr = errno;
	fprintf(stderr, "sqlprof record: cannot run %s: %s\n", r->cmd[0], strerror(xerr));
	sp_sup_exec_failed(xp, xerr);
}

/* Start repeat r->repeat_no of the command, supervised. Returns 0, 127 when the
 * first run could not start at all (nothing ran: nothing is written), or
 * -1 when fork failed. */
static int start_command(struct recording *r)
{
	int xp[2];

	r->exited = 0;
	sp_sup_exec_pipe(xp);
	sp_sup_prefork();
	r->pid = fork();
	if (r->pid < 0) {
		fprintf(stderr, "sqlprof record: fork: %s\n", strerror(errno));
		sp_sup_start(0, r->o.quiet, 0); /* unblocks them */
		return -1;
	}
	if (r->pid == 0)
		exec_command(r, xp);
	r->tty = !r->o.quiet && isatty(2);
	sp_sup_start(r->pid, r->o.quiet, r->tty);
	if (sp_sup_exec_wait(xp) && r->repeat_no == 1) {
		/* Nothing ran: write nothing, leave the output as it was. */
		waitpid(r->pid, &r->status, 0);
		sp_sup_exited();
		if (!r->o.quiet)
			fprintf(stderr, "sqlprof record: nothing ran; no profile written\n");
		return 127;
	}
	if (chld_pipe[0] < 0 && pipe2(chld_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
		chld_pipe[0] = chld_pipe[1] = -1;
	signal(SIGCHLD, on_sigchld);
	signal(SIGPIPE, SIG_IGN);
	return 0;
}

/* Collect until the command has exited and its descendants' streams are
 * closed, or past the grace time, or they send nothing for the idle time,
 * or the user interrupts after the exit (r->why says which). Returns 0, or
 * -1 when polling failed. */
static int collect_repeat(struct recording *r)
{
	uint64_t grace_ns = (uint64_t)(r->o.grace_s * 1e9);
	uint64_t idle_ns = grace_ns < 2000000000u ? grace_ns : 2000000000u;
	uint64_t last_data = sp_srv_mono_ns();

	for (;;) {
		uint64_t now;
		/* Keep accepting after the command exits: a descendant's
		 * connection may still wait in the listen backlog. */
		int rr = sp_srv_round(&r->srv, chld_pipe[0], -1, r->exited);

		if (rr < 0)
			return -1;
		if (rr & SP_SRV_EXTRA) {
			char drainbuf[64];

			while (read(chld_pipe[0], drainbuf, sizeof(drainbuf)) > 0)
				;
		}
		if (rr & SP_SRV_DATA)
			last_data = sp_srv_mono_ns();
		now = sp_srv_mono_ns();
		if (!r->exited) {
			pid_t w = waitpid(r->pid, &r->status, WNOHANG);

			if (w == r->pid) {
				/* its own end, whatever its goodbye said */
				sp_coll_exit_status(&r->c, (uint32_t)r->pid, r->status);
				r->exited = 1;
				r->t_exit = now;
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
		if (r->exited && r->srv.ncl == 0)
			return 0;
		if (r->exited && sp_sup_interrupted()) {
			r->why = "interrupted";
			return 0;
		}
		if (r->exited && now - r->t_exit >= grace_ns) {
			snprintf(r->whybuf, sizeof(r->whybuf),
				 "%g s after the command exited (--grace)", r->o.grace_s);
			r->why = r->whybuf;
			return 0;
		}
		if (r->exited && now - last_data > idle_ns && now - r->t_exit > idle_ns) {
			snprintf(r->whybuf, sizeof(r->whybuf), "%g s without data from them",
				 (double)idle_ns / 1e9);
			r->why = r->whybuf;
			return 0;
		}
	}
}

/* After a run: say who was still connected, read every ring one last
 * time and let the clients go, take in the BYE and unreported files, and
 * keep what this run added to each query (the per-run totals). Returns 0,
 * or -1 on ENOMEM. */
static int finish_repeat(struct recording *r)
{
	size_t it = 0;
	const uint64_t *qk;
	struct sp_qagg *q;
	int last;

	if (!r->o.quiet) {
		report_stragglers(&r->c, r->srv.cl, r->srv.ncl, r->tty, r->why);
		report_unconnected(r->sockpath, r->srv.cl, r->srv.ncl, r->tty);
	}
	sp_coll_rings_close(&r->c);
	sp_srv_read_bye_files(&r->c, r->dir, "sqlprof record");
	sp_coll_read_unreported(&r->c, r->dir);
	sp_coll_settle(&r->c, 1); /* how those that said no goodbye ended */
	sp_coll_finish(&r->c);
	/* Room for a row per text at once (a doubling each time copied the
	 * rows and faulted in new pages). The last run's totals are taken
	 * against the snapshot without adding to it: no run comes after to
	 * read it (at one run and 400,000 texts the snapshot cost 0.2 s
	 * after the program's exit). */
	last = r->repeat_no >= r->o.repeat;
	if (SP_GROW(r->rt, r->caprt, r->nrt + r->c.queries.count, 64) < 0)
		return -1;
	while ((q = hmap_next(&r->c.queries, &it, (const void **)&qk))) {
		static const uint64_t none[2];
		uint64_t *prev = hmap_get(&r->snap, qk, !last, NULL);
		const uint64_t *was = prev ? prev : none;

		if (!prev && !last)
			return -1;
		if (q->count == was[0])
			continue;
		r->rt[r->nrt++] = (struct sp_repeat_total){ .run = (uint32_t)r->repeat_no,
							    .sql_id = qk[0],
							    .kind = (uint32_t)qk[1],
							    .count = q->count - was[0],
							    .total_ns = q->total_ns - was[1] };
		if (prev) {
			prev[0] = q->count;
			prev[1] = q->total_ns;
		}
	}
	return 0;
}

/* 1 (after saying so) when --repeat stops after this run: it failed, or
 * the user interrupted it. */
static int repeat_stops(const struct recording *r)
{
	if (r->repeat_no >= r->o.repeat)
		return 0;
	if (!(WIFEXITED(r->status) && WEXITSTATUS(r->status) == 0)) {
		fprintf(stderr, "sqlprof record: run %llu failed; not repeating\n",
			(unsigned long long)r->repeat_no);
		return 1;
	}
	if (sp_sup_interrupted()) {
		fprintf(stderr, "sqlprof record: interrupted after run %llu; not repeating\n",
			(unsigned long long)r->repeat_no);
		return 1;
	}
	return 0;
}

/* Write the profile (sp_out_write: at --output, else saved elsewhere,
 * whose name goes into saved). *exit_status: as record exits when the
 * profile is where it was asked. Returns sp_out_write's 0, 1 or -1. */
static int write_profile(struct recording *r, char *saved, size_t savedlen, int *exit_status)
{
	char err[PATH_MAX + 512];
	struct sp_meta meta;
	int64_t span[2];
	int wrote;

	memset(&meta, 0, sizeof(meta));
	meta.command = r->cmdline;
	meta.started =
		(long long)time(NULL) - (long long)((sp_srv_mono_ns() - r->t_start) / 1000000000u);
	meta.duration_ns = (long long)(r->t_exit - r->t_start);
	meta.exit_status = WIFEXITED(r->status)     ? WEXITSTATUS(r->status)
			   : WIFSIGNALED(r->status) ? 128 + WTERMSIG(r->status)
						    : 1;
	meta.rate = 0.01;
	if (r->o.rate)
		sp_parse_double(r->o.rate, 0, 1, &meta.rate);
	meta.debug_path = r->o.debug_path;
	meta.runs = r->rt;
	meta.nruns = r->nrt;
	meta.repeat = (int)(r->repeat_no > r->o.repeat ? r->o.repeat : r->repeat_no);
	/* one interval, the whole recording, so that --since/--until read
	 * a record profile too (series.c) */
	span[1] = sp_series_now_ns() - (int64_t)(sp_srv_mono_ns() - r->t_exit);
	span[0] = span[1] - meta.duration_ns;
	meta.series = span;
	sp_tlw_stop(r->tlw, &r->model_lock, &r->timeline);
	r->srv.model_lock = NULL;
	if (r->timeline.events)
		meta.timeline = &r->timeline;
	meta.sym = sp_tlw_sym(r->tlw);
	*exit_status = meta.exit_status;
	wrote = sp_out_write(r->o.output, &r->c, &meta, saved, savedlen, err, sizeof(err));
	if (wrote < 0)
		fprintf(stderr, "sqlprof record: %s; the profile could not be saved anywhere\n",
			err);
	else if (wrote > 0)
		fprintf(stderr, "sqlprof record: %s; the profile is saved in %s instead\n", err,
			saved);
	return wrote;
}

/* The summary on stderr: why a profile is empty, processes that died,
 * symbolizer notes, what was lost and why, and the last line (executions,
 * processes, events lost, where the profile is). */
static void print_summary(struct recording *r, const char *where)
{
	struct sp_coll *c = &r->c;
	uint64_t complete, unrep = sp_coll_unreported(c, &complete);
	size_t it = 0, used = 0;
	const struct sp_proc *p;
	uint64_t ex = sp_coll_executions(c), lost = sp_coll_lost(c);

	explain_empty(c, r->o.follow, r->status, r->cmd[0]);
	report_deaths(c, r->status);
	if (c->sym_notes) {
		char *save = NULL, *line;

		for (line = strtok_r(c->sym_notes, "\n", &save); line;
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
	if (c->spill_failed)
		fprintf(stderr,
			"sqlprof: warning: %llu sampled execution%s dropped from the timeline "
			"(meta.events_dropped; totals are exact): cannot write them in %s: %s\n",
			(unsigned long long)c->spill_failed, c->spill_failed == 1 ? "" : "s",
			r->tmp && *r->tmp ? r->tmp : "/tmp", strerror(c->spill_errno));
	if (c->events_dropped > c->spill_failed)
		fprintf(stderr,
			"sqlprof: warning: %llu sampled execution%s beyond --max-events %llu "
			"left out of the timeline (meta.events_dropped; totals are exact)\n",
			(unsigned long long)(c->events_dropped - c->spill_failed),
			c->events_dropped - c->spill_failed == 1 ? "" : "s",
			(unsigned long long)r->o.max_events);
	/* processes that used SQLite; exec'd helpers (pyenv's shims) connect
	 * too */
	while ((p = hmap_next(&c->procs, &it, NULL)))
		used += p->execs > 0;
	if (!used) /* then say how many ran at all */
		used = c->procs.count;
	fprintf(stderr, "sqlprof: %llu execution%s from %zu %s", (unsigned long long)ex,
		ex == 1 ? "" : "s", used, procs(used));
	if (c->procs.count > used)
		fprintf(stderr, " (and %zu that ran no SQLite)", c->procs.count - used);
	fprintf(stderr, ", %llu event%s lost", (unsigned long long)lost, lost == 1 ? "" : "s");
	if (c->stats_lost)
		fprintf(stderr, ", the totals of %llu %s lost (statistics not received)",
			(unsigned long long)c->stats_lost, procs(c->stats_lost));
	if (c->fds_lost)
		fprintf(stderr, ", %llu descriptor%s lost", (unsigned long long)c->fds_lost,
			c->fds_lost == 1 ? "" : "s");
	fprintf(stderr, "; profile in %s\n", where);
}

/* The model of the last recording, left to the process's exit (see
 * recording_close). */
static struct sp_coll left_at_exit;

/* Release everything collector_open (and the runs) made: SIGCHLD back to
 * its default, the wake-up pipe, the socket and the private directory
 * (also when we leave before listening), the buffers; the model is left
 * to the process's exit, which follows. */
static void recording_close(struct recording *r)
{
	signal(SIGCHLD, SIG_DFL);
	if (chld_pipe[0] >= 0) {
		close(chld_pipe[0]);
		close(chld_pipe[1]);
		chld_pipe[0] = chld_pipe[1] = -1;
	}
	if (r->srv.lfd >= 0)
		unlink(r->sockpath);
	sp_srv_close(&r->srv);
	sp_tlw_free(r->tlw); /* the thread stopped, its file removed */
	r->tlw = NULL;
	if (r->dir[0] && !strstr(r->dir, "XXXXXX")) /* made by mkdtemp */
		rmdir(r->dir);
	free(r->cmdline);
	free(r->rt);
	if (r->spill)
		fclose(r->spill);
	hmap_free(&r->snap);
	/* Freeing the model's blocks one by one took 0.2 s at 200,000
	 * fingerprints (about a million of them, then glibc consolidating
	 * its free lists), after the profile was written: main returns our status
	 * next, and the exit frees it all at once. Kept in a static, so
	 * that a leak checker (valgrind, LeakSanitizer) sees it in use,
	 * not lost; an earlier one, if any, is freed. */
	sp_coll_free(&left_at_exit);
	left_at_exit = r->c;
	memset(&r->c, 0, sizeof(r->c));
}

/*
 * sqlprof record: check that the command can be profiled and the profile
 * written, open the collector, run the command (--repeat times) and
 * collect each run, write the profile, summarize. The exit code is the
 * command's (127 when it could not start; SP_EXIT_INTERNAL when the
 * profile is not where it was asked).
 */
int cmd_record(int argc, char **argv)
{
	struct recording r = {
		.o = { .output = SP_PROFILE_DEFAULT,
		       .follow = 1,
		       .grace_s = 10.0,
		       .repeat = 1,
		       .max_events = 5000000 },
		.srv = { .lfd = -1 },
		.model_lock = PTHREAD_MUTEX_INITIALIZER,
	};
	char saved[PATH_MAX + 32];
	int rc, cmd, wrote, exit_status;

	sp_sup_init(); /* before anything changes a disposition */
	sp_srv_calib_begin(&r.calib);
	if ((rc = parse_options(&r.o, argc, argv, &cmd)) >= 0)
		return rc;
	r.cmd = argv + cmd;
	layout_start(&r.layout);
	if ((rc = preflight(&r)) != SP_EXIT_OK) {
		layout_env(&r.layout); /* joined */
		return rc;
	}
	rc = SP_EXIT_INTERNAL;
	if (collector_open(&r) < 0)
		goto out;
	r.t_start = sp_srv_mono_ns();
	layout_env(&r.layout);
	/* the TSC's 2 ms end here, before the first fork: the whole start-up
	 * (the collector's opening, the layout thread's join) counts towards
	 * them, and only what is left of them is slept */
	r.c.ns_per_tick = sp_srv_calib_end(&r.calib);
	for (r.repeat_no = 1; r.repeat_no <= r.o.repeat; r.repeat_no++) {
		int started = start_command(&r);

		if (started != 0) {
			rc = started > 0 ? started : SP_EXIT_INTERNAL;
			goto out;
		}
		if (collect_repeat(&r) < 0 || finish_repeat(&r) < 0)
			goto out;
		if (repeat_stops(&r))
			break;
	}
	wrote = write_profile(&r, saved, sizeof(saved), &exit_status);
	if (wrote < 0)
		goto out;
	if (!r.o.quiet)
		print_summary(&r, wrote ? saved : r.o.output);
	rc = wrote ? SP_EXIT_INTERNAL : exit_status;
out:
	if (r.layout.started) /* the collector could not open */
		pthread_join(r.layout.th, NULL);
	recording_close(&r);
	return rc;
}
