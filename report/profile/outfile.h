/* SPDX-License-Identifier: MIT */
/*
 * outfile.h - where `record` and `export` may write, and how: never over
 * data that is not ours. record refuses an output path that holds
 * anything but a sqlprof profile (or an empty file), checks before the
 * command runs that the profile can be created, keeps the previous
 * profile as FILE.old, and saves the data elsewhere when FILE cannot be
 * written at the end. export creates its files 0600, replaces a regular
 * file only once the export is complete (a failed export removes nothing
 * but its own temporary), and never writes over a SQLite database (its
 * input profile included).
 */
#ifndef SP_OUTFILE_H
#define SP_OUTFILE_H

#include <stddef.h>
#include <stdio.h>

/* The recording sp_out_write writes (profile-write.h): declared only, so
 * that an export including this header does not bring in the collector's
 * model. */
struct sp_coll;
struct sp_meta;

/* What a path holds, as far as overwriting it is concerned. */
enum sp_out_kind {
	SP_OUT_NONE,    /* nothing there */
	SP_OUT_EMPTY,   /* an empty regular file: replaceable */
	SP_OUT_PROFILE, /* a sqlprof profile: replaceable, kept as FILE.old */
	SP_OUT_OTHER,   /* anything else: never replaced */
};

/* Classify path without modifying it: a SQLite file whose header carries
 * a profile's application id (SP_PROFILE_APP_ID) is a profile, read no
 * further; another is opened read-only and only its meta table is read.
 * SP_OUT_OTHER comes with a reason in
 * err, not naming path ("it is a directory"); so does an error reaching
 * path (also SP_OUT_OTHER). */
enum sp_out_kind sp_out_classify(const char *path, char *err, size_t errlen);

/* Before `record` runs its command: may a profile be written at path?
 * Refuses (returns -1 with a one-line reason in err) when path or
 * path.old holds something other than a profile or an empty file, when
 * an existing path is not writable, and when no file can be created in
 * path's directory (created and removed at once). Returns 0 otherwise. */
int sp_out_check(const char *path, char *err, size_t errlen);

/* Write the profile of c to path (sp_profile_write), moving a profile
 * already there to path.old first. When path cannot be written (full
 * disk, its directory gone or made read-only, or the command put
 * something other than a profile there), the profile goes to
 * $TMPDIR/sqlprof-PID.db, else ./sqlprof-PID.db, and that name is copied
 * into saved. Returns 0 (written at path), 1 (saved elsewhere; err says
 * why path failed) or -1 (nothing written; err says why). */
int sp_out_write(const char *path, struct sp_coll *c, const struct sp_meta *m, char *saved,
		 size_t savedlen, char *err, size_t errlen);

/* An export's output file. */
struct sp_out_export {
	FILE *f;
	const char *path; /* NULL: standard output */
	char *tmp;        /* a regular file: the temporary written, renamed */
	char *final;      /* over this (-o, its symlinks resolved) at the end */
};

/* Open out for an export of the profile at input (out NULL: standard
 * output). A regular file, new or existing (also through a symlink), is
 * written as a temporary in its directory (0600; an existing file's mode
 * without its group and other bits) that sp_out_export_close renames over
 * it. /dev/stdout, /dev/fd/N and /proc/self/fd/N are written through that
 * descriptor; a device, FIFO or terminal is written as it is. Refuses an
 * existing SQLite database (the input profile above all) and a symlink to
 * nothing. Returns 0, or an exit code (SP_EXIT_USAGE for a refusal,
 * SP_EXIT_INTERNAL for an error) with a one-line reason in err. */
int sp_out_export_open(struct sp_out_export *xo, const char *out, const char *input, char *err,
		       size_t errlen);

/* Flush and close xo. Complete (not failed, no write error): the
 * temporary replaces the regular file. Otherwise the temporary is removed
 * and nothing else is: what -o named stays as it was. Returns 0, or -1 on
 * a write error. */
int sp_out_export_close(struct sp_out_export *xo, int failed);

#endif
