/* gcomp_avx2 - the GComp delta levels compiled for AVX2, vectorised by the
 * compiler from the loop every path shares (gcomp_levels.h); the same
 * levels as the portable C bit for bit. */
#include "gcomp.h"

#include "gcomp_levels.h"

void
kern_gcomp_levels_avx2(const kern_gcomp_opt *o, int dtype, const void *grad,
    uint64_t n, int max_level, const double *lim, double scale, double c1,
    double c2, uint8_t *levels)
{
	gcomp_levels_dispatch(o, dtype, grad, n, max_level, lim, scale, c1, c2,
	    levels);
}
