/* kern_cuda_ebq - the host entry points of the error-bounded quantiser's
 * CUDA twin (kern_cuda_ebq.cu).
 *
 * The arithmetic of kernels/cpu/kern_ebq.h on the device (binary64 division,
 * round half to even, one rounding to float, the zero filter, no fused
 * multiply-add), so the codes, the bitmask and the floats are the CPU's bit
 * for bit; the plan (step, bits, layout) is bellows_ebq_plan's, computed on
 * the host from the amax and count these kernels return. Plain C types: a
 * stream is a cudaStream_t passed as void *, and each function returns the
 * cudaError_t of its launches as an int (0 is cudaSuccess). Every pointer
 * is device memory; the functions only enqueue. The decoder trusts its
 * input: check a message on the host first (bellows_ebq_info_read, and the
 * mask's set bits against its code count).
 */
#ifndef KERN_CUDA_EBQ_H
#define KERN_CUDA_EBQ_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes of the scratch buffer the encode and decode of n values need. */
size_t kern_cuda_ebq_scratch_bytes(uint64_t n);

/* Enqueues *amax = max(*amax, largest |x[i]|'s bit pattern) over n values
 * (a result >= 0x7f800000 means NaN or infinity); *amax starts at 0. */
int kern_cuda_ebq_amax(const float *x, uint64_t n, uint32_t *amax,
    void *stream);

/* Enqueues *count += how many |x[i]| patterns are above h. */
int kern_cuda_ebq_count(const float *x, uint64_t n, uint32_t h,
    unsigned long long *count, void *stream);

/* Enqueues the encode of n finite values with the plan's step, eb and
 * bits: dense (sparse 0) or sparse, writing mask (ceil(n / 8) bytes,
 * sparse) and codes (codes_bytes bytes, the whole stream with its
 * padding). counts[0] += reconstructions non-zero after the filter,
 * counts[1] += values missing the bound (then store raw). */
int kern_cuda_ebq_encode(const float *x, uint64_t n, double step, double eb,
    unsigned bits, int sparse, uint8_t *mask, uint8_t *codes,
    uint64_t codes_bytes, void *scratch, unsigned long long *counts,
    void *stream);

/* Enqueues the decode of n values from mask (sparse) and codes
 * (codes_bytes bytes) into out, with the zero filter at (float)eb. */
int kern_cuda_ebq_decode(const uint8_t *mask, const uint8_t *codes,
    uint64_t codes_bytes, uint64_t n, double step, double eb, unsigned bits,
    int sparse, void *scratch, float *out, void *stream);

/* Enqueues zeroing `bytes` bytes of device memory at dev. */
int kern_cuda_ebq_clear(void *dev, size_t bytes, void *stream);

/* Copies `bytes` bytes from device memory dev to host memory host after
 * the stream's work, and waits for it. */
int kern_cuda_ebq_fetch(void *host, const void *dev, size_t bytes,
    void *stream);

/* Counts the set bits of a sparse bitmask of n values (its ceil(n / 8)
 * bytes, padding bits included), using scratch (as the decode), and
 * waits: *ret_bits gets the count. A decode of that mask reads this many
 * codes, so a caller compares it with the codes it holds first. */
int kern_cuda_ebq_mask_bits(const uint8_t *mask, uint64_t n, void *scratch,
    uint64_t *ret_bits, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* KERN_CUDA_EBQ_H */
