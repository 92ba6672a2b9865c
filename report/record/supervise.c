/* SPDX-License-Identifier: MIT */
/*
 * supervise.c - `record`'s watch over its command (see supervise.h): the
 * exec-failure pipe, the signal handler and the signal state each run of
 * the command starts with. The handler only reads and writes sig_atomic_t
 * flags and calls kill(2), write(2), getpgid(2), getpgrp(2), getsid(2)
 * and getpid(2), all async-signal-safe; its messages are assembled
 * without stdio.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "supervise.h"

static volatile sig_atomic_t target;      /* the command's pid while it runs, else 0 */
static volatile sig_atomic_t interrupts;  /* SIGINTs received while it ran */
static volatile sig_atomic_t interrupted; /* a signal after it exited */
static volatile sig_atomic_t quiet_first, fresh_line;

static const int sigs[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT };
static struct sigaction orig[sizeof(sigs) / sizeof(sigs[0])];
static int have_orig;

/* What record inherited (sp_sup_init): signals ignored, and the mask. */
static sigset_t inherited_ign, inherited_mask;
static int have_inherited;

void sp_sup_init(void)
{
	struct sigaction sa;

	sigemptyset(&inherited_ign);
	for (int s = 1; s < NSIG; s++)
		if (sigaction(s, NULL, &sa) == 0 && sa.sa_handler == SIG_IGN)
			sigaddset(&inherited_ign, s);
	sigprocmask(SIG_BLOCK, NULL, &inherited_mask);
	have_inherited = 1;
}

static sigset_t prefork_mask;
static int prefork_blocked;

void sp_sup_prefork(void)
{
	sigset_t set;

	sigemptyset(&set);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaddset(&set, sigs[i]);
	prefork_blocked = sigprocmask(SIG_BLOCK, &set, &prefork_mask) == 0;
}

int sp_sup_exec_pipe(int p[2])
{
	if (pipe2(p, O_CLOEXEC) == 0)
		return 0;
	p[0] = p[1] = -1;
	return -1;
}

void sp_sup_exec_failed(int p[2], int err)
{
	if (p[1] >= 0)
		(void)!write(p[1], &err, sizeof(err));
	_exit(127);
}

int sp_sup_exec_wait(int p[2])
{
	int err = 0;
	ssize_t n;

	if (p[0] < 0)
		return 0;
	close(p[1]);
	/* EOF when exec succeeds (close-on-exec) or the child dies first */
	do
		n = read(p[0], &err, sizeof(err));
	while (n < 0 && errno == EINTR);
	close(p[0]);
	p[0] = p[1] = -1;
	return n == (ssize_t)sizeof(err) && err > 0 ? err : 0;
}

/* write(2) "sqlprof: <a><pid><b>\n" to stderr; pid < 0: left out. */
static void say(const char *a, long pid, const char *b)
{
	char buf[256], num[24];
	size_t n = 0, k = 0, l;
	unsigned long v = pid < 0 ? 0 : (unsigned long)pid;

	if (fresh_line)
		buf[n++] = '\n';
	memcpy(buf + n, "sqlprof: ", 9);
	n += 9;
	l = strlen(a);
	if (l > 100)
		l = 100;
	memcpy(buf + n, a, l);
	n += l;
	if (pid >= 0) {
		do
			num[k++] = (char)('0' + v % 10);
		while ((v /= 10) && k < sizeof(num));
		while (k)
			buf[n++] = num[--k];
	}
	l = strlen(b);
	if (l > 100)
		l = 100;
	memcpy(buf + n, b, l);
	n += l;
	buf[n++] = '\n';
	(void)!write(2, buf, n);
}

/* 1 when the command pid already got the signal sig that si describes:
 * the kernel sent it (si_code SI_KERNEL: the terminal's C-c or C-\ to its
 * foreground process group, a hangup) to our process group, and pid is
 * still in it. kill(2) and sigqueue(2) (SI_USER, SI_QUEUE) reach record
 * alone; so does the hangup the kernel sends only to a session leader. */
static int already_got(int sig, const siginfo_t *si, pid_t pid)
{
	if (!si || si->si_code != SI_KERNEL)
		return 0;
	if (sig != SIGINT && sig != SIGQUIT && sig != SIGHUP)
		return 0;
	if (sig == SIGHUP && getsid(0) == getpid())
		return 0;
	return getpgid(pid) == getpgrp();
}

static void on_signal(int sig, siginfo_t *si, void *uc)
{
	int saved = errno, sent = 0;
	pid_t pid = (pid_t)target;

	(void)uc;
	if (pid <= 0) {
		if (!interrupted)
			say("interrupted: not waiting any longer for the command's descendants; "
			    "writing the profile",
			    -1, "");
		interrupted = 1;
		errno = saved;
		return;
	}
	if (sig == SIGINT) {
		interrupts++;
		if (interrupts == 1 && already_got(sig, si, pid))
			sent = 1;
		if (interrupts == 1 && !quiet_first)
			say(sent ? "interrupt: the command (pid "
				 : "interrupt passed on to the command (pid ",
			    pid,
			    sent ? ") got it too; interrupt again to send it SIGTERM"
				 : "); interrupt again to send it SIGTERM");
		else if (interrupts == 2) {
			sig = SIGTERM;
			say("second interrupt: sending SIGTERM to the command (pid ", pid,
			    "); interrupt again to send SIGKILL");
		} else if (interrupts > 2) {
			sig = SIGKILL;
			say("interrupt: sending SIGKILL to the command (pid ", pid, ")");
		}
	} else if (already_got(sig, si, pid)) {
		sent = 1;
	}
	if (!sent)
		kill(pid, sig);
	errno = saved;
}

void sp_sup_start(pid_t pid, int quiet, int tty)
{
	struct sigaction sa;

	quiet_first = quiet;
	fresh_line = tty;
	interrupts = 0;
	interrupted = 0;
	target = pid;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_signal;
	sa.sa_flags = SA_RESTART | SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaddset(&sa.sa_mask, sigs[i]);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
		if (!have_orig)
			sigaction(sigs[i], NULL, &orig[i]);
		/* nohup, or a background job: ignored, by us too */
		if (orig[i].sa_handler != SIG_IGN)
			sigaction(sigs[i], &sa, NULL);
	}
	have_orig = 1;
	/* what arrived since sp_sup_prefork is handled now, knowing pid */
	if (prefork_blocked)
		sigprocmask(SIG_SETMASK, &prefork_mask, NULL);
	prefork_blocked = 0;
}

void sp_sup_child(void)
{
	struct sigaction sa;

	if (!have_inherited)
		return;
	/* Exactly what record inherited, for every run: our handlers (which
	 * would signal a reaped pid until exec) and our ignored SIGPIPE
	 * must not reach the command; an ignore we inherited must. */
	memset(&sa, 0, sizeof(sa));
	sigemptyset(&sa.sa_mask);
	for (int s = 1; s < NSIG; s++) {
		if (s == SIGKILL || s == SIGSTOP)
			continue;
		sa.sa_handler = sigismember(&inherited_ign, s) == 1 ? SIG_IGN : SIG_DFL;
		sigaction(s, &sa, NULL); /* EINVAL for glibc's own: kept */
	}
	sigprocmask(SIG_SETMASK, &inherited_mask, NULL);
}

void sp_sup_exited(void)
{
	target = 0;
}

int sp_sup_interrupted(void)
{
	return interrupted;
}
