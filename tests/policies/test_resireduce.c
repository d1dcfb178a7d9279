/* test_resireduce - the resireduce policy on synthetic residual
 * statistics, through the controller's policy host with a YAML file as
 * bellowsd runs it.
 *
 * The job: three convolutions of one shape with their biases between
 * them (a candidate group of three), a convolution of another shape and a
 * large fully connected weight (ungrouped: the 2-D reduction). The
 * decision that closes window w carries the plan for window w + 1.
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

#include <cmocka.h>

#include <bellows/error.h>

#include "policyhost/config.h"
#include "policies/policies.h"
#include "policyhost/policy_host.h"
#include "policies/registry.h"
#include "support.h"

#define N_LAYERS 7

static const com_layer_info layers[N_LAYERS] = {
	{ .name = "a.weight",
	    .numel = 576,
	    .ndim = 4,
	    .shape = { 16, 4, 3, 3 } },
	{ .name = "a.bias", .numel = 16, .ndim = 1, .shape = { 16 } },
	{ .name = "b.weight",
	    .numel = 576,
	    .ndim = 4,
	    .shape = { 16, 4, 3, 3 } },
	{ .name = "b.bias", .numel = 16, .ndim = 1, .shape = { 16 } },
	{ .name = "c.weight",
	    .numel = 576,
	    .ndim = 4,
	    .shape = { 16, 4, 3, 3 } },
	{ .name = "d.weight",
	    .numel = 288,
	    .ndim = 4,
	    .shape = { 8, 4, 3, 3 } },
	{ .name = "fc.weight",
	    .numel = 65536,
	    .ndim = 2,
	    .shape = { 64, 1024 } },
};

#define A  0
#define B  2
#define C  4
#define D  5
#define FC 6

static const char *const yaml = "jobs:\n"
				"  - match: \"*\"\n"
				"    policies:\n"
				"      - type: resireduce\n"
				"        params:\n"
				"          join_distance: 0.3\n"
				"          split_distance: 0.7\n"
				"          cooldown_windows: 1\n"
				"          pause_windows: 1\n"
				"          reduce_min_numel: 65536\n";

static int
setup(void **state)
{
	void *f = sup_fixture_new(sizeof(sup_host), "resireduce", layers,
	    N_LAYERS);

	if (f == NULL)
		return -1;
	*state = f;
	return 0;
}

/* Layer l's residual statistics of the next window: rms and the
 * quantiles of |r|/rms (a Gaussian's: 0.67, 1.64, 2.58) times `shape`. */
static void
resid(sup_host *h, uint32_t l, double rms, double shape)
{
	bellows_window_layer *wl = &h->wl[l];

	wl->resid_steps = 40;
	wl->resid_l2 = rms * sqrt((double)layers[l].numel);
	wl->resid_l1 = 0.8 * rms * (double)layers[l].numel;
	wl->resid_q50 = 0.67 * shape;
	wl->resid_q90 = 1.64 * shape;
	wl->resid_q99 = 2.58 * shape;
}

/* Every weight with statistics: a, b and c alike unless changed. */
static void
all_alike(sup_host *h)
{
	for (uint32_t l = 0; l < N_LAYERS; l++)
		if (layers[l].ndim >= 2)
			resid(h, l, 1e-3, 1.0);
}

static void
run(sup_host *h, uint64_t index, double lr_next)
{
	bellows_window w = sup_window(h, index);

	w.lr_next = lr_next;
	sup_run(h, &w);
}

/* The plan in force: layer l's group's leader (l when none). */
static uint32_t
group(const sup_host *h, uint32_t l)
{
	return h->state.resid_group != NULL ? h->state.resid_group[l] : l;
}

static void
test_resireduce_groups_adjacent_same_shape_layers_that_agree(void **state)
{
	sup_host *h = *state;

	sup_load(h, yaml);
	assert_int_equal(sup_start(h), 0);
	/* No statistics yet: the default plan, nothing said. */
	run(h, 0, 0.1);
	assert_null(h->state.resid_group);
	sup_assert_quiet(h, 0);
	/* b's scale 1.2x a's: ln 1.2 = 0.18 <= 0.3, the group forms over
	 * the biases between its members; d has another shape; fc is
	 * large and alone: reduced 0.5 x 0.5. */
	all_alike(h);
	resid(h, B, 1.2e-3, 1.0);
	run(h, 1, 0.1);
	assert_non_null(h->state.resid_group);
	assert_int_equal(group(h, A), A);
	assert_int_equal(group(h, B), A);
	assert_int_equal(group(h, C), A);
	assert_int_equal(group(h, 1), 1);
	assert_int_equal(group(h, D), D);
	assert_true(h->state.resid_phi[A] == 0.5);
	assert_true(h->state.resid_rows[FC] == 0.5);
	assert_true(h->state.resid_cols[FC] == 0.5);
	assert_true(h->state.resid_rows[A] == 1.0);
	/* The reason names the group and the memory: of 576 * 3 + 288 +
	 * 65536 floats, 576 + 288 + 32 * 512 + 32 + 512 are kept. */
	assert_non_null(strstr(h->why, "share a.weight..c.weight (d=0.18)"));
	assert_non_null(strstr(h->why, "2-D fc.weight 0.5x0.5"));
	assert_non_null(
	    strstr(h->why, "residual floats 17792 of 67552 (74% saved)"));
	/* Unchanged: nothing said. */
	run(h, 2, 0.1);
	sup_assert_quiet(h, 2);
}

static void
test_resireduce_keeps_apart_layers_whose_residuals_differ(void **state)
{
	sup_host *h = *state;

	sup_load(h, yaml);
	assert_int_equal(sup_start(h), 0);
	all_alike(h);
	/* c's tail is 1.5x heavier: ln 1.5 = 0.41 > 0.3. */
	resid(h, C, 1e-3, 1.5);
	run(h, 0, 0.1);
	assert_int_equal(group(h, B), B);
	assert_int_equal(group(h, C), C);
	assert_null(strstr(h->why, "share"));
}

static void
test_resireduce_splits_when_the_distance_rises_and_waits(void **state)
{
	sup_host *h = *state;

	sup_load(h, yaml);
	assert_int_equal(sup_start(h), 0);
	all_alike(h);
	run(h, 0, 0.1);
	assert_int_equal(group(h, C), A);
	/* 0.5 apart: above join but within split (hysteresis): kept. */
	resid(h, C, 1e-3 * exp(0.5), 1.0);
	run(h, 1, 0.1);
	assert_int_equal(group(h, C), A);
	sup_assert_quiet(h, 1);
	/* 0.9 apart: above split_distance 0.7: split, every member its own
	 * residual back. */
	resid(h, C, 1e-3 * exp(0.9), 1.0);
	run(h, 2, 0.1);
	assert_int_equal(group(h, A), A);
	assert_int_equal(group(h, B), B);
	assert_int_equal(group(h, C), C);
	assert_non_null(
	    strstr(h->why, "split a.weight..c.weight (distance rose)"));
	/* Alike again, but one window of cool-down first. */
	all_alike(h);
	run(h, 3, 0.1);
	assert_int_equal(group(h, C), C);
	run(h, 4, 0.1);
	assert_int_equal(group(h, C), A);
}

static void
test_resireduce_pauses_on_an_lr_drop_and_a_raised_level(void **state)
{
	sup_host *h = *state;

	sup_load(h, yaml);
	assert_int_equal(sup_start(h), 0);
	all_alike(h);
	run(h, 0, 0.1);
	assert_int_equal(group(h, B), A);
	/* The window announces a drop (lr_next < lr): every layer its own
	 * whole residual, for pause_windows = 1 window. */
	run(h, 1, 0.01);
	assert_int_equal(group(h, B), B);
	assert_true(
	    h->state.resid_group == NULL || h->state.resid_rows[FC] == 1.0);
	assert_non_null(strstr(h->why, "paused 1 windows (LR drop)"));
	/* The LR_CHANGE of that drop pauses nothing more: window 2 shares
	 * again (cool-down 1 ended). */
	{
		bellows_window w = sup_window(h, 2);

		w.lr = 0.01;
		w.lr_next = 0.01;
		sup_run(h, &w);
	}
	{
		bellows_window w = sup_window(h, 3);

		w.lr = 0.01;
		w.lr_next = 0.01;
		sup_run(h, &w);
	}
	assert_int_equal(group(h, B), A);
	/* Another policy raises a selected layer's level (Accordion's
	 * critical regime): paused again. */
	{
		bellows_window w = sup_window(h, 4);

		w.lr = 0.01;
		w.lr_next = 0.01;
		h->wl[A].level = 0.5;
		sup_run(h, &w);
	}
	assert_int_equal(group(h, B), B);
	assert_non_null(strstr(h->why, "critical regime"));
}

static void
test_resireduce_refuses_split_below_join(void **state)
{
	sup_host *h = *state;

	sup_load_refused(h,
	    "jobs:\n"
	    "  - match: \"*\"\n"
	    "    policies:\n"
	    "      - type: resireduce\n"
	    "        params: {join_distance: 0.5, split_distance: 0.2}\n",
	    "split_distance 0.2 is below join_distance 0.5");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(
		    test_resireduce_groups_adjacent_same_shape_layers_that_agree,
		    setup, sup_fixture_free),
		cmocka_unit_test_setup_teardown(
		    test_resireduce_keeps_apart_layers_whose_residuals_differ,
		    setup, sup_fixture_free),
		cmocka_unit_test_setup_teardown(
		    test_resireduce_splits_when_the_distance_rises_and_waits,
		    setup, sup_fixture_free),
		cmocka_unit_test_setup_teardown(
		    test_resireduce_pauses_on_an_lr_drop_and_a_raised_level,
		    setup, sup_fixture_free),
		cmocka_unit_test_setup_teardown(
		    test_resireduce_refuses_split_below_join, setup,
		    sup_fixture_free),
	};

	return cmocka_run_group_tests_name("resireduce", tests, NULL, NULL);
}
