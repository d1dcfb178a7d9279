/* reload - replacing the configuration in force, see reload.h. */
#include "reload.h"

#include "events.h"
#include "log.h"

#include <bellows/error.h>

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

static int
reload_refuse(ctl_reload *r, int code, const char *err)
{
	r->counters.refused++;
	ctl_log(CTL_LOG_ERROR, "reload",
	    "reload refused, the running configuration stays: %s", err);
	ctl_events_add(ctl_jobs_events(r->jobs), CTL_EVENT_RELOAD_REFUSED, NULL,
	    "%s", err);
	return code;
}

int
ctl_reload_now(ctl_reload *r, bool force)
{
	char err[CTL_CONFIG_ERR_MAX];
	ctl_config *cfg = NULL;
	int rc;

	rc = ctl_config_load(r->path, &cfg, err, sizeof(err));
	if (rc == BELLOWS_ENOMEM)
		snprintf(err, sizeof(err), "%s: out of memory", r->path);
	if (rc != 0)
		return reload_refuse(r, rc, err);
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
		return reload_refuse(r, rc, where);
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
