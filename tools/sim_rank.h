/* sim_rank - one rank process of `bellows sim`: a real agent fed
 * synthetic gradients in lockstep with the other ranks.
 *
 * A rank is a forked process with its own agent (and so its own ZeroMQ
 * context: the parent has none when it forks). Each step it waits for
 * every alive rank to finish the step before (the all-reduce of a
 * data-parallel job), takes the decision in force from its agent and
 * records its seq in the shared records, observes every layer's
 * gradient, reports the modelled sends and ends the step. Rank 0 also
 * writes the records for `bellows replay` and prints each new decision.
 * At its end a rank adds its agent's counters to its slot, for the
 * parent's summary.
 */
#ifndef TOOL_SIM_RANK_H
#define TOOL_SIM_RANK_H

#include "sim_ctx.h"

#include <bellows/agent.h>

#include <stdint.h>
#include <stdio.h>

#define SIM_JOIN_MS      30000 /* wait for a rank's Welcome */
#define SIM_EXIT_STOPPED 3     /* a rank's exit code when told to stop */

/* What one rank process works with. */
typedef struct sim_rank {
	const sim_ctx *cx;     /* shared context */
	uint32_t rank;         /* this rank */
	bellows_agent *agent;  /* its agent */
	float **pattern;       /* per layer: unit-norm direction */
	float *grad;           /* scratch gradient, largest layer */
	double *base;          /* per layer: norm scale */
	FILE *metrics_out;     /* rank 0: --record-metrics, else NULL */
	FILE *levels_out;      /* rank 0: --record-levels, else NULL */
	uint64_t start_window; /* first window this process runs */
	uint64_t applied;      /* distinct decisions it applied */
	uint64_t lag;          /* steps from a window's end to its decision,
				* least seen; UINT64_MAX: none seen yet */
	uint64_t reduce_calls; /* --aggregate: all-reduces it made */
} sim_rank;

/* The body of the process of rank `rank`, starting at `start_step` (a
 * window boundary): runs the steps to the end of the job, or until the
 * parent sets the stop flag, and fills the rank's slot. Called in the
 * child after fork; cx is the parent's, read-only but for the rank's
 * slot and records. Returns the process exit code: 0 after the last
 * step, SIM_EXIT_STOPPED when told to stop, 1 on any failure (said on
 * stderr). */
int tool_sim_rank_main(const sim_ctx *cx, uint32_t rank, uint64_t start_step);

#endif /* TOOL_SIM_RANK_H */
