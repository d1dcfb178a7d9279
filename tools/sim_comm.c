/* sim_comm - the modelled communication of `bellows sim`, see
 * sim_comm.h.
 */
#include "sim_comm.h"

#include "sim_model.h"
#include "sim_rank.h"

#include <bellows/error.h>

#include <math.h>
#include <stdlib.h>

#define SIM_MIB 1048576.0

double
tool_sim_allreduce_ms(const sim_opts *o, double bytes)
{
	double p = o->ranks > 1 ? (double)o->ranks : 2.0;
	double per_ms = o->gbps * 1e9 / 8.0 / 1e3; /* bytes per ms */

	return 2.0 * o->alpha_ms * (p - 1) +
	    2.0 * bytes * (p - 1) / (p * per_ms);
}

double
tool_sim_codec_ms(const sim_opts *o, double bytes)
{
	return o->codec_ms + o->codec_ms_per_mb * bytes / SIM_MIB;
}

/* A tensor of `bytes` is faster compressed, codec included. */
static bool
sim_pays(const sim_opts *o, double bytes)
{
	return tool_sim_allreduce_ms(o, bytes) >
	    tool_sim_allreduce_ms(o, bytes / o->ratio) +
	    tool_sim_codec_ms(o, bytes);
}

static int
sim_cmp_size(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

int
tool_sim_model_threshold(const sim_ctx *cx, uint64_t *ret, uint32_t *ret_rows)
{
	uint64_t *size = malloc(cx->o->layers * sizeof(*size));
	uint32_t n = 0, rows = 0, i;

	if (size == NULL)
		return BELLOWS_ENOMEM;
	for (uint32_t l = 0; l < cx->o->layers; l++) {
		if (cx->table[l].ndim >= 2)
			size[n++] = cx->table[l].numel * 4;
	}
	qsort(size, n, sizeof(*size), sim_cmp_size);
	for (i = 0; i < n; i++) {
		if (i == 0 || size[i] != size[i - 1])
			size[rows++] = size[i];
	}
	for (i = rows; i > 0 && sim_pays(cx->o, (double)size[i - 1]); i--)
		;
	*ret = i == rows ? UINT64_MAX : i == 0 ? 0 : size[i];
	*ret_rows = rows;
	free(size);
	return 0;
}

double
tool_sim_noise(const sim_opts *o, uint32_t rank, uint64_t step, uint64_t key)
{
	uint64_t h = tool_sim_hash(o->seed ^ 0x636f6d6dull, rank + 1, step,
	    key);

	return 1.0 + o->comm_noise * (2.0 * tool_sim_unit(h) - 1.0);
}

/* Floats this rank sends for layer l under decision d in send mode
 * `mode` (the agent's: level, threshold, gate and calibration): PowerSGD
 * sends P and Q, level x (rows + cols), for a compressed matrix. */
static uint64_t
sim_floats_sent(const bellows_layer *t, const bellows_decision *d, uint32_t l,
    int mode)
{
	double level = l < d->n_layers ? d->level[l] : 0;
	uint64_t rows, cols, compressed;

	if (mode != BELLOWS_SEND_COMPRESSED || level <= 0 || t->ndim < 2)
		return t->numel;
	rows = t->shape[0];
	cols = t->numel / rows;
	compressed = (uint64_t)ceil(level * (double)(rows + cols));
	return compressed < t->numel ? compressed : t->numel;
}

/* Reports the collective of the bucket filled so far. */
static int
sim_comm_bucket(sim_rank *rk, uint64_t step, sim_step_sums *sum)
{
	const sim_opts *o = rk->cx->o;
	double ms = tool_sim_allreduce_ms(o, sum->bucket_bytes) *
	    tool_sim_noise(o, rk->rank, step, 0x100000u + sum->bucket);
	int r;

	r = bellows_agent_comm_bucket(rk->agent, (uint64_t)sum->bucket_bytes,
	    sum->bucket_comp, ms);
	if (r != 0)
		return r;
	sum->comm_ms += ms;
	sum->bucket_bytes = 0;
	sum->bucket_comp = true;
	sum->bucket++;
	return 0;
}

int
tool_sim_comm_send(sim_rank *rk, uint32_t l, uint64_t step,
    const bellows_decision *d, sim_step_sums *sum)
{
	const sim_opts *o = rk->cx->o;
	const bellows_layer *t = &rk->cx->table[l];
	double bytes = (double)t->numel * 4, sent, ms, codec = 0;
	int mode = bellows_agent_send_mode(rk->agent, l), r;
	bool comp = mode == BELLOWS_SEND_COMPRESSED;

	if (mode < 0)
		return mode;
	sum->floats_sent += sim_floats_sent(t, d, l, mode);
	if (o->act && t->ndim >= 2) {
		uint32_t batch = d->batch_size > 0 ? d->batch_size : 128;
		double eb = l < d->n_layers && d->error_bound != NULL
		    ? d->error_bound[l]
		    : 0;
		bellows_act_stats a = {
			.lbar = o->act_lbar *
			    tool_sim_noise(o, rk->rank, step, 0x200000u + l),
			.nonzero = fmin(1.0,
			    o->act_nonzero *
				tool_sim_noise(o, rk->rank, step,
				    0x300000u + l)),
			.raw_bytes = t->numel * batch / 2,
		};

		a.stored_bytes = eb > 0
		    ? (uint64_t)((double)a.raw_bytes / o->act_ratio)
		    : a.raw_bytes;
		if ((r = bellows_agent_observe_activation(rk->agent, l, &a)) !=
		    0)
			return r;
		sum->act_stored += a.stored_bytes;
	}
	if (!o->comm_model)
		return 0;
	sent = comp ? bytes / o->ratio : bytes;
	ms = tool_sim_allreduce_ms(o, sent) *
	    tool_sim_noise(o, rk->rank, step, l);
	if (comp)
		codec = tool_sim_codec_ms(o, bytes) *
		    tool_sim_noise(o, rk->rank, step, 0x400000u + l);
	if ((r = bellows_agent_comm_layer(rk->agent, l, comp, ms, codec)) != 0)
		return r;
	sum->codec_ms += codec;
	if (comp)
		sum->comp_ms += ms;
	else
		sum->raw_ms += ms;
	if (o->buckets == 0) {
		sum->comm_ms += ms;
		return 0;
	}
	sum->bucket_bytes += sent;
	sum->bucket_comp = sum->bucket_comp && comp;
	/* Layers split into contiguous buckets: l goes to l * N / L. */
	if (l + 1 == o->layers ||
	    (uint64_t)(l + 1) * o->buckets / o->layers != sum->bucket)
		return sim_comm_bucket(rk, step, sum);
	return 0;
}

double
tool_sim_step_ms(const sim_opts *o, const sim_step_sums *sum,
    double backward_ms)
{
	if (o->step_model == SIM_STEP_OVERLAP)
		return fmax(backward_ms, sum->raw_ms) + sum->comp_ms +
		    sum->codec_ms;
	return backward_ms + sum->raw_ms + sum->comp_ms + sum->codec_ms;
}
