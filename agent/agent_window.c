/* window - per-layer gradient statistics of a window, see agent_window.h.
 *
 * The sums are kept in double, compensated, even though gradients are
 * float: a window adds up millions of squares, and the policies compare
 * norms across windows, so float rounding would show. The accumulator
 * stays float (it has one entry per gradient element); its norm and the
 * momentum's mean magnitude are taken by the same statistics kernel at the
 * window's end, on the layer's own backend.
 *
 * Finishing a window with device layers goes in three passes so that the
 * training thread waits once per stream rather than once per layer:
 * enqueue every device layer's reductions, copy-out and resets; wait for
 * each distinct stream; then read the copies.
 */
#include "agent_window.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <bellows/error.h>

/* A device layer's kern_stats on the device: the gradient's, then the
 * accumulator's and the momentum's of the window-end passes. */
#define WINDOW_DEV_STATS 3

int
agent_window_init(agent_window *w, const bellows_layer *layers, uint32_t n,
    double beta)
{
	return agent_window_init_with(w, layers, n, beta, NULL);
}

static kern_backend *
window_backend(agent_window *w, const agent_window_layer *l)
{
	return l->where == KERN_CUDA ? &w->cuda : &w->cpu;
}

static int
window_alloc(const kern_backend *b, size_t count, size_t size, void **ret)
{
	if (count > SIZE_MAX / size)
		return BELLOWS_ENOMEM;
	return b->ops->mem_alloc(b->ctx, count * size, ret);
}

static int
window_layer_init(agent_window *w, agent_window_layer *l,
    const bellows_layer *desc)
{
	kern_backend *b;
	void *p;
	int rc;

	l->numel = desc->numel;
	l->where = (desc->flags & BELLOWS_LAYER_DEVICE) ? KERN_CUDA : KERN_HOST;
	b = window_backend(w, l);
	l->acc_wanted = !(desc->flags & BELLOWS_LAYER_NO_ACCUMULATOR);
	if (l->acc_wanted) {
		if ((rc = window_alloc(b, l->numel, sizeof(float), &p)) != 0)
			return rc;
		l->acc = p;
	}
	if (desc->flags & BELLOWS_LAYER_MOMENTUM) {
		if ((rc = window_alloc(b, l->numel, sizeof(float), &p)) != 0)
			return rc;
		l->momentum = p;
	}
	if (desc->flags & BELLOWS_LAYER_EXP_HIST) {
		if ((rc = window_alloc(b, 256, sizeof(uint64_t), &p)) != 0)
			return rc;
		l->hist = p;
		rc = l->where == KERN_HOST
		    ? window_alloc(b, 256, sizeof(uint64_t), &p)
		    : b->ops->host_alloc(b->ctx, 256 * sizeof(uint64_t), &p);
		if (rc != 0)
			return rc;
		l->hist_done = p;
	}
	if (l->where == KERN_HOST) {
		l->st = &l->host_st;
		return 0;
	}
	if ((rc = window_alloc(b, WINDOW_DEV_STATS, sizeof(kern_stats), &p)) !=
	    0)
		return rc;
	l->st = p;
	if (b->ops->scratch_size > 0) {
		if ((rc = window_alloc(b, 1, b->ops->scratch_size, &p)) != 0)
			return rc;
		l->scratch = p;
	}
	return 0;
}

int
agent_window_init_with(agent_window *w, const bellows_layer *layers, uint32_t n,
    double beta, const kern_config *kcfg)
{
	void *p;
	int rc;

	memset(w, 0, sizeof(*w));
	if (n == 0)
		return BELLOWS_EINVAL;
	for (uint32_t i = 0; i < n; i++) {
		if (layers[i].numel == 0)
			return BELLOWS_EINVAL;
		if (layers[i].flags & BELLOWS_LAYER_DEVICE)
			w->n_device++;
	}
	w->beta = (float)beta;
	if ((rc = kern_backend_open(&w->cpu, KERN_HOST, kcfg)) != 0)
		goto fail;
	if (w->n_device > 0) {
		if ((rc = kern_backend_open(&w->cuda, KERN_CUDA, NULL)) != 0)
			goto fail;
		rc = w->cuda.ops->host_alloc(w->cuda.ctx,
		    (size_t)w->n_device * WINDOW_DEV_STATS * sizeof(kern_stats),
		    &p);
		if (rc != 0)
			goto fail;
		w->readback = p;
		rc = BELLOWS_ENOMEM;
		if ((w->synced = calloc(w->n_device, sizeof(*w->synced))) ==
		    NULL)
			goto fail;
	}
	rc = BELLOWS_ENOMEM;
	if ((w->layers = calloc(n, sizeof(*w->layers))) == NULL)
		goto fail;
	w->n_layers = n;
	for (uint32_t i = 0; i < n; i++)
		if ((rc = window_layer_init(w, &w->layers[i], &layers[i])) != 0)
			goto fail;
	return 0;
fail:
	agent_window_fini(w);
	return rc;
}

int
agent_window_accumulate(agent_window *w, bool on)
{
	int rc = 0;

	for (uint32_t i = 0; i < w->n_layers; i++) {
		agent_window_layer *l = &w->layers[i];
		kern_backend *b = window_backend(w, l);
		void *p;
		int r;

		if (!on && l->acc != NULL) {
			b->ops->mem_free(b->ctx, l->acc);
			l->acc = NULL;
		} else if (on && l->acc_wanted && l->acc == NULL) {
			/* mem_alloc zeroes: the window sum starts at 0. */
			if ((r = window_alloc(b, l->numel, sizeof(float),
				 &p)) != 0)
				rc = rc != 0 ? rc : r;
			else
				l->acc = p;
		}
	}
	return rc;
}

uint32_t
agent_window_accumulators(const agent_window *w)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < w->n_layers; i++)
		n += w->layers[i].acc != NULL;
	return n;
}

void
agent_window_fini(agent_window *w)
{
	for (uint32_t i = 0; w->layers != NULL && i < w->n_layers; i++) {
		agent_window_layer *l = &w->layers[i];
		kern_backend *b = window_backend(w, l);

		if (b->ops == NULL)
			continue;
		b->ops->mem_free(b->ctx, l->acc);
		b->ops->mem_free(b->ctx, l->momentum);
		b->ops->mem_free(b->ctx, l->hist);
		if (l->where == KERN_CUDA)
			b->ops->host_free(b->ctx, l->hist_done);
		else
			b->ops->mem_free(b->ctx, l->hist_done);
		if (l->where == KERN_CUDA) {
			b->ops->mem_free(b->ctx, l->st);
			b->ops->mem_free(b->ctx, l->scratch);
		}
	}
	if (w->readback != NULL)
		w->cuda.ops->host_free(w->cuda.ctx, w->readback);
	free(w->synced);
	free(w->layers);
	kern_backend_close(&w->cuda);
	kern_backend_close(&w->cpu);
	memset(w, 0, sizeof(*w));
}

int
agent_window_observe(agent_window *w, uint32_t layer, const float *grad,
    uint64_t n, uint64_t step)
{
	return agent_window_observe_as(w, layer, grad, n, KERN_F32, KERN_HOST,
	    NULL, step);
}

int
agent_window_observe_as(agent_window *w, uint32_t layer, const void *grad,
    uint64_t n, int dtype, int where, void *stream, uint64_t step)
{
	agent_window_layer *l;
	kern_backend *b;
	kern_job job;
	int rc;

	if (layer >= w->n_layers || grad == NULL)
		return BELLOWS_EINVAL;
	l = &w->layers[layer];
	if (n != l->numel || kern_dtype_size(dtype) == 0 || where != l->where)
		return BELLOWS_EINVAL;
	b = window_backend(w, l);
	job = (kern_job){
		.grad = grad,
		.n = n,
		.dtype = dtype,
		.beta = w->beta,
		.stats = l->st,
		.acc = l->acc,
		.momentum = l->momentum,
		.scratch = l->scratch,
	};
	if ((rc = b->ops->stats(b->ctx, &job, stream)) != 0)
		return rc;
	if (l->hist != NULL &&
	    (rc = b->ops->histogram(b->ctx, grad, n, dtype, l->hist, stream)) !=
		0)
		return rc;
	l->stream = stream;
	if (l->last_step != step + 1) {
		l->last_step = step + 1;
		l->observed_steps++;
	}
	return 0;
}

int
agent_window_activation(agent_window *w, uint32_t layer, double lbar,
    double nonzero, uint64_t stored_bytes, uint64_t raw_bytes)
{
	agent_window_layer *l;

	if (layer >= w->n_layers)
		return BELLOWS_EINVAL;
	l = &w->layers[layer];
	if (l->act_steps == UINT32_MAX)
		return 0; /* a mean over 4 billion steps needs no more */
	l->act_steps++;
	l->act_lbar += lbar;
	l->act_nonzero += nonzero;
	l->act_bytes += (double)stored_bytes;
	l->act_raw_bytes += (double)raw_bytes;
	return 0;
}

int
agent_window_residual(agent_window *w, uint32_t layer,
    const bellows_resid_stats *s)
{
	agent_window_layer *l;

	if (layer >= w->n_layers)
		return BELLOWS_EINVAL;
	l = &w->layers[layer];
	if (l->resid_steps == UINT32_MAX)
		return 0;
	l->resid_steps++;
	l->resid_sum[0] += s->l1;
	l->resid_sum[1] += s->l2;
	l->resid_sum[2] += s->q50;
	l->resid_sum[3] += s->q90;
	l->resid_sum[4] += s->q99;
	l->resid_sum[5] += s->floats;
	return 0;
}

/* The residual means of a layer, into its report entry. */
static void
window_report_residual(const agent_window_layer *l, com_layer_stats *s)
{
	double n = (double)l->resid_steps;

	s->resid_steps = l->resid_steps;
	if (l->resid_steps == 0)
		return;
	s->resid_l1 = l->resid_sum[0] / n;
	s->resid_l2 = l->resid_sum[1] / n;
	s->resid_q50 = l->resid_sum[2] / n;
	s->resid_q90 = l->resid_sum[3] / n;
	s->resid_q99 = l->resid_sum[4] / n;
	s->resid_floats = l->resid_sum[5] / n;
}

/* The activation means of a layer, into its report entry. */
static void
window_report_activation(const agent_window_layer *l, com_layer_stats *s)
{
	double n = (double)l->act_steps;

	s->act_steps = l->act_steps;
	if (l->act_steps == 0)
		return;
	/* A mean of values in [0, 1] can round just past 1. */
	s->act_lbar = l->act_lbar / n;
	s->act_nonzero = l->act_nonzero / n > 1.0 ? 1.0 : l->act_nonzero / n;
	s->act_bytes = l->act_bytes / n;
	s->act_raw_bytes = l->act_raw_bytes / n;
}

/* Folds the n floats at v (the layer's memory) into *st, on the layer's
 * backend: the window-end pass over the accumulator or the momentum. */
static int
window_reduce(agent_window *w, const agent_window_layer *l, const float *v,
    kern_stats *st)
{
	kern_backend *b = window_backend(w, l);
	kern_job job = {
		.grad = v,
		.n = l->numel,
		.dtype = KERN_F32,
		.stats = st,
		.scratch = l->scratch,
	};

	return b->ops->stats(b->ctx, &job, l->stream);
}

/* The report entry of a layer from its gradient, accumulator and momentum
 * statistics (the latter two unused when the layer has none). */
static void
window_report(const agent_window_layer *l, const kern_stats *st,
    com_layer_stats *s)
{
	const kern_stats *g = &st[0];

	s->count = g->count;
	s->nonzero = g->count - g->zeros - g->nonfinite;
	s->nonfinite = g->nonfinite;
	s->sum_sq = kern_stats_sum_sq(g);
	s->abs_sum = kern_stats_abs_sum(g);
	s->max_abs = g->max_abs;
	s->observed_steps = l->observed_steps;
	if (l->acc != NULL)
		s->acc_norm = st[1].nonfinite > 0
		    ? INFINITY
		    : sqrt(kern_stats_sum_sq(&st[1]));
	if (l->momentum != NULL)
		s->momentum_abs_mean = st[2].nonfinite > 0
		    ? INFINITY
		    : kern_stats_abs_sum(&st[2]) / (double)l->numel;
}

static int
window_finish_host(agent_window *w, agent_window_layer *l, com_layer_stats *s)
{
	kern_stats st[WINDOW_DEV_STATS];
	int rc = 0;

	memset(st, 0, sizeof(st));
	st[0] = l->host_st;
	if (l->acc != NULL && (rc = window_reduce(w, l, l->acc, &st[1])) == 0)
		memset(l->acc, 0, l->numel * sizeof(float));
	if (rc == 0 && l->momentum != NULL)
		rc = window_reduce(w, l, l->momentum, &st[2]);
	if (rc == 0)
		window_report(l, st, s);
	if (rc == 0 && l->hist != NULL) {
		memcpy(l->hist_done, l->hist, 256 * sizeof(uint64_t));
		memset(l->hist, 0, 256 * sizeof(uint64_t));
		l->hist_valid = l->observed_steps > 0;
	}
	return rc;
}

/* Enqueues a device layer's window end: the accumulator and momentum
 * passes, the copy of its three kern_stats into rb, and the resets. */
static int
window_enqueue_device(agent_window *w, agent_window_layer *l, kern_stats *rb)
{
	const kern_ops *ops = w->cuda.ops;
	void *ctx = w->cuda.ctx;
	size_t bytes = WINDOW_DEV_STATS * sizeof(kern_stats);
	int rc = 0;

	if (l->acc != NULL)
		rc = window_reduce(w, l, l->acc, &l->st[1]);
	if (rc == 0 && l->momentum != NULL)
		rc = window_reduce(w, l, l->momentum, &l->st[2]);
	if (rc == 0)
		rc = ops->copy_out(ctx, rb, l->st, bytes, l->stream);
	if (rc == 0)
		rc = ops->zero(ctx, l->st, bytes, l->stream);
	if (rc == 0 && l->acc != NULL)
		rc = ops->zero(ctx, l->acc, l->numel * sizeof(float),
		    l->stream);
	if (rc == 0 && l->hist != NULL)
		rc = ops->copy_out(ctx, l->hist_done, l->hist,
		    256 * sizeof(uint64_t), l->stream);
	if (rc == 0 && l->hist != NULL)
		rc = ops->zero(ctx, l->hist, 256 * sizeof(uint64_t), l->stream);
	return rc;
}

/* Waits for `stream` once per finish; returns the wait's result. */
static int
window_sync(agent_window *w, uint32_t *n_synced, void *stream)
{
	for (uint32_t i = 0; i < *n_synced; i++)
		if (w->synced[i].stream == stream)
			return w->synced[i].rc;
	w->synced[*n_synced].stream = stream;
	w->synced[*n_synced].rc = w->cuda.ops->synchronize(w->cuda.ctx, stream);
	return w->synced[(*n_synced)++].rc;
}

int
agent_window_finish(agent_window *w, com_layer_stats *ret)
{
	uint32_t n_synced = 0;
	uint32_t k = 0;
	int first = 0;
	int rc;

	for (uint32_t i = 0; i < w->n_layers; i++) {
		agent_window_layer *l = &w->layers[i];

		memset(&ret[i], 0, sizeof(ret[i]));
		ret[i].layer = i;
		l->hist_valid = false;
		if (l->where == KERN_HOST)
			rc = window_finish_host(w, l, &ret[i]);
		else
			rc = l->finish_rc = window_enqueue_device(w, l,
			    &w->readback[WINDOW_DEV_STATS * k++]);
		if (rc != 0 && first == 0)
			first = rc;
	}
	k = 0;
	for (uint32_t i = 0; i < w->n_layers; i++) {
		agent_window_layer *l = &w->layers[i];
		const kern_stats *rb;

		if (l->where != KERN_CUDA)
			continue;
		rb = &w->readback[WINDOW_DEV_STATS * k++];
		if (l->finish_rc == 0)
			l->finish_rc = window_sync(w, &n_synced, l->stream);
		if (l->finish_rc == 0) {
			window_report(l, rb, &ret[i]);
			l->hist_valid = l->hist != NULL &&
			    l->observed_steps > 0;
		} else if (first == 0) {
			first = l->finish_rc;
		}
	}
	for (uint32_t i = 0; i < w->n_layers; i++) {
		agent_window_layer *l = &w->layers[i];

		window_report_activation(l, &ret[i]);
		window_report_residual(l, &ret[i]);
		if (l->hist != NULL && l->hist_valid)
			ret[i].exp_hist = l->hist_done;
		memset(&l->host_st, 0, sizeof(l->host_st));
		l->observed_steps = 0;
		l->last_step = 0;
		l->act_steps = 0;
		l->act_lbar = 0.0;
		l->act_nonzero = 0.0;
		l->act_bytes = 0.0;
		l->act_raw_bytes = 0.0;
		l->resid_steps = 0;
		memset(l->resid_sum, 0, sizeof(l->resid_sum));
	}
	return first;
}
