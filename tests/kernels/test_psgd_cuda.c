/* test_psgd_cuda - PowerSGD's cuBLAS twin (bellows_psgd_*_cuda, on
 * kernels/cuda/kern_cuda_powersgd.h) against the CPU stages of bellows/codec.h.
 *
 * On the same inputs, stage by stage: the error-feedback addition and the
 * residual's subtraction bit for bit (one float operation each), the
 * products and the orthogonalisation within 1e-4 of the largest magnitude
 * (cuBLAS and OpenBLAS sum in other orders, and the Gram-Schmidt variants
 * differ by rounding), for ranks 1 to 32 and odd sizes; the residual is M
 * minus the GPU's decoded output exactly. Exits 77 (skipped) when the build
 * has no cuBLAS twin or the machine no CUDA device.
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

#include <bellows/codec.h>
#include <bellows/error.h>

#ifdef KERN_HAVE_CUBLAS
#include <cuda_runtime_api.h>

static bellows_psgd_cuda *gpu; /* the public twin's context */

static uint64_t rng_state = 0x452821e638d01377ull;

static float
unif(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (
	    float)((double)(rng_state >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static float *
host(uint64_t n, float scale)
{
	float *v = malloc(n * sizeof(float));

	assert_non_null(v);
	for (uint64_t i = 0; i < n; i++)
		v[i] = unif() * scale;
	return v;
}

static float *
dev(const float *src, uint64_t n)
{
	void *d = NULL;

	assert_int_equal(cudaMalloc(&d, n * sizeof(float)), cudaSuccess);
	if (src != NULL)
		assert_int_equal(cudaMemcpy(d, src, n * sizeof(float),
				     cudaMemcpyHostToDevice),
		    cudaSuccess);
	return d;
}

static void
back(float *dst, const float *d, uint64_t n)
{
	assert_int_equal(cudaDeviceSynchronize(), cudaSuccess);
	assert_int_equal(cudaMemcpy(dst, d, n * sizeof(float),
			     cudaMemcpyDeviceToHost),
	    cudaSuccess);
}

static void
assert_close(const float *a, const float *b, uint64_t n, const char *what)
{
	double top = 1e-30;

	for (uint64_t i = 0; i < n; i++)
		if (fabs(b[i]) > top)
			top = fabs(b[i]);
	for (uint64_t i = 0; i < n; i++)
		if (!(fabs(a[i] - b[i]) <= 1e-4 * top)) {
			fprintf(stderr, "%s [%llu]: %.9g vs %.9g\n", what,
			    (unsigned long long)i, a[i], b[i]);
			fail();
		}
}

static void
twin_step(uint64_t rows, uint64_t cols, uint32_t rank)
{
	uint64_t mn = rows * cols, np = rows * rank, nq = cols * rank;
	float *e = host(mn, 0.5f), *g = host(mn, 1.0f), *q = host(nq, 1.0f);
	float *p = malloc(np * 4), *out = malloc(mn * 4);
	float *hm = malloc(mn * 4), *hp = malloc(np * 4), *hq = malloc(nq * 4);
	float *ho = malloc(mn * 4);
	float *de = dev(e, mn), *dg = dev(g, mn), *dq = dev(q, nq);
	float *dp = dev(NULL, np), *dout = dev(NULL, mn);

	/* Stage 1 on both; then stage 2 and 3 from the CPU's inputs. */
	assert_int_equal(bellows_psgd_project(rows, cols, rank, 1, &e,
			     (const float *const *)&g, (const float *const *)&q,
			     &p),
	    0);
	assert_int_equal(bellows_psgd_project_cuda(gpu, rows, cols, rank, 1,
			     &de, (const float *const *)&dg,
			     (const float *const *)&dq, &dp),
	    0);
	back(hm, de, mn);
	back(hp, dp, np);
	assert_memory_equal(hm, e, mn * 4);
	assert_close(hp, p, np, "P = M Q");

	assert_int_equal(cudaMemcpy(dp, p, np * 4, cudaMemcpyHostToDevice),
	    cudaSuccess);
	assert_int_equal(bellows_psgd_power(rows, cols, rank, 1,
			     (const float *const *)&e, &p, &q),
	    0);
	assert_int_equal(bellows_psgd_power_cuda(gpu, rows, cols, rank, 1,
			     (const float *const *)&de, &dp, &dq),
	    0);
	back(hp, dp, np);
	back(hq, dq, nq);
	assert_close(hp, p, np, "orthogonalised P");
	assert_close(hq, q, nq, "Q = M^T P");

	assert_int_equal(cudaMemcpy(dp, p, np * 4, cudaMemcpyHostToDevice),
	    cudaSuccess);
	assert_int_equal(cudaMemcpy(dq, q, nq * 4, cudaMemcpyHostToDevice),
	    cudaSuccess);
	assert_int_equal(bellows_psgd_decode(rows, cols, rank, 1, &e,
			     (const float *const *)&p, (const float *const *)&q,
			     &out),
	    0);
	assert_int_equal(bellows_psgd_decode_cuda(gpu, rows, cols, rank, 1, &de,
			     (const float *const *)&dp,
			     (const float *const *)&dq, &dout),
	    0);
	back(ho, dout, mn);
	assert_close(ho, out, mn, "P Q^T");
	{
		float *before = hm, *after = malloc(mn * 4);

		back(after, de, mn);
		for (uint64_t i = 0; i < mn; i++)
			assert_true(after[i] == before[i] - ho[i]);
		free(after);
	}
	cudaFree(de);
	cudaFree(dg);
	cudaFree(dq);
	cudaFree(dp);
	cudaFree(dout);
	free(e);
	free(g);
	free(q);
	free(p);
	free(out);
	free(hm);
	free(hp);
	free(hq);
	free(ho);
}

static void
test_psgd_cuda_matches_the_cpu(void **state)
{
	static const uint64_t dims[] = { 1, 3, 17, 64, 129, 1000 };

	(void)state;
	for (size_t a = 0; a < 6; a++)
		for (size_t b = 0; b < 6; b++) {
			uint64_t lim = dims[a] < dims[b] ? dims[a] : dims[b];

			for (uint32_t r = 1; r <= 32 && r <= lim;
			     r = r < 4 ? r + 1 : r * 2)
				twin_step(dims[a], dims[b], r);
		}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_psgd_cuda_matches_the_cpu),
	};
	int rc = bellows_psgd_cuda_open(NULL, &gpu);

	if (rc == BELLOWS_ENOTSUP) {
		printf("no CUDA device: skipped\n");
		return 77;
	}
	if (rc != 0) {
		fprintf(stderr, "bellows_psgd_cuda_open: %d\n", rc);
		return 1;
	}
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	bellows_psgd_cuda_close(&gpu);
	return rc;
}

#else

int
main(void)
{
	printf("built without the cuBLAS twin: skipped\n");
	return 77;
}

#endif
