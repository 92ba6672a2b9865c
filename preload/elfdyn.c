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

static uint32_t gnu_hash(const char *s)
{
	uint32_t h = 5381;

	for (; *s; s++)
		h = h * 33 + (unsigned char)*s;
	return h;
}

/* Does the object define name? Through its DT_GNU_HASH table when it has
 * one (a scan of every dynamic symbol of every module, libc's 3,000
 * among them, cost 2.4 M instructions at each module map); else by a
 * scan. */
static int defines(const struct sp_dyn *d, const char *name)
{
	if (d->gnu) {
		const uint32_t *h = d->gnu;
		uint32_t nbuckets = h[0], symoffset = h[1], bloom = h[2], hv = gnu_hash(name), i;
		const uint32_t *buckets = h + 4 + bloom * (sizeof(ElfW(Addr)) / 4);
		const uint32_t *chain = buckets + nbuckets;

		if (!nbuckets)
			return 0;
		i = buckets[hv % nbuckets];
		if (i < symoffset)
			return 0;
		for (;; i++) {
			uint32_t c = chain[i - symoffset];

			if ((c | 1) == (hv | 1) && d->sym[i].st_shndx != SHN_UNDEF &&
			    !strcmp(sp_dyn_name(d, i), name))
				return 1;
			if (c & 1)
				return 0;
		}
	}
	for (size_t i = 1; i < d->nsym; i++)
		if (d->sym[i].st_shndx != SHN_UNDEF && !strcmp(sp_dyn_name(d, (uint32_t)i), name))
			return 1;
	return 0;
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
		case DT_SYMTAB: d->sym = (const void *)dyn_ptr(info, dyn->d_un.d_ptr); break;
		case DT_STRTAB: d->str = (const void *)dyn_ptr(info, dyn->d_un.d_ptr); break;
		case DT_STRSZ: d->strsz = dyn->d_un.d_val; break;
		case DT_HASH: hash = (const void *)dyn_ptr(info, dyn->d_un.d_ptr); break;
		case DT_GNU_HASH: gnu = (const void *)dyn_ptr(info, dyn->d_un.d_ptr); break;
		case DT_RELA: d->rela = (const void *)dyn_ptr(info, dyn->d_un.d_ptr); break;
		case DT_RELASZ: d->relasz = dyn->d_un.d_val / sizeof(ElfW(Rela)); break;
		case DT_JMPREL: d->jmprel = (const void *)dyn_ptr(info, dyn->d_un.d_ptr); break;
		case DT_PLTRELSZ: d->jmprelsz = dyn->d_un.d_val / sizeof(ElfW(Rela)); break;
		case DT_PLTREL:
			if (dyn->d_un.d_val != DT_RELA)
				d->jmprelsz = 0, d->jmprel = NULL; /* not x86-64's RELA */
			break;
		}
	}
	if (!d->sym || !d->str)
		return -1;
	d->nsym = hash ? hash[1] : 0; /* DT_GNU_HASH: sp_dyn_count, when needed */
	d->gnu = gnu;
	d->base = info->dlpi_addr;
	return 0;
}

void sp_dyn_count(struct sp_dyn *d)
{
	if (!d->nsym && d->gnu)
		d->nsym = gnu_hash_nsyms(d->gnu);
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
static int prefixed(const char *n, const char *pre)
{
	while (*pre && *n == *pre)
		n++, pre++;
	return !*pre;
}

/* The name at offset off of the string table is "sqlite3...": one 8-byte
 * load and compare when the table has 8 bytes there (a name near its end
 * takes the byte loop). */
static int sqlite3_named(const struct sp_dyn *d, uint32_t off)
{
	uint64_t w;

	if (off >= d->strsz)
		return 0;
	if (d->strsz - off < 8)
		return prefixed(d->str + off, "sqlite3");
	memcpy(&w, d->str + off, 8);
	return (w & 0x00ffffffffffffffULL) == 0x00336574696c7173ULL; /* "sqlite3", LE */
}

/* st_info values of a defined function that is exported: global or weak,
 * STT_FUNC or STT_GNU_IFUNC. */
static int exported_function(unsigned char info)
{
	int type = ELF64_ST_TYPE(info), bind = ELF64_ST_BIND(info);

	return (type == STT_FUNC || type == STT_GNU_IFUNC) &&
	       (bind == STB_GLOBAL || bind == STB_WEAK);
}

/* Scans every dynamic symbol of the object: libsqlite3's 1,478 took 77
 * instructions each with prefixed() alone (114,000 at every start), ~36
 * with the 8-byte compare, ~20 with the st_info test a table lookup. */
int sp_dyn_sqlite_kind(const struct dl_phdr_info *info)
{
	struct sp_dyn d;
	unsigned char func[256];

	if (sp_dyn_read(info, &d) < 0 || !defines(&d, "sqlite3_step") ||
	    !defines(&d, "sqlite3_prepare_v2") || !defines(&d, "sqlite3_exec"))
		return 0;
	sp_dyn_count(&d);
	for (int v = 0; v < 256; v++)
		func[v] = (unsigned char)exported_function((unsigned char)v);
	for (size_t i = 1; i < d.nsym; i++) {
		const ElfW(Sym) *s = &d.sym[i];
		const char *n;

		if (!func[s->st_info] || s->st_shndx == SHN_UNDEF || sqlite3_named(&d, s->st_name))
			continue;
		n = sp_dyn_name(&d, (uint32_t)i);
		if (!prefixed(n, "sqlcipher") && !prefixed(n, "_init") && !prefixed(n, "_fini"))
			return SP_MODULE_SQLITE_MIXED;
	}
	return SP_MODULE_SQLITE;
}
