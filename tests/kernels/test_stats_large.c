/* test_stats_large - 100M elements, the accuracy goals.
 *
 * The sums over 10^8 float32 values must come within 1e-12 relative of a
 * long double Kahan reference, on the best ISA (with the accumulator and
 * momentum, checked bit for bit), on the portable path, and split over
 * threads, for two data sets: values spread over 2^-40..2^40 with zeros,
 * NaN, infinities and subnormals mixed in (the sums are dominated by a few
 * large terms: easy), and 10^8 copies of 1 + 717 * 2^-23, whose square's
 * low bits are just under half an ulp of the running sum once it passes
 * 2^26, so that a plain double loop rounds the same way every time and
 * ends about 2e-9 low. The plain loop's error is printed for comparison.
 * These hold the exact path (KERN_PRECISION_EXACT). The relaxed default
 * is held to 1e-6 on 10^8 adversarial elements (fill_adversarial).
 * Suite 'slow': 400 MB per buffer, a few seconds per pass.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/kern_stats.h"
#include "reference.h"

#define N   100000000ull
#define REL 1e-12

static void print_naive(const float *g, const ref_stats *ref);

static void
check_backend_at(int isa, uint32_t threads, int precision, double rel,
    const float *g, const ref_stats *ref, float *acc, float *m)
{
	kern_backend b;
	kern_config cfg;
	kern_stats st;
	kern_job job = { .grad = g,
		.n = N,
		.dtype = KERN_F32,
		.beta = 0.9f,
		.stats = &st,
		.acc = acc,
		.momentum = m };

	kern_config_init(&cfg);
	cfg.isa = isa;
	cfg.threads = threads;
	cfg.precision = precision;
	assert_int_equal(kern_backend_open(&b, KERN_HOST, &cfg), 0);
	memset(&st, 0, sizeof(st));
	assert_int_equal(b.ops->stats(b.ctx, &job, NULL), 0);
	print_message("%s, %s, %u extra threads: sum_sq rel err %.3g, "
		      "abs_sum rel err %.3g\n",
	    kern_cpu_isa_name(isa),
	    precision == KERN_PRECISION_EXACT ? "exact" : "relaxed", threads,
	    ref_rel(kern_stats_sum_sq(&st), ref->sum_sq),
	    ref_rel(kern_stats_abs_sum(&st), ref->abs_sum));
	ref_check(&st, ref, rel, kern_cpu_isa_name(isa));
	kern_backend_close(&b);
}

/* The exact path, held to REL. */
static void
check_backend(int isa, uint32_t threads, const float *g, const ref_stats *ref,
    float *acc, float *m)
{
	check_backend_at(isa, threads, KERN_PRECISION_EXACT, REL, g, ref, acc,
	    m);
}

/* Adversarial data for the float32 sums, N elements from seed: in runs of
 * a few thousand elements (longer than a block) each of
 * - values 1 + k 2^-23 with k < 2^23 of alternating sign, whose squares
 *   and sums round in float on nearly every add,
 * - magnitudes spread over 2^-60..2^60, random signs,
 * - huge values 2^60..2^63 (just beyond the float sums' range: such a
 *   run is summed the exact way) mixed with tiny ones,
 * - subnormal floats only, and normal floats under 2^-100,
 * - zeros of both signs with tiny values,
 * and one large outlier (2^59) every 1,048,573 elements. The sums are
 * dominated by the float32 blocks of the spread values, so the bound is
 * put to the test, not the exact fallback. */
static void
fill_adversarial(float *g, uint64_t n, uint64_t seed)
{
	uint64_t r = seed;
	uint32_t kind = 0;

	for (uint64_t i = 0; i < n; i++) {
		uint32_t bits;
		uint32_t sign;

		if (i % 3001 == 0)
			kind = (uint32_t)(r >> 40) % 6;
		r = r * 6364136223846793005ull + 1442695040888963407ull;
		sign = (uint32_t)(r >> 63) << 31;
		switch (kind) {
		case 0:
			bits = 0x3f800000u | (uint32_t)(r >> 41);
			sign = (uint32_t)(i & 1) << 31;
			break;
		case 1:
			bits = ((uint32_t)(67 + (r >> 33) % 120) << 23) |
			    (uint32_t)(r >> 41);
			break;
		case 2:
			bits = ((r >> 20) & 1)
			    ? ((uint32_t)(187 + (r >> 33) % 3) << 23)
			    : ((uint32_t)(1 + (r >> 33) % 40) << 23);
			bits |= (uint32_t)(r >> 41);
			break;
		case 3:
			bits = ((r >> 20) & 1)
			    ? (uint32_t)(r >> 41) | 1u
			    : ((uint32_t)(1 + (r >> 33) % 26) << 23) |
				(uint32_t)(r >> 41);
			break;
		case 4:
			bits = ((r >> 20) & 3) ? 0 : (uint32_t)(r >> 41);
			break;
		default:
			bits = ((uint32_t)(100 + (r >> 33) % 60) << 23) |
			    (uint32_t)(r >> 41);
			break;
		}
		if (i % 1048573 == 1048572)
			bits = 186u << 23; /* 2^59 */
		bits |= sign;
		memcpy(&g[i], &bits, sizeof(bits));
	}
}

/* The relaxed default over 10^8 adversarial elements, against the long
 * double Kahan reference: within KERN_RELAXED_BOUND on the best ISA (with
 * the updates, bit for bit), AVX2 too where AVX-512 is best, the portable
 * path and over threads; then
 * on 10^8 alternating-sign copies of 1 + 717 2^-23. */
static void
test_relaxed_sums_over_100m_adversarial_elements_are_within_1e_6(void **state)
{
	float *g = ref_alloc(N * sizeof(float));
	float *acc = ref_alloc(N * sizeof(float));
	float *m = ref_alloc(N * sizeof(float));
	float *racc = ref_alloc(N * sizeof(float));
	float *rm = ref_alloc(N * sizeof(float));
	const double bound = KERN_RELAXED_BOUND;
	ref_stats ref;

	(void)state;
	memset(&ref, 0, sizeof(ref));
	fill_adversarial(g, N, 77);
	ref_add(&ref, g, N, KERN_F32);
	print_naive(g, &ref);
	for (uint64_t i = 0; i < N; i++) {
		acc[i] = racc[i] = 0.0f;
		m[i] = rm[i] = 0.0f;
	}
	check_backend_at(kern_cpu_isa_best(), 0, KERN_PRECISION_RELAXED, bound,
	    g, &ref, acc, m);
	ref_update(racc, rm, g, N, KERN_F32, 0.9f);
	assert_memory_equal(acc, racc, N * sizeof(float));
	assert_memory_equal(m, rm, N * sizeof(float));
	check_backend_at(KERN_ISA_SCALAR, 0, KERN_PRECISION_RELAXED, bound, g,
	    &ref, NULL, NULL);
	if (kern_cpu_isa_best() == KERN_ISA_AVX512)
		check_backend_at(KERN_ISA_AVX2, 0, KERN_PRECISION_RELAXED,
		    bound, g, &ref, NULL, NULL);
	check_backend_at(kern_cpu_isa_best(), 1, KERN_PRECISION_RELAXED, bound,
	    g, &ref, NULL, NULL);
	check_backend(kern_cpu_isa_best(), 0, g, &ref, NULL, NULL);

	memset(&ref, 0, sizeof(ref));
	for (uint64_t i = 0; i < N; i++)
		g[i] = (i & 1) ? -(1.0f + 717.0f * 0x1p-23f)
			       : 1.0f + 717.0f * 0x1p-23f;
	ref_add(&ref, g, N, KERN_F32);
	print_naive(g, &ref);
	check_backend_at(kern_cpu_isa_best(), 0, KERN_PRECISION_RELAXED, bound,
	    g, &ref, NULL, NULL);
	check_backend_at(KERN_ISA_SCALAR, 0, KERN_PRECISION_RELAXED, bound, g,
	    &ref, NULL, NULL);
	ref_free(rm);
	ref_free(racc);
	ref_free(m);
	ref_free(acc);
	ref_free(g);
}

/* Prints how far a plain double loop lands from the reference. */
static void
print_naive(const float *g, const ref_stats *ref)
{
	double naive_sq = 0.0;
	double naive_ab = 0.0;

	for (uint64_t i = 0; i < N; i++) {
		double v = g[i];

		if (isfinite(v)) {
			naive_sq += v * v;
			naive_ab += fabs(v);
		}
	}
	print_message("%llu elements, %llu non-finite, %llu zeros; a plain "
		      "double loop is off by %.3g (sum_sq) and %.3g "
		      "(abs_sum)\n",
	    (unsigned long long)N, (unsigned long long)ref->nonfinite,
	    (unsigned long long)ref->zeros, ref_rel(naive_sq, ref->sum_sq),
	    ref_rel(naive_ab, ref->abs_sum));
}

static void
test_sums_over_100m_mixed_elements_are_within_1e_12(void **state)
{
	float *g = ref_alloc(N * sizeof(float));
	float *acc = ref_alloc(N * sizeof(float));
	float *m = ref_alloc(N * sizeof(float));
	float *racc = ref_alloc(N * sizeof(float));
	float *rm = ref_alloc(N * sizeof(float));
	ref_stats ref;

	(void)state;
	memset(&ref, 0, sizeof(ref));
	ref_fill(g, N, KERN_F32, REF_SPECIALS, 2024);
	ref_add(&ref, g, N, KERN_F32);
	print_naive(g, &ref);

	for (uint64_t i = 0; i < N; i++) {
		acc[i] = racc[i] = 0.0f;
		m[i] = rm[i] = 0.0f;
	}
	check_backend(kern_cpu_isa_best(), 0, g, &ref, acc, m);
	ref_update(racc, rm, g, N, KERN_F32, 0.9f);
	assert_memory_equal(acc, racc, N * sizeof(float));
	assert_memory_equal(m, rm, N * sizeof(float));

	check_backend(KERN_ISA_SCALAR, 0, g, &ref, NULL, NULL);
	check_backend(kern_cpu_isa_best(), 1, g, &ref, NULL, NULL);

	memset(&ref, 0, sizeof(ref));
	for (uint64_t i = 0; i < N; i++)
		g[i] = 1.0f + 717.0f * 0x1p-23f;
	ref_add(&ref, g, N, KERN_F32);
	print_naive(g, &ref);
	check_backend(kern_cpu_isa_best(), 0, g, &ref, NULL, NULL);
	check_backend(KERN_ISA_SCALAR, 0, g, &ref, NULL, NULL);
	ref_free(rm);
	ref_free(racc);
	ref_free(m);
	ref_free(acc);
	ref_free(g);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(
		    test_sums_over_100m_mixed_elements_are_within_1e_12),
		cmocka_unit_test(
		    test_relaxed_sums_over_100m_adversarial_elements_are_within_1e_6),
	};

	return cmocka_run_group_tests_name("kernels 100M elements", tests, NULL,
	    NULL);
}
