/* SPDX-License-Identifier: MIT */
/*
 * cmd-check.c - `sqlprof check --baseline BASE NEW`: the CI gate. Loads
 * both sides and compares them (compare.c), judges the comparison
 * (gate.c: the rules, and why they do not flake), prints the verdict
 * (output/gate-print.c: text, JSON or Markdown, optionally JUnit XML with
 * one test case per fingerprint), and exits 0 (within bounds), 1
 * (regression), 2 (usage) or 3 (unreadable profile).
 */
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attrib.h"
#include "cmds.h"
#include "gate-print.h"
#include "gate.h"
#include "untrusted.h"
#include "util.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: sqlprof check --baseline BASE [--baseline BASE2 ...] [OPTIONS] NEW [NEW2 ...]\n"
		"\n"
		"Fail (exit 1) when the candidate profile(s) NEW regress against the baseline(s).\n"
		"Several profiles a side (or profiles recorded with `record --repeat N`) are runs;\n"
		"deterministic metrics are compared per run, as medians over the profiles.\n"
		"\n"
		"  -b, --baseline FILE          baseline profile (required; repeatable)\n"
		"      --max-count-increase P   executions of a query may grow by P%% (default 0;\n"
		"                               'off' to disable)\n"
		"      --max-vm-steps-increase P  VM steps of a query may grow by P%% (default 10)\n"
		"      --max-time-increase P    median time per execution may grow by P%% (default 10);\n"
		"                               judged only with >= %d runs a side, and only when a\n"
		"                               two-sided Mann-Whitney U test gives p < %.2f\n"
		"      --min-time-share P       judge the time of a query only if its added time is\n"
		"                               >= P%% of the baseline's db time per run (default 1)\n"
		"      --fail-on RULES          comma-separated, default new-query,plan-change,\n"
		"                               new-fullscan,n-plus-one,reprepare,temp-btree,auto-index;\n"
		"                               also full-scan (doctor: big-table scans), duplicate\n"
		"                               (doctor: the same values again; needs --rate 1 or a\n"
		"                               fixed --seed on both sides), all, none\n"
		"      --junit FILE             write JUnit XML, one test case per query\n"
		"  -f, --format FMT             text (default), json, markdown\n"
		"      --skip PATTERN           never attribute to frames matching PATTERN (repeatable)\n"
		"      --all-frames             sites may be frames in installed or system libraries\n"
		"      --gate-sqlite-internal   judge SQLite's own statements (its schema loads,\n"
		"                               statements without SQL text) like the program's;\n"
		"                               by default they are listed as expected, not judged\n"
		"      --since T, --until T, --last DURATION\n"
		"                               judge a time window of each profile's intervals\n"
		"                               (as sqlprof report reads it)\n"
		"  -h, --help                   this text\n"
		"\n"
		"Rules: new-query (a fingerprint the baseline never ran), plan-change (a table read\n"
		"through an index is now scanned, or a temp B-tree / automatic index appeared),\n"
		"new-fullscan (full-scan steps from 0 to > 0, or a new query scanning), and the query\n"
		"doctor's findings that the baseline does not have: n-plus-one, reprepare,\n"
		"temp-btree, auto-index, full-scan, duplicate.\n"
		"\n"
		"Exit status: 0 within bounds, 1 regression, 2 usage, 3 unreadable profile, 4 internal.\n"
		"\n"
		"examples:\n"
		"  sqlprof check --baseline main.db pr.db\n"
		"  sqlprof check --baseline main.db pr.db --junit sqlprof.xml --format markdown\n"
		"  sqlprof check -b m1.db -b m2.db -b m3.db -b m4.db -b m5.db p1.db p2.db p3.db p4.db p5.db\n",
		SP_CHECK_MIN_TIME_RUNS, SP_CHECK_ALPHA);
}

static int parse_pct(const char *s, double *out)
{
	if (!strcmp(s, "off")) {
		*out = -1;
		return 0;
	}
	return sp_parse_double(s, 0, 1e9, out);
}

static int parse_rules(const char *s, unsigned *out)
{
	char buf[512], *tok, *save;

	if (strlen(s) >= sizeof(buf))
		return -1;
	snprintf(buf, sizeof(buf), "%s", s);
	*out = 0;
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		int r;

		if (!strcmp(tok, "none"))
			continue;
		if (!strcmp(tok, "all")) {
			*out |= SP_CHECK_DEFAULT_FAIL_ON | (1u << SP_CHK_FULLSCAN);
			continue;
		}
		for (r = 0; r <= SP_CHK_FULLSCAN; r++)
			if (!strcmp(tok, sp_check_rule_names[r]))
				break;
		if (r > SP_CHK_FULLSCAN)
			return -1;
		*out |= 1u << r;
	}
	return 0;
}

/* Each profile's time window (--since, --until, --last), in text. */
static void print_windows(const struct sp_side *base, const struct sp_side *cand)
{
	for (size_t i = 0; base->p[0].qs.window.on && i < base->np + cand->np; i++) {
		const struct sp_prof *p = i < base->np ? &base->p[i] : &cand->p[i - base->np];
		char label[64];

		snprintf(label, sizeof(label), "%s %zu window",
			 i < base->np ? "baseline" : "candidate",
			 (i < base->np ? i : i - base->np) + 1);
		sp_window_print(stdout, label, &p->qs.window);
	}
}

/* The options of check (long-only ones numbered; an option's index in
 * the table names it in a message). */
static const struct option longopts[] = {
	{ "baseline", required_argument, NULL, 'b' },
	{ "max-count-increase", required_argument, NULL, 1 },
	{ "max-vm-steps-increase", required_argument, NULL, 2 },
	{ "max-time-increase", required_argument, NULL, 3 },
	{ "fail-on", required_argument, NULL, 4 },
	{ "junit", required_argument, NULL, 5 },
	{ "skip", required_argument, NULL, 6 },
	{ "min-time-share", required_argument, NULL, 7 },
	{ "format", required_argument, NULL, 'f' },
	{ "since", required_argument, NULL, 8 },
	{ "until", required_argument, NULL, 9 },
	{ "last", required_argument, NULL, 10 },
	{ "all-frames", no_argument, NULL, 11 },
	{ "gate-sqlite-internal", no_argument, NULL, 12 },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

/* The options' values that getopt cannot check; the window set for both
 * sides; the profiles' count. -1 to go on, else the exit code. */
static int check_args(int argc, struct sp_check_opts *o, struct sp_winreq *wr)
{
	if (strcmp(o->format, "text") && strcmp(o->format, "json") &&
	    strcmp(o->format, "markdown")) {
		fprintf(stderr, "sqlprof check: unknown format '%s' (text, json, markdown)\n",
			o->format);
		return SP_EXIT_USAGE;
	}
	if (wr->last && wr->since) {
		fprintf(stderr, "sqlprof check: --last and --since both set the window's start; "
				"give one\n");
		return SP_EXIT_USAGE;
	}
	sp_side_set_window(wr);
	if (!o->nbase) {
		fprintf(stderr, "sqlprof check: --baseline BASE is required\n");
		sp_usage_hint("check");
		return SP_EXIT_USAGE;
	}
	if (optind == argc) {
		fprintf(stderr, "sqlprof check: want at least one candidate profile NEW\n");
		sp_usage_hint("check");
		return SP_EXIT_USAGE;
	}
	if ((size_t)(argc - optind) > SP_CHECK_MAX_PROFILES) {
		fprintf(stderr, "sqlprof check: at most %d candidates\n", SP_CHECK_MAX_PROFILES);
		return SP_EXIT_USAGE;
	}
	return -1;
}

/* Parse check's options into o and wr (argv[optind..] the candidates).
 * -1 to go on, else the exit code (usage errors, --help). */
static int parse_opts(int argc, char **argv, struct sp_check_opts *o, struct sp_winreq *wr)
{
	int opt, li;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "b:f:h", longopts, &li)) != -1) {
		switch (opt) {
		case 'b':
			if (o->nbase == SP_CHECK_MAX_PROFILES) {
				fprintf(stderr, "sqlprof check: at most %d baselines\n",
					SP_CHECK_MAX_PROFILES);
				return SP_EXIT_USAGE;
			}
			o->base[o->nbase++] = optarg;
			break;
		case 1:
		case 2:
		case 3:
			if (parse_pct(optarg, opt == 1   ? &o->max_count
					      : opt == 2 ? &o->max_vm
							 : &o->max_time) < 0) {
				/* long-only options: getopt_long set li, the
				 * option's index (not its value) */
				fprintf(stderr,
					"sqlprof check: --%s wants a percentage >= 0 or 'off', not '%s'\n",
					longopts[li].name, optarg);
				return SP_EXIT_USAGE;
			}
			break;
		case 4:
			if (parse_rules(optarg, &o->fail_on) < 0) {
				fprintf(stderr,
					"sqlprof check: --fail-on: unknown rule in '%s' (new-query,"
					" plan-change, new-fullscan, n-plus-one, reprepare, temp-btree,"
					" auto-index, full-scan, all, none)\n",
					optarg);
				return SP_EXIT_USAGE;
			}
			break;
		case 5: o->junit = optarg; break;
		case 6:
			if (o->nskip == SP_CHECK_MAX_SKIP) {
				fprintf(stderr, "sqlprof check: at most %d --skip patterns\n",
					SP_CHECK_MAX_SKIP);
				return SP_EXIT_USAGE;
			}
			o->skip[o->nskip++] = optarg;
			break;
		case 7:
			if (sp_parse_double(optarg, 0, 100, &o->min_time_share) < 0) {
				fprintf(stderr,
					"sqlprof check: --min-time-share wants a percentage 0..100, not '%s'\n",
					optarg);
				return SP_EXIT_USAGE;
			}
			break;
		case 8:
		case 9:
		case 10:
			if (sp_winreq_set(wr,
					  opt == 8   ? 's'
					  : opt == 9 ? 'u'
						     : 'l',
					  optarg, "check") < 0)
				return SP_EXIT_USAGE;
			break;
		case 'f': o->format = optarg; break;
		case 11: sp_attrib_set_all_frames(1); break;
		case 12: o->judge_own = 1; break;
		case 'h': usage(stdout); return SP_EXIT_OK;
		default: sp_usage_hint("check"); return SP_EXIT_USAGE;
		}
	}
	return check_args(argc, o, wr);
}

/* The verdict in o->format on stdout, then the JUnit file if asked for.
 * 0, or -1 with a message when either could not be written. */
static int print_result(const struct sp_check_opts *o, const struct sp_side *base,
			const struct sp_side *cand, const struct sp_diff *d,
			const struct sp_check_result *res)
{
	int werr = 0;

	if (!strcmp(o->format, "json")) {
		sp_check_print_json(base, cand, d, res);
	} else { /* text for a terminal: no escape sequences */
		FILE *real = sp_term_begin(&stdout);

		if (!strcmp(o->format, "text"))
			print_windows(base, cand);
		if (!strcmp(o->format, "markdown"))
			sp_check_print_md(base, cand, d, res);
		else
			sp_check_print_text(base, cand, d, res);
		werr = sp_term_end(&stdout, real) < 0;
	}
	if (werr || fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, "sqlprof check: error writing output\n");
		return -1;
	}
	if (o->junit && sp_check_write_junit(o->junit, base, cand, d, res) < 0) {
		fprintf(stderr, "sqlprof check: cannot write %s\n", o->junit);
		return -1;
	}
	return 0;
}

int cmd_check(int argc, char **argv)
{
	static struct sp_winreq wr; /* sp_side_set_window keeps its address */
	struct sp_check_opts o = { .format = "text",
				   .max_count = 0,
				   .max_vm = 10,
				   .max_time = 10,
				   .min_time_share = 1,
				   .fail_on = SP_CHECK_DEFAULT_FAIL_ON };
	struct sp_doctor_opts dopt = SP_DOCTOR_DEFAULTS;
	struct sp_side base, cand;
	struct sp_findings fb = { 0 }, fc = { 0 };
	struct sp_diff d = { 0 };
	struct sp_check_result res = { 0 };
	char err[1024];
	int inerr, rc;

	/* one thread: no mutex in each sqlite3_column_* (a no-op once a
	 * connection is open) */
	sqlite3_config(SQLITE_CONFIG_SINGLETHREAD);
	memset(&wr, 0, sizeof(wr));
	if ((rc = parse_opts(argc, argv, &o, &wr)) >= 0)
		return rc;
	if (sp_side_load(&base, o.base, o.nbase, o.skip, err, sizeof(err), &inerr) < 0) {
		fprintf(stderr, "sqlprof check: baseline: %s\n", err);
		return inerr == 2 ? SP_EXIT_USAGE : inerr ? SP_EXIT_INPUT : SP_EXIT_INTERNAL;
	}
	if (sp_side_load(&cand, (const char *const *)&argv[optind], (size_t)(argc - optind), o.skip,
			 err, sizeof(err), &inerr) < 0) {
		fprintf(stderr, "sqlprof check: candidate: %s\n", err);
		sp_side_free(&base);
		return inerr == 2 ? SP_EXIT_USAGE : inerr ? SP_EXIT_INPUT : SP_EXIT_INTERNAL;
	}
	rc = SP_EXIT_INTERNAL;
	if (sp_diff_build(&base, &cand, &d) < 0 ||
	    sp_doctor_find(base.p[0].db, &base.agg, &base.p[0].at, &dopt, &fb) < 0 ||
	    sp_doctor_find(cand.p[0].db, &cand.agg, &cand.p[0].at, &dopt, &fc) < 0 ||
	    sp_check_judge(&o, &base, &cand, &d, &fb, &fc, &res) < 0) {
		fprintf(stderr, "sqlprof check: out of memory\n");
		goto out;
	}
	if (sp_untrusted_exhausted(err, sizeof(err))) { /* never judge half a profile */
		fprintf(stderr, "sqlprof check: %s\n", err);
		rc = SP_EXIT_INPUT;
		goto out;
	}
	if (print_result(&o, &base, &cand, &d, &res) < 0)
		goto out;
	rc = res.n ? SP_EXIT_REGRESSION : SP_EXIT_OK;
out:
	sp_check_result_free(&res);
	sp_findings_free(&fb);
	sp_findings_free(&fc);
	sp_diff_free(&d);
	sp_side_free(&base);
	sp_side_free(&cand);
	return rc;
}
