/* SPDX-License-Identifier: MIT */
/*
 * plan.h - the plan text a profile stores (plans.plan, queries.plan:
 * EXPLAIN QUERY PLAN rows as "id|parent|detail\n" lines,
 * docs/profile-format.md): its nodes, the tree the sqlite3 shell draws,
 * and the table accesses its detail lines name (plan.c). Used by the
 * report and export printers (the tree), the doctor and compare (what a
 * plan reads and how). Reading the plans from a profile is query.c's.
 */
#ifndef SP_PLAN_H
#define SP_PLAN_H

/* One plan row of EXPLAIN QUERY PLAN. */
struct sp_plan_node {
	int id, parent;
	const char *detail; /* points into the plan text; detail_len bytes */
	int detail_len;
};

/* Parse plan text ("id|parent|detail" lines) into *out (malloc'd, or NULL
 * when there are none). Returns the number of nodes, -1 on ENOMEM. */
int sp_plan_nodes(const char *plan, struct sp_plan_node **out);

/* The plan as the sqlite3 shell draws it: one line per node, "|--" or
 * "`--" after its ancestors' "|  " / "   ", ending in a newline. A node
 * whose parent is not an earlier node is a root. Returns a malloc'd
 * string ("" for no plan), or NULL on ENOMEM. */
char *sp_plan_tree(const char *plan);

/* One table access in a plan line. name is the table or its alias as the
 * plan prints it. */
struct sp_plan_access {
	char name[128];
	int full_scan;  /* "SCAN t" with no index: every row of the table */
	int indexed;    /* SEARCH, or SCAN ... USING [COVERING] INDEX */
	int automatic;  /* USING AUTOMATIC [PARTIAL] [COVERING] INDEX */
	char cols[256]; /* the "(a=? AND b>?)" constraint text, may be empty */
};

/* Parse one detail text. Returns 1 for a table access, 0 otherwise
 * (temp B-trees, subqueries, constant rows, co-routines). */
int sp_plan_access(const char *detail, struct sp_plan_access *a);
/* Call fn for each line's detail text (without the id|parent| prefix). */
void sp_plan_foreach(const char *plan, void (*fn)(const char *detail, void *arg), void *arg);
/* 1 if the plan has a detail line starting with prefix (e.g. "USE TEMP B-TREE"). */
int sp_plan_has(const char *plan, const char *prefix);

#endif
