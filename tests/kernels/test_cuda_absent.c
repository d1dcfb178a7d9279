/* test_cuda_absent - the CUDA entry points of bellows/codec.h where they
 * cannot run.
 *
 * In a build without CUDA, or on a machine without a device (this test
 * exits 77, skipped, when a device is there): the error-bounded
 * quantiser's twin (bellows_ebq_*_cuda), PowerSGD's cuBLAS twin
 * (bellows_psgd_*_cuda) and GComp's (bellows_gcomp_*_cuda) say so with
 * BELLOWS_ENOTSUP, as bellows/codec.h
 * documents, after refusing bad arguments with BELLOWS_EINVAL as on a
 * device; their availability functions say 0; nothing is written to the
 * outputs. The buffers are host memory: nothing may run on them.
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

static void
test_ebq_cuda_entry_points_say_enotsup(void **state)
{
	float x[64], out[64];
	uint8_t mask[8], codes[64];
	size_t sb = bellows_ebq_cuda_scratch_bytes(64);
	uint64_t *scratch = calloc(1, sb + 8), nz = 12345;
	bellows_ebq_info in, got;

	(void)state;
	for (int i = 0; i < 64; i++)
		x[i] = (float)i * 0.25f;
	assert_int_equal(bellows_ebq_cuda_available(), 0);
	assert_int_equal(bellows_ebq_plan(x, 64, 0.01, 0, &in), 0);
	assert_int_not_equal(in.mode, BELLOWS_EBQ_RAW);
	/* Bad arguments first, as on a device. */
	assert_int_equal(bellows_ebq_plan_cuda(x, 64, -1.0, 0, scratch, sb,
			     NULL, &got),
	    BELLOWS_EINVAL);
	assert_int_equal(bellows_ebq_plan_cuda(x, 64, 0.01, 0, scratch, sb,
			     NULL, NULL),
	    BELLOWS_EINVAL);
	assert_int_equal(bellows_ebq_cuda_scratch_bytes(UINT64_MAX), 0);
	/* Then the documented error, outputs untouched. */
	memset(&got, 0xab, sizeof got);
	assert_int_equal(bellows_ebq_plan_cuda(x, 64, 0.01, 0, scratch, sb,
			     NULL, &got),
	    BELLOWS_ENOTSUP);
	assert_int_equal(((uint8_t *)&got)[0], 0xab);
	memset(codes, 0x5a, sizeof codes);
	assert_int_equal(bellows_ebq_encode_parts_cuda(x, &in, mask, codes,
			     scratch, sb, NULL, &nz),
	    BELLOWS_ENOTSUP);
	assert_int_equal(nz, 12345);
	assert_int_equal(codes[0], 0x5a);
	memset(out, 0x11, sizeof out);
	assert_int_equal(bellows_ebq_decode_parts_cuda(&in, mask, codes, out,
			     scratch, sb, NULL),
	    BELLOWS_ENOTSUP);
	assert_int_equal(((uint8_t *)out)[0], 0x11);
	free(scratch);
}

static void
test_psgd_cuda_entry_points_say_enotsup(void **state)
{
	float m[16], g[16], q[8], p[8], o[16];
	float *mp[1] = { m }, *qp[1] = { q }, *pp[1] = { p }, *op[1] = { o };
	const float *gp[1] = { g };
	bellows_psgd_cuda *ctx = (bellows_psgd_cuda *)(uintptr_t)1;

	(void)state;
	assert_int_equal(bellows_psgd_cuda_available(), 0);
	assert_int_equal(bellows_psgd_cuda_open(NULL, NULL), BELLOWS_EINVAL);
	assert_int_equal(bellows_psgd_cuda_open(NULL, &ctx), BELLOWS_ENOTSUP);
	assert_ptr_equal(ctx, (bellows_psgd_cuda *)(uintptr_t)1);
	/* Without a context every stage refuses. */
	assert_int_equal(bellows_psgd_project_cuda(NULL, 4, 4, 2, 1, mp, gp,
			     (const float *const *)qp, pp),
	    BELLOWS_EINVAL);
	assert_int_equal(bellows_psgd_power_cuda(NULL, 4, 4, 2, 1,
			     (const float *const *)mp, pp, qp),
	    BELLOWS_EINVAL);
	assert_int_equal(bellows_psgd_decode_cuda(NULL, 4, 4, 2, 1, mp,
			     (const float *const *)pp, (const float *const *)qp,
			     op),
	    BELLOWS_EINVAL);
	ctx = NULL;
	bellows_psgd_cuda_close(&ctx);
	bellows_psgd_cuda_close(NULL);
	assert_null(ctx);
}

static void
test_gcomp_cuda_entry_points_say_enotsup(void **state)
{
	float x[64], theta[64], out[64];
	uint8_t levels[64], block[1024];
	uint64_t hist[256] = { 0 };
	size_t len = 4321;
	bellows_gcomp_table *t = NULL;
	bellows_gcomp_cuda *ctx = (bellows_gcomp_cuda *)(uintptr_t)1;
	bellows_gcomp_optimizer o = { .kind = BELLOWS_GCOMP_SGD,
		.lr = 0.1,
		.param = theta };
	bellows_gcomp_stats st;
	char err[64];

	(void)state;
	for (int i = 0; i < 64; i++) {
		x[i] = (float)(i - 32) * 1e-3f;
		theta[i] = 1.0f;
	}
	assert_int_equal(bellows_gcomp_cuda_available(), 0);
	assert_int_equal(bellows_gcomp_histogram(BELLOWS_GCOMP_F32, x, 64,
			     hist),
	    0);
	assert_int_equal(bellows_gcomp_table_build(hist, 8, 3, &t), 0);
	/* Bad arguments first, as on a device. */
	assert_int_equal(bellows_gcomp_cuda_open(NULL, NULL, &ctx),
	    BELLOWS_EINVAL);
	assert_int_equal(bellows_gcomp_cuda_open(t, NULL, NULL),
	    BELLOWS_EINVAL);
	assert_int_equal(bellows_gcomp_levels_cuda(&o, 7, x, 64, 3, levels,
			     NULL),
	    BELLOWS_EINVAL);
	assert_int_equal(bellows_gcomp_levels_cuda(&o, BELLOWS_GCOMP_F32, x, 64,
			     4, levels, NULL),
	    BELLOWS_EINVAL);
	o.kind = BELLOWS_GCOMP_ADAM; /* step 0 */
	assert_int_equal(bellows_gcomp_levels_cuda(&o, BELLOWS_GCOMP_F32, x, 64,
			     3, levels, NULL),
	    BELLOWS_EINVAL);
	o.kind = BELLOWS_GCOMP_SGD;
	/* Then the documented error, outputs untouched. */
	assert_int_equal(bellows_gcomp_cuda_open(t, NULL, &ctx),
	    BELLOWS_ENOTSUP);
	assert_ptr_equal(ctx, (bellows_gcomp_cuda *)(uintptr_t)1);
	memset(levels, 0x5a, sizeof levels);
	assert_int_equal(bellows_gcomp_levels_cuda(&o, BELLOWS_GCOMP_F32, x, 64,
			     3, levels, NULL),
	    BELLOWS_ENOTSUP);
	assert_int_equal(levels[0], 0x5a);
	assert_int_equal(levels[63], 0x5a);
	/* Without a context encode and decode refuse, writing nothing. */
	memset(block, 0x11, sizeof block);
	memset(&st, 0x22, sizeof st);
	memset(out, 0x33, sizeof out);
	assert_int_equal(bellows_gcomp_encode_cuda(NULL, BELLOWS_GCOMP_F32, x,
			     64, 0, NULL, block, sizeof block, &len, &st),
	    BELLOWS_EINVAL);
	assert_int_equal(bellows_gcomp_decode_cuda(NULL, block, sizeof block,
			     BELLOWS_GCOMP_F32, out, 64, 0, err, sizeof err),
	    BELLOWS_EINVAL);
	assert_int_equal(len, 4321);
	assert_int_equal(block[0], 0x11);
	assert_int_equal(((uint8_t *)&st)[0], 0x22);
	assert_int_equal(((uint8_t *)out)[0], 0x33);
#ifndef KERN_HAVE_CUDA
	/* A build without CUDA never reads a context: with any, after the
	 * checks, ENOTSUP. (With CUDA the pointer would be read.) */
	assert_int_equal(bellows_gcomp_encode_cuda(ctx, BELLOWS_GCOMP_F32, x,
			     64, 9, NULL, block, sizeof block, &len, &st),
	    BELLOWS_EINVAL);
	assert_int_equal(bellows_gcomp_encode_cuda(ctx, BELLOWS_GCOMP_F32, x,
			     64, 0, NULL, block, sizeof block, &len, &st),
	    BELLOWS_ENOTSUP);
	assert_int_equal(bellows_gcomp_decode_cuda(ctx, block, sizeof block,
			     BELLOWS_GCOMP_F16, out, 64, BELLOWS_CODEC_ADD, err,
			     sizeof err),
	    BELLOWS_EINVAL);
	assert_int_equal(bellows_gcomp_decode_cuda(ctx, block, sizeof block,
			     BELLOWS_GCOMP_F32, out, 64, 0, err, sizeof err),
	    BELLOWS_ENOTSUP);
	assert_int_equal(len, 4321);
	assert_int_equal(block[0], 0x11);
	assert_int_equal(((uint8_t *)&st)[0], 0x22);
	assert_int_equal(((uint8_t *)out)[0], 0x33);
#endif
	assert_int_equal(bellows_gcomp_cuda_table_version(NULL), 0);
	ctx = NULL;
	bellows_gcomp_cuda_close(&ctx);
	bellows_gcomp_cuda_close(NULL);
	assert_null(ctx);
	bellows_gcomp_table_destroy(&t);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ebq_cuda_entry_points_say_enotsup),
		cmocka_unit_test(test_psgd_cuda_entry_points_say_enotsup),
		cmocka_unit_test(test_gcomp_cuda_entry_points_say_enotsup),
	};

	if (bellows_codec_cuda_available()) {
		printf("a CUDA device is here: skipped\n");
		return 77;
	}
	return cmocka_run_group_tests_name("cuda entry points absent", tests,
	    NULL, NULL);
}
