/* SPDX-License-Identifier: MIT */
/*
 * export-html.c - one self-contained HTML file: a header with totals, lost
 * records and unattributed samples; a query table sortable by clicking its
 * headers; the flamegraph of export-svg.c inline; and per query its sites,
 * stacks, plan (when the profile has a plans table) and errors.
 *
 * No network and no external asset: styles and scripts are inline, and a
 * Content-Security-Policy forbids fetching anything. All profile text is
 * escaped with sp_xml_str and reaches the page only as text: the scripts
 * are constants, read numbers from data-v attributes and touch text only
 * through textContent. The table is complete without JavaScript; the
 * script adds sorting and zoom, and marks <body data-ok="N"> (N rows) once
 * it has run, which the browser test checks (tests/integration/
 * t_export_html.sh), as it checks data-error set by window.onerror.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "doctor.h"
#include "export.h"

static const char css[] =
	"body{font:14px sans-serif;margin:1em 2em;color:#222;overflow-wrap:anywhere}"
	"h1{font-size:20px}h2{font-size:17px;margin-top:1.5em}"
	"table{border-collapse:collapse}td,th{padding:2px 8px;border-bottom:1px solid #ddd}"
	"th{cursor:pointer;background:#eee;text-align:right;user-select:none;white-space:nowrap;"
	"overflow-wrap:normal}"
	"th.s,td.s{text-align:left}td{text-align:right;white-space:nowrap;font-variant-numeric:tabular-nums}"
	"td.s{font-family:monospace;max-width:40em;white-space:normal;overflow-wrap:anywhere}"
	"th.asc::after{content:' \\25B2'}th.desc::after{content:' \\25BC'}"
	"ul.sum{list-style:none;padding:0;display:flex;flex-wrap:wrap;gap:0 2em}"
	".warn{color:#b00;font-weight:bold}pre{background:#f6f6f6;padding:6px;overflow:auto;"
	"white-space:pre-wrap}details{margin:.4em 0;border-left:3px solid #9bd;padding-left:8px}"
	"summary{cursor:pointer;font-family:monospace}.site{font-weight:bold}"
	"svg.sqlprof-flame{max-width:100%;height:auto}"
	"pre.plan{white-space:pre;overflow-wrap:normal;overflow-x:auto}"
	"dl.finding{margin:.6em 0;border-left:3px solid #d96;padding-left:8px}"
	"dl.finding dt{font-family:monospace;font-weight:bold}dl.finding dd{margin-left:1.5em}";

static const char sort_js[] =
	"function sqlprofTable(t) {\n"
	"  var ths = t.tHead.rows[0].cells, body = t.tBodies[0];\n"
	"  Array.prototype.forEach.call(ths, function (th, i) {\n"
	"    th.addEventListener('click', function () {\n"
	"      var desc = !th.classList.contains('desc'), text = th.classList.contains('s');\n"
	"      var rows = Array.prototype.slice.call(body.rows);\n"
	"      rows.sort(function (a, b) {\n"
	"        var x = a.cells[i].getAttribute('data-v'), y = b.cells[i].getAttribute('data-v');\n"
	"        var c = text ? (x < y ? -1 : x > y ? 1 : 0) : (+x) - (+y);\n"
	"        return desc ? -c : c;\n"
	"      });\n"
	"      rows.forEach(function (r) { body.appendChild(r); });\n"
	"      Array.prototype.forEach.call(ths, function (h) { h.classList.remove('asc', 'desc'); });\n"
	"      th.classList.add(desc ? 'desc' : 'asc');\n"
	"    });\n"
	"  });\n"
	"  t.addEventListener('click', function (ev) {\n"
	"    var a = ev.target.closest ? ev.target.closest('a[href^=\"#q\"]') : null;\n"
	"    if (a) { var d = document.getElementById(a.getAttribute('href').slice(1)); if (d) d.open = true; }\n"
	"  });\n"
	"  return body.rows.length;\n"
	"}\n";

static void num_td(FILE *f, double v)
{
	fprintf(f, "<td data-v=\"%.0f\">%.0f</td>", v, v);
}

static void ns_td(FILE *f, double v)
{
	char b[32];

	fprintf(f, "<td data-v=\"%.0f\">%s</td>", v, sp_fmt_ns(b, sizeof(b), v));
}

static void header(FILE *f, struct sp_export *x)
{
	uint64_t self = 0;
	char b[32];
	size_t i;

	for (i = 0; i < x->qs.n; i++)
		self += x->qs.rows[i].self_ns;
	fputs("<h1>sqlprof report: ", f);
	sp_xml_str(f, x->path);
	fputs("</h1>\n", f);
	if (x->qs.command) {
		fputs("<p>command: <code>", f);
		sp_xml_str(f, x->qs.command);
		fputs("</code></p>\n", f);
	}
	fprintf(f,
		"<ul class=\"sum\" id=\"summary\"><li>%" PRIu64
		" execution%s</li><li>%zu quer%s</li>"
		"<li>%" PRIu64 " process%s</li><li>db time %s (self)</li>",
		x->qs.executions, x->qs.executions == 1 ? "" : "s", x->qs.n,
		x->qs.n == 1 ? "y" : "ies", x->qs.processes, x->qs.processes == 1 ? "" : "es",
		sp_fmt_ns(b, sizeof(b), (double)self));
	fprintf(f, "<li id=\"lost\"%s>lost %" PRIu64 "</li>", x->qs.lost ? " class=\"warn\"" : "",
		x->qs.lost);
	fprintf(f, "<li id=\"unattributed\"%s>unattributed ~%.0f (%" PRIu64 " sample%s)</li>",
		x->at.unattributed_samples ? " class=\"warn\"" : "", x->at.unattributed_est,
		x->at.unattributed_samples, x->at.unattributed_samples == 1 ? "" : "s");
	if (x->qs.untracked)
		fprintf(f, "<li class=\"warn\">untracked %" PRIu64 "</li>", x->qs.untracked);
	if (x->qs.bad_messages)
		fprintf(f, "<li class=\"warn\">bad messages %" PRIu64 "</li>", x->qs.bad_messages);
	if (x->events_dropped)
		fprintf(f, "<li class=\"warn\">events dropped %" PRIu64 "</li>", x->events_dropped);
	fputs("</ul>\n<p>Counts and times are exact per query; per site and per stack they are"
	      " estimated from stack samples.</p>\n",
	      f);
}

static void query_table(FILE *f, struct sp_export *x)
{
	size_t i;

	fputs("<h2>Queries</h2>\n<table id=\"queries\"><thead><tr><th>count</th><th>total</th>"
	      "<th>self</th><th>mean</th><th>p50</th><th>p95</th><th>p99</th><th>max</th>"
	      "<th>rows</th><th>errors</th><th>samples</th><th class=\"s\">SQL</th></tr></thead>"
	      "<tbody>\n",
	      f);
	for (i = 0; i < x->qs.n; i++) {
		const struct sp_qrow *q = &x->qs.rows[i];
		const char *l = sp_export_qname(x, q);

		if (!l)
			continue;
		fputs("<tr>", f);
		num_td(f, (double)q->count);
		ns_td(f, (double)q->total_ns);
		ns_td(f, (double)q->self_ns);
		ns_td(f, q->mean_ns);
		ns_td(f, (double)q->p50_ns);
		ns_td(f, (double)q->p95_ns);
		ns_td(f, (double)q->p99_ns);
		ns_td(f, (double)q->max_ns);
		num_td(f, (double)q->rows);
		num_td(f, (double)q->errors);
		num_td(f, (double)q->samples);
		fprintf(f, "<td class=\"s\" data-v=\"%zu\"><a href=\"#q%zu\">", i, i);
		sp_xml_str(f, l);
		fputs("</a></td></tr>\n", f);
	}
	fputs("</tbody></table>\n", f);
}

/* The query doctor's findings, as report prints them after its table. */
static int findings(FILE *f, struct sp_export *x)
{
	struct sp_doctor_opts o = SP_DOCTOR_DEFAULTS;
	struct sp_findings fs;
	size_t i;

	if (sp_doctor_find(x->db, &x->qs, &x->at, &o, &fs) < 0)
		return -1;
	fprintf(f, "<h2>Query doctor</h2>\n<div id=\"findings\" data-n=\"%zu\">\n", fs.n);
	if (!fs.n)
		fputs("<p>No findings.</p>\n", f);
	for (i = 0; i < fs.n; i++) {
		const struct sp_finding *d = &fs.f[i];

		fprintf(f, "<dl class=\"finding\" data-kind=\"%s\"><dt>%s: ", sp_rule_name(d->rule),
			sp_rule_name(d->rule));
		if (d->q->kind == SP_QK_EXEC)
			fputs("[exec] ", f);
		sp_xml_str(f, d->q->fingerprint);
		fputs("</dt>\n<dd>at <span class=\"site\">", f);
		sp_xml_str(f, d->site);
		fputs("</span></dd>\n<dd>evidence: ", f);
		sp_xml_str(f, d->evidence);
		fputs("</dd>\n<dd>suggestion: <code>", f);
		sp_xml_str(f, d->suggestion);
		fputs("</code></dd></dl>\n", f);
	}
	fputs("</div>\n", f);
	sp_findings_free(&fs);
	return 0;
}

static void print_stack(FILE *f, const struct sp_export *x, const struct sp_stk *sk);

/* Every failed execution, most frequent first, with its stack. */
static int failures(FILE *f, struct sp_export *x)
{
	struct sp_failures fs;
	size_t i;

	if (sp_failures_load(x->db, &fs) < 0)
		return -1;
	fprintf(f, "<h2>Failed executions</h2>\n<div id=\"failures\" data-n=\"%zu\">\n", fs.n);
	if (!fs.n)
		fputs("<p>None.</p>\n", f);
	for (i = 0; i < fs.n; i++) {
		const struct sp_failure *e = &fs.f[i];

		fprintf(f, "<p class=\"failure\">%" PRIu64 " &#215; rc=%d ", e->count, e->rc);
		sp_xml_str(f, e->message);
		fputs(": <code>", f);
		if (e->kind == SP_QK_EXEC)
			fputs("[exec] ", f);
		sp_xml_str(f, e->fingerprint);
		fputs("</code></p>\n", f);
		print_stack(f, x,
			    e->stack_id ? sp_attrib_stack(&x->at, e->pid, e->stack_id) : NULL);
	}
	fputs("</div>\n", f);
	sp_failures_free(&fs);
	return 0;
}

static int is_site(const struct sp_export *x, int site, const struct sp_frame *fr)
{
	const struct sp_site *s;

	if (site < 0)
		return 0;
	s = &x->at.sites[site];
	return s->line == fr->line && !strcmp(s->function, fr->function) &&
	       !strcmp(s->file, fr->file) && !strcmp(s->module, fr->module) &&
	       (!s->offset || s->offset == fr->offset);
}

static void print_stack(FILE *f, const struct sp_export *x, const struct sp_stk *sk)
{
	uint32_t i, k;
	int marked = 0;

	if (!sk) {
		fputs("<pre>(stack not recorded)</pre>\n", f);
		return;
	}
	fputs("<pre>", f);
	for (i = 0, k = 0; i < sk->nframes; i++) {
		const struct sp_frame *fr = &sk->frames[i];
		int site = !marked && is_site(x, sk->site, fr);
		char w[2048];

		if (sp_is_profiler_module(fr->module))
			continue; /* our shims are no frame of the program */
		marked |= site;
		fprintf(f, "%s#%-2u %s", site ? "<span class=\"site\">" : "", k++,
			fr->inlined ? "(inlined) " : "");
		sp_xml_str(f, sp_where(w, sizeof(w), fr->function, fr->file, fr->line, fr->module,
				       fr->offset));
		fputs(" [", f);
		sp_xml_str(f, sp_basename(fr->module));
		fputs(site ? "]</span>\n" : "]\n", f);
	}
	fputs("</pre>\n", f);
}

/* Each query's plan and error sections, made for every fingerprint in one
 * pass over plans and one over errors (a statement per query scanned both
 * tables per query: 47 s for 20,000 queries of a profile without
 * indexes). fp_id -> char * (the HTML, malloc'd). */
struct sections {
	struct hmap plans, errors;
};

/* The plans table is optional and its columns are not fixed here: print
 * every column of its rows, if the table and an fp_id column exist. */
static int load_plans(struct sp_export *x, struct hmap *m)
{
	sqlite3_stmt *st;
	int64_t cur = 0;
	int fpcol = -1, shown;
	char *buf = NULL, *tree;
	size_t len = 0;
	FILE *f = NULL;

	if (sqlite3_prepare_v2(x->db, "SELECT * FROM plans ORDER BY fp_id, rowid", -1, &st, NULL) !=
	    SQLITE_OK)
		return 0;
	for (int c = 0; c < sqlite3_column_count(st); c++)
		if (sqlite3_column_name(st, c) && !strcmp(sqlite3_column_name(st, c), "fp_id"))
			fpcol = c;
	while (fpcol >= 0) {
		int row = sqlite3_step(st) == SQLITE_ROW;
		int64_t fp = row ? sqlite3_column_int64(st, fpcol) : 0;

		if (f && (!row || fp != cur)) { /* the previous fingerprint's section is done */
			char **slot = hmap_get(m, &cur, 1, NULL);

			int bad;

			fputs("</pre>\n", f);
			bad = fclose(f) != 0 || !slot;
			f = NULL;
			if (bad)
				goto fail; /* frees buf */
			free(*slot);
			*slot = buf;
			buf = NULL;
		}
		if (!row)
			break;
		if (!f) {
			if (!(f = open_memstream(&buf, &len)))
				goto fail;
			fputs("<h4>Plan</h4>\n<pre class=\"plan\">", f);
			cur = fp;
		}
		tree = NULL;
		shown = 0;
		for (int c = 0, n = sqlite3_column_count(st); c < n; c++) {
			const char *name = sqlite3_column_name(st, c);
			const unsigned char *v = sqlite3_column_text(st, c);

			/* fp_id, sql_id, schema_id: the profile's internal keys */
			if (c == fpcol ||
			    (name && strlen(name) > 3 && !strcmp(name + strlen(name) - 3, "_id")))
				continue;
			if (name && !strcmp(name, "plan") && v && !tree &&
			    (tree = sp_plan_tree((const char *)v)) && *tree)
				continue; /* drawn below, as the sqlite3 shell does */
			if (shown++)
				fputs("  ", f);
			sp_xml_str(f, name ? name : "?");
			fputs(": ", f);
			sp_xml_str(f, v ? (const char *)v : "");
		}
		if (shown)
			fputc('\n', f);
		if (tree && *tree) {
			fputs("\nQUERY PLAN\n", f);
			sp_xml_str(f, tree);
		}
		free(tree);
	}
	sqlite3_finalize(st);
	return 0;
fail:
	if (f)
		fclose(f);
	free(buf);
	sqlite3_finalize(st);
	return -1;
}

static int load_errors(struct sp_export *x, struct hmap *m)
{
	sqlite3_stmt *st;
	int64_t cur = 0;
	char *buf = NULL;
	size_t len = 0;
	FILE *f = NULL;

	/* a statement's failure that is also its exec's: once (as
	 * sp_failures_load lists them) */
	if (sqlite3_prepare_v2(
		    x->db,
		    "SELECT fp_id, rc, message, SUM(count), pid, stack_id FROM errors e"
		    " WHERE NOT (COALESCE(e.kind, 'stmt') <> 'exec' AND EXISTS (SELECT 1 FROM"
		    "  errors x WHERE x.kind = 'exec' AND x.pid = e.pid AND x.rc = e.rc"
		    "  AND x.message IS e.message) AND EXISTS (SELECT 1 FROM frames f"
		    "  WHERE f.pid = e.pid AND f.stack_id = e.stack_id"
		    "  AND f.function = 'sqlite3_exec'))"
		    " GROUP BY fp_id, rc, message, pid, stack_id"
		    " ORDER BY fp_id, SUM(count) DESC, rc, message, pid, stack_id",
		    -1, &st, NULL) != SQLITE_OK)
		return 0;
	for (;;) {
		int row = sqlite3_step(st) == SQLITE_ROW;
		int64_t fp = row ? sqlite3_column_int64(st, 0) : 0;
		const unsigned char *msg;

		if (f && (!row || fp != cur)) {
			char **slot = hmap_get(m, &cur, 1, NULL);
			int bad = fclose(f) != 0 || !slot;

			f = NULL;
			if (bad)
				goto fail; /* frees buf */
			free(*slot);
			*slot = buf;
			buf = NULL;
		}
		if (!row)
			break;
		if (!f) {
			if (!(f = open_memstream(&buf, &len)))
				goto fail;
			fputs("<h4>Errors</h4>\n", f);
			cur = fp;
		}
		msg = sqlite3_column_text(st, 2);
		fprintf(f, "<p>%lld &#215; rc=%d ", (long long)sqlite3_column_int64(st, 3),
			sqlite3_column_int(st, 1));
		sp_xml_str(f, msg ? (const char *)msg : "");
		fputs("</p>\n", f);
		print_stack(f, x,
			    sp_attrib_stack(&x->at, (uint64_t)sqlite3_column_int64(st, 4),
					    (uint64_t)sqlite3_column_int64(st, 5)));
	}
	sqlite3_finalize(st);
	return 0;
fail:
	if (f)
		fclose(f);
	free(buf);
	sqlite3_finalize(st);
	return -1;
}

static void sections_free(struct sections *sc)
{
	struct hmap *m[2] = { &sc->plans, &sc->errors };

	for (int i = 0; i < 2; i++) {
		size_t it = 0;
		char **v;

		while ((v = hmap_next(m[i], &it, NULL)))
			free(*v);
		hmap_free(m[i]);
	}
}

static const char *section(const struct hmap *m, int64_t fp)
{
	char **v = hmap_get((struct hmap *)m, &fp, 0, NULL);

	return v && *v ? *v : "";
}

static int details(FILE *f, struct sp_export *x)
{
	size_t i, j, nx;
	const size_t *xi;
	char b[32], c[32];
	struct sections sc;
	int ret = -1;

	hmap_init(&sc.plans, sizeof(int64_t), sizeof(char *));
	hmap_init(&sc.errors, sizeof(int64_t), sizeof(char *));
	if (load_plans(x, &sc.plans) < 0 || load_errors(x, &sc.errors) < 0)
		goto out;
	fputs("<h2>Query details</h2>\n", f);
	for (i = 0; i < x->qs.n; i++) {
		const struct sp_qrow *q = &x->qs.rows[i];
		const char *l = sp_export_qname(x, q);

		if (!l)
			goto out;
		fprintf(f, "<details id=\"q%zu\"><summary>", i);
		sp_xml_str(f, l);
		fprintf(f,
			"</summary>\n<p>fingerprint %016" PRIx64 " (%s): %" PRIu64
			" executions, total %s, ",
			(uint64_t)q->fp_id, sp_qkind_name(q->kind), q->count,
			sp_fmt_ns(b, sizeof(b), (double)q->total_ns));
		fprintf(f,
			"self %s, %" PRIu64 " rows, %" PRIu64 " VM steps, %" PRIu64
			" full-scan steps, %" PRIu64 " sorts, %" PRIu64 " autoindex rows, %" PRIu64
			" prepares</p>\n",
			sp_fmt_ns(c, sizeof(c), (double)q->self_ns), q->rows, q->vm_steps,
			q->fullscan_steps, q->sorts, q->autoindex, q->prepares);
		fputs("<pre>", f);
		sp_xml_str(f, q->sql);
		fputs("</pre>\n<h4>Sites and stacks</h4>\n", f);
		xi = sp_export_query_stacks(x, q, &nx);
		for (j = 0; j < nx; j++) {
			const struct sp_xstack *s = &x->xs[xi[j]];
			const char *site = sp_export_site_label(x, s->site);

			if (!site)
				goto out;
			fprintf(f,
				"<p>~%.0f executions%s, ~%s, %" PRIu64 " samples, pid %" PRIu64
				", at <span class=\"site\">",
				s->est_count, s->samples == q->count ? "" : " (est.)",
				sp_fmt_ns(b, sizeof(b), s->est_total_ns), s->samples, s->pid);
			sp_xml_str(f, s->samples ? site : "(no stack sampled)");
			fputs("</span></p>\n", f);
			if (s->samples)
				print_stack(f, x, s->stk);
		}
		fputs(section(&sc.plans, q->fp_id), f);
		fputs(section(&sc.errors, q->fp_id), f);
		fputs("</details>\n", f);
	}
	ret = 0;
out:
	sections_free(&sc);
	return ret;
}

int sp_export_html(FILE *f, struct sp_export *x)
{
	fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
	      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none';"
	      " style-src 'unsafe-inline'; script-src 'unsafe-inline'\">\n<title>sqlprof: ",
	      f);
	sp_xml_str(f, x->path);
	fprintf(f, "</title>\n<style>%s</style></head>\n<body>\n", css);
	fputs("<script>window.onerror = function (m, s, l) {"
	      " document.body.setAttribute('data-error', String(m) + ' (line ' + l + ')'); };"
	      "</script>\n",
	      f);
	header(f, x);
	query_table(f, x);
	if (findings(f, x) < 0 || failures(f, x) < 0)
		return -1;
	fputs("<h2>Flamegraph</h2>\n", f);
	if (sp_export_svg(f, x, 0) < 0)
		return -1;
	if (details(f, x) < 0)
		return -1;
	fprintf(f, "<p>Written by sqlprof %s.</p>\n<script>\n%s%s", SQLPROF_VERSION, sort_js,
		sp_svg_zoom_js);
	fputs("(function () {\n"
	      "  var n = sqlprofTable(document.getElementById('queries'));\n"
	      "  var svg = document.querySelector('svg.sqlprof-flame');\n"
	      "  if (svg) sqlprofFlame(svg);\n"
	      "  var de = document.documentElement;\n"
	      "  document.body.setAttribute('data-overflow', String(de.scrollWidth - de.clientWidth));\n"
	      "  document.body.setAttribute('data-ok', String(n));\n"
	      "})();\n</script>\n</body></html>\n",
	      f);
	return 0;
}
