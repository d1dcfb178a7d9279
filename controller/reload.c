/* reload - replacing the configuration in force, see reload.h. */
#include "reload.h"

#include "events.h"
#include "log.h"

#include <bellows/error.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ctl_reload {
	char *path;                   /* the file */
	ctl_config *cfg;              /* in force, owned */
	ctl_jobs *jobs;               /* runs with cfg, borrowed */
	ctl_reload_counters counters; /* totals */
};

int
ctl_reload_new(const char *path, ctl_config **cfg, ctl_jobs *jobs,
    ctl_reload **ret_reload)
{
	ctl_reload *r = calloc(1, sizeof(*r));

	if (r == NULL || (r->path = strdup(path)) == NULL) {
		free(r);
		return BELLOWS_ENOMEM;
	}
	r->cfg = *cfg;
	*cfg = NULL;
	r->jobs = jobs;
	*ret_reload = r;
	return 0;
}

void
ctl_reload_destroy(ctl_reload **r)
{
	if (r == NULL || *r == NULL)
		return;
	ctl_config_destroy(&(*r)->cfg);
	free((*r)->path);
	free(*r);
	*r = NULL;
}

const ctl_config *
ctl_reload_config(const ctl_reload *r)
{
	return r->cfg;
}

/* Keeps the configuration in force after `err`, the first of 1 + `more`
 * errors: counts, logs and records one refusal. The event's text ends
 * with " (and N more)" even when the first error fills an entry, so that
 * STATUS says there is more to read in the log. */
static int
reload_refuse(ctl_reload *r, int code, const char *err, uint32_t more)
{
	char tail[32] = "";
	int room;

	if (more > 0)
		snprintf(tail, sizeof(tail), " (and %" PRIu32 " more)", more);
	room = CTL_EVENT_TEXT_MAX - 1 - (int)strlen(tail);
	r->counters.refused++;
	ctl_log(CTL_LOG_ERROR, "reload",
	    "reload refused, the running configuration stays: %s%s", err, tail);
	ctl_events_add(ctl_jobs_events(r->jobs), CTL_EVENT_RELOAD_REFUSED, NULL,
	    "%.*s%s", room, err, tail);
	return code;
}

/* Where reload_line sends a failed load's lines: the first is the
 * refusal, each other one a log line after it. */
typedef struct reload_report {
	ctl_reload *r; /* refusing */
	int code;      /* the load's error */
	uint32_t more; /* errors after the first */
	bool refused;  /* the first line was given */
} reload_report;

static void
reload_line(void *arg, const char *text)
{
	reload_report *rep = arg;
	char err[CTL_CONFIG_ERR_MAX];

	if (rep->refused) {
		ctl_log(CTL_LOG_ERROR, "reload", "%s", text);
		return;
	}
	/* A refusal's text is at most one error message long. */
	snprintf(err, sizeof(err), "%s", text);
	reload_refuse(rep->r, rep->code, err, rep->more);
	rep->refused = true;
}

/* Loads the file into *ret_cfg. When it is invalid, refuses the reload
 * with its first error in the refusal and logs each of the others on a
 * line of its own, at the refusal's level. */
static int
reload_load(ctl_reload *r, ctl_config **ret_cfg)
{
	ctl_config_errors *errs = malloc(sizeof(*errs));
	char err[CTL_CONFIG_ERR_MAX];
	int rc;

	if (errs == NULL) {
		snprintf(err, sizeof(err), "%s: %s", r->path,
		    bellows_strerror(BELLOWS_ENOMEM));
		return reload_refuse(r, BELLOWS_ENOMEM, err, 0);
	}
	rc = ctl_config_load_all(r->path, ret_cfg, errs);
	if (rc != 0) {
		reload_report rep = { .r = r,
			.code = rc,
			.more = errs->n > 0 ? errs->n - 1 : 0 };

		ctl_config_errors_emit(errs, rc, r->path, reload_line, &rep);
	}
	free(errs);
	return rc;
}

int
ctl_reload_now(ctl_reload *r, bool force)
{
	char err[CTL_CONFIG_ERR_MAX];
	ctl_config *cfg = NULL;
	int rc;

	if ((rc = reload_load(r, &cfg)) != 0)
		return rc;
	if (!force && cfg->text_len == r->cfg->text_len &&
	    memcmp(cfg->text, r->cfg->text, cfg->text_len) == 0) {
		ctl_config_destroy(&cfg);
		r->counters.unchanged++;
		ctl_log(CTL_LOG_DEBUG, "reload", "'%s' rewritten unchanged",
		    r->path);
		return 0;
	}
	rc = ctl_jobs_reload(r->jobs, cfg, err, sizeof(err));
	if (rc != 0) {
		char where[CTL_CONFIG_ERR_MAX + 64];

		snprintf(where, sizeof(where), "%s: %s", r->path, err);
		ctl_config_destroy(&cfg);
		return reload_refuse(r, rc, where, 0);
	}
	/* No job borrows the old configuration any more. */
	ctl_config_destroy(&r->cfg);
	r->cfg = cfg;
	r->counters.done++;
	ctl_log(CTL_LOG_INFO, "reload", "configuration reloaded from '%s'",
	    r->path);
	if (ctl_config_timing_warning(cfg, err, sizeof(err)))
		ctl_log(CTL_LOG_WARN, "reload", "%s: %s", r->path, err);
	ctl_events_add(ctl_jobs_events(r->jobs), CTL_EVENT_RELOAD_OK, NULL,
	    "configuration reloaded from '%s'", r->path);
	return 0;
}

void
ctl_reload_on_change(void *r)
{
	ctl_reload_now(r, false);
}

void
ctl_reload_get_counters(const ctl_reload *r, ctl_reload_counters *ret)
{
	*ret = r->counters;
}
