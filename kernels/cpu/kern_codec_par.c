/* kern_codec_par - the codecs split across worker threads and widened from
 * float16 and bfloat16, see kern_codec_par.h.
 *
 * Top-k in chunks: the sampled path when it applies (a threshold from a
 * sample, one pass adding the gradient and counting per chunk the keys
 * that reach it, one pass listing them at each chunk's offset, and
 * kern_topk_resolve over the list), else a radix select whose histograms
 * are summed over the threads, then a pass counting per chunk the values
 * above the k-th key and equal to it, and a pass in which each chunk
 * writes its taken values at its offset, taking equal ones while the
 * equal values of the chunks before it and its own are fewer than needed:
 * the lower index first, as kern_topk_encode.
 */
#include "kern_codec_par.h"

#include <stdlib.h>
#include <string.h>

#include <bellows/error.h>

#include "../element.h"
#include "../kernels.h"
#include "kern_pool.h"
#include "kern_topk.h"

#define PAR_MAX_CHUNKS  256  /* chunks of one call */
#define PAR_CHUNK_MIN   8192 /* fewest values of a chunk */
#define PAR_CHUNKS_EACH 4    /* chunks per thread, for balance */

/* One thread's scratch: the radix histogram of the chunks it ran, zeroed
 * before each histogram pass. */
typedef struct par_slot {
	uint32_t hist[2048]; /* radix histogram */
} par_slot;

/* One chunk's counts, set by the stage that fills them. */
typedef struct par_chunk {
	uint64_t m;         /* sampled: keys at or above the threshold */
	uint64_t above;     /* keys above the k-th key's prefix */
	uint64_t eq;        /* keys equal to it */
	uint64_t out_at;    /* first output slot of this chunk */
	uint64_t eq_before; /* equal keys in the chunks before */
} par_chunk;

struct kern_codec_par {
	kern_pool *pool;     /* parts - 1 workers; NULL for one part */
	uint32_t parts;      /* threads, the caller's included */
	uint64_t min_values; /* fewest values split */
	par_slot *slot;      /* parts entries */
	par_chunk *chunk;    /* PAR_MAX_CHUNKS entries */
};

int
kern_codec_par_new(uint32_t parts, uint64_t min_values, kern_codec_par **ret)
{
	kern_codec_par *p;
	int rc;

	if (parts == 0 || parts > KERN_MAX_THREADS + 1 || ret == NULL)
		return BELLOWS_EINVAL;
	if ((p = calloc(1, sizeof(*p))) == NULL)
		return BELLOWS_ENOMEM;
	p->slot = calloc(parts, sizeof(*p->slot));
	p->chunk = calloc(PAR_MAX_CHUNKS, sizeof(*p->chunk));
	if (p->slot == NULL || p->chunk == NULL) {
		rc = BELLOWS_ENOMEM;
		goto fail;
	}
	if (parts > 1 && (rc = kern_pool_new(parts - 1, &p->pool)) != 0)
		goto fail;
	p->parts = parts;
	p->min_values = min_values > 0 ? min_values : KERN_CODEC_PAR_MIN;
	*ret = p;
	return 0;
fail:
	free(p->chunk);
	free(p->slot);
	free(p);
	return rc;
}

void
kern_codec_par_destroy(kern_codec_par **par)
{
	if (par == NULL || *par == NULL)
		return;
	kern_pool_destroy(&(*par)->pool);
	free((*par)->chunk);
	free((*par)->slot);
	free(*par);
	*par = NULL;
}

uint32_t
kern_codec_par_parts(const kern_codec_par *par)
{
	return par == NULL ? 1 : par->parts;
}

uint64_t
kern_codec_par_min(const kern_codec_par *par)
{
	return par == NULL ? KERN_CODEC_PAR_MIN : par->min_values;
}

/* Threads a call over n values uses. */
static uint32_t
par_parts_for(const kern_codec_par *par, uint64_t n)
{
	if (par == NULL || par->pool == NULL || n < par->min_values)
		return 1;
	return par->parts;
}

/* Chunk length for n values on `parts` threads: about PAR_CHUNKS_EACH
 * chunks per thread, at least PAR_CHUNK_MIN values, at most
 * PAR_MAX_CHUNKS chunks, a multiple of KERN_CODEC_PAR_ALIGN. */
static uint64_t
par_len(uint64_t n, uint32_t parts)
{
	uint64_t len = (n + PAR_CHUNKS_EACH * parts - 1) /
	    (PAR_CHUNKS_EACH * parts);

	if (len < PAR_CHUNK_MIN)
		len = PAR_CHUNK_MIN;
	if (len < (n + PAR_MAX_CHUNKS - 1) / PAR_MAX_CHUNKS)
		len = (n + PAR_MAX_CHUNKS - 1) / PAR_MAX_CHUNKS;
	return (len + KERN_CODEC_PAR_ALIGN - 1) / KERN_CODEC_PAR_ALIGN *
	    KERN_CODEC_PAR_ALIGN;
}

/* Chunks of len values in n (at least 1). */
static uint32_t
par_chunks(uint64_t n, uint64_t len)
{
	uint64_t c = (n + len - 1) / len;

	return c > 0 ? (uint32_t)c : 1;
}

static inline float
load(const void *g, uint64_t i, int dtype)
{
	return dtype == KERN_F32 ? ((const float *)g)[i]
				 : kern_load(g, i, dtype);
}

/* ---- 1-bit and 2-bit ---------------------------------------------- */

typedef struct quant_job {
	const kern_codec_fns *f;  /* kernels */
	int bits;                 /* 1 or 2 */
	float t;                  /* threshold */
	int dtype;                /* encode: gradient type */
	const void *g;            /* encode: gradient */
	float *res;               /* encode: residual */
	uint8_t *out;             /* encode: codes */
	const uint8_t *in;        /* decode: codes */
	float *dst;               /* decode: values */
	int add;                  /* decode: add to dst */
	uint64_t n;               /* values */
	uint64_t len;             /* values per part */
	kern_codec_post_fn *post; /* encode: run on each chunk, or NULL */
	void *post_arg;           /* its argument */
} quant_job;

static void
quant_enc_range(const quant_job *j, uint64_t b, uint64_t e)
{
	kern_codec_enc_fn *enc = j->bits == 1 ? j->f->enc1 : j->f->enc2;
	float tmp[KERN_CODEC_PAR_CHUNK];

	if (j->dtype == KERN_F32 && j->post == NULL) {
		enc((const float *)j->g + b, j->res + b, e - b, j->t,
		    j->out + b * (uint64_t)j->bits / 8);
		return;
	}
	/* Chunks are multiples of 32 values: whole words, no padding but
	 * after the last. post sees each chunk while it is in the cache. */
	for (uint64_t c = b; c < e; c += KERN_CODEC_PAR_CHUNK) {
		uint64_t m = e - c < KERN_CODEC_PAR_CHUNK
		    ? e - c
		    : KERN_CODEC_PAR_CHUNK;
		const float *src = (const float *)j->g + c;
		uint8_t *out = j->out + c * (uint64_t)j->bits / 8;

		if (j->dtype != KERN_F32) {
			for (uint64_t i = 0; i < m; i++)
				tmp[i] = kern_load(j->g, c + i, j->dtype);
			src = tmp;
		}
		enc(src, j->res + c, m, j->t, out);
		if (j->post != NULL)
			j->post(j->res + c, m, out, j->post_arg);
	}
}

static void
quant_enc_part(void *arg, uint32_t part, uint32_t slot)
{
	const quant_job *j = arg;
	uint64_t b = (uint64_t)part * j->len;

	(void)slot;

	if (b < j->n)
		quant_enc_range(j, b, j->n - b < j->len ? j->n : b + j->len);
}

static void
quant_dec_part(void *arg, uint32_t part, uint32_t slot)
{
	const quant_job *j = arg;
	uint64_t b = (uint64_t)part * j->len, e;

	(void)slot;
	if (b >= j->n)
		return;
	e = j->n - b < j->len ? j->n : b + j->len;
	(j->bits == 1 ? j->f->dec1
		      : j->f->dec2)(j->in + b * (uint64_t)j->bits / 8, e - b,
	    j->t, j->dst + b, j->add);
}

void
kern_codec_par_encode(kern_codec_par *par, const kern_codec_fns *f, int bits,
    float t, int dtype, const void *g, float *res, uint64_t n, uint8_t *out)
{
	kern_codec_par_encode_post(par, f, bits, t, dtype, g, res, n, out, NULL,
	    NULL);
}

void
kern_codec_par_encode_post(kern_codec_par *par, const kern_codec_fns *f,
    int bits, float t, int dtype, const void *g, float *res, uint64_t n,
    uint8_t *out, kern_codec_post_fn *post, void *post_arg)
{
	uint32_t parts = par_parts_for(par, n);
	quant_job j = { .f = f,
		.bits = bits,
		.t = t,
		.dtype = dtype,
		.g = g,
		.res = res,
		.out = out,
		.n = n,
		.post = post,
		.post_arg = post_arg };

	j.len = par_len(n, parts);
	if (parts == 1 || par_chunks(n, j.len) == 1) {
		quant_enc_range(&j, 0, n);
		return;
	}
	kern_pool_share(par->pool, quant_enc_part, &j, par_chunks(n, j.len));
}

void
kern_codec_par_decode(kern_codec_par *par, const kern_codec_fns *f, int bits,
    float t, const uint8_t *in, uint64_t n, float *out, int add)
{
	uint32_t parts = par_parts_for(par, n);
	quant_job j = { .f = f,
		.bits = bits,
		.t = t,
		.in = in,
		.dst = out,
		.add = add,
		.n = n,
		.len = n };

	if (parts > 1)
		j.len = par_len(n, parts);
	if (parts == 1 || par_chunks(n, j.len) == 1) {
		j.len = n;
		quant_dec_part(&j, 0, 0);
		return;
	}
	kern_pool_share(par->pool, quant_dec_part, &j, par_chunks(n, j.len));
}

/* ---- top-k --------------------------------------------------------- */

/* What a top-k pass does over each part's range. */
enum {
	TK_ADD,       /* res += g */
	TK_ALL,       /* k = n: every value taken */
	TK_ADD_COUNT, /* res += g; part.m = keys >= L */
	TK_LIST,      /* list keys >= L from slot part.out_at */
	TK_ADD_HIST,  /* res += g; top-digit histogram */
	TK_HIST,      /* histogram of the keys matching prefix/mask */
	TK_COUNT,     /* part.above, part.eq against prefix/mask */
	TK_TAKE,      /* write the taken values */
};

typedef struct topk_job {
	int stage;        /* TK_* */
	int dtype;        /* gradient type */
	const void *g;    /* gradient */
	float *res;       /* residual */
	uint64_t n;       /* values */
	uint64_t k;       /* values taken */
	uint64_t len;     /* values per chunk */
	uint32_t chunks;  /* chunks */
	uint8_t *idx;     /* output indices (and list slots) */
	uint8_t *val;     /* output values (and list slots) */
	par_chunk *chunk; /* per-chunk counts */
	par_slot *slot;   /* per-thread histograms */
	uint32_t L;       /* sampled threshold */
	uint32_t prefix;  /* k-th key's digits found so far */
	uint32_t mask;    /* their bits */
	int shift;        /* TK_HIST: the digit's shift */
	uint32_t width;   /* TK_HIST: buckets */
	uint64_t need;    /* equal keys to take */
} topk_job;

static inline void
put32(uint8_t *p, uint64_t j, uint32_t v)
{
	memcpy(p + 4 * j, &v, 4);
}

static void
topk_part(void *arg, uint32_t part, uint32_t slot)
{
	topk_job *j = arg;
	par_chunk *pp = &j->chunk[part];
	uint32_t *hist = j->slot[slot].hist;
	uint64_t b = (uint64_t)part * j->len, e;
	float *res = j->res;

	if (b >= j->n)
		return;
	e = j->n - b < j->len ? j->n : b + j->len;
	switch (j->stage) {
	case TK_ADD:
		for (uint64_t i = b; i < e; i++)
			res[i] = res[i] + load(j->g, i, j->dtype);
		break;
	case TK_ALL:
		for (uint64_t i = b; i < e; i++) {
			put32(j->idx, i, (uint32_t)i);
			memcpy(j->val + 4 * i, &res[i], 4);
			res[i] = 0.0f;
		}
		break;
	case TK_ADD_COUNT: {
		const float *g = j->g;
		uint64_t m = 0;

		if (j->dtype ==
		    KERN_F32) { /* one loop the compiler vectorises */
			for (uint64_t i = b; i < e; i++) {
				float r = res[i] + g[i];

				res[i] = r;
				m += kern_topk_key(r) >= j->L;
			}
			pp->m = m;
			break;
		}
		for (uint64_t i = b; i < e; i++) {
			float r = res[i] + load(j->g, i, j->dtype);

			res[i] = r;
			m += kern_topk_key(r) >= j->L;
		}
		pp->m = m;
		break;
	}
	case TK_LIST: {
		uint64_t m = pp->out_at;

		for (uint64_t i = b; i < e; i++)
			if (kern_topk_key(res[i]) >= j->L)
				m = kern_topk_put(j->idx, j->val, j->k, m,
				    (uint32_t)i);
		break;
	}
	case TK_ADD_HIST:
		for (uint64_t i = b; i < e; i++) {
			float r = res[i] + load(j->g, i, j->dtype);

			res[i] = r;
			hist[kern_topk_key(r) >> 20]++;
		}
		break;
	case TK_HIST:
		for (uint64_t i = b; i < e; i++) {
			uint32_t key = kern_topk_key(res[i]);

			if ((key & j->mask) == j->prefix)
				hist[(key >> j->shift) & (j->width - 1)]++;
		}
		break;
	case TK_COUNT: {
		uint64_t above = 0, eq = 0;

		for (uint64_t i = b; i < e; i++) {
			uint32_t hi = kern_topk_key(res[i]) & j->mask;

			above += hi > j->prefix;
			eq += hi == j->prefix;
		}
		pp->above = above;
		pp->eq = eq;
		break;
	}
	default: { /* TK_TAKE */
		uint64_t at = pp->out_at, eq = pp->eq_before;

		for (uint64_t i = b; i < e; i++) {
			uint32_t hi = kern_topk_key(res[i]) & j->mask;

			if (hi > j->prefix ||
			    (hi == j->prefix && eq < j->need)) {
				eq += hi == j->prefix;
				put32(j->idx, at, (uint32_t)i);
				memcpy(j->val + 4 * at, &res[i], 4);
				res[i] = 0.0f;
				at++;
			}
		}
		break;
	}
	}
}

/* Runs one stage over every chunk; the histogram stages start from zeroed
 * histograms in every thread's slot. */
static void
topk_run(kern_codec_par *par, uint32_t parts, topk_job *j, int stage)
{
	j->stage = stage;
	if (stage == TK_ADD_HIST || stage == TK_HIST)
		for (uint32_t p = 0; p < parts; p++)
			memset(j->slot[p].hist, 0, sizeof(j->slot[p].hist));
	if (parts == 1 || j->chunks == 1)
		for (uint32_t c = 0; c < j->chunks; c++)
			topk_part(j, c, 0);
	else
		kern_pool_share(par->pool, topk_part, j, j->chunks);
}

/* Sums the slots' first `width` histogram buckets into hist. */
static void
topk_merge(const topk_job *j, uint32_t parts, uint32_t width, uint32_t *hist)
{
	memset(hist, 0, width * sizeof(hist[0]));
	for (uint32_t p = 0; p < parts; p++)
		for (uint32_t d = 0; d < width; d++)
			hist[d] += j->slot[p].hist[d];
}

/* The bucket of hist holding the need-th largest key; *need becomes the
 * rank within it and *count its size (as kern_topk.c's pick). */
static uint32_t
topk_pick(const uint32_t *hist, uint32_t nb, uint64_t *need, uint64_t *count)
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

/* The sampled path in parts; returns 0 (res holds r) if the list did not
 * fit or was short. */
static int
topk_par_sampled(kern_codec_par *par, uint32_t parts, topk_job *j)
{
	uint32_t sample[KERN_TOPK_SAMPLE];
	uint64_t stride = j->n / KERN_TOPK_SAMPLE, m = 0;

	for (uint64_t s = 0; s < KERN_TOPK_SAMPLE; s++)
		sample[s] = kern_topk_key(
		    j->res[s * stride] + load(j->g, s * stride, j->dtype));
	j->L = kern_topk_sample_threshold(sample, j->n, j->k);
	topk_run(par, parts, j, TK_ADD_COUNT);
	for (uint32_t c = 0; c < j->chunks; c++) {
		j->chunk[c].out_at = m;
		m += j->chunk[c].m;
	}
	if (m < j->k || m > 2 * j->k)
		return 0;
	topk_run(par, parts, j, TK_LIST);
	kern_topk_resolve(j->res, j->k, m, j->idx, j->val, j->L);
	return 1;
}

void
kern_codec_par_topk(kern_codec_par *par, int isa, int dtype, const void *g,
    float *res, uint64_t n, uint64_t k, uint8_t *idx, uint8_t *val)
{
	static const int shift[3] = { 20, 10, 0 };
	static const uint32_t width[3] = { 2048, 1024, 1024 };
	uint32_t parts = par_parts_for(par, n);
	uint32_t hist[2048];
	par_slot one_slot;   /* the one thread's histogram without a context */
	par_chunk one_chunk; /* the one chunk without a context */
	topk_job j = { .dtype = dtype,
		.g = g,
		.res = res,
		.n = n,
		.k = k,
		.idx = idx,
		.val = val };
	uint64_t need = k, count = 0, eq_before = 0, at = 0;
	int added = 0;

	if (parts == 1 && dtype == KERN_F32) {
		kern_topk_encode_isa(isa, g, res, n, k, idx, val);
		return;
	}
	if (par == NULL) {
		j.slot = &one_slot;
		j.chunk = &one_chunk;
		j.len = n;
		j.chunks = 1;
	} else {
		j.slot = par->slot;
		j.chunk = par->chunk;
		j.len = parts == 1 ? n : par_len(n, parts);
		j.chunks = parts == 1 ? 1 : par_chunks(n, j.len);
	}
	if (k == 0 || k >= n) {
		topk_run(par, parts, &j, TK_ADD);
		if (k > 0)
			topk_run(par, parts, &j, TK_ALL);
		return;
	}
	if (n >= KERN_TOPK_SAMPLED_MIN && k <= n / 4) {
		if (topk_par_sampled(par, parts, &j))
			return;
		added = 1;
	}
	/* The radix select: up to three digits of the k-th key. */
	j.shift = shift[0];
	j.width = width[0];
	topk_run(par, parts, &j, added ? TK_HIST : TK_ADD_HIST);
	for (int level = 0;; level++) {
		uint32_t b;

		topk_merge(&j, parts, width[level], hist);
		b = topk_pick(hist, width[level], &need, &count);
		j.prefix |= b << shift[level];
		j.mask |= (width[level] - 1) << shift[level];
		if (count == need || level == 2)
			break;
		j.shift = shift[level + 1];
		j.width = width[level + 1];
		topk_run(par, parts, &j, TK_HIST);
	}
	j.need = need;
	topk_run(par, parts, &j, TK_COUNT);
	for (uint32_t c = 0; c < j.chunks; c++) {
		par_chunk *pp = &j.chunk[c];
		uint64_t take = eq_before < need ? need - eq_before : 0;

		pp->out_at = at;
		pp->eq_before = eq_before;
		at += pp->above + (pp->eq < take ? pp->eq : take);
		eq_before += pp->eq;
	}
	topk_run(par, parts, &j, TK_TAKE);
}
