/* broken_plugin - plug-ins bellowsd must refuse or survive, one per
 * BROKEN_* macro (see meson.build): a newer ABI version, the old ABI 1, no
 * on_window, no
 * entry symbol, an entry returning no ops, an init that always fails, and
 * one that refuses every reload and cannot start with x >= 0.5.
 */
#include <bellows/error.h>
#include <bellows/policy.h>

#include <stddef.h>

typedef struct broken_config {
	double x; /* a parameter, so the table is not empty */
} broken_config;

static const bellows_param broken_params[] = {
	{ .name = "x",
	    .type = BELLOWS_PARAM_DOUBLE,
	    .offset = offsetof(broken_config, x),
	    .min = 0,
	    .max = 1,
	    .help = "unused" },
	{ .name = NULL },
};

static int
broken_init(void *state, const void *config, const bellows_job_info *job,
    bellows_proposal *initial)
{
#if defined(BROKEN_INIT_FAILS)
	return BELLOWS_EINVAL;
#elif defined(BROKEN_REFUSES_RELOAD)
	const broken_config *cfg = config;

	return cfg->x >= 0.5 ? BELLOWS_EINVAL : 0;
#else
	return 0;
#endif
}

#ifdef BROKEN_REFUSES_RELOAD
static int
broken_on_event(void *state, const void *config, const bellows_event *ev)
{
	return ev->type == BELLOWS_EVENT_RELOAD ? BELLOWS_ESTATE : 0;
}
#endif

#ifndef BROKEN_NO_ON_WINDOW
static int
broken_on_window(void *state, const void *config, const bellows_window *w,
    bellows_proposal *out)
{
	return 0;
}
#endif

static const bellows_policy_ops broken_ops = {
#ifdef BROKEN_ABI
	.abi_version = BELLOWS_POLICY_ABI + 97,
#elif defined(BROKEN_ABI1)
	.abi_version = 1, /* built before choices, check and LR_CHANGE */
#else
	.abi_version = BELLOWS_POLICY_ABI,
#endif
	.name = "broken",
	.summary = "refused or failing on purpose",
	.knobs = BELLOWS_KNOB_LR_SCALE,
	.config_size = sizeof(broken_config),
	.params = broken_params,
	.init = broken_init,
#ifndef BROKEN_NO_ON_WINDOW
	.on_window = broken_on_window,
#endif
#ifdef BROKEN_REFUSES_RELOAD
	.on_event = broken_on_event,
#endif
};

#ifdef BROKEN_NO_ENTRY
/* Exported under another name: what a typo in the entry looks like. */
BELLOWS_EXPORT const bellows_policy_ops *bellows_policy_entry_v2(void);

const bellows_policy_ops *
bellows_policy_entry_v2(void)
{
	return &broken_ops;
}
#else
BELLOWS_EXPORT const bellows_policy_ops *bellows_policy_entry(void);

const bellows_policy_ops *
bellows_policy_entry(void)
{
#ifdef BROKEN_NULL_OPS
	(void)broken_ops;
	return NULL;
#else
	return &broken_ops;
#endif
}
#endif
