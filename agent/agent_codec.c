/* agent_codec - bellows/codec.h on top of the CPU codec kernels
 * (kernels/cpu/kern_codec.h) and their CUDA twins
 * (kernels/cuda/kern_cuda_codec.h): argument checks, the message header, a
 * layer's residual, and the process's codec threads. The kernels of the best
 * instruction set this processor runs are picked once per call (a few cached
 * CPUID bits).
 *
 * The codec threads (kernels/cpu/kern_codec_par.h) are one context for the
 * process, started at the first call large enough to split, guarded by
 * par_lock: a call takes it with trylock and runs on its own thread alone
 * when another call has it, which gives the same results. */
#include <bellows/codec.h>

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/kernels.h"
#include "kernels/cpu/kern_codec.h"
#include "kernels/cpu/kern_codec_auto.h"
#include "kernels/cpu/kern_codec_par.h"
#include "kernels/cpu/kern_stats.h"
#include "kernels/cpu/kern_topk.h"
#ifdef KERN_HAVE_CUDA
#include "kernels/cuda/kern_cuda_codec.h"
#endif

static pthread_mutex_t par_lock = PTHREAD_MUTEX_INITIALIZER; /* guards: */
static kern_codec_par *par_ctx; /* the codec threads; NULL: one */
static int par_started;         /* par_ctx set (default or explicit) */

/* Threads by default: BELLOWS_CODEC_THREADS (0 or "all": one per online
 * processor), else 1, as the statistics kernels' pool (no workers unless
 * asked for: on a machine whose cores the trainer keeps busy, a worker
 * waits for a core and a split call is slower than one thread). Within
 * 1 .. KERN_MAX_THREADS + 1. */
static uint32_t
par_default_threads(void)
{
	const char *env = getenv("BELLOWS_CODEC_THREADS");
	long n = 1;

	if (env != NULL && *env != '\0') {
		n = strtol(env, NULL, 10);
		if (n <= 0)
			n = sysconf(_SC_NPROCESSORS_ONLN);
	}
	if (n < 1)
		n = 1;
	return n > KERN_MAX_THREADS + 1 ? KERN_MAX_THREADS + 1 : (uint32_t)n;
}

/* Replaces the codec threads; par_lock held. Falls back to one thread
 * when the workers cannot start. */
static int
par_start_locked(uint32_t threads, uint64_t min_values)
{
	kern_codec_par *p = NULL;
	int rc = 0;

	kern_codec_par_destroy(&par_ctx);
	par_started = 1;
	if (threads > 1 &&
	    (rc = kern_codec_par_new(threads, min_values, &p)) == 0)
		par_ctx = p;
	return rc;
}

/* The codec threads for a call over n values, par_lock held, or NULL
 * (one thread, lock not held). Give back with par_give. */
static kern_codec_par *
par_take(uint64_t n)
{
	if (n < 2 * KERN_CODEC_PAR_ALIGN || pthread_mutex_trylock(&par_lock))
		return NULL;
	if (!par_started)
		(void)par_start_locked(par_default_threads(), 0);
	if (par_ctx == NULL || n < kern_codec_par_min(par_ctx)) {
		pthread_mutex_unlock(&par_lock);
		return NULL;
	}
	return par_ctx;
}

static void
par_give(kern_codec_par *p)
{
	if (p != NULL)
		pthread_mutex_unlock(&par_lock);
}

int
bellows_codec_set_threads(uint32_t threads, uint64_t min_values)
{
	int rc;

	if (threads > KERN_MAX_THREADS + 1)
		return BELLOWS_EINVAL;
	pthread_mutex_lock(&par_lock);
	if (threads == 0) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);

		threads = n < 1
		    ? 1
		    : (n > KERN_MAX_THREADS + 1 ? KERN_MAX_THREADS + 1
						: (uint32_t)n);
	}
	rc = par_start_locked(threads, min_values);
	pthread_mutex_unlock(&par_lock);
	return rc;
}

uint32_t
bellows_codec_threads(void)
{
	uint32_t n;

	pthread_mutex_lock(&par_lock);
	if (!par_started)
		(void)par_start_locked(par_default_threads(), 0);
	n = kern_codec_par_parts(par_ctx);
	pthread_mutex_unlock(&par_lock);
	return n;
}

/* Returns non-zero for a gradient type the codecs take. */
static int
dtype_ok(int dtype)
{
	return dtype == KERN_F32 || dtype == KERN_F16 || dtype == KERN_BF16;
}

struct bellows_codec {
	int kind;        /* bellows_codec_kind */
	float threshold; /* checked by codec_params_ok */
	uint64_t n;      /* values per encode */
	uint64_t k;      /* top-k: values sent per encode; else 0 */
	float *residual; /* n floats, 64-byte aligned */
};

/* Returns non-zero if kind and threshold make a codec. */
static int
codec_params_ok(int kind, float threshold)
{
	if (!isfinite(threshold))
		return 0;
	if (kind == BELLOWS_CODEC_1BIT)
		return threshold >= 0.0f;
	if (kind == BELLOWS_CODEC_2BIT)
		return threshold > 0.0f;
	return 0;
}

static const kern_codec_fns *
codec_fns(void)
{
	return kern_codec_get(KERN_ISA_AUTO);
}

/* Returns non-zero if [a, a + an) and [b, b + bn) overlap. */
static int
overlaps(const void *a, size_t an, const void *b, size_t bn)
{
	uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;

	return an > 0 && bn > 0 && x < y + bn && y < x + an;
}

size_t
bellows_codec_codes_bytes(int kind, uint64_t n)
{
	if ((kind != BELLOWS_CODEC_1BIT && kind != BELLOWS_CODEC_2BIT) ||
	    n > BELLOWS_CODEC_MAX_VALUES)
		return 0;
	return (size_t)kern_codec_bytes(kind, n);
}

size_t
bellows_codec_message_bytes(int kind, uint64_t n)
{
	if ((kind != BELLOWS_CODEC_1BIT && kind != BELLOWS_CODEC_2BIT) ||
	    n > BELLOWS_CODEC_MAX_VALUES)
		return 0;
	return BELLOWS_CODEC_HEADER_BYTES + (size_t)kern_codec_bytes(kind, n);
}

/* Runs the encode kernel on the codec threads; arguments checked. */
static void
codec_encode(int kind, float t, int dtype, const void *grad, float *res,
    uint64_t n, uint8_t *out)
{
	kern_codec_par *p = par_take(n);

	kern_codec_par_encode(p, codec_fns(), kind, t, dtype, grad, res, n,
	    out);
	par_give(p);
}

/* Runs the decode kernel on the codec threads; arguments checked. */
static void
codec_decode(int kind, float t, const uint8_t *in, uint64_t n, float *out,
    int flags)
{
	kern_codec_par *p = par_take(n);

	kern_codec_par_decode(p, codec_fns(), kind, t, in, n, out,
	    flags & BELLOWS_CODEC_ADD);
	par_give(p);
}

/* Runs top-k on the codec threads; arguments checked. */
static void
codec_topk(int dtype, const void *grad, float *res, uint64_t n, uint64_t k,
    uint8_t *idx, uint8_t *val)
{
	kern_codec_par *p = par_take(n);

	kern_codec_par_topk(p, KERN_ISA_AUTO, dtype, grad, res, n, k, idx, val);
	par_give(p);
}

int
bellows_codec_encode_codes(int kind, float threshold, const float *grad,
    float *residual, uint64_t n, void *codes, size_t cap)
{
	return bellows_codec_encode_codes_dtype(kind, threshold, KERN_F32, grad,
	    residual, n, codes, cap);
}

int
bellows_codec_encode_codes_dtype(int kind, float threshold, int dtype,
    const void *grad, float *residual, uint64_t n, void *codes, size_t cap)
{
	size_t need;

	if (!codec_params_ok(kind, threshold) || !dtype_ok(dtype) ||
	    n > BELLOWS_CODEC_MAX_VALUES)
		return BELLOWS_EINVAL;
	if (n == 0)
		return 0;
	if (grad == NULL || residual == NULL || codes == NULL)
		return BELLOWS_EINVAL;
	need = (size_t)kern_codec_bytes(kind, n);
	if (cap < need)
		return BELLOWS_EMSGSIZE;
	codec_encode(kind, threshold, dtype, grad, residual, n, codes);
	return 0;
}

int
bellows_codec_encode_codes_auto(int kind, int dtype, const void *grad,
    float *residual, uint64_t n, void *codes, size_t cap, float *ret_t,
    float *ret_v)
{
	kern_codec_par *p;
	float t, v;

	if (kind != BELLOWS_CODEC_2BIT || !dtype_ok(dtype) ||
	    n > BELLOWS_CODEC_MAX_VALUES)
		return BELLOWS_EINVAL;
	if (n > 0 && (grad == NULL || residual == NULL || codes == NULL))
		return BELLOWS_EINVAL;
	if (cap < (size_t)kern_codec_bytes(kind, n))
		return BELLOWS_EMSGSIZE;
	p = par_take(n);
	kern_codec_auto_encode(p, codec_fns(), dtype, grad, residual, n, codes,
	    &t, &v);
	par_give(p);
	if (ret_t != NULL)
		*ret_t = t;
	if (ret_v != NULL)
		*ret_v = v;
	return 0;
}

int
bellows_codec_decode_codes(int kind, float threshold, const void *codes,
    size_t bytes, uint64_t n, float *out, int flags)
{
	if (!codec_params_ok(kind, threshold) || n > BELLOWS_CODEC_MAX_VALUES ||
	    (flags & ~BELLOWS_CODEC_ADD))
		return BELLOWS_EINVAL;
	if (n > 0 && (codes == NULL || out == NULL))
		return BELLOWS_EINVAL;
	if (bytes != kern_codec_bytes(kind, n))
		return BELLOWS_EPROTO;
	if (n > 0)
		codec_decode(kind, threshold, codes, n, out, flags);
	return 0;
}

size_t
bellows_codec_topk_message_bytes(uint64_t n, uint64_t k)
{
	if (k > n || n > UINT32_MAX)
		return 0;
	return BELLOWS_CODEC_HEADER_BYTES + (size_t)k * 8;
}

int
bellows_codec_topk_encode(const float *grad, float *residual, uint64_t n,
    uint64_t k, uint32_t *idx, float *val)
{
	return bellows_codec_topk_encode_dtype(KERN_F32, grad, residual, n, k,
	    idx, val);
}

int
bellows_codec_topk_encode_dtype(int dtype, const void *grad, float *residual,
    uint64_t n, uint64_t k, uint32_t *idx, float *val)
{
	if (k > n || n > UINT32_MAX || !dtype_ok(dtype))
		return BELLOWS_EINVAL;
	if (n > 0 && (grad == NULL || residual == NULL))
		return BELLOWS_EINVAL;
	if (k > 0 && (idx == NULL || val == NULL))
		return BELLOWS_EINVAL;
	codec_topk(dtype, grad, residual, n, k, (uint8_t *)idx, (uint8_t *)val);
	return 0;
}

int
bellows_codec_topk_decode(const uint32_t *idx, const float *val, uint64_t k,
    uint64_t n, float *out, int flags)
{
	if (k > n || n > UINT32_MAX || (flags & ~BELLOWS_CODEC_ADD))
		return BELLOWS_EINVAL;
	if ((n > 0 && out == NULL) || (k > 0 && (idx == NULL || val == NULL)))
		return BELLOWS_EINVAL;
	if (!kern_topk_valid((const uint8_t *)idx, k, n))
		return BELLOWS_EPROTO;
	if (n > 0)
		kern_topk_decode((const uint8_t *)idx, (const uint8_t *)val, k,
		    n, out, flags & BELLOWS_CODEC_ADD);
	return 0;
}

_Static_assert(BELLOWS_CODEC_MAX_RANKS <= KERN_TOPK_MAX_RANKS,
    "the kernel's heap holds every rank");

int
bellows_codec_topk_average(const uint32_t *const *idx, const float *const *val,
    uint32_t ranks, uint64_t k, uint64_t n, float *out)
{
	if (ranks == 0 || ranks > BELLOWS_CODEC_MAX_RANKS || k > n ||
	    n > UINT32_MAX || (n > 0 && out == NULL))
		return BELLOWS_EINVAL;
	if (k > 0 && (idx == NULL || val == NULL))
		return BELLOWS_EINVAL;
	for (uint32_t r = 0; k > 0 && r < ranks; r++)
		if (idx[r] == NULL || val[r] == NULL)
			return BELLOWS_EINVAL;
	for (uint32_t r = 0; k > 0 && r < ranks; r++)
		if (!kern_topk_valid((const uint8_t *)idx[r], k, n))
			return BELLOWS_EPROTO;
	if (n > 0)
		kern_topk_average((const uint8_t *const *)idx,
		    (const uint8_t *const *)val, ranks, k, n, out);
	return 0;
}

/* Allocates a codec of n values with a zero residual. */
static int
codec_alloc(uint64_t n, bellows_codec **ret_codec)
{
	bellows_codec *c;
	size_t bytes;

	if ((c = calloc(1, sizeof(*c))) == NULL)
		return BELLOWS_ENOMEM;
	bytes = ((size_t)n * sizeof(float) + 63) / 64 * 64;
	if (bytes > 0 && (c->residual = aligned_alloc(64, bytes)) == NULL) {
		free(c);
		return BELLOWS_ENOMEM;
	}
	if (bytes > 0)
		memset(c->residual, 0, bytes);
	c->n = n;
	*ret_codec = c;
	return 0;
}

int
bellows_codec_new_topk(uint64_t n, uint64_t k, bellows_codec **ret_codec)
{
	bellows_codec *c;
	int rc;

	if (ret_codec == NULL || k > n || n > UINT32_MAX)
		return BELLOWS_EINVAL;
	if ((rc = codec_alloc(n, &c)) < 0)
		return rc;
	c->kind = BELLOWS_CODEC_TOPK;
	c->k = k;
	*ret_codec = c;
	return 0;
}

int
bellows_codec_new(int kind, float threshold, uint64_t n,
    bellows_codec **ret_codec)
{
	bellows_codec *c;
	int rc;

	if (ret_codec == NULL || !codec_params_ok(kind, threshold) ||
	    n > BELLOWS_CODEC_MAX_VALUES)
		return BELLOWS_EINVAL;
	if ((rc = codec_alloc(n, &c)) < 0)
		return rc;
	c->kind = kind;
	c->threshold = threshold;
	*ret_codec = c;
	return 0;
}

void
bellows_codec_destroy(bellows_codec **codec)
{
	if (codec == NULL || *codec == NULL)
		return;
	free((*codec)->residual);
	free(*codec);
	*codec = NULL;
}

/* Stores v little-endian in 4 or 8 bytes. */
static void
put_le(uint8_t *p, uint64_t v, int bytes)
{
	for (int i = 0; i < bytes; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t
get_le(const uint8_t *p, int bytes)
{
	uint64_t v = 0;

	for (int i = 0; i < bytes; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

int
bellows_codec_encode(bellows_codec *codec, const float *grad, uint64_t n,
    void *out, size_t cap, size_t *ret_bytes)
{
	uint8_t *o = out;
	size_t need;
	uint32_t tbits;

	if (codec == NULL || out == NULL || (n > 0 && grad == NULL))
		return BELLOWS_EINVAL;
	if (n != codec->n)
		return BELLOWS_EMISMATCH;
	if (codec->kind == BELLOWS_CODEC_TOPK)
		need = bellows_codec_topk_message_bytes(n, codec->k);
	else
		need = bellows_codec_message_bytes(codec->kind, n);
	if (cap < need)
		return BELLOWS_EMSGSIZE;
	if (overlaps(grad, (size_t)n * sizeof(float), out, need))
		return BELLOWS_EINVAL;
	o[0] = 'B';
	o[1] = 'Q';
	o[2] = BELLOWS_CODEC_VERSION;
	o[3] = (uint8_t)codec->kind;
	put_le(o + 8, n, 8);
	if (codec->kind == BELLOWS_CODEC_TOPK) {
		/* Indices and values in host order: little-endian here. */
		put_le(o + 4, codec->k, 4);
		codec_topk(KERN_F32, grad, codec->residual, n, codec->k,
		    o + BELLOWS_CODEC_HEADER_BYTES,
		    o + BELLOWS_CODEC_HEADER_BYTES + 4 * codec->k);
		if (ret_bytes != NULL)
			*ret_bytes = need;
		return 0;
	}
	memcpy(&tbits, &codec->threshold, 4);
	put_le(o + 4, tbits, 4);
	if (n > 0)
		codec_encode(codec->kind, codec->threshold, KERN_F32, grad,
		    codec->residual, n, o + BELLOWS_CODEC_HEADER_BYTES);
	if (ret_bytes != NULL)
		*ret_bytes = need;
	return 0;
}

/* Decodes a top-k message whose magic and version are checked. */
static int
topk_decode(const uint8_t *m, size_t bytes, float *out, uint64_t n, int flags)
{
	uint64_t k = get_le(m + 4, 4), mn = get_le(m + 8, 8);
	const uint8_t *idx = m + BELLOWS_CODEC_HEADER_BYTES;

	if (k > mn || mn > UINT32_MAX ||
	    bytes != bellows_codec_topk_message_bytes(mn, k))
		return BELLOWS_EPROTO;
	if (mn != n)
		return BELLOWS_EMISMATCH;
	if (!kern_topk_valid(idx, k, n))
		return BELLOWS_EPROTO;
	if (n > 0)
		kern_topk_decode(idx, idx + 4 * k, k, n, out,
		    flags & BELLOWS_CODEC_ADD);
	return 0;
}

int
bellows_codec_decode(const void *msg, size_t bytes, float *out, uint64_t n,
    int flags)
{
	const uint8_t *m = msg;
	uint32_t tbits;
	uint64_t mn;
	float t;
	int kind;

	if (msg == NULL || (n > 0 && out == NULL) ||
	    (flags & ~BELLOWS_CODEC_ADD))
		return BELLOWS_EINVAL;
	if (bytes < BELLOWS_CODEC_HEADER_BYTES || m[0] != 'B' || m[1] != 'Q')
		return BELLOWS_EPROTO;
	if (m[2] != BELLOWS_CODEC_VERSION)
		return BELLOWS_EVERSION;
	kind = m[3];
	if (kind == BELLOWS_CODEC_TOPK)
		return topk_decode(m, bytes, out, n, flags);
	tbits = (uint32_t)get_le(m + 4, 4);
	memcpy(&t, &tbits, 4);
	mn = get_le(m + 8, 8);
	if (!codec_params_ok(kind, t) || mn > BELLOWS_CODEC_MAX_VALUES)
		return BELLOWS_EPROTO;
	if (bytes - BELLOWS_CODEC_HEADER_BYTES != kern_codec_bytes(kind, mn))
		return BELLOWS_EPROTO;
	if (mn != n)
		return BELLOWS_EMISMATCH;
	if (n > 0)
		codec_decode(kind, t, m + BELLOWS_CODEC_HEADER_BYTES, n, out,
		    flags);
	return 0;
}

const float *
bellows_codec_residual(const bellows_codec *codec)
{
	return codec == NULL ? NULL : codec->residual;
}

void
bellows_codec_reset(bellows_codec *codec)
{
	if (codec != NULL && codec->n > 0)
		memset(codec->residual, 0, (size_t)codec->n * sizeof(float));
}

const char *
bellows_codec_isa(void)
{
	return kern_cpu_isa_name(kern_cpu_isa_best());
}

/* ---- CUDA twins ------------------------------------------------------ */

int
bellows_codec_cuda_built(void)
{
#ifdef KERN_HAVE_CUDA
	return 1;
#else
	return 0;
#endif
}

int
bellows_codec_cuda_available(void)
{
#ifdef KERN_HAVE_CUDA
	return kern_cuda_codec_available();
#else
	return 0;
#endif
}

int
bellows_codec_encode_codes_cuda(int kind, float threshold, int dtype,
    const void *grad, float *residual, uint64_t n, void *codes, size_t cap,
    void *stream)
{
	if (!codec_params_ok(kind, threshold) || !dtype_ok(dtype) ||
	    n > BELLOWS_CODEC_MAX_VALUES)
		return BELLOWS_EINVAL;
	if (n == 0)
		return bellows_codec_cuda_built() ? 0 : BELLOWS_ENOTSUP;
	if (grad == NULL || residual == NULL || codes == NULL ||
	    (uintptr_t)codes % 4 != 0)
		return BELLOWS_EINVAL;
	if (cap < kern_codec_bytes(kind, n))
		return BELLOWS_EMSGSIZE;
#ifdef KERN_HAVE_CUDA
	return kern_cuda_codec_encode(kind, threshold, dtype, grad, residual, n,
	    codes, stream);
#else
	(void)stream;
	return BELLOWS_ENOTSUP;
#endif
}

int
bellows_codec_decode_codes_cuda(int kind, float threshold, const void *codes,
    size_t bytes, uint64_t n, float *out, int flags, void *stream)
{
	if (!codec_params_ok(kind, threshold) || n > BELLOWS_CODEC_MAX_VALUES ||
	    (flags & ~BELLOWS_CODEC_ADD))
		return BELLOWS_EINVAL;
	if (n > 0 &&
	    (codes == NULL || out == NULL || (uintptr_t)codes % 4 != 0))
		return BELLOWS_EINVAL;
	if (bytes != kern_codec_bytes(kind, n))
		return BELLOWS_EPROTO;
	if (n == 0)
		return bellows_codec_cuda_built() ? 0 : BELLOWS_ENOTSUP;
#ifdef KERN_HAVE_CUDA
	return kern_cuda_codec_decode(kind, threshold, codes, n, out,
	    flags & BELLOWS_CODEC_ADD, stream);
#else
	(void)stream;
	return BELLOWS_ENOTSUP;
#endif
}

size_t
bellows_codec_topk_cuda_work_bytes(uint64_t n)
{
	if (n > UINT32_MAX)
		return 0;
#ifdef KERN_HAVE_CUDA
	return kern_cuda_topk_work_bytes(n);
#else
	return 0;
#endif
}

int
bellows_codec_topk_encode_cuda(int dtype, const void *grad, float *residual,
    uint64_t n, uint64_t k, uint32_t *idx, float *val, void *work,
    size_t work_bytes, void *stream)
{
	if (k > n || n > UINT32_MAX || !dtype_ok(dtype))
		return BELLOWS_EINVAL;
	if (n > 0 && (grad == NULL || residual == NULL))
		return BELLOWS_EINVAL;
	if (k > 0 && (idx == NULL || val == NULL))
		return BELLOWS_EINVAL;
	if (!bellows_codec_cuda_built())
		return BELLOWS_ENOTSUP;
	if (n == 0)
		return 0;
	if (work == NULL || (uintptr_t)work % 8 != 0 ||
	    work_bytes < bellows_codec_topk_cuda_work_bytes(n))
		return BELLOWS_EINVAL;
#ifdef KERN_HAVE_CUDA
	return kern_cuda_topk_encode(dtype, grad, residual, n, k, idx, val,
	    work, stream);
#else
	(void)stream;
	return BELLOWS_ENOTSUP;
#endif
}
