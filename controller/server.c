/* server - ROUTER/PUB handling and per-peer drop accounting, see server.h.
 */
#include "server.h"

#include "common/clock.h"
#include "common/wire_arena.h"
#include "common/zmonitor.h"
#include "policyhost/log.h"

#include <bellows/error.h>
#include <bellows/policy.h>

#include <arpa/inet.h>
#include <errno.h>
#include <sys/socket.h>
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
#define SERVER_ZAP_EP      "inproc://zeromq.zap.01" /* RFC 27's address */
#define SERVER_ZAP_DOMAIN  "bellows" /* ZAP domain of both sockets */
#define SERVER_ZAP_FRAMES  8         /* frames of a ZAP request read at most */
#define SERVER_ZAP_LOG_MS  10000     /* one refusal line per this long */
#define SERVER_CLIENT_MAX  256       /* bytes of a client name and its NUL */
#define SERVER_KEY_PROP    "X-Bellows-Key" /* ZAP metadata: the key, Z85 */
#define SERVER_SUBCONN_MAX 65536           /* subscriber connections tracked */
#define SERVER_GRANTS_MAX  65536 /* (connection, client, topic) kept */

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
	void *router;          /* control socket */
	void *pub;             /* publish socket */
	com_limits limits;     /* decode limits */
	com_arena *arena;      /* protobuf-c's memory while decoding */
	ctl_jobs *jobs;        /* dispatch target (borrowed) */
	ctl_store *store;      /* history, for STATUS (borrowed) */
	uint64_t instance;     /* daemon run id */
	uint64_t started_ms;   /* monotonic start */
	server_peer *peers;    /* drop records */
	uint32_t n_peers;      /* entries used */
	uint64_t messages;     /* frames received */
	uint64_t dropped;      /* messages dropped */
	uint64_t pub_dropped;  /* publications that failed */
	int pub_hwm;           /* ZMQ_SNDHWM of the PUB, in messages */
	int reply_hwm;         /* ZMQ_SNDHWM of the ROUTER, in messages */
	bool secure;           /* both sockets are CURVE servers */
	void *zap;             /* ZAP handler's REP, NULL without security */
	ctl_client_key *keys;  /* trusted public keys (a copy, see
				* ctl_server_set_clients) */
	uint32_t n_keys;       /* entries in keys */
	uint64_t zap_accepted; /* connections authenticated */
	uint64_t zap_refused;  /* connections refused */
	uint64_t zap_log_ms;   /* when a refusal was last logged */
	uint64_t zap_unlogged; /* refusals not logged since */
	uint64_t subs_refused; /* subscriptions not applied */
	uint64_t sub_log_ms;   /* when one was last logged */
	void *pubmon;          /* PAIR reading the XPUB's connection events */
	int *subconn;          /* descriptors of the XPUB's connections */
	uint32_t n_subconn;    /* entries used */
	char **grants;         /* "CLIENT\0KEY\0TOPIC" of each subscription
				* applied and its connection still open */
	uint32_t *grant_len;   /* bytes of each */
	int *grant_fd;         /* the descriptor of each one's connection
				* (ZMQ_SRCFD), -1: not known */
	uint32_t n_grants;     /* entries used */
	bool grants_lost;      /* a grant could not be kept: the next reload
				* resets every subscriber */
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

/* Makes `sock` a CURVE server with the daemon's secret key whose
 * connections the ZAP handler authenticates. Before bind: a listener's
 * options are what its connections get. */
static int
server_curve(void *sock, const ctl_security_conf *sec)
{
	int one = 1;

	if (zmq_setsockopt(sock, ZMQ_CURVE_SERVER, &one, sizeof(one)) != 0 ||
	    zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY,
		sec->server_cert.secret_key,
		strlen(sec->server_cert.secret_key)) != 0 ||
	    zmq_setsockopt(sock, ZMQ_ZAP_DOMAIN, SERVER_ZAP_DOMAIN,
		strlen(SERVER_ZAP_DOMAIN)) != 0)
		return ctl_log_fail(BELLOWS_ENOTSUP, CTL_LOG_ERROR, "server",
		    "cannot make a CURVE server: %s (is libzmq built with "
		    "CURVE?)",
		    zmq_strerror(zmq_errno()));
	return 0;
}

/* Watches the XPUB's connections (server_pubmon_drain): with security a
 * reload that withdraws a subscription closes them. */
static int
server_pubmon_open(ctl_server *s, void *zctx)
{
	s->subconn = calloc(SERVER_SUBCONN_MAX, sizeof(*s->subconn));
	s->grants = calloc(SERVER_GRANTS_MAX, sizeof(*s->grants));
	s->grant_len = calloc(SERVER_GRANTS_MAX, sizeof(*s->grant_len));
	s->grant_fd = calloc(SERVER_GRANTS_MAX, sizeof(*s->grant_fd));
	if (s->subconn == NULL || s->grants == NULL || s->grant_len == NULL ||
	    s->grant_fd == NULL)
		return BELLOWS_ENOMEM;
	if (com_monitor_open(zctx, s->pub,
		ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_CLOSED,
		"pubmon", &s->pubmon) != 0)
		return ctl_log_fail(BELLOWS_ESYS, CTL_LOG_ERROR, "server",
		    "cannot watch the publish socket: %s",
		    zmq_strerror(zmq_errno()));
	return 0;
}

int
ctl_server_open(void *zctx, const char *control, const char *publish,
    const com_limits *limits, uint32_t queue_mb, uint32_t max_layers,
    uint64_t instance, const ctl_security_conf *security,
    ctl_server **ret_server)
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
	if ((r = com_arena_new(0, &s->arena)) != 0)
		goto fail;
	s->router = zmq_socket(zctx, ZMQ_ROUTER);
	/* With security an XPUB in manual mode: each subscription comes to
	 * the loop with its connection's User-Id, and only those the
	 * client may read are applied (server_on_subscription). */
	s->pub = zmq_socket(zctx,
	    security != NULL && security->enabled ? ZMQ_XPUB : ZMQ_PUB);
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
	if (security != NULL && security->enabled) {
		/* The ZAP handler is a REP socket the event loop polls,
		 * like the ROUTER: libzmq's I/O threads ask it about each
		 * new connection and wait for the answer, which then costs
		 * one loop turn at most. On the loop thread it reads the
		 * key table with no lock and no hand-over, and a reload
		 * swaps the table between two requests. It is bound before
		 * the endpoints so that no connection is ever accepted
		 * unasked (libzmq lets CURVE through when no handler is
		 * bound). */
		s->secure = true;
		s->zap = zmq_socket(zctx, ZMQ_REP);
		if (s->zap == NULL) {
			r = BELLOWS_ESYS;
			goto fail;
		}
		zmq_setsockopt(s->zap, ZMQ_LINGER, &linger, sizeof(linger));
		zmq_setsockopt(s->pub, ZMQ_XPUB_MANUAL, &(int){ 1 },
		    sizeof(int));
		if ((r = server_bind(s->zap, SERVER_ZAP_EP, "ZAP")) != 0 ||
		    (r = ctl_server_set_clients(s, security)) != 0 ||
		    (r = server_pubmon_open(s, zctx)) != 0 ||
		    (r = server_curve(s->router, security)) != 0 ||
		    (r = server_curve(s->pub, security)) != 0)
			goto fail;
	}
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
	com_arena_destroy(&s->arena);
	com_monitor_close(s->pub, &s->pubmon); /* before the XPUB */
	if (s->router != NULL)
		zmq_close(s->router);
	if (s->pub != NULL)
		zmq_close(s->pub);
	if (s->zap != NULL)
		zmq_close(s->zap);
	for (uint32_t i = 0; i < s->n_grants; i++)
		free(s->grants[i]);
	free(s->grants);
	free(s->grant_len);
	free(s->grant_fd);
	free(s->subconn);
	ctl_config_keys_free(s->keys, s->n_keys);
	free(s->peers);
	free(s);
	*server = NULL;
}

void
ctl_server_counts(const ctl_server *s, uint64_t *ret_messages,
    uint64_t *ret_dropped, uint64_t *ret_pub_dropped)
{
	if (ret_messages != NULL)
		*ret_messages = s->messages;
	if (ret_dropped != NULL)
		*ret_dropped = s->dropped;
	if (ret_pub_dropped != NULL)
		*ret_pub_dropped = s->pub_dropped;
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

static void server_grants_recheck(ctl_server *s);

int
ctl_server_set_clients(ctl_server *s, const ctl_security_conf *sec)
{
	ctl_client_key *keys;
	uint32_t n;

	/* A file without security cannot turn the sockets' off: the keys
	 * in force stay until a restart (main logs it). */
	if (!s->secure || sec == NULL || !sec->enabled)
		return 0;
	n = sec->n_clients;
	keys = calloc(n > 0 ? n : 1, sizeof(*keys));
	if (keys == NULL)
		return BELLOWS_ENOMEM;
	for (uint32_t i = 0; i < n; i++) {
		keys[i] = sec->keys[i];
		if ((keys[i].name = strdup(sec->keys[i].name)) == NULL) {
			ctl_config_keys_free(keys, i);
			return BELLOWS_ENOMEM;
		}
	}
	ctl_config_keys_free(s->keys, s->n_keys);
	s->keys = keys;
	s->n_keys = n;
	if (s->pubmon != NULL)
		server_grants_recheck(s);
	return 0;
}

bool
ctl_server_endpoint_local(const char *ep)
{
	const char *host, *end;
	char h[256];
	struct in_addr a4;
	size_t len;

	if (strncmp(ep, "ipc://", 6) == 0 || strncmp(ep, "inproc://", 9) == 0)
		return true;
	if (strncmp(ep, "tcp://", 6) != 0)
		return false; /* pgm, udp, ws...: a network */
	host = ep + 6;
	/* tcp://[::1]:5555, tcp://127.0.0.1:5555, tcp://localhost:5555;
	 * "tcp://eth0;..." or a wildcard are not local. */
	if (host[0] == '[') {
		end = strchr(host, ']');
		if (end == NULL)
			return false;
		host++;
	} else {
		end = strrchr(host, ':');
		if (end == NULL)
			end = host + strlen(host);
	}
	len = (size_t)(end - host);
	if (len == 0 || len >= sizeof(h))
		return false;
	memcpy(h, host, len);
	h[len] = '\0';
	if (strchr(h, ';') != NULL)
		return false;
	if (strcmp(h, "localhost") == 0 || strcmp(h, "::1") == 0)
		return true;
	if (inet_pton(AF_INET, h, &a4) == 1)
		return (ntohl(a4.s_addr) >> 24) == 127;
	return false;
}

/* The name of the trusted client with this 32-byte public key, or NULL. */
static const char *
server_client_of(const ctl_server *s, const uint8_t *key)
{
	char z85[COM_CERT_Z85];

	if (zmq_z85_encode(z85, key, 32) == NULL)
		return NULL;
	for (uint32_t i = 0; i < s->n_keys; i++) {
		if (strcmp(s->keys[i].public_key, z85) == 0)
			return s->keys[i].name;
	}
	return NULL;
}

/* Answers one ZAP request (RFC 27): version, request id, domain,
 * address, routing id, mechanism, then the mechanism's credentials (for
 * CURVE the client's 32-byte public key). 200 with User-Id = the
 * client's NAME for a key of the clients directory, 400 otherwise (any
 * other mechanism or domain included). */
static void
server_zap_one(ctl_server *s)
{
	zmq_msg_t f[SERVER_ZAP_FRAMES];
	int n = 0, more = 1;
	size_t more_len = sizeof(more);
	const char *client = NULL, *status = "400", *text = "unknown key";
	char addr[64] = "?";

	for (; more && n < SERVER_ZAP_FRAMES; n++) {
		zmq_msg_init(&f[n]);
		if (zmq_msg_recv(&f[n], s->zap, ZMQ_DONTWAIT) < 0) {
			zmq_msg_close(&f[n]);
			goto out;
		}
		zmq_getsockopt(s->zap, ZMQ_RCVMORE, &more, &more_len);
	}
	while (more) { /* more frames than any request has: drained */
		zmq_msg_t extra;

		zmq_msg_init(&extra);
		zmq_msg_recv(&extra, s->zap, 0);
		zmq_msg_close(&extra);
		zmq_getsockopt(s->zap, ZMQ_RCVMORE, &more, &more_len);
	}
	if (n == 0)
		goto out; /* nothing asked: nothing to answer */
	/* Anything received is answered: a REP that does not answer cannot
	 * read the next request. */
	if (n >= 4) {
		size_t alen = zmq_msg_size(&f[3]);

		if (alen >= sizeof(addr))
			alen = sizeof(addr) - 1;
		memcpy(addr, zmq_msg_data(&f[3]), alen);
		addr[alen] = '\0';
	}
	if (n == 7 && zmq_msg_size(&f[5]) == 5 &&
	    memcmp(zmq_msg_data(&f[5]), "CURVE", 5) == 0 &&
	    zmq_msg_size(&f[6]) == 32)
		client = server_client_of(s, zmq_msg_data(&f[6]));
	else
		text = "CURVE required";
	if (client != NULL) {
		status = "200";
		text = "OK";
		s->zap_accepted++;
	} else {
		uint64_t now = com_clock_ms();

		s->zap_refused++;
		if (s->zap_log_ms == 0 ||
		    now - s->zap_log_ms >= SERVER_ZAP_LOG_MS) {
			ctl_log(CTL_LOG_WARN, "server",
			    "refused a connection from %s: %s (%" PRIu64
			    " refused, %" PRIu64 " not logged)",
			    addr, text, s->zap_refused, s->zap_unlogged);
			s->zap_log_ms = now;
			s->zap_unlogged = 0;
		} else {
			s->zap_unlogged++;
		}
	}
	/* Never blocks: a REP that was just asked can always answer. */
	zmq_send(s->zap, "1.0", 3, ZMQ_SNDMORE | ZMQ_DONTWAIT);
	zmq_send(s->zap, n >= 2 ? zmq_msg_data(&f[1]) : "",
	    n >= 2 ? zmq_msg_size(&f[1]) : 0, ZMQ_SNDMORE | ZMQ_DONTWAIT);
	zmq_send(s->zap, status, 3, ZMQ_SNDMORE | ZMQ_DONTWAIT);
	zmq_send(s->zap, text, strlen(text), ZMQ_SNDMORE | ZMQ_DONTWAIT);
	zmq_send(s->zap, client != NULL ? client : "",
	    client != NULL ? strlen(client) : 0, ZMQ_SNDMORE | ZMQ_DONTWAIT);
	/* Metadata (ZMTP properties): the key the connection proved, so
	 * that each message tells which key of its name it came with. */
	if (client != NULL) {
		uint8_t meta[1 + sizeof(SERVER_KEY_PROP) - 1 + 4 + 40];
		size_t np = sizeof(SERVER_KEY_PROP) - 1;
		char z85[COM_CERT_Z85];

		zmq_z85_encode(z85, zmq_msg_data(&f[6]), 32);
		meta[0] = (uint8_t)np;
		memcpy(meta + 1, SERVER_KEY_PROP, np);
		memcpy(meta + 1 + np, "\0\0\0\x28", 4); /* 40, big-endian */
		memcpy(meta + 5 + np, z85, 40);
		zmq_send(s->zap, meta, sizeof(meta), ZMQ_DONTWAIT);
	} else {
		zmq_send(s->zap, "", 0, ZMQ_DONTWAIT);
	}
out:
	for (int i = 0; i < n; i++)
		zmq_msg_close(&f[i]);
}

/* Logs a refused subscription, at most once per SERVER_ZAP_LOG_MS. */
static void
server_sub_refused(ctl_server *s, const char *client, const uint8_t *topic,
    size_t len)
{
	uint64_t now = com_clock_ms();
	char text[SERVER_TOPIC_MAX];
	size_t k = 0;

	s->subs_refused++;
	if (s->sub_log_ms != 0 && now - s->sub_log_ms < SERVER_ZAP_LOG_MS)
		return;
	s->sub_log_ms = now;
	for (size_t i = 0; i < len && k + 1 < sizeof(text); i++)
		text[k++] = topic[i] >= 0x20 && topic[i] < 0x7f ? (char)topic[i]
								: '.';
	text[k] = '\0';
	ctl_log(CTL_LOG_WARN, "server",
	    "client '%s' may not subscribe to '%s': not applied (%" PRIu64
	    " subscriptions refused)",
	    client != NULL ? client : "?", text, s->subs_refused);
}

/* True when a subscriber named `client` may have subscription `topic`
 * (len bytes): "d:JOB\0" or "t:JOB\0" when it may read JOB; any other
 * prefix (a dashboard's "t:", or "") only when it may read every job. */
static bool
server_topic_allowed(const ctl_server *s, const uint8_t *topic, size_t len,
    const char *client)
{
	char job[SERVER_TOPIC_MAX];

	if (s->jobs == NULL)
		return false;
	if (len >= 3 && len - 2 < sizeof(job) && topic[1] == ':' &&
	    (topic[0] == 'd' || topic[0] == 't') && topic[len - 1] == '\0' &&
	    memchr(topic + 2, '\0', len - 3) == NULL) {
		memcpy(job, topic + 2, len - 2);
		return ctl_jobs_client_may_read(s->jobs, job, client);
	}
	return ctl_jobs_client_may_read(s->jobs, NULL, client);
}

/* True when `name` is still the name of a trusted key (the keys are
 * sorted by name), and when `key` (Z85, NULL: not checked) is still its
 * key: a connection keeps the name the ZAP handler gave it when its key
 * is removed or replaced, so every message is checked again. */
static bool
server_name_trusted(const ctl_server *s, const char *name, const char *key)
{
	uint32_t lo = 0, hi = s->n_keys;

	while (name != NULL && lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		int c = strcmp(s->keys[mid].name, name);

		if (c == 0)
			return key == NULL ||
			    strcmp(s->keys[mid].public_key, key) == 0;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return false;
}

/* Forgets the grants of the connection on descriptor fd, which closed:
 * its subscriptions went with it. */
static void
server_grants_forget(ctl_server *s, int fd)
{
	for (uint32_t i = 0; i < s->n_grants; i++) {
		if (s->grant_fd[i] != fd)
			continue;
		free(s->grants[i]);
		s->n_grants--;
		s->grants[i] = s->grants[s->n_grants];
		s->grant_len[i] = s->grant_len[s->n_grants];
		s->grant_fd[i] = s->grant_fd[s->n_grants];
		i--;
	}
}

/* Reads the XPUB's connection events: the descriptors of its live
 * connections, which server_subscribers_reset shuts down, and the grants
 * of those that closed, forgotten. */
static void
server_pubmon_drain(ctl_server *s)
{
	for (;;) {
		zmq_msg_t ev, ep;
		uint16_t event = 0;
		int32_t fd = -1;

		zmq_msg_init(&ev);
		if (zmq_msg_recv(&ev, s->pubmon, ZMQ_DONTWAIT) < 0) {
			zmq_msg_close(&ev);
			return;
		}
		if (zmq_msg_size(&ev) >= 6) {
			memcpy(&event, zmq_msg_data(&ev), 2);
			memcpy(&fd, (uint8_t *)zmq_msg_data(&ev) + 2, 4);
		}
		zmq_msg_close(&ev);
		zmq_msg_init(&ep); /* the endpoint, always a second frame */
		zmq_msg_recv(&ep, s->pubmon, 0);
		zmq_msg_close(&ep);
		for (uint32_t i = 0; i < s->n_subconn; i++) {
			if (s->subconn[i] == fd)
				s->subconn[i--] = s->subconn[--s->n_subconn];
		}
		if (event != ZMQ_EVENT_ACCEPTED && fd >= 0)
			server_grants_forget(s, fd);
		if (event == ZMQ_EVENT_ACCEPTED && fd >= 0 &&
		    s->n_subconn < SERVER_SUBCONN_MAX)
			s->subconn[s->n_subconn++] = fd;
	}
}

static void
server_on_pubmon(ctl_loop *loop, void *arg)
{
	(void)loop;
	server_pubmon_drain(arg);
}

/* Closes every connection of the XPUB, which drops their subscriptions
 * (libzmq cannot drop one connection's subscriptions, only close it):
 * the fallback of server_grants_recheck when it cannot tell which
 * connections hold a withdrawn grant. Subscribers reconnect on their
 * own and subscribe again, decided by the rules in force; a client no
 * longer trusted fails the handshake. Returns the connections closed. */
static uint32_t
server_subscribers_reset(ctl_server *s)
{
	uint32_t n = 0;

	server_pubmon_drain(s);
	for (uint32_t i = 0; i < s->n_subconn; i++)
		n += shutdown(s->subconn[i], SHUT_RDWR) == 0;
	for (uint32_t i = 0; i < s->n_grants; i++)
		free(s->grants[i]);
	s->n_grants = 0;
	s->grants_lost = false;
	return n;
}

/* Remembers that `client`, connected with `key` (Z85, NULL: unknown) on
 * descriptor fd (-1: unknown), was granted subscription `topic` (len
 * bytes), once per distinct quadruple, as "CLIENT\0KEY\0TOPIC", so that
 * a reload can tell whether a grant was withdrawn, and from which
 * connection. */
static void
server_grant_keep(ctl_server *s, int fd, const char *client, const char *key,
    const uint8_t *topic, size_t len)
{
	const char *k = key != NULL ? key : "";
	size_t cl = strlen(client), kl = strlen(k);
	size_t total = cl + 1 + kl + 1 + len;
	char *g;

	for (uint32_t i = 0; i < s->n_grants; i++) {
		if (s->grant_fd[i] == fd && s->grant_len[i] == total &&
		    memcmp(s->grants[i], client, cl + 1) == 0 &&
		    memcmp(s->grants[i] + cl + 1, k, kl + 1) == 0 &&
		    memcmp(s->grants[i] + cl + kl + 2, topic, len) == 0)
			return;
	}
	if (s->n_grants == SERVER_GRANTS_MAX || (g = malloc(total)) == NULL) {
		s->grants_lost = true;
		return;
	}
	memcpy(g, client, cl + 1);
	memcpy(g + cl + 1, k, kl + 1);
	memcpy(g + cl + kl + 2, topic, len);
	s->grants[s->n_grants] = g;
	s->grant_fd[s->n_grants] = fd;
	s->grant_len[s->n_grants++] = (uint32_t)total;
}

/* True when grant i is no longer allowed: its client's key removed or
 * replaced, or the client taken off the job. */
static bool
server_grant_withdrawn(const ctl_server *s, uint32_t i)
{
	const char *client = s->grants[i];
	const char *key = client + strlen(client) + 1;
	size_t head = strlen(client) + strlen(key) + 2;

	return !server_name_trusted(s, client, key[0] != '\0' ? key : NULL) ||
	    !server_topic_allowed(s, (uint8_t *)s->grants[i] + head,
		s->grant_len[i] - head, client);
}

static int
server_fd_cmp(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	return (x > y) - (x < y);
}

/* Sorts the n descriptors in fds and drops repeats; returns how many
 * are left. */
static uint32_t
server_fds_unique(int *fds, uint32_t n)
{
	uint32_t u = 0;

	qsort(fds, n, sizeof(*fds), server_fd_cmp);
	for (uint32_t i = 0; i < n; i++) {
		if (u == 0 || fds[i] != fds[u - 1])
			fds[u++] = fds[i];
	}
	return u;
}

/* True when every one of the n sorted, distinct descriptors in fds is a
 * live connection of the XPUB. */
static bool
server_fds_open(const ctl_server *s, const int *fds, uint32_t n)
{
	uint32_t found = 0;

	for (uint32_t i = 0; i < s->n_subconn; i++)
		found += bsearch(&s->subconn[i], fds, n, sizeof(*fds),
			     server_fd_cmp) != NULL;
	return found == n;
}

/* Shuts down the connections of the n sorted, distinct descriptors in
 * fds and drops every grant of theirs. Returns the connections shut
 * down. */
static uint32_t
server_grants_cut(ctl_server *s, const int *fds, uint32_t n)
{
	uint32_t cut = 0, kept = 0;

	for (uint32_t i = 0; i < n; i++)
		cut += shutdown(fds[i], SHUT_RDWR) == 0;
	for (uint32_t i = 0; i < s->n_grants; i++) {
		if (bsearch(&s->grant_fd[i], fds, n, sizeof(*fds),
			server_fd_cmp) != NULL) {
			free(s->grants[i]);
			continue;
		}
		s->grants[kept] = s->grants[i];
		s->grant_len[kept] = s->grant_len[i];
		s->grant_fd[kept++] = s->grant_fd[i];
	}
	s->n_grants = kept;
	return cut;
}

/* After a reload: closes the connections that hold a subscription
 * granted before and no longer allowed, and only those. Each grant
 * knows its connection's descriptor (ZMQ_SRCFD, which libzmq 4.3 keeps
 * in the metadata of an XPUB's subscription message), the monitor says
 * which descriptors are the XPUB's live connections; the subscriber of a
 * closed one reconnects and subscribes again under the new rules. When
 * a withdrawn grant's connection is not known (a grant not kept, no
 * descriptor, one the monitor does not list) or memory runs out, every
 * subscriber connection is reset instead (server_subscribers_reset):
 * failing closed. */
static void
server_grants_recheck(ctl_server *s)
{
	bool all = s->grants_lost;
	uint32_t n = 0;
	int *fds;

	server_pubmon_drain(s);
	if ((fds = malloc((s->n_grants + 1) * sizeof(*fds))) == NULL)
		all = true;
	for (uint32_t i = 0; i < s->n_grants && !all; i++) {
		if (!server_grant_withdrawn(s, i))
			continue;
		all = s->grant_fd[i] < 0;
		fds[n++] = s->grant_fd[i];
	}
	if (!all && n > 0) {
		n = server_fds_unique(fds, n);
		all = !server_fds_open(s, fds, n);
	}
	if (all) {
		free(fds);
		n = server_subscribers_reset(s);
		ctl_log(CTL_LOG_WARN, "server",
		    "a subscriber's key or job was withdrawn: closed all %u "
		    "subscriber connections; they subscribe again under the "
		    "new rules",
		    n);
		return;
	}
	if (n > 0) {
		n = server_grants_cut(s, fds, n);
		ctl_log(CTL_LOG_WARN, "server",
		    "a subscriber's key or job was withdrawn: closed %u of %u "
		    "subscriber connections, those holding it; they subscribe "
		    "again under the new rules",
		    n, s->n_subconn);
	}
	free(fds);
}

/* Reads the subscriptions the XPUB received and applies those allowed:
 * in manual mode libzmq applies a ZMQ_SUBSCRIBE to the connection whose
 * subscription message was read last, so each is decided as it is
 * read. Unsubscriptions are applied as they come. The connection events
 * are read first: a descriptor closed and taken again by a new
 * connection has its old grants forgotten before the new one's are kept
 * (libzmq queues the close's event before the descriptor can be
 * reused, and the new connection's subscription comes after its
 * handshake). */
static void
server_on_subscription(ctl_loop *loop, void *arg)
{
	ctl_server *s = arg;

	(void)loop;
	if (s->pubmon != NULL)
		server_pubmon_drain(s);
	for (int i = 0; i < SERVER_BATCH; i++) {
		zmq_msg_t m;
		const uint8_t *d;
		const char *uid, *key;
		size_t n;
		int fd;

		zmq_msg_init(&m);
		if (zmq_msg_recv(&m, s->pub, ZMQ_DONTWAIT) < 0) {
			zmq_msg_close(&m);
			break;
		}
		d = zmq_msg_data(&m);
		n = zmq_msg_size(&m);
		uid = zmq_msg_gets(&m, "User-Id");
		key = zmq_msg_gets(&m, SERVER_KEY_PROP);
		fd = zmq_msg_get(&m, ZMQ_SRCFD);
		if (n >= 1 && d[0] == 0) {
			zmq_setsockopt(s->pub, ZMQ_UNSUBSCRIBE, d + 1, n - 1);
		} else if (n >= 1 && d[0] == 1) {
			if (uid != NULL && server_name_trusted(s, uid, key) &&
			    server_topic_allowed(s, d + 1, n - 1, uid)) {
				zmq_setsockopt(s->pub, ZMQ_SUBSCRIBE, d + 1,
				    n - 1);
				server_grant_keep(s, fd, uid, key, d + 1,
				    n - 1);
			} else
				server_sub_refused(s, uid, d + 1, n - 1);
		}
		zmq_msg_close(&m);
	}
}

static void
server_on_zap(ctl_loop *loop, void *arg)
{
	ctl_server *s = arg;
	uint32_t events = 0;
	size_t len = sizeof(events);

	(void)loop;
	for (int i = 0; i < SERVER_BATCH; i++) {
		if (zmq_getsockopt(s->zap, ZMQ_EVENTS, &events, &len) != 0 ||
		    !(events & ZMQ_POLLIN))
			break;
		server_zap_one(s);
	}
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

	if (com_wire_encode(m, &buf, &n) != 0) {
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
server_status(ctl_server *s, const char *client, const com_status_request *req,
    com_msg *reply)
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
		if (ctl_jobs_status(s->jobs, client, req, now, st) != 0)
			return BELLOWS_ENOMEM;
	}
	if (ctl_store_status(s->store, st) != 0 ||
	    (st->store_path = strdup(ctl_store_path(s->store))) == NULL)
		return BELLOWS_ENOMEM;
	st->peers = calloc(s->n_peers ? s->n_peers : 1, sizeof(*st->peers));
	if (st->peers == NULL)
		return BELLOWS_ENOMEM;
	/* Other peers' drop reasons name their jobs: with security only a
	 * client that may read every job sees them. */
	if (s->secure &&
	    (s->jobs == NULL ||
		!ctl_jobs_client_may_read(s->jobs, NULL, client)))
		return 0;
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
server_dispatch(ctl_server *s, const uint8_t *id, size_t len,
    const char *client, com_msg *m)
{
	char why[256] = "";
	com_msg reply;
	uint64_t now = com_clock_ms();
	int r;

	com_msg_init(&reply, COM_MSG_NONE);
	switch (m->type) {
	case COM_MSG_HELLO:
		r = ctl_jobs_hello(s->jobs, id, len, client, &m->u.hello, now,
		    &reply, why, sizeof(why));
		break;
	case COM_MSG_REPORT:
		r = ctl_jobs_report(s->jobs, id, len, client, &m->u.report, now,
		    &reply, why, sizeof(why));
		break;
	case COM_MSG_HEARTBEAT:
		r = ctl_jobs_heartbeat(s->jobs, id, len, client,
		    &m->u.heartbeat, now, &reply, why, sizeof(why));
		break;
	case COM_MSG_BYE:
		r = ctl_jobs_bye(s->jobs, id, len, client, &m->u.bye, now, why,
		    sizeof(why));
		break;
	case COM_MSG_SNAPSHOT_REQUEST:
		r = ctl_jobs_snapshot(s->jobs, client, &m->u.snapshot_request,
		    &reply, why, sizeof(why));
		break;
	case COM_MSG_STATUS_REQUEST:
		r = server_status(s, client, &m->u.status_request, &reply);
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

/* Refuses a message of a connection whose client's key was removed since
 * it connected: an Error reply, and nothing else. */
static void
server_untrusted(ctl_server *s, const uint8_t *id, size_t len,
    const char *client)
{
	char why[SERVER_CLIENT_MAX + 64];
	com_msg reply;

	snprintf(why, sizeof(why), "client '%s' is no longer trusted", client);
	server_drop(s, id, len, BELLOWS_EPERM, why);
	com_msg_init(&reply, COM_MSG_ERROR);
	reply.u.error.code = BELLOWS_EPERM;
	reply.u.error.message = com_strdup(why);
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
	char client[SERVER_CLIENT_MAX] = "";
	const char *uid;
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
	/* The name the ZAP handler gave the connection (NULL without
	 * security): read from each message, so it is the connection's,
	 * never what the message claims. */
	uid = s->secure ? zmq_msg_gets(&body, "User-Id") : NULL;
	if (uid != NULL)
		snprintf(client, sizeof(client), "%s", uid);

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
	if (s->secure &&
	    !server_name_trusted(s, client,
		zmq_msg_gets(&body, SERVER_KEY_PROP))) {
		zmq_msg_close(&body);
		server_untrusted(s, id, id_len, client);
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
	r = com_wire_decode_arena(zmq_msg_data(&body), size, &s->limits,
	    s->arena, &m);
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
	server_dispatch(s, id, id_len, client[0] != '\0' ? client : NULL, &m);
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

uint32_t
ctl_server_drain(ctl_server *s, uint32_t quiet_ms, uint32_t max_ms,
    uint32_t max_msgs)
{
	uint64_t end = com_clock_ms() + max_ms;
	uint32_t n = 0;

	while (s != NULL && n < max_msgs) {
		zmq_pollitem_t it = { s->router, 0, ZMQ_POLLIN, 0 };
		uint64_t now;

		if (server_read_one(s)) {
			n++;
			continue;
		}
		if ((now = com_clock_ms()) >= end)
			break;
		if (zmq_poll(&it, 1,
			(long)(end - now < quiet_ms ? end - now : quiet_ms)) <=
		    0)
			break;
	}
	return n;
}

int
ctl_server_attach(ctl_server *s, ctl_loop *loop)
{
	int r;

	if (s->zap != NULL &&
	    ((r = ctl_loop_add_socket(loop, s->zap, server_on_zap, s)) != 0 ||
		(r = ctl_loop_add_socket(loop, s->pub, server_on_subscription,
		     s)) != 0 ||
		(r = ctl_loop_add_socket(loop, s->pubmon, server_on_pubmon,
		     s)) != 0))
		return r;
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
	if (com_wire_encode(m, &buf, &n) != 0) {
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
