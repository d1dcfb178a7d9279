/* test_client - the client library's telemetry subscriber against a real
 * XPUB socket standing for bellowsd's publish socket: what it subscribes
 * to (every job, or with CURVE keys each job followed, once), which
 * messages reach the callback (telemetry only, whole), and the extra
 * descriptor its wait polls.
 *
 * The XPUB is verbose, so every subscription the subscriber sends is seen,
 * duplicates included; receives are bounded by a generous timeout that
 * only turns a hang into a failure.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <zmq.h>

#include <bellows/error.h>

#include "common/cert.h"
#include "client/client.h"
#include "common/wire.h"

#define RECV_MS 10000 /* a subscription or message that never comes */

typedef struct fixture {
	void *ctx;           /* the test's own ZeroMQ context */
	void *xpub;          /* stands for bellowsd's PUB */
	char endpoint[64];   /* where it listens */
	com_cert server;     /* its CURVE keypair (keyed tests) */
	tool_keys keys;      /* the subscriber's keys (keyed tests) */
	tool_telemetry *tel; /* the subscriber under test */
} fixture;

/* What the callback saw. */
typedef struct heard {
	uint32_t n;          /* telemetry messages */
	char jobs[8][16];    /* their jobs, first 8 */
	uint64_t windows[8]; /* their windows, first 8 */
} heard;

static void
on_telemetry(void *arg, const com_msg *msg)
{
	heard *h = arg;

	assert_int_equal(msg->type, COM_MSG_TELEMETRY);
	if (h->n < 8) {
		snprintf(h->jobs[h->n], sizeof(h->jobs[0]), "%s",
		    msg->u.telemetry.job);
		h->windows[h->n] = msg->u.telemetry.window;
	}
	h->n++;
}

static int
setup_xpub(fixture *f, bool curve)
{
	int verbose = 1, timeout = RECV_MS, one = 1;
	size_t len = sizeof(f->endpoint);

	f->ctx = zmq_ctx_new();
	assert_non_null(f->ctx);
	f->xpub = zmq_socket(f->ctx, ZMQ_XPUB);
	assert_non_null(f->xpub);
	assert_int_equal(zmq_setsockopt(f->xpub, ZMQ_XPUB_VERBOSE, &verbose,
			     sizeof(verbose)),
	    0);
	assert_int_equal(zmq_setsockopt(f->xpub, ZMQ_RCVTIMEO, &timeout,
			     sizeof(timeout)),
	    0);
	if (curve) {
		com_cert client;

		assert_int_equal(com_cert_generate(&f->server), 0);
		assert_int_equal(com_cert_generate(&client), 0);
		assert_int_equal(zmq_setsockopt(f->xpub, ZMQ_CURVE_SERVER, &one,
				     sizeof(one)),
		    0);
		assert_int_equal(zmq_setsockopt(f->xpub, ZMQ_CURVE_SECRETKEY,
				     f->server.secret_key, 40),
		    0);
		f->keys.curve = true;
		memcpy(f->keys.server.public_key, f->server.public_key,
		    COM_CERT_Z85);
		f->keys.client = client;
	}
	assert_int_equal(zmq_bind(f->xpub, "tcp://127.0.0.1:*"), 0);
	assert_int_equal(zmq_getsockopt(f->xpub, ZMQ_LAST_ENDPOINT, f->endpoint,
			     &len),
	    0);
	return 0;
}

static int
setup_plain(void **state)
{
	fixture *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	setup_xpub(f, false);
	assert_int_equal(tool_telemetry_open(f->endpoint, NULL, 8, &f->tel), 0);
	*state = f;
	return 0;
}

static int
setup_keyed(void **state)
{
	fixture *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	setup_xpub(f, true);
	assert_int_equal(tool_telemetry_open(f->endpoint, &f->keys, 8, &f->tel),
	    0);
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	fixture *f = *state;

	tool_telemetry_close(&f->tel);
	assert_null(f->tel);
	tool_telemetry_close(&f->tel); /* NULL-safe, idempotent */
	zmq_close(f->xpub);
	zmq_ctx_term(f->ctx);
	free(f);
	return 0;
}

/* The next subscription message the XPUB gets, as text: "+t:a" for a
 * subscription to "t:a\0", "-..." for an unsubscription. */
static void
next_subscription(fixture *f, char *buf, size_t len)
{
	uint8_t frame[256];
	int n = zmq_recv(f->xpub, frame, sizeof(frame), 0);

	assert_true(n >= 1);
	assert_true((size_t)n < sizeof(frame));
	/* Topics hold their NUL: the text ends there. */
	snprintf(buf, len, "%c%.*s", frame[0] == 1 ? '+' : '-', n - 1,
	    (const char *)frame + 1);
}

/* Publishes a telemetry message for `job` and `window` on its topic. */
static void
publish_telemetry(fixture *f, const char *job, uint64_t window)
{
	char topic[64];
	com_msg m;
	uint8_t *buf;
	size_t len;

	com_msg_init(&m, COM_MSG_TELEMETRY);
	m.u.telemetry.job = strdup(job);
	assert_non_null(m.u.telemetry.job);
	m.u.telemetry.window = window;
	m.u.telemetry.ranks_reported = 2;
	m.u.telemetry.ranks_expected = 2;
	assert_int_equal(com_wire_encode(&m, &buf, &len), 0);
	com_msg_fini(&m);
	snprintf(topic, sizeof(topic), "t:%s", job);
	assert_int_equal(zmq_send(f->xpub, topic, strlen(topic) + 1,
			     ZMQ_SNDMORE),
	    (int)strlen(topic) + 1);
	assert_int_equal(zmq_send(f->xpub, buf, len, 0), (int)len);
	free(buf);
}

/* Waits until the callback has seen `n` messages in all. */
static void
wait_heard(fixture *f, heard *h, uint32_t n)
{
	for (int i = 0; i < 1000 && h->n < n; i++) {
		bool fd = true;

		assert_int_equal(tool_telemetry_wait(f->tel, -1, RECV_MS,
				     on_telemetry, h, &fd),
		    0);
		assert_false(fd);
	}
	assert_int_equal(h->n, n);
}

/* ---- tests ---------------------------------------------------------- */

static void
test_client_telemetry_without_keys_hears_every_job_and_only_telemetry(
    void **state)
{
	fixture *f = *state;
	heard h = { 0 };
	char sub[64];
	const char garbage[] = "not an envelope";
	com_msg status;
	uint8_t *buf;
	size_t len;

	/* Subscribed to the prefix of every job's topic, nothing else:
	 * following a job by name is for CURVE only. */
	next_subscription(f, sub, sizeof(sub));
	assert_string_equal(sub, "+t:");
	assert_int_equal(tool_telemetry_follow(f->tel, "a"), 0);

	publish_telemetry(f, "a", 3);
	/* Not telemetry: garbage, and a message of another type. */
	assert_int_equal(zmq_send(f->xpub, "t:b", 4, ZMQ_SNDMORE), 4);
	assert_int_equal(zmq_send(f->xpub, garbage, sizeof(garbage), 0),
	    (int)sizeof(garbage));
	com_msg_init(&status, COM_MSG_STATUS_REQUEST);
	assert_int_equal(com_wire_encode(&status, &buf, &len), 0);
	com_msg_fini(&status);
	assert_int_equal(zmq_send(f->xpub, "t:b", 4, ZMQ_SNDMORE), 4);
	assert_int_equal(zmq_send(f->xpub, buf, len, 0), (int)len);
	free(buf);
	publish_telemetry(f, "b", 7);

	wait_heard(f, &h, 2);
	assert_string_equal(h.jobs[0], "a");
	assert_int_equal(h.windows[0], 3);
	assert_string_equal(h.jobs[1], "b");
	assert_int_equal(h.windows[1], 7);
}

static void
test_client_telemetry_with_keys_follows_each_job_once(void **state)
{
	fixture *f = *state;
	heard h = { 0 };
	char sub[64];
	char job[32];

	assert_int_equal(tool_telemetry_follow(f->tel, "a"), 0);
	assert_int_equal(tool_telemetry_follow(f->tel, "b"), 0);
	assert_int_equal(tool_telemetry_follow(f->tel, "a"), 0);
	assert_int_equal(tool_telemetry_follow(f->tel, ""), 0);

	/* The XPUB is verbose: a second "a" would be seen. No "t:" prefix
	 * ever: a secured bellowsd refuses it to most clients. */
	next_subscription(f, sub, sizeof(sub));
	assert_string_equal(sub, "+t:a");
	next_subscription(f, sub, sizeof(sub));
	assert_string_equal(sub, "+t:b");
	next_subscription(f, sub, sizeof(sub));
	assert_string_equal(sub, "+t:");

	/* Over CURVE, the followed job's telemetry arrives. */
	publish_telemetry(f, "b", 11);
	wait_heard(f, &h, 1);
	assert_string_equal(h.jobs[0], "b");
	assert_int_equal(h.windows[0], 11);

	/* At most TOOL_TELEMETRY_MAX_JOBS jobs: three are followed. */
	for (uint32_t i = 3; i < TOOL_TELEMETRY_MAX_JOBS; i++) {
		snprintf(job, sizeof(job), "job-%u", i);
		assert_int_equal(tool_telemetry_follow(f->tel, job), 0);
	}
	assert_int_equal(tool_telemetry_follow(f->tel, "one-too-many"),
	    BELLOWS_ELIMIT);
	assert_int_equal(tool_telemetry_follow(f->tel, "a"), 0);
}

static void
test_client_telemetry_wait_reports_a_readable_descriptor(void **state)
{
	fixture *f = *state;
	heard h = { 0 };
	int fds[2];
	bool ready = false;

	assert_int_equal(pipe(fds), 0);
	assert_int_equal(tool_telemetry_wait(f->tel, fds[0], 0, on_telemetry,
			     &h, &ready),
	    0);
	assert_false(ready);
	assert_int_equal(write(fds[1], "k", 1), 1);
	assert_int_equal(tool_telemetry_wait(f->tel, fds[0], RECV_MS,
			     on_telemetry, &h, &ready),
	    0);
	assert_true(ready);
	/* Without a subscriber (an offline dashboard) only fd counts. */
	ready = false;
	assert_int_equal(tool_telemetry_wait(NULL, fds[0], RECV_MS, NULL, NULL,
			     &ready),
	    0);
	assert_true(ready);
	assert_int_equal(h.n, 0);
	close(fds[0]);
	close(fds[1]);
}

static void
test_client_telemetry_open_refuses_a_bad_endpoint(void **state)
{
	tool_telemetry *t = (tool_telemetry *)&t; /* must stay untouched */

	(void)state;
	assert_int_equal(tool_telemetry_open("nonsense://x", NULL, 8, &t),
	    BELLOWS_EINVAL);
	assert_ptr_equal(t, (tool_telemetry *)&t);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(
		    test_client_telemetry_without_keys_hears_every_job_and_only_telemetry,
		    setup_plain, teardown),
		cmocka_unit_test_setup_teardown(
		    test_client_telemetry_with_keys_follows_each_job_once,
		    setup_keyed, teardown),
		cmocka_unit_test_setup_teardown(
		    test_client_telemetry_wait_reports_a_readable_descriptor,
		    setup_plain, teardown),
		cmocka_unit_test(
		    test_client_telemetry_open_refuses_a_bad_endpoint),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
