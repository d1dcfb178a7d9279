/* server - bellowsd's sockets: the control ROUTER and the publish PUB.
 *
 * The server reads frames from the ROUTER, decodes them with the codec,
 * hands them to the job table and sends the replies back; it publishes
 * what the job table decides. It owns the per-peer drop accounting:
 * anything malformed, oversized, out of order or refused is dropped,
 * counted against the peer that sent it (STATUS shows the counts) and
 * logged at most once per peer per minute. Nothing a peer sends can block
 * the loop: every send is non-blocking and a reply that cannot be queued
 * is dropped.
 *
 * Nor can a peer that does not read make the daemon hold more than a byte
 * budget for it (peer_queue_mb): ZeroMQ queues per connection and counts
 * messages, so the send high-water mark of each socket (publications for
 * a subscriber, replies for a client) is the budget divided by the
 * largest message the limits let through (at least 8 messages, at most
 * 100,000). A subscriber that falls behind loses what does not fit;
 * agents see the gap in the decisions' seq and ask for a snapshot,
 * dashboards show the next telemetry. Requests are not bounded this way
 * (see SERVER_RCVHWM): the loop reads them as they come.
 *
 * With security (docs/security.md) both sockets are CURVE servers, and a
 * ZAP handler (RFC 27) on the loop authenticates every connection to
 * either against the trusted keys: an unknown key is refused during the
 * handshake, a known one gets the certificate's NAME as its User-Id,
 * which each message's metadata carries to the job table. The table is
 * a copy the loop swaps on reload: a key removed refuses new
 * connections; a connection already authenticated keeps its name until
 * it closes (libzmq offers no way to close one connection of a ROUTER),
 * but its client may lose the jobs its name was allowed for.
 *
 * The publish socket is then an XPUB in manual mode: a subscription is
 * applied only when its connection's client may read what it asks for
 * ("d:JOB\0" and "t:JOB\0": that job; any wider prefix: every job).
 * What was applied stays for the connection's life (a reload does not
 * withdraw it).
 */
#ifndef CTL_SERVER_H
#define CTL_SERVER_H

#include "common/wire.h"
#include "policyhost/config.h"
#include "jobs.h"
#include "loop.h"
#include "store.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct ctl_server ctl_server;

/* Binds the ROUTER to `control` and the PUB to `publish` in ZeroMQ
 * context `zctx` (borrowed); with `security` enabled (NULL: none), both
 * as CURVE servers with its server key, and the ZAP handler first on
 * inproc://zeromq.zap.01 of zctx (one daemon per context). Frames up to
 * limits->max_msg_bytes are decoded; longer ones up to twice that are dropped
 * and counted as oversized; beyond that ZeroMQ closes the sender's connection
 * (its ZMQ_MAXMSGSIZE). Each connection's send queue holds at most about
 * queue_mb MiB (at least 8 messages), with messages as large as jobs of
 * max_layers layers make them; both are read here once (a reload does
 * not change them). Returns 0, BELLOWS_EIO if an endpoint cannot be bound
 * (logged with the reason), BELLOWS_ENOTSUP (libzmq without CURVE) or
 * BELLOWS_ENOMEM. */
int ctl_server_open(void *zctx, const char *control, const char *publish,
    const com_limits *limits, uint32_t queue_mb, uint32_t max_layers,
    uint64_t instance, const ctl_security_conf *security,
    ctl_server **ret_server);

/* Replaces the trusted keys with a copy of sec's (a reload's). Nothing to
 * do when the sockets were opened without security, or when sec has none
 * (security is read once: the keys in force stay). Returns 0 or BELLOWS_ENOMEM
 * (the old keys stay). */
int ctl_server_set_clients(ctl_server *server, const ctl_security_conf *sec);

/* True when endpoint `ep` can only be reached from this host: ipc://,
 * inproc://, or tcp:// on 127.0.0.0/8, ::1 or localhost. A wildcard, an
 * interface name, any other address or transport is a network. */
bool ctl_server_endpoint_local(const char *ep);

/* The largest publication (a Decision for max_layers layers or a
 * Telemetry) within `limits`, in bytes: what a send queue's budget is
 * divided by. */
size_t ctl_server_publication_bytes(const com_limits *limits,
    uint32_t max_layers);

/* Messages received, dropped, and publications that failed, since open
 * (metrics). Any of the outputs may be NULL. */
void ctl_server_counts(const ctl_server *server, uint64_t *ret_messages,
    uint64_t *ret_dropped, uint64_t *ret_pub_dropped);

/* Closes both sockets (pending messages are dropped) and frees the
 * server. NULL-safe. */
void ctl_server_close(ctl_server **server);

/* Sets the job table messages are dispatched to (borrowed). */
void ctl_server_set_jobs(ctl_server *server, ctl_jobs *jobs);

/* Sets the history store whose state STATUS reports (borrowed; NULL:
 * none). */
void ctl_server_set_store(ctl_server *server, ctl_store *store);

/* Once the loop has stopped (SIGTERM), reads and handles what clients
 * had already sent, as the loop would: the last reports and Byes of a
 * job that ended just before the stop. Stops when quiet_ms pass without
 * a message, after max_ms in all, or after max_msgs messages, so a flood
 * cannot hold the stop. Connections that are not yet authenticated (ZAP)
 * are not served. Loop thread only; NULL-safe. Returns the messages read,
 * dropped ones included. */
uint32_t ctl_server_drain(ctl_server *server, uint32_t quiet_ms,
    uint32_t max_ms, uint32_t max_msgs);

/* Registers the ROUTER (and the ZAP handler) with the loop. Returns
 * ctl_loop_add_socket's result. */
int ctl_server_attach(ctl_server *server, ctl_loop *loop);

/* ctl_jobs_publish_fn: encodes and publishes a Decision or Telemetry on
 * the PUB socket under the job's topic. Drops (and counts) on failure. */
void ctl_server_publish(void *server, const com_msg *msg);

/* Sends `msg` to the peer with routing id `peer` on the control socket
 * (ctl_jobs_send_fn): never blocks; a message that cannot be queued is
 * dropped and counted against the peer. */
void ctl_server_send(void *server, const uint8_t *peer, size_t peer_len,
    const com_msg *msg);

#endif /* CTL_SERVER_H */
