/* kern_codec_par - the codecs over worker threads, and on float16 and bfloat16
 * gradients.
 *
 * A large tensor is cut into chunks (about four per thread, at least 8192
 * values, at most 256), every chunk but the last a multiple of
 * KERN_CODEC_PAR_ALIGN values, so that each chunk's packed codes are
 * whole 32-bit words of the message; the chunks are taken by whichever of
 * the pool's threads get to them first (kern_pool_share), so a thread
 * that does not get a core leaves its share to the others. The 1-bit and
 * 2-bit encode and decode run the ISA's kernels on each chunk and give the
 * same bytes and residuals as one call over the whole tensor. Top-k runs
 * its passes chunk by chunk and merges per-chunk counts in chunk order
 * (histograms per thread, summed), so the selection (exact k, ties to the
 * lower index) is the one kern_topk_encode makes: results never depend on
 * the number of threads or on which thread ran which chunk.
 *
 * float16 and bfloat16 gradients are widened exactly to float (element.h)
 * before the residual addition, which is float32 arithmetic on a float32
 * residual: the same as bellows.compress's torch code (err.add_(g.float())
 * on a float32 residual). The widening goes through a stack buffer of
 * KERN_CODEC_PAR_CHUNK values, so nothing is allocated.
 *
 * Tensors below the context's min_values run on the calling thread alone
 * (a pool run costs a wake-up and a wait, tens of microseconds).
 *
 * Threading: one thread calls a context's functions at a time; a NULL
 * context means one thread.
 */
#ifndef KERN_CPU_CODEC_PAR_H
#define KERN_CPU_CODEC_PAR_H

#include <stdint.h>

#include "kern_codec.h"

#define KERN_CODEC_PAR_ALIGN 1024       /* values: part boundaries */
#define KERN_CODEC_PAR_CHUNK 2048       /* values widened per step */
#define KERN_CODEC_PAR_MIN   (1u << 20) /* default min_values */

typedef struct kern_codec_par kern_codec_par;

/* Opens a context of `parts` threads (1 .. KERN_MAX_THREADS + 1: the
 * caller's and parts - 1 workers) splitting tensors of at least
 * min_values values (0: KERN_CODEC_PAR_MIN). Returns 0; BELLOWS_EINVAL
 * for parts out of range; BELLOWS_ENOMEM; BELLOWS_ESYS (threads). On
 * success *ret is the caller's, to destroy. */
int kern_codec_par_new(uint32_t parts, uint64_t min_values,
    kern_codec_par **ret);

/* Stops the workers and frees *par; sets it to NULL. NULL-safe. */
void kern_codec_par_destroy(kern_codec_par **par);

/* Returns the threads of par (1 for NULL). */
uint32_t kern_codec_par_parts(const kern_codec_par *par);

/* Returns par's min_values (KERN_CODEC_PAR_MIN for NULL). */
uint64_t kern_codec_par_min(const kern_codec_par *par);

/* Encodes n values of grad (a kern_dtype) with f's kernel of `bits` (1 or
 * 2) bits, as kern_codec_enc_fn: res[i] += widen(g[i]), quantise, error
 * left in res, kern_codec_bytes(bits, n) bytes to out. Arguments checked
 * by the caller. */
void kern_codec_par_encode(kern_codec_par *par, const kern_codec_fns *f,
    int bits, float t, int dtype, const void *g, float *res, uint64_t n,
    uint8_t *out);

/* What kern_codec_par_encode_post runs on each chunk it encodes, right
 * after the chunk's kernel, on the same thread: res and codes are the
 * chunk's n values' residuals and packed codes (n a multiple of
 * KERN_CODEC_PAR_ALIGN but for the tensor's last chunk). Chunks may run
 * in any order and on several threads at once. */
typedef void kern_codec_post_fn(float *res, uint64_t n, const uint8_t *codes,
    void *arg);

/* kern_codec_par_encode, then post(..., arg) on each chunk of at most
 * KERN_CODEC_PAR_CHUNK values while it is in the cache (post NULL: none).
 * The same codes and residual before post as kern_codec_par_encode. */
void kern_codec_par_encode_post(kern_codec_par *par, const kern_codec_fns *f,
    int bits, float t, int dtype, const void *g, float *res, uint64_t n,
    uint8_t *out, kern_codec_post_fn *post, void *post_arg);

/* Decodes n values as kern_codec_dec_fn, split across par's threads. */
void kern_codec_par_decode(kern_codec_par *par, const kern_codec_fns *f,
    int bits, float t, const uint8_t *in, uint64_t n, float *out, int add);

/* kern_topk_encode_isa on a gradient of dtype, split across par's
 * threads; the same selection, residual and output whatever the threads
 * or the dtype's width (the values are widened first). */
void kern_codec_par_topk(kern_codec_par *par, int isa, int dtype, const void *g,
    float *res, uint64_t n, uint64_t k, uint8_t *idx, uint8_t *val);

#endif /* KERN_CPU_CODEC_PAR_H */
