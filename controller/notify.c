/* notify - systemd's readiness protocol through libsystemd's sd_notify.
 * See notify.h. */
#include "notify.h"

#include "policyhost/log.h"

#include <stdio.h>
#include <string.h>

#ifdef BELLOWS_HAVE_SYSTEMD
#include <systemd/sd-daemon.h>

/* Sends `state` (newline-separated KEY=VALUE lines); logs a failure. */
static void
notify_send(const char *state)
{
	int rc = sd_notify(0, state);

	if (rc < 0)
		ctl_log(CTL_LOG_WARN, "notify",
		    "cannot tell the service manager '%s': %s", state,
		    strerror(-rc));
}

bool
ctl_notify_supported(void)
{
	return true;
}
#else
static void
notify_send(const char *state)
{
	(void)state;
}

bool
ctl_notify_supported(void)
{
	return false;
}
#endif

void
ctl_notify_ready(const char *control)
{
	char state[512];

	snprintf(state, sizeof(state), "READY=1\nSTATUS=serving on %s",
	    control != NULL ? control : "(none)");
	notify_send(state);
}

void
ctl_notify_stopping(void)
{
	notify_send("STOPPING=1\nSTATUS=stopping");
}
