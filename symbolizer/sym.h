/* SPDX-License-Identifier: MIT */
/*
 * sym.h - the symbolizer library: turns a pc of a module loaded in some
 * (profiled) process into function, file:line and the chain of inlined
 * functions, using libdw/libdwfl offline (the process need not be alive).
 *
 * It does not unwind, read /proc or talk to the profiled process: callers
 * supply the module path, its build-id and load bias as recorded at run time
 * (dl_iterate_phdr).  A struct sym_ctx is not thread-safe; use one per
 * thread or lock around it.
 */
#ifndef SYM_H
#define SYM_H

#include <stddef.h>
#include <stdint.h>

struct sym_ctx; /* owns all caches and results */

/* A new context, or NULL on ENOMEM. */
struct sym_ctx *sym_open(void);

/* Frees the context, every open module and every result it handed out.
 * NULL is allowed. */
void sym_close(struct sym_ctx *ctx);

/*
 * Extra debug-file search dirs (colon-separated, like eu-addr2line's
 * --debuginfo-path / gdb's debug-file-directory), searched after the
 * defaults ":.debug:/usr/lib/debug", both for DIR/.build-id/xx/yyyy.debug
 * and for .gnu_debuglink names.  NULL or "" restores the defaults.  Applies
 * to modules first looked up after the call; modules already opened keep
 * the path they were opened with (so cached results stay consistent).
 * Silently keeps the old path on ENOMEM (then sym_last_error says so).
 */
void sym_set_debug_path(struct sym_ctx *ctx, const char *colon_separated_dirs);

/*
 * Keep results across runs in files under dir (made 0700 if missing), one
 * per module file with a build-id: a later context with the same cache
 * dir answers those addresses without opening the module or its debug
 * file, with the same frames, as long as the module, its debug files and
 * the debug path are what they were (checked by stat at the module's
 * first lookup).  Written back by sym_close.  dir must be ours and not
 * group- or world-writable, else it is not used: -1 (errno EPERM, or
 * mkdir's/open's).  NULL or "" (the default): no cache.  Call it before the
 * first lookup, after sym_set_debug_path.  0 on success.
 */
int sym_set_cache_dir(struct sym_ctx *ctx, const char *dir);

struct sym_frame {
	const char *function; /* demangled (C++ with parameter types), "??" if unknown */
	const char *file;     /* source file path from DWARF, "??" if unknown */
	int line;             /* 0 if unknown */
	int column;           /* 0 if unknown */
	int inlined;          /* 1: this frame is an inlined function; its caller frame follows */
};

struct sym_result {
	const char *module;             /* module path as given */
	int nframes;                    /* >= 1 */
	const struct sym_frame *frames; /* innermost first: inlined callees first,
					   the real (out-of-line) function last */
};

/*
 * Symbolize one pc of the module `path` loaded at load bias `bias`
 * (dl_iterate_phdr's dlpi_addr); pc is absolute in the profiled process.
 *
 * build_id (may be NULL/0) must match the file opened; on mismatch the
 * module is treated as unknown (function "??"): a mismatched file, or a
 * debug file whose build-id differs from the module's, is never used.
 *
 * is_return_address: 1 for return addresses from a backtrace (pc-1 is
 * looked up so the call's line is reported), 0 for an exact pc.
 *
 * Returns 0 and sets *out (owned by ctx, valid until sym_close), also when
 * nothing is known (then one frame "??", "??", 0; sym_last_error may say
 * why).  Returns -1 (errno EINVAL or ENOMEM) only for invalid arguments or
 * when memory runs out.
 */
int sym_lookup(struct sym_ctx *ctx, const char *path, const unsigned char *build_id,
	       size_t build_id_len, uint64_t bias, uint64_t pc, int is_return_address,
	       const struct sym_result **out);

/* Last error text for diagnostics, e.g. "dwfl_report_elf: No such file";
 * "" if none.  Owned by ctx, valid until the next call on ctx. */
const char *sym_last_error(const struct sym_ctx *ctx);

/* Why some modules' frames lose names or lines (a build-id that does not
 * match, zstd-compressed debug sections, a split DWARF unit not found),
 * one line per module, each once: *notes holds them (owned by ctx). */
size_t sym_notes(const struct sym_ctx *ctx, const char *const **notes);

/* Counters for tests and diagnostics. */
struct sym_stats {
	unsigned long modules_opened; /* module cache misses (Dwfl created) */
	unsigned long lookups;        /* successful sym_lookup calls */
	unsigned long address_hits;   /* answered from the per-address cache */
	unsigned long cache_hits;     /* of those, results read from a cache file */
	unsigned long cache_files;    /* modules whose cache file was read and used */
	unsigned long cache_stale;    /* cache files not used: a file they depend on changed */
	unsigned long cache_rejected; /* cache files not used: bad bytes */
	unsigned long cache_written;  /* cache files written (sym_close) */
};
void sym_get_stats(const struct sym_ctx *ctx, struct sym_stats *out);

#endif
