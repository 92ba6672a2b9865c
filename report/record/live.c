/* SPDX-License-Identifier: MIT */
/*
 * live.c - the agent's current per-query totals as rows (see live.h):
 * accumulated from collectors (the agent's own, and one per live image's
 * statistics), the latency buckets they imply, the named series, and
 * the viewer answer's serialization.
 *
 * Bucketing. A process keeps each query's db times in 8 buckets per
 * power of two of its clock (sp_wire.h), which the collector adds to an
 * sp_hist at each bucket's middle (1/64 of a power of two): an execution
 * is known to within 1/16 of its time. Here each sp_hist bucket goes
 * whole to the fixed bucket its lower end lies in, so an execution within
 * about 7 % of a bound may be counted on either side of it; every
 * execution is in exactly one bucket, and the same execution always in
 * the same one (a restarted agent reuses the TSC calibration and carries
 * the histograms), so the cumulative counts only grow.
 *
 * What it does not do: merge statistics (collect.c), talk HTTP
 * (metrics.c) or draw (cmd-top.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fingerprint.h"
#include "hist.h"
#include "live.h"
#include "untrusted.h"

const uint64_t sp_live_bounds_ns[SP_LIVE_NB] = {
	1000ull,      5000ull,      10000ull,      50000ull,      100000ull,
	500000ull,    1000000ull,   5000000ull,    10000000ull,   50000000ull,
	100000000ull, 500000000ull, 1000000000ull, 5000000000ull, 10000000000ull,
};

int sp_live_bucket_of(uint64_t ns)
{
	int i;

	for (i = 0; i < SP_LIVE_NB && ns >= sp_live_bounds_ns[i]; i++)
		;
	return i;
}

void sp_live_free(struct sp_live *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free(l->rows[i].text);
		free(l->rows[i].site);
	}
	free(l->rows);
	free(l->profile);
	memset(l, 0, sizeof(*l));
}

static int row_cmp(const void *a, const void *b)
{
	const struct sp_live_row *x = a, *y = b;

	if (x->total_ns != y->total_ns)
		return x->total_ns > y->total_ns ? -1 : 1;
	if (x->fp_id != y->fp_id)
		return x->fp_id < y->fp_id ? -1 : 1;
	return (int)x->kind - (int)y->kind;
}

void sp_live_sort(struct sp_live *l)
{
	sp_qsort(l->rows, l->n, sizeof(*l->rows), row_cmp);
}

void sp_live_state_init(struct sp_live_state *s)
{
	memset(s, 0, sizeof(*s));
	hmap_init(&s->fptext, sizeof(uint64_t), sizeof(char *));
	hmap_init(&s->series, 2 * sizeof(uint64_t), sizeof(int));
}

void sp_live_state_free(struct sp_live_state *s)
{
	size_t it = 0;
	char **t;

	while ((t = hmap_next(&s->fptext, &it, NULL)))
		free(*t);
	hmap_free(&s->fptext);
	hmap_free(&s->series);
	free(s->profile);
	memset(s, 0, sizeof(*s));
}

/* The fingerprint id and text of SQL text sql_id in names, as the profile
 * writer gives them (profile.c: the preload's placeholders keep their
 * text); NULL when the text has not come (yet). */
static const char *fp_of(struct sp_live_state *s, const struct sp_coll *names, uint64_t sql_id,
			 uint64_t *fp_id)
{
	const struct sp_sql *sq = hmap_get((struct hmap *)&names->sqls, &sql_id, 0, NULL);
	const char *text;
	char **t;
	int created;
	uint64_t id;

	if (!sq || !sq->text)
		return NULL;
	text = sq->text;
	if (text[0] == '<' &&
	    (!strcmp(text, "<statement without SQL text>") ||
	     !strcmp(text, SP_SQL_UNATTRIBUTED_TEXT) || !strcmp(text, SP_SQL_FOLDED_TEXT)))
		id = sp_hash64(text, strlen(text));
	else
		id = sq->fp_id;
	if (id) {
		t = hmap_get(&s->fptext, &id, 1, &created);
		if (!t)
			return NULL;
		if (created || !*t)
			*t = text[0] == '<' ? strdup(text)
					    : sp_fingerprint(text, strlen(text), NULL);
	} else {
		char *made = sp_fingerprint(text, strlen(text), &id);

		t = made ? hmap_get(&s->fptext, &id, 1, &created) : NULL;
		if (!t) {
			free(made);
			return NULL;
		}
		if (*t)
			free(made);
		else
			*t = made;
	}
	*fp_id = id;
	return *t;
}

struct sp_live_accv {
	uint64_t count, total_ns, rows, errors, min_ns, max_ns;
	uint64_t b[SP_LIVE_NB + 1];
	struct sp_hist *hist;
};

void sp_live_acc_init(struct sp_live_acc *a)
{
	hmap_init(&a->m, 2 * sizeof(uint64_t), sizeof(struct sp_live_accv));
	a->oom = 0;
}

void sp_live_acc_free(struct sp_live_acc *a)
{
	size_t it = 0;
	struct sp_live_accv *v;

	while ((v = hmap_next(&a->m, &it, NULL)))
		sp_hist_free(v->hist);
	hmap_free(&a->m);
}

static int bucket_fn(uint64_t lo, uint64_t count, void *arg)
{
	uint64_t *b = arg;

	b[sp_live_bucket_of(lo)] += count;
	return 0;
}

static void add_hist(struct sp_live_acc *a, struct sp_live_accv *v, const struct sp_hist *h)
{
	if (!h)
		return;
	sp_hist_foreach(h, bucket_fn, v->b);
	if (!v->hist)
		v->hist = sp_hist_new();
	if (v->hist)
		sp_hist_merge(v->hist, h);
	else
		a->oom = 1;
}

void sp_live_add(struct sp_live_acc *a, struct sp_live_state *s, const struct sp_coll *src,
		 const struct sp_coll *names)
{
	size_t it = 0;
	const uint64_t *k;
	const struct sp_qagg *q;
	const struct sp_fphist *fh;

	while ((q = hmap_next(&src->queries, &it, (const void **)&k))) {
		uint64_t fk[2];
		struct sp_live_accv *v;

		if (!q->count || !fp_of(s, names, k[0], &fk[0]))
			continue;
		fk[1] = k[1];
		v = hmap_get(&a->m, fk, 1, NULL);
		if (!v) {
			a->oom = 1;
			continue;
		}
		if (!v->count || q->min_ns < v->min_ns)
			v->min_ns = q->min_ns;
		if (q->max_ns > v->max_ns)
			v->max_ns = q->max_ns;
		v->count += q->count;
		v->total_ns += q->total_ns;
		v->rows += q->rows;
		v->errors += q->errors;
		add_hist(a, v, q->hist);
	}
	/* the histograms the collector keeps per fingerprint (names' texts
	 * were known when they were merged) */
	it = 0;
	while ((fh = hmap_next(&src->fphists, &it, (const void **)&k))) {
		struct sp_live_accv *v;

		if (!fh->hist)
			continue;
		v = hmap_get(&a->m, k, 1, NULL);
		if (v)
			add_hist(a, v, fh->hist);
		else
			a->oom = 1;
	}
}

int sp_live_take(struct sp_live_acc *a, struct sp_live_state *s, struct sp_live *out)
{
	size_t it = 0, n = 0;
	const uint64_t *k;
	struct sp_live_accv *v;

	out->rows = calloc(a->m.count ? a->m.count : 1, sizeof(*out->rows));
	if (!out->rows)
		return -1;
	while ((v = hmap_next(&a->m, &it, (const void **)&k))) {
		struct sp_live_row *r = &out->rows[n];
		char **t = hmap_get(&s->fptext, &k[0], 0, NULL);
		uint64_t inb = 0;

		if (!v->count)
			continue; /* buckets with no count (yet): a text still missing */
		r->fp_id = k[0];
		r->kind = (uint32_t)k[1];
		r->count = v->count;
		r->total_ns = v->total_ns;
		r->rows = v->rows;
		r->errors = v->errors;
		r->min_ns = v->min_ns;
		r->max_ns = v->max_ns;
		memcpy(r->bucket, v->b, sizeof(r->bucket));
		for (int i = 0; i <= SP_LIVE_NB; i++)
			inb += v->b[i];
		/* executions whose histogram block had no room (hist_lost), or
		 * carried from a profile without histograms: counted above the
		 * last bound, so that the buckets add up to the count */
		if (inb < v->count)
			r->bucket[SP_LIVE_NB] += v->count - inb;
		if (v->hist) {
			sp_hist_set_minmax_sum(v->hist, v->min_ns, v->max_ns, v->total_ns);
			r->p50_ns = sp_hist_quantile(v->hist, 0.5);
			r->p95_ns = sp_hist_quantile(v->hist, 0.95);
		}
		r->text = strdup(t && *t ? *t : "?");
		if (!r->text)
			return -1;
		n++;
	}
	out->n = n;
	return a->oom ? -1 : 0;
}

char *sp_live_abspath(const char *path)
{
	char cwd[4096];
	char *out;

	if (path[0] == '/' || !getcwd(cwd, sizeof(cwd)))
		return strdup(path);
	out = malloc(strlen(cwd) + strlen(path) + 2);
	if (out)
		sprintf(out, "%s/%s", cwd, path);
	return out;
}

int sp_live_state_write(sqlite3 *db, const struct sp_live_state *s)
{
	sqlite3_stmt *st = NULL;
	size_t it = 0;
	const uint64_t *k;
	int rc = -1;

	if (sqlite3_exec(db, "CREATE TABLE agent_series(fp_id INTEGER, kind INTEGER);", NULL, NULL,
			 NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(db, "INSERT INTO agent_series VALUES(?,?)", -1, &st, NULL))
		goto out;
	while (hmap_next(&s->series, &it, (const void **)&k)) {
		sqlite3_bind_int64(st, 1, (sqlite3_int64)k[0]);
		sqlite3_bind_int64(st, 2, (sqlite3_int64)k[1]);
		if (sqlite3_step(st) != SQLITE_DONE)
			goto out;
		sqlite3_reset(st);
	}
	rc = 0;
out:
	sqlite3_finalize(st);
	return rc;
}

static int has_table(sqlite3 *db, const char *name)
{
	sqlite3_stmt *st;
	int r = 0;

	if (sqlite3_prepare_v2(db, "SELECT 1 FROM sqlite_schema WHERE type='table' AND name=?", -1,
			       &st, NULL) == SQLITE_OK) {
		sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
		r = sqlite3_step(st) == SQLITE_ROW;
	}
	sqlite3_finalize(st);
	return r;
}

int sp_live_state_load(sqlite3 *db, struct sp_live_state *s, char *err, size_t errlen)
{
	sqlite3_stmt *st = NULL;

	if (!has_table(db, "agent_series"))
		return 0; /* an older agent's profile: named afresh */
	if (sqlite3_prepare_v2(db, "SELECT fp_id, kind FROM agent_series", -1, &st, NULL)) {
		snprintf(err, errlen, "%s", sqlite3_errmsg(db));
		return -1;
	}
	while (sqlite3_step(st) == SQLITE_ROW) {
		uint64_t k[2] = { sp_col_u64(st, 0), sp_col_u64(st, 1) };
		int *v = hmap_get(&s->series, k, 1, NULL);

		if (!v) {
			sqlite3_finalize(st);
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		*v = 1;
	}
	sqlite3_finalize(st);
	return 0;
}

/* ---- the viewer's answer ------------------------------------------------ */

#define LIVE_MAGIC 0x564c5053u /* "SPLV" */
#define LIVE_TEXT_MAX (64u * 1024u)

struct wire_hdr {
	uint32_t magic, version, nrows, profile_len;
	uint64_t lost, processes, executions, restarts;
	int64_t time_ns;
	uint64_t pending;
};

struct wire_row {
	uint64_t fp_id;
	uint32_t kind, text_len, site_len, pad;
	uint64_t count, total_ns, rows, errors, min_ns, max_ns, p50_ns, p95_ns;
	uint64_t bucket[SP_LIVE_NB + 1];
};

static size_t pad8(size_t n)
{
	return (n + 7) & ~(size_t)7;
}

int sp_live_encode(const struct sp_live *l, uint8_t **buf, size_t *len)
{
	struct wire_hdr h = {
		LIVE_MAGIC,   SP_VIEW_VERSION, (uint32_t)l->n, 0,          l->lost,
		l->processes, l->executions,   l->restarts,    l->time_ns, l->pending
	};
	size_t n = sizeof(h), off;
	uint8_t *b;

	h.profile_len = l->profile ? (uint32_t)strlen(l->profile) : 0;
	if (h.profile_len > LIVE_TEXT_MAX)
		h.profile_len = 0;
	n += pad8(h.profile_len);
	for (size_t i = 0; i < l->n; i++) {
		size_t t = strlen(l->rows[i].text),
		       s = l->rows[i].site ? strlen(l->rows[i].site) : 0;

		n += sizeof(struct wire_row) + pad8(t < LIVE_TEXT_MAX ? t : LIVE_TEXT_MAX) +
		     pad8(s < LIVE_TEXT_MAX ? s : LIVE_TEXT_MAX);
	}
	b = calloc(1, n);
	if (!b)
		return -1;
	memcpy(b, &h, sizeof(h));
	off = sizeof(h);
	if (h.profile_len)
		memcpy(b + off, l->profile, h.profile_len);
	off += pad8(h.profile_len);
	for (size_t i = 0; i < l->n; i++) {
		const struct sp_live_row *r = &l->rows[i];
		struct wire_row w;
		size_t t = strlen(r->text), s = r->site ? strlen(r->site) : 0;

		memset(&w, 0, sizeof(w));
		w.fp_id = r->fp_id;
		w.kind = r->kind;
		w.text_len = (uint32_t)(t < LIVE_TEXT_MAX ? t : LIVE_TEXT_MAX);
		w.site_len = (uint32_t)(s < LIVE_TEXT_MAX ? s : LIVE_TEXT_MAX);
		w.count = r->count;
		w.total_ns = r->total_ns;
		w.rows = r->rows;
		w.errors = r->errors;
		w.min_ns = r->min_ns;
		w.max_ns = r->max_ns;
		w.p50_ns = r->p50_ns;
		w.p95_ns = r->p95_ns;
		memcpy(w.bucket, r->bucket, sizeof(w.bucket));
		memcpy(b + off, &w, sizeof(w));
		off += sizeof(w);
		memcpy(b + off, r->text, w.text_len);
		off += pad8(w.text_len);
		if (w.site_len)
			memcpy(b + off, r->site, w.site_len);
		off += pad8(w.site_len);
	}
	*buf = b;
	*len = n;
	return 0;
}

/* A string of len bytes at buf + *off (within total), NUL-terminated
 * copy; *off moves past its padding. NULL when it does not fit. */
static char *take_str(const uint8_t *buf, size_t total, size_t *off, uint32_t len, int *bad)
{
	char *s;

	if (len > LIVE_TEXT_MAX || *off > total || pad8(len) > total - *off) {
		*bad = 1;
		return NULL;
	}
	s = malloc(len + 1);
	if (!s)
		return NULL;
	memcpy(s, buf + *off, len);
	s[len] = 0;
	*off += pad8(len);
	return s;
}

int sp_live_decode(const uint8_t *buf, size_t len, struct sp_live *out, char *err, size_t errlen)
{
	struct wire_hdr h;
	size_t off = sizeof(h);
	int bad = 0;

	memset(out, 0, sizeof(*out));
	if (len < sizeof(h)) {
		snprintf(err, errlen, "the agent's answer is too short (%zu bytes)", len);
		return -1;
	}
	memcpy(&h, buf, sizeof(h));
	if (h.magic != LIVE_MAGIC || h.version != SP_VIEW_VERSION) {
		snprintf(err, errlen, "the agent's answer is not of this version of sqlprof");
		return -1;
	}
	if (h.nrows > (len - sizeof(h)) / sizeof(struct wire_row)) {
		snprintf(err, errlen, "the agent's answer is damaged (%u rows in %zu bytes)",
			 h.nrows, len);
		return -1;
	}
	out->lost = h.lost;
	out->processes = h.processes;
	out->executions = h.executions;
	out->restarts = h.restarts;
	out->time_ns = h.time_ns;
	out->pending = h.pending;
	if (h.profile_len) {
		out->profile = take_str(buf, len, &off, h.profile_len, &bad);
		if (!out->profile)
			goto fail;
	}
	out->rows = calloc(h.nrows ? h.nrows : 1, sizeof(*out->rows));
	if (!out->rows)
		goto fail;
	for (uint32_t i = 0; i < h.nrows; i++) {
		struct sp_live_row *r = &out->rows[i];
		struct wire_row w;

		if (off > len || len - off < sizeof(w)) {
			bad = 1;
			goto fail;
		}
		memcpy(&w, buf + off, sizeof(w));
		off += sizeof(w);
		r->fp_id = w.fp_id;
		r->kind = w.kind == SP_KIND_EXEC ? SP_KIND_EXEC : SP_KIND_STMT;
		r->count = w.count;
		r->total_ns = w.total_ns;
		r->rows = w.rows;
		r->errors = w.errors;
		r->min_ns = w.min_ns;
		r->max_ns = w.max_ns;
		r->p50_ns = w.p50_ns;
		r->p95_ns = w.p95_ns;
		memcpy(r->bucket, w.bucket, sizeof(r->bucket));
		r->text = take_str(buf, len, &off, w.text_len, &bad);
		if (!r->text)
			goto fail;
		out->n = i + 1;
		if (w.site_len) {
			r->site = take_str(buf, len, &off, w.site_len, &bad);
			if (!r->site)
				goto fail;
		}
	}
	return 0;
fail:
	snprintf(err, errlen, bad ? "the agent's answer is damaged" : "out of memory");
	sp_live_free(out);
	return -1;
}

/* ---- OpenTelemetry's db.query.summary ------------------------------------ */

/* The next word of s (letters, digits, _ $ and bytes >= 0x80, or a quoted
 * identifier) from *p: its start and length; 0 at the end. */
static size_t next_word(const char *s, size_t *p, size_t *start)
{
	size_t i = *p, n;

	while (s[i] &&
	       !((unsigned char)s[i] >= 0x80 || s[i] == '_' || s[i] == '"' || s[i] == '`' ||
		 s[i] == '[' || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= 'a' && s[i] <= 'z')))
		i++;
	if (!s[i]) {
		*p = i;
		return 0;
	}
	*start = i;
	if (s[i] == '"' || s[i] == '`' || s[i] == '[') {
		char close = s[i] == '[' ? ']' : s[i];

		for (i++; s[i] && s[i] != close; i++)
			;
		if (s[i])
			i++;
	} else {
		while (s[i] && ((unsigned char)s[i] >= 0x80 || s[i] == '_' || s[i] == '$' ||
				s[i] == '.' || (s[i] >= 'A' && s[i] <= 'Z') ||
				(s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9')))
			i++;
	}
	n = i - *start;
	*p = i;
	return n;
}

static int word_is(const char *w, size_t n, const char *kw)
{
	return strlen(kw) == n && !strncmp(w, kw, n);
}

/* 1 when w[0..k) is an identifier that needs no quotes. */
static int plain(const char *w, size_t k)
{
	for (size_t i = 0; i < k; i++)
		if (!((unsigned char)w[i] >= 0x80 || w[i] == '_' ||
		      ((w[i] | 0x20) >= 'a' && (w[i] | 0x20) <= 'z') ||
		      (i && w[i] >= '0' && w[i] <= '9')))
			return 0;
	return k > 0;
}

/* The name at fp + st (n bytes) and the parts joined to it by dots
 * ("main"."users", main.users, [t]): its last two parts unquoted, the
 * default schema "main" left out, into out[len]; *p moves past it. */
static void summary_name(const char *fp, size_t *p, size_t st, size_t n, char *out, size_t len)
{
	char part[2][72];
	int np = 0;

	for (;;) {
		const char *w = fp + st, *dot;
		size_t k = n;

		if (k >= 3 && (*w == '"' || *w == '`' || *w == '[') &&
		    w[k - 1] == (*w == '[' ? ']' : *w) && plain(w + 1, k - 2)) {
			w++; /* "users": users; "my table" keeps its quotes */
			k -= 2;
		} else if ((dot = memchr(w, '.', k)) && dot + 1 < w + k) {
			/* main.users: one word */
			snprintf(part[0], sizeof(part[0]), "%.*s",
				 (int)(dot - w < 64 ? dot - w : 64), w);
			np = 1;
			k -= (size_t)(dot + 1 - w);
			w = dot + 1;
		}
		if (np == 2) {
			memcpy(part[0], part[1], sizeof(part[0]));
			np = 1;
		}
		snprintf(part[np++], sizeof(part[0]), "%.*s", (int)(k < 64 ? k : 64), w);
		/* "main".x: the next part right after the dot */
		if (fp[*p] != '.' ||
		    !(fp[*p + 1] == '"' || fp[*p + 1] == '`' || fp[*p + 1] == '[' ||
		      fp[*p + 1] == '_' || (unsigned char)fp[*p + 1] >= 0x80 ||
		      ((fp[*p + 1] | 0x20) >= 'a' && (fp[*p + 1] | 0x20) <= 'z')))
			break;
		(*p)++;
		if (!(n = next_word(fp, p, &st)))
			break;
	}
	if (np == 2 && strcmp(part[0], "main"))
		snprintf(out, len, "%s.%s", part[0], part[1]);
	else
		snprintf(out, len, "%s", part[np - 1]);
}

void sp_live_summary(const char *fp, char *out, size_t len)
{
	size_t p = 0, st = 0, n, opn, opst;
	const char *after[] = { "FROM", "INTO", "UPDATE", "TABLE", "INDEX", "VIEW", "TRIGGER" };
	char name[160];

	out[0] = 0;
	opn = next_word(fp, &p, &opst);
	if (!opn)
		return;
	if (word_is(fp + opst, opn, "UPDATE")) {
		/* UPDATE [OR ...] t */
		n = next_word(fp, &p, &st);
		if (word_is(fp + st, n, "OR")) {
			next_word(fp, &p, &st);
			n = next_word(fp, &p, &st);
		}
		summary_name(fp, &p, st, n, name, sizeof(name));
		snprintf(out, len, "UPDATE %s", name);
		return;
	}
	while ((n = next_word(fp, &p, &st))) {
		for (size_t i = 0; i < sizeof(after) / sizeof(after[0]); i++)
			if (word_is(fp + st, n, after[i])) {
				size_t tn = next_word(fp, &p, &st);

				/* IF NOT EXISTS, IF EXISTS */
				while (tn &&
				       (word_is(fp + st, tn, "IF") || word_is(fp + st, tn, "NOT") ||
					word_is(fp + st, tn, "EXISTS")))
					tn = next_word(fp, &p, &st);
				if (tn) {
					summary_name(fp, &p, st, tn, name, sizeof(name));
					snprintf(out, len, "%.*s %s", (int)(opn < 32 ? opn : 32),
						 fp + opst, name);
				} else
					snprintf(out, len, "%.*s", (int)(opn < 32 ? opn : 32),
						 fp + opst);
				return;
			}
	}
	snprintf(out, len, "%.*s", (int)(opn < 32 ? opn : 32), fp + opst);
}
