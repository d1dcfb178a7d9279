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

#include "config.h"
#include "policies.h"
#include "policy_host.h"
#include "registry.h"

#define N_LAYERS 4

/* Two convolutions, a bias and a fully connected weight: the host's
 * default selector (min_ndim 2) picks layers 0, 2 and 3, and comet's own
 * min_ndim (4) leaves the fully connected weight out. */
static const com_layer_info layers[N_LAYERS] = {
	{ .name = "conv1.weight",
	    .numel = 1728,
	    .ndim = 4,
	    .shape = { 64, 3, 3, 3 } },
	{ .name = "conv1.bias", .numel = 64, .ndim = 1, .shape = { 64 } },
	{ .name = "conv2.weight",
	    .numel = 36864,
	    .ndim = 4,
	    .shape = { 64, 64, 3, 3 } },
	{ .name = "fc.weight", .numel = 640, .ndim = 2, .shape = { 10, 64 } },
};

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
	char dir[64];                      /* private temporary directory */
	char path[128];                    /* dir/policy.yaml */
	char path2[128];                   /* dir/reload.yaml */
	ctl_config *cfg;                   /* configuration started with */
	ctl_config *cfg2;                  /* configuration reloaded */
	ctl_policy_set *set;               /* host-driven instances */
	com_decision state;                /* knob state in force */
	char reason[BELLOWS_REASON_MAX];   /* initial reasons */
	char policies[128];                /* last run: who gave a reason */
	char why[2048];                    /* last run: the reasons */
	stats st[N_LAYERS];                /* next windows: per layer */
	uint64_t steps;                    /* next windows: steps each */
	uint32_t batch;                    /* next windows: the trainer's
					    * batch while none is proposed */
	double mem_used;                   /* next windows: device in use */
	double mem_total;                  /* next windows: device total */
	double host_used;                  /* next windows: host in use */
	uint64_t next_step;                /* first step of the next window */
	bellows_window_layer wl[N_LAYERS]; /* the window's layers */
	/* Direct driving of one policy's ops. */
	const bellows_policy_ops *ops; /* the policy */
	const void *config;            /* its config in force */
	void *pstate;                  /* its state */
	bool started;                  /* init succeeded: fini is due */
	bool sel[N_LAYERS];            /* its layer selection */
	double level[N_LAYERS];        /* the proposal's levels */
	double bound[N_LAYERS];        /* the proposal's error bounds */
	bellows_proposal prop;         /* state in force, then proposed */
} fixture;

static int
setup(void **state)
{
	fixture *f = calloc(1, sizeof(*f));

	if (f == NULL)
		return -1;
	snprintf(f->dir, sizeof(f->dir), "/tmp/bellows-comet-XXXXXX");
	if (mkdtemp(f->dir) == NULL) {
		free(f);
		return -1;
	}
	snprintf(f->path, sizeof(f->path), "%s/policy.yaml", f->dir);
	snprintf(f->path2, sizeof(f->path2), "%s/reload.yaml", f->dir);
	f->steps = 100;
	f->batch = 128;
	*state = f;
	return 0;
}

static void
direct_stop(fixture *f)
{
	if (f->started && f->ops->fini != NULL)
		f->ops->fini(f->pstate, f->config);
	f->started = false;
	free(f->pstate);
	f->pstate = NULL;
}

static int
teardown(void **state)
{
	fixture *f = *state;

	direct_stop(f);
	ctl_policy_set_destroy(&f->set);
	com_decision_fini(&f->state);
	ctl_config_destroy(&f->cfg);
	ctl_config_destroy(&f->cfg2);
	unlink(f->path);
	unlink(f->path2);
	rmdir(f->dir);
	free(f);
	return 0;
}

static void
write_file(const char *path, const char *text)
{
	FILE *fp = fopen(path, "w");

	assert_non_null(fp);
	assert_true(fputs(text, fp) >= 0);
	assert_int_equal(fclose(fp), 0);
}

/* Writes `text` to `path` and loads it as bellowsd would. */
static void
load_file(const char *path, const char *text, ctl_config **ret)
{
	char err[CTL_CONFIG_ERR_MAX];

	write_file(path, text);
	if (ctl_config_load(path, ret, err, sizeof(err)) != 0)
		fail_msg("%s", err);
}

static void
load(fixture *f, const char *text)
{
	load_file(f->path, text, &f->cfg);
}

/* Expects `text` to be refused with exactly "PATH:" + `what`. */
static void
load_refused(fixture *f, const char *text, const char *what)
{
	char err[CTL_CONFIG_ERR_MAX] = "", want[CTL_CONFIG_ERR_MAX];
	ctl_config *cfg = NULL;

	write_file(f->path, text);
	assert_int_equal(ctl_config_load(f->path, &cfg, err, sizeof(err)),
	    BELLOWS_ECONFIG);
	assert_null(cfg);
	snprintf(want, sizeof(want), "%s:%s", f->path, what);
	assert_string_equal(err, want);
}

/* Starts the host's set for the first job entry of f->cfg. */
static int
start(fixture *f)
{
	assert_int_equal(com_decision_init(&f->state, "job", N_LAYERS), 0);
	return ctl_policy_set_new(&f->cfg->jobs[0], "job", 4, layers, N_LAYERS,
	    &f->state, f->reason, sizeof(f->reason), &f->set);
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
	for (uint32_t l = 0; l < N_LAYERS; l++) {
		f->wl[l] = (bellows_window_layer){
			.name = layers[l].name,
			.numel = layers[l].numel,
			.ndim = layers[l].ndim,
			.shape = layers[l].shape,
			.selected = f->sel[l],
			.momentum_abs_mean = f->st[l].m,
			.error_bound = bound[l],
			.act_steps = f->st[l].steps,
			.act_lbar = f->st[l].lbar,
			.act_nonzero = f->st[l].r,
			.act_bytes = f->st[l].bytes,
			.act_raw_bytes = f->st[l].raw,
		};
	}
	return (bellows_window){
		.job = "job",
		.window = index,
		.first_step = f->next_step,
		.last_step = f->next_step + f->steps - 1,
		.lr = 0.1,
		.lr_next = 0.1,
		.batch_size = batch > 0 ? batch : f->batch,
		.lr_scale = lr_scale,
		.world = 4,
		.ranks_reported = 4,
		.n_layers = N_LAYERS,
		.layers = f->wl,
		.mem_device_used = f->mem_used,
		.mem_device_total = f->mem_total,
		.mem_host_used = f->host_used,
	};
}

/* Runs the host's set on window `index`; the reasons land in f->why. */
static void
run(fixture *f, uint64_t index)
{
	bellows_window w = window(f, index, f->state.error_bound,
	    f->state.batch_size, f->state.lr_scale);
	uint32_t failed = 99;

	assert_int_equal(ctl_policy_set_run(f->set, &w, &f->state, f->policies,
			     sizeof(f->policies), f->why, sizeof(f->why),
			     &failed),
	    0);
	assert_int_equal(failed, 0);
	f->next_step += f->steps;
}

/* Runs windows from..to (inclusive) and expects no reason from them. */
static void
run_quiet(fixture *f, uint64_t from, uint64_t to)
{
	for (uint64_t w = from; w <= to; w++) {
		run(f, w);
		if (f->why[0] != '\0')
			fail_msg("window %llu: unexpected reason '%s'",
			    (unsigned long long)w, f->why);
	}
}

static void
assert_contains(const char *text, const char *part)
{
	if (strstr(text, part) == NULL)
		fail_msg("expected '%s' in '%s'", part, text);
}

static void
assert_close(double got, double want)
{
	if (!(fabs(got - want) <= 1e-12 * fabs(want)))
		fail_msg("got %.17g, expected %.17g", got, want);
}

/* Eq. 3 with the defaults. */
static double
eq3(double m, double lbar, double n, double r)
{
	return 0.01 * m / (0.32 * lbar * sqrt(n * r));
}

/* ---- direct driving ------------------------------------------------- */

/* Starts the first policy of cfg's first job by calling its init, with
 * the layer selection its selector gives. */
static int
direct_start(fixture *f, const ctl_config *cfg)
{
	const ctl_policy_conf *pc = &cfg->jobs[0].policies[0];
	bellows_window_layer jl[N_LAYERS];
	bellows_job_info job = { .job = "job",
		.world = 4,
		.n_layers = N_LAYERS,
		.layers = jl };
	int r;

	f->ops = pc->ops;
	f->config = pc->config;
	f->pstate = calloc(1, f->ops->state_size);
	assert_non_null(f->pstate);
	for (uint32_t l = 0; l < N_LAYERS; l++) {
		f->sel[l] = ctl_selector_matches(&pc->selector, layers[l].name,
		    layers[l].numel, layers[l].ndim);
		jl[l] = (bellows_window_layer){ .name = layers[l].name,
			.numel = layers[l].numel,
			.ndim = layers[l].ndim,
			.shape = layers[l].shape,
			.selected = f->sel[l] };
	}
	f->prop = (bellows_proposal){ .n_layers = N_LAYERS,
		.level = f->level,
		.error_bound = f->bound,
		.lr_scale = 1 };
	r = f->ops->init(f->pstate, f->config, &job, &f->prop);
	f->started = r == 0;
	return r;
}

/* Runs the directly driven policy on window `index`; as the host does,
 * the proposal starts from the state in force with no metrics. */
static int
direct_run(fixture *f, uint64_t index)
{
	bellows_window w = window(f, index, f->bound, f->prop.batch_size,
	    f->prop.lr_scale);
	int r;

	f->prop.reason[0] = '\0';
	f->prop.n_metrics = 0;
	f->prop.calibrate_steps = 0;
	r = f->ops->on_window(f->pstate, f->config, &w, &f->prop);
	f->next_step += f->steps;
	return r;
}

static void
direct_run_ok(fixture *f, uint64_t from, uint64_t to)
{
	for (uint64_t w = from; w <= to; w++)
		assert_int_equal(direct_run(f, w), 0);
}

/* Tells the directly driven policy that cfg2 replaced its config. */
static int
direct_reload(fixture *f, uint64_t next_window)
{
	const void *config = f->cfg2->jobs[0].policies[0].config;
	bellows_event ev = { .type = BELLOWS_EVENT_RELOAD,
		.window = next_window,
		.ranks_alive = 4 };
	int r = f->ops->on_event(f->pstate, config, &ev);

	if (r == 0)
		f->config = config;
	return r;
}

/* The value of metric `name` for `layer` in the direct proposal. */
static double
direct_metric(const fixture *f, const char *name, int32_t layer)
{
	for (uint32_t i = 0; i < f->prop.n_metrics; i++) {
		if (strcmp(f->prop.metrics[i].name, name) == 0 &&
		    f->prop.metrics[i].layer == layer)
			return f->prop.metrics[i].value;
	}
	fail_msg("no metric %s for layer %d", name, layer);
	return NAN;
}

/* ---- registry ------------------------------------------------------ */

static void
test_registry_lists_both_modes_and_they_pass_its_checks(void **state)
{
	char err[256] = "";

	(void)state;
	assert_ptr_equal(pol_registry_find("comet"), &pol_comet_ops);
	assert_ptr_equal(pol_registry_find("comet_batch"),
	    &pol_comet_batch_ops);
	assert_int_equal(pol_registry_check(&pol_comet_ops, err, sizeof(err)),
	    0);
	assert_int_equal(pol_registry_check(&pol_comet_batch_ops, err,
			     sizeof(err)),
	    0);
	assert_int_equal(pol_comet_ops.knobs, BELLOWS_KNOB_ERROR_BOUND);
	assert_int_equal(pol_comet_batch_ops.knobs,
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

	load(f,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: comet\n");
	assert_int_equal(start(f), 0);
	for (uint32_t l = 0; l < N_LAYERS; l++)
		assert_true(f->state.error_bound[l] == 0);
	assert_string_equal(f->reason,
	    "2 layers stored exactly until the first statistics; W 1000 "
	    "steps");

	/* The first statistics set the bounds at once; conv2 has none. */
	measure(f, 0, 1e-3, 1e-3, 0.5);
	measure(f, 3, 1e-3, 1e-3, 0.5);
	run(f, 0);
	assert_close(f->state.error_bound[0], 3.90625e-3);
	assert_true(f->state.error_bound[1] == 0);
	assert_true(f->state.error_bound[2] == 0);
	assert_true(f->state.error_bound[3] == 0);
	assert_string_equal(f->policies, "comet");
	assert_string_equal(f->why,
	    "update 1 after step 99 (1 window, 100 steps): W 1000; 1 layer "
	    "kept without statistics; conv1.weight eb 0.00391 (M 0.001, Lbar "
	    "0.001, N 128, R 0.5)");

	met = ctl_policy_set_metrics(f->set, &n_met);
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
	assert_close(f->state.error_bound[0], 3.90625e-3);
}

static void
test_comet_clamps_degenerate_statistics_to_the_range(void **state)
{
	fixture *f = *state;

	load(f,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: comet\n"
	    "        params: {interval_steps: 100, min_interval_steps: 100}\n");
	assert_int_equal(direct_start(f, f->cfg), 0);

	/* Lbar 0 and R 0: nothing to protect, eb_max. */
	measure(f, 0, 1e-3, 0, 0.5);
	measure(f, 2, 1e-3, 1e-3, 0);
	assert_int_equal(direct_run(f, 0), 0);
	assert_true(f->bound[0] == 0.1);
	assert_true(f->bound[2] == 0.1);
	assert_contains(f->prop.reason,
	    "conv1.weight eb 0.1 (M 0.001, Lbar 0, N 128, R 0.5: eb_max), "
	    "conv2.weight eb 0.1 (M 0.001, Lbar 0.001, N 128, R 0: eb_max)");

	/* A NaN momentum or a negative Lbar: the safe end, eb_min. */
	measure(f, 0, NAN, 1e-3, 0.5);
	measure(f, 2, 1e-3, -1, 0.5);
	assert_int_equal(direct_run(f, 1), 0);
	assert_true(f->bound[0] == 1e-6);
	assert_true(f->bound[2] == 1e-6);
	assert_contains(f->prop.reason,
	    "conv1.weight eb 1e-06 (M nan, Lbar 0.001, N 128, R 0.5: not "
	    "usable, eb_min)");

	/* Eq. 3 beyond either end. */
	measure(f, 0, 1, 1e-3, 0.5);
	measure(f, 2, 1e-10, 1e-3, 0.5);
	assert_int_equal(direct_run(f, 2), 0);
	assert_true(f->bound[0] == 0.1);
	assert_true(f->bound[2] == 1e-6);
	assert_contains(f->prop.reason,
	    "R 0.5: eb_max), conv2.weight eb "
	    "1e-06 (M 1e-10, Lbar 0.001, N 128, "
	    "R 0.5: eb_min)");
}

static void
test_comet_bound_of_a_period_comes_from_its_own_windows(void **state)
{
	fixture *f = *state;

	load(f,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: comet\n"
	    "        params: {interval_steps: 200, min_interval_steps: 100}\n");
	assert_int_equal(direct_start(f, f->cfg), 0);
	measure(f, 0, 1e-3, 1e-3, 0.5);
	assert_int_equal(direct_run(f, 0), 0);
	assert_close(f->bound[0], eq3(1e-3, 1e-3, 128, 0.5));

	/* Window 1 alone spans 100 < 200 steps: no update, and its
	 * statistics wait for the period's end. */
	measure(f, 0, 2e-3, 1e-3, 0.25);
	assert_int_equal(direct_run(f, 1), 0);
	assert_string_equal(f->prop.reason, "");
	assert_close(f->bound[0], eq3(1e-3, 1e-3, 128, 0.5));

	/* Window 2 closes the period: the means of windows 1 and 2 (not
	 * window 0) set the next bound. */
	measure(f, 0, 4e-3, 3e-3, 0.75);
	assert_int_equal(direct_run(f, 2), 0);
	assert_close(f->bound[0], eq3(3e-3, 2e-3, 128, 0.5));
	assert_contains(f->prop.reason,
	    "update 2 after step 299 (2 windows, 200 steps): max change 1.5x, "
	    "W 200; 1 layer kept without statistics; conv1.weight eb 0.00586 "
	    "(M 0.003, Lbar 0.002, N 128, R 0.5)");

	/* A window that did not measure a layer does not dilute it. */
	f->st[0].steps = 0;
	assert_int_equal(direct_run(f, 3), 0);
	measure(f, 0, 1e-3, 1e-3, 0.5);
	assert_int_equal(direct_run(f, 4), 0);
	assert_close(f->bound[0], eq3(1e-3, 1e-3, 128, 0.5));
}

static void
test_comet_keeps_bounds_and_waits_while_nothing_is_measured(void **state)
{
	fixture *f = *state;

	load(f,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: comet\n"
	    "        params: {eb_initial: 0.01, interval_steps: 200}\n");
	assert_int_equal(start(f), 0);
	assert_true(f->state.error_bound[0] == 0.01);
	assert_true(f->state.error_bound[2] == 0.01);
	assert_true(f->state.error_bound[3] == 0); /* fc: 2-D */
	assert_string_equal(f->reason,
	    "2 layers at bound 0.01 until the first statistics; W 200 steps");
	run_quiet(f, 0, 4);
	assert_true(f->state.error_bound[0] == 0.01);

	/* The first statistics, at window 5, update at once. */
	measure(f, 2, 1e-3, 1e-3, 0.5);
	run(f, 5);
	assert_true(f->state.error_bound[0] == 0.01);
	assert_close(f->state.error_bound[2], 3.90625e-3);
	assert_contains(f->why,
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
	load(f,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: comet\n"
	    "        params: {interval_steps: 40, min_interval_steps: 10, "
	    "settle_updates: 2}\n");
	assert_int_equal(direct_start(f, f->cfg), 0);
	measure(f, 0, 1e-3, 0.1, 0.5);
	assert_int_equal(direct_run(f, 0), 0);
	assert_contains(f->prop.reason,
	    "update 1 after step 9 (1 window, "
	    "10 steps): W 40;");
	assert_true(direct_metric(f, "window_steps", -1) == 40);

	for (size_t i = 0; i < sizeof(upd) / sizeof(upd[0]); i++) {
		measure(f, 0, upd[i].m, 0.1, 0.5);
		for (; next < upd[i].window; next++) {
			assert_int_equal(direct_run(f, next), 0);
			if (f->prop.reason[0] != '\0')
				fail_msg("window %llu: unexpected '%s'",
				    (unsigned long long)next, f->prop.reason);
		}
		assert_int_equal(direct_run(f, next++), 0);
		assert_contains(f->prop.reason, upd[i].why);
		assert_close(f->bound[0], eq3(upd[i].m, 0.1, 128, 0.5));
		if (direct_metric(f, "window_steps", -1) != (double)upd[i].w)
			fail_msg("update %zu: W %g, expected %llu", i,
			    direct_metric(f, "window_steps", -1),
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
	load(f, text);
	assert_int_equal(direct_start(f, f->cfg), 0);
	assert_int_equal(f->prop.batch_size, 0);
	assert_true(f->prop.lr_scale == 1);
	measure(f, 0, 1e-3, 1e-3, 0.5);
	measure(f, 2, 1e-3, 1e-3, 0.5);
	f->st[0].bytes = 8e8;
	f->st[2].bytes = 4.8e8;
	f->st[0].raw = 8e9;
	f->st[2].raw = 4.8e9;
	f->mem_total = 16e9;
	f->mem_used = 6e9;
	/* The first W runs at the trainer's batch. */
	assert_int_equal(direct_run(f, 0), 0);
	assert_int_equal(f->prop.batch_size, 0);
	assert_contains(f->prop.reason, "update 1 after step 99");
	assert_null(strstr(f->prop.reason, "batch"));
}

static void
test_batch_picks_the_largest_power_of_two_that_fits(void **state)
{
	fixture *f = *state;

	batch_start(f, "");
	assert_int_equal(direct_run(f, 1), 0);
	assert_int_equal(f->prop.batch_size, 1024);
	assert_true(f->prop.lr_scale == 1); /* lr_scaling none */
	/* Re-derived for the new batch. */
	assert_close(f->bound[0], eq3(1e-3, 1e-3, 1024, 0.5));
	assert_close(f->bound[2], eq3(1e-3, 1e-3, 1024, 0.5));
	assert_string_equal(f->prop.reason,
	    "update 2 after step 199 (1 window, 100 steps): max change 1x, W "
	    "100; batch 128 -> 1024: predicted 15 GB of 15.2 GB allowed (16 "
	    "GB device), 4.72 GB fixed + 10 MB/sample stored at ratio 10; 2 "
	    "bounds in [0.00138, 0.00138]; conv1.weight eb 0.00138 (M 0.001, Lbar 0.001, N 1024, R 0.5), "
	    "conv2.weight eb 0.00138 (M 0.001, Lbar 0.001, N 1024, R 0.5)");

	/* Measured again at 1024, the same per-sample figures: kept. */
	f->batch = 1024;
	f->st[0].bytes = 6.4e9;
	f->st[2].bytes = 3.84e9;
	f->mem_used = 4.72e9 + 1.024e10;
	assert_int_equal(direct_run(f, 2), 0);
	assert_int_equal(f->prop.batch_size, 1024);
	assert_contains(f->prop.reason, "; batch 1024 kept: predicted 15 GB");
}

static void
test_batch_is_capped_by_max_batch(void **state)
{
	fixture *f = *state;

	batch_start(f, ", max_batch: 512");
	assert_int_equal(direct_run(f, 1), 0);
	assert_int_equal(f->prop.batch_size, 512);
	assert_contains(f->prop.reason, "batch 128 -> 512: predicted 9.84 GB");
}

static void
test_batch_goes_below_the_initial_only_when_memory_forces_it(void **state)
{
	fixture *f = *state;

	batch_start(f, "");
	/* 15.5 GB in use at 128: fixed 14.22 GB, 128 needs 15.5 > 15.2,
	 * 64 needs 14.86. */
	f->mem_used = 15.5e9;
	assert_int_equal(direct_run(f, 1), 0);
	assert_int_equal(f->prop.batch_size, 64);
	assert_contains(f->prop.reason,
	    "batch 128 -> 64 (memory forces it below the initial): predicted "
	    "14.9 GB");
	assert_close(f->bound[0], eq3(1e-3, 1e-3, 64, 0.5));
}

static void
test_batch_is_kept_when_nothing_fits_or_no_limit_is_known(void **state)
{
	fixture *f = *state;

	batch_start(f, "");
	f->mem_used = 17e9;
	assert_int_equal(direct_run(f, 1), 0);
	assert_int_equal(f->prop.batch_size, 0);
	assert_contains(f->prop.reason,
	    "batch kept: none fits (15.7 GB fixed, 0.01 GB/sample, 15.2 GB "
	    "allowed of 16 GB device)");
	assert_close(f->bound[0], eq3(1e-3, 1e-3, 128, 0.5));

	/* A CPU job: no device total, and no memory_bytes. */
	f->mem_total = 0;
	f->mem_used = 0;
	f->host_used = 6e9;
	assert_int_equal(direct_run(f, 2), 0);
	assert_int_equal(f->prop.batch_size, 0);
	assert_contains(f->prop.reason,
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
	assert_int_equal(direct_run(f, 1), 0);
	assert_int_equal(f->prop.batch_size, 512);
	assert_contains(f->prop.reason,
	    "batch 128 -> 512: predicted 6.84 GB of 7.6 GB allowed (8 GB "
	    "memory_bytes)");
}

static void
test_batch_scales_the_lr_as_configured(void **state)
{
	fixture *f = *state;

	batch_start(f, ", lr_scaling: linear");
	assert_int_equal(direct_run(f, 1), 0);
	assert_int_equal(f->prop.batch_size, 1024);
	assert_true(f->prop.lr_scale == 8);
	assert_contains(f->prop.reason, "; LR scale 1 -> 8 (linear); ");
	direct_stop(f);
	ctl_config_destroy(&f->cfg);
	f->next_step = 0;

	batch_start(f, ", lr_scaling: sqrt");
	assert_int_equal(direct_run(f, 1), 0);
	assert_int_equal(f->prop.batch_size, 1024);
	assert_close(f->prop.lr_scale, sqrt(8));
	assert_contains(f->prop.reason, "; LR scale 1 -> 2.82843 (sqrt); ");
}

static void
test_batch_runs_through_the_host_with_its_knobs(void **state)
{
	fixture *f = *state;

	load(f,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: comet_batch\n"
	    "        params: {interval_steps: 200, lr_scaling: linear, "
	    "max_batch: 256}\n");
	assert_int_equal(start(f), 0);
	measure(f, 0, 1e-3, 1e-3, 0.5);
	f->mem_total = 16e9;
	f->mem_used = 2e9;
	run(f, 0);
	assert_int_equal(f->state.batch_size, 0);
	run_quiet(f, 1, 1);
	run(f, 2);
	assert_int_equal(f->state.batch_size, 256);
	assert_true(f->state.lr_scale == 2);
	assert_close(f->state.error_bound[0], eq3(1e-3, 1e-3, 256, 0.5));
	assert_string_equal(f->policies, "comet_batch");
	assert_contains(f->why, "batch 128 -> 256");
}

/* ---- many layers ---------------------------------------------------- */

#define MANY 64

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
		    "features.block%02u.conv.weight", l);
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
	assert_contains(p.reason,
	    "update 1 after step 99 (1 window, 100 steps): W 1000; 64 bounds "
	    "in [0.00391, 0.00391]; features.block00.conv.weight eb 0.00391 "
	    "(M 0.001, Lbar 0.001, N 128, R 0.5), features.block01");
	assert_contains(p.reason, "R 0.5) ...");
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
	load(f,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: comet_batch\n"
	    "        params: {interval_steps: 40, min_interval_steps: 10}\n");
	load_file(f->path2,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: comet_batch\n"
	    "        params: {interval_steps: 80, min_interval_steps: 10, "
	    "sigma_frac: 0.02, lr_scaling: sqrt}\n",
	    &f->cfg2);
	assert_int_equal(direct_start(f, f->cfg), 0);
	f->mem_total = 16e9;
	f->mem_used = 6e9;
	measure(f, 0, 1e-3, 0.1, 0.5);
	direct_run_ok(f, 0, 0);
	measure(f, 0, 4e-3, 0.1, 0.5);
	direct_run_ok(f, 1, 4);
	/* Halved to 20, and the batch went to 4096 (tiny activations). */
	assert_true(direct_metric(f, "window_steps", -1) == 20);
	assert_int_equal(f->prop.batch_size, 4096);
	assert_true(f->prop.lr_scale == 1);

	/* Window 5 is half a period; the reload keeps it, W stays halved
	 * (within the new limits) and the LR follows the new mode. */
	direct_run_ok(f, 5, 5);
	assert_int_equal(direct_reload(f, 6), 0);
	f->batch = 4096;
	f->st[0].bytes = 100.0 * 4096;
	f->st[0].raw = 1000.0 * 4096;
	assert_int_equal(direct_run(f, 6), 0);
	assert_close(f->prop.lr_scale, sqrt(32));
	assert_contains(f->prop.reason,
	    "; batch 4096 kept: predicted 6 GB of 15.2 GB allowed");
	assert_contains(f->prop.reason, "; LR scale 1 -> 5.65685 (sqrt)");
	assert_contains(f->prop.reason,
	    "update 3 after step 69 (2 windows, "
	    "20 steps): max change ");
	/* The new sigma_frac doubles the bound, at N 4096. */
	assert_close(f->bound[0], 2 * eq3(4e-3, 0.1, 4096, 0.5));
	assert_int_equal(f->prop.batch_size, 4096);
}

static void
test_reload_through_the_host_keeps_the_period_statistics(void **state)
{
	fixture *f = *state;
	ctl_policy_set *next = NULL;
	char note[256];

	load(f,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: comet\n"
	    "        params: {interval_steps: 200}\n");
	load_file(f->path2,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: comet\n"
	    "        params: {interval_steps: 200, sigma_frac: 0.02}\n",
	    &f->cfg2);
	assert_int_equal(start(f), 0);
	measure(f, 0, 1e-3, 1e-3, 0.5);
	run(f, 0);
	measure(f, 0, 2e-3, 1e-3, 0.5);
	run_quiet(f, 1, 1);

	assert_int_equal(ctl_policy_set_prepare(f->set, &f->cfg2->jobs[0],
			     "job", 4, layers, N_LAYERS, &f->state, f->reason,
			     sizeof(f->reason), &next),
	    0);
	assert_int_equal(ctl_policy_set_commit(next, &f->set, 2, 4, note,
			     sizeof(note)),
	    0);
	f->set = next;
	assert_string_equal(note, "");
	assert_close(f->state.error_bound[0], 3.90625e-3);

	/* Window 1's statistics survived: M is the mean of 2e-3 and 4e-3,
	 * sigma the new 2 %: 3 x 2 = 6 times the bound before. */
	measure(f, 0, 4e-3, 1e-3, 0.5);
	run(f, 2);
	assert_close(f->state.error_bound[0], 2 * eq3(3e-3, 1e-3, 128, 0.5));
	assert_contains(f->why,
	    "update 2 after step 299 (2 windows, 200 "
	    "steps): max change 6x > 2, W 200 -> 125");
}

static void
test_reload_moves_bounds_into_a_new_range(void **state)
{
	fixture *f = *state;

	load(f,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: comet\n");
	load_file(f->path2,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: comet\n"
	    "        params: {eb_max: 0.001, eb_min: 1e-7}\n",
	    &f->cfg2);
	assert_int_equal(direct_start(f, f->cfg), 0);
	measure(f, 0, 1e-3, 1e-3, 0.5);
	direct_run_ok(f, 0, 0);
	assert_close(f->bound[0], 3.90625e-3);
	assert_int_equal(direct_reload(f, 1), 0);
	assert_int_equal(direct_run(f, 1), 0);
	assert_true(f->bound[0] == 0.001);
	assert_true(f->bound[2] == 0);
	assert_string_equal(f->prop.reason,
	    "bounds from the configuration: conv1.weight eb 0.001, "
	    "conv2.weight eb 0");
}

static void
test_reload_refuses_a_config_it_cannot_run(void **state)
{
	fixture *f = *state;
	double *eb_max;

	load(f,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: comet\n");
	load_file(f->path2,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: comet\n",
	    &f->cfg2);
	assert_int_equal(direct_start(f, f->cfg), 0);
	/* A host that skipped the check: eb_max below eb_min. */
	eb_max = NULL;
	for (const bellows_param *p = pol_comet_ops.params; p->name != NULL;
	     p++) {
		if (strcmp(p->name, "eb_max") == 0)
			eb_max = (double
				*)((char *)f->cfg2->jobs[0].policies[0].config +
			    p->offset);
	}
	assert_non_null(eb_max);
	*eb_max = 1e-7;
	assert_int_equal(direct_reload(f, 0), BELLOWS_EINVAL);
	assert_int_equal(direct_run(f, 0), 0);
}

/* ---- configuration errors -------------------------------------------- */

static void
test_config_refuses_bad_parameters_with_their_position(void **state)
{
	fixture *f = *state;

	load_refused(f,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: comet\n"
	    "        params: {eb_min: 0.1, eb_max: 0.01}\n",
	    "3:15: policy 'comet': eb_min (0.1) must be below eb_max (0.01)");
	load_refused(f,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: comet_batch\n"
	    "        params: {eb_min: 0.01, eb_max: 0.01}\n",
	    "3:15: policy 'comet_batch': eb_min (0.01) must be below eb_max "
	    "(0.01)");
	load_refused(f,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: comet\n"
	    "        name: bounds\n"
	    "        params: {interval_steps: 100}\n",
	    "3:15: policy 'bounds': min_interval_steps (125) must not exceed "
	    "interval_steps (100)");
	load_refused(f,
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
		write_file(f->path, text);
		assert_int_equal(ctl_config_load(f->path, &cfg, err,
				     sizeof(err)),
		    BELLOWS_ECONFIG);
		assert_null(cfg);
		if (strncmp(err, f->path, strlen(f->path)) != 0 ||
		    strstr(err, bad[i].why) == NULL)
			fail_msg("%s: expected '%s' in '%s'", bad[i].params,
			    bad[i].why, err);
	}
}

static void
test_init_refuses_a_config_the_host_did_not_check(void **state)
{
	fixture *f = *state;

	load(f,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: comet_batch\n"
	    "        name: cb\n");
	for (const bellows_param *p = pol_comet_batch_ops.params;
	     p->name != NULL; p++) {
		if (strcmp(p->name, "lr_scaling") == 0)
			snprintf((char *)f->cfg->jobs[0].policies[0].config +
				p->offset,
			    BELLOWS_PARAM_STRING_MAX, "%s", "cubic");
	}
	assert_int_equal(start(f), BELLOWS_EINVAL);
	assert_null(f->set);
	assert_string_equal(f->reason,
	    "policy 'cb' failed to start: invalid argument");
}

static void
test_comet_refuses_a_window_of_another_layer_table(void **state)
{
	fixture *f = *state;
	bellows_window w;

	load(f,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: comet\n");
	assert_int_equal(direct_start(f, f->cfg), 0);
	w = window(f, 0, f->bound, 0, 1);
	w.n_layers = N_LAYERS - 1;
	assert_int_equal(f->ops->on_window(f->pstate, f->config, &w, &f->prop),
	    BELLOWS_EMISMATCH);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(
		    test_registry_lists_both_modes_and_they_pass_its_checks),
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
		T(test_comet_gives_the_papers_worked_example_through_the_host),
		T(test_comet_clamps_degenerate_statistics_to_the_range),
		T(test_comet_bound_of_a_period_comes_from_its_own_windows),
		T(test_comet_keeps_bounds_and_waits_while_nothing_is_measured),
		T(test_comet_halves_w_on_large_changes_and_restores_it_once_settled),
		T(test_batch_picks_the_largest_power_of_two_that_fits),
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
