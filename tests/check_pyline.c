/* SPDX-License-Identifier: MIT */
/*
 * check_pyline.c - unit tests for report/profile/pyline.c: the line of every
 * instruction of one function (branches, a comprehension over two lines,
 * a return over two lines) as each CPython itself gives it (co_lines,
 * co_positions, dis.findlinestarts), with that version's own line table.
 * The vectors were printed by each pyenv interpreter (3.8.18 to 3.13.0)
 * from the function in the comment below; damaged and cut tables must
 * give 0 or a line, never read past their end.
 *
 *   def f(a, b):
 *       x = a + b
 *       if x > 3:
 *           y = [i
 *                for i in range(x)]
 *       else:
 *           y = None
 *       return (x,
 *               y)
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pyline.h"

struct vec {
	int major, minor, first, len;
	const uint8_t *table;
	int n;
	const uint32_t *off;
	const int *line;
};

static const struct vec vecs[] = {
	{ 3, 8, 2, 18,
	  (const uint8_t
		   *)"\x00\x01\x08\x01\x08\x01\x06\x01\x06\xff\x08\x03\x04\x01\x02\x01\x02\xff",
	  24, (const uint32_t[]){ 0,  2,  4,  6,  8,  10, 12, 14, 16, 18, 20, 22,
				  24, 26, 28, 30, 32, 34, 36, 38, 40, 42, 44, 46 },
	  (const int[]){
		  3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 6, 6, 6, 5, 5, 5, 5, 8, 8, 9, 10, 9, 9 } },
	{ 3, 9, 2, 18,
	  (const uint8_t
		   *)"\x00\x01\x08\x01\x08\x01\x06\x01\x06\xff\x08\x03\x04\x01\x02\x01\x02\xff",
	  24, (const uint32_t[]){ 0,  2,  4,  6,  8,  10, 12, 14, 16, 18, 20, 22,
				  24, 26, 28, 30, 32, 34, 36, 38, 40, 42, 44, 46 },
	  (const int[]){
		  3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 6, 6, 6, 5, 5, 5, 5, 8, 8, 9, 10, 9, 9 } },
	{ 3, 10, 2, 24,
	  (const uint8_t
		   *)"\x08\x01\x08\x01\x06\x01\x06\x01\x06\xff\x02\x04\x02\x01\x04\xff\x04\xff\x02\x01\x02\x01\x04\xff",
	  27, (const uint32_t[]){ 0,  2,  4,  6,  8,  10, 12, 14, 16, 18, 20, 22, 24, 26,
				  28, 30, 32, 34, 36, 38, 40, 42, 44, 46, 48, 50, 52 },
	  (const int[]){ 3, 3, 3, 3, 4,  4, 4, 4, 5, 5, 5,  6, 6, 6,
			 5, 5, 5, 9, 10, 9, 9, 8, 8, 9, 10, 9, 9 } },
	{ 3, 11, 2, 81,
	  (const uint8_t
		   *)"\x80\x00\xd8\x08\x09\x88\x41\x89\x05\x80\x41\xd8\x07\x08\x88\x31\x82\x75\x80\x75\xf0\x02\x01\x0d\x20\xf0\x00\x01\x0d\x20\xdd\x16\x1b\x98\x41\x91\x68\x94\x68\xf0\x03\x01\x0d\x20\xf1\x00\x01\x0d\x20\xf4\x00\x01\x0d\x20\x88\x01\x88\x01\xf0\x06\x00\x0d\x11\x88\x01\xd8\x0c\x0d\xd8\x0c\x0d\xf0\x03\x01\x0c\x0f\xf0\x00\x01\x05\x0f",
	  44, (const uint32_t[]){ 0,  2,  4,  6,  8,  10, 12, 14, 16, 18, 20, 22, 24, 26, 28,
				  30, 32, 34, 36, 38, 40, 42, 44, 46, 48, 50, 52, 54, 56, 58,
				  60, 62, 64, 66, 68, 70, 72, 74, 76, 78, 80, 82, 84, 86 },
	  (const int[]){ 2, 3, 3, 3, 3, 3, 4, 4, 4, 4, 4, 4, 5, 5, 6, 6, 6, 6, 6, 6,  6, 6,
			 6, 6, 6, 6, 6, 6, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 8, 8, 9, 10, 9, 9 } },
	{ 3, 12, 2, 97,
	  (const uint8_t
		   *)"\x80\x00\xd8\x08\x09\x88\x41\x89\x05\x80\x41\xd8\x07\x08\x88\x31\x82\x75\xe4\x16\x1b\x98\x41\x93\x68\xf6\x03\x01\x0d\x20\xd8\x11\x12\xf2\x03\x00\x0e\x0f\xf0\x00\x01\x0d\x20\x88\x01\xf0\x00\x01\x0d\x20\xf0\x08\x00\x0d\x0e\xd8\x0c\x0d\xf0\x03\x01\x0c\x0f\xf0\x00\x01\x05\x0f\xf0\x03\x00\x0d\x11\x88\x01\xd8\x0c\x0d\xd8\x0c\x0d\xf0\x03\x01\x0c\x0f\xf0\x00\x01\x05\x0f\xf9\xf2\x09\x01\x0d\x20",
	  50,
	  (const uint32_t[]){ 0,  2,  4,  6,  8,  10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 32,
			      34, 36, 38, 40, 42, 44, 46, 48, 50, 52, 54, 56, 58, 60, 62, 64, 66,
			      68, 70, 72, 74, 76, 78, 80, 82, 84, 86, 88, 90, 92, 94, 96, 98 },
	  (const int[]){ 2, 3, 3,  3, 3, 3, 4, 4, 4,  4, 4, 6, 6, 6, 6, 6, 6,
			 6, 6, 6,  6, 5, 5, 5, 5, 5,  5, 5, 6, 5, 5, 5, 5, 5,
			 5, 9, 10, 9, 9, 8, 8, 9, 10, 9, 9, 0, 0, 5, 5, 5 } },
	{ 3, 13, 2, 98,
	  (const uint8_t
		   *)"\x80\x00\xd8\x08\x09\x89\x05\x80\x41\xd8\x07\x08\x88\x31\x83\x75\xe4\x16\x1b\x98\x41\x94\x68\xf3\x03\x01\x0d\x20\xd9\x16\x1e\x90\x11\xf3\x03\x00\x0e\x0f\xd9\x16\x1e\xf0\x03\x00\x09\x0a\xf0\x00\x01\x0d\x20\xf0\x08\x00\x0d\x0e\xd8\x0c\x0d\xf0\x03\x01\x0c\x0f\xf0\x00\x01\x05\x0f\xf0\x03\x00\x0d\x11\x88\x01\xd8\x0c\x0d\xd8\x0c\x0d\xf0\x03\x01\x0c\x0f\xf0\x00\x01\x05\x0f\xf9\xf2\x09\x01\x0d\x20",
	  52, (const uint32_t[]){ 0,  2,  4,  6,  8,  10, 12, 14, 16, 18, 20, 22,  24,
				  26, 28, 30, 32, 34, 36, 38, 40, 42, 44, 46, 48,  50,
				  52, 54, 56, 58, 60, 62, 64, 66, 68, 70, 72, 74,  76,
				  78, 80, 82, 84, 86, 88, 90, 92, 94, 96, 98, 100, 102 },
	  (const int[]){ 2, 3, 3,  3, 3, 4, 4, 4, 4,  4, 4, 6, 6, 6, 6, 6, 6, 6,
			 6, 6, 6,  6, 5, 5, 5, 5, 6,  6, 6, 5, 5, 5, 5, 6, 6, 5,
			 5, 9, 10, 9, 9, 8, 8, 9, 10, 9, 9, 0, 0, 5, 5, 5 } },
};

START_TEST(test_versions)
{
	const struct vec *v = &vecs[_i];

	for (int k = 0; k < v->n; k++)
		ck_assert_msg(sp_py_line(v->major, v->minor, v->table, (size_t)v->len, v->first,
					 v->off[k]) == v->line[k],
			      "3.%d: offset %u: line %d, CPython says %d", v->minor, v->off[k],
			      sp_py_line(v->major, v->minor, v->table, (size_t)v->len, v->first,
					 v->off[k]),
			      v->line[k]);
}
END_TEST

/* Every prefix of every table, and every byte flipped: a line or 0, and
 * (under ASan) no read past the table, which is copied to an exact-size
 * buffer. */
START_TEST(test_damaged)
{
	const struct vec *v = &vecs[_i];

	for (int cut = 0; cut <= v->len; cut++) {
		uint8_t *t = malloc((size_t)cut + 1);

		memcpy(t, v->table, (size_t)cut);
		for (int k = 0; k < v->n; k++) {
			int l = sp_py_line(v->major, v->minor, t, (size_t)cut, v->first, v->off[k]);

			ck_assert_int_ge(l, 0);
		}
		for (int b = 0; b < cut; b++) {
			t[b] ^= 0xff;
			(void)sp_py_line(v->major, v->minor, t, (size_t)cut, v->first, 1000);
			(void)sp_py_line(v->major, v->minor, t, (size_t)cut, v->first, 0);
			t[b] ^= 0xff;
		}
		free(t);
	}
	ck_assert_int_eq(sp_py_line(3, v->minor, NULL, 0, 7, 0), v->minor <= 9 ? 7 : 0);
	ck_assert_int_eq(sp_py_line(2, 7, v->table, (size_t)v->len, 7, 0), 0);
}
END_TEST

/* Ruby's and PHP's frames (preload/iframes.c): major 0, the offset is
 * the line itself, whatever the table */
START_TEST(test_interp)
{
	static const uint8_t junk[] = { 0xff, 0x80, 0x01 };

	ck_assert_int_eq(sp_py_line(0, 1, NULL, 0, 0, 15), 15);
	ck_assert_int_eq(sp_py_line(0, 2, junk, sizeof(junk), 99, 1234), 1234);
	ck_assert_int_eq(sp_py_line(0, 2, NULL, 0, 0, 0), 0);
	ck_assert_int_eq(sp_py_line(0, 1, NULL, 0, 0, 0x80000000u), 0); /* not an int line */
}
END_TEST

static Suite *pyline_suite(void)
{
	Suite *s = suite_create("pyline");
	TCase *tc = tcase_create("lines");
	int n = (int)(sizeof(vecs) / sizeof(vecs[0]));

	tcase_add_loop_test(tc, test_versions, 0, n);
	tcase_add_loop_test(tc, test_damaged, 0, n);
	tcase_add_test(tc, test_interp);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(pyline_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
