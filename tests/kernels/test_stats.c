/* test_stats - the CPU statistics kernel against the reference.
 *
 * Every instruction set the processor has (portable C, AVX2, AVX-512),
 * every dtype, sizes around every vector and chunk boundary, aligned and
 * unaligned, random and adversarial data: the counts and the maximum must
 * be exact, the sums within 1e-12 relative of a long double reference
 * (KERN_PRECISION_EXACT) or 1e-6 (the relaxed default, same cases), and
 * the accumulator and momentum bit-for-bit those of the one-element-at-a-
 * time float reference, hence the same for every ISA and thread count.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bellows/error.h>

#include "kernels/cpu/kern_stats.h"
#include "reference.h"

#define REL 1e-12 /* the accuracy the exact kernels are held to */

/* The precision open_cpu asks for and the accuracy run_case_at holds it
 * to: the exact path unless a relaxed test switches both. */
static int precision = KERN_PRECISION_EXACT;
static double rel = REL;

static const char *const dtype_names[] = { "f32", "f16", "bf16" };

/* Sizes around the vector (8, 16), unrolled (32) and chunk (2048, 4096)
 * boundaries: 0..3 and 2^k - 1, 2^k, 2^k + 1 up to 2^18, and a prime. */
static uint64_t sizes[64];
static size_t n_sizes;

static void
sizes_init(void)
{
	n_sizes = 0;
	for (uint64_t n = 0; n < 4; n++)
		sizes[n_sizes++] = n;
	for (int k = 2; k <= 18; k++) {
		sizes[n_sizes++] = (1ull << k) - 1;
		sizes[n_sizes++] = 1ull << k;
		sizes[n_sizes++] = (1ull << k) + 1;
	}
	sizes[n_sizes++] = 1000003;
}

/* Opens the CPU backend on `isa` with `threads` workers splitting tensors
 * from thread_min elements. */
static kern_backend
open_cpu(int isa, uint32_t threads, uint64_t thread_min)
{
	kern_backend b;
	kern_config cfg;

	kern_config_init(&cfg);
	cfg.isa = isa;
	cfg.threads = threads;
	cfg.thread_min = thread_min;
	cfg.precision = precision;
	assert_int_equal(kern_backend_open(&b, KERN_HOST, &cfg), 0);
	assert_int_equal(kern_cpu_ctx_isa(b.ctx), isa);
	return b;
}

#define NO_BAD UINT64_MAX /* run_case_at: no non-finite value put in */

/* Writes NaN (k % 3 == 0), +Inf (1) or -Inf (2) of dtype at element i. */
static void
put_nonfinite(void *g, uint64_t i, int dtype, size_t k)
{
	static const float f32[] = { NAN, INFINITY, -INFINITY };
	static const uint16_t f16[] = { 0x7e00, 0x7c00, 0xfc00 };
	static const uint16_t bf16[] = { 0x7fc0, 0x7f80, 0xff80 };

	if (dtype == KERN_F32)
		((float *)g)[i] = f32[k % 3];
	else
		((uint16_t *)g)[i] = (dtype == KERN_F16 ? f16 : bf16)[k % 3];
}

/* Runs one case: n elements of data set `data` at an element offset `off`
 * from an aligned address, through `b`, `steps` times (the statistics
 * accumulating), and checks everything. acc and m start from small random
 * values (m) and -0.0 (acc, to catch a skipped element being rewritten).
 * Unless bad_at is NO_BAD, element bad_at of every step is made NaN or
 * infinite (which one: put_nonfinite's k + step). */
static void
run_case_at(kern_backend *b, int dtype, uint64_t n, size_t off, int data,
    int with_acc, int with_m, int steps, const char *isa, uint64_t bad_at,
    size_t k)
{
	size_t esz = kern_dtype_size(dtype);
	char *gbuf = ref_alloc((n + off) * esz);
	float *acc = ref_alloc((n + 1) * sizeof(float));
	float *m = ref_alloc((n + 1) * sizeof(float));
	float *racc = ref_alloc((n + 1) * sizeof(float));
	float *rm = ref_alloc((n + 1) * sizeof(float));
	void *g = gbuf + off * esz;
	kern_stats st;
	ref_stats ref;
	char what[160];

	memset(&st, 0, sizeof(st));
	memset(&ref, 0, sizeof(ref));
	for (uint64_t i = 0; i < n + 1; i++) {
		acc[i] = racc[i] = -0.0f;
		m[i] = rm[i] = (float)(i % 7) * 0.25f - 0.5f;
	}
	for (int s = 0; s < steps; s++) {
		kern_job job = {
			.grad = g,
			.n = n,
			.dtype = dtype,
			.beta = 0.9f,
			.stats = &st,
			.acc = with_acc ? acc : NULL,
			.momentum = with_m ? m : NULL,
		};

		ref_fill(g, n, dtype, data, n * 31 + (uint64_t)s + 7);
		if (bad_at != NO_BAD)
			put_nonfinite(g, bad_at, dtype, k + (size_t)s);
		assert_int_equal(b->ops->stats(b->ctx, &job, NULL), 0);
		ref_add(&ref, g, n, dtype);
		ref_update(with_acc ? racc : NULL, with_m ? rm : NULL, g, n,
		    dtype, 0.9f);
	}
	snprintf(what, sizeof(what),
	    "%s %s n=%llu off=%zu data=%d acc=%d m=%d steps=%d bad_at=%lld",
	    isa, dtype_names[dtype], (unsigned long long)n, off, data, with_acc,
	    with_m, steps, bad_at == NO_BAD ? -1LL : (long long)bad_at);
	if (bad_at != NO_BAD)
		assert_int_equal(st.nonfinite, (uint64_t)steps);
	ref_check(&st, &ref, rel, what);
	/* One past the end: the kernel must not have written it. */
	if (memcmp(acc, racc, (n + 1) * sizeof(float)) != 0)
		fail_msg("%s: accumulator differs from the reference", what);
	if (memcmp(m, rm, (n + 1) * sizeof(float)) != 0)
		fail_msg("%s: momentum differs from the reference", what);
	ref_free(rm);
	ref_free(racc);
	ref_free(m);
	ref_free(acc);
	ref_free(gbuf);
}

static void
run_case(kern_backend *b, int dtype, uint64_t n, size_t off, int data,
    int with_acc, int with_m, int steps, const char *isa)
{
	run_case_at(b, dtype, n, off, data, with_acc, with_m, steps, isa,
	    NO_BAD, 0);
}

static void
test_every_isa_matches_the_reference_on_every_size_and_dtype(void **state)
{
	(void)state;
	sizes_init();
	for (int isa = KERN_ISA_SCALAR; isa <= KERN_ISA_LAST; isa++) {
		kern_backend b;

		if (!kern_cpu_isa_supported(isa)) {
			print_message("%s: not supported here, skipped\n",
			    kern_cpu_isa_name(isa));
			continue;
		}
		b = open_cpu(isa, 0, 0);
		for (int dtype = KERN_F32; dtype <= KERN_BF16; dtype++)
			for (size_t k = 0; k < n_sizes; k++)
				run_case(&b, dtype, sizes[k], 0, REF_SPECIALS,
				    1, 1, 1, kern_cpu_isa_name(isa));
		print_message("%s: %zu sizes x 3 dtypes match\n",
		    kern_cpu_isa_name(isa), n_sizes);
		kern_backend_close(&b);
	}
}

static void
test_unaligned_pointers_and_update_subsets_match_the_reference(void **state)
{
	static const uint64_t ns[] = { 1, 15, 17, 33, 100, 4097, 10007 };

	(void)state;
	for (int isa = KERN_ISA_SCALAR; isa <= KERN_ISA_LAST; isa++) {
		kern_backend b;

		if (!kern_cpu_isa_supported(isa))
			continue;
		b = open_cpu(isa, 0, 0);
		for (int dtype = KERN_F32; dtype <= KERN_BF16; dtype++)
			for (size_t k = 0; k < sizeof(ns) / sizeof(ns[0]); k++)
				for (size_t off = 1; off < 4; off++)
					for (int u = 0; u < 4; u++)
						run_case(&b, dtype, ns[k], off,
						    REF_MIXED, u & 1, u >> 1, 1,
						    kern_cpu_isa_name(isa));
		kern_backend_close(&b);
	}
}

static void
test_adversarial_data_is_counted_and_summed_exactly(void **state)
{
	static const int sets[] = { REF_SPECIALS, REF_HUGE_TINY, REF_ZEROS,
		REF_SUBNORMAL, REF_NARROW };
	static const uint64_t ns[] = { 5, 31, 64, 1023, 65537 };

	(void)state;
	for (int isa = KERN_ISA_SCALAR; isa <= KERN_ISA_LAST; isa++) {
		kern_backend b;

		if (!kern_cpu_isa_supported(isa))
			continue;
		b = open_cpu(isa, 0, 0);
		for (int dtype = KERN_F32; dtype <= KERN_BF16; dtype++)
			for (size_t s = 0; s < sizeof(sets) / sizeof(sets[0]);
			     s++)
				for (size_t k = 0;
				     k < sizeof(ns) / sizeof(ns[0]); k++)
					run_case(&b, dtype, ns[k], 0, sets[s],
					    1, 1, 3, kern_cpu_isa_name(isa));
		kern_backend_close(&b);
	}
}

/* NaN and infinities in every lane position of a vector, one at a time:
 * the masks must line up with the elements. */
static void
test_a_nonfinite_value_in_any_lane_is_excluded(void **state)
{
	float g[67];
	float acc[67];
	float want[67];

	(void)state;
	for (int isa = KERN_ISA_SCALAR; isa <= KERN_ISA_LAST; isa++) {
		kern_backend b;

		if (!kern_cpu_isa_supported(isa))
			continue;
		b = open_cpu(isa, 0, 0);
		for (int pos = 0; pos < 67; pos++) {
			kern_stats st;
			kern_job job = { .grad = g,
				.n = 67,
				.dtype = KERN_F32,
				.stats = &st,
				.acc = acc };

			memset(&st, 0, sizeof(st));
			for (int i = 0; i < 67; i++) {
				g[i] = (float)(i + 1);
				acc[i] = 1.0f;
				want[i] = (float)(i + 2);
			}
			g[pos] = pos % 3 == 0 ? NAN
			    : pos % 3 == 1    ? INFINITY
					      : -INFINITY;
			want[pos] = 1.0f;
			assert_int_equal(b.ops->stats(b.ctx, &job, NULL), 0);
			assert_int_equal(st.nonfinite, 1);
			assert_int_equal(st.zeros, 0);
			assert_true(kern_stats_abs_sum(&st) ==
			    67.0 * 68.0 / 2.0 - (pos + 1));
			assert_true(st.max_abs == (pos == 66 ? 66.0 : 67.0));
			assert_memory_equal(acc, want, sizeof(acc));
		}
		kern_backend_close(&b);
	}
}

/* One NaN or infinity in a long finite tensor of every dtype, at every
 * place the vector paths treat differently: the first and last element
 * of a chunk (2048 elements on AVX2, 4096 on AVX-512), a chunk after
 * finite ones (whose updates the vector paths make one chunk late), the
 * last full chunk, the short chunk at the end and the scalar tail. The
 * updates of every other chunk must still be made, once, bit for bit. */
static void
test_a_nonfinite_value_in_any_chunk_of_a_long_tensor_is_excluded(void **state)
{
	enum {
		N = 6 * 4096 + 1000 + 13
	};
	static const uint64_t at[] = { 0, 7, 2047, 2048, 4095, 4096, 6000, 8191,
		10240, 6 * 4096 - 1, 6 * 4096, N - 20, N - 3, N - 1 };

	(void)state;
	for (int isa = KERN_ISA_SCALAR; isa <= KERN_ISA_LAST; isa++) {
		kern_backend b;

		if (!kern_cpu_isa_supported(isa))
			continue;
		b = open_cpu(isa, 0, 0);
		for (int dtype = KERN_F32; dtype <= KERN_BF16; dtype++)
			for (size_t k = 0; k < sizeof(at) / sizeof(at[0]); k++)
				for (int u = 1; u < 4; u++)
					run_case_at(&b, dtype, N, 0, REF_MIXED,
					    u & 1, u >> 1, 2,
					    kern_cpu_isa_name(isa), at[k], k);
		kern_backend_close(&b);
	}
}

static void
test_every_float16_and_bfloat16_widens_exactly(void **state)
{
	uint16_t *h = ref_alloc(65536 * sizeof(uint16_t));
	float *acc = ref_alloc(65536 * sizeof(float));

	(void)state;
	for (uint32_t i = 0; i < 65536; i++)
		h[i] = (uint16_t)i;
	for (int isa = KERN_ISA_SCALAR; isa <= KERN_ISA_LAST; isa++) {
		kern_backend b;

		if (!kern_cpu_isa_supported(isa))
			continue;
		b = open_cpu(isa, 0, 0);
		for (int dtype = KERN_F16; dtype <= KERN_BF16; dtype++) {
			kern_stats st;
			ref_stats ref;
			kern_job job = { .grad = h,
				.n = 65536,
				.dtype = dtype,
				.stats = &st,
				.acc = acc };

			memset(&st, 0, sizeof(st));
			memset(&ref, 0, sizeof(ref));
			memset(acc, 0, 65536 * sizeof(float));
			assert_int_equal(b.ops->stats(b.ctx, &job, NULL), 0);
			ref_add(&ref, h, 65536, dtype);
			ref_check(&st, &ref, REL, dtype_names[dtype]);
			/* acc = 0 + g: the widened value (+0 for -0). */
			for (uint32_t i = 0; i < 65536; i++) {
				float w = ref_widen(h, i, dtype);
				float want = isfinite(w) ? 0.0f + w : 0.0f;

				if (memcmp(&acc[i], &want, 4) != 0)
					fail_msg("%s %s: 0x%04x widens to "
						 "%a, want %a",
					    kern_cpu_isa_name(isa),
					    dtype_names[dtype], i,
					    (double)acc[i], (double)want);
			}
		}
		kern_backend_close(&b);
	}
	ref_free(acc);
	ref_free(h);
}

/* A split tensor: the updates are elementwise, so bit-identical to the
 * single-threaded ones; the counts and maximum exact; the sums equal up to
 * rounding. */
static void
test_threads_give_the_single_thread_results(void **state)
{
	const uint64_t n = 300007;
	float *g = ref_alloc(n * sizeof(float));
	float *acc[2];
	float *m[2];

	(void)state;
	ref_fill(g, n, KERN_F32, REF_SPECIALS, 99);
	for (int k = 0; k < 2; k++) {
		acc[k] = ref_alloc(n * sizeof(float));
		m[k] = ref_alloc(n * sizeof(float));
	}
	for (int isa = KERN_ISA_SCALAR; isa <= KERN_ISA_LAST; isa++) {
		kern_backend one;

		if (!kern_cpu_isa_supported(isa))
			continue;
		one = open_cpu(isa, 0, 0);
		for (uint32_t threads = 1; threads <= 3; threads++) {
			kern_backend many = open_cpu(isa, threads, 1000);
			kern_stats st[2];
			ref_stats ref;

			memset(st, 0, sizeof(st));
			memset(&ref, 0, sizeof(ref));
			for (int k = 0; k < 2; k++) {
				memset(acc[k], 0, n * sizeof(float));
				memset(m[k], 0, n * sizeof(float));
			}
			for (int step = 0; step < 3; step++) {
				for (int k = 0; k < 2; k++) {
					kern_backend *b = k ? &many : &one;
					kern_job job = { .grad = g,
						.n = n,
						.dtype = KERN_F32,
						.beta = 0.5f,
						.stats = &st[k],
						.acc = acc[k],
						.momentum = m[k] };

					assert_int_equal(b->ops->stats(b->ctx,
							     &job, NULL),
					    0);
				}
				ref_add(&ref, g, n, KERN_F32);
			}
			ref_check(&st[0], &ref, REL, "one thread");
			ref_check(&st[1], &ref, REL, "several threads");
			assert_memory_equal(acc[0], acc[1], n * sizeof(float));
			assert_memory_equal(m[0], m[1], n * sizeof(float));
			kern_backend_close(&many);
		}
		kern_backend_close(&one);
	}
	for (int k = 0; k < 2; k++) {
		ref_free(acc[k]);
		ref_free(m[k]);
	}
	ref_free(g);
}

static void
test_batch_equals_one_call_per_tensor(void **state)
{
	static const uint64_t ns[] = { 0, 1, 17, 4096, 70000 };
	kern_backend b = open_cpu(kern_cpu_isa_best(), 0, 0);
	kern_job jobs[5];
	kern_stats st[5];
	float *g[5];
	float *acc[5];

	(void)state;
	memset(st, 0, sizeof(st));
	for (int k = 0; k < 5; k++) {
		g[k] = ref_alloc((ns[k] + 1) * sizeof(float));
		acc[k] = ref_alloc((ns[k] + 1) * sizeof(float));
		memset(acc[k], 0, (ns[k] + 1) * sizeof(float));
		ref_fill(g[k], ns[k], KERN_F32, REF_SPECIALS, (uint64_t)k);
		jobs[k] = (kern_job){ .grad = g[k],
			.n = ns[k],
			.dtype = KERN_F32,
			.stats = &st[k],
			.acc = acc[k] };
	}
	assert_int_equal(b.ops->stats_batch(b.ctx, jobs, 5, NULL), 0);
	for (int k = 0; k < 5; k++) {
		ref_stats ref;
		float *racc = ref_alloc((ns[k] + 1) * sizeof(float));

		memset(&ref, 0, sizeof(ref));
		memset(racc, 0, (ns[k] + 1) * sizeof(float));
		ref_add(&ref, g[k], ns[k], KERN_F32);
		ref_update(racc, NULL, g[k], ns[k], KERN_F32, 0.0f);
		ref_check(&st[k], &ref, REL, "batch");
		assert_memory_equal(acc[k], racc, ns[k] * sizeof(float));
		ref_free(racc);
		ref_free(acc[k]);
		ref_free(g[k]);
	}
	jobs[0].dtype = 7;
	assert_int_equal(b.ops->stats_batch(b.ctx, jobs, 1, NULL),
	    BELLOWS_EINVAL);
	assert_int_equal(b.ops->stats_batch(b.ctx, NULL, 1, NULL),
	    BELLOWS_EINVAL);
	assert_int_equal(b.ops->stats_batch(b.ctx, NULL, 0, NULL), 0);
	kern_backend_close(&b);
}

static void
test_bad_jobs_and_configs_are_refused(void **state)
{
	kern_backend b;
	kern_config cfg;
	kern_stats st;
	float g[4] = { 1, 2, 3, 4 };
	kern_job job = { .grad = g, .n = 4, .dtype = KERN_F32, .stats = &st };

	(void)state;
	memset(&st, 0, sizeof(st));
	kern_config_init(&cfg);
	cfg.threads = KERN_MAX_THREADS + 1;
	assert_int_equal(kern_backend_open(&b, KERN_HOST, &cfg),
	    BELLOWS_EINVAL);
	kern_config_init(&cfg);
	cfg.isa = KERN_ISA_LAST + 1;
	assert_int_equal(kern_backend_open(&b, KERN_HOST, &cfg),
	    BELLOWS_EINVAL);
	kern_config_init(&cfg);
	cfg.precision = KERN_PRECISION_EXACT + 1;
	assert_int_equal(kern_backend_open(&b, KERN_HOST, &cfg),
	    BELLOWS_EINVAL);
	assert_int_equal(kern_backend_open(&b, 42, NULL), BELLOWS_ENOTSUP);

	assert_int_equal(kern_backend_open(&b, KERN_HOST, NULL), 0);
	assert_int_equal(kern_cpu_ctx_isa(b.ctx), kern_cpu_isa_best());
	job.dtype = 3;
	assert_int_equal(b.ops->stats(b.ctx, &job, NULL), BELLOWS_EINVAL);
	job.dtype = KERN_F32;
	job.stats = NULL;
	assert_int_equal(b.ops->stats(b.ctx, &job, NULL), BELLOWS_EINVAL);
	job.stats = &st;
	job.grad = NULL;
	assert_int_equal(b.ops->stats(b.ctx, &job, NULL), BELLOWS_EINVAL);
	job.n = 0;
	assert_int_equal(b.ops->stats(b.ctx, &job, NULL), 0);
	assert_int_equal(st.count, 0);
	assert_int_equal(b.ops->stats(b.ctx, NULL, NULL), BELLOWS_EINVAL);
	kern_backend_close(&b);
	kern_backend_close(&b);
	assert_null(b.ops);
}

static void
test_stats_merge_adds_counts_and_compensated_sums(void **state)
{
	kern_stats a;
	kern_stats b;

	(void)state;
	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	a.count = 3;
	a.zeros = 1;
	a.sum_sq = 1.0;
	a.abs_sum = 1e16;
	a.max_abs = 2.0;
	b.count = 4;
	b.nonfinite = 2;
	b.sum_sq = 0x1p-60;
	b.abs_sum = 1.0;
	b.max_abs = 5.0;
	kern_stats_merge(&a, &b);
	assert_int_equal(a.count, 7);
	assert_int_equal(a.zeros, 1);
	assert_int_equal(a.nonfinite, 2);
	assert_true(a.max_abs == 5.0);
	/* 1e16 + 1 is not a double: the low part keeps the 1. */
	assert_true(a.abs_sum == 1e16 && a.abs_sum_lo == 1.0);
	assert_true(a.sum_sq == 1.0 && a.sum_sq_lo == 0x1p-60);
	assert_int_equal(kern_dtype_size(KERN_F32), 4);
	assert_int_equal(kern_dtype_size(KERN_F16), 2);
	assert_int_equal(kern_dtype_size(KERN_BF16), 2);
	assert_int_equal(kern_dtype_size(3), 0);
}

/* The relaxed default: every size, dtype and data set on every ISA
 * within KERN_RELAXED_BOUND of the long double reference, counts, maximum
 * and updates exact, and the relaxed sums of an ISA reproducible. */
static void
test_relaxed_sums_are_within_1e_6_on_every_isa_size_and_data_set(void **state)
{
	static const int sets[] = { REF_MIXED, REF_SPECIALS, REF_HUGE_TINY,
		REF_ZEROS, REF_SUBNORMAL, REF_NARROW };

	(void)state;
	sizes_init();
	precision = KERN_PRECISION_RELAXED;
	rel = KERN_RELAXED_BOUND;
	for (int isa = KERN_ISA_SCALAR; isa <= KERN_ISA_LAST; isa++) {
		kern_backend b;

		if (!kern_cpu_isa_supported(isa))
			continue;
		b = open_cpu(isa, 0, 0);
		for (int dtype = KERN_F32; dtype <= KERN_BF16; dtype++)
			for (size_t s = 0; s < sizeof(sets) / sizeof(sets[0]);
			     s++)
				for (size_t k = 0; k < n_sizes; k += 3)
					run_case(&b, dtype, sizes[k], k % 2,
					    sets[s], 1, 1, 2,
					    kern_cpu_isa_name(isa));
		for (uint64_t bad = 0; bad < 5000; bad += 997)
			run_case_at(&b, KERN_F32, 5000, 0, REF_MIXED, 1, 1, 2,
			    kern_cpu_isa_name(isa), bad, bad);
		print_message("%s relaxed: within %g\n", kern_cpu_isa_name(isa),
		    KERN_RELAXED_BOUND);
		kern_backend_close(&b);
	}
	precision = KERN_PRECISION_EXACT;
	rel = REL;
}

/* The relaxed path keeps float sums where it may: on data whose float32
 * sum of 16 squares rounds, its result differs from the exact path's but
 * stays within the bound; and two runs give the same bits. */
static void
test_relaxed_and_exact_paths_differ_only_within_the_bound(void **state)
{
	enum {
		N = 1 << 16
	};
	float *g = ref_alloc(N * sizeof(float));

	(void)state;
	ref_fill(g, N, KERN_F32, REF_NARROW, 99);
	for (int isa = KERN_ISA_SCALAR; isa <= KERN_ISA_LAST; isa++) {
		kern_backend ex, rx;
		kern_stats se, sr, sr2;
		kern_job job = { .grad = g, .n = N, .dtype = KERN_F32 };

		if (!kern_cpu_isa_supported(isa))
			continue;
		precision = KERN_PRECISION_EXACT;
		ex = open_cpu(isa, 0, 0);
		precision = KERN_PRECISION_RELAXED;
		rx = open_cpu(isa, 0, 0);
		memset(&se, 0, sizeof(se));
		memset(&sr, 0, sizeof(sr));
		memset(&sr2, 0, sizeof(sr2));
		job.stats = &se;
		assert_int_equal(ex.ops->stats(ex.ctx, &job, NULL), 0);
		job.stats = &sr;
		assert_int_equal(rx.ops->stats(rx.ctx, &job, NULL), 0);
		job.stats = &sr2;
		assert_int_equal(rx.ops->stats(rx.ctx, &job, NULL), 0);
		print_message("%s: relaxed sum_sq differs from exact by %.3g\n",
		    kern_cpu_isa_name(isa),
		    ref_rel(kern_stats_sum_sq(&sr), kern_stats_sum_sq(&se)));
		assert_true(kern_stats_sum_sq(&sr) != kern_stats_sum_sq(&se));
		assert_true(ref_rel(kern_stats_sum_sq(&sr),
				kern_stats_sum_sq(&se)) <= KERN_RELAXED_BOUND);
		assert_memory_equal(&sr, &sr2, sizeof(sr));
		kern_backend_close(&rx);
		kern_backend_close(&ex);
	}
	precision = KERN_PRECISION_EXACT;
	ref_free(g);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(
		    test_every_isa_matches_the_reference_on_every_size_and_dtype),
		cmocka_unit_test(
		    test_unaligned_pointers_and_update_subsets_match_the_reference),
		cmocka_unit_test(
		    test_adversarial_data_is_counted_and_summed_exactly),
		cmocka_unit_test(
		    test_a_nonfinite_value_in_any_lane_is_excluded),
		cmocka_unit_test(
		    test_a_nonfinite_value_in_any_chunk_of_a_long_tensor_is_excluded),
		cmocka_unit_test(
		    test_every_float16_and_bfloat16_widens_exactly),
		cmocka_unit_test(test_threads_give_the_single_thread_results),
		cmocka_unit_test(test_batch_equals_one_call_per_tensor),
		cmocka_unit_test(test_bad_jobs_and_configs_are_refused),
		cmocka_unit_test(
		    test_stats_merge_adds_counts_and_compensated_sums),
		cmocka_unit_test(
		    test_relaxed_sums_are_within_1e_6_on_every_isa_size_and_data_set),
		cmocka_unit_test(
		    test_relaxed_and_exact_paths_differ_only_within_the_bound),
	};

	print_message("best ISA here: %s\n",
	    kern_cpu_isa_name(kern_cpu_isa_best()));
	return cmocka_run_group_tests_name("kernels cpu statistics", tests,
	    NULL, NULL);
}
