/* SPDX-License-Identifier: MIT */
/*
 * supervise.h - how `record` watches over its command: whether the
 * command could be started at all, and the signals the user sends while
 * it runs (forwarded; a repeated interrupt escalates to SIGTERM, then
 * SIGKILL, so that a command ignoring SIGINT can still be stopped and its
 * profile written). The collecting loop itself is cmd-record.c's.
 */
#ifndef SP_SUPERVISE_H
#define SP_SUPERVISE_H

#include <sys/types.h>

/* Before fork: a close-on-exec pipe the child reports a failed exec on.
 * Returns 0, or -1 (p is then {-1, -1} and failures go unnoticed). */
int sp_sup_exec_pipe(int p[2]);

/* In the child, after execvp failed with err: tell the parent, _exit(127). */
__attribute__((noreturn)) void sp_sup_exec_failed(int p[2], int err);

/* In the parent after fork: waits until the child has exec'd or failed.
 * Returns 0 when the command started (or p is {-1, -1}), else the errno
 * of its failed exec. Closes p. */
int sp_sup_exec_wait(int p[2]);

/* The command pid runs: from now on SIGINT, SIGTERM, SIGHUP and SIGQUIT
 * are forwarded to it; the second SIGINT sends SIGTERM instead and every
 * later one SIGKILL, each with a line on stderr (the first one's line is
 * left out when quiet). tty: stderr shows the live counter, so messages
 * start on a fresh line. */
void sp_sup_start(pid_t pid, int quiet, int tty);

/* In a child forked after sp_sup_start (the next run of --repeat), before
 * exec: give those signals back the dispositions record started with. */
void sp_sup_child(void);

/* The command has exited (and been reaped): signals are no longer sent. */
void sp_sup_exited(void);

/* 1 when one of those signals arrived after the command exited: stop
 * waiting for its descendants (and do not start another run). */
int sp_sup_interrupted(void);

#endif
