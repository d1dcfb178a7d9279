/* sim_comm - the communication `bellows sim` models (--comm-model).
 *
 * The ranks of a sim share no network: the time of each gradient send
 * is computed, as a ring all-reduce of its bytes per rank,
 * 2A(p-1) + 2b(p-1)/(p G) (A ms latency per ring step, G Gbit/s, p
 * ranks), plus a codec time when the send goes compressed, each with a
 * relative noise fixed by the seed. The ranks report these times
 * through the agent exactly as a training process reports measured
 * ones, so policies that fit a performance model (SlimGC's threshold,
 * the compression gate) get numbers whose right answer is known: the
 * threshold the model implies is printed at the start.
 */
#ifndef TOOL_SIM_COMM_H
#define TOOL_SIM_COMM_H

#include "sim_ctx.h"

#include <stdint.h>

/* The modelled time (ms) of one ring all-reduce of `bytes` per rank
 * among o->ranks ranks (at least 2). Pure. */
double tool_sim_allreduce_ms(const sim_opts *o, double bytes);

/* The modelled codec time (ms) of compressing `bytes` of float32. Pure. */
double tool_sim_codec_ms(const sim_opts *o, double bytes);

/* The size threshold a calibration finds without noise: the robust rule
 * (the smallest size from which every larger one pays, codec included)
 * over the distinct sizes of the 2-D layers, those a policy's default
 * selector gives a level. *ret is 0 when every size pays, UINT64_MAX
 * when the largest does not; *ret_rows is the number of distinct
 * sizes. Returns 0, or BELLOWS_ENOMEM (outputs untouched). */
int tool_sim_model_threshold(const sim_ctx *cx, uint64_t *ret,
    uint32_t *ret_rows);

/* 1 +- o->comm_noise, fixed by the seed, the rank, the step and `key`
 * (which tells apart the sends of one step). Pure. */
double tool_sim_noise(const sim_opts *o, uint32_t rank, uint64_t step,
    uint64_t key);

#endif /* TOOL_SIM_COMM_H */
