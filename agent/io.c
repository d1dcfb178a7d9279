/* io - the agent's I/O thread, see io.h.
 *
 * The thread runs one zmq_poll over the DEALER, the SUB and an eventfd the
 * training thread writes to when it has queued a report, wants a snapshot
 * or closes the agent. Timers (Hello retries, heartbeats, the liveness of
 * the daemon, snapshot pacing) are deadlines on the monotonic clock that
 * bound the poll timeout; nothing sleeps.
 *
 * The DEALER is ZMQ_IMMEDIATE: while bellowsd is unreachable nothing is
 * queued inside ZeroMQ, so a daemon that comes back never receives a burst
 * of stale Hellos and heartbeats. What is waiting to be sent (a Hello, a
 * snapshot request, the reports) is sent when the poll reports the socket
 * writable; the reports themselves wait in the agent's own bounded queue,
 * where the oldest is dropped and counted when it is full.
 *
 * A report handed to the socket is not safe yet: a daemon that dies before
 * committing its window's close loses it. So while the daemon acknowledges
 * (protocol minor 2), the thread keeps the last IO_KEEP reports it sent
 * until the daemon says their windows are durably closed: a published
 * decision for window w acknowledges every window up to w (decisions are
 * published only after their commit), and Welcome and HeartbeatAck carry
 * windows_closed, the lowest window not durably closed. After a Welcome
 * that starts a new session (a new daemon instance, or the same one after
 * the agent lost it) the kept reports at or above windows_closed are sent
 * again, oldest first, before anything queued.
 *
 * With CURVE keys both sockets are CURVE clients, and a monitor socket
 * (a PAIR on an inproc endpoint of the agent's own context) shows the
 * thread the DEALER's connections and handshakes. A handshake bellowsd
 * refuses (its ZAP handler does not know the client's key), one that
 * fails (a wrong server key makes bellowsd drop the connection; a daemon
 * without CURVE fails it) and one that is not done handshake_ms after the
 * connection was made become last_error BELLOWS_ECONFIG with a message
 * saying which, and a log line; ZeroMQ goes on retrying by itself, so a
 * key added on the daemon later is taken without a restart.
 *
 * The mutex guards the decision table, the report queue and the counters.
 * Fields the I/O thread alone writes (welcomed, the instance) are read by
 * it without the lock; everyone else reads them under it.
 */
#include "io.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <zmq.h>

#include <bellows/error.h>

#include "bellows_config.h"
#include "common/clock.h"
#include "common/codec.h"
#include "decisions.h"

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
/* Reports kept after sending until acknowledged. A report is acknowledged
 * by the decision answering its window, which the agent waits for at
 * last_step + 1 + apply_lag: normally one or two are unacknowledged at a
 * time. Eight is as many windows as bellowsd aggregates at once (JOBS_OPEN
 * in controller/jobs.c): it refuses a report further ahead of the lowest
 * window it has not closed, so an older one could never be taken with
 * the newest. Older ones are let go (they were sent, and are lost only if
 * the daemon dies before recording them). */
#define IO_KEEP          8
#define IO_MIN_ACK_MINOR 2 /* protocol minor whose daemons acknowledge */

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
	io_report *queue;          /* ring of reports waiting to be sent */
	uint32_t q_cap;            /* entries in queue */
	uint32_t q_head;           /* oldest report */
	uint32_t q_len;            /* reports queued */
	io_report kept[IO_KEEP];   /* ring of reports sent and not yet
				    * acknowledged, ascending windows */
	uint32_t k_head;           /* oldest kept report */
	uint32_t k_len;            /* reports kept */
	uint32_t k_sent;           /* the first k_sent kept reports reached
				    * the current session; the rest are
				    * sent again before the queue */
	uint64_t acked;            /* windows below this are durably closed */
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

static char io_version[] = BELLOWS_VERSION;

__attribute__((format(printf, 3, 0))) static void
io_vlog(agent_io *io, int level, const char *fmt, va_list ap)
{
	char line[512];

	if (io->log == NULL || level > io->log_level)
		return;
	vsnprintf(line, sizeof(line), fmt, ap);
	io->log(io->log_arg, level, line);
}

__attribute__((format(printf, 3, 4))) static void
io_log(agent_io *io, int level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	io_vlog(io, level, fmt, ap);
	va_end(ap);
}

/* Logs from the I/O thread at most once per IO_QUIET_MS per kind. */
__attribute__((format(printf, 4, 5))) static void
io_log_quiet(agent_io *io, enum io_quiet kind, int level, const char *fmt, ...)
{
	uint64_t now = com_clock_ms();
	va_list ap;

	if (io->quiet[kind] != 0 && now - io->quiet[kind] < IO_QUIET_MS)
		return;
	io->quiet[kind] = now;
	va_start(ap, fmt);
	io_vlog(io, level, fmt, ap);
	va_end(ap);
}

static void
io_lock(agent_io *io)
{
	pthread_mutex_lock(&io->mu);
}

static void
io_unlock(agent_io *io)
{
	pthread_mutex_unlock(&io->mu);
}

static void
io_wake(agent_io *io)
{
	uint64_t one = 1;

	/* Fails only when the counter is saturated: a wake is pending. */
	if (write(io->wake_fd, &one, sizeof(one)) < 0)
		return;
}

static uint64_t
io_random64(void)
{
	uint64_t x = 0;

	if (getrandom(&x, sizeof(x), GRND_NONBLOCK) != (ssize_t)sizeof(x)) {
		int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);

		x = 0;
		if (fd >= 0) {
			if (read(fd, &x, sizeof(x)) != (ssize_t)sizeof(x))
				x = 0;
			close(fd);
		}
	}
	/* 0 reads as "none" on the wire; the fallback only has to differ
	 * between processes. */
	if (x == 0)
		x = (com_clock_ns() ^ ((uint64_t)getpid() << 32)) | 1;
	return x;
}

static uint64_t
io_lost_ms(const agent_io *io)
{
	uint64_t ms = (uint64_t)IO_LOST_BEATS * io->hb_ms;

	return ms < IO_LOST_MIN_MS ? IO_LOST_MIN_MS : ms;
}

/* Hands an encoded message to the DEALER without waiting. Returns 0,
 * BELLOWS_EAGAIN when the socket cannot take it now, or BELLOWS_ESYS. */
static int
io_send_buf(agent_io *io, const uint8_t *buf, size_t len)
{
	if (zmq_send(io->dealer, buf, len, ZMQ_DONTWAIT) >= 0)
		return 0;
	return errno == EAGAIN ? BELLOWS_EAGAIN : BELLOWS_ESYS;
}

/* Encodes *m and sends it as io_send_buf() does. */
static int
io_send(agent_io *io, const com_msg *m)
{
	uint8_t *buf;
	size_t len;
	int rc;

	if ((rc = com_codec_encode(m, &buf, &len)) != 0) {
		io_log_quiet(io, IO_QUIET_SEND, BELLOWS_LOG_ERROR,
		    "cannot encode %s: %s", com_msg_type_name(m->type),
		    bellows_strerror(rc));
		return rc;
	}
	rc = io_send_buf(io, buf, len);
	free(buf);
	return rc;
}

static void
io_send_hello(agent_io *io)
{
	com_msg m;
	com_hello *h = &m.u.hello;
	uint8_t *buf = NULL;
	size_t len = 0;
	int rc;

	/* Everything is borrowed: the message is encoded, never finalised. */
	com_msg_init(&m, COM_MSG_HELLO);
	h->job = io->job;
	h->rank = io->rank;
	h->world = io->world;
	h->n_layers = io->n_layers;
	h->layers = io->layers;
	h->agent_version = io_version;
	h->incarnation = io->incarnation;
	h->run_id = io->run_id;
	/* Only until a daemon took the resume: later Hellos (a reconnect,
	 * a restarted daemon) rejoin the run it continued. */
	h->resume = io->resume && io->welcomes == 0;
	/* The lock keeps the trainer from swapping in_force mid-encoding. */
	io_lock(io);
	h->step = io->next_step;
	h->in_force = io->table.in_force;
	h->last_window = io->windows;
	rc = com_codec_encode(&m, &buf, &len);
	io_unlock(io);
	if (rc == 0)
		rc = io_send_buf(io, buf, len);
	free(buf);
	if (rc == BELLOWS_EAGAIN)
		return;
	/* Sent, or it cannot be: the retry timer tries again either way. */
	io->want_hello = false;
	if (rc == 0)
		io_log(io, BELLOWS_LOG_DEBUG,
		    "hello sent to %s (job %s rank %u)", io->control, io->job,
		    io->rank);
	else
		io_log_quiet(io, IO_QUIET_SEND, BELLOWS_LOG_ERROR,
		    "cannot send hello: %s", bellows_strerror(rc));
}

static void
io_send_heartbeat(agent_io *io)
{
	com_msg m;
	com_heartbeat *hb = &m.u.heartbeat;

	com_msg_init(&m, COM_MSG_HEARTBEAT);
	hb->job = io->job;
	hb->rank = io->rank;
	hb->incarnation = io->incarnation;
	io_lock(io);
	hb->step = io->step;
	hb->seq_in_force = io->table.in_force.seq;
	io_unlock(io);
	/* A heartbeat that cannot leave now is simply skipped. */
	(void)io_send(io, &m);
}

static void
io_send_snapshot_request(agent_io *io, uint64_t now)
{
	com_msg m;
	int rc;

	com_msg_init(&m, COM_MSG_SNAPSHOT_REQUEST);
	m.u.snapshot_request.job = io->job;
	m.u.snapshot_request.rank = io->rank;
	rc = io_send(io, &m);
	if (rc == BELLOWS_EAGAIN)
		return;
	io->want_snapshot = false;
	io->last_snapshot_ms = now;
	if (rc == 0) {
		io_lock(io);
		io->snapshots++;
		io_unlock(io);
		io_log(io, BELLOWS_LOG_DEBUG, "snapshot requested");
	}
}

static void
io_send_bye(agent_io *io)
{
	com_msg m;

	com_msg_init(&m, COM_MSG_BYE);
	m.u.bye.job = io->job;
	m.u.bye.rank = io->rank;
	(void)io_send(io, &m);
}

/* Lets the oldest kept report go. The caller holds mu. */
static void
io_kept_pop(agent_io *io)
{
	io_report *k = &io->kept[io->k_head];

	free(k->buf);
	k->buf = NULL;
	io->k_head = (io->k_head + 1) % IO_KEEP;
	io->k_len--;
	/* The oldest is the first sent, when any was. */
	if (io->k_sent > 0)
		io->k_sent--;
}

/* The daemon says windows below `closed` are durably closed: the kept
 * reports of those are let go. The caller holds mu. */
static void
io_kept_ack(agent_io *io, uint64_t closed)
{
	if (closed > io->acked)
		io->acked = closed;
	while (io->k_len > 0 && io->kept[io->k_head].window < io->acked)
		io_kept_pop(io);
}

/* Keeps the report *r just sent to the current session (takes its
 * buffer), letting the oldest go when IO_KEEP are kept; frees it instead
 * when the daemon does not acknowledge or its window is closed already.
 * Only called once every kept report was sent again (k_sent == k_len), so
 * the ring stays: sent ones first, then those to send again. The caller
 * holds mu. */
static void
io_kept_push(agent_io *io, io_report *r)
{
	if (!io->acks || r->window < io->acked) {
		free(r->buf);
		r->buf = NULL;
		return;
	}
	if (io->k_len == IO_KEEP)
		io_kept_pop(io);
	io->kept[(io->k_head + io->k_len) % IO_KEEP] = *r;
	io->k_len++;
	io->k_sent++;
	r->buf = NULL;
}

/* Hands reports to the socket until it pushes back: the kept ones a new
 * session must see again first, then the queue. */
static void
io_send_reports(agent_io *io)
{
	int err = 0;

	io_lock(io);
	while (io->welcomed) {
		bool again = io->k_sent < io->k_len;
		io_report *r;
		int rc;

		if (again)
			r = &io->kept[(io->k_head + io->k_sent) % IO_KEEP];
		else if (io->q_len > 0)
			r = &io->queue[io->q_head];
		else
			break;
		rc = io_send_buf(io, r->buf, r->len);
		if (rc == BELLOWS_EAGAIN)
			break;
		if (rc != 0)
			err = errno;
		if (again) {
			/* Kept either way, for a later session. */
			io->k_sent++;
			continue;
		}
		if (rc == 0) {
			io->reports_sent++;
			io_kept_push(io, r);
		} else {
			io->reports_dropped++;
			free(r->buf);
			r->buf = NULL;
		}
		io->q_head = (io->q_head + 1) % io->q_cap;
		io->q_len--;
	}
	io_unlock(io);
	if (err != 0)
		io_log_quiet(io, IO_QUIET_SEND, BELLOWS_LOG_ERROR,
		    "dropped a report the socket refused: %s",
		    zmq_strerror(err));
}

static bool
io_writable(agent_io *io)
{
	int events = 0;
	size_t size = sizeof(events);

	if (zmq_getsockopt(io->dealer, ZMQ_EVENTS, &events, &size) != 0)
		return false;
	return (events & ZMQ_POLLOUT) != 0;
}

/* True when something waits for the DEALER to become writable. Must
 * match io_flush() exactly, or the poll would spin. */
static bool
io_pending(agent_io *io, uint64_t now)
{
	bool reports;

	if (io->want_hello && !io->hello_off)
		return true;
	if (!io->welcomed)
		return false;
	if (io->want_snapshot &&
	    now >= io->last_snapshot_ms + IO_SNAPSHOT_GAP_MS)
		return true;
	io_lock(io);
	reports = io->q_len > 0 || io->k_sent < io->k_len;
	io_unlock(io);
	return reports;
}

static void
io_flush(agent_io *io, uint64_t now)
{
	if (!io_pending(io, now) || !io_writable(io))
		return;
	if (io->want_hello && !io->hello_off)
		io_send_hello(io);
	if (!io->welcomed)
		return;
	if (io->want_snapshot &&
	    now >= io->last_snapshot_ms + IO_SNAPSHOT_GAP_MS)
		io_send_snapshot_request(io, now);
	io_send_reports(io);
}

/* The daemon that welcomed us is gone, restarted or forgot us: stop
 * sending reports, stop waiting for the decisions it owed, join again. */
__attribute__((format(printf, 3, 4))) static void
io_lose(agent_io *io, uint64_t now, const char *fmt, ...)
{
	va_list ap;
	uint32_t forgotten;

	io_lock(io);
	io->welcomed = false;
	forgotten = agent_decisions_forget_due(&io->table);
	pthread_cond_broadcast(&io->cond);
	io_unlock(io);
	va_start(ap, fmt);
	io_vlog(io, BELLOWS_LOG_WARN, fmt, ap);
	va_end(ap);
	if (forgotten > 0)
		io_log(io, BELLOWS_LOG_WARN,
		    "no longer waiting for the decisions of %u window(s)",
		    forgotten);
	io->want_snapshot = false;
	if (!io->hello_off) {
		io->want_hello = true;
		io->next_hello_ms = now + IO_HELLO_RETRY_MS;
	}
}

/* Reads and discards the rest of a multi-part message. */
static void
io_skip_parts(void *socket, zmq_msg_t *frame)
{
	while (zmq_msg_more(frame)) {
		zmq_msg_close(frame);
		zmq_msg_init(frame);
		if (zmq_msg_recv(frame, socket, ZMQ_DONTWAIT) < 0)
			break;
	}
}

/* A CURVE handshake with bellowsd failed: record why for
 * bellows_agent_stats and log it (at most once per IO_QUIET_MS). */
static void
io_handshake_failed(agent_io *io, const char *why)
{
	char text[sizeof(io->last_error_text)];

	io->hs_since_ms = 0;
	snprintf(text, sizeof(text), "%s (bellowsd at %s)", why, io->control);
	io_lock(io);
	io->last_error = BELLOWS_ECONFIG;
	memcpy(io->last_error_text, text, sizeof(text));
	io_unlock(io);
	io_log_quiet(io, IO_QUIET_HANDSHAKE, BELLOWS_LOG_ERROR,
	    "%s; not joined, training goes on with the decision in force, "
	    "retrying",
	    text);
}

/* Reads the DEALER's monitor events. */
static void
io_recv_monitor(agent_io *io, uint64_t now)
{
	for (int i = 0; i < IO_RECV_BATCH; i++) {
		zmq_msg_t frame;
		uint16_t event;
		uint32_t value;
		bool ok;

		zmq_msg_init(&frame);
		if (zmq_msg_recv(&frame, io->monitor, ZMQ_DONTWAIT) < 0) {
			zmq_msg_close(&frame);
			return;
		}
		/* First frame: the event (16 bits) and its value (32). */
		ok = zmq_msg_size(&frame) == 6;
		if (ok) {
			memcpy(&event, zmq_msg_data(&frame), sizeof(event));
			memcpy(&value, (uint8_t *)zmq_msg_data(&frame) + 2,
			    sizeof(value));
		}
		io_skip_parts(io->monitor, &frame);
		zmq_msg_close(&frame);
		if (!ok)
			continue;
		switch (event) {
		case ZMQ_EVENT_CONNECTED:
			io->hs_since_ms = now > 0 ? now : 1;
			break;
		case ZMQ_EVENT_HANDSHAKE_SUCCEEDED:
			if (io->hs_since_ms != 0)
				io_log(io, BELLOWS_LOG_DEBUG,
				    "CURVE handshake with bellowsd at %s done",
				    io->control);
			io->hs_since_ms = 0;
			break;
		case ZMQ_EVENT_HANDSHAKE_FAILED_AUTH:
			io_handshake_failed(io,
			    "bellowsd refused this client's key");
			break;
		case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL:
			io_handshake_failed(io,
			    value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH
				? "no answer: wrong server key? (bellowsd "
				  "does not use CURVE)"
				: "no answer: wrong server key?");
			break;
		case ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL:
		case ZMQ_EVENT_DISCONNECTED:
			/* Dropped before the handshake was done: bellowsd
			 * could not read our Hello, sealed with the key we
			 * believe is its own. */
			if (io->hs_since_ms != 0)
				io_handshake_failed(io,
				    "no answer: wrong server key?");
			break;
		default:
			break;
		}
	}
}

static void
io_timers(agent_io *io, uint64_t now)
{
	if (io->hs_since_ms != 0 && now - io->hs_since_ms >= io->handshake_ms)
		io_handshake_failed(io, "no answer: wrong server key?");
	if (io->welcomed) {
		if (now - io->last_heard_ms >= io_lost_ms(io)) {
			io_lose(io, now,
			    "bellowsd at %s silent for %llu ms, joining again",
			    io->control,
			    (unsigned long long)(now - io->last_heard_ms));
		} else if (now >= io->next_heartbeat_ms) {
			io_send_heartbeat(io);
			io->next_heartbeat_ms = now + io->hb_ms;
		}
	}
	if (!io->welcomed && !io->hello_off && now >= io->next_hello_ms) {
		io_log_quiet(io, IO_QUIET_UNREACHABLE, BELLOWS_LOG_WARN,
		    "not joined: no welcome from bellowsd at %s yet, "
		    "training goes on, retrying",
		    io->control);
		io->want_hello = true;
		io->next_hello_ms = now + IO_HELLO_RETRY_MS;
	}
}

static int
io_timeout(const agent_io *io, uint64_t now)
{
	uint64_t next = UINT64_MAX;
	uint64_t snap = io->last_snapshot_ms + IO_SNAPSHOT_GAP_MS;

	if (io->welcomed) {
		uint64_t lost = io->last_heard_ms + io_lost_ms(io);

		next = io->next_heartbeat_ms < lost ? io->next_heartbeat_ms
						    : lost;
		/* A request already due waits for POLLOUT, not a timer. */
		if (io->want_snapshot && snap > now && snap < next)
			next = snap;
	} else if (!io->hello_off) {
		next = io->next_hello_ms;
	}
	if (io->hs_since_ms != 0 && io->hs_since_ms + io->handshake_ms < next)
		next = io->hs_since_ms + io->handshake_ms;
	if (next == UINT64_MAX)
		return -1;
	if (next <= now)
		return 0;
	return next - now > 60000 ? 60000 : (int)(next - now);
}

static bool
io_job_matches(const agent_io *io, const char *job)
{
	return job == NULL || job[0] == '\0' || strcmp(job, io->job) == 0;
}

/* Takes a Welcome's windows_closed (from a daemon of protocol `minor`):
 * a new session (`rejoined`) sends the kept reports at or above it again.
 * Returns how many will be. The caller holds mu. */
static uint32_t
io_kept_welcome(agent_io *io, uint32_t minor, uint64_t closed, bool rejoined)
{
	io->acks = minor >= IO_MIN_ACK_MINOR;
	if (!io->acks) {
		/* An older daemon says nothing of what it recorded. */
		while (io->k_len > 0)
			io_kept_pop(io);
		io->acked = 0;
		return 0;
	}
	if (!rejoined) {
		io_kept_ack(io, closed);
		return 0;
	}
	/* A new instance may know less than the old one told us: its word
	 * is the one that counts now. */
	io->acked = closed;
	io_kept_ack(io, closed);
	io->k_sent = 0;
	return io->k_len;
}

static void
io_on_welcome(agent_io *io, com_welcome *w, uint32_t minor, uint64_t now)
{
	bool gap;
	bool rejoined;
	uint32_t added;
	uint32_t resend;
	uint64_t first = 0;

	if (!io_job_matches(io, w->job) || w->rank != io->rank) {
		io_log_quiet(io, IO_QUIET_MALFORMED, BELLOWS_LOG_WARN,
		    "ignored a welcome for job %s rank %u",
		    w->job ? w->job : "", w->rank);
		return;
	}
	io_lock(io);
	rejoined = !io->welcomed || io->instance != w->instance;
	if (!io->welcomed)
		io->welcomes++;
	io->welcomed = true;
	io->instance = w->instance;
	io->apply_lag = w->apply_lag;
	added = agent_decisions_add_set(&io->table, w->decisions,
	    w->n_decisions);
	gap = agent_decisions_gap(&io->table);
	resend = io_kept_welcome(io, minor, w->windows_closed, rejoined);
	if (resend > 0)
		first = io->kept[io->k_head].window;
	pthread_cond_broadcast(&io->cond);
	io_unlock(io);

	/* The period comes off the wire: keep it within sane bounds. */
	io->hb_ms = w->heartbeat_ms > 0 ? w->heartbeat_ms
					: io->heartbeat_cfg_ms;
	if (io->hb_ms < IO_HEARTBEAT_MIN_MS)
		io->hb_ms = IO_HEARTBEAT_MIN_MS;
	if (io->hb_ms > IO_HEARTBEAT_MAX_MS)
		io->hb_ms = IO_HEARTBEAT_MAX_MS;
	io->next_heartbeat_ms = now + io->hb_ms;
	io->want_hello = false;
	io->want_snapshot = gap;
	if (rejoined)
		io_log(io, BELLOWS_LOG_INFO,
		    "joined job %s as rank %u of %u (bellowsd instance "
		    "%016llx, apply lag %u, %u new decision(s))",
		    io->job, io->rank, io->world,
		    (unsigned long long)w->instance, w->apply_lag, added);
	if (resend > 0)
		io_log(io, BELLOWS_LOG_INFO,
		    "sending again %u report(s) from window %llu on, not yet "
		    "recorded by bellowsd",
		    resend, (unsigned long long)first);
}

static void
io_on_heartbeat_ack(agent_io *io, const com_heartbeat_ack *ack, uint64_t now)
{
	bool behind;

	if (!io->welcomed)
		return;
	if (ack->instance != io->instance) {
		io_lose(io, now,
		    "bellowsd restarted (instance %016llx, was %016llx), "
		    "joining again",
		    (unsigned long long)ack->instance,
		    (unsigned long long)io->instance);
		return;
	}
	io_lock(io);
	behind = ack->last_seq > io->table.last_seq;
	if (io->acks)
		io_kept_ack(io, ack->windows_closed);
	io_unlock(io);
	if (behind)
		io->want_snapshot = true;
}

static void
io_on_snapshot(agent_io *io, com_snapshot *s)
{
	bool gap;

	if (!io_job_matches(io, s->job))
		return;
	io_lock(io);
	agent_decisions_add_set(&io->table, s->decisions, s->n_decisions);
	gap = agent_decisions_gap(&io->table);
	pthread_cond_broadcast(&io->cond);
	io_unlock(io);
	if (gap && io->welcomed)
		io->want_snapshot = true;
}

static void
io_on_error(agent_io *io, int code, const char *text, uint64_t now)
{
	if (text == NULL || text[0] == '\0')
		text = bellows_strerror(code);
	io_lock(io);
	io->last_error = code;
	snprintf(io->last_error_text, sizeof(io->last_error_text), "%s", text);
	io_unlock(io);

	switch (code) {
	case BELLOWS_ENOTJOINED:
		/* Not welcomed: a Hello is on its way or its timer runs, and
		 * answering every refusal at once could ping-pong. */
		if (io->welcomed)
			io_lose(io, now,
			    "bellowsd does not know this rank (%s), "
			    "joining again",
			    text);
		break;
	case BELLOWS_EBUSY:
		io_log(io, BELLOWS_LOG_WARN,
		    "bellowsd refused rank %u of job %s: %s; retrying",
		    io->rank, io->job, text);
		break;
	case BELLOWS_EVERSION:
	case BELLOWS_EMISMATCH:
		io_log(io, BELLOWS_LOG_ERROR,
		    "bellowsd refused rank %u of job %s: %s; not joining, "
		    "training goes on with the decision in force",
		    io->rank, io->job, text);
		io->hello_off = true;
		io->want_hello = false;
		if (io->welcomed)
			io_lose(io, now, "left job %s", io->job);
		break;
	default:
		io_log(io, BELLOWS_LOG_WARN, "bellowsd error %d: %s", code,
		    text);
		break;
	}
}

static void
io_on_control(agent_io *io, com_msg *m, uint64_t now)
{
	switch (m->type) {
	case COM_MSG_WELCOME:
		io_on_welcome(io, &m->u.welcome, m->minor, now);
		break;
	case COM_MSG_HEARTBEAT_ACK:
		io_on_heartbeat_ack(io, &m->u.heartbeat_ack, now);
		break;
	case COM_MSG_SNAPSHOT:
		io_on_snapshot(io, &m->u.snapshot);
		break;
	case COM_MSG_ERROR:
		io_on_error(io, m->u.error.code, m->u.error.message, now);
		break;
	default:
		io_log_quiet(io, IO_QUIET_MALFORMED, BELLOWS_LOG_WARN,
		    "ignored an unexpected %s from bellowsd",
		    com_msg_type_name(m->type));
		break;
	}
}

static void
io_recv_control(agent_io *io)
{
	for (int i = 0; i < IO_RECV_BATCH; i++) {
		zmq_msg_t frame;
		com_msg m;
		uint64_t now;
		int rc;

		zmq_msg_init(&frame);
		if (zmq_msg_recv(&frame, io->dealer, ZMQ_DONTWAIT) < 0) {
			zmq_msg_close(&frame);
			return;
		}
		if (zmq_msg_more(&frame)) {
			io_skip_parts(io->dealer, &frame);
			zmq_msg_close(&frame);
			io_log_quiet(io, IO_QUIET_MALFORMED, BELLOWS_LOG_WARN,
			    "dropped a multi-part message from bellowsd");
			continue;
		}
		rc = com_codec_decode(zmq_msg_data(&frame),
		    zmq_msg_size(&frame), &io->limits, &m);
		zmq_msg_close(&frame);
		now = com_clock_ms();
		if (rc == BELLOWS_EVERSION && m.type == COM_MSG_ERROR) {
			char text[128];

			/* Its body is unreadable to us; say what we know. */
			snprintf(text, sizeof(text),
			    "bellowsd speaks protocol %u.%u, this agent %u.%u",
			    m.major, m.minor, BELLOWS_PROTO_MAJOR,
			    BELLOWS_PROTO_MINOR);
			com_msg_fini(&m);
			io_on_error(io, BELLOWS_EVERSION, text, now);
			continue;
		}
		if (rc != 0) {
			com_msg_fini(&m);
			io_log_quiet(io, IO_QUIET_MALFORMED, BELLOWS_LOG_WARN,
			    "dropped a message from bellowsd: %s",
			    bellows_strerror(rc));
			continue;
		}
		io->last_heard_ms = now;
		io_on_control(io, &m, now);
		com_msg_fini(&m);
	}
}

static void
io_on_decision(agent_io *io, com_decision *d)
{
	uint64_t seq = d->seq;
	uint64_t window = d->window; /* d is zeroed once added */
	bool gap;
	int rc;

	if (!io_job_matches(io, d->job)) {
		rc = BELLOWS_EPROTO;
	} else {
		io_lock(io);
		rc = agent_decisions_add(&io->table, d);
		gap = agent_decisions_gap(&io->table);
		/* Published only once committed, with the window it closed:
		 * an acknowledgement of that window and every earlier one. */
		if (rc >= 0 && io->acks)
			io_kept_ack(io, window);
		if (rc >= 0)
			pthread_cond_broadcast(&io->cond);
		io_unlock(io);
		if (rc >= 0 && gap && io->welcomed && !io->want_snapshot) {
			io_log(io, BELLOWS_LOG_INFO,
			    "decision seq %llu arrived out of sequence, "
			    "asking for a snapshot",
			    (unsigned long long)seq);
			io->want_snapshot = true;
		}
	}
	if (rc < 0)
		io_log_quiet(io, IO_QUIET_DECISION, BELLOWS_LOG_WARN,
		    "ignored decision seq %llu: %s", (unsigned long long)seq,
		    bellows_strerror(rc));
}

static void
io_recv_publish(agent_io *io)
{
	for (int i = 0; i < IO_RECV_BATCH; i++) {
		zmq_msg_t topic;
		zmq_msg_t body;
		com_msg m;
		int rc;
		bool ok;

		zmq_msg_init(&topic);
		if (zmq_msg_recv(&topic, io->sub, ZMQ_DONTWAIT) < 0) {
			zmq_msg_close(&topic);
			return;
		}
		ok = zmq_msg_more(&topic) &&
		    zmq_msg_size(&topic) == io->topic_len &&
		    memcmp(zmq_msg_data(&topic), io->topic, io->topic_len) == 0;
		zmq_msg_init(&body);
		if (zmq_msg_more(&topic) &&
		    zmq_msg_recv(&body, io->sub, ZMQ_DONTWAIT) >= 0 &&
		    zmq_msg_more(&body)) {
			io_skip_parts(io->sub, &body);
			ok = false;
		}
		zmq_msg_close(&topic);
		if (!ok) {
			zmq_msg_close(&body);
			io_log_quiet(io, IO_QUIET_MALFORMED, BELLOWS_LOG_WARN,
			    "dropped a malformed publication");
			continue;
		}
		rc = com_codec_decode(zmq_msg_data(&body), zmq_msg_size(&body),
		    &io->limits, &m);
		zmq_msg_close(&body);
		if (rc == 0 && m.type == COM_MSG_DECISION)
			io_on_decision(io, &m.u.decision);
		else
			io_log_quiet(io, IO_QUIET_MALFORMED, BELLOWS_LOG_WARN,
			    "dropped a publication: %s",
			    rc != 0 ? bellows_strerror(rc) : "not a decision");
		com_msg_fini(&m);
	}
}

static void
io_drain_wake(agent_io *io)
{
	uint64_t count;

	if (read(io->wake_fd, &count, sizeof(count)) < 0)
		return;
}

/* Takes what the trainer asked for; true when the thread must exit. */
static bool
io_sync(agent_io *io)
{
	bool closing;

	io_lock(io);
	closing = io->closing;
	if (io->snapshot_asked) {
		io->snapshot_asked = false;
		if (io->welcomed)
			io->want_snapshot = true;
	}
	io_unlock(io);
	return closing;
}

static void *
io_main(void *arg)
{
	agent_io *io = arg;
	uint64_t now = com_clock_ms();

	io->want_hello = true;
	io->next_hello_ms = now + IO_HELLO_RETRY_MS;
	io->last_heard_ms = now;
	while (!io_sync(io)) {
		zmq_pollitem_t items[4];
		int n_items = io->monitor != NULL ? 4 : 3;
		int rc;

		now = com_clock_ms();
		io_timers(io, now);
		io_flush(io, now);
		memset(items, 0, sizeof(items));
		items[0].socket = io->dealer;
		items[0].events = ZMQ_POLLIN;
		if (io_pending(io, now))
			items[0].events |= ZMQ_POLLOUT;
		items[1].socket = io->sub;
		items[1].events = ZMQ_POLLIN;
		items[2].fd = io->wake_fd;
		items[2].events = ZMQ_POLLIN;
		items[3].socket = io->monitor;
		items[3].events = ZMQ_POLLIN;
		rc = zmq_poll(items, n_items, io_timeout(io, now));
		if (rc < 0) {
			if (errno == EINTR)
				continue;
			io_log(io, BELLOWS_LOG_ERROR,
			    "I/O thread stops: poll failed: %s",
			    zmq_strerror(errno));
			break;
		}
		if (items[2].revents & ZMQ_POLLIN)
			io_drain_wake(io);
		if (items[0].revents & ZMQ_POLLIN)
			io_recv_control(io);
		if (items[1].revents & ZMQ_POLLIN)
			io_recv_publish(io);
		if (n_items > 3 && (items[3].revents & ZMQ_POLLIN))
			io_recv_monitor(io, com_clock_ms());
	}
	/* The last window's report is usually still queued when the trainer
	 * closes: hand it over before saying goodbye. */
	io_send_reports(io);
	io_send_bye(io);
	return NULL;
}

static int
io_setopt(void *socket, int option, int value)
{
	return zmq_setsockopt(socket, option, &value, sizeof(value));
}

/* Creates a socket with the options both of ours share. */
static void *
io_socket(agent_io *io, int type)
{
	void *s = zmq_socket(io->ctx, type);
	int64_t max = (int64_t)io->limits.max_msg_bytes;

	if (s == NULL)
		return NULL;
	if (io_setopt(s, ZMQ_LINGER, type == ZMQ_DEALER ? IO_LINGER_MS : 0) ||
	    zmq_setsockopt(s, ZMQ_MAXMSGSIZE, &max, sizeof(max)) ||
	    io_setopt(s, ZMQ_SNDHWM, IO_SNDHWM) ||
	    io_setopt(s, ZMQ_RECONNECT_IVL, IO_RECONNECT_MS) ||
	    io_setopt(s, ZMQ_RECONNECT_IVL_MAX, IO_RECONNECT_MAX_MS) ||
	    (type == ZMQ_DEALER && io_setopt(s, ZMQ_IMMEDIATE, 1)) ||
	    (type == ZMQ_SUB &&
		zmq_setsockopt(s, ZMQ_SUBSCRIBE, io->topic, io->topic_len))) {
		zmq_close(s);
		return NULL;
	}
	return s;
}

/* Makes `s` a CURVE client of bellowsd (before it connects). Returns 0
 * or BELLOWS_ENOTSUP when this libzmq has no CURVE. */
static int
io_curve(agent_io *io, void *s, const com_cert *client)
{
	if (zmq_setsockopt(s, ZMQ_CURVE_SERVERKEY, io->server_key, 40) != 0 ||
	    zmq_setsockopt(s, ZMQ_CURVE_PUBLICKEY, client->public_key, 40) !=
		0 ||
	    zmq_setsockopt(s, ZMQ_CURVE_SECRETKEY, client->secret_key, 40) !=
		0) {
		io_log(io, BELLOWS_LOG_ERROR,
		    "cannot make the sockets CURVE clients: %s (libzmq "
		    "without CURVE?)",
		    zmq_strerror(errno));
		return BELLOWS_ENOTSUP;
	}
	return 0;
}

/* Watches the DEALER's connections and handshakes through io->monitor. */
static int
io_watch(agent_io *io)
{
	char endpoint[64];
	int events = ZMQ_EVENT_CONNECTED | ZMQ_EVENT_DISCONNECTED |
	    ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH |
	    ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
	    ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL;

	snprintf(endpoint, sizeof(endpoint), "inproc://bellows-agent-%p",
	    (void *)io);
	if (zmq_socket_monitor(io->dealer, endpoint, events) != 0 ||
	    (io->monitor = zmq_socket(io->ctx, ZMQ_PAIR)) == NULL ||
	    io_setopt(io->monitor, ZMQ_LINGER, 0) != 0 ||
	    zmq_connect(io->monitor, endpoint) != 0) {
		io_log(io, BELLOWS_LOG_ERROR,
		    "cannot watch the control socket: %s", zmq_strerror(errno));
		return BELLOWS_ESYS;
	}
	return 0;
}

static int
io_connect(agent_io *io, void *socket, const char *endpoint, const char *what)
{
	int err;

	if (zmq_connect(socket, endpoint) == 0)
		return 0;
	err = errno;
	io_log(io, BELLOWS_LOG_ERROR, "cannot connect the %s socket to %s: %s",
	    what, endpoint, zmq_strerror(err));
	return err == EMFILE || err == ENOMEM || err == ETERM ? BELLOWS_ESYS
							      : BELLOWS_EINVAL;
}

static int
io_copy_layers(agent_io *io, const bellows_layer *layers, uint32_t n)
{
	if ((io->layers = calloc(n, sizeof(*io->layers))) == NULL)
		return BELLOWS_ENOMEM;
	io->n_layers = n;
	for (uint32_t i = 0; i < n; i++) {
		com_layer_info *l = &io->layers[i];

		if ((l->name = strdup(layers[i].name)) == NULL)
			return BELLOWS_ENOMEM;
		l->numel = layers[i].numel;
		l->ndim = layers[i].ndim;
		for (uint32_t d = 0; d < l->ndim && d < COM_MAX_NDIM; d++)
			l->shape[d] = layers[i].shape[d];
	}
	return 0;
}

int
agent_io_open(const agent_io_config *cfg, agent_io **ret_io)
{
	agent_io *io;
	pthread_condattr_t attr;
	size_t job_len;
	int rc = BELLOWS_ENOMEM;

	if ((io = calloc(1, sizeof(*io))) == NULL)
		return BELLOWS_ENOMEM;
	io->wake_fd = -1;
	io->rank = cfg->rank;
	io->world = cfg->world;
	io->heartbeat_cfg_ms = cfg->heartbeat_ms > 0 ? cfg->heartbeat_ms : 1000;
	io->hb_ms = io->heartbeat_cfg_ms;
	io->log = cfg->log;
	io->log_arg = cfg->log_arg;
	io->log_level = cfg->log_level;
	io->step = cfg->start_step;
	io->next_step = cfg->start_step;
	io->windows = cfg->start_window;
	io->resume = cfg->resume;
	io->incarnation = io_random64();
	com_limits_default(&io->limits);

	job_len = strlen(cfg->job);
	io->topic_len = job_len + 3;
	if ((io->control = strdup(cfg->control)) == NULL ||
	    (io->publish = strdup(cfg->publish)) == NULL ||
	    (io->job = strdup(cfg->job)) == NULL ||
	    (io->run_id = strdup(cfg->run_id != NULL ? cfg->run_id : "")) ==
		NULL ||
	    (io->topic = malloc(io->topic_len)) == NULL)
		goto fail;
	memcpy(io->topic, "d:", 2);
	memcpy(io->topic + 2, cfg->job, job_len + 1);
	if ((rc = io_copy_layers(io, cfg->layers, cfg->n_layers)) != 0)
		goto fail;
	io->q_cap = cfg->queue_capacity > 0 ? cfg->queue_capacity : 1;
	rc = BELLOWS_ENOMEM;
	if ((io->queue = calloc(io->q_cap, sizeof(*io->queue))) == NULL)
		goto fail;
	if ((rc = agent_decisions_init(&io->table, cfg->job, cfg->n_layers)) !=
	    0)
		goto fail;

	rc = BELLOWS_ESYS;
	if (pthread_mutex_init(&io->mu, NULL) != 0)
		goto fail;
	io->mu_ready = true;
	if (pthread_condattr_init(&attr) != 0)
		goto fail;
	if (pthread_condattr_setclock(&attr, CLOCK_MONOTONIC) != 0 ||
	    pthread_cond_init(&io->cond, &attr) != 0) {
		pthread_condattr_destroy(&attr);
		goto fail;
	}
	pthread_condattr_destroy(&attr);
	io->cond_ready = true;

	if ((io->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0 ||
	    (io->ctx = zmq_ctx_new()) == NULL ||
	    (io->dealer = io_socket(io, ZMQ_DEALER)) == NULL ||
	    (io->sub = io_socket(io, ZMQ_SUB)) == NULL) {
		io_log(io, BELLOWS_LOG_ERROR, "cannot create sockets: %s",
		    zmq_strerror(errno));
		goto fail;
	}
	if (cfg->server != NULL && cfg->client != NULL) {
		io->curve = true;
		io->handshake_ms = cfg->handshake_ms > 0 ? cfg->handshake_ms
							 : 1;
		memcpy(io->server_key, cfg->server->public_key,
		    sizeof(io->server_key));
		if ((rc = io_curve(io, io->dealer, cfg->client)) != 0 ||
		    (rc = io_curve(io, io->sub, cfg->client)) != 0 ||
		    (rc = io_watch(io)) != 0)
			goto fail;
	}
	if ((rc = io_connect(io, io->dealer, io->control, "control")) != 0 ||
	    (rc = io_connect(io, io->sub, io->publish, "publish")) != 0)
		goto fail;
	rc = BELLOWS_ESYS;
	if (pthread_create(&io->thread, NULL, io_main, io) != 0) {
		io_log(io, BELLOWS_LOG_ERROR, "cannot start the I/O thread");
		goto fail;
	}
	io->thread_started = true;
	*ret_io = io;
	return 0;
fail:
	agent_io_close(&io);
	return rc;
}

void
agent_io_close(agent_io **iop)
{
	agent_io *io;

	if (iop == NULL || (io = *iop) == NULL)
		return;
	*iop = NULL;
	if (io->thread_started) {
		io_lock(io);
		io->closing = true;
		io_unlock(io);
		io_wake(io);
		pthread_join(io->thread, NULL);
	}
	if (io->dealer != NULL)
		zmq_close(io->dealer);
	if (io->sub != NULL)
		zmq_close(io->sub);
	if (io->monitor != NULL)
		zmq_close(io->monitor);
	if (io->ctx != NULL)
		while (zmq_ctx_term(io->ctx) != 0 && errno == EINTR)
			;
	if (io->wake_fd >= 0)
		close(io->wake_fd);
	if (io->queue != NULL)
		for (uint32_t i = 0; i < io->q_cap; i++)
			free(io->queue[i].buf);
	for (uint32_t i = 0; i < IO_KEEP; i++)
		free(io->kept[i].buf);
	free(io->queue);
	agent_decisions_fini(&io->table);
	if (io->cond_ready)
		pthread_cond_destroy(&io->cond);
	if (io->mu_ready)
		pthread_mutex_destroy(&io->mu);
	if (io->layers != NULL)
		for (uint32_t i = 0; i < io->n_layers; i++)
			free(io->layers[i].name);
	free(io->layers);
	free(io->topic);
	free(io->job);
	free(io->run_id);
	free(io->publish);
	free(io->control);
	free(io);
}

const com_decision *
agent_io_in_force(const agent_io *io)
{
	return &io->table.in_force;
}

static struct timespec
io_timespec(uint64_t ns)
{
	struct timespec ts;

	ts.tv_sec = (time_t)(ns / 1000000000ull);
	ts.tv_nsec = (long)(ns % 1000000000ull);
	return ts;
}

void
agent_io_step_begin(agent_io *io, uint64_t step, uint32_t timeout_ms,
    uint32_t *ret_misses)
{
	uint32_t missed = 0;

	io_lock(io);
	if (!io->begun) {
		/* The first step waits for the Welcome like for any due
		 * decision, so that every rank starts on the job's initial
		 * decision rather than on defaults. */
		uint64_t deadline = com_clock_ns() + timeout_ms * NS_PER_MS;

		io->begun = true;
		while (!io->welcomed) {
			struct timespec until;

			if (com_clock_ns() >= deadline) {
				missed++;
				io->misses++;
				break;
			}
			until = io_timespec(deadline);
			pthread_cond_timedwait(&io->cond, &io->mu, &until);
		}
	}
	if (agent_decisions_waiting(&io->table, step)) {
		uint64_t start = com_clock_ns();
		uint64_t deadline = start + timeout_ms * NS_PER_MS;
		uint64_t ask = start + IO_SNAPSHOT_AFTER_MS * NS_PER_MS;

		while (agent_decisions_waiting(&io->table, step)) {
			uint64_t now = com_clock_ns();
			struct timespec until;

			if (now >= deadline) {
				missed += agent_decisions_give_up(&io->table,
				    step);
				io->misses += missed;
				break;
			}
			/* The decision may have been published before our
			 * SUB was connected, or lost: ask for it directly. */
			if (now >= ask) {
				io->snapshot_asked = true;
				io_wake(io);
				ask = now + IO_SNAPSHOT_EVERY_MS * NS_PER_MS;
			}
			until = io_timespec(ask < deadline ? ask : deadline);
			pthread_cond_timedwait(&io->cond, &io->mu, &until);
		}
	}
	agent_decisions_advance(&io->table, step);
	io->step = step;
	io->next_step = step + 1;
	io_unlock(io);
	*ret_misses = missed;
}

void
agent_io_submit_report(agent_io *io, com_report *r)
{
	com_msg m;
	uint8_t *buf = NULL;
	size_t len = 0;
	int rc;

	io_lock(io);
	r->timings.reports_dropped = io->reports_dropped;
	io_unlock(io);

	/* Borrowed: encoded, never finalised. */
	com_msg_init(&m, COM_MSG_REPORT);
	m.u.report = *r;
	rc = com_codec_encode(&m, &buf, &len);

	io_lock(io);
	io->windows++;
	if (rc != 0) {
		io->reports_dropped++;
		io_unlock(io);
		io_log(io, BELLOWS_LOG_ERROR,
		    "dropped the report of window %llu: %s",
		    (unsigned long long)r->window, bellows_strerror(rc));
		return;
	}
	if (io->q_len == io->q_cap) {
		free(io->queue[io->q_head].buf);
		io->queue[io->q_head].buf = NULL;
		io->q_head = (io->q_head + 1) % io->q_cap;
		io->q_len--;
		io->reports_dropped++;
	}
	io->queue[(io->q_head + io->q_len) % io->q_cap].buf = buf;
	io->queue[(io->q_head + io->q_len) % io->q_cap].len = len;
	io->queue[(io->q_head + io->q_len) % io->q_cap].window = r->window;
	io->q_len++;
	/* Only a daemon that hears the report owes a decision for it. */
	if (io->welcomed)
		rc = agent_decisions_expect(&io->table, r->window,
		    r->last_step + 1 + io->apply_lag);
	io_unlock(io);
	if (rc != 0)
		io_log(io, BELLOWS_LOG_WARN,
		    "will not wait for the decision of window %llu: %s",
		    (unsigned long long)r->window, bellows_strerror(rc));
	io_wake(io);
}

void
agent_io_stats(agent_io *io, bellows_agent_stats *ret)
{
	io_lock(io);
	ret->connected = io->welcomed;
	ret->step = io->next_step;
	ret->window = io->windows;
	ret->reports_sent = io->reports_sent;
	ret->reports_dropped = io->reports_dropped;
	ret->decisions = io->table.received;
	ret->decision_misses = io->misses;
	ret->snapshots = io->snapshots;
	ret->reconnects = io->welcomes > 0 ? io->welcomes - 1 : 0;
	ret->seq_in_force = io->table.in_force.seq;
	ret->last_error = io->last_error;
	memcpy(ret->last_error_text, io->last_error_text,
	    sizeof(ret->last_error_text));
	io_unlock(io);
}
