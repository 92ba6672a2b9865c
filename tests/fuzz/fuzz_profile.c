/* SPDX-License-Identifier: MIT */
/*
 * fuzz_profile.c - libFuzzer target for everything that reads a profile:
 * sp_profile_open, the loaders (sp_qset_load, sp_attrib_load and
 * sp_attrib_estimate, sp_qset_sort) and the report and export commands on
 * top of them (cmd_report, cmd_export), which must treat a profile as
 * untrusted input: a one-line error, never a crash.
 *
 * The low two bits of an input's first byte pick how the rest is used:
 *  - 0: raw bytes of a profile file (mostly exercises SQLite's own
 *    checks and sp_profile_open's format check);
 *  - 1 to 3: rows for a well-formed profile. Starting from an empty profile
 *    written by sp_profile_write (the real schema and meta rows), the
 *    bytes are decoded as a list of operations: a table (byte % number of
 *    tables, in name order; 0xff: drop that table instead), then one typed
 *    value per column (type byte % 6: NULL, 1-byte int, 8-byte int,
 *    double, text or blob with a length byte), inserted with INSERT OR
 *    REPLACE. This reaches the loaders' handling of hostile values (NULL
 *    texts, negative or huge numbers, dangling ids) far more often than
 *    mutating file bytes does.
 * Its other six bits pick what reads it: below SEL_LOADERS, the loaders on
 * the database handle (rows go into one shared connection inside a
 * savepoint that is rolled back, so most inputs cost no schema parse);
 * above, one of the report or export commands on the file, with its output
 * thrown away (stdout goes to /dev/null).
 *
 * Seeds: tests/fuzz/corpus/profile/, made from real recordings by
 * tests/fuzz/make_corpus.py.
 */
#include <fcntl.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attrib.h"
#include "cmds.h"
#include "collect.h"
#include "profile-write.h"
#include "query.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_TABLES 32
#define MAX_COLS 32

static char path[256];
static unsigned char *tmpl;
static sqlite3_int64 tmpl_len;
static char tables[MAX_TABLES][64];
static int ncols[MAX_TABLES], ntables;
static sqlite3 *shared;                        /* the template, for inputs read by the loaders */
static sqlite3_stmt *shared_cache[MAX_TABLES]; /* its INSERT statements */
/* Selector values (first byte >> 2, 0..63) below this go to the loaders,
 * the rest to the report/export commands (which open the file again). */
#define SEL_LOADERS 48

struct in {
	const uint8_t *p;
	size_t n;
};

static sqlite3 *fresh_db(struct in *in);

static void die(const char *what)
{
	fprintf(stderr, "fuzz_profile: %s\n", what);
	abort();
}

static void cleanup(void)
{
	unlink(path);
}

/* An empty profile from the real writer, kept in memory with small pages. */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct sp_coll c;
	struct sp_meta m = { .command = "fuzz", .rate = 0.01 };
	char err[512], tpath[300];
	const char *dir = getenv("TMPDIR");
	sqlite3 *db;
	sqlite3_stmt *st;
	int fd;

	(void)argc;
	(void)argv;
	if (access("/dev/shm", W_OK) == 0)
		dir = "/dev/shm";
	snprintf(path, sizeof(path), "%s/fuzz_profile.%d.db", dir ? dir : "/tmp", (int)getpid());
	snprintf(tpath, sizeof(tpath), "%s.tmpl", path);
	unlink(tpath);
	sp_coll_init(&c);
	if (sp_profile_write(tpath, &c, &m, err, sizeof(err)) < 0)
		die(err);
	sp_coll_free(&c);
	if (sqlite3_open(tpath, &db) != SQLITE_OK ||
	    sqlite3_exec(db, "PRAGMA page_size=512; VACUUM;", NULL, NULL, NULL) != SQLITE_OK)
		die("cannot shrink the template");
	if (sqlite3_prepare_v2(db,
			       "SELECT name FROM sqlite_master WHERE type='table' ORDER BY name",
			       -1, &st, NULL) != SQLITE_OK)
		die("sqlite_master");
	while (sqlite3_step(st) == SQLITE_ROW && ntables < MAX_TABLES)
		snprintf(tables[ntables++], sizeof(tables[0]), "%s", sqlite3_column_text(st, 0));
	sqlite3_finalize(st);
	for (int t = 0; t < ntables; t++) {
		char q[128];

		snprintf(q, sizeof(q), "SELECT count(*) FROM pragma_table_info('%s')", tables[t]);
		if (sqlite3_prepare_v2(db, q, -1, &st, NULL) != SQLITE_OK ||
		    sqlite3_step(st) != SQLITE_ROW)
			die("table_info");
		ncols[t] = sqlite3_column_int(st, 0);
		if (ncols[t] > MAX_COLS)
			ncols[t] = MAX_COLS;
		sqlite3_finalize(st);
	}
	tmpl = sqlite3_serialize(db, "main", &tmpl_len, 0);
	if (!tmpl)
		die("serialize");
	sqlite3_close(db);
	{
		struct in none = { NULL, 0 };

		shared = fresh_db(&none);
		if (!shared)
			die("cannot open the template");
	}
	unlink(tpath);
	/* Reports print; keep stdout quiet (stderr stays for the sanitizers). */
	fd = open("/dev/null", O_WRONLY);
	if (fd < 0 || dup2(fd, 1) < 0)
		die("/dev/null");
	close(fd);
	atexit(cleanup);
	return 0;
}

static int get(struct in *in, void *out, size_t len)
{
	if (in->n < len)
		return -1;
	memcpy(out, in->p, len);
	in->p += len;
	in->n -= len;
	return 0;
}

/* Decode operations (see the top of the file) into db. */
static void apply_rows(sqlite3 *db, struct in *in, sqlite3_stmt **cache)
{
	uint8_t b;

	while (get(in, &b, 1) == 0) {
		int t;
		char sql[512];
		size_t o;
		sqlite3_stmt *st;

		if (b == 0xff) {
			if (get(in, &b, 1) < 0)
				break;
			snprintf(sql, sizeof(sql), "DROP TABLE \"%s\"", tables[b % ntables]);
			sqlite3_exec(db, sql, NULL, NULL, NULL);
			continue;
		}
		t = b % ntables;
		st = cache[t];
		if (!st) {
			o = (size_t)snprintf(sql, sizeof(sql),
					     "INSERT OR REPLACE INTO \"%s\" VALUES(", tables[t]);
			for (int c = 0; c < ncols[t]; c++)
				o += (size_t)snprintf(sql + o, sizeof(sql) - o, "%s?",
						      c ? "," : "");
			snprintf(sql + o, sizeof(sql) - o, ")");
			if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
				continue; /* the table was dropped */
			cache[t] = st;
		}
		sqlite3_clear_bindings(st);
		for (int c = 0; c < ncols[t]; c++) {
			uint8_t ty, len;
			int8_t i8;
			int64_t i64;
			double d;
			char buf[256];

			if (get(in, &ty, 1) < 0)
				break;
			switch (ty % 6) {
			case 0: sqlite3_bind_null(st, c + 1); break;
			case 1:
				if (get(in, &i8, 1) == 0)
					sqlite3_bind_int64(st, c + 1, i8);
				break;
			case 2:
				if (get(in, &i64, 8) == 0)
					sqlite3_bind_int64(st, c + 1, i64);
				break;
			case 3:
				if (get(in, &d, 8) == 0)
					sqlite3_bind_double(st, c + 1, d);
				break;
			case 4:
			case 5:
				if (get(in, &len, 1) < 0)
					break;
				if (len > in->n)
					len = (uint8_t)in->n;
				get(in, buf, len);
				if (ty % 6 == 4)
					sqlite3_bind_text(st, c + 1, buf, len, SQLITE_TRANSIENT);
				else
					sqlite3_bind_blob(st, c + 1, buf, len, SQLITE_TRANSIENT);
				break;
			}
		}
		sqlite3_step(st);
		sqlite3_reset(st);
	}
}

static void cache_free(sqlite3_stmt **cache)
{
	for (int t = 0; t < MAX_TABLES; t++) {
		sqlite3_finalize(cache[t]);
		cache[t] = NULL;
	}
}

static void load_all(sqlite3 *db)
{
	static const char *const keys[] = { "total", "count", "mean", "p50",    "p95", "p99",
					    "max",   "rows",  "self", "errors", "vm" };
	static const char *const skip[] = { "*sqlite*", "main", NULL };
	struct sp_qset qs;
	struct sp_attrib at;
	char err[512];

	if (sp_qset_load(db, &qs, err, sizeof(err)) < 0)
		return;
	if (sp_attrib_load(db, skip, &at, err, sizeof(err)) == 0) {
		for (size_t i = 0; i < qs.n; i++)
			sp_attrib_estimate(&at, qs.rows[i].fp_id, qs.rows[i].kind == SP_QK_EXEC,
					   qs.rows[i].count, qs.rows[i].total_ns,
					   qs.rows[i].self_ns);
		for (size_t i = 0; i < at.nqs; i++)
			sp_attrib_stack(&at, at.qs[i].pid, at.qs[i].stack_id);
		sp_attrib_free(&at);
	}
	for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
		sp_qset_sort(&qs, keys[k]);
	sp_qset_free(&qs);
}

static int write_file(const void *p, size_t n)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ssize_t w = fd < 0 ? -1 : write(fd, p, n);

	if (fd >= 0)
		close(fd);
	return w == (ssize_t)n ? 0 : -1;
}

/* One report or export command on the file, picked by sel. */
static const char *const variants[][8] = {
	{ "report", NULL },
	{ "report", "--format", "json", NULL },
	{ "report", "--format", "csv", NULL },
	{ "report", "--by", "site", "--stacks", "--skip", "m*", NULL },
	{ "report", "--by", "function", "--format", "json", NULL },
	{ "report", "--by", "site", "--format", "csv", NULL },
	{ "report", "--plans", "-w", "0", "--sort", "p99", NULL },
	{ "report", "-w", "3", "--top", "2", "--sort", "mean", NULL },
	{ "export", "-f", "folded", NULL },
	{ "export", "-f", "svg", NULL },
	{ "export", "-f", "perfetto", NULL },
	{ "export", "-f", "chrome", NULL },
	{ "export", "-f", "speedscope", NULL },
	{ "export", "-f", "csv", NULL },
	{ "export", "-f", "html", NULL },
	{ "export", "-f", "folded", "--weight", "count", NULL },
};
#define N_VARIANTS (sizeof(variants) / sizeof(variants[0]))

static void run_command(unsigned sel)
{
	const char *const *v = variants[sel % N_VARIANTS];
	char *argv[10];
	int argc = 0;

	while (v[argc]) {
		argv[argc] = (char *)v[argc];
		argc++;
	}
	argv[argc++] = path;
	argv[argc] = NULL;
	if (!strcmp(argv[0], "report"))
		cmd_report(argc, argv);
	else
		cmd_export(argc, argv);
	fflush(stdout);
}

/* A fresh database from the template, with the rows of in applied. */
static sqlite3 *fresh_db(struct in *in)
{
	unsigned char *copy = sqlite3_malloc64((sqlite3_uint64)tmpl_len);
	sqlite3 *db = NULL;

	if (!copy)
		return NULL;
	memcpy(copy, tmpl, (size_t)tmpl_len);
	if (sqlite3_open(":memory:", &db) != SQLITE_OK ||
	    sqlite3_deserialize(db, "main", copy, tmpl_len, tmpl_len,
				SQLITE_DESERIALIZE_FREEONCLOSE | SQLITE_DESERIALIZE_RESIZEABLE) !=
		    SQLITE_OK) {
		sqlite3_close(db);
		return NULL;
	}
	{
		sqlite3_stmt *cache[MAX_TABLES] = { NULL };

		sqlite3_exec(db, "BEGIN", NULL, NULL, NULL);
		apply_rows(db, in, cache);
		cache_free(cache);
		sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
	}
	return db;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct in in = { data + 1, size ? size - 1 : 0 };
	unsigned sel;
	char err[512];
	sqlite3 *db;

	if (size < 1)
		return 0;
	sel = data[0] >> 2;
	if ((data[0] & 3) == 0) {
		/* raw file bytes */
		if (write_file(in.p, in.n) < 0)
			return 0;
		db = sp_profile_open(path, err, sizeof(err));
		if (!db)
			return 0; /* not a profile: every command stops there too */
		if (sel < SEL_LOADERS)
			load_all(db);
		sqlite3_close(db);
		if (sel >= SEL_LOADERS)
			run_command(sel - SEL_LOADERS);
		return 0;
	}
	if (sel < SEL_LOADERS) {
		/* rows, read by the loaders on the shared connection: applied in
		 * a savepoint and rolled back, so no schema is parsed again */
		sqlite3_exec(shared, "SAVEPOINT fz", NULL, NULL, NULL);
		apply_rows(shared, &in, shared_cache);
		load_all(shared);
		sqlite3_exec(shared, "ROLLBACK TO fz; RELEASE fz", NULL, NULL, NULL);
		return 0;
	}
	/* rows, written to a file and read by a command */
	db = fresh_db(&in);
	if (db) {
		sqlite3_int64 n;
		unsigned char *ser = sqlite3_serialize(db, "main", &n, 0);
		int ok = ser && write_file(ser, (size_t)n) == 0;

		sqlite3_free(ser);
		sqlite3_close(db);
		if (ok)
			run_command(sel - SEL_LOADERS);
	}
	return 0;
}
