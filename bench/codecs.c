/* codecs - the 1-bit and 2-bit quantisers and top-k against memcpy.
 *
 * For gradients of 64 KiB to 256 MiB of float32 (powers of 4), on one
 * thread, for every instruction set this processor runs: memcpy of the
 * gradient's bytes, and for each of 1-bit and 2-bit the encode with error
 * feedback (reads g and the residual, writes the residual and the codes)
 * and the decode (reads the codes, writes the values). The kernels are the
 * ones libbellows runs (kernels/cpu/kern_codec.h). Each measurement repeats the
 * call on the same buffers for at least 20 ms; variants are interleaved
 * within each of --reps rounds, and the table shows medians. Throughput is
 * gradient (or decoded) float32 bytes per second; "e/c" is memcpy time over
 * encode time, "d/c" over decode time.
 *
 * The encode's traffic is 3 B for B gradient bytes plus the codes (the
 * traffic of a 1.5 B memcpy): its bound is about 0.65 of memcpy.
 *
 * Top-k at 1 % (k = n / 100, kernels/cpu/kern_topk.h, one scalar kernel for
 * every ISA): the encode with error feedback and the decode (zeroes the
 * n values, writes the k), in GB/s of gradient values as the others. The
 * line before the last reads
 *   codecs: topk 1% encode GB/s (1-16 MiB, 1 thread, median): X.XX
 *
 * Then the best ISA on all threads (-t, default one per online
 * processor; every size split, from 2048 values on: the library's own
 * default splits from 1 Mi values), through kern_codec_par as libbellows
 * runs it, with each variant's speed-up over the one-thread table ("x"
 * columns), and the line
 *   codecs: 2bit encode all/1 thread (1-16 MiB, N threads, median): X.XX
 *
 * Then PowerSGD's stages (codecs_powersgd.c; -P runs only those), ending
 * with the line
 *   codecs: powersgd step GB/s (1024x1024, rank 4, 1 thread): X.XX
 *
 * Then top-k 1 % on 1 Mi values with 0 to 100 % exact zeros
 * (codecs_topk_sparse.c; -S runs only those), ending with the line
 *   codecs: topk 1% encode ms at 99.5% zeros (1 Mi values, 1 thread,
 *   median): X.XX
 *
 * The last line reads
 *   codecs: 2bit encode/memcpy (1-16 MiB, 1 thread, median): X.XX
 * the median over 1, 4 and 16 MiB of the best ISA's 2-bit e/c.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "benchutil.h"
#include "kernels/cpu/kern_codec.h"
#include "kernels/cpu/kern_codec_par.h"
#include "kernels/cpu/kern_stats.h"
#include "kernels/cpu/kern_topk.h"
#include "kernels/kernels.h"

#define MIN_BYTES  (64ull << 10)  /* smallest gradient */
#define MAX_BYTES  (256ull << 20) /* largest gradient */
#define MEASURE_NS 20000000ull    /* shortest measurement */
#define MAX_REPS   64             /* --reps limit */
#define MAX_SIZES  16             /* sizes in the table */

void bench_powersgd(int reps);    /* codecs_powersgd.c: PowerSGD's rows */
void bench_topk_sparse(int reps); /* codecs_topk_sparse.c: sparse top-k */

/* The measured variants, in the table's column order. */
enum {
	V_COPY, /* memcpy of the gradient bytes */
	V_ENC1, /* 1-bit encode with error feedback */
	V_DEC1, /* 1-bit decode */
	V_ENC2, /* 2-bit encode with error feedback */
	V_DEC2, /* 2-bit decode */
	V_TENC, /* top-k 1 % encode with error feedback */
	V_TDEC, /* top-k 1 % decode */
	N_VARIANTS,
};

/* Buffers of one size. */
typedef struct bench_case {
	uint64_t n;              /* values */
	float *g;                /* gradient */
	float *res;              /* residual */
	float *dst;              /* memcpy destination and decode output */
	uint8_t *out;            /* codes */
	const kern_codec_fns *f; /* the ISA's kernels */
	kern_codec_par *par;     /* threads; NULL: the one-thread kernels */
} bench_case;

/* Variant v through kern_codec_par (all threads). */
static void
run_par(bench_case *c, int v)
{
	uint64_t k = c->n / 100;

	switch (v) {
	case V_COPY:
		memcpy(c->dst, c->g, c->n * 4);
		break;
	case V_ENC1:
	case V_ENC2:
		kern_codec_par_encode(c->par, c->f, v == V_ENC1 ? 1 : 2, 0.5f,
		    KERN_F32, c->g, c->res, c->n, c->out);
		break;
	case V_DEC1:
	case V_DEC2:
		kern_codec_par_decode(c->par, c->f, v == V_DEC1 ? 1 : 2, 0.5f,
		    c->out, c->n, c->dst, 0);
		break;
	case V_TENC:
		kern_codec_par_topk(c->par, KERN_ISA_AUTO, KERN_F32, c->g,
		    c->res, c->n, k, c->out, c->out + k * 4);
		break;
	default:
		kern_topk_decode(c->out, c->out + k * 4, k, c->n, c->dst, 0);
		break;
	}
}

static void
run(bench_case *c, int v)
{
	if (c->par != NULL) {
		run_par(c, v);
		return;
	}
	switch (v) {
	case V_COPY:
		memcpy(c->dst, c->g, c->n * 4);
		break;
	case V_ENC1:
		c->f->enc1(c->g, c->res, c->n, 0.5f, c->out);
		break;
	case V_DEC1:
		c->f->dec1(c->out, c->n, 0.5f, c->dst, 0);
		break;
	case V_ENC2:
		c->f->enc2(c->g, c->res, c->n, 0.5f, c->out);
		break;
	case V_DEC2:
		c->f->dec2(c->out, c->n, 0.5f, c->dst, 0);
		break;
	case V_TENC:
		kern_topk_encode(c->g, c->res, c->n, c->n / 100, c->out,
		    c->out + c->n / 100 * 4);
		break;
	default:
		kern_topk_decode(c->out, c->out + c->n / 100 * 4, c->n / 100,
		    c->n, c->dst, 0);
		break;
	}
}

/* Seconds per call of variant v, over at least MEASURE_NS. */
static double
measure(bench_case *c, int v)
{
	uint64_t t0 = bench_now_ns(), t;
	uint64_t calls = 0;

	do {
		run(c, v);
		calls++;
		t = bench_now_ns();
	} while (t - t0 < MEASURE_NS);
	return (double)(t - t0) / 1e9 / (double)calls;
}

int
main(int argc, char **argv)
{
	static const char *const names[N_VARIANTS] = { "memcpy", "1b-enc",
		"1b-dec", "2b-enc", "2b-dec", "tk-enc", "tk-dec" };
	int reps = 5, opt, best = kern_cpu_isa_best(), only_psgd = 0;
	int only_sparse = 0;
	long threads = sysconf(_SC_NPROCESSORS_ONLN);
	double one[MAX_SIZES][N_VARIANTS], gain[MAX_SIZES];
	int n_one = 0, n_gain = 0;
	kern_codec_par *par = NULL;
	uint64_t max = MAX_BYTES;
	double big[MAX_SIZES], tk[MAX_SIZES];
	int n_big = 0, n_tk = 0;
	float *g, *res, *dst;
	uint8_t *out;

	while ((opt = getopt(argc, argv, "r:m:t:PS")) != -1) {
		if (opt == 'P')
			only_psgd = 1;
		else if (opt == 'S')
			only_sparse = 1;
		else if (opt == 'r')
			reps = atoi(optarg);
		else if (opt == 't')
			threads = atol(optarg);
		else if (opt == 'm')
			max = strtoull(optarg, NULL, 10) << 20;
		else {
			fprintf(stderr,
			    "usage: codecs [-r reps] [-m max MiB] [-t threads] "
			    "[-P] [-S]\n");
			return 2;
		}
	}
	if (reps < 1 || reps > MAX_REPS || max < MIN_BYTES || threads < 1 ||
	    threads > KERN_MAX_THREADS + 1) {
		fprintf(stderr, "codecs: bad -r, -m or -t\n");
		return 2;
	}
	if (only_psgd) {
		bench_powersgd(reps);
		return 0;
	}
	if (only_sparse) {
		bench_topk_sparse(reps);
		printf("\n");
		return 0;
	}
	g = bench_alloc("codecs", max);
	res = bench_alloc("codecs", max);
	dst = bench_alloc("codecs", max);
	out = bench_alloc("codecs", max / 16 + 64);
	{
		uint32_t x = 12345;

		for (uint64_t i = 0; i < max / 4; i++) {
			x = x * 1664525u + 1013904223u;
			g[i] = ((float)(x >> 8) / 16777216.0f - 0.5f) * 0.4f;
		}
	}
	printf(
	    "1-bit and 2-bit quantisers (threshold 0.5) and top-k 1 %% vs "
	    "memcpy, 1 thread; GB/s of float32 values, medians of %d rounds\n",
	    reps);
	for (int isa = KERN_ISA_SCALAR; isa <= KERN_ISA_LAST; isa++) {
		const kern_codec_fns *f = kern_codec_get(isa);

		if (f == NULL)
			continue;
		printf("\n%s%s\n%9s", kern_cpu_isa_name(isa),
		    isa == best ? " (libbellows' choice here)" : "", "size");
		for (int v = 0; v < N_VARIANTS; v++)
			printf(" %8s", names[v]);
		printf(" %6s %6s %6s %6s\n", "1b e/c", "1b d/c", "2b e/c",
		    "2b d/c");
		for (uint64_t bytes = MIN_BYTES; bytes <= max; bytes *= 4) {
			bench_case c = { bytes / 4, g, res, dst, out, f, NULL };
			double t[N_VARIANTS][MAX_REPS], med[N_VARIANTS];
			char size[32];

			memset(res, 0, bytes);
			for (int r = 0; r < reps; r++)
				for (int v = 0; v < N_VARIANTS; v++)
					t[v][r] = measure(&c, v);
			for (int v = 0; v < N_VARIANTS; v++)
				med[v] = bench_median(t[v], reps);
			if (bytes >= 1ull << 20)
				snprintf(size, sizeof(size), "%llu MiB",
				    (unsigned long long)(bytes >> 20));
			else
				snprintf(size, sizeof(size), "%llu KiB",
				    (unsigned long long)(bytes >> 10));
			printf("%9s", size);
			for (int v = 0; v < N_VARIANTS; v++)
				printf(" %8.2f", (double)bytes / med[v] / 1e9);
			printf(" %6.2f %6.2f %6.2f %6.2f\n",
			    med[V_COPY] / med[V_ENC1],
			    med[V_COPY] / med[V_DEC1],
			    med[V_COPY] / med[V_ENC2],
			    med[V_COPY] / med[V_DEC2]);
			fflush(stdout);
			if (isa == best && n_one < MAX_SIZES)
				memcpy(one[n_one++], med, sizeof(med));
			if (isa == best && bytes >= 1ull << 20 &&
			    bytes <= 16ull << 20 && n_big < MAX_SIZES)
				big[n_big++] = med[V_COPY] / med[V_ENC2];
			if (isa == best && bytes >= 1ull << 20 &&
			    bytes <= 16ull << 20 && n_tk < MAX_SIZES)
				tk[n_tk++] = (double)bytes / med[V_TENC] / 1e9;
		}
	}
	if (kern_codec_par_new((uint32_t)threads, 2 * KERN_CODEC_PAR_ALIGN,
		&par) != 0) {
		fprintf(stderr, "codecs: cannot start %ld threads\n", threads);
		return 1;
	}
	printf("\n%s, all threads (%ld), split from 2048 values\n%9s",
	    kern_cpu_isa_name(best), threads, "size");
	for (int v = 0; v < N_VARIANTS; v++)
		printf(" %8s", names[v]);
	printf(" %6s %6s %6s %6s %6s\n", "1b-e x", "1b-d x", "2b-e x", "2b-d x",
	    "tk-e x");
	for (uint64_t bytes = MIN_BYTES, si = 0; bytes <= max && si < MAX_SIZES;
	     bytes *= 4, si++) {
		bench_case c = { bytes / 4, g, res, dst, out,
			kern_codec_get(best), par };
		double t[N_VARIANTS][MAX_REPS], med[N_VARIANTS];
		char size[32];

		memset(res, 0, bytes);
		for (int r = 0; r < reps; r++)
			for (int v = 0; v < N_VARIANTS; v++)
				t[v][r] = measure(&c, v);
		for (int v = 0; v < N_VARIANTS; v++)
			med[v] = bench_median(t[v], reps);
		if (bytes >= 1ull << 20)
			snprintf(size, sizeof(size), "%llu MiB",
			    (unsigned long long)(bytes >> 20));
		else
			snprintf(size, sizeof(size), "%llu KiB",
			    (unsigned long long)(bytes >> 10));
		printf("%9s", size);
		for (int v = 0; v < N_VARIANTS; v++)
			printf(" %8.2f", (double)bytes / med[v] / 1e9);
		printf(" %6.2f %6.2f %6.2f %6.2f %6.2f\n",
		    one[si][V_ENC1] / med[V_ENC1],
		    one[si][V_DEC1] / med[V_DEC1],
		    one[si][V_ENC2] / med[V_ENC2],
		    one[si][V_DEC2] / med[V_DEC2],
		    one[si][V_TENC] / med[V_TENC]);
		fflush(stdout);
		if (bytes >= 1ull << 20 && bytes <= 16ull << 20)
			gain[n_gain++] = one[si][V_ENC2] / med[V_ENC2];
	}
	kern_codec_par_destroy(&par);
	printf("\ncodecs: 2bit encode all/1 thread (1-16 MiB, %ld threads, "
	       "median): %.2f",
	    threads, n_gain > 0 ? bench_median(gain, n_gain) : 0.0);
	bench_powersgd(reps);
	bench_topk_sparse(reps);
	printf("\ncodecs: topk 1%% encode GB/s (1-16 MiB, 1 thread, median): "
	       "%.2f",
	    n_tk > 0 ? bench_median(tk, n_tk) : 0.0);
	printf("\ncodecs: 2bit encode/memcpy (1-16 MiB, 1 thread, median): "
	       "%.2f\n",
	    n_big > 0 ? bench_median(big, n_big) : 0.0);
	free(g);
	free(res);
	free(dst);
	free(out);
	return 0;
}
