/* SPDX-License-Identifier: MIT */
/*
 * timeline.h - `sqlprof record`'s timeline writer: a thread that puts the
 * sampled executions into the profile's events table while the command
 * runs, so that writing the profile after the command's exit does not
 * (timeline.c).
 */
#ifndef SP_TIMELINE_H
#define SP_TIMELINE_H

#include <pthread.h>

#include "collect.h"
#include "profile-write.h"

struct sp_tlw; /* opaque */

/*
 * Start the writer on c's spill file, its database made in dir (the
 * recording's private directory). It also opens, in the profile's
 * symbolizer (debug files also looked for in debug_path, may be NULL),
 * the modules that stacks need as they come. lock guards c: the caller holds it
 * whenever it touches c, except while it waits (sp_srv's model_lock).
 * Returns the writer, or NULL when there is none (no spill file, no
 * thread, no database): then the profile writes every event itself.
 */
struct sp_tlw *sp_tlw_start(struct sp_coll *c, pthread_mutex_t *lock, const char *dir,
			    const char *debug_path);

/*
 * Stop the writer (called holding lock, which it lets go of while the
 * thread ends) and fill *tl with what the file holds; tl->events is 0
 * when nothing is usable. The file stays until sp_tlw_free.
 */
void sp_tlw_stop(struct sp_tlw *w, pthread_mutex_t *lock, struct sp_timeline *tl);

/* After sp_tlw_stop: that symbolizer, for the profile (sp_meta.sym; w
 * keeps it), or NULL. */
struct sym_ctx *sp_tlw_sym(const struct sp_tlw *w);

/* Remove the file (if the profile did not take it) and free w. NULL: no-op. */
void sp_tlw_free(struct sp_tlw *w);

#endif
