/* SPDX-License-Identifier: MIT */
/*
 * report-csv.c - `sqlprof report --format csv`: the queries, or with --findings the
 * doctor's findings, or with --failures the failed executions. --by
 * function/site's CSV is report-group.c.
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

void sp_rep_csv(const struct sp_qset *qs, size_t n)
{
	size_t i;

	printf("fingerprint_id,kind,fingerprint,sql,count,total_ns,self_ns,mean_ns,p50_ns,p95_ns,"
	       "p99_ns,max_ns,min_ns,rows,vm_steps,fullscan_steps,sorts,autoindex,errors,prepares,"
	       "prepare_ns,sqlite_internal\n");
	for (i = 0; i < n; i++) {
		const struct sp_qrow *r = &qs->rows[i];

		printf("%016llx,%s,", (unsigned long long)r->fp_id, sp_qkind_name(r->kind));
		sp_csv_str(stdout, r->fingerprint);
		putchar(',');
		sp_csv_str(stdout, r->sql);
		printf(",%llu,%llu,%llu,%.0f,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,"
		       "%llu,%d\n",
		       (unsigned long long)r->count, (unsigned long long)r->total_ns,
		       (unsigned long long)r->self_ns, r->mean_ns, (unsigned long long)r->p50_ns,
		       (unsigned long long)r->p95_ns, (unsigned long long)r->p99_ns,
		       (unsigned long long)r->max_ns, (unsigned long long)r->min_ns,
		       (unsigned long long)r->rows, (unsigned long long)r->vm_steps,
		       (unsigned long long)r->fullscan_steps, (unsigned long long)r->sorts,
		       (unsigned long long)r->autoindex, (unsigned long long)r->errors,
		       (unsigned long long)r->prepares, (unsigned long long)r->prepare_ns,
		       sp_sqlite_own(r));
	}
}

void sp_rep_csv_findings(const struct sp_findings *fs)
{
	size_t i;

	printf("kind,fingerprint_id,query_kind,fingerprint,site,evidence,suggestion\n");
	for (i = 0; i < fs->n; i++) {
		const struct sp_finding *x = &fs->f[i];

		printf("%s,%016llx,%s,", sp_rule_name(x->rule), (unsigned long long)x->q->fp_id,
		       sp_qkind_name(x->q->kind));
		sp_csv_str(stdout, x->q->fingerprint);
		putchar(',');
		sp_csv_str(stdout, x->site);
		putchar(',');
		sp_csv_str(stdout, x->evidence);
		putchar(',');
		sp_csv_str(stdout, x->suggestion);
		putchar('\n');
	}
}

void sp_rep_csv_failures(const struct sp_failures *fs, const struct sp_attrib *a)
{
	size_t i;

	printf("fingerprint_id,kind,fingerprint,code,message,count,pid,site\n");
	for (i = 0; i < fs->n; i++) {
		const struct sp_failure *x = &fs->f[i];
		const struct sp_stk *sk =
			x->stack_id ? sp_attrib_stack(a, x->pid, x->stack_id) : NULL;
		char site[512] = "";

		if (sk && sk->site >= 0)
			sp_where(site, sizeof(site), a->sites[sk->site].function,
				 a->sites[sk->site].file, a->sites[sk->site].line,
				 a->sites[sk->site].module, a->sites[sk->site].offset);
		printf("%016llx,%s,", (unsigned long long)x->fp_id, sp_qkind_name(x->kind));
		sp_csv_str(stdout, x->fingerprint);
		printf(",%d,", x->rc);
		sp_csv_str(stdout, x->message);
		printf(",%llu,%llu,", (unsigned long long)x->count, (unsigned long long)x->pid);
		sp_csv_str(stdout, site);
		putchar('\n');
	}
}
