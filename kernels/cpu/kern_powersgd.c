/* kern_powersgd - PowerSGD's building blocks on the CPU: the elementwise passes
 * (vectorised per ISA, bit for bit the same), the blocked two-pass
 * Gram-Schmidt, the one-pass stages of small ranks (their scalar row loops
 * and the blocks of transposed Q), and the products of larger ranks through
 * cblas or plain loops; see kern_powersgd.h. */
#include "kern_powersgd.h"

#include <math.h>
#include <string.h>

#include <bellows/error.h>

#include "../kernels.h"
#include "kern_stats.h"

#ifdef KERN_HAVE_CBLAS
#include <cblas.h>
#endif

static void
ef_add_scalar(const float *g, float *e, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		e[i] = e[i] + g[i];
}

static void
sub_scalar(const float *d, float *e, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		e[i] = e[i] - d[i];
}

void
kern_psgd_ef_add(const float *g, float *e, uint64_t n)
{
	switch (kern_cpu_isa_best()) {
#ifdef KERN_HAVE_X86
	case KERN_ISA_AVX512:
		kern_psgd_ef_add_avx512(g, e, n);
		return;
	case KERN_ISA_AVX2:
		kern_psgd_ef_add_avx2(g, e, n);
		return;
#endif
	default:
		ef_add_scalar(g, e, n);
	}
}

void
kern_psgd_sub(const float *d, float *e, uint64_t n)
{
	switch (kern_cpu_isa_best()) {
#ifdef KERN_HAVE_X86
	case KERN_ISA_AVX512:
		kern_psgd_sub_avx512(d, e, n);
		return;
	case KERN_ISA_AVX2:
		kern_psgd_sub_avx2(d, e, n);
		return;
#endif
	default:
		sub_scalar(d, e, n);
	}
}

/* Makes columns [t0, t1) of p (rows x ld) orthogonal to columns [c0, c1)
 * once: the coefficients c[i][t] = <p_(c0+i), p_(t0+t)> / <p_i, p_i> of
 * the whole target block in one pass over the rows (in double), then
 * p_t -= sum_i p_i c[i][t] in a second. Dividing by <p_i, p_i> (1 but for
 * rounding, or the torch rule's shrinking of a column of norm near 1e-8)
 * keeps the projection exact whatever the norms; an all-zero p_i is
 * skipped. t1 - t0 <= KERN_PSGD_BLOCK. */
static void
project(float *p, uint64_t rows, uint32_t ld, uint32_t c0, uint32_t c1,
    uint32_t t0, uint32_t t1)
{
	double c[KERN_PSGD_MAX_RANK][KERN_PSGD_BLOCK];
	double nn[KERN_PSGD_MAX_RANK];
	uint32_t nc = c1 - c0, nt = t1 - t0;

	memset(c, 0, sizeof(c));
	memset(nn, 0, sizeof(nn));
	for (uint64_t row = 0; row < rows; row++) {
		const float *x = p + row * ld;

		for (uint32_t i = 0; i < nc; i++) {
			double a = x[c0 + i];

			nn[i] += a * a;
			for (uint32_t t = 0; t < nt; t++)
				c[i][t] += a * x[t0 + t];
		}
	}
	for (uint32_t i = 0; i < nc; i++)
		for (uint32_t t = 0; t < nt; t++)
			c[i][t] = nn[i] > 0.0 ? c[i][t] / nn[i] : 0.0;
	for (uint64_t row = 0; row < rows; row++) {
		float *x = p + row * ld;

		for (uint32_t t = 0; t < nt; t++) {
			double s = x[t0 + t];

			for (uint32_t i = 0; i < nc; i++)
				s -= (double)x[c0 + i] * c[i][t];
			x[t0 + t] = (float)s;
		}
	}
}

/* Returns the norm of column j of p; multiplies the column by
 * scale / norm when the norm is not 0. */
static double
rescale(float *p, uint64_t rows, uint32_t ld, uint32_t j, double scale)
{
	double ss = 0.0, nrm, s;

	for (uint64_t row = 0; row < rows; row++) {
		double v = p[row * ld + j];

		ss += v * v;
	}
	nrm = sqrt(ss);
	if (nrm > 0.0) {
		s = scale / nrm;
		for (uint64_t row = 0; row < rows; row++)
			p[row * ld + j] = (float)(p[row * ld + j] * s);
	}
	return nrm;
}

/* BCGS2: each block of columns goes through two passes of (projection
 * against the earlier blocks, then column by column against the block's
 * earlier columns, twice in the first pass and once in the second, and
 * normalisation), so that what the first pass
 * left of the earlier blocks, amplified by the normalisation of a small
 * remainder, is removed by the second. The first pass's norm nu of a column
 * (what is left after the projections) sets its final length by the torch
 * rule, nu / (nu + 1e-8), applied in the second pass's normalisation. */
void
kern_psgd_orth(float *p, uint64_t rows, uint32_t rank)
{
	double keep[KERN_PSGD_MAX_RANK];

	for (uint32_t b0 = 0; b0 < rank; b0 += KERN_PSGD_BLOCK) {
		uint32_t b1 = b0 + KERN_PSGD_BLOCK < rank ? b0 + KERN_PSGD_BLOCK
							  : rank;

		for (int pass = 0; pass < 2; pass++) {
			if (b0 > 0)
				project(p, rows, rank, 0, b0, b0, b1);
			for (uint32_t j = b0; j < b1; j++) {
				double nu;

				/* Twice in the first pass; once in the
				 * second, whose columns are orthogonal but
				 * for rounding already. */
				for (int k = pass; k < 2 && j > b0; k++)
					project(p, rows, rank, b0, j, j, j + 1);
				nu = rescale(p, rows, rank, j,
				    pass == 0 ? 1.0 : keep[j]);
				if (pass == 0)
					keep[j] = nu / (nu + KERN_PSGD_EPS);
			}
		}
	}
}

/* The sum of 8 lanes in the order the AVX2 code adds them (a 256-bit
 * register's halves, then the 128-bit halves, then the two left). */
static float
lanes_sum(const float l[8])
{
	float v0 = l[0] + l[4], v1 = l[1] + l[5];
	float v2 = l[2] + l[6], v3 = l[3] + l[7];

	return (v0 + v2) + (v1 + v3);
}

static void
mq_block_scalar(const float *g, float *m, const float *qt, float *p,
    uint64_t rows, uint64_t ld, uint64_t k0, uint32_t kb, uint32_t rank,
    uint32_t c0)
{
	uint32_t k8 = kb & ~7u, nc = rank - c0 < 4 ? rank - c0 : 4;

	for (uint64_t i = 0; i < rows; i++) {
		float *mi = m + i * ld + k0, acc[4][8] = { { 0 } }, s[4];
		const float *gi = g == NULL ? NULL : g + i * ld + k0;

		for (uint32_t k = 0; k < k8; k += 8)
			for (uint32_t l = 0; l < 8; l++) {
				float x = mi[k + l];

				if (gi != NULL)
					mi[k + l] = x = x + gi[k + l];
				for (uint32_t c = 0; c < 4; c++)
					acc[c][l] = acc[c][l] +
					    x *
						qt[c * KERN_PSGD_COLS_BLOCK +
						    k + l];
			}
		for (uint32_t c = 0; c < 4; c++)
			s[c] = lanes_sum(acc[c]);
		for (uint32_t k = k8; k < kb; k++) {
			float x = mi[k];

			if (gi != NULL)
				mi[k] = x = x + gi[k];
			for (uint32_t c = 0; c < 4; c++)
				s[c] = s[c] +
				    x * qt[c * KERN_PSGD_COLS_BLOCK + k];
		}
		for (uint32_t c = 0; c < nc; c++)
			p[i * rank + c0 + c] = k0 == 0
			    ? s[c]
			    : p[i * rank + c0 + c] + s[c];
	}
}

static void
mtp_block_scalar(const float *m, const float *p, float *qt, uint64_t rows,
    uint64_t ld, uint64_t k0, uint32_t kb, uint32_t rank)
{
	for (uint64_t i = 0; i < rows; i++) {
		const float *mi = m + i * ld + k0;

		for (uint32_t c = 0; c < rank; c++) {
			float pc = p[i * rank + c];
			float *t = qt + c * KERN_PSGD_COLS_BLOCK;

			for (uint32_t k = 0; k < kb; k++)
				t[k] = t[k] + mi[k] * pc;
		}
	}
}

static void
pqt_block_scalar(const float *p, const float *qt, float *out, float *m,
    uint64_t rows, uint64_t ld, uint64_t k0, uint32_t kb, uint32_t rank)
{
	for (uint64_t i = 0; i < rows; i++) {
		const float *pi = p + i * rank;
		float *oi = out + i * ld + k0, *mi = m + i * ld + k0;

		for (uint32_t k = 0; k < kb; k++)
			kern_psgd_pqt_elem(pi, qt, oi, mi, k, rank);
	}
}

/* Non-zero when the one-pass stages of `isa` are the AVX2 ones (AVX-512
 * processors run them too: the same bits, and the stages are
 * memory-bound). */
static int
onepass_avx2(int isa)
{
#ifdef KERN_HAVE_X86
	if (isa == KERN_ISA_AUTO)
		isa = kern_cpu_isa_best();
	return isa >= KERN_ISA_AVX2;
#else
	(void)isa;
	return 0;
#endif
}

/* The columns of the block that starts at column k0. */
static uint32_t
block_cols(uint64_t cols, uint64_t k0)
{
	return (uint32_t)(cols - k0 < KERN_PSGD_COLS_BLOCK
		? cols - k0
		: KERN_PSGD_COLS_BLOCK);
}

/* Copies columns c0 .. c0 + nt - 1 of rows [k0, k0 + kb) of q (rank
 * columns) into the rows of qt, transposed; the rows from nc to nt - 1
 * (past the rank) are zero. */
static void
qt_load(const float *q, uint32_t rank, uint64_t k0, uint32_t kb, uint32_t c0,
    uint32_t nc, uint32_t nt, float *qt)
{
	for (uint32_t c = 0; c < nt; c++) {
		float *t = qt + c * KERN_PSGD_COLS_BLOCK;

		if (c >= nc) {
			memset(t, 0, kb * sizeof(float));
			continue;
		}
		for (uint32_t k = 0; k < kb; k++)
			t[k] = q[(k0 + k) * rank + c0 + c];
	}
}

void
kern_psgd_ef_mq(int isa, const float *g, float *m, const float *q, float *p,
    uint64_t rows, uint64_t cols, uint32_t rank)
{
	float qt[4 * KERN_PSGD_COLS_BLOCK];
	int avx2 = onepass_avx2(isa);

	if (rank > KERN_PSGD_ONEPASS_MAX) {
		if (g != NULL)
			kern_psgd_ef_add(g, m, rows * cols);
		kern_psgd_mq(m, q, p, rows, cols, rank);
		return;
	}
	for (uint32_t c0 = 0; c0 < rank; c0 += 4) {
		uint32_t nc = rank - c0 < 4 ? rank - c0 : 4;
		/* M holds G + E after the first pass over it. */
		const float *gc = c0 == 0 ? g : NULL;

		for (uint64_t k0 = 0; k0 < cols; k0 += KERN_PSGD_COLS_BLOCK) {
			uint32_t kb = block_cols(cols, k0);

			qt_load(q, rank, k0, kb, c0, nc, 4, qt);
#ifdef KERN_HAVE_X86
			if (avx2) {
				kern_psgd_mq_block_avx2(gc, m, qt, p, rows,
				    cols, k0, kb, rank, c0);
				continue;
			}
#endif
			(void)avx2;
			mq_block_scalar(gc, m, qt, p, rows, cols, k0, kb, rank,
			    c0);
		}
	}
}

void
kern_psgd_mtp1(int isa, const float *m, const float *p, float *q, uint64_t rows,
    uint64_t cols, uint32_t rank)
{
	float qt[KERN_PSGD_ONEPASS_MAX * KERN_PSGD_COLS_BLOCK];
	int avx2 = onepass_avx2(isa);

	if (rank > KERN_PSGD_ONEPASS_MAX) {
		kern_psgd_mtp(m, p, q, rows, cols, rank);
		return;
	}
	for (uint64_t k0 = 0; k0 < cols; k0 += KERN_PSGD_COLS_BLOCK) {
		uint32_t kb = block_cols(cols, k0);

		for (uint32_t c = 0; c < rank; c++)
			memset(qt + c * KERN_PSGD_COLS_BLOCK, 0,
			    kb * sizeof(float));
#ifdef KERN_HAVE_X86
		if (avx2)
			kern_psgd_mtp_block_avx2(m, p, qt, rows, cols, k0, kb,
			    rank);
		else
#endif
			mtp_block_scalar(m, p, qt, rows, cols, k0, kb, rank);
		(void)avx2;
		for (uint32_t k = 0; k < kb; k++)
			for (uint32_t c = 0; c < rank; c++)
				q[(k0 + k) * rank +
				    c] = qt[c * KERN_PSGD_COLS_BLOCK + k];
	}
}

void
kern_psgd_pqt_sub(int isa, const float *p, const float *q, float *out, float *m,
    uint64_t rows, uint64_t cols, uint32_t rank)
{
	float qt[KERN_PSGD_ONEPASS_MAX * KERN_PSGD_COLS_BLOCK];
	int avx2 = onepass_avx2(isa);

	if (rank > KERN_PSGD_ONEPASS_MAX) {
		kern_psgd_pqt(p, q, out, rows, cols, rank);
		kern_psgd_sub(out, m, rows * cols);
		return;
	}
	for (uint64_t k0 = 0; k0 < cols; k0 += KERN_PSGD_COLS_BLOCK) {
		uint32_t kb = block_cols(cols, k0);

		qt_load(q, rank, k0, kb, 0, rank, rank, qt);
#ifdef KERN_HAVE_X86
		if (avx2) {
			kern_psgd_pqt_block_avx2(p, qt, out, m, rows, cols, k0,
			    kb, rank);
			continue;
		}
#endif
		(void)avx2;
		pqt_block_scalar(p, qt, out, m, rows, cols, k0, kb, rank);
	}
}

#ifdef KERN_HAVE_CBLAS

/* Ranks up to KERN_PSGD_ONEPASS_MAX take the one-pass stages above: SGEMV
 * on each column (one pass over M per column, a quarter of OpenBLAS's
 * SGEMM time at rank 1 and half at rank 4 on this project's machine) was
 * what they replaced. */

void
kern_psgd_mq(const float *m, const float *q, float *p, uint64_t rows,
    uint64_t cols, uint32_t rank)
{
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows,
	    (int)rank, (int)cols, 1.0f, m, (int)cols, q, (int)rank, 0.0f, p,
	    (int)rank);
}

void
kern_psgd_mtp(const float *m, const float *p, float *q, uint64_t rows,
    uint64_t cols, uint32_t rank)
{
	cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)cols,
	    (int)rank, (int)rows, 1.0f, m, (int)cols, p, (int)rank, 0.0f, q,
	    (int)rank);
}

void
kern_psgd_pqt(const float *p, const float *q, float *out, uint64_t rows,
    uint64_t cols, uint32_t rank)
{
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows,
	    (int)cols, (int)rank, 1.0f, p, (int)rank, q, (int)rank, 0.0f, out,
	    (int)cols);
}

const char *
kern_psgd_blas(void)
{
	return KERN_PSGD_BLAS_NAME;
}

int
kern_psgd_blas_threads(int threads)
{
#ifdef KERN_HAVE_OPENBLAS
	openblas_set_num_threads(threads);
	return 0;
#else
	(void)threads;
	return BELLOWS_ENOTSUP;
#endif
}

#else /* plain loops, summing in float in the order of k */

void
kern_psgd_mq(const float *m, const float *q, float *p, uint64_t rows,
    uint64_t cols, uint32_t rank)
{
	for (uint64_t i = 0; i < rows; i++) {
		float acc[KERN_PSGD_MAX_RANK] = { 0 };
		const float *mi = m + i * cols;

		for (uint64_t k = 0; k < cols; k++) {
			float a = mi[k];
			const float *qk = q + k * rank;

			for (uint32_t c = 0; c < rank; c++)
				acc[c] += a * qk[c];
		}
		memcpy(p + i * rank, acc, rank * sizeof(float));
	}
}

void
kern_psgd_mtp(const float *m, const float *p, float *q, uint64_t rows,
    uint64_t cols, uint32_t rank)
{
	memset(q, 0, (size_t)(cols * rank) * sizeof(float));
	for (uint64_t i = 0; i < rows; i++) {
		const float *mi = m + i * cols, *pi = p + i * rank;

		for (uint64_t k = 0; k < cols; k++) {
			float a = mi[k];
			float *qk = q + k * rank;

			for (uint32_t c = 0; c < rank; c++)
				qk[c] += a * pi[c];
		}
	}
}

void
kern_psgd_pqt(const float *p, const float *q, float *out, uint64_t rows,
    uint64_t cols, uint32_t rank)
{
	for (uint64_t i = 0; i < rows; i++) {
		const float *pi = p + i * rank;

		for (uint64_t k = 0; k < cols; k++) {
			const float *qk = q + k * rank;
			float s = 0.0f;

			for (uint32_t c = 0; c < rank; c++)
				s += pi[c] * qk[c];
			out[i * cols + k] = s;
		}
	}
}

const char *
kern_psgd_blas(void)
{
	return "loops";
}

int
kern_psgd_blas_threads(int threads)
{
	return threads == 1 ? 0 : BELLOWS_ENOTSUP;
}

#endif
