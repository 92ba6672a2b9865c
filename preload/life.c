/* SPDX-License-Identifier: MIT */
/*
 * life.c - the preload's process and thread life: the constructor, the
 * per-thread set-up, fork and the destructor. exec and _exit are shims
 * (shims.c); what happens to the connection and the rings is stream.c's.
 */
#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sp_preload.h"

/* last_stmt is never NULL, even before the thread is set up: sqlite3_reset
 * compares its key without testing the state first */
__thread struct sp_thread sp_tls __attribute__((tls_model("initial-exec"))) = {
	.last_stmt = &sp_stmt_none,
	.fast_stmt = &sp_stmt_none,
	.more = &sp_more_none,
};
struct sp_thread_more sp_more_none; /* never written: see sp_preload.h */
uint32_t sp_proc_pid;               /* pid of the process image we initialised */
atomic_ulong sp_unloads;
uint64_t sp_image_salt;

static _Atomic uint32_t cached_pid; /* same value from every thread */

/* This process's pid (cached; reset in a forked child). */
uint32_t sp_my_pid(void)
{
	uint32_t p = atomic_load_explicit(&cached_pid, memory_order_relaxed);

	if (unlikely(!p)) {
		p = (uint32_t)getpid();
		atomic_store_explicit(&cached_pid, p, memory_order_relaxed);
	}
	return p;
}

/* Extending a file past RLIMIT_FSIZE's soft limit raises SIGXFSZ, which
 * kills by default (and, blocked, stays pending): every file of ours is
 * sized within it (issue 23). A memfd counts. */
uint64_t sp_fsize_room(void)
{
	struct rlimit rl;
	int saved = errno;

	if (getrlimit(RLIMIT_FSIZE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) {
		errno = saved;
		return UINT64_MAX;
	}
	return (uint64_t)rl.rlim_cur;
}

static inline uint64_t mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	return x;
}

void sp_thread_init(struct sp_thread *t)
{
	static atomic_uint thread_index;
	uint32_t idx = atomic_fetch_add(&thread_index, 1) + 1;

	t->tid = (uint32_t)syscall(SYS_gettid);
	t->pid = (uint32_t)getpid();
	/* Repeatable per thread index under SQLPROF_SEED. */
	t->rng = mix64(sp_cfg.seed + 0x9E3779B97F4A7C15ULL * idx) | 1;
	t->skip = 0; /* drawn in sp_thread_ready */
}

/*
 * A child made by the raw clone system call without CLONE_VM runs no fork
 * handler: it starts with a copy of the parent's state, and the parent's
 * rings and statistics are shared memory. To know it, one private page the
 * kernel empties in any such child (MADV_WIPEONFORK, Linux 4.14; a forked
 * child's too, which sets it again) holds a 1. The slow paths test it
 * before touching per-process state (sp_thread_ready, a sampled step);
 * the inline path does not, so a raw clone child's executions are counted
 * in its parent's statistics until its first slow call. Without
 * MADV_WIPEONFORK (sp_alive NULL) nothing is detected.
 */
volatile uint8_t *sp_alive;

static void alive_init(void)
{
	void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return;
	if (madvise(p, 4096, MADV_WIPEONFORK) != 0) {
		munmap(p, 4096);
		return;
	}
	sp_alive = p;
	sp_alive[0] = 1;
}

static void on_fork_child(void);

/* In a child of a raw clone, at its first slow call: what a fork handler
 * would have done. */
void sp_raw_clone_child(void)
{
	int saved = errno;

	on_fork_child();
	errno = saved;
}

/*
 * The threads' sp_thread_more pages (sp_preload.h): one mmap'd page a
 * thread, mapped at its set-up and handed at its exit (more_gone, a
 * thread-specific key's destructor) to the next thread set up, so a
 * program that starts many short threads maps a page per thread it runs
 * at a time. The idle list's lock is only ever tried by a taker (a
 * signal handler may be the one setting the thread up, and may have
 * interrupted a push): a taker that finds it held maps a page instead.
 */
static pthread_key_t more_key;
static int more_key_ok;
static struct sp_thread_more *idle_more;
static atomic_flag idle_more_lock = ATOMIC_FLAG_INIT;

static void more_gone(void *arg)
{
	struct sp_thread_more *m = arg;
	struct sp_thread *t = &sp_tls;

	if (t->more != m)
		return;
	t->more = &sp_more_none; /* later SQLite calls of this thread: none */
	if (t->exec_depth)
		return; /* its runs may still be pointed to: the page stays */
	while (atomic_flag_test_and_set_explicit(&idle_more_lock, memory_order_acquire))
		sched_yield(); /* another thread's push or take: a few moves */
	m->next_idle = idle_more;
	idle_more = m;
	atomic_flag_clear_explicit(&idle_more_lock, memory_order_release);
}

struct sp_thread_more *sp_thread_more(struct sp_thread *t)
{
	struct sp_thread_more *m = NULL;
	int saved;

	if (t->more != &sp_more_none)
		return t->more;
	saved = errno;
	if (!atomic_flag_test_and_set_explicit(&idle_more_lock, memory_order_acquire)) {
		m = idle_more;
		if (m)
			idle_more = m->next_idle;
		atomic_flag_clear_explicit(&idle_more_lock, memory_order_release);
	}
	if (m) {
		memset(m, 0, sizeof(*m)); /* a fresh mapping is zero: untouched */
	} else {
		void *p = mmap(NULL, sizeof(*m), PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (p == MAP_FAILED) {
			errno = saved;
			return t->more; /* none: no memo, no exec runs */
		}
		m = p;
	}
	t->more = m;
	if (more_key_ok)
		pthread_setspecific(more_key, m);
	errno = saved;
	return m;
}

/* sp_thread_ready's set-up, out of its line: the common call (set up
 * already) stays a test and a return. */
static __attribute__((noinline, cold)) void thread_setup(struct sp_thread *t)
{
	int saved = errno;

	/* guarded while it sets up (a lock held, the arena half made): a
	 * signal handler's SQLite calls meanwhile run unprofiled, counted
	 * (sp_step_guarded) */
	sp_guard_in(t);
	if (unlikely(!t->tid))
		sp_thread_init(t);
	if (unlikely(sp_stream_restart))
		sp_stream_child_start();
	if (unlikely(__atomic_load_n(&sp_unrep_pending, __ATOMIC_RELAXED)))
		sp_stream_unrep_start();
	if (!t->skip)
		t->skip = sp_draw_gap(t);
	if (!t->last_stmt)
		t->last_stmt = &sp_stmt_none;
	t->state &= ~SP_TS_COUNTERS;
	sp_fast_off(t);
	t->loop_q = &sp_no_loop;
	sp_thread_more(t);
	sp_arena_get(t);
	sp_stream_spares();
	t->state |= SP_TS_SETUP | (sp_clock_tsc ? SP_TS_TSC : 0);
	sp_guard_out(t);
	errno = saved;
}

/* Keeps errno: it runs before the original in the step, reset and
 * finalize shims, and in a forked child it connects (which fails with
 * ECONNREFUSED when the collector is gone). */
void sp_thread_ready(struct sp_thread *t)
{
	if (t->state & SP_TS_SETUP) {
		if (likely(sp_same_process()))
			return;
		sp_raw_clone_child(); /* and set up again, as this process */
	}
	thread_setup(t);
}

static int self_range_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	uintptr_t me = (uintptr_t)arg;
	int i;

	(void)size;
	for (i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *p = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + p->p_vaddr;

		if (p->p_type == PT_LOAD && (p->p_flags & PF_X) && me >= lo &&
		    me < lo + p->p_memsz) {
			sp_self_lo = lo;
			sp_self_hi = lo + p->p_memsz;
			return 1;
		}
	}
	return 0;
}

/* In the parent after fork(): a child may count itself in our header
 * (stats.c, sp_stats_count_unreported): the collector must keep it. */
static void on_fork_parent(void)
{
	if (sp_stats)
		__atomic_store_n(&sp_stats->forked, 1, __ATOMIC_RELAXED);
}

/* In the child after fork() (async-signal-safe work only): it has one
 * thread and a copy of everything. The statement table is kept (the child
 * may go on using the statements); executions open at fork() are the
 * parent's to count (exec.c knows them by their arena's pid); statistics,
 * rings and connection are the parent's and are let go of. */
static void on_fork_child(void)
{
	struct sp_thread *t = &sp_tls;
	int saved = errno; /* the child's fork() returns with the parent's */

	if (sp_alive)
		sp_alive[0] = 1; /* emptied in this child too */
	sp_proc_pid = (uint32_t)getpid();
	atomic_store_explicit(&cached_pid, 0, memory_order_relaxed);
	t->tid = 0;
	t->state &= ~SP_TS_FAST; /* set up again at the next call */
	sp_fast_off(t);
	t->cur = NULL;
	t->exec_depth = 0;
	sp_stmt_fork_child();
	t->rec_busy = 0; /* a fork from a handler inside a record's writing */
	/* another thread may have held the idle pages' lock at fork(): it
	 * does not exist here (the pages it held are copies, still good) */
	atomic_flag_clear_explicit(&idle_more_lock, memory_order_relaxed);
	sp_stats_fork_child();
	sp_stream_fork_child();
	sp_py_fork_child();
	sp_plan_fork_child();
	sp_embed_fork_child();
	errno = saved;
}

/*
 * The constructor's work: runs in the loader, single-threaded, before
 * main. It reads the environment, maps the tables (mmap, no malloc), warms
 * up backtrace() (its first call loads libgcc_s), makes the shared
 * statistics and connects to the collector. It calls dl_iterate_phdr
 * without holding any lock of ours.
 */
static void init(void)
{
	void *warm[4];

	if (!getenv(SP_ENV_SOCK))
		return; /* preloaded without a collector: stay inert */
	/* Never profile the collector itself (its own profile writes). */
	if (dlsym(RTLD_DEFAULT, "sqlprof_is_collector"))
		return;
	/* A second copy of libsqlprof.so in LD_PRELOAD: the first profiles,
	 * this one passes every call through (resolve.c) */
	if (sp_copy_before_us())
		return;
	sp_read_config();
	if (!sp_cfg.follow && getenv("SQLPROF_FOLLOW_ROOT"))
		return; /* an exec'd child under --no-follow */
	if (!sp_cfg.follow)
		setenv("SQLPROF_FOLLOW_ROOT", "1", 1);
	sp_stmt_tables_init();
	if (!atomic_load(&sp_stmt_idx))
		return;
	dl_iterate_phdr(self_range_cb, (void *)(uintptr_t)&init);
	backtrace(warm, 4);
	{
		const char *u = getenv("SQLPROF_UNWIND");

		if (u && !strcmp(u, "libgcc"))
			sp_use_cfi_unwinder = 0;
		else if (u && *u && strcmp(u, "cfi")) {
			sp_warn_bad("SQLPROF_UNWIND", u, "expected cfi or libgcc");
			sp_use_cfi_unwinder = sp_unwind_init() == 0;
		} else
			sp_use_cfi_unwinder = sp_unwind_init() == 0;
	}
	if (sp_clock_tsc && sp_cfg.slow_ticks) {
		sp_cfg.slow_ticks = (uint64_t)((double)sp_cfg.slow_ticks * sp_tsc_per_ns());
		if (!sp_cfg.slow_ticks)
			sp_cfg.slow_ticks = 1;
		sp_cfg.slow_span = sp_cfg.slow_ticks;
	}
	if (sp_clock_tsc)
		sp_cfg.loop_gap = (uint64_t)((double)SP_LOOP_GAP_NS * sp_tsc_per_ns()) + 1;
	sp_proc_pid = (uint32_t)getpid();
	sp_image_salt = mix64(sp_rdtsc() ^ (uint64_t)sp_proc_pid << 32) & ~1ULL;
	/* the bound values' key (exec.c, params_hash): from the kernel, never
	 * sent; errno is restored by sp_init */
	if (getrandom(sp_params_key, sizeof(sp_params_key), GRND_NONBLOCK) !=
	    sizeof(sp_params_key)) {
		sp_params_key[0] = mix64(sp_rdtsc() ^ (uintptr_t)&init);
		sp_params_key[1] = mix64(sp_params_key[0] ^ sp_rdtsc() ^ sp_proc_pid);
	}
	alive_init();
	more_key_ok = pthread_key_create(&more_key, more_gone) == 0;
	pthread_atfork(NULL, on_fork_parent, on_fork_child);
	sp_resolve();
	sp_stats_init();
	if (sp_copy_after_us())
		sp_stats_note_seen(SP_SEEN_SECOND_COPY); /* record says so */
	if (sp_stream_init() == 0) {
		sp_cfg.enabled = 1;
		if (atomic_load(&sp_resolved))
			sp_hot = 1;
		/* SQLite compiled in: hooked now, before main (embed.c); its
		 * flags (hooked, or why not) go out at once, for record even
		 * if no execution ever sends a stack */
		if (sp_embed_init())
			sp_modules_resend();
		sp_dlopen_watch = 1; /* loads come by us (deepbind.c, embed.c) */
	}
}

/* Constructor. C guarantees errno 0 at the start of main: what failed in
 * here (a connect to a collector that is gone, the loader's search for
 * libgcc_s) must not show. */
__attribute__((constructor)) static void sp_init(void)
{
	int saved = errno;

	init();
	errno = saved;
}

/* Destructor: say goodbye. Runs from exit(); _exit and exec have shims
 * that do it; a program killed by a signal has no goodbye, but its totals
 * are in the statistics and its records in the rings the collector holds. */
__attribute__((destructor)) static void sp_fini(void)
{
	int saved = errno; /* later destructors and atexit handlers see theirs */

	if (!sp_cfg.enabled)
		return;
	sp_stream_exit();
	errno = saved;
}
