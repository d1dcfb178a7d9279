/* threshold - an out-of-tree bellows policy, built as a plug-in.
 *
 * Each selected layer gets level `high` in the next window when the norm
 * of its gradient over the window just closed is above `threshold`, and
 * level `low` otherwise: the crudest form of the critical-regime detection
 * Accordion does properly, small enough to read as a template. It uses
 * nothing but the installed header <bellows/policy.h> (and the error codes
 * of <bellows/error.h>): a plug-in cannot call into bellowsd.
 *
 * It keeps a little state, counts of what it has seen, and writes them in
 * every reason, so that one can watch a reload keep an instance's state
 * (bellowsd hands the same state to the new configuration) or restart it
 * (`reset_on_reload: true`, which refuses the reload event).
 *
 * Build: see meson.build next to this file; any shared object exporting
 * bellows_policy_entry works, e.g.
 *   cc -shared -fPIC -fvisibility=hidden -I/usr/include threshold.c \
 *       -o libthreshold.so
 */
#include <bellows/error.h>
#include <bellows/policy.h>

#include <stddef.h>
#include <stdio.h>

typedef struct threshold_config {
	double threshold;     /* grad_norm above it means `high` */
	double high;          /* level of a layer above the threshold */
	double low;           /* level of the others */
	bool reset_on_reload; /* start over when the file is reloaded */
} threshold_config;

typedef struct threshold_state {
	uint64_t windows;      /* windows seen */
	uint64_t reloads;      /* reloads survived */
	uint64_t ranks_lost;   /* rank-lost events */
	uint64_t ranks_joined; /* rank-joined events */
} threshold_state;

static const bellows_param threshold_params[] = {
	{ .name = "threshold",
	    .type = BELLOWS_PARAM_DOUBLE,
	    .offset = offsetof(threshold_config, threshold),
	    .min = 0,
	    .max = 1e300,
	    .required = true,
	    .help = "gradient norm above which a layer gets `high`" },
	{ .name = "high",
	    .type = BELLOWS_PARAM_DOUBLE,
	    .offset = offsetof(threshold_config, high),
	    .min = 0,
	    .max = 1e9,
	    .def = 4,
	    .help = "level of a layer above the threshold" },
	{ .name = "low",
	    .type = BELLOWS_PARAM_DOUBLE,
	    .offset = offsetof(threshold_config, low),
	    .min = 0,
	    .max = 1e9,
	    .def = 1,
	    .help = "level of a layer at or below it" },
	{ .name = "reset_on_reload",
	    .type = BELLOWS_PARAM_BOOL,
	    .offset = offsetof(threshold_config, reset_on_reload),
	    .def = 0,
	    .help = "forget the counts when the configuration is reloaded" },
	{ .name = NULL },
};

static int
threshold_init(void *state, const void *config, const bellows_job_info *job,
    bellows_proposal *initial)
{
	const threshold_config *cfg = config;

	(void)state; /* zeroed by the host: nothing seen yet */
	for (uint32_t i = 0; i < initial->n_layers; i++) {
		if (bellows_job_layer_at(job, i)->selected)
			initial->level[i] = cfg->low;
	}
	snprintf(initial->reason, sizeof(initial->reason),
	    "threshold: level %g until the first window", cfg->low);
	return 0;
}

static int
threshold_on_window(void *state, const void *config, const bellows_window *w,
    bellows_proposal *out)
{
	const threshold_config *cfg = config;
	threshold_state *st = state;
	uint32_t high = 0, low = 0;

	st->windows++;
	for (uint32_t i = 0; i < w->n_layers && i < out->n_layers; i++) {
		const bellows_window_layer *l = bellows_window_layer_at(w, i);

		if (!l->selected)
			continue;
		/* A layer nobody reported has a NaN norm: not above. */
		if (l->grad_norm > cfg->threshold) {
			out->level[i] = cfg->high;
			high++;
		} else {
			out->level[i] = cfg->low;
			low++;
		}
	}
	snprintf(out->reason, sizeof(out->reason),
	    "threshold %g: %u high, %u low; seen %llu windows, %llu "
	    "reloads, %llu ranks joined, %llu lost",
	    cfg->threshold, high, low, (unsigned long long)st->windows,
	    (unsigned long long)st->reloads,
	    (unsigned long long)st->ranks_joined,
	    (unsigned long long)st->ranks_lost);
	return 0;
}

static int
threshold_on_event(void *state, const void *config, const bellows_event *ev)
{
	const threshold_config *cfg = config;
	threshold_state *st = state;

	switch (ev->type) {
	case BELLOWS_EVENT_RANK_LOST:
		st->ranks_lost++;
		break;
	case BELLOWS_EVENT_RANK_JOINED:
		st->ranks_joined++;
		break;
	case BELLOWS_EVENT_RELOAD:
		/* Refusing makes bellowsd start this instance over. */
		if (cfg->reset_on_reload)
			return BELLOWS_ESTATE;
		st->reloads++;
		break;
	case BELLOWS_EVENT_LR_CHANGE:
		/* ev->lr_old -> ev->lr_new: a threshold on gradient norms
		 * has nothing to adapt (Accordion's rule reads the LR from
		 * the windows themselves). */
		break;
	}
	return 0;
}

static const bellows_policy_ops threshold_ops = {
	.abi_version = BELLOWS_POLICY_ABI,
	.name = "threshold",
	/* It reads only acc_norm (grad_norm in the window): the agents may
	 * skip what no policy of the job reads. */
	.stats_read = BELLOWS_STAT_READ(acc_norm) | BELLOWS_STATS_DECLARED,
	.summary = "level high above a gradient-norm threshold, else low",
	.knobs = BELLOWS_KNOB_LEVEL,
	.config_size = sizeof(threshold_config),
	.state_size = sizeof(threshold_state),
	.params = threshold_params,
	.init = threshold_init,
	.on_window = threshold_on_window,
	.on_event = threshold_on_event,
};

BELLOWS_EXPORT const bellows_policy_ops *bellows_policy_entry(void);

/* The one symbol bellowsd looks up (BELLOWS_POLICY_ENTRY). */
const bellows_policy_ops *
bellows_policy_entry(void)
{
	return &threshold_ops;
}
