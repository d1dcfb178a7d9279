/* server - ROUTER/PUB handling and per-peer drop accounting, see server.h.
 */
#include "server.h"

#include "clock.h"
#include "log.h"

#include <bellows/error.h>
#include <bellows/policy.h>

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#define SERVER_PEERS_MAX   4096  /* peers with drop records kept */
#define SERVER_PEER_LOG_MS 60000 /* one drop log line per peer per minute */
#define SERVER_BATCH       256   /* messages read per loop turn */
#define SERVER_TOPIC_MAX   300   /* "d:" + job name + NUL */
#define SERVER_GUARD       2     /* transport guard, in codec limits */

#define SERVER_HWM_MIN 8      /* messages queued per connection */
#define SERVER_HWM_MAX 100000 /* ... at most */
/* Requests queued per peer. Not lowered to a byte budget: libzmq drops
 * what a peer sent beyond it when the peer disconnects (an agent's last
 * reports and its Bye), and the loop reads faster than peers send. */
#define SERVER_RCVHWM 100000

typedef struct server_peer {
	uint8_t id[256];       /* routing id */
	uint8_t id_len;        /* bytes in id */
	uint64_t dropped;      /* messages dropped */
	uint64_t suppressed;   /* drops not logged since the last line */
	uint64_t last_log_ms;  /* when a drop was last logged */
	uint64_t last_drop_ms; /* when it last dropped (for eviction) */
	char last_error[160];  /* why it last dropped */
} server_peer;

struct ctl_server {
	void *router;         /* control socket */
	void *pub;            /* publish socket */
	com_limits limits;    /* decode limits */
	ctl_jobs *jobs;       /* dispatch target (borrowed) */
	ctl_store *store;     /* history, for STATUS (borrowed) */
	uint64_t instance;    /* daemon run id */
	uint64_t started_ms;  /* monotonic start */
	server_peer *peers;   /* drop records */
	uint32_t n_peers;     /* entries used */
	uint64_t messages;    /* frames received */
	uint64_t dropped;     /* messages dropped */
	uint64_t pub_dropped; /* publications that failed */
	int pub_hwm;          /* ZMQ_SNDHWM of the PUB, in messages */
	int reply_hwm;        /* ZMQ_SNDHWM of the ROUTER, in messages */
};

/* The high-water mark that keeps `budget` bytes of `frame`-byte messages:
 * ZeroMQ counts messages, not bytes, so the largest message sets it. */
static int
server_hwm(size_t budget, size_t frame)
{
	size_t n = budget / (frame > 0 ? frame : 1);

	if (n < SERVER_HWM_MIN)
		return SERVER_HWM_MIN;
	return n > SERVER_HWM_MAX ? SERVER_HWM_MAX : (int)n;
}

size_t
ctl_server_publication_bytes(const com_limits *limits, uint32_t max_layers)
{
	/* A decision: two packed doubles per layer, the codec table, the
	 * reason and policy texts, the job name. A telemetry: its metrics,
	 * each with a policy name, a metric name, a layer and a value.
	 * Both with room for the framing. */
	size_t decision = (size_t)max_layers * 2 * sizeof(double) +
	    limits->max_codec_table + 2 * (size_t)limits->max_text_len +
	    limits->max_name_len + 1024;
	size_t telemetry = (size_t)limits->max_metrics *
		(limits->max_name_len + BELLOWS_METRIC_NAME_MAX + 24) +
	    limits->max_name_len + 1024;

	return decision > telemetry ? decision : telemetry;
}

static int
server_bind(void *sock, const char *endpoint, const char *what)
{
	if (zmq_bind(sock, endpoint) != 0)
		return ctl_log_fail(BELLOWS_EIO, CTL_LOG_ERROR, "server",
		    "cannot bind %s socket to '%s': %s", what, endpoint,
		    zmq_strerror(zmq_errno()));
	return 0;
}

int
ctl_server_open(void *zctx, const char *control, const char *publish,
    const com_limits *limits, uint32_t queue_mb, uint32_t max_layers,
    uint64_t instance, ctl_server **ret_server)
{
	ctl_server *s = calloc(1, sizeof(*s));
	int64_t maxsize = (int64_t)limits->max_msg_bytes * SERVER_GUARD;
	size_t budget = (size_t)queue_mb << 20, publication;
	int linger = 0, rcvhwm = SERVER_RCVHWM, r;

	if (s == NULL)
		return BELLOWS_ENOMEM;
	s->limits = *limits;
	s->instance = instance;
	s->started_ms = com_clock_ms();
	s->peers = calloc(SERVER_PEERS_MAX, sizeof(*s->peers));
	s->router = zmq_socket(zctx, ZMQ_ROUTER);
	s->pub = zmq_socket(zctx, ZMQ_PUB);
	if (s->peers == NULL || s->router == NULL || s->pub == NULL) {
		r = s->peers == NULL ? BELLOWS_ENOMEM : BELLOWS_ESYS;
		goto fail;
	}
	/* Frames up to twice the codec's limit reach the codec, which refuses
	 * the oversized ones so they are counted against their peer like any
	 * malformed message. Beyond that ZeroMQ closes the connection before
	 * allocating the frame: the transport's guard against a peer that
	 * would exhaust our memory, and the one drop STATUS cannot see. */
	zmq_setsockopt(s->router, ZMQ_MAXMSGSIZE, &maxsize, sizeof(maxsize));
	zmq_setsockopt(s->router, ZMQ_LINGER, &linger, sizeof(linger));
	zmq_setsockopt(s->router, ZMQ_RCVHWM, &rcvhwm, sizeof(rcvhwm));
	zmq_setsockopt(s->pub, ZMQ_LINGER, &linger, sizeof(linger));
	/* The send queues of both sockets are bounded in bytes: ZeroMQ
	 * counts messages per connection, so the budget is divided by the
	 * largest message the limits let through: a publication for jobs of
	 * max_layers layers, a reply (a Welcome, Snapshot or STATUS) of up
	 * to a frame. Set once, before binding: libzmq gives each accepted
	 * connection the mark its listener had when it was bound, and a
	 * mark lowered on a connection that holds more than it can leave
	 * that connection stalled for good, so the marks never change while
	 * the daemon runs. */
	publication = ctl_server_publication_bytes(limits, max_layers);
	s->pub_hwm = server_hwm(budget, publication);
	s->reply_hwm = server_hwm(budget, limits->max_msg_bytes);
	zmq_setsockopt(s->pub, ZMQ_SNDHWM, &s->pub_hwm, sizeof(s->pub_hwm));
	zmq_setsockopt(s->router, ZMQ_SNDHWM, &s->reply_hwm,
	    sizeof(s->reply_hwm));
	if ((r = server_bind(s->router, control, "control")) != 0 ||
	    (r = server_bind(s->pub, publish, "publish")) != 0)
		goto fail;
	ctl_log(CTL_LOG_INFO, "server",
	    "send queues per connection: %d publications of up to %zu bytes, "
	    "%d replies of up to %zu bytes (peer_queue_mb %u)",
	    s->pub_hwm, publication, s->reply_hwm, limits->max_msg_bytes,
	    queue_mb);
	*ret_server = s;
	return 0;
fail:
	ctl_server_close(&s);
	return r;
}

void
ctl_server_close(ctl_server **server)
{
	ctl_server *s;

	if (server == NULL || *server == NULL)
		return;
	s = *server;
	if (s->router != NULL)
		zmq_close(s->router);
	if (s->pub != NULL)
		zmq_close(s->pub);
	free(s->peers);
	free(s);
	*server = NULL;
}

void
ctl_server_set_jobs(ctl_server *s, ctl_jobs *jobs)
{
	s->jobs = jobs;
}

void
ctl_server_set_store(ctl_server *s, ctl_store *store)
{
	s->store = store;
}

static server_peer *
server_peer_find(ctl_server *s, const uint8_t *id, size_t len, bool create,
    uint64_t now_ms)
{
	uint32_t victim = 0;

	for (uint32_t i = 0; i < s->n_peers; i++) {
		if (s->peers[i].id_len == len &&
		    memcmp(s->peers[i].id, id, len) == 0)
			return &s->peers[i];
		if (s->peers[i].last_drop_ms < s->peers[victim].last_drop_ms)
			victim = i;
	}
	if (!create)
		return NULL;
	if (s->n_peers < SERVER_PEERS_MAX)
		victim = s->n_peers++;
	memset(&s->peers[victim], 0, sizeof(s->peers[victim]));
	memcpy(s->peers[victim].id, id, len);
	s->peers[victim].id_len = (uint8_t)len;
	(void)now_ms;
	return &s->peers[victim];
}

static void
server_peer_text(const uint8_t *id, size_t len, char *buf, size_t buflen)
{
	size_t used = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < len && used + 3 < buflen; i++)
		used += (size_t)snprintf(buf + used, buflen - used, "%02x",
		    id[i]);
}

/* Counts a dropped message against its peer and logs it, at most once per
 * peer per minute. */
static void
server_drop(ctl_server *s, const uint8_t *id, size_t len, int code,
    const char *why)
{
	uint64_t now = com_clock_ms();
	server_peer *p = server_peer_find(s, id, len, true, now);
	char idtext[80];

	s->dropped++;
	p->dropped++;
	p->last_drop_ms = now;
	snprintf(p->last_error, sizeof(p->last_error), "%s: %s",
	    bellows_strerror(code), why != NULL && why[0] ? why : "-");
	if (p->last_log_ms != 0 && now - p->last_log_ms < SERVER_PEER_LOG_MS) {
		p->suppressed++;
		return;
	}
	server_peer_text(id, len, idtext, sizeof(idtext));
	ctl_log(CTL_LOG_WARN, "server",
	    "peer %s: %s, dropping message (%" PRIu64 " dropped, %" PRIu64
	    " not logged)",
	    idtext, p->last_error, p->dropped, p->suppressed);
	p->last_log_ms = now;
	p->suppressed = 0;
}

/* Sends one Envelope to a peer; never blocks. */
static void
server_reply(ctl_server *s, const uint8_t *id, size_t len, const com_msg *m)
{
	uint8_t *buf;
	size_t n;

	if (com_codec_encode(m, &buf, &n) != 0) {
		ctl_log(CTL_LOG_ERROR, "server", "cannot encode a %s reply",
		    com_msg_type_name(m->type));
		return;
	}
	if (zmq_send(s->router, id, len, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0 ||
	    zmq_send(s->router, buf, n, ZMQ_DONTWAIT) < 0)
		server_drop(s, id, len, BELLOWS_EAGAIN, "reply not queued");
	free(buf);
}

static int
server_status(ctl_server *s, const com_status_request *req, com_msg *reply)
{
	com_status_reply *st;
	ctl_jobs_counters c;
	uint64_t now = com_clock_ms();
	uint32_t n = 0;

	com_msg_init(reply, COM_MSG_STATUS_REPLY);
	st = &reply->u.status_reply;
	st->instance = s->instance;
	st->uptime_ms = now - s->started_ms;
	st->messages = s->messages;
	st->dropped = s->dropped;
	if (s->jobs != NULL) {
		ctl_jobs_get_counters(s->jobs, &c);
		st->reports = c.reports;
		st->decisions = c.decisions;
		st->layer_stats = c.layer_stats;
		st->reports_duplicate = c.duplicates;
		{
			ctl_jobs_latency_info lat;

			ctl_jobs_latency(s->jobs, &lat);
			st->latency_p50_ms = lat.p50_ms;
			st->latency_p99_ms = lat.p99_ms;
			st->latency_max_ms = lat.max_ms;
			st->latency_samples = lat.samples;
		}
		if (ctl_jobs_status(s->jobs, req, now, st) != 0)
			return BELLOWS_ENOMEM;
	}
	if (ctl_store_status(s->store, st) != 0)
		return BELLOWS_ENOMEM;
	st->peers = calloc(s->n_peers ? s->n_peers : 1, sizeof(*st->peers));
	if (st->peers == NULL)
		return BELLOWS_ENOMEM;
	for (uint32_t i = 0; i < s->n_peers && n < s->limits.max_peers; i++) {
		const server_peer *p = &s->peers[i];
		com_peer_status *ps = &st->peers[n++];

		st->n_peers = n;
		ps->peer = malloc(p->id_len ? p->id_len : 1);
		ps->last_error = com_strdup(p->last_error);
		if (ps->peer == NULL || ps->last_error == NULL)
			return BELLOWS_ENOMEM;
		memcpy(ps->peer, p->id, p->id_len);
		ps->peer_len = p->id_len;
		ps->dropped = p->dropped;
	}
	return 0;
}

/* Handles one decoded message from peer `id`. */
static void
server_dispatch(ctl_server *s, const uint8_t *id, size_t len, com_msg *m)
{
	char why[256] = "";
	com_msg reply;
	uint64_t now = com_clock_ms();
	int r;

	com_msg_init(&reply, COM_MSG_NONE);
	switch (m->type) {
	case COM_MSG_HELLO:
		r = ctl_jobs_hello(s->jobs, id, len, &m->u.hello, now, &reply,
		    why, sizeof(why));
		break;
	case COM_MSG_REPORT:
		r = ctl_jobs_report(s->jobs, id, len, &m->u.report, now, &reply,
		    why, sizeof(why));
		break;
	case COM_MSG_HEARTBEAT:
		r = ctl_jobs_heartbeat(s->jobs, id, len, &m->u.heartbeat, now,
		    &reply, why, sizeof(why));
		break;
	case COM_MSG_BYE:
		r = ctl_jobs_bye(s->jobs, id, len, &m->u.bye, now, why,
		    sizeof(why));
		break;
	case COM_MSG_SNAPSHOT_REQUEST:
		r = ctl_jobs_snapshot(s->jobs, &m->u.snapshot_request, &reply,
		    why, sizeof(why));
		break;
	case COM_MSG_STATUS_REQUEST:
		r = server_status(s, &m->u.status_request, &reply);
		if (r != 0) {
			com_msg_fini(&reply);
			snprintf(why, sizeof(why), "status reply too large");
		}
		break;
	default:
		r = BELLOWS_EPROTO;
		snprintf(why, sizeof(why), "a %s is not a request",
		    com_msg_type_name(m->type));
		break;
	}
	if (r != 0)
		server_drop(s, id, len, r, why);
	if (reply.type != COM_MSG_NONE)
		server_reply(s, id, len, &reply);
	com_msg_fini(&reply);
}

/* Reads and handles one message if there is one; false when the socket
 * is drained. */
static bool
server_read_one(ctl_server *s)
{
	zmq_msg_t idf, body;
	uint8_t id[256];
	size_t id_len, parts = 1, size;
	com_msg m;
	int more, r;
	size_t more_len = sizeof(more);

	zmq_msg_init(&idf);
	if (zmq_msg_recv(&idf, s->router, ZMQ_DONTWAIT) < 0) {
		zmq_msg_close(&idf);
		return false;
	}
	id_len = zmq_msg_size(&idf);
	if (id_len > sizeof(id))
		id_len = sizeof(id);
	memcpy(id, zmq_msg_data(&idf), id_len);
	zmq_msg_close(&idf);
	s->messages++;

	zmq_msg_init(&body);
	zmq_getsockopt(s->router, ZMQ_RCVMORE, &more, &more_len);
	if (!more) {
		server_drop(s, id, id_len, BELLOWS_EPROTO, "empty message");
		zmq_msg_close(&body);
		return true;
	}
	zmq_msg_recv(&body, s->router, 0);
	/* Drain any further frames: a request is exactly one frame. */
	zmq_getsockopt(s->router, ZMQ_RCVMORE, &more, &more_len);
	while (more) {
		zmq_msg_t extra;

		zmq_msg_init(&extra);
		zmq_msg_recv(&extra, s->router, 0);
		zmq_msg_close(&extra);
		parts++;
		zmq_getsockopt(s->router, ZMQ_RCVMORE, &more, &more_len);
	}
	if (parts > 1) {
		server_drop(s, id, id_len, BELLOWS_EPROTO,
		    "more than one frame");
		zmq_msg_close(&body);
		return true;
	}
	/* Tested here rather than taken from the decoder, whose
	 * BELLOWS_EMSGSIZE also means a smaller frame that would unpack
	 * into more than its allocation budget. */
	size = zmq_msg_size(&body);
	if (size > s->limits.max_msg_bytes) {
		char text[96];

		snprintf(text, sizeof(text),
		    "a frame of %zu bytes, the limit is %zu", size,
		    s->limits.max_msg_bytes);
		zmq_msg_close(&body);
		server_drop(s, id, id_len, BELLOWS_EMSGSIZE, text);
		return true;
	}
	r = com_codec_decode(zmq_msg_data(&body), size, &s->limits, &m);
	zmq_msg_close(&body);
	if (r == BELLOWS_EVERSION) {
		com_msg reply;
		char text[160];

		snprintf(text, sizeof(text),
		    "protocol version %u.%u is not supported by this "
		    "bellowsd (speaks %d.%d)",
		    m.major, m.minor, BELLOWS_PROTO_MAJOR, BELLOWS_PROTO_MINOR);
		server_drop(s, id, id_len, r, text);
		com_msg_init(&reply, COM_MSG_ERROR);
		reply.u.error.code = r;
		reply.u.error.message = com_strdup(text);
		server_reply(s, id, id_len, &reply);
		com_msg_fini(&reply);
		com_msg_fini(&m);
		return true;
	}
	if (r != 0) {
		server_drop(s, id, id_len, r, "cannot decode");
		return true;
	}
	server_dispatch(s, id, id_len, &m);
	com_msg_fini(&m);
	return true;
}

static void
server_on_router(ctl_loop *loop, void *arg)
{
	ctl_server *s = arg;

	/* Bounded batch: timers and the other sockets get their turn even
	 * under a flood. */
	for (int i = 0; i < SERVER_BATCH; i++) {
		if (!server_read_one(s))
			break;
	}
}

int
ctl_server_attach(ctl_server *s, ctl_loop *loop)
{
	return ctl_loop_add_socket(loop, s->router, server_on_router, s);
}

void
ctl_server_send(void *arg, const uint8_t *peer, size_t peer_len,
    const com_msg *m)
{
	server_reply(arg, peer, peer_len, m);
}

void
ctl_server_publish(void *arg, const com_msg *m)
{
	ctl_server *s = arg;
	char topic[SERVER_TOPIC_MAX];
	const char *job;
	uint8_t *buf;
	size_t n;
	int tlen;

	if (m->type == COM_MSG_DECISION)
		job = m->u.decision.job;
	else if (m->type == COM_MSG_TELEMETRY)
		job = m->u.telemetry.job;
	else
		return;
	tlen = snprintf(topic, sizeof(topic), "%c:%s",
	    m->type == COM_MSG_DECISION ? 'd' : 't', job != NULL ? job : "");
	if (tlen < 0 || (size_t)tlen >= sizeof(topic))
		return;
	if (com_codec_encode(m, &buf, &n) != 0) {
		s->pub_dropped++;
		ctl_log(CTL_LOG_ERROR, "server", "cannot encode a %s",
		    com_msg_type_name(m->type));
		return;
	}
	/* The topic includes its NUL so that a SUB prefix is exact. */
	if (zmq_send(s->pub, topic, (size_t)tlen + 1,
		ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0 ||
	    zmq_send(s->pub, buf, n, ZMQ_DONTWAIT) < 0)
		s->pub_dropped++;
	free(buf);
}
