/* resireduce - ResiReduce's residual plan, decided from what the ranks
 * measure: adjacent layers of the same shape share one weighted-average
 * error-feedback residual while their residual distributions agree, and
 * large layers that share with nobody keep only a row x column block of
 * theirs.
 *
 * Candidates. At init the selected layers are cut into runs of adjacent
 * selected layers (layer-table order; unselected ones such as biases in
 * between do not count) of identical shape, the paper's "adjacent
 * layers of the same type" (its code groups identical shapes only); a run
 * is cut into candidate groups of at most max_group layers. A selected
 * layer of 2 or more dimensions with at least reduce_min_numel elements
 * that is in no candidate group of two or more is a "specific layer":
 * the candidate for the 2-D reduction.
 *
 * Distance. Each rank reports per layer the L1 and L2 norms of the fresh
 * residual and the quantiles q50, q90, q99 of |r| / rms(r) (bellows/
 * stats.h, resid_*). Two layers' distance is the largest |ln ratio| of
 * their rms = L2 / sqrt(numel) and of each quantile (plus 0.05, so that a
 * quantile at zero is far but finite): 0 for identical
 * distributions, ln 2 when one's scale or tail is twice the other's. The
 * rms compares scales (sharing averages values, so two layers of very
 * different scale would compensate each other with the wrong magnitude);
 * the normalised quantiles compare shapes (the overlap of Fig. 4). A
 * group's distance is the largest over its pairs.
 *
 * Rules, evaluated every window once every candidate member has reported
 * residual statistics (resid_steps > 0):
 *   - join: a candidate group not sharing starts sharing when its distance
 *     is at most join_distance and its members are out of their cool-down;
 *   - split: a sharing group whose distance exceeds split_distance
 *     (> join_distance: hysteresis) splits; its members get their own
 *     residuals back (the actuator seeds them from the group's) and wait
 *     cooldown_windows windows before they may join again;
 *   - pause: an LR drop (this window's lr_next below its lr, or an
 *     LR_CHANGE event to a smaller LR) or a critical regime reported by
 *     another policy (the compression gate on, or a selected layer's level
 *     in force raised since the previous window, as Accordion does in its
 *     critical regimes) returns every layer to its own whole residual for
 *     pause_windows windows: right after a drop residual scales move
 *     layer by layer, and a critical regime is where the compression
 *     error matters most, so neither is the time to approximate it;
 *   - reduce: a specific layer keeps reduce_rows x reduce_cols of its
 *     residual (the reference code's 0.5 x 0.5) unless paused.
 * Windows without statistics change nothing. The reason names the groups
 * that changed, the reduced layers and the residual floats kept of the
 * per-layer total; metrics carry the same numbers and, per candidate
 * group (at its leader), its distance, size and whether it shares
 * (docs/policies/resireduce.md).
 */
#include "policies.h"
#include "policies/pol_text.h"

#include <bellows/error.h>

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RESI_GROUP_MAX 64 /* most layers one group may have */

/* Added to the |r|/rms quantiles before their ratio: a quantile at 0 (more
 * than half a residual exactly zero, e.g. dead ReLU units) then gives a
 * large but finite distance, ln(1 + q / 0.05). */
#define RESI_Q_FLOOR 0.05

typedef struct resi_config {
	double phi;               /* significance coefficient of the groups */
	int64_t max_group;        /* most layers in one group */
	double join_distance;     /* a group shares at or below this */
	double split_distance;    /* a sharing group splits above this */
	int64_t cooldown_windows; /* windows a split group waits */
	int64_t pause_windows;    /* windows of no sharing after a pause */
	bool reduce_2d;           /* reduce specific layers */
	double reduce_rows;       /* kept row fraction of a specific layer */
	double reduce_cols;       /* kept column fraction */
	int64_t reduce_min_numel; /* smallest specific layer reduced */
} resi_config;

static const bellows_param resi_params[] = {
	{ .name = "phi",
	    .type = BELLOWS_PARAM_DOUBLE,
	    .offset = offsetof(resi_config, phi),
	    .min = 0,
	    .max = 1,
	    .def = 0.5,
	    .help = "w_i = phi |r_i|_1 / n_i + (1 - phi) |r_i|_2 / sqrt(n_i)" },
	{ .name = "max_group",
	    .type = BELLOWS_PARAM_INT,
	    .offset = offsetof(resi_config, max_group),
	    .min = 2,
	    .max = RESI_GROUP_MAX,
	    .def = 4,
	    .help = "most adjacent layers sharing one residual" },
	{ .name = "join_distance",
	    .type = BELLOWS_PARAM_DOUBLE,
	    .offset = offsetof(resi_config, join_distance),
	    .min = 0,
	    .max = 100,
	    .def = 0.5,
	    .help = "largest |ln ratio| of rms and |r|/rms quantiles at which "
		    "a group starts sharing" },
	{ .name = "split_distance",
	    .type = BELLOWS_PARAM_DOUBLE,
	    .offset = offsetof(resi_config, split_distance),
	    .min = 0,
	    .max = 100,
	    .def = 1.0,
	    .help = "distance above which a sharing group splits (>= "
		    "join_distance)" },
	{ .name = "cooldown_windows",
	    .type = BELLOWS_PARAM_INT,
	    .offset = offsetof(resi_config, cooldown_windows),
	    .min = 0,
	    .max = 1000000,
	    .def = 2,
	    .help = "windows a split group waits before it may share again" },
	{ .name = "pause_windows",
	    .type = BELLOWS_PARAM_INT,
	    .offset = offsetof(resi_config, pause_windows),
	    .min = 0,
	    .max = 1000000,
	    .def = 2,
	    .help = "windows without sharing or reduction after an LR drop "
		    "or a critical regime" },
	{ .name = "reduce_2d",
	    .type = BELLOWS_PARAM_BOOL,
	    .offset = offsetof(resi_config, reduce_2d),
	    .def = 1,
	    .help = "keep only rows x columns of large ungrouped layers" },
	{ .name = "reduce_rows",
	    .type = BELLOWS_PARAM_DOUBLE,
	    .offset = offsetof(resi_config, reduce_rows),
	    .min = 0.01,
	    .max = 1,
	    .def = 0.5,
	    .help = "kept row fraction (2-D reduction)" },
	{ .name = "reduce_cols",
	    .type = BELLOWS_PARAM_DOUBLE,
	    .offset = offsetof(resi_config, reduce_cols),
	    .min = 0.01,
	    .max = 1,
	    .def = 0.5,
	    .help = "kept column fraction (2-D reduction)" },
	{ .name = "reduce_min_numel",
	    .type = BELLOWS_PARAM_INT,
	    .offset = offsetof(resi_config, reduce_min_numel),
	    .min = 1,
	    .max = 1e15,
	    .def = 65536,
	    .help = "smallest layer (elements) the 2-D reduction applies to" },
	{ 0 },
};

typedef struct resi_state {
	uint32_t n_layers;    /* layers of the job */
	uint64_t *numel;      /* per layer: elements */
	uint32_t *cand;       /* per layer: candidate group's first layer,
			       * UINT32_MAX: none */
	uint32_t *cand_n;     /* per first layer: members (0 elsewhere) */
	uint32_t *next;       /* per member: the group's next member,
			       * UINT32_MAX: the last (or no group) */
	bool *specific;       /* per layer: 2-D reduction candidate */
	bool *sharing;        /* per first layer: the group shares */
	uint64_t *cool_until; /* per first layer: may join from window */
	double *last_level;   /* per layer: level in force last window */
	bool have_level;      /* last_level is filled */
	uint64_t pause_until; /* no sharing before this window */
	bool pause_next;      /* an LR_CHANGE drop was announced */
	double drop_to;       /* LR a window's lr_next announced a drop to (its
			       * LR_CHANGE then pauses nothing more); 0: none */
	char **names;         /* per layer, copied at init */
} resi_state;

static int
resi_check(const void *config, char *err, size_t errlen)
{
	const resi_config *cfg = config;

	if (cfg->split_distance < cfg->join_distance) {
		snprintf(err, errlen,
		    "split_distance %g is below join_distance %g",
		    cfg->split_distance, cfg->join_distance);
		return BELLOWS_EINVAL;
	}
	return 0;
}

static bool
resi_same_shape(const bellows_window_layer *a, const bellows_window_layer *b)
{
	if (a->ndim != b->ndim || a->numel != b->numel)
		return false;
	for (uint32_t d = 0; d < a->ndim; d++)
		if (a->shape[d] != b->shape[d])
			return false;
	return true;
}

static void
resi_fini(void *state, const void *config)
{
	resi_state *st = state;

	(void)config;
	if (st->names != NULL)
		for (uint32_t i = 0; i < st->n_layers; i++)
			free(st->names[i]);
	free(st->names);
	free(st->numel);
	free(st->cand);
	free(st->cand_n);
	free(st->next);
	free(st->specific);
	free(st->sharing);
	free(st->cool_until);
	free(st->last_level);
	memset(st, 0, sizeof(*st));
}

/* Cuts the selected layers into candidate groups and marks the specific
 * layers (see the file's comment). Layers the selector leaves out (biases,
 * norms: 1-D tensors by default) do not break adjacency: a convolution's
 * bias sits between two weights in the layer table. */
static void
resi_candidates(resi_state *st, const resi_config *cfg,
    const bellows_window_layer *l)
{
	uint32_t n = st->n_layers;
	uint32_t run[RESI_GROUP_MAX];

	for (uint32_t i = 0; i < n; i++)
		st->cand[i] = st->next[i] = UINT32_MAX;
	for (uint32_t i = 0; i < n;) {
		uint32_t k = 0, next = i + 1;

		if (!l[i].selected || l[i].ndim < 2) {
			i++;
			continue;
		}
		run[k++] = i;
		for (uint32_t j = i + 1; j < n && k < (uint32_t)cfg->max_group;
		     j++) {
			if (!l[j].selected || l[j].ndim < 2)
				continue;
			if (!resi_same_shape(&l[i], &l[j]))
				break;
			run[k++] = j;
		}
		if (k >= 2) {
			for (uint32_t m = 0; m < k; m++)
				st->cand[run[m]] = i;
			for (uint32_t m = 0; m + 1 < k; m++)
				st->next[run[m]] = run[m + 1];
			st->cand_n[i] = k;
			next = run[k - 1] + 1;
		} else if (l[i].numel >= (uint64_t)cfg->reduce_min_numel) {
			st->specific[i] = true;
		}
		i = next;
	}
}

static int
resi_init(void *state, const void *config, const bellows_job_info *job,
    bellows_proposal *initial)
{
	resi_state *st = state;
	uint32_t n = job->n_layers;

	st->n_layers = n;
	st->numel = calloc(n ? n : 1, sizeof(*st->numel));
	st->cand = calloc(n ? n : 1, sizeof(*st->cand));
	st->cand_n = calloc(n ? n : 1, sizeof(*st->cand_n));
	st->next = calloc(n ? n : 1, sizeof(*st->next));
	st->specific = calloc(n ? n : 1, sizeof(*st->specific));
	st->sharing = calloc(n ? n : 1, sizeof(*st->sharing));
	st->cool_until = calloc(n ? n : 1, sizeof(*st->cool_until));
	st->last_level = calloc(n ? n : 1, sizeof(*st->last_level));
	st->names = calloc(n ? n : 1, sizeof(*st->names));
	if (st->numel == NULL || st->cand == NULL || st->cand_n == NULL ||
	    st->next == NULL || st->specific == NULL || st->sharing == NULL ||
	    st->cool_until == NULL || st->last_level == NULL ||
	    st->names == NULL)
		goto fail;
	for (uint32_t i = 0; i < n; i++) {
		st->numel[i] = job->layers[i].numel;
		st->names[i] = strdup(
		    job->layers[i].name != NULL ? job->layers[i].name : "");
		if (st->names[i] == NULL)
			goto fail;
	}
	resi_candidates(st, config, job->layers);
	/* The plan in force stays until statistics say otherwise: the
	 * initial proposal is the host's pre-filled one. */
	(void)initial;
	return 0;
fail:
	resi_fini(st, config);
	return BELLOWS_ENOMEM;
}

/* |ln(a / b)|: 0 for two zeroes, infinity for one. */
static double
resi_log_ratio(double a, double b)
{
	if (a <= 0.0 && b <= 0.0)
		return 0.0;
	if (a <= 0.0 || b <= 0.0)
		return INFINITY;
	return fabs(log(a / b));
}

/* The distance of two layers' residual distributions (file comment). */
static double
resi_distance(const bellows_window_layer *a, const bellows_window_layer *b)
{
	double rms_a = a->resid_l2 / sqrt((double)(a->numel ? a->numel : 1));
	double rms_b = b->resid_l2 / sqrt((double)(b->numel ? b->numel : 1));
	double d = resi_log_ratio(rms_a, rms_b);

	d = fmax(d,
	    resi_log_ratio(a->resid_q50 + RESI_Q_FLOOR,
		b->resid_q50 + RESI_Q_FLOOR));
	d = fmax(d,
	    resi_log_ratio(a->resid_q90 + RESI_Q_FLOOR,
		b->resid_q90 + RESI_Q_FLOOR));
	d = fmax(d,
	    resi_log_ratio(a->resid_q99 + RESI_Q_FLOOR,
		b->resid_q99 + RESI_Q_FLOOR));
	return d;
}

/* The largest pairwise distance of the candidate group led by g; NAN when
 * a member has no statistics. Members are followed through `next`, so a
 * window costs the groups' sizes squared, not the layers'. */
static double
resi_group_distance(const resi_state *st, const bellows_window *w, uint32_t g)
{
	double d = 0.0;

	for (uint32_t i = g; i != UINT32_MAX; i = st->next[i]) {
		if (w->layers[i].resid_steps == 0)
			return NAN;
		for (uint32_t j = st->next[i]; j != UINT32_MAX; j = st->next[j])
			d = fmax(d,
			    resi_distance(&w->layers[i], &w->layers[j]));
	}
	return d;
}

/* The last member of the candidate group led by g. */
static uint32_t
resi_last(const resi_state *st, uint32_t g)
{
	uint32_t last = g;

	while (st->next[last] != UINT32_MAX)
		last = st->next[last];
	return last;
}

/* A critical regime reported by another policy: the gate on, or a
 * selected layer's level in force raised since the last window. */
static bool
resi_critical(resi_state *st, const bellows_window *w)
{
	bool raised = false;

	for (uint32_t i = 0; i < st->n_layers && i < w->n_layers; i++) {
		if (st->have_level && w->layers[i].selected &&
		    w->layers[i].level > st->last_level[i])
			raised = true;
		st->last_level[i] = w->layers[i].level;
	}
	st->have_level = true;
	return raised || w->compression_off;
}

static void
resi_metric(bellows_proposal *out, const char *name, int32_t layer,
    double value)
{
	bellows_metric *m;

	if (out->n_metrics >= BELLOWS_METRICS_MAX)
		return;
	m = &out->metrics[out->n_metrics++];
	snprintf(m->name, sizeof(m->name), "%s", name);
	m->layer = layer;
	m->value = value;
}

/* Floats the plan in `out` keeps, against one whole residual per layer,
 * over the layers with residual statistics (the others have none). */
static void
resi_floats(const resi_state *st, const bellows_window *w,
    const bellows_proposal *out, double *ret_kept, double *ret_full)
{
	double kept = 0.0, full = 0.0;

	for (uint32_t i = 0; i < st->n_layers; i++) {
		const bellows_window_layer *l = &w->layers[i];
		double n = (double)st->numel[i];

		if (l->resid_steps == 0)
			continue;
		full += n;
		if (out->resid_group[i] != i)
			continue;
		if (out->resid_rows[i] < 1.0 || out->resid_cols[i] < 1.0) {
			uint32_t rows = l->ndim > 0 ? l->shape[0] : 1;
			double cols = rows > 0 ? n / rows : 0.0;
			double kr = ceil(out->resid_rows[i] * rows);
			double kc = ceil(out->resid_cols[i] * cols);

			kept += kr * kc + kr + kc; /* values and indices */
		} else {
			kept += n;
		}
	}
	*ret_kept = kept;
	*ret_full = full;
}

static int
resi_on_window(void *state, const void *config, const bellows_window *w,
    bellows_proposal *out)
{
	resi_state *st = state;
	const resi_config *cfg = config;
	bool critical, lr_drop, paused, changed = false;
	double kept, full;
	pol_text t;
	char joined[BELLOWS_REASON_MAX] = "", split[BELLOWS_REASON_MAX] = "";
	pol_text tj, ts;

	if (w->n_layers != st->n_layers)
		return BELLOWS_EINVAL;
	critical = resi_critical(st, w);
	lr_drop = st->pause_next;
	if (isfinite(w->lr) && isfinite(w->lr_next) && w->lr_next > 0.0 &&
	    w->lr_next < w->lr) {
		lr_drop = true;
		st->drop_to = w->lr_next;
	}
	st->pause_next = false;
	if (lr_drop || critical)
		st->pause_until = w->window + 1 + (uint64_t)cfg->pause_windows;
	paused = w->window + 1 < st->pause_until;
	pol_text_init(&tj, joined, sizeof(joined));
	pol_text_init(&ts, split, sizeof(split));

	for (uint32_t g = 0; g < st->n_layers; g++) {
		double d;
		bool share;

		if (st->cand_n[g] < 2)
			continue;
		d = resi_group_distance(st, w, g);
		if (!isnan(d))
			resi_metric(out, "resid_distance", (int32_t)g, d);
		share = st->sharing[g];
		if (paused)
			share = false;
		else if (isnan(d))
			; /* no statistics: the group stays as it is */
		else if (share && d > cfg->split_distance)
			share = false;
		else if (!share && d <= cfg->join_distance &&
		    w->window >= st->cool_until[g])
			share = true;
		/* The group's size and whether it shares from the next
		 * window on: a line per group in bellows top. */
		resi_metric(out, "resid_group_size", (int32_t)g,
		    (double)st->cand_n[g]);
		resi_metric(out, "resid_shared", (int32_t)g, share ? 1.0 : 0.0);
		if (share == st->sharing[g])
			continue;
		changed = true;
		st->sharing[g] = share;
		if (!share)
			st->cool_until[g] = w->window + 1 +
			    (uint64_t)cfg->cooldown_windows;
		if (share)
			pol_text_add(&tj, "%s%s..%s (d=%.2f)",
			    tj.used > 0 ? ", " : "", st->names[g],
			    st->names[resi_last(st, g)], d);
		else
			pol_text_add(&ts, "%s%s..%s%s", ts.used > 0 ? ", " : "",
			    st->names[g], st->names[resi_last(st, g)],
			    paused ? "" : " (distance rose)");
	}
	for (uint32_t i = 0; i < st->n_layers; i++) {
		uint32_t g = st->cand[i];
		uint32_t want = g != UINT32_MAX && st->sharing[g] ? g : i;
		bool reduce = cfg->reduce_2d && st->specific[i] && !paused &&
		    w->layers[i].resid_steps > 0;
		double rows = reduce ? cfg->reduce_rows : 1.0;
		double cols = reduce ? cfg->reduce_cols : 1.0;

		/* A layer that is no candidate keeps what the plan in force
		 * says about its group (some other owner cannot exist). */
		if (g == UINT32_MAX && !st->specific[i])
			continue;
		if (out->resid_group[i] != want || out->resid_rows[i] != rows ||
		    out->resid_cols[i] != cols)
			changed = true;
		out->resid_group[i] = want;
		out->resid_rows[i] = rows;
		out->resid_cols[i] = cols;
		if (want == i && out->resid_phi[i] != cfg->phi) {
			out->resid_phi[i] = cfg->phi;
			changed = changed || (g != UINT32_MAX);
		}
	}
	resi_floats(st, w, out, &kept, &full);
	resi_metric(out, "resid_floats_kept", -1, kept);
	resi_metric(out, "resid_floats_full", -1, full);
	if (!changed)
		return 0;
	pol_text_init(&t, out->reason, sizeof(out->reason));
	if (lr_drop || critical)
		pol_text_add(&t, "paused %lld windows (%s)",
		    (long long)cfg->pause_windows,
		    lr_drop ? "LR drop" : "critical regime");
	if (joined[0] != '\0') {
		pol_text_sep(&t);
		pol_text_add(&t, "share %s", joined);
	}
	if (split[0] != '\0') {
		pol_text_sep(&t);
		pol_text_add(&t, "split %s", split);
	}
	for (uint32_t i = 0; i < st->n_layers; i++)
		if (out->resid_rows[i] < 1.0 || out->resid_cols[i] < 1.0) {
			pol_text_sep(&t);
			pol_text_add(&t, "2-D %s %gx%g", st->names[i],
			    out->resid_rows[i], out->resid_cols[i]);
		}
	pol_text_sep(&t);
	pol_text_add(&t, "residual floats %.0f of %.0f (%.0f%% saved)", kept,
	    full, full > 0.0 ? 100.0 * (1.0 - kept / full) : 0.0);
	return 0;
}

static int
resi_on_event(void *state, const void *config, const bellows_event *ev)
{
	resi_state *st = state;

	(void)config;
	if (ev->type == BELLOWS_EVENT_LR_CHANGE && isfinite(ev->lr_old) &&
	    isfinite(ev->lr_new) && ev->lr_new < ev->lr_old &&
	    ev->lr_new != st->drop_to) /* else announced and paused */
		st->pause_next = true;
	if (ev->type == BELLOWS_EVENT_RELOAD)
		return BELLOWS_EINVAL; /* candidates depend on the config:
					* start again from init */
	return 0;
}

const bellows_policy_ops pol_resireduce_ops = {
	.abi_version = BELLOWS_POLICY_ABI,
	.name = "resireduce",
	.stats_read = BELLOWS_STAT_READ(resid_steps) |
	    BELLOWS_STAT_READ(resid_l2) | BELLOWS_STAT_READ(resid_q50) |
	    BELLOWS_STAT_READ(resid_q90) | BELLOWS_STAT_READ(resid_q99) |
	    BELLOWS_STATS_DECLARED,
	.summary = "residual plan: adjacent same-shape layers share a "
		   "weighted-average residual while their residuals agree; "
		   "2-D reduction of large ungrouped layers (ResiReduce)",
	.knobs = BELLOWS_KNOB_RESIDUAL_PLAN,
	.config_size = sizeof(resi_config),
	.state_size = sizeof(resi_state),
	.params = resi_params,
	.init = resi_init,
	.on_window = resi_on_window,
	.fini = resi_fini,
	.on_event = resi_on_event,
	.check = resi_check,
};
