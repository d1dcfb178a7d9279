/* sim_model - the synthetic model of `bellows sim`, see sim_model.h.
 */
#include "sim_model.h"

#include <bellows/error.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

uint64_t
tool_sim_mix(uint64_t x)
{
	/* splitmix64's finaliser: cheap, and good enough that neighbouring
	 * (seed, rank, step, layer) tuples look independent. */
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

double
tool_sim_unit(uint64_t h)
{
	return (double)(h >> 11) * (1.0 / 9007199254740992.0);
}

uint64_t
tool_sim_hash(uint64_t seed, uint64_t a, uint64_t b, uint64_t c)
{
	return tool_sim_mix(
	    tool_sim_mix(tool_sim_mix(seed ^ 0x62656c6c6f7773ull) ^ a) ^
	    (b * 0x9e3779b97f4a7c15ull + c));
}

/* Learning-rate decays at 50 % and 75 % of the windows, as in the
 * step schedules of the papers' CIFAR runs. */
static void
sim_decay_windows(const sim_opts *o, uint32_t ret[2], int *ret_n)
{
	uint32_t d1 = o->windows / 2,
		 d2 = (uint32_t)((uint64_t)o->windows * 3 / 4);
	int n = 0;

	if (d1 > 0)
		ret[n++] = d1;
	if (d2 > 0 && d2 != d1)
		ret[n++] = d2;
	*ret_n = n;
}

double
tool_sim_lr(const sim_opts *o, uint64_t window)
{
	uint32_t d[2];
	double lr = 0.1;
	int n;

	sim_decay_windows(o, d, &n);
	for (int i = 0; i < n; i++) {
		if (window >= d[i])
			lr *= 0.1;
	}
	return lr;
}

void
tool_sim_eval(const sim_opts *o, uint64_t window, double *ret_acc,
    double *ret_loss)
{
	double t = (double)(window + 1) / o->windows;
	double acc = o->eval_final * (1 - exp(-3 * t)) / (1 - exp(-3));

	*ret_acc = fmin(fmax(acc, 1e-6), 1);
	*ret_loss = -log(*ret_acc);
}

double
tool_sim_norm_course(const sim_ctx *cx, uint64_t step)
{
	const sim_opts *o = cx->o;
	double total = (double)cx->total_steps;
	double tau = fmax(1.0, 0.15 * total), tau_d = fmax(1.0, 0.05 * total);
	double s = 0.15 + exp(-(double)step / tau);
	uint32_t d[2];
	int n;

	sim_decay_windows(o, d, &n);
	for (int i = 0; i < n; i++) {
		uint64_t at = (uint64_t)d[i] * o->steps;

		if (step >= at)
			s *= 1.0 + 2.0 * exp(-(double)(step - at) / tau_d);
	}
	return s;
}

int
tool_sim_model_build(sim_ctx *cx)
{
	const sim_opts *o = cx->o;

	cx->table = calloc(o->layers, sizeof(*cx->table));
	cx->shapes = calloc((size_t)o->layers * 2, sizeof(*cx->shapes));
	cx->names = calloc(o->layers, sizeof(*cx->names));
	if (cx->table == NULL || cx->shapes == NULL || cx->names == NULL)
		return BELLOWS_ENOMEM;
	for (uint32_t l = 0; l < o->layers; l++) {
		bellows_layer *t = &cx->table[l];
		uint32_t *shape = &cx->shapes[2 * l];

		/* A bias every fourth layer, for realism: 1-D tensors are
		 * what selectors like min_ndim exist for. Widths cycle
		 * every 64 layers so that deep models stay cheap. */
		if (l % 4 == 3) {
			snprintf(cx->names[l], sizeof(cx->names[l]),
			    "layer%u.bias", l);
			shape[0] = 64;
			t->ndim = 1;
		} else {
			snprintf(cx->names[l], sizeof(cx->names[l]),
			    "layer%u.weight", l);
			shape[0] = 64;
			shape[1] = 32 + 8 * (l % 64);
			t->ndim = 2;
		}
		t->name = cx->names[l];
		t->shape = shape;
		t->numel = t->ndim == 1 ? shape[0]
					: (uint64_t)shape[0] * shape[1];
		/* With activation statistics (COMET), the weights' momentum
		 * average too: M_avg is the other half of the bound. */
		if (o->act && t->ndim >= 2)
			t->flags |= BELLOWS_LAYER_MOMENTUM;
		if (o->exp_hist && t->ndim >= 2)
			t->flags |= BELLOWS_LAYER_EXP_HIST;
		cx->floats_raw += t->numel;
	}
	return 0;
}

void
tool_sim_model_free(sim_ctx *cx)
{
	free(cx->table);
	free(cx->shapes);
	free(cx->names);
}
