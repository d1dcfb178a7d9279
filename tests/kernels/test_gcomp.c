/* test_gcomp - the GComp codec through bellows/codec.h: bit-exact round
 * trips at level 0 (float32, bfloat16, float16), each value's error within
 * its level's truncation, the paper's delta and the levels it picks against
 * hand-computed values for every optimizer, the block's errors with their
 * offsets, and a bounded fuzz of the decoder (truncations, bit flips,
 * random bytes) that must never crash or read outside the buffer. The
 * codec's fast path (the default) must write and read the same blocks as
 * its reference path, byte for byte, also for the fuzzed ones.
 *
 * `test_kern_gcomp fuzz SECONDS` runs only the fuzz, for that long. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <bellows/codec.h>

#include "kernels/cpu/kern_gcomp.h"
#include "kernels/kernels.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15u;

static uint64_t
rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static uint32_t
f32_bits(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	return u;
}

/* Gradient-like float32: half zeros, magnitudes around 2^-20, a few
 * random bit patterns (any exponent but 0 when normal_only). */
static void
fill_gradient(float *x, size_t n, int normal_only)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t r = rng();

		if (r % 16 == 0) {
			uint32_t u = (uint32_t)(r >> 16);

			if (normal_only && ((u >> 23) & 0xffu) == 0)
				u |= 1u << 23;
			memcpy(&x[i], &u, 4);
		} else if (!normal_only && r % 2 == 0) {
			x[i] = 0.0f;
		} else {
			x[i] = ldexpf((float)((r >> 20) % 100000) / 100000.0f -
				0.5f,
			    -(int)((r >> 40) % 30));
			if (x[i] == 0.0f)
				x[i] = 1.0f;
		}
	}
}

static bellows_gcomp_table *
table_of(int dtype, const void *x, size_t n, unsigned bits, uint32_t version)
{
	uint64_t hist[256] = { 0 };
	bellows_gcomp_table *t = NULL;

	assert_int_equal(bellows_gcomp_histogram(dtype, x, n, hist), 0);
	assert_int_equal(bellows_gcomp_table_build(hist, bits, version, &t), 0);
	return t;
}

/* Level 0 gives back every normal float32 bit for bit (Inf and NaN
 * included), with tables from the data, from other data (many escapes) and
 * with short max_code_bits; zero and subnormals come back +0. */
static void
test_level_0_round_trips_every_normal_float32_bit_exactly(void **state)
{
	size_t sizes[] = { 0, 1, 7, 8191, 8192, 8193, 100000 };

	(void)state;
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		size_t n = sizes[k];
		float *x = malloc((n + 1) * 4), *y = malloc((n + 1) * 4);
		size_t cap = bellows_gcomp_bound(BELLOWS_GCOMP_F32, n), len;
		uint8_t *buf = malloc(cap);
		uint64_t one[256] = { 0 };
		bellows_gcomp_table *tabs[3];

		fill_gradient(x, n, 1);
		tabs[0] = table_of(BELLOWS_GCOMP_F32, x, n, 8, 1);
		one[120] = 1; /* everything else escaped */
		assert_int_equal(bellows_gcomp_table_build(one, 8, 2, &tabs[1]),
		    0);
		tabs[2] = table_of(BELLOWS_GCOMP_F32, x, n, 3, 3);
		for (int t = 0; t < 3; t++) {
			bellows_gcomp_stats st;

			assert_int_equal(bellows_gcomp_encode(tabs[t],
					     BELLOWS_GCOMP_F32, x, n, 0, NULL,
					     buf, cap, &len, &st),
			    0);
			assert_true(len <= cap);
			assert_int_equal(st.values, n);
			assert_int_equal(st.bytes, len);
			memset(y, 0xa5, (n + 1) * 4);
			assert_int_equal(bellows_gcomp_decode(tabs[t], buf, len,
					     BELLOWS_GCOMP_F32, y, n, 0, NULL,
					     0),
			    0);
			for (size_t i = 0; i < n; i++)
				assert_int_equal(f32_bits(x[i]),
				    f32_bits(y[i]));
			assert_int_equal(f32_bits(y[n]), 0xa5a5a5a5u);
		}
		for (int t = 0; t < 3; t++)
			bellows_gcomp_table_destroy(&tabs[t]);
		assert_null(tabs[0]);
		free(x);
		free(y);
		free(buf);
	}
}

/* Zeros and subnormals (symbol 0) cost their code alone, decode to +0. */
static void
test_zero_and_subnormals_send_only_the_exponent_code(void **state)
{
	float x[64], y[64];
	uint8_t buf[1024];
	size_t len;
	bellows_gcomp_stats st;
	bellows_gcomp_table *t;

	(void)state;
	for (int i = 0; i < 64; i++)
		x[i] = i % 3 == 0 ? -0.0f : i % 3 == 1 ? 1e-40f : 0.0f;
	t = table_of(BELLOWS_GCOMP_F32, x, 64, 8, 5);
	assert_int_equal(bellows_gcomp_encode(t, BELLOWS_GCOMP_F32, x, 64, 3,
			     NULL, buf, sizeof(buf), &len, &st),
	    0);
	assert_int_equal(st.zeros, 64);
	assert_int_equal(st.exp_bits, 64); /* one 1-bit code each */
	assert_int_equal(st.level_bits, 0);
	assert_int_equal(st.mant_bits, 0);
	assert_int_equal(bellows_gcomp_decode(t, buf, len, BELLOWS_GCOMP_F32, y,
			     64, 0, NULL, 0),
	    0);
	for (int i = 0; i < 64; i++)
		assert_int_equal(f32_bits(y[i]), 0);
	bellows_gcomp_table_destroy(&t);
}

/* At level L every value comes back as itself with its T[L] low mantissa
 * bits cleared (plain truncation, so |error| < 2^(T-23) relative), levels
 * given per value; Inf and NaN always whole. */
static void
test_each_value_is_truncated_by_its_own_level_only(void **state)
{
	static const unsigned T[4] = { 0, 6, 12, 18 };
	size_t n = 50000, cap = bellows_gcomp_bound(BELLOWS_GCOMP_F32, n), len;
	float *x = malloc(n * 4), *y = malloc(n * 4);
	uint8_t *lv = malloc(n), *buf = malloc(cap);
	bellows_gcomp_stats st;
	bellows_gcomp_table *t;
	uint64_t per[4] = { 0 };

	(void)state;
	fill_gradient(x, n, 0);
	x[0] = INFINITY;
	x[1] = -NAN;
	memcpy(&x[2], &(uint32_t){ 0x7f800001u }, 4); /* NaN, low payload */
	for (size_t i = 0; i < n; i++)
		lv[i] = (uint8_t)(rng() % 4);
	t = table_of(BELLOWS_GCOMP_F32, x, n, 8, 9);
	assert_int_equal(bellows_gcomp_encode(t, BELLOWS_GCOMP_F32, x, n, 0, lv,
			     buf, cap, &len, &st),
	    0);
	assert_int_equal(bellows_gcomp_decode(t, buf, len, BELLOWS_GCOMP_F32, y,
			     n, 0, NULL, 0),
	    0);
	for (size_t i = 0; i < n; i++) {
		uint32_t u = f32_bits(x[i]), e = (u >> 23) & 0xffu;
		uint32_t want;

		if (e == 0) {
			want = 0;
		} else if (e == 255) {
			want = u;
			per[0]++;
		} else {
			want = u & ~((1u << T[lv[i]]) - 1u);
			per[lv[i]]++;
			assert_true(
			    fabs((double)y[i] - x[i]) <= fabs((double)x[i]) *
				ldexp(1.0, (int)T[lv[i]] - 23));
		}
		assert_int_equal(f32_bits(y[i]), want);
	}
	for (int l = 0; l < 4; l++)
		assert_int_equal(st.levels[l], per[l]);
	/* One level for the whole tensor: level 3 is smaller than level 0. */
	{
		size_t len3;

		assert_int_equal(bellows_gcomp_encode(t, BELLOWS_GCOMP_F32, x,
				     n, 3, NULL, buf, cap, &len3, NULL),
		    0);
		assert_true(len3 < len);
	}
	bellows_gcomp_table_destroy(&t);
	free(x);
	free(y);
	free(lv);
	free(buf);
}

/* bfloat16 and float16: all 65,536 bit patterns. Level 0 returns each
 * (bfloat16 subnormals and -0 too, in format 2; float16 subnormals
 * exactly, its -0 as +0); level 3 clears
 * the 6 (bfloat16) or 9 (float16) low mantissa bits. */
static void
test_bf16_and_f16_map_to_their_own_exponent_ranges(void **state)
{
	size_t n = 65536;
	uint16_t *x = malloc(n * 2), *y = malloc(n * 2);
	int dtypes[2] = { BELLOWS_GCOMP_BF16, BELLOWS_GCOMP_F16 };

	(void)state;
	for (size_t i = 0; i < n; i++)
		x[i] = (uint16_t)i;
	for (int d = 0; d < 2; d++) {
		int dt = dtypes[d];
		size_t cap = bellows_gcomp_bound(dt, n), len;
		uint8_t *buf = malloc(cap);
		bellows_gcomp_table *t = table_of(dt, x, n, 8, 4);

		for (int level = 0; level <= 3; level += 3) {
			assert_int_equal(bellows_gcomp_encode(t, dt, x, n,
					     level, NULL, buf, cap, &len, NULL),
			    0);
			assert_int_equal(bellows_gcomp_decode(t, buf, len, dt,
					     y, n, 0, NULL, 0),
			    0);
			for (size_t i = 0; i < n; i++) {
				uint16_t h = x[i], want = h;

				if (dt == BELLOWS_GCOMP_BF16) {
					unsigned e = (h >> 7) & 0xffu;

					if (e == 0)
						want = level == 0 ? h : 0;
					else if (e != 255 && level == 3)
						want = h & ~0x3fu;
				} else {
					unsigned e = (h >> 10) & 0x1fu;

					if (e == 0 && (h & 0x3ffu) == 0)
						want = 0;
					else if (e != 31 && e != 0 &&
					    level == 3)
						want = h & ~0x1ffu;
					else if (e == 0 && level == 3)
						continue; /* normalised first */
				}
				assert_int_equal(y[i], want);
			}
		}
		bellows_gcomp_table_destroy(&t);
		free(buf);
	}
	free(x);
	free(y);
}

/* delta (Table 2) against values computed by hand (see the comments),
 * and the level each gives: > 2^18: 3, > 2^12: 2, > 2^6: 1. */
static void
test_delta_levels_match_hand_computed_values_per_optimizer(void **state)
{
	float th[1], b[1], m[1], v[1];
	kern_gcomp_opt o;
	uint8_t lv[1];
	float g[1];

	(void)state;
	/* SGD: theta / (eta g) - lambda theta / g = 1 / (0.1 * 2^-10)
	 * = 10240 -> level 2. */
	th[0] = 1.0f;
	g[0] = 0x1p-10f;
	o = (kern_gcomp_opt){ .kind = KERN_GCOMP_SGD, .lr = 0.1, .param = th };
	assert_true(fabs(kern_gcomp_delta(&o, 0, g[0]) - 10240.0) < 1e-6);
	assert_int_equal(kern_gcomp_levels(&o, 0, g, 1, 3, lv), 0);
	assert_int_equal(lv[0], 2);
	/* SGD with weight decay: 3 / (0.01 * 0.25) - 0.001 * 3 / 0.25 =
	 * 1200 - 0.012 = 1199.988 -> level 1; capped at 0 -> 0. */
	th[0] = 3.0f;
	g[0] = 0.25f;
	o = (kern_gcomp_opt){ .kind = KERN_GCOMP_SGD,
		.lr = 0.01,
		.weight_decay = 0.001,
		.param = th };
	assert_true(fabs(kern_gcomp_delta(&o, 0, g[0]) - 1199.988) < 1e-3);
	assert_int_equal(kern_gcomp_levels(&o, 0, g, 1, 3, lv), 0);
	assert_int_equal(lv[0], 1);
	assert_int_equal(kern_gcomp_levels(&o, 0, g, 1, 0, lv), 0);
	assert_int_equal(lv[0], 0);
	/* Momentum: (1 - 0.1 * 0.9 * 0.5) / (0.1 * 1 * 1e-3) - 0.01 / 1e-3 =
	 * 9550 - 10 = 9540 -> level 2. */
	th[0] = 1.0f;
	b[0] = 0.5f;
	g[0] = 1e-3f;
	o = (kern_gcomp_opt){ .kind = KERN_GCOMP_MOMENTUM,
		.lr = 0.1,
		.momentum = 0.9,
		.weight_decay = 0.01,
		.param = th,
		.buf = b };
	assert_true(fabs(kern_gcomp_delta(&o, 0, g[0]) - 9540.0) < 1e-3);
	assert_int_equal(kern_gcomp_levels(&o, 0, g, 1, 3, lv), 0);
	assert_int_equal(lv[0], 2);
	/* Momentum, dampening 0.5, negative g and b:
	 * (2 - 0.05 * 0.9 * -4) / (0.05 * 0.5 * -1e-6) = -8.72e7:
	 * |delta| > 2^18 -> level 3; max_level 1 -> 1. */
	th[0] = 2.0f;
	b[0] = -4.0f;
	g[0] = -1e-6f;
	o = (kern_gcomp_opt){ .kind = KERN_GCOMP_MOMENTUM,
		.lr = 0.05,
		.momentum = 0.9,
		.dampening = 0.5,
		.param = th,
		.buf = b };
	assert_true(fabs(kern_gcomp_delta(&o, 0, g[0]) / -8.72e7 - 1.0) < 1e-6);
	assert_int_equal(kern_gcomp_levels(&o, 0, g, 1, 3, lv), 0);
	assert_int_equal(lv[0], 3);
	assert_int_equal(kern_gcomp_levels(&o, 0, g, 1, 1, lv), 0);
	assert_int_equal(lv[0], 1);
	/* No momentum buffer yet: SGD's delta, 2 / (0.05 * -1e-6) = -4e7. */
	o.buf = NULL;
	assert_true(fabs(kern_gcomp_delta(&o, 0, g[0]) / -4e7 - 1.0) < 1e-6);
	/* Adam, t = 10: v_t = 0.999e-6 + 0.001 * 1e-6 = 1e-6,
	 * vh = 1e-6 / (1 - 0.999^10), c1 = 1 - 0.9^10;
	 * (0.5 (sqrt(vh) + 1e-8) c1 - 1e-3 * 0.9 * 1e-3) / (1e-3 * 0.1 * 1e-3)
	 * = 32630.436 -> level 2. */
	th[0] = 0.5f;
	m[0] = 1e-3f;
	v[0] = 1e-6f;
	g[0] = 1e-3f;
	o = (kern_gcomp_opt){ .kind = KERN_GCOMP_ADAM,
		.lr = 1e-3,
		.beta1 = 0.9,
		.beta2 = 0.999,
		.eps = 1e-8,
		.step = 10,
		.param = th,
		.exp_avg = m,
		.exp_avg_sq = v };
	assert_true(
	    fabs(kern_gcomp_delta(&o, 0, g[0]) / 32630.436089 - 1.0) < 1e-5);
	assert_int_equal(kern_gcomp_levels(&o, 0, g, 1, 3, lv), 0);
	assert_int_equal(lv[0], 2);
	/* AdamW, lambda 0.01: the numerator times (1 - 1e-5): 32630.1097. */
	o.kind = KERN_GCOMP_ADAMW;
	o.weight_decay = 0.01;
	assert_true(
	    fabs(kern_gcomp_delta(&o, 0, g[0]) / 32630.109695 - 1.0) < 1e-5);
	assert_int_equal(kern_gcomp_levels(&o, 0, g, 1, 3, lv), 0);
	assert_int_equal(lv[0], 2);
	/* Adam's first step (m = v = 0): vh = g^2, so
	 * delta = 0.02 (0.5 + 1e-8) * 0.1 / (1e-3 * 0.1 * 0.5) = 20.0000004
	 * -> level 0. */
	th[0] = 0.02f;
	g[0] = 0.5f;
	o = (kern_gcomp_opt){ .kind = KERN_GCOMP_ADAM,
		.lr = 1e-3,
		.beta1 = 0.9,
		.beta2 = 0.999,
		.eps = 1e-8,
		.step = 1,
		.param = th };
	assert_true(fabs(kern_gcomp_delta(&o, 0, g[0]) - 20.0000004) < 1e-5);
	assert_int_equal(kern_gcomp_levels(&o, 0, g, 1, 3, lv), 0);
	assert_int_equal(lv[0], 0);
	/* A zero parameter: delta 0, level 0; a grad_scale of 1/4 makes the
	 * applied g smaller and delta 4 times larger. */
	th[0] = 0.0f;
	assert_int_equal(kern_gcomp_levels(&o, 0, g, 1, 3, lv), 0);
	assert_int_equal(lv[0], 0);
	th[0] = 1.0f;
	g[0] = 0x1p-10f;
	o = (kern_gcomp_opt){ .kind = KERN_GCOMP_SGD,
		.lr = 0.1,
		.grad_scale = 0.25,
		.param = th };
	assert_int_equal(kern_gcomp_levels(&o, 0, g, 1, 3, lv), 0);
	assert_int_equal(lv[0], 2); /* 40960 */
	g[0] = 0x1p-16f;            /* 2621440 */
	assert_int_equal(kern_gcomp_levels(&o, 0, g, 1, 3, lv), 0);
	assert_int_equal(lv[0], 3);
	/* The public wrapper gives the same. */
	{
		bellows_gcomp_optimizer po = { .kind = BELLOWS_GCOMP_SGD,
			.lr = 0.1,
			.grad_scale = 0.25,
			.param = th };

		lv[0] = 9;
		assert_int_equal(bellows_gcomp_levels(&po, BELLOWS_GCOMP_F32, g,
				     1, 3, lv),
		    0);
		assert_int_equal(lv[0], 3);
		po.kind = 99;
		assert_int_equal(bellows_gcomp_levels(&po, BELLOWS_GCOMP_F32, g,
				     1, 3, lv),
		    BELLOWS_EINVAL);
	}
}

/* The AVX2 build of the levels gives the portable C's levels, value for
 * value, for every optimizer, on gradients with zeros, NaN, Inf and
 * subnormals, parameters with zeros, and every max_level. */
static void
test_levels_are_the_same_on_every_isa(void **state)
{
	size_t n = 20011;
	float *g = malloc(n * 4), *th = malloc(n * 4), *b = malloc(n * 4);
	float *m = malloc(n * 4), *v = malloc(n * 4);
	uint8_t *ls = malloc(n), *lv = malloc(n);
	int kinds[5] = { KERN_GCOMP_SGD, KERN_GCOMP_MOMENTUM,
		KERN_GCOMP_NESTEROV, KERN_GCOMP_ADAM, KERN_GCOMP_ADAMW };
	uint64_t hist[4] = { 0 };

	(void)state;
	fill_gradient(g, n, 0);
	if (kern_gcomp_levels_isa(KERN_ISA_AVX2,
		&(kern_gcomp_opt){ .kind = KERN_GCOMP_SGD,
		    .lr = 1,
		    .param = th },
		KERN_F32, g, 0, 3, ls) == BELLOWS_ENOTSUP) {
		skip();
	}
	for (size_t i = 0; i < n; i++) {
		th[i] = i % 11 == 0 ? 0.0f
				    : (float)(rng() % 2000) / 1000.0f - 1;
		b[i] = (float)(rng() % 2000) / 1e5f - 0.01f;
		m[i] = (float)(rng() % 2000) / 1e6f;
		v[i] = (float)(rng() % 2000) / 1e9f;
	}
	g[0] = INFINITY;
	g[1] = NAN;
	g[2] = 1e-40f;
	for (int k = 0; k < 5; k++) {
		for (int withbuf = 0; withbuf < 2; withbuf++) {
			kern_gcomp_opt o = { .kind = kinds[k],
				.lr = 0.01 + 0.05 * k,
				.weight_decay = withbuf ? 1e-2 : 0,
				.momentum = 0.9,
				.dampening = withbuf ? 0.1 : 0,
				.beta1 = 0.9,
				.beta2 = 0.999,
				.eps = 1e-8,
				.step = 1 + 37 * (uint64_t)withbuf,
				.param = th,
				.buf = withbuf ? b : NULL,
				.exp_avg = m,
				.exp_avg_sq = withbuf ? v : NULL };

			for (int max = 0; max <= 3; max++) {
				assert_int_equal(
				    kern_gcomp_levels_isa(KERN_ISA_SCALAR, &o,
					KERN_F32, g, n, max, ls),
				    0);
				assert_int_equal(
				    kern_gcomp_levels_isa(KERN_ISA_AVX2, &o,
					KERN_F32, g, n, max, lv),
				    0);
				assert_memory_equal(ls, lv, n);
			}
			for (size_t i = 0; i < n; i++)
				hist[ls[i]]++;
		}
	}
	/* Every level occurs, so the comparison covers them all. */
	for (int l = 0; l < 4; l++)
		assert_true(hist[l] > 0);
	free(g);
	free(th);
	free(b);
	free(m);
	free(v);
	free(ls);
	free(lv);
}

/* Bad blocks: each refused with its code and an offset in the message. */
static void
test_bad_blocks_are_refused_with_their_offset(void **state)
{
	size_t n = 20000, cap = bellows_gcomp_bound(BELLOWS_GCOMP_F32, n), len;
	float *x = malloc(n * 4), *y = malloc(n * 4);
	uint8_t *buf = malloc(cap), *bad = malloc(cap);
	bellows_gcomp_table *t, *t2;
	char err[256];

	(void)state;
	fill_gradient(x, n, 0);
	t = table_of(BELLOWS_GCOMP_F32, x, n, 8, 11);
	t2 = table_of(BELLOWS_GCOMP_F32, x, n, 8, 12);
	assert_int_equal(bellows_gcomp_encode(t, BELLOWS_GCOMP_F32, x, n, 1,
			     NULL, buf, cap, &len, NULL),
	    0);
	assert_int_equal(bellows_gcomp_encode(t, BELLOWS_GCOMP_F32, x, n, 1,
			     NULL, buf, 100, NULL, NULL),
	    BELLOWS_EMSGSIZE);

	memcpy(bad, buf, len);
	bad[1] = 'X';
	assert_int_equal(bellows_gcomp_decode(t, bad, len, BELLOWS_GCOMP_F32, y,
			     n, 0, err, sizeof(err)),
	    BELLOWS_EPROTO);
	assert_non_null(strstr(err, "byte 0"));

	assert_int_equal(bellows_gcomp_decode(t, buf, len - 1,
			     BELLOWS_GCOMP_F32, y, n, 0, err, sizeof(err)),
	    BELLOWS_EPROTO);
	assert_non_null(strstr(err, "truncated"));
	assert_int_equal(bellows_gcomp_decode(t, buf, 20, BELLOWS_GCOMP_F32, y,
			     n, 0, err, sizeof(err)),
	    BELLOWS_EPROTO);
	assert_non_null(strstr(err, "byte 20"));

	assert_int_equal(bellows_gcomp_decode(t2, buf, len, BELLOWS_GCOMP_F32,
			     y, n, 0, err, sizeof(err)),
	    BELLOWS_EMISMATCH);
	assert_non_null(strstr(err, "table version 11"));

	assert_int_equal(bellows_gcomp_decode(t, buf, len, BELLOWS_GCOMP_F32, y,
			     n - 1, 0, err, sizeof(err)),
	    BELLOWS_EMISMATCH);

	/* A truncated chunk: its header claims more than the block holds. */
	memcpy(bad, buf, len);
	bad[KERN_GCOMP_HEADER + 12] ^= 0xff; /* chunk 0's exponent bits */
	bad[KERN_GCOMP_HEADER + 13] ^= 0xff;
	bad[KERN_GCOMP_HEADER + 14] ^= 0x7f;
	assert_int_equal(bellows_gcomp_decode(t, bad, len, BELLOWS_GCOMP_F32, y,
			     n, 0, err, sizeof(err)),
	    BELLOWS_EPROTO);
	assert_non_null(strstr(err, "chunk 0"));

	memcpy(bad, buf, len);
	bad[4] = 9;
	assert_int_equal(bellows_gcomp_decode(t, bad, len, BELLOWS_GCOMP_F32, y,
			     n, 0, err, sizeof(err)),
	    BELLOWS_EVERSION);

	/* Trailing bytes after the block are not read (all-gather pads). */
	assert_int_equal(bellows_gcomp_decode(t, buf, cap, BELLOWS_GCOMP_F32, y,
			     n, 0, err, sizeof(err)),
	    0);
	/* ADD sums into out. */
	for (size_t i = 0; i < n; i++)
		y[i] = 1.0f;
	assert_int_equal(bellows_gcomp_decode(t, buf, len, BELLOWS_GCOMP_F32, y,
			     n, BELLOWS_CODEC_ADD, err, sizeof(err)),
	    0);
	{
		float *z = malloc(n * 4);

		assert_int_equal(bellows_gcomp_decode(t, buf, len,
				     BELLOWS_GCOMP_F32, z, n, 0, NULL, 0),
		    0);
		for (size_t i = 0; i < n; i++)
			assert_true(
			    isnan(z[i]) ? isnan(y[i]) : y[i] == 1.0f + z[i]);
		free(z);
	}
	bellows_gcomp_table_destroy(&t);
	bellows_gcomp_table_destroy(&t2);
	free(x);
	free(y);
	free(buf);
	free(bad);
}

/* The fuzz: corrupt good blocks (bit flips, byte runs, truncations, random
 * headers) and decode; a return of 0 or an error, never a crash or a read
 * outside the buffer (each copy is exactly its length, for ASan). */
/* Encodes x with both paths and checks the same return code, block and
 * stats; then decodes it (set and, for float32, add) with both, and a
 * copy with a few bits flipped, for the same values, codes and messages. */
static void
check_paths(const bellows_gcomp_table *t, int dtype, const void *x, size_t n,
    int level, const uint8_t *levels, size_t cap)
{
	size_t esz = dtype == BELLOWS_GCOMP_F32 ? 4 : 2;
	uint8_t *b[2];
	void *y[2];
	size_t len[2] = { 0, 0 };
	bellows_gcomp_stats st[2];
	char err[2][256];
	int rc[2];

	for (int p = 0; p < 2; p++) {
		b[p] = calloc(cap + 1, 1);
		y[p] = calloc(n + 1, esz);
		memset(&st[p], 0, sizeof(st[p]));
		bellows_gcomp_force_reference(p);
		rc[p] = bellows_gcomp_encode(t, dtype, x, n, level, levels,
		    b[p], cap, &len[p], &st[p]);
	}
	bellows_gcomp_force_reference(0);
	assert_int_equal(rc[1], rc[0]);
	if (rc[0] == 0) {
		assert_int_equal(len[1], len[0]);
		assert_memory_equal(b[1], b[0], len[0]);
		assert_memory_equal(&st[1], &st[0], sizeof(st[0]));
		for (int add = 0; add <= (dtype == BELLOWS_GCOMP_F32); add++) {
			for (int f = 0; f < 2; f++) {
				uint8_t *c = malloc(len[0] + 1);

				memcpy(c, b[0], len[0]);
				/* f: a few bits flipped past the headers */
				for (int k = 0; f && k < 3 && len[0] > 64; k++)
					c[64 + rng() % (len[0] - 64)] ^=
					    (uint8_t)(1u << (rng() % 8));
				for (int p = 0; p < 2; p++) {
					memset(y[p], 0, n * esz);
					err[p][0] = '\0';
					bellows_gcomp_force_reference(p);
					rc[p] = bellows_gcomp_decode(t, c,
					    len[0], dtype, y[p], n,
					    add ? BELLOWS_CODEC_ADD : 0, err[p],
					    sizeof(err[p]));
				}
				bellows_gcomp_force_reference(0);
				assert_int_equal(rc[1], rc[0]);
				assert_string_equal(err[1], err[0]);
				if (rc[0] == 0)
					assert_memory_equal(y[1], y[0],
					    n * esz);
				free(c);
			}
		}
	}
	for (int p = 0; p < 2; p++) {
		free(b[p]);
		free(y[p]);
	}
}

/* The fast path (default) and the reference path write the same blocks
 * and stats, and decode the same values, for every dtype, level, delta
 * levels (invalid ones too), chunk count, table (short codes, escapes),
 * a buffer too small, and blocks with flipped bits. */
static void
test_fast_path_writes_and_reads_the_reference_blocks(void **state)
{
	static const size_t ns[] = { 0, 1, 7, 8, 9, 100, KERN_GCOMP_CHUNK,
		KERN_GCOMP_CHUNK + 1, 3 * KERN_GCOMP_CHUNK + 17 };
	size_t nmax = 3 * KERN_GCOMP_CHUNK + 17;
	float *x = malloc(nmax * 4), *other = malloc(nmax * 4);
	uint16_t *h16 = malloc(nmax * 2), *b16 = malloc(nmax * 2);
	uint8_t *lv = malloc(nmax);

	(void)state;
	fill_gradient(x, nmax, 0);
	fill_gradient(other, nmax, 1);
	for (size_t i = 0; i < nmax; i++) {
		uint32_t u = f32_bits(x[i]);

		b16[i] = (uint16_t)(u >> 16);
		h16[i] = (uint16_t)rng(); /* any float16, subnormals too */
		if (rng() % 3 == 0)
			h16[i] = 0;
		lv[i] = (uint8_t)(rng() % 4);
	}
	for (int dt = 0; dt < 3; dt++) {
		int dtype = dt == 0 ? BELLOWS_GCOMP_F32
		    : dt == 1       ? BELLOWS_GCOMP_F16
				    : BELLOWS_GCOMP_BF16;
		const void *data = dt == 0 ? (const void *)x
		    : dt == 1              ? (const void *)h16
					   : (const void *)b16;

		for (int tk = 0; tk < 4; tk++) {
			/* tables: the data's, another's (escapes), 3 bits,
			 * 12 bits (above KERN_GCOMP_LUT2_BITS: no pairs) */
			bellows_gcomp_table *t = table_of(dtype,
			    tk == 1 ? (const void *)other : data,
			    tk == 1 ? 64 : nmax,
			    tk == 2       ? 3
				: tk == 3 ? 12
					  : 8,
			    7);

			for (size_t k = 0; k < sizeof(ns) / sizeof(ns[0]);
			     k++) {
				size_t n = ns[k];
				size_t cap = bellows_gcomp_bound(dtype, n);

				for (int level = 0; level < 4; level++)
					check_paths(t, dtype, data, n, level,
					    NULL, cap);
				check_paths(t, dtype, data, n, 0, lv, cap);
				check_paths(t, dtype, data, n, 0, lv, cap / 3);
			}
			if (tk == 0) { /* a level above 3 */
				lv[5000] = 4;
				check_paths(t, dtype, data, nmax, 0, lv,
				    bellows_gcomp_bound(dtype, nmax));
				lv[5000] = 1;
			}
			bellows_gcomp_table_destroy(&t);
		}
	}
	free(x);
	free(other);
	free(h16);
	free(b16);
	free(lv);
}

static void
fuzz_for(double seconds, uint64_t min_rounds)
{
	size_t n = 3 * KERN_GCOMP_CHUNK + 17;
	size_t cap = bellows_gcomp_bound(BELLOWS_GCOMP_F32, n), len[3];
	float *x = malloc(n * 4), *y = malloc(n * 4), *y2 = malloc(n * 4);
	uint8_t *good[3];
	bellows_gcomp_table *t[3];
	struct timespec t0, t1;
	uint64_t rounds = 0, ok = 0;
	char err[256];

	fill_gradient(x, n, 0);
	for (size_t i = 0; i < n; i += 97) /* listed values in format 2 */
		x[i] = i % 2 ? -0.0f : 1e-40f;
	for (int k = 0; k < 3; k++) {
		good[k] = malloc(cap);
		t[k] = table_of(BELLOWS_GCOMP_F32, x + k * 100, n / 4,
		    (unsigned)(k == 2 ? 4 : 8), 1);
		assert_int_equal(bellows_gcomp_encode(t[k], BELLOWS_GCOMP_F32,
				     x, n, k, NULL, good[k], cap, &len[k],
				     NULL),
		    0);
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		int k = (int)(rng() % 3);
		size_t l = len[k];
		uint8_t *b;
		int how = (int)(rng() % 5), rc, rc2;
		char err2[256];

		if (how == 0)
			l = rng() % (len[k] + 1); /* truncated */
		b = malloc(l > 0 ? l : 1);
		memcpy(b, good[k], l);
		if (how == 1 || how == 4) /* bit flips */
			for (int f = 0; f < 1 + (int)(rng() % 8) && l > 0; f++)
				b[rng() % l] ^= (uint8_t)(1u << (rng() % 8));
		if (how == 2 && l > 0) { /* a run of random bytes */
			size_t at = rng() % l, run = 1 + rng() % 64;

			for (size_t i = at; i < l && i < at + run; i++)
				b[i] = (uint8_t)rng();
		}
		if (how == 3 && l > 8) /* header fields */
			for (size_t i = 8; i < l && i < 128; i++)
				if (rng() % 8 == 0)
					b[i] = (uint8_t)rng();
		rc = bellows_gcomp_decode(t[k], b, l, BELLOWS_GCOMP_F32, y, n,
		    0, err, sizeof(err));
		assert_true(rc == 0 || rc == BELLOWS_EPROTO ||
		    rc == BELLOWS_EVERSION || rc == BELLOWS_EMISMATCH);
		if (rc != 0)
			assert_true(strstr(err, "byte ") != NULL);
		/* The reference path: the same verdict, message and values. */
		bellows_gcomp_force_reference(1);
		rc2 = bellows_gcomp_decode(t[k], b, l, BELLOWS_GCOMP_F32, y2, n,
		    0, err2, sizeof(err2));
		bellows_gcomp_force_reference(0);
		assert_int_equal(rc2, rc);
		if (rc != 0)
			assert_string_equal(err2, err);
		else
			assert_memory_equal(y2, y, n * 4);
		ok += rc == 0;
		free(b);
		rounds++;
		clock_gettime(CLOCK_MONOTONIC, &t1);
		if (rounds >= min_rounds &&
		    (double)(t1.tv_sec - t0.tv_sec) +
			    1e-9 * (double)(t1.tv_nsec - t0.tv_nsec) >=
			seconds)
			break;
	}
	printf("fuzz: %llu corrupted blocks decoded, %llu accepted\n",
	    (unsigned long long)rounds, (unsigned long long)ok);
	for (int k = 0; k < 3; k++) {
		bellows_gcomp_table_destroy(&t[k]);
		free(good[k]);
	}
	free(x);
	free(y);
	free(y2);
}

/* Encodes x (n values of dtype) at level 0 without levels on both paths,
 * checks that the blocks are the same format 2 block, and that both paths
 * decode it to x bit for bit; returns the block's bytes. */
static size_t
planes_round_trip(const bellows_gcomp_table *t, int dtype, const void *x,
    size_t n)
{
	size_t esz = dtype == BELLOWS_GCOMP_F32 ? 4 : 2;
	size_t cap = bellows_gcomp_bound(dtype, n), len[2];
	uint8_t *b[2] = { malloc(cap), malloc(cap) };
	uint8_t *y = malloc(n * esz + 4);
	char err[256];

	for (int p = 0; p < 2; p++) {
		bellows_gcomp_force_reference(p);
		assert_int_equal(bellows_gcomp_encode(t, dtype, x, n, 0, NULL,
				     b[p], cap, &len[p], NULL),
		    0);
		assert_true(len[p] <= cap);
		memset(y, 0x5a, n * esz + 4);
		err[0] = '\0';
		assert_int_equal(bellows_gcomp_decode(t, b[p], len[p], dtype, y,
				     n, 0, err, sizeof(err)),
		    0);
		assert_memory_equal(y, x, n * esz);
		assert_int_equal(y[n * esz + 3], 0x5a);
	}
	bellows_gcomp_force_reference(0);
	assert_int_equal(len[1], len[0]);
	assert_memory_equal(b[1], b[0], len[0]);
	assert_int_equal(b[0][4], KERN_GCOMP_FORMAT_PLANES);
	free(b[0]);
	free(b[1]);
	free(y);
	return len[0];
}

/* The mode byte of chunk c of a format 2 block. */
static unsigned
planes_mode(const uint8_t *b, size_t c)
{
	return b[KERN_GCOMP_HEADER + c * KERN_GCOMP_CHUNK_HEADER2 + 12];
}

/* Level 0 without per-value levels writes format 2, which gives back
 * every float32 and bfloat16 bit for bit on both paths: empty, 1 value,
 * odd lengths around the chunk size, all zeros, -0, subnormals, Inf and
 * NaN payloads, and gradient-like data; a chunk of random bits is stored
 * raw, so a block is never much larger than its values. */
static void
test_level_0_without_levels_is_format_2_and_bit_exact_for_every_value(
    void **state)
{
	size_t sizes[] = { 0, 1, 2, 3, 5, 4095, 8191, 8192, 8193,
		3 * 8192 + 5 };
	size_t nmax = 3 * 8192 + 5;
	float *x = malloc(nmax * 4);
	uint16_t *h = malloc(nmax * 2);
	uint32_t special[] = { 0x80000000u, 0x00000001u, 0x807fffffu,
		0x7f800000u, 0xff800000u, 0x7fc00001u, 0xffbfffffu, 0x00400000u,
		0x3f800000u };

	(void)state;
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		size_t n = sizes[k], len;
		bellows_gcomp_table *t;

		for (int kind = 0; kind < 3; kind++) {
			if (kind == 0)
				fill_gradient(x, n, 0);
			for (size_t i = 0; i < n; i++) {
				uint32_t u = special[rng() % 9];

				if (kind == 1)
					x[i] = 0.0f; /* all zeros */
				else if (kind == 2 || rng() % 50 == 0)
					memcpy(&x[i], &u, 4);
			}
			for (size_t i = 0; i < n; i++)
				h[i] = (uint16_t)(f32_bits(x[i]) >> 16);
			t = table_of(BELLOWS_GCOMP_F32, x, n, 8, 7);
			len = planes_round_trip(t, BELLOWS_GCOMP_F32, x, n);
			if (kind == 1) /* the codes of the zeros alone */
				assert_true(len <= KERN_GCOMP_HEADER +
					((n + 8191) / 8192) *
					    KERN_GCOMP_CHUNK_HEADER2 +
					(n + 7) / 8 + 4);
			(void)planes_round_trip(t, BELLOWS_GCOMP_BF16, h, n);
			bellows_gcomp_table_destroy(&t);
		}
	}
	/* Random bits: each chunk raw, the block its values and headers. */
	{
		size_t n = 3 * 8192 + 5, cap, len;
		uint8_t *b;
		bellows_gcomp_table *t;

		for (size_t i = 0; i < n; i++) {
			uint32_t u = (uint32_t)rng();

			memcpy(&x[i], &u, 4);
		}
		t = table_of(BELLOWS_GCOMP_F32, x, n, 8, 7);
		len = planes_round_trip(t, BELLOWS_GCOMP_F32, x, n);
		assert_int_equal(len,
		    KERN_GCOMP_HEADER + 4 * KERN_GCOMP_CHUNK_HEADER2 + 4 * n);
		cap = bellows_gcomp_bound(BELLOWS_GCOMP_F32, n);
		b = malloc(cap);
		assert_int_equal(bellows_gcomp_encode(t, BELLOWS_GCOMP_F32, x,
				     n, 0, NULL, b, cap, &len, NULL),
		    0);
		for (size_t c = 0; c < 4; c++)
			assert_int_equal(planes_mode(b, c),
			    KERN_GCOMP_MODE_RAW);
		/* Too small a buffer: refused. */
		assert_int_equal(bellows_gcomp_encode(t, BELLOWS_GCOMP_F32, x,
				     n, 0, NULL, b, len - 1, &len, NULL),
		    BELLOWS_EMSGSIZE);
		free(b);
		bellows_gcomp_table_destroy(&t);
	}
	free(x);
	free(h);
}

/* Format 1 (the levels layout) still decodes: level 0 given as a levels
 * array writes it, as every encoder before format 2 did at level 0, and
 * the decoder reads it next to format 2; another format is refused with
 * BELLOWS_EVERSION and a message naming both formats it reads. */
static void
test_format_1_blocks_still_decode_and_others_are_refused(void **state)
{
	size_t n = 20000, cap = bellows_gcomp_bound(BELLOWS_GCOMP_F32, n);
	size_t len1, len2;
	float *x = malloc(n * 4), *y = malloc(n * 4);
	uint8_t *lv = calloc(n, 1), *b1 = malloc(cap), *b2 = malloc(cap);
	bellows_gcomp_stats st1, st2;
	bellows_gcomp_table *t;
	char err[256];

	(void)state;
	fill_gradient(x, n, 1);
	t = table_of(BELLOWS_GCOMP_F32, x, n, 8, 3);
	assert_int_equal(bellows_gcomp_encode(t, BELLOWS_GCOMP_F32, x, n, 0, lv,
			     b1, cap, &len1, &st1),
	    0);
	assert_int_equal(b1[4], KERN_GCOMP_FORMAT);
	assert_int_equal(bellows_gcomp_encode(t, BELLOWS_GCOMP_F32, x, n, 0,
			     NULL, b2, cap, &len2, &st2),
	    0);
	assert_int_equal(b2[4], KERN_GCOMP_FORMAT_PLANES);
	/* The planes drop the 2 level bits of every non-zero value. */
	assert_int_equal(st2.level_bits, 0);
	assert_int_equal(st1.exp_bits, st2.exp_bits);
	assert_true(len2 < len1);
	assert_true(8 * (len1 - len2) >= st1.level_bits - 8 * 4 * 24);
	for (int p = 0; p < 2; p++) {
		bellows_gcomp_force_reference(p);
		memset(y, 0, n * 4);
		assert_int_equal(bellows_gcomp_decode(t, b1, len1,
				     BELLOWS_GCOMP_F32, y, n, 0, NULL, 0),
		    0);
		assert_memory_equal(y, x, n * 4);
	}
	bellows_gcomp_force_reference(0);
	b2[4] = 3;
	assert_int_equal(bellows_gcomp_decode(t, b2, len2, BELLOWS_GCOMP_F32, y,
			     n, 0, err, sizeof(err)),
	    BELLOWS_EVERSION);
	assert_string_equal(err,
	    "byte 4: block format 3, this build reads 1 "
	    "and 2");
	/* A format 2 block that says float16 is refused. */
	b2[4] = KERN_GCOMP_FORMAT_PLANES;
	b2[5] = BELLOWS_GCOMP_F16;
	assert_int_equal(bellows_gcomp_decode(t, b2, len2, BELLOWS_GCOMP_F16, y,
			     n, 0, err, sizeof(err)),
	    BELLOWS_EPROTO);
	assert_non_null(strstr(err, "format 2 holds no float16"));
	bellows_gcomp_table_destroy(&t);
	free(x);
	free(y);
	free(lv);
	free(b1);
	free(b2);
}

/* Decodes a copy of b (len bytes) with byte at set to v (at < len), on
 * both paths: the same code and message, returned in err. */
static int
decode_poked(const bellows_gcomp_table *t, const uint8_t *b, size_t len,
    size_t at, uint8_t v, float *y, size_t n, char *err, size_t errlen)
{
	uint8_t *c = malloc(len);
	char err2[256];
	int rc, rc2;

	memcpy(c, b, len);
	c[at] = v;
	rc = bellows_gcomp_decode(t, c, len, BELLOWS_GCOMP_F32, y, n, 0, err,
	    errlen);
	bellows_gcomp_force_reference(1);
	rc2 = bellows_gcomp_decode(t, c, len, BELLOWS_GCOMP_F32, y, n, 0, err2,
	    sizeof(err2));
	bellows_gcomp_force_reference(0);
	assert_int_equal(rc2, rc);
	assert_string_equal(err2, err);
	free(c);
	return rc;
}

/* A format 2 block with a bad chunk mode, a chunk of more values than the
 * encoder writes, a listed value that is no subnormal or -0, or sign and
 * mantissa bytes that its exponents do not use is refused with
 * BELLOWS_EPROTO and the byte, alike on both paths. */
static void
test_bad_format_2_chunks_are_refused_with_their_offset(void **state)
{
	size_t n = 20000, cap = bellows_gcomp_bound(BELLOWS_GCOMP_F32, n), len;
	float *x = malloc(n * 4), *y = malloc(n * 4);
	uint8_t *b = malloc(cap);
	bellows_gcomp_table *t;
	size_t h0 = KERN_GCOMP_HEADER, xoff;
	char err[256];
	uint32_t bits;

	(void)state;
	fill_gradient(x, n, 1);
	x[5] = -0.0f; /* chunk 0 lists one value */
	t = table_of(BELLOWS_GCOMP_F32, x, n, 8, 3);
	assert_int_equal(bellows_gcomp_encode(t, BELLOWS_GCOMP_F32, x, n, 0,
			     NULL, b, cap, &len, NULL),
	    0);
	assert_int_equal(b[4], KERN_GCOMP_FORMAT_PLANES);
	assert_int_equal(b[h0 + 16], 1); /* one listed value */
	assert_int_equal(decode_poked(t, b, len, h0 + 12, 2, y, n, err,
			     sizeof(err)),
	    BELLOWS_EPROTO);
	assert_string_equal(err,
	    "byte 44: chunk 0: mode 2 with these fields "
	    "is no chunk of format 2");
	assert_int_equal(decode_poked(t, b, len, h0 + 9, 0x40, y, n, err,
			     sizeof(err)),
	    BELLOWS_EPROTO);
	assert_non_null(strstr(err, "byte 40: chunk 0 holds 16384 values"));
	/* The listed value's bits (after the 4 streams): an exponent. */
	xoff = (size_t)b[h0] | (size_t)b[h0 + 1] << 8; /* chunk 0's data */
	for (int k = 0; k < KERN_GCOMP_STREAMS; k++) {
		memcpy(&bits, b + h0 + 20 + 4 * k, 4);
		xoff += (bits + 7) / 8;
	}
	assert_int_equal(b[xoff], 5); /* its index */
	assert_int_equal(decode_poked(t, b, len, xoff + 6, 0x80, y, n, err,
			     sizeof(err)),
	    BELLOWS_EPROTO);
	assert_non_null(strstr(err,
	    "listed value 0 (index 5, bits "
	    "0x80800000) is no subnormal"));
	/* Listed out of order: index 5 moved onto a non-zero exponent. */
	assert_int_equal(decode_poked(t, b, len, xoff, 6, y, n, err,
			     sizeof(err)),
	    BELLOWS_EPROTO);
	assert_non_null(strstr(err, "listed value 0 (index 6"));
	/* One mantissa byte fewer said in chunk 0's header, and the last
	 * chunk's last byte cut: their values ask for bytes that are not
	 * there (chunk 0 is decoded before chunk 1's offset is read). */
	assert_int_equal(decode_poked(t, b, len, h0 + 36,
			     (uint8_t)(b[h0 + 36] - 1), y, n, err, sizeof(err)),
	    BELLOWS_EPROTO);
	assert_non_null(strstr(err, "byte 68: chunk 0: "));
	assert_non_null(strstr(err, "mantissa bytes for"));
	{
		size_t last = h0 + 2 * KERN_GCOMP_CHUNK_HEADER2;
		uint8_t *c = malloc(len);

		memcpy(c, b, len);
		c[last + 36]--; /* mantissa bytes */
		c[24]--;        /* the block one byte shorter */
		for (int p = 0; p < 2; p++) {
			bellows_gcomp_force_reference(p);
			assert_int_equal(bellows_gcomp_decode(t, c, len - 1,
					     BELLOWS_GCOMP_F32, y, n, 0, err,
					     sizeof(err)),
			    BELLOWS_EPROTO);
			assert_non_null(strstr(err, "byte 148: chunk 2: "));
			assert_non_null(strstr(err, "mantissa bytes for"));
		}
		bellows_gcomp_force_reference(0);
		free(c);
	}
	bellows_gcomp_table_destroy(&t);
	free(x);
	free(y);
	free(b);
}

static void
test_decoder_survives_fuzzed_blocks(void **state)
{
	(void)state;
	fuzz_for(3.0, 2000);
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(
		    test_level_0_round_trips_every_normal_float32_bit_exactly),
		cmocka_unit_test(
		    test_zero_and_subnormals_send_only_the_exponent_code),
		cmocka_unit_test(
		    test_each_value_is_truncated_by_its_own_level_only),
		cmocka_unit_test(
		    test_bf16_and_f16_map_to_their_own_exponent_ranges),
		cmocka_unit_test(
		    test_delta_levels_match_hand_computed_values_per_optimizer),
		cmocka_unit_test(test_levels_are_the_same_on_every_isa),
		cmocka_unit_test(test_bad_blocks_are_refused_with_their_offset),
		cmocka_unit_test(test_decoder_survives_fuzzed_blocks),
		cmocka_unit_test(
		    test_fast_path_writes_and_reads_the_reference_blocks),
		cmocka_unit_test(
		    test_level_0_without_levels_is_format_2_and_bit_exact_for_every_value),
		cmocka_unit_test(
		    test_format_1_blocks_still_decode_and_others_are_refused),
		cmocka_unit_test(
		    test_bad_format_2_chunks_are_refused_with_their_offset),
	};

	if (argc == 3 && strcmp(argv[1], "fuzz") == 0) {
		fuzz_for(atof(argv[2]), 1);
		return 0;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
