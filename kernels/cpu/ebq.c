/* ebq - the scalar kernels of the error-bounded quantiser, its bit packing
 * and the choice of ISA; see ebq.h for the arithmetic every path follows
 * bit for bit. */
#include "ebq.h"

#include <math.h>
#include <string.h>

#include "../kernels.h"
#include "stats.h"

uint32_t
kern_ebq_amax_scalar(const float *x, uint64_t n)
{
	uint32_t m = 0;

	for (uint64_t i = 0; i < n; i++) {
		uint32_t u;

		memcpy(&u, x + i, 4);
		u &= 0x7fffffffu;
		m = u > m ? u : m;
	}
	return m;
}

uint64_t
kern_ebq_count_scalar(const float *x, uint64_t n, uint32_t h)
{
	uint64_t c = 0;

	for (uint64_t i = 0; i < n; i++) {
		uint32_t u;

		memcpy(&u, x + i, 4);
		c += (u & 0x7fffffffu) > h;
	}
	return c;
}

uint64_t
kern_ebq_quant_scalar(const float *x, uint64_t n, double step, double eb,
    int32_t *q)
{
	float ebf = (float)eb;
	uint64_t nz = 0;
	int bad = 0;

	for (uint64_t i = 0; i < n; i++) {
		double xd = (double)x[i];
		double qd = nearbyint(xd / step);
		float rec = (float)(qd * step);

		if (fabsf(rec) <= ebf)
			rec = 0.0f;
		bad |= fabs(xd - (double)rec) > eb;
		nz += rec != 0.0f;
		q[i] = (int32_t)qd;
	}
	return bad ? UINT64_MAX : nz;
}

void
kern_ebq_dequant_scalar(const int32_t *q, uint64_t n, double step, float ebf,
    float *out)
{
	for (uint64_t i = 0; i < n; i++) {
		float v = (float)((double)q[i] * step);

		out[i] = fabsf(v) <= ebf ? 0.0f : v;
	}
}

/* Stores the low 32 bits of v little-endian. */
static inline void
put32(uint8_t *p, uint64_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

void
kern_ebq_pack(kern_ebq_packer *p, const int32_t *q, uint64_t n)
{
	unsigned b = p->bits, used = p->used;
	uint64_t m = (UINT64_C(1) << b) - 1, acc = p->acc;
	uint8_t *o = p->out;

	/* Whole bytes per code and nothing pending: plain narrowing stores
	 * (little-endian int8, int16 or int32). */
	if (used == 0 && (b == 8 || b == 16 || b == 32)) {
		for (uint64_t i = 0; i < n; i++)
			for (unsigned k = 0; k < b / 8; k++)
				o[i * (b / 8) + k] = (uint8_t)((uint32_t)q[i] >>
				    (8 * k));
		p->out = o + n * (b / 8);
		return;
	}
	for (uint64_t i = 0; i < n; i++) {
		acc |= ((uint64_t)(uint32_t)q[i] & m) << used;
		used += b;
		if (used >= 32) {
			put32(o, acc);
			o += 4;
			acc >>= 32;
			used -= 32;
		}
	}
	p->out = o;
	p->acc = acc;
	p->used = used;
}

void
kern_ebq_pack_sparse(kern_ebq_packer *p, const int32_t *q, uint64_t n,
    uint8_t *mask)
{
	unsigned b = p->bits, used = p->used;
	uint64_t m = (UINT64_C(1) << b) - 1, acc = p->acc;
	uint8_t *o = p->out;

	for (uint64_t i = 0; i < n; i += 8) {
		uint64_t len = n - i < 8 ? n - i : 8;
		unsigned byte = 0;

		for (uint64_t j = 0; j < len; j++) {
			uint32_t c = (uint32_t)q[i + j];
			unsigned nz = c != 0;

			byte |= nz << j;
			/* A zero code adds no bits: branch-free append. */
			acc |= ((uint64_t)c & m) << used;
			used += b & (0u - nz);
			if (used >= 32) {
				put32(o, acc);
				o += 4;
				acc >>= 32;
				used -= 32;
			}
		}
		mask[i / 8] = (uint8_t)byte;
	}
	p->out = o;
	p->acc = acc;
	p->used = used;
}

void
kern_ebq_pack_flush(kern_ebq_packer *p)
{
	while (p->used > 0) {
		*p->out++ = (uint8_t)p->acc;
		p->acc >>= 8;
		p->used = p->used > 8 ? p->used - 8 : 0;
	}
	p->acc = 0;
}

/* A reader of the bit stream that loads one byte at a time, so it never
 * reads a byte the codes do not reach. */
typedef struct ebq_reader {
	const uint8_t *in; /* next byte to load */
	uint64_t acc;      /* loaded bits not consumed, the oldest lowest */
	unsigned have;     /* bits in acc */
} ebq_reader;

static void
reader_seek(ebq_reader *r, const uint8_t *in, uint64_t bit)
{
	r->in = in + bit / 8;
	r->acc = 0;
	r->have = 0;
	if (bit % 8) {
		r->acc = *r->in++ >> (bit % 8);
		r->have = 8 - (unsigned)(bit % 8);
	}
}

static inline int32_t
reader_get(ebq_reader *r, unsigned b)
{
	uint64_t v;

	while (r->have < b) {
		r->acc |= (uint64_t)*r->in++ << r->have;
		r->have += 8;
	}
	v = r->acc & ((UINT64_C(1) << b) - 1);
	r->acc >>= b;
	r->have -= b;
	/* Sign-extend from b bits. */
	return (int32_t)((int64_t)(v << (64 - b)) >> (64 - b));
}

void
kern_ebq_unpack(const uint8_t *in, unsigned bits, uint64_t first, uint64_t n,
    int32_t *q)
{
	ebq_reader r;

	if (bits == 8 || bits == 16 || bits == 32) {
		const uint8_t *p = in + first * (bits / 8);

		for (uint64_t i = 0; i < n; i++) {
			uint32_t u = 0;

			for (unsigned k = 0; k < bits / 8; k++)
				u |= (uint32_t)p[i * (bits / 8) + k] << (8 * k);
			q[i] = bits == 8 ? (int32_t)(int8_t)u
			    : bits == 16 ? (int32_t)(int16_t)u
					 : (int32_t)u;
		}
		return;
	}
	reader_seek(&r, in, first * bits);
	for (uint64_t i = 0; i < n; i++)
		q[i] = reader_get(&r, bits);
}

void
kern_ebq_unpack_sparse(const uint8_t *mask, const uint8_t *in, unsigned bits,
    uint64_t first, uint64_t n, uint64_t *next, int32_t *q)
{
	ebq_reader r;

	reader_seek(&r, in, *next * bits);
	for (uint64_t i = 0; i < n; i++) {
		uint64_t k = first + i;

		if ((mask[k / 8] >> (k % 8)) & 1) {
			q[i] = reader_get(&r, bits);
			(*next)++;
		} else {
			q[i] = 0;
		}
	}
}

static const kern_ebq_fns ebq_scalar = {
	.amax = kern_ebq_amax_scalar,
	.count = kern_ebq_count_scalar,
	.quant = kern_ebq_quant_scalar,
	.dequant = kern_ebq_dequant_scalar,
};

const kern_ebq_fns *
kern_ebq_get(int isa)
{
	if (isa == KERN_ISA_AUTO)
		isa = kern_cpu_isa_best();
	if (!kern_cpu_isa_supported(isa))
		return NULL;
	switch (isa) {
#ifdef KERN_HAVE_X86
	case KERN_ISA_AVX2:
		return &kern_ebq_avx2;
	case KERN_ISA_AVX512:
		return &kern_ebq_avx512;
#endif
	default:
		return &ebq_scalar;
	}
}
