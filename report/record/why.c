/* SPDX-License-Identifier: MIT */
/*
 * why.c - causes for sqlprof record's warnings, found rather than
 * guessed: the SQLPROF_* variables the preload will ignore (checked once
 * here, so the preload never writes to the program's stderr), and why a
 * command could not have loaded libsqlprof.so (not found, setuid, static).
 * What the processes themselves saw comes in their statistics (enum
 * sp_seen); the warnings are cmd-record.c's.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sp_wire.h"
#include "why.h"

struct envvar {
	const char *name;
	enum { V_DOUBLE, V_LONG, V_WORDS } type;
	double lo, hi;
	const char *words; /* V_WORDS: space-separated */
};

/* The variables preload/config.c, life.c and stats.c read, with the
 * ranges they accept (keep in step). */
static const struct envvar vars[] = {
	{ "SQLPROF_RATE", V_DOUBLE, 0, 1, NULL },
	{ "SQLPROF_SEED", V_LONG, 0, (double)LONG_MAX, NULL },
	{ "SQLPROF_SLOW_MS", V_DOUBLE, 0, 86400000, NULL },
	{ "SQLPROF_DEPTH", V_LONG, 1, SP_STACK_MAX, NULL },
	{ "SQLPROF_SEND_TIMEOUT_MS", V_LONG, 0, 10000, NULL },
	{ "SQLPROF_FOLLOW", V_LONG, 0, 1, NULL },
	{ "SQLPROF_PLANS", V_LONG, 0, 1, NULL },
	{ "SQLPROF_PLANS_MAX", V_LONG, 1, (double)SP_PLANS_MAX_LIMIT, NULL },
	{ "SQLPROF_STATS_MB", V_LONG, 1, 4095, NULL },
	{ "SQLPROF_CLOCK", V_WORDS, 0, 0, "auto tsc monotonic" },
	{ "SQLPROF_INLINE", V_LONG, 0, 1, NULL },
	{ "SQLPROF_TEXTS_PER_SHAPE", V_LONG, 0, (double)(1L << 30), NULL },
	{ "SQLPROF_UNWIND", V_WORDS, 0, 0, "cfi libgcc" },
};

static int word_in(const char *v, const char *words)
{
	size_t n = strlen(v);

	for (const char *w = words; *w;) {
		size_t k = strcspn(w, " ");

		if (k == n && !strncmp(w, v, n))
			return 1;
		w += k + (w[k] == ' ');
	}
	return 0;
}

static void print_clean(FILE *f, const char *s)
{
	for (; *s; s++)
		fputc((unsigned char)*s >= 0x20 && (unsigned char)*s < 0x7f ? *s : '?', f);
}

int sp_why_env(FILE *f, const char *const *skip)
{
	int bad = 0;

	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
		const struct envvar *v = &vars[i];
		const char *val = getenv(v->name);
		char *end, why[96];
		int ok = 1;

		if (!val || !*val)
			continue;
		for (const char *const *s = skip; s && *s; s++)
			if (!strcmp(*s, v->name))
				val = NULL;
		if (!val)
			continue;
		errno = 0;
		if (v->type == V_DOUBLE) {
			double d = strtod(val, &end);

			ok = !errno && !*end && d >= v->lo && d <= v->hi;
			snprintf(why, sizeof(why), "expected a number from %g to %g", v->lo, v->hi);
		} else if (v->type == V_LONG) {
			long l = strtol(val, &end, 10);

			ok = !errno && !*end && (double)l >= v->lo && (double)l <= v->hi;
			snprintf(why, sizeof(why), "expected an integer from %ld to %ld",
				 (long)v->lo, (long)v->hi);
		} else {
			ok = word_in(val, v->words);
			snprintf(why, sizeof(why), "expected one of: %s", v->words);
		}
		if (ok)
			continue;
		bad++;
		if (f) {
			fprintf(f, "sqlprof: warning: ignoring %s=", v->name);
			print_clean(f, val);
			fprintf(f, " (%s); the profiled processes use the default\n", why);
		}
	}
	return bad;
}

/* path of cmd as execvp would find it, into out; 0 or -1 (not found). */
static int find_cmd(const char *cmd, char *out, size_t len)
{
	const char *path = getenv("PATH");

	if (strchr(cmd, '/')) {
		snprintf(out, len, "%s", cmd);
		return access(out, F_OK);
	}
	if (!path)
		path = "/usr/local/bin:/usr/bin:/bin";
	for (const char *p = path;;) {
		size_t k = strcspn(p, ":");

		snprintf(out, len, "%.*s%s%s", (int)k, k ? p : ".", "/", cmd);
		if (access(out, X_OK) == 0)
			return 0;
		if (!p[k])
			break;
		p += k + 1;
	}
	return -1;
}

/* 1 when the ELF file at path has no program interpreter and needs no
 * library (statically linked, static-pie too: -static-pie and Go's
 * -buildmode=pie without cgo keep a dynamic section for their own
 * relocations, but no loader runs them), 0 when it has one or is no ELF
 * file we can read. */
static int elf_static(const char *path)
{
	Elf64_Ehdr eh;
	Elf64_Phdr ph;
	int fd = open(path, O_RDONLY | O_CLOEXEC), st = 0;
	uint64_t dyn_off = 0, dyn_size = 0;

	if (fd < 0)
		return 0;
	if (pread(fd, &eh, sizeof(eh), 0) == (ssize_t)sizeof(eh) &&
	    !memcmp(eh.e_ident, ELFMAG, SELFMAG) && eh.e_ident[EI_CLASS] == ELFCLASS64 &&
	    eh.e_phentsize == sizeof(ph) && eh.e_phnum < 1024 &&
	    (eh.e_type == ET_EXEC || eh.e_type == ET_DYN)) {
		st = 1;
		for (unsigned i = 0; i < eh.e_phnum; i++) {
			if (pread(fd, &ph, sizeof(ph), (off_t)(eh.e_phoff + i * sizeof(ph))) !=
				    (ssize_t)sizeof(ph) ||
			    ph.p_type == PT_INTERP) {
				st = 0;
				break;
			}
			if (ph.p_type == PT_DYNAMIC) {
				dyn_off = ph.p_offset;
				dyn_size = ph.p_filesz;
			}
		}
		/* a dynamic section without an interpreter: static-pie, unless it
		 * needs libraries (a shared library run as a program) */
		for (uint64_t o = 0;
		     st && dyn_size && o + sizeof(Elf64_Dyn) <= dyn_size && o < (1u << 20);
		     o += sizeof(Elf64_Dyn)) {
			Elf64_Dyn d;

			if (pread(fd, &d, sizeof(d), (off_t)(dyn_off + o)) != (ssize_t)sizeof(d) ||
			    d.d_tag == DT_NULL)
				break;
			if (d.d_tag == DT_NEEDED)
				st = 0;
		}
	}
	close(fd);
	return st;
}

const char *sp_why_not_loaded(const char *cmd, char *buf, size_t len)
{
	char path[PATH_MAX];
	struct stat st;

	if (find_cmd(cmd, path, sizeof(path)) < 0 || stat(path, &st) < 0) {
		snprintf(buf, len, "%s was not found", cmd);
		return buf;
	}
	if ((st.st_mode & (S_ISUID | S_ISGID)) && getuid() != 0) {
		snprintf(buf, len, "%s is set%sid: the loader ignores LD_PRELOAD for it", path,
			 st.st_mode & S_ISUID ? "u" : "g");
		return buf;
	}
	if (elf_static(path)) {
		snprintf(buf, len, "%s is statically linked: there is no loader to preload with",
			 path);
		return buf;
	}
	snprintf(buf, len,
		 "%s is dynamically linked: its environment was replaced or LD_PRELOAD cleared "
		 "before any program that could load the profiler ran",
		 path);
	return buf;
}
