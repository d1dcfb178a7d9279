/* agent_gcomp - the GComp half of bellows/codec.h on top of the table module
 * (common/huffman.h) and the codec kernels (kernels/cpu/kern_gcomp.h): argument
 * checks and the table object (the canonical code plus the decoder's LUT,
 * one allocation); and the CUDA twin's entry points (bellows_gcomp_*_cuda),
 * the same checks in front of kernels/cuda/kern_cuda_gcomp_launch.h when built
 * with CUDA, its context a host copy of the table beside a device copy. */
#include <bellows/codec.h>

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "common/huffman.h"
#include "kernels/kernels.h"
#include "kernels/cpu/kern_gcomp.h"
#include "kernels/cpu/kern_histogram.h"
#ifdef KERN_HAVE_CUDA
#include "kernels/cuda/kern_cuda_codec.h"
#include "kernels/cuda/kern_cuda_gcomp_launch.h"
#endif

struct bellows_gcomp_table {
	kern_gcomp_table k; /* code, encoder table and LUT */
};

/* The codec path forced by bellows_gcomp_force_reference. */
static atomic_int gcomp_path = KERN_GCOMP_PATH_FAST;

static int
gcomp_path_now(void)
{
	return atomic_load_explicit(&gcomp_path, memory_order_relaxed);
}

int
bellows_gcomp_force_reference(int on)
{
	atomic_store(&gcomp_path,
	    on ? KERN_GCOMP_PATH_REF : KERN_GCOMP_PATH_FAST);
	return 0;
}

static int
gcomp_dtype_ok(int dtype)
{
	return dtype == BELLOWS_GCOMP_F32 || dtype == BELLOWS_GCOMP_F16 ||
	    dtype == BELLOWS_GCOMP_BF16;
}

int
bellows_gcomp_histogram(int dtype, const void *x, uint64_t n, uint64_t *hist)
{
	if (!gcomp_dtype_ok(dtype) || hist == NULL || (n > 0 && x == NULL))
		return BELLOWS_EINVAL;
	return kern_cpu_histogram(NULL, x, n, dtype, hist, NULL);
}

/* A table object around a checked com_huff_table. */
static int
gcomp_table_new(const com_huff_table *h, bellows_gcomp_table **ret_table)
{
	bellows_gcomp_table *t = malloc(sizeof(*t));

	if (t == NULL)
		return BELLOWS_ENOMEM;
	t->k.h = *h;
	kern_gcomp_prepare(&t->k);
	*ret_table = t;
	return 0;
}

int
bellows_gcomp_table_build(const uint64_t *hist, unsigned max_bits,
    uint32_t version, bellows_gcomp_table **ret_table)
{
	com_huff_table h;
	int rc;

	if (ret_table == NULL)
		return BELLOWS_EINVAL;
	if ((rc = com_huff_build(hist, max_bits, version, &h)) < 0)
		return rc;
	return gcomp_table_new(&h, ret_table);
}

int
bellows_gcomp_table_read(const void *buf, size_t len,
    bellows_gcomp_table **ret_table, char *errbuf, size_t errlen)
{
	com_huff_table h;
	int rc;

	if (buf == NULL || ret_table == NULL)
		return BELLOWS_EINVAL;
	rc = com_huff_read(buf, len, &h, NULL, errbuf, errlen);
	if (rc < 0)
		return rc;
	return gcomp_table_new(&h, ret_table);
}

int
bellows_gcomp_table_write(const bellows_gcomp_table *table, void *out,
    size_t cap)
{
	if (table == NULL)
		return BELLOWS_EINVAL;
	return com_huff_write(&table->k.h, out, cap);
}

uint32_t
bellows_gcomp_table_version(const bellows_gcomp_table *table)
{
	return table != NULL ? table->k.h.version : 0;
}

unsigned
bellows_gcomp_table_length(const bellows_gcomp_table *table, unsigned s)
{
	if (table == NULL || s > 256)
		return 0;
	return s == 256 ? table->k.h.esc_len : table->k.h.len[s];
}

double
bellows_gcomp_table_bits(const bellows_gcomp_table *table, const uint64_t *hist)
{
	if (table == NULL)
		return com_huff_entropy(hist);
	return com_huff_bits(&table->k.h, hist);
}

void
bellows_gcomp_table_destroy(bellows_gcomp_table **table)
{
	if (table == NULL || *table == NULL)
		return;
	free(*table);
	*table = NULL;
}

size_t
bellows_gcomp_bound(int dtype, uint64_t n)
{
	uint64_t b = kern_gcomp_bound(dtype, n);

	return b > SIZE_MAX ? 0 : (size_t)b;
}

/* The kernels' view of a public optimizer. */
static kern_gcomp_opt
gcomp_opt(const bellows_gcomp_optimizer *opt)
{
	return (kern_gcomp_opt){
		.kind = opt->kind,
		.lr = opt->lr,
		.weight_decay = opt->weight_decay,
		.momentum = opt->momentum,
		.dampening = opt->dampening,
		.beta1 = opt->beta1,
		.beta2 = opt->beta2,
		.eps = opt->eps,
		.grad_scale = opt->grad_scale,
		.step = opt->step,
		.param = opt->param,
		.buf = opt->buf,
		.exp_avg = opt->exp_avg,
		.exp_avg_sq = opt->exp_avg_sq,
	};
}

int
bellows_gcomp_levels(const bellows_gcomp_optimizer *opt, int dtype,
    const void *grad, uint64_t n, int max_level, uint8_t *levels)
{
	kern_gcomp_opt o;

	if (opt == NULL)
		return BELLOWS_EINVAL;
	o = gcomp_opt(opt);
	return kern_gcomp_levels(&o, dtype, grad, n, max_level, levels);
}

/* Copies the kernels' counts to the public structure. */
static void
gcomp_stats_out(const kern_gcomp_stats *st, bellows_gcomp_stats *out)
{
	out->values = st->values;
	out->zeros = st->zeros;
	out->escaped = st->escaped;
	memcpy(out->levels, st->levels, sizeof(st->levels));
	out->exp_bits = st->exp_bits;
	out->level_bits = st->level_bits;
	out->mant_bits = st->mant_bits;
	out->bytes = st->bytes;
}

int
bellows_gcomp_encode(const bellows_gcomp_table *table, int dtype, const void *x,
    uint64_t n, int level, const uint8_t *levels, void *out, size_t cap,
    size_t *ret_bytes, bellows_gcomp_stats *ret_stats)
{
	kern_gcomp_stats st;
	size_t len;
	int rc;

	if (table == NULL || out == NULL || (n > 0 && x == NULL) ||
	    !gcomp_dtype_ok(dtype))
		return BELLOWS_EINVAL;
	rc = kern_gcomp_encode_path(gcomp_path_now(), &table->k, dtype, x, n,
	    level, levels, out, cap, &len, &st);
	if (rc < 0)
		return rc;
	if (ret_bytes != NULL)
		*ret_bytes = len;
	if (ret_stats != NULL)
		gcomp_stats_out(&st, ret_stats);
	return 0;
}

int
bellows_gcomp_info(const void *in, size_t bytes, uint64_t *ret_n,
    int *ret_dtype, uint32_t *ret_table_version, size_t *ret_block_bytes,
    char *errbuf, size_t errlen)
{
	uint64_t n, block;
	uint32_t version;
	int dtype, rc;

	if (in == NULL)
		return BELLOWS_EINVAL;
	rc = kern_gcomp_info(in, bytes, &n, &dtype, &version, &block, errbuf,
	    errlen);
	if (rc < 0)
		return rc;
	if (ret_n != NULL)
		*ret_n = n;
	if (ret_dtype != NULL)
		*ret_dtype = dtype;
	if (ret_table_version != NULL)
		*ret_table_version = version;
	if (ret_block_bytes != NULL)
		*ret_block_bytes = (size_t)block;
	return 0;
}

int
bellows_gcomp_decode(const bellows_gcomp_table *table, const void *in,
    size_t bytes, int dtype, void *out, uint64_t n, int flags, char *errbuf,
    size_t errlen)
{
	int add = (flags & BELLOWS_CODEC_ADD) != 0;

	if (table == NULL || in == NULL || (n > 0 && out == NULL) ||
	    !gcomp_dtype_ok(dtype) || (flags & ~BELLOWS_CODEC_ADD) != 0 ||
	    (add && dtype != BELLOWS_GCOMP_F32))
		return BELLOWS_EINVAL;
	return kern_gcomp_decode_path(gcomp_path_now(), &table->k, in, bytes,
	    dtype, out, n, add, errbuf, errlen);
}

/* ---- The CUDA twin --------------------------------------------------- */

struct bellows_gcomp_cuda {
	kern_gcomp_table t;    /* the table, host copy (headers, version) */
	kern_gcomp_table *dev; /* its device copy */
	void *stream;          /* cudaStream_t of every call */
#ifdef KERN_HAVE_CUDA
	kern_cuda_gcomp_scratch w; /* per-chunk scratch, kept between calls */
#endif
};

int
bellows_gcomp_cuda_available(void)
{
#ifdef KERN_HAVE_CUDA
	return kern_cuda_codec_available();
#else
	return 0;
#endif
}

int
bellows_gcomp_cuda_open(const bellows_gcomp_table *table, void *stream,
    bellows_gcomp_cuda **ret_ctx)
{
	if (table == NULL || ret_ctx == NULL)
		return BELLOWS_EINVAL;
#ifdef KERN_HAVE_CUDA
	{
		bellows_gcomp_cuda *c;
		int rc;

		if (!kern_cuda_codec_available())
			return BELLOWS_ENOTSUP;
		if ((c = malloc(sizeof(*c))) == NULL)
			return BELLOWS_ENOMEM;
		c->t = table->k;
		c->stream = stream;
		c->w = (kern_cuda_gcomp_scratch){ NULL, 0 };
		if ((rc = kern_cuda_gcomp_table_upload(&c->t, &c->dev)) < 0) {
			free(c);
			return rc;
		}
		*ret_ctx = c;
		return 0;
	}
#else
	(void)stream;
	return BELLOWS_ENOTSUP;
#endif
}

void
bellows_gcomp_cuda_close(bellows_gcomp_cuda **ctx)
{
	if (ctx == NULL || *ctx == NULL)
		return;
#ifdef KERN_HAVE_CUDA
	kern_cuda_gcomp_table_free((*ctx)->dev);
	kern_cuda_gcomp_scratch_free(&(*ctx)->w);
#endif
	free(*ctx);
	*ctx = NULL;
}

uint32_t
bellows_gcomp_cuda_table_version(const bellows_gcomp_cuda *ctx)
{
	return ctx != NULL ? ctx->t.h.version : 0;
}

int
bellows_gcomp_levels_cuda(const bellows_gcomp_optimizer *opt, int dtype,
    const void *grad, uint64_t n, int max_level, uint8_t *levels, void *stream)
{
	kern_gcomp_opt o;

	/* kern_gcomp_levels' checks, which the device launch does not make. */
	if (opt == NULL ||
	    (n > 0 && (grad == NULL || levels == NULL || opt->param == NULL)))
		return BELLOWS_EINVAL;
	if (opt->kind < BELLOWS_GCOMP_SGD || opt->kind > BELLOWS_GCOMP_ADAMW ||
	    max_level < 0 || max_level > 3 || !gcomp_dtype_ok(dtype))
		return BELLOWS_EINVAL;
	if ((opt->kind == BELLOWS_GCOMP_ADAM ||
		opt->kind == BELLOWS_GCOMP_ADAMW) &&
	    opt->step < 1)
		return BELLOWS_EINVAL;
	o = gcomp_opt(opt);
#ifdef KERN_HAVE_CUDA
	if (n == 0)
		return 0;
	return kern_cuda_codec_rc(kern_cuda_gcomp_levels(&o, dtype, grad, n,
	    max_level, levels, stream));
#else
	(void)o;
	(void)stream;
	return BELLOWS_ENOTSUP;
#endif
}

int
bellows_gcomp_encode_cuda(bellows_gcomp_cuda *ctx, int dtype, const void *x,
    uint64_t n, int level, const uint8_t *levels, void *out, size_t cap,
    size_t *ret_bytes, bellows_gcomp_stats *ret_stats)
{
	if (ctx == NULL || out == NULL || (n > 0 && x == NULL) ||
	    !gcomp_dtype_ok(dtype) || level < 0 || level > 3 ||
	    n > BELLOWS_GCOMP_CUDA_MAX_VALUES)
		return BELLOWS_EINVAL;
#ifdef KERN_HAVE_CUDA
	{
		uint64_t bits[3];
		size_t len;
		int rc = kern_cuda_gcomp_encode_block(&ctx->t, ctx->dev, dtype,
		    x, n, level, levels, out, cap, &len, bits, &ctx->w,
		    ctx->stream);

		if (rc < 0)
			return rc;
		if (ret_bytes != NULL)
			*ret_bytes = len;
		if (ret_stats != NULL) {
			memset(ret_stats, 0, sizeof(*ret_stats));
			ret_stats->values = n;
			ret_stats->zeros = n - bits[1] / 2; /* 2 per non-zero */
			ret_stats->exp_bits = bits[0];
			ret_stats->level_bits = bits[1];
			ret_stats->mant_bits = bits[2];
			ret_stats->bytes = len;
		}
		return 0;
	}
#else
	(void)levels;
	(void)cap;
	(void)ret_bytes;
	(void)ret_stats;
	return BELLOWS_ENOTSUP;
#endif
}

int
bellows_gcomp_decode_cuda(bellows_gcomp_cuda *ctx, const void *in, size_t bytes,
    int dtype, void *out, uint64_t n, int flags, char *errbuf, size_t errlen)
{
	int add = (flags & BELLOWS_CODEC_ADD) != 0;

	if (ctx == NULL || in == NULL || (n > 0 && out == NULL) ||
	    !gcomp_dtype_ok(dtype) || (flags & ~BELLOWS_CODEC_ADD) != 0 ||
	    (add && dtype != BELLOWS_GCOMP_F32) ||
	    n > BELLOWS_GCOMP_CUDA_MAX_VALUES)
		return BELLOWS_EINVAL;
#ifdef KERN_HAVE_CUDA
	return kern_cuda_gcomp_decode_block(&ctx->t, ctx->dev, in, bytes, dtype,
	    out, n, add, errbuf, errlen, &ctx->w, ctx->stream);
#else
	(void)bytes;
	(void)errbuf;
	(void)errlen;
	return BELLOWS_ENOTSUP;
#endif
}
