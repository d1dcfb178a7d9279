/* kern_gcomp - the GComp codec's portable C encoder and decoder; see
 * kern_gcomp.h for the bit layout and the block format.
 *
 * Two paths write and read the same blocks byte for byte.
 *
 * The reference path (KERN_GCOMP_PATH_REF) encodes a chunk in two passes
 * over its values: the first adds up the bits of each segment (so the
 * three segments can be written in place, back to back), the second writes
 * them with a bit writer that stores 32 bits when it has them.
 *
 * The fast path (KERN_GCOMP_PATH_FAST, the default) encodes a chunk in one
 * pass, each segment into its own scratch buffer on the stack, and copies
 * the three into place at the chunk's end. Its bit writers hold their bits
 * at the top of a 64-bit word and store all 8 bytes after every value,
 * advancing by the whole bytes written: no branch per value. Its decoder
 * refills the three bit readers without a branch (an 8-byte load each)
 * while every segment has 8 bytes left, and falls back to the reference
 * path's checked refills for the chunk's last values.
 *
 * Decoding peeks max_code_bits of the exponent segment into the LUT (one
 * lookup per value), then reads the level and mantissa from their
 * segments. Bit readers never read outside their segment: past its end
 * they see zero bits, and the count of bits each segment used is checked
 * against its header at the end of the chunk.
 */
#include "kern_gcomp.h"

#include <math.h>
#include <string.h>

#include <bellows/error.h>

#include "../element.h"
#include "../kernels.h"
#include "common/errbuf.h"
#include "kern_gcomp_levels.h"
#include "kern_gcomp_planes.h"
#include "kern_stats.h"

/* Per dtype: mantissa bits and the truncation of each level. */
static const unsigned gcomp_mbits[3] = { 23, 10, 7 };
static const unsigned gcomp_trunc[3][4] = {
	{ 0, 6, 12, 18 }, /* KERN_F32 */
	{ 0, 3, 6, 9 },   /* KERN_F16 */
	{ 0, 2, 4, 6 },   /* KERN_BF16 */
};

static void
put_le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void
put_le64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t
get_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	    (uint32_t)p[3] << 24;
}

static uint64_t
get_le64(const uint8_t *p)
{
	return (uint64_t)get_le32(p) | (uint64_t)get_le32(p + 4) << 32;
}

/* The planes LUT entry (kern_gcomp_planes.h) of the KERN_GCOMP_PLUT_BITS bits
 * i, from t's lut: the codes that fit in i, up to 4, ending before an
 * escape or an unused code that is not the first. */
static uint64_t
planes_lut_entry(const kern_gcomp_table *t, unsigned i)
{
	unsigned mb = t->h.max_bits, used = 0, count = 0;
	uint64_t syms = 0;

	while (count < 4) {
		unsigned rest = KERN_GCOMP_PLUT_BITS - used, e, sym, len;

		if (rest == 0)
			break;
		/* the next max_bits bits, zeros past the end of i */
		e = mb <= rest ? t->lut[(i >> (rest - mb)) & ((1u << mb) - 1)]
			       : t->lut[(i << (mb - rest)) & ((1u << mb) - 1)];
		sym = e >> 4;
		len = e & 15u;
		if (count == 0 && sym == KERN_GCOMP_BAD)
			return PLANES_LUT_BAD;
		if (count == 0 && sym == KERN_GCOMP_ESC)
			return PLANES_LUT_ESC | (uint64_t)len << 32;
		if (sym >= KERN_GCOMP_ESC || len > rest)
			break;
		syms |= (uint64_t)sym << (8 * count);
		used += len;
		count++;
	}
	return (uint64_t)count << 40 | (uint64_t)used << 32 | syms;
}

void
kern_gcomp_prepare(kern_gcomp_table *t)
{
	const com_huff_table *h = &t->h;
	unsigned mb = h->max_bits;

	for (unsigned i = 0; i < (1u << mb); i++)
		t->lut[i] = KERN_GCOMP_BAD << 4;
	for (int s = 0; s <= 256; s++) {
		unsigned len = s == 256 ? h->esc_len : h->len[s];
		unsigned code = s == 256 ? h->esc_code : h->code[s];
		unsigned first, count;

		if (len == 0)
			continue;
		first = code << (mb - len);
		count = 1u << (mb - len);
		for (unsigned j = 0; j < count; j++)
			t->lut[first + j] = (uint16_t)((unsigned)s << 4 | len);
	}
	for (unsigned i = 0; mb <= KERN_GCOMP_LUT2_BITS && i < (1u << mb);
	     i++) {
		unsigned s1 = t->lut[i] >> 4, l1 = t->lut[i] & 15u;
		unsigned e2 = t->lut[(i << l1) & ((1u << mb) - 1)];
		unsigned s2 = e2 >> 4, l2 = e2 & 15u;

		if (s1 < 256 && s2 < 256 && l1 + l2 <= mb)
			t->lut2[i] = 2u << 23 | s2 << 14 | s1 << 5 | (l1 + l2);
		else
			t->lut2[i] = 1u << 23 | s1 << 5 | l1;
	}
	for (unsigned i = 0;
	     mb <= KERN_GCOMP_LUT2_BITS && i < (1u << KERN_GCOMP_PLUT_BITS);
	     i++)
		t->plut[i] = planes_lut_entry(t, i);
	for (int s = 0; s < 256; s++) {
		if (h->len[s] > 0) {
			t->enc_code[s] = h->code[s];
			t->enc_len[s] = h->len[s];
		} else {
			t->enc_code[s] = (uint32_t)h->esc_code << 8 |
			    (uint32_t)s;
			t->enc_len[s] = (uint8_t)(h->esc_len + 8);
		}
	}
}

uint64_t
kern_gcomp_bound(int dtype, uint64_t n)
{
	uint64_t chunks, bits;

	if (dtype != KERN_F32 && dtype != KERN_F16 && dtype != KERN_BF16)
		return 0;
	if (n > (UINT64_C(1) << 48))
		return 0;
	chunks = (n + KERN_GCOMP_CHUNK - 1) / KERN_GCOMP_CHUNK;
	/* Per value: the longest exponent (15 + 8), level, sign, mantissa;
	 * per chunk: its header and up to 3 bytes of padding. */
	bits = COM_HUFF_MAX_BITS + 8 + 2 + 1 + gcomp_mbits[dtype];
	return KERN_GCOMP_HEADER + chunks * (KERN_GCOMP_CHUNK_HEADER2 + 3) +
	    (n * bits + 7) / 8;
}

/* A value split into its symbol, sign and mantissa. */
typedef struct gcomp_val {
	unsigned sym;  /* exponent symbol, 0..255 */
	unsigned sign; /* 0 or 1 */
	uint32_t man;  /* mantissa, gcomp_mbits[dtype] bits */
} gcomp_val;

static inline __attribute__((always_inline)) gcomp_val
gcomp_split(const void *x, uint64_t i, int dtype)
{
	gcomp_val v;

	if (dtype == KERN_F32) {
		uint32_t u;

		memcpy(&u, (const uint8_t *)x + 4 * i, 4);
		v.sym = (u >> 23) & 0xffu;
		v.sign = u >> 31;
		v.man = u & 0x7fffffu;
	} else {
		uint16_t h;

		memcpy(&h, (const uint8_t *)x + 2 * i, 2);
		v.sign = h >> 15;
		if (dtype == KERN_BF16) {
			v.sym = (h >> 7) & 0xffu;
			v.man = h & 0x7fu;
		} else {
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
		}
	}
	return v;
}

/* Most-significant-bit-first bit writer into a segment. */
typedef struct gcomp_bw {
	uint8_t *p;   /* next byte */
	uint64_t acc; /* pending bits in the low n */
	unsigned n;   /* pending bit count, < 32 between puts */
} gcomp_bw;

static inline __attribute__((always_inline)) void
bw_put(gcomp_bw *w, uint32_t v, unsigned len)
{
	w->acc = (w->acc << len) | v;
	w->n += len;
	if (w->n >= 32) {
		uint32_t out;

		w->n -= 32;
		out = __builtin_bswap32((uint32_t)(w->acc >> w->n));
		memcpy(w->p, &out, 4);
		w->p += 4;
	}
}

static void
bw_flush(gcomp_bw *w)
{
	while (w->n >= 8) {
		w->n -= 8;
		*w->p++ = (uint8_t)(w->acc >> w->n);
	}
	if (w->n > 0)
		*w->p++ = (uint8_t)(w->acc << (8 - w->n));
	w->n = 0;
}

/* The reference path's kern_gcomp_encode for one dtype: inlined with a
 * constant dtype, so the per-value branches on it fold away. */
static inline __attribute__((always_inline)) int
gcomp_encode_ref(const kern_gcomp_table *t, int dtype, const void *x,
    uint64_t n, int level, const uint8_t *levels, uint8_t *out, size_t cap,
    size_t *ret_bytes, kern_gcomp_stats *stats)
{
	uint64_t chunks, off;
	kern_gcomp_stats st;
	const unsigned *tr;
	unsigned mb;

	if (dtype != KERN_F32 && dtype != KERN_F16 && dtype != KERN_BF16)
		return BELLOWS_EINVAL;
	if (level < 0 || level > 3 || n > (UINT64_C(1) << 48))
		return BELLOWS_EINVAL;
	mb = gcomp_mbits[dtype];
	tr = gcomp_trunc[dtype];
	chunks = (n + KERN_GCOMP_CHUNK - 1) / KERN_GCOMP_CHUNK;
	off = KERN_GCOMP_HEADER + chunks * KERN_GCOMP_CHUNK_HEADER;
	if (cap < off)
		return BELLOWS_EMSGSIZE;
	memset(&st, 0, sizeof(st));
	for (uint64_t c = 0; c < chunks; c++) {
		uint64_t i0 = c * KERN_GCOMP_CHUNK;
		uint64_t m = n - i0 < KERN_GCOMP_CHUNK ? n - i0
						       : KERN_GCOMP_CHUNK;
		uint64_t eb = 0, lb = 0, mbits = 0, eB, lB, mB;
		uint8_t *h = out + KERN_GCOMP_HEADER +
		    c * KERN_GCOMP_CHUNK_HEADER;
		gcomp_bw we, wl, wm;

		/* Pass 1: the segments' sizes. */
		for (uint64_t i = i0; i < i0 + m; i++) {
			gcomp_val v = gcomp_split(x, i, dtype);
			unsigned l = levels != NULL ? levels[i]
						    : (unsigned)level;

			unsigned nz = v.sym != 0;

			if (l > 3)
				return BELLOWS_EINVAL;
			/* No branch on zeros: random ones mispredict. */
			l = v.sym == 255 ? 0 : l;
			eb += t->enc_len[v.sym];
			lb += 2 * nz;
			mbits += nz * (1 + mb - tr[l]);
		}
		eB = (eb + 7) / 8;
		lB = (lb + 7) / 8;
		mB = (mbits + 7) / 8;
		if (cap - off < eB + lB + mB)
			return BELLOWS_EMSGSIZE;
		put_le64(h, off);
		put_le32(h + 8, (uint32_t)m);
		put_le32(h + 12, (uint32_t)eb);
		put_le32(h + 16, (uint32_t)lb);
		put_le32(h + 20, (uint32_t)mbits);
		we = (gcomp_bw){ .p = out + off };
		wl = (gcomp_bw){ .p = out + off + eB };
		wm = (gcomp_bw){ .p = out + off + eB + lB };
		/* Pass 2: the bits. */
		for (uint64_t i = i0; i < i0 + m; i++) {
			gcomp_val v = gcomp_split(x, i, dtype);
			unsigned l = levels != NULL ? levels[i]
						    : (unsigned)level;
			unsigned nz = v.sym != 0, keep;
			uint32_t mask = 0u - nz;

			/* A zero writes 0 bits to the level and mantissa
			 * segments: no branch. */
			l = v.sym == 255 ? 0 : l;
			keep = mb - tr[l];
			bw_put(&we, t->enc_code[v.sym], t->enc_len[v.sym]);
			bw_put(&wl, l & mask, 2 & mask);
			bw_put(&wm, (v.sign << keep | v.man >> tr[l]) & mask,
			    (1 + keep) & mask);
			st.escaped += t->h.len[v.sym] == 0;
			st.zeros += !nz;
			st.levels[l] += nz;
		}
		bw_flush(&we);
		bw_flush(&wl);
		bw_flush(&wm);
		st.exp_bits += eb;
		st.level_bits += lb;
		st.mant_bits += mbits;
		off += eB + lB + mB;
	}
	memcpy(out, "BGCB", 4);
	out[4] = KERN_GCOMP_FORMAT;
	out[5] = (uint8_t)dtype;
	out[6] = out[7] = 0;
	put_le32(out + 8, t->h.version);
	put_le32(out + 12, (uint32_t)chunks);
	put_le64(out + 16, n);
	put_le64(out + 24, off);
	st.values = n;
	st.bytes = off;
	if (ret_bytes != NULL)
		*ret_bytes = (size_t)off;
	if (stats != NULL)
		*stats = st;
	return 0;
}

/* The fast path's bit writer: pending bits at the top of acc. */
typedef struct gcomp_fw {
	uint8_t *p;   /* next byte */
	uint64_t acc; /* pending bits, most significant first */
	unsigned n;   /* pending bit count, < 8 after fw_flush */
} gcomp_fw;

/* Appends the len (0..32) low bits of v (no bits above them). */
static inline __attribute__((always_inline)) void
fw_put(gcomp_fw *w, uint32_t v, unsigned len)
{
	w->acc |= ((uint64_t)v << (63 - len) << 1) >> w->n;
	w->n += len;
}

/* Stores 8 bytes (the buffer has 8 bytes of slack) and keeps the partial
 * byte. */
static inline __attribute__((always_inline)) void
fw_flush(gcomp_fw *w)
{
	uint64_t be = __builtin_bswap64(w->acc);

	memcpy(w->p, &be, 8);
	w->p += w->n >> 3;
	w->acc <<= w->n & 56u;
	w->n &= 7u;
}

/* Writes the last partial byte; returns the bits written from start. */
static inline __attribute__((always_inline)) uint64_t
fw_end(gcomp_fw *w, const uint8_t *start)
{
	uint64_t bits = (uint64_t)(w->p - start) * 8 + w->n;

	fw_flush(w);
	if (w->n > 0)
		w->p++;
	return bits;
}

/* Scratch bytes of a chunk's segments: the longest exponent (escape and
 * 8 raw bits), 2 level bits, sign and float32 mantissa per value, plus the
 * writers' 8 bytes of slack. */
#define GCOMP_SCR_EXP  (KERN_GCOMP_CHUNK * (COM_HUFF_MAX_BITS + 8) / 8 + 16)
#define GCOMP_SCR_LVL  (KERN_GCOMP_CHUNK * 2 / 8 + 16)
#define GCOMP_SCR_MANT (KERN_GCOMP_CHUNK * 24 / 8 + 16)
_Static_assert(KERN_GCOMP_CHUNK < 65536 && KERN_GCOMP_CHUNK % 16 == 0,
    "the fast encoder counts levels in 16 bits and flushes levels by 16");

/* The fast path's kern_gcomp_encode for one dtype (see gcomp_encode_ref):
 * the same block, in one pass per chunk. */
static inline __attribute__((always_inline)) int
gcomp_encode_fast(const kern_gcomp_table *t, int dtype, const void *x,
    uint64_t n, int level, const uint8_t *levels, uint8_t *out, size_t cap,
    size_t *ret_bytes, kern_gcomp_stats *stats)
{
	uint8_t se[GCOMP_SCR_EXP], sl[GCOMP_SCR_LVL], sm[GCOMP_SCR_MANT];
	uint64_t chunks, off;
	kern_gcomp_stats st;
	const unsigned *tr;
	unsigned mb;

	if (dtype != KERN_F32 && dtype != KERN_F16 && dtype != KERN_BF16)
		return BELLOWS_EINVAL;
	if (level < 0 || level > 3 || n > (UINT64_C(1) << 48))
		return BELLOWS_EINVAL;
	mb = gcomp_mbits[dtype];
	tr = gcomp_trunc[dtype];
	chunks = (n + KERN_GCOMP_CHUNK - 1) / KERN_GCOMP_CHUNK;
	off = KERN_GCOMP_HEADER + chunks * KERN_GCOMP_CHUNK_HEADER;
	if (cap < off)
		return BELLOWS_EMSGSIZE;
	memset(&st, 0, sizeof(st));
	for (uint64_t c = 0; c < chunks; c++) {
		uint64_t i0 = c * KERN_GCOMP_CHUNK;
		uint64_t m = n - i0 < KERN_GCOMP_CHUNK ? n - i0
						       : KERN_GCOMP_CHUNK;
		uint64_t eb, lb, mbits, eB, lB, mB;
		uint8_t *h = out + KERN_GCOMP_HEADER +
		    c * KERN_GCOMP_CHUNK_HEADER;
		gcomp_fw we = { .p = se }, wl = { .p = sl }, wm = { .p = sm };
		unsigned bad = 0;
		/* values per level, 16 bits each (a chunk holds fewer than
		 * 2^16): one register, no store to forward from value to
		 * value */
		uint64_t per_level = 0;

		for (uint64_t i = i0; i < i0 + m; i++) {
			gcomp_val v = gcomp_split(x, i, dtype);
			unsigned l = levels != NULL ? levels[i]
						    : (unsigned)level;
			unsigned nz = v.sym != 0, keep;
			uint32_t mask = 0u - nz;

			bad |= l;
			l = v.sym == 255 ? 0 : l & 3u;
			keep = mb - tr[l];
			fw_put(&we, t->enc_code[v.sym], t->enc_len[v.sym]);
			fw_flush(&we);
			fw_put(&wl, l & mask, 2 & mask);
			if ((i & 15u) == 15u) /* 16 levels fit in a flush */
				fw_flush(&wl);
			fw_put(&wm, (v.sign << keep | v.man >> tr[l]) & mask,
			    (1 + keep) & mask);
			fw_flush(&wm);
			st.escaped += t->h.len[v.sym] == 0;
			st.zeros += !nz;
			per_level += (uint64_t)nz << (16 * l);
		}
		if (bad > 3)
			return BELLOWS_EINVAL;
		for (int l = 0; l < 4; l++)
			st.levels[l] += (per_level >> (16 * l)) & 0xffffu;
		eb = fw_end(&we, se);
		lb = fw_end(&wl, sl);
		mbits = fw_end(&wm, sm);
		eB = (eb + 7) / 8;
		lB = (lb + 7) / 8;
		mB = (mbits + 7) / 8;
		if (cap - off < eB + lB + mB)
			return BELLOWS_EMSGSIZE;
		put_le64(h, off);
		put_le32(h + 8, (uint32_t)m);
		put_le32(h + 12, (uint32_t)eb);
		put_le32(h + 16, (uint32_t)lb);
		put_le32(h + 20, (uint32_t)mbits);
		memcpy(out + off, se, eB);
		memcpy(out + off + eB, sl, lB);
		memcpy(out + off + eB + lB, sm, mB);
		st.exp_bits += eb;
		st.level_bits += lb;
		st.mant_bits += mbits;
		off += eB + lB + mB;
	}
	memcpy(out, "BGCB", 4);
	out[4] = KERN_GCOMP_FORMAT;
	out[5] = (uint8_t)dtype;
	out[6] = out[7] = 0;
	put_le32(out + 8, t->h.version);
	put_le32(out + 12, (uint32_t)chunks);
	put_le64(out + 16, n);
	put_le64(out + 24, off);
	st.values = n;
	st.bytes = off;
	if (ret_bytes != NULL)
		*ret_bytes = (size_t)off;
	if (stats != NULL)
		*stats = st;
	return 0;
}

/* Format 2, the planes layout (see kern_gcomp.h): level 0 without per-value
 * levels, float32 and bfloat16. A chunk's exponents are split into
 * KERN_GCOMP_STREAMS bit streams over consecutive quarters of its values,
 * so that the decoder can run their dependency chains side by side; each
 * non-zero symbol's sign and mantissa follow as whole bytes (3 for
 * float32, 1 for bfloat16), no level bits; the few symbol-0 values that
 * are not +0 (subnormals, -0) are listed whole. A chunk whose planes
 * would not be smaller than its values is stored raw. */

/* Bytes of one value's sign and mantissa in the planes layout. */
static inline __attribute__((always_inline)) unsigned
planes_mbytes(int dtype)
{
	return dtype == KERN_F32 ? 3 : 1;
}

/* Bytes of one value of dtype. */
static inline __attribute__((always_inline)) unsigned
planes_esz(int dtype)
{
	return dtype == KERN_F32 ? 4 : 2;
}

/* The first value and the count of stream k of a chunk of m values. */
static void
planes_stream_span(uint64_t m, unsigned k, uint64_t *first, uint64_t *count)
{
	uint64_t q = (m + KERN_GCOMP_STREAMS - 1) / KERN_GCOMP_STREAMS;
	uint64_t a = k * q < m ? k * q : m, b = a + q < m ? a + q : m;

	*first = a;
	*count = b - a;
}

/* A value's raw bits (float32, or bfloat16 in the low 16). */
static inline __attribute__((always_inline)) uint32_t
planes_raw(const void *x, uint64_t i, int dtype)
{
	if (dtype == KERN_F32) {
		uint32_t u;

		memcpy(&u, (const uint8_t *)x + 4 * i, 4);
		return u;
	}
	{
		uint16_t h;

		memcpy(&h, (const uint8_t *)x + 2 * i, 2);
		return h;
	}
}

/* The most listed values a chunk of the encoder may have before it is
 * stored raw (at 8 bytes each, more would rarely pay). */
#define PLANES_EXC_MAX (KERN_GCOMP_CHUNK / 8)

/* One chunk's planes, in the encoder's scratch. */
typedef struct planes_scratch {
	uint8_t se[GCOMP_SCR_EXP]; /* the exponent streams, back to back */
	uint8_t sm[KERN_GCOMP_CHUNK * 3 + 16]; /* signs and mantissas */
	uint8_t sx[PLANES_EXC_MAX * 8];        /* listed values */
	uint64_t bits[KERN_GCOMP_STREAMS];     /* each stream's bits */
	uint64_t eB;                           /* the streams' bytes */
	uint64_t mB;                           /* sm's bytes */
	uint64_t nx;                           /* listed values */
	int raw;                               /* store the chunk raw */
} planes_scratch;

/* Codes values i0..i0+m of x into s (m <= KERN_GCOMP_CHUNK); adds to st's
 * counts. */
static inline __attribute__((always_inline)) void
planes_encode_chunk(const kern_gcomp_table *t, int dtype, const void *x,
    uint64_t i0, uint64_t m, planes_scratch *s, kern_gcomp_stats *st)
{
	const unsigned mbytes = planes_mbytes(dtype);
	uint8_t *mp = s->sm, *sp = s->se;
	uint64_t nz_all = 0, esc = 0;

	s->nx = 0;
	for (unsigned k = 0; k < KERN_GCOMP_STREAMS; k++) {
		uint64_t a, cnt;
		gcomp_fw w = { .p = sp };

		planes_stream_span(m, k, &a, &cnt);
		for (uint64_t i = i0 + a; i < i0 + a + cnt; i++) {
			uint32_t u = planes_raw(x, i, dtype), v;
			unsigned sym = dtype == KERN_F32 ? (u >> 23) & 0xffu
							 : (u >> 7) & 0xffu;
			unsigned nz = sym != 0;

			fw_put(&w, t->enc_code[sym], t->enc_len[sym]);
			fw_flush(&w);
			if (dtype == KERN_F32)
				v = (u >> 31) << 23 | (u & 0x7fffffu);
			else
				v = (u >> 15) << 7 | (u & 0x7fu);
			put_le32(mp, v);
			mp += mbytes * nz;
			nz_all += nz;
			esc += t->h.len[sym] == 0;
			if (__builtin_expect(!nz && u != 0, 0)) {
				if (s->nx < PLANES_EXC_MAX) {
					put_le32(s->sx + 8 * s->nx,
					    (uint32_t)(i - i0));
					put_le32(s->sx + 8 * s->nx + 4, u);
				}
				s->nx++;
			}
		}
		s->bits[k] = fw_end(&w, sp);
		sp = w.p;
	}
	s->eB = (uint64_t)(sp - s->se);
	s->mB = (uint64_t)(mp - s->sm);
	s->raw = s->nx > PLANES_EXC_MAX ||
	    s->eB + 8 * s->nx + s->mB >= m * planes_esz(dtype);
	st->zeros += m - nz_all;
	st->levels[0] += nz_all;
	st->escaped += esc;
}

/* Writes chunk c's header and data at out + off from s; returns the data's
 * bytes, or 0 when cap is too small. Adds the segments' bits to st. */
static uint64_t
planes_put_chunk(const planes_scratch *s, int dtype, const void *x, uint64_t i0,
    uint64_t m, uint8_t *out, size_t cap, uint64_t c, uint64_t off,
    kern_gcomp_stats *st)
{
	uint8_t *h = out + KERN_GCOMP_HEADER + c * KERN_GCOMP_CHUNK_HEADER2;
	uint64_t xB = 8 * s->nx;
	uint64_t bytes = s->raw ? m * planes_esz(dtype) : s->eB + xB + s->mB;

	if (cap - off < bytes)
		return 0;
	memset(h, 0, KERN_GCOMP_CHUNK_HEADER2);
	put_le64(h, off);
	put_le32(h + 8, (uint32_t)m);
	if (s->raw) {
		h[12] = KERN_GCOMP_MODE_RAW;
		memcpy(out + off, (const uint8_t *)x + i0 * planes_esz(dtype),
		    bytes);
		st->mant_bits += 8 * bytes;
		return bytes;
	}
	put_le32(h + 16, (uint32_t)s->nx);
	for (unsigned k = 0; k < KERN_GCOMP_STREAMS; k++) {
		put_le32(h + 20 + 4 * k, (uint32_t)s->bits[k]);
		st->exp_bits += s->bits[k];
	}
	put_le32(h + 36, (uint32_t)s->mB);
	memcpy(out + off, s->se, s->eB);
	memcpy(out + off + s->eB, s->sx, xB);
	memcpy(out + off + s->eB + xB, s->sm, s->mB);
	st->mant_bits += 8 * (xB + s->mB);
	return bytes;
}

/* kern_gcomp_encode in the planes layout, for one dtype (float32 or
 * bfloat16, level 0, no levels); arguments checked by the caller. Not
 * inlined: its scratch stays out of the other encoders' frames. */
static __attribute__((noinline)) int
planes_encode(const kern_gcomp_table *t, int dtype, const void *x, uint64_t n,
    uint8_t *out, size_t cap, size_t *ret_bytes, kern_gcomp_stats *stats)
{
	planes_scratch s;
	kern_gcomp_stats st;
	uint64_t chunks = (n + KERN_GCOMP_CHUNK - 1) / KERN_GCOMP_CHUNK;
	uint64_t off = KERN_GCOMP_HEADER + chunks * KERN_GCOMP_CHUNK_HEADER2;

	if (cap < off)
		return BELLOWS_EMSGSIZE;
	memset(&st, 0, sizeof(st));
	for (uint64_t c = 0; c < chunks; c++) {
		uint64_t i0 = c * KERN_GCOMP_CHUNK, bytes;
		uint64_t m = n - i0 < KERN_GCOMP_CHUNK ? n - i0
						       : KERN_GCOMP_CHUNK;

		if (dtype == KERN_F32)
			planes_encode_chunk(t, KERN_F32, x, i0, m, &s, &st);
		else
			planes_encode_chunk(t, KERN_BF16, x, i0, m, &s, &st);
		bytes = planes_put_chunk(&s, dtype, x, i0, m, out, cap, c, off,
		    &st);
		if (bytes == 0)
			return BELLOWS_EMSGSIZE;
		off += bytes;
	}
	memcpy(out, "BGCB", 4);
	out[4] = KERN_GCOMP_FORMAT_PLANES;
	out[5] = (uint8_t)dtype;
	out[6] = out[7] = 0;
	put_le32(out + 8, t->h.version);
	put_le32(out + 12, (uint32_t)chunks);
	put_le64(out + 16, n);
	put_le64(out + 24, off);
	st.values = n;
	st.bytes = off;
	if (ret_bytes != NULL)
		*ret_bytes = (size_t)off;
	if (stats != NULL)
		*stats = st;
	return 0;
}

int
kern_gcomp_encode_path(int path, const kern_gcomp_table *t, int dtype,
    const void *x, uint64_t n, int level, const uint8_t *levels, uint8_t *out,
    size_t cap, size_t *ret_bytes, kern_gcomp_stats *stats)
{
#define GCOMP_ENC(fn, dt)                                                      \
	fn(t, dt, x, n, level, levels, out, cap, ret_bytes, stats)
	if (path != KERN_GCOMP_PATH_FAST && path != KERN_GCOMP_PATH_REF)
		return BELLOWS_EINVAL;
	/* Lossless without levels: the planes layout (format 2), one
	 * encoder for both paths. */
	if (level == 0 && levels == NULL && n <= (UINT64_C(1) << 48) &&
	    (dtype == KERN_F32 || dtype == KERN_BF16))
		return planes_encode(t, dtype, x, n, out, cap, ret_bytes,
		    stats);
	switch (dtype) {
	case KERN_F32:
		return path == KERN_GCOMP_PATH_REF
		    ? GCOMP_ENC(gcomp_encode_ref, KERN_F32)
		    : GCOMP_ENC(gcomp_encode_fast, KERN_F32);
	case KERN_F16:
		return path == KERN_GCOMP_PATH_REF
		    ? GCOMP_ENC(gcomp_encode_ref, KERN_F16)
		    : GCOMP_ENC(gcomp_encode_fast, KERN_F16);
	case KERN_BF16:
		return path == KERN_GCOMP_PATH_REF
		    ? GCOMP_ENC(gcomp_encode_ref, KERN_BF16)
		    : GCOMP_ENC(gcomp_encode_fast, KERN_BF16);
	default:
		return BELLOWS_EINVAL;
	}
#undef GCOMP_ENC
}

int
kern_gcomp_encode(const kern_gcomp_table *t, int dtype, const void *x,
    uint64_t n, int level, const uint8_t *levels, uint8_t *out, size_t cap,
    size_t *ret_bytes, kern_gcomp_stats *stats)
{
	return kern_gcomp_encode_path(KERN_GCOMP_PATH_FAST, t, dtype, x, n,
	    level, levels, out, cap, ret_bytes, stats);
}

int
kern_gcomp_info(const uint8_t *in, size_t bytes, uint64_t *ret_n,
    int *ret_dtype, uint32_t *ret_version, uint64_t *ret_block_bytes,
    char *errbuf, size_t errlen)
{
	uint64_t n, block, chunks, chdr;

	if (bytes < 4 || memcmp(in, "BGCB", 4) != 0) {
		com_errf(errbuf, errlen,
		    "byte 0: not a GComp block (magic 'BGCB' expected)");
		return BELLOWS_EPROTO;
	}
	if (bytes < KERN_GCOMP_HEADER) {
		com_errf(errbuf, errlen,
		    "byte %zu: block header truncated (%d bytes expected)",
		    bytes, KERN_GCOMP_HEADER);
		return BELLOWS_EPROTO;
	}
	if (in[4] != KERN_GCOMP_FORMAT && in[4] != KERN_GCOMP_FORMAT_PLANES) {
		com_errf(errbuf, errlen,
		    "byte 4: block format %u, this build reads %d and %d",
		    in[4], KERN_GCOMP_FORMAT, KERN_GCOMP_FORMAT_PLANES);
		return BELLOWS_EVERSION;
	}
	chdr = in[4] == KERN_GCOMP_FORMAT ? KERN_GCOMP_CHUNK_HEADER
					  : KERN_GCOMP_CHUNK_HEADER2;
	if (in[5] != KERN_F32 && in[5] != KERN_F16 && in[5] != KERN_BF16) {
		com_errf(errbuf, errlen, "byte 5: unknown dtype %u", in[5]);
		return BELLOWS_EPROTO;
	}
	if (in[6] != 0 || in[7] != 0) {
		com_errf(errbuf, errlen, "byte 6: reserved bytes not 0");
		return BELLOWS_EPROTO;
	}
	chunks = get_le32(in + 12);
	n = get_le64(in + 16);
	block = get_le64(in + 24);
	if (n > (UINT64_C(1) << 48) || chunks > n || (n > 0 && chunks == 0) ||
	    (chunks > 0 && (n - 1) / chunks >= KERN_GCOMP_CHUNK_MAX)) {
		com_errf(errbuf, errlen,
		    "byte 12: %llu chunks cannot hold %llu values",
		    (unsigned long long)chunks, (unsigned long long)n);
		return BELLOWS_EPROTO;
	}
	if (block < KERN_GCOMP_HEADER + chunks * chdr) {
		com_errf(errbuf, errlen,
		    "byte 24: block length %llu is shorter than its headers",
		    (unsigned long long)block);
		return BELLOWS_EPROTO;
	}
	if (block > bytes) {
		com_errf(errbuf, errlen,
		    "byte %zu: block truncated (%llu bytes expected)", bytes,
		    (unsigned long long)block);
		return BELLOWS_EPROTO;
	}
	if (ret_n != NULL)
		*ret_n = n;
	if (ret_dtype != NULL)
		*ret_dtype = in[5];
	if (ret_version != NULL)
		*ret_version = get_le32(in + 8);
	if (ret_block_bytes != NULL)
		*ret_block_bytes = block;
	return 0;
}

/* Most-significant-bit-first reader of one segment: bits holds cnt valid
 * bits at its top; past the segment's end it reads zero bytes (counted in
 * over, so the bits used can be checked). */
typedef struct gcomp_br {
	const uint8_t *p;     /* next byte */
	const uint8_t *end;   /* segment end */
	const uint8_t *start; /* segment start */
	uint64_t bits;        /* valid bits at the top */
	unsigned cnt;         /* valid bit count */
	uint64_t over;        /* zero bytes read past the end */
} gcomp_br;

static inline __attribute__((always_inline)) void
br_refill(gcomp_br *r)
{
	if (r->end - r->p >= 8) {
		uint64_t w;

		memcpy(&w, r->p, 8);
		w = __builtin_bswap64(w);
		r->bits |= w >> r->cnt;
		r->p += (63 - r->cnt) >> 3;
		r->cnt |= 56;
		return;
	}
	while (r->cnt <= 56) {
		uint64_t b = 0;

		if (r->p < r->end)
			b = *r->p++;
		else
			r->over++;
		r->bits |= b << (56 - r->cnt);
		r->cnt += 8;
	}
}

static inline __attribute__((always_inline)) uint32_t
br_get(gcomp_br *r, unsigned len)
{
	uint32_t v = (uint32_t)(r->bits >> (64 - len));

	r->bits <<= len;
	r->cnt -= len;
	return v;
}

/* br_get for len 0..32 (0 reads nothing and gives 0). */
static inline __attribute__((always_inline)) uint32_t
br_get0(gcomp_br *r, unsigned len)
{
	uint32_t v = (uint32_t)((r->bits >> 1) >> (63 - len));

	r->bits <<= len;
	r->cnt -= len;
	return v;
}

/* Bits consumed so far. */
static uint64_t
br_used(const gcomp_br *r)
{
	return ((uint64_t)(r->p - r->start) + r->over) * 8 - r->cnt;
}

static void
br_init(gcomp_br *r, const uint8_t *p, uint64_t bytes)
{
	*r = (gcomp_br){ .p = p, .start = p, .end = p + bytes };
	br_refill(r);
}

/* Writes one decoded value. Returns 0, or -1 for a float16 symbol that is
 * no float16 exponent. */
static inline __attribute__((always_inline)) int
gcomp_store(void *out, uint64_t i, int dtype, int add, unsigned sym,
    unsigned sign, uint32_t man)
{
	if (dtype == KERN_F32) {
		uint32_t u = sym == 0 ? 0 : sign << 31 | sym << 23 | man;
		float f;

		memcpy(&f, &u, 4);
		if (add)
			((float *)out)[i] = ((float *)out)[i] + f;
		else
			((float *)out)[i] = f;
		return 0;
	}
	if (dtype == KERN_BF16) {
		uint16_t h = sym == 0 ? 0
				      : (uint16_t)(sign << 15 | sym << 7 | man);

		memcpy((uint8_t *)out + 2 * i, &h, 2);
		return 0;
	}
	{
		uint16_t h;

		if (sym == 0)
			h = 0;
		else if (sym == 255)
			h = (uint16_t)(sign << 15 | 0x7c00u | man);
		else if (sym >= 113 && sym <= 142)
			h = (uint16_t)(sign << 15 | (sym - 112) << 10 | man);
		else if (sym >= 103 && sym < 113)
			h = (uint16_t)(sign << 15 |
			    (man | 0x400u) >> (113 - sym));
		else
			return -1;
		memcpy((uint8_t *)out + 2 * i, &h, 2);
		return 0;
	}
}

/* The fast path's refill: unconditional, for a reader with at least 8
 * bytes left in its segment; leaves at least 56 valid bits. */
static inline __attribute__((always_inline)) void
br_refill8(gcomp_br *r)
{
	uint64_t w;

	memcpy(&w, r->p, 8);
	w = __builtin_bswap64(w);
	r->bits |= w >> r->cnt;
	r->p += (63 - r->cnt) >> 3;
	r->cnt |= 56;
}

/* Phase B of the fast decoder: the level and mantissa of a value whose
 * symbol sym (a float32 or bfloat16 exponent) is known, the readers
 * holding the bits. */
static inline __attribute__((always_inline)) void
gcomp_value_b(gcomp_br *rl, gcomp_br *rm, unsigned sym, unsigned mb,
    const unsigned *tr, int dtype, int add, void *out, uint64_t i)
{
	unsigned nz = sym != 0, l, keep;
	uint32_t v, u;

	l = br_get0(rl, 2 * nz);
	l = sym == 255 ? 0 : l;
	keep = mb - tr[l];
	v = br_get0(rm, nz * (1 + keep));
	if (dtype == KERN_F32) {
		float f;

		u = (v >> keep << 31 | sym << 23 |
			(v & ((1u << keep) - 1)) << tr[l]) &
		    (0u - nz);
		memcpy(&f, &u, 4);
		if (add)
			((float *)out)[i] += f;
		else
			((float *)out)[i] = f;
	} else {
		(void)gcomp_store(out, i, dtype, add, sym, v >> keep,
		    (v & ((1u << keep) - 1)) << tr[l]);
	}
}

/* A planes chunk's header, read and checked. */
typedef struct planes_chunk {
	uint64_t c;                        /* chunk index */
	uint64_t hoff;                     /* its header's offset */
	uint64_t off;                      /* its data's offset */
	uint64_t m;                        /* values */
	uint64_t nx;                       /* listed values */
	uint64_t mB;                       /* sign and mantissa bytes */
	uint64_t bits[KERN_GCOMP_STREAMS]; /* each stream's bits */
	uint64_t bytes;                    /* the data's bytes */
	int raw;                           /* stored raw */
} planes_chunk;

/* Reads chunk c's header into pc: its data must start at expect, hold 1
 * to KERN_GCOMP_CHUNK values (at most left) and end inside the block.
 * Returns 0 or BELLOWS_EPROTO with errbuf saying what. */
static int
planes_chunk_read(const uint8_t *in, uint64_t block, int dtype, uint64_t c,
    uint64_t expect, uint64_t left, planes_chunk *pc, char *errbuf,
    size_t errlen)
{
	const uint8_t *h = in + KERN_GCOMP_HEADER +
	    c * KERN_GCOMP_CHUNK_HEADER2;
	unsigned long long hoff = KERN_GCOMP_HEADER +
	    c * KERN_GCOMP_CHUNK_HEADER2;
	uint64_t sum = 0;

	*pc = (planes_chunk){ .c = c,
		.hoff = hoff,
		.off = get_le64(h),
		.m = get_le32(h + 8),
		.nx = get_le32(h + 16),
		.mB = get_le32(h + 36),
		.raw = h[12] == KERN_GCOMP_MODE_RAW };
	if (pc->off != expect) {
		com_errf(errbuf, errlen,
		    "byte %llu: chunk %llu starts at %llu, %llu expected", hoff,
		    (unsigned long long)c, (unsigned long long)pc->off,
		    (unsigned long long)expect);
		return BELLOWS_EPROTO;
	}
	if (pc->m == 0 || pc->m > KERN_GCOMP_CHUNK || pc->m > left) {
		com_errf(errbuf, errlen,
		    "byte %llu: chunk %llu holds %llu values, %llu left (at "
		    "most %d a chunk)",
		    hoff + 8, (unsigned long long)c, (unsigned long long)pc->m,
		    (unsigned long long)left, KERN_GCOMP_CHUNK);
		return BELLOWS_EPROTO;
	}
	for (unsigned k = 0; k < KERN_GCOMP_STREAMS; k++) {
		pc->bits[k] = get_le32(h + 20 + 4 * k);
		sum += (pc->bits[k] + 7) / 8;
	}
	if (h[12] > KERN_GCOMP_MODE_RAW || h[13] != 0 || h[14] != 0 ||
	    h[15] != 0 ||
	    (pc->raw && (pc->nx != 0 || pc->mB != 0 || sum != 0))) {
		com_errf(errbuf, errlen,
		    "byte %llu: chunk %llu: mode %u with these fields is no "
		    "chunk of format 2",
		    hoff + 12, (unsigned long long)c, h[12]);
		return BELLOWS_EPROTO;
	}
	pc->bytes = pc->raw ? pc->m * planes_esz(dtype)
			    : sum + 8 * pc->nx + pc->mB;
	if (pc->bytes > block - pc->off) {
		com_errf(errbuf, errlen,
		    "byte %llu: chunk %llu truncated (%llu bytes from byte "
		    "%llu, the block ends at %llu)",
		    (unsigned long long)block, (unsigned long long)c,
		    (unsigned long long)pc->bytes, (unsigned long long)pc->off,
		    (unsigned long long)block);
		return BELLOWS_EPROTO;
	}
	return 0;
}

/* Decodes stream k's remaining symbols, pos to end, with checked refills.
 * Returns 0 or BELLOWS_EPROTO at an unused code. */
static int
planes_stream_checked(const kern_gcomp_table *t, gcomp_br *r, uint64_t pos,
    uint64_t end, uint8_t *syms, const planes_chunk *pc, uint64_t done,
    const uint8_t *in, char *errbuf, size_t errlen)
{
	unsigned maxb = t->h.max_bits;

	for (; pos < end; pos++) {
		unsigned e, sym;

		if (r->cnt < 24)
			br_refill(r);
		e = t->lut[r->bits >> (64 - maxb)];
		sym = e >> 4;
		if (sym == KERN_GCOMP_BAD) {
			com_errf(errbuf, errlen,
			    "byte %llu: chunk %llu value %llu: no exponent "
			    "has this code",
			    (unsigned long long)(r->start - in +
				br_used(r) / 8),
			    (unsigned long long)pc->c,
			    (unsigned long long)(done + pos));
			return BELLOWS_EPROTO;
		}
		(void)br_get(r, e & 15u);
		if (sym == KERN_GCOMP_ESC)
			sym = br_get(r, 8);
		syms[pos] = (uint8_t)sym;
	}
	return 0;
}

/* Decodes a planes chunk's exponent symbols into syms (pc->m of them) and
 * checks each stream's bits against its header. The fast path runs the
 * streams side by side (kern_gcomp_planes.h; simd: its AVX2 build) as far as
 * they go without a check. Returns 0 or BELLOWS_EPROTO. */
static int
planes_syms(const kern_gcomp_table *t, const uint8_t *in,
    const planes_chunk *pc, uint64_t done, int fast, int simd, uint8_t *syms,
    char *errbuf, size_t errlen)
{
	gcomp_br r[KERN_GCOMP_STREAMS];
	planes_streams s;
	const uint8_t *p = in + pc->off;
	int rc;

	for (unsigned k = 0; k < KERN_GCOMP_STREAMS; k++) {
		uint64_t a, cnt;

		planes_stream_span(pc->m, k, &a, &cnt);
		s.p[k] = p;
		p += (pc->bits[k] + 7) / 8;
		s.end[k] = p;
		s.c[k] = 0;
		s.o[k] = syms + a;
		s.oend[k] = syms + a + cnt;
	}
	if (fast && t->h.max_bits <= KERN_GCOMP_LUT2_BITS) {
#ifdef KERN_HAVE_X86
		if (simd)
			kern_gcomp_planes_run_avx2(t->plut, &s);
		else
#endif
			planes_streams_run(t->plut, &s);
	}
	(void)simd;
	for (unsigned k = 0; k < KERN_GCOMP_STREAMS; k++) {
		/* The checked reader from where the fast one stopped. */
		const uint8_t *start = in + pc->off;

		for (unsigned j = 0; j < k; j++)
			start += (pc->bits[j] + 7) / 8;
		r[k] = (gcomp_br){ .p = s.p[k] + (s.c[k] >> 3),
			.start = start,
			.end = s.end[k] };
		br_refill(&r[k]);
		(void)br_get0(&r[k], s.c[k] & 7u);
		rc = planes_stream_checked(t, &r[k], (uint64_t)(s.o[k] - syms),
		    (uint64_t)(s.oend[k] - syms), syms, pc, done, in, errbuf,
		    errlen);
		if (rc < 0)
			return rc;
	}
	for (unsigned k = 0; k < KERN_GCOMP_STREAMS; k++) {
		if (br_used(&r[k]) != pc->bits[k]) {
			com_errf(errbuf, errlen,
			    "byte %llu: chunk %llu: stream %u holds %llu bits, "
			    "decoding used %llu",
			    (unsigned long long)(pc->hoff + 20 + 4 * k),
			    (unsigned long long)pc->c, k,
			    (unsigned long long)pc->bits[k],
			    (unsigned long long)br_used(&r[k]));
			return BELLOWS_EPROTO;
		}
	}
	return 0;
}

/* Says that a planes chunk's sign and mantissa bytes do not match its
 * non-zero symbols. Returns BELLOWS_EPROTO. */
static int
planes_mant_error(const planes_chunk *pc, const uint8_t *syms, char *errbuf,
    size_t errlen)
{
	uint64_t nz = 0;

	for (uint64_t i = 0; i < pc->m; i++)
		nz += syms[i] != 0;
	com_errf(errbuf, errlen,
	    "byte %llu: chunk %llu: %llu mantissa bytes for %llu non-zero "
	    "exponents",
	    (unsigned long long)(pc->hoff + 36), (unsigned long long)pc->c,
	    (unsigned long long)pc->mB, (unsigned long long)nz);
	return BELLOWS_EPROTO;
}

/* Checks a planes chunk's listed values: ascending indices of symbol-0
 * values, each a subnormal or -0 of dtype. Returns 0 or
 * BELLOWS_EPROTO. */
static int
planes_check(const uint8_t *in, uint64_t xoff, const planes_chunk *pc,
    int dtype, const uint8_t *syms, char *errbuf, size_t errlen)
{
	const uint8_t *xp = in + xoff;
	uint64_t prev = 0;
	uint32_t emask = dtype == KERN_F32 ? 0x7f800000u : 0x7f80u;
	uint32_t vmax = dtype == KERN_F32 ? UINT32_MAX : 0xffffu;

	for (uint64_t j = 0; j < pc->nx; j++) {
		uint64_t at = get_le32(xp + 8 * j);
		uint32_t u = get_le32(xp + 8 * j + 4);

		if (at >= pc->m || (j > 0 && at <= prev) || syms[at] != 0 ||
		    u == 0 || u > vmax || (u & emask) != 0) {
			com_errf(errbuf, errlen,
			    "byte %llu: chunk %llu: listed value %llu (index "
			    "%llu, bits 0x%x) is no subnormal or -0 of a zero "
			    "exponent in order",
			    (unsigned long long)(xoff + 8 * j),
			    (unsigned long long)pc->c, (unsigned long long)j,
			    (unsigned long long)at, u);
			return BELLOWS_EPROTO;
		}
		prev = at;
	}
	return 0;
}

/* Writes value i (out index) from its symbol and sign-and-mantissa bits
 * v (planes layout), for a symbol known to be a float32 or bfloat16
 * exponent. */
static inline __attribute__((always_inline)) void
planes_put(void *out, uint64_t i, int dtype, int add, unsigned sym, uint32_t v)
{
	uint32_t mask = 0u - (sym != 0);

	if (dtype == KERN_F32) {
		uint32_t u = ((v & 0x800000u) << 8 | sym << 23 |
				 (v & 0x7fffffu)) &
		    mask;
		float f;

		memcpy(&f, &u, 4);
		if (add)
			((float *)out)[i] += f;
		else
			((float *)out)[i] = f;
	} else {
		uint16_t h = (uint16_t)(((v & 0x80u) << 8 | sym << 7 |
					    (v & 0x7fu)) &
		    mask);

		memcpy((uint8_t *)out + 2 * i, &h, 2);
	}
}

/* Writes a planes chunk's values to out from i0: symbols with their signs
 * and mantissas (the listed values come after, planes_list_put). The
 * fast path takes float32 values 8 at a time with simd (AVX2,
 * kern_gcomp_avx2.c), then loads 4 bytes per value while 4 are left; the
 * reference path reads each value's own bytes. Returns 0, or -1 when the
 * non-zero symbols do not use the sign and mantissa bytes exactly (out
 * then partly written). */
static inline __attribute__((always_inline)) int
planes_values(const uint8_t *in, uint64_t xoff, const planes_chunk *pc,
    int dtype, int add, int fast, int simd, const uint8_t *syms, void *out,
    uint64_t i0)
{
	const unsigned mbytes = planes_mbytes(dtype);
	const uint8_t *mp = in + xoff + 8 * pc->nx, *mend = mp + pc->mB;
	uint64_t i = 0;

#ifdef KERN_HAVE_X86
	if (fast && simd && dtype == KERN_F32)
		i = kern_gcomp_planes_f32_avx2(syms, pc->m, mp, mend,
		    (float *)out + i0, add, &mp);
#else
	(void)simd;
#endif
	if (fast) {
		for (; i < pc->m && mend - mp >= 4; i++) {
			unsigned sym = syms[i];

			planes_put(out, i0 + i, dtype, add, sym, get_le32(mp));
			mp += mbytes * (sym != 0);
		}
	}
	for (; i < pc->m; i++) {
		unsigned sym = syms[i];
		uint32_t v = 0;

		if (sym != 0 && mend - mp < (ptrdiff_t)mbytes)
			return -1;
		for (unsigned b = 0; sym != 0 && b < mbytes; b++)
			v |= (uint32_t)mp[b] << (8 * b);
		planes_put(out, i0 + i, dtype, add, sym, v);
		mp += mbytes * (sym != 0);
	}
	return mp == mend ? 0 : -1;
}

/* Writes a planes chunk's listed values (checked) over their zeros. */
static void
planes_list_put(const uint8_t *in, uint64_t xoff, const planes_chunk *pc,
    int dtype, int add, void *out, uint64_t i0)
{
	for (uint64_t j = 0; j < pc->nx; j++) {
		uint64_t k = i0 + get_le32(in + xoff + 8 * j);
		uint32_t u = get_le32(in + xoff + 8 * j + 4);

		if (dtype == KERN_F32) {
			float f;

			memcpy(&f, &u, 4);
			if (add)
				((float *)out)[k] += f;
			else
				((float *)out)[k] = f;
		} else {
			uint16_t h = (uint16_t)u;

			memcpy((uint8_t *)out + 2 * k, &h, 2);
		}
	}
}

/* Writes a raw chunk's values (add: float32 sums). */
static void
planes_raw_values(const uint8_t *src, uint64_t m, int dtype, int add, void *out,
    uint64_t i0)
{
	if (dtype == KERN_F32 && add) {
		for (uint64_t i = 0; i < m; i++) {
			float f;

			memcpy(&f, src + 4 * i, 4);
			((float *)out)[i0 + i] += f;
		}
		return;
	}
	memcpy((uint8_t *)out + i0 * planes_esz(dtype), src,
	    m * planes_esz(dtype));
}

/* kern_gcomp_decode of a planes block (format 2) whose header, n, dtype
 * and table version the caller checked. A chunk's exponents are all
 * decoded and checked before its values are written. */
static inline __attribute__((always_inline)) int
planes_decode(const kern_gcomp_table *t, const uint8_t *in, uint64_t block,
    int dtype, void *out, uint64_t n, int add, int fast, char *errbuf,
    size_t errlen)
{
	uint8_t syms[KERN_GCOMP_CHUNK + 2];
	uint64_t chunks = get_le32(in + 12), done = 0;
	uint64_t expect = KERN_GCOMP_HEADER + chunks * KERN_GCOMP_CHUNK_HEADER2;
	planes_chunk pc;
	int rc, simd = 0;

#ifdef KERN_HAVE_X86
	simd = fast && kern_cpu_isa_supported(KERN_ISA_AVX2) &&
	    __builtin_cpu_supports("bmi2");
#endif
	if (dtype == KERN_F16) {
		com_errf(errbuf, errlen,
		    "byte 5: format 2 holds no float16 blocks");
		return BELLOWS_EPROTO;
	}
	for (uint64_t c = 0; c < chunks; c++) {
		uint64_t xoff;

		rc = planes_chunk_read(in, block, dtype, c, expect, n - done,
		    &pc, errbuf, errlen);
		if (rc < 0)
			return rc;
		if (pc.raw) {
			planes_raw_values(in + pc.off, pc.m, dtype, add, out,
			    done);
		} else {
			rc = planes_syms(t, in, &pc, done, fast, simd, syms,
			    errbuf, errlen);
			xoff = pc.off + pc.bytes - pc.mB - 8 * pc.nx;
			if (rc < 0)
				return rc;
			if (planes_values(in, xoff, &pc, dtype, add, fast, simd,
				syms, out, done) < 0)
				return planes_mant_error(&pc, syms, errbuf,
				    errlen);
			rc = planes_check(in, xoff, &pc, dtype, syms, errbuf,
			    errlen);
			if (rc < 0)
				return rc;
			planes_list_put(in, xoff, &pc, dtype, add, out, done);
		}
		done += pc.m;
		expect = pc.off + pc.bytes;
	}
	if (done != n || expect != block) {
		com_errf(errbuf, errlen,
		    "byte 12: chunks hold %llu values in %llu bytes, the "
		    "block %llu in %llu",
		    (unsigned long long)done, (unsigned long long)expect,
		    (unsigned long long)n, (unsigned long long)block);
		return BELLOWS_EPROTO;
	}
	return 0;
}

/* kern_gcomp_decode for one dtype (see gcomp_encode_ref); with fast, each
 * chunk's values up to the last 8 bytes of a segment go through
 * unconditional refills. */
static inline __attribute__((always_inline)) int
gcomp_decode(const kern_gcomp_table *t, const uint8_t *in, size_t bytes,
    int dtype, void *out, uint64_t n, int add, int fast, char *errbuf,
    size_t errlen)
{
	uint8_t syms[KERN_GCOMP_CHUNK + 1];
	uint64_t bn, block, chunks, expect, done = 0;
	unsigned maxb = t->h.max_bits, mb;
	const unsigned *tr;
	uint32_t version;
	int bdtype, rc;

	rc = kern_gcomp_info(in, bytes, &bn, &bdtype, &version, &block, errbuf,
	    errlen);
	if (rc < 0)
		return rc;
	if (bdtype != dtype || bn != n) {
		com_errf(errbuf, errlen,
		    "byte 5: block of %llu values of dtype %d, %llu of dtype "
		    "%d expected",
		    (unsigned long long)bn, bdtype, (unsigned long long)n,
		    dtype);
		return BELLOWS_EMISMATCH;
	}
	if (version != t->h.version) {
		com_errf(errbuf, errlen,
		    "byte 8: block encoded with table version %u, the table "
		    "is version %u",
		    version, t->h.version);
		return BELLOWS_EMISMATCH;
	}
	if (in[4] == KERN_GCOMP_FORMAT_PLANES)
		return planes_decode(t, in, block, dtype, out, n, add, fast,
		    errbuf, errlen);
	mb = gcomp_mbits[dtype];
	tr = gcomp_trunc[dtype];
	chunks = get_le32(in + 12);
	expect = KERN_GCOMP_HEADER + chunks * KERN_GCOMP_CHUNK_HEADER;
	for (uint64_t c = 0; c < chunks; c++) {
		const uint8_t *h = in + KERN_GCOMP_HEADER +
		    c * KERN_GCOMP_CHUNK_HEADER;
		uint64_t hoff = KERN_GCOMP_HEADER + c * KERN_GCOMP_CHUNK_HEADER;
		uint64_t off = get_le64(h), m = get_le32(h + 8);
		uint64_t eb = get_le32(h + 12), lb = get_le32(h + 16);
		uint64_t mbits = get_le32(h + 20);
		uint64_t eB = (eb + 7) / 8, lB = (lb + 7) / 8,
			 mB = (mbits + 7) / 8;
		gcomp_br re, rl, rm;
		uint64_t i;

		if (off != expect) {
			com_errf(errbuf, errlen,
			    "byte %llu: chunk %llu starts at %llu, %llu expected",
			    (unsigned long long)hoff, (unsigned long long)c,
			    (unsigned long long)off,
			    (unsigned long long)expect);
			return BELLOWS_EPROTO;
		}
		if (m == 0 || m > KERN_GCOMP_CHUNK_MAX || m > n - done) {
			com_errf(errbuf, errlen,
			    "byte %llu: chunk %llu holds %llu values, %llu left",
			    (unsigned long long)(hoff + 8),
			    (unsigned long long)c, (unsigned long long)m,
			    (unsigned long long)(n - done));
			return BELLOWS_EPROTO;
		}
		if (eB + lB + mB > block - off) {
			com_errf(errbuf, errlen,
			    "byte %llu: chunk %llu truncated (%llu bytes from "
			    "byte %llu, the block ends at %llu)",
			    (unsigned long long)block, (unsigned long long)c,
			    (unsigned long long)(eB + lB + mB),
			    (unsigned long long)off, (unsigned long long)block);
			return BELLOWS_EPROTO;
		}
		br_init(&re, in + off, eB);
		br_init(&rl, in + off + eB, lB);
		br_init(&rm, in + off + eB + lB, mB);
		i = done;
		/* Fast: groups of 16 values while every segment has room for
		 * a group and an 8-byte load, so that the readers refill
		 * without a check: the level reader once a group (16 x 2
		 * bits), the exponent and mantissa readers every 2 values (at
		 * most 2 x 23 and 2 x 24 bits of the 56 a refill leaves). An
		 * escape, an unused code or a float16 symbol out of range
		 * leaves, before reading the value, for the checked loop
		 * below, which also takes the chunk's last values. */
		/* Fast, float32 and bfloat16 with a pair LUT: the chunk's
		 * exponents first, two codes per lookup where they fit
		 * (phase A, up to an unused code, stopping one value short of
		 * the chunk's end so a pair never runs past it), then their
		 * levels and mantissas (phase B: groups as below, then
		 * checked refills). */
		if (fast && dtype != KERN_F16 && maxb <= KERN_GCOMP_LUT2_BITS &&
		    m <= KERN_GCOMP_CHUNK) {
			uint64_t ja = i;

			while (ja + 2 <= done + m && re.end - re.p >= 8) {
				uint32_t e;
				unsigned s1;

				br_refill8(&re);
				e = t->lut2[re.bits >> (64 - maxb)];
				s1 = (e >> 5) & 511u;
				if (s1 == KERN_GCOMP_ESC) {
					(void)br_get(&re, e & 31u);
					syms[ja++ - done] = (uint8_t)br_get(&re,
					    8);
					continue;
				}
				if (s1 == KERN_GCOMP_BAD)
					break;
				syms[ja - done] = (uint8_t)s1;
				syms[ja + 1 - done] = (uint8_t)(e >> 14);
				(void)br_get(&re, e & 31u);
				ja += e >> 23;
			}
			while (ja - i >= 16 && rl.end - rl.p >= 8 &&
			    rm.end - rm.p >= 56) {
				br_refill8(&rl);
				for (unsigned k = 0; k < 16; k++, i++) {
					if ((k & 1u) == 0)
						br_refill8(&rm);
					gcomp_value_b(&rl, &rm, syms[i - done],
					    mb, tr, dtype, add, out, i);
				}
			}
			for (; i < ja; i++) {
				if (rl.cnt < 2)
					br_refill(&rl);
				if (rm.cnt < 24)
					br_refill(&rm);
				gcomp_value_b(&rl, &rm, syms[i - done], mb, tr,
				    dtype, add, out, i);
			}
		}
		while (fast && done + m - i >= 16 && re.end - re.p >= 56 &&
		    rl.end - rl.p >= 8 && rm.end - rm.p >= 56) {
			br_refill8(&rl);
			for (unsigned k = 0; k < 16; k++, i++) {
				unsigned e, sym, l, keep, nz;
				uint32_t v, u;

				if ((k & 1u) == 0) {
					br_refill8(&re);
					br_refill8(&rm);
				}
				e = t->lut[re.bits >> (64 - maxb)];
				sym = e >> 4;
				if (sym >= KERN_GCOMP_ESC ||
				    (dtype == KERN_F16 && sym != 0 &&
					sym != 255 && (sym < 103 || sym > 142)))
					goto checked;
				(void)br_get(&re, e & 15u);
				nz = sym != 0;
				l = br_get0(&rl, 2 * nz);
				l = sym == 255 ? 0 : l;
				keep = mb - tr[l];
				v = br_get0(&rm, nz * (1 + keep));
				if (dtype == KERN_F32) {
					float f;

					u = (v >> keep << 31 | sym << 23 |
						(v & ((1u << keep) - 1))
						    << tr[l]) &
					    (0u - nz);
					memcpy(&f, &u, 4);
					if (add)
						((float *)out)[i] += f;
					else
						((float *)out)[i] = f;
				} else {
					(void)gcomp_store(out, i, dtype, add,
					    sym, v >> keep,
					    (v & ((1u << keep) - 1)) << tr[l]);
				}
			}
		}
checked:
		for (; i < done + m; i++) {
			unsigned e, sym, len, l, keep, nz;
			uint32_t v;

			if (re.cnt < 24)
				br_refill(&re);
			e = t->lut[re.bits >> (64 - maxb)];
			sym = e >> 4;
			len = e & 15u;
			if (sym == KERN_GCOMP_BAD) {
				com_errf(errbuf, errlen,
				    "byte %llu: chunk %llu value %llu: no "
				    "exponent has this code",
				    (unsigned long long)(off +
					br_used(&re) / 8),
				    (unsigned long long)c,
				    (unsigned long long)i);
				return BELLOWS_EPROTO;
			}
			(void)br_get(&re, len);
			if (sym == KERN_GCOMP_ESC)
				sym = br_get(&re, 8);
			/* A zero reads 0 bits from the level and mantissa
			 * segments: no branch. */
			nz = sym != 0;
			if (rl.cnt < 2)
				br_refill(&rl);
			l = br_get0(&rl, 2 * nz);
			l = sym == 255 ? 0
				       : l; /* never written: Inf/NaN whole */
			keep = mb - tr[l];
			if (rm.cnt < 24)
				br_refill(&rm);
			v = br_get0(&rm, nz * (1 + keep));
			if (gcomp_store(out, i, dtype, add, sym, v >> keep,
				(v & ((1u << keep) - 1)) << tr[l]) < 0) {
				com_errf(errbuf, errlen,
				    "byte %llu: chunk %llu value %llu: "
				    "exponent %u is no float16's",
				    (unsigned long long)(off +
					br_used(&re) / 8),
				    (unsigned long long)c,
				    (unsigned long long)i, sym);
				return BELLOWS_EPROTO;
			}
		}
		if (br_used(&re) != eb || br_used(&rl) != lb ||
		    br_used(&rm) != mbits) {
			com_errf(errbuf, errlen,
			    "byte %llu: chunk %llu: its segments hold %llu, "
			    "%llu and %llu bits, decoding used %llu, %llu and "
			    "%llu",
			    (unsigned long long)(hoff + 12),
			    (unsigned long long)c, (unsigned long long)eb,
			    (unsigned long long)lb, (unsigned long long)mbits,
			    (unsigned long long)br_used(&re),
			    (unsigned long long)br_used(&rl),
			    (unsigned long long)br_used(&rm));
			return BELLOWS_EPROTO;
		}
		done += m;
		expect = off + eB + lB + mB;
	}
	if (done != n || expect != block) {
		com_errf(errbuf, errlen,
		    "byte 12: chunks hold %llu values in %llu bytes, the "
		    "block %llu in %llu",
		    (unsigned long long)done, (unsigned long long)expect,
		    (unsigned long long)n, (unsigned long long)block);
		return BELLOWS_EPROTO;
	}
	return 0;
}

int
kern_gcomp_decode_path(int path, const kern_gcomp_table *t, const uint8_t *in,
    size_t bytes, int dtype, void *out, uint64_t n, int add, char *errbuf,
    size_t errlen)
{
	int fast = path == KERN_GCOMP_PATH_FAST;

	if (path != KERN_GCOMP_PATH_FAST && path != KERN_GCOMP_PATH_REF)
		return BELLOWS_EINVAL;
	switch (dtype) {
	case KERN_F32:
		if (fast)
			return add ? gcomp_decode(t, in, bytes, KERN_F32, out,
					 n, 1, 1, errbuf, errlen)
				   : gcomp_decode(t, in, bytes, KERN_F32, out,
					 n, 0, 1, errbuf, errlen);
		return gcomp_decode(t, in, bytes, KERN_F32, out, n, add, 0,
		    errbuf, errlen);
	case KERN_F16:
		return fast ? gcomp_decode(t, in, bytes, KERN_F16, out, n, add,
				  1, errbuf, errlen)
			    : gcomp_decode(t, in, bytes, KERN_F16, out, n, add,
				  0, errbuf, errlen);
	case KERN_BF16:
		return fast ? gcomp_decode(t, in, bytes, KERN_BF16, out, n, add,
				  1, errbuf, errlen)
			    : gcomp_decode(t, in, bytes, KERN_BF16, out, n, add,
				  0, errbuf, errlen);
	default:
		return BELLOWS_EINVAL;
	}
}

int
kern_gcomp_decode(const kern_gcomp_table *t, const uint8_t *in, size_t bytes,
    int dtype, void *out, uint64_t n, int add, char *errbuf, size_t errlen)
{
	return kern_gcomp_decode_path(KERN_GCOMP_PATH_FAST, t, in, bytes, dtype,
	    out, n, add, errbuf, errlen);
}

/* The bias corrections 1 - beta^t, once per call (host pow, so that the
 * CUDA twin gets the same doubles). */
static void
gcomp_bias(const kern_gcomp_opt *o, double *c1, double *c2)
{
	*c1 = 1.0 - pow(o->beta1, (double)o->step);
	*c2 = 1.0 - pow(o->beta2, (double)o->step);
}

double
kern_gcomp_delta(const kern_gcomp_opt *o, uint64_t i, double g)
{
	double c1, c2;

	gcomp_bias(o, &c1, &c2);
	return gcomp_delta_k(o, o->kind, o->buf != NULL, i, g, c1, c2);
}

int
kern_gcomp_levels_isa(int isa, const kern_gcomp_opt *o, int dtype,
    const void *grad, uint64_t n, int max_level, uint8_t *levels)
{
	double scale, lim[4], c1, c2;

	if (o == NULL ||
	    (n > 0 && (grad == NULL || levels == NULL || o->param == NULL)))
		return BELLOWS_EINVAL;
	if (o->kind < KERN_GCOMP_SGD || o->kind > KERN_GCOMP_ADAMW ||
	    max_level < 0 || max_level > 3 ||
	    (dtype != KERN_F32 && dtype != KERN_F16 && dtype != KERN_BF16))
		return BELLOWS_EINVAL;
	if ((o->kind == KERN_GCOMP_ADAM || o->kind == KERN_GCOMP_ADAMW) &&
	    o->step < 1)
		return BELLOWS_EINVAL;
	if (isa == KERN_ISA_AUTO)
		isa = kern_cpu_isa_best();
	if (!kern_cpu_isa_supported(isa))
		return BELLOWS_ENOTSUP;
	scale = o->grad_scale != 0.0 ? o->grad_scale : 1.0;
	gcomp_bias(o, &c1, &c2);
	for (int l = 0; l < 4; l++)
		lim[l] = ldexp(1.0, (int)gcomp_trunc[dtype][l]);
#ifdef KERN_HAVE_X86
	if (isa >= KERN_ISA_AVX2) {
		kern_gcomp_levels_avx2(o, dtype, grad, n, max_level, lim, scale,
		    c1, c2, levels);
		return 0;
	}
#endif
	gcomp_levels_dispatch(o, dtype, grad, n, max_level, lim, scale, c1, c2,
	    levels);
	return 0;
}

int
kern_gcomp_levels(const kern_gcomp_opt *o, int dtype, const void *grad,
    uint64_t n, int max_level, uint8_t *levels)
{
	return kern_gcomp_levels_isa(KERN_ISA_AUTO, o, dtype, grad, n,
	    max_level, levels);
}
