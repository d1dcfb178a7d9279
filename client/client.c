/* client - one-request control-socket client, see client.h.
 */
#include "client.h"

#include "common/clock.h"
#include "common/wire.h"
#include "common/zmonitor.h"

#include <bellows/error.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#define CLIENT_REFUSED   "bellowsd refused this client's key"
#define CLIENT_NO_ANSWER "no answer: wrong server key?"
#define CLIENT_NEEDS_KEYS                                                      \
	"bellowsd uses CURVE: give --server-key and --client-key (or "         \
	"BELLOWS_SERVER_KEY and BELLOWS_CLIENT_KEY)"

struct tool_client {
	void *ctx;         /* ZeroMQ context, owned */
	void *sock;        /* DEALER to bellowsd's ROUTER */
	void *monitor;     /* PAIR: the DEALER's events */
	bool curve;        /* the DEALER is a CURVE client */
	bool connected;    /* a connection waits for its handshake */
	const char *why;   /* a failed handshake, or "" */
	com_limits limits; /* what a reply may be */
};

const char *
tool_client_env(const char *var, const char *fallback)
{
	const char *v = getenv(var);

	return v != NULL && v[0] != '\0' ? v : fallback;
}

/* A key file: the option's value, else the environment's `var`. */
static const char *
client_key_path(const char *opt, const char *var)
{
	const char *v;

	if (opt != NULL)
		return opt;
	if ((v = getenv(var)) != NULL && v[0] != '\0')
		return v;
	return NULL;
}

int
tool_client_keys(const char *cmd, const char *server_path,
    const char *client_path, tool_keys *ret)
{
	tool_keys k;
	char err[512];
	int r;

	memset(&k, 0, sizeof(k));
	k.server_path = client_key_path(server_path, "BELLOWS_SERVER_KEY");
	k.client_path = client_key_path(client_path, "BELLOWS_CLIENT_KEY");
	if (k.server_path == NULL && k.client_path == NULL) {
		*ret = k;
		return 0;
	}
	if (k.server_path == NULL || k.client_path == NULL) {
		fprintf(stderr,
		    "bellows %s: %s but not %s: CURVE needs both the "
		    "server's public key and this client's secret key\n",
		    cmd,
		    k.server_path != NULL
			? "a server key (--server-key, BELLOWS_SERVER_KEY)"
			: "a client key (--client-key, BELLOWS_CLIENT_KEY)",
		    k.server_path != NULL ? "a client key" : "a server key");
		return BELLOWS_EINVAL;
	}
	if ((r = com_cert_load(k.server_path, &k.server, err, sizeof(err))) !=
	    0) {
		if (r == BELLOWS_EINVAL)
			fprintf(stderr, "bellows %s: server key: %s\n", cmd,
			    err);
		else
			fprintf(stderr, "bellows %s: server key %s: %s\n", cmd,
			    k.server_path, bellows_strerror(r));
		return BELLOWS_EINVAL;
	}
	if ((r = com_cert_load(k.client_path, &k.client, err, sizeof(err))) !=
	    0) {
		if (r == BELLOWS_EINVAL)
			fprintf(stderr, "bellows %s: client key: %s\n", cmd,
			    err);
		else
			fprintf(stderr, "bellows %s: client key %s: %s\n", cmd,
			    k.client_path, bellows_strerror(r));
		return BELLOWS_EINVAL;
	}
	if (k.client.secret_key[0] == '\0') {
		fprintf(stderr,
		    "bellows %s: client key %s is a public certificate; the "
		    "client needs its secret one (NAME.key)\n",
		    cmd, k.client_path);
		return BELLOWS_EINVAL;
	}
	k.curve = true;
	*ret = k;
	return 0;
}

int
tool_client_curve(void *socket, const tool_keys *keys)
{
	if (keys == NULL || !keys->curve)
		return 0;
	if (zmq_setsockopt(socket, ZMQ_CURVE_SERVERKEY, keys->server.public_key,
		40) != 0 ||
	    zmq_setsockopt(socket, ZMQ_CURVE_PUBLICKEY, keys->client.public_key,
		40) != 0 ||
	    zmq_setsockopt(socket, ZMQ_CURVE_SECRETKEY, keys->client.secret_key,
		40) != 0)
		return BELLOWS_ENOTSUP;
	return 0;
}

/* Watches the DEALER's connections and handshakes. */
static int
client_watch(tool_client *c)
{
	return com_monitor_open(c->ctx, c->sock,
	    ZMQ_EVENT_CONNECTED | ZMQ_EVENT_DISCONNECTED |
		ZMQ_EVENT_HANDSHAKE_SUCCEEDED |
		ZMQ_EVENT_HANDSHAKE_FAILED_AUTH |
		ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
		ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL,
	    "client", &c->monitor);
}

int
tool_client_open(const char *endpoint, const tool_keys *keys,
    tool_client **ret_client)
{
	tool_client *c = calloc(1, sizeof(*c));
	int linger = 0, r;
	int64_t maxsize;

	if (c == NULL)
		return BELLOWS_ENOMEM;
	com_limits_default(&c->limits);
	maxsize = (int64_t)c->limits.max_msg_bytes;
	c->ctx = zmq_ctx_new();
	if (c->ctx == NULL) {
		r = BELLOWS_ESYS;
		goto fail;
	}
	c->sock = zmq_socket(c->ctx, ZMQ_DEALER);
	if (c->sock == NULL) {
		r = BELLOWS_ESYS;
		goto fail;
	}
	zmq_setsockopt(c->sock, ZMQ_LINGER, &linger, sizeof(linger));
	zmq_setsockopt(c->sock, ZMQ_MAXMSGSIZE, &maxsize, sizeof(maxsize));
	c->why = "";
	c->curve = keys != NULL && keys->curve;
	/* Watched also without keys: a plain client of a secured daemon
	 * fails its handshake, which deserves better than a timeout. */
	if ((r = tool_client_curve(c->sock, keys)) != 0 ||
	    (r = client_watch(c)) != 0)
		goto fail;
	if (zmq_connect(c->sock, endpoint) != 0) {
		r = BELLOWS_EINVAL;
		goto fail;
	}
	*ret_client = c;
	return 0;
fail:
	tool_client_close(&c);
	return r;
}

void
tool_client_close(tool_client **client)
{
	tool_client *c;

	if (client == NULL || *client == NULL)
		return;
	c = *client;
	com_monitor_close(c->sock, &c->monitor); /* before the DEALER */
	if (c->sock != NULL)
		zmq_close(c->sock);
	if (c->ctx != NULL)
		zmq_ctx_term(c->ctx);
	free(c);
	*client = NULL;
}

const char *
tool_client_why(const tool_client *c)
{
	return c->why;
}

/* Reads the monitor's events; BELLOWS_ECONFIG when a handshake failed
 * (c->why says how), else 0. */
static int
client_events(tool_client *c)
{
	for (;;) {
		uint16_t event = 0;
		uint32_t value;
		int r = com_monitor_recv(c->monitor, &event, &value);

		if (r == BELLOWS_EAGAIN)
			return 0;
		switch (event) {
		case ZMQ_EVENT_CONNECTED:
			c->connected = true;
			break;
		case ZMQ_EVENT_HANDSHAKE_SUCCEEDED:
			c->connected = false;
			break;
		case ZMQ_EVENT_HANDSHAKE_FAILED_AUTH:
			c->why = CLIENT_REFUSED;
			return BELLOWS_ECONFIG;
		case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL:
		case ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL:
			c->why = c->curve ? CLIENT_NO_ANSWER
					  : CLIENT_NEEDS_KEYS;
			return BELLOWS_ECONFIG;
		case ZMQ_EVENT_DISCONNECTED:
			if (c->connected) {
				c->why = c->curve ? CLIENT_NO_ANSWER
						  : CLIENT_NEEDS_KEYS;
				return BELLOWS_ECONFIG;
			}
			break;
		default:
			break;
		}
	}
}

/* Waits until the socket is readable or the deadline passes. Returns 1
 * when readable, 0 on timeout, BELLOWS_ECONFIG when a handshake failed,
 * BELLOWS_EIO on failure. */
static int
client_wait(tool_client *c, uint64_t deadline_ms)
{
	for (;;) {
		zmq_pollitem_t items[2] = {
			{ c->sock, 0, ZMQ_POLLIN, 0 },
			{ c->monitor, 0, ZMQ_POLLIN, 0 },
		};
		uint64_t now = com_clock_ms();
		int n, r;

		if (now >= deadline_ms) {
			/* Connected, and still no handshake: the daemon
			 * could not read ours. */
			if (c->curve && c->connected)
				c->why = CLIENT_NO_ANSWER;
			return 0;
		}
		n = zmq_poll(items, c->monitor != NULL ? 2 : 1,
		    (long)(deadline_ms - now));
		if (n < 0 && zmq_errno() != EINTR)
			return BELLOWS_EIO;
		if (n > 0 && (items[1].revents & ZMQ_POLLIN) &&
		    (r = client_events(c)) != 0)
			return r;
		if (n > 0 && (items[0].revents & ZMQ_POLLIN))
			return 1;
	}
}

int
tool_client_request(tool_client *c, const com_msg *req, uint32_t timeout_ms,
    com_msg *ret_reply)
{
	uint64_t deadline = com_clock_ms() + timeout_ms;
	uint8_t *buf = NULL;
	size_t len = 0;
	zmq_msg_t frame;
	com_msg reply;
	int r;

	c->why = "";
	if ((r = com_wire_encode(req, &buf, &len)) != 0)
		return r;
	/* The DEALER queues the request until the connection is up, so a
	 * daemon that is still starting gets it; a blocked send would mean
	 * the queue is full, which for one request is a broken socket. */
	r = zmq_send(c->sock, buf, len, ZMQ_DONTWAIT);
	free(buf);
	if (r < 0)
		return zmq_errno() == EAGAIN ? BELLOWS_ETIMEDOUT : BELLOWS_EIO;
	r = client_wait(c, deadline);
	if (r <= 0)
		return r == 0 ? BELLOWS_ETIMEDOUT : r;
	zmq_msg_init(&frame);
	if (zmq_msg_recv(&frame, c->sock, ZMQ_DONTWAIT) < 0) {
		zmq_msg_close(&frame);
		return BELLOWS_EIO;
	}
	r = com_wire_decode(zmq_msg_data(&frame), zmq_msg_size(&frame),
	    &c->limits, &reply);
	zmq_msg_close(&frame);
	if (r != 0) {
		com_msg_fini(&reply);
		return r;
	}
	*ret_reply = reply;
	return 0;
}

/* ---- telemetry ----------------------------------------------------------- */

struct tool_telemetry {
	void *ctx;         /* ZeroMQ context, owned */
	void *sub;         /* SUB to bellowsd's PUB */
	bool curve;        /* keys: jobs are followed by name */
	com_limits limits; /* what a telemetry message may be */
	char **topics;     /* CURVE: "t:<job>" subscribed, owned */
	uint32_t n_topics; /* entries in topics */
};

int
tool_telemetry_open(const char *endpoint, const tool_keys *keys, int hwm,
    tool_telemetry **ret)
{
	tool_telemetry *t = calloc(1, sizeof(*t));
	int linger = 0, r;
	int64_t maxsize;

	if (t == NULL)
		return BELLOWS_ENOMEM;
	com_limits_default(&t->limits);
	maxsize = (int64_t)t->limits.max_msg_bytes;
	t->curve = keys != NULL && keys->curve;
	t->ctx = zmq_ctx_new();
	if (t->ctx == NULL || (t->sub = zmq_socket(t->ctx, ZMQ_SUB)) == NULL) {
		r = BELLOWS_ESYS;
		goto fail;
	}
	zmq_setsockopt(t->sub, ZMQ_LINGER, &linger, sizeof(linger));
	zmq_setsockopt(t->sub, ZMQ_RCVHWM, &hwm, sizeof(hwm));
	zmq_setsockopt(t->sub, ZMQ_MAXMSGSIZE, &maxsize, sizeof(maxsize));
	/* Every job's telemetry: the topics are "t:<job>\0". A secured
	 * bellowsd takes that prefix only from a client that may read
	 * every job: with keys, jobs are followed by name instead. */
	if (!t->curve)
		zmq_setsockopt(t->sub, ZMQ_SUBSCRIBE, "t:", 2);
	if ((r = tool_client_curve(t->sub, keys)) != 0)
		goto fail;
	if (zmq_connect(t->sub, endpoint) != 0) {
		r = BELLOWS_EINVAL;
		goto fail;
	}
	*ret = t;
	return 0;
fail:
	tool_telemetry_close(&t);
	return r;
}

void
tool_telemetry_close(tool_telemetry **tp)
{
	tool_telemetry *t;

	if (tp == NULL || *tp == NULL)
		return;
	t = *tp;
	if (t->sub != NULL)
		zmq_close(t->sub);
	if (t->ctx != NULL)
		zmq_ctx_term(t->ctx);
	for (uint32_t i = 0; i < t->n_topics; i++)
		free(t->topics[i]);
	free(t->topics);
	free(t);
	*tp = NULL;
}

int
tool_telemetry_follow(tool_telemetry *t, const char *job)
{
	size_t len = strlen(job) + 3;
	char *topic, **grown;

	if (!t->curve)
		return 0;
	for (uint32_t k = 0; k < t->n_topics; k++)
		if (strcmp(t->topics[k] + 2, job) == 0)
			return 0;
	if (t->n_topics >= TOOL_TELEMETRY_MAX_JOBS)
		return BELLOWS_ELIMIT;
	grown = realloc(t->topics, (t->n_topics + 1) * sizeof(*grown));
	if (grown == NULL)
		return BELLOWS_ENOMEM;
	t->topics = grown;
	if ((topic = malloc(len)) == NULL)
		return BELLOWS_ENOMEM;
	/* "t:<job>" and its NUL: the topic frame holds the NUL. */
	snprintf(topic, len, "t:%s", job);
	zmq_setsockopt(t->sub, ZMQ_SUBSCRIBE, topic, len);
	t->topics[t->n_topics++] = topic;
	return 0;
}

int
tool_telemetry_wait(tool_telemetry *t, int fd, int timeout_ms,
    tool_telemetry_fn *fn, void *arg, bool *ret_fd)
{
	zmq_pollitem_t items[2];
	int n = 0, fd_at = -1, sub_at = -1, r;

	*ret_fd = false;
	if (fd >= 0) {
		items[n] = (zmq_pollitem_t){ NULL, fd, ZMQ_POLLIN, 0 };
		fd_at = n++;
	}
	if (t != NULL) {
		items[n] = (zmq_pollitem_t){ t->sub, 0, ZMQ_POLLIN, 0 };
		sub_at = n++;
	}
	r = zmq_poll(items, n, timeout_ms);
	if (r < 0)
		return zmq_errno() == EINTR ? 0 : BELLOWS_EIO;
	if (fd_at >= 0 && (items[fd_at].revents & ZMQ_POLLIN))
		*ret_fd = true;
	if (sub_at < 0 || !(items[sub_at].revents & ZMQ_POLLIN))
		return 0;
	/* A message is a topic frame and an Envelope: the last frame is
	 * the one decoded. */
	for (int i = 0; i < TOOL_TELEMETRY_DRAIN; i++) {
		zmq_msg_t part;
		int more = 0;
		size_t more_len = sizeof(more);

		zmq_msg_init(&part);
		if (zmq_msg_recv(&part, t->sub, ZMQ_DONTWAIT) < 0) {
			zmq_msg_close(&part);
			break;
		}
		zmq_getsockopt(t->sub, ZMQ_RCVMORE, &more, &more_len);
		if (!more) {
			com_msg m;

			if (com_wire_decode(zmq_msg_data(&part),
				zmq_msg_size(&part), &t->limits, &m) == 0 &&
			    m.type == COM_MSG_TELEMETRY && fn != NULL)
				fn(arg, &m);
			com_msg_fini(&m);
		}
		zmq_msg_close(&part);
	}
	return 0;
}
