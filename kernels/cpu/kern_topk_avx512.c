/* kern_topk_avx512 - the AVX-512 listing pass of top-k's sampled path
 * (kern_topk.h). Compiled with -mavx512f and called only on processors that
 * have it: 16 values per vector, the residual update r = res + g and the
 * magnitude key (bits without the sign, NaNs clamped) as in the scalar
 * code, a mask of keys at or above the threshold, and the hit lanes'
 * indices compressed in ascending order and written with one unaligned
 * store (kern_topk_slots); whole vectors through plain loads and stores,
 * the last values through masked ones. The same residual and list as the
 * scalar code bit for bit.
 */
#include <immintrin.h>

#include "kern_topk.h"

/* Lists the hits (bit b: index i + b) from the m-th on; returns the new
 * count. */
static inline uint64_t
list16(uint8_t *idx, uint8_t *val, uint64_t k, uint64_t m, uint64_t i,
    __mmask16 hit)
{
	uint8_t *at = kern_topk_slots(idx, val, k, m, 16);
	unsigned h = hit;

	if (at != NULL) {
		const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7,
		    8, 9, 10, 11, 12, 13, 14, 15);
		__m512i ix = _mm512_add_epi32(_mm512_set1_epi32((int)i), lane);

		_mm512_storeu_si512((void *)at,
		    _mm512_maskz_compress_epi32(hit, ix));
		return m + (uint64_t)__builtin_popcount(h);
	}
	for (; h != 0; h &= h - 1)
		m = kern_topk_put(idx, val, k, m,
		    (uint32_t)(i + (unsigned)__builtin_ctz(h)));
	return m;
}

/* res + g with res as the first operand, as the scalar code: when both
 * are NaN the sum is the first operand's NaN, and a compiler may swap the
 * operands of an add intrinsic (to fold a load), so the order is pinned. */
static inline __m512
add_res_g(__m512 res, __m512 g)
{
	__m512 r;

	__asm__("vaddps %2, %1, %0" : "=v"(r) : "v"(res), "vm"(g));
	return r;
}

/* The hits among r's live lanes: keys at or above vl. */
static inline __mmask16
hits16(__m512 r, __m512i vl, __mmask16 live)
{
	const __m512i abs = _mm512_set1_epi32(0x7fffffff);
	const __m512i knan = _mm512_set1_epi32(0x7f800001);
	__m512i key = _mm512_min_epu32(_mm512_and_si512(_mm512_castps_si512(r),
					   abs),
	    knan);

	return _mm512_mask_cmpge_epu32_mask(live, key, vl);
}

uint64_t
kern_topk_list_avx512(const float *g, float *res, uint64_t n, uint32_t L,
    uint8_t *idx, uint8_t *val, uint64_t k)
{
	const __m512i vl = _mm512_set1_epi32((int)L);
	uint64_t i = 0, m = 0;

	for (; i + 16 <= n; i += 16) {
		__m512 r = add_res_g(_mm512_loadu_ps(res + i),
		    _mm512_loadu_ps(g + i));
		__mmask16 hit = hits16(r, vl, (__mmask16)0xffff);

		_mm512_storeu_ps(res + i, r);
		if (hit != 0)
			m = list16(idx, val, k, m, i, hit);
	}
	if (i < n) {
		__mmask16 live = (__mmask16)((1u << (n - i)) - 1);
		__m512 r = add_res_g(_mm512_maskz_loadu_ps(live, res + i),
		    _mm512_maskz_loadu_ps(live, g + i));
		__mmask16 hit = hits16(r, vl, live);

		_mm512_mask_storeu_ps(res + i, live, r);
		if (hit != 0)
			m = list16(idx, val, k, m, i, hit);
	}
	return m;
}
