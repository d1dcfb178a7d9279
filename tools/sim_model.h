/* sim_model - the model `bellows sim` trains: layers, learning rate and
 * the course of the gradient norms, all from the seed.
 *
 * Nothing here is random at run time: every number is a hash of the
 * seed and of where it is used (rank, step, layer), so that every rank
 * of a run, and every run with the same seed, sees the same model and
 * the same gradients, and a rank re-forked after --kill carries on where
 * the one it replaces would have been. The norms decay fast early and
 * jump after each learning-rate decay (at 50 % and 75 % of the windows),
 * as in the step schedules of the papers' CIFAR runs, so that policies
 * have something to react to.
 */
#ifndef TOOL_SIM_MODEL_H
#define TOOL_SIM_MODEL_H

#include "sim_ctx.h"

#include <stdint.h>

/* splitmix64's finaliser of x: neighbouring inputs give unrelated
 * outputs. Pure. */
uint64_t tool_sim_mix(uint64_t x);

/* A uniform number in [0, 1) from the hash h. Pure. */
double tool_sim_unit(uint64_t h);

/* The hash of (seed, a, b, c), for tool_sim_unit. Pure. */
uint64_t tool_sim_hash(uint64_t seed, uint64_t a, uint64_t b, uint64_t c);

/* The learning rate of `window`: 0.1, times 0.1 at each decay the run of
 * o->windows windows has passed. Pure. */
double tool_sim_lr(const sim_opts *o, uint64_t window);

/* The synthetic evaluation after `window` (--eval): an accuracy rising
 * as 1 - e^(-3t) (t the share of windows run) to o->eval_final at the
 * last window, and its loss -ln(accuracy). Pure. */
void tool_sim_eval(const sim_opts *o, uint64_t window, double *ret_acc,
    double *ret_loss);

/* A gradient norm at `step` relative to its layer's base: decays fast
 * early (tau = 15 % of the run), jumps about threefold right after each
 * learning-rate decay and decays again. Pure. */
double tool_sim_norm_course(const sim_ctx *cx, uint64_t step);

/* Builds the layer table of cx->o->layers layers into cx (table, shapes,
 * names, floats_raw): weights of 64 x (32 + 8 (l mod 64)) with a bias
 * every fourth layer. Returns 0, or BELLOWS_ENOMEM with whatever was
 * allocated left for tool_sim_model_free. */
int tool_sim_model_build(sim_ctx *cx);

/* Frees what tool_sim_model_build allocated; safe on a half-built or
 * zeroed cx. */
void tool_sim_model_free(sim_ctx *cx);

#endif /* TOOL_SIM_MODEL_H */
