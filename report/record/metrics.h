/* SPDX-License-Identifier: MIT */
/*
 * metrics.h - `sqlprof agent --metrics HOST:PORT`: GET /metrics in the
 * Prometheus text exposition format (0.0.4), served by libmicrohttpd in
 * a thread of its own; the answer is rendered in the agent's loop between
 * two rounds of reading the services (sp_metrics_run), and a scrape that
 * the loop does not answer within half a second (merging a large service
 * that ended) gets the last one rendered, said in a comment line.
 *
 * What it does not do: compute the totals (the agent's callback gives
 * them, live.h), or anything but GET /metrics (404, 405).
 */
#ifndef SP_METRICS_H
#define SP_METRICS_H

#include <stddef.h>

#include "live.h"

struct sp_metrics;

/* The agent's current totals into *out (sp_live_free'd by the caller).
 * 0 or -1. */
typedef int (*sp_metrics_totals_fn)(void *arg, struct sp_live *out);

/*
 * Listen on hostport ("127.0.0.1:9187", "[::1]:9187", "localhost:9187")
 * and serve the metrics of totals(arg); top_n fingerprints get series of
 * their own (s->series), the rest is summed into query_id="other".
 * watch_fd (-1: none) is added to the descriptor sp_metrics_fd returns,
 * so that one poll slot serves both. NULL with a reason in err (a bad
 * address, a port in use).
 */
struct sp_metrics *sp_metrics_start(const char *hostport, size_t top_n, sp_metrics_totals_fn totals,
				    void *arg, struct sp_live_state *s, int watch_fd, char *err,
				    size_t errlen);
/* A descriptor readable when a scrape waits for an answer or watch_fd
 * is readable (an epoll set). */
int sp_metrics_fd(const struct sp_metrics *m);
/* In the agent's loop: render the answer a waiting scrape asks for
 * (the totals callback, then sp_metrics_render; never waits). */
void sp_metrics_run(struct sp_metrics *m);
/* Milliseconds until sp_metrics_run must run again at the latest: -1,
 * none (the serving thread keeps its own time). */
int sp_metrics_timeout_ms(struct sp_metrics *m);
/* In a forked child that never serves: close the listener and the epoll
 * sets, so that only the agent holds them (the port is free when the
 * agent ends, even while a snapshot is still being written). */
void sp_metrics_forget(struct sp_metrics *m);
void sp_metrics_stop(struct sp_metrics *m);

/* The exposition of l (sorted by sp_metrics_render itself), as served,
 * into a malloc'd *out of *len bytes. 0 or -1. */
int sp_metrics_render(struct sp_live *l, struct sp_live_state *s, size_t top_n, char **out,
		      size_t *len);

#endif
