/* stats_avx2 - the AVX2 range function of the CPU backend (stats.h).
 *
 * Compiled with -mavx2 -mfma -mf16c -mpopcnt and called only on processors
 * that have them. Float16 and bfloat16 gradients take the scheme of
 * stats_avx512.c with eight floats per vector and compare results in
 * place of masks: a chunk is first run as if every element were finite,
 * and recomputed with masks (a finite lane is all ones, subtracted from
 * the count and ANDed into the magnitudes) only if its largest magnitude
 * shows a NaN or an infinity; the accumulator and momentum updates always
 * blend under the finite mask (blending rather than adding zero keeps a
 * -0.0 accumulator bit-exact). Float32 gradients, the common case, take a
 * faster path of their own, described at f32_sums below. The last few
 * elements go through element.h's scalar step. */
#include <immintrin.h>

#include "../element.h"
#include "stats.h"

#define V            8                         /* floats per vector */
#define CHUNK        (KERN_LANE_TERMS * 2 * V) /* elements between two folds */
#define PREFETCH     2048 /* bytes ahead, see stats_avx512.c */
#define F32_PREFETCH 1024 /* the float32 path's, measured best of 512-4096 */

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

/* The updates of elements i..i+7, whose gradient is g, under the finite
 * mask fin (blending rather than adding zero keeps a -0.0 accumulator
 * bit-exact). */
static inline __attribute__((always_inline)) void
avx2_update_masked(const avx2_arrays *x, uint64_t i, __m256 g, __m256 fin,
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
		__m256 bm = _mm256_mul_ps(_mm256_set1_ps(x->beta), v);
		__m256 cg = _mm256_mul_ps(_mm256_set1_ps(1.0f - x->beta), g);

		_mm256_storeu_ps(p,
		    _mm256_blendv_ps(v, _mm256_add_ps(bm, cg), fin));
	}
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
	if (has_acc || has_m)
		avx2_update_masked(x, i, g, _mm256_castsi256_ps(avx2_finite(a)),
		    has_acc, has_m);
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
	avx2_totals t;
	uint64_t i = begin;

	avx2_totals_zero(&t);
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
			t.nonfinite += (fast_end - first) -
			    avx2_hsum_neg(s.fin);
		}
		t.max = _mm256_max_epu32(t.max,
		    _mm256_max_epu32(s.max[0], s.max[1]));
		avx2_totals_fold(&t, s.sq, s.ab);
		t.zeros += avx2_hsum_neg(
		    _mm256_add_epi32(s.zero[0], s.zero[1]));
	}
	/* Fewer than 2 V elements left. */
	avx2_finish(&x, &t, begin, i, end, dtype, has_acc, has_m, st);
}

/* The float32 path.
 *
 * Float32 gradients take a scheme of their own: on the AMD EPYC (Zen 3)
 * machine of bench/README.md it runs the statistics 1.4 times and the
 * statistics with the accumulator 1.4 times as fast as the scheme above.
 * Three things make the difference:
 *
 * - The high four floats are widened to double straight from memory
 *   rather than extracted from the register that holds them and widened
 *   (the low four come from the register: no extraction is needed):
 *   the same arithmetic ran 1.6 times as fast that way there. The zero
 *   count and the maximum stay on the float's bits (exact, and blind to
 *   a denormals-are-zero mode of the caller's), the zeros counted
 *   through a mask and popcnt.
 * - A chunk's plain sums double as its NaN/infinity test: a non-finite
 *   magnitude makes the chunk's sum of magnitudes NaN or infinite, and
 *   nothing else can (2048 finite floats sum to at most 7e41). No compare
 *   or mask is spent per element.
 * - The accumulator and momentum updates of a chunk run one chunk late,
 *   in the loop of the next chunk, once the chunk is known finite: as
 *   plain adds (no blend) of floats still in L1, interleaved with the
 *   next chunk's arithmetic, so that the loads and stores of the updates
 *   overlap the sums instead of following them. A chunk with a NaN or an
 *   infinity is recomputed with masks and updated at once, element by
 *   element under its finite mask; the last chunk is updated after the
 *   loop.
 *
 * The updates are the same float operations as element.h's, so their
 * bits are the scalar path's; the sums are the same per-lane plain sums
 * of KERN_LANE_TERMS terms folded into a compensated pair per chunk. */

/* Plain sums of one float32 chunk. */
typedef struct f32_sums {
	__m256d sq[4];  /* squares, four independent lanes of four */
	__m256d ab[4];  /* magnitudes, likewise */
	__m256i max;    /* bits of the largest magnitude per lane */
	uint32_t zeros; /* zeros */
} f32_sums;

static inline __attribute__((always_inline)) void
f32_sums_zero(f32_sums *s)
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
f32_zeros(__m256i bits)
{
	return (uint32_t)__builtin_popcount(
	    (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(
		_mm256_cmpeq_epi32(bits, _mm256_setzero_si256()))));
}

/* The updates of the finite elements i..i+7. */
static inline __attribute__((always_inline)) void
f32_update(const avx2_arrays *x, uint64_t i, int has_acc, int has_m)
{
	__m256 g = _mm256_loadu_ps((const float *)x->grad + i);

	if (has_acc) {
		float *p = x->acc + i;

		_mm256_storeu_ps(p, _mm256_add_ps(_mm256_loadu_ps(p), g));
	}
	if (has_m) {
		float *p = x->m + i;
		__m256 bm = _mm256_mul_ps(_mm256_set1_ps(x->beta),
		    _mm256_loadu_ps(p));
		__m256 cg = _mm256_mul_ps(_mm256_set1_ps(1.0f - x->beta), g);

		_mm256_storeu_ps(p, _mm256_add_ps(bm, cg));
	}
}

/* Sums of elements i..i+7 into lanes h of s, as if all were finite; and,
 * when lag is not 0, the updates of elements i-lag..i-lag+7. */
static inline __attribute__((always_inline)) void
f32_step(const avx2_arrays *x, uint64_t i, int has_acc, int has_m, uint64_t lag,
    f32_sums *s, int h)
{
	const float *p = (const float *)x->grad + i;
	const __m256d abs_mask = _mm256_castsi256_pd(
	    _mm256_set1_epi64x(INT64_MAX));
	__m256i bits = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)p),
	    _mm256_set1_epi32((int)KERN_ABS_MASK));
	/* The low half from the magnitudes' register (the cast is free), the
	 * high half from memory, signed, its sign cleared in double. */
	__m256d lo = _mm256_cvtps_pd(
	    _mm256_castps256_ps128(_mm256_castsi256_ps(bits)));
	__m256d hi = _mm256_cvtps_pd(_mm_loadu_ps(p + 4));

	/* The products are exact, so fusing changes nothing. */
	s->sq[2 * h] = _mm256_fmadd_pd(lo, lo, s->sq[2 * h]);
	s->sq[2 * h + 1] = _mm256_fmadd_pd(hi, hi, s->sq[2 * h + 1]);
	hi = _mm256_and_pd(hi, abs_mask);
	s->ab[2 * h] = _mm256_add_pd(s->ab[2 * h], lo);
	s->ab[2 * h + 1] = _mm256_add_pd(s->ab[2 * h + 1], hi);
	s->max = _mm256_max_epu32(s->max, bits);
	s->zeros += f32_zeros(bits);
	if (lag != 0)
		f32_update(x, i - lag, has_acc, has_m);
}

/* Sums of elements i..i+7 with the non-finite ones counted (in *fin,
 * negated) and left out; no updates. */
static inline __attribute__((always_inline)) void
f32_step_masked(const avx2_arrays *x, uint64_t i, f32_sums *s, __m256i *fin)
{
	__m256i bits = _mm256_and_si256(_mm256_loadu_si256((const __m256i
						*)((const float *)x->grad + i)),
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
	s->zeros += f32_zeros(bits);
}

/* The updates of elements i..i+7 under their finite mask. */
static inline __attribute__((always_inline)) void
f32_update_masked(const avx2_arrays *x, uint64_t i, int has_acc, int has_m)
{
	__m256 g = _mm256_loadu_ps((const float *)x->grad + i);

	avx2_update_masked(x, i, g,
	    _mm256_castsi256_ps(
		avx2_finite(_mm256_and_si256(_mm256_castps_si256(g),
		    _mm256_set1_epi32((int)KERN_ABS_MASK)))),
	    has_acc, has_m);
}

/* Prefetches F32_PREFETCH bytes ahead of what the lagged loop reads at j: the
 * gradient there and the accumulator and momentum a chunk behind. */
static inline __attribute__((always_inline)) void
f32_prefetch(const avx2_arrays *x, uint64_t j, int has_acc, int has_m)
{
	_mm_prefetch((const char *)((const float *)x->grad + j) + F32_PREFETCH,
	    _MM_HINT_T0);
	if (has_acc)
		_mm_prefetch((const char *)(x->acc + j - CHUNK) + F32_PREFETCH,
		    _MM_HINT_T0);
	if (has_m)
		_mm_prefetch((const char *)(x->m + j - CHUNK) + F32_PREFETCH,
		    _MM_HINT_T0);
}

/* Non-zero if a chunk's plain sum of magnitudes shows a NaN or an
 * infinity. */
static inline __attribute__((always_inline)) int
f32_nonfinite(const f32_sums *s)
{
	__m256d ab = _mm256_add_pd(_mm256_add_pd(s->ab[0], s->ab[1]),
	    _mm256_add_pd(s->ab[2], s->ab[3]));

	return _mm256_movemask_pd(
	    _mm256_cmp_pd(ab, _mm256_set1_pd(__builtin_inf()), _CMP_NLT_UQ));
}

static inline __attribute__((always_inline)) void
f32_range(const kern_job *job, uint64_t begin, uint64_t end, kern_stats *st,
    int has_acc, int has_m)
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
		f32_sums s;

		f32_sums_zero(&s);
		if (pending == CHUNK && len == CHUNK) {
			/* The previous chunk's updates in this one's loop. */
			for (uint64_t j = i; j < i + CHUNK; j += 2 * V) {
				f32_prefetch(&x, j, has_acc, has_m);
				f32_step(&x, j, has_acc, has_m, CHUNK, &s, 0);
				f32_step(&x, j + V, has_acc, has_m, CHUNK, &s,
				    1);
			}
		} else {
			for (uint64_t j = i - pending; j < i; j += V)
				f32_update(&x, j, has_acc, has_m);
			for (uint64_t j = i; j < i + len; j += 2 * V) {
				f32_step(&x, j, 0, 0, 0, &s, 0);
				f32_step(&x, j + V, 0, 0, 0, &s, 1);
			}
		}
		pending = updates ? len : 0;
		if (f32_nonfinite(&s)) {
			__m256i fin = _mm256_setzero_si256();

			f32_sums_zero(&s);
			for (uint64_t j = i; j < i + len; j += V) {
				f32_step_masked(&x, j, &s, &fin);
				if (updates)
					f32_update_masked(&x, j, has_acc,
					    has_m);
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
		f32_update(&x, j, has_acc, has_m);
	/* Fewer than 2 V elements left. */
	avx2_finish(&x, &t, begin, i, end, KERN_F32, has_acc, has_m, st);
}

/* One float32 range function per update set, not inlined. */
#define F32_RANGE(name, has_acc, has_m)                                        \
	static __attribute__((noinline)) void name(const kern_job *job,        \
	    uint64_t begin, uint64_t end, kern_stats *st)                      \
	{                                                                      \
		f32_range(job, begin, end, st, has_acc, has_m);                \
	}

F32_RANGE(f32_range_none, 0, 0)
F32_RANGE(f32_range_m, 0, 1)
F32_RANGE(f32_range_a, 1, 0)
F32_RANGE(f32_range_am, 1, 1)

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
	case KERN_F32 * 4 + 0:
		f32_range_none(job, begin, end, st);
		break;
	case KERN_F32 * 4 + 1:
		f32_range_m(job, begin, end, st);
		break;
	case KERN_F32 * 4 + 2:
		f32_range_a(job, begin, end, st);
		break;
	case KERN_F32 * 4 + 3:
		f32_range_am(job, begin, end, st);
		break;
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
