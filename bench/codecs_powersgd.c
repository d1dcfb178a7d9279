/* codecs_powersgd - bench/codecs' PowerSGD rows: the three stages of
 * bellows/codec.h on one thread (set OPENBLAS_NUM_THREADS=1 for that).
 *
 * For layers of 1024 x 1024 and 4096 x 1024 at ranks 1, 4 and 16, each
 * stage's GB/s of gradient (rows x cols float32 bytes) per call:
 * "project" (M = E + G, P = M Q), "power" (orthogonalise P, Q = M^T P),
 * "decode" (out = P Q^T, E = M - out), and "step", all three. Then 64
 * layers of 256 x 256: one step as three batched calls (count 64) against
 * 64 one-layer calls per stage, in ms. Medians of the rounds; the variants
 * are interleaved within each round. The line reads, at the end,
 *   codecs: powersgd step GB/s (1024x1024, rank 4, 1 thread): X.XX
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bellows/codec.h>

#include "benchutil.h"

#define PS_MEASURE_NS 20000000ull /* shortest measurement */
#define PS_MAX_REPS   64          /* as bench/codecs' MAX_REPS */
#define PS_LAYERS     64          /* the batch of small layers */

/* Prints the PowerSGD rows (medians of reps rounds, reps <= PS_MAX_REPS)
 * to stdout; exits 1 if a stage fails. Allocates its buffers per shape. */
void bench_powersgd(int reps);

/* One group of same-shape layers and its buffers. */
typedef struct ps_case {
	uint64_t rows, cols; /* every layer's shape */
	uint32_t rank;       /* columns of P and Q */
	size_t count;        /* layers */
	float *m[PS_LAYERS]; /* residuals (M after project) */
	float *g[PS_LAYERS]; /* gradients */
	float *p[PS_LAYERS]; /* P */
	float *q[PS_LAYERS]; /* Q */
	float *o[PS_LAYERS]; /* decoded gradients */
} ps_case;

enum {
	PS_PROJECT,
	PS_POWER,
	PS_DECODE,
	PS_STEP,
	PS_ONE_BY_ONE,
	PS_N
};

static float
ps_rand(uint32_t *x)
{
	*x = *x * 1664525u + 1013904223u;
	return ((float)(*x >> 8) / 16777216.0f - 0.5f);
}

static void
ps_open(ps_case *c, uint64_t rows, uint64_t cols, uint32_t rank, size_t n)
{
	uint32_t x = 777;

	c->rows = rows;
	c->cols = cols;
	c->rank = rank;
	c->count = n;
	for (size_t i = 0; i < n; i++) {
		c->m[i] = bench_alloc("codecs", rows * cols * 4);
		c->g[i] = bench_alloc("codecs", rows * cols * 4);
		c->o[i] = bench_alloc("codecs", rows * cols * 4);
		c->p[i] = bench_alloc("codecs", rows * rank * 4);
		c->q[i] = bench_alloc("codecs", cols * rank * 4);
		for (uint64_t j = 0; j < rows * cols; j++) {
			c->m[i][j] = 0.0f;
			c->g[i][j] = ps_rand(&x) * 1e-3f;
		}
		for (uint64_t j = 0; j < cols * rank; j++)
			c->q[i][j] = ps_rand(&x);
	}
}

static void
ps_close(ps_case *c)
{
	for (size_t i = 0; i < c->count; i++) {
		free(c->m[i]);
		free(c->g[i]);
		free(c->o[i]);
		free(c->p[i]);
		free(c->q[i]);
	}
}

/* Runs stage v over layers [a, a + n). */
static void
ps_stage(ps_case *c, int v, size_t a, size_t n)
{
	int rc = 0;

	if (v == PS_PROJECT || v == PS_STEP)
		rc |= bellows_psgd_project(c->rows, c->cols, c->rank, n,
		    c->m + a, (const float *const *)c->g + a,
		    (const float *const *)c->q + a, c->p + a);
	if (v == PS_POWER || v == PS_STEP)
		rc |= bellows_psgd_power(c->rows, c->cols, c->rank, n,
		    (const float *const *)c->m + a, c->p + a, c->q + a);
	if (v == PS_DECODE || v == PS_STEP)
		rc |= bellows_psgd_decode(c->rows, c->cols, c->rank, n,
		    c->m + a, (const float *const *)c->p + a,
		    (const float *const *)c->q + a, c->o + a);
	if (rc != 0) {
		fprintf(stderr, "codecs: a PowerSGD stage failed\n");
		exit(1);
	}
}

static void
ps_run(ps_case *c, int v)
{
	if (v == PS_ONE_BY_ONE) {
		for (size_t i = 0; i < c->count; i++)
			ps_stage(c, PS_PROJECT, i, 1);
		for (size_t i = 0; i < c->count; i++)
			ps_stage(c, PS_POWER, i, 1);
		for (size_t i = 0; i < c->count; i++)
			ps_stage(c, PS_DECODE, i, 1);
	} else {
		ps_stage(c, v, 0, c->count);
	}
}

/* Seconds per call of variant v, over at least PS_MEASURE_NS. */
static double
ps_measure(ps_case *c, int v)
{
	uint64_t t0 = bench_now_ns(), t, calls = 0;

	do {
		ps_run(c, v);
		calls++;
		t = bench_now_ns();
	} while (t - t0 < PS_MEASURE_NS);
	return (double)(t - t0) / 1e9 / (double)calls;
}

void
bench_powersgd(int reps)
{
	static const uint64_t shapes[][2] = { { 1024, 1024 }, { 4096, 1024 } };
	static const uint32_t ranks[] = { 1, 4, 16 };
	double headline = 0.0;

	printf("\nPowerSGD stages (bellows/codec.h, BLAS %s), 1 layer, GB/s of "
	       "float32 gradient, medians of %d rounds\n%11s %4s %8s %8s %8s "
	       "%8s\n",
	    bellows_psgd_blas(), reps, "layer", "rank", "project", "power",
	    "decode", "step");
	for (size_t s = 0; s < 2; s++)
		for (size_t k = 0; k < 3; k++) {
			ps_case c;
			double t[4][PS_MAX_REPS], med[4];
			double bytes = (double)shapes[s][0] * shapes[s][1] * 4;

			ps_open(&c, shapes[s][0], shapes[s][1], ranks[k], 1);
			for (int r = 0; r < reps; r++)
				for (int v = 0; v < 4; v++)
					t[v][r] = ps_measure(&c, v);
			printf("%5llux%-5llu %4u",
			    (unsigned long long)shapes[s][0],
			    (unsigned long long)shapes[s][1], ranks[k]);
			for (int v = 0; v < 4; v++) {
				med[v] = bench_median(t[v], reps);
				printf(" %8.2f", bytes / med[v] / 1e9);
			}
			printf("\n");
			fflush(stdout);
			if (s == 0 && ranks[k] == 4)
				headline = bytes / med[PS_STEP] / 1e9;
			ps_close(&c);
		}
	printf(
	    "\n%d layers of 256x256, one step: batched (3 calls) against one "
	    "by one (3 x %d calls), ms\n%4s %9s %10s %6s\n",
	    PS_LAYERS, PS_LAYERS, "rank", "batched", "one-by-one", "ratio");
	for (size_t k = 0; k < 3; k++) {
		ps_case c;
		double tb[PS_MAX_REPS], to[PS_MAX_REPS], mb, mo;

		ps_open(&c, 256, 256, ranks[k], PS_LAYERS);
		for (int r = 0; r < reps; r++) {
			tb[r] = ps_measure(&c, PS_STEP);
			to[r] = ps_measure(&c, PS_ONE_BY_ONE);
		}
		mb = bench_median(tb, reps);
		mo = bench_median(to, reps);
		printf("%4u %9.3f %10.3f %6.2f\n", ranks[k], mb * 1e3, mo * 1e3,
		    mo / mb);
		fflush(stdout);
		ps_close(&c);
	}
	printf("\ncodecs: powersgd step GB/s (1024x1024, rank 4, 1 thread): "
	       "%.2f\n",
	    headline);
}
