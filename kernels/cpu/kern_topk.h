/* kern_topk - top-k selection with error feedback (scalar; the sampled path's
 * listing pass also in AVX2 and AVX-512, kern_topk_avx2.c and
 * kern_topk_avx512.c, its sample and relisting pass in AVX2, the same bit
 * for bit).
 *
 * The kernels behind bellows/codec.h's top-k codec. Per value i,
 * r = res[i] + g[i] (float addition); the k values of largest |r| are
 * selected, the others stay in the residual (res[i] = r), the selected
 * ones leave it (res[i] = +0: r minus what decodes, r, exactly).
 *
 * Order: by magnitude, every NaN above +-Inf and all NaNs equal (torch's
 * topk also ranks NaN highest); -0 and +0 are equal. Ties at the k-th
 * magnitude are broken by index, lower index first, so the selection is a
 * function of the data alone. The selected values are written in
 * ascending index order.
 *
 * Selection, on 31-bit magnitude keys (float bits without the sign, NaN
 * clamped to one key above Inf); no sort and no memory beyond the stack
 * and the output, exact k:
 *  - sampled (n >= 4096, k <= n / 4): a threshold from 2048 evenly
 *    spaced values (gathered in AVX2; a heap over those above a pivot,
 *    or quickselect), set for about 1.5 k keys
 *    above it; one pass adds the gradient and lists the indices at or
 *    above it into the output's 2 k slots (a vector pass stores a
 *    vector's hits at once, compressed in index order); if fewer than k
 *    or more than 2 k were listed, one more pass lists against another
 *    key of the sample, its rank scaled by what the first pass found; if
 *    k to 2 k were listed, the k-th key is resolved over the list alone
 *    (quickselect on a copy of the keys up to 1024 listed; else one
 *    histogram over the octave above the threshold and, when the k-th
 *    key's bucket holds at most 1024 keys, quickselect over that bucket
 *    on the stack; else radix) and the list compacted in place; a
 *    threshold of 0 (a mostly zero input) lists the non-zero keys
 *    instead, and when at most k are, they are taken with the zeros of
 *    lowest index (sparse finish, below);
 *  - otherwise (small n, ties, a sample that missed twice): a radix
 *    select, up to three histogram passes of 11, 10 and 10 bits (the
 *    first into four interleaved copies, so that equal keys do not wait
 *    on one counter) over the values whose higher digits match the k-th
 *    key's (stopping once its bucket is taken whole, or, when that bucket
 *    holds at most k values, listing it and finishing over the list),
 *    then one compaction pass; when its first pass counts at most k
 *    non-zero keys, the sparse finish instead;
 *  - sparse finish: every non-zero key is taken, and the k - nnz zero
 *    keys (+-0) of lowest index, which is the tie rule at a k-th key of 0;
 *    one pass lists the non-zero indices, another, stopping once it has
 *    them, the zeros.
 * Both give the same selection: the sample only picks the path.
 */
#ifndef KERN_CPU_TOPK_H
#define KERN_CPU_TOPK_H

#include <stdint.h>
#include <string.h>

/* Encodes n values (n <= UINT32_MAX, k <= n): res[i] += g[i], selects k as
 * above, writes their indices (uint32, ascending) to idx and their values
 * (float32) to val, both host order, 4 bytes each, no alignment needed;
 * the selected residuals become +0. g and res do not overlap each other,
 * idx or val. */
void kern_topk_encode(const float *g, float *res, uint64_t n, uint64_t k,
    uint8_t *idx, uint8_t *val);

/* kern_topk_encode with the listing pass of `isa` (a kern_isa the
 * processor supports, or KERN_ISA_AUTO); the same results on every ISA. */
void kern_topk_encode_isa(int isa, const float *g, float *res, uint64_t n,
    uint64_t k, uint8_t *idx, uint8_t *val);

/* The sampled path's listing pass: for i < n, res[i] += g[i], and each i
 * whose key reaches L, in ascending order, is listed as by kern_topk_put
 * (2 k slots: idx, then val; a vector pass may also write slots beyond
 * its last hit, see kern_topk_slots); returns how many reached L (may
 * exceed 2 k). */
typedef uint64_t kern_topk_list_fn(const float *g, float *res, uint64_t n,
    uint32_t L, uint8_t *idx, uint8_t *val, uint64_t k);

/* Lists index i as the m-th (slot m of idx's k, then val's k; dropped
 * beyond 2 k); returns m + 1. */
static inline uint64_t
kern_topk_put(uint8_t *idx, uint8_t *val, uint64_t k, uint64_t m, uint32_t i)
{
	if (m < k)
		memcpy(idx + 4 * m, &i, 4);
	else if (m < 2 * k)
		memcpy(val + 4 * (m - k), &i, 4);
	return m + 1;
}

/* Where a vector listing pass may store w indices from the m-th on in one
 * store: slot m when slots m to m + w - 1 all lie in idx's k or all in
 * val's k, else NULL (list them one by one with kern_topk_put). What the
 * store leaves beyond its hits is overwritten by the next hits or never
 * read. */
static inline uint8_t *
kern_topk_slots(uint8_t *idx, uint8_t *val, uint64_t k, uint64_t m, uint64_t w)
{
	if (m + w <= k)
		return idx + 4 * m;
	if (m >= k && m + w <= 2 * k)
		return val + 4 * (m - k);
	return NULL;
}

/* The sampled path's second listing pass, when the first listed too few
 * or too many: each i < n whose key (res[i] as it is) reaches L, in
 * ascending order, listed as by kern_topk_list_fn; returns how many
 * reached L. */
typedef uint64_t kern_topk_relist_fn(const float *res, uint64_t n, uint32_t L,
    uint8_t *idx, uint8_t *val, uint64_t k);

/* The sampled path's sample: the keys of res[i] + g[i] (as the listing
 * pass adds them) for the KERN_TOPK_SAMPLE values i = s (n /
 * KERN_TOPK_SAMPLE), into sample; res and g unchanged. */
typedef void kern_topk_sample_fn(const float *g, const float *res, uint64_t n,
    uint32_t *sample);

kern_topk_list_fn kern_topk_list_scalar;
kern_topk_relist_fn kern_topk_relist_scalar;
kern_topk_sample_fn kern_topk_sample_scalar;
#ifdef KERN_HAVE_X86
kern_topk_list_fn kern_topk_list_avx2;
kern_topk_list_fn kern_topk_list_avx512;
kern_topk_relist_fn kern_topk_relist_avx2; /* also on AVX-512 processors */
kern_topk_sample_fn kern_topk_sample_avx2; /* also on AVX-512 processors */
#endif

/* Values sampled for the threshold, and the fewest values of the sampled
 * path. */
#define KERN_TOPK_SAMPLE      2048
#define KERN_TOPK_SAMPLED_MIN (2u * KERN_TOPK_SAMPLE)

/* The magnitude key of v: its bits without the sign, NaNs clamped to one
 * above +-Inf's. Keys compare as the magnitudes do. */
static inline uint32_t
kern_topk_key(float v)
{
	uint32_t b;

	memcpy(&b, &v, 4);
	b &= 0x7fffffffu;
	return b > 0x7f800001u ? 0x7f800001u : b;
}

/* The sampled path's threshold: from the keys of KERN_TOPK_SAMPLE values
 * evenly spaced over n (sample, reordered here), the key that about
 * 1.5 k of the n keys reach. */
uint32_t kern_topk_sample_threshold(uint32_t *sample, uint64_t n, uint64_t k);

/* Finishes the sampled path: the m (k <= m <= 2 k) indices listed in
 * idx's k slots then val's hold the top k of res; selects them exactly
 * (the tie rule above), writes their indices ascending to idx and their
 * values to val, and sets their residuals to +0. lo is the key the list
 * was made against, a hint only (any lo gives the same selection): with
 * it, one histogram over the octave above lo usually narrows the k-th
 * key to a bucket small enough to finish over alone, two passes over the
 * list where the radix select takes four. */
void kern_topk_resolve(float *res, uint64_t k, uint64_t m, uint8_t *idx,
    uint8_t *val, uint32_t lo);

/* Returns non-zero if the k indices at idx are strictly ascending and
 * below n (what kern_topk_decode needs). */
int kern_topk_valid(const uint8_t *idx, uint64_t k, uint64_t n);

/* Decodes k (index, value) pairs into out (n floats): out[i] = value for
 * the listed i and +0 elsewhere, or, when add is non-zero, out[i] =
 * out[i] + value for the listed i only. idx must be valid
 * (kern_topk_valid). */
void kern_topk_decode(const uint8_t *idx, const uint8_t *val, uint64_t k,
    uint64_t n, float *out, int add);

/* The most ranks kern_topk_average merges (its heap is on the stack). */
#define KERN_TOPK_MAX_RANKS 1024

/* Averages the k (index, value) pairs of each of `ranks` ranks (1 <=
 * ranks <= KERN_TOPK_MAX_RANKS; rank r's at idx[r] and val[r], each
 * valid by kern_topk_valid) into out (n floats): out[i] = (((+0 + v_a) +
 * v_b) + ...) / ranks over the ranks a < b < ... that list i, +0 where
 * none does. These are the bits of zeroing out, adding each rank's pairs
 * in rank order and dividing every value by ranks, in one write of out
 * and one merge of the lists instead of a pass per rank and a dense
 * division (where two NaNs meet, which one a sum keeps is the compiler's
 * choice: any NaN). */
void kern_topk_average(const uint8_t *const *idx, const uint8_t *const *val,
    uint32_t ranks, uint64_t k, uint64_t n, float *out);

#endif /* KERN_CPU_TOPK_H */
