/* kern_ebq_avx2 - the AVX2 kernels of the error-bounded quantiser (kern_ebq.h).
 *
 * Compiled with -mavx2 and called only on processors that have it. The
 * magnitudes are compared as integers (their bit patterns order them);
 * quantisation widens 8 floats to two vectors of 4 doubles and does the
 * scalar code's operations in the same order (division, round to nearest
 * even, product, rounding to float, filter, bound check), so the codes and
 * floats agree bit for bit. The last values go through the scalar kernels.
 */
#include <immintrin.h>

#include "kern_ebq.h"

/* compact8[m]: for an 8-lane mask m, the lanes whose bit is set, in
 * order, one per nibble (lane j's index in nibble j): the permutation that
 * packs them to the front. expand8[m]: for each lane j with its bit set,
 * how many set bits precede it (the inverse). */
static const uint32_t compact8[256] = {
	0x00000000,
	0x00000000,
	0x00000001,
	0x00000010,
	0x00000002,
	0x00000020,
	0x00000021,
	0x00000210,
	0x00000003,
	0x00000030,
	0x00000031,
	0x00000310,
	0x00000032,
	0x00000320,
	0x00000321,
	0x00003210,
	0x00000004,
	0x00000040,
	0x00000041,
	0x00000410,
	0x00000042,
	0x00000420,
	0x00000421,
	0x00004210,
	0x00000043,
	0x00000430,
	0x00000431,
	0x00004310,
	0x00000432,
	0x00004320,
	0x00004321,
	0x00043210,
	0x00000005,
	0x00000050,
	0x00000051,
	0x00000510,
	0x00000052,
	0x00000520,
	0x00000521,
	0x00005210,
	0x00000053,
	0x00000530,
	0x00000531,
	0x00005310,
	0x00000532,
	0x00005320,
	0x00005321,
	0x00053210,
	0x00000054,
	0x00000540,
	0x00000541,
	0x00005410,
	0x00000542,
	0x00005420,
	0x00005421,
	0x00054210,
	0x00000543,
	0x00005430,
	0x00005431,
	0x00054310,
	0x00005432,
	0x00054320,
	0x00054321,
	0x00543210,
	0x00000006,
	0x00000060,
	0x00000061,
	0x00000610,
	0x00000062,
	0x00000620,
	0x00000621,
	0x00006210,
	0x00000063,
	0x00000630,
	0x00000631,
	0x00006310,
	0x00000632,
	0x00006320,
	0x00006321,
	0x00063210,
	0x00000064,
	0x00000640,
	0x00000641,
	0x00006410,
	0x00000642,
	0x00006420,
	0x00006421,
	0x00064210,
	0x00000643,
	0x00006430,
	0x00006431,
	0x00064310,
	0x00006432,
	0x00064320,
	0x00064321,
	0x00643210,
	0x00000065,
	0x00000650,
	0x00000651,
	0x00006510,
	0x00000652,
	0x00006520,
	0x00006521,
	0x00065210,
	0x00000653,
	0x00006530,
	0x00006531,
	0x00065310,
	0x00006532,
	0x00065320,
	0x00065321,
	0x00653210,
	0x00000654,
	0x00006540,
	0x00006541,
	0x00065410,
	0x00006542,
	0x00065420,
	0x00065421,
	0x00654210,
	0x00006543,
	0x00065430,
	0x00065431,
	0x00654310,
	0x00065432,
	0x00654320,
	0x00654321,
	0x06543210,
	0x00000007,
	0x00000070,
	0x00000071,
	0x00000710,
	0x00000072,
	0x00000720,
	0x00000721,
	0x00007210,
	0x00000073,
	0x00000730,
	0x00000731,
	0x00007310,
	0x00000732,
	0x00007320,
	0x00007321,
	0x00073210,
	0x00000074,
	0x00000740,
	0x00000741,
	0x00007410,
	0x00000742,
	0x00007420,
	0x00007421,
	0x00074210,
	0x00000743,
	0x00007430,
	0x00007431,
	0x00074310,
	0x00007432,
	0x00074320,
	0x00074321,
	0x00743210,
	0x00000075,
	0x00000750,
	0x00000751,
	0x00007510,
	0x00000752,
	0x00007520,
	0x00007521,
	0x00075210,
	0x00000753,
	0x00007530,
	0x00007531,
	0x00075310,
	0x00007532,
	0x00075320,
	0x00075321,
	0x00753210,
	0x00000754,
	0x00007540,
	0x00007541,
	0x00075410,
	0x00007542,
	0x00075420,
	0x00075421,
	0x00754210,
	0x00007543,
	0x00075430,
	0x00075431,
	0x00754310,
	0x00075432,
	0x00754320,
	0x00754321,
	0x07543210,
	0x00000076,
	0x00000760,
	0x00000761,
	0x00007610,
	0x00000762,
	0x00007620,
	0x00007621,
	0x00076210,
	0x00000763,
	0x00007630,
	0x00007631,
	0x00076310,
	0x00007632,
	0x00076320,
	0x00076321,
	0x00763210,
	0x00000764,
	0x00007640,
	0x00007641,
	0x00076410,
	0x00007642,
	0x00076420,
	0x00076421,
	0x00764210,
	0x00007643,
	0x00076430,
	0x00076431,
	0x00764310,
	0x00076432,
	0x00764320,
	0x00764321,
	0x07643210,
	0x00000765,
	0x00007650,
	0x00007651,
	0x00076510,
	0x00007652,
	0x00076520,
	0x00076521,
	0x00765210,
	0x00007653,
	0x00076530,
	0x00076531,
	0x00765310,
	0x00076532,
	0x00765320,
	0x00765321,
	0x07653210,
	0x00007654,
	0x00076540,
	0x00076541,
	0x00765410,
	0x00076542,
	0x00765420,
	0x00765421,
	0x07654210,
	0x00076543,
	0x00765430,
	0x00765431,
	0x07654310,
	0x00765432,
	0x07654320,
	0x07654321,
	0x76543210,
};

static const uint32_t expand8[256] = {
	0x00000000,
	0x00000000,
	0x00000000,
	0x00000010,
	0x00000000,
	0x00000100,
	0x00000100,
	0x00000210,
	0x00000000,
	0x00001000,
	0x00001000,
	0x00002010,
	0x00001000,
	0x00002100,
	0x00002100,
	0x00003210,
	0x00000000,
	0x00010000,
	0x00010000,
	0x00020010,
	0x00010000,
	0x00020100,
	0x00020100,
	0x00030210,
	0x00010000,
	0x00021000,
	0x00021000,
	0x00032010,
	0x00021000,
	0x00032100,
	0x00032100,
	0x00043210,
	0x00000000,
	0x00100000,
	0x00100000,
	0x00200010,
	0x00100000,
	0x00200100,
	0x00200100,
	0x00300210,
	0x00100000,
	0x00201000,
	0x00201000,
	0x00302010,
	0x00201000,
	0x00302100,
	0x00302100,
	0x00403210,
	0x00100000,
	0x00210000,
	0x00210000,
	0x00320010,
	0x00210000,
	0x00320100,
	0x00320100,
	0x00430210,
	0x00210000,
	0x00321000,
	0x00321000,
	0x00432010,
	0x00321000,
	0x00432100,
	0x00432100,
	0x00543210,
	0x00000000,
	0x01000000,
	0x01000000,
	0x02000010,
	0x01000000,
	0x02000100,
	0x02000100,
	0x03000210,
	0x01000000,
	0x02001000,
	0x02001000,
	0x03002010,
	0x02001000,
	0x03002100,
	0x03002100,
	0x04003210,
	0x01000000,
	0x02010000,
	0x02010000,
	0x03020010,
	0x02010000,
	0x03020100,
	0x03020100,
	0x04030210,
	0x02010000,
	0x03021000,
	0x03021000,
	0x04032010,
	0x03021000,
	0x04032100,
	0x04032100,
	0x05043210,
	0x01000000,
	0x02100000,
	0x02100000,
	0x03200010,
	0x02100000,
	0x03200100,
	0x03200100,
	0x04300210,
	0x02100000,
	0x03201000,
	0x03201000,
	0x04302010,
	0x03201000,
	0x04302100,
	0x04302100,
	0x05403210,
	0x02100000,
	0x03210000,
	0x03210000,
	0x04320010,
	0x03210000,
	0x04320100,
	0x04320100,
	0x05430210,
	0x03210000,
	0x04321000,
	0x04321000,
	0x05432010,
	0x04321000,
	0x05432100,
	0x05432100,
	0x06543210,
	0x00000000,
	0x10000000,
	0x10000000,
	0x20000010,
	0x10000000,
	0x20000100,
	0x20000100,
	0x30000210,
	0x10000000,
	0x20001000,
	0x20001000,
	0x30002010,
	0x20001000,
	0x30002100,
	0x30002100,
	0x40003210,
	0x10000000,
	0x20010000,
	0x20010000,
	0x30020010,
	0x20010000,
	0x30020100,
	0x30020100,
	0x40030210,
	0x20010000,
	0x30021000,
	0x30021000,
	0x40032010,
	0x30021000,
	0x40032100,
	0x40032100,
	0x50043210,
	0x10000000,
	0x20100000,
	0x20100000,
	0x30200010,
	0x20100000,
	0x30200100,
	0x30200100,
	0x40300210,
	0x20100000,
	0x30201000,
	0x30201000,
	0x40302010,
	0x30201000,
	0x40302100,
	0x40302100,
	0x50403210,
	0x20100000,
	0x30210000,
	0x30210000,
	0x40320010,
	0x30210000,
	0x40320100,
	0x40320100,
	0x50430210,
	0x30210000,
	0x40321000,
	0x40321000,
	0x50432010,
	0x40321000,
	0x50432100,
	0x50432100,
	0x60543210,
	0x10000000,
	0x21000000,
	0x21000000,
	0x32000010,
	0x21000000,
	0x32000100,
	0x32000100,
	0x43000210,
	0x21000000,
	0x32001000,
	0x32001000,
	0x43002010,
	0x32001000,
	0x43002100,
	0x43002100,
	0x54003210,
	0x21000000,
	0x32010000,
	0x32010000,
	0x43020010,
	0x32010000,
	0x43020100,
	0x43020100,
	0x54030210,
	0x32010000,
	0x43021000,
	0x43021000,
	0x54032010,
	0x43021000,
	0x54032100,
	0x54032100,
	0x65043210,
	0x21000000,
	0x32100000,
	0x32100000,
	0x43200010,
	0x32100000,
	0x43200100,
	0x43200100,
	0x54300210,
	0x32100000,
	0x43201000,
	0x43201000,
	0x54302010,
	0x43201000,
	0x54302100,
	0x54302100,
	0x65403210,
	0x32100000,
	0x43210000,
	0x43210000,
	0x54320010,
	0x43210000,
	0x54320100,
	0x54320100,
	0x65430210,
	0x43210000,
	0x54321000,
	0x54321000,
	0x65432010,
	0x54321000,
	0x65432100,
	0x65432100,
	0x76543210,
};

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

/* The permutation of a nibble table entry. */
static inline __m256i
perm8(uint32_t t)
{
	return _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)t),
				    _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24,
					28)),
	    _mm256_set1_epi32(0xf));
}

static uint64_t
avx2_quant(const float *x, uint64_t n, double step, double eb, int32_t *q,
    uint8_t *mask, uint64_t *ret_codes)
{
	const __m256d vstep = _mm256_set1_pd(step);
	const __m256d veb = _mm256_set1_pd(eb);
	const __m256d dabs = _mm256_castsi256_pd(
	    _mm256_set1_epi64x(0x7fffffffffffffffLL));
	const __m256 vebf = _mm256_set1_ps((float)eb);
	const __m256 fabs_ = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
	__m256d bad = _mm256_setzero_pd();
	uint64_t i = 0, nz = 0, k = 0, tail, tk;

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
		__m256i c = _mm256_set_m128i(_mm256_cvtpd_epi32(q1),
		    _mm256_cvtpd_epi32(q0));

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
		if (mask != NULL) {
			unsigned m = 0xffu ^
			    (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(
				_mm256_cmpeq_epi32(c, _mm256_setzero_si256())));

			_mm256_storeu_si256((void *)(q + k),
			    _mm256_permutevar8x32_epi32(c, perm8(compact8[m])));
			k += (uint64_t)__builtin_popcount(m);
			mask[i / 8] = (uint8_t)m;
		} else {
			_mm256_storeu_si256((void *)(q + k), c);
			k += 8;
		}
	}
	tail = kern_ebq_quant_scalar(x + i, n - i, step, eb, q + k,
	    mask != NULL ? mask + i / 8 : NULL, &tk);
	*ret_codes = k + tk;
	if (_mm256_movemask_pd(bad) || tail == UINT64_MAX)
		return UINT64_MAX;
	return nz + tail;
}

void
kern_ebq_dequant_avx2(const int32_t *q, uint64_t n, double step, float ebf,
    float *out, const uint8_t *mask)
{
	const __m256d vstep = _mm256_set1_pd(step);
	const __m256 vebf = _mm256_set1_ps(ebf);
	const __m256 fabs_ = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
	const __m256i bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
	uint64_t i = 0, k = 0;

	for (; i + 8 <= n; i += 8) {
		__m256i c;
		__m256d d0, d1;
		__m256 v, zero;

		if (mask != NULL) {
			unsigned m = mask[i / 8];
			__m256i live = _mm256_cmpeq_epi32(
			    _mm256_and_si256(_mm256_set1_epi32((int)m), bit),
			    bit);

			c = _mm256_and_si256(live,
			    _mm256_permutevar8x32_epi32(_mm256_loadu_si256(
							    (const void *)(q +
								k)),
				perm8(expand8[m])));
			k += (uint64_t)__builtin_popcount(m);
		} else {
			c = _mm256_loadu_si256((const void *)(q + i));
		}
		d0 = _mm256_cvtepi32_pd(_mm256_castsi256_si128(c));
		d1 = _mm256_cvtepi32_pd(_mm256_extracti128_si256(c, 1));
		v = _mm256_set_m128(_mm256_cvtpd_ps(_mm256_mul_pd(d1, vstep)),
		    _mm256_cvtpd_ps(_mm256_mul_pd(d0, vstep)));
		zero = _mm256_cmp_ps(_mm256_and_ps(v, fabs_), vebf, _CMP_LE_OQ);
		_mm256_storeu_ps(out + i, _mm256_andnot_ps(zero, v));
	}
	if (mask != NULL)
		kern_ebq_dequant_scalar(q + k, n - i, step, ebf, out + i,
		    mask + i / 8);
	else
		kern_ebq_dequant_scalar(q + i, n - i, step, ebf, out + i, NULL);
}

const kern_ebq_fns kern_ebq_avx2 = {
	.amax = avx2_amax,
	.count = avx2_count,
	.quant = avx2_quant,
	.dequant = kern_ebq_dequant_avx2,
};
