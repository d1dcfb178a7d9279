/* policy_check - `bellows policy check FILE`: validates a configuration.
 *
 * Loads the file exactly as bellowsd does (ctl_config_load_all: every
 * key, type, range and knob owner checked, every error reported) without
 * starting anything, so a policy file can be checked before a SIGHUP
 * reload or in CI. An error is printed as "FILE:LINE:COLUMN: message"; a
 * valid file is printed back as the normalised summary of what it
 * configures, defaults filled in.
 */
#ifndef TOOL_POLICY_CHECK_H
#define TOOL_POLICY_CHECK_H

#include <stdio.h>

/* Runs `bellows policy ...` (argv[0] is "policy", argv[1] must be
 * "check"). Returns the process exit code: 0 for a valid file, 1 for an
 * invalid or unreadable one, 2 on a usage error. */
int tool_policy_check_main(int argc, char **argv);

/* Writes the subcommand's usage text to f. */
void tool_policy_check_usage(FILE *f);

#endif /* TOOL_POLICY_CHECK_H */
