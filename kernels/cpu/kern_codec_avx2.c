/* kern_codec_avx2 - the AVX2 1-bit and 2-bit quantisers (kern_codec.h).
 *
 * Compiled with -mavx2 and called only on processors that have it. Encode
 * takes 32 values per round (4 vectors), whose comparison masks become one
 * 32-bit word of bits (1-bit); 2-bit takes 8 values per round, whose
 * masks become 16 bits of codes through a table (codes8); decode widens 8 codes
 * per vector with variable shifts. The arithmetic is the scalar code's,
 * operation for operation, so the results agree bit for bit; the last values go
 * through the scalar kernels.
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
avx2_enc1(const float *g, float *res, uint64_t n, float t, uint8_t *out)
{
	const __m256 vt = _mm256_set1_ps(t);
	const __m256 one = _mm256_set1_ps(1.0f);
	const __m256 sign = _mm256_set1_ps(-0.0f);
	uint64_t i = 0;

	for (; i + 32 <= n; i += 32) {
		uint32_t word = 0;

		for (int k = 0; k < 4; k++) {
			__m256 r = _mm256_add_ps(_mm256_loadu_ps(
						     res + i + 8 * k),
			    _mm256_loadu_ps(g + i + 8 * k));
			__m256 m = _mm256_cmp_ps(r, vt, _CMP_GT_OQ);

			r = _mm256_add_ps(r,
			    _mm256_or_ps(one, _mm256_and_ps(m, sign)));
			_mm256_storeu_ps(res + i + 8 * k, r);
			word |= (uint32_t)_mm256_movemask_ps(m) << (8 * k);
		}
		memcpy(out + i / 8, &word, 4);
	}
	kern_codec_enc1_scalar(g + i, res + i, n - i, t, out + i / 8);
	kern_codec_pad(1, n, out);
}

/* The residual update r' = (r - (pos ? t : 0)) + (neg ? t : 0) as one
 * addition r + sel, sel = -t, +t or +0: the same result bit for bit
 * (r + -t is r - t; r + +0 is what (r - 0) + 0 gives, -0 included). */
static void
avx2_enc2(const float *g, float *res, uint64_t n, float t, uint8_t *out)
{
	const __m256 vt = _mm256_set1_ps(t);
	const __m256 vnt = _mm256_set1_ps(-t);
	uint64_t i = 0;

	for (; i + 8 <= n; i += 8) {
		__m256 r = _mm256_add_ps(_mm256_loadu_ps(res + i),
		    _mm256_loadu_ps(g + i));
		__m256 pos = _mm256_cmp_ps(r, vt, _CMP_GE_OQ);
		__m256 neg = _mm256_cmp_ps(r, vnt, _CMP_LE_OQ);
		__m256 sel = _mm256_or_ps(_mm256_and_ps(pos, vnt),
		    _mm256_and_ps(neg, vt));
		uint16_t code;

		_mm256_storeu_ps(res + i, _mm256_add_ps(r, sel));
		code = codes8((unsigned)_mm256_movemask_ps(pos),
		    (unsigned)_mm256_movemask_ps(_mm256_or_ps(pos, neg)));
		memcpy(out + i / 4, &code, 2);
	}
	kern_codec_enc2_scalar(g + i, res + i, n - i, t, out + i / 4);
	kern_codec_pad(2, n, out);
}

static void
avx2_dec1(const uint8_t *in, uint64_t n, float t, float *out, int add)
{
	const __m256i bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
	const __m256 one = _mm256_set1_ps(1.0f);
	const __m256 mone = _mm256_set1_ps(-1.0f);
	uint64_t i = 0;

	for (; i + 8 <= n; i += 8) {
		__m256i b = _mm256_and_si256(_mm256_set1_epi32(in[i / 8]), bit);
		__m256 m = _mm256_castsi256_ps(_mm256_cmpeq_epi32(b, bit));
		__m256 v = _mm256_blendv_ps(mone, one, m);

		if (add)
			v = _mm256_add_ps(_mm256_loadu_ps(out + i), v);
		_mm256_storeu_ps(out + i, v);
	}
	kern_codec_dec1_scalar(in + i / 8, n - i, t, out + i, add);
}

static void
avx2_dec2(const uint8_t *in, uint64_t n, float t, float *out, int add)
{
	const __m256i shift = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
	const __m256i three = _mm256_set1_epi32(3);
	const __m256i two = _mm256_set1_epi32(2);
	const __m256 vt = _mm256_set1_ps(t);
	const __m256 vnt = _mm256_set1_ps(-t);
	uint64_t i = 0;

	for (; i + 8 <= n; i += 8) {
		uint16_t bits;
		__m256i c;
		__m256 v;

		memcpy(&bits, in + i / 4, 2);
		c = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(bits),
					 shift),
		    three);
		v = _mm256_or_ps(_mm256_and_ps(_mm256_castsi256_ps(
						   _mm256_cmpeq_epi32(c,
						       three)),
				     vt),
		    _mm256_and_ps(_mm256_castsi256_ps(
				      _mm256_cmpeq_epi32(c, two)),
			vnt));
		if (add)
			v = _mm256_add_ps(_mm256_loadu_ps(out + i), v);
		_mm256_storeu_ps(out + i, v);
	}
	kern_codec_dec2_scalar(in + i / 4, n - i, t, out + i, add);
}

const kern_codec_fns kern_codec_avx2 = {
	.enc1 = avx2_enc1,
	.dec1 = avx2_dec1,
	.enc2 = avx2_enc2,
	.dec2 = avx2_dec2,
};
