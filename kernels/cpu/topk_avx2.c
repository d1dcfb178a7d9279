/* topk_avx2 - the AVX2 listing pass of top-k's sampled path (topk.h).
 * Compiled with -mavx2 and called only on processors that have it: 8
 * values per vector, as topk_avx512.c. AVX2 has no unsigned compare, but
 * the keys are below 2^31, so key >= L is the signed key > L - 1 (L - 1
 * is -1 when L is 0: every key). The same residual and list as the
 * scalar code bit for bit.
 */
#include <immintrin.h>

#include "topk.h"

uint64_t
kern_topk_list_avx2(const float *g, float *res, uint64_t n, uint32_t L,
    uint8_t *idx, uint8_t *val, uint64_t k)
{
	const __m256i abs = _mm256_set1_epi32(0x7fffffff);
	const __m256i knan = _mm256_set1_epi32(0x7f800001);
	const __m256i below = _mm256_set1_epi32((int)(L - 1));
	const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
	uint64_t i = 0, m = 0;

	for (; i < n; i += 8) {
		__m256i live = _mm256_cmpgt_epi32(_mm256_set1_epi32(
						      (int)(n - i < 8 ? n - i
								      : 8)),
		    lane);
		__m256 r = _mm256_add_ps(_mm256_maskload_ps(res + i, live),
		    _mm256_maskload_ps(g + i, live));
		__m256i
		    key = _mm256_min_epu32(_mm256_and_si256(_mm256_castps_si256(
								r),
					       abs),
			knan);
		unsigned hit = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(
		    _mm256_and_si256(live, _mm256_cmpgt_epi32(key, below))));

		_mm256_maskstore_ps(res + i, live, r);
		while (hit) {
			m = kern_topk_put(idx, val, k, m,
			    (uint32_t)(i + (unsigned)__builtin_ctz(hit)));
			hit &= hit - 1;
		}
	}
	return m;
}
