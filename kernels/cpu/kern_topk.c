/* kern_topk - the scalar top-k selection with error feedback; see kern_topk.h
 * for the order, the tie rule and the passes. */
#include "kern_topk.h"

#include <string.h>

#include "../kernels.h"
#include "kern_stats.h"

#define KEY_NAN 0x7f800001u /* every NaN's key: one above +-Inf's */

/* The magnitude key of v: its bits without the sign, NaNs clamped. Keys
 * compare as the magnitudes do. */
static inline uint32_t
key_of(float v)
{
	uint32_t b;

	memcpy(&b, &v, 4);
	b &= 0x7fffffffu;
	return b > KEY_NAN ? KEY_NAN : b;
}

/* Picks the bucket of hist (nb buckets) that holds the need-th largest
 * key; *need becomes the rank within that bucket. Returns the bucket and
 * stores its count in *count. */
static uint32_t
pick(const uint32_t *hist, uint32_t nb, uint64_t *need, uint64_t *count)
{
	uint64_t acc = 0;
	uint32_t b = nb - 1;

	for (;; b--) {
		if (acc + hist[b] >= *need || b == 0)
			break;
		acc += hist[b];
	}
	*need -= acc;
	*count = hist[b];
	return b;
}

static inline uint32_t
get32(const uint8_t *p, uint64_t j)
{
	uint32_t v;

	memcpy(&v, p + 4 * j, 4);
	return v;
}

static inline void
put32(uint8_t *p, uint64_t j, uint32_t v)
{
	memcpy(p + 4 * j, &v, 4);
}

/* The short path, once the k-th key's top digit b is known and its bucket
 * holds count <= k values of which need are taken: one pass lists the
 * indices above the bucket (k - need, into idx) and those in it (count,
 * into val as scratch); the bucket's lower digits are then resolved over
 * that list only, the taken ones kept in index order, and both ascending
 * lists merged into idx from the back. Same selection as the long path. */
static void
topk_short(float *res, uint64_t n, uint64_t k, uint32_t b, uint64_t need,
    uint8_t *idx, uint8_t *val)
{
	uint32_t hist[1024];
	uint32_t prefix = b << 20, mask = 0x7ffu << 20;
	uint64_t a = 0, m = 0, eq = 0, kept = 0;

	for (uint64_t i = 0; i < n; i++) {
		uint32_t hi = key_of(res[i]) >> 20;

		if (hi > b)
			put32(idx, a++, (uint32_t)i);
		else if (hi == b)
			put32(val, m++, (uint32_t)i);
	}
	for (int shift = 10; shift >= 0; shift -= 10) {
		uint64_t acc = 0, cnt;
		uint32_t d = 1023;

		memset(hist, 0, sizeof(hist));
		for (uint64_t j = 0; j < m; j++) {
			uint32_t key = key_of(res[get32(val, j)]);

			if ((key & mask) == prefix)
				hist[(key >> shift) & 1023u]++;
		}
		for (;; d--) {
			if (acc + hist[d] >= need || d == 0)
				break;
			acc += hist[d];
		}
		need -= acc;
		cnt = hist[d];
		prefix |= d << shift;
		mask |= 1023u << shift;
		if (cnt == need)
			break;
	}
	for (uint64_t j = 0; j < m; j++) {
		uint32_t ix = get32(val, j);
		uint32_t hi = key_of(res[ix]) & mask;

		if (hi > prefix || (hi == prefix && eq < need)) {
			eq += hi == prefix;
			put32(val, kept++, ix);
		}
	}
	/* kept == k - a: merge val[0, kept) and idx[0, a) into idx[0, k). */
	for (uint64_t w = k, p = a, q = kept; q > 0;) {
		if (p > 0 && get32(idx, p - 1) > get32(val, q - 1))
			put32(idx, --w, get32(idx, --p));
		else
			put32(idx, --w, get32(val, --q));
	}
	for (uint64_t j = 0; j < k; j++) {
		uint32_t ix = get32(idx, j);

		memcpy(val + 4 * j, &res[ix], 4);
		res[ix] = 0.0f;
	}
}

/* Lists i with key_of(res[i] + g[i]) >= L: see kern_topk_list_fn. */
uint64_t
kern_topk_list_scalar(const float *g, float *res, uint64_t n, uint32_t L,
    uint8_t *idx, uint8_t *val, uint64_t k)
{
	uint64_t m = 0;

	for (uint64_t i = 0; i < n; i++) {
		float r = res[i] + g[i];

		res[i] = r;
		if (key_of(r) >= L)
			m = kern_topk_put(idx, val, k, m, (uint32_t)i);
	}
	return m;
}

/* Lists i with key_of(res[i]) >= L: see kern_topk_relist_fn. */
uint64_t
kern_topk_relist_scalar(const float *res, uint64_t n, uint32_t L, uint8_t *idx,
    uint8_t *val, uint64_t k)
{
	uint64_t m = 0;

	for (uint64_t i = 0; i < n; i++)
		if (key_of(res[i]) >= L)
			m = kern_topk_put(idx, val, k, m, (uint32_t)i);
	return m;
}

/* The sampled path's vector passes, of one ISA. */
struct topk_passes {
	kern_topk_sample_fn *sample; /* the sample's keys */
	kern_topk_list_fn *list;     /* adds the gradient and lists */
	kern_topk_relist_fn *relist; /* lists again, at another threshold */
};

#define SAMPLE       KERN_TOPK_SAMPLE
#define SAMPLE_AHEAD 16 /* sampled values fetched ahead */

/* The keys of the sample: see kern_topk_sample_fn. */
void
kern_topk_sample_scalar(const float *g, const float *res, uint64_t n,
    uint32_t *sample)
{
	uint64_t stride = n / SAMPLE;

	for (uint64_t s = 0; s < SAMPLE; s++) {
		/* Far apart: fetch ahead, or each value waits for memory. */
		if (s + SAMPLE_AHEAD < SAMPLE) {
			__builtin_prefetch(&res[(s + SAMPLE_AHEAD) * stride]);
			__builtin_prefetch(&g[(s + SAMPLE_AHEAD) * stride]);
		}
		sample[s] = key_of(res[s * stride] + g[s * stride]);
	}
}

/* The r-th largest (from 0, r < m) of the m keys at a, by quickselect
 * with a three-way partition (equal keys cost nothing); reorders a. */
static uint32_t
nth_largest(uint32_t *a, uint32_t m, uint32_t r)
{
	uint32_t lo = 0, hi = m; /* r is in [lo, hi) */

	while (hi - lo > 1) {
		uint32_t piv = a[lo + (hi - lo) / 2], lt = lo, i = lo, gt = hi;

		/* [lo, lt) > piv, [lt, i) == piv, [gt, hi) < piv */
		while (i < gt) {
			uint32_t t = a[i];

			if (t > piv) {
				a[i++] = a[lt];
				a[lt++] = t;
			} else if (t < piv) {
				a[i] = a[--gt];
				a[gt] = t;
			} else {
				i++;
			}
		}
		if (r < lt)
			hi = lt;
		else if (r >= gt)
			lo = gt;
		else
			return piv;
	}
	return a[lo];
}

/* Moves h[p] of the min-heap h (w keys, the subtrees below p heaps) down
 * to its place. */
static void
sift_down(uint32_t *h, uint32_t w, uint32_t p)
{
	uint32_t t = h[p];

	for (;;) {
		uint32_t c = 2 * p + 1;

		if (c >= w)
			break;
		if (c + 1 < w && h[c + 1] < h[c])
			c++;
		if (h[c] >= t)
			break;
		h[p] = h[c];
		p = c;
	}
	h[p] = t;
}

/* nth_largest for a small r (r < HEAP_MAX, r < m): a min-heap of the
 * r + 1 largest keys seen, one comparison for most keys. The same key. */
#define HEAP_MAX 256

static uint32_t
nth_largest_heap(const uint32_t *a, uint32_t m, uint32_t r)
{
	uint32_t h[HEAP_MAX], w = r + 1;

	memcpy(h, a, w * sizeof(h[0]));
	for (uint32_t p = w / 2; p-- > 0;)
		sift_down(h, w, p);
	for (uint32_t i = w; i < m; i++)
		if (a[i] > h[0]) {
			h[0] = a[i];
			sift_down(h, w, 0);
		}
	return h[0];
}

/* nth_largest_heap, mostly over a few keys: a pivot p, the key of rank
 * 4 (r + 1) / PICK_STEP among every PICK_STEP-th key, so that about
 * 4 (r + 1) keys reach it; one branch-free pass copies the keys >= p,
 * and if more than r did, the r-th largest is among them (the heap, over
 * them alone); else, or when the pivot's rank is out of reach, the heap
 * over all m. The heap's insertions, not its comparisons, dominated:
 * over the few they are few. The same key. */
#define PICK_STEP 16
#define PICK_MAX  2048 /* the most keys prefiltered */

static uint32_t
nth_largest_small(const uint32_t *a, uint32_t m, uint32_t r)
{
	uint32_t sub[PICK_MAX / PICK_STEP], top[PICK_MAX], ns = 0, c = 0, p;
	uint64_t q;

	if (m > PICK_MAX)
		return nth_largest_heap(a, m, r);
	for (uint32_t i = 0; i < m; i += PICK_STEP)
		sub[ns++] = a[i];
	q = 4 * (uint64_t)(r + 1) * ns / m;
	if (q >= ns)
		return nth_largest_heap(a, m, r);
	p = nth_largest_heap(sub, ns, (uint32_t)q);
	for (uint32_t i = 0; i < m; i++) {
		top[c] = a[i];
		c += a[i] >= p;
	}
	if (c <= r)
		return nth_largest_heap(a, m, r);
	return nth_largest_heap(top, c, r);
}

/* The r-th largest (from 0) of the m keys at a; may reorder a. */
static uint32_t
key_rank(uint32_t *a, uint32_t m, uint32_t r)
{
	return r < HEAP_MAX ? nth_largest_small(a, m, r) : nth_largest(a, m, r);
}

uint32_t
kern_topk_sample_threshold(uint32_t *sample, uint64_t n, uint64_t k)
{
	uint64_t rank = (3 * k * SAMPLE) / (2 * n);

	return key_rank(sample, SAMPLE, (uint32_t)rank);
}

/* The j-th listed index of kern_topk_resolve's list. */
static inline uint32_t
cand(const uint8_t *idx, const uint8_t *val, uint64_t k, uint64_t j)
{
	return j < k ? get32(idx, j) : get32(val, j - k);
}

/* The k-th key of the m listed (m <= RESOLVE_SMALL), exactly: from a copy
 * of their keys by quickselect. Sets *need to how many keys equal to it
 * are taken. */
#define RESOLVE_SMALL 1024

static uint32_t
kth_key_small(const float *res, uint64_t k, uint64_t m, const uint8_t *idx,
    const uint8_t *val, uint64_t *need)
{
	uint32_t keys[RESOLVE_SMALL], t;
	uint64_t above = 0;

	for (uint64_t j = 0; j < m; j++)
		keys[j] = key_of(res[cand(idx, val, k, j)]);
	t = nth_largest(keys, (uint32_t)m, (uint32_t)(k - 1));
	for (uint64_t j = 0; j < m; j++)
		above += keys[j] > t;
	*need = k - above;
	return t;
}

/* The k-th key's digits over the m listed, by radix: up to three
 * histograms of 11, 10 and 10 bits, stopping once the k-th key's bucket is
 * taken whole. Sets *prefix and *mask to the digits found and *need to how
 * many keys matching them are taken. */
static void
kth_key_radix(const float *res, uint64_t k, uint64_t m, const uint8_t *idx,
    const uint8_t *val, uint32_t *prefix, uint32_t *mask, uint64_t *need)
{
	static const int shift[3] = { 20, 10, 0 };
	static const uint32_t width[3] = { 2048, 1024, 1024 };
	uint32_t hist[2048];

	*need = k;
	*prefix = 0;
	*mask = 0;
	for (int level = 0; level < 3; level++) {
		uint64_t acc = 0, cnt;
		uint32_t d = width[level] - 1;

		memset(hist, 0, width[level] * sizeof(hist[0]));
		for (uint64_t j = 0; j < m; j++) {
			uint32_t key = key_of(res[cand(idx, val, k, j)]);

			if ((key & *mask) == *prefix)
				hist[(key >> shift[level]) &
				    (width[level] - 1)]++;
		}
		for (;; d--) {
			if (acc + hist[d] >= *need || d == 0)
				break;
			acc += hist[d];
		}
		*need -= acc;
		cnt = hist[d];
		*prefix |= d << shift[level];
		*mask |= (width[level] - 1) << shift[level];
		if (cnt == *need)
			break;
	}
}

/* resolve_window's histogram: WINDOW_BUCKETS buckets of 2^WINDOW_SHIFT
 * keys from lo, i.e. the octave above lo (2^23 keys), where the k-th key
 * of about 1.5 k listed keys at or above lo lies unless the tail is very
 * heavy; keys below lo count in the first bucket, keys beyond the octave
 * in the last. The most keys of the k-th key's bucket it finishes over. */
#define WINDOW_SHIFT   12
#define WINDOW_BUCKETS 2048
#define WINDOW_MAX     1024

/* The window bucket of key: monotone in key, so a bucket's keys all
 * exceed those of the buckets below it. */
static inline uint32_t
window_of(uint32_t key, uint32_t lo)
{
	uint32_t d;

	if (key < lo)
		return 0;
	d = (key - lo) >> WINDOW_SHIFT;
	return d < WINDOW_BUCKETS - 1 ? d : WINDOW_BUCKETS - 1;
}

/* Writes the k selected values of kern_topk_resolve's idx (ascending) to
 * val and takes them out of the residual. */
static void
resolve_take(float *res, uint64_t k, uint8_t *idx, uint8_t *val)
{
	for (uint64_t j = 0; j < k; j++) {
		uint32_t ix = get32(idx, j);

		memcpy(val + 4 * j, &res[ix], 4);
		res[ix] = 0.0f;
	}
}

/* kern_topk_resolve in two passes over the list where the window allows:
 * one histogram (window_of); if the k-th key's bucket holds at most
 * WINDOW_MAX keys, one pass compacts the keys of the buckets above into
 * idx and copies the bucket's indices and keys to the stack; the bucket's
 * share is selected there (keys above its need-th largest, then those
 * equal to it by index), and both ascending lists are merged into idx
 * from the back. Returns 0, with idx and val untouched, when the bucket
 * holds more (the radix select then runs). */
static int
resolve_window(float *res, uint64_t k, uint64_t m, uint8_t *idx, uint8_t *val,
    uint32_t lo)
{
	uint32_t hist[WINDOW_BUCKETS], bix[WINDOW_MAX], bkey[WINDOW_MAX];
	uint32_t keys[WINDOW_MAX], b, t;
	uint64_t need = k, cnt, a = 0, c = 0, above = 0, eq = 0, kept = 0;

	memset(hist, 0, sizeof(hist));
	for (uint64_t j = 0; j < m; j++)
		hist[window_of(key_of(res[cand(idx, val, k, j)]), lo)]++;
	b = pick(hist, WINDOW_BUCKETS, &need, &cnt);
	if (cnt > WINDOW_MAX)
		return 0;
	/* a <= j: idx is rewritten behind the reads. */
	for (uint64_t j = 0; j < m; j++) {
		uint32_t ix = cand(idx, val, k, j), key = key_of(res[ix]);
		uint32_t w = window_of(key, lo);

		if (w > b) {
			put32(idx, a++, ix);
		} else if (w == b) {
			bix[c] = ix;
			bkey[c++] = key;
		}
	}
	memcpy(keys, bkey, c * sizeof(keys[0]));
	t = key_rank(keys, (uint32_t)c, (uint32_t)(need - 1));
	for (uint64_t q = 0; q < c; q++)
		above += bkey[q] > t;
	for (uint64_t q = 0; q < c; q++) {
		if (bkey[q] > t || (bkey[q] == t && eq < need - above)) {
			eq += bkey[q] == t;
			bix[kept++] = bix[q];
		}
	}
	/* kept == need == k - a: merge idx[0, a) and bix into idx[0, k). */
	for (uint64_t w = k, p = a, q = kept; q > 0;) {
		if (p > 0 && get32(idx, p - 1) > bix[q - 1])
			put32(idx, --w, get32(idx, --p));
		else
			put32(idx, --w, bix[--q]);
	}
	resolve_take(res, k, idx, val);
	return 1;
}

void
kern_topk_resolve(float *res, uint64_t k, uint64_t m, uint8_t *idx,
    uint8_t *val, uint32_t lo)
{
	uint64_t need, eq = 0, kept = 0;
	uint32_t prefix, mask;

	if (m <= RESOLVE_SMALL) {
		prefix = kth_key_small(res, k, m, idx, val, &need);
		mask = 0xffffffffu;
	} else if (resolve_window(res, k, m, idx, val, lo)) {
		return;
	} else {
		kth_key_radix(res, k, m, idx, val, &prefix, &mask, &need);
	}
	/* Taken: the keys whose digits exceed prefix, and the first `need`
	 * equal to it; kept <= j, so idx is rewritten behind the reads. */
	for (uint64_t j = 0; j < m; j++) {
		uint32_t ix = cand(idx, val, k, j);
		uint32_t hi = key_of(res[ix]) & mask;

		if (hi > prefix || (hi == prefix && eq < need)) {
			eq += hi == prefix;
			put32(idx, kept++, ix);
		}
	}
	resolve_take(res, k, idx, val);
}

/* The sparse finish, when at most k keys are non-zero: the a <= k indices
 * of the non-zero keys are listed, ascending, in idx[0, a). Every one of
 * them is taken, and the k - a zero keys of lowest index (the tie rule:
 * they all tie at the k-th key, 0). One pass from the start collects those
 * zeros into val as scratch, stopping once it has them; both ascending
 * lists are merged into idx from the back. */
static void
topk_sparse(float *res, uint64_t n, uint64_t k, uint64_t a, uint8_t *idx,
    uint8_t *val)
{
	uint64_t z = 0;

	for (uint64_t i = 0; i < n && z < k - a; i++)
		if (key_of(res[i]) == 0)
			put32(val, z++, (uint32_t)i);
	for (uint64_t w = k, p = a, q = z; q > 0;) {
		if (p > 0 && get32(idx, p - 1) > get32(val, q - 1))
			put32(idx, --w, get32(idx, --p));
		else
			put32(idx, --w, get32(val, --q));
	}
	for (uint64_t j = 0; j < k; j++) {
		uint32_t ix = get32(idx, j);

		memcpy(val + 4 * j, &res[ix], 4);
		res[ix] = 0.0f;
	}
}

/* The sampled path's second try, when the first list held m keys, fewer
 * than k or more than 2 k: another key of the sample (reordered, the same
 * keys), its rank scaled by 1.5 k / m, and one pass over res (r already)
 * lists the keys reaching it, that key in *ret_L. Returns the new count,
 * or 0 (no second threshold: the rank would not move, or its key is 0;
 * *ret_L unchanged). */
static uint64_t
topk_relist(kern_topk_relist_fn *relist, const float *res, uint64_t n,
    uint64_t k, uint64_t m, uint32_t *sample, uint8_t *idx, uint8_t *val,
    uint32_t *ret_L)
{
	uint64_t rank = (3 * k * SAMPLE) / (2 * n), r2;
	uint32_t L;

	if (m > 2 * k) { /* below rank: 1.5 k / m < 0.75 */
		if (rank == 0)
			return 0;
		r2 = rank * 3 * k / (2 * m);
	} else { /* above rank: 1.5 k / m > 1.5 */
		r2 = (rank + 1) * 3 * k / (2 * (m > 0 ? m : 1));
		if (r2 >= SAMPLE)
			r2 = SAMPLE - 1;
		if (r2 <= rank)
			return 0;
	}
	L = key_rank(sample, SAMPLE, (uint32_t)r2);
	if (L == 0)
		return 0;
	*ret_L = L;
	return relist(res, n, L, idx, val, k);
}

/* The sampled path: a threshold L from SAMPLE evenly spaced values, set so
 * that about 1.5 k keys reach it; one pass computes r and lists the
 * indices of keys >= L into idx and val (2 k slots). If between k and 2 k
 * were listed, the top k are among them: kern_topk_resolve finishes over
 * the list. A threshold of 0 (the sample is mostly zeros) lists the
 * non-zero keys instead (L = 1): if at most k are, topk_sparse finishes in
 * a short pass. A list out of bounds gets one more try (topk_relist).
 * Returns 0 (nothing selected, res holds r) if that missed too. */
static int
topk_sampled(const struct topk_passes *pass, const float *g, float *res,
    uint64_t n, uint64_t k, uint8_t *idx, uint8_t *val)
{
	uint32_t sample[SAMPLE], L;
	uint64_t m;

	pass->sample(g, res, n, sample);
	L = kern_topk_sample_threshold(sample, n, k);
	if (L == 0) {
		m = pass->list(g, res, n, 1, idx, val, k);
		if (m <= k) {
			topk_sparse(res, n, k, m, idx, val);
			return 1;
		}
	} else {
		m = pass->list(g, res, n, L, idx, val, k);
	}
	if (m < k || m > 2 * k)
		m = topk_relist(pass->relist, res, n, k, m, sample, idx, val,
		    &L);
	if (m < k || m > 2 * k)
		return 0;
	kern_topk_resolve(res, k, m, idx, val, L);
	return 1;
}

void
kern_topk_encode(const float *g, float *res, uint64_t n, uint64_t k,
    uint8_t *idx, uint8_t *val)
{
	kern_topk_encode_isa(KERN_ISA_AUTO, g, res, n, k, idx, val);
}

/* The radix select's first pass: res[i] += g[i] (unless g is NULL), and
 * hist (2048 buckets) counts the keys' top 11 bits. Four interleaved
 * copies of the histogram, summed at the end, so that runs of keys with
 * the same top bits (gradients share exponents) do not each wait on the
 * last increment of one counter. Returns how many keys are 0. */
static uint64_t
add_hist_top(const float *g, float *res, uint64_t n, uint32_t *hist)
{
	uint32_t part[4][2048];
	uint64_t zeros = 0, i = 0;

	memset(part, 0, sizeof(part));
	for (; i < n; i++) {
		float r = g != NULL ? res[i] + g[i] : res[i];
		uint32_t key = key_of(r);

		res[i] = r;
		part[i & 3][key >> 20]++;
		zeros += key == 0;
	}
	for (int b = 0; b < 2048; b++)
		hist[b] = part[0][b] + part[1][b] + part[2][b] + part[3][b];
	return zeros;
}

/* The sampled path's passes for `isa` (supported, or KERN_ISA_AUTO). */
static struct topk_passes
topk_passes_of(int isa)
{
	struct topk_passes p = { kern_topk_sample_scalar, kern_topk_list_scalar,
		kern_topk_relist_scalar };

	if (isa == KERN_ISA_AUTO)
		isa = kern_cpu_isa_best();
#ifdef KERN_HAVE_X86
	if (isa == KERN_ISA_AVX512)
		p = (struct topk_passes){ kern_topk_sample_avx2,
			kern_topk_list_avx512, kern_topk_relist_avx2 };
	else if (isa == KERN_ISA_AVX2)
		p = (struct topk_passes){ kern_topk_sample_avx2,
			kern_topk_list_avx2, kern_topk_relist_avx2 };
#endif
	return p;
}

void
kern_topk_encode_isa(int isa, const float *g, float *res, uint64_t n,
    uint64_t k, uint8_t *idx, uint8_t *val)
{
	static const int shift[3] = { 20, 10, 0 };
	static const uint32_t width[3] = { 2048, 1024, 1024 };
	uint32_t hist[2048];
	uint32_t prefix = 0, mask = 0;
	uint64_t need = k, count = 0, eq = 0, j = 0;

	if (k == 0 || k >= n) {
		for (uint64_t i = 0; i < n; i++)
			res[i] = res[i] + g[i];
		if (k == 0)
			return;
		for (uint64_t i = 0; i < n; i++) {
			uint32_t ix = (uint32_t)i;

			memcpy(idx + 4 * i, &ix, 4);
			memcpy(val + 4 * i, &res[i], 4);
			res[i] = 0.0f;
		}
		return;
	}
	if (n >= KERN_TOPK_SAMPLED_MIN && k <= n / 4) {
		struct topk_passes pass = topk_passes_of(isa);

		if (topk_sampled(&pass, g, res, n, k, idx, val))
			return;
		add_hist_top(NULL, res, n, hist);
	} else {
		uint64_t zeros = add_hist_top(g, res, n, hist);
		/* At most k non-zero keys: list them, take the rest in
		 * zeros of lowest index. */
		if (n - zeros <= k) {
			uint64_t a = 0;

			for (uint64_t i = 0; i < n && a < n - zeros; i++)
				if (key_of(res[i]) != 0)
					put32(idx, a++, (uint32_t)i);
			topk_sparse(res, n, k, a, idx, val);
			return;
		}
	}
	for (int level = 0;; level++) {
		uint32_t b = pick(hist, width[level], &need, &count);

		if (level == 0 && count != need && count <= k) {
			topk_short(res, n, k, b, need, idx, val);
			return;
		}
		prefix |= b << shift[level];
		mask |= (width[level] - 1) << shift[level];
		if (count == need || level == 2)
			break;
		memset(hist, 0, width[level + 1] * sizeof(hist[0]));
		for (uint64_t i = 0; i < n; i++) {
			uint32_t key = key_of(res[i]);

			if ((key & mask) == prefix)
				hist[(key >> shift[level + 1]) & 1023u]++;
		}
	}
	/* Taken: every key whose determined high bits exceed prefix, and the
	 * first `need` (by index) of those equal to it. */
	for (uint64_t i = 0; i < n && j < k; i++) {
		uint32_t hi = key_of(res[i]) & mask;

		if (hi > prefix || (hi == prefix && eq < need)) {
			uint32_t ix = (uint32_t)i;

			eq += hi == prefix;
			memcpy(idx + 4 * j, &ix, 4);
			memcpy(val + 4 * j, &res[i], 4);
			res[i] = 0.0f;
			j++;
		}
	}
}

int
kern_topk_valid(const uint8_t *idx, uint64_t k, uint64_t n)
{
	uint64_t next = 0; /* the smallest index allowed next */

	for (uint64_t j = 0; j < k; j++) {
		uint32_t ix;

		memcpy(&ix, idx + 4 * j, 4);
		if (ix < next || ix >= n)
			return 0;
		next = (uint64_t)ix + 1;
	}
	return 1;
}

void
kern_topk_decode(const uint8_t *idx, const uint8_t *val, uint64_t k, uint64_t n,
    float *out, int add)
{
	if (!add)
		memset(out, 0, n * sizeof(float));
	for (uint64_t j = 0; j < k; j++) {
		uint32_t ix;
		float v;

		memcpy(&ix, idx + 4 * j, 4);
		memcpy(&v, val + 4 * j, 4);
		out[ix] = add ? out[ix] + v : v;
	}
}

/* Restores the min-heap of m keys below slot j, the key at j moved down. */
static void
heap_down(uint64_t *heap, uint32_t m, uint32_t j)
{
	uint64_t key = heap[j];

	for (;;) {
		uint32_t c = 2 * j + 1;

		if (c >= m)
			break;
		if (c + 1 < m && heap[c + 1] < heap[c])
			c++;
		if (heap[c] >= key)
			break;
		heap[j] = heap[c];
		j = c;
	}
	heap[j] = key;
}

/* kern_topk_average for two ranks: a merge without branches on the data
 * (which list holds the next index is random, so a branch on it would
 * miss half the time). A value only one rank lists adds as +0 from the
 * other, after it or before it: (+0 + v) + +0 and (+0 + +0) + v have the
 * bits of +0 + v for every v (-0 and NaN included). */
static void
average_two(const uint8_t *idx0, const uint8_t *val0, const uint8_t *idx1,
    const uint8_t *val1, uint64_t k, float *out)
{
	uint64_t i0 = 0, i1 = 0;

	while (i0 < k || i1 < k) {
		uint32_t a = i0 < k ? get32(idx0, i0) : UINT32_MAX;
		uint32_t b = i1 < k ? get32(idx1, i1) : UINT32_MAX;
		int take0 = i0 < k && a <= b, take1 = i1 < k && b <= a;
		float v0 = 0.0f, v1 = 0.0f;

		if (i0 < k)
			memcpy(&v0, val0 + 4 * i0, 4);
		if (i1 < k)
			memcpy(&v1, val1 + 4 * i1, 4);
		out[take0 ? a : b] = ((0.0f + (take0 ? v0 : 0.0f)) +
					 (take1 ? v1 : 0.0f)) /
		    2.0f;
		i0 += (uint64_t)take0;
		i1 += (uint64_t)take1;
	}
}

void
kern_topk_average(const uint8_t *const *idx, const uint8_t *const *val,
    uint32_t ranks, uint64_t k, uint64_t n, float *out)
{
	/* A heap of each rank's next index, rank in the low 32 bits: equal
	 * indices leave it in rank order, so each sum adds as index_add_
	 * over the ranks one after the other does. */
	uint64_t heap[KERN_TOPK_MAX_RANKS];
	uint64_t next[KERN_TOPK_MAX_RANKS]; /* each rank's next pair */
	uint32_t m = 0;
	float div = (float)ranks;

	memset(out, 0, n * sizeof(float));
	if (k == 0)
		return;
	if (ranks == 2) {
		average_two(idx[0], val[0], idx[1], val[1], k, out);
		return;
	}
	for (uint32_t r = 0; r < ranks; r++) {
		next[r] = 1;
		heap[m++] = (uint64_t)get32(idx[r], 0) << 32 | r;
	}
	for (uint32_t j = m / 2; j-- > 0;)
		heap_down(heap, m, j);
	while (m > 0) {
		uint32_t ix = (uint32_t)(heap[0] >> 32);
		float sum = 0.0f;

		while (m > 0 && (uint32_t)(heap[0] >> 32) == ix) {
			uint32_t r = (uint32_t)heap[0];
			float v;

			memcpy(&v, val[r] + 4 * (next[r] - 1), 4);
			sum += v;
			if (next[r] < k)
				heap[0] = (uint64_t)get32(idx[r], next[r]++)
					<< 32 |
				    r;
			else
				heap[0] = heap[--m];
			heap_down(heap, m, 0);
		}
		out[ix] = sum / div;
	}
}
