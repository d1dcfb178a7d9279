/* reference - the slow and obvious statistics, see reference.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "reference.h"

float
ref_widen(const void *grad, uint64_t i, int dtype)
{
	uint16_t h;
	uint32_t u;
	float f;
	int e;
	int m;
	double v;

	switch (dtype) {
	case KERN_F32:
		memcpy(&f, (const char *)grad + 4 * i, 4);
		return f;
	case KERN_BF16:
		memcpy(&h, (const char *)grad + 2 * i, 2);
		u = (uint32_t)h << 16;
		memcpy(&f, &u, 4);
		return f;
	default:
		memcpy(&h, (const char *)grad + 2 * i, 2);
		e = (h >> 10) & 0x1f;
		m = h & 0x3ff;
		if (e == 0x1f)
			v = m != 0 ? NAN : INFINITY;
		else if (e == 0)
			v = ldexp((double)m, -24);
		else
			v = ldexp((double)(m | 0x400), e - 25);
		return (float)((h & 0x8000) ? -v : v);
	}
}

/* xorshift64*: reproducible, and good enough for test data. */
static uint64_t
ref_next(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 2685821657736338717ull;
}

/* Bits of a special value of dtype, picked by r. */
static uint32_t
ref_special(int dtype, uint64_t r)
{
	static const uint32_t f32[] = { 0x7fc00000u, 0xffc00001u, 0x7f800001u,
		0x7f800000u, 0xff800000u, 0x00000001u, 0x807fffffu, 0x7f7fffffu,
		0xff7fffffu, 0x00400000u, 0x80000000u };
	static const uint32_t f16[] = { 0x7e00u, 0xfc01u, 0x7c01u, 0x7c00u,
		0xfc00u, 0x0001u, 0x83ffu, 0x7bffu, 0xfbffu, 0x0200u, 0x8000u };
	static const uint32_t bf16[] = { 0x7fc0u, 0xff81u, 0x7f81u, 0x7f80u,
		0xff80u, 0x0001u, 0x807fu, 0x7f7fu, 0xff7fu, 0x0040u, 0x8000u };
	size_t k = r % (sizeof(f32) / sizeof(f32[0]));

	if (dtype == KERN_F32)
		return f32[k];
	return dtype == KERN_F16 ? f16[k] : bf16[k];
}

/* Bits of one element of data set `data`. */
static uint32_t
ref_element(int dtype, int data, uint64_t *s)
{
	uint64_t r = ref_next(s);
	uint32_t sign = (uint32_t)(r >> 63);
	uint32_t man = (uint32_t)(r >> 8);
	uint32_t exp;
	/* field widths: exponent bias, mantissa bits, total bits */
	int bias = dtype == KERN_F16 ? 15 : 127;
	int mbits = dtype == KERN_F32 ? 23 : dtype == KERN_F16 ? 10 : 7;
	int top = dtype == KERN_F16 ? 30 : 254;
	int span = dtype == KERN_F16 ? 14 : 40;

	switch (data) {
	case REF_ZEROS:
		exp = 0;
		man = 0;
		break;
	case REF_SUBNORMAL:
		exp = 0;
		man |= 1;
		break;
	case REF_HUGE_TINY:
		exp = (r >> 40) & 1 ? (uint32_t)top - (uint32_t)((r >> 41) & 3)
				    : 0;
		break;
	case REF_NARROW:
		exp = (uint32_t)bias;
		man &= (1u << (mbits > 12 ? 12 : mbits)) - 1;
		break;
	case REF_SPECIALS:
		if ((r >> 32) % 13 == 0)
			return ref_special(dtype, r >> 4);
		/* fall through */
	default:
		if ((r >> 36) % 17 == 0) {
			exp = 0;
			man = 0;
		} else {
			exp = (uint32_t)(bias - span) +
			    (uint32_t)((r >> 40) % (uint64_t)(2 * span + 1));
		}
		break;
	}
	man &= (1u << mbits) - 1;
	if (dtype == KERN_F32)
		return (sign << 31) | (exp << 23) | man;
	if (dtype == KERN_F16)
		return (sign << 15) | (exp << 10) | man;
	return (sign << 15) | (exp << 7) | man;
}

void
ref_fill(void *out, uint64_t n, int dtype, int data, uint64_t seed)
{
	uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;

	for (uint64_t i = 0; i < n; i++) {
		uint32_t bits = ref_element(dtype, data, &s);

		if (dtype == KERN_F32) {
			memcpy((char *)out + 4 * i, &bits, 4);
		} else {
			uint16_t h = (uint16_t)bits;

			memcpy((char *)out + 2 * i, &h, 2);
		}
	}
}

static void
ref_kahan(long double *sum, long double *c, long double x)
{
	long double y = x - *c;
	long double t = *sum + y;

	*c = (t - *sum) - y;
	*sum = t;
}

void
ref_add(ref_stats *r, const void *grad, uint64_t n, int dtype)
{
	for (uint64_t i = 0; i < n; i++) {
		float f = ref_widen(grad, i, dtype);
		long double v = fabsl((long double)f);

		r->count++;
		if (!isfinite(f)) {
			r->nonfinite++;
			continue;
		}
		r->zeros += f == 0.0f;
		ref_kahan(&r->sum_sq, &r->sum_sq_c, v * v);
		ref_kahan(&r->abs_sum, &r->abs_sum_c, v);
		if ((double)v > r->max_abs)
			r->max_abs = (double)v;
	}
}

void
ref_update(float *acc, float *m, const void *grad, uint64_t n, int dtype,
    float beta)
{
	float c = 1.0f - beta;

	for (uint64_t i = 0; i < n; i++) {
		float g = ref_widen(grad, i, dtype);
		volatile float bm;
		volatile float cg;

		if (!isfinite(g))
			continue;
		if (acc != NULL)
			acc[i] = acc[i] + g;
		if (m != NULL) {
			/* volatile: two roundings, whatever the compiler
			 * would fuse. */
			bm = beta * m[i];
			cg = c * g;
			m[i] = bm + cg;
		}
	}
}

double
ref_rel(double got, long double want)
{
	long double d = fabsl((long double)got - want);

	if (want == 0.0L)
		return got == 0.0 ? 0.0 : INFINITY;
	return (double)(d / fabsl(want));
}

void
ref_check(const kern_stats *got, const ref_stats *want, double rel,
    const char *what)
{
	double e_sq = ref_rel(kern_stats_sum_sq(got), want->sum_sq);
	double e_ab = ref_rel(kern_stats_abs_sum(got), want->abs_sum);

	if (got->count != want->count || got->zeros != want->zeros ||
	    got->nonfinite != want->nonfinite)
		fail_msg("%s: count %llu zeros %llu nonfinite %llu, want "
			 "%llu %llu %llu",
		    what, (unsigned long long)got->count,
		    (unsigned long long)got->zeros,
		    (unsigned long long)got->nonfinite,
		    (unsigned long long)want->count,
		    (unsigned long long)want->zeros,
		    (unsigned long long)want->nonfinite);
	if (got->max_abs != want->max_abs)
		fail_msg("%s: max_abs %.9g, want %.9g", what, got->max_abs,
		    want->max_abs);
	if (!(e_sq <= rel) || !(e_ab <= rel))
		fail_msg("%s: sum_sq %.17g (rel err %.3g), abs_sum %.17g "
			 "(rel err %.3g), want %.17Lg %.17Lg within %.3g",
		    what, kern_stats_sum_sq(got), e_sq, kern_stats_abs_sum(got),
		    e_ab, want->sum_sq, want->abs_sum, rel);
}

void *
ref_alloc(size_t bytes)
{
	size_t rounded = (bytes + 63) / 64 * 64;
	void *p = aligned_alloc(64, rounded > 0 ? rounded : 64);

	if (p == NULL)
		fail_msg("out of memory for %zu bytes", bytes);
	memset(p, 0xa5, rounded > 0 ? rounded : 64);
	return p;
}

void
ref_free(void *p)
{
	free(p);
}
