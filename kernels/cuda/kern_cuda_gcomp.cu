/* kern_cuda_gcomp - the CUDA twin of the GComp codec
 * (kernels/cpu/kern_gcomp.c).
 *
 * Levels are per value, one thread each, in double as on the CPU (the file
 * is compiled with -fmad=false and IEEE division and square root, so delta
 * rounds as the CPU's does). Sizes: one block per chunk adds up its three
 * segments. Encode and decode: one thread per chunk, since a chunk is one
 * bitstream whose bit offsets depend on every code before; chunks of 8,192
 * values give a tensor of n values n / 8,192 threads. The bytes are the
 * CPU encoder's; the decoder's checks are its (headers are checked by the
 * host, kern_cuda_gcomp_host.c, before the launch).
 */
#include <cmath>
#include <cstdint>

#include <cuda_runtime.h>

#include "../element.h"
#include "kern_cuda_gcomp_launch.h"

namespace {

__constant__ unsigned d_mbits[3] = { 23, 10, 7 };
__constant__ unsigned d_trunc[3][4] = {
	{ 0, 6, 12, 18 },
	{ 0, 3, 6, 9 },
	{ 0, 2, 4, 6 },
};

/* A value split as the CPU's gcomp_split does. */
struct val {
	unsigned sym;  /* exponent symbol */
	unsigned sign; /* 0 or 1 */
	uint32_t man;  /* mantissa bits of the dtype */
};

__device__ __forceinline__ val
split(const void *x, uint64_t i, int dtype)
{
	val v;

	if (dtype == KERN_F32) {
		uint32_t u = ((const uint32_t *)x)[i];

		v.sym = (u >> 23) & 0xffu;
		v.sign = u >> 31;
		v.man = u & 0x7fffffu;
		return v;
	}
	uint16_t h = ((const uint16_t *)x)[i];

	v.sign = h >> 15;
	if (dtype == KERN_BF16) {
		v.sym = (h >> 7) & 0xffu;
		v.man = h & 0x7fu;
		return v;
	}
	unsigned e = (h >> 10) & 0x1fu;

	v.man = h & 0x3ffu;
	if (e == 0x1f) {
		v.sym = 255;
	} else if (e != 0) {
		v.sym = e + 112;
	} else if (v.man == 0) {
		v.sym = 0;
	} else {
		v.sym = 113;
		while ((v.man & 0x400u) == 0) {
			v.man <<= 1;
			v.sym--;
		}
		v.man &= 0x3ffu;
	}
	return v;
}

__device__ __forceinline__ unsigned
level_of(const uint8_t *levels, int level, uint64_t i, unsigned sym)
{
	unsigned l = levels != nullptr ? levels[i] : (unsigned)level;

	return sym == 255 || l > 3 ? 0 : l;
}

/* Most-significant-bit-first writer, byte by byte. */
struct bw {
	uint8_t *p;   /* next byte */
	uint64_t acc; /* pending bits in the low n */
	unsigned n;   /* pending bit count, < 8 between puts */
};

__device__ __forceinline__ void
put(bw &w, uint32_t v, unsigned len)
{
	w.acc = (w.acc << len) | v;
	w.n += len;
	while (w.n >= 8) {
		w.n -= 8;
		*w.p++ = (uint8_t)(w.acc >> w.n);
	}
}

__device__ __forceinline__ void
flush(bw &w)
{
	if (w.n > 0)
		*w.p++ = (uint8_t)(w.acc << (8 - w.n));
	w.n = 0;
}

/* Reader over one segment: zero bits past its end, bits used counted. */
struct br {
	const uint8_t *p; /* segment start */
	uint64_t bytes;   /* segment bytes */
	uint64_t pos;     /* bit position */
};

__device__ __forceinline__ uint32_t
get(br &r, unsigned len)
{
	uint32_t v = 0;

	for (unsigned k = 0; k < len; k++) {
		uint64_t b = r.pos >> 3;
		unsigned bit = b < r.bytes ? (r.p[b] >> (7 - (r.pos & 7))) & 1u
					   : 0u;

		v = v << 1 | bit;
		r.pos++;
	}
	return v;
}

__device__ __forceinline__ uint32_t
peek(const br &r, unsigned len)
{
	br c = r;

	return get(c, len);
}

__device__ __forceinline__ void
put_le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

__device__ __forceinline__ void
put_le64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

__device__ __forceinline__ uint32_t
get_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	    (uint32_t)p[3] << 24;
}

__device__ __forceinline__ uint64_t
get_le64(const uint8_t *p)
{
	return (uint64_t)get_le32(p) | (uint64_t)get_le32(p + 4) << 32;
}

__device__ double
delta(const kern_gcomp_opt &o, uint64_t i, double g, double c1, double c2)
{
	double th = o.param[i], eta = o.lr, lam = o.weight_decay;
	double mu = o.momentum, b = o.buf != nullptr ? o.buf[i] : 0.0;

	switch (o.kind) {
	case KERN_GCOMP_MOMENTUM:
		if (o.buf == nullptr)
			break;
		return (th - eta * mu * b) / (eta * (1.0 - o.dampening) * g) -
		    lam * th / g;
	case KERN_GCOMP_NESTEROV:
		return ((1.0 - eta * lam * (1.0 + mu)) * th -
			   eta * mu * mu * b) /
		    (eta * (1.0 + mu) * g);
	case KERN_GCOMP_ADAM:
	case KERN_GCOMP_ADAMW: {
		double b1 = o.beta1, b2 = o.beta2;
		double m = o.exp_avg != nullptr ? o.exp_avg[i] : 0.0;
		double v = o.exp_avg_sq != nullptr ? o.exp_avg_sq[i] : 0.0;
		double gp = o.kind == KERN_GCOMP_ADAM ? g + lam * th : g;
		double vt = b2 * v + (1.0 - b2) * gp * gp;
		double vh = vt / c2;
		double num = th * (sqrt(vh) + o.eps) * c1;

		if (o.kind == KERN_GCOMP_ADAMW)
			return (num * (1.0 - eta * lam) - eta * b1 * m) /
			    (eta * (1.0 - b1) * g);
		return (num - eta * b1 * m) / (eta * (1.0 - b1) * g) -
		    lam * th / g;
	}
	default:
		break;
	}
	return th / (eta * g) - lam * th / g;
}

__global__ void
levels_kernel(kern_gcomp_opt o, double c1, double c2, int dtype,
    const void *grad, uint64_t n, int max_level, uint8_t *levels)
{
	double scale = o.grad_scale != 0.0 ? o.grad_scale : 1.0;

	for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
	     i < n; i += (uint64_t)gridDim.x * blockDim.x) {
		double g = (double)kern_load(grad, i, dtype) * scale;
		int l = 0;

		if (g != 0.0 && isfinite(g)) {
			double d = fabs(delta(o, i, g, c1, c2));

			if (isfinite(d))
				for (l = max_level; l > 0 &&
				     !(d > ldexp(1.0, (int)d_trunc[dtype][l]));
				     l--)
					;
		}
		levels[i] = (uint8_t)l;
	}
}

__global__ void
sizes_kernel(const kern_gcomp_table *t, int dtype, const void *x, uint64_t n,
    int level, const uint8_t *levels, uint32_t *sizes)
{
	__shared__ unsigned long long s[3][256];
	uint64_t i0 = (uint64_t)blockIdx.x * KERN_GCOMP_CHUNK;
	uint64_t m = n - i0 < KERN_GCOMP_CHUNK ? n - i0 : KERN_GCOMP_CHUNK;
	unsigned long long eb = 0, lb = 0, mb = 0;

	for (uint64_t i = i0 + threadIdx.x; i < i0 + m; i += blockDim.x) {
		val v = split(x, i, dtype);

		eb += t->enc_len[v.sym];
		if (v.sym == 0)
			continue;
		lb += 2;
		mb += 1 + d_mbits[dtype] -
		    d_trunc[dtype][level_of(levels, level, i, v.sym)];
	}
	s[0][threadIdx.x] = eb;
	s[1][threadIdx.x] = lb;
	s[2][threadIdx.x] = mb;
	__syncthreads();
	for (unsigned k = blockDim.x / 2; k > 0; k /= 2) {
		if (threadIdx.x < k)
			for (int j = 0; j < 3; j++)
				s[j][threadIdx.x] += s[j][threadIdx.x + k];
		__syncthreads();
	}
	if (threadIdx.x == 0)
		for (int j = 0; j < 3; j++)
			sizes[3 * blockIdx.x + j] = (uint32_t)s[j][0];
}

__global__ void
encode_kernel(const kern_gcomp_table *t, int dtype, const void *x,
    uint64_t n, int level, const uint8_t *levels, const uint32_t *sizes,
    const uint64_t *offsets, uint64_t chunks, uint8_t *out)
{
	uint64_t c = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;

	if (c >= chunks)
		return;
	uint64_t i0 = c * KERN_GCOMP_CHUNK;
	uint64_t m = n - i0 < KERN_GCOMP_CHUNK ? n - i0 : KERN_GCOMP_CHUNK;
	uint64_t eB = (sizes[3 * c] + 7) / 8, lB = (sizes[3 * c + 1] + 7) / 8;
	uint8_t *h = out + KERN_GCOMP_HEADER + c * KERN_GCOMP_CHUNK_HEADER;
	bw we = { out + offsets[c], 0, 0 };
	bw wl = { out + offsets[c] + eB, 0, 0 };
	bw wm = { out + offsets[c] + eB + lB, 0, 0 };

	put_le64(h, offsets[c]);
	put_le32(h + 8, (uint32_t)m);
	put_le32(h + 12, sizes[3 * c]);
	put_le32(h + 16, sizes[3 * c + 1]);
	put_le32(h + 20, sizes[3 * c + 2]);
	for (uint64_t i = i0; i < i0 + m; i++) {
		val v = split(x, i, dtype);
		unsigned l, keep;

		put(we, t->enc_code[v.sym], t->enc_len[v.sym]);
		if (v.sym == 0)
			continue;
		l = level_of(levels, level, i, v.sym);
		put(wl, l, 2);
		keep = d_mbits[dtype] - d_trunc[dtype][l];
		put(wm, v.sign << keep | v.man >> d_trunc[dtype][l], 1 + keep);
	}
	flush(we);
	flush(wl);
	flush(wm);
}

__device__ __forceinline__ bool
store(void *out, uint64_t i, int dtype, int add, unsigned sym, unsigned sign,
    uint32_t man)
{
	if (dtype == KERN_F32) {
		uint32_t u = sym == 0 ? 0 : sign << 31 | sym << 23 | man;
		float f = __uint_as_float(u);

		if (add)
			((float *)out)[i] = __fadd_rn(((float *)out)[i], f);
		else
			((float *)out)[i] = f;
		return true;
	}
	uint16_t hv;

	if (dtype == KERN_BF16) {
		hv = sym == 0 ? 0 : (uint16_t)(sign << 15 | sym << 7 | man);
	} else if (sym == 0) {
		hv = 0;
	} else if (sym == 255) {
		hv = (uint16_t)(sign << 15 | 0x7c00u | man);
	} else if (sym >= 113 && sym <= 142) {
		hv = (uint16_t)(sign << 15 | (sym - 112) << 10 | man);
	} else if (sym >= 103 && sym < 113) {
		hv = (uint16_t)(sign << 15 | (man | 0x400u) >> (113 - sym));
	} else {
		return false;
	}
	((uint16_t *)out)[i] = hv;
	return true;
}

__global__ void
decode_kernel(const kern_gcomp_table *t, const uint8_t *in, uint64_t chunks,
    int dtype, void *out, int add, uint32_t *status)
{
	uint64_t c = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;

	if (c >= chunks)
		return;
	const uint8_t *h = in + KERN_GCOMP_HEADER + c * KERN_GCOMP_CHUNK_HEADER;
	uint64_t off = get_le64(h), m = get_le32(h + 8);
	uint64_t eb = get_le32(h + 12), lb = get_le32(h + 16);
	uint64_t mbits = get_le32(h + 20);
	uint64_t eB = (eb + 7) / 8, lB = (lb + 7) / 8, mB = (mbits + 7) / 8;
	/* Values before this chunk: chunks before it are full (host check). */
	uint64_t done = c * KERN_GCOMP_CHUNK;
	unsigned maxb = t->h.max_bits, mb = d_mbits[dtype];
	br re = { in + off, eB, 0 }, rl = { in + off + eB, lB, 0 };
	br rm = { in + off + eB + lB, mB, 0 };

	for (uint64_t i = done; i < done + m; i++) {
		unsigned e = t->lut[peek(re, maxb)], sym = e >> 4, l, keep;
		uint32_t v;

		if (sym == KERN_GCOMP_BAD) {
			status[c] = 1;
			return;
		}
		re.pos += e & 15u;
		if (sym == KERN_GCOMP_ESC)
			sym = get(re, 8);
		if (sym == 0) {
			store(out, i, dtype, add, 0, 0, 0);
			continue;
		}
		l = get(rl, 2);
		if (sym == 255)
			l = 0;
		keep = mb - d_trunc[dtype][l];
		v = get(rm, 1 + keep);
		if (!store(out, i, dtype, add, sym, v >> keep,
			(v & ((1u << keep) - 1)) << d_trunc[dtype][l])) {
			status[c] = 2;
			return;
		}
	}
	status[c] = re.pos != eb || rl.pos != lb || rm.pos != mbits ? 3 : 0;
}

} // namespace

extern "C" int
kern_cuda_gcomp_levels(const kern_gcomp_opt *o, int dtype, const void *grad,
    uint64_t n, int max_level, uint8_t *levels, void *stream)
{
	cudaStream_t s = static_cast<cudaStream_t>(stream);
	uint64_t blocks = (n + KERN_CUDA_GCOMP_THREADS - 1) /
	    KERN_CUDA_GCOMP_THREADS;

	/* The bias corrections on the host, with the CPU's pow. */
	double c1 = 1.0 - pow(o->beta1, (double)o->step);
	double c2 = 1.0 - pow(o->beta2, (double)o->step);

	if (n == 0)
		return 0;
	levels_kernel<<<(unsigned)(blocks < 4096 ? blocks : 4096),
	    KERN_CUDA_GCOMP_THREADS, 0, s>>>(*o, c1, c2, dtype, grad, n,
	    max_level, levels);
	return (int)cudaGetLastError();
}

extern "C" int
kern_cuda_gcomp_sizes(const kern_gcomp_table *t, int dtype, const void *x,
    uint64_t n, int level, const uint8_t *levels, uint32_t *sizes,
    uint64_t chunks, void *stream)
{
	cudaStream_t s = static_cast<cudaStream_t>(stream);

	if (chunks == 0)
		return 0;
	sizes_kernel<<<(unsigned)chunks, 256, 0, s>>>(t, dtype, x, n, level,
	    levels, sizes);
	return (int)cudaGetLastError();
}

extern "C" int
kern_cuda_gcomp_encode(const kern_gcomp_table *t, int dtype, const void *x,
    uint64_t n, int level, const uint8_t *levels, const uint32_t *sizes,
    const uint64_t *offsets, uint64_t chunks, uint8_t *out, void *stream)
{
	cudaStream_t s = static_cast<cudaStream_t>(stream);

	if (chunks == 0)
		return 0;
	encode_kernel<<<(unsigned)((chunks + 63) / 64), 64, 0, s>>>(t, dtype,
	    x, n, level, levels, sizes, offsets, chunks, out);
	return (int)cudaGetLastError();
}

extern "C" int
kern_cuda_gcomp_decode(const kern_gcomp_table *t, const uint8_t *in,
    uint64_t chunks, int dtype, void *out, int add, uint32_t *status,
    void *stream)
{
	cudaStream_t s = static_cast<cudaStream_t>(stream);

	if (chunks == 0)
		return 0;
	decode_kernel<<<(unsigned)((chunks + 63) / 64), 64, 0, s>>>(t, in,
	    chunks, dtype, out, add, status);
	return (int)cudaGetLastError();
}
