/* test_loop - bellowsd's event loop: timers on the monotonic clock, real
 * ZeroMQ sockets (an inproc PAIR), file descriptors, the per-turn hook,
 * stopping and the source limits.
 *
 * Every run is bounded: a guard timer stops the loop and fails the test
 * if what it waits for never happens.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <zmq.h>

#include <bellows/error.h>

#include "common/clock.h"
#include "controller/loop.h"

#define GUARD_MS 5000 /* no test here should run this long */

typedef struct fixture {
	ctl_loop *loop;        /* under test */
	void *zctx;            /* ZeroMQ context */
	void *a, *b;           /* PAIR sockets, a -> b */
	int pipefd[2];         /* a pipe for fd sources */
	uint64_t started_ms;   /* when the run began */
	uint64_t fired_ms[16]; /* when the fast timer fired */
	int fired;             /* times the fast timer fired */
	int slow_fired;        /* times the slow timer fired */
	int stop_after;        /* fast timer stops the loop after this many */
	int hook_runs;         /* before-sleep hook calls */
	int received;          /* messages read from b */
	char last[32];         /* last message read */
	int fd_reads;          /* times the pipe was readable */
	bool guard_hit;        /* the guard timer stopped the loop */
} fixture;

static int
setup(void **state)
{
	fixture *f = calloc(1, sizeof(*f));

	if (f == NULL)
		return -1;
	f->pipefd[0] = f->pipefd[1] = -1;
	if (ctl_loop_new(&f->loop) != 0)
		return -1;
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	fixture *f = *state;

	ctl_loop_destroy(&f->loop);
	if (f->a != NULL)
		zmq_close(f->a);
	if (f->b != NULL)
		zmq_close(f->b);
	if (f->zctx != NULL)
		zmq_ctx_term(f->zctx);
	if (f->pipefd[0] >= 0)
		close(f->pipefd[0]);
	if (f->pipefd[1] >= 0)
		close(f->pipefd[1]);
	free(f);
	return 0;
}

static void
on_guard(ctl_loop *loop, uint64_t now_ms, void *arg)
{
	fixture *f = arg;

	f->guard_hit = true;
	ctl_loop_stop(loop);
}

static void
add_guard(fixture *f)
{
	assert_int_equal(ctl_loop_add_timer(f->loop, GUARD_MS, on_guard, f), 0);
}

static void
run(fixture *f)
{
	f->started_ms = com_clock_ms();
	assert_int_equal(ctl_loop_run(f->loop), 0);
	assert_false(f->guard_hit);
}

static void
on_fast(ctl_loop *loop, uint64_t now_ms, void *arg)
{
	fixture *f = arg;

	if (f->fired < 16)
		f->fired_ms[f->fired] = now_ms;
	f->fired++;
	if (f->fired == f->stop_after)
		ctl_loop_stop(loop);
}

static void
on_slow(ctl_loop *loop, uint64_t now_ms, void *arg)
{
	fixture *f = arg;

	f->slow_fired++;
}

static void
on_hook(ctl_loop *loop, void *arg)
{
	fixture *f = arg;

	f->hook_runs++;
}

static void
test_loop_timers_fire_periodically_on_the_monotonic_clock(void **state)
{
	fixture *f = *state;

	add_guard(f);
	f->stop_after = 6;
	assert_int_equal(ctl_loop_add_timer(f->loop, 20, on_fast, f), 0);
	assert_int_equal(ctl_loop_add_timer(f->loop, 50, on_slow, f), 0);
	run(f);
	assert_int_equal(f->fired, 6);
	/* Never early: each period is at least 20 ms after the last. */
	for (int i = 1; i < 6; i++) {
		uint64_t gap = f->fired_ms[i] - f->fired_ms[i - 1];

		if (gap < 20)
			fail_msg("timer fired %llu ms after the last one",
			    (unsigned long long)gap);
	}
	/* The 50 ms timer ran about twice in those 120 ms. */
	assert_true(f->slow_fired >= 1 && f->slow_fired <= 3);
}

static void
test_loop_runs_the_hook_once_per_turn(void **state)
{
	fixture *f = *state;

	add_guard(f);
	f->stop_after = 3;
	ctl_loop_set_before_sleep(f->loop, on_hook, f);
	assert_int_equal(ctl_loop_add_timer(f->loop, 10, on_fast, f), 0);
	run(f);
	/* At least one turn per firing, including the one that stopped. */
	assert_true(f->hook_runs >= 3);
	assert_true(f->hook_runs < 100);
}

static void
on_b_readable(ctl_loop *loop, void *arg)
{
	fixture *f = arg;
	int n;

	n = zmq_recv(f->b, f->last, sizeof(f->last) - 1, ZMQ_DONTWAIT);
	if (n < 0)
		return;
	f->last[n < (int)sizeof(f->last) ? n : (int)sizeof(f->last) - 1] = '\0';
	f->received++;
	if (f->received == 3)
		ctl_loop_stop(loop);
}

static void
pair_open(fixture *f)
{
	f->zctx = zmq_ctx_new();
	assert_non_null(f->zctx);
	f->a = zmq_socket(f->zctx, ZMQ_PAIR);
	f->b = zmq_socket(f->zctx, ZMQ_PAIR);
	assert_non_null(f->a);
	assert_non_null(f->b);
	assert_int_equal(zmq_bind(f->b, "inproc://test-loop"), 0);
	assert_int_equal(zmq_connect(f->a, "inproc://test-loop"), 0);
}

static void
send_to_b(void *a, const char *text)
{
	assert_int_equal(zmq_send(a, text, strlen(text), 0), (int)strlen(text));
}

static void
on_send_later(ctl_loop *loop, uint64_t now_ms, void *arg)
{
	fixture *f = arg;

	/* Sent while the loop sleeps in zmq_poll. */
	if (f->fired++ == 0)
		send_to_b(f->a, "third");
}

static void
test_loop_dispatches_a_readable_zmq_socket(void **state)
{
	fixture *f = *state;

	pair_open(f);
	add_guard(f);
	assert_int_equal(ctl_loop_add_socket(f->loop, f->b, on_b_readable, f),
	    0);
	assert_int_equal(ctl_loop_add_timer(f->loop, 30, on_send_later, f), 0);
	send_to_b(f->a, "first");
	send_to_b(f->a, "second");
	run(f);
	assert_int_equal(f->received, 3);
	assert_string_equal(f->last, "third");
	/* The stop came from the socket, long before the guard. */
	assert_true(com_clock_ms() - f->started_ms < GUARD_MS);
}

static void
on_pipe_readable(ctl_loop *loop, void *arg)
{
	fixture *f = arg;
	char c;

	if (read(f->pipefd[0], &c, 1) == 1 && c == 'x')
		f->fd_reads++;
	ctl_loop_stop(loop);
}

static void
test_loop_dispatches_a_readable_fd(void **state)
{
	fixture *f = *state;

	assert_int_equal(pipe(f->pipefd), 0);
	add_guard(f);
	assert_int_equal(ctl_loop_add_fd(f->loop, f->pipefd[0],
			     on_pipe_readable, f),
	    0);
	assert_int_equal(write(f->pipefd[1], "x", 1), 1);
	run(f);
	assert_int_equal(f->fd_reads, 1);
}

static void
on_stop_now(ctl_loop *loop, uint64_t now_ms, void *arg)
{
	fixture *f = arg;

	f->fired++;
	ctl_loop_stop(loop);
}

static void
test_loop_stop_returns_after_the_current_turn(void **state)
{
	fixture *f = *state;
	uint64_t took;

	add_guard(f);
	/* The loop must not sleep another period of the timer that asked
	 * it to stop (nor wait for the 1 s one) before returning. */
	assert_int_equal(ctl_loop_add_timer(f->loop, 1000, on_slow, f), 0);
	assert_int_equal(ctl_loop_add_timer(f->loop, 300, on_stop_now, f), 0);
	run(f);
	took = com_clock_ms() - f->started_ms;
	assert_int_equal(f->fired, 1);
	assert_int_equal(f->slow_fired, 0);
	if (took >= 300 + 250)
		fail_msg("stop took %llu ms", (unsigned long long)took);

	/* The loop runs again after a stop. */
	run(f);
	assert_int_equal(f->fired, 2);
}

static void
on_nothing(ctl_loop *loop, void *arg)
{
}

static void
on_nothing_timer(ctl_loop *loop, uint64_t now_ms, void *arg)
{
}

static void
test_loop_refuses_a_seventeenth_source_or_timer(void **state)
{
	fixture *f = *state;
	int fds[16][2];

	pair_open(f);
	/* Sockets and fds share the 16 sources. */
	for (int i = 0; i < 8; i++)
		assert_int_equal(ctl_loop_add_socket(f->loop, f->b, on_nothing,
				     f),
		    0);
	for (int i = 0; i < 8; i++) {
		assert_int_equal(pipe(fds[i]), 0);
		assert_int_equal(ctl_loop_add_fd(f->loop, fds[i][0], on_nothing,
				     f),
		    0);
	}
	assert_int_equal(ctl_loop_add_socket(f->loop, f->a, on_nothing, f),
	    BELLOWS_ELIMIT);
	assert_int_equal(ctl_loop_add_fd(f->loop, 0, on_nothing, f),
	    BELLOWS_ELIMIT);
	for (int i = 0; i < 8; i++) {
		close(fds[i][0]);
		close(fds[i][1]);
	}

	for (int i = 0; i < 16; i++)
		assert_int_equal(ctl_loop_add_timer(f->loop, 1000 + i,
				     on_nothing_timer, f),
		    0);
	assert_int_equal(ctl_loop_add_timer(f->loop, 5, on_nothing_timer, f),
	    BELLOWS_ELIMIT);
}

static void
test_loop_refuses_invalid_sources(void **state)
{
	fixture *f = *state;

	assert_int_equal(ctl_loop_add_timer(f->loop, 0, on_nothing_timer, f),
	    BELLOWS_EINVAL);
	assert_int_equal(ctl_loop_add_timer(f->loop, 10, NULL, f),
	    BELLOWS_EINVAL);
	assert_int_equal(ctl_loop_add_socket(f->loop, NULL, on_nothing, f),
	    BELLOWS_EINVAL);
	assert_int_equal(ctl_loop_add_fd(f->loop, -1, on_nothing, f),
	    BELLOWS_EINVAL);
	assert_int_equal(ctl_loop_add_fd(f->loop, 0, NULL, f), BELLOWS_EINVAL);
}

static void
test_loop_destroy_is_null_safe(void **state)
{
	ctl_loop *loop = NULL;

	(void)state;
	ctl_loop_destroy(NULL);
	ctl_loop_destroy(&loop);
	assert_null(loop);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
		T(test_loop_timers_fire_periodically_on_the_monotonic_clock),
		T(test_loop_runs_the_hook_once_per_turn),
		T(test_loop_dispatches_a_readable_zmq_socket),
		T(test_loop_dispatches_a_readable_fd),
		T(test_loop_stop_returns_after_the_current_turn),
		T(test_loop_refuses_a_seventeenth_source_or_timer),
		T(test_loop_refuses_invalid_sources),
		T(test_loop_destroy_is_null_safe),
#undef T
	};

	return cmocka_run_group_tests_name("loop", tests, NULL, NULL);
}
