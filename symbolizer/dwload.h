/* SPDX-License-Identifier: MIT */
/*
 * dwload.h - libdw and libelf loaded on demand: the table of the functions
 * sym.c calls, filled by sym_dw_load (dlopen of libdw's soname) the first
 * time a module has to be opened. A command that symbolizes nothing, or
 * whose every address the persistent cache answers, never loads them (nor
 * libz, liblzma, libbz2 and the rest they bring: the CLI's start to main
 * was 4 ms more than /bin/true's with them linked in).
 *
 * Include it after <elfutils/libdw.h>, <elfutils/libdwfl.h>,
 * <elfutils/libdwelf.h> and <gelf.h>: each name below then calls through
 * the table (sym_dw.NAME), with the type of the function the headers
 * declare. Nothing here is called on the per-address path but those
 * calls.
 */
#ifndef SYM_DWLOAD_H
#define SYM_DWLOAD_H

#include <stddef.h>

#define SYM_DW_FUNCS(X)                 \
	X(dwarf_attr)                   \
	X(dwarf_attr_integrate)         \
	X(dwarf_child)                  \
	X(dwarf_cu_info)                \
	X(dwarf_diecu)                  \
	X(dwarf_filesrc)                \
	X(dwarf_formstring)             \
	X(dwarf_formudata)              \
	X(dwarf_getsrc_die)             \
	X(dwarf_getsrcfiles)            \
	X(dwarf_haspc)                  \
	X(dwarf_linecol)                \
	X(dwarf_lineno)                 \
	X(dwarf_linesrc)                \
	X(dwarf_siblingof)              \
	X(dwarf_tag)                    \
	X(dwelf_dwarf_gnu_debugaltlink) \
	X(dwelf_elf_gnu_debuglink)      \
	X(dwfl_addrmodule)              \
	X(dwfl_begin)                   \
	X(dwfl_build_id_find_elf)       \
	X(dwfl_end)                     \
	X(dwfl_errmsg)                  \
	X(dwfl_module_addrdie)          \
	X(dwfl_module_addrinfo)         \
	X(dwfl_module_build_id)         \
	X(dwfl_module_getdwarf)         \
	X(dwfl_module_getelf)           \
	X(dwfl_module_info)             \
	X(dwfl_module_nextcu)           \
	X(dwfl_offline_section_address) \
	X(dwfl_report_begin)            \
	X(dwfl_report_elf)              \
	X(dwfl_report_end)              \
	X(dwfl_standard_find_debuginfo) \
	X(elf_getdata)                  \
	X(elf_getshdrstrndx)            \
	X(elf_nextscn)                  \
	X(elf_strptr)                   \
	X(gelf_getchdr)                 \
	X(gelf_getshdr)

struct sym_dw_table {
#define SYM_DW_MEMBER(f) __typeof__(&f) f;
	SYM_DW_FUNCS(SYM_DW_MEMBER)
#undef SYM_DW_MEMBER
};

/* Filled by sym_dw_load; all NULL before (and after a failed load). */
extern struct sym_dw_table sym_dw;

/*
 * Load libdw (and libelf, its dependency) once per process, thread-safe:
 * 0 when every function of the table is there, else -1 with the reason in
 * err ("cannot load libdw.so.1: ...; install libdw1 ..."), the same
 * reason on every later call. Loaded, it stays loaded.
 */
int sym_dw_load(char *err, size_t errlen);

/* 1 when sym_dw_load has succeeded in this process (for tests). */
int sym_dw_loaded(void);

/*
 * What the persistent cache keys results by in place of dwfl_version(),
 * without loading libdw: the elfutils version the symbolizer was built
 * against and the identity (size, mtime) of the libdw file at its
 * build-time path, so that results made by another libdw are kept apart.
 * A static string.
 */
const char *sym_dw_version(void);

/* From here on, sym.c's calls of libdw and libelf go through the table. */
#ifndef SYM_DW_NO_REDIRECT
#define dwarf_attr (sym_dw.dwarf_attr)
#define dwarf_attr_integrate (sym_dw.dwarf_attr_integrate)
#define dwarf_child (sym_dw.dwarf_child)
#define dwarf_cu_info (sym_dw.dwarf_cu_info)
#define dwarf_diecu (sym_dw.dwarf_diecu)
#define dwarf_filesrc (sym_dw.dwarf_filesrc)
#define dwarf_formstring (sym_dw.dwarf_formstring)
#define dwarf_formudata (sym_dw.dwarf_formudata)
#define dwarf_getsrc_die (sym_dw.dwarf_getsrc_die)
#define dwarf_getsrcfiles (sym_dw.dwarf_getsrcfiles)
#define dwarf_haspc (sym_dw.dwarf_haspc)
#define dwarf_linecol (sym_dw.dwarf_linecol)
#define dwarf_lineno (sym_dw.dwarf_lineno)
#define dwarf_linesrc (sym_dw.dwarf_linesrc)
#define dwarf_siblingof (sym_dw.dwarf_siblingof)
#define dwarf_tag (sym_dw.dwarf_tag)
#define dwelf_dwarf_gnu_debugaltlink (sym_dw.dwelf_dwarf_gnu_debugaltlink)
#define dwelf_elf_gnu_debuglink (sym_dw.dwelf_elf_gnu_debuglink)
#define dwfl_addrmodule (sym_dw.dwfl_addrmodule)
#define dwfl_begin (sym_dw.dwfl_begin)
#define dwfl_build_id_find_elf (sym_dw.dwfl_build_id_find_elf)
#define dwfl_end (sym_dw.dwfl_end)
#define dwfl_errmsg (sym_dw.dwfl_errmsg)
#define dwfl_module_addrdie (sym_dw.dwfl_module_addrdie)
#define dwfl_module_addrinfo (sym_dw.dwfl_module_addrinfo)
#define dwfl_module_build_id (sym_dw.dwfl_module_build_id)
#define dwfl_module_getdwarf (sym_dw.dwfl_module_getdwarf)
#define dwfl_module_getelf (sym_dw.dwfl_module_getelf)
#define dwfl_module_info (sym_dw.dwfl_module_info)
#define dwfl_module_nextcu (sym_dw.dwfl_module_nextcu)
#define dwfl_offline_section_address (sym_dw.dwfl_offline_section_address)
#define dwfl_report_begin (sym_dw.dwfl_report_begin)
#define dwfl_report_elf (sym_dw.dwfl_report_elf)
#define dwfl_report_end (sym_dw.dwfl_report_end)
#define dwfl_standard_find_debuginfo (sym_dw.dwfl_standard_find_debuginfo)
#define elf_getdata (sym_dw.elf_getdata)
#define elf_getshdrstrndx (sym_dw.elf_getshdrstrndx)
#define elf_nextscn (sym_dw.elf_nextscn)
#define elf_strptr (sym_dw.elf_strptr)
#define gelf_getchdr (sym_dw.gelf_getchdr)
#define gelf_getshdr (sym_dw.gelf_getshdr)
#endif

#endif
