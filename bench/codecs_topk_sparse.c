/* codecs_topk_sparse - top-k on mostly zero gradients (bench/codecs).
 *
 * 1 Mi float32 values (4 MiB) of which 0, 90, 99, 99.5 and 100 % are
 * exactly zero (the rest uniform in [-0.2, 0.2) at evenly spread places),
 * k = 1 % (10,485), encode with error feedback on one thread, for every
 * instruction set this processor runs: milliseconds per call, medians of
 * the rounds. With more than n - k zeros every zero ties at the k-th
 * magnitude; the kernel then takes every non-zero value and the zeros of
 * lowest index (kernels/cpu/kern_topk.h, "sparse finish"). The line
 *   codecs: topk 1% encode ms at 99.5% zeros (1 Mi values, 1 thread,
 *   median): X.XX
 * is the best ISA's time at 99.5 % zeros.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "benchutil.h"
#include "kernels/cpu/kern_stats.h"
#include "kernels/cpu/kern_topk.h"
#include "kernels/kernels.h"

#define SPARSE_N    (1u << 20)  /* values per gradient */
#define SPARSE_REPS 64          /* most rounds */
#define SPARSE_NS   20000000ull /* shortest measurement */

void bench_topk_sparse(int reps);

/* Milliseconds per encode of g (n values, k) on isa, over at least
 * SPARSE_NS; res carries the error feedback between calls. */
static double
sparse_ms(int isa, const float *g, float *res, uint64_t n, uint64_t k,
    uint8_t *out)
{
	uint64_t t0 = bench_now_ns(), t, calls = 0;

	do {
		kern_topk_encode_isa(isa, g, res, n, k, out, out + 4 * k);
		calls++;
		t = bench_now_ns();
	} while (t - t0 < SPARSE_NS);
	return (double)(t - t0) / 1e6 / (double)calls;
}

void
bench_topk_sparse(int reps)
{
	static const double zeros[] = { 0.0, 0.9, 0.99, 0.995, 1.0 };
	enum {
		NZ = sizeof(zeros) / sizeof(zeros[0])
	};
	uint64_t n = SPARSE_N, k = n / 100;
	int best = kern_cpu_isa_best();
	double at995 = 0.0;
	float *g[NZ], *res = bench_alloc("codecs", n * 4);
	uint8_t *out = bench_alloc("codecs", 8 * k);

	if (reps > SPARSE_REPS)
		reps = SPARSE_REPS;
	for (int z = 0; z < NZ; z++) {
		uint32_t x = 777;
		uint64_t nnz = (uint64_t)((1.0 - zeros[z]) * (double)n + 0.5);

		g[z] = bench_alloc("codecs", n * 4);
		memset(g[z], 0, n * 4);
		for (uint64_t j = 0; j < nnz; j++) {
			x = x * 1664525u + 1013904223u;
			g[z][j * n / nnz] = ((float)(x >> 8) / 16777216.0f -
						0.5f) *
				0.4f +
			    1e-3f;
		}
	}
	printf("\n\ntop-k 1 %% on mostly zero gradients: 1 Mi float32 values, "
	       "k = %llu, 1 thread; ms per encode, medians of %d rounds\n%9s",
	    (unsigned long long)k, reps, "zeros:");
	for (int z = 0; z < NZ; z++)
		printf("  %6.1f%%", zeros[z] * 100.0);
	printf("\n");
	for (int isa = KERN_ISA_SCALAR; isa <= KERN_ISA_LAST; isa++) {
		double t[NZ][SPARSE_REPS];

		if (!kern_cpu_isa_supported(isa))
			continue;
		for (int r = 0; r < reps; r++)
			for (int z = 0; z < NZ; z++) {
				memset(res, 0, n * 4);
				t[z][r] = sparse_ms(isa, g[z], res, n, k, out);
			}
		printf("%9s", kern_cpu_isa_name(isa));
		for (int z = 0; z < NZ; z++) {
			double m = bench_median(t[z], reps);

			printf(" %9.3f", m);
			if (isa == best && zeros[z] == 0.995)
				at995 = m;
		}
		printf("\n");
		fflush(stdout);
	}
	printf("\ncodecs: topk 1%% encode ms at 99.5%% zeros (1 Mi values, "
	       "1 thread, median): %.2f",
	    at995);
	for (int z = 0; z < NZ; z++)
		free(g[z]);
	free(res);
	free(out);
}
