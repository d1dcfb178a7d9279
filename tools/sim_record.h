/* sim_record - the records `bellows sim` writes for `bellows replay`
 * (--record-metrics, --record-levels).
 *
 * Rank 0 writes them, in the format `bellows replay --metrics` reads
 * (metrics.h): each closed window's gradient norms and learning rate,
 * and the levels bellowsd decided for each window, so that a replay of
 * the metrics can be checked against the daemon's levels. The parent
 * creates each file with its header before forking; every process of
 * rank 0 (a --kill victim's second one too) appends to it, and the
 * shared levels_next keeps a window from being written twice.
 */
#ifndef TOOL_SIM_RECORD_H
#define TOOL_SIM_RECORD_H

#include "sim_rank.h"

#include <bellows/agent.h>

#include <stdint.h>

/* Creates `path` (NULL: nothing to do) with the CSV `header`; rank 0's
 * processes append to it. Returns 0, or BELLOWS_EIO after saying why on
 * stderr. */
int tool_sim_record_create(const char *path, const char *header);

/* Says on stderr that rank rk cannot write `path` (errno's reason).
 * Returns BELLOWS_EIO, for the caller to return. */
int tool_sim_record_failed(const sim_rank *rk, const char *path);

/* Appends the levels of decision d, the state bellowsd decided for
 * window d->window, to rk->levels_out (NULL: nothing to do), unless a
 * process of rank 0 has written that window already (a repair decision
 * carries the window it repeats). Returns 0, or BELLOWS_EIO after
 * saying why. */
int tool_sim_record_levels(sim_rank *rk, const bellows_decision *d);

/* Appends the statistics of `window`, which has just closed, to
 * rk->metrics_out (NULL: nothing to do) as bellows replay reads them:
 * rank 0's norm of each layer, as bellowsd's rank-0 norm, and `lr`.
 * Returns 0, the agent's error when it has no statistics of that window
 * (BELLOWS_ESTATE for another window's), or BELLOWS_EIO; each said on
 * stderr. */
int tool_sim_record_metrics(sim_rank *rk, uint64_t window, double lr);

#endif /* TOOL_SIM_RECORD_H */
