/* SPDX-License-Identifier: MIT */
/*
 * pyline.h - the source line of an instruction of a Python code object,
 * from the line table CPython keeps with it (sent by the preload as
 * SP_REC_PYCODE). Three formats: co_lnotab (3.8, 3.9), co_linetable of
 * PEP 626 (3.10), the location table of PEP 657 (3.11 to 3.13).
 */
#ifndef SP_PYLINE_H
#define SP_PYLINE_H

#include <stddef.h>
#include <stdint.h>

/* The line of the instruction at byte offset off, or 0 when the table
 * gives none (an instruction without a line, a table cut short, an
 * unknown version). major 0: a Ruby or PHP frame's record (minor SP_IF_*,
 * no table), whose offset is its line. */
int sp_py_line(int major, int minor, const uint8_t *table, size_t len, int firstlineno,
	       uint32_t off);

#endif /* SP_PYLINE_H */
