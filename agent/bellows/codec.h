/* codec - the gradient codecs of libbellows: 1-bit and 2-bit quantisation
 * and top-k selection, with error feedback.
 *
 * The quantisers are MXNet's "1bit" and "2bit", bit for bit those of
 * bellows.compress (OneBit, TwoBit): with t the threshold and r a value's
 * error-feedback residual plus its gradient,
 *
 *   2-bit: r >= t: code 3 (+t);  r <= -t: code 2 (-t);  else code 0 (0)
 *   1-bit: r > t:  bit 1 (+1);   else bit 0 (-1)
 *
 * and the residual becomes r minus what the code decodes to. The vector
 * paths (AVX2, AVX-512, chosen at run time) give the same bytes and the same
 * residual as the portable C bit for bit.
 *
 * Non-finite values: NaN compares false, so it becomes code 0 (2-bit,
 * decodes to 0) or bit 0 (1-bit, decodes to -1), and the residual stays
 * NaN (of unspecified sign and payload); +-Inf quantises by its sign and the
 * residual stays infinite. A residual that is not finite therefore stays so
 * until the caller resets it (bellows_codec_reset, or zeroes its own buffer):
 * the codec neither hides nor spreads it beyond that value.
 *
 * Codes ("packed codes", what bellows.compress all-gathers): value i's code
 * is in byte i * bits / 8 at bit (i * bits) % 8, least significant bit
 * first; the bytes are padded with zero codes to a whole number of 32-bit
 * words: bellows_codec_codes_bytes() = ceil(n * bits / 32) * 4. Code 1 of
 * 2-bit is never produced and decodes to 0.
 *
 * Messages (self-describing): a 16-byte header, then the packed codes.
 *
 *   bytes 0-1   'B' 'Q'             magic
 *   byte  2     1                   BELLOWS_CODEC_VERSION
 *   byte  3     kind                BELLOWS_CODEC_1BIT or _2BIT (= bits)
 *   bytes 4-7   threshold           IEEE binary32, little-endian
 *   bytes 8-15  n                   values, uint64 little-endian
 *   bytes 16-   packed codes        bellows_codec_codes_bytes(kind, n)
 *
 * Top-k (BELLOWS_CODEC_TOPK): with r = residual + grad, the k values of
 * largest |r| are sent, the others stay in the residual and the sent ones
 * leave it (residual = +0, r minus what decodes, exactly). Order: by
 * magnitude, NaN above +-Inf and all NaNs equal, -0 equal to +0; ties at
 * the k-th magnitude go to the lower index. Indices are sent ascending,
 * as uint32 (so n <= UINT32_MAX), then the values as float32. Message:
 *
 *   bytes 0-1   'B' 'Q'             magic
 *   byte  2     1                   BELLOWS_CODEC_VERSION
 *   byte  3     3                   BELLOWS_CODEC_TOPK
 *   bytes 4-7   k                   uint32 little-endian, k <= n
 *   bytes 8-15  n                   uint64 little-endian, n <= UINT32_MAX
 *   bytes 16-   k indices           uint32 little-endian, ascending, < n
 *   then        k values            IEEE binary32, little-endian
 *
 * GComp (bellows_gcomp_*): see its section below.
 *
 * Residuals: a bellows_codec context is one layer's state and owns its
 * residual (n floats, allocated once by bellows_codec_new). The stateless
 * functions take a caller-owned residual instead, for callers that keep
 * their own (bellows.compress keeps it in a torch tensor).
 *
 * Allocation and threads: only bellows_codec_new allocates. A context is
 * used by one thread at a time; the stateless functions are safe from any
 * thread on disjoint buffers. Errors: 0 or a negative BELLOWS_E*
 * (bellows/error.h); outputs are untouched on failure except where said.
 */
#ifndef BELLOWS_CODEC_H
#define BELLOWS_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include <bellows/error.h>
#include <bellows/export.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The codecs; the value is the bits per value. */
enum bellows_codec_kind {
	BELLOWS_CODEC_1BIT = 1, /* sign-like, threshold >= 0 */
	BELLOWS_CODEC_2BIT = 2, /* ternary, threshold > 0 */
	BELLOWS_CODEC_TOPK = 3, /* top-k: uint32 index + float32 value each */
};

/* Flags of the decode functions. */
enum bellows_codec_flags {
	BELLOWS_CODEC_ADD = 1 << 0, /* out[i] += value instead of = */
};

#define BELLOWS_CODEC_VERSION      1  /* the message format's version */
#define BELLOWS_CODEC_HEADER_BYTES 16 /* bytes before a message's codes */
/* Most values one message or call takes (keeps byte counts in range). */
#define BELLOWS_CODEC_MAX_VALUES (UINT64_C(1) << 56)

/* One layer's codec and error-feedback residual. */
typedef struct bellows_codec bellows_codec;

/* Returns the bytes of the packed codes of n values of `kind`
 * (ceil(n * bits / 32) * 4), or 0 for an unknown kind or n above
 * BELLOWS_CODEC_MAX_VALUES. Pure; any thread. */
BELLOWS_EXPORT size_t bellows_codec_codes_bytes(int kind, uint64_t n);

/* Returns the bytes of a message of n values of `kind` (header + codes),
 * or 0 as bellows_codec_codes_bytes (and for top-k, whose size depends on
 * k: bellows_codec_topk_message_bytes). Pure; any thread. */
BELLOWS_EXPORT size_t bellows_codec_message_bytes(int kind, uint64_t n);

/* Stateless encode with a caller-owned residual: for i < n, residual[i] +=
 * grad[i], quantise with `threshold`, leave the quantisation error in
 * residual[i]; writes bellows_codec_codes_bytes(kind, n) bytes of packed
 * codes to codes (cap bytes available). grad and residual have n floats
 * and must not overlap each other or codes. Allocates nothing. Returns 0;
 * BELLOWS_EINVAL for an unknown kind, a threshold that is not finite or
 * out of the kind's range (1-bit: >= 0; 2-bit: > 0), a NULL pointer with
 * n > 0, or n above BELLOWS_CODEC_MAX_VALUES; BELLOWS_EMSGSIZE when cap is
 * too small. Nothing is written on failure. */
BELLOWS_EXPORT int bellows_codec_encode_codes(int kind, float threshold,
    const float *grad, float *residual, uint64_t n, void *codes, size_t cap);

/* Stateless decode of n values from bytes of packed codes: out[i] = value
 * (or out[i] += value with BELLOWS_CODEC_ADD in flags). Allocates nothing.
 * Returns 0; BELLOWS_EINVAL as bellows_codec_encode_codes (kind,
 * threshold, pointers, n) or for unknown flags; BELLOWS_EPROTO when bytes
 * is not exactly bellows_codec_codes_bytes(kind, n) (truncated or trailing
 * data). out is untouched on failure. */
BELLOWS_EXPORT int bellows_codec_decode_codes(int kind, float threshold,
    const void *codes, size_t bytes, uint64_t n, float *out, int flags);

/* Opens a codec of `kind` for a layer of n values with a zero residual
 * (the one allocation). On success *ret_codec is the caller's, to destroy.
 * Returns 0; BELLOWS_EINVAL for an unknown kind, a bad threshold (as
 * bellows_codec_encode_codes) or n above BELLOWS_CODEC_MAX_VALUES;
 * BELLOWS_ENOMEM. */
BELLOWS_EXPORT int bellows_codec_new(int kind, float threshold, uint64_t n,
    bellows_codec **ret_codec);

/* Frees *codec and sets it to NULL; NULL-safe. */
BELLOWS_EXPORT void bellows_codec_destroy(bellows_codec **codec);

/* Encodes the layer's gradient grad (n floats, n as given to
 * bellows_codec_new) into a message (header + packed codes) in out, with
 * error feedback through the codec's residual; *ret_bytes (may be NULL)
 * gets the message's length, bellows_codec_message_bytes(kind, n)
 * (bellows_codec_topk_message_bytes(n, k) for top-k).
 * Allocates nothing. Returns 0; BELLOWS_EINVAL for a NULL codec, NULL
 * pointers with n > 0, or grad overlapping out; BELLOWS_EMISMATCH when n
 * is not the codec's; BELLOWS_EMSGSIZE when cap is too small. Nothing is
 * written and the residual is unchanged on failure. */
BELLOWS_EXPORT int bellows_codec_encode(bellows_codec *codec, const float *grad,
    uint64_t n, void *out, size_t cap, size_t *ret_bytes);

/* Decodes a message of `bytes` bytes into out (n floats): out[i] = value,
 * or += with BELLOWS_CODEC_ADD. Needs no context: the header names the
 * codec and its threshold. Allocates nothing; any thread. Returns 0;
 * BELLOWS_EINVAL for NULL pointers or unknown flags; BELLOWS_EPROTO for a
 * message shorter than its header, a wrong magic, an unknown kind, a bad
 * threshold, a top-k message with k > n, n > UINT32_MAX or indices not
 * strictly ascending and below n, or a length other than the header's n needs
 * (truncated or trailing data); BELLOWS_EVERSION for another format version;
 * BELLOWS_EMISMATCH when the message's n is not the caller's n. out is
 * untouched on failure. */
BELLOWS_EXPORT int bellows_codec_decode(const void *msg, size_t bytes,
    float *out, uint64_t n, int flags);

/* Returns the bytes of a top-k message of k of n values (16 + 8 k), or 0
 * when k > n or n > UINT32_MAX. Pure; any thread. */
BELLOWS_EXPORT size_t bellows_codec_topk_message_bytes(uint64_t n, uint64_t k);

/* Stateless top-k encode with a caller-owned residual: for i < n,
 * residual[i] += grad[i]; the k selected values (see the header comment)
 * go to val (k floats) and their indices, ascending, to idx (k uint32s),
 * and their residuals become +0. grad, residual, idx and val must not
 * overlap. Allocates nothing. Returns 0; BELLOWS_EINVAL for k > n,
 * n > UINT32_MAX, or a NULL pointer where n > 0 (grad, residual) or
 * k > 0 (idx, val). Nothing is written on failure. */
BELLOWS_EXPORT int bellows_codec_topk_encode(const float *grad, float *residual,
    uint64_t n, uint64_t k, uint32_t *idx, float *val);

/* Stateless top-k decode of k (idx, val) pairs into out (n floats):
 * out[idx[j]] = val[j] and +0 elsewhere, or out[idx[j]] += val[j] only
 * with BELLOWS_CODEC_ADD. Allocates nothing; any thread. Returns 0;
 * BELLOWS_EINVAL as bellows_codec_topk_encode or for unknown flags;
 * BELLOWS_EPROTO when the indices are not strictly ascending and below n.
 * out is untouched on failure. */
BELLOWS_EXPORT int bellows_codec_topk_decode(const uint32_t *idx,
    const float *val, uint64_t k, uint64_t n, float *out, int flags);

/* Opens a top-k codec sending k of a layer's n values, with a zero
 * residual (the one allocation); used through bellows_codec_encode,
 * whose message is bellows_codec_topk_message_bytes(n, k) bytes. On
 * success *ret_codec is the caller's, to destroy. Returns 0;
 * BELLOWS_EINVAL for a NULL ret_codec, k > n or n > UINT32_MAX;
 * BELLOWS_ENOMEM. */
BELLOWS_EXPORT int bellows_codec_new_topk(uint64_t n, uint64_t k,
    bellows_codec **ret_codec);

/* Returns the codec's residual (n floats, read-only; valid until destroy),
 * or NULL for a NULL codec. */
BELLOWS_EXPORT const float *bellows_codec_residual(const bellows_codec *codec);

/* Sets the codec's residual to zero (as after bellows_codec_new); NULL-safe. */
BELLOWS_EXPORT void bellows_codec_reset(bellows_codec *codec);

/* Returns the instruction set the codecs run here: "scalar", "avx2" or
 * "avx512". Any thread. */
BELLOWS_EXPORT const char *bellows_codec_isa(void);

/* ---- GComp (docs/codecs.md#gcomp) ------------------------------------
 *
 * Near-lossless compression of float gradients: each value's exponent as a
 * canonical Huffman code from a table every rank shares (rebuilt from
 * exponent histograms, by bellowsd's gcomp policy or locally), then a
 * 2-bit level and the sign and mantissa without the level's low bits
 * (float32: 0, 6, 12 or 18 of 23). Zero and float32/bfloat16 subnormals
 * send their exponent code alone. Level 0 is lossless for every normal
 * value. Levels come from the optimizer (the paper's delta:
 * bellows_gcomp_levels) or one level for the whole tensor.
 *
 * A block (what bellows_gcomp_encode writes) carries its dtype, n and the
 * version of the table that encoded it, in independent chunks; the decoder
 * refuses a block of another table version and anything malformed with
 * a message naming the byte offset. Tables are immutable once built: any
 * thread may encode or decode with one concurrently. */

/* Element types of GComp (the kernels' dtype numbers). */
enum bellows_gcomp_dtype {
	BELLOWS_GCOMP_F32 = 0,  /* IEEE binary32 */
	BELLOWS_GCOMP_F16 = 1,  /* IEEE binary16 */
	BELLOWS_GCOMP_BF16 = 2, /* bfloat16 */
};

/* Optimizers with a quantisation metric (Table 2 of the GComp paper). */
enum bellows_gcomp_optim {
	BELLOWS_GCOMP_SGD = 1,      /* SGD (weight decay added to g) */
	BELLOWS_GCOMP_MOMENTUM = 2, /* SGD with momentum, dampening */
	BELLOWS_GCOMP_NESTEROV = 3, /* SGD with Nesterov momentum */
	BELLOWS_GCOMP_ADAM = 4,     /* Adam (weight decay added to g) */
	BELLOWS_GCOMP_ADAMW = 5,    /* AdamW (decoupled weight decay) */
};

#define BELLOWS_GCOMP_TABLE_BYTES 268 /* a serialised table */
#define BELLOWS_GCOMP_MAX_BITS    15  /* most max_code_bits */

/* One layer's optimizer for bellows_gcomp_levels: hyper-parameters and
 * the state before this step, float32 arrays of n values. */
typedef struct bellows_gcomp_optimizer {
	int kind;                /* bellows_gcomp_optim */
	double lr;               /* learning rate (eta), > 0 */
	double weight_decay;     /* lambda */
	double momentum;         /* mu (momentum, Nesterov) */
	double dampening;        /* tau (momentum) */
	double beta1;            /* Adam, AdamW */
	double beta2;            /* Adam, AdamW */
	double eps;              /* Adam, AdamW */
	double grad_scale;       /* applied g = grad * grad_scale; 0 means 1 */
	uint64_t step;           /* t, 1 for the first step (Adam, AdamW) */
	const float *param;      /* theta_{t-1}, required */
	const float *buf;        /* momentum buffer; NULL before the first */
	const float *exp_avg;    /* Adam m_{t-1}; NULL means zeros */
	const float *exp_avg_sq; /* Adam v_{t-1}; NULL means zeros */
} bellows_gcomp_optimizer;

/* Counts of one encode. */
typedef struct bellows_gcomp_stats {
	uint64_t values;     /* values encoded */
	uint64_t zeros;      /* sent as the exponent-0 code alone */
	uint64_t escaped;    /* exponents sent raw after the escape */
	uint64_t levels[4];  /* non-zero values per level */
	uint64_t exp_bits;   /* bits of exponent codes */
	uint64_t level_bits; /* bits of levels */
	uint64_t mant_bits;  /* bits of signs and mantissas */
	uint64_t bytes;      /* the block, headers and padding included */
} bellows_gcomp_stats;

/* A GComp exponent table (immutable; share it between threads). */
typedef struct bellows_gcomp_table bellows_gcomp_table;

/* Adds the exponent symbols of n values of dtype at x to hist[0..255]
 * (float32's biased exponent; bfloat16's exponent byte; a float16's
 * exact float32 widening's). Returns 0; BELLOWS_EINVAL for a bad dtype or
 * NULL pointers. Any thread. */
BELLOWS_EXPORT int bellows_gcomp_histogram(int dtype, const void *x, uint64_t n,
    uint64_t *hist);

/* Builds the table of hist (256 counts), codes at most max_bits long
 * (1..BELLOWS_GCOMP_MAX_BITS; the paper's 8), tagged version: the same
 * builder bellowsd's gcomp policy runs. *ret_table is the caller's.
 * Returns 0; BELLOWS_EINVAL for NULL pointers or max_bits out of range;
 * BELLOWS_ENOMEM. */
BELLOWS_EXPORT int bellows_gcomp_table_build(const uint64_t *hist,
    unsigned max_bits, uint32_t version, bellows_gcomp_table **ret_table);

/* Reads a serialised table (the first BELLOWS_GCOMP_TABLE_BYTES of buf;
 * the codec_table of a decision). *ret_table is the caller's. Returns 0;
 * BELLOWS_EINVAL for NULL pointers; BELLOWS_EPROTO for a short buffer, a
 * wrong magic or a table that is no prefix code or out of range, and
 * BELLOWS_EVERSION for another format, with errbuf (may be NULL) saying
 * which at which byte; BELLOWS_ENOMEM. */
BELLOWS_EXPORT int bellows_gcomp_table_read(const void *buf, size_t len,
    bellows_gcomp_table **ret_table, char *errbuf, size_t errlen);

/* Writes table as BELLOWS_GCOMP_TABLE_BYTES bytes to out. Returns 0;
 * BELLOWS_EINVAL for NULL pointers; BELLOWS_EMSGSIZE if cap is short. */
BELLOWS_EXPORT int bellows_gcomp_table_write(const bellows_gcomp_table *table,
    void *out, size_t cap);

/* Returns the table's version (0 for NULL). */
BELLOWS_EXPORT uint32_t bellows_gcomp_table_version(
    const bellows_gcomp_table *table);

/* Returns the code length of exponent symbol s (0..255) in table, 0 if it
 * is escaped; s = 256 gives the escape's length; 0 for NULL or s > 256. */
BELLOWS_EXPORT unsigned
bellows_gcomp_table_length(const bellows_gcomp_table *table, unsigned s);

/* Returns the mean bits per exponent of hist under table (escaped
 * exponents: escape + 8), and with table NULL the entropy of hist. */
BELLOWS_EXPORT double bellows_gcomp_table_bits(const bellows_gcomp_table *table,
    const uint64_t *hist);

/* Frees *table and sets it to NULL; NULL-safe. */
BELLOWS_EXPORT void bellows_gcomp_table_destroy(bellows_gcomp_table **table);

/* Returns the most bytes a block of n values of dtype takes with any
 * table, or 0 for a bad dtype or n above 2^48. Pure. */
BELLOWS_EXPORT size_t bellows_gcomp_bound(int dtype, uint64_t n);

/* Writes the level of each of n gradient values of dtype (the largest
 * level L <= max_level whose truncation T satisfies |delta| > 2^T, delta
 * the paper's metric for opt; 0 where delta is not finite) into levels
 * (n bytes). Returns 0; BELLOWS_EINVAL for NULL pointers (opt, grad,
 * levels, opt->param with n > 0), an unknown kind or dtype, max_level
 * outside 0..3, or step 0 for Adam/AdamW. Any thread. */
BELLOWS_EXPORT int bellows_gcomp_levels(const bellows_gcomp_optimizer *opt,
    int dtype, const void *grad, uint64_t n, int max_level, uint8_t *levels);

/* Encodes n values of dtype at x with table into out (cap bytes; at most
 * bellows_gcomp_bound(dtype, n) are needed), each value at levels[i]
 * (NULL: all at `level`), 0..3; Inf and NaN always at level 0.
 * *ret_bytes (may be NULL) gets the block's length, *ret_stats (may be
 * NULL) its counts. Allocates nothing; any thread. Returns 0;
 * BELLOWS_EINVAL for NULL pointers (with n > 0), a bad dtype or level;
 * BELLOWS_EMSGSIZE when cap is too small (out then holds garbage). */
BELLOWS_EXPORT int bellows_gcomp_encode(const bellows_gcomp_table *table,
    int dtype, const void *x, uint64_t n, int level, const uint8_t *levels,
    void *out, size_t cap, size_t *ret_bytes, bellows_gcomp_stats *ret_stats);

/* Reads a block's header: values, dtype, table version, block length
 * (each output may be NULL). Returns 0; BELLOWS_EPROTO, BELLOWS_EVERSION
 * as bellows_gcomp_decode, errbuf (may be NULL) saying why. */
BELLOWS_EXPORT int bellows_gcomp_info(const void *in, size_t bytes,
    uint64_t *ret_n, int *ret_dtype, uint32_t *ret_table_version,
    size_t *ret_block_bytes, char *errbuf, size_t errlen);

/* Decodes the block at in (bytes available, at least its length) of n
 * values of dtype, encoded with table, into out: out[i] = value, or
 * out[i] += value with BELLOWS_CODEC_ADD (float32 only). Allocates
 * nothing; any thread; never reads outside in[0..bytes). Returns 0;
 * BELLOWS_EINVAL for NULL pointers or bad flags; BELLOWS_EPROTO for a
 * wrong magic, a truncated block or chunk, chunks that do not tile the
 * block, an unused code or segment lengths that disagree;
 * BELLOWS_EVERSION for another format; BELLOWS_EMISMATCH for another n,
 * dtype or table version. errbuf (may be NULL) says which, at which byte.
 * On failure out may be partly written. */
BELLOWS_EXPORT int bellows_gcomp_decode(const bellows_gcomp_table *table,
    const void *in, size_t bytes, int dtype, void *out, uint64_t n, int flags,
    char *errbuf, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* BELLOWS_CODEC_H */
