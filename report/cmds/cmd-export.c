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
#include <strings.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>

#include "attrib.h"
#include "cmds.h"
#include "export.h"
#include "outfile.h"
#include "profile.h"
#include "series.h"
#include "untrusted.h"
#include "util.h"

#define MAX_SKIP 64
/* Sampled executions the timeline exports (chrome, perfetto) write by
 * default: about 290 bytes each in JSON (a 5 M-event profile was 1.43 GB),
 * 180 in Perfetto's protobuf: at most some 90 MB. */
#define EXPORT_MAX_EVENTS 300000

static const struct {
	const char *name;
	int (*print)(FILE *, struct sp_export *);
	const char *what;
	int binary; /* never written to a terminal */
} formats[] = {
	{ "folded", sp_export_folded, "folded stacks (flamegraph.pl, inferno, speedscope)", 0 },
	{ "svg", sp_export_svg_file, "flamegraph SVG", 0 },
	{ "perfetto", sp_export_perfetto, "Perfetto protobuf trace (ui.perfetto.dev)", 1 },
	{ "chrome", sp_export_chrome, "Chrome trace-event JSON (chrome://tracing)", 0 },
	{ "speedscope", sp_export_speedscope, "speedscope JSON (speedscope.app)", 0 },
	{ "csv", sp_export_csv, "one row per fingerprint x site", 0 },
	{ "html", sp_export_html, "self-contained HTML report", 0 },
};

/* The format an -o file name's extension names, or NULL. Longest suffix
 * first: x.speedscope.json is speedscope, another .json is chrome. */
static const struct {
	const char *suffix, *format;
} extensions[] = {
	{ ".speedscope.json", "speedscope" },
	{ ".perfetto-trace", "perfetto" },
	{ ".pftrace", "perfetto" },
	{ ".folded", "folded" },
	{ ".html", "html" },
	{ ".json", "chrome" },
	{ ".htm", "html" },
	{ ".svg", "svg" },
	{ ".csv", "csv" },
};

static const char *format_of(const char *out)
{
	size_t n = out ? strlen(out) : 0, i;

	for (i = 0; i < sizeof(extensions) / sizeof(extensions[0]); i++) {
		size_t k = strlen(extensions[i].suffix);

		if (n > k && !strcasecmp(out + n - k, extensions[i].suffix))
			return extensions[i].format;
	}
	return NULL;
}

static void usage(FILE *f)
{
	size_t i;

	fprintf(f,
		"usage: sqlprof export [--format FORMAT] [-o FILE] [OPTIONS] [PROFILE]\n"
		"\n"
		"Write PROFILE (default " SP_PROFILE_DEFAULT ") in another tool's format.\n"
		"\n"
		"  -f, --format FORMAT  one of (without -f, taken from -o's extension: .folded,\n"
		"                       .svg, .pftrace, .perfetto-trace, .json (chrome),\n"
		"                       .speedscope.json, .csv, .html):\n");
	for (i = 0; i < sizeof(formats) / sizeof(formats[0]); i++)
		fprintf(f, "                         %-10s %s\n", formats[i].name, formats[i].what);
	fprintf(f,
		"  -o, --output FILE    write to FILE (mode 0600) instead of standard output;\n"
		"                       never over a SQLite database; a binary format\n"
		"                       (perfetto) is never written to a terminal\n"
		"      --weight WHAT    flame weights (folded, svg, speedscope, html):\n"
		"                       time (estimated self ns, default) or count\n"
		"      --skip PATTERN   never attribute to frames whose function or module (or a\n"
		"                       Python frame's file) matches PATTERN (fnmatch;\n"
		"                       repeatable): sites in csv, perfetto,\n"
		"                       chrome and html\n"
		"      --all-frames     sites may be frames in installed or system libraries\n"
		"                       (by default the first frame of your own code)\n"
		"      --debug-dir DIRS symbolize the frames the profile left unknown again,\n"
		"                       with debug files from DIRS (colon-separated)\n"
		"      --intervals      with csv: one row per query and interval of an agent's\n"
		"                       profile (counts and latency over time) instead\n"
		"      --since T, --until T, --last DURATION\n"
		"                       with --intervals: only those intervals (as in\n"
		"                       sqlprof report); with chrome and perfetto: the\n"
		"                       sampled executions starting that long (10s, 5m)\n"
		"                       after the first one, and before\n"
		"      --max-events N   chrome, perfetto: at most N sampled executions, the\n"
		"                       first in time (default 300000, about 90 MB of JSON;\n"
		"                       0: all); what was left out is said on stderr and in\n"
		"                       the file\n"
		"  -h, --help           this text\n"
		"\n"
		"exit status: 0 ok, 2 usage (also: FILE is a SQLite database), 3 bad profile,\n"
		"4 output error\n"
		"\n"
		"examples:\n"
		"  sqlprof export -o flame.svg\n"
		"  sqlprof export -f folded --weight count run1.db | flamegraph.pl > count.svg\n"
		"  sqlprof export -f perfetto -o trace.pftrace && xdg-open https://ui.perfetto.dev\n"
		"  sqlprof export -f html -o report.html --skip 'db_*'\n"
		"  sqlprof export -f csv --intervals --last 1h -o series.csv app.db\n");
}

/* 1 if the output (standard output without -o) is a terminal. */
static int to_terminal(const char *out)
{
	struct stat sb;
	int fd, tty;

	if (!out)
		return isatty(STDOUT_FILENO);
	/* only a character device can be one: a FIFO is not opened (its
	 * reader would see our close as the end) */
	if (stat(out, &sb) < 0 || !S_ISCHR(sb.st_mode))
		return 0;
	fd = open(out, O_WRONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return 0; /* a new file, or one the output code reports on */
	tty = isatty(fd);
	close(fd);
	return tty;
}

/* export -f csv --intervals: the interval tables only, no symbolizing. */
static int export_intervals(const char *path, const char *out, const struct sp_winreq *wr)
{
	struct sp_out_export xo;
	struct sp_window w;
	char err[512];
	sqlite3 *db = sp_profile_open(path, err, sizeof(err));
	int ret;

	if (!db) {
		fprintf(stderr, "sqlprof export: %s\n", err);
		return SP_EXIT_INPUT;
	}
	if (sp_window_resolve(db, wr, &w, err, sizeof(err)) < 0) {
		fprintf(stderr, "sqlprof export: %s: %s\n", path, err);
		sqlite3_close(db);
		return SP_EXIT_USAGE;
	}
	ret = sp_out_export_open(&xo, out, path, err, sizeof(err));
	if (ret != SP_EXIT_OK) {
		fprintf(stderr, "sqlprof export: %s\n", err);
		sqlite3_close(db);
		return ret;
	}
	if (sp_export_series_csv(xo.f, db, &w) < 0) {
		fprintf(stderr, "sqlprof export: %s: %s\n", path,
			sp_untrusted_exhausted(err, sizeof(err)) ? err : sqlite3_errmsg(db));
		ret = SP_EXIT_INPUT;
	}
	if (sp_out_export_close(&xo, ret != SP_EXIT_OK) < 0) {
		fprintf(stderr, "sqlprof export: error writing %s\n", out ? out : "output");
		ret = SP_EXIT_INTERNAL;
	}
	sqlite3_close(db);
	return ret;
}

/* What the command line asks for. */
struct export_opts {
	const char *skip[MAX_SKIP + 1];
	const char *format, *out, *path;
	const char *win_arg[3]; /* --since, --until, --last */
	struct sp_winreq wr;
	uint64_t max_events;
	int nskip, weight, intervals;
	int fi;       /* formats[] */
	int timeline; /* chrome or perfetto: --since/--until are offsets */
};

/* The options into o. Returns -1 to go on, or the exit status. */
static int parse_options(int argc, char **argv, struct export_opts *o)
{
	static const struct option longopts[] = {
		{ "format", required_argument, NULL, 'f' },
		{ "output", required_argument, NULL, 'o' },
		{ "weight", required_argument, NULL, 1 },
		{ "skip", required_argument, NULL, 2 },
		{ "debug-dir", required_argument, NULL, 3 },
		{ "intervals", no_argument, NULL, 4 },
		{ "since", required_argument, NULL, 5 },
		{ "until", required_argument, NULL, 6 },
		{ "last", required_argument, NULL, 7 },
		{ "max-events", required_argument, NULL, 8 },
		{ "all-frames", no_argument, NULL, 9 },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int opt;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "f:o:h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'f': o->format = optarg; break;
		case 'o': o->out = optarg; break;
		case 1:
			if (!strcmp(optarg, "time"))
				o->weight = SP_XW_TIME;
			else if (!strcmp(optarg, "count"))
				o->weight = SP_XW_COUNT;
			else {
				fprintf(stderr,
					"sqlprof export: --weight wants time or count, not '%s'\n",
					optarg);
				return SP_EXIT_USAGE;
			}
			break;
		case 2:
			if (o->nskip == MAX_SKIP) {
				fprintf(stderr, "sqlprof export: at most %d --skip patterns\n",
					MAX_SKIP);
				return SP_EXIT_USAGE;
			}
			o->skip[o->nskip++] = optarg;
			break;
		case 3: sp_attrib_set_debug_dir(optarg); break;
		case 4: o->intervals = 1; break;
		case 9: sp_attrib_set_all_frames(1); break;
		case 5:
		case 6:
		case 7:
			/* checked once the format is known (a duration for chrome
			 * and perfetto, a time for --intervals) */
			o->win_arg[opt - 5] = optarg;
			break;
		case 8:
			if (sp_parse_u64(optarg, &o->max_events) < 0) {
				fprintf(stderr,
					"sqlprof export: --max-events wants a number of events "
					"(0: all)\n");
				return SP_EXIT_USAGE;
			}
			break;
		case 'h': usage(stdout); return SP_EXIT_OK;
		default: sp_usage_hint("export"); return SP_EXIT_USAGE;
		}
	}
	return -1;
}

/* The format (given, or from -o's extension) into o->fi, then the
 * profile's path. Returns -1 to go on, or the exit status. */
static int pick_format(struct export_opts *o, int argc, char **argv)
{
	if (!o->format && !(o->format = format_of(o->out))) {
		if (o->out)
			fprintf(stderr,
				"sqlprof export: cannot tell the format from '%s': give --format\n",
				o->out);
		else
			fprintf(stderr, "sqlprof export: --format is required (or -o FILE with a"
					" format's extension)\n");
		sp_usage_hint("export");
		return SP_EXIT_USAGE;
	}
	o->fi = -1;
	for (size_t i = 0; i < sizeof(formats) / sizeof(formats[0]); i++)
		if (!strcmp(o->format, formats[i].name))
			o->fi = (int)i;
	if (o->fi < 0) {
		fprintf(stderr,
			"sqlprof export: unknown format '%s' (folded, svg, perfetto, chrome,"
			" speedscope, csv, html)\n",
			o->format);
		return SP_EXIT_USAGE;
	}
	if (o->out && !*o->out) {
		fprintf(stderr, "sqlprof export: -o wants a file name\n");
		return SP_EXIT_USAGE;
	}
	if (optind < argc)
		o->path = argv[optind++];
	if (optind < argc) {
		fprintf(stderr, "sqlprof export: one profile at a time\n");
		return SP_EXIT_USAGE;
	}
	o->timeline =
		!strcmp(formats[o->fi].name, "chrome") || !strcmp(formats[o->fi].name, "perfetto");
	return -1;
}

/* --since/--until/--last against the format: offsets for a timeline, a
 * window for --intervals, nothing for the others. Returns -1 to go on, or
 * the exit status. */
static int check_window(struct export_opts *o)
{
	struct sp_winreq *wr = &o->wr;
	const char *name = formats[o->fi].name;

	for (int i = 0; i < 3; i++) {
		if (!o->win_arg[i])
			continue;
		if (o->timeline && i < 2)
			(i ? &wr->until : &wr->since)[0] = o->win_arg[i];
		else if (sp_winreq_set(wr, "sul"[i], o -> win_arg[i], "export") < 0)
			return SP_EXIT_USAGE;
	}
	if (o->timeline && wr->last) {
		fprintf(stderr,
			"sqlprof export: with %s, --since and --until are offsets from the first "
			"sampled execution (e.g. --since 10s --until 1m); --last is for --intervals\n",
			name);
		return SP_EXIT_USAGE;
	}
	if ((o->intervals || (sp_winreq_on(wr) && !o->timeline)) && strcmp(name, "csv")) {
		fprintf(stderr, "sqlprof export: --intervals%s go%s with --format csv only\n",
			sp_winreq_on(wr) ? " (and --since/--until/--last)" : "",
			sp_winreq_on(wr) ? "" : "es");
		return SP_EXIT_USAGE;
	}
	if (sp_winreq_on(wr) && !o->intervals && !o->timeline) {
		fprintf(stderr, "sqlprof export: --since, --until and --last go with --intervals "
				"(the other exports are of the whole profile)\n");
		return SP_EXIT_USAGE;
	}
	if (wr->last && wr->since) {
		fprintf(stderr, "sqlprof export: --last and --since both set the window's start; "
				"give one\n");
		return SP_EXIT_USAGE;
	}
	if (formats[o->fi].binary && !o->intervals && to_terminal(o->out)) {
		fprintf(stderr,
			"sqlprof export: %s is a binary format: not writing it to a terminal\n",
			name);
		fprintf(stderr, "Try -o FILE (e.g. -o trace.pftrace), or a pipe.\n");
		return SP_EXIT_USAGE;
	}
	return -1;
}

/* A timeline's events cut to --since/--until and --max-events (bounded by
 * default: a 5 M-event profile was a 1.43 GB JSON). Returns -1 to go on,
 * or the exit status. */
static int cut_timeline(struct sp_export *x, const struct export_opts *o)
{
	int64_t since = -1, until = -1;
	char note[400], err[512];

	if ((o->wr.since && sp_parse_duration(o->wr.since, &since) < 0 &&
	     strcmp(o->wr.since, "0")) ||
	    (o->wr.until && sp_parse_duration(o->wr.until, &until) < 0)) {
		fprintf(stderr,
			"sqlprof export: with %s, --since and --until want a duration from "
			"the first sampled execution (10s, 5m, 1h)\n",
			formats[o->fi].name);
		return SP_EXIT_USAGE;
	}
	if (o->wr.since && !strcmp(o->wr.since, "0"))
		since = 0;
	if (sp_export_window(x, since, until, o->max_events, err, sizeof(err)) < 0) {
		fprintf(stderr, "sqlprof export: %s: %s\n", o->path, err);
		return SP_EXIT_INPUT;
	}
	if (*sp_export_window_note(x, note, sizeof(note))) {
		fprintf(stderr, "sqlprof export: %s\n", note);
		fflush(stderr);
	}
	return -1;
}

/* The loaded export x, printed in o's format to o's output. */
static int write_export(struct sp_export *x, const struct export_opts *o)
{
	struct sp_out_export xo;
	char err[512];
	int ret = sp_out_export_open(&xo, o->out, o->path, err, sizeof(err));

	if (ret != SP_EXIT_OK) {
		fprintf(stderr, "sqlprof export: %s\n", err);
		return ret;
	}
	if (formats[o->fi].print(xo.f, x) < 0) {
		fprintf(stderr, "sqlprof export: out of memory\n");
		ret = SP_EXIT_INTERNAL;
	} else if (sp_untrusted_exhausted(err, sizeof(err))) {
		fprintf(stderr, "sqlprof export: %s\n", err);
		ret = SP_EXIT_INPUT;
	}
	if (sp_out_export_close(&xo, ret != SP_EXIT_OK) < 0) {
		fprintf(stderr, "sqlprof export: error writing %s\n", o->out ? o->out : "output");
		ret = SP_EXIT_INTERNAL;
	}
	return ret;
}

int cmd_export(int argc, char **argv)
{
	struct export_opts o = { .path = SP_PROFILE_DEFAULT,
				 .weight = SP_XW_TIME,
				 .max_events = EXPORT_MAX_EVENTS };
	struct sp_export x;
	char err[512];
	int ret;

	if ((ret = parse_options(argc, argv, &o)) >= 0 ||
	    (ret = pick_format(&o, argc, argv)) >= 0 || (ret = check_window(&o)) >= 0)
		return ret;
	if (o.intervals)
		return export_intervals(o.path, o.out, &o.wr);
	if ((ret = sp_export_load(&x, o.path, o.skip, o.weight, err, sizeof(err))) < 0) {
		if (sp_untrusted_exhausted(err, sizeof(err)) || strstr(err, o.path) == err)
			fprintf(stderr, "sqlprof export: %s\n", err);
		else
			fprintf(stderr, "sqlprof export: %s: %s\n", o.path, err);
		ret = sp_err_exit(ret);
	} else if (sp_untrusted_exhausted(err, sizeof(err))) {
		/* write nothing from half a profile */
		fprintf(stderr, "sqlprof export: %s\n", err);
		ret = SP_EXIT_INPUT;
	} else if (!o.timeline || (ret = cut_timeline(&x, &o)) < 0) {
		ret = write_export(&x, &o);
	}
	sp_export_free(&x);
	return ret;
}
