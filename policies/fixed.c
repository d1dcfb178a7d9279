/* fixed - one compression level for every selected layer, forever.
 *
 * The baseline every adaptive policy is measured against (the thesis's
 * "Rank 2" and "Rank 1" rows), and the simplest way to drive a job.
 */
#include "policies.h"

#include <stddef.h>
#include <stdio.h>

typedef struct fixed_config {
	double level; /* level of every selected layer */
} fixed_config;

static const bellows_param fixed_params[] = {
	{ .name = "level",
	    .type = BELLOWS_PARAM_DOUBLE,
	    .offset = offsetof(fixed_config, level),
	    .min = 0,
	    .max = 1e9,
	    .def = 0,
	    .help = "compression level of every selected layer" },
	{ .name = NULL },
};

static void
fixed_apply(const fixed_config *cfg, const bellows_window_layer *layers,
    bellows_proposal *out)
{
	for (uint32_t i = 0; i < out->n_layers; i++)
		out->level[i] = layers[i].selected ? cfg->level : 0;
}

static int
fixed_init(void *state, const void *config, const bellows_job_info *job,
    bellows_proposal *initial)
{
	const fixed_config *cfg = config;

	fixed_apply(cfg, job->layers, initial);
	snprintf(initial->reason, sizeof(initial->reason), "fixed level %g",
	    cfg->level);
	return 0;
}

static int
fixed_on_window(void *state, const void *config, const bellows_window *w,
    bellows_proposal *out)
{
	fixed_apply(config, w->layers, out);
	return 0;
}

const bellows_policy_ops pol_fixed_ops = {
	.abi_version = BELLOWS_POLICY_ABI,
	.name = "fixed",
	.stats_read = BELLOWS_STATS_DECLARED,
	.summary = "the same level for every selected layer, always",
	.knobs = BELLOWS_KNOB_LEVEL,
	.config_size = sizeof(fixed_config),
	.state_size = 0,
	.params = fixed_params,
	.init = fixed_init,
	.on_window = fixed_on_window,
};
