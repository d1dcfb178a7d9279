/* slimgc - SlimGC's communication threshold: tensors smaller than a
 * measured size are sent raw, larger ones compressed.
 *
 * The policy owns the size threshold and runs calibrations: it asks for
 * `calibration_steps` steps in which every rank sends each tensor
 * compressed on even steps and raw on odd steps (the decision's
 * calibrate_steps), collects per tensor the raw time t_c, the compressed
 * time t_cq and the codec time t_pq of every window the calibration
 * covers, and builds the paper's table: one row per tensor size (tensors
 * of equal size merged), ascending. The threshold is the smallest size
 * whose benefit ratio t_c / (t_cq + t_pq) exceeds 1 (rule `paper`: the
 * first such row, window values averaged) or, by default, the smallest
 * size from which every row exceeds 1 (rule `robust`: medians, monotone
 * envelope), a deviation from the paper flagged in every reason. No row
 * above 1 sends everything raw (UINT64_MAX); every row above 1 compresses
 * everything (0). From the second calibration on, a size changes side
 * only when its ratio leaves a band of +-hysteresis around 1 (another
 * deviation: ratios near 1 would otherwise move the threshold on noise).
 * Optionally the policy recalibrates when the tensors still measured
 * drift from the calibration's times.
 *
 * The table's sends are per-tensor synchronous ones, which a real raw
 * step (a DDP bucket all-reduce overlapped with the backward pass) does
 * not make: the table ranks the sizes and proposes a threshold, but by
 * default (`verify`, a deviation from the paper) a threshold that
 * compresses anything is kept only if whole steps under it are faster, by
 * more than `verify_margin`, than whole steps with every tensor raw,
 * measured on the path the job runs (the windows' step_ms medians,
 * `verify_windows` windows of each, alternated). The paper's text, its
 * open points and what bellows chose are in docs/policies/slimgc.md.
 */
#include "common/units.h"
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

/* Per-tensor samples one instance keeps of a calibration, all windows
 * together: tensors x windows beyond this keep fewer windows. */
#define SLIMGC_SAMPLES_MAX ((uint64_t)1 << 21)
#define SLIMGC_WINDOWS_MAX 64 /* calibration windows kept at most */

#define SLIMGC_VERIFY_MAX 32 /* verify_windows at most */
#define SLIMGC_SEEN_RAW   4  /* raw windows remembered for the shortcut */
#define SLIMGC_RAW_AGE    8  /* ... when at most this many windows old */

#define SLIMGC_INFINITY UINT64_MAX /* threshold: everything raw */
#define SLIMGC_NONE     UINT32_MAX /* no row */

/* Metrics besides the per-row ratios: threshold_bytes, calib_rows,
 * raw_drift; once a verification is over, also verify_comp_ms,
 * verify_raw_ms and verify_kept. */
#define SLIMGC_JOB_METRICS    3
#define SLIMGC_VERIFY_METRICS 3

/* ---- configuration ------------------------------------------------------ */

typedef enum slimgc_rule {
	SLIMGC_ROBUST = 0, /* medians; every larger size also above 1 */
	SLIMGC_PAPER = 1,  /* means; the first size above 1 */
} slimgc_rule;

typedef struct slimgc_config {
	int64_t calibration_steps;           /* steps of one calibration */
	char rule[BELLOWS_PARAM_STRING_MAX]; /* "robust" or "paper" */
	int64_t min_samples;      /* raw and compressed sends a row needs,
				   * summed over ranks and windows */
	double recalibrate_drift; /* relative drift of the measured times
				   * that starts a new calibration; 0: never */
	int64_t drift_windows;    /* consecutive windows over the drift */
	int64_t retries;          /* calibrations asked again when one gave no
				   * row */
	int64_t start_timeout;    /* windows to wait for an asked calibration
				   * to start before asking again */
	double hysteresis;        /* after the first calibration, a size
				   * switches to compressed above 1 + this
				   * ratio, to raw below 1 - this */
	bool verify;              /* a threshold that compresses something
				   * must beat every tensor raw in whole
				   * steps; false: the paper's table alone */
	int64_t verify_windows;   /* windows of each kind a verification
				   * measures */
	double verify_margin;     /* the compressed steps' median must be
				   * below the raw steps' by more than this
				   * fraction */
	double verify_decisive;   /* a first compressed window faster than
				   * the raw windows seen just before by
				   * more than this fraction is verdict
				   * enough; 1: never */
} slimgc_config;

static const char *const slimgc_rules[] = { "robust", "paper", NULL };

static const bellows_param slimgc_params[] = {
	{ .name = "calibration_steps",
	    .type = BELLOWS_PARAM_INT,
	    .offset = offsetof(slimgc_config, calibration_steps),
	    .min = 2,
	    .max = 1e7,
	    .def = 20,
	    .help = "steps of a calibration: compressed on even steps, raw "
		    "on odd ones" },
	{ .name = "rule",
	    .type = BELLOWS_PARAM_STRING,
	    .offset = offsetof(slimgc_config, rule),
	    .def_str = "robust",
	    .choices = slimgc_rules,
	    .help = "robust (medians, every larger size also pays) or paper "
		    "(means, the first size that pays)" },
	{ .name = "min_samples",
	    .type = BELLOWS_PARAM_INT,
	    .offset = offsetof(slimgc_config, min_samples),
	    .min = 1,
	    .max = 1e9,
	    .def = 1,
	    .help = "raw and compressed sends (over ranks and windows) a "
		    "size needs to enter the table" },
	{ .name = "recalibrate_drift",
	    .type = BELLOWS_PARAM_DOUBLE,
	    .offset = offsetof(slimgc_config, recalibrate_drift),
	    .min = 0,
	    .max = 100,
	    .def = 0,
	    .help = "recalibrate when measured times drift by more than this "
		    "fraction from the calibration's; 0 = never" },
	{ .name = "drift_windows",
	    .type = BELLOWS_PARAM_INT,
	    .offset = offsetof(slimgc_config, drift_windows),
	    .min = 1,
	    .max = 1e6,
	    .def = 2,
	    .help = "consecutive windows over the drift before recalibrating" },
	{ .name = "retries",
	    .type = BELLOWS_PARAM_INT,
	    .offset = offsetof(slimgc_config, retries),
	    .min = 0,
	    .max = 1000,
	    .def = 1,
	    .help = "calibrations asked again after one that gave no row" },
	{ .name = "start_timeout",
	    .type = BELLOWS_PARAM_INT,
	    .offset = offsetof(slimgc_config, start_timeout),
	    .min = 1,
	    .max = 1e6,
	    .def = 8,
	    .help = "windows to wait for a calibration to start before "
		    "asking again" },
	{ .name = "hysteresis",
	    .type = BELLOWS_PARAM_DOUBLE,
	    .offset = offsetof(slimgc_config, hysteresis),
	    .min = 0,
	    .max = 0.9,
	    .def = 0.1,
	    .help = "after the first calibration, a size changes side only "
		    "if its ratio passes 1 by this fraction: above 1 + h to "
		    "be compressed, below 1 - h to go raw" },
	{ .name = "verify",
	    .type = BELLOWS_PARAM_BOOL,
	    .offset = offsetof(slimgc_config, verify),
	    .def = 1,
	    .help = "keep a threshold only if whole steps under it beat "
		    "whole steps with every tensor raw; false: the paper's "
		    "per-tensor table alone" },
	{ .name = "verify_windows",
	    .type = BELLOWS_PARAM_INT,
	    .offset = offsetof(slimgc_config, verify_windows),
	    .min = 1,
	    .max = SLIMGC_VERIFY_MAX,
	    .def = 1,
	    .help = "windows a verification measures with the threshold, "
		    "and as many with every tensor raw" },
	{ .name = "verify_margin",
	    .type = BELLOWS_PARAM_DOUBLE,
	    .offset = offsetof(slimgc_config, verify_margin),
	    .min = 0,
	    .max = 0.5,
	    .def = 0.03,
	    .help = "the threshold is kept only if its median step is below "
		    "the raw one by more than this fraction" },
	{ .name = "verify_decisive",
	    .type = BELLOWS_PARAM_DOUBLE,
	    .offset = offsetof(slimgc_config, verify_decisive),
	    .min = 0,
	    .max = 1,
	    .def = 0.25,
	    .help = "a verification's first compressed window faster by more "
		    "than this fraction than the raw windows the job ran "
		    "just before keeps the threshold without raw windows of "
		    "its own; 1: always run them" },
	{ .name = NULL },
};

/* The parser checks types, ranges and choices; this repeats the checks
 * for hosts that hand over configs by other means. */
static int
slimgc_config_check(const slimgc_config *cfg, slimgc_rule *ret_rule)
{
	char rule[BELLOWS_PARAM_STRING_MAX];

	if (cfg->calibration_steps < 2 || cfg->calibration_steps > 10000000 ||
	    cfg->min_samples < 1 || cfg->min_samples > 1000000000 ||
	    !(cfg->recalibrate_drift >= 0 && cfg->recalibrate_drift <= 100) ||
	    cfg->drift_windows < 1 || cfg->drift_windows > 1000000 ||
	    cfg->retries < 0 || cfg->retries > 1000 || cfg->start_timeout < 1 ||
	    cfg->start_timeout > 1000000 ||
	    !(cfg->hysteresis >= 0 && cfg->hysteresis <= 0.9) ||
	    cfg->verify_windows < 1 ||
	    cfg->verify_windows > SLIMGC_VERIFY_MAX ||
	    !(cfg->verify_margin >= 0 && cfg->verify_margin <= 0.5) ||
	    !(cfg->verify_decisive >= 0 && cfg->verify_decisive <= 1))
		return BELLOWS_EINVAL;
	memcpy(rule, cfg->rule, sizeof(rule));
	rule[sizeof(rule) - 1] = '\0';
	if (strcmp(rule, "robust") == 0)
		*ret_rule = SLIMGC_ROBUST;
	else if (strcmp(rule, "paper") == 0)
		*ret_rule = SLIMGC_PAPER;
	else
		return BELLOWS_EINVAL;
	return 0;
}

/* ---- state -------------------------------------------------------------- */

typedef enum slimgc_phase {
	SLIMGC_IDLE = 0,    /* no calibration asked or running */
	SLIMGC_ASKED = 1,   /* asked, not seen in a window yet */
	SLIMGC_RUNNING = 2, /* windows of it are being collected */
} slimgc_phase;

/* One tensor in one calibration window; NAN: not measured. */
typedef struct slimgc_sample {
	double raw;      /* t_c: one raw collective */
	double comp;     /* t_cq: one compressed collective */
	double codec;    /* t_pq: encode + decode around one */
	uint32_t n_raw;  /* raw sends behind raw */
	uint32_t n_comp; /* compressed sends behind comp */
} slimgc_sample;

/* One size of the table. */
typedef struct slimgc_row {
	uint64_t bytes;  /* tensor size: numel * 4 */
	uint32_t layer;  /* first (lowest index) tensor of this size */
	uint32_t layers; /* tensors merged into the row */
	double t_c;      /* raw time, ms */
	double t_cq;     /* compressed time, ms */
	double t_pq;     /* codec time, ms */
	double ratio;    /* t_c / (t_cq + t_pq) */
	uint64_t n_raw;  /* raw sends behind t_c */
	uint64_t n_comp; /* compressed sends behind t_cq */
} slimgc_row;

/* A verification of the table's threshold: windows with it (compressed)
 * and with every tensor raw, in the order slimgc_verify_compressed gives,
 * each entirely under its setting, compared by their step times. */
typedef struct slimgc_verify {
	bool running;                   /* windows are being measured */
	uint64_t threshold;             /* the threshold verified */
	uint64_t started;               /* window whose decision started it */
	uint32_t index;                 /* windows measured so far */
	uint64_t from;                  /* first step entirely under the
					 * current setting */
	uint32_t n_comp;                /* entries in comp */
	uint32_t n_raw;                 /* entries in raw */
	double comp[SLIMGC_VERIFY_MAX]; /* step_ms of compressed windows */
	double raw[SLIMGC_VERIFY_MAX];  /* step_ms of raw windows */
	bool judged;                    /* a verification is over */
	bool kept;                      /* ... it kept its threshold */
	uint64_t judged_threshold;      /* ... the threshold it verified */
	double comp_ms;                 /* ... its compressed median */
	double raw_ms;                  /* ... its raw median */
} slimgc_verify;

/* Windows the job ran with every tensor raw, whatever set it (perfmodel's
 * gate, a verification, a threshold of infinity), newest last: what the
 * verification's shortcut compares a first compressed window with. */
typedef struct slimgc_seen_raw {
	uint32_t n;                       /* entries, at most SLIMGC_SEEN_RAW */
	uint64_t window[SLIMGC_SEEN_RAW]; /* their indices */
	double step_ms[SLIMGC_SEEN_RAW];  /* their step_ms_median */
} slimgc_seen_raw;

typedef struct slimgc_state {
	uint32_t n_layers;      /* tensors of the job */
	uint64_t *bytes;        /* per tensor: numel * 4 */
	bool *selected;         /* per tensor: takes part (layer selector) */
	uint32_t *order;        /* tensors by size, ascending (stable) */
	bool started;           /* on_window ran once */
	slimgc_phase phase;     /* calibration progress */
	uint64_t asked_window;  /* window whose decision asked for it */
	uint64_t asked_steps;   /* steps it was asked for */
	uint64_t asked_last;    /* last step of the window that asked */
	uint64_t lag;           /* steps from a window's end to its
				 * decision's apply step, as measured */
	uint64_t target;        /* the running one ends before this step */
	uint64_t until;         /* calibrate_until of the running one */
	uint64_t done_until;    /* calibrate_until of the last one: windows
				 * carrying it or less are not calibrating */
	uint32_t cap;           /* windows samples holds */
	uint32_t n_windows;     /* calibration windows collected */
	uint32_t skipped;       /* calibration windows beyond cap */
	slimgc_sample *samples; /* cap rows of n_layers */
	double *scratch;        /* cap x n_layers values, for medians */
	double *scratch_w;      /* their weights, for means */
	uint32_t attempts;      /* calibrations in a row without a row */
	uint32_t calibrations;  /* tables built */
	bool have_table;        /* samples hold a finished calibration */
	uint64_t table_window;  /* window that finished it */
	uint32_t n_rows;        /* rows of the table */
	slimgc_row *rows;       /* the table, ascending sizes */
	slimgc_row *alt;        /* scratch: the table under the other rule */
	uint32_t missing;       /* selected sizes lacking samples */
	uint32_t pick;          /* row that set the threshold, or NONE */
	uint64_t proposed;      /* threshold the table gives */
	uint64_t threshold;     /* threshold decided: the table's, or
				 * the one a verification runs or gave */
	uint64_t prev;          /* the table's threshold before its latest
				 * calibration (its hysteresis centre) */
	double *calib_raw;      /* per tensor: its t_c in the calibration */
	double *calib_comp;     /* per tensor: its t_cq in the calibration */
	uint32_t over;          /* consecutive windows over the drift */
	double drift;           /* last window's drift, NAN if unjudged */
	bool drift_comp;        /* ... judged on compressed times */
	bool repick;            /* reloaded: pick again from the table */
	slimgc_verify verify;   /* the proposed threshold on the real path */
	slimgc_seen_raw seen;   /* recent raw windows */
} slimgc_state;

static void
slimgc_fini(void *state, const void *config)
{
	slimgc_state *st = state;

	(void)config;
	free(st->bytes);
	free(st->selected);
	free(st->order);
	free(st->samples);
	free(st->scratch);
	free(st->scratch_w);
	free(st->rows);
	free(st->alt);
	free(st->calib_raw);
	free(st->calib_comp);
	memset(st, 0, sizeof(*st));
}

static int
slimgc_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The median of v[0..k), k > 0, which it sorts. */
static double
slimgc_median(double *v, size_t k)
{
	qsort(v, k, sizeof(double), slimgc_cmp_double);
	return k % 2 == 1 ? v[k / 2] : (v[k / 2 - 1] + v[k / 2]) / 2;
}

/* A tensor's size and index, to sort tensors by size (ties by index). */
typedef struct slimgc_key {
	uint64_t bytes; /* numel * 4 */
	uint32_t layer; /* index */
} slimgc_key;

static int
slimgc_cmp_key(const void *a, const void *b)
{
	const slimgc_key *x = a, *y = b;

	if (x->bytes != y->bytes)
		return x->bytes < y->bytes ? -1 : 1;
	return x->layer < y->layer ? -1 : x->layer > y->layer;
}

static int
slimgc_init(void *state, const void *config, const bellows_job_info *job,
    bellows_proposal *initial)
{
	slimgc_state *st = state;
	const slimgc_config *cfg = config;
	size_t n = job->n_layers > 0 ? job->n_layers : 1;
	slimgc_key *keys;
	uint64_t cap;
	slimgc_rule rule;
	int r;

	if ((r = slimgc_config_check(cfg, &rule)) != 0)
		return r;
	if (initial->n_layers != job->n_layers)
		return BELLOWS_EMISMATCH;
	cap = SLIMGC_SAMPLES_MAX / n;
	if (cap == 0)
		return BELLOWS_ELIMIT;
	st->cap = (uint32_t)(cap < SLIMGC_WINDOWS_MAX ? cap
						      : SLIMGC_WINDOWS_MAX);
	st->n_layers = job->n_layers;
	st->bytes = calloc(n, sizeof(*st->bytes));
	st->selected = calloc(n, sizeof(*st->selected));
	st->order = calloc(n, sizeof(*st->order));
	st->samples = calloc((size_t)st->cap * n, sizeof(*st->samples));
	/* At least 2n doubles: init sorts n slimgc_keys in it. */
	st->scratch = calloc((size_t)(st->cap < 2 ? 2 : st->cap) * n,
	    sizeof(*st->scratch));
	st->scratch_w = calloc((size_t)st->cap * n, sizeof(*st->scratch_w));
	st->rows = calloc(n, sizeof(*st->rows));
	st->alt = calloc(n, sizeof(*st->alt));
	st->calib_raw = calloc(n, sizeof(*st->calib_raw));
	st->calib_comp = calloc(n, sizeof(*st->calib_comp));
	if (st->bytes == NULL || st->selected == NULL || st->order == NULL ||
	    st->samples == NULL || st->scratch == NULL ||
	    st->scratch_w == NULL || st->rows == NULL || st->alt == NULL ||
	    st->calib_raw == NULL || st->calib_comp == NULL) {
		slimgc_fini(st, config);
		return BELLOWS_ENOMEM;
	}
	for (uint32_t l = 0; l < job->n_layers; l++) {
		uint64_t numel = job->layers[l].numel;

		/* float32; a size that would wrap is as large as it gets */
		st->bytes[l] = numel > UINT64_MAX / 4 ? UINT64_MAX : numel * 4;
		st->selected[l] = job->layers[l].selected;
		st->calib_raw[l] = NAN;
		st->calib_comp[l] = NAN;
	}
	/* The keys borrow the scratch, which holds at least n doubles. */
	keys = (slimgc_key *)(void *)st->scratch;
	for (uint32_t l = 0; l < job->n_layers; l++)
		keys[l] = (slimgc_key){ .bytes = st->bytes[l], .layer = l };
	qsort(keys, job->n_layers, sizeof(*keys), slimgc_cmp_key);
	for (uint32_t l = 0; l < job->n_layers; l++)
		st->order[l] = keys[l].layer;
	st->pick = SLIMGC_NONE;
	st->proposed = initial->size_threshold;
	st->threshold = initial->size_threshold;
	st->drift = NAN;
	snprintf(initial->reason, sizeof(initial->reason),
	    "size threshold %llu B until the first calibration (%lld steps "
	    "from the decision after window 0)",
	    (unsigned long long)initial->size_threshold,
	    (long long)cfg->calibration_steps);
	return 0;
}

/* ---- text --------------------------------------------------------------- */

/* "2306864 B (2.31 MB)", "infinity", "0 B": the exact count, then the
 * size in the units of every tool (common/units.h). */
static void
slimgc_size_text(uint64_t bytes, char *buf, size_t len)
{
	char human[32];

	if (bytes == SLIMGC_INFINITY) {
		snprintf(buf, len, "infinity");
	} else if (bytes >= 1000) {
		com_fmt_bytes((double)bytes, human, sizeof(human));
		snprintf(buf, len, "%llu B (%s)", (unsigned long long)bytes,
		    human);
	} else {
		snprintf(buf, len, "%llu B", (unsigned long long)bytes);
	}
}

/* ---- calibration -------------------------------------------------------- */

/* A timing off the wire: finite and not negative, else NAN. */
static double
slimgc_time(double v)
{
	return isfinite(v) && v >= 0 ? v : NAN;
}

static slimgc_sample *
slimgc_row_of(const slimgc_state *st, uint32_t window)
{
	return st->samples + (size_t)window * st->n_layers;
}

/* Keeps the timings of one calibration window. */
static void
slimgc_collect(slimgc_state *st, const bellows_window *w)
{
	slimgc_sample *row;

	if (st->n_windows >= st->cap) {
		st->skipped++;
		return;
	}
	row = slimgc_row_of(st, st->n_windows++);
	for (uint32_t l = 0; l < st->n_layers; l++) {
		const bellows_window_layer *wl = &w->layers[l];
		slimgc_sample *s = &row[l];

		s->raw = slimgc_time(wl->comm_raw_ms);
		s->comp = slimgc_time(wl->comm_comp_ms);
		s->codec = slimgc_time(wl->codec_ms);
		s->n_raw = isnan(s->raw) ? 0 : wl->comm_raw_n;
		s->n_comp = isnan(s->comp) ? 0 : wl->comm_comp_n;
		/* A compressed send always has a codec time (0 if none
		 * was measured); one without a send has none. */
		if (isnan(s->comp))
			s->codec = NAN;
		else if (isnan(s->codec))
			s->codec = 0;
	}
}

typedef enum slimgc_field {
	SLIMGC_RAW = 0,   /* t_c */
	SLIMGC_COMP = 1,  /* t_cq */
	SLIMGC_CODEC = 2, /* t_pq */
} slimgc_field;

/* Aggregates one field over the tensors order[from..to) and every
 * calibration window: the median (robust) or the mean weighted by sends
 * (paper). NAN when no sample has the field; *ret_n the sends behind. */
static double
slimgc_aggregate(slimgc_state *st, uint32_t from, uint32_t to,
    slimgc_field field, slimgc_rule rule, uint64_t *ret_n)
{
	size_t k = 0;
	uint64_t sends = 0;
	double sum = 0, weight = 0;

	for (uint32_t i = from; i < to; i++) {
		uint32_t l = st->order[i];

		if (!st->selected[l])
			continue;
		for (uint32_t w = 0; w < st->n_windows; w++) {
			const slimgc_sample *s = &slimgc_row_of(st, w)[l];
			double v = field == SLIMGC_RAW ? s->raw
			    : field == SLIMGC_COMP     ? s->comp
						       : s->codec;
			uint32_t n = field == SLIMGC_RAW ? s->n_raw : s->n_comp;

			if (isnan(v))
				continue;
			st->scratch[k] = v;
			st->scratch_w[k] = n > 0 ? n : 1;
			k++;
			sends += n;
		}
	}
	if (ret_n != NULL)
		*ret_n = sends;
	if (k == 0)
		return NAN;
	if (rule == SLIMGC_PAPER) {
		for (size_t i = 0; i < k; i++) {
			sum += st->scratch[i] * st->scratch_w[i];
			weight += st->scratch_w[i];
		}
		return sum / weight;
	}
	return slimgc_median(st->scratch, k);
}

static double
slimgc_ratio(double t_c, double t_cq, double t_pq)
{
	double q = t_cq + t_pq;

	if (q > 0)
		return t_c / q;
	/* Free compressed sends: they pay as soon as raw ones cost. */
	return t_c > 0 ? INFINITY : 1;
}

/* Builds the table from the collected windows under `rule` into rows
 * (n_layers entries), leaving out sizes with fewer than min_samples raw
 * or compressed sends (counted in *ret_missing). With keep_times, every
 * tensor's own calibration times go to calib_raw/calib_comp for the drift
 * check. Returns the rows built. */
static uint32_t
slimgc_build(slimgc_state *st, slimgc_rule rule, uint64_t min_samples,
    slimgc_row *rows, uint32_t *ret_missing, bool keep_times)
{
	uint32_t i = 0, n_rows = 0, missing = 0;

	while (i < st->n_layers) {
		uint32_t l = st->order[i], j = i, first = SLIMGC_NONE, n = 0;
		slimgc_row row;

		/* The tensors of this size are order[i..j). */
		while (
		    j < st->n_layers && st->bytes[st->order[j]] == st->bytes[l])
			j++;
		for (uint32_t k = i; k < j; k++) {
			uint32_t m = st->order[k];

			if (keep_times) {
				st->calib_raw[m] = NAN;
				st->calib_comp[m] = NAN;
			}
			if (!st->selected[m])
				continue;
			if (keep_times) {
				st->calib_raw[m] = slimgc_aggregate(st, k,
				    k + 1, SLIMGC_RAW, rule, NULL);
				st->calib_comp[m] = slimgc_aggregate(st, k,
				    k + 1, SLIMGC_COMP, rule, NULL);
			}
			if (first == SLIMGC_NONE)
				first = m;
			n++;
		}
		if (n == 0) {
			i = j;
			continue;
		}
		/* Pool the selected tensors of the size. */
		row = (slimgc_row){ .bytes = st->bytes[l],
			.layer = first,
			.layers = n };
		row.t_c = slimgc_aggregate(st, i, j, SLIMGC_RAW, rule,
		    &row.n_raw);
		row.t_cq = slimgc_aggregate(st, i, j, SLIMGC_COMP, rule,
		    &row.n_comp);
		row.t_pq = slimgc_aggregate(st, i, j, SLIMGC_CODEC, rule, NULL);
		i = j;
		if (isnan(row.t_c) || isnan(row.t_cq) ||
		    row.n_raw < min_samples || row.n_comp < min_samples ||
		    row.n_raw == 0 || row.n_comp == 0) {
			missing++;
			continue;
		}
		if (isnan(row.t_pq))
			row.t_pq = 0;
		row.ratio = slimgc_ratio(row.t_c, row.t_cq, row.t_pq);
		rows[n_rows++] = row;
	}
	*ret_missing = missing;
	return n_rows;
}

/* Whether a row pays for compression: ratio > 1, or with hysteresis h
 * around the threshold `prev` in force, ratio > 1 - h for a size sent
 * compressed under it (bytes >= prev) and ratio > 1 + h for one sent raw,
 * so that a ratio wandering near 1 between calibrations does not move
 * the threshold back and forth. A tie (ratio exactly at the bar) does not
 * pay: the paper's small-tensor test is t_cq + t_pq > t_c, its
 * large-tensor test the complement, and a tie gains nothing. */
static bool
slimgc_pays(const slimgc_row *r, double h, uint64_t prev)
{
	double bar = 1;

	if (h > 0)
		bar = r->bytes >= prev ? 1 - h : 1 + h;
	return r->ratio > bar;
}

/* The row that sets the threshold under `rule`, or SLIMGC_NONE, with
 * hysteresis h around the threshold prev (h = 0: none). */
static uint32_t
slimgc_pick(const slimgc_row *rows, uint32_t n, slimgc_rule rule, double h,
    uint64_t prev)
{
	uint32_t pick = SLIMGC_NONE;

	if (rule == SLIMGC_PAPER) {
		for (uint32_t i = 0; i < n; i++) {
			if (slimgc_pays(&rows[i], h, prev))
				return i;
		}
		return SLIMGC_NONE;
	}
	for (uint32_t i = n; i-- > 0;) {
		if (!slimgc_pays(&rows[i], h, prev))
			break;
		pick = i;
	}
	return pick;
}

/* The hysteresis the table is picked with: none for the first table (no
 * threshold of this policy's own in force before it). */
static double
slimgc_hysteresis(const slimgc_state *st, const slimgc_config *cfg)
{
	return st->calibrations > 1 ? cfg->hysteresis : 0;
}

static uint64_t
slimgc_threshold_of(const slimgc_row *rows, uint32_t pick)
{
	if (pick == SLIMGC_NONE)
		return SLIMGC_INFINITY;
	return pick == 0 ? 0 : rows[pick].bytes;
}

/* Writes why the table gives its threshold, st->proposed. */
static void
slimgc_explain_table(slimgc_state *st, const slimgc_config *cfg,
    const bellows_window *w, slimgc_rule rule, const char *why, pol_text *t)
{
	slimgc_rule other = rule == SLIMGC_ROBUST ? SLIMGC_PAPER
						  : SLIMGC_ROBUST;
	uint32_t n_alt, alt_missing;
	uint64_t alt;
	char size[64];

	slimgc_size_text(st->proposed, size, sizeof(size));
	pol_text_add(t, "%s: threshold %s", why, size);
	if (st->pick == SLIMGC_NONE &&
	    (rule == SLIMGC_PAPER || st->n_rows == 0)) {
		pol_text_add(t,
		    ": no size pays for compression (every ratio "
		    "t_c/(t_cq+t_pq) <= 1), every tensor goes raw");
	} else if (st->pick == SLIMGC_NONE) {
		const slimgc_row *r = &st->rows[st->n_rows - 1];

		pol_text_add(t,
		    ": the largest size, %s%s (%llu B), does not pay for "
		    "compression (ratio %.3g = %.4g/(%.4g+%.4g) ms <= 1), "
		    "every tensor goes raw",
		    w->layers[r->layer].name, r->layers > 1 ? " etc." : "",
		    (unsigned long long)r->bytes, r->ratio, r->t_c, r->t_cq,
		    r->t_pq);
	} else {
		const slimgc_row *r = &st->rows[st->pick];

		pol_text_add(t,
		    ", set by the row of %s%s (%llu B): ratio %.3g = "
		    "%.4g/(%.4g+%.4g) ms",
		    w->layers[r->layer].name, r->layers > 1 ? " etc." : "",
		    (unsigned long long)r->bytes, r->ratio, r->t_c, r->t_cq,
		    r->t_pq);
		if (st->pick == 0)
			pol_text_add(t,
			    ", the smallest size: every tensor "
			    "compressed");
	}
	if (rule == SLIMGC_ROBUST)
		pol_text_add(t,
		    "; rule robust (medians, every larger size above 1; "
		    "stricter than the paper)");
	else
		pol_text_add(t, "; rule paper (means, first size above 1)");
	pol_text_add(t, "; %u row%s from %u window%s", st->n_rows,
	    st->n_rows == 1 ? "" : "s", st->n_windows,
	    st->n_windows == 1 ? "" : "s");
	if (st->missing > 0)
		pol_text_add(t, ", %u size%s lacked samples", st->missing,
		    st->missing == 1 ? "" : "s");
	if (st->skipped > 0)
		pol_text_add(t, ", %u window%s beyond %u not kept", st->skipped,
		    st->skipped == 1 ? "" : "s", st->cap);
	/* Say when the hysteresis kept a size on its side. */
	if (slimgc_hysteresis(st, cfg) > 0) {
		uint64_t bare = slimgc_threshold_of(st->rows,
		    slimgc_pick(st->rows, st->n_rows, rule, 0, 0));

		if (bare != st->proposed) {
			char prev[64];

			slimgc_size_text(st->prev, prev, sizeof(prev));
			slimgc_size_text(bare, size, sizeof(size));
			pol_text_add(t,
			    "; hysteresis %g around 1 kept sizes on their "
			    "side of the previous threshold %s (without it: "
			    "%s)",
			    cfg->hysteresis, prev, size);
		}
	}
	/* Flag the deviation when the rules disagree on these samples. */
	n_alt = slimgc_build(st, other, (uint64_t)cfg->min_samples, st->alt,
	    &alt_missing, false);
	alt = n_alt == 0 ? st->proposed
			 : slimgc_threshold_of(st->alt,
			       slimgc_pick(st->alt, n_alt, other,
				   slimgc_hysteresis(st, cfg), st->prev));
	if (alt != st->proposed) {
		slimgc_size_text(alt, size, sizeof(size));
		pol_text_add(t, "; the %s rule would give %s",
		    other == SLIMGC_PAPER ? "paper" : "robust", size);
	}
}

/* ---- verification ------------------------------------------------------- */

/* Whether window i of a verification runs with the threshold (else with
 * every tensor raw). Pairs of windows alternate which kind goes first
 * (compressed, raw, raw, compressed, compressed, raw...), so a trend in
 * the step times (warm-up, a neighbour's load) favours neither kind. */
static bool
slimgc_verify_compressed(uint32_t i)
{
	return (i % 2 == 0) != (i / 2 % 2 == 1);
}

/* Windows of window i's kind from i on before the kind changes, within
 * `total`. */
static uint32_t
slimgc_verify_run(uint32_t i, uint32_t total)
{
	uint32_t n = 0;

	while (i + n < total &&
	    slimgc_verify_compressed(i + n) == slimgc_verify_compressed(i))
		n++;
	return n;
}

/* Whether window w measures the verification's setting `comp`: no
 * calibration step in it, every step of it after the decision that set
 * the setting applied, a step time, and, compressed, something sent
 * compressed (the gate not off and, when the trainer reports floats,
 * fewer sent than raw: a window that sent as many was raw whatever the
 * threshold), raw, nothing. */
static bool
slimgc_verify_counts(const slimgc_verify *v, const bellows_window *w, bool comp)
{
	if (w->calibrate_until > w->first_step || w->first_step < v->from)
		return false;
	if (!(w->step_ms_median > 0 && isfinite(w->step_ms_median)))
		return false;
	if (comp)
		return !w->compression_off &&
		    (w->floats_raw == 0 || w->floats_sent < w->floats_raw);
	return w->floats_sent >= w->floats_raw;
}

/* Starts verifying st->proposed with its own windows first, counted from
 * where the decision of window w applies. */
static void
slimgc_verify_start(slimgc_state *st, const slimgc_config *cfg,
    const bellows_window *w, pol_text *t)
{
	slimgc_verify *v = &st->verify;

	v->running = true;
	v->threshold = st->proposed;
	v->started = w->window;
	v->index = 0;
	v->n_comp = 0;
	v->n_raw = 0;
	v->from = w->last_step + 1 + st->lag;
	st->threshold = v->threshold;
	pol_text_add(t,
	    "; verifying it on the real path: whole steps of %lld window%s "
	    "with it against as many with every tensor raw",
	    (long long)cfg->verify_windows,
	    cfg->verify_windows == 1 ? "" : "s");
}

/* Ends the running verification with its verdict: the medians it
 * compared and whether the threshold stays (else every tensor raw). */
static void
slimgc_verify_verdict(slimgc_state *st, double comp_ms, double raw_ms,
    bool kept)
{
	slimgc_verify *v = &st->verify;

	v->running = false;
	v->judged = true;
	v->judged_threshold = v->threshold;
	v->comp_ms = comp_ms;
	v->raw_ms = raw_ms;
	v->kept = kept;
	st->threshold = kept ? v->threshold : SLIMGC_INFINITY;
}

/* Ends the running verification: keeps its threshold when the
 * compressed windows' median step is below the raw ones' by more than
 * verify_margin, else sends every tensor raw. A tie goes raw. */
static void
slimgc_verify_judge(slimgc_state *st, const slimgc_config *cfg, pol_text *t)
{
	slimgc_verify *v = &st->verify;
	uint32_t n = v->n_comp < v->n_raw ? v->n_comp : v->n_raw;
	double comp = slimgc_median(v->comp, v->n_comp);
	double raw = slimgc_median(v->raw, v->n_raw);
	char size[64];

	slimgc_verify_verdict(st, comp, raw,
	    comp < raw * (1 - cfg->verify_margin));
	slimgc_size_text(v->threshold, size, sizeof(size));
	pol_text_sep(t);
	pol_text_add(t,
	    "verified on the real path: compressed %.3g ms vs raw %.3g ms "
	    "per step (x%.3g): ",
	    v->comp_ms, v->raw_ms, v->comp_ms / v->raw_ms);
	if (v->kept)
		pol_text_add(t, "threshold %s kept, faster by more than %g%%",
		    size, 100 * cfg->verify_margin);
	else
		pol_text_add(t,
		    "every tensor raw; threshold %s not faster by more than "
		    "%g%%",
		    size, 100 * cfg->verify_margin);
	pol_text_add(t, ", median of %u window%s each", n, n == 1 ? "" : "s");
}

/* Remembers window w when every tensor of it went raw, as the floats
 * the trainer reports show (a trainer that reports none gives no such
 * evidence), with no calibration step in it and a step time. */
static void
slimgc_seen_note(slimgc_seen_raw *s, const bellows_window *w)
{
	if (w->calibrate_until > w->first_step ||
	    !(w->step_ms_median > 0 && isfinite(w->step_ms_median)) ||
	    w->floats_raw == 0 || w->floats_sent < w->floats_raw)
		return;
	if (s->n == SLIMGC_SEEN_RAW) {
		memmove(s->window, s->window + 1,
		    (SLIMGC_SEEN_RAW - 1) * sizeof(s->window[0]));
		memmove(s->step_ms, s->step_ms + 1,
		    (SLIMGC_SEEN_RAW - 1) * sizeof(s->step_ms[0]));
		s->n--;
	}
	s->window[s->n] = w->window;
	s->step_ms[s->n] = w->step_ms_median;
	s->n++;
}

/* The shortcut: after the verification's first compressed window, when
 * the job ran raw windows at most SLIMGC_RAW_AGE windows before the
 * verification started and that window beat their median by more than
 * verify_decisive, judges at once (kept) without raw windows of its own.
 * Returns whether it judged. A window from before is no alternated
 * measure (warm-up favours compression), hence a margin far wider than
 * verify_margin: it settles only what one window plainly shows. */
static bool
slimgc_verify_decisive(slimgc_state *st, const slimgc_config *cfg, pol_text *t)
{
	slimgc_verify *v = &st->verify;
	double raw[SLIMGC_SEEN_RAW], comp, before;
	uint32_t n = 0;
	char size[64];

	if (cfg->verify_decisive >= 1 || v->n_comp != 1 || v->n_raw != 0)
		return false;
	for (uint32_t i = 0; i < st->seen.n; i++)
		if (st->seen.window[i] <= v->started &&
		    st->seen.window[i] + SLIMGC_RAW_AGE >= v->started)
			raw[n++] = st->seen.step_ms[i];
	if (n == 0)
		return false;
	comp = v->comp[0];
	before = slimgc_median(raw, n);
	if (!(comp < before * (1 - cfg->verify_decisive)))
		return false;
	slimgc_verify_verdict(st, comp, before, true);
	slimgc_size_text(v->threshold, size, sizeof(size));
	pol_text_sep(t);
	pol_text_add(t,
	    "verified on the real path: compressed %.3g ms vs raw %.3g ms "
	    "per step (x%.3g) in the %u raw window%s just before: threshold "
	    "%s kept, faster by more than %g%% (verify_decisive), no raw "
	    "window of its own",
	    comp, before, comp / before, n, n == 1 ? "" : "s", size,
	    100 * cfg->verify_decisive);
	return true;
}

/* Measures window w for the running verification when it ran entirely
 * under the setting in force, then switches the setting or judges. */
static void
slimgc_verify_window(slimgc_state *st, const slimgc_config *cfg,
    const bellows_window *w, pol_text *t)
{
	slimgc_verify *v = &st->verify;
	uint32_t total = 2 * (uint32_t)cfg->verify_windows, run;
	char size[64];
	bool comp;

	/* A reload may have lowered verify_windows below what is done. */
	if (v->index >= total) {
		slimgc_verify_judge(st, cfg, t);
		return;
	}
	comp = slimgc_verify_compressed(v->index);
	if (!slimgc_verify_counts(v, w, comp))
		return;
	if (comp && v->n_comp < SLIMGC_VERIFY_MAX)
		v->comp[v->n_comp++] = w->step_ms_median;
	else if (!comp && v->n_raw < SLIMGC_VERIFY_MAX)
		v->raw[v->n_raw++] = w->step_ms_median;
	v->index++;
	if (v->index >= total) {
		slimgc_verify_judge(st, cfg, t);
		return;
	}
	if (slimgc_verify_compressed(v->index) == comp)
		return;
	if (comp && slimgc_verify_decisive(st, cfg, t))
		return;
	v->from = w->last_step + 1 + st->lag;
	st->threshold = comp ? SLIMGC_INFINITY : v->threshold;
	run = slimgc_verify_run(v->index, total);
	slimgc_size_text(v->threshold, size, sizeof(size));
	pol_text_sep(t);
	pol_text_add(t,
	    "verification of threshold %s: window %llu ran %s at %.3g ms per "
	    "step; now %s for %u window%s",
	    size, (unsigned long long)w->window,
	    comp ? "it" : "every tensor raw", w->step_ms_median,
	    comp ? "every tensor raw" : "the threshold", run,
	    run == 1 ? "" : "s");
}

/* Puts the table's threshold st->proposed in force: as it is with
 * verify off or when it sends every tensor raw; otherwise through a
 * verification, started anew when `again` (a new calibration), else only
 * when none of this very threshold runs or is over (whose verdict then
 * stands). */
static void
slimgc_settle(slimgc_state *st, const slimgc_config *cfg,
    const bellows_window *w, bool again, pol_text *t)
{
	slimgc_verify *v = &st->verify;

	if (!cfg->verify || st->proposed == SLIMGC_INFINITY) {
		v->running = false;
		st->threshold = st->proposed;
		return;
	}
	if (!again && v->running && v->threshold == st->proposed)
		return;
	if (!again && !v->running && v->judged &&
	    v->judged_threshold == st->proposed) {
		st->threshold = v->kept ? st->proposed : SLIMGC_INFINITY;
		if (!v->kept)
			pol_text_add(t,
			    "; verified on the real path before: every "
			    "tensor raw");
		return;
	}
	slimgc_verify_start(st, cfg, w, t);
}

/* Finishes the running calibration: builds the table and sets the
 * threshold, or asks again when it gave no row. */
static void
slimgc_finish(slimgc_state *st, const slimgc_config *cfg, slimgc_rule rule,
    const bellows_window *w, bellows_proposal *out, pol_text *t)
{
	st->phase = SLIMGC_IDLE;
	st->done_until = st->until > st->done_until ? st->until
						    : st->done_until;
	st->over = 0;
	st->n_rows = slimgc_build(st, rule, (uint64_t)cfg->min_samples,
	    st->rows, &st->missing, true);
	pol_text_sep(t);
	if (st->n_rows == 0) {
		st->have_table = false;
		st->attempts++;
		pol_text_add(t,
		    "calibration over at window %llu gave no row (no size "
		    "had raw and compressed times from %lld send%s each; %u "
		    "size%s lacked samples): threshold kept at %llu B",
		    (unsigned long long)w->window, (long long)cfg->min_samples,
		    cfg->min_samples == 1 ? "" : "s", st->missing,
		    st->missing == 1 ? "" : "s",
		    (unsigned long long)out->size_threshold);
		if (st->attempts <= (uint64_t)cfg->retries) {
			st->phase = SLIMGC_ASKED;
			st->asked_window = w->window;
			st->asked_last = w->last_step;
			st->asked_steps = (uint64_t)cfg->calibration_steps;
			out->calibrate_steps = st->asked_steps;
			pol_text_add(t,
			    "; calibrating again for %lld steps (%u/%lld)",
			    (long long)cfg->calibration_steps, st->attempts,
			    (long long)cfg->retries);
		}
		return;
	}
	st->attempts = 0;
	st->have_table = true;
	st->table_window = w->window;
	st->calibrations++;
	st->prev = st->proposed;
	st->pick = slimgc_pick(st->rows, st->n_rows, rule,
	    slimgc_hysteresis(st, cfg), st->prev);
	st->proposed = slimgc_threshold_of(st->rows, st->pick);
	pol_text_add(t, "calibration %u over at window %llu", st->calibrations,
	    (unsigned long long)w->window);
	slimgc_explain_table(st, cfg, w, rule, "", t);
	slimgc_settle(st, cfg, w, true, t);
	out->size_threshold = st->threshold;
}

static void
slimgc_ask(slimgc_state *st, const slimgc_config *cfg, const bellows_window *w,
    bellows_proposal *out, pol_text *t, const char *why)
{
	st->phase = SLIMGC_ASKED;
	st->asked_window = w->window;
	st->asked_last = w->last_step;
	st->asked_steps = (uint64_t)cfg->calibration_steps;
	st->over = 0;
	out->calibrate_steps = st->asked_steps;
	pol_text_sep(t);
	pol_text_add(t,
	    "%s: calibrating for %lld steps (every tensor compressed on even "
	    "steps, raw on odd ones)",
	    why, (long long)cfg->calibration_steps);
}

/* The window's steps (some of them) run under the calibration asked. */
static bool
slimgc_calibrating(const slimgc_state *st, const bellows_window *w)
{
	return w->calibrate_until > w->first_step &&
	    w->calibrate_until > st->done_until;
}

/* The first window of a calibration: the apply step of the decision
 * that asked for it tells how far behind a window's end decisions apply,
 * which is what keeping it going through later decisions needs. */
static void
slimgc_start(slimgc_state *st, const bellows_window *w)
{
	uint64_t apply;

	st->phase = SLIMGC_RUNNING;
	st->until = w->calibrate_until;
	st->target = w->calibrate_until;
	st->n_windows = 0;
	st->skipped = 0;
	st->lag = 0;
	if (st->asked_steps > 0 && w->calibrate_until >= st->asked_steps) {
		apply = w->calibrate_until - st->asked_steps;
		if (apply > st->asked_last + 1)
			st->lag = apply - st->asked_last - 1;
	}
}

/* Every decision carries its own calibration or none, and the host
 * decides after every window: asks the next decision for the steps still
 * missing, counted from where it will apply, so the calibration runs on
 * to its end. */
static void
slimgc_continue(slimgc_state *st, const bellows_window *w,
    bellows_proposal *out, pol_text *t)
{
	uint64_t apply = w->last_step + 1 + st->lag;

	if (apply >= st->target)
		return;
	out->calibrate_steps = st->target - apply;
	pol_text_sep(t);
	pol_text_add(t, "calibrating on to step %llu (%u window%s collected)",
	    (unsigned long long)st->target, st->n_windows,
	    st->n_windows == 1 ? "" : "s");
}

/* ---- drift -------------------------------------------------------------- */

/* The median over tensors of (this window's time / the calibration's),
 * raw times where there are any, else compressed ones; NAN when neither
 * can be compared. */
static double
slimgc_measure_drift(slimgc_state *st, const bellows_window *w, bool *ret_comp,
    uint32_t *ret_n)
{
	for (int pass = 0; pass < 2; pass++) {
		size_t k = 0;

		for (uint32_t l = 0; l < st->n_layers; l++) {
			const bellows_window_layer *wl = &w->layers[l];
			double now = slimgc_time(
			    pass == 0 ? wl->comm_raw_ms : wl->comm_comp_ms);
			double then = pass == 0 ? st->calib_raw[l]
						: st->calib_comp[l];

			if (!st->selected[l] || isnan(now) ||
			    !(then > 0 && isfinite(then)))
				continue;
			st->scratch[k++] = now / then;
		}
		if (k == 0)
			continue;
		*ret_comp = pass == 1;
		*ret_n = (uint32_t)k;
		return slimgc_median(st->scratch, k);
	}
	return NAN;
}

static void
slimgc_check_drift(slimgc_state *st, const slimgc_config *cfg,
    const bellows_window *w, bellows_proposal *out, pol_text *t)
{
	uint32_t n = 0;
	bool comp = false;
	double m;
	char why[160];

	st->drift = NAN;
	if (!st->have_table)
		return;
	m = slimgc_measure_drift(st, w, &comp, &n);
	if (isnan(m)) {
		st->over = 0;
		return;
	}
	st->drift = m - 1;
	st->drift_comp = comp;
	if (cfg->recalibrate_drift <= 0 ||
	    !(fabs(st->drift) > cfg->recalibrate_drift)) {
		st->over = 0;
		return;
	}
	if (++st->over < (uint64_t)cfg->drift_windows)
		return;
	snprintf(why, sizeof(why),
	    "window %llu: %s times drifted %+.1f%% from calibration %u "
	    "(median over %u tensor%s, %lld window%s over %g%%)",
	    (unsigned long long)w->window, comp ? "compressed" : "raw",
	    100 * st->drift, st->calibrations, n, n == 1 ? "" : "s",
	    (long long)cfg->drift_windows, cfg->drift_windows == 1 ? "" : "s",
	    100 * cfg->recalibrate_drift);
	st->n_windows = 0;
	st->skipped = 0;
	slimgc_ask(st, cfg, w, out, t, why);
}

/* ---- the policy --------------------------------------------------------- */

/* Adds the metrics: the threshold, the table's size, the drift, the
 * last verification's step times and verdict, and the ratios of the rows
 * nearest the one that set the threshold, in the room the job's metrics
 * leave (reserved whether they come or not, so that the rows shown do
 * not move when the drift does). */
static void
slimgc_metrics(const slimgc_state *st, bellows_proposal *out)
{
	uint32_t room = BELLOWS_METRICS_MAX - SLIMGC_JOB_METRICS;
	uint32_t from = 0, centre;

	if (st->calibrations == 0 && !st->have_table)
		return;
	pol_metric_add(out, "threshold_bytes", -1, (double)st->threshold);
	pol_metric_add(out, "calib_rows", -1, (double)st->n_rows);
	if (!isnan(st->drift))
		pol_metric_add(out, "raw_drift", -1, st->drift);
	if (st->verify.judged) {
		room -= SLIMGC_VERIFY_METRICS;
		pol_metric_add(out, "verify_comp_ms", -1, st->verify.comp_ms);
		pol_metric_add(out, "verify_raw_ms", -1, st->verify.raw_ms);
		pol_metric_add(out, "verify_kept", -1, st->verify.kept ? 1 : 0);
	}
	if (!st->have_table)
		return;
	centre = st->pick != SLIMGC_NONE ? st->pick : st->n_rows;
	if (st->n_rows > room) {
		from = centre > room / 2 ? centre - room / 2 : 0;
		if (from + room > st->n_rows)
			from = st->n_rows - room;
	}
	for (uint32_t i = from; i < st->n_rows && i < from + room; i++)
		pol_metric_add(out, "ratio", (int32_t)st->rows[i].layer,
		    st->rows[i].ratio);
}

/* After a reload: picks the threshold again from the table kept, under
 * the new rule and min_samples, and puts it in force (through a
 * verification unless one of it runs or is over, or verify is off). */
static void
slimgc_repick(slimgc_state *st, const slimgc_config *cfg, slimgc_rule rule,
    const bellows_window *w, bellows_proposal *out, pol_text *t)
{
	uint64_t old = st->threshold, old_proposed = st->proposed;
	char verify[BELLOWS_REASON_MAX];
	pol_text vt;

	st->n_rows = slimgc_build(st, rule, (uint64_t)cfg->min_samples,
	    st->rows, &st->missing, true);
	st->pick = slimgc_pick(st->rows, st->n_rows, rule,
	    slimgc_hysteresis(st, cfg), st->prev);
	if (st->n_rows == 0) {
		/* min_samples rose above every size's sends. */
		st->have_table = false;
		pol_text_add(t,
		    "reloaded: no size of calibration %u has %lld raw and "
		    "compressed sends: threshold kept at %llu B",
		    st->calibrations, (long long)cfg->min_samples,
		    (unsigned long long)old);
		return;
	}
	st->proposed = slimgc_threshold_of(st->rows, st->pick);
	pol_text_init(&vt, verify, sizeof(verify));
	slimgc_settle(st, cfg, w, false, &vt);
	if (st->threshold == old && out->size_threshold == old &&
	    st->proposed == old_proposed && vt.used == 0)
		return;
	out->size_threshold = st->threshold;
	slimgc_explain_table(st, cfg, w, rule,
	    "reloaded: calibration table picked again", t);
	pol_text_add(t, "%s", verify);
}

static int
slimgc_on_window(void *state, const void *config, const bellows_window *w,
    bellows_proposal *out)
{
	slimgc_state *st = state;
	const slimgc_config *cfg = config;
	pol_text t;
	slimgc_rule rule;
	bool first, calibrating;
	int r;

	if ((r = slimgc_config_check(cfg, &rule)) != 0)
		return r;
	if (w->n_layers != st->n_layers || out->n_layers != st->n_layers)
		return BELLOWS_EMISMATCH;
	pol_text_init(&t, out->reason, sizeof(out->reason));
	for (uint32_t l = 0; l < st->n_layers; l++)
		st->selected[l] = w->layers[l].selected;
	first = !st->started;
	st->started = true;
	slimgc_seen_note(&st->seen, w);

	if (st->repick && st->have_table && st->phase == SLIMGC_IDLE)
		slimgc_repick(st, cfg, rule, w, out, &t);
	st->repick = false;

	calibrating = slimgc_calibrating(st, w);
	if (calibrating && st->phase == SLIMGC_IDLE && !first) {
		/* A calibration not asked for: a late decision of one that
		 * is over. Not collected. */
		st->done_until = w->calibrate_until;
		calibrating = false;
	}
	if (calibrating) {
		if (st->phase != SLIMGC_RUNNING)
			slimgc_start(st, w);
		if (w->calibrate_until > st->until)
			st->until = w->calibrate_until;
		slimgc_collect(st, w);
		if (w->last_step + 1 >= st->target)
			slimgc_finish(st, cfg, rule, w, out, &t);
		else
			slimgc_continue(st, w, out, &t);
	} else if (st->phase == SLIMGC_RUNNING) {
		/* Over: its last steps ran at the start of this window,
		 * after the decision that no longer carried it, or another
		 * decision cut it short. What was collected is the table. */
		slimgc_finish(st, cfg, rule, w, out, &t);
	} else if (first) {
		st->n_windows = 0;
		slimgc_ask(st, cfg, w, out, &t, "first window");
	} else if (st->phase == SLIMGC_ASKED &&
	    w->window >= st->asked_window + (uint64_t)cfg->start_timeout) {
		char why[128];

		snprintf(why, sizeof(why),
		    "the calibration asked at window %llu did not start "
		    "within %lld windows",
		    (unsigned long long)st->asked_window,
		    (long long)cfg->start_timeout);
		st->n_windows = 0;
		slimgc_ask(st, cfg, w, out, &t, why);
	} else if (st->phase == SLIMGC_IDLE) {
		if (st->verify.running)
			slimgc_verify_window(st, cfg, w, &t);
		slimgc_check_drift(st, cfg, w, out, &t);
	}
	/* Keep the threshold decided, whatever the state in force says
	 * (it is this policy's knob). */
	if (st->calibrations > 0 && out->size_threshold != st->threshold) {
		char size[64];

		out->size_threshold = st->threshold;
		slimgc_size_text(st->threshold, size, sizeof(size));
		if (t.used == 0)
			pol_text_add(&t, "threshold %s restored", size);
	}
	slimgc_metrics(st, out);
	return 0;
}

static int
slimgc_on_event(void *state, const void *config, const bellows_event *ev)
{
	slimgc_state *st = state;
	slimgc_rule rule;
	int r;

	if (ev->type != BELLOWS_EVENT_RELOAD)
		return 0;
	if ((r = slimgc_config_check(config, &rule)) != 0)
		return r;
	/* The calibration's samples stay: the next window picks the
	 * threshold again under the new rule and min_samples. */
	st->repick = st->have_table;
	return 0;
}

const bellows_policy_ops pol_slimgc_ops = {
	.abi_version = BELLOWS_POLICY_ABI,
	.name = "slimgc",
	.stats_read = BELLOWS_STAT_READ(comm_raw_ms) |
	    BELLOWS_STAT_READ(comm_raw_n) | BELLOWS_STAT_READ(comm_comp_ms) |
	    BELLOWS_STAT_READ(comm_comp_n) | BELLOWS_STAT_READ(codec_ms) |
	    BELLOWS_STATS_DECLARED,
	.summary = "tensors below a measured size go raw, larger ones "
		   "compressed (SlimGC)",
	.knobs = BELLOWS_KNOB_SIZE_THRESHOLD,
	.config_size = sizeof(slimgc_config),
	.state_size = sizeof(slimgc_state),
	.params = slimgc_params,
	.init = slimgc_init,
	.on_window = slimgc_on_window,
	.fini = slimgc_fini,
	.on_event = slimgc_on_event,
};
