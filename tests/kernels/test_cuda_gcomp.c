/* test_cuda_gcomp - the CUDA GComp twin gives the CPU codec's blocks byte
 * for byte (levels from delta included) and decodes them to the CPU's
 * values; a corrupted block is refused. First the kernels' host side
 * (kernels/cuda/kern_cuda_gcomp_launch.h), then libbellows' public twin
 * (bellows_gcomp_*_cuda) against bellows_gcomp_* on float32, float16 and
 * bfloat16, sizes 0, 1, a chunk +- 1 and several chunks: the same levels
 * (SGD with momentum, Adam), blocks, counts and values, blocks of either
 * side decoded by the other, the add flag, and the CPU's errors for a
 * corrupted block, a truncated one and another table's. Exits 77
 * (skipped) without CUDA in the build or without a device. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef KERN_HAVE_CUDA
#include <cuda_runtime_api.h>

#include <bellows/codec.h>
#include <bellows/error.h>

#include "kernels/cpu/kern_gcomp.h"
#include "kernels/cuda/kern_cuda_gcomp_launch.h"

#define CHECK(c)                                                               \
	do {                                                                   \
		if (!(c)) {                                                    \
			fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__,     \
			    #c);                                               \
			return 1;                                              \
		}                                                              \
	} while (0)

/* Device memory of bytes holding a copy of host (NULL: left as is). */
static void *
dev_copy(const void *host, size_t bytes)
{
	void *d = NULL;

	if (cudaMalloc(&d, bytes > 0 ? bytes : 1) != cudaSuccess)
		return NULL;
	if (host != NULL && bytes > 0 &&
	    cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice) != cudaSuccess) {
		cudaFree(d);
		return NULL;
	}
	return d;
}

/* Fills n values of dtype at x: a third zeros, gradient-like magnitudes,
 * an Inf, a NaN and a subnormal where n allows. */
static void
fill(int dtype, void *x, uint64_t n, unsigned seed)
{
	srand(seed);
	for (uint64_t i = 0; i < n; i++) {
		float f = rand() % 3 == 0
		    ? 0.0f
		    : ((float)rand() / RAND_MAX - 0.5f) * 1e-3f;
		uint32_t u;

		if (i == 5)
			f = INFINITY;
		else if (i == 7)
			f = NAN;
		else if (i == 9)
			f = 1e-40f;
		memcpy(&u, &f, 4);
		if (dtype == BELLOWS_GCOMP_F32)
			((float *)x)[i] = f;
		else if (dtype == BELLOWS_GCOMP_BF16)
			((uint16_t *)x)[i] = (uint16_t)(u >> 16);
		else /* float16: a plain pattern of every exponent */
			((uint16_t *)x)[i] = (uint16_t)(rand() & 0xffff);
	}
}

/* One size and dtype through the public twin against the CPU functions.
 * Returns 0, or 1 after printing the failed check. */
static int
public_case(const bellows_gcomp_table *t, bellows_gcomp_cuda *g,
    bellows_gcomp_cuda *other, int dtype, uint64_t n, int kind)
{
	size_t esz = dtype == BELLOWS_GCOMP_F32 ? 4 : 2;
	size_t cap = bellows_gcomp_bound(dtype, n), lc = 0, lg = 0;
	float *theta = malloc(n * 4 + 4), *mom = malloc(n * 4 + 4);
	uint8_t *x = malloc(n * esz + 4), *lc_lv = malloc(n + 1);
	uint8_t *lg_lv = malloc(n + 1), *bc = malloc(cap), *bg = malloc(cap);
	uint8_t *yc = malloc(n * 4 + 4), *yg = malloc(n * 4 + 4);
	uint8_t *dx, *dtheta, *dmom, *dlv, *dout, *dy;
	bellows_gcomp_optimizer o = { .kind = kind,
		.lr = 0.05,
		.weight_decay = 1e-4,
		.momentum = 0.9,
		.beta1 = 0.9,
		.beta2 = 0.999,
		.eps = 1e-8,
		.step = 3 };
	bellows_gcomp_stats sc, sg;
	char err[256];
	int flags = dtype == BELLOWS_GCOMP_F32 ? BELLOWS_CODEC_ADD : 0;

	CHECK(theta != NULL && mom != NULL && x != NULL && lc_lv != NULL &&
	    lg_lv != NULL && bc != NULL && bg != NULL && yc != NULL &&
	    yg != NULL);
	fill(dtype, x, n, (unsigned)(n * 7 + (uint64_t)dtype));
	for (uint64_t i = 0; i < n; i++) {
		theta[i] = (float)rand() / RAND_MAX - 0.5f;
		mom[i] = ((float)rand() / RAND_MAX - 0.5f) * 1e-3f;
	}
	dx = dev_copy(x, n * esz);
	dtheta = dev_copy(theta, n * 4);
	dmom = dev_copy(mom, n * 4);
	dlv = dev_copy(NULL, n);
	dout = dev_copy(NULL, cap);
	dy = dev_copy(NULL, n * 4);
	CHECK(dx != NULL && dtheta != NULL && dmom != NULL && dlv != NULL &&
	    dout != NULL && dy != NULL);

	/* Levels from delta: the CPU's, value for value. */
	o.param = theta;
	o.buf = kind == BELLOWS_GCOMP_MOMENTUM ? mom : NULL;
	o.exp_avg = kind == BELLOWS_GCOMP_ADAM ? mom : NULL;
	CHECK(bellows_gcomp_levels(&o, dtype, x, n, 3, lc_lv) == 0);
	o.param = (const float *)dtheta;
	o.buf = kind == BELLOWS_GCOMP_MOMENTUM ? (const float *)dmom : NULL;
	o.exp_avg = kind == BELLOWS_GCOMP_ADAM ? (const float *)dmom : NULL;
	CHECK(bellows_gcomp_levels_cuda(&o, dtype, dx, n, 3, dlv, NULL) == 0);
	CHECK(cudaMemcpy(lg_lv, dlv, n, cudaMemcpyDeviceToHost) == cudaSuccess);
	CHECK(memcmp(lc_lv, lg_lv, n) == 0);

	/* The block and its counts. */
	CHECK(bellows_gcomp_encode(t, dtype, x, n, 0, lc_lv, bc, cap, &lc,
		  &sc) == 0);
	CHECK(bellows_gcomp_encode_cuda(g, dtype, dx, n, 0, dlv, dout, cap, &lg,
		  &sg) == 0);
	CHECK(lg == lc);
	CHECK(cudaMemcpy(bg, dout, lg, cudaMemcpyDeviceToHost) == cudaSuccess);
	CHECK(memcmp(bc, bg, lc) == 0);
	CHECK(sg.values == sc.values && sg.zeros == sc.zeros &&
	    sg.exp_bits == sc.exp_bits && sg.level_bits == sc.level_bits &&
	    sg.mant_bits == sc.mant_bits && sg.bytes == sc.bytes);
	/* A short buffer: EMSGSIZE, the outputs untouched. */
	lg = 77;
	CHECK(bellows_gcomp_encode_cuda(g, dtype, dx, n, 0, dlv, dout, lc - 1,
		  &lg, NULL) == BELLOWS_EMSGSIZE);
	CHECK(lg == 77);

	/* The CPU's block decoded on the device, onto a start value with the
	 * add flag for float32. */
	memset(yc, 0, n * 4);
	for (uint64_t i = 0; flags && i < n; i++)
		((float *)yc)[i] = 0.25f;
	CHECK(cudaMemcpy(dy, yc, n * 4, cudaMemcpyHostToDevice) == cudaSuccess);
	CHECK(bellows_gcomp_decode(t, bc, lc, dtype, yc, n, flags, err,
		  sizeof(err)) == 0);
	CHECK(cudaMemcpy(dout, bc, lc, cudaMemcpyHostToDevice) == cudaSuccess);
	CHECK(bellows_gcomp_decode_cuda(g, dout, lc, dtype, dy, n, flags, err,
		  sizeof(err)) == 0);
	CHECK(
	    cudaMemcpy(yg, dy, n * esz, cudaMemcpyDeviceToHost) == cudaSuccess);
	CHECK(memcmp(yc, yg, n * esz) == 0);

	/* Another table's context: EMISMATCH; a truncated block: EPROTO. */
	CHECK(bellows_gcomp_decode_cuda(other, dout, lc, dtype, dy, n, 0, err,
		  sizeof(err)) == BELLOWS_EMISMATCH);
	CHECK(bellows_gcomp_decode_cuda(g, dout, lc - 1, dtype, dy, n, 0, err,
		  sizeof(err)) == BELLOWS_EPROTO);
	if (n > 64) {
		/* A corrupted exponent code in the first chunk's data. */
		uint64_t chunks = (n + KERN_GCOMP_CHUNK - 1) / KERN_GCOMP_CHUNK;
		size_t at = KERN_GCOMP_HEADER +
		    chunks * KERN_GCOMP_CHUNK_HEADER + 3;
		int rc_c, rc_g;

		bg[at] ^= 0xff;
		CHECK(cudaMemcpy(dout, bg, lc, cudaMemcpyHostToDevice) ==
		    cudaSuccess);
		rc_c = bellows_gcomp_decode(t, bg, lc, dtype, yc, n, 0, err,
		    sizeof(err));
		rc_g = bellows_gcomp_decode_cuda(g, dout, lc, dtype, dy, n, 0,
		    err, sizeof(err));
		CHECK(rc_c == rc_g);
	}
	cudaFree(dx);
	cudaFree(dtheta);
	cudaFree(dmom);
	cudaFree(dlv);
	cudaFree(dout);
	cudaFree(dy);
	free(theta);
	free(mom);
	free(x);
	free(lc_lv);
	free(lg_lv);
	free(bc);
	free(bg);
	free(yc);
	free(yg);
	return 0;
}

/* libbellows' public twin: every dtype and size of public_case. */
static int
public_twin(void)
{
	static const uint64_t sizes[] = { 0, 1, 100, KERN_GCOMP_CHUNK - 1,
		KERN_GCOMP_CHUNK, KERN_GCOMP_CHUNK + 1,
		3 * KERN_GCOMP_CHUNK + 123 };
	static const int dtypes[] = { BELLOWS_GCOMP_F32, BELLOWS_GCOMP_F16,
		BELLOWS_GCOMP_BF16 };
	uint64_t hist[256] = { 0 };
	bellows_gcomp_table *t = NULL, *t2 = NULL;
	bellows_gcomp_cuda *g = NULL, *g2 = NULL;
	float sample[4096];

	CHECK(bellows_gcomp_cuda_available() == 1);
	fill(BELLOWS_GCOMP_F32, sample, 4096, 11);
	CHECK(bellows_gcomp_histogram(BELLOWS_GCOMP_F32, sample, 4096, hist) ==
	    0);
	CHECK(bellows_gcomp_table_build(hist, 8, 7, &t) == 0);
	CHECK(bellows_gcomp_table_build(hist, 8, 8, &t2) == 0);
	CHECK(bellows_gcomp_cuda_open(t, NULL, &g) == 0);
	CHECK(bellows_gcomp_cuda_open(t2, NULL, &g2) == 0);
	CHECK(bellows_gcomp_cuda_table_version(g) == 7);
	for (size_t d = 0; d < sizeof(dtypes) / sizeof(dtypes[0]); d++)
		for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++)
			if (public_case(t, g, g2, dtypes[d], sizes[k],
				k % 2 ? BELLOWS_GCOMP_ADAM
				      : BELLOWS_GCOMP_MOMENTUM) != 0) {
				fprintf(stderr, "dtype %d, n %llu\n", dtypes[d],
				    (unsigned long long)sizes[k]);
				return 1;
			}
	bellows_gcomp_cuda_close(&g);
	bellows_gcomp_cuda_close(&g2);
	CHECK(g == NULL);
	bellows_gcomp_table_destroy(&t);
	bellows_gcomp_table_destroy(&t2);
	printf("CUDA GComp through libbellows: as the CPU on every case\n");
	return 0;
}

/* The kernels' host side against the CPU codec. */
static int
kernel_twin(void)
{
	uint64_t n = 3 * KERN_GCOMP_CHUNK + 123, hist[256] = { 0 };
	size_t cap = kern_gcomp_bound(KERN_F32, n), lc, lg;
	float *x, *theta, *yc, *yg;
	uint8_t *bc, *bg, *lv, *lvg;
	kern_gcomp_table *t, *dt;
	void *dx, *dtheta, *dout, *dy;
	uint8_t *dlv;
	kern_gcomp_opt o;
	kern_cuda_gcomp_scratch w = { NULL, 0 };
	void *kept;
	char err[256];

	x = malloc(n * 4);
	theta = malloc(n * 4);
	yc = malloc(n * 4);
	yg = malloc(n * 4);
	bc = malloc(cap);
	bg = malloc(cap);
	lv = malloc(n);
	lvg = malloc(n);
	t = malloc(sizeof(*t));
	CHECK(x != NULL && theta != NULL && yc != NULL && yg != NULL &&
	    bc != NULL && bg != NULL && lv != NULL && lvg != NULL && t != NULL);
	srand(3);
	for (uint64_t i = 0; i < n; i++) {
		x[i] = rand() % 3 == 0
		    ? 0.0f
		    : ((float)rand() / RAND_MAX - 0.5f) * 1e-3f;
		theta[i] = (float)rand() / RAND_MAX;
		hist[(((uint32_t *)x)[i] >> 23) & 0xff]++;
	}
	CHECK(com_huff_build(hist, 8, 5, &t->h) == 0);
	kern_gcomp_prepare(t);
	o = (kern_gcomp_opt){ .kind = KERN_GCOMP_SGD,
		.lr = 0.1,
		.param = theta };
	CHECK(kern_gcomp_levels(&o, KERN_F32, x, n, 3, lv) == 0);
	CHECK(kern_gcomp_encode(t, KERN_F32, x, n, 0, lv, bc, cap, &lc, NULL) ==
	    0);
	CHECK(kern_gcomp_decode(t, bc, lc, KERN_F32, yc, n, 0, NULL, 0) == 0);

	CHECK(cudaMalloc((void **)&dt, sizeof(*t)) == cudaSuccess);
	CHECK(cudaMalloc(&dx, n * 4) == cudaSuccess);
	CHECK(cudaMalloc(&dtheta, n * 4) == cudaSuccess);
	CHECK(cudaMalloc(&dy, n * 4) == cudaSuccess);
	CHECK(cudaMalloc(&dout, cap) == cudaSuccess);
	CHECK(cudaMalloc((void **)&dlv, n) == cudaSuccess);
	CHECK(cudaMemcpy(dt, t, sizeof(*t), cudaMemcpyHostToDevice) ==
	    cudaSuccess);
	CHECK(cudaMemcpy(dx, x, n * 4, cudaMemcpyHostToDevice) == cudaSuccess);
	CHECK(cudaMemcpy(dtheta, theta, n * 4, cudaMemcpyHostToDevice) ==
	    cudaSuccess);
	o.param = dtheta;
	CHECK(kern_cuda_gcomp_levels(&o, KERN_F32, dx, n, 3, dlv, NULL) == 0);
	CHECK(cudaMemcpy(lvg, dlv, n, cudaMemcpyDeviceToHost) == cudaSuccess);
	CHECK(memcmp(lv, lvg, n) == 0);
	CHECK(kern_cuda_gcomp_encode_block(t, dt, KERN_F32, dx, n, 0, dlv, dout,
		  cap, &lg, NULL, &w, NULL) == 0);
	kept = w.dev;
	CHECK(lg == lc);
	CHECK(cudaMemcpy(bg, dout, lg, cudaMemcpyDeviceToHost) == cudaSuccess);
	CHECK(memcmp(bc, bg, lc) == 0);
	CHECK(kern_cuda_gcomp_decode_block(t, dt, dout, lg, KERN_F32, dy, n, 0,
		  err, sizeof(err), &w, NULL) == 0);
	CHECK(w.dev == kept); /* the scratch is kept, not allocated again */
	CHECK(cudaMemcpy(yg, dy, n * 4, cudaMemcpyDeviceToHost) == cudaSuccess);
	CHECK(memcmp(yc, yg, n * 4) == 0);
	/* A corrupted exponent code, and a truncated block. */
	bg[KERN_GCOMP_HEADER + 4 * KERN_GCOMP_CHUNK_HEADER + 3] ^= 0xff;
	CHECK(cudaMemcpy(dout, bg, lg, cudaMemcpyHostToDevice) == cudaSuccess);
	CHECK(kern_cuda_gcomp_decode_block(t, dt, dout, lg, KERN_F32, dy, n, 0,
		  err, sizeof(err), &w, NULL) == BELLOWS_EPROTO);
	CHECK(kern_cuda_gcomp_decode_block(t, dt, dout, lg - 1, KERN_F32, dy, n,
		  0, err, sizeof(err), &w, NULL) == BELLOWS_EPROTO);
	kern_cuda_gcomp_scratch_free(&w);
	printf("CUDA GComp: %zu bytes, as the CPU's byte for byte\n", lg);
	return 0;
}

int
main(void)
{
	int count = 0;

	if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
		printf("no CUDA device: skipped\n");
		return 77;
	}
	/* Allocated once a device is known: a skipped run leaks nothing. */
	return kernel_twin() != 0 || public_twin() != 0;
}
#else
int
main(void)
{
	printf("no CUDA in this build: skipped\n");
	return 77;
}
#endif
