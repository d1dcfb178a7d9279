/* kern_powersgd_avx2 - PowerSGD's passes with AVX2 (kern_powersgd.h): the
 * elementwise ones, one addition or subtraction per value as the scalar loop,
 * and the row loops of the one-pass stages, each product and sum rounded on
 * its own in the scalar code's order; so the results are the same bit for
 * bit. Compiled with -mavx2, called only on processors that have it. */
#include <immintrin.h>
#include <stdint.h>

#include "kern_powersgd.h"

void
kern_psgd_ef_add_avx2(const float *g, float *e, uint64_t n)
{
	uint64_t i = 0;

	for (; i + 16 <= n; i += 16) {
		__m256 a = _mm256_add_ps(_mm256_loadu_ps(e + i),
		    _mm256_loadu_ps(g + i));
		__m256 b = _mm256_add_ps(_mm256_loadu_ps(e + i + 8),
		    _mm256_loadu_ps(g + i + 8));

		_mm256_storeu_ps(e + i, a);
		_mm256_storeu_ps(e + i + 8, b);
	}
	for (; i < n; i++)
		e[i] = e[i] + g[i];
}

void
kern_psgd_sub_avx2(const float *d, float *e, uint64_t n)
{
	uint64_t i = 0;

	for (; i + 16 <= n; i += 16) {
		__m256 a = _mm256_sub_ps(_mm256_loadu_ps(e + i),
		    _mm256_loadu_ps(d + i));
		__m256 b = _mm256_sub_ps(_mm256_loadu_ps(e + i + 8),
		    _mm256_loadu_ps(d + i + 8));

		_mm256_storeu_ps(e + i, a);
		_mm256_storeu_ps(e + i + 8, b);
	}
	for (; i < n; i++)
		e[i] = e[i] - d[i];
}

/* The sum of a register's 8 lanes as the scalar code's lanes_sum:
 * ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)). */
static float
lanes_sum(__m256 a)
{
	__m128 v = _mm_add_ps(_mm256_castps256_ps128(a),
	    _mm256_extractf128_ps(a, 1));
	__m128 w = _mm_add_ps(v, _mm_movehl_ps(v, v));

	return _mm_cvtss_f32(_mm_add_ss(w, _mm_shuffle_ps(w, w, 1)));
}

void
kern_psgd_mq_block_avx2(const float *g, float *m, const float *qt, float *p,
    uint64_t rows, uint64_t ld, uint64_t k0, uint32_t kb, uint32_t rank,
    uint32_t c0)
{
	const float *q0 = qt, *q1 = qt + KERN_PSGD_COLS_BLOCK;
	const float *q2 = qt + 2 * KERN_PSGD_COLS_BLOCK;
	const float *q3 = qt + 3 * KERN_PSGD_COLS_BLOCK;
	uint32_t k8 = kb & ~7u, nc = rank - c0 < 4 ? rank - c0 : 4;

	for (uint64_t i = 0; i < rows; i++) {
		float *mi = m + i * ld + k0, s[4];
		const float *gi = g == NULL ? NULL : g + i * ld + k0;
		__m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;

		for (uint32_t k = 0; k < k8; k += 8) {
			__m256 x = _mm256_loadu_ps(mi + k);

			if (gi != NULL) {
				x = _mm256_add_ps(x, _mm256_loadu_ps(gi + k));
				_mm256_storeu_ps(mi + k, x);
			}
			a0 = _mm256_add_ps(a0,
			    _mm256_mul_ps(x, _mm256_loadu_ps(q0 + k)));
			a1 = _mm256_add_ps(a1,
			    _mm256_mul_ps(x, _mm256_loadu_ps(q1 + k)));
			a2 = _mm256_add_ps(a2,
			    _mm256_mul_ps(x, _mm256_loadu_ps(q2 + k)));
			a3 = _mm256_add_ps(a3,
			    _mm256_mul_ps(x, _mm256_loadu_ps(q3 + k)));
		}
		s[0] = lanes_sum(a0);
		s[1] = lanes_sum(a1);
		s[2] = lanes_sum(a2);
		s[3] = lanes_sum(a3);
		for (uint32_t k = k8; k < kb; k++) {
			float x = mi[k];

			if (gi != NULL)
				mi[k] = x = x + gi[k];
			s[0] = s[0] + x * q0[k];
			s[1] = s[1] + x * q1[k];
			s[2] = s[2] + x * q2[k];
			s[3] = s[3] + x * q3[k];
		}
		for (uint32_t c = 0; c < nc; c++)
			p[i * rank + c0 + c] = k0 == 0
			    ? s[c]
			    : p[i * rank + c0 + c] + s[c];
	}
}

/* Adds row i of the block times p[i][c] into qt's row c for every c. */
static void
mtp_row(const float *mi, const float *pi, float *qt, uint32_t kb, uint32_t rank)
{
	uint32_t k8 = kb & ~7u;

	for (uint32_t c = 0; c < rank; c++) {
		float *t = qt + c * KERN_PSGD_COLS_BLOCK;
		__m256 b = _mm256_set1_ps(pi[c]);

		for (uint32_t k = 0; k < k8; k += 8)
			_mm256_storeu_ps(t + k,
			    _mm256_add_ps(_mm256_loadu_ps(t + k),
				_mm256_mul_ps(_mm256_loadu_ps(mi + k), b)));
		for (uint32_t k = k8; k < kb; k++)
			t[k] = t[k] + mi[k] * pi[c];
	}
}

void
kern_psgd_mtp_block_avx2(const float *m, const float *p, float *qt,
    uint64_t rows, uint64_t ld, uint64_t k0, uint32_t kb, uint32_t rank)
{
	uint32_t k8 = kb & ~7u;
	uint64_t i = 0;

	/* Four rows at a time: each column of qt is loaded and stored once
	 * for the four, the sums still in the order of the rows. */
	for (; i + 4 <= rows; i += 4) {
		const float *m0 = m + i * ld + k0, *m1 = m0 + ld;
		const float *m2 = m1 + ld, *m3 = m2 + ld;
		const float *p0 = p + i * rank;

		for (uint32_t c = 0; c < rank; c++) {
			float *t = qt + c * KERN_PSGD_COLS_BLOCK;
			float s0 = p0[c], s1 = p0[rank + c];
			float s2 = p0[2 * rank + c], s3 = p0[3 * rank + c];
			__m256 b0 = _mm256_set1_ps(s0), b1 = _mm256_set1_ps(s1);
			__m256 b2 = _mm256_set1_ps(s2), b3 = _mm256_set1_ps(s3);

			for (uint32_t k = 0; k < k8; k += 8) {
				__m256 v = _mm256_loadu_ps(t + k);

				v = _mm256_add_ps(v,
				    _mm256_mul_ps(_mm256_loadu_ps(m0 + k), b0));
				v = _mm256_add_ps(v,
				    _mm256_mul_ps(_mm256_loadu_ps(m1 + k), b1));
				v = _mm256_add_ps(v,
				    _mm256_mul_ps(_mm256_loadu_ps(m2 + k), b2));
				v = _mm256_add_ps(v,
				    _mm256_mul_ps(_mm256_loadu_ps(m3 + k), b3));
				_mm256_storeu_ps(t + k, v);
			}
			for (uint32_t k = k8; k < kb; k++)
				t[k] = (((t[k] + m0[k] * s0) + m1[k] * s1) +
					   m2[k] * s2) +
				    m3[k] * s3;
		}
	}
	for (; i < rows; i++)
		mtp_row(m + i * ld + k0, p + i * rank, qt, kb, rank);
}

void
kern_psgd_pqt_block_avx2(const float *p, const float *qt, float *out, float *m,
    uint64_t rows, uint64_t ld, uint64_t k0, uint32_t kb, uint32_t rank)
{
	uint32_t k8 = kb & ~7u;

	for (uint64_t i = 0; i < rows; i++) {
		const float *pi = p + i * rank;
		float *oi = out + i * ld + k0, *mi = m + i * ld + k0;

		for (uint32_t k = 0; k < k8; k += 8) {
			__m256 v = _mm256_mul_ps(_mm256_set1_ps(pi[0]),
			    _mm256_loadu_ps(qt + k));

			for (uint32_t c = 1; c < rank; c++)
				v = _mm256_add_ps(v,
				    _mm256_mul_ps(_mm256_set1_ps(pi[c]),
					_mm256_loadu_ps(qt +
					    c * KERN_PSGD_COLS_BLOCK + k)));
			_mm256_storeu_ps(oi + k, v);
			_mm256_storeu_ps(mi + k,
			    _mm256_sub_ps(_mm256_loadu_ps(mi + k), v));
		}
		for (uint32_t k = k8; k < kb; k++)
			kern_psgd_pqt_elem(pi, qt, oi, mi, k, rank);
	}
}
