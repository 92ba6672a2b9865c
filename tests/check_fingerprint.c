/* SPDX-License-Identifier: MIT */
/*
 * check_fingerprint.c - unit tests for report/profile/fingerprint.c.
 *
 * Tables of tricky SQL with the exact fingerprint expected, grouped by
 * behaviour; pairs that must share an id; robustness on hostile bytes
 * (every input is also fed through an exactly-sized buffer without a
 * terminating NUL, so a sanitizer build catches any read past len); one
 * hard-coded id so a change of hash is caught; the keyword list checked
 * against the SQLite library the test runs with; and 1 MB inputs that
 * would time out if any path were quadratic.
 */
#include <check.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fingerprint.h"

struct fp_case {
	const char *in;
	const char *out;
};

/* Fingerprint in[0..len) from a private, exactly-sized, unterminated copy. */
static char *fp_exact(const char *in, size_t len, uint64_t *id)
{
	char *copy = malloc(len ? len : 1);
	ck_assert_ptr_nonnull(copy);
	memcpy(copy, in, len);
	char *fp = sp_fingerprint(len ? copy : NULL, len, id);
	free(copy);
	ck_assert_ptr_nonnull(fp);
	return fp;
}

static void check_cases(const struct fp_case *c, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t id = 0;
		char *fp = fp_exact(c[i].in, strlen(c[i].in), &id);
		ck_assert_msg(strcmp(fp, c[i].out) == 0, "input  [%s]\nwanted [%s]\ngot    [%s]",
			      c[i].in, c[i].out, fp);
		ck_assert_msg(id == sp_hash64(fp, strlen(fp)),
			      "id of [%s] is not the hash of its text", c[i].in);
		free(fp);
	}
}

#define CHECK_TABLE(t) check_cases((t), sizeof(t) / sizeof((t)[0]))

/* ---- literals ------------------------------------------------------------ */

START_TEST(test_strings)
{
	static const struct fp_case t[] = {
		{ "SELECT 'abc'", "SELECT ?" },
		{ "SELECT 'it''s'", "SELECT ?" },
		{ "SELECT ''''", "SELECT ?" },
		{ "SELECT ''", "SELECT ?" },
		{ "SELECT 'a -- b'", "SELECT ?" },
		{ "SELECT 'a /* b */ c', 'x'", "SELECT ?, ?" },
		{ "SELECT 'a; b'; SELECT 'c'", "SELECT ?; SELECT ?" },
		{ "SELECT 'x' || 'y'", "SELECT ? || ?" },
		{ "SELECT 'Ünïcödé'", "SELECT ?" },
		{ "SELECT \"Col\" FROM t", "SELECT \"Col\" FROM t" },
	};
	CHECK_TABLE(t);
}
END_TEST

START_TEST(test_numbers)
{
	static const struct fp_case t[] = {
		{ "SELECT 1", "SELECT ?" },
		{ "SELECT 123, 1.5, .5, 5., 1e10, 1E-3, 2.5e+7", "SELECT ?, ?, ?, ?, ?, ?, ?" },
		{ "SELECT 0x1F, 0XdeadBEEF", "SELECT ?, ?" },
		{ "SELECT 1_000_000", "SELECT ?" },
		{ "SELECT 12abc", "SELECT ?" },
		{ "SELECT 1+2*3", "SELECT ? + ? * ?" },
		{ "SELECT x'', X'0aFF', x'00'", "SELECT ?, ?, ?" },
		{ "SELECT x, X", "SELECT x, x" },
		{ "SELECT xy'a'", "SELECT xy ?" },
	};
	CHECK_TABLE(t);
}
END_TEST

START_TEST(test_signs)
{
	static const struct fp_case t[] = {
		{ "SELECT -5", "SELECT ?" },
		{ "WHERE a = -5", "WHERE a = ?" },
		{ "WHERE a = - 5", "WHERE a = ?" },
		{ "WHERE a = +5", "WHERE a = ?" },
		{ "SELECT a - 5", "SELECT a - ?" },
		{ "SELECT a-5", "SELECT a - ?" },
		{ "SELECT a - -5", "SELECT a - ?" },
		{ "SELECT (a)-5", "SELECT (a) - ?" },
		{ "SELECT 3 - 5", "SELECT ? - ?" },
		{ "SELECT ? - 5", "SELECT ? - ?" },
		{ "SELECT f(-1, -2.5)", "SELECT f(?, ?)" },
		{ "SELECT -a", "SELECT - a" },
		{ "SELECT - -a", "SELECT - - a" },
		{ "-1", "?" },
		{ "LIMIT -1", "LIMIT ?" },
		{ "SELECT a*-2", "SELECT a * ?" },
		{ "SELECT NULL - 1", "SELECT NULL - ?" },
		{ "SELECT CASE WHEN x THEN -1 ELSE -2 END - 3",
		  "SELECT CASE WHEN x THEN ? ELSE ? END - ?" },
		/* keywords that may name a column take a binary minus */
		{ "SELECT key - 1 FROM kv", "SELECT KEY - ? FROM kv" },
		{ "SELECT current_timestamp - 1", "SELECT CURRENT_TIMESTAMP - ?" },
		{ "SELECT 1; -2", "SELECT ?; ?" },
		{ "SELECT a->'$.x', a->>-1", "SELECT a -> ?, a ->> ?" },
	};
	CHECK_TABLE(t);
}
END_TEST

/* ---- parameters ----------------------------------------------------------- */

START_TEST(test_params)
{
	static const struct fp_case t[] = {
		{ "SELECT ?, ?3, ?123", "SELECT ?, ?, ?" },
		{ "SELECT :name, @x, $y, #z", "SELECT ?, ?, ?, ?" },
		{ "SELECT $a::b::c, $arr(key)", "SELECT ?, ?" },
		{ "SELECT $arr(a b)", "SELECT ? b)" }, /* as SQLite: token ends at the space */
		{ "SELECT $v(1)", "SELECT ?" },
		{ "WHERE a = :a AND b = @B", "WHERE a = ? AND b = ?" },
		{ "SELECT : x", "SELECT : x" },
		{ "SELECT @", "SELECT @" },
	};
	CHECK_TABLE(t);
}
END_TEST

/* ---- comments and whitespace ------------------------------------------ */

START_TEST(test_comments)
{
	static const struct fp_case t[] = {
		{ "SELECT 1 -- trailing", "SELECT ?" },
		{ "SELECT /* inline */ a", "SELECT a" },
		{ "SELECT a/**/FROM t", "SELECT a FROM t" },
		{ "/* lead */ SELECT 1", "SELECT ?" },
		{ "SELECT a -- one\n, b -- two\nFROM t", "SELECT a, b FROM t" },
		{ "SELECT /* a */ /* b */ -- c\n 1", "SELECT ?" },
		{ "SELECT /* ' unbalanced quote */ 'x'", "SELECT ?" },
		{ "SELECT '/* not a comment */'", "SELECT ?" },
		{ "SELECT 1 /* unterminated", "SELECT ?" },
		{ "SELECT 1 /* unterminated *", "SELECT ?" },
		{ "SELECT 5-- comment, not minus\n", "SELECT ?" },
		{ "SELECT 5 /* x */ - /* y */ 3", "SELECT ? - ?" },
	};
	CHECK_TABLE(t);
}
END_TEST

START_TEST(test_whitespace)
{
	static const struct fp_case t[] = {
		{ "  SELECT\t a ,b\n\nFROM   t  ", "SELECT a, b FROM t" },
		{ "SELECT f( a , b ) , ( c )", "SELECT f(a, b), (c)" },
		{ "SELECT main . t . c FROM main.t", "SELECT main.t.c FROM main.t" },
		{ "SELECT t.* FROM t", "SELECT t.* FROM t" },
		{ "SELECT count(*) FROM t", "SELECT count(*) FROM t" },
		{ "SELECT COUNT (*) FROM t", "SELECT count(*) FROM t" },
		{ "INSERT INTO t (a,b) SELECT 1,2", "INSERT INTO t(a, b) SELECT ?, ?" },
		{ "SELECT a<>b, a!=b, a<=b, a>=b, a==b, a<<b, a>>b",
		  "SELECT a <> b, a != b, a <= b, a >= b, a == b, a << b, a >> b" },
		{ "SELECT a||b|c&d%e/f~g", "SELECT a || b | c & d % e / f ~ g" },
		{ "\r\n\f\v SELECT\r\n1", "SELECT ?" },
	};
	CHECK_TABLE(t);
}
END_TEST

/* ---- keywords and identifiers ------------------------------------------ */

START_TEST(test_case)
{
	static const struct fp_case t[] = {
		{ "select A from T where B is not null", "SELECT a FROM t WHERE b IS NOT NULL" },
		{ "SeLeCt MyCol FrOm MyTable", "SELECT mycol FROM mytable" },
		{ "create temporary table if not exists t(a integer primary key autoincrement)",
		  "CREATE TEMPORARY TABLE IF NOT EXISTS t(a integer PRIMARY KEY AUTOINCREMENT)" },
		{ "select current_timestamp, current_date",
		  "SELECT CURRENT_TIMESTAMP, CURRENT_DATE" },
		{ "SELECT selected, fromage, \"select\"", "SELECT selected, fromage, \"select\"" },
		{ "SELECT true, FALSE", "SELECT true, false" },
	};
	CHECK_TABLE(t);
}
END_TEST

START_TEST(test_quoted_identifiers)
{
	static const struct fp_case t[] = {
		{ "SELECT \"Col\" FROM \"My Table\"", "SELECT \"Col\" FROM \"My Table\"" },
		{ "SELECT [a b], [Weird\"Name]", "SELECT [a b], [Weird\"Name]" },
		{ "SELECT `c`, `d``e`", "SELECT `c`, `d``e`" },
		{ "SELECT \"a\"\"b\"", "SELECT \"a\"\"b\"" },
		{ "SELECT \"T\".\"C\" FROM \"T\"", "SELECT \"T\".\"C\" FROM \"T\"" },
		{ "INSERT INTO \"T\"(\"A\") VALUES (1)", "INSERT INTO \"T\"(\"A\") VALUES (?)" },
		{ "SELECT \"unterminated", "SELECT \"unterminated" },
		{ "SELECT [unterminated", "SELECT [unterminated" },
		{ "SELECT \"tab\there\"", "SELECT \"tab?here\"" },
	};
	CHECK_TABLE(t);
}
END_TEST

/*
 * Every keyword the SQLite library we run with knows is upper-cased, and
 * a near miss is not.  Fails if SQLite grows a keyword our list lacks.
 */
START_TEST(test_keyword_list)
{
	int n = sqlite3_keyword_count();
	for (int i = 0; i < n; i++) {
		const char *z;
		int len;
		char lower[64], want[64];
		ck_assert_int_eq(sqlite3_keyword_name(i, &z, &len), SQLITE_OK);
		ck_assert_int_lt(len, (int)sizeof(lower));
		for (int j = 0; j < len; j++) {
			lower[j] = (char)(z[j] >= 'A' && z[j] <= 'Z' ? z[j] + 32 : z[j]);
			want[j] = z[j];
		}
		lower[len] = want[len] = 0;
		char *fp = fp_exact(lower, (size_t)len, NULL);
		ck_assert_msg(strcmp(fp, want) == 0, "keyword %s came out as [%s]", want, fp);
		free(fp);
	}
	char *fp = fp_exact("selects", 7, NULL);
	ck_assert_str_eq(fp, "selects");
	free(fp);
}
END_TEST

/* ---- lists ------------------------------------------------------------------ */

START_TEST(test_in_lists)
{
	static const struct fp_case t[] = {
		{ "WHERE a IN (1, 2, 3)", "WHERE a IN (...)" },
		{ "WHERE a IN (?)", "WHERE a IN (...)" },
		{ "WHERE a IN (?, ?, ?, ?)", "WHERE a IN (...)" },
		{ "WHERE a in ('x','y',x'00',-1,:p)", "WHERE a IN (...)" },
		{ "WHERE a NOT IN (1,2)", "WHERE a NOT IN (...)" },
		{ "WHERE a IN (SELECT b FROM u WHERE c = 1)",
		  "WHERE a IN (SELECT b FROM u WHERE c = ?)" },
		{ "WHERE a IN (1, b)", "WHERE a IN (?, b)" },
		{ "WHERE a IN (1, 2 + 3)", "WHERE a IN (?, ? + ?)" },
		{ "WHERE a IN ()", "WHERE a IN ()" },
		{ "WHERE a IN t", "WHERE a IN t" },
		{ "WHERE a IN (1, 2", "WHERE a IN (?, ?" },
		{ "WHERE a IN (1, b IN (2, 3))", "WHERE a IN (?, b IN (...))" },
		{ "WHERE (a, b) IN (VALUES (1, 2), (3, 4))",
		  "WHERE (a, b) IN (VALUES (?, ?), ...)" },
	};
	CHECK_TABLE(t);
}
END_TEST

START_TEST(test_values)
{
	static const struct fp_case t[] = {
		{ "INSERT INTO t VALUES (1,'a'), (2,'b')", "INSERT INTO t VALUES (?, ?), ..." },
		{ "INSERT INTO t VALUES (1,'a'),(2,'b'),(3,'c'),(4,'d')",
		  "INSERT INTO t VALUES (?, ?), ..." },
		{ "INSERT INTO t VALUES (1,'a')", "INSERT INTO t VALUES (?, ?)" },
		{ "INSERT INTO t VALUES (?, ?)", "INSERT INTO t VALUES (?, ?)" },
		{ "INSERT INTO t VALUES (-1, +2.5)", "INSERT INTO t VALUES (?, ?)" },
		{ "INSERT INTO t VALUES (1, abs(2))", "INSERT INTO t VALUES (?, abs(?))" },
		{ "INSERT INTO t VALUES (1), (2), (x)", "INSERT INTO t VALUES (?), ..., (x)" },
		{ "INSERT INTO t VALUES (1) ON CONFLICT DO NOTHING",
		  "INSERT INTO t VALUES (?) ON CONFLICT DO NOTHING" },
		{ "INSERT INTO t VALUES (1), (2) RETURNING id",
		  "INSERT INTO t VALUES (?), ... RETURNING id" },
		{ "INSERT INTO t DEFAULT VALUES", "INSERT INTO t DEFAULT VALUES" },
		{ "INSERT INTO t VALUES (1), (2);", "INSERT INTO t VALUES (?), ..." },
		{ "INSERT INTO t VALUES (1), ", "INSERT INTO t VALUES (?)," },
	};
	CHECK_TABLE(t);
}
END_TEST

/* ---- statements ------------------------------------------------------------- */

START_TEST(test_statements)
{
	static const struct fp_case t[] = {
		{ "SELECT 1;", "SELECT ?" },
		{ "SELECT 1 ; \n\t ", "SELECT ?" },
		{ "SELECT 1;;;", "SELECT ?" },
		{ ";;SELECT 1", "SELECT ?" },
		{ "BEGIN; UPDATE t SET a = 1; COMMIT;", "BEGIN; UPDATE t SET a = ?; COMMIT" },
		{ "SELECT 1;;SELECT 2", "SELECT ?; SELECT ?" },
		{ "SELECT 1; -- done", "SELECT ?" },
		{ "SELECT 1; /* x */ ;", "SELECT ?" },
	};
	CHECK_TABLE(t);
}
END_TEST

/* ---- equivalence and ids ------------------------------------------------ */

START_TEST(test_same_id)
{
	static const char *const pairs[][2] = {
		{ "SELECT * FROM t WHERE a = 1", "select *\n  from T\n where A=42 -- why\n;" },
		{ "SELECT * FROM t WHERE a = 'x'", "SELECT * FROM t WHERE a = ?1" },
		{ "SELECT * FROM t WHERE a = -1", "SELECT * FROM t WHERE a=:value" },
		{ "SELECT * FROM t WHERE a IN (1)",
		  "SELECT * FROM t WHERE a IN (1,2,3,4,5,6,7,8,9)" },
		{ "INSERT INTO t VALUES (1,2),(3,4)", "insert into t values (5,6),(7,8),(9,10)" },
		{ "UPDATE t SET v = x'00' WHERE k = 1e3",
		  "/* c */ UPDATE t SET v=X'FFFF' WHERE k=0x10;" },
	};
	for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
		uint64_t a, b;
		char *fa = fp_exact(pairs[i][0], strlen(pairs[i][0]), &a);
		char *fb = fp_exact(pairs[i][1], strlen(pairs[i][1]), &b);
		ck_assert_msg(a == b && strcmp(fa, fb) == 0, "[%s] vs [%s]", fa, fb);
		free(fa);
		free(fb);
	}
	uint64_t a, b;
	char *fa = fp_exact("SELECT a FROM t", 15, &a);
	char *fb = fp_exact("SELECT b FROM t", 15, &b);
	ck_assert_uint_ne(a, b);
	free(fa);
	free(fb);
}
END_TEST

/* Ids are stored in profiles: these values must never change. */
START_TEST(test_id_stable)
{
	uint64_t id;
	char *fp = fp_exact("select * from T where a=1", 25, &id);
	ck_assert_str_eq(fp, "SELECT * FROM t WHERE a = ?");
	ck_assert_uint_eq(id, UINT64_C(0x43a1c1e4d003bdcf));
	free(fp);

	ck_assert_uint_eq(sp_hash64("", 0), UINT64_C(0xcbf29ce484222325));
	ck_assert_uint_eq(sp_hash64("a", 1), UINT64_C(0xaf63dc4c8601ec8c)); /* FNV-1a test vector */
}
END_TEST

/* ---- robustness ----------------------------------------------------------- */

START_TEST(test_degenerate)
{
	static const struct fp_case t[] = {
		{ "", "" },
		{ "   \n\t ", "" },
		{ "-- only a comment", "" },
		{ "/* only a comment */", "" },
		{ "/* unterminated", "" },
		{ "/*", "" },
		{ "--", "" },
		{ "-", "-" },
		{ "/", "/" },
		{ ";", "" },
		{ "'", "?" },
		{ "SELECT 'unterminated", "SELECT ?" },
		{ "SELECT 'it''s", "SELECT ?" },
		{ "SELECT x'ab", "SELECT ?" },
		{ "SELECT \\ { } ^", "SELECT \\ { } ^" },
		{ "SELECT 1e", "SELECT ?" },
		{ "SELECT 1e+", "SELECT ? +" },
		{ "SELECT 0x", "SELECT ?" },
	};
	CHECK_TABLE(t);

	uint64_t id;
	char *fp = sp_fingerprint(NULL, 0, &id);
	ck_assert_ptr_nonnull(fp);
	ck_assert_str_eq(fp, "");
	ck_assert_uint_eq(id, sp_hash64("", 0));
	free(fp);
	fp = sp_fingerprint("SELECT 1", 8, NULL); /* id is optional */
	ck_assert_str_eq(fp, "SELECT ?");
	free(fp);
}
END_TEST

START_TEST(test_nul_bytes)
{
	static const char in1[] = "SELECT\0a FROM t WHERE b = 'x\0y'";
	char *fp = fp_exact(in1, sizeof(in1) - 1, NULL);
	ck_assert_str_eq(fp, "SELECT a FROM t WHERE b = ?");
	free(fp);

	static const char in2[] = "SELECT \"a\0b\" FROM t";
	fp = fp_exact(in2, sizeof(in2) - 1, NULL);
	ck_assert_str_eq(fp, "SELECT \"a?b\" FROM t");
	free(fp);

	static const char in3[] = "\0\0\0";
	fp = fp_exact(in3, 3, NULL);
	ck_assert_str_eq(fp, "");
	free(fp);

	/* The length, not a NUL, ends the input. */
	fp = fp_exact("SELECT 1; DROP TABLE t", 8, NULL);
	ck_assert_str_eq(fp, "SELECT ?");
	free(fp);
}
END_TEST

START_TEST(test_invalid_utf8)
{
	static const char in[] = "SELECT \xff\xfe\x80 FROM \xc3 WHERE a = '\xff' AND Ab\xe9 = 1";
	char *fp = fp_exact(in, sizeof(in) - 1, NULL);
	ck_assert_str_eq(fp, "SELECT \xff\xfe\x80 FROM \xc3 WHERE a = ? AND ab\xe9 = ?");
	free(fp);
}
END_TEST

/*
 * The fingerprint is printable text apart from bytes >= 0x80, and starts
 * with a token.  (Spaces inside an unterminated quoted identifier are
 * verbatim, so trailing or double spaces are legitimate here.)
 */
static void check_clean(const char *fp)
{
	for (const unsigned char *p = (const unsigned char *)fp; *p; p++)
		ck_assert_msg(*p >= ' ' && *p != 0x7f, "control byte 0x%02x in output", *p);
	ck_assert_msg(fp[0] != ' ', "leading space in [%s]", fp);
}

/*
 * Every prefix of every tricky input, and random strings over an alphabet
 * of SQL-significant bytes: no crash, no read past len (under a
 * sanitizer), clean output, same result twice.
 */
START_TEST(test_total)
{
	static const char *const inputs[] = {
		"SELECT 'it''s' -- c\n, x'0A', \"q\"\"q\", [b c], `d``e` /* z */ FROM t WHERE a IN (1,-2,:x) AND b = -3e-2;",
		"INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, $v(x)) ; SELECT 0x1F, .5e+3, 1_0, a->>'$', a - -1",
	};
	for (size_t k = 0; k < sizeof(inputs) / sizeof(inputs[0]); k++) {
		size_t len = strlen(inputs[k]);
		for (size_t n = 0; n <= len; n++) {
			char *fp = fp_exact(inputs[k], n, NULL);
			check_clean(fp);
			free(fp);
		}
	}

	static const char alphabet[] = "'\"`[]x-/*\n;(),.?:@$#0e9+ aIN\0\xff";
	unsigned seed = 12345;
	char buf[64];
	for (int iter = 0; iter < 20000; iter++) {
		seed = seed * 1103515245u + 12345u;
		size_t n = (seed >> 16) % sizeof(buf);
		for (size_t i = 0; i < n; i++) {
			seed = seed * 1103515245u + 12345u;
			buf[i] = alphabet[(seed >> 16) % (sizeof(alphabet) - 1)];
		}
		uint64_t id1, id2;
		char *a = fp_exact(buf, n, &id1);
		char *b = fp_exact(buf, n, &id2);
		check_clean(a);
		ck_assert_str_eq(a, b);
		ck_assert_uint_eq(id1, id2);
		free(a);
		free(b);
	}
}
END_TEST

/* ---- linear time ---------------------------------------------------------- */

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Repeat unit to fill 1 MiB, with prefix and suffix; fingerprint; free. */
static char *fp_big(const char *prefix, const char *unit, const char *suffix, size_t *outlen)
{
	size_t total = 1 << 20, pl = strlen(prefix), ul = strlen(unit), sl = strlen(suffix);
	char *in = malloc(total + pl + sl);
	ck_assert_ptr_nonnull(in);
	memcpy(in, prefix, pl);
	size_t n = pl;
	while (n + ul <= pl + total) {
		memcpy(in + n, unit, ul);
		n += ul;
	}
	memcpy(in + n, suffix, sl);
	n += sl;
	double t0 = now_s();
	char *fp = sp_fingerprint(in, n, NULL);
	double dt = now_s() - t0;
	ck_assert_ptr_nonnull(fp);
	printf("fingerprint: %zu bytes of \"%.12s...\" in %.1f ms\n", n, unit, dt * 1e3);
	free(in);
	*outlen = strlen(fp);
	return fp;
}

/*
 * Inputs shaped to hit each look-ahead: a huge IN list (squashed), a huge
 * IN list that fails at its very end, huge VALUES, many unary signs, many
 * nested parentheses, one long comment / string / identifier.  A
 * quadratic path would take minutes on 1 MiB and hit the timeout.
 */
START_TEST(test_big_input)
{
	size_t n;
	char *fp;

	fp = fp_big("SELECT * FROM t WHERE a IN (0", ", 12345", ")", &n);
	ck_assert_str_eq(fp, "SELECT * FROM t WHERE a IN (...)");
	free(fp);

	fp = fp_big("SELECT * FROM t WHERE a IN (0", ", 12345", ", b)", &n);
	ck_assert_uint_gt(n, 1 << 18);
	ck_assert_str_eq(fp + n - 5, "?, b)");
	free(fp);

	fp = fp_big("INSERT INTO t VALUES (0, 'a')", ", (1, 'x')", "", &n);
	ck_assert_str_eq(fp, "INSERT INTO t VALUES (?, ?), ...");
	free(fp);

	fp = fp_big("SELECT ", "- ", "1", &n);
	ck_assert_str_eq(fp + n - 3, "- ?");
	free(fp);

	fp = fp_big("SELECT ", "a IN (", "1", &n);
	check_clean(fp);
	free(fp);

	fp = fp_big("SELECT 1 /*", "xx", "", &n);
	ck_assert_str_eq(fp, "SELECT ?");
	free(fp);

	fp = fp_big("SELECT '", "ab''", "'", &n);
	ck_assert_str_eq(fp, "SELECT ?");
	free(fp);

	fp = fp_big("SELECT ", "AbC", "", &n);
	ck_assert_uint_gt(n, 1 << 19);
	free(fp);
}
END_TEST

/* Shrink in[0..len) from an exactly-sized, unterminated copy; check that
 * the result is no longer, and fingerprints as in does. Returns it. */
static char *shrink_same(const char *in, size_t len)
{
	char *copy = malloc(len ? len : 1), *out = malloc(len + 1), *a, *b;
	size_t m;

	ck_assert_ptr_nonnull(copy);
	ck_assert_ptr_nonnull(out);
	memcpy(copy, in, len);
	m = sp_sql_shrink(len ? copy : NULL, len, out);
	ck_assert_uint_le(m, len);
	ck_assert_uint_eq(strlen(out), m);
	a = sp_fingerprint(copy, len, NULL);
	b = sp_fingerprint(out, m, NULL);
	ck_assert_msg(strcmp(a, b) == 0,
		      "input  [%.200s]\nshrunk [%.200s]\nfp     [%.200s]\nfp'    [%.200s]", in, out,
		      a, b);
	free(a);
	free(b);
	free(copy);
	return out;
}

/*
 * sp_sql_shrink, which the preload applies to texts longer than it sends
 * (16 KiB): literal lists lose their elements but the fingerprint stays,
 * everything else is copied, and huge lists shrink to a few bytes.
 */
START_TEST(test_shrink)
{
	static const char *const same[] = {
		"WHERE a IN (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12)",
		"WHERE a in ('x','y',x'00',-1,:p, ?, ?3, @a, $b, +4, 'it''s', 77777777)",
		"WHERE a IN (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, b)",
		"WHERE a IN (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12",
		"WHERE a IN (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, b IN (2, 3, 4, 5, 6, 7, 8, 9, 10, 11))",
		"WHERE a IN (1, 2 -- two\n, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12) /* IN (1, 2, 3, 4, 5, 6) */",
		"WHERE \"in\" = 'IN (1, 2, 3, 4, 5, 6, 7, 8, 9, 10)' AND x IN(1,2,3,4,5,6,7,8,9,10,11)",
		"WHERE (a, b) IN (VALUES (1, 2), (3, 4), (5, 6), (7, 8), (9, 10), (11, 12))",
		"INSERT INTO t VALUES (1,'a'),(2,'b'),(3,'c'),(4,'d'),(5,'e'),(6,'f'),(7,'g')",
		"INSERT INTO t VALUES (1), (2), (3), (4), (5), (6), (7), (8), (9), (x), (1), (2)",
		"INSERT INTO t VALUES (1), (2), (3), (4), (5), (6), (7), (8), (9) RETURNING id",
		"INSERT INTO t VALUES (1), (2), (3), (4), (5), (6), (7), (8), (9), ",
		"SELECT 1; SELECT a FROM t WHERE b IN (1, 2, 3, 4, 5, 6, 7, 8, 9, 10); VALUES (1), (2)",
		"",
		"IN",
		"VALUES",
		"SELECT 'unterminated IN (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12",
	};
	const char *q = "SELECT * FROM t WHERE a IN (1, 2, 3, 4, 5, 6, 7, 8, 9) AND b = 'x'";
	size_t i, n;
	char *s, *big;

	for (i = 0; i < sizeof(same) / sizeof(same[0]); i++)
		free(shrink_same(same[i], strlen(same[i])));
	s = shrink_same(q, strlen(q));
	ck_assert_str_eq(s, "SELECT * FROM t WHERE a IN (1 /* 8 more */) AND b = 'x'");
	free(s);
	s = shrink_same("WHERE a IN (1, 2)", 17); /* a comment would not be shorter */
	ck_assert_str_eq(s, "WHERE a IN (1, 2)");
	free(s);

	/* 1 MiB lists: a few bytes left, in linear time */
	big = malloc(1 << 21);
	ck_assert_ptr_nonnull(big);
	n = (size_t)sprintf(big, "SELECT * FROM t WHERE id IN (0");
	for (i = 1; n < (1 << 20); i++)
		n += (size_t)sprintf(big + n, ", %zu", i * 7919);
	n += (size_t)sprintf(big + n, ") ORDER BY id");
	s = shrink_same(big, n);
	ck_assert_uint_lt(strlen(s), 80);
	free(s);
	n = (size_t)sprintf(big, "INSERT INTO t(a, b) VALUES (0, 'x')");
	for (i = 1; n < (1 << 20); i++)
		n += (size_t)sprintf(big + n, ", (%zu, 'v%zu')", i, i * 31);
	s = shrink_same(big, n);
	ck_assert_uint_lt(strlen(s), 80);
	free(s);
	free(big);
}
END_TEST

static Suite *fingerprint_suite(void)
{
	Suite *s = suite_create("fingerprint");
	TCase *tc;

	tc = tcase_create("literals");
	tcase_add_test(tc, test_strings);
	tcase_add_test(tc, test_numbers);
	tcase_add_test(tc, test_signs);
	tcase_add_test(tc, test_params);
	suite_add_tcase(s, tc);

	tc = tcase_create("layout");
	tcase_add_test(tc, test_comments);
	tcase_add_test(tc, test_whitespace);
	tcase_add_test(tc, test_statements);
	suite_add_tcase(s, tc);

	tc = tcase_create("names");
	tcase_add_test(tc, test_case);
	tcase_add_test(tc, test_quoted_identifiers);
	tcase_add_test(tc, test_keyword_list);
	suite_add_tcase(s, tc);

	tc = tcase_create("lists");
	tcase_add_test(tc, test_in_lists);
	tcase_add_test(tc, test_values);
	tcase_add_test(tc, test_shrink);
	suite_add_tcase(s, tc);

	tc = tcase_create("ids");
	tcase_add_test(tc, test_same_id);
	tcase_add_test(tc, test_id_stable);
	suite_add_tcase(s, tc);

	tc = tcase_create("robustness");
	tcase_add_test(tc, test_degenerate);
	tcase_add_test(tc, test_nul_bytes);
	tcase_add_test(tc, test_invalid_utf8);
	tcase_add_test(tc, test_total);
	tcase_set_timeout(tc, 60); /* slow under sanitizers */
	suite_add_tcase(s, tc);

	tc = tcase_create("linear_time");
	tcase_add_test(tc, test_big_input);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);

	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(fingerprint_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
