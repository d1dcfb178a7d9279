/* codec_avx512 - the AVX-512 1-bit and 2-bit quantisers (codec.h).
 *
 * Compiled with -mavx512f -mavx512bw and called only on processors that
 * have them. Comparisons give mask registers directly: 16 values per
 * vector, 32 per round as in codec_avx2.c, the same arithmetic as the
 * scalar code; the last values go through the scalar kernels.
 */
#include <immintrin.h>
#include <string.h>

#include "codec.h"

/* Spreads the 32 bits of x to the even bits of a 64-bit word. */
static inline uint64_t
spread(uint32_t x)
{
	uint64_t v = x;

	v = (v | v << 16) & 0x0000FFFF0000FFFFull;
	v = (v | v << 8) & 0x00FF00FF00FF00FFull;
	v = (v | v << 4) & 0x0F0F0F0F0F0F0F0Full;
	v = (v | v << 2) & 0x3333333333333333ull;
	v = (v | v << 1) & 0x5555555555555555ull;
	return v;
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

static void
avx512_enc2(const float *g, float *res, uint64_t n, float t, uint8_t *out)
{
	const __m512 vt = _mm512_set1_ps(t);
	const __m512 vnt = _mm512_set1_ps(-t);
	const __m512 zero = _mm512_setzero_ps();
	uint64_t i = 0;

	for (; i + 32 <= n; i += 32) {
		uint32_t p = 0, h = 0;
		uint64_t word;

		for (int k = 0; k < 2; k++) {
			__m512 r = _mm512_add_ps(_mm512_loadu_ps(
						     res + i + 16 * k),
			    _mm512_loadu_ps(g + i + 16 * k));
			__mmask16 pos = _mm512_cmp_ps_mask(r, vt, _CMP_GE_OQ);
			__mmask16 neg = _mm512_cmp_ps_mask(r, vnt, _CMP_LE_OQ);

			r = _mm512_add_ps(_mm512_sub_ps(r,
					      _mm512_mask_blend_ps(pos, zero,
						  vt)),
			    _mm512_mask_blend_ps(neg, zero, vt));
			_mm512_storeu_ps(res + i + 16 * k, r);
			p |= (uint32_t)pos << (16 * k);
			h |= (uint32_t)(pos | neg) << (16 * k);
		}
		word = spread(p) | spread(h) << 1;
		memcpy(out + i / 4, &word, 8);
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
