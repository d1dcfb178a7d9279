/* stats - the gradient statistics kernel against memcpy, and the agent's
 * per-step cost.
 *
 * For gradients of 4 KiB to 1 GiB (powers of 4; float32, or float16 or
 * bfloat16 with --dtype), in one run and interleaved so that both see the
 * same machine: memcpy of the gradient's bytes, memcpy of as many bytes as
 * the kernel moves with the accumulator on (it reads g and acc and writes
 * acc, a float each: for float32 3 B of traffic for B gradient bytes, the
 * traffic of a 1.5 B memcpy; for 16-bit gradients 5 B, a 2.5 B memcpy),
 * and the kernel with statistics only, with the accumulator, and with
 * accumulator and momentum. Each
 * measurement repeats the call on the same buffers for at least 20 ms;
 * the table shows the medians of --reps such measurements, once on the
 * calling thread alone and once with --threads workers (memcpy then split
 * the same way, above the same threshold). Throughput is gradient bytes
 * per second; "ratio" is memcpy time of the gradient bytes over kernel
 * time, ">=" the same against the traffic-matched memcpy.
 *
 * Then the agent: 100 layers, 25M float32 parameters in one flat buffer,
 * the real libbellows API (no bellowsd: it trains on defaults), a window
 * every 10 steps; one step = step_begin, observe all layers, step_end.
 * Its time is given as a percentage of one memcpy of the 100 MB of
 * gradients, median step and mean step (the mean includes window ends).
 *
 * The kernel runs at the default (relaxed) precision; the x: columns are
 * the same kernel with KERN_PRECISION_EXACT, statistics only and with the
 * accumulator, and x:ratio is the latter's ratio. --cpu-time measures the
 * 1-thread table in the calling thread's CPU time instead of wall time,
 * for a machine loaded by other work.
 *
 * The last two lines read
 *   stats/copy1.5 ratio (>=256MiB, 1 thread, median): X.XX
 *   stats/memcpy ratio (>=1MiB, 1 thread, median): X.XX
 * the median over the sizes from 256 MiB (beyond the caches) of the
 * 1-thread ratio with the accumulator against the traffic-matched copy,
 * and over the sizes from 1 MiB of the ratio against memcpy.
 *
 * A last column, vs_add, compares the kernel with the accumulator to a
 * bare `acc[i] += g[i]` loop over the same buffers: the fastest any pass
 * that accumulates can be, whatever else it computes (float32 only).
 */
#include <bellows/agent.h>
#include <bellows/error.h>

#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "benchutil.h"
#include "kernels/cpu/kern_pool.h"
#include "kernels/cpu/kern_stats.h"
#include "kernels/kernels.h"

#define MIN_BYTES    (4ull << 10) /* smallest gradient */
#define MAX_BYTES    (1ull << 30) /* largest gradient */
#define MEASURE_NS   20000000ull  /* shortest measurement */
#define MAX_SIZES    16           /* sizes in the table */
#define MAX_REPS     64           /* --reps limit */
#define THREAD_MIN   (1ull << 20) /* elements: the CPU backend's default */
#define AGENT_LAYERS 100
#define AGENT_PARAMS 25000000ull
#define AGENT_STEPS  60
#define BEYOND_LLC                                                             \
	(256ull << 20) /* sizes past the caches (32 MiB L3                     \
			* on the development machine) */

/* What one measurement runs, in the table's column order. */
enum {
	V_COPY,     /* memcpy of the gradient bytes */
	V_COPY3,    /* memcpy of the kernel's traffic with the accumulator */
	V_STATS,    /* the kernel, statistics only */
	V_ACC,      /* with the accumulator */
	V_ACCM,     /* with accumulator and momentum */
	V_ADD,      /* a bare acc[i] += g[i] loop: the same 3 B of traffic,
		     * no statistics; the ceiling of any accumulating pass */
	V_XSTATS,   /* the exact-precision kernel, statistics only */
	V_XACC,     /* the exact-precision kernel with the accumulator */
	N_VARIANTS, /* number of the above */
};

typedef struct bench_opts {
	int reps;         /* measurements per variant and size */
	uint32_t threads; /* workers of the threaded run */
	int isa;          /* kern_isa */
	uint64_t max;     /* largest gradient, bytes */
	bool no_agent;    /* skip the agent part */
	int dtype;        /* kern_dtype of the gradients */
	bool cpu_time;    /* 1-thread tables: the thread's CPU time */
} bench_opts;

/* Buffers of one size and the work of one call. */
typedef struct bench_case {
	uint64_t bytes;    /* gradient bytes */
	int dtype;         /* their kern_dtype */
	size_t esz;        /* bytes per element */
	void *g;           /* gradient, followed by acc */
	float *acc;        /* accumulator */
	float *m;          /* momentum */
	char *dst;         /* memcpy destination, copy3_bytes */
	kern_backend *b;   /* the kernel's backend, default precision */
	kern_backend *x;   /* the same with KERN_PRECISION_EXACT */
	kern_pool *pool;   /* memcpy's workers, NULL: one thread */
	kern_stats st;     /* the kernel's running statistics */
	size_t copy_bytes; /* of the current memcpy */
} bench_case;

/* Gradient-like data: small values of both signs, some exact zeros. A
 * 16-bit element takes its float's top bits (bfloat16), or is built from
 * a sign, an exponent of 2^-14..2^-6 and random mantissa bits (float16,
 * normal numbers like the float32 data's). */
static void
fill(void *g, uint64_t n, int dtype)
{
	uint32_t x = 12345;

	for (uint64_t i = 0; i < n; i++) {
		float f;
		uint32_t u;

		x = x * 1664525u + 1013904223u;
		f = (x >> 28) == 0
		    ? 0.0f
		    : ((float)(x >> 8) / 16777216.0f - 0.5f) * 1e-3f;
		memcpy(&u, &f, sizeof(u));
		if (dtype == KERN_F32)
			((float *)g)[i] = f;
		else if (dtype == KERN_BF16)
			((uint16_t *)g)[i] = (uint16_t)(u >> 16);
		else
			((uint16_t *)g)[i] = (x >> 28) == 0
			    ? 0
			    : (uint16_t)((x & 0x8000u) |
				  ((1u + (x >> 20) % 9u) << 10) |
				  ((x >> 4) & 0x3ffu));
	}
}

/* How many times the gradient's bytes a memcpy moving the kernel's
 * traffic with the accumulator copies: the kernel reads g (esz bytes an
 * element) and reads and writes acc (4 and 4), a copy reads and writes. */
static double
copy3_factor(size_t esz)
{
	return (double)(esz + 8) / (double)(2 * esz);
}

static uint64_t
copy3_bytes(uint64_t bytes, size_t esz)
{
	return bytes * (esz + 8) / (2 * esz);
}

static void
copy_part(void *arg, uint32_t part)
{
	bench_case *c = arg;
	uint32_t parts = c->pool != NULL ? kern_pool_size(c->pool) : 1;
	size_t len = (c->copy_bytes / parts + 4095) / 4096 * 4096;
	size_t begin = (size_t)part * len;

	if (begin >= c->copy_bytes)
		return;
	if (len > c->copy_bytes - begin)
		len = c->copy_bytes - begin;
	memcpy(c->dst + begin, (const char *)c->g + begin, len);
}

/* The plainest accumulation, for the ceiling it sets: one read of g, a
 * read and a write of acc. Vectorised by the compiler. */
__attribute__((noinline, optimize("O3"))) static void
add_range(float *restrict acc, const float *restrict g, size_t n)
{
	for (size_t i = 0; i < n; i++)
		acc[i] += g[i];
}

static void
add_part(void *arg, uint32_t part)
{
	bench_case *c = arg;
	uint32_t parts = c->pool != NULL ? kern_pool_size(c->pool) : 1;
	size_t n = c->bytes / sizeof(float);
	size_t len = (n / parts + 1023) / 1024 * 1024;
	size_t begin = (size_t)part * len;

	if (begin >= n)
		return;
	if (len > n - begin)
		len = n - begin;
	add_range(c->acc + begin, (const float *)c->g + begin, len);
}

/* One call of variant v. */
static void
run_once(bench_case *c, int v)
{
	kern_job job = {
		.grad = c->g,
		.n = c->bytes / c->esz,
		.dtype = c->dtype,
		.beta = 0.9f,
		.stats = &c->st,
	};

	switch (v) {
	case V_COPY:
	case V_COPY3:
		c->copy_bytes = v == V_COPY ? c->bytes
					    : copy3_bytes(c->bytes, c->esz);
		if (c->pool != NULL && c->bytes / c->esz >= THREAD_MIN)
			kern_pool_run(c->pool, copy_part, c);
		else
			memcpy(c->dst, c->g, c->copy_bytes);
		return;
	case V_ADD:
		if (c->pool != NULL && c->bytes / c->esz >= THREAD_MIN)
			kern_pool_run(c->pool, add_part, c);
		else
			add_range(c->acc, c->g, c->bytes / sizeof(float));
		return;
	case V_ACCM:
		job.momentum = c->m;
		/* fall through */
	case V_ACC:
		job.acc = c->acc;
		break;
	case V_XACC:
		job.acc = c->acc;
		/* fall through */
	case V_XSTATS:
		if (c->x->ops->stats(c->x->ctx, &job, NULL) != 0) {
			fprintf(stderr, "stats: kernel failed\n");
			exit(1);
		}
		return;
	default:
		break;
	}
	if (c->b->ops->stats(c->b->ctx, &job, NULL) != 0) {
		fprintf(stderr, "stats: kernel failed\n");
		exit(1);
	}
}

static bool use_cpu_time; /* measure: the calling thread's CPU time */

/* Now in ns on the clock measure uses: monotonic wall time, or with
 * --cpu-time the calling thread's CPU time (time the scheduler gave to
 * other processes on a loaded machine then does not count). */
static uint64_t
clock_ns(void)
{
	struct timespec ts;

	if (!use_cpu_time)
		return bench_now_ns();
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Seconds per call of variant v: repeats for at least MEASURE_NS. */
static double
measure(bench_case *c, int v, uint64_t calls)
{
	uint64_t t0 = clock_ns();

	for (uint64_t i = 0; i < calls; i++)
		run_once(c, v);
	return (double)(clock_ns() - t0) / 1e9 / (double)calls;
}

/* The table of one thread configuration; returns the accumulator ratios
 * per size in ratio[] and those against the traffic-matched copy in
 * ratio3[]. */
static int
run_table(const bench_opts *o, uint32_t threads, double *ratio, double *ratio3)
{
	uint64_t max = o->max;
	size_t esz = kern_dtype_size(o->dtype);
	uint64_t fbytes = max / esz * sizeof(float); /* of acc, of m */
	char *buf = bench_alloc("stats", max + fbytes);
	float *m = bench_alloc("stats", fbytes);
	char *dst = bench_alloc("stats", copy3_bytes(max, esz));
	char copy_name[16];
	kern_backend b;
	kern_backend x;
	kern_config cfg;
	bench_case c;
	int n = 0;
	int rc;

	kern_config_init(&cfg);
	cfg.isa = o->isa;
	cfg.threads = threads;
	if ((rc = kern_backend_open(&b, KERN_HOST, &cfg)) != 0) {
		fprintf(stderr, "stats: CPU backend: %s\n",
		    bellows_strerror(rc));
		exit(1);
	}
	cfg.precision = KERN_PRECISION_EXACT;
	if ((rc = kern_backend_open(&x, KERN_HOST, &cfg)) != 0) {
		fprintf(stderr, "stats: CPU backend: %s\n",
		    bellows_strerror(rc));
		exit(1);
	}
	use_cpu_time = o->cpu_time && threads == 0;
	/* Touch everything once, outside the timings. */
	memset(buf, 0, max + fbytes);
	memset(m, 0, fbytes);
	memset(dst, 0, copy3_bytes(max, esz));
	memset(&c, 0, sizeof(c));
	c.dtype = o->dtype;
	c.esz = esz;
	c.b = &b;
	c.x = &x;
	c.m = m;
	c.dst = dst;
	if (threads > 0 && kern_pool_new(threads, &c.pool) != 0) {
		fprintf(stderr, "stats: cannot start threads\n");
		exit(1);
	}
	printf("\n%s, %u extra thread(s); GB/s of gradient bytes, medians of "
	       "%d, %s\n",
	    kern_cpu_isa_name(kern_cpu_ctx_isa(b.ctx)), threads, o->reps,
	    use_cpu_time ? "thread CPU time" : "wall time");
	snprintf(copy_name, sizeof(copy_name), "copy%.1f", copy3_factor(esz));
	printf("%9s %8s %8s %8s %8s %8s %8s %8s %8s %7s %7s %7s %7s %7s\n",
	    "size", "memcpy", copy_name, "stats", "+acc", "+acc+m", "add",
	    "x:stats", "x:+acc", "ratio", ">=", "ratio+m", "vs_add", "x:ratio");
	for (uint64_t bytes = MIN_BYTES; bytes <= max; bytes *= 4) {
		double t[N_VARIANTS][MAX_REPS];
		double med[N_VARIANTS];
		uint64_t calls;
		double once;
		char size[16];

		c.bytes = bytes;
		c.g = buf;
		c.acc = (float *)(buf + bytes);
		fill(c.g, bytes / esz, o->dtype);
		memset(c.acc, 0, bytes / esz * sizeof(float));
		memset(&c.st, 0, sizeof(c.st));
		/* Calibrate on the slowest variant, warming caches. */
		run_once(&c, V_ACCM);
		once = measure(&c, V_ACCM, 1);
		calls = (uint64_t)((double)MEASURE_NS / 1e9 / once) + 1;
		/* The bare float loop has no 16-bit counterpart. */
		for (int r = 0; r < o->reps; r++)
			for (int v = 0; v < N_VARIANTS; v++)
				t[v][r] = v == V_ADD && o->dtype != KERN_F32
				    ? 0.0
				    : measure(&c, v, calls);
		for (int v = 0; v < N_VARIANTS; v++)
			med[v] = bench_median(t[v], o->reps);
		if (bytes >= (1ull << 30))
			snprintf(size, sizeof(size), "%llu GiB",
			    (unsigned long long)(bytes >> 30));
		else if (bytes >= (1ull << 20))
			snprintf(size, sizeof(size), "%llu MiB",
			    (unsigned long long)(bytes >> 20));
		else
			snprintf(size, sizeof(size), "%llu KiB",
			    (unsigned long long)(bytes >> 10));
		printf("%9s", size);
		for (int v = 0; v < N_VARIANTS; v++)
			if (med[v] > 0.0)
				printf(" %8.2f", (double)bytes / med[v] / 1e9);
			else
				printf(" %8s", "-");
		printf(" %7.2f %7.2f %7.2f", med[V_COPY] / med[V_ACC],
		    med[V_COPY3] / med[V_ACC], med[V_COPY] / med[V_ACCM]);
		if (med[V_ADD] > 0.0)
			printf(" %7.2f", med[V_ADD] / med[V_ACC]);
		else
			printf(" %7s", "-");
		printf(" %7.2f\n", med[V_COPY] / med[V_XACC]);
		ratio3[n] = med[V_COPY3] / med[V_ACC];
		ratio[n++] = med[V_COPY] / med[V_ACC];
	}
	fflush(stdout);
	use_cpu_time = false;
	kern_pool_destroy(&c.pool);
	kern_backend_close(&x);
	kern_backend_close(&b);
	free(dst);
	free(m);
	free(buf);
	return n;
}

/* The agent's step over a 25M-parameter, 100-layer model, as a share of
 * a memcpy of its gradients. */
static void
run_agent(uint32_t flags, uint32_t threads)
{
	bellows_layer layers[AGENT_LAYERS];
	char names[AGENT_LAYERS][16];
	double steps[AGENT_STEPS];
	double copies[9];
	double sum = 0.0;
	double weights = 0.0;
	uint64_t used = 0;
	bellows_agent_config cfg;
	bellows_agent *a = NULL;
	char ep[2][96];
	float *g = bench_alloc("stats", AGENT_PARAMS * sizeof(float));
	char *dst = bench_alloc("stats", AGENT_PARAMS * sizeof(float));
	int rc;

	/* Layer sizes 1 + (i % 10)^2 relative: many small, a few large. */
	for (int i = 0; i < AGENT_LAYERS; i++)
		weights += 1.0 + (double)((i % 10) * (i % 10));
	for (int i = 0; i < AGENT_LAYERS; i++) {
		memset(&layers[i], 0, sizeof(layers[i]));
		snprintf(names[i], sizeof(names[i]), "layer%d", i);
		layers[i].name = names[i];
		layers[i].flags = flags;
		layers[i].numel = i + 1 < AGENT_LAYERS
		    ? (uint64_t)((double)AGENT_PARAMS *
			  (1.0 + (double)((i % 10) * (i % 10))) / weights)
		    : AGENT_PARAMS - used;
		used += layers[i].numel;
	}
	fill(g, AGENT_PARAMS, KERN_F32);
	memset(dst, 0, AGENT_PARAMS * sizeof(float));
	snprintf(ep[0], sizeof(ep[0]), "ipc:///tmp/bellows-bench-%d-c",
	    (int)getpid());
	snprintf(ep[1], sizeof(ep[1]), "ipc:///tmp/bellows-bench-%d-p",
	    (int)getpid());
	bellows_agent_config_init(&cfg);
	cfg.control = ep[0];
	cfg.publish = ep[1];
	cfg.job = "bench";
	cfg.world = 1;
	cfg.layers = layers;
	cfg.n_layers = AGENT_LAYERS;
	cfg.window_steps = 10;
	cfg.decision_timeout_ms = 1;
	cfg.stats_threads = threads;
	if ((rc = bellows_agent_open(&cfg, &a)) != 0) {
		fprintf(stderr, "stats: agent: %s\n", bellows_strerror(rc));
		exit(1);
	}
	for (int s = -10; s < AGENT_STEPS; s++) {
		uint64_t t0 = bench_now_ns();
		uint64_t off = 0;

		bellows_agent_step_begin(a, NULL);
		for (int i = 0; i < AGENT_LAYERS; i++) {
			bellows_agent_observe(a, (uint32_t)i, g + off,
			    layers[i].numel);
			off += layers[i].numel;
		}
		bellows_agent_step_end(a, NULL);
		if (s >= 0) {
			steps[s] = (double)(bench_now_ns() - t0) / 1e9;
			sum += steps[s];
		}
	}
	bellows_agent_close(&a);
	for (int r = 0; r < 9; r++) {
		uint64_t t0 = bench_now_ns();

		memcpy(dst, g, AGENT_PARAMS * sizeof(float));
		copies[r] = (double)(bench_now_ns() - t0) / 1e9;
	}
	{
		double copy = bench_median(copies, 9);
		double step = bench_median(steps, AGENT_STEPS);
		double mean = sum / AGENT_STEPS;

		printf("%-22s %2u thr  step %7.2f ms (mean %7.2f)  memcpy "
		       "%6.2f ms  overhead %5.1f %% (mean %5.1f %%)\n",
		    (flags & BELLOWS_LAYER_MOMENTUM) ? "accumulator+momentum"
			: (flags & BELLOWS_LAYER_NO_ACCUMULATOR)
			? "statistics only"
			: "accumulator",
		    threads, step * 1e3, mean * 1e3, copy * 1e3,
		    100.0 * step / copy, 100.0 * mean / copy);
	}
	fflush(stdout);
	free(dst);
	free(g);
}

static void
usage(void)
{
	fprintf(stderr,
	    "usage: stats [--reps N] [--threads N] [--isa "
	    "auto|scalar|avx2|avx512] [--max-mib N] [--no-agent]\n"
	    "             [--dtype f32|f16|bf16] [--cpu-time]\n");
	exit(2);
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "reps", required_argument, NULL, 'r' },
		{ "threads", required_argument, NULL, 't' },
		{ "isa", required_argument, NULL, 'i' },
		{ "max-mib", required_argument, NULL, 'm' },
		{ "no-agent", no_argument, NULL, 'n' },
		{ "dtype", required_argument, NULL, 'd' },
		{ "cpu-time", no_argument, NULL, 'c' },
		{ NULL, 0, NULL, 0 },
	};
	static const char *const dtypes[] = { "f32", "f16", "bf16" };
	static const char *const dtype_names[] = { "float32", "float16",
		"bfloat16" };
	bench_opts o = { .reps = 5,
		.threads = 1,
		.max = MAX_BYTES,
		.dtype = KERN_F32 };
	double ratio[MAX_SIZES];
	double ratio3[MAX_SIZES];
	double big[MAX_SIZES];
	double far[MAX_SIZES];
	double ratio_t[MAX_SIZES];
	double ratio3_t[MAX_SIZES];
	int n_big = 0;
	int n_far = 0;
	int n;
	int opt;

	while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (opt) {
		case 'r':
			o.reps = atoi(optarg);
			if (o.reps < 1 || o.reps > MAX_REPS)
				usage();
			break;
		case 't':
			o.threads = (uint32_t)atoi(optarg);
			if (o.threads < 1 || o.threads > KERN_MAX_THREADS)
				usage();
			break;
		case 'i':
			for (o.isa = KERN_ISA_AUTO; o.isa <= KERN_ISA_LAST;
			     o.isa++)
				if (strcmp(optarg, kern_cpu_isa_name(o.isa)) ==
				    0)
					break;
			if (o.isa > KERN_ISA_LAST)
				usage();
			break;
		case 'm':
			o.max = (uint64_t)atoll(optarg) << 20;
			if (o.max < (1ull << 20) || o.max > MAX_BYTES)
				usage();
			break;
		case 'n':
			o.no_agent = true;
			break;
		case 'c':
			o.cpu_time = true;
			break;
		case 'd':
			for (o.dtype = KERN_F32; o.dtype <= KERN_BF16;
			     o.dtype++)
				if (strcmp(optarg, dtypes[o.dtype]) == 0)
					break;
			if (o.dtype > KERN_BF16)
				usage();
			break;
		default:
			usage();
		}
	}
	printf("gradient statistics kernel vs memcpy (%s, best ISA "
	       "here: %s)\n",
	    dtype_names[o.dtype], kern_cpu_isa_name(kern_cpu_isa_best()));
	printf("ratio = memcpy(B) time / kernel time with the accumulator; "
	       ">= against memcpy(%.1f B), the same traffic; vs_add against "
	       "a bare acc += g loop\n",
	    copy3_factor(kern_dtype_size(o.dtype)));
	printf("x: the exact precision (KERN_PRECISION_EXACT); the other "
	       "kernel columns are the default (relaxed)\n");
	n = run_table(&o, 0, ratio, ratio3);
	run_table(&o, o.threads, ratio_t, ratio3_t);
	if (!o.no_agent) {
		printf("\nagent, %d layers, %llu parameters, a window every 10 "
		       "steps; medians of %d steps\n",
		    AGENT_LAYERS, (unsigned long long)AGENT_PARAMS,
		    AGENT_STEPS);
		run_agent(BELLOWS_LAYER_NO_ACCUMULATOR, 0);
		run_agent(0, 0);
		run_agent(BELLOWS_LAYER_MOMENTUM, 0);
		run_agent(0, o.threads);
	}
	for (int i = 0; i < n; i++) {
		if ((MIN_BYTES << (2 * i)) >= (1ull << 20))
			big[n_big++] = ratio[i];
		if ((MIN_BYTES << (2 * i)) >= BEYOND_LLC)
			far[n_far++] = ratio3[i];
	}
	if (n_far > 0)
		printf("stats/copy%.1f ratio (>=%lluMiB, 1 thread, median): "
		       "%.2f\n",
		    copy3_factor(kern_dtype_size(o.dtype)),
		    (unsigned long long)(BEYOND_LLC >> 20),
		    bench_median(far, n_far));
	printf("stats/memcpy ratio (>=1MiB, 1 thread, median): %.2f\n",
	    n_big > 0 ? bench_median(big, n_big) : 0.0);
	return 0;
}
