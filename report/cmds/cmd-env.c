/* SPDX-License-Identifier: MIT */
/*
 * cmd-env.c - `sqlprof env`: print the environment a service needs to
 * report to `sqlprof agent`: LD_PRELOAD (libsqlprof.so, before whatever
 * the caller's LD_PRELOAD held) and SQLPROF_SOCK, as shell `export`
 * lines (eval "$(sqlprof env)") or as systemd `Environment=` lines for a
 * drop-in. It checks nothing about the agent: a service started before
 * its agent connects when the agent appears. Only the default socket of
 * a user without XDG_RUNTIME_DIR, /tmp/sqlprof-UID/sock, has its
 * directory made here (0700) or refused when it is not the user's own
 * 0700 directory: anyone may create a name in /tmp first.
 */
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmds.h"
#include "serve.h"
#include "util.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: sqlprof env [--socket PATH] [--systemd]\n"
		"\n"
		"Print the environment that makes a program report to `sqlprof agent`.\n"
		"\n"
		"      --socket PATH  the agent's socket (default: the agent's default,\n"
		"                     $XDG_RUNTIME_DIR/sqlprof/sock, /run/sqlprof/sock for root,\n"
		"                     else /tmp/sqlprof-UID/sock, its directory made 0700 here\n"
		"                     and refused unless it is yours and 0700)\n"
		"      --systemd      Environment= lines for a unit's drop-in, instead of\n"
		"                     export lines for a shell\n"
		"  -h, --help         this text\n"
		"\n"
		"examples:\n"
		"  eval \"$(sqlprof env)\"; ./server\n"
		"  sqlprof env --systemd --socket /run/sqlprof/sock >> /etc/systemd/system/app.service.d/sqlprof.conf\n");
}

/* s as one shell word: in single quotes, a quote as '\'' */
static void shell_word(const char *s)
{
	putchar('\'');
	for (; *s; s++) {
		if (*s == '\'')
			fputs("'\\''", stdout);
		else
			putchar(*s);
	}
	putchar('\'');
}

/* 1 when s can stand in a systemd Environment= assignment as it is
 * (no quotes, backslashes, '%' specifiers, spaces or control bytes). */
static int systemd_plain(const char *s)
{
	for (; *s; s++)
		if (*s <= ' ' || *s == '"' || *s == '\'' || *s == '\\' || *s == '%' || *s == 0x7f)
			return 0;
	return 1;
}

int cmd_env(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "socket", required_argument, NULL, 1 },
		{ "systemd", no_argument, NULL, 2 },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	char lib[PATH_MAX], sock[PATH_MAX];
	const char *s = NULL;
	int opt, systemd = 0, shared;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (opt) {
		case 1: s = optarg; break;
		case 2: systemd = 1; break;
		case 'h': usage(stdout); return SP_EXIT_OK;
		default: usage(stderr); return SP_EXIT_USAGE;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "sqlprof env: unexpected argument '%s'\n", argv[optind]);
		return SP_EXIT_USAGE;
	}
	if (s) {
		if (s[0] != '/' || snprintf(sock, sizeof(sock), "%s", s) >= (int)sizeof(sock)) {
			fprintf(stderr, "sqlprof env: --socket wants an absolute path\n");
			return SP_EXIT_USAGE;
		}
	} else if ((shared = sp_srv_default_socket(sock, sizeof(sock))) < 0) {
		fprintf(stderr, "sqlprof env: no default socket path; use --socket\n");
		return SP_EXIT_USAGE;
	} else if (shared) {
		/* /tmp/sqlprof-UID: made here, 0700, before any service
		 * connects, or refused when someone else made it first */
		char dir[PATH_MAX], err[PATH_MAX + 256];

		snprintf(dir, sizeof(dir), "%s", sock);
		*strrchr(dir, '/') = 0;
		if (sp_srv_own_dir(dir, 1, err, sizeof(err)) < 0) {
			fprintf(stderr, "sqlprof env: %s; " SP_SRV_DIR_ADVICE "\n", err);
			return SP_EXIT_USAGE;
		}
	}
	if (sp_srv_find_lib(lib, sizeof(lib)) < 0)
		return SP_EXIT_USAGE;
	if (sp_srv_preload_unsafe(lib)) {
		fprintf(stderr,
			"sqlprof env: cannot preload %s: LD_PRELOAD splits paths at spaces and "
			"colons; set SQLPROF_LIB to a path without them\n",
			lib);
		return SP_EXIT_USAGE;
	}
	if (systemd) {
		if (!systemd_plain(lib) || !systemd_plain(sock)) {
			fprintf(stderr,
				"sqlprof env: %s or %s needs quoting in a unit file; use "
				"simpler paths\n",
				lib, sock);
			return SP_EXIT_USAGE;
		}
		printf("Environment=LD_PRELOAD=%s\n", lib);
		printf("Environment=SQLPROF_SOCK=%s\n", sock);
		return SP_EXIT_OK;
	}
	/* before what the caller preloads already, as record does */
	printf("export LD_PRELOAD=");
	shell_word(lib);
	printf("${LD_PRELOAD:+:$LD_PRELOAD}\n");
	printf("export SQLPROF_SOCK=");
	shell_word(sock);
	putchar('\n');
	return SP_EXIT_OK;
}
