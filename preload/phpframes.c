/* SPDX-License-Identifier: MIT */
/*
 * phpframes.c - PHP's frames (the non-ZTS engine of PHP 8.2, Zend Engine
 * 4.2: Debian 12's php8.2 CLI, FPM, CGI and Apache module). The engine
 * exports executor_globals; its current_execute_data is the innermost
 * frame (zend_execute_data), each links the next outer one
 * (prev_execute_data) and holds its function (func: a user function's
 * op_array has its file, opline the line being run) - what
 * debug_backtrace() walks. The offsets come from offsetof() against
 * php8.2-dev's headers (a table per engine version; another version is
 * said once, SP_REC_PYINFO, and gets native frames only).
 *
 * Non-ZTS PHP runs scripts on one thread, the process's first: another
 * thread's query gets no PHP frames. The first PHP_CHECKS stacks are read
 * through process_vm_readv (sp_if_rd: an unmapped address fails instead
 * of faulting) and checked against the engine's own answer,
 * zend_get_executed_filename() and zend_get_executed_lineno() (the
 * innermost user frame's file and line); a mismatch turns PHP frames off
 * for the process, after the checks plain loads of checked addresses.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sp_preload.h"

struct php_layout {
	int major, minor;      /* Zend Engine version (PHP 8.2: 4.2) */
	uint16_t eg_ex;        /* executor_globals.current_execute_data */
	uint16_t ex_opline;    /* zend_execute_data.opline */
	uint16_t ex_func;      /* .func */
	uint16_t ex_prev;      /* .prev_execute_data */
	uint16_t op_lineno;    /* zend_op.lineno (uint32_t) */
	uint16_t fn_name;      /* zend_function.common.function_name (type: byte 0) */
	uint16_t fn_scope;     /* .common.scope */
	uint16_t fn_filename;  /* .op_array.filename */
	uint16_t ce_name;      /* zend_class_entry.name */
	uint16_t s_len, s_val; /* zend_string.len, .val */
};

static const struct php_layout layouts[] = {
	/* php8.2-dev 8.2.36 (Debian 12) */
	{ 4, 2, 488, 0, 24, 48, 24, 8, 16, 152, 8, 16, 24 },
};

#define USER_FUNCTION 2
#define INTERNAL_FUNCTION 1
/* eval'd code and `php -r`'s: an op_array as a user function's */
#define EVAL_CODE 4
#define IS_USER(type) ((type) == USER_FUNCTION || (type) == EVAL_CODE)
#define PHP_CHECKS 4

static const struct php_layout *L;
static uintptr_t eg;
static const char *(*executed_filename)(void);
static uint32_t (*executed_lineno)(void);
static atomic_int checked, broken;

static uintptr_t rd_ptr(uintptr_t a)
{
	uintptr_t v = 0;

	return sp_if_rd(a, &v, sizeof(v)) == 0 ? v : 0;
}

static int php_detect(struct sp_thread *t, uintptr_t *text)
{
	char *(*zend_version)(void);
	char what[160];
	int major = 0, minor = 0;

	*(void **)&zend_version = dlsym(RTLD_DEFAULT, "get_zend_version");
	if (!zend_version)
		return 0;
	eg = (uintptr_t)dlsym(RTLD_DEFAULT, "executor_globals");
	*(void **)&executed_filename = dlsym(RTLD_DEFAULT, "zend_get_executed_filename");
	*(void **)&executed_lineno = dlsym(RTLD_DEFAULT, "zend_get_executed_lineno");
	if (sscanf(zend_version(), "Zend Engine v%d.%d", &major, &minor) != 2)
		major = minor = 0;
	snprintf(what, sizeof(what), "PHP (Zend Engine %d.%d%s)", major, minor,
		 eg ? "" : ", thread-safe build");
	L = NULL;
	for (size_t i = 0; i < sizeof(layouts) / sizeof(layouts[0]); i++)
		if (layouts[i].major == major && layouts[i].minor == minor)
			L = &layouts[i];
	/* SQLPROF_PHP_EG_OFFSET=N reads current_execute_data at offset N of
	 * executor_globals (the tests use it to check that a wrong layout is
	 * caught and harms nothing) */
	if (L && getenv("SQLPROF_PHP_EG_OFFSET")) {
		static struct php_layout skewed;

		skewed = *L;
		skewed.eg_ex = (uint16_t)strtoul(getenv("SQLPROF_PHP_EG_OFFSET"), NULL, 0);
		L = &skewed;
	}
	if (!L || !eg || !executed_filename || !executed_lineno) {
		sp_if_info(t, SP_PY_UNSUPPORTED, what);
		return -1;
	}
	*text = (uintptr_t)executed_lineno;
	sp_if_info(t, SP_PY_ON, what);
	return 1;
}

/* A zend_string's text, at most max; its length, or -1. */
static int zstr(uintptr_t s, char *out, int max)
{
	uint64_t len = 0;
	int n;

	if (!s || (s & 7) || sp_if_rd(s + L->s_len, &len, sizeof(len)) < 0 || len > (1u << 30))
		return -1;
	n = len < (uint64_t)max ? (int)len : max;
	if (n && sp_if_rd(s + L->s_val, out, (size_t)n) < 0)
		return -1;
	for (int i = 0; i < n; i++)
		if (out[i] == '\n' || out[i] == '\0')
			out[i] = ' ';
	return n;
}

/* The check of a stack read through process_vm_readv: its innermost user
 * frame is the engine's. */
static int check(uintptr_t func, uint32_t line)
{
	const char *want = executed_filename();
	char file[256];
	int n = zstr(rd_ptr(func + L->fn_filename), file, sizeof(file));

	return n >= 0 && (size_t)n == strnlen(want, sizeof(file)) &&
	       !memcmp(file, want, (size_t)n) && line == executed_lineno();
}

static int php_frames(struct sp_thread *t, uintptr_t *fr, uint32_t *line, int max)
{
	uintptr_t ex;
	int n = 0, user = -1;

	if (atomic_load_explicit(&broken, memory_order_relaxed) || t->tid != sp_my_pid())
		return 0;
	ex = rd_ptr(eg + L->eg_ex);
	while (ex && n < max) {
		uintptr_t w[8], func;
		uint8_t type = 0;
		uint32_t ln = 0;

		if ((ex & 7) || sp_if_rd(ex, w, sizeof(w)) < 0)
			break;
		func = w[L->ex_func / 8];
		if (func && !(func & 7) && sp_if_rd(func, &type, 1) == 0 &&
		    (IS_USER(type) || type == INTERNAL_FUNCTION)) {
			uintptr_t op = w[L->ex_opline / 8];

			if (IS_USER(type) && op && sp_if_rd(op + L->op_lineno, &ln, 4) < 0)
				ln = 0;
			if (IS_USER(type) && user < 0)
				user = n;
			fr[n] = func;
			line[n] = ln;
			n++;
		}
		ex = w[L->ex_prev / 8];
	}
	if (!atomic_load_explicit(&sp_if_direct, memory_order_relaxed)) {
		/* no user frame where the engine has one: not its layout */
		if (user < 0 && strcmp(executed_filename(), "[no active file]"))
			user = -2;
		else if (user < 0)
			return 0; /* nothing to check these frames against: none */
		if (user == -2 || !check(fr[user], line[user])) {
			atomic_store(&broken, 1);
			sp_if_info(t, SP_PY_UNREADABLE, "PHP frames do not match the engine's");
			return 0;
		}
		if (atomic_fetch_add(&checked, 1) + 1 >= PHP_CHECKS)
			atomic_store(&sp_if_direct, 1);
	}
	return n;
}

/* fr: the frame's function (php_frames checked its type) */
static int php_ident(uintptr_t func, uintptr_t k[3])
{
	uintptr_t h[3]; /* type, function_name, scope */

	if (sp_if_rd(func, h, sizeof(h)) < 0)
		return -1;
	k[0] = func;
	k[1] = h[L->fn_name / 8];
	k[2] = IS_USER((uint8_t)h[0]) ? rd_ptr(func + L->fn_filename) : h[L->fn_scope / 8];
	return 0;
}

/* Name: Class::function, function, or {main} (a file's own code);
 * file: the user function's, "<internal>" for the engine's and the
 * extensions' functions. */
static int php_describe(uintptr_t func, const uintptr_t k[3], char *name, int *nl, char *file,
			int *fl)
{
	uintptr_t scope = rd_ptr(k[0] + L->fn_scope);
	uint8_t type = 0;
	int n = 0, m;

	(void)func;
	if (sp_if_rd(k[0], &type, 1) < 0)
		return -1;
	if (scope && (m = zstr(rd_ptr(scope + L->ce_name), name, SP_IF_NAME_MAX - 2)) > 0) {
		memcpy(name + m, "::", 2);
		n = m + 2;
	}
	m = k[1] ? zstr(k[1], name + n, SP_IF_NAME_MAX - n) : -1;
	if (m < 0) {
		memcpy(name + n, "{main}", 6);
		m = 6;
	}
	*nl = n + m;
	if (IS_USER(type)) {
		*fl = zstr(k[2], file, SP_IF_FILE_MAX);
		if (*fl < 0)
			return -1;
	} else {
		memcpy(file, "<internal>", 10);
		*fl = 10;
	}
	return 0;
}

const struct sp_if_lang sp_if_php = { SP_IF_PHP, php_detect, php_frames, php_ident, php_describe };
