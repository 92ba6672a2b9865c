/* SPDX-License-Identifier: MIT */
/*
 * plan.c - see plan.h: parsing the stored plan text, never running a
 * plan. Every line may be anything (the profile is untrusted): a line
 * without two '|' is not a node, a detail is cut at its buffer.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"
#include "util.h"

int sp_plan_nodes(const char *plan, struct sp_plan_node **out)
{
	const char *line = plan;
	int n = 0;
	size_t cap = 0;

	*out = NULL;
	while (line && *line) {
		const char *nl = strchr(line, '\n');
		const char *end = nl ? nl : line + strlen(line);
		int id, parent, off = 0;

		if (sscanf(line, "%d|%d|%n", &id, &parent, &off) >= 2 && off > 0 &&
		    line + off <= end) {
			if (SP_GROW(*out, cap, (size_t)n + 1, 16) < 0) {
				free(*out);
				*out = NULL;
				return -1;
			}
			(*out)[n].id = id;
			(*out)[n].parent = parent;
			(*out)[n].detail = line + off;
			(*out)[n].detail_len = (int)(end - line - off);
			n++;
		}
		line = nl ? nl + 1 : end;
	}
	return n;
}

/* index of node i's parent among the nodes before it, -1 for a root */
static int plan_parent(const struct sp_plan_node *v, int i)
{
	for (int j = i - 1; j >= 0; j--)
		if (v[j].id == v[i].parent)
			return j;
	return -1;
}

/* 1 if a node after i has the same parent (index p) */
static int plan_later_sibling(const struct sp_plan_node *v, const int *par, int n, int i)
{
	for (int j = i + 1; j < n; j++)
		if (par[j] == par[i])
			return 1;
	return 0;
}

char *sp_plan_tree(const char *plan)
{
	struct sp_plan_node *v;
	int n = sp_plan_nodes(plan, &v), *par = NULL, *chain = NULL;
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	if (n < 0)
		return NULL;
	f = open_memstream(&buf, &len);
	if (!f || (n && (!(par = malloc((size_t)n * sizeof(*par))) ||
			 !(chain = malloc((size_t)n * sizeof(*chain)))))) {
		if (f)
			fclose(f);
		free(buf);
		free(v);
		free(par);
		return NULL;
	}
	for (int i = 0; i < n; i++)
		par[i] = plan_parent(v, i);
	for (int i = 0; i < n; i++) {
		int depth = 0;

		/* ancestors, outermost first */
		for (int a = par[i]; a >= 0 && depth < n; a = par[a])
			chain[depth++] = a;
		while (depth-- > 0)
			fputs(plan_later_sibling(v, par, n, chain[depth]) ? "|  " : "   ", f);
		fprintf(f, "%s%.*s\n", plan_later_sibling(v, par, n, i) ? "|--" : "`--",
			v[i].detail_len, v[i].detail);
	}
	free(par);
	free(chain);
	free(v);
	if (fclose(f) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

void sp_plan_foreach(const char *plan, void (*fn)(const char *detail, void *arg), void *arg)
{
	char line[1024];
	const char *p = plan, *nl;

	while (p && *p) {
		size_t n;
		const char *d;
		int bars = 0;

		nl = strchr(p, '\n');
		n = nl ? (size_t)(nl - p) : strlen(p);
		if (n >= sizeof(line))
			n = sizeof(line) - 1;
		memcpy(line, p, n);
		line[n] = 0;
		/* skip "id|parent|" */
		for (d = line; *d && bars < 2; d++)
			if (*d == '|')
				bars++;
		if (bars == 2 && *d)
			fn(d, arg);
		p = nl ? nl + 1 : NULL;
	}
}

struct has_ctx {
	const char *prefix;
	int found;
};

static void has_cb(const char *detail, void *arg)
{
	struct has_ctx *h = arg;

	if (!strncmp(detail, h->prefix, strlen(h->prefix)))
		h->found = 1;
}

int sp_plan_has(const char *plan, const char *prefix)
{
	struct has_ctx h = { prefix, 0 };

	if (plan)
		sp_plan_foreach(plan, has_cb, &h);
	return h.found;
}

int sp_plan_access(const char *detail, struct sp_plan_access *a)
{
	const char *p = detail, *e;
	int search;
	size_t n;

	memset(a, 0, sizeof(*a));
	if (!strncmp(p, "SCAN ", 5))
		search = 0;
	else if (!strncmp(p, "SEARCH ", 7))
		search = 1;
	else
		return 0;
	p += search ? 7 : 5;
	if (!strncmp(p, "TABLE ", 6)) /* SQLite before 3.36: "SCAN TABLE t" */
		p += 6;
	/* not tables: "SCAN CONSTANT ROW", "SCAN (subquery-1)", "SCAN SUBQUERY 1" */
	if (*p == '(' || !strncmp(p, "CONSTANT ROW", 12) || !strncmp(p, "SUBQUERY ", 9))
		return 0;
	for (e = p; *e && *e != ' '; e++)
		;
	n = (size_t)(e - p);
	if (n == 0 || n >= sizeof(a->name))
		return 0;
	memcpy(a->name, p, n);
	a->name[n] = 0;
	if (!strncmp(e, " AS ", 4)) { /* older SQLite: "t AS alias" */
		const char *al = e + 4, *ae;

		for (ae = al; *ae && *ae != ' '; ae++)
			;
		if ((size_t)(ae - al) < sizeof(a->name)) {
			memcpy(a->name, al, (size_t)(ae - al));
			a->name[ae - al] = 0;
		}
		e = ae;
	}
	a->automatic = strstr(e, "AUTOMATIC") != NULL;
	a->indexed = search || strstr(e, " INDEX") != NULL || strstr(e, "PRIMARY KEY") != NULL ||
		     strstr(e, "VIRTUAL TABLE") != NULL;
	a->full_scan = !a->indexed;
	{
		const char *lp = strchr(e, '('), *rp = lp ? strrchr(lp, ')') : NULL;

		if (lp && rp && (size_t)(rp - lp - 1) < sizeof(a->cols)) {
			memcpy(a->cols, lp + 1, (size_t)(rp - lp - 1));
			a->cols[rp - lp - 1] = 0;
		}
	}
	return 1;
}
