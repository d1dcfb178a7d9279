/* zmonitor - a socket's events on a PAIR, see zmonitor.h. */
#include "zmonitor.h"

#include <bellows/error.h>

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <zmq.h>

int
com_monitor_open(void *ctx, void *sock, int events, const char *tag,
    void **ret_pair)
{
	char ep[96];
	int linger = 0, err;
	void *pair = NULL;

	*ret_pair = NULL;
	snprintf(ep, sizeof(ep), "inproc://bellows-%s-%p", tag, sock);
	if (zmq_socket_monitor(sock, ep, events) != 0)
		return BELLOWS_ESYS;
	if ((pair = zmq_socket(ctx, ZMQ_PAIR)) == NULL ||
	    zmq_setsockopt(pair, ZMQ_LINGER, &linger, sizeof(linger)) != 0 ||
	    zmq_connect(pair, ep) != 0) {
		err = zmq_errno();
		zmq_socket_monitor(sock, NULL, 0);
		if (pair != NULL)
			zmq_close(pair);
		errno = err;
		return BELLOWS_ESYS;
	}
	*ret_pair = pair;
	return 0;
}

int
com_monitor_recv(void *pair, uint16_t *ret_event, uint32_t *ret_value)
{
	zmq_msg_t frame;
	uint16_t event = 0;
	uint32_t value = 0;
	bool ok;

	zmq_msg_init(&frame);
	if (zmq_msg_recv(&frame, pair, ZMQ_DONTWAIT) < 0) {
		zmq_msg_close(&frame);
		return BELLOWS_EAGAIN;
	}
	/* First frame: the event (16 bits) and its value (32), in the
	 * machine's order; then the endpoint's frame. */
	ok = zmq_msg_size(&frame) == 6;
	if (ok) {
		memcpy(&event, zmq_msg_data(&frame), sizeof(event));
		memcpy(&value, (const uint8_t *)zmq_msg_data(&frame) + 2,
		    sizeof(value));
	}
	while (zmq_msg_more(&frame)) {
		zmq_msg_close(&frame);
		zmq_msg_init(&frame);
		if (zmq_msg_recv(&frame, pair, ZMQ_DONTWAIT) < 0)
			break;
	}
	zmq_msg_close(&frame);
	if (!ok)
		return BELLOWS_EPROTO;
	*ret_event = event;
	*ret_value = value;
	return 0;
}

void
com_monitor_close(void *sock, void **pair)
{
	if (*pair == NULL)
		return;
	zmq_socket_monitor(sock, NULL, 0);
	zmq_close(*pair);
	*pair = NULL;
}
