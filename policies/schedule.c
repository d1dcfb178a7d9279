/* schedule - levels by window ranges, written in advance.
 *
 * Reproduces hand-made schedules such as the thesis's Fig. 3.1b (low
 * compression in windows 0-20 and 150-160, high elsewhere). The level in
 * force during window w is the value of the last piece starting at or
 * before w; the decision closing window w therefore carries the value for
 * w + 1.
 */
#include "policies.h"

#include "registry.h"

#include <stddef.h>
#include <stdio.h>

typedef struct schedule_config {
	bellows_steps levels; /* window -> level of every selected layer */
} schedule_config;

static const bellows_param schedule_params[] = {
	{ .name = "levels",
	    .type = BELLOWS_PARAM_STEPS,
	    .offset = offsetof(schedule_config, levels),
	    .min = 0,
	    .max = 1e9,
	    .required = true,
	    .help = "mapping first_window: level, e.g. {0: 2, 20: 1}" },
	{ .name = NULL },
};

static void
schedule_apply(const schedule_config *cfg, const bellows_window_layer *layers,
    uint64_t window, bellows_proposal *out)
{
	double level = pol_steps_at(&cfg->levels, window, 0);

	for (uint32_t i = 0; i < out->n_layers; i++)
		out->level[i] = layers[i].selected ? level : 0;
}

static int
schedule_init(void *state, const void *config, const bellows_job_info *job,
    bellows_proposal *initial)
{
	const schedule_config *cfg = config;

	schedule_apply(cfg, job->layers, 0, initial);
	snprintf(initial->reason, sizeof(initial->reason),
	    "schedule: level %g from window 0",
	    pol_steps_at(&cfg->levels, 0, 0));
	return 0;
}

static int
schedule_on_window(void *state, const void *config, const bellows_window *w,
    bellows_proposal *out)
{
	const schedule_config *cfg = config;
	double before = pol_steps_at(&cfg->levels, w->window, 0);
	double after = pol_steps_at(&cfg->levels, w->window + 1, 0);

	schedule_apply(cfg, w->layers, w->window + 1, out);
	if (before != after)
		snprintf(out->reason, sizeof(out->reason),
		    "schedule: level %g -> %g from window %llu", before, after,
		    (unsigned long long)(w->window + 1));
	return 0;
}

const bellows_policy_ops pol_schedule_ops = {
	.abi_version = BELLOWS_POLICY_ABI,
	.name = "schedule",
	.stats_read = BELLOWS_STATS_DECLARED,
	.summary = "levels by window ranges given in advance",
	.knobs = BELLOWS_KNOB_LEVEL,
	.config_size = sizeof(schedule_config),
	.state_size = 0,
	.params = schedule_params,
	.init = schedule_init,
	.on_window = schedule_on_window,
};
