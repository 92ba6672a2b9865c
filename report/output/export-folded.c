/* SPDX-License-Identifier: MIT */
/*
 * export-folded.c - folded stacks, the input of flamegraph.pl and inferno
 * and one of speedscope's imports: one "root;...;leaf weight" line per
 * stack, the query's fingerprint as the leaf, an integer weight (estimated
 * self time in ns, or estimated executions). The stacks and their labels
 * come ready-made from export-common.c; this file only prints them.
 */
#include <inttypes.h>

#include "export.h"

int sp_export_folded(FILE *f, struct sp_export *x)
{
	size_t i;

	for (i = 0; i < x->nfs; i++)
		fprintf(f, "%s %" PRIu64 "\n", x->fs[i].line, sp_export_fweight(x, &x->fs[i]));
	return 0;
}
