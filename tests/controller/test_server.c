/* test_server - bellowsd's sockets, over real ZeroMQ ipc:// endpoints.
 *
 * The server, a job table and the event loop run in the test's thread for
 * bounded turns: a 2 ms timer stops the loop as soon as a client socket
 * the test waits on is readable, or at a deadline. Clients are plain
 * DEALER and SUB sockets speaking the codec's bytes, plus hand-made
 * garbage.
 *
 * Subscriptions propagate asynchronously, so before relying on a SUB the
 * test proves it is live: a one-rank job "probe" closes windows until
 * every SUB (each also subscribed to "d:probe\0") has received one of its
 * decisions. No sleeps.
 *
 * Run with the argument "flood" for the fault test: a peer floods the
 * ROUTER with garbage from another thread while a job keeps getting every
 * decision.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <zmq.h>

#include <bellows/error.h>

#include "common/clock.h"
#include "common/wire.h"
#include "policyhost/config.h"
#include "controller/jobs.h"
#include "policyhost/log.h"
#include "controller/loop.h"
#include "controller/server.h"

#define INSTANCE     77
#define WAIT_MS      5000 /* longest wait for anything expected */
#define FLOOD_FRAMES 20000

static const char config_text[] = "daemon:\n"
				  "  apply_lag: 1\n"
				  "  window_timeout_ms: 60000\n"
				  "  rank_timeout_ms: 60000\n"
				  "  max_world: 8\n"
				  "  max_layers: 16\n"
				  "jobs:\n"
				  "  - policies:\n"
				  "      - type: schedule\n"
				  "        params:\n"
				  "          levels: {0: 2, 3: 1}\n";

typedef struct fixture {
	char dir[64];          /* private temporary directory */
	char path[128];        /* dir/bellows.yaml */
	char control[128];     /* ROUTER endpoint */
	char publish[128];     /* PUB endpoint */
	void *zctx;            /* ZeroMQ context */
	ctl_config *cfg;       /* configuration */
	ctl_server *server;    /* under test */
	ctl_jobs *jobs;        /* its job table */
	ctl_loop *loop;        /* the loop both run in */
	com_limits limits;     /* decode limits */
	void *wait_on[4];      /* the loop stops when one is readable */
	int n_wait;            /* entries in wait_on */
	uint64_t deadline_ms;  /* ... or at this time */
	void *probe;           /* DEALER of the probe job */
	uint64_t probe_window; /* next probe window to report */
} fixture;

/* ---- the daemon side ------------------------------------------------- */

static bool
readable(void *sock)
{
	zmq_pollitem_t it = { .socket = sock, .events = ZMQ_POLLIN };

	return zmq_poll(&it, 1, 0) == 1 && (it.revents & ZMQ_POLLIN);
}

static void
on_tick(ctl_loop *loop, uint64_t now_ms, void *arg)
{
	fixture *f = arg;

	ctl_jobs_tick(f->jobs, now_ms);
	for (int i = 0; i < f->n_wait; i++) {
		if (readable(f->wait_on[i])) {
			ctl_loop_stop(loop);
			return;
		}
	}
	if (now_ms >= f->deadline_ms)
		ctl_loop_stop(loop);
}

/* Runs the daemon until one of n sockets is readable or ms passed.
 * Returns true when a socket became readable. */
static bool
pump_any(fixture *f, void **socks, int n, uint32_t ms)
{
	assert_true(n <= 4);
	for (int i = 0; i < n; i++)
		f->wait_on[i] = socks[i];
	f->n_wait = n;
	f->deadline_ms = com_clock_ms() + ms;
	assert_int_equal(ctl_loop_run(f->loop), 0);
	f->n_wait = 0;
	for (int i = 0; i < n; i++) {
		if (readable(socks[i]))
			return true;
	}
	return false;
}

static bool
pump_until(fixture *f, void *sock, uint32_t ms)
{
	return pump_any(f, &sock, 1, ms);
}

static int
setup(void **state)
{
	fixture *f = calloc(1, sizeof(*f));
	char err[CTL_CONFIG_ERR_MAX];
	FILE *fp;

	if (f == NULL)
		return -1;
	snprintf(f->dir, sizeof(f->dir), "/tmp/bellows-server-XXXXXX");
	if (mkdtemp(f->dir) == NULL)
		return -1;
	snprintf(f->path, sizeof(f->path), "%s/bellows.yaml", f->dir);
	snprintf(f->control, sizeof(f->control), "ipc://%s/control", f->dir);
	snprintf(f->publish, sizeof(f->publish), "ipc://%s/publish", f->dir);
	fp = fopen(f->path, "w");
	if (fp == NULL || fputs(config_text, fp) < 0 || fclose(fp) != 0)
		return -1;
	if (ctl_config_load(f->path, &f->cfg, err, sizeof(err)) != 0) {
		fprintf(stderr, "%s\n", err);
		return -1;
	}
	com_limits_default(&f->limits);
	f->zctx = zmq_ctx_new();
	if (f->zctx == NULL ||
	    ctl_server_open(f->zctx, f->control, f->publish, &f->limits,
		f->cfg->peer_queue_mb, f->cfg->max_layers, INSTANCE, NULL,
		&f->server) != 0 ||
	    ctl_jobs_new(f->cfg, INSTANCE, ctl_server_publish, f->server,
		&f->jobs) != 0 ||
	    ctl_loop_new(&f->loop) != 0)
		return -1;
	ctl_server_set_jobs(f->server, f->jobs);
	if (ctl_server_attach(f->server, f->loop) != 0 ||
	    ctl_loop_add_timer(f->loop, 2, on_tick, f) != 0)
		return -1;
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	fixture *f = *state;
	char file[160];

	if (f->probe != NULL)
		zmq_close(f->probe);
	ctl_loop_destroy(&f->loop);
	ctl_jobs_destroy(&f->jobs);
	ctl_server_close(&f->server);
	assert_null(f->server);
	zmq_ctx_term(f->zctx);
	ctl_config_destroy(&f->cfg);
	unlink(f->path);
	snprintf(file, sizeof(file), "%s/control", f->dir);
	unlink(file);
	snprintf(file, sizeof(file), "%s/publish", f->dir);
	unlink(file);
	assert_int_equal(rmdir(f->dir), 0);
	free(f);
	return 0;
}

/* ---- the client side ------------------------------------------------- */

static void *
dealer_new(fixture *f, const char *id)
{
	void *s = zmq_socket(f->zctx, ZMQ_DEALER);
	int linger = 0;

	assert_non_null(s);
	assert_int_equal(zmq_setsockopt(s, ZMQ_ROUTING_ID, id, strlen(id)), 0);
	assert_int_equal(zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof(linger)),
	    0);
	assert_int_equal(zmq_connect(s, f->control), 0);
	return s;
}

/* A SUB on `topic` (len bytes, NUL included) and on the probe's. */
static void *
sub_new(fixture *f, const char *topic, size_t len)
{
	void *s = zmq_socket(f->zctx, ZMQ_SUB);
	int linger = 0;

	assert_non_null(s);
	assert_int_equal(zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof(linger)),
	    0);
	assert_int_equal(zmq_setsockopt(s, ZMQ_SUBSCRIBE, topic, len), 0);
	assert_int_equal(zmq_setsockopt(s, ZMQ_SUBSCRIBE, "d:probe", 8), 0);
	assert_int_equal(zmq_connect(s, f->publish), 0);
	return s;
}

static void
send_bytes(void *s, const void *buf, size_t len, int flags)
{
	assert_int_equal(zmq_send(s, buf, len, flags), (int)len);
}

/* Encodes and sends m (finalising it). */
static void
send_msg(void *s, com_msg *m)
{
	uint8_t *buf;
	size_t n;

	assert_int_equal(com_wire_encode(m, &buf, &n), 0);
	send_bytes(s, buf, n, 0);
	free(buf);
	com_msg_fini(m);
}

/* Receives one control reply into *m, running the daemon until it
 * arrives. */
static void
recv_reply(fixture *f, void *dealer, com_msg *m)
{
	zmq_msg_t body;
	int r;

	if (!pump_until(f, dealer, WAIT_MS))
		fail_msg("no reply within %d ms", WAIT_MS);
	zmq_msg_init(&body);
	assert_true(zmq_msg_recv(&body, dealer, ZMQ_DONTWAIT) >= 0);
	assert_false(zmq_msg_more(&body));
	r = com_wire_decode(zmq_msg_data(&body), zmq_msg_size(&body),
	    &f->limits, m);
	zmq_msg_close(&body);
	assert_int_equal(r, 0);
}

/* Receives one publication (topic + envelope) already queued on sub.
 * Returns false when there is none. */
static bool
recv_pub(fixture *f, void *sub, char *topic, size_t topic_len, com_msg *m)
{
	zmq_msg_t t, body;
	int r;

	zmq_msg_init(&t);
	if (zmq_msg_recv(&t, sub, ZMQ_DONTWAIT) < 0) {
		zmq_msg_close(&t);
		return false;
	}
	assert_true(zmq_msg_more(&t));
	assert_true(zmq_msg_size(&t) < topic_len);
	memcpy(topic, zmq_msg_data(&t), zmq_msg_size(&t));
	topic[zmq_msg_size(&t)] = '\0';
	zmq_msg_close(&t);
	zmq_msg_init(&body);
	assert_true(zmq_msg_recv(&body, sub, 0) >= 0);
	r = com_wire_decode(zmq_msg_data(&body), zmq_msg_size(&body),
	    &f->limits, m);
	zmq_msg_close(&body);
	assert_int_equal(r, 0);
	return true;
}

static void
hello_msg(com_msg *m, const char *job, uint32_t rank, uint32_t world,
    uint64_t incarnation)
{
	static const char *const names[2] = { "fc.weight", "fc.bias" };
	com_hello *h = &m->u.hello;

	com_msg_init(m, COM_MSG_HELLO);
	h->job = com_strdup(job);
	h->agent_version = com_strdup("0.1.0");
	h->rank = rank;
	h->world = world;
	h->incarnation = incarnation;
	h->n_layers = 2;
	h->layers = calloc(2, sizeof(*h->layers));
	assert_non_null(h->layers);
	for (uint32_t l = 0; l < 2; l++) {
		h->layers[l].name = com_strdup(names[l]);
		h->layers[l].numel = l == 0 ? 64 : 8;
		h->layers[l].ndim = l == 0 ? 2 : 1;
		h->layers[l].shape[0] = 8;
		h->layers[l].shape[1] = 8;
	}
}

static void
report_msg(com_msg *m, const char *job, uint32_t rank, uint64_t window,
    uint64_t seq)
{
	com_report *r = &m->u.report;

	com_msg_init(m, COM_MSG_REPORT);
	r->job = com_strdup(job);
	r->rank = rank;
	r->window = window;
	r->first_step = window * 10;
	r->last_step = window * 10 + 9;
	r->seq_in_force = seq;
	r->n_layers = 2;
	r->layers = calloc(2, sizeof(*r->layers));
	assert_non_null(r->layers);
	r->layers[0] = (com_layer_stats){ .layer = 0,
		.count = 64,
		.acc_norm = 1 };
	r->layers[1] = (com_layer_stats){ .layer = 1,
		.count = 8,
		.acc_norm = 1 };
	r->timings.steps = 10;
	r->timings.step_ms = 100;
}

/* Joins `job` as rank 0 of 1 from `dealer`; checks the Welcome. */
static void
join(fixture *f, void *dealer, const char *job)
{
	com_msg m;

	hello_msg(&m, job, 0, 1, 1);
	send_msg(dealer, &m);
	recv_reply(f, dealer, &m);
	assert_int_equal(m.type, COM_MSG_WELCOME);
	assert_string_equal(m.u.welcome.job, job);
	assert_int_equal(m.u.welcome.instance, INSTANCE);
	assert_int_equal(m.u.welcome.n_decisions, 1);
	assert_int_equal(m.u.welcome.decisions[0].seq, 1);
	com_msg_fini(&m);
}

/* Makes sure every SUB in subs is live and has received everything
 * published before the call: the probe job closes windows until each SUB
 * has received a probe decision published during this call. Everything a
 * SUB receives until then must be the probe's, and is discarded. */
static void
sync_subs(fixture *f, void **subs, int n)
{
	bool live[4] = { false };
	int n_live = 0;
	uint64_t until = com_clock_ms() + WAIT_MS;
	uint64_t want;

	if (f->probe == NULL) {
		f->probe = dealer_new(f, "probe");
		join(f, f->probe, "probe");
	}
	/* Window k's decision has seq k + 2 (seq 1 came with the Hello). */
	want = f->probe_window + 2;
	while (n_live < n) {
		com_msg m;

		if (com_clock_ms() > until)
			fail_msg("subscriptions not live after %d ms", WAIT_MS);
		report_msg(&m, "probe", 0, f->probe_window,
		    f->probe_window + 1);
		f->probe_window++;
		send_msg(f->probe, &m);
		pump_any(f, subs, n, 50);
		for (int i = 0; i < n; i++) {
			char topic[64];

			while (recv_pub(f, subs[i], topic, sizeof(topic), &m)) {
				assert_string_equal(topic, "d:probe");
				assert_int_equal(m.type, COM_MSG_DECISION);
				if (m.u.decision.seq >= want && !live[i]) {
					live[i] = true;
					n_live++;
				}
				com_msg_fini(&m);
			}
		}
	}
}

/* The next publication on sub that is not the probe's, now or soon. */
static void
expect_pub(fixture *f, void *sub, const char *want_topic, com_msg *m)
{
	char topic[64];

	for (;;) {
		if (!readable(sub) && !pump_until(f, sub, WAIT_MS))
			fail_msg("nothing published on '%s'", want_topic);
		assert_true(recv_pub(f, sub, topic, sizeof(topic), m));
		if (strcmp(topic, "d:probe") != 0)
			break;
		com_msg_fini(m);
	}
	assert_string_equal(topic, want_topic);
}

static void
status_of(fixture *f, void *dealer, com_msg *m)
{
	com_msg req;

	com_msg_init(&req, COM_MSG_STATUS_REQUEST);
	send_msg(dealer, &req);
	recv_reply(f, dealer, m);
	assert_int_equal(m->type, COM_MSG_STATUS_REPLY);
}

static const com_peer_status *
peer_named(const com_status_reply *st, const char *id)
{
	for (uint32_t i = 0; i < st->n_peers; i++) {
		if (st->peers[i].peer_len == strlen(id) &&
		    memcmp(st->peers[i].peer, id, strlen(id)) == 0)
			return &st->peers[i];
	}
	return NULL;
}

/* ---- tests ------------------------------------------------------------ */

static void
test_server_welcomes_and_publishes_under_the_exact_topic(void **state)
{
	fixture *f = *state;
	void *subs[2];
	void *agent;
	com_msg m;

	subs[0] = sub_new(f, "d:job", 6);
	subs[1] = sub_new(f, "d:jo", 5); /* a prefix of "job" */
	sync_subs(f, subs, 2);

	agent = dealer_new(f, "agent-0");
	join(f, agent, "job");
	expect_pub(f, subs[0], "d:job", &m);
	assert_int_equal(m.type, COM_MSG_DECISION);
	assert_string_equal(m.u.decision.job, "job");
	assert_int_equal(m.u.decision.seq, 1);
	assert_int_equal(m.u.decision.n_layers, 2);
	assert_true(m.u.decision.level[0] == 2);
	assert_true(m.u.decision.level[1] == 0);
	com_msg_fini(&m);

	/* A window of "job" closes: its decision, seq 2, for window 1. */
	report_msg(&m, "job", 0, 0, 1);
	send_msg(agent, &m);
	expect_pub(f, subs[0], "d:job", &m);
	assert_int_equal(m.u.decision.seq, 2);
	assert_int_equal(m.u.decision.window, 1);
	assert_int_equal(m.u.decision.apply_step, 11);
	com_msg_fini(&m);

	/* "d:jo\0" saw none of it: all it gets until a probe decision
	 * published after job's is the probe's. */
	sync_subs(f, &subs[1], 1);

	zmq_close(agent);
	zmq_close(subs[0]);
	zmq_close(subs[1]);
}

static void
test_server_answers_heartbeats_and_asks_strangers_to_hello(void **state)
{
	fixture *f = *state;
	void *agent = dealer_new(f, "agent-1");
	com_msg m;

	com_msg_init(&m, COM_MSG_HEARTBEAT);
	m.u.heartbeat.job = com_strdup("job");
	m.u.heartbeat.step = 3;
	send_msg(agent, &m);
	recv_reply(f, agent, &m);
	assert_int_equal(m.type, COM_MSG_ERROR);
	assert_int_equal(m.u.error.code, BELLOWS_ENOTJOINED);
	com_msg_fini(&m);

	join(f, agent, "job");
	com_msg_init(&m, COM_MSG_HEARTBEAT);
	m.u.heartbeat.job = com_strdup("job");
	m.u.heartbeat.step = 3;
	m.u.heartbeat.seq_in_force = 1;
	send_msg(agent, &m);
	recv_reply(f, agent, &m);
	assert_int_equal(m.type, COM_MSG_HEARTBEAT_ACK);
	assert_int_equal(m.u.heartbeat_ack.instance, INSTANCE);
	assert_int_equal(m.u.heartbeat_ack.last_seq, 1);
	com_msg_fini(&m);

	com_msg_init(&m, COM_MSG_SNAPSHOT_REQUEST);
	m.u.snapshot_request.job = com_strdup("job");
	send_msg(agent, &m);
	recv_reply(f, agent, &m);
	assert_int_equal(m.type, COM_MSG_SNAPSHOT);
	assert_int_equal(m.u.snapshot.n_decisions, 1);
	assert_int_equal(m.u.snapshot.decisions[0].seq, 1);
	com_msg_fini(&m);
	zmq_close(agent);
}

/* After the loop stops (SIGTERM), what a client had already sent is read
 * and answered: the last heartbeats (or reports and Byes) of a job are
 * not lost to the stop; a flood does not hold the stop past the bound. */
static void
test_server_drain_reads_what_was_sent_before_the_stop(void **state)
{
	fixture *f = *state;
	void *agent = dealer_new(f, "agent-1");
	uint64_t before, after, t0;
	com_msg m;

	join(f, agent, "job");
	ctl_server_counts(f->server, &before, NULL, NULL);
	/* The loop is not running: these wait in the ROUTER (6: fewer than
	 * the replies a connection may have queued, 8). */
	for (int i = 0; i < 6; i++) {
		com_msg_init(&m, COM_MSG_HEARTBEAT);
		m.u.heartbeat.job = com_strdup("job");
		m.u.heartbeat.step = 3 + (uint64_t)i;
		m.u.heartbeat.seq_in_force = 1;
		send_msg(agent, &m);
	}
	assert_int_equal(ctl_server_drain(f->server, 200, 5000, 4096), 6);
	ctl_server_counts(f->server, &after, NULL, NULL);
	assert_int_equal(after - before, 6);
	/* Each was answered, as by the loop. */
	for (int i = 0; i < 6; i++) {
		recv_reply(f, agent, &m);
		assert_int_equal(m.type, COM_MSG_HEARTBEAT_ACK);
		com_msg_fini(&m);
	}
	/* Nothing sent: the quiet time ends it. */
	t0 = com_clock_ms();
	assert_int_equal(ctl_server_drain(f->server, 20, 5000, 4096), 0);
	assert_true(com_clock_ms() - t0 < 2000);
	/* A count bound: 30 sent, 12 read now, the rest later (their
	 * replies beyond the queue's 8 are dropped: not read here). */
	for (int i = 0; i < 30; i++) {
		com_msg_init(&m, COM_MSG_HEARTBEAT);
		m.u.heartbeat.job = com_strdup("job");
		m.u.heartbeat.step = 20 + (uint64_t)i;
		m.u.heartbeat.seq_in_force = 1;
		send_msg(agent, &m);
	}
	assert_int_equal(ctl_server_drain(f->server, 200, 5000, 12), 12);
	assert_int_equal(ctl_server_drain(f->server, 200, 5000, 4096), 18);
	assert_int_equal(ctl_server_drain(NULL, 20, 20, 10), 0);
	zmq_close(agent);
}

static void
test_server_drops_hostile_frames_and_counts_them_per_peer(void **state)
{
	static const uint8_t garbage[] = { 0xff, 0xfe, 0x00, 0x13, 0x37, 'j',
		'u', 'n', 'k' };
	fixture *f = *state;
	void *hostile = dealer_new(f, "hostile");
	void *agent = dealer_new(f, "agent-2");
	const com_status_reply *st;
	const com_peer_status *ps;
	com_msg m;

	/* Nothing to answer for these three. */
	send_bytes(hostile, garbage, sizeof(garbage), 0);
	send_bytes(hostile, "", 0, 0);
	send_bytes(hostile, "a", 1, ZMQ_SNDMORE);
	send_bytes(hostile, "b", 1, ZMQ_SNDMORE);
	send_bytes(hostile, "c", 1, 0);
	/* A message that is not a request. */
	com_msg_init(&m, COM_MSG_TELEMETRY);
	m.u.telemetry.job = com_strdup("job");
	send_msg(hostile, &m);

	/* Another major version: an Error that says why. */
	com_msg_init(&m, COM_MSG_STATUS_REQUEST);
	m.major = BELLOWS_PROTO_MAJOR + 1;
	send_msg(hostile, &m);
	recv_reply(f, hostile, &m);
	assert_int_equal(m.type, COM_MSG_ERROR);
	assert_int_equal(m.u.error.code, BELLOWS_EVERSION);
	{
		char text[64];

		snprintf(text, sizeof(text), "protocol version %d.%d",
		    BELLOWS_PROTO_MAJOR + 1, BELLOWS_PROTO_MINOR);
		assert_non_null(strstr(m.u.error.message, text));
		snprintf(text, sizeof(text), "speaks %d.%d",
		    BELLOWS_PROTO_MAJOR, BELLOWS_PROTO_MINOR);
		assert_non_null(strstr(m.u.error.message, text));
	}
	com_msg_fini(&m);

	/* Valid, but beyond this daemon's limits (max_world 8). */
	hello_msg(&m, "job", 0, 9, 1);
	send_msg(hostile, &m);
	recv_reply(f, hostile, &m);
	assert_int_equal(m.type, COM_MSG_ERROR);
	assert_int_equal(m.u.error.code, BELLOWS_ELIMIT);
	com_msg_fini(&m);

	/* The same peer asks for STATUS: everything above was handled
	 * before it, in order. */
	status_of(f, hostile, &m);
	st = &m.u.status_reply;
	assert_int_equal(st->instance, INSTANCE);
	assert_int_equal(st->dropped, 6);
	assert_int_equal(st->messages, 7);
	ps = peer_named(st, "hostile");
	assert_non_null(ps);
	assert_int_equal(ps->dropped, 6);
	assert_non_null(strstr(ps->last_error, "limit exceeded"));
	assert_null(peer_named(st, "agent-2"));
	com_msg_fini(&m);

	/* A well-behaved peer is served as before. */
	join(f, agent, "job");
	status_of(f, agent, &m);
	assert_int_equal(m.u.status_reply.n_jobs, 1);
	assert_null(peer_named(&m.u.status_reply, "agent-2"));
	com_msg_fini(&m);
	zmq_close(agent);
	zmq_close(hostile);
}

/* A StatusRequest whose length is written in 6 bytes (82 80 80 80 80 00,
 * the shortest form being 02) is malformed for protobuf-c and for
 * bellowsd alike: not answered, counted against its peer, and the peer's
 * next, well-formed request is answered as the first. */
static void
test_server_refuses_a_status_request_with_a_six_byte_length(void **state)
{
	static const uint8_t frame[] = { 0x08, BELLOWS_PROTO_MAJOR, 0x8a, 0x01,
		0x82, 0x80, 0x80, 0x80, 0x80, 0x00, 0x0a, 0x00 };
	fixture *f = *state;
	void *peer = dealer_new(f, "long-length");
	const com_peer_status *ps;
	com_msg m;

	send_bytes(peer, frame, sizeof(frame), 0);
	status_of(f, peer, &m);
	assert_int_equal(m.type, COM_MSG_STATUS_REPLY);
	assert_int_equal(m.u.status_reply.dropped, 1);
	ps = peer_named(&m.u.status_reply, "long-length");
	assert_non_null(ps);
	assert_int_equal(ps->dropped, 1);
	com_msg_fini(&m);
	zmq_close(peer);
}

/* A frame just above the codec's limit reaches bellowsd (the transport
 * lets through up to twice the limit), is refused as oversized and counted
 * against its peer, while a job on another connection keeps getting its
 * decisions and STATUS is answered. */
static void
test_server_counts_a_frame_just_over_the_limit_against_its_peer(void **state)
{
	fixture *f = *state;
	size_t big_len = f->limits.max_msg_bytes + 1;
	uint8_t *big = malloc(big_len);
	void *sub = sub_new(f, "d:steady", 9);
	void *agent = dealer_new(f, "steady-0");
	void *big_peer = dealer_new(f, "big");
	const com_peer_status *ps;
	uint64_t until;
	com_msg m;

	assert_non_null(big);
	memset(big, 0x0a, big_len);
	sync_subs(f, &sub, 1);
	join(f, agent, "steady");
	expect_pub(f, sub, "d:steady", &m);
	com_msg_fini(&m);

	send_bytes(big_peer, big, big_len, 0);
	send_bytes(big_peer, big, big_len, 0);
	free(big);
	/* The job is decided while the big frames come in. */
	for (uint64_t w = 0; w < 3; w++) {
		report_msg(&m, "steady", 0, w, w + 1);
		send_msg(agent, &m);
		expect_pub(f, sub, "d:steady", &m);
		assert_int_equal(m.type, COM_MSG_DECISION);
		assert_int_equal(m.u.decision.seq, w + 2);
		com_msg_fini(&m);
	}
	until = com_clock_ms() + WAIT_MS;
	for (;;) {
		status_of(f, agent, &m);
		ps = peer_named(&m.u.status_reply, "big");
		if (ps != NULL && ps->dropped == 2)
			break;
		if (com_clock_ms() > until)
			fail_msg("big has %llu drops counted",
			    ps != NULL ? (unsigned long long)ps->dropped
				       : 0ull);
		com_msg_fini(&m);
		pump_until(f, agent, 20); /* nothing will come: a pause */
	}
	assert_non_null(strstr(ps->last_error, "message too large"));
	assert_int_equal(m.u.status_reply.dropped, 2);
	assert_null(peer_named(&m.u.status_reply, "steady-0"));
	com_msg_fini(&m);

	/* The peer's connection survived: it is still answered. */
	status_of(f, big_peer, &m);
	assert_int_equal(m.u.status_reply.instance, INSTANCE);
	com_msg_fini(&m);
	zmq_close(big_peer);
	zmq_close(agent);
	zmq_close(sub);
}

/* ---- flood (fault suite) ----------------------------------------------- */

typedef struct flood_arg {
	void *zctx;          /* shared context */
	const char *control; /* endpoint */
	int sent;            /* frames sent */
	atomic_bool done;    /* the flooder has sent everything */
} flood_arg;

static void *
flood_main(void *p)
{
	flood_arg *a = p;
	void *s = zmq_socket(a->zctx, ZMQ_DEALER);
	uint8_t buf[64];
	uint32_t x = 12345;

	if (s == NULL) {
		atomic_store(&a->done, true);
		return NULL;
	}
	zmq_setsockopt(s, ZMQ_ROUTING_ID, "flooder", 7);
	if (zmq_connect(s, a->control) != 0) {
		zmq_close(s);
		atomic_store(&a->done, true);
		return NULL;
	}
	for (int i = 0; i < FLOOD_FRAMES; i++) {
		size_t len = 1 + (size_t)(i % (int)sizeof(buf));

		for (size_t k = 0; k < len; k++) {
			x = x * 1103515245u + 12345u;
			buf[k] = (uint8_t)(x >> 16);
		}
		buf[0] = 0xff; /* never a valid first protobuf tag */
		if (zmq_send(s, buf, len, 0) < 0)
			break;
		a->sent++;
	}
	/* Default linger: close returns, the frames are still delivered. */
	zmq_close(s);
	atomic_store(&a->done, true);
	return NULL;
}

static void
test_server_keeps_serving_a_job_through_a_garbage_flood(void **state)
{
	fixture *f = *state;
	flood_arg fa = { .zctx = f->zctx, .control = f->control };
	void *sub = sub_new(f, "d:steady", 9);
	void *agent = dealer_new(f, "steady-0");
	const com_peer_status *ps = NULL;
	uint64_t until, w;
	pthread_t th;
	com_msg m;

	sync_subs(f, &sub, 1);
	join(f, agent, "steady");
	expect_pub(f, sub, "d:steady", &m);
	com_msg_fini(&m);

	atomic_init(&fa.done, false);
	assert_int_equal(pthread_create(&th, NULL, flood_main, &fa), 0);
	/* Windows keep closing for as long as the flood lasts. */
	for (w = 0; w < 40 || !atomic_load(&fa.done); w++) {
		report_msg(&m, "steady", 0, w, w + 1);
		send_msg(agent, &m);
		expect_pub(f, sub, "d:steady", &m);
		assert_int_equal(m.type, COM_MSG_DECISION);
		assert_int_equal(m.u.decision.seq, w + 2);
		assert_int_equal(m.u.decision.window, w + 1);
		com_msg_fini(&m);
	}
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(fa.sent, FLOOD_FRAMES);
	print_message("%llu windows decided while %d garbage frames came in\n",
	    (unsigned long long)w, FLOOD_FRAMES);

	/* Every garbage frame is counted against the flooder only. */
	until = com_clock_ms() + 10000;
	for (;;) {
		status_of(f, agent, &m);
		ps = peer_named(&m.u.status_reply, "flooder");
		if (ps != NULL && ps->dropped == FLOOD_FRAMES)
			break;
		if (com_clock_ms() > until)
			fail_msg("flooder has %llu drops counted",
			    ps != NULL ? (unsigned long long)ps->dropped
				       : 0ull);
		com_msg_fini(&m);
		pump_until(f, agent, 20); /* nothing will come: a pause */
	}
	assert_non_null(strstr(ps->last_error, "cannot decode"));
	assert_null(peer_named(&m.u.status_reply, "steady-0"));
	assert_int_equal(m.u.status_reply.dropped, FLOOD_FRAMES);
	com_msg_fini(&m);
	zmq_close(agent);
	zmq_close(sub);
}

static void
test_server_tells_local_endpoints_from_network_ones(void **state)
{
	(void)state;
	assert_true(ctl_server_endpoint_local("tcp://127.0.0.1:5555"));
	assert_true(ctl_server_endpoint_local("tcp://127.9.8.7:1"));
	assert_true(ctl_server_endpoint_local("tcp://localhost:5555"));
	assert_true(ctl_server_endpoint_local("tcp://[::1]:5555"));
	assert_true(ctl_server_endpoint_local("ipc:///tmp/bellows/control"));
	assert_true(ctl_server_endpoint_local("inproc://control"));
	assert_false(ctl_server_endpoint_local("tcp://0.0.0.0:5555"));
	assert_false(ctl_server_endpoint_local("tcp://*:5555"));
	assert_false(ctl_server_endpoint_local("tcp://10.0.0.1:5555"));
	assert_false(ctl_server_endpoint_local("tcp://128.0.0.1:5555"));
	assert_false(ctl_server_endpoint_local("tcp://eth0:5555"));
	assert_false(ctl_server_endpoint_local("tcp://[::]:5555"));
	assert_false(ctl_server_endpoint_local("tcp://127.0.0.1;10.0.0.1:5"));
	assert_false(ctl_server_endpoint_local("tcp://[::1:5555"));
	assert_false(ctl_server_endpoint_local("pgm://eth0;239.1.1.1:5555"));
	assert_false(ctl_server_endpoint_local("ws://127.0.0.1:5555"));
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest unit[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
		T(test_server_welcomes_and_publishes_under_the_exact_topic),
		T(test_server_answers_heartbeats_and_asks_strangers_to_hello),
		T(test_server_drain_reads_what_was_sent_before_the_stop),
		T(test_server_drops_hostile_frames_and_counts_them_per_peer),
		T(test_server_refuses_a_status_request_with_a_six_byte_length),
		T(test_server_counts_a_frame_just_over_the_limit_against_its_peer),
		cmocka_unit_test(
		    test_server_tells_local_endpoints_from_network_ones),
	};
	const struct CMUnitTest fault[] = {
		T(test_server_keeps_serving_a_job_through_a_garbage_flood),
#undef T
	};

	/* Drops are logged at most once per peer per minute; keep the
	 * output to what the tests check. */
	ctl_log_set_level(CTL_LOG_WARN);
	if (argc > 1 && strcmp(argv[1], "flood") == 0)
		return cmocka_run_group_tests_name("server flood", fault, NULL,
		    NULL);
	return cmocka_run_group_tests_name("server", unit, NULL, NULL);
}
