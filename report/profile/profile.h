/* SPDX-License-Identifier: MIT */
/*
 * profile.h - the profile file, read side: a SQLite database with a
 * documented schema (docs/profile-format.md). Readers (report, export,
 * diff, check) open it with sp_profile_open and query it with plain SQL;
 * this header is all they need, and it does not bring in the collector's
 * model. The write side (sp_profile_write, from a finished recording) is
 * profile-write.h, included by record and agent only.
 */
#ifndef SP_PROFILE_H
#define SP_PROFILE_H

#include <sqlite3.h>

#define SP_PROFILE_FORMAT 3     /* 2: runs, run_totals, plans; 3: indexes */
#define SP_PROFILE_FORMAT_MIN 2 /* read too: the same tables without indexes */
#define SP_PROFILE_DEFAULT "sqlprof.db"
/* PRAGMA application_id of a profile ("SqPf"): record tells its old
 * output is a profile from the header alone (outfile.c) */
#define SP_PROFILE_APP_ID 0x53715066u

/* Open a profile read-only and check it is one (format version, tables).
 * Returns the handle, or NULL with a one-line reason in err. */
sqlite3 *sp_profile_open(const char *path, char *err, size_t errlen);

#endif
