/* kern_powersgd - the building blocks of PowerSGD (Vogels et al., NeurIPS 2019)
 * on the CPU: the error-feedback addition, the orthogonalisation of the
 * tall-skinny P, and the three matrix products, through a BLAS (OpenBLAS's
 * cblas when the build found it, else plain C loops).
 *
 * Matrices are row-major float32 with no padding between rows, as a
 * contiguous torch tensor: M is rows x cols, P is rows x rank, Q is
 * cols x rank, rank <= KERN_PSGD_MAX_RANK.
 *
 * Orthogonalisation: blocked two-pass classical Gram-Schmidt (BCGS2). The
 * columns go in blocks of KERN_PSGD_BLOCK, and each block through two
 * passes of: projection against all the columns before the block
 * (coefficients of the whole block in one pass over the rows, the update in
 * a second), then each column against the block's earlier columns (twice)
 * and its normalisation. The second pass removes what the first left,
 * amplified by normalising a small remainder. Sums are in double, and a
 * projection divides by the column's squared norm, so it is exact whatever
 * that norm. Twice is enough: the columns come out orthonormal to a few
 * float32 roundings (the tests see 3e-8 up to condition numbers of 1e6), as
 * long as a column is not numerically dependent on those before it (then
 * what remains is rounding noise, normalised like any other column).
 *
 * Lengths follow bellows.compress.orthogonalize (torch): a column whose
 * remainder after the projections has norm nu ends with length
 * nu / (nu + 1e-8). An all-zero column stays zero (orthogonal to
 * everything); one of norm far below 1e-8 shrinks towards zero rather than
 * being blown up. The torch code, a single modified Gram-Schmidt pass in
 * float, agrees to rounding on well-conditioned P and is less orthogonal
 * on ill-conditioned P.
 *
 * Non-finite values are not filtered: a NaN or infinity in a matrix makes
 * its P, Q, product and residual non-finite (the same matrix only; matrices
 * of a batch are independent).
 */
#ifndef KERN_CPU_POWERSGD_H
#define KERN_CPU_POWERSGD_H

#include <stdint.h>

#define KERN_PSGD_MAX_RANK 32   /* largest rank the orthogonalisation takes */
#define KERN_PSGD_BLOCK    8    /* columns per Gram-Schmidt block */
#define KERN_PSGD_EPS      1e-8 /* added to a column's norm before dividing */

/* e[i] = e[i] + g[i] for i < n (float addition, bit for bit on every
 * ISA). */
void kern_psgd_ef_add(const float *g, float *e, uint64_t n);

/* e[i] = e[i] - d[i] for i < n (the residual after the decode). */
void kern_psgd_sub(const float *d, float *e, uint64_t n);

#ifdef KERN_HAVE_X86
/* The two above with AVX2 (kern_powersgd_avx2.c) and AVX-512
 * (kern_powersgd_avx512.c), bit for bit the same; called by them only on
 * processors that have the instructions. */
void kern_psgd_ef_add_avx2(const float *g, float *e, uint64_t n);
void kern_psgd_sub_avx2(const float *d, float *e, uint64_t n);
void kern_psgd_ef_add_avx512(const float *g, float *e, uint64_t n);
void kern_psgd_sub_avx512(const float *d, float *e, uint64_t n);
#endif

/* Orthonormalises the rank columns of p (rows x rank, row-major) in place,
 * as above. rank <= KERN_PSGD_MAX_RANK. */
void kern_psgd_orth(float *p, uint64_t rows, uint32_t rank);

/* p = m q: m rows x cols, q cols x rank, p rows x rank. */
void kern_psgd_mq(const float *m, const float *q, float *p, uint64_t rows,
    uint64_t cols, uint32_t rank);

/* q = m^T p: q cols x rank. */
void kern_psgd_mtp(const float *m, const float *p, float *q, uint64_t rows,
    uint64_t cols, uint32_t rank);

/* out = p q^T: out rows x cols. */
void kern_psgd_pqt(const float *p, const float *q, float *out, uint64_t rows,
    uint64_t cols, uint32_t rank);

/* The BLAS the products use: "openblas", "cblas" or "loops". */
const char *kern_psgd_blas(void);

/* Sets the threads of the BLAS's products (process-wide: OpenBLAS's
 * openblas_set_num_threads). Returns 0, or BELLOWS_ENOTSUP when the BLAS
 * has no such setting (another cblas; the loops always run one thread and
 * return 0 for 1). */
int kern_psgd_blas_threads(int threads);

/* The largest rows or cols the products take (a BLAS int). */
#define KERN_PSGD_MAX_DIM 0x7fffffffu

#endif /* KERN_CPU_POWERSGD_H */
