/* exponent_table - an out-of-tree bellows policy owning the codec_table
 * knob, built as a plug-in.
 *
 * Codecs such as GComp entropy-code the exponents of the gradient values
 * with a table every rank must share, rebuilt now and then from what the
 * gradients look like. This policy shows the mechanics: every `every`
 * windows it rebuilds an opaque table from the window's per-layer
 * gradient norms and proposes it; bellowsd sends it to every rank in the
 * decision, and the agents hand it to the codec
 * (bellows_agent_codec_table, Agent.codec_table()) from the same step on.
 *
 * The table (little-endian):
 *   bytes 0..3   "BXT1"
 *   bytes 4..11  the window it was built from (uint64)
 *   bytes 12..13 n, the layers that follow (uint16)
 *   n bytes      per layer, the base-2 exponent of its gradient norm + 128
 *                (clamped to 1..255; 0 = no norm, or not selected)
 * at most BELLOWS_CODEC_TABLE_MAX bytes (layers beyond are left out).
 *
 * Build: see meson.build next to this file; any shared object exporting
 * bellows_policy_entry works.
 */
#include <bellows/error.h>
#include <bellows/policy.h>

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define XT_HEADER 14 /* magic, window, count */

typedef struct xt_config {
	int64_t every; /* windows between two rebuilds */
} xt_config;

static const bellows_param xt_params[] = {
	{ .name = "every",
	    .type = BELLOWS_PARAM_INT,
	    .offset = offsetof(xt_config, every),
	    .min = 1,
	    .max = 1000000,
	    .def = 1,
	    .help = "rebuild the table every this many windows" },
	{ .name = NULL },
};

/* The exponent byte of a norm. */
static uint8_t
xt_exponent(double norm)
{
	int e;

	if (!(norm > 0) || !isfinite(norm))
		return 0;
	(void)frexp(norm, &e);
	e += 128;
	return (uint8_t)(e < 1 ? 1 : e > 255 ? 255 : e);
}

static int
xt_init(void *state, const void *config, const bellows_job_info *job,
    bellows_proposal *initial)
{
	(void)state;
	(void)config;
	(void)job;
	/* No table until the first window has been seen. */
	initial->codec_table_len = 0;
	return 0;
}

static int
xt_on_window(void *state, const void *config, const bellows_window *w,
    bellows_proposal *out)
{
	const xt_config *cfg = config;
	uint32_t n = w->n_layers;
	uint8_t *t = out->codec_table;

	(void)state;
	if (w->window % (uint64_t)cfg->every != 0)
		return 0; /* the table in force stays */
	if (n > BELLOWS_CODEC_TABLE_MAX - XT_HEADER)
		n = BELLOWS_CODEC_TABLE_MAX - XT_HEADER;
	memcpy(t, "BXT1", 4);
	for (int i = 0; i < 8; i++)
		t[4 + i] = (uint8_t)(w->window >> (8 * i));
	t[12] = (uint8_t)n;
	t[13] = (uint8_t)(n >> 8);
	for (uint32_t l = 0; l < n; l++)
		t[XT_HEADER + l] = bellows_window_layer_at(w, l)->selected
		    ? xt_exponent(bellows_window_layer_at(w, l)->grad_norm)
		    : 0;
	out->codec_table_len = XT_HEADER + n;
	snprintf(out->reason, sizeof(out->reason),
	    "exponent table rebuilt from window %llu: %u bytes",
	    (unsigned long long)w->window, out->codec_table_len);
	return 0;
}

static const bellows_policy_ops xt_ops = {
	.abi_version = BELLOWS_POLICY_ABI,
	.name = "exponent_table",
	.summary = "a codec table of the layers' gradient-norm exponents",
	.knobs = BELLOWS_KNOB_CODEC_TABLE,
	.config_size = sizeof(xt_config),
	.params = xt_params,
	.init = xt_init,
	.on_window = xt_on_window,
};

BELLOWS_EXPORT const bellows_policy_ops *bellows_policy_entry(void);

/* The one symbol bellowsd looks up (BELLOWS_POLICY_ENTRY). */
const bellows_policy_ops *
bellows_policy_entry(void)
{
	return &xt_ops;
}
