/* test_zmonitor - a socket monitor's events read one at a time: a real
 * connection's events with their values, nothing waiting, and a frame
 * that is not an event, on sockets of a private ZeroMQ context. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include <zmq.h>

#include <bellows/error.h>

#include "common/zmonitor.h"

/* Waits up to 5 s for `sock` to be readable. */
static void
wait_readable(void *sock)
{
	zmq_pollitem_t item = { sock, 0, ZMQ_POLLIN, 0 };

	assert_int_equal(zmq_poll(&item, 1, 5000), 1);
}

static void
test_a_connection_gives_its_events_then_nothing(void **state)
{
	void *ctx = zmq_ctx_new();
	void *router = zmq_socket(ctx, ZMQ_ROUTER);
	void *dealer = zmq_socket(ctx, ZMQ_DEALER);
	void *pair = NULL;
	char ep[128];
	size_t len = sizeof(ep);
	uint16_t event = 7;
	uint32_t value = 9;
	int zero = 0;

	(void)state;
	zmq_setsockopt(router, ZMQ_LINGER, &zero, sizeof(zero));
	zmq_setsockopt(dealer, ZMQ_LINGER, &zero, sizeof(zero));
	assert_int_equal(zmq_bind(router, "tcp://127.0.0.1:*"), 0);
	assert_int_equal(zmq_getsockopt(router, ZMQ_LAST_ENDPOINT, ep, &len),
	    0);
	assert_int_equal(com_monitor_open(ctx, dealer,
			     ZMQ_EVENT_CONNECTED |
				 ZMQ_EVENT_HANDSHAKE_SUCCEEDED,
			     "test", &pair),
	    0);
	assert_int_equal(com_monitor_recv(pair, &event, &value),
	    BELLOWS_EAGAIN);
	assert_int_equal(event, 7);
	assert_int_equal(value, 9);
	assert_int_equal(zmq_connect(dealer, ep), 0);
	wait_readable(pair);
	assert_int_equal(com_monitor_recv(pair, &event, &value), 0);
	assert_int_equal(event, ZMQ_EVENT_CONNECTED);
	assert_true(value > 0); /* the connection's file descriptor */
	wait_readable(pair);
	assert_int_equal(com_monitor_recv(pair, &event, &value), 0);
	assert_int_equal(event, ZMQ_EVENT_HANDSHAKE_SUCCEEDED);
	/* Each event's endpoint frame went with it. */
	assert_int_equal(com_monitor_recv(pair, &event, &value),
	    BELLOWS_EAGAIN);
	com_monitor_close(dealer, &pair);
	assert_null(pair);
	zmq_close(dealer);
	zmq_close(router);
	zmq_ctx_term(ctx);
}

static void
test_a_frame_that_is_no_event_is_dropped_as_eproto(void **state)
{
	void *ctx = zmq_ctx_new();
	void *in = zmq_socket(ctx, ZMQ_PAIR);
	void *out = zmq_socket(ctx, ZMQ_PAIR);
	uint8_t ev[6];
	uint16_t event = 7, e = ZMQ_EVENT_DISCONNECTED;
	uint32_t value = 9, v = 42;

	(void)state;
	assert_int_equal(zmq_bind(in, "inproc://test-zmonitor"), 0);
	assert_int_equal(zmq_connect(out, "inproc://test-zmonitor"), 0);
	/* Three bytes and an endpoint: not an event. */
	assert_int_equal(zmq_send(out, "abc", 3, ZMQ_SNDMORE), 3);
	assert_int_equal(zmq_send(out, "tcp://x", 7, 0), 7);
	memcpy(ev, &e, sizeof(e));
	memcpy(ev + 2, &v, sizeof(v));
	assert_int_equal(zmq_send(out, ev, sizeof(ev), ZMQ_SNDMORE), 6);
	assert_int_equal(zmq_send(out, "tcp://y", 7, 0), 7);
	wait_readable(in);
	assert_int_equal(com_monitor_recv(in, &event, &value), BELLOWS_EPROTO);
	assert_int_equal(event, 7);
	assert_int_equal(value, 9);
	wait_readable(in);
	assert_int_equal(com_monitor_recv(in, &event, &value), 0);
	assert_int_equal(event, ZMQ_EVENT_DISCONNECTED);
	assert_int_equal(value, 42);
	assert_int_equal(com_monitor_recv(in, &event, &value), BELLOWS_EAGAIN);
	zmq_close(out);
	zmq_close(in);
	zmq_ctx_term(ctx);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(
		    test_a_connection_gives_its_events_then_nothing),
		cmocka_unit_test(
		    test_a_frame_that_is_no_event_is_dropped_as_eproto),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
