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

/* One pass over M for each stage at ranks up to KERN_PSGD_ONEPASS_MAX:
 * PowerSGD's products are memory-bound at small ranks (a 1024 x 1024 M is
 * 4 MB, P and Q 16 KB at rank 4), and a BLAS reads M once per column of Q
 * (SGEMV) or packs it (SGEMM), then the error feedback and the residual
 * read it again. These read it once: the error-feedback addition inside
 * the first product's pass, the residual inside the decode's. Q goes
 * through a transposed block of KERN_PSGD_COLS_BLOCK columns on the stack
 * (at most KERN_PSGD_ONEPASS_MAX x KERN_PSGD_COLS_BLOCK floats, 32 KB), so
 * nothing allocates. A block's part of a row of M is 4 KB, a page: blocks
 * of 512 columns, which hop to the next row every 2 KB, made the first
 * stage 1.9x slower on a 1024 x 1024 M (the prefetcher restarts at every
 * hop), while past a page it restarts anyway. Each sum has one fixed order
 * (below), the same in the scalar and the AVX2 code (a product and a sum
 * rounded on their own, no fused multiply-add), so every instruction set gives
 * the same bits; above that rank the stages go through the BLAS as before.
 * `isa` is a KERN_ISA_* (kern_stats.h): KERN_ISA_AUTO for the best this
 * processor has, another (the tests) for that one, which must be supported. */
#define KERN_PSGD_ONEPASS_MAX 8    /* largest rank of the one-pass stages */
#define KERN_PSGD_COLS_BLOCK  1024 /* columns of Q transposed at a time */

/* m += g when g is not NULL (float addition), then p = m q, in one pass
 * over m at rank <= KERN_PSGD_ONEPASS_MAX. p[i][c] sums each block of
 * KERN_PSGD_COLS_BLOCK columns in 8 lanes (lane l: columns = l mod 8 up to
 * the block's last multiple of 8), the lanes as ((l0 + l4) + (l2 + l6)) +
 * ((l1 + l5) + (l3 + l7)), then the block's last columns one by one, the
 * blocks in order. Above that rank: kern_psgd_ef_add and kern_psgd_mq. */
void kern_psgd_ef_mq(int isa, const float *g, float *m, const float *q,
    float *p, uint64_t rows, uint64_t cols, uint32_t rank);

/* q = m^T p as kern_psgd_mtp, in one pass over m at rank <=
 * KERN_PSGD_ONEPASS_MAX: q[k][c] sums m[i][k] p[i][c] in the order of i. */
void kern_psgd_mtp1(int isa, const float *m, const float *p, float *q,
    uint64_t rows, uint64_t cols, uint32_t rank);

/* out = p q^T, then m -= out (the residual M - out exactly), in one pass
 * over m and out at rank <= KERN_PSGD_ONEPASS_MAX: out[i][k] sums
 * p[i][c] q[k][c] in the order of c. Above that rank: kern_psgd_pqt and
 * kern_psgd_sub. */
void kern_psgd_pqt_sub(int isa, const float *p, const float *q, float *out,
    float *m, uint64_t rows, uint64_t cols, uint32_t rank);

/* One element of pqt_sub's row i over a block: out[k] = sum over c of
 * pi[c] qt[c][k] in the order of c, then m[k] -= out[k]. The scalar row
 * loop and the AVX2 one's last columns share it, so both round alike. */
static inline void
kern_psgd_pqt_elem(const float *pi, const float *qt, float *oi, float *mi,
    uint32_t k, uint32_t rank)
{
	float v = pi[0] * qt[k];

	for (uint32_t c = 1; c < rank; c++)
		v = v + pi[c] * qt[c * KERN_PSGD_COLS_BLOCK + k];
	oi[k] = v;
	mi[k] = mi[k] - v;
}

#ifdef KERN_HAVE_X86
/* The row loops of the one-pass stages with AVX2 (kern_powersgd_avx2.c),
 * bit for bit the scalar ones of kern_powersgd.c, over one block of
 * columns [k0, k0 + kb) of m (row stride ld), against qt: that block of Q
 * transposed, row c holding Q[k0 .. k0 + kb)[c], KERN_PSGD_COLS_BLOCK
 * floats a row. mq: columns c0 .. c0 + 3 of P (qt has 4 rows; those past
 * the rank are zero and their sums dropped), adding g into m first when g
 * is not NULL, and adding to P when k0 > 0. mtp: adds m^T p into qt's rank
 * rows. pqt: out and m as kern_psgd_pqt_sub. */
void kern_psgd_mq_block_avx2(const float *g, float *m, const float *qt,
    float *p, uint64_t rows, uint64_t ld, uint64_t k0, uint32_t kb,
    uint32_t rank, uint32_t c0);
void kern_psgd_mtp_block_avx2(const float *m, const float *p, float *qt,
    uint64_t rows, uint64_t ld, uint64_t k0, uint32_t kb, uint32_t rank);
void kern_psgd_pqt_block_avx2(const float *p, const float *qt, float *out,
    float *m, uint64_t rows, uint64_t ld, uint64_t k0, uint32_t kb,
    uint32_t rank);
#endif

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
