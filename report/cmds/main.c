/* SPDX-License-Identifier: MIT */
/*
 * main.c - sqlprof's entry point: dispatch to a subcommand. Nothing else.
 */
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cmds.h"
#include "untrusted.h"
#include "util.h"

/* libsqlprof.so looks this symbol up and stays inert if it finds it: the
 * CLI's own SQLite writes (the profile) are never profiled. */
__attribute__((visibility("default"))) const int sqlprof_is_collector = 1;

static const struct {
	const char *name;
	int (*fn)(int, char **);
	int reads_profiles, quiet_epipe;
	const char *help;
} cmds[] = {
	{ "record", cmd_record, 0, 0, "run a command under the profiler and write a profile" },
	{ "report", cmd_report, 1, 1, "print per-query totals from a profile" },
	{ "diff", cmd_diff, 1, 1, "compare two profiles per query and per site" },
	{ "check", cmd_check, 1, 0, "fail a CI build when queries regress against a baseline" },
	{ "export", cmd_export, 1, 1, "write a profile as a flamegraph, trace, CSV or HTML" },
	{ "agent", cmd_agent, 0, 0,
	  "collect from services as a standing agent, updating a profile" },
	{ "env", cmd_env, 0, 0, "print the environment that makes a service report to the agent" },
	{ "top", cmd_top, 1, 1, "a live table of the costliest queries of an agent or a profile" },
};

/* SIGPIPE: the reader of our output (a pipe, or an -o FIFO, which are
 * written directly, never through a temporary) is gone, as under
 * `| head`: what it did not read is not wanted, so stop with status 0.
 * Async-signal-safe: _exit only. */
static void epipe_exit(int sig)
{
	(void)sig;
	_exit(SP_EXIT_OK);
}

static void usage(FILE *f)
{
	size_t i;

	fprintf(f, "usage: sqlprof COMMAND [OPTIONS]\n\ncommands:\n");
	for (i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		fprintf(f, "  %-8s %s\n", cmds[i].name, cmds[i].help);
	fprintf(f,
		"\n'sqlprof help COMMAND' (or 'sqlprof COMMAND --help') for a command's options;\n"
		"man sqlprof for all.\n"
		"\nexamples:\n"
		"  sqlprof record -- ./app --serve\n"
		"  sqlprof report --top 10\n");
}

int main(int argc, char **argv)
{
	size_t i;

	/* glibc gives memory back to the kernel whenever the top 128 KiB
	 * are free, and the threshold it adapts makes every freed page
	 * cache an munmap: a one-query record spent 14 % of its CPU in
	 * brk's TLB flushes. Keep what was used (the commands are short,
	 * the agent's peak is bounded by its budgets). */
	mallopt(M_MMAP_THRESHOLD, 4 << 20);
	mallopt(M_TRIM_THRESHOLD, 32 << 20);
	mallopt(M_TOP_PAD, 1 << 20);

	if (argc < 2) {
		usage(stderr);
		return SP_EXIT_USAGE;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") ||
	    (!strcmp(argv[1], "help") && argc == 2)) {
		usage(stdout);
		return SP_EXIT_OK;
	}
	if (!strcmp(argv[1], "help")) { /* sqlprof help CMD: CMD --help */
		static char help[] = "--help";

		for (i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
			if (!strcmp(argv[2], cmds[i].name)) {
				char *hargv[] = { argv[2], help, NULL };

				return cmds[i].fn(2, hargv);
			}
		fprintf(stderr, "sqlprof help: unknown command '%s'\n", argv[2]);
		fprintf(stderr, "Try 'sqlprof help' for the commands.\n");
		return SP_EXIT_USAGE;
	}
	if (!strcmp(argv[1], "--version")) {
		printf("sqlprof %s\n", SQLPROF_VERSION);
		return SP_EXIT_OK;
	}
	for (i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (!strcmp(argv[1], cmds[i].name)) {
			FILE *real = stderr;
			char err[160], name[32];
			int rc;

			/* getopt's messages start with argv[0]: "sqlprof report: ..." */
			snprintf(name, sizeof(name), "sqlprof %s", cmds[i].name);
			argv[1] = name;
			/* a reader that went away (| head) ends report, diff and
			 * export quietly with status 0; check's status is its verdict,
			 * so it keeps dying of SIGPIPE, and record forwards signals */
			if (cmds[i].quiet_epipe)
				signal(SIGPIPE, epipe_exit);

			/* Messages of the commands that read profiles can quote
			 * them: terminal-safe, unbuffered as stderr is. (record's
			 * live counter needs its carriage returns.) */
			if (cmds[i].reads_profiles && sp_term_begin(&stderr) != stderr)
				setvbuf(stderr, NULL, _IONBF, 0);
			if (cmds[i].reads_profiles && sp_untrusted_config(err, sizeof(err)) < 0) {
				fprintf(stderr, "sqlprof %s: %s\n", cmds[i].name, err);
				rc = SP_EXIT_USAGE;
			} else {
				rc = cmds[i].fn(argc - 1, argv + 1);
			}
			sp_term_end(&stderr, real);
			return rc;
		}
	fprintf(stderr, "sqlprof: unknown command '%s'\n", argv[1]);
	fprintf(stderr, "Try 'sqlprof help' for the commands.\n");
	return SP_EXIT_USAGE;
}
