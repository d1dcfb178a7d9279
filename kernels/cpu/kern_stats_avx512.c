/* kern_stats_avx512 - the AVX-512 range function of the CPU backend
 * (kern_stats.h).
 *
 * Compiled with -mavx512f -mavx512bw -mavx512vl -mavx512dq and called only
 * on processors that have them. Sixteen floats per vector: the magnitude
 * is the value's bits with the sign cleared, and finite means those bits
 * are at most FLT_MAX's, so classification, the zero count and the maximum
 * are integer operations (exact, and indifferent to subnormals); the sums
 * widen to double, eight lanes at a time, into four pairs of vectors of
 * plain sums that are folded into compensated vectors after every chunk
 * of KERN_LANE_TERMS terms per lane.
 *
 * The loop is bound by the two vector ports, not by memory, up to a few
 * MiB, so the common case does no more than it must: a chunk is first run
 * as if every element were finite (no masking of the sums, no count of
 * finite elements), and the chunk's maximum magnitude tells afterwards
 * whether it held a NaN or an infinity; only then are its statistics
 * recomputed with masks, from data still in L1. The accumulator and the
 * momentum are always updated under the finite mask, so a skipped element
 * keeps its exact bits (a -0.0 stays -0.0). The tail is the same step
 * under a load mask: no scalar loop, and no read past the end.
 */
#include <immintrin.h>

#include "../element.h"
#include "kern_stats.h"

#define V        16                        /* floats per vector */
#define CHUNK    (KERN_LANE_TERMS * 2 * V) /* elements between two folds */
#define PREFETCH 2048 /* bytes ahead, see avx512_prefetch */

/* Running plain sums and counts of one chunk, in registers once inlined.
 * Two of everything, one per vector of an unrolled pair, so that no
 * register depends on the other vector's. */
typedef struct avx512_sums {
	__m512d sq[4];   /* squares: low and high halves of the two vectors */
	__m512d ab[4];   /* magnitudes, likewise */
	__m512i fin[2];  /* finite elements per lane (masked path only) */
	__m512i zero[2]; /* zeros per lane */
	__m512i max[2];  /* largest magnitude bits per lane */
} avx512_sums;

/* The arrays of one call, out of the job so that stores through acc
 * cannot be taken to change them. */
typedef struct avx512_arrays {
	const void *grad; /* the gradient */
	float *acc;       /* accumulator, or NULL */
	float *m;         /* momentum, or NULL */
	__m512 beta;      /* beta in every lane */
	__m512 omb;       /* 1 - beta in every lane */
} avx512_arrays;

static inline __attribute__((always_inline)) __m512
avx512_load(const void *grad, uint64_t i, int dtype, __mmask16 k, int masked)
{
	__m256i h;

	if (dtype == KERN_F32)
		return masked
		    ? _mm512_maskz_loadu_ps(k, (const float *)grad + i)
		    : _mm512_loadu_ps((const float *)grad + i);
	h = masked
	    ? _mm256_maskz_loadu_epi16(k, (const uint16_t *)grad + i)
	    : _mm256_loadu_si256((const __m256i *)((const uint16_t *)grad + i));
	if (dtype == KERN_F16)
		return _mm512_cvtph_ps(h);
	return _mm512_castsi512_ps(
	    _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

static inline __attribute__((always_inline)) void
avx512_sums_zero(avx512_sums *s)
{
	for (int j = 0; j < 4; j++) {
		s->sq[j] = _mm512_setzero_pd();
		s->ab[j] = _mm512_setzero_pd();
	}
	for (int j = 0; j < 2; j++) {
		s->fin[j] = _mm512_setzero_si512();
		s->zero[j] = _mm512_setzero_si512();
		s->max[j] = _mm512_setzero_si512();
	}
}

/* Adds the magnitudes a (sign-cleared bits, 0 where excluded) to the sums
 * of vector h of the pair. */
static inline __attribute__((always_inline)) void
avx512_sum(avx512_sums *s, int h, __m512i a)
{
	__m512d lo = _mm512_cvtps_pd(
	    _mm256_castsi256_ps(_mm512_castsi512_si256(a)));
	__m512d hi = _mm512_cvtps_pd(
	    _mm256_castsi256_ps(_mm512_extracti64x4_epi64(a, 1)));

	s->max[h] = _mm512_max_epu32(s->max[h], a);
	s->ab[2 * h] = _mm512_add_pd(s->ab[2 * h], lo);
	s->ab[2 * h + 1] = _mm512_add_pd(s->ab[2 * h + 1], hi);
	/* The products are exact, so fusing changes nothing. */
	s->sq[2 * h] = _mm512_fmadd_pd(lo, lo, s->sq[2 * h]);
	s->sq[2 * h + 1] = _mm512_fmadd_pd(hi, hi, s->sq[2 * h + 1]);
}

/* The accumulator and momentum updates of lanes `fin` of elements i.. (k:
 * the lanes that exist). */
static inline __attribute__((always_inline)) void
avx512_update(const avx512_arrays *x, uint64_t i, __m512 g, __mmask16 fin,
    __mmask16 k, int masked, int has_acc, int has_m)
{
	if (has_acc) {
		float *p = x->acc + i;
		__m512 v = masked ? _mm512_maskz_loadu_ps(k, p)
				  : _mm512_loadu_ps(p);

		v = _mm512_mask_add_ps(v, fin, v, g);
		if (masked)
			_mm512_mask_storeu_ps(p, k, v);
		else
			_mm512_storeu_ps(p, v);
	}
	if (has_m) {
		float *p = x->m + i;
		__m512 v = masked ? _mm512_maskz_loadu_ps(k, p)
				  : _mm512_loadu_ps(p);
		__m512 bm = _mm512_mul_ps(x->beta, v);
		__m512 cg = _mm512_mul_ps(x->omb, g);

		v = _mm512_mask_add_ps(v, fin, bm, cg);
		if (masked)
			_mm512_mask_storeu_ps(p, k, v);
		else
			_mm512_storeu_ps(p, v);
	}
}

/* The fast step: elements i..i+15 all exist and the sums take every lane
 * (a non-finite one spoils only this chunk's sums, recomputed later). */
static inline __attribute__((always_inline)) void
avx512_step_fast(const avx512_arrays *x, uint64_t i, int dtype, int has_acc,
    int has_m, avx512_sums *s, int h)
{
	const __m512i abs_mask = _mm512_set1_epi32((int)KERN_ABS_MASK);
	__m512 g = avx512_load(x->grad, i, dtype, 0xffff, 0);
	__m512i a = _mm512_and_si512(_mm512_castps_si512(g), abs_mask);
	__mmask16 zer = _mm512_testn_epi32_mask(a, a);

	s->zero[h] = _mm512_mask_add_epi32(s->zero[h], zer, s->zero[h],
	    _mm512_set1_epi32(1));
	avx512_sum(s, h, a);
	if (has_acc || has_m) {
		__mmask16 fin = _mm512_cmple_epu32_mask(a,
		    _mm512_set1_epi32((int)KERN_MAX_FINITE));

		avx512_update(x, i, g, fin, 0xffff, 0, has_acc, has_m);
	}
}

/* The masked step: lanes outside k do not exist, non-finite lanes are
 * counted and excluded; updates only if `update`. */
static inline __attribute__((always_inline)) void
avx512_step_masked(const avx512_arrays *x, uint64_t i, __mmask16 k, int dtype,
    int update, int has_acc, int has_m, avx512_sums *s)
{
	const __m512i one = _mm512_set1_epi32(1);
	__m512 g = avx512_load(x->grad, i, dtype, k, 1);
	__m512i bits = _mm512_and_si512(_mm512_castps_si512(g),
	    _mm512_set1_epi32((int)KERN_ABS_MASK));
	__mmask16 fin = _mm512_mask_cmple_epu32_mask(k, bits,
	    _mm512_set1_epi32((int)KERN_MAX_FINITE));
	__mmask16 zer = _mm512_mask_testn_epi32_mask(k, bits, bits);

	s->fin[0] = _mm512_mask_add_epi32(s->fin[0], fin, s->fin[0], one);
	s->zero[0] = _mm512_mask_add_epi32(s->zero[0], zer, s->zero[0], one);
	avx512_sum(s, 0, _mm512_maskz_mov_epi32(fin, bits));
	if (update)
		avx512_update(x, i, g, fin, k, 1, has_acc, has_m);
}

/* *S + *C += x, per lane (two-sum). */
static inline __attribute__((always_inline)) void
avx512_fold(__m512d *S, __m512d *C, __m512d x)
{
	__m512d s = _mm512_add_pd(*S, x);
	__m512d bp = _mm512_sub_pd(s, *S);
	__m512d err = _mm512_add_pd(_mm512_sub_pd(*S, _mm512_sub_pd(s, bp)),
	    _mm512_sub_pd(x, bp));

	*S = s;
	*C = _mm512_add_pd(*C, err);
}

static inline __attribute__((always_inline)) void
avx512_lanes_into(double *hi, double *lo, __m512d S, __m512d C)
{
	double s[8];
	double c[8];

	_mm512_storeu_pd(s, S);
	_mm512_storeu_pd(c, C);
	for (int j = 0; j < 8; j++) {
		kern_two_sum(hi, lo, s[j]);
		*lo += c[j];
	}
}

/* Prefetches the lines the fast loop will touch PREFETCH bytes ahead:
 * from DRAM, the hardware prefetchers alone leave a single core at about
 * 8 GB/s of reads here, 10-11 with this (4, 8 KiB ahead: worse). A
 * prefetch past the end of an array is harmless. */
static inline __attribute__((always_inline)) void
avx512_prefetch(const avx512_arrays *x, uint64_t i, int dtype, int has_acc,
    int has_m)
{
	const char *g = (const char *)x->grad +
	    i * (dtype == KERN_F32 ? 4 : 2) + PREFETCH;

	_mm_prefetch(g, _MM_HINT_T0);
	if (dtype == KERN_F32)
		_mm_prefetch(g + 64, _MM_HINT_T0);
	if (has_acc) {
		_mm_prefetch((const char *)(x->acc + i) + PREFETCH,
		    _MM_HINT_T0);
		_mm_prefetch((const char *)(x->acc + i) + PREFETCH + 64,
		    _MM_HINT_T0);
	}
	if (has_m) {
		_mm_prefetch((const char *)(x->m + i) + PREFETCH, _MM_HINT_T0);
		_mm_prefetch((const char *)(x->m + i) + PREFETCH + 64,
		    _MM_HINT_T0);
	}
}

/* The fast pass over [i, end), a multiple of 2 V, into *out (zeroed by
 * the caller). */
typedef void avx512_fast_fn(const avx512_arrays *x, uint64_t i, uint64_t end,
    avx512_sums *out);

/* One fast pass per dtype and update set. Not inlined: the loop's
 * registers then start and end in it, which spares the copies the
 * compiler otherwise makes to keep the sums live for the masked path. */
#define AVX512_FAST(name, dtype, has_acc, has_m)                               \
	static __attribute__((noinline)) void name(const avx512_arrays *x,     \
	    uint64_t i, uint64_t end, avx512_sums *out)                        \
	{                                                                      \
		const avx512_arrays a = *x; /* stores cannot reach it */       \
		avx512_sums s = *out;                                          \
                                                                               \
		for (; i < end; i += 2 * V) {                                  \
			avx512_prefetch(&a, i, dtype, has_acc, has_m);         \
			avx512_step_fast(&a, i, dtype, has_acc, has_m, &s, 0); \
			avx512_step_fast(&a, i + V, dtype, has_acc, has_m, &s, \
			    1);                                                \
		}                                                              \
		*out = s;                                                      \
	}

AVX512_FAST(avx512_fast_f32, KERN_F32, 0, 0)
AVX512_FAST(avx512_fast_f32_m, KERN_F32, 0, 1)
AVX512_FAST(avx512_fast_f32_a, KERN_F32, 1, 0)
AVX512_FAST(avx512_fast_f32_am, KERN_F32, 1, 1)
AVX512_FAST(avx512_fast_f16, KERN_F16, 0, 0)
AVX512_FAST(avx512_fast_f16_m, KERN_F16, 0, 1)
AVX512_FAST(avx512_fast_f16_a, KERN_F16, 1, 0)
AVX512_FAST(avx512_fast_f16_am, KERN_F16, 1, 1)
AVX512_FAST(avx512_fast_bf16, KERN_BF16, 0, 0)
AVX512_FAST(avx512_fast_bf16_m, KERN_BF16, 0, 1)
AVX512_FAST(avx512_fast_bf16_a, KERN_BF16, 1, 0)
AVX512_FAST(avx512_fast_bf16_am, KERN_BF16, 1, 1)

/* Statistics of elements [i, stop) with masks, no updates: a chunk whose
 * fast pass met a NaN or an infinity. */
static inline __attribute__((always_inline)) void
avx512_chunk_masked(const avx512_arrays *x, uint64_t i, uint64_t stop,
    int dtype, avx512_sums *s)
{
	while (i < stop) {
		uint64_t left = stop - i < V ? stop - i : V;

		avx512_step_masked(x, i, (__mmask16)((1u << left) - 1), dtype,
		    0, 0, 0, s);
		i += left;
	}
}

static inline __attribute__((always_inline)) void
avx512_range(const kern_job *job, uint64_t begin, uint64_t end, kern_stats *st,
    int dtype, int has_acc, int has_m, avx512_fast_fn *fast)
{
	const avx512_arrays x = {
		.grad = job->grad,
		.acc = job->acc,
		.m = job->momentum,
		.beta = _mm512_set1_ps(job->beta),
		.omb = _mm512_set1_ps(1.0f - job->beta),
	};
	const __m512i max_finite = _mm512_set1_epi32((int)KERN_MAX_FINITE);
	__m512d S_sq = _mm512_setzero_pd();
	__m512d C_sq = _mm512_setzero_pd();
	__m512d S_ab = _mm512_setzero_pd();
	__m512d C_ab = _mm512_setzero_pd();
	__m512i vmax = _mm512_setzero_si512();
	uint64_t nonfinite = 0;
	uint64_t zeros = 0;
	uint64_t i = begin;
	uint32_t max_bits;

	while (i < end) {
		uint64_t first = i;
		uint64_t stop = end - i > CHUNK ? i + CHUNK : end;
		uint64_t fast_end = i + (stop - i) / (2 * V) * (2 * V);
		avx512_sums s;
		__m512i cmax;

		avx512_sums_zero(&s);
		fast(&x, i, fast_end, &s);
		i = fast_end;
		cmax = _mm512_max_epu32(s.max[0], s.max[1]);
		if (_mm512_cmpgt_epu32_mask(cmax, max_finite) != 0) {
			avx512_sums_zero(&s);
			avx512_chunk_masked(&x, first, fast_end, dtype, &s);
			nonfinite += (fast_end - first) -
			    (uint32_t)_mm512_reduce_add_epi32(s.fin[0]);
			s.fin[0] = _mm512_setzero_si512();
		}
		/* The rest of a short chunk, masked and updating. */
		while (i < stop) {
			uint64_t left = stop - i < V ? stop - i : V;

			avx512_step_masked(&x, i, (__mmask16)((1u << left) - 1),
			    dtype, 1, has_acc, has_m, &s);
			nonfinite += left;
			i += left;
		}
		nonfinite -= (uint32_t)_mm512_reduce_add_epi32(s.fin[0]);
		vmax = _mm512_max_epu32(vmax,
		    _mm512_max_epu32(s.max[0], s.max[1]));
		avx512_fold(&S_sq, &C_sq,
		    _mm512_add_pd(_mm512_add_pd(s.sq[0], s.sq[1]),
			_mm512_add_pd(s.sq[2], s.sq[3])));
		avx512_fold(&S_ab, &C_ab,
		    _mm512_add_pd(_mm512_add_pd(s.ab[0], s.ab[1]),
			_mm512_add_pd(s.ab[2], s.ab[3])));
		zeros += (uint32_t)_mm512_reduce_add_epi32(
		    _mm512_add_epi32(s.zero[0], s.zero[1]));
	}
	avx512_lanes_into(&st->sum_sq, &st->sum_sq_lo, S_sq, C_sq);
	avx512_lanes_into(&st->abs_sum, &st->abs_sum_lo, S_ab, C_ab);
	st->count += end - begin;
	st->zeros += zeros;
	st->nonfinite += nonfinite;
	max_bits = (uint32_t)_mm512_reduce_max_epu32(vmax);
	if ((double)kern_f32_from_bits(max_bits) > st->max_abs)
		st->max_abs = (double)kern_f32_from_bits(max_bits);
}

#define AVX512_CASE(dtype, acc, m, fast)                                       \
	case (dtype)*4 + (acc)*2 + (m):                                        \
		avx512_range(job, begin, end, st, (dtype), (acc), (m), fast);  \
		break

void
kern_cpu_range_avx512(const kern_job *job, uint64_t begin, uint64_t end,
    kern_stats *st)
{
	/* One specialised loop per dtype and update set. */
	switch (
	    job->dtype * 4 + (job->acc != NULL) * 2 + (job->momentum != NULL)) {
		AVX512_CASE(KERN_F32, 0, 0, avx512_fast_f32);
		AVX512_CASE(KERN_F32, 0, 1, avx512_fast_f32_m);
		AVX512_CASE(KERN_F32, 1, 0, avx512_fast_f32_a);
		AVX512_CASE(KERN_F32, 1, 1, avx512_fast_f32_am);
		AVX512_CASE(KERN_F16, 0, 0, avx512_fast_f16);
		AVX512_CASE(KERN_F16, 0, 1, avx512_fast_f16_m);
		AVX512_CASE(KERN_F16, 1, 0, avx512_fast_f16_a);
		AVX512_CASE(KERN_F16, 1, 1, avx512_fast_f16_am);
		AVX512_CASE(KERN_BF16, 0, 0, avx512_fast_bf16);
		AVX512_CASE(KERN_BF16, 0, 1, avx512_fast_bf16_m);
		AVX512_CASE(KERN_BF16, 1, 0, avx512_fast_bf16_a);
		AVX512_CASE(KERN_BF16, 1, 1, avx512_fast_bf16_am);
	default:
		break;
	}
}

/* The relaxed path (KERN_PRECISION_RELAXED, element.h): blocks of
 * R_BLOCK elements, four vectors per step and KERN_RELAXED_TERMS steps,
 * so every lane of each of the four float sums adds 16 terms. A block
 * whose largest magnitude kern_relaxed_ok refuses (a NaN or infinity
 * included) has its statistics recomputed the exact way from L1; its
 * updates were made under the finite mask already. The tail of a range
 * shorter than a block runs the exact path. */
#define R_UNROLL 4
#define R_BLOCK  (KERN_RELAXED_TERMS * R_UNROLL * V)

/* One block's float sums and integer counts. */
typedef struct avx512_rsums {
	__m512 sq[R_UNROLL]; /* squares, one sum per vector of a step */
	__m512 ab[R_UNROLL]; /* magnitudes, likewise */
	__m512i zero[2];     /* zeros per lane */
	__m512i max[2];      /* largest magnitude bits per lane (any) */
} avx512_rsums;

/* One block of R_BLOCK elements from i into *out. */
typedef void avx512_rblock_fn(const avx512_arrays *x, uint64_t i,
    avx512_rsums *out);

static inline __attribute__((always_inline)) void
avx512_rstep(const avx512_arrays *x, uint64_t i, int dtype, int has_acc,
    int has_m, avx512_rsums *s, int h)
{
	const __m512i abs_mask = _mm512_set1_epi32((int)KERN_ABS_MASK);
	__m512 g = avx512_load(x->grad, i, dtype, 0xffff, 0);
	__m512i a = _mm512_and_si512(_mm512_castps_si512(g), abs_mask);
	__mmask16 zer = _mm512_testn_epi32_mask(a, a);

	s->zero[h & 1] = _mm512_mask_add_epi32(s->zero[h & 1], zer,
	    s->zero[h & 1], _mm512_set1_epi32(1));
	s->max[h & 1] = _mm512_max_epu32(s->max[h & 1], a);
	s->sq[h] = _mm512_fmadd_ps(g, g, s->sq[h]);
	s->ab[h] = _mm512_add_ps(s->ab[h], _mm512_castsi512_ps(a));
	if (has_acc || has_m) {
		__mmask16 fin = _mm512_cmple_epu32_mask(a,
		    _mm512_set1_epi32((int)KERN_MAX_FINITE));

		avx512_update(x, i, g, fin, 0xffff, 0, has_acc, has_m);
	}
}

/* Written out, not looped: the compiler then keeps every sum in a
 * register. */
#define AVX512_RBLOCK(name, dtype, has_acc, has_m)                             \
	static __attribute__((noinline)) void name(const avx512_arrays *x,     \
	    uint64_t i, avx512_rsums *out)                                     \
	{                                                                      \
		const avx512_arrays a = *x;                                    \
		avx512_rsums s;                                                \
                                                                               \
		s.sq[0] = s.sq[1] = s.sq[2] = s.sq[3] = _mm512_setzero_ps();   \
		s.ab[0] = s.ab[1] = s.ab[2] = s.ab[3] = _mm512_setzero_ps();   \
		s.zero[0] = s.zero[1] = _mm512_setzero_si512();                \
		s.max[0] = s.max[1] = _mm512_setzero_si512();                  \
		for (int t = 0; t < KERN_RELAXED_TERMS;                        \
		     t++, i += R_UNROLL * V) {                                 \
			avx512_prefetch(&a, i, dtype, has_acc, has_m);         \
			if ((dtype) == KERN_F32)                               \
				avx512_prefetch(&a, i + 2 * V, dtype, has_acc, \
				    has_m);                                    \
			avx512_rstep(&a, i, dtype, has_acc, has_m, &s, 0);     \
			avx512_rstep(&a, i + V, dtype, has_acc, has_m, &s, 1); \
			avx512_rstep(&a, i + 2 * V, dtype, has_acc, has_m, &s, \
			    2);                                                \
			avx512_rstep(&a, i + 3 * V, dtype, has_acc, has_m, &s, \
			    3);                                                \
		}                                                              \
		*out = s;                                                      \
	}

AVX512_RBLOCK(avx512_rblock_f32, KERN_F32, 0, 0)
AVX512_RBLOCK(avx512_rblock_f32_m, KERN_F32, 0, 1)
AVX512_RBLOCK(avx512_rblock_f32_a, KERN_F32, 1, 0)
AVX512_RBLOCK(avx512_rblock_f32_am, KERN_F32, 1, 1)
AVX512_RBLOCK(avx512_rblock_f16, KERN_F16, 0, 0)
AVX512_RBLOCK(avx512_rblock_f16_m, KERN_F16, 0, 1)
AVX512_RBLOCK(avx512_rblock_f16_a, KERN_F16, 1, 0)
AVX512_RBLOCK(avx512_rblock_f16_am, KERN_F16, 1, 1)
AVX512_RBLOCK(avx512_rblock_bf16, KERN_BF16, 0, 0)
AVX512_RBLOCK(avx512_rblock_bf16_m, KERN_BF16, 0, 1)
AVX512_RBLOCK(avx512_rblock_bf16_a, KERN_BF16, 1, 0)
AVX512_RBLOCK(avx512_rblock_bf16_am, KERN_BF16, 1, 1)

/* The exact sum, in double, of the lanes of the float vectors v[0..3]. */
static inline __attribute__((always_inline)) __m512d
avx512_widen_sum(const __m512 *v)
{
	__m512d d = _mm512_setzero_pd();

	for (int j = 0; j < R_UNROLL; j++) {
		d = _mm512_add_pd(d,
		    _mm512_cvtps_pd(_mm512_castps512_ps256(v[j])));
		d = _mm512_add_pd(d,
		    _mm512_cvtps_pd(_mm256_castpd_ps(
			_mm512_extractf64x4_pd(_mm512_castps_pd(v[j]), 1))));
	}
	return d;
}

static inline __attribute__((always_inline)) void
avx512_range_relaxed(const kern_job *job, uint64_t begin, uint64_t end,
    kern_stats *st, int dtype, int has_acc, int has_m, avx512_rblock_fn *block,
    avx512_fast_fn *fast)
{
	const avx512_arrays x = {
		.grad = job->grad,
		.acc = job->acc,
		.m = job->momentum,
		.beta = _mm512_set1_ps(job->beta),
		.omb = _mm512_set1_ps(1.0f - job->beta),
	};
	uint64_t blocks_end = begin + (end - begin) / R_BLOCK * R_BLOCK;
	__m512d S_sq = _mm512_setzero_pd();
	__m512d C_sq = _mm512_setzero_pd();
	__m512d S_ab = _mm512_setzero_pd();
	__m512d C_ab = _mm512_setzero_pd();
	uint64_t nonfinite = 0;
	uint64_t zeros = 0;
	uint32_t max_bits = 0;

	for (uint64_t i = begin; i < blocks_end; i += R_BLOCK) {
		avx512_rsums r;
		uint32_t bmax;

		block(&x, i, &r);
		bmax = (uint32_t)_mm512_reduce_max_epu32(
		    _mm512_max_epu32(r.max[0], r.max[1]));
		if (kern_relaxed_ok(bmax)) {
			avx512_fold(&S_sq, &C_sq, avx512_widen_sum(r.sq));
			avx512_fold(&S_ab, &C_ab, avx512_widen_sum(r.ab));
			zeros += (uint32_t)_mm512_reduce_add_epi32(
			    _mm512_add_epi32(r.zero[0], r.zero[1]));
			if (bmax > max_bits)
				max_bits = bmax;
		} else {
			avx512_sums s;
			uint32_t m;

			avx512_sums_zero(&s);
			avx512_chunk_masked(&x, i, i + R_BLOCK, dtype, &s);
			nonfinite += R_BLOCK -
			    (uint32_t)_mm512_reduce_add_epi32(s.fin[0]);
			zeros += (uint32_t)_mm512_reduce_add_epi32(
			    _mm512_add_epi32(s.zero[0], s.zero[1]));
			m = (uint32_t)_mm512_reduce_max_epu32(
			    _mm512_max_epu32(s.max[0], s.max[1]));
			if (m > max_bits)
				max_bits = m;
			avx512_fold(&S_sq, &C_sq,
			    _mm512_add_pd(_mm512_add_pd(s.sq[0], s.sq[1]),
				_mm512_add_pd(s.sq[2], s.sq[3])));
			avx512_fold(&S_ab, &C_ab,
			    _mm512_add_pd(_mm512_add_pd(s.ab[0], s.ab[1]),
				_mm512_add_pd(s.ab[2], s.ab[3])));
		}
	}
	avx512_lanes_into(&st->sum_sq, &st->sum_sq_lo, S_sq, C_sq);
	avx512_lanes_into(&st->abs_sum, &st->abs_sum_lo, S_ab, C_ab);
	st->count += blocks_end - begin;
	st->zeros += zeros;
	st->nonfinite += nonfinite;
	if ((double)kern_f32_from_bits(max_bits) > st->max_abs)
		st->max_abs = (double)kern_f32_from_bits(max_bits);
	if (blocks_end < end)
		avx512_range(job, blocks_end, end, st, dtype, has_acc, has_m,
		    fast);
}

#define AVX512_RCASE(dtype, acc, m, block, fast)                               \
	case (dtype)*4 + (acc)*2 + (m):                                        \
		avx512_range_relaxed(job, begin, end, st, (dtype), (acc), (m), \
		    block, fast);                                              \
		break

void
kern_cpu_range_avx512_relaxed(const kern_job *job, uint64_t begin, uint64_t end,
    kern_stats *st)
{
	switch (
	    job->dtype * 4 + (job->acc != NULL) * 2 + (job->momentum != NULL)) {
		AVX512_RCASE(KERN_F32, 0, 0, avx512_rblock_f32,
		    avx512_fast_f32);
		AVX512_RCASE(KERN_F32, 0, 1, avx512_rblock_f32_m,
		    avx512_fast_f32_m);
		AVX512_RCASE(KERN_F32, 1, 0, avx512_rblock_f32_a,
		    avx512_fast_f32_a);
		AVX512_RCASE(KERN_F32, 1, 1, avx512_rblock_f32_am,
		    avx512_fast_f32_am);
		AVX512_RCASE(KERN_F16, 0, 0, avx512_rblock_f16,
		    avx512_fast_f16);
		AVX512_RCASE(KERN_F16, 0, 1, avx512_rblock_f16_m,
		    avx512_fast_f16_m);
		AVX512_RCASE(KERN_F16, 1, 0, avx512_rblock_f16_a,
		    avx512_fast_f16_a);
		AVX512_RCASE(KERN_F16, 1, 1, avx512_rblock_f16_am,
		    avx512_fast_f16_am);
		AVX512_RCASE(KERN_BF16, 0, 0, avx512_rblock_bf16,
		    avx512_fast_bf16);
		AVX512_RCASE(KERN_BF16, 0, 1, avx512_rblock_bf16_m,
		    avx512_fast_bf16_m);
		AVX512_RCASE(KERN_BF16, 1, 0, avx512_rblock_bf16_a,
		    avx512_fast_bf16_a);
		AVX512_RCASE(KERN_BF16, 1, 1, avx512_rblock_bf16_am,
		    avx512_fast_bf16_am);
	default:
		break;
	}
}
