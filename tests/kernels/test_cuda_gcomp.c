/* test_cuda_gcomp - the CUDA GComp twin gives the CPU codec's blocks byte
 * for byte (levels from delta included) and decodes them to the CPU's
 * values; a corrupted block is refused. Exits 77 (skipped) without CUDA in
 * the build or without a device. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef KERN_HAVE_CUDA
#include <cuda_runtime_api.h>

#include <bellows/error.h>

#include "kernels/cpu/gcomp.h"
#include "kernels/cuda/gcomp_launch.h"

#define CHECK(c)                                                               \
	do {                                                                   \
		if (!(c)) {                                                    \
			fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__,     \
			    #c);                                               \
			return 1;                                              \
		}                                                              \
	} while (0)

int
main(void)
{
	uint64_t n = 3 * KERN_GCOMP_CHUNK + 123, hist[256] = { 0 };
	size_t cap = kern_gcomp_bound(KERN_F32, n), lc, lg;
	float *x, *theta, *yc, *yg;
	uint8_t *bc, *bg, *lv, *lvg;
	kern_gcomp_table *t, *dt;
	void *dx, *dtheta, *dout, *dy;
	uint8_t *dlv;
	kern_gcomp_opt o;
	char err[256];
	int count = 0;

	if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
		printf("no CUDA device: skipped\n");
		return 77;
	}
	/* Allocated once a device is known: a skipped run leaks nothing. */
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
		  cap, &lg, NULL, NULL) == 0);
	CHECK(lg == lc);
	CHECK(cudaMemcpy(bg, dout, lg, cudaMemcpyDeviceToHost) == cudaSuccess);
	CHECK(memcmp(bc, bg, lc) == 0);
	CHECK(kern_cuda_gcomp_decode_block(t, dt, dout, lg, KERN_F32, dy, n, 0,
		  err, sizeof(err), NULL) == 0);
	CHECK(cudaMemcpy(yg, dy, n * 4, cudaMemcpyDeviceToHost) == cudaSuccess);
	CHECK(memcmp(yc, yg, n * 4) == 0);
	/* A corrupted exponent code, and a truncated block. */
	bg[KERN_GCOMP_HEADER + 4 * KERN_GCOMP_CHUNK_HEADER + 3] ^= 0xff;
	CHECK(cudaMemcpy(dout, bg, lg, cudaMemcpyHostToDevice) == cudaSuccess);
	CHECK(kern_cuda_gcomp_decode_block(t, dt, dout, lg, KERN_F32, dy, n, 0,
		  err, sizeof(err), NULL) == BELLOWS_EPROTO);
	CHECK(kern_cuda_gcomp_decode_block(t, dt, dout, lg - 1, KERN_F32, dy, n,
		  0, err, sizeof(err), NULL) == BELLOWS_EPROTO);
	printf("CUDA GComp: %zu bytes, as the CPU's byte for byte\n", lg);
	return 0;
}
#else
int
main(void)
{
	printf("no CUDA in this build: skipped\n");
	return 77;
}
#endif
