/* kern_cuda_gcomp_launch - the host entry points of the CUDA GComp kernels
 * (kern_cuda_gcomp.cu).
 *
 * Plain C types, as kern_cuda_launch.h: a stream is a cudaStream_t passed as
 * void *, each function returns its launch's cudaError_t as an int, and
 * pointers are device memory. They only enqueue; kern_cuda_gcomp_host.c orders
 * them and copies what the host needs. The blocks they write are byte for byte
 * the CPU codec's (kernels/cpu/kern_gcomp.h).
 */
#ifndef KERN_CUDA_GCOMP_LAUNCH_H
#define KERN_CUDA_GCOMP_LAUNCH_H

#include <stdint.h>

#include "../cpu/kern_gcomp.h"
#include "../kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KERN_CUDA_GCOMP_THREADS 256 /* threads per block of the levels */

/* Levels from delta, one thread per value (kern_gcomp_levels' rule; o's
 * arrays are device memory). */
int kern_cuda_gcomp_levels(const kern_gcomp_opt *o, int dtype, const void *grad,
    uint64_t n, int max_level, uint8_t *levels, void *stream);

/* Per chunk c, the three segment bit counts into sizes[3 c .. 3 c + 2],
 * one block per chunk. */
int kern_cuda_gcomp_sizes(const kern_gcomp_table *t, int dtype, const void *x,
    uint64_t n, int level, const uint8_t *levels, uint32_t *sizes,
    uint64_t chunks, void *stream);

/* Writes each chunk's segments at out + offsets[c] and its header, one
 * thread per chunk (a chunk is one bitstream). */
int kern_cuda_gcomp_encode(const kern_gcomp_table *t, int dtype, const void *x,
    uint64_t n, int level, const uint8_t *levels, const uint32_t *sizes,
    const uint64_t *offsets, uint64_t chunks, uint8_t *out, void *stream);

/* Decodes each chunk of a block whose headers the host has checked (every
 * chunk but the last holds KERN_GCOMP_CHUNK values), one thread per chunk;
 * status[c] gets 0, or 1 for a code no exponent has, 2 for a float16 symbol out
 * of range, 3 for segment lengths other than decoding used. */
int kern_cuda_gcomp_decode(const kern_gcomp_table *t, const uint8_t *in,
    uint64_t chunks, int dtype, void *out, int add, uint32_t *status,
    void *stream);

/* The per-chunk scratch of the block calls below, in device memory: 24
 * bytes a chunk (offsets, three segment sizes, a decode status). Starts
 * zeroed ({ NULL, 0 }); a call that needs more chunks than it holds
 * frees it and allocates twice what it needs (a few times over a run,
 * not once per call). One call at a time, on the device it was first
 * used on; kern_cuda_gcomp_scratch_free releases it. */
typedef struct kern_cuda_gcomp_scratch {
	void *dev;       /* device memory, or NULL */
	uint64_t chunks; /* chunks it holds */
} kern_cuda_gcomp_scratch;

/* Frees w's memory and zeroes it; NULL-safe. */
void kern_cuda_gcomp_scratch_free(kern_cuda_gcomp_scratch *w);

/* The host side (kern_cuda_gcomp_host.c): a whole block on the device. t_dev is
 * a copy of t in device memory, x, levels (may be NULL), out and in are device
 * memory; w is the caller's scratch (above). Encode writes the CPU encoder's
 * bytes; *ret_bytes gets the block's length, ret_bits (3 words, may be NULL)
 * the bits of its exponent, level and mantissa segments. Return 0 or a
 * BELLOWS_E* as kern_gcomp_encode and kern_gcomp_decode (decode also refuses,
 * BELLOWS_EPROTO, a block whose chunks other than the last do not hold
 * KERN_GCOMP_CHUNK values); both wait for the stream. */
int kern_cuda_gcomp_encode_block(const kern_gcomp_table *t,
    const kern_gcomp_table *t_dev, int dtype, const void *x, uint64_t n,
    int level, const uint8_t *levels, uint8_t *out, size_t cap,
    size_t *ret_bytes, uint64_t *ret_bits, kern_cuda_gcomp_scratch *w,
    void *stream);
int kern_cuda_gcomp_decode_block(const kern_gcomp_table *t,
    const kern_gcomp_table *t_dev, const uint8_t *in, size_t bytes, int dtype,
    void *out, uint64_t n, int add, char *errbuf, size_t errlen,
    kern_cuda_gcomp_scratch *w, void *stream);

/* Copies t to a new device allocation on the current device and waits:
 * *ret_dev gets it, for kern_cuda_gcomp_table_free. Returns 0 or a
 * BELLOWS_E* (kern_cuda_codec_rc's). */
int kern_cuda_gcomp_table_upload(const kern_gcomp_table *t,
    kern_gcomp_table **ret_dev);

/* Frees a table kern_cuda_gcomp_table_upload made; NULL-safe. */
void kern_cuda_gcomp_table_free(kern_gcomp_table *dev);

#ifdef __cplusplus
}
#endif

#endif /* KERN_CUDA_GCOMP_LAUNCH_H */
