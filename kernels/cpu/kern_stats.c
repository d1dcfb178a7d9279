/* kern_stats - the CPU backend's table, ISA dispatch, threads and the portable
 * range function, see kern_stats.h.
 *
 * The portable path is the definition the vector paths must match: its
 * element arithmetic is element.h's, and it folds its plain double sums
 * into the compensated ones every KERN_LANE_TERMS elements, as the vector
 * paths do per lane. Its relaxed twin keeps float32 sums of
 * KERN_RELAXED_TERMS elements where element.h's bound allows.
 */
#include "kern_stats.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <bellows/error.h>

#include "../element.h"
#include "kern_histogram.h"
#include "kern_pool.h"

#define CPU_THREAD_MIN  (1u << 20) /* default thread_min, elements */
#define CPU_SPLIT_ALIGN 1024       /* parts start at multiples of this */

typedef struct kern_cpu {
	kern_cpu_range_fn *range; /* the ISA's range function */
	int isa;                  /* its kern_isa */
	kern_pool *pool;          /* NULL: single thread */
	uint64_t thread_min;      /* fewest elements split across threads */
} kern_cpu;

/* One parallel call: the parts' ranges and partial statistics. */
typedef struct cpu_split {
	const kern_job *job;      /* the tensor */
	kern_cpu_range_fn *range; /* what each part runs */
	uint64_t part_len;        /* elements per part, the last shorter */
	kern_stats partial[KERN_MAX_THREADS + 1]; /* one per part */
} cpu_split;

static inline __attribute__((always_inline)) void
scalar_range(const kern_job *job, uint64_t begin, uint64_t end, kern_stats *st,
    int dtype)
{
	const void *grad = job->grad;
	const float b = job->beta;
	const float c = 1.0f - b;
	float *acc = job->acc;
	float *m = job->momentum;
	uint64_t zeros = 0;
	uint64_t nonfinite = 0;
	uint32_t max_bits = 0;
	uint64_t i = begin;

	while (i < end) {
		uint64_t stop = end - i > KERN_LANE_TERMS ? i + KERN_LANE_TERMS
							  : end;
		kern_lane l;

		memset(&l, 0, sizeof(l));
		for (; i < stop; i++) {
			float g = kern_load(grad, i, dtype);

			if (!kern_lane_add(&l, g))
				continue;
			if (acc != NULL)
				acc[i] = KERN_FADD(acc[i], g);
			if (m != NULL)
				m[i] = kern_momentum(m[i], g, b, c);
		}
		kern_two_sum(&st->sum_sq, &st->sum_sq_lo, l.sum_sq);
		kern_two_sum(&st->abs_sum, &st->abs_sum_lo, l.abs_sum);
		zeros += l.zeros;
		nonfinite += l.nonfinite;
		if (l.max_bits > max_bits)
			max_bits = l.max_bits;
	}
	st->count += end - begin;
	st->zeros += zeros;
	st->nonfinite += nonfinite;
	if ((double)kern_f32_from_bits(max_bits) > st->max_abs)
		st->max_abs = (double)kern_f32_from_bits(max_bits);
}

/* The relaxed portable path: lanes of KERN_RELAXED_TERMS elements whose
 * float sums are kept when kern_relaxed_ok allows, the double ones
 * otherwise (both are computed: this path is a reference, not a fast
 * one). */
static inline __attribute__((always_inline)) void
scalar_range_relaxed(const kern_job *job, uint64_t begin, uint64_t end,
    kern_stats *st, int dtype)
{
	const void *grad = job->grad;
	const float b = job->beta;
	const float c = 1.0f - b;
	float *acc = job->acc;
	float *m = job->momentum;
	uint64_t zeros = 0;
	uint64_t nonfinite = 0;
	uint32_t max_bits = 0;
	uint64_t i = begin;

	while (i < end) {
		uint64_t stop = end - i > KERN_RELAXED_TERMS
		    ? i + KERN_RELAXED_TERMS
		    : end;
		float fsq = 0.0f;
		float fab = 0.0f;
		kern_lane l;

		memset(&l, 0, sizeof(l));
		for (; i < stop; i++) {
			float g = kern_load(grad, i, dtype);

			if (!kern_lane_add(&l, g))
				continue;
			fsq = KERN_FADD(fsq, KERN_FMUL(g, g));
			fab = KERN_FADD(fab,
			    kern_f32_from_bits(
				kern_f32_bits(g) & KERN_ABS_MASK));
			if (acc != NULL)
				acc[i] = KERN_FADD(acc[i], g);
			if (m != NULL)
				m[i] = kern_momentum(m[i], g, b, c);
		}
		if (kern_relaxed_ok(l.max_bits)) {
			l.sum_sq = (double)fsq;
			l.abs_sum = (double)fab;
		}
		kern_two_sum(&st->sum_sq, &st->sum_sq_lo, l.sum_sq);
		kern_two_sum(&st->abs_sum, &st->abs_sum_lo, l.abs_sum);
		zeros += l.zeros;
		nonfinite += l.nonfinite;
		if (l.max_bits > max_bits)
			max_bits = l.max_bits;
	}
	st->count += end - begin;
	st->zeros += zeros;
	st->nonfinite += nonfinite;
	if ((double)kern_f32_from_bits(max_bits) > st->max_abs)
		st->max_abs = (double)kern_f32_from_bits(max_bits);
}

void
kern_cpu_range_scalar_relaxed(const kern_job *job, uint64_t begin, uint64_t end,
    kern_stats *st)
{
	switch (job->dtype) {
	case KERN_F16:
		scalar_range_relaxed(job, begin, end, st, KERN_F16);
		break;
	case KERN_BF16:
		scalar_range_relaxed(job, begin, end, st, KERN_BF16);
		break;
	default:
		scalar_range_relaxed(job, begin, end, st, KERN_F32);
		break;
	}
}

void
kern_cpu_range_scalar(const kern_job *job, uint64_t begin, uint64_t end,
    kern_stats *st)
{
	/* One copy per dtype, so that the load is not a branch. */
	switch (job->dtype) {
	case KERN_F16:
		scalar_range(job, begin, end, st, KERN_F16);
		break;
	case KERN_BF16:
		scalar_range(job, begin, end, st, KERN_BF16);
		break;
	default:
		scalar_range(job, begin, end, st, KERN_F32);
		break;
	}
}

int
kern_cpu_isa_supported(int isa)
{
	switch (isa) {
	case KERN_ISA_AUTO:
	case KERN_ISA_SCALAR:
		return 1;
#ifdef KERN_HAVE_X86
	case KERN_ISA_AVX2:
		__builtin_cpu_init();
		return __builtin_cpu_supports("avx2") &&
		    __builtin_cpu_supports("fma") &&
		    __builtin_cpu_supports("f16c") &&
		    __builtin_cpu_supports("popcnt");
	case KERN_ISA_AVX512:
		__builtin_cpu_init();
		return __builtin_cpu_supports("avx512f") &&
		    __builtin_cpu_supports("avx512bw") &&
		    __builtin_cpu_supports("avx512vl") &&
		    __builtin_cpu_supports("avx512dq");
#endif
	default:
		return 0;
	}
}

int
kern_cpu_isa_best(void)
{
	for (int isa = KERN_ISA_LAST; isa > KERN_ISA_SCALAR; isa--)
		if (kern_cpu_isa_supported(isa))
			return isa;
	return KERN_ISA_SCALAR;
}

const char *
kern_cpu_isa_name(int isa)
{
	switch (isa) {
	case KERN_ISA_AUTO:
		return "auto";
	case KERN_ISA_SCALAR:
		return "scalar";
	case KERN_ISA_AVX2:
		return "avx2";
	case KERN_ISA_AVX512:
		return "avx512";
	default:
		return "?";
	}
}

kern_cpu_range_fn *
kern_cpu_range(int isa)
{
	return kern_cpu_range_with(isa, KERN_PRECISION_EXACT);
}

kern_cpu_range_fn *
kern_cpu_range_with(int isa, int precision)
{
	int relaxed = precision != KERN_PRECISION_EXACT;

	if (isa == KERN_ISA_AUTO)
		isa = kern_cpu_isa_best();
	if (!kern_cpu_isa_supported(isa))
		return NULL;
	switch (isa) {
#ifdef KERN_HAVE_X86
	case KERN_ISA_AVX2:
		return relaxed ? kern_cpu_range_avx2_relaxed
			       : kern_cpu_range_avx2;
	case KERN_ISA_AVX512:
		return relaxed ? kern_cpu_range_avx512_relaxed
			       : kern_cpu_range_avx512;
#endif
	default:
		return relaxed ? kern_cpu_range_scalar_relaxed
			       : kern_cpu_range_scalar;
	}
}

int
kern_cpu_ctx_isa(const void *ctx)
{
	return ((const kern_cpu *)ctx)->isa;
}

static void
cpu_close(void **ctx)
{
	kern_cpu *c;

	if (ctx == NULL || (c = *ctx) == NULL)
		return;
	*ctx = NULL;
	kern_pool_destroy(&c->pool);
	free(c);
}

static int
cpu_open(const kern_config *cfg, void **ret_ctx)
{
	kern_cpu *c;
	int isa = cfg->isa;
	int rc;

	if (isa < KERN_ISA_AUTO || isa > KERN_ISA_LAST ||
	    cfg->threads > KERN_MAX_THREADS ||
	    (cfg->precision != KERN_PRECISION_RELAXED &&
		cfg->precision != KERN_PRECISION_EXACT))
		return BELLOWS_EINVAL;
	if (isa == KERN_ISA_AUTO)
		isa = kern_cpu_isa_best();
	if (!kern_cpu_isa_supported(isa))
		return BELLOWS_ENOTSUP;
	if ((c = calloc(1, sizeof(*c))) == NULL)
		return BELLOWS_ENOMEM;
	c->isa = isa;
	c->range = kern_cpu_range_with(isa, cfg->precision);
	c->thread_min = cfg->thread_min > 0 ? cfg->thread_min : CPU_THREAD_MIN;
	if (cfg->threads > 0 &&
	    (rc = kern_pool_new(cfg->threads, &c->pool)) != 0) {
		free(c);
		return rc;
	}
	*ret_ctx = c;
	return 0;
}

static void
cpu_part(void *arg, uint32_t part)
{
	cpu_split *s = arg;
	uint64_t n = s->job->n;
	uint64_t begin = (uint64_t)part * s->part_len;
	uint64_t end = begin + s->part_len;

	if (begin >= n)
		return;
	s->range(s->job, begin, end < n ? end : n, &s->partial[part]);
}

static bool
cpu_job_ok(const kern_job *job)
{
	return job != NULL && job->stats != NULL &&
	    kern_dtype_size(job->dtype) != 0 &&
	    (job->n == 0 || job->grad != NULL);
}

static int
cpu_stats(void *ctx, const kern_job *job, void *stream)
{
	kern_cpu *c = ctx;
	cpu_split split;
	uint32_t parts;
	uint64_t len;

	(void)stream;
	if (!cpu_job_ok(job))
		return BELLOWS_EINVAL;
	if (job->n == 0)
		return 0;
	if (c->pool == NULL || job->n < c->thread_min) {
		c->range(job, 0, job->n, job->stats);
		return 0;
	}
	parts = kern_pool_size(c->pool);
	len = (job->n + parts - 1) / parts;
	/* Aligned part boundaries keep two threads off one cache line of
	 * the accumulator. */
	len = (len + CPU_SPLIT_ALIGN - 1) / CPU_SPLIT_ALIGN * CPU_SPLIT_ALIGN;
	split.job = job;
	split.range = c->range;
	split.part_len = len;
	memset(split.partial, 0, parts * sizeof(split.partial[0]));
	kern_pool_run(c->pool, cpu_part, &split);
	for (uint32_t p = 0; p < parts; p++)
		kern_stats_merge(job->stats, &split.partial[p]);
	return 0;
}

static int
cpu_stats_batch(void *ctx, const kern_job *jobs, uint32_t n_jobs, void *stream)
{
	int rc;

	if (n_jobs > 0 && jobs == NULL)
		return BELLOWS_EINVAL;
	for (uint32_t i = 0; i < n_jobs; i++)
		if (!cpu_job_ok(&jobs[i]))
			return BELLOWS_EINVAL;
	for (uint32_t i = 0; i < n_jobs; i++)
		if ((rc = cpu_stats(ctx, &jobs[i], stream)) != 0)
			return rc;
	return 0;
}

static int
cpu_synchronize(void *ctx, void *stream)
{
	(void)ctx;
	(void)stream;
	return 0;
}

static int
cpu_mem_alloc(void *ctx, size_t bytes, void **ret)
{
	size_t rounded = (bytes + 63) / 64 * 64;
	void *p;

	(void)ctx;
	if (rounded < bytes)
		return BELLOWS_ENOMEM;
	if ((p = aligned_alloc(64, rounded > 0 ? rounded : 64)) == NULL)
		return BELLOWS_ENOMEM;
	memset(p, 0, rounded);
	*ret = p;
	return 0;
}

static void
cpu_mem_free(void *ctx, void *p)
{
	(void)ctx;
	free(p);
}

static int
cpu_zero(void *ctx, void *p, size_t bytes, void *stream)
{
	(void)ctx;
	(void)stream;
	if (bytes > 0 && p == NULL)
		return BELLOWS_EINVAL;
	if (bytes > 0)
		memset(p, 0, bytes);
	return 0;
}

static int
cpu_copy(void *ctx, void *dst, const void *src, size_t bytes, void *stream)
{
	(void)ctx;
	(void)stream;
	if (bytes > 0 && (dst == NULL || src == NULL))
		return BELLOWS_EINVAL;
	if (bytes > 0)
		memcpy(dst, src, bytes);
	return 0;
}

static const kern_ops cpu_ops = {
	.name = "cpu",
	.where = KERN_HOST,
	.scratch_size = 0,
	.open = cpu_open,
	.close = cpu_close,
	.stats = cpu_stats,
	.stats_batch = cpu_stats_batch,
	.histogram = kern_cpu_histogram,
	.synchronize = cpu_synchronize,
	.mem_alloc = cpu_mem_alloc,
	.mem_free = cpu_mem_free,
	.host_alloc = cpu_mem_alloc,
	.host_free = cpu_mem_free,
	.zero = cpu_zero,
	.copy_in = cpu_copy,
	.copy_out = cpu_copy,
};

const kern_ops *
kern_cpu_ops(void)
{
	return &cpu_ops;
}
