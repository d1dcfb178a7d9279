/* gcomp_codec - the GComp codec on real gradients: tables, ratios, speed.
 *
 * usage: build/bench/gcomp_codec [--window W] [--measure-ms MS] DIR...
 *
 * Each DIR holds the dumps of one training run (bench/gcomp/dump.py):
 * step_NNNNN.f32 (every parameter's gradient, float32) and step_NNNNN.lv
 * (each value's level from the paper's delta). For each DIR:
 *
 * 1. Bits per exponent over every dump, under
 *    - static:  the table built from the first dump (step 0);
 *    - dynamic: the table rebuilt every W dumps (default 5: every 50 steps
 *               with dumps every 10, the paper's period) from the summed
 *               histograms of the W dumps before (what bellowsd's gcomp
 *               policy does with the window's histograms); the first W
 *               dumps use the static table;
 *    - own:     each dump's own table (the best a table built from the
 *               same data does), and the entropy (the bound);
 *    with the exponent share of the original size (bits / 32).
 * 2. Compression ratio (block bytes, headers included, over float32 bytes)
 *    with the dynamic tables: level 0 (lossless), delta levels (.lv), and
 *    level 3 for every value (the paper's Single-Quant).
 * 3. One core, on the last dump: encode and decode GB/s (float32 bytes
 *    per second of this thread's CPU time, CLOCK_THREAD_CPUTIME_ID, so
 *    that other load on the machine does not count) at level 0 and with
 *    delta levels, on the codec's reference path and its fast path
 *    (bellows_gcomp_force_reference), against memcpy and, when built
 *    with libzstd, zstd levels 1 and 3 on the same bytes. Each is
 *    repeated for at least --measure-ms (default 300) of CPU and the best
 *    of 5 rounds is shown.
 * 4. Level 0 against zstd -1, interleaved: 15 rounds, each timing GComp's
 *    fast encode, zstd -1's compression, GComp's fast and reference
 *    decodes and zstd -1's decompression once in turn (--measure-ms / 15
 *    each), so that load from other work falls on all alike; the medians,
 *    and the median and the worst of the same-round ratios.
 * With libzstd, step 2 also gives zstd -1's ratio on the same dumps and
 * how many dumps GComp's level 0 codes larger than zstd -1.
 */
#include <dirent.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bellows/codec.h>

#include "../benchutil.h"

#ifdef BENCH_HAVE_ZSTD
#include <zstd.h>
#endif

#define MAX_DUMPS 4096

typedef struct dump {
	char path[512];     /* .f32 */
	float *x;           /* values */
	uint8_t *lv;        /* levels, NULL if no .lv */
	uint64_t n;         /* values */
	uint64_t hist[256]; /* exponent histogram */
} dump;

static void *
read_file(const char *path, size_t *ret_len)
{
	FILE *f = fopen(path, "rb");
	long len;
	void *buf;

	if (f == NULL)
		return NULL;
	fseek(f, 0, SEEK_END);
	len = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc(len > 0 ? (size_t)len : 1);
	if (buf == NULL || fread(buf, 1, (size_t)len, f) != (size_t)len) {
		free(buf);
		fclose(f);
		return NULL;
	}
	fclose(f);
	*ret_len = (size_t)len;
	return buf;
}

static int
cmp_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Loads DIR's dumps in step order. Returns their number. */
static int
load_dir(const char *dir, dump *d)
{
	DIR *dh = opendir(dir);
	struct dirent *e;
	char *names[MAX_DUMPS];
	int n = 0;

	if (dh == NULL) {
		fprintf(stderr, "gcomp_codec: cannot open %s\n", dir);
		exit(1);
	}
	while ((e = readdir(dh)) != NULL && n < MAX_DUMPS) {
		size_t l = strlen(e->d_name);

		if (l > 4 && strcmp(e->d_name + l - 4, ".f32") == 0)
			names[n++] = strdup(e->d_name);
	}
	closedir(dh);
	qsort(names, (size_t)n, sizeof(names[0]), cmp_name);
	for (int i = 0; i < n; i++) {
		char lv[600];
		size_t len, lvlen;

		snprintf(d[i].path, sizeof(d[i].path), "%s/%s", dir, names[i]);
		d[i].x = read_file(d[i].path, &len);
		if (d[i].x == NULL || len % 4 != 0) {
			fprintf(stderr, "gcomp_codec: cannot read %s\n",
			    d[i].path);
			exit(1);
		}
		d[i].n = len / 4;
		snprintf(lv, sizeof(lv), "%.*s.lv",
		    (int)(strlen(d[i].path) - 4), d[i].path);
		d[i].lv = read_file(lv, &lvlen);
		if (d[i].lv != NULL && lvlen != d[i].n) {
			free(d[i].lv);
			d[i].lv = NULL;
		}
		memset(d[i].hist, 0, sizeof(d[i].hist));
		bellows_gcomp_histogram(BELLOWS_GCOMP_F32, d[i].x, d[i].n,
		    d[i].hist);
		free(names[i]);
	}
	return n;
}

static bellows_gcomp_table *
table_of(const uint64_t *hist, uint32_t version)
{
	bellows_gcomp_table *t = NULL;

	if (bellows_gcomp_table_build(hist, 8, version, &t) != 0)
		exit(1);
	return t;
}

/* CPU time of this thread in nanoseconds: the machine the numbers were
 * taken on is shared, and a descheduled thread's wall time says nothing
 * about the codec. */
static uint64_t
cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Best-of-5 GB/s of fn over bytes, each round at least ms / 5 of CPU. */
typedef void (*work_fn)(void *ctx);

static double
gbps(work_fn fn, void *ctx, double bytes, unsigned ms)
{
	double best = 0;

	for (int r = 0; r < 5; r++) {
		uint64_t t0 = cpu_ns(), t1;
		uint64_t reps = 0;

		do {
			fn(ctx);
			reps++;
			t1 = cpu_ns();
		} while (t1 - t0 < (uint64_t)ms * 1000000ull / 5);
		if (bytes * (double)reps / (double)(t1 - t0) > best)
			best = bytes * (double)reps / (double)(t1 - t0);
	}
	return best;
}

/* GB/s of fn over bytes, one batch of at least ms of CPU. */
static double
gbps_once(work_fn fn, void *ctx, double bytes, unsigned ms)
{
	uint64_t t0 = cpu_ns(), t1;
	uint64_t reps = 0;

	do {
		fn(ctx);
		reps++;
		t1 = cpu_ns();
	} while (t1 - t0 < (uint64_t)ms * 1000000ull);
	return bytes * (double)reps / (double)(t1 - t0);
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* The median of v[0..n) (sorts v). */
static double
median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

typedef struct speed_ctx {
	const bellows_gcomp_table *t; /* the table */
	const dump *d;                /* the dump coded */
	const uint8_t *levels;        /* NULL: level 0 */
	uint8_t *buf;                 /* block */
	size_t cap, len;              /* its capacity and length */
	float *out;                   /* decoded */
	bellows_gcomp_optimizer opt;  /* for the levels */
	uint8_t *lv;                  /* levels written */
	void *z;                      /* zstd output */
	size_t zcap, zlen;            /* its capacity and length */
	int zlevel;                   /* zstd's level */
} speed_ctx;

static void
do_encode(void *p)
{
	speed_ctx *c = p;

	if (bellows_gcomp_encode(c->t, BELLOWS_GCOMP_F32, c->d->x, c->d->n, 0,
		c->levels, c->buf, c->cap, &c->len, NULL) != 0)
		exit(1);
}

static void
do_decode(void *p)
{
	speed_ctx *c = p;

	if (bellows_gcomp_decode(c->t, c->buf, c->len, BELLOWS_GCOMP_F32,
		c->out, c->d->n, 0, NULL, 0) != 0)
		exit(1);
}

static void
do_levels(void *p)
{
	speed_ctx *c = p;

	if (bellows_gcomp_levels(&c->opt, BELLOWS_GCOMP_F32, c->d->x, c->d->n,
		3, c->lv) != 0)
		exit(1);
}

static void
do_memcpy(void *p)
{
	speed_ctx *c = p;

	memcpy(c->out, c->d->x, c->d->n * 4);
	__asm__ __volatile__("" : : "r"(c->out) : "memory");
}

#ifdef BENCH_HAVE_ZSTD
static void
do_zstd(void *p)
{
	speed_ctx *c = p;

	c->zlen = ZSTD_compress(c->z, c->zcap, c->d->x, c->d->n * 4, c->zlevel);
	if (ZSTD_isError(c->zlen))
		exit(1);
}

static void
do_unzstd(void *p)
{
	speed_ctx *c = p;

	if (ZSTD_isError(ZSTD_decompress(c->out, c->d->n * 4, c->z, c->zlen)))
		exit(1);
}
#endif

#ifdef BENCH_HAVE_ZSTD
#define PAIRED_ROUNDS 15

/* Part 4: GComp level 0 (fast path) and zstd -1 in turn, c's block and
 * zstd buffer set up by the caller. */
static void
paired(speed_ctx *c, double bytes, unsigned ms)
{
	enum {
		ENC,
		ZENC,
		DEC,
		REF,
		ZDEC,
		KINDS
	};
	static const char *names[KINDS] = { "gcomp encode, fast",
		"zstd -1 compress", "gcomp decode, fast",
		"gcomp decode, reference", "zstd -1 decompress" };
	double v[KINDS][PAIRED_ROUNDS], r[4][PAIRED_ROUNDS], worst[4];
	unsigned each = ms / PAIRED_ROUNDS > 0 ? ms / PAIRED_ROUNDS : 1;

	c->levels = NULL;
	c->zlevel = 1;
	for (int k = 0; k < PAIRED_ROUNDS; k++) {
		v[ENC][k] = gbps_once(do_encode, c, bytes, each);
		v[ZENC][k] = gbps_once(do_zstd, c, bytes, each);
		v[DEC][k] = gbps_once(do_decode, c, bytes, each);
		bellows_gcomp_force_reference(1);
		v[REF][k] = gbps_once(do_decode, c, bytes, each);
		bellows_gcomp_force_reference(0);
		v[ZDEC][k] = gbps_once(do_unzstd, c, bytes, each);
		r[0][k] = v[ENC][k] / v[ZENC][k];
		r[1][k] = v[DEC][k] / v[ZDEC][k];
		r[2][k] = v[DEC][k] / v[REF][k];
		r[3][k] = (double)c->len / (double)c->zlen;
	}
	printf("\nLevel 0 and zstd -1 in turn, %d rounds of %u ms each, "
	       "last dump (%zu against %zu bytes):\n\n"
	       "| | median GB/s |\n|---|---|\n",
	    PAIRED_ROUNDS, each, c->len, c->zlen);
	for (int i = 0; i < KINDS; i++)
		printf("| %s | %.3f |\n", names[i],
		    median(v[i], PAIRED_ROUNDS));
	for (int i = 0; i < 4; i++) {
		worst[i] = r[i][0];
		for (int k = 1; k < PAIRED_ROUNDS; k++)
			worst[i] = r[i][k] < worst[i] ? r[i][k] : worst[i];
	}
	printf(
	    "\n| same-round ratio | median | worst round |\n|---|---|---|\n");
	printf("| gcomp encode / zstd -1 compress | %.2f | %.2f |\n",
	    median(r[0], PAIRED_ROUNDS), worst[0]);
	printf("| gcomp decode / zstd -1 decompress | %.2f | %.2f |\n",
	    median(r[1], PAIRED_ROUNDS), worst[1]);
	printf("| gcomp decode, fast / reference | %.2f | %.2f |\n",
	    median(r[2], PAIRED_ROUNDS), worst[2]);
	printf("| gcomp bytes / zstd -1 bytes | %.4f | |\n",
	    median(r[3], PAIRED_ROUNDS));
}
#endif

static void
run_dir(const char *dir, int window, unsigned ms)
{
	static dump d[MAX_DUMPS];
	int n = load_dir(dir, d);
	bellows_gcomp_table *stat, *dyn = NULL;
	double b_stat = 0, b_dyn = 0, b_own = 0, ent = 0, vals = 0;
	double by0 = 0, bylv = 0, by3 = 0, raw = 0, byz = 0;
	int have_lv = 1, larger = 0;

	if (n == 0) {
		fprintf(stderr, "gcomp_codec: no .f32 in %s\n", dir);
		exit(1);
	}
	stat = table_of(d[0].hist, 1);
	for (int i = 0; i < n; i++) {
		double v = (double)d[i].n;
		bellows_gcomp_table *own = table_of(d[i].hist, 0);
		const bellows_gcomp_table *use;
		size_t cap = bellows_gcomp_bound(BELLOWS_GCOMP_F32, d[i].n),
		       len;
		uint8_t *buf = malloc(cap);

		if (i > 0 && i % window == 0) {
			uint64_t h[256] = { 0 };

			for (int j = i - window; j < i; j++)
				for (int s = 0; s < 256; s++)
					h[s] += d[j].hist[s];
			bellows_gcomp_table_destroy(&dyn);
			dyn = table_of(h, (uint32_t)(i / window + 1));
		}
		use = dyn != NULL ? dyn : stat;
		b_stat += bellows_gcomp_table_bits(stat, d[i].hist) * v;
		b_dyn += bellows_gcomp_table_bits(use, d[i].hist) * v;
		b_own += bellows_gcomp_table_bits(own, d[i].hist) * v;
		ent += bellows_gcomp_table_bits(NULL, d[i].hist) * v;
		vals += v;
		raw += 4.0 * v;
		bellows_gcomp_encode(use, BELLOWS_GCOMP_F32, d[i].x, d[i].n, 0,
		    NULL, buf, cap, &len, NULL);
		by0 += (double)len;
#ifdef BENCH_HAVE_ZSTD
		{
			size_t zc = ZSTD_compressBound(d[i].n * 4);
			void *z = malloc(zc);
			size_t zl = ZSTD_compress(z, zc, d[i].x, d[i].n * 4, 1);

			if (ZSTD_isError(zl))
				exit(1);
			byz += (double)zl;
			larger += len > zl;
			free(z);
		}
#endif
		bellows_gcomp_encode(use, BELLOWS_GCOMP_F32, d[i].x, d[i].n, 3,
		    NULL, buf, cap, &len, NULL);
		by3 += (double)len;
		if (d[i].lv != NULL) {
			bellows_gcomp_encode(use, BELLOWS_GCOMP_F32, d[i].x,
			    d[i].n, 0, d[i].lv, buf, cap, &len, NULL);
			bylv += (double)len;
		} else {
			have_lv = 0;
		}
		free(buf);
		bellows_gcomp_table_destroy(&own);
	}
	printf("\n### %s: %d dumps of %llu values\n\n", dir, n,
	    (unsigned long long)d[0].n);
	printf("| exponent table | bits per exponent | share of the "
	       "gradient |\n|---|---|---|\n");
	printf("| static (step 0) | %.3f | %.2f %% |\n", b_stat / vals,
	    100.0 * b_stat / vals / 32);
	printf("| dynamic (every %d dumps) | %.3f | %.2f %% |\n", window,
	    b_dyn / vals, 100.0 * b_dyn / vals / 32);
	printf("| own (each dump's) | %.3f | %.2f %% |\n", b_own / vals,
	    100.0 * b_own / vals / 32);
	printf("| entropy | %.3f | %.2f %% |\n", ent / vals,
	    100.0 * ent / vals / 32);
	printf("\n| levels | ratio (bytes / float32 bytes) |\n|---|---|\n");
	printf("| 0 (lossless) | %.4f |\n", by0 / raw);
	if (have_lv)
		printf("| delta levels | %.4f |\n", bylv / raw);
	printf("| 3 for every value | %.4f |\n", by3 / raw);
#ifdef BENCH_HAVE_ZSTD
	printf("| zstd -1, the same dumps | %.4f |\n", byz / raw);
	printf("\nlevel 0 against zstd -1: %.4f of its bytes; larger on %d of "
	       "%d dumps\n",
	    by0 / byz, larger, n);
#endif

	{
		const dump *last = &d[n - 1];
		speed_ctx c = { .t = dyn != NULL ? dyn : stat, .d = last };
		double bytes = 4.0 * (double)last->n;

		c.cap = bellows_gcomp_bound(BELLOWS_GCOMP_F32, last->n);
		c.buf = bench_alloc("gcomp_codec", c.cap);
		c.out = bench_alloc("gcomp_codec", last->n * 4);
		double mc;

		printf("\n| one core, %.1f MB | GB/s | share of memcpy |\n"
		       "|---|---|---|\n",
		    bytes / 1e6);
		mc = gbps(do_memcpy, &c, bytes, ms);
		printf("| memcpy | %.2f | 1 |\n", mc);
		/* The codec's reference path (two passes per chunk, checked
		 * bit I/O) and the default fast path, in the same run. */
		for (int lv = 0; lv < 2; lv++) {
			const char *what = lv ? "delta levels" : "level 0";

			if (lv && last->lv == NULL)
				break;
			c.levels = lv ? last->lv : NULL;
			for (int ref = 1; ref >= 0; ref--) {
				double e, dd;

				bellows_gcomp_force_reference(ref);
				e = gbps(do_encode, &c, bytes, ms);
				dd = gbps(do_decode, &c, bytes, ms);
				printf("| gcomp encode, %s, %s path | %.3f | "
				       "%.4f |\n",
				    what, ref ? "reference" : "fast", e,
				    e / mc);
				printf("| gcomp decode, %s, %s path | %.3f | "
				       "%.4f |\n",
				    what, ref ? "reference" : "fast", dd,
				    dd / mc);
			}
		}
		bellows_gcomp_force_reference(0);
		c.levels = NULL;
		/* delta levels: synthetic parameters and state of the same
		 * size (the arithmetic does not depend on the values). */
		{
			float *th = bench_alloc("gcomp_codec", last->n * 4);
			float *m = bench_alloc("gcomp_codec", last->n * 4);
			float *v = bench_alloc("gcomp_codec", last->n * 4);

			for (uint64_t i = 0; i < last->n; i++) {
				th[i] = 0.01f * (float)(i % 97) - 0.4f;
				m[i] = 1e-4f * (float)(i % 13);
				v[i] = 1e-8f * (float)(i % 17);
			}
			c.lv = bench_alloc("gcomp_codec", last->n);
			c.opt = (bellows_gcomp_optimizer){
				.kind = BELLOWS_GCOMP_MOMENTUM,
				.lr = 0.05,
				.momentum = 0.9,
				.weight_decay = 1e-4,
				.param = th,
				.buf = m
			};
			printf("| delta levels, momentum SGD | %.3f |\n",
			    gbps(do_levels, &c, bytes, ms));
			c.opt = (bellows_gcomp_optimizer){
				.kind = BELLOWS_GCOMP_ADAMW,
				.lr = 1e-3,
				.weight_decay = 1e-2,
				.beta1 = 0.9,
				.beta2 = 0.999,
				.eps = 1e-8,
				.step = 100,
				.param = th,
				.exp_avg = m,
				.exp_avg_sq = v
			};
			printf("| delta levels, AdamW | %.3f |\n",
			    gbps(do_levels, &c, bytes, ms));
			free(th);
			free(m);
			free(v);
			free(c.lv);
		}
#ifdef BENCH_HAVE_ZSTD
		c.zcap = ZSTD_compressBound(last->n * 4);
		c.z = malloc(c.zcap);
		for (int zl = 1; zl <= 3; zl += 2) {
			double e, dd;

			c.zlevel = zl;
			e = gbps(do_zstd, &c, bytes, ms);
			dd = gbps(do_unzstd, &c, bytes, ms);
			printf("| zstd -%d compress (ratio %.4f) | %.3f |\n",
			    zl, (double)c.zlen / bytes, e);
			printf("| zstd -%d decompress | %.3f |\n", zl, dd);
		}
		paired(&c, bytes, ms);
		free(c.z);
#else
		printf("| zstd | (not built: no libzstd) |\n");
#endif
		free(c.buf);
		free(c.out);
	}
	bellows_gcomp_table_destroy(&stat);
	bellows_gcomp_table_destroy(&dyn);
	for (int i = 0; i < n; i++) {
		free(d[i].x);
		free(d[i].lv);
	}
}

int
main(int argc, char **argv)
{
	int window = 5, opt;
	unsigned ms = 300;
	static const struct option longs[] = {
		{ "window", required_argument, NULL, 'w' },
		{ "measure-ms", required_argument, NULL, 'm' },
		{ NULL, 0, NULL, 0 },
	};

	while ((opt = getopt_long(argc, argv, "w:m:", longs, NULL)) != -1) {
		if (opt == 'w')
			window = atoi(optarg);
		else if (opt == 'm')
			ms = (unsigned)atoi(optarg);
		else
			return 2;
	}
	if (optind >= argc || window < 1) {
		fprintf(stderr,
		    "usage: gcomp_codec [--window W] "
		    "[--measure-ms MS] DIR...\n");
		return 2;
	}
	printf("gcomp_codec: codec ISA %s\n", bellows_codec_isa());
	for (int i = optind; i < argc; i++)
		run_dir(argv[i], window, ms);
	return 0;
}
