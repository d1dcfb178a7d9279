/* keygen - `bellows keygen`: a CURVE keypair for bellowsd or a client.
 *
 * Draws a keypair (libzmq's zmq_curve_keypair, through common/cert.h) and
 * writes it as DIR/NAME.key (the secret certificate, mode 0600) and
 * DIR/NAME.pub (the public one) in ZeroMQ's certificate text format, the
 * one czmq's zcert_save and pyzmq's zmq.auth write, so certificates made
 * by those tools work with bellows and the other way round. An existing
 * certificate is never replaced without --force.
 */
#ifndef TOOL_KEYGEN_H
#define TOOL_KEYGEN_H

#include <stdio.h>

/* Runs `bellows keygen ...` (argv[0] is "keygen"). Returns the process
 * exit code: 0 when both files were written (the public key and the two
 * paths printed on stdout), 1 when they were not (a file exists without
 * --force, the folder cannot be written, libzmq has no CURVE), 2 on a
 * usage error (a missing --out or --name, a NAME that is not 1..255
 * letters, digits, '.', '_' or '-' starting with no '.'). */
int tool_keygen_main(int argc, char **argv);

/* Writes the subcommand's usage text to f. */
void tool_keygen_usage(FILE *f);

#endif /* TOOL_KEYGEN_H */
