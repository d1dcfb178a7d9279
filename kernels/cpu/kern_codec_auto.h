/* kern_codec_auto - the 2-bit quantiser at a scale chosen from the tensor
 * itself: bellows.compress's TwoBit(threshold="auto") in C.
 *
 * With r = res[i] + widen(g[i]) (float addition, as kern_codec.h):
 *
 *   t = mean |r| over the n values, rounded to float, then clamped to
 *       [FLT_MIN, FLT_MAX] (the smallest normal, the largest finite; a
 *       NaN mean gives FLT_MAX);
 *   v = mean |r| over the values with |r| >= t, rounded to float; t when
 *       there are none;
 *   codes and residual: the 2-bit encode at t (kern_codec_par_encode);
 *   then, with d = (float)((double)v - (double)t) and d != 0, the
 *   residual of a value coded 3 becomes res - d, of one coded 2
 *   res - (-d), and, if d is infinite (v is), every other residual
 *   becomes NaN.
 *
 * That last step is bellows.compress's err -= sign(r) * sel * (v - t) bit
 * for bit, the 0 * inf of the values not sent included: the float32
 * arithmetic is the torch code's, once t and v are given.
 *
 * t and v themselves are the one place where the two paths differ. Both
 * sums are taken in double on the calling thread, in a fixed order (eight
 * accumulators by index modulo 8, combined pairwise), so t and v depend
 * neither on the ISA, nor on the codec threads, nor on the dtype's width
 * (a float16 gradient gives what its float32 widening gives). Up to 2^31
 * values a double sum of non-negative terms is within 2^-25 (relative) of
 * the exact one, at most half a float step: t and v are the exact means
 * rounded to a neighbouring float (within 1 ulp). torch's mean sums in
 * float32 in an order that depends on its vector width and thread count:
 * its t and v are a few ulp from the exact ones and from these, and a
 * value whose |r| lies between the two t's gets a different code. Where
 * torch's float32 sum would overflow (values near FLT_MAX), the double sum
 * does not: t and v stay finite unless a |r| is infinite. This C result
 * is the definition; the torch code is the fallback where the library
 * lacks it.
 */
#ifndef KERN_CPU_CODEC_AUTO_H
#define KERN_CPU_CODEC_AUTO_H

#include <stdint.h>

#include "kern_codec.h"
#include "kern_codec_par.h"

/* Encodes n values of g (a kern_dtype) as above with f's 2-bit kernel on
 * par's threads (NULL: the calling thread): res[i] += widen(g[i]),
 * kern_codec_bytes(2, n) bytes of codes to out, the residual corrected;
 * *ret_t and *ret_v get t and v (FLT_MAX both for n = 0). g, res and out
 * do not overlap; arguments checked by the caller. Allocates nothing. */
void kern_codec_auto_encode(kern_codec_par *par, const kern_codec_fns *f,
    int dtype, const void *g, float *res, uint64_t n, uint8_t *out,
    float *ret_t, float *ret_v);

#endif /* KERN_CPU_CODEC_AUTO_H */
