/* kern_cuda_stats - the CUDA twins of the CPU statistics and histogram kernels.
 *
 * Every element goes through element.h, the code the CPU's portable path
 * runs, with products and sums rounded separately (__fmul_rn, __fadd_rn;
 * the file is also compiled with -fmad=false), so the accumulator and the
 * momentum come out bit-for-bit as on the CPU.
 *
 * One tensor, one launch: a grid-stride loop in which each thread keeps
 * plain double sums folded into a compensated pair every KERN_LANE_TERMS
 * elements; warp shuffles then a shared-memory step reduce a block to one
 * partial, written to the tensor's scratch; the last block to finish
 * (elected with a counter, after a __threadfence) folds the partials in
 * block order, so the result does not depend on which blocks ran first,
 * into the tensor's kern_stats and resets the counter. No atomics on
 * doubles, nothing returns to the host, nothing waits.
 *
 * Many small tensors, one launch: the jobs travel in the kernel's
 * parameters and each block reduces one tensor alone, straight into its
 * kern_stats.
 */
#include <cstdint>

#include <cuda_runtime.h>

#include "../element.h"
#include "kern_cuda_launch.h"

namespace {

/* Statistics of one thread, warp or block. */
struct part {
	double sq_hi;               /* sum of squares, high part */
	double sq_lo;               /* its low part */
	double ab_hi;               /* sum of magnitudes, high part */
	double ab_lo;               /* its low part */
	unsigned long long zeros;   /* finite zeros */
	unsigned long long nonfin;  /* NaN or infinite */
	unsigned int max_bits;      /* bits of the largest finite |g| */
	unsigned int pad;           /* keeps the size a multiple of 8 */
};

/* A tensor's scratch: see KERN_CUDA_SCRATCH_SIZE. */
struct scratch {
	unsigned int ticket;                /* blocks done, this launch */
	unsigned int pad[3];                /* aligns parts */
	part parts[KERN_CUDA_MAX_BLOCKS];   /* one per block */
};

static_assert(sizeof(part) == KERN_CUDA_PART_SIZE,
    "kern_cuda_launch.h's part size");
static_assert(sizeof(scratch) == KERN_CUDA_SCRATCH_SIZE,
    "kern_cuda_launch.h's scratch size");

/* The batched launch's parameters (well under the 4 KiB limit). */
struct batch {
	kern_job job[KERN_CUDA_BATCH]; /* one per block */
};

__device__ __forceinline__ part
part_zero()
{
	part p;

	p.sq_hi = p.sq_lo = p.ab_hi = p.ab_lo = 0.0;
	p.zeros = p.nonfin = 0;
	p.max_bits = p.pad = 0;
	return p;
}

__device__ __forceinline__ void
part_merge(part *a, const part &b)
{
	kern_two_sum(&a->sq_hi, &a->sq_lo, b.sq_hi);
	a->sq_lo += b.sq_lo;
	kern_two_sum(&a->ab_hi, &a->ab_lo, b.ab_hi);
	a->ab_lo += b.ab_lo;
	a->zeros += b.zeros;
	a->nonfin += b.nonfin;
	a->max_bits = a->max_bits > b.max_bits ? a->max_bits : b.max_bits;
}

__device__ __forceinline__ void
part_add_lane(part *p, kern_lane *l)
{
	kern_two_sum(&p->sq_hi, &p->sq_lo, l->sum_sq);
	kern_two_sum(&p->ab_hi, &p->ab_lo, l->abs_sum);
	p->zeros += l->zeros;
	p->nonfin += l->nonfinite;
	if (l->max_bits > p->max_bits)
		p->max_bits = l->max_bits;
	l->sum_sq = l->abs_sum = 0.0;
	l->zeros = l->nonfinite = 0;
}

__device__ __forceinline__ part
warp_reduce(part p)
{
	for (int off = 16; off > 0; off >>= 1) {
		part o;

		o.sq_hi = __shfl_down_sync(0xffffffffu, p.sq_hi, off);
		o.sq_lo = __shfl_down_sync(0xffffffffu, p.sq_lo, off);
		o.ab_hi = __shfl_down_sync(0xffffffffu, p.ab_hi, off);
		o.ab_lo = __shfl_down_sync(0xffffffffu, p.ab_lo, off);
		o.zeros = __shfl_down_sync(0xffffffffu, p.zeros, off);
		o.nonfin = __shfl_down_sync(0xffffffffu, p.nonfin, off);
		o.max_bits = __shfl_down_sync(0xffffffffu, p.max_bits, off);
		part_merge(&p, o);
	}
	return p;
}

/* Reduces every thread's part; the result is valid in thread 0. Every
 * thread of the block must call it. */
__device__ part
block_reduce(part p)
{
	__shared__ part warps[KERN_CUDA_THREADS / 32];
	unsigned int lane = threadIdx.x & 31u;
	unsigned int warp = threadIdx.x >> 5;

	p = warp_reduce(p);
	if (lane == 0)
		warps[warp] = p;
	__syncthreads();
	if (warp == 0) {
		p = lane < KERN_CUDA_THREADS / 32 ? warps[lane] : part_zero();
		p = warp_reduce(p);
	}
	/* warps[] may be reused by the caller's next reduction. */
	__syncthreads();
	return p;
}

/* One thread's elements first, first + stride, ... of job. */
template <int DTYPE>
__device__ __forceinline__ part
thread_range(const kern_job &job, uint64_t first, uint64_t stride)
{
	const float b = job.beta;
	const float c = 1.0f - b;
	float *acc = job.acc;
	float *m = job.momentum;
	part p = part_zero();
	kern_lane l = { 0.0, 0.0, 0, 0, 0 };
	unsigned int terms = 0;

	for (uint64_t i = first; i < job.n; i += stride) {
		float g = kern_load(job.grad, i, DTYPE);

		if (kern_lane_add(&l, g)) {
			if (acc != nullptr)
				acc[i] = KERN_FADD(acc[i], g);
			if (m != nullptr)
				m[i] = kern_momentum(m[i], g, b, c);
		}
		if (++terms == KERN_LANE_TERMS) {
			part_add_lane(&p, &l);
			terms = 0;
		}
	}
	part_add_lane(&p, &l);
	return p;
}

/* Folds a tensor's reduced part into its kern_stats (one thread). */
__device__ __forceinline__ void
stats_fold(kern_stats *st, const part &p, uint64_t n)
{
	double mx = (double)kern_f32_from_bits(p.max_bits);

	st->count += n;
	st->zeros += p.zeros;
	st->nonfinite += p.nonfin;
	kern_two_sum(&st->sum_sq, &st->sum_sq_lo, p.sq_hi);
	st->sum_sq_lo += p.sq_lo;
	kern_two_sum(&st->abs_sum, &st->abs_sum_lo, p.ab_hi);
	st->abs_sum_lo += p.ab_lo;
	if (mx > st->max_abs)
		st->max_abs = mx;
}

/* Another block's partial, read past the (incoherent) L1. */
__device__ __forceinline__ part
part_load(const part *q)
{
	part p;

	p.sq_hi = __ldcg(&q->sq_hi);
	p.sq_lo = __ldcg(&q->sq_lo);
	p.ab_hi = __ldcg(&q->ab_hi);
	p.ab_lo = __ldcg(&q->ab_lo);
	p.zeros = __ldcg(&q->zeros);
	p.nonfin = __ldcg(&q->nonfin);
	p.max_bits = __ldcg(&q->max_bits);
	p.pad = 0;
	return p;
}

template <int DTYPE>
__global__ void __launch_bounds__(KERN_CUDA_THREADS)
stats_kernel(kern_job job)
{
	scratch *scr = static_cast<scratch *>(job.scratch);
	__shared__ bool last;
	part p;

	p = thread_range<DTYPE>(job,
	    (uint64_t)blockIdx.x * blockDim.x + threadIdx.x,
	    (uint64_t)gridDim.x * blockDim.x);
	p = block_reduce(p);
	if (threadIdx.x == 0) {
		scr->parts[blockIdx.x] = p;
		/* The partial is visible before the ticket is taken. */
		__threadfence();
		last = atomicAdd(&scr->ticket, 1u) == gridDim.x - 1;
	}
	__syncthreads();
	if (!last)
		return;
	__threadfence();
	p = part_zero();
	for (unsigned int blk = threadIdx.x; blk < gridDim.x; blk += blockDim.x)
		part_merge(&p, part_load(&scr->parts[blk]));
	p = block_reduce(p);
	if (threadIdx.x == 0) {
		stats_fold(job.stats, p, job.n);
		scr->ticket = 0;
	}
}

/* __grid_constant__: indexing the parameters must not copy them. */
__global__ void __launch_bounds__(KERN_CUDA_THREADS)
batch_kernel(const __grid_constant__ batch b)
{
	const kern_job &job = b.job[blockIdx.x];
	part p;

	switch (job.dtype) {
	case KERN_F16:
		p = thread_range<KERN_F16>(job, threadIdx.x, blockDim.x);
		break;
	case KERN_BF16:
		p = thread_range<KERN_BF16>(job, threadIdx.x, blockDim.x);
		break;
	default:
		p = thread_range<KERN_F32>(job, threadIdx.x, blockDim.x);
		break;
	}
	p = block_reduce(p);
	if (threadIdx.x == 0)
		stats_fold(job.stats, p, job.n);
}

template <int DTYPE>
__global__ void __launch_bounds__(KERN_CUDA_THREADS)
histogram_kernel(const void *grad, uint64_t n, unsigned long long *bins)
{
	/* 64-bit even in shared memory: a block may see over 2^32. */
	__shared__ unsigned long long h[256];
	uint64_t stride = (uint64_t)gridDim.x * blockDim.x;

	for (unsigned int t = threadIdx.x; t < 256; t += blockDim.x)
		h[t] = 0;
	__syncthreads();
	for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
	     i < n; i += stride) {
		uint32_t e =
		    (kern_f32_bits(kern_load(grad, i, DTYPE)) >> 23) & 0xffu;

		atomicAdd(&h[e], 1ull);
	}
	__syncthreads();
	for (unsigned int t = threadIdx.x; t < 256; t += blockDim.x)
		if (h[t] != 0)
			atomicAdd(&bins[t], h[t]);
}

} /* namespace */

extern "C" int
kern_cuda_launch_stats(const kern_job *job, uint32_t blocks, void *stream)
{
	cudaStream_t s = static_cast<cudaStream_t>(stream);

	switch (job->dtype) {
	case KERN_F16:
		stats_kernel<KERN_F16><<<blocks, KERN_CUDA_THREADS, 0, s>>>(
		    *job);
		break;
	case KERN_BF16:
		stats_kernel<KERN_BF16><<<blocks, KERN_CUDA_THREADS, 0, s>>>(
		    *job);
		break;
	default:
		stats_kernel<KERN_F32><<<blocks, KERN_CUDA_THREADS, 0, s>>>(
		    *job);
		break;
	}
	return (int)cudaGetLastError();
}

extern "C" int
kern_cuda_launch_batch(const kern_job *jobs, uint32_t n_jobs, void *stream)
{
	cudaStream_t s = static_cast<cudaStream_t>(stream);
	batch b;

	for (uint32_t i = 0; i < n_jobs; i++)
		b.job[i] = jobs[i];
	for (uint32_t i = n_jobs; i < KERN_CUDA_BATCH; i++)
		b.job[i] = kern_job{};
	batch_kernel<<<n_jobs, KERN_CUDA_THREADS, 0, s>>>(b);
	return (int)cudaGetLastError();
}

extern "C" int
kern_cuda_launch_histogram(const void *grad, uint64_t n, int dtype,
    uint64_t *bins, uint32_t blocks, void *stream)
{
	cudaStream_t s = static_cast<cudaStream_t>(stream);
	unsigned long long *b = reinterpret_cast<unsigned long long *>(bins);

	switch (dtype) {
	case KERN_F16:
		histogram_kernel<KERN_F16>
		    <<<blocks, KERN_CUDA_THREADS, 0, s>>>(grad, n, b);
		break;
	case KERN_BF16:
		histogram_kernel<KERN_BF16>
		    <<<blocks, KERN_CUDA_THREADS, 0, s>>>(grad, n, b);
		break;
	default:
		histogram_kernel<KERN_F32>
		    <<<blocks, KERN_CUDA_THREADS, 0, s>>>(grad, n, b);
		break;
	}
	return (int)cudaGetLastError();
}
