/* aggregate - one window's statistics reduced over a group of ranks.
 *
 * With `aggregate: node` or `job` the ranks of a group (a node's, or the
 * whole job's) reduce their window statistics inside the training job and
 * one of them, the group's lowest rank, sends a single report covering
 * them all (com_report.ranks). The reduction is the caller's collective,
 * an element-wise all-reduce over doubles (sum, max, min); this module
 * lays each rank's report out in three vectors, one per operator, and
 * makes the covering report from the reduced vectors, each statistic by
 * its `agg` in the statistics table (bellows/stats.h):
 *   SUM, SUM_SAT    summed (integers through doubles: exact below 2^53);
 *   MAX, MIN_NZ     the largest, the smallest non-zero;
 *   MEAN            the mean over the group (bellowsd weighs it by the
 *                   ranks covered);
 *   GATED_MEAN      the mean over the ranks whose gate is non-zero;
 *   GATED_MEDIAN    approximated by the same mean: a median over ranks
 *                   would need every rank's value per layer;
 *   GATED_MAX       the largest over the ranks whose gate is non-zero
 *                   (the gate itself, NONE, is summed);
 *   NORM            the reporting rank's own value (rank 0's with `job`)
 *                   and, beside it, the mean over the group
 *                   (com_layer_stats.acc_norm_mean);
 *   STEP_MEDIAN*    the median over the group's ranks of the value per
 *                   step, exact: each rank's value is gathered into its
 *                   slot of a group-long vector (a sum where the others
 *                   put 0), scaled back by the reporting rank's steps;
 *   NONE            a rank's own (steps), the largest (step_ms_max,
 *                   observed_steps) or the sum (byte and miss counters);
 *                   step_ms_rank_min/max are not reduced but set from
 *                   the gathered step times (below).
 * The window's LR, epoch, batch size, steps and collectives are the
 * reporting rank's own. The per-step timings' minimum and maximum over
 * the group are kept in `spread`; those of step_ms, the fastest and the
 * slowest rank's mean step time, travel as step_ms_rank_min and
 * step_ms_rank_max beside the median (step_ms) and the group's slowest
 * single step (step_ms_max).
 *
 * The vectors' layout depends only on the layer table and the group, so
 * it is the same on every rank of the group, as a collective requires.
 * Buffers are allocated once, at init. Not thread-safe: the training
 * thread owns it.
 */
#ifndef AGENT_AGGREGATE_H
#define AGENT_AGGREGATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/msg.h"
#include "common/stat_table.h"

/* Which buffer an entry is reduced in, and where. */
typedef struct agent_aggregate_at {
	int op;       /* BELLOWS_REDUCE_*, -1: not reduced */
	uint32_t off; /* index in that buffer's per-layer (or timings) part */
	uint32_t cnt; /* GATED_*: index of the gated-rank count in the sum
		       * buffer's per-layer part */
} agent_aggregate_at;

typedef struct agent_aggregate {
	uint32_t n_layers;                    /* layers in the table */
	uint32_t group;                       /* ranks in the group */
	uint32_t slot;                        /* this rank's index in it */
	bool *arrays;                         /* n_layers: the layer carries
					       * array statistics */
	uint32_t n_array_layers;              /* of them, true */
	agent_aggregate_at lat[COM_N_LSTATS]; /* layer entries */
	agent_aggregate_at tat[COM_N_TSTATS]; /* timing entries; STEP_*:
					       * off is the gathered slots'
					       * first index */
	uint32_t lstride[3];                  /* per-layer doubles, by op */
	uint32_t tlen[3];                     /* timing doubles, by op */
	size_t len[3];                        /* doubles in each buffer */
	double *buf[3];                       /* the buffers, by op */
	double *scratch;                      /* group doubles, medians */
	com_layer_stats *out;                 /* the covering report's
					       * layers */
	uint64_t *out_arrays;                 /* their array statistics */
	double spread[COM_N_TSTATS][2];       /* STEP_*: min and max per
					       * step over the group, last
					       * window (NAN: none) */
} agent_aggregate;

/* Lays out the reduction of a `group`-rank group in which this rank is
 * `slot`, for n_layers layers, those flagged in arrays[] (NULL: none)
 * carrying array statistics. Returns 0, BELLOWS_EINVAL (group 0, slot
 * not below it, n_layers 0), or BELLOWS_ENOMEM; on failure *a is
 * zeroed and needs no fini. */
int agent_aggregate_init(agent_aggregate *a, uint32_t n_layers,
    const bool *arrays, uint32_t group, uint32_t slot);

/* Frees what init allocated; safe on a zeroed or finalised struct. */
void agent_aggregate_fini(agent_aggregate *a);

/* Writes this rank's report `own` (all n_layers layers, in table order)
 * into the three buffers, ready for the collective: a->buf[op] (a->len[op]
 * doubles) is to be reduced by op over the group. */
void agent_aggregate_pack(agent_aggregate *a, const com_report *own);

/* Folds one other rank's packed buffers into a's (what a collective
 * does; for simulations and tests): x[op] holds a->len[op] doubles. */
void agent_aggregate_fold(agent_aggregate *a, double *const x[3]);

/* Makes the report covering the group from the reduced buffers: *ret is
 * `own` with its layers and timings replaced by the group's (ret's
 * layers point into a, valid until the next unpack or fini) and ranks
 * set to the group's size. `own` is not changed. */
void agent_aggregate_unpack(agent_aggregate *a, const com_report *own,
    com_report *ret);

#endif /* AGENT_AGGREGATE_H */
