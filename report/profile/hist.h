/* SPDX-License-Identifier: MIT */
/*
 * hist.h - log-linear histograms of 64-bit values and nearest-rank
 * percentiles.
 *
 * A histogram splits each power of two into 64 equal sub-buckets, so any
 * value is known to within 1/64 of itself (values below 128 exactly).  Its
 * memory grows with the spread of the values (112 bytes for up to 6
 * buckets in use, beyond one 512-byte block per power of two actually
 * seen, at most 59), never with how many were added; count,
 * min, max and sum are kept exactly.  Adding is O(1).  A histogram is not
 * locked: the caller serializes access to one histogram.
 */
#ifndef SP_HIST_H
#define SP_HIST_H

#include <stddef.h>
#include <stdint.h>

struct sp_hist;

/* An empty histogram (NULL on ENOMEM); sp_hist_free(NULL) is a no-op. */
struct sp_hist *sp_hist_new(void);
void sp_hist_free(struct sp_hist *h);

/*
 * Record v (n times).  O(1); the first value in a new power of two
 * allocates its block, and if that fails the values are counted in
 * sp_hist_lost() instead and leave everything else unchanged.
 */
void sp_hist_add(struct sp_hist *h, uint64_t v);
void sp_hist_add_n(struct sp_hist *h, uint64_t v, uint64_t n);

/* Add everything recorded in src to dst (src is unchanged). */
void sp_hist_merge(struct sp_hist *dst, const struct sp_hist *src);

/* Number of values recorded; min, max and sum are exact, 0 when empty.
 * The sum saturates at UINT64_MAX instead of wrapping. */
uint64_t sp_hist_count(const struct sp_hist *h);
uint64_t sp_hist_min(const struct sp_hist *h);
uint64_t sp_hist_max(const struct sp_hist *h);
uint64_t sp_hist_sum(const struct sp_hist *h);

/* Values that could not be recorded because memory ran out (normally 0). */
uint64_t sp_hist_lost(const struct sp_hist *h);

/*
 * Nearest-rank percentile, q in [0,1] (clamped; NaN counts as 0): the value
 * of rank ceil(q*count), rank 1 for q = 0.  Rank 1 gives min and rank
 * count gives max exactly; any other rank gives the middle of its bucket,
 * clamped to [min,max], within 1/64 of the exact answer.  0 when empty.
 */
uint64_t sp_hist_quantile(const struct sp_hist *h, double q);

/*
 * Call fn(bucket_lo, count, arg) for each non-empty bucket in increasing
 * order.  Stops at and returns the first non-zero value fn returns; 0 when
 * all buckets were visited.
 */
int sp_hist_foreach(const struct sp_hist *h,
		    int (*fn)(uint64_t bucket_lo, uint64_t count, void *arg), void *arg);

/*
 * Rebuild from stored buckets: add count values to the bucket holding
 * bucket_lo.  Min, max and sum then only approximate the originals (the
 * bucket bounds and midpoints); call sp_hist_set_minmax_sum() afterwards
 * with the stored exact values to get identical quantiles.
 */
void sp_hist_add_bucket(struct sp_hist *h, uint64_t bucket_lo, uint64_t count);
void sp_hist_set_minmax_sum(struct sp_hist *h, uint64_t min, uint64_t max, uint64_t sum);
/* Take count values off the bucket holding lo (at most what it holds):
 * the inverse of sp_hist_add_bucket for the counts; min, max and sum are
 * left as they were (set them again if they matter). */
void sp_hist_sub_bucket(struct sp_hist *h, uint64_t lo, uint64_t count);

/*
 * Exact nearest-rank percentile of v[0..n) with the same rank rule as
 * sp_hist_quantile().  Sorts a private copy; v is unchanged.  Returns 0
 * when n is 0 or the copy cannot be allocated.
 */
uint64_t sp_percentile_exact(const uint64_t *v, size_t n, double q);

#endif /* SP_HIST_H */
