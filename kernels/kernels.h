/* kernels - the ops table through which the agent runs its gradient kernels.
 *
 * A backend is a kern_ops table and a context it opens: kernels/cpu (C,
 * with AVX2 and AVX-512 paths chosen at run time from what the processor
 * supports, and optional worker threads) and kernels/cuda (CUDA twins of
 * the same kernels, on the caller's stream). Every pointer a backend's
 * kernels take (gradients, accumulators, statistics, scratch) lives in that
 * backend's memory: host memory for the CPU, device memory for CUDA,
 * allocated through the same table. Nothing here names a CUDA type.
 *
 * The statistics kernel reads a gradient once and folds it into a
 * kern_stats accumulator: element count, exact zeros, non-finite values
 * (NaN and infinities, which are counted and left out of everything else),
 * sum of squares and sum of magnitudes (by default within 1e-6 relative,
 * KERN_RELAXED_BOUND; with KERN_PRECISION_EXACT in double, compensated:
 * within about 3e-14 relative of the exact sums whatever the length), and
 * the largest finite magnitude. In the same pass it may update a window
 * accumulator (acc[i] += g[i]) and a momentum average (m[i] = beta m[i] +
 * (1 - beta) g[i], each product rounded to float, then the sum: no fused
 * multiply-add), both float and skipped for non-finite g[i]. These updates
 * are elementwise and bit-for-bit the same on every backend, ISA and
 * thread count; the sums agree to rounding only, because the order of
 * summation differs.
 *
 * Gradients may be float32, float16 or bfloat16; the smaller types are
 * widened exactly to float first (so float16 subnormals become normal
 * floats), and all arithmetic is the float32 arithmetic above.
 *
 * Threading: a context is used by one thread at a time (the training
 * thread); the CPU context's workers are its own business.
 */
#ifndef KERN_KERNELS_H
#define KERN_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Element types; the values are those of bellows_dtype. */
enum kern_dtype {
	KERN_F32 = 0,  /* IEEE binary32 */
	KERN_F16 = 1,  /* IEEE binary16 */
	KERN_BF16 = 2, /* bfloat16: the top half of a binary32 */
};

/* Where a backend's memory is. */
enum kern_where {
	KERN_HOST = 0, /* the CPU backend, ordinary memory */
	KERN_CUDA = 1, /* the CUDA backend, device memory */
};

/* CPU instruction sets, for kern_config.isa. */
enum kern_isa {
	KERN_ISA_AUTO = 0,   /* the best the processor supports */
	KERN_ISA_SCALAR = 1, /* portable C */
	KERN_ISA_AVX2 = 2,   /* AVX2 + FMA + F16C */
	KERN_ISA_AVX512 = 3, /* AVX-512 F, BW, VL, DQ */
	KERN_ISA_LAST = 3,   /* the highest value above */
};

/* How exact the sums (sum_sq, abs_sum) are, for kern_config.precision.
 * The counts, the maximum, the accumulator and the momentum are exact in
 * both; only the two sums differ. */
enum kern_precision {
	KERN_PRECISION_RELAXED = 0, /* within KERN_RELAXED_BOUND relative:
				     * float32 partial sums over blocks of 16
				     * terms per lane, folded into double
				     * (the default; see
				     * kernels/cpu/kern_stats.h) */
	KERN_PRECISION_EXACT = 1,   /* compensated double, within about 3e-14
				     * relative whatever the length */
};

/* The documented worst-case relative error of a relaxed sum. */
#define KERN_RELAXED_BOUND 1e-6

/* Upper bound of kern_config.threads. */
#define KERN_MAX_THREADS 64

/* Running statistics of gradients. Zero-initialise to start. A sum's value
 * is its high part plus its low part (kern_stats_sum_sq, _abs_sum): the low
 * part carries what the high part's rounding lost. */
typedef struct kern_stats {
	uint64_t count;     /* elements folded in */
	uint64_t zeros;     /* finite elements equal to zero (either sign) */
	uint64_t nonfinite; /* NaN or infinite elements */
	double sum_sq;      /* sum of g^2 over finite g, high part */
	double sum_sq_lo;   /* its low part */
	double abs_sum;     /* sum of |g| over finite g, high part */
	double abs_sum_lo;  /* its low part */
	double max_abs;     /* largest finite |g|; 0 when none */
} kern_stats;

/* One tensor for the statistics kernel. All pointers are in the backend's
 * memory; acc and momentum have n floats and must not overlap grad. */
typedef struct kern_job {
	const void *grad;  /* n elements of dtype; may be NULL when n is 0 */
	uint64_t n;        /* elements */
	int dtype;         /* kern_dtype */
	float beta;        /* momentum coefficient, in [0, 1) */
	kern_stats *stats; /* folded into */
	float *acc;        /* acc[i] += g[i]; NULL: none */
	float *momentum;   /* m[i] = beta m[i] + (1-beta) g[i]; NULL: none */
	void *scratch;     /* ops->scratch_size bytes; NULL if that is 0 */
} kern_job;

/* How to open a backend. Zero-initialised means the defaults. */
typedef struct kern_config {
	uint32_t threads;    /* CPU: worker threads besides the caller's */
	uint64_t thread_min; /* CPU: fewest elements to split; 0: 1 Mi */
	int isa;             /* CPU: kern_isa; 0 is KERN_ISA_AUTO */
	int precision;       /* kern_precision; 0 is relaxed. CUDA: always
			      * exact */
} kern_config;

/* A backend. Functions return 0 or a negative BELLOWS_E*; `stream` is a
 * cudaStream_t for CUDA (NULL: the default stream) and ignored by the CPU,
 * whose functions complete before they return. The CUDA functions enqueue
 * on the stream and do not wait unless their contract says so. */
typedef struct kern_ops {
	const char *name;    /* "cpu" or "cuda" */
	int where;           /* kern_where of every pointer it takes */
	size_t scratch_size; /* bytes of kern_job.scratch per tensor */

	/* Opens a context: BELLOWS_ENOTSUP when the backend cannot run here
	 * (no device), BELLOWS_EINVAL for a bad cfg, BELLOWS_ENOMEM,
	 * BELLOWS_ESYS (threads). */
	int (*open)(const kern_config *cfg, void **ret_ctx);
	/* Frees a context and sets *ctx to NULL; NULL-safe. */
	void (*close)(void **ctx);
	/* Folds job's tensor into job->stats and updates acc and momentum.
	 * BELLOWS_EINVAL for a bad dtype or a NULL pointer the job needs;
	 * CUDA: BELLOWS_EIO for a launch failure. Allocates nothing. */
	int (*stats)(void *ctx, const kern_job *job, void *stream);
	/* The same for n_jobs tensors (one launch per few small tensors on
	 * CUDA). Jobs must not share stats, acc or momentum. */
	int (*stats_batch)(void *ctx, const kern_job *jobs, uint32_t n_jobs,
	    void *stream);
	/* Adds to bins[e] (256 uint64, backend memory) the number of the n
	 * elements whose float32 biased exponent is e (widened as above:
	 * zero and subnormal floats are 0, NaN and infinities 255). */
	int (*histogram)(void *ctx, const void *grad, uint64_t n, int dtype,
	    uint64_t *bins, void *stream);
	/* Waits until everything enqueued on stream has run. */
	int (*synchronize)(void *ctx, void *stream);
	/* Allocates zeroed backend memory, 64-byte aligned at least. */
	int (*mem_alloc)(void *ctx, size_t bytes, void **ret);
	/* Frees backend memory; NULL-safe. */
	void (*mem_free)(void *ctx, void *p);
	/* Allocates host memory copy_out may write to without waiting
	 * (pinned for CUDA). */
	int (*host_alloc)(void *ctx, size_t bytes, void **ret);
	/* Frees host_alloc memory; NULL-safe. */
	void (*host_free)(void *ctx, void *p);
	/* Sets bytes of backend memory to zero. */
	int (*zero)(void *ctx, void *p, size_t bytes, void *stream);
	/* Copies host memory into backend memory; complete on return. */
	int (*copy_in)(void *ctx, void *dst, const void *src, size_t bytes,
	    void *stream);
	/* Copies backend memory to host memory: with host_alloc memory CUDA
	 * only enqueues it (synchronize before reading), otherwise it is
	 * complete on return. */
	int (*copy_out)(void *ctx, void *dst, const void *src, size_t bytes,
	    void *stream);
} kern_ops;

/* An open backend: its table and context. */
typedef struct kern_backend {
	const kern_ops *ops; /* NULL: not open */
	void *ctx;           /* ops->open's context */
} kern_backend;

/* Fills *cfg with the defaults: no threads, automatic ISA, relaxed sums. */
void kern_config_init(kern_config *cfg);

/* Returns the table of the backend at `where`, or NULL if this build has
 * none (CUDA was not compiled in). Never fails otherwise. */
const kern_ops *kern_ops_get(int where);

/* Opens the backend at `where` into *ret (cfg NULL: defaults). Returns 0,
 * BELLOWS_ENOTSUP when it is not built or cannot run here, or what
 * ops->open returns; *ret is untouched on failure. */
int kern_backend_open(kern_backend *ret, int where, const kern_config *cfg);

/* Closes *b and zeroes it. Safe on a zeroed or closed backend. */
void kern_backend_close(kern_backend *b);

/* Returns the size of one element of dtype, or 0 for an unknown dtype. */
size_t kern_dtype_size(int dtype);

/* Folds the statistics in *src into *dst (both host memory). */
void kern_stats_merge(kern_stats *dst, const kern_stats *src);

/* Returns the compensated sum of squares of *s. */
double kern_stats_sum_sq(const kern_stats *s);

/* Returns the compensated sum of magnitudes of *s. */
double kern_stats_abs_sum(const kern_stats *s);

#ifdef __cplusplus
}
#endif

#endif /* KERN_KERNELS_H */
