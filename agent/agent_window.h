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
 * The work is the statistics kernel's (kernels/): one pass over each
 * gradient, on the CPU backend for layers in host memory and on the CUDA
 * backend for layers flagged BELLOWS_LAYER_DEVICE, whose accumulator,
 * momentum and running statistics then live on the device and are only
 * brought back when the window finishes. Gradients may be float32, float16
 * or bfloat16.
 *
 * Beside the gradients, a layer's window averages the statistics of the
 * activation its weight is fed (COMET), one set per step that has them.
 *
 * Buffers are allocated once, at init: observing never allocates.
 * NaN and infinities are counted as non-finite and left out of every sum,
 * the accumulator and the momentum.
 *
 * Not thread-safe (the training thread owns it; the CPU backend's worker
 * threads, if configured, are used inside a call only).
 */
#ifndef AGENT_WINDOW_H
#define AGENT_WINDOW_H

#include <stdbool.h>
#include <stdint.h>

#include <bellows/agent.h>

#include "kernels/kernels.h"
#include "common/msg.h"

typedef struct agent_window_layer {
	uint64_t numel;          /* elements per observation */
	int where;               /* kern_where of acc, momentum, st */
	float *acc;              /* window sum of g; NULL: no accumulator */
	bool acc_wanted;         /* not BELLOWS_LAYER_NO_ACCUMULATOR: has an
				  * accumulator unless the window's are off */
	float *momentum;         /* m = beta m + (1-beta) g; NULL: off */
	kern_stats *st;          /* running statistics: &host_st, or on the
				  * device 3 of them (gradient, and scratch
				  * for the acc and momentum passes) */
	kern_stats host_st;      /* host layers' running statistics */
	void *scratch;           /* device layers: the kernel's scratch */
	void *stream;            /* device layers: last observation's */
	int finish_rc;           /* device layers: error of the last finish */
	uint32_t observed_steps; /* steps with at least one observation */
	uint64_t last_step;      /* step of the last observation, +1; 0: none */
	uint32_t act_steps;      /* activation statistics given */
	double act_lbar;         /* sum of their L-bar */
	double act_nonzero;      /* sum of their non-zero fractions */
	double act_bytes;        /* sum of their stored bytes */
	double act_raw_bytes;    /* sum of their uncompressed bytes */
	uint32_t resid_steps;    /* residual statistics given */
	double resid_sum[6];     /* sums of their l1, l2, q50, q90, q99,
				  * floats (bellows_resid_stats order) */
	uint64_t *hist;          /* BELLOWS_LAYER_EXP_HIST: the open window's
				  * 256 exponent bins, in the layer's
				  * memory; NULL: not asked for */
	uint64_t *hist_done;     /* the last finished window's bins (host;
				  * pinned for device layers) */
	bool hist_valid;         /* hist_done holds a finished window */
} agent_window_layer;

/* A stream waited for by agent_window_finish, and how that went. */
typedef struct agent_window_sync {
	void *stream; /* cudaStream_t */
	int rc;       /* the wait's result */
} agent_window_sync;

typedef struct agent_window {
	uint32_t n_layers;          /* entries in layers */
	agent_window_layer *layers; /* per layer, in layer-table order */
	float beta;                 /* momentum coefficient */
	kern_backend cpu;           /* backend of host layers */
	kern_backend cuda;          /* of device layers; closed if none */
	uint32_t n_device;          /* device layers */
	kern_stats *readback;       /* 3 per device layer, cuda host_alloc */
	agent_window_sync *synced;  /* n_device entries, for finish */
} agent_window;

/* agent_window_init_with() on the CPU backend's defaults: one thread, the
 * best instruction set. */
int agent_window_init(agent_window *w, const bellows_layer *layers, uint32_t n,
    double beta);

/* Prepares *w for the `n` layers of `layers` (numel and flags are read),
 * allocating each layer's accumulator (unless BELLOWS_LAYER_NO_ACCUMULATOR)
 * and momentum (with BELLOWS_LAYER_MOMENTUM, zero-initialised), in device
 * memory for layers flagged BELLOWS_LAYER_DEVICE. kcfg (NULL: defaults)
 * configures the CPU backend (threads, ISA). Returns 0, BELLOWS_EINVAL for
 * n == 0, a layer of numel 0 or a bad kcfg, BELLOWS_ENOTSUP for a device
 * layer without a CUDA backend or device, BELLOWS_ENOMEM, BELLOWS_ESYS
 * (threads), or BELLOWS_EIO (CUDA); then *w needs no fini. */
int agent_window_init_with(agent_window *w, const bellows_layer *layers,
    uint32_t n, double beta, const kern_config *kcfg);

/* Frees everything *w owns. Safe on a zeroed or finalised window. */
void agent_window_fini(agent_window *w);

/* Folds n float32 values at grad (host memory) of layer `layer`'s
 * gradient, observed during step `step`, into the window:
 * agent_window_observe_as(w, layer, grad, n, KERN_F32, KERN_HOST, NULL,
 * step). */
int agent_window_observe(agent_window *w, uint32_t layer, const float *grad,
    uint64_t n, uint64_t step);

/* Folds n values of kern_dtype `dtype` at grad, in memory `where`
 * (kern_where), into layer `layer`'s window; device observations are
 * enqueued on `stream` and not waited for. Returns 0, BELLOWS_EINVAL for a
 * bad layer index, a NULL grad, n != the layer's numel, a bad dtype or
 * `where` other than the layer's (then nothing changes), or a CUDA error
 * (BELLOWS_EIO, ...). grad is borrowed for the call (device: until the
 * kernel has run on the stream). */
int agent_window_observe_as(agent_window *w, uint32_t layer, const void *grad,
    uint64_t n, int dtype, int where, void *stream, uint64_t step);

/* Adds one step's activation statistics of layer `layer`: L-bar, non-zero
 * fraction, stored and uncompressed bytes. The values are the caller's to
 * check (finite, >= 0, nonzero <= 1). Returns 0 or BELLOWS_EINVAL for a
 * bad layer index. */
int agent_window_activation(agent_window *w, uint32_t layer, double lbar,
    double nonzero, uint64_t stored_bytes, uint64_t raw_bytes);

/* Adds one step's residual statistics of layer `layer` (the caller checks
 * them: finite, >= 0). Returns 0 or BELLOWS_EINVAL for a bad layer index. */
int agent_window_residual(agent_window *w, uint32_t layer,
    const bellows_resid_stats *s);

/* Turns the window accumulators of the layers that want one (those not
 * flagged BELLOWS_LAYER_NO_ACCUMULATOR) on (allocated, zeroed) or off
 * (freed: their acc_norm is reported as 0 and observations skip the
 * accumulation). Call it only at a window's start, after init or
 * agent_window_finish and before the window's first observation, so that
 * a window's acc_norm is of all of its steps or 0. Returns 0, or
 * BELLOWS_ENOMEM (or a CUDA error) when turning on: the layers it could
 * not give one stay without (acc_norm 0) and the call may be repeated. */
int agent_window_accumulate(agent_window *w, bool on);

/* The number of layers whose window accumulator is allocated now. */
uint32_t agent_window_accumulators(const agent_window *w);

/* Writes the window's statistics of every layer into ret[0..n_layers-1]
 * (layer index, counts, sums, the accumulated norm, the momentum's mean
 * magnitude, act_steps and the means of the activation statistics,
 * resid_steps and the means of the residual statistics, and, for a layer
 * flagged BELLOWS_LAYER_EXP_HIST and observed in the window, exp_hist
 * pointing to its 256 bins, which stay the window's until the next finish;
 * every other field 0 or NULL) and starts a new window: sums, the
 * accumulator and the activation sums are reset, the momentum is kept. An
 * accumulator or momentum that overflowed to infinity gives an infinite
 * norm or mean. Device layers are reduced on the device, then every stream
 * they were
 * last observed on is waited for.
 * Returns 0, or the first CUDA error (the failing layers' entries are then
 * zero but for the index and the activation means); host layers never
 * fail. */
int agent_window_finish(agent_window *w, com_layer_stats *ret);

#endif /* AGENT_WINDOW_H */
