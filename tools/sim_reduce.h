/* sim_reduce - the in-job all-reduce of `bellows sim --aggregate`.
 *
 * With --aggregate node or job the ranks' agents reduce each window's
 * statistics inside the job (docs/agent.md, "Aggregation inside the
 * job") through a collective the trainer supplies. The sim's ranks share
 * no process group, so this is that collective over the sim's shared
 * mapping: each rank writes its values into its own row, publishes the
 * call's number in its slot, waits until every alive rank of its group
 * has published the same call, and folds the group's rows in rank order,
 * so every rank of the group gets the same result. Rows alternate
 * between two per rank: a rank can be at most one call ahead of the
 * slowest of its group, whose previous row it then does not overwrite.
 */
#ifndef TOOL_SIM_REDUCE_H
#define TOOL_SIM_REDUCE_H

#include "sim_ctx.h"

#include <stddef.h>

/* Doubles one rank's row holds: enough for every all-reduce an agent of
 * this sim's model makes. Pure. */
size_t tool_sim_reduce_len(const sim_opts *o);

/* A bellows_allreduce_fn over the sim's shared mapping; arg is the
 * calling rank's sim_rank. Returns 0, BELLOWS_ENOMEM when n exceeds a
 * row (the agent then reports alone), or BELLOWS_ECLOSED when the
 * parent asked every rank to stop. */
int tool_sim_allreduce(void *arg, double *values, size_t n, int op);

#endif /* TOOL_SIM_REDUCE_H */
