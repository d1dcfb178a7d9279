/* window - aggregation of one window's reports across the ranks of a job.
 *
 * Reports are folded in as they arrive (O(layers) each), so closing a
 * window costs the same whether 2 or 2,000 ranks reported. The view handed
 * to policies (bellows_window) is built from the aggregate on close.
 */
#ifndef CTL_WINDOW_H
#define CTL_WINDOW_H

#include "msg.h"

#include <bellows/policy.h>

#include <stdbool.h>
#include <stdint.h>

typedef struct ctl_window ctl_window;

/* Creates an empty aggregate for window `index` of a job with `world`
 * ranks and `n_layers` layers, opened at monotonic time `now_ms`.
 * Returns 0 or BELLOWS_ENOMEM. */
int ctl_window_new(uint64_t index, uint32_t world, uint32_t n_layers,
    uint64_t now_ms, ctl_window **ret_window);

/* Frees it. NULL-safe. */
void ctl_window_destroy(ctl_window **window);

/* Folds in one rank's report (already checked against the job: rank <
 * world, layer indices < n_layers). Returns 0, or BELLOWS_EBUSY if that
 * rank already reported this window (the duplicate is ignored). */
int ctl_window_add(ctl_window *window, const com_report *report);

/* Window index. */
uint64_t ctl_window_index(const ctl_window *window);

/* Monotonic time of the first report. */
uint64_t ctl_window_opened_ms(const ctl_window *window);

/* Ranks that reported. */
uint32_t ctl_window_reported(const ctl_window *window);

/* True when `rank` reported. */
bool ctl_window_has(const ctl_window *window, uint32_t rank);

/* Builds the policy view of the window into *ret. The layers array is owned
 * by the window and valid until it is destroyed; names and shapes are
 * borrowed from `layers`. `in_force` is the state applied during the
 * window (levels and bounds shown to policies). Never fails. */
void ctl_window_view(ctl_window *window, const char *job, uint32_t world,
    const com_layer_info *layers, const com_decision *in_force,
    bellows_window *ret);

#endif /* CTL_WINDOW_H */
