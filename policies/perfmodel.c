/* perfmodel - the compression gate: does compression pay right now?
 *
 * Chapter 4 of Agarwal's thesis predicts the step time of synchronous SGD
 * from a handful of measured numbers. This policy fits the latency α and
 * bandwidth BW of the job's collectives by least squares to every raw
 * collective the ranks timed over the last `fit_windows` windows, measures
 * the backward compute time, the overlap slowdown γ (from steps whose
 * compute term dominates), and, while compression runs, its encode+decode
 * time and ratio, per set of levels seen in force; it then predicts the
 * step without compression and at every level measured, and turns
 * compression off (the COMPRESSION knob) when the compression in force is
 * predicted slower by more than `margin` for `hold_windows` windows in a
 * row, and back on the same way. Every window's reason and metrics carry the
 * fit, the predictions, the break-even bandwidth and the compression needed for
 * near-linear scaling. The maths is in perfmodel_fit.c; the formulas, the
 * thesis's text and the readings chosen here are in docs/policies/perfmodel.md.
 */
#include "perfmodel_fit.h"
#include "metric.h"
#include "policies.h"
#include "pol_text.h"

#include <bellows/error.h>

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* Windows the running fit may span: the ring lives in the state. */
#define PERFMODEL_FIT_MAX 256

#define PERFMODEL_GAMMA_MIN 1.0 /* γ is clamped to this range: overlap */
#define PERFMODEL_GAMMA_MAX                                                    \
	2.0 /* cannot speed backward up, and the thesis                        \
	     * measured 1.04-1.1; 2 leaves room for a                          \
	     * slower GPU's contention, not for a                              \
	     * misreading of the trainer */

/* A window measures γ only if its compute term is this much larger than
 * the overlapped collectives: nearer, noise may have the collectives
 * dominate, and then the step says nothing about γ. */
#define PERFMODEL_GAMMA_IDENT 1.05

/* Windows in the medians of γ and of the rest of the step. */
#define PERFMODEL_GAMMA_SAMPLES 16

/* Break-even search range, Gbit/s. */
#define PERFMODEL_BW_LO 1e-4
#define PERFMODEL_BW_HI 1e5

#define PERFMODEL_MIB 1048576.0

/* Level sets remembered with their measurements, and windows of each in
 * its medians: Accordion moves between two levels, a schedule a few. */
#define PERFMODEL_LEVELS        8
#define PERFMODEL_LEVEL_SAMPLES 8

/* The longest ring perfmodel_median is given. */
#define PERFMODEL_MEDIAN_MAX                                                   \
	(PERFMODEL_GAMMA_SAMPLES > PERFMODEL_LEVEL_SAMPLES                     \
		? PERFMODEL_GAMMA_SAMPLES                                      \
		: PERFMODEL_LEVEL_SAMPLES)

typedef struct perfmodel_config {
	int64_t bucket_bytes;    /* b; 0: one collective per layer */
	bool overlap;            /* collectives overlap the backward pass */
	bool compressed_overlap; /* with overlap: so do the compressed
				  * ones (an asynchronous compressing
				  * hook, bellows.torch's) */
	int64_t fit_windows;     /* windows of samples in the running fit */
	double gamma;            /* γ when it cannot be measured */
	double margin;           /* relative gap that moves the gate */
	int64_t hold_windows;    /* consecutive windows past the margin */
	int64_t raw_windows;     /* first windows sent raw, for the fit */
	int64_t probe_windows;   /* gate off: compression on for one window
				  * every this many, 0 = never */
} perfmodel_config;

static const bellows_param perfmodel_params[] = {
	{ .name = "bucket_bytes",
	    .type = BELLOWS_PARAM_INT,
	    .offset = offsetof(perfmodel_config, bucket_bytes),
	    .min = 0,
	    .max = 1099511627776.0,
	    .def = 26214400,
	    .help = "bytes per gradient bucket (DDP: 25 MiB); 0 = one "
		    "collective per layer (bellows.torch)" },
	{ .name = "overlap",
	    .type = BELLOWS_PARAM_BOOL,
	    .offset = offsetof(perfmodel_config, overlap),
	    .def = 1,
	    .help = "buckets are reduced while backward runs (DDP); false: "
		    "after it (a synchronous hook)" },
	{ .name = "compressed_overlap",
	    .type = BELLOWS_PARAM_BOOL,
	    .offset = offsetof(perfmodel_config, compressed_overlap),
	    .def = 1,
	    .help = "with overlap: compressed buckets are reduced while "
		    "backward runs too (bellows.torch); false: after it, as "
		    "the thesis models compression" },
	{ .name = "fit_windows",
	    .type = BELLOWS_PARAM_INT,
	    .offset = offsetof(perfmodel_config, fit_windows),
	    .min = 1,
	    .max = PERFMODEL_FIT_MAX,
	    .def = 8,
	    .help = "windows of collective timings the alpha/BW fit uses" },
	{ .name = "gamma",
	    .type = BELLOWS_PARAM_DOUBLE,
	    .offset = offsetof(perfmodel_config, gamma),
	    .min = PERFMODEL_GAMMA_MIN,
	    .max = PERFMODEL_GAMMA_MAX,
	    .def = 1.07,
	    .help = "backward slowdown under overlap until it is measured" },
	{ .name = "margin",
	    .type = BELLOWS_PARAM_DOUBLE,
	    .offset = offsetof(perfmodel_config, margin),
	    .min = 0,
	    .max = 10,
	    .def = 0.10,
	    .help = "relative gap between the predicted steps that moves the "
		    "gate (the model errs by up to 14%)" },
	{ .name = "hold_windows",
	    .type = BELLOWS_PARAM_INT,
	    .offset = offsetof(perfmodel_config, hold_windows),
	    .min = 1,
	    .max = 100000,
	    .def = 2,
	    .help = "consecutive windows past the margin before the gate "
		    "moves" },
	{ .name = "raw_windows",
	    .type = BELLOWS_PARAM_INT,
	    .offset = offsetof(perfmodel_config, raw_windows),
	    .min = 0,
	    .max = 1000000,
	    .def = 0,
	    .help = "first windows with the gate off, so that the fit sees "
		    "every tensor sent raw (0 = none)" },
	{ .name = "probe_windows",
	    .type = BELLOWS_PARAM_INT,
	    .offset = offsetof(perfmodel_config, probe_windows),
	    .min = 0,
	    .max = 1000000,
	    .def = 0,
	    .help = "gate off: turn compression on for one window every this "
		    "many to re-measure it, 0 = never" },
	{ .name = NULL },
};

/* One window's raw collectives, summed for the fit. */
typedef struct perfmodel_slot {
	uint64_t tag;              /* window + 1, 0 = empty */
	pol_perfmodel_stats stats; /* (bytes, ms) weighted by count */
} perfmodel_slot;

/* One set of levels seen in force, and what compression cost under it. */
typedef struct perfmodel_level {
	uint64_t sig;         /* levels in force (hash) */
	double level;         /* the level of every compressed layer; NAN:
			       * the layers' levels differ */
	uint64_t last_window; /* window of its latest measurement */
	uint32_t n;           /* samples held, up to LEVEL_SAMPLES */
	uint32_t next;        /* ring slot of the next sample */
	double codec[PERFMODEL_LEVEL_SAMPLES]; /* encode + decode, ms */
	double cr[PERFMODEL_LEVEL_SAMPLES];    /* floats raw / sent */
} perfmodel_level;

typedef struct perfmodel_state {
	perfmodel_slot ring[PERFMODEL_FIT_MAX]; /* by window % max */
	uint32_t n_layers;                      /* layers of the job */
	double model;           /* M: bytes of every layer's gradient */
	double first;           /* bytes of layer 0, reduced last */
	uint32_t world;         /* p the ring's samples were taken at */
	bool have_fit;          /* fit is usable */
	pol_perfmodel_line fit; /* the last accepted line */
	uint64_t fit_window;    /* window it was fitted at */
	uint32_t fit_used;      /* windows with samples it spans */
	uint32_t fit_samples;   /* samples it spans */
	double fit_xmax;        /* largest collective (bytes) it spans */
	bool have_gamma;        /* gamma_raw was measured */
	double gamma_raw;       /* γ as measured (median), before clamping */
	uint32_t gamma_n;       /* samples in gamma_s */
	uint32_t gamma_next;    /* ring slot of the next one */
	double gamma_s[PERFMODEL_GAMMA_SAMPLES]; /* γ of the last windows
						  * that identified it */
	uint32_t rest_n;                         /* samples in rest_s */
	uint32_t rest_next;                      /* ring slot of the next one */
	double rest_s[PERFMODEL_GAMMA_SAMPLES];  /* T_other of the last
						  * windows that gave it
						  * apart from γ */
	bool have_comp;                          /* t_comp is known */
	double t_comp;        /* T_comp: backward compute, ms */
	bool have_other;      /* t_other is known */
	double t_other;       /* the rest of the step, ms */
	bool have_u_raw;      /* u_raw was measured */
	double u_raw;         /* communication time of a raw step that
			       * the fitted collectives do not explain
			       * (the hook's own work, ranks arriving at
			       * different times), ms; no overlap only */
	bool have_u_comp;     /* u_comp was measured */
	double u_comp;        /* the same of a compressed step (also a
			       * compressor's extra collectives), ms */
	bool have_meas;       /* compression was measured */
	double codec_ms;      /* its encode + decode per step, ms */
	double cr;            /* its ratio, floats raw / sent */
	uint64_t meas_window; /* window it was measured in */
	uint64_t meas_sig;    /* levels in force then (hash) */
	bool off;             /* the gate this policy wants */
	uint32_t streak;      /* consecutive windows past the margin */
	uint64_t off_since;   /* window the gate went off */
	bool probed;          /* last_probe is set */
	uint64_t last_probe;  /* window that proposed the last probe */
	uint64_t probe_sig;   /* levels in force at the last probe */
	uint32_t n_levels;    /* entries of levels in use */
	perfmodel_level levels[PERFMODEL_LEVELS]; /* by first measurement;
						   * the least recently
						   * measured is replaced */
} perfmodel_state;

/* ---- reasons ------------------------------------------------------------ */

/* ---- configuration and job -------------------------------------------- */

/* The YAML parser checks the table's ranges; this repeats them for hosts
 * that hand over a config some other way. */
static int
perfmodel_config_check(const perfmodel_config *cfg)
{
	if (cfg->bucket_bytes < 0 || cfg->fit_windows < 1 ||
	    cfg->fit_windows > PERFMODEL_FIT_MAX ||
	    !(cfg->gamma >= PERFMODEL_GAMMA_MIN &&
		cfg->gamma <= PERFMODEL_GAMMA_MAX) ||
	    !(cfg->margin >= 0 && cfg->margin <= 10) || cfg->hold_windows < 1 ||
	    cfg->hold_windows > 100000 || cfg->raw_windows < 0 ||
	    cfg->raw_windows > 1000000 || cfg->probe_windows < 0 ||
	    cfg->probe_windows > 1000000)
		return BELLOWS_EINVAL;
	return 0;
}

/* k and b_last of the job under cfg: buckets, or one per layer, the
 * first layer's (whose gradient backward computes last) not overlapped. */
static void
perfmodel_shape(const perfmodel_state *st, const perfmodel_config *cfg,
    double *ret_k, double *ret_last)
{
	if (cfg->bucket_bytes > 0) {
		pol_perfmodel_buckets(st->model, (double)cfg->bucket_bytes,
		    ret_k, ret_last);
		return;
	}
	*ret_k = st->model > 0 ? (double)st->n_layers : 0;
	*ret_last = st->first;
}

/* The model of the job's collectives under cfg: the fitted line (latency
 * and slope 0 without one), M, k and b_last; the caller sets the rest. */
static pol_perfmodel_model
perfmodel_model(const perfmodel_state *st, const perfmodel_config *cfg)
{
	pol_perfmodel_model m = { .model = st->model };

	if (st->have_fit) {
		m.latency = st->fit.intercept;
		m.slope = st->fit.slope;
	}
	perfmodel_shape(st, cfg, &m.k, &m.last);
	return m;
}

/* γ as the model uses it: the measured median clamped to the parameter's
 * range, or the configured value until one is measured. */
static double
perfmodel_gamma(const perfmodel_state *st, const perfmodel_config *cfg)
{
	if (!st->have_gamma)
		return cfg->gamma;
	return fmin(fmax(st->gamma_raw, PERFMODEL_GAMMA_MIN),
	    PERFMODEL_GAMMA_MAX);
}

static void
perfmodel_describe_shape(char *buf, size_t len, const perfmodel_config *cfg,
    double k, double last)
{
	if (cfg->bucket_bytes > 0)
		snprintf(buf, len, "%.0f bucket%s of %.3g MiB, last %.3g MiB",
		    k, k == 1 ? "" : "s",
		    (double)cfg->bucket_bytes / PERFMODEL_MIB,
		    last / PERFMODEL_MIB);
	else
		snprintf(buf, len, "%.0f per-layer collectives, last %.3g MiB",
		    k, last / PERFMODEL_MIB);
}

static int
perfmodel_init(void *state, const void *config, const bellows_job_info *job,
    bellows_proposal *initial)
{
	perfmodel_state *st = state;
	const perfmodel_config *cfg = config;
	char shape[128];
	double k, last;
	int r;

	if ((r = perfmodel_config_check(cfg)) != 0)
		return r;
	st->n_layers = job->n_layers;
	for (uint32_t l = 0; l < job->n_layers; l++)
		st->model += (double)job->layers[l].numel * 4;
	st->first = job->n_layers > 0 ? (double)job->layers[0].numel * 4 : 0;
	perfmodel_shape(st, cfg, &k, &last);
	perfmodel_describe_shape(shape, sizeof(shape), cfg, k, last);
	initial->compression_off = cfg->raw_windows > 0;
	if (cfg->raw_windows > 0)
		snprintf(initial->reason, sizeof(initial->reason),
		    "compression off for the first %lld windows, to fit "
		    "alpha/BW to every tensor sent raw (M %.4g MiB, %s)",
		    (long long)cfg->raw_windows, st->model / PERFMODEL_MIB,
		    shape);
	else
		snprintf(initial->reason, sizeof(initial->reason),
		    "compression on until it is measured and alpha/BW are "
		    "fitted (M %.4g MiB, %s)",
		    st->model / PERFMODEL_MIB, shape);
	return 0;
}

/* ---- reading a window -------------------------------------------------- */

/* A hash of the levels in force, to notice that the compression measured
 * is not the compression in force any more. */
static uint64_t
perfmodel_levels_sig(const bellows_window *w, bool *ret_compressing)
{
	uint64_t h = 1469598103934665603ull;

	*ret_compressing = false;
	for (uint32_t l = 0; l < w->n_layers; l++) {
		double v = w->layers[l].level;
		uint64_t bits;

		if (!isfinite(v) || v < 0)
			v = 0;
		*ret_compressing = *ret_compressing || v > 0;
		v += 0.0; /* -0 and 0 hash alike */
		memcpy(&bits, &v, sizeof(bits));
		for (int i = 0; i < 8; i++) {
			h ^= (bits >> (8 * i)) & 0xff;
			h *= 1099511628211ull;
		}
	}
	return h;
}

/* The level every compressed layer of w has, NAN when they differ (0
 * when none is compressed). */
static double
perfmodel_levels_one(const bellows_window *w)
{
	double one = 0;

	for (uint32_t l = 0; l < w->n_layers; l++) {
		double v = w->layers[l].level;

		if (!isfinite(v) || v <= 0)
			continue;
		if (one > 0 && v != one)
			return NAN;
		one = v;
	}
	return one;
}

/* The median of the n <= PERFMODEL_MEDIAN_MAX values of x, 0 for none;
 * x is left as it is (a ring keeps its order). */
static double
perfmodel_median(const double *x, uint32_t n)
{
	double v[PERFMODEL_MEDIAN_MAX];

	if (n == 0)
		return 0;
	memcpy(v, x, n * sizeof(*v));
	for (uint32_t i = 1; i < n; i++) {
		double e = v[i];
		uint32_t j = i;

		for (; j > 0 && v[j - 1] > e; j--)
			v[j] = v[j - 1];
		v[j] = e;
	}
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Adds x to the ring of cap values at ring/n/next: n counts the values
 * held, up to cap, and next is the slot the following one takes. */
static void
perfmodel_ring_add(double *ring, uint32_t *n, uint32_t *next, uint32_t cap,
    double x)
{
	ring[*next] = x;
	*next = (*next + 1) % cap;
	if (*n < cap)
		(*n)++;
}

/* The entry of the levels `sig`, NULL if they were never measured. */
static const perfmodel_level *
perfmodel_level_find(const perfmodel_state *st, uint64_t sig)
{
	for (uint32_t i = 0; i < st->n_levels; i++) {
		if (st->levels[i].sig == sig)
			return &st->levels[i];
	}
	return NULL;
}

/* Adds one window's measurement of the levels `sig` to their entry,
 * taking a free one or the least recently measured. */
static void
perfmodel_level_add(perfmodel_state *st, uint64_t sig, double level,
    double codec, double cr, uint64_t window)
{
	perfmodel_level *e = (perfmodel_level *)perfmodel_level_find(st, sig);

	if (e == NULL) {
		if (st->n_levels < PERFMODEL_LEVELS) {
			e = &st->levels[st->n_levels++];
		} else {
			e = &st->levels[0];
			for (uint32_t i = 1; i < PERFMODEL_LEVELS; i++) {
				if (st->levels[i].last_window < e->last_window)
					e = &st->levels[i];
			}
		}
		memset(e, 0, sizeof(*e));
		e->sig = sig;
		e->level = level;
	}
	/* cr shares codec's counters: it takes the slot codec is about
	 * to take. */
	e->cr[e->next] = cr;
	perfmodel_ring_add(e->codec, &e->n, &e->next, PERFMODEL_LEVEL_SAMPLES,
	    codec);
	e->last_window = window;
}

/* The reason's name of an entry: its level, or "mixed#i". */
static void
perfmodel_level_name(const perfmodel_state *st, const perfmodel_level *e,
    char *buf, size_t len)
{
	if (isnan(e->level))
		snprintf(buf, len, "mixed#%u", (unsigned)(e - st->levels));
	else
		snprintf(buf, len, "%g", e->level);
}

/* The metric of an entry's prediction: its reason's name with "." as
 * "p", "-" as "m", "#" as "_" and "+" dropped (names are [a-z0-9_]), in
 * t_pred_level_<level>_ms or t_pred_mixed_<i>_ms. */
static void
perfmodel_level_metric(const perfmodel_state *st, const perfmodel_level *e,
    char *buf, size_t len)
{
	char name[32];
	size_t j = 0;

	perfmodel_level_name(st, e, name, sizeof(name));
	for (size_t i = 0; name[i] != '\0'; i++) {
		char c = name[i];

		if (c == '.')
			c = 'p';
		else if (c == '-')
			c = 'm';
		else if (c == '#')
			c = '_';
		else if (c == '+')
			continue;
		name[j++] = c;
	}
	name[j] = '\0';
	/* At most 15 bytes of the level, so that "_ms" fits the name's
	 * room. */
	snprintf(buf, len, "t_pred_%s%.15s_ms", isnan(e->level) ? "" : "level_",
	    name);
}

/* A reported time: finite and not negative (wire data). */
static bool
perfmodel_time_ok(double ms)
{
	return isfinite(ms) && ms >= 0;
}

/* Sums the window's raw collectives, bucket samples of every rank and
 * per-layer medians, into its ring slot. */
static void
perfmodel_collect(perfmodel_state *st, const bellows_window *w)
{
	perfmodel_slot *slot = &st->ring[w->window % PERFMODEL_FIT_MAX];

	memset(slot, 0, sizeof(*slot));
	slot->tag = w->window + 1;
	for (uint32_t i = 0; i < w->n_comm && w->comm != NULL; i++) {
		const bellows_comm_sample *c = &w->comm[i];

		if (c->compressed || c->count == 0 || !perfmodel_time_ok(c->ms))
			continue;
		pol_perfmodel_stats_add(&slot->stats, (double)c->bytes, c->ms,
		    (double)c->count);
	}
	for (uint32_t l = 0; l < w->n_layers; l++) {
		const bellows_window_layer *wl = &w->layers[l];

		if (wl->comm_raw_n == 0 || !perfmodel_time_ok(wl->comm_raw_ms))
			continue;
		pol_perfmodel_stats_add(&slot->stats, (double)wl->numel * 4,
		    wl->comm_raw_ms, (double)wl->comm_raw_n);
	}
}

/* Refits over the last fit_windows windows; a failed fit keeps the last
 * accepted one and says why. */
static void
perfmodel_refit(perfmodel_state *st, const perfmodel_config *cfg,
    const bellows_window *w, pol_text *t)
{
	pol_perfmodel_stats all = { 0 };
	pol_perfmodel_line line;
	pol_perfmodel_fit_status fs;
	uint32_t used = 0;

	for (uint64_t i = 0; i < (uint64_t)cfg->fit_windows && i <= w->window;
	     i++) {
		const perfmodel_slot
		    *s = &st->ring[(w->window - i) % PERFMODEL_FIT_MAX];

		if (s->tag != w->window - i + 1 || s->stats.w <= 0)
			continue;
		pol_perfmodel_stats_merge(&all, &s->stats);
		used++;
	}
	fs = pol_perfmodel_fit(&all, &line);
	/* While compressing, the raw collectives left may be the small
	 * tensors' alone: a line through those says little about the
	 * bandwidth the large ones see. A fit that spans less than a quarter
	 * of the largest size the accepted one did does not replace it. */
	if (fs == POL_PERFMODEL_FIT_OK && st->have_fit &&
	    all.xmax < st->fit_xmax / 4) {
		pol_text_add(t,
		    "; raw collectives only up to %.0f B (fit spans %.0f B): "
		    "fit of window %llu kept",
		    all.xmax, st->fit_xmax, (unsigned long long)st->fit_window);
		return;
	}
	if (fs == POL_PERFMODEL_FIT_OK) {
		st->have_fit = true;
		st->fit = line;
		st->fit_window = w->window;
		st->fit_used = used;
		st->fit_samples = all.n;
		st->fit_xmax = all.xmax;
		if (line.origin)
			pol_text_add(t,
			    "; intercept %.3g ms < 0: line refitted through 0",
			    line.raw_intercept);
		return;
	}
	switch (fs) {
	case POL_PERFMODEL_FIT_EMPTY:
		pol_text_add(t,
		    "; no raw collective timed in the last %lld windows",
		    (long long)cfg->fit_windows);
		break;
	case POL_PERFMODEL_FIT_ONE_SIZE:
		pol_text_add(t,
		    "; one collective size (%.0f bytes) in the last %lld "
		    "windows: need 2 to fit",
		    all.xmin, (long long)cfg->fit_windows);
		break;
	case POL_PERFMODEL_FIT_SLOPE:
		pol_text_add(t,
		    "; fit rejected: slope %.3g ms/MiB <= 0 (time does not "
		    "grow with size)",
		    line.slope * PERFMODEL_MIB);
		break;
	case POL_PERFMODEL_FIT_OK:
		break;
	}
	if (st->have_fit)
		pol_text_add(t, ", fit of window %llu kept",
		    (unsigned long long)st->fit_window);
}

/* A window's times as the policy reads them: 0 where not reported or
 * broken. */
typedef struct perfmodel_times {
	double step;  /* step_ms_median */
	double bwd;   /* backward_ms_median: T_comp */
	double comm;  /* comm_ms_median */
	double codec; /* codec_ms_median: T_ed */
} perfmodel_times;

/* The rest of the step, and γ, when compressed collectives overlap the
 * backward pass as raw ones do (overlap and compressed_overlap). No
 * window of a world above 1 then keeps its collectives apart from the
 * backward pass, so the rest is what the model of the window's own mode
 * (raw, or compressed at the window's codec time and ratio), with γ as
 * it stands, leaves of its step: while a mode runs, its prediction is
 * its measured step. A calibration mixes both modes: it sets the rest
 * only while none is known.
 *
 * γ needs a rest that does not depend on γ: that of a world of one (no
 * collective), or of a window whose overlapped collectives exceed the
 * compute term for every γ the model admits (above 1.05 x 2 x T_comp),
 * kept as the median of the last 16. With one, a window of either mode
 * whose compute term dominates gives γ = (step − rest − tail) / T_comp,
 * the tail being what follows the backward pass in that mode. Where both
 * modes are compute-bound γ cancels out of their comparison. */
static void
perfmodel_rest_overlapped(perfmodel_state *st, const perfmodel_config *cfg,
    const bellows_window *w, const perfmodel_times *tm, bool raw,
    bool calibrating, char *gnote, size_t len)
{
	pol_perfmodel_model m = perfmodel_model(st, cfg);
	bool shrunk = w->floats_sent > 0 && w->floats_sent < w->floats_raw;
	bool modelled = w->world > 1 && st->have_fit && st->model > 0;
	double over, tail, x;

	if (!(tm->step > 0 && tm->bwd > 0))
		return;
	m.overlap = true;
	m.comp_overlap = true;
	m.t_comp = tm->bwd;
	m.codec_ms = tm->codec;
	m.cr = shrunk       ? (double)w->floats_raw / (double)w->floats_sent
	    : st->have_meas ? st->cr
			    : 1;
	if (raw) {
		over = pol_perfmodel_overlapped(&m);
		tail = tm->codec + pol_perfmodel_comm(&m, m.last);
	} else {
		over = pol_perfmodel_overlapped_compressed(&m);
		tail = pol_perfmodel_tail_compressed(&m);
	}
	if (calibrating) {
		/* no γ, no rest apart from it */
	} else if (w->world == 1) {
		perfmodel_ring_add(st->rest_s, &st->rest_n, &st->rest_next,
		    PERFMODEL_GAMMA_SAMPLES,
		    fmax(0, tm->step - tm->bwd - tm->comm - tm->codec));
	} else if (!modelled || (!raw && !(shrunk && tm->codec > 0))) {
		/* no model, or a compression not measured */
	} else if (over >
	    PERFMODEL_GAMMA_IDENT * PERFMODEL_GAMMA_MAX * tm->bwd) {
		perfmodel_ring_add(st->rest_s, &st->rest_n, &st->rest_next,
		    PERFMODEL_GAMMA_SAMPLES, fmax(0, tm->step - over - tail));
	} else if (st->rest_n == 0) {
		snprintf(gnote, len,
		    "; not measured: no window yet gave the rest of the step "
		    "apart from gamma");
	} else if ((x = tm->step - perfmodel_median(st->rest_s, st->rest_n) -
			   tail) > PERFMODEL_GAMMA_IDENT * over) {
		perfmodel_ring_add(st->gamma_s, &st->gamma_n, &st->gamma_next,
		    PERFMODEL_GAMMA_SAMPLES, x / tm->bwd);
		st->have_gamma = true;
		st->gamma_raw = perfmodel_median(st->gamma_s, st->gamma_n);
	} else {
		snprintf(gnote, len,
		    "; not identifiable here: compute term %.4g ms <= %.3g x "
		    "overlapped collectives %.4g ms",
		    x, PERFMODEL_GAMMA_IDENT, over);
	}
	if (calibrating && st->have_other)
		return;
	m.gamma = perfmodel_gamma(st, cfg);
	st->have_other = true;
	st->t_other = fmax(0,
	    tm->step -
		(raw ? pol_perfmodel_sync(&m) + tm->codec
		     : pol_perfmodel_compressed(&m)));
}

/* ---- the decision ------------------------------------------------------ */

/* What one window's numbers predict. */
typedef struct perfmodel_view {
	pol_perfmodel_model m; /* the model, codec/cr only if have_meas */
	bool fitted;           /* latency and slope are known */
	bool predicted;        /* t_sync is set */
	bool both;             /* t_comp is set too */
	double t_sync;         /* predicted step without compression */
	double t_comp;         /* predicted step with compression */
	double rel;            /* (t_comp - t_sync) / t_sync */
	uint32_t n_levels;     /* entries of t_level (predicted) */
	double t_level[PERFMODEL_LEVELS]; /* predicted step at each set of
					   * levels measured, as st->levels */
	int best; /* fastest entry of t_level, -1: sync */
} perfmodel_view;

static void
perfmodel_predict(const perfmodel_state *st, const perfmodel_config *cfg,
    uint32_t p, double gamma, perfmodel_view *v)
{
	double u_comp;

	memset(v, 0, sizeof(*v));
	v->best = -1;
	/* A fit exists only for p > 1 (it restarts when the world
	 * changes): with p == 1 latency and slope stay 0. */
	v->m = perfmodel_model(st, cfg);
	v->m.overlap = cfg->overlap;
	v->m.comp_overlap = cfg->compressed_overlap;
	v->m.gamma = cfg->overlap ? gamma : 1;
	v->m.t_comp = st->t_comp;
	v->m.codec_ms = st->codec_ms;
	v->m.cr = st->cr;
	/* p == 1: no collective, nothing to fit. */
	v->fitted = p == 1 || (p > 1 && st->have_fit);
	if (!v->fitted || !st->have_comp || !(st->model > 0))
		return;
	v->predicted = true;
	v->t_sync = st->t_other + pol_perfmodel_sync(&v->m) +
	    (st->have_u_raw ? st->u_raw : 0);
	u_comp = st->have_u_comp ? st->u_comp : st->have_u_raw ? st->u_raw : 0;
	/* Every set of levels measured, from its medians. */
	v->n_levels = st->n_levels;
	for (uint32_t i = 0; i < st->n_levels; i++) {
		const perfmodel_level *e = &st->levels[i];
		pol_perfmodel_model m = v->m;

		m.codec_ms = perfmodel_median(e->codec, e->n);
		m.cr = perfmodel_median(e->cr, e->n);
		v->t_level[i] = st->t_other + pol_perfmodel_compressed(&m) +
		    u_comp;
		if (v->t_level[i] <
		    (v->best < 0 ? v->t_sync : v->t_level[v->best]))
			v->best = (int)i;
	}
	if (!st->have_meas)
		return;
	v->both = true;
	v->t_comp = st->t_other + pol_perfmodel_compressed(&v->m) + u_comp;
	v->rel = v->t_sync > 0 ? (v->t_comp - v->t_sync) / v->t_sync : 0;
}

/* The predictions of every set of levels measured, in force marked "*",
 * and the fastest. */
static void
perfmodel_explain_levels(const perfmodel_state *st, const perfmodel_view *v,
    uint64_t sig, pol_text *t)
{
	char name[32];

	if (v->n_levels == 0)
		return;
	pol_text_add(t, "; per level (ms): none %.4g", v->t_sync);
	for (uint32_t i = 0; i < v->n_levels; i++) {
		const perfmodel_level *e = &st->levels[i];

		perfmodel_level_name(st, e, name, sizeof(name));
		pol_text_add(t, ", %s%s %.4g", name, e->sig == sig ? "*" : "",
		    v->t_level[i]);
	}
	if (v->best < 0) {
		pol_text_add(t, ": best none");
	} else {
		perfmodel_level_name(st, &st->levels[v->best], name,
		    sizeof(name));
		pol_text_add(t, ": best %s", name);
	}
}

/* Moves the gate by the prediction, with margin and hold. Returns whether
 * it moved. */
static bool
perfmodel_gate(perfmodel_state *st, const perfmodel_config *cfg,
    const perfmodel_view *v, uint64_t window)
{
	bool past;

	if (!v->both) {
		st->streak = 0;
		return false;
	}
	past = st->off ? v->rel < -cfg->margin : v->rel > cfg->margin;
	if (!past) {
		st->streak = 0;
		return false;
	}
	if (++st->streak < (uint64_t)cfg->hold_windows)
		return false;
	st->streak = 0;
	st->off = !st->off;
	if (st->off)
		st->off_since = window;
	return true;
}

/* Whether window w proposes a probe: the gate is off, compression is
 * configured, and either probe_windows have passed since the gate went
 * off or the last probe, or the levels changed since the measurement
 * (once per new set of levels). */
static bool
perfmodel_probe_due(const perfmodel_state *st, const perfmodel_config *cfg,
    uint64_t window, bool compressing, uint64_t sig)
{
	uint64_t since = st->off_since;

	if (!st->off || cfg->probe_windows == 0 || !compressing)
		return false;
	if (st->probed && st->last_probe > since)
		since = st->last_probe;
	if (window < since)
		return false; /* windows out of order: no basis */
	if (window - since >= (uint64_t)cfg->probe_windows)
		return true;
	return st->have_meas && sig != st->meas_sig &&
	    !(st->probed && sig == st->probe_sig);
}

static void
perfmodel_explain_numbers(const perfmodel_state *st,
    const perfmodel_config *cfg, uint32_t p, double gamma, const char *gnote,
    const perfmodel_view *v, uint64_t sig, pol_text *t)
{
	pol_perfmodel_model m = v->m;
	double bw;

	if (p > 1 && st->have_fit)
		pol_text_add(t,
		    "; alpha %.3g ms, BW %.4g Gbps, R2 %.3f (%u window%s, %u "
		    "samples)",
		    pol_perfmodel_alpha(st->fit.intercept, p),
		    pol_perfmodel_bw(st->fit.slope, p) / POL_PERFMODEL_GBPS,
		    st->fit.r2, st->fit_used, st->fit_used == 1 ? "" : "s",
		    st->fit_samples);
	else if (p == 1)
		pol_text_add(t, "; world 1: no collective");
	if (!cfg->overlap)
		pol_text_add(t, "; no overlap");
	else if (st->have_gamma)
		pol_text_add(t, "; gamma %.3g (measured %.3g%s, %u window%s)",
		    gamma, st->gamma_raw,
		    gamma != st->gamma_raw ? ", clamped" : "", st->gamma_n,
		    st->gamma_n == 1 ? "" : "s");
	else
		pol_text_add(t, "; gamma %.3g (default)", gamma);
	if (cfg->overlap && gnote[0] != '\0')
		pol_text_add(t, "%s", gnote);
	if (st->have_comp)
		pol_text_add(t, "; T_comp %.4g ms, rest %.4g ms", st->t_comp,
		    st->t_other);
	else
		pol_text_add(t, "; no backward time yet");
	if (st->have_meas)
		pol_text_add(t, "; codec %.4g ms, CR %.4g (window %llu%s)",
		    st->codec_ms, st->cr, (unsigned long long)st->meas_window,
		    sig != st->meas_sig ? ", other levels" : "");
	else
		pol_text_add(t, "; compression never measured");
	if (!v->predicted || p < 2)
		return;
	if (v->both) {
		switch (pol_perfmodel_breakeven(&m, p,
		    PERFMODEL_BW_LO * POL_PERFMODEL_GBPS,
		    PERFMODEL_BW_HI * POL_PERFMODEL_GBPS, &bw)) {
		case 0:
			pol_text_add(t, "; break-even %.4g Gbps",
			    bw / POL_PERFMODEL_GBPS);
			break;
		case 1:
			pol_text_add(t,
			    "; break-even none: compressed faster up to %g "
			    "Gbps",
			    PERFMODEL_BW_HI);
			break;
		default:
			pol_text_add(t,
			    "; break-even none: compressed slower down to %g "
			    "Gbps",
			    PERFMODEL_BW_LO);
			break;
		}
	}
	m.gamma = gamma;
	if (isinf(pol_perfmodel_cr_needed(&m)))
		pol_text_add(t,
		    "; CR needed: none suffices (latency %.4g ms >= gamma "
		    "T_comp)",
		    m.k * m.latency);
	else
		pol_text_add(t, "; CR needed %.3g",
		    pol_perfmodel_cr_needed(&m));
}

static void
perfmodel_metrics(const perfmodel_state *st, uint32_t p, double gamma,
    const perfmodel_view *v, const bellows_window *w, bellows_proposal *out)
{
	pol_perfmodel_model m = v->m;
	double bw;

	out->n_metrics = 0;
	if (p > 1 && st->have_fit) {
		pol_metric_add(out, "alpha_ms", -1,
		    pol_perfmodel_alpha(st->fit.intercept, p));
		pol_metric_add(out, "bw_gbps", -1,
		    pol_perfmodel_bw(st->fit.slope, p) / POL_PERFMODEL_GBPS);
		pol_metric_add(out, "fit_r2", -1, st->fit.r2);
	}
	pol_metric_add(out, "gamma", -1, gamma);
	if (v->predicted)
		pol_metric_add(out, "t_sync_ms", -1, v->t_sync);
	if (v->both)
		pol_metric_add(out, "t_comp_ms", -1, v->t_comp);
	if (v->both && p > 1 &&
	    pol_perfmodel_breakeven(&m, p, PERFMODEL_BW_LO * POL_PERFMODEL_GBPS,
		PERFMODEL_BW_HI * POL_PERFMODEL_GBPS, &bw) == 0)
		pol_metric_add(out, "breakeven_gbps", -1,
		    bw / POL_PERFMODEL_GBPS);
	m.gamma = gamma;
	if (v->predicted && p > 1)
		pol_metric_add(out, "cr_needed", -1,
		    pol_perfmodel_cr_needed(&m));
	/* What a comparison of predictions with measurements needs. */
	if (w->step_ms_median > 0)
		pol_metric_add(out, "t_step_ms", -1, w->step_ms_median);
	if (st->have_comp)
		pol_metric_add(out, "t_backward_ms", -1, st->t_comp);
	if (st->have_other)
		pol_metric_add(out, "t_other_ms", -1, st->t_other);
	if (st->have_u_raw)
		pol_metric_add(out, "t_unmodelled_ms", -1, st->u_raw);
	if (st->have_u_comp)
		pol_metric_add(out, "t_unmodelled_comp_ms", -1, st->u_comp);
	if (st->have_meas) {
		pol_metric_add(out, "codec_ms", -1, st->codec_ms);
		pol_metric_add(out, "cr", -1, st->cr);
	}
	if (v->predicted)
		pol_metric_add(out, "comm_bound", -1,
		    pol_perfmodel_comm_bound(&m) ? 1 : 0);
	for (uint32_t i = 0; v->predicted && i < v->n_levels; i++) {
		char name[BELLOWS_METRIC_NAME_MAX];

		perfmodel_level_metric(st, &st->levels[i], name, sizeof(name));
		pol_metric_add(out, name, -1, v->t_level[i]);
	}
	if (v->predicted && v->n_levels > 0) {
		const perfmodel_level *b = v->best < 0 ? NULL
						       : &st->levels[v->best];

		pol_metric_add(out, "t_pred_best_ms", -1,
		    b == NULL ? v->t_sync : v->t_level[v->best]);
		/* 0: sending raw is fastest; absent: mixed levels. */
		pol_metric_add(out, "best_level", -1, b == NULL ? 0 : b->level);
	}
	pol_metric_add(out, "off_in_force", -1, w->compression_off ? 1 : 0);
	pol_metric_add(out, "gate_off", -1, out->compression_off ? 1 : 0);
}

/* The window's medians, each 0 where it is not a usable time. */
static void
perfmodel_times_read(const bellows_window *w, perfmodel_times *ret)
{
	ret->step = w->step_ms_median;
	ret->bwd = w->backward_ms_median;
	ret->comm = w->comm_ms_median;
	ret->codec = w->codec_ms_median;
	if (!perfmodel_time_ok(ret->step))
		ret->step = 0;
	if (!perfmodel_time_ok(ret->bwd))
		ret->bwd = 0;
	if (!perfmodel_time_ok(ret->comm))
		ret->comm = 0;
	if (!perfmodel_time_ok(ret->codec))
		ret->codec = 0;
}

/* The rest of the step (forward, optimizer, data) when compressed
 * collectives do not overlap backward. It is what the step leaves beside
 * backward, communication and codec only when no collective overlaps
 * backward: without overlap, in a world of one, and in compressed windows
 * (the model's compressed path then runs after backward). With overlap,
 * the median of those windows' rests is used: a raw window's comm_ms
 * holds hidden collectives too. Until one is measured, a raw window's
 * rest is what the model of its backward and collectives (gamma as it
 * stands) leaves of the step. Sets st->t_other; needs step and backward
 * times, and changes nothing without them. */
static void
perfmodel_rest_serial(perfmodel_state *st, const perfmodel_config *cfg,
    const bellows_window *w, const perfmodel_times *tm, bool raw,
    bool calibrating, double gamma)
{
	double rest;
	bool serial = w->world == 1 || !raw;

	if (!(tm->step > 0 && tm->bwd > 0))
		return;
	rest = fmax(0, tm->step - tm->bwd - tm->comm - tm->codec);
	if (cfg->overlap && !calibrating && serial)
		perfmodel_ring_add(st->rest_s, &st->rest_n, &st->rest_next,
		    PERFMODEL_GAMMA_SAMPLES, rest);
	if (cfg->overlap && st->rest_n == 0 && !serial && st->have_fit &&
	    st->model > 0) {
		pol_perfmodel_model m = perfmodel_model(st, cfg);

		m.t_comp = tm->bwd;
		m.gamma = gamma;
		m.overlap = true;
		rest = fmax(0, tm->step - tm->codec - pol_perfmodel_sync(&m));
	}
	st->have_other = true;
	st->t_other = cfg->overlap && st->rest_n > 0
	    ? perfmodel_median(st->rest_s, st->rest_n)
	    : rest;
}

/* Compression measured: a window that really compressed something, with
 * its codec time, not mixed with raw steps by a calibration. Keeps its
 * codec time and ratio as the last measurement, and in the table of
 * level sets under sig; any other window changes nothing. */
static void
perfmodel_codec_measure(perfmodel_state *st, const bellows_window *w,
    const perfmodel_times *tm, bool raw, bool calibrating, uint64_t sig)
{
	if (!(!raw && !calibrating && tm->codec > 0 && w->floats_sent > 0 &&
		w->floats_sent < w->floats_raw))
		return;
	st->have_meas = true;
	st->codec_ms = tm->codec;
	st->cr = (double)w->floats_raw / (double)w->floats_sent;
	st->meas_window = w->window;
	st->meas_sig = sig;
	perfmodel_level_add(st, sig, perfmodel_levels_one(w), st->codec_ms,
	    st->cr, w->window);
}

/* Without overlap, the step's communication that the fitted collectives
 * leave unexplained, per mode: what the window measured minus what the
 * line predicts for the bytes it sent. Sets u_raw or u_comp; changes
 * nothing with overlap, without a fit, in a calibration, or in a
 * compressed window this one did not measure. */
static void
perfmodel_unexplained(perfmodel_state *st, const perfmodel_config *cfg,
    const bellows_window *w, const perfmodel_times *tm, bool raw,
    bool calibrating)
{
	double k, last, model_ms;

	if (!(!cfg->overlap && w->world > 1 && st->have_fit && !calibrating &&
		tm->comm > 0 && st->model > 0))
		return;
	perfmodel_shape(st, cfg, &k, &last);
	if (raw) {
		model_ms = k * st->fit.intercept + st->model * st->fit.slope;
		st->have_u_raw = true;
		st->u_raw = fmax(0, tm->comm - model_ms);
	} else if (st->have_meas && st->meas_window == w->window) {
		model_ms = k * st->fit.intercept +
		    st->model / st->cr * st->fit.slope;
		st->have_u_comp = true;
		st->u_comp = fmax(0, tm->comm - model_ms);
	}
}

/* Gamma from a window sent raw with overlap (compressed collectives not
 * overlapping): its backward and synchronisation took T_obs = step -
 * rest - codec, which the model says is max(gamma T_comp, overlapped) +
 * T_comm(b_last). Where the compute term dominates, gamma = (T_obs -
 * T_comm(b_last)) / T_comp, added to the samples; where the collectives
 * do, T_obs does not depend on gamma and gnote (len bytes) says why none
 * was taken. Other windows change nothing. */
static void
perfmodel_gamma_measure(perfmodel_state *st, const perfmodel_config *cfg,
    const bellows_window *w, const perfmodel_times *tm, bool raw,
    bool calibrating, char *gnote, size_t len)
{
	pol_perfmodel_model m;
	double over, x;

	if (!(cfg->overlap && !cfg->compressed_overlap && raw && !calibrating &&
		tm->bwd > 0 && tm->step > 0 && w->world > 1 && st->have_fit &&
		st->model > 0))
		return;
	m = perfmodel_model(st, cfg);
	over = pol_perfmodel_overlapped(&m);
	x = tm->step - st->t_other - tm->codec - pol_perfmodel_comm(&m, m.last);
	if (st->rest_n == 0) {
		snprintf(gnote, len,
		    "; not measured: no compressed window yet gave "
		    "the rest of the step");
	} else if (x > PERFMODEL_GAMMA_IDENT * over) {
		perfmodel_ring_add(st->gamma_s, &st->gamma_n, &st->gamma_next,
		    PERFMODEL_GAMMA_SAMPLES, x / tm->bwd);
		st->have_gamma = true;
		st->gamma_raw = perfmodel_median(st->gamma_s, st->gamma_n);
	} else {
		snprintf(gnote, len,
		    "; not identifiable here: compute term %.4g ms <= "
		    "%.3g x overlapped collectives %.4g ms",
		    x, PERFMODEL_GAMMA_IDENT, over);
	}
}

/* What the window decided, first in the reason: whether compression is
 * on or off from the next window and why (warm-up, the gate moving, a
 * probe), then the comparison of predictions it rests on. */
static void
perfmodel_decision_text(const perfmodel_state *st, const perfmodel_config *cfg,
    const bellows_window *w, const perfmodel_view *v, bool compressing,
    bool moved, bool probe, bool warmup, pol_text *t)
{
	unsigned long long now = (unsigned long long)w->window;

	if (warmup)
		pol_text_add(t,
		    "compression off until window %lld (raw_windows)",
		    (long long)cfg->raw_windows);
	else if (w->window + 1 == (uint64_t)cfg->raw_windows && !st->off)
		pol_text_add(t,
		    "compression on from window %llu: raw_windows over",
		    now + 1);
	else if (moved)
		pol_text_add(t, "compression %s from window %llu",
		    st->off ? "off" : "on", now + 1);
	else if (probe)
		pol_text_add(t,
		    "compression on for window %llu only, to re-measure it",
		    now + 1);
	else
		pol_text_add(t, "compression stays %s", st->off ? "off" : "on");
	if (!compressing)
		pol_text_add(t, ": no layer compressed");
	else if (v->both)
		pol_text_add(t,
		    ": compressed %.4g ms vs sync %.4g ms (%+.1f%%, margin "
		    "%g%%, %u/%lld)",
		    v->t_comp, v->t_sync, 100 * v->rel, 100 * cfg->margin,
		    moved ? (unsigned)cfg->hold_windows : st->streak,
		    (long long)cfg->hold_windows);
	else if (v->predicted)
		pol_text_add(t, ": sync %.4g ms, no compressed prediction",
		    v->t_sync);
	else
		pol_text_add(t, ": no prediction");
}

/* One window: refits the collectives, takes what the window measured
 * (backward time, rest of the step, codec time and ratio, unexplained
 * communication, gamma), predicts both modes and runs the gate. Returns
 * the config check's error or BELLOWS_EMISMATCH when the layer count
 * changed, with st untouched; 0 with *out's gate and reason set. */
static int
perfmodel_on_window(void *state, const void *config, const bellows_window *w,
    bellows_proposal *out)
{
	perfmodel_state *st = state;
	const perfmodel_config *cfg = config;
	uint32_t p = w->world;
	char notes[BELLOWS_REASON_MAX];
	pol_text t, nt;
	perfmodel_view v;
	perfmodel_times tm;
	bool compressing, calibrating, raw, moved, probe, warmup;
	double gamma;
	char gnote[160] = "";
	uint64_t sig;
	int r;

	if ((r = perfmodel_config_check(cfg)) != 0)
		return r;
	if (w->n_layers != st->n_layers)
		return BELLOWS_EMISMATCH;
	pol_text_init(&t, out->reason, sizeof(out->reason));
	pol_text_init(&nt, notes, sizeof(notes));
	perfmodel_times_read(w, &tm);

	/* The line depends on p: samples of another world do not mix. */
	if (p != st->world) {
		if (st->world != 0)
			pol_text_add(&nt, "; world %u -> %u: fit restarted",
			    st->world, p);
		memset(st->ring, 0, sizeof(st->ring));
		st->have_fit = false;
		st->world = p;
	}
	perfmodel_collect(st, w);
	if (p > 1)
		perfmodel_refit(st, cfg, w, &nt);

	sig = perfmodel_levels_sig(w, &compressing);
	calibrating = w->calibrate_until > w->first_step;
	raw = w->compression_off || !compressing ||
	    (w->floats_raw > 0 && w->floats_sent >= w->floats_raw);
	if (tm.bwd > 0) {
		st->have_comp = true;
		st->t_comp = tm.bwd;
	}
	/* With compressed_overlap no window above a world of one is serial:
	 * see perfmodel_rest_overlapped; otherwise perfmodel_rest_serial. */
	gamma = perfmodel_gamma(st, cfg);
	if (cfg->overlap && cfg->compressed_overlap)
		perfmodel_rest_overlapped(st, cfg, w, &tm, raw, calibrating,
		    gnote, sizeof(gnote));
	else
		perfmodel_rest_serial(st, cfg, w, &tm, raw, calibrating, gamma);
	perfmodel_codec_measure(st, w, &tm, raw, calibrating, sig);
	perfmodel_unexplained(st, cfg, w, &tm, raw, calibrating);
	perfmodel_gamma_measure(st, cfg, w, &tm, raw, calibrating, gnote,
	    sizeof(gnote));
	gamma = perfmodel_gamma(st, cfg);

	perfmodel_predict(st, cfg, p, gamma, &v);
	moved = compressing && perfmodel_gate(st, cfg, &v, w->window);
	if (!compressing)
		st->streak = 0;
	probe = perfmodel_probe_due(st, cfg, w->window, compressing, sig);
	if (probe) {
		st->probed = true;
		st->last_probe = w->window;
		st->probe_sig = sig;
	}
	/* The first raw_windows windows run raw whatever the gate. */
	warmup = w->window + 1 < (uint64_t)cfg->raw_windows;
	out->compression_off = warmup || (st->off && !probe);

	perfmodel_decision_text(st, cfg, w, &v, compressing, moved, probe,
	    warmup, &t);
	pol_text_add(&t, "%s", notes);
	if (calibrating)
		pol_text_add(&t, "; calibration: not measured");
	perfmodel_explain_numbers(st, cfg, p, gamma, gnote, &v, sig, &t);
	perfmodel_explain_levels(st, &v, sig, &t);
	perfmodel_metrics(st, p, gamma, &v, w, out);
	return 0;
}

static int
perfmodel_on_event(void *state, const void *config, const bellows_event *ev)
{
	(void)state;
	if (ev->type != BELLOWS_EVENT_RELOAD)
		return 0;
	/* The state stays: the ring already holds PERFMODEL_FIT_MAX windows,
	 * whatever fit_windows now says. */
	return perfmodel_config_check(config);
}

const bellows_policy_ops pol_perfmodel_ops = {
	.abi_version = BELLOWS_POLICY_ABI,
	.name = "perfmodel",
	.stats_read = BELLOWS_STAT_READ(count) |
	    BELLOWS_STAT_READ(comm_raw_ms) | BELLOWS_STAT_READ(comm_raw_n) |
	    BELLOWS_STAT_READ(codec_ms) | BELLOWS_STATS_DECLARED,
	.summary = "turns compression off while the performance model "
		   "predicts it slower than plain all-reduce (Agarwal ch. 4)",
	.knobs = BELLOWS_KNOB_COMPRESSION,
	.config_size = sizeof(perfmodel_config),
	.state_size = sizeof(perfmodel_state),
	.params = perfmodel_params,
	.init = perfmodel_init,
	.on_window = perfmodel_on_window,
	.fini = NULL,
	.on_event = perfmodel_on_event,
};
