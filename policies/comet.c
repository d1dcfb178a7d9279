/* comet - COMET's error bounds for the lossy compression of convolution
 * inputs, and (comet_batch) the batch size the saved memory allows.
 *
 * Per selected convolution weight the bound is the paper's Eq. 3,
 * eb = sigma / (a * Lbar * sqrt(N * R)) with sigma = sigma_frac * M_avg,
 * clamped to [eb_min, eb_max]. The statistics of the windows since the
 * last update set the bound of the next period (the paper's one-period
 * lag); an update is due once the period spans W steps, whatever the
 * agents' window length, and the very first one as soon as statistics
 * arrive. W halves (down to a minimum) when a layer's bound moved by more
 * than change_factor between two updates and returns to its default after
 * settle_updates calm updates in a row. `comet_batch` also picks, from the
 * second update on, the largest power-of-two batch that its memory model
 * fits into all but `reserve` of the memory, scaling the LR as configured,
 * and re-derives the bounds for that batch. The paper's text, its gaps and
 * the readings chosen here are in docs/policies/comet.md.
 */
#include "metric.h"
#include "policies.h"
#include "pol_text.h"
#include "common/errbuf.h"

#include <bellows/error.h>

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COMET_STEPS_MAX 1000000000 /* largest W, in steps */
#define COMET_BATCH_MAX 100000000  /* largest per-rank batch */
#define COMET_GB        1e9        /* bytes per GB in reasons */

/* ---- parameters shared by both modes ---------------------------------- */

typedef struct comet_rule {
	double sigma_frac;          /* sigma = sigma_frac * M_avg (Eq. 1) */
	double a;                   /* Eq. 10's coefficient */
	double eb_min;              /* smallest bound proposed */
	double eb_max;              /* largest bound proposed */
	double eb_initial;          /* bound before the first update, 0 =
				     * none (stored exactly) */
	int64_t min_ndim;           /* selected layers with fewer dimensions
				     * get no bound: conv weights are 4-D */
	int64_t interval_steps;     /* W: steps between updates, default */
	int64_t min_interval_steps; /* W never halves below this */
	double change_factor;       /* a bound moving by more than this
				     * factor between updates halves W */
	int64_t settle_updates;     /* calm updates in a row that restore W */
} comet_rule;

/* One entry of the rule's part of a parameter table; T embeds a
 * comet_rule named `rule`. */
#define COMET_PARAM(T, kind, field, lo, hi, d, text)                           \
	{                                                                      \
		.name = #field, .type = BELLOWS_PARAM_##kind,                  \
		.offset = offsetof(T, rule.field), .min = lo, .max = hi,       \
		.def = d, .help = text                                         \
	}

/* The rule's entries of both modes' parameter tables. */
#define COMET_RULE_PARAMS(T)                                                   \
	COMET_PARAM(T, DOUBLE, sigma_frac, 1e-9, 1, 0.01,                      \
	    "target gradient error as a fraction of the mean |momentum| "      \
	    "(Eq. 1)"),                                                        \
	    COMET_PARAM(T, DOUBLE, a, 1e-6, 1e6, 0.32,                         \
		"coefficient of Eq. 10 (empirical, 0.32 in the paper)"),       \
	    COMET_PARAM(T, DOUBLE, eb_min, 1e-12, 1e6, 1e-6,                   \
		"smallest bound; also the bound when statistics are not "      \
		"usable (NaN, negative)"),                                     \
	    COMET_PARAM(T, DOUBLE, eb_max, 1e-12, 1e6, 0.1,                    \
		"largest bound; also the bound when Lbar or R is 0"),          \
	    COMET_PARAM(T, DOUBLE, eb_initial, 0, 1e6, 0,                      \
		"bound until the first statistics, 0 = none (activations "     \
		"stored exactly)"),                                            \
	    COMET_PARAM(T, INT, min_ndim, 0, 8, 4,                             \
		"selected layers with fewer dimensions get no bound (4: 2-D "  \
		"convolution weights)"),                                       \
	    COMET_PARAM(T, INT, interval_steps, 1, COMET_STEPS_MAX, 1000,      \
		"W: training steps between bound updates (default)"),          \
	    COMET_PARAM(T, INT, min_interval_steps, 1, COMET_STEPS_MAX, 125,   \
		"W never halves below this many steps"),                       \
	    COMET_PARAM(T, DOUBLE, change_factor, 1, 1e6, 2,                   \
		"a bound changing by more than this factor between updates "   \
		"halves W"),                                                   \
	    COMET_PARAM(T, INT, settle_updates, 1, 1000000, 2,                 \
		"updates in a row with every change within change_factor "     \
		"that restore the default W")

/* Writes a one-line message into err (if any) and returns EINVAL. */
__attribute__((format(printf, 3, 4))) static int
comet_refuse(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	com_verrf(err, errlen, fmt, ap);
	va_end(ap);
	return BELLOWS_EINVAL;
}

/* What the parameter table cannot express, and its ranges again for
 * hosts that hand over a config they did not parse. Returns 0 or
 * BELLOWS_EINVAL with a message in err (err may be NULL). */
static int
comet_rule_check(const comet_rule *r, char *err, size_t errlen)
{
	if (!(r->sigma_frac >= 1e-9 && r->sigma_frac <= 1) ||
	    !(r->a >= 1e-6 && r->a <= 1e6) ||
	    !(r->eb_min >= 1e-12 && r->eb_min <= 1e6) ||
	    !(r->eb_max >= 1e-12 && r->eb_max <= 1e6) ||
	    !(r->eb_initial >= 0 && r->eb_initial <= 1e6) || r->min_ndim < 0 ||
	    r->min_ndim > 8 || r->interval_steps < 1 ||
	    r->interval_steps > COMET_STEPS_MAX || r->min_interval_steps < 1 ||
	    r->min_interval_steps > COMET_STEPS_MAX ||
	    !(r->change_factor >= 1 && r->change_factor <= 1e6) ||
	    r->settle_updates < 1 || r->settle_updates > 1000000)
		return comet_refuse(err, errlen, "a parameter is out of range");
	if (!(r->eb_min < r->eb_max))
		return comet_refuse(err, errlen,
		    "eb_min (%g) must be below eb_max (%g)", r->eb_min,
		    r->eb_max);
	if (r->eb_initial > r->eb_max)
		return comet_refuse(err, errlen,
		    "eb_initial (%g) must not exceed eb_max (%g)",
		    r->eb_initial, r->eb_max);
	if (r->min_interval_steps > r->interval_steps)
		return comet_refuse(err, errlen,
		    "min_interval_steps (%lld) must not exceed "
		    "interval_steps (%lld)",
		    (long long)r->min_interval_steps,
		    (long long)r->interval_steps);
	return 0;
}

/* ---- comet_batch's parameters ----------------------------------------- */

typedef enum comet_lr_mode {
	COMET_LR_NONE = 0,   /* the trainer's LR as it is */
	COMET_LR_LINEAR = 1, /* times B / B0 (Goyal et al.) */
	COMET_LR_SQRT = 2,   /* times sqrt(B / B0) */
} comet_lr_mode;

static const char *const comet_lr_modes[] = { "none", "linear", "sqrt", NULL };

typedef struct comet_batch_rule {
	int64_t max_batch;                         /* largest batch proposed */
	double reserve;                            /* memory kept free */
	int64_t memory_bytes;                      /* limit without a device
						    * total, 0 = none */
	char lr_scaling[BELLOWS_PARAM_STRING_MAX]; /* none, linear, sqrt */
} comet_batch_rule;

static int
comet_lr_parse(const char *s, comet_lr_mode *ret)
{
	for (int i = 0; comet_lr_modes[i] != NULL; i++) {
		if (strcmp(s, comet_lr_modes[i]) == 0) {
			*ret = (comet_lr_mode)i;
			return 0;
		}
	}
	return BELLOWS_EINVAL;
}

static int
comet_batch_rule_check(const comet_batch_rule *b, comet_lr_mode *ret_mode,
    char *err, size_t errlen)
{
	char mode[BELLOWS_PARAM_STRING_MAX];

	if (b->max_batch < 1 || b->max_batch > COMET_BATCH_MAX ||
	    !(b->reserve >= 0 && b->reserve <= 0.99) || b->memory_bytes < 0 ||
	    b->memory_bytes > (int64_t)1e15)
		return comet_refuse(err, errlen, "a parameter is out of range");
	memcpy(mode, b->lr_scaling, sizeof(mode));
	mode[sizeof(mode) - 1] = '\0';
	if (comet_lr_parse(mode, ret_mode) != 0)
		return comet_refuse(err, errlen,
		    "lr_scaling must be none, linear or sqrt");
	return 0;
}

static double
comet_lr_scale(comet_lr_mode mode, uint32_t batch, uint32_t b0)
{
	double q;

	if (batch == 0 || b0 == 0)
		return 1;
	q = (double)batch / (double)b0;
	switch (mode) {
	case COMET_LR_LINEAR:
		return q;
	case COMET_LR_SQRT:
		return sqrt(q);
	case COMET_LR_NONE:
		break;
	}
	return 1;
}

/* ---- the bound -------------------------------------------------------- */

typedef enum comet_clamp {
	COMET_FREE = 0,     /* Eq. 3 within [eb_min, eb_max] */
	COMET_AT_MIN = 1,   /* Eq. 3 below eb_min */
	COMET_AT_MAX = 2,   /* Eq. 3 above eb_max */
	COMET_ZERO = 3,     /* Lbar or R is 0: unbounded, eb_max */
	COMET_UNUSABLE = 4, /* a statistic NaN, infinite or out of its
			     * range, or N 0: eb_min */
} comet_clamp;

/* Eq. 3 for one layer, clamped; *ret_clamp says how. */
static double
comet_bound(const comet_rule *rule, double m, double lbar, double r, double n,
    comet_clamp *ret_clamp)
{
	double den, eb;

	if (!(isfinite(m) && m >= 0 && isfinite(lbar) && lbar >= 0 &&
		isfinite(r) && r >= 0 && r <= 1 && n > 0)) {
		*ret_clamp = COMET_UNUSABLE;
		return rule->eb_min;
	}
	den = rule->a * lbar * sqrt(n * r);
	if (den == 0) {
		*ret_clamp = COMET_ZERO;
		return rule->eb_max;
	}
	eb = rule->sigma_frac * m / den;
	if (!(eb <= rule->eb_max)) {
		*ret_clamp = COMET_AT_MAX;
		return rule->eb_max;
	}
	if (eb < rule->eb_min) {
		*ret_clamp = COMET_AT_MIN;
		return rule->eb_min;
	}
	*ret_clamp = COMET_FREE;
	return eb;
}

/* ---- reasons ------------------------------------------------------------ */

/* ---- state ----------------------------------------------------------- */

typedef struct comet_layer {
	double m_sum;     /* M_avg summed over the period's measured windows */
	double lbar_sum;  /* Lbar, the same */
	double r_sum;     /* R, the same */
	uint32_t n;       /* the period's windows that measured the layer */
	double bytes_sum; /* stored activation bytes, summed over the
			   * windows at mem_batch */
	double raw_sum;   /* uncompressed bytes, the same */
	uint32_t mem_n;   /* windows in bytes_sum and raw_sum */
	double eb;        /* bound proposed, in force from the next window */
	double eb_stat;   /* the last update's bound at the measured N, the
			   * one the next update compares with; NAN: none */
	double n_stat;    /* that N: the next update's bound is compared at
			   * it, so a batch change is no change of the
			   * layer */
	/* This update's working values, for the reason. */
	bool fresh;        /* updated now */
	double m, lbar, r; /* the period's means */
	double n_used;     /* N the bound was derived for */
	comet_clamp clamp; /* how it was clamped */
} comet_layer;

typedef struct comet_state {
	uint32_t n_layers;       /* layers of the job */
	comet_layer *layer;      /* per layer */
	bool started;            /* period_start is set */
	uint64_t period_start;   /* first step of the period being measured */
	uint32_t period_windows; /* windows closed in it */
	uint64_t updates;        /* updates made */
	uint64_t w_default;      /* the configured W */
	uint64_t w_steps;        /* W in force */
	uint64_t calm;           /* updates in a row within change_factor */
	/* comet_batch only. */
	uint32_t b0;        /* the trainer's own batch (first window) */
	uint32_t mem_batch; /* batch of the windows in the memory sums */
	double mem_used;    /* device bytes in use, largest */
	double mem_total;   /* device bytes, smallest reported */
	double host_used;   /* host bytes in use, largest */
	double saved;       /* bytes a step saved for backward, largest
			     * (every activation; 0: not reported) */
	bool lr_due;        /* a reload: recompute the LR scale */
} comet_state;

static bool
comet_eligible(const comet_rule *rule, const bellows_window_layer *wl)
{
	return wl->selected && (int64_t)wl->ndim >= rule->min_ndim;
}

static void
comet_state_fini(comet_state *st)
{
	free(st->layer);
	memset(st, 0, sizeof(*st));
}

static int
comet_state_init(comet_state *st, const comet_rule *rule,
    const bellows_job_info *job, bellows_proposal *initial)
{
	uint32_t n = 0;

	if (initial->n_layers != job->n_layers)
		return BELLOWS_EMISMATCH;
	st->layer = calloc(job->n_layers > 0 ? job->n_layers : 1,
	    sizeof(*st->layer));
	if (st->layer == NULL)
		return BELLOWS_ENOMEM;
	st->n_layers = job->n_layers;
	st->w_default = (uint64_t)rule->interval_steps;
	st->w_steps = st->w_default;
	for (uint32_t l = 0; l < job->n_layers; l++) {
		bool on = comet_eligible(rule, &job->layers[l]);

		st->layer[l].eb = rule->eb_initial;
		st->layer[l].eb_stat = NAN;
		initial->error_bound[l] = on ? rule->eb_initial : 0;
		n += on;
	}
	if (rule->eb_initial > 0)
		snprintf(initial->reason, sizeof(initial->reason),
		    "%u layer%s at bound %g until the first statistics; W %lld "
		    "steps",
		    n, n == 1 ? "" : "s", rule->eb_initial,
		    (long long)rule->interval_steps);
	else
		snprintf(initial->reason, sizeof(initial->reason),
		    "%u layer%s stored exactly until the first statistics; W "
		    "%lld steps",
		    n, n == 1 ? "" : "s", (long long)rule->interval_steps);
	return 0;
}

/* Adds window w's statistics to the period's sums, and (batch mode) its
 * memory figures to the sums of its batch. */
static void
comet_accumulate(comet_state *st, const comet_rule *rule,
    const bellows_window *w, bool batch)
{
	bool mem = batch && w->batch_size > 0;

	if (mem && w->batch_size != st->mem_batch) {
		/* The memory model needs one batch: start over at this one. */
		for (uint32_t l = 0; l < st->n_layers; l++) {
			st->layer[l].bytes_sum = 0;
			st->layer[l].raw_sum = 0;
			st->layer[l].mem_n = 0;
		}
		st->mem_batch = w->batch_size;
		st->mem_used = 0;
		st->mem_total = 0;
		st->host_used = 0;
		st->saved = 0;
	}
	for (uint32_t l = 0; l < st->n_layers; l++) {
		const bellows_window_layer *wl = &w->layers[l];
		comet_layer *cl = &st->layer[l];

		if (wl->act_steps == 0)
			continue;
		if (comet_eligible(rule, wl)) {
			cl->m_sum += wl->momentum_abs_mean;
			cl->lbar_sum += wl->act_lbar;
			cl->r_sum += wl->act_nonzero;
			cl->n++;
		}
		if (mem && isfinite(wl->act_bytes) && wl->act_bytes >= 0 &&
		    isfinite(wl->act_raw_bytes) && wl->act_raw_bytes >= 0) {
			cl->bytes_sum += wl->act_bytes;
			cl->raw_sum += wl->act_raw_bytes;
			cl->mem_n++;
		}
	}
	if (!mem)
		return;
	if (isfinite(w->mem_device_used) && w->mem_device_used > st->mem_used)
		st->mem_used = w->mem_device_used;
	if (isfinite(w->mem_device_total) && w->mem_device_total > 0 &&
	    (st->mem_total == 0 || w->mem_device_total < st->mem_total))
		st->mem_total = w->mem_device_total;
	if (isfinite(w->mem_host_used) && w->mem_host_used > st->host_used)
		st->host_used = w->mem_host_used;
	if (isfinite(w->saved_bytes) && w->saved_bytes > st->saved)
		st->saved = w->saved_bytes;
}

static bool
comet_measured(const comet_state *st)
{
	for (uint32_t l = 0; l < st->n_layers; l++) {
		if (st->layer[l].n > 0)
			return true;
	}
	return false;
}

/* ---- the batch -------------------------------------------------------- */

typedef enum comet_batch_verdict {
	COMET_BATCH_NONE = 0,      /* not decided at this update */
	COMET_BATCH_FITS = 1,      /* the largest fitting batch >= B0 */
	COMET_BATCH_FORCED = 2,    /* only a batch below B0 fits */
	COMET_BATCH_NO_FIT = 3,    /* nothing fits: kept */
	COMET_BATCH_NO_LIMIT = 4,  /* no memory limit known: kept */
	COMET_BATCH_NO_MEMORY = 5, /* no memory use reported: kept */
	COMET_BATCH_NO_BYTES = 6,  /* no activation bytes: kept */
} comet_batch_verdict;

typedef struct comet_batch_plan {
	comet_batch_verdict verdict; /* what was decided */
	uint32_t batch;              /* batch chosen */
	double fixed;                /* bytes that do not grow with B */
	double per_sample;           /* saved bytes per sample (all) */
	double conv;                 /* of which stored conv inputs */
	bool all_saved;              /* per_sample counts every saved
				      * tensor, not the conv inputs only */
	double ratio;                /* raw / stored activation bytes */
	double predicted;            /* bytes predicted at `batch` */
	double allowed;              /* (1 - reserve) * limit */
	double limit;                /* the memory limit */
	bool host;                   /* limit is memory_bytes, not a device */
} comet_batch_plan;

static bool
comet_fits(const comet_batch_plan *p, double b)
{
	return p->fixed + b * p->per_sample <= p->allowed;
}

/* The memory model (see docs/policies/comet.md): what a step saves for
 * backward grows linearly with the batch, the rest of the bytes in use at
 * the measured batch N does not. "What a step saves" is the agents'
 * saved_bytes (every activation, the conv inputs as compressed) when
 * reported, else the stored conv inputs alone (an underestimate). */
static void
comet_batch_plan_make(const comet_state *st, const comet_batch_rule *br,
    comet_batch_plan *p)
{
	double stored = 0, raw = 0, used, saved;
	uint64_t b;

	*p = (comet_batch_plan){ .verdict = COMET_BATCH_NONE };
	for (uint32_t l = 0; l < st->n_layers; l++) {
		const comet_layer *cl = &st->layer[l];

		if (cl->mem_n == 0)
			continue;
		stored += cl->bytes_sum / cl->mem_n;
		raw += cl->raw_sum / cl->mem_n;
	}
	if (st->mem_total > 0) {
		p->limit = st->mem_total;
		used = st->mem_used;
	} else if (br->memory_bytes > 0) {
		p->limit = (double)br->memory_bytes;
		used = st->host_used;
		p->host = true;
	} else {
		p->verdict = COMET_BATCH_NO_LIMIT;
		return;
	}
	if (st->mem_batch == 0 || !(stored > 0)) {
		p->verdict = COMET_BATCH_NO_BYTES;
		return;
	}
	if (!(used > 0)) {
		p->verdict = COMET_BATCH_NO_MEMORY;
		return;
	}
	p->ratio = raw / stored;
	p->conv = stored / st->mem_batch;
	/* saved_bytes never reported (st->saved 0): saved is the stored
	 * conv inputs, and per_sample is conv. */
	saved = st->saved > stored ? st->saved : stored;
	p->all_saved = st->saved > 0;
	p->per_sample = saved / st->mem_batch;
	p->fixed = used > saved ? used - saved : 0;
	p->allowed = (1 - br->reserve) * p->limit;

	/* B0 and every power of two above it up to max_batch; fitting is
	 * monotone in B, so the first that does not fit ends the search. */
	if (comet_fits(p, st->b0))
		p->batch = st->b0;
	for (b = 2; b <= (uint64_t)br->max_batch; b *= 2) {
		if (b <= st->b0)
			continue;
		if (!comet_fits(p, (double)b))
			break;
		p->batch = (uint32_t)b;
	}
	if (p->batch > 0) {
		p->verdict = COMET_BATCH_FITS;
	} else {
		/* Memory forces a batch below B0: the largest power of two
		 * that fits. */
		for (b = 1; b < st->b0 && comet_fits(p, (double)b); b *= 2)
			p->batch = (uint32_t)b;
		p->verdict = p->batch > 0 ? COMET_BATCH_FORCED
					  : COMET_BATCH_NO_FIT;
	}
	if (p->batch > 0)
		p->predicted = p->fixed + p->batch * p->per_sample;
}

static void
comet_batch_explain(pol_text *t, const comet_batch_plan *p, uint32_t old,
    double lr_old, double lr_new, const char *lr_mode)
{
	const char *where = p->host ? "memory_bytes" : "device";

	switch (p->verdict) {
	case COMET_BATCH_NONE:
		return;
	case COMET_BATCH_NO_LIMIT:
		pol_text_add(t,
		    "; batch kept: no device memory total reported and "
		    "memory_bytes 0");
		return;
	case COMET_BATCH_NO_BYTES:
		pol_text_add(t, "; batch kept: no activation bytes measured");
		return;
	case COMET_BATCH_NO_MEMORY:
		pol_text_add(t, "; batch kept: no %s memory use reported",
		    p->host ? "host" : "device");
		return;
	case COMET_BATCH_NO_FIT:
		pol_text_add(t,
		    "; batch kept: none fits (%.3g GB fixed, %.3g GB/sample, "
		    "%.3g GB allowed of %.3g GB %s)",
		    p->fixed / COMET_GB, p->per_sample / COMET_GB,
		    p->allowed / COMET_GB, p->limit / COMET_GB, where);
		return;
	case COMET_BATCH_FITS:
	case COMET_BATCH_FORCED:
		break;
	}
	if (p->batch == old)
		pol_text_add(t, "; batch %u kept", p->batch);
	else
		pol_text_add(t, "; batch %u -> %u%s", old, p->batch,
		    p->verdict == COMET_BATCH_FORCED ? " (memory forces it "
						       "below the initial)"
						     : "");
	pol_text_add(t,
	    ": predicted %.3g GB of %.3g GB allowed (%.3g GB %s), %.3g GB "
	    "fixed + %.3g MB/sample saved (%.3g MB conv inputs at ratio "
	    "%.3g%s)",
	    p->predicted / COMET_GB, p->allowed / COMET_GB, p->limit / COMET_GB,
	    where, p->fixed / COMET_GB, p->per_sample / 1e6, p->conv / 1e6,
	    p->ratio, p->all_saved ? "" : "; nothing else reported");
	if (lr_new != lr_old)
		pol_text_add(t, "; LR scale %g -> %g (%s)", lr_old, lr_new,
		    lr_mode);
}

/* ---- one update ---------------------------------------------------------- */

static void
comet_layer_explain(pol_text *t, const bellows_window_layer *wl,
    const comet_layer *cl, bool first)
{
	static const char *const note[] = {
		[COMET_FREE] = "",
		[COMET_AT_MIN] = ": eb_min",
		[COMET_AT_MAX] = ": eb_max",
		[COMET_ZERO] = ": eb_max",
		[COMET_UNUSABLE] = ": not usable, eb_min",
	};

	pol_text_add(t, "%s%s eb %.3g (M %.3g, Lbar %.3g, N %.0f, R %.3g%s)",
	    first ? "; " : ", ", wl->name, cl->eb, cl->m, cl->lbar, cl->n_used,
	    cl->r, note[cl->clamp]);
}

/* Each eligible layer's bound from its period's means at batch n = the
 * window's: fresh when the period has statistics (counted in *ret_fresh),
 * kept as it was otherwise (*ret_kept). *ret_change is the largest ratio
 * between a fresh bound and the one of the last update, both at the
 * batch of the last update; returns whether any layer had one to compare
 * with. */
static bool
comet_bounds(comet_state *st, const comet_rule *rule, const bellows_window *w,
    uint32_t *ret_fresh, uint32_t *ret_kept, double *ret_change)
{
	double n = (double)w->batch_size, change = 0;
	uint32_t fresh = 0, kept = 0;
	bool compared = false;

	for (uint32_t l = 0; l < st->n_layers; l++) {
		comet_layer *cl = &st->layer[l];

		cl->fresh = false;
		if (!comet_eligible(rule, &w->layers[l]))
			continue;
		if (cl->n == 0) {
			kept++;
			continue;
		}
		cl->fresh = true;
		fresh++;
		cl->m = cl->m_sum / cl->n;
		cl->lbar = cl->lbar_sum / cl->n;
		cl->r = cl->r_sum / cl->n;
		cl->n_used = n;
		cl->eb = comet_bound(rule, cl->m, cl->lbar, cl->r, n,
		    &cl->clamp);
		if (!isnan(cl->eb_stat)) {
			comet_clamp how;
			double then = comet_bound(rule, cl->m, cl->lbar, cl->r,
			    cl->n_stat, &how);
			double q = then > cl->eb_stat ? then / cl->eb_stat
						      : cl->eb_stat / then;

			compared = true;
			if (q > change)
				change = q;
		}
		cl->eb_stat = cl->eb;
		cl->n_stat = n;
	}
	*ret_fresh = fresh;
	*ret_kept = kept;
	*ret_change = change;
	return compared;
}

/* W: halved (not below min_interval_steps) on a change above
 * change_factor, restored to its default after settle_updates calm
 * updates; unchanged when nothing was compared. */
static void
comet_interval(comet_state *st, const comet_rule *rule, bool compared,
    double change)
{
	if (compared && change > rule->change_factor) {
		st->calm = 0;
		st->w_steps = st->w_steps / 2;
		if (st->w_steps < (uint64_t)rule->min_interval_steps)
			st->w_steps = (uint64_t)rule->min_interval_steps;
	} else if (compared) {
		st->calm++;
		if (st->calm >= (uint64_t)rule->settle_updates)
			st->w_steps = st->w_default;
	}
}

/* The batch, from the second update on: the first W ran at the trainer's
 * batch, and the ratio needs a bound in force. *plan says what the rule
 * found; a batch that fits (or is forced) and differs from old_batch goes
 * into *out with its LR scale, and the fresh bounds are re-derived for
 * it. */
static void
comet_batch(comet_state *st, const comet_rule *rule, const comet_batch_rule *br,
    comet_lr_mode mode, uint32_t old_batch, comet_batch_plan *plan,
    bellows_proposal *out)
{
	if (br == NULL || st->updates < 1 || st->b0 == 0)
		return;
	comet_batch_plan_make(st, br, plan);
	if (!((plan->verdict == COMET_BATCH_FITS ||
		  plan->verdict == COMET_BATCH_FORCED) &&
		plan->batch != old_batch))
		return;
	out->batch_size = plan->batch;
	out->lr_scale = comet_lr_scale(mode, plan->batch, st->b0);
	/* Re-derived for the batch the next period runs. */
	for (uint32_t l = 0; l < st->n_layers; l++) {
		comet_layer *cl = &st->layer[l];

		if (!cl->fresh)
			continue;
		cl->n_used = plan->batch;
		cl->eb = comet_bound(rule, cl->m, cl->lbar, cl->r, plan->batch,
		    &cl->clamp);
	}
}

/* The reason's head: which update this is, over which steps, and how W
 * moved from w_old for the largest change. */
static void
comet_interval_explain(pol_text *t, const comet_state *st,
    const comet_rule *rule, const bellows_window *w, uint64_t w_old,
    bool compared, double change)
{
	pol_text_add(t, "update %llu after step %llu (%u window%s, %llu steps)",
	    (unsigned long long)st->updates + 1,
	    (unsigned long long)w->last_step, st->period_windows,
	    st->period_windows == 1 ? "" : "s",
	    (unsigned long long)(w->last_step + 1 - st->period_start));
	if (!compared)
		pol_text_add(t, ": W %llu", (unsigned long long)w_old);
	else if (change > rule->change_factor && st->w_steps == w_old)
		pol_text_add(t, ": max change %.3gx > %g, W %llu (the minimum)",
		    change, rule->change_factor, (unsigned long long)w_old);
	else if (change > rule->change_factor)
		pol_text_add(t, ": max change %.3gx > %g, W %llu -> %llu",
		    change, rule->change_factor, (unsigned long long)w_old,
		    (unsigned long long)st->w_steps);
	else if (st->w_steps != w_old)
		pol_text_add(t,
		    ": max change %.3gx, settled (%llu updates within %gx), W "
		    "%llu -> %llu",
		    change, (unsigned long long)st->calm, rule->change_factor,
		    (unsigned long long)w_old, (unsigned long long)st->w_steps);
	else
		pol_text_add(t, ": max change %.3gx, W %llu", change,
		    (unsigned long long)st->w_steps);
}

/* The reason's tail: layers kept without statistics, the range of the
 * fresh bounds (first: a long layer list is cut, the range is not), then
 * each fresh layer's bound. */
static void
comet_layers_explain(pol_text *t, const comet_state *st,
    const bellows_window *w, uint32_t fresh, uint32_t kept)
{
	double lo = INFINITY, hi = 0;
	bool first = true;

	if (kept > 0)
		pol_text_add(t, "; %u layer%s kept without statistics", kept,
		    kept == 1 ? "" : "s");
	for (uint32_t l = 0; l < st->n_layers; l++) {
		if (!st->layer[l].fresh)
			continue;
		lo = fmin(lo, st->layer[l].eb);
		hi = fmax(hi, st->layer[l].eb);
	}
	if (fresh > 1)
		pol_text_add(t, "; %u bounds in [%.3g, %.3g]", fresh, lo, hi);
	for (uint32_t l = 0; l < st->n_layers; l++) {
		if (!st->layer[l].fresh)
			continue;
		comet_layer_explain(t, &w->layers[l], &st->layer[l], first);
		first = false;
	}
}

/* A new period starts after window w: its sums are emptied. */
static void
comet_period_reset(comet_state *st, const bellows_window *w)
{
	st->updates++;
	st->period_start = w->last_step + 1;
	st->period_windows = 0;
	for (uint32_t l = 0; l < st->n_layers; l++) {
		comet_layer *cl = &st->layer[l];

		cl->m_sum = cl->lbar_sum = cl->r_sum = 0;
		cl->n = 0;
		cl->bytes_sum = cl->raw_sum = 0;
		cl->mem_n = 0;
	}
	st->mem_used = st->mem_total = st->host_used = st->saved = 0;
}

/* One update at the end of a period: the bounds, W, the batch (br NULL:
 * none), the reason in out->reason, then a new period. Returns 0. */
static int
comet_update(comet_state *st, const comet_rule *rule,
    const comet_batch_rule *br, comet_lr_mode mode, const bellows_window *w,
    double lr_old, bellows_proposal *out)
{
	uint64_t w_old = st->w_steps;
	comet_batch_plan plan = { .verdict = COMET_BATCH_NONE };
	uint32_t old_batch = out->batch_size > 0 ? out->batch_size
						 : w->batch_size;
	uint32_t fresh, kept;
	double change;
	bool compared;
	pol_text t;

	compared = comet_bounds(st, rule, w, &fresh, &kept, &change);
	comet_interval(st, rule, compared, change);
	comet_batch(st, rule, br, mode, old_batch, &plan, out);
	pol_text_init(&t, out->reason, sizeof(out->reason));
	comet_interval_explain(&t, st, rule, w, w_old, compared, change);
	if (br != NULL)
		comet_batch_explain(&t, &plan, old_batch, lr_old, out->lr_scale,
		    comet_lr_modes[mode]);
	comet_layers_explain(&t, st, w, fresh, kept);
	comet_period_reset(st, w);
	return 0;
}

/* Both modes' on_window; br is NULL for `comet`. */
static int
comet_window(comet_state *st, const comet_rule *rule,
    const comet_batch_rule *br, comet_lr_mode mode, const bellows_window *w,
    bellows_proposal *out)
{
	double lr_old = out->lr_scale;
	bool due, changed = false;
	int r = 0;

	if (w->n_layers != st->n_layers || out->n_layers != st->n_layers)
		return BELLOWS_EMISMATCH;
	if (!st->started || w->first_step < st->period_start) {
		/* The first window, or the steps went back (a trainer
		 * restarted from a checkpoint): the period starts here. */
		st->started = true;
		st->period_start = w->first_step;
	}
	if (br != NULL && st->b0 == 0 && w->batch_size > 0)
		st->b0 = w->batch_size;
	if (br != NULL && st->lr_due) {
		st->lr_due = false;
		out->lr_scale = comet_lr_scale(mode, out->batch_size, st->b0);
	}
	comet_accumulate(st, rule, w, br != NULL);
	st->period_windows++;

	due = comet_measured(st) &&
	    (st->updates == 0 ||
		w->last_step + 1 >= st->period_start + st->w_steps);
	if (due)
		r = comet_update(st, rule, br, mode, w, lr_old, out);
	if (r != 0)
		return r;

	for (uint32_t l = 0; l < st->n_layers; l++) {
		double eb = comet_eligible(rule, &w->layers[l])
		    ? st->layer[l].eb
		    : 0;

		changed = changed || out->error_bound[l] != eb;
		out->error_bound[l] = eb;
	}
	if (!due && (changed || out->lr_scale != lr_old)) {
		/* A reload or a new selection moved a bound or the LR. */
		pol_text t;
		bool first = true;

		pol_text_init(&t, out->reason, sizeof(out->reason));
		if (out->lr_scale != lr_old)
			pol_text_add(&t, "LR scale %g -> %g (%s)%s", lr_old,
			    out->lr_scale, comet_lr_modes[mode],
			    changed ? "; " : "");
		if (changed)
			pol_text_add(&t, "bounds from the configuration:");
		for (uint32_t l = 0; changed && l < st->n_layers; l++) {
			if (!comet_eligible(rule, &w->layers[l]))
				continue;
			pol_text_add(&t, "%s %s eb %.3g", first ? "" : ",",
			    w->layers[l].name, st->layer[l].eb);
			first = false;
		}
	}
	pol_metric_add(out, "window_steps", -1, (double)st->w_steps);
	for (uint32_t l = 0; l < st->n_layers; l++) {
		if (comet_eligible(rule, &w->layers[l]))
			pol_metric_add(out, "eb", (int32_t)l,
			    out->error_bound[l]);
	}
	return 0;
}

/* A reload keeps the statistics and the period; W follows a new default
 * (or stays halved within the new limits), bounds move into the new range
 * and the LR scale follows a new lr_scaling at the next window. */
static void
comet_reload(comet_state *st, const comet_rule *rule)
{
	uint64_t def = (uint64_t)rule->interval_steps;
	uint64_t min = (uint64_t)rule->min_interval_steps;

	if (st->w_steps == st->w_default || st->w_steps > def)
		st->w_steps = def;
	if (st->w_steps < min)
		st->w_steps = min;
	st->w_default = def;
	for (uint32_t l = 0; l < st->n_layers; l++) {
		comet_layer *cl = &st->layer[l];

		if (isnan(cl->eb_stat))
			cl->eb = rule->eb_initial;
		else if (cl->eb < rule->eb_min)
			cl->eb = rule->eb_min;
		else if (cl->eb > rule->eb_max)
			cl->eb = rule->eb_max;
	}
	st->lr_due = true;
}

/* ==== comet: error bounds only ========================================= */

typedef struct comet_config {
	comet_rule rule; /* the bound and W */
} comet_config;

static const bellows_param comet_params[] = {
	COMET_RULE_PARAMS(comet_config),
	{ .name = NULL },
};

static int
comet_check(const void *config, char *err, size_t errlen)
{
	const comet_config *cfg = config;

	return comet_rule_check(&cfg->rule, err, errlen);
}

static void
comet_fini(void *state, const void *config)
{
	(void)config;
	comet_state_fini(state);
}

static int
comet_init(void *state, const void *config, const bellows_job_info *job,
    bellows_proposal *initial)
{
	const comet_config *cfg = config;
	int r;

	if ((r = comet_rule_check(&cfg->rule, NULL, 0)) != 0)
		return r;
	return comet_state_init(state, &cfg->rule, job, initial);
}

static int
comet_on_window(void *state, const void *config, const bellows_window *w,
    bellows_proposal *out)
{
	const comet_config *cfg = config;
	int r;

	if ((r = comet_rule_check(&cfg->rule, NULL, 0)) != 0)
		return r;
	return comet_window(state, &cfg->rule, NULL, COMET_LR_NONE, w, out);
}

static int
comet_on_event(void *state, const void *config, const bellows_event *ev)
{
	const comet_config *cfg = config;
	int r;

	if (ev->type != BELLOWS_EVENT_RELOAD)
		return 0;
	if ((r = comet_rule_check(&cfg->rule, NULL, 0)) != 0)
		return r;
	comet_reload(state, &cfg->rule);
	return 0;
}

const bellows_policy_ops pol_comet_ops = {
	.abi_version = BELLOWS_POLICY_ABI,
	.name = "comet",
	.stats_read = BELLOWS_STAT_READ(momentum_abs_mean) |
	    BELLOWS_STAT_READ(act_steps) | BELLOWS_STAT_READ(act_lbar) |
	    BELLOWS_STAT_READ(act_nonzero) | BELLOWS_STAT_READ(act_bytes) |
	    BELLOWS_STAT_READ(act_raw_bytes) | BELLOWS_STATS_DECLARED,
	.summary = "per-layer error bounds for activation compression from "
		   "momentum, loss gradient and density (COMET)",
	.knobs = BELLOWS_KNOB_ERROR_BOUND,
	.config_size = sizeof(comet_config),
	.state_size = sizeof(comet_state),
	.params = comet_params,
	.init = comet_init,
	.on_window = comet_on_window,
	.fini = comet_fini,
	.on_event = comet_on_event,
	.check = comet_check,
};

/* ==== comet_batch: error bounds, batch size and LR scale =============== */

typedef struct comet_batch_config {
	comet_rule rule;        /* the bound and W */
	comet_batch_rule batch; /* the batch and the LR */
} comet_batch_config;

static const bellows_param comet_batch_params[] = {
	COMET_RULE_PARAMS(comet_batch_config),
	{ .name = "max_batch",
	    .type = BELLOWS_PARAM_INT,
	    .offset = offsetof(comet_batch_config, batch.max_batch),
	    .min = 1,
	    .max = COMET_BATCH_MAX,
	    .def = 4096,
	    .help = "largest per-rank batch proposed" },
	{ .name = "reserve",
	    .type = BELLOWS_PARAM_DOUBLE,
	    .offset = offsetof(comet_batch_config, batch.reserve),
	    .min = 0,
	    .max = 0.99,
	    .def = 0.05,
	    .help = "fraction of the memory kept free when fitting a batch" },
	{ .name = "memory_bytes",
	    .type = BELLOWS_PARAM_INT,
	    .offset = offsetof(comet_batch_config, batch.memory_bytes),
	    .min = 0,
	    .max = 1e15,
	    .def = 0,
	    .help = "memory limit when no device total is reported (host "
		    "memory), 0 = keep the batch" },
	{ .name = "lr_scaling",
	    .type = BELLOWS_PARAM_STRING,
	    .offset = offsetof(comet_batch_config, batch.lr_scaling),
	    .def_str = "none",
	    .choices = comet_lr_modes,
	    .help = "LR scale on a batch change, relative to the initial "
		    "batch: none, linear (B/B0) or sqrt" },
	{ .name = NULL },
};

static int
comet_batch_config_check(const comet_batch_config *cfg, comet_lr_mode *mode,
    char *err, size_t errlen)
{
	int r;

	if ((r = comet_rule_check(&cfg->rule, err, errlen)) != 0)
		return r;
	return comet_batch_rule_check(&cfg->batch, mode, err, errlen);
}

static int
comet_batch_check(const void *config, char *err, size_t errlen)
{
	comet_lr_mode mode;

	return comet_batch_config_check(config, &mode, err, errlen);
}

static int
comet_batch_init(void *state, const void *config, const bellows_job_info *job,
    bellows_proposal *initial)
{
	const comet_batch_config *cfg = config;
	comet_lr_mode mode;
	int r;

	if ((r = comet_batch_config_check(cfg, &mode, NULL, 0)) != 0)
		return r;
	if ((r = comet_state_init(state, &cfg->rule, job, initial)) != 0)
		return r;
	initial->batch_size = 0;
	initial->lr_scale = 1;
	return 0;
}

static int
comet_batch_on_window(void *state, const void *config, const bellows_window *w,
    bellows_proposal *out)
{
	const comet_batch_config *cfg = config;
	comet_lr_mode mode;
	int r;

	if ((r = comet_batch_config_check(cfg, &mode, NULL, 0)) != 0)
		return r;
	return comet_window(state, &cfg->rule, &cfg->batch, mode, w, out);
}

static int
comet_batch_on_event(void *state, const void *config, const bellows_event *ev)
{
	const comet_batch_config *cfg = config;
	comet_lr_mode mode;
	int r;

	if (ev->type != BELLOWS_EVENT_RELOAD)
		return 0;
	if ((r = comet_batch_config_check(cfg, &mode, NULL, 0)) != 0)
		return r;
	comet_reload(state, &cfg->rule);
	return 0;
}

const bellows_policy_ops pol_comet_batch_ops = {
	.abi_version = BELLOWS_POLICY_ABI,
	.name = "comet_batch",
	.stats_read = BELLOWS_STAT_READ(momentum_abs_mean) |
	    BELLOWS_STAT_READ(act_steps) | BELLOWS_STAT_READ(act_lbar) |
	    BELLOWS_STAT_READ(act_nonzero) | BELLOWS_STAT_READ(act_bytes) |
	    BELLOWS_STAT_READ(act_raw_bytes) | BELLOWS_STATS_DECLARED,
	.summary = "COMET's error bounds, and the largest power-of-two batch "
		   "the compressed activations fit into memory",
	.knobs = BELLOWS_KNOB_ERROR_BOUND | BELLOWS_KNOB_BATCH_SIZE |
	    BELLOWS_KNOB_LR_SCALE,
	.config_size = sizeof(comet_batch_config),
	.state_size = sizeof(comet_state),
	.params = comet_batch_params,
	.init = comet_batch_init,
	.on_window = comet_batch_on_window,
	.fini = comet_fini,
	.on_event = comet_batch_on_event,
	.check = comet_batch_check,
};
