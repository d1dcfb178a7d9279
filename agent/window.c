/* window - per-layer gradient statistics of a window, see window.h.
 *
 * The sums are kept in double even though gradients are float: a window
 * adds up millions of squares, and the policies compare norms across
 * windows, so float rounding would show. The accumulator stays float (it
 * has one entry per gradient element) and its norm is taken in double.
 */
#include "window.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <bellows/error.h>

int
agent_window_init(agent_window *w, const bellows_layer *layers, uint32_t n,
    double beta)
{
	memset(w, 0, sizeof(*w));
	if (n == 0)
		return BELLOWS_EINVAL;
	for (uint32_t i = 0; i < n; i++)
		if (layers[i].numel == 0)
			return BELLOWS_EINVAL;
	if ((w->layers = calloc(n, sizeof(*w->layers))) == NULL)
		return BELLOWS_ENOMEM;
	w->n_layers = n;
	w->beta = (float)beta;
	for (uint32_t i = 0; i < n; i++) {
		agent_window_layer *l = &w->layers[i];

		l->numel = layers[i].numel;
		if (l->numel > SIZE_MAX / sizeof(float))
			goto fail;
		if (!(layers[i].flags & BELLOWS_LAYER_NO_ACCUMULATOR) &&
		    (l->acc = calloc(l->numel, sizeof(float))) == NULL)
			goto fail;
		if ((layers[i].flags & BELLOWS_LAYER_MOMENTUM) &&
		    (l->momentum = calloc(l->numel, sizeof(float))) == NULL)
			goto fail;
	}
	return 0;
fail:
	agent_window_fini(w);
	return BELLOWS_ENOMEM;
}

void
agent_window_fini(agent_window *w)
{
	if (w->layers != NULL) {
		for (uint32_t i = 0; i < w->n_layers; i++) {
			free(w->layers[i].acc);
			free(w->layers[i].momentum);
		}
	}
	free(w->layers);
	memset(w, 0, sizeof(*w));
}

int
agent_window_observe(agent_window *w, uint32_t layer, const float *grad,
    uint64_t n, uint64_t step)
{
	agent_window_layer *l;
	uint64_t nonzero = 0;
	uint64_t nonfinite = 0;
	double sum_sq = 0.0;
	double abs_sum = 0.0;
	double max_abs;

	if (layer >= w->n_layers || grad == NULL)
		return BELLOWS_EINVAL;
	l = &w->layers[layer];
	if (n != l->numel)
		return BELLOWS_EINVAL;

	max_abs = l->max_abs;
	for (uint64_t i = 0; i < n; i++) {
		double g = grad[i];
		double a = fabs(g);

		if (!isfinite(g)) {
			nonfinite++;
			continue;
		}
		sum_sq += g * g;
		abs_sum += a;
		if (a > max_abs)
			max_abs = a;
		nonzero += g != 0.0;
	}
	if (l->acc != NULL) {
		float *acc = l->acc;

		for (uint64_t i = 0; i < n; i++)
			if (isfinite(grad[i]))
				acc[i] += grad[i];
	}
	if (l->momentum != NULL) {
		float *m = l->momentum;
		float b = w->beta;
		float c = 1.0f - b;

		for (uint64_t i = 0; i < n; i++)
			if (isfinite(grad[i]))
				m[i] = b * m[i] + c * grad[i];
	}

	l->count += n;
	l->nonzero += nonzero;
	l->nonfinite += nonfinite;
	l->sum_sq += sum_sq;
	l->abs_sum += abs_sum;
	l->max_abs = max_abs;
	if (l->last_step != step + 1) {
		l->last_step = step + 1;
		l->observed_steps++;
	}
	return 0;
}

void
agent_window_finish(agent_window *w, com_layer_stats *ret)
{
	for (uint32_t i = 0; i < w->n_layers; i++) {
		agent_window_layer *l = &w->layers[i];
		com_layer_stats *s = &ret[i];

		memset(s, 0, sizeof(*s));
		s->layer = i;
		s->count = l->count;
		s->nonzero = l->nonzero;
		s->nonfinite = l->nonfinite;
		s->sum_sq = l->sum_sq;
		s->abs_sum = l->abs_sum;
		s->max_abs = l->max_abs;
		s->observed_steps = l->observed_steps;
		if (l->acc != NULL) {
			double sq = 0.0;

			for (uint64_t j = 0; j < l->numel; j++)
				sq += (double)l->acc[j] * l->acc[j];
			s->acc_norm = sqrt(sq);
			memset(l->acc, 0, l->numel * sizeof(float));
		}
		if (l->momentum != NULL) {
			double sum = 0.0;

			for (uint64_t j = 0; j < l->numel; j++)
				sum += fabs((double)l->momentum[j]);
			s->momentum_abs_mean = sum / (double)l->numel;
		}
		l->count = 0;
		l->nonzero = 0;
		l->nonfinite = 0;
		l->sum_sq = 0.0;
		l->abs_sum = 0.0;
		l->max_abs = 0.0;
		l->observed_steps = 0;
		l->last_step = 0;
	}
}
