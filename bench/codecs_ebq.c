/* codecs_ebq - the error-bounded quantiser against memcpy, and against
 * zfp and zstd on the same activations.
 *
 * Part 1 (the ebq rows of the codecs benchmark): for activations of 64 KiB
 * to 256 MiB of float32 (powers of 4), one thread, every instruction set
 * this processor runs: memcpy of the bytes, and bellows_ebq_encode and
 * bellows_ebq_decode with the fewest bits per code ("tight") and with
 * torch's int8/int16 codes ("bytes", what bellows.activations stores), in
 * GB/s of float32 values, with the compression ratio. Measurements repeat
 * the call for at least 20 ms, variants interleave within each of --reps
 * rounds, the table shows medians. Times are the thread's CPU time
 * (CLOCK_THREAD_CPUTIME_ID), memcpy's included: this machine's 2 cores are
 * shared with other builds, and wall time would count the time the thread
 * waits for a core.
 *
 * The data: ReLU activations. Without -f, a synthetic stand-in: max(0, z)
 * with z normal (half exact zeros, as a ReLU of a centred pre-activation),
 * and the bound eb = 0.01 (-e). With -f FILE, float32 values read from FILE
 * (bench/ebq_activations.py writes the Fashion-MNIST model's convolution
 * inputs), repeated to fill each size.
 *
 * Part 2: the same activations (the FILE, or 16 MiB of the synthetic ones)
 * through each codec at the same absolute bound: ebq tight, ebq bytes, ebq
 * tight + zstd (the library's level 1, and -5, -1 and 3 over the payload,
 * timed with the encode), zfp's fixed-accuracy mode (tolerance eb, 1-D),
 * and zstd level 1 and 3 on the raw floats (lossless): ratio, encode and
 * decode GB/s, the largest error seen. zfp and zstd columns need libzfp and
 * libzstd at build time (optional; absent, their rows say so).
 *
 * The last line reads
 *   codecs: ebq encode GB/s (1-16 MiB, 1 thread, median): X.XX
 * the median over 1, 4 and 16 MiB of the best ISA's tight encode.
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <bellows/codec.h>

#include "benchutil.h"
#include "kernels/cpu/kern_stats.h"
#include "kernels/kernels.h"

#ifdef BENCH_HAVE_ZSTD
#include <zstd.h>
#endif
#ifdef BENCH_HAVE_ZFP
#include <zfp.h>
#endif

/* The thread's CPU time in nanoseconds. */
static uint64_t
cpu_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#define MIN_BYTES  (64ull << 10)  /* smallest activation */
#define MAX_BYTES  (256ull << 20) /* largest activation */
#define MEASURE_NS 20000000ull    /* shortest measurement */
#define MAX_REPS   64             /* --reps limit */
#define MAX_SIZES  16             /* sizes in the table */

/* The measured variants, in the table's column order. */
enum {
	V_COPY,  /* memcpy of the values */
	V_ENC_T, /* encode, fewest bits */
	V_DEC_T, /* decode of that */
	V_ENC_B, /* encode, byte codes */
	V_DEC_B, /* decode of that */
	N_VARIANTS,
};

/* Buffers of one size. */
typedef struct bench_case {
	uint64_t n;     /* values */
	double eb;      /* bound */
	float *x;       /* activations */
	float *dst;     /* memcpy destination and decode output */
	uint8_t *msg_t; /* tight message */
	uint8_t *msg_b; /* byte-code message */
	size_t len_t;   /* its bytes */
	size_t len_b;   /* its bytes */
	size_t cap;     /* bytes of each message buffer */
} bench_case;

static void
check(int rc, const char *what)
{
	if (rc != 0) {
		fprintf(stderr, "codecs_ebq: %s: %s\n", what,
		    bellows_strerror(rc));
		exit(1);
	}
}

static void
run(bench_case *c, int v)
{
	switch (v) {
	case V_COPY:
		memcpy(c->dst, c->x, c->n * 4);
		break;
	case V_ENC_T:
		check(bellows_ebq_encode(c->x, c->n, c->eb, 0, NULL, c->msg_t,
			  c->cap, &c->len_t),
		    "encode");
		break;
	case V_DEC_T:
		check(bellows_ebq_decode(c->msg_t, c->len_t, c->dst, c->n,
			  NULL),
		    "decode");
		break;
	case V_ENC_B:
		check(bellows_ebq_encode(c->x, c->n, c->eb,
			  BELLOWS_EBQ_BYTE_CODES, NULL, c->msg_b, c->cap,
			  &c->len_b),
		    "encode");
		break;
	default:
		check(bellows_ebq_decode(c->msg_b, c->len_b, c->dst, c->n,
			  NULL),
		    "decode");
		break;
	}
}

/* Seconds per call of variant v, over at least MEASURE_NS. */
static double
measure(bench_case *c, int v)
{
	uint64_t t0 = cpu_now_ns(), t, calls = 0;

	do {
		run(c, v);
		calls++;
		t = cpu_now_ns();
	} while (t - t0 < MEASURE_NS);
	return (double)(t - t0) / 1e9 / (double)calls;
}

/* Fills x with max(0, z), z standard normal (Box-Muller on an LCG). */
static void
synthetic(float *x, uint64_t n)
{
	uint64_t s = 0x9e3779b97f4a7c15ull;

	for (uint64_t i = 0; i < n; i += 2) {
		double u1, u2, r;

		s = s * 6364136223846793005ull + 1442695040888963407ull;
		u1 = ((double)(s >> 11) + 1.0) / 9007199254740993.0;
		s = s * 6364136223846793005ull + 1442695040888963407ull;
		u2 = (double)(s >> 11) / 9007199254740992.0;
		r = sqrt(-2.0 * log(u1));
		x[i] = (float)fmax(0.0, r * cos(2.0 * M_PI * u2));
		if (i + 1 < n)
			x[i + 1] = (float)fmax(0.0, r * sin(2.0 * M_PI * u2));
	}
}

/* Reads the float32 values of path into a new buffer; *ret_n gets their
 * count. Exits on failure. */
static float *
read_values(const char *path, uint64_t *ret_n)
{
	FILE *f = fopen(path, "rb");
	long size;
	float *x;

	if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 4 ||
	    fseek(f, 0, SEEK_SET) != 0) {
		fprintf(stderr, "codecs_ebq: cannot read %s\n", path);
		exit(1);
	}
	x = bench_alloc("codecs_ebq", (size_t)size);
	if (fread(x, 1, (size_t)size, f) != (size_t)size) {
		fprintf(stderr, "codecs_ebq: short read of %s\n", path);
		exit(1);
	}
	fclose(f);
	*ret_n = (uint64_t)size / 4;
	return x;
}

/* Largest |a - b| over n values. */
static double
max_err(const float *a, const float *b, uint64_t n)
{
	double m = 0.0;

	for (uint64_t i = 0; i < n; i++) {
		double d = fabs((double)a[i] - (double)b[i]);

		m = d > m ? d : m;
	}
	return m;
}

/* One row of part 2: encode and decode seconds (medians), bytes out. */
typedef struct cmp_row {
	const char *name; /* codec */
	double enc, dec;  /* seconds per call */
	size_t bytes;     /* compressed size */
	double err;       /* largest error */
	int ok;           /* measured (the library is there) */
} cmp_row;

/* Times fn(arg) over >= MEASURE_NS; seconds per call. */
#define TIME(stmt, ret)                                                        \
	do {                                                                   \
		uint64_t t0_ = cpu_now_ns(), t_, calls_ = 0;                   \
		do {                                                           \
			stmt;                                                  \
			calls_++;                                              \
			t_ = cpu_now_ns();                                     \
		} while (t_ - t0_ < MEASURE_NS);                               \
		(ret) = (double)(t_ - t0_) / 1e9 / (double)calls_;             \
	} while (0)

static void
ebq_row(cmp_row *r, const float *x, uint64_t n, double eb, int flags,
    bellows_ebq *ctx, uint8_t *msg, size_t cap, float *dst, int reps)
{
	double te[MAX_REPS], td[MAX_REPS];
	size_t len = 0;

	for (int k = 0; k < reps; k++) {
		TIME(check(bellows_ebq_encode(x, n, eb, flags, ctx, msg, cap,
			       &len),
			 "encode"),
		    te[k]);
		TIME(check(bellows_ebq_decode(msg, len, dst, n, ctx), "decode"),
		    td[k]);
	}
	r->enc = bench_median(te, reps);
	r->dec = bench_median(td, reps);
	r->bytes = len;
	r->err = max_err(x, dst, n);
	r->ok = 1;
}

#ifdef BENCH_HAVE_ZSTD
static void
zstd_row(cmp_row *r, const float *x, uint64_t n, int level, uint8_t *buf,
    size_t cap, float *dst, int reps)
{
	ZSTD_CCtx *cc = ZSTD_createCCtx();
	ZSTD_DCtx *dc = ZSTD_createDCtx();
	double te[MAX_REPS], td[MAX_REPS];
	size_t z = 0;

	for (int k = 0; k < reps; k++) {
		TIME(z = ZSTD_compressCCtx(cc, buf, cap, x, n * 4, level),
		    te[k]);
		TIME(ZSTD_decompressDCtx(dc, dst, n * 4, buf, z), td[k]);
	}
	r->enc = bench_median(te, reps);
	r->dec = bench_median(td, reps);
	r->bytes = z;
	r->err = max_err(x, dst, n);
	r->ok = !ZSTD_isError(z);
	ZSTD_freeCCtx(cc);
	ZSTD_freeDCtx(dc);
}
#endif

#ifdef BENCH_HAVE_ZSTD
/* ebq tight, then zstd at `level` over the payload (what BELLOWS_EBQ_ZSTD
 * does at level 1), timed together: which level would pay. */
static void
ebq_zstd_row(cmp_row *r, const float *x, uint64_t n, double eb, int level,
    uint8_t *msg, uint8_t *buf, size_t cap, float *dst, int reps)
{
	ZSTD_CCtx *cc = ZSTD_createCCtx();
	ZSTD_DCtx *dc = ZSTD_createDCtx();
	double te[MAX_REPS], td[MAX_REPS];
	size_t len = 0, z = 0;

	for (int k = 0; k < reps; k++) {
		TIME((check(bellows_ebq_encode(x, n, eb, 0, NULL, msg, cap,
				&len),
			  "encode"),
			 z = ZSTD_compressCCtx(cc, buf, cap, msg + 56, len - 56,
			     level)),
		    te[k]);
		TIME((ZSTD_decompressDCtx(dc, msg + 56, len - 56, buf, z),
			 check(bellows_ebq_decode(msg, len, dst, n, NULL),
			     "decode")),
		    td[k]);
	}
	r->enc = bench_median(te, reps);
	r->dec = bench_median(td, reps);
	r->bytes = 56 + z;
	r->err = max_err(x, dst, n);
	r->ok = !ZSTD_isError(z);
	ZSTD_freeCCtx(cc);
	ZSTD_freeDCtx(dc);
}
#endif

#ifdef BENCH_HAVE_ZFP
/* zfp, fixed-accuracy mode with tolerance eb, on x as a 1-D array. */
static void
zfp_row(cmp_row *r, float *x, uint64_t n, double eb, uint8_t *buf, size_t cap,
    float *dst, int reps)
{
	double te[MAX_REPS], td[MAX_REPS];
	zfp_field *fi = zfp_field_1d(x, zfp_type_float, (size_t)n);
	zfp_field *fo = zfp_field_1d(dst, zfp_type_float, (size_t)n);
	zfp_stream *zs = zfp_stream_open(NULL);
	bitstream *bs = stream_open(buf, cap);
	size_t z = 0;

	zfp_stream_set_accuracy(zs, eb);
	zfp_stream_set_bit_stream(zs, bs);
	for (int k = 0; k < reps; k++) {
		TIME((zfp_stream_rewind(zs), z = zfp_compress(zs, fi)), te[k]);
		TIME((zfp_stream_rewind(zs), zfp_decompress(zs, fo)), td[k]);
	}
	r->enc = bench_median(te, reps);
	r->dec = bench_median(td, reps);
	r->bytes = z;
	r->err = max_err(x, dst, n);
	r->ok = z > 0;
	zfp_field_free(fi);
	zfp_field_free(fo);
	zfp_stream_close(zs);
	stream_close(bs);
}
#endif

static void
part2(float *x, uint64_t n, double eb, int reps, const char *what)
{
	size_t cap = bellows_ebq_bound(n) * 2 + (1 << 20);
	uint8_t *buf = bench_alloc("codecs_ebq", cap);
	float *dst = bench_alloc("codecs_ebq", n * 4);
	static const char *const names[] = { "ebq tight", "ebq bytes",
		"ebq tight+zstd-1", "zfp accuracy", "zstd-1 floats",
		"zstd-3 floats", "memcpy", "ebq + zstd -5", "ebq + zstd -1",
		"ebq + zstd 3" };
	enum {
		ROWS = sizeof names / sizeof names[0]
	};
	cmp_row rows[ROWS];
	uint8_t *msg = bench_alloc("codecs_ebq", cap);
	uint64_t zeros = 0;
	bellows_ebq *ctx = NULL;

	memset(rows, 0, sizeof rows);
	for (int i = 0; i < ROWS; i++)
		rows[i].name = names[i];
	for (uint64_t i = 0; i < n; i++)
		zeros += x[i] == 0.0f;
	printf("\n%s: %llu values (%.1f MiB), %.1f %% zeros, eb %g\n", what,
	    (unsigned long long)n, (double)n * 4 / 1048576.0,
	    100.0 * (double)zeros / (double)n, eb);
	ebq_row(&rows[0], x, n, eb, 0, NULL, buf, cap, dst, reps);
	ebq_row(&rows[1], x, n, eb, BELLOWS_EBQ_BYTE_CODES, NULL, buf, cap, dst,
	    reps);
	if (bellows_ebq_new(n, &ctx) == 0)
		ebq_row(&rows[2], x, n, eb, BELLOWS_EBQ_ZSTD, ctx, buf, cap,
		    dst, reps);
	bellows_ebq_destroy(&ctx);
#ifdef BENCH_HAVE_ZFP
	zfp_row(&rows[3], x, n, eb, buf, cap, dst, reps);
#endif
#ifdef BENCH_HAVE_ZSTD
	zstd_row(&rows[4], x, n, 1, buf, cap, dst, reps);
	zstd_row(&rows[5], x, n, 3, buf, cap, dst, reps);
	ebq_zstd_row(&rows[7], x, n, eb, -5, msg, buf, cap, dst, reps);
	ebq_zstd_row(&rows[8], x, n, eb, -1, msg, buf, cap, dst, reps);
	ebq_zstd_row(&rows[9], x, n, eb, 3, msg, buf, cap, dst, reps);
#endif
	{
		double t[MAX_REPS];

		for (int k = 0; k < reps; k++)
			TIME(memcpy(dst, x, n * 4), t[k]);
		rows[6].enc = rows[6].dec = bench_median(t, reps);
		rows[6].bytes = n * 4;
		rows[6].ok = 1;
	}
	printf("%-18s %8s %9s %9s %11s\n", "codec", "ratio", "enc GB/s",
	    "dec GB/s", "max error");
	for (int i = 0; i < ROWS; i++) {
		if (!rows[i].ok) {
			printf("%-18s %8s\n", rows[i].name,
			    "(not in this build)");
			continue;
		}
		printf("%-18s %8.2f %9.2f %9.2f %11.3g\n", rows[i].name,
		    (double)n * 4 / (double)rows[i].bytes,
		    (double)n * 4 / rows[i].enc / 1e9,
		    (double)n * 4 / rows[i].dec / 1e9, rows[i].err);
	}
	free(buf);
	free(dst);
	free(msg);
}

int
main(int argc, char **argv)
{
	static const char *const names[N_VARIANTS] = { "memcpy", "enc-tight",
		"dec-tight", "enc-bytes", "dec-bytes" };
	int reps = 5, opt, best = kern_cpu_isa_best();
	uint64_t max = MAX_BYTES, n_file = 0;
	double eb = 0.01, enc[MAX_SIZES];
	int n_enc = 0;
	const char *file = NULL;
	float *x, *dst, *vals = NULL;
	uint8_t *msg_t, *msg_b;

	while ((opt = getopt(argc, argv, "r:m:e:f:")) != -1) {
		if (opt == 'r')
			reps = atoi(optarg);
		else if (opt == 'm')
			max = strtoull(optarg, NULL, 10) << 20;
		else if (opt == 'e')
			eb = atof(optarg);
		else if (opt == 'f')
			file = optarg;
		else {
			fprintf(stderr,
			    "usage: codecs_ebq [-r reps] [-m max "
			    "MiB] [-e eb] [-f float32 file]\n");
			return 2;
		}
	}
	if (reps < 1 || reps > MAX_REPS || max < MIN_BYTES || !(eb > 0)) {
		fprintf(stderr, "codecs_ebq: bad -r, -m or -e\n");
		return 2;
	}
	x = bench_alloc("codecs_ebq", max);
	dst = bench_alloc("codecs_ebq", max);
	msg_t = bench_alloc("codecs_ebq", bellows_ebq_bound(max / 4));
	msg_b = bench_alloc("codecs_ebq", bellows_ebq_bound(max / 4));
	if (file != NULL) {
		vals = read_values(file, &n_file);
		for (uint64_t i = 0; i < max / 4; i++)
			x[i] = vals[i % n_file];
	} else {
		synthetic(x, max / 4);
	}
	printf("error-bounded quantiser (eb %g) vs memcpy, 1 thread, on %s; "
	       "GB/s of float32 values, medians of %d rounds\n",
	    eb,
	    file != NULL ? file : "synthetic ReLU activations max(0, N(0,1))",
	    reps);
	for (int isa = KERN_ISA_SCALAR; isa <= KERN_ISA_LAST; isa++) {
		if (bellows_ebq_force_isa(isa) != 0)
			continue;
		printf("\n%s%s\n%9s", kern_cpu_isa_name(isa),
		    isa == best ? " (libbellows' choice here)" : "", "size");
		for (int v = 0; v < N_VARIANTS; v++)
			printf(" %9s", names[v]);
		printf(" %7s %7s %7s\n", "ratio-t", "ratio-b", "enc/cpy");
		for (uint64_t bytes = MIN_BYTES; bytes <= max; bytes *= 4) {
			bench_case c = { bytes / 4, eb, x, dst, msg_t, msg_b, 0,
				0, bellows_ebq_bound(bytes / 4) };
			double t[N_VARIANTS][MAX_REPS], med[N_VARIANTS];
			char size[32];

			run(&c, V_ENC_T);
			run(&c, V_ENC_B);
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
				printf(" %9.2f", (double)bytes / med[v] / 1e9);
			printf(" %7.2f %7.2f %7.2f\n",
			    (double)bytes / (double)c.len_t,
			    (double)bytes / (double)c.len_b,
			    med[V_COPY] / med[V_ENC_T]);
			fflush(stdout);
			if (isa == best && bytes >= 1ull << 20 &&
			    bytes <= 16ull << 20 && n_enc < MAX_SIZES)
				enc[n_enc++] = (double)bytes / med[V_ENC_T] /
				    1e9;
		}
	}
	bellows_ebq_force_isa(0);
	if (vals != NULL)
		part2(vals, n_file, eb, reps, file);
	else
		part2(x, (max < (16ull << 20) ? max : 16ull << 20) / 4, eb,
		    reps, "synthetic ReLU activations");
	printf("\ncodecs: ebq encode GB/s (1-16 MiB, 1 thread, median): %.2f\n",
	    n_enc > 0 ? bench_median(enc, n_enc) : 0.0);
	free(x);
	free(dst);
	free(msg_t);
	free(msg_b);
	free(vals);
	return 0;
}
