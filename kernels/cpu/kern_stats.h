/* kern_stats - the CPU backend: the statistics kernel over host memory.
 *
 * One range function per instruction set folds elements [begin, end) of a
 * job into a kern_stats and updates the job's accumulator and momentum
 * there: portable C (kern_stats.c), AVX2 (kern_stats_avx2.c) and AVX-512
 * (kern_stats_avx512.c), the latter two compiled with their own -m flags and
 * only called when __builtin_cpu_supports says the processor has them.
 * A context picks one at open (the best, unless told), and splits tensors
 * of at least thread_min elements across its worker pool, one range per
 * thread, merging the partial statistics in part order: the results of a
 * given context are reproducible, and equal to the single-threaded ones
 * but for the rounding of the sums.
 *
 * Precision: by default (KERN_PRECISION_RELAXED) the sums are float32
 * partial sums of at most 16 terms per lane folded into compensated
 * doubles, within 1e-6 relative of the exact sums (the derivation is in
 * element.h); KERN_PRECISION_EXACT keeps the double sums, within 3e-14.
 * The relaxed sums of different ISAs add in different orders, so they
 * agree with each other to 2e-6 (each within 1e-6 of the exact sum), not
 * bit for bit; the counts, the maximum and the updates are the same bits.
 */
#ifndef KERN_CPU_STATS_H
#define KERN_CPU_STATS_H

#include <stdint.h>

#include "../kernels.h"

/* Folds elements [begin, end) of job into *st (accumulating; st need not
 * be job->stats) and updates job->acc and job->momentum over the range.
 * The job has been validated. */
typedef void kern_cpu_range_fn(const kern_job *job, uint64_t begin,
    uint64_t end, kern_stats *st);

/* Portable C; the reference the vector paths are tested against. */
kern_cpu_range_fn kern_cpu_range_scalar;
/* The same with relaxed sums (KERN_PRECISION_RELAXED, element.h). */
kern_cpu_range_fn kern_cpu_range_scalar_relaxed;
#ifdef KERN_HAVE_X86
/* AVX2, FMA and F16C. */
kern_cpu_range_fn kern_cpu_range_avx2;
/* The same with relaxed sums. */
kern_cpu_range_fn kern_cpu_range_avx2_relaxed;
/* AVX-512 F, BW, VL and DQ. */
kern_cpu_range_fn kern_cpu_range_avx512;
/* The same with relaxed sums: float32 partial sums over blocks. */
kern_cpu_range_fn kern_cpu_range_avx512_relaxed;
#endif

/* Returns non-zero if this build and this processor can run `isa`
 * (KERN_ISA_AUTO always). */
int kern_cpu_isa_supported(int isa);

/* Returns the best kern_isa this processor runs. */
int kern_cpu_isa_best(void);

/* Returns "scalar", "avx2", "avx512", "auto", or "?" for an unknown isa. */
const char *kern_cpu_isa_name(int isa);

/* Returns the exact range function of a supported isa, NULL otherwise. */
kern_cpu_range_fn *kern_cpu_range(int isa);

/* Returns the range function of a supported isa at a kern_precision
 * (anything but KERN_PRECISION_EXACT is relaxed), NULL otherwise. */
kern_cpu_range_fn *kern_cpu_range_with(int isa, int precision);

/* Returns the kern_isa an open CPU context runs. */
int kern_cpu_ctx_isa(const void *ctx);

/* Returns the CPU backend's table. */
const kern_ops *kern_cpu_ops(void);

#endif /* KERN_CPU_STATS_H */
