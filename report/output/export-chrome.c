/* SPDX-License-Identifier: MIT */
/*
 * export-chrome.c - Chrome trace-event JSON (chrome://tracing, Perfetto's
 * JSON import, older tools): one complete ("X") event per sampled
 * execution, times in microseconds with nanosecond fractions, and
 * process_name / thread_name metadata. Only the executions in the events
 * table (the sampled ones) appear; totals are in the other formats.
 */
#include <inttypes.h>
#include <string.h>

#include "export.h"

static void us(FILE *f, uint64_t ns)
{
	fprintf(f, "%" PRIu64 ".%03u", ns / 1000, (unsigned)(ns % 1000));
}

struct ctx {
	FILE *f;
	int first;
};

/* One complete event; events stream from the profile (1 M of them were
 * 135 MB held in memory). */
static int event(struct sp_export *x, const struct sp_xevent *e, void *arg)
{
	struct ctx *c = arg;
	FILE *f = c->f;
	const char *name = sp_export_qname(x, e->q);

	if (!name)
		return -1;
	fprintf(f, "%s\n{\"name\":", c->first ? "" : ",");
	c->first = 0;
	sp_json_str(f, name);
	fprintf(f, ",\"cat\":\"%s\",\"ph\":\"X\",\"ts\":",
		e->q && e->q->kind == SP_QK_EXEC ? "sql,exec" : "sql");
	us(f, e->start_ns);
	fputs(",\"dur\":", f);
	us(f, e->wall_ns);
	fprintf(f, ",\"pid\":%" PRIu64 ",\"tid\":%" PRIu64 ",\"args\":{\"sql\":", e->pid, e->tid);
	sp_json_str(f, e->sql);
	fprintf(f, ",\"rows\":%" PRIu64 ",\"rc\":%" PRId64 ",\"vm_steps\":%" PRIu64 ",\"site\":",
		e->rows, e->rc, e->vm_steps);
	sp_json_str(f, e->site);
	fprintf(f,
		",\"db_ns\":%" PRIu64 ",\"seq\":%" PRIu64 ",\"parent_seq\":%" PRIu64
		",\"flags\":%" PRIu64 "}}",
		e->db_ns, e->seq, e->parent_seq, e->flags);
	return 0;
}

int sp_export_chrome(FILE *f, struct sp_export *x)
{
	uint64_t lastpid = 0;
	const char *pname = "";
	size_t i;
	struct ctx c = { f, 1 };

	if (sp_export_events_each(x, 0, NULL, NULL) < 0)
		return -1;
	fputs("{\"traceEvents\":[", f);
	for (i = 0; i < x->nth; i++) {
		const struct sp_xthread *t = &x->th[i];
		char tname[300];

		if (i == 0 || t->pid != lastpid) {
			fprintf(f,
				"%s\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%" PRIu64
				",\"tid\":%" PRIu64 ",\"args\":{\"name\":",
				c.first ? "" : ",", t->pid, t->pid);
			pname = sp_export_proc_name(x, t->pid);
			if (!pname)
				return -1;
			sp_json_str(f, pname);
			fputs("}}", f);
			c.first = 0;
			lastpid = t->pid;
		}
		if (t->tid == t->pid)
			snprintf(tname, sizeof(tname), "%s (main)", pname);
		else
			snprintf(tname, sizeof(tname), "thread %" PRIu64, t->tid);
		fprintf(f,
			",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%" PRIu64
			",\"tid\":%" PRIu64 ",\"args\":{\"name\":",
			t->pid, t->tid);
		sp_json_str(f, tname);
		fputs("}}", f);
	}
	if (sp_export_events_each(x, 0, event, &c) < 0)
		return -1;
	fputs("\n],\"displayTimeUnit\":\"ns\",\"otherData\":{\"exporter\":\"sqlprof " SQLPROF_VERSION
	      "\"",
	      f);
	if (x->ev_window) {
		char note[400];

		/* what the window and --max-events left out, said in the file */
		if (*sp_export_window_note(x, note, sizeof(note))) {
			fprintf(f,
				",\"events_total\":%" PRIu64 ",\"events_exported\":%" PRIu64
				",\"events_cut\":",
				x->ev_total, x->ev_kept);
			sp_json_str(f, note);
		}
	}
	fputs("}}\n", f);
	return 0;
}
