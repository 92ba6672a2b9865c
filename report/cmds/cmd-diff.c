/* SPDX-License-Identifier: MIT */
/*
 * cmd-diff.c - `sqlprof diff BASE NEW`: per fingerprint and per site, the
 * change in every deterministic metric, plan changes and (informational)
 * time, sorted by impact, as text, JSON or GitHub Markdown. Matching lives
 * in compare.c; the printers, shared with `sqlprof check`, in
 * output/diff-print.c.
 */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "cmds.h"
#include "attrib.h"
#include "compare.h"
#include "diff-print.h"
#include "untrusted.h"
#include "util.h"

#define MAX_SKIP 64

/* ---- the command --------------------------------------------------------- */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: sqlprof diff [OPTIONS] BASE NEW\n"
		"\n"
		"Compare two profiles per query fingerprint and per call site: count, rows,\n"
		"VM steps, full-scan steps, sorts, automatic-index rows, prepares, errors,\n"
		"longest run, new and vanished queries and plan changes (all deterministic for\n"
		"the same program and data), plus time (informational). Sorted by impact.\n"
		"Profiles recorded with --repeat N are compared per run.\n"
		"\n"
		"  -f, --format FMT     text (default), json, markdown (GitHub tables)\n"
		"  -a, --all            list unchanged queries and sites too\n"
		"  -n, --top N          at most N query rows and N site rows\n"
		"      --skip PATTERN   never attribute to frames whose function or module (or a\n"
		"                       Python frame's file) matches PATTERN (fnmatch;\n"
		"                       repeatable), e.g. your database wrapper\n"
		"      --all-frames     sites may be frames in installed or system libraries\n"
		"                       (by default the first frame of your own code)\n"
		"      --since T, --until T, --last DURATION\n"
		"                       compare a time window of each profile's intervals (as\n"
		"                       in sqlprof report; relative times from each profile's\n"
		"                       own last interval end)\n"
		"  -h, --help           this text\n"
		"\n"
		"Exit status: 0 (whether or not anything changed), 2 usage, 3 unreadable profile.\n"
		"\n"
		"examples:\n"
		"  sqlprof diff main.db pr.db\n"
		"  sqlprof diff --last 1h monday.db /var/lib/sqlprof/app.db\n"
		"  sqlprof diff --format markdown main.db pr.db >> \"$GITHUB_STEP_SUMMARY\"\n");
}

int cmd_diff(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "format", required_argument, NULL, 'f' }, { "all", no_argument, NULL, 'a' },
		{ "top", required_argument, NULL, 'n' },    { "skip", required_argument, NULL, 1 },
		{ "since", required_argument, NULL, 2 },    { "until", required_argument, NULL, 3 },
		{ "last", required_argument, NULL, 4 },     { "all-frames", no_argument, NULL, 5 },
		{ "help", no_argument, NULL, 'h' },         { NULL, 0, NULL, 0 },
	};
	const char *format = "text", *skip[MAX_SKIP + 1] = { NULL };
	struct sp_side base, cand;
	struct sp_diff d;
	char err[1024];
	uint64_t top = 0;
	int opt, nskip = 0, all = 0, inerr, rc = SP_EXIT_OK;
	static struct sp_winreq wr; /* sp_side_set_window keeps its address */

	/* one thread: no mutex in each sqlite3_column_* (a no-op once a
	 * connection is open) */
	sqlite3_config(SQLITE_CONFIG_SINGLETHREAD);
	optind = 1;
	memset(&wr, 0, sizeof(wr));
	while ((opt = getopt_long(argc, argv, "f:an:h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'f': format = optarg; break;
		case 'a': all = 1; break;
		case 5: sp_attrib_set_all_frames(1); break;
		case 'n':
			if (sp_parse_u64(optarg, &top) < 0) {
				fprintf(stderr,
					"sqlprof diff: --top wants a non-negative integer, not '%s'\n",
					optarg);
				return SP_EXIT_USAGE;
			}
			break;
		case 1:
			if (nskip == MAX_SKIP) {
				fprintf(stderr, "sqlprof diff: at most %d --skip patterns\n",
					MAX_SKIP);
				return SP_EXIT_USAGE;
			}
			skip[nskip++] = optarg;
			break;
		case 2:
		case 3:
		case 4:
			if (sp_winreq_set(&wr,
					  opt == 2   ? 's'
					  : opt == 3 ? 'u'
						     : 'l',
					  optarg, "diff") < 0)
				return SP_EXIT_USAGE;
			break;
		case 'h': usage(stdout); return SP_EXIT_OK;
		default: sp_usage_hint("diff"); return SP_EXIT_USAGE;
		}
	}
	if (strcmp(format, "text") && strcmp(format, "json") && strcmp(format, "markdown")) {
		fprintf(stderr, "sqlprof diff: unknown format '%s' (text, json, markdown)\n",
			format);
		return SP_EXIT_USAGE;
	}
	if (wr.last && wr.since) {
		fprintf(stderr, "sqlprof diff: --last and --since both set the window's start; "
				"give one\n");
		return SP_EXIT_USAGE;
	}
	sp_side_set_window(&wr);
	if (argc - optind != 2) {
		fprintf(stderr, "sqlprof diff: want two profiles, BASE and NEW\n");
		sp_usage_hint("diff");
		return SP_EXIT_USAGE;
	}
	if (sp_side_load(&base, (const char *const *)&argv[optind], 1, skip, err, sizeof(err),
			 &inerr) < 0) {
		fprintf(stderr, "sqlprof diff: %s\n", err);
		return inerr == 2 ? SP_EXIT_USAGE : inerr ? SP_EXIT_INPUT : SP_EXIT_INTERNAL;
	}
	if (sp_side_load(&cand, (const char *const *)&argv[optind + 1], 1, skip, err, sizeof(err),
			 &inerr) < 0) {
		fprintf(stderr, "sqlprof diff: %s\n", err);
		sp_side_free(&base);
		return inerr == 2 ? SP_EXIT_USAGE : inerr ? SP_EXIT_INPUT : SP_EXIT_INTERNAL;
	}
	if (sp_diff_build(&base, &cand, &d) < 0) {
		fprintf(stderr, "sqlprof diff: out of memory\n");
		rc = SP_EXIT_INTERNAL;
		goto out;
	}
	if (sp_untrusted_exhausted(err, sizeof(err))) {
		fprintf(stderr, "sqlprof diff: %s\n", err);
		sp_diff_free(&d);
		rc = SP_EXIT_INPUT;
		goto out;
	}
	if (strcmp(format, "json")) { /* text for a terminal: no escape sequences */
		FILE *real = sp_term_begin(&stdout);

		if (base.np && base.p[0].qs.window.on) { /* the windows used, first */
			sp_window_print(stdout, "base window", &base.p[0].qs.window);
			sp_window_print(stdout, "new window", &cand.p[0].qs.window);
		}

		sp_diff_print(stdout, format, &base, &cand, &d, all, (size_t)top);
		if (sp_term_end(&stdout, real) < 0)
			rc = SP_EXIT_INTERNAL;
	} else {
		sp_diff_print(stdout, format, &base, &cand, &d, all, (size_t)top);
	}
	sp_diff_free(&d);
	if (rc != SP_EXIT_OK || fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, "sqlprof diff: error writing output\n");
		rc = SP_EXIT_INTERNAL;
	}
out:
	sp_side_free(&base);
	sp_side_free(&cand);
	return rc;
}
