/* SPDX-License-Identifier: MIT */
/*
 * pyline.c - see pyline.h. Each decoder follows CPython's own: 3.8/3.9
 * PyCode_Addr2Line over co_lnotab; 3.10 _PyCode_CheckLineNumber over
 * co_linetable (Objects/lnotab_notes.txt); 3.11+ the location table
 * (Objects/locations.md). Every read is bounded by len.
 */
#include "pyline.h"

/* co_lnotab: (byte increment, signed line increment) pairs. */
static int line_lnotab(const uint8_t *t, size_t len, int line, uint32_t off)
{
	uint32_t addr = 0;

	for (size_t i = 0; i + 1 < len; i += 2) {
		addr += t[i];
		if (addr > off)
			break;
		line += (int8_t)t[i + 1];
	}
	return line;
}

/* PEP 626: (byte length, signed line delta; -128: no line) pairs, the
 * ranges one after another from offset 0. */
static int line_pep626(const uint8_t *t, size_t len, int line, uint32_t off)
{
	uint32_t start = 0, end = 0;
	int cur = 0;

	for (size_t i = 0; i + 1 < len; i += 2) {
		start = end;
		end += t[i];
		if ((int8_t)t[i + 1] == -128) {
			cur = 0;
		} else {
			line += (int8_t)t[i + 1];
			cur = line;
		}
		if (start <= off && off < end)
			return cur;
	}
	return 0;
}

static int varint(const uint8_t *t, size_t len, size_t *i, uint32_t *out)
{
	uint32_t v, shift = 0;
	uint8_t b;

	if (*i >= len)
		return -1;
	b = t[(*i)++];
	v = b & 63;
	while (b & 64) {
		if (*i >= len || shift > 24)
			return -1;
		b = t[(*i)++];
		shift += 6;
		v |= (uint32_t)(b & 63) << shift;
	}
	*out = v;
	return 0;
}

static int svarint(const uint8_t *t, size_t len, size_t *i, int *out)
{
	uint32_t u;

	if (varint(t, len, i, &u) < 0)
		return -1;
	*out = (u & 1) ? -(int)(u >> 1) : (int)(u >> 1);
	return 0;
}

/* PEP 657: entries of 1..8 code units, each a first byte (bit 7 set,
 * code in bits 3..6, length - 1 in bits 0..2) and its operands. */
static int line_pep657(const uint8_t *t, size_t len, int line, uint32_t off)
{
	uint32_t unit = off / 2, addr = 0, skip;
	size_t i = 0;

	while (i < len) {
		uint8_t b = t[i++];
		int code = (b >> 3) & 15, delta = 0, has_line = 1;
		uint32_t n = (uint32_t)(b & 7) + 1;

		if (!(b & 128))
			return 0; /* not at an entry's start: a damaged table */
		if (code == 15) {
			has_line = 0;
		} else if (code == 14) {
			if (svarint(t, len, &i, &delta) < 0 || varint(t, len, &i, &skip) < 0 ||
			    varint(t, len, &i, &skip) < 0 || varint(t, len, &i, &skip) < 0)
				return 0;
		} else if (code == 13) {
			if (svarint(t, len, &i, &delta) < 0)
				return 0;
		} else if (code >= 10) {
			delta = code - 10;
			i += 2;
		} else {
			i += 1;
		}
		line += delta;
		if (unit < addr + n)
			return has_line ? line : 0;
		addr += n;
	}
	return 0;
}

int sp_py_line(int major, int minor, const uint8_t *table, size_t len, int firstlineno,
	       uint32_t off)
{
	if (major == 0) /* Ruby's and PHP's frames (SP_IF_*): the offset is the line */
		return off <= INT32_MAX ? (int)off : 0;
	if (major != 3)
		return 0;
	if (!table)
		len = 0; /* an empty table: 3.8's one-line lambda has one */
	if (minor <= 9)
		return line_lnotab(table, len, firstlineno, off);
	if (minor == 10)
		return line_pep626(table, len, firstlineno, off);
	return line_pep657(table, len, firstlineno, off);
}
