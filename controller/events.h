/* events - bellowsd's recent events in a bounded ring: reloads done or
 * refused, ranks lost or joined, windows closed incomplete.
 *
 * STATUS returns them, so an operator can see why a configuration did not
 * take effect or when a rank went away without reading the log. The ring
 * has a fixed size and fixed-size entries: recording never allocates and
 * never fails, and the oldest events go first.
 */
#ifndef CTL_EVENTS_H
#define CTL_EVENTS_H

#include "common/msg.h"

#include <stdint.h>

#define CTL_EVENTS_MAX     128 /* events kept */
#define CTL_EVENT_KIND_MAX 32  /* bytes of a kind, with NUL */
#define CTL_EVENT_JOB_MAX  256 /* bytes of a job name, with NUL */
#define CTL_EVENT_TEXT_MAX 512 /* bytes of a text, with NUL */

/* Kinds recorded by bellowsd. */
#define CTL_EVENT_RELOAD_OK         "reload_ok"
#define CTL_EVENT_RELOAD_REFUSED    "reload_refused"
#define CTL_EVENT_RANK_LOST         "rank_lost" /* timed out */
#define CTL_EVENT_RANK_LEFT         "rank_left" /* said Bye */
#define CTL_EVENT_RANK_JOINED       "rank_joined"
#define CTL_EVENT_WINDOW_INCOMPLETE "window_incomplete"
#define CTL_EVENT_POLICY_RESTARTED  "policy_restarted"
#define CTL_EVENT_PLUGIN_FAILED     "plugin_failed"    /* worker.h */
#define CTL_EVENT_PLUGIN_RESTARTED  "plugin_restarted" /* worker.h */

typedef struct ctl_events ctl_events;

/* Creates an empty ring. Returns 0 or BELLOWS_ENOMEM. */
int ctl_events_new(ctl_events **ret_events);

/* Frees the ring. NULL-safe, sets *ev to NULL. */
void ctl_events_destroy(ctl_events **ev);

/* Records an event stamped with the wall clock. `job` is NULL or "" for
 * the daemon itself. Texts longer than an entry holds are cut. */
void ctl_events_add(ctl_events *ev, const char *kind, const char *job,
    const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Events recorded since the ring was created (kept or not). */
uint64_t ctl_events_total(const ctl_events *ev);

/* Copies the newest events, at most `max`, oldest first, into a fresh
 * array (*ret_n entries; the caller frees each string and the array, as
 * com_msg_fini does for a status reply). With `job` non-NULL and not "",
 * only that job's events and the daemon's are copied. Returns 0 or
 * BELLOWS_ENOMEM (outputs untouched). */
int ctl_events_copy(const ctl_events *ev, const char *job, uint32_t max,
    com_event **ret, uint32_t *ret_n);

#endif /* CTL_EVENTS_H */
