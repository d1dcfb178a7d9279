/* stats_avx2 - the AVX2 range function of the CPU backend (stats.h).
 *
 * Compiled with -mavx2 -mfma -mf16c and called only on processors that
 * have them. The scheme of stats_avx512.c with eight floats per vector and
 * compare results in place of masks: a chunk is first run as if every
 * element were finite, and recomputed with masks (a finite lane is all
 * ones, subtracted from the count and ANDed into the magnitudes) only if
 * its largest magnitude shows a NaN or an infinity. The accumulator and
 * momentum updates always blend under the finite mask (blending rather
 * than adding zero keeps a -0.0 accumulator bit-exact). The last few
 * elements go through element.h's scalar step.
 */
#include <immintrin.h>

#include "../element.h"
#include "stats.h"

#define V        8                         /* floats per vector */
#define CHUNK    (KERN_LANE_TERMS * 2 * V) /* elements between two folds */
#define PREFETCH 2048                      /* bytes ahead, see stats_avx512.c */

/* Plain sums and counts of one chunk, two of each for the two vectors of
 * an unrolled pair. */
typedef struct avx2_sums {
	__m256d sq[4];   /* squares: low and high halves of the two vectors */
	__m256d ab[4];   /* magnitudes, likewise */
	__m256i fin;     /* minus the finite elements per lane (masked) */
	__m256i zero[2]; /* minus the zeros per lane */
	__m256i max[2];  /* largest magnitude bits per lane */
} avx2_sums;

/* The arrays of one call, out of the job so that stores through acc
 * cannot be taken to change them. */
typedef struct avx2_arrays {
	const void *grad; /* the gradient */
	float *acc;       /* accumulator, or NULL */
	float *m;         /* momentum, or NULL */
	float beta;       /* momentum coefficient */
} avx2_arrays;

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

static inline __attribute__((always_inline)) void
avx2_sums_zero(avx2_sums *s)
{
	for (int j = 0; j < 4; j++) {
		s->sq[j] = _mm256_setzero_pd();
		s->ab[j] = _mm256_setzero_pd();
	}
	s->fin = _mm256_setzero_si256();
	for (int j = 0; j < 2; j++) {
		s->zero[j] = _mm256_setzero_si256();
		s->max[j] = _mm256_setzero_si256();
	}
}

/* Adds magnitudes a (0 where excluded) to the sums of vector h. */
static inline __attribute__((always_inline)) void
avx2_sum(avx2_sums *s, int h, __m256i a)
{
	__m256 af = _mm256_castsi256_ps(a);
	__m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(af));
	__m256d hi = _mm256_cvtps_pd(_mm256_extractf128_ps(af, 1));

	s->max[h] = _mm256_max_epu32(s->max[h], a);
	s->ab[2 * h] = _mm256_add_pd(s->ab[2 * h], lo);
	s->ab[2 * h + 1] = _mm256_add_pd(s->ab[2 * h + 1], hi);
	/* The products are exact, so fusing changes nothing. */
	s->sq[2 * h] = _mm256_fmadd_pd(lo, lo, s->sq[2 * h]);
	s->sq[2 * h + 1] = _mm256_fmadd_pd(hi, hi, s->sq[2 * h + 1]);
}

static inline __attribute__((always_inline)) __m256i
avx2_finite(__m256i a)
{
	return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)KERN_MAX_FINITE + 1),
	    a);
}

static inline __attribute__((always_inline)) void
avx2_step_fast(const avx2_arrays *x, uint64_t i, int dtype, int has_acc,
    int has_m, avx2_sums *s, int h)
{
	__m256 g = avx2_load(x->grad, i, dtype);
	__m256i a = _mm256_and_si256(_mm256_castps_si256(g),
	    _mm256_set1_epi32((int)KERN_ABS_MASK));

	s->zero[h] = _mm256_add_epi32(s->zero[h],
	    _mm256_cmpeq_epi32(a, _mm256_setzero_si256()));
	avx2_sum(s, h, a);
	if (has_acc || has_m) {
		__m256 fin = _mm256_castsi256_ps(avx2_finite(a));

		if (has_acc) {
			float *p = x->acc + i;
			__m256 v = _mm256_loadu_ps(p);

			_mm256_storeu_ps(p,
			    _mm256_blendv_ps(v, _mm256_add_ps(v, g), fin));
		}
		if (has_m) {
			float *p = x->m + i;
			__m256 v = _mm256_loadu_ps(p);
			__m256 bm = _mm256_mul_ps(_mm256_set1_ps(x->beta), v);
			__m256 cg = _mm256_mul_ps(_mm256_set1_ps(
						      1.0f - x->beta),
			    g);

			_mm256_storeu_ps(p,
			    _mm256_blendv_ps(v, _mm256_add_ps(bm, cg), fin));
		}
	}
}

/* Statistics of elements i..i+7 with non-finite lanes counted and
 * excluded; no updates (the fast pass made them). */
static inline __attribute__((always_inline)) void
avx2_step_masked(const avx2_arrays *x, uint64_t i, int dtype, avx2_sums *s)
{
	__m256 g = avx2_load(x->grad, i, dtype);
	__m256i a = _mm256_and_si256(_mm256_castps_si256(g),
	    _mm256_set1_epi32((int)KERN_ABS_MASK));
	__m256i fin = avx2_finite(a);

	s->fin = _mm256_add_epi32(s->fin, fin);
	s->zero[0] = _mm256_add_epi32(s->zero[0],
	    _mm256_cmpeq_epi32(a, _mm256_setzero_si256()));
	avx2_sum(s, 0, _mm256_and_si256(a, fin));
}

/* Prefetches what the fast loop touches PREFETCH bytes ahead: a line of
 * each array per 16 elements (of a 16-bit gradient, half a line). */
static inline __attribute__((always_inline)) void
avx2_prefetch(const avx2_arrays *x, uint64_t i, int dtype, int has_acc,
    int has_m)
{
	const char *g = (const char *)x->grad +
	    i * (dtype == KERN_F32 ? 4 : 2) + PREFETCH;

	_mm_prefetch(g, _MM_HINT_T0);
	if (has_acc)
		_mm_prefetch((const char *)(x->acc + i) + PREFETCH,
		    _MM_HINT_T0);
	if (has_m)
		_mm_prefetch((const char *)(x->m + i) + PREFETCH, _MM_HINT_T0);
}

/* The fast pass over [i, end), a multiple of 2 V, into *out. */
typedef void avx2_fast_fn(const avx2_arrays *x, uint64_t i, uint64_t end,
    avx2_sums *out);

/* One fast pass per dtype and update set, not inlined (see
 * stats_avx512.c). */
#define AVX2_FAST(name, dtype, has_acc, has_m)                                 \
	static __attribute__((noinline)) void name(const avx2_arrays *x,       \
	    uint64_t i, uint64_t end, avx2_sums *out)                          \
	{                                                                      \
		const avx2_arrays a = *x; /* stores cannot reach it */         \
		avx2_sums s = *out;                                            \
                                                                               \
		for (; i < end; i += 2 * V) {                                  \
			avx2_prefetch(&a, i, dtype, has_acc, has_m);           \
			avx2_step_fast(&a, i, dtype, has_acc, has_m, &s, 0);   \
			avx2_step_fast(&a, i + V, dtype, has_acc, has_m, &s,   \
			    1);                                                \
		}                                                              \
		*out = s;                                                      \
	}

AVX2_FAST(avx2_fast_f32, KERN_F32, 0, 0)
AVX2_FAST(avx2_fast_f32_m, KERN_F32, 0, 1)
AVX2_FAST(avx2_fast_f32_a, KERN_F32, 1, 0)
AVX2_FAST(avx2_fast_f32_am, KERN_F32, 1, 1)
AVX2_FAST(avx2_fast_f16, KERN_F16, 0, 0)
AVX2_FAST(avx2_fast_f16_m, KERN_F16, 0, 1)
AVX2_FAST(avx2_fast_f16_a, KERN_F16, 1, 0)
AVX2_FAST(avx2_fast_f16_am, KERN_F16, 1, 1)
AVX2_FAST(avx2_fast_bf16, KERN_BF16, 0, 0)
AVX2_FAST(avx2_fast_bf16_m, KERN_BF16, 0, 1)
AVX2_FAST(avx2_fast_bf16_a, KERN_BF16, 1, 0)
AVX2_FAST(avx2_fast_bf16_am, KERN_BF16, 1, 1)

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

static inline __attribute__((always_inline)) void
avx2_range(const kern_job *job, uint64_t begin, uint64_t end, kern_stats *st,
    int dtype, int has_acc, int has_m, avx2_fast_fn *fast)
{
	const avx2_arrays x = {
		.grad = job->grad,
		.acc = job->acc,
		.m = job->momentum,
		.beta = job->beta,
	};
	const float c = 1.0f - x.beta;
	__m256d S_sq = _mm256_setzero_pd();
	__m256d C_sq = _mm256_setzero_pd();
	__m256d S_ab = _mm256_setzero_pd();
	__m256d C_ab = _mm256_setzero_pd();
	__m256i vmax = _mm256_setzero_si256();
	uint32_t max_bits;
	uint64_t nonfinite = 0;
	uint64_t zeros = 0;
	uint64_t i = begin;
	kern_lane tail;

	while (end - i >= 2 * V) {
		uint64_t first = i;
		uint64_t stop = end - i > CHUNK ? i + CHUNK : end;
		uint64_t fast_end = i + (stop - i) / (2 * V) * (2 * V);
		avx2_sums s;

		avx2_sums_zero(&s);
		fast(&x, i, fast_end, &s);
		i = fast_end;
		if (avx2_hmax(_mm256_max_epu32(s.max[0], s.max[1])) >
		    KERN_MAX_FINITE) {
			avx2_sums_zero(&s);
			for (uint64_t j = first; j < fast_end; j += V)
				avx2_step_masked(&x, j, dtype, &s);
			nonfinite += (fast_end - first) - avx2_hsum_neg(s.fin);
		}
		vmax = _mm256_max_epu32(vmax,
		    _mm256_max_epu32(s.max[0], s.max[1]));
		avx2_fold(&S_sq, &C_sq,
		    _mm256_add_pd(_mm256_add_pd(s.sq[0], s.sq[1]),
			_mm256_add_pd(s.sq[2], s.sq[3])));
		avx2_fold(&S_ab, &C_ab,
		    _mm256_add_pd(_mm256_add_pd(s.ab[0], s.ab[1]),
			_mm256_add_pd(s.ab[2], s.ab[3])));
		zeros += avx2_hsum_neg(_mm256_add_epi32(s.zero[0], s.zero[1]));
	}
	avx2_lanes_into(&st->sum_sq, &st->sum_sq_lo, S_sq, C_sq);
	avx2_lanes_into(&st->abs_sum, &st->abs_sum_lo, S_ab, C_ab);
	max_bits = avx2_hmax(vmax);

	/* Fewer than 2 V elements left. */
	tail = (kern_lane){ 0 };
	for (; i < end; i++) {
		float g = kern_load(x.grad, i, dtype);

		if (!kern_lane_add(&tail, g))
			continue;
		if (has_acc)
			x.acc[i] = KERN_FADD(x.acc[i], g);
		if (has_m)
			x.m[i] = kern_momentum(x.m[i], g, x.beta, c);
	}
	kern_two_sum(&st->sum_sq, &st->sum_sq_lo, tail.sum_sq);
	kern_two_sum(&st->abs_sum, &st->abs_sum_lo, tail.abs_sum);
	if (tail.max_bits > max_bits)
		max_bits = tail.max_bits;

	st->count += end - begin;
	st->zeros += zeros + tail.zeros;
	st->nonfinite += nonfinite + tail.nonfinite;
	if ((double)kern_f32_from_bits(max_bits) > st->max_abs)
		st->max_abs = (double)kern_f32_from_bits(max_bits);
}

#define AVX2_CASE(dtype, acc, m, fast)                                         \
	case (dtype)*4 + (acc)*2 + (m):                                        \
		avx2_range(job, begin, end, st, (dtype), (acc), (m), fast);    \
		break

void
kern_cpu_range_avx2(const kern_job *job, uint64_t begin, uint64_t end,
    kern_stats *st)
{
	/* One specialised loop per dtype and update set. */
	switch (
	    job->dtype * 4 + (job->acc != NULL) * 2 + (job->momentum != NULL)) {
		AVX2_CASE(KERN_F32, 0, 0, avx2_fast_f32);
		AVX2_CASE(KERN_F32, 0, 1, avx2_fast_f32_m);
		AVX2_CASE(KERN_F32, 1, 0, avx2_fast_f32_a);
		AVX2_CASE(KERN_F32, 1, 1, avx2_fast_f32_am);
		AVX2_CASE(KERN_F16, 0, 0, avx2_fast_f16);
		AVX2_CASE(KERN_F16, 0, 1, avx2_fast_f16_m);
		AVX2_CASE(KERN_F16, 1, 0, avx2_fast_f16_a);
		AVX2_CASE(KERN_F16, 1, 1, avx2_fast_f16_am);
		AVX2_CASE(KERN_BF16, 0, 0, avx2_fast_bf16);
		AVX2_CASE(KERN_BF16, 0, 1, avx2_fast_bf16_m);
		AVX2_CASE(KERN_BF16, 1, 0, avx2_fast_bf16_a);
		AVX2_CASE(KERN_BF16, 1, 1, avx2_fast_bf16_am);
	default:
		break;
	}
}
