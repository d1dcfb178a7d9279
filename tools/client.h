/* client - a one-request-at-a-time client of bellowsd's control socket.
 *
 * The command line asks bellowsd questions (STATUS) the way an agent
 * talks to it: a DEALER connected to the daemon's ROUTER, one Envelope per
 * frame. A request is sent and its reply awaited with a deadline, so a
 * daemon that is down or wedged turns into a timeout, never a hang. This is
 * the only module of the command line that includes <zmq.h>; it owns its
 * ZeroMQ context, which exists between tool_client_open() and
 * tool_client_close() only (`bellows sim` forks outside that span).
 */
#ifndef TOOL_CLIENT_H
#define TOOL_CLIENT_H

#include "msg.h"

#include <stdint.h>

typedef struct tool_client tool_client;

/* Creates a ZeroMQ context and a DEALER connected to `endpoint`. The
 * connection is made in the background: a daemon that is not up yet is
 * not an error here. Returns 0, BELLOWS_EINVAL for an endpoint ZeroMQ
 * refuses, BELLOWS_ESYS when the context or socket cannot be created, or
 * BELLOWS_ENOMEM. On success *ret_client is the caller's. */
int tool_client_open(const char *endpoint, tool_client **ret_client);

/* Closes the socket, terminates the context (pending messages are
 * dropped) and frees the client. NULL-safe; sets *client to NULL. */
void tool_client_close(tool_client **client);

/* Sends `req` and waits up to timeout_ms for one reply, which goes into
 * *ret_reply (the caller's, to com_msg_fini). Returns 0,
 * BELLOWS_ETIMEDOUT when nothing arrived in time, BELLOWS_EPROTO,
 * BELLOWS_EVERSION or BELLOWS_EMSGSIZE for a reply that does not decode,
 * BELLOWS_EINVAL or BELLOWS_ENOMEM when `req` cannot be encoded, BELLOWS_EIO
 * when ZeroMQ fails. *ret_reply is untouched on failure. */
int tool_client_request(tool_client *client, const com_msg *req,
    uint32_t timeout_ms, com_msg *ret_reply);

#endif /* TOOL_CLIENT_H */
