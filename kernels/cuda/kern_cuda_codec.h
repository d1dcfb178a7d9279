/* kern_cuda_codec - the host entry points of the CUDA codecs
 * (kern_cuda_codec.cu, kern_cuda_topk.cu).
 *
 * The CUDA twins of kernels/cpu/kern_codec.h (1-bit and 2-bit quantisation
 * with error feedback) and kernels/cpu/kern_topk.h (top-k with error
 * feedback): the same packed codes, the same top-k indices and values
 * and the same float32 residual bit for bit, on device memory, enqueued on
 * a stream (a cudaStream_t as void *, NULL the legacy default stream) on
 * the current device. Gradients may be float32, float16 or bfloat16
 * (kern_dtype), widened exactly to float first (element.h) as on the CPU.
 *
 * Plain C types only, so that agent/agent_codec.c stays C. Arguments are
 * checked by the caller (agent/agent_codec.c); these functions only enqueue and
 * return 0 or a negative BELLOWS_E*: BELLOWS_ENOTSUP without a device or
 * without code for it, BELLOWS_EINVAL for a pointer or stream the runtime
 * refuses, BELLOWS_EIO for another launch failure.
 */
#ifndef KERN_CUDA_CODEC_H
#define KERN_CUDA_CODEC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Returns 1 if a CUDA device is present, else 0. */
int kern_cuda_codec_available(void);

/* Maps a cudaError_t (as int) to 0 or BELLOWS_E*. */
int kern_cuda_codec_rc(int cuda_error);

/* Enqueues the encode of n > 0 values of g (dtype) with `bits` (1 or 2)
 * bits and threshold t: res[i] += g[i], quantise, error left in res[i];
 * writes kern_codec_bytes(bits, n) bytes (whole 32-bit words, padding
 * zero) to codes, which is 4-byte aligned. */
int kern_cuda_codec_encode(int bits, float t, int dtype, const void *g,
    float *res, uint64_t n, void *codes, void *stream);

/* Enqueues the decode of n > 0 values from codes (4-byte aligned):
 * out[i] = value, or out[i] += value when add is non-zero. */
int kern_cuda_codec_decode(int bits, float t, const void *codes, uint64_t n,
    float *out, int add, void *stream);

/* Bytes of workspace kern_cuda_topk_encode needs for n values. */
size_t kern_cuda_topk_work_bytes(uint64_t n);

/* Enqueues top-k of n > 0 values (n <= UINT32_MAX, k <= n): res[i] +=
 * g[i]; the k largest |res| (kern_topk.h's order and tie rule) go to idx
 * (ascending) and val, and their residuals become +0. work holds
 * kern_cuda_topk_work_bytes(n) bytes of device memory, 8-byte aligned. */
int kern_cuda_topk_encode(int dtype, const void *g, float *res, uint64_t n,
    uint64_t k, uint32_t *idx, float *val, void *work, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* KERN_CUDA_CODEC_H */
