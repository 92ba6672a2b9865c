/* SPDX-License-Identifier: MIT */
/*
 * cmd-export.c - `sqlprof export`: options, loading, and the choice of a
 * printer (export-<format>.c). The output is written only once the
 * profile has loaded, so a bad profile never leaves a half-written file;
 * outfile.c opens it (0600, never over a SQLite database).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmds.h"
#include "export.h"
#include "outfile.h"
#include "profile.h"
#include "untrusted.h"
#include "util.h"

#define MAX_SKIP 64

static const struct {
	const char *name;
	int (*print)(FILE *, struct sp_export *);
	const char *what;
} formats[] = {
	{ "folded", sp_export_folded, "folded stacks (flamegraph.pl, inferno, speedscope)" },
	{ "svg", sp_export_svg_file, "flamegraph SVG" },
	{ "perfetto", sp_export_perfetto, "Perfetto protobuf trace (ui.perfetto.dev)" },
	{ "chrome", sp_export_chrome, "Chrome trace-event JSON (chrome://tracing)" },
	{ "speedscope", sp_export_speedscope, "speedscope JSON (speedscope.app)" },
	{ "csv", sp_export_csv, "one row per fingerprint x site" },
	{ "html", sp_export_html, "self-contained HTML report" },
};

static void usage(FILE *f)
{
	size_t i;

	fprintf(f, "usage: sqlprof export --format FORMAT [OPTIONS] [PROFILE]\n"
		   "\n"
		   "Write PROFILE (default " SP_PROFILE_DEFAULT ") in another tool's format.\n"
		   "\n"
		   "  -f, --format FORMAT  one of:\n");
	for (i = 0; i < sizeof(formats) / sizeof(formats[0]); i++)
		fprintf(f, "                         %-10s %s\n", formats[i].name, formats[i].what);
	fprintf(f, "  -o, --output FILE    write to FILE (mode 0600) instead of standard output;\n"
		   "                       never over a SQLite database\n"
		   "      --weight WHAT    flame weights (folded, svg, speedscope, html):\n"
		   "                       time (estimated self ns, default) or count\n"
		   "      --skip PATTERN   never attribute to frames whose function or module (or a\n"
		   "                       Python frame's file) matches PATTERN (fnmatch;\n"
		   "                       repeatable): sites in csv, perfetto,\n"
		   "                       chrome and html\n"
		   "  -h, --help           this text\n"
		   "\n"
		   "exit status: 0 ok, 2 usage (also: FILE is a SQLite database), 3 bad profile,\n"
		   "4 output error\n"
		   "\n"
		   "examples:\n"
		   "  sqlprof export -f svg -o flame.svg\n"
		   "  sqlprof export -f folded --weight count run1.db | flamegraph.pl > count.svg\n"
		   "  sqlprof export -f perfetto -o trace.pftrace && xdg-open https://ui.perfetto.dev\n"
		   "  sqlprof export -f html -o report.html --skip 'db_*'\n");
}

int cmd_export(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "format", required_argument, NULL, 'f' },
		{ "output", required_argument, NULL, 'o' },
		{ "weight", required_argument, NULL, 1 },
		{ "skip", required_argument, NULL, 2 },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *skip[MAX_SKIP + 1] = { NULL };
	const char *format = NULL, *out = NULL, *path = SP_PROFILE_DEFAULT;
	int nskip = 0, weight = SP_XW_TIME, opt, fi = -1, ret = SP_EXIT_OK;
	struct sp_export x;
	struct sp_out_export xo;
	char err[512];
	size_t i;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "f:o:h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'f': format = optarg; break;
		case 'o': out = optarg; break;
		case 1:
			if (!strcmp(optarg, "time"))
				weight = SP_XW_TIME;
			else if (!strcmp(optarg, "count"))
				weight = SP_XW_COUNT;
			else {
				fprintf(stderr, "sqlprof export: --weight wants time or count, not '%s'\n",
					optarg);
				return SP_EXIT_USAGE;
			}
			break;
		case 2:
			if (nskip == MAX_SKIP) {
				fprintf(stderr, "sqlprof export: at most %d --skip patterns\n", MAX_SKIP);
				return SP_EXIT_USAGE;
			}
			skip[nskip++] = optarg;
			break;
		case 'h': usage(stdout); return SP_EXIT_OK;
		default: usage(stderr); return SP_EXIT_USAGE;
		}
	}
	if (!format) {
		fprintf(stderr, "sqlprof export: --format is required\n");
		usage(stderr);
		return SP_EXIT_USAGE;
	}
	for (i = 0; i < sizeof(formats) / sizeof(formats[0]); i++)
		if (!strcmp(format, formats[i].name))
			fi = (int)i;
	if (fi < 0) {
		fprintf(stderr, "sqlprof export: unknown format '%s' (folded, svg, perfetto, chrome,"
				" speedscope, csv, html)\n", format);
		return SP_EXIT_USAGE;
	}
	if (out && !*out) {
		fprintf(stderr, "sqlprof export: -o wants a file name\n");
		return SP_EXIT_USAGE;
	}
	if (optind < argc)
		path = argv[optind++];
	if (optind < argc) {
		fprintf(stderr, "sqlprof export: one profile at a time\n");
		return SP_EXIT_USAGE;
	}
	if (sp_export_load(&x, path, skip, weight, err, sizeof(err)) < 0) {
		if (sp_untrusted_exhausted(err, sizeof(err)) || strstr(err, path) == err)
			fprintf(stderr, "sqlprof export: %s\n", err);
		else
			fprintf(stderr, "sqlprof export: %s: %s\n", path, err);
		sp_export_free(&x);
		return strcmp(err, "out of memory") ? SP_EXIT_INPUT : SP_EXIT_INTERNAL;
	}
	if (sp_untrusted_exhausted(err, sizeof(err))) { /* write nothing from half a profile */
		fprintf(stderr, "sqlprof export: %s\n", err);
		sp_export_free(&x);
		return SP_EXIT_INPUT;
	}
	ret = sp_out_export_open(&xo, out, path, err, sizeof(err));
	if (ret != SP_EXIT_OK) {
		fprintf(stderr, "sqlprof export: %s\n", err);
		sp_export_free(&x);
		return ret;
	}
	if (formats[fi].print(xo.f, &x) < 0) {
		fprintf(stderr, "sqlprof export: out of memory\n");
		ret = SP_EXIT_INTERNAL;
	} else if (sp_untrusted_exhausted(err, sizeof(err))) {
		fprintf(stderr, "sqlprof export: %s\n", err);
		ret = SP_EXIT_INPUT;
	}
	if (sp_out_export_close(&xo, ret != SP_EXIT_OK) < 0) {
		fprintf(stderr, "sqlprof export: error writing %s\n", out ? out : "output");
		ret = SP_EXIT_INTERNAL;
	}
	sp_export_free(&x);
	return ret;
}
