#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# py_layouts.sh - print the rows of preload/py_layouts.h: the offsets of the
# CPython structures pyframes.c reads (thread state, frame, code object,
# str), computed with offsetof() against each installed CPython's own
# headers, internal ones included (Py_BUILD_CORE). Run it when adding a
# version; paste its output into the table.
#
# usage: scripts/py_layouts.sh [INCLUDE_DIR...]
#   default: every $(pyenv root)/versions/3.*/include/python3.* and
#   /usr/include/python3.*
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/off.c" <<'C'
#define Py_BUILD_CORE 1
#include <Python.h>
#include <frameobject.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#if PY_VERSION_HEX >= 0x030b0000
#include "internal/pycore_frame.h"
#endif
#include "internal/pycore_pystate.h"
static unsigned mask_of(void (*set)(PyASCIIObject *))
{
	PyASCIIObject o;
	unsigned w;

	memset(&o, 0, sizeof(o));
	set(&o);
	memcpy(&w, &o.state, 4);
	return w;
}
static void s_ascii(PyASCIIObject *o) { o->state.ascii = 1; }
static void s_compact(PyASCIIObject *o) { o->state.compact = 1; }
static void s_kind(PyASCIIObject *o) { o->state.kind = 7; }
int main(void)
{
	printf("\t/* %s */\n", PY_VERSION);
#if PY_VERSION_HEX >= 0x030d0000
	printf("\t{ 3, %d, %zu, 0, 0, ", PY_MINOR_VERSION, offsetof(PyThreadState, current_frame));
	printf("%zu, %zu, %zu, %zu, ", offsetof(_PyInterpreterFrame, f_executable),
	       offsetof(_PyInterpreterFrame, previous), offsetof(_PyInterpreterFrame, instr_ptr),
	       offsetof(_PyInterpreterFrame, owner));
#elif PY_VERSION_HEX >= 0x030b0000
	printf("\t{ 3, %d, %zu, 1, %zu, ", PY_MINOR_VERSION, offsetof(PyThreadState, cframe),
	       offsetof(_PyCFrame, current_frame));
#if PY_VERSION_HEX >= 0x030c0000
	printf("%zu, %zu, %zu, %zu, ", offsetof(_PyInterpreterFrame, f_code),
	       offsetof(_PyInterpreterFrame, previous), offsetof(_PyInterpreterFrame, prev_instr),
	       offsetof(_PyInterpreterFrame, owner));
#else
	printf("%zu, %zu, %zu, %zu, ", offsetof(_PyInterpreterFrame, f_code),
	       offsetof(_PyInterpreterFrame, previous), offsetof(_PyInterpreterFrame, prev_instr),
	       offsetof(_PyInterpreterFrame, is_entry));
#endif
#else
	printf("\t{ 3, %d, %zu, 0, 0, ", PY_MINOR_VERSION, offsetof(PyThreadState, frame));
	printf("%zu, %zu, %zu, 0, ", offsetof(PyFrameObject, f_code), offsetof(PyFrameObject, f_back),
	       offsetof(PyFrameObject, f_lasti));
#endif
#if PY_VERSION_HEX >= 0x030b0000
	printf("\n\t  %zu, %zu, %zu, %zu, %zu, %zu, ", offsetof(PyCodeObject, co_filename),
	       offsetof(PyCodeObject, co_name), offsetof(PyCodeObject, co_qualname),
	       offsetof(PyCodeObject, co_firstlineno), offsetof(PyCodeObject, co_linetable),
	       offsetof(PyCodeObject, co_code_adaptive));
#elif PY_VERSION_HEX >= 0x030a0000
	printf("\n\t  %zu, %zu, 0, %zu, %zu, 0, ", offsetof(PyCodeObject, co_filename),
	       offsetof(PyCodeObject, co_name), offsetof(PyCodeObject, co_firstlineno),
	       offsetof(PyCodeObject, co_linetable));
#else
	printf("\n\t  %zu, %zu, 0, %zu, %zu, 0, ", offsetof(PyCodeObject, co_filename),
	       offsetof(PyCodeObject, co_name), offsetof(PyCodeObject, co_firstlineno),
	       offsetof(PyCodeObject, co_lnotab));
#endif
	printf("%zu, %zu, %zu, 0x%x, 0x%x, 0x%x },\n", offsetof(PyASCIIObject, state),
	       sizeof(PyASCIIObject), sizeof(PyCompactUnicodeObject), mask_of(s_ascii),
	       mask_of(s_compact), mask_of(s_kind));
	return 0;
}
C
dirs=("$@")
if [ ${#dirs[@]} -eq 0 ]; then
	root=$(pyenv root 2>/dev/null || true)
	for d in "$root"/versions/3.*/include/python3.* /usr/include/python3.*; do
		[ -f "$d/internal/pycore_pystate.h" ] && dirs+=("$d")
	done
fi
for d in "${dirs[@]}"; do
	gcc -w -I"$d" -I"$d/internal" -o "$tmp/off" "$tmp/off.c" && "$tmp/off"
done
