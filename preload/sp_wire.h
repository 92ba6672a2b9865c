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
 * checking its length (report/stream.c).
 */
#ifndef SP_WIRE_H
#define SP_WIRE_H

#include <stdint.h>

#define SP_WIRE_MAGIC 0x46525053u /* "SPRF" little-endian */
#define SP_WIRE_VERSION 2
#define SP_WIRE_MIN_VERSION 2 /* oldest version this reader accepts (2: EXEC_LITE
                               * counters in aCounter order) */

/* Largest message a writer may send and a reader must accept. */
#define SP_MSG_MAX (256 * 1024)
/* Longest SQL text sent; longer texts are cut and flagged. */
#define SP_SQL_MAX (16 * 1024)
/* Deepest stack sent. */
#define SP_STACK_MAX 256

/* Environment variables that carry the collector's address and options. */
#define SP_ENV_SOCK "SQLPROF_SOCK"

struct sp_msg_hdr {
	uint32_t magic;   /* SP_WIRE_MAGIC */
	uint16_t version; /* SP_WIRE_VERSION of the writer */
	uint16_t flags;   /* SP_MSG_* */
	uint32_t pid;
	uint32_t len;     /* whole message length, header included */
	uint64_t seq;     /* per-process message sequence number, from 1 */
	uint64_t lost;    /* records dropped by this process so far (cumulative) */
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
	/* One finished execution of a statement or of sqlite3_exec. */
	SP_REC_EXEC = 3,
	/* A statement was prepared (prepare churn, issue 6). */
	SP_REC_PREPARE = 4,
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
	/* A plain execution (not sampled, not nested, no error): the fields
	 * of SP_REC_EXEC that such an execution needs, in 64 bytes. */
	SP_REC_EXEC_LITE = 10,
	/* A thread's shared ring: the message carrying it has one descriptor
	 * (SCM_RIGHTS), a memfd holding a struct sp_ring_shared. */
	SP_REC_RING = 11,
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
	uint32_t clock; /* enum sp_clock */
	uint64_t start_mono_ns; /* CLOCK_MONOTONIC at process start */
	/* Calibration for SP_CLOCK_TSC: at tsc_ref the monotonic clock read
	 * mono_ref_ns (used to place events on the monotonic time line).
	 * Zero under SP_CLOCK_MONOTONIC. */
	uint64_t tsc_ref;
	uint64_t mono_ref_ns;
	uint64_t tsc_per_ns_x1e9; /* writer's own estimate of TSC ticks per ns * 1e9 */
	uint32_t sqlite_found; /* libsqlite3 resolved in this process */
	uint32_t exe_len;      /* bytes of executable path that follow */
	/* char exe[exe_len], padded to 8 */
};

/* HELLO flags */
#define SP_HELLO_RECONNECT 1 /* same process image, new connection (its
			      * descriptor was closed by the program) */

struct sp_rec_sql {
	struct sp_rec_hdr h; /* flags: SP_SQL_TRUNCATED */
	uint32_t pid, tid;
	uint64_t sql_id;  /* 64-bit hash of the full text */
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
	SP_EXEC_SAMPLED = 1 << 0, /* has a stack (stack_id != 0) */
	SP_EXEC_NESTED = 1 << 1,  /* ran inside another execution */
	SP_EXEC_ERROR = 1 << 2,   /* ended with an error result code */
	SP_EXEC_SLOW = 1 << 3,    /* crossed SQLPROF_SLOW_MS */
	SP_EXEC_FIRST = 1 << 4,   /* first execution of its SQL in the process */
	SP_EXEC_ABANDONED = 1 << 5, /* ended by reset/finalize before DONE */
	SP_EXEC_RANDOM = 1 << 7,  /* chosen by the random draw (SQLPROF_RATE);
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
	uint64_t seq;        /* per-thread execution number, from 1 */
	uint64_t parent_seq; /* seq of the enclosing execution, 0 if none */
	uint64_t db;         /* connection handle (opaque id) */
	uint64_t start;      /* first step, in the HELLO clock domain */
	uint64_t wall;       /* first step to end, clock units */
	uint64_t db_time;    /* time inside step calls (exec call), units */
	uint64_t nested_time; /* db_time of direct nested executions, units */
	uint64_t rows;       /* SQLITE_ROW results */
	uint64_t stack_id;   /* 0: no stack */
	uint32_t vm_steps, fullscan_steps, sorts, autoindex; /* deltas */
	int32_t rc;          /* final result code (extended) */
	uint16_t kind;       /* enum sp_exec_kind */
	uint16_t pad;
};

struct sp_rec_exec_lite {
	struct sp_rec_hdr h; /* flags: enum sp_exec_flags (ABANDONED only) */
	uint32_t pid, tid;
	uint64_t sql_id;
	uint64_t wall;
	uint64_t db_time;
	/* in the order of SQLite's own counters (SQLITE_STMTSTATUS_FULLSCAN_STEP
	 * .. VM_STEP), so the writer moves them as one 16-byte block */
	uint32_t fullscan_steps, sorts, autoindex, vm_steps;
	uint32_t rows;
	uint32_t pad;
};

struct sp_rec_prepare {
	struct sp_rec_hdr h;
	uint32_t pid, tid;
	uint64_t sql_id;
	uint64_t db;
	uint64_t time; /* time inside prepare, clock units */
};

struct sp_rec_stack {
	struct sp_rec_hdr h;
	uint32_t pid, tid;
	uint64_t stack_id;
	uint32_t depth; /* number of pcs that follow; pcs[0] is the leaf */
	uint32_t pad;
	/* uint64_t pcs[depth]: return addresses, leaf first; the profiler's
	 * own frames are already dropped */
};

struct sp_rec_module {
	struct sp_rec_hdr h;
	uint32_t pid, tid;
	uint64_t bias;    /* load bias (dlpi_addr) */
	uint64_t lo, hi;  /* lowest and highest address of executable segments */
	uint32_t generation; /* module map generation this entry belongs to */
	uint16_t build_id_len;
	uint16_t path_len;
	/* uint8_t build_id[build_id_len]; char path[path_len]; padded to 8 */
};

struct sp_rec_error {
	struct sp_rec_hdr h;
	uint32_t pid, tid;
	uint64_t exec_seq; /* EXEC record this error belongs to (same tid) */
	uint64_t sql_id;
	uint64_t stack_id; /* stack at the failing call, 0 if none */
	int32_t rc;
	uint32_t msg_len;
	/* char msg[msg_len], padded to 8 */
};

struct sp_rec_plan {
	struct sp_rec_hdr h;
	uint32_t pid, tid;
	uint64_t sql_id;
	uint64_t db;
	uint32_t text_len; /* plan lines, "id|parent|detail\n" each */
	uint32_t pad;
	/* char text[text_len], padded to 8 */
};

struct sp_rec_bye {
	struct sp_rec_hdr h;
	uint32_t pid, tid;
	uint64_t executions; /* executions ended in this process */
	uint64_t untracked;  /* executions of statements we could not track */
	uint64_t lost;       /* records dropped */
	int32_t status;      /* exit status if known, else -1 */
	uint32_t pad;
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
	uint32_t head;     /* writer: end of the committed records */
	uint32_t pad1[15];
	uint32_t tail;     /* reader: end of the consumed records */
	uint32_t pad2[15];
	uint8_t data[];    /* size bytes */
};

struct sp_rec_ring {
	struct sp_rec_hdr h;
	uint32_t pid, tid;
	uint32_t size;     /* as in sp_ring_shared: the memfd holds
			    * sizeof(struct sp_ring_shared) + size bytes */
	uint32_t pad;
};

#endif /* SP_WIRE_H */
