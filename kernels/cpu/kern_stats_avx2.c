/* kern_stats_avx2 - the AVX2 range function of the CPU backend (kern_stats.h).
 *
 * Compiled with -mavx2 -mfma -mf16c -mpopcnt and called only on processors
 * that have them. Eight elements per vector, float16 and bfloat16 widened
 * to float first; the scheme is described at avx2_sums below. The last
 * few elements go through element.h's scalar step.
 */
#include <immintrin.h>

#include "../element.h"
#include "kern_stats.h"

#define V        8                         /* floats per vector */
#define CHUNK    (KERN_LANE_TERMS * 2 * V) /* elements between two folds */
#define PREFETCH 1024 /* bytes ahead, measured best of 512-4096 */

/* The arrays of one call, out of the job so that stores through acc
 * cannot be taken to change them. */
typedef struct avx2_arrays {
	const void *grad; /* the gradient */
	float *acc;       /* accumulator, or NULL */
	float *m;         /* momentum, or NULL */
	float beta;       /* momentum coefficient */
} avx2_arrays;

/* Elements i..i+7 widened to float. */
static inline __attribute__((always_inline)) __m256
avx2_load(const void *grad, uint64_t i, int dtype)
{
	__m128i h;

	if (dtype == KERN_F32)
		return _mm256_loadu_ps((const float *)grad + i);
	h = _mm_loadu_si128((const __m128i *)((const uint16_t *)grad + i));
	if (dtype == KERN_F16)
		return _mm256_cvtph_ps(h);
	return _mm256_castsi256_ps(
	    _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* Elements i..i+3 widened to float. */
static inline __attribute__((always_inline)) __m128
avx2_load4(const void *grad, uint64_t i, int dtype)
{
	__m128i h;

	if (dtype == KERN_F32)
		return _mm_loadu_ps((const float *)grad + i);
	h = _mm_loadl_epi64((const __m128i *)((const uint16_t *)grad + i));
	if (dtype == KERN_F16)
		return _mm_cvtph_ps(h);
	return _mm_castsi128_ps(_mm_slli_epi32(_mm_cvtepu16_epi32(h), 16));
}

static inline __attribute__((always_inline)) __m256i
avx2_finite(__m256i a)
{
	return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)KERN_MAX_FINITE + 1),
	    a);
}

/* beta m + (1 - beta) g, each product rounded, then the sum: element.h's
 * kern_momentum eight at a time. */
static inline __attribute__((always_inline)) __m256
avx2_momentum(const avx2_arrays *x, __m256 m, __m256 g)
{
	return _mm256_add_ps(_mm256_mul_ps(_mm256_set1_ps(x->beta), m),
	    _mm256_mul_ps(_mm256_set1_ps(1.0f - x->beta), g));
}

/* The updates of elements i..i+7, whose gradient is g, under the finite
 * mask fin (blending rather than adding zero keeps a -0.0 accumulator
 * bit-exact). */
static inline __attribute__((always_inline)) void
avx2_blend_updates(const avx2_arrays *x, uint64_t i, __m256 g, __m256 fin,
    int has_acc, int has_m)
{
	if (has_acc) {
		float *p = x->acc + i;
		__m256 v = _mm256_loadu_ps(p);

		_mm256_storeu_ps(p,
		    _mm256_blendv_ps(v, _mm256_add_ps(v, g), fin));
	}
	if (has_m) {
		float *p = x->m + i;
		__m256 v = _mm256_loadu_ps(p);

		_mm256_storeu_ps(p,
		    _mm256_blendv_ps(v, avx2_momentum(x, v, g), fin));
	}
}

/* *S + *C += x, per lane (two-sum). */
static inline __attribute__((always_inline)) void
avx2_fold(__m256d *S, __m256d *C, __m256d x)
{
	__m256d s = _mm256_add_pd(*S, x);
	__m256d bp = _mm256_sub_pd(s, *S);
	__m256d err = _mm256_add_pd(_mm256_sub_pd(*S, _mm256_sub_pd(s, bp)),
	    _mm256_sub_pd(x, bp));

	*S = s;
	*C = _mm256_add_pd(*C, err);
}

static inline __attribute__((always_inline)) void
avx2_lanes_into(double *hi, double *lo, __m256d S, __m256d C)
{
	double s[4];
	double c[4];

	_mm256_storeu_pd(s, S);
	_mm256_storeu_pd(c, C);
	for (int j = 0; j < 4; j++) {
		kern_two_sum(hi, lo, s[j]);
		*lo += c[j];
	}
}

/* Minus the sum of the lanes of v (counts kept negative). */
static inline __attribute__((always_inline)) uint32_t
avx2_hsum_neg(__m256i v)
{
	int32_t x[8];
	uint32_t sum = 0;

	_mm256_storeu_si256((__m256i *)x, v);
	for (int j = 0; j < 8; j++)
		sum += (uint32_t)-x[j];
	return sum;
}

static inline __attribute__((always_inline)) uint32_t
avx2_hmax(__m256i v)
{
	uint32_t x[8];
	uint32_t max = 0;

	_mm256_storeu_si256((__m256i *)x, v);
	for (int j = 0; j < 8; j++)
		if (x[j] > max)
			max = x[j];
	return max;
}

/* A range's running totals: the compensated sums per lane, the largest
 * magnitude's bits per lane, the counts. */
typedef struct avx2_totals {
	__m256d S_sq, C_sq; /* squares: sum and compensation per lane */
	__m256d S_ab, C_ab; /* magnitudes, likewise */
	__m256i max;        /* bits of the largest magnitude per lane */
	uint64_t zeros;     /* zeros */
	uint64_t nonfinite; /* NaN or infinite elements */
} avx2_totals;

static inline __attribute__((always_inline)) void
avx2_totals_zero(avx2_totals *t)
{
	t->S_sq = t->C_sq = t->S_ab = t->C_ab = _mm256_setzero_pd();
	t->max = _mm256_setzero_si256();
	t->zeros = 0;
	t->nonfinite = 0;
}

/* Folds a chunk's four plain sums of squares and of magnitudes into *t. */
static inline __attribute__((always_inline)) void
avx2_totals_fold(avx2_totals *t, const __m256d sq[4], const __m256d ab[4])
{
	avx2_fold(&t->S_sq, &t->C_sq,
	    _mm256_add_pd(_mm256_add_pd(sq[0], sq[1]),
		_mm256_add_pd(sq[2], sq[3])));
	avx2_fold(&t->S_ab, &t->C_ab,
	    _mm256_add_pd(_mm256_add_pd(ab[0], ab[1]),
		_mm256_add_pd(ab[2], ab[3])));
}

/* Runs the scalar step over the last elements [i, end) and adds the
 * range [begin, end)'s totals to *st. */
static inline __attribute__((always_inline)) void
avx2_finish(const avx2_arrays *x, const avx2_totals *t, uint64_t begin,
    uint64_t i, uint64_t end, int dtype, int has_acc, int has_m, kern_stats *st)
{
	const float c = 1.0f - x->beta;
	uint32_t max_bits = avx2_hmax(t->max);
	kern_lane tail = { 0 };

	avx2_lanes_into(&st->sum_sq, &st->sum_sq_lo, t->S_sq, t->C_sq);
	avx2_lanes_into(&st->abs_sum, &st->abs_sum_lo, t->S_ab, t->C_ab);
	for (; i < end; i++) {
		float g = kern_load(x->grad, i, dtype);

		if (!kern_lane_add(&tail, g))
			continue;
		if (has_acc)
			x->acc[i] = KERN_FADD(x->acc[i], g);
		if (has_m)
			x->m[i] = kern_momentum(x->m[i], g, x->beta, c);
	}
	kern_two_sum(&st->sum_sq, &st->sum_sq_lo, tail.sum_sq);
	kern_two_sum(&st->abs_sum, &st->abs_sum_lo, tail.abs_sum);
	if (tail.max_bits > max_bits)
		max_bits = tail.max_bits;
	if ((double)kern_f32_from_bits(max_bits) > st->max_abs)
		st->max_abs = (double)kern_f32_from_bits(max_bits);
	st->count += end - begin;
	st->zeros += t->zeros + tail.zeros;
	st->nonfinite += t->nonfinite + tail.nonfinite;
}

/* The scheme.
 *
 * Three choices made it 1.4 times as fast as an earlier one on the AMD
 * EPYC (Zen 3) machine of bench/README.md, which widened every vector's
 * two halves from its register and blended every update:
 *
 * - The high four of the eight values are widened to double from memory
 *   (float32: vcvtps2pd of a 128-bit load; float16 and bfloat16: widened
 *   to float from a 64-bit load, then to double) rather than extracted
 *   from the register that holds them and widened (the low four come
 *   from the register: no extraction is needed): the same arithmetic
 *   ran 1.6 times as fast that way there. The zero count and the maximum
 *   stay on the float's bits (exact, and blind to a denormals-are-zero
 *   mode of the caller's), the zeros counted through a mask and popcnt.
 * - A chunk's plain sums double as its NaN/infinity test: a non-finite
 *   magnitude makes the chunk's sum of magnitudes NaN or infinite, and
 *   nothing else can (2048 finite floats sum to at most 7e41). No compare
 *   or mask is spent per element.
 * - The accumulator and momentum updates of a chunk run one chunk late,
 *   in the loop of the next chunk, once the chunk is known finite: as
 *   plain adds (no blend) of values still in L1, interleaved with the
 *   next chunk's arithmetic, so that the loads and stores of the updates
 *   overlap the sums instead of following them. A chunk with a NaN or an
 *   infinity is recomputed with masks and updated at once, element by
 *   element under its finite mask; the last chunk is updated after the
 *   loop.
 *
 * The updates are the same float operations as element.h's, so their
 * bits are the scalar path's; the sums are per-lane plain sums of
 * KERN_LANE_TERMS terms folded into a compensated pair per chunk. */

/* Plain sums of one chunk. */
typedef struct avx2_sums {
	__m256d sq[4];  /* squares, four independent lanes of four */
	__m256d ab[4];  /* magnitudes, likewise */
	__m256i max;    /* bits of the largest magnitude per lane */
	uint32_t zeros; /* zeros */
} avx2_sums;

static inline __attribute__((always_inline)) void
avx2_sums_zero(avx2_sums *s)
{
	for (int j = 0; j < 4; j++) {
		s->sq[j] = _mm256_setzero_pd();
		s->ab[j] = _mm256_setzero_pd();
	}
	s->max = _mm256_setzero_si256();
	s->zeros = 0;
}

/* How many of the eight magnitudes are zero, counted on the integer side
 * (movemask and popcnt): a vector operation per eight elements fewer
 * than adding the compare's lanes. */
static inline __attribute__((always_inline)) uint32_t
avx2_zeros(__m256i bits)
{
	return (uint32_t)__builtin_popcount(
	    (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(
		_mm256_cmpeq_epi32(bits, _mm256_setzero_si256()))));
}

/* The updates of the finite elements i..i+7. */
static inline __attribute__((always_inline)) void
avx2_update(const avx2_arrays *x, uint64_t i, int dtype, int has_acc, int has_m)
{
	__m256 g = avx2_load(x->grad, i, dtype);

	if (has_acc) {
		float *p = x->acc + i;

		_mm256_storeu_ps(p, _mm256_add_ps(_mm256_loadu_ps(p), g));
	}
	if (has_m) {
		float *p = x->m + i;

		_mm256_storeu_ps(p, avx2_momentum(x, _mm256_loadu_ps(p), g));
	}
}

/* Sums of elements i..i+7 into lanes h of s, as if all were finite; and,
 * when lag is not 0, the updates of elements i-lag..i-lag+7. */
static inline __attribute__((always_inline)) void
avx2_step(const avx2_arrays *x, uint64_t i, int dtype, int has_acc, int has_m,
    uint64_t lag, avx2_sums *s, int h)
{
	const __m256d abs_mask = _mm256_castsi256_pd(
	    _mm256_set1_epi64x(INT64_MAX));
	__m256i bits = _mm256_and_si256(_mm256_castps_si256(
					    avx2_load(x->grad, i, dtype)),
	    _mm256_set1_epi32((int)KERN_ABS_MASK));
	/* The low half from the magnitudes' register (the cast is free), the
	 * high half from memory, signed, its sign cleared in double. */
	__m256d lo = _mm256_cvtps_pd(
	    _mm256_castps256_ps128(_mm256_castsi256_ps(bits)));
	__m256d hi = _mm256_cvtps_pd(avx2_load4(x->grad, i + 4, dtype));

	/* The products are exact, so fusing changes nothing. */
	s->sq[2 * h] = _mm256_fmadd_pd(lo, lo, s->sq[2 * h]);
	s->sq[2 * h + 1] = _mm256_fmadd_pd(hi, hi, s->sq[2 * h + 1]);
	hi = _mm256_and_pd(hi, abs_mask);
	s->ab[2 * h] = _mm256_add_pd(s->ab[2 * h], lo);
	s->ab[2 * h + 1] = _mm256_add_pd(s->ab[2 * h + 1], hi);
	s->max = _mm256_max_epu32(s->max, bits);
	s->zeros += avx2_zeros(bits);
	if (lag != 0)
		avx2_update(x, i - lag, dtype, has_acc, has_m);
}

/* Sums of elements i..i+7 with the non-finite ones counted (in *fin,
 * negated) and left out; no updates. */
static inline __attribute__((always_inline)) void
avx2_step_masked(const avx2_arrays *x, uint64_t i, int dtype, avx2_sums *s,
    __m256i *fin)
{
	__m256i bits = _mm256_and_si256(_mm256_castps_si256(
					    avx2_load(x->grad, i, dtype)),
	    _mm256_set1_epi32((int)KERN_ABS_MASK));
	__m256i ok = avx2_finite(bits);
	__m256i fbits = _mm256_and_si256(bits, ok);
	__m256 a = _mm256_castsi256_ps(fbits);
	__m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(a));
	__m256d hi = _mm256_cvtps_pd(_mm256_extractf128_ps(a, 1));

	*fin = _mm256_add_epi32(*fin, ok);
	s->sq[0] = _mm256_fmadd_pd(lo, lo, s->sq[0]);
	s->sq[1] = _mm256_fmadd_pd(hi, hi, s->sq[1]);
	s->ab[0] = _mm256_add_pd(s->ab[0], lo);
	s->ab[1] = _mm256_add_pd(s->ab[1], hi);
	s->max = _mm256_max_epu32(s->max, fbits);
	s->zeros += avx2_zeros(bits);
}

/* The updates of elements i..i+7 under their finite mask. */
static inline __attribute__((always_inline)) void
avx2_update_masked(const avx2_arrays *x, uint64_t i, int dtype, int has_acc,
    int has_m)
{
	__m256 g = avx2_load(x->grad, i, dtype);

	avx2_blend_updates(x, i, g,
	    _mm256_castsi256_ps(
		avx2_finite(_mm256_and_si256(_mm256_castps_si256(g),
		    _mm256_set1_epi32((int)KERN_ABS_MASK)))),
	    has_acc, has_m);
}

/* Prefetches PREFETCH bytes ahead of what the lagged loop reads at j: the
 * gradient there and the accumulator and momentum a chunk behind. */
static inline __attribute__((always_inline)) void
avx2_prefetch(const avx2_arrays *x, uint64_t j, int dtype, int has_acc,
    int has_m)
{
	_mm_prefetch((const char *)x->grad + j * (dtype == KERN_F32 ? 4 : 2) +
		PREFETCH,
	    _MM_HINT_T0);
	if (has_acc)
		_mm_prefetch((const char *)(x->acc + j - CHUNK) + PREFETCH,
		    _MM_HINT_T0);
	if (has_m)
		_mm_prefetch((const char *)(x->m + j - CHUNK) + PREFETCH,
		    _MM_HINT_T0);
}

/* Non-zero if a chunk's plain sum of magnitudes shows a NaN or an
 * infinity. */
static inline __attribute__((always_inline)) int
avx2_nonfinite(const avx2_sums *s)
{
	__m256d ab = _mm256_add_pd(_mm256_add_pd(s->ab[0], s->ab[1]),
	    _mm256_add_pd(s->ab[2], s->ab[3]));

	return _mm256_movemask_pd(
	    _mm256_cmp_pd(ab, _mm256_set1_pd(__builtin_inf()), _CMP_NLT_UQ));
}

static inline __attribute__((always_inline)) void
avx2_range(const kern_job *job, uint64_t begin, uint64_t end, kern_stats *st,
    int dtype, int has_acc, int has_m)
{
	const avx2_arrays x = {
		.grad = job->grad,
		.acc = job->acc,
		.m = job->momentum,
		.beta = job->beta,
	};
	const int updates = has_acc || has_m;
	avx2_totals t;
	uint64_t pending = 0; /* elements of the chunk before i not updated */
	uint64_t i = begin;

	avx2_totals_zero(&t);
	while (end - i >= 2 * V) {
		uint64_t len = end - i > CHUNK ? CHUNK
					       : (end - i) / (2 * V) * (2 * V);
		avx2_sums s;

		avx2_sums_zero(&s);
		if (pending == CHUNK && len == CHUNK) {
			/* The previous chunk's updates in this one's loop. */
			for (uint64_t j = i; j < i + CHUNK; j += 2 * V) {
				avx2_prefetch(&x, j, dtype, has_acc, has_m);
				avx2_step(&x, j, dtype, has_acc, has_m, CHUNK,
				    &s, 0);
				avx2_step(&x, j + V, dtype, has_acc, has_m,
				    CHUNK, &s, 1);
			}
		} else {
			for (uint64_t j = i - pending; j < i; j += V)
				avx2_update(&x, j, dtype, has_acc, has_m);
			for (uint64_t j = i; j < i + len; j += 2 * V) {
				avx2_step(&x, j, dtype, 0, 0, 0, &s, 0);
				avx2_step(&x, j + V, dtype, 0, 0, 0, &s, 1);
			}
		}
		pending = updates ? len : 0;
		if (avx2_nonfinite(&s)) {
			__m256i fin = _mm256_setzero_si256();

			avx2_sums_zero(&s);
			for (uint64_t j = i; j < i + len; j += V) {
				avx2_step_masked(&x, j, dtype, &s, &fin);
				if (updates)
					avx2_update_masked(&x, j, dtype,
					    has_acc, has_m);
			}
			t.nonfinite += len - avx2_hsum_neg(fin);
			pending = 0;
		}
		t.max = _mm256_max_epu32(t.max, s.max);
		avx2_totals_fold(&t, s.sq, s.ab);
		t.zeros += s.zeros;
		i += len;
	}
	for (uint64_t j = i - pending; j < i; j += V)
		avx2_update(&x, j, dtype, has_acc, has_m);
	/* Fewer than 2 V elements left. */
	avx2_finish(&x, &t, begin, i, end, dtype, has_acc, has_m, st);
}

/* One range function per dtype and update set, not inlined: each is
 * compiled with its loads, widenings and updates fixed. */
#define AVX2_RANGE(name, dtype, has_acc, has_m)                                \
	static __attribute__((noinline)) void name(const kern_job *job,        \
	    uint64_t begin, uint64_t end, kern_stats *st)                      \
	{                                                                      \
		avx2_range(job, begin, end, st, dtype, has_acc, has_m);        \
	}

AVX2_RANGE(avx2_f32, KERN_F32, 0, 0)
AVX2_RANGE(avx2_f32_m, KERN_F32, 0, 1)
AVX2_RANGE(avx2_f32_a, KERN_F32, 1, 0)
AVX2_RANGE(avx2_f32_am, KERN_F32, 1, 1)
AVX2_RANGE(avx2_f16, KERN_F16, 0, 0)
AVX2_RANGE(avx2_f16_m, KERN_F16, 0, 1)
AVX2_RANGE(avx2_f16_a, KERN_F16, 1, 0)
AVX2_RANGE(avx2_f16_am, KERN_F16, 1, 1)
AVX2_RANGE(avx2_bf16, KERN_BF16, 0, 0)
AVX2_RANGE(avx2_bf16_m, KERN_BF16, 0, 1)
AVX2_RANGE(avx2_bf16_a, KERN_BF16, 1, 0)
AVX2_RANGE(avx2_bf16_am, KERN_BF16, 1, 1)

#define AVX2_CASE(dtype, acc, m, fn)                                           \
	case (dtype)*4 + (acc)*2 + (m):                                        \
		fn(job, begin, end, st);                                       \
		break

void
kern_cpu_range_avx2(const kern_job *job, uint64_t begin, uint64_t end,
    kern_stats *st)
{
	switch (
	    job->dtype * 4 + (job->acc != NULL) * 2 + (job->momentum != NULL)) {
		AVX2_CASE(KERN_F32, 0, 0, avx2_f32);
		AVX2_CASE(KERN_F32, 0, 1, avx2_f32_m);
		AVX2_CASE(KERN_F32, 1, 0, avx2_f32_a);
		AVX2_CASE(KERN_F32, 1, 1, avx2_f32_am);
		AVX2_CASE(KERN_F16, 0, 0, avx2_f16);
		AVX2_CASE(KERN_F16, 0, 1, avx2_f16_m);
		AVX2_CASE(KERN_F16, 1, 0, avx2_f16_a);
		AVX2_CASE(KERN_F16, 1, 1, avx2_f16_am);
		AVX2_CASE(KERN_BF16, 0, 0, avx2_bf16);
		AVX2_CASE(KERN_BF16, 0, 1, avx2_bf16_m);
		AVX2_CASE(KERN_BF16, 1, 0, avx2_bf16_a);
		AVX2_CASE(KERN_BF16, 1, 1, avx2_bf16_am);
	default:
		break;
	}
}

/* The relaxed path (KERN_PRECISION_RELAXED, element.h): blocks of
 * R_BLOCK elements, four vectors per step and KERN_RELAXED_TERMS steps,
 * so every lane of each of the four float sums adds 16 terms; updates
 * are blended under the finite mask as they go. A block whose largest
 * magnitude kern_relaxed_ok refuses (a NaN or infinity included) has its
 * statistics recomputed by the exact path without updates, and the tail
 * of a range shorter than a block runs the exact path. */
#define R_UNROLL 4
#define R_BLOCK  (KERN_RELAXED_TERMS * R_UNROLL * V)

/* The exact double sum of the lanes of four float vectors. */
static inline __attribute__((always_inline)) __m256d
avx2_widen_sum(__m256 a, __m256 b, __m256 c, __m256 d)
{
	__m256d s = _mm256_add_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(a)),
	    _mm256_cvtps_pd(_mm256_extractf128_ps(a, 1)));

	s = _mm256_add_pd(s, _mm256_cvtps_pd(_mm256_castps256_ps128(b)));
	s = _mm256_add_pd(s, _mm256_cvtps_pd(_mm256_extractf128_ps(b, 1)));
	s = _mm256_add_pd(s, _mm256_cvtps_pd(_mm256_castps256_ps128(c)));
	s = _mm256_add_pd(s, _mm256_cvtps_pd(_mm256_extractf128_ps(c, 1)));
	s = _mm256_add_pd(s, _mm256_cvtps_pd(_mm256_castps256_ps128(d)));
	return _mm256_add_pd(s, _mm256_cvtps_pd(_mm256_extractf128_ps(d, 1)));
}

/* One vector of a relaxed step: elements k..k+7 into sq, ab, the zero
 * count (negative) and the largest magnitude bits. */
static inline __attribute__((always_inline)) void
avx2_rstep(const avx2_arrays *x, uint64_t k, int dtype, int has_acc, int has_m,
    __m256 *sq, __m256 *ab, __m256i *zero, __m256i *max)
{
	__m256 g = avx2_load(x->grad, k, dtype);
	__m256i a = _mm256_and_si256(_mm256_castps_si256(g),
	    _mm256_set1_epi32((int)KERN_ABS_MASK));

	*max = _mm256_max_epu32(*max, a);
	*zero = _mm256_add_epi32(*zero,
	    _mm256_cmpeq_epi32(a, _mm256_setzero_si256()));
	*sq = _mm256_fmadd_ps(g, g, *sq);
	*ab = _mm256_add_ps(*ab, _mm256_castsi256_ps(a));
	if (has_acc || has_m)
		avx2_blend_updates(x, k, g, _mm256_castsi256_ps(avx2_finite(a)),
		    has_acc, has_m);
}

static inline __attribute__((always_inline)) void
avx2_range_relaxed(const kern_job *job, uint64_t begin, uint64_t end,
    kern_stats *st, int dtype, int has_acc, int has_m)
{
	const avx2_arrays x = {
		.grad = job->grad,
		.acc = job->acc,
		.m = job->momentum,
		.beta = job->beta,
	};
	uint64_t blocks_end = begin + (end - begin) / R_BLOCK * R_BLOCK;
	__m256d S_sq = _mm256_setzero_pd();
	__m256d C_sq = _mm256_setzero_pd();
	__m256d S_ab = _mm256_setzero_pd();
	__m256d C_ab = _mm256_setzero_pd();
	uint64_t count = 0;
	uint64_t zeros = 0;
	uint32_t max_bits = 0;

	for (uint64_t i = begin; i < blocks_end; i += R_BLOCK) {
		__m256 sq0 = _mm256_setzero_ps(), sq1 = sq0, sq2 = sq0,
		       sq3 = sq0;
		__m256 ab0 = sq0, ab1 = sq0, ab2 = sq0, ab3 = sq0;
		__m256i zero = _mm256_setzero_si256();
		__m256i max = zero;
		uint32_t bmax;

		for (uint64_t k = i; k < i + R_BLOCK; k += R_UNROLL * V) {
			_mm_prefetch((const char *)x.grad +
				k * (dtype == KERN_F32 ? 4 : 2) + PREFETCH,
			    _MM_HINT_T0);
			if (has_acc)
				_mm_prefetch((const char *)(x.acc + k) +
					PREFETCH,
				    _MM_HINT_T0);
			if (has_m)
				_mm_prefetch((const char *)(x.m + k) + PREFETCH,
				    _MM_HINT_T0);
			avx2_rstep(&x, k, dtype, has_acc, has_m, &sq0, &ab0,
			    &zero, &max);
			avx2_rstep(&x, k + V, dtype, has_acc, has_m, &sq1, &ab1,
			    &zero, &max);
			avx2_rstep(&x, k + 2 * V, dtype, has_acc, has_m, &sq2,
			    &ab2, &zero, &max);
			avx2_rstep(&x, k + 3 * V, dtype, has_acc, has_m, &sq3,
			    &ab3, &zero, &max);
		}
		bmax = avx2_hmax(max);
		if (kern_relaxed_ok(bmax)) {
			avx2_fold(&S_sq, &C_sq,
			    avx2_widen_sum(sq0, sq1, sq2, sq3));
			avx2_fold(&S_ab, &C_ab,
			    avx2_widen_sum(ab0, ab1, ab2, ab3));
			zeros += avx2_hsum_neg(zero);
			count += R_BLOCK;
			if (bmax > max_bits)
				max_bits = bmax;
		} else {
			kern_job stats_only = *job;

			stats_only.acc = NULL;
			stats_only.momentum = NULL;
			kern_cpu_range_avx2(&stats_only, i, i + R_BLOCK, st);
		}
	}
	avx2_lanes_into(&st->sum_sq, &st->sum_sq_lo, S_sq, C_sq);
	avx2_lanes_into(&st->abs_sum, &st->abs_sum_lo, S_ab, C_ab);
	st->count += count;
	st->zeros += zeros;
	if ((double)kern_f32_from_bits(max_bits) > st->max_abs)
		st->max_abs = (double)kern_f32_from_bits(max_bits);
	if (blocks_end < end)
		kern_cpu_range_avx2(job, blocks_end, end, st);
}

#define AVX2_RRANGE(name, dtype, has_acc, has_m)                               \
	static __attribute__((noinline)) void name(const kern_job *job,        \
	    uint64_t begin, uint64_t end, kern_stats *st)                      \
	{                                                                      \
		avx2_range_relaxed(job, begin, end, st, dtype, has_acc,        \
		    has_m);                                                    \
	}

AVX2_RRANGE(avx2_r_f32, KERN_F32, 0, 0)
AVX2_RRANGE(avx2_r_f32_m, KERN_F32, 0, 1)
AVX2_RRANGE(avx2_r_f32_a, KERN_F32, 1, 0)
AVX2_RRANGE(avx2_r_f32_am, KERN_F32, 1, 1)
AVX2_RRANGE(avx2_r_f16, KERN_F16, 0, 0)
AVX2_RRANGE(avx2_r_f16_m, KERN_F16, 0, 1)
AVX2_RRANGE(avx2_r_f16_a, KERN_F16, 1, 0)
AVX2_RRANGE(avx2_r_f16_am, KERN_F16, 1, 1)
AVX2_RRANGE(avx2_r_bf16, KERN_BF16, 0, 0)
AVX2_RRANGE(avx2_r_bf16_m, KERN_BF16, 0, 1)
AVX2_RRANGE(avx2_r_bf16_a, KERN_BF16, 1, 0)
AVX2_RRANGE(avx2_r_bf16_am, KERN_BF16, 1, 1)

void
kern_cpu_range_avx2_relaxed(const kern_job *job, uint64_t begin, uint64_t end,
    kern_stats *st)
{
	switch (
	    job->dtype * 4 + (job->acc != NULL) * 2 + (job->momentum != NULL)) {
		AVX2_CASE(KERN_F32, 0, 0, avx2_r_f32);
		AVX2_CASE(KERN_F32, 0, 1, avx2_r_f32_m);
		AVX2_CASE(KERN_F32, 1, 0, avx2_r_f32_a);
		AVX2_CASE(KERN_F32, 1, 1, avx2_r_f32_am);
		AVX2_CASE(KERN_F16, 0, 0, avx2_r_f16);
		AVX2_CASE(KERN_F16, 0, 1, avx2_r_f16_m);
		AVX2_CASE(KERN_F16, 1, 0, avx2_r_f16_a);
		AVX2_CASE(KERN_F16, 1, 1, avx2_r_f16_am);
		AVX2_CASE(KERN_BF16, 0, 0, avx2_r_bf16);
		AVX2_CASE(KERN_BF16, 0, 1, avx2_r_bf16_m);
		AVX2_CASE(KERN_BF16, 1, 0, avx2_r_bf16_a);
		AVX2_CASE(KERN_BF16, 1, 1, avx2_r_bf16_am);
	default:
		break;
	}
}
