/* test_codec_auto - the 2-bit quantiser at threshold "auto".
 *
 * Against a reference written here from the definition in
 * kernels/cpu/kern_codec_auto.h: t and v are the exact means (long double)
 * rounded to within 1 ulp, clamped as torch clamps; given them, the codes
 * are the fixed-threshold encode's at t byte for byte and the residual is
 * that encode's minus torch's sign(r) * sel * (v - t), float for float,
 * bit for bit (NaN for NaN). Over several error-feedback steps, on sizes
 * 1 to past a codes word and a chunk (odd, 2^k +- 1), on random values,
 * zeros, NaN and infinite gradients; on every ISA the processor runs, on
 * 1 to 4 codec threads, and on float16 and bfloat16 gradients, which give
 * what their float32 widening gives. Then the public API's errors.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <bellows/codec.h>
#include <bellows/error.h>

#include "kernels/cpu/kern_codec.h"
#include "kernels/cpu/kern_codec_auto.h"
#include "kernels/cpu/kern_codec_par.h"
#include "kernels/cpu/kern_stats.h"
#include "kernels/element.h"
#include "kernels/kernels.h"

#define TEST_RNG_SEED 0x2545f4914f6cdd1dull
#include "rng.h"

#define MAX_N 20000

static const uint64_t sizes[] = { 1, 2, 3, 4, 5, 15, 16, 17, 31, 33, 255, 1000,
	1023, 1025, 4097, 8193, MAX_N };
#define N_SIZES (sizeof(sizes) / sizeof(sizes[0]))

enum set {
	SET_RANDOM, /* uniform, one value in 64 a hundred times larger */
	SET_ZERO,   /* every gradient +0 or -0 */
	SET_NAN,    /* random, every 7th NaN */
	SET_INF,    /* random, every 11th +-Inf */
	SET_COUNT,
};

static float g[MAX_N], g32[MAX_N], res0[MAX_N], res_a[MAX_N], res_b[MAX_N];
static uint16_t half[MAX_N];
static uint8_t codes_a[MAX_N / 4 + 8], codes_b[MAX_N / 4 + 8];

static void
fill(enum set s, float *x, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++) {
		x[i] = unif() * (rng() % 64 == 0 ? 100.0f : 1.0f);
		if (s == SET_ZERO)
			x[i] = rng() % 2 ? 0.0f : -0.0f;
		else if (s == SET_NAN && i % 7 == 3)
			x[i] = NAN;
		else if (s == SET_INF && i % 11 == 5)
			x[i] = i % 2 ? INFINITY : -INFINITY;
	}
}

/* Equal bits, or NaN in both. */
static int
same_float(float a, float b)
{
	if (isnan(a) || isnan(b))
		return isnan(a) && isnan(b);
	return memcmp(&a, &b, sizeof(a)) == 0;
}

/* x is within one float step of the exact (long double) value e, after
 * torch's clamp of a mean when clamp is set. */
static int
within_ulp(float x, long double e, int clamp)
{
	float lo, hi;

	if (clamp) {
		if (isnan(e) || e >= (long double)FLT_MAX)
			return x == FLT_MAX;
		if (e <= (long double)FLT_MIN)
			return x == FLT_MIN;
	}
	if (isinf(e) || isnan(e))
		return isinf(e) ? x == (float)e : isnan(x);
	lo = nextafterf((float)e, -INFINITY);
	hi = nextafterf((float)e, INFINITY);
	return x >= lo && x <= hi;
}

/* The reference of one step from residual res (n values, updated in
 * place) and gradient x: checks the codes and t, v the code under test
 * returned, then leaves the reference residual in res. */
static void
ref_check(const float *x, float *res, uint64_t n, const uint8_t *codes,
    const float *res_got, float t, float v)
{
	long double sum = 0.0L, above = 0.0L;
	uint64_t count = 0;
	float r[MAX_N], d;

	for (uint64_t i = 0; i < n; i++) {
		r[i] = res[i] + x[i];
		sum += fabsl((long double)r[i]);
	}
	assert_true(within_ulp(t, sum / (long double)n, 1));
	for (uint64_t i = 0; i < n; i++)
		if (fabsf(r[i]) >= t) {
			above += fabsl((long double)r[i]);
			count++;
		}
	if (count == 0)
		assert_true(v == t);
	else
		assert_true(within_ulp(v, above / (long double)count, 0));
	/* Given t and v: the fixed encode at t, then torch's correction. */
	assert_int_equal(bellows_codec_encode_codes(2, t, x, res, n, codes_b,
			     sizeof(codes_b)),
	    0);
	assert_memory_equal(codes, codes_b, kern_codec_bytes(2, n));
	d = (float)((double)v - (double)t);
	for (uint64_t i = 0; i < n; i++) {
		float s = (float)((0.0f < r[i]) - (r[i] < 0.0f));
		float sel = fabsf(r[i]) >= t ? 1.0f : 0.0f;

		if (v != t)
			res[i] = res[i] - (s * sel) * d;
		if (!same_float(res_got[i], res[i]))
			fail_msg("n %llu value %llu: residual %a, want %a",
			    (unsigned long long)n, (unsigned long long)i,
			    (double)res_got[i], (double)res[i]);
	}
}

/* Every ISA, every set, several steps: the definition, t and v within
 * 1 ulp of the exact means, codes and residuals bit for bit. */
static void
test_auto_codes_and_residual_follow_the_definition_on_every_isa(void **state)
{
	(void)state;
	for (int isa = KERN_ISA_SCALAR; isa <= KERN_ISA_LAST; isa++) {
		const kern_codec_fns *f = kern_codec_get(isa);

		if (f == NULL)
			continue;
		for (size_t si = 0; si < N_SIZES; si++)
			for (int s = 0; s < SET_COUNT; s++) {
				uint64_t n = sizes[si];

				fill(SET_RANDOM, res0, n);
				for (uint64_t i = 0; i < n; i++)
					res0[i] *= 0.1f;
				memcpy(res_a, res0, n * 4);
				for (int step = 0; step < 3; step++) {
					float t, v;

					fill((enum set)s, g, n);
					kern_codec_auto_encode(NULL, f,
					    KERN_F32, g, res_a, n, codes_a, &t,
					    &v);
					ref_check(g, res0, n, codes_a, res_a, t,
					    v);
					memcpy(res_a, res0, n * 4);
				}
			}
	}
}

/* Zeros give the smallest normal t and no correction; NaN and infinite
 * gradients the largest finite t; an infinite one also an infinite v,
 * so the residuals of the values not sent become NaN, as in torch. */
static void
test_auto_clamps_t_for_zero_nan_and_infinite_gradients(void **state)
{
	float x[5] = { 0.0f, -0.0f, 0.0f, 0.0f, 0.0f }, res[5] = { 0 };
	uint8_t codes[4];
	float t = 0.0f, v = 0.0f;

	(void)state;
	assert_int_equal(bellows_codec_encode_codes_auto(2, KERN_F32, x, res, 5,
			     codes, sizeof(codes), &t, &v),
	    0);
	assert_true(t == FLT_MIN && v == FLT_MIN);
	for (int i = 0; i < 5; i++)
		assert_true(res[i] == 0.0f && !signbit(res[i]));
	assert_int_equal(codes[0] | codes[1] | codes[2] | codes[3], 0);

	x[2] = NAN;
	assert_int_equal(bellows_codec_encode_codes_auto(2, KERN_F32, x, res, 5,
			     codes, sizeof(codes), &t, &v),
	    0);
	assert_true(t == FLT_MAX && v == FLT_MAX);
	assert_true(isnan(res[2]) && res[0] == 0.0f);
	assert_int_equal(codes[0] | codes[1], 0);

	memset(res, 0, sizeof(res));
	x[2] = 0.5f;
	x[3] = -INFINITY;
	assert_int_equal(bellows_codec_encode_codes_auto(2, KERN_F32, x, res, 5,
			     codes, sizeof(codes), &t, &v),
	    0);
	assert_true(t == FLT_MAX && isinf(v));
	assert_int_equal(codes[0], 2 << 6); /* value 3: code 2 */
	assert_true(isnan(res[0]) && isnan(res[2]) && isnan(res[4]));
	assert_true(isnan(res[3])); /* -inf + t, then - (-inf) */

	/* n = 0: nothing to code, both scales FLT_MAX. */
	assert_int_equal(bellows_codec_encode_codes_auto(2, KERN_F32, NULL,
			     NULL, 0, NULL, 0, &t, &v),
	    0);
	assert_true(t == FLT_MAX && v == FLT_MAX);
}

/* Threads 1..4 (splitting every size) and float16/bfloat16 gradients
 * give the single-thread float32 result on the widened values. */
static void
test_auto_is_the_same_on_every_thread_count_and_half_precision(void **state)
{
	const kern_codec_fns *f = kern_codec_get(KERN_ISA_AUTO);

	(void)state;
	for (uint32_t parts = 1; parts <= 4; parts++) {
		kern_codec_par *p = NULL;

		assert_int_equal(kern_codec_par_new(parts, 1, &p), 0);
		for (size_t si = 0; si < N_SIZES; si++)
			for (int dtype = KERN_F32; dtype <= KERN_BF16;
			     dtype++) {
				uint64_t n = sizes[si];
				const void *src = g;
				float ta, va, tb, vb;

				fill(SET_RANDOM, g, n);
				fill(SET_RANDOM, res_a, n);
				if (dtype != KERN_F32) {
					for (uint64_t i = 0; i < n; i++) {
						uint32_t b;

						memcpy(&b, &g[i], 4);
						/* bfloat16: the top half;
						 * float16: a value in
						 * [-2, 2). */
						half[i] = dtype == KERN_BF16
						    ? (uint16_t)(b >> 16)
						    : (uint16_t)((rng() % 2)
							      << 15 |
							  (rng() % 16) << 10 |
							  (rng() % 1024));
						g[i] = kern_load(half, i,
						    dtype);
					}
					src = half;
				}
				memcpy(g32, g, n * 4);
				memcpy(res_b, res_a, n * 4);
				kern_codec_auto_encode(NULL, f, KERN_F32, g32,
				    res_a, n, codes_a, &ta, &va);
				kern_codec_auto_encode(p, f, dtype, src, res_b,
				    n, codes_b, &tb, &vb);
				assert_true(
				    same_float(ta, tb) && same_float(va, vb));
				assert_memory_equal(codes_a, codes_b,
				    kern_codec_bytes(2, n));
				assert_memory_equal(res_a, res_b, n * 4);
			}
		kern_codec_par_destroy(&p);
	}
}

static void
test_auto_refuses_bad_arguments_and_writes_nothing(void **state)
{
	float x[4] = { 1, 2, 3, 4 }, res[4] = { 0 }, t = 7.0f, v = 7.0f;
	uint8_t codes[4] = { 0 };

	(void)state;
	assert_int_equal(bellows_codec_encode_codes_auto(1, KERN_F32, x, res, 4,
			     codes, 4, &t, &v),
	    BELLOWS_EINVAL);
	assert_int_equal(bellows_codec_encode_codes_auto(3, KERN_F32, x, res, 4,
			     codes, 4, &t, &v),
	    BELLOWS_EINVAL);
	assert_int_equal(bellows_codec_encode_codes_auto(2, 7, x, res, 4, codes,
			     4, &t, &v),
	    BELLOWS_EINVAL);
	assert_int_equal(bellows_codec_encode_codes_auto(2, KERN_F32, NULL, res,
			     4, codes, 4, &t, &v),
	    BELLOWS_EINVAL);
	assert_int_equal(bellows_codec_encode_codes_auto(2, KERN_F32, x, NULL,
			     4, codes, 4, &t, &v),
	    BELLOWS_EINVAL);
	assert_int_equal(bellows_codec_encode_codes_auto(2, KERN_F32, x, res, 4,
			     NULL, 4, &t, &v),
	    BELLOWS_EINVAL);
	assert_int_equal(bellows_codec_encode_codes_auto(2, KERN_F32, x, res,
			     BELLOWS_CODEC_MAX_VALUES + 1, codes, 4, &t, &v),
	    BELLOWS_EINVAL);
	assert_int_equal(bellows_codec_encode_codes_auto(2, KERN_F32, x, res, 4,
			     codes, 3, &t, &v),
	    BELLOWS_EMSGSIZE);
	assert_true(t == 7.0f && v == 7.0f && res[0] == 0.0f);
	assert_int_equal(codes[0], 0);
	/* Both scales are optional. */
	assert_int_equal(bellows_codec_encode_codes_auto(2, KERN_F32, x, res, 4,
			     codes, 4, NULL, NULL),
	    0);
	assert_int_not_equal(codes[0], 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(
		    test_auto_codes_and_residual_follow_the_definition_on_every_isa),
		cmocka_unit_test(
		    test_auto_clamps_t_for_zero_nan_and_infinite_gradients),
		cmocka_unit_test(
		    test_auto_is_the_same_on_every_thread_count_and_half_precision),
		cmocka_unit_test(
		    test_auto_refuses_bad_arguments_and_writes_nothing),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
