/* SPDX-License-Identifier: MIT */
/*
 * main.c - sqlprof's entry point: dispatch to a subcommand. Nothing else.
 */
#include <stdio.h>
#include <string.h>

#include "cmds.h"
#include "untrusted.h"
#include "util.h"

/* libsqlprof.so looks this symbol up and stays inert if it finds it: the
 * CLI's own SQLite writes (the profile) are never profiled. */
__attribute__((visibility("default"))) const int sqlprof_is_collector = 1;

static const struct {
	const char *name;
	int (*fn)(int, char **);
	int reads_profiles;
	const char *help;
} cmds[] = {
	{ "record", cmd_record, 0, "run a command under the profiler and write a profile" },
	{ "report", cmd_report, 1, "print per-query totals from a profile" },
	{ "diff", cmd_diff, 1, "compare two profiles per query and per site" },
	{ "check", cmd_check, 1, "fail a CI build when queries regress against a baseline" },
	{ "export", cmd_export, 1, "write a profile as a flamegraph, trace, CSV or HTML" },
	{ "agent", cmd_agent, 0, "collect from services as a standing agent, updating a profile" },
	{ "env", cmd_env, 0, "print the environment that makes a service report to the agent" },
};

static void usage(FILE *f)
{
	size_t i;

	fprintf(f, "usage: sqlprof COMMAND [OPTIONS]\n\ncommands:\n");
	for (i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		fprintf(f, "  %-8s %s\n", cmds[i].name, cmds[i].help);
	fprintf(f, "\n'sqlprof COMMAND --help' for a command's options; man sqlprof for all.\n"
		   "\nexamples:\n"
		   "  sqlprof record -- ./app --serve\n"
		   "  sqlprof report --top 10\n");
}

int main(int argc, char **argv)
{
	size_t i;

	if (argc < 2) {
		usage(stderr);
		return SP_EXIT_USAGE;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return SP_EXIT_OK;
	}
	if (!strcmp(argv[1], "--version")) {
		printf("sqlprof %s\n", SQLPROF_VERSION);
		return SP_EXIT_OK;
	}
	for (i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (!strcmp(argv[1], cmds[i].name)) {
			FILE *real = stderr;
			char err[160];
			int rc;

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
	usage(stderr);
	return SP_EXIT_USAGE;
}
