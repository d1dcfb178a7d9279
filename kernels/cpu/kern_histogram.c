/* kern_histogram - exponent histogram over host memory, see kern_histogram.h.
 *
 * Float32 and bfloat16 carry the float32 exponent byte in their bits; a
 * float16's is that of its exact widening, so its subnormals land in the
 * bins of the normal floats they become.
 */
#include "kern_histogram.h"

#include <string.h>

#include <bellows/error.h>

#include "../element.h"

#define HIST_WAYS 4 /* interleaved sub-histograms */

static inline __attribute__((always_inline)) uint32_t
histogram_bin(const void *grad, uint64_t i, int dtype)
{
	if (dtype == KERN_F32)
		return (kern_f32_bits(((const float *)grad)[i]) >> 23) & 0xffu;
	if (dtype == KERN_BF16)
		return (((const uint16_t *)grad)[i] >> 7) & 0xffu;
	return (kern_f32_bits(kern_f16_to_f32(((const uint16_t *)grad)[i])) >>
		   23) &
	    0xffu;
}

static inline __attribute__((always_inline)) void
histogram_run(const void *grad, uint64_t n, int dtype, uint64_t *bins)
{
	uint64_t h[HIST_WAYS][256];
	uint64_t i = 0;

	memset(h, 0, sizeof(h));
	for (; n - i >= HIST_WAYS; i += HIST_WAYS)
		for (int w = 0; w < HIST_WAYS; w++)
			h[w][histogram_bin(grad, i + w, dtype)]++;
	for (; i < n; i++)
		h[0][histogram_bin(grad, i, dtype)]++;
	for (int b = 0; b < 256; b++)
		bins[b] += h[0][b] + h[1][b] + h[2][b] + h[3][b];
}

int
kern_cpu_histogram(void *ctx, const void *grad, uint64_t n, int dtype,
    uint64_t *bins, void *stream)
{
	(void)ctx;
	(void)stream;
	if (bins == NULL || kern_dtype_size(dtype) == 0 ||
	    (n > 0 && grad == NULL))
		return BELLOWS_EINVAL;
	switch (dtype) {
	case KERN_F32:
		histogram_run(grad, n, KERN_F32, bins);
		break;
	case KERN_F16:
		histogram_run(grad, n, KERN_F16, bins);
		break;
	default:
		histogram_run(grad, n, KERN_BF16, bins);
		break;
	}
	return 0;
}
