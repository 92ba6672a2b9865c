/* SPDX-License-Identifier: MIT */
/*
 * fingerprint.h - SQL fingerprinting: one normalized text and one stable
 * 64-bit id per query shape.
 *
 * Two statements that differ only in literal values, bound-parameter
 * spelling, whitespace, comments or keyword/identifier case get the same
 * fingerprint and id.  This is our own tokenizer (Debian's libsqlite3 is
 * built without sqlite3_normalized_sql); it follows SQLite's lexical rules
 * but does not parse, so it never rejects input.  See fingerprint.c for
 * the exact rules.  Nothing here is thread-hostile: no global state.
 */
#ifndef SP_FINGERPRINT_H
#define SP_FINGERPRINT_H

#include <stddef.h>
#include <stdint.h>

/*
 * Normalize sql[0..len).  sql need not be NUL-terminated and may contain
 * any bytes (NULs, invalid UTF-8); bytes at and past sql[len] are never
 * read.  sql may be NULL when len is 0.
 *
 * Returns a malloc'd, NUL-terminated fingerprint that the caller frees,
 * and stores sp_hash64() of its text in *id (id may be NULL).  The
 * fingerprint never contains NUL or other ASCII control bytes; it may
 * contain bytes >= 0x80 copied from identifiers.  Returns NULL (errno
 * ENOMEM, *id untouched) when memory runs out.  Runs in O(len).
 */
char *sp_fingerprint(const char *sql, size_t len, uint64_t *id);

/*
 * Shorten sql[0..len) without changing its fingerprint: the elements of an
 * "IN (lit, lit, ...)" list after the first, and the rows of a literal
 * "VALUES (...), (...), ..." run after the second, are replaced by a
 * block comment saying how many were left out ("4999 more", "998 more
 * rows"), where that makes the text shorter. Everything else is copied byte for byte. Writes the result and a NUL
 * into out (at least len + 1 bytes; the result is never longer than sql)
 * and returns its length. O(len), no allocation: the preload calls it on
 * texts too long to send whole, so that the part that is sent still
 * fingerprints as the whole text does.
 */
size_t sp_sql_shrink(const char *sql, size_t len, char *out);

/*
 * The lexer behind sp_fingerprint and sp_sql_shrink, for readers of SQL
 * and fingerprint texts that need tokens (the doctor's index suggestions):
 * SQLite's lexical rules, comments skipped, never an error (a stray byte
 * is an SP_SQL_OP of one byte). Start with lx = { s, len, 0 }; each call
 * stores the next token's kind and byte range [start, end) of s in *t, and
 * SP_SQL_EOF at the end.
 */
enum sp_sql_tok_kind {
	SP_SQL_EOF,
	SP_SQL_NUMBER,
	SP_SQL_STRING,
	SP_SQL_BLOB,
	SP_SQL_PARAM,
	SP_SQL_IDENT,  /* unquoted identifier or keyword */
	SP_SQL_QIDENT, /* "x", [x], `x` (quotes included) */
	SP_SQL_LPAREN,
	SP_SQL_RPAREN,
	SP_SQL_COMMA,
	SP_SQL_SEMI,
	SP_SQL_DOT,
	SP_SQL_OP, /* operators and stray bytes */
};
struct sp_sql_lexer {
	const unsigned char *s;
	size_t len, pos;
};
struct sp_sql_token {
	enum sp_sql_tok_kind kind;
	size_t start, end;
};
void sp_sql_lex(struct sp_sql_lexer *lx, struct sp_sql_token *t);

/*
 * The stable hash used for fingerprint ids and elsewhere: 64-bit FNV-1a of
 * data[0..len).  Its values are stored in profiles, so it must never change.
 */
uint64_t sp_hash64(const void *data, size_t len);

#endif /* SP_FINGERPRINT_H */
