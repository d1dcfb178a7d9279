/* kern_ebq - the scalar kernels of the error-bounded quantiser, its bit packing
 * and the choice of ISA; see kern_ebq.h for the arithmetic every path follows
 * bit for bit. */
#include "kern_ebq.h"

#include <math.h>
#include <string.h>

#include "../kernels.h"
#include "kern_stats.h"

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
    int32_t *q, uint8_t *mask, uint64_t *ret_codes)
{
	float ebf = (float)eb;
	uint64_t nz = 0, k = 0;
	int bad = 0;

	for (uint64_t i = 0; i < n; i += 8) {
		uint64_t len = n - i < 8 ? n - i : 8;
		unsigned byte = 0;

		for (uint64_t j = 0; j < len; j++) {
			double xd = (double)x[i + j];
			double qd = nearbyint(xd / step);
			float rec = (float)(qd * step);
			int32_t c = (int32_t)qd;

			if (fabsf(rec) <= ebf)
				rec = 0.0f;
			bad |= fabs(xd - (double)rec) > eb;
			nz += rec != 0.0f;
			/* Sparse: store always, keep only non-zero codes. */
			q[k] = c;
			if (mask != NULL) {
				byte |= (unsigned)(c != 0) << j;
				k += c != 0;
			} else {
				k++;
			}
		}
		if (mask != NULL)
			mask[i / 8] = (uint8_t)byte;
	}
	*ret_codes = k;
	return bad ? UINT64_MAX : nz;
}

void
kern_ebq_dequant_scalar(const int32_t *q, uint64_t n, double step, float ebf,
    float *out, const uint8_t *mask)
{
	uint64_t k = 0;

	for (uint64_t i = 0; i < n; i++) {
		int32_t c;
		float v;

		if (mask != NULL) {
			unsigned bit = (mask[i / 8] >> (i % 8)) & 1;

			c = bit ? q[k] : 0;
			k += bit;
		} else {
			c = q[i];
		}
		v = (float)((double)c * step);
		out[i] = fabsf(v) <= ebf ? 0.0f : v;
	}
}

/* Stores the 8 bytes of v little-endian (one store on a little-endian
 * host). */
static inline void
put64(uint8_t *p, uint64_t v)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	memcpy(p, &v, 8);
#else
	for (int k = 0; k < 8; k++)
		p[k] = (uint8_t)(v >> (8 * k));
#endif
}

static inline uint64_t
get64(const uint8_t *p)
{
	uint64_t v = 0;

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	memcpy(&v, p, 8);
#else
	for (int k = 0; k < 8; k++)
		v |= (uint64_t)p[k] << (8 * k);
#endif
	return v;
}

void
kern_ebq_pack(kern_ebq_packer *p, const int32_t *q, uint64_t n)
{
	unsigned b = p->bits, used = p->used;
	uint64_t m = (UINT64_C(1) << b) - 1, acc = p->acc, i = 0;
	uint8_t *o = p->out, *end = p->end;

	/* Whole bytes per code and nothing pending: plain narrowing stores
	 * (little-endian int8, int16 or int32). */
	if (used == 0 && (b == 8 || b == 16 || b == 32)) {
		for (i = 0; i < n; i++)
			for (unsigned k = 0; k < b / 8; k++)
				o[i * (b / 8) + k] = (uint8_t)((uint32_t)q[i] >>
				    (8 * k));
		p->out = o + n * (b / 8);
		return;
	}
	/* Branch-free while 8 bytes fit before the end: store the whole
	 * accumulator, advance by its complete bytes (used stays < 8 after,
	 * so used + b <= 39 bits). */
	for (; i < n && end - o >= 8; i++) {
		unsigned adv;

		acc |= ((uint64_t)(uint32_t)q[i] & m) << used;
		used += b;
		put64(o, acc);
		adv = used >> 3; /* <= 4 */
		o += adv;
		acc >>= 8 * adv;
		used &= 7;
	}
	for (; i < n; i++) {
		acc |= ((uint64_t)(uint32_t)q[i] & m) << used;
		used += b;
		while (used >= 8) {
			*o++ = (uint8_t)acc;
			acc >>= 8;
			used -= 8;
		}
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

void
kern_ebq_unpack(const uint8_t *in, const uint8_t *end, unsigned bits,
    uint64_t first, uint64_t n, int32_t *q)
{
	uint64_t m = (UINT64_C(1) << bits) - 1, bit = first * bits, i = 0;

	if (bits == 8 || bits == 16 || bits == 32) {
		const uint8_t *p = in + first * (bits / 8);

		for (; i < n; i++) {
			uint32_t u = 0;

			for (unsigned k = 0; k < bits / 8; k++)
				u |= (uint32_t)p[i * (bits / 8) + k] << (8 * k);
			q[i] = bits == 8 ? (int32_t)(int8_t)u
			    : bits == 16 ? (int32_t)(int16_t)u
					 : (int32_t)u;
		}
		return;
	}
	for (; i < n; i++) {
		const uint8_t *p = in + bit / 8;
		uint64_t v;

		if (end - p >= 8) {
			v = get64(p);
		} else {
			v = 0;
			for (int k = 0; k < end - p; k++)
				v |= (uint64_t)p[k] << (8 * k);
		}
		v = (v >> (bit % 8)) & m;
		/* Sign-extend from `bits` bits. */
		q[i] = (int32_t)((int64_t)(v << (64 - bits)) >> (64 - bits));
		bit += bits;
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
