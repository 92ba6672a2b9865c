/* SPDX-License-Identifier: MIT */
/*
 * outfile.c - the output files of `record` and `export`, written without
 * destroying anything that is not ours (outfile.h has the rules). The
 * profile's contents are profile.c's business; this file only decides
 * where they may go, and what happens to what was there before.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "outfile.h"
#include "profile.h"
#include "profile-write.h"
#include "untrusted.h"
#include "util.h"

/* The first 16 bytes of every SQLite database file. */
static const char sqlite_magic[16] = "SQLite format 3";

/* 1 when the 16 bytes at the start of path are SQLite's header, 0 when
 * not, -1 (errno) when path cannot be read. */
static int has_sqlite_header(const char *path, int *ours)
{
	unsigned char head[100];
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);

	*ours = 0;
	if (fd < 0)
		return -1;
	n = read(fd, head, sizeof(head));
	close(fd);
	if (n < (ssize_t)sizeof(sqlite_magic) || memcmp(head, sqlite_magic, sizeof(sqlite_magic)))
		return 0;
	/* the header's application id (offset 68, big-endian) */
	*ours = n == (ssize_t)sizeof(head) &&
		((uint32_t)head[68] << 24 | (uint32_t)head[69] << 16 | (uint32_t)head[70] << 8 |
		 head[71]) == SP_PROFILE_APP_ID;
	return 1;
}

/* 1 when the SQLite database at path has a meta row 'format', as every
 * profile has; 0 otherwise (no such table, unreadable). Opened read-only
 * and immutable: no lock, no -wal or -shm file, no journal rolled back,
 * nothing written anywhere. */
static int has_profile_meta(const char *path)
{
	static const char hexd[] = "0123456789ABCDEF";
	static const char *const meta_only[] = { "meta", NULL };
	char why[256];
	sqlite3 *db = NULL;
	sqlite3_stmt *st = NULL;
	char *uri = malloc(3 * strlen(path) + 32), *u;
	int found = 0;

	if (!uri)
		return 0;
	u = uri + sprintf(uri, "file:");
	for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
		if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		    (*p >= '0' && *p <= '9') || strchr("/-._~", *p))
			*u++ = (char)*p;
		else {
			*u++ = '%';
			*u++ = hexd[*p >> 4];
			*u++ = hexd[*p & 15];
		}
	}
	strcpy(u, "?immutable=1");
	/* a hostile file (a view named meta that never ends) is no profile */
	db = sp_untrusted_open(uri, SQLITE_OPEN_URI, 0, meta_only, why, sizeof(why));
	if (db &&
	    sqlite3_prepare_v2(db, "SELECT 1 FROM meta WHERE key='format'", -1, &st, NULL) ==
		    SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW)
		found = 1;
	sqlite3_finalize(st);
	sqlite3_close(db);
	free(uri);
	return found;
}

enum sp_out_kind sp_out_classify(const char *path, char *err, size_t errlen)
{
	struct stat sb;
	int h, ours;

	if (stat(path, &sb) < 0) {
		if (errno == ENOENT)
			return SP_OUT_NONE;
		snprintf(err, errlen, "%s", strerror(errno));
		return SP_OUT_OTHER;
	}
	if (S_ISDIR(sb.st_mode)) {
		snprintf(err, errlen, "it is a directory");
		return SP_OUT_OTHER;
	}
	if (!S_ISREG(sb.st_mode)) {
		snprintf(err, errlen, "it is not a regular file");
		return SP_OUT_OTHER;
	}
	if (sb.st_size == 0)
		return SP_OUT_EMPTY;
	h = has_sqlite_header(path, &ours);
	if (h < 0) {
		snprintf(err, errlen, "%s", strerror(errno));
		return SP_OUT_OTHER;
	}
	if (!h) {
		snprintf(err, errlen, "it is not a sqlprof profile (not a SQLite database)");
		return SP_OUT_OTHER;
	}
	/* a profile says so in its header (record's start read the old one
	 * and its .old through SQLite, 2-4 ms); one written before the
	 * application id is looked at inside */
	if (!ours && !has_profile_meta(path)) {
		snprintf(err, errlen,
			 "it is a SQLite database but not a sqlprof profile (no meta table with "
			 "a format key)");
		return SP_OUT_OTHER;
	}
	return SP_OUT_PROFILE;
}

int sp_out_check(const char *path, char *err, size_t errlen)
{
	char why[PATH_MAX + 128];
	char *old = NULL, *probe = NULL;
	enum sp_out_kind k;
	int fd, rc = -1;

	if (!*path) {
		snprintf(err, errlen, "-o wants a file name");
		return -1;
	}
	k = sp_out_classify(path, why, sizeof(why));
	if (k == SP_OUT_OTHER) {
		snprintf(err, errlen, "refusing to overwrite %s: %s", path, why);
		return -1;
	}
	/* A profile protected against writing is kept as it is, although
	 * the rename that replaces it would be allowed. */
	if (k != SP_OUT_NONE && access(path, W_OK) < 0) {
		snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
		return -1;
	}
	if (asprintf(&old, "%s.old", path) < 0 ||
	    asprintf(&probe, "%s.tmp.%d", path, (int)getpid()) < 0) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	if (k == SP_OUT_PROFILE && sp_out_classify(old, why, sizeof(why)) == SP_OUT_OTHER) {
		snprintf(err, errlen, "refusing to replace %s with the previous profile: %s", old,
			 why);
		goto out;
	}
	/* The name sp_profile_write creates first, so the same directory,
	 * permissions and file system; one byte catches a full disk. */
	fd = open(probe, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		snprintf(err, errlen, "cannot create %s: %s", path, strerror(errno));
		goto out;
	}
	if (write(fd, "", 1) != 1) {
		snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
		close(fd);
		unlink(probe);
		goto out;
	}
	close(fd);
	unlink(probe);
	rc = 0;
out:
	free(old);
	free(probe);
	return rc;
}

/* Write c at another place when path failed: $TMPDIR (or /tmp), then the
 * current directory, as sqlprof-PID.db; never over an existing file.
 * Returns 0 with the name in saved, or -1. */
static int save_elsewhere(struct sp_coll *c, const struct sp_meta *m, char *saved, size_t savedlen)
{
	const char *tmp = getenv("TMPDIR");
	char cwd[PATH_MAX], err[512];
	const char *dirs[2];
	struct stat sb;

	dirs[0] = tmp && *tmp ? tmp : "/tmp";
	dirs[1] = getcwd(cwd, sizeof(cwd)) ? cwd : ".";
	for (int i = 0; i < 2; i++) {
		snprintf(saved, savedlen, "%s/sqlprof-%d.db", dirs[i], (int)getpid());
		if (lstat(saved, &sb) == 0 || errno != ENOENT)
			continue;
		if (sp_profile_write(saved, c, m, err, sizeof(err)) == 0)
			return 0;
	}
	saved[0] = 0;
	return -1;
}

int sp_out_write(const char *path, struct sp_coll *c, const struct sp_meta *m, char *saved,
		 size_t savedlen, char *err, size_t errlen)
{
	char why[PATH_MAX + 128];
	char *old = NULL, *oldtmp = NULL;
	enum sp_out_kind k;
	int linked = 0, moved = 0, rc = -1;

	saved[0] = 0;
	if (asprintf(&old, "%s.old", path) < 0 ||
	    asprintf(&oldtmp, "%s.tmp.%d", old, (int)getpid()) < 0) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	/* Again: the command may have created or replaced path meanwhile. */
	k = sp_out_classify(path, why, sizeof(why));
	if (k == SP_OUT_OTHER) {
		snprintf(err, errlen, "not overwriting %s: %s", path, why);
		goto elsewhere;
	}
	if (k == SP_OUT_PROFILE) {
		if (sp_out_classify(old, why, sizeof(why)) == SP_OUT_OTHER) {
			snprintf(err, errlen, "not replacing %s: %s", old, why);
			goto elsewhere;
		}
		/* A second name for the previous profile, so that path is
		 * replaced atomically and nothing is lost if writing fails;
		 * without hard links, move it (path is missing meanwhile). */
		if (link(path, oldtmp) == 0)
			linked = 1;
		else if (rename(path, old) == 0)
			moved = 1;
		else {
			snprintf(err, errlen, "cannot keep %s as %s: %s", path, old,
				 strerror(errno));
			goto elsewhere;
		}
	}
	if (sp_profile_write(path, c, m, why, sizeof(why)) < 0) {
		if (strstr(why, path))
			snprintf(err, errlen, "%s", why);
		else
			snprintf(err, errlen, "cannot write %s: %s", path, why);
		if (linked)
			unlink(oldtmp);
		if (moved)
			rename(old, path);
		goto elsewhere;
	}
	/* If this rename fails, the previous profile stays as oldtmp. */
	if (linked)
		(void)rename(oldtmp, old);
	rc = 0;
	goto out;
elsewhere:
	if (save_elsewhere(c, m, saved, savedlen) == 0)
		rc = 1;
out:
	free(old);
	free(oldtmp);
	return rc;
}

/* The descriptor N when path names an already open descriptor of ours:
 * /dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N or /proc/PID/fd/N
 * with our pid, itself or through symlinks (up to 16, relative ones
 * resolved against their directory). -1 otherwise. Such a path must be
 * written through the descriptor (its offset, its O_APPEND), never
 * replaced: /dev/stdout is a symlink, and the file behind it is the
 * shell's redirection. */
static int fd_alias(const char *path)
{
	char cur[PATH_MAX], link[PATH_MAX], mine[64];
	int pl;

	if (strlen(path) >= sizeof(cur))
		return -1;
	strcpy(cur, path);
	pl = snprintf(mine, sizeof(mine), "/proc/%d/fd/", (int)getpid());
	for (int depth = 0; depth < 16; depth++) {
		const char *num = NULL;
		char *end, *slash;
		ssize_t n;
		long fd;

		if (!strcmp(cur, "/dev/stdout"))
			return 1;
		if (!strcmp(cur, "/dev/stderr"))
			return 2;
		if (!strncmp(cur, "/dev/fd/", 8))
			num = cur + 8;
		else if (!strncmp(cur, "/proc/self/fd/", 14))
			num = cur + 14;
		else if (pl > 0 && !strncmp(cur, mine, (size_t)pl))
			num = cur + pl;
		if (num) {
			errno = 0;
			fd = strtol(num, &end, 10);
			if (!errno && end != num && !*end && fd >= 0 && fd < INT_MAX)
				return (int)fd;
			return -1;
		}
		n = readlink(cur, link, sizeof(link) - 1);
		if (n < 0)
			return -1; /* not a symlink (or gone): the end of the chain */
		link[n] = 0;
		if (link[0] == '/' || !(slash = strrchr(cur, '/'))) {
			memcpy(cur, link, (size_t)n + 1);
		} else {
			size_t dl = (size_t)(slash - cur) + 1;

			if (dl + (size_t)n >= sizeof(cur))
				return -1;
			memcpy(cur + dl, link, (size_t)n + 1);
		}
	}
	return -1;
}

/* out is another name of the open descriptor alias (/dev/stdout and the
 * like): *fd a duplicate of it, unless it is a database. SP_EXIT_OK, or
 * an exit code with a reason in err. */
static int open_alias(int alias, const char *out, const char *input, int *fd, char *err,
		      size_t errlen)
{
	struct stat sb, in;
	int ours;

	/* /dev/stdout and the like: through the open descriptor */
	*fd = fcntl(alias, F_DUPFD_CLOEXEC, 3);
	if (*fd < 0) {
		snprintf(err, errlen, "%s: %s", out, strerror(errno));
		return SP_EXIT_INTERNAL;
	}
	/* `>> p.db`: appending to a database is writing over it */
	if (fstat(*fd, &sb) == 0 && S_ISREG(sb.st_mode) &&
	    ((stat(input, &in) == 0 && in.st_dev == sb.st_dev && in.st_ino == sb.st_ino) ||
	     has_sqlite_header(out, &ours) > 0)) {
		snprintf(err, errlen, "refusing to write %s: it is a SQLite database (a profile?)",
			 out);
		close(*fd);
		return SP_EXIT_USAGE;
	}
	return SP_EXIT_OK;
}

/* A regular file (final, malloc'd, owned from here; NULL: the reason is
 * in errno), new or replaced: *fd a temporary in its directory, xo->tmp
 * its name and xo->final the name it gets when complete; or, where the
 * directory is not ours to write (existing: the file exists), the file
 * itself, truncated. SP_EXIT_OK, or an exit code with a reason in err. */
static int open_temp(struct sp_out_export *xo, const char *out, char *final, const struct stat *sb,
		     mode_t mode, int existing, int *fd, char *err, size_t errlen)
{
	char *dir = NULL, *slash;

	/* A regular file, new or replaced: written under a temporary name in
	 * its directory and renamed over it when complete, so that a failed
	 * export leaves what was there (or nothing) and removes only the
	 * temporary it created. */
	if (!final || !(dir = strdup(final))) {
		snprintf(err, errlen, "%s: %s", out, strerror(errno ? errno : ENOMEM));
		free(final);
		return SP_EXIT_INTERNAL;
	}
	slash = strrchr(dir, '/');
	if (slash)
		slash[1] = 0;
	else
		dir[0] = 0;
	if (asprintf(&xo->tmp, "%s.sqlprof-export.XXXXXX", dir) < 0) {
		xo->tmp = NULL;
		snprintf(err, errlen, "out of memory");
		free(final);
		free(dir);
		return SP_EXIT_INTERNAL;
	}
	free(dir);
	*fd = mkostemp(xo->tmp, O_CLOEXEC); /* mode 0600 */
	if (*fd < 0 && errno == EACCES && existing) {
		/* a file we may write in a directory we may not: in place,
		 * made private before anything is written into it */
		free(xo->tmp);
		xo->tmp = NULL;
		*fd = open(final, O_WRONLY | O_CLOEXEC | O_NOCTTY);
		if (*fd < 0 || ((sb->st_mode & 077) && fchmod(*fd, mode) < 0) ||
		    ftruncate(*fd, 0) < 0) {
			snprintf(err, errlen, "%s: %s", out, strerror(errno));
			if (*fd >= 0)
				close(*fd);
			free(final);
			return SP_EXIT_INTERNAL;
		}
		free(final);
		return SP_EXIT_OK;
	}
	if (*fd < 0 || (mode != 0600 && fchmod(*fd, mode) < 0)) {
		snprintf(err, errlen, "%s: %s", out, strerror(errno));
		if (*fd >= 0) {
			close(*fd);
			unlink(xo->tmp);
		}
		free(xo->tmp);
		xo->tmp = NULL;
		free(final);
		return SP_EXIT_INTERNAL;
	}
	xo->final = final;
	return SP_EXIT_OK;
}

int sp_out_export_open(struct sp_out_export *xo, const char *out, const char *input, char *err,
		       size_t errlen)
{
	struct stat sb, in, lsb;
	char *final = NULL;
	int fd = -1, h, alias, existing = 0, ours;
	mode_t mode = 0600;

	memset(xo, 0, sizeof(*xo));
	if (!out) {
		xo->f = stdout;
		return SP_EXIT_OK;
	}
	xo->path = out;
	alias = fd_alias(out);
	if (alias >= 0) {
		int rc = open_alias(alias, out, input, &fd, err, errlen);

		if (rc != SP_EXIT_OK)
			return rc;
		goto opened;
	}
	if (stat(out, &sb) < 0) {
		if (errno != ENOENT) {
			snprintf(err, errlen, "%s: %s", out, strerror(errno));
			return SP_EXIT_INTERNAL;
		}
		if (lstat(out, &lsb) == 0) {
			snprintf(err, errlen,
				 "refusing to write %s: it is a symlink to a missing file", out);
			return SP_EXIT_USAGE;
		}
		final = strdup(out);
	} else if (S_ISREG(sb.st_mode)) {
		if (stat(input, &in) == 0 && in.st_dev == sb.st_dev && in.st_ino == sb.st_ino) {
			snprintf(err, errlen,
				 "refusing to overwrite %s: it is the profile being exported", out);
			return SP_EXIT_USAGE;
		}
		h = has_sqlite_header(out, &ours);
		if (h > 0) {
			snprintf(err, errlen,
				 "refusing to overwrite %s: it is a SQLite database (a profile?), "
				 "not an export",
				 out);
			return SP_EXIT_USAGE;
		}
		if (access(out, W_OK) < 0) {
			snprintf(err, errlen, "%s: %s", out, strerror(errno));
			return SP_EXIT_INTERNAL;
		}
		/* the file itself, not a symlink to it, is replaced */
		final = realpath(out, NULL);
		/* exports hold SQL text too: private, whatever it was */
		mode = sb.st_mode & 0700;
		existing = 1;
	} else if (S_ISDIR(sb.st_mode)) {
		snprintf(err, errlen, "%s: %s", out, strerror(EISDIR));
		return SP_EXIT_INTERNAL;
	} else {
		/* a terminal, a pipe, /dev/null: written as it is, never
		 * created, truncated or removed */
		fd = open(out, O_WRONLY | O_CLOEXEC | O_NOCTTY);
		if (fd < 0) {
			snprintf(err, errlen, "%s: %s", out, strerror(errno));
			return SP_EXIT_INTERNAL;
		}
		goto opened;
	}
	{
		int rc = open_temp(xo, out, final, &sb, mode, existing, &fd, err, errlen);

		if (rc != SP_EXIT_OK)
			return rc;
	}
opened:
	xo->f = fdopen(fd, "wb");
	if (!xo->f) {
		snprintf(err, errlen, "%s: %s", out, strerror(errno));
		close(fd);
		if (xo->tmp)
			unlink(xo->tmp);
		free(xo->tmp);
		free(xo->final);
		xo->tmp = xo->final = NULL;
		return SP_EXIT_INTERNAL;
	}
	return SP_EXIT_OK;
}

int sp_out_export_close(struct sp_out_export *xo, int failed)
{
	int bad = 0;

	if (!xo->f)
		return 0;
	bad = fflush(xo->f) != 0 || ferror(xo->f);
	if (xo->path && fclose(xo->f) != 0)
		bad = 1;
	xo->f = NULL;
	if (xo->tmp) {
		/* only ever our temporary is removed */
		if (bad || failed)
			unlink(xo->tmp);
		else if (rename(xo->tmp, xo->final) < 0) {
			unlink(xo->tmp);
			bad = 1;
		}
	}
	free(xo->tmp);
	free(xo->final);
	xo->tmp = xo->final = NULL;
	return bad ? -1 : 0;
}
