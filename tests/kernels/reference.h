/* reference - what the kernels must compute, the slow and obvious way.
 *
 * Widening without the kernels' bit tricks (float16 through ldexp), sums
 * in long double with Kahan compensation (exact to about 1e-19 relative,
 * far below the 1e-12 the kernels are held to), and the accumulator and
 * momentum updates one element at a time in float. Also the test data:
 * reproducible random gradients of mixed magnitudes with the special
 * values the kernels must survive.
 */
#ifndef TEST_REFERENCE_H
#define TEST_REFERENCE_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/kernels.h"

typedef struct ref_stats {
	uint64_t count;        /* elements */
	uint64_t zeros;        /* finite zeros */
	uint64_t nonfinite;    /* NaN or infinite */
	long double sum_sq;    /* Kahan sum of g^2 */
	long double sum_sq_c;  /* its compensation */
	long double abs_sum;   /* Kahan sum of |g| */
	long double abs_sum_c; /* its compensation */
	double max_abs;        /* largest finite |g| */
} ref_stats;

/* Data sets of ref_fill. */
enum ref_data {
	REF_MIXED,     /* random signs, exponents 2^-40..2^40, a few zeros */
	REF_SPECIALS,  /* REF_MIXED with NaN, +-Inf, subnormals, huge */
	REF_HUGE_TINY, /* only near FLT_MAX and subnormal magnitudes */
	REF_ZEROS,     /* +0 and -0 */
	REF_SUBNORMAL, /* subnormal floats only */
	REF_NARROW,    /* 1 + tiny noise: sums of many equal terms */
};

/* Element i of grad widened to float, independently of element.h. */
float ref_widen(const void *grad, uint64_t i, int dtype);

/* Fills n elements of dtype at out with data set `data`, from seed. */
void ref_fill(void *out, uint64_t n, int dtype, int data, uint64_t seed);

/* Folds n elements into *r. */
void ref_add(ref_stats *r, const void *grad, uint64_t n, int dtype);

/* Applies the updates to acc and m (either may be NULL) in float. */
void ref_update(float *acc, float *m, const void *grad, uint64_t n, int dtype,
    float beta);

/* Fails the test unless *got matches *want: counts and max_abs exactly,
 * the sums within `rel` relative. `what` names the case. */
void ref_check(const kern_stats *got, const ref_stats *want, double rel,
    const char *what);

/* Relative difference of got from want (0 when both are 0). */
double ref_rel(double got, long double want);

/* Returns a 64-byte aligned buffer of `bytes` bytes (at least 64) filled
 * with 0xa5, so that a kernel reading what it should not shows. Fails the
 * test when out of memory. Free with ref_free. */
void *ref_alloc(size_t bytes);

/* Frees a ref_alloc buffer; NULL-safe. */
void ref_free(void *p);

#endif /* TEST_REFERENCE_H */
