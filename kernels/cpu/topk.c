/* topk - the scalar top-k selection with error feedback; see topk.h for
 * the order, the tie rule and the passes. */
#include "topk.h"

#include <string.h>

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

void
kern_topk_encode(const float *g, float *res, uint64_t n, uint64_t k,
    uint8_t *idx, uint8_t *val)
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
	memset(hist, 0, sizeof(hist));
	for (uint64_t i = 0; i < n; i++) {
		float r = res[i] + g[i];

		res[i] = r;
		hist[key_of(r) >> 20]++;
	}
	for (int level = 0;; level++) {
		uint32_t b = pick(hist, width[level], &need, &count);

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
