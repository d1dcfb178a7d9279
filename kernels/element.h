/* element - the per-element arithmetic every backend shares.
 *
 * Compiled into C (the CPU backend) and CUDA (host and device) alike, so
 * that the scalar path, the vector paths' tails and the GPU agree on what
 * one element does: widening float16 and bfloat16 to float, classifying a
 * value, folding it into a lane of running sums, and the accumulator and
 * momentum updates, whose float products and sums are each rounded on
 * their own (never fused) so that every backend writes the same bits.
 *
 * The sums are carried as a high and a low double (kern_two_sum): adding
 * n non-negative terms loses at most about 2 ulp whatever n, where a plain
 * double sum of 100M terms may lose 1e-8 relative.
 */
#ifndef KERN_ELEMENT_H
#define KERN_ELEMENT_H

#include <stdint.h>
#include <string.h>

#include "kernels.h"

#if defined(__CUDACC__)
#define KERN_INLINE static __host__ __device__ __forceinline__
#else
#define KERN_INLINE static inline __attribute__((always_inline))
#endif

/* Rounded float product and sum: CUDA would otherwise fuse them. */
#if defined(__CUDA_ARCH__)
#define KERN_FMUL(a, b) __fmul_rn((a), (b))
#define KERN_FADD(a, b) __fadd_rn((a), (b))
#else
#define KERN_FMUL(a, b) ((a) * (b))
#define KERN_FADD(a, b) ((a) + (b))
#endif

#define KERN_ABS_MASK   0x7fffffffu /* clears the sign of a float's bits */
#define KERN_MAX_FINITE 0x7f7fffffu /* bits of FLT_MAX */

/* Most terms a plain double sum (one lane of a vector, one GPU thread)
 * adds before it is folded into the compensated sum: the relative error of
 * the whole is then below about KERN_LANE_TERMS ulp (3e-14), whatever the
 * length, since every term is non-negative. */
#define KERN_LANE_TERMS 128

KERN_INLINE uint32_t
kern_f32_bits(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return u;
}

KERN_INLINE float
kern_f32_from_bits(uint32_t u)
{
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

/* Widens a bfloat16 exactly. */
KERN_INLINE float
kern_bf16_to_f32(uint16_t h)
{
	return kern_f32_from_bits((uint32_t)h << 16);
}

/* Widens an IEEE half exactly, subnormals included (as vcvtph2ps and
 * __half2float do; a NaN stays a NaN). */
KERN_INLINE float
kern_f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
	uint32_t exp = (h >> 10) & 0x1fu;
	uint32_t man = h & 0x3ffu;

	if (exp == 0x1fu)
		return kern_f32_from_bits(sign | 0x7f800000u | (man << 13) |
		    (man != 0 ? 0x400000u : 0u));
	if (exp == 0) {
		if (man == 0)
			return kern_f32_from_bits(sign);
		/* Subnormal: normalise the mantissa. */
		exp = 113;
		while ((man & 0x400u) == 0) {
			man <<= 1;
			exp--;
		}
		man &= 0x3ffu;
		return kern_f32_from_bits(sign | (exp << 23) | (man << 13));
	}
	return kern_f32_from_bits(sign | ((exp + 112) << 23) | (man << 13));
}

/* Element i of a gradient of type dtype, widened to float. */
KERN_INLINE float
kern_load(const void *grad, uint64_t i, int dtype)
{
	if (dtype == KERN_F16)
		return kern_f16_to_f32(((const uint16_t *)grad)[i]);
	if (dtype == KERN_BF16)
		return kern_bf16_to_f32(((const uint16_t *)grad)[i]);
	return ((const float *)grad)[i];
}

/* hi + lo += x, exactly up to lo's own rounding (Knuth's two-sum). */
KERN_INLINE void
kern_two_sum(double *hi, double *lo, double x)
{
	double s = *hi + x;
	double bp = s - *hi;
	double err = (*hi - (s - bp)) + (x - bp);

	*hi = s;
	*lo += err;
}

/* The relaxed sums (KERN_PRECISION_RELAXED). Each lane adds at most
 * KERN_RELAXED_TERMS terms in float32, g*g rounded (or fused into the add)
 * and each add rounded, then the lane's partial sum is widened exactly to
 * double and folded into the compensated pair as in the exact path. With
 * u = 2^-24 every term of a lane's sum goes through at most 16 roundings,
 * so for non-negative terms the lane's relative error is at most
 * gamma_16 = 16u / (1 - 16u) = 9.537e-7 (abs sums: gamma_15, the |g| are
 * exact); the double folds add about 1e-16 whatever the length, and a
 * bound on non-negative terms holding for every part holds for the whole:
 * below KERN_RELAXED_BOUND (1e-6). 17 terms would give 1.013e-6, hence
 * 16. The bound needs the float sums to neither overflow nor underflow: a
 * block whose largest finite magnitude is not 0 and outside [2^-40, 2^60)
 * (squares below 2^-80 may be subnormal, above 2^120 a sum of 16 could
 * overflow), or that holds a NaN or infinity, has its sums recomputed the
 * exact way. Under 2^-40 a square's absolute underflow error (2^-150 at
 * most per rounding) is then at most 2^-57 of the block's sum. */
#define KERN_RELAXED_TERMS    16
#define KERN_RELAXED_MIN_BITS 0x2b800000u /* 2^-40 */
#define KERN_RELAXED_MAX_BITS 0x5d800000u /* 2^60, excluded */

/* Non-zero if a block whose largest magnitude has bits max_bits may keep
 * its float32 sums. */
KERN_INLINE int
kern_relaxed_ok(uint32_t max_bits)
{
	return max_bits == 0 ||
	    (max_bits >= KERN_RELAXED_MIN_BITS &&
		max_bits < KERN_RELAXED_MAX_BITS);
}

/* Running sums of one lane, between two folds into kern_stats. */
typedef struct kern_lane {
	double sum_sq;      /* plain sum of g^2 */
	double abs_sum;     /* plain sum of |g| */
	uint64_t zeros;     /* finite zeros */
	uint64_t nonfinite; /* NaN or infinite */
	uint32_t max_bits;  /* bits of the largest finite |g| */
} kern_lane;

/* Folds g into *l; returns non-zero if g is finite (and so must update
 * the accumulator and the momentum). */
KERN_INLINE int
kern_lane_add(kern_lane *l, float g)
{
	uint32_t bits = kern_f32_bits(g) & KERN_ABS_MASK;
	double d;

	if (bits > KERN_MAX_FINITE) {
		l->nonfinite++;
		return 0;
	}
	l->zeros += bits == 0;
	if (bits > l->max_bits)
		l->max_bits = bits;
	/* Exact: a float's square has at most 48 significant bits and
	 * neither overflows nor underflows a double. */
	d = (double)kern_f32_from_bits(bits);
	l->sum_sq += d * d;
	l->abs_sum += d;
	return 1;
}

/* The momentum update of one finite element. */
KERN_INLINE float
kern_momentum(float m, float g, float beta, float one_minus_beta)
{
	return KERN_FADD(KERN_FMUL(beta, m), KERN_FMUL(one_minus_beta, g));
}

#endif /* KERN_ELEMENT_H */
