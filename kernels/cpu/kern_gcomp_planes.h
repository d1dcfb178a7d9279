/* kern_gcomp_planes - the fast exponent decoder of GComp's format 2 (the
 * planes layout, see kern_gcomp.h), shared by the portable build (kern_gcomp.c)
 * and the AVX2 build (kern_gcomp_avx2.c, which adds BMI2's shifts): a chunk's
 * KERN_GCOMP_STREAMS streams decoded side by side, up to four codes per
 * lookup of 11 bits, so that the streams' dependency chains overlap.
 *
 * Each stream's state is a byte pointer and the bits of that byte already
 * used; every lookup loads the 8 bytes at the pointer, so no bit buffer
 * is carried from lookup to lookup. */
#ifndef KERN_CPU_GCOMP_PLANES_H
#define KERN_CPU_GCOMP_PLANES_H

#include <stdint.h>
#include <string.h>

#include "kern_gcomp.h"

/* The planes LUT (kern_gcomp_table.plut) is indexed by the next
 * KERN_GCOMP_PLUT_BITS bits. An entry: bits 0-31 up to 4 symbols, first
 * in the low byte; 32-36 the bits of them all (of the escape code alone
 * for an escape); 40-42 how many (1..4); bit 63 set for an escape, bits
 * 63 and 62 for an unused code. */
#define PLANES_LUT_ESC (UINT64_C(1) << 63)
#define PLANES_LUT_BAD (UINT64_C(3) << 62)

/* The streams of one chunk, between the decoders. */
typedef struct planes_streams {
	const uint8_t *p[KERN_GCOMP_STREAMS];   /* byte of the next bit */
	const uint8_t *end[KERN_GCOMP_STREAMS]; /* the stream's end */
	unsigned c[KERN_GCOMP_STREAMS];         /* bits of *p used */
	uint8_t *o[KERN_GCOMP_STREAMS];         /* next symbol */
	uint8_t *oend[KERN_GCOMP_STREAMS];      /* the stream's last + 1 */
} planes_streams;

static inline __attribute__((always_inline)) uint64_t
planes_load_be64(const uint8_t *p)
{
	uint64_t w;

	memcpy(&w, p, 8);
	return __builtin_bswap64(w);
}

/* Rounds that need no check: a round moves each pointer on by at most
 * 6 bytes (c <= 7 + 2 x 23 bits), loads 8 bytes there and writes at
 * most 8 symbols (two 4-byte stores). */
static inline __attribute__((always_inline)) int64_t
planes_rounds(const planes_streams *s)
{
	int64_t n = INT64_MAX;

	for (unsigned k = 0; k < KERN_GCOMP_STREAMS; k++) {
		int64_t by = (int64_t)(s->end[k] - s->p[k]) - 8;
		int64_t sy = (int64_t)(s->oend[k] - s->o[k]) / 8;
		int64_t rk = by < 6 ? 0 : by / 6;

		rk = rk < sy ? rk : sy;
		n = rk < n ? rk : n;
	}
	return n;
}

/* One lookup of stream (p, c, o): up to 4 symbols. Returns 0, or -1 at
 * an unused code (nothing consumed). */
static inline __attribute__((always_inline)) int
planes_look(const uint64_t *plut, const uint8_t *p, unsigned *c, uint8_t **o)
{
	uint64_t w = planes_load_be64(p) << *c;
	uint64_t e = plut[w >> (64 - KERN_GCOMP_PLUT_BITS)];

	if (__builtin_expect(e >= PLANES_LUT_ESC, 0)) {
		unsigned len = (unsigned)(e >> 32) & 31u;

		if (e >= PLANES_LUT_BAD)
			return -1;
		**o = (uint8_t)(w << len >> 56);
		*o += 1;
		*c += len + 8;
		return 0;
	}
	(*o)[0] = (uint8_t)e;
	(*o)[1] = (uint8_t)(e >> 8);
	(*o)[2] = (uint8_t)(e >> 16);
	(*o)[3] = (uint8_t)(e >> 24);
	*o += (e >> 40) & 7u;
	*c += (unsigned)(e >> 32) & 31u;
	return 0;
}

/* Goes on with stream k alone while it has 14 bytes and 8 symbols left
 * (the other streams may be far from their ends when the first nears
 * its own). Returns 0, or -1 at an unused code. */
static inline __attribute__((always_inline)) int
planes_stream_alone(const uint64_t *plut, planes_streams *s, unsigned k)
{
	const uint8_t *p = s->p[k], *end = s->end[k];
	unsigned c = s->c[k];
	uint8_t *o = s->o[k], *oend = s->oend[k];
	int rc = 0;

	while (end - p >= 14 && oend - o >= 8 && rc == 0) {
		p += c >> 3;
		c &= 7u;
		rc = planes_look(plut, p, &c, &o);
		if (rc == 0)
			rc = planes_look(plut, p, &c, &o);
	}
	s->p[k] = p;
	s->c[k] = c;
	s->o[k] = o;
	return rc;
}

/* Goes on with stream k on a copy of its last bytes (at most 32) padded
 * with zero bytes, which is what the checked reader sees past a
 * segment's end, while 4 symbols are left: then only the last 3 symbols
 * of a stream need the checked loop. */
static inline __attribute__((always_inline)) void
planes_stream_tail(const uint64_t *plut, planes_streams *s, unsigned k)
{
	uint8_t buf[72];
	const uint8_t *p = s->p[k] + (s->c[k] >> 3), *q = buf;
	unsigned c = s->c[k] & 7u;
	uint8_t *o = s->o[k];
	int64_t left = s->end[k] - p;

	if (left < 0 || left > 32)
		return;
	memset(buf, 0, sizeof(buf));
	memcpy(buf, p, (size_t)left);
	while (s->oend[k] - o >= 4) {
		q += c >> 3;
		c &= 7u;
		if (q + 8 > buf + sizeof(buf) ||
		    planes_look(plut, q, &c, &o) < 0)
			break;
	}
	s->p[k] = p + (q - buf);
	s->c[k] = c;
	s->o[k] = o;
}

/* Decodes all streams side by side until one nears its end or meets an
 * unused code, then each alone to its last bytes; the caller's checked
 * loop goes on from s. */
static inline __attribute__((always_inline)) void
planes_streams_run(const uint64_t *plut, planes_streams *s)
{
	int64_t rounds;

	while ((rounds = planes_rounds(s)) > 0) {
		const uint8_t *p0 = s->p[0], *p1 = s->p[1], *p2 = s->p[2],
			      *p3 = s->p[3];
		unsigned c0 = s->c[0], c1 = s->c[1], c2 = s->c[2], c3 = s->c[3];
		uint8_t *o0 = s->o[0], *o1 = s->o[1], *o2 = s->o[2],
			*o3 = s->o[3];
		int bad = 0;

		for (int64_t j = 0; j < rounds && !bad; j++) {
			p0 += c0 >> 3;
			c0 &= 7u;
			p1 += c1 >> 3;
			c1 &= 7u;
			p2 += c2 >> 3;
			c2 &= 7u;
			p3 += c3 >> 3;
			c3 &= 7u;
			bad |= planes_look(plut, p0, &c0, &o0);
			bad |= planes_look(plut, p1, &c1, &o1);
			bad |= planes_look(plut, p2, &c2, &o2);
			bad |= planes_look(plut, p3, &c3, &o3);
			bad |= planes_look(plut, p0, &c0, &o0);
			bad |= planes_look(plut, p1, &c1, &o1);
			bad |= planes_look(plut, p2, &c2, &o2);
			bad |= planes_look(plut, p3, &c3, &o3);
		}
		s->p[0] = p0;
		s->p[1] = p1;
		s->p[2] = p2;
		s->p[3] = p3;
		s->c[0] = c0;
		s->c[1] = c1;
		s->c[2] = c2;
		s->c[3] = c3;
		s->o[0] = o0;
		s->o[1] = o1;
		s->o[2] = o2;
		s->o[3] = o3;
		if (bad)
			return;
	}
	for (unsigned k = 0; k < KERN_GCOMP_STREAMS; k++)
		if (planes_stream_alone(plut, s, k) == 0)
			planes_stream_tail(plut, s, k);
}

#ifdef KERN_HAVE_X86
/* planes_streams_run built for AVX2 processors with BMI2 (its shifts). */
void kern_gcomp_planes_run_avx2(const uint64_t *plut, planes_streams *s);
#endif

#endif /* KERN_CPU_GCOMP_PLANES_H */
