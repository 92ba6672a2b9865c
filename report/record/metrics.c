/* SPDX-License-Identifier: MIT */
/*
 * metrics.c - the agent's Prometheus endpoint (see metrics.h).
 *
 * HTTP is libmicrohttpd's, in its "external epoll" mode, driven by a
 * thread of ours (serve_thread): it accepts, reads requests and sends
 * answers, and nothing else. The answer itself - the agent's totals
 * (its callback) rendered - is made in the agent's own thread, which
 * alone touches the agent's state, with no lock on it: a request wakes
 * the agent's loop (an eventfd in the descriptor sp_metrics_fd returns,
 * beside the agent's signal pipe), sp_metrics_run renders and publishes
 * the body, and the request takes it. When the agent's loop does not
 * answer within FRESH_MS - it is merging the statistics of a process
 * that ended, hundreds of MB for a long-running service: 6.4 s on a
 * loaded machine, and the scrape waited as long - the request is
 * answered with the last body the loop rendered (its counters are never
 * below an earlier answer's), with a comment line saying how old it is;
 * the loop renders a new one when it gets there, for the next scrape.
 *
 * Slow clients (slowloris). We accept connections ourselves and hand
 * them to libmicrohttpd (MHD_add_connection), so that: a request has
 * REQUEST_S seconds from its connection (or the previous answer on it)
 * to the end of its answer, after which its socket is shut down (MHD then
 * closes it), whatever trickle of bytes keeps it from being idle; and at
 * most MAX_CONN connections are kept: a new one when all are taken shuts
 * down the oldest that is not being answered. A client that sends a byte
 * every few seconds on each of 64 connections therefore cannot keep a
 * scrape out: the scrape's connection is the newest. Idle ones are closed
 * after REQUEST_S too (MHD_OPTION_CONNECTION_TIMEOUT).
 *
 * The exposition: per fingerprint and kind (the profile's queries rows),
 * counters of executions, rows and errors and a histogram of db time per
 * execution in seconds, with fixed bounds (live.h); the costliest top_n
 * fingerprints get series of their own, kept for the agent's life (and
 * the next agent's, through the profile), the others are summed into
 * query_id="other", so that every sum is exact and every series only
 * grows.
 *
 * What it does not do: compute totals (live.c, cmd-agent.c).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <dlfcn.h>
#include <microhttpd.h>

#include "metrics.h"

/*
 * libmicrohttpd is loaded when --metrics starts, not with the binary:
 * linked, it and the TLS libraries it needs (gnutls, nettle, hogweed, gmp,
 * p11-kit, libffi, idn2, unistring, tasn1) were loaded and relocated at the
 * start of every sqlprof command, record included: 11.7 ms of CPU per
 * start of an empty program linked with it on this (loaded) 2-core VM,
 * against 2.3 ms for libdw and libelf. Its functions are called through
 * this table, filled by mhd_load.
 */
#ifndef SP_MHD_SONAME
#define SP_MHD_SONAME "libmicrohttpd.so.12"
#endif
static struct {
	void *h;
	__typeof__(&MHD_start_daemon) start_daemon;
	__typeof__(&MHD_stop_daemon) stop_daemon;
	__typeof__(&MHD_get_daemon_info) get_daemon_info;
	__typeof__(&MHD_run) run;
	__typeof__(&MHD_get_timeout) get_timeout;
	__typeof__(&MHD_create_response_from_buffer) create_response_from_buffer;
	__typeof__(&MHD_add_response_header) add_response_header;
	__typeof__(&MHD_queue_response) queue_response;
	__typeof__(&MHD_destroy_response) destroy_response;
	__typeof__(&MHD_add_connection) add_connection;
	__typeof__(&MHD_get_connection_info) get_connection_info;
} mhd;

/* Fill mhd (once; the agent's thread only). 0, or -1 with why in err. */
static int mhd_load(char *err, size_t errlen)
{
	void *h;

	if (mhd.h)
		return 0;
	h = dlopen(SP_MHD_SONAME, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(err, errlen, "--metrics needs libmicrohttpd: %s", dlerror());
		return -1;
	}
#define SP_MHD_SYM(f)                                                                    \
	if (!(*(void **)&mhd.f = dlsym(h, "MHD_" #f))) {                                 \
		snprintf(err, errlen, "--metrics: %s has no MHD_%s", SP_MHD_SONAME, #f); \
		dlclose(h);                                                              \
		return -1;                                                               \
	}
	SP_MHD_SYM(start_daemon)
	SP_MHD_SYM(stop_daemon)
	SP_MHD_SYM(get_daemon_info)
	SP_MHD_SYM(run)
	SP_MHD_SYM(get_timeout)
	SP_MHD_SYM(create_response_from_buffer)
	SP_MHD_SYM(add_response_header)
	SP_MHD_SYM(queue_response)
	SP_MHD_SYM(destroy_response)
	SP_MHD_SYM(add_connection)
	SP_MHD_SYM(get_connection_info)
#undef SP_MHD_SYM
	mhd.h = h;
	return 0;
}
#define MHD_start_daemon mhd.start_daemon
#define MHD_stop_daemon mhd.stop_daemon
#define MHD_get_daemon_info mhd.get_daemon_info
#define MHD_run mhd.run
#define MHD_get_timeout mhd.get_timeout
#define MHD_create_response_from_buffer mhd.create_response_from_buffer
#define MHD_add_response_header mhd.add_response_header
#define MHD_queue_response mhd.queue_response
#define MHD_destroy_response mhd.destroy_response
#define MHD_add_connection mhd.add_connection
#define MHD_get_connection_info mhd.get_connection_info

/* Connections kept, and the time a request has (see above). */
#define MAX_CONN 64
#define REQUEST_S 10
/* How long a request waits for the agent's loop to render a new answer
 * before it takes the last one (see above); with none yet, it waits for
 * the first up to FIRST_MS. At 500 ms, 6 of 121 scrapes of the soak at a
 * load of 20 took more than a second (63 the last answer): the loop
 * waits for a core there, and so does this thread after it. */
#define FRESH_MS 250
#define FIRST_MS 8000

struct mconn {
	int fd;         /* -1: free slot */
	uint64_t since; /* mono ns: accepted, or its last answer sent */
	int answering;  /* its request is being answered (handler reached) */
	int shut;       /* shut down by us; MHD closes it */
};

struct sp_metrics {
	struct MHD_Daemon *d;
	int lfd, outer, mhd_epoll;
	struct mconn conns[MAX_CONN + 16]; /* shut ones linger until MHD closes them */
	uint64_t evicted;                  /* connections shut down: too slow, or the oldest */
	size_t top_n;
	sp_metrics_totals_fn totals;
	void *arg;
	struct sp_live_state *s;
	/* the serving thread (outer: its epoll set) and the agent's loop
	 * (main_ep: the requests' eventfd and the agent's watch_fd) */
	pthread_t th;
	int th_started, main_ep, req_fd, stop_fd;
	int stopping; /* atomic */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	/* under mu: requests made, the request the last body answers, that
	 * body (malloc'd; NULL: none yet) and its code, and when rendered */
	uint64_t req_seq, ans_seq;
	char *body;
	size_t body_len;
	unsigned body_code;
	uint64_t body_ns;
};

/* Longest query label: the fingerprint shortened visibly. */
#define QUERY_LABEL_MAX 120

/* value as a label value of the text format: UTF-8 (bytes that are not
 * become '?', as do control characters but newline), with \, " and
 * newline escaped. */
static void label_value(FILE *f, const char *v)
{
	const unsigned char *p = (const unsigned char *)v;

	while (*p) {
		size_t n = 1;

		if (*p >= 0x80) {
			/* a whole, shortest-form UTF-8 sequence, or '?' */
			n = (*p & 0xE0) == 0xC0 && *p >= 0xC2   ? 2
			    : (*p & 0xF0) == 0xE0               ? 3
			    : (*p & 0xF8) == 0xF0 && *p <= 0xF4 ? 4
								: 0;
			for (size_t i = 1; i < n; i++)
				if ((p[i] & 0xC0) != 0x80)
					n = 0;
			if (n == 3 && ((*p == 0xE0 && p[1] < 0xA0) || (*p == 0xED && p[1] >= 0xA0)))
				n = 0;
			if (n == 4 && ((*p == 0xF0 && p[1] < 0x90) || (*p == 0xF4 && p[1] >= 0x90)))
				n = 0;
			if (!n) {
				fputc('?', f);
				p++;
				continue;
			}
			fwrite(p, 1, n, f);
			p += n;
			continue;
		}
		if (*p == '\\')
			fputs("\\\\", f);
		else if (*p == '"')
			fputs("\\\"", f);
		else if (*p == '\n')
			fputs("\\n", f);
		else if (*p < 0x20 || *p == 0x7f)
			fputc('?', f);
		else
			fputc(*p, f);
		p++;
	}
}

/* 1 for SQLite's own work, grouped under db_query_summary="SQLite
 * internal": a statement without SQL text, or a statement on one of
 * SQLite's tables named with the schema quoted as SQLite writes it
 * ("main".sqlite_master: its schema loads; a program writes sqlite_master
 * or main.sqlite_master). The live rows carry no nesting, so the text
 * alone decides (report uses the nesting too: doctor.c sp_sqlite_own). */
static int sqlite_internal(const char *text)
{
	const char *p;

	if (!strcmp(text, "<statement without SQL text>"))
		return 1;
	for (p = strstr(text, ".sqlite_"); p; p = strstr(p + 1, ".sqlite_"))
		if (p > text && (p[-1] == '"' || p[-1] == '?'))
			return 1;
	return 0;
}

/* The labels of one series: a fingerprint's, or "other" (text NULL). */
static void labels(FILE *f, uint64_t fp_id, uint32_t kind, const char *text)
{
	const char *k = kind == SP_KIND_EXEC ? "exec" : "statement";

	if (!text) {
		fprintf(f,
			"query_id=\"other\",kind=\"%s\",query=\"other\",db_system_name=\"sqlite\","
			"db_query_summary=\"other\"",
			k);
		return;
	}
	{
		char *q = sp_shorten(text, QUERY_LABEL_MAX);
		char sum[128];

		if (sqlite_internal(text))
			snprintf(sum, sizeof(sum), "SQLite internal");
		else
			sp_live_summary(text, sum, sizeof(sum));
		fprintf(f, "query_id=\"%016llx\",kind=\"%s\",query=\"", (unsigned long long)fp_id,
			k);
		label_value(f, q ? q : "?");
		fputs("\",db_system_name=\"sqlite\",db_query_summary=\"", f);
		label_value(f, sum);
		fputc('"', f);
		free(q);
	}
}

/* One series (row r, or the summed other of kind in o): text NULL for
 * "other". which: 0 executions, 1 rows, 2 errors, 3 the histogram. */
static void series(FILE *f, int which, const struct sp_live_row *r, int other)
{
	const char *text = other ? NULL : r->text;

	switch (which) {
	case 0:
	case 1:
	case 2:
		fputs(which == 0   ? "sqlprof_query_executions_total{"
		      : which == 1 ? "sqlprof_query_rows_total{"
				   : "sqlprof_query_errors_total{",
		      f);
		labels(f, r->fp_id, r->kind, text);
		fprintf(f, "} %llu\n",
			(unsigned long long)(which == 0   ? r->count
					     : which == 1 ? r->rows
							  : r->errors));
		break;
	default: {
		uint64_t cum = 0;

		for (int b = 0; b <= SP_LIVE_NB; b++) {
			cum += r->bucket[b];
			fputs("sqlprof_query_duration_seconds_bucket{", f);
			labels(f, r->fp_id, r->kind, text);
			if (b < SP_LIVE_NB)
				fprintf(f, ",le=\"%g\"} %llu\n", (double)sp_live_bounds_ns[b] / 1e9,
					(unsigned long long)cum);
			else
				fprintf(f, ",le=\"+Inf\"} %llu\n", (unsigned long long)cum);
		}
		fputs("sqlprof_query_duration_seconds_sum{", f);
		labels(f, r->fp_id, r->kind, text);
		fprintf(f, "} %llu.%09llu\n", (unsigned long long)(r->total_ns / 1000000000u),
			(unsigned long long)(r->total_ns % 1000000000u));
		fputs("sqlprof_query_duration_seconds_count{", f);
		labels(f, r->fp_id, r->kind, text);
		fprintf(f, "} %llu\n", (unsigned long long)cum);
	}
	}
}

static void add_row(struct sp_live_row *to, const struct sp_live_row *r)
{
	to->count += r->count;
	to->total_ns += r->total_ns;
	to->rows += r->rows;
	to->errors += r->errors;
	for (int b = 0; b <= SP_LIVE_NB; b++)
		to->bucket[b] += r->bucket[b];
}

int sp_metrics_render(struct sp_live *l, struct sp_live_state *s, size_t top_n, char **out,
		      size_t *len)
{
	static const char *const help[4][3] = {
		{ "sqlprof_query_executions_total", "counter",
		  "Executions of the query (its fingerprint and kind), exact: every execution of every "
		  "process of the agent, since the profile began." },
		{ "sqlprof_query_rows_total", "counter",
		  "Rows the query's executions returned (SQLITE_ROW)." },
		{ "sqlprof_query_errors_total", "counter",
		  "Executions of the query that ended in an error." },
		{ "sqlprof_query_duration_seconds", "histogram",
		  "Database time of one execution, in seconds (OpenTelemetry db.client.operation.duration)." },
	};
	struct sp_live_row other[2];
	unsigned char *named;
	FILE *f;
	int have_other[2] = { 0, 0 };

	sp_live_sort(l);
	named = calloc(l->n ? l->n : 1, 1);
	if (!named)
		return -1;
	memset(other, 0, sizeof(other));
	other[1].kind = SP_KIND_EXEC;
	/* The named series only grow: a fingerprint named once stays named,
	 * one not named while there was no room (counted in "other") stays
	 * there; the costliest are named first. */
	for (size_t i = 0; i < l->n; i++) {
		uint64_t k[2] = { l->rows[i].fp_id, l->rows[i].kind };
		int *v = hmap_get(&s->series, k, 0, NULL);

		if (!v && s->series.count < top_n && (v = hmap_get(&s->series, k, 1, NULL)))
			*v = 1;
		named[i] = v != NULL;
		if (!named[i]) {
			int o = l->rows[i].kind == SP_KIND_EXEC;

			add_row(&other[o], &l->rows[i]);
			have_other[o] = 1;
		}
	}
	f = open_memstream(out, len);
	if (!f) {
		free(named);
		return -1;
	}
	for (int w = 0; w < 4; w++) {
		fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", help[w][0], help[w][2], help[w][0],
			help[w][1]);
		for (size_t i = 0; i < l->n; i++)
			if (named[i])
				series(f, w, &l->rows[i], 0);
		for (int o = 0; o < 2; o++)
			if (have_other[o])
				series(f, w, &other[o], 1);
	}
	fprintf(f,
		"# HELP sqlprof_lost_total Sampled executions (events) the profiled processes could not "
		"hand over (their totals are exact all the same).\n"
		"# TYPE sqlprof_lost_total counter\n"
		"sqlprof_lost_total %llu\n"
		"# HELP sqlprof_processes Profiled processes connected to the agent now.\n"
		"# TYPE sqlprof_processes gauge\n"
		"sqlprof_processes %llu\n"
		"# HELP sqlprof_agent_restarts Agents before this one that wrote its profile.\n"
		"# TYPE sqlprof_agent_restarts gauge\n"
		"sqlprof_agent_restarts %llu\n",
		(unsigned long long)l->lost, (unsigned long long)l->processes,
		(unsigned long long)l->restarts);
	free(named);
	return fclose(f) == 0 ? 0 : -1;
}

static enum MHD_Result answer(struct MHD_Connection *conn, unsigned code, const char *body,
			      const char *allow)
{
	struct MHD_Response *r =
		MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_PERSISTENT);
	enum MHD_Result rc;

	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
	if (allow)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, allow);
	rc = MHD_queue_response(conn, code, r);
	MHD_destroy_response(r);
	return rc;
}

static const char reconnecting[] =
	"the agent restarted: the processes of the previous one are reconnecting\n";

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static struct mconn *conn_of(struct sp_metrics *m, struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);

	if (!ci)
		return NULL;
	for (size_t i = 0; i < sizeof(m->conns) / sizeof(m->conns[0]); i++)
		if (m->conns[i].fd == ci->connect_fd)
			return &m->conns[i];
	return NULL;
}

/* MHD closed a connection: its slot is free. */
static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
			  enum MHD_ConnectionNotificationCode code)
{
	struct sp_metrics *m = cls;
	struct mconn *c;

	(void)socket_context;
	if (code == MHD_CONNECTION_NOTIFY_CLOSED && (c = conn_of(m, conn)))
		c->fd = -1;
}

/* An answer was sent (or the request given up): the connection's next
 * request has its own REQUEST_S. */
static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct sp_metrics *m = cls;
	struct mconn *c = conn_of(m, conn);

	(void)con_cls;
	(void)toe;
	if (c) {
		c->since = mono_ns();
		c->answering = 0;
	}
}

static void shut(struct sp_metrics *m, struct mconn *c)
{
	shutdown(c->fd, SHUT_RDWR);
	c->shut = 1;
	m->evicted++;
}

/* Take every pending connection: the oldest one not being answered is
 * shut down when MAX_CONN are kept already. */
static void accept_all(struct sp_metrics *m)
{
	const size_t nslot = sizeof(m->conns) / sizeof(m->conns[0]);

	for (;;) {
		struct sockaddr_storage sa;
		socklen_t sl = sizeof(sa);
		struct mconn *freeslot = NULL, *oldest = NULL;
		size_t live = 0;
		int fd = accept4(m->lfd, (struct sockaddr *)&sa, &sl, SOCK_CLOEXEC | SOCK_NONBLOCK);

		if (fd < 0)
			return;
		for (size_t i = 0; i < nslot; i++) {
			struct mconn *c = &m->conns[i];

			if (c->fd < 0) {
				if (!freeslot)
					freeslot = c;
				continue;
			}
			if (c->shut)
				continue;
			live++;
			if (!c->answering && (!oldest || c->since < oldest->since))
				oldest = c;
		}
		if (live >= MAX_CONN && oldest)
			shut(m, oldest);
		if (!freeslot || (live >= MAX_CONN && !oldest)) {
			close(fd); /* every slot answering or lingering: refused */
			continue;
		}
		*freeslot = (struct mconn){ .fd = fd, .since = mono_ns() };
		if (MHD_add_connection(m->d, fd, (struct sockaddr *)&sa, sl) != MHD_YES)
			freeslot->fd = -1; /* MHD closed it */
	}
}

/* Requests past their REQUEST_S are shut down. */
static void expire(struct sp_metrics *m)
{
	uint64_t now = mono_ns(), limit = (uint64_t)REQUEST_S * 1000000000u;

	for (size_t i = 0; i < sizeof(m->conns) / sizeof(m->conns[0]); i++) {
		struct mconn *c = &m->conns[i];

		if (c->fd >= 0 && !c->shut && now - c->since > limit)
			shut(m, c);
	}
}

/* The answer to a scrape now, in the agent's thread: its code and body
 * (malloc'd). 0, or -1 out of memory. */
static int render_answer(struct sp_metrics *m, unsigned *code, char **body, size_t *len)
{
	struct sp_live l;
	int t;

	memset(&l, 0, sizeof(l));
	*body = NULL;
	t = m->totals(m->arg, &l);
	if (t == 0 && l.pending) {
		/* a restarted agent whose processes are not all back: a value
		 * below the one an earlier scrape saw would read as a counter
		 * reset; this scrape fails instead (up = 0), the next one has them */
		sp_live_free(&l);
		*code = MHD_HTTP_SERVICE_UNAVAILABLE;
		*len = strlen(reconnecting);
		*body = strdup(reconnecting);
		return *body ? 0 : -1;
	}
	*code = MHD_HTTP_OK;
	if (t < 0 || sp_metrics_render(&l, m->s, m->top_n, body, len) < 0) {
		sp_live_free(&l);
		free(*body);
		*body = NULL;
		return -1;
	}
	sp_live_free(&l);
	return 0;
}

/* In the serving thread: the body answering this request (made after
 * it, or the last one when the agent's loop is busy: *age_ns how old),
 * copied into *body. The code, or 0: none at all yet. */
static unsigned take_answer(struct sp_metrics *m, char **body, size_t *len, uint64_t *age_ns)
{
	uint64_t one = 1, mine;
	struct timespec dl;
	unsigned code = 0;

	pthread_mutex_lock(&m->mu);
	mine = ++m->req_seq;
	pthread_mutex_unlock(&m->mu);
	(void)!write(m->req_fd, &one, sizeof(one));
	clock_gettime(CLOCK_MONOTONIC, &dl);
	pthread_mutex_lock(&m->mu);
	dl.tv_nsec += (long)(m->body ? FRESH_MS : FIRST_MS) * 1000000L;
	dl.tv_sec += dl.tv_nsec / 1000000000L;
	dl.tv_nsec %= 1000000000L;
	while (m->ans_seq < mine && !__atomic_load_n(&m->stopping, __ATOMIC_ACQUIRE) &&
	       pthread_cond_timedwait(&m->cv, &m->mu, &dl) == 0)
		;
	*age_ns = m->ans_seq >= mine ? 0 : mono_ns() - m->body_ns;
	if (m->body && (*body = malloc(m->body_len + 1))) {
		memcpy(*body, m->body, m->body_len);
		*len = m->body_len;
		code = m->body_code;
	}
	pthread_mutex_unlock(&m->mu);
	return code;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn, const char *url,
			      const char *method, const char *version, const char *upload_data,
			      size_t *upload_data_size, void **con_cls)
{
	struct sp_metrics *m = cls;
	struct MHD_Response *r;
	enum MHD_Result rc;
	char *body = NULL;
	size_t len = 0;
	uint64_t age = 0;
	unsigned code;
	struct mconn *c = conn_of(m, conn);

	if (c)
		c->answering = 1;

	if (strcmp(url, "/metrics"))
		return answer(conn, MHD_HTTP_NOT_FOUND, "not found: sqlprof serves GET /metrics\n",
			      NULL);
	if (strcmp(method, MHD_HTTP_METHOD_GET))
		return answer(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET /metrics\n", "GET");
	code = take_answer(m, &body, &len, &age);
	if (!code)
		return answer(conn, MHD_HTTP_SERVICE_UNAVAILABLE,
			      "the agent is busy and has no answer yet: try again\n", NULL);
	if (age && code == MHD_HTTP_OK) {
		/* said in a comment: a text-format parser skips it */
		char note[160], *b;
		int n = snprintf(note, sizeof(note),
				 "# sqlprof: the agent was busy: this answer is %.1f s old\n",
				 (double)age / 1e9);

		if ((b = malloc(len + (size_t)n))) {
			memcpy(b, note, (size_t)n);
			memcpy(b + n, body, len);
			free(body);
			body = b;
			len += (size_t)n;
		}
	}
	r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(body);
		return MHD_NO;
	}
	if (code == MHD_HTTP_OK)
		MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
					"text/plain; version=0.0.4; charset=utf-8");
	else
		MHD_add_response_header(r, "Retry-After", "1");
	rc = MHD_queue_response(conn, code, r);
	MHD_destroy_response(r);
	return rc;
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	fputs("sqlprof agent: metrics: ", stderr);
	vfprintf(stderr, fmt, ap);
}

/* Split "HOST:PORT" ("[V6]:PORT" too) and bind a listening socket there.
 * Returns it, or -1 with a reason. */
static int listen_on(const char *hostport, char *err, size_t errlen)
{
	char host[256];
	const char *colon, *port, *h = hostport;
	size_t hl;
	struct addrinfo hints, *res = NULL, *ai;
	unsigned long pn;
	char *end;
	int fd = -1, e, one = 1, saved = 0;

	if (hostport[0] == '[') {
		const char *close = strchr(hostport, ']');

		if (!close || close[1] != ':')
			goto bad;
		h = hostport + 1;
		hl = (size_t)(close - h);
		port = close + 2;
	} else {
		colon = strrchr(hostport, ':');
		if (!colon || strchr(hostport, ':') != colon)
			goto bad;
		hl = (size_t)(colon - hostport);
		port = colon + 1;
	}
	if (!hl || hl >= sizeof(host))
		goto bad;
	memcpy(host, h, hl);
	host[hl] = 0;
	errno = 0;
	pn = strtoul(port, &end, 10);
	if (!*port || *end || errno || pn < 1 || pn > 65535 || port[0] == '+' || port[0] == '-') {
		snprintf(err, errlen,
			 "--metrics: the port of '%s' must be a number from 1 to 65535", hostport);
		return -1;
	}
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
	e = getaddrinfo(host, port, &hints, &res);
	if (e) {
		snprintf(err, errlen, "--metrics: cannot resolve '%s': %s", host, gai_strerror(e));
		return -1;
	}
	for (ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
			    ai->ai_protocol);
		if (fd < 0) {
			saved = errno;
			continue;
		}
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (ai->ai_family == AF_INET6)
			setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 64) == 0)
			break;
		saved = errno;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0)
		snprintf(err, errlen, "--metrics: cannot listen on %s: %s%s", hostport,
			 strerror(saved), saved == EADDRINUSE ? " (choose another port)" : "");
	return fd;
bad:
	snprintf(err, errlen,
		 "--metrics wants HOST:PORT (127.0.0.1:9187, [::1]:9187, localhost:9187), not '%s'",
		 hostport);
	return -1;
}

/* The serving thread: connections accepted, requests read and answered
 * (handle), until sp_metrics_stop. Touches nothing of the agent's. */
static void *serve_thread(void *arg)
{
	struct sp_metrics *m = arg;

	while (!__atomic_load_n(&m->stopping, __ATOMIC_ACQUIRE)) {
		struct epoll_event ev[4];
		MHD_UNSIGNED_LONG_LONG t;

		/* the next request's end is looked at within a second */
		if (MHD_get_timeout(m->d, &t) != MHD_YES || t > 1000)
			t = 1000;
		if (epoll_wait(m->outer, ev, 4, (int)t) < 0 && errno != EINTR)
			break;
		accept_all(m);
		expire(m);
		MHD_run(m->d);
	}
	return NULL;
}

struct sp_metrics *sp_metrics_start(const char *hostport, size_t top_n, sp_metrics_totals_fn totals,
				    void *arg, struct sp_live_state *s, int watch_fd, char *err,
				    size_t errlen)
{
	struct sp_metrics *m = calloc(1, sizeof(*m));
	const union MHD_DaemonInfo *di;
	struct epoll_event ev;

	if (!m) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	m->outer = m->main_ep = m->req_fd = m->stop_fd = -1;
	m->top_n = top_n;
	m->totals = totals;
	m->arg = arg;
	m->s = s;
	m->lfd = -1;
	pthread_mutex_init(&m->mu, NULL);
	{
		pthread_condattr_t ca;

		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&m->cv, &ca);
		pthread_condattr_destroy(&ca);
	}
	if (mhd_load(err, errlen) < 0)
		goto fail;
	m->lfd = listen_on(hostport, err, errlen);
	if (m->lfd < 0)
		goto fail;
	for (size_t i = 0; i < sizeof(m->conns) / sizeof(m->conns[0]); i++)
		m->conns[i].fd = -1;
	/* connections are ours to accept (accept_all) */
	m->d = MHD_start_daemon(
		MHD_USE_EPOLL | MHD_USE_ERROR_LOG | MHD_USE_NO_LISTEN_SOCKET, 0, NULL, NULL, handle,
		m, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL, MHD_OPTION_CONNECTION_LIMIT,
		(unsigned)(sizeof(m->conns) / sizeof(m->conns[0])), MHD_OPTION_CONNECTION_TIMEOUT,
		(unsigned)REQUEST_S, MHD_OPTION_NOTIFY_CONNECTION, on_connection, m,
		MHD_OPTION_NOTIFY_COMPLETED, on_completed, m, MHD_OPTION_END);
	if (!m->d) {
		snprintf(err, errlen, "--metrics: libmicrohttpd would not start on %s", hostport);
		goto fail;
	}
	di = MHD_get_daemon_info(m->d, MHD_DAEMON_INFO_EPOLL_FD);
	m->outer = epoll_create1(EPOLL_CLOEXEC);
	m->main_ep = epoll_create1(EPOLL_CLOEXEC);
	m->req_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	m->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (!di || m->outer < 0 || m->main_ep < 0 || m->req_fd < 0 || m->stop_fd < 0) {
		snprintf(err, errlen, "--metrics: no epoll or event descriptor: %s",
			 strerror(errno));
		goto fail;
	}
	m->mhd_epoll = di->epoll_fd;
	memset(&ev, 0, sizeof(ev));
	ev.events = EPOLLIN;
	if (epoll_ctl(m->outer, EPOLL_CTL_ADD, m->mhd_epoll, &ev) < 0 ||
	    epoll_ctl(m->outer, EPOLL_CTL_ADD, m->lfd, &ev) < 0 ||
	    epoll_ctl(m->outer, EPOLL_CTL_ADD, m->stop_fd, &ev) < 0 ||
	    epoll_ctl(m->main_ep, EPOLL_CTL_ADD, m->req_fd, &ev) < 0 ||
	    (watch_fd >= 0 && epoll_ctl(m->main_ep, EPOLL_CTL_ADD, watch_fd, &ev) < 0)) {
		snprintf(err, errlen, "--metrics: epoll_ctl: %s", strerror(errno));
		goto fail;
	}
	{
		/* the agent's signals go to its own thread (the thread starts
		 * with every signal blocked) */
		sigset_t all, old;
		int e;

		sigfillset(&all);
		pthread_sigmask(SIG_BLOCK, &all, &old);
		e = pthread_create(&m->th, NULL, serve_thread, m);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		if (e != 0) {
			snprintf(err, errlen, "--metrics: cannot start its thread: %s",
				 strerror(e));
			goto fail;
		}
	}
	m->th_started = 1;
	return m;
fail:
	sp_metrics_stop(m);
	return NULL;
}

int sp_metrics_fd(const struct sp_metrics *m)
{
	return m->main_ep;
}

void sp_metrics_run(struct sp_metrics *m)
{
	uint64_t n, seq;
	unsigned code;
	char *body;
	size_t len = 0;

	(void)!read(m->req_fd, &n, sizeof(n));
	pthread_mutex_lock(&m->mu);
	seq = m->req_seq;
	pthread_mutex_unlock(&m->mu);
	if (seq == m->ans_seq) /* ans_seq is written by this thread only */
		return;
	if (render_answer(m, &code, &body, &len) < 0) {
		code = MHD_HTTP_INTERNAL_SERVER_ERROR;
		body = strdup("out of memory\n");
		len = body ? strlen(body) : 0;
	}
	pthread_mutex_lock(&m->mu);
	if (body) {
		free(m->body);
		m->body = body;
		m->body_len = len;
		m->body_code = code;
		m->body_ns = mono_ns();
	}
	m->ans_seq = seq;
	pthread_cond_broadcast(&m->cv);
	pthread_mutex_unlock(&m->mu);
}

int sp_metrics_timeout_ms(struct sp_metrics *m)
{
	(void)m;
	return -1; /* the serving thread keeps its own time */
}

/* The descriptors the agent's side holds (not the daemon's). */
static void close_own_fds(struct sp_metrics *m)
{
	if (m->outer >= 0)
		close(m->outer);
	if (m->main_ep >= 0)
		close(m->main_ep);
	if (m->req_fd >= 0)
		close(m->req_fd);
	if (m->stop_fd >= 0)
		close(m->stop_fd);
}

void sp_metrics_forget(struct sp_metrics *m)
{
	if (!m)
		return;
	/* the serving thread is not in this child: only descriptors */
	close_own_fds(m);
	close(m->mhd_epoll);
	close(m->lfd);
}

void sp_metrics_stop(struct sp_metrics *m)
{
	uint64_t one = 1;

	if (!m)
		return;
	if (m->th_started) {
		__atomic_store_n(&m->stopping, 1, __ATOMIC_RELEASE);
		/* a request waiting for an answer gives up at once */
		pthread_mutex_lock(&m->mu);
		pthread_cond_broadcast(&m->cv);
		pthread_mutex_unlock(&m->mu);
		(void)!write(m->stop_fd, &one, sizeof(one));
		pthread_join(m->th, NULL);
	}
	if (m->d)
		MHD_stop_daemon(m->d); /* closes its connections */
	if (m->lfd >= 0)
		close(m->lfd);
	close_own_fds(m);
	pthread_cond_destroy(&m->cv);
	pthread_mutex_destroy(&m->mu);
	free(m->body);
	free(m);
}
