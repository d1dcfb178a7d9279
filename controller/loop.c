/* loop - zmq_poll over sockets and fds plus periodic timers, see loop.h. */
#include "loop.h"

#include "common/clock.h"

#include <bellows/error.h>

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <zmq.h>

#define LOOP_MAX_SOURCES 16
#define LOOP_MAX_TIMERS  16

typedef struct loop_source {
	ctl_loop_io_fn *cb; /* readable callback */
	void *arg;          /* its argument */
} loop_source;

typedef struct loop_timer {
	ctl_loop_timer_fn *cb; /* due callback */
	void *arg;             /* its argument */
	uint32_t period_ms;    /* interval */
	uint64_t due_ms;       /* next monotonic due time */
} loop_timer;

struct ctl_loop {
	zmq_pollitem_t items[LOOP_MAX_SOURCES]; /* what zmq_poll watches */
	loop_source sources[LOOP_MAX_SOURCES];  /* parallel to items */
	int n_sources;                          /* entries used */
	loop_timer timers[LOOP_MAX_TIMERS];     /* periodic timers */
	int n_timers;                           /* entries used */
	ctl_loop_hook_fn *before_sleep;         /* per-turn hook */
	void *before_sleep_arg;                 /* its argument */
	bool stop;                              /* run() returns when set */
};

int
ctl_loop_new(ctl_loop **ret_loop)
{
	ctl_loop *loop = calloc(1, sizeof(*loop));

	if (loop == NULL)
		return BELLOWS_ENOMEM;
	*ret_loop = loop;
	return 0;
}

void
ctl_loop_destroy(ctl_loop **loop)
{
	if (loop == NULL || *loop == NULL)
		return;
	free(*loop);
	*loop = NULL;
}

static int
loop_add(ctl_loop *loop, void *zsock, int fd, ctl_loop_io_fn *cb, void *arg)
{
	if (loop == NULL || cb == NULL)
		return BELLOWS_EINVAL;
	if (loop->n_sources >= LOOP_MAX_SOURCES)
		return BELLOWS_ELIMIT;
	loop->items[loop->n_sources] = (zmq_pollitem_t){
		.socket = zsock,
		.fd = fd,
		.events = ZMQ_POLLIN,
	};
	loop->sources[loop->n_sources] = (loop_source){ .cb = cb, .arg = arg };
	loop->n_sources++;
	return 0;
}

int
ctl_loop_add_socket(ctl_loop *loop, void *zsock, ctl_loop_io_fn *cb, void *arg)
{
	if (zsock == NULL)
		return BELLOWS_EINVAL;
	return loop_add(loop, zsock, -1, cb, arg);
}

int
ctl_loop_add_fd(ctl_loop *loop, int fd, ctl_loop_io_fn *cb, void *arg)
{
	if (fd < 0)
		return BELLOWS_EINVAL;
	return loop_add(loop, NULL, fd, cb, arg);
}

int
ctl_loop_add_timer(ctl_loop *loop, uint32_t period_ms, ctl_loop_timer_fn *cb,
    void *arg)
{
	if (loop == NULL || cb == NULL || period_ms == 0)
		return BELLOWS_EINVAL;
	if (loop->n_timers >= LOOP_MAX_TIMERS)
		return BELLOWS_ELIMIT;
	loop->timers[loop->n_timers++] = (loop_timer){
		.cb = cb,
		.arg = arg,
		.period_ms = period_ms,
		.due_ms = com_clock_ms() + period_ms,
	};
	return 0;
}

void
ctl_loop_set_before_sleep(ctl_loop *loop, ctl_loop_hook_fn *cb, void *arg)
{
	loop->before_sleep = cb;
	loop->before_sleep_arg = arg;
}

void
ctl_loop_stop(ctl_loop *loop)
{
	loop->stop = true;
}

/* Runs due timers; returns the milliseconds until the next one is due. */
static long
loop_run_timers(ctl_loop *loop)
{
	uint64_t now = com_clock_ms();
	long wait = 1000;

	for (int i = 0; i < loop->n_timers; i++) {
		loop_timer *t = &loop->timers[i];

		if (t->due_ms <= now) {
			t->cb(loop, now, t->arg);
			/* Reschedule from now: a stalled loop must not fire a
			 * burst of catch-up ticks. */
			t->due_ms = now + t->period_ms;
		}
		if ((long)(t->due_ms - now) < wait)
			wait = (long)(t->due_ms - now);
	}
	return wait < 0 ? 0 : wait;
}

int
ctl_loop_run(ctl_loop *loop)
{
	loop->stop = false;
	while (!loop->stop) {
		long wait = loop_run_timers(loop);
		int n;

		/* A timer asked to stop: end this turn without sleeping
		 * until the next timer is due. */
		if (loop->stop)
			wait = 0;
		n = zmq_poll(loop->items, loop->n_sources, wait);
		if (n < 0) {
			if (zmq_errno() == EINTR)
				continue;
			return BELLOWS_ESYS;
		}
		for (int i = 0; i < loop->n_sources && !loop->stop; i++) {
			if (loop->items[i].revents & ZMQ_POLLIN)
				loop->sources[i].cb(loop, loop->sources[i].arg);
		}
		if (loop->before_sleep != NULL)
			loop->before_sleep(loop, loop->before_sleep_arg);
	}
	return 0;
}
