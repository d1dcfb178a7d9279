/* kern_codec_auto - the 2-bit quantiser at a scale chosen from the tensor,
 * see kern_codec_auto.h.
 *
 * Four passes over the tensor, none allocating: the sum of |r| (t); the
 * sum of the |r| >= t (v's numerator); the 2-bit encode at t, which stays
 * kern_codec's (one quantiser, with its vector kernels and threads, rather
 * than a second copy fused with the correction); and the correction,
 * which reads the codes back instead of recomputing r. v's count is the
 * number of codes sent, a popcount of the codes (n / 4 bytes). The sums
 * are plain C specialised per dtype; each of the eight accumulators adds
 * every eighth value, so the compiler keeps them in vector lanes (float32
 * and bfloat16 at -O2) without changing the order of any sum.
 */
#include "kern_codec_auto.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include "../element.h"
#include "../kernels.h"

#define AUTO_LANES 8 /* accumulators of each sum */

/* |res[i] + widen(g[i])|: the r of kern_codec.h, its magnitude. */
KERN_INLINE float
auto_mag(const void *g, const float *res, uint64_t i, int dtype)
{
	return fabsf(res[i] + kern_load(g, i, dtype));
}

/* a if it is selected (always with all set, else when a >= t, never for
 * NaN), else +0: by a mask, not a branch, since about half the values of
 * a gradient are selected in no order a predictor could learn. */
KERN_INLINE double
auto_pick(float a, int all, float t)
{
	uint32_t bits;

	memcpy(&bits, &a, sizeof(bits));
	bits &= 0u - (uint32_t)(all || a >= t);
	memcpy(&a, &bits, sizeof(a));
	return (double)a;
}

/* With all set, the sum of every |r| (NaN and infinities included);
 * else the sum of the |r| >= t. Accumulator j adds values j, j + 8,
 * j + 16... in order; the last n % 8 values go through tail[] (x + 0 is
 * x for the |r|, never -0). dtype and all are constants where this is
 * inlined, so each caller gets its own loop, with the accumulators in
 * vector lanes. */
KERN_INLINE double
auto_sums(const void *g, const float *res, uint64_t n, int dtype, int all,
    float t)
{
	double a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0;
	double tail[AUTO_LANES] = { 0 };
	uint64_t i = 0;

	/* A count of blocks, not i + 8 <= n: the vectoriser needs to know the
	 * trip count. */
	for (uint64_t b = 0, blocks = n / AUTO_LANES; b < blocks;
	     b++, i += AUTO_LANES) {
		a0 += auto_pick(auto_mag(g, res, i, dtype), all, t);
		a1 += auto_pick(auto_mag(g, res, i + 1, dtype), all, t);
		a2 += auto_pick(auto_mag(g, res, i + 2, dtype), all, t);
		a3 += auto_pick(auto_mag(g, res, i + 3, dtype), all, t);
		a4 += auto_pick(auto_mag(g, res, i + 4, dtype), all, t);
		a5 += auto_pick(auto_mag(g, res, i + 5, dtype), all, t);
		a6 += auto_pick(auto_mag(g, res, i + 6, dtype), all, t);
		a7 += auto_pick(auto_mag(g, res, i + 7, dtype), all, t);
	}
	for (int j = 0; i < n; i++, j++)
		tail[j] = auto_pick(auto_mag(g, res, i, dtype), all, t);
	a0 += tail[0];
	a1 += tail[1];
	a2 += tail[2];
	a3 += tail[3];
	a4 += tail[4];
	a5 += tail[5];
	a6 += tail[6];
	a7 += tail[7];
	return ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7));
}

/* auto_sums with dtype made a constant. */
static double
auto_sum(int dtype, const void *g, const float *res, uint64_t n, int all,
    float t)
{
	if (dtype == KERN_F16)
		return all ? auto_sums(g, res, n, KERN_F16, 1, t)
			   : auto_sums(g, res, n, KERN_F16, 0, t);
	if (dtype == KERN_BF16)
		return all ? auto_sums(g, res, n, KERN_BF16, 1, t)
			   : auto_sums(g, res, n, KERN_BF16, 0, t);
	return all ? auto_sums(g, res, n, KERN_F32, 1, t)
		   : auto_sums(g, res, n, KERN_F32, 0, t);
}

/* The values sent (codes 2 and 3: the high bit of each 2-bit code set)
 * among the `bytes` bytes of codes, padding (zero codes) included. */
static uint64_t
auto_sent(const uint8_t *codes, uint64_t bytes)
{
	uint64_t count = 0, i = 0;

	for (; i + 8 <= bytes; i += 8) {
		uint64_t w;

		memcpy(&w, codes + i, sizeof(w));
		count += (uint64_t)__builtin_popcountll(
		    w & UINT64_C(0xaaaaaaaaaaaaaaaa));
	}
	for (; i < bytes; i++)
		count += (uint64_t)__builtin_popcount(codes[i] & 0xaau);
	return count;
}

/* The torch code's err -= sign(r) * sel * d on the residual left by the
 * encode at t, from its codes: code 3 has sign +1 and sel 1, code 2 sign
 * -1 and sel 1; code 0 has sel 0, so its term is +-0 (the residual,
 * never -0 after the encode, is unchanged) or, for an infinite d, NaN. */
static void
auto_correct(float *res, uint64_t n, const uint8_t *codes, float d)
{
	const float c0 = isinf(d) ? NAN : 0.0f;
	const float corr[4] = { c0, c0, -d, d };
	uint64_t i = 0;

	for (; i + 4 <= n; i += 4) {
		unsigned byte = codes[i / 4];

		res[i] = res[i] - corr[byte & 3];
		res[i + 1] = res[i + 1] - corr[(byte >> 2) & 3];
		res[i + 2] = res[i + 2] - corr[(byte >> 4) & 3];
		res[i + 3] = res[i + 3] - corr[byte >> 6];
	}
	for (; i < n; i++)
		res[i] = res[i] - corr[(codes[i / 4] >> (2 * (i % 4))) & 3];
}

void
kern_codec_auto_encode(kern_codec_par *par, const kern_codec_fns *f, int dtype,
    const void *g, float *res, uint64_t n, uint8_t *out, float *ret_t,
    float *ret_v)
{
	float t = FLT_MAX, v = FLT_MAX;
	uint64_t count;
	double above;
	float d;

	if (n == 0) {
		*ret_t = t;
		*ret_v = v;
		return;
	}
	t = (float)(auto_sum(dtype, g, res, n, 1, 0.0f) / (double)n);
	/* torch's clamp_(tiny, max).nan_to_num_(max). */
	if (isnan(t) || t > FLT_MAX)
		t = FLT_MAX;
	else if (t < FLT_MIN)
		t = FLT_MIN;
	above = auto_sum(dtype, g, res, n, 0, t);
	/* The codes sent are the values with |r| >= t: counted from the
	 * codes rather than in the sum, whose loop then vectorises. */
	kern_codec_par_encode(par, f, 2, t, dtype, g, res, n, out);
	count = auto_sent(out, kern_codec_bytes(2, n));
	v = count > 0 ? (float)(above / (double)count) : t;
	/* As torch: v - t in double, then rounded to float for the float32
	 * product. Both are floats: d is 0 only when v == t. */
	d = (float)((double)v - (double)t);
	if (d != 0.0f)
		auto_correct(res, n, out, d);
	*ret_t = t;
	*ret_v = v;
}
