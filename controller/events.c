/* events - the ring of recent events, see events.h. */
#include "events.h"

#include "common/clock.h"

#include <bellows/error.h>

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct events_entry {
	uint64_t wall_ms;              /* when */
	char kind[CTL_EVENT_KIND_MAX]; /* what kind */
	char job[CTL_EVENT_JOB_MAX];   /* job, "" for the daemon */
	char text[CTL_EVENT_TEXT_MAX]; /* what happened */
} events_entry;

struct ctl_events {
	events_entry ring[CTL_EVENTS_MAX]; /* the newest CTL_EVENTS_MAX */
	uint64_t total;                    /* recorded ever; the next goes
					    * to ring[total % MAX] */
};

int
ctl_events_new(ctl_events **ret_events)
{
	ctl_events *ev = calloc(1, sizeof(*ev));

	if (ev == NULL)
		return BELLOWS_ENOMEM;
	*ret_events = ev;
	return 0;
}

void
ctl_events_destroy(ctl_events **ev)
{
	if (ev == NULL || *ev == NULL)
		return;
	free(*ev);
	*ev = NULL;
}

void
ctl_events_add(ctl_events *ev, const char *kind, const char *job,
    const char *fmt, ...)
{
	events_entry *e = &ev->ring[ev->total % CTL_EVENTS_MAX];
	va_list ap;

	e->wall_ms = com_clock_wall_ms();
	snprintf(e->kind, sizeof(e->kind), "%s", kind);
	snprintf(e->job, sizeof(e->job), "%s", job != NULL ? job : "");
	va_start(ap, fmt);
	vsnprintf(e->text, sizeof(e->text), fmt, ap);
	va_end(ap);
	ev->total++;
}

uint64_t
ctl_events_total(const ctl_events *ev)
{
	return ev->total;
}

static bool
events_wanted(const events_entry *e, const char *job)
{
	return job == NULL || job[0] == '\0' || e->job[0] == '\0' ||
	    strcmp(e->job, job) == 0;
}

int
ctl_events_copy(const ctl_events *ev, const char *job, uint32_t max,
    com_event **ret, uint32_t *ret_n)
{
	uint64_t kept = ev->total < CTL_EVENTS_MAX ? ev->total : CTL_EVENTS_MAX;
	uint64_t first = ev->total - kept, from = ev->total;
	uint32_t n = 0, i = 0;
	com_event *out;

	/* Walk back from the newest to find where the `max` newest wanted
	 * events start, then copy forward so they come out oldest first. */
	while (from > first && n < max) {
		if (events_wanted(&ev->ring[(from - 1) % CTL_EVENTS_MAX], job))
			n++;
		from--;
	}
	out = calloc(n > 0 ? n : 1, sizeof(*out));
	if (out == NULL)
		return BELLOWS_ENOMEM;
	for (uint64_t k = from; k < ev->total && i < n; k++) {
		const events_entry *e = &ev->ring[k % CTL_EVENTS_MAX];

		if (!events_wanted(e, job))
			continue;
		out[i].wall_ms = e->wall_ms;
		out[i].kind = strdup(e->kind);
		out[i].job = strdup(e->job);
		out[i].text = strdup(e->text);
		i++;
		if (out[i - 1].kind == NULL || out[i - 1].job == NULL ||
		    out[i - 1].text == NULL)
			goto fail;
	}
	*ret = out;
	*ret_n = n;
	return 0;
fail:
	for (uint32_t k = 0; k < i; k++) {
		free(out[k].kind);
		free(out[k].job);
		free(out[k].text);
	}
	free(out);
	return BELLOWS_ENOMEM;
}
