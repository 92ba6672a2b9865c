/* SPDX-License-Identifier: MIT */
/*
 * sym.c - the symbolizer: pc -> function, file:line and inline chain, with
 * libdwfl used offline.
 *
 * Each distinct file - (path, build-id), or (path, size, mtime) when it
 * has no build-id - gets one Dwfl holding one module reported with
 * dwfl_report_elf at bias 0, opened and indexed once however many
 * processes loaded it and wherever they did: a lookup takes the pc
 * relative to the caller's load bias, and results are cached per (file,
 * offset), so a frame shared by processes is symbolized once.  Separate
 * debug files are found by the standard libdwfl callbacks (build-id tree,
 * .gnu_debuglink next to the file, in .debug/ and under the global debug
 * dirs); libdwfl rejects a debug file whose build-id differs from the
 * module's, and we reject a module whose build-id differs from the one the
 * caller recorded.  Names come from DWARF (linkage name demangled, else
 * DW_AT_name), else from .symtab/.dynsym, else "??".
 *
 * C++ names are demangled with __cxa_demangle, taken from libstdc++.so.6
 * with dlopen on first need (no link-time C++ runtime); without it the
 * mangled name is kept.  Rust names (legacy "_ZN...17h<hash>E" and v0
 * "_R...", with or without an LLVM ".llvm.NNN" suffix) are demangled by
 * libiberty's rust_demangle (the demangler of binutils and gdb), without
 * the hash: "<rusqlite::Statement as rusqlite::Exec>::exec_step".  libdwfl asks a debuginfod server only if the
 * environment sets DEBUGINFOD_URLS (its standard behaviour).
 *
 * It does not unwind, does not read the profiled process, and is not
 * thread-safe: one sym_ctx per thread, or a lock around it.
 *
 * Caching, measured by tests/check_symbolizer.c ("cache" TCase, fixture
 * program symfix, -O2, Debian 12, elfutils 0.188, 3 runs):
 *   - first lookup in a module (dwfl_begin, dwfl_report_elf, reading the
 *     ELF, its CU aranges and line table):        150-400 us;
 *   - a new pc in an already open module (walk_scopes walks the CU's
 *     DIE tree, the line table is searched):       8-16 us;
 *   - a repeated pc from the address cache:        0.08-0.10 us.
 * (Under valgrind: 3250 us, 470 us, 2.5 us.)  Profiles repeat a few
 * hundred distinct pcs over 10^5+ samples: without the module cache
 * 10^5 lookups would cost ~30 s, without the address cache ~1 s (more for
 * big CUs such as the sqlite3.c amalgamation, as the DIE walk is linear in
 * the CU), with both ~10 ms plus one DWARF walk per distinct pc.  Keyed by
 * load bias as well (one Dwfl per file and address), 300 exec'd processes
 * of the sqlite3 shell and python3 opened and indexed libc (with its
 * detached debug info) and libpython once per process: 60 processes took
 * the collector to 1.3 GB.
 */
#include <sys/stat.h>
#include "sym.h"

#include <fcntl.h>
#include <limits.h>
#include <unistd.h>
#include <elfutils/libdwelf.h>

#include <dlfcn.h>
#include <libiberty/demangle.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dwload.h" /* from here on libdw's functions are called through its table */

#define UNKNOWN "??"
#define DEFAULT_DEBUGINFO_PATH ":.debug:/usr/lib/debug"

/* A node of a chained hash table; embedded first in every stored type. */
struct hnode {
	struct hnode *next;
	uint64_t hash;
};

struct htab {
	struct hnode **buckets;
	size_t nbuckets; /* 0 or a power of two */
	size_t count;
};

struct str_node {
	struct hnode h;
	char s[];
};

/* What a module's results depend on apart from the module file itself
 * (the persistent cache's inputs): its separate debug file and the
 * names under which libdwfl looks for it, and the dwz file that one
 * refers to. NULL / 0 when there is none. */
struct cache_in {
	char *debuglink; /* the file's .gnu_debuglink name */
	char *debugfile; /* the separate debug file libdwfl took */
	char *altname;   /* the debug file's .gnu_debugaltlink name */
	unsigned char altbid[64];
	size_t altbid_len;
};

struct module {
	struct hnode h;
	const char *path; /* interned; also the result's module name */
	unsigned char *build_id;
	size_t build_id_len;
	uint64_t size, mtime_ns; /* without a build-id: the file as it was opened */
	Dwfl *dwfl;              /* NULL when the module is unusable */
	Dwfl_Module *mod;        /* NULL when the module is unusable */
	const char *error;       /* interned reason when unusable, else NULL */
	const char *note;        /* interned: why its frames lose names or lines
			    * (said once: sym_notes), or NULL */
	char *debuginfo_path;
	Dwfl_Callbacks callbacks;
	int opened; /* module_open has run: lazily, at the first address the
		     * persistent cache did not answer */
	/* The persistent cache (sym_set_cache_dir): what the module's
	 * results depend on besides its own bytes, found at open (or read
	 * from its cache file), the hash of those files' state, and whether
	 * this run added results worth writing back. */
	struct cache_in cin;
	uint64_t sig;
	int sig_ok;  /* sig and cin are known */
	size_t nnew; /* results symbolized here, not read from the cache */
};

struct entry {
	struct hnode h;
	const struct module *m;
	uint64_t addr;
	int cached; /* read from the module's cache file */
	struct sym_result res;
	struct sym_frame frames[];
};

typedef char *(*cxa_demangle_fn)(const char *, char *, size_t *, int *);

struct sym_ctx {
	struct htab strings; /* interned strings used by results */
	struct htab modules;
	struct htab entries; /* per (module, looked-up address) */
	char *debug_path;    /* full debuginfo path for new modules; NULL = default */
	void *libstdcxx;     /* dlopen handle, for __cxa_demangle */
	cxa_demangle_fn cxa_demangle;
	int demangle_tried;
	int dw_noted;              /* libdw could not be loaded, and a note says so */
	struct sym_frame *scratch; /* frames of the result being built */
	size_t scratch_len, scratch_cap;
	struct sym_stats stats;
	char error[512];
	const char **notes; /* every module's note, once each */
	size_t nnotes, notes_cap;
	int cache_fd; /* the persistent cache's directory, or -1 */
	/* hash of DEBUGINFOD_URLS when the cache was set, 0 when unset or
	 * empty: libdwfl asks those servers for a debug file it does not find,
	 * so results made with servers and without them are kept apart (read
	 * once, as another thread may change the environment later) */
	uint64_t cache_urls;
};

static const char *intern(struct sym_ctx *ctx, const char *s);

/* Keep m's note (interned) for sym_notes, once per module. */
static void module_note(struct sym_ctx *ctx, struct module *m, const char *text)
{
	const char *s;

	if (m->note)
		return;
	s = intern(ctx, text);
	if (!s)
		return;
	m->note = s;
	if (ctx->nnotes == ctx->notes_cap) {
		size_t nc = ctx->notes_cap ? ctx->notes_cap * 2 : 8;
		const char **nn = realloc(ctx->notes, nc * sizeof(*nn));

		if (!nn)
			return;
		ctx->notes = nn;
		ctx->notes_cap = nc;
	}
	ctx->notes[ctx->nnotes++] = s;
}

size_t sym_notes(const struct sym_ctx *ctx, const char *const **notes)
{
	*notes = ctx->notes;
	return ctx->nnotes;
}

/* ---- hashing and tables ------------------------------------------------ */

static uint64_t hash_bytes(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 0x100000001b3ULL; /* FNV-1a */
	}
	return h;
}

static uint64_t hash_u64(uint64_t h, uint64_t v)
{
	return hash_bytes(h, &v, sizeof(v));
}

#define HASH_SEED 0xcbf29ce484222325ULL

static struct hnode *htab_chain(const struct htab *t, uint64_t hash)
{
	return t->nbuckets ? t->buckets[hash & (t->nbuckets - 1)] : NULL;
}

/* Inserts node (its hash already set); grows the table at 3/4 load.
 * Returns 0, or -1 on ENOMEM (node not inserted, still owned by caller). */
static int htab_insert(struct htab *t, struct hnode *node)
{
	if (t->count + 1 > t->nbuckets / 4 * 3) {
		size_t n = t->nbuckets ? t->nbuckets * 2 : 64;
		struct hnode **b = calloc(n, sizeof(*b));
		if (b == NULL)
			return -1;
		for (size_t i = 0; i < t->nbuckets; i++) {
			struct hnode *e = t->buckets[i], *next;
			for (; e != NULL; e = next) {
				next = e->next;
				e->next = b[e->hash & (n - 1)];
				b[e->hash & (n - 1)] = e;
			}
		}
		free(t->buckets);
		t->buckets = b;
		t->nbuckets = n;
	}
	struct hnode **slot = &t->buckets[node->hash & (t->nbuckets - 1)];
	node->next = *slot;
	*slot = node;
	t->count++;
	return 0;
}

/* Calls fn on every node, then frees the bucket array. */
static void htab_destroy(struct htab *t, void (*fn)(struct hnode *))
{
	for (size_t i = 0; i < t->nbuckets; i++) {
		struct hnode *e = t->buckets[i], *next;
		for (; e != NULL; e = next) {
			next = e->next;
			fn(e);
		}
	}
	free(t->buckets);
	memset(t, 0, sizeof(*t));
}

static void free_node(struct hnode *n)
{
	free(n);
}

static void cache_in_free(struct cache_in *ci)
{
	free(ci->debuglink);
	free(ci->debugfile);
	free(ci->altname);
	memset(ci, 0, sizeof(*ci));
}

static void free_module(struct hnode *n)
{
	struct module *m = (struct module *)n;
	if (m->dwfl != NULL)
		dwfl_end(m->dwfl);
	cache_in_free(&m->cin);
	free(m->build_id);
	free(m->debuginfo_path);
	free(m);
}

/* ---- small helpers ----------------------------------------------------- */

static void set_error(struct sym_ctx *ctx, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void set_error(struct sym_ctx *ctx, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(ctx->error, sizeof(ctx->error), fmt, ap);
	va_end(ap);
}

/* Returns ctx's copy of s (equal strings share one copy), NULL on ENOMEM. */
static const char *intern(struct sym_ctx *ctx, const char *s)
{
	size_t len = strlen(s);
	uint64_t hash = hash_bytes(HASH_SEED, s, len);
	for (struct hnode *e = htab_chain(&ctx->strings, hash); e != NULL; e = e->next) {
		struct str_node *n = (struct str_node *)e;
		if (e->hash == hash && strcmp(n->s, s) == 0)
			return n->s;
	}
	struct str_node *n = malloc(sizeof(*n) + len + 1);
	if (n == NULL)
		return NULL;
	n->h.hash = hash;
	memcpy(n->s, s, len + 1);
	if (htab_insert(&ctx->strings, &n->h) != 0) {
		free(n);
		return NULL;
	}
	return n->s;
}

/*
 * Returns the demangled, interned form of a Rust name (legacy or v0, which
 * rust_demangle tells from a C++ one: a legacy Rust name ends in a hash
 * segment) or an Itanium-ABI name ("_Z...");
 * other names are interned unchanged, as is a name the demangler rejects
 * or every name when libstdc++ cannot be loaded.  __cxa_demangle comes
 * from libstdc++, dlopen'ed on first need so that neither this library
 * nor its users link a C++ runtime.  NULL on ENOMEM.
 */
static const char *demangle(struct sym_ctx *ctx, const char *name)
{
	if (!strncmp(name, "_R", 2) || !strncmp(name, "_ZN", 3)) {
		/* no DMGL_VERBOSE: a legacy name's hash is left out */
		char *r = rust_demangle(name, DMGL_PARAMS | DMGL_ANSI);

		if (r != NULL) {
			const char *s = intern(ctx, r);

			free(r);
			return s;
		}
	}
	if (strncmp(name, "_Z", 2) != 0)
		return intern(ctx, name);
	if (!ctx->demangle_tried) {
		ctx->demangle_tried = 1;
		ctx->libstdcxx = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_LOCAL);
		if (ctx->libstdcxx != NULL)
			*(void **)&ctx->cxa_demangle = dlsym(ctx->libstdcxx, "__cxa_demangle");
	}
	if (ctx->cxa_demangle == NULL)
		return intern(ctx, name);
	int status = -1;
	char *d = ctx->cxa_demangle(name, NULL, NULL, &status);
	if (d == NULL || status != 0) {
		free(d);
		return intern(ctx, name);
	}
	const char *r = intern(ctx, d);
	free(d);
	return r;
}

/* Appends a frame to ctx->scratch.  Returns 0, -1 on ENOMEM. */
static int push_frame(struct sym_ctx *ctx, const struct sym_frame *f)
{
	if (ctx->scratch_len == ctx->scratch_cap) {
		size_t cap = ctx->scratch_cap ? ctx->scratch_cap * 2 : 8;
		struct sym_frame *p = realloc(ctx->scratch, cap * sizeof(*p));
		if (p == NULL)
			return -1;
		ctx->scratch = p;
		ctx->scratch_cap = cap;
	}
	ctx->scratch[ctx->scratch_len++] = *f;
	return 0;
}

/* ---- DWARF and symbol table -------------------------------------------- */

/*
 * Interned source path of `file` from the line table of CU `cu`: made
 * absolute with the CU's DW_AT_comp_dir when relative (libdw 0.188 leaves
 * clang's DWARF 5 file names relative).  NULL on ENOMEM.
 */
static const char *src_path(struct sym_ctx *ctx, Dwarf_Die *cu, const char *file)
{
	Dwarf_Attribute attr;
	const char *dir =
		file[0] == '/' ? NULL : dwarf_formstring(dwarf_attr(cu, DW_AT_comp_dir, &attr));
	if (dir == NULL || dir[0] == '\0')
		return intern(ctx, file);
	char *full;
	if (asprintf(&full, "%s%s%s", dir, dir[strlen(dir) - 1] == '/' ? "" : "/", file) < 0)
		return NULL;
	const char *r = intern(ctx, full);
	free(full);
	return r;
}

/*
 * Name of a subprogram / inlined subroutine DIE, following
 * DW_AT_abstract_origin and DW_AT_specification: the linkage name
 * demangled if there is one (so C++ overloads differ), else DW_AT_name.
 * Returns an interned string, UNKNOWN if the DIE has no name, NULL on
 * ENOMEM.
 */
static const char *die_name(struct sym_ctx *ctx, Dwarf_Die *die)
{
	Dwarf_Attribute attr;
	const char *name = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_linkage_name, &attr));
	if (name == NULL)
		name = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &attr));
	if (name != NULL)
		return demangle(ctx, name);
	name = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_name, &attr));
	return name != NULL ? intern(ctx, name) : UNKNOWN;
}

/*
 * Fills f->file/line/column with the call site of the inlined subroutine
 * `inl` (DW_AT_call_file/line/column; the file index refers to the line
 * table of inl's CU).  A line without a known file is dropped.
 * Returns 0, -1 on ENOMEM.
 */
static int call_site(struct sym_ctx *ctx, Dwarf_Die *inl, struct sym_frame *f)
{
	Dwarf_Attribute attr;
	Dwarf_Word v;
	Dwarf_Die cu;
	Dwarf_Files *files;
	size_t nfiles;

	f->file = UNKNOWN;
	f->line = 0;
	f->column = 0;
	if (dwarf_formudata(dwarf_attr(inl, DW_AT_call_file, &attr), &v) != 0 ||
	    dwarf_diecu(inl, &cu, NULL, NULL) == NULL ||
	    dwarf_getsrcfiles(&cu, &files, &nfiles) != 0 || v >= nfiles)
		return 0;
	const char *file = dwarf_filesrc(files, v, NULL, NULL);
	if (file == NULL)
		return 0;
	if ((f->file = src_path(ctx, &cu, file)) == NULL)
		return -1;
	if (dwarf_formudata(dwarf_attr(inl, DW_AT_call_line, &attr), &v) == 0 && v <= INT32_MAX)
		f->line = (int)v;
	if (dwarf_formudata(dwarf_attr(inl, DW_AT_call_column, &attr), &v) == 0 && v <= INT32_MAX)
		f->column = (int)v;
	return 0;
}

/*
 * The function name of `addr` from the ELF symbol table (.symtab of the
 * file or its debug file, else .dynsym), only if addr lies inside a
 * function symbol of known size: a sizeless or too short neighbour could
 * be the wrong function.  Interned, UNKNOWN, or NULL on ENOMEM.
 */
static const char *symtab_name(struct sym_ctx *ctx, Dwfl_Module *mod, uint64_t addr)
{
	GElf_Off off = 0;
	GElf_Sym sym;
	const char *name = dwfl_module_addrinfo(mod, addr, &off, &sym, NULL, NULL, NULL);
	if (name == NULL || name[0] == '\0')
		return UNKNOWN;
	int type = GELF_ST_TYPE(sym.st_info);
	if ((type != STT_FUNC && type != STT_GNU_IFUNC) || off >= sym.st_size)
		return UNKNOWN;
	return demangle(ctx, name);
}

/*
 * Pushes one frame per function scope containing `addr` (CU-relative),
 * innermost first: the chain walk_scopes finds follows the concrete
 * tree, so each DW_TAG_inlined_subroutine is followed by the
 * function it was inlined into, up to the out-of-line subprogram.  Frame 0
 * gets no file:line here (the caller takes it from the line table); frame
 * k > 0 gets the call site of frame k-1.  Pushes nothing when no scope
 * covers addr.  Returns 0, -1 on ENOMEM.
 */
#define WALK_DEPTH 64    /* scopes kept by walk_scopes */
#define WALK_PENDING 256 /* namespaces and classes waiting to be looked into */

/*
 * The scopes containing addr, innermost first, found by walking the DIE
 * tree of cudie itself: what dwarf_getscopes gives, for the units where it
 * gives nothing (libdw 0.188 and gcc -flto units, whose concrete DIEs
 * refer to other units). At each level, the child whose PC ranges hold
 * addr is entered; namespaces, classes and structures (no ranges of
 * their own) are looked into too. No recursion: loops bounded by the
 * tree. Returns the number of scopes in out (at most max).
 */
static int walk_scopes(Dwarf_Die *cudie, Dwarf_Addr addr, Dwarf_Die *out, int max)
{
	Dwarf_Die path[WALK_DEPTH], pending[WALK_PENDING], child;
	int n = 0, npend;

	pending[0] = *cudie;
	npend = 1;
	while (npend > 0 && n < WALK_DEPTH) {
		Dwarf_Die parent = pending[--npend];
		int found = 0;

		if (dwarf_child(&parent, &child) != 0)
			continue;
		do {
			int tag = dwarf_tag(&child);

			if (tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine ||
			    tag == DW_TAG_lexical_block || tag == DW_TAG_entry_point ||
			    tag == DW_TAG_try_block || tag == DW_TAG_catch_block) {
				if (dwarf_haspc(&child, addr) > 0) {
					path[n++] = child;
					found = 1;
				}
			} else if ((tag == DW_TAG_namespace || tag == DW_TAG_class_type ||
				    tag == DW_TAG_structure_type || tag == DW_TAG_union_type ||
				    tag == DW_TAG_module) &&
				   n == 0 && npend < WALK_PENDING) {
				pending[npend++] = child; /* a function may be defined inside */
			}
		} while (!found && dwarf_siblingof(&child, &child) == 0);
		if (found)
			npend = 0, pending[npend++] = path[n - 1]; /* go down into it */
	}
	for (int i = 0; i < n && i < max; i++)
		out[i] = path[n - 1 - i];
	return n < max ? n : max;
}

/*
 * For a skeleton unit (-gsplit-dwarf), its split unit in the .dwo or .dwp
 * file, where the DIE tree is (the skeleton holds the line table only).
 */
static Dwarf_Die *split_unit(Dwarf_Die *cudie, Dwarf_Die *out)
{
	Dwarf_Half version;
	uint8_t type, asz, osz;
	uint64_t id;
	Dwarf_Die cu;

	if (dwarf_cu_info(cudie->cu, &version, &type, &cu, out, &id, &asz, &osz) != 0 ||
	    type != DW_UT_skeleton || dwarf_tag(out) != DW_TAG_compile_unit)
		return NULL;
	return out;
}

/* 1 for a skeleton unit whose split unit cannot be read (the .dwo is
 * gone, or in a .dwp, which libdw reads from 0.191 on): its DIEs, so
 * which function a pc's code was inlined from, are unknown. */
static int split_missing(Dwarf_Die *cudie)
{
	Dwarf_Half version;
	uint8_t type, asz, osz;
	uint64_t id;
	Dwarf_Die cu, sub;

	return dwarf_cu_info(cudie->cu, &version, &type, &cu, &sub, &id, &asz, &osz) == 0 &&
	       type == DW_UT_skeleton && dwarf_tag(&sub) != DW_TAG_compile_unit;
}

static int dwarf_frames(struct sym_ctx *ctx, Dwarf_Die *cudie, Dwarf_Addr addr)
{
	Dwarf_Die *scopes = NULL, *chain = NULL, walked[WALK_DEPTH], split;
	int ret = 0, nchain;
	Dwarf_Die *cu = split_unit(cudie, &split) ? &split : cudie;

	/* The concrete scopes holding addr, innermost first, by a walk of the
	 * unit's DIE tree: what dwarf_getscopes + dwarf_getscopes_die give,
	 * also for the units where libdw 0.188 gives nothing (gcc -flto,
	 * whose concrete DIEs refer to other units; dwarf_getscopes also
	 * leaks there). */
	nchain = walk_scopes(cu, addr, walked, WALK_DEPTH);
	if (nchain <= 0)
		goto cleanup;
	Dwarf_Die *list = walked;

	Dwarf_Die *callee = NULL; /* previous frame's inlined_subroutine DIE */
	for (int i = 0; i < nchain; i++) {
		int tag = dwarf_tag(&list[i]);
		if (tag != DW_TAG_subprogram && tag != DW_TAG_inlined_subroutine &&
		    tag != DW_TAG_entry_point)
			continue;
		struct sym_frame f = { .file = UNKNOWN };
		if ((f.function = die_name(ctx, &list[i])) == NULL)
			goto enomem;
		f.inlined = tag == DW_TAG_inlined_subroutine;
		if (callee != NULL && call_site(ctx, callee, &f) != 0)
			goto enomem;
		if (push_frame(ctx, &f) != 0)
			goto enomem;
		if (!f.inlined) {
			callee = NULL;
			break;
		}
		callee = &list[i];
	}
	if (callee != NULL) {
		/* The chain ended inside an inlined function (no enclosing
		 * subprogram DIE): add its caller as far as the call site
		 * says; sym_lookup fills the name from the symbol table. */
		struct sym_frame f = { .function = UNKNOWN };
		if (call_site(ctx, callee, &f) != 0 || push_frame(ctx, &f) != 0)
			goto enomem;
	}
	goto cleanup;
enomem:
	ret = -1;
cleanup:
	free(scopes);
	free(chain);
	return ret;
}

/*
 * The CU DIE covering addr (module address), with its bias in *bias.
 * dwfl_module_addrdie only consults .debug_aranges in elfutils 0.188;
 * clang emits none, so then the CUs are scanned with dwarf_haspc (slow
 * for modules with many CUs, but results are cached per address). It
 * also takes an address that no arange covers for the unit of the arange
 * before it: a cgo Go binary has aranges for its gcc units only, and
 * runtime.asmcgocall.abi0 (asm_amd64.s:844) came out in the unit before,
 * at gcc_mmap.c:37. A unit whose own ranges say it does not hold addr is
 * not taken: the units are scanned, and none found leaves the line
 * unknown rather than wrong.
 */
static Dwarf_Die *find_cu(Dwfl_Module *mod, Dwarf_Addr addr, Dwarf_Addr *bias)
{
	Dwarf_Die *cu = dwfl_module_addrdie(mod, addr, bias);
	if (cu != NULL && dwarf_haspc(cu, addr - *bias) != 0)
		return cu;
	cu = NULL;
	while ((cu = dwfl_module_nextcu(mod, cu, bias)) != NULL)
		if (dwarf_haspc(cu, addr - *bias) > 0)
			return cu;
	return NULL;
}

/*
 * Symbolizes addr (already pc-1 for return addresses) in module m into
 * ctx->scratch: at least one frame, "??" where unknown.  Returns 0, -1 on
 * ENOMEM.
 */
static int symbolize(struct sym_ctx *ctx, const struct module *m, uint64_t addr)
{
	static const struct sym_frame unknown = { .function = UNKNOWN, .file = UNKNOWN };
	Dwfl_Module *mod = m->mod;

	ctx->scratch_len = 0;
	if (mod == NULL) {
		set_error(ctx, "%s", m->error ? m->error : "module unusable");
		return push_frame(ctx, &unknown);
	}
	if (dwfl_addrmodule(m->dwfl, addr) != mod) {
		set_error(ctx, "address %#llx (pc less the load bias) is outside %s",
			  (unsigned long long)addr, m->path);
		return push_frame(ctx, &unknown);
	}

	Dwarf_Addr dwbias = 0;
	Dwarf_Die *cudie = find_cu(mod, addr, &dwbias);
	if (cudie == NULL)
		set_error(ctx, "dwfl_module_addrdie: %s", dwfl_errmsg(-1));
	else if (dwarf_frames(ctx, cudie, addr - dwbias) != 0)
		return -1;
	if (ctx->scratch_len == 0 && push_frame(ctx, &unknown) != 0)
		return -1;

	/* Innermost frame: file:line from the CU's line table. */
	struct sym_frame *f0 = &ctx->scratch[0];
	Dwarf_Line *line = cudie != NULL ? dwarf_getsrc_die(cudie, addr - dwbias) : NULL;
	const char *file = line != NULL ? dwarf_linesrc(line, NULL, NULL) : NULL;
	if (file != NULL) {
		int lineno = 0, col = 0;
		if ((f0->file = src_path(ctx, cudie, file)) == NULL)
			return -1;
		if (dwarf_lineno(line, &lineno) == 0 && lineno > 0)
			f0->line = lineno;
		if (dwarf_linecol(line, &col) == 0 && col > 0)
			f0->column = col;
	}

	/* The out-of-line function: from the symbol table if DWARF had none,
	 * unless the unit's DIEs are in a split unit we cannot read: the pc
	 * may be in code inlined from another function, and the line is that
	 * function's, so the symbol's name could be wrong (honest: "??"). */
	struct sym_frame *last = &ctx->scratch[ctx->scratch_len - 1];
	if (cudie != NULL && ctx->scratch_len == 1 && split_missing(cudie)) {
		char note[640];

		snprintf(note, sizeof(note),
			 "%s: split DWARF unit not found (its .dwo is missing, or in a .dwp, which"
			 " elfutils reads from 0.191 on): its functions are ?? where code may be"
			 " inlined",
			 m->path);
		set_error(ctx, "%s", note);
		module_note(ctx, (struct module *)m, note);
		return 0;
	}
	if (strcmp(last->function, UNKNOWN) == 0 &&
	    (last->function = symtab_name(ctx, mod, addr)) == NULL)
		return -1;
	return 0;
}

/* ---- modules ----------------------------------------------------------- */

static void hex(char *out, size_t outsz, const unsigned char *b, size_t n)
{
	size_t i;
	for (i = 0; i < n && 2 * i + 2 < outsz; i++)
		snprintf(out + 2 * i, 3, "%02x", b[i]);
	out[2 * i] = '\0';
}

/*
 * Opens m->path at bias 0 into m->dwfl/m->mod.  On any failure (missing
 * or garbage file, build-id mismatch) the module stays unusable, with
 * m->error saying why.  Returns 0, -1 on ENOMEM.
 */
/* A module whose DWARF libdw cannot read because its debug sections are
 * compressed with zstd (libdw reads zstd from elfutils 0.189): said once,
 * since its frames then have no lines. */
static void zstd_check(struct sym_ctx *ctx, struct module *m)
{
	Dwarf_Addr bias;
	GElf_Addr b;
	Elf *elf;
	Elf_Scn *scn = NULL;
	size_t shstrndx;

	if (dwfl_module_getdwarf(m->mod, &bias) != NULL)
		return;
	elf = dwfl_module_getelf(m->mod, &b);
	if (!elf || elf_getshdrstrndx(elf, &shstrndx) != 0)
		return;
	while ((scn = elf_nextscn(elf, scn)) != NULL) {
		GElf_Shdr sh;
		GElf_Chdr ch;
		const char *name;

		if (!gelf_getshdr(scn, &sh))
			continue;
		name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (name && !strcmp(name, ".gnu_debuglink")) {
			/* the separate debug file it names is there (next to it,
			 * in .debug/, or under /usr/lib/debug) but libdw refused
			 * it: its build-id or CRC is another build's. (Not there
			 * at all is the usual state of a system library without
			 * its -dbg package: nothing to say.) */
			Elf_Data *d = elf_getdata(scn, NULL);
			const char *slash = strrchr(m->path, '/');
			int dl = slash ? (int)(slash - m->path) : 1;
			const char *dir = slash ? m->path : ".";
			char note[900], f[3][1200];
			struct stat sb;

			if (!d || !d->d_size || !memchr(d->d_buf, 0, d->d_size))
				return;
			snprintf(f[0], sizeof(f[0]), "%.*s/%s", dl, dir, (const char *)d->d_buf);
			snprintf(f[1], sizeof(f[1]), "%.*s/.debug/%s", dl, dir,
				 (const char *)d->d_buf);
			snprintf(f[2], sizeof(f[2]), "/usr/lib/debug%.*s/%s", dl, dir,
				 (const char *)d->d_buf);
			for (int k = 0; k < 3; k++)
				if (stat(f[k], &sb) == 0 && S_ISREG(sb.st_mode)) {
					snprintf(
						note, sizeof(note),
						"%s: its debug file %.300s is another build's (build-id"
						" or CRC): its frames have no lines",
						m->path, f[k]);
					module_note(ctx, m, note);
					break;
				}
			return;
		}
		if (!(sh.sh_flags & SHF_COMPRESSED))
			continue;
		if (name && !strncmp(name, ".debug_", 7) && gelf_getchdr(scn, &ch) != NULL &&
		    ch.ch_type == 2 /* ELFCOMPRESS_ZSTD */) {
			char note[640];

			snprintf(note, sizeof(note),
				 "%s: debug sections compressed with zstd, which this libdw cannot"
				 " read (elfutils 0.189 can): its frames have no lines",
				 m->path);
			module_note(ctx, m, note);
			return;
		}
	}
}

/* ---- the persistent cache ---------------------------------------------- */

/*
 * Results outlive the process in one file per module under the cache
 * directory (sym_set_cache_dir), so that a later run symbolizing the same
 * addresses of the same file opens neither it nor its debug file.  Why:
 * libdw 0.188 inflates every compressed .debug_* section of a file when it
 * opens its DWARF (dwarf_begin_elf), and libc6-dbg's are compressed: the
 * first libc frame of a recording (__libc_start_call_main, under every
 * stack) cost 205 M of the 258 M instructions of `sqlprof record -- sqlite3
 * :memory: 'select 1'` (callgrind), and the module without debug info
 * (the sqlite3 shell) had libdwfl load libdebuginfod and its 20 libraries.
 *
 * A file is used only while everything its results depend on is as it was
 * when they were made: the module file (path, build-id, and its stat:
 * device, inode, mode, size, mtime, ctime), the debug search path, the
 * libdw version, and the stat - or absence - of every file libdwfl could
 * take for its debug information (the build-id tree under each absolute
 * debug dir, the .gnu_debuglink name in each debug dir, the debug file it
 * took and the dwz file that one names).  These inputs are stored in the
 * file and their hash is recomputed on load, a few stat calls: installing
 * or removing a -dbg package, rebuilding a library or another --debug-dir
 * leaves the file unused (and rewritten).  Modules without a build-id,
 * unusable ones and ones with a note (sym_notes) are never cached: their
 * note is said by opening them.
 *
 * The directory must be ours (owner, not group or world writable); a file
 * is read whole (at most CACHE_MAX bytes) and checked field by field before
 * any of it is used: one that is short, long, or holds a bad length, count
 * or byte is ignored (and replaced).  Files are replaced whole by renaming
 * a private temporary file, so concurrent runs read the old or the new
 * file, never a mix (the last writer's stays).
 */
/* 2: Rust names demangled by rust_demangle (a file of version 1 holds
 * them half-demangled by __cxa_demangle, hash and $LT$ escapes kept) */
#define CACHE_MAGIC "SPSYMC2\n"
#define CACHE_MAX (64u << 20)  /* bytes of one module's file */
#define CACHE_STR_MAX 65535u   /* bytes of one string */
#define CACHE_FRAMES_MAX 256u  /* frames of one result */
#define CACHE_NONE 0xffffffffu /* a NULL string's length */

/* h extended by the state of path: absent, or its identity and times. */
static uint64_t sig_file(uint64_t h, const char *path)
{
	struct stat sb;

	h = hash_bytes(h, path, strlen(path) + 1);
	if (stat(path, &sb) != 0)
		return hash_u64(h, 0);
	h = hash_u64(h, 1);
	h = hash_u64(h, (uint64_t)sb.st_dev);
	h = hash_u64(h, (uint64_t)sb.st_ino);
	h = hash_u64(h, (uint64_t)sb.st_mode);
	h = hash_u64(h, (uint64_t)sb.st_size);
	h = hash_u64(h, (uint64_t)sb.st_mtim.tv_sec);
	h = hash_u64(h, (uint64_t)sb.st_mtim.tv_nsec);
	h = hash_u64(h, (uint64_t)sb.st_ctim.tv_sec);
	return hash_u64(h, (uint64_t)sb.st_ctim.tv_nsec);
}

/* sig_file of the path printed by fmt (a path too long: a mark of its own). */
static uint64_t sig_path(uint64_t h, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static uint64_t sig_path(uint64_t h, const char *fmt, ...)
{
	char p[PATH_MAX];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(p, sizeof(p), fmt, ap);
	va_end(ap);
	return n > 0 && (size_t)n < sizeof(p) ? sig_file(h, p) : hash_u64(h, 2);
}

/* h extended by DIR/.build-id/xx/rest.debug of the build-id bid. */
static uint64_t sig_buildid(uint64_t h, const char *dir, size_t dirlen, const unsigned char *bid,
			    size_t n)
{
	char hx[2 * 64 + 1];

	if (n < 2 || n > 64)
		return h;
	hex(hx, sizeof(hx), bid, n);
	return sig_path(h, "%.*s/.build-id/%.2s/%s.debug", (int)dirlen, dir, hx, hx + 2);
}

/*
 * The hash of the state of every file m's results depend on, given the
 * inputs ci (a superset of the places libdwfl's find_debuginfo looks in,
 * dwfl_standard_find_debuginfo: by build-id under each absolute dir, by
 * .gnu_debuglink name in the file's dir, in each relative dir under it
 * and in each absolute dir followed by the file's dir).
 */
static uint64_t cache_sig(const struct sym_ctx *ctx, const struct module *m,
			  const struct cache_in *ci)
{
	const char *dirs = ctx->debug_path ? ctx->debug_path : DEFAULT_DEBUGINFO_PATH;
	const char *slash = strrchr(m->path, '/');
	int fdl = slash ? (int)(slash - m->path) : 1;
	const char *fdir = slash ? m->path : ".";
	uint64_t h = sig_file(HASH_SEED, m->path);

	for (const char *d = dirs;;) {
		const char *end = strchr(d, ':');
		size_t len = end ? (size_t)(end - d) : strlen(d);
		const char *e = d;

		while (len && (*e == '+' || *e == '-'))
			e++, len--;
		if (len && e[0] == '/') {
			h = sig_buildid(h, e, len, m->build_id, m->build_id_len);
			h = sig_buildid(h, e, len, ci->altbid, ci->altbid_len);
			if (ci->debuglink) {
				h = sig_path(h, "%.*s%.*s/%s", (int)len, e, fdl, fdir,
					     ci->debuglink);
				h = sig_path(h, "%.*s/%s", (int)len, e, ci->debuglink);
			}
		} else if (ci->debuglink) {
			h = sig_path(h, "%.*s/%.*s%s%s", fdl, fdir, (int)len, e, len ? "/" : "",
				     ci->debuglink);
		}
		if (!end)
			break;
		d = end + 1;
	}
	if (ci->debuglink && ci->debuglink[0] == '/')
		h = sig_file(h, ci->debuglink);
	if (ci->debugfile)
		h = sig_file(h, ci->debugfile);
	if (ci->altname) {
		const char *base = ci->debugfile ? ci->debugfile : m->path;
		const char *bs = strrchr(base, '/');

		h = ci->altname[0] == '/' ? sig_file(h, ci->altname)
					  : sig_path(h, "%.*s/%s", bs ? (int)(bs - base) : 1,
						     bs ? base : ".", ci->altname);
	}
	return h;
}

/* A copy of s, or NULL for NULL; 0, or -1 on ENOMEM. */
static int dup_opt(char **out, const char *s)
{
	*out = s ? strdup(s) : NULL;
	return s && !*out ? -1 : 0;
}

/* After m opened without a note: its cache inputs and their hash
 * (m->sig_ok); left unknown when anything is missing. */
static void cache_capture(struct sym_ctx *ctx, struct module *m)
{
	struct cache_in ci = { 0 };
	const char *mainfile = NULL, *debugfile = NULL, *s;
	GElf_Addr b;
	GElf_Word crc;
	Dwarf_Addr bias;
	Elf *elf;
	Dwarf *dw;

	if (ctx->cache_fd < 0 || m->mod == NULL || m->build_id_len == 0 || m->note)
		return;
	elf = dwfl_module_getelf(m->mod, &b);
	s = elf ? dwelf_elf_gnu_debuglink(elf, &crc) : NULL;
	if (dup_opt(&ci.debuglink, s) < 0)
		goto out;
	dwfl_module_info(m->mod, NULL, NULL, NULL, NULL, NULL, &mainfile, &debugfile);
	if (dup_opt(&ci.debugfile, debugfile) < 0)
		goto out;
	dw = dwfl_module_getdwarf(m->mod, &bias);
	if (dw) {
		const char *alt = NULL;
		const void *bid = NULL;
		ssize_t n = dwelf_dwarf_gnu_debugaltlink(dw, &alt, &bid);

		if (n > 0) {
			if (n > 64 || dup_opt(&ci.altname, alt) < 0)
				goto out;
			memcpy(ci.altbid, bid, (size_t)n);
			ci.altbid_len = (size_t)n;
		}
	}
	m->sig = cache_sig(ctx, m, &ci);
	m->cin = ci;
	m->sig_ok = 1;
	return;
out:
	cache_in_free(&ci);
}

/* The cache file's name for m: its build-id and a hash of the rest of its
 * key (path, debug path, libdw version, debuginfod servers, format), in
 * name[]. */
static void cache_name(const struct sym_ctx *ctx, const struct module *m, char *name, size_t size,
		       uint64_t *key)
{
	const char *dirs = ctx->debug_path ? ctx->debug_path : "";
	const char *ver = sym_dw_version();
	char bid[2 * 64 + 1];
	uint64_t h = hash_bytes(HASH_SEED, CACHE_MAGIC, 8);

	h = hash_u64(h, ctx->cache_urls);
	h = hash_bytes(h, m->path, strlen(m->path) + 1);
	h = hash_bytes(h, dirs, strlen(dirs) + 1);
	h = hash_bytes(h, ver ? ver : "", strlen(ver ? ver : "") + 1);
	hex(bid, sizeof(bid), m->build_id, m->build_id_len);
	snprintf(name, size, "%s-%016llx", bid, (unsigned long long)h);
	*key = h;
}

/* A growing output buffer; failed is sticky. */
struct obuf {
	unsigned char *p;
	size_t len, cap;
	int failed;
};

static void put(struct obuf *o, const void *v, size_t n)
{
	if (o->failed)
		return;
	if (o->len + n > o->cap) {
		size_t nc = o->cap ? o->cap * 2 : 4096;
		unsigned char *np;

		while (nc < o->len + n)
			nc *= 2;
		if (nc > CACHE_MAX || !(np = realloc(o->p, nc))) {
			o->failed = 1;
			return;
		}
		o->p = np;
		o->cap = nc;
	}
	memcpy(o->p + o->len, v, n);
	o->len += n;
}

static void put_u32(struct obuf *o, uint32_t v)
{
	put(o, &v, sizeof(v));
}

static void put_u64(struct obuf *o, uint64_t v)
{
	put(o, &v, sizeof(v));
}

static void put_str(struct obuf *o, const char *s)
{
	size_t n = s ? strlen(s) : 0;

	if (s && n > CACHE_STR_MAX) {
		o->failed = 1;
		return;
	}
	put_u32(o, s ? (uint32_t)n : CACHE_NONE);
	if (s)
		put(o, s, n);
}

static void put_blob(struct obuf *o, const unsigned char *b, size_t n)
{
	put_u32(o, (uint32_t)n);
	put(o, b, n);
}

/* A cursor over a file's bytes; bad is sticky. */
struct ibuf {
	const unsigned char *p;
	size_t left;
	int bad;
};

static const void *take(struct ibuf *in, size_t n)
{
	const void *r = in->p;

	if (in->bad || n > in->left) {
		in->bad = 1;
		return NULL;
	}
	in->p += n;
	in->left -= n;
	return r;
}

static uint32_t get_u32(struct ibuf *in)
{
	const void *q = take(in, 4);
	uint32_t v = 0;

	if (q)
		memcpy(&v, q, 4);
	return v;
}

static uint64_t get_u64(struct ibuf *in)
{
	const void *q = take(in, 8);
	uint64_t v = 0;

	if (q)
		memcpy(&v, q, 8);
	return v;
}

/* A string of the file into a NUL-terminated malloc'd copy in *out (NULL
 * for a NULL string): 0, or -1 when bad (too long, a NUL inside, past the
 * end) or on ENOMEM. */
static int get_str(struct ibuf *in, char **out)
{
	uint32_t n = get_u32(in);
	const char *q;

	*out = NULL;
	if (in->bad || n == CACHE_NONE)
		return in->bad ? -1 : 0;
	if (n > CACHE_STR_MAX || !(q = take(in, n)) || memchr(q, 0, n) || !(*out = malloc(n + 1))) {
		in->bad = 1;
		return -1;
	}
	memcpy(*out, q, n);
	(*out)[n] = 0;
	return 0;
}

/* 1 when the next string of the file is s (NULL included), else 0. */
static int str_is(struct ibuf *in, const char *s)
{
	char *v;
	int same;

	if (get_str(in, &v) < 0)
		return 0;
	same = (!v && !s) || (v && s && strcmp(v, s) == 0);
	free(v);
	return same;
}

/* The whole regular file name under the cache dir, ours, at most
 * CACHE_MAX bytes: a malloc'd copy and its size, or NULL. */
static unsigned char *cache_read(const struct sym_ctx *ctx, const char *name, size_t *size)
{
	int fd = openat(ctx->cache_fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	unsigned char *buf = NULL;
	struct stat sb;
	size_t off = 0;

	if (fd < 0)
		return NULL;
	if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_uid != geteuid() ||
	    sb.st_size <= 0 || (uint64_t)sb.st_size > CACHE_MAX ||
	    !(buf = malloc((size_t)sb.st_size)))
		goto fail;
	while (off < (size_t)sb.st_size) {
		ssize_t r = read(fd, buf + off, (size_t)sb.st_size - off);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			goto fail;
		off += (size_t)r;
	}
	close(fd);
	*size = off;
	return buf;
fail:
	free(buf);
	close(fd);
	return NULL;
}

static const struct entry *entry_add(struct sym_ctx *ctx, const struct module *m, uint64_t addr,
				     int cached);

/* The entries of a cache file, from in: checked only (insert 0), or
 * added to ctx for m (insert 1; then the file is known good). Returns the
 * number of entries, or -1 when the bytes are bad (or on ENOMEM). */
static long cache_entries(struct sym_ctx *ctx, const struct module *m, struct ibuf in, int insert)
{
	uint32_t n = get_u32(&in);
	long done = 0;

	for (uint32_t i = 0; i < n && !in.bad; i++) {
		uint64_t addr = get_u64(&in);
		uint32_t nf = get_u32(&in);

		if (nf == 0 || nf > CACHE_FRAMES_MAX)
			return -1;
		ctx->scratch_len = 0;
		for (uint32_t f = 0; f < nf && !in.bad; f++) {
			struct sym_frame fr = { 0 };
			char *fn = NULL, *file = NULL;
			uint32_t line, col, inl;

			get_str(&in, &fn);
			get_str(&in, &file);
			line = get_u32(&in);
			col = get_u32(&in);
			inl = get_u32(&in);
			if (!in.bad &&
			    (!fn || !file || line > INT32_MAX || col > INT32_MAX || inl > 1))
				in.bad = 1;
			if (!in.bad && insert) {
				fr.function = strcmp(fn, UNKNOWN) ? intern(ctx, fn) : UNKNOWN;
				fr.file = strcmp(file, UNKNOWN) ? intern(ctx, file) : UNKNOWN;
				fr.line = (int)line;
				fr.column = (int)col;
				fr.inlined = (int)inl;
				if (!fr.function || !fr.file || push_frame(ctx, &fr) != 0)
					in.bad = 1;
			}
			free(fn);
			free(file);
		}
		if (!in.bad && insert && !entry_add(ctx, m, addr, 1))
			in.bad = 1;
		done++;
	}
	return in.bad || in.left ? -1 : done;
}

/*
 * Before m is opened: its results from its cache file, if there is one
 * for m and all its inputs are as they were (then m->sig and m->cin come
 * from it). Anything short of that leaves the cache unused for m, and
 * its file to be rewritten. Returns 0, -1 on ENOMEM.
 */
static int cache_load(struct sym_ctx *ctx, struct module *m)
{
	char name[256];
	struct cache_in ci = { 0 };
	struct ibuf in;
	unsigned char *buf;
	const unsigned char *bid;
	const void *magic;
	const char *ver = sym_dw_version();
	size_t size = 0;
	uint64_t key, sig;
	uint32_t bl;
	int rc = 0;

	if (ctx->cache_fd < 0 || m->build_id_len == 0)
		return 0;
	cache_name(ctx, m, name, sizeof(name), &key);
	if (!(buf = cache_read(ctx, name, &size)))
		return 0;
	in = (struct ibuf){ .p = buf, .left = size };
	magic = take(&in, 8);
	if (!magic || memcmp(magic, CACHE_MAGIC, 8) != 0 || get_u64(&in) != key ||
	    !str_is(&in, m->path) || !str_is(&in, ctx->debug_path) || !str_is(&in, ver ? ver : ""))
		goto bad;
	bl = get_u32(&in);
	if (bl != m->build_id_len || !(bid = take(&in, bl)) || memcmp(bid, m->build_id, bl) != 0)
		goto bad;
	sig = get_u64(&in);
	if (get_str(&in, &ci.debuglink) < 0 || get_str(&in, &ci.debugfile) < 0 ||
	    get_str(&in, &ci.altname) < 0)
		goto bad;
	bl = get_u32(&in);
	if (bl > 64 || !(bid = take(&in, bl)))
		goto bad;
	memcpy(ci.altbid, bid, bl);
	ci.altbid_len = bl;
	if (cache_sig(ctx, m, &ci) != sig) {
		ctx->stats.cache_stale++; /* a file it depends on changed, came or went */
		goto out;
	}
	if (cache_entries(ctx, m, in, 0) < 0)
		goto bad;
	if (cache_entries(ctx, m, in, 1) < 0) {
		rc = -1; /* only ENOMEM is left */
		goto out;
	}
	m->cin = ci;
	memset(&ci, 0, sizeof(ci));
	m->sig = sig;
	m->sig_ok = 1;
	ctx->stats.cache_files++;
	goto out;
bad:
	ctx->stats.cache_rejected++;
out:
	cache_in_free(&ci);
	free(buf);
	return rc;
}

/*
 * m's results, those from its cache file and those made here, written
 * back as its new cache file when this run added any and m may be cached
 * (best effort: on any failure the old file, if any, stays).
 */
static void cache_save(struct sym_ctx *ctx, const struct module *m)
{
	struct obuf o = { 0 };
	char name[256], tmp[300];
	const char *ver = sym_dw_version();
	uint64_t key;
	uint32_t n = 0;
	size_t count_at;
	int fd;

	if (ctx->cache_fd < 0 || !m->sig_ok || !m->nnew || m->note || m->error ||
	    m->build_id_len == 0)
		return;
	cache_name(ctx, m, name, sizeof(name), &key);
	put(&o, CACHE_MAGIC, 8);
	put_u64(&o, key);
	put_str(&o, m->path);
	put_str(&o, ctx->debug_path);
	put_str(&o, ver ? ver : "");
	put_blob(&o, m->build_id, m->build_id_len);
	put_u64(&o, m->sig);
	put_str(&o, m->cin.debuglink);
	put_str(&o, m->cin.debugfile);
	put_str(&o, m->cin.altname);
	put_blob(&o, m->cin.altbid, m->cin.altbid_len);
	count_at = o.len;
	put_u32(&o, 0);
	for (size_t i = 0; i < ctx->entries.nbuckets; i++)
		for (struct hnode *e = ctx->entries.buckets[i]; e; e = e->next) {
			const struct entry *en = (const struct entry *)e;

			if (en->m != m)
				continue;
			put_u64(&o, en->addr);
			put_u32(&o, (uint32_t)en->res.nframes);
			for (int f = 0; f < en->res.nframes; f++) {
				put_str(&o, en->frames[f].function);
				put_str(&o, en->frames[f].file);
				put_u32(&o, (uint32_t)en->frames[f].line);
				put_u32(&o, (uint32_t)en->frames[f].column);
				put_u32(&o, (uint32_t)en->frames[f].inlined);
			}
			n++;
		}
	if (o.failed)
		goto out;
	memcpy(o.p + count_at, &n, sizeof(n));
	snprintf(tmp, sizeof(tmp), ".tmp.%ld.%s", (long)getpid(), name);
	fd = openat(ctx->cache_fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		goto out;
	for (size_t off = 0; off < o.len;) {
		ssize_t w = write(fd, o.p + off, o.len - off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			close(fd);
			unlinkat(ctx->cache_fd, tmp, 0);
			goto out;
		}
		off += (size_t)w;
	}
	if (close(fd) != 0 || renameat(ctx->cache_fd, tmp, ctx->cache_fd, name) != 0)
		unlinkat(ctx->cache_fd, tmp, 0);
	else
		ctx->stats.cache_written++;
out:
	free(o.p);
}

static int module_open(struct sym_ctx *ctx, struct module *m)
{
	char msg[sizeof(ctx->error)];
	msg[0] = '\0';

	m->opened = 1;
	if (ctx->debug_path != NULL && (m->debuginfo_path = strdup(ctx->debug_path)) == NULL)
		return -1;
	/* libdw is loaded here, at the first address the cache did not
	 * answer; without it every module is unusable, said once */
	if (sym_dw_load(msg, sizeof(msg)) < 0) {
		if (!ctx->dw_noted) {
			ctx->dw_noted = 1;
			module_note(ctx, m, msg);
		}
		goto fail;
	}
	/* Offline use: files are opened by path at a given bias; separate
	 * debug info via build-id and .gnu_debuglink; debuginfo_path points
	 * at the module's own path string. */
	m->callbacks = (Dwfl_Callbacks){
		.find_elf = dwfl_build_id_find_elf,
		.find_debuginfo = dwfl_standard_find_debuginfo,
		.section_address = dwfl_offline_section_address,
		.debuginfo_path = &m->debuginfo_path,
	};

	m->dwfl = dwfl_begin(&m->callbacks);
	if (m->dwfl == NULL) {
		snprintf(msg, sizeof(msg), "dwfl_begin: %s", dwfl_errmsg(-1));
		goto fail;
	}
	dwfl_report_begin(m->dwfl);
	/* add_p_vaddr: addresses are p_vaddr plus the bias, here 0: offsets
	 * from the load bias (dlpi_addr) of any process. */
	m->mod = dwfl_report_elf(m->dwfl, m->path, m->path, -1, 0, true);
	if (m->mod == NULL) {
		snprintf(msg, sizeof(msg), "dwfl_report_elf: %s", dwfl_errmsg(-1));
		goto fail;
	}
	if (dwfl_report_end(m->dwfl, NULL, NULL) != 0) {
		snprintf(msg, sizeof(msg), "dwfl_report_end: %s", dwfl_errmsg(-1));
		goto fail;
	}
	if (m->build_id_len > 0) {
		const unsigned char *bits = NULL;
		GElf_Addr vaddr;
		int n = dwfl_module_build_id(m->mod, &bits, &vaddr);
		if (n != (int)m->build_id_len || memcmp(bits, m->build_id, m->build_id_len) != 0) {
			char want[130], have[130], note[640];
			hex(want, sizeof(want), m->build_id, m->build_id_len);
			hex(have, sizeof(have), bits, n > 0 ? (size_t)n : 0);
			snprintf(msg, sizeof(msg), "build-id mismatch: %s has %s, expected %s",
				 m->path, n > 0 ? have : "none", want);
			snprintf(note, sizeof(note),
				 "%s is not the file that ran (build-id %s, expected %s; rebuilt or"
				 " replaced since): its frames are ??",
				 m->path, n > 0 ? have : "none", want);
			module_note(ctx, m, note);
			goto fail;
		}
	}
	ctx->stats.modules_opened++;
	zstd_check(ctx, m);
	{
		/* results read from the cache file stay good only if the
		 * files are still as that file says (changed since it was
		 * read: this run's results are not written back) */
		uint64_t was = m->sig;
		int had = m->sig_ok;

		cache_in_free(&m->cin);
		m->sig_ok = 0;
		cache_capture(ctx, m);
		if (had && m->sig_ok && m->sig != was)
			m->sig_ok = 0;
	}
	return 0;
fail:
	if (m->dwfl != NULL)
		dwfl_end(m->dwfl);
	m->dwfl = NULL;
	m->mod = NULL;
	ctx->stats.modules_opened++;
	if ((m->error = intern(ctx, msg)) == NULL)
		return -1;
	set_error(ctx, "%s", msg);
	return 0;
}

/* Finds or creates the module of the file: (path, build-id),
 * or (path, size, mtime) without a build-id (a file rebuilt in place is
 * another file).  NULL on ENOMEM. */
static struct module *module_get(struct sym_ctx *ctx, const char *path,
				 const unsigned char *build_id, size_t build_id_len)
{
	struct stat sb;
	uint64_t size = 0, mtime_ns = 0;

	if (build_id_len == 0 && stat(path, &sb) == 0) {
		size = (uint64_t)sb.st_size;
		mtime_ns = (uint64_t)sb.st_mtim.tv_sec * 1000000000u + (uint64_t)sb.st_mtim.tv_nsec;
	}
	uint64_t hash = hash_bytes(HASH_SEED, path, strlen(path) + 1);
	hash = hash_bytes(hash, build_id, build_id_len);
	hash = hash_u64(hash_u64(hash, size), mtime_ns);
	for (struct hnode *e = htab_chain(&ctx->modules, hash); e != NULL; e = e->next) {
		struct module *m = (struct module *)e;
		if (e->hash == hash && m->build_id_len == build_id_len && m->size == size &&
		    m->mtime_ns == mtime_ns &&
		    (build_id_len == 0 || memcmp(m->build_id, build_id, build_id_len) == 0) &&
		    strcmp(m->path, path) == 0)
			return m;
	}

	struct module *m = calloc(1, sizeof(*m));
	if (m == NULL)
		return NULL;
	m->h.hash = hash;
	m->size = size;
	m->mtime_ns = mtime_ns;
	if ((m->path = intern(ctx, path)) == NULL)
		goto enomem;
	if (build_id_len > 0) {
		if ((m->build_id = malloc(build_id_len)) == NULL)
			goto enomem;
		memcpy(m->build_id, build_id, build_id_len);
		m->build_id_len = build_id_len;
	}
	if (htab_insert(&ctx->modules, &m->h) != 0)
		goto enomem;
	/* opened at its first address the cache does not answer; on ENOMEM
	 * here the module simply has no cached results */
	cache_load(ctx, m);
	return m;
enomem:
	free_module(&m->h);
	return NULL;
}

/* ctx->scratch as the result for (m, addr); cached: it came from m's
 * cache file (which names an address twice: the first one stays).
 * Returns the entry, NULL on ENOMEM. */
static const struct entry *entry_add(struct sym_ctx *ctx, const struct module *m, uint64_t addr,
				     int cached)
{
	uint64_t hash = hash_u64(hash_u64(HASH_SEED, (uintptr_t)m), addr);
	size_t n = ctx->scratch_len;
	struct entry *en;

	for (struct hnode *e = htab_chain(&ctx->entries, hash); e; e = e->next)
		if (((struct entry *)e)->m == m && ((struct entry *)e)->addr == addr)
			return (struct entry *)e;
	en = malloc(sizeof(*en) + n * sizeof(en->frames[0]));
	if (en == NULL)
		return NULL;
	en->h.hash = hash;
	en->m = m;
	en->addr = addr;
	en->cached = cached;
	memcpy(en->frames, ctx->scratch, n * sizeof(en->frames[0]));
	en->res.module = m->path;
	en->res.nframes = (int)n;
	en->res.frames = en->frames;
	if (htab_insert(&ctx->entries, &en->h) != 0) {
		free(en);
		return NULL;
	}
	return en;
}

/* ---- public API -------------------------------------------------------- */

struct sym_ctx *sym_open(void)
{
	struct sym_ctx *ctx = calloc(1, sizeof(struct sym_ctx));

	if (ctx)
		ctx->cache_fd = -1;
	return ctx;
}

/* mkdir -p dir, each directory it makes 0700. 0, or -1 (errno). */
static int mkdirs(const char *dir)
{
	char p[PATH_MAX];
	size_t n = strlen(dir);

	if (n == 0 || n >= sizeof(p)) {
		errno = EINVAL;
		return -1;
	}
	memcpy(p, dir, n + 1);
	for (char *q = p + 1;; q++) {
		if (*q == '/' || *q == 0) {
			char c = *q;

			*q = 0;
			if (mkdir(p, 0700) != 0 && errno != EEXIST)
				return -1;
			*q = c;
			if (!c)
				break;
		}
	}
	return 0;
}

int sym_set_cache_dir(struct sym_ctx *ctx, const char *dir)
{
	struct stat sb;
	int fd;

	if (ctx == NULL) {
		errno = EINVAL;
		return -1;
	}
	if (ctx->cache_fd >= 0)
		close(ctx->cache_fd);
	ctx->cache_fd = -1;
	if (dir == NULL || dir[0] == '\0')
		return 0;
	if (mkdirs(dir) != 0)
		return -1;
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -1;
	if (fstat(fd, &sb) != 0 || sb.st_uid != geteuid() || (sb.st_mode & 022)) {
		set_error(ctx,
			  "sym_set_cache_dir: %s is not a directory of ours that only we may write"
			  " to: not used",
			  dir);
		close(fd);
		errno = EPERM;
		return -1;
	}
	ctx->cache_fd = fd;
	{
		const char *urls = getenv("DEBUGINFOD_URLS");

		ctx->cache_urls = urls && *urls ? hash_bytes(HASH_SEED, urls, strlen(urls)) : 0;
	}
	return 0;
}

void sym_close(struct sym_ctx *ctx)
{
	if (ctx == NULL)
		return;
	for (size_t i = 0; i < ctx->modules.nbuckets; i++)
		for (struct hnode *e = ctx->modules.buckets[i]; e; e = e->next)
			cache_save(ctx, (const struct module *)e);
	if (ctx->cache_fd >= 0)
		close(ctx->cache_fd);
	htab_destroy(&ctx->entries, free_node);
	htab_destroy(&ctx->modules, free_module);
	htab_destroy(&ctx->strings, free_node);
	free(ctx->scratch);
	free(ctx->notes);
	free(ctx->debug_path);
	if (ctx->libstdcxx != NULL)
		dlclose(ctx->libstdcxx);
	free(ctx);
}

void sym_set_debug_path(struct sym_ctx *ctx, const char *dirs)
{
	if (ctx == NULL)
		return;
	char *p = NULL;
	if (dirs != NULL && dirs[0] != '\0' &&
	    asprintf(&p, "%s:%s", DEFAULT_DEBUGINFO_PATH, dirs) < 0) {
		set_error(ctx, "sym_set_debug_path: %s", strerror(ENOMEM));
		return;
	}
	free(ctx->debug_path);
	ctx->debug_path = p;
}

int sym_lookup(struct sym_ctx *ctx, const char *path, const unsigned char *build_id,
	       size_t build_id_len, uint64_t bias, uint64_t pc, int is_return_address,
	       const struct sym_result **out)
{
	if (ctx == NULL || path == NULL || out == NULL || (build_id == NULL && build_id_len > 0)) {
		errno = EINVAL;
		return -1;
	}
	*out = NULL;
	ctx->error[0] = '\0';

	struct module *m = module_get(ctx, path, build_id, build_id_len);
	if (m == NULL)
		goto enomem;

	/* A return address points after the call instruction, which may be
	 * the first byte of the next line, the next inlined range or even
	 * the next function (a noreturn call at a function's end); pc-1 is
	 * inside the call itself, so its line is the caller's line.  The
	 * module is reported at bias 0: the address looked up is the offset
	 * from this process's load bias. */
	uint64_t addr = (is_return_address && pc > 0 ? pc - 1 : pc) - bias;

	uint64_t hash = hash_u64(hash_u64(HASH_SEED, (uintptr_t)m), addr);
	const struct entry *en;
	for (struct hnode *e = htab_chain(&ctx->entries, hash); e != NULL; e = e->next) {
		en = (const struct entry *)e;
		if (e->hash == hash && en->m == m && en->addr == addr) {
			if (m->error != NULL)
				set_error(ctx, "%s", m->error);
			ctx->stats.lookups++;
			ctx->stats.address_hits++;
			ctx->stats.cache_hits += en->cached;
			*out = &en->res;
			return 0;
		}
	}

	if (!m->opened && module_open(ctx, m) != 0)
		goto enomem;
	if (symbolize(ctx, m, addr) != 0 || !(en = entry_add(ctx, m, addr, 0)))
		goto enomem;
	m->nnew++;
	ctx->stats.lookups++;
	*out = &en->res;
	return 0;
enomem:
	set_error(ctx, "sym_lookup: %s", strerror(ENOMEM));
	errno = ENOMEM;
	return -1;
}

const char *sym_last_error(const struct sym_ctx *ctx)
{
	return ctx != NULL ? ctx->error : "invalid sym_ctx";
}

void sym_get_stats(const struct sym_ctx *ctx, struct sym_stats *out)
{
	if (ctx != NULL && out != NULL)
		*out = ctx->stats;
}
