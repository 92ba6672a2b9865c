/* SPDX-License-Identifier: MIT */
/*
 * export-svg.c - a flamegraph drawn by sqlprof itself: the flame stacks of
 * export-common.c merged into a tree (root at the bottom, the query as the
 * top frame of each tower), each frame as wide as its estimated self time
 * (or count with --weight count). Hover titles give the frame, its time,
 * share and estimated executions; query frames are blue, code frames warm.
 * Clicking a frame zooms into it, clicking the background resets.
 *
 * Every byte of profile text goes through sp_xml_str, so SQL such as
 * "<script>" or "]]>" stays text. The only script is the constant
 * sp_svg_zoom_js below, which touches the page through textContent and
 * attributes only; the HTML report embeds the same <svg> element and script.
 */
#include <stdlib.h>
#include <string.h>

#include "export.h"
#include "hash.h"
#include "util.h"

#define WIDTH 1200.0
#define PAD 10.0
#define FRAME_H 16
#define TOP 44
#define MIN_PX 0.1
#define CHAR_PX 7.0

struct node {
	const char *name;
	int is_sql;
	double ns, count;
	size_t child, next; /* first child, next sibling; 0 = none */
	size_t last;        /* last child; 0 = none */
};

struct tree {
	struct node *v;
	size_t n, cap;
	int depth;
	struct hmap kids; /* {parent, name hash, is_sql, probe} -> node */
};

static size_t add_node(struct tree *t, const char *name, int is_sql)
{
	if (SP_GROW(t->v, t->cap, t->n + 1, 256) < 0)
		return 0;
	t->v[t->n] = (struct node){ .name = name, .is_sql = is_sql };
	return t->n++;
}

/* Child of parent named name, created when missing; 0 on ENOMEM. Found
 * through a hash (the next probe on a collision): a search of the siblings
 * made a frame with 20,000 queries above it cost 200 M compares. */
static size_t child(struct tree *t, size_t parent, const char *name, int is_sql)
{
	uint64_t k[4] = { parent, sp_hash_bytes(name, strlen(name)), (uint64_t)is_sql, 0 };
	size_t n, *v;
	int created;

	for (;; k[3]++) {
		v = hmap_get(&t->kids, k, 1, &created);
		if (!v)
			return 0;
		if (created)
			break;
		if (!strcmp(t->v[*v].name, name))
			return *v;
	}
	n = add_node(t, name, is_sql);
	if (!n)
		return 0;
	*v = n;
	if (t->v[parent].last)
		t->v[t->v[parent].last].next = n;
	else
		t->v[parent].child = n;
	t->v[parent].last = n;
	return n;
}

static int build(struct tree *t, struct sp_export *x)
{
	size_t i, k;

	if (add_node(t, "all", 0) != 0 || !t->n)
		return -1;
	for (i = 0; i < x->nfs; i++) {
		const struct sp_fstack *f = &x->fs[i];
		size_t cur = 0;
		int d = 0;

		t->v[0].ns += f->ns;
		t->v[0].count += f->count;
		for (k = 0; k <= f->nfr; k++) {
			const char *l = k < f->nfr ? sp_export_frame_label(x, f->fr[k])
						   : sp_export_query_label(x, f->q, 300);

			if (!l || !(cur = child(t, cur, l, k == f->nfr)))
				return -1;
			t->v[cur].ns += f->ns;
			t->v[cur].count += f->count;
			d++;
		}
		if (d > t->depth)
			t->depth = d;
	}
	return 0;
}

static double weight(const struct sp_export *x, const struct node *n)
{
	return x->weight == SP_XW_COUNT ? n->count : n->ns;
}

static void color(const struct node *n, int root, char *buf, size_t len)
{
	unsigned h = sp_fnv1a32_str(n->name);
	double v1 = (h & 0xff) / 255.0, v2 = ((h >> 8) & 0xff) / 255.0;

	if (root)
		snprintf(buf, len, "rgb(200,200,200)");
	else if (n->is_sql) /* queries: blues */
		snprintf(buf, len, "rgb(%d,%d,%d)", 60 + (int)(60 * v1), 140 + (int)(70 * v2),
			 220 + (int)(35 * v1));
	else /* code: flamegraph.pl's "hot" */
		snprintf(buf, len, "rgb(%d,%d,%d)", 205 + (int)(50 * v2), (int)(230 * v1),
			 (int)(55 * v2));
}

/* Up to max characters of s (UTF-8 aware), ".." appended when cut; the
 * result is escaped. */
static void fit_text(FILE *f, const char *s, double px)
{
	long max = (long)((px - 6) / CHAR_PX), n = 0;
	size_t i, cut = 0, len = strlen(s);
	char *c;

	if (max < 3)
		return;
	for (i = 0; i < len; i++)
		if (((unsigned char)s[i] & 0xC0) != 0x80) {
			if (n == max - 2)
				cut = i;
			n++;
		}
	if (n <= max) {
		sp_xml_str(f, s);
		return;
	}
	c = strndup(s, cut);
	if (!c)
		return;
	sp_xml_str(f, c);
	fputs("..", f);
	free(c);
}

/* Draw node i at depth and x0 (a share of the width); 0 when it is too
 * narrow to be drawn, and so are its children. */
static int draw_node(FILE *f, struct sp_export *x, const struct tree *t, size_t i, int depth,
		     double x0, double total, int height)
{
	const struct node *n = &t->v[i];
	double w = total > 0 ? weight(x, n) / total : 0, px = w * (WIDTH - 2 * PAD);
	char col[48], b[32];

	if (px < MIN_PX)
		return 0;
	color(n, i == 0, col, sizeof(col));
	fprintf(f, "<g class=\"f\" data-x=\"%.6f\" data-w=\"%.6f\" data-d=\"%d\"><title>", x0, w,
		depth);
	sp_xml_str(f, i == 0 ? "all queries" : n->name);
	fprintf(f, "&#10;%s%s (%.2f%%), ~%.0f execution%s%s</title>",
		x->weight == SP_XW_COUNT ? "" : "self time ", sp_fmt_ns(b, sizeof(b), n->ns),
		100.0 * w, n->count, n->count >= 0.5 && n->count < 1.5 ? "" : "s",
		n->is_sql ? " [query]" : "");
	fprintf(f, "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\" rx=\"2\"/>",
		PAD + x0 * (WIDTH - 2 * PAD), height - 20 - (depth + 1) * FRAME_H,
		px > 0.5 ? px - 0.5 : px, FRAME_H - 1, col);
	fprintf(f, "<text x=\"%.1f\" y=\"%d\">", PAD + x0 * (WIDTH - 2 * PAD) + 3,
		height - 20 - depth * FRAME_H - 4);
	fit_text(f, i == 0 ? "all queries" : n->name, px);
	fputs("</text></g>\n", f);
	return 1;
}

/* Draw the tree depth first, each node before its children, siblings left
 * to right. The walk keeps one entry per level (the next sibling to draw
 * there and its x) in a heap array rather than on the C stack: a stack of
 * 50,000 frames is a tree 50,000 deep. Returns 0, or -1 out of memory. */
static int draw(FILE *f, struct sp_export *x, const struct tree *t, double total, int height)
{
	struct level {
		size_t next; /* node to draw at this level; 0 = level done */
		double x0;
	} *lv = calloc((size_t)t->depth + 2, sizeof(*lv));
	size_t top = 0;

	if (!lv)
		return -1;
	if (draw_node(f, x, t, 0, 0, 0.0, total, height) && t->v[0].child)
		lv[top++] = (struct level){ .next = t->v[0].child, .x0 = 0.0 };
	while (top) {
		struct level *l = &lv[top - 1];
		size_t i = l->next;
		double x0 = l->x0;
		int depth = (int)top;

		if (!i) {
			top--;
			continue;
		}
		l->next = t->v[i].next;
		l->x0 += total > 0 ? weight(x, &t->v[i]) / total : 0;
		if (draw_node(f, x, t, i, depth, x0, total, height) && t->v[i].child &&
		    top < (size_t)t->depth + 2)
			lv[top++] = (struct level){ .next = t->v[i].child, .x0 = x0 };
	}
	free(lv);
	return 0;
}

const char sp_svg_zoom_js[] =
	"function sqlprofFlame(svg) {\n"
	"  var W = +svg.getAttribute('data-width'), P = +svg.getAttribute('data-pad');\n"
	"  var gs = svg.querySelectorAll('g.f');\n"
	"  function fit(g, w) {\n"
	"    var t = g.querySelector('text'), n = g.querySelector('title').textContent.split('\\n')[0];\n"
	"    var c = Math.floor((w - 6) / 7), a = Array.from(n);\n"
	"    t.textContent = c < 3 ? '' : a.length > c ? a.slice(0, c - 2).join('') + '..' : n;\n"
	"  }\n"
	"  function zoom(z) {\n"
	"    var zx = z ? +z.getAttribute('data-x') : 0, zw = z ? +z.getAttribute('data-w') : 1;\n"
	"    var zd = z ? +z.getAttribute('data-d') : 0, e = 1e-9;\n"
	"    for (var i = 0; i < gs.length; i++) {\n"
	"      var g = gs[i], gx = +g.getAttribute('data-x'), gw = +g.getAttribute('data-w');\n"
	"      var gd = +g.getAttribute('data-d'), nx, nw;\n"
	"      if (gd < zd && gx <= zx + e && gx + gw >= zx + zw - e) { nx = 0; nw = 1; }\n"
	"      else if (gd >= zd && gx >= zx - e && gx + gw <= zx + zw + e) { nx = (gx - zx) / zw; nw = gw / zw; }\n"
	"      else { g.style.display = 'none'; continue; }\n"
	"      g.style.display = '';\n"
	"      var r = g.querySelector('rect'), t = g.querySelector('text'), px = nw * W;\n"
	"      r.setAttribute('x', (P + nx * W).toFixed(1));\n"
	"      r.setAttribute('width', Math.max(px - 0.5, 0.1).toFixed(1));\n"
	"      t.setAttribute('x', (P + nx * W + 3).toFixed(1));\n"
	"      fit(g, px);\n"
	"    }\n"
	"  }\n"
	"  svg.addEventListener('click', function (ev) {\n"
	"    var g = ev.target.closest ? ev.target.closest('g.f') : null;\n"
	"    zoom(g && g.getAttribute('data-d') !== '0' ? g : null);\n"
	"  });\n"
	"  return gs.length;\n"
	"}\n";

int sp_export_svg(FILE *f, struct sp_export *x, int standalone)
{
	struct tree t = { 0 };
	double total;
	int height;

	hmap_init(&t.kids, 4 * sizeof(uint64_t), sizeof(size_t));
	if (build(&t, x) < 0) {
		free(t.v);
		hmap_free(&t.kids);
		return -1;
	}
	hmap_free(&t.kids);
	total = weight(x, &t.v[0]);
	height = TOP + (t.depth + 1) * FRAME_H + 24;
	if (standalone)
		fputs("<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n", f);
	fprintf(f,
		"<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" class=\"sqlprof-flame\""
		" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" data-width=\"%.0f\" data-pad=\"%.0f\">\n",
		(int)WIDTH, height, (int)WIDTH, height, WIDTH - 2 * PAD, PAD);
	fputs("<style>.sqlprof-flame text{font:12px monospace;fill:#000;pointer-events:none}"
	      ".sqlprof-flame g.f:hover rect{stroke:#000;stroke-width:0.5}"
	      ".sqlprof-flame g.f{cursor:pointer}</style>\n",
	      f);
	fprintf(f, "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#f8f8f0\"/>\n",
		(int)WIDTH, height);
	fprintf(f,
		"<text x=\"%d\" y=\"20\" text-anchor=\"middle\" style=\"font-size:15px\">SQL"
		" flamegraph: ",
		(int)WIDTH / 2);
	sp_xml_str(f, x->path);
	fprintf(f,
		"</text>\n<text x=\"%d\" y=\"36\" text-anchor=\"middle\" style=\"fill:#555\">"
		"width: %s; blue frames are queries; click to zoom, click the background to"
		" reset</text>\n",
		(int)WIDTH / 2,
		x->weight == SP_XW_COUNT ? "estimated executions"
					 : "estimated self time in SQLite");
	if (x->nfs && total > 0) {
		if (draw(f, x, &t, total, height) < 0) {
			free(t.v);
			return -1;
		}
	} else
		fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">no queries</text>\n",
			(int)WIDTH / 2, height / 2);
	if (standalone)
		fputs("<script type=\"text/ecmascript\"><![CDATA[\n", f);
	if (standalone) {
		fputs(sp_svg_zoom_js, f);
		fputs("sqlprofFlame(document.documentElement);\n]]></script>\n", f);
	}
	fputs("</svg>\n", f);
	free(t.v);
	return 0;
}

int sp_export_svg_file(FILE *f, struct sp_export *x)
{
	return sp_export_svg(f, x, 1);
}
