/* curve_client - a small client of a secured bellowsd for the integration
 * tests: makes certificates, and speaks to bellowsd with given keys (or
 * none) the way an agent or `bellows status` would, printing what it got.
 *
 * usage:
 *   curve_client keygen DIR NAME
 *       writes DIR/NAME.key and DIR/NAME.pub (com_cert_save)
 *   curve_client run CONTROL PUBLISH JOB WORLD RANK [SERVER_PUB CLIENT_KEY]
 *       Hello as RANK of a WORLD-rank job; on a Welcome, reports windows
 *       until a decision arrives on the PUB socket (at most 5 s). Prints
 *       "welcome", then "decision SEQ"; or "error CODE: MESSAGE"; or "no
 *       answer". Exit 0 with a decision, 3 on an Error, 4 without answer
 *       or decision.
 *   curve_client status CONTROL [SERVER_PUB CLIENT_KEY]
 *       STATUS: prints "job NAME" per job, or "error"/"no answer" (exit
 *       3/4).
 *   curve_client listen PUBLISH JOB MS [SERVER_PUB CLIENT_KEY]
 *       subscribes to JOB's decisions for MS milliseconds and prints
 *       "decisions N", then "disconnects N": how often its connection
 *       was closed (the SUB's monitor, ZMQ_EVENT_DISCONNECTED).
 *   (CC_LAYERS=N: Hello with N layers; CC_LINGER_MS=MS: go on reporting
 *   MS after the first decision; CC_TOPIC=PREFIX: SUBs subscribe to that
 *   prefix, not "d:JOB" and its NUL; CC_AFTER=FILE: `listen` counts
 *   the decisions that arrive once FILE exists ("decisions N") apart
 *   from those before ("before N"), and `status` asks
 *   a second time on the same connection once it does, at most 20 s
 *   later.)
 *   curve_client cover CONTROL JOB WORLD RANK COVER MS SERVER_PUB CLIENT_KEY
 *       Hello as RANK, then for MS milliseconds a report every 50 ms
 *       that covers COVER ranks from RANK. Prints "welcome", each
 *       distinct Error reply as "error CODE: MESSAGE", then "errors N".
 *   curve_client garbage CONTROL N
 *       a plain ZeroMQ DEALER (no CURVE) sending N random frames and N
 *       Hellos; never waits for answers.
 */
#include "common/cert.h"
#include "common/clock.h"
#include "common/wire.h"
#include "common/msg.h"
#include "common/zmonitor.h"

#include <bellows/error.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#define CC_WAIT_MS 3000 /* longest wait for a reply */
#define CC_RUN_MS  5000 /* longest wait for a decision */

static const char *cc_topic = ""; /* what a SUB subscribes to */
static size_t cc_topic_len;       /* its bytes */

/* Makes `sock` a CURVE client of the server whose public certificate is
 * at server_pub, with the secret certificate at client_key. */
static int
cc_curve(void *sock, const char *server_pub, const char *client_key)
{
	com_cert srv, cli;
	char err[512];

	if (com_cert_load(server_pub, &srv, err, sizeof(err)) != 0 ||
	    com_cert_load(client_key, &cli, err, sizeof(err)) != 0) {
		fprintf(stderr, "curve_client: %s\n", err);
		return -1;
	}
	zmq_setsockopt(sock, ZMQ_CURVE_SERVERKEY, srv.public_key, 40);
	zmq_setsockopt(sock, ZMQ_CURVE_PUBLICKEY, cli.public_key, 40);
	zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, cli.secret_key, 40);
	return 0;
}

static void *
cc_socket(void *ctx, int type, const char *ep, int argc, char **argv, int at)
{
	void *s = zmq_socket(ctx, type);
	int linger = 0;

	zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof(linger));
	if (argc > at + 1 && cc_curve(s, argv[at], argv[at + 1]) != 0)
		exit(2);
	if (type == ZMQ_SUB)
		zmq_setsockopt(s, ZMQ_SUBSCRIBE, cc_topic, cc_topic_len);
	if (zmq_connect(s, ep) != 0) {
		fprintf(stderr, "curve_client: connect %s: %s\n", ep,
		    zmq_strerror(zmq_errno()));
		exit(2);
	}
	return s;
}

static void
cc_send(void *sock, com_msg *m)
{
	uint8_t *buf;
	size_t n;

	if (com_wire_encode(m, &buf, &n) == 0) {
		zmq_send(sock, buf, n, ZMQ_DONTWAIT);
		free(buf);
	}
	com_msg_fini(m);
}

/* Waits up to ms for one message on sock into *m. 0, or -1. */
static int
cc_recv(void *sock, uint32_t ms, com_msg *m)
{
	zmq_pollitem_t it = { .socket = sock, .events = ZMQ_POLLIN };
	com_limits lim;
	zmq_msg_t f;
	int more = 0, r;
	size_t more_len = sizeof(more);

	com_limits_default(&lim);
	if (zmq_poll(&it, 1, (long)ms) <= 0)
		return -1;
	zmq_msg_init(&f);
	zmq_msg_recv(&f, sock, 0);
	zmq_getsockopt(sock, ZMQ_RCVMORE, &more, &more_len);
	if (more) { /* a publication: the topic came first */
		zmq_msg_close(&f);
		zmq_msg_init(&f);
		zmq_msg_recv(&f, sock, 0);
	}
	r = com_wire_decode(zmq_msg_data(&f), zmq_msg_size(&f), &lim, m);
	zmq_msg_close(&f);
	return r == 0 ? 0 : -1;
}

static void
cc_hello(com_msg *m, const char *job, uint32_t world, uint32_t rank)
{
	com_msg_init(m, COM_MSG_HELLO);
	m->u.hello.job = com_strdup(job);
	m->u.hello.agent_version = com_strdup("curve_client");
	m->u.hello.rank = rank;
	m->u.hello.world = world;
	m->u.hello.incarnation = 0x5eed0000u + rank;
	/* CC_LAYERS: a table of that many layers (1 by default), to
	 * conflict with a job's. */
	uint32_t n = getenv("CC_LAYERS") != NULL
	    ? (uint32_t)atoi(getenv("CC_LAYERS"))
	    : 1;

	if (n == 0)
		n = 1;
	m->u.hello.n_layers = n;
	m->u.hello.layers = calloc(n, sizeof(com_layer_info));
	for (uint32_t l = 0; l < n; l++) {
		char name[32];

		snprintf(name, sizeof(name), "fc%u.weight", l);
		m->u.hello.layers[l].name = com_strdup(name);
		m->u.hello.layers[l].numel = 64;
		m->u.hello.layers[l].ndim = 2;
		m->u.hello.layers[l].shape[0] = 8;
		m->u.hello.layers[l].shape[1] = 8;
	}
}

static void
cc_report_cover(void *sock, const char *job, uint32_t rank, uint32_t cover,
    uint64_t window)
{
	com_msg m;

	com_msg_init(&m, COM_MSG_REPORT);
	m.u.report.job = com_strdup(job);
	m.u.report.rank = rank;
	m.u.report.ranks = cover;
	m.u.report.window = window;
	m.u.report.first_step = window * 4;
	m.u.report.last_step = window * 4 + 3;
	m.u.report.n_layers = 1;
	m.u.report.layers = calloc(1, sizeof(com_layer_stats));
	m.u.report.layers[0].count = 64;
	m.u.report.layers[0].sum_sq = 1.0;
	m.u.report.layers[0].acc_norm = 1.0;
	m.u.report.timings.steps = 4;
	m.u.report.timings.step_ms = 40.0;
	m.u.report.lr = 0.1;
	cc_send(sock, &m);
}

static void
cc_report(void *sock, const char *job, uint32_t rank, uint64_t window)
{
	cc_report_cover(sock, job, rank, 1, window);
}

/* True once the file CC_AFTER names exists (at once without CC_AFTER). */
static int
cc_after(void)
{
	const char *f = getenv("CC_AFTER");
	FILE *fp;

	if (f == NULL)
		return 1;
	if ((fp = fopen(f, "r")) == NULL)
		return 0;
	fclose(fp);
	return 1;
}

/* Prints an Error reply or "no answer"; returns the exit code. */
static int
cc_not_ok(int got, const com_msg *m)
{
	if (got != 0) {
		printf("no answer\n");
		return 4;
	}
	if (m->type == COM_MSG_ERROR) {
		printf("error %d: %s\n", m->u.error.code,
		    m->u.error.message != NULL ? m->u.error.message : "");
		return 3;
	}
	printf("unexpected %s\n", com_msg_type_name(m->type));
	return 4;
}

static int
cc_run(void *ctx, int argc, char **argv)
{
	const char *job = argv[4];
	uint32_t world = (uint32_t)atoi(argv[5]),
		 rank = (uint32_t)atoi(argv[6]);
	void *ctl = cc_socket(ctx, ZMQ_DEALER, argv[2], argc, argv, 7);
	void *sub = cc_socket(ctx, ZMQ_SUB, argv[3], argc, argv, 7);
	uint64_t until;
	com_msg m;
	int got, rc = 4;

	cc_hello(&m, job, world, rank);
	cc_send(ctl, &m);
	got = cc_recv(ctl, CC_WAIT_MS, &m);
	if (got != 0 || m.type != COM_MSG_WELCOME) {
		rc = cc_not_ok(got, &m);
		if (got == 0)
			com_msg_fini(&m);
		goto out;
	}
	com_msg_fini(&m);
	printf("welcome\n");
	fflush(stdout);
	/* The subscription reaches the PUB on its own schedule: report
	 * window after window until a decision comes through. */
	until = com_clock_ms() + CC_RUN_MS;
	for (uint64_t w = 0; com_clock_ms() < until; w++) {
		cc_report(ctl, job, rank, w);
		while (cc_recv(sub, 20, &m) == 0) {
			if (m.type == COM_MSG_DECISION && rc != 0) {
				printf("decision %llu\n",
				    (unsigned long long)m.u.decision.seq);
				fflush(stdout);
				rc = 0;
				/* CC_LINGER_MS: go on reporting that long,
				 * for listeners. */
				until = com_clock_ms() +
				    (uint64_t)(getenv("CC_LINGER_MS") != NULL
					    ? atol(getenv("CC_LINGER_MS"))
					    : 0);
			}
			com_msg_fini(&m);
		}
		/* Drain replies (Errors would show a refusal). */
		while (cc_recv(ctl, 0, &m) == 0) {
			if (m.type == COM_MSG_ERROR) {
				rc = cc_not_ok(0, &m);
				com_msg_fini(&m);
				goto out;
			}
			com_msg_fini(&m);
		}
	}
	if (rc != 0)
		printf("no decision\n");
out:
	zmq_close(ctl);
	zmq_close(sub);
	return rc;
}

static int
cc_cover(void *ctx, int argc, char **argv)
{
	const char *job = argv[3];
	uint32_t world = (uint32_t)atoi(argv[4]),
		 rank = (uint32_t)atoi(argv[5]),
		 cover = (uint32_t)atoi(argv[6]);
	uint64_t until = com_clock_ms() + (uint64_t)atol(argv[7]);
	void *ctl = cc_socket(ctx, ZMQ_DEALER, argv[2], argc, argv, 8);
	int32_t last = 0;
	uint32_t errors = 0;
	com_msg m;
	int got, rc = 0;

	cc_hello(&m, job, world, rank);
	cc_send(ctl, &m);
	got = cc_recv(ctl, CC_WAIT_MS, &m);
	if (got != 0 || m.type != COM_MSG_WELCOME) {
		rc = cc_not_ok(got, &m);
		if (got == 0)
			com_msg_fini(&m);
		goto out;
	}
	com_msg_fini(&m);
	printf("welcome\n");
	for (uint64_t w = 0; com_clock_ms() < until; w++) {
		cc_report_cover(ctl, job, rank, cover, w);
		while (cc_recv(ctl, 50, &m) == 0) {
			if (m.type == COM_MSG_ERROR) {
				errors++;
				if (m.u.error.code != last)
					cc_not_ok(0, &m);
				last = m.u.error.code;
			}
			com_msg_fini(&m);
		}
	}
	printf("errors %u\n", errors);
out:
	zmq_close(ctl);
	return rc;
}

/* One STATUS request on ctl: prints the jobs and "status ok", or what
 * came instead; returns the exit code. */
static int
cc_status_once(void *ctl)
{
	com_msg m;
	int got, rc = 0;

	com_msg_init(&m, COM_MSG_STATUS_REQUEST);
	cc_send(ctl, &m);
	got = cc_recv(ctl, CC_WAIT_MS, &m);
	if (got != 0 || m.type != COM_MSG_STATUS_REPLY) {
		rc = cc_not_ok(got, &m);
	} else {
		for (uint32_t i = 0; i < m.u.status_reply.n_jobs; i++)
			printf("job %s\n", m.u.status_reply.jobs[i].job);
		printf("status ok\n");
	}
	if (got == 0)
		com_msg_fini(&m);
	fflush(stdout);
	return rc;
}

static int
cc_status(void *ctx, int argc, char **argv)
{
	void *ctl = cc_socket(ctx, ZMQ_DEALER, argv[2], argc, argv, 3);
	uint64_t until = com_clock_ms() + 20000;
	int rc = cc_status_once(ctl);

	if (rc == 0 && getenv("CC_AFTER") != NULL) {
		while (!cc_after() && com_clock_ms() < until)
			zmq_poll(NULL, 0, 20);
		printf("again\n");
		rc = cc_status_once(ctl);
	}
	zmq_close(ctl);
	return rc;
}

static int
cc_listen(void *ctx, int argc, char **argv)
{
	void *sub = cc_socket(ctx, ZMQ_SUB, argv[2], argc, argv, 5);
	uint64_t until = com_clock_ms() + (uint64_t)atol(argv[4]);
	uint32_t n = 0, before = 0, disconnects = 0;
	void *mon = NULL;
	uint16_t event;
	uint32_t value;
	com_msg m;

	if (com_monitor_open(ctx, sub, ZMQ_EVENT_DISCONNECTED, "listen",
		&mon) != 0) {
		fprintf(stderr, "curve_client: cannot monitor the SUB\n");
		zmq_close(sub);
		return 1;
	}
	while (com_clock_ms() < until) {
		while (com_monitor_recv(mon, &event, &value) == 0)
			disconnects += event == ZMQ_EVENT_DISCONNECTED;
		if (cc_recv(sub, 50, &m) != 0)
			continue;
		if (m.type == COM_MSG_DECISION && m.u.decision.job != NULL &&
		    strcmp(m.u.decision.job, argv[3]) == 0) {
			if (cc_after())
				n++;
			else
				before++;
		}
		com_msg_fini(&m);
	}
	if (getenv("CC_AFTER") != NULL)
		printf("before %u\n", before);
	while (com_monitor_recv(mon, &event, &value) == 0)
		disconnects += event == ZMQ_EVENT_DISCONNECTED;
	printf("decisions %u\n", n);
	printf("disconnects %u\n", disconnects);
	com_monitor_close(sub, &mon);
	zmq_close(sub);
	return 0;
}

static int
cc_garbage(void *ctx, char **argv)
{
	void *ctl = cc_socket(ctx, ZMQ_DEALER, argv[2], 0, argv, 0);
	int n = atoi(argv[3]);
	uint64_t x = 0x9e3779b97f4a7c15u;
	uint8_t buf[64];
	com_msg m;

	for (int i = 0; i < n; i++) {
		for (size_t k = 0; k < sizeof(buf); k++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			buf[k] = (uint8_t)x;
		}
		zmq_send(ctl, buf, (size_t)(x % sizeof(buf)) + 1, ZMQ_DONTWAIT);
		cc_hello(&m, "train-garbage", 1, 0);
		cc_send(ctl, &m);
	}
	/* Let libzmq try to deliver (it cannot: no handshake) before the
	 * socket closes; this measures nothing. */
	zmq_poll(NULL, 0, 500);
	zmq_close(ctl);
	printf("sent %d\n", n);
	return 0;
}

int
main(int argc, char **argv)
{
	void *ctx;
	int rc = 2;

	if (argc >= 4 && strcmp(argv[1], "keygen") == 0) {
		com_cert c;
		char err[512];

		if (com_cert_generate(&c) != 0 ||
		    com_cert_save(&c, argv[2], argv[3], true, err,
			sizeof(err)) != 0) {
			fprintf(stderr, "curve_client: keygen: %s\n", err);
			return 1;
		}
		return 0;
	}
	ctx = zmq_ctx_new();
	/* The SUBs subscribe as agents do, to "d:JOB" and its NUL;
	 * CC_TOPIC=PREFIX subscribes to that prefix instead. */
	if (argc >= 5) {
		static char topic[300];
		const char *job = strcmp(argv[1], "run") == 0 ? argv[4]
							      : argv[3];

		if (getenv("CC_TOPIC") != NULL) {
			snprintf(topic, sizeof(topic), "%s",
			    getenv("CC_TOPIC"));
			cc_topic_len = strlen(topic);
		} else {
			cc_topic_len = (size_t)snprintf(topic, sizeof(topic),
					   "d:%s", job) +
			    1;
		}
		cc_topic = topic;
	}
	if (argc >= 7 && strcmp(argv[1], "run") == 0)
		rc = cc_run(ctx, argc, argv);
	else if (argc >= 8 && strcmp(argv[1], "cover") == 0)
		rc = cc_cover(ctx, argc, argv);
	else if (argc >= 3 && strcmp(argv[1], "status") == 0)
		rc = cc_status(ctx, argc, argv);
	else if (argc >= 5 && strcmp(argv[1], "listen") == 0)
		rc = cc_listen(ctx, argc, argv);
	else if (argc >= 4 && strcmp(argv[1], "garbage") == 0)
		rc = cc_garbage(ctx, argv);
	else
		fprintf(stderr, "usage: see curve_client.c\n");
	fflush(stdout);
	zmq_ctx_term(ctx);
	return rc;
}
