/* kern_powersgd_avx2 - PowerSGD's elementwise passes with AVX2
 * (kern_powersgd.h): one addition or subtraction per value, as the scalar loop,
 * so the results are the same bit for bit. Compiled with -mavx2, called only on
 * processors that have it. */
#include <immintrin.h>
#include <stdint.h>

#include "kern_powersgd.h"

void
kern_psgd_ef_add_avx2(const float *g, float *e, uint64_t n)
{
	uint64_t i = 0;

	for (; i + 16 <= n; i += 16) {
		__m256 a = _mm256_add_ps(_mm256_loadu_ps(e + i),
		    _mm256_loadu_ps(g + i));
		__m256 b = _mm256_add_ps(_mm256_loadu_ps(e + i + 8),
		    _mm256_loadu_ps(g + i + 8));

		_mm256_storeu_ps(e + i, a);
		_mm256_storeu_ps(e + i + 8, b);
	}
	for (; i < n; i++)
		e[i] = e[i] + g[i];
}

void
kern_psgd_sub_avx2(const float *d, float *e, uint64_t n)
{
	uint64_t i = 0;

	for (; i + 16 <= n; i += 16) {
		__m256 a = _mm256_sub_ps(_mm256_loadu_ps(e + i),
		    _mm256_loadu_ps(d + i));
		__m256 b = _mm256_sub_ps(_mm256_loadu_ps(e + i + 8),
		    _mm256_loadu_ps(d + i + 8));

		_mm256_storeu_ps(e + i, a);
		_mm256_storeu_ps(e + i + 8, b);
	}
	for (; i < n; i++)
		e[i] = e[i] - d[i];
}
