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

/* The most ranks bellows_codec_topk_average takes. */
#define BELLOWS_CODEC_MAX_RANKS 1024

/* Averages `ranks` ranks' top-k of one tensor into out (n floats): rank
 * r's k pairs are idx[r] and val[r] (as bellows_codec_topk_encode writes
 * them, indices strictly ascending), and out[i] = (((+0 + v_a) + v_b) +
 * ...) / ranks over the ranks a < b < ... that list i, +0 where none
 * does: the bits of zeroing out, adding each rank's pairs in rank order
 * and dividing by ranks (bellows.compress's torch decode), in one write
 * of out and one merge of the lists; where two NaNs (or infinities of
 * both signs) meet, the NaN's sign and payload may differ, as they may
 * between two builds of that torch code. Allocates nothing; any thread.
 * Returns 0; BELLOWS_EINVAL for ranks 0 or above BELLOWS_CODEC_MAX_RANKS,
 * k > n, n > UINT32_MAX, or a NULL pointer (idx, val or an entry of
 * theirs where k > 0, out where n > 0); BELLOWS_EPROTO when a rank's
 * indices are not strictly ascending and below n. out is untouched on
 * failure. */
BELLOWS_EXPORT int bellows_codec_topk_average(const uint32_t *const *idx,
    const float *const *val, uint32_t ranks, uint64_t k, uint64_t n,
    float *out);

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

/* bellows_codec_encode_codes_dtype at a scale the values choose
 * (bellows.compress's TwoBit(threshold="auto")): with r = residual +
 * grad, t = mean |r| (clamped to [FLT_MIN, FLT_MAX], FLT_MAX for a NaN
 * mean) and v = mean |r| over the values with |r| >= t (t if none), the
 * 2-bit codes are made at t, and the residual of each value sent is moved
 * from r -+ t to r -+ v (the codes decode at v); an infinite |r| makes v
 * infinite and the other residuals NaN, as the torch code does. The means
 * are taken in double in a fixed order: t and v are within 1 ulp of the
 * exact means, the same on every ISA and thread count (torch's float32
 * means, the Python fallback, may differ by a few ulp); docs/codecs.md
 * gives the arithmetic. *ret_t and *ret_v (either may be NULL; ret_v may
 * point just past the codes, where bellows.compress sends v) get t and v,
 * both FLT_MAX for n = 0. kind must be BELLOWS_CODEC_2BIT. The sums run
 * on the calling thread, the encode on the codec threads. Allocates
 * nothing. Returns 0; BELLOWS_EINVAL for another kind or dtype, a NULL
 * pointer with n > 0 or n above BELLOWS_CODEC_MAX_VALUES;
 * BELLOWS_EMSGSIZE when cap is below bellows_codec_codes_bytes(kind, n).
 * Nothing is written on failure. */
BELLOWS_EXPORT int bellows_codec_encode_codes_auto(int kind, int dtype,
    const void *grad, float *residual, uint64_t n, void *codes, size_t cap,
    float *ret_t, float *ret_v);

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
/* Error-bounded quantiser (COMET's activation codec, bellows.activations).
 *
 * For n float32 values x and an absolute bound eb > 0 (binary64):
 *
 *   amax  = max |x[i]|
 *   k     = floor(log2(amax + eb))                     (libm log2)
 *   eb'   = (eb - 2^(k-24)) * (1 - 2^-18)              half a float ulp of
 *   step  = 2 eb'                                      the largest value off
 *   q[i]  = nearbyint((double)x[i] / step)             half to even
 *   x'[i] = (float)((double)q[i] * step), then 0 where |x'[i]| <= (float)eb
 *
 * the last line being COMET's zero filter. Every element satisfies
 * |x[i] - x'[i]| <= eb; the encoder checks it and stores the values raw if
 * an element misses it (the margins rule that out). The values are stored
 * raw (exact, 4 bytes each) when eb is 0, n is 0, an x[i] is NaN or
 * infinite, eb' <= eb / 2, max |q| does not fit 32 bits, or the codes would
 * not take fewer bytes than the floats. This is, operation for operation,
 * bellows.activations' torch code (pack/unpack), so both give the same
 * codes and the same floats.
 *
 * Codes: b-bit two's complement, b the fewest bits holding +-max |q|
 * (1 + bit length of max |q|), or with BELLOWS_EBQ_BYTE_CODES the narrowest
 * of 8, 16 and 32 (torch's int8/int16/int32, the layout of
 * bellows.activations). Code i is at bit offset i * b of the stream, least
 * significant bit first; the last byte is padded with zero bits. Two layouts,
 * the smaller wins (the dense one on a tie):
 *
 *   dense:  the n codes                          ceil(n b / 8) bytes
 *   sparse: a bitmask, bit i (byte i / 8, LSB first) set where q[i] != 0,
 *           ceil(n / 8) bytes, then the non-zero codes in order
 *
 * Message: a 56-byte header, then the payload.
 *
 *   bytes 0-1   'B' 'E'        magic
 *   byte  2     1              BELLOWS_EBQ_VERSION
 *   byte  3     mode           BELLOWS_EBQ_RAW, _DENSE or _SPARSE
 *   byte  4     bits           bits per code, 1..32; 32 when raw
 *   byte  5     flags          bit 0: payload zstd-compressed; others 0
 *   bytes 6-7   0              reserved
 *   bytes 8-15  n              values, uint64 little-endian
 *   bytes 16-23 eb             the bound asked, IEEE binary64 little-endian
 *   bytes 24-31 step           2 eb', binary64 (0 when raw)
 *   bytes 32-39 codes          codes stored: n dense, the set bits of the
 *                              mask sparse, 0 raw
 *   bytes 40-47 nonzero        values that decode non-zero (information)
 *   bytes 48-55 payload bytes  as stored (compressed, with the zstd flag)
 *   bytes 56-   payload        raw: n float32 little-endian; dense: codes;
 *                              sparse: bitmask then codes
 *
 * NaN and infinities: a layer holding one is stored raw, bit for bit (the
 * bound holds for its finite values, the others come back as they were).
 * Subnormal inputs quantise like any value; a subnormal reconstruction is
 * kept unless the filter zeroes it.
 *
 * zstd (optional, BELLOWS_EBQ_ZSTD, libzstd at build time: see
 * bellows_ebq_have_zstd): the payload is compressed with zstd level 1 when
 * that makes it smaller, else the message is as without the flag. It needs a
 * bellows_ebq context (its buffers are allocated once, by bellows_ebq_new).
 *
 * Threads and allocation: the functions allocate nothing but
 * bellows_ebq_new; a context is used by one thread at a time, the others
 * are safe from any thread on disjoint buffers. Outputs are untouched on
 * failure except where said. */

#define BELLOWS_EBQ_VERSION      1  /* the message format's version */
#define BELLOWS_EBQ_HEADER_BYTES 56 /* bytes before a message's payload */

/* How the values are stored. */
enum bellows_ebq_mode {
	BELLOWS_EBQ_RAW = 0,    /* float32 as given */
	BELLOWS_EBQ_DENSE = 1,  /* one code per value */
	BELLOWS_EBQ_SPARSE = 2, /* bitmask of non-zero codes, those codes */
};

/* Flags of bellows_ebq_plan and bellows_ebq_encode. */
enum bellows_ebq_flags {
	BELLOWS_EBQ_BYTE_CODES = 1 << 0, /* codes of 8, 16 or 32 bits */
	BELLOWS_EBQ_ZSTD = 1 << 1,       /* zstd over the payload */
};

/* What a message (or a plan) holds. */
typedef struct bellows_ebq_info {
	int mode;               /* bellows_ebq_mode */
	unsigned bits;          /* bits per code; 32 when raw */
	int zstd;               /* payload zstd-compressed (messages) */
	uint64_t n;             /* values */
	uint64_t codes;         /* codes stored (n dense, 0 raw) */
	uint64_t nonzero;       /* values that decode non-zero */
	double eb;              /* bound asked */
	double step;            /* quantisation step 2 eb' (0 raw) */
	uint64_t mask_bytes;    /* sparse: ceil(n / 8); else 0 */
	uint64_t codes_bytes;   /* ceil(codes bits / 8); raw: 4 n */
	uint64_t payload_bytes; /* payload as stored */
} bellows_ebq_info;

/* The zstd buffers of the error-bounded quantiser. */
typedef struct bellows_ebq bellows_ebq;

/* Returns the largest message of n values (header + 4 n), or 0 for n
 * above BELLOWS_CODEC_MAX_VALUES. Pure; any thread. */
BELLOWS_EXPORT size_t bellows_ebq_bound(uint64_t n);

/* Returns 1 if this build has zstd (BELLOWS_EBQ_ZSTD works), else 0. */
BELLOWS_EXPORT int bellows_ebq_have_zstd(void);

/* Plans the encoding of x (n floats) with bound eb: reads x twice and
 * fills *ret_info (mode, bits, step, codes, sizes; nonzero is the count of
 * non-zero codes, which bellows_ebq_encode_parts makes exact). Allocates
 * nothing. Returns 0; BELLOWS_EINVAL for eb negative or not finite, a NULL
 * x with n > 0, a NULL ret_info, unknown flags or n above
 * BELLOWS_CODEC_MAX_VALUES. */
BELLOWS_EXPORT int bellows_ebq_plan(const float *x, uint64_t n, double eb,
    int flags, bellows_ebq_info *ret_info);

/* Writes the codes a plan (mode dense or sparse) describes: the bitmask
 * to mask (info->mask_bytes, sparse only; may be NULL when dense) and the
 * codes to codes (info->codes_bytes), for the same x. *ret_nonzero (may be
 * NULL) gets the values that decode non-zero. Allocates nothing. Returns
 * 0; BELLOWS_EINVAL for NULL pointers or a raw plan; BELLOWS_ELIMIT when an
 * element misses the bound (store the values raw; mask and codes are then
 * partly written). */
BELLOWS_EXPORT int bellows_ebq_encode_parts(const float *x,
    const bellows_ebq_info *info, void *mask, void *codes,
    uint64_t *ret_nonzero);

/* Encodes x (n floats) with bound eb into a message in out (cap bytes;
 * bellows_ebq_bound(n) always suffices); *ret_bytes (may be NULL) gets its
 * length. ctx is needed with BELLOWS_EBQ_ZSTD only (NULL otherwise).
 * Allocates nothing. Returns 0; BELLOWS_EINVAL as bellows_ebq_plan, for a
 * NULL out, x overlapping out, or BELLOWS_EBQ_ZSTD without a ctx or with
 * n above the ctx's; BELLOWS_ENOTSUP for BELLOWS_EBQ_ZSTD in a build
 * without zstd; BELLOWS_EMSGSIZE when cap is too small (out is then
 * untouched, unless the codes missed the bound and the raw values they
 * fall back to do not fit: then its contents are unspecified). */
BELLOWS_EXPORT int bellows_ebq_encode(const float *x, uint64_t n, double eb,
    int flags, bellows_ebq *ctx, void *out, size_t cap, size_t *ret_bytes);

/* Reads and checks a message's header against its length: *ret_info gets
 * its fields. Any thread. Returns 0; BELLOWS_EINVAL for NULL pointers;
 * BELLOWS_EPROTO for a message shorter than its header, a wrong magic, an
 * unknown mode or flag, bits out of range, a bad eb or step, counts above
 * n, or a length other than header + payload bytes (and, uncompressed,
 * other than the mode needs); BELLOWS_EVERSION for another version. */
BELLOWS_EXPORT int bellows_ebq_info_read(const void *msg, size_t bytes,
    bellows_ebq_info *ret_info);

/* Decodes dense or sparse codes described by info (from
 * bellows_ebq_info_read or bellows_ebq_plan) into out (info->n floats):
 * mask (sparse) and codes uncompressed. Allocates nothing; any thread.
 * Returns 0; BELLOWS_EINVAL for NULL pointers, a raw info or fields out of
 * range; BELLOWS_EPROTO when the mask's set bits are not info->codes or
 * padding bits are set. out is untouched on failure. */
BELLOWS_EXPORT int bellows_ebq_decode_parts(const bellows_ebq_info *info,
    const void *mask, const void *codes, float *out);

/* Decodes a message of `bytes` bytes into out (n floats). ctx is needed
 * for a zstd-compressed payload only. Returns 0; BELLOWS_EINVAL for NULL
 * pointers, or a compressed message without a ctx or larger than it;
 * BELLOWS_EPROTO as bellows_ebq_info_read and bellows_ebq_decode_parts,
 * or for a payload zstd cannot decompress to the size the header needs;
 * BELLOWS_ENOTSUP for a compressed payload in a build without zstd;
 * BELLOWS_EVERSION; BELLOWS_EMISMATCH when the message's n is not the
 * caller's. out is untouched on failure, except after a zstd payload that
 * turned out corrupt (then unspecified). */
BELLOWS_EXPORT int bellows_ebq_decode(const void *msg, size_t bytes, float *out,
    uint64_t n, bellows_ebq *ctx);

/* Opens the zstd buffers for messages of up to max_n values (the one
 * allocation). *ret_ctx is the caller's, to destroy. Returns 0;
 * BELLOWS_EINVAL for a NULL ret_ctx or max_n above
 * BELLOWS_CODEC_MAX_VALUES; BELLOWS_ENOTSUP in a build without zstd;
 * BELLOWS_ENOMEM. */
BELLOWS_EXPORT int bellows_ebq_new(uint64_t max_n, bellows_ebq **ret_ctx);

/* Frees *ctx and sets it to NULL; NULL-safe. */
BELLOWS_EXPORT void bellows_ebq_destroy(bellows_ebq **ctx);

/* Test hook: runs the quantiser's kernels of instruction set `isa`
 * (1 scalar, 2 AVX2, 3 AVX-512, 0 the best) from now on, for this process.
 * Returns 0, or BELLOWS_ENOTSUP when this processor or build lacks it. */
BELLOWS_EXPORT int bellows_ebq_force_isa(int isa);

/* ---- The error-bounded quantiser's CUDA twin --------------------------
 *
 * bellows_ebq_plan, _encode_parts and _decode_parts on device memory (x,
 * mask, codes and out on the current device), on a CUDA stream (a
 * cudaStream_t passed as void *; NULL is the legacy default stream): the
 * same plan, the same bitmask and codes byte for byte and the same floats
 * bit for bit as the CPU functions (the device does the CPU's binary64
 * arithmetic operation for operation). The info structures stay in host
 * memory. Unlike the codecs' twins these functions wait for the stream
 * before returning: the plan needs the largest magnitude and the count of
 * non-zero codes on the host (the caller sizes its outputs from it), the
 * encode reports its non-zero count and whether every value held the
 * bound, and the decode checks the bitmask against the code count before
 * it reads codes. `scratch` is device memory of at least
 * bellows_ebq_cuda_scratch_bytes(n) bytes, 8-byte aligned, any content,
 * the functions' working memory until they return. Allocates nothing. Any
 * thread, disjoint buffers. Built when libbellows is built with CUDA;
 * otherwise every function returns BELLOWS_ENOTSUP (after the argument
 * checks). Errors from the device: BELLOWS_ENOTSUP without a device or
 * without code for it, BELLOWS_EINVAL for a pointer or stream the runtime
 * refuses, BELLOWS_ENOMEM, BELLOWS_EIO for another failure. */

/* Returns 1 if this libbellows has the quantiser's CUDA twin and a CUDA
 * device is present, else 0. Any thread. */
BELLOWS_EXPORT int bellows_ebq_cuda_available(void);

/* Bytes of device scratch the CUDA functions need for n values (0 for n
 * above BELLOWS_CODEC_MAX_VALUES, or in a build without CUDA). Pure. */
BELLOWS_EXPORT size_t bellows_ebq_cuda_scratch_bytes(uint64_t n);

/* bellows_ebq_plan of n device floats at x: *ret_info as the CPU's.
 * Returns 0; BELLOWS_EINVAL as bellows_ebq_plan, or for a NULL, short or
 * unaligned scratch; BELLOWS_ENOTSUP; the device errors above. */
BELLOWS_EXPORT int bellows_ebq_plan_cuda(const float *x, uint64_t n, double eb,
    int flags, void *scratch, size_t scratch_bytes, void *stream,
    bellows_ebq_info *ret_info);

/* bellows_ebq_encode_parts on device memory (mask and codes device
 * buffers of info->mask_bytes and info->codes_bytes), for the x the plan
 * was made of: where the CPU function refuses another x with more codes
 * (BELLOWS_EINVAL), the device writes no more than the plan's bytes and
 * the codes beyond them are lost. Returns 0;
 * BELLOWS_EINVAL as bellows_ebq_encode_parts, or for the scratch;
 * BELLOWS_ELIMIT when an element misses the bound (store the values raw);
 * BELLOWS_ENOTSUP; the device errors above. */
BELLOWS_EXPORT int bellows_ebq_encode_parts_cuda(const float *x,
    const bellows_ebq_info *info, void *mask, void *codes, void *scratch,
    size_t scratch_bytes, void *stream, uint64_t *ret_nonzero);

/* bellows_ebq_decode_parts on device memory. Returns 0; BELLOWS_EINVAL as
 * bellows_ebq_decode_parts, or for the scratch; BELLOWS_EPROTO when the
 * mask's set bits are not info->codes (padding bits of the code stream
 * are not checked on the device: they decode to nothing); BELLOWS_ENOTSUP;
 * the device errors above. out is untouched on failure. */
BELLOWS_EXPORT int bellows_ebq_decode_parts_cuda(const bellows_ebq_info *info,
    const void *mask, const void *codes, float *out, void *scratch,
    size_t scratch_bytes, void *stream);
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
 * bellows.compress.orthogonalize. At ranks up to 8 each stage reads M once
 * (the error feedback inside the first product, the residual inside the
 * decode), in C loops whose sums have one order on every instruction set,
 * using up to 32 KB of the caller's stack; above, the products go through a
 * BLAS (bellows_psgd_blas()). Either way they agree with another BLAS or
 * torch to rounding, not bit for bit. NaN and infinities are not filtered: they
 * make their own matrix's P, Q, output and residual non-finite, no other matrix
 * of the batch; clearing a residual is the caller's choice.
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

/* ---- PowerSGD's cuBLAS twin ------------------------------------------
 *
 * bellows_psgd_project, _power and _decode on device memory: the same
 * layout, limits and stages, over host arrays of device pointers to
 * same-shape matrices on the device current at open, enqueued on the
 * context's CUDA stream without waiting. The products are cuBLAS's SGEMM
 * (so they agree with the CPU's BLAS to rounding, not bit for bit), the
 * elementwise passes (M = E + G, E = M - out) give the CPU's floats bit for
 * bit, and the orthogonalisation is the same two-pass Gram-Schmidt in
 * double sums, one column at a time. A context holds a cuBLAS handle: one
 * thread at a time; the stateless checks happen before anything is
 * enqueued (on a refused call nothing is). Built when libbellows is built
 * with CUDA and cuBLAS; otherwise every function returns BELLOWS_ENOTSUP
 * (bellows_psgd_cuda_open) or refuses without a context. Device errors
 * found later (a bad pointer) surface at the caller's next CUDA
 * synchronisation. */

/* A cuBLAS handle bound to a stream and a device. */
typedef struct bellows_psgd_cuda bellows_psgd_cuda;

/* Returns 1 if this libbellows has the cuBLAS twin and a CUDA device is
 * present, else 0. Any thread. */
BELLOWS_EXPORT int bellows_psgd_cuda_available(void);

/* Opens a context on the current device for `stream` (a cudaStream_t as
 * void *; NULL: the legacy default stream). On success *ret_ctx is the
 * caller's, to close. Returns 0; BELLOWS_EINVAL for a NULL ret_ctx;
 * BELLOWS_ENOTSUP without the twin or a usable device; BELLOWS_ENOMEM;
 * BELLOWS_EIO when cuBLAS does not start. */
BELLOWS_EXPORT int bellows_psgd_cuda_open(void *stream,
    bellows_psgd_cuda **ret_ctx);

/* Frees *ctx once its stream's work is done and sets it to NULL;
 * NULL-safe. */
BELLOWS_EXPORT void bellows_psgd_cuda_close(bellows_psgd_cuda **ctx);

/* bellows_psgd_project on device matrices. Returns 0; BELLOWS_EINVAL for
 * a NULL ctx or as bellows_psgd_project; BELLOWS_EIO for a launch or
 * cuBLAS failure (the stream's work may be partly done). */
BELLOWS_EXPORT int bellows_psgd_project_cuda(bellows_psgd_cuda *ctx,
    uint64_t rows, uint64_t cols, uint32_t rank, size_t count, float *const *m,
    const float *const *grad, const float *const *q, float *const *p);

/* bellows_psgd_power on device matrices. Returns as
 * bellows_psgd_project_cuda. */
BELLOWS_EXPORT int bellows_psgd_power_cuda(bellows_psgd_cuda *ctx,
    uint64_t rows, uint64_t cols, uint32_t rank, size_t count,
    const float *const *m, float *const *p, float *const *q);

/* bellows_psgd_decode on device matrices. Returns as
 * bellows_psgd_project_cuda. */
BELLOWS_EXPORT int bellows_psgd_decode_cuda(bellows_psgd_cuda *ctx,
    uint64_t rows, uint64_t cols, uint32_t rank, size_t count, float *const *m,
    const float *const *p, const float *const *q, float *const *out);
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

/* Test and benchmark hook: with on != 0, bellows_gcomp_encode and
 * bellows_gcomp_decode run the codec's reference path (two passes per
 * chunk, checked bit I/O) from now on, for this process; 0 goes back to
 * the fast path. Both write and read the same blocks byte for byte.
 * Returns 0. */
BELLOWS_EXPORT int bellows_gcomp_force_reference(int on);

/* ---- GComp's CUDA twin -----------------------------------------------
 *
 * bellows_gcomp_levels, _encode and _decode on device memory (grad,
 * levels, x, out, in and the optimizer's arrays on the current device):
 * the same levels, the same blocks byte for byte and the same values bit
 * for bit as the CPU functions, so that a block encoded on either decodes
 * on the other. Encode and decode go through a context holding a copy of
 * one table in device memory, bound to a CUDA stream (a cudaStream_t as
 * void *; NULL: the legacy default stream) and the device current at
 * open (make it current for every call). Unlike the codecs' twins, encode
 * and decode wait for the stream before returning: the encoder sizes its
 * chunks on the host to place them, the decoder checks the headers on
 * the host and reads every chunk's status back. They allocate a few
 * device and host buffers per call (cudaMalloc: not a tuned path). The
 * levels only enqueue. A context: one thread at a time; levels: any
 * thread. Built when libbellows is built with CUDA; otherwise every
 * function returns BELLOWS_ENOTSUP after its argument checks
 * (bellows_gcomp_cuda_open; encode and decode then have no context and
 * refuse). Errors from the device: BELLOWS_ENOTSUP without a device or
 * without code for it, BELLOWS_EINVAL for a pointer or stream the runtime
 * refuses, BELLOWS_ENOMEM, BELLOWS_EIO for another failure. */

/* A GComp table on a device, bound to a stream, with the per-chunk
 * scratch its calls keep between them (grown when a block needs more, so
 * a steady run allocates nothing per call): one call at a time on a
 * context. */
typedef struct bellows_gcomp_cuda bellows_gcomp_cuda;

/* Most values the CUDA twin encodes or decodes in one block (2^44 - 2^13:
 * one device block per chunk). */
#define BELLOWS_GCOMP_CUDA_MAX_VALUES (UINT64_C(0x7fffffff) * 8192)

/* Returns 1 if this libbellows has GComp's CUDA twin and a CUDA device is
 * present, else 0. Any thread. */
BELLOWS_EXPORT int bellows_gcomp_cuda_available(void);

/* Copies table (the caller keeps it; the context does not refer to it
 * afterwards) to the current device for `stream`, waiting for the copy.
 * On success *ret_ctx is the caller's, to close. Returns 0;
 * BELLOWS_EINVAL for a NULL table or ret_ctx; BELLOWS_ENOTSUP without the
 * twin or a usable device; BELLOWS_ENOMEM; the device errors above.
 * *ret_ctx is untouched on failure. */
BELLOWS_EXPORT int bellows_gcomp_cuda_open(const bellows_gcomp_table *table,
    void *stream, bellows_gcomp_cuda **ret_ctx);

/* Frees *ctx (its device table once the stream's work is done) and sets
 * it to NULL; NULL-safe. */
BELLOWS_EXPORT void bellows_gcomp_cuda_close(bellows_gcomp_cuda **ctx);

/* Returns the version of the context's table (0 for NULL). */
BELLOWS_EXPORT uint32_t bellows_gcomp_cuda_table_version(
    const bellows_gcomp_cuda *ctx);

/* bellows_gcomp_levels on device memory (opt itself in host memory, its
 * param, buf, exp_avg and exp_avg_sq device arrays), enqueued on stream
 * without waiting. Returns 0; BELLOWS_EINVAL as bellows_gcomp_levels;
 * BELLOWS_ENOTSUP; the device errors above (a bad pointer may surface
 * only at the caller's next synchronisation). levels is untouched on a
 * refused call. */
BELLOWS_EXPORT int bellows_gcomp_levels_cuda(const bellows_gcomp_optimizer *opt,
    int dtype, const void *grad, uint64_t n, int max_level, uint8_t *levels,
    void *stream);

/* bellows_gcomp_encode with ctx's table on device memory (x, levels, out
 * on ctx's device; out of cap bytes), waiting for ctx's stream. A level
 * above 3 in levels encodes as level 0 (the device does not refuse it as
 * the CPU does). *ret_bytes (may be NULL) gets the block's length;
 * *ret_stats (may be NULL) its values, zeros, exp_bits, level_bits,
 * mant_bits and bytes as the CPU counts them, with escaped and levels[]
 * 0 (not counted on the device). Returns 0; BELLOWS_EINVAL for a NULL
 * ctx or as bellows_gcomp_encode, or n above
 * BELLOWS_GCOMP_CUDA_MAX_VALUES; BELLOWS_EMSGSIZE when cap is too small
 * (out then holds garbage); the device errors above. ret_bytes and
 * ret_stats are untouched on failure. */
BELLOWS_EXPORT int bellows_gcomp_encode_cuda(bellows_gcomp_cuda *ctx, int dtype,
    const void *x, uint64_t n, int level, const uint8_t *levels, void *out,
    size_t cap, size_t *ret_bytes, bellows_gcomp_stats *ret_stats);

/* bellows_gcomp_decode with ctx's table on device memory (in, bytes of
 * them, and out on ctx's device), waiting for ctx's stream: the block's
 * headers are checked on the host first, each chunk's codes on the
 * device. Returns 0; BELLOWS_EINVAL for a NULL ctx or as
 * bellows_gcomp_decode, or n above BELLOWS_GCOMP_CUDA_MAX_VALUES;
 * BELLOWS_EPROTO, BELLOWS_EVERSION, BELLOWS_EMISMATCH as
 * bellows_gcomp_decode (also for a block whose chunks but the last do
 * not hold 8,192 values, which this encoder and the CPU's never write),
 * errbuf (may be NULL) saying which at which byte; the device errors
 * above. On failure out may be partly written (untouched when the
 * headers are refused). */
BELLOWS_EXPORT int bellows_gcomp_decode_cuda(bellows_gcomp_cuda *ctx,
    const void *in, size_t bytes, int dtype, void *out, uint64_t n, int flags,
    char *errbuf, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* BELLOWS_CODEC_H */
