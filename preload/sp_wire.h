/* SPDX-License-Identifier: MIT */
/*
 * sp_wire.h - the sqlprof stream format, shared by libsqlprof.so (writer)
 * and the sqlprof CLI (reader). This header is the single definition of the
 * wire format; docs/wire-format.md describes it for humans.
 *
 * Transport: one AF_UNIX SOCK_SEQPACKET connection per process. Every
 * send() is one message: an sp_msg_hdr followed by whole records. A message
 * is never split across sends and never interleaved with another, so a
 * corrupt or dropped message loses only its own records.
 *
 * Records: sp_rec_hdr {type, len} followed by a type-specific body. len is
 * the length of the whole record including the header, a multiple of 8.
 * Readers must skip unknown record types (by len) and reject any record
 * whose len is smaller than its type's fixed part or runs past the message.
 * All integers are little-endian host order (the stream never leaves the
 * machine). Every record body starts with pid and tid.
 *
 * What this header does not do: encode or decode. The preload writes
 * structs directly; the CLI copies each record into an aligned local after
 * checking its length (report/record/collect.c).
 */
#ifndef SP_WIRE_H
#define SP_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define SP_WIRE_MAGIC 0x46525053u /* "SPRF" little-endian */
#define SP_WIRE_VERSION 6
#define SP_WIRE_MIN_VERSION \
	6 /* oldest version this reader accepts (3: totals in
                               * shared statistics, EXEC records are events;
                               * 4: MODULE records name the mapped file, STACK
                               * records their map; 5: EXEC records carry
                               * params, PLAN records schema_id; 6: shared
                               * statistics records are 16-byte multiples,
                               * SP_AGG_QUERY's counters 16-aligned) */

/* Largest message a writer may send and a reader must accept. */
#define SP_MSG_MAX (256 * 1024)
/* Longest SQL text sent; longer texts are cut and flagged. */
#define SP_SQL_MAX (16 * 1024)
/* Deepest stack sent. */
#define SP_STACK_MAX 256

/* Environment variables that carry the collector's address and options. */
#define SP_ENV_SOCK "SQLPROF_SOCK"
/* `sqlprof record` hands its TSC calibration (ticks per ns) to the
 * preload, which then measures none of its own (internal) */
#define SP_ENV_TSC_PER_NS "SQLPROF_TSC_PER_NS"

struct sp_msg_hdr {
	uint32_t magic;   /* SP_WIRE_MAGIC */
	uint16_t version; /* SP_WIRE_VERSION of the writer */
	uint16_t flags;   /* SP_MSG_* */
	uint32_t pid;
	uint32_t len;  /* whole message length, header included */
	uint64_t seq;  /* per-process message sequence number, from 1 */
	uint64_t lost; /* records dropped by this process so far (cumulative) */
};

enum sp_msg_flags {
	SP_MSG_FINAL = 1, /* last message of the process (exit) */
	SP_MSG_WAKE = 2,  /* a ring is filling: read the rings now (no records needed) */
};

struct sp_rec_hdr {
	uint16_t type; /* enum sp_rec_type */
	uint16_t flags;
	uint32_t len; /* whole record length, header included, multiple of 8 */
};

enum sp_rec_type {
	/* First record of every connection: who is talking. */
	SP_REC_HELLO = 1,
	/* SQL text, sent once per process per distinct text, before (in the
	 * same thread's stream) the first record that references its id. */
	SP_REC_SQL = 2,
	/* One finished *sampled* execution (an event: stack, timeline).
	 * Its totals are in the shared statistics (SP_REC_STATS) like every
	 * other execution's: a reader never adds an EXEC record to totals. */
	SP_REC_EXEC = 3,
	/* 4 was PREPARE (version 2): prepares are counted in the statistics. */
	/* A deduplicated call stack, sent once per process per stack id. */
	SP_REC_STACK = 5,
	/* One loaded module (executable, shared library), for symbolizing. */
	SP_REC_MODULE = 6,
	/* Error text of a failed execution (sqlite3_errmsg at the failure). */
	SP_REC_ERROR = 7,
	/* Process is exiting: final counters. */
	SP_REC_BYE = 8,
	/* Query plan of a fingerprint on a connection (EXPLAIN QUERY PLAN). */
	SP_REC_PLAN = 9,
	/* 10 was EXEC_LITE (version 2): plain executions are only counted. */
	/* A thread's shared ring: the message carrying it has one descriptor
	 * (SCM_RIGHTS), a memfd holding a struct sp_ring_shared. */
	SP_REC_RING = 11,
	/* The process image's shared statistics: the message carrying it (its
	 * HELLO) has one descriptor, a memfd holding a struct sp_stats_hdr and
	 * its chunks (see below). */
	SP_REC_STATS = 12,
	/* A copy of one chunk of the image's statistics, sent before BYE by
	 * an image that could not share them (memfd_create refused). */
	SP_REC_STATS_COPY = 13,
	/* A Python code object, before the first stack that holds a frame
	 * of it (see SP_PYFRAME below). */
	SP_REC_PYCODE = 14,
	/* The process runs CPython: which version, and whether its frames
	 * are read (a version without a layout, or memory that cannot be
	 * read, is said once). */
	SP_REC_PYINFO = 15,
	/* The schema a plan was taken under (sp_rec_schema), once per
	 * connection and content; a PLAN record names it by schema_id. */
	SP_REC_SCHEMA = 16,
	/* Filler at the end of a writer's ring; readers skip it. */
	SP_REC_PAD = 0xffff,
};

/* Clock domains for the ns fields of EXEC records. */
enum sp_clock {
	SP_CLOCK_MONOTONIC = 0, /* CLOCK_MONOTONIC nanoseconds */
	SP_CLOCK_TSC = 1,       /* raw TSC ticks; converted by the reader, see
				 * the tsc_* fields of HELLO */
};

struct sp_rec_hello {
	struct sp_rec_hdr h;
	uint32_t pid, tid;
	uint32_t ppid;
	uint32_t clock;         /* enum sp_clock */
	uint64_t start_mono_ns; /* CLOCK_MONOTONIC at process start */
	/* Calibration for SP_CLOCK_TSC: at tsc_ref the monotonic clock read
	 * mono_ref_ns (used to place events on the monotonic time line).
	 * Zero under SP_CLOCK_MONOTONIC. */
	uint64_t tsc_ref;
	uint64_t mono_ref_ns;
	uint64_t tsc_per_ns_x1e9; /* writer's own estimate of TSC ticks per ns * 1e9 */
	uint32_t sqlite_found;    /* libsqlite3 resolved in this process */
	uint32_t exe_len;         /* bytes of executable path that follow */

	/* char exe[exe_len], padded to 8 */
};

/* HELLO flags */
#define SP_HELLO_RECONNECT \
	1 /* same process image, new connection (its
			      * descriptor was closed by the program) */
#define SP_HELLO_UNREPORTED \
	2 /* read from a file in the collector's
			       * directory: the image could not connect (see
			       * "Processes that cannot connect" in
			       * docs/wire-format.md) */

struct sp_rec_sql {
	struct sp_rec_hdr h; /* flags: SP_SQL_TRUNCATED */
	uint32_t pid, tid;
	uint64_t sql_id;   /* 64-bit hash of the full text */
	uint32_t full_len; /* length before truncation */
	uint32_t text_len; /* bytes that follow */

	/* char text[text_len], padded to 8 */
};
#define SP_SQL_TRUNCATED 1

enum sp_exec_kind {
	SP_KIND_STMT = 0, /* a prepared statement, first step to end */
	SP_KIND_EXEC = 1, /* one sqlite3_exec call */
};

enum sp_exec_flags {
	SP_EXEC_SAMPLED = 1 << 0,      /* has a stack (stack_id != 0) */
	SP_EXEC_NESTED = 1 << 1,       /* ran inside another execution */
	SP_EXEC_ERROR = 1 << 2,        /* ended with an error result code */
	SP_EXEC_SLOW = 1 << 3,         /* crossed SQLPROF_SLOW_MS */
	SP_EXEC_FIRST = 1 << 4,        /* first execution of its SQL in the process */
	SP_EXEC_ABANDONED = 1 << 5,    /* ended by reset/finalize before DONE */
	SP_EXEC_RANDOM = 1 << 7,       /* chosen by the random draw (SQLPROF_RATE);
				   * unset on samples that were only forced
				   * (first, error, slow): site estimates use
				   * the random ones */
	SP_EXEC_STATUS_RESET = 1 << 6, /* stmt_status counters were reset by the
					* application mid-execution: deltas 0 */
};

struct sp_rec_exec {
	struct sp_rec_hdr h; /* flags: enum sp_exec_flags */
	uint32_t pid, tid;
	uint64_t sql_id;
	uint64_t seq;         /* per-thread execution number, from 1 */
	uint64_t parent_seq;  /* seq of the enclosing execution, 0 if none */
	uint64_t db;          /* connection handle (opaque id) */
	uint64_t start;       /* first step, in the HELLO clock domain */
	uint64_t wall;        /* first step to end, clock units */
	uint64_t db_time;     /* time inside step calls (exec call), units */
	uint64_t nested_time; /* db_time of direct nested executions, units */
	uint64_t rows;        /* SQLITE_ROW results */
	uint64_t stack_id;    /* 0: no stack */
	uint32_t vm_steps, fullscan_steps, sorts, autoindex; /* deltas */
	int32_t rc;                                          /* final result code (extended) */
	uint16_t kind;                                       /* enum sp_exec_kind */
	uint16_t pad;
	uint64_t params; /* a randomly drawn statement execution's bound
			      * values: a keyed hash (SipHash-2-4) of its
			      * sqlite3_expanded_sql text under a key the
			      * process draws and never sends, so equal values
			      * give equal hashes within a process and the
			      * values cannot be recovered; 0: not taken */
};

struct sp_rec_stack {
	struct sp_rec_hdr h;
	uint32_t pid, tid;
	uint64_t stack_id;
	uint32_t depth;      /* number of pcs that follow; pcs[0] is the leaf */
	uint32_t generation; /* the module map (SP_REC_MODULE) current when it
			      * was taken: its pcs are looked up in the newest
			      * map of the image not newer than this one */

	/* uint64_t pcs[depth]: return addresses, leaf first; the profiler's
	 * own frames are already dropped */
};

/*
 * A Python frame among a stack's pcs: bit 63 set (no user-space return
 * address has it), the code object's number (SP_REC_PYCODE) in bits
 * 32..62, the byte offset of its current instruction in the code's
 * bytecode in bits 0..31. Python frames stand where the interpreter's
 * C frame that ran them was (py-spy --native's order).
 */
#define SP_PYFRAME_BIT (1ULL << 63)
#define SP_PYFRAME(code, off) (SP_PYFRAME_BIT | (uint64_t)(code) << 32 | (uint32_t)(off))
#define SP_PYFRAME_CODE(pc) ((uint32_t)(((pc) >> 32) & 0x7fffffffu))
#define SP_PYFRAME_OFF(pc) ((uint32_t)(pc))

struct sp_rec_pycode {
	struct sp_rec_hdr h; /* flags: SP_PYCODE_TABLE_CUT */
	uint32_t pid, tid;
	uint32_t code; /* its number in SP_PYFRAME pcs */
	int32_t firstlineno;
	uint8_t major, minor;  /* CPython version: the line table's format */
	uint16_t name_len;     /* co_name */
	uint16_t qualname_len; /* co_qualname (3.11+), else 0 */
	uint16_t file_len;     /* co_filename */
	uint32_t table_len;    /* co_lnotab (3.8, 3.9), co_linetable (3.10+) */
	uint32_t pad;
	/* name, qualname, file, table, then padding to 8 */
};
#define SP_PYCODE_TABLE_CUT 1 /* the line table was cut: lines past it are 0 */

struct sp_rec_pyinfo {
	struct sp_rec_hdr h;
	uint32_t pid, tid;
	uint32_t status;   /* enum sp_py_status */
	uint32_t text_len; /* Py_GetVersion()'s text, padded to 8 */
};
enum sp_py_status {
	SP_PY_ON = 1,          /* frames read */
	SP_PY_UNSUPPORTED = 2, /* no layout for this version: native frames only */
	SP_PY_UNREADABLE = 3,  /* process_vm_readv refused: native frames only */
};

struct sp_rec_module {
	struct sp_rec_hdr h;
	uint32_t pid, tid;
	uint64_t bias;       /* load bias (dlpi_addr) */
	uint64_t lo, hi;     /* lowest and highest address of executable segments */
	uint32_t generation; /* module map generation this entry belongs to */
	uint16_t build_id_len;
	uint16_t path_len;
	/* The file mapped (/proc/self/maps: device and inode of the mapping),
	 * and its size and modification time when the map was sent (0, and
	 * flag SP_MODULE_REPLACED, when path already named another file then):
	 * a file without build-id that is another one when the profile is
	 * written is not symbolized. */
	uint64_t dev, ino, size;
	int64_t mtime_ns;
	/* uint8_t build_id[build_id_len]; char path[path_len]; padded to 8 */
};
#define SP_MODULE_REPLACED 1 /* h.flags: path was another file at map time */
/* h.flags: the object provides the sqlite3 API (it defines sqlite3_step,
 * sqlite3_prepare_v2 and sqlite3_exec, whatever its name: libsqlite3,
 * libsqlcipher, a renamed copy). SQLITE: it exports nothing else (a SQLite
 * library: no frame in it is a call site); SQLITE_MIXED: it exports other
 * functions too (SQLite compiled into a plugin or a program: only frames
 * of SQLite's own code are passed over). libsqlprof.so is neither. */
#define SP_MODULE_SQLITE 2
#define SP_MODULE_SQLITE_MIXED 4
/* h.flags: SQLite compiled into the object and not exported (found by its
 * symbol table, preload/embed.c). EMBED: profiled through its own hooks
 * (sqlite3_auto_extension, sqlite3_trace_v2); it also has SQLITE_MIXED.
 * EMBED_BLIND: not profiled, for the reason in the bits after it.
 * EMBED_LATE and EMBED_OWNTRACE may come with EMBED: some of its
 * connections may go unseen. record warns once per object and reason. */
#define SP_MODULE_EMBED 8
#define SP_MODULE_EMBED_BLIND 16
#define SP_MODULE_EMBED_STRIPPED 32 /* no symbols: SQLite's header string only */
#define SP_MODULE_EMBED_CONFIG 64   /* the program calls sqlite3_config itself */
#define SP_MODULE_EMBED_NOTRACE 128 /* no sqlite3_trace_v2 (SQLITE_OMIT_TRACE) */
#define SP_MODULE_EMBED_LATE 256    /* found after SQLite was in use */
#define SP_MODULE_EMBED_OWNTRACE \
	512 /* the program sets trace callbacks or
				      * removes auto-extensions itself */

struct sp_rec_error {
	struct sp_rec_hdr h; /* flags: SP_ERROR_EXEC */
	uint32_t pid, tid;
	uint64_t exec_seq; /* EXEC record this error belongs to (same tid) */
	uint64_t sql_id;
	uint64_t stack_id; /* stack at the failing call, 0 if none */
	int32_t rc;
	uint32_t msg_len;
	/* char msg[msg_len], padded to 8 */
};
#define SP_ERROR_EXEC 1 /* h.flags: the failed execution is an sqlite3_exec call */

/* A plan is taken once per (connection, fingerprint): sql_id is the first
 * text of that fingerprint prepared on the connection, and the plan stands
 * for every text of its fingerprint. h.flags SP_PLAN_NONE: no plan could
 * be taken there, and text says why (once per connection and fingerprint);
 * with SP_PLAN_BOUND as well: the process's table of planned pairs is full
 * (text says its size), so no later fingerprint of the process gets a plan
 * (sent once per process). */
#define SP_PLAN_NONE 1
#define SP_PLAN_BOUND 2
#define SP_PLANS_MAX_DEFAULT (1L << 20) /* SQLPROF_PLANS_MAX: pairs per process */
#define SP_PLANS_MAX_LIMIT (1L << 26)
struct sp_rec_plan {
	struct sp_rec_hdr h; /* flags: SP_PLAN_NONE, SP_PLAN_BOUND */
	uint32_t pid, tid;
	uint64_t sql_id;
	uint64_t db;
	uint32_t text_len; /* plan lines, "id|parent|detail\n" each; or why none */
	uint32_t pad;
	uint64_t schema_id; /* SP_REC_SCHEMA of the connection when planned, 0: none */

	/* char text[text_len], padded to 8 */
};

/* What the doctor needs to check an index suggestion: the CREATE TABLE,
 * INDEX and VIEW statements of the connection's main database, read by the
 * preload where that takes no lock (an in-memory or temporary database, or
 * a read transaction already open), each ending in ";\n"; or, with
 * SP_SCHEMA_FILE, the database file's path, for the collector to read at
 * the end. */
#define SP_SCHEMA_FILE 1 /* h.flags: text is a path */
#define SP_SCHEMA_MAX (32 * 1024)
struct sp_rec_schema {
	struct sp_rec_hdr h;
	uint32_t pid, tid;
	uint64_t schema_id; /* hash of flags and text */
	uint32_t text_len;
	uint32_t pad;
	/* char text[text_len], padded to 8 */
};

struct sp_rec_bye {
	struct sp_rec_hdr h;
	uint32_t pid, tid;
	uint64_t executions; /* executions counted in this image's statistics */
	uint64_t untracked;  /* executions of statements we could not track */
	uint64_t lost;       /* event records dropped (never a total) */
	int32_t status;      /* exit status if known, else -1 */
	uint32_t stats_ino;  /* low 32 bits of the inode of the image's
			      * statistics memfd, 0 without one: names the
			      * image in a BYE file whatever pid namespace it
			      * ran in (was padding: 0 from older preloads) */
};

#define SP_ALIGN8(n) (((n) + 7u) & ~7u)

/*
 * Rings. Every thread writes its records into its own ring, a memfd it
 * maps and passes to the collector (SP_REC_RING with the descriptor in
 * SCM_RIGHTS). The ring carries the same records as messages, back to
 * back from tail to head; a record never wraps: a SP_REC_PAD record fills
 * the end of the buffer instead. head and tail are free-running byte
 * counts (data offset = count & (size - 1)); 0 <= head - tail <= size.
 *
 *   writer: fills data beyond head, then stores head (release);
 *           never writes data in [tail, head).
 *   reader: loads head (acquire), reads [tail, head), then stores tail
 *           (release). It must check 0 <= head - tail <= size and every
 *           record (as in a message) before using it: the writer is not
 *           trusted.
 *
 * dead is set (release, after the last head store) when the thread is
 * gone: once the reader has read up to that head, it may unmap the ring.
 * The fields are accessed with __atomic builtins by both sides.
 */
#define SP_RING_MAGIC 0x474e5253u /* "SRNG" little-endian */

struct sp_ring_shared {
	uint32_t magic;    /* SP_RING_MAGIC */
	uint32_t size;     /* bytes of data[]: a power of two, >= 4096 */
	uint32_t pid, tid; /* the writer */
	uint32_t dead;     /* 1: no more records */
	uint32_t pad0[11];
	uint32_t head; /* writer: end of the committed records */
	uint32_t pad1[15];
	uint32_t tail; /* reader: end of the consumed records */
	uint32_t pad2[15];
	uint8_t data[]; /* size bytes */
};

struct sp_rec_ring {
	struct sp_rec_hdr h;
	uint32_t pid, tid;
	uint32_t size; /* as in sp_ring_shared: the memfd holds
			    * sizeof(struct sp_ring_shared) + size bytes */
	uint32_t pad;
};

struct sp_rec_stats {
	struct sp_rec_hdr h;
	uint32_t pid, tid;
	uint64_t size; /* bytes of the memfd, as in sp_stats_hdr */
};

struct sp_rec_stats_copy {
	struct sp_rec_hdr h;
	uint32_t pid, tid;
	uint32_t chunk; /* chunk number (0: the header) */
	uint32_t len;   /* bytes that follow: the chunk's first len bytes */

	/* uint8_t data[len], padded to 8 */
};
#define SP_STATS_COPY_MAX_CHUNKS 16384 /* a reader keeps at most 1 GiB of copies */

/*
 * Shared statistics: exact totals by construction.
 *
 * Every process image keeps the totals of all its executions in one memfd
 * it shares with the collector (sent with HELLO as SP_REC_STATS). The
 * memfd is cut into chunks of SP_STATS_CHUNK bytes; chunk 0 holds only
 * the header. Each thread owns an *arena*: the chunks it took, which only
 * it writes (a thread that ends hands its arena to the next new thread).
 * A chunk holds whole records back to back, each a struct sp_rec_hdr
 * {type, flags, len} and a body, 8-aligned:
 *
 *   SP_AGG_ARENA  first record of an arena's first chunk: the arena's
 *                 open N+1 loop
 *   SP_AGG_QUERY  the totals of one SQL text and kind in this arena
 *   SP_AGG_HIST   32 buckets of a query's latency histogram
 *   SP_AGG_LOOPS   a query's run lengths (runs of 2 and more)
 *   SP_AGG_ERRS   a query's failures by result code
 *
 * The writer updates a record in place (plain stores; one writer per
 * arena, so no atomics) and publishes a new record by storing the chunk's
 * used length (release) after filling it. A reader may read at any
 * moment: it loads nchunks and each chunk's used (acquire) and reads only
 * below them; a record being updated while it is read may be seen with
 * one execution half-added (the next read has it whole; every field only
 * grows). After the process is gone, every figure is final. Nothing the
 * writer stores is trusted: lengths, offsets and counts are checked.
 *
 * Times are in the clock of the image (HELLO's clock field: TSC ticks or
 * nanoseconds). Pointers between records (hist[], runs, errs) are the
 * writer's own addresses: the reader subtracts
 * sp_stats_hdr.base to get an offset into the memfd, and checks it.
 */
#define SP_STATS_MAGIC 0x54535053u /* "SPST" little-endian */
#define SP_CHUNK_MAGIC 0x4b4e4843u /* "CHNK" little-endian */
#define SP_STATS_CHUNK (64u * 1024u)
#define SP_STATS_MAX_SIZE (1ull << 32) /* offsets are below 4 GiB */

enum sp_agg_type {
	SP_AGG_ARENA = 0x100,
	SP_AGG_QUERY = 0x101,
	SP_AGG_HIST = 0x102,
	SP_AGG_LOOPS = 0x103,
	SP_AGG_ERRS = 0x104,
};

/* The query the collector counts a header's unattributed executions under
 * (an id no FNV-1a text hash is expected to take), and its text. */
#define SP_SQL_UNATTRIBUTED 0x554e415454524942ull /* "BIRTTANU" */
#define SP_SQL_UNATTRIBUTED_TEXT \
	"<executions with no room for their query: SQLPROF_STATS_MB was full>"
/* The query record each arena keeps per kind for texts that found no room
 * for a record of their own (the statistics full): their count, times,
 * rows, errors, prepares and counters, exact, under one text. */
#define SP_SQL_FOLDED 0x44444c4f46505355ull /* "USPFOLDD" */
#define SP_SQL_FOLDED_TEXT \
	"<texts folded together: SQLPROF_STATS_MB was full; their totals are exact>"

struct sp_stats_hdr {
	uint32_t magic;   /* SP_STATS_MAGIC */
	uint32_t version; /* SP_WIRE_VERSION */
	uint32_t pid;
	uint32_t chunk_size;    /* SP_STATS_CHUNK */
	uint64_t size;          /* bytes of the memfd */
	uint64_t base;          /* the writer's address of byte 0 */
	uint32_t nchunks;       /* chunks taken, this one included (release) */
	uint32_t forked;        /* 1 once the image called fork(): a child may
			      * count itself in `unreported` below, so the
			      * collector keeps this page to the end */
	uint64_t unattributed;  /* executions that found no room for their
				* query's record (memory exhausted): counted
				* here, with no query */
	uint64_t unreported;    /* descendants (forked after this image shared
				* these statistics) that ran SQLite, could not
				* connect and could not leave a file either:
				* added by them, atomically, in their inherited
				* mapping of this header (see forked) */
	uint32_t foreign_libs;  /* other SQLite libraries the process called:
				* passed through, not profiled */
	uint32_t deepbind_late; /* libraries loaded with RTLD_DEEPBIND that
				 * could not be patched at once (deepbind.c):
				 * their calls until the next shim call were
				 * not seen (was padding: 0 from older
				 * preloads) */
	uint32_t seen;          /* enum sp_seen: what the image saw that the
				* collector cannot (0 in older writers) */
	uint32_t clamped;       /* executions whose time came out negative
				* (the TSC of another CPU, a host that paused:
				* config.c) and was clamped: wall to 0, db
				* time to at most the wall time (was padding:
				* 0 from older preloads) */
	uint32_t texts_folded;  /* distinct SQL texts counted in their
				* fingerprint's folded text, past the first
				* SQLPROF_TEXTS_PER_SHAPE of a fingerprint,
				* and not given their own since by a second
				* execution (stmt.c; 0 from older preloads) */
	uint32_t pad_folded;
};

/* Bits of sp_stats_hdr.seen, set by the image for record's warnings:
 * record names the cause it saw instead of guessing. */
enum sp_seen {
	/* a SQLPROF_* variable had a bad value and was ignored (record
	 * warns once per run; the preload never writes to the program's
	 * stderr) */
	SP_SEEN_BAD_ENV = 1 << 0,
	/* at exit, with no execution counted, libsqlite3 was mapped: it
	 * was loaded but no call reached the shims (RTLD_DEEPBIND, or calls
	 * through dlsym on its own handle) */
	SP_SEEN_SQLITE_MAPPED = 1 << 1,
	/* at exit, with no execution counted, no libsqlite3 was mapped */
	SP_SEEN_NO_SQLITE = 1 << 2,
	/* RLIMIT_FSIZE left no room for a memfd of ours at its size (the
	 * kernel would have raised SIGXFSZ): the statistics were made
	 * smaller (or private, delivered as copies at exit), or a thread
	 * had no ring (its records lost, counted) */
	SP_SEEN_FSIZE = 1 << 3,
	/* another copy of libsqlprof.so came later in LD_PRELOAD: ignored
	 * (it passed every call through) */
	SP_SEEN_SECOND_COPY = 1 << 4,
	/* an address-space limit (RLIMIT_AS) made the statistics smaller:
	 * texts past them are folded, their totals exact */
	SP_SEEN_ASLIMIT = 1 << 5,
};

struct sp_stats_chunk {
	uint32_t magic; /* SP_CHUNK_MAGIC */
	uint32_t used;  /* bytes of whole records, this header included
			      * (release); the reader reads below it */
	uint32_t arena; /* owning arena's number (from 1) */
	uint32_t pad;
};

struct sp_agg_arena {
	struct sp_rec_hdr h; /* SP_AGG_ARENA */
	uint32_t arena, tid; /* number, and the thread that made it */
};

/* Latency histogram: values v (db time, clock units) are bucketed
 * log-linearly, 8 buckets per power of two: with s = max(0, log2(v) - 3),
 * bucket index = 8 s + (v >> s), so v < 16 has a bucket each and above
 * that each bucket is 1/8 of its power of two wide: any value is known
 * to within 1/16 of itself from its bucket's middle, over the whole
 * 64-bit range. A query's histogram is SP_HIST_BLOCKS blocks of 32 buckets
 * (4 powers of two), each made at its first value; 264 bytes each, so a
 * query whose times span a factor of 16 costs one. */
#define SP_HIST_SUB 8
#define SP_HIST_BUCKETS 512 /* 8 * 61 + 16, rounded up to whole blocks */
#define SP_HIST_PER_BLOCK 32
#define SP_HIST_BLOCKS (SP_HIST_BUCKETS / SP_HIST_PER_BLOCK) /* 16 */

static inline uint32_t sp_hist_index(uint64_t v)
{
	int s;

	s = 63 - __builtin_clzll(v | 15) - 3;
	return (uint32_t)(8 * s) + (uint32_t)(v >> s);
}

/* Smallest value of bucket i and its width. */
static inline void sp_hist_bucket(uint32_t i, uint64_t *lo, uint64_t *width)
{
	if (i < 16) {
		*lo = i;
		*width = 1;
		return;
	}
	{
		uint32_t s = i / 8 - 1;

		*lo = (uint64_t)(8 + i % 8) << s;
		*width = (uint64_t)1 << s;
	}
}

struct sp_agg_query {
	struct sp_rec_hdr h; /* SP_AGG_QUERY */
	uint32_t kind;       /* enum sp_exec_kind */
	uint32_t started;    /* statements: executions started here, low 32
			       * bits. started - count, summed over a text's
			       * records (one may start on a thread and end on
			       * another), is how many were running: those of a
			       * process that died are named by record */
	uint64_t sql_id;
	uint64_t count; /* executions ended */
	uint64_t db;    /* db time, summed */
	uint64_t wall;  /* wall time, summed */
	uint64_t rows;
	uint64_t nested_time; /* db time of executions nested in these */
	uint64_t nested;      /* of count, executions that ran nested */
	uint64_t min;         /* db time of one execution (UINT64_MAX while
			       * count is 0) */
	/* SQLite's counters, in its order (aCounter[1..4]): the sums of the
	 * closed segments (below; sp_agg_counters gives the whole figure) */
	uint64_t fullscan_steps, sorts, autoindex, vm_steps;
	uint64_t max;     /* db time of one execution */
	uint64_t errors;  /* of count, executions that failed */
	uint64_t samples; /* of count, executions with a stack */
	uint64_t prepares, prepare_time;
	uint64_t runs, max_run;        /* closed N+1 loops credited here */
	uint64_t hist[SP_HIST_BLOCKS]; /* SP_AGG_HIST addresses, 0: none yet */
	uint64_t loops_by_len;         /* SP_AGG_LOOPS address, 0: every run was 1 long */
	uint64_t errs;                 /* SP_AGG_ERRS address, 0: no failure yet */
	uint64_t hist_lost;            /* values with no room for their block */
	uint64_t caller;               /* statements: the return address into the code
			       * that called sqlite3_step for these executions
			       * (a record per text and calling site: the
			       * collector keeps exact counts per caller, for
			       * the sites' figures); 0: prepares, exec calls */
	/* The thread's open N+1 loop, when it is credited here (at most one
	 * record of an arena has it): its length so far (0: not here), and
	 * the clock value before which the next execution must start to go
	 * on with it (0 when not here: the inline end's one test) */
	uint64_t loop_open;
	uint64_t loop_until;
	uint64_t pad2;
	/* The open segment of SQLite's counters. SQLite keeps them per
	 * statement, summed over its executions, so a statement's executions
	 * credited here in a row add up to its counters now less its counters
	 * when they began: the statement this record's segment follows (its
	 * owner, seg_owner) stores its counters at each end (seg_cur, one
	 * store), and the figure is the sums above plus seg_cur - seg_base,
	 * lane by lane modulo 2^32 (a segment is closed before a lane
	 * reaches 2^31). Another statement's executions add to the sums. */
	uint32_t seg_base[4] __attribute__((aligned(16)));
	uint32_t seg_cur[4];
	/* Closing and opening a segment is a transaction: seg_gen is odd
	 * while it runs, and the record's figure before it is the shadow's
	 * sums plus its open part, so a reader, or a process that died in
	 * one, has the counters whole either way. */
	uint32_t seg_shadow_open[4];
	uint64_t seg_shadow_sums[4];
	uint64_t seg_gen;
	uint64_t seg_owner; /* the preload's statement slot; 0: none */
} __attribute__((aligned(16)));

/* SQLite's counters of a copied SP_AGG_QUERY record (c: fullscan steps,
 * sorts, automatic indexes, VM steps). */
static inline void sp_agg_counters(const struct sp_agg_query *a, uint64_t c[4])
{
	const int shadow = (int)(a->seg_gen & 1);
	const uint64_t s[4] = { a->fullscan_steps, a->sorts, a->autoindex, a->vm_steps };
	int i;

	for (i = 0; i < 4; i++)
		c[i] = shadow ? a->seg_shadow_sums[i] + a->seg_shadow_open[i]
			      : s[i] + (uint32_t)(a->seg_cur[i] - a->seg_base[i]);
}

struct sp_agg_hist {
	struct sp_rec_hdr h; /* SP_AGG_HIST; flags: block number */
	uint64_t bucket[SP_HIST_PER_BLOCK];
	uint64_t pad; /* to a multiple of 16 bytes */
};

/* Run lengths as the collector keeps them: i < 16 is length i + 1, then
 * lengths [2^(i-12), 2^(i-11)). Length-1 runs are runs minus the rest. */
#define SP_AGG_RUN_BUCKETS 64

/* The bucket of a run of len >= 1 executions. */
static inline int sp_loop_len_bucket(uint64_t len)
{
	int b = 0;

	if (len <= 16)
		return (int)len - 1;
	while ((len >> b) > 1)
		b++;
	/* len in [2^b, 2^(b+1)), b >= 4 */
	b += 12;
	return b < SP_AGG_RUN_BUCKETS ? b : SP_AGG_RUN_BUCKETS - 1;
}
struct sp_agg_loops {
	struct sp_rec_hdr h; /* SP_AGG_LOOPS */
	uint64_t by_len[SP_AGG_RUN_BUCKETS];
	uint64_t pad; /* to a multiple of 16 bytes */
};

#define SP_AGG_ERR_CODES 8
struct sp_agg_errs {
	struct sp_rec_hdr h; /* SP_AGG_ERRS */
	struct {
		int32_t rc; /* extended result code; 0: free entry */
		uint32_t pad;
		uint64_t count;
	} code[SP_AGG_ERR_CODES];
	uint64_t other; /* failures with a code beyond the table */
};

/* Every record of a chunk is a multiple of 16 bytes after a 16-byte chunk
 * header, so each starts 16-aligned (sp_agg_add_in's vector adds). */
_Static_assert(sizeof(struct sp_stats_chunk) % 16 == 0, "chunk header");
_Static_assert(sizeof(struct sp_agg_arena) % 16 == 0, "SP_AGG_ARENA");
_Static_assert(sizeof(struct sp_agg_query) % 16 == 0, "SP_AGG_QUERY");
_Static_assert(sizeof(struct sp_agg_hist) % 16 == 0, "SP_AGG_HIST");
_Static_assert(sizeof(struct sp_agg_loops) % 16 == 0, "SP_AGG_LOOPS");
_Static_assert(sizeof(struct sp_agg_errs) % 16 == 0, "SP_AGG_ERRS");
_Static_assert(offsetof(struct sp_agg_query, seg_cur) % 16 == 0, "segment aligned");

#endif /* SP_WIRE_H */
