/* SPDX-License-Identifier: MIT */
/*
 * collect.h - the collector: decoding of stream messages and of the
 * threads' shared rings (both untrusted input), and their aggregation
 * into the model of a recording (recording.h, in profile/: the structs
 * the profile writer reads) that grows with distinct queries, stacks and
 * sites, not with executions. It also receives one message (with the
 * ring descriptor it may carry) from a connected socket, so that the
 * descriptor rules are tested with the rest.
 *
 * Its files: collect.c (messages and records), collect-ring.c (rings),
 * collect-stats.c (shared statistics), collect-files.c (files left by
 * processes), collect-proc.c (how a process ended), collect-fold.c
 * (folding texts); collect-int.h is what they share.
 *
 * What it does not do: listening, accepting and polling (cmd-record.c),
 * symbols and the profile file (profile.c).
 */
#ifndef SP_COLLECT_H
#define SP_COLLECT_H

#include <stddef.h>
#include <stdint.h>

#include "recording.h"

/* The id a record of sql_id is counted under: its fold's when the agent
 * folded its text (c->text_folds) and the text did not come again, else
 * sql_id. */
uint64_t sp_coll_text_fold(struct sp_coll *c, uint64_t sql_id);

/* Read the files "unrep.*" left in dir by processes that could not
 * connect (each a sequence of messages: HELLO, copies of the statistics,
 * BYE), oldest first, and remove them. Returns how many were read. */
size_t sp_coll_read_unreported(struct sp_coll *c, const char *dir);
/* Read the files "gone.PID.INO.NS" left in dir by processes that exited
 * while no collector listened after theirs went away (an agent
 * restarting): HELLO, copies of their statistics, BYE; for each one
 * read whole, c->stats_added(c, PID, INO) (an earlier agent's part of
 * that image is taken off: its totals come again in full). Removes
 * them. Returns how many were read; *bad (may be NULL) how many were
 * refused. */
size_t sp_coll_read_gone(struct sp_coll *c, const char *dir, size_t *bad);
/* Apply the SQL records of one message of a texts file (the texts a
 * process still held when it exited, its collector too slow to take them
 * in its ring): validated as any message, and holding SQL records only.
 * No process is touched. Returns 0, or -1 as sp_coll_message. */
int sp_coll_texts(struct sp_coll *c, const uint8_t *msg, size_t len);
/* Read the files "texts.*" left in dir (messages for sp_coll_texts) and
 * remove them. Returns how many texts they held; *bad (may be NULL) gets
 * the number of files or messages refused. */
size_t sp_coll_read_texts(struct sp_coll *c, const char *dir, size_t *bad);

/*
 * Fold the SQL texts of c beyond the max most recently used (sp_sql.last)
 * into one record per fingerprint: every table keyed by a text (queries,
 * sites, callers, errors, plans, duplicates, events) has their entries
 * merged into the fold record's, whose text is the fingerprint and whose
 * sql_id is sp_coll_fold_id(fp_id); their texts are let go. Sums per
 * fingerprint stay exact; what is lost is the texts themselves. Texts
 * without a fingerprint (placeholders, "<...>") are never folded. For a
 * writer's copy of a collector: texts that come later are not mapped to
 * their fold. When map is not NULL (an hmap of uint64_t -> uint64_t,
 * initialized), each folded sql_id is added to it with its fold's id.
 * Returns the number of texts folded (c->texts_folded grows by it), or
 * (size_t)-1 when out of memory (c may then be half folded: its sums
 * stay exact, texts may remain).
 */
size_t sp_coll_fold_texts(struct sp_coll *c, size_t max, struct hmap *map);
uint64_t sp_coll_fold_id(uint64_t fp_id);

void sp_coll_init(struct sp_coll *c);
/* Frees everything, unmapping the rings without reading them. */
void sp_coll_free(struct sp_coll *c);
/* End of recording: merge every image's statistics still mapped (their
 * open N+1 loops closed) and let them go. */
void sp_coll_finish(struct sp_coll *c);
/*
 * Merge one image's statistics, map[0, size) as the writer left it, into
 * the queries: checks every chunk and record (lengths, types, the
 * addresses between records) and skips what fails, counted in the
 * process's stats_bad. Used on mappings and on copies alike. clock: the
 * image's (enum sp_clock).
 */
void sp_coll_stats_merge(struct sp_coll *c, uint32_t pid, const void *map, size_t size, int clock);
/* Map and keep the statistics memfd fd of pid's current image (consumed). */
int sp_coll_stats_add(struct sp_coll *c, uint32_t pid, int fd, const struct sp_rec_stats *rec);
/* Merge and free pid's statistics of images up to image (0 pid: all). */
void sp_coll_stats_retire(struct sp_coll *c, uint32_t pid, uint32_t image);
/* Validate the whole message, then apply it. Returns 0, or -1 with a
 * one-line reason in c->last_error, c->bad_messages counted and nothing
 * applied. peer_pid, when nonzero, is the pid the kernel vouches for
 * (SO_PEERCRED). The same as sp_coll_input with no descriptor: a RING
 * record makes the message bad. */
int sp_coll_message(struct sp_coll *c, const uint8_t *msg, size_t len, uint32_t peer_pid);
/*
 * A received message and the descriptor that came with it (fd, or -1).
 * fd is consumed in every case: it becomes a ring or statistics, or is
 * closed. A message with a descriptor must hold exactly one RING or STATS
 * record, and one without none; the ring must pass every check (see sp_coll_ring_add) before
 * anything of the message is applied. After applying:
 *  - a HELLO that starts a new image first reads and frees the rings of
 *    the pid's earlier image (its BYE never came);
 *  - SP_MSG_WAKE reads the pid's rings now;
 *  - a BYE reads the pid's rings one last time and frees them.
 * Returns 0, or -1 as sp_coll_message (fd closed, nothing applied).
 */
/*
 * The connection of the process pid ended (sp_coll_recv returned -1).
 * pidfd (taken over, -1: none) names the process: when it ended without
 * BYE (p->died), it is kept to learn how the process ended
 * (sp_coll_settle).
 */
void sp_coll_conn_end(struct sp_coll *c, uint32_t pid, int pidfd);
/* The wait status of the process pid, learned by its parent (record's
 * command): it exited (not died) or was killed. */
void sp_coll_exit_status(struct sp_coll *c, uint32_t pid, int status);
/*
 * For every process whose connection ended without BYE: how it ended,
 * when the kernel can tell (PIDFD_GET_INFO's exit code, Linux 6.15, once
 * it was reaped; before that, a zombie's /proc/PID/stat). One that exited
 * did not die: it ended by exit_group without libc's exit (a Go program,
 * a raw system call) or its goodbye could not be sent (a seccomp filter).
 * Processes still running keep their pidfd; at the end (final) every
 * pidfd is closed.
 */
void sp_coll_settle(struct sp_coll *c, int final);
int sp_coll_input(struct sp_coll *c, const uint8_t *msg, size_t len, uint32_t peer_pid, int fd);
/*
 * Receive one pending message from the SOCK_SEQPACKET connection sock of
 * process peer_pid into buf[cap] (recvmsg, MSG_DONTWAIT, close-on-exec
 * descriptors) and hand it to sp_coll_input. Every received descriptor is
 * closed unless it becomes a ring. Returns 1: a message was taken; 0:
 * nothing pending; -2: a bad message (oversized, control data truncated,
 * more than one descriptor, or refused by sp_coll_input), counted in
 * c->bad_messages and the process's bad_msgs, reason in c->last_error;
 * -1: end of the connection (or an error on it): the pid's rings were
 * read, and are kept (the process may reconnect).
 */
int sp_coll_recv(struct sp_coll *c, int sock, uint32_t peer_pid, uint8_t *buf, size_t cap);
/*
 * Take a mapped ring (map_len bytes at map, as announced by rec) into the
 * registry. Checks: size a power of two in [4096, 1 GiB], map_len at
 * least sizeof(struct sp_ring_shared) + size, and the shared header's
 * magic, size, pid and tid equal to the announcement and its tail a
 * multiple of 8. The mapping is owned from now on (unmapped on failure).
 * Returns 0, or -1 with the reason in c->last_error and counted in
 * c->bad_messages.
 */
int sp_coll_ring_add(struct sp_coll *c, void *map, size_t map_len, const struct sp_rec_ring *rec);
/*
 * Read what the writer published in r: [tail, head) as chunks of whole
 * records of at most SP_MSG_MAX bytes, each copied out of the shared
 * memory, validated and applied as a message of r->pid would be (PAD
 * skipped), then tail stored. Returns 0 (r stays), 1 (r is dead and read
 * to its last head: free it) or -1 (r is broken: head - tail beyond the
 * size, a bad or overlong record length, a record crossing the end, a
 * record refused by the message rules; counted in c->bad_messages,
 * c->rings_broken and the process's bad_msgs, reported on c->diag; stop
 * reading it: every later call returns -1 at once). The whole records
 * before a framing error are applied; a chunk that fails the message
 * rules is dropped whole, like a bad message. Does not free r.
 */
int sp_coll_ring_drain(struct sp_coll *c, struct sp_ring *r);
/* Read the rings of pid (0: all) and free those that returned 1 or -1
 * above. Returns the number of records applied. */
uint64_t sp_coll_rings_drain(struct sp_coll *c, uint32_t pid);
/* Process pid no longer exists (its connection ended without BYE, and
 * the pid is gone): read its rings one last time, free them, and merge
 * and free its statistics. A standing collector (the agent) calls it, so
 * that a crashed process's memory is let go. */
void sp_coll_proc_gone(struct sp_coll *c, uint32_t pid);
/* End of the recording: read every ring one last time and free them all. */
void sp_coll_rings_close(struct sp_coll *c);

#endif
