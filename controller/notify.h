/* notify - tells the service manager how bellowsd stands (systemd's
 * readiness protocol, sd_notify(3)).
 *
 * Under systemd with Type=notify, $NOTIFY_SOCKET names a datagram socket:
 * bellowsd sends READY=1 once its sockets are bound, the history is
 * recovered and the loop is about to run, and STOPPING=1 when a stop
 * begins. Without $NOTIFY_SOCKET, or in a build without libsystemd, these
 * calls do nothing, so bellowsd runs the same outside systemd.
 */
#ifndef CTL_NOTIFY_H
#define CTL_NOTIFY_H

#include <stdbool.h>

/* True if this build can tell systemd (it links libsystemd). */
bool ctl_notify_supported(void);

/* Sends READY=1 with a STATUS= line naming the control endpoint. A
 * failure to send is logged as a warning and otherwise ignored: the
 * service manager then times the start out on its own. */
void ctl_notify_ready(const char *control);

/* Sends STOPPING=1; failures as for ctl_notify_ready. */
void ctl_notify_stopping(void);

#endif /* CTL_NOTIFY_H */
