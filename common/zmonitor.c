/* zmonitor - a socket's events on a PAIR, see zmonitor.h. */
#include "zmonitor.h"

#include <bellows/error.h>

#include <errno.h>
#include <stdio.h>
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

void
com_monitor_close(void *sock, void **pair)
{
	if (*pair == NULL)
		return;
	zmq_socket_monitor(sock, NULL, 0);
	zmq_close(*pair);
	*pair = NULL;
}
