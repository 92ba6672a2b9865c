/* SPDX-License-Identifier: MIT */
/*
 * dwload.c - libdw and libelf, loaded when the symbolizer first opens a
 * module (dwload.h says why). The CLI is linked without them; this file
 * dlopens libdw by its soname (SYM_DW_SONAME, taken from the libdw the
 * build found) and fills the table with dlsym, which finds libelf's
 * functions among libdw's dependencies. dlsym returns each symbol's
 * default version, the one a link against this libdw would have bound.
 *
 * It does not symbolize, and never unloads what it loaded.
 */
#include <dlfcn.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>
#include <elfutils/version.h>
#include <gelf.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#define SYM_DW_NO_REDIRECT
#include "dwload.h"

#ifndef SYM_DW_SONAME
#define SYM_DW_SONAME "libdw.so.1"
#endif

struct sym_dw_table sym_dw;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static int load_ok;
static char load_err[512];

/* Once per process (pthread_once): the table, all of it or none. */
static void load(void)
{
	struct sym_dw_table t;
	void *h = dlopen(SYM_DW_SONAME, RTLD_NOW | RTLD_LOCAL);

	if (!h) {
		const char *e = dlerror();

		snprintf(load_err, sizeof(load_err),
			 "cannot load %s (%s): stacks are not symbolized; install libdw1 "
			 "(elfutils) to symbolize them",
			 SYM_DW_SONAME, e ? e : "dlopen failed");
		return;
	}
#define SYM_DW_SYM(f)                                                                       \
	if (!(*(void **)&t.f = dlsym(h, #f))) {                                             \
		snprintf(load_err, sizeof(load_err),                                        \
			 "%s has no %s: stacks are not symbolized; install libdw1 0.%d or " \
			 "later",                                                           \
			 SYM_DW_SONAME, #f, _ELFUTILS_VERSION);                             \
		dlclose(h);                                                                 \
		return;                                                                     \
	}
	SYM_DW_FUNCS(SYM_DW_SYM)
#undef SYM_DW_SYM
	sym_dw = t;
	load_ok = 1;
}

int sym_dw_load(char *err, size_t errlen)
{
	pthread_once(&load_once, load);
	if (load_ok)
		return 0;
	if (err && errlen)
		snprintf(err, errlen, "%s", load_err);
	return -1;
}

int sym_dw_loaded(void)
{
	return load_ok;
}

static pthread_once_t version_once = PTHREAD_ONCE_INIT;
static char version[128];

static void make_version(void)
{
	struct stat sb;

	snprintf(version, sizeof(version), "0.%d", _ELFUTILS_VERSION);
#ifdef SYM_DW_PATH
	if (stat(SYM_DW_PATH, &sb) == 0)
		snprintf(version, sizeof(version), "0.%d %lld %lld.%09ld", _ELFUTILS_VERSION,
			 (long long)sb.st_size, (long long)sb.st_mtim.tv_sec,
			 (long)sb.st_mtim.tv_nsec);
#else
	(void)sb;
#endif
}

const char *sym_dw_version(void)
{
	pthread_once(&version_once, make_version);
	return version;
}
