/* agent_ebq - the error-bounded quantiser of bellows/codec.h on top of its
 * kernels (kernels/cpu/kern_ebq.h): the step and code width, the choice of
 * layout, the message header and its checks, and the optional zstd pass.
 *
 * Encoding reads the input three times: its largest magnitude (the step
 * and the code width follow), the count of non-zero codes (the layout
 * follows: codes are q != 0 exactly when |x| is above a threshold found
 * once by stepping through floats), then the codes, written block by block
 * through a small stack buffer so nothing is allocated.
 *
 * The CUDA twin (bellows_ebq_*_cuda, built with KERN_HAVE_CUDA) plans with
 * the same code: the largest magnitude and the counts come from the device
 * kernels (kernels/cuda/kern_cuda_ebq.h) through a few words at the end of the
 * caller's scratch, fetched synchronously; the arithmetic on the host is
 * the CPU plan's. */
#include <bellows/codec.h>

#include <float.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#ifdef BELLOWS_HAVE_ZSTD
#include <zstd.h>
#endif

#include "kernels/kernels.h"
#include "kernels/cpu/kern_ebq.h"
#include "kernels/cpu/kern_stats.h"
#ifdef KERN_HAVE_CUDA
#include "kernels/cuda/kern_cuda_codec.h"
#include "kernels/cuda/kern_cuda_ebq.h"
#endif

/* Values per block of codes on the stack (16 KiB of int32). */
#define EBQ_BLOCK 4096

/* zstd's level: the fastest of the regular ones. */
#define EBQ_ZSTD_LEVEL 1

struct bellows_ebq {
	uint64_t max_n; /* values per message at most */
	size_t cap;     /* bytes of buf */
	uint8_t *buf;   /* compressed or decompressed payload */
#ifdef BELLOWS_HAVE_ZSTD
	ZSTD_CCtx *cctx; /* compression state */
	ZSTD_DCtx *dctx; /* decompression state */
#endif
};

/* The ISA forced by bellows_ebq_force_isa; 0: the best. */
static atomic_int ebq_isa;

static const kern_ebq_fns *
ebq_fns(void)
{
	return kern_ebq_get(
	    atomic_load_explicit(&ebq_isa, memory_order_relaxed));
}

int
bellows_ebq_force_isa(int isa)
{
	if (isa < 0 || isa > KERN_ISA_LAST || kern_ebq_get(isa) == NULL)
		return BELLOWS_ENOTSUP;
	atomic_store(&ebq_isa, isa);
	return 0;
}

int
bellows_ebq_have_zstd(void)
{
#ifdef BELLOWS_HAVE_ZSTD
	return 1;
#else
	return 0;
#endif
}

size_t
bellows_ebq_bound(uint64_t n)
{
	if (n > BELLOWS_CODEC_MAX_VALUES)
		return 0;
	return BELLOWS_EBQ_HEADER_BYTES + (size_t)n * 4;
}

/* Bits of a two's complement code holding -qmax..qmax. */
static unsigned
bits_for(uint64_t qmax, int byte_codes)
{
	unsigned b = 1;

	while (b < 64 && qmax > (UINT64_C(1) << (b - 1)) - 1)
		b++;
	if (byte_codes)
		b = b <= 8 ? 8 : b <= 16 ? 16 : 32;
	return b;
}

/* The largest float pattern h (non-negative) with nearbyint(h / step) == 0,
 * i.e. (double)h / step <= 0.5: q[i] != 0 exactly when |x[i]|'s pattern is
 * above h (division and rounding are monotone). */
static uint32_t
zero_threshold(double step)
{
	double half = 0.5 * step;
	float h = half > FLT_MAX ? FLT_MAX : (float)half;
	uint32_t u;

	while (h > 0.0f && (double)h / step > 0.5)
		h = nextafterf(h, 0.0f);
	while (h < FLT_MAX && (double)nextafterf(h, INFINITY) / step <= 0.5)
		h = nextafterf(h, INFINITY);
	if (h == FLT_MAX && (double)INFINITY / step <= 0.5)
		h = INFINITY;
	memcpy(&u, &h, 4);
	return u;
}

/* Where a plan reads its input: the CPU kernels, or (scratch non-NULL)
 * the CUDA twin on device memory, its results fetched through a few words
 * at the end of the scratch. */
typedef struct ebq_src {
	const kern_ebq_fns *f; /* CPU kernels */
	const float *x;        /* values (host or device) */
	uint64_t n;            /* values */
	void *scratch;         /* device scratch; NULL: the CPU */
	void *stream;          /* CUDA stream */
} ebq_src;

/* Device scratch of the CUDA twin: the kernels' (kern_cuda_ebq_scratch_
 * bytes), then EBQ_CUDA_WORDS 64-bit words of results. */
#define EBQ_CUDA_WORDS 4

#ifdef KERN_HAVE_CUDA
/* The result words of a scratch for n values. */
static unsigned long long *
cuda_words(void *scratch, uint64_t n)
{
	size_t off = (kern_cuda_ebq_scratch_bytes(n) + 7) / 8 * 8;

	return (unsigned long long *)((char *)scratch + off);
}
#endif

/* *ret = largest magnitude's bits over the source. Returns 0 or the
 * device's BELLOWS_E*. */
static int
src_amax(const ebq_src *s, uint32_t *ret)
{
	if (s->scratch == NULL) {
		*ret = s->f->amax(s->x, s->n);
		return 0;
	}
#ifdef KERN_HAVE_CUDA
	{
		unsigned long long *w = cuda_words(s->scratch, s->n);
		uint32_t v = 0;
		int rc = kern_cuda_ebq_clear(w, 8, s->stream);

		if (rc == 0)
			rc = kern_cuda_ebq_amax(s->x, s->n, (uint32_t *)w,
			    s->stream);
		if (rc == 0)
			rc = kern_cuda_ebq_fetch(&v, w, 4, s->stream);
		if (rc != 0)
			return kern_cuda_codec_rc(rc);
		*ret = v;
		return 0;
	}
#else
	return BELLOWS_ENOTSUP;
#endif
}

/* *ret = magnitudes above the pattern h over the source. Returns 0 or the
 * device's BELLOWS_E*. */
static int
src_count(const ebq_src *s, uint32_t h, uint64_t *ret)
{
	if (s->scratch == NULL) {
		*ret = s->n > 0 ? s->f->count(s->x, s->n, h) : 0;
		return 0;
	}
#ifdef KERN_HAVE_CUDA
	{
		unsigned long long *w = cuda_words(s->scratch, s->n) + 1;
		unsigned long long v = 0;
		int rc = kern_cuda_ebq_clear(w, 8, s->stream);

		if (rc == 0)
			rc = kern_cuda_ebq_count(s->x, s->n, h, w, s->stream);
		if (rc == 0)
			rc = kern_cuda_ebq_fetch(&v, w, 8, s->stream);
		if (rc != 0)
			return kern_cuda_codec_rc(rc);
		*ret = v;
		return 0;
	}
#else
	return BELLOWS_ENOTSUP;
#endif
}

/* Fills a raw plan. Returns 0 or the device's BELLOWS_E*. */
static int
plan_raw(const ebq_src *s, double eb, bellows_ebq_info *in)
{
	uint64_t nz = 0;
	int rc = s->n > 0 ? src_count(s, 0, &nz) : 0;

	if (rc != 0)
		return rc;
	memset(in, 0, sizeof *in);
	in->mode = BELLOWS_EBQ_RAW;
	in->bits = 32;
	in->n = s->n;
	in->eb = eb;
	in->nonzero = nz;
	in->codes_bytes = s->n * 4;
	in->payload_bytes = s->n * 4;
	return 0;
}

/* bellows_ebq_plan over a source, its arguments checked. */
static int
plan_src(const ebq_src *s, double eb, int flags, bellows_ebq_info *ret_info)
{
	uint64_t n = s->n;
	uint32_t abits = 0;
	float amax;
	double top, half_ulp, eb_eff, step, qd;
	uint64_t qmax, nz = 0, dense, sparse;
	unsigned b;
	bellows_ebq_info in;
	int rc;

	if (eb == 0.0 || n == 0)
		return plan_raw(s, eb, ret_info);
	if ((rc = src_amax(s, &abits)) != 0)
		return rc;
	if (abits >= 0x7f800000u)
		return plan_raw(s, eb, ret_info);
	memcpy(&amax, &abits, 4);
	/* Half an ulp of the largest reconstruction, amax + eb, and a
	 * relative margin for the binary64 arithmetic, off the bound: the
	 * torch code's formula, operation for operation. */
	top = (double)amax + eb;
	half_ulp = 0.5 * (double)FLT_EPSILON *
	    ldexp(1.0, (int)floor(log2(top)));
	eb_eff = (eb - half_ulp) * (1.0 - 0x1p-18);
	if (!(eb_eff > 0.5 * eb))
		return plan_raw(s, eb, ret_info);
	step = 2.0 * eb_eff;
	qd = fabs(nearbyint((double)amax / step));
	if (!(qd <= 2147483647.0))
		return plan_raw(s, eb, ret_info);
	qmax = (uint64_t)qd;
	b = bits_for(qmax, flags & BELLOWS_EBQ_BYTE_CODES);
	if ((rc = src_count(s, zero_threshold(step), &nz)) != 0)
		return rc;
	dense = (n * b + 7) / 8;
	sparse = (n + 7) / 8 + (nz * b + 7) / 8;
	if ((dense < sparse ? dense : sparse) >= n * 4)
		return plan_raw(s, eb, ret_info);
	memset(&in, 0, sizeof in);
	in.bits = b;
	in.n = n;
	in.eb = eb;
	in.step = step;
	in.nonzero = nz;
	if (sparse < dense) {
		in.mode = BELLOWS_EBQ_SPARSE;
		in.codes = nz;
		in.mask_bytes = (n + 7) / 8;
		in.codes_bytes = (nz * b + 7) / 8;
	} else {
		in.mode = BELLOWS_EBQ_DENSE;
		in.codes = n;
		in.codes_bytes = dense;
	}
	in.payload_bytes = in.mask_bytes + in.codes_bytes;
	*ret_info = in;
	return 0;
}

/* The checks bellows_ebq_plan makes of its arguments. */
static int
plan_args_ok(const float *x, uint64_t n, double eb, int flags,
    const bellows_ebq_info *ret_info)
{
	return !(ret_info == NULL || (n > 0 && x == NULL) || !isfinite(eb) ||
	    eb < 0.0 || n > BELLOWS_CODEC_MAX_VALUES ||
	    (flags & ~(BELLOWS_EBQ_BYTE_CODES | BELLOWS_EBQ_ZSTD)));
}

int
bellows_ebq_plan(const float *x, uint64_t n, double eb, int flags,
    bellows_ebq_info *ret_info)
{
	ebq_src s = { ebq_fns(), x, n, NULL, NULL };

	if (!plan_args_ok(x, n, eb, flags, ret_info))
		return BELLOWS_EINVAL;
	return plan_src(&s, eb, flags, ret_info);
}

int
bellows_ebq_encode_parts(const float *x, const bellows_ebq_info *info,
    void *mask, void *codes, uint64_t *ret_nonzero)
{
	const kern_ebq_fns *f = ebq_fns();
	int32_t q[EBQ_BLOCK + KERN_EBQ_SLACK];
	kern_ebq_packer p;
	uint64_t nonzero = 0, written = 0;
	int sparse;

	if (info == NULL ||
	    (info->mode != BELLOWS_EBQ_DENSE &&
		info->mode != BELLOWS_EBQ_SPARSE) ||
	    info->bits < 1 || info->bits > 32 || !(info->step > 0.0) ||
	    !isfinite(info->step) || !isfinite(info->eb) ||
	    info->n > BELLOWS_CODEC_MAX_VALUES)
		return BELLOWS_EINVAL;
	sparse = info->mode == BELLOWS_EBQ_SPARSE;
	if ((info->n > 0 && x == NULL) ||
	    (info->codes_bytes > 0 && codes == NULL) ||
	    (sparse && info->n > 0 && mask == NULL))
		return BELLOWS_EINVAL;
	if (info->codes > info->n || (!sparse && info->codes != info->n) ||
	    info->codes_bytes != (info->codes * info->bits + 7) / 8)
		return BELLOWS_EINVAL;
	p.out = codes;
	p.end = (uint8_t *)codes + info->codes_bytes;
	p.acc = 0;
	p.used = 0;
	p.bits = info->bits;
	for (uint64_t i = 0; i < info->n; i += EBQ_BLOCK) {
		uint64_t len = info->n - i < EBQ_BLOCK ? info->n - i
						       : EBQ_BLOCK;
		uint64_t nc,
		    nz = f->quant(x + i, len, info->step, info->eb, q,
			sparse ? (uint8_t *)mask + i / 8 : NULL, &nc);

		if (nz == UINT64_MAX)
			return BELLOWS_ELIMIT;
		/* More codes than planned: x is not the planned input. */
		if (nc > info->codes - written)
			return BELLOWS_EINVAL;
		written += nc;
		nonzero += nz;
		kern_ebq_pack(&p, q, nc);
	}
	kern_ebq_pack_flush(&p);
	if (ret_nonzero != NULL)
		*ret_nonzero = nonzero;
	return 0;
}

/* Stores v little-endian in `bytes` bytes. */
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

static void
put_f64(uint8_t *p, double d)
{
	uint64_t u;

	memcpy(&u, &d, 8);
	put_le(p, u, 8);
}

static double
get_f64(const uint8_t *p)
{
	uint64_t u = get_le(p, 8);
	double d;

	memcpy(&d, &u, 8);
	return d;
}

static void
put_header(uint8_t *o, const bellows_ebq_info *in)
{
	o[0] = 'B';
	o[1] = 'E';
	o[2] = BELLOWS_EBQ_VERSION;
	o[3] = (uint8_t)in->mode;
	o[4] = (uint8_t)in->bits;
	o[5] = in->zstd ? 1 : 0;
	o[6] = 0;
	o[7] = 0;
	put_le(o + 8, in->n, 8);
	put_f64(o + 16, in->eb);
	put_f64(o + 24, in->step);
	put_le(o + 32, in->codes, 8);
	put_le(o + 40, in->nonzero, 8);
	put_le(o + 48, in->payload_bytes, 8);
}

/* Returns non-zero if [a, a + an) and [b, b + bn) overlap. */
static int
overlaps(const void *a, size_t an, const void *b, size_t bn)
{
	uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;

	return an > 0 && bn > 0 && x < y + bn && y < x + an;
}

/* Compresses the payload of the message at o (header written) with zstd
 * when that makes it smaller; updates the header. */
static void
ebq_zstd(bellows_ebq *ctx, uint8_t *o, bellows_ebq_info *in)
{
#ifdef BELLOWS_HAVE_ZSTD
	size_t z;

	if (in->payload_bytes == 0)
		return;
	z = ZSTD_compressCCtx(ctx->cctx, ctx->buf, ctx->cap,
	    o + BELLOWS_EBQ_HEADER_BYTES, (size_t)in->payload_bytes,
	    EBQ_ZSTD_LEVEL);
	if (ZSTD_isError(z) || z >= in->payload_bytes)
		return;
	memcpy(o + BELLOWS_EBQ_HEADER_BYTES, ctx->buf, z);
	in->zstd = 1;
	in->payload_bytes = z;
	put_header(o, in);
#else
	(void)ctx;
	(void)o;
	(void)in;
#endif
}

int
bellows_ebq_encode(const float *x, uint64_t n, double eb, int flags,
    bellows_ebq *ctx, void *out, size_t cap, size_t *ret_bytes)
{
	uint8_t *o = out;
	bellows_ebq_info in;
	size_t need;
	int rc;

	if (out == NULL)
		return BELLOWS_EINVAL;
	if (flags & BELLOWS_EBQ_ZSTD) {
		if (!bellows_ebq_have_zstd())
			return BELLOWS_ENOTSUP;
		if (ctx == NULL || n > ctx->max_n)
			return BELLOWS_EINVAL;
	}
	rc = bellows_ebq_plan(x, n, eb, flags, &in);
	if (rc != 0)
		return rc;
	if (overlaps(x, (size_t)n * 4, out, cap))
		return BELLOWS_EINVAL;
	need = BELLOWS_EBQ_HEADER_BYTES + (size_t)in.payload_bytes;
	if (cap < need)
		return BELLOWS_EMSGSIZE;
	if (in.mode != BELLOWS_EBQ_RAW) {
		uint8_t *p = o + BELLOWS_EBQ_HEADER_BYTES;

		rc = bellows_ebq_encode_parts(x, &in, p, p + in.mask_bytes,
		    &in.nonzero);
		if (rc == BELLOWS_ELIMIT) {
			ebq_src src = { ebq_fns(), x, n, NULL, NULL };

			/* A bound missed (the margins rule it out): raw. */
			(void)plan_raw(&src, eb, &in);
			need = BELLOWS_EBQ_HEADER_BYTES +
			    (size_t)in.payload_bytes;
			if (cap < need)
				return BELLOWS_EMSGSIZE;
		} else if (rc != 0) {
			return rc;
		}
	}
	if (in.mode == BELLOWS_EBQ_RAW && n > 0)
		memcpy(o + BELLOWS_EBQ_HEADER_BYTES, x, (size_t)n * 4);
	put_header(o, &in);
	if (flags & BELLOWS_EBQ_ZSTD)
		ebq_zstd(ctx, o, &in);
	if (ret_bytes != NULL)
		*ret_bytes = BELLOWS_EBQ_HEADER_BYTES +
		    (size_t)in.payload_bytes;
	return 0;
}

int
bellows_ebq_info_read(const void *msg, size_t bytes, bellows_ebq_info *ret)
{
	const uint8_t *m = msg;
	bellows_ebq_info in;
	uint64_t plain;

	if (msg == NULL || ret == NULL)
		return BELLOWS_EINVAL;
	if (bytes < BELLOWS_EBQ_HEADER_BYTES || m[0] != 'B' || m[1] != 'E')
		return BELLOWS_EPROTO;
	if (m[2] != BELLOWS_EBQ_VERSION)
		return BELLOWS_EVERSION;
	memset(&in, 0, sizeof in);
	in.mode = m[3];
	in.bits = m[4];
	in.zstd = m[5] & 1;
	in.n = get_le(m + 8, 8);
	in.eb = get_f64(m + 16);
	in.step = get_f64(m + 24);
	in.codes = get_le(m + 32, 8);
	in.nonzero = get_le(m + 40, 8);
	in.payload_bytes = get_le(m + 48, 8);
	if ((m[5] & ~1) || m[6] || m[7] || in.n > BELLOWS_CODEC_MAX_VALUES ||
	    !isfinite(in.eb) || in.eb < 0.0 || in.nonzero > in.n ||
	    in.codes > in.n)
		return BELLOWS_EPROTO;
	switch (in.mode) {
	case BELLOWS_EBQ_RAW:
		if (in.bits != 32 || in.step != 0.0 || in.codes != 0)
			return BELLOWS_EPROTO;
		in.codes_bytes = in.n * 4;
		break;
	case BELLOWS_EBQ_DENSE:
	case BELLOWS_EBQ_SPARSE:
		if (in.bits < 1 || in.bits > 32 || !isfinite(in.step) ||
		    !(in.step > 0.0) || !(in.eb > 0.0) ||
		    (in.mode == BELLOWS_EBQ_DENSE && in.codes != in.n))
			return BELLOWS_EPROTO;
		in.mask_bytes = in.mode == BELLOWS_EBQ_SPARSE ? (in.n + 7) / 8
							      : 0;
		in.codes_bytes = (in.codes * in.bits + 7) / 8;
		break;
	default:
		return BELLOWS_EPROTO;
	}
	plain = in.mask_bytes + in.codes_bytes;
	if (bytes - BELLOWS_EBQ_HEADER_BYTES != in.payload_bytes ||
	    (!in.zstd && in.payload_bytes != plain) ||
	    (in.zstd && (in.payload_bytes == 0 || in.payload_bytes >= plain)))
		return BELLOWS_EPROTO;
	*ret = in;
	return 0;
}

/* Returns the set bits of the n bytes at p (SWAR: the library is built
 * for any x86-64, without the popcnt instruction). */
static uint64_t
bits_set(const uint8_t *p, uint64_t n)
{
	uint64_t c = 0, i = 0;

	for (; i + 8 <= n; i += 8) {
		uint64_t v;

		memcpy(&v, p + i, 8);
		v = v - ((v >> 1) & 0x5555555555555555ull);
		v = (v & 0x3333333333333333ull) +
		    ((v >> 2) & 0x3333333333333333ull);
		v = (v + (v >> 4)) & 0x0f0f0f0f0f0f0f0full;
		c += (v * 0x0101010101010101ull) >> 56;
	}
	for (; i < n; i++)
		for (unsigned b = p[i]; b; b &= b - 1)
			c++;
	return c;
}

/* Returns non-zero if the bits of the last byte of a stream of `bits`
 * bits (if partial) above its end are zero. */
static int
padding_clear(const uint8_t *p, uint64_t bits)
{
	if (bits % 8 == 0)
		return 1;
	return (p[bits / 8] >> (bits % 8)) == 0;
}

int
bellows_ebq_decode_parts(const bellows_ebq_info *info, const void *mask,
    const void *codes, float *out)
{
	const kern_ebq_fns *f = ebq_fns();
	const uint8_t *mk = mask, *c = codes, *cend;
	int32_t q[EBQ_BLOCK + KERN_EBQ_SLACK];
	float ebf;
	uint64_t n, next = 0;

	if (info == NULL ||
	    (info->mode != BELLOWS_EBQ_DENSE &&
		info->mode != BELLOWS_EBQ_SPARSE) ||
	    info->bits < 1 || info->bits > 32 || !(info->step > 0.0) ||
	    !isfinite(info->step) || !isfinite(info->eb) ||
	    info->n > BELLOWS_CODEC_MAX_VALUES || info->codes > info->n ||
	    (info->mode == BELLOWS_EBQ_DENSE && info->codes != info->n))
		return BELLOWS_EINVAL;
	n = info->n;
	if ((n > 0 && out == NULL) || (info->codes > 0 && codes == NULL) ||
	    (info->mode == BELLOWS_EBQ_SPARSE && n > 0 && mask == NULL))
		return BELLOWS_EINVAL;
	if (info->mode == BELLOWS_EBQ_SPARSE &&
	    (!padding_clear(mk, n) || bits_set(mk, (n + 7) / 8) != info->codes))
		return BELLOWS_EPROTO;
	if (info->codes > 0 && !padding_clear(c, info->codes * info->bits))
		return BELLOWS_EPROTO;
	ebf = (float)info->eb;
	cend = c + (info->codes * info->bits + 7) / 8;
	/* The vector paths may read whole vectors past a block's codes. */
	memset(q, 0, sizeof q);
	for (uint64_t i = 0; i < n; i += EBQ_BLOCK) {
		uint64_t len = n - i < EBQ_BLOCK ? n - i : EBQ_BLOCK;

		if (info->mode == BELLOWS_EBQ_SPARSE) {
			uint64_t k = bits_set(mk + i / 8, (len + 7) / 8);

			kern_ebq_unpack(c, cend, info->bits, next, k, q);
			f->dequant(q, len, info->step, ebf, out + i,
			    mk + i / 8);
			next += k;
		} else {
			kern_ebq_unpack(c, cend, info->bits, i, len, q);
			f->dequant(q, len, info->step, ebf, out + i, NULL);
		}
	}
	return 0;
}

int
bellows_ebq_decode(const void *msg, size_t bytes, float *out, uint64_t n,
    bellows_ebq *ctx)
{
	const uint8_t *m = msg, *p;
	bellows_ebq_info in;
	int rc;

	if (msg == NULL || (n > 0 && out == NULL))
		return BELLOWS_EINVAL;
	rc = bellows_ebq_info_read(msg, bytes, &in);
	if (rc != 0)
		return rc;
	if (in.n != n)
		return BELLOWS_EMISMATCH;
	p = m + BELLOWS_EBQ_HEADER_BYTES;
	if (in.zstd) {
#ifdef BELLOWS_HAVE_ZSTD
		size_t plain = (size_t)(in.mask_bytes + in.codes_bytes), z;

		if (ctx == NULL || plain > ctx->cap)
			return BELLOWS_EINVAL;
		z = ZSTD_decompressDCtx(ctx->dctx, ctx->buf, plain, p,
		    (size_t)in.payload_bytes);
		if (ZSTD_isError(z) || z != plain)
			return BELLOWS_EPROTO;
		p = ctx->buf;
#else
		(void)ctx;
		return BELLOWS_ENOTSUP;
#endif
	}
	if (in.mode == BELLOWS_EBQ_RAW) {
		if (n > 0)
			memcpy(out, p, (size_t)n * 4);
		return 0;
	}
	return bellows_ebq_decode_parts(&in, p, p + in.mask_bytes, out);
}

int
bellows_ebq_new(uint64_t max_n, bellows_ebq **ret_ctx)
{
#ifdef BELLOWS_HAVE_ZSTD
	bellows_ebq *c;

	if (ret_ctx == NULL || max_n > BELLOWS_CODEC_MAX_VALUES)
		return BELLOWS_EINVAL;
	c = calloc(1, sizeof *c);
	if (c == NULL)
		return BELLOWS_ENOMEM;
	c->max_n = max_n;
	/* The larger of a payload (at most 4 n) and its compressed bound. */
	c->cap = ZSTD_compressBound((size_t)max_n * 4);
	c->buf = malloc(c->cap > 0 ? c->cap : 1);
	c->cctx = ZSTD_createCCtx();
	c->dctx = ZSTD_createDCtx();
	if (c->buf == NULL || c->cctx == NULL || c->dctx == NULL) {
		bellows_ebq_destroy(&c);
		return BELLOWS_ENOMEM;
	}
	*ret_ctx = c;
	return 0;
#else
	if (ret_ctx == NULL || max_n > BELLOWS_CODEC_MAX_VALUES)
		return BELLOWS_EINVAL;
	return BELLOWS_ENOTSUP;
#endif
}

void
bellows_ebq_destroy(bellows_ebq **ctx)
{
	if (ctx == NULL || *ctx == NULL)
		return;
#ifdef BELLOWS_HAVE_ZSTD
	ZSTD_freeCCtx((*ctx)->cctx);
	ZSTD_freeDCtx((*ctx)->dctx);
#endif
	free((*ctx)->buf);
	free(*ctx);
	*ctx = NULL;
}

/* ---- The CUDA twin --------------------------------------------------- */

int
bellows_ebq_cuda_available(void)
{
#ifdef KERN_HAVE_CUDA
	return kern_cuda_codec_available();
#else
	return 0;
#endif
}

size_t
bellows_ebq_cuda_scratch_bytes(uint64_t n)
{
	if (n > BELLOWS_CODEC_MAX_VALUES)
		return 0;
#ifdef KERN_HAVE_CUDA
	return (kern_cuda_ebq_scratch_bytes(n) + 7) / 8 * 8 +
	    EBQ_CUDA_WORDS * 8;
#else
	return 0;
#endif
}

#ifdef KERN_HAVE_CUDA
/* Whether scratch is usable for n values. */
static int
scratch_ok(const void *scratch, size_t bytes, uint64_t n)
{
	return scratch != NULL && (uintptr_t)scratch % 8 == 0 &&
	    bytes >= bellows_ebq_cuda_scratch_bytes(n);
}

#endif

int
bellows_ebq_plan_cuda(const float *x, uint64_t n, double eb, int flags,
    void *scratch, size_t scratch_bytes, void *stream,
    bellows_ebq_info *ret_info)
{
	ebq_src s = { NULL, x, n, scratch, stream };

	if (!plan_args_ok(x, n, eb, flags, ret_info))
		return BELLOWS_EINVAL;
#ifdef KERN_HAVE_CUDA
	if (!scratch_ok(scratch, scratch_bytes, n))
		return BELLOWS_EINVAL;
	return plan_src(&s, eb, flags, ret_info);
#else
	(void)s;
	(void)scratch_bytes;
	return BELLOWS_ENOTSUP;
#endif
}

/* The checks bellows_ebq_encode_parts and _decode_parts share: a dense or
 * sparse info whose fields are in range. */
static int
parts_info_ok(const bellows_ebq_info *info)
{
	return info != NULL &&
	    (info->mode == BELLOWS_EBQ_DENSE ||
		info->mode == BELLOWS_EBQ_SPARSE) &&
	    info->bits >= 1 && info->bits <= 32 && info->step > 0.0 &&
	    isfinite(info->step) && isfinite(info->eb) &&
	    info->n <= BELLOWS_CODEC_MAX_VALUES && info->codes <= info->n &&
	    (info->mode == BELLOWS_EBQ_SPARSE || info->codes == info->n) &&
	    info->codes_bytes == (info->codes * info->bits + 7) / 8 &&
	    (info->mode == BELLOWS_EBQ_DENSE ||
		info->mask_bytes == (info->n + 7) / 8);
}

int
bellows_ebq_encode_parts_cuda(const float *x, const bellows_ebq_info *info,
    void *mask, void *codes, void *scratch, size_t scratch_bytes, void *stream,
    uint64_t *ret_nonzero)
{
	int sparse;

	if (!parts_info_ok(info))
		return BELLOWS_EINVAL;
	sparse = info->mode == BELLOWS_EBQ_SPARSE;
	if ((info->n > 0 && x == NULL) ||
	    (info->codes_bytes > 0 && codes == NULL) ||
	    (sparse && info->n > 0 && mask == NULL))
		return BELLOWS_EINVAL;
#ifdef KERN_HAVE_CUDA
	if (!scratch_ok(scratch, scratch_bytes, info->n))
		return BELLOWS_EINVAL;
	if (info->n == 0) {
		if (ret_nonzero != NULL)
			*ret_nonzero = 0;
		return 0;
	}
	{
		unsigned long long *w = cuda_words(scratch, info->n) + 2;
		unsigned long long counts[2] = { 0, 0 };
		int rc = kern_cuda_ebq_clear(w, sizeof counts, stream);

		if (rc == 0)
			rc = kern_cuda_ebq_encode(x, info->n, info->step,
			    info->eb, info->bits, sparse, mask, codes,
			    info->codes_bytes, scratch, w, stream);
		if (rc == 0)
			rc = kern_cuda_ebq_fetch(counts, w, sizeof counts,
			    stream);
		if (rc != 0)
			return kern_cuda_codec_rc(rc);
		if (counts[1] > 0)
			return BELLOWS_ELIMIT;
		if (ret_nonzero != NULL)
			*ret_nonzero = counts[0];
		return 0;
	}
#else
	(void)scratch;
	(void)scratch_bytes;
	(void)stream;
	(void)ret_nonzero;
	return BELLOWS_ENOTSUP;
#endif
}

int
bellows_ebq_decode_parts_cuda(const bellows_ebq_info *info, const void *mask,
    const void *codes, float *out, void *scratch, size_t scratch_bytes,
    void *stream)
{
	int sparse;

	if (!parts_info_ok(info))
		return BELLOWS_EINVAL;
	sparse = info->mode == BELLOWS_EBQ_SPARSE;
	if ((info->n > 0 && out == NULL) ||
	    (info->codes > 0 && codes == NULL) ||
	    (sparse && info->n > 0 && mask == NULL))
		return BELLOWS_EINVAL;
#ifdef KERN_HAVE_CUDA
	if (!scratch_ok(scratch, scratch_bytes, info->n))
		return BELLOWS_EINVAL;
	if (info->n == 0)
		return 0;
	if (sparse) {
		uint64_t set = 0;
		int rc = kern_cuda_ebq_mask_bits(mask, info->n, scratch, &set,
		    stream);

		if (rc != 0)
			return kern_cuda_codec_rc(rc);
		if (set != info->codes)
			return BELLOWS_EPROTO;
	}
	return kern_cuda_codec_rc(kern_cuda_ebq_decode(mask, codes,
	    info->codes_bytes, info->n, info->step, info->eb, info->bits,
	    sparse, scratch, out, stream));
#else
	(void)scratch;
	(void)scratch_bytes;
	(void)stream;
	return BELLOWS_ENOTSUP;
#endif
}
