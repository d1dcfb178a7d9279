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
 * threshold the model implies is printed at the start. A rank's sends
 * follow its agent's send mode (level, size threshold, compression gate,
 * calibration), so the floats it reports sent are the decision's. With
 * --step-model, the step time a rank reports is made of them too, so
 * that whole steps compare raw and compressed on the modelled path.
 */
#ifndef TOOL_SIM_COMM_H
#define TOOL_SIM_COMM_H

#include "sim_ctx.h"
#include "sim_rank.h"

#include <bellows/agent.h>

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

/* What one step's modelled sends add up to. */
typedef struct sim_step_sums {
	double comm_ms;       /* layer sends, or buckets with --buckets */
	double codec_ms;      /* codec time of the compressed sends */
	double raw_ms;        /* layer sends that went raw */
	double comp_ms;       /* layer sends that went compressed */
	uint64_t floats_sent; /* floats sent */
	uint64_t act_stored;  /* activation bytes kept for backward */
	double bucket_bytes;  /* bytes of the bucket being filled */
	bool bucket_comp;     /* every layer in it went compressed */
	uint32_t bucket;      /* its index */
} sim_step_sums;

/* Sends layer l of rank rk in `step` under decision d as the agent's
 * send mode says: adds its floats to sum, reports its activation
 * statistics (--act), and with --comm-model its modelled send and codec
 * times and, with --buckets, the collective of each bucket it closes.
 * Returns 0 or the agent's error (the caller says it). */
int tool_sim_comm_send(sim_rank *rk, uint32_t l, uint64_t step,
    const bellows_decision *d, sim_step_sums *sum);

/* The step time rank reports under o->step_model (not SIM_STEP_WALL)
 * from the step's sums and its backward time (ms). Pure. */
double tool_sim_step_ms(const sim_opts *o, const sim_step_sums *sum,
    double backward_ms);

#endif /* TOOL_SIM_COMM_H */
