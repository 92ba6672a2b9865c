/* SPDX-License-Identifier: MIT */
/*
 * supervise.h - how `record` watches over its command: whether the
 * command could be started at all, and the signals the user sends while
 * it runs (forwarded; a repeated interrupt escalates to SIGTERM, then
 * SIGKILL, so that a command ignoring SIGINT can still be stopped and its
 * profile written), and the signal state every run of the command starts
 * with. The collecting loop itself is cmd-record.c's.
 */
#ifndef SP_SUPERVISE_H
#define SP_SUPERVISE_H

#include <sys/types.h>

/* First thing in record, before any disposition or the mask changes:
 * remember which signals record inherited ignored, and its signal mask,
 * for sp_sup_child. */
void sp_sup_init(void);

/* Before fork: a close-on-exec pipe the child reports a failed exec on.
 * Returns 0, or -1 (p is then {-1, -1} and failures go unnoticed). */
int sp_sup_exec_pipe(int p[2]);

/* In the child, after execvp failed with err: tell the parent, _exit(127). */
__attribute__((noreturn)) void sp_sup_exec_failed(int p[2], int err);

/* In the parent after fork: waits until the child has exec'd or failed.
 * Returns 0 when the command started (or p is {-1, -1}), else the errno
 * of its failed exec. Closes p. */
int sp_sup_exec_wait(int p[2]);

/* Right before fork: block the signals below until sp_sup_start (parent)
 * or sp_sup_child (child), so that none reaches a handler that does not
 * yet know the new pid, nor the child before its dispositions are reset. */
void sp_sup_prefork(void);

/* The command pid runs: from now on SIGINT, SIGTERM, SIGHUP and SIGQUIT
 * are forwarded to it, except a copy it already got: a signal the kernel
 * sent to our process group (the terminal's C-c and C-\, or a hangup),
 * when the command is still in that group. The second SIGINT sends
 * SIGTERM instead and every later one SIGKILL, each with a line on stderr
 * (the first one's line is left out when quiet). A signal record
 * inherited ignored (nohup, a background job) stays ignored by record
 * too. tty: stderr shows the live counter, so messages start on a fresh
 * line. Unblocks what sp_sup_prefork blocked. */
void sp_sup_start(pid_t pid, int quiet, int tty);

/* In the child, before exec (every run of --repeat): every signal gets
 * back the disposition record inherited (ignored, or the default: record's
 * own handlers and its ignored SIGPIPE are not passed on), and the signal
 * mask is record's inherited mask. Async-signal-safe. */
void sp_sup_child(void);

/* The command has exited (and been reaped): signals are no longer sent. */
void sp_sup_exited(void);

/* 1 when one of those signals arrived after the command exited: stop
 * waiting for its descendants (and do not start another run). Later ones
 * (while the profile is written) change nothing: it is written, and
 * record exits. */
int sp_sup_interrupted(void);

#endif
