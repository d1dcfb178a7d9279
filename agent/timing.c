/* timing - the timed communications of a window, see timing.h.
 *
 * A layer's three arrays (raw durations, compressed durations, their codec
 * times) are one allocation made on its first send, so a model whose
 * trainer times no sends costs one small header per layer. The bucket
 * table and its durations are two allocations made on the first bucket.
 * Keys are found by a linear scan: a window has a few dozen buckets, and
 * the scan touches only their 24-byte headers.
 */
#include "timing.h"

#include <stdlib.h>
#include <string.h>

#include <bellows/error.h>

#define K AGENT_TIMING_RESERVOIR

int
agent_timing_init(agent_timing *t, uint32_t n_layers)
{
	memset(t, 0, sizeof(*t));
	t->rng = 0x9e3779b97f4a7c15ull;
	if (n_layers > 0 &&
	    (t->layers = calloc(n_layers, sizeof(*t->layers))) == NULL)
		return BELLOWS_ENOMEM;
	t->n_layers = n_layers;
	return 0;
}

void
agent_timing_fini(agent_timing *t)
{
	for (uint32_t i = 0; t->layers != NULL && i < t->n_layers; i++)
		free(t->layers[i].raw.ms);
	free(t->layers);
	free(t->buckets);
	free(t->bucket_mem);
	free(t->samples);
	memset(t, 0, sizeof(*t));
}

static uint64_t
timing_next(agent_timing *t)
{
	t->rng ^= t->rng << 13;
	t->rng ^= t->rng >> 7;
	t->rng ^= t->rng << 17;
	return t->rng;
}

/* Algorithm R: the first K sends fill the reservoir; the n-th after that
 * replaces a random entry with probability K/n, which keeps every send of
 * the window equally likely to be in it. */
static void
timing_record(agent_timing *t, agent_reservoir *r, double ms, double codec)
{
	uint64_t slot = r->seen;

	if (r->seen >= K)
		slot = timing_next(t) % (r->seen + 1);
	r->seen++;
	if (slot >= K)
		return;
	r->ms[slot] = ms;
	if (r->codec != NULL)
		r->codec[slot] = codec;
}

int
agent_timing_send(agent_timing *t, uint32_t layer, bool compressed,
    double comm_ms, double codec_ms)
{
	agent_timing_layer *l = &t->layers[layer];

	if (l->raw.ms == NULL) {
		double *mem = malloc(3 * K * sizeof(*mem));

		if (mem == NULL)
			return BELLOWS_ENOMEM;
		l->raw.ms = mem;
		l->comp.ms = mem + K;
		l->comp.codec = mem + 2 * K;
	}
	if (compressed)
		timing_record(t, &l->comp, comm_ms, codec_ms);
	else
		timing_record(t, &l->raw, comm_ms, 0.0);
	return 0;
}

int
agent_timing_collective(agent_timing *t, uint64_t bytes, bool compressed,
    double comm_ms)
{
	agent_timing_bucket *b;
	uint32_t i;

	if (t->buckets == NULL) {
		t->buckets = calloc(AGENT_TIMING_MAX_BUCKETS,
		    sizeof(*t->buckets));
		t->bucket_mem = malloc(
		    (size_t)AGENT_TIMING_MAX_BUCKETS * K * sizeof(double));
		t->samples = calloc(AGENT_TIMING_MAX_BUCKETS,
		    sizeof(*t->samples));
		if (t->buckets == NULL || t->bucket_mem == NULL ||
		    t->samples == NULL) {
			free(t->buckets);
			free(t->bucket_mem);
			free(t->samples);
			t->buckets = NULL;
			t->bucket_mem = NULL;
			t->samples = NULL;
			return BELLOWS_ENOMEM;
		}
		for (i = 0; i < AGENT_TIMING_MAX_BUCKETS; i++)
			t->buckets[i].res.ms = t->bucket_mem + (size_t)i * K;
	}
	for (i = 0; i < t->n_buckets; i++)
		if (t->buckets[i].bytes == bytes &&
		    t->buckets[i].compressed == compressed)
			break;
	if (i == t->n_buckets) {
		if (t->n_buckets == AGENT_TIMING_MAX_BUCKETS) {
			t->dropped++;
			return 0;
		}
		b = &t->buckets[t->n_buckets++];
		b->bytes = bytes;
		b->compressed = compressed;
		b->res.seen = 0;
	}
	timing_record(t, &t->buckets[i].res, comm_ms, 0.0);
	return 0;
}

/* Insertion sorts: at most K durations and AGENT_TIMING_MAX_BUCKETS
 * samples, once per window, and unlike qsort they never allocate. */
static void
timing_sort(double *v, uint32_t n)
{
	for (uint32_t i = 1; i < n; i++) {
		double x = v[i];
		uint32_t j = i;

		for (; j > 0 && v[j - 1] > x; j--)
			v[j] = v[j - 1];
		v[j] = x;
	}
}

double
agent_timing_quantile(double *v, uint32_t n, double p)
{
	double x = p * (double)(n - 1);
	uint32_t i;

	timing_sort(v, n);
	/* p outside [0, 1] or NAN: the nearest end. */
	if (!(x > 0))
		return v[0];
	i = x >= (double)(n - 1) ? n - 1 : (uint32_t)x;
	return v[i];
}

double
agent_timing_median(double *v, uint32_t n)
{
	timing_sort(v, n);
	if (n % 2 == 1)
		return v[n / 2];
	/* Halves first: the sum of two huge finite times stays finite. */
	return v[n / 2 - 1] / 2 + v[n / 2] / 2;
}

static uint32_t
timing_count(uint64_t seen)
{
	return seen > UINT32_MAX ? UINT32_MAX : (uint32_t)seen;
}

static uint32_t
timing_kept(const agent_reservoir *r)
{
	return r->seen < K ? (uint32_t)r->seen : K;
}

static bool
timing_sample_after(const com_comm_sample *x, const com_comm_sample *y)
{
	if (x->bytes != y->bytes)
		return x->bytes > y->bytes;
	return x->compressed && !y->compressed;
}

static void
timing_sort_samples(com_comm_sample *v, uint32_t n)
{
	for (uint32_t i = 1; i < n; i++) {
		com_comm_sample x = v[i];
		uint32_t j = i;

		for (; j > 0 && timing_sample_after(&v[j - 1], &x); j--)
			v[j] = v[j - 1];
		v[j] = x;
	}
}

void
agent_timing_finish(agent_timing *t, com_layer_stats *ret,
    com_comm_sample **ret_comm, uint32_t *ret_n_comm, uint64_t *ret_dropped)
{
	for (uint32_t i = 0; i < t->n_layers; i++) {
		agent_timing_layer *l = &t->layers[i];
		com_layer_stats *s = &ret[i];

		s->comm_raw_ms = 0.0;
		s->comm_raw_n = 0;
		s->comm_comp_ms = 0.0;
		s->comm_comp_n = 0;
		s->codec_ms = 0.0;
		if (l->raw.seen > 0) {
			s->comm_raw_ms = agent_timing_quantile(l->raw.ms,
			    timing_kept(&l->raw), AGENT_TIMING_QUANTILE);
			s->comm_raw_n = timing_count(l->raw.seen);
		}
		if (l->comp.seen > 0) {
			s->comm_comp_ms = agent_timing_quantile(l->comp.ms,
			    timing_kept(&l->comp), AGENT_TIMING_QUANTILE);
			s->codec_ms = agent_timing_quantile(l->comp.codec,
			    timing_kept(&l->comp), AGENT_TIMING_QUANTILE);
			s->comm_comp_n = timing_count(l->comp.seen);
		}
		l->raw.seen = 0;
		l->comp.seen = 0;
	}
	for (uint32_t i = 0; i < t->n_buckets; i++) {
		agent_timing_bucket *b = &t->buckets[i];

		t->samples[i] = (com_comm_sample){
			.bytes = b->bytes,
			.ms = agent_timing_median(b->res.ms,
			    timing_kept(&b->res)),
			.count = timing_count(b->res.seen),
			.compressed = b->compressed,
		};
	}
	timing_sort_samples(t->samples, t->n_buckets);
	*ret_comm = t->n_buckets > 0 ? t->samples : NULL;
	*ret_n_comm = t->n_buckets;
	*ret_dropped = t->dropped;
	t->n_buckets = 0;
	t->dropped = 0;
}
