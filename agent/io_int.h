/* io_int - what the files of the agent's I/O share, see io.h.
 *
 * The I/O of the agent is one module in several files: io.c holds the
 * I/O thread, the only code that touches the agent's sockets; each other
 * io_*.c owns one part of it, which its file header names. They share
 * the agent_io structure, whose fields say which thread may touch them.
 */
#ifndef AGENT_IO_INT_H
#define AGENT_IO_INT_H

#include "io.h"

#include "common/wire.h"
#include "decisions.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <zmq.h>

#define IO_HELLO_RETRY_MS    1000   /* Hello again while not welcomed */
#define IO_SNAPSHOT_AFTER_MS 50     /* waiting at an apply step this long */
#define IO_SNAPSHOT_EVERY_MS 200    /* ... asks for a snapshot this often */
#define IO_SNAPSHOT_GAP_MS   100    /* least interval between requests */
#define IO_LOST_BEATS        3      /* unanswered heartbeats: daemon lost */
#define IO_LOST_MIN_MS       1000   /* but never sooner than this */
#define IO_LINGER_MS         100    /* time Bye gets to leave at close */
#define IO_SNDHWM            1000   /* messages ZeroMQ may hold per peer */
#define IO_RECONNECT_MS      100    /* first reconnect interval */
#define IO_RECONNECT_MAX_MS  2000   /* reconnect back-off ceiling */
#define IO_RECV_BATCH        256    /* messages read per poll, per socket */
#define IO_QUIET_MS          10000  /* a repetitive message, once per this */
#define IO_HEARTBEAT_MIN_MS  10     /* shortest heartbeat period taken */
#define IO_HEARTBEAT_MAX_MS  600000 /* longest heartbeat period taken */
#define IO_MIN_ACK_MINOR     2 /* protocol minor whose daemons acknowledge */

#define NS_PER_MS 1000000ull

/* Repetitive log messages, each printed at most once per IO_QUIET_MS. */
enum io_quiet {
	IO_QUIET_UNREACHABLE,
	IO_QUIET_MALFORMED,
	IO_QUIET_DECISION,
	IO_QUIET_SEND,
	IO_QUIET_HANDSHAKE,
	IO_QUIET_MAX,
};

typedef struct io_report {
	uint8_t *buf;    /* encoded Report, malloc'd */
	size_t len;      /* bytes in buf */
	uint64_t window; /* the window it reports */
} io_report;

/* A ring of reports in ascending windows, grown on demand (io_keep.c). */
typedef struct io_ring {
	io_report *e;  /* cap entries */
	uint32_t cap;  /* entries allocated */
	uint32_t head; /* oldest report */
	uint32_t len;  /* reports held */
} io_ring;

struct agent_io {
	/* Fixed at open. */
	char *control;             /* ROUTER endpoint */
	char *publish;             /* PUB endpoint */
	char *job;                 /* job name */
	char *run_id;              /* launch identity sent in Hello */
	bool resume;               /* Hello asks to continue the recorded
				    * run, until the first Welcome */
	char *topic;               /* "d:<job>" and its NUL */
	size_t topic_len;          /* bytes in topic, NUL included */
	uint32_t rank;             /* this rank */
	uint32_t world;            /* ranks in the job */
	com_layer_info *layers;    /* the layer table Hello carries */
	uint32_t n_layers;         /* entries in layers */
	uint64_t incarnation;      /* random, tells this process apart */
	uint32_t heartbeat_cfg_ms; /* heartbeat period until welcomed */
	bellows_log_fn *log;       /* log sink, may be NULL */
	void *log_arg;             /* passed to log */
	int log_level;             /* highest level passed to log */
	com_limits limits;         /* decoding limits */
	void *ctx;                 /* ZeroMQ context of this agent */
	void *dealer;              /* control socket */
	void *sub;                 /* decision socket */
	void *monitor;             /* PAIR: the DEALER's events; CURVE only */
	bool curve;                /* both sockets are CURVE clients */
	char server_key[COM_CERT_Z85]; /* bellowsd's public key, Z85 */
	uint32_t handshake_ms;         /* handshake deadline after connecting */
	int wake_fd;                   /* eventfd the trainer writes to */
	pthread_t thread;              /* the I/O thread */
	bool thread_started;           /* thread must be joined */
	bool mu_ready;                 /* mu must be destroyed */
	bool cond_ready;               /* cond must be destroyed */

	/* Shared with the training thread, under mu. */
	pthread_mutex_t mu;        /* guards this part */
	pthread_cond_t cond;       /* decisions arrived, or waits are void */
	agent_decisions table;     /* received decisions, due windows */
	io_ring queue;             /* reports waiting to be sent */
	uint32_t q_max;            /* most reports queued (queue_capacity) */
	io_ring kept;              /* reports sent and not yet
				    * acknowledged, ascending windows */
	size_t held_bytes;         /* bytes of the reports in both rings */
	size_t keep_bytes;         /* most bytes held (keep_reports_mb); the
				    * newest report is held whatever its
				    * size */
	uint32_t k_sent;           /* the first k_sent kept reports reached
				    * the current session; the rest are
				    * sent again before the queue */
	uint64_t acked;            /* windows below this are durably closed */
	uint64_t ack_hold;         /* after a rejoin, the window after the
				    * last report sent again or queued:
				    * decisions
				    * acknowledge nothing until acked passes
				    * it (late windows, which no decision
				    * answers, may lie below a decision's
				    * window); 0 = none */
	bool acks;                 /* the daemon acknowledges: keep reports */
	bool closing;              /* the thread must send Bye and exit */
	bool snapshot_asked;       /* the trainer waits: ask for a snapshot */
	bool welcomed;             /* joined the current daemon instance */
	bool begun;                /* the trainer has begun a step */
	uint64_t instance;         /* daemon instance that welcomed us */
	uint32_t apply_lag;        /* from the Welcome */
	uint64_t step;             /* step begun last (start_step before) */
	uint64_t next_step;        /* next step to begin */
	uint64_t windows;          /* windows closed */
	uint64_t welcomes;         /* Welcomes after not being welcomed */
	uint64_t reports_sent;     /* reports handed to the socket */
	uint64_t reports_dropped;  /* reports dropped (queue full, encoding) */
	uint64_t snapshots;        /* snapshot requests sent */
	uint64_t misses;           /* windows given up at apply steps */
	uint64_t undecided;        /* windows reported while welcomed whose
				    * decision had come already: bellowsd
				    * closed them without this report */
	int last_error;            /* last Error code from the daemon */
	char last_error_text[256]; /* and its message */

	/* The I/O thread's own. */
	bool want_hello;              /* send Hello when writable */
	bool hello_off;               /* refused for good: stop joining */
	bool want_snapshot;           /* send a snapshot request when paced */
	uint32_t hb_ms;               /* heartbeat period in use */
	uint64_t next_hello_ms;       /* arm the next Hello retry then */
	uint64_t next_heartbeat_ms;   /* next heartbeat */
	uint64_t last_heard_ms;       /* last valid message from the daemon */
	uint64_t last_snapshot_ms;    /* last snapshot request sent */
	uint64_t quiet[IO_QUIET_MAX]; /* last time each message was logged */
	uint64_t hs_since_ms;         /* connected at, handshake pending;
				       * 0: none pending */
};

/* ---- io.c: the I/O thread ------------------------------------------ */

/* Passes a line to the agent's log callback, if any takes `level`. */
__attribute__((format(printf, 3, 4))) void agent_io_log(agent_io *io, int level,
    const char *fmt, ...);

/* Logs from the I/O thread at most once per IO_QUIET_MS per kind. */
__attribute__((format(printf, 4, 5))) void agent_io_log_quiet(agent_io *io,
    enum io_quiet kind, int level, const char *fmt, ...);

/* Takes io->mu, which guards the fields shared with the trainer. */
void agent_io_lock(agent_io *io);

/* Releases io->mu. */
void agent_io_unlock(agent_io *io);

/* Reads and discards the rest of a multi-part message. */
void agent_io_skip_parts(void *socket, zmq_msg_t *frame);

/* Sets an int option of a ZeroMQ socket; returns zmq_setsockopt's. */
int agent_io_setopt(void *socket, int option, int value);

/* Wakes the I/O thread from its poll (through its eventfd); a wake
 * already pending absorbs this one. Any thread. */
void agent_io_wake(agent_io *io);

/* ---- io_keep.c: reports kept until acknowledged ------------------- */

/* Entry i of the ring, from its oldest (i < ring->len). */
io_report *agent_io_ring_at(io_ring *ring, uint32_t i);

/* Appends *r (the ring takes its buffer, r->buf becomes NULL), growing
 * the ring when full. Returns 0 or BELLOWS_ENOMEM (*r is left as it
 * was). */
int agent_io_ring_push(io_ring *ring, io_report *r);

/* Moves the oldest report out into *ret (the caller owns its buffer).
 * The ring must not be empty. */
void agent_io_ring_pop(io_ring *ring, io_report *ret);

/* Frees every report held and the ring's storage. */
void agent_io_ring_free(io_ring *ring);

/* Makes room for a report of `len` bytes about to be queued, and counts
 * them held: while keep_bytes would be exceeded, lets the oldest kept
 * reports go (they reached bellowsd once), then drops the oldest queued
 * ones (counted in reports_dropped), as it does when queue_capacity
 * reports are queued. The caller holds mu. */
void agent_io_hold(agent_io *io, size_t len);

/* The daemon says windows below `closed` are durably closed: the kept
 * reports of those are let go. The caller holds mu. */
void agent_io_kept_ack(agent_io *io, uint64_t closed);

/* A published decision answering window `window` - 1 acknowledges the
 * windows below `window`, unless the reports sent again after a rejoin
 * are not all acknowledged yet (ack_hold): the daemon may be recording
 * some of them late, below the windows it decides on. The caller holds
 * mu. */
void agent_io_kept_decided(agent_io *io, uint64_t window);

/* Keeps the report *r just sent to the current session (takes its
 * buffer); frees it instead when the daemon does not acknowledge, its
 * window is closed already or there is no memory to keep it.
 * Only called once every kept report was sent again (k_sent == k_len), so
 * the ring stays: sent ones first, then those to send again. The caller
 * holds mu. */
void agent_io_kept_push(agent_io *io, io_report *r);

/* Takes a Welcome's windows_closed (from a daemon of protocol `minor`):
 * a new session (`rejoined`) sends the kept reports at or above it again.
 * Returns how many will be. The caller holds mu. */
uint32_t agent_io_kept_welcome(agent_io *io, uint32_t minor, uint64_t closed,
    bool rejoined);

/* ---- io_curve.c: the CURVE handshake ------------------------------- */

/* A CURVE handshake with bellowsd failed: record why for
 * bellows_agent_stats and log it (at most once per IO_QUIET_MS). */
void agent_io_handshake_failed(agent_io *io, const char *why);

/* Reads the DEALER's monitor events. */
void agent_io_recv_monitor(agent_io *io, uint64_t now);

/* Makes `s` a CURVE client of bellowsd (before it connects). Returns 0
 * or BELLOWS_ENOTSUP when this libzmq has no CURVE. */
int agent_io_curve(agent_io *io, void *s, const com_cert *client);

/* Watches the DEALER's connections and handshakes through io->monitor. */
int agent_io_watch(agent_io *io);

#endif
