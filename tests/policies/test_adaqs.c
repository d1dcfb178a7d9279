/* test_adaqs - the adaqs baseline policy against decisions computed by
 * hand.
 *
 * Windows carry per-layer sums chosen so the MSDR is exact: with n
 * elements of mean |g| 1 and sum of squares (1 + v) n the variance is v
 * and the MSDR 1 / sqrt(v). The policy runs through the controller's
 * policy host with YAML files from a temporary directory; the reload test
 * calls its ops directly.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <bellows/error.h>

#include "policyhost/config.h"
#include "policies/policies.h"
#include "policyhost/policy_host.h"
#include "policies/registry.h"
#include "support.h"

#define N_LAYERS SUP_CONV_LAYERS
#define ELEMENTS 100 /* per layer and window */

/* The default selector (min_ndim 2) picks layers 0, 2 and 3. */
static const com_layer_info *const layers = sup_conv_layers;

typedef struct fixture {
	sup_host h; /* files, host and the next window's layers */
} fixture;

static int
setup(void **state)
{
	fixture *f = sup_fixture_new(sizeof(*f), "adaqs", layers, N_LAYERS);

	*state = f;
	return f != NULL ? 0 : -1;
}

/* Gives layer l's next-window statistics. */
static void
stats(fixture *f, uint32_t l, uint64_t count, uint64_t nonfinite,
    double abs_sum, double sum_sq)
{
	f->h.wl[l].count = count;
	f->h.wl[l].nonfinite = nonfinite;
	f->h.wl[l].abs_sum = abs_sum;
	f->h.wl[l].sum_sq = sum_sq;
}

/* Every layer: ELEMENTS elements of mean |g| 1 and MSDR `msdr`. */
static void
msdr(fixture *f, double m)
{
	double var = 1 / (m * m);

	for (uint32_t l = 0; l < N_LAYERS; l++)
		stats(f, l, ELEMENTS, 0, ELEMENTS, (1 + var) * ELEMENTS);
}

static bellows_window
window(fixture *f, uint64_t index, const double *level)
{
	bellows_window w = sup_window(&f->h, index);

	for (uint32_t l = 0; l < N_LAYERS; l++) {
		f->h.wl[l].grad_norm = f->h.wl[l].grad_norm_rank0 =
		    f->h.wl[l].grad_norm_mean = 1;
		f->h.wl[l].level = level[l];
	}
	w.first_step = index * 10;
	w.last_step = index * 10 + 9;
	w.lr_scale = 1;
	return w;
}

static void
run(fixture *f, uint64_t index)
{
	bellows_window w = window(f, index, f->h.state.level);

	sup_run(&f->h, &w);
}

static void
assert_load_refused(fixture *f, const char *yaml, const char *what)
{
	char err[CTL_CONFIG_ERR_MAX] = "";
	ctl_config *cfg = NULL;

	assert_int_equal(ctl_config_parse(yaml, strlen(yaml), "adaqs.yaml",
			     &cfg, err, sizeof(err)),
	    BELLOWS_ECONFIG);
	assert_null(cfg);
	if (strstr(err, what) == NULL)
		fail_msg("expected '%s' in '%s'", what, err);
}

/* ---- tests ---------------------------------------------------------- */

static void
test_registry_lists_adaqs_and_it_passes_its_checks(void **state)
{
	(void)state;
	sup_assert_registered("adaqs", &pol_adaqs_ops, BELLOWS_KNOB_LEVEL);
}

static void
test_adaqs_doubles_the_level_on_each_msdr_fall_and_caps_it(void **state)
{
	static const struct {
		double msdr;
		double level;
		const char *why;
	} expect[] = {
		{ 1, 1, "window 0: reference MSDR 1, level 1" },
		/* 0.5 x 1 is no fall: the comparison is strict. */
		{ 0.5, 1, "" },
		{ 0.4, 2,
		    "window 2: MSDR 0.4 < 0.5 x reference 1: level 1 -> "
		    "2" },
		/* The reference is now 0.4: 0.25 is above 0.2. */
		{ 0.25, 2, "" },
		{ 0.125, 4,
		    "window 4: MSDR 0.125 < 0.5 x reference 0.4: level "
		    "2 -> 4" },
		{ 0.05, 4,
		    "window 5: MSDR 0.05 < 0.5 x reference 0.125: level "
		    "stays at its maximum 4, new reference" },
		/* Against 0.125 this would be a fall; against 0.05, not. */
		{ 0.04, 4, "" },
		/* Never back down, whatever the MSDR does. */
		{ 10, 4, "" },
	};
	fixture *f = *state;

	sup_load(&f->h,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: adaqs\n");
	assert_int_equal(sup_start(&f->h), 0);
	/* Defaults: initial_level 1; the 1-D bias is not selected. */
	SUP_ASSERT_LEVELS(f->h.state.level, 1, 0, 1, 1);
	assert_string_equal(f->h.reason,
	    "level 1 until the MSDR falls below 0.5 x its first value");
	for (uint64_t w = 0; w < sizeof(expect) / sizeof(expect[0]); w++) {
		double lv = expect[w].level;

		msdr(f, expect[w].msdr);
		run(f, w);
		SUP_ASSERT_LEVELS(f->h.state.level, lv, 0, lv, lv);
		assert_string_equal(f->h.why, expect[w].why);
		assert_string_equal(f->h.policies,
		    expect[w].why[0] != '\0' ? "adaqs" : "");
	}
}

static void
test_adaqs_caps_a_multiplied_level_at_max_level(void **state)
{
	fixture *f = *state;

	sup_load(&f->h,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: adaqs\n"
	    "        params: {factor: 3, max_level: 4, drop: 0.75}\n");
	assert_int_equal(sup_start(&f->h), 0);
	msdr(f, 1);
	run(f, 0);
	msdr(f, 0.5);
	run(f, 1);
	SUP_ASSERT_LEVELS(f->h.state.level, 3, 0, 3, 3);
	msdr(f, 0.25);
	run(f, 2);
	SUP_ASSERT_LEVELS(f->h.state.level, 4, 0, 4, 4);
	assert_string_equal(f->h.why,
	    "window 2: MSDR 0.25 < 0.75 x reference 0.5: level 3 -> 4");
}

static void
test_adaqs_pools_every_layer_and_skips_non_finite_elements(void **state)
{
	fixture *f = *state;

	sup_load(&f->h,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: adaqs\n");
	assert_int_equal(sup_start(&f->h), 0);
	/* conv1.weight: two finite elements of |g| 1 (and a NaN the sums
	 * skipped); the unselected bias: two of |g| 3. Each alone has no
	 * spread; pooled, mean 2, variance 5 - 4 = 1, MSDR 2. */
	stats(f, 0, 3, 1, 2, 2);
	stats(f, 1, 2, 0, 6, 18);
	stats(f, 2, 0, 0, 0, 0);
	stats(f, 3, 0, 0, 0, 0);
	run(f, 0);
	assert_string_equal(f->h.why, "window 0: reference MSDR 2, level 1");
}

static void
test_adaqs_waits_for_a_window_with_an_msdr(void **state)
{
	fixture *f = *state;

	sup_load(&f->h,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: adaqs\n");
	assert_int_equal(sup_start(&f->h), 0);
	/* No elements at all, then no spread, then only garbage: no MSDR,
	 * no reference, no reason. */
	for (uint32_t l = 0; l < N_LAYERS; l++)
		stats(f, l, 0, 0, 0, 0);
	run(f, 0);
	assert_string_equal(f->h.why, "");
	for (uint32_t l = 0; l < N_LAYERS; l++)
		stats(f, l, 4, 0, 4, 4);
	run(f, 1);
	assert_string_equal(f->h.why, "");
	for (uint32_t l = 0; l < N_LAYERS; l++)
		stats(f, l, 4, 9, NAN, 4);
	run(f, 2);
	assert_string_equal(f->h.why, "");
	SUP_ASSERT_LEVELS(f->h.state.level, 1, 0, 1, 1);

	msdr(f, 0.5);
	run(f, 3);
	assert_string_equal(f->h.why, "window 3: reference MSDR 0.5, level 1");
	msdr(f, 0.2);
	run(f, 4);
	SUP_ASSERT_LEVELS(f->h.state.level, 2, 0, 2, 2);
}

static void
test_adaqs_leaves_layers_its_selector_excludes_raw(void **state)
{
	fixture *f = *state;

	sup_load(&f->h,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: adaqs\n"
	    "        layers: {match: \"^conv\", min_ndim: 1}\n"
	    "        params: {initial_level: 0.25, max_level: 1}\n");
	assert_int_equal(sup_start(&f->h), 0);
	SUP_ASSERT_LEVELS(f->h.state.level, 0.25, 0.25, 0.25, 0);
	msdr(f, 1);
	run(f, 0);
	msdr(f, 0.25);
	run(f, 1);
	SUP_ASSERT_LEVELS(f->h.state.level, 0.5, 0.5, 0.5, 0);
}

static void
test_adaqs_refuses_parameters_outside_their_open_ranges(void **state)
{
	fixture *f = *state;

	assert_load_refused(f,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: adaqs\n"
	    "        params: {drop: 1.5}\n",
	    "drop must be in [0, 1], not 1.5");
	assert_load_refused(f,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: adaqs\n"
	    "        params: {factor: 0.5}\n",
	    "factor must be in [1, 1e+06], not 0.5");
	/* Inside the table's closed bounds, outside the rule's open ones:
	 * the policy's check refuses them while the file is parsed, so
	 * `bellows policy check` reports them too. */
	static const char *const open_ends[] = {
		"{factor: 1}",
		"{drop: 1}",
		"{drop: 0}",
		"{initial_level: 5, max_level: 4}",
	};
	for (size_t i = 0; i < 4; i++) {
		char yaml[256];

		snprintf(yaml, sizeof(yaml),
		    "jobs:\n  - policies:\n      - type: adaqs\n"
		    "        params: %s\n",
		    open_ends[i]);
		assert_load_refused(f, yaml,
		    "adaqs.yaml:3:15: policy 'adaqs': needs factor > 1");
	}
	/* And init still refuses such a config if a host skips the check. */
	sup_load(&f->h,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: adaqs\n");
	sup_patch_double(&pol_adaqs_ops, f->h.cfg->jobs[0].policies[0].config,
	    "factor", 1);
	sup_start_refused(&f->h, "adaqs");
}

static void
test_adaqs_reload_keeps_its_level_and_reference(void **state)
{
	fixture *f = *state;
	const bellows_policy_ops *ops = &pol_adaqs_ops;
	double level[N_LAYERS] = { 0 }, bound[N_LAYERS] = { 0 };
	bellows_proposal p = { .n_layers = N_LAYERS,
		.level = level,
		.error_bound = bound,
		.lr_scale = 1 };
	bellows_window_layer jl[N_LAYERS];
	bellows_job_info job = { .job = "job",
		.world = 4,
		.n_layers = N_LAYERS,
		.layers = jl };
	bellows_event ev = { .type = BELLOWS_EVENT_RELOAD, .window = 3 };
	const void *cfg, *cfg2;
	void *st;
	bellows_window w;

	sup_load(&f->h,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: adaqs\n"
	    "        params: {max_level: 8}\n");
	sup_load_file(f->h.path2,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: adaqs\n"
	    "        params: {max_level: 2, factor: 2}\n",
	    &f->h.cfg2);
	/* factor 1 would be refused by the parser: patch it in. */
	sup_patch_double(&pol_adaqs_ops, f->h.cfg2->jobs[0].policies[0].config,
	    "factor", 1);
	cfg = f->h.cfg->jobs[0].policies[0].config;
	cfg2 = f->h.cfg2->jobs[0].policies[0].config;
	for (uint32_t l = 0; l < N_LAYERS; l++)
		jl[l] = (bellows_window_layer){ .name = layers[l].name,
			.ndim = layers[l].ndim,
			.selected = l != 1 };
	st = calloc(1, ops->state_size);
	assert_non_null(st);
	assert_int_equal(ops->init(st, cfg, &job, &p), 0);
	for (uint64_t i = 0; i < 3; i++) {
		msdr(f, i == 0 ? 1 : i == 1 ? 0.4 : 0.1);
		w = window(f, i, level);
		for (uint32_t l = 0; l < N_LAYERS; l++)
			f->h.wl[l].selected = jl[l].selected;
		p.reason[0] = '\0';
		assert_int_equal(ops->on_window(st, cfg, &w, &p), 0);
	}
	SUP_ASSERT_LEVELS(level, 4, 0, 4, 4);

	/* factor 1 is refused; the instance carries on unchanged. */
	assert_int_equal(ops->on_event(st, cfg2, &ev), BELLOWS_EINVAL);

	/* A lower max_level is accepted and applies from the next window,
	 * the reference (0.1) kept: 0.06 is no fall. */
	ctl_config_destroy(&f->h.cfg2);
	sup_load_file(f->h.path2,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: adaqs\n"
	    "        params: {max_level: 2}\n",
	    &f->h.cfg2);
	cfg2 = f->h.cfg2->jobs[0].policies[0].config;
	assert_int_equal(ops->on_event(st, cfg2, &ev), 0);
	msdr(f, 0.0625);
	w = window(f, 3, level);
	for (uint32_t l = 0; l < N_LAYERS; l++)
		f->h.wl[l].selected = jl[l].selected;
	p.reason[0] = '\0';
	assert_int_equal(ops->on_window(st, cfg2, &w, &p), 0);
	SUP_ASSERT_LEVELS(level, 2, 0, 2, 2);
	assert_string_equal(p.reason,
	    "level 2 from window 4 (MSDR 0.0625, reference 0.1)");

	/* Rank events change nothing. */
	ev.type = BELLOWS_EVENT_RANK_LOST;
	assert_int_equal(ops->on_event(st, cfg2, &ev), 0);
	free(st);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(
		    test_registry_lists_adaqs_and_it_passes_its_checks),
#define T(name) cmocka_unit_test_setup_teardown(name, setup, sup_fixture_free)
		T(test_adaqs_doubles_the_level_on_each_msdr_fall_and_caps_it),
		T(test_adaqs_caps_a_multiplied_level_at_max_level),
		T(test_adaqs_pools_every_layer_and_skips_non_finite_elements),
		T(test_adaqs_waits_for_a_window_with_an_msdr),
		T(test_adaqs_leaves_layers_its_selector_excludes_raw),
		T(test_adaqs_refuses_parameters_outside_their_open_ranges),
		T(test_adaqs_reload_keeps_its_level_and_reference),
#undef T
	};

	return cmocka_run_group_tests_name("adaqs", tests, NULL, NULL);
}
