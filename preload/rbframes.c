/* SPDX-License-Identifier: MIT */
/*
 * rbframes.c - Ruby's frames (CRuby 2.3 and later; checked with Debian's
 * 3.1), through its public profiler API (ruby/debug.h), as stackprof
 * reads them: rb_profile_frames gives the calling thread's frames (an
 * iseq, or a C method's entry) and their lines, rb_profile_frame_path
 * and rb_profile_frame_label their file and name. They read the thread's
 * own control frames and allocate nothing. Called only on a thread Ruby
 * knows (ruby_native_thread_p); a C extension's query runs on it, GVL
 * held or not (nothing but the thread itself changes its frames).
 * Strings are read through the API (rb_string_value_ptr) after a check
 * that the value is a String.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "sp_preload.h"

typedef uintptr_t VALUE;

static int (*profile_frames)(int start, int limit, VALUE *buff, int *lines);
static VALUE (*frame_path)(VALUE frame);
static VALUE (*frame_label)(VALUE frame);
static VALUE (*frame_method_name)(VALUE frame);
static char *(*string_value_ptr)(volatile VALUE *ptr);
static int (*native_thread_p)(void);

/* A heap object of class String (T_STRING is 0x05 in every CRuby). */
static int is_string(VALUE v)
{
	return v && !(v & 7) && v != 8 /* nil */ && (*(const VALUE *)v & 0x1f) == 0x05;
}

static int rb_detect(struct sp_thread *t, uintptr_t *text)
{
	const char *desc = dlsym(RTLD_DEFAULT, "ruby_description");

	*(void **)&profile_frames = dlsym(RTLD_DEFAULT, "rb_profile_frames");
	if (!profile_frames)
		return 0;
	*(void **)&frame_path = dlsym(RTLD_DEFAULT, "rb_profile_frame_path");
	*(void **)&frame_label = dlsym(RTLD_DEFAULT, "rb_profile_frame_label");
	*(void **)&frame_method_name = dlsym(RTLD_DEFAULT, "rb_profile_frame_method_name");
	*(void **)&string_value_ptr = dlsym(RTLD_DEFAULT, "rb_string_value_ptr");
	*(void **)&native_thread_p = dlsym(RTLD_DEFAULT, "ruby_native_thread_p");
	if (!frame_path || !frame_label || !string_value_ptr || !native_thread_p) {
		sp_if_info(t, SP_PY_UNSUPPORTED, desc ? desc : "ruby");
		return -1;
	}
	*text = (uintptr_t)profile_frames;
	sp_if_info(t, SP_PY_ON, desc ? desc : "ruby");
	return 1;
}

static int rb_frames(struct sp_thread *t, uintptr_t *fr, uint32_t *line, int max)
{
	(void)t;
	int n, j = 0;

	if (!native_thread_p())
		return 0; /* a thread Ruby does not know: no frames of it */
	n = profile_frames(0, max, (VALUE *)fr, (int *)line);
	/* a frame of Ruby code without a line is the interpreter's own (the
	 * top frame under a script's <main>, which caller_locations does not
	 * show either); a C method's frame has no line and no file */
	for (int i = 0; i < n; i++)
		if (line[i] || !is_string(frame_path(fr[i]))) {
			fr[j] = fr[i];
			line[j++] = line[i];
		}
	return j;
}

static int rb_ident(uintptr_t fr, uintptr_t k[3])
{
	k[0] = fr;
	k[1] = frame_path(fr);
	k[2] = frame_label(fr);
	return 0;
}

/* A byte of a page not known to be mapped: 0 when readable. */
static int probe(const char *p)
{
	char c;
	struct iovec l = { &c, 1 }, r = { (void *)p, 1 };

	return process_vm_readv(getpid(), &l, 1, &r, 1, 0) == 1 ? 0 : -1;
}

/* A String's bytes up to its terminating NUL (CRuby keeps one after a
 * string's bytes; its length is not exported), at most max; the length,
 * or -1. A page past the first is probed before it is read. Only for a
 * function seen first: once per function. */
static int str(VALUE v, char *out, int max)
{
	const char *p;
	int n = 0;

	if (!is_string(v))
		return -1;
	p = string_value_ptr(&v);
	if (!p)
		return -1;
	for (; n < max; n++) {
		if (n && !((uintptr_t)(p + n) & 4095) && probe(p + n) < 0)
			break;
		if (!p[n])
			break;
		out[n] = p[n] == '\n' ? ' ' : p[n];
	}
	return n;
}

/* Name: the label: a method's name (a block's frame is named after its
 * method: Ruby 3 gives the method's entry for both), "<main>", "<top
 * (required)>"; a C method's frame has no file ("<cfunc>"). */
static int rb_describe(uintptr_t fr, const uintptr_t k[3], char *name, int *nl, char *file, int *fl)
{
	*nl = str(k[2], name, SP_IF_NAME_MAX);
	if (*nl < 0 && frame_method_name)
		*nl = str(frame_method_name(fr), name, SP_IF_NAME_MAX);
	if (*nl < 0) {
		memcpy(name, "??", 2);
		*nl = 2;
	}
	*fl = str(k[1], file, SP_IF_FILE_MAX);
	if (*fl < 0) {
		memcpy(file, "<cfunc>", 7);
		*fl = 7;
	}
	return 0;
}

const struct sp_if_lang sp_if_ruby = { SP_IF_RUBY, rb_detect, rb_frames, rb_ident, rb_describe };
