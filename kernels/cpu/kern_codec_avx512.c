/* kern_codec_avx512 - the AVX-512 1-bit and 2-bit quantisers (kern_codec.h).
 *
 * Compiled with -mavx512f -mavx512bw and called only on processors that
 * have them. Comparisons give mask registers directly: 16 values per
 * vector (32 per 1-bit round), 2-bit codes through kern_codec_avx2.c's table,
 * the same results as the scalar code bit for bit; the last values go through
 * the scalar kernels.
 */
#include <immintrin.h>
#include <string.h>

#include "kern_codec.h"

/* The 2-bit codes of 8 values from their masks: bit i of pos (r >= t)
 * and of any (r >= t or r <= -t) make code i, pos the low bit. */
static inline uint16_t
codes8(unsigned pos, unsigned any)
{
	return (uint16_t)(kern_codec_spread8[pos & 0xff] |
	    kern_codec_spread8[any & 0xff] << 1);
}

static void
avx512_enc1(const float *g, float *res, uint64_t n, float t, uint8_t *out)
{
	const __m512 vt = _mm512_set1_ps(t);
	const __m512 one = _mm512_set1_ps(1.0f);
	const __m512 mone = _mm512_set1_ps(-1.0f);
	uint64_t i = 0;

	for (; i + 32 <= n; i += 32) {
		uint32_t word = 0;

		for (int k = 0; k < 2; k++) {
			__m512 r = _mm512_add_ps(_mm512_loadu_ps(
						     res + i + 16 * k),
			    _mm512_loadu_ps(g + i + 16 * k));
			__mmask16 m = _mm512_cmp_ps_mask(r, vt, _CMP_GT_OQ);

			r = _mm512_add_ps(r,
			    _mm512_mask_blend_ps(m, one, mone));
			_mm512_storeu_ps(res + i + 16 * k, r);
			word |= (uint32_t)m << (16 * k);
		}
		memcpy(out + i / 8, &word, 4);
	}
	kern_codec_enc1_scalar(g + i, res + i, n - i, t, out + i / 8);
	kern_codec_pad(1, n, out);
}

/* The residual update as one addition r + sel, as in kern_codec_avx2.c. */
static void
avx512_enc2(const float *g, float *res, uint64_t n, float t, uint8_t *out)
{
	const __m512 vt = _mm512_set1_ps(t);
	const __m512 vnt = _mm512_set1_ps(-t);
	const __m512 zero = _mm512_setzero_ps();
	uint64_t i = 0;

	for (; i + 16 <= n; i += 16) {
		__m512 r = _mm512_add_ps(_mm512_loadu_ps(res + i),
		    _mm512_loadu_ps(g + i));
		__mmask16 pos = _mm512_cmp_ps_mask(r, vt, _CMP_GE_OQ);
		__mmask16 neg = _mm512_cmp_ps_mask(r, vnt, _CMP_LE_OQ);
		__m512 sel = _mm512_mask_blend_ps(pos,
		    _mm512_mask_blend_ps(neg, zero, vt), vnt);
		unsigned any = (unsigned)(pos | neg);
		uint32_t code = (uint32_t)codes8(pos, any) |
		    (uint32_t)codes8((unsigned)pos >> 8, any >> 8) << 16;

		_mm512_storeu_ps(res + i, _mm512_add_ps(r, sel));
		memcpy(out + i / 4, &code, 4);
	}
	kern_codec_enc2_scalar(g + i, res + i, n - i, t, out + i / 4);
	kern_codec_pad(2, n, out);
}

static void
avx512_dec1(const uint8_t *in, uint64_t n, float t, float *out, int add)
{
	const __m512 one = _mm512_set1_ps(1.0f);
	const __m512 mone = _mm512_set1_ps(-1.0f);
	uint64_t i = 0;

	for (; i + 16 <= n; i += 16) {
		uint16_t bits;
		__m512 v;

		memcpy(&bits, in + i / 8, 2);
		v = _mm512_mask_blend_ps((__mmask16)bits, mone, one);
		if (add)
			v = _mm512_add_ps(_mm512_loadu_ps(out + i), v);
		_mm512_storeu_ps(out + i, v);
	}
	kern_codec_dec1_scalar(in + i / 8, n - i, t, out + i, add);
}

static void
avx512_dec2(const uint8_t *in, uint64_t n, float t, float *out, int add)
{
	const __m512i shift = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16,
	    18, 20, 22, 24, 26, 28, 30);
	const __m512i three = _mm512_set1_epi32(3);
	const __m512i two = _mm512_set1_epi32(2);
	const __m512 vt = _mm512_set1_ps(t);
	const __m512 vnt = _mm512_set1_ps(-t);
	const __m512 zero = _mm512_setzero_ps();
	uint64_t i = 0;

	for (; i + 16 <= n; i += 16) {
		uint32_t bits;
		__m512i c;
		__m512 v;

		memcpy(&bits, in + i / 4, 4);
		c = _mm512_and_si512(_mm512_srlv_epi32(_mm512_set1_epi32(
							   (int)bits),
					 shift),
		    three);
		v = _mm512_mask_blend_ps(_mm512_cmpeq_epi32_mask(c, three),
		    _mm512_mask_blend_ps(_mm512_cmpeq_epi32_mask(c, two), zero,
			vnt),
		    vt);
		if (add)
			v = _mm512_add_ps(_mm512_loadu_ps(out + i), v);
		_mm512_storeu_ps(out + i, v);
	}
	kern_codec_dec2_scalar(in + i / 4, n - i, t, out + i, add);
}

const kern_codec_fns kern_codec_avx512 = {
	.enc1 = avx512_enc1,
	.dec1 = avx512_dec1,
	.enc2 = avx512_enc2,
	.dec2 = avx512_dec2,
};
