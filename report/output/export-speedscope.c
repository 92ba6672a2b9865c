/* SPDX-License-Identifier: MIT */
/*
 * export-speedscope.c - speedscope's own JSON file format
 * (https://www.speedscope.app/file-format-schema.json): one "sampled"
 * profile whose samples are the flame stacks of export-common.c (root
 * first, the query as the leaf) and whose weights are their estimated self
 * times in ns, or their estimated executions with --weight count (unit
 * "none"). Frames are shared and deduplicated by function, file, line,
 * module and (a frame without a source file, named "?? (MODULE+0xOFF)")
 * offset.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "export.h"

struct ftab {
	struct hmap m;              /* hash -> index + 1 */
	const struct sp_frame **fr; /* code frame, or NULL for a query leaf */
	const struct sp_qrow **q;
	size_t n, cap;
};

static uint64_t frame_hash(const struct sp_frame *f)
{
	uint64_t h[5] = { sp_hash_bytes(f->function, strlen(f->function)),
			  sp_hash_bytes(f->file, strlen(f->file)),
			  sp_hash_bytes(f->module, strlen(f->module)), (uint64_t)f->line,
			  f->offset };

	return sp_hash_bytes(h, sizeof(h));
}

static int same(const struct sp_frame *a, const struct sp_frame *b)
{
	return a->line == b->line && !strcmp(a->function, b->function) &&
	       !strcmp(a->file, b->file) && !strcmp(a->module, b->module) && a->offset == b->offset;
}

/* Index of a frame (fr) or query leaf (q), added when new; -1 on ENOMEM. */
static long intern(struct ftab *t, const struct sp_frame *fr, const struct sp_qrow *q)
{
	uint64_t key = fr ? frame_hash(fr) : sp_hash_bytes(&q, sizeof(q)) ^ 0x5157ULL;
	size_t *v = hmap_get(&t->m, &key, 1, NULL);

	if (!v)
		return -1;
	if (*v) {
		size_t i = *v - 1;

		if (fr ? (t->fr[i] && same(t->fr[i], fr)) : (t->q[i] == q))
			return (long)i;
		/* 64-bit hash collision: keep both, unshared */
	}
	if (t->n == t->cap) {
		/* two arrays of one capacity: it grows once both have */
		size_t capf = t->cap, capq = t->cap;

		if (SP_GROW(t->fr, capf, t->n + 1, 128) < 0 ||
		    SP_GROW(t->q, capq, t->n + 1, 128) < 0)
			return -1;
		t->cap = capf;
	}
	t->fr[t->n] = fr;
	t->q[t->n] = q;
	if (!*v)
		*v = t->n + 1;
	return (long)t->n++;
}

int sp_export_speedscope(FILE *f, struct sp_export *x)
{
	struct ftab t = { 0 };
	uint64_t total = 0;
	size_t i, k;
	int ret = -1;

	hmap_init(&t.m, sizeof(uint64_t), sizeof(size_t));
	/* intern every frame first: samples refer to the shared table */
	for (i = 0; i < x->nfs; i++) {
		for (k = 0; k < x->fs[i].nfr; k++)
			if (intern(&t, x->fs[i].fr[k], NULL) < 0)
				goto out;
		if (intern(&t, NULL, x->fs[i].q) < 0)
			goto out;
	}
	fputs("{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\",", f);
	fputs("\"exporter\":\"sqlprof " SQLPROF_VERSION "\",\"name\":", f);
	sp_json_str(f, x->path);
	fputs(",\"activeProfileIndex\":0,\"shared\":{\"frames\":[", f);
	for (i = 0; i < t.n; i++) {
		const char *name;

		fputs(i ? ",\n{\"name\":" : "\n{\"name\":", f);
		if (t.fr[i]) {
			char w[2048];
			/* without a source file: where in the module */
			char *c = sp_export_utf8(strcmp(t.fr[i]->file, "??") || !t.fr[i]->offset
							 ? t.fr[i]->function
							 : sp_where(w, sizeof(w), t.fr[i]->function,
								    "??", 0, t.fr[i]->module,
								    t.fr[i]->offset));

			if (!c)
				goto out;
			sp_one_line(c);
			sp_json_str(f, c);
			free(c);
			if (strcmp(t.fr[i]->file, "??")) {
				c = sp_export_utf8(t.fr[i]->file);
				if (!c)
					goto out;
				fputs(",\"file\":", f);
				sp_json_str(f, c);
				free(c);
				if (t.fr[i]->line > 0)
					fprintf(f, ",\"line\":%d", t.fr[i]->line);
			} else if (*t.fr[i]->module) {
				c = sp_export_utf8(t.fr[i]->module);
				if (!c)
					goto out;
				fputs(",\"file\":", f);
				sp_json_str(f, c);
				free(c);
			}
		} else {
			name = sp_export_query_label(x, t.q[i], 300);
			if (!name)
				goto out;
			sp_json_str(f, name);
		}
		fputc('}', f);
	}
	fputs("\n]},\"profiles\":[{\"type\":\"sampled\",\"name\":", f);
	sp_json_str(f, x->weight == SP_XW_COUNT ? "SQL executions (estimated)"
						: "SQL time, self (estimated)");
	fprintf(f, ",\"unit\":\"%s\",\"startValue\":0,",
		x->weight == SP_XW_COUNT ? "none" : "nanoseconds");
	for (i = 0; i < x->nfs; i++)
		total += sp_export_fweight(x, &x->fs[i]);
	fprintf(f, "\"endValue\":%" PRIu64 ",\"samples\":[", total);
	for (i = 0; i < x->nfs; i++) {
		fputs(i ? ",\n[" : "\n[", f);
		for (k = 0; k < x->fs[i].nfr; k++)
			fprintf(f, "%ld,", intern(&t, x->fs[i].fr[k], NULL));
		fprintf(f, "%ld]", intern(&t, NULL, x->fs[i].q));
	}
	fputs("\n],\"weights\":[", f);
	for (i = 0; i < x->nfs; i++)
		fprintf(f, "%s%" PRIu64, i ? "," : "", sp_export_fweight(x, &x->fs[i]));
	fputs("]}]}\n", f);
	ret = 0;
out:
	free(t.fr);
	free(t.q);
	hmap_free(&t.m);
	return ret;
}
