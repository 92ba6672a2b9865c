/* SPDX-License-Identifier: MIT */
/*
 * attrib.h - attribution of sampled executions to the application site
 * that issued them: the first frame, from the leaf up, outside libsqlite3,
 * libsqlprof and anything the user names with --skip, and outside
 * installed libraries when the stack has a frame of the program's own
 * code (sp_frame_is_library). Inlined functions count as frames. Stacks
 * whose frames are all skipped or unknown, or only libc's start code, go
 * to the "unattributed" bucket, never to a guess.
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
	int py;          /* a Python frame (its pc has SP_PYFRAME_BIT) */
	uint64_t pc;     /* the frames table's pc */
	uint64_t offset; /* a native frame without a source file in a known
			  * module: its pc's offset in the file (pc - bias),
			  * what --skip MODULE+0xOFF names; else 0 */
};

struct sp_site {
	const char *function, *file, *module; /* point into a frame */
	int line;
	uint64_t offset; /* "??" in a module: the pc's offset in its file */
};

/* One symbolized stack of one process. */
struct sp_stk {
	uint32_t nframes;
	struct sp_frame *frames;       /* leaf first */
	int site;                      /* index into sites, -1: unattributed */
	int lib_site;                  /* the site without the library rule (the
				  * first frame outside SQLite and --skip,
				  * what --all-frames takes), -1: none */
	uint64_t leaf_pc;              /* its first pc: the return address into the
				  * caller of the SQLite API */
	const struct sp_frame *worker; /* sp_stack_worker's answer, found once
					* by sp_attrib_load (the report asked
					* again for every site it printed) */
};

/* Sample totals of a part of a query's samples (a site, a stack), the
 * input of the estimator. */
struct sp_est_in {
	uint64_t samples, sample_ns, rows, vm_steps; /* every sample */
	uint64_t random_samples, random_ns;          /* randomly drawn ones only */
};

/* A query's exact totals, what the estimator shares out. */
struct sp_est_tot {
	uint64_t count, total_ns, self_ns, rows, vm_steps;
};

struct sp_est {
	double count, total_ns, self_ns, rows, vm_steps;
};

/*
 * The one estimator of per-site (and per-stack) counts and times, used by
 * report, diff, check and every export (docs/profile-format.md, "Site
 * estimates"). part is one site's (or stack's) samples, all the sum over
 * every part of the query, tot the query's exact totals. The randomly
 * drawn samples are an unbiased share of the executions; forced ones
 * (first, failed, slow) are not, so count and time are shared out by the
 * random samples (count) and their db time (time) when the query has any
 * random sample, else by all its samples and their time (rate 0, or a
 * query run too few times to be drawn); time by the count share when no
 * time was sampled. Self time follows time in the query's self/total
 * ratio. Rows and VM steps are shared out by the rows and VM steps of all
 * samples (by the count share when those are 0). Shares are linear, so the
 * estimates of a site's stacks add up to the site's.
 */
void sp_estimate(const struct sp_est_in *part, const struct sp_est_in *all,
		 const struct sp_est_tot *tot, struct sp_est *out);
void sp_est_add(struct sp_est_in *sum, const struct sp_est_in *x);

/* Per (query, site) sample totals and estimates. */
struct sp_qsite {
	int64_t fp_id;
	int kind_exec;
	int site;     /* -1: unattributed */
	int lib_site; /* the example stack's lib_site (sp_stk), -1: none */
	uint64_t samples, sample_ns;
	uint64_t random_samples, random_ns; /* randomly drawn samples only */
	uint64_t sample_rows, sample_vm_steps;
	uint64_t pid, stack_id;       /* one example stack */
	double exact_count, exact_ns; /* the part known from exact per-caller
				       * counts (sp_attrib_exact_row) */
	double est_count, est_total_ns;
	double est_self_ns; /* est_total_ns less nested executions' time */
	double est_rows, est_vm_steps;
};

struct sp_attrib {
	struct hmap stacks; /* {pid, stack_id} -> struct sp_stk */
	struct sp_site *sites;
	size_t nsites, sites_cap;
	struct sp_qsite *qs;
	size_t nqs, qs_cap;
	uint64_t unattributed_samples;
	double unattributed_est;
	/* index: {fp_id, kind_exec} -> {first, n} in qord, which holds the
	 * indices into qs of each query's sites in their order in qs */
	struct hmap qidx;
	size_t *qord, nqord;
	/* sp_attrib_query_sites's last answer ({first, n} in qord, for
	 * qcur_fp and qcur_kx; qcur_on): asked again, or for the query
	 * whose sites come next in qord, it needs no look-up in qidx */
	size_t qcur_first, qcur_n;
	int64_t qcur_fp;
	int qcur_kx, qcur_on;
	struct hmap site_idx; /* site label hash -> site index (loading) */
	/* Exact executions per calling return address (profile table
	 * callers, format 3+): {fp_id, kind_exec, pid, pc} -> struct
	 * sp_acaller, and per query what they hand out: {fp_id, kind_exec}
	 * -> double[2] (count, ns). Empty for older profiles. */
	struct hmap callers, exact_q;
	/* The callers in the writer's order ({fp_id, kind} ascending, a
	 * query's together, at most 64 each) are kept in this array
	 * instead, callers then empty (attrib.c, load_callers) */
	struct sp_callerv *callers_v;
	size_t ncallers_v;
};

/* One calling pc's exact totals, and the samples of the stacks whose
 * leaf it is (shared among them in proportion: random samples when it
 * has any, else every sample). */
struct sp_acaller {
	double count, ns;
	uint64_t samples, sample_ns, random_samples, random_ns;
};
/* The exact part of one stack_samples row of (fp_id, kind_exec, pid,
 * stack_id) with those samples: its share of its leaf caller's exact
 * count and time; 0 when the query has no exact counts or the row's
 * caller has none. */
void sp_attrib_exact_row(const struct sp_attrib *a, int64_t fp_id, int kind_exec, uint64_t pid,
			 uint64_t stack_id, const struct sp_est_in *row, double *count, double *ns);
/* 1 when a site's estimated count is known exactly: every execution of
 * the query was sampled there, or all of its count came from exact
 * per-caller counts. */
int sp_qsite_exact(const struct sp_qsite *q, uint64_t query_count);
/* What sp_attrib_exact_row hands out over all of a query's rows. */
void sp_attrib_exact_q(const struct sp_attrib *a, int64_t fp_id, int kind_exec, double *count,
		       double *ns);

/* Symbolize at report time too (report/export --debug-dir): frames the
 * profile left unknown ("??" in a known module) are looked up again by
 * sp_attrib_load with the module's path, build-id and bias from the
 * profile's modules table, searching DIRS (colon-separated, as record's
 * --debug-dir) for the debug files. NULL: never (the default). */
void sp_attrib_set_debug_dir(const char *dirs);
/* --all-frames: the site is the first frame outside SQLite, the profiler
 * and --skip even when it is in an installed library (the behaviour before
 * the library rule). 0: the default. */
void sp_attrib_set_all_frames(int on);
/* 1 when a frame is in installed or system code, by its path's structure:
 * a Python frame's file in site-packages/dist-packages or the
 * interpreter's lib/pythonX.Y (or frozen); a Ruby or PHP frame's in a gem,
 * /usr/lib/ruby, /usr/share, Composer's vendor/ or the interpreter itself
 * ("<cfunc>", "<internal...>"); a native frame's module in a
 * system directory (/usr/lib, /lib, /usr/bin, ...), site-packages,
 * node_modules or a Ruby gem, or its source file in Cargo's registry,
 * Rust's or Go's standard library, Go's module cache or /usr/include. */
int sp_frame_is_library(const struct sp_frame *f);
/* A worker thread's stack: a thread's (not the process's main) with no
 * frame of the program's own code, so its caller is on another thread
 * (aiosqlite, npm sqlite3's libuv pool): the worker's outermost frame
 * (its entry, past the start code); NULL for any other stack or none. */
const struct sp_frame *sp_stack_worker(const struct sp_stk *s);
/* The same for a stack of sp_attrib_load's (NULL: none), as it found it. */
static inline const struct sp_frame *sp_stk_worker(const struct sp_stk *s)
{
	return s ? s->worker : NULL;
}
/* Where a frame or site is, for people: "function (file:line)"; without a
 * source file (file "??") "function (module+0xOFF)" with the pc's offset
 * in the module's file, or "function (module)" when that is unknown
 * (module as its base name), "function (??)" in no known module. Writes
 * into buf (len bytes); returns buf. */
char *sp_where(char *buf, size_t len, const char *function, const char *file, int line,
	       const char *module, uint64_t offset);
/* Load and attribute. skip: NULL-terminated fnmatch patterns matched
 * against function names, module paths and module base names, and for a
 * frame without a source file "MODULE+0xOFF" (base name or path). Returns 0,
 * or SP_ERR_INPUT / SP_ERR_NOMEM (util.h) with a one-line reason in err. */
int sp_attrib_load(sqlite3 *db, const char *const *skip, struct sp_attrib *a, char *err,
		   size_t errlen);
/* Fill the estimates of a query's sites from its exact totals (count,
 * total_ns, self_ns, rows, vm_steps of tot) with sp_estimate. */
void sp_attrib_estimate_q(struct sp_attrib *a, int64_t fp_id, int kind_exec,
			  const struct sp_est_tot *tot);
/* The same for totals of a time window: whole_count and whole_ns are the
 * whole profile's count and time of the query. The exact per-caller
 * counts are the whole profile's: they are scaled by count / whole_count
 * (and time by total_ns / whole_ns), so the sites split the window's
 * totals. whole_count 0: tot is the whole profile's (sp_attrib_estimate_q). */
void sp_attrib_estimate_qw(struct sp_attrib *a, int64_t fp_id, int kind_exec,
			   const struct sp_est_tot *tot, uint64_t whole_count, uint64_t whole_ns);
/* The same with count, time and self time only (rows and VM steps 0). */
void sp_attrib_estimate(struct sp_attrib *a, int64_t fp_id, int kind_exec, uint64_t count,
			uint64_t total_ns, uint64_t self_ns);
/* The sites of one query: *n indices into a->qs, in their order there.
 * Valid until a->qs is reordered; then call sp_attrib_index again. */
const size_t *sp_attrib_query_sites(const struct sp_attrib *a, int64_t fp_id, int kind_exec,
				    size_t *n);
/* (Re)build the per-query index after a->qs was reordered. 0, or -1 on ENOMEM. */
int sp_attrib_index(struct sp_attrib *a);
/* sp_attrib_index when each query's sites are together in a->qs (one run
 * each, as the report's grouping leaves them): qord in a->qs's order, no
 * sort (else sp_attrib_index's). 0, or -1 on ENOMEM. */
int sp_attrib_index_runs(struct sp_attrib *a);
/* 1 if module (a path) is libsqlprof.so: its frames (the shims) are left
 * out of every printed stack. */
int sp_is_profiler_module(const char *module);
const struct sp_stk *sp_attrib_stack(const struct sp_attrib *a, uint64_t pid, uint64_t stack_id);
void sp_attrib_free(struct sp_attrib *a);

#endif
