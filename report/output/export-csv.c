/* SPDX-License-Identifier: MIT */
/*
 * export-csv.c - one CSV row per fingerprint x site, for pivot tables.
 * Count, times and counters of a site are the query's exact totals split
 * among its sites as the report splits them (by stack samples; rows and VM
 * steps by the rows and steps sampled at each site, when any); min, max and
 * percentiles are the whole fingerprint's. Fields are RFC 4180, text fields
 * guarded against spreadsheet formulas (sp_csv_str).
 */
#include <inttypes.h>
#include <stdlib.h>

#include "util.h"
#include <string.h>

#include "export.h"

struct crow {
	int site;
	uint64_t samples, rows, vm_steps;
	double count, total_ns, self_ns;
	const char *label;
};

static int cmp_crow(const void *pa, const void *pb)
{
	const struct crow *a = pa, *b = pb;

	if (a->count != b->count)
		return a->count < b->count ? 1 : -1;
	if (a->site != b->site)
		return a->site < 0 ? 1 : b->site < 0 ? -1 : strcmp(a->label, b->label);
	return 0;
}

static double share(uint64_t part, uint64_t whole, double fallback, uint64_t total)
{
	return whole ? (double)part / (double)whole * (double)total : fallback * (double)total;
}

int sp_export_csv(FILE *f, struct sp_export *x)
{
	struct crow *cr = calloc(x->nxs + 1, sizeof(*cr));
	size_t i, j, k, n;

	if (!cr)
		return -1;
	fputs("fingerprint_id,kind,fingerprint,function,file,line,module,samples,count,total_ns,"
	      "self_ns,min_ns,max_ns,p50_ns,p95_ns,p99_ns,rows,vm_steps,fullscan_steps,sorts,"
	      "autoindex,offset\n",
	      f);
	for (i = 0; i < x->qs.n; i++) {
		const struct sp_qrow *q = &x->qs.rows[i];
		uint64_t srows = 0, ssteps = 0;
		size_t nx;
		const size_t *xi = sp_export_query_stacks(x, q, &nx);

		for (n = 0, j = 0; j < nx; j++) {
			const struct sp_xstack *s = &x->xs[xi[j]];

			srows += s->rows;
			ssteps += s->vm_steps;
			for (k = 0; k < n && cr[k].site != s->site; k++)
				;
			if (k == n) {
				cr[n++] = (struct crow){ .site = s->site };
				cr[k].label = sp_export_site_label(x, s->site);
				if (!cr[k].label) {
					free(cr);
					return -1;
				}
			}
			cr[k].samples += s->samples;
			cr[k].rows += s->rows;
			cr[k].vm_steps += s->vm_steps;
			cr[k].count += s->est_count;
			cr[k].total_ns += s->est_total_ns;
			cr[k].self_ns += s->est_self_ns;
		}
		if (n > 1)
			sp_qsort(cr, n, sizeof(*cr), cmp_crow);
		for (k = 0; k < n; k++) {
			const struct sp_site *st =
				cr[k].site >= 0 ? &x->at.sites[cr[k].site] : NULL;
			double frac = q->count ? cr[k].count / (double)q->count : 0;

			fprintf(f, "%016" PRIx64 ",%s,", (uint64_t)q->fp_id,
				sp_qkind_name(q->kind));
			sp_csv_str(f, q->fingerprint);
			fputc(',', f);
			sp_csv_str(f, st ? st->function : "(unattributed)");
			fputc(',', f);
			sp_csv_str(f, st ? st->file : "");
			fprintf(f, ",%d,", st ? st->line : 0);
			sp_csv_str(f, st ? st->module : "");
			fprintf(f,
				",%" PRIu64 ",%.0f,%.0f,%.0f,%" PRIu64 ",%" PRIu64 ",%" PRIu64
				",%" PRIu64 ",%" PRIu64 ",%.0f,%.0f,%.0f,%.0f,%.0f,",
				cr[k].samples, cr[k].count, cr[k].total_ns, cr[k].self_ns,
				q->min_ns, q->max_ns, q->p50_ns, q->p95_ns, q->p99_ns,
				share(cr[k].rows, srows, frac, q->rows),
				share(cr[k].vm_steps, ssteps, frac, q->vm_steps),
				frac * (double)q->fullscan_steps, frac * (double)q->sorts,
				frac * (double)q->autoindex);
			/* a site without a source file: where in its module */
			if (st && st->offset)
				fprintf(f, "0x%" PRIx64, st->offset);
			fputc('\n', f);
		}
	}
	free(cr);
	return 0;
}
