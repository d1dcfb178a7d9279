/* topk_calls - top-k 1 % encode per call, for callgrind and against memcpy.
 *
 *   topk_calls N R        R calls of kern_topk_encode on N values (k =
 *                         N / 100, the codecs bench's data, error
 *                         feedback carried between calls); run under
 *                         valgrind --tool=callgrind with R and with 0,
 *                         the difference over R is the count per call
 *   topk_calls -t ROUNDS  memcpy and the encode interleaved in 10 ms
 *                         slices, ROUNDS rounds, from 64 KiB to 16 MiB:
 *                         the median ratio memcpy time / encode time and
 *                         the encode's GB/s per size
 *
 * bench/README.md ("Top-k without a fixed cost per call") has the
 * results.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "benchutil.h"
#include "kernels/cpu/kern_topk.h"

#define MAX_N      (4u << 20) /* values: 16 MiB */
#define MAX_ROUNDS 64
#define SLICE_NS   10000000ull

/* The codecs bench's gradient: uniform in [-0.2, 0.2) from an LCG. */
static void
fill(float *g, uint64_t n)
{
	uint32_t x = 12345;

	for (uint64_t i = 0; i < n; i++) {
		x = x * 1664525u + 1013904223u;
		g[i] = ((float)(x >> 8) / 16777216.0f - 0.5f) * 0.4f;
	}
}

/* Nanoseconds per call of memcpy (v 0) or the encode (v 1) over a slice. */
static double
slice(int v, const float *g, float *res, float *dst, uint8_t *o, uint64_t n)
{
	uint64_t k = n / 100, t0 = bench_now_ns(), t, calls = 0;

	do {
		if (v == 0)
			memcpy(dst, g, n * 4);
		else
			kern_topk_encode(g, res, n, k, o, o + 4 * k);
		calls++;
		t = bench_now_ns();
	} while (t - t0 < SLICE_NS);
	return (double)(t - t0) / (double)calls;
}

static int
timed(int rounds)
{
	float *g = bench_alloc("topk_calls", MAX_N * 4);
	float *res = bench_alloc("topk_calls", MAX_N * 4);
	float *dst = bench_alloc("topk_calls", MAX_N * 4);
	uint8_t *o = bench_alloc("topk_calls", MAX_N / 100 * 8 + 64);

	fill(g, MAX_N);
	for (uint64_t n = 16384; n <= MAX_N; n *= 4) {
		double ratio[MAX_ROUNDS], gbs[MAX_ROUNDS];

		memset(res, 0, n * 4);
		for (int r = 0; r < rounds; r++) {
			double tc = slice(0, g, res, dst, o, n);
			double tk = slice(1, g, res, dst, o, n);

			ratio[r] = tc / tk;
			gbs[r] = (double)n * 4 / tk;
		}
		printf("%8llu KiB  topk/memcpy %.3f  topk %.2f GB/s\n",
		    (unsigned long long)(n / 256), bench_median(ratio, rounds),
		    bench_median(gbs, rounds));
	}
	free(g);
	free(res);
	free(dst);
	free(o);
	return 0;
}

int
main(int argc, char **argv)
{
	uint64_t n, k;
	long reps;
	float *g, *res;
	uint8_t *o;

	if (argc == 3 && strcmp(argv[1], "-t") == 0) {
		int rounds = atoi(argv[2]);

		if (rounds < 1 || rounds > MAX_ROUNDS) {
			fprintf(stderr, "topk_calls: ROUNDS is 1 to %d\n",
			    MAX_ROUNDS);
			return 2;
		}
		return timed(rounds);
	}
	if (argc != 3 || (n = strtoull(argv[1], NULL, 10)) < 1 ||
	    n > UINT32_MAX || (reps = atol(argv[2])) < 0) {
		fprintf(stderr,
		    "usage: topk_calls N R | topk_calls -t ROUNDS\n");
		return 2;
	}
	k = n / 100;
	g = bench_alloc("topk_calls", n * 4);
	res = bench_alloc("topk_calls", n * 4);
	o = bench_alloc("topk_calls", k * 8 + 64);
	fill(g, n);
	memset(res, 0, n * 4);
	for (long r = 0; r < reps; r++)
		kern_topk_encode(g, res, n, k, o, o + 4 * k);
	printf("%ld calls of top-k on %llu values, k = %llu\n", reps,
	    (unsigned long long)n, (unsigned long long)k);
	free(g);
	free(res);
	free(o);
	return 0;
}
