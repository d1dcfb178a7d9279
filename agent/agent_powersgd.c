/* agent_powersgd - bellows/codec.h's PowerSGD building blocks on top of the CPU
 * kernels (kernels/cpu/kern_powersgd.h): argument checks, the batched stages
 * over arrays of same-shape matrices, and the group state of
 * bellows_psgd (P, Q and residuals of count layers, allocated once); and
 * the cuBLAS twin's public entry points (bellows_psgd_*_cuda), the same
 * checks in front of kernels/cuda/kern_cuda_powersgd.h when built with cuBLAS.
 */
#include <bellows/codec.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/kern_powersgd.h"
#include "kernels/cpu/kern_stats.h"
#ifdef KERN_HAVE_CUBLAS
#include "kernels/cuda/kern_cuda_codec.h"
#include "kernels/cuda/kern_cuda_powersgd.h"
#endif

struct bellows_psgd {
	uint64_t rows; /* rows of every layer's matrix */
	uint64_t cols; /* columns */
	uint32_t rank; /* columns of P and Q */
	size_t count;  /* layers */
	float *p;      /* count x rows x rank */
	float *q;      /* count x cols x rank */
	float *res;    /* count x rows x cols */
	float **mp;    /* count pointers into res */
	float **pp;    /* count pointers into p */
	float **qp;    /* count pointers into q */
};

/* Returns non-zero if [a, a + an) and [b, b + bn) (bytes) overlap. */
static int
overlaps(const void *a, uint64_t an, const void *b, uint64_t bn)
{
	uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;

	return an > 0 && bn > 0 && x < y + bn && y < x + an;
}

/* Returns non-zero if the shape is within the limits of bellows/codec.h. */
static int
shape_ok(uint64_t rows, uint64_t cols, uint32_t rank)
{
	return rank >= 1 && rank <= BELLOWS_PSGD_MAX_RANK && rank <= rows &&
	    rank <= cols && rows <= KERN_PSGD_MAX_DIM &&
	    cols <= KERN_PSGD_MAX_DIM &&
	    rows * cols <= BELLOWS_CODEC_MAX_VALUES;
}

/* Checks one matrix's buffers: non-NULL (where needed) and pairwise
 * disjoint. bufs[i] has bytes[i] bytes; a NULL with may_null[i] passes. */
static int
bufs_ok(const void *const *bufs, const uint64_t *bytes, const int *may_null,
    int nb)
{
	for (int i = 0; i < nb; i++) {
		if (bufs[i] == NULL) {
			if (!may_null[i])
				return 0;
			continue;
		}
		for (int j = 0; j < i; j++)
			if (bufs[j] != NULL &&
			    overlaps(bufs[i], bytes[i], bufs[j], bytes[j]))
				return 0;
	}
	return 1;
}

int
bellows_psgd_ef_add(const float *grad, float *residual, uint64_t n)
{
	if (n > BELLOWS_CODEC_MAX_VALUES)
		return BELLOWS_EINVAL;
	if (n == 0)
		return 0;
	if (grad == NULL || residual == NULL ||
	    overlaps(grad, n * 4, residual, n * 4))
		return BELLOWS_EINVAL;
	kern_psgd_ef_add(grad, residual, n);
	return 0;
}

int
bellows_psgd_orthogonalize(float *p, uint64_t rows, uint32_t rank)
{
	if (p == NULL || rank < 1 || rank > BELLOWS_PSGD_MAX_RANK ||
	    rank > rows || rows > KERN_PSGD_MAX_DIM)
		return BELLOWS_EINVAL;
	kern_psgd_orth(p, rows, rank);
	return 0;
}

/* Checks a batch: shape, arrays, and each matrix's m, grad, q, p (or out)
 * buffers. Which of the four may be NULL: may_null. */
static int
batch_ok(uint64_t rows, uint64_t cols, uint32_t rank, size_t count,
    const void *const *a[4], const int may_null[4])
{
	uint64_t bytes[4] = { rows * cols * 4, rows * cols * 4, cols * rank * 4,
		rows * rank * 4 };

	if (!shape_ok(rows, cols, rank))
		return 0;
	if (count == 0)
		return 1;
	for (int k = 0; k < 4; k++)
		if (a[k] == NULL && !may_null[k])
			return 0;
	for (size_t i = 0; i < count; i++) {
		const void *b[4];

		for (int k = 0; k < 4; k++)
			b[k] = a[k] == NULL ? NULL : a[k][i];
		if (!bufs_ok(b, bytes, may_null, 4))
			return 0;
	}
	return 1;
}

int
bellows_psgd_project(uint64_t rows, uint64_t cols, uint32_t rank, size_t count,
    float *const *m, const float *const *grad, const float *const *q,
    float *const *p)
{
	const void *const *a[4] = { (const void *const *)m,
		(const void *const *)grad, (const void *const *)q,
		(const void *const *)p };
	static const int may_null[4] = { 0, 1, 0, 0 };

	if (!batch_ok(rows, cols, rank, count, a, may_null))
		return BELLOWS_EINVAL;
	for (size_t i = 0; i < count; i++)
		kern_psgd_ef_mq(KERN_ISA_AUTO, grad == NULL ? NULL : grad[i],
		    m[i], q[i], p[i], rows, cols, rank);
	return 0;
}

int
bellows_psgd_power(uint64_t rows, uint64_t cols, uint32_t rank, size_t count,
    const float *const *m, float *const *p, float *const *q)
{
	const void *const *a[4] = { (const void *const *)m, NULL,
		(const void *const *)q, (const void *const *)p };
	static const int may_null[4] = { 0, 1, 0, 0 };

	if (!batch_ok(rows, cols, rank, count, a, may_null))
		return BELLOWS_EINVAL;
	for (size_t i = 0; i < count; i++) {
		kern_psgd_orth(p[i], rows, rank);
		kern_psgd_mtp1(KERN_ISA_AUTO, m[i], p[i], q[i], rows, cols,
		    rank);
	}
	return 0;
}

int
bellows_psgd_decode(uint64_t rows, uint64_t cols, uint32_t rank, size_t count,
    float *const *m, const float *const *p, const float *const *q,
    float *const *out)
{
	const void *const *a[4] = { (const void *const *)m,
		(const void *const *)out, (const void *const *)q,
		(const void *const *)p };
	static const int may_null[4] = { 0, 0, 0, 0 };

	if (!batch_ok(rows, cols, rank, count, a, may_null))
		return BELLOWS_EINVAL;
	for (size_t i = 0; i < count; i++)
		kern_psgd_pqt_sub(KERN_ISA_AUTO, p[i], q[i], out[i], m[i], rows,
		    cols, rank);
	return 0;
}

/* Returns a zeroed, 64-byte aligned block of n floats, or NULL. */
static float *
zalloc(uint64_t n)
{
	size_t bytes = ((size_t)n * sizeof(float) + 63) / 64 * 64;
	float *f = aligned_alloc(64, bytes);

	if (f != NULL)
		memset(f, 0, bytes);
	return f;
}

int
bellows_psgd_new(uint64_t rows, uint64_t cols, uint32_t rank, size_t count,
    bellows_psgd **ret_psgd)
{
	bellows_psgd *g;

	if (ret_psgd == NULL || count == 0 || !shape_ok(rows, cols, rank) ||
	    count > BELLOWS_CODEC_MAX_VALUES / (rows * cols))
		return BELLOWS_EINVAL;
	if ((g = calloc(1, sizeof(*g))) == NULL)
		return BELLOWS_ENOMEM;
	g->rows = rows;
	g->cols = cols;
	g->rank = rank;
	g->count = count;
	g->p = zalloc(count * rows * rank);
	g->q = zalloc(count * cols * rank);
	g->res = zalloc(count * rows * cols);
	g->mp = calloc(count, sizeof(*g->mp));
	g->pp = calloc(count, sizeof(*g->pp));
	g->qp = calloc(count, sizeof(*g->qp));
	if (g->p == NULL || g->q == NULL || g->res == NULL || g->mp == NULL ||
	    g->pp == NULL || g->qp == NULL) {
		bellows_psgd_destroy(&g);
		return BELLOWS_ENOMEM;
	}
	for (size_t i = 0; i < count; i++) {
		g->mp[i] = g->res + i * rows * cols;
		g->pp[i] = g->p + i * rows * rank;
		g->qp[i] = g->q + i * cols * rank;
	}
	*ret_psgd = g;
	return 0;
}

void
bellows_psgd_destroy(bellows_psgd **psgd)
{
	bellows_psgd *g;

	if (psgd == NULL || *psgd == NULL)
		return;
	g = *psgd;
	free(g->p);
	free(g->q);
	free(g->res);
	free(g->mp);
	free(g->pp);
	free(g->qp);
	free(g);
	*psgd = NULL;
}

float *
bellows_psgd_p(bellows_psgd *psgd)
{
	return psgd == NULL ? NULL : psgd->p;
}

float *
bellows_psgd_q(bellows_psgd *psgd)
{
	return psgd == NULL ? NULL : psgd->q;
}

float *
bellows_psgd_residual(bellows_psgd *psgd, size_t i)
{
	if (psgd == NULL || i >= psgd->count)
		return NULL;
	return psgd->mp[i];
}

/* Returns non-zero if every v[i] is non-NULL and outside the group's
 * memory. */
static int
group_bufs_ok(const bellows_psgd *g, const float *const *v)
{
	uint64_t n = g->rows * g->cols * 4;

	if (v == NULL)
		return 0;
	for (size_t i = 0; i < g->count; i++)
		if (v[i] == NULL || overlaps(v[i], n, g->res, g->count * n) ||
		    overlaps(v[i], n, g->p, g->count * g->rows * g->rank * 4) ||
		    overlaps(v[i], n, g->q, g->count * g->cols * g->rank * 4))
			return 0;
	return 1;
}

int
bellows_psgd_begin(bellows_psgd *psgd, const float *const *grads)
{
	if (psgd == NULL || !group_bufs_ok(psgd, grads))
		return BELLOWS_EINVAL;
	return bellows_psgd_project(psgd->rows, psgd->cols, psgd->rank,
	    psgd->count, psgd->mp, grads, (const float *const *)psgd->qp,
	    psgd->pp);
}

int
bellows_psgd_middle(bellows_psgd *psgd)
{
	if (psgd == NULL)
		return BELLOWS_EINVAL;
	return bellows_psgd_power(psgd->rows, psgd->cols, psgd->rank,
	    psgd->count, (const float *const *)psgd->mp, psgd->pp, psgd->qp);
}

int
bellows_psgd_end(bellows_psgd *psgd, float q_divisor, float *const *out)
{
	uint64_t nq;

	if (psgd == NULL || !isfinite(q_divisor) || !(q_divisor > 0.0f) ||
	    !group_bufs_ok(psgd, (const float *const *)out))
		return BELLOWS_EINVAL;
	nq = psgd->count * psgd->cols * psgd->rank;
	if (q_divisor != 1.0f)
		for (uint64_t i = 0; i < nq; i++)
			psgd->q[i] = psgd->q[i] / q_divisor;
	return bellows_psgd_decode(psgd->rows, psgd->cols, psgd->rank,
	    psgd->count, psgd->mp, (const float *const *)psgd->pp,
	    (const float *const *)psgd->qp, out);
}

const char *
bellows_psgd_blas(void)
{
	return kern_psgd_blas();
}

int
bellows_psgd_blas_threads(int threads)
{
	if (threads < 1)
		return BELLOWS_EINVAL;
	return kern_psgd_blas_threads(threads);
}

/* ---- The cuBLAS twin -------------------------------------------------- */

int
bellows_psgd_cuda_available(void)
{
#ifdef KERN_HAVE_CUBLAS
	return kern_cuda_codec_available();
#else
	return 0;
#endif
}

int
bellows_psgd_cuda_open(void *stream, bellows_psgd_cuda **ret_ctx)
{
	if (ret_ctx == NULL)
		return BELLOWS_EINVAL;
#ifdef KERN_HAVE_CUBLAS
	{
		kern_cuda_psgd *k = NULL;
		int rc = kern_cuda_psgd_open(stream, &k);

		if (rc == 0)
			*ret_ctx = (bellows_psgd_cuda *)k;
		return rc;
	}
#else
	(void)stream;
	return BELLOWS_ENOTSUP;
#endif
}

void
bellows_psgd_cuda_close(bellows_psgd_cuda **ctx)
{
#ifdef KERN_HAVE_CUBLAS
	if (ctx != NULL) {
		kern_cuda_psgd *k = (kern_cuda_psgd *)*ctx;

		kern_cuda_psgd_close(&k);
		*ctx = NULL;
	}
#else
	if (ctx != NULL)
		*ctx = NULL;
#endif
}

int
bellows_psgd_project_cuda(bellows_psgd_cuda *ctx, uint64_t rows, uint64_t cols,
    uint32_t rank, size_t count, float *const *m, const float *const *grad,
    const float *const *q, float *const *p)
{
	const void *const *a[4] = { (const void *const *)m,
		(const void *const *)grad, (const void *const *)q,
		(const void *const *)p };
	static const int may_null[4] = { 0, 1, 0, 0 };

	if (ctx == NULL || !batch_ok(rows, cols, rank, count, a, may_null))
		return BELLOWS_EINVAL;
	if (count == 0)
		return 0;
#ifdef KERN_HAVE_CUBLAS
	return kern_cuda_psgd_project((kern_cuda_psgd *)ctx, rows, cols, rank,
	    count, m, grad, q, p);
#else
	return BELLOWS_ENOTSUP;
#endif
}

int
bellows_psgd_power_cuda(bellows_psgd_cuda *ctx, uint64_t rows, uint64_t cols,
    uint32_t rank, size_t count, const float *const *m, float *const *p,
    float *const *q)
{
	const void *const *a[4] = { (const void *const *)m, NULL,
		(const void *const *)q, (const void *const *)p };
	static const int may_null[4] = { 0, 1, 0, 0 };

	if (ctx == NULL || !batch_ok(rows, cols, rank, count, a, may_null))
		return BELLOWS_EINVAL;
	if (count == 0)
		return 0;
#ifdef KERN_HAVE_CUBLAS
	return kern_cuda_psgd_power((kern_cuda_psgd *)ctx, rows, cols, rank,
	    count, m, p, q);
#else
	return BELLOWS_ENOTSUP;
#endif
}

int
bellows_psgd_decode_cuda(bellows_psgd_cuda *ctx, uint64_t rows, uint64_t cols,
    uint32_t rank, size_t count, float *const *m, const float *const *p,
    const float *const *q, float *const *out)
{
	const void *const *a[4] = { (const void *const *)m,
		(const void *const *)out, (const void *const *)q,
		(const void *const *)p };
	static const int may_null[4] = { 0, 0, 0, 0 };

	if (ctx == NULL || !batch_ok(rows, cols, rank, count, a, may_null))
		return BELLOWS_EINVAL;
	if (count == 0)
		return 0;
#ifdef KERN_HAVE_CUBLAS
	return kern_cuda_psgd_decode((kern_cuda_psgd *)ctx, rows, cols, rank,
	    count, m, p, q, out);
#else
	return BELLOWS_ENOTSUP;
#endif
}
