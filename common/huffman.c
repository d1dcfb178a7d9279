/* huffman - GComp's canonical, length-limited exponent code; see huffman.h
 * for the construction and the serialised format.
 *
 * Sizes are tiny (at most 257 symbols, 15 bits), so the simple quadratic
 * algorithms are used: no allocation, everything on the stack.
 */
#include "huffman.h"

#include <math.h>
#include <string.h>

#include <bellows/error.h>

#include "errbuf.h"

#define HUFF_ESC   256 /* the escape, as a symbol sorting after 255 */
#define HUFF_ITEMS 257 /* exponents and the escape */

/* Native (unlimited) Huffman lengths of the symbols with a non-zero count;
 * the others get 0. Ties: the node whose lowest symbol is lower first.
 * A single symbol gets length 1. */
static void
huff_native(const uint64_t *hist, unsigned *len)
{
	uint64_t w[2 * COM_HUFF_SYMBOLS]; /* node weights */
	int low[2 * COM_HUFF_SYMBOLS];    /* lowest symbol under a node */
	int parent[2 * COM_HUFF_SYMBOLS]; /* parent node, -1 at the root */
	unsigned char live[2 * COM_HUFF_SYMBOLS];
	int leaf[COM_HUFF_SYMBOLS]; /* node of symbol s, -1 none */
	int nodes = 0, n_live = 0;

	for (int s = 0; s < COM_HUFF_SYMBOLS; s++) {
		len[s] = 0;
		leaf[s] = -1;
		if (hist[s] == 0)
			continue;
		leaf[s] = nodes;
		w[nodes] = hist[s];
		low[nodes] = s;
		parent[nodes] = -1;
		live[nodes] = 1;
		nodes++;
		n_live++;
	}
	if (n_live == 1) {
		for (int s = 0; s < COM_HUFF_SYMBOLS; s++)
			if (leaf[s] >= 0)
				len[s] = 1;
		return;
	}
	while (n_live > 1) {
		int a = -1, b = -1;

		for (int i = 0; i < nodes; i++) {
			if (!live[i])
				continue;
			if (a < 0 || w[i] < w[a] ||
			    (w[i] == w[a] && low[i] < low[a])) {
				b = a;
				a = i;
			} else if (b < 0 || w[i] < w[b] ||
			    (w[i] == w[b] && low[i] < low[b])) {
				b = i;
			}
		}
		live[a] = live[b] = 0;
		w[nodes] = w[a] + w[b];
		low[nodes] = low[a] < low[b] ? low[a] : low[b];
		parent[nodes] = -1;
		live[nodes] = 1;
		parent[a] = parent[b] = nodes;
		nodes++;
		n_live--;
	}
	for (int s = 0; s < COM_HUFF_SYMBOLS; s++) {
		unsigned d = 0;

		if (leaf[s] < 0)
			continue;
		for (int i = leaf[s]; parent[i] >= 0; i = parent[i])
			d++;
		len[s] = d;
	}
}

/* Optimal lengths of at most max_bits for the n items sym[] (sorted by
 * weight, then symbol) of weights w[], n >= 2 and n <= 2^max_bits, by
 * package-merge: level 1 lists the items; level l merges the items with the
 * pairs of level l-1; the first 2n-2 entries of the last level are taken,
 * and each package taken takes its two entries of the level below. An
 * item's length is the number of its entries taken. */
static void
huff_package_merge(const int *sym, const uint64_t *w, int n, unsigned max_bits,
    unsigned *len)
{
	/* entry[l][i]: an item index (>= 0) or -1 for a package. */
	int16_t entry[COM_HUFF_MAX_BITS][2 * HUFF_ITEMS];
	int count[COM_HUFF_MAX_BITS];
	uint64_t prev_w[2 * HUFF_ITEMS], cur_w[2 * HUFF_ITEMS];
	int need;

	for (int i = 0; i < n; i++) {
		entry[0][i] = (int16_t)i;
		prev_w[i] = w[i];
	}
	count[0] = n;
	for (unsigned l = 1; l < max_bits; l++) {
		int pairs = count[l - 1] / 2, i = 0, p = 0, k = 0;

		while (i < n || p < pairs) {
			uint64_t pw = p < pairs
			    ? prev_w[2 * p] + prev_w[2 * p + 1]
			    : 0;

			/* On equal weights the item goes first. */
			if (p >= pairs || (i < n && w[i] <= pw)) {
				entry[l][k] = (int16_t)i;
				cur_w[k++] = w[i++];
			} else {
				entry[l][k] = -1;
				cur_w[k++] = pw;
				p++;
			}
		}
		count[l] = k;
		memcpy(prev_w, cur_w, (size_t)k * sizeof(prev_w[0]));
	}
	for (int i = 0; i < n; i++)
		len[sym[i]] = 0;
	need = 2 * n - 2;
	for (int l = (int)max_bits - 1; l >= 0 && need > 0; l--) {
		int packages = 0;

		for (int k = 0; k < need && k < count[l]; k++) {
			if (entry[l][k] >= 0)
				len[sym[entry[l][k]]]++;
			else
				packages++;
		}
		need = 2 * packages;
	}
}

/* Canonical codes from lengths (len[256] for the exponents, HUFF_ESC's in
 * esc_len); fills t->code and t->esc_code. Lengths must satisfy Kraft. */
static void
huff_canonical(com_huff_table *t)
{
	uint32_t code = 0;
	unsigned prev = 0;

	for (unsigned l = 1; l <= t->max_bits; l++) {
		for (int s = 0; s <= HUFF_ESC; s++) {
			unsigned ls = s == HUFF_ESC ? t->esc_len : t->len[s];

			if (ls != l)
				continue;
			code <<= (l - prev);
			prev = l;
			if (s == HUFF_ESC)
				t->esc_code = (uint16_t)code;
			else
				t->code[s] = (uint16_t)code;
			code++;
		}
	}
	for (int s = 0; s < COM_HUFF_SYMBOLS; s++)
		if (t->len[s] == 0)
			t->code[s] = 0;
}

int
com_huff_build(const uint64_t *hist, unsigned max_bits, uint32_t version,
    com_huff_table *ret)
{
	unsigned native[COM_HUFF_SYMBOLS], len[HUFF_ITEMS];
	unsigned char kept[COM_HUFF_SYMBOLS];
	int sym[HUFF_ITEMS], n = 0, n_kept = 0;
	uint64_t w[HUFF_ITEMS], esc_w = 0;
	com_huff_table t;

	if (hist == NULL || ret == NULL || max_bits < 1 ||
	    max_bits > COM_HUFF_MAX_BITS)
		return BELLOWS_EINVAL;
	huff_native(hist, native);
	for (int s = 0; s < COM_HUFF_SYMBOLS; s++) {
		kept[s] = hist[s] > 0 && native[s] <= max_bits;
		n_kept += kept[s];
	}
	/* Room for the escape: at most 2^max_bits - 1 kept symbols. */
	while (n_kept > (1 << max_bits) - 1) {
		int lightest = -1;

		for (int s = 0; s < COM_HUFF_SYMBOLS; s++)
			if (kept[s] &&
			    (lightest < 0 || hist[s] <= hist[lightest]))
				lightest = s;
		kept[lightest] = 0;
		n_kept--;
	}
	for (int s = 0; s < COM_HUFF_SYMBOLS; s++)
		if (!kept[s])
			esc_w += hist[s];
	/* Items by (weight, symbol), the escape as symbol 256. */
	for (int s = 0; s <= HUFF_ESC; s++) {
		uint64_t ws;
		int i;

		if (s < HUFF_ESC && !kept[s])
			continue;
		ws = s == HUFF_ESC ? esc_w : hist[s];
		for (i = n; i > 0 && w[i - 1] > ws; i--) {
			w[i] = w[i - 1];
			sym[i] = sym[i - 1];
		}
		w[i] = ws;
		sym[i] = s;
		n++;
	}
	memset(&t, 0, sizeof(t));
	t.version = version;
	t.max_bits = (uint8_t)max_bits;
	memset(len, 0, sizeof(len));
	if (n == 1)
		len[HUFF_ESC] = 1;
	else
		huff_package_merge(sym, w, n, max_bits, len);
	for (int s = 0; s < COM_HUFF_SYMBOLS; s++)
		t.len[s] = (uint8_t)len[s];
	t.esc_len = (uint8_t)len[HUFF_ESC];
	huff_canonical(&t);
	*ret = t;
	return 0;
}

int
com_huff_from_lengths(const uint8_t *lengths, unsigned esc_len,
    unsigned max_bits, uint32_t version, com_huff_table *ret, char *errbuf,
    size_t errlen)
{
	uint64_t kraft;
	com_huff_table t;

	if (lengths == NULL || ret == NULL)
		return BELLOWS_EINVAL;
	if (max_bits < 1 || max_bits > COM_HUFF_MAX_BITS) {
		com_errf(errbuf, errlen, "max_code_bits %u is outside 1..%d",
		    max_bits, COM_HUFF_MAX_BITS);
		return BELLOWS_EPROTO;
	}
	if (esc_len < 1 || esc_len > max_bits) {
		com_errf(errbuf, errlen,
		    "escape length %u is outside 1..%u (max_code_bits)",
		    esc_len, max_bits);
		return BELLOWS_EPROTO;
	}
	kraft = UINT64_C(1) << (max_bits - esc_len);
	for (int s = 0; s < COM_HUFF_SYMBOLS; s++) {
		if (lengths[s] > max_bits) {
			com_errf(errbuf, errlen,
			    "code length %u of exponent %d is above "
			    "max_code_bits %u",
			    lengths[s], s, max_bits);
			return BELLOWS_EPROTO;
		}
		if (lengths[s] > 0)
			kraft += UINT64_C(1) << (max_bits - lengths[s]);
	}
	if (kraft > (UINT64_C(1) << max_bits)) {
		com_errf(errbuf, errlen,
		    "not a prefix code: Kraft sum %.6f is above 1",
		    ldexp((double)kraft, -(int)max_bits));
		return BELLOWS_EPROTO;
	}
	memset(&t, 0, sizeof(t));
	t.version = version;
	t.max_bits = (uint8_t)max_bits;
	t.esc_len = (uint8_t)esc_len;
	memcpy(t.len, lengths, COM_HUFF_SYMBOLS);
	huff_canonical(&t);
	*ret = t;
	return 0;
}

int
com_huff_write(const com_huff_table *t, uint8_t *out, size_t cap)
{
	if (t == NULL || out == NULL)
		return BELLOWS_EINVAL;
	if (cap < COM_HUFF_TABLE_BYTES)
		return BELLOWS_EMSGSIZE;
	out[0] = 'B';
	out[1] = 'G';
	out[2] = 'H';
	out[3] = 'T';
	out[4] = COM_HUFF_FORMAT;
	out[5] = t->max_bits;
	out[6] = t->esc_len;
	out[7] = 0;
	for (int i = 0; i < 4; i++)
		out[8 + i] = (uint8_t)(t->version >> (8 * i));
	memcpy(out + 12, t->len, COM_HUFF_SYMBOLS);
	return 0;
}

int
com_huff_read(const uint8_t *buf, size_t len, com_huff_table *ret,
    size_t *ret_used, char *errbuf, size_t errlen)
{
	char why[160];
	uint32_t version = 0;
	int rc;

	if (buf == NULL || ret == NULL)
		return BELLOWS_EINVAL;
	if (len < 4 || memcmp(buf, "BGHT", 4) != 0) {
		com_errf(errbuf, errlen,
		    "byte 0: not a GComp table (magic 'BGHT' expected)");
		return BELLOWS_EPROTO;
	}
	if (len < COM_HUFF_TABLE_BYTES) {
		com_errf(errbuf, errlen,
		    "byte %zu: table truncated (%d bytes expected)", len,
		    COM_HUFF_TABLE_BYTES);
		return BELLOWS_EPROTO;
	}
	if (buf[4] != COM_HUFF_FORMAT) {
		com_errf(errbuf, errlen,
		    "byte 4: table format %u, this build reads %d", buf[4],
		    COM_HUFF_FORMAT);
		return BELLOWS_EVERSION;
	}
	if (buf[7] != 0) {
		com_errf(errbuf, errlen, "byte 7: reserved byte is %u, not 0",
		    buf[7]);
		return BELLOWS_EPROTO;
	}
	for (int i = 0; i < 4; i++)
		version |= (uint32_t)buf[8 + i] << (8 * i);
	if (buf[5] < 1 || buf[5] > COM_HUFF_MAX_BITS) {
		com_errf(errbuf, errlen,
		    "byte 5: max_code_bits %u is outside "
		    "1..%d",
		    buf[5], COM_HUFF_MAX_BITS);
		return BELLOWS_EPROTO;
	}
	if (buf[6] < 1 || buf[6] > buf[5]) {
		com_errf(errbuf, errlen,
		    "byte 6: escape length %u is outside "
		    "1..%u (max_code_bits)",
		    buf[6], buf[5]);
		return BELLOWS_EPROTO;
	}
	for (int s = 0; s < COM_HUFF_SYMBOLS; s++) {
		if (buf[12 + s] > buf[5]) {
			com_errf(errbuf, errlen,
			    "byte %d: code length %u of exponent %d is above "
			    "max_code_bits %u",
			    12 + s, buf[12 + s], s, buf[5]);
			return BELLOWS_EPROTO;
		}
	}
	rc = com_huff_from_lengths(buf + 12, buf[6], buf[5], version, ret, why,
	    sizeof(why));
	if (rc < 0) {
		com_errf(errbuf, errlen, "bytes 12-267: %s", why);
		return rc;
	}
	if (ret_used != NULL)
		*ret_used = COM_HUFF_TABLE_BYTES;
	return 0;
}

double
com_huff_bits(const com_huff_table *t, const uint64_t *hist)
{
	double bits = 0, total = 0;

	if (t == NULL || hist == NULL)
		return 0;
	for (int s = 0; s < COM_HUFF_SYMBOLS; s++) {
		unsigned l = t->len[s] ? t->len[s]
				       : t->esc_len + COM_HUFF_RAW_BITS;

		bits += (double)hist[s] * l;
		total += (double)hist[s];
	}
	return total > 0 ? bits / total : 0;
}

double
com_huff_entropy(const uint64_t *hist)
{
	double total = 0, h = 0;

	if (hist == NULL)
		return 0;
	for (int s = 0; s < COM_HUFF_SYMBOLS; s++)
		total += (double)hist[s];
	if (!(total > 0))
		return 0;
	for (int s = 0; s < COM_HUFF_SYMBOLS; s++) {
		double p = (double)hist[s] / total;

		if (p > 0)
			h -= p * log2(p);
	}
	return h;
}
