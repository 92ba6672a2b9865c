/* SPDX-License-Identifier: MIT */
/*
 * deepbind.c - libraries loaded with RTLD_DEEPBIND (PHP's sqlite3.so and
 * pdo_sqlite.so, some plugin hosts) look symbols up in their own
 * dependencies before the global scope, so their sqlite3_* calls bind to
 * libsqlite3 directly, past the preload. After such a load, every GOT
 * slot (JUMP_SLOT, GLOB_DAT, and absolute pointers, R_X86_64_64) that
 * holds one of our interposed sqlite3_* functions as defined by the
 * primary SQLite library is rewritten to our shim: what the loader would
 * have bound without RTLD_DEEPBIND. Nothing else changes: other symbols
 * keep the deep binding the program asked for, a foreign SQLite's slots
 * (a plugin with its own copy or SQLCipher) are left alone, and our own
 * calls go through sp_real, never through a GOT. RELRO pages are made
 * writable for the write and read-only again.
 *
 * dlopen is interposed by a stub that jumps to the real one with the
 * caller's return address in place (glibc finds the caller's namespace,
 * RUNPATH, $ORIGIN and the new object's loader from it), so a load
 * without RTLD_DEEPBIND is exactly as without us. A RTLD_DEEPBIND load is
 * made from here, then patched, only when that is provably the same
 * load: no '$' in the name, and the caller is the program or an object
 * loaded with it, without RUNPATH or NODEFLIB (and without RPATH for a
 * library, none of the start-up libraries having one: the search then
 * walks the same directories from us). Otherwise the stub jumps too, and
 * the library is patched at our next chance (the next dlopen, dlclose,
 * open, prepare or exec reaching us, or a new stack): its calls before
 * that are not seen. While profiling, every other load that is provably
 * the same from here is made from here too, so that embed.c looks at
 * what it brought (SQLite compiled into a module) before the program
 * calls it; any other load is the plain jump.
 */
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sp_preload.h"

void *(*sp_dlopen_real)(const char *, int);
atomic_int sp_deepbind_pending;
static const struct link_map *startup_last; /* the last object loaded with the program */
static int startup_rpath;                   /* a start-up library has DT_RPATH */

/*
 * The stub: no DEEPBIND (and the original known), a jump with the
 * caller's frame untouched. Else sp_dlopen_route decides, the arguments
 * kept across the call: 0, the same jump; 1, a jump to sp_dlopen_deep,
 * whose return address is then still the caller's.
 */
__asm__(".text\n"
	".globl dlopen\n"
	".type dlopen, @function\n"
	"dlopen:\n"
	"	.cfi_startproc\n"
	"	endbr64\n"
	"	movq sp_dlopen_real(%rip), %rax\n"
	"	testq %rax, %rax\n"
	"	jz 1f\n"
	"	testl $" SP_STR(RTLD_DEEPBIND) ", %esi\n"
					       "	jnz 1f\n"
					       "	cmpl $0, sp_dlopen_watch(%rip)\n"
					       "	jnz 1f\n"
					       "	jmp *%rax\n"
					       "1:	pushq %rdi\n"
					       "	.cfi_adjust_cfa_offset 8\n"
					       "	pushq %rsi\n"
					       "	.cfi_adjust_cfa_offset 8\n"
					       "	subq $8, %rsp\n"
					       "	.cfi_adjust_cfa_offset 8\n"
					       "	movq 24(%rsp), %rdx\n"
					       "	call sp_dlopen_route\n"
					       "	addq $8, %rsp\n"
					       "	.cfi_adjust_cfa_offset -8\n"
					       "	popq %rsi\n"
					       "	.cfi_adjust_cfa_offset -8\n"
					       "	popq %rdi\n"
					       "	.cfi_adjust_cfa_offset -8\n"
					       "	testl %eax, %eax\n"
					       "	jnz sp_dlopen_deep\n"
					       "	jmp *sp_dlopen_real(%rip)\n"
					       "	.cfi_endproc\n"
					       ".size dlopen, .-dlopen\n");

int sp_dlopen_route(const char *file, int mode, const void *ra);
void *sp_dlopen_deep(const char *file, int mode);
/* Set while profiling: every load goes by sp_dlopen_route, so that a
 * module with SQLite compiled in is hooked before its first call
 * (embed.c); a load from us only when it is provably the same load. */
int sp_dlopen_watch;

static const ElfW(Dyn) * dyn_find(const struct link_map *l, ElfW(Sxword) tag)
{
	for (const ElfW(Dyn) *d = l->l_ld; d && d->d_tag != DT_NULL; d++)
		if (d->d_tag == tag)
			return d;
	return NULL;
}

/* Remember which objects came with the program (constructor: the loader
 * is single-threaded, the list is complete and not changing). */
__attribute__((constructor)) static void deepbind_init(void)
{
	const struct link_map *l = _r_debug.r_map;

	if (!sp_dlopen_real)
		*(void **)&sp_dlopen_real = dlsym(RTLD_NEXT, "dlopen");
	for (; l; l = l->l_next) {
		startup_last = l;
		if (l != _r_debug.r_map && dyn_find(l, DT_RPATH))
			startup_rpath = 1;
	}
}

/* Would a dlopen(file) from libsqlprof.so be the same load as from the
 * object holding ra? */
static int same_load(const char *file, const void *ra)
{
	const struct link_map *c = sp_lm_of(ra), *l;
	const ElfW(Dyn) * f1;

	if (!file || strchr(file, '$') || !c || !startup_last)
		return 0;
	for (l = _r_debug.r_map; l && l != c && l != startup_last; l = l->l_next)
		;
	if (l != c)
		return 0; /* loaded later, or in another namespace */
	if (dyn_find(c, DT_RUNPATH))
		return 0;
	f1 = dyn_find(c, DT_FLAGS_1);
	if (f1 && (f1->d_un.d_val & DF_1_NODEFLIB))
		return 0;
	if (c != _r_debug.r_map && (dyn_find(c, DT_RPATH) || startup_rpath))
		return 0;
	return 1;
}

/* Called by the stub with the caller's return address: 1 to load from
 * sp_dlopen_deep, 0 to jump to the original. Keeps errno. */
__attribute__((used)) int sp_dlopen_route(const char *file, int mode, const void *ra)
{
	int saved = errno, r = 0;

	if (!sp_dlopen_real)
		*(void **)&sp_dlopen_real = dlsym(RTLD_NEXT, "dlopen");
	if ((mode & RTLD_DEEPBIND) && sp_cfg.enabled) {
		if (same_load(file, ra))
			r = 1;
		else {
			atomic_store(&sp_deepbind_pending, 1);
			sp_stats_note_deepbind_late();
		}
	} else if (sp_cfg.enabled && !(mode & RTLD_NOLOAD) && same_load(file, ra)) {
		r = 1; /* embed.c looks at what it brought, before its first call */
	}
	errno = saved;
	return r;
}

__attribute__((used)) void *sp_dlopen_deep(const char *file, int mode)
{
	void *h = sp_dlopen_real(file, mode);
	int saved = errno;

	if (h) {
		if (mode & RTLD_DEEPBIND)
			sp_deepbind_patch();
		sp_embed_rescan();
		dlerror(); /* the load succeeded: no error was pending, none of ours stays */
	}
	errno = saved;
	return h;
}

/* ---- the patch ---- */

static const char *const names[] = {
	"sqlite3_open",
	"sqlite3_open_v2",
	"sqlite3_open16",
	"sqlite3_close",
	"sqlite3_close_v2",
	"sqlite3_prepare",
	"sqlite3_prepare_v2",
	"sqlite3_prepare_v3",
	"sqlite3_prepare16",
	"sqlite3_prepare16_v2",
	"sqlite3_prepare16_v3",
	"sqlite3_step",
	"sqlite3_reset",
	"sqlite3_finalize",
	"sqlite3_exec",
	"sqlite3_trace",
	"sqlite3_trace_v2",
	"sqlite3_profile",
	"sqlite3_set_authorizer",
	"sqlite3_progress_handler",
	"sqlite3_config",
	"sqlite3_create_module",
	"sqlite3_create_module_v2",
	"sqlite3_load_extension",
	"sqlite3_enable_load_extension",
	"sqlite3_auto_extension",
};
#define NNAMES (sizeof(names) / sizeof(names[0]))

struct patch {
	uintptr_t shim[NNAMES]; /* our definitions, from our own dynamic symbols */
	uintptr_t self_lo, self_hi;
	const void *primary; /* link map of the primary library */
	long page;
	unsigned patched;
};

static int name_index(const char *n)
{
	if (strncmp(n, "sqlite3_", 8))
		return -1;
	for (size_t i = 0; i < NNAMES; i++)
		if (!strcmp(n, names[i]))
			return (int)i;
	return -1;
}

static int in_self(const struct dl_phdr_info *info)
{
	uintptr_t me = (uintptr_t)in_self;

	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;

		if (ph->p_type == PT_LOAD && me >= lo && me < lo + ph->p_memsz)
			return 1;
	}
	return 0;
}

static int self_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct patch *p = arg;
	struct sp_dyn d;

	(void)size;
	if (!in_self(info) || sp_dyn_read(info, &d) < 0)
		return 0;
	sp_dyn_count(&d);
	for (size_t i = 1; i < d.nsym; i++) {
		int k = d.sym[i].st_shndx != SHN_UNDEF ? name_index(sp_dyn_name(&d, (uint32_t)i))
						       : -1;

		if (k >= 0)
			p->shim[k] = d.base + d.sym[i].st_value;
	}
	return 1;
}

/* Write v at slot, through a writable mapping of a RELRO page. */
static void slot_write(struct patch *p, const struct sp_dyn *d, uintptr_t *slot, uintptr_t v)
{
	uintptr_t a = (uintptr_t)slot, pg = a & ~(uintptr_t)(p->page - 1);
	uintptr_t rlo = d->relro_lo & ~(uintptr_t)(p->page - 1),
		  rhi = d->relro_hi & ~(uintptr_t)(p->page - 1);

	if (a >= rlo && a < rhi) {
		if (mprotect((void *)pg, (size_t)p->page, PROT_READ | PROT_WRITE) != 0)
			return;
		__atomic_store_n(slot, v, __ATOMIC_RELAXED);
		mprotect((void *)pg, (size_t)p->page, PROT_READ);
	} else {
		__atomic_store_n(slot, v, __ATOMIC_RELAXED);
	}
	p->patched++;
}

static void patch_relocs(struct patch *p, const struct sp_dyn *d, const ElfW(Rela) * r, size_t n)
{
	for (size_t i = 0; r && i < n; i++) {
		uint32_t type = ELF64_R_TYPE(r[i].r_info), si = ELF64_R_SYM(r[i].r_info);
		uintptr_t *slot, v;
		int k;

		if ((type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT &&
		     type != R_X86_64_64) ||
		    si == 0 || si >= d->nsym || r[i].r_addend != 0)
			continue;
		k = name_index(sp_dyn_name(d, si));
		if (k < 0 || !p->shim[k])
			continue;
		slot = (uintptr_t *)(d->base + r[i].r_offset);
		v = __atomic_load_n(slot, __ATOMIC_RELAXED);
		if (v == p->shim[k] || sp_lm_of((const void *)v) != p->primary)
			continue; /* ours already, or another library's (foreign SQLite) */
		slot_write(p, d, slot, p->shim[k]);
		sp_lib_note_primary_caller(sp_lm_of(slot));
	}
}

static int patch_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct patch *p = arg;
	struct sp_dyn d;

	(void)size;
	if (in_self(info) || sp_dyn_read(info, &d) < 0)
		return 0;
	sp_dyn_count(&d);
	patch_relocs(p, &d, d.jmprel, d.jmprelsz);
	patch_relocs(p, &d, d.rela, d.relasz);
	return 0;
}

/*
 * Rewrite to our shims the slots of every loaded object (libsqlprof.so
 * excepted) that hold the primary SQLite's definition of a function we
 * interpose: only a RTLD_DEEPBIND'd object (or a library loaded with
 * one) has such a slot, any other was bound to us. Idempotent; takes
 * the loader's lock (dl_iterate_phdr), so never called under ours.
 * Returns the number of slots rewritten.
 */
unsigned sp_deepbind_patch(void)
{
	struct patch p;
	int saved = errno;

	atomic_store(&sp_deepbind_pending, 0);
	if (!sp_cfg.enabled || sp_resolve() < 0 || !(p.primary = sp_primary_lm())) {
		errno = saved;
		return 0;
	}
	memset(p.shim, 0, sizeof(p.shim));
	p.page = sysconf(_SC_PAGESIZE);
	p.patched = 0;
	sp_guard_in(&sp_tls);
	dl_iterate_phdr(self_cb, &p);
	dl_iterate_phdr(patch_cb, &p);
	sp_guard_out(&sp_tls);
	errno = saved;
	return p.patched;
}
