/* sim_reduce - the in-job all-reduce of `bellows sim`, see sim_reduce.h.
 */
#include "sim_reduce.h"

#include "sim_rank.h"

#include <bellows/agent.h>
#include <bellows/error.h>

#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>

#define SIM_REDUCE_SPIN_NS 20000 /* poll interval while the group comes */

size_t
tool_sim_reduce_len(const sim_opts *o)
{
	/* Per layer at most two doubles per statistic (a value and its
	 * gated-rank count) and its histogram's 256 bins; per rank, one
	 * slot of each per-step timing median; the timings themselves. */
	return (size_t)o->layers * (64 + (o->exp_hist ? 256 : 0)) +
	    (size_t)o->ranks * 16 + 64;
}

/* The group of `rank`: its first rank and its size. */
static void
sim_reduce_group(const sim_opts *o, uint32_t rank, uint32_t *ret_first,
    uint32_t *ret_n)
{
	uint32_t per = o->aggregate == BELLOWS_AGGREGATE_JOB ? o->ranks
							     : o->node_ranks;
	uint32_t first = rank - rank % per;

	*ret_first = first;
	*ret_n = o->ranks - first < per ? o->ranks - first : per;
}

static double *
sim_reduce_row(const sim_ctx *cx, uint32_t rank, uint64_t call)
{
	return cx->reduce + ((size_t)rank * 2 + (call & 1)) * cx->reduce_len;
}

int
tool_sim_allreduce(void *arg, double *values, size_t n, int op)
{
	sim_rank *rk = arg;
	const sim_ctx *cx = rk->cx;
	const struct timespec nap = { 0, SIM_REDUCE_SPIN_NS };
	uint64_t call = ++rk->reduce_calls;
	uint32_t first, size;

	if (n > cx->reduce_len)
		return BELLOWS_ENOMEM;
	sim_reduce_group(cx->o, rk->rank, &first, &size);
	memcpy(sim_reduce_row(cx, rk->rank, call), values, n * sizeof(double));
	atomic_store(&cx->slots[rk->rank].reduce_gen, call);
	for (;;) {
		bool ready = true;

		if (atomic_load(&cx->sh->stop))
			return BELLOWS_ECLOSED;
		for (uint32_t q = first; q < first + size && ready; q++)
			if (atomic_load(&cx->slots[q].alive) &&
			    atomic_load(&cx->slots[q].reduce_gen) < call)
				ready = false;
		if (ready)
			break;
		nanosleep(&nap, NULL);
	}
	/* Every rank folds the same rows in the same order. */
	memcpy(values, sim_reduce_row(cx, first, call), n * sizeof(double));
	for (uint32_t q = first + 1; q < first + size; q++) {
		const double *x = sim_reduce_row(cx, q, call);

		for (size_t i = 0; i < n; i++) {
			if (op == BELLOWS_REDUCE_SUM)
				values[i] += x[i];
			else if (op == BELLOWS_REDUCE_MAX && x[i] > values[i])
				values[i] = x[i];
			else if (op == BELLOWS_REDUCE_MIN && x[i] < values[i])
				values[i] = x[i];
		}
	}
	return 0;
}
