/* io - the agent's background I/O thread and its hand-off with the trainer.
 *
 * The I/O thread owns the agent's two ZeroMQ sockets (DEALER to bellowsd's
 * control ROUTER, SUB to its PUB) and is the only code of the agent that
 * talks to them: it joins the job (Hello, Welcome), sends the queued
 * reports, heartbeats and snapshot requests, and receives decisions, acks,
 * snapshots and errors. It keeps the last reports it sent until bellowsd
 * says their windows are durably closed, and sends them again when it
 * joins a daemon anew, so a crash of bellowsd loses no window. The training
 * thread never touches ZeroMQ: it hands reports over and takes decisions
 * through a structure guarded by one mutex, and waits on a condition variable
 * (monotonic clock) only at an apply step whose decision has not arrived. It
 * wakes the I/O thread through an eventfd the thread polls beside its sockets.
 *
 * Threading: agent_io_stats() may be called from any thread; every other
 * function from the one training thread.
 */
#ifndef AGENT_IO_H
#define AGENT_IO_H

#include <stdint.h>

#include <bellows/agent.h>

#include <stdbool.h>

#include "common/cert.h"
#include "common/msg.h"

typedef struct agent_io agent_io;

typedef struct agent_io_config {
	const char *control;         /* bellowsd ROUTER endpoint */
	const char *publish;         /* bellowsd PUB endpoint */
	const char *job;             /* job name */
	uint32_t rank;               /* this rank */
	uint32_t world;              /* ranks in the job */
	const bellows_layer *layers; /* layer table sent in Hello */
	uint32_t n_layers;           /* entries in layers */
	uint64_t start_step;         /* first step the trainer runs */
	uint64_t start_window;       /* index of its first window */
	const char *run_id;          /* launch identity, "" = none */
	bool resume;                 /* continue the recorded run at
				      * start_step / start_window */
	uint32_t heartbeat_ms;       /* heartbeat period until welcomed */
	uint32_t queue_capacity;     /* reports queued before dropping */
	size_t keep_bytes;           /* bytes of reports held, queued or
				      * sent and not yet recorded */
	bellows_log_fn *log;         /* log sink, may be NULL */
	void *log_arg;               /* passed to log */
	int log_level;               /* highest level passed to log */
	const com_cert *server;      /* bellowsd's public key; NULL: no
				      * CURVE (then client is NULL too) */
	const com_cert *client;      /* this client's keypair */
	uint32_t handshake_ms;       /* a CURVE handshake not done this long
				      * after connecting is reported */
} agent_io_config;

/* Creates the sockets, connects them (nothing is sent or awaited yet) and
 * starts the I/O thread, which sends Hello at once. With keys both sockets
 * are CURVE clients and the thread watches the DEALER's handshakes: one
 * bellowsd refuses, fails or does not finish within handshake_ms is
 * logged and recorded as last_error BELLOWS_ECONFIG. Everything in *cfg is
 * copied. Returns 0 with *ret_io the caller's (agent_io_close), or
 * BELLOWS_EINVAL for an endpoint ZeroMQ refuses, BELLOWS_ENOMEM, or
 * BELLOWS_ESYS when a socket, eventfd or the thread cannot be created;
 * everything half-built is released then. */
int agent_io_open(const agent_io_config *cfg, agent_io **ret_io);

/* Stops the I/O thread after it has sent Bye (best effort: never waits
 * for the daemon, at most ~100 ms of linger for unsent bytes), frees
 * everything and sets *io to NULL. NULL-safe and idempotent. */
void agent_io_close(agent_io **io);

/* The decision in force. The pointer is stable for the life of *io; the
 * contents change only inside agent_io_step_begin(), so the training
 * thread may read them without locking in between. */
const com_decision *agent_io_in_force(const agent_io *io);

/* Begins step `step`: if a decision the daemon owes this rank is due at or
 * before `step` and has not arrived, waits for it (asking for a snapshot
 * after 50 ms and again every 200 ms) up to `timeout_ms`; windows still
 * unanswered then are given up. Then makes the decision in force at `step`
 * current. *ret_misses receives the number of windows given up. Never
 * fails. */
void agent_io_step_begin(agent_io *io, uint64_t step, uint32_t timeout_ms,
    uint32_t *ret_misses);

/* Queues the report of a finished window for the I/O thread: fills in
 * r->timings.reports_dropped (the agent's running total) and encodes it;
 * r stays the caller's. When queue_capacity reports are queued, or the
 * reports held would exceed keep_bytes, the oldest sent ones are let go
 * and then the oldest queued ones dropped and counted. If the rank is welcomed
 * now, the window's decision becomes due at r->last_step + 1 + apply_lag. Never
 * waits on the network; an encoding failure is logged and counted as a dropped
 * report. */
void agent_io_submit_report(agent_io *io, com_report *r);

/* A finished window whose statistics another rank reports (aggregation
 * inside the job): counts the window and, if the rank is welcomed now,
 * makes its decision due at r->last_step + 1 + apply_lag exactly as
 * agent_io_submit_report does, so that this rank waits for and applies
 * it at the same step as the reporting one. Sends nothing. Never
 * fails. */
void agent_io_skip_report(agent_io *io, const com_report *r);

/* Copies the counters of *io into the matching fields of *ret: connected,
 * step (the next step to begin), window, reports_sent, reports_dropped,
 * decisions, decision_misses, snapshots, reconnects, seq_in_force,
 * last_error and last_error_text. Any thread. */
void agent_io_stats(agent_io *io, bellows_agent_stats *ret);

/* Windows of this rank that got no decision: given up at their apply
 * step (decision_misses), or reported after bellowsd had decided them
 * without this rank (its report then dropped as stale). Any thread. */
uint64_t agent_io_undecided(agent_io *io);

#endif /* AGENT_IO_H */
