/* accordion - Accordion's critical-regime rule: light compression (or
 * small batches) while gradient norms change fast, heavy compression (or
 * large batches) once they settle.
 *
 * Every `interval` windows the rule compares a norm of the window-summed
 * gradient with the same norm `interval` windows back: a relative change
 * r = |n_old - n_now| / n_old of at least eta declares a critical regime,
 * anything less a stable one. A learning-rate drop declares a critical
 * regime at once, held until the next check. `accordion` applies the rule
 * per selected layer and sets compression levels; `accordion_batch` applies
 * it to the whole model's norm and sets the per-rank batch size, scaling
 * the LR with it. Both keep every layer's norm of the last `interval`
 * windows in a ring keyed by window index, so a gap in the windows (say
 * bellowsd was down) is noticed instead of compared across, and a reload
 * that changes the interval keeps what still fits. The thesis's text and
 * the readings chosen here are in docs/policies/accordion.md.
 */
#include "metric.h"
#include "policies.h"
#include "pol_text.h"

#include <bellows/error.h>

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Norms one instance may hold, all windows of the ring together (256 MiB):
 * interval x layers beyond this is refused rather than allocated. */
#define ACCORDION_HISTORY_MAX ((uint64_t)1 << 25)

#define ACCORDION_INTERVAL_MAX 100000

/* ---- the rule's parameters, shared by both modes --------------------- */

typedef enum accordion_source {
	ACCORDION_RANK0 = 0, /* rank 0's norm, as the authors' code */
	ACCORDION_MEAN = 1,  /* mean over the reporting ranks */
} accordion_source;

typedef struct accordion_rule {
	double eta; /* relative change that declares a critical regime */
	int64_t
	    interval; /* windows between checks and how far back they look */
	char norm_source[BELLOWS_PARAM_STRING_MAX]; /* "rank0" or "mean" */
} accordion_rule;

/* The rule's entries of both modes' parameter tables; T is the config
 * struct, which embeds an accordion_rule named `rule`. */
#define ACCORDION_ETA(T)                                                       \
	{                                                                      \
		.name = "eta", .type = BELLOWS_PARAM_DOUBLE,                   \
		.offset = offsetof(T, rule.eta), .min = 1e-12, .max = 1e6,     \
		.def = 0.5,                                                    \
		.help =                                                        \
		    "relative norm change (> 0) declaring a critical regime"   \
	}
#define ACCORDION_INTERVAL(T)                                                  \
	{                                                                      \
		.name = "interval", .type = BELLOWS_PARAM_INT,                 \
		.offset = offsetof(T, rule.interval), .min = 1,                \
		.max = ACCORDION_INTERVAL_MAX, .def = 10,                      \
		.help =                                                        \
		    "windows between checks; each compares with the window "   \
		    "this far back"                                            \
	}
static const char *const accordion_sources[] = { "rank0", "mean", NULL };

#define ACCORDION_NORM_SOURCE(T)                                               \
	{                                                                      \
		.name = "norm_source", .type = BELLOWS_PARAM_STRING,           \
		.offset = offsetof(T, rule.norm_source), .def_str = "rank0",   \
		.choices = accordion_sources,                                  \
		.help =                                                        \
		    "whose gradient norms: rank0 (the mean if rank 0 did not " \
		    "report) or mean"                                          \
	}

static int
accordion_source_parse(const char *s, accordion_source *ret)
{
	if (strcmp(s, "rank0") == 0)
		*ret = ACCORDION_RANK0;
	else if (strcmp(s, "mean") == 0)
		*ret = ACCORDION_MEAN;
	else
		return BELLOWS_EINVAL;
	return 0;
}

/* The YAML parser checks types and inclusive ranges only: the string's
 * values and eta's open lower end are checked here, at init, at every
 * reload and (cheaply) at every window for hosts that swap configs. */
static int
accordion_rule_check(const accordion_rule *rule, accordion_source *ret_src)
{
	char src[BELLOWS_PARAM_STRING_MAX];

	if (!(rule->eta > 0 && rule->eta <= 1e6))
		return BELLOWS_EINVAL;
	if (rule->interval < 1 || rule->interval > ACCORDION_INTERVAL_MAX)
		return BELLOWS_EINVAL;
	memcpy(src, rule->norm_source, sizeof(src));
	src[sizeof(src) - 1] = '\0';
	return accordion_source_parse(src, ret_src);
}

/* ---- history: the norms of the last `interval` windows --------------- */

typedef struct accordion_history {
	uint32_t cap;       /* windows held: the check interval */
	uint32_t width;     /* norms per window: the job's layers */
	uint64_t last;      /* latest window recorded + 1, 0 = none */
	uint64_t *tag;      /* per slot: its window + 1, 0 = empty */
	uint64_t *steps;    /* per slot: steps the window spanned */
	uint32_t *fallback; /* per slot: mean norms standing in for rank 0's */
	double *norm;       /* cap rows of width norms, NAN = none */
} accordion_history;

static void
accordion_history_fini(accordion_history *h)
{
	free(h->tag);
	free(h->steps);
	free(h->fallback);
	free(h->norm);
	memset(h, 0, sizeof(*h));
}

/* Allocates an empty ring into *ret (untouched on failure). Returns 0,
 * BELLOWS_ELIMIT past ACCORDION_HISTORY_MAX norms, or BELLOWS_ENOMEM. */
static int
accordion_history_alloc(accordion_history *ret, uint32_t cap, uint32_t width)
{
	accordion_history h = { .cap = cap, .width = width };
	uint64_t row = width > 0 ? width : 1;

	if (cap == 0 || (uint64_t)cap * row > ACCORDION_HISTORY_MAX)
		return BELLOWS_ELIMIT;
	h.tag = calloc(cap, sizeof(*h.tag));
	h.steps = calloc(cap, sizeof(*h.steps));
	h.fallback = calloc(cap, sizeof(*h.fallback));
	h.norm = malloc(sizeof(double) * (size_t)(cap * row));
	if (h.tag == NULL || h.steps == NULL || h.fallback == NULL ||
	    h.norm == NULL) {
		accordion_history_fini(&h);
		return BELLOWS_ENOMEM;
	}
	*ret = h;
	return 0;
}

static double *
accordion_history_row(const accordion_history *h, size_t slot)
{
	return h->norm + slot * (h->width > 0 ? h->width : 1);
}

/* Returns the norms recorded for `window`, or NULL if that window was
 * never recorded or has left the ring. */
static const double *
accordion_history_find(const accordion_history *h, uint64_t window,
    uint32_t *ret_fallback, uint64_t *ret_steps)
{
	size_t slot = window % h->cap;

	if (h->tag[slot] != window + 1)
		return NULL;
	*ret_fallback = h->fallback[slot];
	*ret_steps = h->steps[slot];
	return accordion_history_row(h, slot);
}

static void
accordion_history_put(accordion_history *h, uint64_t window, const double *norm,
    uint32_t fallback, uint64_t steps)
{
	size_t slot = window % h->cap;

	h->tag[slot] = window + 1;
	h->fallback[slot] = fallback;
	h->steps[slot] = steps;
	memcpy(accordion_history_row(h, slot), norm, sizeof(double) * h->width);
	if (window + 1 > h->last)
		h->last = window + 1;
}

/* Re-sizes the ring to `cap` windows, keeping the latest recorded ones
 * that still fit. On failure the ring is unchanged. */
static int
accordion_history_resize(accordion_history *h, uint32_t cap)
{
	accordion_history n;
	int r;

	if (cap == h->cap)
		return 0;
	if ((r = accordion_history_alloc(&n, cap, h->width)) != 0)
		return r;
	for (size_t s = 0; s < h->cap; s++) {
		uint64_t window = h->tag[s] - 1;

		if (h->tag[s] == 0 || h->last - 1 - window >= cap)
			continue;
		accordion_history_put(&n, window, accordion_history_row(h, s),
		    h->fallback[s], h->steps[s]);
	}
	n.last = h->last;
	accordion_history_fini(h);
	*h = n;
	return 0;
}

/* ---- reading a window, judging a change ------------------------------ */

/* Fills norm[l] for every layer of w from `src`, NAN where there is no
 * usable norm (missing, negative or not finite: wire data). Returns how
 * many selected layers had the mean standing in for rank 0's norm. */
static uint32_t
accordion_read_norms(const bellows_window *w, accordion_source src,
    double *norm)
{
	uint32_t fallback = 0;

	for (uint32_t l = 0; l < w->n_layers; l++) {
		const bellows_window_layer *wl = &w->layers[l];
		double n = src == ACCORDION_MEAN ? wl->grad_norm_mean
						 : wl->grad_norm_rank0;

		if (src == ACCORDION_RANK0 && isnan(n)) {
			n = wl->grad_norm_mean;
			if (wl->selected && isfinite(n) && n >= 0)
				fallback++;
		}
		norm[l] = isfinite(n) && n >= 0 ? n : NAN;
	}
	return fallback;
}

static uint64_t
accordion_steps(const bellows_window *w)
{
	return w->last_step >= w->first_step ? w->last_step - w->first_step + 1
					     : 0;
}

/* The learning rate of window w + 1 is lower than that of window w. */
static bool
accordion_lr_drops(const bellows_window *w)
{
	return isfinite(w->lr) && isfinite(w->lr_next) && w->lr_next < w->lr;
}

/* The first check at or after window w + 1. */
static uint64_t
accordion_next_check(uint64_t w, uint64_t interval)
{
	return (w / interval + 1) * interval;
}

typedef enum accordion_verdict {
	ACCORDION_UNJUDGED = 0, /* not selected, or not a check */
	ACCORDION_CRITICAL = 1, /* changed by eta or more: light compression */
	ACCORDION_STABLE = 2,   /* changed less: heavy compression */
	ACCORDION_NO_OLD = 3,   /* no norm for the window compared with: kept */
	ACCORDION_NO_NOW = 4,   /* no norm for this window: kept */
	ACCORDION_VERDICTS = 5,
} accordion_verdict;

/* The rule proper (the thesis's formula, with its absolute value): r is
 * set for CRITICAL and STABLE. A zero old norm is critical, as the
 * authors' code (which sets the ratio to 9 then). */
static accordion_verdict
accordion_judge(double old, double now, double eta, double *ret_r)
{
	if (isnan(old))
		return ACCORDION_NO_OLD;
	if (isnan(now))
		return ACCORDION_NO_NOW;
	if (old == 0) {
		*ret_r = INFINITY;
		return ACCORDION_CRITICAL;
	}
	*ret_r = fabs(old - now) / old;
	return *ret_r >= eta ? ACCORDION_CRITICAL : ACCORDION_STABLE;
}

/* ---- reasons ------------------------------------------------------------ */

/* Adds "; critical: a r=0.62, b r=inf" for the layers judged `v`. */
static void
accordion_text_layers(pol_text *t, const bellows_window *w,
    const uint8_t *verdict, const double *ratio, accordion_verdict v,
    const char *title)
{
	bool first = true;

	for (uint32_t l = 0; l < w->n_layers; l++) {
		if (verdict[l] != v)
			continue;
		if (v == ACCORDION_CRITICAL || v == ACCORDION_STABLE)
			pol_text_add(t, "%s%s r=%.3g", first ? title : ", ",
			    w->layers[l].name, ratio[l]);
		else
			pol_text_add(t, "%s%s", first ? title : ", ",
			    w->layers[l].name);
		first = false;
	}
}

/* Adds "; mean norms for 3 layers rank 0 lacked in window 20". */
static void
accordion_text_fallback(pol_text *t, uint32_t n, uint64_t window)
{
	if (n > 0)
		pol_text_add(t,
		    "; mean norms for %u layer%s rank 0 lacked in window %llu",
		    n, n == 1 ? "" : "s", (unsigned long long)window);
}

/* ==== accordion: per-layer compression levels ========================== */

typedef struct accordion_config {
	double critical_level; /* level in critical regimes */
	double stable_level;   /* level otherwise */
	accordion_rule rule;   /* eta, interval, norm source */
} accordion_config;

static const bellows_param accordion_params[] = {
	{ .name = "critical_level",
	    .type = BELLOWS_PARAM_DOUBLE,
	    .offset = offsetof(accordion_config, critical_level),
	    .min = 0,
	    .max = 1e9,
	    .def = 2,
	    .help = "level of selected layers in critical regimes "
		    "(light compression, e.g. PowerSGD rank 2)" },
	{ .name = "stable_level",
	    .type = BELLOWS_PARAM_DOUBLE,
	    .offset = offsetof(accordion_config, stable_level),
	    .min = 0,
	    .max = 1e9,
	    .def = 1,
	    .help = "level of selected layers otherwise "
		    "(heavy compression, e.g. PowerSGD rank 1)" },
	ACCORDION_ETA(accordion_config),
	ACCORDION_INTERVAL(accordion_config),
	ACCORDION_NORM_SOURCE(accordion_config),
	{ .name = NULL },
};

typedef struct accordion_state {
	accordion_history hist; /* every layer's norm, last interval windows */
	uint32_t n_layers;      /* layers of the job */
	uint8_t *critical;      /* per layer: 1 = critical regime in force */
	uint8_t *verdict;       /* per layer: this check's accordion_verdict */
	double *ratio;          /* per layer: this check's r */
	double *norm;           /* per layer: this window's norm */
} accordion_state;

static int
accordion_config_check(const accordion_config *cfg, accordion_source *src)
{
	if (!(cfg->critical_level >= 0 && cfg->critical_level <= 1e9) ||
	    !(cfg->stable_level >= 0 && cfg->stable_level <= 1e9))
		return BELLOWS_EINVAL;
	return accordion_rule_check(&cfg->rule, src);
}

static void
accordion_fini(void *state, const void *config)
{
	accordion_state *st = state;

	accordion_history_fini(&st->hist);
	free(st->critical);
	free(st->verdict);
	free(st->ratio);
	free(st->norm);
	memset(st, 0, sizeof(*st));
}

static int
accordion_init(void *state, const void *config, const bellows_job_info *job,
    bellows_proposal *initial)
{
	accordion_state *st = state;
	const accordion_config *cfg = config;
	size_t n = job->n_layers > 0 ? job->n_layers : 1;
	accordion_source src;
	uint32_t selected = 0;
	int r;

	if ((r = accordion_config_check(cfg, &src)) != 0)
		return r;
	if (initial->n_layers != job->n_layers)
		return BELLOWS_EMISMATCH;
	r = accordion_history_alloc(&st->hist, (uint32_t)cfg->rule.interval,
	    job->n_layers);
	if (r != 0)
		return r;
	st->n_layers = job->n_layers;
	st->critical = malloc(n);
	st->verdict = calloc(n, 1);
	st->ratio = calloc(n, sizeof(double));
	st->norm = calloc(n, sizeof(double));
	if (st->critical == NULL || st->verdict == NULL || st->ratio == NULL ||
	    st->norm == NULL) {
		accordion_fini(st, config);
		return BELLOWS_ENOMEM;
	}
	/* Window 0 is critical: the thesis's first critical regime. */
	memset(st->critical, 1, n);
	for (uint32_t l = 0; l < job->n_layers; l++) {
		selected += job->layers[l].selected;
		initial->level[l] = job->layers[l].selected
		    ? cfg->critical_level
		    : 0;
	}
	snprintf(initial->reason, sizeof(initial->reason),
	    "%u layer%s critical (level %g) until the check at window 0",
	    selected, selected == 1 ? "" : "s", cfg->critical_level);
	return 0;
}

/* Writes the reason for window w (see docs/policies/accordion.md). */
static void
accordion_explain(const accordion_state *st, const accordion_config *cfg,
    const bellows_window *w, bool check, bool lr_drop, uint32_t fallback,
    uint32_t old_fallback, bellows_proposal *out)
{
	uint64_t iv = (uint64_t)cfg->rule.interval;
	unsigned long long now = (unsigned long long)w->window;
	unsigned long long old = check && now > 0 ? now - iv : 0;
	uint32_t tally[ACCORDION_VERDICTS] = { 0 };
	pol_text t;

	pol_text_init(&t, out->reason, sizeof(out->reason));
	for (uint32_t l = 0; l < w->n_layers; l++)
		tally[st->verdict[l]]++;
	if (check && now == 0) {
		pol_text_add(&t,
		    "window 0: %u layer%s critical (level %g) from window 1",
		    tally[ACCORDION_CRITICAL],
		    tally[ACCORDION_CRITICAL] == 1 ? "" : "s",
		    cfg->critical_level);
	} else if (check) {
		pol_text_add(&t,
		    "window %llu vs window %llu (eta %g): %u critical (level "
		    "%g), %u stable (level %g)",
		    now, old, cfg->rule.eta, tally[ACCORDION_CRITICAL],
		    cfg->critical_level, tally[ACCORDION_STABLE],
		    cfg->stable_level);
		if (tally[ACCORDION_NO_OLD] + tally[ACCORDION_NO_NOW] > 0)
			pol_text_add(&t, ", %u kept",
			    tally[ACCORDION_NO_OLD] + tally[ACCORDION_NO_NOW]);
	}
	if (lr_drop)
		pol_text_add(&t,
		    "%sLR drops %g -> %g after window %llu: all critical "
		    "(level %g) until the check at window %llu",
		    t.used > 0 ? "; " : "", w->lr, w->lr_next, now,
		    cfg->critical_level,
		    (unsigned long long)accordion_next_check(now, iv));
	if (!check && !lr_drop)
		pol_text_add(&t,
		    "levels now critical %g, stable %g from window %llu",
		    cfg->critical_level, cfg->stable_level, now + 1);
	if (!check || now == 0)
		return;
	accordion_text_fallback(&t, fallback, now);
	accordion_text_fallback(&t, old_fallback, old);
	accordion_text_layers(&t, w, st->verdict, st->ratio, ACCORDION_CRITICAL,
	    "; critical: ");
	accordion_text_layers(&t, w, st->verdict, st->ratio, ACCORDION_STABLE,
	    "; stable: ");
	if (tally[ACCORDION_NO_OLD] > 0) {
		char title[64];

		snprintf(title, sizeof(title),
		    "; kept, no norm for window %llu: ", old);
		accordion_text_layers(&t, w, st->verdict, st->ratio,
		    ACCORDION_NO_OLD, title);
	}
	if (tally[ACCORDION_NO_NOW] > 0) {
		char title[64];

		snprintf(title, sizeof(title),
		    "; kept, no norm for window %llu: ", now);
		accordion_text_layers(&t, w, st->verdict, st->ratio,
		    ACCORDION_NO_NOW, title);
	}
}

static int
accordion_on_window(void *state, const void *config, const bellows_window *w,
    bellows_proposal *out)
{
	accordion_state *st = state;
	const accordion_config *cfg = config;
	uint64_t iv = (uint64_t)cfg->rule.interval;
	const double *old = NULL;
	uint32_t fallback, old_fallback = 0;
	uint64_t old_steps;
	accordion_source src;
	bool check, lr_drop, changed = false;
	int r;

	if ((r = accordion_config_check(cfg, &src)) != 0)
		return r;
	if (w->n_layers != st->n_layers || out->n_layers != st->n_layers)
		return BELLOWS_EMISMATCH;
	/* A host that swapped configs without a RELOAD event. */
	if ((r = accordion_history_resize(&st->hist, (uint32_t)iv)) != 0)
		return r;

	fallback = accordion_read_norms(w, src, st->norm);
	check = w->window % iv == 0;
	if (check && w->window > 0)
		old = accordion_history_find(&st->hist, w->window - iv,
		    &old_fallback, &old_steps);
	for (uint32_t l = 0; l < st->n_layers; l++) {
		accordion_verdict v = ACCORDION_CRITICAL;

		st->verdict[l] = ACCORDION_UNJUDGED;
		if (!check || !w->layers[l].selected)
			continue;
		if (w->window > 0)
			v = accordion_judge(old != NULL ? old[l] : NAN,
			    st->norm[l], cfg->rule.eta, &st->ratio[l]);
		st->verdict[l] = (uint8_t)v;
		if (v == ACCORDION_CRITICAL || v == ACCORDION_STABLE) {
			st->critical[l] = v == ACCORDION_CRITICAL;
			/* For people (history, reports): the r judged
			 * (window 0 has none). */
			if (w->window > 0)
				pol_metric_add(out, "r", (int32_t)l,
				    st->ratio[l]);
		}
	}
	if (check && w->window > 0)
		pol_metric_add(out, "eta", -1, cfg->rule.eta);
	/* After the look-up: with cap == interval, window w - interval and
	 * window w share a slot. */
	accordion_history_put(&st->hist, w->window, st->norm, fallback,
	    accordion_steps(w));

	lr_drop = accordion_lr_drops(w);
	for (uint32_t l = 0; l < st->n_layers; l++) {
		double level = 0;

		if (w->layers[l].selected) {
			if (lr_drop)
				st->critical[l] = 1;
			level = st->critical[l] ? cfg->critical_level
						: cfg->stable_level;
		}
		changed = changed || out->level[l] != level;
		out->level[l] = level;
	}
	if (check || lr_drop || changed)
		accordion_explain(st, cfg, w, check, lr_drop, fallback,
		    old_fallback, out);
	return 0;
}

static int
accordion_on_event(void *state, const void *config, const bellows_event *ev)
{
	accordion_state *st = state;
	const accordion_config *cfg = config;
	accordion_source src;
	int r;

	if (ev->type != BELLOWS_EVENT_RELOAD)
		return 0;
	if ((r = accordion_config_check(cfg, &src)) != 0)
		return r;
	return accordion_history_resize(&st->hist,
	    (uint32_t)cfg->rule.interval);
}

const bellows_policy_ops pol_accordion_ops = {
	.abi_version = BELLOWS_POLICY_ABI,
	.name = "accordion",
	.stats_read = BELLOWS_STAT_READ(acc_norm) | BELLOWS_STATS_DECLARED,
	.summary = "per-layer levels: light compression in critical regimes "
		   "(Accordion)",
	.knobs = BELLOWS_KNOB_LEVEL,
	.config_size = sizeof(accordion_config),
	.state_size = sizeof(accordion_state),
	.params = accordion_params,
	.init = accordion_init,
	.on_window = accordion_on_window,
	.fini = accordion_fini,
	.on_event = accordion_on_event,
};

/* ==== accordion_batch: batch size and LR scale ========================= */

typedef struct accordion_batch_config {
	int64_t batch_critical; /* per-rank batch in critical regimes */
	int64_t batch_stable;   /* per-rank batch otherwise */
	int64_t warmup_windows; /* windows of linear LR warm-up, 0 = none */
	double warmup_from;     /* warm-up's first LR factor */
	bool per_step;       /* divide the model norm by the window's steps */
	accordion_rule rule; /* eta, interval, norm source */
} accordion_batch_config;

static const bellows_param accordion_batch_params[] = {
	{ .name = "batch_critical",
	    .type = BELLOWS_PARAM_INT,
	    .offset = offsetof(accordion_batch_config, batch_critical),
	    .min = 1,
	    .max = 1e8,
	    .def = 512,
	    .help = "per-rank batch size in critical regimes (small)" },
	{ .name = "batch_stable",
	    .type = BELLOWS_PARAM_INT,
	    .offset = offsetof(accordion_batch_config, batch_stable),
	    .min = 1,
	    .max = 1e8,
	    .def = 4096,
	    .help = "per-rank batch size otherwise (large)" },
	{ .name = "warmup_windows",
	    .type = BELLOWS_PARAM_INT,
	    .offset = offsetof(accordion_batch_config, warmup_windows),
	    .min = 0,
	    .max = 1e6,
	    .def = 0,
	    .help = "windows of linear LR warm-up from the start, 0 = none" },
	{ .name = "warmup_from",
	    .type = BELLOWS_PARAM_DOUBLE,
	    .offset = offsetof(accordion_batch_config, warmup_from),
	    .min = 0,
	    .max = 1,
	    .def = 0.25,
	    .help = "LR factor the warm-up starts from (window 0)" },
	{ .name = "per_step",
	    .type = BELLOWS_PARAM_BOOL,
	    .offset = offsetof(accordion_batch_config, per_step),
	    .def = 0,
	    .help = "compare model norms divided by the window's steps "
		    "(batch-size invariant with epoch windows)" },
	ACCORDION_ETA(accordion_batch_config),
	ACCORDION_INTERVAL(accordion_batch_config),
	ACCORDION_NORM_SOURCE(accordion_batch_config),
	{ .name = NULL },
};

typedef struct accordion_batch_state {
	accordion_history hist; /* every layer's norm, last interval windows */
	uint32_t n_layers;      /* layers of the job */
	bool critical;          /* critical regime in force */
	double *norm;           /* per layer: this window's norm */
} accordion_batch_state;

static int
accordion_batch_config_check(const accordion_batch_config *cfg,
    accordion_source *src)
{
	if (cfg->batch_critical < 1 || cfg->batch_critical > 100000000 ||
	    cfg->batch_stable < 1 || cfg->batch_stable > 100000000 ||
	    cfg->warmup_windows < 0 || cfg->warmup_windows > 1000000 ||
	    !(cfg->warmup_from >= 0 && cfg->warmup_from <= 1))
		return BELLOWS_EINVAL;
	return accordion_rule_check(&cfg->rule, src);
}

/* The warm-up's LR factor in force during window `w`: warmup_from at
 * window 0, rising linearly to 1 at window warmup_windows. */
static double
accordion_warmup(const accordion_batch_config *cfg, uint64_t w)
{
	double span = (double)cfg->warmup_windows;

	if (cfg->warmup_windows == 0 || w >= (uint64_t)cfg->warmup_windows)
		return 1;
	return cfg->warmup_from + (1 - cfg->warmup_from) * ((double)w / span);
}

/* sqrt of the sum of the selected layers' squared norms (per step when
 * asked); NAN if a selected layer has none, or none is selected. */
static double
accordion_model_norm(const bellows_window *w, const double *norm,
    uint64_t steps, bool per_step)
{
	double sum = 0;
	uint32_t n = 0;

	for (uint32_t l = 0; l < w->n_layers; l++) {
		if (!w->layers[l].selected)
			continue;
		if (isnan(norm[l]))
			return NAN;
		sum += norm[l] * norm[l];
		n++;
	}
	if (n == 0 || (per_step && steps == 0))
		return NAN;
	sum = sqrt(sum);
	if (per_step)
		sum /= (double)steps;
	return isfinite(sum) ? sum : NAN;
}

static void
accordion_batch_fini(void *state, const void *config)
{
	accordion_batch_state *st = state;

	accordion_history_fini(&st->hist);
	free(st->norm);
	memset(st, 0, sizeof(*st));
}

static int
accordion_batch_init(void *state, const void *config,
    const bellows_job_info *job, bellows_proposal *initial)
{
	accordion_batch_state *st = state;
	const accordion_batch_config *cfg = config;
	accordion_source src;
	int r;

	if ((r = accordion_batch_config_check(cfg, &src)) != 0)
		return r;
	r = accordion_history_alloc(&st->hist, (uint32_t)cfg->rule.interval,
	    job->n_layers);
	if (r != 0)
		return r;
	st->n_layers = job->n_layers;
	st->critical = true;
	st->norm = calloc(job->n_layers > 0 ? job->n_layers : 1,
	    sizeof(double));
	if (st->norm == NULL) {
		accordion_batch_fini(st, config);
		return BELLOWS_ENOMEM;
	}
	initial->batch_size = (uint32_t)cfg->batch_critical;
	initial->lr_scale = accordion_warmup(cfg, 0);
	if (cfg->warmup_windows > 0)
		snprintf(initial->reason, sizeof(initial->reason),
		    "batch %u (critical) until the check at window 0, LR "
		    "scale %g warming up to 1 over %lld windows",
		    initial->batch_size, initial->lr_scale,
		    (long long)cfg->warmup_windows);
	else
		snprintf(initial->reason, sizeof(initial->reason),
		    "batch %u (critical) until the check at window 0, LR "
		    "scale 1",
		    initial->batch_size);
	return 0;
}

typedef struct accordion_batch_check {
	accordion_verdict verdict; /* UNJUDGED if not a check window */
	double old;                /* model norm `interval` windows back */
	double now;                /* model norm of this window */
	double r;                  /* relative change, if judged */
	uint32_t old_fallback;     /* mean norms in the old window */
} accordion_batch_check;

static void
accordion_batch_explain(const accordion_batch_config *cfg,
    const bellows_window *w, const accordion_batch_check *c, bool lr_drop,
    uint32_t fallback, const bellows_proposal *proposal, char *buf, size_t len)
{
	uint64_t iv = (uint64_t)cfg->rule.interval;
	unsigned long long now = (unsigned long long)w->window;
	unsigned long long old = now >= iv ? now - iv : 0;
	const char *what = cfg->per_step ? "model norm per step" : "model norm";
	pol_text t;

	pol_text_init(&t, buf, len);
	switch (c->verdict) {
	case ACCORDION_UNJUDGED:
		break;
	case ACCORDION_CRITICAL:
	case ACCORDION_STABLE:
		if (now == 0) {
			pol_text_add(&t, "window 0: critical");
			break;
		}
		pol_text_add(&t,
		    "window %llu vs window %llu (eta %g): %s %.4g -> %.4g, "
		    "r=%.3g: %s",
		    now, old, cfg->rule.eta, what, c->old, c->now, c->r,
		    c->verdict == ACCORDION_CRITICAL ? "critical" : "stable");
		break;
	case ACCORDION_NO_OLD:
	case ACCORDION_NO_NOW:
		pol_text_add(&t,
		    "window %llu vs window %llu: no %s for window %llu, "
		    "regime kept",
		    now, old, what, c->verdict == ACCORDION_NO_OLD ? old : now);
		break;
	case ACCORDION_VERDICTS:
		break;
	}
	if (lr_drop)
		pol_text_add(&t,
		    "%sLR drops %g -> %g after window %llu: critical until "
		    "the check at window %llu",
		    t.used > 0 ? "; " : "", w->lr, w->lr_next, now,
		    (unsigned long long)accordion_next_check(now, iv));
	if (c->verdict != ACCORDION_UNJUDGED) {
		accordion_text_fallback(&t, fallback, now);
		accordion_text_fallback(&t, c->old_fallback, old);
	}
	if (cfg->warmup_windows > 0 && now < (uint64_t)cfg->warmup_windows)
		pol_text_add(&t, "%sLR warm-up %llu/%lld",
		    t.used > 0 ? "; " : "", now + 1,
		    (long long)cfg->warmup_windows);
	pol_text_add(&t, "%sbatch %u, LR scale %g from window %llu",
	    t.used > 0 ? "; " : "", proposal->batch_size, proposal->lr_scale,
	    now + 1);
}

static int
accordion_batch_on_window(void *state, const void *config,
    const bellows_window *w, bellows_proposal *out)
{
	accordion_batch_state *st = state;
	const accordion_batch_config *cfg = config;
	uint64_t iv = (uint64_t)cfg->rule.interval;
	uint64_t steps = accordion_steps(w);
	accordion_batch_check c = { .verdict = ACCORDION_UNJUDGED };
	accordion_source src;
	uint32_t fallback, batch;
	double lr_scale;
	bool lr_drop, warming, changed;
	int r;

	if ((r = accordion_batch_config_check(cfg, &src)) != 0)
		return r;
	if (w->n_layers != st->n_layers)
		return BELLOWS_EMISMATCH;
	if ((r = accordion_history_resize(&st->hist, (uint32_t)iv)) != 0)
		return r;

	fallback = accordion_read_norms(w, src, st->norm);
	c.now = accordion_model_norm(w, st->norm, steps, cfg->per_step);
	if (w->window == 0) {
		c.verdict = ACCORDION_CRITICAL;
	} else if (w->window % iv == 0) {
		uint64_t old_steps = 0;
		const double *old = accordion_history_find(&st->hist,
		    w->window - iv, &c.old_fallback, &old_steps);

		c.old = old != NULL
		    ? accordion_model_norm(w, old, old_steps, cfg->per_step)
		    : NAN;
		c.verdict = accordion_judge(c.old, c.now, cfg->rule.eta, &c.r);
	}
	if (c.verdict == ACCORDION_CRITICAL || c.verdict == ACCORDION_STABLE)
		st->critical = c.verdict == ACCORDION_CRITICAL;
	accordion_history_put(&st->hist, w->window, st->norm, fallback, steps);

	lr_drop = accordion_lr_drops(w);
	if (lr_drop)
		st->critical = true;
	batch = (uint32_t)(st->critical ? cfg->batch_critical
					: cfg->batch_stable);
	/* The linear scaling rule (Goyal et al.), relative to the batch the
	 * trainer's own LR is meant for, times the warm-up. */
	lr_scale = (double)batch / (double)cfg->batch_critical *
	    accordion_warmup(cfg, w->window + 1);
	warming = cfg->warmup_windows > 0 &&
	    w->window < (uint64_t)cfg->warmup_windows;
	changed = out->batch_size != batch || out->lr_scale != lr_scale;
	out->batch_size = batch;
	out->lr_scale = lr_scale;
	if (c.verdict != ACCORDION_UNJUDGED || lr_drop || warming || changed)
		accordion_batch_explain(cfg, w, &c, lr_drop, fallback, out,
		    out->reason, sizeof(out->reason));
	return 0;
}

static int
accordion_batch_on_event(void *state, const void *config,
    const bellows_event *ev)
{
	accordion_batch_state *st = state;
	const accordion_batch_config *cfg = config;
	accordion_source src;
	int r;

	if (ev->type != BELLOWS_EVENT_RELOAD)
		return 0;
	if ((r = accordion_batch_config_check(cfg, &src)) != 0)
		return r;
	return accordion_history_resize(&st->hist,
	    (uint32_t)cfg->rule.interval);
}

const bellows_policy_ops pol_accordion_batch_ops = {
	.abi_version = BELLOWS_POLICY_ABI,
	.name = "accordion_batch",
	.stats_read = BELLOWS_STAT_READ(acc_norm) | BELLOWS_STATS_DECLARED,
	.summary = "small batches in critical regimes, large ones otherwise, "
		   "LR scaled along (Accordion)",
	.knobs = BELLOWS_KNOB_BATCH_SIZE | BELLOWS_KNOB_LR_SCALE,
	.config_size = sizeof(accordion_batch_config),
	.state_size = sizeof(accordion_batch_state),
	.params = accordion_batch_params,
	.init = accordion_batch_init,
	.on_window = accordion_batch_on_window,
	.fini = accordion_batch_fini,
	.on_event = accordion_batch_on_event,
	/* The rule runs on the whole model's norm, 1-D tensors included. */
	.select_every_layer = true,
};
