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
		char *sql = o->width ? sp_rep_shorten(r->fingerprint, o->width)
				     : strdup(r->fingerprint);
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

/* The groups of a --by report: each group's site (or function) and sums,
 * costliest first, and the queries run there. */
struct groups {
	int by_fn; /* --by function */
	struct group *g;
	size_t ng;
	size_t *gof;  /* group of each key (site index + 1, 0 unattributed), + 1; 0 none */
	int *fnkey;   /* --by function: each site's function's first site */
	size_t *qrow; /* each a->qs entry's row in qs + 1; 0: none */
	/* group i's queries: gq[gfirst[i] .. gfirst[i] + gn[i]) */
	size_t *gfirst, *gn;
	struct gqe *gq;
};

static void groups_free(struct groups *G)
{
	free(G->qrow);
	free(G->gfirst);
	free(G->gn);
	free(G->gq);
	free(G->fnkey);
	free(G->gof);
	free(G->g);
}

/* G->qrow: the row of qs of each of a->qs's entries (a statement folded
 * into its exec is not a query of the report). 0, or -1 on ENOMEM. */
static int rows_of_sites(const struct sp_attrib *a, const struct sp_qset *qs, struct groups *G)
{
	struct hmap rowof; /* {fp_id, kind_exec} -> row index + 1 in qs */
	size_t i, j;

	hmap_init(&rowof, 2 * sizeof(int64_t), sizeof(size_t));
	for (i = 0; i < qs->n; i++) {
		int64_t k[2] = { qs->rows[i].fp_id, qs->rows[i].kind == SP_QK_EXEC };
		size_t *v = hmap_get(&rowof, k, 1, NULL);

		if (!v) {
			hmap_free(&rowof);
			return -1;
		}
		*v = i + 1;
	}
	for (j = 0; j < a->nqs; j++) {
		int64_t k[2] = { a->qs[j].fp_id, a->qs[j].kind_exec };
		size_t *v = hmap_get(&rowof, k, 0, NULL);

		G->qrow[j] = v ? *v : 0;
	}
	hmap_free(&rowof);
	return 0;
}

/* G->fnkey: group sites by function + module, each site's first site of
 * its function, through a hash (the next key on a collision). 0, or -1 on
 * ENOMEM. */
static int function_keys(const struct sp_attrib *a, struct groups *G)
{
	struct hmap fns; /* {function hash, module hash, n} -> first site of that function */
	int ret = 0;

	hmap_init(&fns, 3 * sizeof(uint64_t), sizeof(int));
	for (size_t i = 0; !ret && i < a->nsites; i++) {
		const struct sp_site *st = &a->sites[i];
		uint64_t k[3] = { sp_hash_bytes(st->function, strlen(st->function)),
				  sp_hash_bytes(st->module, strlen(st->module)), 0 };

		for (;; k[2]++) {
			int created, *first = hmap_get(&fns, k, 1, &created);

			if (!first) {
				ret = -1;
				break;
			}
			if (created)
				*first = (int)i;
			else if (strcmp(a->sites[*first].function, st->function) ||
				 strcmp(a->sites[*first].module, st->module))
				continue;
			G->fnkey[i] = *first;
			break;
		}
	}
	hmap_free(&fns);
	return ret;
}

/* The groups' sums over the report's queries, costliest first. */
static void sum_groups(const struct sp_attrib *a, struct groups *G)
{
	for (size_t j = 0, i; j < a->nqs; j++) {
		const struct sp_qsite *q = &a->qs[j];
		int key = group_key(a, G->fnkey, G->by_fn, j);

		if (!G->qrow[j])
			continue;
		if (!G->gof[key + 1]) {
			G->g[G->ng++].key = key;
			G->gof[key + 1] = G->ng;
		}
		i = G->gof[key + 1] - 1;
		G->g[i].est_count += q->est_count;
		/* self time: an exec and the statements it runs are not
		 * counted twice when they share a site */
		G->g[i].est_total_ns += q->est_self_ns;
		G->g[i].samples += q->samples;
		G->g[i].queries++;
	}
	sp_qsort(G->g, G->ng, sizeof(*G->g), cmp_group);
}

/* Each group's queries, in a->qs's order (by estimated count), then a
 * query's stacks at one site made one query there, costliest first. 0, or
 * -1 on ENOMEM. */
static int group_queries(const struct sp_attrib *a, struct groups *G)
{
	size_t i, j, ng = G->ng, *fill;

	G->gfirst = calloc(ng + 2, sizeof(*G->gfirst));
	G->gn = calloc(ng + 1, sizeof(*G->gn));
	G->gq = malloc((a->nqs + 1) * sizeof(*G->gq));
	fill = calloc(ng + 1, sizeof(*fill));
	if (!G->gfirst || !G->gn || !G->gq || !fill) {
		free(fill);
		return -1;
	}
	for (i = 0; i < ng; i++)
		G->gof[G->g[i].key + 1] = i + 1;
	for (j = 0; j < a->nqs; j++)
		if (G->qrow[j]) /* group i counts at i + 1 */
			G->gfirst[G->gof[group_key(a, G->fnkey, G->by_fn, j) + 1]]++;
	for (i = 1; i <= ng + 1; i++)
		G->gfirst[i] += G->gfirst[i - 1];
	for (j = 0; j < a->nqs; j++)
		if (G->qrow[j]) {
			size_t gi = G->gof[group_key(a, G->fnkey, G->by_fn, j) + 1] - 1;

			G->gq[G->gfirst[gi] + fill[gi]++] =
				(struct gqe){ G->qrow[j] - 1, a->qs[j].est_count,
					      a->qs[j].est_self_ns };
		}
	free(fill);
	for (i = 0; i < ng; i++) {
		struct gqe *v = G->gq + G->gfirst[i];
		size_t m = G->gfirst[i + 1] - G->gfirst[i], k, w = 0;

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
		G->gn[i] = w;
		G->g[i].queries = w;
	}
	return 0;
}

/* The first n groups as JSON. */
static void group_json(const struct sp_attrib *a, const struct sp_qset *qs,
		       const struct report_opts *o, const struct groups *G, size_t n)
{
	size_t i, j;

	printf("{\"lost\": %llu, \"unattributed\": %.0f, \"by\": \"%s\", \"groups\": [",
	       (unsigned long long)qs->lost, a->unattributed_est, o->by);
	for (i = 0; i < n; i++) {
		const struct sp_site *st = G->g[i].key >= 0 ? &a->sites[G->g[i].key] : NULL;

		printf("%s\n  {\"function\": ", i ? "," : "");
		sp_json_str(stdout, st ? st->function : "(unattributed)");
		if (!G->by_fn) {
			printf(", \"file\": ");
			sp_json_str(stdout, st ? st->file : "");
			printf(", \"line\": %d", st ? st->line : 0);
		}
		printf(", \"module\": ");
		sp_json_str(stdout, st ? st->module : "");
		printf(", \"queries\": %llu, \"samples\": %llu, \"est_count\": %.0f,"
		       " \"est_self_ns\": %.0f, \"fingerprints\": [",
		       (unsigned long long)G->g[i].queries, (unsigned long long)G->g[i].samples,
		       G->g[i].est_count, G->g[i].est_total_ns);
		for (j = G->gfirst[i]; j < G->gfirst[i] + G->gn[i]; j++) {
			const struct gqe *q = &G->gq[j];
			const struct sp_qrow *r = &qs->rows[q->row];

			printf("%s{\"fingerprint_id\": \"%016llx\", \"kind\": \"%s\", \"fingerprint\": ",
			       j > G->gfirst[i] ? ", " : "", (unsigned long long)r->fp_id,
			       sp_qkind_name(r->kind));
			sp_json_str(stdout, r->fingerprint);
			printf(", \"est_count\": %.0f, \"est_self_ns\": %.0f}", q->count,
			       q->self_ns);
		}
		printf("]}");
	}
	printf("\n]}\n");
}

/* The first n groups as CSV. */
static void group_csv(const struct sp_attrib *a, const struct groups *G, size_t n)
{
	size_t i;

	printf("function,file,line,module,queries,samples,est_count,est_self_ns\n");
	for (i = 0; i < n; i++) {
		const struct sp_site *st = G->g[i].key >= 0 ? &a->sites[G->g[i].key] : NULL;

		sp_csv_str(stdout, st ? st->function : "(unattributed)");
		putchar(',');
		sp_csv_str(stdout, st && !G->by_fn ? st->file : "");
		printf(",%d,", st && !G->by_fn ? st->line : 0);
		sp_csv_str(stdout, st ? st->module : "");
		printf(",%llu,%llu,%.0f,%.0f\n", (unsigned long long)G->g[i].queries,
		       (unsigned long long)G->g[i].samples, G->g[i].est_count,
		       G->g[i].est_total_ns);
	}
}

/* The first n groups as a table, each followed by its queries. */
static void group_table(const struct sp_attrib *a, const struct sp_qset *qs,
			const struct report_opts *o, const struct groups *G, size_t n)
{
	size_t i;
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
	       G->by_fn ? "FUNCTION" : "SITE");
	for (i = 0; i < n; i++) {
		printf("%12.0f %10s %8llu %8llu  ", G->g[i].est_count,
		       sp_fmt_ns(b, sizeof(b), G->g[i].est_total_ns),
		       (unsigned long long)G->g[i].queries, (unsigned long long)G->g[i].samples);
		if (G->g[i].key < 0)
			printf("(unattributed)\n");
		else if (G->by_fn)
			printf("%s [%s]\n", a->sites[G->g[i].key].function,
			       sp_basename(a->sites[G->g[i].key].module));
		else {
			sp_rep_site_name(a, G->g[i].key);
			putchar('\n');
		}
		print_group_queries(qs, o, G->gq + G->gfirst[i], G->gn[i]);
	}
}

/* --by function / --by site: estimates summed over queries, each group
 * followed by the queries run there. */
void sp_rep_grouped(const struct sp_attrib *a, const struct sp_qset *qs,
		    const struct report_opts *o)
{
	struct groups G = { .by_fn = !strcmp(o->by, "function") };
	size_t n;

	G.g = calloc(a->nsites + 1, sizeof(*G.g));
	G.gof = calloc(a->nsites + 1, sizeof(*G.gof));
	G.fnkey = G.by_fn ? malloc((a->nsites + 1) * sizeof(*G.fnkey)) : NULL;
	G.qrow = calloc(a->nqs + 1, sizeof(*G.qrow));
	if (!G.g || !G.gof || !G.qrow || (G.by_fn && !G.fnkey) || rows_of_sites(a, qs, &G) < 0 ||
	    (G.by_fn && function_keys(a, &G) < 0))
		goto out;
	sum_groups(a, &G);
	if (group_queries(a, &G) < 0)
		goto out;
	n = o->top && o->top < G.ng ? (size_t)o->top : G.ng;
	if (!strcmp(o->format, "json"))
		group_json(a, qs, o, &G, n);
	else if (!strcmp(o->format, "csv"))
		group_csv(a, &G, n);
	else
		group_table(a, qs, o, &G, n);
out:
	groups_free(&G);
}
