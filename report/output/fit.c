/* SPDX-License-Identifier: MIT */
/*
 * fit.c - text output that fits the terminal: its width (COLUMNS, else
 * the terminal's through TIOCGWINSZ), a stream that wraps any line still
 * wider than that, and source paths shown relative to their common root.
 * What to shorten first (the SQL, columns) is the printers' choice; the
 * wrap is the last resort that keeps every line within the width.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "fit.h"
#include "util.h"

size_t sp_fit_width(int fd)
{
	const char *cols = getenv("COLUMNS");
	struct winsize ws;

	if (cols && *cols) {
		char *end;
		long v = strtol(cols, &end, 10);

		if (!*end && v >= SP_FIT_MIN && v <= 100000)
			return (size_t)v;
	}
	if (isatty(fd) && ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= SP_FIT_MIN)
		return ws.ws_col;
	return 0;
}

size_t sp_fit_cols(const char *s, size_t n)
{
	size_t w = 0;

	for (size_t i = 0; i < n && s[i]; i++)
		w += ((unsigned char)s[i] & 0xc0) != 0x80;
	return w;
}

struct fit_out {
	FILE *to;
	size_t width;
	char *line;
	size_t len, cap;
};

/* Byte offset in s (n bytes) after at most cols columns. */
static size_t bytes_for(const char *s, size_t n, size_t cols)
{
	size_t i = 0, w = 0;

	while (i < n) {
		size_t j = i + 1;

		while (j < n && ((unsigned char)s[j] & 0xc0) == 0x80)
			j++;
		if (w + 1 > cols)
			break;
		w++;
		i = j;
	}
	return i;
}

/* One line (no newline) out, wrapped at the width: continuation lines
 * take the line's indent and four more columns, and break at a space
 * when there is one in the second half of the room. */
static int emit(struct fit_out *t, const char *s, size_t n)
{
	size_t indent = 0, lead = 0, cut, sp;
	int hash = n && s[0] == '#'; /* a comment line goes on as one */

	while (indent < n && s[indent] == ' ')
		indent++;
	if (indent > t->width / 3)
		indent = t->width / 3;
	while (sp_fit_cols(s, n) > t->width - lead) {
		cut = bytes_for(s, n, t->width - lead);
		for (sp = cut; sp > cut / 2 && s[sp] != ' '; sp--)
			;
		if (sp > cut / 2)
			cut = sp;
		if (fprintf(t->to, "%s%*s%.*s\n", lead && hash ? "#" : "",
			    (int)(lead && hash ? lead - 1 : lead), "", (int)cut, s) < 0)
			return -1;
		s += cut;
		n -= cut;
		while (n && *s == ' ') {
			s++;
			n--;
		}
		lead = indent + 4;
	}
	if (lead && !n)
		return 0;
	return fprintf(t->to, "%s%*s%.*s\n", lead && hash ? "#" : "",
		       (int)(lead && hash ? lead - 1 : lead), "", (int)n, s) < 0
		       ? -1
		       : 0;
}

static ssize_t fit_write(void *cookie, const char *buf, size_t n)
{
	struct fit_out *t = cookie;

	for (size_t i = 0; i < n; i++) {
		if (buf[i] == '\n') {
			if (emit(t, t->line ? t->line : "", t->len) < 0)
				return -1;
			t->len = 0;
			continue;
		}
		if (SP_GROW(t->line, t->cap, t->len + 1, 256) < 0)
			return -1;
		t->line[t->len++] = buf[i];
	}
	return (ssize_t)n;
}

static int fit_close(void *cookie)
{
	struct fit_out *t = cookie;
	int rc = 0;

	if (t->len && fprintf(t->to, "%.*s", (int)t->len, t->line) < 0)
		rc = -1;
	if (fflush(t->to) != 0)
		rc = -1;
	free(t->line);
	free(t);
	return rc;
}

FILE *sp_fit_stream(FILE *to, size_t width)
{
	static const cookie_io_functions_t io = { .write = fit_write, .close = fit_close };
	struct fit_out *t;
	FILE *f;

	if (width < SP_FIT_MIN)
		return NULL;
	t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->to = to;
	t->width = width;
	f = fopencookie(t, "w", io);
	if (!f)
		free(t);
	return f;
}
