/* kern_cuda_ebq - the CUDA twin of the error-bounded quantiser
 * (kern_cuda_ebq.h).
 *
 * Values are taken 32 at a time by a warp, so a warp's ballot of its
 * non-zero codes is one 32-bit word of the bitmask (bit i of the stream
 * at byte i / 8, LSB first, as on the CPU). Sparse codes are compacted in
 * value order: each warp's count, an exclusive scan of the counts (one
 * block), then every lane writes its code at its warp's offset plus the
 * set bits below it. Packing gives each thread one 32-bit word of the
 * stream, which it builds from the codes that touch it: no atomics, and
 * the bytes are the CPU packer's. Decoding reverses it, a code's position
 * in a sparse stream found the same way from the bitmask.
 *
 * Arithmetic: __ddiv_rn, rint (half to even), __dmul_rn, __double2float_rn,
 * compiled with -fmad=false: the CPU's operations exactly.
 */
#include <cstdint>

#include <cuda_runtime.h>

#include "kern_cuda_ebq.h"

namespace {

constexpr unsigned kThreads = 256;   /* threads per block (8 warps) */
constexpr unsigned kMaxBlocks = 4096; /* blocks of a grid-stride launch */
constexpr unsigned kScan = 1024;      /* threads of the scan block */

/* Scratch layout for n values: codes (n int32), the warps' counts and
 * their exclusive prefix (words + 1 uint64 each: the last is the total). */
struct layout {
	int32_t *codes;            /* n codes, compacted when sparse */
	unsigned long long *count; /* per warp */
	unsigned long long *pre;   /* exclusive prefix; pre[words] = total */
};

__host__ __device__ uint64_t
words_of(uint64_t n)
{
	return (n + 31) / 32;
}

layout
layout_of(void *scratch, uint64_t n)
{
	layout l;
	uint64_t w = words_of(n);
	char *p = static_cast<char *>(scratch);

	l.codes = reinterpret_cast<int32_t *>(p);
	p += ((n * 4 + 7) / 8) * 8;
	l.count = reinterpret_cast<unsigned long long *>(p);
	l.pre = l.count + w + 1;
	return l;
}

unsigned
blocks_for(uint64_t threads)
{
	uint64_t b = (threads + kThreads - 1) / kThreads;

	return b == 0 ? 1 : b > kMaxBlocks ? kMaxBlocks : (unsigned)b;
}

__global__ void
amax_kernel(const float *x, uint64_t n, uint32_t *amax)
{
	unsigned m = 0;

	for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
	     i < n; i += (uint64_t)gridDim.x * blockDim.x)
		m = max(m, __float_as_uint(x[i]) & 0x7fffffffu);
	for (int o = 16; o > 0; o >>= 1)
		m = max(m, __shfl_down_sync(0xffffffffu, m, o));
	if ((threadIdx.x & 31) == 0)
		atomicMax(amax, m);
}

__global__ void
count_kernel(const float *x, uint64_t n, uint32_t h, unsigned long long *count)
{
	unsigned c = 0;

	for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
	     i < n; i += (uint64_t)gridDim.x * blockDim.x)
		c += (__float_as_uint(x[i]) & 0x7fffffffu) > h;
	for (int o = 16; o > 0; o >>= 1)
		c += __shfl_down_sync(0xffffffffu, c, o);
	if ((threadIdx.x & 31) == 0 && c)
		atomicAdd(count, (unsigned long long)c);
}

/* Writes the 4 bytes of v at byte offset `at` of a stream of `bytes`
 * bytes, those before its end only. */
__device__ void
put_word(uint8_t *s, uint64_t bytes, uint64_t at, uint32_t v)
{
	for (int k = 0; k < 4; k++)
		if (at + k < bytes)
			s[at + k] = (uint8_t)(v >> (8 * k));
}

__device__ uint32_t
get_word(const uint8_t *s, uint64_t bytes, uint64_t at)
{
	uint32_t v = 0;

	for (int k = 0; k < 4; k++)
		if (at + k < bytes)
			v |= (uint32_t)s[at + k] << (8 * k);
	return v;
}

/* Quantises: codes[i] (dense position), the bitmask word and the warp's
 * count of non-zero codes (sparse), and the counters. Whole warps run,
 * lanes past n idle in the ballots. */
__global__ void
quant_kernel(const float *x, uint64_t n, double step, double eb, int sparse,
    uint8_t *mask, layout l, unsigned long long *counts)
{
	const float ebf = __double2float_rn(eb);
	const uint64_t padded = words_of(n) * 32;
	unsigned nz = 0, bad = 0;

	for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
	     i < padded; i += (uint64_t)gridDim.x * blockDim.x) {
		bool live = i < n;
		double xd = live ? (double)x[i] : 0.0;
		double qd = rint(__ddiv_rn(xd, step));
		float rec = __double2float_rn(__dmul_rn(qd, step));
		int32_t c = (int32_t)qd;
		unsigned bal;

		if (fabsf(rec) <= ebf)
			rec = 0.0f;
		bad += live && fabs(xd - (double)rec) > eb;
		nz += live && rec != 0.0f;
		if (live)
			l.codes[i] = c;
		if (sparse) {
			bal = __ballot_sync(0xffffffffu, live && c != 0);
			if ((threadIdx.x & 31) == 0) {
				l.count[i / 32] = __popc(bal);
				put_word(mask, (n + 7) / 8, i / 8, bal);
			}
		}
	}
	for (int o = 16; o > 0; o >>= 1) {
		nz += __shfl_down_sync(0xffffffffu, nz, o);
		bad += __shfl_down_sync(0xffffffffu, bad, o);
	}
	if ((threadIdx.x & 31) == 0) {
		if (nz)
			atomicAdd(&counts[0], (unsigned long long)nz);
		if (bad)
			atomicAdd(&counts[1], (unsigned long long)bad);
	}
}

/* Exclusive prefix of l.count[0..w) into l.pre, and the total at
 * l.pre[w]: one block, each thread a contiguous run. */
__global__ void
scan_kernel(layout l, uint64_t w)
{
	__shared__ unsigned long long sums[kScan];
	uint64_t per = (w + kScan - 1) / kScan;
	uint64_t lo = threadIdx.x * per, hi = lo + per < w ? lo + per : w;
	unsigned long long s = 0, run;

	for (uint64_t k = lo; k < hi; k++)
		s += l.count[k];
	sums[threadIdx.x] = s;
	__syncthreads();
	/* Hillis-Steele inclusive scan of the runs' sums. */
	for (unsigned o = 1; o < kScan; o <<= 1) {
		unsigned long long v = threadIdx.x >= o ? sums[threadIdx.x - o]
							: 0;

		__syncthreads();
		sums[threadIdx.x] += v;
		__syncthreads();
	}
	run = sums[threadIdx.x] - s;
	for (uint64_t k = lo; k < hi; k++) {
		l.pre[k] = run;
		run += l.count[k];
	}
	if (threadIdx.x == kScan - 1)
		l.pre[w] = sums[kScan - 1];
}

/* Copies the non-zero codes to `to`, compacted in value order (not in
 * place: blocks run in no set order). */
__global__ void
compact_kernel(uint64_t n, layout l, int32_t *to)
{
	const uint64_t padded = words_of(n) * 32;

	for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
	     i < padded; i += (uint64_t)gridDim.x * blockDim.x) {
		bool live = i < n;
		int32_t c = live ? l.codes[i] : 0;
		unsigned lane = threadIdx.x & 31;
		unsigned bal = __ballot_sync(0xffffffffu, live && c != 0);

		if (live && c != 0)
			to[l.pre[i / 32] + __popc(bal & ((1u << lane) - 1))] = c;
	}
}

/* Builds the stream's 32-bit words from m codes of `bits` bits (*total
 * codes instead when total is not NULL). */
__global__ void
pack_kernel(const int32_t *codes, uint64_t m, const unsigned long long *total,
    unsigned bits, uint8_t *out, uint64_t bytes)
{
	const uint64_t mask = (1ull << bits) - 1;
	const uint64_t words = (bytes + 3) / 4;

	if (total != NULL)
		m = *total;

	for (uint64_t w = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
	     w < words; w += (uint64_t)gridDim.x * blockDim.x) {
		uint64_t bit0 = 32 * w, v = 0;

		for (uint64_t j = bit0 / bits; j < m && j * bits < bit0 + 32;
		     j++) {
			uint64_t c = (uint64_t)(uint32_t)codes[j] & mask;
			int64_t sh = (int64_t)(j * bits) - (int64_t)bit0;

			v |= sh >= 0 ? c << sh : c >> -sh;
		}
		put_word(out, bytes, 4 * w, (uint32_t)v);
	}
}

/* Per-warp set bits of the bitmask (for the decoder's scan). */
__global__ void
popc_kernel(const uint8_t *mask, uint64_t n, layout l)
{
	uint64_t w = words_of(n);

	for (uint64_t k = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
	     k < w; k += (uint64_t)gridDim.x * blockDim.x)
		l.count[k] = __popc(get_word(mask, (n + 7) / 8, 4 * k));
}

/* Code j of `bits` bits, sign-extended, from a stream of `bytes` bytes. */
__device__ int32_t
get_code(const uint8_t *s, uint64_t bytes, uint64_t j, unsigned bits)
{
	uint64_t bit = j * bits, v = 0;

	for (int k = 0; k < 5; k++)
		if (bit / 8 + k < bytes)
			v |= (uint64_t)s[bit / 8 + k] << (8 * k);
	v = (v >> (bit % 8)) & ((1ull << bits) - 1);
	return (int32_t)((int64_t)(v << (64 - bits)) >> (64 - bits));
}

__global__ void
dequant_kernel(const uint8_t *mask, const uint8_t *codes, uint64_t bytes,
    uint64_t n, double step, float ebf, unsigned bits, int sparse, layout l,
    float *out)
{
	for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
	     i < n; i += (uint64_t)gridDim.x * blockDim.x) {
		int32_t c;
		float v;

		if (sparse) {
			uint32_t word = get_word(mask, (n + 7) / 8, i / 32 * 4);
			unsigned lane = (unsigned)(i % 32);

			c = (word >> lane) & 1 ?
			    get_code(codes, bytes,
				l.pre[i / 32] +
				    __popc(word & ((1u << lane) - 1)),
				bits) :
			    0;
		} else {
			c = get_code(codes, bytes, i, bits);
		}
		v = __double2float_rn(__dmul_rn((double)c, step));
		out[i] = fabsf(v) <= ebf ? 0.0f : v;
	}
}

} // namespace

extern "C" size_t
kern_cuda_ebq_scratch_bytes(uint64_t n)
{
	/* codes, compacted codes, counts and prefixes (+1 each). */
	return 2 * (((n * 4 + 7) / 8) * 8) + 2 * (words_of(n) + 1) * 8;
}

extern "C" int
kern_cuda_ebq_amax(const float *x, uint64_t n, uint32_t *amax, void *stream)
{
	cudaStream_t s = static_cast<cudaStream_t>(stream);

	if (n == 0)
		return 0;
	amax_kernel<<<blocks_for(n), kThreads, 0, s>>>(x, n, amax);
	return (int)cudaGetLastError();
}

extern "C" int
kern_cuda_ebq_count(const float *x, uint64_t n, uint32_t h,
    unsigned long long *count, void *stream)
{
	cudaStream_t s = static_cast<cudaStream_t>(stream);

	if (n == 0)
		return 0;
	count_kernel<<<blocks_for(n), kThreads, 0, s>>>(x, n, h, count);
	return (int)cudaGetLastError();
}

extern "C" int
kern_cuda_ebq_encode(const float *x, uint64_t n, double step, double eb,
    unsigned bits, int sparse, uint8_t *mask, uint8_t *codes,
    uint64_t codes_bytes, void *scratch, unsigned long long *counts,
    void *stream)
{
	cudaStream_t s = static_cast<cudaStream_t>(stream);
	layout l = layout_of(scratch, n);
	int32_t *packed = l.codes;
	const unsigned long long *total = NULL;

	if (n == 0)
		return 0;
	quant_kernel<<<blocks_for(words_of(n) * 32), kThreads, 0, s>>>(x, n,
	    step, eb, sparse, mask, l, counts);
	if (sparse) {
		/* The compacted codes go after the dense ones. */
		packed = reinterpret_cast<int32_t *>(
		    static_cast<char *>(scratch) + (((n * 4 + 7) / 8) * 8) +
		    2 * (words_of(n) + 1) * 8);
		scan_kernel<<<1, kScan, 0, s>>>(l, words_of(n));
		compact_kernel<<<blocks_for(words_of(n) * 32), kThreads, 0,
		    s>>>(n, l, packed);
		total = l.pre + words_of(n);
	}
	pack_kernel<<<blocks_for((codes_bytes + 3) / 4), kThreads, 0, s>>>(
	    packed, n, total, bits, codes, codes_bytes);
	return (int)cudaGetLastError();
}

extern "C" int
kern_cuda_ebq_decode(const uint8_t *mask, const uint8_t *codes,
    uint64_t codes_bytes, uint64_t n, double step, double eb, unsigned bits,
    int sparse, void *scratch, float *out, void *stream)
{
	cudaStream_t s = static_cast<cudaStream_t>(stream);
	layout l = layout_of(scratch, n);

	if (n == 0)
		return 0;
	if (sparse) {
		popc_kernel<<<blocks_for(words_of(n)), kThreads, 0, s>>>(mask, n,
		    l);
		scan_kernel<<<1, kScan, 0, s>>>(l, words_of(n));
	}
	dequant_kernel<<<blocks_for(n), kThreads, 0, s>>>(mask, codes,
	    codes_bytes, n, step, (float)eb, bits, sparse, l, out);
	return (int)cudaGetLastError();
}

extern "C" int
kern_cuda_ebq_clear(void *dev, size_t bytes, void *stream)
{
	return (int)cudaMemsetAsync(dev, 0, bytes,
	    static_cast<cudaStream_t>(stream));
}

extern "C" int
kern_cuda_ebq_fetch(void *host, const void *dev, size_t bytes, void *stream)
{
	cudaStream_t s = static_cast<cudaStream_t>(stream);
	cudaError_t e = cudaMemcpyAsync(host, dev, bytes,
	    cudaMemcpyDeviceToHost, s);

	if (e != cudaSuccess)
		return (int)e;
	return (int)cudaStreamSynchronize(s);
}

extern "C" int
kern_cuda_ebq_mask_bits(const uint8_t *mask, uint64_t n, void *scratch,
    uint64_t *ret_bits, void *stream)
{
	cudaStream_t s = static_cast<cudaStream_t>(stream);
	layout l = layout_of(scratch, n);
	unsigned long long total = 0;
	int rc;

	if (n == 0) {
		*ret_bits = 0;
		return 0;
	}
	popc_kernel<<<blocks_for(words_of(n)), kThreads, 0, s>>>(mask, n, l);
	scan_kernel<<<1, kScan, 0, s>>>(l, words_of(n));
	rc = (int)cudaGetLastError();
	if (rc == 0)
		rc = kern_cuda_ebq_fetch(&total, l.pre + words_of(n),
		    sizeof total, stream);
	if (rc == 0)
		*ret_bits = total;
	return rc;
}
