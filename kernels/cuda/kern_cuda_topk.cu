/* kern_cuda_topk - the CUDA twin of top-k with error feedback, see
 * kern_cuda_codec.h and kernels/cpu/kern_topk.h for the order, the tie rule and
 * the result, which this code gives bit for bit.
 *
 * A radix select on the 31-bit magnitude keys, nothing sorted, nothing
 * sent back to the host, every step an ordinary launch on the stream:
 *
 *  1. add: r = res + g (rounded as on the CPU), res = r, and a histogram
 *     of the top 11 key bits (shared-memory counts, then one global add
 *     per bucket and block);
 *  2. pick (one thread): the bucket holding the k-th key, as the CPU's
 *     radix path; the next digit's histogram (10 bits, then 10) over the
 *     keys matching the digits so far, until the k-th key's bucket is
 *     taken whole or all 31 bits are known;
 *  3. count: per tile of TILE values, the keys above the k-th key's
 *     digits and those equal to them;
 *  4. scan (one block): per tile, the equal keys in the tiles before it and
 *     its first output slot (the equal keys are taken lower index first
 *     while fewer than `need` were);
 *  5. take: each tile writes its taken indices and values in index order
 *     and zeroes their residuals.
 *
 * Sparse finish: step 1 also counts the zero keys; when at most k keys
 * are non-zero, step 2 takes the k-th key as 0 outright (prefix 0, all 31
 * bits known, need = k - non-zeros): every non-zero value is taken and
 * the zeros of lowest index, the CPU's choice, without the lower digits'
 * histogram passes.
 *
 * The workspace holds the state of the select, the histogram and the
 * tiles' counts; the first two are cleared on the stream before step 1.
 */
#include <cstdint>

#include <cuda_runtime.h>

#include <bellows/error.h>

#include "../element.h"
#include "kern_cuda_codec.h"

namespace {

constexpr unsigned threads = 256;          /* per block */
constexpr unsigned per_thread = 16;        /* values per thread of a tile */
constexpr unsigned tile = threads * per_thread; /* values per tile */
constexpr unsigned max_blocks = 1024;      /* grid-stride launches */
constexpr unsigned key_nan = 0x7f800001u;  /* every NaN's key */

/* The select's state, at the start of the workspace. */
struct state {
	uint64_t need;   /* equal keys still to take (rank in the bucket) */
	uint64_t count;  /* keys in the picked bucket */
	uint32_t prefix; /* the k-th key's digits found so far */
	uint32_t mask;   /* their bits */
	uint32_t done;   /* 1 once the digits are resolved */
	uint32_t zeros;  /* keys 0 (+-0), counted by the first level */
};

/* One tile's counts. */
struct tile_count {
	uint32_t above;     /* keys above prefix under mask */
	uint32_t eq;        /* keys equal to it */
	uint32_t eq_before; /* equal keys in the tiles before */
	uint32_t out_at;    /* first output slot */
};

constexpr size_t state_bytes = 64;
constexpr size_t hist_bytes = 2048 * sizeof(uint32_t);
static_assert(sizeof(state) <= state_bytes, "state fits its slot");

__device__ __forceinline__ uint32_t
key_of(float v)
{
	uint32_t b = __float_as_uint(v) & 0x7fffffffu;

	return b > key_nan ? key_nan : b;
}

unsigned
blocks_for(uint64_t n)
{
	uint64_t b = (n + threads * 8 - 1) / (threads * 8);

	return b > max_blocks ? max_blocks : (unsigned)(b > 0 ? b : 1);
}

/* res += g over n values. */
__global__ void
add_kernel(const void *g, int dtype, float *res, uint64_t n)
{
	uint64_t stride = (uint64_t)gridDim.x * blockDim.x;

	for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
	     i < n; i += stride)
		res[i] = __fadd_rn(res[i], kern_load(g, i, dtype));
}

/* k = n: every value taken, in index order. */
__global__ void
all_kernel(float *res, uint64_t n, uint32_t *idx, float *val)
{
	uint64_t stride = (uint64_t)gridDim.x * blockDim.x;

	for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
	     i < n; i += stride) {
		idx[i] = (uint32_t)i;
		val[i] = res[i];
		res[i] = 0.0f;
	}
}

/* Histogram of digit (key >> shift) & (width - 1) over the keys whose
 * bits under the state's mask equal its prefix; with g, res += g first
 * (the first level, mask 0). */
__global__ void
hist_kernel(const void *g, int dtype, float *res, uint64_t n, int shift,
    uint32_t width, uint8_t *work)
{
	__shared__ uint32_t sh[2048];
	__shared__ uint32_t sh_zeros;
	state *st = (state *)work;
	uint32_t *hist = (uint32_t *)(work + state_bytes);
	uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
	uint32_t prefix = st->prefix, mask = st->mask, zeros = 0;

	if (st->done)
		return;
	for (uint32_t d = threadIdx.x; d < width; d += blockDim.x)
		sh[d] = 0;
	if (threadIdx.x == 0)
		sh_zeros = 0;
	__syncthreads();
	for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
	     i < n; i += stride) {
		float r = res[i];
		uint32_t key;

		if (g != nullptr) {
			r = __fadd_rn(r, kern_load(g, i, dtype));
			res[i] = r;
		}
		key = key_of(r);
		zeros += g != nullptr && key == 0;
		if ((key & mask) == prefix)
			atomicAdd(&sh[(key >> shift) & (width - 1)], 1u);
	}
	if (g != nullptr && zeros != 0)
		atomicAdd(&sh_zeros, zeros);
	__syncthreads();
	for (uint32_t d = threadIdx.x; d < width; d += blockDim.x)
		if (sh[d] != 0)
			atomicAdd(&hist[d], sh[d]);
	if (threadIdx.x == 0 && sh_zeros != 0)
		atomicAdd(&st->zeros, sh_zeros);
}

/* One thread: picks the bucket of the need-th largest key (level 0:
 * need = k), extends prefix and mask, marks done when the bucket is taken
 * whole or the last digit is known, and clears the histogram. At level 0
 * with at most k non-zero keys among the n: the sparse finish (the k-th
 * key is 0, every bit known). */
__global__ void
pick_kernel(uint8_t *work, int level, uint64_t n, uint64_t k, int shift,
    uint32_t width)
{
	state *st = (state *)work;
	uint32_t *hist = (uint32_t *)(work + state_bytes);
	uint64_t need = level == 0 ? k : st->need, acc = 0;
	uint32_t b = width - 1;

	if (st->done)
		return;
	if (level == 0 && n - st->zeros <= k) {
		st->need = k - (n - st->zeros);
		st->count = st->zeros;
		st->prefix = 0;
		st->mask = 0x7fffffffu;
		st->done = 1;
		for (uint32_t d = 0; d < 2048; d++)
			hist[d] = 0;
		return;
	}
	for (;; b--) {
		if (acc + hist[b] >= need || b == 0)
			break;
		acc += hist[b];
	}
	need -= acc;
	st->need = need;
	st->count = hist[b];
	st->prefix |= b << shift;
	st->mask |= (width - 1) << shift;
	if (st->count == need || level == 2)
		st->done = 1;
	for (uint32_t d = 0; d < 2048; d++)
		hist[d] = 0;
}

/* Exclusive prefix sum of v over the block (blockDim.x == threads);
 * *total gets the block's sum. Every thread must call it. */
__device__ uint32_t
block_scan(uint32_t v, uint32_t *total)
{
	__shared__ uint32_t warp_sum[threads / 32];
	unsigned lane = threadIdx.x & 31u, warp = threadIdx.x / 32;
	uint32_t x = v;

	for (unsigned o = 1; o < 32; o <<= 1) {
		uint32_t y = __shfl_up_sync(0xffffffffu, x, o);

		if (lane >= o)
			x += y;
	}
	if (lane == 31)
		warp_sum[warp] = x;
	__syncthreads();
	if (warp == 0) {
		uint32_t w = lane < threads / 32 ? warp_sum[lane] : 0;

		for (unsigned o = 1; o < 32; o <<= 1) {
			uint32_t y = __shfl_up_sync(0xffffffffu, w, o);

			if (lane >= o)
				w += y;
		}
		if (lane < threads / 32)
			warp_sum[lane] = w; /* inclusive */
	}
	__syncthreads();
	uint32_t before = (warp > 0 ? warp_sum[warp - 1] : 0) + x - v;
	*total = warp_sum[threads / 32 - 1];
	__syncthreads(); /* warp_sum is reused by the next call */
	return before;
}

/* Per tile: keys above the final prefix and equal to it. */
__global__ void
count_kernel(const float *res, uint64_t n, uint8_t *work)
{
	const state *st = (const state *)work;
	tile_count *tc = (tile_count *)(work + state_bytes + hist_bytes);
	uint64_t base = (uint64_t)blockIdx.x * tile +
	    (uint64_t)threadIdx.x * per_thread;
	uint32_t above = 0, eq = 0, tot_above, tot_eq;

	for (unsigned j = 0; j < per_thread; j++) {
		uint64_t i = base + j;

		if (i < n) {
			uint32_t hi = key_of(res[i]) & st->mask;

			above += hi > st->prefix;
			eq += hi == st->prefix;
		}
	}
	(void)block_scan(above, &tot_above);
	(void)block_scan(eq, &tot_eq);
	if (threadIdx.x == 0) {
		tc[blockIdx.x].above = tot_above;
		tc[blockIdx.x].eq = tot_eq;
	}
}

/* One block: each tile's equal keys before it and first output slot. Each
 * thread scans a run of consecutive tiles. */
__global__ void
scan_kernel(uint8_t *work, uint64_t tiles)
{
	const state *st = (const state *)work;
	tile_count *tc = (tile_count *)(work + state_bytes + hist_bytes);
	uint64_t run = (tiles + threads - 1) / threads;
	uint64_t b = (uint64_t)threadIdx.x * run, e = b + run, need = st->need;
	uint32_t eq = 0, taken = 0, total;

	if (e > tiles)
		e = tiles;
	for (uint64_t t = b; t < e; t++)
		eq += tc[t].eq;
	uint32_t eq_before = block_scan(eq, &total);
	for (uint64_t t = b; t < e; t++) {
		uint64_t left = eq_before < need ? need - eq_before : 0;

		tc[t].eq_before = eq_before;
		taken += tc[t].above +
		    (uint32_t)(tc[t].eq < left ? tc[t].eq : left);
		eq_before += tc[t].eq;
	}
	uint32_t at = block_scan(taken, &total);
	for (uint64_t t = b; t < e; t++) {
		uint64_t left = tc[t].eq_before < need ? need - tc[t].eq_before
						       : 0;

		tc[t].out_at = at;
		at += tc[t].above +
		    (uint32_t)(tc[t].eq < left ? tc[t].eq : left);
	}
}

/* Per tile: the taken values, in index order, at the tile's slots. */
__global__ void
take_kernel(float *res, uint64_t n, uint8_t *work, uint32_t *idx, float *val)
{
	const state *st = (const state *)work;
	const tile_count *tc =
	    (const tile_count *)(work + state_bytes + hist_bytes);
	uint64_t base = (uint64_t)blockIdx.x * tile +
	    (uint64_t)threadIdx.x * per_thread;
	uint64_t need = st->need;
	uint32_t prefix = st->prefix, mask = st->mask;
	uint32_t eq = 0, taken = 0, total;

	for (unsigned j = 0; j < per_thread; j++)
		if (base + j < n)
			eq += (key_of(res[base + j]) & mask) == prefix;
	uint64_t seen = tc[blockIdx.x].eq_before + block_scan(eq, &total);
	uint64_t s = seen;
	for (unsigned j = 0; j < per_thread; j++) {
		uint64_t i = base + j;

		if (i < n) {
			uint32_t hi = key_of(res[i]) & mask;

			if (hi > prefix || (hi == prefix && s++ < need))
				taken++;
		}
	}
	uint64_t at = tc[blockIdx.x].out_at + block_scan(taken, &total);
	s = seen;
	for (unsigned j = 0; j < per_thread; j++) {
		uint64_t i = base + j;

		if (i < n) {
			uint32_t hi = key_of(res[i]) & mask;

			if (hi > prefix || (hi == prefix && s++ < need)) {
				idx[at] = (uint32_t)i;
				val[at] = res[i];
				res[i] = 0.0f;
				at++;
			}
		}
	}
}

} // namespace

extern "C" size_t
kern_cuda_topk_work_bytes(uint64_t n)
{
	return state_bytes + hist_bytes +
	    (size_t)((n + tile - 1) / tile) * sizeof(tile_count);
}

extern "C" int
kern_cuda_topk_encode(int dtype, const void *g, float *res, uint64_t n,
    uint64_t k, uint32_t *idx, float *val, void *work, void *stream)
{
	static const int shift[3] = { 20, 10, 0 };
	static const uint32_t width[3] = { 2048, 1024, 1024 };
	cudaStream_t s = (cudaStream_t)stream;
	uint8_t *w = (uint8_t *)work;
	uint64_t tiles = (n + tile - 1) / tile;
	cudaError_t e;

	if (k == 0 || k >= n) {
		add_kernel<<<blocks_for(n), threads, 0, s>>>(g, dtype, res, n);
		if (k > 0)
			all_kernel<<<blocks_for(n), threads, 0, s>>>(res, n,
			    idx, val);
		return kern_cuda_codec_rc((int)cudaGetLastError());
	}
	if ((e = cudaMemsetAsync(work, 0, state_bytes + hist_bytes, s)) !=
	    cudaSuccess)
		return kern_cuda_codec_rc((int)e);
	for (int level = 0; level < 3; level++) {
		hist_kernel<<<blocks_for(n), threads, 0, s>>>(
		    level == 0 ? g : nullptr, dtype, res, n, shift[level],
		    width[level], w);
		pick_kernel<<<1, 1, 0, s>>>(w, level, n, k, shift[level],
		    width[level]);
	}
	count_kernel<<<(unsigned)tiles, threads, 0, s>>>(res, n, w);
	scan_kernel<<<1, threads, 0, s>>>(w, tiles);
	take_kernel<<<(unsigned)tiles, threads, 0, s>>>(res, n, w, idx, val);
	return kern_cuda_codec_rc((int)cudaGetLastError());
}
