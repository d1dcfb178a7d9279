/* stall - a subscriber that stops reading, for the integration tests.
 *
 * Subscribes to one job's decisions and telemetry on bellowsd's publish
 * socket, reads until the job's first decision arrives (so that the
 * subscription is known to be in place), then reads nothing more, as a
 * hung dashboard or a stopped agent would: what bellowsd publishes from
 * then on queues for it. Its own receive queue is one message and its
 * kernel buffer small, so that what queues does so in bellowsd.
 *
 * On SIGUSR1 it catches up as an agent would: it reads what reached it,
 * notes the gaps in the decisions' seq, and asks bellowsd for a snapshot
 * over the control socket, which must bring it to the job's newest
 * decision. It prints one line,
 *   stall: received N decisions, seq A..B, M missing; snapshot to seq S
 * and exits 0 when the snapshot answered, 1 otherwise.
 *
 * usage: stall CONTROL PUBLISH JOB READY_FILE
 * READY_FILE is created once the first decision was read.
 */
#include "common/wire.h"
#include "common/msg.h"

#include <inttypes.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#define STALL_DRAIN_MS 1000 /* catching up ends after this much quiet */
#define STALL_REPLY_MS 5000 /* wait for the snapshot */

typedef struct stall_seen {
	uint64_t n;       /* decisions read */
	uint64_t first;   /* lowest seq read */
	uint64_t last;    /* highest seq read */
	uint64_t missing; /* seqs skipped between first and last */
} stall_seen;

/* Reads one publication (topic, body) if one comes within timeout_ms and
 * folds a decision into *seen. Returns 1 when a message was read, 0
 * otherwise. */
static int
stall_read(void *sub, const com_limits *lim, int timeout_ms, stall_seen *seen)
{
	zmq_pollitem_t it = { .socket = sub, .events = ZMQ_POLLIN };
	zmq_msg_t topic, body;
	com_msg m;

	if (zmq_poll(&it, 1, timeout_ms) <= 0)
		return 0;
	zmq_msg_init(&topic);
	zmq_msg_init(&body);
	if (zmq_msg_recv(&topic, sub, 0) < 0 || !zmq_msg_more(&topic) ||
	    zmq_msg_recv(&body, sub, 0) < 0) {
		zmq_msg_close(&topic);
		zmq_msg_close(&body);
		return 0;
	}
	if (com_wire_decode(zmq_msg_data(&body), zmq_msg_size(&body), lim,
		&m) == 0) {
		if (m.type == COM_MSG_DECISION) {
			uint64_t s = m.u.decision.seq;

			if (seen->n == 0)
				seen->first = s;
			else if (s > seen->last + 1)
				seen->missing += s - seen->last - 1;
			if (s > seen->last)
				seen->last = s;
			seen->n++;
		}
		com_msg_fini(&m);
	}
	zmq_msg_close(&topic);
	zmq_msg_close(&body);
	return 1;
}

/* Asks for the job's snapshot; returns the highest seq in it, 0 if none
 * came. */
static uint64_t
stall_snapshot(void *ctx, const char *control, const char *job,
    const com_limits *lim)
{
	void *dealer = zmq_socket(ctx, ZMQ_DEALER);
	zmq_pollitem_t it = { .socket = dealer, .events = ZMQ_POLLIN };
	int linger = 0;
	uint64_t top = 0;
	uint8_t *buf;
	size_t n;
	com_msg m;

	zmq_setsockopt(dealer, ZMQ_LINGER, &linger, sizeof(linger));
	if (zmq_connect(dealer, control) != 0)
		goto out;
	com_msg_init(&m, COM_MSG_SNAPSHOT_REQUEST);
	m.u.snapshot_request.job = com_strdup(job);
	m.u.snapshot_request.rank = 0;
	if (com_wire_encode(&m, &buf, &n) != 0) {
		com_msg_fini(&m);
		goto out;
	}
	com_msg_fini(&m);
	zmq_send(dealer, buf, n, 0);
	free(buf);
	while (zmq_poll(&it, 1, STALL_REPLY_MS) > 0) {
		zmq_msg_t body;

		zmq_msg_init(&body);
		if (zmq_msg_recv(&body, dealer, 0) >= 0 &&
		    com_wire_decode(zmq_msg_data(&body), zmq_msg_size(&body),
			lim, &m) == 0) {
			if (m.type == COM_MSG_SNAPSHOT) {
				for (uint32_t i = 0;
				     i < m.u.snapshot.n_decisions; i++) {
					uint64_t s = m.u.snapshot.decisions[i]
							 .seq;

					if (s > top)
						top = s;
				}
				com_msg_fini(&m);
				zmq_msg_close(&body);
				break;
			}
			com_msg_fini(&m);
		}
		zmq_msg_close(&body);
	}
out:
	zmq_close(dealer);
	return top;
}

int
main(int argc, char **argv)
{
	char topic_d[300], topic_t[300];
	int one = 1, small = 4096, linger = 0, sig;
	stall_seen seen = { 0 };
	com_limits lim;
	uint64_t top;
	sigset_t set;
	void *ctx, *sub;
	FILE *ready;

	if (argc != 5) {
		fprintf(stderr,
		    "usage: stall CONTROL PUBLISH JOB READY_FILE\n");
		return 2;
	}
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	sigprocmask(SIG_BLOCK, &set, NULL);
	com_limits_default(&lim);
	ctx = zmq_ctx_new();
	sub = zmq_socket(ctx, ZMQ_SUB);
	zmq_setsockopt(sub, ZMQ_RCVHWM, &one, sizeof(one));
	zmq_setsockopt(sub, ZMQ_RCVBUF, &small, sizeof(small));
	zmq_setsockopt(sub, ZMQ_LINGER, &linger, sizeof(linger));
	/* Topics end in their NUL, as bellowsd sends them. */
	snprintf(topic_d, sizeof(topic_d), "d:%s", argv[3]);
	snprintf(topic_t, sizeof(topic_t), "t:%s", argv[3]);
	zmq_setsockopt(sub, ZMQ_SUBSCRIBE, topic_d, strlen(topic_d) + 1);
	zmq_setsockopt(sub, ZMQ_SUBSCRIBE, topic_t, strlen(topic_t) + 1);
	if (zmq_connect(sub, argv[2]) != 0) {
		fprintf(stderr, "stall: cannot connect to %s\n", argv[2]);
		return 1;
	}
	while (seen.n == 0)
		stall_read(sub, &lim, -1, &seen);
	if ((ready = fopen(argv[4], "w")) == NULL)
		return 1;
	fclose(ready);
	/* Stalled: nothing is read until told to catch up. */
	sigwait(&set, &sig);
	while (stall_read(sub, &lim, STALL_DRAIN_MS, &seen))
		;
	top = stall_snapshot(ctx, argv[1], argv[3], &lim);
	/* Those published after the last one that reached it are lost too. */
	if (top > seen.last)
		seen.missing += top - seen.last;
	printf("stall: received %" PRIu64 " decisions, seq %" PRIu64
	       "..%" PRIu64 ", %" PRIu64 " missing; snapshot to seq %" PRIu64
	       "\n",
	    seen.n, seen.first, seen.last, seen.missing, top);
	zmq_close(sub);
	zmq_ctx_term(ctx);
	return top > 0 ? 0 : 1;
}
