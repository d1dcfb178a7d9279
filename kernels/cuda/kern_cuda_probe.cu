/* kern_cuda_probe - compiled once when the build is configured, to learn
 * whether the nvcc found can build this project's kernels at all (its headers,
 * host compiler and target architectures), before the build depends on it. */
#include <cuda_runtime.h>

__global__ void
probe_kernel(float *x)
{
	x[threadIdx.x] += 1.0f;
}
