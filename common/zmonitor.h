/* zmonitor - a ZeroMQ socket's events read on a PAIR socket, opened and
 * closed in the one order libzmq needs.
 *
 * libzmq sends a monitored socket's events from its I/O threads; an
 * event sent while the monitor's pipe is torn down is never freed
 * (libzmq 4.3.4 leaks the frame of the listener's last CLOSED event
 * when the watched socket closes first). So a monitor is stopped, and
 * its reader closed, before the socket it watches: com_monitor_close.
 * Not thread-safe: call from the thread that owns the watched socket.
 */
#ifndef COM_ZMONITOR_H
#define COM_ZMONITOR_H

#include <stdint.h>

/* Starts sock's monitor for the ZMQ_EVENT_* bits in events on a new
 * inproc endpoint named after tag and sock, and connects a PAIR of ctx
 * (linger 0) to it, into *ret_pair. Returns 0, or BELLOWS_ESYS with
 * libzmq's errno kept (zmq_strerror(zmq_errno()) says why) and nothing
 * left open (*ret_pair NULL). */
int com_monitor_open(void *ctx, void *sock, int events, const char *tag,
    void **ret_pair);

/* Reads one event from a monitor's reader `pair` without waiting, into
 * *ret_event (a ZMQ_EVENT_* bit) and *ret_value (its value: an fd, an
 * errno, a ZMQ_PROTOCOL_ERROR_*), and drops the event's other frames.
 * Returns 0; BELLOWS_EAGAIN when no event is waiting; BELLOWS_EPROTO
 * for a frame that is not an event (read and dropped). The outputs are
 * untouched on failure. */
int com_monitor_recv(void *pair, uint16_t *ret_event, uint32_t *ret_value);

/* Stops sock's monitor and closes its reader *pair (then NULL); call it
 * before closing sock. A NULL *pair (no monitor) does nothing. */
void com_monitor_close(void *sock, void **pair);

#endif
