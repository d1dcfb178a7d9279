/* sim - `bellows sim`: a simulated data-parallel job against bellowsd.
 *
 * Runs a job without PyTorch: every rank is a process of its own with a
 * real agent, producing synthetic gradients whose norms follow the course
 * of a real training run (fast decay, then a jump at each learning-rate
 * decay), and stepping in lockstep as ranks of a data-parallel job do
 * around their all-reduce. Each rank records which decision it applied at
 * each step; at the end the parent checks that every rank applied the
 * same decision at every step, which is the property bellows exists to
 * guarantee. A rank can be killed and brought back as a new process to
 * exercise rejoining.
 *
 * The lockstep and the records live in an anonymous shared mapping and use
 * atomics only, no locks, so a rank killed with SIGKILL never leaves a
 * lock held. Ranks are forked before the parent has any ZeroMQ context.
 */
#ifndef TOOL_SIM_H
#define TOOL_SIM_H

#include <stdio.h>

/* Runs `bellows sim` with its arguments (argv[0] is "sim"). Returns the
 * process exit code: 0 when every rank finished and all agreed, 1 when a
 * rank failed, the daemon did not answer or ranks disagreed, 2 on a usage
 * error. */
int tool_sim_main(int argc, char **argv);

/* Writes the subcommand's usage text to f. */
void tool_sim_usage(FILE *f);

#endif /* TOOL_SIM_H */
