/* test_codec - the 1-bit and 2-bit quantisers with error feedback.
 *
 * Every instruction set this processor runs is checked against a reference
 * written here from the semantics of kernels/cpu/kern_codec.h (one value at a
 * time, codes packed afterwards): same bytes, padding included, and same
 * residual bit for bit, over several error-feedback steps, on random and
 * adversarial data (sizes 0, 1, odd, 2^k +- 1, unaligned pointers, zeros,
 * NaN and infinities, huge, tiny and subnormal values, values at the
 * threshold). Then the public API (bellows/codec.h): the residual is the
 * input minus the decoded value exactly, messages round-trip, and
 * corrupted or truncated messages are refused with an error, never read
 * beyond their end (run under ASan).
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
#include "kernels/cpu/kern_codec.h"
#include "kernels/cpu/kern_stats.h"
#include "kernels/kernels.h"

#define TEST_RNG_SEED 0x9e3779b97f4a7c15ull
#include "rng.h"

static void
ref_encode(int bits, float t, const float *g, float *res, uint64_t n,
    uint8_t *out)
{
	memset(out, 0, kern_codec_bytes(bits, n));
	for (uint64_t i = 0; i < n; i++) {
		float r = res[i] + g[i];
		unsigned code;

		if (bits == 2) {
			float sub = r >= t ? t : 0.0f;
			float add = r <= -t ? t : 0.0f;

			code = r >= t ? 3u : r <= -t ? 2u : 0u;
			res[i] = (r - sub) + add;
		} else {
			code = r > t;
			res[i] = r + (1.0f - 2.0f * (float)code);
		}
		out[i * bits / 8] |= (uint8_t)(code << (i * bits % 8));
	}
}

static float
ref_value(int bits, float t, const uint8_t *in, uint64_t i)
{
	unsigned code = (in[i * bits / 8] >> (i * bits % 8)) &
	    ((1u << bits) - 1);

	if (bits == 1)
		return (float)code * 2.0f - 1.0f;
	return (code == 3 ? 1.0f : 0.0f) * t - (code == 2 ? 1.0f : 0.0f) * t;
}

enum {
	SET_RANDOM,
	SET_ZEROS,
	SET_NEGZERO,
	SET_NONFINITE,
	SET_HUGE,
	SET_TINY,
	SET_DENORMAL,
	SET_EDGE,
	SET_COUNT
};

static void
fill(int set, float t, float *g, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++) {
		float u = unif();

		switch (set) {
		case SET_RANDOM:
			g[i] = u;
			break;
		case SET_ZEROS:
			g[i] = 0.0f;
			break;
		case SET_NEGZERO:
			g[i] = -0.0f;
			break;
		case SET_NONFINITE:
			g[i] = rng() % 5 == 0 ? NAN
			    : rng() % 5 == 0  ? (u < 0 ? -INFINITY : INFINITY)
					      : u;
			break;
		case SET_HUGE:
			g[i] = u * 3.0e38f;
			break;
		case SET_TINY:
			g[i] = u * 1.0e-37f;
			break;
		case SET_DENORMAL:
			g[i] = u * 1.0e-40f;
			break;
		default: /* at, just above and just below +-t */
			g[i] = rng() % 2 ? t : -t;
			if (rng() % 3 == 0)
				g[i] = nextafterf(g[i], INFINITY);
			else if (rng() % 2 == 0)
				g[i] = nextafterf(g[i], -INFINITY);
			break;
		}
	}
}

/* a and b have the same bits, or are both NaN (a NaN's sign and payload
 * depend on the order of the operands, which compilers may swap). */
static void
same_bits(float a, float b)
{
	if (isnan(a) || isnan(b)) {
		assert_true(isnan(a) && isnan(b));
		return;
	}
	assert_memory_equal(&a, &b, 4);
}

static const uint64_t sizes[] = { 0, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32,
	33, 63, 64, 65, 127, 128, 129, 255, 257, 1000, 1023, 1024, 1025, 4095,
	4097, 65535, 65537 };

/* Runs one ISA's kernels for bits against the reference. */
static void
check_isa(const kern_codec_fns *f, int bits, float t)
{
	uint64_t max = 65537 + 8;
	float *g = calloc(max, sizeof(float));
	float *res = calloc(max, sizeof(float));
	float *want_res = calloc(max, sizeof(float));
	float *dec = calloc(max, sizeof(float));
	uint8_t *got = calloc(kern_codec_bytes(2, max) + 8, 1);
	uint8_t *want = calloc(kern_codec_bytes(2, max) + 8, 1);
	kern_codec_enc_fn *enc = bits == 1 ? f->enc1 : f->enc2;
	kern_codec_dec_fn *decf = bits == 1 ? f->dec1 : f->dec2;

	assert_non_null(g);
	assert_non_null(got);
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		for (int set = 0; set < SET_COUNT; set++) {
			uint64_t n = sizes[s];
			unsigned off = (unsigned)(rng() % 4); /* unaligned */
			float *gp = g + off, *rp = res + off;
			uint64_t bytes = kern_codec_bytes(bits, n);

			memset(res, 0, max * sizeof(float));
			memset(want_res, 0, max * sizeof(float));
			for (int step = 0; step < 3; step++) {
				fill(set, t, gp, n);
				memset(got, 0xa5, bytes + 8);
				enc(gp, rp, n, t, got);
				ref_encode(bits, t, gp, want_res, n, want);
				assert_memory_equal(got, want, bytes);
				assert_int_equal(got[bytes],
				    0xa5); /* no overrun */
				for (uint64_t i = 0; i < n; i++)
					same_bits(rp[i], want_res[i]);
				/* Decode, then decode-add over it. */
				for (int add = 0; add < 2; add++) {
					decf(got, n, t, dec + off, add);
					for (uint64_t i = 0; i < n; i++) {
						float v = ref_value(bits, t,
						    want, i);
						float w = add ? v + v : v;

						same_bits(dec[off + i], w);
					}
				}
			}
		}
	}
	free(g);
	free(res);
	free(want_res);
	free(dec);
	free(got);
	free(want);
}

static void
test_codec_every_isa_matches_the_reference_bit_for_bit(void **state)
{
	static const float t2[] = { 0.5f, 0.1f, 1.0e-30f, 3.0e38f };
	static const float t1[] = { 0.5f, 0.0f, 0.1f };
	int ran = 0;

	(void)state;
	for (int isa = KERN_ISA_SCALAR; isa <= KERN_ISA_LAST; isa++) {
		const kern_codec_fns *f = kern_codec_get(isa);

		if (f == NULL)
			continue;
		ran++;
		for (size_t i = 0; i < sizeof(t2) / sizeof(t2[0]); i++)
			check_isa(f, 2, t2[i]);
		for (size_t i = 0; i < sizeof(t1) / sizeof(t1[0]); i++)
			check_isa(f, 1, t1[i]);
	}
	assert_true(ran >= 1);
	print_message("codec ISAs checked: %d (best %s)\n", ran,
	    bellows_codec_isa());
}

static void
test_codec_residual_is_input_minus_decoded_exactly(void **state)
{
	enum {
		N = 4099
	};
	float *g = malloc(N * sizeof(float));
	float *res = calloc(N, sizeof(float));
	float *before = malloc(N * sizeof(float));
	float *dec = malloc(N * sizeof(float));
	uint8_t codes[N / 4 + 8];

	(void)state;
	for (int kind = 1; kind <= 2; kind++) {
		memset(res, 0, N * sizeof(float));
		for (int step = 0; step < 5; step++) {
			fill(step % 2 ? SET_RANDOM : SET_EDGE, 0.5f, g, N);
			memcpy(before, res, N * sizeof(float));
			assert_int_equal(bellows_codec_encode_codes(kind, 0.5f,
					     g, res, N, codes, sizeof(codes)),
			    0);
			assert_int_equal(bellows_codec_decode_codes(kind, 0.5f,
					     codes,
					     bellows_codec_codes_bytes(kind, N),
					     N, dec, 0),
			    0);
			for (int i = 0; i < N; i++)
				assert_true(
				    res[i] == (before[i] + g[i]) - dec[i]);
		}
	}
	free(g);
	free(res);
	free(before);
	free(dec);
}

static void
test_codec_message_round_trips_and_matches_the_codes(void **state)
{
	enum {
		N = 1001
	};
	float g[N], res[N], out[N], want[N];
	uint8_t msg[16 + N / 4 + 8], codes[N / 4 + 8];
	bellows_codec *c = NULL;
	size_t len = 0;

	(void)state;
	fill(SET_RANDOM, 0.5f, g, N);
	memset(res, 0, sizeof(res));
	assert_int_equal(bellows_codec_new(2, 0.25f, N, &c), 0);
	for (int step = 0; step < 3; step++) {
		assert_int_equal(bellows_codec_encode(c, g, N, msg, sizeof(msg),
				     &len),
		    0);
		assert_int_equal(len, bellows_codec_message_bytes(2, N));
		assert_int_equal(bellows_codec_encode_codes(2, 0.25f, g, res, N,
				     codes, sizeof(codes)),
		    0);
		assert_memory_equal(msg + 16, codes, len - 16);
		assert_memory_equal(bellows_codec_residual(c), res,
		    sizeof(res));
		assert_int_equal(bellows_codec_decode(msg, len, out, N, 0), 0);
		assert_int_equal(bellows_codec_decode_codes(2, 0.25f, codes,
				     len - 16, N, want, 0),
		    0);
		assert_memory_equal(out, want, sizeof(out));
	}
	assert_int_equal(msg[0], 'B');
	assert_int_equal(msg[2], BELLOWS_CODEC_VERSION);
	assert_int_equal(msg[3], 2);
	assert_int_equal(msg[8], N & 0xff);
	bellows_codec_reset(c);
	for (int i = 0; i < N; i++)
		assert_true(bellows_codec_residual(c)[i] == 0.0f);
	assert_int_equal(bellows_codec_encode(c, g, N - 1, msg, sizeof(msg),
			     NULL),
	    BELLOWS_EMISMATCH);
	assert_int_equal(bellows_codec_encode(c, g, N, msg, len - 1, NULL),
	    BELLOWS_EMSGSIZE);
	bellows_codec_destroy(&c);
	assert_null(c);
	bellows_codec_destroy(&c);
}

static void
test_codec_refuses_bad_arguments(void **state)
{
	float g[4] = { 1, 2, 3, 4 }, res[4] = { 0 };
	uint8_t codes[4];
	bellows_codec *c = NULL;

	(void)state;
	assert_int_equal(bellows_codec_new(3, 0.5f, 4, &c), BELLOWS_EINVAL);
	assert_int_equal(bellows_codec_new(2, 0.0f, 4, &c), BELLOWS_EINVAL);
	assert_int_equal(bellows_codec_new(2, NAN, 4, &c), BELLOWS_EINVAL);
	assert_int_equal(bellows_codec_new(1, -1.0f, 4, &c), BELLOWS_EINVAL);
	assert_int_equal(bellows_codec_new(1, INFINITY, 4, &c), BELLOWS_EINVAL);
	assert_null(c);
	assert_int_equal(bellows_codec_new(1, 0.0f, 0, &c), 0);
	bellows_codec_destroy(&c);
	assert_int_equal(bellows_codec_encode_codes(2, 0.5f, g, res, 4, codes,
			     0),
	    BELLOWS_EMSGSIZE);
	assert_int_equal(bellows_codec_encode_codes(2, 0.5f, NULL, res, 4,
			     codes, 4),
	    BELLOWS_EINVAL);
	assert_true(res[0] == 0.0f); /* nothing written on failure */
	assert_int_equal(bellows_codec_decode_codes(2, 0.5f, codes, 3, 4, g, 0),
	    BELLOWS_EPROTO);
	assert_int_equal(bellows_codec_decode_codes(2, 0.5f, codes, 4, 4, g, 8),
	    BELLOWS_EINVAL);
	assert_int_equal(bellows_codec_codes_bytes(7, 1), 0);
	assert_int_equal(bellows_codec_codes_bytes(1, 33), 8);
	assert_int_equal(bellows_codec_codes_bytes(2, 17), 8);
	assert_int_equal(bellows_codec_codes_bytes(2, 0), 0);
}

static void
test_codec_decode_refuses_corrupted_or_truncated_messages(void **state)
{
	enum {
		N = 77
	};
	float g[N], out[N];
	bellows_codec *c = NULL;
	size_t len = bellows_codec_message_bytes(1, N);
	uint8_t *msg = malloc(len);

	(void)state;
	fill(SET_RANDOM, 0.5f, g, N);
	assert_int_equal(bellows_codec_new(1, 0.5f, N, &c), 0);
	assert_int_equal(bellows_codec_encode(c, g, N, msg, len, NULL), 0);
	assert_cut_messages_refused(msg, len, out, N);
	msg[0] ^= 1;
	assert_int_equal(bellows_codec_decode(msg, len, out, N, 0),
	    BELLOWS_EPROTO);
	msg[0] ^= 1;
	msg[2] = 9;
	assert_int_equal(bellows_codec_decode(msg, len, out, N, 0),
	    BELLOWS_EVERSION);
	msg[2] = BELLOWS_CODEC_VERSION;
	msg[3] = 3;
	assert_int_equal(bellows_codec_decode(msg, len, out, N, 0),
	    BELLOWS_EPROTO);
	msg[3] = 1;
	msg[7] = 0x7f; /* threshold becomes NaN */
	msg[6] = 0xc0;
	assert_int_equal(bellows_codec_decode(msg, len, out, N, 0),
	    BELLOWS_EPROTO);
	assert_int_equal(bellows_codec_encode(c, g, N, msg, len, NULL), 0);
	msg[15] = 0xff; /* a huge n */
	assert_int_equal(bellows_codec_decode(msg, len, out, N, 0),
	    BELLOWS_EPROTO);
	msg[15] = 0;
	assert_int_equal(bellows_codec_decode(msg, len, out, N - 1, 0),
	    BELLOWS_EMISMATCH);
	assert_int_equal(bellows_codec_decode(msg, len, out, N, 0), 0);
	/* Random corruption of the header: an error or a decode, never a
	 * crash; a decode only of a header that still names N values. */
	for (int k = 0; k < 20000; k++) {
		uint8_t *p = malloc(len);
		int rc;

		memcpy(p, msg, len);
		for (int f = 0; f < 1 + (int)(rng() % 3); f++)
			p[rng() % 16] ^= (uint8_t)(1u << (rng() % 8));
		rc = bellows_codec_decode(p, len, out, N, (int)(rng() % 2));
		assert_true(rc == 0 || rc == BELLOWS_EPROTO ||
		    rc == BELLOWS_EVERSION || rc == BELLOWS_EMISMATCH);
		free(p);
	}
	bellows_codec_destroy(&c);
	free(msg);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(
		    test_codec_every_isa_matches_the_reference_bit_for_bit),
		cmocka_unit_test(
		    test_codec_residual_is_input_minus_decoded_exactly),
		cmocka_unit_test(
		    test_codec_message_round_trips_and_matches_the_codes),
		cmocka_unit_test(test_codec_refuses_bad_arguments),
		cmocka_unit_test(
		    test_codec_decode_refuses_corrupted_or_truncated_messages),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
