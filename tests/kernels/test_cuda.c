/* test_cuda - the CUDA kernels against the CPU ones and the reference.
 *
 * Needs a CUDA device: exits 77 (skipped) when the CUDA backend cannot
 * open, because this build has no CUDA or the machine no device. On a
 * device: the statistics within 1e-12 of the long double reference with
 * exact counts and maximum, the accumulator and momentum bit-for-bit equal
 * to the CPU backend's (same data, same steps), for every dtype and sizes
 * around the block and grid boundaries; the batched launch against one
 * launch per tensor; the histogram against the CPU's; and the errors.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bellows/error.h>

#include "kernels/kernels.h"
#include "reference.h"

#define REL 1e-12

static kern_backend cuda; /* the backend under test */
static kern_backend cpu;  /* the one it must agree with */

static void *
dev_alloc(size_t bytes)
{
	void *p = NULL;

	assert_int_equal(cuda.ops->mem_alloc(cuda.ctx, bytes, &p), 0);
	return p;
}

static void
dev_in(void *dst, const void *src, size_t bytes)
{
	assert_int_equal(cuda.ops->copy_in(cuda.ctx, dst, src, bytes, NULL), 0);
}

static void
dev_out(void *dst, const void *src, size_t bytes)
{
	assert_int_equal(cuda.ops->copy_out(cuda.ctx, dst, src, bytes, NULL),
	    0);
	assert_int_equal(cuda.ops->synchronize(cuda.ctx, NULL), 0);
}

/* One tensor, `steps` observations, on both backends. */
static void
run_twin(int dtype, uint64_t n, int data, int with_acc, int with_m, int steps)
{
	size_t esz = kern_dtype_size(dtype);
	size_t fbytes = (n > 0 ? n : 1) * sizeof(float);
	void *g = ref_alloc(n * esz);
	float *acc = ref_alloc(fbytes);
	float *m = ref_alloc(fbytes);
	float *dacc_host = ref_alloc(fbytes);
	float *dm_host = ref_alloc(fbytes);
	void *dg = dev_alloc(n * esz);
	float *dacc = dev_alloc(fbytes);
	float *dm = dev_alloc(fbytes);
	kern_stats *dst = dev_alloc(sizeof(kern_stats));
	void *scratch = dev_alloc(cuda.ops->scratch_size);
	kern_stats st_cpu;
	kern_stats st_dev;
	ref_stats ref;
	char what[128];

	memset(&st_cpu, 0, sizeof(st_cpu));
	memset(&ref, 0, sizeof(ref));
	for (uint64_t i = 0; i < n; i++) {
		acc[i] = -0.0f;
		m[i] = (float)(i % 5) * 0.5f - 1.0f;
	}
	dev_in(dacc, acc, n * sizeof(float));
	dev_in(dm, m, n * sizeof(float));
	for (int s = 0; s < steps; s++) {
		kern_job hj = { .grad = g,
			.n = n,
			.dtype = dtype,
			.beta = 0.9f,
			.stats = &st_cpu,
			.acc = with_acc ? acc : NULL,
			.momentum = with_m ? m : NULL };
		kern_job dj = { .grad = dg,
			.n = n,
			.dtype = dtype,
			.beta = 0.9f,
			.stats = dst,
			.acc = with_acc ? dacc : NULL,
			.momentum = with_m ? dm : NULL,
			.scratch = scratch };

		ref_fill(g, n, dtype, data, n + (uint64_t)s * 977);
		dev_in(dg, g, n * esz);
		assert_int_equal(cuda.ops->stats(cuda.ctx, &dj, NULL), 0);
		assert_int_equal(cpu.ops->stats(cpu.ctx, &hj, NULL), 0);
		ref_add(&ref, g, n, dtype);
	}
	dev_out(&st_dev, dst, sizeof(st_dev));
	dev_out(dacc_host, dacc, n * sizeof(float));
	dev_out(dm_host, dm, n * sizeof(float));
	snprintf(what, sizeof(what), "cuda dtype %d n=%llu data=%d", dtype,
	    (unsigned long long)n, data);
	ref_check(&st_dev, &ref, REL, what);
	if (memcmp(dacc_host, acc, n * sizeof(float)) != 0)
		fail_msg("%s: accumulator differs from the CPU's", what);
	if (memcmp(dm_host, m, n * sizeof(float)) != 0)
		fail_msg("%s: momentum differs from the CPU's", what);
	cuda.ops->mem_free(cuda.ctx, scratch);
	cuda.ops->mem_free(cuda.ctx, dst);
	cuda.ops->mem_free(cuda.ctx, dm);
	cuda.ops->mem_free(cuda.ctx, dacc);
	cuda.ops->mem_free(cuda.ctx, dg);
	ref_free(dm_host);
	ref_free(dacc_host);
	ref_free(m);
	ref_free(acc);
	ref_free(g);
}

static void
test_cuda_matches_the_cpu_bit_for_bit_on_every_dtype_and_size(void **state)
{
	static const uint64_t ns[] = { 1, 31, 32, 33, 255, 256, 257, 2047, 2048,
		2049, 65535, 65537, 1000003, 5000011 };

	(void)state;
	for (int dtype = KERN_F32; dtype <= KERN_BF16; dtype++)
		for (size_t k = 0; k < sizeof(ns) / sizeof(ns[0]); k++)
			run_twin(dtype, ns[k], REF_SPECIALS, 1, 1, 3);
}

static void
test_cuda_handles_adversarial_data(void **state)
{
	static const int sets[] = { REF_HUGE_TINY, REF_ZEROS, REF_SUBNORMAL,
		REF_NARROW };

	(void)state;
	for (int dtype = KERN_F32; dtype <= KERN_BF16; dtype++)
		for (size_t s = 0; s < sizeof(sets) / sizeof(sets[0]); s++)
			run_twin(dtype, 100003, sets[s], 1, 1, 2);
}

static void
test_cuda_batch_equals_one_launch_per_tensor(void **state)
{
	enum {
		T = 40
	}; /* more than one batched launch */
	kern_job jobs[T];
	void *dg[T];
	float *dacc[T];
	kern_stats *dst;
	void *scratch[T];
	kern_stats st[T];
	kern_stats want[T];
	float *g = ref_alloc(100000 * sizeof(float));
	float *acc = ref_alloc(100000 * sizeof(float));
	float *dacc_host = ref_alloc(100000 * sizeof(float));

	(void)state;
	dst = dev_alloc(T * sizeof(kern_stats));
	memset(want, 0, sizeof(want));
	for (int k = 0; k < T; k++) {
		/* Mostly small, two large enough for their own launch. */
		uint64_t n = k == 7 || k == 30 ? 100000 : (uint64_t)k * 37;

		dg[k] = dev_alloc(n * sizeof(float) + 4);
		dacc[k] = dev_alloc(n * sizeof(float) + 4);
		scratch[k] = dev_alloc(cuda.ops->scratch_size);
		ref_fill(g, n, KERN_F32, REF_SPECIALS, (uint64_t)k);
		dev_in(dg[k], g, n * sizeof(float));
		jobs[k] = (kern_job){ .grad = dg[k],
			.n = n,
			.dtype = KERN_F32,
			.stats = &dst[k],
			.acc = dacc[k],
			.scratch = scratch[k] };
		memset(acc, 0, n * sizeof(float));
		{
			kern_job hj = { .grad = g,
				.n = n,
				.dtype = KERN_F32,
				.stats = &want[k],
				.acc = acc };

			assert_int_equal(cpu.ops->stats(cpu.ctx, &hj, NULL), 0);
		}
	}
	assert_int_equal(cuda.ops->stats_batch(cuda.ctx, jobs, T, NULL), 0);
	dev_out(st, dst, sizeof(st));
	for (int k = 0; k < T; k++) {
		assert_int_equal(st[k].count, want[k].count);
		assert_int_equal(st[k].zeros, want[k].zeros);
		assert_int_equal(st[k].nonfinite, want[k].nonfinite);
		assert_true(st[k].max_abs == want[k].max_abs);
		assert_true(ref_rel(kern_stats_sum_sq(&st[k]),
				kern_stats_sum_sq(&want[k])) <= REL);
		/* Accumulators of tensor 7 are compared bit for bit. */
		if (k == 7) {
			ref_fill(g, 100000, KERN_F32, REF_SPECIALS, 7);
			memset(acc, 0, 100000 * sizeof(float));
			ref_update(acc, NULL, g, 100000, KERN_F32, 0.0f);
			dev_out(dacc_host, dacc[k], 100000 * sizeof(float));
			assert_memory_equal(dacc_host, acc,
			    100000 * sizeof(float));
		}
		cuda.ops->mem_free(cuda.ctx, scratch[k]);
		cuda.ops->mem_free(cuda.ctx, dacc[k]);
		cuda.ops->mem_free(cuda.ctx, dg[k]);
	}
	/* Two jobs sharing statistics in one launch are refused. */
	jobs[1].stats = jobs[2].stats;
	assert_int_equal(cuda.ops->stats_batch(cuda.ctx, jobs + 1, 2, NULL),
	    BELLOWS_EINVAL);
	cuda.ops->mem_free(cuda.ctx, dst);
	ref_free(dacc_host);
	ref_free(acc);
	ref_free(g);
}

static void
test_cuda_histogram_equals_the_cpu_histogram(void **state)
{
	const uint64_t n = 1000003;
	float *g = ref_alloc(n * sizeof(float));
	void *dg = dev_alloc(n * sizeof(float));
	uint64_t *dbins = dev_alloc(256 * sizeof(uint64_t));
	uint64_t got[256];
	uint64_t want[256];

	(void)state;
	for (int dtype = KERN_F32; dtype <= KERN_BF16; dtype++) {
		size_t bytes = n * kern_dtype_size(dtype);

		ref_fill(g, n, dtype, REF_SPECIALS, 5);
		dev_in(dg, g, bytes);
		memset(want, 0, sizeof(want));
		assert_int_equal(cuda.ops->zero(cuda.ctx, dbins, sizeof(got),
				     NULL),
		    0);
		assert_int_equal(cuda.ops->histogram(cuda.ctx, dg, n, dtype,
				     dbins, NULL),
		    0);
		assert_int_equal(cpu.ops->histogram(cpu.ctx, g, n, dtype, want,
				     NULL),
		    0);
		dev_out(got, dbins, sizeof(got));
		assert_memory_equal(got, want, sizeof(got));
	}
	cuda.ops->mem_free(cuda.ctx, dbins);
	cuda.ops->mem_free(cuda.ctx, dg);
	ref_free(g);
}

static void
test_cuda_refuses_bad_jobs(void **state)
{
	kern_stats *dst = dev_alloc(sizeof(kern_stats));
	void *dg = dev_alloc(64);
	kern_job job = { .grad = dg, .n = 4, .dtype = KERN_F32, .stats = dst };

	(void)state;
	/* No scratch. */
	assert_int_equal(cuda.ops->stats(cuda.ctx, &job, NULL), BELLOWS_EINVAL);
	job.scratch = dev_alloc(cuda.ops->scratch_size);
	job.dtype = 9;
	assert_int_equal(cuda.ops->stats(cuda.ctx, &job, NULL), BELLOWS_EINVAL);
	job.dtype = KERN_F32;
	job.grad = NULL;
	assert_int_equal(cuda.ops->stats(cuda.ctx, &job, NULL), BELLOWS_EINVAL);
	job.n = 0;
	assert_int_equal(cuda.ops->stats(cuda.ctx, &job, NULL), 0);
	cuda.ops->mem_free(cuda.ctx, job.scratch);
	cuda.ops->mem_free(cuda.ctx, dg);
	cuda.ops->mem_free(cuda.ctx, dst);
}

int
main(void)
{
	kern_config cpu_cfg;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(
		    test_cuda_matches_the_cpu_bit_for_bit_on_every_dtype_and_size),
		cmocka_unit_test(test_cuda_handles_adversarial_data),
		cmocka_unit_test(test_cuda_batch_equals_one_launch_per_tensor),
		cmocka_unit_test(test_cuda_histogram_equals_the_cpu_histogram),
		cmocka_unit_test(test_cuda_refuses_bad_jobs),
	};
	int rc;

	rc = kern_backend_open(&cuda, KERN_CUDA, NULL);
	if (rc == BELLOWS_ENOTSUP) {
		printf("CUDA backend: %s (CUDA not built, or no device or "
		       "driver here): skipped\n",
		    kern_ops_get(KERN_CUDA) == NULL ? "not built"
						    : "no device");
		return 77;
	}
	if (rc != 0) {
		fprintf(stderr, "CUDA backend: %s\n", bellows_strerror(rc));
		return 1;
	}
	/* The CUDA sums are the exact ones. */
	kern_config_init(&cpu_cfg);
	cpu_cfg.precision = KERN_PRECISION_EXACT;
	if (kern_backend_open(&cpu, KERN_HOST, &cpu_cfg) != 0)
		return 1;
	rc = cmocka_run_group_tests_name("kernels cuda twins", tests, NULL,
	    NULL);
	kern_backend_close(&cpu);
	kern_backend_close(&cuda);
	return rc;
}
