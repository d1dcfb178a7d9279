/* loop - bellowsd's one event loop: ZeroMQ sockets, file descriptors and
 * periodic timers in a single thread.
 *
 * Every piece of daemon state is touched from this loop only, so nothing in
 * the controller takes a lock. Callbacks must not block: a callback that
 * waits stalls every job. Timers run on the monotonic clock and are
 * periodic; a timer that falls behind runs once and is rescheduled from
 * now rather than firing in a burst.
 */
#ifndef CTL_LOOP_H
#define CTL_LOOP_H

#include <stdint.h>

typedef struct ctl_loop ctl_loop;

/* Called when a socket or fd is readable. */
typedef void ctl_loop_io_fn(ctl_loop *loop, void *arg);
/* Called when a timer is due; `now_ms` is the monotonic time. */
typedef void ctl_loop_timer_fn(ctl_loop *loop, uint64_t now_ms, void *arg);
/* Called once per loop turn, after the events of that turn. */
typedef void ctl_loop_hook_fn(ctl_loop *loop, void *arg);

/* Creates an empty loop. Returns 0, or BELLOWS_ENOMEM. */
int ctl_loop_new(ctl_loop **ret_loop);

/* Frees the loop (not the sockets registered with it). NULL-safe. */
void ctl_loop_destroy(ctl_loop **loop);

/* Watches a ZeroMQ socket (borrowed; must outlive the loop) for input.
 * Returns 0, BELLOWS_ELIMIT past 16 sources, BELLOWS_EINVAL. */
int ctl_loop_add_socket(ctl_loop *loop, void *zsock, ctl_loop_io_fn *cb,
    void *arg);

/* Watches a file descriptor for input. Same returns as add_socket. */
int ctl_loop_add_fd(ctl_loop *loop, int fd, ctl_loop_io_fn *cb, void *arg);

/* Adds a periodic timer, first due `period_ms` from now. Returns 0,
 * BELLOWS_ELIMIT past 16 timers, BELLOWS_EINVAL for a zero period. */
int ctl_loop_add_timer(ctl_loop *loop, uint32_t period_ms,
    ctl_loop_timer_fn *cb, void *arg);

/* Sets the hook run once per turn before the loop sleeps again (bellowsd
 * flushes batched work there). */
void ctl_loop_set_before_sleep(ctl_loop *loop, ctl_loop_hook_fn *cb, void *arg);

/* Runs until ctl_loop_stop(). Returns 0 after a stop, or BELLOWS_ESYS if
 * polling failed for a reason other than a signal. */
int ctl_loop_run(ctl_loop *loop);

/* Makes ctl_loop_run() return after the current turn. */
void ctl_loop_stop(ctl_loop *loop);

#endif /* CTL_LOOP_H */
