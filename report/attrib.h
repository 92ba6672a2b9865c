/* SPDX-License-Identifier: MIT */
/*
 * attrib.h - attribution of sampled executions to the application site
 * that issued them: the first frame, from the leaf up, outside libsqlite3,
 * libsqlprof and anything the user names with --skip. Inlined functions
 * count as frames. Stacks whose frames are all skipped or unknown go to
 * the "unattributed" bucket, never to a guess.
 *
 * Loads from a profile's frames and stack_samples tables; printing is the
 * caller's (cmd-report.c, exporters).
 */
#ifndef SP_ATTRIB_H
#define SP_ATTRIB_H

#include <sqlite3.h>
#include <stdint.h>

#include "util.h"

struct sp_frame {
	char *module, *function, *file;
	int line, inlined;
	int py; /* a Python frame (its pc has SP_PYFRAME_BIT) */
};

struct sp_site {
	const char *function, *file, *module; /* point into a frame */
	int line;
};

/* One symbolized stack of one process. */
struct sp_stk {
	uint32_t nframes;
	struct sp_frame *frames; /* leaf first */
	int site;                /* index into sites, -1: unattributed */
};

/* Per (query, site) sample totals and estimates. */
struct sp_qsite {
	int64_t fp_id;
	int kind_exec;
	int site;            /* -1: unattributed */
	uint64_t samples, sample_ns;
	uint64_t random_samples, random_ns; /* randomly drawn samples only */
	uint64_t pid, stack_id; /* one example stack */
	double est_count, est_total_ns;
	double est_self_ns; /* est_total_ns less nested executions' time */
};

struct sp_attrib {
	struct hmap stacks;  /* {pid, stack_id} -> struct sp_stk */
	struct sp_site *sites;
	size_t nsites, sites_cap;
	struct sp_qsite *qs;
	size_t nqs, qs_cap;
	uint64_t unattributed_samples;
	double unattributed_est;
};

/* Load and attribute. skip: NULL-terminated fnmatch patterns matched
 * against function names, module paths and module base names. */
int sp_attrib_load(sqlite3 *db, const char *const *skip, struct sp_attrib *a, char *err,
		   size_t errlen);
/* Fill est_count/est_total_ns of a query's sites from its exact totals. */
void sp_attrib_estimate(struct sp_attrib *a, int64_t fp_id, int kind_exec, uint64_t count,
			uint64_t total_ns, uint64_t self_ns);
const struct sp_stk *sp_attrib_stack(const struct sp_attrib *a, uint64_t pid, uint64_t stack_id);
void sp_attrib_free(struct sp_attrib *a);

#endif
