/* test_agent - libbellows against a fake bellowsd over real sockets.
 *
 * The fake daemon is a thread of the test with a ROUTER and an XPUB bound
 * on loopback TCP (or ipc:// in a temporary folder), speaking the protocol
 * through the real codec: it welcomes Hellos with the decisions it holds,
 * acks heartbeats, answers snapshot requests, records every report, and
 * can be told to decide each window (after a delay), to refuse with an
 * Error, to change its instance, to say which windows are closed, or to
 * speak an older protocol minor. The XPUB shows the test when the
 * agent's subscription has arrived, so publications are not lost to the
 * slow-joiner effect unless a test wants them lost. It can be a CURVE
 * server (both sockets) with a ZAP handler of its own that accepts or
 * refuses every client key.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <zmq.h>

#include <bellows/agent.h>

#include "common/cert.h"
#include "common/wire.h"
#include "common/msg.h"

#define N_LAYERS 3
#define FAKE_MAX 64
#define WAIT_MS  3000

static uint64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* ---- log capture (the agent may log from its I/O thread) ---- */

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static char log_text[16384];
static size_t log_len;

static void
log_sink(void *arg, int level, const char *message)
{
	size_t n = strlen(message);

	(void)arg;
	(void)level;
	pthread_mutex_lock(&log_mu);
	if (log_len + n + 2 < sizeof(log_text)) {
		memcpy(log_text + log_len, message, n);
		log_len += n;
		log_text[log_len++] = '\n';
		log_text[log_len] = '\0';
	}
	pthread_mutex_unlock(&log_mu);
}

static void
log_reset(void)
{
	pthread_mutex_lock(&log_mu);
	log_len = 0;
	log_text[0] = '\0';
	pthread_mutex_unlock(&log_mu);
}

static bool
log_contains(const char *needle)
{
	bool found;

	pthread_mutex_lock(&log_mu);
	found = strstr(log_text, needle) != NULL;
	pthread_mutex_unlock(&log_mu);
	return found;
}

/* ---- the fake bellowsd ---- */

typedef struct fake {
	void *ctx;
	void *router;
	void *pub;
	void *zap; /* REP on inproc://zeromq.zap.01, or NULL */
	char control[256];
	char publish[256];
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cond;
	bool stop;

	/* Behaviour, set by the test under mu. */
	uint64_t instance;
	uint32_t apply_lag;
	bool silent;     /* answer nothing */
	bool garbage;    /* send junk before each Welcome */
	int hello_error; /* answer Hello with this Error */
	const char *hello_error_text;
	int heartbeat_error;      /* answer the next heartbeat with it, once */
	bool auto_decide;         /* decide every reported window */
	uint32_t decide_delay_ms; /* ... and publish this much later */
	double auto_level;        /* level of auto decisions */
	uint64_t windows_closed;  /* told in Welcome and HeartbeatAck */
	uint32_t minor;           /* protocol minor it speaks, 0: current */
	bool zap_refuse;          /* the ZAP handler answers 400 */

	/* Decisions made: seq = index + 1. */
	com_decision decisions[FAKE_MAX];
	uint32_t n_decisions;
	uint64_t publish_at[FAKE_MAX]; /* 0: published or never */

	/* What it saw. */
	uint32_t hellos;
	uint32_t heartbeats;
	uint32_t snapshot_requests;
	uint32_t byes;
	uint32_t subscriptions;
	uint32_t zap_requests;
	uint32_t bad;
	uint64_t hello_ms[FAKE_MAX];
	com_msg last_hello;
	com_msg reports[FAKE_MAX];
	uint32_t n_reports;
} fake;

static void
fake_reply(fake *f, const zmq_msg_t *id, const com_msg *m)
{
	com_msg v = *m;
	uint8_t *buf;
	size_t len;

	if (f->minor != 0)
		v.minor = f->minor;
	assert_int_equal(com_wire_encode(&v, &buf, &len), 0);
	zmq_send(f->router, zmq_msg_data((zmq_msg_t *)id),
	    zmq_msg_size((zmq_msg_t *)id), ZMQ_SNDMORE);
	zmq_send(f->router, buf, len, 0);
	free(buf);
}

static void
fake_error(fake *f, const zmq_msg_t *id, int code, const char *text)
{
	com_msg m;

	com_msg_init(&m, COM_MSG_ERROR);
	m.u.error.code = code;
	m.u.error.message = (char *)text;
	fake_reply(f, id, &m);
}

/* Makes decision seq n+1; the caller holds mu. */
static uint32_t
fake_decide(fake *f, uint64_t apply_step, uint64_t window, double level,
    uint64_t publish_at)
{
	uint32_t i = f->n_decisions;
	com_decision *d = &f->decisions[i];

	assert_true(i < FAKE_MAX);
	assert_int_equal(com_decision_init(d, "job", N_LAYERS), 0);
	d->seq = i + 1;
	d->apply_step = apply_step;
	d->window = window;
	for (uint32_t l = 0; l < N_LAYERS; l++) {
		d->level[l] = level;
		d->error_bound[l] = level / 10.0;
	}
	d->policy = strdup("fixed");
	d->reason = strdup("the test says so");
	f->publish_at[i] = publish_at;
	f->n_decisions++;
	return i;
}

static void
fake_publish(fake *f, uint32_t i)
{
	static const char topic[] = "d:job"; /* and its NUL */
	com_msg m;
	uint8_t *buf;
	size_t len;

	com_msg_init(&m, COM_MSG_DECISION);
	m.u.decision = f->decisions[i];
	assert_int_equal(com_wire_encode(&m, &buf, &len), 0);
	zmq_send(f->pub, topic, sizeof(topic), ZMQ_SNDMORE);
	zmq_send(f->pub, buf, len, 0);
	free(buf);
}

/* Frames no daemon should send: the agent must drop them all. */
static void
fake_junk(fake *f, const zmq_msg_t *id)
{
	static const char topic[] = "d:job";
	static const uint8_t junk[] = { 0xff, 0xff, 0xff, 0x01, 0x02 };
	void *peer = zmq_msg_data((zmq_msg_t *)id);
	size_t peer_len = zmq_msg_size((zmq_msg_t *)id);

	zmq_send(f->router, peer, peer_len, ZMQ_SNDMORE);
	zmq_send(f->router, junk, sizeof(junk), 0);
	zmq_send(f->router, peer, peer_len, ZMQ_SNDMORE);
	zmq_send(f->router, junk, sizeof(junk), ZMQ_SNDMORE);
	zmq_send(f->router, junk, sizeof(junk), 0);
	zmq_send(f->router, peer, peer_len, ZMQ_SNDMORE);
	zmq_send(f->router, "", 0, 0);
	zmq_send(f->pub, topic, sizeof(topic), ZMQ_SNDMORE);
	zmq_send(f->pub, junk, sizeof(junk), 0);
	zmq_send(f->pub, topic, sizeof(topic), 0);
	zmq_send(f->pub, topic, sizeof(topic), ZMQ_SNDMORE);
	zmq_send(f->pub, junk, sizeof(junk), ZMQ_SNDMORE);
	zmq_send(f->pub, junk, sizeof(junk), 0);
}

static void
fake_on_message(fake *f, const zmq_msg_t *id, com_msg *m)
{
	com_msg r;

	switch (m->type) {
	case COM_MSG_HELLO:
		if (f->hellos < FAKE_MAX)
			f->hello_ms[f->hellos] = now_ms();
		f->hellos++;
		com_msg_fini(&f->last_hello);
		f->last_hello = *m;
		com_msg_init(m, COM_MSG_NONE);
		if (f->silent)
			break;
		if (f->hello_error != 0) {
			fake_error(f, id, f->hello_error, f->hello_error_text);
			break;
		}
		if (f->garbage)
			fake_junk(f, id);
		com_msg_init(&r, COM_MSG_WELCOME);
		r.u.welcome.job = "job";
		r.u.welcome.rank = f->last_hello.u.hello.rank;
		r.u.welcome.apply_lag = f->apply_lag;
		r.u.welcome.instance = f->instance;
		r.u.welcome.windows_closed = f->windows_closed;
		r.u.welcome.n_decisions = f->n_decisions;
		r.u.welcome.decisions = f->decisions;
		fake_reply(f, id, &r);
		break;
	case COM_MSG_HEARTBEAT:
		f->heartbeats++;
		if (f->silent)
			break;
		if (f->heartbeat_error != 0) {
			fake_error(f, id, f->heartbeat_error, "who are you");
			f->heartbeat_error = 0;
			break;
		}
		com_msg_init(&r, COM_MSG_HEARTBEAT_ACK);
		r.u.heartbeat_ack.instance = f->instance;
		r.u.heartbeat_ack.last_seq = f->n_decisions;
		r.u.heartbeat_ack.windows_closed = f->windows_closed;
		fake_reply(f, id, &r);
		break;
	case COM_MSG_REPORT:
		if (f->auto_decide)
			fake_decide(f, m->u.report.last_step + 1 + f->apply_lag,
			    m->u.report.window + 1, f->auto_level,
			    now_ms() + f->decide_delay_ms);
		if (f->n_reports < FAKE_MAX) {
			f->reports[f->n_reports++] = *m;
			com_msg_init(m, COM_MSG_NONE);
		}
		break;
	case COM_MSG_SNAPSHOT_REQUEST:
		f->snapshot_requests++;
		if (f->silent)
			break;
		com_msg_init(&r, COM_MSG_SNAPSHOT);
		r.u.snapshot.job = "job";
		/* Only what has been published is part of the state. */
		r.u.snapshot.n_decisions = 0;
		while (r.u.snapshot.n_decisions < f->n_decisions &&
		    f->publish_at[r.u.snapshot.n_decisions] == 0)
			r.u.snapshot.n_decisions++;
		r.u.snapshot.decisions = f->decisions;
		fake_reply(f, id, &r);
		break;
	case COM_MSG_BYE:
		f->byes++;
		break;
	default:
		f->bad++;
		break;
	}
}

static void
fake_recv(fake *f)
{
	zmq_msg_t id;
	zmq_msg_t body;
	com_limits lim;
	com_msg m;

	zmq_msg_init(&id);
	zmq_msg_init(&body);
	if (zmq_msg_recv(&id, f->router, ZMQ_DONTWAIT) < 0 ||
	    !zmq_msg_more(&id) ||
	    zmq_msg_recv(&body, f->router, ZMQ_DONTWAIT) < 0) {
		zmq_msg_close(&id);
		zmq_msg_close(&body);
		return;
	}
	com_limits_default(&lim);
	pthread_mutex_lock(&f->mu);
	if (com_wire_decode(zmq_msg_data(&body), zmq_msg_size(&body), &lim,
		&m) != 0)
		f->bad++;
	else
		fake_on_message(f, &id, &m);
	com_msg_fini(&m);
	pthread_cond_broadcast(&f->cond);
	pthread_mutex_unlock(&f->mu);
	zmq_msg_close(&id);
	zmq_msg_close(&body);
}

/* Answers one ZAP request (RFC 27): 200 or, when told, 400. */
static void
fake_zap(fake *f)
{
	zmq_msg_t part[8];
	int n = 0;
	bool refuse;

	for (; n < 8; n++) {
		zmq_msg_init(&part[n]);
		if (zmq_msg_recv(&part[n], f->zap, ZMQ_DONTWAIT) < 0) {
			zmq_msg_close(&part[n]);
			break;
		}
		if (!zmq_msg_more(&part[n])) {
			n++;
			break;
		}
	}
	pthread_mutex_lock(&f->mu);
	refuse = f->zap_refuse;
	f->zap_requests++;
	pthread_cond_broadcast(&f->cond);
	pthread_mutex_unlock(&f->mu);
	if (n >= 2) {
		zmq_send(f->zap, "1.0", 3, ZMQ_SNDMORE);
		zmq_send(f->zap, zmq_msg_data(&part[1]), zmq_msg_size(&part[1]),
		    ZMQ_SNDMORE);
		zmq_send(f->zap, refuse ? "400" : "200", 3, ZMQ_SNDMORE);
		zmq_send(f->zap, refuse ? "unknown key" : "OK", refuse ? 11 : 2,
		    ZMQ_SNDMORE);
		zmq_send(f->zap, "", 0, ZMQ_SNDMORE);
		zmq_send(f->zap, "", 0, 0);
	}
	for (int i = 0; i < n; i++)
		zmq_msg_close(&part[i]);
}

static void *
fake_main(void *arg)
{
	fake *f = arg;

	for (;;) {
		zmq_pollitem_t items[3] = {
			{ f->router, 0, ZMQ_POLLIN, 0 },
			{ f->pub, 0, ZMQ_POLLIN, 0 },
			{ f->zap, 0, ZMQ_POLLIN, 0 },
		};
		uint64_t now;

		pthread_mutex_lock(&f->mu);
		if (f->stop) {
			pthread_mutex_unlock(&f->mu);
			break;
		}
		now = now_ms();
		/* Publish in seq order: a later one waits for the earlier. */
		for (uint32_t i = 0; i < f->n_decisions; i++) {
			if (f->publish_at[i] == 0)
				continue;
			if (f->publish_at[i] > now)
				break;
			fake_publish(f, i);
			f->publish_at[i] = 0;
		}
		pthread_mutex_unlock(&f->mu);

		if (zmq_poll(items, f->zap != NULL ? 3 : 2, 2) < 0)
			continue;
		if (f->zap != NULL && (items[2].revents & ZMQ_POLLIN))
			fake_zap(f);
		if (items[0].revents & ZMQ_POLLIN)
			fake_recv(f);
		if (items[1].revents & ZMQ_POLLIN) {
			zmq_msg_t sub;

			zmq_msg_init(&sub);
			if (zmq_msg_recv(&sub, f->pub, ZMQ_DONTWAIT) >= 0 &&
			    zmq_msg_size(&sub) > 0 &&
			    ((uint8_t *)zmq_msg_data(&sub))[0] == 1) {
				pthread_mutex_lock(&f->mu);
				f->subscriptions++;
				pthread_cond_broadcast(&f->cond);
				pthread_mutex_unlock(&f->mu);
			}
			zmq_msg_close(&sub);
		}
	}
	return NULL;
}

static void
fake_bind(void *socket, const char *endpoint, char *ret, size_t ret_len)
{
	int zero = 0;

	assert_int_equal(zmq_setsockopt(socket, ZMQ_LINGER, &zero,
			     sizeof(zero)),
	    0);
	assert_int_equal(zmq_bind(socket, endpoint), 0);
	assert_int_equal(zmq_getsockopt(socket, ZMQ_LAST_ENDPOINT, ret,
			     &ret_len),
	    0);
}

/* Starts a fake daemon on the given endpoints (tcp wildcards when NULL);
 * with `server` (a keypair) both sockets are CURVE servers and, with
 * `zap`, a ZAP handler decides which client keys may connect. */
static fake *
fake_start_with(const char *control, const char *publish,
    const com_cert *server, bool zap)
{
	fake *f = calloc(1, sizeof(*f));
	pthread_condattr_t attr;

	assert_non_null(f);
	pthread_mutex_init(&f->mu, NULL);
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&f->cond, &attr);
	pthread_condattr_destroy(&attr);
	f->instance = 0x1111;
	f->apply_lag = 1;
	f->auto_level = 4.0;
	com_msg_init(&f->last_hello, COM_MSG_NONE);
	f->ctx = zmq_ctx_new();
	f->router = zmq_socket(f->ctx, ZMQ_ROUTER);
	f->pub = zmq_socket(f->ctx, ZMQ_XPUB);
	if (zap) {
		int zero = 0;

		f->zap = zmq_socket(f->ctx, ZMQ_REP);
		zmq_setsockopt(f->zap, ZMQ_LINGER, &zero, sizeof(zero));
		assert_int_equal(zmq_bind(f->zap, "inproc://zeromq.zap.01"), 0);
	}
	if (server != NULL) {
		int one = 1;

		for (int i = 0; i < 2; i++) {
			void *sock = i == 0 ? f->router : f->pub;

			assert_int_equal(zmq_setsockopt(sock, ZMQ_CURVE_SERVER,
					     &one, sizeof(one)),
			    0);
			assert_int_equal(zmq_setsockopt(sock,
					     ZMQ_CURVE_SECRETKEY,
					     server->secret_key, 40),
			    0);
		}
	}
	fake_bind(f->router, control ? control : "tcp://127.0.0.1:*",
	    f->control, sizeof(f->control));
	fake_bind(f->pub, publish ? publish : "tcp://127.0.0.1:*", f->publish,
	    sizeof(f->publish));
	assert_int_equal(pthread_create(&f->thread, NULL, fake_main, f), 0);
	return f;
}

static fake *
fake_start(const char *control, const char *publish)
{
	return fake_start_with(control, publish, NULL, false);
}

static void
fake_stop(fake *f)
{
	pthread_mutex_lock(&f->mu);
	f->stop = true;
	pthread_mutex_unlock(&f->mu);
	pthread_join(f->thread, NULL);
	zmq_close(f->router);
	zmq_close(f->pub);
	if (f->zap != NULL)
		zmq_close(f->zap);
	zmq_ctx_term(f->ctx);
	for (uint32_t i = 0; i < f->n_decisions; i++)
		com_decision_fini(&f->decisions[i]);
	for (uint32_t i = 0; i < f->n_reports; i++)
		com_msg_fini(&f->reports[i]);
	com_msg_fini(&f->last_hello);
	pthread_cond_destroy(&f->cond);
	pthread_mutex_destroy(&f->mu);
	free(f);
}

/* Waits, under the fake's lock, until `expr` (about *f) holds. */
#define FAKE_WAIT(f, expr)                                                     \
	do {                                                                   \
		uint64_t until_ = now_ms() + WAIT_MS;                          \
		bool ok_;                                                      \
		pthread_mutex_lock(&(f)->mu);                                  \
		while (!(ok_ = (expr)) && now_ms() < until_) {                 \
			struct timespec ts_;                                   \
			clock_gettime(CLOCK_MONOTONIC, &ts_);                  \
			ts_.tv_nsec += 5000000;                                \
			if (ts_.tv_nsec >= 1000000000) {                       \
				ts_.tv_sec++;                                  \
				ts_.tv_nsec -= 1000000000;                     \
			}                                                      \
			pthread_cond_timedwait(&(f)->cond, &(f)->mu, &ts_);    \
		}                                                              \
		pthread_mutex_unlock(&(f)->mu);                                \
		if (!ok_)                                                      \
			fail_msg("timed out waiting for %s", #expr);           \
	} while (0)

/* Polls the agent's counters until `expr` (about `s`) holds. */
#define STATS_WAIT(agent, s, expr)                                             \
	do {                                                                   \
		uint64_t until_ = now_ms() + WAIT_MS;                          \
		for (;;) {                                                     \
			assert_int_equal(bellows_agent_stats_get(agent, &(s)), \
			    0);                                                \
			if (expr)                                              \
				break;                                         \
			if (now_ms() > until_)                                 \
				fail_msg("timed out waiting for %s", #expr);   \
			usleep(2000);                                          \
		}                                                              \
	} while (0)

/* ---- the agent under test ---- */

static const uint32_t shape0[] = { 2, 3, 3 };
static const uint32_t shape2[] = { 5, 3 };
static const bellows_layer test_layers[N_LAYERS] = {
	{ .name = "conv.weight",
	    .numel = 18,
	    .ndim = 3,
	    .shape = shape0,
	    .flags = BELLOWS_LAYER_MOMENTUM },
	{ .name = "conv.bias", .numel = 7 },
	{ .name = "fc.weight",
	    .numel = 15,
	    .ndim = 2,
	    .shape = shape2,
	    .flags = BELLOWS_LAYER_NO_ACCUMULATOR },
};

static void
config(bellows_agent_config *cfg, const fake *f)
{
	bellows_agent_config_init(cfg);
	if (f != NULL) {
		cfg->control = f->control;
		cfg->publish = f->publish;
	}
	cfg->job = "job";
	cfg->rank = 1;
	cfg->world = 2;
	cfg->layers = test_layers;
	cfg->n_layers = N_LAYERS;
	cfg->heartbeat_ms = 200;
	cfg->log = log_sink;
	cfg->log_level = BELLOWS_LOG_DEBUG;
	log_reset();
}

static bellows_agent *
open_agent(const bellows_agent_config *cfg)
{
	bellows_agent *a = NULL;

	assert_int_equal(bellows_agent_open(cfg, &a), 0);
	assert_non_null(a);
	return a;
}

/* A reproducible gradient of layer l at step s. */
static void
grad(float *g, uint32_t l, uint64_t s)
{
	for (uint64_t i = 0; i < test_layers[l].numel; i++)
		g[i] = (float)((double)((int)(i % 5) - 2) * 0.5 *
			(double)(s + 1) +
		    0.25 * l);
}

/* Runs one step observing every layer; returns its step number. */
static uint64_t
run_step(bellows_agent *a, const bellows_step_info *info)
{
	float g[32];
	uint64_t step = UINT64_MAX;

	assert_int_equal(bellows_agent_step_begin(a, &step), 0);
	for (uint32_t l = 0; l < N_LAYERS; l++) {
		grad(g, l, step);
		assert_int_equal(bellows_agent_observe(a, l, g,
				     test_layers[l].numel),
		    0);
	}
	assert_int_equal(bellows_agent_step_end(a, info), 0);
	return step;
}

/* ---- tests ---- */

typedef void mutate_fn(bellows_agent_config *cfg, bellows_layer *layers);

static void
bad_size(bellows_agent_config *c, bellows_layer *l)
{
	(void)l;
	c->size--;
}

static void
no_control(bellows_agent_config *c, bellows_layer *l)
{
	(void)l;
	c->control = NULL;
}

static void
no_publish(bellows_agent_config *c, bellows_layer *l)
{
	(void)l;
	c->publish = NULL;
}

static void
bad_endpoint(bellows_agent_config *c, bellows_layer *l)
{
	(void)l;
	c->control = "nonsense://here";
}

static void
no_job(bellows_agent_config *c, bellows_layer *l)
{
	(void)l;
	c->job = NULL;
}

static void
empty_job(bellows_agent_config *c, bellows_layer *l)
{
	(void)l;
	c->job = "";
}

static void
long_job(bellows_agent_config *c, bellows_layer *l)
{
	static char name[257];

	(void)l;
	memset(name, 'j', 256);
	c->job = name;
}

static void
control_char_job(bellows_agent_config *c, bellows_layer *l)
{
	(void)l;
	c->job = "jo\nb";
}

static void
zero_world(bellows_agent_config *c, bellows_layer *l)
{
	(void)l;
	c->world = 0;
	c->rank = 0;
}

static void
rank_not_below_world(bellows_agent_config *c, bellows_layer *l)
{
	(void)l;
	c->rank = 2;
}

static void
no_layers(bellows_agent_config *c, bellows_layer *l)
{
	(void)l;
	c->layers = NULL;
}

static void
zero_layers(bellows_agent_config *c, bellows_layer *l)
{
	(void)l;
	c->n_layers = 0;
}

static void
too_many_layers(bellows_agent_config *c, bellows_layer *l)
{
	(void)l;
	c->n_layers = 65537;
}

static void
no_layer_name(bellows_agent_config *c, bellows_layer *l)
{
	(void)c;
	l[1].name = NULL;
}

static void
empty_layer_name(bellows_agent_config *c, bellows_layer *l)
{
	(void)c;
	l[1].name = "";
}

static void
duplicate_layer_name(bellows_agent_config *c, bellows_layer *l)
{
	(void)c;
	l[2].name = "conv.weight";
}

static void
zero_numel(bellows_agent_config *c, bellows_layer *l)
{
	(void)c;
	l[1].numel = 0;
}

static void
too_many_dims(bellows_agent_config *c, bellows_layer *l)
{
	static const uint32_t nine[9] = { 1, 1, 1, 1, 1, 1, 1, 1, 7 };

	(void)c;
	l[1].ndim = 9;
	l[1].shape = nine;
}

static void
missing_shape(bellows_agent_config *c, bellows_layer *l)
{
	(void)c;
	l[1].ndim = 1;
	l[1].shape = NULL;
}

static void
wrong_shape(bellows_agent_config *c, bellows_layer *l)
{
	(void)c;
	l[0].numel = 19;
}

static void
overflowing_shape(bellows_agent_config *c, bellows_layer *l)
{
	static const uint32_t big[3] = { 4294967295u, 4294967295u, 4 };

	(void)c;
	l[1].ndim = 3;
	l[1].shape = big;
}

static void
unknown_flag(bellows_agent_config *c, bellows_layer *l)
{
	(void)c;
	l[1].flags = 1u << 7;
}

static void
zero_heartbeat(bellows_agent_config *c, bellows_layer *l)
{
	(void)l;
	c->heartbeat_ms = 0;
}

static void
zero_queue(bellows_agent_config *c, bellows_layer *l)
{
	(void)l;
	c->queue_capacity = 0;
}

static void
beta_one(bellows_agent_config *c, bellows_layer *l)
{
	(void)l;
	c->momentum_beta = 1.0;
}

static void
beta_nan(bellows_agent_config *c, bellows_layer *l)
{
	(void)l;
	c->momentum_beta = NAN;
}

static void
test_open_rejects_each_invalid_field_with_einval(void **state)
{
	static mutate_fn *const mutations[] = { bad_size, no_control,
		no_publish, bad_endpoint, no_job, empty_job, long_job,
		control_char_job, zero_world, rank_not_below_world, no_layers,
		zero_layers, too_many_layers, no_layer_name, empty_layer_name,
		duplicate_layer_name, zero_numel, too_many_dims, missing_shape,
		wrong_shape, overflowing_shape, unknown_flag, zero_heartbeat,
		zero_queue, beta_one, beta_nan };
	bellows_agent_config cfg;
	bellows_layer layers[N_LAYERS];
	bellows_agent *a = NULL;

	(void)state;
	for (size_t i = 0; i < sizeof(mutations) / sizeof(mutations[0]); i++) {
		config(&cfg, NULL);
		memcpy(layers, test_layers, sizeof(layers));
		cfg.layers = layers;
		mutations[i](&cfg, layers);
		if (bellows_agent_open(&cfg, &a) != BELLOWS_EINVAL)
			fail_msg("mutation %zu was not refused", i);
		assert_null(a);
		if (!log_contains("bellows_agent_open") &&
		    !log_contains("cannot connect"))
			fail_msg("mutation %zu: no reason logged", i);
	}
	config(&cfg, NULL);
	assert_int_equal(bellows_agent_open(NULL, &a), BELLOWS_EINVAL);
	assert_int_equal(bellows_agent_open(&cfg, NULL), BELLOWS_EINVAL);
	assert_null(a);
}

static void
test_calls_out_of_order_or_with_bad_arguments_are_refused(void **state)
{
	bellows_agent_config cfg;
	bellows_agent_stats s;
	bellows_decision d;
	bellows_agent *a;
	float g[18] = { 0 };
	uint64_t step = 77;

	(void)state;
	config(&cfg, NULL);
	cfg.control = "tcp://127.0.0.1:1";
	cfg.publish = "tcp://127.0.0.1:1";
	a = open_agent(&cfg);
	assert_int_equal(bellows_agent_step_end(a, NULL), BELLOWS_ESTATE);
	assert_int_equal(bellows_agent_observe(a, 0, g, 18), BELLOWS_ESTATE);
	assert_int_equal(bellows_agent_window_end(a), BELLOWS_EAGAIN);
	assert_int_equal(bellows_agent_step_begin(a, &step), 0);
	assert_int_equal(step, 0);
	assert_int_equal(bellows_agent_step_begin(a, &step), BELLOWS_ESTATE);
	assert_int_equal(bellows_agent_window_end(a), BELLOWS_ESTATE);
	assert_int_equal(bellows_agent_observe(a, 3, g, 18), BELLOWS_EINVAL);
	assert_int_equal(bellows_agent_observe(a, 0, g, 17), BELLOWS_EINVAL);
	assert_int_equal(bellows_agent_observe(a, 0, NULL, 18), BELLOWS_EINVAL);
	assert_int_equal(bellows_agent_observe(a, 0, g, 18), 0);
	assert_int_equal(bellows_agent_step_end(a, NULL), 0);
	assert_int_equal(bellows_agent_window_end(a), 0);
	assert_int_equal(bellows_agent_window_end(a), BELLOWS_EAGAIN);
	assert_int_equal(bellows_agent_step_begin(a, NULL), 0);
	assert_int_equal(bellows_agent_step_end(a, NULL), 0);

	assert_true(bellows_agent_level(a, N_LAYERS) == 0.0);
	assert_true(bellows_agent_level(NULL, 0) == 0.0);
	assert_int_equal(bellows_agent_step_begin(NULL, NULL), BELLOWS_EINVAL);
	assert_int_equal(bellows_agent_step_end(NULL, NULL), BELLOWS_EINVAL);
	assert_int_equal(bellows_agent_window_end(NULL), BELLOWS_EINVAL);
	assert_int_equal(bellows_agent_observe(NULL, 0, g, 18), BELLOWS_EINVAL);
	assert_int_equal(bellows_agent_decision(NULL, &d), BELLOWS_EINVAL);
	assert_int_equal(bellows_agent_decision(a, NULL), BELLOWS_EINVAL);
	assert_int_equal(bellows_agent_stats_get(NULL, &s), BELLOWS_EINVAL);
	assert_int_equal(bellows_agent_stats_get(a, NULL), BELLOWS_EINVAL);
	assert_int_equal(bellows_agent_stats_get(a, &s), 0);
	assert_int_equal(s.step, 2);
	assert_int_equal(s.window, 1);
	bellows_agent_close(&a);
	assert_null(a);
	bellows_agent_close(&a);
	bellows_agent_close(NULL);
}

/* A DDP bucket observed in one call gives every layer the statistics of
 * observing its gradients one by one; bad arguments change nothing. */
static void
test_a_bucket_observed_at_once_equals_its_gradients_one_by_one(void **state)
{
	bellows_agent_config cfg;
	bellows_agent *many, *one;
	bellows_layer_stats a, b;
	/* Layers 2, 0 and 1 in the bucket, as backward fills them. */
	uint32_t order[N_LAYERS] = { 2, 0, 1 };
	uint32_t bad[N_LAYERS] = { 2, 0, N_LAYERS };
	uint64_t offsets[N_LAYERS];
	float buf[18 + 7 + 15];
	uint64_t off = 0;

	(void)state;
	for (size_t i = 0; i < sizeof(buf) / sizeof(buf[0]); i++)
		buf[i] = (float)((int)(i * 7 % 11) - 5) * 0.25f;
	for (int i = 0; i < N_LAYERS; i++) {
		offsets[i] = off;
		off += test_layers[order[i]].numel;
	}
	config(&cfg, NULL);
	cfg.control = "tcp://127.0.0.1:1";
	cfg.publish = "tcp://127.0.0.1:1";
	cfg.decision_timeout_ms = 50; /* no daemon: no Welcome to wait for */
	many = open_agent(&cfg);
	one = open_agent(&cfg);
	assert_int_equal(bellows_agent_observe_many(many, N_LAYERS, order, buf,
			     offsets, BELLOWS_DTYPE_F32),
	    BELLOWS_ESTATE);
	assert_int_equal(bellows_agent_step_begin(many, NULL), 0);
	assert_int_equal(bellows_agent_step_begin(one, NULL), 0);
	/* Refused whole: nothing of the good layers before the bad one. */
	assert_int_equal(bellows_agent_observe_many(many, N_LAYERS, bad, buf,
			     offsets, BELLOWS_DTYPE_F32),
	    BELLOWS_EINVAL);
	assert_int_equal(bellows_agent_observe_many(many, N_LAYERS, order, NULL,
			     offsets, BELLOWS_DTYPE_F32),
	    BELLOWS_EINVAL);
	assert_int_equal(bellows_agent_observe_many(many, N_LAYERS, order, buf,
			     offsets, 99),
	    BELLOWS_EINVAL);
	assert_int_equal(bellows_agent_observe_many(NULL, N_LAYERS, order, buf,
			     offsets, BELLOWS_DTYPE_F32),
	    BELLOWS_EINVAL);
	assert_int_equal(bellows_agent_observe_many(many, 0, NULL, NULL, NULL,
			     BELLOWS_DTYPE_F32),
	    0);
	assert_int_equal(bellows_agent_observe_many(many, N_LAYERS, order, buf,
			     offsets, BELLOWS_DTYPE_F32),
	    0);
	for (int i = 0; i < N_LAYERS; i++)
		assert_int_equal(bellows_agent_observe(one, order[i],
				     buf + offsets[i],
				     test_layers[order[i]].numel),
		    0);
	assert_int_equal(bellows_agent_step_end(many, NULL), 0);
	assert_int_equal(bellows_agent_step_end(one, NULL), 0);
	assert_int_equal(bellows_agent_window_end(many), 0);
	assert_int_equal(bellows_agent_window_end(one), 0);
	for (uint32_t l = 0; l < N_LAYERS; l++) {
		assert_int_equal(bellows_agent_window_stats(many, l, &a), 0);
		assert_int_equal(bellows_agent_window_stats(one, l, &b), 0);
		assert_int_equal(a.count, test_layers[l].numel);
		assert_int_equal(a.count, b.count);
		assert_int_equal(a.nonzero, b.nonzero);
		assert_true(a.sum_sq == b.sum_sq);
		assert_true(a.abs_sum == b.abs_sum);
		assert_true(a.max_abs == b.max_abs);
	}
	bellows_agent_close(&many);
	bellows_agent_close(&one);
}

static void
test_timing_and_activation_calls_refuse_bad_arguments(void **state)
{
	bellows_act_stats act = { .lbar = 0.5,
		.nonzero = 0.5,
		.stored_bytes = 10,
		.raw_bytes = 40 };
	bellows_act_stats bad;
	bellows_step_info info;
	bellows_agent_config cfg;
	bellows_agent *a;
	const double bad_times[] = { NAN, -1.0, INFINITY, -INFINITY };

	(void)state;
	config(&cfg, NULL);
	cfg.control = "tcp://127.0.0.1:1";
	cfg.publish = "tcp://127.0.0.1:1";
	cfg.decision_timeout_ms = 50;
	a = open_agent(&cfg);

	/* Outside a step: ESTATE, arguments being valid. */
	assert_int_equal(bellows_agent_send_mode(a, 0), BELLOWS_ESTATE);
	assert_int_equal(bellows_agent_comm_layer(a, 0, 1, 1.0, 0.5),
	    BELLOWS_ESTATE);
	assert_int_equal(bellows_agent_comm_bucket(a, 4096, 0, 1.0),
	    BELLOWS_ESTATE);
	assert_int_equal(bellows_agent_observe_activation(a, 0, &act),
	    BELLOWS_ESTATE);
	assert_int_equal(bellows_agent_calibrating(a), 0);

	assert_int_equal(bellows_agent_step_begin(a, NULL), 0);
	/* Bad indices, NULLs, and times that are NaN, negative or
	 * infinite: EINVAL. */
	assert_int_equal(bellows_agent_send_mode(a, N_LAYERS), BELLOWS_EINVAL);
	assert_int_equal(bellows_agent_send_mode(NULL, 0), BELLOWS_EINVAL);
	assert_int_equal(bellows_agent_calibrating(NULL), BELLOWS_EINVAL);
	assert_int_equal(bellows_agent_comm_layer(a, N_LAYERS, 0, 1.0, 0.0),
	    BELLOWS_EINVAL);
	assert_int_equal(bellows_agent_comm_layer(NULL, 0, 0, 1.0, 0.0),
	    BELLOWS_EINVAL);
	assert_int_equal(bellows_agent_comm_bucket(NULL, 1, 0, 1.0),
	    BELLOWS_EINVAL);
	for (size_t i = 0; i < sizeof(bad_times) / sizeof(bad_times[0]); i++) {
		assert_int_equal(bellows_agent_comm_layer(a, 0, 1, bad_times[i],
				     0.0),
		    BELLOWS_EINVAL);
		assert_int_equal(bellows_agent_comm_layer(a, 0, 1, 1.0,
				     bad_times[i]),
		    BELLOWS_EINVAL);
		assert_int_equal(bellows_agent_comm_bucket(a, 1, 1,
				     bad_times[i]),
		    BELLOWS_EINVAL);
		bad = act;
		bad.lbar = bad_times[i];
		assert_int_equal(bellows_agent_observe_activation(a, 0, &bad),
		    BELLOWS_EINVAL);
		bad = act;
		bad.nonzero = bad_times[i];
		assert_int_equal(bellows_agent_observe_activation(a, 0, &bad),
		    BELLOWS_EINVAL);
	}
	bad = act;
	bad.nonzero = 1.0 + 1e-9;
	assert_int_equal(bellows_agent_observe_activation(a, 0, &bad),
	    BELLOWS_EINVAL);
	assert_int_equal(bellows_agent_observe_activation(a, N_LAYERS, &act),
	    BELLOWS_EINVAL);
	assert_int_equal(bellows_agent_observe_activation(a, 0, NULL),
	    BELLOWS_EINVAL);
	assert_int_equal(bellows_agent_observe_activation(NULL, 0, &act),
	    BELLOWS_EINVAL);

	/* A step_info with a bad time leaves the step open. */
	for (int c = 0; c < 6; c++) {
		memset(&info, 0, sizeof(info));
		switch (c) {
		case 0:
			info.backward_ms = NAN;
			break;
		case 1:
			info.codec_ms = -1.0;
			break;
		case 2:
			info.compute_ms = INFINITY;
			break;
		case 3:
			info.comm_ms = -0.5;
			break;
		case 4:
			info.lr = NAN;
			break;
		default:
			info.lr_next = -1e-3;
			break;
		}
		if (bellows_agent_step_end(a, &info) != BELLOWS_EINVAL)
			fail_msg("step_info case %d was not refused", c);
	}
	assert_int_equal(bellows_agent_send_mode(a, 0), BELLOWS_SEND_RAW);

	/* The edges of the ranges are accepted. */
	bad = act;
	bad.nonzero = 1.0;
	bad.lbar = 0.0;
	assert_int_equal(bellows_agent_observe_activation(a, 0, &bad), 0);
	bad.nonzero = 0.0;
	assert_int_equal(bellows_agent_observe_activation(a, 2, &bad), 0);
	assert_int_equal(bellows_agent_comm_layer(a, 2, 0, 0.0, 0.0), 0);
	assert_int_equal(bellows_agent_comm_bucket(a, 0, 0, 0.0), 0);
	memset(&info, 0, sizeof(info));
	info.step_ms = NAN; /* step_ms: measured by the agent instead */
	assert_int_equal(bellows_agent_step_end(a, &info), 0);
	assert_int_equal(bellows_agent_step_end(a, &info), BELLOWS_ESTATE);
	bellows_agent_close(&a);
}

/* The decision seq i+1 of the fake with levels per layer and the knobs
 * SlimGC and the performance model drive. */
static void
fake_decide_knobs(fake *f, uint64_t apply_step, const double *levels,
    uint64_t threshold, uint64_t calibrate_steps, bool off)
{
	com_decision *d = &f->decisions[fake_decide(f, apply_step, 0, 0.0, 0)];

	for (uint32_t l = 0; l < N_LAYERS; l++)
		d->level[l] = levels[l];
	d->size_threshold = threshold;
	d->calibrate_steps = calibrate_steps;
	d->compression_off = off;
}

static void
test_send_mode_follows_the_gate_the_level_the_threshold_and_calibration(
    void **state)
{
	/* Layers are 72, 28 and 60 bytes of float32. */
	static const double some[N_LAYERS] = { 2.0, 0.0, 2.0 };
	static const double all[N_LAYERS] = { 1.0, 1.0, 1.0 };
	/* Per step: the mode of each layer, and whether it calibrates. */
	static const int want[14][N_LAYERS + 1] = {
		/* seq 1 from step 0: threshold 64 */
		{ 1, 0, 0, 0 },
		{ 1, 0, 0, 0 },
		/* seq 2 from step 2: calibrates steps 2..4 */
		{ 1, 0, 1, 1 },
		{ 0, 0, 0, 1 },
		{ 1, 0, 1, 1 },
		{ 1, 0, 0, 0 },
		/* seq 3 from step 6: compression off wins over calibration */
		{ 0, 0, 0, 1 },
		{ 0, 0, 0, 1 },
		{ 0, 0, 0, 1 },
		/* seq 4 from step 9: threshold 72 = layer 0's size */
		{ 1, 0, 0, 0 },
		{ 1, 0, 0, 0 },
		/* seq 5 from step 11: calibrating from an odd step, then
		 * the threshold of 1000 bytes */
		{ 0, 0, 0, 1 },
		{ 1, 1, 1, 1 },
		{ 0, 0, 0, 0 },
	};
	bellows_agent_config cfg;
	bellows_agent_stats s;
	bellows_decision d;
	bellows_agent *a;
	fake *f;

	(void)state;
	f = fake_start(NULL, NULL);
	pthread_mutex_lock(&f->mu);
	fake_decide_knobs(f, 0, some, 64, 0, false);
	fake_decide_knobs(f, 2, some, 64, 3, false);
	fake_decide_knobs(f, 6, some, 64, 3, true);
	fake_decide_knobs(f, 9, some, 72, 0, false);
	fake_decide_knobs(f, 11, all, 1000, 2, false);
	pthread_mutex_unlock(&f->mu);
	config(&cfg, f);
	a = open_agent(&cfg);
	STATS_WAIT(a, s, s.connected && s.decisions == 5);

	for (uint64_t i = 0; i < 14; i++) {
		uint64_t step;

		assert_int_equal(bellows_agent_step_begin(a, &step), 0);
		assert_int_equal(step, i);
		for (uint32_t l = 0; l < N_LAYERS; l++)
			if (bellows_agent_send_mode(a, l) != want[i][l])
				fail_msg("step %llu layer %u: mode %d, not %d",
				    (unsigned long long)i, l,
				    bellows_agent_send_mode(a, l), want[i][l]);
		assert_int_equal(bellows_agent_calibrating(a), want[i][3]);
		assert_int_equal(bellows_agent_step_end(a, NULL), 0);
		/* Between steps: the step just ended. */
		assert_int_equal(bellows_agent_calibrating(a), want[i][3]);
	}
	assert_int_equal(bellows_agent_decision(a, &d), 0);
	assert_int_equal(d.seq, 5);
	assert_int_equal(d.calibrate_steps, 2);
	assert_int_equal(d.size_threshold, 1000);
	bellows_agent_close(&a);
	fake_stop(f);
}

/* Checks the level_applied window `window`, just closed, reported for
 * each layer, as bellows_agent_window_stats and the fake bellowsd saw
 * it. */
static void
check_applied_window(bellows_agent *a, fake *f, uint32_t window,
    const double *want)
{
	bellows_layer_stats ls;
	const com_report *r;

	FAKE_WAIT(f, f->n_reports == window + 1);
	pthread_mutex_lock(&f->mu);
	r = &f->reports[window].u.report;
	assert_int_equal(r->window, window);
	for (uint32_t l = 0; l < N_LAYERS; l++) {
		assert_int_equal(bellows_agent_window_stats(a, l, &ls), 0);
		assert_int_equal(ls.level_applied_n, 1);
		if (ls.level_applied != want[l] ||
		    r->layers[l].level_applied != want[l] ||
		    r->layers[l].level_applied_n != 1)
			fail_msg("window %u layer %u: applied %g (on the "
				 "wire %g), not %g",
			    window, l, ls.level_applied,
			    r->layers[l].level_applied, want[l]);
	}
	pthread_mutex_unlock(&f->mu);
}

/* Without bellows_agent_applied_levels the agent reports, per layer, the
 * level of the decision in force at the window's last step, 0 below the
 * size threshold and while compression is off; a calibration's
 * compressed steps do not count. */
static void
test_applied_level_is_the_decided_one_raw_under_the_threshold_or_the_gate(
    void **state)
{
	/* Layers are 72, 28 and 60 bytes of float32. */
	static const double some[N_LAYERS] = { 2.0, 0.0, 2.0 };
	static const double all[N_LAYERS] = { 1.0, 1.0, 1.0 };
	static const double odd[N_LAYERS] = { 3.0, 1.0, 0.5 };
	static const double want[4][N_LAYERS] = {
		{ 2.0, 0.0, 0.0 }, /* threshold 64: layer 2 is below */
		{ 0.0, 0.0, 0.0 }, /* compression off */
		{ 0.0, 0.0, 0.0 }, /* calibrating, threshold 1000 */
		{ 3.0, 1.0, 0.5 }, /* no threshold */
	};
	bellows_agent_config cfg;
	bellows_agent_stats s;
	bellows_agent *a;
	fake *f;

	(void)state;
	f = fake_start(NULL, NULL);
	pthread_mutex_lock(&f->mu);
	fake_decide_knobs(f, 0, some, 64, 0, false);
	fake_decide_knobs(f, 2, some, 64, 0, true);
	fake_decide_knobs(f, 4, all, 1000, 2, false);
	fake_decide_knobs(f, 6, odd, 0, 0, false);
	pthread_mutex_unlock(&f->mu);
	config(&cfg, f);
	cfg.window_steps = 2;
	a = open_agent(&cfg);
	STATS_WAIT(a, s, s.connected && s.decisions == 4);
	for (uint32_t w = 0; w < 4; w++) {
		run_step(a, NULL);
		if (w == 2)
			/* Step 5, odd: raw; step 4 was compressed. */
			assert_int_equal(bellows_agent_calibrating(a), 1);
		run_step(a, NULL);
		check_applied_window(a, f, w, want[w]);
	}
	bellows_agent_close(&a);
	fake_stop(f);
}

/* The trainer's levels win over the agent's own until a decision of
 * another seq is in force; bad arguments are refused and change
 * nothing. */
static void
test_applied_levels_given_by_the_trainer_hold_until_the_decision_changes(
    void **state)
{
	static const double two[N_LAYERS] = { 2.0, 2.0, 2.0 };
	static const double one[N_LAYERS] = { 1.0, 1.0, 1.0 };
	static const double bias_raw[N_LAYERS] = { 2.0, 0.0, 2.0 };
	static const double bias_raw1[N_LAYERS] = { 1.0, 0.0, 1.0 };
	double bad[N_LAYERS] = { 1.0, 1.0, 1.0 };
	bellows_agent_config cfg;
	bellows_agent_stats s;
	bellows_agent *a;
	uint64_t step;
	fake *f;

	(void)state;
	f = fake_start(NULL, NULL);
	pthread_mutex_lock(&f->mu);
	fake_decide_knobs(f, 0, two, 0, 0, false);
	fake_decide_knobs(f, 4, one, 0, 0, false);
	pthread_mutex_unlock(&f->mu);
	config(&cfg, f);
	cfg.window_steps = 2;
	a = open_agent(&cfg);
	STATS_WAIT(a, s, s.connected && s.decisions == 2);
	/* Outside a step. */
	assert_int_equal(bellows_agent_applied_levels(a, bias_raw, N_LAYERS),
	    BELLOWS_ESTATE);

	/* Window 0: given at step 0, the bias raw. */
	assert_int_equal(bellows_agent_step_begin(a, &step), 0);
	assert_int_equal(bellows_agent_applied_levels(a, bias_raw, N_LAYERS),
	    0);
	assert_int_equal(bellows_agent_step_end(a, NULL), 0);
	run_step(a, NULL);
	check_applied_window(a, f, 0, bias_raw);

	/* Window 1: kept without a call; bad calls change nothing. */
	assert_int_equal(bellows_agent_step_begin(a, &step), 0);
	assert_int_equal(bellows_agent_applied_levels(NULL, one, N_LAYERS),
	    BELLOWS_EINVAL);
	assert_int_equal(bellows_agent_applied_levels(a, NULL, N_LAYERS),
	    BELLOWS_EINVAL);
	assert_int_equal(bellows_agent_applied_levels(a, one, N_LAYERS - 1),
	    BELLOWS_EINVAL);
	assert_int_equal(bellows_agent_applied_levels(a, one, N_LAYERS + 1),
	    BELLOWS_EINVAL);
	bad[2] = -1.0;
	assert_int_equal(bellows_agent_applied_levels(a, bad, N_LAYERS),
	    BELLOWS_EINVAL);
	bad[2] = NAN;
	assert_int_equal(bellows_agent_applied_levels(a, bad, N_LAYERS),
	    BELLOWS_EINVAL);
	bad[2] = INFINITY;
	assert_int_equal(bellows_agent_applied_levels(a, bad, N_LAYERS),
	    BELLOWS_EINVAL);
	assert_int_equal(bellows_agent_step_end(a, NULL), 0);
	run_step(a, NULL);
	check_applied_window(a, f, 1, bias_raw);

	/* Window 2: seq 2 in force from step 4 and no call: the stale
	 * levels give way to the decision's. */
	run_step(a, NULL);
	run_step(a, NULL);
	check_applied_window(a, f, 2, one);

	/* Window 3: given again under seq 2. */
	assert_int_equal(bellows_agent_step_begin(a, &step), 0);
	assert_int_equal(step, 6);
	assert_int_equal(bellows_agent_applied_levels(a, bias_raw1, N_LAYERS),
	    0);
	assert_int_equal(bellows_agent_step_end(a, NULL), 0);
	run_step(a, NULL);
	check_applied_window(a, f, 3, bias_raw1);
	bellows_agent_close(&a);
	fake_stop(f);
}

/* The trainer's evaluations reach the report of the window they were
 * given in: through bellows_step_info or bellows_agent_eval between
 * steps, the last non-zero one of the window; bad values are refused and
 * change nothing; the next window starts without one. */
static void
test_report_carries_the_trainers_last_evaluation_of_the_window(void **state)
{
	bellows_agent_config cfg;
	bellows_agent_stats s;
	bellows_step_info with = { .eval_accuracy = 0.5, .eval_loss = 1.5 };
	bellows_step_info bad = { .eval_accuracy = 1.25 };
	bellows_agent *a;
	com_report *r;
	fake *f;

	(void)state;
	f = fake_start(NULL, NULL);
	config(&cfg, f);
	cfg.window_steps = 0;
	a = open_agent(&cfg);
	STATS_WAIT(a, s, s.connected);

	assert_int_equal(bellows_agent_step_begin(a, NULL), 0);
	assert_int_equal(bellows_agent_step_end(a, &with), 0);
	assert_int_equal(bellows_agent_step_begin(a, NULL), 0);
	assert_int_equal(bellows_agent_step_end(a, &bad), BELLOWS_EINVAL);
	assert_int_equal(bellows_agent_step_end(a, NULL), 0);
	/* Between steps, before the window ends: the window's last. */
	assert_int_equal(bellows_agent_eval(NULL, 0.5, 0.5), BELLOWS_EINVAL);
	assert_int_equal(bellows_agent_eval(a, 1.5, 0.5), BELLOWS_EINVAL);
	assert_int_equal(bellows_agent_eval(a, -0.1, 0.5), BELLOWS_EINVAL);
	assert_int_equal(bellows_agent_eval(a, NAN, 0.5), BELLOWS_EINVAL);
	assert_int_equal(bellows_agent_eval(a, 0.5, -1.0), BELLOWS_EINVAL);
	assert_int_equal(bellows_agent_eval(a, 0.5, INFINITY), BELLOWS_EINVAL);
	assert_int_equal(bellows_agent_eval(a, 0.75, 0.25), 0);
	assert_int_equal(bellows_agent_window_end(a), 0);
	/* A window without an evaluation. */
	assert_int_equal(bellows_agent_step_begin(a, NULL), 0);
	assert_int_equal(bellows_agent_step_end(a, NULL), 0);
	assert_int_equal(bellows_agent_window_end(a), 0);
	FAKE_WAIT(f, f->n_reports == 2);

	pthread_mutex_lock(&f->mu);
	r = &f->reports[0].u.report;
	assert_int_equal(r->timings.steps, 2);
	assert_true(r->timings.eval_accuracy == 0.75);
	assert_true(r->timings.eval_loss == 0.25);
	r = &f->reports[1].u.report;
	assert_true(r->timings.eval_accuracy == 0.0);
	assert_true(r->timings.eval_loss == 0.0);
	pthread_mutex_unlock(&f->mu);
	bellows_agent_close(&a);
	fake_stop(f);
}

static void
test_report_carries_activations_send_quartiles_collectives_and_memory(
    void **state)
{
	bellows_agent_config cfg;
	bellows_agent_stats s;
	bellows_layer_stats ls;
	bellows_agent *a;
	com_report *r;
	fake *f;

	(void)state;
	f = fake_start(NULL, NULL);
	config(&cfg, f);
	cfg.window_steps = 4;
	a = open_agent(&cfg);
	STATS_WAIT(a, s, s.connected);

	for (uint64_t i = 0; i < 4; i++) {
		bellows_act_stats act = { .lbar = 0.5 * (double)(i + 1),
			.nonzero = 0.25 * (double)i,
			.stored_bytes = 100 * (i + 1),
			.raw_bytes = 1000 };
		bellows_step_info info = { .step_ms = 10.0,
			.backward_ms = 2.5,
			.codec_ms = 0.25 * (double)i,
			.mem_device_used = i == 1 ? 5000 : 1000,
			.mem_device_total = i < 3 ? 8000 : 0,
			.mem_host_used = 100 + i,
			.saved_bytes = i == 2 ? 9000 : 700,
			.lr = 0.1 };

		assert_int_equal(bellows_agent_step_begin(a, NULL), 0);
		assert_int_equal(bellows_agent_observe_activation(a, 0, &act),
		    0);
		/* Layer 0: raw sends of 1..4 ms, layer 2: compressed 1,
		 * 3, 5 (a step without); each reported as its lower
		 * quartile, index floor(0.25 (n - 1)) of the sorted. */
		assert_int_equal(bellows_agent_comm_layer(a, 0, 0,
				     (double)(4 - i), 7.0),
		    0);
		if (i < 3)
			assert_int_equal(bellows_agent_comm_layer(a, 2, 1,
					     1.0 + 2.0 * (double)i,
					     0.5 * (double)(i + 1)),
			    0);
		assert_int_equal(bellows_agent_comm_bucket(a, 1 << 20, 0,
				     3.0 + (double)i),
		    0);
		assert_int_equal(bellows_agent_comm_bucket(a, 4096, 1, 0.5), 0);
		assert_int_equal(bellows_agent_step_end(a, &info), 0);
	}
	/* A second window: nothing timed, 300 kinds of collectives. */
	assert_int_equal(bellows_agent_step_begin(a, NULL), 0);
	for (uint64_t b = 1; b <= 300; b++)
		assert_int_equal(bellows_agent_comm_bucket(a, b, 0, 1.0), 0);
	assert_int_equal(bellows_agent_step_end(a, NULL), 0);
	assert_int_equal(bellows_agent_window_end(a), 0);
	FAKE_WAIT(f, f->n_reports == 2);

	pthread_mutex_lock(&f->mu);
	r = &f->reports[0].u.report;
	assert_true(f->reports[0].minor >= 1);
	assert_int_equal(r->layers[0].act_steps, 4);
	assert_true(r->layers[0].act_lbar == 1.25);
	assert_true(r->layers[0].act_nonzero == 0.375);
	assert_true(r->layers[0].act_bytes == 250.0);
	assert_true(r->layers[0].act_raw_bytes == 1000.0);
	assert_int_equal(r->layers[1].act_steps, 0);
	assert_true(r->layers[0].comm_raw_ms == 1.0);
	assert_int_equal(r->layers[0].comm_raw_n, 4);
	assert_int_equal(r->layers[0].comm_comp_n, 0);
	assert_true(r->layers[0].codec_ms == 0.0);
	assert_true(r->layers[2].comm_comp_ms == 1.0);
	assert_int_equal(r->layers[2].comm_comp_n, 3);
	assert_true(r->layers[2].codec_ms == 0.5);
	assert_int_equal(r->layers[2].comm_raw_n, 0);
	assert_int_equal(r->layers[1].comm_raw_n + r->layers[1].comm_comp_n, 0);
	assert_true(r->timings.backward_ms == 10.0);
	assert_true(r->timings.codec_ms == 1.5);
	assert_int_equal(r->timings.mem_device_used, 5000);
	assert_int_equal(r->timings.mem_device_total, 8000);
	assert_int_equal(r->timings.mem_host_used, 103);
	assert_int_equal(r->timings.saved_bytes, 9000);
	assert_int_equal(r->n_comm, 2);
	assert_int_equal(r->comm[0].bytes, 4096);
	assert_true(r->comm[0].compressed);
	assert_true(r->comm[0].ms == 0.5);
	assert_int_equal(r->comm[0].count, 4);
	assert_int_equal(r->comm[1].bytes, 1 << 20);
	assert_false(r->comm[1].compressed);
	assert_true(r->comm[1].ms == 4.5);
	assert_int_equal(r->comm[1].count, 4);

	r = &f->reports[1].u.report;
	assert_int_equal(r->layers[0].act_steps, 0);
	assert_int_equal(r->layers[0].comm_raw_n, 0);
	assert_true(r->layers[2].comm_comp_ms == 0.0);
	assert_true(r->timings.backward_ms == 0.0);
	assert_int_equal(r->timings.mem_device_total, 0);
	assert_int_equal(r->n_comm, 256);
	assert_int_equal(r->comm[0].bytes, 1);
	assert_int_equal(r->comm[255].bytes, 256);
	pthread_mutex_unlock(&f->mu);
	assert_true(log_contains("44 timed collectives were not reported"));

	/* The agent exposes the last closed window: the second. */
	assert_int_equal(bellows_agent_window_stats(a, 0, &ls), 0);
	assert_int_equal(ls.window, 1);
	assert_int_equal(ls.act_steps, 0);
	assert_int_equal(ls.comm_raw_n, 0);
	bellows_agent_close(&a);
	fake_stop(f);
}

/* The other rank of a 2-rank group, simulated: it holds the same values,
 * so a sum doubles them; `fail` makes the collective fail. */
typedef struct twin {
	int calls; /* collectives made */
	bool fail; /* fail them */
} twin;

static int
twin_allreduce(void *arg, double *values, size_t n, int op)
{
	twin *t = arg;

	t->calls++;
	if (t->fail)
		return -5;
	if (op == BELLOWS_REDUCE_SUM)
		for (size_t i = 0; i < n; i++)
			values[i] *= 2;
	return 0;
}

static void
test_aggregate_sends_the_groups_report_from_its_lowest_rank_only(void **state)
{
	bellows_agent_config cfg;
	bellows_agent_stats s;
	bellows_layer_stats own;
	bellows_agent *a, *b;
	twin ta = { 0 }, tb = { 0 };
	com_report *r;
	fake *f;

	(void)state;
	f = fake_start(NULL, NULL);
	config(&cfg, f);
	cfg.window_steps = 2;
	cfg.aggregate = BELLOWS_AGGREGATE_JOB;
	cfg.allreduce = twin_allreduce;
	cfg.rank = 0;
	cfg.allreduce_arg = &ta;
	a = open_agent(&cfg);
	cfg.rank = 1;
	cfg.allreduce_arg = &tb;
	b = open_agent(&cfg);
	STATS_WAIT(a, s, s.connected);
	STATS_WAIT(b, s, s.connected);

	/* Window 0: rank 0 reports for both, rank 1 sends nothing. */
	for (int i = 0; i < 2; i++) {
		run_step(a, NULL);
		run_step(b, NULL);
	}
	assert_int_equal(ta.calls, 3);
	assert_int_equal(tb.calls, 3);
	FAKE_WAIT(f, f->n_reports == 1);
	assert_int_equal(bellows_agent_window_stats(a, 0, &own), 0);
	pthread_mutex_lock(&f->mu);
	r = &f->reports[0].u.report;
	assert_int_equal(r->rank, 0);
	assert_int_equal(r->window, 0);
	assert_int_equal(r->ranks, 2);
	assert_int_equal(r->layers[0].count, 2 * own.count);
	assert_true(r->layers[0].sum_sq == 2 * own.sum_sq);
	assert_true(r->layers[0].max_abs == own.max_abs);
	assert_true(r->layers[0].acc_norm == own.acc_norm);
	assert_true(r->layers[0].acc_norm_mean == own.acc_norm);
	assert_int_equal(r->timings.steps, 2);
	pthread_mutex_unlock(&f->mu);
	/* The agent's own statistics stay its own. */
	assert_int_equal(own.count, 2 * test_layers[0].numel);

	/* Window 1: the collective fails on both; each reports alone. */
	ta.fail = tb.fail = true;
	for (int i = 0; i < 2; i++) {
		run_step(a, NULL);
		run_step(b, NULL);
	}
	FAKE_WAIT(f, f->n_reports == 3);
	pthread_mutex_lock(&f->mu);
	for (uint32_t i = 1; i < 3; i++) {
		r = &f->reports[i].u.report;
		assert_int_equal(r->window, 1);
		assert_int_equal(r->ranks, 0);
		assert_int_equal(r->layers[0].count, own.count);
		assert_true(r->layers[0].acc_norm_mean == 0);
	}
	assert_int_not_equal(f->reports[1].u.report.rank,
	    f->reports[2].u.report.rank);
	pthread_mutex_unlock(&f->mu);
	assert_true(log_contains("the all-reduce of the statistics failed"));
	bellows_agent_close(&a);
	bellows_agent_close(&b);
	fake_stop(f);
}

static void
test_window_stats_expose_the_activation_and_send_fields(void **state)
{
	bellows_act_stats act = { .lbar = 2.0,
		.nonzero = 0.5,
		.stored_bytes = 64,
		.raw_bytes = 256 };
	bellows_agent_config cfg;
	bellows_layer_stats ls;
	bellows_agent *a;

	(void)state;
	config(&cfg, NULL);
	cfg.control = "tcp://127.0.0.1:1";
	cfg.publish = "tcp://127.0.0.1:1";
	cfg.decision_timeout_ms = 50;
	cfg.window_steps = 1;
	a = open_agent(&cfg);
	assert_int_equal(bellows_agent_step_begin(a, NULL), 0);
	assert_int_equal(bellows_agent_observe_activation(a, 1, &act), 0);
	assert_int_equal(bellows_agent_comm_layer(a, 1, 0, 4.0, 0.0), 0);
	assert_int_equal(bellows_agent_comm_layer(a, 1, 1, 2.0, 0.75), 0);
	assert_int_equal(bellows_agent_comm_layer(a, 1, 1, 3.0, 0.25), 0);
	assert_int_equal(bellows_agent_step_end(a, NULL), 0);
	assert_int_equal(bellows_agent_window_stats(a, 1, &ls), 0);
	assert_int_equal(ls.window, 0);
	assert_int_equal(ls.act_steps, 1);
	assert_true(ls.act_lbar == 2.0);
	assert_true(ls.act_nonzero == 0.5);
	assert_true(ls.act_bytes == 64.0);
	assert_true(ls.act_raw_bytes == 256.0);
	assert_true(ls.comm_raw_ms == 4.0);
	assert_int_equal(ls.comm_raw_n, 1);
	assert_true(ls.comm_comp_ms == 2.0); /* the lower of 2 and 3 */
	assert_int_equal(ls.comm_comp_n, 2);
	assert_true(ls.codec_ms == 0.25);
	bellows_agent_close(&a);
}

/* Residual statistics: the means of a window's calls, refused when bad;
 * the default residual plan before any decision. */
static void
test_residual_statistics_are_window_means_and_the_plan_defaults(void **state)
{
	bellows_resid_stats r1 = { .l1 = 4.0,
		.l2 = 1.0,
		.q50 = 0.5,
		.q90 = 1.5,
		.q99 = 2.5,
		.floats = 100 };
	bellows_resid_stats r2 = { .l1 = 2.0,
		.l2 = 3.0,
		.q50 = 0.7,
		.q90 = 1.7,
		.q99 = 2.7,
		.floats = 0 };
	bellows_resid_stats bad;
	bellows_agent_config cfg;
	bellows_layer_stats ls;
	bellows_decision d;
	bellows_agent *a;

	(void)state;
	config(&cfg, NULL);
	cfg.control = "tcp://127.0.0.1:1";
	cfg.publish = "tcp://127.0.0.1:1";
	cfg.decision_timeout_ms = 50;
	cfg.window_steps = 2;
	a = open_agent(&cfg);
	assert_int_equal(bellows_agent_observe_residual(a, 0, &r1),
	    BELLOWS_ESTATE);
	assert_int_equal(bellows_agent_decision(a, &d), 0);
	for (uint32_t l = 0; l < N_LAYERS; l++) {
		assert_int_equal(d.resid_group[l], l);
		assert_true(d.resid_phi[l] == 0.5);
		assert_true(d.resid_rows[l] == 1.0 && d.resid_cols[l] == 1.0);
	}
	for (int step = 0; step < 2; step++) {
		assert_int_equal(bellows_agent_step_begin(a, NULL), 0);
		assert_int_equal(bellows_agent_observe_residual(a, 2,
				     step == 0 ? &r1 : &r2),
		    0);
		bad = r1;
		bad.q99 = NAN;
		assert_int_equal(bellows_agent_observe_residual(a, 2, &bad),
		    BELLOWS_EINVAL);
		bad = r1;
		bad.l2 = -1.0;
		assert_int_equal(bellows_agent_observe_residual(a, 2, &bad),
		    BELLOWS_EINVAL);
		assert_int_equal(bellows_agent_observe_residual(a, N_LAYERS,
				     &r1),
		    BELLOWS_EINVAL);
		assert_int_equal(bellows_agent_observe_residual(a, 2, NULL),
		    BELLOWS_EINVAL);
		assert_int_equal(bellows_agent_step_end(a, NULL), 0);
	}
	assert_int_equal(bellows_agent_window_stats(a, 2, &ls), 0);
	assert_int_equal(ls.resid_steps, 2);
	assert_true(ls.resid_l1 == 3.0 && ls.resid_l2 == 2.0);
	assert_true(fabs(ls.resid_q50 - 0.6) < 1e-12);
	assert_true(fabs(ls.resid_q90 - 1.6) < 1e-12);
	assert_true(fabs(ls.resid_q99 - 2.6) < 1e-12);
	assert_true(ls.resid_floats == 50.0);
	assert_int_equal(bellows_agent_window_stats(a, 0, &ls), 0);
	assert_int_equal(ls.resid_steps, 0);
	assert_true(ls.resid_l2 == 0.0);
	bellows_agent_close(&a);
}

static void
test_agent_without_daemon_trains_on_defaults_and_drops_oldest_reports(
    void **state)
{
	char dir[] = "/tmp/bellows-agent-XXXXXX";
	char control[128];
	char publish[128];
	bellows_agent_config cfg;
	bellows_agent_stats s;
	bellows_decision d;
	bellows_agent *a;
	uint64_t t0;
	fake *f;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(control, sizeof(control), "ipc://%s/control", dir);
	snprintf(publish, sizeof(publish), "ipc://%s/publish", dir);
	config(&cfg, NULL);
	cfg.control = control;
	cfg.publish = publish;
	cfg.window_steps = 1;
	cfg.queue_capacity = 3;
	cfg.decision_timeout_ms = 300;
	a = open_agent(&cfg);

	assert_int_equal(bellows_agent_decision(a, &d), 0);
	assert_int_equal(d.seq, 0);
	assert_int_equal(d.n_layers, N_LAYERS);
	assert_true(d.level[0] == 0.0 && d.level[2] == 0.0);
	assert_true(d.error_bound[1] == 0.0);
	assert_true(d.lr_scale == 1.0);
	assert_int_equal(d.batch_size, 0);
	assert_int_equal(d.compression_off, 0);
	assert_null(d.codec_table);
	assert_string_equal(d.policy, "");
	assert_string_equal(bellows_version(), "0.1.0");

	/* Only the first step waits, for the Welcome that never comes: one
	 * miss, then training goes on at full speed. */
	t0 = now_ms();
	for (int i = 0; i < 10; i++)
		run_step(a, NULL);
	assert_true(now_ms() - t0 >= 300);
	assert_true(now_ms() - t0 < 1300);
	assert_int_equal(bellows_agent_stats_get(a, &s), 0);
	assert_int_equal(s.connected, 0);
	assert_int_equal(s.window, 10);
	assert_int_equal(s.step, 10);
	assert_int_equal(s.reports_sent, 0);
	assert_int_equal(s.reports_dropped, 7);
	assert_int_equal(s.decision_misses, 1);

	/* The daemon appears: the three newest reports reach it. */
	f = fake_start(control, publish);
	STATS_WAIT(a, s, s.connected && s.reports_sent == 3);
	FAKE_WAIT(f, f->n_reports == 3);
	pthread_mutex_lock(&f->mu);
	assert_int_equal(f->reports[0].u.report.window, 7);
	assert_int_equal(f->reports[2].u.report.window, 9);
	assert_int_equal(f->reports[2].u.report.timings.reports_dropped, 6);
	assert_int_equal(f->last_hello.u.hello.last_window, 10);
	assert_int_equal(f->last_hello.u.hello.step, 10);
	pthread_mutex_unlock(&f->mu);
	assert_int_equal(s.reconnects, 0);

	bellows_agent_close(&a);
	fake_stop(f);
	snprintf(control, sizeof(control), "%s/control", dir);
	unlink(control);
	snprintf(publish, sizeof(publish), "%s/publish", dir);
	unlink(publish);
	rmdir(dir);
}

static void
test_hello_carries_the_layer_table_and_the_state(void **state)
{
	bellows_agent_config cfg;
	bellows_agent *a;
	com_hello *h;
	fake *f;

	(void)state;
	f = fake_start(NULL, NULL);
	pthread_mutex_lock(&f->mu);
	f->silent = true;
	pthread_mutex_unlock(&f->mu);
	config(&cfg, f);
	cfg.start_step = 100;
	a = open_agent(&cfg);
	FAKE_WAIT(f, f->hellos >= 1);

	pthread_mutex_lock(&f->mu);
	h = &f->last_hello.u.hello;
	assert_int_equal(f->last_hello.type, COM_MSG_HELLO);
	assert_int_equal(f->last_hello.major, BELLOWS_PROTO_MAJOR);
	assert_string_equal(h->job, "job");
	assert_int_equal(h->rank, 1);
	assert_int_equal(h->world, 2);
	assert_int_equal(h->n_layers, N_LAYERS);
	assert_string_equal(h->layers[0].name, "conv.weight");
	assert_int_equal(h->layers[0].numel, 18);
	assert_int_equal(h->layers[0].ndim, 3);
	assert_int_equal(h->layers[0].shape[0], 2);
	assert_int_equal(h->layers[0].shape[2], 3);
	assert_string_equal(h->layers[1].name, "conv.bias");
	assert_int_equal(h->layers[1].numel, 7);
	assert_string_equal(h->layers[2].name, "fc.weight");
	assert_int_equal(h->layers[2].shape[0], 5);
	assert_string_equal(h->agent_version, "0.1.0");
	assert_int_equal(h->step, 100);
	assert_int_not_equal(h->incarnation, 0);
	assert_int_equal(h->in_force.seq, 0);
	assert_int_equal(h->in_force.n_layers, N_LAYERS);
	assert_int_equal(h->last_window, 0);
	pthread_mutex_unlock(&f->mu);

	bellows_agent_close(&a);
	fake_stop(f);
}

static void
test_decision_from_welcome_is_in_force_from_its_apply_step_exactly(void **state)
{
	bellows_agent_config cfg;
	bellows_agent_stats s;
	bellows_decision d;
	bellows_agent *a;
	const uint8_t *table;
	size_t table_len;
	com_decision *made;
	fake *f;

	(void)state;
	f = fake_start(NULL, NULL);
	pthread_mutex_lock(&f->mu);
	made = &f->decisions[fake_decide(f, 3, 0, 2.0, 0)];
	/* An opaque codec table, zero and high bytes included. */
	made->codec_table = malloc(4);
	assert_non_null(made->codec_table);
	memcpy(made->codec_table,
	    "G\0\xff"
	    "C",
	    4);
	made->codec_table_len = 4;
	pthread_mutex_unlock(&f->mu);
	config(&cfg, f);
	a = open_agent(&cfg);
	STATS_WAIT(a, s, s.connected && s.decisions == 1);

	for (uint64_t i = 0; i < 6; i++) {
		uint64_t step;

		assert_int_equal(bellows_agent_step_begin(a, &step), 0);
		assert_int_equal(step, i);
		assert_int_equal(bellows_agent_decision(a, &d), 0);
		assert_int_equal(bellows_agent_codec_table(a, &table,
				     &table_len),
		    0);
		if (step < 3) {
			assert_int_equal(d.seq, 0);
			assert_true(bellows_agent_level(a, 1) == 0.0);
			assert_null(table);
			assert_int_equal(table_len, 0);
		} else {
			assert_int_equal(table_len, 4);
			assert_memory_equal(table,
			    "G\0\xff"
			    "C",
			    4);
			assert_ptr_equal(table, d.codec_table);
			assert_int_equal(d.seq, 1);
			assert_int_equal(d.apply_step, 3);
			assert_true(bellows_agent_level(a, 1) == 2.0);
			assert_true(d.error_bound[2] == 0.2);
			assert_true(d.lr_scale == 1.0);
			assert_string_equal(d.policy, "fixed");
			assert_string_equal(d.reason, "the test says so");
		}
		assert_int_equal(bellows_agent_step_end(a, NULL), 0);
		assert_int_equal(bellows_agent_stats_get(a, &s), 0);
		assert_int_equal(s.seq_in_force, step < 3 ? 0 : 1);
	}
	assert_int_equal(bellows_agent_codec_table(a, NULL, &table_len),
	    BELLOWS_EINVAL);
	assert_int_equal(bellows_agent_codec_table(NULL, &table, &table_len),
	    BELLOWS_EINVAL);
	bellows_agent_close(&a);
	fake_stop(f);
}

/* Sets decision i's codec table to the n bytes of t. */
static void
fake_table(fake *f, uint32_t i, const char *t, size_t n)
{
	com_decision *d = &f->decisions[i];

	d->codec_table = malloc(n);
	assert_non_null(d->codec_table);
	memcpy(d->codec_table, t, n);
	d->codec_table_len = n;
}

/* Two tables in a row: from the second's apply step on, the first is
 * the previous one, for data encoded before the switch. */
static void
test_agent_keeps_the_table_before_the_one_in_force(void **state)
{
	bellows_agent_config cfg;
	bellows_agent_stats s;
	bellows_agent *a;
	const uint8_t *cur, *prev;
	size_t cur_len, prev_len;
	fake *f;

	(void)state;
	f = fake_start(NULL, NULL);
	pthread_mutex_lock(&f->mu);
	fake_table(f, fake_decide(f, 2, 0, 1.0, 0), "AAAA", 4);
	fake_table(f, fake_decide(f, 4, 0, 1.0, 0), "BBBBB", 5);
	/* The same table again: no switch, the previous one stays. */
	fake_table(f, fake_decide(f, 6, 0, 2.0, 0), "BBBBB", 5);
	pthread_mutex_unlock(&f->mu);
	config(&cfg, f);
	a = open_agent(&cfg);
	STATS_WAIT(a, s, s.connected && s.decisions == 3);
	for (uint64_t i = 0; i < 8; i++) {
		uint64_t step;

		assert_int_equal(bellows_agent_step_begin(a, &step), 0);
		assert_int_equal(bellows_agent_codec_table(a, &cur, &cur_len),
		    0);
		assert_int_equal(bellows_agent_codec_table_prev(a, &prev,
				     &prev_len),
		    0);
		if (step < 2) {
			assert_null(cur);
			assert_null(prev);
			assert_int_equal(prev_len, 0);
		} else if (step < 4) {
			assert_memory_equal(cur, "AAAA", 4);
			assert_null(prev);
		} else {
			assert_int_equal(cur_len, 5);
			assert_memory_equal(cur, "BBBBB", 5);
			assert_int_equal(prev_len, 4);
			assert_memory_equal(prev, "AAAA", 4);
		}
		assert_int_equal(bellows_agent_step_end(a, NULL), 0);
	}
	assert_int_equal(bellows_agent_codec_table_prev(a, NULL, &prev_len),
	    BELLOWS_EINVAL);
	assert_int_equal(bellows_agent_codec_table_prev(NULL, &prev, &prev_len),
	    BELLOWS_EINVAL);
	bellows_agent_close(&a);
	fake_stop(f);
}

/* A layer flagged BELLOWS_LAYER_EXP_HIST reports its exponent
 * histogram: read back after the window closes, none for the others. */
static void
test_agent_reports_the_exponent_histogram_of_flagged_layers(void **state)
{
	bellows_layer layers[N_LAYERS];
	bellows_agent_config cfg;
	bellows_layer_stats ls;
	const bellows_stat_array *sa = bellows_layer_arrays_schema();
	uint64_t hist[256];
	float g[32];
	bellows_agent *a;
	fake *f;

	(void)state;
	assert_string_equal(sa[0].name, "exp_hist");
	assert_int_equal(sa[0].len, 256);
	assert_int_equal(sa[0].index, 0);
	assert_null(sa[1].name);
	memcpy(layers, test_layers, sizeof(layers));
	layers[2].flags |= BELLOWS_LAYER_EXP_HIST;
	f = fake_start(NULL, NULL);
	config(&cfg, f);
	cfg.layers = layers;
	a = open_agent(&cfg);
	assert_int_equal(bellows_agent_window_array(a, 2, 0, hist, 256),
	    BELLOWS_EAGAIN);
	for (uint64_t s = 0; s < 3; s++) {
		assert_int_equal(bellows_agent_step_begin(a, NULL), 0);
		for (uint32_t l = 0; l < N_LAYERS; l++) {
			grad(g, l, s);
			assert_int_equal(bellows_agent_observe(a, l, g,
					     test_layers[l].numel),
			    0);
		}
		assert_int_equal(bellows_agent_step_end(a, NULL), 0);
	}
	assert_int_equal(bellows_agent_window_end(a), 0);
	assert_int_equal(bellows_agent_window_array(a, 2, 0, hist, 256), 0);
	assert_int_equal(bellows_agent_window_stats(a, 2, &ls), 0);
	{
		uint64_t total = 0, want[256] = { 0 };

		for (uint64_t s = 0; s < 3; s++) {
			grad(g, 2, s);
			for (uint64_t i = 0; i < test_layers[2].numel; i++) {
				uint32_t bits;

				memcpy(&bits, &g[i], sizeof(bits));
				want[(bits >> 23) & 0xff]++;
			}
		}
		for (int b = 0; b < 256; b++)
			total += hist[b];
		assert_int_equal(total, ls.count);
		assert_memory_equal(hist, want, sizeof(want));
	}
	assert_int_equal(bellows_agent_window_array(a, 0, 0, hist, 256),
	    BELLOWS_ENOTFOUND);
	assert_int_equal(bellows_agent_window_array(a, 2, 0, hist, 255),
	    BELLOWS_EINVAL);
	assert_int_equal(bellows_agent_window_array(a, 2, 1, hist, 256),
	    BELLOWS_EINVAL);
	assert_int_equal(bellows_agent_window_array(a, N_LAYERS, 0, hist, 256),
	    BELLOWS_EINVAL);
	bellows_agent_close(&a);
	fake_stop(f);
}

/* The naive reference of one layer's statistics over steps s0..s1. */
static void
check_layer_stats(const com_layer_stats *got, uint32_t l, uint64_t s0,
    uint64_t s1, double beta)
{
	uint64_t n = test_layers[l].numel;
	double acc[32] = { 0 };
	double m[32] = { 0 };
	double sum_sq = 0, abs_sum = 0, max_abs = 0, acc_sq = 0, m_abs = 0;
	uint64_t nonzero = 0;
	float g[32];

	for (uint64_t s = 0; s <= s1; s++) {
		grad(g, l, s);
		for (uint64_t i = 0; i < n; i++) {
			m[i] = beta * m[i] + (1 - beta) * g[i];
			if (s < s0)
				continue;
			acc[i] += g[i];
			sum_sq += (double)g[i] * g[i];
			abs_sum += fabs(g[i]);
			if (fabs(g[i]) > max_abs)
				max_abs = fabs(g[i]);
			nonzero += g[i] != 0.0f;
		}
	}
	for (uint64_t i = 0; i < n; i++) {
		acc_sq += acc[i] * acc[i];
		m_abs += fabs(m[i]);
	}
	assert_int_equal(got->layer, l);
	assert_int_equal(got->count, n * (s1 - s0 + 1));
	assert_int_equal(got->nonzero, nonzero);
	assert_int_equal(got->nonfinite, 0);
	assert_int_equal(got->observed_steps, s1 - s0 + 1);
	assert_true(fabs(got->sum_sq - sum_sq) <= 1e-9 * sum_sq);
	assert_true(fabs(got->abs_sum - abs_sum) <= 1e-9 * abs_sum);
	assert_true(got->max_abs == max_abs);
	if (test_layers[l].flags & BELLOWS_LAYER_NO_ACCUMULATOR)
		assert_true(got->acc_norm == 0.0);
	else
		assert_true(
		    fabs(got->acc_norm - sqrt(acc_sq)) <= 1e-6 * sqrt(acc_sq));
	if (test_layers[l].flags & BELLOWS_LAYER_MOMENTUM)
		assert_true(fabs(got->momentum_abs_mean - m_abs / n) <=
		    1e-6 * (m_abs / n));
	else
		assert_true(got->momentum_abs_mean == 0.0);
}

static void
test_report_per_window_carries_correct_statistics_and_timings(void **state)
{
	bellows_agent_config cfg;
	bellows_agent_stats s;
	bellows_agent *a;
	com_report *r;
	fake *f;

	(void)state;
	f = fake_start(NULL, NULL);
	pthread_mutex_lock(&f->mu);
	f->auto_decide = true;
	pthread_mutex_unlock(&f->mu);
	config(&cfg, f);
	cfg.window_steps = 2;
	a = open_agent(&cfg);
	STATS_WAIT(a, s, s.connected);
	FAKE_WAIT(f, f->subscriptions >= 1);
	{
		bellows_layer_stats ls;

		assert_int_equal(bellows_agent_window_stats(a, 0, &ls),
		    BELLOWS_EAGAIN);
		assert_int_equal(bellows_agent_window_stats(a, N_LAYERS, &ls),
		    BELLOWS_EINVAL);
	}

	for (uint64_t i = 0; i < 4; i++) {
		bellows_step_info info = { .step_ms = 10.0 + (double)i,
			.lr_next = i == 3 ? 0.01 : 0.0,
			.compute_ms = 6.0,
			.comm_ms = 3.0,
			.bytes_sent = 1000,
			.floats_sent = 100,
			.floats_raw = 400,
			.lr = 0.1 * (double)(i + 1),
			.batch_size = 32,
			.epoch = 7 };

		run_step(a, &info);
	}
	/* An explicit window end, with the step time measured. */
	run_step(a, NULL);
	assert_int_equal(bellows_agent_window_end(a), 0);
	FAKE_WAIT(f, f->n_reports == 3);

	pthread_mutex_lock(&f->mu);
	for (uint32_t w = 0; w < 2; w++) {
		r = &f->reports[w].u.report;
		assert_string_equal(r->job, "job");
		assert_int_equal(r->rank, 1);
		assert_int_equal(r->window, w);
		assert_int_equal(r->first_step, 2 * w);
		assert_int_equal(r->last_step, 2 * w + 1);
		assert_int_equal(r->n_layers, N_LAYERS);
		for (uint32_t l = 0; l < N_LAYERS; l++)
			check_layer_stats(&r->layers[l], l, 2 * w, 2 * w + 1,
			    0.9);
		assert_int_equal(r->timings.steps, 2);
		assert_true(r->timings.step_ms == 20.0 + 4.0 * w + 1.0);
		assert_true(r->timings.step_ms_max == 11.0 + 2.0 * w);
		assert_true(r->timings.compute_ms == 12.0);
		assert_true(r->timings.comm_ms == 6.0);
		assert_int_equal(r->timings.bytes_sent, 2000);
		assert_int_equal(r->timings.floats_sent, 200);
		assert_int_equal(r->timings.floats_raw, 800);
		assert_int_equal(r->timings.decision_misses, 0);
		assert_int_equal(r->timings.reports_dropped, 0);
		/* lr is the window's first step's; lr_next 0 reads as
		 * "same as lr"; the window's last step announces the drop. */
		assert_true(fabs(r->lr - 0.1 * (2 * w + 1)) < 1e-12);
		assert_true(fabs(r->lr_next - (w == 0 ? 0.2 : 0.01)) < 1e-12);
		assert_int_equal(r->batch_size, 32);
		assert_int_equal(r->epoch, 7);
	}
	/* Window 0's decision applies at step 1 + 1 + apply_lag = 3. */
	assert_int_equal(f->reports[0].u.report.seq_in_force, 0);
	assert_int_equal(f->reports[1].u.report.seq_in_force, 1);
	r = &f->reports[2].u.report;
	assert_int_equal(r->window, 2);
	assert_int_equal(r->first_step, 4);
	assert_int_equal(r->last_step, 4);
	assert_int_equal(r->timings.steps, 1);
	assert_true(r->timings.step_ms > 0.0);
	check_layer_stats(&r->layers[1], 1, 4, 4, 0.9);
	for (uint32_t l = 0; l < N_LAYERS; l++) {
		bellows_layer_stats ls;

		/* What the agent exposes is what it reported. */
		assert_int_equal(bellows_agent_window_stats(a, l, &ls), 0);
		assert_int_equal(ls.window, 2);
		assert_int_equal(ls.count, r->layers[l].count);
		assert_true(ls.acc_norm == r->layers[l].acc_norm);
		assert_true(ls.sum_sq == r->layers[l].sum_sq);
	}
	pthread_mutex_unlock(&f->mu);

	assert_int_equal(bellows_agent_stats_get(a, &s), 0);
	assert_int_equal(s.window, 3);
	assert_int_equal(s.decision_misses, 0);
	bellows_agent_close(&a);
	fake_stop(f);
}

static void
test_step_begin_waits_for_a_due_decision_until_it_is_published(void **state)
{
	bellows_agent_config cfg;
	bellows_agent_stats s;
	bellows_agent *a;
	uint64_t t0;
	uint64_t waited;
	fake *f;

	(void)state;
	f = fake_start(NULL, NULL);
	pthread_mutex_lock(&f->mu);
	f->auto_decide = true;
	f->decide_delay_ms = 300;
	pthread_mutex_unlock(&f->mu);
	config(&cfg, f);
	cfg.window_steps = 1;
	a = open_agent(&cfg);
	STATS_WAIT(a, s, s.connected);
	FAKE_WAIT(f, f->subscriptions >= 1);

	t0 = now_ms();
	run_step(a, NULL); /* window 0: its decision is due at step 2 */
	run_step(a, NULL);
	assert_true(now_ms() - t0 < 250);
	t0 = now_ms();
	assert_int_equal(bellows_agent_step_begin(a, NULL), 0);
	waited = now_ms() - t0;
	if (waited < 200 || waited > 2000)
		fail_msg("step 2 waited %llu ms", (unsigned long long)waited);
	assert_int_equal(bellows_agent_stats_get(a, &s), 0);
	assert_int_equal(s.seq_in_force, 1);
	assert_int_equal(s.decision_misses, 0);
	assert_true(bellows_agent_level(a, 0) == 4.0);
	assert_int_equal(bellows_agent_step_end(a, NULL), 0);
	bellows_agent_close(&a);
	fake_stop(f);
}

static void
test_timeout_keeps_the_previous_decision_and_counts_a_miss(void **state)
{
	bellows_agent_config cfg;
	bellows_agent_stats s;
	bellows_agent *a;
	uint64_t t0;
	uint64_t waited;
	fake *f;

	(void)state;
	f = fake_start(NULL, NULL);
	pthread_mutex_lock(&f->mu);
	fake_decide(f, 0, 0, 1.0, 0);
	pthread_mutex_unlock(&f->mu);
	config(&cfg, f);
	cfg.window_steps = 2;
	cfg.decision_timeout_ms = 200;
	a = open_agent(&cfg);
	STATS_WAIT(a, s, s.connected);

	run_step(a, NULL);
	run_step(a, NULL); /* window 0 ends at step 1: due at step 3 */
	run_step(a, NULL);
	t0 = now_ms();
	assert_int_equal(bellows_agent_step_begin(a, NULL), 0);
	waited = now_ms() - t0;
	if (waited < 190 || waited > 1500)
		fail_msg("step 3 waited %llu ms", (unsigned long long)waited);
	assert_int_equal(bellows_agent_stats_get(a, &s), 0);
	assert_int_equal(s.decision_misses, 1);
	assert_int_equal(s.seq_in_force, 1);
	assert_true(bellows_agent_level(a, 2) == 1.0);
	assert_true(s.snapshots >= 1);
	assert_int_equal(bellows_agent_step_end(a, NULL), 0);

	/* The missed window is not waited for again. */
	t0 = now_ms();
	run_step(a, NULL);
	assert_true(now_ms() - t0 < 100);
	FAKE_WAIT(f, f->n_reports == 2 && f->snapshot_requests >= 1);
	pthread_mutex_lock(&f->mu);
	assert_int_equal(f->reports[0].u.report.timings.decision_misses, 0);
	assert_int_equal(f->reports[1].u.report.timings.decision_misses, 1);
	pthread_mutex_unlock(&f->mu);
	assert_true(log_contains("without the decision"));
	bellows_agent_close(&a);
	fake_stop(f);
}

static void
test_seq_gap_triggers_a_snapshot_that_fills_it(void **state)
{
	bellows_agent_config cfg;
	bellows_agent_stats s;
	bellows_agent *a;
	fake *f;

	(void)state;
	f = fake_start(NULL, NULL);
	pthread_mutex_lock(&f->mu);
	fake_decide(f, 0, 0, 1.0, 0);
	pthread_mutex_unlock(&f->mu);
	config(&cfg, f);
	cfg.heartbeat_ms = 10000; /* no acks: the gap alone must do it */
	a = open_agent(&cfg);
	STATS_WAIT(a, s, s.connected && s.decisions == 1);
	FAKE_WAIT(f, f->subscriptions >= 1);

	pthread_mutex_lock(&f->mu);
	fake_decide(f, 5, 0, 2.0, 0);        /* seq 2: lost on the way */
	fake_decide(f, 8, 0, 3.0, now_ms()); /* seq 3: published */
	pthread_mutex_unlock(&f->mu);
	STATS_WAIT(a, s, s.decisions == 3);
	assert_true(s.snapshots >= 1);
	FAKE_WAIT(f, f->snapshot_requests >= 1);

	for (uint64_t i = 0; i < 9; i++) {
		double want = i < 5 ? 1.0 : i < 8 ? 2.0 : 3.0;

		assert_int_equal(bellows_agent_step_begin(a, NULL), 0);
		assert_true(bellows_agent_level(a, 0) == want);
		assert_int_equal(bellows_agent_step_end(a, NULL), 0);
	}
	bellows_agent_close(&a);
	fake_stop(f);
}

static void
test_new_daemon_instance_in_heartbeat_ack_makes_the_agent_join_again(
    void **state)
{
	bellows_agent_config cfg;
	bellows_agent_stats s;
	bellows_agent *a;
	fake *f;

	(void)state;
	f = fake_start(NULL, NULL);
	config(&cfg, f);
	cfg.heartbeat_ms = 50;
	a = open_agent(&cfg);
	STATS_WAIT(a, s, s.connected);
	FAKE_WAIT(f, f->heartbeats >= 1);
	assert_int_equal(s.reconnects, 0);

	pthread_mutex_lock(&f->mu);
	f->instance = 0x2222;
	pthread_mutex_unlock(&f->mu);
	FAKE_WAIT(f, f->hellos >= 2);
	STATS_WAIT(a, s, s.connected && s.reconnects == 1);
	assert_true(log_contains("restarted"));
	bellows_agent_close(&a);
	fake_stop(f);
}

/* An agent of `cfg` stepping one window per step, without waiting long
 * for decisions that do not come. */
static bellows_agent *
open_resending_agent(bellows_agent_config *cfg, const fake *f)
{
	config(cfg, f);
	cfg->window_steps = 1;
	cfg->decision_timeout_ms = 20;
	cfg->heartbeat_ms = 50;
	return open_agent(cfg);
}

/* open_resending_agent, connected (and subscribed, if `subscribed`),
 * after `steps` steps whose reports the fake has received. */
static bellows_agent *
open_resending_agent_after(bellows_agent_config *cfg, fake *f, int steps,
    bool subscribed)
{
	bellows_agent_stats s;
	bellows_agent *a = open_resending_agent(cfg, f);

	STATS_WAIT(a, s, s.connected);
	if (subscribed)
		FAKE_WAIT(f, f->subscriptions >= 1);
	for (int i = 0; i < steps; i++)
		run_step(a, NULL);
	FAKE_WAIT(f, f->n_reports == (uint32_t)steps);
	return a;
}

/* The fake restarts as instance `instance`, saying windows below
 * `closed` are closed; returns once the agent joined it again (the
 * reconnects-th time). */
static void
fake_restart(fake *f, bellows_agent *a, uint64_t instance, uint64_t closed,
    uint64_t reconnects)
{
	bellows_agent_stats s;
	uint32_t hellos;

	pthread_mutex_lock(&f->mu);
	hellos = f->hellos;
	f->instance = instance;
	f->windows_closed = closed;
	pthread_mutex_unlock(&f->mu);
	FAKE_WAIT(f, f->hellos > hellos);
	STATS_WAIT(a, s, s.connected && s.reconnects == reconnects);
}

/* The windows of reports from..to-1 the fake received. */
static void
assert_report_windows(fake *f, uint32_t from, const uint64_t *windows,
    uint32_t n)
{
	pthread_mutex_lock(&f->mu);
	for (uint32_t i = 0; i < n; i++) {
		uint64_t w = f->reports[from + i].u.report.window;

		if (w != windows[i]) {
			pthread_mutex_unlock(&f->mu);
			fail_msg("report %u is of window %llu, expected %llu",
			    from + i, (unsigned long long)w,
			    (unsigned long long)windows[i]);
		}
	}
	pthread_mutex_unlock(&f->mu);
}

static void
test_unacknowledged_reports_are_sent_again_to_a_new_instance_all_of_them(
    void **state)
{
	static const uint64_t again[] = { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 };
	bellows_agent_config cfg;
	bellows_agent_stats s;
	bellows_agent *a;
	fake *f;

	(void)state;
	f = fake_start(NULL, NULL);
	a = open_resending_agent_after(&cfg, f, 10, false);

	/* Nothing was acknowledged: every report sent comes again (they are
	 * kept by bytes, keep_reports_mb, not by count), oldest first,
	 * before the next window's report. */
	fake_restart(f, a, 0x2222, 0, 1);
	run_step(a, NULL);
	FAKE_WAIT(f, f->n_reports == 21);
	assert_report_windows(f, 10, again, 11);
	assert_true(log_contains("sending again 10 report(s) from window 0"));
	STATS_WAIT(a, s, s.reports_sent == 11);
	bellows_agent_close(&a);
	fake_stop(f);
}

static void
test_reports_are_sent_again_after_rejoining_the_same_instance(void **state)
{
	static const uint64_t again[] = { 1, 2, 3 };
	bellows_agent_config cfg;
	bellows_agent_stats s;
	bellows_agent *a;
	fake *f;

	(void)state;
	f = fake_start(NULL, NULL);
	a = open_resending_agent_after(&cfg, f, 3, false);

	/* The daemon forgot the rank (ENOTJOINED) but not the job: window
	 * 0 is closed, 1 and 2 come again. */
	pthread_mutex_lock(&f->mu);
	f->windows_closed = 1;
	f->heartbeat_error = BELLOWS_ENOTJOINED;
	pthread_mutex_unlock(&f->mu);
	FAKE_WAIT(f, f->hellos >= 2);
	STATS_WAIT(a, s, s.connected && s.reconnects == 1);
	run_step(a, NULL);
	FAKE_WAIT(f, f->n_reports == 6);
	assert_report_windows(f, 3, again, 3);
	bellows_agent_close(&a);
	fake_stop(f);
}

static void
test_acknowledged_reports_are_not_sent_again(void **state)
{
	static const uint64_t after_ack[] = { 2, 3 };
	bellows_agent_config cfg;
	bellows_agent_stats s;
	bellows_agent *a;
	uint32_t beats;
	fake *f;

	(void)state;
	f = fake_start(NULL, NULL);
	a = open_resending_agent_after(&cfg, f, 3, true);

	/* Heartbeat acks say windows 0 and 1 are closed. The new instance
	 * knows less (a history-less restart): only window 2 comes again. */
	pthread_mutex_lock(&f->mu);
	f->windows_closed = 2;
	beats = f->heartbeats;
	pthread_mutex_unlock(&f->mu);
	FAKE_WAIT(f, f->heartbeats >= beats + 3);
	fake_restart(f, a, 0x2222, 0, 1);
	run_step(a, NULL);
	FAKE_WAIT(f, f->n_reports == 5);
	assert_report_windows(f, 3, after_ack, 2);

	/* The decision answering window 3 is published: windows up to 3
	 * are closed, nothing is left to send again. Window 2, sent again,
	 * might have been late there: it is let go once the heartbeat acks
	 * say it is in, and from then on decisions acknowledge again. */
	pthread_mutex_lock(&f->mu);
	f->windows_closed = 3;
	beats = f->heartbeats;
	pthread_mutex_unlock(&f->mu);
	FAKE_WAIT(f, f->heartbeats >= beats + 3);
	pthread_mutex_lock(&f->mu);
	fake_decide(f, 1000, 4, 2.0, now_ms());
	pthread_mutex_unlock(&f->mu);
	STATS_WAIT(a, s, s.decisions == 1);
	fake_restart(f, a, 0x3333, 0, 2);
	run_step(a, NULL);
	FAKE_WAIT(f, f->n_reports == 6);
	pthread_mutex_lock(&f->mu);
	assert_int_equal(f->reports[5].u.report.window, 4);
	pthread_mutex_unlock(&f->mu);
	assert_false(log_contains("sending again 2"));
	bellows_agent_close(&a);
	fake_stop(f);
}

/* A restarted daemon may record the reports sent again late, and decide
 * on newer windows while it waits for them: its decisions acknowledge
 * none of those until its windows_closed passes them. */
static void
test_reports_sent_again_outlive_a_decision_until_windows_closed_passes(
    void **state)
{
	static const uint64_t again[] = { 0, 1, 2, 3 };
	bellows_agent_config cfg;
	bellows_agent_stats s;
	bellows_agent *a;
	fake *f;

	(void)state;
	f = fake_start(NULL, NULL);
	a = open_resending_agent_after(&cfg, f, 3, true);
	fake_restart(f, a, 0x2222, 0, 1);
	run_step(a, NULL);
	FAKE_WAIT(f, f->n_reports == 7);
	pthread_mutex_lock(&f->mu);
	fake_decide(f, 1000, 4, 2.0, now_ms());
	pthread_mutex_unlock(&f->mu);
	STATS_WAIT(a, s, s.decisions == 1);
	/* Killed again before windows 0..2 were in: all come again. */
	fake_restart(f, a, 0x3333, 0, 2);
	FAKE_WAIT(f, f->n_reports == 11);
	assert_report_windows(f, 7, again, 4);
	bellows_agent_close(&a);
	fake_stop(f);
}

static void
test_a_daemon_of_minor_1_gets_no_report_twice(void **state)
{
	bellows_agent_config cfg;
	bellows_agent *a;
	fake *f;

	(void)state;
	f = fake_start(NULL, NULL);
	pthread_mutex_lock(&f->mu);
	f->minor = 1;
	pthread_mutex_unlock(&f->mu);
	a = open_resending_agent_after(&cfg, f, 3, false);
	fake_restart(f, a, 0x2222, 0, 1);
	run_step(a, NULL);
	FAKE_WAIT(f, f->n_reports == 4);
	pthread_mutex_lock(&f->mu);
	assert_int_equal(f->reports[3].u.report.window, 3);
	pthread_mutex_unlock(&f->mu);
	assert_false(log_contains("sending again"));
	bellows_agent_close(&a);
	fake_stop(f);
}

/* Reads what the fake saw in its last Hello. */
static void
last_hello(fake *f, char *run_id, size_t len, bool *resume)
{
	pthread_mutex_lock(&f->mu);
	snprintf(run_id, len, "%s",
	    f->last_hello.u.hello.run_id != NULL ? f->last_hello.u.hello.run_id
						 : "(null)");
	*resume = f->last_hello.u.hello.resume;
	pthread_mutex_unlock(&f->mu);
}

static void
test_hello_carries_the_launch_and_asks_to_resume_only_once(void **state)
{
	bellows_agent_config cfg;
	bellows_agent_stats s;
	bellows_agent *a;
	char id[64];
	bool resume;
	fake *f;

	(void)state;
	f = fake_start(NULL, NULL);
	config(&cfg, f);
	cfg.heartbeat_ms = 50;
	cfg.run_id = "launch-7";
	cfg.resume = 1;
	cfg.start_step = 40;
	cfg.start_window = 4;
	a = open_agent(&cfg);
	STATS_WAIT(a, s, s.connected);
	last_hello(f, id, sizeof(id), &resume);
	assert_string_equal(id, "launch-7");
	assert_true(resume);
	/* The daemon restarts: the rank rejoins the run it resumed. */
	pthread_mutex_lock(&f->mu);
	f->instance = 0x3333;
	pthread_mutex_unlock(&f->mu);
	FAKE_WAIT(f, f->hellos >= 2);
	last_hello(f, id, sizeof(id), &resume);
	assert_string_equal(id, "launch-7");
	assert_false(resume);
	bellows_agent_close(&a);
	fake_stop(f);
}

static void
test_launch_identity_comes_from_the_environment_and_is_checked(void **state)
{
	bellows_agent_config cfg;
	bellows_agent_stats s;
	bellows_agent *a;
	char id[64];
	bool resume;
	fake *f;

	(void)state;
	f = fake_start(NULL, NULL);
	config(&cfg, f);
	setenv("TORCHELASTIC_RUN_ID", "elastic-1", 1);
	setenv("BELLOWS_RUN_ID", "", 1);
	a = open_agent(&cfg);
	STATS_WAIT(a, s, s.connected);
	last_hello(f, id, sizeof(id), &resume);
	assert_string_equal(id, "elastic-1");
	assert_false(resume);
	bellows_agent_close(&a);
	/* BELLOWS_RUN_ID comes first. */
	setenv("BELLOWS_RUN_ID", "mine", 1);
	a = open_agent(&cfg);
	FAKE_WAIT(f, f->hellos >= 2);
	last_hello(f, id, sizeof(id), &resume);
	assert_string_equal(id, "mine");
	bellows_agent_close(&a);
	/* torchrun's "none" (no --rdzv-id) is the same in every launch:
	 * no identity. */
	unsetenv("BELLOWS_RUN_ID");
	setenv("TORCHELASTIC_RUN_ID", "none", 1);
	a = open_agent(&cfg);
	FAKE_WAIT(f, f->hellos >= 3);
	last_hello(f, id, sizeof(id), &resume);
	assert_string_equal(id, "");
	bellows_agent_close(&a);
	/* A control character in it is refused, naming where it came
	 * from; so is a resume without a start. */
	setenv("BELLOWS_RUN_ID", "bad\nid", 1);
	log_reset();
	assert_int_equal(bellows_agent_open(&cfg, &a), BELLOWS_EINVAL);
	assert_true(log_contains("run identity (BELLOWS_RUN_ID) contains a "
				 "control character"));
	/* So is one that is not UTF-8 (bellowsd would refuse its Hello). */
	setenv("BELLOWS_RUN_ID", "bad\xe9id", 1);
	log_reset();
	assert_int_equal(bellows_agent_open(&cfg, &a), BELLOWS_EINVAL);
	assert_true(log_contains("run identity (BELLOWS_RUN_ID) is not UTF-8"));
	unsetenv("BELLOWS_RUN_ID");
	unsetenv("TORCHELASTIC_RUN_ID");
	cfg.resume = 1;
	assert_int_equal(bellows_agent_open(&cfg, &a), BELLOWS_EINVAL);
	assert_true(log_contains("resume is set but start_step and "
				 "start_window are 0"));
	fake_stop(f);
}

/* ---- CURVE ---- */

/* A folder of certificates for one test: server.key/.pub,
 * client.key/.pub, other.key/.pub (a client bellowsd does not know). */
typedef struct keys {
	char dir[64];
	char path[6][128]; /* server, client, other: .key then .pub */
	com_cert server;
} keys;

enum {
	K_SERVER = 0,
	K_CLIENT = 2,
	K_OTHER = 4,
	K_KEY = 0,
	K_PUB = 1
};

static void
keys_make(keys *k)
{
	static const char *const names[] = { "server", "client", "other" };
	char err[256];

	snprintf(k->dir, sizeof(k->dir), "/tmp/bellows-test-keys-XXXXXX");
	assert_non_null(mkdtemp(k->dir));
	for (int i = 0; i < 3; i++) {
		com_cert c;

		assert_int_equal(com_cert_generate(&c), 0);
		assert_int_equal(com_cert_save(&c, k->dir, names[i], false, err,
				     sizeof(err)),
		    0);
		if (i == 0)
			k->server = c;
		snprintf(k->path[2 * i], sizeof(k->path[0]), "%s/%s.key",
		    k->dir, names[i]);
		snprintf(k->path[2 * i + 1], sizeof(k->path[0]), "%s/%s.pub",
		    k->dir, names[i]);
	}
}

static void
keys_remove(keys *k)
{
	for (int i = 0; i < 6; i++)
		unlink(k->path[i]);
	rmdir(k->dir);
}

static void
test_curve_agent_with_the_right_keys_joins_and_gets_decisions(void **state)
{
	bellows_agent_config cfg;
	bellows_agent_stats s;
	bellows_agent *a;
	keys k;
	fake *f;

	(void)state;
	keys_make(&k);
	f = fake_start_with(NULL, NULL, &k.server, true);
	pthread_mutex_lock(&f->mu);
	f->auto_decide = true;
	pthread_mutex_unlock(&f->mu);
	config(&cfg, f);
	cfg.window_steps = 1;
	cfg.server_key = k.path[K_SERVER + K_PUB];
	cfg.client_key = k.path[K_CLIENT + K_KEY];
	a = open_agent(&cfg);
	STATS_WAIT(a, s, s.connected);
	FAKE_WAIT(f, f->subscriptions >= 1 && f->zap_requests >= 1);
	for (int i = 0; i < 4; i++)
		run_step(a, NULL);
	/* Decisions arrive over the PUB socket only. */
	STATS_WAIT(a, s, s.decisions >= 2);
	assert_int_equal(s.last_error, 0);
	assert_int_equal(s.decision_misses, 0);
	assert_true(bellows_agent_level(a, 0) == 4.0);
	bellows_agent_close(&a);
	fake_stop(f);
	keys_remove(&k);
}

static void
test_curve_wrong_server_key_says_so_within_the_decision_timeout(void **state)
{
	bellows_agent_config cfg;
	bellows_agent_stats s;
	bellows_agent *a;
	uint64_t t0;
	keys k;
	fake *f;

	(void)state;
	keys_make(&k);
	f = fake_start_with(NULL, NULL, &k.server, true);
	config(&cfg, f);
	cfg.decision_timeout_ms = 1000;
	cfg.server_key = k.path[K_OTHER + K_PUB]; /* not the daemon's */
	cfg.client_key = k.path[K_CLIENT + K_KEY];
	t0 = now_ms();
	a = open_agent(&cfg);
	/* The first step waits for a Welcome that never comes, then trains
	 * on defaults; the reason is known by then. */
	run_step(a, NULL);
	assert_true(now_ms() - t0 < 3000);
	assert_int_equal(bellows_agent_stats_get(a, &s), 0);
	assert_false(s.connected);
	assert_int_equal(s.last_error, BELLOWS_ECONFIG);
	assert_non_null(
	    strstr(s.last_error_text, "no answer: wrong server key?"));
	assert_true(log_contains("no answer: wrong server key?"));
	assert_int_equal(bellows_agent_decision(a, &(bellows_decision){ 0 }),
	    0);
	assert_true(bellows_agent_level(a, 0) == 0.0);
	pthread_mutex_lock(&f->mu);
	assert_int_equal(f->hellos, 0);
	pthread_mutex_unlock(&f->mu);
	bellows_agent_close(&a);
	fake_stop(f);
	keys_remove(&k);
}

static void
test_curve_refused_client_key_says_so_and_trains_on(void **state)
{
	bellows_agent_config cfg;
	bellows_agent_stats s;
	bellows_agent *a;
	keys k;
	fake *f;

	(void)state;
	keys_make(&k);
	f = fake_start_with(NULL, NULL, &k.server, true);
	pthread_mutex_lock(&f->mu);
	f->zap_refuse = true;
	pthread_mutex_unlock(&f->mu);
	config(&cfg, f);
	cfg.decision_timeout_ms = 1000;
	cfg.server_key = k.path[K_SERVER + K_PUB];
	cfg.client_key = k.path[K_OTHER + K_KEY];
	a = open_agent(&cfg);
	run_step(a, NULL);
	assert_int_equal(bellows_agent_stats_get(a, &s), 0);
	assert_false(s.connected);
	assert_int_equal(s.last_error, BELLOWS_ECONFIG);
	assert_non_null(
	    strstr(s.last_error_text, "bellowsd refused this client's key"));
	assert_true(log_contains("bellowsd refused this client's key"));
	run_step(a, NULL);
	pthread_mutex_lock(&f->mu);
	assert_int_equal(f->hellos, 0);
	assert_true(f->zap_requests >= 1);
	pthread_mutex_unlock(&f->mu);
	bellows_agent_close(&a);
	fake_stop(f);
	keys_remove(&k);
}

static void
test_curve_keys_come_from_the_environment_and_come_in_pairs(void **state)
{
	char garbled[160];
	FILE *fp;
	bellows_agent_config cfg;
	bellows_agent_stats s;
	bellows_agent *a;
	keys k;
	fake *f;

	(void)state;
	keys_make(&k);
	f = fake_start_with(NULL, NULL, &k.server, true);
	config(&cfg, f);
	setenv("BELLOWS_SERVER_KEY", k.path[K_SERVER + K_PUB], 1);
	setenv("BELLOWS_CLIENT_KEY", k.path[K_CLIENT + K_KEY], 1);
	a = open_agent(&cfg);
	STATS_WAIT(a, s, s.connected);
	assert_true(log_contains("CURVE: server key"));
	bellows_agent_close(&a);

	/* One without the other, either way round. */
	unsetenv("BELLOWS_CLIENT_KEY");
	log_reset();
	assert_int_equal(bellows_agent_open(&cfg, &a), BELLOWS_EINVAL);
	assert_true(log_contains("BELLOWS_SERVER_KEY is set"));
	assert_true(log_contains("but client_key (BELLOWS_CLIENT_KEY) is not"));
	unsetenv("BELLOWS_SERVER_KEY");
	cfg.client_key = k.path[K_CLIENT + K_KEY];
	log_reset();
	assert_int_equal(bellows_agent_open(&cfg, &a), BELLOWS_EINVAL);
	assert_true(log_contains("client_key is set"));

	/* Files that do not load are named; a public certificate is not
	 * a client's key. */
	cfg.server_key = "/nonexistent/server.pub";
	log_reset();
	assert_int_equal(bellows_agent_open(&cfg, &a), BELLOWS_EINVAL);
	assert_true(log_contains("server_key /nonexistent/server.pub"));
	cfg.server_key = k.path[K_SERVER + K_PUB];
	cfg.client_key = k.path[K_CLIENT + K_PUB];
	log_reset();
	assert_int_equal(bellows_agent_open(&cfg, &a), BELLOWS_EINVAL);
	assert_true(log_contains("is a public certificate"));
	snprintf(garbled, sizeof(garbled), "%s/garbled.key", k.dir);
	fp = fopen(garbled, "w");
	assert_non_null(fp);
	fputs("curve\n    secret-key = \"not z85\"\n", fp);
	fclose(fp);
	cfg.client_key = garbled;
	log_reset();
	assert_int_equal(bellows_agent_open(&cfg, &a), BELLOWS_EINVAL);
	assert_true(log_contains("client_key "));
	assert_true(log_contains("garbled.key"));
	unlink(garbled);
	assert_null(a);
	fake_stop(f);
	keys_remove(&k);
}

static void
test_curve_agent_against_a_plain_daemon_says_so(void **state)
{
	bellows_agent_config cfg;
	bellows_agent_stats s;
	bellows_agent *a;
	keys k;
	fake *f;

	(void)state;
	keys_make(&k);
	f = fake_start(NULL, NULL);
	config(&cfg, f);
	cfg.decision_timeout_ms = 1000;
	cfg.server_key = k.path[K_SERVER + K_PUB];
	cfg.client_key = k.path[K_CLIENT + K_KEY];
	a = open_agent(&cfg);
	run_step(a, NULL);
	assert_int_equal(bellows_agent_stats_get(a, &s), 0);
	assert_false(s.connected);
	assert_int_equal(s.last_error, BELLOWS_ECONFIG);
	assert_non_null(strstr(s.last_error_text, "no answer"));
	bellows_agent_close(&a);
	fake_stop(f);
	keys_remove(&k);
}

static void
test_enotjoined_error_makes_the_agent_join_again(void **state)
{
	bellows_agent_config cfg;
	bellows_agent_stats s;
	bellows_agent *a;
	fake *f;

	(void)state;
	f = fake_start(NULL, NULL);
	config(&cfg, f);
	cfg.heartbeat_ms = 50;
	a = open_agent(&cfg);
	STATS_WAIT(a, s, s.connected);

	pthread_mutex_lock(&f->mu);
	f->heartbeat_error = BELLOWS_ENOTJOINED;
	pthread_mutex_unlock(&f->mu);
	FAKE_WAIT(f, f->hellos >= 2);
	STATS_WAIT(a, s, s.connected && s.reconnects == 1);
	assert_int_equal(s.last_error, BELLOWS_ENOTJOINED);
	assert_string_equal(s.last_error_text, "who are you");
	bellows_agent_close(&a);
	fake_stop(f);
}

static void
test_eversion_error_text_is_exposed_and_joining_stops(void **state)
{
	bellows_agent_config cfg;
	bellows_agent_stats s;
	bellows_agent *a;
	fake *f;

	(void)state;
	f = fake_start(NULL, NULL);
	pthread_mutex_lock(&f->mu);
	f->hello_error = BELLOWS_EVERSION;
	f->hello_error_text = "bellowsd speaks protocol 2.0";
	pthread_mutex_unlock(&f->mu);
	config(&cfg, f);
	a = open_agent(&cfg);
	STATS_WAIT(a, s, s.last_error == BELLOWS_EVERSION);
	assert_string_equal(s.last_error_text, "bellowsd speaks protocol 2.0");
	assert_int_equal(s.connected, 0);

	/* Training goes on, and no Hello follows the refusal. */
	for (int i = 0; i < 3; i++)
		run_step(a, NULL);
	usleep(1300 * 1000);
	pthread_mutex_lock(&f->mu);
	assert_int_equal(f->hellos, 1);
	pthread_mutex_unlock(&f->mu);
	assert_true(log_contains("bellowsd speaks protocol 2.0"));
	bellows_agent_close(&a);
	fake_stop(f);
}

static void
test_ebusy_error_retries_hello_about_every_second(void **state)
{
	bellows_agent_config cfg;
	bellows_agent_stats s;
	bellows_agent *a;
	uint64_t gap;
	fake *f;

	(void)state;
	f = fake_start(NULL, NULL);
	pthread_mutex_lock(&f->mu);
	f->hello_error = BELLOWS_EBUSY;
	f->hello_error_text = "rank 1 is held by a live peer";
	pthread_mutex_unlock(&f->mu);
	config(&cfg, f);
	a = open_agent(&cfg);
	FAKE_WAIT(f, f->hellos >= 2);
	STATS_WAIT(a, s, s.last_error == BELLOWS_EBUSY);
	assert_int_equal(s.connected, 0);
	pthread_mutex_lock(&f->mu);
	gap = f->hello_ms[1] - f->hello_ms[0];
	/* Once the rank is free, the next Hello joins. */
	f->hello_error = 0;
	pthread_mutex_unlock(&f->mu);
	if (gap < 800 || gap > 1500)
		fail_msg("hello retried after %llu ms",
		    (unsigned long long)gap);
	STATS_WAIT(a, s, s.connected);
	bellows_agent_close(&a);
	fake_stop(f);
}

static void
test_malformed_frames_from_the_daemon_are_dropped(void **state)
{
	bellows_agent_config cfg;
	bellows_agent_stats s;
	bellows_agent *a;
	fake *f;

	(void)state;
	f = fake_start(NULL, NULL);
	pthread_mutex_lock(&f->mu);
	f->garbage = true;
	fake_decide(f, 0, 0, 5.0, 0);
	pthread_mutex_unlock(&f->mu);
	config(&cfg, f);
	a = open_agent(&cfg);
	STATS_WAIT(a, s, s.connected && s.decisions == 1);
	assert_true(log_contains("dropped"));
	assert_int_equal(bellows_agent_step_begin(a, NULL), 0);
	assert_true(bellows_agent_level(a, 0) == 5.0);
	assert_int_equal(bellows_agent_step_end(a, NULL), 0);
	bellows_agent_close(&a);
	fake_stop(f);
}

static void
test_close_says_bye(void **state)
{
	bellows_agent_config cfg;
	bellows_agent_stats s;
	bellows_agent *a;
	fake *f;

	(void)state;
	f = fake_start(NULL, NULL);
	config(&cfg, f);
	a = open_agent(&cfg);
	STATS_WAIT(a, s, s.connected);
	bellows_agent_close(&a);
	assert_null(a);
	FAKE_WAIT(f, f->byes == 1);
	fake_stop(f);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(
		    test_open_rejects_each_invalid_field_with_einval),
		cmocka_unit_test(
		    test_calls_out_of_order_or_with_bad_arguments_are_refused),
		cmocka_unit_test(
		    test_a_bucket_observed_at_once_equals_its_gradients_one_by_one),
		cmocka_unit_test(
		    test_timing_and_activation_calls_refuse_bad_arguments),
		cmocka_unit_test(
		    test_window_stats_expose_the_activation_and_send_fields),
		cmocka_unit_test(
		    test_residual_statistics_are_window_means_and_the_plan_defaults),
		cmocka_unit_test(
		    test_agent_without_daemon_trains_on_defaults_and_drops_oldest_reports),
		cmocka_unit_test(
		    test_hello_carries_the_layer_table_and_the_state),
		cmocka_unit_test(
		    test_decision_from_welcome_is_in_force_from_its_apply_step_exactly),
		cmocka_unit_test(
		    test_agent_keeps_the_table_before_the_one_in_force),
		cmocka_unit_test(
		    test_agent_reports_the_exponent_histogram_of_flagged_layers),
		cmocka_unit_test(
		    test_report_per_window_carries_correct_statistics_and_timings),
		cmocka_unit_test(
		    test_send_mode_follows_the_gate_the_level_the_threshold_and_calibration),
		cmocka_unit_test(
		    test_applied_level_is_the_decided_one_raw_under_the_threshold_or_the_gate),
		cmocka_unit_test(
		    test_applied_levels_given_by_the_trainer_hold_until_the_decision_changes),
		cmocka_unit_test(
		    test_report_carries_activations_send_quartiles_collectives_and_memory),
		cmocka_unit_test(
		    test_report_carries_the_trainers_last_evaluation_of_the_window),
		cmocka_unit_test(
		    test_step_begin_waits_for_a_due_decision_until_it_is_published),
		cmocka_unit_test(
		    test_timeout_keeps_the_previous_decision_and_counts_a_miss),
		cmocka_unit_test(
		    test_seq_gap_triggers_a_snapshot_that_fills_it),
		cmocka_unit_test(
		    test_new_daemon_instance_in_heartbeat_ack_makes_the_agent_join_again),
		cmocka_unit_test(
		    test_unacknowledged_reports_are_sent_again_to_a_new_instance_all_of_them),
		cmocka_unit_test(
		    test_reports_are_sent_again_after_rejoining_the_same_instance),
		cmocka_unit_test(test_acknowledged_reports_are_not_sent_again),
		cmocka_unit_test(
		    test_reports_sent_again_outlive_a_decision_until_windows_closed_passes),
		cmocka_unit_test(test_a_daemon_of_minor_1_gets_no_report_twice),
		cmocka_unit_test(
		    test_hello_carries_the_launch_and_asks_to_resume_only_once),
		cmocka_unit_test(
		    test_launch_identity_comes_from_the_environment_and_is_checked),
		cmocka_unit_test(
		    test_enotjoined_error_makes_the_agent_join_again),
		cmocka_unit_test(
		    test_eversion_error_text_is_exposed_and_joining_stops),
		cmocka_unit_test(
		    test_ebusy_error_retries_hello_about_every_second),
		cmocka_unit_test(
		    test_malformed_frames_from_the_daemon_are_dropped),
		cmocka_unit_test(test_close_says_bye),
		cmocka_unit_test(
		    test_curve_agent_with_the_right_keys_joins_and_gets_decisions),
		cmocka_unit_test(
		    test_curve_wrong_server_key_says_so_within_the_decision_timeout),
		cmocka_unit_test(
		    test_curve_refused_client_key_says_so_and_trains_on),
		cmocka_unit_test(
		    test_curve_keys_come_from_the_environment_and_come_in_pairs),
		cmocka_unit_test(
		    test_curve_agent_against_a_plain_daemon_says_so),
		cmocka_unit_test(
		    test_aggregate_sends_the_groups_report_from_its_lowest_rank_only),
	};

	return cmocka_run_group_tests_name("agent", tests, NULL, NULL);
}
