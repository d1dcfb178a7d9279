/* window - the gradient statistics of one window of steps, per layer.
 *
 * Every gradient the trainer observes is folded into its layer's running
 * statistics: element count, non-zero and non-finite counts, sum of
 * squares, sum of absolute values and largest absolute value (in double),
 * the window accumulator (the float sum of the layer's gradients over the
 * window, whose L2 norm is the signal Accordion needs) and, for layers
 * that ask for it, a momentum average that lives across windows. Finishing
 * a window hands out the statistics and starts the next one.
 *
 * Buffers are allocated once, at init: observing never allocates.
 * NaN and infinities are counted as non-finite and left out of every sum,
 * the accumulator and the momentum.
 *
 * This is the plain C loop; not thread-safe (the training thread owns it).
 */
#ifndef AGENT_WINDOW_H
#define AGENT_WINDOW_H

#include <stdint.h>

#include <bellows/agent.h>

#include "msg.h"

typedef struct agent_window_layer {
	uint64_t numel;          /* elements per observation */
	float *acc;              /* window sum of g; NULL: no accumulator */
	float *momentum;         /* m = beta m + (1-beta) g; NULL: off */
	uint64_t count;          /* elements observed in the window */
	uint64_t nonzero;        /* finite elements != 0 */
	uint64_t nonfinite;      /* NaN or infinite elements */
	double sum_sq;           /* sum of g^2 over finite elements */
	double abs_sum;          /* sum of |g| over finite elements */
	double max_abs;          /* largest finite |g| */
	uint32_t observed_steps; /* steps with at least one observation */
	uint64_t last_step;      /* step of the last observation, +1; 0: none */
} agent_window_layer;

typedef struct agent_window {
	uint32_t n_layers;          /* entries in layers */
	agent_window_layer *layers; /* per layer, in layer-table order */
	float beta;                 /* momentum coefficient */
} agent_window;

/* Prepares *w for the `n` layers of `layers` (numel and flags are read),
 * allocating each layer's accumulator (unless BELLOWS_LAYER_NO_ACCUMULATOR)
 * and momentum (with BELLOWS_LAYER_MOMENTUM, zero-initialised). Returns 0,
 * BELLOWS_EINVAL for n == 0 or a layer of numel 0, or BELLOWS_ENOMEM (then
 * *w needs no fini). */
int agent_window_init(agent_window *w, const bellows_layer *layers, uint32_t n,
    double beta);

/* Frees everything *w owns. Safe on a zeroed or finalised window. */
void agent_window_fini(agent_window *w);

/* Folds n values of layer `layer`'s gradient, observed during step `step`,
 * into the window. Returns 0, or BELLOWS_EINVAL for a bad layer index, a
 * NULL grad or n != the layer's numel (then nothing changes). grad is
 * borrowed for the call. */
int agent_window_observe(agent_window *w, uint32_t layer, const float *grad,
    uint64_t n, uint64_t step);

/* Writes the window's statistics of every layer into ret[0..n_layers-1]
 * (layer index, counts, sums, acc_norm, momentum_abs_mean) and starts a new
 * window: sums and the accumulator are reset, the momentum is kept. Never
 * fails. */
void agent_window_finish(agent_window *w, com_layer_stats *ret);

#endif /* AGENT_WINDOW_H */
