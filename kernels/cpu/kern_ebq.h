/* kern_ebq - the kernels of COMET's error-bounded quantiser with the zero
 * filter (bellows/codec.h, "Error-bounded quantiser").
 *
 * One set per instruction set: portable C (kern_ebq.c, the reference), AVX2
 * (kern_ebq_avx2.c) and AVX-512 (kern_ebq_avx512.c), the vector ones compiled
 * with their own -m flags and only called when kern_cpu_isa_supported() says
 * the processor has them. Every ISA gives the same codes and the same floats
 * bit for bit: the arithmetic is IEEE binary64 division, round to nearest even,
 * one product and one rounding to binary32, with no contraction.
 *
 * Per value x (binary32), with step and eb binary64 and ebf = (float)eb:
 *
 *   q   = nearbyint((double)x / step)        round half to even
 *   rec = (float)((double)q * step)          round to nearest even
 *   rec = 0 where |rec| <= ebf               COMET's zero filter
 *
 * and the encoder checks |(double)x - (double)rec| <= eb for every value.
 * The bit packing of the codes (scalar, shared by every ISA) is here too.
 */
#ifndef KERN_CPU_EBQ_H
#define KERN_CPU_EBQ_H

#include <stdint.h>

/* Returns the largest (bits of x[i] & 0x7fffffff) over n values: the
 * magnitude's bit pattern, which orders non-negative floats; a result
 * >= 0x7f800000 means a NaN or an infinity is among them. 0 for n = 0. */
typedef uint32_t kern_ebq_amax_fn(const float *x, uint64_t n);

/* Returns how many of n values have (bits & 0x7fffffff) > h. */
typedef uint64_t kern_ebq_count_fn(const float *x, uint64_t n, uint32_t h);

/* Quantises n finite values as the header says, with |q| <= qmax known to
 * fit (checked by the caller). mask NULL: the n codes go to q. Otherwise
 * (sparse) bit i of mask (byte i / 8, LSB first; n is a multiple of 8 but
 * in the last call) is set where code i is non-zero, and only those codes
 * go to q, in order. q has room for n + KERN_EBQ_SLACK codes (the vector
 * paths store whole vectors). *ret_codes gets the codes written. Returns
 * how many reconstructions are non-zero after the filter, or UINT64_MAX
 * when a reconstruction misses the bound (q and mask are then partly
 * written). */
typedef uint64_t kern_ebq_quant_fn(const float *x, uint64_t n, double step,
    double eb, int32_t *q, uint8_t *mask, uint64_t *ret_codes);

/* Reconstructs n values: out[i] = filtered (float)((double)c * step), c
 * = q[i] (mask NULL) or, sparse, the next code of q where bit i of mask is
 * set and 0 elsewhere (n a multiple of 8 but in the last call). q is
 * readable for KERN_EBQ_SLACK codes beyond its codes. */
typedef void kern_ebq_dequant_fn(const int32_t *q, uint64_t n, double step,
    float ebf, float *out, const uint8_t *mask);

/* Codes of room a q buffer needs beyond its n. */
#define KERN_EBQ_SLACK 16

/* One instruction set's kernels. */
typedef struct kern_ebq_fns {
	kern_ebq_amax_fn *amax;       /* largest magnitude's bits */
	kern_ebq_count_fn *count;     /* magnitudes above a pattern */
	kern_ebq_quant_fn *quant;     /* values to codes, bound checked */
	kern_ebq_dequant_fn *dequant; /* codes to filtered values */
} kern_ebq_fns;

/* Returns the kernels of `isa` (a kern_isa; KERN_ISA_AUTO: the best this
 * processor runs), or NULL if this build or processor cannot run it. */
const kern_ebq_fns *kern_ebq_get(int isa);

/* The scalar kernels, for the vector paths' tails. */
uint32_t kern_ebq_amax_scalar(const float *x, uint64_t n);
uint64_t kern_ebq_count_scalar(const float *x, uint64_t n, uint32_t h);
uint64_t kern_ebq_quant_scalar(const float *x, uint64_t n, double step,
    double eb, int32_t *q, uint8_t *mask, uint64_t *ret_codes);
void kern_ebq_dequant_scalar(const int32_t *q, uint64_t n, double step,
    float ebf, float *out, const uint8_t *mask);

/* Bit packing: code i of `bits` (1..32) bits, two's complement, goes to
 * bit offset i * bits of the stream, least significant bit first. A
 * packer holds the bits not yet written. */
typedef struct kern_ebq_packer {
	uint8_t *out;  /* next byte to write */
	uint8_t *end;  /* end of the stream's buffer (never written) */
	uint64_t acc;  /* pending bits, the oldest lowest */
	unsigned used; /* pending bits in acc, < 32 between calls */
	unsigned bits; /* bits per code */
} kern_ebq_packer;

/* Appends the low `bits` bits of q[0..n). */
void kern_ebq_pack(kern_ebq_packer *p, const int32_t *q, uint64_t n);

/* Writes the pending bits (the last byte padded with zero bits). */
void kern_ebq_pack_flush(kern_ebq_packer *p);

/* Reads n codes of `bits` bits, sign-extended, into q, from the stream
 * [in, end) starting at code index `first`; reads no byte at or past end
 * (the caller checked the codes are within it). */
void kern_ebq_unpack(const uint8_t *in, const uint8_t *end, unsigned bits,
    uint64_t first, uint64_t n, int32_t *q);

#ifdef KERN_HAVE_X86
/* AVX2's dequantiser, also the AVX-512 table's (faster there). */
void kern_ebq_dequant_avx2(const int32_t *q, uint64_t n, double step, float ebf,
    float *out, const uint8_t *mask);
extern const kern_ebq_fns kern_ebq_avx2;
extern const kern_ebq_fns kern_ebq_avx512;
#endif

#endif /* KERN_CPU_EBQ_H */
