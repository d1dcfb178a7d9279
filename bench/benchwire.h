/* benchwire - what the C benchmarks that speak to bellowsd share: one
 * message sent on a ZeroMQ socket in the wire format.
 *
 * Header-only (static functions): each benchmark is one executable.
 */
#ifndef BENCH_BENCHWIRE_H
#define BENCH_BENCHWIRE_H

#include <stdint.h>
#include <stdlib.h>

#include <zmq.h>

#include "common/msg.h"
#include "common/wire.h"

/* Encodes m and sends it on sock as one frame (blocking). Returns 0, or
 * -1 when it does not encode or the send fails. */
static inline int
bench_send_msg(void *sock, const com_msg *m)
{
	uint8_t *buf;
	size_t len;
	int r;

	if (com_wire_encode(m, &buf, &len) != 0)
		return -1;
	r = zmq_send(sock, buf, len, 0);
	free(buf);
	return r < 0 ? -1 : 0;
}

#endif /* BENCH_BENCHWIRE_H */
