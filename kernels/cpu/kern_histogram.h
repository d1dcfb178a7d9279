/* kern_histogram - the CPU backend's exponent histogram (for GComp).
 *
 * Counts the float32 biased exponents of a gradient into 256 bins, one
 * read of the data, four interleaved sub-histograms so that runs of equal
 * exponents do not serialise on one counter.
 */
#ifndef KERN_CPU_HISTOGRAM_H
#define KERN_CPU_HISTOGRAM_H

#include <stdint.h>

/* The kern_ops.histogram of the CPU backend: adds to bins[0..255].
 * Returns 0, or BELLOWS_EINVAL for a bad dtype or a NULL pointer. ctx
 * and stream are unused. */
int kern_cpu_histogram(void *ctx, const void *grad, uint64_t n, int dtype,
    uint64_t *bins, void *stream);

#endif /* KERN_CPU_HISTOGRAM_H */
