/* kern_gcomp - the GComp codec: near-lossless float compression by
 * Huffman-coded exponents and per-value mantissa truncation (Li et al., SoCC
 * '24).
 *
 * Per value, three bit segments (most significant bit first):
 *   exponents  the value's exponent symbol (float32's biased exponent;
 *              bfloat16 and float16 map into that range) as its code in the
 *              table (common/huffman.h), or the escape then 8 raw bits;
 *   levels     2 bits, the truncation level L, only for a non-zero symbol;
 *   mantissas  the sign then the mantissa without its T[L] low bits, only
 *              for a non-zero symbol.
 * Symbol 0 (zero and float32/bfloat16 subnormals) sends its code alone and
 * decodes to +0. Symbol 255 (Inf, NaN) is always level 0.
 *
 *   dtype     mantissa bits  T[0..3]        symbols
 *   float32   23             0, 6, 12, 18   0..255, the biased exponent
 *   bfloat16  7              0, 2, 4, 6     0..255, the same exponent byte
 *   float16   10             0, 3, 6, 9     0, 103..142 (112 + exponent,
 *                                           subnormals normalised), 255
 * Level 0 is lossless for every float32 and bfloat16 but subnormals (and
 * the sign of -0), and for every float16 (its subnormals are normal
 * float32 exponents here).
 *
 * Block (little-endian), what one encode writes:
 *   bytes 0-3    'B' 'G' 'C' 'B'    magic
 *   byte  4      KERN_GCOMP_FORMAT  format version (1)
 *   byte  5      dtype              KERN_F32, KERN_F16 or KERN_BF16
 *   bytes 6-7    0                  reserved
 *   bytes 8-11   table version      uint32, the table's that encoded it
 *   bytes 12-15  chunks             uint32
 *   bytes 16-23  n                  values, uint64
 *   bytes 24-31  block bytes        uint64, headers included
 *   then chunks x 24-byte chunk headers:
 *   bytes 0-7    offset             uint64, of the chunk's data in the block
 *   bytes 8-11   values             uint32, 1..KERN_GCOMP_CHUNK_MAX
 *   bytes 12-15  exponent bits      uint32
 *   bytes 16-19  level bits         uint32 (2 per non-zero symbol)
 *   bytes 20-23  mantissa bits      uint32
 *   then each chunk's data: its three segments, each padded with zero bits
 *   to whole bytes, back to back; chunks back to back in header order.
 * Chunks (KERN_GCOMP_CHUNK values each, the last shorter) are independent
 * bitstreams, so decoding can be split across threads, and a truncated or
 * corrupted block is caught at its chunk.
 *
 * Format 2, the planes layout, is what level 0 without per-value levels
 * writes for float32 and bfloat16 (format 1 stays for levels and float16;
 * the decoder reads both). The block header is format 1's with byte 4 =
 * 2; chunks hold 1..KERN_GCOMP_CHUNK values, with 40-byte headers:
 *   bytes 0-7    offset             uint64, of the chunk's data
 *   bytes 8-11   values m           uint32
 *   byte  12     mode               0 planes, 1 raw; bytes 13-15 zero
 *   bytes 16-19  listed values      uint32 (0 when raw)
 *   bytes 20-35  stream bits        4 x uint32 (0 when raw)
 *   bytes 36-39  mantissa bytes     uint32 (0 when raw)
 * Planes data: the 4 exponent streams (stream k codes values k*q ..
 * (k+1)*q - 1, q = ceil(m / 4), each padded to whole bytes), then the
 * listed values (8 bytes each: uint32 index in the chunk, uint32 raw bits,
 * ascending: the symbol-0 values that are not +0, i.e. subnormals and -0),
 * then per non-zero symbol, in value order, the sign and mantissa as
 * whole bytes: float32 3 bytes little-endian of sign << 23 | mantissa,
 * bfloat16 1 byte sign << 7 | mantissa. Raw data: the m values as they
 * are. So level 0 in format 2 gives back every value bit for bit.
 */
#ifndef KERN_CPU_GCOMP_H
#define KERN_CPU_GCOMP_H

#include <stddef.h>
#include <stdint.h>

#include "common/huffman.h"

#define KERN_GCOMP_FORMAT        1    /* the levels layout */
#define KERN_GCOMP_FORMAT_PLANES 2    /* the planes layout (level 0) */
#define KERN_GCOMP_HEADER        32   /* block header bytes */
#define KERN_GCOMP_CHUNK_HEADER  24   /* chunk header bytes, format 1 */
#define KERN_GCOMP_CHUNK_HEADER2 40   /* chunk header bytes, format 2 */
#define KERN_GCOMP_STREAMS       4    /* exponent streams a chunk, format 2 */
#define KERN_GCOMP_MODE_PLANES   0    /* format 2 chunk: planes */
#define KERN_GCOMP_MODE_RAW      1    /* format 2 chunk: the values raw */
#define KERN_GCOMP_CHUNK         8192 /* values per chunk (encoder) */
#define KERN_GCOMP_CHUNK_MAX     (1u << 24) /* most values a chunk may hold */
#define KERN_GCOMP_ESC           256        /* LUT symbol of the escape */
#define KERN_GCOMP_BAD           511        /* LUT symbol of an unused code */
#define KERN_GCOMP_LUT2_BITS     11 /* longest max_bits with a pair LUT */
#define KERN_GCOMP_PLUT_BITS     11 /* bits a format 2 lookup reads */

/* The codec's two paths, the same blocks byte for byte (see kern_gcomp.c). */
enum kern_gcomp_path {
	KERN_GCOMP_PATH_FAST = 0, /* one pass, branch-free bit I/O (default) */
	KERN_GCOMP_PATH_REF = 1,  /* two passes, checked bit I/O (reference) */
};

/* A table ready to code with: the canonical code and the decoder's LUT. */
typedef struct kern_gcomp_table {
	com_huff_table h;       /* lengths and canonical codes */
	uint32_t enc_code[256]; /* code (escaped: escape << 8 | symbol) */
	uint8_t enc_len[256];   /* its bits (escaped: esc_len + 8) */
	uint16_t lut[1u << COM_HUFF_MAX_BITS]; /* symbol << 4 | length */
	/* Two codes per lookup, for max_bits <= KERN_GCOMP_LUT2_BITS: count
	 * << 23 | second symbol << 14 | first symbol << 5 | bits of both
	 * (count 2 when both are exponents and fit in max_bits, else 1 with
	 * the first's LUT symbol and length). */
	uint32_t lut2[1u << KERN_GCOMP_LUT2_BITS];
	/* Up to four codes per lookup of the next KERN_GCOMP_PLUT_BITS bits,
	 * for format 2's decoder (kern_gcomp_planes.h), for max_bits <=
	 * KERN_GCOMP_LUT2_BITS. */
	uint64_t plut[1u << KERN_GCOMP_PLUT_BITS];
} kern_gcomp_table;

/* Counts of one encode (all optional reading for stats and benchmarks). */
typedef struct kern_gcomp_stats {
	uint64_t values;     /* values encoded */
	uint64_t zeros;      /* symbol 0: zero or flushed subnormal */
	uint64_t escaped;    /* exponents sent raw after the escape */
	uint64_t levels[4];  /* non-zero values per level */
	uint64_t exp_bits;   /* bits of the exponent segments */
	uint64_t level_bits; /* bits of the level segments */
	uint64_t mant_bits;  /* bits of the mantissa segments (sign incl.) */
	uint64_t bytes;      /* the block, headers and padding included */
} kern_gcomp_stats;

/* Optimizers whose quantisation metric delta is known (Table 2 of the
 * paper). */
enum kern_gcomp_optim {
	KERN_GCOMP_SGD = 1,      /* SGD with weight decay */
	KERN_GCOMP_MOMENTUM = 2, /* SGD with momentum and dampening */
	KERN_GCOMP_NESTEROV = 3, /* SGD with Nesterov momentum */
	KERN_GCOMP_ADAM = 4,     /* Adam, weight decay added to g */
	KERN_GCOMP_ADAMW = 5,    /* AdamW, decoupled weight decay */
};

/* One layer's optimizer: hyper-parameters and the state before the step. */
typedef struct kern_gcomp_opt {
	int kind;             /* kern_gcomp_optim */
	double lr;            /* eta */
	double weight_decay;  /* lambda */
	double momentum;      /* mu */
	double dampening;     /* tau */
	double beta1;         /* Adam's beta1 */
	double beta2;         /* Adam's beta2 */
	double eps;           /* Adam's epsilon */
	double grad_scale;    /* g applied = grad * grad_scale (0 means 1) */
	uint64_t step;        /* t: 1 for the optimizer's first step */
	const float *param;   /* theta_{t-1}, n floats */
	const float *buf;     /* momentum b_{t-1}; NULL: none yet (SGD delta) */
	const float *exp_avg; /* Adam m_{t-1} (NULL: zeros) */
	const float *exp_avg_sq; /* Adam v_{t-1} (NULL: zeros) */
} kern_gcomp_opt;

/* Returns the paper's delta of one value g (the gradient as applied,
 * grad * grad_scale) at index i: see kern_gcomp_levels.h. */
double kern_gcomp_delta(const kern_gcomp_opt *o, uint64_t i, double g);

/* Writes each value's level: the largest L <= max_level with
 * |delta| > 2^T[L] of dtype's truncations, 0 where delta is not finite or
 * the value is 0 or not finite. grad has n values of dtype. Returns 0, or
 * BELLOWS_EINVAL for an unknown kind or dtype, max_level outside 0..3,
 * or a missing param. */
int kern_gcomp_levels(const kern_gcomp_opt *o, int dtype, const void *grad,
    uint64_t n, int max_level, uint8_t *levels);

/* kern_gcomp_levels on the instruction set isa (KERN_ISA_AUTO: the best;
 * AVX2 and AVX-512 both run the AVX2 build): the same levels on every
 * ISA. BELLOWS_ENOTSUP when this processor cannot run isa. */
int kern_gcomp_levels_isa(int isa, const kern_gcomp_opt *o, int dtype,
    const void *grad, uint64_t n, int max_level, uint8_t *levels);

#ifdef KERN_HAVE_X86
/* The AVX2 build of the levels loop (kern_gcomp_avx2.c), arguments checked and
 * lim, scale and the bias corrections computed by the caller. */
void kern_gcomp_levels_avx2(const kern_gcomp_opt *o, int dtype,
    const void *grad, uint64_t n, int max_level, const double *lim,
    double scale, double c1, double c2, uint8_t *levels);

/* The fast path's value pass of a format 2 float32 chunk in AVX2 (see
 * kern_gcomp.c, planes_values): writes (or, with add, adds to) out[i] from
 * syms[i] and the packed signs and mantissas from mp, 8 values at a time
 * while 8 values and 32 bytes before mend are left. Returns the values
 * written; *ret_mp gets where the next value's bytes start. */
uint64_t kern_gcomp_planes_f32_avx2(const uint8_t *syms, uint64_t m,
    const uint8_t *mp, const uint8_t *mend, float *out, int add,
    const uint8_t **ret_mp);
#endif

/* Fills t's encoder codes and LUT from t->h (a checked table). */
void kern_gcomp_prepare(kern_gcomp_table *t);

/* Returns the most bytes a block of n values of dtype can take with any
 * table, or 0 for an unknown dtype or n above 2^48. */
uint64_t kern_gcomp_bound(int dtype, uint64_t n);

/* Encodes n values of dtype at x into out (cap bytes). Each value's level
 * is levels[i] (NULL: `level` for all), 0..3, forced to 0 for symbol 255;
 * level 0 with levels NULL on float32 or bfloat16 writes format 2, all
 * else format 1. *ret_bytes gets the block's size; *stats (may be NULL)
 * is filled. Returns 0; BELLOWS_EINVAL for a bad dtype, level or
 * levels[i] above 3; BELLOWS_EMSGSIZE when cap is too small (out's
 * contents then unspecified). Allocates nothing; the format 1 fast path
 * takes about 50 KB of stack (a chunk's segments), format 2 about 56 KB,
 * the decoder about 9 KB. */
int kern_gcomp_encode(const kern_gcomp_table *t, int dtype, const void *x,
    uint64_t n, int level, const uint8_t *levels, uint8_t *out, size_t cap,
    size_t *ret_bytes, kern_gcomp_stats *stats);

/* kern_gcomp_encode on path (kern_gcomp_path): the same block and stats
 * on either. BELLOWS_EINVAL also for an unknown path. */
int kern_gcomp_encode_path(int path, const kern_gcomp_table *t, int dtype,
    const void *x, uint64_t n, int level, const uint8_t *levels, uint8_t *out,
    size_t cap, size_t *ret_bytes, kern_gcomp_stats *stats);

/* Reads a block's header: n, dtype, table version, block bytes. Returns 0,
 * or BELLOWS_EPROTO / BELLOWS_EVERSION with errbuf saying what at which
 * byte. */
int kern_gcomp_info(const uint8_t *in, size_t bytes, uint64_t *ret_n,
    int *ret_dtype, uint32_t *ret_version, uint64_t *ret_block_bytes,
    char *errbuf, size_t errlen);

/* Decodes a block (the first block bytes of in) of n values of dtype into
 * out (out[i] = value, or out[i] += value with add, float32 only).
 * Returns 0; BELLOWS_EPROTO for anything malformed (wrong magic,
 * truncated block or chunk, chunk headers that do not tile the block, an
 * unused code, a float16 exponent out of its range, segment lengths that
 * disagree with what decoding used), BELLOWS_EVERSION for another format,
 * BELLOWS_EMISMATCH for another n, dtype or table version; errbuf says
 * which and at which byte offset. On failure, out may be partly written.
 * Never reads outside in[0..bytes). */
int kern_gcomp_decode(const kern_gcomp_table *t, const uint8_t *in,
    size_t bytes, int dtype, void *out, uint64_t n, int add, char *errbuf,
    size_t errlen);

/* kern_gcomp_decode on path (kern_gcomp_path): the same values, return
 * codes and messages on either. BELLOWS_EINVAL also for an unknown path. */
int kern_gcomp_decode_path(int path, const kern_gcomp_table *t,
    const uint8_t *in, size_t bytes, int dtype, void *out, uint64_t n, int add,
    char *errbuf, size_t errlen);

#endif /* KERN_CPU_GCOMP_H */
