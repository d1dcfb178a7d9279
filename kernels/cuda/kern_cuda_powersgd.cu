/* kern_cuda_powersgd - PowerSGD's stages on the GPU: elementwise
 * kernels, a one-block-per-matrix Gram-Schmidt, and cuBLAS SGEMM; see
 * kern_cuda_powersgd.h.
 *
 * Row-major products through column-major cuBLAS: a row-major a x b matrix
 * is the column-major b x a transpose, so
 *   P = M Q     is  P^T = Q^T M^T      gemm(N, N, rank, rows, cols)
 *   Q = M^T P   is  Q^T = P^T M        gemm(N, T, rank, cols, rows)
 *   out = P Q^T is  out^T = Q P^T      gemm(T, N, cols, rows, rank)
 * with every leading dimension the row length.
 */
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <stdlib.h>

#include <bellows/error.h>

#include "kern_cuda_powersgd.h"

#define PSGD_THREADS  256     /* threads per block */
#define PSGD_MAX_RANK 32      /* BELLOWS_PSGD_MAX_RANK */
#define PSGD_EPS      1e-8    /* the torch rule's epsilon */
#define PSGD_MAX_DIM  0x7fffffffull

struct kern_cuda_psgd {
	cublasHandle_t blas;   /* bound to stream */
	cudaStream_t stream;   /* where everything is enqueued */
};

namespace {

__global__ void
add_kernel(const float *g, float *e, uint64_t n)
{
	for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
	     i < n; i += (uint64_t)gridDim.x * blockDim.x)
		e[i] = e[i] + g[i];
}

__global__ void
sub_kernel(const float *d, float *e, uint64_t n)
{
	for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
	     i < n; i += (uint64_t)gridDim.x * blockDim.x)
		e[i] = e[i] - d[i];
}

/* The sum of v over the block (every thread gets it). sh holds 33
 * doubles. */
__device__ double
block_sum(double v, double *sh)
{
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_down_sync(0xffffffffu, v, o);
	if ((threadIdx.x & 31) == 0)
		sh[threadIdx.x >> 5] = v;
	__syncthreads();
	if (threadIdx.x == 0) {
		double s = 0.0;

		for (unsigned w = 0; w < blockDim.x / 32; w++)
			s += sh[w];
		sh[32] = s;
	}
	__syncthreads();
	v = sh[32];
	__syncthreads();
	return v;
}

/* Column-wise two-pass classical Gram-Schmidt of one rows x rank matrix:
 * column j is projected against columns 0..j-1 twice (coefficients
 * <p_i, p_j> / <p_i, p_i>, zero columns skipped), then divided by its
 * norm + 1e-8. */
__global__ void
orth_kernel(float *p, uint64_t rows, uint32_t rank)
{
	__shared__ double sh[33];
	__shared__ double coef[PSGD_MAX_RANK];

	for (uint32_t j = 0; j < rank; j++) {
		for (int pass = 0; pass < 2 && j > 0; pass++) {
			for (uint32_t i = 0; i < j; i++) {
				double d = 0.0, nn = 0.0;

				for (uint64_t r = threadIdx.x; r < rows;
				     r += blockDim.x) {
					double a = p[r * rank + i];

					d += a * (double)p[r * rank + j];
					nn += a * a;
				}
				d = block_sum(d, sh);
				nn = block_sum(nn, sh);
				if (threadIdx.x == 0)
					coef[i] = nn > 0.0 ? d / nn : 0.0;
			}
			__syncthreads();
			for (uint64_t r = threadIdx.x; r < rows;
			     r += blockDim.x) {
				double s = p[r * rank + j];

				for (uint32_t i = 0; i < j; i++)
					s -= (double)p[r * rank + i] * coef[i];
				p[r * rank + j] = (float)s;
			}
			__syncthreads();
		}
		double ss = 0.0;

		for (uint64_t r = threadIdx.x; r < rows; r += blockDim.x) {
			double v = p[r * rank + j];

			ss += v * v;
		}
		ss = block_sum(ss, sh);
		double s = 1.0 / (sqrt(ss) + PSGD_EPS);

		for (uint64_t r = threadIdx.x; r < rows; r += blockDim.x)
			p[r * rank + j] = (float)(p[r * rank + j] * s);
		__syncthreads();
	}
}

unsigned
grid_of(uint64_t n)
{
	uint64_t b = (n + PSGD_THREADS - 1) / PSGD_THREADS;

	return (unsigned)(b < 1 ? 1 : b > 4096 ? 4096 : b);
}

bool
shape_ok(uint64_t rows, uint64_t cols, uint32_t rank)
{
	return rank >= 1 && rank <= PSGD_MAX_RANK && rank <= rows &&
	    rank <= cols && rows <= PSGD_MAX_DIM && cols <= PSGD_MAX_DIM;
}

int
launched(void)
{
	return cudaGetLastError() == cudaSuccess ? 0 : BELLOWS_EIO;
}

int
blas_ok(cublasStatus_t s)
{
	return s == CUBLAS_STATUS_SUCCESS ? 0 : BELLOWS_EIO;
}

} /* namespace */

extern "C" int
kern_cuda_psgd_open(void *stream, kern_cuda_psgd **ret_ctx)
{
	kern_cuda_psgd *c;
	int count = 0;

	if (ret_ctx == NULL)
		return BELLOWS_EINVAL;
	if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
		cudaGetLastError();
		return BELLOWS_ENOTSUP;
	}
	c = static_cast<kern_cuda_psgd *>(calloc(1, sizeof(*c)));
	if (c == NULL)
		return BELLOWS_ENOMEM;
	c->stream = static_cast<cudaStream_t>(stream);
	if (cublasCreate(&c->blas) != CUBLAS_STATUS_SUCCESS) {
		free(c);
		return BELLOWS_EIO;
	}
	if (cublasSetStream(c->blas, c->stream) != CUBLAS_STATUS_SUCCESS ||
	    cublasSetMathMode(c->blas, CUBLAS_PEDANTIC_MATH) !=
		CUBLAS_STATUS_SUCCESS) {
		cublasDestroy(c->blas);
		free(c);
		return BELLOWS_EIO;
	}
	*ret_ctx = c;
	return 0;
}

extern "C" void
kern_cuda_psgd_close(kern_cuda_psgd **ctx)
{
	if (ctx == NULL || *ctx == NULL)
		return;
	cudaStreamSynchronize((*ctx)->stream);
	cublasDestroy((*ctx)->blas);
	free(*ctx);
	*ctx = NULL;
}

extern "C" int
kern_cuda_psgd_project(kern_cuda_psgd *ctx, uint64_t rows, uint64_t cols,
    uint32_t rank, size_t count, float *const *m, const float *const *g,
    const float *const *q, float *const *p)
{
	const float one = 1.0f, zero = 0.0f;
	int rc;

	if (ctx == NULL || !shape_ok(rows, cols, rank) ||
	    (count > 0 && (m == NULL || q == NULL || p == NULL)))
		return BELLOWS_EINVAL;
	for (size_t i = 0; i < count; i++) {
		if (m[i] == NULL || q[i] == NULL || p[i] == NULL)
			return BELLOWS_EINVAL;
		if (g != NULL && g[i] != NULL) {
			add_kernel<<<grid_of(rows * cols), PSGD_THREADS, 0,
			    ctx->stream>>>(g[i], m[i], rows * cols);
			if ((rc = launched()) != 0)
				return rc;
		}
		rc = blas_ok(cublasSgemm(ctx->blas, CUBLAS_OP_N, CUBLAS_OP_N,
		    (int)rank, (int)rows, (int)cols, &one, q[i], (int)rank,
		    m[i], (int)cols, &zero, p[i], (int)rank));
		if (rc != 0)
			return rc;
	}
	return 0;
}

extern "C" int
kern_cuda_psgd_power(kern_cuda_psgd *ctx, uint64_t rows, uint64_t cols,
    uint32_t rank, size_t count, const float *const *m, float *const *p,
    float *const *q)
{
	const float one = 1.0f, zero = 0.0f;
	int rc;

	if (ctx == NULL || !shape_ok(rows, cols, rank) ||
	    (count > 0 && (m == NULL || q == NULL || p == NULL)))
		return BELLOWS_EINVAL;
	for (size_t i = 0; i < count; i++) {
		if (m[i] == NULL || q[i] == NULL || p[i] == NULL)
			return BELLOWS_EINVAL;
		orth_kernel<<<1, PSGD_THREADS, 0, ctx->stream>>>(p[i], rows,
		    rank);
		if ((rc = launched()) != 0)
			return rc;
		rc = blas_ok(cublasSgemm(ctx->blas, CUBLAS_OP_N, CUBLAS_OP_T,
		    (int)rank, (int)cols, (int)rows, &one, p[i], (int)rank,
		    m[i], (int)cols, &zero, q[i], (int)rank));
		if (rc != 0)
			return rc;
	}
	return 0;
}

extern "C" int
kern_cuda_psgd_decode(kern_cuda_psgd *ctx, uint64_t rows, uint64_t cols,
    uint32_t rank, size_t count, float *const *m, const float *const *p,
    const float *const *q, float *const *out)
{
	const float one = 1.0f, zero = 0.0f;
	int rc;

	if (ctx == NULL || !shape_ok(rows, cols, rank) ||
	    (count > 0 && (m == NULL || q == NULL || p == NULL || out == NULL)))
		return BELLOWS_EINVAL;
	for (size_t i = 0; i < count; i++) {
		if (m[i] == NULL || q[i] == NULL || p[i] == NULL ||
		    out[i] == NULL)
			return BELLOWS_EINVAL;
		rc = blas_ok(cublasSgemm(ctx->blas, CUBLAS_OP_T, CUBLAS_OP_N,
		    (int)cols, (int)rows, (int)rank, &one, q[i], (int)rank,
		    p[i], (int)rank, &zero, out[i], (int)cols));
		if (rc != 0)
			return rc;
		sub_kernel<<<grid_of(rows * cols), PSGD_THREADS, 0,
		    ctx->stream>>>(out[i], m[i], rows * cols);
		if ((rc = launched()) != 0)
			return rc;
	}
	return 0;
}
