/* test_ebq - the error-bounded quantiser with the zero filter.
 *
 * A reference written here from the rule in bellows/codec.h (one value at
 * a time, long loops, codes set bit by bit into a zeroed message) gives
 * the expected message for each input; every instruction set this
 * processor runs must produce it byte for byte and decode it to the
 * reference's floats bit for bit, on random and adversarial data (sizes 0,
 * 1, odd, 2^k +- 1, unaligned pointers, all zeros, ReLU-like halves of
 * zeros, NaN and infinities, huge, tiny and subnormal magnitudes). Every
 * decoded element is within the bound of its input, and zero or beyond the
 * bound (the filter). The code width is checked at each boundary, and
 * corrupted or truncated messages are refused with an error, never read
 * beyond their end (run under ASan).
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

#include "kernels/cpu/kern_stats.h"
#include "kernels/kernels.h"

#define HDR BELLOWS_EBQ_HEADER_BYTES

static uint64_t rng_state = 0x2545f4914f6cdd1dull;

static uint64_t
rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

/* Uniform in [-1, 1). */
static double
unif(void)
{
	return (double)(rng() >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

/* ---- the reference ---------------------------------------------------- */

typedef struct ref_plan {
	int mode;         /* BELLOWS_EBQ_* */
	unsigned bits;    /* per code */
	double step;      /* 2 eb' */
	int64_t qmax;     /* largest |q| */
	uint64_t nzq;     /* non-zero codes */
	uint64_t nonzero; /* non-zero reconstructions */
} ref_plan;

static float
ref_rec(double q, double step, double eb)
{
	float r = (float)(q * step);

	return fabsf(r) <= (float)eb ? 0.0f : r;
}

/* The plan of codec.h's rule; mode RAW when the values stay floats. */
static ref_plan
ref_make_plan(const float *x, uint64_t n, double eb, int byte_codes)
{
	ref_plan p = { .mode = BELLOWS_EBQ_RAW, .bits = 32 };
	double amax = 0.0, top, half, ebe;
	uint64_t dense, sparse;

	for (uint64_t i = 0; i < n; i++)
		if (!isfinite(x[i]))
			return p;
		else if (fabs((double)x[i]) > amax)
			amax = fabs((double)x[i]);
	if (eb == 0.0 || n == 0)
		return p;
	top = amax + eb;
	half = pow(2.0, floor(log2(top))) * pow(2.0, -24);
	ebe = (eb - half) * (1.0 - pow(2.0, -18));
	if (ebe <= 0.5 * eb)
		return p;
	p.step = 2.0 * ebe;
	for (uint64_t i = 0; i < n; i++) {
		double q = nearbyint((double)x[i] / p.step);

		if (fabs(q) > 2147483647.0)
			return (
			    ref_plan){ .mode = BELLOWS_EBQ_RAW, .bits = 32 };
		if ((int64_t)fabs(q) > p.qmax)
			p.qmax = (int64_t)fabs(q);
		p.nzq += q != 0.0;
		if (fabs((double)x[i] - (double)ref_rec(q, p.step, eb)) > eb)
			return (
			    ref_plan){ .mode = BELLOWS_EBQ_RAW, .bits = 32 };
		p.nonzero += ref_rec(q, p.step, eb) != 0.0f;
	}
	for (p.bits = 1; p.qmax > (INT64_C(1) << (p.bits - 1)) - 1; p.bits++)
		;
	if (byte_codes)
		p.bits = p.bits <= 8 ? 8 : p.bits <= 16 ? 16 : 32;
	dense = (n * p.bits + 7) / 8;
	sparse = (n + 7) / 8 + (p.nzq * p.bits + 7) / 8;
	if ((dense < sparse ? dense : sparse) >= 4 * n) {
		p.mode = BELLOWS_EBQ_RAW;
		p.bits = 32;
		p.step = 0.0;
		return p;
	}
	p.mode = sparse < dense ? BELLOWS_EBQ_SPARSE : BELLOWS_EBQ_DENSE;
	return p;
}

static void
put64(uint8_t *m, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		m[i] = (uint8_t)(v >> (8 * i));
}

static void
putbit(uint8_t *s, uint64_t bit, unsigned v)
{
	if (v)
		s[bit / 8] |= (uint8_t)(1u << (bit % 8));
}

/* The reference message in m (zeroed here); returns its length. */
static size_t
ref_encode(const float *x, uint64_t n, double eb, int byte_codes, uint8_t *m)
{
	ref_plan p = ref_make_plan(x, n, eb, byte_codes);
	uint64_t u, codes = 0, nonzero = 0, payload, mask = 0, at = 0;
	uint8_t *s = m + HDR;

	memset(m, 0, HDR + 4 * n);
	m[0] = 'B';
	m[1] = 'E';
	m[2] = 1;
	m[3] = (uint8_t)p.mode;
	m[4] = (uint8_t)p.bits;
	put64(m + 8, n);
	memcpy(&u, &eb, 8);
	put64(m + 16, u);
	memcpy(&u, &p.step, 8);
	put64(m + 24, u);
	if (p.mode == BELLOWS_EBQ_RAW) {
		for (uint64_t i = 0; i < n; i++) {
			memcpy(&u, x + i, 4);
			nonzero += (u & 0x7fffffff) != 0;
			for (int k = 0; k < 4; k++)
				s[4 * i + k] = (uint8_t)(u >> (8 * k));
		}
		payload = 4 * n;
	} else {
		if (p.mode == BELLOWS_EBQ_SPARSE)
			mask = (n + 7) / 8;
		for (uint64_t i = 0; i < n; i++) {
			double q = nearbyint((double)x[i] / p.step);
			uint64_t c = (uint64_t)(int64_t)q;

			if (p.mode == BELLOWS_EBQ_SPARSE) {
				if (q == 0.0)
					continue;
				putbit(s, i, 1);
			}
			for (unsigned b = 0; b < p.bits; b++)
				putbit(s + mask, at * p.bits + b, (c >> b) & 1);
			at++;
		}
		codes = at;
		nonzero = p.nonzero;
		payload = mask + (codes * p.bits + 7) / 8;
	}
	put64(m + 32, codes);
	put64(m + 40, nonzero);
	put64(m + 48, payload);
	return HDR + payload;
}

/* The reference decode of value i of x (as its message holds it). */
static float
ref_value(const float *x, const ref_plan *p, double eb, uint64_t i)
{
	if (p->mode == BELLOWS_EBQ_RAW)
		return x[i];
	return ref_rec(nearbyint((double)x[i] / p->step), p->step, eb);
}

/* ---- checks ----------------------------------------------------------- */

static int isas[4];
static int n_isas;

static void
find_isas(void)
{
	n_isas = 0;
	for (int isa = KERN_ISA_SCALAR; isa <= KERN_ISA_LAST; isa++)
		if (bellows_ebq_force_isa(isa) == 0)
			isas[n_isas++] = isa;
	bellows_ebq_force_isa(0);
}

/* Encodes x on every ISA (both code widths), checks the message and the
 * decode against the reference, and the bound on every element. */
static void
check(const float *x, uint64_t n, double eb)
{
	size_t cap = bellows_ebq_bound(n);
	uint8_t *want = malloc(cap), *got = malloc(cap);
	float *out = malloc((n + 1) * sizeof(float));

	assert_non_null(want);
	assert_non_null(got);
	assert_non_null(out);
	for (int bc = 0; bc < 2; bc++) {
		size_t wlen = ref_encode(x, n, eb, bc, want);
		ref_plan p = ref_make_plan(x, n, eb, bc);

		for (int k = 0; k < n_isas; k++) {
			size_t len = 0;
			bellows_ebq_info in;

			assert_int_equal(bellows_ebq_force_isa(isas[k]), 0);
			memset(got, 0xa5, cap);
			assert_int_equal(bellows_ebq_encode(x, n, eb,
					     bc ? BELLOWS_EBQ_BYTE_CODES : 0,
					     NULL, got, cap, &len),
			    0);
			assert_int_equal(len, wlen);
			for (size_t b = 0; b < len; b++)
				if (got[b] != want[b]) {
					print_message("byte %zu: %02x, want "
						      "%02x\n",
					    b, got[b], want[b]);
					break;
				}
			if (memcmp(got, want, len) != 0)
				fail_msg("isa %d n %llu eb %g bc %d: message "
					 "differs from the reference",
				    isas[k], (unsigned long long)n, eb, bc);
			assert_int_equal(bellows_ebq_info_read(got, len, &in),
			    0);
			assert_int_equal(in.mode, p.mode);
			out[n] = 12345.0f; /* past the end: untouched */
			assert_int_equal(bellows_ebq_decode(got, len, out, n,
					     NULL),
			    0);
			assert_true(out[n] == 12345.0f);
			for (uint64_t i = 0; i < n; i++) {
				float r = ref_value(x, &p, eb, i);

				if (memcmp(&r, out + i, 4) != 0)
					fail_msg("isa %d n %llu: value %llu "
						 "%a, reference %a",
					    isas[k], (unsigned long long)n,
					    (unsigned long long)i, out[i], r);
				if (!isfinite(x[i]))
					continue;
				assert_true(
				    fabs((double)x[i] - (double)out[i]) <= eb);
				if (p.mode != BELLOWS_EBQ_RAW)
					assert_true(out[i] == 0.0f ||
					    fabsf(out[i]) > (float)eb);
			}
		}
	}
	bellows_ebq_force_isa(0);
	free(want);
	free(got);
	free(out);
}

enum data {
	D_UNIFORM,  /* uniform in [-1, 1) */
	D_RELU,     /* half zeros, half |gaussian-ish| */
	D_ZEROS,    /* all +0 (and a -0) */
	D_HUGE,     /* magnitudes up to 1e38 */
	D_TINY,     /* magnitudes around 1e-30 */
	D_SUBNORMAL /* subnormal floats */
};

static void
fill(float *x, uint64_t n, enum data d)
{
	for (uint64_t i = 0; i < n; i++) {
		double u = unif();

		switch (d) {
		case D_UNIFORM:
			x[i] = (float)u;
			break;
		case D_RELU:
			x[i] = u < 0 ? 0.0f : (float)(u * u * 3.0);
			break;
		case D_ZEROS:
			x[i] = i == 1 ? -0.0f : 0.0f;
			break;
		case D_HUGE:
			x[i] = (float)(u * 1e38);
			break;
		case D_TINY:
			x[i] = (float)(u * 1e-30);
			break;
		case D_SUBNORMAL:
			x[i] = (float)(u * 1e-39);
			break;
		}
	}
}

/* Typical scale of each data set, for the bounds tried. */
static const double scale[] = { 1.0, 3.0, 1.0, 1e38, 1e-30, 1e-39 };

static const uint64_t sizes[] = { 0, 1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33,
	63, 64, 65, 127, 128, 129, 255, 257, 1000, 4095, 4096, 4097, 8191, 8193,
	20001 };

static void
test_ebq_matches_the_reference_on_every_isa(void **state)
{
	static const double rel[] = { 1e-4, 1e-2, 0.05, 0.3, 2.0 };
	float *buf = malloc((20001 + 1) * sizeof(float));

	(void)state;
	assert_non_null(buf);
	find_isas();
	for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
		for (int d = D_UNIFORM; d <= D_SUBNORMAL; d++)
			for (size_t r = 0; r < sizeof rel / sizeof rel[0];
			     r++) {
				/* Odd sizes also at an unaligned address. */
				float *x = buf + (sizes[s] % 2);

				fill(x, sizes[s], d);
				check(x, sizes[s], rel[r] * scale[d]);
			}
	free(buf);
}

static void
test_ebq_stores_nan_and_infinities_raw(void **state)
{
	float x[37];
	uint8_t m[HDR + 4 * 37];
	float out[37];
	size_t len;
	bellows_ebq_info in;

	(void)state;
	find_isas();
	for (int special = 0; special < 3; special++) {
		fill(x, 37, D_UNIFORM);
		x[special * 11 + 3] = special == 0 ? NAN
		    : special == 1                 ? INFINITY
						   : -INFINITY;
		check(x, 37, 0.01);
		assert_int_equal(bellows_ebq_encode(x, 37, 0.01, 0, NULL, m,
				     sizeof m, &len),
		    0);
		assert_int_equal(bellows_ebq_info_read(m, len, &in), 0);
		assert_int_equal(in.mode, BELLOWS_EBQ_RAW);
		assert_int_equal(bellows_ebq_decode(m, len, out, 37, NULL), 0);
		assert_memory_equal(out, x, sizeof x);
	}
	/* A zero bound stores raw too. */
	fill(x, 37, D_RELU);
	assert_int_equal(bellows_ebq_encode(x, 37, 0.0, 0, NULL, m, sizeof m,
			     &len),
	    0);
	assert_int_equal(bellows_ebq_info_read(m, len, &in), 0);
	assert_int_equal(in.mode, BELLOWS_EBQ_RAW);
}

/* A bound whose step rounds to eb in float32 (amax 1.5): values around
 * 0.75 eb get code 1 whose reconstruction the filter zeroes. The sparse
 * layout still stores those codes and is sized by them. */
static void
test_ebq_sizes_layouts_by_codes_the_filter_zeroes(void **state)
{
	const double eb = ldexp(1.0 + ldexp(1.0, -18) + ldexp(1.0, -30), -23);
	float *x = calloc(4096, sizeof(float));
	uint8_t *m = malloc(bellows_ebq_bound(4096));
	size_t len;

	(void)state;
	assert_non_null(x);
	assert_non_null(m);
	find_isas();
	for (int many = 1000; many <= 4000; many += 3000) {
		ref_plan p;

		x[0] = 1.5f;
		for (int i = 1; i < many; i++)
			x[i] = (float)(0.75 * eb);
		p = ref_make_plan(x, 4096, eb, 0);
		assert_true((float)p.step <= (float)eb);
		assert_true(p.nonzero < p.nzq);
		check(x, 4096, eb);
		assert_int_equal(bellows_ebq_encode(x, 4096, eb,
				     BELLOWS_EBQ_BYTE_CODES, NULL, m,
				     bellows_ebq_bound(4096), &len),
		    0);
		assert_int_equal(m[3],
		    many == 1000 ? BELLOWS_EBQ_SPARSE : BELLOWS_EBQ_RAW);
	}
	free(x);
	free(m);
}

static void
test_ebq_holds_the_bound_on_every_element(void **state)
{
	enum {
		N = 50000
	};
	float *x = malloc(N * sizeof(float)), *out = malloc(N * sizeof(float));
	uint8_t *m = malloc(bellows_ebq_bound(N));

	(void)state;
	assert_non_null(x);
	assert_non_null(out);
	assert_non_null(m);
	find_isas();
	for (int round = 0; round < 40; round++) {
		/* Magnitudes over many binades, bounds from 1e-6 to 1 of them.
		 */
		double mag = pow(10.0, (double)(round % 20) - 10.0);
		double eb = mag *
		    pow(10.0, -6.0 * (double)(rng() % 1000) / 1000.0);

		for (int i = 0; i < N; i++)
			x[i] = (float)(unif() * mag *
			    pow(2.0, -(double)(rng() % 30)));
		for (int k = 0; k < n_isas; k++) {
			size_t len;

			bellows_ebq_force_isa(isas[k]);
			assert_int_equal(bellows_ebq_encode(x, N, eb, 0, NULL,
					     m, bellows_ebq_bound(N), &len),
			    0);
			assert_int_equal(bellows_ebq_decode(m, len, out, N,
					     NULL),
			    0);
			for (int i = 0; i < N; i++) {
				if (!(fabs((double)x[i] - (double)out[i]) <=
					eb))
					fail_msg(
					    "element %d: %a decodes to %a, "
					    "bound %a",
					    i, x[i], out[i], eb);
				assert_true(out[i] == 0.0f ||
				    fabsf(out[i]) > (float)eb || m[3] == 0);
			}
		}
	}
	bellows_ebq_force_isa(0);
	free(x);
	free(out);
	free(m);
}

/* For targets 2^(b-1) - 1 and 2^(b-1) of max |q|, the code takes b and
 * b + 1 bits (and 8, 16 or 32 with byte codes). */
static void
test_ebq_chooses_the_bits_at_each_boundary(void **state)
{
	enum {
		N = 64
	};
	float x[N];
	uint8_t m[HDR + 4 * N];
	const double eb = 0.5;

	(void)state;
	for (unsigned b = 1; b <= 22; b++) {
		for (int up = 0; up < 2; up++) {
			int64_t target = (INT64_C(1) << (b - 1)) - 1 + up;
			ref_plan p;
			size_t len;
			float v;

			/* A value whose code is target: search near
			 * target * step (the step depends on the value's
			 * binade only). */
			v = (float)target;
			for (int it = 0; it < 3; it++) {
				p = ref_make_plan(&v, 1, eb, 0);
				v = (float)((double)target *
				    (p.step > 0 ? p.step : 1));
			}
			for (int i = 0; i < N; i++)
				x[i] = (float)(unif() * (double)v * 0.5);
			x[17] = -v;
			p = ref_make_plan(x, N, eb, 0);
			if (p.mode == BELLOWS_EBQ_RAW || p.qmax != target)
				fail_msg("no value with code %lld (qmax %lld)",
				    (long long)target, (long long)p.qmax);
			assert_int_equal(bellows_ebq_encode(x, N, eb, 0, NULL,
					     m, sizeof m, &len),
			    0);
			assert_int_equal(m[4], b + (unsigned)up);
			assert_int_equal(bellows_ebq_encode(x, N, eb,
					     BELLOWS_EBQ_BYTE_CODES, NULL, m,
					     sizeof m, &len),
			    0);
			if (b + (unsigned)up <= 8)
				assert_int_equal(m[4], 8);
			else if (b + (unsigned)up <= 16)
				assert_int_equal(m[4], 16);
			else /* 32-bit codes are the floats' size: raw */
				assert_int_equal(m[3], BELLOWS_EBQ_RAW);
		}
	}
}

static void
test_ebq_refuses_bad_arguments(void **state)
{
	float x[4] = { 1, 2, 3, 4 }, out[4];
	uint8_t m[HDR + 16];
	size_t len;
	bellows_ebq_info in;

	(void)state;
	assert_int_equal(bellows_ebq_encode(x, 4, -1.0, 0, NULL, m, sizeof m,
			     &len),
	    BELLOWS_EINVAL);
	assert_int_equal(bellows_ebq_encode(x, 4, NAN, 0, NULL, m, sizeof m,
			     &len),
	    BELLOWS_EINVAL);
	assert_int_equal(bellows_ebq_encode(x, 4, INFINITY, 0, NULL, m,
			     sizeof m, &len),
	    BELLOWS_EINVAL);
	assert_int_equal(bellows_ebq_encode(NULL, 4, 0.1, 0, NULL, m, sizeof m,
			     &len),
	    BELLOWS_EINVAL);
	assert_int_equal(bellows_ebq_encode(x, 4, 0.1, 1 << 7, NULL, m,
			     sizeof m, &len),
	    BELLOWS_EINVAL);
	assert_int_equal(bellows_ebq_encode(x, 4, 0.1, 0, NULL, (void *)x, 16,
			     &len),
	    BELLOWS_EINVAL);
	/* Too small a buffer: untouched. */
	memset(m, 0x5a, sizeof m);
	assert_int_equal(bellows_ebq_encode(x, 4, 0.0, 0, NULL, m, HDR + 15,
			     &len),
	    BELLOWS_EMSGSIZE);
	assert_int_equal(m[0], 0x5a);
	if (!bellows_ebq_have_zstd())
		assert_int_equal(bellows_ebq_encode(x, 4, 0.1, BELLOWS_EBQ_ZSTD,
				     NULL, m, sizeof m, &len),
		    BELLOWS_ENOTSUP);
	else
		assert_int_equal(bellows_ebq_encode(x, 4, 0.1, BELLOWS_EBQ_ZSTD,
				     NULL, m, sizeof m, &len),
		    BELLOWS_EINVAL);
	assert_int_equal(bellows_ebq_encode(x, 4, 0.1, 0, NULL, m, sizeof m,
			     &len),
	    0);
	assert_int_equal(bellows_ebq_decode(m, len, out, 3, NULL),
	    BELLOWS_EMISMATCH);
	assert_int_equal(bellows_ebq_decode(m, len, NULL, 4, NULL),
	    BELLOWS_EINVAL);
	assert_int_equal(bellows_ebq_info_read(NULL, len, &in), BELLOWS_EINVAL);
	in.mode = BELLOWS_EBQ_RAW;
	assert_int_equal(bellows_ebq_decode_parts(&in, m, m, out),
	    BELLOWS_EINVAL);
	assert_int_equal(bellows_ebq_force_isa(99), BELLOWS_ENOTSUP);
	/* Parts for an input other than the planned one (more non-zero
	 * codes than planned): refused before a code is written past the
	 * planned buffer (ASan). */
	{
		float y[64] = { 0 }, z[64];
		uint8_t mask[8], *codes;
		bellows_ebq_info pl;

		y[5] = 1.0f;
		for (int i = 0; i < 64; i++)
			z[i] = 1.0f;
		assert_int_equal(bellows_ebq_plan(y, 64, 0.01, 0, &pl), 0);
		assert_int_equal(pl.mode, BELLOWS_EBQ_SPARSE);
		codes = malloc(pl.codes_bytes);
		assert_non_null(codes);
		assert_int_equal(bellows_ebq_encode_parts(z, &pl, mask, codes,
				     NULL),
		    BELLOWS_EINVAL);
		free(codes);
	}
	assert_int_equal(bellows_ebq_bound(UINT64_MAX), 0);
}

/* A message of len bytes for n values is refused cut anywhere short (in
 * a buffer of exactly the cut's size) and with a trailing byte. */
static void
assert_cuts_refused(const uint8_t *msg, size_t len, float *out, uint64_t n)
{
	for (size_t cut = 0; cut <= len; cut++) {
		size_t size = cut < len ? cut : len + 1;
		uint8_t *p = malloc(size > 0 ? size : 1);

		assert_non_null(p);
		memcpy(p, msg, cut < len ? cut : len);
		if (cut == len)
			p[len] = 0;
		assert_int_equal(bellows_ebq_decode(p, size, out, n, NULL),
		    BELLOWS_EPROTO);
		free(p);
	}
}

static void
test_ebq_refuses_corrupt_and_truncated_messages(void **state)
{
	enum {
		N = 203
	};
	float x[N], out[N];
	uint8_t m[HDR + 4 * N], c[HDR + 4 * N];
	size_t len;

	(void)state;
	for (int d = D_UNIFORM; d <= D_RELU; d++) {
		fill(x, N, d);
		for (int bc = 0; bc < 2; bc++) {
			assert_int_equal(bellows_ebq_encode(x, N, 0.01,
					     bc ? BELLOWS_EBQ_BYTE_CODES : 0,
					     NULL, m, sizeof m, &len),
			    0);
			assert_cuts_refused(m, len, out, N);
		}
	}
	/* ReLU data is sparse: corrupt its header fields one by one. */
	fill(x, N, D_RELU);
	assert_int_equal(bellows_ebq_encode(x, N, 0.01, 0, NULL, m, sizeof m,
			     &len),
	    0);
	assert_int_equal(m[3], BELLOWS_EBQ_SPARSE);
#define CORRUPT(stmt, rc)                                                      \
	do {                                                                   \
		memcpy(c, m, len);                                             \
		stmt;                                                          \
		assert_int_equal(bellows_ebq_decode(c, len, out, N, NULL),     \
		    rc);                                                       \
	} while (0)
	CORRUPT(c[0] = 'X', BELLOWS_EPROTO);
	CORRUPT(c[2] = 2, BELLOWS_EVERSION);
	CORRUPT(c[3] = 3, BELLOWS_EPROTO);
	CORRUPT(c[4] = 0, BELLOWS_EPROTO);
	CORRUPT(c[4] = 33, BELLOWS_EPROTO);
	CORRUPT(c[5] = 2, BELLOWS_EPROTO);
	CORRUPT(c[6] = 1, BELLOWS_EPROTO);
	CORRUPT(c[8] ^= 0x10, BELLOWS_EPROTO);  /* n: sizes disagree */
	CORRUPT(c[23] = 0xff, BELLOWS_EPROTO);  /* eb NaN */
	CORRUPT(c[31] = 0x80, BELLOWS_EPROTO);  /* step negative */
	CORRUPT(c[32] ^= 0x10, BELLOWS_EPROTO); /* codes: size disagrees */
	CORRUPT(c[47] = 1, BELLOWS_EPROTO);     /* nonzero > n */
	CORRUPT(c[48] ^= 1, BELLOWS_EPROTO);    /* payload bytes */
	CORRUPT(c[5] = 1, BELLOWS_EPROTO);      /* "compressed" as is */
	/* A mask bit moved: the set bits still count the codes (decodes);
	 * one bit more or fewer does not, nor a set padding bit. */
	CORRUPT(c[HDR] ^= 0x01, BELLOWS_EPROTO);
	CORRUPT(c[HDR + N / 8] |= 0x80, BELLOWS_EPROTO);
	CORRUPT(c[len - 1] |= 0x80,
	    c[4] * (m[32] | m[33] << 8) % 8 ? BELLOWS_EPROTO : 0);
#undef CORRUPT
	/* Random corruption: an error or a decode, never a crash or a read
	 * beyond the buffer (ASan). */
	for (int round = 0; round < 20000; round++) {
		size_t l = len - (rng() % 4 == 0 ? rng() % len : 0);
		uint8_t *p = malloc(l > 0 ? l : 1);
		int flips = 1 + (int)(rng() % 4);

		assert_non_null(p);
		memcpy(p, m, l);
		for (int f = 0; f < flips && l > 0; f++)
			p[rng() % l] ^= (uint8_t)(1u << (rng() % 8));
		(void)bellows_ebq_decode(p, l, out, N, NULL);
		free(p);
	}
}

static void
test_ebq_zstd_payload_round_trips(void **state)
{
	enum {
		N = 100000
	};
	float *x = malloc(N * sizeof(float)), *a = malloc(N * sizeof(float)),
	      *b = malloc(N * sizeof(float));
	uint8_t *m = malloc(bellows_ebq_bound(N)),
		*z = malloc(bellows_ebq_bound(N));
	bellows_ebq *ctx = NULL;
	bellows_ebq_info in;
	size_t len, zlen;

	(void)state;
	if (!bellows_ebq_have_zstd()) {
		assert_int_equal(bellows_ebq_new(N, &ctx), BELLOWS_ENOTSUP);
		skip();
	}
	assert_int_equal(bellows_ebq_new(N, &ctx), 0);
	fill(x, N, D_RELU);
	for (int i = 0; i < N; i++) /* runs of zeros: compressible */
		if ((i / 64) % 3 == 0)
			x[i] = 0.0f;
	assert_int_equal(bellows_ebq_encode(x, N, 0.01, 0, NULL, m,
			     bellows_ebq_bound(N), &len),
	    0);
	assert_int_equal(bellows_ebq_encode(x, N, 0.01, BELLOWS_EBQ_ZSTD, ctx,
			     z, bellows_ebq_bound(N), &zlen),
	    0);
	assert_int_equal(bellows_ebq_info_read(z, zlen, &in), 0);
	assert_int_equal(in.zstd, 1);
	assert_true(zlen < len);
	assert_int_equal(bellows_ebq_decode(z, zlen, a, N, NULL),
	    BELLOWS_EINVAL);
	assert_int_equal(bellows_ebq_decode(z, zlen, a, N, ctx), 0);
	assert_int_equal(bellows_ebq_decode(m, len, b, N, NULL), 0);
	assert_memory_equal(a, b, N * sizeof(float));
	/* A corrupt compressed payload is refused. */
	for (int round = 0; round < 200; round++) {
		uint8_t *p = malloc(zlen);

		assert_non_null(p);
		memcpy(p, z, zlen);
		p[HDR + rng() % (zlen - HDR)] ^= (uint8_t)(1u << (rng() % 8));
		(void)bellows_ebq_decode(p, zlen, a, N, ctx);
		free(p);
	}
	assert_cuts_refused(z, HDR + 64, a, N);
	bellows_ebq_destroy(&ctx);
	bellows_ebq_destroy(&ctx);
	assert_null(ctx);
	free(x);
	free(a);
	free(b);
	free(m);
	free(z);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ebq_matches_the_reference_on_every_isa),
		cmocka_unit_test(test_ebq_stores_nan_and_infinities_raw),
		cmocka_unit_test(test_ebq_holds_the_bound_on_every_element),
		cmocka_unit_test(
		    test_ebq_sizes_layouts_by_codes_the_filter_zeroes),
		cmocka_unit_test(test_ebq_chooses_the_bits_at_each_boundary),
		cmocka_unit_test(test_ebq_refuses_bad_arguments),
		cmocka_unit_test(
		    test_ebq_refuses_corrupt_and_truncated_messages),
		cmocka_unit_test(test_ebq_zstd_payload_round_trips),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
