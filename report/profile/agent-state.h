/* SPDX-License-Identifier: MIT */
/*
 * agent-state.h - the agent's state in its profile (profile-format.md,
 * "The agent's state"): its exact totals per SQL text (agent_queries), the
 * parts of them the process images still running held (agent_live,
 * agent_live_hist) and its meta rows, written inside the profile's
 * transaction and read back by a restarted agent (cmd-agent.c).
 *
 * What it does not do: decide what an image's part is, or take parts off
 * when images reconnect (cmd-agent.c); the live views' state and the time
 * series have their own tables (live.c, series.c).
 */
#ifndef SP_AGENT_STATE_H
#define SP_AGENT_STATE_H

#include <stdint.h>

#include "profile-write.h"

/* The subtractable totals of one SQL text and kind (struct sp_qagg), in
 * agent_queries' and agent_live's column order. */
/* clang-format off */
#define SP_AGENT_QF(X)                                                                             \
	X(count) X(total_ns) X(self_ns) X(wall_ns) X(rows) X(vm_steps) X(fullscan_steps) X(sorts) \
	X(autoindex) X(errors) X(nested) X(samples) X(prepares) X(prepare_ns) X(runs)
#define SP_AGENT_QF_COUNT(f) +1
enum { SP_AGENT_NQF = 0 SP_AGENT_QF(SP_AGENT_QF_COUNT) };
/* clang-format on */

/* One image's part of one query's totals (a row of agent_live). */
struct sp_agent_row {
	uint32_t pid;
	int gone_seen; /* the agent found its process gone once already */
	uint64_t start, ino;
	uint64_t sql_id, kind;
	uint64_t v[SP_AGENT_NQF];
};

struct sp_agent_rows {
	struct sp_agent_row *r;
	size_t n, cap;
};

/* One bucket of an image's part of a fingerprint's latency histogram (a
 * row of agent_live_hist). */
struct sp_agent_hrow {
	uint32_t pid;
	uint64_t ino, fp_id, kind, bucket_ns, count;
};

struct sp_agent_hrows {
	struct sp_agent_hrow *r;
	size_t n, cap;
};

/* Append a row. 0, or -1 out of memory. */
int sp_agent_rows_add(struct sp_agent_rows *rs, const struct sp_agent_row *r);
int sp_agent_hrows_add(struct sp_agent_hrows *rs, const struct sp_agent_hrow *r);
/* q's subtractable totals into r->v. */
void sp_agent_qagg_to_row(const struct sp_qagg *q, struct sp_agent_row *r);

/*
 * The process row every folded process is counted under (pid 0, exe
 * "<other processes>"): the processes budget (cmd-agent.c,
 * --max-processes) folds the least recently seen processes that are over
 * into it.
 */
#define SP_AGENT_PID_OTHER 0u

/*
 * Fold the processes pids[n] of c into the row SP_AGENT_PID_OTHER
 * (proc-fold.c): their counts (executions, goodbyes' executions, losses,
 * messages, untracked steps...) added to it, so that every sum over
 * processes stays exact; their sites, callers, errors and failures by
 * code go to that row, their stacks and calling addresses translated into
 * the row's own module map and code objects (each file and code object
 * once, however many processes had it), so their queries keep where in
 * their code they ran; their bound values' hashes go, and their sampled
 * executions keep their pid and lose their stack. The caller chooses
 * processes that are over (no connection, statistics or rings, their end
 * known) and did not die (a death stays named). Returns the number
 * folded (0 when out of memory: nothing changed but what was moved
 * whole, sums kept; a stack that could not be translated is none).
 */
size_t sp_agent_fold_procs(struct sp_coll *c, const uint32_t *pids, size_t n);

/* What an earlier agent left in a profile. */
struct sp_agent_loaded {
	long long started;               /* meta started */
	long long restarts;              /* agents that wrote it before (>= 1) */
	double ns_per_tick;              /* its TSC calibration, 0: none */
	uint64_t procs_folded;           /* meta agent_processes_folded */
	uint64_t procs_folded_sqlite;    /* meta agent_processes_folded_sqlite */
	struct sp_agent_rows carried;    /* agent_live */
	struct sp_agent_hrows carried_h; /* agent_live_hist */
};

/*
 * Read the agent's state of the profile open in db into c (its totals per
 * SQL text, texts, processes, histograms and losses: c as a new agent
 * starts from) and out. Returns 1 when loaded, 0 when db is not an
 * agent's profile (nothing read), -1 with a reason (naming path).
 */
int sp_agent_state_load(sqlite3 *db, const char *path, struct sp_coll *c,
			struct sp_agent_loaded *out, char *err, size_t errlen);

/* What an agent writes of its state. */
struct sp_agent_saved {
	const struct sp_coll *c;
	const struct sp_agent_rows *live;    /* every image's part, now */
	const struct sp_agent_hrows *live_h; /* the same for the histograms */
	long long restarts;
	uint64_t missing; /* agent_missing_executions */
	uint64_t max_texts;
	uint64_t max_procs;           /* --max-processes */
	uint64_t procs_folded;        /* processes in the row SP_AGENT_PID_OTHER */
	uint64_t procs_folded_sqlite; /* of them, those that ran SQL */
};

/* Create and fill agent_queries, agent_live, agent_live_hist and the
 * agent's meta rows in db (inside the profile's transaction). 0 or -1. */
int sp_agent_state_write(sqlite3 *db, const struct sp_agent_saved *s);

#endif
