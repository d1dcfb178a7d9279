/* kern_cuda_powersgd - the cuBLAS twin of kernels/cpu/kern_powersgd.h:
 * PowerSGD's three stages over matrices in device memory, on one stream.
 *
 * Same layout (row-major float32, no padding: M rows x cols, P rows x rank,
 * Q cols x rank) and the same stages as bellows/codec.h's bellows_psgd_*:
 * project (M = E + G, P = M Q), power (orthogonalise P, Q = M^T P),
 * decode (out = P Q^T, E = M - out, elementwise). The products are
 * cuBLAS's SGEMM on the transposed (column-major) views; the elementwise
 * passes give the CPU's results bit for bit (one float addition or
 * subtraction each); the orthogonalisation is column-wise two-pass
 * classical Gram-Schmidt in double sums, one block per matrix, each column
 * divided by its remainder's norm + 1e-8: it agrees with the CPU's blocked
 * version to rounding. NaN and infinities are not filtered (as on the CPU).
 *
 * Plain C types only (a stream is a cudaStream_t as void *). Every function
 * enqueues on the context's stream and returns without waiting. Arrays of
 * matrices are host arrays of device pointers. Built only when meson finds
 * nvcc, the CUDA runtime and cuBLAS (kernels/meson.build: KERN_HAVE_CUBLAS).
 */
#ifndef KERN_CUDA_POWERSGD_H
#define KERN_CUDA_POWERSGD_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A cuBLAS handle bound to a stream and the device current at open. */
typedef struct kern_cuda_psgd kern_cuda_psgd;

/* Opens a context on the current device for `stream` (NULL: the default
 * stream). On success *ret_ctx is the caller's, to close. Returns 0;
 * BELLOWS_ENOTSUP without a usable device; BELLOWS_ENOMEM; BELLOWS_EIO
 * when cuBLAS does not start. */
int kern_cuda_psgd_open(void *stream, kern_cuda_psgd **ret_ctx);

/* Frees *ctx (after the stream's work) and sets it to NULL; NULL-safe. */
void kern_cuda_psgd_close(kern_cuda_psgd **ctx);

/* Stage 1 for count matrices of one shape: m[i] += g[i] (skipped when g or
 * g[i] is NULL), p[i] = m[i] q[i]. Returns 0; BELLOWS_EINVAL for a shape
 * outside bellows/codec.h's limits or a NULL pointer; BELLOWS_EIO for a
 * launch or cuBLAS failure (the stream's work may be partly done). */
int kern_cuda_psgd_project(kern_cuda_psgd *ctx, uint64_t rows, uint64_t cols,
    uint32_t rank, size_t count, float *const *m, const float *const *g,
    const float *const *q, float *const *p);

/* Stage 2: orthogonalise p[i]; q[i] = m[i]^T p[i]. Returns as
 * kern_cuda_psgd_project. */
int kern_cuda_psgd_power(kern_cuda_psgd *ctx, uint64_t rows, uint64_t cols,
    uint32_t rank, size_t count, const float *const *m, float *const *p,
    float *const *q);

/* Stage 3: out[i] = p[i] q[i]^T; m[i] -= out[i]. Returns as
 * kern_cuda_psgd_project. */
int kern_cuda_psgd_decode(kern_cuda_psgd *ctx, uint64_t rows, uint64_t cols,
    uint32_t rank, size_t count, float *const *m, const float *const *p,
    const float *const *q, float *const *out);

#ifdef __cplusplus
}
#endif

#endif /* KERN_CUDA_POWERSGD_H */
