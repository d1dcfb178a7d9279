/* adaqs - AdaQS's rule: compress less each time the gradient's
 * mean-to-standard-deviation ratio has fallen far enough.
 *
 * The adaptive baseline the thesis compares Accordion with (Guo et al.,
 * ICASSP 2020, re-implemented on PowerSGD in the thesis's Fig. 3.5). The
 * MSDR is taken over the whole model from the window statistics the agents
 * send: they carry sums of |g| and g^2, not of g, so this is the MSDR of
 * |g|: mean = sum |g| / n, var = sum g^2 / n - mean^2, msdr = mean /
 * sqrt(var). The first window with an MSDR sets the reference; whenever the
 * MSDR falls below `drop` times the reference, the level of the selected
 * layers is multiplied by `factor` (PowerSGD rank or top-k keep fraction:
 * "halve the compression ratio"), capped at `max_level`, and the MSDR
 * becomes the new reference. The level never goes back down.
 */
#include "policies.h"

#include <bellows/error.h>

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct adaqs_config {
	double initial_level; /* level of selected layers at the start */
	double max_level;     /* the level is never raised past this */
	double factor;        /* level multiplier at each MSDR fall (> 1) */
	double drop;          /* fall: MSDR below drop x reference, (0, 1) */
} adaqs_config;

static const bellows_param adaqs_params[] = {
	{ .name = "initial_level",
	    .type = BELLOWS_PARAM_DOUBLE,
	    .offset = offsetof(adaqs_config, initial_level),
	    .min = 0,
	    .max = 1e9,
	    .def = 1,
	    .help = "level of selected layers at the start (heavy "
		    "compression, e.g. PowerSGD rank 1)" },
	{ .name = "max_level",
	    .type = BELLOWS_PARAM_DOUBLE,
	    .offset = offsetof(adaqs_config, max_level),
	    .min = 0,
	    .max = 1e9,
	    .def = 4,
	    .help = "highest level (lightest compression) it raises to" },
	{ .name = "factor",
	    .type = BELLOWS_PARAM_DOUBLE,
	    .offset = offsetof(adaqs_config, factor),
	    .min = 1,
	    .max = 1e6,
	    .def = 2,
	    .help = "level multiplier (> 1) at each MSDR fall" },
	{ .name = "drop",
	    .type = BELLOWS_PARAM_DOUBLE,
	    .offset = offsetof(adaqs_config, drop),
	    .min = 0,
	    .max = 1,
	    .def = 0.5,
	    .help = "a fall is an MSDR below drop (in (0, 1)) times the "
		    "reference" },
	{ .name = NULL },
};

typedef struct adaqs_state {
	double level;    /* level of the selected layers in force */
	double msdr_ref; /* MSDR at the last fall, or at the first window */
	bool have_ref;   /* msdr_ref is set */
} adaqs_state;

/* The table's bounds are inclusive; the open ends are checked here, at
 * init and at every reload. */
static int
adaqs_config_check(const adaqs_config *cfg)
{
	if (!(cfg->factor > 1 && cfg->factor <= 1e6) ||
	    !(cfg->drop > 0 && cfg->drop < 1) ||
	    !(cfg->initial_level >= 0 && cfg->initial_level <= 1e9) ||
	    !(cfg->max_level >= 0 && cfg->max_level <= 1e9) ||
	    cfg->initial_level > cfg->max_level)
		return BELLOWS_EINVAL;
	return 0;
}

/* MSDR of |g| over every layer of the window, or NAN when it has no
 * finite elements or no spread. */
static double
adaqs_msdr(const bellows_window *w)
{
	double abs_sum = 0, sum_sq = 0, n = 0, mean, var;

	for (uint32_t l = 0; l < w->n_layers; l++) {
		const bellows_window_layer *wl = &w->layers[l];

		/* count includes the non-finite elements the sums skip. */
		if (wl->nonfinite >= wl->count)
			continue;
		abs_sum += wl->abs_sum;
		sum_sq += wl->sum_sq;
		n += (double)(wl->count - wl->nonfinite);
	}
	if (n == 0)
		return NAN;
	mean = abs_sum / n;
	var = sum_sq / n - mean * mean;
	if (!isfinite(mean) || !isfinite(var) || mean < 0 || !(var > 0))
		return NAN;
	return mean / sqrt(var);
}

static void
adaqs_apply(double level, const bellows_window_layer *layers,
    bellows_proposal *out, bool *ret_changed)
{
	bool changed = false;

	for (uint32_t l = 0; l < out->n_layers; l++) {
		double v = layers[l].selected ? level : 0;

		changed = changed || out->level[l] != v;
		out->level[l] = v;
	}
	*ret_changed = changed;
}

static int
adaqs_init(void *state, const void *config, const bellows_job_info *job,
    bellows_proposal *initial)
{
	adaqs_state *st = state;
	const adaqs_config *cfg = config;
	bool changed;
	int r;

	if ((r = adaqs_config_check(cfg)) != 0)
		return r;
	if (initial->n_layers != job->n_layers)
		return BELLOWS_EMISMATCH;
	*st = (adaqs_state){ .level = cfg->initial_level };
	adaqs_apply(st->level, job->layers, initial, &changed);
	snprintf(initial->reason, sizeof(initial->reason),
	    "level %g until the MSDR falls below %g x its first value",
	    st->level, cfg->drop);
	return 0;
}

static int
adaqs_on_window(void *state, const void *config, const bellows_window *w,
    bellows_proposal *out)
{
	adaqs_state *st = state;
	const adaqs_config *cfg = config;
	unsigned long long now = (unsigned long long)w->window;
	double msdr = adaqs_msdr(w);
	double before;
	bool changed;
	int r;

	if ((r = adaqs_config_check(cfg)) != 0)
		return r;
	if (w->n_layers != out->n_layers)
		return BELLOWS_EMISMATCH;
	/* A reload may have lowered max_level. */
	if (st->level > cfg->max_level)
		st->level = cfg->max_level;
	before = st->level;
	if (isnan(msdr)) {
		adaqs_apply(st->level, w->layers, out, &changed);
		if (changed)
			snprintf(out->reason, sizeof(out->reason),
			    "level %g from window %llu (no MSDR in window "
			    "%llu)",
			    st->level, now + 1, now);
		return 0;
	}
	if (!st->have_ref) {
		st->msdr_ref = msdr;
		st->have_ref = true;
		adaqs_apply(st->level, w->layers, out, &changed);
		snprintf(out->reason, sizeof(out->reason),
		    "window %llu: reference MSDR %.4g, level %g", now, msdr,
		    st->level);
		return 0;
	}
	if (msdr < cfg->drop * st->msdr_ref) {
		double ref = st->msdr_ref;

		st->level = fmin(st->level * cfg->factor, cfg->max_level);
		st->msdr_ref = msdr;
		adaqs_apply(st->level, w->layers, out, &changed);
		if (st->level != before)
			snprintf(out->reason, sizeof(out->reason),
			    "window %llu: MSDR %.4g < %g x reference %.4g: "
			    "level %g -> %g",
			    now, msdr, cfg->drop, ref, before, st->level);
		else
			snprintf(out->reason, sizeof(out->reason),
			    "window %llu: MSDR %.4g < %g x reference %.4g: "
			    "level stays at its maximum %g, new reference",
			    now, msdr, cfg->drop, ref, st->level);
		return 0;
	}
	adaqs_apply(st->level, w->layers, out, &changed);
	if (changed)
		snprintf(out->reason, sizeof(out->reason),
		    "level %g from window %llu (MSDR %.4g, reference %.4g)",
		    st->level, now + 1, msdr, st->msdr_ref);
	return 0;
}

static int
adaqs_on_event(void *state, const void *config, const bellows_event *ev)
{
	if (ev->type != BELLOWS_EVENT_RELOAD)
		return 0;
	return adaqs_config_check(config);
}

static int
adaqs_check(const void *config, char *err, size_t errlen)
{
	int r = adaqs_config_check(config);

	if (r != 0)
		snprintf(err, errlen,
		    "needs factor > 1, 0 < drop < 1 and initial_level <= "
		    "max_level");
	return r;
}

const bellows_policy_ops pol_adaqs_ops = {
	.abi_version = BELLOWS_POLICY_ABI,
	.name = "adaqs",
	.stats_read = BELLOWS_STAT_READ(count) | BELLOWS_STAT_READ(nonfinite) |
	    BELLOWS_STAT_READ(sum_sq) | BELLOWS_STAT_READ(abs_sum) |
	    BELLOWS_STATS_DECLARED,
	.summary = "raises the level each time the gradient's MSDR falls "
		   "(AdaQS baseline)",
	.knobs = BELLOWS_KNOB_LEVEL,
	.config_size = sizeof(adaqs_config),
	.state_size = sizeof(adaqs_state),
	.params = adaqs_params,
	.init = adaqs_init,
	.on_window = adaqs_on_window,
	.on_event = adaqs_on_event,
	.check = adaqs_check,
};
