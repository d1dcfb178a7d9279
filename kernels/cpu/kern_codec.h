/* kern_codec - the 1-bit and 2-bit gradient quantisers with error feedback.
 *
 * The kernels behind bellows/codec.h, one set per instruction set: portable
 * C (kern_codec.c, the reference), AVX2 (kern_codec_avx2.c) and AVX-512
 * (kern_codec_avx512.c), the vector ones compiled with their own -m flags and
 * only called when kern_cpu_isa_supported() says the processor has them.
 * Every ISA gives the same bytes and the same residual bit for bit.
 *
 * Semantics (those of MXNet's 1bit and 2bit and of bellows.compress, whose
 * torch code they must match bit for bit), per value i with t the
 * threshold as a float:
 *
 *   r = res[i] + g[i]                      (float addition)
 *   2-bit: r >= t:  code 3, res = (r - t) + 0      decodes to +t
 *          r <= -t: code 2, res = (r - 0) + t      decodes to -t
 *          else:    code 0, res = (r - 0) + 0      decodes to +0
 *   1-bit: r > t:   bit 1,  res = r + -1           decodes to +1
 *          else:    bit 0,  res = r + 1            decodes to -1
 *
 * The "+ 0" and "- 0" are kept because the torch code does them (they turn
 * a -0 residual into +0). NaN compares false: code 0 (2-bit) or bit 0
 * (1-bit), and the residual stays NaN (sign and payload
 * unspecified: they follow the operand order the compiler picks); infinities
 * quantise by their sign and stay in the residual. Code 1 of 2-bit is never
 * produced; a decoder reads it as 0.
 *
 * Packing: value i's code goes into byte i * bits / 8 at bit
 * (i * bits) % 8 (LSB first), and the bytes are padded with zero codes to
 * a whole number of 32-bit words: kern_codec_bytes().
 */
#ifndef KERN_CPU_CODEC_H
#define KERN_CPU_CODEC_H

#include <stdint.h>

/* Encodes n values: res[i] += g[i], quantise, leave the error in res[i];
 * writes kern_codec_bytes(bits, n) bytes to out (padding included). g and
 * res have n floats and do not overlap each other or out. t is > 0 for
 * 2-bit, >= 0 for 1-bit (checked by the caller). */
typedef void kern_codec_enc_fn(const float *g, float *res, uint64_t n, float t,
    uint8_t *out);

/* Decodes n values from in (kern_codec_bytes(bits, n) bytes) into out, or
 * adds them to out when add is non-zero (out[i] = out[i] + v). */
typedef void kern_codec_dec_fn(const uint8_t *in, uint64_t n, float t,
    float *out, int add);

/* One instruction set's kernels. */
typedef struct kern_codec_fns {
	kern_codec_enc_fn *enc1; /* 1-bit encode with error feedback */
	kern_codec_dec_fn *dec1; /* 1-bit decode */
	kern_codec_enc_fn *enc2; /* 2-bit encode with error feedback */
	kern_codec_dec_fn *dec2; /* 2-bit decode */
} kern_codec_fns;

/* Returns the bytes the packed codes of n values of `bits` (1 or 2) bits
 * take: ceil(n * bits / 32) * 4. */
uint64_t kern_codec_bytes(int bits, uint64_t n);

/* Returns the kernels of `isa` (a kern_isa; KERN_ISA_AUTO: the best this
 * processor runs), or NULL if this build or processor cannot run it. */
const kern_codec_fns *kern_codec_get(int isa);

/* The scalar kernels, exported for the vector paths' tails. They take and
 * produce whole bytes: the vector paths call them on a multiple of 8
 * values' offset (1-bit) or 4 values' (2-bit). enc does not pad. */
void kern_codec_enc1_scalar(const float *g, float *res, uint64_t n, float t,
    uint8_t *out);
void kern_codec_enc2_scalar(const float *g, float *res, uint64_t n, float t,
    uint8_t *out);
void kern_codec_dec1_scalar(const uint8_t *in, uint64_t n, float t, float *out,
    int add);
void kern_codec_dec2_scalar(const uint8_t *in, uint64_t n, float t, float *out,
    int add);

/* Zeroes the padding after the packed codes of n values (from byte
 * ceil(n * bits / 8) to kern_codec_bytes(bits, n)). */
void kern_codec_pad(int bits, uint64_t n, uint8_t *out);

/* Bit b of x at bit 2b, for x < 256 (the vector paths' 2-bit packing). */
extern const uint16_t kern_codec_spread8[256];

#ifdef KERN_HAVE_X86
extern const kern_codec_fns kern_codec_avx2;
extern const kern_codec_fns kern_codec_avx512;
#endif

#endif /* KERN_CPU_CODEC_H */
