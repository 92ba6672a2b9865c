/* SPDX-License-Identifier: MIT */
/*
 * gate-print.h - printing the CI gate's verdict (gate-print.c): text,
 * JSON, GitHub Markdown on standard output, JUnit XML to a file.
 */
#ifndef SP_GATE_PRINT_H
#define SP_GATE_PRINT_H

#include "gate.h"

void sp_check_print_text(const struct sp_side *base, const struct sp_side *cand,
			 const struct sp_diff *d, const struct sp_check_result *res);
void sp_check_print_json(const struct sp_side *base, const struct sp_side *cand,
			 const struct sp_diff *d, const struct sp_check_result *res);
void sp_check_print_md(const struct sp_side *base, const struct sp_side *cand,
		       const struct sp_diff *d, const struct sp_check_result *res);
/* JUnit XML, one test case per fingerprint, to path. Returns 0 or -1. */
int sp_check_write_junit(const char *path, const struct sp_side *base, const struct sp_side *cand,
			 const struct sp_diff *d, const struct sp_check_result *res);

#endif
