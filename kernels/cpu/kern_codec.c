/* kern_codec - the scalar 1-bit and 2-bit quantisers and the choice of ISA; see
 * kern_codec.h for the semantics every path follows bit for bit. */
#include "kern_codec.h"

#include <string.h>

#include "../kernels.h"
#include "kern_stats.h"

/* kern_codec_spread8[x]: the 8 bits of x moved to the even bits of a
 * 16-bit word (bit b to bit 2b): how mask bits become 2-bit codes. */
const uint16_t kern_codec_spread8[256] = {
	0x0000,
	0x0001,
	0x0004,
	0x0005,
	0x0010,
	0x0011,
	0x0014,
	0x0015,
	0x0040,
	0x0041,
	0x0044,
	0x0045,
	0x0050,
	0x0051,
	0x0054,
	0x0055,
	0x0100,
	0x0101,
	0x0104,
	0x0105,
	0x0110,
	0x0111,
	0x0114,
	0x0115,
	0x0140,
	0x0141,
	0x0144,
	0x0145,
	0x0150,
	0x0151,
	0x0154,
	0x0155,
	0x0400,
	0x0401,
	0x0404,
	0x0405,
	0x0410,
	0x0411,
	0x0414,
	0x0415,
	0x0440,
	0x0441,
	0x0444,
	0x0445,
	0x0450,
	0x0451,
	0x0454,
	0x0455,
	0x0500,
	0x0501,
	0x0504,
	0x0505,
	0x0510,
	0x0511,
	0x0514,
	0x0515,
	0x0540,
	0x0541,
	0x0544,
	0x0545,
	0x0550,
	0x0551,
	0x0554,
	0x0555,
	0x1000,
	0x1001,
	0x1004,
	0x1005,
	0x1010,
	0x1011,
	0x1014,
	0x1015,
	0x1040,
	0x1041,
	0x1044,
	0x1045,
	0x1050,
	0x1051,
	0x1054,
	0x1055,
	0x1100,
	0x1101,
	0x1104,
	0x1105,
	0x1110,
	0x1111,
	0x1114,
	0x1115,
	0x1140,
	0x1141,
	0x1144,
	0x1145,
	0x1150,
	0x1151,
	0x1154,
	0x1155,
	0x1400,
	0x1401,
	0x1404,
	0x1405,
	0x1410,
	0x1411,
	0x1414,
	0x1415,
	0x1440,
	0x1441,
	0x1444,
	0x1445,
	0x1450,
	0x1451,
	0x1454,
	0x1455,
	0x1500,
	0x1501,
	0x1504,
	0x1505,
	0x1510,
	0x1511,
	0x1514,
	0x1515,
	0x1540,
	0x1541,
	0x1544,
	0x1545,
	0x1550,
	0x1551,
	0x1554,
	0x1555,
	0x4000,
	0x4001,
	0x4004,
	0x4005,
	0x4010,
	0x4011,
	0x4014,
	0x4015,
	0x4040,
	0x4041,
	0x4044,
	0x4045,
	0x4050,
	0x4051,
	0x4054,
	0x4055,
	0x4100,
	0x4101,
	0x4104,
	0x4105,
	0x4110,
	0x4111,
	0x4114,
	0x4115,
	0x4140,
	0x4141,
	0x4144,
	0x4145,
	0x4150,
	0x4151,
	0x4154,
	0x4155,
	0x4400,
	0x4401,
	0x4404,
	0x4405,
	0x4410,
	0x4411,
	0x4414,
	0x4415,
	0x4440,
	0x4441,
	0x4444,
	0x4445,
	0x4450,
	0x4451,
	0x4454,
	0x4455,
	0x4500,
	0x4501,
	0x4504,
	0x4505,
	0x4510,
	0x4511,
	0x4514,
	0x4515,
	0x4540,
	0x4541,
	0x4544,
	0x4545,
	0x4550,
	0x4551,
	0x4554,
	0x4555,
	0x5000,
	0x5001,
	0x5004,
	0x5005,
	0x5010,
	0x5011,
	0x5014,
	0x5015,
	0x5040,
	0x5041,
	0x5044,
	0x5045,
	0x5050,
	0x5051,
	0x5054,
	0x5055,
	0x5100,
	0x5101,
	0x5104,
	0x5105,
	0x5110,
	0x5111,
	0x5114,
	0x5115,
	0x5140,
	0x5141,
	0x5144,
	0x5145,
	0x5150,
	0x5151,
	0x5154,
	0x5155,
	0x5400,
	0x5401,
	0x5404,
	0x5405,
	0x5410,
	0x5411,
	0x5414,
	0x5415,
	0x5440,
	0x5441,
	0x5444,
	0x5445,
	0x5450,
	0x5451,
	0x5454,
	0x5455,
	0x5500,
	0x5501,
	0x5504,
	0x5505,
	0x5510,
	0x5511,
	0x5514,
	0x5515,
	0x5540,
	0x5541,
	0x5544,
	0x5545,
	0x5550,
	0x5551,
	0x5554,
	0x5555,
};

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

/* The scalar kernels index small tables instead of branching on the data
 * (random signs would mispredict half the branches). The 2-bit residual
 * update is r + sel, sel = -t, +t or +0: bit for bit the torch code's
 * (r - (pos ? t : 0)) + (neg ? t : 0) (r + -t is r - t, and r + +0 is
 * (r - 0) + 0, -0 included). */
void
kern_codec_enc1_scalar(const float *g, float *res, uint64_t n, float t,
    uint8_t *out)
{
	static const float step[2] = { 1.0f, -1.0f };

	for (uint64_t i = 0; i < n; i += 8) {
		uint64_t m = n - i < 8 ? n - i : 8;
		unsigned byte = 0;

		for (uint64_t j = 0; j < m; j++) {
			float r = res[i + j] + g[i + j];
			unsigned bit = r > t;

			res[i + j] = r + step[bit];
			byte |= bit << j;
		}
		out[i / 8] = (uint8_t)byte;
	}
}

void
kern_codec_enc2_scalar(const float *g, float *res, uint64_t n, float t,
    uint8_t *out)
{
	const float sel[3] = { 0.0f, -t, t };

	for (uint64_t i = 0; i < n; i += 4) {
		uint64_t m = n - i < 4 ? n - i : 4;
		unsigned byte = 0;

		for (uint64_t j = 0; j < m; j++) {
			float r = res[i + j] + g[i + j];
			unsigned pos = r >= t;
			unsigned neg = r <= -t;

			/* t > 0: pos and neg are never both set. */
			res[i + j] = r + sel[pos | neg << 1];
			byte |= (pos | (pos | neg) << 1) << (2 * j);
		}
		out[i / 4] = (uint8_t)byte;
	}
}

void
kern_codec_dec1_scalar(const uint8_t *in, uint64_t n, float t, float *out,
    int add)
{
	static const float val[2] = { -1.0f, 1.0f };

	if (add)
		for (uint64_t i = 0; i < n; i++)
			out[i] = out[i] + val[(in[i / 8] >> (i % 8)) & 1];
	else
		for (uint64_t i = 0; i < n; i++)
			out[i] = val[(in[i / 8] >> (i % 8)) & 1];
}

void
kern_codec_dec2_scalar(const uint8_t *in, uint64_t n, float t, float *out,
    int add)
{
	const float val[4] = { 0.0f, 0.0f, -t, t };

	if (add)
		for (uint64_t i = 0; i < n; i++)
			out[i] = out[i] + val[(in[i / 4] >> (2 * (i % 4))) & 3];
	else
		for (uint64_t i = 0; i < n; i++)
			out[i] = val[(in[i / 4] >> (2 * (i % 4))) & 3];
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
