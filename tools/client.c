/* client - one-request control-socket client, see client.h.
 */
#include "client.h"

#include "clock.h"
#include "codec.h"

#include <bellows/error.h>

#include <errno.h>
#include <stdlib.h>
#include <zmq.h>

struct tool_client {
	void *ctx;         /* ZeroMQ context, owned */
	void *sock;        /* DEALER to bellowsd's ROUTER */
	com_limits limits; /* what a reply may be */
};

int
tool_client_open(const char *endpoint, tool_client **ret_client)
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
	if (c->sock != NULL)
		zmq_close(c->sock);
	if (c->ctx != NULL)
		zmq_ctx_term(c->ctx);
	free(c);
	*client = NULL;
}

/* Waits until the socket is readable or the deadline passes. Returns 1
 * when readable, 0 on timeout, BELLOWS_EIO on failure. */
static int
client_wait(tool_client *c, uint64_t deadline_ms)
{
	for (;;) {
		zmq_pollitem_t item = { c->sock, 0, ZMQ_POLLIN, 0 };
		uint64_t now = com_clock_ms();
		int n;

		if (now >= deadline_ms)
			return 0;
		n = zmq_poll(&item, 1, (long)(deadline_ms - now));
		if (n > 0)
			return 1;
		if (n < 0 && zmq_errno() != EINTR)
			return BELLOWS_EIO;
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

	if ((r = com_codec_encode(req, &buf, &len)) != 0)
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
	r = com_codec_decode(zmq_msg_data(&frame), zmq_msg_size(&frame),
	    &c->limits, &reply);
	zmq_msg_close(&frame);
	if (r != 0) {
		com_msg_fini(&reply);
		return r;
	}
	*ret_reply = reply;
	return 0;
}
