/* test_histogram - the CPU exponent histogram against the reference.
 *
 * The bin of an element is the biased exponent of its float32 widening,
 * computed here from ref_widen; every float16 and bfloat16 bit pattern is
 * checked, and random float32 data of every data set and awkward sizes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include <bellows/error.h>

#include "kernels/kernels.h"
#include "reference.h"

static void
ref_histogram(const void *grad, uint64_t n, int dtype, uint64_t *bins)
{
	for (uint64_t i = 0; i < n; i++) {
		float f = ref_widen(grad, i, dtype);
		uint32_t u;

		memcpy(&u, &f, 4);
		bins[(u >> 23) & 0xff]++;
	}
}

static void
test_histogram_bins_every_16_bit_pattern_by_its_float_exponent(void **state)
{
	uint16_t *h = ref_alloc(65536 * sizeof(uint16_t));
	kern_backend b;

	(void)state;
	for (uint32_t i = 0; i < 65536; i++)
		h[i] = (uint16_t)i;
	assert_int_equal(kern_backend_open(&b, KERN_HOST, NULL), 0);
	for (int dtype = KERN_F16; dtype <= KERN_BF16; dtype++) {
		uint64_t got[256];
		uint64_t want[256];

		memset(got, 0, sizeof(got));
		memset(want, 0, sizeof(want));
		assert_int_equal(b.ops->histogram(b.ctx, h, 65536, dtype, got,
				     NULL),
		    0);
		ref_histogram(h, 65536, dtype, want);
		assert_memory_equal(got, want, sizeof(got));
	}
	kern_backend_close(&b);
	ref_free(h);
}

static void
test_histogram_adds_to_the_bins_for_every_data_set(void **state)
{
	static const uint64_t ns[] = { 0, 1, 3, 4, 5, 1001, 65537 };
	static const int sets[] = { REF_MIXED, REF_SPECIALS, REF_HUGE_TINY,
		REF_ZEROS, REF_SUBNORMAL };
	float *g = ref_alloc(65537 * sizeof(float));
	kern_backend b;

	(void)state;
	assert_int_equal(kern_backend_open(&b, KERN_HOST, NULL), 0);
	for (size_t s = 0; s < sizeof(sets) / sizeof(sets[0]); s++) {
		for (size_t k = 0; k < sizeof(ns) / sizeof(ns[0]); k++) {
			uint64_t got[256];
			uint64_t want[256];
			uint64_t total = 0;

			/* Start from non-zero bins: the kernel adds. */
			for (int i = 0; i < 256; i++)
				got[i] = want[i] = (uint64_t)i;
			ref_fill(g, ns[k], KERN_F32, sets[s], ns[k] + s);
			assert_int_equal(b.ops->histogram(b.ctx, g, ns[k],
					     KERN_F32, got, NULL),
			    0);
			ref_histogram(g, ns[k], KERN_F32, want);
			assert_memory_equal(got, want, sizeof(got));
			for (int i = 0; i < 256; i++)
				total += got[i] - (uint64_t)i;
			assert_int_equal(total, ns[k]);
		}
	}
	kern_backend_close(&b);
	ref_free(g);
}

static void
test_histogram_refuses_bad_arguments(void **state)
{
	uint64_t bins[256];
	float g[2] = { 1.0f, 2.0f };
	kern_backend b;

	(void)state;
	assert_int_equal(kern_backend_open(&b, KERN_HOST, NULL), 0);
	assert_int_equal(b.ops->histogram(b.ctx, g, 2, 5, bins, NULL),
	    BELLOWS_EINVAL);
	assert_int_equal(b.ops->histogram(b.ctx, g, 2, KERN_F32, NULL, NULL),
	    BELLOWS_EINVAL);
	assert_int_equal(b.ops->histogram(b.ctx, NULL, 2, KERN_F32, bins, NULL),
	    BELLOWS_EINVAL);
	memset(bins, 0, sizeof(bins));
	assert_int_equal(b.ops->histogram(b.ctx, NULL, 0, KERN_F32, bins, NULL),
	    0);
	kern_backend_close(&b);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(
		    test_histogram_bins_every_16_bit_pattern_by_its_float_exponent),
		cmocka_unit_test(
		    test_histogram_adds_to_the_bins_for_every_data_set),
		cmocka_unit_test(test_histogram_refuses_bad_arguments),
	};

	return cmocka_run_group_tests_name("kernels cpu histogram", tests, NULL,
	    NULL);
}
