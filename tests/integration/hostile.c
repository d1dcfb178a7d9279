/* hostile - a misbehaving peer for the integration tests.
 *
 * Floods bellowsd's control socket with what a buggy or malicious client
 * might send: random bytes, truncated and multi-frame messages, a wrong
 * protocol version, hellos with huge layer tables or worlds, hellos for
 * unknown jobs, claims on ranks of a live job, reports for ranks it does
 * not hold. It never waits for an answer, so it measures nothing: the test
 * around it checks that a well-behaved job running at the same time is
 * served correctly and that bellowsd counted the drops.
 *
 * usage: hostile ENDPOINT JOB_TO_ATTACK ROUNDS
 */
#include "common/wire.h"
#include "common/msg.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

static uint64_t hostile_rng = 0x9e3779b97f4a7c15u;

static uint64_t
hostile_next(void)
{
	hostile_rng ^= hostile_rng << 13;
	hostile_rng ^= hostile_rng >> 7;
	hostile_rng ^= hostile_rng << 17;
	return hostile_rng;
}

static void
hostile_send_msg(void *sock, com_msg *m)
{
	uint8_t *buf;
	size_t n;

	if (com_wire_encode(m, &buf, &n) == 0) {
		zmq_send(sock, buf, n, ZMQ_DONTWAIT);
		free(buf);
	}
	com_msg_fini(m);
}

static void
hostile_hello(void *sock, const char *job, uint32_t rank, uint32_t world,
    uint32_t n_layers)
{
	com_msg m;

	com_msg_init(&m, COM_MSG_HELLO);
	m.u.hello.job = com_strdup(job);
	m.u.hello.rank = rank;
	m.u.hello.world = world;
	m.u.hello.incarnation = hostile_next();
	m.u.hello.n_layers = n_layers;
	m.u.hello.layers = calloc(n_layers, sizeof(com_layer_info));
	for (uint32_t l = 0; l < n_layers; l++) {
		char name[32];

		snprintf(name, sizeof(name), "l%u", l);
		m.u.hello.layers[l].name = com_strdup(name);
		m.u.hello.layers[l].numel = 1;
	}
	hostile_send_msg(sock, &m);
}

static void
hostile_report(void *sock, const char *job, uint32_t rank, uint64_t window,
    uint32_t layer)
{
	com_msg m;

	com_msg_init(&m, COM_MSG_REPORT);
	m.u.report.job = com_strdup(job);
	m.u.report.rank = rank;
	m.u.report.window = window;
	m.u.report.n_layers = 1;
	m.u.report.layers = calloc(1, sizeof(com_layer_stats));
	m.u.report.layers[0].layer = layer;
	hostile_send_msg(sock, &m);
}

int
main(int argc, char **argv)
{
	void *ctx, *sock;
	uint8_t valid[512], junk[512];
	size_t valid_len = 0;
	long rounds;
	int linger = 0;

	if (argc != 4) {
		fprintf(stderr, "usage: hostile ENDPOINT JOB ROUNDS\n");
		return 2;
	}
	rounds = strtol(argv[3], NULL, 10);
	ctx = zmq_ctx_new();
	sock = zmq_socket(ctx, ZMQ_DEALER);
	zmq_setsockopt(sock, ZMQ_LINGER, &linger, sizeof(linger));
	if (zmq_connect(sock, argv[1]) != 0) {
		fprintf(stderr, "hostile: cannot connect to %s\n", argv[1]);
		return 1;
	}
	{
		com_msg m;
		uint8_t *buf;
		size_t n;

		com_msg_init(&m, COM_MSG_HEARTBEAT);
		m.u.heartbeat.job = com_strdup(argv[2]);
		if (com_wire_encode(&m, &buf, &n) == 0 && n < sizeof(valid)) {
			memcpy(valid, buf, n);
			valid_len = n;
			free(buf);
		}
		com_msg_fini(&m);
	}
	for (long i = 0; i < rounds; i++) {
		size_t n = hostile_next() % sizeof(junk);

		for (size_t k = 0; k < n; k++)
			junk[k] = (uint8_t)hostile_next();
		switch (i % 10) {
		case 0: /* random bytes */
			zmq_send(sock, junk, n, ZMQ_DONTWAIT);
			break;
		case 1: /* empty frame */
			zmq_send(sock, "", 0, ZMQ_DONTWAIT);
			break;
		case 2: /* a valid message split over two frames */
			zmq_send(sock, valid, valid_len / 2,
			    ZMQ_SNDMORE | ZMQ_DONTWAIT);
			zmq_send(sock, valid + valid_len / 2,
			    valid_len - valid_len / 2, ZMQ_DONTWAIT);
			break;
		case 3: /* truncated */
			zmq_send(sock, valid, valid_len - 1 - (i % 3),
			    ZMQ_DONTWAIT);
			break;
		case 4: { /* another major version */
			com_msg m;

			com_msg_init(&m, COM_MSG_STATUS_REQUEST);
			m.major = 99;
			hostile_send_msg(sock, &m);
			break;
		}
		case 5: /* a huge layer table */
			if (i % 100 == 5)
				hostile_hello(sock, "hostile-huge", 0, 2,
				    65536);
			else
				zmq_send(sock, junk, n, ZMQ_DONTWAIT);
			break;
		case 6: /* a world beyond the limits */
			hostile_hello(sock, "hostile-world", 0, 65536, 1);
			break;
		case 7: /* a job nobody runs: legitimate once, then ignored */
			if (i < 200)
				hostile_hello(sock, "hostile-unknown", 0, 1, 1);
			else
				zmq_send(sock, junk, n, ZMQ_DONTWAIT);
			break;
		case 8: /* claim a rank of the live job */
			hostile_hello(sock, argv[2],
			    (uint32_t)(hostile_next() % 4), 4, 1);
			break;
		case 9: /* report for a rank it does not hold */
			hostile_report(sock, argv[2],
			    (uint32_t)(hostile_next() % 8), hostile_next() % 50,
			    (uint32_t)hostile_next());
			break;
		}
		if (i % 1000 == 999) {
			struct timespec ts = { 0, 2000000 };

			nanosleep(&ts, NULL);
		}
	}
	zmq_close(sock);
	zmq_ctx_term(ctx);
	printf("hostile: sent %ld messages\n", rounds);
	return 0;
}
