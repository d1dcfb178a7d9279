/* kern_cuda_backend - the CUDA backend's kern_ops table.
 *
 * The only module that calls the CUDA runtime (the kernels themselves are
 * in kern_cuda_stats.cu); CUDA errors come out as BELLOWS_E*: no device or
 * driver, or a GPU this build has no code for, is BELLOWS_ENOTSUP, out of
 * device memory BELLOWS_ENOMEM, a bad pointer or stream BELLOWS_EINVAL,
 * anything else (a failed launch, a device fault) BELLOWS_EIO.
 *
 * A context belongs to the device that was current when it was opened;
 * every call makes that device current for its duration and restores the
 * caller's. Statistics, histograms, zeroing and copies out only enqueue on
 * the given stream; copy_in and synchronize wait.
 */
#ifndef KERN_CUDA_BACKEND_H
#define KERN_CUDA_BACKEND_H

#include "../kernels.h"

/* Returns the CUDA backend's table (its open fails without a device). */
const kern_ops *kern_cuda_ops(void);

#endif /* KERN_CUDA_BACKEND_H */
