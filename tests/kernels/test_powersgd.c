/* test_powersgd - PowerSGD's building blocks (bellows/codec.h).
 *
 * Each stage against a reference written here (triple loops and classical
 * Gram-Schmidt, in double) on the same inputs: the error-feedback addition
 * bit for bit; the products within the float32 summation bound
 * |fl(A B) - A B| <= k u (|A| |B|) elementwise (u = 2^-24, k the inner
 * dimension: any order of summation, fused or not, a BLAS included, meets
 * it); the orthogonalisation within 1e-4 of the reference on
 * well-conditioned matrices (1e-4 times the rank on square ones). Sizes 1,
 * odd, 2^k +- 1, rank 1 to 32; then orthogonality (max |P^T P - I|) on
 * ill-conditioned matrices, zero columns, tiny and huge magnitudes; the
 * residual is M minus the decoded output exactly; NaN and infinity stay in
 * their own matrix of a batch; a batch gives what one-by-one calls give,
 * bit for bit, and so does the group state; bad arguments are refused
 * before anything is written.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bellows/codec.h>
#include <bellows/error.h>

#include "kernels/cpu/kern_powersgd.h"
#include "kernels/cpu/kern_stats.h"
#include "kernels/kernels.h"

#define TEST_RNG_SEED 0x13198a2e03707344ull
#include "rng.h"

static float *
randm(uint64_t n, float scale)
{
	float *v = malloc((n > 0 ? n : 1) * sizeof(float));

	assert_non_null(v);
	for (uint64_t i = 0; i < n; i++)
		v[i] = unif() * scale;
	return v;
}

static float *
dup(const float *v, uint64_t n)
{
	float *d = malloc((n > 0 ? n : 1) * sizeof(float));

	assert_non_null(d);
	memcpy(d, v, n * sizeof(float));
	return d;
}

/* The reference product c = op(a) op(b) of row-major matrices, in double,
 * with |a| |b| in abs (both ni x nj, inner dimension nk). a(i, k) is
 * a[i * sa_i + k * sa_k], b(k, j) is b[k * sb_k + j * sb_j]. */
static void
ref_gemm(const float *a, uint64_t sa_i, uint64_t sa_k, const float *b,
    uint64_t sb_k, uint64_t sb_j, uint64_t ni, uint64_t nj, uint64_t nk,
    double *c, double *abs)
{
	for (uint64_t i = 0; i < ni; i++)
		for (uint64_t j = 0; j < nj; j++) {
			double s = 0.0, t = 0.0;

			for (uint64_t k = 0; k < nk; k++) {
				double x = (double)a[i * sa_i + k * sa_k] *
				    b[k * sb_k + j * sb_j];

				s += x;
				t += fabs(x);
			}
			c[i * nj + j] = s;
			abs[i * nj + j] = t;
		}
}

/* got (ni x nj floats) is within the summation bound of the reference. */
static void
assert_product(const float *got, const double *c, const double *abs, uint64_t n,
    uint64_t nk, const char *what)
{
	double u = ldexp(1.0, -24);

	for (uint64_t i = 0; i < n; i++) {
		double bound = (double)(nk + 2) * u * abs[i] + 1e-37;

		if (!(fabs(got[i] - c[i]) <= bound)) {
			fprintf(stderr,
			    "%s [%llu]: %.9g vs %.9g (bound %.3g)\n", what,
			    (unsigned long long)i, got[i], c[i], bound);
			fail();
		}
	}
}

/* Classical Gram-Schmidt in double with bellows' rules: a column is
 * divided by its norm + 1e-8, and projected out of the later ones exactly
 * (divided by its squared norm; skipped when zero). p is rows x rank,
 * row-major. */
static void
ref_orth(const float *p, double *out, uint64_t rows, uint32_t rank)
{
	for (uint64_t i = 0; i < rows * rank; i++)
		out[i] = p[i];
	for (uint32_t j = 0; j < rank; j++) {
		double c[BELLOWS_PSGD_MAX_RANK], nrm = 0.0;

		for (uint32_t i = 0; i < j; i++) {
			double nn = 0.0;

			c[i] = 0.0;
			for (uint64_t r = 0; r < rows; r++) {
				c[i] += out[r * rank + i] * p[r * rank + j];
				nn += out[r * rank + i] * out[r * rank + i];
			}
			c[i] = nn > 0.0 ? c[i] / nn : 0.0;
		}
		for (uint64_t r = 0; r < rows; r++) {
			for (uint32_t i = 0; i < j; i++)
				out[r * rank + j] -= c[i] * out[r * rank + i];
			nrm += out[r * rank + j] * out[r * rank + j];
		}
		nrm = sqrt(nrm) + 1e-8;
		for (uint64_t r = 0; r < rows; r++)
			out[r * rank + j] /= nrm;
	}
}

/* max |P^T P - I| off the diagonal, over the columns not all zero (a zero
 * column's row and column of P^T P must be 0); *ret_diag gets the largest
 * |p_j . p_j - 1| of those columns. */
static double
orth_error2(const float *p, uint64_t rows, uint32_t rank, double *ret_diag)
{
	double worst = 0.0, diag = 0.0;

	for (uint32_t a = 0; a < rank; a++)
		for (uint32_t b = 0; b < rank; b++) {
			double s = 0.0, na = 0.0;

			for (uint64_t r = 0; r < rows; r++) {
				s += (double)p[r * rank + a] * p[r * rank + b];
				na += (double)p[r * rank + a] * p[r * rank + a];
			}
			if (na == 0.0) {
				if (s != 0.0)
					return INFINITY;
				continue;
			}
			if (a == b) {
				if (fabs(s - 1.0) > diag)
					diag = fabs(s - 1.0);
			} else if (fabs(s) > worst) {
				worst = fabs(s);
			}
		}
	*ret_diag = diag;
	return worst;
}

/* max |P^T P - I| over the columns not all zero. */
static double
orth_error(const float *p, uint64_t rows, uint32_t rank)
{
	double diag, off = orth_error2(p, rows, rank, &diag);

	return off > diag ? off : diag;
}

/* One step, stage by stage, against the reference on the same inputs. */
static void
check_step(uint64_t rows, uint64_t cols, uint32_t rank)
{
	uint64_t mn = rows * cols;
	float *e = randm(mn, 0.5f), *g = randm(mn, 1.0f);
	float *q = randm(cols * rank, 1.0f), *p = malloc(rows * rank * 4);
	float *out = malloc(mn * 4), *m0, *p0, *m1;
	double *c = calloc(mn + 64, 8), *abs = calloc(mn + 64, 8);
	double tol;
	char what[96];

	/* Stage 1: M = E + G exactly, P = M Q. */
	m0 = dup(e, mn);
	for (uint64_t i = 0; i < mn; i++)
		m0[i] = m0[i] + g[i];
	assert_int_equal(bellows_psgd_project(rows, cols, rank, 1, &e,
			     (const float *const *)&g, (const float *const *)&q,
			     &p),
	    0);
	assert_memory_equal(e, m0, mn * 4);
	ref_gemm(e, cols, 1, q, rank, 1, rows, rank, cols, c, abs);
	snprintf(what, sizeof(what), "P = M Q %llux%llu r%u",
	    (unsigned long long)rows, (unsigned long long)cols, rank);
	assert_product(p, c, abs, rows * rank, cols, what);

	/* Stage 2: orthogonalise P (against CGS in double), Q = M^T P. */
	p0 = dup(p, rows * rank);
	assert_int_equal(bellows_psgd_power(rows, cols, rank, 1,
			     (const float *const *)&e, &p, &q),
	    0);
	/* A random tall P (rows >= 2 rank) has a condition number below 6;
	 * a square one's grows with its size, and the float32 result with it.
	 */
	ref_orth(p0, c, rows, rank);
	tol = rows >= 2 * (uint64_t)rank ? 1e-4 : 1e-4 * rank;
	for (uint64_t i = 0; i < rows * rank; i++)
		if (fabs(p[i] - c[i]) > tol) {
			fprintf(stderr, "orth %llux%u [%llu]: %.9g vs %.9g\n",
			    (unsigned long long)rows, rank,
			    (unsigned long long)i, p[i], c[i]);
			fail();
		}
	ref_gemm(e, 1, cols, p, rank, 1, cols, rank, rows, c, abs);
	snprintf(what, sizeof(what), "Q = M^T P %llux%llu r%u",
	    (unsigned long long)rows, (unsigned long long)cols, rank);
	assert_product(q, c, abs, cols * rank, rows, what);

	/* Stage 3: out = P Q^T, residual = M - out exactly. */
	m1 = dup(e, mn);
	assert_int_equal(bellows_psgd_decode(rows, cols, rank, 1, &e,
			     (const float *const *)&p, (const float *const *)&q,
			     &out),
	    0);
	ref_gemm(p, rank, 1, q, 1, rank, rows, cols, rank, c, abs);
	snprintf(what, sizeof(what), "P Q^T %llux%llu r%u",
	    (unsigned long long)rows, (unsigned long long)cols, rank);
	assert_product(out, c, abs, mn, rank, what);
	for (uint64_t i = 0; i < mn; i++)
		m1[i] = m1[i] - out[i];
	assert_memory_equal(e, m1, mn * 4);

	free(e);
	free(g);
	free(q);
	free(p);
	free(out);
	free(m0);
	free(p0);
	free(m1);
	free(c);
	free(abs);
}

static void
test_psgd_stages_match_the_reference(void **state)
{
	static const uint64_t dims[] = { 1, 3, 7, 15, 16, 17, 31, 33, 63, 65,
		127, 129, 257 };
	int steps = 0;

	(void)state;
	for (size_t a = 0; a < sizeof(dims) / sizeof(dims[0]); a++)
		for (size_t b = 0; b < sizeof(dims) / sizeof(dims[0]); b += 3) {
			uint64_t rows = dims[a], cols = dims[(b + a) % 13];
			uint64_t lim = rows < cols ? rows : cols;

			for (uint32_t r = 1; r <= 32 && r <= lim; r++) {
				if (r > 4 && r % 5 != 0 && r != 32 && r != lim)
					continue;
				check_step(rows, cols, r);
				steps++;
			}
		}
	/* Rows wider than a block of the one-pass stages, ranks on both
	 * sides of KERN_PSGD_ONEPASS_MAX. */
	for (uint32_t r = 1; r <= 9; r++) {
		check_step(9, 2 * KERN_PSGD_COLS_BLOCK + 9, r);
		check_step(17, KERN_PSGD_COLS_BLOCK + 1, r);
		steps += 2;
	}
	printf("  %d steps against the reference, BLAS %s\n", steps,
	    bellows_psgd_blas());
}

/* The one-pass stages of `isa` on one matrix: M = E + G and P = M Q, then
 * Q = M^T P, then out = P Q^T and M -= out, into fresh buffers. */
static void
onepass_run(int isa, const float *e, const float *g, const float *q,
    uint64_t rows, uint64_t cols, uint32_t rank, float *m, float *p, float *q2,
    float *out)
{
	memcpy(m, e, rows * cols * 4);
	kern_psgd_ef_mq(isa, g, m, q, p, rows, cols, rank);
	kern_psgd_mtp1(isa, m, p, q2, rows, cols, rank);
	kern_psgd_pqt_sub(isa, p, q2, out, m, rows, cols, rank);
}

static void
test_psgd_one_pass_stages_give_the_same_bits_on_every_isa(void **state)
{
	static const uint64_t shapes[][2] = { { 1, 1 }, { 9, 7 }, { 33, 8 },
		{ 17, 31 }, { 64, 1024 }, { 5, KERN_PSGD_COLS_BLOCK + 3 },
		{ 12, 2 * KERN_PSGD_COLS_BLOCK + 17 } };
	int compared = 0;

	(void)state;
	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
		for (uint32_t r = 1; r <= KERN_PSGD_ONEPASS_MAX; r++) {
			uint64_t rows = shapes[s][0], cols = shapes[s][1];
			uint64_t mn = rows * cols;
			float *e = randm(mn, 0.5f), *g = randm(mn, 1.0f);
			float *q = randm(cols * r, 1.0f), *ref[4], *got[4];

			if (r > rows || r > cols) {
				free(e);
				free(g);
				free(q);
				continue;
			}
			for (int k = 0; k < 4; k++) {
				uint64_t n = k == 1 ? rows * r
				    : k == 2        ? cols * r
						    : mn;

				ref[k] = malloc(n * 4);
				got[k] = malloc(n * 4);
				assert_non_null(ref[k]);
				assert_non_null(got[k]);
			}
			onepass_run(KERN_ISA_SCALAR, e, g, q, rows, cols, r,
			    ref[0], ref[1], ref[2], ref[3]);
			for (int isa = KERN_ISA_AVX2; isa <= KERN_ISA_LAST;
			     isa++) {
				if (!kern_cpu_isa_supported(isa))
					continue;
				onepass_run(isa, e, g, q, rows, cols, r, got[0],
				    got[1], got[2], got[3]);
				assert_memory_equal(got[1], ref[1],
				    rows * r * 4);
				assert_memory_equal(got[2], ref[2],
				    cols * r * 4);
				assert_memory_equal(got[3], ref[3], mn * 4);
				assert_memory_equal(got[0], ref[0], mn * 4);
				compared++;
			}
			for (int k = 0; k < 4; k++) {
				free(ref[k]);
				free(got[k]);
			}
			free(e);
			free(g);
			free(q);
		}
	printf("  %d shape and rank pairs compared with the scalar code\n",
	    compared);
}

/* Columns c_j = base + 10^-d noise_j at magnitude 10^s: cond ~ 10^d. */
static void
fill_ill(float *p, uint64_t rows, uint32_t rank, int d, double scale)
{
	for (uint64_t r = 0; r < rows; r++) {
		double base = unif();

		for (uint32_t j = 0; j < rank; j++)
			p[r * rank + j] = (float)((base +
						      pow(10.0, -d) * unif()) *
			    scale);
	}
}

static void
test_psgd_orthogonalisation_is_stable_when_ill_conditioned(void **state)
{
	static const uint64_t rows_set[] = { 32, 33, 100, 1000, 4097 };
	static const double scales[] = { 1.0, 1e-3, 1e30, 1e3 };
	double worst = 0.0, worst_diag = 0.0;

	(void)state;
	for (size_t a = 0; a < 5; a++)
		for (uint32_t rank = 1; rank <= 32; rank += rank < 4 ? 1 : 7) {
			for (int d = 0; d <= 6; d++)
				for (size_t s = 0; s < 4; s++) {
					uint64_t rows = rows_set[a];
					float *p = malloc(rows * rank * 4);
					double err, diag;

					fill_ill(p, rows, rank, d, scales[s]);
					assert_int_equal(
					    bellows_psgd_orthogonalize(p, rows,
						rank),
					    0);
					err = orth_error2(p, rows, rank, &diag);
					if (err > worst)
						worst = err;
					if (!(err < 5e-7))
						fprintf(stderr,
						    "rows %llu rank %u cond 1e%d "
						    "scale %g: %.3g\n",
						    (unsigned long long)rows,
						    rank, d, scales[s], err);
					assert_true(err < 5e-7);
					/* Unit norms where what is left of a
					 * column dwarfs 1e-8 (the torch rule
					 * shrinks the others). */
					if (scales[s] >= 1e30) {
						if (diag > worst_diag)
							worst_diag = diag;
						if (!(diag < 5e-7))
							fprintf(stderr,
							    "diag rows %llu rank %u cond 1e%d scale %g: %.3g\n",
							    (unsigned long long)
								rows,
							    rank, d, scales[s],
							    diag);
						assert_true(diag < 5e-7);
					}
					free(p);
				}
		}
	printf("  ill-conditioned inputs: max |P^T P - I| off the diagonal "
	       "%.3g, on it %.3g\n",
	    worst, worst_diag);
}

static void
test_psgd_zero_and_tiny_columns_follow_the_torch_rule(void **state)
{
	uint64_t rows = 50;
	uint32_t rank = 6;
	float *p = randm(rows * rank, 1.0f);
	double *ref = malloc(rows * rank * 8);

	(void)state;
	for (uint64_t r = 0; r < rows; r++) {
		p[r * rank + 1] = 0.0f;            /* zero column */
		p[r * rank + 4] = unif() * 1e-12f; /* far below 1e-8 */
	}
	ref_orth(p, ref, rows, rank);
	assert_int_equal(bellows_psgd_orthogonalize(p, rows, rank), 0);
	for (uint64_t r = 0; r < rows; r++) {
		assert_true(p[r * rank + 1] == 0.0f);
		assert_true(fabs(p[r * rank + 4] - ref[r * rank + 4]) < 1e-9);
		assert_true(fabsf(p[r * rank + 4]) < 1e-3f);
	}
	/* The others are orthonormal, and orthogonal to the zero column. */
	for (uint32_t a = 0; a < rank; a++)
		for (uint32_t b = 0; b < rank; b++) {
			double s = 0.0;

			if (a == 4 || b == 4)
				continue;
			for (uint64_t r = 0; r < rows; r++)
				s += (double)p[r * rank + a] * p[r * rank + b];
			assert_true(fabs(s - (a == b && a != 1)) < 1e-6);
		}
	/* An all-zero P stays zero, and finite. */
	memset(p, 0, rows * rank * 4);
	assert_int_equal(bellows_psgd_orthogonalize(p, rows, rank), 0);
	for (uint64_t i = 0; i < rows * rank; i++)
		assert_true(p[i] == 0.0f);
	free(p);
	free(ref);
}

/* count matrices of one shape: a batch against one-by-one calls. */
static void
test_psgd_batch_gives_the_one_by_one_results(void **state)
{
	enum {
		COUNT = 7
	};
	uint64_t rows = 65, cols = 33, mn = rows * cols;
	uint32_t rank = 5;
	float *m[COUNT], *g[COUNT], *q[COUNT], *p[COUNT], *o[COUNT];
	float *m1[COUNT], *q1[COUNT], *p1[COUNT], *o1[COUNT];
	bellows_psgd *grp = NULL;

	(void)state;
	for (int i = 0; i < COUNT; i++) {
		m[i] = randm(mn, 0.3f);
		g[i] = randm(mn, 1.0f);
		q[i] = randm(cols * rank, 1.0f);
		p[i] = malloc(rows * rank * 4);
		o[i] = malloc(mn * 4);
		m1[i] = dup(m[i], mn);
		q1[i] = dup(q[i], cols * rank);
		p1[i] = malloc(rows * rank * 4);
		o1[i] = malloc(mn * 4);
	}
	/* A NaN in matrix 3 and an infinity in matrix 5 stay there. */
	g[3][17] = NAN;
	g[5][40] = -INFINITY;
	assert_int_equal(bellows_psgd_new(rows, cols, rank, COUNT, &grp), 0);
	for (int i = 0; i < COUNT; i++) {
		memcpy(bellows_psgd_residual(grp, (size_t)i), m[i], mn * 4);
		memcpy(bellows_psgd_q(grp) + (size_t)i * cols * rank, q[i],
		    cols * rank * 4);
	}
	assert_int_equal(bellows_psgd_project(rows, cols, rank, COUNT, m,
			     (const float *const *)g, (const float *const *)q,
			     p),
	    0);
	assert_int_equal(bellows_psgd_power(rows, cols, rank, COUNT,
			     (const float *const *)m, p, q),
	    0);
	for (int i = 0; i < COUNT; i++)
		for (uint64_t j = 0; j < cols * rank; j++)
			q[i][j] = q[i][j] / 2.0f;
	assert_int_equal(bellows_psgd_decode(rows, cols, rank, COUNT, m,
			     (const float *const *)p, (const float *const *)q,
			     o),
	    0);
	assert_int_equal(bellows_psgd_begin(grp, (const float *const *)g), 0);
	assert_int_equal(bellows_psgd_middle(grp), 0);
	assert_int_equal(bellows_psgd_end(grp, 2.0f, o1), 0);
	for (int i = 0; i < COUNT; i++) {
		size_t off = (size_t)i;

		assert_memory_equal(bellows_psgd_residual(grp, off), m[i],
		    mn * 4);
		assert_memory_equal(bellows_psgd_p(grp) + off * rows * rank,
		    p[i], rows * rank * 4);
		assert_memory_equal(bellows_psgd_q(grp) + off * cols * rank,
		    q[i], cols * rank * 4);
		assert_memory_equal(o1[i], o[i], mn * 4);
	}
	/* One by one. */
	for (int i = 0; i < COUNT; i++) {
		int nonfinite = 0;

		assert_int_equal(bellows_psgd_project(rows, cols, rank, 1,
				     &m1[i], (const float *const *)&g[i],
				     (const float *const *)&q1[i], &p1[i]),
		    0);
		assert_int_equal(bellows_psgd_power(rows, cols, rank, 1,
				     (const float *const *)&m1[i], &p1[i],
				     &q1[i]),
		    0);
		for (uint64_t j = 0; j < cols * rank; j++)
			q1[i][j] = q1[i][j] / 2.0f;
		assert_int_equal(bellows_psgd_decode(rows, cols, rank, 1,
				     &m1[i], (const float *const *)&p1[i],
				     (const float *const *)&q1[i], &o1[i]),
		    0);
		assert_memory_equal(m1[i], m[i], mn * 4);
		assert_memory_equal(p1[i], p[i], rows * rank * 4);
		assert_memory_equal(q1[i], q[i], cols * rank * 4);
		assert_memory_equal(o1[i], o[i], mn * 4);
		for (uint64_t j = 0; j < mn; j++)
			nonfinite += !isfinite(o[i][j]) || !isfinite(m[i][j]);
		if (i == 3 || i == 5)
			assert_true(nonfinite > 0);
		else
			assert_int_equal(nonfinite, 0);
	}
	bellows_psgd_destroy(&grp);
	assert_null(grp);
	bellows_psgd_destroy(&grp);
	for (int i = 0; i < COUNT; i++) {
		free(m[i]);
		free(g[i]);
		free(q[i]);
		free(p[i]);
		free(o[i]);
		free(m1[i]);
		free(q1[i]);
		free(p1[i]);
		free(o1[i]);
	}
}

/* Huge and tiny magnitudes: one step stays finite where the products do,
 * and the residual invariant holds exactly. */
static void
test_psgd_huge_and_tiny_magnitudes(void **state)
{
	static const float scales[] = { 1e30f, 1e-30f, 1e-40f, 0.0f };
	uint64_t rows = 40, cols = 24, mn = rows * cols;
	uint32_t rank = 4;

	(void)state;
	for (size_t s = 0; s < 4; s++) {
		float *m = randm(mn, scales[s]), *q = randm(cols * rank, 1.0f);
		float *p = malloc(rows * rank * 4), *o = malloc(mn * 4);
		float *m0;

		assert_int_equal(bellows_psgd_project(rows, cols, rank, 1, &m,
				     NULL, (const float *const *)&q, &p),
		    0);
		assert_int_equal(bellows_psgd_power(rows, cols, rank, 1,
				     (const float *const *)&m, &p, &q),
		    0);
		m0 = dup(m, mn);
		assert_int_equal(bellows_psgd_decode(rows, cols, rank, 1, &m,
				     (const float *const *)&p,
				     (const float *const *)&q, &o),
		    0);
		for (uint64_t i = 0; i < mn; i++) {
			assert_true(isfinite(o[i]) && isfinite(m[i]));
			assert_true(m[i] == m0[i] - o[i]);
		}
		if (scales[s] == 1e30f)
			assert_true(orth_error(p, rows, rank) < 1e-6);
		free(m);
		free(q);
		free(p);
		free(o);
		free(m0);
	}
}

static void
test_psgd_bad_arguments_are_refused(void **state)
{
	float a[64] = { 0 }, b[64] = { 0 }, c[64] = { 0 }, d[64] = { 0 };
	float *m = a, *q = b, *p = c, *o = d;
	const float *g = d;
	bellows_psgd *grp = NULL;

	(void)state;
	/* rank 0, above 32, above rows or cols. */
	assert_int_equal(bellows_psgd_orthogonalize(a, 8, 0), BELLOWS_EINVAL);
	assert_int_equal(bellows_psgd_orthogonalize(a, 40, 33), BELLOWS_EINVAL);
	assert_int_equal(bellows_psgd_orthogonalize(a, 2, 3), BELLOWS_EINVAL);
	assert_int_equal(bellows_psgd_orthogonalize(NULL, 8, 1),
	    BELLOWS_EINVAL);
	assert_int_equal(bellows_psgd_project(4, 2, 3, 1, &m, &g,
			     (const float *const *)&q, &p),
	    BELLOWS_EINVAL);
	assert_int_equal(bellows_psgd_project(4, 4, 1, 1, &m, &g,
			     (const float *const *)&q, NULL),
	    BELLOWS_EINVAL);
	/* Overlaps: P inside M, out on M. */
	p = a + 2;
	assert_int_equal(bellows_psgd_project(4, 4, 1, 1, &m, &g,
			     (const float *const *)&q, &p),
	    BELLOWS_EINVAL);
	p = c;
	o = a;
	assert_int_equal(bellows_psgd_decode(4, 4, 1, 1, &m,
			     (const float *const *)&p, (const float *const *)&q,
			     &o),
	    BELLOWS_EINVAL);
	assert_int_equal(bellows_psgd_ef_add(a, a + 1, 4), BELLOWS_EINVAL);
	assert_int_equal(bellows_psgd_ef_add(NULL, a, 4), BELLOWS_EINVAL);
	assert_int_equal(bellows_psgd_ef_add(NULL, NULL, 0), 0);
	/* Nothing written on refusal. */
	for (int i = 0; i < 64; i++)
		assert_true(a[i] == 0.0f && c[i] == 0.0f);
	assert_int_equal(bellows_psgd_new(4, 4, 1, 0, &grp), BELLOWS_EINVAL);
	assert_int_equal(bellows_psgd_new(4, 4, 5, 1, &grp), BELLOWS_EINVAL);
	assert_int_equal(bellows_psgd_new(4, 4, 1, 1, NULL), BELLOWS_EINVAL);
	assert_null(grp);
	assert_int_equal(bellows_psgd_new(4, 4, 2, 2, &grp), 0);
	assert_int_equal(bellows_psgd_end(grp, 0.0f, &o), BELLOWS_EINVAL);
	assert_int_equal(bellows_psgd_end(grp, NAN, &o), BELLOWS_EINVAL);
	assert_int_equal(bellows_psgd_begin(grp, NULL), BELLOWS_EINVAL);
	assert_int_equal(bellows_psgd_middle(NULL), BELLOWS_EINVAL);
	assert_null(bellows_psgd_residual(grp, 2));
	{
		/* The group's own memory as an output is refused. */
		float *own[2] = { bellows_psgd_residual(grp, 0), d };

		assert_int_equal(bellows_psgd_end(grp, 1.0f, own),
		    BELLOWS_EINVAL);
	}
	bellows_psgd_destroy(&grp);
	assert_non_null(bellows_psgd_blas());
	assert_int_equal(bellows_psgd_blas_threads(0), BELLOWS_EINVAL);
	if (strcmp(bellows_psgd_blas(), "cblas") != 0)
		assert_int_equal(bellows_psgd_blas_threads(1), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_psgd_stages_match_the_reference),
		cmocka_unit_test(
		    test_psgd_one_pass_stages_give_the_same_bits_on_every_isa),
		cmocka_unit_test(
		    test_psgd_orthogonalisation_is_stable_when_ill_conditioned),
		cmocka_unit_test(
		    test_psgd_zero_and_tiny_columns_follow_the_torch_rule),
		cmocka_unit_test(test_psgd_batch_gives_the_one_by_one_results),
		cmocka_unit_test(test_psgd_huge_and_tiny_magnitudes),
		cmocka_unit_test(test_psgd_bad_arguments_are_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
