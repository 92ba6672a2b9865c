/* SPDX-License-Identifier: MIT */
/*
 * why.h - causes for sqlprof record's warnings (why.c): bad SQLPROF_*
 * values, and why a command could not load the profiler.
 */
#ifndef SP_WHY_H
#define SP_WHY_H

#include <stdio.h>

/* Check the SQLPROF_* variables of our environment as the preload will
 * read them, except the names in skip (NULL-terminated; those record sets
 * itself). Prints one warning line per bad value to f (none when f is
 * NULL). Returns how many were bad. */
int sp_why_env(FILE *f, const char *const *skip);

/* Why command cmd (as given to execvp) could not have loaded
 * libsqlprof.so: not found, setuid/setgid, statically linked, or else its
 * environment was cleared. Writes a clause into buf, returns buf. */
const char *sp_why_not_loaded(const char *cmd, char *buf, size_t len);

#endif
