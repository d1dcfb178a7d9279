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
 * A report handed to the socket is not safe yet: while the daemon
 * acknowledges, the last ones sent are kept (io_keep.c) until it says
 * their windows are durably closed. A published decision for window w
 * acknowledges every window up to w (decisions are published only after
 * their commit), and Welcome and HeartbeatAck carry windows_closed, the
 * lowest window not durably closed. After a Welcome that starts a new
 * session (a new daemon instance, or the same one after the agent lost
 * it) the kept reports at or above windows_closed are sent again, oldest
 * first, before anything queued; the daemon may record those late, after
 * deciding on newer windows, so until windows_closed passes them no
 * decision acknowledges anything.
 *
 * With CURVE keys the poll also reads a monitor of the DEALER's
 * connections and handshakes (io_curve.c). What the training thread
 * calls is in io_trainer.c.
 *
 * The mutex guards the decision table, the report queue and the counters.
 * Fields the I/O thread alone writes (welcomed, the instance) are read by
 * it without the lock; everyone else reads them under it.
 */
#include "io_int.h"

#include "common/zmonitor.h"

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
#include "common/wire.h"
#include "decisions.h"

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

__attribute__((format(printf, 3, 4))) void
agent_io_log(agent_io *io, int level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	io_vlog(io, level, fmt, ap);
	va_end(ap);
}

__attribute__((format(printf, 4, 5))) void
agent_io_log_quiet(agent_io *io, enum io_quiet kind, int level, const char *fmt,
    ...)
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

void
agent_io_lock(agent_io *io)
{
	pthread_mutex_lock(&io->mu);
}

void
agent_io_unlock(agent_io *io)
{
	pthread_mutex_unlock(&io->mu);
}

void
agent_io_wake(agent_io *io)
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

	if ((rc = com_wire_encode(m, &buf, &len)) != 0) {
		agent_io_log_quiet(io, IO_QUIET_SEND, BELLOWS_LOG_ERROR,
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
	agent_io_lock(io);
	h->step = io->next_step;
	h->in_force = io->table.in_force;
	h->last_window = io->windows;
	rc = com_wire_encode(&m, &buf, &len);
	agent_io_unlock(io);
	if (rc == 0)
		rc = io_send_buf(io, buf, len);
	free(buf);
	if (rc == BELLOWS_EAGAIN)
		return;
	/* Sent, or it cannot be: the retry timer tries again either way. */
	io->want_hello = false;
	if (rc == 0)
		agent_io_log(io, BELLOWS_LOG_DEBUG,
		    "hello sent to %s (job %s rank %u)", io->control, io->job,
		    io->rank);
	else
		agent_io_log_quiet(io, IO_QUIET_SEND, BELLOWS_LOG_ERROR,
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
	agent_io_lock(io);
	hb->step = io->step;
	hb->seq_in_force = io->table.in_force.seq;
	agent_io_unlock(io);
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
		agent_io_lock(io);
		io->snapshots++;
		agent_io_unlock(io);
		agent_io_log(io, BELLOWS_LOG_DEBUG, "snapshot requested");
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

/* Hands reports to the socket until it pushes back: the kept ones a new
 * session must see again first, then the queue. */
static void
io_send_reports(agent_io *io)
{
	int err = 0;

	agent_io_lock(io);
	while (io->welcomed) {
		bool again = io->k_sent < io->kept.len;
		io_report *r, sent;
		int rc;

		if (again)
			r = agent_io_ring_at(&io->kept, io->k_sent);
		else if (io->queue.len > 0)
			r = agent_io_ring_at(&io->queue, 0);
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
		agent_io_ring_pop(&io->queue, &sent);
		if (rc == 0) {
			io->reports_sent++;
			agent_io_kept_push(io, &sent);
		} else {
			io->reports_dropped++;
			io->held_bytes -= sent.len;
			free(sent.buf);
		}
	}
	agent_io_unlock(io);
	if (err != 0)
		agent_io_log_quiet(io, IO_QUIET_SEND, BELLOWS_LOG_ERROR,
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
	agent_io_lock(io);
	reports = io->queue.len > 0 || io->k_sent < io->kept.len;
	agent_io_unlock(io);
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

	agent_io_lock(io);
	io->welcomed = false;
	forgotten = agent_decisions_forget_due(&io->table);
	pthread_cond_broadcast(&io->cond);
	agent_io_unlock(io);
	va_start(ap, fmt);
	io_vlog(io, BELLOWS_LOG_WARN, fmt, ap);
	va_end(ap);
	if (forgotten > 0)
		agent_io_log(io, BELLOWS_LOG_WARN,
		    "no longer waiting for the decisions of %u window(s)",
		    forgotten);
	io->want_snapshot = false;
	if (!io->hello_off) {
		io->want_hello = true;
		io->next_hello_ms = now + IO_HELLO_RETRY_MS;
	}
}

void
agent_io_skip_parts(void *socket, zmq_msg_t *frame)
{
	while (zmq_msg_more(frame)) {
		zmq_msg_close(frame);
		zmq_msg_init(frame);
		if (zmq_msg_recv(frame, socket, ZMQ_DONTWAIT) < 0)
			break;
	}
}

static void
io_timers(agent_io *io, uint64_t now)
{
	if (io->hs_since_ms != 0 && now - io->hs_since_ms >= io->handshake_ms)
		agent_io_handshake_failed(io, "no answer: wrong server key?");
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
		agent_io_log_quiet(io, IO_QUIET_UNREACHABLE, BELLOWS_LOG_WARN,
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

static void
io_on_welcome(agent_io *io, com_welcome *w, uint32_t minor, uint64_t now)
{
	bool gap;
	bool rejoined;
	uint32_t added;
	uint32_t resend;
	uint64_t first = 0;

	if (!io_job_matches(io, w->job) || w->rank != io->rank) {
		agent_io_log_quiet(io, IO_QUIET_MALFORMED, BELLOWS_LOG_WARN,
		    "ignored a welcome for job %s rank %u",
		    w->job ? w->job : "", w->rank);
		return;
	}
	agent_io_lock(io);
	rejoined = !io->welcomed || io->instance != w->instance;
	if (!io->welcomed)
		io->welcomes++;
	io->welcomed = true;
	io->instance = w->instance;
	io->apply_lag = w->apply_lag;
	added = agent_decisions_add_set(&io->table, w->decisions,
	    w->n_decisions);
	gap = agent_decisions_gap(&io->table);
	resend = agent_io_kept_welcome(io, minor, w->windows_closed, rejoined);
	if (resend > 0)
		first = agent_io_ring_at(&io->kept, 0)->window;
	pthread_cond_broadcast(&io->cond);
	agent_io_unlock(io);

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
		agent_io_log(io, BELLOWS_LOG_INFO,
		    "joined job %s as rank %u of %u (bellowsd instance "
		    "%016llx, apply lag %u, %u new decision(s))",
		    io->job, io->rank, io->world,
		    (unsigned long long)w->instance, w->apply_lag, added);
	if (resend > 0)
		agent_io_log(io, BELLOWS_LOG_INFO,
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
	agent_io_lock(io);
	behind = ack->last_seq > io->table.last_seq;
	if (io->acks)
		agent_io_kept_ack(io, ack->windows_closed);
	agent_io_unlock(io);
	if (behind)
		io->want_snapshot = true;
}

static void
io_on_snapshot(agent_io *io, com_snapshot *s)
{
	bool gap;

	if (!io_job_matches(io, s->job))
		return;
	agent_io_lock(io);
	agent_decisions_add_set(&io->table, s->decisions, s->n_decisions);
	gap = agent_decisions_gap(&io->table);
	pthread_cond_broadcast(&io->cond);
	agent_io_unlock(io);
	if (gap && io->welcomed)
		io->want_snapshot = true;
}

static void
io_on_error(agent_io *io, int code, const char *text, uint64_t now)
{
	if (text == NULL || text[0] == '\0')
		text = bellows_strerror(code);
	agent_io_lock(io);
	io->last_error = code;
	snprintf(io->last_error_text, sizeof(io->last_error_text), "%s", text);
	agent_io_unlock(io);

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
		agent_io_log(io, BELLOWS_LOG_WARN,
		    "bellowsd refused rank %u of job %s: %s; retrying",
		    io->rank, io->job, text);
		break;
	case BELLOWS_EVERSION:
	case BELLOWS_EMISMATCH:
		agent_io_log(io, BELLOWS_LOG_ERROR,
		    "bellowsd refused rank %u of job %s: %s; not joining, "
		    "training goes on with the decision in force",
		    io->rank, io->job, text);
		io->hello_off = true;
		io->want_hello = false;
		if (io->welcomed)
			io_lose(io, now, "left job %s", io->job);
		break;
	default:
		agent_io_log(io, BELLOWS_LOG_WARN, "bellowsd error %d: %s",
		    code, text);
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
		agent_io_log_quiet(io, IO_QUIET_MALFORMED, BELLOWS_LOG_WARN,
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
			agent_io_skip_parts(io->dealer, &frame);
			zmq_msg_close(&frame);
			agent_io_log_quiet(io, IO_QUIET_MALFORMED,
			    BELLOWS_LOG_WARN,
			    "dropped a multi-part message from bellowsd");
			continue;
		}
		rc = com_wire_decode(zmq_msg_data(&frame), zmq_msg_size(&frame),
		    &io->limits, &m);
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
			agent_io_log_quiet(io, IO_QUIET_MALFORMED,
			    BELLOWS_LOG_WARN,
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
		agent_io_lock(io);
		rc = agent_decisions_add(&io->table, d);
		gap = agent_decisions_gap(&io->table);
		/* Published only once committed, with the window it closed:
		 * an acknowledgement of that window and every earlier one
		 * (but of late windows, agent_io_kept_decided). */
		if (rc >= 0 && io->acks)
			agent_io_kept_decided(io, window);
		if (rc >= 0)
			pthread_cond_broadcast(&io->cond);
		agent_io_unlock(io);
		if (rc >= 0 && gap && io->welcomed && !io->want_snapshot) {
			agent_io_log(io, BELLOWS_LOG_INFO,
			    "decision seq %llu arrived out of sequence, "
			    "asking for a snapshot",
			    (unsigned long long)seq);
			io->want_snapshot = true;
		}
	}
	if (rc < 0)
		agent_io_log_quiet(io, IO_QUIET_DECISION, BELLOWS_LOG_WARN,
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
			agent_io_skip_parts(io->sub, &body);
			ok = false;
		}
		zmq_msg_close(&topic);
		if (!ok) {
			zmq_msg_close(&body);
			agent_io_log_quiet(io, IO_QUIET_MALFORMED,
			    BELLOWS_LOG_WARN,
			    "dropped a malformed publication");
			continue;
		}
		rc = com_wire_decode(zmq_msg_data(&body), zmq_msg_size(&body),
		    &io->limits, &m);
		zmq_msg_close(&body);
		if (rc == 0 && m.type == COM_MSG_DECISION)
			io_on_decision(io, &m.u.decision);
		else
			agent_io_log_quiet(io, IO_QUIET_MALFORMED,
			    BELLOWS_LOG_WARN, "dropped a publication: %s",
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

	agent_io_lock(io);
	closing = io->closing;
	if (io->snapshot_asked) {
		io->snapshot_asked = false;
		if (io->welcomed)
			io->want_snapshot = true;
	}
	agent_io_unlock(io);
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
			agent_io_log(io, BELLOWS_LOG_ERROR,
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
			agent_io_recv_monitor(io, com_clock_ms());
	}
	/* The last window's report is usually still queued when the trainer
	 * closes: hand it over before saying goodbye. */
	io_send_reports(io);
	io_send_bye(io);
	return NULL;
}

int
agent_io_setopt(void *socket, int option, int value)
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
	if (agent_io_setopt(s, ZMQ_LINGER,
		type == ZMQ_DEALER ? IO_LINGER_MS : 0) ||
	    zmq_setsockopt(s, ZMQ_MAXMSGSIZE, &max, sizeof(max)) ||
	    agent_io_setopt(s, ZMQ_SNDHWM, IO_SNDHWM) ||
	    agent_io_setopt(s, ZMQ_RECONNECT_IVL, IO_RECONNECT_MS) ||
	    agent_io_setopt(s, ZMQ_RECONNECT_IVL_MAX, IO_RECONNECT_MAX_MS) ||
	    (type == ZMQ_DEALER && agent_io_setopt(s, ZMQ_IMMEDIATE, 1)) ||
	    (type == ZMQ_SUB &&
		zmq_setsockopt(s, ZMQ_SUBSCRIBE, io->topic, io->topic_len))) {
		zmq_close(s);
		return NULL;
	}
	return s;
}

static int
io_connect(agent_io *io, void *socket, const char *endpoint, const char *what)
{
	int err;

	if (zmq_connect(socket, endpoint) == 0)
		return 0;
	err = errno;
	agent_io_log(io, BELLOWS_LOG_ERROR,
	    "cannot connect the %s socket to %s: %s", what, endpoint,
	    zmq_strerror(err));
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
	io->q_max = cfg->queue_capacity > 0 ? cfg->queue_capacity : 1;
	io->keep_bytes = cfg->keep_bytes;
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
		agent_io_log(io, BELLOWS_LOG_ERROR, "cannot create sockets: %s",
		    zmq_strerror(errno));
		goto fail;
	}
	if (cfg->server != NULL && cfg->client != NULL) {
		io->curve = true;
		io->handshake_ms = cfg->handshake_ms > 0 ? cfg->handshake_ms
							 : 1;
		memcpy(io->server_key, cfg->server->public_key,
		    sizeof(io->server_key));
		if ((rc = agent_io_curve(io, io->dealer, cfg->client)) != 0 ||
		    (rc = agent_io_curve(io, io->sub, cfg->client)) != 0 ||
		    (rc = agent_io_watch(io)) != 0)
			goto fail;
	}
	if ((rc = io_connect(io, io->dealer, io->control, "control")) != 0 ||
	    (rc = io_connect(io, io->sub, io->publish, "publish")) != 0)
		goto fail;
	rc = BELLOWS_ESYS;
	if (pthread_create(&io->thread, NULL, io_main, io) != 0) {
		agent_io_log(io, BELLOWS_LOG_ERROR,
		    "cannot start the I/O thread");
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
		agent_io_lock(io);
		io->closing = true;
		agent_io_unlock(io);
		agent_io_wake(io);
		pthread_join(io->thread, NULL);
	}
	com_monitor_close(io->dealer, &io->monitor); /* before the DEALER */
	if (io->dealer != NULL)
		zmq_close(io->dealer);
	if (io->sub != NULL)
		zmq_close(io->sub);
	if (io->ctx != NULL)
		while (zmq_ctx_term(io->ctx) != 0 && errno == EINTR)
			;
	if (io->wake_fd >= 0)
		close(io->wake_fd);
	agent_io_ring_free(&io->queue);
	agent_io_ring_free(&io->kept);
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
