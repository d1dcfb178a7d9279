/* window - aggregation of one window's reports across the ranks of a job.
 *
 * Reports are folded in as they arrive (O(layers) each), so closing a
 * window costs the same whether 2 or 2,000 ranks reported. The view handed
 * to policies (bellows_window) is built from the aggregate on close.
 */
#ifndef CTL_WINDOW_H
#define CTL_WINDOW_H

#include "common/msg.h"

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

/* The most bytes one window of a job with `world` ranks and `n_layers`
 * layers can come to hold when every rank reports every layer's send
 * timings, array statistics (up to the cap of layers with arrays) and
 * `max_comm` collectives: what a job's admission counts for
 * each window it may aggregate at once. Saturates at SIZE_MAX. */
size_t ctl_window_bytes_max(uint32_t world, uint32_t n_layers,
    uint32_t max_comm);

/* Where the history finds the aggregate of entry `i` of the layer table
 * (com_layer_stat_table) in the policy view: the offset in
 * bellows_window_layer of the value its column wcol (col 0) or wcol2
 * (col 1) holds, of the entry's wtype; SIZE_MAX when it has no such
 * column or i is out of the table. */
size_t ctl_window_layer_col(uint32_t i, int col);

/* The same for entry `i` of the timings (com_timing_stat_table): the
 * offset in bellows_window of the value of its column wcol; SIZE_MAX for
 * none. */
size_t ctl_window_timing_col(uint32_t i);

/* Folds in one rank's report (already checked against the job: layer
 * indices < n_layers), its per-tensor timings and its collectives
 * (CommSamples, which the window copies). A report whose `ranks` is above
 * 1 covers ranks rank .. rank + ranks - 1, reduced inside the job: each
 * of them counts as reported, its means weigh as many ranks, and its
 * per-step timings and per-tensor medians count once. Returns 0,
 * BELLOWS_EINVAL if the ranks covered are not all below world,
 * BELLOWS_EBUSY if one of them already reported this window (the
 * duplicate is ignored), or BELLOWS_ENOMEM (nothing of the report is
 * folded in and the rank may report again). */
int ctl_window_add(ctl_window *window, const com_report *report);

/* Array statistics (BELLOWS_LAYER_ARRAYS) left out of this window's sums
 * because more than 1,024 of its layers carried one: what a job's
 * admission counts for arrays. The view's arrays are then partial. */
uint64_t ctl_window_arrays_dropped(const ctl_window *window);

/* Window index. */
uint64_t ctl_window_index(const ctl_window *window);

/* Monotonic time of the first report. */
uint64_t ctl_window_opened_ms(const ctl_window *window);

/* Ranks that reported. */
uint32_t ctl_window_reported(const ctl_window *window);

/* True when `rank` reported. */
bool ctl_window_has(const ctl_window *window, uint32_t rank);

/* Builds the policy view of the window into *ret, as policies/bellows/
 * policy.h documents each field: sums, means over the ranks that measured
 * a statistic, medians over ranks (NAN for a per-tensor time nobody
 * measured, 0 for a window time nobody measured). The layers and comm
 * arrays are owned by the window and valid until it is destroyed; names
 * and shapes are borrowed from `layers`. `in_force` is the state applied
 * during the window (levels, bounds, LR scale, gate, size threshold and
 * calibration shown to policies). May be called again: the result is the
 * same. Never fails. */
void ctl_window_view(ctl_window *window, const char *job, uint32_t world,
    const com_layer_info *layers, const com_decision *in_force,
    bellows_window *ret);

/* The step up to which (exclusive) decision `d` makes ranks calibrate:
 * apply_step + calibrate_steps, saturated; 0 when it asks for none. */
uint64_t ctl_window_calibrate_until(const com_decision *d);

#endif /* CTL_WINDOW_H */
