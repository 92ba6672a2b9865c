/* SPDX-License-Identifier: MIT */
/*
 * embed.c - SQLite compiled into the program (or into a module that does
 * not export it): `gcc app.c sqlite3.c`, Go's and Rust's bundled builds.
 * Its calls are direct calls inside the object, so no shim ever sees
 * them. It is found by its symbol table (.symtab, else .dynsym) and
 * profiled through SQLite's own per-connection hooks, registered through
 * its API: sqlite3_auto_extension gives every new connection our entry,
 * which sets sqlite3_trace_v2 (STMT, ROW, PROFILE) on it. The callbacks
 * feed the same query records and events the shims feed: our clock, the
 * caller's return address (a short walk out of SQLite's code) and the
 * stack walk. Nothing of the program's code or data is written.
 *
 * What it cannot do is said, once per object, through the module map
 * (SP_MODULE_EMBED_*, for record's warnings): SQLite found without
 * symbols (stripped: the file still holds SQLite's file header string),
 * a program that calls sqlite3_config itself (our registration
 * initializes SQLite, after which its configuration would fail: that
 * object is left alone), SQLite built without trace hooks, an object
 * found only after it may have opened connections, and a program that
 * installs its own trace callback or removes auto-extensions (its
 * connections then go unseen).
 *
 * Not here: the shims' libraries (exported sqlite3_* reach the shims,
 * resolve.c), query plans (none are taken for an embedded SQLite).
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sp_preload.h"

#define EMB_MAX 8    /* embedded SQLite copies per process */
#define EMB_SLOTS 64 /* per thread: executions in progress, by statement */
#define EMB_WALK 12  /* frames walked to leave SQLite's code */

/* The embedded library's API, by its symbols. */
struct emb_api {
	int (*auto_extension)(void (*)(void));
	int (*trace_v2)(sqlite3 *, unsigned, int (*)(unsigned, void *, void *, void *), void *);
	const char *(*sql)(sqlite3_stmt *);
	int (*stmt_status)(sqlite3_stmt *, int, int);
	sqlite3 *(*db_handle)(sqlite3_stmt *);
	sqlite3_int64 (*memory_used)(void);
};

struct emb_range {
	uintptr_t lo, hi;
};

struct emb {
	uintptr_t base; /* load bias (dlpi_addr): the object's key */
	struct emb_api api;
	struct emb_range *r; /* SQLite's own code, sorted, merged */
	size_t nr;
	unsigned flags; /* SP_MODULE_* for the module map */
};

static struct emb embs[EMB_MAX];
static atomic_int nembs; /* published after the entry is filled */
/* objects looked at (hooked or not), by load bias: looked at once */
#define EMB_SEEN_MAX 512
static uintptr_t seen[EMB_SEEN_MAX];
static size_t nseen;
static pthread_mutex_t scan_lock = PTHREAD_MUTEX_INITIALIZER;
static int startup_done;

/* ---- SQLite's code: is a pc in it? ---- */

static int in_sqlite(const struct emb *e, uintptr_t pc)
{
	size_t lo = 0, hi = e->nr;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (pc < e->r[mid].lo)
			hi = mid;
		else if (pc >= e->r[mid].hi)
			lo = mid + 1;
		else
			return 1;
	}
	return 0;
}

/* Shell sort by lo (no malloc, no qsort: runs in the constructor). */
static void ranges_sort(struct emb_range *r, size_t n)
{
	static const size_t gaps[] = { 701, 301, 132, 57, 23, 10, 4, 1 };

	for (size_t g = 0; g < sizeof(gaps) / sizeof(gaps[0]); g++)
		for (size_t i = gaps[g]; i < n; i++) {
			struct emb_range v = r[i];
			size_t j = i;

			for (; j >= gaps[g] && r[j - gaps[g]].lo > v.lo; j -= gaps[g])
				r[j] = r[j - gaps[g]];
			r[j] = v;
		}
}

/* Merge ranges that touch or are apart by alignment padding only. */
static size_t ranges_merge(struct emb_range *r, size_t n)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++) {
		if (k && r[i].lo <= r[k - 1].hi + 15) {
			if (r[i].hi > r[k - 1].hi)
				r[k - 1].hi = r[i].hi;
		} else {
			r[k++] = r[i];
		}
	}
	return k;
}

/* ---- reading the object's file ---- */

struct elf_file {
	const uint8_t *p;
	size_t size;
};

static int file_map(const char *path, struct elf_file *f)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	void *p;

	f->p = NULL;
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) != 0 || st.st_size < (off_t)sizeof(Elf64_Ehdr)) {
		close(fd);
		return -1;
	}
	p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		return -1;
	f->p = p;
	f->size = (size_t)st.st_size;
	return 0;
}

/*
 * Does the file at path have a section of type (SHT_SYMTAB, or SHT_DYNSYM
 * too when dynsym) of symbol-sized entries? Read with pread (its ELF
 * header and section headers), not mapped: a loaded object without one
 * (every stripped system library) has nothing file_map would find, and
 * here mapping a file, touching its section headers and unmapping it cost
 * 300-500 us an object (8 objects of the sqlite3 shell at every start),
 * reading the same bytes 2-4 us. 1: it has one (or cannot tell: the file
 * is mapped and read as before), 0: it has none, -1: cannot open it.
 */
static int file_has_symbols(const char *path, int dynsym)
{
	Elf64_Ehdr eh;
	Elf64_Shdr sh[16]; /* 1 KiB a read: the constructor's stack is the program's */
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc = 1;

	if (fd < 0)
		return -1;
	if (pread(fd, &eh, sizeof(eh), 0) != (ssize_t)sizeof(eh) ||
	    memcmp(eh.e_ident, ELFMAG, SELFMAG) || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_shentsize != sizeof(Elf64_Shdr))
		goto out; /* file_map's checks decide */
	rc = 0;
	for (unsigned i = 0; i < eh.e_shnum && rc == 0; i += 16) {
		unsigned n = eh.e_shnum - i < 16 ? eh.e_shnum - i : 16;
		ssize_t want = (ssize_t)(n * sizeof(Elf64_Shdr));

		if (pread(fd, sh, (size_t)want, (off_t)(eh.e_shoff + i * sizeof(Elf64_Shdr))) !=
		    want) {
			rc = 1; /* short: let file_map's checks decide */
			break;
		}
		for (unsigned k = 0; k < n; k++)
			if ((sh[k].sh_type == SHT_SYMTAB ||
			     (dynsym && sh[k].sh_type == SHT_DYNSYM)) &&
			    sh[k].sh_entsize == sizeof(Elf64_Sym))
				rc = 1;
	}
out:
	close(fd);
	return rc;
}

/* Section header i, or NULL when the file does not hold it. */
static const Elf64_Shdr *section(const struct elf_file *f, unsigned i)
{
	const Elf64_Ehdr *eh = (const void *)f->p;
	uint64_t off = eh->e_shoff + (uint64_t)i * sizeof(Elf64_Shdr);

	if (eh->e_shentsize != sizeof(Elf64_Shdr) || i >= eh->e_shnum ||
	    off + sizeof(Elf64_Shdr) > f->size)
		return NULL;
	return (const void *)(f->p + off);
}

static int section_ok(const struct elf_file *f, const Elf64_Shdr *s)
{
	return s && s->sh_type != SHT_NOBITS && s->sh_offset <= f->size &&
	       s->sh_size <= f->size - s->sh_offset;
}

/* The symbol table of type (SHT_SYMTAB or SHT_DYNSYM) and its strings. */
static int symtab(const struct elf_file *f, uint32_t type, const Elf64_Sym **sym, size_t *nsym,
		  const char **str, size_t *strsz)
{
	const Elf64_Ehdr *eh = (const void *)f->p;

	for (unsigned i = 1; i < eh->e_shnum; i++) {
		const Elf64_Shdr *s = section(f, i), *l;

		if (!s || s->sh_type != type || !section_ok(f, s) ||
		    s->sh_entsize != sizeof(Elf64_Sym))
			continue;
		l = section(f, s->sh_link);
		if (!section_ok(f, l) || l->sh_type != SHT_STRTAB)
			continue;
		*sym = (const void *)(f->p + s->sh_offset);
		*nsym = s->sh_size / sizeof(Elf64_Sym);
		*str = (const char *)(f->p + l->sh_offset);
		*strsz = l->sh_size;
		return 0;
	}
	return -1;
}

/* The table's last byte is a NUL (checked once): a name in it ends there
 * at the latest. */
static const char *sym_name(const char *str, size_t strsz, uint32_t off)
{
	return off < strsz ? str + off : "";
}

/* Does the code at run-time address a match the file's bytes there (16
 * of them)? A file replaced on disk since the object was mapped must not
 * lend its addresses: we call through them. */
static int same_code(const struct elf_file *f, const struct dl_phdr_info *info, uintptr_t a)
{
	const Elf64_Ehdr *eh = (const void *)f->p;
	uintptr_t v = a - info->dlpi_addr;

	if (eh->e_phentsize != sizeof(Elf64_Phdr) || eh->e_phoff > f->size ||
	    (size_t)eh->e_phnum * sizeof(Elf64_Phdr) > f->size - eh->e_phoff)
		return 0;
	for (unsigned i = 0; i < eh->e_phnum; i++) {
		const Elf64_Phdr *ph = (const void *)(f->p + eh->e_phoff + i * sizeof(Elf64_Phdr));

		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X) || v < ph->p_vaddr ||
		    v + 16 > ph->p_vaddr + ph->p_filesz)
			continue;
		if (ph->p_offset + (v - ph->p_vaddr) + 16 > f->size)
			return 0;
		return !memcmp((const void *)a, f->p + ph->p_offset + (v - ph->p_vaddr), 16);
	}
	return 0;
}

/* A source file of SQLite's own: sqlite3.c, sqlite3-binding.c (Go),
 * any *sqlite3*.c the amalgamation was renamed to. */
static int sqlite_file(const char *n)
{
	const char *b = strrchr(n, '/');
	size_t len;

	b = b ? b + 1 : n;
	len = strlen(b);
	return strstr(b, "sqlite3") && len > 2 && !strcmp(b + len - 2, ".c");
}

/* m[0..ml) in p[0..len): memchr for its second byte ('Q', rare in data:
 * memchr reads 32 bytes a step), then the rest compared; memmem's
 * byte-at-a-time search cost 1 instruction a byte. */
static int find_magic(const char *p, size_t len, const char *m, size_t ml)
{
	const char *end = p + len, *q = p + 1;

	if (len < ml)
		return 0;

	while (q < end && (q = memchr(q, m[1], (size_t)(end - q))) != NULL) {
		if ((size_t)(end - (q - 1)) >= ml && !memcmp(q - 1, m, ml))
			return 1;
		q++;
	}
	return 0;
}

/* SQLite's file header string, in every build (the pager's zMagicHeader):
 * where the symbols are gone, it still tells SQLite is there. */
static int has_sqlite_magic(const struct dl_phdr_info *info)
{
	static const char magic[] = "SQLite format 3"; /* with its NUL */
	/* and a name only SQLite's own code uses: file-type detectors
	 * carry the header string too (PHP's fileinfo.so, libmagic) */
	static const char temp[] = "sqlite_temp_master";
	int rodata = 0, found = 0;

	/* The string is read-only data: in a segment of its own where the
	 * linker separates code (-z separate-code, binutils' default since
	 * 2.31), so the code is not read; older objects keep it with the
	 * code, read then. A Python's 4.6 M instructions (9 % of a one-query
	 * script's) were this scan's, half of them in the code. */
	for (int pass = 0; pass < 2 && !(pass == 1 && rodata); pass++)
		for (int i = 0; i < info->dlpi_phnum; i++) {
			const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

			if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_R) ||
			    (ph->p_flags & PF_W) || !(ph->p_flags & PF_X) != !pass)
				continue;
			rodata += !pass;
			if (!(found & 1) &&
			    find_magic((const char *)(info->dlpi_addr + ph->p_vaddr), ph->p_filesz,
				       magic, sizeof(magic)))
				found |= 1;
			if (!(found & 2) &&
			    find_magic((const char *)(info->dlpi_addr + ph->p_vaddr), ph->p_filesz,
				       temp, sizeof(temp) - 1))
				found |= 2;
			if (found == 3)
				return 1;
		}
	return 0;
}

/* Does the object import sqlite3_* functions (an undefined dynamic
 * symbol)? It then uses a SQLite library, whose calls the shims see; the
 * header string in it is its own (the sqlite3 shell compares it). */
static int imports_sqlite(const struct dl_phdr_info *info)
{
	struct sp_dyn d;

	if (sp_dyn_read(info, &d) < 0)
		return 0;
	sp_dyn_count(&d);
	for (size_t i = 1; i < d.nsym; i++)
		if (d.sym[i].st_shndx == SHN_UNDEF &&
		    !strncmp(sp_dyn_name(&d, (uint32_t)i), "sqlite3_", 8))
			return 1;
	return 0;
}

/* Does code outside SQLite call (call or jmp rel32) one of targets[]
 * (0: none)? The object's executable segments, as mapped: each opcode
 * byte found by memchr, its target tested against the targets' span
 * first. Returns a bit per target called. */
static unsigned called_from_outside(const struct emb *e, const struct dl_phdr_info *info,
				    const uintptr_t *targets, int n)
{
	uintptr_t lo = UINTPTR_MAX, hi = 0;
	unsigned found = 0;

	for (int k = 0; k < n; k++)
		if (targets[k]) {
			lo = targets[k] < lo ? targets[k] : lo;
			hi = targets[k] > hi ? targets[k] : hi;
		}
	if (!hi)
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		const uint8_t *seg, *end;

		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X) || !(ph->p_flags & PF_R) ||
		    ph->p_filesz < 5)
			continue;
		seg = (const uint8_t *)(info->dlpi_addr + ph->p_vaddr);
		end = seg + ph->p_filesz - 4;
		for (int op = 0xe8; op <= 0xe9; op++) /* call, jmp (a tail call) */
			for (const uint8_t *p = seg, *q;
			     p < end && (q = memchr(p, op, (size_t)(end - p))); p = q + 1) {
				int32_t rel;
				uintptr_t to;

				memcpy(&rel, q + 1, 4);
				to = (uintptr_t)q + 5 + (intptr_t)rel;
				if (to - lo > hi - lo)
					continue;
				for (int k = 0; k < n; k++)
					if (to == targets[k] && !in_sqlite(e, (uintptr_t)q))
						found |= 1u << k;
			}
	}
	return found;
}

/* ---- the hooks ---- */

static int emb_trace(unsigned type, void *ctx, void *p, void *x);

/* One entry per copy (an auto-extension gets no argument of ours). */
static int emb_entry(int i, sqlite3 *db)
{
	struct emb *e = &embs[i];
	int saved = errno;

	e->api.trace_v2(db, SQLITE_TRACE_STMT | SQLITE_TRACE_ROW | SQLITE_TRACE_PROFILE, emb_trace,
			e);
	errno = saved;
	return SQLITE_OK;
}

#define EMB_ENTRY(i)                                                      \
	static int emb_entry##i(sqlite3 *db, char **err, const void *api) \
	{                                                                 \
		(void)err;                                                \
		(void)api;                                                \
		return emb_entry(i, db);                                  \
	}
EMB_ENTRY(0)
EMB_ENTRY(1)
EMB_ENTRY(2)
EMB_ENTRY(3)
EMB_ENTRY(4)
EMB_ENTRY(5)
EMB_ENTRY(6)
EMB_ENTRY(7)
static int (*const entries[EMB_MAX])(sqlite3 *, char **, const void *) = {
	emb_entry0, emb_entry1, emb_entry2, emb_entry3,
	emb_entry4, emb_entry5, emb_entry6, emb_entry7,
};

/*
 * Look at one object: its SQLite's API and code from its symbol table,
 * then hook it, or say why not (e->flags). late: the object was loaded
 * before we could look (dlopen'd since), so SQLite may be in use already.
 * Returns 1 when the object holds an embedded SQLite (hooked or not).
 */
static int emb_examine(struct dl_phdr_info *info, const char *path, int late, int magic,
		       int main_program)
{
	struct elf_file f;
	const Elf64_Sym *sym = NULL;
	size_t nsym = 0, strsz = 0, nr = 0, cap;
	const char *str = NULL;
	int in_file = 0, i = atomic_load(&nembs), has;
	struct emb *e;
	uintptr_t watch[6] = { 0 };
	unsigned calls;

	if (i >= EMB_MAX)
		return 0;
	e = &embs[i];
	memset(e, 0, sizeof(*e));
	e->base = info->dlpi_addr;
	/* without a symbol table the file is not mapped: nsym is 0 */
	has = file_has_symbols(path, main_program);
	f = (struct elf_file){ NULL, 0 };
	if (has < 0 || (has && file_map(path, &f) != 0))
		return 0;
	/* .symtab; else .dynsym, for the program only (a library exporting
	 * the API is the shims'; one hiding it has no such symbol there) */
	if (!f.p || memcmp(f.p, ELFMAG, SELFMAG) || f.p[EI_CLASS] != ELFCLASS64 ||
	    (symtab(&f, SHT_SYMTAB, &sym, &nsym, &str, &strsz) != 0 &&
	     (!main_program || symtab(&f, SHT_DYNSYM, &sym, &nsym, &str, &strsz) != 0)))
		nsym = 0;
	if (nsym && (!strsz || str[strsz - 1] != 0))
		nsym = 0; /* every name ends inside the table: read as is */
	cap = nsym;
	if (cap) {
		void *m = mmap(NULL, cap * sizeof(*e->r), PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		e->r = m == MAP_FAILED ? NULL : m;
	}
	for (size_t k = 1; k < nsym && e->r; k++) {
		const Elf64_Sym *s = &sym[k];
		const char *n;
		int type = ELF64_ST_TYPE(s->st_info), bind = ELF64_ST_BIND(s->st_info), named;
		uintptr_t a = info->dlpi_addr + s->st_value;

		if (type == STT_FILE) {
			in_file = sqlite_file(sym_name(str, strsz, s->st_name));
			continue;
		}
		if (type != STT_FUNC || s->st_shndx == SHN_UNDEF)
			continue;
		n = sym_name(str, strsz, s->st_name);
		named = n[0] == 's' && n[1] == 'q' && !strncmp(n, "sqlite3", 7);
		if ((bind == STB_LOCAL && in_file) || named) {
			if (s->st_size)
				e->r[nr++] = (struct emb_range){ a, a + s->st_size };
		}
		/* local too: a module's version script (local: *) makes them
		 * local, listed after an unnamed STT_FILE */
		if (!named || n[7] != '_')
			continue;
#define API(field, name)      \
	if (!strcmp(n, name)) \
		*(void **)&e->api.field = (void *)a;
		API(auto_extension, "sqlite3_auto_extension")
		API(trace_v2, "sqlite3_trace_v2")
		API(sql, "sqlite3_sql")
		API(stmt_status, "sqlite3_stmt_status")
		API(db_handle, "sqlite3_db_handle")
		API(memory_used, "sqlite3_memory_used")
#undef API
		if (!strcmp(n, "sqlite3_config"))
			watch[0] = a;
		else if (!strcmp(n, "sqlite3_shutdown"))
			watch[1] = a;
		else if (!strcmp(n, "sqlite3_reset_auto_extension"))
			watch[2] = a;
		else if (!strcmp(n, "sqlite3_trace_v2"))
			watch[3] = a;
		else if (!strcmp(n, "sqlite3_trace"))
			watch[4] = a;
		else if (!strcmp(n, "sqlite3_profile"))
			watch[5] = a;
	}
	if (e->api.auto_extension && e->api.sql &&
	    !(same_code(&f, info, (uintptr_t)e->api.auto_extension) &&
	      same_code(&f, info, (uintptr_t)e->api.sql) &&
	      (!e->api.trace_v2 || same_code(&f, info, (uintptr_t)e->api.trace_v2)) &&
	      (!e->api.stmt_status || same_code(&f, info, (uintptr_t)e->api.stmt_status)) &&
	      (!e->api.db_handle || same_code(&f, info, (uintptr_t)e->api.db_handle)) &&
	      (!e->api.memory_used || same_code(&f, info, (uintptr_t)e->api.memory_used)))) {
		/* the file is not what is mapped (replaced on disk): not ours
		 * to call into; nothing said (it is not known to hold SQLite) */
		if (e->r)
			munmap(e->r, cap * sizeof(*e->r));
		if (f.p)
			munmap((void *)f.p, f.size);
		return 0;
	}
	if (e->api.auto_extension && e->api.sql) {
		ranges_sort(e->r, nr);
		e->nr = ranges_merge(e->r, nr);
	} else if (nr || (magic && !imports_sqlite(info) && has_sqlite_magic(info))) {
		/* no symbols to hook it by: stripped (or none we know) */
		e->flags = SP_MODULE_EMBED_BLIND | SP_MODULE_EMBED_STRIPPED;
	} else {
		if (e->r)
			munmap(e->r, cap * sizeof(*e->r));
		if (f.p)
			munmap((void *)f.p, f.size);
		return 0;
	}
	if (f.p)
		munmap((void *)f.p, f.size);
	if (!e->flags && late == 2) {
		e->flags = SP_MODULE_EMBED_BLIND | SP_MODULE_EMBED_LATE;
	} else if (!e->flags) {
		if (!e->api.trace_v2 || !e->api.stmt_status) {
			e->flags = SP_MODULE_EMBED_BLIND | SP_MODULE_EMBED_NOTRACE;
		} else if ((calls = called_from_outside(e, info, watch, 6)) & 1) {
			/* registering initializes SQLite: the program's own
			 * sqlite3_config would fail after it */
			e->flags = SP_MODULE_EMBED_BLIND | SP_MODULE_EMBED_CONFIG;
		} else {
			if (late && (!e->api.memory_used || e->api.memory_used() > 0))
				e->flags |= SP_MODULE_EMBED_LATE;
			if (calls)
				e->flags |= SP_MODULE_EMBED_OWNTRACE;
			if (e->api.auto_extension((void (*)(void))(uintptr_t)entries[i]) ==
			    SQLITE_OK) {
				e->flags |= SP_MODULE_SQLITE_MIXED | SP_MODULE_EMBED;
			} else {
				e->flags = SP_MODULE_EMBED_BLIND | SP_MODULE_EMBED_NOTRACE;
			}
		}
	}
	atomic_store(&nembs, i + 1);
	return 1;
}

/* Objects to look at, gathered under the loader's lock and examined after
 * it (examining reads files and calls into the object). */
struct cand {
	struct dl_phdr_info info;
	char path[512];
	int magic; /* look for SQLite's header string where no symbol is */
	int main_program;
};
#define CAND_MAX 32
struct cands {
	struct cand c[CAND_MAX];
	int n;
	int first; /* the next entry is the main program */
};

static int seen_has(uintptr_t base)
{
	for (size_t i = 0; i < nseen; i++)
		if (seen[i] == base)
			return 1;
	return 0;
}

static int cand_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct cands *cs = arg;
	int first = cs->first;
	const char *name = info->dlpi_name;
	const char *b;

	(void)size;
	cs->first = 0;
	if (cs->n >= CAND_MAX || seen_has(info->dlpi_addr))
		return 0;
	if (!first && (!name || !*name))
		return 0; /* the vDSO */
	b = name ? strrchr(name, '/') : NULL;
	b = b ? b + 1 : name;
	if (!first && (!strncmp(b, "linux-vdso", 10) || !strncmp(b, "libsqlprof.so", 13)))
		return 0;
	if (nseen < EMB_SEEN_MAX)
		seen[nseen++] = info->dlpi_addr;
	/* a library exporting the API: its calls reach the shims (resolve.c) */
	if (!first && sp_dyn_sqlite_kind(info))
		return 0;
	cs->c[cs->n].info = *info;
	/* a system library (lib*.so in the loader's directories) is no
	 * program with SQLite compiled in: the string scan of libc's and
	 * every other's read-only data cost 2.4 M instructions a start */
	cs->c[cs->n].magic =
		first || !(!strncmp(b, "lib", 3) && strstr(b, ".so") &&
			   (!strncmp(name, "/lib/", 5) || !strncmp(name, "/lib64/", 7) ||
			    !strncmp(name, "/usr/lib/", 9) || !strncmp(name, "/usr/lib64/", 11)));
	cs->c[cs->n].main_program = first;
	if (first)
		strcpy(cs->c[cs->n].path, "/proc/self/exe");
	else if (strlen(name) < sizeof(cs->c[cs->n].path))
		strcpy(cs->c[cs->n].path, name);
	else
		return 0;
	cs->n++;
	return 0;
}

/* Look at the objects not looked at yet; the number holding an
 * embedded SQLite. late: 0 at start-up, 1 after (dlopen'd since), 2 at
 * exit (found, not hooked: whatever it ran was not seen). */
static int emb_scan(int late)
{
	static struct cands cs; /* under scan_lock: 16 KiB kept off the stack */
	int found = 0;

	if (late ? pthread_mutex_trylock(&scan_lock) != 0 : pthread_mutex_lock(&scan_lock) != 0)
		return 0; /* another thread is looking (and will see the same) */
	cs.n = 0;
	cs.first = !startup_done;
	dl_iterate_phdr(cand_cb, &cs);
	for (int i = 0; i < cs.n; i++)
		found += emb_examine(&cs.c[i].info, cs.c[i].path, late, cs.c[i].magic,
				     cs.c[i].main_program);
	startup_done = 1;
	pthread_mutex_unlock(&scan_lock);
	return found;
}

int sp_embed_init(void)
{
	return emb_scan(0);
}

void sp_embed_rescan(void)
{
	if (startup_done && emb_scan(1))
		sp_modules_resend(); /* its flags, for record */
}

/* In a forked child: another thread may have held the lock at fork(). */
void sp_embed_fork_child(void)
{
	pthread_mutex_init(&scan_lock, NULL);
}

int sp_embed_exit_scan(void)
{
	return startup_done ? emb_scan(2) : 0;
}

unsigned sp_embed_module_flags(uintptr_t base)
{
	int n = atomic_load(&nembs);

	for (int i = 0; i < n; i++)
		if (embs[i].base == base)
			return embs[i].flags;
	return 0;
}

/* ---- executions, seen through the trace callbacks ---- */

/* One execution in progress on this thread, by statement. */
struct emb_slot {
	sqlite3_stmt *st; /* NULL: free */
	const char *zsql; /* the statement's text when it was noted */
	size_t len;
	uint64_t hash; /* emb_hash of it */
	uint64_t sql_id, shape;
	uintptr_t caller;
	struct sp_agg_query *q; /* bound for (sql_id, caller) in arena */
	uint64_t arena;
	uint32_t last[4]; /* its counters at its last end on this thread
				 * (valid: has_last) */
	int has_last;
	struct sp_exec exec;
};

struct emb_thread {
	struct emb_slot slot[EMB_SLOTS];
	struct emb_thread *next_idle;
	int busy; /* inside emb_trace: a signal handler's SQLite on this thread
		   * meanwhile is not looked at (its ends are counted as
		   * unattributed), the slots being half changed */
};

static __thread struct emb_thread *emb_tls __attribute__((tls_model("initial-exec")));
static struct emb_thread *idle;
static atomic_flag idle_lock = ATOMIC_FLAG_INIT;
static pthread_key_t thr_key;
static pthread_once_t thr_once = PTHREAD_ONCE_INIT;
static int thr_key_ok;

static void thr_gone(void *arg)
{
	struct emb_thread *et = arg;

	emb_tls = NULL;
	while (atomic_flag_test_and_set_explicit(&idle_lock, memory_order_acquire))
		sched_yield();
	et->next_idle = idle;
	idle = et;
	atomic_flag_clear_explicit(&idle_lock, memory_order_release);
}

static void thr_key_make(void)
{
	thr_key_ok = pthread_key_create(&thr_key, thr_gone) == 0;
}

static __attribute__((noinline, cold)) struct emb_thread *thr_get(void)
{
	struct emb_thread *et = NULL;

	if (!atomic_flag_test_and_set_explicit(&idle_lock, memory_order_acquire)) {
		et = idle;
		if (et)
			idle = et->next_idle;
		atomic_flag_clear_explicit(&idle_lock, memory_order_release);
	}
	if (!et) {
		void *p = mmap(NULL, sizeof(*et), PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (p == MAP_FAILED)
			return NULL;
		et = p;
	}
	memset(et, 0, sizeof(*et));
	pthread_once(&thr_once, thr_key_make);
	if (thr_key_ok)
		pthread_setspecific(thr_key, et);
	emb_tls = et;
	return et;
}

/* A fast hash of the text, 8 bytes at a time: tells a statement's text
 * from another's at the same addresses (a statement freed and another
 * prepared in its place). The SQL id itself is sp_sql_note's. */
static uint64_t emb_hash(const char *s, size_t len)
{
	uint64_t h = len * 0x9E3779B97F4A7C15ULL, w;
	size_t i = 0;

	for (; i + 8 <= len; i += 8) {
		memcpy(&w, s + i, 8);
		h = (h ^ w) * 0xff51afd7ed558ccdULL;
		h ^= h >> 29;
	}
	w = 0;
	memcpy(&w, s + i, len - i);
	h = (h ^ w) * 0xc4ceb9fe1a85ec53ULL;
	return h ^ (h >> 32);
}

static struct emb_slot *slot_of(struct emb_thread *et, const void *st)
{
	return &et->slot[((uintptr_t)st * 0x9E3779B97F4A7C15ULL) >> 58];
}

static sp_v4u emb_counters(const struct emb *e, sqlite3_stmt *st)
{
	sp_v4u v;

	v[0] = (uint32_t)e->api.stmt_status(st, SQLITE_STMTSTATUS_FULLSCAN_STEP, 0);
	v[1] = (uint32_t)e->api.stmt_status(st, SQLITE_STMTSTATUS_SORT, 0);
	v[2] = (uint32_t)e->api.stmt_status(st, SQLITE_STMTSTATUS_AUTOINDEX, 0);
	v[3] = (uint32_t)e->api.stmt_status(st, SQLITE_STMTSTATUS_VM_STEP, 0);
	return v;
}

/* Index of the first pc out of libsqlprof and SQLite's own code: the
 * return address into the code that called SQLite; n when none. */
static int caller_index(const struct emb *e, const uintptr_t *pcs, int n)
{
	int i = 1;

	while (i < n && (pcs[i] - sp_self_lo < sp_self_hi - sp_self_lo || in_sqlite(e, pcs[i])))
		i++;
	return i;
}

/*
 * The caller's return address (0: none within EMB_WALK frames), from a
 * walk out of this frame. The thread's walk memo (unwind.c, "the last
 * walk") keeps it: a statement run from one place in a loop is a few
 * stack words checked, no walk (its id here is the caller, not a stack
 * id: a memo is only taken for a walk from the same pc, which is this
 * function's return address). Keeps errno.
 */
static __attribute__((noinline)) uintptr_t emb_caller(struct sp_thread *t, const struct emb *e)
{
	const uintptr_t *fp = __builtin_frame_address(0);
	struct sp_walk_memo *m = SP_MEMO(t);
	uintptr_t pcs[EMB_WALK], caller;
	int n = -1, noted = 0, i;

	if (sp_memo_same(m, (uintptr_t)(fp + 2), fp[0], fp[1]))
		return (uintptr_t)m->id;
	if (sp_use_cfi_unwinder)
		n = sp_unwind_noting(m, pcs, EMB_WALK, (uintptr_t)(fp + 2), fp[0], fp[1], &noted);
	if (n < 0) {
		n = sp_backtrace_keep_errno(pcs, EMB_WALK);
		i = caller_index(e, pcs, n);
	} else {
		/* pcs[0] is our caller's return address: from 0, not 1 */
		for (i = 0; i < n &&
			    (pcs[i] - sp_self_lo < sp_self_hi - sp_self_lo || in_sqlite(e, pcs[i]));
		     i++)
			;
	}
	caller = i < n ? pcs[i] : 0;
	if (noted)
		sp_memo_done(m, caller);
	return caller;
}

/* The stack from the caller out (SQLite's frames left out, so that its
 * leaf is the caller, as the shims' stacks are), its STACK record sent
 * if new; its id (0: none). *caller: the caller found by the walk. */
#define EMB_WALK_SMALL 64
static uint64_t emb_stack(struct sp_thread *t, const struct emb *e, uintptr_t *caller)
{
	struct sp_thread_more *m = t->more;
	uintptr_t small[EMB_WALK_SMALL], *pcs = small;
	int max = EMB_WALK_SMALL, n, k, own = 0, skip, depth;
	uint64_t h;

	if (m != &sp_more_none && !m->walk_busy) {
		m->walk_busy = 1;
		atomic_signal_fence(memory_order_seq_cst);
		pcs = m->pcs;
		max = sp_cfg.depth + 8 + EMB_WALK;
		if (max > SP_STACK_MAX + 8)
			max = SP_STACK_MAX + 8;
		own = 1;
	}
	n = sp_use_cfi_unwinder ? sp_unwind(pcs, max) : -1;
	if (n < 0)
		n = sp_backtrace_keep_errno(pcs, max);
	k = caller_index(e, pcs, n);
	*caller = k < n ? pcs[k] : 0;
	h = 0;
	if (k < n) {
		pcs[k - 1] = (uintptr_t)&emb_stack; /* ours: where the stack starts */
		h = sp_stack_id(pcs + k - 1, n - k + 1);
		if (h) {
			sp_stream_tick();
			if (h != t->last_stack) {
				depth = sp_stack_span(pcs + k - 1, n - k + 1, &skip);
				h = sp_stack_note(t, pcs + k - 1 + skip, depth, h);
			}
		}
	}
	if (own) {
		atomic_signal_fence(memory_order_seq_cst);
		m->walk_busy = 0;
	}
	return h;
}

/* SQLITE_TRACE_STMT: statement st starts (text x, its own text when it
 * is a top-level execution; "-- ..." for a trigger's program inside it or
 * for a statement nested in another's step). */
static void emb_begin(struct sp_thread *t, struct emb_thread *et, const struct emb *e,
		      sqlite3_stmt *st, const char *x)
{
	struct emb_slot *s = slot_of(et, st);
	const char *sql = e->api.sql(st);
	struct sp_exec *r = &s->exec;
	uint64_t h;
	uintptr_t caller;
	size_t len;
	int created = 0, first = 0;

	if (x != sql && s->st == st && r->start)
		return; /* a trigger's program, inside the open execution */
	if (!sql)
		sql = "<statement without SQL text>";
	len = strlen(sql);
	h = emb_hash(sql, len);
	caller = emb_caller(t, e);
	if (s->st != st || s->zsql != sql || s->len != len || s->hash != h) {
		s->st = st;
		s->zsql = sql;
		s->len = len;
		s->hash = h;
		s->sql_id = sp_sql_note(t, sql, len, &s->shape);
		s->q = NULL;
		s->has_last = 0;
		first = sp_first_exec(s->sql_id, SP_KIND_STMT);
	}
	if (!s->q || s->arena != t->arena_id || s->caller != caller) {
		struct sp_arena *a = sp_arena_get(t);

		s->q = a ? sp_agg_get(a, s->sql_id, SP_KIND_STMT, caller, &created) : NULL;
		s->arena = t->arena_id;
		s->caller = caller;
	}
	/* what sp_emit_exec and sp_agg_add read (an end clears start and
	 * stack_id; the rest never changes from 0) */
	r->db = 0;
	r->rows = 0;
	r->seq = 0;
	r->stack_id = 0;
	r->kind = SP_KIND_STMT;
	r->slow_at = UINT64_MAX;
	r->flags = (uint16_t)((first ? SP_EXEC_FIRST : 0) | (sp_draw(t) ? SP_EXEC_RANDOM : 0));
	if (r->flags || created) {
		uintptr_t c;

		r->stack_id = emb_stack(t, e, &c);
		if (r->stack_id)
			r->flags |= SP_EXEC_SAMPLED;
	}
	/* SQLite's counters at start: those of its last end here when its VM
	 * step count has not moved since (every execution runs one step at
	 * least), one call instead of four */
	if (s->has_last &&
	    (uint32_t)e->api.stmt_status(st, SQLITE_STMTSTATUS_VM_STEP, 0) == s->last[3]) {
		memcpy(r->base, s->last, sizeof(r->base));
	} else {
		sp_v4u b = emb_counters(e, st);

		memcpy(r->base, &b, sizeof(b));
	}
	r->start = sp_now();
}

/* SQLITE_TRACE_PROFILE: the execution of st ended (done, failed, reset or
 * finalized); elapsed: SQLite's own measure (ns, millisecond steps), for
 * an execution this thread did not see start. */
static void emb_end(struct sp_thread *t, struct emb_thread *et, const struct emb *e,
		    sqlite3_stmt *st, sqlite3_int64 elapsed)
{
	uint64_t end = sp_now();
	struct emb_slot *s = slot_of(et, st);
	struct sp_exec *r = &s->exec;
	sp_v4u delta;

	if (s->st != st || !r->start) {
		/* begun on another thread (or its slot taken meanwhile): counted,
		 * timed by SQLite, attributed to its text with no caller */
		const char *sql = e->api.sql(st);
		struct sp_arena *a = sp_arena_get(t);
		uint64_t shape, id;
		double ticks = sp_clock_tsc ? sp_tsc_per_ns() : 1.0;
		struct sp_exec tmp;
		struct sp_agg_query *q;
		static const sp_v4u zero;

		if (!sql)
			sql = "<statement without SQL text>";
		id = sp_sql_note(t, sql, strlen(sql), &shape);
		q = a ? sp_agg_get(a, id, SP_KIND_STMT, 0, NULL) : NULL;
		memset(&tmp, 0, sizeof(tmp));
		tmp.db = elapsed > 0 ? (uint64_t)((double)elapsed * ticks) : 0;
		tmp.start = end - tmp.db;
		if (q)
			sp_agg_add(q, &tmp, end, zero, NULL);
		else
			sp_stats_unattributed();
		return;
	}
	r->db = end - r->start; /* no hook sees a step return: db is wall */
	sp_exec_clamp(r, &end);
	{
		sp_v4u now = emb_counters(e, st), b;

		memcpy(&b, r->base, sizeof(b));
		delta = now - b;
		memcpy(s->last, &now, sizeof(s->last));
		s->has_last = 1;
	}
	if (s->q) {
		sp_agg_add(s->q, r, end, delta, NULL);
		if (r->stack_id)
			s->q->samples++;
		sp_loop_note(t, s->q, s->shape, r->start, end);
	} else {
		sp_stats_unattributed();
	}
	if (r->stack_id)
		sp_emit_exec(t, r, s->sql_id,
			     e->api.db_handle ? (uint64_t)(uintptr_t)e->api.db_handle(st) : 0,
			     SQLITE_OK, end, delta, 0);
	r->start = 0;
	r->stack_id = 0;
}

static int emb_trace(unsigned type, void *ctx, void *p, void *x)
{
	struct sp_thread *t = &sp_tls;
	struct emb_thread *et;
	int saved;

	if (!sp_cfg.enabled || sp_guarded(t) || !p)
		return 0;
	if (type == SQLITE_TRACE_ROW) {
		struct emb_slot *s;

		et = emb_tls;
		if (et && !et->busy && (s = slot_of(et, p))->st == p && s->exec.start)
			s->exec.rows++;
		return 0;
	}
	saved = errno;
	et = emb_tls;
	if (unlikely(et && et->busy)) {
		if (type == SQLITE_TRACE_PROFILE)
			sp_stats_unattributed();
		return 0;
	}
	if (unlikely(!(t->state & SP_TS_SETUP) || !sp_same_process()))
		sp_thread_ready(t);
	if (!et)
		et = thr_get();
	if (et && !sp_guarded(t)) {
		et->busy = 1;
		atomic_signal_fence(memory_order_seq_cst);
		if (type == SQLITE_TRACE_STMT)
			emb_begin(t, et, ctx, p, x);
		else if (type == SQLITE_TRACE_PROFILE)
			emb_end(t, et, ctx, p, x ? *(const sqlite3_int64 *)x : 0);
		atomic_signal_fence(memory_order_seq_cst);
		et->busy = 0;
	}
	errno = saved;
	return 0;
}
