/* replay - `bellows replay`: the configured policies run over recorded
 * metrics, without a daemon or agents.
 *
 * The job entry is found and its policy set built exactly as bellowsd
 * builds them (ctl_config_match, ctl_policy_set_new: the same initial
 * state), and every recorded window is handed to ctl_policy_set_run as
 * bellowsd hands a closed window, so the same metrics give the same
 * decisions. A recorded window holds only what the metrics file has: each
 * layer's gradient norm (as rank 0's, the mean and the configured norm
 * alike) and the LR, with the next recorded window's LR as the LR to come;
 * every other statistic is 0, one rank reported, and levels, bounds, batch
 * size and LR scale are the state in force. Rank losses, joins and reloads
 * are not replayed.
 */
#ifndef TOOL_REPLAY_H
#define TOOL_REPLAY_H

#include "config.h"
#include "metrics.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

typedef struct tool_replay {
	bool batch;           /* the policies own the batch size */
	uint64_t n_windows;   /* windows replayed: the metrics' windows */
	uint32_t n_layers;    /* layers of the metrics' table */
	double *level;        /* n_windows x n_layers: the level in force
			       * during each window, table order */
	uint32_t *batch_size; /* n_windows: batch size in force, 0 = the
			       * trainer's own */
	double *lr_scale;     /* n_windows: LR scale in force */
	uint64_t failures;    /* policy calls that failed (state kept) */
} tool_replay;

/* Replays the windows of `m` through the policies of job entry `jc` for a
 * job named `job`. The state in force during the first window is the
 * policies' initial state; during each later one, the state decided when
 * the window before it closed. A policy that fails on a window changes
 * nothing, as in bellowsd; it is counted and, when `warn` is not NULL,
 * described there. On success *ret is the caller's (free with
 * tool_replay_destroy). Returns 0, BELLOWS_ENOMEM, or the error of a
 * policy's init (errbuf names the policy); *ret is then untouched. */
int tool_replay_run(const ctl_job_conf *jc, const char *job,
    const tool_metrics *m, FILE *warn, tool_replay **ret, char *errbuf,
    size_t errlen);

/* Writes the result as CSV to `out`: "window,layer,level" with a row per
 * window and layer, or, when the policies own the batch size,
 * "window,batch_size,lr_scale" with a row per window. Returns 0 or
 * BELLOWS_EIO. */
int tool_replay_print(const tool_replay *rp, const tool_metrics *m, FILE *out);

/* Frees a result. NULL-safe, sets *rp to NULL. */
void tool_replay_destroy(tool_replay **rp);

/* Runs `bellows replay` with its arguments (argv[0] is "replay"). Returns
 * the process exit code: 0 when the replay was printed, 1 when the
 * configuration or the metrics are invalid or a policy cannot start, 2 on
 * a usage error. */
int tool_replay_main(int argc, char **argv);

/* Writes the subcommand's usage text to f. */
void tool_replay_usage(FILE *f);

#endif /* TOOL_REPLAY_H */
