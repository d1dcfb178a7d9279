/* client - bellowsd's control and publish sockets, from outside.
 *
 * The command line asks bellowsd questions (STATUS) the way an agent
 * talks to it: a DEALER connected to the daemon's ROUTER, one Envelope per
 * frame. A request is sent and its reply awaited with a deadline, so a
 * daemon that is down or wedged turns into a timeout, never a hang. The
 * dashboard also listens to the publish socket for telemetry (a window
 * closed), through tool_telemetry below. This is the only module of the
 * command line and the dashboard that includes <zmq.h>; a client owns its
 * ZeroMQ context, which exists between tool_client_open() and
 * tool_client_close() only (`bellows sim` forks outside that span), and
 * so does a telemetry subscriber.
 * With CURVE keys (--server-key/--client-key or BELLOWS_SERVER_KEY and
 * BELLOWS_CLIENT_KEY, found by tool_client_keys) the DEALER is a CURVE
 * client. A monitor on it turns a failed handshake into an error that
 * says so instead of a silent timeout, also that of a client without
 * keys talking to a daemon that uses CURVE.
 */
#ifndef TOOL_CLIENT_H
#define TOOL_CLIENT_H

#include "common/cert.h"
#include "common/msg.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct tool_client tool_client;

/* The CURVE keys of a command-line client. */
typedef struct tool_keys {
	bool curve;              /* keys given: the sockets are CURVE clients */
	com_cert server;         /* bellowsd's public key */
	com_cert client;         /* this client's keypair */
	const char *server_path; /* where server came from, borrowed */
	const char *client_path; /* where client came from, borrowed */
} tool_keys;

/* The environment's `var` (BELLOWS_CONTROL, BELLOWS_PUBLISH,
 * BELLOWS_JOB), or `fallback` when it is unset or empty: a default that
 * the command line's option overrides. */
const char *tool_client_env(const char *var, const char *fallback);

/* Finds the keys of command `cmd` ("bellows CMD: ..." messages):
 * server_path and client_path (its --server-key and --client-key, NULL
 * when not given), else the environment's BELLOWS_SERVER_KEY and
 * BELLOWS_CLIENT_KEY (empty: unset), and loads them into *ret; neither:
 * ret->curve is false. Returns 0, or BELLOWS_EINVAL after printing why
 * to stderr: only one of the two, a file that is not a certificate
 * (named), a client certificate without its secret key. */
int tool_client_keys(const char *cmd, const char *server_path,
    const char *client_path, tool_keys *ret);

/* Makes `socket` (a ZeroMQ socket, before it connects) a CURVE client
 * with `keys` (nothing without keys->curve). Returns 0, or
 * BELLOWS_ENOTSUP when this libzmq has no CURVE. */
int tool_client_curve(void *socket, const tool_keys *keys);

/* Creates a ZeroMQ context and a DEALER connected to `endpoint`, a CURVE
 * client with `keys` (NULL or without curve: plain). The connection is
 * made in the background: a daemon that is not up yet is not an error
 * here. Returns 0, BELLOWS_EINVAL for an endpoint ZeroMQ refuses,
 * BELLOWS_ENOTSUP for keys this libzmq cannot use, BELLOWS_ESYS when the
 * context or socket cannot be created, or BELLOWS_ENOMEM. On success
 * *ret_client is the caller's. */
int tool_client_open(const char *endpoint, const tool_keys *keys,
    tool_client **ret_client);

/* Why the last request failed with BELLOWS_ECONFIG or BELLOWS_ETIMEDOUT
 * over CURVE: "bellowsd refused this client's key" or "no answer: wrong
 * server key?"; without keys, when the daemon uses CURVE, that keys are
 * needed; "" when the handshake is not to blame. Valid until the
 * next request or close. */
const char *tool_client_why(const tool_client *client);

/* Closes the socket, terminates the context (pending messages are
 * dropped) and frees the client. NULL-safe; sets *client to NULL. */
void tool_client_close(tool_client **client);

/* Sends `req` and waits up to timeout_ms for one reply, which goes into
 * *ret_reply (the caller's, to com_msg_fini). Returns 0,
 * BELLOWS_ETIMEDOUT when nothing arrived in time, BELLOWS_ECONFIG as
 * soon as a CURVE handshake fails (tool_client_why says how),
 * BELLOWS_EPROTO,
 * BELLOWS_EVERSION or BELLOWS_EMSGSIZE for a reply that does not decode,
 * BELLOWS_EINVAL or BELLOWS_ENOMEM when `req` cannot be encoded, BELLOWS_EIO
 * when ZeroMQ fails. *ret_reply is untouched on failure. */
int tool_client_request(tool_client *client, const com_msg *req,
    uint32_t timeout_ms, com_msg *ret_reply);

/* ---- telemetry ---------------------------------------------------------
 *
 * A subscriber to bellowsd's publish socket: every job's telemetry (the
 * topics are "t:<job>\0"), or, with CURVE keys, the jobs named with
 * tool_telemetry_follow (a secured bellowsd takes the "t:" prefix only
 * from a client that may read every job). It queues at most `hwm`
 * messages while its owner is busy, bellowsd drops the rest for it. Used
 * from one thread; owns its ZeroMQ context.
 */
typedef struct tool_telemetry tool_telemetry;

#define TOOL_TELEMETRY_MAX_JOBS 1024 /* jobs followed by name (CURVE) */
#define TOOL_TELEMETRY_DRAIN    256  /* messages one wait reads at most */

/* Called by tool_telemetry_wait for each telemetry message it decodes;
 * `msg` (type COM_MSG_TELEMETRY) is borrowed for the call. */
typedef void tool_telemetry_fn(void *arg, const com_msg *msg);

/* Creates a ZeroMQ context and a SUB connected to `endpoint`, a CURVE
 * client with `keys` (NULL or without curve: plain, subscribed to every
 * job), that queues at most `hwm` messages. The connection is made in the
 * background. Returns 0, BELLOWS_EINVAL for an endpoint ZeroMQ refuses,
 * BELLOWS_ENOTSUP for keys this libzmq cannot use, BELLOWS_ESYS when the
 * context or socket cannot be created, or BELLOWS_ENOMEM. On success
 * *ret is the caller's (tool_telemetry_close). */
int tool_telemetry_open(const char *endpoint, const tool_keys *keys, int hwm,
    tool_telemetry **ret);

/* Closes the socket, terminates the context (queued messages are dropped)
 * and frees t. NULL-safe; sets *t to NULL. */
void tool_telemetry_close(tool_telemetry **t);

/* With CURVE keys, subscribes to the telemetry of job `job` ("" is a
 * name too) unless it is followed already; without keys every job is
 * heard already and this does nothing. Returns 0, BELLOWS_ELIMIT when
 * TOOL_TELEMETRY_MAX_JOBS jobs are followed, or BELLOWS_ENOMEM (the job
 * stays unheard; a later call may add it). */
int tool_telemetry_follow(tool_telemetry *t, const char *job);

/* Waits up to timeout_ms (-1: no limit) for telemetry (t NULL: none,
 * for a program without a daemon) or for `fd` (-1: none) to be
 * readable. Sets *ret_fd when fd is readable. Reads what is
 * queued (at most TOOL_TELEMETRY_DRAIN messages) and calls fn(arg, msg)
 * (fn may be NULL) for each that decodes as telemetry; others are
 * dropped. Returns 0 (also when a signal interrupted the wait) or
 * BELLOWS_EIO. */
int tool_telemetry_wait(tool_telemetry *t, int fd, int timeout_ms,
    tool_telemetry_fn *fn, void *arg, bool *ret_fd);

#endif /* TOOL_CLIENT_H */
