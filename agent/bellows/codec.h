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
 * Allocation and threads: only bellows_codec_new allocates, and the codec
 * threads when they start (bellows_codec_set_threads, or the first large
 * call with BELLOWS_CODEC_THREADS set; see "Threads and half precision"
 * below). A context is used by one thread at a time; the stateless
 * functions are safe from any thread on disjoint buffers. Gradients may
 * also be float16 or bfloat16 (the _dtype functions), and the CUDA twins
 * (the _cuda functions) run the same codecs on device memory. Errors: 0 or a
 * negative BELLOWS_E* (bellows/error.h); outputs are untouched on failure
 * except where said.
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

/* ---- Threads and half precision -------------------------------------
 *
 * The codecs split a tensor of at least min_values values across the
 * process's codec threads (the caller's and workers that sleep between
 * calls), each part a multiple of 1024 values: the bytes, the residual and
 * the top-k selection are the same whatever the number of threads. One
 * set of threads per process, used by one call at a time: a call made
 * while another thread's call has them runs on its own thread alone (same
 * results). Default: one thread, as the statistics kernels' pool, unless
 * BELLOWS_CODEC_THREADS is set in the environment when the threads start
 * (first large call): that many, or one per online processor for 0 or
 * "all"; min_values 1 Mi (2^20) values. */

/* Sets the codec threads: `threads` in total (1: the calling thread only;
 * 0: one per online processor), splitting tensors of at least min_values values
 * (0: 2^20). Waits for a call in progress, stops the old workers and starts the
 * new ones. Any thread. Returns 0; BELLOWS_EINVAL for threads above 65;
 * BELLOWS_ENOMEM; BELLOWS_ESYS (no thread could start: the setting is then one
 * thread). */
BELLOWS_EXPORT int bellows_codec_set_threads(uint32_t threads,
    uint64_t min_values);

/* Returns the codec threads a large tensor would use now (starting them
 * with the default setting if none is made yet). Any thread. */
BELLOWS_EXPORT uint32_t bellows_codec_threads(void);

/* bellows_codec_encode_codes on a gradient of `dtype` (a bellows_dtype of
 * bellows/agent.h: 0 float32, 1 float16, 2 bfloat16, n elements at grad).
 * Each value is widened exactly to float32 and added to the float32
 * residual, as bellows.compress's torch code does (residual +=
 * grad.float()); the rest is float32 as above. Returns the same errors,
 * and BELLOWS_EINVAL for another dtype. */
BELLOWS_EXPORT int bellows_codec_encode_codes_dtype(int kind, float threshold,
    int dtype, const void *grad, float *residual, uint64_t n, void *codes,
    size_t cap);

/* bellows_codec_topk_encode on a gradient of `dtype` (as
 * bellows_codec_encode_codes_dtype): widened to float32, float32 residual
 * and values. Returns the same errors, and BELLOWS_EINVAL for another
 * dtype. */
BELLOWS_EXPORT int bellows_codec_topk_encode_dtype(int dtype, const void *grad,
    float *residual, uint64_t n, uint64_t k, uint32_t *idx, float *val);

/* ---- CUDA twins -------------------------------------------------------
 *
 * The same codecs on device memory, enqueued on a CUDA stream (a
 * cudaStream_t passed as void *; NULL is the legacy default stream) on the
 * current device: the same bytes (codes, top-k indices and values) and the
 * same float32 residual bit for bit as the CPU functions above. The header
 * of a message (bellows_codec_encode) is the caller's to write: these
 * functions write packed codes, or indices and values, as the stateless CPU
 * functions. They validate their arguments, enqueue, and return without
 * waiting; results are there once the stream has run. Errors found on the
 * device later (a bad pointer) surface at the caller's next CUDA
 * synchronisation. Any thread, disjoint buffers. Built when libbellows
 * is built with CUDA; otherwise every function returns BELLOWS_ENOTSUP. */

/* Returns 1 if this libbellows has the CUDA codecs and a CUDA device is
 * present, else 0. Any thread. */
BELLOWS_EXPORT int bellows_codec_cuda_available(void);

/* Returns 1 if this libbellows was built with the CUDA codecs. Pure. */
BELLOWS_EXPORT int bellows_codec_cuda_built(void);

/* bellows_codec_encode_codes_dtype on device memory (grad, residual and
 * codes on the current device), enqueued on stream. Returns 0;
 * BELLOWS_EINVAL as bellows_codec_encode_codes_dtype; BELLOWS_EMSGSIZE;
 * BELLOWS_ENOTSUP without CUDA or a device; BELLOWS_EIO when the launch
 * fails. */
BELLOWS_EXPORT int bellows_codec_encode_codes_cuda(int kind, float threshold,
    int dtype, const void *grad, float *residual, uint64_t n, void *codes,
    size_t cap, void *stream);

/* bellows_codec_decode_codes on device memory, enqueued on stream.
 * Returns 0; BELLOWS_EINVAL and BELLOWS_EPROTO as
 * bellows_codec_decode_codes; BELLOWS_ENOTSUP; BELLOWS_EIO. */
BELLOWS_EXPORT int bellows_codec_decode_codes_cuda(int kind, float threshold,
    const void *codes, size_t bytes, uint64_t n, float *out, int flags,
    void *stream);

/* Bytes of device workspace bellows_codec_topk_encode_cuda needs for n
 * values (0 when n > UINT32_MAX). Pure. */
BELLOWS_EXPORT size_t bellows_codec_topk_cuda_work_bytes(uint64_t n);

/* bellows_codec_topk_encode_dtype on device memory: the same k (index,
 * value) pairs, indices ascending, and residual; `work` is device memory
 * of at least bellows_codec_topk_cuda_work_bytes(n) bytes, used by this
 * call until the stream has run it (any content). Enqueued on stream.
 * Returns 0; BELLOWS_EINVAL as bellows_codec_topk_encode_dtype or for a
 * NULL or short work; BELLOWS_ENOTSUP; BELLOWS_EIO. */
BELLOWS_EXPORT int bellows_codec_topk_encode_cuda(int dtype, const void *grad,
    float *residual, uint64_t n, uint64_t k, uint32_t *idx, float *val,
    void *work, size_t work_bytes, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* BELLOWS_CODEC_H */
