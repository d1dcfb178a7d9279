/* codec - the scalar 1-bit and 2-bit quantisers and the choice of ISA; see
 * codec.h for the semantics every path follows bit for bit. */
#include "codec.h"

#include <string.h>

#include "../kernels.h"
#include "stats.h"

uint64_t
kern_codec_bytes(int bits, uint64_t n)
{
	return (n * (uint64_t)bits + 31) / 32 * 4;
}

void
kern_codec_pad(int bits, uint64_t n, uint8_t *out)
{
	uint64_t used = (n * (uint64_t)bits + 7) / 8;
	uint64_t all = kern_codec_bytes(bits, n);

	if (all > used)
		memset(out + used, 0, all - used);
}

void
kern_codec_enc1_scalar(const float *g, float *res, uint64_t n, float t,
    uint8_t *out)
{
	for (uint64_t i = 0; i < n; i += 8) {
		uint64_t m = n - i < 8 ? n - i : 8;
		unsigned byte = 0;

		for (uint64_t j = 0; j < m; j++) {
			float r = res[i + j] + g[i + j];
			int bit = r > t;

			res[i + j] = r + (bit ? -1.0f : 1.0f);
			byte |= (unsigned)bit << j;
		}
		out[i / 8] = (uint8_t)byte;
	}
}

void
kern_codec_enc2_scalar(const float *g, float *res, uint64_t n, float t,
    uint8_t *out)
{
	for (uint64_t i = 0; i < n; i += 4) {
		uint64_t m = n - i < 4 ? n - i : 4;
		unsigned byte = 0;

		for (uint64_t j = 0; j < m; j++) {
			float r = res[i + j] + g[i + j];
			int pos = r >= t;
			int neg = r <= -t;

			res[i + j] = (r - (pos ? t : 0.0f)) + (neg ? t : 0.0f);
			byte |= (unsigned)(pos ? 3 : neg ? 2 : 0) << (2 * j);
		}
		out[i / 4] = (uint8_t)byte;
	}
}

void
kern_codec_dec1_scalar(const uint8_t *in, uint64_t n, float t, float *out,
    int add)
{
	for (uint64_t i = 0; i < n; i++) {
		float v = (in[i / 8] >> (i % 8)) & 1 ? 1.0f : -1.0f;

		out[i] = add ? out[i] + v : v;
	}
}

void
kern_codec_dec2_scalar(const uint8_t *in, uint64_t n, float t, float *out,
    int add)
{
	for (uint64_t i = 0; i < n; i++) {
		unsigned c = (in[i / 4] >> (2 * (i % 4))) & 3;
		float v = c == 3 ? t : c == 2 ? -t : 0.0f;

		out[i] = add ? out[i] + v : v;
	}
}

static void
enc1(const float *g, float *res, uint64_t n, float t, uint8_t *out)
{
	kern_codec_enc1_scalar(g, res, n, t, out);
	kern_codec_pad(1, n, out);
}

static void
enc2(const float *g, float *res, uint64_t n, float t, uint8_t *out)
{
	kern_codec_enc2_scalar(g, res, n, t, out);
	kern_codec_pad(2, n, out);
}

static const kern_codec_fns codec_scalar = {
	.enc1 = enc1,
	.dec1 = kern_codec_dec1_scalar,
	.enc2 = enc2,
	.dec2 = kern_codec_dec2_scalar,
};

const kern_codec_fns *
kern_codec_get(int isa)
{
	if (isa == KERN_ISA_AUTO)
		isa = kern_cpu_isa_best();
	if (!kern_cpu_isa_supported(isa))
		return NULL;
	switch (isa) {
#ifdef KERN_HAVE_X86
	case KERN_ISA_AVX2:
		return &kern_codec_avx2;
	case KERN_ISA_AVX512:
		return &kern_codec_avx512;
#endif
	default:
		return &codec_scalar;
	}
}
