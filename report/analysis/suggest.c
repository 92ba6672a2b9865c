/* SPDX-License-Identifier: MIT */
/*
 * suggest.c - the doctor's index suggestions (sp_doctor_suggest_index,
 * doctor.h), derived from a fingerprint's tokens and a plan's table
 * access; doctor.c says when a suggestion is made and how it is verified.
 * The fingerprint is split with the fingerprinter's own lexer
 * (sp_sql_lex, fingerprint.c), so the two never disagree on what a token
 * is; this file only classifies the tokens and tracks parenthesis depth.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doctor.h"
#include "fingerprint.h"
#include "plan.h"

enum { T_WORD, T_KEY, T_PARAM, T_PUNCT, T_OTHER };

struct tok {
	const char *s;
	size_t n;
	int type, depth;
};

#define MAX_TOK 1024

/* Split a fingerprint into tokens (at most max) with the fingerprinter's
 * lexer. Keywords are the all-uppercase words (fingerprinting upper-cases
 * keywords and lower-cases identifiers); a quoted identifier is a word;
 * literals are "other"; every other token is punctuation, and a
 * parenthesis changes the depth of the tokens inside it. */
static size_t tokenize(const char *s, struct tok *t, size_t max)
{
	struct sp_sql_lexer lx = { (const unsigned char *)s, strlen(s), 0 };
	struct sp_sql_token k;
	size_t n = 0;
	int depth = 0;

	while (n < max) {
		const char *b;
		int type;

		sp_sql_lex(&lx, &k);
		if (k.kind == SP_SQL_EOF)
			break;
		b = s + k.start;
		switch (k.kind) {
		case SP_SQL_IDENT: {
			int upper = 1, letters = 0;

			for (const char *c = b; c < s + k.end; c++) {
				if (islower((unsigned char)*c))
					upper = 0;
				if (isalpha((unsigned char)*c))
					letters = 1;
			}
			type = upper && letters ? T_KEY : T_WORD;
			break;
		}
		case SP_SQL_QIDENT: type = T_WORD; break;
		case SP_SQL_PARAM: type = T_PARAM; break;
		case SP_SQL_NUMBER:
		case SP_SQL_STRING:
		case SP_SQL_BLOB: type = T_OTHER; break;
		default: type = T_PUNCT; break;
		}
		if (k.kind == SP_SQL_RPAREN)
			depth--;
		t[n++] = (struct tok){ b, k.end - k.start, type, depth };
		if (k.kind == SP_SQL_LPAREN)
			depth++;
	}
	return n;
}

static int is(const struct tok *t, const char *w)
{
	return t->n == strlen(w) && !strncmp(t->s, w, t->n);
}

static int tokeq(const struct tok *t, const char *s)
{
	return t->n == strlen(s) && !strncmp(t->s, s, t->n);
}

static void tokcpy(char *out, size_t len, const struct tok *t)
{
	size_t n = t->n < len - 1 ? t->n : len - 1;

	memcpy(out, t->s, n);
	out[n] = 0;
}

/* Table behind a plan name (a table or an alias): look for
 * "FROM|JOIN|, table [AS] name" anywhere in the fingerprint. */
static void resolve_alias(const struct tok *t, size_t n, const char *name, char *out, size_t len)
{
	size_t i;

	snprintf(out, len, "%s", name);
	for (i = 0; i + 1 < n; i++) {
		size_t j = i + 1;

		if (!(is(&t[i], "FROM") || is(&t[i], "JOIN") || is(&t[i], ",")) ||
		    t[j].type != T_WORD)
			continue;
		while (j + 2 < n && is(&t[j + 1], ".") && t[j + 2].type == T_WORD)
			j += 2; /* schema.table */
		if (j + 1 < n && is(&t[j + 1], "AS") && j + 2 < n && tokeq(&t[j + 2], name)) {
			tokcpy(out, len, &t[j]);
			return;
		}
		if (j + 1 < n && t[j + 1].type == T_WORD && tokeq(&t[j + 1], name)) {
			tokcpy(out, len, &t[j]);
			return;
		}
	}
}

struct cols {
	char c[8][64];
	int n;
};

static void cols_add(struct cols *c, const struct tok *t)
{
	char buf[64];
	int i;

	tokcpy(buf, sizeof(buf), t);
	if (!strcmp(buf, "rowid") || !strcmp(buf, "oid") || !strcmp(buf, "_rowid_"))
		return;
	for (i = 0; i < c->n; i++)
		if (!strcmp(c->c[i], buf))
			return;
	if (c->n < 8)
		snprintf(c->c[c->n++], sizeof(c->c[0]), "%s", buf);
}

/* A column reference at t[i]: "col" or "q.col" with q the table or its
 * alias. Returns the index of the column token, or -1. */
static long colref(const struct tok *t, size_t n, size_t i, const char *table, const char *alias)
{
	if (i >= n || t[i].type != T_WORD)
		return -1;
	if (i + 2 < n && is(&t[i + 1], ".") && t[i + 2].type == T_WORD) {
		if (tokeq(&t[i], table) || (alias[0] && tokeq(&t[i], alias)))
			return (long)i + 2;
		return -1;
	}
	if (i + 1 < n && is(&t[i + 1], "(")) /* a function call */
		return -1;
	return (long)i;
}

/* Columns of "ORDER BY|GROUP BY col [ASC|DESC] [NULLS FIRST|LAST], ...";
 * all or nothing. */
static void list_cols(const struct tok *t, size_t n, size_t i, const char *table, const char *alias,
		      struct cols *out)
{
	struct cols c = { .n = 0 };

	for (;;) {
		long k = colref(t, n, i, table, alias);

		if (k < 0)
			return;
		cols_add(&c, &t[k]);
		i = (size_t)k + 1;
		while (i < n && (is(&t[i], "ASC") || is(&t[i], "DESC") || is(&t[i], "NULLS") ||
				 is(&t[i], "FIRST") || is(&t[i], "LAST") || is(&t[i], "COLLATE") ||
				 (i > 0 && is(&t[i - 1], "COLLATE"))))
			i++;
		if (i < n && is(&t[i], ",") && t[i].depth == 0) {
			i++;
			continue;
		}
		break;
	}
	if (i < n && t[i].depth == 0 && !is(&t[i], ";") && !is(&t[i], "LIMIT") &&
	    !is(&t[i], "HAVING") && !is(&t[i], "ORDER") && !is(&t[i], "WINDOW"))
		return;
	for (int k = 0; k < c.n; k++)
		snprintf(out->c[out->n < 8 ? out->n++ : 7], sizeof(out->c[0]), "%s", c.c[k]);
}

static void write_index(char *buf, size_t len, const char *table, const struct cols *c)
{
	char name[96];
	size_t o;
	int i;

	o = (size_t)snprintf(name, sizeof(name), "%s", table);
	for (i = 0; i < c->n && o < sizeof(name) - 1; i++)
		o += (size_t)snprintf(name + o, sizeof(name) - o, "_%s", c->c[i]);
	for (o = 0; name[o]; o++)
		if (!isalnum((unsigned char)name[o]) && name[o] != '_')
			name[o] = '_';
	o = (size_t)snprintf(buf, len, "CREATE INDEX %s ON %s(", name, table);
	for (i = 0; i < c->n && o < len; i++)
		o += (size_t)snprintf(buf + o, len - o, "%s%s", i ? ", " : "", c->c[i]);
	if (o < len)
		snprintf(buf + o, len - o, ");");
}

/* The automatic index's columns, from the plan's "(a=? AND b>?)". */
static int auto_cols(const char *s, struct cols *c)
{
	while (*s) {
		const char *b;
		char buf[64];
		size_t n;

		while (*s == ' ')
			s++;
		if (!strncmp(s, "AND ", 4)) {
			s += 4;
			continue;
		}
		b = s;
		while (*s && (isalnum((unsigned char)*s) || *s == '_'))
			s++;
		n = (size_t)(s - b);
		if (!n || n >= sizeof(buf))
			return c->n;
		memcpy(buf, b, n);
		buf[n] = 0;
		if (c->n < 8)
			snprintf(c->c[c->n++], sizeof(c->c[0]), "%s", buf);
		while (*s && *s != ' ')
			s++;
	}
	return c->n;
}

/* The query's one table, from t[0..n): SELECT ... FROM t [AS a] / UPDATE
 * t / DELETE FROM t, and it must be table (the scanned one). Its alias
 * (or "") into alias; returns the index of the first token after the
 * table and its alias, or -1 when the query is not a single-table one. */
static long single_table(const struct tok *t, size_t n, const char *table, char *alias,
			 size_t aliaslen)
{
	size_t i, from = 0, after;
	int found_from = 0;

	for (i = 0; i < n; i++) {
		if (t[i].depth == 0 && (is(&t[i], "UNION") || is(&t[i], "EXCEPT") ||
					is(&t[i], "INTERSECT") || is(&t[i], "JOIN")))
			return -1;
		if (!found_from && t[i].depth == 0 &&
		    (is(&t[i], "FROM") || (i == 0 && is(&t[i], "UPDATE")))) {
			found_from = 1;
			from = i + 1;
		}
	}
	if (is(&t[0], "WITH") || !found_from)
		return -1;
	if (is(&t[0], "UPDATE"))
		while (from < n &&
		       (is(&t[from], "OR") || is(&t[from], "ROLLBACK") || is(&t[from], "ABORT") ||
			is(&t[from], "REPLACE") || is(&t[from], "FAIL") || is(&t[from], "IGNORE")))
			from++;
	if (from >= n || t[from].type != T_WORD)
		return -1;
	after = from + 1;
	while (after + 1 < n && is(&t[after], ".") && t[after + 1].type == T_WORD)
		after += 2, from += 2;
	if (!tokeq(&t[from], table))
		return -1; /* the scanned table is not the query's table */
	if (after < n && is(&t[after], "AS"))
		after++;
	if (after < n && t[after].type == T_WORD)
		tokcpy(alias, aliaslen, &t[after++]);
	while (after < n &&
	       (is(&t[after], "INDEXED") || is(&t[after], "NOT") || is(&t[after], "BY") ||
		(t[after].type == T_WORD && is(&t[after - 1], "BY"))))
		after++;
	if (after < n && (is(&t[after], ",") || is(&t[after], "(")))
		return -1;
	return (long)after;
}

/* One WHERE conjunct t[c..e) of the table: col = ? | col IS ? | col IN
 * (...) | ? = col into eq, a range or BETWEEN into range. */
static void conjunct(const struct tok *t, size_t c, size_t e, const char *table, const char *alias,
		     struct cols *eq, struct cols *range)
{
	long k = colref(t, e, c, table, alias);

	if (k >= 0 && (size_t)k + 1 < e) {
		const struct tok *op = &t[k + 1];

		/* compared with a value, not with another column */
		int value = (size_t)k + 3 == e && t[k + 2].type != T_WORD;

		if ((is(op, "=") || is(op, "==") || is(op, "IS")) && value)
			cols_add(eq, &t[k]);
		else if (is(op, "IN") && is(&t[k + 2], "("))
			cols_add(eq, &t[k]);
		else if ((is(op, "<") || is(op, "<=") || is(op, ">") || is(op, ">=")) && value)
			cols_add(range, &t[k]);
		else if (is(op, "BETWEEN"))
			cols_add(range, &t[k]);
	} else if (c + 2 < e && t[c].type == T_PARAM && is(&t[c + 1], "=") &&
		   (k = colref(t, e, c + 2, table, alias)) >= 0 && (size_t)k + 1 == e) {
		cols_add(eq, &t[k]);
	}
}

/* The WHERE clauses' conjuncts from t[after..n) into eq and range; both
 * emptied when one is a disjunction (no single index serves an OR). */
static void where_cols(const struct tok *t, size_t n, size_t after, const char *table,
		       const char *alias, struct cols *eq, struct cols *range)
{
	for (size_t i = after; i < n; i++) {
		size_t c = i + 1;

		if (t[i].depth != 0 || !is(&t[i], "WHERE"))
			continue;
		while (c < n) {
			size_t e = c;
			int between = 0;

			while (e < n &&
			       !(t[e].depth == 0 && ((is(&t[e], "AND") && !between) ||
						     is(&t[e], "GROUP") || is(&t[e], "ORDER") ||
						     is(&t[e], "LIMIT") || is(&t[e], "RETURNING") ||
						     is(&t[e], "WINDOW") || is(&t[e], ";")))) {
				if (t[e].depth == 0 && is(&t[e], "OR")) {
					eq->n = range->n = 0;
					return;
				}
				if (is(&t[e], "BETWEEN"))
					between = 1;
				else if (is(&t[e], "AND"))
					between = 0;
				e++;
			}
			conjunct(t, c, e, table, alias, eq, range);
			if (e >= n || !is(&t[e], "AND"))
				break;
			c = e + 1;
		}
	}
}

int sp_doctor_suggest_index(const char *fingerprint, const struct sp_plan_access *a, char *buf,
			    size_t len)
{
	static struct tok t[MAX_TOK];
	char table[128], alias[128] = "";
	struct cols eq = { .n = 0 }, range = { .n = 0 }, order = { .n = 0 }, all;
	size_t n = tokenize(fingerprint, t, MAX_TOK), i;
	long after;

	resolve_alias(t, n, a->name, table, sizeof(table));
	if (a->automatic && a->cols[0]) {
		struct cols c = { .n = 0 };

		if (auto_cols(a->cols, &c)) {
			write_index(buf, len, table, &c);
			return 1;
		}
	}
	if (n == 0 || n == MAX_TOK || (after = single_table(t, n, table, alias, sizeof(alias))) < 0)
		goto none;
	where_cols(t, n, (size_t)after, table, alias, &eq, &range);
	for (i = (size_t)after; i + 2 < n; i++)
		if (t[i].depth == 0 && (is(&t[i], "ORDER") || is(&t[i], "GROUP")) &&
		    is(&t[i + 1], "BY")) {
			list_cols(t, n, i + 2, table, alias, &order);
			break;
		}
	/* the equalities, then one range column, or else the order's columns */
	all = eq;
	if (range.n) {
		if (all.n < 8)
			snprintf(all.c[all.n++], sizeof(all.c[0]), "%s", range.c[0]);
	} else {
		for (int k = 0; k < order.n; k++) {
			struct tok ft = { order.c[k], strlen(order.c[k]), T_WORD, 0 };

			cols_add(&all, &ft);
		}
	}
	if (all.n == 0)
		goto none;
	write_index(buf, len, table, &all);
	return 1;
none:
	snprintf(buf, len,
		 "no suggestion (not a single-table query with simple WHERE/ORDER BY columns)");
	return 0;
}
