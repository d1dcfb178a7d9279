/* kern_cuda_backend - the CUDA backend: device memory, streams, errors, see
 * kern_cuda_backend.h.
 *
 * Launch geometry: a tensor gets one block per 2,048 elements (eight per
 * thread) up to eight blocks per multiprocessor, at most
 * KERN_CUDA_MAX_BLOCKS; enough resident warps to keep the memory system
 * busy without a partial per block beyond what the scratch holds. In a
 * batch, tensors of up to KERN_CUDA_THREADS * 64 elements share launches,
 * one block each; larger ones get their own launch.
 */
#include "kern_cuda_backend.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include <bellows/error.h>

#include "kern_cuda_launch.h"

#define CUDA_PER_BLOCK  (KERN_CUDA_THREADS * 8)  /* elements per block */
#define CUDA_BATCH_MAXN (KERN_CUDA_THREADS * 64) /* largest batched tensor */

typedef struct kern_cuda {
	int device;          /* the device everything lives on */
	uint32_t max_blocks; /* blocks of one statistics launch */
} kern_cuda;

static int
cuda_rc(cudaError_t e)
{
	switch (e) {
	case cudaSuccess:
		return 0;
	case cudaErrorMemoryAllocation:
		return BELLOWS_ENOMEM;
	case cudaErrorNoDevice:
	case cudaErrorInsufficientDriver:
	case cudaErrorNotSupported:
	case cudaErrorNoKernelImageForDevice:
	case cudaErrorUnsupportedPtxVersion:
		return BELLOWS_ENOTSUP;
	case cudaErrorInvalidValue:
	case cudaErrorInvalidDevicePointer:
	case cudaErrorInvalidResourceHandle:
	case cudaErrorInvalidDevice:
		return BELLOWS_EINVAL;
	default:
		return BELLOWS_EIO;
	}
}

/* Makes the context's device current, remembering the caller's. */
static int
cuda_enter(const kern_cuda *c, int *prev)
{
	cudaError_t e;

	if ((e = cudaGetDevice(prev)) != cudaSuccess)
		return cuda_rc(e);
	if (*prev == c->device)
		return 0;
	return cuda_rc(cudaSetDevice(c->device));
}

static void
cuda_leave(const kern_cuda *c, int prev)
{
	if (prev != c->device)
		(void)cudaSetDevice(prev);
}

static int
cuda_open(const kern_config *cfg, void **ret_ctx)
{
	kern_cuda *c;
	int count = 0;
	int device;
	int sms = 0;

	(void)cfg;
	if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
		(void)cudaGetLastError(); /* not sticky: clear it */
		return BELLOWS_ENOTSUP;
	}
	if (cudaGetDevice(&device) != cudaSuccess ||
	    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount,
		device) != cudaSuccess) {
		(void)cudaGetLastError();
		return BELLOWS_ENOTSUP;
	}
	if ((c = calloc(1, sizeof(*c))) == NULL)
		return BELLOWS_ENOMEM;
	c->device = device;
	c->max_blocks = sms > 0 ? (uint32_t)sms * 8 : 1;
	if (c->max_blocks > KERN_CUDA_MAX_BLOCKS)
		c->max_blocks = KERN_CUDA_MAX_BLOCKS;
	*ret_ctx = c;
	return 0;
}

static void
cuda_close(void **ctx)
{
	if (ctx == NULL || *ctx == NULL)
		return;
	free(*ctx);
	*ctx = NULL;
}

static uint32_t
cuda_blocks(const kern_cuda *c, uint64_t n)
{
	uint64_t b = (n + CUDA_PER_BLOCK - 1) / CUDA_PER_BLOCK;

	return b < c->max_blocks ? (uint32_t)(b > 0 ? b : 1) : c->max_blocks;
}

static bool
cuda_job_ok(const kern_job *job)
{
	return job != NULL && job->stats != NULL &&
	    kern_dtype_size(job->dtype) != 0 &&
	    (job->n == 0 || job->grad != NULL);
}

static int
cuda_stats(void *ctx, const kern_job *job, void *stream)
{
	kern_cuda *c = ctx;
	int prev;
	int rc;

	if (!cuda_job_ok(job) || job->scratch == NULL)
		return BELLOWS_EINVAL;
	if (job->n == 0)
		return 0;
	if ((rc = cuda_enter(c, &prev)) != 0)
		return rc;
	rc = cuda_rc((cudaError_t)kern_cuda_launch_stats(job,
	    cuda_blocks(c, job->n), stream));
	cuda_leave(c, prev);
	return rc;
}

/* Returns true if two of the jobs would write the same memory. */
static bool
cuda_jobs_alias(const kern_job *jobs, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		for (uint32_t j = i + 1; j < n; j++)
			if (jobs[i].stats == jobs[j].stats ||
			    (jobs[i].acc != NULL &&
				jobs[i].acc == jobs[j].acc) ||
			    (jobs[i].momentum != NULL &&
				jobs[i].momentum == jobs[j].momentum))
				return true;
	return false;
}

static int
cuda_launch_group(const kern_job *group, uint32_t n, void *stream)
{
	if (cuda_jobs_alias(group, n))
		return BELLOWS_EINVAL;
	return cuda_rc((cudaError_t)kern_cuda_launch_batch(group, n, stream));
}

static int
cuda_stats_batch(void *ctx, const kern_job *jobs, uint32_t n_jobs, void *stream)
{
	kern_cuda *c = ctx;
	kern_job group[KERN_CUDA_BATCH];
	uint32_t in_group = 0;
	int prev;
	int rc = 0;

	if (n_jobs > 0 && jobs == NULL)
		return BELLOWS_EINVAL;
	for (uint32_t i = 0; i < n_jobs; i++)
		if (!cuda_job_ok(&jobs[i]) ||
		    (jobs[i].n > CUDA_BATCH_MAXN && jobs[i].scratch == NULL))
			return BELLOWS_EINVAL;
	if ((rc = cuda_enter(c, &prev)) != 0)
		return rc;
	for (uint32_t i = 0; i < n_jobs && rc == 0; i++) {
		const kern_job *j = &jobs[i];

		if (j->n == 0)
			continue;
		if (j->n > CUDA_BATCH_MAXN) {
			rc = cuda_rc((cudaError_t)kern_cuda_launch_stats(j,
			    cuda_blocks(c, j->n), stream));
			continue;
		}
		group[in_group++] = *j;
		if (in_group == KERN_CUDA_BATCH) {
			rc = cuda_launch_group(group, in_group, stream);
			in_group = 0;
		}
	}
	if (rc == 0 && in_group > 0)
		rc = cuda_launch_group(group, in_group, stream);
	cuda_leave(c, prev);
	return rc;
}

static int
cuda_histogram(void *ctx, const void *grad, uint64_t n, int dtype,
    uint64_t *bins, void *stream)
{
	kern_cuda *c = ctx;
	int prev;
	int rc;

	if (bins == NULL || kern_dtype_size(dtype) == 0 ||
	    (n > 0 && grad == NULL))
		return BELLOWS_EINVAL;
	if (n == 0)
		return 0;
	if ((rc = cuda_enter(c, &prev)) != 0)
		return rc;
	rc = cuda_rc((cudaError_t)kern_cuda_launch_histogram(grad, n, dtype,
	    bins, cuda_blocks(c, n), stream));
	cuda_leave(c, prev);
	return rc;
}

static int
cuda_synchronize(void *ctx, void *stream)
{
	kern_cuda *c = ctx;
	int prev;
	int rc;

	if ((rc = cuda_enter(c, &prev)) != 0)
		return rc;
	rc = cuda_rc(cudaStreamSynchronize((cudaStream_t)stream));
	cuda_leave(c, prev);
	return rc;
}

static int
cuda_mem_alloc(void *ctx, size_t bytes, void **ret)
{
	kern_cuda *c = ctx;
	void *p = NULL;
	int prev;
	int rc;

	if ((rc = cuda_enter(c, &prev)) != 0)
		return rc;
	rc = cuda_rc(cudaMalloc(&p, bytes > 0 ? bytes : 1));
	/* Zeroed before any stream, blocking or not, can use it. */
	if (rc == 0 && (rc = cuda_rc(cudaMemset(p, 0, bytes))) == 0)
		rc = cuda_rc(cudaDeviceSynchronize());
	if (rc != 0 && p != NULL)
		(void)cudaFree(p);
	cuda_leave(c, prev);
	if (rc == 0)
		*ret = p;
	return rc;
}

static void
cuda_mem_free(void *ctx, void *p)
{
	kern_cuda *c = ctx;
	int prev;

	if (p == NULL || cuda_enter(c, &prev) != 0)
		return;
	(void)cudaFree(p);
	cuda_leave(c, prev);
}

static int
cuda_host_alloc(void *ctx, size_t bytes, void **ret)
{
	kern_cuda *c = ctx;
	void *p = NULL;
	int prev;
	int rc;

	if ((rc = cuda_enter(c, &prev)) != 0)
		return rc;
	rc = cuda_rc(cudaMallocHost(&p, bytes > 0 ? bytes : 1));
	cuda_leave(c, prev);
	if (rc != 0)
		return rc;
	memset(p, 0, bytes);
	*ret = p;
	return 0;
}

static void
cuda_host_free(void *ctx, void *p)
{
	(void)ctx;
	if (p != NULL)
		(void)cudaFreeHost(p);
}

static int
cuda_zero(void *ctx, void *p, size_t bytes, void *stream)
{
	kern_cuda *c = ctx;
	int prev;
	int rc;

	if (bytes == 0)
		return 0;
	if (p == NULL)
		return BELLOWS_EINVAL;
	if ((rc = cuda_enter(c, &prev)) != 0)
		return rc;
	rc = cuda_rc(cudaMemsetAsync(p, 0, bytes, (cudaStream_t)stream));
	cuda_leave(c, prev);
	return rc;
}

static int
cuda_copy_in(void *ctx, void *dst, const void *src, size_t bytes, void *stream)
{
	kern_cuda *c = ctx;
	int prev;
	int rc;

	if (bytes == 0)
		return 0;
	if (dst == NULL || src == NULL)
		return BELLOWS_EINVAL;
	if ((rc = cuda_enter(c, &prev)) != 0)
		return rc;
	rc = cuda_rc(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice,
	    (cudaStream_t)stream));
	if (rc == 0)
		rc = cuda_rc(cudaStreamSynchronize((cudaStream_t)stream));
	cuda_leave(c, prev);
	return rc;
}

static int
cuda_copy_out(void *ctx, void *dst, const void *src, size_t bytes, void *stream)
{
	kern_cuda *c = ctx;
	int prev;
	int rc;

	if (bytes == 0)
		return 0;
	if (dst == NULL || src == NULL)
		return BELLOWS_EINVAL;
	if ((rc = cuda_enter(c, &prev)) != 0)
		return rc;
	rc = cuda_rc(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost,
	    (cudaStream_t)stream));
	cuda_leave(c, prev);
	return rc;
}

static const kern_ops cuda_ops = {
	.name = "cuda",
	.where = KERN_CUDA,
	.scratch_size = KERN_CUDA_SCRATCH_SIZE,
	.open = cuda_open,
	.close = cuda_close,
	.stats = cuda_stats,
	.stats_batch = cuda_stats_batch,
	.histogram = cuda_histogram,
	.synchronize = cuda_synchronize,
	.mem_alloc = cuda_mem_alloc,
	.mem_free = cuda_mem_free,
	.host_alloc = cuda_host_alloc,
	.host_free = cuda_host_free,
	.zero = cuda_zero,
	.copy_in = cuda_copy_in,
	.copy_out = cuda_copy_out,
};

const kern_ops *
kern_cuda_ops(void)
{
	return &cuda_ops;
}
