/* test_codec_par - the codecs on several threads and on float16 and
 * bfloat16 gradients.
 *
 * On every instruction set the machine has and for every thread count
 * from 1 to 8 (splitting from 1 value on, so every size is split): the
 * 1-bit and 2-bit encode give the same bytes and the same residual as one
 * call of the ISA's kernel, over three error-feedback steps; the decode
 * (set and add) the same values; top-k the same indices, values and
 * residual as kern_topk_encode_isa, on random data, on data full of ties,
 * on all-equal values and on NaN, infinities, huge and subnormal values,
 * for k = 0, 1, 1 %, n / 2, n - 1, n, sizes from 0 to past the sampled
 * path's minimum (odd, 2^k +- 1). float16 and bfloat16 gradients (every
 * bit pattern class: NaN, infinities, subnormals) give what float32 gives
 * on the same values widened. Then the public API: bellows_codec_set_threads
 * 1 .. 8 all give the same bytes, and the _dtype functions what the
 * float32 ones give on the widened gradient; bad arguments are refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <bellows/codec.h>
#include <bellows/error.h>

#include "kernels/cpu/kern_codec.h"
#include "kernels/cpu/kern_codec_par.h"
#include "kernels/cpu/kern_stats.h"
#include "kernels/cpu/kern_topk.h"
#include "kernels/element.h"
#include "kernels/kernels.h"

#define TEST_RNG_SEED 0x9e3779b97f4a7c15ull
#include "rng.h"

#define MAX_PARTS 8

enum set {
	SET_RANDOM,  /* uniform in [-1, 1) */
	SET_FEW,     /* +-0.25, +-0.5, +-0.75: ties everywhere */
	SET_EQUAL,   /* every value 0.5 */
	SET_SPECIAL, /* NaN, +-Inf, huge, subnormal, signed zeros */
	SET_COUNT,
};

static void
fill(enum set s, float *g, uint64_t n)
{
	static const float special[] = { NAN, INFINITY, -INFINITY, 3e38f,
		-3e38f, 1e-45f, -1e-45f, 1e-40f, 0.0f, -0.0f, 0.5f, -0.5f };

	for (uint64_t i = 0; i < n; i++) {
		switch (s) {
		case SET_FEW:
			g[i] = (float)(1 + rng() % 3) * 0.25f *
			    (rng() % 2 ? 1.0f : -1.0f);
			break;
		case SET_EQUAL:
			g[i] = 0.5f;
			break;
		case SET_SPECIAL:
			g[i] = rng() % 4 == 0
			    ? special[rng() %
				  (sizeof(special) / sizeof(special[0]))]
			    : unif();
			break;
		default:
			g[i] = unif();
			break;
		}
	}
}

static const uint64_t sizes[] = { 0, 1, 7, 31, 33, 1023, 1025, 2047, 4097,
	10007, 20001, 32769, 65537 };
#define N_SIZES (sizeof(sizes) / sizeof(sizes[0]))
#define MAX_N   65537

/* Buffers shared by the tests (static: too large for the stack). */
static float g[MAX_N], res_a[MAX_N], res_b[MAX_N], out_a[MAX_N], out_b[MAX_N];
static uint8_t codes_a[MAX_N / 4 + 64], codes_b[MAX_N / 4 + 64];
static uint8_t idx_a[4 * MAX_N], idx_b[4 * MAX_N], val_a[4 * MAX_N],
    val_b[4 * MAX_N];
static uint16_t half[MAX_N];

static kern_codec_par *
open_par(uint32_t parts)
{
	kern_codec_par *p = NULL;

	assert_int_equal(kern_codec_par_new(parts, 1, &p), 0);
	assert_int_equal(kern_codec_par_parts(p), parts);
	return p;
}

/* 1-bit and 2-bit: every thread count gives one call's bytes. */
static void
test_quantisers_same_bytes_on_every_thread_count(void **state)
{
	(void)state;
	for (int isa = KERN_ISA_SCALAR; isa <= KERN_ISA_LAST; isa++) {
		const kern_codec_fns *f = kern_codec_get(isa);

		if (f == NULL)
			continue;
		for (uint32_t parts = 1; parts <= MAX_PARTS; parts++) {
			kern_codec_par *p = open_par(parts);

			for (size_t si = 0; si < N_SIZES; si++) {
				uint64_t n = sizes[si];

				for (int bits = 1; bits <= 2; bits++) {
					uint64_t bytes = kern_codec_bytes(bits,
					    n);

					memset(res_a, 0, sizeof(res_a));
					memset(res_b, 0, sizeof(res_b));
					for (int step = 0; step < 3; step++) {
						fill((enum set)((si + step) %
							 SET_COUNT),
						    g, n);
						memset(codes_a, 0xa5, bytes);
						memset(codes_b, 0x5a, bytes);
						(bits == 1 ? f->enc1
							   : f->enc2)(g, res_a,
						    n, 0.5f, codes_a);
						kern_codec_par_encode(p, f,
						    bits, 0.5f, KERN_F32, g,
						    res_b, n, codes_b);
						assert_memory_equal(codes_a,
						    codes_b, bytes);
						assert_memory_equal(res_a,
						    res_b, n * 4);
					}
					for (int add = 0; add <= 1; add++) {
						fill(SET_RANDOM, out_a, n);
						memcpy(out_b, out_a, n * 4);
						(bits == 1 ? f->dec1
							   : f->dec2)(codes_a,
						    n, 0.5f, out_a, add);
						kern_codec_par_decode(p, f,
						    bits, 0.5f, codes_a, n,
						    out_b, add);
						assert_memory_equal(out_a,
						    out_b, n * 4);
					}
				}
			}
			kern_codec_par_destroy(&p);
			assert_null(p);
		}
	}
}

static uint64_t
k_of(int which, uint64_t n)
{
	switch (which) {
	case 0:
		return 0;
	case 1:
		return n > 0 ? 1 : 0;
	case 2:
		return n / 100;
	case 3:
		return n / 2;
	case 4:
		return n > 0 ? n - 1 : 0;
	default:
		return n;
	}
}

/* Top-k: every thread count selects what kern_topk_encode_isa does. */
static void
test_topk_same_selection_on_every_thread_count(void **state)
{
	(void)state;
	for (int isa = KERN_ISA_SCALAR; isa <= KERN_ISA_LAST; isa++) {
		if (!kern_cpu_isa_supported(isa))
			continue;
		for (uint32_t parts = 1; parts <= MAX_PARTS; parts += 1) {
			kern_codec_par *p = open_par(parts);

			for (size_t si = 0; si < N_SIZES; si++) {
				uint64_t n = sizes[si];

				for (int s = 0; s < SET_COUNT; s++)
					for (int kw = 0; kw < 6; kw++) {
						uint64_t k = k_of(kw, n);

						memset(res_a, 0, n * 4);
						memset(res_b, 0, n * 4);
						for (int step = 0; step < 2;
						     step++) {
							fill((enum set)s, g, n);
							kern_topk_encode_isa(
							    isa, g, res_a, n, k,
							    idx_a, val_a);
							kern_codec_par_topk(p,
							    isa, KERN_F32, g,
							    res_b, n, k, idx_b,
							    val_b);
							assert_memory_equal(
							    idx_a, idx_b,
							    k * 4);
							assert_memory_equal(
							    val_a, val_b,
							    k * 4);
							assert_memory_equal(
							    res_a, res_b,
							    n * 4);
						}
					}
			}
			kern_codec_par_destroy(&p);
		}
	}
}

/* Half-precision bit patterns: random, with NaN, infinities,
 * subnormals and zeros among them. */
static void
fill_half(uint16_t *h, uint64_t n, int dtype)
{
	static const uint16_t f16_special[] = { 0x7e00, 0x7c00, 0xfc00, 0x0001,
		0x8001, 0x03ff, 0x0000, 0x8000, 0x7bff, 0x3800 };
	static const uint16_t bf16_special[] = { 0x7fc0, 0x7f80, 0xff80, 0x0001,
		0x8001, 0x007f, 0x0000, 0x8000, 0x7f7f, 0x3f00 };

	for (uint64_t i = 0; i < n; i++) {
		float v = unif();
		uint32_t b;

		if (rng() % 5 == 0) {
			h[i] = (dtype == KERN_F16 ? f16_special
						  : bf16_special)[rng() % 10];
			continue;
		}
		if (dtype == KERN_BF16) {
			memcpy(&b, &v, 4);
			h[i] = (uint16_t)(b >> 16);
		} else {
			/* A float16 in [-1, 1): sign, exponent 0..14, and
			 * a random mantissa. */
			h[i] = (uint16_t)((rng() % 2) << 15 |
			    (rng() % 15) << 10 | (rng() % 1024));
		}
	}
}

/* float16 and bfloat16: the same as float32 on the widened values. */
static void
test_half_precision_as_float32_widened(void **state)
{
	(void)state;
	for (int dtype = KERN_F16; dtype <= KERN_BF16; dtype++)
		for (int isa = KERN_ISA_SCALAR; isa <= KERN_ISA_LAST; isa++) {
			const kern_codec_fns *f = kern_codec_get(isa);

			if (f == NULL)
				continue;
			for (uint32_t parts = 1; parts <= 3; parts++) {
				kern_codec_par *p = open_par(parts);

				for (size_t si = 0; si < N_SIZES; si++) {
					uint64_t n = sizes[si];

					fill_half(half, n, dtype);
					for (uint64_t i = 0; i < n; i++)
						g[i] = kern_load(half, i,
						    dtype);
					for (int bits = 1; bits <= 2; bits++) {
						memset(res_a, 0, n * 4);
						memset(res_b, 0, n * 4);
						(bits == 1 ? f->enc1
							   : f->enc2)(g, res_a,
						    n, 0.5f, codes_a);
						kern_codec_par_encode(p, f,
						    bits, 0.5f, dtype, half,
						    res_b, n, codes_b);
						assert_memory_equal(codes_a,
						    codes_b,
						    kern_codec_bytes(bits, n));
						assert_memory_equal(res_a,
						    res_b, n * 4);
					}
					for (int kw = 0; kw < 6; kw++) {
						uint64_t k = k_of(kw, n);

						memset(res_a, 0, n * 4);
						memset(res_b, 0, n * 4);
						kern_topk_encode_isa(isa, g,
						    res_a, n, k, idx_a, val_a);
						kern_codec_par_topk(p, isa,
						    dtype, half, res_b, n, k,
						    idx_b, val_b);
						assert_memory_equal(idx_a,
						    idx_b, k * 4);
						assert_memory_equal(val_a,
						    val_b, k * 4);
						assert_memory_equal(res_a,
						    res_b, n * 4);
					}
				}
				kern_codec_par_destroy(&p);
			}
		}
}

/* The public API: every thread setting gives the same bytes. */
static void
test_api_threads_and_dtypes(void **state)
{
	enum {
		N = 300007
	};
	static float grad[N], res[N], ref_res[N], wide[N];
	static uint8_t codes[N / 4 + 64], ref_codes[N / 4 + 64];
	static uint32_t idx[N], ref_idx[N];
	static float val[N], ref_val[N];
	static uint16_t h[N];
	size_t cap = bellows_codec_codes_bytes(BELLOWS_CODEC_2BIT, N);
	uint64_t k = N / 100;

	(void)state;
	fill(SET_SPECIAL, grad, N);
	assert_int_equal(bellows_codec_set_threads(1, 0), 0);
	assert_int_equal(bellows_codec_threads(), 1);
	memset(ref_res, 0, sizeof(ref_res));
	assert_int_equal(bellows_codec_encode_codes(BELLOWS_CODEC_2BIT, 0.5f,
			     grad, ref_res, N, ref_codes, cap),
	    0);
	memset(res, 0, sizeof(res));
	assert_int_equal(bellows_codec_topk_encode(grad, res, N, k, ref_idx,
			     ref_val),
	    0);
	for (uint32_t t = 1; t <= MAX_PARTS; t++) {
		assert_int_equal(bellows_codec_set_threads(t, 4096), 0);
		assert_int_equal(bellows_codec_threads(), t);
		memset(res, 0, sizeof(res));
		assert_int_equal(bellows_codec_encode_codes(BELLOWS_CODEC_2BIT,
				     0.5f, grad, res, N, codes, cap),
		    0);
		assert_memory_equal(codes, ref_codes, cap);
		assert_memory_equal(res, ref_res, sizeof(res));
		memset(res, 0, sizeof(res));
		assert_int_equal(bellows_codec_topk_encode(grad, res, N, k, idx,
				     val),
		    0);
		assert_memory_equal(idx, ref_idx, k * 4);
		assert_memory_equal(val, ref_val, k * 4);
	}
	/* float16 through the API: what float32 gives on the widened
	 * values. */
	fill_half(h, N, KERN_F16);
	for (uint64_t i = 0; i < N; i++)
		wide[i] = kern_load(h, i, KERN_F16);
	memset(ref_res, 0, sizeof(ref_res));
	assert_int_equal(bellows_codec_encode_codes(BELLOWS_CODEC_1BIT, 0.0f,
			     wide, ref_res, N, ref_codes, cap),
	    0);
	memset(res, 0, sizeof(res));
	assert_int_equal(bellows_codec_encode_codes_dtype(BELLOWS_CODEC_1BIT,
			     0.0f, KERN_F16, h, res, N, codes, cap),
	    0);
	assert_memory_equal(codes, ref_codes,
	    bellows_codec_codes_bytes(BELLOWS_CODEC_1BIT, N));
	assert_memory_equal(res, ref_res, sizeof(res));
	memset(ref_res, 0, sizeof(ref_res));
	memset(res, 0, sizeof(res));
	assert_int_equal(bellows_codec_topk_encode(wide, ref_res, N, k, ref_idx,
			     ref_val),
	    0);
	assert_int_equal(bellows_codec_topk_encode_dtype(KERN_F16, h, res, N, k,
			     idx, val),
	    0);
	assert_memory_equal(idx, ref_idx, k * 4);
	assert_memory_equal(val, ref_val, k * 4);
	assert_memory_equal(res, ref_res, sizeof(res));
	/* Refused: another dtype, too many threads. */
	assert_int_equal(bellows_codec_encode_codes_dtype(BELLOWS_CODEC_1BIT,
			     0.0f, 3, h, res, N, codes, cap),
	    BELLOWS_EINVAL);
	assert_int_equal(bellows_codec_topk_encode_dtype(-1, h, res, N, k, idx,
			     val),
	    BELLOWS_EINVAL);
	assert_int_equal(bellows_codec_set_threads(KERN_MAX_THREADS + 2, 0),
	    BELLOWS_EINVAL);
	assert_int_equal(kern_codec_par_new(0, 0, &(kern_codec_par *){ NULL }),
	    BELLOWS_EINVAL);
	assert_int_equal(bellows_codec_set_threads(0, 0), 0);
	assert_true(bellows_codec_threads() >= 1);
	assert_int_equal(bellows_codec_set_threads(1, 0), 0);
	assert_int_equal(bellows_codec_threads(), 1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(
		    test_quantisers_same_bytes_on_every_thread_count),
		cmocka_unit_test(
		    test_topk_same_selection_on_every_thread_count),
		cmocka_unit_test(test_half_precision_as_float32_widened),
		cmocka_unit_test(test_api_threads_and_dtypes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
