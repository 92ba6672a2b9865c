/* SPDX-License-Identifier: MIT */
/*
 * py_layouts.h - where CPython keeps what pyframes.c reads, per version.
 *
 * Every offset comes from offsetof() against that version's own headers,
 * internal ones included (Py_BUILD_CORE): scripts/py_layouts.sh prints
 * these rows from the headers pyenv installs for 3.8.18, 3.9.18, 3.10.13,
 * 3.11.7, 3.12.1 and 3.13.0 (and Debian's python3.11-dev 3.11.2, which
 * gives the 3.11 row). CPython keeps these internal layouts within a
 * minor version, so a row serves every 3.X.y; another minor version is
 * not read at all.
 */
#ifndef SP_PY_LAYOUTS_H
#define SP_PY_LAYOUTS_H

#include <stdint.h>

struct sp_py_layout {
	uint8_t major, minor;
	/* PyThreadState: its frame (<= 3.10: PyFrameObject *frame; 3.13:
	 * _PyInterpreterFrame *current_frame), or (3.11, 3.12, cframe 1)
	 * its _PyCFrame *cframe, whose current_frame is at cf_frame */
	uint16_t ts_frame;
	uint8_t cframe;
	uint8_t cf_frame;
	/* the frame: code object (f_code, 3.13 f_executable), the next outer
	 * frame (f_back, previous), the instruction (<= 3.10 int f_lasti;
	 * 3.11, 3.12 prev_instr; 3.13 instr_ptr), and the entry mark (3.11
	 * bool is_entry; 3.12+ char owner, FRAME_OWNED_BY_CSTACK = 3) */
	uint16_t f_code, f_back, f_instr, f_entry;
	/* PyCodeObject: co_filename, co_name, co_qualname (3.11+; else 0),
	 * int co_firstlineno, the line table (co_lnotab <= 3.9, co_linetable
	 * 3.10+), co_code_adaptive (3.11+: the instructions themselves) */
	uint16_t co_filename, co_name, co_qualname, co_firstlineno, co_table, co_code;
	/* str: PyASCIIObject.state, sizeof(PyASCIIObject) (where a compact
	 * ASCII string's bytes start), sizeof(PyCompactUnicodeObject) (where
	 * a compact non-ASCII one's start), masks of state's ascii, compact
	 * and kind bits */
	uint16_t s_state, s_ascii_size, s_compact_size;
	uint32_t m_ascii, m_compact, m_kind;
};

static const struct sp_py_layout sp_py_layouts[] = {
	/* 3.8.18 */
	{ 3, 8, 24, 0, 0, 32, 24, 104, 0, 104, 112, 0, 40, 120, 0, 32, 48, 72, 0x40, 0x20, 0x1c },
	/* 3.9.18 */
	{ 3, 9, 24, 0, 0, 32, 24, 104, 0, 104, 112, 0, 40, 120, 0, 32, 48, 72, 0x40, 0x20, 0x1c },
	/* 3.10.13 */
	{ 3, 10, 24, 0, 0, 32, 24, 96, 0, 104, 112, 0, 40, 120, 0, 32, 48, 72, 0x40, 0x20, 0x1c },
	/* 3.11.7 (and Debian's 3.11.2) */
	{
		3,   11, 56,  1,   8,  32, 48, 56,   68,   112, 120,
		128, 72, 136, 184, 32, 48, 72, 0x40, 0x20, 0x1c },
	/* 3.12.1 */
	{
		3,   12, 56,  1,   0,  0,  8,  56,   70,   112, 120,
		128, 68, 136, 192, 32, 40, 56, 0x40, 0x20, 0x1c },
	/* 3.13.0 */
	{
		3,   13, 72,  0,   0,  0,  8,  56,   70,   112, 120,
		128, 68, 136, 200, 32, 40, 56, 0x40, 0x20, 0x1c },
};

#endif /* SP_PY_LAYOUTS_H */
