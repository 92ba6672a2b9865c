/* SPDX-License-Identifier: MIT */
/*
 * collect-files.c - the files processes leave when they cannot hand their
 * data to a collector (collect.h: sp_coll_read_unreported,
 * sp_coll_read_gone, sp_coll_read_texts): each a sequence of messages,
 * validated and applied as received ones.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "collect-int.h"

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Largest file read: every chunk of a statistics copy, as messages. */
#define UNREP_FILE_MAX ((size_t)SP_STATS_COPY_MAX_CHUNKS * (SP_STATS_CHUNK + 256) + SP_MSG_MAX)

/* Apply the messages of the file at path (unlinked once opened), each
 * checked as any message; buf holds SP_MSG_MAX bytes. Returns 0 when the
 * whole file was applied, 1 when a message of it was refused (those
 * before it are applied), -1 when it is no file of ours to read. */
static int read_msg_file(struct sp_coll *c, const char *path, uint8_t *buf)
{
	struct stat st;
	off_t off = 0;
	int rc = -1;
	FILE *f = fopen(path, "rbe");

	unlink(path);
	if (!f)
		return -1;
	/* a file of our own uid's, in our 0700 directory; still checked
	 * record by record like any message */
	if (fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) &&
	    (size_t)st.st_size <= UNREP_FILE_MAX) {
		while (off + (off_t)sizeof(struct sp_msg_hdr) <= st.st_size) {
			struct sp_msg_hdr mh;

			if (fread(&mh, sizeof(mh), 1, f) != 1 || mh.len < sizeof(mh) ||
			    mh.len > SP_MSG_MAX || off + (off_t)mh.len > st.st_size)
				break;
			memcpy(buf, &mh, sizeof(mh));
			if (fread(buf + sizeof(mh), mh.len - sizeof(mh), 1, f) != 1 &&
			    mh.len > sizeof(mh))
				break;
			if (sp_coll_message(c, buf, mh.len, 0) < 0)
				break;
			off += mh.len;
		}
		rc = off == st.st_size ? 0 : 1;
	}
	fclose(f);
	return rc;
}

/* The names in dir that start with prefix, sorted (oldest first for
 * PREFIX.PID.TIME of one pid); *n of them, or NULL. */
static char **dir_names(const char *dir, const char *prefix, size_t *n)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char **names = NULL;
	size_t cap = 0, plen = strlen(prefix);

	*n = 0;
	if (!d)
		return NULL;
	while ((e = readdir(d))) {
		if (strncmp(e->d_name, prefix, plen))
			continue;
		if (SP_GROW(names, cap, *n + 1, 16) < 0)
			break;
		if (!(names[*n] = strdup(e->d_name)))
			break;
		(*n)++;
	}
	closedir(d);
	if (*n)
		qsort(names, *n, sizeof(*names), name_cmp);
	return names;
}

size_t sp_coll_read_unreported(struct sp_coll *c, const char *dir)
{
	size_t n = 0, done = 0;
	char **names = dir_names(dir, "unrep.", &n);
	uint8_t *buf = n ? malloc(SP_MSG_MAX) : NULL;

	/* unrep.PID.TIME: an exec'd image after the one before it */
	for (size_t i = 0; buf && i < n; i++) {
		char path[4096];

		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		if (read_msg_file(c, path, buf) >= 0)
			done++;
	}
	free(buf);
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return done;
}

size_t sp_coll_read_gone(struct sp_coll *c, const char *dir, size_t *bad)
{
	size_t n = 0, done = 0, nbad = 0;
	char **names = dir_names(dir, "gone.", &n);
	uint8_t *buf = n ? malloc(SP_MSG_MAX) : NULL;

	for (size_t i = 0; buf && i < n; i++) {
		char path[4096], *end;
		unsigned long long pid, ino;
		const char *q = names[i] + 5;

		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		/* gone.PID.INO.NS */
		errno = 0;
		pid = strtoull(q, &end, 10);
		ino = *end == '.' ? strtoull(end + 1, &end, 10) : 0;
		if (errno || *end != '.' || !pid || pid > UINT32_MAX || !ino) {
			unlink(path);
			nbad++;
			continue;
		}
		if (read_msg_file(c, path, buf) != 0) {
			nbad++;
			continue;
		}
		/* the image's statistics, come again in full (as copies):
		 * what an earlier agent held of them is taken off */
		if (c->stats_added)
			c->stats_added(c, (uint32_t)pid, (uint64_t)ino);
		done++;
	}
	free(buf);
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	if (bad)
		*bad = nbad;
	return done;
}

int sp_coll_texts(struct sp_coll *c, const uint8_t *msg, size_t len)
{
	uint64_t *rec_buf = malloc(REC_BUF_WORDS * sizeof(uint64_t));
	struct msg_info mi;
	size_t off;

	if (!rec_buf)
		return fail(c, "out of memory", 0);
	if (coll_msg_check(c, msg, len, 0, &mi, rec_buf) < 0) {
		free(rec_buf);
		return -1;
	}
	for (off = sizeof(mi.mh); off < len;) { /* every record: SQL only */
		struct sp_rec_hdr rh;

		memcpy(&rh, msg + off, sizeof(rh));
		if (rh.type != SP_REC_SQL) {
			free(rec_buf);
			return fail(c, "a texts file holds a record other than SQL", off);
		}
		off += rh.len;
	}
	for (off = sizeof(mi.mh); off < len;) {
		struct sp_rec_hdr rh;

		memcpy(&rh, msg + off, sizeof(rh));
		memcpy(rec_buf, msg + off, rh.len);
		coll_apply(c, NULL, (const uint8_t *)rec_buf, SP_REC_SQL);
		c->records++;
		off += rh.len;
	}
	free(rec_buf);
	return 0;
}

/* Largest texts file read: the preload keeps at most 16 MiB of texts,
 * each with a record header (48 bytes) and a message header per 64 KiB. */
#define TEXTS_FILE_MAX ((size_t)64 << 20)

size_t sp_coll_read_texts(struct sp_coll *c, const char *dir, size_t *bad)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	uint8_t *buf = NULL;
	size_t texts = 0, nbad = 0;

	if (!d)
		goto out;
	while ((e = readdir(d))) {
		char path[4096];
		struct stat st;
		uint64_t before;
		off_t off = 0;
		FILE *f;

		if (strncmp(e->d_name, "texts.", 6))
			continue;
		if (!buf && !(buf = malloc(SP_MSG_MAX)))
			break;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		f = fopen(path, "rbe");
		unlink(path);
		if (!f)
			continue;
		before = c->sqls.count;
		/* a file of our own uid's, in our 0700 directory; still
		 * checked record by record like any message */
		if (fstat(fileno(f), &st) < 0 || !S_ISREG(st.st_mode) ||
		    (size_t)st.st_size > TEXTS_FILE_MAX) {
			nbad++;
			fclose(f);
			continue;
		}
		while (off + (off_t)sizeof(struct sp_msg_hdr) <= st.st_size) {
			struct sp_msg_hdr mh;

			if (fread(&mh, sizeof(mh), 1, f) != 1 || mh.len < sizeof(mh) ||
			    mh.len > SP_MSG_MAX || off + (off_t)mh.len > st.st_size) {
				nbad++;
				break;
			}
			memcpy(buf, &mh, sizeof(mh));
			if (mh.len > sizeof(mh) &&
			    fread(buf + sizeof(mh), mh.len - sizeof(mh), 1, f) != 1) {
				nbad++;
				break;
			}
			if (sp_coll_texts(c, buf, mh.len) < 0) {
				nbad++;
				break;
			}
			off += mh.len;
		}
		texts += c->sqls.count - before;
		fclose(f);
	}
	closedir(d);
out:
	free(buf);
	if (bad)
		*bad = nbad;
	return texts;
}
