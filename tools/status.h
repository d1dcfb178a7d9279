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

#include <stdio.h>

/* Runs `bellows status` with its arguments (argv[0] is "status"). Returns
 * the process exit code: 0, 1 when the daemon did not answer or has no
 * such job, 2 on a usage error. */
int tool_status_main(int argc, char **argv);

/* Writes the subcommand's usage text to f. */
void tool_status_usage(FILE *f);

#endif /* TOOL_STATUS_H */
