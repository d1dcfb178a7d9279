/* codec_cli - `bellows codec`: try a gradient codec on dumped tensors.
 *
 * GComp only for now: `table` builds an exponent table from .f32 files
 * (the builder bellowsd's gcomp policy runs), `encode` and `decode` turn a
 * .f32 file into a block and back, `stats` says what a table and a level
 * make of a file (bits per exponent, per mantissa, ratio). A .f32 file is
 * raw little-endian float32. Nothing is written unless the command
 * succeeds.
 */
#ifndef TOOL_CODEC_CLI_H
#define TOOL_CODEC_CLI_H

#include <stdio.h>

/* Runs `bellows codec ACTION ...` (argv[0] is "codec"). Returns the
 * process exit code: 0 done, 1 failed (a file that cannot be read or
 * written, a malformed table or block, said with its byte offset), 2 on a
 * usage error. */
int tool_codec_main(int argc, char **argv);

/* Writes the subcommand's usage text to f. */
void tool_codec_usage(FILE *f);

#endif /* TOOL_CODEC_CLI_H */
