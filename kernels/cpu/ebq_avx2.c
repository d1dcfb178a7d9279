/* ebq_avx2 - the AVX2 kernels of the error-bounded quantiser (ebq.h).
 *
 * Compiled with -mavx2 and called only on processors that have it. The
 * magnitudes are compared as integers (their bit patterns order them);
 * quantisation widens 8 floats to two vectors of 4 doubles and does the
 * scalar code's operations in the same order (division, round to nearest
 * even, product, rounding to float, filter, bound check), so the codes and
 * floats agree bit for bit. The last values go through the scalar kernels.
 */
#include <immintrin.h>

#include "ebq.h"

static uint32_t
avx2_amax(const float *x, uint64_t n)
{
	const __m256i abs = _mm256_set1_epi32(0x7fffffff);
	__m256i m0 = _mm256_setzero_si256(), m1 = m0;
	uint32_t lane[8], m;
	uint64_t i = 0;

	for (; i + 16 <= n; i += 16) {
		m0 = _mm256_max_epu32(m0,
		    _mm256_and_si256(_mm256_loadu_si256((const void *)(x + i)),
			abs));
		m1 = _mm256_max_epu32(m1,
		    _mm256_and_si256(_mm256_loadu_si256(
					 (const void *)(x + i + 8)),
			abs));
	}
	_mm256_storeu_si256((void *)lane, _mm256_max_epu32(m0, m1));
	m = kern_ebq_amax_scalar(x + i, n - i);
	for (int k = 0; k < 8; k++)
		m = lane[k] > m ? lane[k] : m;
	return m;
}

static uint64_t
avx2_count(const float *x, uint64_t n, uint32_t h)
{
	const __m256i abs = _mm256_set1_epi32(0x7fffffff);
	const __m256i vh = _mm256_set1_epi32((int32_t)h);
	uint64_t i = 0, c = 0;

	/* Magnitudes are below 2^31 and so is h (a float's pattern without
	 * its sign): the signed compare is the unsigned one. */
	for (; i + 16 <= n; i += 16) {
		__m256i a = _mm256_and_si256(_mm256_loadu_si256(
						 (const void *)(x + i)),
		    abs);
		__m256i b = _mm256_and_si256(_mm256_loadu_si256(
						 (const void *)(x + i + 8)),
		    abs);
		unsigned m = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(
				 _mm256_cmpgt_epi32(a, vh))) |
		    (unsigned)_mm256_movemask_ps(
			_mm256_castsi256_ps(_mm256_cmpgt_epi32(b, vh)))
			<< 8;

		c += (uint64_t)__builtin_popcount(m);
	}
	return c + kern_ebq_count_scalar(x + i, n - i, h);
}

static uint64_t
avx2_quant(const float *x, uint64_t n, double step, double eb, int32_t *q)
{
	const __m256d vstep = _mm256_set1_pd(step);
	const __m256d veb = _mm256_set1_pd(eb);
	const __m256d dabs = _mm256_castsi256_pd(
	    _mm256_set1_epi64x(0x7fffffffffffffffLL));
	const __m256 vebf = _mm256_set1_ps((float)eb);
	const __m256 fabs_ = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
	__m256d bad = _mm256_setzero_pd();
	uint64_t i = 0, nz = 0, tail;

	for (; i + 8 <= n; i += 8) {
		__m256d x0 = _mm256_cvtps_pd(_mm_loadu_ps(x + i));
		__m256d x1 = _mm256_cvtps_pd(_mm_loadu_ps(x + i + 4));
		__m256d q0 = _mm256_round_pd(_mm256_div_pd(x0, vstep),
		    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
		__m256d q1 = _mm256_round_pd(_mm256_div_pd(x1, vstep),
		    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
		__m256 rec = _mm256_set_m128(_mm256_cvtpd_ps(
						 _mm256_mul_pd(q1, vstep)),
		    _mm256_cvtpd_ps(_mm256_mul_pd(q0, vstep)));
		__m256 zero = _mm256_cmp_ps(_mm256_and_ps(rec, fabs_), vebf,
		    _CMP_LE_OQ);

		rec = _mm256_andnot_ps(zero, rec);
		nz += (uint64_t)__builtin_popcount((unsigned)_mm256_movemask_ps(
		    _mm256_cmp_ps(rec, _mm256_setzero_ps(), _CMP_NEQ_UQ)));
		bad = _mm256_or_pd(bad,
		    _mm256_cmp_pd(_mm256_and_pd(_mm256_sub_pd(x0,
						    _mm256_cvtps_pd(
							_mm256_castps256_ps128(
							    rec))),
				      dabs),
			veb, _CMP_GT_OQ));
		bad = _mm256_or_pd(bad,
		    _mm256_cmp_pd(
			_mm256_and_pd(_mm256_sub_pd(x1,
					  _mm256_cvtps_pd(
					      _mm256_extractf128_ps(rec, 1))),
			    dabs),
			veb, _CMP_GT_OQ));
		_mm_storeu_si128((void *)(q + i), _mm256_cvtpd_epi32(q0));
		_mm_storeu_si128((void *)(q + i + 4), _mm256_cvtpd_epi32(q1));
	}
	tail = kern_ebq_quant_scalar(x + i, n - i, step, eb, q + i);
	if (_mm256_movemask_pd(bad) || tail == UINT64_MAX)
		return UINT64_MAX;
	return nz + tail;
}

static void
avx2_dequant(const int32_t *q, uint64_t n, double step, float ebf, float *out)
{
	const __m256d vstep = _mm256_set1_pd(step);
	const __m256 vebf = _mm256_set1_ps(ebf);
	const __m256 fabs_ = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
	uint64_t i = 0;

	for (; i + 8 <= n; i += 8) {
		__m256d d0 = _mm256_cvtepi32_pd(
		    _mm_loadu_si128((const void *)(q + i)));
		__m256d d1 = _mm256_cvtepi32_pd(
		    _mm_loadu_si128((const void *)(q + i + 4)));
		__m256 v = _mm256_set_m128(_mm256_cvtpd_ps(
					       _mm256_mul_pd(d1, vstep)),
		    _mm256_cvtpd_ps(_mm256_mul_pd(d0, vstep)));
		__m256 zero = _mm256_cmp_ps(_mm256_and_ps(v, fabs_), vebf,
		    _CMP_LE_OQ);

		_mm256_storeu_ps(out + i, _mm256_andnot_ps(zero, v));
	}
	kern_ebq_dequant_scalar(q + i, n - i, step, ebf, out + i);
}

const kern_ebq_fns kern_ebq_avx2 = {
	.amax = avx2_amax,
	.count = avx2_count,
	.quant = avx2_quant,
	.dequant = avx2_dequant,
};
