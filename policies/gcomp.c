/* gcomp - GComp's Huffman table of gradient exponents, rebuilt by
 * bellowsd from what the ranks' gradients look like.
 *
 * GComp (the paper's exponent coder) entropy-codes the float32 exponent
 * of every gradient value with a length-limited canonical Huffman code
 * that every rank must share. The ranks report, per window and per layer
 * they were asked to measure (BELLOWS_LAYER_EXP_HIST), the 256-bin
 * histogram of their gradients' biased exponents; bellowsd sums them over
 * the ranks (exp_hist in the window). This policy owns the codec_table
 * knob: it sums the histograms of its selected layers and builds the
 * table with com_huff_build (common/huffman.h: codes of at most
 * max_code_bits bits, every longer or unseen exponent sent as the escape
 * code followed by its 8 raw bits), the same builder `bellows codec
 * table` and every rank's codec use.
 *
 * When: the first window with a histogram builds version 1. After that a
 * new table is built when `every_steps` steps have passed since the table
 * in force was built (the paper rebuilds every 50 iterations), or sooner
 * when the table in force codes the window's exponents more than
 * `rebuild_bits` bits per exponent above their entropy (the cross-entropy
 * of the histogram under the table's code lengths minus its entropy, the
 * bound no code beats): whichever comes first. A rebuilt table that is the
 * same code as the one in force (same lengths and escape) is not sent:
 * the version in force stays and the cadence restarts. Otherwise the
 * version increments and the table goes into the decision, so that every
 * rank switches at the decision's apply step (the agents keep the
 * previous table for data encoded before it).
 *
 * The reason gives the version, what triggered it, and the bits per
 * exponent of the window's histogram under the old table and the new one
 * against the entropy. Metrics (recorded in the history, shown by
 * `bellows top`), for the table in force after the window: per layer with
 * a histogram, exp_bits (bits per exponent of that layer's histogram) and
 * bits_per_value (bits per value at level 0, lossless: the exponent's
 * code, and for a non-zero exponent 2 level bits, the sign and 23
 * mantissa bits); for the job, exp_bits, entropy_bits and table_version.
 *
 * Pure: the same windows give the same tables in bellowsd and in `bellows
 * replay --db`.
 */
#include "policies.h"

#include "common/huffman.h"
#include "metric.h"
#include "policies/pol_text.h"

#include <bellows/error.h>

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* Bits a non-zero value costs at level 0 besides its exponent's code: the
 * 2-bit level, the sign and the 23 mantissa bits. */
#define GCOMP_LEVEL0_BITS 26

typedef struct gcomp_config {
	int64_t every_steps;   /* steps between two rebuilds at most */
	double rebuild_bits;   /* cross-entropy over entropy that rebuilds
				* sooner, bits per exponent */
	int64_t max_code_bits; /* longest code, the paper's n_theta */
	int64_t min_values;    /* exponents a window must hold to build */
} gcomp_config;

static const bellows_param gcomp_params[] = {
	{ .name = "every_steps",
	    .type = BELLOWS_PARAM_INT,
	    .offset = offsetof(gcomp_config, every_steps),
	    .min = 1,
	    .max = 1e12,
	    .def = 50,
	    .help = "rebuild the table at least every this many steps (the "
		    "paper's 50 iterations)" },
	{ .name = "rebuild_bits",
	    .type = BELLOWS_PARAM_DOUBLE,
	    .offset = offsetof(gcomp_config, rebuild_bits),
	    .min = 0,
	    .max = 64,
	    .def = 0.1,
	    .help = "rebuild sooner when the table in force codes a window's "
		    "exponents this many bits per exponent above their "
		    "entropy" },
	{ .name = "max_code_bits",
	    .type = BELLOWS_PARAM_INT,
	    .offset = offsetof(gcomp_config, max_code_bits),
	    .min = 1,
	    .max = COM_HUFF_MAX_BITS,
	    .def = COM_HUFF_DEFAULT_BITS,
	    .help = "longest code; longer ones become the escape code and the "
		    "raw 8-bit exponent" },
	{ .name = "min_values",
	    .type = BELLOWS_PARAM_INT,
	    .offset = offsetof(gcomp_config, min_values),
	    .min = 1,
	    .max = 1e18,
	    .def = 1,
	    .help = "exponents a window's summed histogram must hold before "
		    "a table is built from it" },
	{ .name = NULL },
};

typedef struct gcomp_state {
	bool have;            /* a table is in force */
	com_huff_table table; /* the table in force */
	uint64_t built_step;  /* the step after the window it was built
			       * from: the cadence counts from there */
	uint64_t hist[256];   /* the window's summed histogram */
	uint64_t total;       /* its values */
	uint32_t n_hist;      /* selected layers that had one */
} gcomp_state;

/* Sums the histograms of the selected layers into s->hist. */
static void
gcomp_sum(gcomp_state *s, const bellows_window *w)
{
	memset(s->hist, 0, sizeof(s->hist));
	s->total = 0;
	s->n_hist = 0;
	for (uint32_t l = 0; l < w->n_layers; l++) {
		const bellows_window_layer *x = &w->layers[l];

		if (!x->selected || x->exp_hist == NULL ||
		    x->exp_hist_len != 256)
			continue;
		s->n_hist++;
		for (int b = 0; b < 256; b++) {
			uint64_t v = x->exp_hist[b];

			s->hist[b] = v > UINT64_MAX - s->hist[b]
			    ? UINT64_MAX
			    : s->hist[b] + v;
			s->total = v > UINT64_MAX - s->total ? UINT64_MAX
							     : s->total + v;
		}
	}
}

/* Bits per value of hist at level 0 under t: the exponent's code, plus
 * GCOMP_LEVEL0_BITS for every non-zero exponent. 0 for an empty one. */
static double
gcomp_value_bits(const com_huff_table *t, const uint64_t *hist)
{
	double n = 0, nonzero = 0;

	for (int b = 0; b < 256; b++) {
		n += (double)hist[b];
		if (b != 0)
			nonzero += (double)hist[b];
	}
	if (n == 0)
		return 0;
	return com_huff_bits(t, hist) + GCOMP_LEVEL0_BITS * nonzero / n;
}

/* The metrics of the table in force after the window. */
static void
gcomp_metrics(const gcomp_state *s, const bellows_window *w,
    bellows_proposal *out)
{
	if (!s->have)
		return;
	for (uint32_t l = 0; l < w->n_layers; l++) {
		const bellows_window_layer *x = &w->layers[l];

		if (!x->selected || x->exp_hist == NULL ||
		    x->exp_hist_len != 256)
			continue;
		pol_metric_add(out, "exp_bits", (int32_t)l,
		    com_huff_bits(&s->table, x->exp_hist));
		pol_metric_add(out, "bits_per_value", (int32_t)l,
		    gcomp_value_bits(&s->table, x->exp_hist));
	}
	if (s->total > 0) {
		pol_metric_add(out, "exp_bits", -1,
		    com_huff_bits(&s->table, s->hist));
		pol_metric_add(out, "entropy_bits", -1,
		    com_huff_entropy(s->hist));
	}
	pol_metric_add(out, "table_version", -1, (double)s->table.version);
}

/* Exponents t gives a code of their own (not escaped). */
static uint32_t
gcomp_coded(const com_huff_table *t)
{
	uint32_t n = 0;

	for (int b = 0; b < 256; b++)
		n += t->len[b] > 0;
	return n;
}

/* True when two tables are the same code. */
static bool
gcomp_same_code(const com_huff_table *a, const com_huff_table *b)
{
	return a->max_bits == b->max_bits && a->esc_len == b->esc_len &&
	    memcmp(a->len, b->len, sizeof(a->len)) == 0;
}

static int
gcomp_init(void *state, const void *config, const bellows_job_info *job,
    bellows_proposal *initial)
{
	gcomp_state *s = state;

	(void)config;
	(void)job;
	memset(s, 0, sizeof(*s));
	/* The table in force before any window: none (the codec sends
	 * exponents raw until the first table arrives). */
	initial->codec_table_len = 0;
	return 0;
}

static int
gcomp_on_window(void *state, const void *config, const bellows_window *w,
    bellows_proposal *out)
{
	const gcomp_config *cfg = config;
	gcomp_state *s = state;
	uint64_t next = w->last_step + 1;
	uint64_t since = s->have && next > s->built_step ? next - s->built_step
							 : 0;
	double entropy, old_bits = NAN, new_bits;
	bool cadence, drift;
	com_huff_table t;
	pol_text text;
	int rc;

	gcomp_sum(s, w);
	if (s->total == 0 || s->total < (uint64_t)cfg->min_values) {
		gcomp_metrics(s, w, out);
		return 0;
	}
	entropy = com_huff_entropy(s->hist);
	if (s->have)
		old_bits = com_huff_bits(&s->table, s->hist);
	cadence = s->have && since >= (uint64_t)cfg->every_steps;
	drift = s->have && old_bits - entropy > cfg->rebuild_bits;
	if (s->have && !cadence && !drift) {
		gcomp_metrics(s, w, out);
		return 0;
	}
	rc = com_huff_build(s->hist, (unsigned)cfg->max_code_bits,
	    s->have ? s->table.version + 1 : 1, &t);
	if (rc != 0)
		return rc;
	new_bits = com_huff_bits(&t, s->hist);
	s->built_step = next;
	if (s->have && gcomp_same_code(&s->table, &t)) {
		/* Nothing to send: the code in force is already this one. */
		gcomp_metrics(s, w, out);
		return 0;
	}
	if ((rc = com_huff_write(&t, out->codec_table,
		 BELLOWS_CODEC_TABLE_MAX)) != 0)
		return rc;
	out->codec_table_len = COM_HUFF_TABLE_BYTES;
	pol_text_init(&text, out->reason, sizeof(out->reason));
	if (!s->have)
		pol_text_add(&text,
		    "exponent table v%u from the first histogram: %.3f "
		    "bits/exponent",
		    t.version, new_bits);
	else if (drift)
		pol_text_add(&text,
		    "exponent table v%u: v%u codes %.3f bits/exponent above "
		    "the entropy (rebuild_bits %g): %.3f -> %.3f bits/exponent",
		    t.version, s->table.version, old_bits - entropy,
		    cfg->rebuild_bits, old_bits, new_bits);
	else
		pol_text_add(&text,
		    "exponent table v%u: %llu steps since v%u (every_steps "
		    "%lld): %.3f -> %.3f bits/exponent",
		    t.version, (unsigned long long)since, s->table.version,
		    (long long)cfg->every_steps, old_bits, new_bits);
	pol_text_add(&text, ", entropy %.3f", entropy);
	pol_text_sep(&text);
	pol_text_add(&text,
	    "%u exponents coded in at most %lld bits, escape %u + 8 bits",
	    gcomp_coded(&t), (long long)cfg->max_code_bits,
	    (unsigned)t.esc_len);
	pol_text_sep(&text);
	pol_text_add(&text, "%llu values of %u layer%s",
	    (unsigned long long)s->total, s->n_hist, s->n_hist == 1 ? "" : "s");
	s->table = t;
	s->have = true;
	gcomp_metrics(s, w, out);
	return 0;
}

const bellows_policy_ops pol_gcomp_ops = {
	.abi_version = BELLOWS_POLICY_ABI,
	.name = "gcomp",
	.stats_read = BELLOWS_STATS_DECLARED,
	.summary = "GComp's Huffman table of gradient exponents, rebuilt from "
		   "the ranks' summed exponent histograms",
	.knobs = BELLOWS_KNOB_CODEC_TABLE,
	.config_size = sizeof(gcomp_config),
	.state_size = sizeof(gcomp_state),
	.params = gcomp_params,
	.init = gcomp_init,
	.on_window = gcomp_on_window,
};
