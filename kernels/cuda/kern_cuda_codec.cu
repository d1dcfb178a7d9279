/* kern_cuda_codec - the CUDA twins of the 1-bit and 2-bit quantisers, see
 * kern_cuda_codec.h and kernels/cpu/kern_codec.h for the semantics every path
 * follows bit for bit.
 *
 * Encode: one thread per value, a warp per 32 consecutive values; each
 * thread updates its residual (r = res + g, then r + step, each sum
 * rounded on its own: __fadd_rn, and the file is compiled with
 * -fmad=false) and the warp's ballot of the decisions is its packed codes:
 * one 32-bit word of 1-bit codes, or two of 2-bit codes (bit 2j the
 * "positive" bit, bit 2j + 1 "sent"), written by lane 0. Values past n
 * vote 0, which is the zero padding. The grid strides by whole warps, so
 * every lane of a warp runs the same iterations.
 *
 * Decode: one thread per value, reading its word.
 */
#include <cstdint>

#include <cuda_runtime.h>

#include <bellows/error.h>

#include "../element.h"
#include "kern_cuda_codec.h"

namespace {

constexpr unsigned threads = 256;     /* per block */
constexpr unsigned max_blocks = 4096; /* per launch; the grid strides */

unsigned
blocks_for(uint64_t n)
{
	uint64_t b = (n + threads - 1) / threads;

	return b > max_blocks ? max_blocks : (unsigned)(b > 0 ? b : 1);
}

/* Bit j of x (j < 16) to bit 2j. */
__device__ __forceinline__ uint32_t
spread16(uint32_t x)
{
	x &= 0xffffu;
	x = (x | (x << 8)) & 0x00ff00ffu;
	x = (x | (x << 4)) & 0x0f0f0f0fu;
	x = (x | (x << 2)) & 0x33333333u;
	x = (x | (x << 1)) & 0x55555555u;
	return x;
}

__global__ void
enc1_kernel(const void *g, int dtype, float *res, uint64_t n, float t,
    uint32_t *out)
{
	uint64_t n32 = (n + 31) / 32 * 32;
	uint64_t stride = (uint64_t)gridDim.x * blockDim.x;

	for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
	     i < n32; i += stride) {
		unsigned bit = 0;

		if (i < n) {
			float r = __fadd_rn(res[i], kern_load(g, i, dtype));

			bit = r > t;
			res[i] = __fadd_rn(r, bit ? -1.0f : 1.0f);
		}
		unsigned word = __ballot_sync(0xffffffffu, bit);
		if ((threadIdx.x & 31u) == 0)
			out[i / 32] = word;
	}
}

__global__ void
enc2_kernel(const void *g, int dtype, float *res, uint64_t n, float t,
    uint32_t *out)
{
	uint64_t n32 = (n + 31) / 32 * 32, words = (n + 15) / 16;
	uint64_t stride = (uint64_t)gridDim.x * blockDim.x;

	for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
	     i < n32; i += stride) {
		unsigned pos = 0, neg = 0;

		if (i < n) {
			float r = __fadd_rn(res[i], kern_load(g, i, dtype));

			pos = r >= t;
			neg = r <= -t;
			/* t > 0: never both; + 0 turns -0 into +0 as on
			 * the CPU. */
			res[i] = __fadd_rn(r, pos ? -t : (neg ? t : 0.0f));
		}
		unsigned p = __ballot_sync(0xffffffffu, pos);
		unsigned s = p | __ballot_sync(0xffffffffu, neg);
		if ((threadIdx.x & 31u) == 0) {
			uint64_t w = i / 16;

			out[w] = spread16(p) | spread16(s) << 1;
			if (w + 1 < words)
				out[w + 1] = spread16(p >> 16) |
				    spread16(s >> 16) << 1;
		}
	}
}

__global__ void
dec_kernel(int bits, float t, const uint32_t *in, uint64_t n, float *out,
    int add)
{
	uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
	float v1[2] = { -1.0f, 1.0f };
	float v2[4] = { 0.0f, 0.0f, -t, t };

	for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
	     i < n; i += stride) {
		float v;

		if (bits == 1)
			v = v1[(in[i / 32] >> (i % 32)) & 1u];
		else
			v = v2[(in[i / 16] >> (2 * (i % 16))) & 3u];
		out[i] = add ? __fadd_rn(out[i], v) : v;
	}
}

} // namespace

extern "C" int
kern_cuda_codec_rc(int cuda_error)
{
	switch ((cudaError_t)cuda_error) {
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

extern "C" int
kern_cuda_codec_available(void)
{
	int count = 0;

	if (cudaGetDeviceCount(&count) != cudaSuccess) {
		(void)cudaGetLastError(); /* not sticky: clear it */
		return 0;
	}
	return count > 0;
}

extern "C" int
kern_cuda_codec_encode(int bits, float t, int dtype, const void *g,
    float *res, uint64_t n, void *codes, void *stream)
{
	cudaStream_t s = (cudaStream_t)stream;

	if (bits == 1)
		enc1_kernel<<<blocks_for(n), threads, 0, s>>>(g, dtype, res, n,
		    t, (uint32_t *)codes);
	else
		enc2_kernel<<<blocks_for(n), threads, 0, s>>>(g, dtype, res, n,
		    t, (uint32_t *)codes);
	return kern_cuda_codec_rc((int)cudaGetLastError());
}

extern "C" int
kern_cuda_codec_decode(int bits, float t, const void *codes, uint64_t n,
    float *out, int add, void *stream)
{
	dec_kernel<<<blocks_for(n), threads, 0, (cudaStream_t)stream>>>(bits,
	    t, (const uint32_t *)codes, n, out, add);
	return kern_cuda_codec_rc((int)cudaGetLastError());
}
