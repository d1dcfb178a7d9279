/* kernels - backend selection and kern_stats arithmetic, see kernels.h. */
#include "kernels.h"

#include <string.h>

#include <bellows/error.h>

#include "cpu/kern_stats.h"
#include "element.h"
#ifdef KERN_HAVE_CUDA
#include "cuda/kern_cuda_backend.h"
#endif

void
kern_config_init(kern_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->isa = KERN_ISA_AUTO;
}

const kern_ops *
kern_ops_get(int where)
{
	switch (where) {
	case KERN_HOST:
		return kern_cpu_ops();
#ifdef KERN_HAVE_CUDA
	case KERN_CUDA:
		return kern_cuda_ops();
#endif
	default:
		return NULL;
	}
}

int
kern_backend_open(kern_backend *ret, int where, const kern_config *cfg)
{
	const kern_ops *ops = kern_ops_get(where);
	kern_config defaults;
	void *ctx = NULL;
	int rc;

	if (ops == NULL)
		return BELLOWS_ENOTSUP;
	if (cfg == NULL) {
		kern_config_init(&defaults);
		cfg = &defaults;
	}
	if ((rc = ops->open(cfg, &ctx)) != 0)
		return rc;
	ret->ops = ops;
	ret->ctx = ctx;
	return 0;
}

void
kern_backend_close(kern_backend *b)
{
	if (b->ops != NULL)
		b->ops->close(&b->ctx);
	memset(b, 0, sizeof(*b));
}

size_t
kern_dtype_size(int dtype)
{
	switch (dtype) {
	case KERN_F32:
		return 4;
	case KERN_F16:
	case KERN_BF16:
		return 2;
	default:
		return 0;
	}
}

void
kern_stats_merge(kern_stats *dst, const kern_stats *src)
{
	dst->count += src->count;
	dst->zeros += src->zeros;
	dst->nonfinite += src->nonfinite;
	kern_two_sum(&dst->sum_sq, &dst->sum_sq_lo, src->sum_sq);
	dst->sum_sq_lo += src->sum_sq_lo;
	kern_two_sum(&dst->abs_sum, &dst->abs_sum_lo, src->abs_sum);
	dst->abs_sum_lo += src->abs_sum_lo;
	if (src->max_abs > dst->max_abs)
		dst->max_abs = src->max_abs;
}

double
kern_stats_sum_sq(const kern_stats *s)
{
	return s->sum_sq + s->sum_sq_lo;
}

double
kern_stats_abs_sum(const kern_stats *s)
{
	return s->abs_sum + s->abs_sum_lo;
}
