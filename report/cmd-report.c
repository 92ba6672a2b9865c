/* SPDX-License-Identifier: MIT */
/*
 * cmd-report.c - `sqlprof report`: per-query totals from a profile, as a
 * table, CSV or JSON. One printer per format; loading is in query.c.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmds.h"
#include "profile.h"
#include "query.h"
#include "util.h"

struct report_opts {
	const char *sort;
	const char *format;
	uint64_t top;
	size_t width;
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: sqlprof report [OPTIONS] [PROFILE]\n"
		"\n"
		"Print one row per query fingerprint from PROFILE (default " SP_PROFILE_DEFAULT ").\n"
		"\n"
		"  -s, --sort KEY       total (default), count, mean, p50, p95, p99, max, rows,\n"
		"                       self, errors, vm\n"
		"  -n, --top N          only the first N rows\n"
		"  -f, --format FMT     table (default), csv, json\n"
		"  -w, --width N        shorten SQL to N bytes in the table (default 80, 0 = full)\n"
		"  -h, --help           this text\n"
		"\n"
		"examples:\n"
		"  sqlprof report --top 10\n"
		"  sqlprof report --sort p99 --format json run1.db\n");
}

static void print_table(const struct sp_qset *qs, const struct report_opts *o, size_t n)
{
	char b[7][32];
	size_t i;
	uint64_t total = 0;

	for (i = 0; i < qs->n; i++)
		total += qs->rows[i].self_ns;
	printf("# %llu executions of %zu queries in %llu process(es); db time %s (self)",
	       (unsigned long long)qs->executions, qs->n, (unsigned long long)qs->processes,
	       sp_fmt_ns(b[0], sizeof(b[0]), (double)total));
	printf("; lost %llu", (unsigned long long)qs->lost);
	if (qs->untracked)
		printf("; untracked %llu", (unsigned long long)qs->untracked);
	if (qs->bad_messages)
		printf("; bad messages %llu", (unsigned long long)qs->bad_messages);
	printf("\n");
	if (qs->command)
		printf("# command: %s\n", qs->command);
	printf("%10s %10s %10s %10s %10s %10s %10s %10s  %s\n", "COUNT", "TOTAL", "MEAN", "P50", "P95",
	       "P99", "MAX", "ROWS", "SQL");
	for (i = 0; i < n; i++) {
		const struct sp_qrow *r = &qs->rows[i];
		char *sql = o->width ? sp_shorten(r->fingerprint, o->width) : strdup(r->fingerprint);

		if (!sql)
			continue;
		sp_one_line(sql);
		printf("%10llu %10s %10s %10s %10s %10s %10s %10llu  %s%s\n",
		       (unsigned long long)r->count, sp_fmt_ns(b[0], 32, (double)r->total_ns),
		       sp_fmt_ns(b[1], 32, r->mean_ns), sp_fmt_ns(b[2], 32, (double)r->p50_ns),
		       sp_fmt_ns(b[3], 32, (double)r->p95_ns), sp_fmt_ns(b[4], 32, (double)r->p99_ns),
		       sp_fmt_ns(b[5], 32, (double)r->max_ns), (unsigned long long)r->rows,
		       strcmp(r->kind, "exec") ? "" : "[exec] ", sql);
		free(sql);
	}
	if (n < qs->n)
		printf("# ... %zu more queries (--top)\n", qs->n - n);
}

static void print_csv(const struct sp_qset *qs, size_t n)
{
	size_t i;

	printf("fingerprint_id,kind,fingerprint,sql,count,total_ns,self_ns,mean_ns,p50_ns,p95_ns,"
	       "p99_ns,max_ns,min_ns,rows,vm_steps,fullscan_steps,sorts,autoindex,errors,prepares\n");
	for (i = 0; i < n; i++) {
		const struct sp_qrow *r = &qs->rows[i];

		printf("%016llx,%s,", (unsigned long long)r->fp_id, r->kind);
		sp_csv_str(stdout, r->fingerprint);
		putchar(',');
		sp_csv_str(stdout, r->sql);
		printf(",%llu,%llu,%llu,%.0f,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu\n",
		       (unsigned long long)r->count, (unsigned long long)r->total_ns,
		       (unsigned long long)r->self_ns, r->mean_ns, (unsigned long long)r->p50_ns,
		       (unsigned long long)r->p95_ns, (unsigned long long)r->p99_ns,
		       (unsigned long long)r->max_ns, (unsigned long long)r->min_ns,
		       (unsigned long long)r->rows, (unsigned long long)r->vm_steps,
		       (unsigned long long)r->fullscan_steps, (unsigned long long)r->sorts,
		       (unsigned long long)r->autoindex, (unsigned long long)r->errors,
		       (unsigned long long)r->prepares);
	}
}

static void print_json(const struct sp_qset *qs, size_t n)
{
	size_t i;

	printf("{\"lost\": %llu, \"executions\": %llu, \"processes\": %llu, \"untracked\": %llu,"
	       " \"queries\": [",
	       (unsigned long long)qs->lost, (unsigned long long)qs->executions,
	       (unsigned long long)qs->processes, (unsigned long long)qs->untracked);
	for (i = 0; i < n; i++) {
		const struct sp_qrow *r = &qs->rows[i];

		printf("%s\n  {\"fingerprint_id\": \"%016llx\", \"kind\": \"%s\", \"fingerprint\": ",
		       i ? "," : "", (unsigned long long)r->fp_id, r->kind);
		sp_json_str(stdout, r->fingerprint);
		printf(", \"sql\": ");
		sp_json_str(stdout, r->sql);
		printf(", \"count\": %llu, \"total_ns\": %llu, \"self_ns\": %llu, \"mean_ns\": %.0f,"
		       " \"p50_ns\": %llu, \"p95_ns\": %llu, \"p99_ns\": %llu, \"max_ns\": %llu,"
		       " \"min_ns\": %llu, \"rows\": %llu, \"vm_steps\": %llu, \"fullscan_steps\": %llu,"
		       " \"sorts\": %llu, \"autoindex\": %llu, \"errors\": %llu, \"nested\": %llu,"
		       " \"prepares\": %llu, \"samples\": %llu}",
		       (unsigned long long)r->count, (unsigned long long)r->total_ns,
		       (unsigned long long)r->self_ns, r->mean_ns, (unsigned long long)r->p50_ns,
		       (unsigned long long)r->p95_ns, (unsigned long long)r->p99_ns,
		       (unsigned long long)r->max_ns, (unsigned long long)r->min_ns,
		       (unsigned long long)r->rows, (unsigned long long)r->vm_steps,
		       (unsigned long long)r->fullscan_steps, (unsigned long long)r->sorts,
		       (unsigned long long)r->autoindex, (unsigned long long)r->errors,
		       (unsigned long long)r->nested, (unsigned long long)r->prepares,
		       (unsigned long long)r->samples);
	}
	printf("\n]}\n");
}

int cmd_report(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "sort", required_argument, NULL, 's' },
		{ "top", required_argument, NULL, 'n' },
		{ "format", required_argument, NULL, 'f' },
		{ "width", required_argument, NULL, 'w' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct report_opts o = { .sort = "total", .format = "table", .top = 0, .width = 80 };
	const char *path = SP_PROFILE_DEFAULT;
	struct sp_qset qs;
	sqlite3 *db;
	char err[512];
	uint64_t u;
	size_t n;
	int opt;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "s:n:f:w:h", longopts, NULL)) != -1) {
		switch (opt) {
		case 's': o.sort = optarg; break;
		case 'f': o.format = optarg; break;
		case 'n':
			if (sp_parse_u64(optarg, &o.top) < 0) {
				fprintf(stderr, "sqlprof report: --top wants a non-negative integer, not '%s'\n", optarg);
				return SP_EXIT_USAGE;
			}
			break;
		case 'w':
			if (sp_parse_u64(optarg, &u) < 0 || u > 1000000) {
				fprintf(stderr, "sqlprof report: --width wants an integer\n");
				return SP_EXIT_USAGE;
			}
			o.width = (size_t)u;
			break;
		case 'h': usage(stdout); return SP_EXIT_OK;
		default: usage(stderr); return SP_EXIT_USAGE;
		}
	}
	if (strcmp(o.format, "table") && strcmp(o.format, "csv") && strcmp(o.format, "json")) {
		fprintf(stderr, "sqlprof report: unknown format '%s' (table, csv, json)\n", o.format);
		return SP_EXIT_USAGE;
	}
	if (optind < argc)
		path = argv[optind++];
	if (optind < argc) {
		fprintf(stderr, "sqlprof report: one profile at a time\n");
		return SP_EXIT_USAGE;
	}
	db = sp_profile_open(path, err, sizeof(err));
	if (!db) {
		fprintf(stderr, "sqlprof report: %s\n", err);
		return SP_EXIT_INPUT;
	}
	if (sp_qset_load(db, &qs, err, sizeof(err)) < 0) {
		fprintf(stderr, "sqlprof report: %s: %s\n", path, err);
		sqlite3_close(db);
		return SP_EXIT_INPUT;
	}
	sqlite3_close(db);
	if (sp_qset_sort(&qs, o.sort) < 0) {
		fprintf(stderr, "sqlprof report: unknown sort key '%s'\n", o.sort);
		sp_qset_free(&qs);
		return SP_EXIT_USAGE;
	}
	n = o.top && o.top < qs.n ? (size_t)o.top : qs.n;
	if (!strcmp(o.format, "json"))
		print_json(&qs, n);
	else if (!strcmp(o.format, "csv"))
		print_csv(&qs, n);
	else
		print_table(&qs, &o, n);
	sp_qset_free(&qs);
	if (fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, "sqlprof report: error writing output\n");
		return SP_EXIT_INTERNAL;
	}
	return SP_EXIT_OK;
}
