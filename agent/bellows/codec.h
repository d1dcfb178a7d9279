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

/* PowerSGD building blocks (Vogels, Karimireddy, Jaggi, NeurIPS 2019).
 *
 * One step of a layer, with its gradient G (rows x cols), residual E, the
 * last step's Q (cols x rank, the warm start) and P (rows x rank), every
 * matrix row-major float32 without padding (a contiguous torch tensor):
 *
 *   bellows_psgd_project:  M = E + G (in E's memory); P = M Q
 *   (caller: all-reduce P, sum)
 *   bellows_psgd_power:    orthogonalise P; Q = M^T P
 *   (caller: all-reduce Q, sum; Q /= ranks)
 *   bellows_psgd_decode:   out = P Q^T; E = M - out (exactly, elementwise)
 *
 * The collectives are the caller's, between the stages. Each stage takes
 * `count` matrices of the same shape (arrays of count pointers): a batch of
 * same-shape layers costs one call. The orthogonalisation is a blocked
 * two-pass Gram-Schmidt in double sums, stable up to BELLOWS_PSGD_MAX_RANK;
 * a column is divided by its norm + 1e-8 (an all-zero column stays zero), as
 * bellows.compress.orthogonalize. The products go through a BLAS
 * (bellows_psgd_blas()), so they agree with another BLAS or torch to
 * rounding, not bit for bit. NaN and infinities are not filtered: they make
 * their own matrix's P, Q, output and residual non-finite, no other matrix of
 * the batch; clearing a residual is the caller's choice.
 *
 * Limits (else BELLOWS_EINVAL): 1 <= rank <= BELLOWS_PSGD_MAX_RANK,
 * rank <= rows, rank <= cols, rows and cols <= INT32_MAX, rows * cols <=
 * BELLOWS_CODEC_MAX_VALUES, no NULL pointer among the count given, and no
 * two of a matrix's buffers overlapping. Nothing allocates except
 * bellows_psgd_new; the stateless stages are safe from any thread on
 * disjoint matrices; a bellows_psgd is used by one thread at a time. On a
 * refused call nothing is written. */

#define BELLOWS_PSGD_MAX_RANK 32 /* largest rank of the orthogonalisation */

/* A group of same-shape layers' PowerSGD state: P, Q and residuals. */
typedef struct bellows_psgd bellows_psgd;

/* residual[i] += grad[i] for i < n (float addition). Returns 0;
 * BELLOWS_EINVAL for NULL pointers with n > 0, n above
 * BELLOWS_CODEC_MAX_VALUES, or overlapping buffers. */
BELLOWS_EXPORT int bellows_psgd_ef_add(const float *grad, float *residual,
    uint64_t n);

/* Orthonormalises the rank columns of p (rows x rank) in place. Returns 0;
 * BELLOWS_EINVAL for a NULL p, rank outside 1..BELLOWS_PSGD_MAX_RANK or
 * above rows. */
BELLOWS_EXPORT int bellows_psgd_orthogonalize(float *p, uint64_t rows,
    uint32_t rank);

/* Stage 1 for count matrices: m[i] += grad[i] (skipped when grad is NULL
 * or grad[i] is NULL: m[i] already holds M), then p[i] = m[i] q[i].
 * Returns 0; BELLOWS_EINVAL as the limits above. */
BELLOWS_EXPORT int bellows_psgd_project(uint64_t rows, uint64_t cols,
    uint32_t rank, size_t count, float *const *m, const float *const *grad,
    const float *const *q, float *const *p);

/* Stage 2: orthogonalises p[i], then q[i] = m[i]^T p[i]. Returns 0;
 * BELLOWS_EINVAL as the limits above. */
BELLOWS_EXPORT int bellows_psgd_power(uint64_t rows, uint64_t cols,
    uint32_t rank, size_t count, const float *const *m, float *const *p,
    float *const *q);

/* Stage 3: out[i] = p[i] q[i]^T (rows x cols), then m[i] -= out[i], which
 * leaves the residual M - out exactly. Returns 0; BELLOWS_EINVAL as the
 * limits above (out[i] must not overlap m[i], p[i] or q[i]). */
BELLOWS_EXPORT int bellows_psgd_decode(uint64_t rows, uint64_t cols,
    uint32_t rank, size_t count, float *const *m, const float *const *p,
    const float *const *q, float *const *out);

/* Opens the state of count layers of rows x cols at `rank` (the one
 * allocation): contiguous P (count x rows x rank), Q (count x cols x rank)
 * and residuals (count x rows x cols), all zero. The caller fills Q (its
 * random start) before the first step. On success *ret_psgd is the
 * caller's, to destroy. Returns 0; BELLOWS_EINVAL for a NULL ret_psgd,
 * count 0 or a shape outside the limits above; BELLOWS_ENOMEM. */
BELLOWS_EXPORT int bellows_psgd_new(uint64_t rows, uint64_t cols, uint32_t rank,
    size_t count, bellows_psgd **ret_psgd);

/* Frees *psgd and sets it to NULL; NULL-safe. */
BELLOWS_EXPORT void bellows_psgd_destroy(bellows_psgd **psgd);

/* The group's P (count x rows x rank floats, layer i at i * rows * rank),
 * Q (count x cols x rank), and layer i's residual (rows x cols, NULL for i
 * out of range): the caller's to read and write (all-reduce P and Q in
 * place) between the stages; valid until destroy. NULL for a NULL psgd. */
BELLOWS_EXPORT float *bellows_psgd_p(bellows_psgd *psgd);
BELLOWS_EXPORT float *bellows_psgd_q(bellows_psgd *psgd);
BELLOWS_EXPORT float *bellows_psgd_residual(bellows_psgd *psgd, size_t i);

/* Stage 1 on the group: residual[i] += grads[i] (count pointers, each
 * rows x cols), P = M Q. Returns 0; BELLOWS_EINVAL for a NULL psgd or
 * grads or a NULL or overlapping grads[i]. */
BELLOWS_EXPORT int bellows_psgd_begin(bellows_psgd *psgd,
    const float *const *grads);

/* Stage 2 on the group: orthogonalise every P, Q = M^T P. Returns 0;
 * BELLOWS_EINVAL for a NULL psgd. */
BELLOWS_EXPORT int bellows_psgd_middle(bellows_psgd *psgd);

/* Stage 3 on the group: Q /= q_divisor (the ranks; 1: untouched), then
 * out[i] = P Q^T and residual[i] = M - out[i]. Returns 0; BELLOWS_EINVAL
 * for a NULL psgd or out, a NULL or overlapping out[i], or a q_divisor
 * that is not finite and > 0 (nothing written). */
BELLOWS_EXPORT int bellows_psgd_end(bellows_psgd *psgd, float q_divisor,
    float *const *out);

/* Returns the BLAS of the products: "openblas", "cblas" or "loops" (plain
 * C, when the build found no BLAS). Any thread. */
BELLOWS_EXPORT const char *bellows_psgd_blas(void);

/* Sets how many threads the BLAS runs the products on: process-wide
 * (OpenBLAS's own setting, which other users of the same OpenBLAS in the
 * process share; its default is one per core, or OPENBLAS_NUM_THREADS).
 * A trainer that runs one thread per rank wants 1. Returns 0;
 * BELLOWS_EINVAL for threads < 1; BELLOWS_ENOTSUP when the BLAS has no
 * such setting (a cblas other than OpenBLAS, or more than 1 for the plain
 * loops, which run one thread). */
BELLOWS_EXPORT int bellows_psgd_blas_threads(int threads);

#ifdef __cplusplus
}
#endif

#endif /* BELLOWS_CODEC_H */
