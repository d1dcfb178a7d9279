/* kern_cuda_launch - the host entry points of the CUDA kernels
 * (kern_cuda_stats.cu).
 *
 * Plain C types only, so that kern_cuda_backend.c, the one module making CUDA
 * runtime calls, is C: a stream is a cudaStream_t passed as void *, and
 * each function returns the cudaError_t of its launch as an int (0 is
 * cudaSuccess), which kern_cuda_backend.c maps to BELLOWS_E*. Nothing is
 * checked here: kern_cuda_backend.c validates the jobs first. All run on the
 * current device and only enqueue.
 */
#ifndef KERN_CUDA_LAUNCH_H
#define KERN_CUDA_LAUNCH_H

#include <stddef.h>
#include <stdint.h>

#include "../kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KERN_CUDA_THREADS    256  /* threads per block */
#define KERN_CUDA_MAX_BLOCKS 1024 /* blocks of one statistics launch */
#define KERN_CUDA_BATCH      32   /* tensors per batched launch */

/* Bytes of kern_job.scratch a tensor needs: a 16-byte header holding the
 * counter that elects the block folding the partials into job->stats, and
 * one 56-byte partial per block (kern_cuda_stats.cu checks the layout). Must
 * start zeroed; each launch leaves it zeroed again. */
#define KERN_CUDA_PART_SIZE    56
#define KERN_CUDA_SCRATCH_SIZE (16 + KERN_CUDA_MAX_BLOCKS * KERN_CUDA_PART_SIZE)

/* Enqueues the statistics kernel over one tensor on `blocks` (1 ..
 * KERN_CUDA_MAX_BLOCKS) blocks; the last block to finish folds the
 * blocks' statistics, in block order, into job->stats. */
int kern_cuda_launch_stats(const kern_job *job, uint32_t blocks, void *stream);

/* Enqueues one launch over n_jobs (1 .. KERN_CUDA_BATCH) tensors, one
 * block each; no scratch is used. The jobs must not share stats, acc or
 * momentum. */
int kern_cuda_launch_batch(const kern_job *jobs, uint32_t n_jobs, void *stream);

/* Enqueues the exponent histogram over n elements on `blocks` blocks,
 * adding into bins[0..255] (device memory). */
int kern_cuda_launch_histogram(const void *grad, uint64_t n, int dtype,
    uint64_t *bins, uint32_t blocks, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* KERN_CUDA_LAUNCH_H */
