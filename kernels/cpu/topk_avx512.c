/* topk_avx512 - the AVX-512 listing pass of top-k's sampled path
 * (topk.h). Compiled with -mavx512f and called only on processors that
 * have it: 16 values per vector, the residual update r = res + g and the
 * magnitude key (bits without the sign, NaNs clamped) as in the scalar
 * code, a mask of keys at or above the threshold, and the set bits listed
 * in ascending order; the last values through masked loads and stores. The same
 * residual and list as the scalar code bit for bit.
 */
#include <immintrin.h>

#include "topk.h"

uint64_t
kern_topk_list_avx512(const float *g, float *res, uint64_t n, uint32_t L,
    uint8_t *idx, uint8_t *val, uint64_t k)
{
	const __m512i abs = _mm512_set1_epi32(0x7fffffff);
	const __m512i knan = _mm512_set1_epi32(0x7f800001);
	const __m512i vl = _mm512_set1_epi32((int)L);
	uint64_t i = 0, m = 0;

	for (; i < n; i += 16) {
		__mmask16 live = n - i >= 16 ? (__mmask16)0xffff
					     : (__mmask16)((1u << (n - i)) - 1);
		__m512 r = _mm512_add_ps(_mm512_maskz_loadu_ps(live, res + i),
		    _mm512_maskz_loadu_ps(live, g + i));
		__m512i
		    key = _mm512_min_epu32(_mm512_and_si512(_mm512_castps_si512(
								r),
					       abs),
			knan);
		unsigned hit = _mm512_mask_cmpge_epu32_mask(live, key, vl);

		_mm512_mask_storeu_ps(res + i, live, r);
		while (hit) {
			m = kern_topk_put(idx, val, k, m,
			    (uint32_t)(i + (unsigned)__builtin_ctz(hit)));
			hit &= hit - 1;
		}
	}
	return m;
}
