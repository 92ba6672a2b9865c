/* SPDX-License-Identifier: MIT */
/*
 * fingerprint.c - normalize SQL text into a fingerprint and a stable id.
 *
 * A small lexer that follows SQLite's tokenizer (src/tokenize.c) feeds an
 * emitter that rewrites the token stream:
 *
 *   - string, numeric ('1', 1.5, .5, 1e-3, 0x1F, 1_000) and blob (x'00')
 *     literals become '?', and so do bound parameters (?, ?3, :a, @a, $a,
 *     #a); a unary '-' or '+' directly before a number folds into its '?'
 *     ("a = -5" -> "a = ?", but "a - 5" -> "a - ?");
 *   - comments disappear; tokens are separated by exactly one space, except
 *     none after '(' or before ')' ',' ';', none around '.', and none
 *     between an identifier and a following '(' ("count(*)", "t(a, b)");
 *   - keywords (SQLite's 147) are upper-cased, unquoted identifiers
 *     lower-cased (ASCII only), quoted identifiers ("x", [x], `x`) kept
 *     verbatim except that control bytes inside them become '?';
 *   - "IN (" followed only by literals/parameters becomes "IN (...)";
 *   - "VALUES" followed by rows made only of literals/parameters keeps the
 *     first row's shape and writes ", ..." when there were two or more
 *     rows: "VALUES (?, ?)" for one row, "VALUES (?, ?), ..." for many;
 *   - ';' between statements is kept ("A; B"); leading, repeated and
 *     trailing ones are dropped.
 *
 * What it does not do: parse.  Invalid SQL still gets a fingerprint (an
 * unknown byte is kept as a one-byte operator, an unterminated string or
 * comment runs to the end).  NUL and other ASCII control bytes outside
 * literals count as whitespace.  Bytes >= 0x80 are identifier characters,
 * as in SQLite, and are copied unchanged, so the result is not guaranteed
 * to be valid UTF-8.
 *
 * Cost: every byte is lexed at most three times (the main pass, plus one
 * look-ahead for a unary sign, IN list or VALUES rows that may be undone),
 * so the whole thing is O(len).
 */
#include "fingerprint.h"
#include "hash.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint64_t sp_hash64(const void *data, size_t len)
{
	return sp_fnv1a64(SP_FNV64_OFFSET, data, len);
}

/* ---- keywords ---------------------------------------------------------- */

/*
 * SQLite's keyword list (sqlite3_keyword_name() of 3.40, checked by
 * tests/check_fingerprint.c against the library it runs with), sorted for
 * bsearch.  KW_OPERAND marks words that may also stand for a column or end
 * an expression (SQLite's "%fallback ID" list in parse.y, the join words,
 * and NULL): a '-' after them is a subtraction, not a sign.
 */
#define KW_OPERAND 1

struct keyword {
	const char *name;
	unsigned char flags;
};

static const struct keyword keywords[] = {
	{ "ABORT", KW_OPERAND },
	{ "ACTION", KW_OPERAND },
	{ "ADD", 0 },
	{ "AFTER", KW_OPERAND },
	{ "ALL", 0 },
	{ "ALTER", 0 },
	{ "ALWAYS", KW_OPERAND },
	{ "ANALYZE", KW_OPERAND },
	{ "AND", 0 },
	{ "AS", 0 },
	{ "ASC", KW_OPERAND },
	{ "ATTACH", KW_OPERAND },
	{ "AUTOINCREMENT", 0 },
	{ "BEFORE", KW_OPERAND },
	{ "BEGIN", KW_OPERAND },
	{ "BETWEEN", 0 },
	{ "BY", KW_OPERAND },
	{ "CASCADE", KW_OPERAND },
	{ "CASE", 0 },
	{ "CAST", KW_OPERAND },
	{ "CHECK", 0 },
	{ "COLLATE", 0 },
	{ "COLUMN", KW_OPERAND },
	{ "COMMIT", 0 },
	{ "CONFLICT", KW_OPERAND },
	{ "CONSTRAINT", 0 },
	{ "CREATE", 0 },
	{ "CROSS", KW_OPERAND },
	{ "CURRENT", KW_OPERAND },
	{ "CURRENT_DATE", KW_OPERAND },
	{ "CURRENT_TIME", KW_OPERAND },
	{ "CURRENT_TIMESTAMP", KW_OPERAND },
	{ "DATABASE", KW_OPERAND },
	{ "DEFAULT", 0 },
	{ "DEFERRABLE", 0 },
	{ "DEFERRED", KW_OPERAND },
	{ "DELETE", 0 },
	{ "DESC", KW_OPERAND },
	{ "DETACH", KW_OPERAND },
	{ "DISTINCT", 0 },
	{ "DO", KW_OPERAND },
	{ "DROP", 0 },
	{ "EACH", KW_OPERAND },
	{ "ELSE", 0 },
	{ "END", KW_OPERAND },
	{ "ESCAPE", 0 },
	{ "EXCEPT", 0 },
	{ "EXCLUDE", KW_OPERAND },
	{ "EXCLUSIVE", KW_OPERAND },
	{ "EXISTS", 0 },
	{ "EXPLAIN", KW_OPERAND },
	{ "FAIL", KW_OPERAND },
	{ "FILTER", 0 },
	{ "FIRST", KW_OPERAND },
	{ "FOLLOWING", KW_OPERAND },
	{ "FOR", KW_OPERAND },
	{ "FOREIGN", 0 },
	{ "FROM", 0 },
	{ "FULL", KW_OPERAND },
	{ "GENERATED", KW_OPERAND },
	{ "GLOB", KW_OPERAND },
	{ "GROUP", 0 },
	{ "GROUPS", KW_OPERAND },
	{ "HAVING", 0 },
	{ "IF", KW_OPERAND },
	{ "IGNORE", KW_OPERAND },
	{ "IMMEDIATE", KW_OPERAND },
	{ "IN", 0 },
	{ "INDEX", 0 },
	{ "INDEXED", 0 },
	{ "INITIALLY", KW_OPERAND },
	{ "INNER", KW_OPERAND },
	{ "INSERT", 0 },
	{ "INSTEAD", KW_OPERAND },
	{ "INTERSECT", 0 },
	{ "INTO", 0 },
	{ "IS", 0 },
	{ "ISNULL", 0 },
	{ "JOIN", 0 },
	{ "KEY", KW_OPERAND },
	{ "LAST", KW_OPERAND },
	{ "LEFT", KW_OPERAND },
	{ "LIKE", KW_OPERAND },
	{ "LIMIT", 0 },
	{ "MATCH", KW_OPERAND },
	{ "MATERIALIZED", KW_OPERAND },
	{ "NATURAL", KW_OPERAND },
	{ "NO", KW_OPERAND },
	{ "NOT", 0 },
	{ "NOTHING", 0 },
	{ "NOTNULL", 0 },
	{ "NULL", KW_OPERAND },
	{ "NULLS", KW_OPERAND },
	{ "OF", KW_OPERAND },
	{ "OFFSET", KW_OPERAND },
	{ "ON", 0 },
	{ "OR", 0 },
	{ "ORDER", 0 },
	{ "OTHERS", KW_OPERAND },
	{ "OUTER", KW_OPERAND },
	{ "OVER", 0 },
	{ "PARTITION", KW_OPERAND },
	{ "PLAN", KW_OPERAND },
	{ "PRAGMA", KW_OPERAND },
	{ "PRECEDING", KW_OPERAND },
	{ "PRIMARY", 0 },
	{ "QUERY", KW_OPERAND },
	{ "RAISE", KW_OPERAND },
	{ "RANGE", KW_OPERAND },
	{ "RECURSIVE", KW_OPERAND },
	{ "REFERENCES", 0 },
	{ "REGEXP", KW_OPERAND },
	{ "REINDEX", KW_OPERAND },
	{ "RELEASE", KW_OPERAND },
	{ "RENAME", KW_OPERAND },
	{ "REPLACE", KW_OPERAND },
	{ "RESTRICT", KW_OPERAND },
	{ "RETURNING", 0 },
	{ "RIGHT", KW_OPERAND },
	{ "ROLLBACK", KW_OPERAND },
	{ "ROW", KW_OPERAND },
	{ "ROWS", KW_OPERAND },
	{ "SAVEPOINT", KW_OPERAND },
	{ "SELECT", 0 },
	{ "SET", 0 },
	{ "TABLE", 0 },
	{ "TEMP", KW_OPERAND },
	{ "TEMPORARY", KW_OPERAND },
	{ "THEN", 0 },
	{ "TIES", KW_OPERAND },
	{ "TO", 0 },
	{ "TRANSACTION", 0 },
	{ "TRIGGER", KW_OPERAND },
	{ "UNBOUNDED", KW_OPERAND },
	{ "UNION", 0 },
	{ "UNIQUE", 0 },
	{ "UPDATE", 0 },
	{ "USING", 0 },
	{ "VACUUM", KW_OPERAND },
	{ "VALUES", 0 },
	{ "VIEW", KW_OPERAND },
	{ "VIRTUAL", KW_OPERAND },
	{ "WHEN", 0 },
	{ "WHERE", 0 },
	{ "WINDOW", 0 },
	{ "WITH", KW_OPERAND },
	{ "WITHOUT", KW_OPERAND },
};

#define KW_MAXLEN 17 /* CURRENT_TIMESTAMP */

static int kw_cmp(const void *key, const void *elem)
{
	return strcmp(key, ((const struct keyword *)elem)->name);
}

/* The keyword spelled by s[0..n) in any case, or NULL. */
static const struct keyword *kw_find(const unsigned char *s, size_t n)
{
	char up[KW_MAXLEN + 1];

	if (n < 2 || n > KW_MAXLEN)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = s[i];
		up[i] = (char)(c >= 'a' && c <= 'z' ? c - 32 : c);
	}
	up[n] = 0;
	return bsearch(up, keywords, sizeof(keywords) / sizeof(keywords[0]), sizeof(keywords[0]),
		       kw_cmp);
}

/* ---- lexer ------------------------------------------------------------- */

enum tok_kind {
	T_EOF,
	T_NUMBER,
	T_STRING,
	T_BLOB,
	T_PARAM,
	T_IDENT,  /* unquoted identifier or keyword */
	T_QIDENT, /* "x", [x], `x` */
	T_LPAREN,
	T_RPAREN,
	T_COMMA,
	T_SEMI,
	T_DOT,
	T_OP, /* operators and stray bytes */
	/* emitter-only kinds */
	T_KEYWORD,
	T_LIT, /* an emitted '?' or "..." */
};

struct tok {
	enum tok_kind kind;
	size_t start, end; /* byte range in the input */
};

struct lexer {
	const unsigned char *s;
	size_t len, pos;
};

/* NUL and other control bytes are treated as whitespace (see the top). */
static int is_space(unsigned char c)
{
	return c <= ' ' || c == 0x7f;
}

static int is_digit(unsigned char c)
{
	return c >= '0' && c <= '9';
}

static int is_xdigit(unsigned char c)
{
	return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static int is_alpha(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* SQLite's IdChar(): letters, digits, '_', '$' and every byte >= 0x80. */
static int is_idchar(unsigned char c)
{
	return is_alpha(c) || is_digit(c) || c == '_' || c == '$' || c >= 0x80;
}

/* End of a digit run starting at i, allowing '_' separators (SQLite 3.46). */
static size_t skip_digits(const unsigned char *s, size_t n, size_t i)
{
	while (i < n && (is_digit(s[i]) || (s[i] == '_' && i + 1 < n && is_digit(s[i + 1]))))
		i++;
	return i;
}

/* End of the numeric literal starting at s[i] (a digit, or '.' + digit). */
static size_t lex_number(const unsigned char *s, size_t n, size_t i)
{
	if (s[i] == '0' && i + 2 < n && (s[i + 1] == 'x' || s[i + 1] == 'X') &&
	    is_xdigit(s[i + 2])) {
		i += 3;
		while (i < n &&
		       (is_xdigit(s[i]) || (s[i] == '_' && i + 1 < n && is_xdigit(s[i + 1]))))
			i++;
	} else {
		i = skip_digits(s, n, i);
		if (i < n && s[i] == '.')
			i = skip_digits(s, n, i + 1);
		if (i < n && (s[i] == 'e' || s[i] == 'E')) {
			if (i + 1 < n && is_digit(s[i + 1]))
				i = skip_digits(s, n, i + 1);
			else if (i + 2 < n && (s[i + 1] == '+' || s[i + 1] == '-') &&
				 is_digit(s[i + 2]))
				i = skip_digits(s, n, i + 2);
		}
	}
	/* SQLite makes "12abc" one illegal token; keep it one literal. */
	while (i < n && is_idchar(s[i]))
		i++;
	return i;
}

/* End of a quoted run opened by s[i]; a doubled quote is an escape. */
static size_t lex_quoted(const unsigned char *s, size_t n, size_t i, unsigned char q)
{
	for (i++; i < n; i++) {
		if (s[i] == q) {
			if (i + 1 < n && s[i + 1] == q)
				i++;
			else
				return i + 1;
		}
	}
	return n; /* unterminated: runs to the end */
}

/* End of a parameter whose sigil ($ @ : #) is at s[i], as SQLite lexes it. */
static size_t lex_named_param(const unsigned char *s, size_t n, size_t i, int *ok)
{
	size_t nid = 0;

	for (i++; i < n; i++) {
		unsigned char c = s[i];
		if (is_idchar(c)) {
			nid++;
		} else if (c == '(' && nid > 0) {
			/* Tcl array syntax: $a(anything up to ')' or space) */
			do
				i++;
			while (i < n && !is_space(s[i]) && s[i] != ')');
			if (i < n && s[i] == ')')
				i++;
			break;
		} else if (c == ':' && i + 1 < n && s[i + 1] == ':') {
			i++; /* Tcl namespace: $a::b */
		} else {
			break;
		}
	}
	*ok = nid > 0;
	return i;
}

/* The end of the whitespace and comments from i on (an unterminated
 * block comment runs to the end). */
static size_t skip_blank(const unsigned char *s, size_t n, size_t i)
{
	for (;;) {
		while (i < n && is_space(s[i]))
			i++;
		if (i + 1 < n && s[i] == '-' && s[i + 1] == '-') {
			for (i += 2; i < n && s[i] != '\n'; i++)
				;
		} else if (i + 1 < n && s[i] == '/' && s[i + 1] == '*') {
			for (i += 2; i < n && !(s[i] == '*' && i + 1 < n && s[i + 1] == '/'); i++)
				;
			i = i < n ? i + 2 : n; /* unterminated: runs to the end */
		} else {
			return i;
		}
	}
}

/* The end of the operator at s[i], one of - = < > ! | and what may
 * follow it: -> ->> == <= <> << >= >> != || */
static size_t lex_op(const unsigned char *s, size_t n, size_t i)
{
	unsigned char c = s[i], c1 = i + 1 < n ? s[i + 1] : 0;

	switch (c) {
	case '-':
		if (c1 == '>')
			return (i + 2 < n && s[i + 2] == '>') ? i + 3 : i + 2; /* -> ->> */
		break;
	case '=':
	case '!': return c1 == '=' ? i + 2 : i + 1;
	case '<': return c1 == '=' || c1 == '>' || c1 == '<' ? i + 2 : i + 1;
	case '>': return c1 == '=' || c1 == '>' ? i + 2 : i + 1;
	case '|': return c1 == '|' ? i + 2 : i + 1;
	}
	return i + 1;
}

/* Skip whitespace and comments, then read one token into *t. */
static void lex_next(struct lexer *lx, struct tok *t)
{
	const unsigned char *s = lx->s;
	size_t n = lx->len, i = lx->pos, e;
	int ok;

	i = skip_blank(s, n, i);
	t->start = i;
	if (i >= n) {
		t->kind = T_EOF;
		t->end = lx->pos = n;
		return;
	}

	unsigned char c = s[i];
	unsigned char c1 = i + 1 < n ? s[i + 1] : 0;
	e = i + 1;
	switch (c) {
	case '(': t->kind = T_LPAREN; break;
	case ')': t->kind = T_RPAREN; break;
	case ',': t->kind = T_COMMA; break;
	case ';': t->kind = T_SEMI; break;
	case '.':
		if (is_digit(c1)) {
			t->kind = T_NUMBER;
			e = lex_number(s, n, i);
		} else {
			t->kind = T_DOT;
		}
		break;
	case '\'':
		t->kind = T_STRING;
		e = lex_quoted(s, n, i, '\'');
		break;
	case '"':
	case '`':
		t->kind = T_QIDENT;
		e = lex_quoted(s, n, i, c);
		break;
	case '[':
		t->kind = T_QIDENT;
		for (e = i + 1; e < n && s[e] != ']'; e++)
			;
		e = e < n ? e + 1 : n;
		break;
	case '?':
		t->kind = T_PARAM;
		while (e < n && is_digit(s[e]))
			e++;
		break;
	case '$':
	case '@':
	case ':':
	case '#':
		e = lex_named_param(s, n, i, &ok);
		t->kind = ok ? T_PARAM : T_OP;
		break;
	case '-':
	case '=':
	case '<':
	case '>':
	case '!':
	case '|':
		t->kind = T_OP;
		e = lex_op(s, n, i);
		break;
	default:
		if (is_digit(c)) {
			t->kind = T_NUMBER;
			e = lex_number(s, n, i);
		} else if ((c == 'x' || c == 'X') && c1 == '\'') {
			/* x'...': no escapes inside, ends at the next quote */
			t->kind = T_BLOB;
			for (e = i + 2; e < n && s[e] != '\''; e++)
				;
			e = e < n ? e + 1 : n;
		} else if (is_idchar(c)) {
			t->kind = T_IDENT;
			while (e < n && is_idchar(s[e]))
				e++;
		} else {
			t->kind = T_OP; /* + * / % & ~ and stray bytes */
		}
		break;
	}
	t->end = lx->pos = e;
}

/* The lexer's kinds are the public ones (fingerprint.h), value for value. */
_Static_assert(T_EOF == (int)SP_SQL_EOF && T_NUMBER == (int)SP_SQL_NUMBER &&
		       T_STRING == (int)SP_SQL_STRING && T_BLOB == (int)SP_SQL_BLOB &&
		       T_PARAM == (int)SP_SQL_PARAM && T_IDENT == (int)SP_SQL_IDENT &&
		       T_QIDENT == (int)SP_SQL_QIDENT && T_LPAREN == (int)SP_SQL_LPAREN &&
		       T_RPAREN == (int)SP_SQL_RPAREN && T_COMMA == (int)SP_SQL_COMMA &&
		       T_SEMI == (int)SP_SQL_SEMI && T_DOT == (int)SP_SQL_DOT &&
		       T_OP == (int)SP_SQL_OP,
	       "enum tok_kind and enum sp_sql_tok_kind agree");

void sp_sql_lex(struct sp_sql_lexer *lx, struct sp_sql_token *t)
{
	struct lexer l = { lx->s, lx->len, lx->pos };
	struct tok k;

	lex_next(&l, &k);
	lx->pos = l.pos;
	*t = (struct sp_sql_token){ (enum sp_sql_tok_kind)k.kind, k.start, k.end };
}

/* ---- emitter ----------------------------------------------------------- */

enum xform { X_COPY, X_LOWER, X_UPPER, X_QUOTED };

struct fp {
	struct lexer lx;
	char *buf;
	size_t len, cap;
	int failed;
	int any;            /* something has been written */
	int pending_semi;   /* a ';' waits for a following statement */
	enum tok_kind prev; /* kind of the last written token */
	int sign_ok;        /* a '-' or '+' here would be a unary sign */
};

static int reserve(struct fp *f, size_t more)
{
	if (f->failed)
		return -1;
	if (f->cap - f->len > more)
		return 0;
	size_t cap = f->cap ? f->cap : 64;
	while (cap - f->len <= more) {
		if (cap > SIZE_MAX / 2)
			goto oom;
		cap *= 2;
	}
	char *p = realloc(f->buf, cap);
	if (!p)
		goto oom;
	f->buf = p;
	f->cap = cap;
	return 0;
oom:
	f->failed = 1;
	return -1;
}

static int need_space(enum tok_kind prev, enum tok_kind cur)
{
	if (prev == T_LPAREN || prev == T_DOT)
		return 0;
	if (cur == T_RPAREN || cur == T_COMMA || cur == T_SEMI || cur == T_DOT)
		return 0;
	if (cur == T_LPAREN && (prev == T_IDENT || prev == T_QIDENT))
		return 0;
	return 1;
}

/*
 * Append p[0..n) as a token of the given kind, transformed by x, with the
 * separator the spacing rules ask for.  sign_ok is what a following '-'
 * or '+' would be.  Errors latch in f->failed.
 */
static void emit(struct fp *f, enum tok_kind kind, const void *p, size_t n, enum xform x,
		 int sign_ok)
{
	const unsigned char *src = p;

	if (reserve(f, n + 3) < 0)
		return;
	if (f->pending_semi) {
		f->buf[f->len++] = ';';
		f->prev = T_SEMI;
		f->pending_semi = 0;
	}
	if (f->any && need_space(f->prev, kind))
		f->buf[f->len++] = ' ';
	char *dst = f->buf + f->len;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = src[i];
		if (x == X_LOWER && c >= 'A' && c <= 'Z')
			c += 32;
		else if (x == X_UPPER && c >= 'a' && c <= 'z')
			c -= 32;
		else if (x == X_QUOTED && (c < ' ' || c == 0x7f))
			c = '?';
		dst[i] = (char)c;
	}
	f->len += n;
	f->any = 1;
	f->prev = kind;
	f->sign_ok = sign_ok;
}

static void emit_lit(struct fp *f, const char *text)
{
	emit(f, T_LIT, text, strlen(text), X_COPY, 0);
}

static void emit_punct(struct fp *f, enum tok_kind kind, const char *text)
{
	emit(f, kind, text, strlen(text), X_COPY, kind != T_RPAREN);
}

/*
 * Read one literal-like element: a literal, a parameter, or a signed
 * number.  Returns 1 if that is what came next (lexer moved past it).
 */
static int scan_literal(struct lexer *lx)
{
	struct tok t;

	lex_next(lx, &t);
	switch (t.kind) {
	case T_NUMBER:
	case T_STRING:
	case T_BLOB:
	case T_PARAM: return 1;
	case T_OP:
		if (t.end - t.start == 1 && (lx->s[t.start] == '-' || lx->s[t.start] == '+')) {
			lex_next(lx, &t);
			return t.kind == T_NUMBER;
		}
		return 0;
	default: return 0;
	}
}

/*
 * After a '(' has been read: scan "lit (, lit)* )".  Returns the number of
 * elements (lexer past the ')'), or 0 if the list is anything else (lexer
 * position unspecified).
 */
static size_t scan_literal_list(struct lexer *lx)
{
	struct tok t;
	size_t n = 0;

	for (;;) {
		if (!scan_literal(lx))
			return 0;
		n++;
		lex_next(lx, &t);
		if (t.kind == T_RPAREN)
			return n;
		if (t.kind != T_COMMA)
			return 0;
	}
}

/* Just after IN: squash "(lit, ...)" into "(...)", or leave it alone. */
static void squash_in(struct fp *f)
{
	size_t save = f->lx.pos;
	struct tok t;

	lex_next(&f->lx, &t);
	if (t.kind == T_LPAREN && scan_literal_list(&f->lx) > 0) {
		emit_punct(f, T_LPAREN, "(");
		emit_lit(f, "...");
		emit_punct(f, T_RPAREN, ")");
		return;
	}
	f->lx.pos = save;
}

/*
 * Just after VALUES: the longest run of literal-only rows "(lit, ...)"
 * separated by commas becomes the first row's shape, then ", ..." if the
 * run had more than one row.  Rows after the run are left to the main
 * loop.
 */
static void squash_values(struct fp *f)
{
	size_t save = f->lx.pos, after = save, rows = 0, width = 0;
	struct tok t;

	for (;;) {
		if (rows > 0) {
			lex_next(&f->lx, &t);
			if (t.kind != T_COMMA)
				break;
		}
		lex_next(&f->lx, &t);
		if (t.kind != T_LPAREN)
			break;
		size_t w = scan_literal_list(&f->lx);
		if (w == 0)
			break;
		if (rows++ == 0)
			width = w;
		after = f->lx.pos;
	}
	f->lx.pos = after;
	if (rows == 0)
		return;
	emit_punct(f, T_LPAREN, "(");
	for (size_t i = 0; i < width; i++) {
		if (i > 0)
			emit_punct(f, T_COMMA, ",");
		emit_lit(f, "?");
	}
	emit_punct(f, T_RPAREN, ")");
	if (rows > 1) {
		emit_punct(f, T_COMMA, ",");
		emit_lit(f, "...");
	}
}

static void emit_ident(struct fp *f, const struct tok *t)
{
	const unsigned char *p = f->lx.s + t->start;
	size_t n = t->end - t->start;
	const struct keyword *kw = kw_find(p, n);

	if (!kw) {
		emit(f, T_IDENT, p, n, X_LOWER, 0);
		return;
	}
	emit(f, T_KEYWORD, kw->name, n, X_COPY, !(kw->flags & KW_OPERAND));
	if (n == 2 && memcmp(kw->name, "IN", 2) == 0)
		squash_in(f);
	else if (n == 6 && memcmp(kw->name, "VALUES", 6) == 0)
		squash_values(f);
}

/* ---- shrinking --------------------------------------------------------- */

/*
 * Just after IN: when "(lit, lit, ...)" follows, set *keep to the end of
 * its first element, *resume to its ')' and *more to the elements after
 * the first, and return 1 (lexer past the ')'); else return 0 with the
 * lexer where it was.
 */
static int shrink_in(struct lexer *lx, size_t *keep, size_t *resume, size_t *more)
{
	size_t save = lx->pos;
	struct tok t;

	lex_next(lx, &t);
	if (t.kind != T_LPAREN || !scan_literal(lx))
		goto no;
	*keep = lx->pos;
	for (*more = 0;; ++*more) {
		lex_next(lx, &t);
		if (t.kind == T_RPAREN) {
			*resume = t.start;
			return 1;
		}
		if (t.kind != T_COMMA || !scan_literal(lx))
			goto no;
	}
no:
	lx->pos = save;
	return 0;
}

/*
 * Just after VALUES: the run of literal-only rows squash_values collapses.
 * When it has more than two, set *keep to the end of the second, *resume
 * to the end of the run and *more to the rows after the second, and return
 * 1. The lexer ends past the run, as squash_values leaves it.
 */
static int shrink_values(struct lexer *lx, size_t *keep, size_t *resume, size_t *more)
{
	size_t after = lx->pos, rows = 0;
	struct tok t;

	for (;;) {
		if (rows > 0) {
			lex_next(lx, &t);
			if (t.kind != T_COMMA)
				break;
		}
		lex_next(lx, &t);
		if (t.kind != T_LPAREN || scan_literal_list(lx) == 0)
			break;
		after = lx->pos;
		if (++rows == 2)
			*keep = after;
	}
	lx->pos = after;
	*resume = after;
	*more = rows > 2 ? rows - 2 : 0;
	return rows > 2;
}

size_t sp_sql_shrink(const char *sql, size_t len, char *out)
{
	struct lexer lx = { .s = (const unsigned char *)sql, .len = sql ? len : 0 };
	size_t o = 0, from = 0, keep = 0, resume = 0, more = 0;
	struct tok t;

	for (;;) {
		const struct keyword *kw;
		char note[48];
		int cut = 0, nn;

		lex_next(&lx, &t);
		if (t.kind == T_EOF)
			break;
		if (t.kind != T_IDENT || !(kw = kw_find(lx.s + t.start, t.end - t.start)))
			continue;
		if (t.end - t.start == 2 && memcmp(kw->name, "IN", 2) == 0)
			cut = shrink_in(&lx, &keep, &resume, &more);
		else if (t.end - t.start == 6 && memcmp(kw->name, "VALUES", 6) == 0)
			cut = shrink_values(&lx, &keep, &resume, &more);
		if (!cut)
			continue;
		/* a comment, which fingerprints drop, says what was left out */
		nn = snprintf(note, sizeof(note), " /* %zu more%s */", more,
			      t.end - t.start == 6 ? " rows" : "");
		if (nn <= 0 || resume - keep <= (size_t)nn)
			continue; /* not worth it: the text would not get shorter */
		memcpy(out + o, sql + from, keep - from);
		o += keep - from;
		memcpy(out + o, note, (size_t)nn);
		o += (size_t)nn;
		from = resume;
	}
	if (lx.len > from) { /* sql may be NULL when len is 0 */
		memcpy(out + o, sql + from, lx.len - from);
		o += lx.len - from;
	}
	out[o] = 0;
	return o;
}

char *sp_fingerprint(const char *sql, size_t len, uint64_t *id)
{
	struct fp f = {
		.lx = { .s = (const unsigned char *)sql, .len = sql ? len : 0 },
		.sign_ok = 1,
	};
	struct tok t;

	/* Normalizing never grows text by more than ~2x; start near that. */
	if (reserve(&f, len < SIZE_MAX / 4 ? len + len / 2 + 16 : 16) < 0)
		goto oom;

	while (!f.failed) {
		lex_next(&f.lx, &t);
		const unsigned char *p = f.lx.s + t.start;
		size_t n = t.end - t.start;

		switch (t.kind) {
		case T_EOF: goto done;
		case T_NUMBER:
		case T_STRING:
		case T_BLOB:
		case T_PARAM: emit_lit(&f, "?"); break;
		case T_IDENT: emit_ident(&f, &t); break;
		case T_QIDENT: emit(&f, T_QIDENT, p, n, X_QUOTED, 0); break;
		case T_LPAREN: emit_punct(&f, T_LPAREN, "("); break;
		case T_RPAREN: emit_punct(&f, T_RPAREN, ")"); break;
		case T_COMMA: emit_punct(&f, T_COMMA, ","); break;
		case T_DOT: emit(&f, T_DOT, ".", 1, X_COPY, 0); break;
		case T_SEMI:
			/* Written only once another statement follows. */
			if (f.any)
				f.pending_semi = 1;
			f.sign_ok = 1;
			break;
		case T_OP:
			if (n == 1 && (*p == '-' || *p == '+') && f.sign_ok) {
				size_t save = f.lx.pos;
				struct tok next;
				lex_next(&f.lx, &next);
				if (next.kind == T_NUMBER) {
					emit_lit(&f, "?");
					break;
				}
				f.lx.pos = save;
			}
			emit(&f, T_OP, p, n, X_COPY, 1);
			break;
		default: break;
		}
	}
done:
	if (f.failed || reserve(&f, 1) < 0)
		goto oom;
	f.buf[f.len] = 0;
	/* Callers keep fingerprints; don't let a huge IN list pin its input size. */
	if (f.cap > 2 * (f.len + 1)) {
		char *p = realloc(f.buf, f.len + 1);
		if (p)
			f.buf = p;
	}
	if (id)
		*id = sp_hash64(f.buf, f.len);
	return f.buf;
oom:
	free(f.buf);
	errno = ENOMEM;
	return NULL;
}
