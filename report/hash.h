/* SPDX-License-Identifier: MIT */
/*
 * hash.h - FNV-1a, the one hash function of sqlprof: fingerprint ids
 * (sp_hash64, fingerprint.c: stored in profiles, so it never changes),
 * the hash maps' keys (sp_hash_bytes, util.c, with a final mix) and the
 * flame graphs' colours (the 32-bit variant, export-svg.c: the colours of
 * an SVG stay those of earlier releases). Header-only so that the preload,
 * which compiles fingerprint.c in but not util.c, has it too.
 */
#ifndef SP_HASH_H
#define SP_HASH_H

#include <stddef.h>
#include <stdint.h>

#define SP_FNV64_OFFSET 0xcbf29ce484222325ULL
#define SP_FNV64_PRIME 0x100000001b3ULL
#define SP_FNV32_OFFSET 2166136261u
#define SP_FNV32_PRIME 16777619u

/* h extended by data[0..len): start with SP_FNV64_OFFSET. */
static inline uint64_t sp_fnv1a64(uint64_t h, const void *data, size_t len)
{
	const unsigned char *p = data;

	while (len--)
		h = (h ^ *p++) * SP_FNV64_PRIME;
	return h;
}

/* The 32-bit FNV-1a of the NUL-terminated s. */
static inline uint32_t sp_fnv1a32_str(const char *s)
{
	uint32_t h = SP_FNV32_OFFSET;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * SP_FNV32_PRIME;
	return h;
}

#endif
