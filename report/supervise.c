/* SPDX-License-Identifier: MIT */
/*
 * supervise.c - `record`'s watch over its command (see supervise.h): the
 * exec-failure pipe and the signal handler. The handler only reads and
 * writes sig_atomic_t flags and calls kill(2) and write(2), both
 * async-signal-safe; its messages are assembled without stdio.
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

static void on_signal(int sig)
{
	int saved = errno;
	pid_t pid = (pid_t)target;

	if (pid <= 0) {
		if (!interrupted)
			say("interrupted: not waiting any longer for the command's descendants", -1, "");
		interrupted = 1;
		errno = saved;
		return;
	}
	if (sig == SIGINT) {
		interrupts++;
		if (interrupts == 1 && !quiet_first)
			say("interrupt passed on to the command (pid ", pid,
			    "); interrupt again to send it SIGTERM");
		else if (interrupts == 2) {
			sig = SIGTERM;
			say("second interrupt: sending SIGTERM to the command (pid ", pid,
			    "); interrupt again to send SIGKILL");
		} else if (interrupts > 2) {
			sig = SIGKILL;
			say("interrupt: sending SIGKILL to the command (pid ", pid, ")");
		}
	}
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
	sa.sa_handler = on_signal;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaddset(&sa.sa_mask, sigs[i]);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaction(sigs[i], &sa, have_orig ? NULL : &orig[i]);
	have_orig = 1;
}

void sp_sup_child(void)
{
	/* our handler would signal the previous run's (reaped) pid */
	for (size_t i = 0; have_orig && i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaction(sigs[i], &orig[i], NULL);
}

void sp_sup_exited(void)
{
	target = 0;
}

int sp_sup_interrupted(void)
{
	return interrupted;
}
