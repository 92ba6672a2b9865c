/* SPDX-License-Identifier: MIT */
/*
 * proc-fold.c - the agent's processes budget (agent-state.h,
 * sp_agent_fold_procs): processes that are over folded into one row, pid
 * SP_AGENT_PID_OTHER, with their counts summed and their stacks kept.
 *
 * A stack is addresses in its own process's map, so a folded process's
 * stacks are translated into a map of the row's own. Each file they touch
 * (by path, build-id, the file's identity and the span and offset it was
 * mapped at) is placed once in it, at SYN_BASE and above, where no
 * user-space address is (not canonical on x86-64 or arm64), with the bias
 * that keeps every address's offset in its file: the profile's writer
 * symbolizes the row's stacks as any others. A Python, Ruby or PHP frame
 * names a code object by a number its process chose: the row's code
 * objects are numbered again, one number per distinct code object. So
 * the stacks of a thousand runs of one program are the stacks of one,
 * and a folded process's queries keep their callers, function and line.
 * What goes is what cannot be summed: bound values' hashes, and a
 * sampled execution's stack (its pid is a process the profile no longer
 * has).
 */
#include <stdlib.h>
#include <string.h>

#include "agent-state.h"

/* Where the row's own map starts, and the room left after each file. */
#define SYN_BASE (1ULL << 62)
#define SYN_GAP 0x10000ULL
/* A code object of a folded process that never arrived: its frames say "??". */
#define CODE_NONE 0x7fffffffu

/* Merge an entry of a folded process into the one it meets (same map). */
typedef void (*pfold_merge_fn)(void *dst, void *src);

static void pmerge_sagg(void *dv, void *sv)
{
	sp_sagg_add(dv, sv);
}

static void pmerge_caller(void *dv, void *sv)
{
	struct sp_caller *d = dv, *s = sv;

	d->count += s->count;
	d->total_ns += s->total_ns;
}

static void pmerge_err(void *dv, void *sv)
{
	((struct sp_err *)dv)->count += ((struct sp_err *)sv)->count;
	free(((struct sp_err *)sv)->msg);
}

static void pmerge_u64(void *dv, void *sv)
{
	*(uint64_t *)dv += *(uint64_t *)sv;
}

static void drop_stack(void *v)
{
	free(((struct sp_stack *)v)->pcs);
}

static void drop_module(void *v)
{
	free(((struct sp_module *)v)->path);
}

static void drop_pycode(void *v)
{
	struct sp_pycode *pc = v;

	free(pc->name);
	free(pc->qualname);
	free(pc->file);
	free(pc->table);
}

/* One fold's translation tables. */
struct pfold {
	struct sp_coll *c;
	const struct hmap *set; /* the folded pids (uint64_t) */
	struct sp_module *mods; /* their modules (copies: paths still c's) */
	size_t nmods;           /* sorted by pid */
	struct hmap files;      /* file identity hash -> the row's lo for it */
	struct hmap codes;      /* {pid, code} -> the row's code (uint64_t) */
	struct hmap code_ids;   /* code object content hash -> the row's code */
	struct hmap stack_ids;  /* {pid, stack_id} -> the row's stack_id */
	struct hmap pcs;        /* {pid, pc} -> the row's pc: callers' */
	uint64_t next_lo;       /* where the next file goes */
	uint32_t next_code;     /* the row's next code number */
};

static int cmp_mod(const void *pa, const void *pb)
{
	const struct sp_module *a = pa, *b = pb;

	return a->pid < b->pid ? -1 : a->pid > b->pid;
}

static uint64_t file_key(const struct sp_module *m)
{
	uint64_t h[9] = { m->path ? sp_hash_bytes(m->path, strlen(m->path)) : 0,
			  sp_hash_bytes(m->build_id, m->build_id_len < 64 ? m->build_id_len : 64),
			  m->dev,
			  m->ino,
			  m->size,
			  (uint64_t)m->mtime_ns,
			  m->lo - m->bias,
			  m->hi - m->lo,
			  (uint64_t)m->sqlite << 32 | m->embed };

	return sp_hash_bytes(h, sizeof(h));
}

static uint64_t code_key(const struct sp_pycode *py)
{
	uint64_t h[6] = { py->name ? sp_hash_bytes(py->name, strlen(py->name)) : 0,
			  py->qualname ? sp_hash_bytes(py->qualname, strlen(py->qualname)) : 1,
			  py->file ? sp_hash_bytes(py->file, strlen(py->file)) : 0,
			  py->table ? sp_hash_bytes(py->table, py->table_len) : 0,
			  (uint64_t)(uint32_t)py->firstlineno << 32 | py->table_len,
			  (uint64_t)py->major << 16 | (uint64_t)py->minor << 8 | py->cut };

	return sp_hash_bytes(h, sizeof(h));
}

/* The row's map as it is (an earlier fold's, or a restarted agent's):
 * its files and code objects, so that they are met again. */
static int pfold_init_row(struct pfold *f)
{
	const uint64_t *k;
	const struct sp_module *m;
	const struct sp_pycode *py;
	size_t it = 0;

	f->next_lo = SYN_BASE;
	while ((m = hmap_next(&f->c->modules, &it, (const void **)&k))) {
		uint64_t *lo;

		if (k[0] != SP_AGENT_PID_OTHER)
			continue;
		if (!(lo = hmap_get(&f->files, &(uint64_t){ file_key(m) }, 1, NULL)))
			return -1;
		*lo = m->lo;
		if (m->hi + SYN_GAP > f->next_lo)
			f->next_lo = (m->hi + SYN_GAP) & ~(SYN_GAP - 1);
	}
	f->next_code = 1;
	for (it = 0; (py = hmap_next(&f->c->pycodes, &it, (const void **)&k));) {
		uint64_t *id;

		if (k[0] != SP_AGENT_PID_OTHER)
			continue;
		if (!(id = hmap_get(&f->code_ids, &(uint64_t){ code_key(py) }, 1, NULL)))
			return -1;
		*id = k[1];
		if (k[1] >= f->next_code && k[1] < CODE_NONE)
			f->next_code = (uint32_t)k[1] + 1;
	}
	return 0;
}

/* The folded processes' modules, copied and sorted by pid. */
static int pfold_collect_mods(struct pfold *f)
{
	const uint64_t *k;
	const struct sp_module *m;
	size_t it = 0, cap = 0;

	while ((m = hmap_next(&f->c->modules, &it, (const void **)&k))) {
		if (!hmap_get((struct hmap *)f->set, &k[0], 0, NULL))
			continue;
		if (SP_GROW(f->mods, cap, f->nmods + 1, 64) < 0)
			return -1;
		f->mods[f->nmods++] = *m;
	}
	sp_qsort(f->mods, f->nmods, sizeof(*f->mods), cmp_mod);
	return 0;
}

/*
 * The module of pid holding pc in the map of image at generation (0: the
 * newest; image ~0: any image), as the profile's writer finds it.
 */
static const struct sp_module *pfold_module(const struct pfold *f, uint32_t pid, uint32_t image,
					    uint32_t generation, uint64_t pc)
{
	size_t lo = 0, hi = f->nmods;
	const struct sp_module *best = NULL;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (f->mods[mid].pid < pid)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (; lo < f->nmods && f->mods[lo].pid == pid; lo++) {
		const struct sp_module *m = &f->mods[lo];

		if ((image == ~0u || m->image == image) && pc >= m->lo && pc < m->hi &&
		    (!generation || m->generation <= generation) &&
		    (!best || m->generation > best->generation))
			best = m;
	}
	return best;
}

/* Where m's file is in the row's map (placed there now when it is not
 * yet): its lo; 0 when out of memory. */
static uint64_t pfold_place(struct pfold *f, const struct sp_module *m)
{
	uint64_t fk = file_key(m), *lo, span = m->hi - m->lo;
	struct mkey {
		uint64_t pid, image, generation, lo;
	} key;
	struct sp_module *nm;
	int created;

	if (!(lo = hmap_get(&f->files, &fk, 1, &created)))
		return 0;
	if (!created)
		return *lo;
	key = (struct mkey){ SP_AGENT_PID_OTHER, 0, 1, f->next_lo };
	if (!(nm = hmap_get(&f->c->modules, &key, 1, &created)) ||
	    (created && m->path && !(nm->path = strdup(m->path)))) {
		if (nm && created)
			hmap_del(&f->c->modules, &key, NULL);
		hmap_del(&f->files, &fk, NULL);
		return 0;
	}
	if (created) {
		char *path = nm->path;

		*nm = *m;
		nm->path = path;
		nm->pid = SP_AGENT_PID_OTHER;
		nm->image = 0;
		nm->generation = 1;
		nm->lo = f->next_lo;
		nm->hi = f->next_lo + span;
		nm->bias = nm->lo - (m->lo - m->bias);
	}
	*lo = f->next_lo;
	f->next_lo = (f->next_lo + span + 2 * SYN_GAP - 1) & ~(SYN_GAP - 1);
	return *lo;
}

/* A folded process's code object's number in the row (given it there
 * now when it is not yet); CODE_NONE: it never arrived, or no memory. */
static uint32_t pfold_code(struct pfold *f, uint64_t pid, uint32_t code)
{
	uint64_t k[2] = { pid, code }, ck, *memo, *id;
	const struct sp_pycode *py;
	struct sp_pycode *np;
	int created;

	if (!(memo = hmap_get(&f->codes, k, 1, &created)))
		return CODE_NONE;
	if (!created)
		return (uint32_t)*memo;
	*memo = CODE_NONE;
	if (!(py = hmap_get(&f->c->pycodes, k, 0, NULL)))
		return CODE_NONE;
	ck = code_key(py);
	if (!(id = hmap_get(&f->code_ids, &ck, 1, &created)))
		return CODE_NONE;
	if (!created)
		return (uint32_t)(*memo = *id);
	if (f->next_code >= CODE_NONE)
		goto none;
	k[0] = SP_AGENT_PID_OTHER;
	k[1] = f->next_code;
	if (!(np = hmap_get(&f->c->pycodes, k, 1, &created)) || !created)
		goto none;
	/* moved by the new entry: looked up again */
	py = hmap_get(&f->c->pycodes, (uint64_t[2]){ pid, code }, 0, NULL);
	*np = *py;
	np->name = py->name ? strdup(py->name) : NULL;
	np->qualname = py->qualname ? strdup(py->qualname) : NULL;
	np->file = py->file ? strdup(py->file) : NULL;
	np->table = py->table_len ? malloc(py->table_len) : NULL;
	if ((py->name && !np->name) || (py->qualname && !np->qualname) || (py->file && !np->file) ||
	    (py->table_len && !np->table)) {
		drop_pycode(np);
		hmap_del(&f->c->pycodes, k, NULL);
		goto none;
	}
	if (np->table)
		memcpy(np->table, py->table, py->table_len);
	*id = f->next_code++;
	return (uint32_t)(*memo = *id);
none:
	hmap_del(&f->code_ids, &ck, NULL);
	return CODE_NONE;
}

/* pc of pid's stack (image, generation) as the row's map has it. A pc in
 * no module the process sent stays as it is: below SYN_BASE, it is in no
 * module of the row's either ("??", as it was). */
static uint64_t pfold_pc(struct pfold *f, uint32_t pid, uint32_t image, uint32_t generation,
			 uint64_t pc)
{
	const struct sp_module *m;
	uint64_t lo;

	if (pc & SP_PYFRAME_BIT)
		return SP_PYFRAME(pfold_code(f, pid, SP_PYFRAME_CODE(pc)), SP_PYFRAME_OFF(pc));
	if (!(m = pfold_module(f, pid, image, generation, pc)) || !(lo = pfold_place(f, m)))
		return pc;
	return pc - m->lo + lo;
}

/* The row's stack for pid's stack_id (made now when it is not there
 * yet); 0: none (the process never sent it, or no memory). Its pcs are
 * remembered for the callers (pfold_caller). */
static uint64_t pfold_stack(struct pfold *f, uint64_t pid, uint64_t stack_id)
{
	uint64_t k[2] = { pid, stack_id }, *memo, id;
	const struct sp_stack *s;
	struct sp_stack ns = { 0 }, *row;
	int created;

	if (!stack_id || !(memo = hmap_get(&f->stack_ids, k, 1, &created)))
		return 0;
	if (!created)
		return *memo;
	*memo = 0;
	if (!(s = hmap_get(&f->c->stacks, k, 0, NULL)) || !s->depth ||
	    !(ns.pcs = malloc(s->depth * sizeof(*ns.pcs))))
		return 0;
	ns.depth = s->depth;
	ns.generation = 1;
	ns.image = 0;
	for (uint32_t i = 0; i < s->depth; i++) {
		uint64_t pc = s->pcs[i], *np;

		ns.pcs[i] = pfold_pc(f, (uint32_t)pid, s->image, s->generation, pc);
		if ((np = hmap_get(&f->pcs, (uint64_t[2]){ pid, pc }, 1, NULL)))
			*np = ns.pcs[i];
	}
	id = sp_hash_bytes(ns.pcs, ns.depth * sizeof(*ns.pcs)) | 1;
	k[0] = SP_AGENT_PID_OTHER;
	k[1] = id;
	if (!(row = hmap_get(&f->c->stacks, k, 1, &created))) {
		free(ns.pcs);
		return 0;
	}
	if (created) {
		*row = ns;
	} else {
		int same = row->depth == ns.depth &&
			   !memcmp(row->pcs, ns.pcs, ns.depth * sizeof(*ns.pcs));

		free(ns.pcs);
		if (!same) /* another stack with that hash: none */
			return 0;
	}
	memo = hmap_get(&f->stack_ids, (uint64_t[2]){ pid, stack_id }, 0, NULL);
	return memo ? (*memo = id) : id;
}

/* A caller's pc: as a stack of its process had it, else looked up among
 * its modules (any image, the newest map). */
static uint64_t pfold_caller(struct pfold *f, uint64_t pid, uint64_t pc)
{
	const uint64_t *np = hmap_get(&f->pcs, (uint64_t[2]){ pid, pc }, 0, NULL);

	return np ? *np : pfold_pc(f, (uint32_t)pid, ~0u, 0, pc);
}

/* What an entry's word becomes in the row: a stack, a calling pc, or 0. */
enum pfold_word { PW_ZERO, PW_STACK, PW_PC };

/*
 * The entries of m whose key's word pw is a pid of f->set: with fn, moved
 * to pid SP_AGENT_PID_OTHER with word zw (-1: none) translated as how
 * says, merged by fn into the entry they meet; without fn, deleted and
 * handed to drop (may be NULL). -1 on ENOMEM (what was not moved yet
 * stays: sums whole).
 */
static int pfold_map(struct pfold *f, struct hmap *m, int pw, int zw, enum pfold_word how,
		     pfold_merge_fn fn, void (*drop)(void *val))
{
	size_t it = 0, n = 0, cap = 0, ent = m->keylen + m->vallen;
	const uint64_t *k;
	uint8_t *moved = NULL;
	int rc = 0;

	while (hmap_next(m, &it, (const void **)&k)) {
		if (!hmap_get((struct hmap *)f->set, &k[pw], 0, NULL))
			continue;
		if (SP_GROW(moved, cap, (n + 1) * ent, 4096) < 0) {
			rc = -1;
			break;
		}
		memcpy(moved + n++ * ent, k, m->keylen);
	}
	for (size_t i = 0; i < n; i++)
		hmap_del(m, moved + i * ent, moved + i * ent + m->keylen);
	for (size_t i = 0; i < n; i++) {
		uint8_t *e = moved + i * ent;
		uint64_t key[8];

		if (!fn) {
			if (drop)
				drop(e + m->keylen);
			continue;
		}
		memcpy(key, e, m->keylen);
		key[pw] = SP_AGENT_PID_OTHER;
		if (zw >= 0)
			key[zw] = how == PW_STACK ? pfold_stack(f, ((uint64_t *)e)[pw], key[zw])
				  : how == PW_PC  ? pfold_caller(f, ((uint64_t *)e)[pw], key[zw])
						  : 0;
		if (hmap_put_merge(m, key, e, fn) < 0)
			rc = -1; /* put back as it was */
	}
	free(moved);
	return rc;
}

/* p's counts added to o (the folded processes' row). */
static void proc_add(struct sp_proc *o, const struct sp_proc *p)
{
	o->execs += p->execs;
	/* its goodbye's executions beyond its statistics stay missing
	 * (sp_coll_missing_bye): the row's excess is the sum of theirs */
	o->bye_execs += p->bye && p->bye_execs > p->execs ? p->bye_execs : p->execs;
	o->events += p->events;
	o->lost += p->lost;
	o->unattributed += p->unattributed;
	o->stats_bad += p->stats_bad;
	o->foreign_libs += p->foreign_libs;
	o->deepbind_late += p->deepbind_late;
	o->clamped += p->clamped;
	o->texts_folded += p->texts_folded;
	o->untracked += p->untracked;
	o->msgs += p->msgs;
	o->bad_msgs += p->bad_msgs;
	o->gaps += p->gaps;
	o->reconnects += p->reconnects;
	o->seen |= p->seen;
	o->sqlite_found |= p->sqlite_found;
}

/* The tables keyed by process moved to the row (stacks translated) or
 * dropped. -1: out of memory (every sum still whole). */
static int pfold_tables(struct pfold *f)
{
	struct sp_coll *c = f->c;

	if (pfold_init_row(f) < 0 || pfold_collect_mods(f) < 0)
		return -1;
	/* the stacks the sites and errors name first (their pcs
	 * remembered), then the callers, whose pcs are those stacks' */
	if (pfold_map(f, &c->sites, 2, 3, PW_STACK, pmerge_sagg, NULL) < 0 ||
	    pfold_map(f, &c->errors, 2, 3, PW_STACK, pmerge_err, NULL) < 0 ||
	    pfold_map(f, &c->callers, 2, 3, PW_PC, pmerge_caller, NULL) < 0 ||
	    pfold_map(f, &c->errcodes, 2, -1, PW_ZERO, pmerge_u64, NULL) < 0 ||
	    pfold_map(f, &c->dupvals, 1, -1, PW_ZERO, NULL, NULL) < 0 ||
	    pfold_map(f, &c->stacks, 0, -1, PW_ZERO, NULL, drop_stack) < 0 ||
	    pfold_map(f, &c->modules, 0, -1, PW_ZERO, NULL, drop_module) < 0 ||
	    pfold_map(f, &c->pycodes, 0, -1, PW_ZERO, NULL, drop_pycode) < 0)
		return -1;
	/* their sampled executions kept (memory, spill file) lose their
	 * stack: its addresses were in the process's own map */
	(void)sp_coll_events_unstack(c, f->set);
	return 0;
}

static size_t pfold_rows(struct sp_coll *c, const uint32_t *pids, size_t n)
{
	uint32_t okey = SP_AGENT_PID_OTHER;
	struct sp_proc acc, gone, *o;
	size_t folded = 0;

	memset(&acc, 0, sizeof(acc));
	for (size_t i = 0; i < n; i++) {
		if (pids[i] == SP_AGENT_PID_OTHER || !hmap_del(&c->procs, &pids[i], &gone))
			continue;
		proc_add(&acc, &gone);
		free(gone.exe);
		folded++;
	}
	o = hmap_get(&c->procs, &okey, 0, NULL); /* entries moved: looked up again */
	if (o) {
		if (!o->hello) { /* made by the caller */
			o->pid = SP_AGENT_PID_OTHER;
			o->hello = 1;
			o->bye = 1;
		}
		if (!o->exe)
			o->exe = strdup("<other processes>");
		proc_add(o, &acc);
	}
	return folded;
}

size_t sp_agent_fold_procs(struct sp_coll *c, const uint32_t *pids, size_t n)
{
	struct pfold f = { .c = c };
	struct hmap set; /* pid (as uint64_t) -> nothing */
	uint32_t okey = SP_AGENT_PID_OTHER;
	size_t folded = 0;
	struct sp_proc *o;
	int created;

	if (!n || !hmap_get(&c->procs, &okey, 1, &created))
		return 0;
	hmap_init(&set, sizeof(uint64_t), 0);
	hmap_init(&f.files, sizeof(uint64_t), sizeof(uint64_t));
	hmap_init(&f.codes, 2 * sizeof(uint64_t), sizeof(uint64_t));
	hmap_init(&f.code_ids, sizeof(uint64_t), sizeof(uint64_t));
	hmap_init(&f.stack_ids, 2 * sizeof(uint64_t), sizeof(uint64_t));
	hmap_init(&f.pcs, 2 * sizeof(uint64_t), sizeof(uint64_t));
	f.set = &set;
	for (size_t i = 0; i < n; i++) {
		uint64_t k = pids[i];

		if (pids[i] != SP_AGENT_PID_OTHER && !hmap_get(&set, &k, 1, NULL))
			goto out;
	}
	/* first the tables keyed by process: a failure leaves every process
	 * row, and every sum is still whole */
	if (pfold_tables(&f) == 0)
		folded = pfold_rows(c, pids, n);
out:
	/* the row made for nothing: not a process */
	if (!folded && created && (o = hmap_get(&c->procs, &okey, 0, NULL)) && !o->hello)
		hmap_del(&c->procs, &okey, NULL);
	free(f.mods);
	hmap_free(&f.files);
	hmap_free(&f.codes);
	hmap_free(&f.code_ids);
	hmap_free(&f.stack_ids);
	hmap_free(&f.pcs);
	hmap_free(&set);
	return folded;
}
