/* test_topk - top-k selection with error feedback.
 *
 * The kernel against a reference written here from the rule of
 * kernels/cpu/kern_topk.h (a full sort by magnitude, NaN highest and all NaNs
 * equal, ties to the lower index): same indices, same values and same
 * residual bit for bit, over several error-feedback steps, on random and
 * adversarial data (sizes 0, 1, odd, 2^k +- 1; k = 0, 1, 1 %, n - 1, n;
 * all values equal, few distinct magnitudes of both signs, zeros of both
 * signs, NaN and infinities, huge, tiny and subnormal values), and on
 * mostly zero inputs with 0, k - 1, k, k + 1, 2 k and 2 k + 1 non-zero
 * values (one a NaN, or none) on every ISA, and below 32 Ki values
 * (1 to 32767, where the sampled path starts at 4096) with samples that
 * miss both ways (too many or too few values reach the threshold) on
 * every ISA. Then the
 * public API (bellows/codec.h): exactly k values sent, the residual is the
 * input minus the decoded value exactly, messages round-trip, and
 * corrupted or truncated messages are refused with an error, never read
 * beyond their end (run under ASan). The average of several ranks'
 * pairs has the bits of a sum rank by rank, divided once.
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

#include "codec_check.h"
#include "kernels/cpu/kern_stats.h"
#include "kernels/cpu/kern_topk.h"
#include "kernels/kernels.h"

#define TEST_RNG_SEED 0x243f6a8885a308d3ull
#include "rng.h"

enum set {
	SET_RANDOM,  /* uniform in [-1, 1) */
	SET_EQUAL,   /* every value 0.25 */
	SET_FEW,     /* +-1, +-2, +-3: ties everywhere */
	SET_ZEROS,   /* +0 and -0 */
	SET_SPECIAL, /* NaN, +-Inf, huge, subnormal among random */
	SET_TINY,    /* subnormal only */
	SET_COUNT,
};

static void
fill(enum set s, float *g, uint64_t n)
{
	static const float special[] = { NAN, INFINITY, -INFINITY, 3e38f,
		-3e38f, 1e-45f, -1e-45f, 1e-40f, 0.0f, -0.0f };

	for (uint64_t i = 0; i < n; i++) {
		switch (s) {
		case SET_EQUAL:
			g[i] = 0.25f;
			break;
		case SET_FEW:
			g[i] = (float)(1 + rng() % 3) *
			    (rng() % 2 ? 1.0f : -1.0f);
			break;
		case SET_ZEROS:
			g[i] = rng() % 2 ? 0.0f : -0.0f;
			break;
		case SET_SPECIAL:
			g[i] = rng() % 4 == 0 ? special[rng() % 10] : unif();
			break;
		case SET_TINY:
			g[i] = (float)(rng() % 50) * 1e-45f;
			break;
		default:
			g[i] = unif();
		}
	}
}

/* The reference's order: magnitude key descending, then index ascending. */
static const float *ref_r;

static uint32_t
ref_key(float v)
{
	uint32_t b;

	if (isnan(v))
		return 0x7f800001u;
	memcpy(&b, &v, 4);
	return b & 0x7fffffffu;
}

static int
ref_cmp(const void *a, const void *b)
{
	uint32_t i = *(const uint32_t *)a, j = *(const uint32_t *)b;
	uint32_t ki = ref_key(ref_r[i]), kj = ref_key(ref_r[j]);

	if (ki != kj)
		return ki > kj ? -1 : 1;
	return i < j ? -1 : i > j;
}

static int
u32_cmp(const void *a, const void *b)
{
	uint32_t i = *(const uint32_t *)a, j = *(const uint32_t *)b;

	return i < j ? -1 : i > j;
}

/* The reference: a full sort, the first k, put back in index order. */
static void
ref_encode(const float *g, float *res, uint64_t n, uint64_t k, uint32_t *idx,
    float *val)
{
	uint32_t *order = malloc((n + 1) * sizeof(*order));

	for (uint64_t i = 0; i < n; i++) {
		res[i] = res[i] + g[i];
		order[i] = (uint32_t)i;
	}
	ref_r = res;
	qsort(order, n, sizeof(*order), ref_cmp);
	qsort(order, k, sizeof(*order), u32_cmp);
	for (uint64_t j = 0; j < k; j++) {
		idx[j] = order[j];
		val[j] = res[order[j]];
		res[order[j]] = 0.0f;
	}
	free(order);
}

static void
test_topk_matches_the_reference_bit_for_bit(void **state)
{
	static const uint64_t sizes[] = { 0, 1, 2, 7, 31, 33, 100, 1023, 1025,
		4097, 65537 };

	(void)state;
	for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
		uint64_t n = sizes[si];
		uint64_t ks[] = { 0, 1, n / 100, n / 2, n > 0 ? n - 1 : 0, n };

		for (int s = 0; s < SET_COUNT; s++)
			for (size_t ki = 0; ki < 6; ki++) {
				uint64_t k = ks[ki] > n ? n : ks[ki];
				size_t b = (n + 1) * sizeof(float);
				float *g = malloc(b), *res = calloc(1, b);
				float *rres = calloc(1, b), *val = malloc(b);
				float *rval = malloc(b);
				uint32_t *idx = malloc(b), *ridx = malloc(b);

				for (int step = 0; step < 3; step++) {
					fill((enum set)s, g, n);
					assert_int_equal(
					    bellows_codec_topk_encode(g, res, n,
						k, idx, val),
					    0);
					ref_encode(g, rres, n, k, ridx, rval);
					assert_memory_equal(idx, ridx, k * 4);
					assert_memory_equal(val, rval, k * 4);
					assert_memory_equal(res, rres, n * 4);
				}
				free(g);
				free(res);
				free(rres);
				free(val);
				free(rval);
				free(idx);
				free(ridx);
			}
	}
}

static void
test_topk_every_isa_matches_the_scalar_code_bit_for_bit(void **state)
{
	static const uint64_t sizes[] = { 32768, 32769, 65551, 100003 };
	int isas = 0;

	(void)state;
	for (int isa = KERN_ISA_SCALAR + 1; isa <= KERN_ISA_LAST; isa++) {
		if (!kern_cpu_isa_supported(isa))
			continue;
		isas++;
		for (size_t si = 0; si < 4; si++) {
			uint64_t n = sizes[si];
			uint64_t ks[] = { 1, n / 100, n / 10, n / 4 };
			size_t b = n * sizeof(float);

			for (int set = 0; set < SET_COUNT; set++)
				for (size_t ki = 0; ki < 4; ki++) {
					uint64_t k = ks[ki];
					float *g = malloc(b),
					      *r1 = calloc(1, b);
					float *r2 = calloc(1, b);
					uint8_t *o1 = malloc(8 * k + 1);
					uint8_t *o2 = malloc(8 * k + 1);

					/* Unaligned outputs: offset 1. */
					for (int step = 0; step < 3; step++) {
						fill((enum set)set, g, n);
						kern_topk_encode_isa(
						    KERN_ISA_SCALAR, g, r1, n,
						    k, o1, o1 + 4 * k);
						kern_topk_encode_isa(isa, g, r2,
						    n, k, o2 + 1,
						    o2 + 1 + 4 * k);
						assert_memory_equal(o1, o2 + 1,
						    8 * k);
						assert_memory_equal(r1, r2, b);
					}
					free(g);
					free(r1);
					free(r2);
					free(o1);
					free(o2);
				}
		}
	}
	print_message("top-k listing pass checked on %d vector ISA(s)\n", isas);
}

/* Fills g for the sampled path's misses: the values at the sampled places
 * (every (n / KERN_TOPK_SAMPLE)-th, kern_topk.h) near 0.001 and the others
 * random (the sample's threshold lists far too many), or the other way
 * round (far too few). */
static void
fill_off_sample(float *g, uint64_t n, int sampled_high)
{
	uint64_t stride = n / KERN_TOPK_SAMPLE;

	for (uint64_t i = 0; i < n; i++) {
		int in = stride > 0 && i % stride == 0 &&
		    i / stride < KERN_TOPK_SAMPLE;
		float small = 0.001f * (1.0f + unif() * 0.01f);

		g[i] = in == sampled_high ? unif() : small;
	}
}

/* Encodes g with every ISA from the residual rst and checks indices,
 * values and residual against the reference's ridx, rval and rres. */
static void
assert_every_isa_matches(const float *g, const float *rst, uint64_t n,
    uint64_t k, const uint32_t *ridx, const float *rval, const float *rres)
{
	size_t b = (n + 1) * sizeof(float);
	float *res = malloc(b);
	uint8_t *o = malloc(8 * k + 1);

	for (int isa = KERN_ISA_SCALAR; isa <= KERN_ISA_LAST; isa++) {
		if (!kern_cpu_isa_supported(isa))
			continue;
		memcpy(res, rst, b);
		/* Unaligned: +1. */
		kern_topk_encode_isa(isa, g, res, n, k, o + 1, o + 1 + 4 * k);
		assert_memory_equal(o + 1, ridx, 4 * k);
		assert_memory_equal(o + 1 + 4 * k, rval, 4 * k);
		assert_memory_equal(res, rres, n * 4);
	}
	free(res);
	free(o);
}

static void
test_topk_below_32ki_values_matches_the_reference_on_every_isa(void **state)
{
	static const uint64_t sizes[] = { 1, 2, 100, 1000, 4095, 4096, 4097,
		16384, 32767 };

	(void)state;
	for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
		uint64_t n = sizes[si];
		uint64_t ks[] = { 1, n / 100, n / 4 };
		size_t b = (n + 1) * sizeof(float);

		/* The sets, then the sample's misses both ways. */
		for (int set = 0; set < SET_COUNT + 2; set++)
			for (size_t ki = 0; ki < 3; ki++) {
				uint64_t k = ks[ki];
				float *g = malloc(b), *rres = calloc(1, b);
				float *rst = malloc(b), *rval = malloc(b);
				uint32_t *ridx = malloc(b);

				for (int step = 0; step < 2; step++) {
					if (set < SET_COUNT)
						fill((enum set)set, g, n);
					else
						fill_off_sample(g, n,
						    set == SET_COUNT);
					memcpy(rst, rres, b);
					ref_encode(g, rres, n, k, ridx, rval);
					assert_every_isa_matches(g, rst, n, k,
					    ridx, rval, rres);
				}
				free(g);
				free(rres);
				free(rst);
				free(rval);
				free(ridx);
			}
	}
}

/* Fills g with +-0 but for nnz values at distinct random places: random
 * non-zero values, one of them NaN when nan is set. */
static void
fill_sparse(float *g, uint64_t n, uint64_t nnz, int nan)
{
	uint64_t set = 0;

	for (uint64_t i = 0; i < n; i++)
		g[i] = rng() % 2 ? 0.0f : -0.0f;
	while (set < nnz) {
		uint64_t i = rng() % n;
		float v = unif();

		if (g[i] != 0.0f || isnan(g[i]))
			continue;
		g[i] = nan && set == 0 ? NAN : v != 0.0f ? v : 0.5f;
		set++;
	}
}

static void
test_topk_sparse_input_matches_the_reference_on_every_isa(void **state)
{
	static const uint64_t sizes[] = { 1000, 4099, 65537, 200003 };

	(void)state;
	for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
		uint64_t n = sizes[si];
		uint64_t ks[] = { 1, n / 200, n / 100, n / 4, n / 2 };
		size_t b = n * sizeof(float);

		for (size_t ki = 0; ki < 5; ki++) {
			uint64_t k = ks[ki];
			uint64_t nnzs[] = { 0, k - 1, k, k + 1, 2 * k,
				2 * k + 1 };

			for (size_t zi = 0; zi < 6; zi++)
				for (int nan = 0; nan < 2; nan++) {
					uint64_t nnz = nnzs[zi] > n ? n
								    : nnzs[zi];
					float *g = malloc(b),
					      *rres = calloc(1, b);
					float *res = malloc(b),
					      *rval = malloc(b);
					float *rst = calloc(1, b);
					uint32_t *ridx = malloc(b);
					uint8_t *o = malloc(8 * k + 1);

					for (int step = 0; step < 2; step++) {
						fill_sparse(g, n, nnz,
						    nan && nnz > 0);
						memcpy(rst, rres, b);
						ref_encode(g, rres, n, k, ridx,
						    rval);
						for (int isa = KERN_ISA_SCALAR;
						     isa <= KERN_ISA_LAST;
						     isa++) {
							if (!kern_cpu_isa_supported(
								isa))
								continue;
							memcpy(res, rst, b);
							/* Unaligned: +1. */
							kern_topk_encode_isa(
							    isa, g, res, n, k,
							    o + 1,
							    o + 1 + 4 * k);
							assert_memory_equal(o +
								1,
							    ridx, 4 * k);
							assert_memory_equal(o +
								1 + 4 * k,
							    rval, 4 * k);
							assert_memory_equal(res,
							    rres, b);
						}
					}
					free(g);
					free(rres);
					free(res);
					free(rval);
					free(rst);
					free(ridx);
					free(o);
				}
		}
	}
}

static void
test_topk_residual_is_input_minus_decoded_exactly(void **state)
{
	enum {
		N = 10007,
		K = 100
	};
	float *g = malloc(N * 4), *res = calloc(N, 4), *old = malloc(N * 4);
	float *out = malloc(N * 4), val[K];
	uint32_t idx[K];

	(void)state;
	for (int step = 0; step < 5; step++) {
		fill(SET_RANDOM, g, N);
		memcpy(old, res, N * 4);
		assert_int_equal(bellows_codec_topk_encode(g, res, N, K, idx,
				     val),
		    0);
		assert_int_equal(bellows_codec_topk_decode(idx, val, K, N, out,
				     0),
		    0);
		for (uint64_t i = 0; i < N; i++) {
			float want = (old[i] + g[i]) - out[i];

			assert_memory_equal(&res[i], &want, 4);
		}
		/* Exactly K sent, and none left above what was sent. */
		{
			float lo = INFINITY, hi = 0.0f;

			for (int j = 0; j < K; j++)
				lo = fminf(lo, fabsf(val[j]));
			for (uint64_t i = 0; i < N; i++)
				hi = fmaxf(hi, fabsf(res[i]));
			assert_true(hi <= lo);
		}
	}
	free(g);
	free(res);
	free(old);
	free(out);
}

static void
test_topk_message_round_trips_and_adds(void **state)
{
	enum {
		N = 513,
		K = 17
	};
	float g[N], out[N], acc[N], val[K], res[N] = { 0 };
	uint32_t idx[K];
	bellows_codec *c = NULL;
	size_t len = bellows_codec_topk_message_bytes(N, K), got = 0;
	uint8_t *msg = malloc(len);

	(void)state;
	assert_int_equal(len, 16 + 8 * K);
	fill(SET_FEW, g, N);
	assert_int_equal(bellows_codec_new_topk(N, K, &c), 0);
	assert_int_equal(bellows_codec_encode(c, g, N, msg, len, &got), 0);
	assert_int_equal(got, len);
	assert_int_equal(bellows_codec_topk_encode(g, res, N, K, idx, val), 0);
	assert_memory_equal(bellows_codec_residual(c), res, sizeof(res));
	assert_int_equal(msg[3], BELLOWS_CODEC_TOPK);
	assert_memory_equal(msg + 16, idx, sizeof(idx));
	assert_memory_equal(msg + 16 + 4 * K, val, sizeof(val));
	assert_int_equal(bellows_codec_decode(msg, len, out, N, 0), 0);
	for (int i = 0; i < N; i++)
		acc[i] = 1.0f;
	assert_int_equal(bellows_codec_decode(msg, len, acc, N,
			     BELLOWS_CODEC_ADD),
	    0);
	for (int i = 0; i < N; i++)
		assert_true(acc[i] == 1.0f + out[i]);
	assert_int_equal(bellows_codec_encode(c, g, N, msg, len - 1, NULL),
	    BELLOWS_EMSGSIZE);
	bellows_codec_destroy(&c);
	assert_null(c);
	free(msg);
}

static void
test_topk_refuses_bad_arguments(void **state)
{
	float g[4] = { 1, 2, 3, 4 }, res[4] = { 0 }, val[4], out[4] = { 7 };
	uint32_t idx[4] = { 0, 2, 2, 3 };
	bellows_codec *c = NULL;

	(void)state;
	assert_int_equal(bellows_codec_new_topk(4, 5, &c), BELLOWS_EINVAL);
	assert_int_equal(bellows_codec_new_topk((uint64_t)UINT32_MAX + 1, 1,
			     &c),
	    BELLOWS_EINVAL);
	assert_null(c);
	assert_int_equal(bellows_codec_topk_encode(g, res, 4, 5, idx, val),
	    BELLOWS_EINVAL);
	assert_int_equal(bellows_codec_topk_encode(g, res, 4, 2, NULL, val),
	    BELLOWS_EINVAL);
	assert_true(res[0] == 0.0f); /* nothing written on failure */
	assert_int_equal(bellows_codec_topk_decode(idx, val, 3, 4, out, 0),
	    BELLOWS_EPROTO); /* 2 twice */
	idx[1] = 4;
	assert_int_equal(bellows_codec_topk_decode(idx, val, 2, 4, out, 0),
	    BELLOWS_EPROTO); /* out of range */
	idx[1] = 1;
	assert_int_equal(bellows_codec_topk_decode(idx, val, 2, 4, out, 4),
	    BELLOWS_EINVAL);
	assert_true(out[0] == 7.0f); /* out untouched on failure */
	assert_int_equal(bellows_codec_topk_message_bytes(3, 4), 0);
	assert_int_equal(bellows_codec_message_bytes(BELLOWS_CODEC_TOPK, 4), 0);
	assert_int_equal(bellows_codec_topk_encode(NULL, NULL, 0, 0, NULL,
			     NULL),
	    0);
}

static void
test_topk_decode_refuses_corrupted_or_truncated_messages(void **state)
{
	enum {
		N = 300,
		K = 9
	};
	float g[N], out[N];
	bellows_codec *c = NULL;
	size_t len = bellows_codec_topk_message_bytes(N, K);
	uint8_t *msg = malloc(len);

	(void)state;
	fill(SET_RANDOM, g, N);
	assert_int_equal(bellows_codec_new_topk(N, K, &c), 0);
	assert_int_equal(bellows_codec_encode(c, g, N, msg, len, NULL), 0);
	assert_cut_messages_refused(msg, len, out, N);
	msg[2] = 9;
	assert_int_equal(bellows_codec_decode(msg, len, out, N, 0),
	    BELLOWS_EVERSION);
	msg[2] = BELLOWS_CODEC_VERSION;
	msg[4] = (N + 1) & 0xff; /* k > n */
	msg[5] = (N + 1) >> 8;
	assert_int_equal(bellows_codec_decode(msg, len, out, N, 0),
	    BELLOWS_EPROTO);
	msg[4] = K;
	msg[5] = 0;
	memcpy(msg + 16, msg + 20, 4); /* an index twice */
	assert_int_equal(bellows_codec_decode(msg, len, out, N, 0),
	    BELLOWS_EPROTO);
	assert_int_equal(bellows_codec_encode(c, g, N, msg, len, NULL), 0);
	msg[16 + 4 * (K - 1) + 1] = 0xff; /* the last index beyond n */
	assert_int_equal(bellows_codec_decode(msg, len, out, N, 0),
	    BELLOWS_EPROTO);
	assert_int_equal(bellows_codec_encode(c, g, N, msg, len, NULL), 0);
	assert_int_equal(bellows_codec_decode(msg, len, out, N - 1, 0),
	    BELLOWS_EMISMATCH);
	assert_int_equal(bellows_codec_decode(msg, len, out, N, 0), 0);
	/* Random corruption of header and indices: an error or a decode,
	 * never a crash or a write out of bounds (ASan). */
	for (int t = 0; t < 20000; t++) {
		uint8_t *p = malloc(len);
		int rc;

		memcpy(p, msg, len);
		for (int f = 0; f < 1 + (int)(rng() % 3); f++)
			p[rng() % (16 + 4 * K)] ^= (uint8_t)(1u << (rng() % 8));
		rc = bellows_codec_decode(p, len, out, N, (int)(rng() % 2));
		assert_true(rc == 0 || rc == BELLOWS_EPROTO ||
		    rc == BELLOWS_EVERSION || rc == BELLOWS_EMISMATCH);
		free(p);
	}
	bellows_codec_destroy(&c);
	free(msg);
}

/* Draws k of n indices, ascending, each subset equally likely (selection
 * sampling), with values from `s` (NaN, infinities and zeros of both
 * signs among them for SET_SPECIAL). */
static void
draw_pairs(enum set s, uint64_t n, uint64_t k, uint32_t *idx, float *val)
{
	uint64_t j = 0;

	for (uint64_t i = 0; i < n && j < k; i++)
		if (rng() % (n - i) < k - j)
			idx[j++] = (uint32_t)i;
	fill(s, val, k);
}

static void
test_topk_average_has_the_bits_of_a_sum_rank_by_rank(void **state)
{
	static const uint32_t ranks[] = { 1, 2, 3, 5, 8, 33 };
	static const uint64_t sizes[][2] = { { 1, 1 }, { 7, 0 }, { 7, 3 },
		{ 40, 40 }, { 300, 9 }, { 4099, 41 }, { 65536, 655 } };
	enum {
		MAXR = 33
	};

	(void)state;
	for (size_t a = 0; a < sizeof(ranks) / sizeof(ranks[0]); a++) {
		for (size_t b = 0; b < sizeof(sizes) / sizeof(sizes[0]); b++) {
			uint32_t R = ranks[a];
			uint64_t n = sizes[b][0], k = sizes[b][1];
			uint32_t *idx[MAXR];
			float *val[MAXR];
			float *out = malloc(n * 4), *want = malloc(n * 4);

			for (uint32_t r = 0; r < R; r++) {
				idx[r] = malloc((k + 1) * 4);
				val[r] = malloc((k + 1) * 4);
				draw_pairs((r + b) % 2 ? SET_SPECIAL : SET_FEW,
				    n, k, idx[r], val[r]);
			}
			/* The torch decode's arithmetic: zeros, each rank
			 * added in turn, every value divided by R. */
			memset(want, 0, n * 4);
			for (uint32_t r = 0; r < R; r++)
				kern_topk_decode((const uint8_t *)idx[r],
				    (const uint8_t *)val[r], k, n, want, 1);
			for (uint64_t i = 0; i < n; i++)
				want[i] = want[i] / (float)R;
			memset(out, 0x7f, n * 4);
			assert_int_equal(bellows_codec_topk_average(
					     (const uint32_t *const *)idx,
					     (const float *const *)val, R, k, n,
					     out),
			    0);
			/* Where two NaNs meet, which one a sum keeps is the
			 * compiler's choice of operand order: any NaN. */
			for (uint64_t i = 0; i < n; i++)
				if (!(isnan(out[i]) && isnan(want[i])))
					assert_memory_equal(&out[i], &want[i],
					    4);
			for (uint32_t r = 0; r < R; r++) {
				free(idx[r]);
				free(val[r]);
			}
			free(out);
			free(want);
		}
	}
}

static void
test_topk_average_refuses_bad_arguments(void **state)
{
	uint32_t i0[3] = { 0, 2, 3 }, i1[3] = { 1, 1, 3 };
	float v0[3] = { 1, 2, 3 }, v1[3] = { 4, 5, 6 }, out[4] = { 7 };
	const uint32_t *idx[2] = { i0, i1 };
	const float *val[2] = { v0, v1 };

	(void)state;
	assert_int_equal(bellows_codec_topk_average(idx, val, 2, 3, 4, out),
	    BELLOWS_EPROTO); /* rank 1 lists 1 twice */
	i1[1] = 2;
	i0[2] = 4;
	assert_int_equal(bellows_codec_topk_average(idx, val, 2, 3, 4, out),
	    BELLOWS_EPROTO); /* rank 0's last index beyond n */
	i0[2] = 3;
	assert_int_equal(bellows_codec_topk_average(idx, val, 0, 3, 4, out),
	    BELLOWS_EINVAL);
	assert_int_equal(bellows_codec_topk_average(idx, val,
			     BELLOWS_CODEC_MAX_RANKS + 1, 3, 4, out),
	    BELLOWS_EINVAL);
	assert_int_equal(bellows_codec_topk_average(idx, val, 2, 5, 4, out),
	    BELLOWS_EINVAL); /* k > n */
	assert_int_equal(bellows_codec_topk_average(idx, val, 2, 3,
			     (uint64_t)UINT32_MAX + 1, out),
	    BELLOWS_EINVAL);
	assert_int_equal(bellows_codec_topk_average(idx, val, 2, 3, 4, NULL),
	    BELLOWS_EINVAL);
	val[1] = NULL;
	assert_int_equal(bellows_codec_topk_average(idx, val, 2, 3, 4, out),
	    BELLOWS_EINVAL);
	assert_int_equal(bellows_codec_topk_average(NULL, val, 2, 3, 4, out),
	    BELLOWS_EINVAL);
	assert_true(out[0] == 7.0f); /* out untouched on failure */
	val[1] = v1;
	assert_int_equal(bellows_codec_topk_average(idx, val, 2, 3, 4, out), 0);
	/* 0: rank 0 alone; 1: rank 1; 2: both, in rank order; 3: both. */
	assert_true(out[0] == 0.5f && out[1] == 2.0f);
	assert_true(out[2] == (2.0f + 5.0f) / 2 && out[3] == 4.5f);
	assert_int_equal(bellows_codec_topk_average(NULL, NULL, 2, 0, 0, NULL),
	    0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_topk_matches_the_reference_bit_for_bit),
		cmocka_unit_test(
		    test_topk_every_isa_matches_the_scalar_code_bit_for_bit),
		cmocka_unit_test(
		    test_topk_sparse_input_matches_the_reference_on_every_isa),
		cmocka_unit_test(
		    test_topk_below_32ki_values_matches_the_reference_on_every_isa),
		cmocka_unit_test(
		    test_topk_residual_is_input_minus_decoded_exactly),
		cmocka_unit_test(test_topk_message_round_trips_and_adds),
		cmocka_unit_test(test_topk_refuses_bad_arguments),
		cmocka_unit_test(
		    test_topk_decode_refuses_corrupted_or_truncated_messages),
		cmocka_unit_test(
		    test_topk_average_has_the_bits_of_a_sum_rank_by_rank),
		cmocka_unit_test(test_topk_average_refuses_bad_arguments),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
