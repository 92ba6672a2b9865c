/* SPDX-License-Identifier: MIT */
/*
 * untrusted.h - opening a SQLite file that someone else may have made (a
 * profile from a pull request's CI run) so that reading it can neither
 * change anything nor run without end. What the file must contain is the
 * caller's business (profile.c checks the format); this only decides how
 * it is opened and which schema objects are acceptable.
 */
#ifndef SP_UNTRUSTED_H
#define SP_UNTRUSTED_H

#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Every table a reader of a profile uses (docs/profile-format.md). */
extern const char *const sp_profile_tables[];

/* Open the database name (a path, or a URI when flags has
 * SQLITE_OPEN_URI) read-only and defensively: SQLITE_DBCONFIG_DEFENSIVE,
 * no trusted schema, views and triggers disabled, no extensions, no
 * attached databases, values of at most 64 MiB, and a budget of VM work
 * (a progress handler) of SP_UNTRUSTED_FLOOR_OPS plus
 * SP_UNTRUSTED_OPS_PER_BYTE per byte of size, the file's size, or what
 * SQLPROF_READ_WORK says (sp_untrusted_config). Then
 * checks that every name of tables that exists in the schema is an
 * ordinary table: not a view, a virtual table, or a table with generated
 * columns. Returns the handle, or NULL with a one-line reason (not naming
 * the file, terminal-safe) in err. */
sqlite3 *sp_untrusted_open(const char *name, int flags, off_t size, const char *const *tables,
			   char *err, size_t errlen);

/* Column i of st's row as a count: a negative value (a hostile or broken
 * profile) reads as 0. */
uint64_t sp_col_u64(sqlite3_stmt *st, int i);

#define SP_UNTRUSTED_FLOOR_OPS 200000000LL /* about 2 s of VM work here */
#define SP_UNTRUSTED_OPS_PER_BYTE 1000LL

/* Read SQLPROF_READ_WORK, the budget a user may set instead (VM
 * instructions per profile, SP_UNTRUSTED_MIN_WORK to
 * SP_UNTRUSTED_MAX_WORK). Returns 0, or -1 with a one-line reason in err
 * when it is set to anything else. */
int sp_untrusted_config(char *err, size_t errlen);

#define SP_UNTRUSTED_MIN_WORK 1000000LL
#define SP_UNTRUSTED_MAX_WORK 1000000000000000LL

/* When a database opened by sp_untrusted_open used up its work budget
 * (its statements then fail with SQLITE_INTERRUPT), copy a one-line
 * reason naming it into err and return 1; else return 0 and leave err. */
int sp_untrusted_exhausted(char *err, size_t errlen);

#endif
