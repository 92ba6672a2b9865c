/* SPDX-License-Identifier: MIT */
/*
 * report-group.c - `sqlprof report --by function` and `--by site`: the sites' (or
 * functions') estimates summed over the queries run there, each group with
 * its queries, as a table, CSV or JSON.
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

struct group {
	int key; /* site index, or first site index of the function; -1 unattributed */
	double est_count, est_total_ns;
	uint64_t samples, queries;
};

static int cmp_group(const void *pa, const void *pb)
{
	const struct group *a = pa, *b = pb;

	return a->est_total_ns < b->est_total_ns ? 1 : a->est_total_ns > b->est_total_ns ? -1 : 0;
}

#define GROUP_QUERIES_MAX 10 /* queries listed under a --by row in the table */

/* One query of a --by group: its row in the report and its estimates there. */
struct gqe {
	size_t row;
	double count, self_ns;
};

static int cmp_gqe_row(const void *pa, const void *pb)
{
	const struct gqe *a = pa, *b = pb;

	return a->row < b->row ? -1 : a->row > b->row;
}

static int cmp_gqe_self(const void *pa, const void *pb)
{
	const struct gqe *a = pa, *b = pb;

	if (a->self_ns != b->self_ns)
		return a->self_ns < b->self_ns ? 1 : -1;
	return cmp_gqe_row(pa, pb);
}

/* The group key of a->qs[j]: its site, or its function's first site. */
static int group_key(const struct sp_attrib *a, const int *fnkey, int by_fn, size_t j)
{
	int key = a->qs[j].site;

	return by_fn && key >= 0 ? fnkey[key] : key;
}

/* Under a --by site / function row: the queries run there, each with its
 * estimated count and self time there, costliest first, shortened to
 * --width; at most GROUP_QUERIES_MAX, then how many more. */
static void print_group_queries(const struct sp_qset *qs, const struct report_opts *o,
				const struct gqe *q, size_t n)
{
	size_t k;

	for (k = 0; k < n; k++, q++) {
		if (k == GROUP_QUERIES_MAX && n > k + 1) {
			printf("%12s %10s %8s %8s    <- ... %zu more queries\n", "", "", "", "",
			       n - k);
			break;
		}
		const struct sp_qrow *r = &qs->rows[q->row];
		char *sql =
			o->width ? sp_rep_shorten(r->fingerprint, o->width) : strdup(r->fingerprint);
		char b[32];

		if (!sql)
			continue;
		sp_term_clean(sql);
		printf("%12.0f %10s %8s %8s    <- %s%s\n", q->count,
		       sp_fmt_ns(b, sizeof(b), q->self_ns), "", "",
		       (r->kind != SP_QK_EXEC) ? "" : "[exec] ", sql);
		free(sql);
	}
}

/* --by function / --by site: estimates summed over queries, each group
 * followed by the queries run there. */
void sp_rep_grouped(const struct sp_attrib *a, const struct sp_qset *qs,
			  const struct report_opts *o)
{
	int by_fn = !strcmp(o->by, "function");
	struct group *g = calloc(a->nsites + 1, sizeof(*g));
	/* group of each key (site index + 1, 0 unattributed), + 1; 0 none */
	size_t *gof = calloc(a->nsites + 1, sizeof(*gof));
	int *fnkey = by_fn ? malloc((a->nsites + 1) * sizeof(*fnkey)) : NULL;
	struct hmap fns;   /* {function hash, module hash, n} -> first site of that function */
	struct hmap rowof; /* {fp_id, kind_exec} -> row index + 1 in qs */
	size_t *qrow = calloc(a->nqs + 1, sizeof(*qrow)); /* each qs entry's row + 1, 0: none */
	/* group i's queries: gq[gfirst[i] .. gfirst[i] + gn[i]) */
	size_t *gfirst = NULL, *gn = NULL;
	struct gqe *gq = NULL;
	size_t ng = 0, i, j, n;

	hmap_init(&fns, 3 * sizeof(uint64_t), sizeof(int));
	hmap_init(&rowof, 2 * sizeof(int64_t), sizeof(size_t));
	if (!g || !gof || !qrow || (by_fn && !fnkey))
		goto out;
	/* the queries of the report (a statement folded into its exec is not one) */
	for (i = 0; i < qs->n; i++) {
		int64_t k[2] = { qs->rows[i].fp_id, qs->rows[i].kind == SP_QK_EXEC };
		size_t *v = hmap_get(&rowof, k, 1, NULL);

		if (!v)
			goto out;
		*v = i + 1;
	}
	for (j = 0; j < a->nqs; j++) {
		int64_t k[2] = { a->qs[j].fp_id, a->qs[j].kind_exec };
		size_t *v = hmap_get(&rowof, k, 0, NULL);

		qrow[j] = v ? *v : 0;
	}
	/* group sites by function + module: each site's first site of its
	 * function, through a hash (the next key on a collision) */
	for (i = 0; by_fn && i < a->nsites; i++) {
		const struct sp_site *st = &a->sites[i];
		uint64_t k[3] = { sp_hash_bytes(st->function, strlen(st->function)),
				  sp_hash_bytes(st->module, strlen(st->module)), 0 };

		for (;; k[2]++) {
			int created, *first = hmap_get(&fns, k, 1, &created);

			if (!first)
				goto out;
			if (created)
				*first = (int)i;
			else if (strcmp(a->sites[*first].function, st->function) ||
				 strcmp(a->sites[*first].module, st->module))
				continue;
			fnkey[i] = *first;
			break;
		}
	}
	for (j = 0; j < a->nqs; j++) {
		const struct sp_qsite *q = &a->qs[j];
		int key = q->site;

		if (!qrow[j])
			continue;
		if (by_fn && key >= 0)
			key = fnkey[key];
		if (!gof[key + 1]) {
			g[ng++].key = key;
			gof[key + 1] = ng;
		}
		i = gof[key + 1] - 1;
		g[i].est_count += q->est_count;
		/* self time: an exec and the statements it runs are not
		 * counted twice when they share a site */
		g[i].est_total_ns += q->est_self_ns;
		g[i].samples += q->samples;
		g[i].queries++;
	}
	sp_qsort(g, ng, sizeof(*g), cmp_group);
	n = o->top && o->top < ng ? (size_t)o->top : ng;
	/* each group's queries, in a->qs's order (by estimated count) */
	gfirst = calloc(ng + 2, sizeof(*gfirst));
	gn = calloc(ng + 1, sizeof(*gn));
	gq = malloc((a->nqs + 1) * sizeof(*gq));
	if (!gfirst || !gn || !gq)
		goto out;
	for (i = 0; i < ng; i++)
		gof[g[i].key + 1] = i + 1;
	for (j = 0; j < a->nqs; j++)
		if (qrow[j])
			gfirst[gof[group_key(a, fnkey, by_fn, j) +
				   1]]++; /* group i counts at i + 1 */
	for (i = 1; i <= ng + 1; i++)
		gfirst[i] += gfirst[i - 1];
	{
		size_t *fill = calloc(ng + 1, sizeof(*fill));

		if (!fill)
			goto out;
		for (j = 0; j < a->nqs; j++)
			if (qrow[j]) {
				size_t gi = gof[group_key(a, fnkey, by_fn, j) + 1] - 1;

				gq[gfirst[gi] + fill[gi]++] =
					(struct gqe){ qrow[j] - 1, a->qs[j].est_count,
						      a->qs[j].est_self_ns };
			}
		free(fill);
	}
	/* a query's stacks at one site are one query there; costliest first */
	for (i = 0; i < ng; i++) {
		struct gqe *v = gq + gfirst[i];
		size_t m = gfirst[i + 1] - gfirst[i], k, w = 0;

		qsort(v, m, sizeof(*v), cmp_gqe_row);
		for (k = 0; k < m; k++) {
			if (w && v[w - 1].row == v[k].row) {
				v[w - 1].count += v[k].count;
				v[w - 1].self_ns += v[k].self_ns;
			} else {
				v[w++] = v[k];
			}
		}
		qsort(v, w, sizeof(*v), cmp_gqe_self);
		gn[i] = w;
		g[i].queries = w;
	}
	if (!strcmp(o->format, "json")) {
		printf("{\"lost\": %llu, \"unattributed\": %.0f, \"by\": \"%s\", \"groups\": [",
		       (unsigned long long)qs->lost, a->unattributed_est, o->by);
		for (i = 0; i < n; i++) {
			const struct sp_site *st = g[i].key >= 0 ? &a->sites[g[i].key] : NULL;

			printf("%s\n  {\"function\": ", i ? "," : "");
			sp_json_str(stdout, st ? st->function : "(unattributed)");
			if (!by_fn) {
				printf(", \"file\": ");
				sp_json_str(stdout, st ? st->file : "");
				printf(", \"line\": %d", st ? st->line : 0);
			}
			printf(", \"module\": ");
			sp_json_str(stdout, st ? st->module : "");
			printf(", \"queries\": %llu, \"samples\": %llu, \"est_count\": %.0f,"
			       " \"est_self_ns\": %.0f, \"fingerprints\": [",
			       (unsigned long long)g[i].queries, (unsigned long long)g[i].samples,
			       g[i].est_count, g[i].est_total_ns);
			for (j = gfirst[i]; j < gfirst[i] + gn[i]; j++) {
				const struct gqe *q = &gq[j];
				const struct sp_qrow *r = &qs->rows[q->row];

				printf("%s{\"fingerprint_id\": \"%016llx\", \"kind\": \"%s\", \"fingerprint\": ",
				       j > gfirst[i] ? ", " : "", (unsigned long long)r->fp_id,
				       sp_qkind_name(r->kind));
				sp_json_str(stdout, r->fingerprint);
				printf(", \"est_count\": %.0f, \"est_self_ns\": %.0f}", q->count,
				       q->self_ns);
			}
			printf("]}");
		}
		printf("\n]}\n");
	} else if (!strcmp(o->format, "csv")) {
		printf("function,file,line,module,queries,samples,est_count,est_self_ns\n");
		for (i = 0; i < n; i++) {
			const struct sp_site *st = g[i].key >= 0 ? &a->sites[g[i].key] : NULL;

			sp_csv_str(stdout, st ? st->function : "(unattributed)");
			putchar(',');
			sp_csv_str(stdout, st && !by_fn ? st->file : "");
			printf(",%d,", st && !by_fn ? st->line : 0);
			sp_csv_str(stdout, st ? st->module : "");
			printf(",%llu,%llu,%.0f,%.0f\n", (unsigned long long)g[i].queries,
			       (unsigned long long)g[i].samples, g[i].est_count, g[i].est_total_ns);
		}
	} else {
		char b[32];

		int exact = 1;

		for (i = 0; i < qs->n; i++)
			exact &= sp_rep_sites_exact(a, &qs->rows[i]);
		if (exact) /* --rate 1, nothing lost: every execution's stack */
			printf("# by %s; counts and times are exact (every execution's stack was "
			       "taken); unattributed %.0f\n",
			       o->by, a->unattributed_est);
		else
			printf("# by %s; counts and times are estimates from %s samples; "
			       "unattributed ~%.0f\n",
			       o->by, "stack", a->unattributed_est);
		if (o->root)
			printf("# paths relative to %s (--full-paths)\n", o->root);
		printf("%12s %10s %8s %8s  %s\n", "EST_COUNT", "EST_SELF", "QUERIES", "SAMPLES",
		       by_fn ? "FUNCTION" : "SITE");
		for (i = 0; i < n; i++) {
			printf("%12.0f %10s %8llu %8llu  ", g[i].est_count,
			       sp_fmt_ns(b, sizeof(b), g[i].est_total_ns),
			       (unsigned long long)g[i].queries, (unsigned long long)g[i].samples);
			if (g[i].key < 0)
				printf("(unattributed)\n");
			else if (by_fn)
				printf("%s [%s]\n", a->sites[g[i].key].function,
				       sp_basename(a->sites[g[i].key].module));
			else {
				sp_rep_site_name(a, g[i].key);
				putchar('\n');
			}
			print_group_queries(qs, o, gq + gfirst[i], gn[i]);
		}
	}
out:
	free(qrow);
	free(gfirst);
	free(gn);
	free(gq);
	hmap_free(&rowof);
	hmap_free(&fns);
	free(fnkey);
	free(gof);
	free(g);
}
