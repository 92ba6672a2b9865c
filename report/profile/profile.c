/* SPDX-License-Identifier: MIT */
/*
 * profile.c - write and open profile files; see profile-write.h, profile.h and
 * docs/profile-format.md. Queries are grouped by fingerprint here, and every
 * stack is symbolized here, so that a profile stays readable after the
 * profiled binaries are rebuilt or deleted.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fingerprint.h"
#include "kind.h"
#include "profile-write.h"
#include "pyline.h"
#include "rowsrc.h"
#include "series.h"
#include "sym.h"
#include "untrusted.h"

/*
 * The CREATE TABLE, INDEX and VIEW statements of the database file at
 * path, each ending in ";\n", as a malloc'd string; NULL when it cannot be
 * read. Opened read-only and immutable (no lock taken, no journal or WAL
 * looked at: the program may still hold the file, and must not be held up
 * by us), defensively (sp_untrusted_open: the file is the program's, not
 * ours). A file changed or removed since the run gives what it holds now,
 * or nothing.
 */
/* The database file at path, opened as file_schema says; NULL when it
 * cannot be. */
static sqlite3 *open_program_file(const char *path)
{
	char uri[8192], err[256];
	size_t o = 0;
	struct stat sb;
	const char *p;

	if (!path || path[0] != '/' || stat(path, &sb) < 0 || !S_ISREG(sb.st_mode))
		return NULL;
	o = (size_t)snprintf(uri, sizeof(uri), "file:");
	for (p = path; *p && o + 4 < sizeof(uri); p++) {
		unsigned char ch = (unsigned char)*p;

		if (ch == '%' || ch == '?' || ch == '#' || ch < 0x21 || ch >= 0x7f)
			o += (size_t)snprintf(uri + o, sizeof(uri) - o, "%%%02X", ch);
		else
			uri[o++] = (char)ch;
	}
	if (*p || o + 16 >= sizeof(uri))
		return NULL;
	snprintf(uri + o, sizeof(uri) - o, "?immutable=1");
	return sp_untrusted_open(uri, SQLITE_OPEN_URI, sb.st_size, NULL, err, sizeof(err));
}

static char *file_schema(const char *path)
{
	char *out = NULL;
	size_t n = 0, cap = 0;
	sqlite3 *db = open_program_file(path);
	sqlite3_stmt *st = NULL;

	if (!db)
		return NULL;
	if (sqlite3_prepare_v2(db,
			       "SELECT sql FROM main.sqlite_schema WHERE sql NOT NULL"
			       " AND type IN ('table', 'index', 'view') ORDER BY rowid",
			       -1, &st, NULL) == SQLITE_OK) {
		int rc;

		while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
			const char *sql = (const char *)sqlite3_column_text(st, 0);
			size_t l = sql ? strlen(sql) : 0;

			if (n + l + 3 > cap) {
				size_t nc = (n + l + 3) * 2;
				char *x = nc <= 4 * SP_SCHEMA_MAX ? realloc(out, nc) : NULL;

				if (!x) {
					rc = SQLITE_NOMEM;
					break;
				}
				out = x;
				cap = nc;
			}
			memcpy(out + n, sql, l);
			memcpy(out + n + l, ";\n", 3);
			n += l + 2;
		}
		if (rc != SQLITE_DONE) {
			free(out);
			out = NULL;
		}
	}
	sqlite3_finalize(st);
	sqlite3_close(db);
	return out;
}

static const char schema[] =
	"PRAGMA journal_mode=OFF;"
	"PRAGMA synchronous=OFF;"
	/* the temporary tables of the writer and series.c in memory: a
	 * temporary file costs a random name, a create and an unlink */
	"PRAGMA temp_store=MEMORY;"
	"PRAGMA application_id=1399935078;" /* SP_PROFILE_APP_ID: outfile.c */
	"CREATE TABLE meta(key TEXT PRIMARY KEY, value);"
	"CREATE TABLE processes(pid INTEGER PRIMARY KEY, ppid INTEGER, exe TEXT,"
	" executions INTEGER, lost INTEGER, untracked INTEGER, sqlite_found INTEGER,"
	" clean_exit INTEGER, messages INTEGER, bad_messages INTEGER, ns_pid INTEGER);"
	"CREATE TABLE queries(fp_id INTEGER, kind TEXT, fingerprint TEXT, sql TEXT,"
	" count INTEGER, total_ns INTEGER, self_ns INTEGER, wall_ns INTEGER,"
	" min_ns INTEGER, max_ns INTEGER, rows INTEGER, vm_steps INTEGER,"
	" fullscan_steps INTEGER, sorts INTEGER, autoindex INTEGER, errors INTEGER,"
	" nested INTEGER, samples INTEGER, prepares INTEGER, prepare_ns INTEGER,"
	" runs INTEGER, max_run INTEGER, PRIMARY KEY(fp_id, kind));"
	"CREATE TABLE runs(fp_id INTEGER, kind TEXT, min_len INTEGER, max_len INTEGER,"
	" count INTEGER);"
	"CREATE TABLE run_totals(run INTEGER, fp_id INTEGER, kind TEXT, count INTEGER,"
	" total_ns INTEGER);"
	"CREATE TABLE plans(fp_id INTEGER, sql_id INTEGER, plan TEXT, connections INTEGER,"
	" schema_id INTEGER);"
	"CREATE TABLE plan_gaps(fp_id INTEGER, sql_id INTEGER, reason TEXT, connections INTEGER);"
	"CREATE TABLE schemas(schema_id INTEGER PRIMARY KEY, sql TEXT);"
	"CREATE TABLE duplicates(fp_id INTEGER, kind TEXT, samples INTEGER, repeats INTEGER,"
	" top INTEGER, PRIMARY KEY(fp_id, kind));"
	"CREATE TABLE histograms(fp_id INTEGER, kind TEXT, bucket_ns INTEGER, count INTEGER);"
	"CREATE TABLE statements(sql_id INTEGER PRIMARY KEY, fp_id INTEGER, sql TEXT,"
	" full_len INTEGER, truncated INTEGER);"
	"CREATE TABLE stack_samples(fp_id INTEGER, kind TEXT, pid INTEGER, stack_id INTEGER,"
	" samples INTEGER, total_ns INTEGER, rows INTEGER, vm_steps INTEGER,"
	" random_samples INTEGER, random_ns INTEGER);"
	"CREATE TABLE callers(fp_id INTEGER, kind TEXT, pid INTEGER, pc INTEGER, count INTEGER,"
	" total_ns INTEGER);"
	"CREATE TABLE frames(pid INTEGER, stack_id INTEGER, idx INTEGER, pc INTEGER,"
	" module TEXT, function TEXT, file TEXT, line INTEGER, inlined INTEGER,"
	" PRIMARY KEY(pid, stack_id, idx));"
	"CREATE TABLE errors(fp_id INTEGER, kind TEXT, rc INTEGER, message TEXT, pid INTEGER,"
	" stack_id INTEGER, count INTEGER);"
	"CREATE TABLE modules(pid INTEGER, generation INTEGER, path TEXT, build_id TEXT,"
	" bias INTEGER, lo INTEGER, hi INTEGER, sqlite INTEGER);";

/* What the readers look queries up by (format 3). Those of tables whose
 * rows come in the index's order are made before the rows, each row then
 * added at the end of the index (histograms and runs: at 20,000
 * fingerprints the writer's 2,247 M instructions became 2,077 M); the
 * others after the rows are in (cheaper than keeping them up to date in a
 * random order). */
static const char indexes_first[] =
	"CREATE INDEX histograms_query ON histograms(fp_id, kind);"
	"CREATE INDEX runs_query ON runs(fp_id, kind);"
	"CREATE INDEX stack_samples_query ON stack_samples(fp_id, kind);"
	"CREATE INDEX callers_query ON callers(fp_id, kind);";
static const char indexes[] = "CREATE UNIQUE INDEX run_totals_key ON run_totals(fp_id, kind, run);"
			      "CREATE INDEX plans_fp ON plans(fp_id);"
			      "CREATE INDEX plan_gaps_fp ON plan_gaps(fp_id);"
			      "CREATE INDEX statements_fp ON statements(fp_id);"
			      "CREATE INDEX errors_fp ON errors(fp_id);"
			      "CREATE INDEX modules_pid ON modules(pid);";

/* The events table and its indexes, apart: `sqlprof record` builds them
 * while the command runs (sp_timeline, report/record/timeline.c), and the
 * profile then starts from that file (sp_profile_write). The timelines
 * read events in thread order (chrome) and in start order (perfetto),
 * streamed: 1 M events sorted by SQLite at export took 3.8 and 4.1 s,
 * through these indexes 2.3 s each (1.05 s to make them). */
static const char events_table[] =
	"CREATE TABLE events(pid INTEGER, tid INTEGER, seq INTEGER, parent_seq INTEGER,"
	" fp_id INTEGER, kind TEXT, sql_id INTEGER, stack_id INTEGER, start_ns INTEGER,"
	" wall_ns INTEGER, db_ns INTEGER, self_ns INTEGER, rows INTEGER, vm_steps INTEGER,"
	" rc INTEGER, flags INTEGER);";
static const char events_indexes[] = "CREATE INDEX events_thread ON events(pid, tid, start_ns);"
				     "CREATE INDEX events_start ON events(start_ns);";

_Static_assert(SP_QK_STMT == (int)SP_KIND_STMT && SP_QK_EXEC == (int)SP_KIND_EXEC,
	       "kind.h's kinds are the wire's");

/* The kind column's text for a recorded (wire) kind. */
static const char *kind_name(uint64_t k)
{
	return sp_qkind_name(k == SP_KIND_EXEC ? SP_QK_EXEC : SP_QK_STMT);
}

/* Fingerprint of each distinct SQL text (its text owned by the
 * write's fptext map, one per fingerprint id). */
struct fpinfo {
	uint64_t fp_id;
	const char *fingerprint;
	const char *text;
};

/* A fingerprint's sums. Its histogram and run lengths are the
 * collector's own (borrowed: not freed here) while one text of the
 * fingerprint has them, and a copy once a second adds to them: most
 * fingerprints have one, and a copy of each took 1 KB to 2 KB a
 * fingerprint (200,000 of them: 400 MB of the writer's peak). */
struct fagg {
	struct sp_qagg q;
	const struct fpinfo *fi;
	uint64_t kind;
	uint8_t hist_own, runs_own;
};

/* a->q.hist plus src: borrowed while it is the first; 0, or -1 (ENOMEM) */
static int fagg_hist_add(struct fagg *a, struct sp_hist *src)
{
	struct sp_hist *h;

	if (!a->q.hist) {
		a->q.hist = src;
		return 0;
	}
	if (!a->hist_own) {
		if (!(h = sp_hist_new()))
			return -1;
		sp_hist_merge(h, a->q.hist);
		a->q.hist = h;
		a->hist_own = 1;
	}
	sp_hist_merge(a->q.hist, src);
	return 0;
}

/* A map's entry with its key as SQLite orders it (an INTEGER, then the
 * kind's text): rows inserted in that order go at the end of their
 * table's b-tree and its key's index, where random order (the keys are
 * hashes) touched a page anywhere in them for each row: 200,000 texts
 * took 4.1 s of CPU in statements, in order 1.0 s. */
struct keyed {
	int64_t key;
	const char *kind; /* NULL: none */
	void *v;
};

/* How many rows ahead of the one made the writer asks for what that row
 * will read (its entries and look-ups): taken in key order, they are all
 * over maps of 30 to 200 MB at 200,000 fingerprints, a cache miss each,
 * which in turn were a third of the writer's time. */
#define ROWS_AHEAD 8

/* A row's sort key (sort_rows): (k, rank) ascending; i its row's index. */
struct skey {
	uint64_t k;    /* the INTEGER key, its sign bit flipped: compared unsigned */
	uint32_t rank; /* below 256: the kind's place (kind_rank), 0 when none */
	uint32_t i;
};

static struct skey skey_of(int64_t key, uint32_t rank, size_t i)
{
	return (struct skey){ (uint64_t)key ^ (UINT64_C(1) << 63), rank, (uint32_t)i };
}

/* The kind's text's place in SQLite's (and strcmp's) order of the kinds'
 * texts: 0 or 1. */
static uint32_t kind_rank(const char *kind)
{
	const char *other = strcmp(kind, kind_name(SP_KIND_EXEC)) ? kind_name(SP_KIND_EXEC)
								  : kind_name(SP_KIND_STMT);

	return strcmp(kind, other) > 0;
}

/*
 * Sort the n rows of size bytes (at most 64) at base by their keys sk[]
 * (sk[j] row j's), stably: a radix sort of the keys a byte a pass (a pass
 * where every key has the same byte skipped), then the rows moved into
 * place. sk is used up. 0, or -1 on ENOMEM (base unchanged). The order
 * is qsort's with the comparisons it was given (the key, then the kind's
 * text, then a map's rows in the map's order, which ties keep here); its
 * merge sort compared with a call and allocated a scratch array of the
 * rows' size each time (page faults): at 200,000 fingerprints
 * stack_samples and callers took 0.47 and 0.40 s, with this and the
 * look-ups ahead 0.27 and 0.19 s.
 */
static int sort_rows(void *base, size_t n, size_t size, struct skey *sk)
{
	size_t cnt[9][256];
	struct skey *tmp = NULL, *a = sk, *b;
	size_t cap = 0, j, d;
	uint8_t *rows = base, row[64];

	if (n < 2)
		return 0;
	if (size > sizeof(row) || n >= UINT32_MAX || SP_GROW(tmp, cap, n, 0) < 0)
		return -1;
	memset(cnt, 0, sizeof(cnt));
	for (j = 0; j < n; j++) {
		cnt[0][sk[j].rank & 255]++;
		for (d = 0; d < 8; d++)
			cnt[d + 1][(sk[j].k >> (8 * d)) & 255]++;
	}
	for (d = 0, b = tmp; d < 9; d++) {
		size_t pos[256], sum = 0;
		unsigned first = d ? (a[0].k >> (8 * (d - 1))) & 255 : a[0].rank & 255;

		if (cnt[d][first] == n)
			continue;
		for (j = 0; j < 256; j++) {
			pos[j] = sum;
			sum += cnt[d][j];
		}
		for (j = 0; j < n; j++) {
			unsigned v = d ? (a[j].k >> (8 * (d - 1))) & 255 : a[j].rank & 255;

			b[pos[v]++] = a[j];
		}
		b = a;
		a = a == sk ? tmp : sk;
	}
	/* row j is now the row at a[j].i: each cycle of the permutation
	 * followed once, a[] marking the places filled */
	for (j = 0; j < n; j++) {
		size_t cur = j, src;

		if (a[j].i == UINT32_MAX)
			continue;
		memcpy(row, rows + j * size, size);
		while ((src = a[cur].i) != j) {
			memcpy(rows + cur * size, rows + src * size, size);
			a[cur].i = UINT32_MAX;
			cur = src;
		}
		memcpy(rows + cur * size, row, size);
		a[cur].i = UINT32_MAX;
	}
	free(tmp);
	return 0;
}

/* a->q.loops_by_len plus src (n counts), as fagg_hist_add */
static int fagg_loops_add(struct fagg *a, uint64_t *src, uint32_t n)
{
	uint64_t *r;

	if (!a->q.loops_by_len) {
		a->q.loops_by_len = src;
		a->q.runs_nb = n;
		return 0;
	}
	if (!a->runs_own) {
		if (!(r = calloc(SP_RUN_BUCKETS, sizeof(*r))))
			return -1;
		memcpy(r, a->q.loops_by_len, a->q.runs_nb * sizeof(*r));
		a->q.loops_by_len = r;
		a->q.runs_nb = SP_RUN_BUCKETS;
		a->runs_own = 1;
	}
	for (uint32_t b = 0; b < n && b < SP_RUN_BUCKETS; b++)
		a->q.loops_by_len[b] += src[b];
	return 0;
}

static int exec_sql(sqlite3 *db, const char *sql, char *err, size_t errlen)
{
	char *msg = NULL;

	if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK) {
		snprintf(err, errlen, "profile: %s", msg ? msg : sqlite3_errmsg(db));
		sqlite3_free(msg);
		return -1;
	}
	return 0;
}

static sqlite3_stmt *prep(sqlite3 *db, const char *sql)
{
	sqlite3_stmt *st = NULL;

	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		return NULL;
	return st;
}

static int step_done(sqlite3_stmt *st)
{
	int rc = sqlite3_step(st);

	sqlite3_reset(st);
	return rc == SQLITE_DONE ? 0 : -1;
}

/* The modules of every process, sorted by pid: each pc is looked up among
 * its own process's modules only (a scan of every module of every process
 * per pc was 9,000 modules a frame with 300 processes). */
struct modidx {
	const struct sp_module **v;
	size_t n;
};

static int cmp_mod_pid(const void *pa, const void *pb)
{
	const struct sp_module *a = *(const struct sp_module *const *)pa;
	const struct sp_module *b = *(const struct sp_module *const *)pb;

	return a->pid < b->pid ? -1 : a->pid > b->pid;
}

static int modidx_build(struct modidx *mi, const struct sp_coll *c)
{
	size_t it = 0;
	const struct sp_module *m;

	mi->n = 0;
	mi->v = malloc((c->modules.count ? c->modules.count : 1) * sizeof(*mi->v));
	if (!mi->v)
		return -1;
	while ((m = hmap_next(&c->modules, &it, NULL)))
		mi->v[mi->n++] = m;
	sp_qsort(mi->v, mi->n, sizeof(*mi->v), cmp_mod_pid);
	return 0;
}

/* The module holding pc in the map the stack s was taken with: the newest
 * map of its process image not newer than its generation (a library
 * loaded later where an unloaded one was is another map's). A stack of
 * generation 0 (a map not sent yet) takes the newest map. */
static const struct sp_module *find_module(const struct modidx *mi, uint32_t pid,
					   const struct sp_stack *s, uint64_t pc)
{
	size_t lo = 0, hi = mi->n;
	const struct sp_module *best = NULL;

	while (lo < hi) { /* first module of pid */
		size_t mid = lo + (hi - lo) / 2;

		if (mi->v[mid]->pid < pid)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (; lo < mi->n && mi->v[lo]->pid == pid; lo++) {
		const struct sp_module *m = mi->v[lo];

		if (m->image == s->image && pc >= m->lo && pc < m->hi &&
		    (!s->generation || m->generation <= s->generation) &&
		    (!best || m->generation > best->generation))
			best = m;
	}
	return best;
}

static void hex(char *out, const uint8_t *p, size_t n)
{
	static const char d[] = "0123456789abcdef";
	size_t i;

	for (i = 0; i < n; i++) {
		out[2 * i] = d[p[i] >> 4];
		out[2 * i + 1] = d[p[i] & 15];
	}
	out[2 * n] = 0;
}

/* A Python frame (SP_PYFRAME): function (qualified name from 3.11),
 * file and line of its code object; module "python3.X" (a Ruby or PHP
 * frame's, iframes.c: "ruby", "php"). A code object
 * that never arrived gives "??". */
static int write_py_frame(sqlite3_stmt *st, const struct sp_coll *c, uint64_t pid,
			  uint64_t stack_id, int idx, uint64_t pc)
{
	uint64_t k[2] = { pid, SP_PYFRAME_CODE(pc) };
	const struct sp_pycode *py = hmap_get((struct hmap *)&c->pycodes, k, 0, NULL);
	char module[32] = "python";
	int line = 0;

	if (py) {
		if (py->major) /* else Ruby's or PHP's (SP_IF_RUBY, SP_IF_PHP) */
			snprintf(module, sizeof(module), "python%u.%u", py->major, py->minor);
		else
			snprintf(module, sizeof(module), "%s", py->minor == 1 ? "ruby" : "php");
		line = sp_py_line(py->major, py->minor, py->table, py->table_len, py->firstlineno,
				  SP_PYFRAME_OFF(pc));
	}
	sqlite3_bind_int64(st, 1, (sqlite3_int64)pid);
	sqlite3_bind_int64(st, 2, (sqlite3_int64)stack_id);
	sqlite3_bind_int(st, 3, idx);
	sqlite3_bind_int64(st, 4, (sqlite3_int64)pc);
	sqlite3_bind_text(st, 5, module, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 6, py ? (py->qualname ? py->qualname : py->name) : "??", -1,
			  SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 7, py ? py->file : "??", -1, SQLITE_TRANSIENT);
	sqlite3_bind_int(st, 8, line);
	sqlite3_bind_int(st, 9, 0);
	return step_done(st);
}

struct sym_ctx *sp_sym_open(const char *debug_path)
{
	struct sym_ctx *sym = sym_open();
	const char *off = getenv("SQLPROF_SYMCACHE"), *xdg = getenv("XDG_CACHE_HOME");
	const char *home = getenv("HOME");
	char dir[PATH_MAX];
	int n = -1;

	if (!sym)
		return NULL;
	if (debug_path && *debug_path)
		sym_set_debug_path(sym, debug_path);
	if (off && !strcmp(off, "0"))
		return sym;
	/* XDG base directories: a relative XDG_CACHE_HOME is ignored */
	if (xdg && xdg[0] == '/')
		n = snprintf(dir, sizeof(dir), "%s/sqlprof/sym", xdg);
	else if (home && home[0] == '/')
		n = snprintf(dir, sizeof(dir), "%s/.cache/sqlprof/sym", home);
	if (n > 0 && (size_t)n < sizeof(dir))
		sym_set_cache_dir(sym, dir); /* not ours, not writable: none */
	return sym;
}

/* A module a stack needs, copied out of the model for sp_profile_sym_prewarm. */
struct warm_req {
	char *path;
	uint8_t build_id[64];
	uint32_t build_id_len;
	uint64_t bias, pc;
};

size_t sp_profile_sym_prewarm(struct sym_ctx *sym, struct sp_coll *c, pthread_mutex_t *lock,
			      struct hmap *opened)
{
	struct modidx mi = { 0 };
	struct warm_req *req = NULL;
	size_t nreq = 0, capreq = 0, it = 0, i;
	const struct {
		uint64_t pid, stack_id;
	} * key;
	struct sp_stack *s;

	pthread_mutex_lock(lock);
	if (modidx_build(&mi, c) < 0)
		goto unlock;
	while ((s = hmap_next(&c->stacks, &it, (const void **)&key))) {
		for (uint32_t f = 0; f < s->depth; f++) {
			const struct sp_module *mod;
			uint64_t h;
			int created;

			if (s->pcs[f] & SP_PYFRAME_BIT)
				continue;
			mod = find_module(&mi, (uint32_t)key->pid, s, s->pcs[f]);
			if (!mod || !mod->path)
				continue;
			h = sp_hash64(mod->path, strlen(mod->path)) ^
			    sp_hash64(mod->build_id,
				      mod->build_id_len < 64 ? mod->build_id_len : 64);
			if (!hmap_get(opened, &h, 1, &created) || !created)
				continue;
			if (sp_module_changed(mod) || SP_GROW(req, capreq, nreq + 1, 8) < 0)
				continue;
			req[nreq].path = strdup(mod->path);
			req[nreq].build_id_len = mod->build_id_len < 64 ? mod->build_id_len : 64;
			memcpy(req[nreq].build_id, mod->build_id, req[nreq].build_id_len);
			req[nreq].bias = mod->bias;
			req[nreq].pc = s->pcs[f];
			nreq += req[nreq].path != NULL;
		}
	}
unlock:
	pthread_mutex_unlock(lock);
	free(mi.v);
	for (i = 0; i < nreq; i++) {
		const struct sym_result *res;

		sym_lookup(sym, req[i].path, req[i].build_id, req[i].build_id_len, req[i].bias,
			   req[i].pc, 1, &res);
		free(req[i].path);
	}
	free(req);
	return nreq;
}

static int write_frames(sqlite3 *db, struct sp_coll *c, const struct sp_meta *m)
{
	sqlite3_stmt *st = prep(db, "INSERT INTO frames VALUES(?,?,?,?,?,?,?,?,?)");
	struct sym_ctx *sym = m->sym ? m->sym : sp_sym_open(m->debug_path);
	struct modidx mi = { 0 };
	size_t it = 0;
	const struct {
		uint64_t pid, stack_id;
	} * key;
	struct sp_stack *s;
	struct sp_module *m_;
	int rc = 0;

	if (!st || !sym || modidx_build(&mi, c) < 0) {
		sqlite3_finalize(st);
		if (sym && sym != m->sym)
			sym_close(sym);
		free(mi.v);
		return -1;
	}
	for (it = 0; (m_ = hmap_next(&c->modules, &it, NULL));)
		m_->changed = sp_module_changed(m_);
	it = 0;
	/* Never wait on the network at the end of a recording. */
	unsetenv("DEBUGINFOD_URLS");
	while ((s = hmap_next(&c->stacks, &it, (const void **)&key))) {
		int idx = 0;
		uint32_t i;

		for (i = 0; i < s->depth; i++) {
			uint64_t pc = s->pcs[i];
			const struct sp_module *mod;
			const struct sym_result *res = NULL;
			int f;

			if (pc & SP_PYFRAME_BIT) {
				if (write_py_frame(st, c, key->pid, key->stack_id, idx++, pc) < 0)
					rc = -1;
				continue;
			}
			mod = find_module(&mi, (uint32_t)key->pid, s, pc);
			if (mod && !mod->changed)
				sym_lookup(sym, mod->path, mod->build_id, mod->build_id_len,
					   mod->bias, pc, 1, &res);
			if (!res || res->nframes < 1) {
				sqlite3_bind_int64(st, 1, (sqlite3_int64)key->pid);
				sqlite3_bind_int64(st, 2, (sqlite3_int64)key->stack_id);
				sqlite3_bind_int(st, 3, idx++);
				sqlite3_bind_int64(st, 4, (sqlite3_int64)pc);
				sqlite3_bind_text(st, 5, mod ? mod->path : "??", -1, SQLITE_STATIC);
				sqlite3_bind_text(st, 6, "??", -1, SQLITE_STATIC);
				sqlite3_bind_text(st, 7, "??", -1, SQLITE_STATIC);
				sqlite3_bind_int(st, 8, 0);
				sqlite3_bind_int(st, 9, 0);
				if (step_done(st) < 0)
					rc = -1;
				continue;
			}
			for (f = 0; f < res->nframes; f++) {
				const struct sym_frame *fr = &res->frames[f];

				sqlite3_bind_int64(st, 1, (sqlite3_int64)key->pid);
				sqlite3_bind_int64(st, 2, (sqlite3_int64)key->stack_id);
				sqlite3_bind_int(st, 3, idx++);
				sqlite3_bind_int64(st, 4, (sqlite3_int64)pc);
				sqlite3_bind_text(st, 5, mod->path, -1, SQLITE_TRANSIENT);
				sqlite3_bind_text(st, 6, fr->function, -1, SQLITE_TRANSIENT);
				sqlite3_bind_text(st, 7, fr->file, -1, SQLITE_TRANSIENT);
				sqlite3_bind_int(st, 8, fr->line);
				sqlite3_bind_int(st, 9, fr->inlined);
				if (step_done(st) < 0)
					rc = -1;
			}
		}
	}
	{
		/* why frames lost names or lines, once per module: record
		 * says it, and the profile keeps it (meta symbolizer_notes) */
		const char *const *notes;
		size_t nn = sym_notes(sym, &notes), len = 0;

		free(c->sym_notes);
		c->sym_notes = NULL;
		for (size_t i = 0; i < nn; i++)
			len += strlen(notes[i]) + 1;
		if (nn && (c->sym_notes = malloc(len + 1)) != NULL) {
			char *p = c->sym_notes;

			for (size_t i = 0; i < nn; i++)
				p += sprintf(p, "%s\n", notes[i]);
		}
	}
	if (getenv("SQLPROF_SYMSTATS")) {
		/* for tests: what the symbolizer opened and what came from its
		 * cache, deterministic where times are not (configuration.md) */
		struct sym_stats ss;

		sym_get_stats(sym, &ss);
		fprintf(stderr,
			"sqlprof: symbolizer: %lu modules opened, %lu lookups, %lu from cache files"
			" (%lu files used, %lu stale, %lu rejected)\n",
			ss.modules_opened, ss.lookups, ss.cache_hits, ss.cache_files,
			ss.cache_stale, ss.cache_rejected);
	}
	sqlite3_finalize(st);
	if (sym != m->sym)
		sym_close(sym);
	free(mi.v);
	return rc;
}

/* What the steps of write_all share: the profile in its transaction, the
 * recording and its metadata, and the maps the first steps build for the
 * others (each owned here, freed by write_all). */
struct pw {
	sqlite3 *db;
	struct sp_coll *c;
	const struct sp_meta *m;
	struct hmap fps;     /* sql_id -> struct fpinfo */
	struct hmap fptext;  /* fp_id -> its fingerprint's text (malloc'd) */
	struct hmap fagg;    /* {fp_id, kind} -> struct fagg */
	struct keyed *qbyid; /* w->fagg's entries in (fp_id, kind) order, nq */
	size_t nq;
	char *err;
	size_t errlen;
	uint64_t pre_events; /* spilled events already in the file (a timeline) */
};

/* A step's exits: the reason into w->err, st (may be NULL) finalized,
 * -1 returned. */
static int pw_sqlerr(struct pw *w, sqlite3_stmt *st)
{
	snprintf(w->err, w->errlen, "profile: %s", sqlite3_errmsg(w->db));
	sqlite3_finalize(st);
	return -1;
}

static int pw_nomem(struct pw *w, sqlite3_stmt *st)
{
	snprintf(w->err, w->errlen, "profile: out of memory");
	sqlite3_finalize(st);
	return -1;
}

/* meta: the format, the command and its exit, the sampling rate, what was
 * lost, dropped or malformed, the processes that could not connect or
 * died. */
static int write_meta(struct pw *w)
{
	sqlite3 *db = w->db;
	struct sp_coll *c = w->c;
	const struct sp_meta *m = w->m;
	sqlite3_stmt *st = NULL;
	char buf[64];

	st = prep(db, "INSERT INTO meta VALUES(?,?)");
	if (!st)
		return pw_sqlerr(w, st);
#define META_TEXT(key, val)                                          \
	do {                                                         \
		sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);    \
		sqlite3_bind_text(st, 2, val, -1, SQLITE_TRANSIENT); \
		if (step_done(st) < 0)                               \
			return pw_sqlerr(w, st);                     \
	} while (0)
#define META_INT(key, val)                                        \
	do {                                                      \
		sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC); \
		sqlite3_bind_int64(st, 2, (sqlite3_int64)(val));  \
		if (step_done(st) < 0)                            \
			return pw_sqlerr(w, st);                  \
	} while (0)
	META_INT("format", SP_PROFILE_FORMAT);
	META_TEXT("sqlprof_version", SQLPROF_VERSION);
	META_TEXT("command", m->command ? m->command : "");
	META_INT("started", m->started);
	META_INT("duration_ns", m->duration_ns);
	META_INT("exit_status", m->exit_status);
	snprintf(buf, sizeof(buf), "%g", m->rate);
	META_TEXT("rate", buf);
	META_INT("lost", sp_coll_lost(c));
	META_INT("events_dropped", c->events_dropped);
	if (w->pre_events) /* put in the events table while the command ran */
		META_INT("events_prewritten", w->pre_events);
	META_INT("bad_messages", c->bad_messages);
	if (c->plans_bound) { /* the bound that left later queries without a plan */
		char why[400];

		snprintf(why, sizeof(why), "%u process%s: %s", c->plans_bound,
			 c->plans_bound == 1 ? "" : "es",
			 c->plans_bound_why ? c->plans_bound_why : "plan table full");
		META_TEXT("plans_bound", why);
	}
	/* descriptors the collector could not take (out of them) and the
	 * images whose totals were lost with them or could not be mapped */
	META_INT("descriptors_lost", c->fds_lost);
	META_INT("statistics_lost", c->stats_lost);
	META_INT("executions_missing", sp_coll_missing(c));
	META_INT("descriptor_waits", c->fd_waits);
	META_INT("runs", m->repeat > 0 ? m->repeat : 1);
	{
		/* executions whose times came out negative and were clamped */
		uint64_t clamped = 0, folded = 0;
		size_t it = 0;
		const struct sp_proc *p;

		size_t ntsc = 0, nmono = 0;

		while ((p = hmap_next(&c->procs, &it, NULL))) {
			clamped += p->clamped;
			folded += p->texts_folded;
			if (p->hello)
				*(p->clock == SP_CLOCK_TSC ? &ntsc : &nmono) += 1;
		}
		if (clamped)
			META_INT("clock_clamped", clamped);
		/* texts counted in their fingerprint's folded text */
		if (folded)
			META_INT("texts_folded", folded);
		/* the clock the processes timed executions with */
		if (ntsc || nmono)
			META_TEXT("clock", !nmono ? "tsc" : !ntsc ? "monotonic" : "mixed");
	}
	{
		uint64_t complete, unrep = sp_coll_unreported(c, &complete);

		/* processes that could not connect: all, and those whose
		 * executions are missing (no file, or killed before it
		 * held their totals) */
		META_INT("unreported", unrep);
		META_INT("unreported_missing", unrep - complete);
	}
	{
		/* processes that died (no BYE), and what they were running */
		char *died = sp_coll_deaths(c);

		if (died) {
			int r;

			sqlite3_bind_text(st, 1, "died", -1, SQLITE_STATIC);
			sqlite3_bind_text(st, 2, died, -1, SQLITE_TRANSIENT);
			r = step_done(st);
			free(died);
			if (r < 0)
				return pw_sqlerr(w, st);
		}
	}
	sqlite3_finalize(st);
	return 0;
#undef META_TEXT
#undef META_INT
}

/* processes: one row per process image that connected. */
static int write_processes(struct pw *w)
{
	sqlite3 *db = w->db;
	struct sp_coll *c = w->c;
	sqlite3_stmt *st = NULL;
	size_t it;
	void *v;

	st = prep(db, "INSERT INTO processes VALUES(?,?,?,?,?,?,?,?,?,?,?)");
	if (!st)
		return pw_sqlerr(w, st);
	it = 0;
	while ((v = hmap_next(&c->procs, &it, NULL))) {
		struct sp_proc *p = v;

		sqlite3_bind_int64(st, 1, p->pid);
		sqlite3_bind_int64(st, 2, p->ppid);
		sqlite3_bind_text(st, 3, p->exe ? p->exe : "", -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 4, (sqlite3_int64)p->execs);
		sqlite3_bind_int64(st, 5, (sqlite3_int64)p->lost);
		sqlite3_bind_int64(st, 6, (sqlite3_int64)p->untracked);
		sqlite3_bind_int(st, 7, p->sqlite_found);
		/* it exited: its BYE came, or the kernel told (sp_coll_settle) */
		sqlite3_bind_int(st, 8, p->bye || (p->exit_known && WIFEXITED(p->exit_status)));
		sqlite3_bind_int64(st, 9, (sqlite3_int64)p->msgs);
		sqlite3_bind_int64(st, 10, (sqlite3_int64)p->bad_msgs);
		if (p->ns_pid) /* NULL: in the recorder's pid namespace */
			sqlite3_bind_int64(st, 11, p->ns_pid);
		else
			sqlite3_bind_null(st, 11);
		if (step_done(st) < 0)
			return pw_sqlerr(w, st);
	}
	sqlite3_finalize(st);
	return 0;
}

/* 1 for the preload's placeholder texts, which keep their own text as
 * their fingerprint (readable) */
static int placeholder(const char *text)
{
	return text[0] == '<' && text[strlen(text) - 1] == '>' &&
	       (!strcmp(text, "<statement without SQL text>") ||
		!strcmp(text, SP_SQL_UNATTRIBUTED_TEXT) || !strcmp(text, SP_SQL_FOLDED_TEXT));
}

uint64_t sp_profile_sql_fp_id(const struct sp_sql *s)
{
	const char *text = s->text ? s->text : "";
	uint64_t id = 0;
	char *made;

	if (placeholder(text))
		return sp_hash64(text, strlen(text));
	if (s->fp_id)
		return s->fp_id;
	made = sp_fingerprint(text, strlen(text), &id);
	free(made);
	return made ? id : 0;
}

/* The rows of statements, in sql_id order (byid), each text's fpinfo
 * made on the way. */
struct stmt_rows {
	struct sp_rowsrc src; /* first: the callback's argument */
	struct pw *w;
	struct keyed *byid;
	size_t i, n;
	int nomem;
};

/* The fingerprint of text (the collector's id, when it computed one:
 * the fingerprint's text is made once per id, a dump's 100,000 INSERT
 * texts have one) into fi; 0, or -1 on ENOMEM. */
static int stmt_fpinfo(struct pw *w, struct fpinfo *fi, const struct sp_sql *s, const char *text)
{
	char **fp;
	int created;

	fi->text = text;
	if (placeholder(text)) {
		/* the preload's placeholder: keep it readable */
		fi->fp_id = sp_hash64(text, strlen(text));
		fp = hmap_get(&w->fptext, &fi->fp_id, 1, &created);
		if (fp && created)
			*fp = strdup(text);
	} else {
		uint64_t id = s->fp_id;
		char *made = NULL;

		if (!id && !(made = sp_fingerprint(text, strlen(text), &id)))
			return -1;
		fi->fp_id = id;
		fp = hmap_get(&w->fptext, &id, 1, &created);
		if (fp && created)
			*fp = made ? made : sp_fingerprint(text, strlen(text), &id);
		else
			free(made);
	}
	fi->fingerprint = fp ? *fp : NULL;
	return fi->fingerprint ? 0 : -1;
}

static int stmt_next(struct sp_rowsrc *src)
{
	struct stmt_rows *r = (struct stmt_rows *)src;
	struct sp_sql *s;
	struct fpinfo *fi;
	uint64_t key;
	const char *text;

	if (r->i == r->n)
		return 0;
	/* in sql_id order the texts, and their fingerprints' entries, are
	 * all over their maps: asked for ahead */
	if (r->i + ROWS_AHEAD < r->n) {
		hmap_prefetch(&r->w->fps, &r->byid[r->i + ROWS_AHEAD].key);
		__builtin_prefetch(r->byid[r->i + ROWS_AHEAD].v);
	}
	if (r->i + ROWS_AHEAD / 2 < r->n) {
		const struct sp_sql *ahead = r->byid[r->i + ROWS_AHEAD / 2].v;

		if (ahead->fp_id)
			hmap_prefetch(&r->w->fptext, &ahead->fp_id);
		if (ahead->text)
			__builtin_prefetch(ahead->text);
	}
	key = (uint64_t)r->byid[r->i].key;
	s = r->byid[r->i++].v;
	text = s->text ? s->text : "";
	fi = hmap_get(&r->w->fps, &key, 1, NULL);
	if (!fi || stmt_fpinfo(r->w, fi, s, text) < 0) {
		r->nomem = 1;
		return -1;
	}
	sp_rv_int(&src->v[0], (int64_t)key);
	sp_rv_int(&src->v[1], (int64_t)fi->fp_id);
	sp_rv_text(&src->v[2], text);
	sp_rv_int(&src->v[3], s->full_len);
	sp_rv_int(&src->v[4], s->truncated);
	return 1;
}

/* statements: one row per SQL text, with its fingerprint's id; fills
 * w->fps (sql_id -> fpinfo) and w->fptext (each fingerprint's text, made
 * once per id) for every step after. */
static int write_statements(struct pw *w)
{
	struct sp_coll *c = w->c;
	struct stmt_rows r = { .src = { .next = stmt_next, .ncol = 5 }, .w = w };
	struct skey *sk = NULL;
	size_t it, cap = 0, skcap = 0;
	const void *k;
	void *v;
	int rc;

	/* in sql_id order: each row goes at the end of the table's b-tree */
	if (SP_GROW(r.byid, cap, c->sqls.count + 1, 0) < 0 ||
	    SP_GROW(sk, skcap, c->sqls.count + 1, 0) < 0 ||
	    hmap_reserve(&w->fps, c->sqls.count) < 0) {
		free(r.byid);
		free(sk);
		return pw_nomem(w, NULL);
	}
	it = 0;
	while (r.n < c->sqls.count && (v = hmap_next(&c->sqls, &it, &k))) {
		r.byid[r.n] = (struct keyed){ *(const int64_t *)k, NULL, v };
		sk[r.n] = skey_of(*(const int64_t *)k, 0, r.n);
		r.n++;
	}
	rc = sort_rows(r.byid, r.n, sizeof(*r.byid), sk);
	free(sk);
	if (rc < 0) {
		free(r.byid);
		return pw_nomem(w, NULL);
	}
	rc = sp_rowsrc_insert(w->db, "statements", &r.src);
	free(r.byid);
	if (rc < 0)
		return r.nomem ? pw_nomem(w, NULL) : pw_sqlerr(w, NULL);
	return 0;
}

/* The look-ups of merge_queries ahead of its iterator over c->queries:
 * ahead[0] ROWS_AHEAD texts ahead, their texts' slots in w->fps asked
 * for; ahead[1] (with both) half as far, their fingerprints' slots in
 * w->fagg. */
static void fagg_lookahead(struct pw *w, size_t ahead[2], int both)
{
	const uint64_t *qk;

	if (hmap_next(&w->c->queries, &ahead[0], (const void **)&qk))
		hmap_prefetch(&w->fps, &qk[0]);
	if (both && hmap_next(&w->c->queries, &ahead[1], (const void **)&qk)) {
		const struct fpinfo *fi = hmap_get(&w->fps, &qk[0], 0, NULL);
		uint64_t fk[2] = { fi ? fi->fp_id : 0, qk[1] };

		hmap_prefetch(&w->fagg, fk);
	}
}

/* The collector's per-text aggregates merged per (fingerprint, kind) into
 * w->fagg, with the histograms it kept per fingerprint. Writes nothing. */
static int merge_queries(struct pw *w)
{
	struct sp_coll *c = w->c;
	size_t it, ahead[2] = { 0, 0 };
	const void *k;
	void *v;

	for (int i = 0; i < ROWS_AHEAD; i++)
		fagg_lookahead(w, ahead, i < ROWS_AHEAD / 2);
	it = 0;
	while ((v = hmap_next(&c->queries, &it, &k))) {
		const uint64_t *qk = k; /* sql_id, kind */

		fagg_lookahead(w, ahead, 1);
		struct sp_qagg *q = v;
		const struct fpinfo *fi = hmap_get(&w->fps, &qk[0], 0, NULL);
		static const struct fpinfo unknown = { 0, "<sql text lost>", "<sql text lost>" };
		uint64_t fk[2];
		struct fagg *a;

		if (!fi)
			fi = &unknown;
		if (q->count == 0 && q->prepares == 0)
			continue;
		fk[0] = fi->fp_id;
		fk[1] = qk[1];
		a = hmap_get(&w->fagg, fk, 1, NULL);
		if (!a)
			return pw_nomem(w, NULL);
		if (!a->fi)
			a->fi = fi;
		a->kind = qk[1];
		a->q.count += q->count;
		a->q.total_ns += q->total_ns;
		a->q.self_ns += q->self_ns;
		a->q.wall_ns += q->wall_ns;
		a->q.rows += q->rows;
		a->q.vm_steps += q->vm_steps;
		a->q.fullscan_steps += q->fullscan_steps;
		a->q.sorts += q->sorts;
		a->q.autoindex += q->autoindex;
		a->q.errors += q->errors;
		a->q.nested += q->nested;
		a->q.samples += q->samples;
		a->q.prepares += q->prepares;
		a->q.prepare_ns += q->prepare_ns;
		a->q.runs += q->runs;
		if (q->max_run > a->q.max_run)
			a->q.max_run = q->max_run;
		if ((q->loops_by_len && fagg_loops_add(a, q->loops_by_len, q->runs_nb) < 0) ||
		    (q->hist && fagg_hist_add(a, q->hist) < 0))
			return pw_nomem(w, NULL);
	}
	/* the histograms the collector kept per fingerprint */
	it = 0;
	while ((v = hmap_next(&c->fphists, &it, &k))) {
		struct sp_fphist *fh = v;
		struct fagg *a = hmap_get(&w->fagg, k, 0, NULL);

		if (!a || !fh->hist || !fh->count)
			continue;
		sp_hist_set_minmax_sum(fh->hist, fh->min_ns, fh->max_ns, fh->sum_ns);
		if (fagg_hist_add(a, fh->hist) < 0)
			return pw_nomem(w, NULL);
	}
	return 0;
}

/* A histogram's buckets (nb of them) in arrays (cap long), as
 * hist_collect fills them. */
struct buckets {
	uint64_t *lo, *cnt;
	uint32_t nb;
	size_t cap;
	int nomem;
};

/* The rows of queries, runs or histograms (table), one pass over the
 * fingerprints in (fp_id, kind) order (byid) for each. */
struct query_rows {
	struct sp_rowsrc src; /* first: the callback's argument */
	const struct keyed *byid;
	size_t i, n;
	int table;         /* 0 queries, 1 runs, 2 histograms */
	uint32_t b;        /* the current fingerprint's next bucket */
	struct buckets bk; /* histograms: its buckets */
	int nomem;
};

static int query_row(struct query_rows *r, const struct fagg *a)
{
	struct sp_rowval *v = r->src.v;
	const struct sp_qagg *q = &a->q;
	const uint64_t sums[] = { q->count,
				  q->total_ns,
				  q->self_ns,
				  q->wall_ns,
				  q->hist ? sp_hist_min(q->hist) : 0,
				  q->hist ? sp_hist_max(q->hist) : 0,
				  q->rows,
				  q->vm_steps,
				  q->fullscan_steps,
				  q->sorts,
				  q->autoindex,
				  q->errors,
				  q->nested,
				  q->samples,
				  q->prepares,
				  q->prepare_ns,
				  q->runs,
				  q->max_run };

	sp_rv_text(&v[2], a->fi->fingerprint);
	sp_rv_text(&v[3], a->fi->text);
	for (size_t j = 0; j < sizeof(sums) / sizeof(sums[0]); j++)
		sp_rv_int(&v[4 + j], (int64_t)sums[j]);
	return 1;
}

static int hist_collect(uint64_t lo, uint64_t count, void *arg)
{
	struct buckets *r = arg;

	if (r->nb == r->cap) {
		size_t nc = r->cap ? r->cap * 2 : 64;
		uint64_t *l = realloc(r->lo, nc * sizeof(*l)), *c;

		if (l)
			r->lo = l;
		c = l ? realloc(r->cnt, nc * sizeof(*c)) : NULL;
		if (!c) {
			r->nomem = 1;
			return 1;
		}
		r->cnt = c;
		r->cap = nc;
	}
	r->lo[r->nb] = lo;
	r->cnt[r->nb++] = count;
	return 0;
}

/* The current fingerprint's next run or histogram row: 1, or 0 when it
 * has no more. */
static int query_sub_row(struct query_rows *r, const struct fagg *a)
{
	struct sp_rowval *v = r->src.v;
	uint64_t lo, hi;

	if (r->table == 2) {
		if (r->b == 0 && a->q.hist) {
			r->bk.nb = 0;
			sp_hist_foreach(a->q.hist, hist_collect, &r->bk);
			r->nomem = r->bk.nomem;
		}
		if (r->b >= r->bk.nb)
			return 0;
		sp_rv_int(&v[2], (int64_t)r->bk.lo[r->b]);
		sp_rv_int(&v[3], (int64_t)r->bk.cnt[r->b++]);
		return 1;
	}
	while (r->b < SP_RUN_BUCKETS && (r->b >= a->q.runs_nb || !a->q.loops_by_len[r->b]))
		r->b++;
	if (r->b >= SP_RUN_BUCKETS)
		return 0;
	sp_loop_bucket_bounds((int)r->b, &lo, &hi);
	if (hi > (uint64_t)INT64_MAX)
		hi = (uint64_t)INT64_MAX;
	sp_rv_int(&v[2], (int64_t)lo);
	sp_rv_int(&v[3], (int64_t)hi);
	sp_rv_int(&v[4], (int64_t)a->q.loops_by_len[r->b++]);
	return 1;
}

/* Ask for the entries of the fingerprints ahead of byid[i] (n of them),
 * and for the histograms of those half as far (their entries in the cache
 * by then): see ROWS_AHEAD. */
static void fagg_prefetch(const struct keyed *byid, size_t i, size_t n)
{
	if (i + ROWS_AHEAD < n) {
		uintptr_t a = (uintptr_t)byid[i + ROWS_AHEAD].v, end = a + sizeof(struct fagg);

		for (a &= ~(uintptr_t)63; a < end; a += 64)
			__builtin_prefetch((const void *)a);
	}
	if (i + ROWS_AHEAD / 2 < n) {
		const struct fagg *a = byid[i + ROWS_AHEAD / 2].v;

		if (a->q.hist)
			__builtin_prefetch(a->q.hist);
	}
}

static int query_next(struct sp_rowsrc *src)
{
	struct query_rows *r = (struct query_rows *)src;

	for (; r->i < r->n; r->i++, r->b = 0, r->bk.nb = 0) {
		const struct fagg *a = r->byid[r->i].v;

		if (r->b == 0)
			fagg_prefetch(r->byid, r->i, r->n);

		sp_rv_int(&src->v[0], (int64_t)a->fi->fp_id);
		sp_rv_text(&src->v[1], kind_name(a->kind));
		if (r->table == 0) {
			r->i++;
			return query_row(r, a);
		}
		if (query_sub_row(r, a))
			return 1;
		if (r->nomem)
			return -1;
	}
	return 0;
}

/* queries, histograms and runs: one row (and its buckets) per w->fagg
 * entry; w->qbyid made for the steps after. */
static int write_queries(struct pw *w)
{
	static const char *const tables[] = { "queries", "runs", "histograms" };
	static const int ncols[] = { 22, 5, 4 };
	struct query_rows r = { .src = { .next = query_next } };
	struct keyed *byid = NULL;
	struct skey *sk = NULL;
	size_t it = 0, n = 0, cap = 0, skcap = 0;
	void *v;
	int rc = 0;

	if (SP_GROW(byid, cap, w->fagg.count + 1, 0) < 0 ||
	    SP_GROW(sk, skcap, w->fagg.count + 1, 0) < 0) {
		free(byid);
		return pw_nomem(w, NULL);
	}
	w->qbyid = byid;
	while (n < w->fagg.count && (v = hmap_next(&w->fagg, &it, NULL))) {
		struct fagg *a = v;

		byid[n] = (struct keyed){ (int64_t)a->fi->fp_id, kind_name(a->kind), a };
		sk[n] = skey_of(byid[n].key, kind_rank(byid[n].kind), n);
		n++;
	}
	rc = sort_rows(byid, n, sizeof(*byid), sk);
	free(sk);
	if (rc < 0)
		return pw_nomem(w, NULL);
	w->nq = n;
	r.byid = byid;
	r.n = n;
	for (int t = 0; t < 3 && rc == 0; t++) {
		r.table = t;
		r.src.ncol = ncols[t];
		r.i = 0;
		r.b = r.bk.nb = 0;
		rc = sp_rowsrc_insert(w->db, tables[t], &r.src);
	}
	free(r.bk.lo);
	free(r.bk.cnt);
	if (rc < 0)
		return r.nomem ? pw_nomem(w, NULL) : pw_sqlerr(w, NULL);
	return 0;
}

/* The first interval's queries (sp_series_first): w->qbyid's, in order. */
struct series_rows {
	const struct keyed *byid;
	size_t i, n;
	struct buckets bk;
};

static int series_next(struct sp_series_query *q, void *arg)
{
	struct series_rows *r = arg;
	const struct fagg *a;
	const struct sp_qagg *g;

	if (r->i == r->n)
		return 0;
	fagg_prefetch(r->byid, r->i, r->n);
	a = r->byid[r->i++].v;
	g = &a->q;
	{
		const uint64_t sums[SP_SERIES_NCOLS] = {
			g->count,    g->total_ns,       g->self_ns,  g->wall_ns,    g->rows,
			g->vm_steps, g->fullscan_steps, g->sorts,    g->autoindex,  g->errors,
			g->nested,   g->samples,        g->prepares, g->prepare_ns, g->runs,
		};

		for (int i = 0; i < SP_SERIES_NCOLS; i++)
			q->sums[i] = (int64_t)sums[i];
	}
	q->fp_id = a->fi->fp_id;
	q->kind = kind_name(a->kind);
	r->bk.nb = 0;
	if (g->hist)
		sp_hist_foreach(g->hist, hist_collect, &r->bk);
	if (r->bk.nomem)
		return -1;
	q->lo = r->bk.lo;
	q->cnt = r->bk.cnt;
	q->nb = r->bk.nb;
	return 1;
}

/* record's one interval (m->series), from the queries as written: the
 * rows series.c would make from the queries and histograms tables. */
static int write_series(struct pw *w)
{
	struct series_rows r = { .byid = w->qbyid, .n = w->nq };
	int rc;

	if (!w->m->series)
		return 0;
	rc = sp_series_first(w->db, w->m->series[0], w->m->series[1], series_next, &r, w->err,
			     w->errlen);
	free(r.bk.lo);
	free(r.bk.cnt);
	return rc;
}

/* The rows of a map of the collector's keyed by sql_id first (sites,
 * callers), through row(), in (fp_id, kind) order and the map's order
 * within: the rows go at the end of the table's index by query. */
struct map_ent {
	int64_t fp_id;
	const char *kind;
	const uint64_t *key;
	const void *val;
};

struct map_rows {
	struct sp_rowsrc src; /* first: the callback's argument */
	const struct map_ent *e;
	size_t i, n;
	void (*row)(struct sp_rowval *v, uint64_t fp_id, const uint64_t *key, const void *val);
};

static int map_next(struct sp_rowsrc *src)
{
	struct map_rows *r = (struct map_rows *)src;
	const struct map_ent *e;

	if (r->i == r->n)
		return 0;
	if (r->i + ROWS_AHEAD < r->n) {
		__builtin_prefetch(r->e[r->i + ROWS_AHEAD].key);
		__builtin_prefetch(r->e[r->i + ROWS_AHEAD].val);
	}
	e = &r->e[r->i++];
	r->row(src->v, (uint64_t)e->fp_id, e->key, e->val);
	return 1;
}

static int write_map(struct pw *w, const char *table, int ncol, const struct hmap *m,
		     void (*row)(struct sp_rowval *, uint64_t, const uint64_t *, const void *))
{
	struct map_rows r = { .src = { .next = map_next, .ncol = ncol }, .row = row };
	struct map_ent *e = NULL;
	struct skey *sk = NULL;
	size_t it = 0, i, cap = 0, skcap = 0;
	const void *k, *v;
	int rc;

	if (SP_GROW(e, cap, m->count + 1, 0) < 0 || SP_GROW(sk, skcap, m->count + 1, 0) < 0) {
		free(e);
		return pw_nomem(w, NULL);
	}
	while (r.n < m->count && (v = hmap_next(m, &it, &k)))
		e[r.n++] = (struct map_ent){ .key = k, .val = v };
	/* each entry's fingerprint (the look-ups of those ahead started) */
	for (i = 0; i < r.n; i++) {
		const struct fpinfo *fi;

		if (i + ROWS_AHEAD < r.n)
			hmap_prefetch(&w->fps, &e[i + ROWS_AHEAD].key[0]);
		fi = hmap_get(&w->fps, &e[i].key[0], 0, NULL);
		e[i].fp_id = (int64_t)(fi ? fi->fp_id : 0);
		e[i].kind = kind_name(e[i].key[1]);
		sk[i] = skey_of(e[i].fp_id, kind_rank(e[i].kind), i);
	}
	rc = sort_rows(e, r.n, sizeof(*e), sk);
	free(sk);
	if (rc < 0) {
		free(e);
		return pw_nomem(w, NULL);
	}
	r.e = e;
	rc = sp_rowsrc_insert(w->db, table, &r.src);
	free(e);
	return rc < 0 ? pw_sqlerr(w, NULL) : 0;
}

static void site_row(struct sp_rowval *v, uint64_t fp_id, const uint64_t *sk, const void *val)
{
	const struct sp_sagg *s = val; /* sk: sql_id, kind, pid, stack_id */

	sp_rv_int(&v[0], (int64_t)fp_id);
	sp_rv_text(&v[1], kind_name(sk[1]));
	sp_rv_int(&v[2], (int64_t)sk[2]);
	sp_rv_int(&v[3], (int64_t)sk[3]);
	sp_rv_int(&v[4], (int64_t)s->samples);
	sp_rv_int(&v[5], (int64_t)s->total_ns);
	sp_rv_int(&v[6], (int64_t)s->rows);
	sp_rv_int(&v[7], (int64_t)s->vm_steps);
	sp_rv_int(&v[8], (int64_t)s->random_samples);
	sp_rv_int(&v[9], (int64_t)s->random_ns);
}

/* stack_samples: per (fingerprint, kind, process, stack). */
static int write_stack_samples(struct pw *w)
{
	return write_map(w, "stack_samples", 10, &w->c->sites, site_row);
}

static void caller_row(struct sp_rowval *v, uint64_t fp_id, const uint64_t *ck, const void *val)
{
	const struct sp_caller *cr = val; /* ck: sql_id, kind, pid, caller */

	sp_rv_int(&v[0], (int64_t)fp_id);
	sp_rv_text(&v[1], kind_name(ck[1]));
	sp_rv_int(&v[2], (int64_t)ck[2]);
	sp_rv_int(&v[3], (int64_t)ck[3]);
	sp_rv_int(&v[4], (int64_t)cr->count);
	sp_rv_int(&v[5], (int64_t)cr->total_ns);
}

/* callers: exact executions per (fingerprint, kind, process, calling pc). */
static int write_callers(struct pw *w)
{
	return write_map(w, "callers", 6, &w->c->callers, caller_row);
}

/* errors: per (fingerprint, code, process, stack, message, kind). */
static int write_errors(struct pw *w)
{
	sqlite3 *db = w->db;
	struct sp_coll *c = w->c;
	sqlite3_stmt *st = NULL;
	size_t it;
	const void *k;
	void *v;

	st = prep(db, "INSERT INTO errors VALUES(?,?,?,?,?,?,?)");
	if (!st)
		return pw_sqlerr(w, st);
	it = 0;
	while ((v = hmap_next(&c->errors, &it, &k))) {
		const uint64_t *ek = k; /* sql_id, rc, pid, stack_id, hash, kind */
		const struct sp_err *e = v;
		const struct fpinfo *fi = hmap_get(&w->fps, &ek[0], 0, NULL);

		sqlite3_bind_int64(st, 1, (sqlite3_int64)(fi ? fi->fp_id : 0));
		sqlite3_bind_text(st, 2, kind_name(ek[5]), -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 3, (sqlite3_int64)ek[1]);
		sqlite3_bind_text(st, 4, e->msg ? e->msg : "", -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 5, (sqlite3_int64)ek[2]);
		sqlite3_bind_int64(st, 6, (sqlite3_int64)ek[3]);
		sqlite3_bind_int64(st, 7, (sqlite3_int64)e->count);
		if (step_done(st) < 0)
			return pw_sqlerr(w, st);
	}
	sqlite3_finalize(st);
	return 0;
}

/* events: the sampled executions, those in memory then those in the
 * spill file (read back in blocks). */
/* One event's 16 values, from parameter base + 1 on. */
static void bind_event(sqlite3_stmt *st, int base, const struct sp_event *e, uint64_t fp_id)
{
	sqlite3_bind_int64(st, base + 1, e->pid);
	sqlite3_bind_int64(st, base + 2, e->tid);
	sqlite3_bind_int64(st, base + 3, (sqlite3_int64)e->seq);
	sqlite3_bind_int64(st, base + 4, (sqlite3_int64)e->parent_seq);
	sqlite3_bind_int64(st, base + 5, (sqlite3_int64)fp_id);
	sqlite3_bind_text(st, base + 6, kind_name(e->kind), -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, base + 7, (sqlite3_int64)e->sql_id);
	sqlite3_bind_int64(st, base + 8, (sqlite3_int64)e->stack_id);
	sqlite3_bind_int64(st, base + 9, (sqlite3_int64)e->start_ns);
	sqlite3_bind_int64(st, base + 10, (sqlite3_int64)e->wall_ns);
	sqlite3_bind_int64(st, base + 11, (sqlite3_int64)e->db_ns);
	sqlite3_bind_int64(st, base + 12, (sqlite3_int64)e->self_ns);
	sqlite3_bind_int64(st, base + 13, (sqlite3_int64)e->rows);
	sqlite3_bind_int64(st, base + 14, e->vm_steps);
	sqlite3_bind_int64(st, base + 15, e->rc);
	sqlite3_bind_int64(st, base + 16, e->flags);
}

int sp_evins_open(struct sp_evins *x, sqlite3 *db)
{
	char sql[64 + SP_EVINS_ROWS * 36], *p = sql;

	memset(x, 0, sizeof(*x));
	p += sprintf(p, "INSERT INTO events VALUES");
	for (int r = 0; r < SP_EVINS_ROWS; r++)
		p += sprintf(p, "%s(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", r ? "," : "");
	if (sqlite3_prepare_v2(db, sql, -1, &x->many, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(db, "INSERT INTO events VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", -1,
			       &x->one, NULL) != SQLITE_OK) {
		sp_evins_close(x);
		return -1;
	}
	return 0;
}

int sp_evins_add(struct sp_evins *x, const struct sp_event *e, uint64_t fp_id)
{
	x->ev[x->n] = *e;
	x->fp[x->n++] = fp_id;
	if (x->n < SP_EVINS_ROWS)
		return 0;
	for (int r = 0; r < SP_EVINS_ROWS; r++)
		bind_event(x->many, r * 16, &x->ev[r], x->fp[r]);
	x->n = 0;
	return step_done(x->many);
}

int sp_evins_flush(struct sp_evins *x)
{
	int n = x->n;

	x->n = 0;
	for (int r = 0; r < n; r++) {
		bind_event(x->one, 0, &x->ev[r], x->fp[r]);
		if (step_done(x->one) < 0)
			return -1;
	}
	return 0;
}

void sp_evins_close(struct sp_evins *x)
{
	sqlite3_finalize(x->many);
	sqlite3_finalize(x->one);
	x->many = x->one = NULL;
	x->n = 0;
}

int sp_profile_timeline_init(sqlite3 *db, char *err, size_t errlen)
{
	char sql[sizeof(events_table) + sizeof(events_indexes) + 64];

	snprintf(sql, sizeof(sql), "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; %s%s",
		 events_table, events_indexes);
	return exec_sql(db, sql, err, errlen);
}

static int write_events(struct pw *w)
{
	sqlite3 *db = w->db;
	struct sp_coll *c = w->c;
	char *err = w->err;
	size_t errlen = w->errlen;
	struct sp_event spilled[256];
	struct sp_evins x;

	if (sp_evins_open(&x, db) < 0)
		return pw_sqlerr(w, NULL);
	/* the spill file holds exactly nspilled events (flushed above); the
	 * first pre_events of them are in the file already (a timeline: then
	 * no event is in memory) */
	for (size_t i = w->pre_events, nin = 0, at = 0; i < c->nevents + c->nspilled; i++) {
		const struct sp_event *e;
		const struct fpinfo *fi;

		if (i < c->nevents) {
			e = &c->events[i];
		} else {
			if (at == nin) {
				ssize_t r =
					sp_coll_spill_read(c, i - c->nevents, spilled,
							   sizeof(spilled) / sizeof(spilled[0]));

				if (r < 0) {
					snprintf(err, errlen,
						 "profile: reading back sampled executions: %s",
						 strerror(errno));
					return -1;
				}
				if (r == 0)
					break;
				nin = (size_t)r;
				at = 0;
			}
			sp_coll_event_pending(c, &spilled[at]); /* folds since */
			e = &spilled[at++];
		}
		fi = hmap_get(&w->fps, &e->sql_id, 0, NULL);
		if (sp_evins_add(&x, e, fi ? fi->fp_id : 0) < 0)
			goto fail;
	}
	if (sp_evins_flush(&x) < 0)
		goto fail;
	sp_evins_close(&x);
	return 0;
fail:
	pw_sqlerr(w, NULL);
	sp_evins_close(&x);
	return -1;
}

struct rt_rows {
	struct sp_rowsrc src; /* first: the callback's argument */
	const struct hmap *m;
	size_t it;
};

static int rt_next(struct sp_rowsrc *src)
{
	struct rt_rows *r = (struct rt_rows *)src;
	const void *k;
	const uint64_t *sum = hmap_next(r->m, &r->it, &k), *rk = k;

	if (!sum)
		return 0;
	sp_rv_int(&src->v[0], (int64_t)rk[0]);
	sp_rv_int(&src->v[1], (int64_t)rk[1]);
	sp_rv_text(&src->v[2], kind_name(rk[2] ? SP_KIND_EXEC : SP_KIND_STMT));
	sp_rv_int(&src->v[3], (int64_t)sum[0]);
	sp_rv_int(&src->v[4], (int64_t)sum[1]);
	return 1;
}

/* run_totals: what each run of --repeat added, per (run, fingerprint, kind). */
static int write_repeat_totals(struct pw *w)
{
	const struct sp_meta *m = w->m;
	struct rt_rows r = { .src = { .next = rt_next, .ncol = 5 } };
	struct hmap rt;
	int rc;

	/* per-run totals, merged per fingerprint in memory first: one row per
	 * (run, fp_id, kind). (An INSERT ... WHERE NOT EXISTS and an UPDATE
	 * per SQL text scanned the table each: 20,000 fingerprints of 2 texts
	 * took 39 s.) */
	hmap_init(&rt, 3 * sizeof(uint64_t), 2 * sizeof(uint64_t));
	for (size_t i = 0; i < m->nruns; i++) {
		const struct sp_repeat_total *t = &m->runs[i];
		const struct fpinfo *fi;

		if (i + ROWS_AHEAD < m->nruns)
			hmap_prefetch(&w->fps, &m->runs[i + ROWS_AHEAD].sql_id);
		fi = hmap_get(&w->fps, &t->sql_id, 0, NULL);
		uint64_t rk[3] = { t->run, fi ? fi->fp_id : 0, t->kind == SP_KIND_EXEC };
		uint64_t *sum = hmap_get(&rt, rk, 1, NULL);

		if (!sum) {
			hmap_free(&rt);
			return pw_nomem(w, NULL);
		}
		sum[0] += t->count;
		sum[1] += t->total_ns;
	}
	r.m = &rt;
	rc = sp_rowsrc_insert(w->db, "run_totals", &r.src);
	hmap_free(&rt);
	return rc < 0 ? pw_sqlerr(w, NULL) : 0;
}

static int plans_after_run(struct pw *w);
static int plans_lost(struct pw *w);

/* plans: per (SQL text, plan), with the schema it was planned against;
 * the preload plans the first text of each fingerprint on a connection,
 * and readers look plans up by fingerprint. plan_gaps: per (SQL text,
 * reason), why no plan could be taken on some connection. */
struct plan_rows {
	struct sp_rowsrc src; /* first: the callback's argument */
	struct pw *w;
	size_t it;
	size_t ahead, nahead; /* an iterator nahead plans ahead of it */
	int gaps;             /* 0: the plans, 1: the gaps */
};

/* The next plan of c->plans from *it (gaps: of those without one), NULL
 * at the end; *k its key. */
static const struct sp_plan *plan_iter(const struct sp_coll *c, size_t *it, int gaps,
				       const void **k)
{
	const struct sp_plan *pl;

	while ((pl = hmap_next(&c->plans, it, k)) && !pl->none != !gaps)
		;
	return pl;
}

static int plan_next(struct sp_rowsrc *src)
{
	struct plan_rows *r = (struct plan_rows *)src;
	struct sp_coll *c = r->w->c;
	struct sp_rowval *v = src->v;
	const void *k;
	const struct sp_plan *pl;

	/* the plans' texts and their texts' fingerprints are all over
	 * memory: asked for ROWS_AHEAD plans ahead */
	while (r->nahead < ROWS_AHEAD) {
		const struct sp_plan *a = plan_iter(c, &r->ahead, r->gaps, &k);

		if (!a)
			break;
		hmap_prefetch(&r->w->fps, k);
		__builtin_prefetch(a->text);
		r->nahead++;
	}
	pl = plan_iter(c, &r->it, r->gaps, &k);
	if (r->nahead)
		r->nahead--;
	if (!pl)
		return 0;
	const uint64_t *pk = k; /* sql_id, hash */
	const struct fpinfo *fi = hmap_get(&r->w->fps, &pk[0], 0, NULL);

	sp_rv_int(&v[0], (int64_t)(fi ? fi->fp_id : 0));
	sp_rv_int(&v[1], (int64_t)pk[0]);
	sp_rv_text(&v[2], pl->text ? pl->text : "");
	sp_rv_int(&v[3], (int64_t)pl->connections);
	if (r->gaps)
		return 1;
	if (pl->schema_id && hmap_get(&c->schemas, &pl->schema_id, 0, NULL))
		sp_rv_int(&v[4], (int64_t)pl->schema_id);
	else
		v[4].type = SP_RV_NULL;
	return 1;
}

/* plans: per (SQL text, plan), with the schema it was planned against;
 * the preload plans the first text of each fingerprint on a connection,
 * and readers look plans up by fingerprint. plan_gaps: per (SQL text,
 * reason), why no plan could be taken on some connection. */
static int write_plans(struct pw *w)
{
	struct plan_rows r = { .src = { .next = plan_next, .ncol = 5 }, .w = w };

	if (sp_rowsrc_insert(w->db, "plans", &r.src) < 0)
		return pw_sqlerr(w, NULL);
	r = (struct plan_rows){ .src = { .next = plan_next, .ncol = 4 }, .w = w, .gaps = 1 };
	if (sp_rowsrc_insert(w->db, "plan_gaps", &r.src) < 0)
		return pw_sqlerr(w, NULL);
	if (!w->m->live && plans_after_run(w) < 0)
		return -1;
	return plans_lost(w);
}

/* Queries left with neither a plan nor a reason while records were lost
 * (SELECTs: every one has a plan row; a CREATE or an INSERT ... VALUES has
 * none)
 * (the collector behind its rings): a plan that finds no room in the ring
 * waits in the preload's queue of 8 MB (preload/plan.c, PENDING_MAX), and
 * beyond that is not sent. Said as the bound that applied (meta
 * plans_bound, which the report prints with the count), unless a plan
 * table's bound is said already: 100,000 fingerprints on a loaded machine
 * left 1,491 queries without a plan and without a word. */
static int plans_lost(struct pw *w)
{
	sqlite3_stmt *st;
	sqlite3_int64 n = 0;
	uint64_t lost = sp_coll_lost(w->c);
	char why[400];

	if (w->c->plans_bound || !lost || !w->c->plans.count)
		return 0;
	st = prep(w->db, "SELECT COUNT(*) FROM (SELECT fp_id FROM queries"
			 " WHERE count > 0 AND kind <> 'exec'"
			 " AND (fingerprint LIKE 'SELECT%' OR fingerprint LIKE 'WITH%')"
			 " EXCEPT SELECT fp_id FROM plans"
			 " EXCEPT SELECT fp_id FROM plan_gaps)");
	if (!st || sqlite3_step(st) != SQLITE_ROW)
		return pw_sqlerr(w, st);
	n = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	if (!n)
		return 0;
	snprintf(why, sizeof(why),
		 "this recording: the collector fell behind (%llu records lost), and a plan"
		 " with no room in the ring nor in the preload's 8 MB queue is not sent",
		 (unsigned long long)lost);
	st = prep(w->db, "INSERT OR REPLACE INTO meta VALUES('plans_bound', ?)");
	if (!st)
		return pw_sqlerr(w, st);
	sqlite3_bind_text(st, 1, why, -1, SQLITE_STATIC);
	if (step_done(st) < 0)
		return pw_sqlerr(w, st);
	sqlite3_finalize(st);
	return 0;
}

/*
 * Plans taken after the run: a fingerprint the preload could not plan in
 * the program (its callbacks, modules, extensions or allocator on the
 * connection: plan_gaps) on a database file is planned here, on the file
 * opened as file_schema does (read-only, immutable, defensive: none of the
 * program's code exists here to run, and the program is not held up).
 * The plan is that of the file as it is now; one of a query on a virtual
 * table of the program's modules, or on what the file no longer has,
 * fails and stays a gap. Rows get connections 0: taken after the run.
 * At most AFTER_MAX plans and AFTER_FILES files.
 */
#define AFTER_MAX 100000
#define AFTER_FILES 16
static int plans_after_run(struct pw *w)
{
	struct sp_coll *c = w->c;
	struct {
		uint64_t id;
		sqlite3 *db;
	} files[AFTER_FILES];
	size_t nfiles = 0, done = 0, it = 0, f;
	sqlite3_stmt *has = prep(w->db, "SELECT 1 FROM plans WHERE fp_id = ?"), *ins = NULL;
	const void *k;
	void *v;
	int rc = 0;

	if (!has)
		return pw_sqlerr(w, has);
	ins = prep(w->db, "INSERT INTO plans VALUES(?,?,?,0,?)");
	if (!ins)
		return pw_sqlerr(w, ins);
	while ((v = hmap_next(&c->plans, &it, &k)) && done < AFTER_MAX) {
		const uint64_t *pk = k;
		const struct sp_plan *pl = v;
		const struct fpinfo *fi;
		const struct sp_sql *sq;
		const struct sp_schema *sc;
		sqlite3 *db = NULL;
		sqlite3_stmt *ex = NULL;
		char *q, *text = NULL;
		size_t n = 0, cap = 0;
		int found;

		/* planned in the program: not looked up (two cache misses a
		 * plan, 200,000 of them at as many fingerprints) */
		if (!pl->none || !pl->schema_id)
			continue;
		fi = hmap_get(&w->fps, &pk[0], 0, NULL);
		sq = hmap_get(&c->sqls, &pk[0], 0, NULL);
		if (!fi || !sq || !sq->text || sq->truncated ||
		    !(sc = hmap_get(&c->schemas, &pl->schema_id, 0, NULL)) || !sc->file)
			continue;
		sqlite3_bind_int64(has, 1, (sqlite3_int64)fi->fp_id);
		found = sqlite3_step(has) == SQLITE_ROW;
		sqlite3_reset(has);
		if (found)
			continue;
		for (f = 0; f < nfiles; f++)
			if (files[f].id == pl->schema_id)
				db = files[f].db;
		if (f == nfiles) {
			if (nfiles == AFTER_FILES)
				continue;
			files[nfiles].id = pl->schema_id;
			db = files[nfiles++].db = open_program_file(sc->text);
		}
		if (!db || !(q = malloc(strlen(sq->text) + 20)))
			continue;
		memcpy(q, "EXPLAIN QUERY PLAN ", 19);
		strcpy(q + 19, sq->text);
		if (sqlite3_prepare_v2(db, q, -1, &ex, NULL) == SQLITE_OK && ex) {
			while (sqlite3_step(ex) == SQLITE_ROW) {
				const char *d = (const char *)sqlite3_column_text(ex, 3);
				size_t need = n + (d ? strlen(d) : 0) + 32;

				if (need > cap) {
					char *x = need < 8192 ? realloc(text, need * 2) : NULL;

					if (!x)
						break;
					text = x;
					cap = need * 2;
				}
				n += (size_t)snprintf(text + n, cap - n, "%d|%d|%s\n",
						      sqlite3_column_int(ex, 0),
						      sqlite3_column_int(ex, 1), d ? d : "");
			}
		}
		sqlite3_finalize(ex);
		free(q);
		if (n) {
			sqlite3_bind_int64(ins, 1, (sqlite3_int64)fi->fp_id);
			sqlite3_bind_int64(ins, 2, (sqlite3_int64)pk[0]);
			sqlite3_bind_text(ins, 3, text, (int)n, SQLITE_TRANSIENT);
			sqlite3_bind_int64(ins, 4, (sqlite3_int64)pl->schema_id);
			if (step_done(ins) < 0) {
				free(text);
				rc = -1;
				break;
			}
			done++;
		}
		free(text);
	}
	for (f = 0; f < nfiles; f++)
		sqlite3_close(files[f].db);
	sqlite3_finalize(has);
	if (rc < 0)
		return pw_sqlerr(w, ins);
	sqlite3_finalize(ins);
	return 0;
}

/* duplicates: the bound-value repeats, summed per fingerprint. */
static int write_duplicates(struct pw *w)
{
	sqlite3 *db = w->db;
	struct sp_coll *c = w->c;
	sqlite3_stmt *st = NULL;
	size_t it;
	const void *k;

	{
		struct hmap per_fp;
		struct sp_dup *d, *f;

		hmap_init(&per_fp, sizeof(uint64_t), sizeof(struct sp_dup));
		it = 0;
		while ((d = hmap_next(&c->dups, &it, &k))) {
			const struct fpinfo *fi = hmap_get(&w->fps, k, 0, NULL);

			if (!fi || !(f = hmap_get(&per_fp, &fi->fp_id, 1, NULL)))
				continue;
			f->samples += d->samples;
			f->repeats += d->repeats;
			if (d->top > f->top)
				f->top = d->top;
		}
		st = prep(db, "INSERT INTO duplicates VALUES(?, 'stmt', ?, ?, ?)");
		if (!st) {
			hmap_free(&per_fp);
			return pw_sqlerr(w, st);
		}
		it = 0;
		while ((f = hmap_next(&per_fp, &it, &k))) {
			sqlite3_bind_int64(st, 1, (sqlite3_int64) * (const uint64_t *)k);
			sqlite3_bind_int64(st, 2, (sqlite3_int64)f->samples);
			sqlite3_bind_int64(st, 3, (sqlite3_int64)f->repeats);
			sqlite3_bind_int64(st, 4, (sqlite3_int64)f->top);
			if (step_done(st) < 0) {
				hmap_free(&per_fp);
				return pw_sqlerr(w, st);
			}
		}
		sqlite3_finalize(st);
		hmap_free(&per_fp);
	}
	return 0;
}

/* schemas: as sent, or read from the file now (a file schema). */
static int write_schemas(struct pw *w)
{
	sqlite3 *db = w->db;
	struct sp_coll *c = w->c;
	sqlite3_stmt *st = NULL;
	size_t it;
	const void *k;
	void *v;

	st = prep(db, "INSERT INTO schemas VALUES(?,?)");
	if (!st)
		return pw_sqlerr(w, st);
	it = 0;
	while ((v = hmap_next(&c->schemas, &it, &k))) {
		const struct sp_schema *sc = v;
		char *text = sc->file ? file_schema(sc->text) : NULL;

		if (sc->file && !text)
			continue;
		sqlite3_bind_int64(st, 1, (sqlite3_int64) * (const uint64_t *)k);
		sqlite3_bind_text(st, 2,
				  text       ? text
				  : sc->text ? sc->text
					     : "",
				  -1, SQLITE_TRANSIENT);
		free(text);
		if (step_done(st) < 0)
			return pw_sqlerr(w, st);
	}
	sqlite3_finalize(st);
	return 0;
}

/* modules: every mapped file of every process, with its build-id. */
static int write_modules(struct pw *w)
{
	sqlite3 *db = w->db;
	struct sp_coll *c = w->c;
	sqlite3_stmt *st = NULL;
	size_t it;
	void *v;

	st = prep(db, "INSERT INTO modules VALUES(?,?,?,?,?,?,?,?)");
	if (!st)
		return pw_sqlerr(w, st);
	it = 0;
	while ((v = hmap_next(&c->modules, &it, NULL))) {
		const struct sp_module *md = v;
		char bid[129];

		hex(bid, md->build_id, md->build_id_len);
		sqlite3_bind_int64(st, 1, md->pid);
		sqlite3_bind_int64(st, 2, md->generation);
		sqlite3_bind_text(st, 3, md->path ? md->path : "", -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 4, bid, -1, SQLITE_TRANSIENT);
		sqlite3_bind_int64(st, 5, (sqlite3_int64)md->bias);
		sqlite3_bind_int64(st, 6, (sqlite3_int64)md->lo);
		sqlite3_bind_int64(st, 7, (sqlite3_int64)md->hi);
		sqlite3_bind_int(st, 8, md->sqlite);
		if (step_done(st) < 0)
			return pw_sqlerr(w, st);
	}
	sqlite3_finalize(st);
	return 0;
}

/* frames and symbols (write_frames: every stack symbolized), then the
 * symbolizer's notes. */
static int write_symbols(struct pw *w)
{
	sqlite3 *db = w->db;
	struct sp_coll *c = w->c;
	const struct sp_meta *m = w->m;
	sqlite3_stmt *st = NULL;

	if (write_frames(db, c, m) < 0)
		return pw_sqlerr(w, NULL);
	if (c->sym_notes) {
		st = prep(db, "INSERT INTO meta VALUES('symbolizer_notes', ?)");
		if (!st)
			return pw_sqlerr(w, st);
		sqlite3_bind_text(st, 1, c->sym_notes, -1, SQLITE_STATIC);
		if (step_done(st) < 0)
			return pw_sqlerr(w, st);
		sqlite3_finalize(st);
	}
	return 0;
}

/*
 * Write the recording into db, whose schema is made here, in one
 * transaction: each step below writes its tables (and may build maps for
 * the steps after it, in w), then the indexes, the writer's own tables
 * (m->extra), the events' indexes, COMMIT. Returns 0, or -1 with a one-line reason in err (the
 * transaction is then left open: the caller discards the file).
 */
static int write_all(sqlite3 *db, struct sp_coll *c, const struct sp_meta *m, uint64_t pre_events,
		     int adopted, char *err, size_t errlen)
{
	static int (*const steps[])(struct pw *) = {
		write_meta,    write_processes,     write_statements, merge_queries,
		write_queries, write_stack_samples, write_callers,    write_errors,
		write_events,  write_repeat_totals, write_plans,      write_duplicates,
		write_schemas, write_modules,       write_symbols,
	};
	struct pw w = {
		.db = db, .c = c, .m = m, .err = err, .errlen = errlen, .pre_events = pre_events
	};
	size_t it, i;
	void *v;
	int rc = -1;

	/* Events that do not fit in the spill file (a full $TMPDIR) are
	 * dropped here and counted with the others, before meta has them. */
	(void)sp_coll_spill_flush(c);
	hmap_init(&w.fps, sizeof(uint64_t), sizeof(struct fpinfo));
	hmap_init(&w.fptext, sizeof(uint64_t), sizeof(char *));
	hmap_init(&w.fagg, 2 * sizeof(uint64_t), sizeof(struct fagg));

	if (sp_rowsrc_register(db) != SQLITE_OK) {
		pw_sqlerr(&w, NULL);
		goto out;
	}
	if (exec_sql(db, schema, err, errlen) < 0 || exec_sql(db, indexes_first, err, errlen) < 0 ||
	    (!adopted && exec_sql(db, events_table, err, errlen) < 0) ||
	    exec_sql(db, "BEGIN", err, errlen) < 0)
		goto out;
	for (i = 0; i < sizeof(steps) / sizeof(steps[0]); i++)
		if (steps[i](&w) < 0)
			goto out;
	/* the indexes before the writer's own tables: the first interval
	 * reads each query's histogram through histograms_query (series.c) */
	if (exec_sql(db, indexes, err, errlen) < 0 || write_series(&w) < 0)
		goto out;
	if (m->extra && m->extra(db, m->extra_arg) < 0) {
		pw_sqlerr(&w, NULL);
		goto out;
	}
	if ((!adopted && exec_sql(db, events_indexes, err, errlen) < 0) ||
	    exec_sql(db, "COMMIT", err, errlen) < 0)
		goto out;
	rc = 0;
out:
	it = 0;
	while ((v = hmap_next(&w.fptext, &it, NULL)))
		free(*(char **)v);
	hmap_free(&w.fptext);
	it = 0;
	while ((v = hmap_next(&w.fagg, &it, NULL))) {
		struct fagg *a = v;

		if (a->hist_own)
			sp_hist_free(a->q.hist);
		if (a->runs_own)
			free(a->q.loops_by_len);
	}
	hmap_free(&w.fps);
	hmap_free(&w.fagg);
	free(w.qbyid);
	return rc;
}

/*
 * Make tmp (just created, empty, open as fd) the timeline's file: renamed
 * over it, or copied into fd when the timeline is on another file system.
 * Used once: a second attempt (save_elsewhere) writes every event itself.
 * Returns 1 when tmp holds the timeline's events table, 0 when tmp is to
 * be written from scratch (it is empty again then).
 */
static int timeline_adopt(struct sp_timeline *tl, const struct sp_coll *c, const char *tmp, int fd)
{
	char buf[65536];
	ssize_t n;
	int in, ok = 1;

	struct stat made;

	if (tl->used || !tl->events || c->nevents || tl->events > c->nspilled)
		return 0;
	tl->used = 1;
	/* renamed, the file keeps the owner and mode tmp was created with
	 * (a setgid directory's group, say), not the private directory's */
	if (fstat(fd, &made) == 0 && rename(tl->path, tmp) == 0) {
		(void)!chown(tmp, (uid_t)-1, made.st_gid);
		(void)!chmod(tmp, made.st_mode & 07777);
		return 1;
	}
	if (errno != EXDEV || (in = open(tl->path, O_RDONLY | O_CLOEXEC)) < 0)
		return 0;
	while (ok && (n = read(in, buf, sizeof(buf))) != 0) {
		ok = n > 0 && write(fd, buf, (size_t)n) == n;
		if (n < 0 && errno == EINTR)
			ok = 1;
	}
	close(in);
	if (!ok)
		(void)!ftruncate(fd, 0); /* failing, the open below fails */
	return ok;
}

int sp_profile_write(const char *path, struct sp_coll *c, const struct sp_meta *m, char *err,
		     size_t errlen)
{
	char *tmp = NULL;
	sqlite3 *db = NULL;
	int fd, rc = -1, adopted = 0;

	if (asprintf(&tmp, "%s.tmp.%d", path, (int)getpid()) < 0) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	/* Created 0600 before SQLite opens it: profiles hold SQL text. */
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		snprintf(err, errlen, "cannot create %s: %s", tmp, strerror(errno));
		goto out;
	}
	if (m->timeline)
		adopted = timeline_adopt(m->timeline, c, tmp, fd);
	close(fd);
	if (sqlite3_open_v2(tmp, &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
		snprintf(err, errlen, "cannot open %s: %s", tmp,
			 db ? sqlite3_errmsg(db) : "no memory");
		goto out;
	}
	if (write_all(db, c, m, adopted ? m->timeline->events : 0, adopted, err, errlen) < 0)
		goto out;
	if (sqlite3_close(db) != SQLITE_OK) {
		snprintf(err, errlen, "closing %s: %s", tmp, sqlite3_errmsg(db));
		goto out;
	}
	db = NULL;
	if (rename(tmp, path) < 0) {
		snprintf(err, errlen, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
		goto out;
	}
	rc = 0;
out:
	if (db)
		sqlite3_close(db);
	if (rc < 0)
		unlink(tmp);
	free(tmp);
	return rc;
}

sqlite3 *sp_profile_open(const char *path, char *err, size_t errlen)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *st = NULL;
	struct stat sb;
	char e[256];
	int fmt = -1;

	if (stat(path, &sb) < 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return NULL;
	}
	if (!S_ISREG(sb.st_mode)) {
		snprintf(err, errlen, "%s: not a regular file", path);
		return NULL;
	}
	/* untrusted input: read-only, no views or triggers, bounded work */
	db = sp_untrusted_open(path, 0, sb.st_size, sp_profile_tables, e, sizeof(e));
	if (!db) {
		snprintf(err, errlen, "%s: %s", path, e);
		return NULL;
	}
	if (sqlite3_prepare_v2(db, "SELECT value FROM meta WHERE key='format'", -1, &st, NULL) !=
	    SQLITE_OK)
		goto bad;
	if (sqlite3_step(st) == SQLITE_ROW)
		fmt = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	if (fmt < SP_PROFILE_FORMAT_MIN || fmt > SP_PROFILE_FORMAT) {
		snprintf(err, errlen, "%s: unsupported profile format %d (this sqlprof reads %d)",
			 path, fmt, SP_PROFILE_FORMAT);
		sqlite3_close(db);
		return NULL;
	}
	/* A page cache of up to 8 MB (SQLite's default 2 MB): the readers
	 * go through the tables by their fingerprint indexes, whose pages
	 * were read again and again (pread). It was 64 MB while the plans
	 * were sorted by SQLite (its sorts went to temporary files); they are
	 * sorted in C now, and at 8 MB the outputs are the same with report's
	 * peak at 200,000 fingerprints 285 -> 226 MB and its system time
	 * 0.8 -> 0.5 s. Pages are taken as read: a small profile stays
	 * small. */
	sqlite3_exec(db, "PRAGMA cache_size=-8192", NULL, NULL, NULL);
	return db;
bad:
	snprintf(err, errlen, "%s: not a sqlprof profile (%s)", path,
		 db ? sqlite3_errmsg(db) : "out of memory");
	sqlite3_close(db);
	return NULL;
}
