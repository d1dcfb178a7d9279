/* replay - `bellows replay`: the configured policies run over recorded
 * metrics, without a daemon or agents.
 *
 * The job entry is found and its policy set built exactly as bellowsd
 * builds them (ctl_config_match, ctl_policy_set_new: the same initial
 * state), and every recorded window is handed to ctl_policy_set_run as
 * bellowsd hands a closed window, so the same metrics give the same
 * decisions. A window of a metrics file holds only what the file has:
 * each layer's gradient norm (as rank 0's, the mean and the configured
 * norm alike) and the LR, with the next recorded window's LR as the LR
 * to come; every other statistic is 0, one rank reported, and levels,
 * bounds, batch size and LR scale are the state in force. A window of
 * the history (--db) is the complete window bellowsd handed its
 * policies: every layer statistic (activations, per-tensor times), the
 * window's timings and memory, every rank's collectives; only the knob
 * state in it is the replay's own (levels, bounds, LR scale, gate, size
 * threshold, and the calibration from the recorded apply step). Rank
 * losses, joins and reloads are not replayed.
 *
 * The recorded windows come from a metrics file or from a run of the
 * history database (--db); both become one tool_replay_input and go
 * through the same tool_replay_run_input. A run of the database carries
 * what the file cannot: rank 0's norm and the mean apart, and the LR to
 * come as the daemon heard it. Its replay is then compared with the
 * levels (or batch size and LR scale) the daemon had in force.
 */
#ifndef TOOL_REPLAY_H
#define TOOL_REPLAY_H

#include "policyhost/config.h"
#include "client/historydb.h"
#include "client/metrics.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* Recorded windows as the replay reads them; borrowed from a metrics
 * table or a run of the history. */
typedef struct tool_replay_input {
	uint32_t n_layers;             /* layers of the table */
	const com_layer_info *layers;  /* the table */
	uint64_t n_windows;            /* windows to replay */
	const uint64_t *window;        /* n_windows indices, increasing */
	const double *lr;              /* n_windows: LR of the window */
	const double *lr_next;         /* n_windows: LR the next window
					* starts with, as bellowsd heard it;
					* NULL: the next recorded window's
					* (see tool_replay_input_metrics) */
	const double *grad_norm;       /* n_windows x n_layers: the norm
					* policies get as grad_norm */
	const double *grad_norm_rank0; /* same layout: rank 0's, NAN if it
					* did not report; NULL: grad_norm */
	const double *grad_norm_mean;  /* same layout: the mean over the
					* ranks; NULL: grad_norm */
	const tool_hdb_replay *rec;    /* a run of the history, whose windows
					* (same count and table) are handed
					* whole: every statistic, timing and
					* collective as bellowsd aggregated
					* it; NULL: only the fields above */
} tool_replay_input;

/* How a replay differs from the recorded run (tool_replay_compare). */
typedef struct tool_replay_diff {
	uint64_t windows;          /* windows compared */
	uint64_t rows;             /* rows compared: windows x layers, or
				    * windows for the batch size */
	uint64_t differ;           /* rows whose state differs */
	uint64_t changes_recorded; /* changes from one compared window to
				    * the next, per layer, as recorded */
	uint64_t changes_replayed; /* same, as replayed */
	uint64_t bound_differ;     /* windows x layers whose activation
				    * error bound differs (with --db) */
	uint64_t gate_differ;      /* windows whose size threshold or
				    * compression gate differs */
	uint64_t plan_rows;        /* windows x layers whose residual plan
				    * was recorded (with --db) */
	uint64_t plan_differ;      /* of them, those whose plan (group,
				    * rows, cols) differs */
	uint64_t plan_planned;     /* of them, those where either plan is
				    * not the default (own, whole) one */
	uint64_t table_differ;     /* windows whose codec table differs */
	uint64_t tables_recorded;  /* codec table changes, as recorded */
	uint64_t tables_replayed;  /* same, as replayed */
	bool tables_any;           /* a window had a codec table in force,
				    * recorded or replayed */
} tool_replay_diff;

typedef struct tool_replay {
	bool batch;           /* the policies own the batch size */
	uint64_t n_windows;   /* windows replayed: the input's windows */
	uint32_t n_layers;    /* layers of the input's table */
	double *level;        /* n_windows x n_layers: the level in force
			       * during each window, table order */
	uint32_t *batch_size; /* n_windows: batch size in force, 0 = the
			       * trainer's own */
	double *lr_scale;     /* n_windows: LR scale in force */
	uint64_t *threshold;  /* n_windows: size threshold in force */
	bool *gate_off;       /* n_windows: compression gate in force */
	uint64_t *table_hash; /* n_windows: tool_table_hash of the codec
			       * table in force, 0: none */
	double *error_bound;  /* n_windows x n_layers: the activation error
			       * bound in force */
	double *resid_plan;   /* n_windows x n_layers x 3: the residual plan
			       * (group, rows, cols) decided at the
			       * window's close */
	uint64_t failures;    /* policy calls that failed (state kept) */
} tool_replay;

/* Points *ret at the windows of `m`: each layer's norm stands for rank
 * 0's and the mean alike, and the LR to come is the next window's, or
 * the window's own for the last one and when the next is 0 (as agents
 * report it). `m` must outlive *ret. */
void tool_replay_input_metrics(const tool_metrics *m, tool_replay_input *ret);

/* Replays the windows of `in` through the policies of job entry `jc` for
 * a job named `job`. The state in force during the first window is the
 * policies' initial state; during each later one, the state decided when
 * the window before it closed. A policy that fails on a window changes
 * nothing, as in bellowsd; it is counted and, when `warn` is not NULL,
 * described there. On success *ret is the caller's (free with
 * tool_replay_destroy). Returns 0, BELLOWS_ENOMEM, or the error of a
 * policy's init (errbuf names the policy); *ret is then untouched. */
int tool_replay_run_input(const ctl_job_conf *jc, const char *job,
    const tool_replay_input *in, FILE *warn, tool_replay **ret, char *errbuf,
    size_t errlen);

/* tool_replay_run_input over tool_replay_input_metrics(m). */
int tool_replay_run(const ctl_job_conf *jc, const char *job,
    const tool_metrics *m, FILE *warn, tool_replay **ret, char *errbuf,
    size_t errlen);

/* Writes the result as CSV to `out`: "window,layer,level" with a row per
 * window and layer, or, when the policies own the batch size,
 * "window,batch_size,lr_scale" with a row per window. Returns 0 or
 * BELLOWS_EIO. */
int tool_replay_print(const tool_replay *rp, const tool_metrics *m, FILE *out);

/* Compares replay `rp` of recorded run `rec` (same windows, same layer
 * table) with the state the run had in force (also its size threshold
 * and compression gate, counted in gate_differ), and writes the rows as
 * CSV
 * to `out`: "window,layer,recorded,replayed", or, when the policies own
 * the batch size, "window,recorded_batch_size,replayed_batch_size,
 * recorded_lr_scale,replayed_lr_scale"; only the rows that differ unless
 * `all`. Fills *ret. Returns 0 or BELLOWS_EIO. */
int tool_replay_compare(const tool_replay *rp, const tool_hdb_replay *rec,
    bool all, FILE *out, tool_replay_diff *ret);

/* Frees a result. NULL-safe, sets *rp to NULL. */
void tool_replay_destroy(tool_replay **rp);

/* Runs `bellows replay` with its arguments (argv[0] is "replay"). Returns
 * the process exit code: 0 when the replay (or its comparison with a run
 * of the history) was printed, 1 when the configuration, the metrics or
 * the history are invalid or a policy cannot start, 2 on a usage
 * error. */
int tool_replay_main(int argc, char **argv);

/* Writes the subcommand's usage text to f. */
void tool_replay_usage(FILE *f);

#endif /* TOOL_REPLAY_H */
