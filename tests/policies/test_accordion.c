/* test_accordion - the accordion and accordion_batch policies, against
 * decisions computed by hand.
 *
 * Most tests drive the policies through the controller's policy host with
 * a YAML file from a temporary directory, exactly as bellowsd does, so the
 * parameter tables and layer selectors take part. Reloads, limits and long
 * reasons call the ops directly. The decision that closes window w carries
 * the state for window w + 1; norms are chosen so every ratio is exact.
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

/* Two convolutions, a bias and a fully connected weight: the host's
 * default selector (min_ndim 2) picks layers 0, 2 and 3. */
static const com_layer_info *const layers = sup_conv_layers;

typedef struct fixture {
	sup_host h;             /* files, host and direct driving */
	double rank0[N_LAYERS]; /* next window: rank 0's norms */
	double mean[N_LAYERS];  /* next window: mean norms */
	double lr;              /* next window: its LR */
	double lr_next;         /* next window: the LR after */
	uint64_t steps;         /* next window: steps */
} fixture;

static int
setup(void **state)
{
	fixture *f = sup_fixture_new(sizeof(*f), "accordion", layers, N_LAYERS);

	if (f == NULL)
		return -1;
	f->lr = 0.1;
	f->lr_next = 0.1;
	f->steps = 10;
	*state = f;
	return 0;
}

/* The next windows' norms, the same from rank 0 and on average. */
static void
norms(fixture *f, double a, double b, double c, double d)
{
	const double v[N_LAYERS] = { a, b, c, d };

	memcpy(f->rank0, v, sizeof(v));
	memcpy(f->mean, v, sizeof(v));
}

static bellows_window
window(fixture *f, uint64_t index, const double *level, uint32_t batch,
    double lr_scale)
{
	bellows_window w = sup_window(&f->h, index);

	for (uint32_t l = 0; l < N_LAYERS; l++) {
		bellows_window_layer *wl = &f->h.wl[l];

		wl->selected = f->h.sel[l];
		wl->grad_norm = !isnan(f->rank0[l]) ? f->rank0[l] : f->mean[l];
		wl->grad_norm_rank0 = f->rank0[l];
		wl->grad_norm_mean = f->mean[l];
		wl->level = level[l];
	}
	w.first_step = index * 1000;
	w.last_step = index * 1000 + f->steps - 1;
	w.lr = f->lr;
	w.lr_next = f->lr_next;
	w.batch_size = batch;
	w.lr_scale = lr_scale;
	return w;
}

/* Runs the host's set on window `index`; the reasons land in f->h.why. */
static void
run(fixture *f, uint64_t index)
{
	bellows_window w = window(f, index, f->h.state.level,
	    f->h.state.batch_size, f->h.state.lr_scale);

	sup_run(&f->h, &w);
}

/* Runs windows from..to (inclusive) with the current norms and expects
 * no reason from any of them. */
static void
run_quiet(fixture *f, uint64_t from, uint64_t to)
{
	for (uint64_t w = from; w <= to; w++) {
		run(f, w);
		sup_assert_quiet(&f->h, w);
	}
}

/* ---- direct driving ------------------------------------------------- */

/* Runs the directly driven policy on window `index`; as the host does,
 * the proposal starts from the state in force (the last proposal). */
static int
direct_run(fixture *f, uint64_t index)
{
	bellows_window w = window(f, index, f->h.level, f->h.prop.batch_size,
	    f->h.prop.lr_scale);

	return sup_direct_run(&f->h, &w);
}

static void
direct_run_ok(fixture *f, uint64_t from, uint64_t to)
{
	for (uint64_t w = from; w <= to; w++)
		assert_int_equal(direct_run(f, w), 0);
}

/* ---- registry ------------------------------------------------------ */

static void
test_registry_lists_both_modes_and_they_pass_its_checks(void **state)
{
	(void)state;
	sup_assert_registered("accordion", &pol_accordion_ops,
	    BELLOWS_KNOB_LEVEL);
	sup_assert_registered("accordion_batch", &pol_accordion_batch_ops,
	    BELLOWS_KNOB_BATCH_SIZE | BELLOWS_KNOB_LR_SCALE);
}

/* ---- accordion: the rule ------------------------------------------------ */

static void
test_accordion_starts_every_selected_layer_critical(void **state)
{
	fixture *f = *state;

	sup_load(&f->h,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: accordion\n");
	assert_int_equal(sup_start(&f->h), 0);
	/* Defaults: critical_level 2; the 1-D bias is not selected. */
	SUP_ASSERT_LEVELS(f->h.state.level, 2, 0, 2, 2);
	assert_string_equal(f->h.reason,
	    "3 layers critical (level 2) until the check at window 0");

	norms(f, 1, 1, 1, 1);
	run(f, 0);
	SUP_ASSERT_LEVELS(f->h.state.level, 2, 0, 2, 2);
	assert_string_equal(f->h.policies, "accordion");
	assert_string_equal(f->h.why,
	    "window 0: 3 layers critical (level 2) from window 1");
}

static void
test_accordion_interval_1_compares_with_the_window_before(void **state)
{
	fixture *f = *state;

	sup_load(&f->h,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: accordion\n"
	    "        params: {interval: 1, critical_level: 4, "
	    "stable_level: 1}\n");
	assert_int_equal(sup_start(&f->h), 0);
	SUP_ASSERT_LEVELS(f->h.state.level, 4, 0, 4, 4);
	norms(f, 10, 7, 10, 4);
	run(f, 0);
	SUP_ASSERT_LEVELS(f->h.state.level, 4, 0, 4, 4);

	/* r = 0.5 exactly is critical (>= eta), and a rise counts as much
	 * as a fall: |4 - 6| / 4. The unselected bias is ignored. */
	norms(f, 5, 100, 9, 6);
	run(f, 1);
	SUP_ASSERT_LEVELS(f->h.state.level, 4, 0, 1, 4);
	assert_string_equal(f->h.why,
	    "window 1 vs window 0 (eta 0.5): 2 critical (level 4), 1 stable "
	    "(level 1); critical: conv1.weight r=0.5, fc.weight r=0.5; "
	    "stable: conv2.weight r=0.1");

	norms(f, 5, 1, 9, 4.5);
	run(f, 2);
	SUP_ASSERT_LEVELS(f->h.state.level, 1, 0, 1, 1);
	assert_string_equal(f->h.why,
	    "window 2 vs window 1 (eta 0.5): 0 critical (level 4), 3 stable "
	    "(level 1); stable: conv1.weight r=0, conv2.weight r=0, "
	    "fc.weight r=0.25");

	/* Every check explains itself, even when nothing changes. */
	run(f, 3);
	SUP_ASSERT_LEVELS(f->h.state.level, 1, 0, 1, 1);
	assert_string_equal(f->h.why,
	    "window 3 vs window 2 (eta 0.5): 0 critical (level 4), 3 stable "
	    "(level 1); stable: conv1.weight r=0, conv2.weight r=0, "
	    "fc.weight r=0");
}

static void
test_accordion_interval_10_checks_each_tenth_vs_ten_back(void **state)
{
	fixture *f = *state;

	sup_load(&f->h,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: accordion\n");
	assert_int_equal(sup_start(&f->h), 0);
	norms(f, 10, 1, 10, 10);
	run(f, 0);

	/* Between checks, norms are recorded but decide nothing. */
	norms(f, 1, 1, 100, 0);
	run_quiet(f, 1, 9);
	SUP_ASSERT_LEVELS(f->h.state.level, 2, 0, 2, 2);

	norms(f, 8, 1, 10, 2);
	run(f, 10);
	SUP_ASSERT_LEVELS(f->h.state.level, 1, 0, 1, 2);
	assert_string_equal(f->h.why,
	    "window 10 vs window 0 (eta 0.5): 1 critical (level 2), 2 stable "
	    "(level 1); critical: fc.weight r=0.8; stable: conv1.weight "
	    "r=0.2, conv2.weight r=0");

	norms(f, 100, 100, 100, 100);
	run_quiet(f, 11, 19);
	SUP_ASSERT_LEVELS(f->h.state.level, 1, 0, 1, 2);

	/* Window 20 is compared with window 10, not with window 19. */
	norms(f, 8, 1, 10, 2);
	run(f, 20);
	SUP_ASSERT_LEVELS(f->h.state.level, 1, 0, 1, 1);
	sup_assert_contains(f->h.why,
	    "window 20 vs window 10 (eta 0.5): 0 critical");
}

static void
test_accordion_treats_a_zero_previous_norm_as_critical(void **state)
{
	fixture *f = *state;

	sup_load(&f->h,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: accordion\n"
	    "        params: {interval: 1}\n");
	assert_int_equal(sup_start(&f->h), 0);
	norms(f, 0, 0, 3, 0);
	run(f, 0);
	norms(f, 0, 0, 3, 2);
	run(f, 1);
	SUP_ASSERT_LEVELS(f->h.state.level, 2, 0, 1, 2);
	assert_string_equal(f->h.why,
	    "window 1 vs window 0 (eta 0.5): 2 critical (level 2), 1 stable "
	    "(level 1); critical: conv1.weight r=inf, fc.weight r=inf; "
	    "stable: conv2.weight r=0");
}

static void
test_accordion_lr_drop_holds_critical_until_the_next_check(void **state)
{
	fixture *f = *state;

	sup_load(&f->h,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: accordion\n"
	    "        params: {interval: 5}\n");
	assert_int_equal(sup_start(&f->h), 0);
	norms(f, 1, 1, 1, 1);
	run(f, 0);
	run_quiet(f, 1, 4);
	run(f, 5);
	SUP_ASSERT_LEVELS(f->h.state.level, 1, 0, 1, 1);
	run_quiet(f, 6, 6);

	/* The LR of window 8 is lower: window 8 runs critical, on a window
	 * that is no check. */
	f->lr_next = 0.01;
	run(f, 7);
	SUP_ASSERT_LEVELS(f->h.state.level, 2, 0, 2, 2);
	assert_string_equal(f->h.why,
	    "LR drops 0.1 -> 0.01 after window 7: all critical (level 2) "
	    "until the check at window 10");

	/* Held, silently, while the rule is not asked. */
	f->lr = 0.01;
	run_quiet(f, 8, 9);
	SUP_ASSERT_LEVELS(f->h.state.level, 2, 0, 2, 2);

	/* The check releases it: the norms did not move. */
	run(f, 10);
	SUP_ASSERT_LEVELS(f->h.state.level, 1, 0, 1, 1);
	assert_string_equal(f->h.why,
	    "window 10 vs window 5 (eta 0.5): 0 critical (level 2), 3 stable "
	    "(level 1); stable: conv1.weight r=0, conv2.weight r=0, "
	    "fc.weight r=0");

	/* A drop on a check window overrides the rule's answer. */
	run_quiet(f, 11, 14);
	f->lr_next = 0.001;
	run(f, 15);
	SUP_ASSERT_LEVELS(f->h.state.level, 2, 0, 2, 2);
	assert_string_equal(f->h.why,
	    "window 15 vs window 10 (eta 0.5): 0 critical (level 2), 3 "
	    "stable (level 1); LR drops 0.01 -> 0.001 after window 15: all "
	    "critical (level 2) until the check at window 20; stable: "
	    "conv1.weight r=0, conv2.weight r=0, fc.weight r=0");
	f->lr = 0.001;
	run_quiet(f, 16, 19);
	SUP_ASSERT_LEVELS(f->h.state.level, 2, 0, 2, 2);
	run(f, 20);
	SUP_ASSERT_LEVELS(f->h.state.level, 1, 0, 1, 1);

	/* An LR that rises is no drop. */
	f->lr_next = 0.1;
	run_quiet(f, 21, 21);
	SUP_ASSERT_LEVELS(f->h.state.level, 1, 0, 1, 1);
}

static void
test_accordion_leaves_layers_its_selector_excludes_raw(void **state)
{
	fixture *f = *state;

	sup_load(&f->h,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: accordion\n"
	    "        layers: {match: \"^conv\", min_ndim: 1}\n"
	    "        params: {interval: 1}\n");
	assert_int_equal(sup_start(&f->h), 0);
	SUP_ASSERT_LEVELS(f->h.state.level, 2, 2, 2, 0);
	assert_string_equal(f->h.reason,
	    "3 layers critical (level 2) until the check at window 0");
	norms(f, 1, 1, 1, 1);
	run(f, 0);

	/* fc.weight's norm jumps, but fc.weight is not this policy's. */
	norms(f, 1, 1, 1, 50);
	run(f, 1);
	SUP_ASSERT_LEVELS(f->h.state.level, 1, 1, 1, 0);
	assert_string_equal(f->h.why,
	    "window 1 vs window 0 (eta 0.5): 0 critical (level 2), 3 stable "
	    "(level 1); stable: conv1.weight r=0, conv1.bias r=0, "
	    "conv2.weight r=0");

	/* Not even an LR drop compresses it. */
	f->lr_next = 0.01;
	run(f, 2);
	SUP_ASSERT_LEVELS(f->h.state.level, 2, 2, 2, 0);
}

static void
test_accordion_norm_source_mean_reads_the_mean_over_ranks(void **state)
{
	fixture *f = *state;
	sup_load(&f->h,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: accordion\n"
	    "        params: {interval: 1, norm_source: mean}\n");
	assert_int_equal(sup_start(&f->h), 0);
	norms(f, 1, 1, 1, 1);
	for (uint32_t l = 0; l < N_LAYERS; l++)
		f->mean[l] = 4;
	run(f, 0);
	f->mean[2] = 1;
	run(f, 1);
	SUP_ASSERT_LEVELS(f->h.state.level, 1, 0, 2, 1);
	sup_assert_contains(f->h.why, "critical: conv2.weight r=0.75");

	/* The same windows with the default source: rank 0 saw no change. */
	sup_restart(&f->h,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: accordion\n"
	    "        params: {interval: 1}\n");
	f->mean[2] = 4;
	run(f, 0);
	f->mean[2] = 1;
	run(f, 1);
	SUP_ASSERT_LEVELS(f->h.state.level, 1, 0, 1, 1);
}

static void
test_accordion_uses_the_mean_when_rank0_did_not_report(void **state)
{
	fixture *f = *state;

	sup_load(&f->h,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: accordion\n"
	    "        params: {interval: 1}\n");
	assert_int_equal(sup_start(&f->h), 0);
	norms(f, NAN, NAN, NAN, NAN);
	for (uint32_t l = 0; l < N_LAYERS; l++)
		f->mean[l] = 10;
	run(f, 0);

	norms(f, 10, 10, 2, 10);
	for (uint32_t l = 0; l < N_LAYERS; l++)
		f->mean[l] = 99;
	run(f, 1);
	SUP_ASSERT_LEVELS(f->h.state.level, 1, 0, 2, 1);
	assert_string_equal(f->h.why,
	    "window 1 vs window 0 (eta 0.5): 1 critical (level 2), 2 stable "
	    "(level 1); mean norms for 3 layers rank 0 lacked in window 0; "
	    "critical: conv2.weight r=0.8; stable: conv1.weight r=0, "
	    "fc.weight r=0");

	/* Rank 0 lacks one layer only. */
	f->rank0[3] = NAN;
	f->mean[3] = 5;
	run(f, 2);
	SUP_ASSERT_LEVELS(f->h.state.level, 1, 0, 1, 2);
	assert_string_equal(f->h.why,
	    "window 2 vs window 1 (eta 0.5): 1 critical (level 2), 2 stable "
	    "(level 1); mean norms for 1 layer rank 0 lacked in window 2; "
	    "critical: fc.weight r=0.5; stable: conv1.weight r=0, "
	    "conv2.weight r=0");
}

static void
test_accordion_keeps_levels_when_a_norm_is_missing(void **state)
{
	fixture *f = *state;

	sup_load(&f->h,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: accordion\n"
	    "        params: {interval: 2}\n");
	assert_int_equal(sup_start(&f->h), 0);
	norms(f, 1, 1, 1, 1);
	run(f, 0);
	run_quiet(f, 1, 1);
	norms(f, 1, 1, 1, 3);
	run(f, 2);
	SUP_ASSERT_LEVELS(f->h.state.level, 1, 0, 1, 2);

	/* Windows 3 and 4 never closed (bellowsd was down): window 6 has
	 * nothing to compare with, and keeps every level. Window 2 sits in
	 * the slot window 4 would have used. */
	run_quiet(f, 5, 5);
	norms(f, 5, 1, 5, 5);
	run(f, 6);
	SUP_ASSERT_LEVELS(f->h.state.level, 1, 0, 1, 2);
	assert_string_equal(f->h.why,
	    "window 6 vs window 4 (eta 0.5): 0 critical (level 2), 0 stable "
	    "(level 1), 3 kept; kept, no norm for window 4: conv1.weight, "
	    "conv2.weight, fc.weight");

	/* No rank reported fc.weight in window 8: it keeps its level. */
	f->rank0[3] = NAN;
	f->mean[3] = NAN;
	run_quiet(f, 7, 7);
	run(f, 8);
	SUP_ASSERT_LEVELS(f->h.state.level, 1, 0, 1, 2);
	assert_string_equal(f->h.why,
	    "window 8 vs window 6 (eta 0.5): 0 critical (level 2), 2 stable "
	    "(level 1), 1 kept; stable: conv1.weight r=0, conv2.weight r=0; "
	    "kept, no norm for window 8: fc.weight");

	/* ...and again when window 8 is the one compared with. */
	norms(f, 5, 1, 5, 5);
	run_quiet(f, 9, 9);
	run(f, 10);
	SUP_ASSERT_LEVELS(f->h.state.level, 1, 0, 1, 2);
	sup_assert_contains(f->h.why,
	    "; kept, no norm for window 8: fc.weight");

	/* Wire garbage is no norm either. */
	f->rank0[0] = -1;
	f->rank0[2] = INFINITY;
	run_quiet(f, 11, 11);
	run(f, 12);
	sup_assert_contains(f->h.why,
	    "2 kept; stable: fc.weight r=0; kept, no "
	    "norm for window 12: conv1.weight, "
	    "conv2.weight");
}

/* ---- accordion: metrics --------------------------------------------- */

static void
test_accordion_records_each_judged_r_and_the_eta_at_a_check(void **state)
{
	fixture *f = *state;
	const bellows_metric *m = f->h.prop.metrics;

	sup_load(&f->h,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: accordion\n"
	    "        params: {interval: 2, eta: 0.3}\n");
	assert_int_equal(sup_direct_start(&f->h, f->h.cfg), 0);
	norms(f, 10, 10, 10, 10);
	/* Window 0 is critical without an r; window 1 is no check. */
	assert_int_equal(direct_run(f, 0), 0);
	assert_int_equal(f->h.prop.n_metrics, 0);
	assert_int_equal(direct_run(f, 1), 0);
	assert_int_equal(f->h.prop.n_metrics, 0);
	/* Window 2 against window 0: the selected layers' r (the bias is
	 * not judged), then the eta they were judged against. */
	norms(f, 7, 10, 10, 12);
	assert_int_equal(direct_run(f, 2), 0);
	assert_int_equal(f->h.prop.n_metrics, 4);
	assert_string_equal(m[0].name, "r");
	assert_int_equal(m[0].layer, 0);
	assert_true(fabs(m[0].value - 0.3) < 1e-12);
	assert_string_equal(m[1].name, "r");
	assert_int_equal(m[1].layer, 2);
	assert_true(m[1].value == 0);
	assert_string_equal(m[2].name, "r");
	assert_int_equal(m[2].layer, 3);
	assert_true(fabs(m[2].value - 0.2) < 1e-12);
	assert_string_equal(m[3].name, "eta");
	assert_int_equal(m[3].layer, -1);
	assert_true(m[3].value == 0.3);
}

/* ---- accordion: reload, refusals, limits ---------------------------- */

static void
test_accordion_reload_keeps_the_norms_recorded_before_it(void **state)
{
	fixture *f = *state;

	sup_load(&f->h,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: accordion\n"
	    "        params: {interval: 5}\n");
	sup_load_file(f->h.path2,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: accordion\n"
	    "        params: {interval: 5, eta: 0.2}\n",
	    &f->h.cfg2);
	assert_int_equal(sup_direct_start(&f->h, f->h.cfg), 0);
	norms(f, 10, 10, 10, 10);
	direct_run_ok(f, 0, 5);
	SUP_ASSERT_LEVELS(f->h.level, 1, 0, 1, 1);
	direct_run_ok(f, 6, 7);

	assert_int_equal(sup_direct_reload(&f->h, 8), 0);
	direct_run_ok(f, 8, 9);
	/* r = 0.3 against window 5's norm, recorded before the reload: below
	 * the old eta, at or above the new one. */
	norms(f, 7, 10, 10, 10);
	assert_int_equal(direct_run(f, 10), 0);
	SUP_ASSERT_LEVELS(f->h.level, 2, 0, 1, 1);
	assert_string_equal(f->h.prop.reason,
	    "window 10 vs window 5 (eta 0.2): 1 critical (level 2), 2 stable "
	    "(level 1); critical: conv1.weight r=0.3; stable: conv2.weight "
	    "r=0, fc.weight r=0");
}

static void
test_accordion_reload_of_interval_keeps_the_norms_that_fit(void **state)
{
	fixture *f = *state;

	/* Interval 2 holds windows 4 and 5 after window 5. */
	sup_load(&f->h,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: accordion\n"
	    "        params: {interval: 2}\n");
	sup_load_file(f->h.path2,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: accordion\n"
	    "        params: {interval: 4}\n",
	    &f->h.cfg2);
	assert_int_equal(sup_direct_start(&f->h, f->h.cfg), 0);
	norms(f, 1, 1, 1, 1);
	direct_run_ok(f, 0, 5);

	/* Growing to 4: window 8 compares with window 4, which was kept. */
	assert_int_equal(sup_direct_reload(&f->h, 6), 0);
	direct_run_ok(f, 6, 7);
	assert_string_equal(f->h.prop.reason, "");
	norms(f, 1, 1, 1, 2);
	assert_int_equal(direct_run(f, 8), 0);
	SUP_ASSERT_LEVELS(f->h.level, 1, 0, 1, 2);
	sup_assert_contains(f->h.prop.reason,
	    "window 8 vs window 4 (eta 0.5): 1 critical");

	/* Shrinking back to 2 keeps windows 7 and 8 only: window 10 is
	 * judged against 8. */
	ctl_config_destroy(&f->h.cfg2);
	sup_load_file(f->h.path2,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: accordion\n"
	    "        params: {interval: 2}\n",
	    &f->h.cfg2);
	assert_int_equal(sup_direct_reload(&f->h, 9), 0);
	direct_run_ok(f, 9, 9);
	assert_int_equal(direct_run(f, 10), 0);
	SUP_ASSERT_LEVELS(f->h.level, 1, 0, 1, 1);
	sup_assert_contains(f->h.prop.reason,
	    "window 10 vs window 8 (eta 0.5): 0 critical (level 2), 3 stable");
}

static void
test_accordion_reload_to_a_longer_interval_lacks_old_norms(void **state)
{
	fixture *f = *state;

	/* Interval 2 after window 5 holds windows 4 and 5; interval 3 would
	 * need window 3 at window 6. */
	sup_load(&f->h,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: accordion\n"
	    "        params: {interval: 2}\n");
	sup_load_file(f->h.path2,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: accordion\n"
	    "        params: {interval: 3}\n",
	    &f->h.cfg2);
	assert_int_equal(sup_direct_start(&f->h, f->h.cfg), 0);
	norms(f, 1, 1, 1, 1);
	direct_run_ok(f, 0, 5);
	assert_int_equal(sup_direct_reload(&f->h, 6), 0);
	assert_int_equal(direct_run(f, 6), 0);
	SUP_ASSERT_LEVELS(f->h.level, 1, 0, 1, 1);
	assert_string_equal(f->h.prop.reason,
	    "window 6 vs window 3 (eta 0.5): 0 critical (level 2), 0 stable "
	    "(level 1), 3 kept; kept, no norm for window 3: conv1.weight, "
	    "conv2.weight, fc.weight");
	direct_run_ok(f, 7, 8);
	assert_int_equal(direct_run(f, 9), 0);
	sup_assert_contains(f->h.prop.reason, "window 9 vs window 6 (eta 0.5)");
}

static void
test_accordion_reload_of_levels_applies_from_the_next_window(void **state)
{
	fixture *f = *state;

	sup_load(&f->h,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: accordion\n"
	    "        params: {interval: 4}\n");
	sup_load_file(f->h.path2,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: accordion\n"
	    "        params: {interval: 4, critical_level: 8}\n",
	    &f->h.cfg2);
	assert_int_equal(sup_direct_start(&f->h, f->h.cfg), 0);
	norms(f, 1, 1, 1, 1);
	direct_run_ok(f, 0, 1);
	SUP_ASSERT_LEVELS(f->h.level, 2, 0, 2, 2);
	assert_int_equal(sup_direct_reload(&f->h, 2), 0);
	assert_int_equal(direct_run(f, 2), 0);
	SUP_ASSERT_LEVELS(f->h.level, 8, 0, 8, 8);
	assert_string_equal(f->h.prop.reason,
	    "levels now critical 8, stable 1 from window 3");
	assert_int_equal(direct_run(f, 3), 0);
	assert_string_equal(f->h.prop.reason, "");
}

static void
test_accordion_reload_through_the_host_keeps_the_instance(void **state)
{
	fixture *f = *state;

	sup_load(&f->h,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: accordion\n"
	    "        params: {interval: 5}\n");
	sup_load_file(f->h.path2,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: accordion\n"
	    "        params: {interval: 5, eta: 0.2}\n",
	    &f->h.cfg2);
	assert_int_equal(sup_start(&f->h), 0);
	norms(f, 10, 10, 10, 10);
	for (uint64_t w = 0; w <= 7; w++)
		run(f, w);
	SUP_ASSERT_LEVELS(f->h.state.level, 1, 0, 1, 1);

	sup_reload(&f->h, 8);

	run_quiet(f, 8, 9);
	norms(f, 7, 10, 10, 10);
	run(f, 10);
	SUP_ASSERT_LEVELS(f->h.state.level, 2, 0, 1, 1);
	sup_assert_contains(f->h.why,
	    "window 10 vs window 5 (eta 0.2): 1 critical (level 2)");
}

static void
test_accordion_refuses_an_unknown_norm_source(void **state)
{
	fixture *f = *state;

	/* The parameter lists its choices: the parser refuses others. */
	sup_load_refused(&f->h,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: accordion\n"
	    "        params: {norm_source: median}\n",
	    ":4:31: norm_source must be one of rank0, mean, not 'median'");

	/* And so does a reload, which leaves the instance as it was. */
	ctl_config_destroy(&f->h.cfg);
	sup_load(&f->h,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: accordion\n"
	    "        params: {interval: 1}\n");
	sup_load_file(f->h.path2,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: accordion\n"
	    "        params: {interval: 1}\n",
	    &f->h.cfg2);
	/* A host that skipped the parser's check: patch the value in. */
	sup_patch_string(&pol_accordion_ops,
	    f->h.cfg2->jobs[0].policies[0].config, "norm_source", "Rank0");
	assert_int_equal(sup_direct_start(&f->h, f->h.cfg), 0);
	norms(f, 1, 1, 1, 1);
	direct_run_ok(f, 0, 0);
	assert_int_equal(sup_direct_reload(&f->h, 1), BELLOWS_EINVAL);
	assert_ptr_equal(f->h.config, f->h.cfg->jobs[0].policies[0].config);
	assert_int_equal(direct_run(f, 1), 0);
	SUP_ASSERT_LEVELS(f->h.level, 1, 0, 1, 1);

	/* A host that hands it the bad config anyway gets an error. */
	f->h.config = f->h.cfg2->jobs[0].policies[0].config;
	assert_int_equal(direct_run(f, 2), BELLOWS_EINVAL);
	f->h.config = f->h.cfg->jobs[0].policies[0].config;
}

static void
test_accordion_config_refuses_parameters_out_of_range(void **state)
{
	fixture *f = *state;

	sup_load_refused(&f->h,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: accordion\n"
	    "        params: {eta: 0}\n",
	    "eta must be in [1e-12, 1e+06], not 0");
	sup_load_refused(&f->h,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: accordion\n"
	    "        params: {interval: 0}\n",
	    "interval must be in [1, 100000], not 0");
	sup_load_refused(&f->h,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: accordion\n"
	    "        params: {critical_level: -1}\n",
	    "critical_level must be in [0, 1e+09], not -1");
	sup_load_refused(&f->h,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: accordion\n"
	    "        params: {norm_source: [rank0]}\n",
	    "norm_source must be a string");
	sup_load_refused(&f->h,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: accordion_batch\n"
	    "        params: {batch_critical: 0}\n",
	    "batch_critical must be in [1, 100000000], not 0");
	sup_load_refused(&f->h,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: accordion_batch\n"
	    "        params: {warmup_from: 1.5}\n",
	    "warmup_from must be in [0, 1], not 1.5");
}

/* Layers for the direct tests below that need more than N_LAYERS: a
 * long reason (CUT of them) and a history too large (MANY). */
#define CUT  64
#define MANY 512

typedef struct many_layers {
	char names[MANY][48];          /* long, distinct names */
	bellows_window_layer wl[MANY]; /* job and window layers */
	double level[MANY];            /* proposal levels */
	double bound[MANY];            /* proposal bounds */
	char state[512] __attribute__((aligned(16))); /* policy state */
} many_layers;

static void
many_init(many_layers *m, uint32_t n)
{
	memset(m, 0, sizeof(*m));
	for (uint32_t l = 0; l < n; l++) {
		snprintf(m->names[l], sizeof(m->names[l]),
		    "encoder.block%02u.attention.out.weight", l);
		m->wl[l] = (bellows_window_layer){ .name = m->names[l],
			.numel = 4096,
			.ndim = 2,
			.selected = true,
			.grad_norm_rank0 = 10,
			.grad_norm_mean = 10 };
	}
}

static void
test_accordion_cuts_a_long_reason_between_layer_names(void **state)
{
	many_layers *m = malloc(sizeof(*m));
	ctl_config *cfg = NULL;
	char err[CTL_CONFIG_ERR_MAX];
	const char *yaml = "jobs:\n"
			   "  - policies:\n"
			   "      - type: accordion\n"
			   "        params: {interval: 1}\n";
	bellows_proposal p = { .n_layers = CUT, .lr_scale = 1 };
	bellows_job_info job = { .job = "job", .world = 1, .n_layers = CUT };
	bellows_window w = { .job = "job",
		.n_layers = CUT,
		.lr = 0.1,
		.lr_next = 0.1 };
	const char *head = "window 1 vs window 0 (eta 0.5): 32 critical "
			   "(level 2), 32 stable (level 1); critical: "
			   "encoder.block00.attention.out.weight r=0.6, ";
	const char *cut;
	size_t len;

	(void)state;
	assert_non_null(m);
	many_init(m, CUT);
	p.level = m->level;
	p.error_bound = m->bound;
	job.layers = m->wl;
	w.layers = m->wl;
	assert_int_equal(ctl_config_parse(yaml, strlen(yaml), "many.yaml", &cfg,
			     err, sizeof(err)),
	    0);
	assert_true(pol_accordion_ops.state_size <= sizeof(m->state));
	assert_int_equal(pol_accordion_ops.init(m->state,
			     cfg->jobs[0].policies[0].config, &job, &p),
	    0);
	assert_int_equal(pol_accordion_ops.on_window(m->state,
			     cfg->jobs[0].policies[0].config, &w, &p),
	    0);
	/* Half the layers move by 0.6, half by 0.1. */
	for (uint32_t l = 0; l < CUT; l++)
		m->wl[l].grad_norm_rank0 = l % 2 ? 9 : 4;
	w.window = 1;
	p.reason[0] = '\0';
	assert_int_equal(pol_accordion_ops.on_window(m->state,
			     cfg->jobs[0].policies[0].config, &w, &p),
	    0);
	for (uint32_t l = 0; l < CUT; l++)
		assert_true(m->level[l] == (l % 2 ? 1 : 2));

	len = strlen(p.reason);
	assert_true(len < BELLOWS_REASON_MAX);
	assert_true(len > BELLOWS_REASON_MAX - 80);
	/* The counts come first and survive; the list ends on a whole
	 * entry followed by the ellipsis. */
	assert_int_equal(strncmp(p.reason, head, strlen(head)), 0);
	cut = p.reason + len - strlen(" ...");
	assert_string_equal(cut, " ...");
	assert_true(strncmp(cut - strlen(" r=0.6"), " r=0.6", 6) == 0);

	pol_accordion_ops.fini(m->state, cfg->jobs[0].policies[0].config);
	ctl_config_destroy(&cfg);
	free(m);
}

static void
test_accordion_refuses_a_history_beyond_its_limit(void **state)
{
	many_layers *m = malloc(sizeof(*m));
	ctl_config *cfg = NULL, *big = NULL;
	char err[CTL_CONFIG_ERR_MAX];
	const char *ok = "jobs:\n"
			 "  - policies:\n"
			 "      - type: accordion\n"
			 "        params: {interval: 4}\n";
	/* 512 layers x 100000 windows > 2^25 norms. */
	const char *huge = "jobs:\n"
			   "  - policies:\n"
			   "      - type: accordion\n"
			   "        params: {interval: 100000}\n";
	bellows_proposal p = { .n_layers = MANY, .lr_scale = 1 };
	bellows_job_info job = { .job = "job", .world = 1, .n_layers = MANY };
	bellows_window w = { .job = "job",
		.n_layers = MANY,
		.lr = 0.1,
		.lr_next = 0.1 };
	bellows_event ev = { .type = BELLOWS_EVENT_RELOAD, .window = 1 };

	(void)state;
	assert_non_null(m);
	many_init(m, MANY);
	p.level = m->level;
	p.error_bound = m->bound;
	job.layers = m->wl;
	w.layers = m->wl;
	assert_int_equal(ctl_config_parse(ok, strlen(ok), "ok.yaml", &cfg, err,
			     sizeof(err)),
	    0);
	assert_int_equal(ctl_config_parse(huge, strlen(huge), "huge.yaml", &big,
			     err, sizeof(err)),
	    0);

	assert_int_equal(pol_accordion_ops.init(m->state,
			     big->jobs[0].policies[0].config, &job, &p),
	    BELLOWS_ELIMIT);

	/* A reload asking for it is refused and changes nothing. */
	memset(m->state, 0, sizeof(m->state));
	assert_int_equal(pol_accordion_ops.init(m->state,
			     cfg->jobs[0].policies[0].config, &job, &p),
	    0);
	assert_int_equal(pol_accordion_ops.on_window(m->state,
			     cfg->jobs[0].policies[0].config, &w, &p),
	    0);
	assert_int_equal(pol_accordion_ops.on_event(m->state,
			     big->jobs[0].policies[0].config, &ev),
	    BELLOWS_ELIMIT);
	w.window = 4;
	assert_int_equal(pol_accordion_ops.on_window(m->state,
			     cfg->jobs[0].policies[0].config, &w, &p),
	    0);
	sup_assert_contains(p.reason,
	    "window 4 vs window 0 (eta 0.5): 0 "
	    "critical (level 2), 512 stable");

	pol_accordion_ops.fini(m->state, cfg->jobs[0].policies[0].config);
	ctl_config_destroy(&cfg);
	ctl_config_destroy(&big);
	free(m);
}

static void
test_accordion_refuses_a_window_of_another_layer_table(void **state)
{
	fixture *f = *state;
	bellows_window w;

	sup_load(&f->h,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: accordion\n");
	assert_int_equal(sup_direct_start(&f->h, f->h.cfg), 0);
	norms(f, 1, 1, 1, 1);
	w = window(f, 0, f->h.level, 0, 1);
	w.n_layers = N_LAYERS - 1;
	assert_int_equal(f->h.ops->on_window(f->h.pstate, f->h.config, &w,
			     &f->h.prop),
	    BELLOWS_EMISMATCH);
}

/* ---- accordion_batch ------------------------------------------------ */

static void
test_batch_switches_between_the_two_sizes_and_scales_the_lr(void **state)
{
	fixture *f = *state;

	sup_load(&f->h,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: accordion_batch\n"
	    "        layers: {min_ndim: 0}\n"
	    "        params: {interval: 2}\n");
	assert_int_equal(sup_start(&f->h), 0);
	assert_int_equal(f->h.state.batch_size, 512);
	assert_true(f->h.state.lr_scale == 1);
	SUP_ASSERT_LEVELS(f->h.state.level, 0, 0, 0, 0);
	assert_string_equal(f->h.reason,
	    "batch 512 (critical) until the check at window 0, LR scale 1");

	/* Model norm sqrt(3^2 + 4^2) = 5. */
	norms(f, 3, 0, 4, 0);
	run(f, 0);
	assert_string_equal(f->h.why,
	    "window 0: critical; batch 512, LR scale 1 from window 1");
	run_quiet(f, 1, 1);
	run(f, 2);
	assert_int_equal(f->h.state.batch_size, 4096);
	assert_true(f->h.state.lr_scale == 8);
	assert_string_equal(f->h.policies, "accordion_batch");
	assert_string_equal(f->h.why,
	    "window 2 vs window 0 (eta 0.5): model norm 5 -> 5, r=0: stable; "
	    "batch 4096, LR scale 8 from window 3");
	run_quiet(f, 3, 3);
	assert_int_equal(f->h.state.batch_size, 4096);

	norms(f, 0, 0, 2, 0);
	run(f, 4);
	assert_int_equal(f->h.state.batch_size, 512);
	assert_true(f->h.state.lr_scale == 1);
	assert_string_equal(f->h.why,
	    "window 4 vs window 2 (eta 0.5): model norm 5 -> 2, r=0.6: "
	    "critical; batch 512, LR scale 1 from window 5");
	SUP_ASSERT_LEVELS(f->h.state.level, 0, 0, 0, 0);
}

static void
test_batch_model_norm_covers_every_layer_by_default(void **state)
{
	fixture *f = *state;

	/* The whole model: the default selector takes the bias too, whose
	 * norm falls from 100 to 1 - critical. */
	sup_load(&f->h,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: accordion_batch\n"
	    "        params: {interval: 1, batch_critical: 256, "
	    "batch_stable: 1024}\n");
	assert_int_equal(f->h.cfg->jobs[0].policies[0].selector.min_ndim, 0);
	assert_int_equal(sup_start(&f->h), 0);
	assert_int_equal(f->h.state.batch_size, 256);
	norms(f, 3, 100, 4, 0);
	run(f, 0);
	norms(f, 3, 1, 4, 0);
	run(f, 1);
	assert_int_equal(f->h.state.batch_size, 256);
	assert_true(f->h.state.lr_scale == 1);
	sup_assert_contains(f->h.why,
	    "model norm 100.1 -> 5.099, r=0.949: critical");
}

static void
test_batch_model_norm_covers_only_the_layers_a_set_selector_picks(void **state)
{
	fixture *f = *state;

	/* min_ndim set in the file wins: the bias is out, the norm of the
	 * rest does not move - stable. */
	sup_load(&f->h,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: accordion_batch\n"
	    "        layers: {min_ndim: 2}\n"
	    "        params: {interval: 1, batch_critical: 256, "
	    "batch_stable: 1024}\n");
	assert_int_equal(sup_start(&f->h), 0);
	assert_int_equal(f->h.state.batch_size, 256);
	norms(f, 3, 100, 4, 0);
	run(f, 0);
	norms(f, 3, 1, 4, 0);
	run(f, 1);
	assert_int_equal(f->h.state.batch_size, 1024);
	assert_true(f->h.state.lr_scale == 4);
	sup_assert_contains(f->h.why, "model norm 5 -> 5, r=0: stable");
}

static void
test_batch_warms_the_lr_up_linearly_and_says_so_every_window(void **state)
{
	static const struct {
		double scale;
		const char *why;
	} expect[] = {
		{ 0.4375,
		    "window 0: critical; LR warm-up 1/4; batch 512, LR "
		    "scale 0.4375 from window 1" },
		{ 0.625,
		    "LR warm-up 2/4; batch 512, LR scale 0.625 from "
		    "window 2" },
		{ 0.8125,
		    "LR warm-up 3/4; batch 512, LR scale 0.8125 from "
		    "window 3" },
		{ 1, "LR warm-up 4/4; batch 512, LR scale 1 from window 4" },
		{ 1, "" },
		{ 1, "" },
	};
	fixture *f = *state;

	sup_load(&f->h,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: accordion_batch\n"
	    "        layers: {min_ndim: 0}\n"
	    "        params: {interval: 100, warmup_windows: 4}\n");
	assert_int_equal(sup_start(&f->h), 0);
	assert_true(f->h.state.lr_scale == 0.25);
	assert_string_equal(f->h.reason,
	    "batch 512 (critical) until the check at window 0, LR scale 0.25 "
	    "warming up to 1 over 4 windows");
	norms(f, 3, 0, 4, 0);
	for (uint64_t w = 0; w < sizeof(expect) / sizeof(expect[0]); w++) {
		run(f, w);
		assert_int_equal(f->h.state.batch_size, 512);
		if (f->h.state.lr_scale != expect[w].scale)
			fail_msg("window %llu: LR scale %g, expected %g",
			    (unsigned long long)w, f->h.state.lr_scale,
			    expect[w].scale);
		assert_string_equal(f->h.why, expect[w].why);
	}
}

static void
test_batch_warm_up_multiplies_the_batch_scaling(void **state)
{
	fixture *f = *state;

	sup_load(&f->h,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: accordion_batch\n"
	    "        layers: {min_ndim: 0}\n"
	    "        params: {interval: 2, warmup_windows: 4, "
	    "warmup_from: 0.5}\n");
	assert_int_equal(sup_start(&f->h), 0);
	assert_true(f->h.state.lr_scale == 0.5);
	norms(f, 3, 0, 4, 0);
	run(f, 0);
	assert_true(f->h.state.lr_scale == 0.625);
	run(f, 1);
	assert_true(f->h.state.lr_scale == 0.75);
	/* Window 3 runs batch 4096 at 8 x 0.875 of the trainer's LR. */
	run(f, 2);
	assert_int_equal(f->h.state.batch_size, 4096);
	assert_true(f->h.state.lr_scale == 7);
	assert_string_equal(f->h.why,
	    "window 2 vs window 0 (eta 0.5): model norm 5 -> 5, r=0: stable; "
	    "LR warm-up 3/4; batch 4096, LR scale 7 from window 3");
	run(f, 3);
	assert_true(f->h.state.lr_scale == 8);
	assert_string_equal(f->h.why,
	    "LR warm-up 4/4; batch 4096, LR scale 8 from window 4");
	run_quiet(f, 5, 5);
}

static void
test_batch_lr_drop_holds_the_small_batch_until_next_check(void **state)
{
	fixture *f = *state;

	sup_load(&f->h,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: accordion_batch\n"
	    "        layers: {min_ndim: 0}\n"
	    "        params: {interval: 4}\n");
	assert_int_equal(sup_start(&f->h), 0);
	norms(f, 3, 0, 4, 0);
	run(f, 0);
	run_quiet(f, 1, 3);
	run(f, 4);
	assert_int_equal(f->h.state.batch_size, 4096);

	f->lr_next = 0.01;
	run(f, 5);
	assert_int_equal(f->h.state.batch_size, 512);
	assert_true(f->h.state.lr_scale == 1);
	assert_string_equal(f->h.why,
	    "LR drops 0.1 -> 0.01 after window 5: critical until the check "
	    "at window 8; batch 512, LR scale 1 from window 6");
	f->lr = 0.01;
	run_quiet(f, 6, 7);
	assert_int_equal(f->h.state.batch_size, 512);
	run(f, 8);
	assert_int_equal(f->h.state.batch_size, 4096);
	assert_true(f->h.state.lr_scale == 8);
}

static void
test_batch_per_step_compares_norms_divided_by_steps(void **state)
{
	fixture *f = *state;

	/* An epoch of 80 steps at the small batch, then 10 at a batch 8
	 * times larger: the summed gradient is 8 times shorter, the mean
	 * step is not. */
	sup_load(&f->h,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: accordion_batch\n"
	    "        layers: {min_ndim: 0}\n"
	    "        params: {interval: 2, per_step: true}\n");
	assert_int_equal(sup_start(&f->h), 0);
	f->steps = 80;
	norms(f, 0, 0, 80, 0);
	run(f, 0);
	run(f, 1);
	f->steps = 10;
	norms(f, 0, 0, 10, 0);
	run(f, 2);
	assert_int_equal(f->h.state.batch_size, 4096);
	assert_string_equal(f->h.why,
	    "window 2 vs window 0 (eta 0.5): model norm per step 1 -> 1, r=0: "
	    "stable; batch 4096, LR scale 8 from window 3");

	sup_restart(&f->h,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: accordion_batch\n"
	    "        layers: {min_ndim: 0}\n"
	    "        params: {interval: 2}\n");
	f->steps = 80;
	norms(f, 0, 0, 80, 0);
	run(f, 0);
	run(f, 1);
	f->steps = 10;
	norms(f, 0, 0, 10, 0);
	run(f, 2);
	assert_int_equal(f->h.state.batch_size, 512);
	sup_assert_contains(f->h.why, "model norm 80 -> 10, r=0.875: critical");
}

static void
test_batch_keeps_its_regime_without_a_model_norm(void **state)
{
	fixture *f = *state;

	sup_load(&f->h,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: accordion_batch\n"
	    "        layers: {min_ndim: 0}\n"
	    "        params: {interval: 1}\n");
	assert_int_equal(sup_start(&f->h), 0);
	norms(f, 3, 0, 4, 0);
	run(f, 0);
	run(f, 1);
	assert_int_equal(f->h.state.batch_size, 4096);

	/* No rank reported fc.weight: no model norm, no change. */
	f->rank0[3] = NAN;
	f->mean[3] = NAN;
	run(f, 2);
	assert_int_equal(f->h.state.batch_size, 4096);
	assert_string_equal(f->h.why,
	    "window 2 vs window 1: no model norm for window 2, regime kept; "
	    "batch 4096, LR scale 8 from window 3");

	/* Rank 0 is missing: the mean stands in, and window 2 had none. */
	norms(f, NAN, NAN, NAN, NAN);
	f->mean[0] = 3;
	f->mean[1] = 0;
	f->mean[2] = 4;
	f->mean[3] = 0;
	run(f, 3);
	assert_int_equal(f->h.state.batch_size, 4096);
	assert_string_equal(f->h.why,
	    "window 3 vs window 2: no model norm for window 2, regime kept; "
	    "mean norms for 4 layers rank 0 lacked in window 3; batch 4096, "
	    "LR scale 8 from window 4");

	norms(f, 0, 0, 1, 0);
	run(f, 4);
	assert_int_equal(f->h.state.batch_size, 512);
	assert_string_equal(f->h.why,
	    "window 4 vs window 3 (eta 0.5): model norm 5 -> 1, r=0.8: "
	    "critical; mean norms for 4 layers rank 0 lacked in window 3; "
	    "batch 512, LR scale 1 from window 5");
}

static void
test_batch_reload_keeps_the_norms_and_applies_new_sizes(void **state)
{
	fixture *f = *state;

	sup_load(&f->h,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: accordion_batch\n"
	    "        layers: {min_ndim: 0}\n"
	    "        params: {interval: 2}\n");
	sup_load_file(f->h.path2,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: accordion_batch\n"
	    "        layers: {min_ndim: 0}\n"
	    "        params: {interval: 2, batch_stable: 2048, eta: 0.7}\n",
	    &f->h.cfg2);
	assert_int_equal(sup_direct_start(&f->h, f->h.cfg), 0);
	assert_int_equal(f->h.prop.batch_size, 512);
	norms(f, 3, 0, 4, 0);
	direct_run_ok(f, 0, 1);
	assert_int_equal(sup_direct_reload(&f->h, 2), 0);
	/* Against window 0's norm: r = 0.6, critical before, stable now. */
	norms(f, 0, 0, 2, 0);
	assert_int_equal(direct_run(f, 2), 0);
	assert_int_equal(f->h.prop.batch_size, 2048);
	assert_true(f->h.prop.lr_scale == 4);
	assert_string_equal(f->h.prop.reason,
	    "window 2 vs window 0 (eta 0.7): model norm 5 -> 2, r=0.6: "
	    "stable; batch 2048, LR scale 4 from window 3");
}

static void
test_batch_refuses_an_unknown_norm_source(void **state)
{
	fixture *f = *state;

	sup_load_refused(&f->h,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: accordion_batch\n"
	    "        name: batches\n"
	    "        params: {norm_source: \"\"}\n",
	    "norm_source must be one of rank0, mean, not ''");
	/* init refuses it too, for a host that skipped the check. */
	sup_load(&f->h,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: accordion_batch\n"
	    "        name: batches\n");
	sup_patch_string(&pol_accordion_batch_ops,
	    f->h.cfg->jobs[0].policies[0].config, "norm_source", "");
	sup_start_refused(&f->h, "batches");
}

static void
test_both_modes_run_side_by_side_in_one_job(void **state)
{
	fixture *f = *state;

	/* The thesis never combines them; bellows allows it, since each
	 * owns different knobs. */
	sup_load(&f->h,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: accordion\n"
	    "        params: {interval: 1}\n"
	    "      - type: accordion_batch\n"
	    "        params: {interval: 1}\n");
	assert_int_equal(sup_start(&f->h), 0);
	SUP_ASSERT_LEVELS(f->h.state.level, 2, 0, 2, 2);
	assert_int_equal(f->h.state.batch_size, 512);
	norms(f, 3, 0, 4, 0);
	run(f, 0);
	run(f, 1);
	/* fc.weight's norm is 0: critical to accordion (r=inf), nothing to
	 * the model norm. */
	SUP_ASSERT_LEVELS(f->h.state.level, 1, 0, 1, 2);
	assert_int_equal(f->h.state.batch_size, 4096);
	assert_string_equal(f->h.policies, "accordion,accordion_batch");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(
		    test_registry_lists_both_modes_and_they_pass_its_checks),
#define T(name) cmocka_unit_test_setup_teardown(name, setup, sup_fixture_free)
		T(test_accordion_starts_every_selected_layer_critical),
		T(test_accordion_interval_1_compares_with_the_window_before),
		T(test_accordion_interval_10_checks_each_tenth_vs_ten_back),
		T(test_accordion_treats_a_zero_previous_norm_as_critical),
		T(test_accordion_lr_drop_holds_critical_until_the_next_check),
		T(test_accordion_leaves_layers_its_selector_excludes_raw),
		T(test_accordion_norm_source_mean_reads_the_mean_over_ranks),
		T(test_accordion_uses_the_mean_when_rank0_did_not_report),
		T(test_accordion_keeps_levels_when_a_norm_is_missing),
		T(test_accordion_records_each_judged_r_and_the_eta_at_a_check),
		T(test_accordion_reload_keeps_the_norms_recorded_before_it),
		T(test_accordion_reload_of_interval_keeps_the_norms_that_fit),
		T(test_accordion_reload_to_a_longer_interval_lacks_old_norms),
		T(test_accordion_reload_of_levels_applies_from_the_next_window),
		T(test_accordion_reload_through_the_host_keeps_the_instance),
		T(test_accordion_refuses_an_unknown_norm_source),
		T(test_accordion_config_refuses_parameters_out_of_range),
		T(test_accordion_cuts_a_long_reason_between_layer_names),
		T(test_accordion_refuses_a_history_beyond_its_limit),
		T(test_accordion_refuses_a_window_of_another_layer_table),
		T(test_batch_switches_between_the_two_sizes_and_scales_the_lr),
		T(test_batch_model_norm_covers_every_layer_by_default),
		T(test_batch_model_norm_covers_only_the_layers_a_set_selector_picks),
		T(test_batch_warms_the_lr_up_linearly_and_says_so_every_window),
		T(test_batch_warm_up_multiplies_the_batch_scaling),
		T(test_batch_lr_drop_holds_the_small_batch_until_next_check),
		T(test_batch_per_step_compares_norms_divided_by_steps),
		T(test_batch_keeps_its_regime_without_a_model_norm),
		T(test_batch_reload_keeps_the_norms_and_applies_new_sizes),
		T(test_batch_refuses_an_unknown_norm_source),
		T(test_both_modes_run_side_by_side_in_one_job),
#undef T
	};

	return cmocka_run_group_tests_name("accordion", tests, NULL, NULL);
}
