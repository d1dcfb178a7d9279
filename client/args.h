/* args - checked parsing of the command line's option values.
 *
 * Every number a user types goes through here, so that "--ranks 4x",
 * "--ranks -1" and "--ranks 99999999999999999999" are refused with one
 * kind of message ("bellows sim: --ranks must be an integer in [1, 256],
 * not '4x'") and the subcommands only see values in range.
 */
#ifndef TOOL_ARGS_H
#define TOOL_ARGS_H

#include <stdint.h>

/* Parses `text`, the value of option `opt` of subcommand `cmd`, as a
 * decimal integer in [min, max] into *ret. Returns 0, or BELLOWS_EINVAL
 * after printing why to stderr (*ret untouched). */
int tool_args_u64(const char *cmd, const char *opt, const char *text,
    uint64_t min, uint64_t max, uint64_t *ret);

/* Same for a uint32_t. */
int tool_args_u32(const char *cmd, const char *opt, const char *text,
    uint32_t min, uint32_t max, uint32_t *ret);

#endif /* TOOL_ARGS_H */
