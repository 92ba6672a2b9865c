/* SPDX-License-Identifier: MIT */
/*
 * attrib.c - see attrib.h.
 */
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attrib.h"
#include "kind.h"
#include "sym.h"

struct stkey {
	uint64_t pid, stack_id;
};

/* The modules that provide the sqlite3 API, as the preload recognised
 * them by the symbols they define (modules.sqlite: 1 a SQLite library
 * such as libsqlcipher, 2 SQLite compiled into a plugin or program), read
 * once by sp_attrib_load. A profile older than the column has none: the
 * file name rule below still holds for libsqlite3. */
struct sqlite_mods {
	char **path;
	int *kind;
	size_t n;
};

static int sqlite_kind(const struct sqlite_mods *m, const char *module)
{
	for (size_t i = 0; m && i < m->n; i++)
		if (!strcmp(m->path[i], module))
			return m->kind[i];
	return 0;
}

static void mods_free(struct sqlite_mods *m)
{
	for (size_t i = 0; i < m->n; i++)
		free(m->path[i]);
	free(m->path);
	free(m->kind);
	memset(m, 0, sizeof(*m));
}

int sp_is_profiler_module(const char *module)
{
	return !strncmp(sp_basename(module), "libsqlprof.so", 13);
}

/* Frames of the profiler and of SQLite itself are never the origin:
 * libsqlite3 and libsqlprof by name, any SQLite library by its flag, and
 * in a module with SQLite compiled in, SQLite's own code (its sqlite3.c,
 * or a sqlite3* / sqlcipher* function when there are no lines). */
static int builtin_skip(const struct sp_frame *f, const struct sqlite_mods *m)
{
	const char *b = sp_basename(f->module);

	if (!strncmp(b, "libsqlite3.so", 13) || !strncmp(b, "libsqlprof.so", 13))
		return 1;
	switch (sqlite_kind(m, f->module)) {
	case 1: return 1;
	case 2:
		return !strcmp(sp_basename(f->file), "sqlite3.c") ||
		       !strncmp(f->function, "sqlite3", 7) || !strncmp(f->function, "sqlcipher", 9);
	}
	return 0;
}

/*
 * A demangled C++ name without its return type and parameter list, so that
 * --skip 'shop::Db::*' and 'shop::Db::query' match
 * "std::string shop::Db::get<std::string>(char const*) const": the text
 * between the last space outside <> and () before the first '(' outside <>
 * ("(anonymous namespace)" is part of the name) and that '('. Writes into
 * out (len bytes); returns out, or NULL when the name has no parameter list
 * (a C name: match it as it is).
 */
static const char *cxx_short(const char *fn, char *out, size_t len)
{
	const char *start = fn, *p;
	int angle = 0;
	size_t n;

	for (p = fn; *p; p++) {
		if (!strncmp(p, "(anonymous namespace)", 21)) {
			p += 20;
			continue;
		}
		if (*p == '<')
			angle++;
		else if (*p == '>' && angle > 0)
			angle--;
		else if (*p == ' ' && !angle && strncmp(p + 1, "const", 5) && p[1] != '*' &&
			 p[1] != '&')
			start = p + 1;
		else if (*p == '(' && !angle)
			break;
	}
	if (!*p || p == start)
		return NULL;
	n = (size_t)(p - start);
	if (n >= len)
		return NULL;
	memcpy(out, start, n);
	out[n] = 0;
	return out;
}

/*
 * A Rust trait method "<TYPE as TRAIT>::f" also as "TYPE::f" and
 * "TRAIT::f", so that --skip 'rusqlite::*' matches
 * "<rusqlite::Statement as rusqlite::Exec>::exec_step" (and "<std::X as
 * rusqlite::ToSql>::to_sql"); v0's "<TYPE>::f" as "TYPE::f" (tr empty).
 * Writes into ty and tr (len bytes each); returns 1, or 0 when the name
 * has no such form.
 */
static int rust_impl(const char *fn, char *ty, char *tr, size_t len)
{
	const char *p, *as = NULL;
	int depth = 0;

	if (fn[0] != '<')
		return 0;
	for (p = fn; *p; p++) {
		if (*p == '<')
			depth++;
		else if (*p == '>' && p[-1] != '-' && --depth == 0)
			break;
		else if (depth == 1 && !as && !strncmp(p, " as ", 4))
			as = p;
	}
	if (!*p || strncmp(p + 1, "::", 2))
		return 0;
	if (!as) /* v0's inherent method: "<rusqlite::Statement>::execute::<i64>" */
		as = p;
	if (snprintf(ty, len, "%.*s%s", (int)(as - fn - 1), fn + 1, p + 1) >= (int)len ||
	    snprintf(tr, len, "%.*s%s", as == p ? 0 : (int)(p - as - 4), as == p ? "" : as + 4,
		     as == p ? "" : p + 1) >= (int)len)
		return 0;
	return 1;
}

static int user_skip(const struct sp_frame *f, const char *const *skip)
{
	char buf[512], ty[512], tr[512], at[64], *path_at = NULL, *base_at = NULL;
	const char *cxx = cxx_short(f->function, buf, sizeof(buf));
	int hit = 0, impl;

	if (!skip || !*skip)
		return 0;
	impl = rust_impl(f->function, ty, tr, sizeof(ty));

	/* a frame without a source file is also named MODULE+0xOFF, as
	 * report prints it ("newsboat+0x82f5e") */
	if (!f->py && f->offset) {
		snprintf(at, sizeof(at), "+0x%llx", (unsigned long long)f->offset);
		if (asprintf(&path_at, "%s%s", f->module, at) < 0)
			path_at = NULL;
		if (asprintf(&base_at, "%s%s", sp_basename(f->module), at) < 0)
			base_at = NULL;
	}
	for (; !hit && skip && *skip; skip++)
		hit = !fnmatch(*skip, f->function, 0) || (cxx && !fnmatch(*skip, cxx, 0)) ||
		      (impl && (!fnmatch(*skip, ty, 0) || (*tr && !fnmatch(*skip, tr, 0)))) ||
		      !fnmatch(*skip, f->module, 0) || !fnmatch(*skip, sp_basename(f->module), 0) ||
		      (path_at && !fnmatch(*skip, path_at, 0)) ||
		      (base_at && !fnmatch(*skip, base_at, 0)) ||
		      (f->py &&
		       (!fnmatch(*skip, f->file, 0) || !fnmatch(*skip, sp_basename(f->file), 0)));
	free(path_at);
	free(base_at);
	return hit;
}

static int all_frames;

void sp_attrib_set_all_frames(int on)
{
	all_frames = on;
}

/* Path components: the next one of p (after any '/'), its length in *n;
 * NULL at the end. */
static const char *comp(const char *p, size_t *n)
{
	while (*p == '/')
		p++;
	if (!*p)
		return NULL;
	*n = strcspn(p, "/");
	return p;
}

static int comp_is(const char *c, size_t n, const char *name)
{
	return n == strlen(name) && !memcmp(c, name, n);
}

/* "python3", "python3.11", "python2.7": the name of an interpreter's lib
 * directory (Debian's /usr/lib/python3/dist-packages has no minor). */
static int python_dir(const char *c, size_t n)
{
	size_t i = 6;

	if (n <= 6 || memcmp(c, "python", 6) || c[i] < '0' || c[i] > '9')
		return 0;
	for (; i < n; i++)
		if ((c[i] < '0' || c[i] > '9') && c[i] != '.')
			return 0;
	return 1;
}

/* "activerecord-6.1.7", "sqlite3-1.6.0-x86_64-linux": a gem's directory. */
static int name_version(const char *c, size_t n)
{
	for (size_t i = 1; i + 1 < n; i++)
		if (c[i] == '-' && c[i + 1] >= '0' && c[i + 1] <= '9')
			return 1;
	return 0;
}

/*
 * Installed code by the path's components, never by one folder's name
 * alone: a project folder called "django" or "gems" is the user's; a
 * package manager's layout (site-packages/, lib/python3.11/, node_modules/,
 * gems/NAME-VERSION/, Cargo's registry/src/, Go's pkg/mod/) is not.
 */
static int installed_path(const char *path)
{
	const char *c, *p = path, *prev = NULL;
	size_t n, pn = 0;
	int gems = 0, cargo = 0;

	for (; (c = comp(p, &n)); prev = c, pn = n, p = c + n) {
		if (comp_is(c, n, "site-packages") || comp_is(c, n, "dist-packages") ||
		    comp_is(c, n, "node_modules") || comp_is(c, n, "rustlib"))
			return 1;
		/* lib/python3.11/..., lib/ruby/3.1.0/... (the interpreter's
		 * own library, its lib-dynload included) */
		if (prev && c[n] == '/' &&
		    (comp_is(prev, pn, "lib") || comp_is(prev, pn, "lib64")) &&
		    (python_dir(c, n) || comp_is(c, n, "ruby")))
			return 1;
		/* Go's module cache: GOPATH/pkg/mod/MODULE@VERSION/... */
		if (prev && comp_is(prev, pn, "pkg") && comp_is(c, n, "mod") && strchr(c + n, '@'))
			return 1;
		/* Cargo: CARGO_HOME/registry/src/INDEX/CRATE-VER/, git/checkouts/ */
		if (cargo && (comp_is(c, n, "registry") || comp_is(c, n, "git")))
			return 1;
		cargo = comp_is(c, n, ".cargo");
		if (prev && comp_is(prev, pn, "registry") && comp_is(c, n, "src"))
			return 1;
		/* RubyGems and Bundler: .../gems/[ABI/]...NAME-VERSION/ */
		if (gems && c[n] == '/' && name_version(c, n))
			return 1;
		gems |= comp_is(c, n, "gems");
	}
	return 0;
}

/* Go's standard library, by its top-level packages (go list std). */
static int go_std_package(const char *c, size_t n)
{
	static const char *const pkgs[] = {
		"archive", "bufio",    "builtin",  "bytes",   "cmp",     "compress", "container",
		"context", "crypto",   "database", "debug",   "embed",   "encoding", "errors",
		"expvar",  "flag",     "fmt",      "go",      "hash",    "html",     "image",
		"index",   "internal", "io",       "iter",    "log",     "maps",     "math",
		"mime",    "net",      "os",       "path",    "plugin",  "reflect",  "regexp",
		"runtime", "slices",   "sort",     "strconv", "strings", "structs",  "sync",
		"syscall", "testing",  "text",     "time",    "unicode", "unique",   "unsafe",
		"weak"
	};

	for (size_t i = 0; i < sizeof(pkgs) / sizeof(pkgs[0]); i++)
		if (comp_is(c, n, pkgs[i]))
			return 1;
	return 0;
}

/*
 * A Go source file that is not the program's own (a cgo program's frames
 * past runtime.asmcgocall, gostack.c): Go's standard library wherever Go
 * is installed (GOROOT/src/PKG/..., GOROOT a directory named go*, as
 * /usr/lib/go-1.19, ~/sdk/go1.22.1; "$GOROOT/src/..." or a bare
 * "runtime/..." in a -trimpath build), Debian's packaged Go libraries
 * (/usr/share/gocode), a module at a version (NAME@vX.Y.Z/, -trimpath's
 * module cache), a vendor/ directory, and generated code: cgo's glue
 * (_cgo_gotypes.go, cgo-gcc-prolog: a driver's and the program's alike;
 * the program's own code is the Go frame above it) and the compiler's
 * wrappers (<autogenerated>). GOPATH/src/APP/... of
 * a GOPATH-mode program is the user's.
 */
static int go_library_file(const char *path)
{
	const char *b = sp_basename(path), *c, *p = path, *prev = NULL;
	size_t n, pn = 0, len = strlen(path);
	int first = 1;

	if (!strcmp(b, "_cgo_gotypes.go") || !strcmp(b, "cgo-gcc-prolog") ||
	    !strcmp(b, "<autogenerated>") || !strcmp(b, "_cgo_export.c") ||
	    !strncmp(path, "/usr/share/gocode/", 18))
		return 1;
	if (len < 3 || (strcmp(path + len - 3, ".go") && strcmp(path + len - 2, ".s")))
		return 0;
	for (; (c = comp(p, &n)); prev = c, pn = n, p = c + n, first = 0) {
		if (c[n] != '/')
			break; /* the file's own name */
		if (first && path[0] != '/' && path[0] != '.' && go_std_package(c, n))
			return 1; /* -trimpath: runtime/proc.go */
		if (comp_is(c, n, "vendor"))
			return 1;
		for (size_t k = 1; k + 2 < n; k++) /* NAME@vN... */
			if (c[k] == '@' && c[k + 1] == 'v' && c[k + 2] >= '0' && c[k + 2] <= '9')
				return 1;
		if (prev && comp_is(c, n, "src") &&
		    (comp_is(prev, pn, "$GOROOT") || (pn >= 2 && !memcmp(prev, "go", 2)))) {
			const char *q;
			size_t qn;

			if ((q = comp(c + n, &qn)) && q[qn] == '/' && go_std_package(q, qn))
				return 1;
		}
	}
	return 0;
}

/* The directories of a system's own programs and libraries, and of the
 * headers whose inlined code may sit in a program's own module. */
static int system_path(const char *path)
{
	static const char *const dirs[] = { "/lib/",
					    "/lib32/",
					    "/lib64/",
					    "/libx32/",
					    "/usr/lib/",
					    "/usr/lib32/",
					    "/usr/lib64/",
					    "/usr/libx32/",
					    "/usr/libexec/",
					    "/usr/local/lib/",
					    "/usr/local/lib64/",
					    "/bin/",
					    "/sbin/",
					    "/usr/bin/",
					    "/usr/sbin/",
					    "/usr/games/",
					    "/usr/include/",
					    "/usr/local/include/",
					    "/usr/local/go/src/" };

	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
		if (!strncmp(path, dirs[i], strlen(dirs[i])))
			return 1;
	/* the Rust standard library's remapped sources: /rustc/COMMIT/library */
	if (!strncmp(path, "/rustc/", 7) && strspn(path + 7, "0123456789abcdef") == 40)
		return 1;
	return 0;
}

/* An interpreter's own executable or library, wherever it is installed
 * (pyenv's versions/3.11.7/bin/python3.11): its C code runs the script,
 * it never is the user's line. */
static int interpreter_module(const char *module)
{
	static const char *const names[] = { "python", "libpython", "ruby",  "libruby",
					     "perl",   "libperl",   "php",   "libphp",
					     "node",   "libnode",   "tclsh", "libtcl" };
	const char *b = sp_basename(module);

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		size_t n = strlen(names[i]);

		if (!strncmp(b, names[i], n) &&
		    (!b[n] || b[n] == '.' || (b[n] >= '0' && b[n] <= '9')))
			return 1;
	}
	return 0;
}

/* Composer's vendor directory: .../vendor/VENDOR/PACKAGE/...php, or its
 * own vendor/autoload.php and vendor/composer/ (a folder named "vendor"
 * with the user's own files directly in it stays the user's). */
static int composer_path(const char *path)
{
	const char *c, *p = path, *v = NULL;
	size_t n;
	int after = 0;

	for (; (c = comp(p, &n)); p = c + n) {
		if (v) {
			after++;
			if ((after == 1 && c[n] == '/' && comp_is(c, n, "composer")) ||
			    (after == 1 && !c[n] && comp_is(c, n, "autoload.php")) || after == 3)
				return 1;
		}
		if (comp_is(c, n, "vendor") && c[n] == '/') {
			v = c;
			after = 0;
		}
	}
	return 0;
}

int sp_frame_is_library(const struct sp_frame *f)
{
	/* Ruby's and PHP's frames (module "ruby", "php"): the interpreter's
	 * own ("<cfunc>", "<internal:kernel>", "<internal>"), gems and
	 * /usr/lib/ruby (installed_path, system_path), /usr/share (Debian's
	 * Ruby libraries and gems, PEAR and PHP libraries in /usr/share/php),
	 * Composer's vendor/ */
	if (f->py && (!strcmp(f->module, "ruby") || !strcmp(f->module, "php")))
		return f->file[0] == '<' || installed_path(f->file) || system_path(f->file) ||
		       !strncmp(f->file, "/usr/share/", 11) || composer_path(f->file);
	if (f->py)
		return !strncmp(f->file, "<frozen ", 8) || installed_path(f->file) ||
		       system_path(f->file);
	if (system_path(f->module) || installed_path(f->module) || interpreter_module(f->module) ||
	    !strncmp(f->module, "[vdso]", 6) || !strncmp(sp_basename(f->module), "linux-vdso", 10))
		return 1;
	return strcmp(f->file, "??") &&
	       (system_path(f->file) || installed_path(f->file) || go_library_file(f->file));
}

char *sp_where(char *buf, size_t len, const char *function, const char *file, int line,
	       const char *module, uint64_t offset)
{
	if (strcmp(file, "??"))
		snprintf(buf, len, "%s (%s:%d)", function, file, line);
	else if (!module || !*module || !strcmp(module, "??")) /* in no module we know */
		snprintf(buf, len, "%s (%s)", function, "??");
	else if (offset)
		snprintf(buf, len, "%s (%s+0x%llx)", function, sp_basename(module),
			 (unsigned long long)offset);
	else
		snprintf(buf, len, "%s (%s)", function, sp_basename(module));
	return buf;
}

static int unknown(const struct sp_frame *f);

/* Python frames of the sqlite3 package (dbapi2.py's wrappers) are never
 * the origin either. */
static int py_skip(const struct sp_frame *f)
{
	return !fnmatch("*/sqlite3/*.py", f->file, 0) || !strcmp(f->function, "??");
}

/* libc's and the dynamic loader's own frames: at the root of a stack they
 * are the process's and the threads' start code (_start ->
 * __libc_start_main -> __libc_start_call_main -> main; clone3 ->
 * start_thread -> the thread's function), which never issued a query. */
static int start_code(const struct sp_frame *f)
{
	const char *b = sp_basename(f->module);

	return !f->py && (!strncmp(b, "libc.so", 7) || !strncmp(b, "libc-", 5) ||
			  !strncmp(b, "libc.musl", 9) || !strncmp(b, "ld-linux", 8) ||
			  !strncmp(b, "ld-musl", 7) || !strncmp(b, "libpthread", 10) ||
			  !strcmp(f->function, "_start"));
}

/*
 * The site of a stack: its first frame, from the leaf up, outside SQLite,
 * the profiler, the user's --skip patterns and, when the stack has a frame
 * of the program's own code, outside installed libraries (the way Sentry
 * marks frames in-app); *lib gets the site without the library rule
 * (--all-frames; the JSON's library_site). A stack holding Python frames
 * takes the first Python frame outside the sqlite3 package and --skip
 * (which match Python functions and file paths too): the line of the
 * program, not the interpreter's C code; when there is none, the native
 * rule. Frames of the start code at the stack's root (start_code) are
 * never a site: skipping every frame of a program leaves its queries
 * unattributed rather than credited to __libc_start_call_main. -1: none.
 */
static int stack_site(const struct sp_stk *s, const char *const *skip, const struct sqlite_mods *m,
		      int *lib)
{
	uint32_t i, end = s->nframes;
	int first = -1, app = -1;

	for (i = 0; i < s->nframes; i++) {
		const struct sp_frame *f = &s->frames[i];

		if (f->py && !py_skip(f) && !user_skip(f, skip)) {
			if (first < 0)
				first = (int)i;
			if (!sp_frame_is_library(f)) {
				app = (int)i;
				break;
			}
		}
	}
	if (first < 0) {
		/* the root's start code, and the frames passed over anyway
		 * around it (a stripped program's own _start) */
		while (end > 0 && !s->frames[end - 1].py &&
		       (start_code(&s->frames[end - 1]) || builtin_skip(&s->frames[end - 1], m) ||
			user_skip(&s->frames[end - 1], skip) || unknown(&s->frames[end - 1])))
			end--;
		for (i = 0; i < end; i++) {
			const struct sp_frame *f = &s->frames[i];

			if (f->py || builtin_skip(f, m) || user_skip(f, skip) || unknown(f))
				continue;
			if (first < 0)
				first = (int)i;
			if (!sp_frame_is_library(f)) {
				app = (int)i;
				break;
			}
		}
	}
	*lib = first;
	return all_frames || app < 0 ? first : app;
}

/* A frame is unknown when its pc lies in no module we know. A frame in a
 * known module without symbols is a site of its own ("??" in that
 * module): passing over it would credit an outer caller - in a stripped
 * program, main or libc - with a query it did not issue. */
static int unknown(const struct sp_frame *f)
{
	return !strcmp(f->module, "??") || !*f->module;
}

/* A site without symbols is told apart by its offset; a named function
 * without lines is one site however many of its pcs call SQLite. */
/*
 * A stack that a worker thread ran on behalf of code on another thread
 * (aiosqlite's connection thread, npm sqlite3's libuv pool, a
 * ThreadPoolExecutor): a thread's stack (its root is a thread's start,
 * libc's start_thread/clone or Python's threading bootstrap, not the
 * process's __libc_start_main) on which no frame is the program's own
 * code, so the site is the worker's code and the caller, on another
 * thread, is on no stack we take. A thread whose own function (the
 * program's) issues the queries is not one: its site is that function.
 * The worker is the thread's outermost frame past the start code (and
 * past threading.py's and the interpreter's C frames in a Python
 * thread, libuv's uv__thread_start). Returns it, or NULL when the stack
 * is not a worker's.
 */
const struct sp_frame *sp_stack_worker(const struct sp_stk *s)
{
	const struct sp_frame *w = NULL;
	int start = 0, main_root = 0, py_thread = 0, py = 0;
	uint32_t i;

	for (i = 0; s && i < s->nframes; i++) {
		const struct sp_frame *f = &s->frames[i];
		const char *b = sp_basename(f->module);

		if (f->py) {
			py = 1;
			if (!strcmp(sp_basename(f->file), "threading.py") &&
			    strstr(f->function, "_bootstrap"))
				py_thread = 1;
			if (py_skip(f) || sp_frame_is_library(f))
				continue;
			return NULL; /* the program's own Python code */
		}
		if (start_code(f)) {
			start = 1;
			main_root |= !strncmp(f->function, "__libc_start", 12) ||
				     !strcmp(f->function, "_start");
			continue;
		}
		if (unknown(f) || sp_is_profiler_module(f->module) ||
		    !strncmp(b, "libsqlite3.so", 13) || sp_frame_is_library(f))
			continue;
		if (!py)
			return NULL; /* the program's own native code */
	}
	if (!(py_thread || (start && !main_root)))
		return NULL;
	for (i = s->nframes; i-- > 0;) {
		const struct sp_frame *f = &s->frames[i];

		if (start_code(f) || unknown(f) || (py && !f->py) ||
		    (f->py && !strcmp(sp_basename(f->file), "threading.py")) ||
		    !strcmp(f->function, "uv__thread_start"))
			continue;
		w = f;
		break;
	}
	return w;
}

static uint64_t site_offset(const struct sp_frame *f)
{
	return strcmp(f->function, "??") ? 0 : f->offset;
}

static uint64_t site_hash(const struct sp_frame *f)
{
	uint64_t h[5] = { sp_hash_bytes(f->function, strlen(f->function)),
			  sp_hash_bytes(f->file, strlen(f->file)),
			  sp_hash_bytes(f->module, strlen(f->module)), (uint64_t)(int64_t)f->line,
			  site_offset(f) };

	return sp_hash_bytes(h, sizeof(h));
}

/* The site of frame f: found through a hash of its five parts (a frame
 * without symbols is told apart by its offset in its module), the next
 * key tried on a collision (a linear search over the sites made 40,000
 * sites cost 0.8 G string compares). */
static int site_intern(struct sp_attrib *a, const struct sp_frame *f)
{
	uint64_t k[2] = { site_hash(f), 0 };
	int created, *ix;

	for (;; k[1]++) {
		const struct sp_site *s;

		ix = hmap_get(&a->site_idx, k, 1, &created);
		if (!ix)
			return -2;
		if (created)
			break;
		s = &a->sites[*ix];
		if (s->line == f->line && !strcmp(s->function, f->function) &&
		    s->offset == site_offset(f) && !strcmp(s->file, f->file) &&
		    !strcmp(s->module, f->module))
			return *ix;
	}
	if (SP_GROW(a->sites, a->sites_cap, a->nsites + 1, 64) < 0)
		return -2;
	a->sites[a->nsites] =
		(struct sp_site){ f->function, f->file, f->module, f->line, site_offset(f) };
	*ix = (int)a->nsites;
	return (int)a->nsites++;
}

struct qkey {
	int64_t fp_id;
	int64_t kind_exec;
};

struct ckey {
	int64_t fp_id;
	int64_t kind_exec;
	uint64_t pid, pc;
};

/* One row of stack_samples, read once for both of its uses (the samples
 * of each caller, then those of each site: two passes of SQLite over
 * 388,000 rows and two look-ups of the stack and caller a row before),
 * with its stack and its leaf caller found once. */
struct srow {
	int64_t fp_id, kind_exec;
	uint64_t pid, stack_id;
	const struct sp_stk *sk;   /* NULL: no such stack */
	struct sp_acaller *caller; /* its leaf's exact counts, NULL: none */
	struct sp_est_in in;       /* rows and vm_steps are the row's too */
};

/* One row of the callers table: its key and its totals */
struct sp_callerv {
	struct ckey k;
	struct sp_acaller c;
};

/* The order of callers' groups in the writer's profile: fp_id ascending,
 * then "exec" (kind_exec 1) before "stmt" (the kind column's text order) */
static int group_cmp(const struct ckey *a, int64_t fp_id, int64_t kind_exec)
{
	if (a->fp_id != fp_id)
		return a->fp_id < fp_id ? -1 : 1;
	return a->kind_exec == kind_exec ? 0 : a->kind_exec > kind_exec ? -1 : 1;
}

/* 1 when v (n rows) is in the writer's order, each query's callers
 * together, at most 64 of them and no key twice: found then by a search
 * and a look at the query's few (a map of 371,799 keys was a cache miss a
 * look-up at 200,000 fingerprints); 0 for the map. */
static int callers_grouped(const struct sp_callerv *v, size_t n)
{
	size_t i, start = 0;

	for (i = 1; i <= n; i++) {
		int c = i < n ? group_cmp(&v[i - 1].k, v[i].k.fp_id, v[i].k.kind_exec) : -1;

		if (c > 0 || (v[i - 1].k.kind_exec != 0 && v[i - 1].k.kind_exec != 1))
			return 0;
		if (c == 0)
			continue;
		if (i - start > 64)
			return 0;
		for (size_t x = start; x < i; x++)
			for (size_t y = x + 1; y < i; y++)
				if (v[x].k.pid == v[y].k.pid && v[x].k.pc == v[y].k.pc)
					return 0;
		start = i;
	}
	return 1;
}

/* The first row of callers_v at or after query {fp_id, kind_exec} in the
 * writer's order, searched from *cur (look-ups come in that order too:
 * a few steps from the last one) and left there. */
static size_t callers_lower(const struct sp_attrib *a, int64_t fp_id, int64_t kind_exec,
			    size_t *cur)
{
	const struct sp_callerv *v = a->callers_v;
	size_t n = a->ncallers_v, c = *cur < n ? *cur : n, lo, hi, step = 1;

	if (c > 0 && group_cmp(&v[c - 1].k, fp_id, kind_exec) >= 0) {
		lo = 0; /* before the cursor */
		hi = c;
	} else { /* everything before c is before the query: gallop on */
		for (lo = hi = c; hi < n && group_cmp(&v[hi].k, fp_id, kind_exec) < 0; step *= 2) {
			lo = hi + 1;
			hi += step;
		}
		if (hi > n)
			hi = n;
	}
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (group_cmp(&v[mid].k, fp_id, kind_exec) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return *cur = lo;
}

/* The exact totals of caller k, or NULL; *cur: see callers_lower */
static struct sp_acaller *caller_find(const struct sp_attrib *a, const struct ckey *k, size_t *cur)
{
	size_t i;

	if (!a->callers_v)
		return hmap_get((struct hmap *)&a->callers, k, 0, NULL);
	for (i = callers_lower(a, k->fp_id, k->kind_exec, cur);
	     i < a->ncallers_v && !group_cmp(&a->callers_v[i].k, k->fp_id, k->kind_exec); i++)
		if (a->callers_v[i].k.pid == k->pid && a->callers_v[i].k.pc == k->pc)
			return &a->callers_v[i].c;
	return NULL;
}

static int has_callers(const struct sp_attrib *a)
{
	return a->callers.count || a->ncallers_v;
}

/* Load the profile's exact per-caller counts (none in an older profile:
 * no table): read whole, kept as they are when in the writer's order,
 * else into the map (where a key twice adds up). 0, or -1 (ENOMEM or a
 * corrupt table). */
static int load_callers(sqlite3 *db, struct sp_attrib *a)
{
	struct sp_callerv *v = NULL;
	size_t n = 0, cap = 0;
	sqlite3_stmt *st;
	int rc;

	if (sqlite3_prepare_v2(db, "SELECT COUNT(*) FROM callers", -1, &st, NULL) != SQLITE_OK)
		return 0; /* an older profile */
	/* sized once: each doubling of 371,799 callers copied them */
	if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int64(st, 0) > 0 &&
	    SP_GROW(v, cap, (size_t)sqlite3_column_int64(st, 0), 64) < 0) {
		sqlite3_finalize(st);
		return -1;
	}
	sqlite3_finalize(st);
	if (sqlite3_prepare_v2(db, "SELECT fp_id, kind, pid, pc, count, total_ns FROM callers", -1,
			       &st, NULL) != SQLITE_OK) {
		free(v);
		return -1;
	}
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		const char *kind = (const char *)sqlite3_column_text(st, 1);

		if (SP_GROW(v, cap, n + 1, 64) < 0) {
			rc = SQLITE_NOMEM;
			break;
		}
		v[n].k = (struct ckey){ sqlite3_column_int64(st, 0), sp_qkind_parse(kind),
					(uint64_t)sqlite3_column_int64(st, 2),
					(uint64_t)sqlite3_column_int64(st, 3) };
		memset(&v[n].c, 0, sizeof(v[n].c));
		v[n].c.count = (double)sqlite3_column_int64(st, 4);
		v[n].c.ns = (double)sqlite3_column_int64(st, 5);
		n++;
	}
	sqlite3_finalize(st);
	if (rc == SQLITE_DONE && n && callers_grouped(v, n)) {
		a->callers_v = v;
		a->ncallers_v = n;
		return 0;
	}
	if (rc == SQLITE_DONE && hmap_reserve(&a->callers, n) < 0)
		rc = SQLITE_NOMEM;
	for (size_t i = 0; rc == SQLITE_DONE && i < n; i++) {
		struct sp_acaller *c = hmap_get(&a->callers, &v[i].k, 1, NULL);

		if (!c) {
			rc = SQLITE_NOMEM;
			break;
		}
		c->count += v[i].c.count;
		c->ns += v[i].c.ns;
	}
	free(v);
	return rc == SQLITE_DONE ? 0 : -1;
}

/* What each query hands out: the callers some stack has as its leaf
 * (sums of whole numbers of executions and ns: the same in any order) */
static int callers_exact_q(struct sp_attrib *a)
{
	size_t it = 0, i = 0;
	const struct ckey *k;
	struct sp_acaller *c;

	for (;;) {
		struct qkey qk;
		double *q;

		if (a->callers_v) {
			if (i == a->ncallers_v)
				break;
			k = &a->callers_v[i].k;
			c = &a->callers_v[i++].c;
		} else if (!(c = hmap_next(&a->callers, &it, (const void **)&k))) {
			break;
		}
		if (!c->samples)
			continue;
		qk = (struct qkey){ k->fp_id, (int)k->kind_exec };
		if (!(q = hmap_get(&a->exact_q, &qk, 1, NULL)))
			return -1;
		q[0] += c->count;
		q[1] += c->ns;
	}
	return 0;
}

/* The samples of the stacks each caller is the leaf of (rows: every
 * row of stack_samples), then what each query hands out. Sets each row's
 * caller. 0, or -1 on ENOMEM. */
static int callers_samples(struct sp_attrib *a, struct srow *rows, size_t n)
{
	size_t cur = 0;

	if (!has_callers(a))
		return 0;
	for (size_t i = 0; i < n; i++) {
		struct srow *r = &rows[i];
		struct sp_acaller *c;
		struct ckey ck;

		if (!r->sk)
			continue;
		ck = (struct ckey){ r->fp_id, r->kind_exec, r->pid, r->sk->leaf_pc };
		c = r->caller = caller_find(a, &ck, &cur);
		if (!c)
			continue;
		c->samples += r->in.samples;
		c->sample_ns += r->in.sample_ns;
		c->random_samples += r->in.random_samples;
		c->random_ns += r->in.random_ns;
	}
	return callers_exact_q(a);
}

/* The exact part of a row with samples *row whose leaf caller is c (see
 * sp_attrib_exact_row). */
static void exact_share(const struct sp_acaller *c, const struct sp_est_in *row, double *count,
			double *ns)
{
	double share, tshare;

	*count = *ns = 0;
	if (!c || !c->samples)
		return;
	if (c->random_samples) {
		share = (double)row->random_samples / (double)c->random_samples;
		tshare = c->random_ns ? (double)row->random_ns / (double)c->random_ns : share;
	} else {
		share = (double)row->samples / (double)c->samples;
		tshare = c->sample_ns ? (double)row->sample_ns / (double)c->sample_ns : share;
	}
	*count = share * c->count;
	*ns = tshare * c->ns;
}

void sp_attrib_exact_row(const struct sp_attrib *a, int64_t fp_id, int kind_exec, uint64_t pid,
			 uint64_t stack_id, const struct sp_est_in *row, double *count, double *ns)
{
	struct stkey sk = { pid, stack_id };
	const struct sp_stk *s;
	struct ckey k;
	size_t cur = 0;

	*count = *ns = 0;
	if (!has_callers(a))
		return;
	s = hmap_get((struct hmap *)&a->stacks, &sk, 0, NULL);
	if (!s)
		return;
	k = (struct ckey){ fp_id, kind_exec, pid, s->leaf_pc };
	exact_share(caller_find(a, &k, &cur), row, count, ns);
}

int sp_qsite_exact(const struct sp_qsite *q, uint64_t query_count)
{
	if (q->samples == query_count)
		return 1;
	return q->exact_count > 0 && q->est_count - q->exact_count < 0.5 &&
	       q->exact_count - q->est_count < 0.5;
}

void sp_attrib_exact_q(const struct sp_attrib *a, int64_t fp_id, int kind_exec, double *count,
		       double *ns)
{
	struct qkey qk = { fp_id, kind_exec };
	const double *q = hmap_get((struct hmap *)&a->exact_q, &qk, 0, NULL);

	*count = q ? q[0] : 0;
	*ns = q ? q[1] : 0;
}

struct qskey {
	int64_t fp_id;
	int64_t kind_exec, site;
};

/* A site's place in the per-query index: its query's key and its index
 * in qs (sorted as copies: comparing through the indices read qs at
 * random, a cache miss a compare at 388,000 sites). */
struct qord_key {
	int64_t fp_id;
	int64_t kind_exec;
	size_t i;
};

static int cmp_qord(const void *pa, const void *pb)
{
	const struct qord_key *a = pa, *b = pb;

	if (a->fp_id != b->fp_id)
		return a->fp_id < b->fp_id ? -1 : 1;
	if (a->kind_exec != b->kind_exec)
		return a->kind_exec < b->kind_exec ? -1 : 1;
	return a->i < b->i ? -1 : a->i > b->i;
}

/* A new, empty qidx and qord of a->nqs entries. 0, or -1 on ENOMEM. */
static int index_reset(struct sp_attrib *a)
{
	size_t *no;

	a->qcur_on = 0;
	hmap_free(&a->qidx);
	hmap_init(&a->qidx, sizeof(struct qkey), 2 * sizeof(size_t));
	no = realloc(a->qord, (a->nqs ? a->nqs : 1) * sizeof(*no));
	if (!no)
		return -1;
	a->qord = no;
	a->nqord = a->nqs;
	return hmap_reserve(&a->qidx, a->nqs);
}

int sp_attrib_index_runs(struct sp_attrib *a)
{
	size_t i, j;

	if (index_reset(a) < 0)
		return -1;
	for (i = 0; i < a->nqs; i = j) {
		struct qkey k = { a->qs[i].fp_id, a->qs[i].kind_exec };
		int created;
		size_t *v = hmap_get(&a->qidx, &k, 1, &created);

		if (!v)
			return -1;
		if (!created) /* a query's sites apart: the general index */
			return sp_attrib_index(a);
		for (j = i;
		     j < a->nqs && a->qs[j].fp_id == k.fp_id && a->qs[j].kind_exec == k.kind_exec;
		     j++)
			a->qord[j] = j;
		v[0] = i;
		v[1] = j - i;
	}
	return 0;
}

int sp_attrib_index(struct sp_attrib *a)
{
	struct qord_key *k;
	size_t i;
	struct qkey last = { 0, 0 };
	size_t *v = NULL;

	if (index_reset(a) < 0)
		return -1;
	k = malloc((a->nqs ? a->nqs : 1) * sizeof(*k));
	if (!k)
		return -1;
	for (i = 0; i < a->nqs; i++)
		k[i] = (struct qord_key){ a->qs[i].fp_id, a->qs[i].kind_exec, i };
	sp_qsort(k, a->nqs, sizeof(*k), cmp_qord);
	for (i = 0; i < a->nqs; i++) {
		a->qord[i] = k[i].i;
		if (!v || k[i].fp_id != last.fp_id || k[i].kind_exec != last.kind_exec) {
			/* a query's sites are adjacent: one look-up each */
			last = (struct qkey){ k[i].fp_id, k[i].kind_exec };
			if (!(v = hmap_get(&a->qidx, &last, 1, NULL))) {
				free(k);
				return -1;
			}
			v[0] = i;
		}
		v[1]++;
	}
	free(k);
	return 0;
}

/* 1 when site q is query {fp_id, kind_exec}'s */
static int qsite_of(const struct sp_qsite *q, int64_t fp_id, int kind_exec)
{
	return q->fp_id == fp_id && q->kind_exec == kind_exec;
}

/* Each query's sites are one run in qord, so the run after the last
 * answer's is the next query's whole: look-ups in qord's order (the
 * report's queries, their sites grouped in that order) take that run and
 * no look-up in qidx (a cache miss each at 186,000 queries). */
const size_t *sp_attrib_query_sites(const struct sp_attrib *a, int64_t fp_id, int kind_exec,
				    size_t *n)
{
	struct sp_attrib *c = (struct sp_attrib *)a; /* the cursor only */
	struct qkey k = { fp_id, kind_exec };
	size_t p = a->qcur_on ? a->qcur_first + a->qcur_n : 0, e = p;
	const size_t *v;

	if (a->qcur_on && a->qcur_fp == fp_id && a->qcur_kx == kind_exec) {
		*n = a->qcur_n;
		return a->qord + a->qcur_first;
	}
	while (e < a->nqord && qsite_of(&a->qs[a->qord[e]], fp_id, kind_exec))
		e++;
	if (e > p) {
		c->qcur_first = p;
		c->qcur_n = e - p;
	} else if ((v = hmap_get((struct hmap *)&a->qidx, &k, 0, NULL))) {
		c->qcur_first = v[0];
		c->qcur_n = v[1];
	} else {
		*n = 0;
		return NULL;
	}
	c->qcur_fp = fp_id;
	c->qcur_kx = kind_exec;
	c->qcur_on = 1;
	*n = a->qcur_n;
	return a->qord + a->qcur_first;
}

static char *col(sqlite3_stmt *st, int i)
{
	const unsigned char *t = sqlite3_column_text(st, i);

	return strdup(t ? (const char *)t : "??");
}

static const char *debug_dirs;

void sp_attrib_set_debug_dir(const char *dirs)
{
	debug_dirs = dirs && *dirs ? dirs : NULL;
}

static int hexval(int c)
{
	return c >= '0' && c <= '9'   ? c - '0'
	       : c >= 'a' && c <= 'f' ? c - 'a' + 10
	       : c >= 'A' && c <= 'F' ? c - 'A' + 10
				      : -1;
}

/*
 * --debug-dir: replace each unknown native frame of a known module by what
 * the symbolizer finds now (its inline chain: several frames). The module's
 * build-id and bias come from the newest modules row of the process whose
 * range holds the pc; a build-id that does not match the file found is
 * never used (sym_lookup). Returns 0, or -1 on ENOMEM.
 */
static int resymbolize(sqlite3 *db, struct sp_attrib *a)
{
	struct sym_ctx *sym;
	sqlite3_stmt *st = NULL;
	size_t it;
	struct sp_stk *s;
	const struct stkey *k;
	int ret = 0;

	if (!debug_dirs)
		return 0;
	if (!(sym = sym_open()))
		return -1;
	sym_set_debug_path(sym, debug_dirs);
	if (sqlite3_prepare_v2(db,
			       "SELECT build_id, bias FROM modules WHERE pid = ?1 AND path = ?2"
			       " AND lo <= ?3 AND ?3 < hi ORDER BY generation DESC LIMIT 1",
			       -1, &st, NULL) != SQLITE_OK) {
		sym_close(sym);
		return 0; /* no modules table: nothing to look up */
	}
	for (it = 0; (s = hmap_next(&a->stacks, &it, (const void **)&k));) {
		for (uint32_t i = 0; i < s->nframes; i++) {
			struct sp_frame *f = &s->frames[i];
			const struct sym_result *res = NULL;
			unsigned char bid[64];
			size_t nbid = 0;
			uint64_t bias = 0;
			int found = 0;

			if (f->py || strcmp(f->function, "??") || !strcmp(f->module, "??"))
				continue;
			sqlite3_reset(st);
			sqlite3_bind_int64(st, 1, (sqlite3_int64)k->pid);
			sqlite3_bind_text(st, 2, f->module, -1, SQLITE_STATIC);
			sqlite3_bind_int64(st, 3, (sqlite3_int64)f->pc);
			if (sqlite3_step(st) == SQLITE_ROW) {
				const unsigned char *h = sqlite3_column_text(st, 0);

				for (; h && h[0] && h[1] && nbid < sizeof(bid); h += 2) {
					int hi = hexval(h[0]), lo = hexval(h[1]);

					if (hi < 0 || lo < 0)
						break;
					bid[nbid++] = (unsigned char)(hi << 4 | lo);
				}
				bias = (uint64_t)sqlite3_column_int64(st, 1);
				found = 1;
			}
			if (!found)
				continue;
			if (sym_lookup(sym, f->module, nbid ? bid : NULL, nbid, bias, f->pc, 1,
				       &res) < 0) {
				ret = -1;
				break;
			}
			if (!res || res->nframes < 1 || !strcmp(res->frames[0].function, "??"))
				continue;
			/* make room for the inline chain: nframes - 1 more */
			if (res->nframes > 1) {
				uint32_t add = (uint32_t)res->nframes - 1;
				struct sp_frame *nf =
					realloc(s->frames, (s->nframes + add) * sizeof(*nf));

				if (!nf) {
					ret = -1;
					break;
				}
				s->frames = nf;
				f = &s->frames[i];
				memmove(f + res->nframes, f + 1, (s->nframes - i - 1) * sizeof(*f));
				for (uint32_t j = 1; j <= add; j++) {
					f[j] = f[0];
					f[j].module = strdup(f[0].module);
					f[j].function = NULL;
					f[j].file = NULL;
				}
				s->nframes += add;
			}
			for (int j = 0; j < res->nframes; j++) {
				free(f[j].function);
				free(f[j].file);
				f[j].function = strdup(res->frames[j].function);
				f[j].file = strdup(res->frames[j].file);
				f[j].line = res->frames[j].line;
				f[j].inlined = res->frames[j].inlined;
				if (!f[j].module || !f[j].function || !f[j].file)
					ret = -1;
			}
			if (ret < 0)
				break;
			i += (uint32_t)res->nframes - 1;
		}
		if (ret < 0)
			break;
	}
	sqlite3_finalize(st);
	sym_close(sym);
	return ret;
}

/* The loaders' results: 0, or what failed. */
enum { LOAD_OK = 0, LOAD_NOMEM = -1, LOAD_SQL = -2 };

/* What failed into err, before the statements are finalized (a finalize
 * resets the connection's message); rc passes through. */
static int load_fail(sqlite3 *db, int rc, char *err, size_t errlen)
{
	if (rc == LOAD_NOMEM)
		snprintf(err, errlen, "out of memory");
	else if (rc == LOAD_SQL)
		snprintf(err, errlen, "corrupt profile: %s", sqlite3_errmsg(db));
	return rc;
}

/* A stripped frame's offset in its module: pc less the module's bias
 * (from the module map, the newest generation holding the pc), looked
 * up once per {pid, pc, module} (a return address in libsqlite3 or libc
 * is in every stack). *ms: the look-up, prepared at the first use. */
static int frame_offset(sqlite3 *db, sqlite3_stmt **ms, struct hmap *offs, int64_t pid,
			struct sp_frame *f)
{
	uint64_t ok[3] = { (uint64_t)pid, f->pc, sp_hash_bytes(f->module, strlen(f->module)) };
	int created;
	uint64_t *memo = hmap_get(offs, ok, 1, &created);

	if (!memo)
		return LOAD_NOMEM;
	if (!created) {
		f->offset = *memo;
		return LOAD_OK;
	}
	if (!*ms && sqlite3_prepare_v2(db,
				       "SELECT bias FROM modules WHERE pid = ?1 AND path = ?2"
				       " AND lo <= ?3 AND ?3 < hi ORDER BY generation DESC"
				       " LIMIT 1",
				       -1, ms, NULL) != SQLITE_OK)
		*ms = NULL;
	if (*ms) {
		sqlite3_bind_int64(*ms, 1, pid);
		sqlite3_bind_text(*ms, 2, f->module, -1, SQLITE_STATIC);
		sqlite3_bind_int64(*ms, 3, (int64_t)f->pc);
		if (sqlite3_step(*ms) == SQLITE_ROW)
			f->offset = f->pc - (uint64_t)sqlite3_column_int64(*ms, 0);
		sqlite3_reset(*ms);
	}
	*memo = f->offset;
	return LOAD_OK;
}

/* Every stack's frames, in order, into a->stacks. */
static int load_frames(sqlite3 *db, struct sp_attrib *a, char *err, size_t errlen)
{
	sqlite3_stmt *st = NULL, *ms = NULL;
	struct hmap offs; /* {pid, pc, module hash} -> offset */
	int rc, ret = LOAD_SQL;

	hmap_init(&offs, 3 * sizeof(uint64_t), sizeof(uint64_t));
	if (sqlite3_prepare_v2(
		    db,
		    "SELECT pid, stack_id, module, function, file, line, inlined, pc FROM frames"
		    " ORDER BY pid, stack_id, idx",
		    -1, &st, NULL) != SQLITE_OK)
		goto out;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct stkey k = { (uint64_t)sqlite3_column_int64(st, 0),
				   (uint64_t)sqlite3_column_int64(st, 1) };
		struct sp_stk *s = hmap_get(&a->stacks, &k, 1, NULL);
		struct sp_frame *f;

		ret = LOAD_NOMEM;
		if (!s)
			goto out;
		if ((s->nframes & (s->nframes - 1)) == 0) { /* grow at powers of two */
			struct sp_frame *nf =
				realloc(s->frames, (s->nframes ? s->nframes * 2 : 1) * sizeof(*nf));

			if (!nf)
				goto out;
			s->frames = nf;
		}
		if (!s->nframes)
			s->leaf_pc = (uint64_t)sqlite3_column_int64(st, 7);
		f = &s->frames[s->nframes++];
		f->module = col(st, 2);
		f->function = col(st, 3);
		f->file = col(st, 4);
		f->line = sqlite3_column_int(st, 5);
		f->inlined = sqlite3_column_int(st, 6);
		f->py = sqlite3_column_int64(st, 7) < 0;
		f->pc = (uint64_t)sqlite3_column_int64(st, 7);
		if (!f->module || !f->function || !f->file)
			goto out;
		f->offset = 0;
		if (!f->py && !strcmp(f->file, "??") && !unknown(f) &&
		    frame_offset(db, &ms, &offs, sqlite3_column_int64(st, 0), f) < 0)
			goto out;
		ret = LOAD_SQL;
	}
	ret = rc == SQLITE_DONE ? LOAD_OK : LOAD_SQL;
out:
	load_fail(db, ret, err, errlen);
	sqlite3_finalize(ms);
	sqlite3_finalize(st);
	hmap_free(&offs);
	return ret;
}

/* The SQLite modules (a profile without the column has none). */
static int load_sqlite_mods(sqlite3 *db, struct sqlite_mods *mods, char *err, size_t errlen)
{
	sqlite3_stmt *st = NULL;
	int rc, ret = LOAD_OK;

	if (sqlite3_prepare_v2(db,
			       "SELECT path, max(sqlite) FROM modules WHERE sqlite IN (1, 2)"
			       " AND path IS NOT NULL GROUP BY path",
			       -1, &st, NULL) != SQLITE_OK)
		return LOAD_OK;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		char **np = realloc(mods->path, (mods->n + 1) * sizeof(*np));
		int *nk;

		if (np)
			mods->path = np;
		nk = np ? realloc(mods->kind, (mods->n + 1) * sizeof(*nk)) : NULL;
		if (!nk) {
			ret = LOAD_NOMEM;
			break;
		}
		mods->kind = nk;
		mods->path[mods->n] = col(st, 0);
		if (!mods->path[mods->n]) {
			ret = LOAD_NOMEM;
			break;
		}
		mods->kind[mods->n++] = sqlite3_column_int(st, 1);
	}
	if (ret == LOAD_OK && rc != SQLITE_DONE)
		ret = LOAD_SQL;
	load_fail(db, ret, err, errlen);
	sqlite3_finalize(st);
	return ret;
}

/* One row of stack_samples into its {query, kind, site} entry. */
/* Where the sampled executions of row r go, in qs: its query's site
 * (site), found in the group of r's query (from *group: the writer's
 * rows come a query at a time) or, with grouped 0, through qsi; a new one
 * at the end. 0, or LOAD_NOMEM. */
static int sample_slot(struct sp_attrib *a, struct hmap *qsi, int grouped, size_t *group,
		       const struct srow *r, int site, size_t *slot)
{
	struct qskey qk = { r->fp_id, r->kind_exec, site };
	size_t *jp = NULL;
	int created = 1;

	if (grouped) {
		if (*group >= a->nqs || a->qs[*group].fp_id != r->fp_id ||
		    a->qs[*group].kind_exec != (int)r->kind_exec)
			*group = a->nqs;
		for (*slot = *group; *slot < a->nqs; (*slot)++)
			if (a->qs[*slot].site == site)
				return LOAD_OK;
	} else {
		if (!(jp = hmap_get(qsi, &qk, 1, &created)))
			return LOAD_NOMEM;
		if (!created) {
			*slot = *jp;
			return LOAD_OK;
		}
	}
	if (SP_GROW(a->qs, a->qs_cap, a->nqs + 1, 64) < 0)
		return LOAD_NOMEM;
	*slot = a->nqs;
	if (jp)
		*jp = a->nqs;
	memset(&a->qs[a->nqs], 0, sizeof(a->qs[a->nqs]));
	a->qs[a->nqs].fp_id = r->fp_id;
	a->qs[a->nqs].kind_exec = (int)r->kind_exec;
	a->qs[a->nqs].site = site;
	a->qs[a->nqs].lib_site = r->sk ? r->sk->lib_site : -1;
	a->qs[a->nqs].pid = r->pid;
	a->qs[a->nqs].stack_id = r->stack_id;
	a->nqs++;
	return LOAD_OK;
}

static int add_sample_row(struct sp_attrib *a, struct hmap *qsi, int grouped, size_t *group,
			  const struct srow *r)
{
	int site = r->sk ? r->sk->site : -1;
	size_t j;
	double ec, en;

	if (sample_slot(a, qsi, grouped, group, r, site, &j) < 0)
		return LOAD_NOMEM;
	a->qs[j].samples += r->in.samples;
	a->qs[j].sample_ns += r->in.sample_ns;
	a->qs[j].random_samples += r->in.random_samples;
	a->qs[j].random_ns += r->in.random_ns;
	a->qs[j].sample_rows += r->in.rows;
	a->qs[j].sample_vm_steps += r->in.vm_steps;
	exact_share(r->caller, &r->in, &ec, &en);
	a->qs[j].exact_count += ec;
	a->qs[j].exact_ns += en;
	if (site < 0)
		a->unattributed_samples += r->in.samples;
	return LOAD_OK;
}

/* 1 when rows come a query at a time (each {fp_id, kind} in one run, as
 * the writer orders stack_samples) and no query has more than 32 sites,
 * so that a query's sites are found by a look at its few: a map of
 * 381,462 keys was a cache miss a row at 200,000 fingerprints; else 0
 * (an older or hostile profile: the map) */
static int rows_grouped(const struct srow *rows, size_t n)
{
	size_t i, run = 0;
	int kinds = 0; /* kind_exec values seen for this fp_id: bit 1 << k */

	for (i = 0; i < n; i++) {
		const struct srow *r = &rows[i], *p = i ? &rows[i - 1] : NULL;

		if (r->kind_exec < 0 || r->kind_exec > 1)
			return 0;
		if (!p || r->fp_id != p->fp_id) {
			if (p && r->fp_id < p->fp_id)
				return 0;
			kinds = 0;
		} else if (r->kind_exec == p->kind_exec) {
			if (++run > 32)
				return 0;
			continue;
		}
		if (kinds & (1 << r->kind_exec))
			return 0;
		kinds |= 1 << r->kind_exec;
		run = 1;
	}
	return 1;
}

/* Every row of stack_samples into *rows (*n of them, malloc'd), each
 * with its stack. */
static int read_samples(sqlite3 *db, struct sp_attrib *a, struct srow **rows, size_t *n)
{
	sqlite3_stmt *st = NULL;
	size_t cap = 0;
	int rc, ret = LOAD_SQL;

	/* sized once for every row */
	if (sqlite3_prepare_v2(db, "SELECT COUNT(*) FROM stack_samples", -1, &st, NULL) ==
		    SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW) {
		sqlite3_int64 c = sqlite3_column_int64(st, 0);

		if (c > 0 && SP_GROW(*rows, cap, (size_t)c, 64) < 0)
			ret = LOAD_NOMEM;
	}
	sqlite3_finalize(st);
	st = NULL;
	if (ret == LOAD_NOMEM ||
	    sqlite3_prepare_v2(
		    db,
		    "SELECT fp_id, kind, pid, stack_id, samples, total_ns,"
		    " COALESCE(random_samples, 0), COALESCE(random_ns, 0), rows, vm_steps"
		    " FROM stack_samples",
		    -1, &st, NULL) != SQLITE_OK)
		return ret;
	ret = LOAD_OK;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct srow *r;
		struct stkey k = { (uint64_t)sqlite3_column_int64(st, 2),
				   (uint64_t)sqlite3_column_int64(st, 3) };

		if (SP_GROW(*rows, cap, *n + 1, 64) < 0) {
			ret = LOAD_NOMEM;
			break;
		}
		r = &(*rows)[(*n)++];
		r->fp_id = sqlite3_column_int64(st, 0);
		/* hostile: NULL */
		r->kind_exec = sp_qkind_parse((const char *)sqlite3_column_text(st, 1));
		r->pid = k.pid;
		r->stack_id = k.stack_id;
		r->sk = hmap_get(&a->stacks, &k, 0, NULL);
		r->caller = NULL;
		r->in = (struct sp_est_in){ (uint64_t)sqlite3_column_int64(st, 4),
					    (uint64_t)sqlite3_column_int64(st, 5),
					    (uint64_t)sqlite3_column_int64(st, 8),
					    (uint64_t)sqlite3_column_int64(st, 9),
					    (uint64_t)sqlite3_column_int64(st, 6),
					    (uint64_t)sqlite3_column_int64(st, 7) };
	}
	if (ret == LOAD_OK && rc != SQLITE_DONE)
		ret = LOAD_SQL;
	sqlite3_finalize(st);
	return ret;
}

/* The exact per-caller counts, then the sampled executions per {query,
 * kind, site}, from one read of stack_samples. */
static int load_samples(sqlite3 *db, struct sp_attrib *a, char *err, size_t errlen)
{
	struct hmap qsi; /* {fp_id, kind_exec, site} -> index in qs */
	struct srow *rows = NULL;
	size_t n = 0, group = 0;
	int ret, grouped;

	hmap_init(&qsi, sizeof(struct qskey), sizeof(size_t));
	if (load_callers(db, a) < 0)
		ret = LOAD_SQL;
	else if ((ret = read_samples(db, a, &rows, &n)) == LOAD_OK &&
		 callers_samples(a, rows, n) < 0)
		ret = LOAD_NOMEM;
	grouped = ret == LOAD_OK && rows_grouped(rows, n);
	/* sized once for at most a key a row (see load_callers) */
	if (ret == LOAD_OK && !grouped && hmap_reserve(&qsi, n) < 0)
		ret = LOAD_NOMEM;
	/* and the entries, at most one a row: each doubling was a copy into
	 * new pages, a third of report's page faults at 200,000 fingerprints
	 * (what is reserved and not used is never touched) */
	if (ret == LOAD_OK && n > a->qs_cap && SP_GROW(a->qs, a->qs_cap, n, n) < 0)
		ret = LOAD_NOMEM;
	for (size_t i = 0; ret == LOAD_OK && i < n; i++)
		ret = add_sample_row(a, &qsi, grouped, &group, &rows[i]);
	load_fail(db, ret, err, errlen);
	free(rows);
	hmap_free(&qsi);
	return ret;
}

int sp_attrib_load(sqlite3 *db, const char *const *skip, struct sp_attrib *a, char *err,
		   size_t errlen)
{
	struct sqlite_mods mods = { 0 };
	size_t it;
	struct sp_stk *s;
	int rc;

	memset(a, 0, sizeof(*a));
	hmap_init(&a->stacks, sizeof(struct stkey), sizeof(struct sp_stk));
	hmap_init(&a->site_idx, 2 * sizeof(uint64_t), sizeof(int));
	hmap_init(&a->qidx, sizeof(struct qkey), 2 * sizeof(size_t));
	hmap_init(&a->callers, sizeof(struct ckey), sizeof(struct sp_acaller));
	hmap_init(&a->exact_q, sizeof(struct qkey), 2 * sizeof(double));
	if ((rc = load_frames(db, a, err, errlen)) < 0)
		goto fail;
	if (resymbolize(db, a) < 0) {
		rc = load_fail(db, LOAD_NOMEM, err, errlen);
		goto fail;
	}
	if ((rc = load_sqlite_mods(db, &mods, err, errlen)) < 0)
		goto fail;
	/* Attribute every stack once. */
	for (it = 0; (s = hmap_next(&a->stacks, &it, NULL));) {
		int lib, at = stack_site(s, skip, &mods, &lib);

		s->site = s->lib_site = -1;
		s->worker = sp_stack_worker(s);
		if ((at >= 0 && (s->site = site_intern(a, &s->frames[at])) == -2) ||
		    (lib >= 0 && (s->lib_site = site_intern(a, &s->frames[lib])) == -2)) {
			rc = load_fail(db, LOAD_NOMEM, err, errlen);
			goto fail;
		}
	}
	if ((rc = load_samples(db, a, err, errlen)) < 0)
		goto fail;
	hmap_free(&a->site_idx);
	mods_free(&mods);
	if (sp_attrib_index_runs(a) < 0) { /* the writer keeps a query's sites together */
		snprintf(err, errlen, "out of memory");
		sp_attrib_free(a);
		return SP_ERR_NOMEM;
	}
	return 0;
fail:
	mods_free(&mods);
	sp_attrib_free(a);
	return rc == LOAD_NOMEM ? SP_ERR_NOMEM : SP_ERR_INPUT;
}

void sp_est_add(struct sp_est_in *sum, const struct sp_est_in *x)
{
	sum->samples += x->samples;
	sum->sample_ns += x->sample_ns;
	sum->rows += x->rows;
	sum->vm_steps += x->vm_steps;
	sum->random_samples += x->random_samples;
	sum->random_ns += x->random_ns;
}

void sp_estimate(const struct sp_est_in *part, const struct sp_est_in *all,
		 const struct sp_est_tot *tot, struct sp_est *out)
{
	double share, tshare;

	if (all->random_samples) {
		share = (double)part->random_samples / (double)all->random_samples;
		tshare = all->random_ns ? (double)part->random_ns / (double)all->random_ns : share;
	} else {
		share = all->samples ? (double)part->samples / (double)all->samples : 0;
		tshare = all->sample_ns ? (double)part->sample_ns / (double)all->sample_ns : share;
	}
	out->count = share * (double)tot->count;
	out->total_ns = tshare * (double)tot->total_ns;
	out->self_ns =
		tot->total_ns ? out->total_ns * ((double)tot->self_ns / (double)tot->total_ns) : 0;
	out->rows =
		(all->rows ? (double)part->rows / (double)all->rows : share) * (double)tot->rows;
	out->vm_steps = (all->vm_steps ? (double)part->vm_steps / (double)all->vm_steps : share) *
			(double)tot->vm_steps;
}

static struct sp_est_in qsite_in(const struct sp_qsite *q)
{
	return (struct sp_est_in){ q->samples,         q->sample_ns,      q->sample_rows,
				   q->sample_vm_steps, q->random_samples, q->random_ns };
}

/* Estimates for one query: see sp_estimate. */
void sp_attrib_estimate_q(struct sp_attrib *a, int64_t fp_id, int kind_exec,
			  const struct sp_est_tot *tot)
{
	sp_attrib_estimate_qw(a, fp_id, kind_exec, tot, 0, 0);
}

void sp_attrib_estimate_qw(struct sp_attrib *a, int64_t fp_id, int kind_exec,
			   const struct sp_est_tot *tot, uint64_t whole_count, uint64_t whole_ns)
{
	struct sp_est_in all = { 0 };
	size_t n, j;
	const size_t *ix = sp_attrib_query_sites(a, fp_id, kind_exec, &n);
	struct sp_est_tot rest = *tot;
	double xc, xn, fc = 1, fn = 1;

	/* the exact per-caller part first; the rest by the samples */
	sp_attrib_exact_q(a, fp_id, kind_exec, &xc, &xn);
	if (whole_count && whole_count != tot->count) { /* a window's share */
		fc = (double)tot->count / (double)whole_count;
		fn = whole_ns ? (double)tot->total_ns / (double)whole_ns : fc;
		xc *= fc;
		xn *= fn;
	}
	rest.count = xc < (double)tot->count ? tot->count - (uint64_t)(xc + 0.5) : 0;
	rest.total_ns = xn < (double)tot->total_ns ? tot->total_ns - (uint64_t)(xn + 0.5) : 0;
	rest.self_ns = tot->total_ns ? (uint64_t)((double)rest.total_ns * (double)tot->self_ns /
						  (double)tot->total_ns)
				     : 0;
	for (j = 0; j < n; j++) {
		struct sp_est_in in = qsite_in(&a->qs[ix[j]]);

		sp_est_add(&all, &in);
	}
	for (j = 0; j < n; j++) {
		struct sp_qsite *q = &a->qs[ix[j]];
		struct sp_est_in in = qsite_in(q);
		struct sp_est e;

		sp_estimate(&in, &all, &rest, &e);
		q->est_count = e.count + q->exact_count * fc;
		q->est_total_ns = e.total_ns + q->exact_ns * fn;
		q->est_self_ns =
			tot->total_ns
				? q->est_total_ns * ((double)tot->self_ns / (double)tot->total_ns)
				: 0;
		q->est_rows = e.rows;
		q->est_vm_steps = e.vm_steps;
		if (q->site < 0)
			a->unattributed_est += q->est_count;
	}
}

void sp_attrib_estimate(struct sp_attrib *a, int64_t fp_id, int kind_exec, uint64_t count,
			uint64_t total_ns, uint64_t self_ns)
{
	struct sp_est_tot tot = { count, total_ns, self_ns, 0, 0 };

	sp_attrib_estimate_q(a, fp_id, kind_exec, &tot);
}

const struct sp_stk *sp_attrib_stack(const struct sp_attrib *a, uint64_t pid, uint64_t stack_id)
{
	struct stkey k = { pid, stack_id };

	return hmap_get((struct hmap *)&a->stacks, &k, 0, NULL);
}

void sp_attrib_free(struct sp_attrib *a)
{
	size_t it = 0;
	struct sp_stk *s;

	while ((s = hmap_next(&a->stacks, &it, NULL))) {
		for (uint32_t i = 0; i < s->nframes; i++) {
			free(s->frames[i].module);
			free(s->frames[i].function);
			free(s->frames[i].file);
		}
		free(s->frames);
	}
	hmap_free(&a->stacks);
	hmap_free(&a->site_idx);
	hmap_free(&a->qidx);
	hmap_free(&a->callers);
	hmap_free(&a->exact_q);
	free(a->callers_v);
	free(a->qord);
	free(a->sites);
	free(a->qs);
	memset(a, 0, sizeof(*a));
}
