/* test_codec_cuda - the CUDA codecs against the CPU codecs, bit for bit.
 *
 * Needs a CUDA device: exits 77 (skipped) when this build has no CUDA or
 * the machine no device (bellows_codec_cuda_available). On a device, for
 * float32, float16 and bfloat16 gradients, sizes around the warp, block
 * and tile boundaries (0, 1, 31, 33, 4095, 4097, 2^16 + 1, 2^20 + 3) and
 * random and adversarial data (NaN, infinities, huge, subnormal, signed
 * zeros, values at the threshold, ties everywhere, all equal), over three
 * error-feedback steps: the 1-bit and 2-bit codes and residual equal the
 * CPU's, the decode (set and add) equals the CPU's, and top-k's indices,
 * values and residual equal the CPU's for k = 0, 1, 1 %, n / 2, n - 1, n,
 * and on mostly zero gradients with 0, k - 1, k and k + 1 non-zero values
 * (the sparse finish), a NaN among them or none.
 * Then the argument checks (they need no device, but run here too).
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

#include "kernels/kernels.h"

#define TEST_RNG_SEED 0x0123456789abcdefull
#include "rng.h"

static kern_backend cuda; /* device memory and copies */

static void *
dev_alloc(size_t bytes)
{
	void *p = NULL;

	assert_int_equal(cuda.ops->mem_alloc(cuda.ctx, bytes, &p), 0);
	return p;
}

static void
dev_in(void *dst, const void *src, size_t bytes)
{
	assert_int_equal(cuda.ops->copy_in(cuda.ctx, dst, src, bytes, NULL), 0);
}

static void
dev_out(void *dst, const void *src, size_t bytes)
{
	assert_int_equal(cuda.ops->copy_out(cuda.ctx, dst, src, bytes, NULL),
	    0);
	assert_int_equal(cuda.ops->synchronize(cuda.ctx, NULL), 0);
}

/* a and b hold the same n floats bit for bit, except that a NaN matches
 * any NaN (the codecs leave a NaN's sign and payload unspecified: the GPU
 * returns its canonical NaN). */
static void
assert_same_floats(const float *a, const float *b, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++) {
		if (isnan(a[i]) && isnan(b[i]))
			continue;
		assert_memory_equal(&a[i], &b[i], 4);
	}
}

enum set {
	SET_RANDOM,
	SET_SPECIAL,
	SET_FEW,
	SET_EQUAL,
	SET_COUNT
};

/* n gradient values of dtype (element size esz) into buf. */
static void
fill(enum set s, int dtype, void *buf, uint64_t n)
{
	static const float special[] = { NAN, INFINITY, -INFINITY, 3e38f,
		-3e38f, 1e-45f, -1e-40f, 0.0f, -0.0f, 0.5f, -0.5f };

	for (uint64_t i = 0; i < n; i++) {
		float v;
		uint32_t b;

		switch (s) {
		case SET_SPECIAL:
			v = rng() % 3 == 0
			    ? special[rng() %
				  (sizeof(special) / sizeof(special[0]))]
			    : unif();
			break;
		case SET_FEW:
			v = (float)(1 + rng() % 3) * 0.25f *
			    (rng() % 2 ? 1.0f : -1.0f);
			break;
		case SET_EQUAL:
			v = 0.5f;
			break;
		default:
			v = unif();
			break;
		}
		memcpy(&b, &v, 4);
		if (dtype == KERN_F32)
			((float *)buf)[i] = v;
		else if (dtype == KERN_BF16)
			((uint16_t *)buf)[i] = (uint16_t)(b >> 16);
		else /* a float16 of about the same value: sign, exponent
		      * clamped to the float16 range, top mantissa bits */
			((uint16_t *)buf)[i] = (uint16_t)((b >> 16 & 0x8000u) |
			    (rng() % 31) << 10 | (b >> 13 & 0x3ffu));
	}
}

static const uint64_t sizes[] = { 0, 1, 31, 33, 4095, 4097, 65537,
	(1u << 20) + 3 };
#define N_SIZES (sizeof(sizes) / sizeof(sizes[0]))

static void
test_cuda_quantisers_match_the_cpu(void **state)
{
	(void)state;
	for (int dtype = KERN_F32; dtype <= KERN_BF16; dtype++)
		for (size_t si = 0; si < N_SIZES; si++) {
			uint64_t n = sizes[si];
			size_t esz = dtype == KERN_F32 ? 4 : 2, fb = n * 4 + 4;

			for (int kind = 1; kind <= 2; kind++) {
				size_t cb = bellows_codec_codes_bytes(kind, n);
				void *g = malloc(n * esz + 4);
				float *res = calloc(n + 1, 4),
				      *got_res = malloc(fb), *out = malloc(fb),
				      *got_out = malloc(fb);
				uint8_t *codes = malloc(cb + 4),
					*got = malloc(cb + 4);
				void *dg = dev_alloc(n * esz + 4);
				float *dres = dev_alloc(fb),
				      *dout = dev_alloc(fb);
				void *dcodes = dev_alloc(cb + 4);
				float t = kind == 1 ? 0.0f : 0.5f;

				for (int step = 0; step < 3; step++) {
					fill((enum set)(
						 (si + step) % SET_COUNT),
					    dtype, g, n);
					dev_in(dg, g, n * esz);
					assert_int_equal(
					    bellows_codec_encode_codes_dtype(
						kind, t, dtype, g, res, n,
						codes, cb),
					    0);
					assert_int_equal(
					    bellows_codec_encode_codes_cuda(
						kind, t, dtype, dg, dres, n,
						dcodes, cb, NULL),
					    0);
					dev_out(got, dcodes, cb);
					dev_out(got_res, dres, n * 4);
					assert_memory_equal(got, codes, cb);
					assert_same_floats(got_res, res, n);
					for (int add = 0; add <= 1; add++) {
						fill(SET_RANDOM, KERN_F32, out,
						    n);
						dev_in(dout, out, n * 4);
						assert_int_equal(
						    bellows_codec_decode_codes(
							kind, t, codes, cb, n,
							out, add),
						    0);
						assert_int_equal(
						    bellows_codec_decode_codes_cuda(
							kind, t, dcodes, cb, n,
							dout, add, NULL),
						    0);
						dev_out(got_out, dout, n * 4);
						assert_same_floats(got_out, out,
						    n);
					}
				}
				cuda.ops->mem_free(cuda.ctx, dg);
				cuda.ops->mem_free(cuda.ctx, dres);
				cuda.ops->mem_free(cuda.ctx, dout);
				cuda.ops->mem_free(cuda.ctx, dcodes);
				free(g);
				free(res);
				free(got_res);
				free(out);
				free(got_out);
				free(codes);
				free(got);
			}
		}
}

static void
test_cuda_topk_matches_the_cpu(void **state)
{
	(void)state;
	for (int dtype = KERN_F32; dtype <= KERN_BF16; dtype++)
		for (size_t si = 0; si < N_SIZES; si++)
			for (int kw = 0; kw < 6; kw++) {
				uint64_t n = sizes[si];
				uint64_t ks[6] = { 0, n > 0, n / 100, n / 2,
					n > 0 ? n - 1 : 0, n };
				uint64_t k = ks[kw];
				size_t esz = dtype == KERN_F32 ? 4 : 2;
				size_t fb = n * 4 + 4, kb = k * 4 + 4;
				size_t wb = bellows_codec_topk_cuda_work_bytes(
				    n);
				void *g = malloc(n * esz + 4);
				float *res = calloc(n + 1, 4),
				      *got_res = malloc(fb), *val = malloc(kb),
				      *got_val = malloc(kb);
				uint32_t *idx = malloc(kb),
					 *got_idx = malloc(kb);
				void *dg = dev_alloc(n * esz + 4),
				     *dwork = dev_alloc(wb + 8);
				float *dres = dev_alloc(fb),
				      *dval = dev_alloc(kb);
				uint32_t *didx = dev_alloc(kb);

				assert_true(wb > 0);
				for (int step = 0; step < 3; step++) {
					fill((enum set)(
						 (kw + step) % SET_COUNT),
					    dtype, g, n);
					dev_in(dg, g, n * esz);
					assert_int_equal(
					    bellows_codec_topk_encode_dtype(
						dtype, g, res, n, k, idx, val),
					    0);
					assert_int_equal(
					    bellows_codec_topk_encode_cuda(
						dtype, dg, dres, n, k, didx,
						dval, dwork, wb, NULL),
					    0);
					dev_out(got_idx, didx, k * 4);
					dev_out(got_val, dval, k * 4);
					dev_out(got_res, dres, n * 4);
					assert_memory_equal(got_idx, idx,
					    k * 4);
					assert_same_floats(got_val, val, k);
					assert_same_floats(got_res, res, n);
				}
				cuda.ops->mem_free(cuda.ctx, dg);
				cuda.ops->mem_free(cuda.ctx, dwork);
				cuda.ops->mem_free(cuda.ctx, dres);
				cuda.ops->mem_free(cuda.ctx, dval);
				cuda.ops->mem_free(cuda.ctx, didx);
				free(g);
				free(res);
				free(got_res);
				free(val);
				free(got_val);
				free(idx);
				free(got_idx);
			}
}

/* Top-k on mostly zero float32 gradients (the sparse finish): 0, k - 1,
 * k, k + 1 non-zero values at random places, one a NaN or none, the rest
 * +-0: the CPU's indices, values and residual. */
static void
test_cuda_topk_sparse_matches_the_cpu(void **state)
{
	static const uint64_t ns[] = { 4097, (UINT64_C(1) << 20) + 3 };

	(void)state;
	for (size_t ni = 0; ni < 2; ni++)
		for (int kw = 0; kw < 3; kw++) {
			uint64_t n = ns[ni];
			uint64_t k = kw == 0 ? 1 : kw == 1 ? n / 100 : n / 4;
			size_t fb = n * 4 + 4, kb = k * 4 + 4;
			size_t wb = bellows_codec_topk_cuda_work_bytes(n);
			float *g = malloc(fb), *res = calloc(n + 1, 4),
			      *got_res = malloc(fb), *val = malloc(kb),
			      *got_val = malloc(kb);
			uint32_t *idx = malloc(kb), *got_idx = malloc(kb);
			void *dg = dev_alloc(fb), *dwork = dev_alloc(wb + 8);
			float *dres = dev_alloc(fb), *dval = dev_alloc(kb);
			uint32_t *didx = dev_alloc(kb);

			for (int step = 0; step < 8; step++) {
				uint64_t nnz = k + (uint64_t)(step % 4) - 2;
				uint64_t set = 0;

				if (step % 4 == 0)
					nnz = 0;
				for (uint64_t i = 0; i < n; i++)
					g[i] = rng() % 2 ? 0.0f : -0.0f;
				while (set < nnz) {
					uint64_t i = rng() % n;

					if (g[i] != 0.0f || isnan(g[i]))
						continue;
					g[i] = step >= 4 && set == 0
					    ? NAN
					    : unif() + 2.0f;
					set++;
				}
				dev_in(dg, g, n * 4);
				assert_int_equal(
				    bellows_codec_topk_encode_dtype(KERN_F32, g,
					res, n, k, idx, val),
				    0);
				assert_int_equal(
				    bellows_codec_topk_encode_cuda(KERN_F32, dg,
					dres, n, k, didx, dval, dwork, wb,
					NULL),
				    0);
				dev_out(got_idx, didx, k * 4);
				dev_out(got_val, dval, k * 4);
				dev_out(got_res, dres, n * 4);
				assert_memory_equal(got_idx, idx, k * 4);
				assert_same_floats(got_val, val, k);
				assert_same_floats(got_res, res, n);
			}
			cuda.ops->mem_free(cuda.ctx, dg);
			cuda.ops->mem_free(cuda.ctx, dwork);
			cuda.ops->mem_free(cuda.ctx, dres);
			cuda.ops->mem_free(cuda.ctx, dval);
			cuda.ops->mem_free(cuda.ctx, didx);
			free(g);
			free(res);
			free(got_res);
			free(val);
			free(got_val);
			free(idx);
			free(got_idx);
		}
}

static void
test_cuda_codecs_refuse_bad_arguments(void **state)
{
	float x = 0;
	uint32_t i = 0;
	uint8_t c[8];

	(void)state;
	assert_int_equal(bellows_codec_encode_codes_cuda(3, 0.5f, 0, &x, &x, 1,
			     c, 8, NULL),
	    BELLOWS_EINVAL);
	assert_int_equal(bellows_codec_encode_codes_cuda(2, 0.0f, 0, &x, &x, 1,
			     c, 8, NULL),
	    BELLOWS_EINVAL);
	assert_int_equal(bellows_codec_encode_codes_cuda(2, 0.5f, 7, &x, &x, 1,
			     c, 8, NULL),
	    BELLOWS_EINVAL);
	assert_int_equal(bellows_codec_encode_codes_cuda(2, 0.5f, 0, &x, &x, 1,
			     c, 2, NULL),
	    BELLOWS_EMSGSIZE);
	assert_int_equal(bellows_codec_decode_codes_cuda(2, 0.5f, c, 8, 1, &x,
			     0, NULL),
	    BELLOWS_EPROTO);
	assert_int_equal(bellows_codec_decode_codes_cuda(2, 0.5f, c, 4, 1, &x,
			     4, NULL),
	    BELLOWS_EINVAL);
	assert_int_equal(bellows_codec_topk_encode_cuda(0, &x, &x, 1, 2, &i, &x,
			     c, 8, NULL),
	    BELLOWS_EINVAL);
	assert_int_equal(bellows_codec_topk_encode_cuda(0, &x, &x, 1, 1, &i, &x,
			     NULL, 0, NULL),
	    BELLOWS_EINVAL);
	assert_int_equal(bellows_codec_topk_cuda_work_bytes(UINT64_C(1) << 33),
	    0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cuda_quantisers_match_the_cpu),
		cmocka_unit_test(test_cuda_topk_matches_the_cpu),
		cmocka_unit_test(test_cuda_topk_sparse_matches_the_cpu),
		cmocka_unit_test(test_cuda_codecs_refuse_bad_arguments),
	};
	int rc;

	if (!bellows_codec_cuda_available()) {
		printf("CUDA codecs: %s: skipped\n",
		    bellows_codec_cuda_built() ? "no device or driver here"
					       : "not built");
		return 77;
	}
	if ((rc = kern_backend_open(&cuda, KERN_CUDA, NULL)) != 0) {
		fprintf(stderr, "CUDA backend: %s\n", bellows_strerror(rc));
		return 1;
	}
	rc = cmocka_run_group_tests_name("codecs cuda twins", tests, NULL,
	    NULL);
	kern_backend_close(&cuda);
	return rc;
}
