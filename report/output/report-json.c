/* SPDX-License-Identifier: MIT */
/*
 * report-json.c - `sqlprof report --format json`: the totals, the run, the window and
 * every query with its sites, plan, findings and failures as one JSON
 * object. --by function/site's JSON is report-group.c.
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attrib.h"
#include "doctor.h"
#include "fit.h"
#include "query.h"
#include "report.h"
#include "util.h"

/* A site's JSON fields from "function"'s value on: function, file, line,
 * module and, without symbols, offset. */
static void print_json_site_fields(const struct sp_site *st)
{
	sp_json_str(stdout, st->function);
	printf(", \"file\": ");
	sp_json_str(stdout, st->file);
	printf(", \"line\": %d, \"module\": ", st->line);
	sp_json_str(stdout, st->module);
	if (st->offset) /* no symbols: the pc's offset in the module's file */
		printf(", \"offset\": %llu", (unsigned long long)st->offset);
}

static void print_json_sites(const struct sp_attrib *a, const struct sp_qrow *r)
{
	size_t j, nix;
	const size_t *ix = sp_attrib_query_sites(a, r->fp_id, r->kind == SP_QK_EXEC, &nix);
	int first = 1;

	printf(", \"sites\": [");
	for (j = 0; j < nix; j++) {
		const struct sp_qsite *q = &a->qs[ix[j]];

		printf("%s{\"function\": ", first ? "" : ", ");
		first = 0;
		if (q->site < 0) {
			printf("null, \"file\": null, \"line\": 0, \"module\": null, \"unattributed\": true");
		} else {
			print_json_site_fields(&a->sites[q->site]);
		}
		/* the frame in an installed library that the site passed over
		 * (its example stack's): the site --all-frames would give */
		if (q->lib_site >= 0 && q->lib_site != q->site) {
			printf(", \"library_site\": {\"function\": ");
			print_json_site_fields(&a->sites[q->lib_site]);
			printf("}");
		}
		if (q->site >= 0) { /* issue 26: its example stack is a worker thread's */
			const struct sp_frame *w =
				sp_stk_worker(sp_attrib_stack(a, q->pid, q->stack_id));
			char b2[1024];

			if (w) {
				printf(", \"worker_thread\": ");
				sp_json_str(stdout, sp_where(b2, sizeof(b2), w->function, w->file,
							     w->line, w->module, w->offset));
			}
		}
		printf(", \"samples\": %llu, \"est_count\": %.0f, \"est_total_ns\": %.0f}",
		       (unsigned long long)q->samples, q->est_count, q->est_total_ns);
	}
	printf("]");
}

static void print_json_deaths(const struct sp_qset *qs)
{
	const char *p = qs->died;
	struct sp_rep_death d;
	int first = 1;

	/* an agent's snapshot: nothing exited (exit_status null) */
	printf(" \"agent_snapshot\": %s, \"exit_status\": ", sp_rep_agent ? "true" : "false");
	if (sp_rep_agent)
		printf("null");
	else
		printf("%lld", (long long)qs->exit_status);
	printf(", \"duration_ns\": %lld, \"died\": [", (long long)qs->duration_ns);
	while (sp_rep_next_death(&p, &d)) {
		printf("%s{\"pid\": %lld, \"exe\": ", first ? "" : ", ", d.pid);
		sp_json_str(stdout, d.exe);
		printf(", \"running\": %u, \"sql\": ", d.running);
		if (d.sql[0])
			sp_json_str(stdout, d.sql);
		else
			printf("null");
		printf("}");
		first = 0;
	}
	printf("],");
}

/* A stack as a JSON list of frames, leaf first, libsqlprof's left out. */
static void print_json_stack(const struct sp_attrib *a, uint64_t pid, uint64_t stack_id)
{
	const struct sp_stk *sk = stack_id ? sp_attrib_stack(a, pid, stack_id) : NULL;
	uint32_t i;
	int first = 1;

	printf("[");
	for (i = 0; sk && i < sk->nframes; i++) {
		const struct sp_frame *f = &sk->frames[i];

		if (sp_is_profiler_module(f->module))
			continue;
		printf("%s{\"function\": ", first ? "" : ", ");
		first = 0;
		sp_json_str(stdout, f->function);
		printf(", \"file\": ");
		sp_json_str(stdout, f->file);
		printf(", \"line\": %d, \"module\": ", f->line);
		sp_json_str(stdout, f->module);
		if (f->offset) /* no source file: the pc's offset in the module's file */
			printf(", \"offset\": %llu", (unsigned long long)f->offset);
		printf(", \"inlined\": %s}", f->inlined ? "true" : "false");
	}
	printf("]");
}

/* The plan's rows as nodes {id, parent, detail}, in the plan's order. */
static void print_json_plan_nodes(const char *plan)
{
	struct sp_plan_node *v = NULL;
	int n = plan ? sp_plan_nodes(plan, &v) : 0, i;

	printf(", \"plan_nodes\": ");
	if (!plan || n < 0) {
		printf("null");
		return;
	}
	printf("[");
	for (i = 0; i < n; i++) {
		char *d = strndup(v[i].detail, (size_t)v[i].detail_len);

		printf("%s{\"id\": %d, \"parent\": %d, \"detail\": ", i ? ", " : "", v[i].id,
		       v[i].parent);
		sp_json_str(stdout, d ? d : "");
		printf("}");
		free(d);
	}
	printf("]");
	free(v);
}

static void print_json_findings(const struct sp_findings *fs)
{
	size_t i;

	printf(", \"findings\": [");
	for (i = 0; fs && i < fs->n; i++) {
		const struct sp_finding *x = &fs->f[i];

		printf("%s\n  {\"kind\": ", i ? "," : "");
		sp_json_str(stdout, sp_rule_name(x->rule));
		printf(", \"fingerprint_id\": \"%016llx\", \"query_kind\": \"%s\", \"fingerprint\": ",
		       (unsigned long long)x->q->fp_id, sp_qkind_name(x->q->kind));
		sp_json_str(stdout, x->q->fingerprint);
		printf(", \"sql\": ");
		sp_json_str(stdout, x->q->sql);
		printf(", \"site\": ");
		sp_json_str(stdout, x->site);
		printf(", \"evidence\": ");
		sp_json_str(stdout, x->evidence);
		printf(", \"suggestion\": ");
		sp_json_str(stdout, x->suggestion);
		printf("}");
	}
	printf("%s]", fs && fs->n ? "\n" : "");
}

static void print_json_failures(const struct sp_failures *fs, const struct sp_attrib *a)
{
	size_t i;

	printf(", \"failures\": [");
	for (i = 0; i < fs->n; i++) {
		const struct sp_failure *x = &fs->f[i];

		printf("%s\n  {\"fingerprint_id\": \"%016llx\", \"kind\": \"%s\", \"fingerprint\": ",
		       i ? "," : "", (unsigned long long)x->fp_id, sp_qkind_name(x->kind));
		sp_json_str(stdout, x->fingerprint);
		printf(", \"code\": %d, \"message\": ", x->rc);
		sp_json_str(stdout, x->message);
		printf(", \"count\": %llu, \"pid\": %llu, \"stack\": ",
		       (unsigned long long)x->count, (unsigned long long)x->pid);
		print_json_stack(a, x->pid, x->stack_id);
		printf("}");
	}
	printf("%s]", fs->n ? "\n" : "");
}

/* "window": the intervals the report sums (null: the whole profile). */
static void print_json_window(const struct sp_window *w)
{
	char a[40];

	if (!w->on) {
		printf(" \"window\": null,");
		return;
	}
	printf(" \"window\": {\"since_ns\": ");
	if (w->since_ns == INT64_MIN)
		printf("null");
	else
		printf("%lld", (long long)w->since_ns);
	printf(", \"until_ns\": ");
	if (w->until_ns == INT64_MAX)
		printf("null");
	else
		printf("%lld", (long long)w->until_ns);
	printf(", \"intervals\": %llu, \"start_ns\": ", (unsigned long long)w->n);
	if (w->n)
		printf("%lld, \"start\": \"%s\"", (long long)w->first_ns,
		       sp_series_iso(w->first_ns, a, sizeof(a)));
	else
		printf("null, \"start\": null");
	printf(", \"end_ns\": ");
	if (w->n)
		printf("%lld, \"end\": \"%s\"", (long long)w->end_ns,
		       sp_series_iso(w->end_ns, a, sizeof(a)));
	else
		printf("null, \"end\": null");
	printf(", \"profile_start_ns\": %lld, \"profile_end_ns\": %lld},",
	       (long long)w->profile_first_ns, (long long)w->profile_end_ns);
}

void sp_rep_json(const struct sp_qset *qs, size_t n, const struct sp_attrib *a,
		 const struct sp_findings *finds, const struct sp_failures *fails)
{
	size_t i;

	printf("{\"lost\": %llu, \"executions\": %llu, \"processes\": %llu,"
	       " \"sqlite_processes\": %llu, \"untracked\": %llu,"
	       " \"unreported\": %llu, \"unreported_missing\": %llu,"
	       " \"unattributed\": %.0f, \"unattributed_samples\": %llu,",
	       (unsigned long long)qs->lost, (unsigned long long)qs->executions,
	       (unsigned long long)qs->processes, (unsigned long long)qs->sqlite_processes,
	       (unsigned long long)qs->untracked, (unsigned long long)qs->unreported,
	       (unsigned long long)qs->unreported_missing, a->unattributed_est,
	       (unsigned long long)a->unattributed_samples);
	print_json_deaths(qs);
	printf(" \"command\": ");
	if (qs->command)
		sp_json_str(stdout, qs->command);
	else
		printf("null");
	if (qs->rate >= 0 && qs->rate <= 1)
		printf(", \"rate\": %.17g", qs->rate);
	else
		printf(", \"rate\": null");
	printf(", \"runs\": %lld, \"events_dropped\": %llu, \"clock_clamped\": %llu,"
	       " \"texts_folded\": %llu,",
	       (long long)qs->runs, (unsigned long long)qs->events_dropped,
	       (unsigned long long)qs->clock_clamped, (unsigned long long)qs->texts_folded);
	printf(" \"plans_bound\": ");
	if (qs->plans_bound)
		sp_json_str(stdout, qs->plans_bound);
	else
		printf("null");
	printf(", \"no_plan\": %llu,", (unsigned long long)qs->no_plan);
	printf(" \"prepare_ns\": %llu, \"schema_loads\": %llu,",
	       (unsigned long long)sp_qset_prepare_ns(qs),
	       (unsigned long long)sp_qset_schema_loads(qs));
	{
		/* included in the totals; its queries have "sqlite_internal": true */
		struct sp_rep_own own = sp_rep_own_sum(qs);

		printf(" \"sqlite_internal\": {\"queries\": %llu, \"executions\": %llu,"
		       " \"total_ns\": %llu, \"self_ns\": %llu, \"prepare_ns\": %llu},",
		       (unsigned long long)own.queries, (unsigned long long)own.count,
		       (unsigned long long)own.total_ns, (unsigned long long)own.self_ns,
		       (unsigned long long)own.prepare_ns);
	}
	print_json_window(&qs->window);
	printf(" \"queries\": [");
	for (i = 0; i < n; i++) {
		const struct sp_qrow *r = &qs->rows[i];

		printf("%s\n  {\"fingerprint_id\": \"%016llx\", \"kind\": \"%s\", \"fingerprint\": ",
		       i ? "," : "", (unsigned long long)r->fp_id, sp_qkind_name(r->kind));
		sp_json_str(stdout, r->fingerprint);
		printf(", \"sql\": ");
		sp_json_str(stdout, r->sql);
		printf(", \"count\": %llu, \"total_ns\": %llu, \"self_ns\": %llu, \"mean_ns\": %.0f,"
		       " \"p50_ns\": %llu, \"p95_ns\": %llu, \"p99_ns\": %llu, \"max_ns\": %llu,"
		       " \"min_ns\": %llu, \"rows\": %llu, \"vm_steps\": %llu, \"fullscan_steps\": %llu,"
		       " \"sorts\": %llu, \"autoindex\": %llu, \"errors\": %llu, \"nested\": %llu,"
		       " \"prepares\": %llu, \"prepare_ns\": %llu, \"samples\": %llu",
		       (unsigned long long)r->count, (unsigned long long)r->total_ns,
		       (unsigned long long)r->self_ns, r->mean_ns, (unsigned long long)r->p50_ns,
		       (unsigned long long)r->p95_ns, (unsigned long long)r->p99_ns,
		       (unsigned long long)r->max_ns, (unsigned long long)r->min_ns,
		       (unsigned long long)r->rows, (unsigned long long)r->vm_steps,
		       (unsigned long long)r->fullscan_steps, (unsigned long long)r->sorts,
		       (unsigned long long)r->autoindex, (unsigned long long)r->errors,
		       (unsigned long long)r->nested, (unsigned long long)r->prepares,
		       (unsigned long long)r->prepare_ns, (unsigned long long)r->samples);
		printf(", \"max_run\": %llu, \"runs\": %llu, \"plan\": ",
		       (unsigned long long)r->max_run, (unsigned long long)r->runs);
		if (r->plan)
			sp_json_str(stdout, r->plan);
		else
			printf("null");
		print_json_plan_nodes(r->plan);
		printf(", \"plan_missing\": ");
		if (!r->plan && r->plan_gap)
			sp_json_str(stdout, r->plan_gap);
		else
			printf("null");
		printf(", \"folded\": %s, \"sqlite_internal\": %s", r->folded ? "true" : "false",
		       sp_sqlite_own(r) ? "true" : "false");
		print_json_sites(a, r);
		printf("}");
	}
	printf("\n]");
	print_json_findings(finds);
	print_json_failures(fails, a);
	printf("}\n");
}
