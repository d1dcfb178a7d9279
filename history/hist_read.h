/* hist_read - the one reader of recorded windows: what bellowsd's
 * recovery and resume hand back to the policies, and what `bellows
 * replay --db` replays, so that "the daemon's input" and "replay's input"
 * are the same code.
 *
 * The run's layer table is read here too (hist_layers_read), with the
 * same checks for both. A cursor walks the windows of one run in window order,
 * rebuilding from window_info, windows and comm_samples the bellows_window the
 * policies were handed when it closed, and the knob state that was in force
 * during it. Columns are read by name (the statistics by the statistics
 * table, hist_cols.h): a file of any schema version reads, a column it
 * lacks as "not measured". A layer with no windows row in a window reads
 * as the aggregate of no rank (0, or NaN for the medians and norms), and
 * the cursor says how many layers had a row.
 *
 * Threading: a cursor is used on one thread, with a connection that
 * thread owns for the cursor's life.
 */
#ifndef HIST_READ_H
#define HIST_READ_H

#include "common/msg.h"

#include <bellows/policy.h>

#include <sqlite3.h>

#include <stdbool.h>
#include <stdint.h>

typedef struct hist_windows hist_windows;

/* Reads the layer table of run `run` (table layers, in idx order) into
 * *ret, *ret_n entries (the caller's, hist_layers_free). Returns 0,
 * BELLOWS_EINVAL when the table is unusable (indices not 0, 1, ..., a
 * layer without a name or shape, a shape that does not parse or
 * disagrees with ndim, no layer at all), BELLOWS_EIO when SQLite fails,
 * or BELLOWS_ENOMEM, errbuf saying why ("run 2: layer 'emb' has shape
 * '2x' and ndim 2, which do not agree"); outputs untouched on failure. */
int hist_layers_read(sqlite3 *db, int64_t run, com_layer_info **ret,
    uint32_t *ret_n, char *errbuf, size_t errlen);

/* Frees a table from hist_layers_read (n entries). NULL-safe; sets
 * *layers to NULL. */
void hist_layers_free(com_layer_info **layers, uint32_t n);

/* The knob state in force during a window (window_info's state_*; the
 * levels and bounds are the layers' level and error_bound). */
typedef struct hist_state {
	uint32_t batch_size;      /* per-rank batch size knob, 0 = own */
	uint64_t size_threshold;  /* bytes */
	bool compression_off;     /* gate */
	uint64_t apply_step;      /* apply step of the decision in force */
	uint64_t calibrate_steps; /* its calibrate_steps */
} hist_state;

/* Opens a cursor over the windows of run `run` below window `below` in
 * `db` (borrowed; outlives the cursor), whose layer table is `layers`
 * (n_layers entries, borrowed, outlive the cursor: the windows' layers
 * take their names and shapes). Returns 0 and *ret (the caller's,
 * hist_windows_close), BELLOWS_ENOMEM, or BELLOWS_EIO when a statement
 * cannot be prepared (errbuf says why); *ret untouched on failure. */
int hist_windows_open(sqlite3 *db, int64_t run, uint64_t below,
    const com_layer_info *layers, uint32_t n_layers, hist_windows **ret,
    char *errbuf, size_t errlen);

/* Reads the next window into *w (its layers and comm are the cursor's,
 * valid until the next call; job NULL) and the state in force during it
 * into *st; *ret_rows gets how many layers had a windows row. Returns 1
 * for a window, 0 after the last one, BELLOWS_EINVAL for a row no
 * bellowsd writes (a negative window), BELLOWS_EIO when SQLite fails
 * (errbuf says why in both) or BELLOWS_ENOMEM; outputs untouched unless
 * 1. */
int hist_windows_next(hist_windows *c, bellows_window *w, hist_state *st,
    uint32_t *ret_rows, char *errbuf, size_t errlen);

/* The step up to which (exclusive) a state makes ranks calibrate:
 * apply_step + calibrate_steps, saturated; 0 when it asks for none. */
uint64_t hist_calibrate_until(uint64_t apply_step, uint64_t calibrate_steps);

/* Finalizes the cursor's statements and frees it. NULL-safe; sets *c to
 * NULL. */
void hist_windows_close(hist_windows **c);

#endif /* HIST_READ_H */
