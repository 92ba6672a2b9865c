/* SPDX-License-Identifier: MIT */
/*
 * elfdyn.c - reading a loaded object's dynamic section: its dynamic
 * symbols (which library provides the sqlite3 API, by the symbols it
 * defines rather than by its file name) and its relocations (which GOT
 * slots hold a sqlite3_* function, for deepbind.c).
 *
 * Only what the loader has mapped is read (the dl_iterate_phdr entry),
 * never the file: no allocation, no lock, no system call. Nothing here
 * writes; deepbind.c does.
 */
#include <elf.h>
#include <link.h>
#include <string.h>

#include "sp_preload.h"

/* glibc relocates the d_ptr entries of an object's dynamic section in
 * place, except in the vDSO (and on architectures with a read-only
 * one): a value below the load bias is still an offset. */
static uintptr_t dyn_ptr(const struct dl_phdr_info *info, ElfW(Addr) p)
{
	return p < info->dlpi_addr ? info->dlpi_addr + p : p;
}

/* Number of dynamic symbols: DT_HASH's nchain, else one past the last
 * symbol any DT_GNU_HASH chain reaches. */
static size_t gnu_hash_nsyms(const uint32_t *h)
{
	uint32_t nbuckets = h[0], symoffset = h[1], bloom = h[2], last = 0;
	const uint32_t *buckets = h + 4 + bloom * (sizeof(ElfW(Addr)) / 4);
	const uint32_t *chain = buckets + nbuckets;

	for (uint32_t i = 0; i < nbuckets; i++)
		if (buckets[i] > last)
			last = buckets[i];
	if (last < symoffset)
		return symoffset;
	while (!(chain[last - symoffset] & 1))
		last++;
	return (size_t)last + 1;
}

int sp_dyn_read(const struct dl_phdr_info *info, struct sp_dyn *d)
{
	const ElfW(Dyn) *dyn = NULL;
	const uint32_t *hash = NULL, *gnu = NULL;

	memset(d, 0, sizeof(*d));
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

		if (ph->p_type == PT_DYNAMIC)
			dyn = (const void *)(info->dlpi_addr + ph->p_vaddr);
		else if (ph->p_type == PT_GNU_RELRO) {
			d->relro_lo = info->dlpi_addr + ph->p_vaddr;
			d->relro_hi = d->relro_lo + ph->p_memsz;
		}
	}
	if (!dyn)
		return -1;
	for (; dyn->d_tag != DT_NULL; dyn++) {
		switch (dyn->d_tag) {
		case DT_SYMTAB:
			d->sym = (const void *)dyn_ptr(info, dyn->d_un.d_ptr);
			break;
		case DT_STRTAB:
			d->str = (const void *)dyn_ptr(info, dyn->d_un.d_ptr);
			break;
		case DT_STRSZ:
			d->strsz = dyn->d_un.d_val;
			break;
		case DT_HASH:
			hash = (const void *)dyn_ptr(info, dyn->d_un.d_ptr);
			break;
		case DT_GNU_HASH:
			gnu = (const void *)dyn_ptr(info, dyn->d_un.d_ptr);
			break;
		case DT_RELA:
			d->rela = (const void *)dyn_ptr(info, dyn->d_un.d_ptr);
			break;
		case DT_RELASZ:
			d->relasz = dyn->d_un.d_val / sizeof(ElfW(Rela));
			break;
		case DT_JMPREL:
			d->jmprel = (const void *)dyn_ptr(info, dyn->d_un.d_ptr);
			break;
		case DT_PLTRELSZ:
			d->jmprelsz = dyn->d_un.d_val / sizeof(ElfW(Rela));
			break;
		case DT_PLTREL:
			if (dyn->d_un.d_val != DT_RELA)
				d->jmprelsz = 0, d->jmprel = NULL; /* not x86-64's RELA */
			break;
		}
	}
	if (!d->sym || !d->str)
		return -1;
	d->nsym = hash ? hash[1] : gnu ? gnu_hash_nsyms(gnu) : 0;
	d->base = info->dlpi_addr;
	return 0;
}

const char *sp_dyn_name(const struct sp_dyn *d, uint32_t i)
{
	uint32_t off = d->sym[i].st_name;

	return off < d->strsz ? d->str + off : "";
}

/*
 * Does the object provide the sqlite3 API? It does when it defines
 * sqlite3_step, sqlite3_prepare_v2 and sqlite3_exec (a library's name
 * says nothing: libsqlcipher, a renamed copy, a plugin with SQLite
 * compiled in). SP_MODULE_SQLITE when every function it exports is
 * sqlite3* or sqlcipher* (libsqlcipher also exports sqlite3Codec and
 * sqlite3pager_*: a SQLite library: none of its frames is a
 * call site), SP_MODULE_SQLITE_MIXED when it exports other functions too
 * (SQLite compiled into a plugin or a program: only SQLite's own frames
 * are passed over), 0 otherwise.
 */
int sp_dyn_sqlite_kind(const struct dl_phdr_info *info)
{
	struct sp_dyn d;
	int have = 0, other = 0;

	if (sp_dyn_read(info, &d) < 0)
		return 0;
	for (size_t i = 1; i < d.nsym; i++) {
		const ElfW(Sym) *s = &d.sym[i];
		int type = ELF64_ST_TYPE(s->st_info), bind = ELF64_ST_BIND(s->st_info);
		const char *n;

		if (s->st_shndx == SHN_UNDEF || (type != STT_FUNC && type != STT_GNU_IFUNC) ||
		    (bind != STB_GLOBAL && bind != STB_WEAK))
			continue;
		n = sp_dyn_name(&d, (uint32_t)i);
		if (!strcmp(n, "sqlite3_step"))
			have |= 1;
		else if (!strcmp(n, "sqlite3_prepare_v2"))
			have |= 2;
		else if (!strcmp(n, "sqlite3_exec"))
			have |= 4;
		if (strncmp(n, "sqlite3", 7) && strncmp(n, "sqlcipher", 9) &&
		    strncmp(n, "_init", 5) && strncmp(n, "_fini", 5))
			other = 1;
	}
	if (have != 7)
		return 0;
	return other ? SP_MODULE_SQLITE_MIXED : SP_MODULE_SQLITE;
}
