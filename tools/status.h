/* status - `bellows status`: what a running bellowsd is doing.
 *
 * Sends one STATUS request to the daemon's control socket and prints the
 * reply: the daemon's counters, each job with its windows and decisions,
 * one row per rank (liveness, step, the decision it applies, rejoins), and
 * the peers whose messages were dropped, as a table or as JSON for
 * scripts.
 */
#ifndef TOOL_STATUS_H
#define TOOL_STATUS_H

#include "common/args.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* What the command line asks of `bellows status`. */
typedef struct tool_status_opts {
	const char *control;    /* daemon's ROUTER endpoint */
	com_args_shared sh;     /* --job: only this job; NULL = all */
	bool json;              /* --format json */
	uint32_t timeout_ms;    /* how long to wait for the reply */
	const char *server_key; /* --server-key, NULL: not given */
	const char *client_key; /* --client-key, NULL: not given */
} tool_status_opts;

/* Parses status's options (argv[0] is "status") from its rows of the
 * option table into *ret, first filled with the defaults
 * ($BELLOWS_CONTROL, $BELLOWS_JOB). Returns -1 to go on, 0 after
 * --help (the usage written to stdout), 2 on a usage error (said on
 * stderr as "bellows status: ...", an unknown option with the nearest
 * one). *ret borrows from argv and the environment. */
int tool_status_parse(int argc, char **argv, tool_status_opts *ret);

/* Runs `bellows status` with its arguments (argv[0] is "status"). Returns
 * the process exit code: 0, 1 when the daemon did not answer or has no
 * such job, 2 on a usage error. */
int tool_status_main(int argc, char **argv);

/* Writes the subcommand's usage text to f. */
void tool_status_usage(FILE *f);

#endif /* TOOL_STATUS_H */
