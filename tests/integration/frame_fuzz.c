/* frame_fuzz - live fuzzing of bellowsd's control socket, paced, for the
 * memory test of the integration tests.
 *
 * Sends mutated frames from one connection: valid messages of every
 * request type (Hello, Report, Heartbeat, Bye, SnapshotRequest,
 * StatusRequest) with bits flipped, bytes overwritten or inserted, cut
 * short, or replaced by random bytes. Every BATCH frames it sends a
 * StatusRequest and waits for its StatusReply, so bellowsd has handled
 * everything sent before: the pace is bellowsd's, and no queue builds up
 * in ZeroMQ. Seeded, so two runs send the same frames.
 *
 * usage: frame_fuzz ENDPOINT FRAMES SEED
 *   prints "sent N" at the end; exit 1 when a StatusReply did not come
 *   within 30 s (bellowsd stalled or died).
 */
#include "common/wire.h"
#include "common/msg.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#define FUZZ_BATCH   500   /* frames between two paced StatusRequests */
#define FUZZ_WAIT_MS 30000 /* longest wait for a StatusReply */
#define FUZZ_MAX     4096  /* bytes of a mutated frame at most */
#define FUZZ_KINDS   6     /* kinds of valid messages mutated */

static uint64_t fuzz_rng;

static uint64_t
fuzz_next(void)
{
	fuzz_rng ^= fuzz_rng << 13;
	fuzz_rng ^= fuzz_rng >> 7;
	fuzz_rng ^= fuzz_rng << 17;
	return fuzz_rng;
}

/* A valid message of kind k, varied by the generator. */
static void
fuzz_message(com_msg *m, int k)
{
	static const char *const jobs[] = { "fuzz-a", "fuzz-b", "fuzz-c" };
	const char *job = jobs[fuzz_next() % 3];

	switch (k) {
	case 0:
		com_msg_init(m, COM_MSG_HELLO);
		m->u.hello.job = com_strdup(job);
		m->u.hello.world = 2;
		m->u.hello.rank = (uint32_t)(fuzz_next() % 2);
		m->u.hello.incarnation = fuzz_next();
		m->u.hello.n_layers = 2;
		m->u.hello.layers = calloc(2, sizeof(com_layer_info));
		for (uint32_t l = 0; l < 2; l++) {
			m->u.hello.layers[l].name = com_strdup(l ? "b" : "a");
			m->u.hello.layers[l].numel = 16;
			m->u.hello.layers[l].ndim = 1;
			m->u.hello.layers[l].shape[0] = 16;
		}
		break;
	case 1:
		com_msg_init(m, COM_MSG_REPORT);
		m->u.report.job = com_strdup(job);
		m->u.report.rank = (uint32_t)(fuzz_next() % 2);
		m->u.report.window = fuzz_next() % 64;
		m->u.report.n_layers = 2;
		m->u.report.layers = calloc(2, sizeof(com_layer_stats));
		for (uint32_t l = 0; l < 2; l++) {
			m->u.report.layers[l].layer = l;
			m->u.report.layers[l].count = 16;
			m->u.report.layers[l].sum_sq = 1.0;
		}
		m->u.report.timings.steps = 1;
		break;
	case 2:
		com_msg_init(m, COM_MSG_HEARTBEAT);
		m->u.heartbeat.job = com_strdup(job);
		break;
	case 3:
		com_msg_init(m, COM_MSG_BYE);
		m->u.bye.job = com_strdup(job);
		break;
	case 4:
		com_msg_init(m, COM_MSG_SNAPSHOT_REQUEST);
		m->u.snapshot_request.job = com_strdup(job);
		break;
	default:
		com_msg_init(m, COM_MSG_STATUS_REQUEST);
		break;
	}
}

/* Mutates buf (*len bytes, room for FUZZ_MAX) in place. */
static void
fuzz_mutate(uint8_t *buf, size_t *len)
{
	size_t n = *len;

	switch (fuzz_next() % 5) {
	case 0: /* flip bits */
		for (int i = 0; i < 1 + (int)(fuzz_next() % 4) && n > 0; i++)
			buf[fuzz_next() % n] ^= (uint8_t)(1u
			    << (fuzz_next() % 8));
		break;
	case 1: /* overwrite a byte */
		if (n > 0)
			buf[fuzz_next() % n] = (uint8_t)fuzz_next();
		break;
	case 2: /* insert a byte */
		if (n < FUZZ_MAX) {
			size_t at = n > 0 ? fuzz_next() % n : 0;

			memmove(buf + at + 1, buf + at, n - at);
			buf[at] = (uint8_t)fuzz_next();
			n++;
		}
		break;
	case 3: /* cut short */
		n = n > 0 ? fuzz_next() % n : 0;
		break;
	default: /* random bytes */
		n = fuzz_next() % 256;
		for (size_t i = 0; i < n; i++)
			buf[i] = (uint8_t)fuzz_next();
		break;
	}
	*len = n;
}

/* Sends a StatusRequest and waits for the StatusReply, dropping the
 * replies to fuzzed frames before it. A reply that found the send queue
 * full is dropped by bellowsd, so the request is sent again every
 * second. 0, or -1 without a reply within FUZZ_WAIT_MS. */
static int
fuzz_pace(void *sock, const uint8_t *status, size_t status_len)
{
	zmq_pollitem_t it = { .socket = sock, .events = ZMQ_POLLIN };
	uint64_t waited = 0;
	com_limits lim;

	com_limits_default(&lim);
	zmq_send(sock, status, status_len, 0);
	while (waited < FUZZ_WAIT_MS) {
		zmq_msg_t f;
		com_msg m;
		int r;

		if (zmq_poll(&it, 1, 1000) <= 0) {
			waited += 1000;
			zmq_send(sock, status, status_len, 0);
			continue;
		}
		zmq_msg_init(&f);
		zmq_msg_recv(&f, sock, 0);
		r = com_wire_decode(zmq_msg_data(&f), zmq_msg_size(&f), &lim,
		    &m);
		zmq_msg_close(&f);
		if (r != 0)
			continue;
		r = m.type == COM_MSG_STATUS_REPLY;
		com_msg_fini(&m);
		if (r)
			return 0;
	}
	return -1;
}

int
main(int argc, char **argv)
{
	uint8_t *status, buf[FUZZ_MAX + 1];
	size_t status_len;
	void *ctx, *sock;
	long frames;
	int linger = 0, rc = 0;
	com_msg m;

	if (argc != 4) {
		fprintf(stderr, "usage: frame_fuzz ENDPOINT FRAMES SEED\n");
		return 2;
	}
	frames = strtol(argv[2], NULL, 10);
	fuzz_rng = strtoull(argv[3], NULL, 10) * 2654435761u + 1;
	com_msg_init(&m, COM_MSG_STATUS_REQUEST);
	if (com_wire_encode(&m, &status, &status_len) != 0)
		return 2;
	com_msg_fini(&m);
	ctx = zmq_ctx_new();
	sock = zmq_socket(ctx, ZMQ_DEALER);
	zmq_setsockopt(sock, ZMQ_LINGER, &linger, sizeof(linger));
	if (zmq_connect(sock, argv[1]) != 0) {
		fprintf(stderr, "frame_fuzz: cannot connect to %s\n", argv[1]);
		return 2;
	}
	for (long i = 0; i < frames && rc == 0; i++) {
		int k = (int)(fuzz_next() % FUZZ_KINDS);
		size_t n;
		uint8_t *enc;

		fuzz_message(&m, k);
		if (com_wire_encode(&m, &enc, &n) != 0)
			n = 0;
		com_msg_fini(&m);
		if (n > FUZZ_MAX)
			n = FUZZ_MAX;
		if (n > 0)
			memcpy(buf, enc, n);
		if (n > 0)
			free(enc);
		fuzz_mutate(buf, &n);
		zmq_send(sock, buf, n, 0);
		if ((i + 1) % FUZZ_BATCH == 0 &&
		    fuzz_pace(sock, status, status_len) != 0) {
			fprintf(stderr,
			    "frame_fuzz: no StatusReply after %ld "
			    "frames\n",
			    i + 1);
			rc = 1;
		}
	}
	if (rc == 0 && fuzz_pace(sock, status, status_len) != 0)
		rc = 1;
	printf("sent %ld\n", frames);
	free(status);
	zmq_close(sock);
	zmq_ctx_term(ctx);
	return rc;
}
