/* SPDX-License-Identifier: MIT */
/*
 * export.h - `sqlprof export`: the profile as folded stacks, an SVG
 * flamegraph, a Perfetto trace, Chrome trace JSON, speedscope JSON, CSV or
 * a self-contained HTML report (docs/exports.md).
 *
 * export-common.c loads a profile once into a struct sp_export (queries,
 * attribution, per-stack estimates, sampled events) and derives what
 * several printers share: the merged flame stacks and the sampled
 * executions of each thread. Each export-<format>.c holds one printer and
 * nothing else; cmd-export.c parses options and picks the printer.
 */
#ifndef SP_EXPORT_H
#define SP_EXPORT_H

#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>

#include "attrib.h"
#include "query.h"

enum sp_xweight {
	SP_XW_TIME,  /* estimated self time, ns */
	SP_XW_COUNT, /* estimated executions */
};

/* One (query, process, stack) of stack_samples, with its estimates: the
 * query's exact count and time split among its stacks as attrib.c splits
 * them among sites. A query with no sample at all gets one entry with
 * stk NULL and the whole of its count and time. */
struct sp_xstack {
	const struct sp_qrow *q;
	uint64_t pid, stack_id;
	uint64_t samples, sample_ns, rows, vm_steps;
	uint64_t random_samples, random_ns; /* randomly drawn (unbiased) samples */
	double est_count, est_total_ns, est_self_ns;
	const struct sp_stk *stk; /* NULL: no frames recorded */
	int site;                 /* attrib site, -1 unattributed */
};

/* A flame stack: code frames root first (libsqlprof's own frames left out),
 * then the query as the leaf. Stacks whose labels are identical are merged
 * (weights summed); the list is sorted by line. */
struct sp_fstack {
	const struct sp_frame **fr; /* nfr code frames, root first */
	uint32_t nfr;
	const struct sp_qrow *q; /* the leaf */
	char *line;              /* folded form without weight: "a;b;SQL" */
	double ns, count;        /* estimated self time, executions */
};

/* A sampled execution from the events table. */
struct sp_xevent {
	uint64_t pid, tid, seq, parent_seq, start_ns, wall_ns, db_ns, rows, vm_steps;
	int64_t rc;
	uint64_t flags;
	const struct sp_qrow *q; /* NULL if its query row is missing */
	const char *sql;         /* statement text (owned by sp_export), or the fingerprint */
	const char *site;        /* "function (file:line)" or "(unattributed)", owned */
	int lane;                /* 0: the thread's own track; >0: overlap lane (perfetto) */
};

struct sp_xthread {
	uint64_t pid, tid;
	size_t first, n; /* range in events, sorted by start, longest first */
	int lanes;       /* lanes used, >= 1 */
};

struct sp_export {
	sqlite3 *db;
	const char *path;
	int weight;        /* enum sp_xweight */
	struct sp_qset qs; /* sorted by total time */
	struct sp_attrib at;
	struct sp_xstack *xs;
	size_t nxs;
	struct sp_fstack *fs;
	size_t nfs;
	struct sp_xevent *ev;
	size_t nev;
	struct sp_xthread *th;
	size_t nth;
	int events_loaded; /* ev and th are filled (sp_export_events) */
	uint64_t events_dropped;
	/* The timeline exports' window (sp_export_window): only the events
	 * whose start is in [ev_lo, ev_hi) are read; ev_total in the
	 * profile, ev_in in --since/--until, ev_kept exported (--max-events
	 * took the first in time) */
	int ev_window;
	int64_t ev_lo, ev_hi;
	uint64_t ev_total, ev_in, ev_kept, ev_max;
	const char **qnames;      /* sp_export_qname cache, one per qs row */
	const char **site_labels; /* sp_export_site_label cache, one per site */
	size_t *xs_of;            /* indices into xs grouped by query row, in xs order */
	size_t *xs_first;         /* query row i's are xs_of[xs_first[i] .. xs_first[i + 1]) */
	char **strs;              /* strings owned by the export */
	size_t nstrs, strs_cap;
};

/* Open path and load everything. skip: NULL-terminated --skip patterns.
 * Returns 0, or SP_ERR_INPUT (the profile is bad) / SP_ERR_NOMEM (util.h)
 * with a one-line reason in err; sp_export_free is safe either way. */
int sp_export_load(struct sp_export *x, const char *path, const char *const *skip, int weight,
		   char *err, size_t errlen);
void sp_export_free(struct sp_export *x);
/*
 * Bound the timeline exports (chrome, perfetto) to the events starting
 * in [first + since_ns, first + until_ns) - first: the profile's first
 * event; since_ns or until_ns -1: no bound - and of those, to the first
 * max in time (0: all). Fills x->ev_*; 0, or -1 with the reason in err.
 */
int sp_export_window(struct sp_export *x, int64_t since_ns, int64_t until_ns, uint64_t max,
		     char *err, size_t errlen);
/* The window's line for a reader ("42 of 5000000 sampled executions:
 * ..."), into buf; "" when nothing was left out. */
const char *sp_export_window_note(const struct sp_export *x, char *buf, size_t len);
/* Load the sampled executions (ev, th) for the timeline printers; the
 * other formats never need them. 0, or -1 (ENOMEM, or a corrupt events
 * table, said on stderr). */
int sp_export_events(struct sp_export *x);
/* Stream the sampled executions instead: th gets every thread (pid, tid
 * only), then fn sees each event (valid during the call) ordered by
 * thread, start and wall time (longest first), as ev would hold them, or
 * with by_time by start and wall time over all threads (each thread's
 * events still in its own order); memory stays bounded by distinct texts,
 * not events. fn may be NULL (threads only). 0, or -1 (fn's -1, ENOMEM, a
 * corrupt table: said on stderr). */
int sp_export_events_each(struct sp_export *x, int by_time,
			  int (*fn)(struct sp_export *x, const struct sp_xevent *e, void *arg),
			  void *arg);

/* Labels. All return strings owned by x (freed with it), NULL on ENOMEM.
 * Code frame: "function (file:line)", or "function (module)" when the file
 * is unknown. Query: the fingerprint, "[exec] " first for sqlite3_exec
 * rows, on one line and shortened to max bytes (0: no limit). Invalid
 * UTF-8 becomes U+FFFD in both. */
const char *sp_export_frame_label(struct sp_export *x, const struct sp_frame *f);
const char *sp_export_query_label(struct sp_export *x, const struct sp_qrow *q, size_t max);
/* Query label shortened to 200 bytes, cached per query (event names). */
const char *sp_export_qname(struct sp_export *x, const struct sp_qrow *q);
/* Base name of a process's executable, or "pid N". */
const char *sp_export_proc_name(struct sp_export *x, uint64_t pid);
/* The stacks (xs entries) of query row q: *n indices into x->xs. */
const size_t *sp_export_query_stacks(const struct sp_export *x, const struct sp_qrow *q, size_t *n);
/* Site of an attrib site index, as "function (file:line)" or "(unattributed)"
 * (cached per site). */
const char *sp_export_site_label(struct sp_export *x, int site);
/* Keep s (malloc'd) until sp_export_free; returns s, or NULL (and frees s)
 * on ENOMEM. */
char *sp_export_own(struct sp_export *x, char *s);
/* Copy of s with invalid UTF-8 replaced by U+FFFD (malloc'd). */
char *sp_export_utf8(const char *s);

/* Weight of a flame stack under x->weight, rounded, at least 1. */
uint64_t sp_export_fweight(const struct sp_export *x, const struct sp_fstack *f);
/* The frame standing for "no stack recorded". */
extern const struct sp_frame sp_export_nostack;

/* XML/HTML text and attribute escaping, the one escaper of the SVG, HTML
 * and JUnit XML outputs: & < > " and ' (as &#39;, which HTML 4 knows and
 * &apos; is not), newline and tab as character references (an attribute
 * value keeps them), other control characters (not allowed in XML 1.0)
 * and invalid UTF-8 replaced by U+FFFD. */
void sp_xml_str(FILE *f, const char *s);

/* Printers: 0, or -1 on ENOMEM (output errors are the caller's to check). */
int sp_export_folded(FILE *f, struct sp_export *x);
int sp_export_csv(FILE *f, struct sp_export *x);
/* export -f csv --intervals (export-series.c): one row per query and
 * interval whose start is in w's [lo_start, hi_start]. 0 or -1. */
int sp_export_series_csv(FILE *f, sqlite3 *db, const struct sp_window *w);
int sp_export_chrome(FILE *f, struct sp_export *x);
int sp_export_speedscope(FILE *f, struct sp_export *x);
int sp_export_perfetto(FILE *f, struct sp_export *x);
int sp_export_html(FILE *f, struct sp_export *x);

/* The SVG flamegraph. standalone: a whole SVG file with its own
 * click-to-zoom script; otherwise an <svg> element for embedding in HTML,
 * whose page includes sp_svg_zoom_js. */
int sp_export_svg(FILE *f, struct sp_export *x, int standalone);
int sp_export_svg_file(FILE *f, struct sp_export *x);
extern const char sp_svg_zoom_js[];

#endif
