/* kern_topk_avx2 - the AVX2 listing pass of top-k's sampled path (kern_topk.h).
 * Compiled with -mavx2 and called only on processors that have it: 8
 * values per vector, as kern_topk_avx512.c. AVX2 has no unsigned compare, but
 * the keys are below 2^31, so key >= L is the signed key > L - 1 (L - 1
 * is -1 when L is 0: every key). A vector's hits are stored at once: the
 * hit lanes' positions, in ascending order, come from a table of 8
 * nibbles per 8-bit mask, and one unaligned store writes the 8 indices
 * (kern_topk_slots). Four vectors a turn through plain loads and stores
 * (masked stores are slow on some processors), the last fewer than 32
 * values through masked ones. The same residual and list as the scalar
 * code bit for bit; the relisting pass (no addition) is the same loop.
 */
#include <immintrin.h>

#include "kern_topk.h"

/* For each 8-bit mask, the positions of its set bits, ascending, one per
 * nibble from the lowest. */
/* clang-format off */
static const uint32_t lanes_of[256] = {
	0x00000000, 0x00000000, 0x00000001, 0x00000010, 0x00000002, 0x00000020,
	0x00000021, 0x00000210, 0x00000003, 0x00000030, 0x00000031, 0x00000310,
	0x00000032, 0x00000320, 0x00000321, 0x00003210, 0x00000004, 0x00000040,
	0x00000041, 0x00000410, 0x00000042, 0x00000420, 0x00000421, 0x00004210,
	0x00000043, 0x00000430, 0x00000431, 0x00004310, 0x00000432, 0x00004320,
	0x00004321, 0x00043210, 0x00000005, 0x00000050, 0x00000051, 0x00000510,
	0x00000052, 0x00000520, 0x00000521, 0x00005210, 0x00000053, 0x00000530,
	0x00000531, 0x00005310, 0x00000532, 0x00005320, 0x00005321, 0x00053210,
	0x00000054, 0x00000540, 0x00000541, 0x00005410, 0x00000542, 0x00005420,
	0x00005421, 0x00054210, 0x00000543, 0x00005430, 0x00005431, 0x00054310,
	0x00005432, 0x00054320, 0x00054321, 0x00543210, 0x00000006, 0x00000060,
	0x00000061, 0x00000610, 0x00000062, 0x00000620, 0x00000621, 0x00006210,
	0x00000063, 0x00000630, 0x00000631, 0x00006310, 0x00000632, 0x00006320,
	0x00006321, 0x00063210, 0x00000064, 0x00000640, 0x00000641, 0x00006410,
	0x00000642, 0x00006420, 0x00006421, 0x00064210, 0x00000643, 0x00006430,
	0x00006431, 0x00064310, 0x00006432, 0x00064320, 0x00064321, 0x00643210,
	0x00000065, 0x00000650, 0x00000651, 0x00006510, 0x00000652, 0x00006520,
	0x00006521, 0x00065210, 0x00000653, 0x00006530, 0x00006531, 0x00065310,
	0x00006532, 0x00065320, 0x00065321, 0x00653210, 0x00000654, 0x00006540,
	0x00006541, 0x00065410, 0x00006542, 0x00065420, 0x00065421, 0x00654210,
	0x00006543, 0x00065430, 0x00065431, 0x00654310, 0x00065432, 0x00654320,
	0x00654321, 0x06543210, 0x00000007, 0x00000070, 0x00000071, 0x00000710,
	0x00000072, 0x00000720, 0x00000721, 0x00007210, 0x00000073, 0x00000730,
	0x00000731, 0x00007310, 0x00000732, 0x00007320, 0x00007321, 0x00073210,
	0x00000074, 0x00000740, 0x00000741, 0x00007410, 0x00000742, 0x00007420,
	0x00007421, 0x00074210, 0x00000743, 0x00007430, 0x00007431, 0x00074310,
	0x00007432, 0x00074320, 0x00074321, 0x00743210, 0x00000075, 0x00000750,
	0x00000751, 0x00007510, 0x00000752, 0x00007520, 0x00007521, 0x00075210,
	0x00000753, 0x00007530, 0x00007531, 0x00075310, 0x00007532, 0x00075320,
	0x00075321, 0x00753210, 0x00000754, 0x00007540, 0x00007541, 0x00075410,
	0x00007542, 0x00075420, 0x00075421, 0x00754210, 0x00007543, 0x00075430,
	0x00075431, 0x00754310, 0x00075432, 0x00754320, 0x00754321, 0x07543210,
	0x00000076, 0x00000760, 0x00000761, 0x00007610, 0x00000762, 0x00007620,
	0x00007621, 0x00076210, 0x00000763, 0x00007630, 0x00007631, 0x00076310,
	0x00007632, 0x00076320, 0x00076321, 0x00763210, 0x00000764, 0x00007640,
	0x00007641, 0x00076410, 0x00007642, 0x00076420, 0x00076421, 0x00764210,
	0x00007643, 0x00076430, 0x00076431, 0x00764310, 0x00076432, 0x00764320,
	0x00764321, 0x07643210, 0x00000765, 0x00007650, 0x00007651, 0x00076510,
	0x00007652, 0x00076520, 0x00076521, 0x00765210, 0x00007653, 0x00076530,
	0x00076531, 0x00765310, 0x00076532, 0x00765320, 0x00765321, 0x07653210,
	0x00007654, 0x00076540, 0x00076541, 0x00765410, 0x00076542, 0x00765420,
	0x00765421, 0x07654210, 0x00076543, 0x00765430, 0x00765431, 0x07654310,
	0x00765432, 0x07654320, 0x07654321, 0x76543210,
};
/* clang-format on */

/* Lists the hits (bit b: index i + b) from the m-th on; returns the new
 * count. */
static inline uint64_t
list8(uint8_t *idx, uint8_t *val, uint64_t k, uint64_t m, uint64_t i,
    unsigned hit)
{
	uint8_t *at = kern_topk_slots(idx, val, k, m, 8);

	if (at != NULL) {
		const __m256i nib = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24,
		    28);
		__m256i pos =
		    _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(
							   (int)lanes_of[hit]),
					 nib),
			_mm256_set1_epi32(7));

		_mm256_storeu_si256((__m256i *)(void *)at,
		    _mm256_add_epi32(_mm256_set1_epi32((int)i), pos));
		return m + (uint64_t)__builtin_popcount(hit);
	}
	for (; hit != 0; hit &= hit - 1)
		m = kern_topk_put(idx, val, k, m,
		    (uint32_t)(i + (unsigned)__builtin_ctz(hit)));
	return m;
}

/* res + g with res as the first operand, as the scalar code: when both
 * are NaN the sum is the first operand's NaN, and a compiler may swap the
 * operands of an add intrinsic (to fold a load), so the order is pinned. */
static inline __m256
add_res_g(__m256 res, __m256 g)
{
	__m256 r;

	__asm__("vaddps %2, %1, %0" : "=x"(r) : "x"(res), "xm"(g));
	return r;
}

/* The hits of r's 8 keys (the live lanes only) against L - 1. The key is
 * not clamped at NaN's: the threshold is a key, at most NaN's, so an
 * unclamped NaN (above it) reaches it as the clamped one does. */
static inline __m256i
hits8(__m256 r, __m256i below, __m256i live)
{
	const __m256i abs = _mm256_set1_epi32(0x7fffffff);
	__m256i key = _mm256_and_si256(_mm256_castps_si256(r), abs);

	return _mm256_and_si256(live, _mm256_cmpgt_epi32(key, below));
}

/* The listing pass over res, adding g first and storing the sums to out
 * when add is set (out is res then, or unused): 32 values a
 * turn, their four hit masks packed into one 32-bit mask (bit b: value
 * i + b), so that a turn without hits (most of them) costs one test. */
static inline __attribute__((always_inline)) uint64_t
list_pass(const float *g, const float *res, float *out, uint64_t n, uint32_t L,
    uint8_t *idx, uint8_t *val, uint64_t k, int add)
{
	const __m256i below = _mm256_set1_epi32((int)(L - 1));
	const __m256i all = _mm256_set1_epi32(-1);
	const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
	uint64_t i = 0, m = 0;

	for (; i + 32 <= n; i += 32) {
		__m256 r0 = _mm256_loadu_ps(res + i);
		__m256 r1 = _mm256_loadu_ps(res + i + 8);
		__m256 r2 = _mm256_loadu_ps(res + i + 16);
		__m256 r3 = _mm256_loadu_ps(res + i + 24);
		__m256i c01, c23;
		uint32_t hit;

		if (add) {
			r0 = add_res_g(r0, _mm256_loadu_ps(g + i));
			r1 = add_res_g(r1, _mm256_loadu_ps(g + i + 8));
			r2 = add_res_g(r2, _mm256_loadu_ps(g + i + 16));
			r3 = add_res_g(r3, _mm256_loadu_ps(g + i + 24));
			_mm256_storeu_ps(out + i, r0);
			_mm256_storeu_ps(out + i + 8, r1);
			_mm256_storeu_ps(out + i + 16, r2);
			_mm256_storeu_ps(out + i + 24, r3);
		}
		/* Packing interleaves the four vectors' 4-lane halves;
		 * `order` puts them back in index order. */
		c01 = _mm256_packs_epi32(hits8(r0, below, all),
		    hits8(r1, below, all));
		c23 = _mm256_packs_epi32(hits8(r2, below, all),
		    hits8(r3, below, all));
		hit = (uint32_t)_mm256_movemask_epi8(
		    _mm256_permutevar8x32_epi32(_mm256_packs_epi16(c01, c23),
			order));
		if (hit == 0)
			continue;
		for (unsigned v = 0; v < 4; v++) {
			unsigned h8 = (hit >> (8 * v)) & 0xffu;

			if (h8 != 0)
				m = list8(idx, val, k, m, i + 8 * v, h8);
		}
	}
	for (; i < n; i += 8) {
		__m256i live = _mm256_cmpgt_epi32(_mm256_set1_epi32(
						      (int)(n - i < 8 ? n - i
								      : 8)),
		    _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
		__m256 r = _mm256_maskload_ps(res + i, live);
		unsigned hit;

		if (add) {
			r = add_res_g(r, _mm256_maskload_ps(g + i, live));
			_mm256_maskstore_ps(out + i, live, r);
		}
		hit = (unsigned)_mm256_movemask_ps(
		    _mm256_castsi256_ps(hits8(r, below, live)));
		if (hit != 0)
			m = list8(idx, val, k, m, i, hit);
	}
	return m;
}

uint64_t
kern_topk_list_avx2(const float *g, float *res, uint64_t n, uint32_t L,
    uint8_t *idx, uint8_t *val, uint64_t k)
{
	return list_pass(g, res, res, n, L, idx, val, k, 1);
}

uint64_t
kern_topk_relist_avx2(const float *res, uint64_t n, uint32_t L, uint8_t *idx,
    uint8_t *val, uint64_t k)
{
	return list_pass(NULL, res, NULL, n, L, idx, val, k, 0);
}

/* Eight sampled values a turn, gathered: their indices from base are
 * 0, stride, ..., 7 stride, which fit in 32 bits (stride <= 2^32 /
 * KERN_TOPK_SAMPLE). The sum res + g and the key as key_of's; both
 * gathers of a turn are issued before either is used, so that the far
 * apart values of a large tensor are fetched together. */
void
kern_topk_sample_avx2(const float *g, const float *res, uint64_t n,
    uint32_t *sample)
{
	const __m256i abs = _mm256_set1_epi32(0x7fffffff);
	const __m256i knan = _mm256_set1_epi32(0x7f800001);
	uint64_t stride = n / KERN_TOPK_SAMPLE;
	__m256i at = _mm256_mullo_epi32(_mm256_set1_epi32((int)stride),
	    _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));

	for (uint64_t s = 0; s < KERN_TOPK_SAMPLE; s += 8) {
		__m256 vr = _mm256_i32gather_ps(res + s * stride, at, 4);
		__m256 vg = _mm256_i32gather_ps(g + s * stride, at, 4);
		__m256i key = _mm256_and_si256(_mm256_castps_si256(
						   add_res_g(vr, vg)),
		    abs);

		_mm256_storeu_si256((__m256i *)(void *)(sample + s),
		    _mm256_min_epu32(key, knan));
	}
}
