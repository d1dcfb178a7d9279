/* kern_gcomp_levels - the delta-level loop of the GComp codec, inlined into the
 * portable C (kern_gcomp.c) and the AVX2 build (kern_gcomp_avx2.c), which the
 * compiler vectorises: IEEE division, square root and comparisons in the
 * same order, no contraction (-ffp-contract=off), so both give the same
 * levels bit for bit.
 *
 * Table 2 of the paper, with g the applied gradient, theta = theta_{t-1}:
 *   SGD       theta / (eta g) - lambda theta / g
 *   Momentum  (theta - eta mu b) / (eta (1 - tau) g) - lambda theta / g
 *             (no buffer yet, PyTorch's first step: the SGD delta)
 *   Nesterov  ((1 - eta lambda (1 + mu)) theta - eta mu^2 b)
 *             / (eta (1 + mu) g)
 *   Adam      (theta (sqrt(vh) + eps) (1 - beta1^t) - eta beta1 m)
 *             / (eta (1 - beta1) g) - lambda theta / g
 *   AdamW     (theta (sqrt(vh) + eps) (1 - beta1^t) (1 - eta lambda)
 *              - eta beta1 m) / (eta (1 - beta1) g)
 * where m = m_{t-1} and vh = v_t / (1 - beta2^t) with v_t = beta2 v_{t-1}
 * + (1 - beta2) g'^2, g' = g + lambda theta for Adam, g for AdamW: the
 * second moment this very gradient makes (the paper's v-hat_t), from the
 * local gradient rather than the reduced one. c1 and c2 are 1 - beta1^t
 * and 1 - beta2^t, computed once per call. Evaluated in double.
 */
#ifndef KERN_CPU_GCOMP_LEVELS_H
#define KERN_CPU_GCOMP_LEVELS_H

#include <math.h>
#include <stdint.h>

#include "../element.h"
#include "kern_gcomp.h"

#define GCOMP_INLINE static inline __attribute__((always_inline))

/* delta of value i, for a kind and buffer presence known at compile time
 * where inlined. */
GCOMP_INLINE double
gcomp_delta_k(const kern_gcomp_opt *o, int kind, int has_buf, uint64_t i,
    double g, double c1, double c2)
{
	double th = o->param[i], eta = o->lr, lam = o->weight_decay;
	double mu = o->momentum;

	if (kind == KERN_GCOMP_MOMENTUM && has_buf)
		return (th - eta * mu * (double)o->buf[i]) /
		    (eta * (1.0 - o->dampening) * g) -
		    lam * th / g;
	if (kind == KERN_GCOMP_NESTEROV)
		return ((1.0 - eta * lam * (1.0 + mu)) * th -
			   eta * mu * mu *
			       (has_buf ? (double)o->buf[i] : 0.0)) /
		    (eta * (1.0 + mu) * g);
	if (kind == KERN_GCOMP_ADAM || kind == KERN_GCOMP_ADAMW) {
		double b1 = o->beta1, b2 = o->beta2;
		double m = o->exp_avg != NULL ? o->exp_avg[i] : 0.0;
		double v = o->exp_avg_sq != NULL ? o->exp_avg_sq[i] : 0.0;
		double gp = kind == KERN_GCOMP_ADAM ? g + lam * th : g;
		double vt = b2 * v + (1.0 - b2) * gp * gp;
		double vh = vt / c2;
		double num = th * (sqrt(vh) + o->eps) * c1;

		if (kind == KERN_GCOMP_ADAMW)
			return (num * (1.0 - eta * lam) - eta * b1 * m) /
			    (eta * (1.0 - b1) * g);
		return (num - eta * b1 * m) / (eta * (1.0 - b1) * g) -
		    lam * th / g;
	}
	return th / (eta * g) - lam * th / g;
}

/* The level of every value: the number of thresholds lim[1..3] |delta|
 * exceeds (they grow), at most max_level; 0 where g is 0 or not finite or
 * delta is not finite. No branch on the data. */
GCOMP_INLINE void
gcomp_levels_loop(const kern_gcomp_opt *o, int kind, int has_buf, int dtype,
    const void *grad, uint64_t n, int max_level, const double *lim,
    double scale, double c1, double c2, uint8_t *levels)
{
	double l1 = lim[1], l2 = lim[2], l3 = lim[3];

	for (uint64_t i = 0; i < n; i++) {
		double g = (double)kern_load(grad, i, dtype) * scale;
		double d = fabs(gcomp_delta_k(o, kind, has_buf, i, g, c1, c2));
		int ok = g != 0.0 && fabs(g) <= 1.7976931348623157e308 &&
		    d <= 1.7976931348623157e308;
		int l = (d > l1) + (d > l2) + (d > l3);

		l = l < max_level ? l : max_level;
		levels[i] = (uint8_t)(ok ? l : 0);
	}
}

/* gcomp_levels_loop with the kind, the buffer's presence and float32
 * known at compile time in each branch. */
GCOMP_INLINE void
gcomp_levels_dispatch(const kern_gcomp_opt *o, int dtype, const void *grad,
    uint64_t n, int max_level, const double *lim, double scale, double c1,
    double c2, uint8_t *levels)
{
	int buf = o->buf != NULL;

#define GCOMP_LEVELS_CASE(k, b)                                                \
	if (dtype == KERN_F32)                                                 \
		gcomp_levels_loop(o, k, b, KERN_F32, grad, n, max_level, lim,  \
		    scale, c1, c2, levels);                                    \
	else                                                                   \
		gcomp_levels_loop(o, k, b, dtype, grad, n, max_level, lim,     \
		    scale, c1, c2, levels)

	switch (o->kind) {
	case KERN_GCOMP_MOMENTUM:
		if (buf) {
			GCOMP_LEVELS_CASE(KERN_GCOMP_MOMENTUM, 1);
		} else {
			GCOMP_LEVELS_CASE(KERN_GCOMP_SGD, 0);
		}
		break;
	case KERN_GCOMP_NESTEROV:
		if (buf) {
			GCOMP_LEVELS_CASE(KERN_GCOMP_NESTEROV, 1);
		} else {
			GCOMP_LEVELS_CASE(KERN_GCOMP_NESTEROV, 0);
		}
		break;
	case KERN_GCOMP_ADAM:
		GCOMP_LEVELS_CASE(KERN_GCOMP_ADAM, 0);
		break;
	case KERN_GCOMP_ADAMW:
		GCOMP_LEVELS_CASE(KERN_GCOMP_ADAMW, 0);
		break;
	default:
		GCOMP_LEVELS_CASE(KERN_GCOMP_SGD, 0);
		break;
	}
#undef GCOMP_LEVELS_CASE
}

#endif /* KERN_CPU_GCOMP_LEVELS_H */
