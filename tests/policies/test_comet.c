/* test_comet - the comet and comet_batch policies against bounds, periods
 * and batches computed by hand.
 *
 * Most tests drive the policies through the controller's policy host with
 * a YAML file from a temporary directory, as bellowsd does, so parameter
 * tables, layer selectors, config checks and metrics take part. Reloads,
 * clamping and batch plans call the ops directly. Windows are contiguous
 * runs of `steps` steps; the decision that closes window w is in force
 * from window w + 1. With the paper's defaults (sigma_frac 0.01, a 0.32),
 * M 1e-3, Lbar 1e-3, N 128 and R 0.5 give eb = 1e-5 / 2.56e-3 = 3.90625e-3.
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
 * default selector (min_ndim 2) picks layers 0, 2 and 3, and comet's own
 * min_ndim (4) leaves the fully connected weight out. */
static const com_layer_info *const layers = sup_conv_layers;

/* One layer's statistics in the next windows. */
typedef struct stats {
	uint64_t steps; /* act_steps, 0 = not measured */
	double m;       /* momentum_abs_mean */
	double lbar;    /* act_lbar */
	double r;       /* act_nonzero */
	double bytes;   /* act_bytes */
	double raw;     /* act_raw_bytes */
} stats;

typedef struct fixture {
	sup_host h;         /* files, host and direct driving */
	stats st[N_LAYERS]; /* next windows: per layer */
	uint64_t steps;     /* next windows: steps each */
	uint32_t batch;     /* next windows: the trainer's batch while none
			     * is proposed */
	double mem_used;    /* next windows: device in use */
	double mem_total;   /* next windows: device total */
	double host_used;   /* next windows: host in use */
	double saved;       /* next windows: bytes a step saved for
			     * backward, 0 = not reported */
	uint64_t next_step; /* first step of the next window */
} fixture;

static int
setup(void **state)
{
	fixture *f = sup_fixture_new(sizeof(*f), "comet", layers, N_LAYERS);

	if (f == NULL)
		return -1;
	f->steps = 100;
	f->batch = 128;
	*state = f;
	return 0;
}

/* Sets layer l's statistics for the next windows (measured every step),
 * with 1000 raw bytes per sample stored at ratio 10. */
static void
measure(fixture *f, uint32_t l, double m, double lbar, double r)
{
	f->st[l] = (stats){ .steps = f->steps,
		.m = m,
		.lbar = lbar,
		.r = r,
		.bytes = 100.0 * f->batch,
		.raw = 1000.0 * f->batch };
}

static bellows_window
window(fixture *f, uint64_t index, const double *bound, uint32_t batch,
    double lr_scale)
{
	bellows_window w = sup_window(&f->h, index);

	for (uint32_t l = 0; l < N_LAYERS; l++) {
		bellows_window_layer *wl = &f->h.wl[l];

		wl->selected = f->h.sel[l];
		wl->momentum_abs_mean = f->st[l].m;
		wl->error_bound = bound[l];
		wl->act_steps = f->st[l].steps;
		wl->act_lbar = f->st[l].lbar;
		wl->act_nonzero = f->st[l].r;
		wl->act_bytes = f->st[l].bytes;
		wl->act_raw_bytes = f->st[l].raw;
	}
	w.first_step = f->next_step;
	w.last_step = f->next_step + f->steps - 1;
	w.batch_size = batch > 0 ? batch : f->batch;
	w.lr_scale = lr_scale;
	w.mem_device_used = f->mem_used;
	w.mem_device_total = f->mem_total;
	w.mem_host_used = f->host_used;
	w.saved_bytes = f->saved;
	return w;
}

/* Runs the host's set on window `index`; the reasons land in f->h.why. */
static void
run(fixture *f, uint64_t index)
{
	bellows_window w = window(f, index, f->h.state.error_bound,
	    f->h.state.batch_size, f->h.state.lr_scale);

	sup_run(&f->h, &w);
	f->next_step += f->steps;
}

/* Runs windows from..to (inclusive) and expects no reason from them. */
static void
run_quiet(fixture *f, uint64_t from, uint64_t to)
{
	for (uint64_t w = from; w <= to; w++) {
		run(f, w);
		sup_assert_quiet(&f->h, w);
	}
}

static void
assert_close(double got, double want)
{
	sup_assert_near(got, want, 1e-12);
}

/* Eq. 3 with the defaults. */
static double
eq3(double m, double lbar, double n, double r)
{
	return 0.01 * m / (0.32 * lbar * sqrt(n * r));
}

/* ---- direct driving ------------------------------------------------- */

/* Runs the directly driven policy on window `index`; as the host does,
 * the proposal starts from the state in force with no metrics. */
static int
direct_run(fixture *f, uint64_t index)
{
	bellows_window w = window(f, index, f->h.bound, f->h.prop.batch_size,
	    f->h.prop.lr_scale);
	int r = sup_direct_run(&f->h, &w);

	f->next_step += f->steps;
	return r;
}

static void
direct_run_ok(fixture *f, uint64_t from, uint64_t to)
{
	for (uint64_t w = from; w <= to; w++)
		assert_int_equal(direct_run(f, w), 0);
}

/* Runs the directly driven comet_batch on window `w` and expects batch
 * `batch` with `part` in the reason. */
static void
expect_batch(fixture *f, uint64_t w, uint32_t batch, const char *part)
{
	assert_int_equal(direct_run(f, w), 0);
	assert_int_equal(f->h.prop.batch_size, batch);
	sup_assert_contains(f->h.prop.reason, part);
}

/* ---- registry ------------------------------------------------------ */

static void
test_registry_lists_both_modes_and_they_pass_its_checks(void **state)
{
	(void)state;
	sup_assert_registered("comet", &pol_comet_ops,
	    BELLOWS_KNOB_ERROR_BOUND);
	sup_assert_registered("comet_batch", &pol_comet_batch_ops,
	    BELLOWS_KNOB_ERROR_BOUND | BELLOWS_KNOB_BATCH_SIZE |
		BELLOWS_KNOB_LR_SCALE);
}

/* ---- the bound ----------------------------------------------------- */

static void
test_comet_gives_the_papers_worked_example_through_the_host(void **state)
{
	fixture *f = *state;
	const com_metric *met;
	uint32_t n_met = 0;
	bool seen_w = false, seen_eb = false;

	sup_load(&f->h,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: comet\n");
	assert_int_equal(sup_start(&f->h), 0);
	for (uint32_t l = 0; l < N_LAYERS; l++)
		assert_true(f->h.state.error_bound[l] == 0);
	assert_string_equal(f->h.reason,
	    "2 layers stored exactly until the first statistics; W 1000 "
	    "steps");

	/* The first statistics set the bounds at once; conv2 has none. */
	measure(f, 0, 1e-3, 1e-3, 0.5);
	measure(f, 3, 1e-3, 1e-3, 0.5);
	run(f, 0);
	assert_close(f->h.state.error_bound[0], 3.90625e-3);
	assert_true(f->h.state.error_bound[1] == 0);
	assert_true(f->h.state.error_bound[2] == 0);
	assert_true(f->h.state.error_bound[3] == 0);
	assert_string_equal(f->h.policies, "comet");
	assert_string_equal(f->h.why,
	    "update 1 after step 99 (1 window, 100 steps): W 1000; 1 layer "
	    "kept without statistics; conv1.weight eb 0.00391 (M 0.001, Lbar "
	    "0.001, N 128, R 0.5)");

	met = ctl_policy_set_metrics(f->h.set, &n_met);
	for (uint32_t i = 0; i < n_met; i++) {
		assert_string_equal(met[i].policy, "comet");
		if (strcmp(met[i].name, "window_steps") == 0) {
			assert_int_equal(met[i].layer, -1);
			assert_true(met[i].value == 1000);
			seen_w = true;
		} else if (strcmp(met[i].name, "eb") == 0 &&
		    met[i].layer == 0) {
			assert_close(met[i].value, 3.90625e-3);
			seen_eb = true;
		}
	}
	assert_true(seen_w && seen_eb);
	assert_int_equal(n_met, 3); /* window_steps, eb of conv1 and conv2 */

	/* Between updates the bounds stay and nothing is said. */
	run_quiet(f, 1, 8);
	assert_close(f->h.state.error_bound[0], 3.90625e-3);
}

static void
test_comet_clamps_degenerate_statistics_to_the_range(void **state)
{
	fixture *f = *state;

	sup_load(&f->h,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: comet\n"
	    "        params: {interval_steps: 100, min_interval_steps: 100}\n");
	assert_int_equal(sup_direct_start(&f->h, f->h.cfg), 0);

	/* Lbar 0 and R 0: nothing to protect, eb_max. */
	measure(f, 0, 1e-3, 0, 0.5);
	measure(f, 2, 1e-3, 1e-3, 0);
	assert_int_equal(direct_run(f, 0), 0);
	assert_true(f->h.bound[0] == 0.1);
	assert_true(f->h.bound[2] == 0.1);
	sup_assert_contains(f->h.prop.reason,
	    "conv1.weight eb 0.1 (M 0.001, Lbar 0, N 128, R 0.5: eb_max), "
	    "conv2.weight eb 0.1 (M 0.001, Lbar 0.001, N 128, R 0: eb_max)");

	/* A NaN momentum or a negative Lbar: the safe end, eb_min. */
	measure(f, 0, NAN, 1e-3, 0.5);
	measure(f, 2, 1e-3, -1, 0.5);
	assert_int_equal(direct_run(f, 1), 0);
	assert_true(f->h.bound[0] == 1e-6);
	assert_true(f->h.bound[2] == 1e-6);
	sup_assert_contains(f->h.prop.reason,
	    "conv1.weight eb 1e-06 (M nan, Lbar 0.001, N 128, R 0.5: not "
	    "usable, eb_min)");

	/* Eq. 3 beyond either end. */
	measure(f, 0, 1, 1e-3, 0.5);
	measure(f, 2, 1e-10, 1e-3, 0.5);
	assert_int_equal(direct_run(f, 2), 0);
	assert_true(f->h.bound[0] == 0.1);
	assert_true(f->h.bound[2] == 1e-6);
	sup_assert_contains(f->h.prop.reason,
	    "R 0.5: eb_max), conv2.weight eb "
	    "1e-06 (M 1e-10, Lbar 0.001, N 128, "
	    "R 0.5: eb_min)");
}

static void
test_comet_bound_of_a_period_comes_from_its_own_windows(void **state)
{
	fixture *f = *state;

	sup_load(&f->h,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: comet\n"
	    "        params: {interval_steps: 200, min_interval_steps: 100}\n");
	assert_int_equal(sup_direct_start(&f->h, f->h.cfg), 0);
	measure(f, 0, 1e-3, 1e-3, 0.5);
	assert_int_equal(direct_run(f, 0), 0);
	assert_close(f->h.bound[0], eq3(1e-3, 1e-3, 128, 0.5));

	/* Window 1 alone spans 100 < 200 steps: no update, and its
	 * statistics wait for the period's end. */
	measure(f, 0, 2e-3, 1e-3, 0.25);
	assert_int_equal(direct_run(f, 1), 0);
	assert_string_equal(f->h.prop.reason, "");
	assert_close(f->h.bound[0], eq3(1e-3, 1e-3, 128, 0.5));

	/* Window 2 closes the period: the means of windows 1 and 2 (not
	 * window 0) set the next bound. */
	measure(f, 0, 4e-3, 3e-3, 0.75);
	assert_int_equal(direct_run(f, 2), 0);
	assert_close(f->h.bound[0], eq3(3e-3, 2e-3, 128, 0.5));
	sup_assert_contains(f->h.prop.reason,
	    "update 2 after step 299 (2 windows, 200 steps): max change 1.5x, "
	    "W 200; 1 layer kept without statistics; conv1.weight eb 0.00586 "
	    "(M 0.003, Lbar 0.002, N 128, R 0.5)");

	/* A window that did not measure a layer does not dilute it. */
	f->st[0].steps = 0;
	assert_int_equal(direct_run(f, 3), 0);
	measure(f, 0, 1e-3, 1e-3, 0.5);
	assert_int_equal(direct_run(f, 4), 0);
	assert_close(f->h.bound[0], eq3(1e-3, 1e-3, 128, 0.5));
}

static void
test_comet_keeps_bounds_and_waits_while_nothing_is_measured(void **state)
{
	fixture *f = *state;

	sup_load(&f->h,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: comet\n"
	    "        params: {eb_initial: 0.01, interval_steps: 200}\n");
	assert_int_equal(sup_start(&f->h), 0);
	assert_true(f->h.state.error_bound[0] == 0.01);
	assert_true(f->h.state.error_bound[2] == 0.01);
	assert_true(f->h.state.error_bound[3] == 0); /* fc: 2-D */
	assert_string_equal(f->h.reason,
	    "2 layers at bound 0.01 until the first statistics; W 200 steps");
	run_quiet(f, 0, 4);
	assert_true(f->h.state.error_bound[0] == 0.01);

	/* The first statistics, at window 5, update at once. */
	measure(f, 2, 1e-3, 1e-3, 0.5);
	run(f, 5);
	assert_true(f->h.state.error_bound[0] == 0.01);
	assert_close(f->h.state.error_bound[2], 3.90625e-3);
	sup_assert_contains(f->h.why,
	    "update 1 after step 599 (6 windows, 600 "
	    "steps)");
}

/* ---- W -------------------------------------------------------------- */

static void
test_comet_halves_w_on_large_changes_and_restores_it_once_settled(void **state)
{
	static const struct {
		uint64_t window; /* the window that closes an update */
		double m;        /* the momentum of its period */
		uint64_t w;      /* W after it */
		const char *why; /* expected in its reason */
	} upd[] = {
		{ 4, 4e-3, 20, "max change 4x > 2, W 40 -> 20" },
		{ 6, 1.6e-2, 10, "max change 4x > 2, W 20 -> 10" },
		{ 7, 6.4e-2, 10, "max change 4x > 2, W 10 (the minimum)" },
		{ 8, 6.4e-2, 10, "max change 1x, W 10" },
		{ 9, 1.28e-1, 40,
		    "max change 2x, settled (2 updates within 2x), W 10 -> "
		    "40" },
		{ 13, 1.28e-1, 40, "max change 1x, W 40" },
	};
	fixture *f = *state;
	uint64_t next = 1;

	f->steps = 10;
	sup_load(&f->h,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: comet\n"
	    "        params: {interval_steps: 40, min_interval_steps: 10, "
	    "settle_updates: 2}\n");
	assert_int_equal(sup_direct_start(&f->h, f->h.cfg), 0);
	measure(f, 0, 1e-3, 0.1, 0.5);
	assert_int_equal(direct_run(f, 0), 0);
	sup_assert_contains(f->h.prop.reason,
	    "update 1 after step 9 (1 window, "
	    "10 steps): W 40;");
	assert_true(sup_metric(&f->h.prop, "window_steps", -1) == 40);

	for (size_t i = 0; i < sizeof(upd) / sizeof(upd[0]); i++) {
		measure(f, 0, upd[i].m, 0.1, 0.5);
		for (; next < upd[i].window; next++) {
			assert_int_equal(direct_run(f, next), 0);
			if (f->h.prop.reason[0] != '\0')
				fail_msg("window %llu: unexpected '%s'",
				    (unsigned long long)next, f->h.prop.reason);
		}
		assert_int_equal(direct_run(f, next++), 0);
		sup_assert_contains(f->h.prop.reason, upd[i].why);
		assert_close(f->h.bound[0], eq3(upd[i].m, 0.1, 128, 0.5));
		if (sup_metric(&f->h.prop, "window_steps", -1) !=
		    (double)upd[i].w)
			fail_msg("update %zu: W %g, expected %llu", i,
			    sup_metric(&f->h.prop, "window_steps", -1),
			    (unsigned long long)upd[i].w);
	}
}

/* ---- comet_batch ---------------------------------------------------- */

/* Starts comet_batch with `params` (one W per 100-step window), runs the
 * first update, then sets a 16 GB device with 6 GB in use at batch 128
 * and 1.28 GB stored activations (1e7 bytes per sample): the fixed part
 * is 4.72 GB, 95 % of the device 15.2 GB, so (15.2 - 4.72) / 0.01 = 1048
 * samples fit. */
static void
batch_start(fixture *f, const char *params)
{
	char text[512];

	snprintf(text, sizeof(text),
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: comet_batch\n"
	    "        params: {interval_steps: 100, min_interval_steps: 100%s}\n",
	    params);
	sup_load(&f->h, text);
	assert_int_equal(sup_direct_start(&f->h, f->h.cfg), 0);
	assert_int_equal(f->h.prop.batch_size, 0);
	assert_true(f->h.prop.lr_scale == 1);
	measure(f, 0, 1e-3, 1e-3, 0.5);
	measure(f, 2, 1e-3, 1e-3, 0.5);
	f->st[0].bytes = 8e8;
	f->st[2].bytes = 4.8e8;
	f->st[0].raw = 8e9;
	f->st[2].raw = 4.8e9;
	f->mem_total = 16e9;
	f->mem_used = 6e9;
	/* The first W runs at the trainer's batch. */
	expect_batch(f, 0, 0, "update 1 after step 99");
	assert_null(strstr(f->h.prop.reason, "batch"));
}

static void
test_batch_picks_the_largest_power_of_two_that_fits(void **state)
{
	fixture *f = *state;

	batch_start(f, "");
	assert_int_equal(direct_run(f, 1), 0);
	assert_int_equal(f->h.prop.batch_size, 1024);
	assert_true(f->h.prop.lr_scale == 1); /* lr_scaling none */
	/* Re-derived for the new batch. */
	assert_close(f->h.bound[0], eq3(1e-3, 1e-3, 1024, 0.5));
	assert_close(f->h.bound[2], eq3(1e-3, 1e-3, 1024, 0.5));
	assert_string_equal(f->h.prop.reason,
	    "update 2 after step 199 (1 window, 100 steps): max change 1x, W "
	    "100; batch 128 -> 1024: predicted 15 GB of 15.2 GB allowed (16 "
	    "GB device), 4.72 GB fixed + 10 MB/sample saved (10 MB conv "
	    "inputs at ratio 10; nothing else reported); 2 bounds in "
	    "[0.00138, 0.00138]; conv1.weight eb 0.00138 (M 0.001, Lbar "
	    "0.001, N 1024, R 0.5), "
	    "conv2.weight eb 0.00138 (M 0.001, Lbar 0.001, N 1024, R 0.5)");

	/* Measured again at 1024, the same per-sample figures: kept. */
	f->batch = 1024;
	f->st[0].bytes = 6.4e9;
	f->st[2].bytes = 3.84e9;
	f->mem_used = 4.72e9 + 1.024e10;
	expect_batch(f, 2, 1024, "; batch 1024 kept: predicted 15 GB");
}

static void
test_batch_counts_every_saved_activation_not_only_the_conv_inputs(void **state)
{
	fixture *f = *state;

	batch_start(f, "");
	/* At 128 the conv inputs are stored in 1.28 GB (10 MB/sample) and
	 * the step saved 3.84 GB in all: 20 MB/sample more (ReLU outputs,
	 * pooling indices, ...). Conv inputs alone give fixed 6 - 1.28 =
	 * 4.72 GB and 1024 (4.72 + 10.24 = 14.96 GB), which really needs
	 * 2.16 + 1024 * 30 MB = 32.9 GB of the 16 GB. With everything:
	 * fixed 6 - 3.84 = 2.16 GB; 512 needs 2.16 + 15.36 = 17.52 GB >
	 * 15.2 GB allowed, 256 needs 2.16 + 7.68 = 9.84 GB. */
	f->saved = 3.84e9;
	expect_batch(f, 1, 256,
	    "batch 128 -> 256: predicted 9.84 GB of 15.2 GB allowed (16 GB "
	    "device), 2.16 GB fixed + 30 MB/sample saved (10 MB conv inputs "
	    "at ratio 10)");
	assert_close(f->h.bound[0], eq3(1e-3, 1e-3, 256, 0.5));

	/* Measured again at 256, the same per-sample figures: kept. */
	f->batch = 256;
	f->st[0].bytes = 1.6e9;
	f->st[2].bytes = 0.96e9;
	f->saved = 7.68e9;
	f->mem_used = 2.16e9 + 7.68e9;
	expect_batch(f, 2, 256, "; batch 256 kept: predicted 9.84 GB");
}

static void
test_batch_is_capped_by_max_batch(void **state)
{
	fixture *f = *state;

	batch_start(f, ", max_batch: 512");
	expect_batch(f, 1, 512, "batch 128 -> 512: predicted 9.84 GB");
}

static void
test_batch_goes_below_the_initial_only_when_memory_forces_it(void **state)
{
	fixture *f = *state;

	batch_start(f, "");
	/* 15.5 GB in use at 128: fixed 14.22 GB, 128 needs 15.5 > 15.2,
	 * 64 needs 14.86. */
	f->mem_used = 15.5e9;
	expect_batch(f, 1, 64,
	    "batch 128 -> 64 (memory forces it below the initial): predicted "
	    "14.9 GB");
	assert_close(f->h.bound[0], eq3(1e-3, 1e-3, 64, 0.5));
}

static void
test_batch_is_kept_when_nothing_fits_or_no_limit_is_known(void **state)
{
	fixture *f = *state;

	batch_start(f, "");
	f->mem_used = 17e9;
	expect_batch(f, 1, 0,
	    "batch kept: none fits (15.7 GB fixed, 0.01 GB/sample, 15.2 GB "
	    "allowed of 16 GB device)");
	assert_close(f->h.bound[0], eq3(1e-3, 1e-3, 128, 0.5));

	/* A CPU job: no device total, and no memory_bytes. */
	f->mem_total = 0;
	f->mem_used = 0;
	f->host_used = 6e9;
	expect_batch(f, 2, 0,
	    "batch kept: no device memory total reported and memory_bytes 0");
}

static void
test_batch_uses_memory_bytes_and_host_memory_without_a_device(void **state)
{
	fixture *f = *state;

	batch_start(f, ", memory_bytes: 8000000000");
	f->mem_total = 0;
	f->mem_used = 0;
	/* 3 GB host in use: fixed 1.72 GB; 0.95 * 8 GB = 7.6 GB; 588 fit. */
	f->host_used = 3e9;
	expect_batch(f, 1, 512,
	    "batch 128 -> 512: predicted 6.84 GB of 7.6 GB allowed (8 GB "
	    "memory_bytes)");
}

static void
test_batch_scales_the_lr_as_configured(void **state)
{
	fixture *f = *state;

	batch_start(f, ", lr_scaling: linear");
	assert_int_equal(direct_run(f, 1), 0);
	assert_int_equal(f->h.prop.batch_size, 1024);
	assert_true(f->h.prop.lr_scale == 8);
	sup_assert_contains(f->h.prop.reason, "; LR scale 1 -> 8 (linear); ");
	sup_direct_stop(&f->h);
	ctl_config_destroy(&f->h.cfg);
	f->next_step = 0;

	batch_start(f, ", lr_scaling: sqrt");
	assert_int_equal(direct_run(f, 1), 0);
	assert_int_equal(f->h.prop.batch_size, 1024);
	assert_close(f->h.prop.lr_scale, sqrt(8));
	sup_assert_contains(f->h.prop.reason,
	    "; LR scale 1 -> 2.82843 (sqrt); ");
}

static void
test_batch_runs_through_the_host_with_its_knobs(void **state)
{
	fixture *f = *state;

	sup_load(&f->h,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: comet_batch\n"
	    "        params: {interval_steps: 200, lr_scaling: linear, "
	    "max_batch: 256}\n");
	assert_int_equal(sup_start(&f->h), 0);
	measure(f, 0, 1e-3, 1e-3, 0.5);
	f->mem_total = 16e9;
	f->mem_used = 2e9;
	run(f, 0);
	assert_int_equal(f->h.state.batch_size, 0);
	run_quiet(f, 1, 1);
	run(f, 2);
	assert_int_equal(f->h.state.batch_size, 256);
	assert_true(f->h.state.lr_scale == 2);
	assert_close(f->h.state.error_bound[0], eq3(1e-3, 1e-3, 256, 0.5));
	assert_string_equal(f->h.policies, "comet_batch");
	sup_assert_contains(f->h.why, "batch 128 -> 256");
}

/* ---- many layers ---------------------------------------------------- */

#define MANY 300

typedef struct many_layers {
	char names[MANY][48];          /* long, distinct names */
	bellows_window_layer wl[MANY]; /* job and window layers */
	double level[MANY];            /* proposal levels */
	double bound[MANY];            /* proposal bounds */
} many_layers;

static void
test_comet_cuts_a_long_reason_between_layers_and_caps_metrics(void **state)
{
	static const char yaml[] = "jobs:\n"
				   "  - policies:\n"
				   "      - type: comet\n";
	static const uint32_t shape[4] = { 64, 64, 3, 3 };
	many_layers *m = calloc(1, sizeof(*m));
	bellows_proposal p = { .n_layers = MANY, .lr_scale = 1 };
	bellows_job_info job = { .job = "job", .world = 1, .n_layers = MANY };
	bellows_window w = { .job = "job",
		.last_step = 99,
		.batch_size = 128,
		.world = 1,
		.ranks_reported = 1,
		.n_layers = MANY };
	char err[CTL_CONFIG_ERR_MAX];
	ctl_config *cfg = NULL;
	const void *config;
	void *st;
	size_t len;

	(void)state;
	assert_non_null(m);
	for (uint32_t l = 0; l < MANY; l++) {
		snprintf(m->names[l], sizeof(m->names[l]),
		    "features.block%03u.conv.weight", l);
		m->wl[l] = (bellows_window_layer){ .name = m->names[l],
			.numel = 36864,
			.ndim = 4,
			.shape = shape,
			.selected = true,
			.momentum_abs_mean = 1e-3,
			.act_steps = 100,
			.act_lbar = 1e-3,
			.act_nonzero = 0.5 };
	}
	p.level = m->level;
	p.error_bound = m->bound;
	job.layers = m->wl;
	w.layers = m->wl;
	assert_int_equal(ctl_config_parse(yaml, strlen(yaml), "many.yaml", &cfg,
			     err, sizeof(err)),
	    0);
	config = cfg->jobs[0].policies[0].config;
	st = calloc(1, pol_comet_ops.state_size);
	assert_non_null(st);
	assert_int_equal(pol_comet_ops.init(st, config, &job, &p), 0);
	p.reason[0] = '\0';
	assert_int_equal(pol_comet_ops.on_window(st, config, &w, &p), 0);

	/* Every layer has its bound, whatever the reason could hold. */
	for (uint32_t l = 0; l < MANY; l++)
		assert_close(m->bound[l], 3.90625e-3);
	len = strlen(p.reason);
	assert_true(len < BELLOWS_REASON_MAX);
	assert_string_equal(p.reason + len - 4, " ...");
	sup_assert_contains(p.reason,
	    "update 1 after step 99 (1 window, 100 steps): W 1000; 300 bounds "
	    "in [0.00391, 0.00391]; features.block000.conv.weight eb 0.00391 "
	    "(M 0.001, Lbar 0.001, N 128, R 0.5), features.block001");
	sup_assert_contains(p.reason, "R 0.5) ...");
	/* window_steps first, then as many bounds as fit. */
	assert_int_equal(p.n_metrics, BELLOWS_METRICS_MAX);
	assert_string_equal(p.metrics[0].name, "window_steps");
	assert_string_equal(p.metrics[BELLOWS_METRICS_MAX - 1].name, "eb");
	assert_int_equal(p.metrics[BELLOWS_METRICS_MAX - 1].layer,
	    BELLOWS_METRICS_MAX - 2);

	pol_comet_ops.fini(st, config);
	free(st);
	ctl_config_destroy(&cfg);
	free(m);
}

/* ---- reload --------------------------------------------------------- */

static void
test_reload_keeps_the_period_w_and_bounds(void **state)
{
	fixture *f = *state;

	f->steps = 10;
	sup_load(&f->h,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: comet_batch\n"
	    "        params: {interval_steps: 40, min_interval_steps: 10}\n");
	sup_load_file(f->h.path2,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: comet_batch\n"
	    "        params: {interval_steps: 80, min_interval_steps: 10, "
	    "sigma_frac: 0.02, lr_scaling: sqrt}\n",
	    &f->h.cfg2);
	assert_int_equal(sup_direct_start(&f->h, f->h.cfg), 0);
	f->mem_total = 16e9;
	f->mem_used = 6e9;
	measure(f, 0, 1e-3, 0.1, 0.5);
	direct_run_ok(f, 0, 0);
	measure(f, 0, 4e-3, 0.1, 0.5);
	direct_run_ok(f, 1, 4);
	/* Halved to 20, and the batch went to 4096 (tiny activations). */
	assert_true(sup_metric(&f->h.prop, "window_steps", -1) == 20);
	assert_int_equal(f->h.prop.batch_size, 4096);
	assert_true(f->h.prop.lr_scale == 1);

	/* Window 5 is half a period; the reload keeps it, W stays halved
	 * (within the new limits) and the LR follows the new mode. */
	direct_run_ok(f, 5, 5);
	assert_int_equal(sup_direct_reload(&f->h, 6), 0);
	f->batch = 4096;
	f->st[0].bytes = 100.0 * 4096;
	f->st[0].raw = 1000.0 * 4096;
	assert_int_equal(direct_run(f, 6), 0);
	assert_close(f->h.prop.lr_scale, sqrt(32));
	sup_assert_contains(f->h.prop.reason,
	    "; batch 4096 kept: predicted 6 GB of 15.2 GB allowed");
	sup_assert_contains(f->h.prop.reason, "; LR scale 1 -> 5.65685 (sqrt)");
	sup_assert_contains(f->h.prop.reason,
	    "update 3 after step 69 (2 windows, "
	    "20 steps): max change ");
	/* The new sigma_frac doubles the bound, at N 4096. */
	assert_close(f->h.bound[0], 2 * eq3(4e-3, 0.1, 4096, 0.5));
	assert_int_equal(f->h.prop.batch_size, 4096);
}

static void
test_reload_through_the_host_keeps_the_period_statistics(void **state)
{
	fixture *f = *state;

	sup_load(&f->h,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: comet\n"
	    "        params: {interval_steps: 200}\n");
	sup_load_file(f->h.path2,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: comet\n"
	    "        params: {interval_steps: 200, sigma_frac: 0.02}\n",
	    &f->h.cfg2);
	assert_int_equal(sup_start(&f->h), 0);
	measure(f, 0, 1e-3, 1e-3, 0.5);
	run(f, 0);
	measure(f, 0, 2e-3, 1e-3, 0.5);
	run_quiet(f, 1, 1);

	sup_reload(&f->h, 2);
	assert_close(f->h.state.error_bound[0], 3.90625e-3);

	/* Window 1's statistics survived: M is the mean of 2e-3 and 4e-3,
	 * sigma the new 2 %: 3 x 2 = 6 times the bound before. */
	measure(f, 0, 4e-3, 1e-3, 0.5);
	run(f, 2);
	assert_close(f->h.state.error_bound[0], 2 * eq3(3e-3, 1e-3, 128, 0.5));
	sup_assert_contains(f->h.why,
	    "update 2 after step 299 (2 windows, 200 "
	    "steps): max change 6x > 2, W 200 -> 125");
}

static void
test_reload_moves_bounds_into_a_new_range(void **state)
{
	fixture *f = *state;

	sup_load(&f->h,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: comet\n");
	sup_load_file(f->h.path2,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: comet\n"
	    "        params: {eb_max: 0.001, eb_min: 1e-7}\n",
	    &f->h.cfg2);
	assert_int_equal(sup_direct_start(&f->h, f->h.cfg), 0);
	measure(f, 0, 1e-3, 1e-3, 0.5);
	direct_run_ok(f, 0, 0);
	assert_close(f->h.bound[0], 3.90625e-3);
	assert_int_equal(sup_direct_reload(&f->h, 1), 0);
	assert_int_equal(direct_run(f, 1), 0);
	assert_true(f->h.bound[0] == 0.001);
	assert_true(f->h.bound[2] == 0);
	assert_string_equal(f->h.prop.reason,
	    "bounds from the configuration: conv1.weight eb 0.001, "
	    "conv2.weight eb 0");
}

static void
test_reload_refuses_a_config_it_cannot_run(void **state)
{
	fixture *f = *state;

	sup_load(&f->h,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: comet\n");
	sup_load_file(f->h.path2,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: comet\n",
	    &f->h.cfg2);
	assert_int_equal(sup_direct_start(&f->h, f->h.cfg), 0);
	/* A host that skipped the check: eb_max below eb_min. */
	sup_patch_double(&pol_comet_ops, f->h.cfg2->jobs[0].policies[0].config,
	    "eb_max", 1e-7);
	assert_int_equal(sup_direct_reload(&f->h, 0), BELLOWS_EINVAL);
	assert_int_equal(direct_run(f, 0), 0);
}

/* ---- configuration errors -------------------------------------------- */

static void
test_config_refuses_bad_parameters_with_their_position(void **state)
{
	fixture *f = *state;

	sup_load_refused_exactly(&f->h,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: comet\n"
	    "        params: {eb_min: 0.1, eb_max: 0.01}\n",
	    "3:15: policy 'comet': eb_min (0.1) must be below eb_max (0.01)");
	sup_load_refused_exactly(&f->h,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: comet_batch\n"
	    "        params: {eb_min: 0.01, eb_max: 0.01}\n",
	    "3:15: policy 'comet_batch': eb_min (0.01) must be below eb_max "
	    "(0.01)");
	sup_load_refused_exactly(&f->h,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: comet\n"
	    "        name: bounds\n"
	    "        params: {interval_steps: 100}\n",
	    "3:15: policy 'bounds': min_interval_steps (125) must not exceed "
	    "interval_steps (100)");
	sup_load_refused_exactly(&f->h,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: comet\n"
	    "        params: {eb_initial: 0.5}\n",
	    "3:15: policy 'comet': eb_initial (0.5) must not exceed eb_max "
	    "(0.1)");
}

static void
test_config_refuses_parameters_out_of_range(void **state)
{
	static const struct {
		const char *params;
		const char *why;
	} bad[] = {
		{ "{sigma_frac: 0}",
		    "sigma_frac must be in [1e-09, 1], not 0" },
		{ "{sigma_frac: 2}",
		    "sigma_frac must be in [1e-09, 1], not 2" },
		{ "{a: -0.32}", "a must be in [1e-06, 1e+06], not -0.32" },
		{ "{eb_min: 0}", "eb_min must be in [1e-12, 1e+06], not 0" },
		{ "{interval_steps: 0}",
		    "interval_steps must be in [1, 1000000000], not 0" },
		{ "{min_interval_steps: 0}",
		    "min_interval_steps must be in [1, 1000000000], not 0" },
		{ "{change_factor: 0.5}",
		    "change_factor must be in [1, 1e+06], not 0.5" },
		{ "{settle_updates: 0}",
		    "settle_updates must be in [1, 1000000], not 0" },
		{ "{max_batch: 0}",
		    "max_batch must be in [1, 100000000], not 0" },
		{ "{reserve: 1}", "reserve must be in [0, 0.99], not 1" },
		{ "{memory_bytes: -1}",
		    "memory_bytes must be in [0, 1000000000000000], not "
		    "-1" },
		{ "{lr_scaling: cubic}",
		    "lr_scaling must be one of none, linear, sqrt, not "
		    "'cubic'" },
	};
	fixture *f = *state;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char text[256], err[CTL_CONFIG_ERR_MAX] = "";
		ctl_config *cfg = NULL;

		snprintf(text, sizeof(text),
		    "jobs:\n"
		    "  - policies:\n"
		    "      - type: comet_batch\n"
		    "        params: %s\n",
		    bad[i].params);
		sup_write_file(f->h.path, text);
		assert_int_equal(ctl_config_load(f->h.path, &cfg, err,
				     sizeof(err)),
		    BELLOWS_ECONFIG);
		assert_null(cfg);
		if (strncmp(err, f->h.path, strlen(f->h.path)) != 0 ||
		    strstr(err, bad[i].why) == NULL)
			fail_msg("%s: expected '%s' in '%s'", bad[i].params,
			    bad[i].why, err);
	}
}

static void
test_init_refuses_a_config_the_host_did_not_check(void **state)
{
	fixture *f = *state;

	sup_load(&f->h,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: comet_batch\n"
	    "        name: cb\n");
	sup_patch_string(&pol_comet_batch_ops,
	    f->h.cfg->jobs[0].policies[0].config, "lr_scaling", "cubic");
	sup_start_refused(&f->h, "cb");
}

static void
test_comet_refuses_a_window_of_another_layer_table(void **state)
{
	fixture *f = *state;
	bellows_window w;

	sup_load(&f->h,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: comet\n");
	assert_int_equal(sup_direct_start(&f->h, f->h.cfg), 0);
	w = window(f, 0, f->h.bound, 0, 1);
	w.n_layers = N_LAYERS - 1;
	assert_int_equal(f->h.ops->on_window(f->h.pstate, f->h.config, &w,
			     &f->h.prop),
	    BELLOWS_EMISMATCH);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(
		    test_registry_lists_both_modes_and_they_pass_its_checks),
#define T(name) cmocka_unit_test_setup_teardown(name, setup, sup_fixture_free)
		T(test_comet_gives_the_papers_worked_example_through_the_host),
		T(test_comet_clamps_degenerate_statistics_to_the_range),
		T(test_comet_bound_of_a_period_comes_from_its_own_windows),
		T(test_comet_keeps_bounds_and_waits_while_nothing_is_measured),
		T(test_comet_halves_w_on_large_changes_and_restores_it_once_settled),
		T(test_batch_picks_the_largest_power_of_two_that_fits),
		T(test_batch_counts_every_saved_activation_not_only_the_conv_inputs),
		T(test_batch_is_capped_by_max_batch),
		T(test_batch_goes_below_the_initial_only_when_memory_forces_it),
		T(test_batch_is_kept_when_nothing_fits_or_no_limit_is_known),
		T(test_batch_uses_memory_bytes_and_host_memory_without_a_device),
		T(test_batch_scales_the_lr_as_configured),
		T(test_batch_runs_through_the_host_with_its_knobs),
		T(test_comet_cuts_a_long_reason_between_layers_and_caps_metrics),
		T(test_reload_keeps_the_period_w_and_bounds),
		T(test_reload_through_the_host_keeps_the_period_statistics),
		T(test_reload_moves_bounds_into_a_new_range),
		T(test_reload_refuses_a_config_it_cannot_run),
		T(test_config_refuses_bad_parameters_with_their_position),
		T(test_config_refuses_parameters_out_of_range),
		T(test_init_refuses_a_config_the_host_did_not_check),
		T(test_comet_refuses_a_window_of_another_layer_table),
#undef T
	};

	return cmocka_run_group_tests_name("comet", tests, NULL, NULL);
}
