/* SPDX-License-Identifier: MIT */
/*
 * cmd-top.c - `sqlprof top`: a live table of the costliest queries, over
 * the last refresh interval and in total, like perf top or pg_top.
 *
 * Its readings come from a running agent (the viewer request on its
 * socket, live.h: the agent's exact totals now) or from a profile file,
 * read again at every refresh (the agent replaces it atomically); two
 * readings give the interval's rates. On a terminal it redraws every
 * --delay seconds until q (the terminal restored on every way out:
 * q, SIGINT, SIGTERM, SIGHUP, an error; SIGTSTP restores it, and SIGCONT
 * takes it back; SIGWINCH redraws to the new size); --once prints one
 * frame without escape sequences, for scripts.
 *
 * Every string from the agent or the profile is made terminal-safe
 * (sp_term_clean) before it is printed.
 *
 * What it does not do: keep history beyond the previous reading, or
 * change anything in the agent.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "attrib.h"
#include "cmds.h"
#include "kind.h"
#include "live.h"
#include "profile.h"
#include "query.h"
#include "serve.h"
#include "untrusted.h"

#define VIEW_MAX (256u << 20) /* the largest answer taken from an agent */

/* Sort keys: --sort and the keys pressed (the letter of each). */
enum { K_TIME, K_COUNT, K_RATE, K_MEAN, K_P95, K_ROWS, K_ERRORS, NKEYS };
static const struct {
	const char *name, *what;
	char key;
} sort_keys[NKEYS] = {
	{ "time", "time", 't' },     { "count", "count", 'c' }, { "rate", "exec/s", 'x' },
	{ "mean", "mean", 'm' },     { "p95", "p95", 'p' },     { "rows", "rows", 'r' },
	{ "errors", "errors", 'e' },
};

struct top_opts {
	const char *socket, *profile;
	int once;
	int sort;            /* K_* */
	char query[17];      /* --query, or the row chosen with 1-9: its query_id in hex
			      * (--query: a prefix of it) */
	uint32_t query_kind; /* the chosen row's kind + 1; 0: either */
	int query_set;       /* 1: show that query instead of the table */
	double delay;
	uint64_t nrows; /* 0: as many as fit */
};

static volatile sig_atomic_t quit_sig, winch, tstp;

static void on_signal(int sig)
{
	if (sig == SIGWINCH)
		winch = 1;
	else if (sig == SIGTSTP)
		tstp = 1;
	else
		quit_sig = sig;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: sqlprof top [--socket PATH | PROFILE] [--once] [--delay S] [-n N]\n"
		   "                   [--sort KEY] [--query ID]\n"
		   "\n"
		   "A live table of the costliest queries of a running agent (or of a profile,\n"
		   "read again at every refresh): executions a second, share of db time over\n"
		   "the last interval, and totals.\n"
		   "Keys: q quits; t c x m p r e sort by time, count, exec/s, mean, p95, rows,\n"
		   "errors; 1-9 show the query of that row (its full text, site and figures),\n"
		   "any other key goes back to the table.\n"
		   "\n"
		   "      --socket PATH  the agent's socket (default: the one `sqlprof env` and\n"
		   "                     `sqlprof agent` use)\n"
		   "      --once         print one frame and exit (two readings --delay apart\n"
		   "                     from an agent; no escape sequences)\n"
		   "  -d, --delay S      seconds between refreshes (default 1; 0.1 to 3600)\n"
		   "  -n, --rows N       at most N queries (default: what fits; 20 with --once)\n"
		   "  -s, --sort KEY     time (default: db time in the last interval, else in\n"
		   "                     total), count, rate, mean, p95, rows, errors\n"
		   "  -q, --query ID     one query's details (its query_id, the report's\n"
		   "                     fingerprint_id, or a prefix of it) instead of the table\n"
		   "  -h, --help         this text\n"
		   "\n"
		   "examples:\n"
		   "  sqlprof top\n"
		   "  sqlprof top --once --socket /run/sqlprof-app/sock\n"
		   "  sqlprof top /var/lib/sqlprof/app.db\n");
}

/* ---- readings ----------------------------------------------------------- */

/* Ask the agent at path for its totals. 0, or -1 with a reason. */
static int read_agent(const char *path, struct sp_live *out, char *err, size_t errlen)
{
	struct sockaddr_un sa;
	uint32_t req[2] = { SP_VIEW_MAGIC, SP_VIEW_VERSION }, hdr[2] = { 0, 0 };
	struct iovec iov = { hdr, sizeof(hdr) };
	struct msghdr mh;
	union {
		char b[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct cmsghdr *cm;
	struct pollfd pf;
	struct stat st;
	uint8_t *buf = NULL;
	int fd, mfd = -1, rc = -1;
	ssize_t n;

	memset(&sa, 0, sizeof(sa));
	if (strlen(path) >= sizeof(sa.sun_path)) {
		snprintf(err, errlen, "socket path too long: %s", path);
		return -1;
	}
	sa.sun_family = AF_UNIX;
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = errno;

		snprintf(err, errlen,
			 "no agent at %s: %s (start `sqlprof agent`, or give its --socket)", path,
			 strerror(e));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if (send(fd, req, sizeof(req), MSG_NOSIGNAL) != (ssize_t)sizeof(req)) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		goto out;
	}
	pf.fd = fd;
	pf.events = POLLIN;
	if (poll(&pf, 1, 5000) <= 0) {
		snprintf(err, errlen, "the agent at %s did not answer within 5 s", path);
		goto out;
	}
	memset(&mh, 0, sizeof(mh));
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = u.b;
	mh.msg_controllen = sizeof(u.b);
	n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
	for (cm = n > 0 ? CMSG_FIRSTHDR(&mh) : NULL; cm; cm = CMSG_NXTHDR(&mh, cm))
		if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS &&
		    cm->cmsg_len == CMSG_LEN(sizeof(int)))
			memcpy(&mfd, CMSG_DATA(cm), sizeof(int));
	if (n != (ssize_t)sizeof(hdr) || hdr[0] != SP_VIEW_MAGIC || mfd < 0 ||
	    (mh.msg_flags & (MSG_CTRUNC | MSG_TRUNC))) {
		snprintf(
			err, errlen,
			hdr[0] == SP_VIEW_MAGIC && hdr[1] != SP_VIEW_VERSION
				? "the agent at %s is another version of sqlprof"
				: "the agent at %s sent no answer (an agent older than sqlprof top?)",
			path);
		goto out;
	}
	if (hdr[1] != SP_VIEW_VERSION) {
		snprintf(err, errlen, "the agent at %s is another version of sqlprof", path);
		goto out;
	}
	if (fstat(mfd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size <= 0 ||
	    (uint64_t)st.st_size > VIEW_MAX) {
		snprintf(err, errlen, "the agent's answer is not a readable memory file");
		goto out;
	}
	buf = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, mfd, 0);
	if (buf == MAP_FAILED) {
		buf = NULL;
		snprintf(err, errlen, "mmap: %s", strerror(errno));
		goto out;
	}
	rc = sp_live_decode(buf, (size_t)st.st_size, out, err, errlen);
out:
	if (buf)
		munmap(buf, (size_t)st.st_size);
	if (mfd >= 0)
		close(mfd);
	close(fd);
	return rc;
}

/* The sites of a profile's queries: the one with the most samples, as
 * "function (file:line)" with the file's last component. */
struct sites {
	struct hmap m; /* {fp_id, kind} -> char * */
	char *path;
	int64_t mtime_ns;
	int loaded;
};

static void sites_free(struct sites *s)
{
	size_t it = 0;
	char **v;

	if (s->loaded) {
		while ((v = hmap_next(&s->m, &it, NULL)))
			free(*v);
		hmap_free(&s->m);
	}
	free(s->path);
	memset(s, 0, sizeof(*s));
}

static void sites_from(struct sites *s, sqlite3 *db)
{
	struct sp_attrib at;
	char err[256];

	hmap_init(&s->m, 2 * sizeof(uint64_t), sizeof(char *));
	s->loaded = 1;
	memset(&at, 0, sizeof(at));
	if (sp_attrib_load(db, NULL, &at, err, sizeof(err)) < 0)
		return; /* no sites: the table goes on without them */
	for (size_t i = 0; i < at.nqs; i++) {
		const struct sp_qsite *q = &at.qs[i];
		const struct sp_site *st;
		uint64_t k[2] = { (uint64_t)q->fp_id, q->kind_exec ? SP_KIND_EXEC : SP_KIND_STMT };
		uint64_t *best;
		char **v, *label;
		const char *file;
		int created;

		if (q->site < 0 || (size_t)q->site >= at.nsites)
			continue;
		st = &at.sites[q->site];
		v = hmap_get(&s->m, k, 1, &created);
		if (!v)
			break;
		/* the samples of the site kept so far ride after its text */
		best = *v ? (uint64_t *)(*v + strlen(*v) + 1) : NULL;
		if (best && *best >= q->samples)
			continue;
		file = st->file ? strrchr(st->file, '/') : NULL;
		file = file ? file + 1 : st->file ? st->file : "??";
		label = malloc(strlen(st->function ? st->function : "??") + strlen(file) + 40 +
			       sizeof(uint64_t));
		if (!label)
			break;
		if (st->offset)
			sprintf(label, "%s (+0x%llx)", st->function ? st->function : "??",
				(unsigned long long)st->offset);
		else
			sprintf(label, "%s (%s:%d)", st->function ? st->function : "??", file,
				st->line);
		memcpy(label + strlen(label) + 1, &q->samples, sizeof(uint64_t));
		free(*v);
		*v = label;
	}
	sp_attrib_free(&at);
}

static const char *site_of(const struct sites *s, uint64_t fp_id, uint32_t kind)
{
	uint64_t k[2] = { fp_id, kind };
	char **v = s->loaded ? hmap_get((struct hmap *)&s->m, k, 0, NULL) : NULL;

	return v ? *v : NULL;
}

static int64_t mtime_ns(const char *path)
{
	struct stat st;

	if (stat(path, &st) < 0)
		return -1;
	return (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
}

/* (Re)load s from the profile at path when it changed. */
static void sites_update(struct sites *s, const char *path)
{
	int64_t m = mtime_ns(path);
	char err[256];
	sqlite3 *db;

	if (m < 0 || (s->loaded && s->mtime_ns == m && s->path && !strcmp(s->path, path)))
		return;
	db = sp_profile_open(path, err, sizeof(err));
	if (!db)
		return;
	sites_free(s);
	s->path = strdup(path);
	s->mtime_ns = m;
	sites_from(s, db);
	sqlite3_close(db);
}

/* A reading of a profile file: its queries as rows, its time the agent's
 * last update (else the file's). */
static int read_profile(const char *path, struct sp_live *out, struct sites *sites, char *err,
			size_t errlen)
{
	struct sp_qset qs;
	sqlite3 *db;
	sqlite3_stmt *st;
	int64_t when = -1;

	memset(out, 0, sizeof(*out));
	memset(&qs, 0, sizeof(qs));
	db = sp_profile_open(path, err, errlen);
	if (!db)
		return -1;
	if (sp_qset_load(db, &qs, err, errlen) < 0) {
		sqlite3_close(db);
		return -1;
	}
	if (sqlite3_prepare_v2(db, "SELECT value FROM meta WHERE key = 'agent_updated'", -1, &st,
			       NULL) == SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW)
		when = sqlite3_column_int64(st, 0) * 1000000000;
	sqlite3_finalize(st);
	if (when < 0)
		when = mtime_ns(path);
	out->time_ns = when;
	out->lost = qs.lost;
	out->processes = qs.sqlite_processes;
	out->executions = qs.executions;
	out->rows = calloc(qs.n ? qs.n : 1, sizeof(*out->rows));
	if (!out->rows)
		goto nomem;
	for (size_t i = 0; i < qs.n; i++) {
		const struct sp_qrow *q = &qs.rows[i];
		struct sp_live_row *r = &out->rows[out->n];

		r->fp_id = (uint64_t)q->fp_id;
		r->kind = q->kind == SP_QK_EXEC ? SP_KIND_EXEC : SP_KIND_STMT;
		r->count = q->count;
		r->total_ns = q->total_ns;
		r->rows = q->rows;
		r->errors = q->errors;
		r->min_ns = q->min_ns;
		r->max_ns = q->max_ns;
		r->p50_ns = q->p50_ns;
		r->p95_ns = q->p95_ns;
		r->text = strdup(q->fingerprint ? q->fingerprint : "?");
		if (!r->text)
			goto nomem;
		out->n++;
	}
	sp_qset_free(&qs);
	if (sites) {
		int64_t m = mtime_ns(path);

		/* the database is open: load the sites from it when it changed */
		if (!sites->loaded || sites->mtime_ns != m || !sites->path ||
		    strcmp(sites->path, path)) {
			sites_free(sites);
			sites->path = strdup(path);
			sites->mtime_ns = m;
			sites_from(sites, db);
		}
	}
	sqlite3_close(db);
	return 0;
nomem:
	sp_qset_free(&qs);
	sqlite3_close(db);
	sp_live_free(out);
	snprintf(err, errlen, "out of memory");
	return -1;
}

/* ---- the terminal ------------------------------------------------------- */

static struct termios saved_tio;
static int tio_saved, screen_on;

static void term_restore(void)
{
	if (screen_on) {
		/* cursor back, main screen back */
		fputs("\033[?25h\033[?1049l", stdout);
		fflush(stdout);
		screen_on = 0;
	}
	if (tio_saved) {
		tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved_tio);
		tio_saved = 0;
	}
}

static void term_enter(void)
{
	struct termios t;

	if (isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &saved_tio) == 0) {
		t = saved_tio;
		t.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
		t.c_cc[VMIN] = 0;
		t.c_cc[VTIME] = 0;
		if (tcsetattr(STDIN_FILENO, TCSAFLUSH, &t) == 0)
			tio_saved = 1;
	}
	fputs("\033[?1049h\033[?25l", stdout);
	fflush(stdout);
	screen_on = 1;
}

static void term_size(int *rows, int *cols)
{
	struct winsize ws;
	const char *c = getenv("COLUMNS");

	*rows = 24;
	*cols = 0; /* no limit */
	if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col) {
		*rows = ws.ws_row ? ws.ws_row : 24;
		*cols = ws.ws_col;
	} else if (c && atoi(c) > 20) {
		*cols = atoi(c);
	}
}

/* ---- a frame ------------------------------------------------------------ */

/* s (terminal-safe already) cut to at most width characters (UTF-8
 * sequences counted as one), in place; width 0: whole. */
static void fit(char *s, int width)
{
	int w = 0;
	char *p = s;

	if (width <= 0)
		return;
	while (*p) {
		size_t n = 1;

		while (((unsigned char)p[n] & 0xC0) == 0x80)
			n++;
		if (w + 1 > width) {
			*p = 0;
			return;
		}
		w++;
		p += n;
	}
}

struct shown {
	const struct sp_live_row *r;
	double rate, share; /* executions/s over the interval (-1: none), time share */
	uint64_t d_ns;
};

static int sort_by; /* K_*, for shown_cmp */

static double mean_of(const struct sp_live_row *r)
{
	return r->count ? (double)r->total_ns / (double)r->count : 0;
}

static int shown_cmp(const void *a, const void *b)
{
	const struct shown *x = a, *y = b;
	double u = 0, v = 0;

	switch (sort_by) {
	case K_COUNT: u = (double)x->r->count, v = (double)y->r->count; break;
	case K_RATE: u = x->rate, v = y->rate; break;
	case K_MEAN: u = mean_of(x->r), v = mean_of(y->r); break;
	case K_P95: u = (double)x->r->p95_ns, v = (double)y->r->p95_ns; break;
	case K_ROWS: u = (double)x->r->rows, v = (double)y->r->rows; break;
	case K_ERRORS: u = (double)x->r->errors, v = (double)y->r->errors; break;
	}
	if (u != v)
		return u > v ? -1 : 1;
	if (x->d_ns != y->d_ns)
		return x->d_ns > y->d_ns ? -1 : 1;
	if (x->r->total_ns != y->r->total_ns)
		return x->r->total_ns > y->r->total_ns ? -1 : 1;
	return x->r->fp_id < y->r->fp_id ? -1 : x->r->fp_id > y->r->fp_id;
}

static void emit(FILE *f, const char *line, int tty, int cols)
{
	char *l = strdup(line);

	if (!l)
		return;
	fit(l, cols);
	fputs(l, f);
	fputs(tty ? "\033[K\n" : "\n", f);
	free(l);
}

static uint64_t row_ids[9][2]; /* {fp_id, kind + 1} of the rows 1-9 of the last frame */

/* The drill-down: the query o->query (with kind o->query_kind, or the
 * first of either kind when it is 0 and the id a prefix) of cur, its whole
 * text, site and figures. */
static void detail(FILE *f, const struct sp_live *cur, const struct shown *sh,
		   const struct sites *sites, const struct top_opts *o, int tty, int cols)
{
	const struct shown *x = NULL;
	char line[1024], b[5][32];
	size_t i;

	for (i = 0; i < cur->n && !x; i++) {
		char hex[17];

		snprintf(hex, sizeof(hex), "%016llx", (unsigned long long)sh[i].r->fp_id);
		if (!strncmp(hex, o->query, strlen(o->query)) &&
		    (!o->query_kind || sh[i].r->kind + 1 == o->query_kind))
			x = &sh[i];
	}
	if (!x) {
		snprintf(line, sizeof(line), "query %s: not in this reading", o->query);
		emit(f, line, tty, cols);
		return;
	}
	snprintf(line, sizeof(line), "query %016llx (%s)", (unsigned long long)x->r->fp_id,
		 sp_qkind_name(x->r->kind == SP_KIND_EXEC ? SP_QK_EXEC : SP_QK_STMT));
	emit(f, line, tty, cols);
	{
		/* the whole text, in lines of the terminal's width (on a
		 * terminal, 20 at most: the screen is redrawn in place) */
		char *t = strdup(x->r->text ? x->r->text : "");
		size_t w = cols > 4 ? (size_t)cols - 2 : 200, n, k, nl = 0;

		if (t) {
			sp_term_clean(t);
			n = strlen(t);
			for (k = 0; k < n; nl++) {
				if (tty && nl == 20) {
					snprintf(line, sizeof(line), "  ... (%zu more bytes)",
						 n - k);
					emit(f, line, tty, cols);
					break;
				}
				size_t m = n - k < w ? n - k : w;

				while (m < n - k && m > 1 &&
				       ((unsigned char)t[k + m] & 0xC0) == 0x80)
					m--;
				snprintf(line, sizeof(line), "  %.*s", (int)m, t + k);
				emit(f, line, tty, cols);
				k += m;
			}
			free(t);
		}
	}
	{
		const char *st = x->r->site ? x->r->site : site_of(sites, x->r->fp_id, x->r->kind);
		char site[512];

		snprintf(site, sizeof(site), "site: %s", st ? st : "-");
		sp_term_clean(site);
		emit(f, site, tty, cols);
	}
	snprintf(line, sizeof(line), "executions %llu, rows %llu, errors %llu",
		 (unsigned long long)x->r->count, (unsigned long long)x->r->rows,
		 (unsigned long long)x->r->errors);
	if (x->rate >= 0)
		snprintf(line, sizeof(line),
			 "executions %llu (%.1f/s over the last interval), rows %llu, errors %llu",
			 (unsigned long long)x->r->count, x->rate, (unsigned long long)x->r->rows,
			 (unsigned long long)x->r->errors);
	emit(f, line, tty, cols);
	if (x->share < 0)
		snprintf(b[1], sizeof(b[1]), "-");
	else
		snprintf(b[1], sizeof(b[1]), "%.1f%%", x->share);
	snprintf(line, sizeof(line), "db time %s in all; TIME%% %s",
		 sp_fmt_ns(b[0], sizeof(b[0]), (double)x->r->total_ns), b[1]);
	emit(f, line, tty, cols);
	snprintf(line, sizeof(line), "per execution: min %s, mean %s, p50 %s, p95 %s, max %s",
		 sp_fmt_ns(b[0], sizeof(b[0]), (double)x->r->min_ns),
		 sp_fmt_ns(b[1], sizeof(b[1]), mean_of(x->r)),
		 sp_fmt_ns(b[2], sizeof(b[2]), (double)x->r->p50_ns),
		 sp_fmt_ns(b[3], sizeof(b[3]), (double)x->r->p95_ns),
		 sp_fmt_ns(b[4], sizeof(b[4]), (double)x->r->max_ns));
	emit(f, line, tty, cols);
	if (tty)
		emit(f, "(any key: back to the table)", tty, cols);
}

/* Why the last refresh had no reading ("": it had one), shown above the
 * table: an agent restarting or a profile being replaced does not end top. */
static char status[PATH_MAX + 600];

/* A frame's lines above the table: the source and its totals, why there
 * is no new reading, the interval (dt < 0: none) and the sort, the keys. */
static void frame_head(FILE *f, const char *source, const struct sp_live *cur,
		       const struct top_opts *o, double dt, uint64_t d_count, uint64_t sum_d,
		       int tty, int cols)
{
	char line[1024], src[512], b1[32];

	snprintf(src, sizeof(src), "%s", source);
	sp_term_clean(src);
	if (tty)
		fputs("\033[H", f);
	snprintf(line, sizeof(line),
		 "sqlprof top - %s: %llu process%s%s, %llu executions, %llu lost%s", src,
		 (unsigned long long)cur->processes, cur->processes == 1 ? "" : "es",
		 o->profile ? "" : " connected", (unsigned long long)cur->executions,
		 (unsigned long long)cur->lost, cur->restarts ? " (agent restarted)" : "");
	emit(f, line, tty, cols);
	if (status[0]) {
		char st[sizeof(status) + 64];

		snprintf(st, sizeof(st), "(no new reading: %s; trying again)", status);
		sp_term_clean(st);
		emit(f, st, tty, cols);
	}
	if (cur->pending) {
		snprintf(line, sizeof(line),
			 "(%llu process%s of the previous agent not back yet: totals behind)",
			 (unsigned long long)cur->pending, cur->pending == 1 ? "" : "es");
		emit(f, line, tty, cols);
	}
	if (dt >= 0)
		snprintf(line, sizeof(line),
			 "last %.1f s: %llu executions, %s db time; sorted by %s%s", dt,
			 (unsigned long long)d_count, sp_fmt_ns(b1, sizeof(b1), (double)sum_d),
			 sort_keys[o->sort].what, o->sort == K_TIME ? " in it" : "");
	else
		snprintf(line, sizeof(line), "totals only (no earlier reading yet); sorted by %s%s",
			 o->sort == K_TIME ? "total " : "", sort_keys[o->sort].what);
	emit(f, line, tty, cols);
	if (tty) /* the keys */
		emit(f,
		     "keys: q quit  sort: t time, c count, x exec/s, m mean, p p95, r rows,"
		     " e errors  1-9: a row's query",
		     tty, cols);
	emit(f, "", tty, cols);
}

/* One frame: cur, with the interval since prev (NULL: totals only). */
static void frame(FILE *f, const char *source, const struct sp_live *cur,
		  const struct sp_live *prev, const struct sites *sites, const struct top_opts *o,
		  int tty)
{
	struct shown *sh = calloc(cur->n ? cur->n : 1, sizeof(*sh));
	struct hmap pm;
	double dt = prev ? (double)(cur->time_ns - prev->time_ns) / 1e9 : 0;
	uint64_t sum_d = 0, sum_t = 0, d_count = 0;
	int rows, cols, interval = prev && dt > 0, show_site;
	size_t limit, i;
	char line[1024], b1[32], b2[32];

	term_size(&rows, &cols);
	if (!sh)
		return;
	hmap_init(&pm, 2 * sizeof(uint64_t), sizeof(size_t));
	for (i = 0; interval && i < prev->n; i++) {
		uint64_t k[2] = { prev->rows[i].fp_id, prev->rows[i].kind };
		size_t *v = hmap_get(&pm, k, 1, NULL);

		if (v)
			*v = i;
	}
	for (i = 0; i < cur->n; i++) {
		const struct sp_live_row *r = &cur->rows[i];
		uint64_t k[2] = { r->fp_id, r->kind };
		size_t *v = interval ? hmap_get(&pm, k, 0, NULL) : NULL;
		uint64_t pc = v ? prev->rows[*v].count : 0, pn = v ? prev->rows[*v].total_ns : 0;

		sh[i].r = r;
		sh[i].rate = -1;
		if (interval) {
			uint64_t dc = r->count > pc ? r->count - pc : 0;

			sh[i].d_ns = r->total_ns > pn ? r->total_ns - pn : 0;
			sh[i].rate = (double)dc / dt;
			d_count += dc;
		}
		sum_d += sh[i].d_ns;
		sum_t += r->total_ns;
	}
	/* no share of nothing: "-" when the db time is 0 */
	for (i = 0; i < cur->n; i++)
		sh[i].share = interval && sum_d ? 100.0 * (double)sh[i].d_ns / (double)sum_d
			      : !interval && sum_t
				      ? 100.0 * (double)sh[i].r->total_ns / (double)sum_t
				      : -1;
	sort_by = o->sort;
	sp_qsort(sh, cur->n, sizeof(*sh), shown_cmp);
	for (i = 0; i < 9; i++) /* what 1-9 choose */
		row_ids[i][0] = i < cur->n ? sh[i].r->fp_id : 0,
		row_ids[i][1] = i < cur->n ? sh[i].r->kind + 1 : 0;

	frame_head(f, source, cur, o, interval ? dt : -1, d_count, sum_d, tty, cols);
	if (o->query_set) {
		detail(f, cur, sh, sites, o, tty, cols);
		goto done;
	}
	/* the site only where the query still has room after it */
	show_site = cols <= 0 || cols >= 130;
	snprintf(line, sizeof(line), "%8s %6s %10s %9s %9s %10s %6s %-4s %-*s%s%s", "EXEC/S",
		 "TIME%", "COUNT", "MEAN", "P95", "ROWS", "ERRORS", "KIND", show_site ? 28 : 0,
		 show_site ? "SITE" : "", show_site ? " " : "", "QUERY");
	emit(f, line, tty, cols);
	limit = o->nrows          ? (size_t)o->nrows
		: o->once || !tty ? 20
				  : (size_t)(rows > 6 ? rows - 5 : 1);
	for (i = 0; i < cur->n && i < limit; i++) {
		const struct sp_live_row *r = sh[i].r;
		const char *site = r->site ? r->site : site_of(sites, r->fp_id, r->kind);
		char rate[16], share[16], *text = sp_shorten(r->text, 400), sitebuf[64];

		if (!text)
			break;
		sp_term_clean(text);
		snprintf(sitebuf, sizeof(sitebuf), "%s", site ? site : "-");
		sp_term_clean(sitebuf);
		fit(sitebuf, 28);
		if (sh[i].rate < 0)
			snprintf(rate, sizeof(rate), "-");
		else
			snprintf(rate, sizeof(rate), "%.1f", sh[i].rate);
		if (sh[i].share < 0)
			snprintf(share, sizeof(share), "-");
		else
			snprintf(share, sizeof(share), "%.1f%%", sh[i].share);
		snprintf(line, sizeof(line), "%8s %6s %10llu %9s %9s %10llu %6llu %-4s %-*s%s%s",
			 rate, share, (unsigned long long)r->count,
			 sp_fmt_ns(b1, sizeof(b1),
				   r->count ? (double)r->total_ns / (double)r->count : 0),
			 sp_fmt_ns(b2, sizeof(b2), (double)r->p95_ns), (unsigned long long)r->rows,
			 (unsigned long long)r->errors,
			 sp_qkind_name(r->kind == SP_KIND_EXEC ? SP_QK_EXEC : SP_QK_STMT),
			 show_site ? 28 : 0, show_site ? sitebuf : "", show_site ? " " : "", text);
		emit(f, line, tty, cols);
		free(text);
	}
	if (!cur->n)
		emit(f, "(no query yet)", tty, cols);
done:
	if (tty)
		fputs("\033[J", f);
	fflush(f);
	hmap_free(&pm);
	free(sh);
}

/* One reading from the source of o. */
static int reading(const struct top_opts *o, struct sp_live *out, struct sites *sites, char *err,
		   size_t errlen)
{
	if (o->profile)
		return read_profile(o->profile, out, sites, err, errlen);
	if (read_agent(o->socket, out, err, errlen) < 0)
		return -1;
	if (out->profile)
		sites_update(sites, out->profile);
	return 0;
}

static void sleep_s(double s)
{
	struct timespec ts = { (time_t)s, (long)((s - (double)(time_t)s) * 1e9) };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR && !quit_sig)
		;
}

/* -d S, -n N, -s KEY or -q ID into o: 0, or -1 with a message. */
static int top_opt(int opt, const char *arg, struct top_opts *o)
{
	if (opt == 'd') {
		if (sp_parse_double(arg, 0.1, 3600, &o->delay) == 0)
			return 0;
		fprintf(stderr, "sqlprof top: --delay wants seconds, 0.1 to 3600\n");
	} else if (opt == 'n') {
		if (sp_parse_u64(arg, &o->nrows) == 0 && o->nrows >= 1 && o->nrows <= 100000)
			return 0;
		fprintf(stderr, "sqlprof top: -n wants a number of queries, 1 to 100000\n");
	} else if (opt == 's') {
		for (o->sort = 0; o->sort < NKEYS && strcmp(arg, sort_keys[o->sort].name);
		     o->sort++)
			;
		if (o->sort < NKEYS)
			return 0;
		fprintf(stderr,
			"sqlprof top: unknown sort key '%s' (time, count, rate, mean, p95, rows,"
			" errors)\n",
			arg);
	} else if (!*arg || strlen(arg) > 16 ||
		   strspn(arg, "0123456789abcdefABCDEF") != strlen(arg)) {
		fprintf(stderr,
			"sqlprof top: --query wants a query_id (up to 16 hex digits), not '%s'\n",
			arg);
	} else {
		for (size_t j = 0; arg[j]; j++)
			o->query[j] = (char)(arg[j] | 0x20);
		o->query_set = 1;
		return 0;
	}
	sp_usage_hint("top");
	return -1;
}

/* A key pressed: q quits (quit_sig); on the table, a sort key or 1-9 (the
 * row's query); on a query, any key goes back. 1 to redraw. */
static int on_key(struct top_opts *o, char ch)
{
	int k;

	if (ch == 'q' || ch == 'Q') {
		quit_sig = -1;
		return 0;
	}
	for (k = 0; k < NKEYS && ch != sort_keys[k].key; k++)
		;
	if (o->query_set) {
		o->query_set = 0;
	} else if (k < NKEYS) {
		o->sort = k;
	} else if (ch >= '1' && ch <= '9' && row_ids[ch - '1'][1]) {
		snprintf(o->query, sizeof(o->query), "%016llx",
			 (unsigned long long)row_ids[ch - '1'][0]);
		o->query_kind = (uint32_t)row_ids[ch - '1'][1];
		o->query_set = 1;
	} else {
		return 0;
	}
	return 1;
}

/* The options of top (long-only ones numbered). */
static const struct option longopts[] = {
	{ "socket", required_argument, NULL, 1 },  { "once", no_argument, NULL, 2 },
	{ "delay", required_argument, NULL, 'd' }, { "rows", required_argument, NULL, 'n' },
	{ "sort", required_argument, NULL, 's' },  { "query", required_argument, NULL, 'q' },
	{ "help", no_argument, NULL, 'h' },        { NULL, 0, NULL, 0 },
};

/* Parse top's options into o (the default socket's path into sockpath,
 * PATH_MAX bytes). -1 to go on, else the exit code. */
static int parse_opts(int argc, char **argv, struct top_opts *o, char *sockpath)
{
	int opt;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "d:n:s:q:h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'd':
		case 'n':
		case 's':
		case 'q':
			if (top_opt(opt, optarg, o) < 0)
				return SP_EXIT_USAGE;
			break;
		case 1: o->socket = optarg; break;
		case 2: o->once = 1; break;
		case 'h': usage(stdout); return SP_EXIT_OK;
		default: sp_usage_hint("top"); return SP_EXIT_USAGE;
		}
	}
	if (optind < argc)
		o->profile = argv[optind++];
	if (optind < argc) {
		fprintf(stderr, "sqlprof top: unexpected argument '%s'\n", argv[optind]);
		sp_usage_hint("top");
		return SP_EXIT_USAGE;
	}
	if (o->profile && o->socket) {
		fprintf(stderr, "sqlprof top: give an agent's --socket or a PROFILE, not both\n");
		sp_usage_hint("top");
		return SP_EXIT_USAGE;
	}
	if (!o->profile && !o->socket) {
		if (sp_srv_default_socket(sockpath, PATH_MAX) < 0) {
			fprintf(stderr, "sqlprof top: no default socket path; use --socket\n");
			return SP_EXIT_USAGE;
		}
		o->socket = sockpath;
	}
	return -1;
}

/* The live view's signals: quit on INT, TERM and HUP, redraw on WINCH,
 * and on a terminal (tty) stop with TSTP after restoring it. */
static void catch_signals(struct sigaction *sa, int tty)
{
	memset(sa, 0, sizeof(*sa));
	sa->sa_handler = on_signal;
	sigemptyset(&sa->sa_mask);
	sigaction(SIGINT, sa, NULL);
	sigaction(SIGTERM, sa, NULL);
	sigaction(SIGHUP, sa, NULL);
	sigaction(SIGWINCH, sa, NULL);
	if (tty)
		sigaction(SIGTSTP, sa, NULL);
	if (tty) {
		term_enter();
		atexit(term_restore);
	}
}

/* Until the next reading is due (o->delay), or a signal quits: keys read
 * from pf (o changed by them), a stop and continue (sa: the handler to put
 * back), and redraws of the frame (cur, prev when have_prev) on a key or a
 * resize. */
static void wait_interval(struct top_opts *o, const char *source, const struct sp_live *cur,
			  const struct sp_live *prev, int have_prev, const struct sites *sites,
			  int tty, struct pollfd *pf, const struct sigaction *sa)
{
	uint64_t left_ms = (uint64_t)(o->delay * 1000);
	int refresh = 0, redraw = 0;

	while (!refresh && !quit_sig) {
		uint64_t t0 = sp_srv_mono_ns(), spent;
		int n = poll(pf, tty || isatty(STDIN_FILENO) ? 1 : 0,
			     left_ms > INT_MAX ? INT_MAX : (int)left_ms);

		if (n > 0 && (pf->revents & POLLIN)) {
			char ch[16];
			ssize_t r = read(STDIN_FILENO, ch, sizeof(ch));

			for (ssize_t j = 0; j < r; j++)
				redraw |= on_key(o, ch[j]);
			if (r == 0)
				pf->fd = -1; /* stdin at its end: keep refreshing */
		} else if (n > 0) {
			pf->fd = -1;
		}
		if (tstp) {
			tstp = 0;
			term_restore();
			signal(SIGTSTP, SIG_DFL);
			raise(SIGTSTP);
			/* continued */
			sigaction(SIGTSTP, sa, NULL);
			term_enter();
			refresh = 1;
		}
		if (winch || redraw) {
			winch = redraw = 0;
			if (tty)
				fputs("\033[2J", stdout);
			frame(stdout, source, cur, have_prev ? prev : NULL, sites, o, tty);
		}
		spent = (sp_srv_mono_ns() - t0) / 1000000;
		if (n == 0 || spent >= left_ms)
			refresh = 1;
		else
			left_ms -= spent;
	}
}

int cmd_top(int argc, char **argv)
{
	struct top_opts o = { .delay = 1 };
	char sockpath[PATH_MAX], err[PATH_MAX + 512], source[PATH_MAX + 16];
	struct sp_live cur, prev;
	struct sites sites;
	struct sigaction sa;
	int tty, have_prev = 0, rc;

	if ((rc = parse_opts(argc, argv, &o, sockpath)) >= 0)
		return rc;
	rc = SP_EXIT_INPUT;
	snprintf(source, sizeof(source), "%s %s", o.profile ? "profile" : "agent",
		 o.profile ? o.profile : o.socket);
	memset(&cur, 0, sizeof(cur));
	memset(&prev, 0, sizeof(prev));
	memset(&sites, 0, sizeof(sites));
	if (reading(&o, &cur, &sites, err, sizeof(err)) < 0) {
		fprintf(stderr, "sqlprof top: %s\n", err);
		goto out;
	}
	tty = !o.once && isatty(STDOUT_FILENO);
	if (o.once) {
		if (!o.profile) {
			/* a second reading, for the interval's rates */
			prev = cur;
			memset(&cur, 0, sizeof(cur));
			sleep_s(o.delay);
			if (reading(&o, &cur, &sites, err, sizeof(err)) < 0) {
				fprintf(stderr, "sqlprof top: %s\n", err);
				goto out;
			}
			have_prev = 1;
		}
		frame(stdout, source, &cur, have_prev ? &prev : NULL, &sites, &o, 0);
		rc = SP_EXIT_OK;
		goto out;
	}
	catch_signals(&sa, tty);
	for (;;) {
		struct pollfd pf = { STDIN_FILENO, POLLIN, 0 };

		frame(stdout, source, &cur, have_prev ? &prev : NULL, &sites, &o, tty);
		if (!tty)
			fputs("\n", stdout);
		wait_interval(&o, source, &cur, &prev, have_prev, &sites, tty, &pf, &sa);
		if (quit_sig)
			break;
		{
			struct sp_live next;

			if (reading(&o, &next, &sites, err, sizeof(err)) < 0) {
				/* the last frame stays, with the reason */
				snprintf(status, sizeof(status), "%s", err);
				continue;
			}
			status[0] = 0;
			if (o.profile && next.time_ns == cur.time_ns) {
				/* the same profile: keep the interval shown */
				sp_live_free(&next);
				continue;
			}
			sp_live_free(&prev);
			prev = cur;
			cur = next;
			have_prev = 1;
		}
	}
	/* q: 0; a signal: as if it had killed us */
	rc = quit_sig > 0 ? 128 + quit_sig : SP_EXIT_OK;
out:
	term_restore();
	sp_live_free(&cur);
	sp_live_free(&prev);
	sites_free(&sites);
	return rc;
}
