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

/* Starts sock's monitor for the ZMQ_EVENT_* bits in events on a new
 * inproc endpoint named after tag and sock, and connects a PAIR of ctx
 * (linger 0) to it, into *ret_pair. Returns 0, or BELLOWS_ESYS with
 * libzmq's errno kept (zmq_strerror(zmq_errno()) says why) and nothing
 * left open (*ret_pair NULL). */
int com_monitor_open(void *ctx, void *sock, int events, const char *tag,
    void **ret_pair);

/* Stops sock's monitor and closes its reader *pair (then NULL); call it
 * before closing sock. A NULL *pair (no monitor) does nothing. */
void com_monitor_close(void *sock, void **pair);

#endif
