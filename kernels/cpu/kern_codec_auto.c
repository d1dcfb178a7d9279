/* kern_codec_auto - the 2-bit quantiser at a scale chosen from the tensor,
 * see kern_codec_auto.h.
 *
 * Three passes over the tensor, none allocating: the sum of |r| (t); the
 * sum and the count of the |r| >= t (v); and the 2-bit encode at t, which
 * stays kern_codec's (one quantiser, with its vector kernels and threads,
 * not a second copy with the correction inside), followed chunk by chunk
 * (kern_codec_par_encode_post) by the correction, which reads the chunk's
 * codes back while its residual is still in the cache. The sums are
 * plain C specialised per dtype; each of the eight accumulators adds
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

/* x if in, else +0: by a mask, not a branch, since about half the values
 * of a gradient are selected in no order a predictor could learn. */
KERN_INLINE float
auto_mask(float x, uint32_t in)
{
	uint32_t bits;

	memcpy(&bits, &x, sizeof(bits));
	bits &= 0u - in;
	memcpy(&x, &bits, sizeof(x));
	return x;
}

/* One accumulator's step: a to *acc if it is selected (always with all
 * set, else when a >= t, never for NaN), and 1 to *cnt. The count is a
 * double too, so that the loop stays in vector lanes: exact for any n
 * below 2^53, far beyond a tensor in memory. */
KERN_INLINE void
auto_add(double *acc, double *cnt, float a, int all, float t)
{
	uint32_t in = all || a >= t;

	*acc += (double)auto_mask(a, in);
	if (!all)
		*cnt += (double)auto_mask(1.0f, in);
}

/* With all set, the sum of every |r| (NaN and infinities included);
 * else the sum of the |r| >= t and their number (*ret_count).
 * Accumulator j adds values j, j + 8, j + 16... in order; the last n % 8
 * values go through tail[] (x + 0 is x for the |r|, never -0). dtype and
 * all are constants where this is inlined, so each caller gets its own
 * loop, with the accumulators in vector lanes. */
KERN_INLINE double
auto_sums(const void *g, const float *res, uint64_t n, int dtype, int all,
    float t, uint64_t *ret_count)
{
	double a[AUTO_LANES] = { 0 }, c[AUTO_LANES] = { 0 };
	double ta[AUTO_LANES] = { 0 }, tc[AUTO_LANES] = { 0 };
	uint64_t i = 0;

	/* A count of blocks, not i + 8 <= n: the vectoriser needs to know the
	 * trip count. */
	for (uint64_t b = 0, blocks = n / AUTO_LANES; b < blocks;
	     b++, i += AUTO_LANES)
		for (int j = 0; j < AUTO_LANES; j++)
			auto_add(&a[j], &c[j], auto_mag(g, res, i + j, dtype),
			    all, t);
	for (int j = 0; i < n; i++, j++)
		auto_add(&ta[j], &tc[j], auto_mag(g, res, i, dtype), all, t);
	for (int j = 0; j < AUTO_LANES; j++) {
		a[j] += ta[j];
		c[j] += tc[j];
	}
	if (ret_count != NULL)
		*ret_count = (uint64_t)(((c[0] + c[1]) + (c[2] + c[3])) +
		    ((c[4] + c[5]) + (c[6] + c[7])));
	return ((a[0] + a[1]) + (a[2] + a[3])) +
	    ((a[4] + a[5]) + (a[6] + a[7]));
}

/* auto_sums with dtype made a constant. */
static double
auto_sum(int dtype, const void *g, const float *res, uint64_t n, int all,
    float t, uint64_t *ret_count)
{
	if (dtype == KERN_F16)
		return all ? auto_sums(g, res, n, KERN_F16, 1, t, ret_count)
			   : auto_sums(g, res, n, KERN_F16, 0, t, ret_count);
	if (dtype == KERN_BF16)
		return all ? auto_sums(g, res, n, KERN_BF16, 1, t, ret_count)
			   : auto_sums(g, res, n, KERN_BF16, 0, t, ret_count);
	return all ? auto_sums(g, res, n, KERN_F32, 1, t, ret_count)
		   : auto_sums(g, res, n, KERN_F32, 0, t, ret_count);
}

/* The terms auto_correct subtracts: by code, and by code byte (the four
 * values' terms in order, so that a byte's four subtractions are one
 * vector operation), the latter only where the tensor has enough bytes
 * to repay building them. */
typedef struct auto_terms {
	float code[4];      /* the term of each 2-bit code */
	float byte[256][4]; /* the terms of each code byte's four values */
	int bytes;          /* byte[] is filled */
} auto_terms;

#define AUTO_BYTE_TERMS_MIN 4096 /* values from which byte[] is filled */

/* The torch code's err -= sign(r) * sel * d on a chunk's residual as the
 * encode at t left it, from its codes: code 3 has sign +1 and sel 1,
 * code 2 sign -1 and sel 1; code 0 has sel 0, so its term is +-0 (the
 * residual, never -0 after the encode, is unchanged) or, for an infinite
 * d, NaN. A kern_codec_post_fn on an auto_terms: it runs on each chunk
 * right after the chunk's encode, while its residual is in the cache. */
static void
auto_correct(float *res, uint64_t n, const uint8_t *codes, void *arg)
{
	const auto_terms *k = arg;
	uint64_t i = 0;

	/* Loaded into locals first: res may alias nothing in k, but the
	 * compiler cannot know it, and the four subtractions become one
	 * vector operation only once both sides are local. */
	if (k->bytes)
		for (; i + 4 <= n; i += 4) {
			float r[4], row[4];

			memcpy(r, res + i, sizeof(r));
			memcpy(row, k->byte[codes[i / 4]], sizeof(row));
			for (int j = 0; j < 4; j++)
				r[j] = r[j] - row[j];
			memcpy(res + i, r, sizeof(r));
		}
	for (; i < n; i++)
		res[i] = res[i] - k->code[(codes[i / 4] >> (2 * (i % 4))) & 3];
}

/* The terms for d (finite or +inf, not 0) and a tensor of n values. */
static void
auto_terms_init(auto_terms *k, float d, uint64_t n)
{
	const float c0 = isinf(d) ? NAN : 0.0f;

	k->code[0] = c0;
	k->code[1] = c0;
	k->code[2] = -d;
	k->code[3] = d;
	k->bytes = n >= AUTO_BYTE_TERMS_MIN;
	if (k->bytes)
		for (unsigned b = 0; b < 256; b++)
			for (unsigned j = 0; j < 4; j++)
				k->byte[b][j] = k->code[(b >> (2 * j)) & 3];
}

void
kern_codec_auto_encode(kern_codec_par *par, const kern_codec_fns *f, int dtype,
    const void *g, float *res, uint64_t n, uint8_t *out, float *ret_t,
    float *ret_v)
{
	float t = FLT_MAX, v = FLT_MAX;
	uint64_t count = 0;
	auto_terms terms;
	double above;
	float d;

	if (n == 0) {
		*ret_t = t;
		*ret_v = v;
		return;
	}
	t = (float)(auto_sum(dtype, g, res, n, 1, 0.0f, NULL) / (double)n);
	/* torch's clamp_(tiny, max).nan_to_num_(max). */
	if (isnan(t) || t > FLT_MAX)
		t = FLT_MAX;
	else if (t < FLT_MIN)
		t = FLT_MIN;
	above = auto_sum(dtype, g, res, n, 0, t, &count);
	v = count > 0 ? (float)(above / (double)count) : t;
	/* As torch: v - t in double, then rounded to float for the float32
	 * product. Both are floats: d is 0 only when v == t, and then nothing
	 * moves. */
	d = (float)((double)v - (double)t);
	if (d != 0.0f)
		auto_terms_init(&terms, d, n);
	kern_codec_par_encode_post(par, f, 2, t, dtype, g, res, n, out,
	    d != 0.0f ? auto_correct : NULL, &terms);
	*ret_t = t;
	*ret_v = v;
}
