/* kern_powersgd_avx512 - PowerSGD's elementwise passes with AVX-512
 * (kern_powersgd.h): one addition or subtraction per value, as the scalar loop,
 * so the results are the same bit for bit. Compiled with -mavx512f, called only
 * on processors that have it. */
#include <immintrin.h>
#include <stdint.h>

#include "kern_powersgd.h"

void
kern_psgd_ef_add_avx512(const float *g, float *e, uint64_t n)
{
	uint64_t i = 0;

	for (; i + 32 <= n; i += 32) {
		__m512 a = _mm512_add_ps(_mm512_loadu_ps(e + i),
		    _mm512_loadu_ps(g + i));
		__m512 b = _mm512_add_ps(_mm512_loadu_ps(e + i + 16),
		    _mm512_loadu_ps(g + i + 16));

		_mm512_storeu_ps(e + i, a);
		_mm512_storeu_ps(e + i + 16, b);
	}
	for (; i < n; i++)
		e[i] = e[i] + g[i];
}

void
kern_psgd_sub_avx512(const float *d, float *e, uint64_t n)
{
	uint64_t i = 0;

	for (; i + 32 <= n; i += 32) {
		__m512 a = _mm512_sub_ps(_mm512_loadu_ps(e + i),
		    _mm512_loadu_ps(d + i));
		__m512 b = _mm512_sub_ps(_mm512_loadu_ps(e + i + 16),
		    _mm512_loadu_ps(d + i + 16));

		_mm512_storeu_ps(e + i, a);
		_mm512_storeu_ps(e + i + 16, b);
	}
	for (; i < n; i++)
		e[i] = e[i] - d[i];
}
