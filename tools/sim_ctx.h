/* sim_ctx - what the parent and the ranks of `bellows sim` share.
 *
 * Parent and ranks share one anonymous MAP_SHARED mapping:
 *
 *   sim_shared   header (stop flag, next window of --record-levels)
 *   sim_slot     one per rank, on its own cache line: step_done (last
 *                completed step + 1), alive, agent counters at exit
 *   seq          ranks x steps: the decision seq each rank applied at each
 *                step, SIM_NOT_RUN where it did not run the step
 *   tables       ranks x steps: a hash of the codec table in force there
 *                (0: none), to check that every rank switches tables at
 *                the same step
 *
 * The lockstep emulates a data-parallel all-reduce: before beginning step
 * s a rank waits until every alive rank has finished step s - 1. The
 * parent kills and re-forks ranks; a re-forked rank starts at a window
 * boundary ahead of the group, with its step_done already set there, so
 * the group waits for it exactly as for a rank of the original job.
 */
#ifndef TOOL_SIM_CTX_H
#define TOOL_SIM_CTX_H

#include "sim_opts.h"

#include <bellows/agent.h>

#include <stdalign.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define SIM_NOT_RUN UINT64_MAX /* record of a step a rank did not run */

/* One rank's slot. The counters at the end are the agent's, summed over
 * the rank's processes that exited normally. */
typedef struct sim_slot {
	alignas(64) _Atomic uint64_t step_done; /* last finished step + 1 */
	_Atomic int alive;                /* 1 while the group waits for it */
	_Atomic int at_kill;              /* victim reached its kill point */
	_Atomic uint64_t decisions;       /* decisions received */
	_Atomic uint64_t misses;          /* apply steps passed without one */
	_Atomic uint64_t snapshots;       /* snapshot requests */
	_Atomic uint64_t reconnects;      /* welcomes after the first */
	_Atomic uint64_t reports_dropped; /* reports the queue dropped */
	_Atomic int finished;             /* its last process ran every step */
	_Atomic int welcomed_end;         /* its last process ended welcomed
					   * by bellowsd */
	_Atomic uint64_t lost;            /* decisions its last process was
					   * owed after losing bellowsd for
					   * good (see sim_rank_lost) */
	int last_error;                   /* the daemon's last refusal, 0 =
					   * none; written before the process
					   * exits, read after it is reaped */
	char last_error_text[256];        /* its message */
	_Atomic uint64_t reduce_gen;      /* --aggregate: the last all-reduce
					   * call whose values are in its
					   * rows (sim_reduce.h) */
} sim_slot;

typedef struct sim_shared {
	_Atomic int stop;             /* parent tells every rank to give up */
	_Atomic uint64_t levels_next; /* first window --record-levels has not
				       * written, over rank 0's processes */
} sim_shared;

/* Everything a rank process needs, built by the parent before forking. */
typedef struct sim_ctx {
	const sim_opts *o;    /* options */
	uint64_t total_steps; /* windows x steps */
	bellows_layer *table; /* the model's layers */
	uint32_t *shapes;     /* two entries per layer */
	char (*names)[32];    /* layer names */
	uint64_t floats_raw;  /* sum of numel */
	void *map;            /* the shared mapping */
	size_t map_len;       /* its length */
	sim_shared *sh;       /* header in map */
	sim_slot *slots;      /* ranks entries in map */
	uint64_t *seq;        /* ranks x total_steps records in map */
	uint64_t *tables;     /* ranks x total_steps table hashes in map */
	double *reduce;       /* --aggregate: ranks x 2 rows of reduce_len
			       * doubles in map, NULL without */
	size_t reduce_len;    /* doubles in a row */
} sim_ctx;

/* Maps the shared records for cx->o->ranks ranks and cx->total_steps
 * steps (both set by the caller) into cx: every slot alive at the
 * start window's first step, every record SIM_NOT_RUN. Call before
 * forking: the mapping is inherited. Returns 0, or BELLOWS_ENOMEM with
 * cx->map_len set to the size that could not be mapped. */
int tool_sim_ctx_map(sim_ctx *cx);

/* Unmaps what tool_sim_ctx_map mapped; NULL-safe and idempotent (does
 * nothing when nothing is mapped). */
void tool_sim_ctx_unmap(sim_ctx *cx);

#endif /* TOOL_SIM_CTX_H */
