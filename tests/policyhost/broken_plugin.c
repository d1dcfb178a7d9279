/* broken_plugin - plug-ins bellowsd must refuse or survive, one per
 * BROKEN_* macro (see meson.build): a newer ABI version, the old ABI 1, no
 * on_window, no
 * entry symbol, an entry returning no ops, an init that always fails, and
 * one that refuses every reload and cannot start with x >= 0.5.
 *
 * Then the ones that must not take bellowsd down, which decide normally
 * on even windows (LR scale 0.5 on multiples of 4, else 0.25, and a
 * reason naming the window) and on odd
 * ones write through NULL (segv), abort(), loop for ever (hang), or
 * allocate and touch memory until malloc fails, keep it, and return
 * BELLOWS_ENOMEM (oom; it stops at 4 GiB where nothing caps it); one
 * whose init crashes (init_crash), one whose entry function crashes
 * (entry_crash), and one whose check refuses x >= 0.5 and crashes on
 * x = 1 (checks).
 */
#include <bellows/error.h>
#include <bellows/policy.h>

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(BROKEN_SEGV) || defined(BROKEN_ABORT) || defined(BROKEN_HANG) ||   \
    defined(BROKEN_OOM)
#define BROKEN_MISBEHAVES 1
#endif

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
#elif defined(BROKEN_INIT_CRASH)
	volatile int *volatile nowhere = NULL;

	*nowhere = 42;
	return 0;
#elif defined(BROKEN_REFUSES_RELOAD)
	const broken_config *cfg = config;

	return cfg->x >= 0.5 ? BELLOWS_EINVAL : 0;
#else
	return 0;
#endif
}

#ifdef BROKEN_CHECKS
static int
broken_check(const void *config, char *err, size_t errlen)
{
	const broken_config *cfg = config;

	if (cfg->x == 1) {
		volatile int *volatile nowhere = NULL;

		*nowhere = 42;
	}
	if (cfg->x >= 0.5) {
		snprintf(err, errlen, "x must be below 0.5, not %g", cfg->x);
		return BELLOWS_EINVAL;
	}
	return 0;
}
#endif

#ifdef BROKEN_REFUSES_RELOAD
static int
broken_on_event(void *state, const void *config, const bellows_event *ev)
{
	return ev->type == BELLOWS_EVENT_RELOAD ? BELLOWS_ESTATE : 0;
}
#endif

#ifdef BROKEN_MISBEHAVES
/* What a window % 8 == 1 does. */
static int
broken_misbehave(void)
{
#if defined(BROKEN_SEGV)
	volatile int *volatile nowhere = NULL;

	*nowhere = 42;
	return 0;
#elif defined(BROKEN_ABORT)
	abort();
#elif defined(BROKEN_HANG)
	volatile int forever = 1;

	while (forever) {
	}
	return 0;
#else
	static void **kept;
	size_t n = 0, chunk = 16u << 20;

	kept = calloc(256, sizeof(*kept));
	if (kept == NULL)
		return BELLOWS_ENOMEM;
	while (n < 256) {
		void *p = malloc(chunk);

		if (p == NULL)
			break;
		memset(p, 0xa5, chunk);
		kept[n++] = p;
	}
	return BELLOWS_ENOMEM;
#endif
}
#endif

#ifndef BROKEN_NO_ON_WINDOW
static int
broken_on_window(void *state, const void *config, const bellows_window *w,
    bellows_proposal *out)
{
#ifdef BROKEN_MISBEHAVES
	if (w->window % 8 == 1)
		return broken_misbehave();
	out->lr_scale = w->window % 2 == 0 ? 0.5 : 0.25;
	snprintf(out->reason, sizeof(out->reason), "broken: window %llu",
	    (unsigned long long)w->window);
#endif
	return 0;
}
#endif

static const bellows_policy_ops broken_ops = {
#ifdef BROKEN_ABI
	.abi_version = BELLOWS_POLICY_ABI +
	    97, /* a version no bellowsd speaks */
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
#ifdef BROKEN_CHECKS
	.check = broken_check,
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
#ifdef BROKEN_ENTRY_CRASH
	volatile int *volatile nowhere = NULL;

	*nowhere = 42;
#endif
#ifdef BROKEN_NULL_OPS
	(void)broken_ops;
	return NULL;
#else
	return &broken_ops;
#endif
}
#endif
