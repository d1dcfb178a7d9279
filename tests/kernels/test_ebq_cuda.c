/* test_ebq_cuda - the error-bounded quantiser's CUDA twin against the CPU.
 *
 * Needs a CUDA device: exits 77 (skipped) when the CUDA backend cannot
 * open, because this build has no CUDA or the machine no device. On a
 * device, for sizes around the warp and block widths, dense and sparse
 * data, fewest-bit and byte codes: the device's largest magnitude and
 * count of non-zero codes are the plan's, its bitmask and code stream are
 * bellows_ebq_encode_parts' byte for byte, its counters say how many
 * values decode non-zero and that none misses the bound, and its decode
 * is bellows_ebq_decode_parts' bit for bit. The public entry points
 * (bellows_ebq_plan_cuda, _encode_parts_cuda, _decode_parts_cuda) give
 * the CPU's plan, bytes and floats, also with a NaN (raw) and eb 0, and
 * refuse a bitmask that does not match its code count.
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

#ifdef KERN_HAVE_CUDA
#include "kernels/cuda/kern_cuda_ebq.h"

static kern_backend cuda; /* the backend giving device memory */

static void *
dev_alloc(size_t bytes)
{
	void *p = NULL;

	assert_int_equal(cuda.ops->mem_alloc(cuda.ctx, bytes > 0 ? bytes : 8,
			     &p),
	    0);
	return p;
}

static void
dev_in(void *dst, const void *src, size_t bytes)
{
	if (bytes > 0)
		assert_int_equal(cuda.ops->copy_in(cuda.ctx, dst, src, bytes,
				     NULL),
		    0);
}

static void
dev_out(void *dst, const void *src, size_t bytes)
{
	if (bytes > 0)
		assert_int_equal(cuda.ops->copy_out(cuda.ctx, dst, src, bytes,
				     NULL),
		    0);
	assert_int_equal(cuda.ops->synchronize(cuda.ctx, NULL), 0);
}

/* The largest float pattern h with (double)h / step <= 0.5 (codes are
 * non-zero exactly above it). */
static uint32_t
threshold(double step)
{
	float h = (float)(0.5 * step);
	uint32_t u;

	while (h > 0.0f && (double)h / step > 0.5)
		h = nextafterf(h, 0.0f);
	while ((double)nextafterf(h, INFINITY) / step <= 0.5)
		h = nextafterf(h, INFINITY);
	memcpy(&u, &h, 4);
	return u;
}

static void
twin(const float *x, uint64_t n, double eb, int flags)
{
	bellows_ebq_info in;
	size_t fb = n * 4;
	float *dx = dev_alloc(fb), *dout = dev_alloc(fb);
	float *out = malloc(fb + 4), *want = malloc(fb + 4);
	uint8_t *mask, *codes, *dmask, *dcodes, *gmask, *gcodes;
	void *scratch = dev_alloc(kern_cuda_ebq_scratch_bytes(n));
	uint32_t *damax = dev_alloc(4), amax = 0, host_amax = 0;
	unsigned long long *dcnt = dev_alloc(24), cnt[3] = { 0, 0, 0 };
	uint64_t nonzero = 0;

	assert_int_equal(bellows_ebq_plan(x, n, eb, flags, &in), 0);
	if (in.mode == BELLOWS_EBQ_RAW)
		goto done;
	mask = calloc(1, in.mask_bytes + 1);
	codes = calloc(1, in.codes_bytes + 1);
	gmask = calloc(1, in.mask_bytes + 1);
	gcodes = calloc(1, in.codes_bytes + 1);
	dmask = dev_alloc(in.mask_bytes);
	dcodes = dev_alloc(in.codes_bytes);
	assert_int_equal(bellows_ebq_encode_parts(x, &in, mask, codes,
			     &nonzero),
	    0);
	dev_in(dx, x, fb);
	dev_in(damax, &amax, 4);
	dev_in(dcnt, cnt, sizeof cnt);
	assert_int_equal(kern_cuda_ebq_amax(dx, n, damax, NULL), 0);
	assert_int_equal(kern_cuda_ebq_count(dx, n, threshold(in.step),
			     &dcnt[2], NULL),
	    0);
	assert_int_equal(kern_cuda_ebq_encode(dx, n, in.step, in.eb, in.bits,
			     in.mode == BELLOWS_EBQ_SPARSE, dmask, dcodes,
			     in.codes_bytes, scratch, dcnt, NULL),
	    0);
	dev_out(&amax, damax, 4);
	dev_out(cnt, dcnt, sizeof cnt);
	dev_out(gmask, dmask, in.mask_bytes);
	dev_out(gcodes, dcodes, in.codes_bytes);
	for (uint64_t i = 0; i < n; i++) {
		uint32_t u;

		memcpy(&u, x + i, 4);
		u &= 0x7fffffffu;
		host_amax = u > host_amax ? u : host_amax;
	}
	assert_int_equal(amax, host_amax);
	assert_int_equal(cnt[2], in.nonzero); /* the plan's non-zero codes */
	assert_int_equal(cnt[0], nonzero);
	assert_int_equal(cnt[1], 0);
	assert_memory_equal(gmask, mask, in.mask_bytes);
	assert_memory_equal(gcodes, codes, in.codes_bytes);
	assert_int_equal(kern_cuda_ebq_decode(dmask, dcodes, in.codes_bytes, n,
			     in.step, in.eb, in.bits,
			     in.mode == BELLOWS_EBQ_SPARSE, scratch, dout,
			     NULL),
	    0);
	dev_out(out, dout, fb);
	assert_int_equal(bellows_ebq_decode_parts(&in, mask, codes, want), 0);
	assert_memory_equal(out, want, fb);
	free(mask);
	free(codes);
	free(gmask);
	free(gcodes);
	cuda.ops->mem_free(cuda.ctx, dmask);
	cuda.ops->mem_free(cuda.ctx, dcodes);
done:
	cuda.ops->mem_free(cuda.ctx, dx);
	cuda.ops->mem_free(cuda.ctx, dout);
	cuda.ops->mem_free(cuda.ctx, scratch);
	cuda.ops->mem_free(cuda.ctx, damax);
	cuda.ops->mem_free(cuda.ctx, dcnt);
	free(out);
	free(want);
}

static void
test_ebq_cuda_matches_the_cpu_bit_for_bit(void **state)
{
	static const uint64_t sizes[] = { 1, 7, 31, 32, 33, 255, 256, 257, 4095,
		4097, 100003 };
	float *x = malloc(100003 * sizeof(float));
	uint64_t s = 42;

	(void)state;
	assert_non_null(x);
	for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
		for (int relu = 0; relu < 2; relu++) {
			for (uint64_t i = 0; i < sizes[k]; i++) {
				double u;

				s = s * 6364136223846793005ull + 1;
				u = (double)(s >> 11) / 9007199254740992.0 *
					2.0 -
				    1.0;
				x[i] = relu && u < 0 ? 0.0f : (float)(u * 3.0);
			}
			for (int flags = 0; flags < 2; flags++) {
				twin(x, sizes[k], 1e-3, flags);
				twin(x, sizes[k], 0.05, flags);
			}
		}
	free(x);
}
/* The public entry points (bellows_ebq_*_cuda) on x: the plan, mask,
 * codes, non-zero count and decoded floats of the CPU functions; a mask
 * with a bit too many is refused, out untouched. */
static void
public_twin(const float *x, uint64_t n, double eb, int flags)
{
	bellows_ebq_info in, gin;
	size_t fb = n * 4, sb = bellows_ebq_cuda_scratch_bytes(n);
	float *dx = dev_alloc(fb), *dout = dev_alloc(fb);
	float *out = malloc(fb + 4), *want = malloc(fb + 4);
	void *scratch = dev_alloc(sb);
	uint8_t *mask, *codes, *gmask, *gcodes, *dmask, *dcodes;
	uint64_t nz = 0, gnz = 0;

	dev_in(dx, x, fb);
	assert_int_equal(bellows_ebq_plan(x, n, eb, flags, &in), 0);
	assert_int_equal(bellows_ebq_plan_cuda(dx, n, eb, flags, scratch, sb,
			     NULL, &gin),
	    0);
	assert_memory_equal(&gin, &in, sizeof in);
	if (in.mode != BELLOWS_EBQ_RAW) {
		mask = calloc(1, in.mask_bytes + 1);
		codes = calloc(1, in.codes_bytes + 1);
		gmask = calloc(1, in.mask_bytes + 1);
		gcodes = calloc(1, in.codes_bytes + 1);
		dmask = dev_alloc(in.mask_bytes);
		dcodes = dev_alloc(in.codes_bytes);
		assert_int_equal(bellows_ebq_encode_parts(x, &in, mask, codes,
				     &nz),
		    0);
		assert_int_equal(bellows_ebq_encode_parts_cuda(dx, &in, dmask,
				     dcodes, scratch, sb, NULL, &gnz),
		    0);
		assert_int_equal(gnz, nz);
		dev_out(gmask, dmask, in.mask_bytes);
		dev_out(gcodes, dcodes, in.codes_bytes);
		assert_memory_equal(gmask, mask, in.mask_bytes);
		assert_memory_equal(gcodes, codes, in.codes_bytes);
		assert_int_equal(bellows_ebq_decode_parts_cuda(&in, dmask,
				     dcodes, dout, scratch, sb, NULL),
		    0);
		dev_out(out, dout, fb);
		assert_int_equal(bellows_ebq_decode_parts(&in, mask, codes,
				     want),
		    0);
		assert_memory_equal(out, want, fb);
		if (in.mode == BELLOWS_EBQ_SPARSE && in.codes < n) {
			/* One more set bit than codes: refused. */
			for (uint64_t i = 0; i < n; i++)
				if (!(mask[i / 8] >> (i % 8) & 1)) {
					mask[i / 8] |= (uint8_t)(1u << (i % 8));
					break;
				}
			dev_in(dmask, mask, in.mask_bytes);
			assert_int_equal(bellows_ebq_decode_parts_cuda(&in,
					     dmask, dcodes, dout, scratch, sb,
					     NULL),
			    BELLOWS_EPROTO);
		}
		free(mask);
		free(codes);
		free(gmask);
		free(gcodes);
		cuda.ops->mem_free(cuda.ctx, dmask);
		cuda.ops->mem_free(cuda.ctx, dcodes);
	}
	cuda.ops->mem_free(cuda.ctx, dx);
	cuda.ops->mem_free(cuda.ctx, dout);
	cuda.ops->mem_free(cuda.ctx, scratch);
	free(out);
	free(want);
}

static void
test_ebq_cuda_public_entry_points_match_the_cpu(void **state)
{
	static const uint64_t sizes[] = { 1, 33, 257, 4097, 100003 };
	float *x = malloc(100003 * sizeof(float));
	uint64_t s = 7;

	(void)state;
	assert_non_null(x);
	for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
		for (int relu = 0; relu < 2; relu++) {
			for (uint64_t i = 0; i < sizes[k]; i++) {
				double u;

				s = s * 6364136223846793005ull + 1;
				u = (double)(s >> 11) / 9007199254740992.0 *
					2.0 -
				    1.0;
				x[i] = relu && u < 0.6 ? 0.0f
						       : (float)(u * 3.0);
			}
			if (sizes[k] > 2)
				x[sizes[k] / 2] = relu ? 0.0f : NAN;
			public_twin(x, sizes[k], 1e-3, BELLOWS_EBQ_BYTE_CODES);
			public_twin(x, sizes[k], 0.05, 0);
			public_twin(x, sizes[k], 0.0, 0);
		}
	free(x);
}
#endif /* KERN_HAVE_CUDA */

int
main(void)
{
#ifdef KERN_HAVE_CUDA
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ebq_cuda_matches_the_cpu_bit_for_bit),
		cmocka_unit_test(
		    test_ebq_cuda_public_entry_points_match_the_cpu),
	};
	int rc = kern_backend_open(&cuda, KERN_CUDA, NULL);

	if (rc == BELLOWS_ENOTSUP) {
		printf("CUDA backend: no device or driver here: skipped\n");
		return 77;
	}
	if (rc != 0) {
		fprintf(stderr, "CUDA backend: %s\n", bellows_strerror(rc));
		return 1;
	}
	rc = cmocka_run_group_tests_name("ebq cuda twin", tests, NULL, NULL);
	kern_backend_close(&cuda);
	return rc;
#else
	printf("CUDA not built: skipped\n");
	return 77;
#endif
}
