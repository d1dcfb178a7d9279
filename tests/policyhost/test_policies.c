/* test_policies - the policy registry and the built-in policies, driven
 * through the policy host exactly as bellowsd drives them.
 *
 * Job entries come from YAML files in a temporary directory; windows are
 * built by hand so the expected levels can be computed by hand: the
 * decision that closes window w carries the state for window w + 1.
 */
#include <setjmp.h>
#include <math.h>
#include <stdarg.h>
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

#define N_LAYERS 4

/* The layer table of every job here: two 4-D convolutions, a bias and
 * a fully connected weight. */
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

typedef struct fixture {
	char dir[64];                      /* private temporary directory */
	char path[128];                    /* dir/policy.yaml */
	ctl_config *cfg;                   /* loaded configuration */
	ctl_policy_set *set;               /* instances under test */
	com_decision state;                /* knob state in force */
	char reason[BELLOWS_REASON_MAX];   /* initial reasons */
	bellows_window_layer wl[N_LAYERS]; /* the window's layers */
} fixture;

static int
setup(void **state)
{
	fixture *f = calloc(1, sizeof(*f));

	if (f == NULL)
		return -1;
	snprintf(f->dir, sizeof(f->dir), "/tmp/bellows-policies-XXXXXX");
	if (mkdtemp(f->dir) == NULL) {
		free(f);
		return -1;
	}
	snprintf(f->path, sizeof(f->path), "%s/policy.yaml", f->dir);
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	fixture *f = *state;

	ctl_policy_set_destroy(&f->set);
	com_decision_fini(&f->state);
	ctl_config_destroy(&f->cfg);
	unlink(f->path);
	rmdir(f->dir);
	free(f);
	return 0;
}

/* Loads a configuration whose first job entry is used for the set. */
static void
load(fixture *f, const char *text)
{
	char err[CTL_CONFIG_ERR_MAX];
	FILE *fp = fopen(f->path, "w");

	assert_non_null(fp);
	assert_int_equal(fputs(text, fp) >= 0, 1);
	assert_int_equal(fclose(fp), 0);
	if (ctl_config_load(f->path, &f->cfg, err, sizeof(err)) != 0)
		fail_msg("%s", err);
}

/* Creates the set of job configuration jc (its policies must outlive the
 * set). */
static int
start_with(fixture *f, const ctl_job_conf *jc)
{
	assert_int_equal(com_decision_init(&f->state, "job", N_LAYERS), 0);
	return ctl_policy_set_new(jc, "job", 4, layers, N_LAYERS, &f->state,
	    f->reason, sizeof(f->reason), &f->set);
}

/* Starts the set of the loaded configuration's first job. */
static int
start(fixture *f)
{
	return start_with(f, &f->cfg->jobs[0]);
}

/* Builds window `index` as the host would hand it to policies. */
static bellows_window
window(fixture *f, uint64_t index)
{
	for (uint32_t l = 0; l < N_LAYERS; l++) {
		f->wl[l] = (bellows_window_layer){
			.name = layers[l].name,
			.numel = layers[l].numel,
			.ndim = layers[l].ndim,
			.shape = layers[l].shape,
			.grad_norm = 1.0 + l,
			.level = f->state.level[l],
			.error_bound = f->state.error_bound[l],
		};
	}
	return (bellows_window){
		.job = "job",
		.window = index,
		.first_step = index * 10,
		.last_step = index * 10 + 9,
		.lr = 0.1,
		.lr_scale = f->state.lr_scale,
		.world = 4,
		.ranks_reported = 4,
		.n_layers = N_LAYERS,
		.layers = f->wl,
	};
}

/* Runs the set on window `index`; returns the number of failures. */
static uint32_t
run(fixture *f, uint64_t index, char *policies, size_t plen, char *reason,
    size_t rlen)
{
	bellows_window w = window(f, index);
	uint32_t failed = 99;

	assert_int_equal(ctl_policy_set_run(f->set, &w, &f->state, policies,
			     plen, reason, rlen, &failed),
	    0);
	return failed;
}

static void
assert_levels(const com_decision *d, double a, double b, double c, double e)
{
	const double want[N_LAYERS] = { a, b, c, e };

	for (uint32_t l = 0; l < N_LAYERS; l++) {
		if (d->level[l] != want[l])
			fail_msg("layer %u: level %g, expected %g", l,
			    d->level[l], want[l]);
	}
}

/* ---- registry ------------------------------------------------------ */

static void
test_registry_finds_the_builtins_by_name(void **state)
{
	(void)state;
	assert_ptr_equal(pol_registry_find("fixed"), &pol_fixed_ops);
	assert_ptr_equal(pol_registry_find("schedule"), &pol_schedule_ops);
	assert_null(pol_registry_find("Fixed"));
	assert_null(pol_registry_find("accordion_v0"));
	assert_null(pol_registry_find(""));
	assert_null(pol_registry_find(NULL));
	assert_ptr_equal(pol_registry_at(0), &pol_fixed_ops);
	assert_ptr_equal(pol_registry_at(1), &pol_schedule_ops);
	/* Issue 8 appends policies: every entry is found by its name. */
	for (size_t i = 0; pol_registry_at(i) != NULL; i++)
		assert_ptr_equal(pol_registry_find(pol_registry_at(i)->name),
		    pol_registry_at(i));
	assert_ptr_equal(pol_registry_find("accordion"), &pol_accordion_ops);
	assert_ptr_equal(pol_registry_find("accordion_batch"),
	    &pol_accordion_batch_ops);
	assert_ptr_equal(pol_registry_find("adaqs"), &pol_adaqs_ops);
	assert_null(pol_registry_at(SIZE_MAX));
}

static void
test_registry_accepts_every_builtin(void **state)
{
	char err[256];

	(void)state;
	for (size_t i = 0; pol_registry_at(i) != NULL; i++) {
		err[0] = '\0';
		assert_int_equal(pol_registry_check(pol_registry_at(i), err,
				     sizeof(err)),
		    0);
	}
}

/* A well-formed policy the checks below break one field at a time. */
typedef struct probe_config {
	double gain;  /* a DOUBLE */
	int64_t span; /* an INT */
} probe_config;

static const bellows_param probe_params[] = {
	{ .name = "gain",
	    .type = BELLOWS_PARAM_DOUBLE,
	    .offset = offsetof(probe_config, gain),
	    .min = 0,
	    .max = 10,
	    .def = 1 },
	{ .name = "span",
	    .type = BELLOWS_PARAM_INT,
	    .offset = offsetof(probe_config, span),
	    .min = 1,
	    .max = 100,
	    .def = 4 },
	{ .name = NULL },
};

static int
probe_init(void *st, const void *config, const bellows_job_info *job,
    bellows_proposal *initial)
{
	return 0;
}

static int
probe_on_window(void *st, const void *config, const bellows_window *w,
    bellows_proposal *out)
{
	return 0;
}

static const bellows_policy_ops probe_ops = {
	.abi_version = BELLOWS_POLICY_ABI,
	.name = "probe_2",
	.knobs = BELLOWS_KNOB_BATCH_SIZE,
	.config_size = sizeof(probe_config),
	.params = probe_params,
	.init = probe_init,
	.on_window = probe_on_window,
};

static void
assert_check_fails(const bellows_policy_ops *ops, const char *what)
{
	char err[256] = "";

	assert_int_equal(pol_registry_check(ops, err, sizeof(err)),
	    BELLOWS_EINVAL);
	if (strstr(err, what) == NULL)
		fail_msg("expected '%s' in '%s'", what, err);
}

/* The refusal of ABI version `abi`, as pol_registry_check words it for
 * this bellowsd's BELLOWS_POLICY_ABI, with the rebuild hint for an older
 * one. */
static void
assert_abi_refused(bellows_policy_ops *ops, uint32_t abi)
{
	char what[160];

	ops->abi_version = abi;
	snprintf(what, sizeof(what),
	    "ABI version %u, this bellowsd speaks %u%s", abi,
	    (unsigned)BELLOWS_POLICY_ABI,
	    abi < BELLOWS_POLICY_ABI ? ": rebuild the policy" : "");
	assert_check_fails(ops, what);
}

static void
test_registry_check_refuses_another_abi_version(void **state)
{
	bellows_policy_ops ops = probe_ops;
	char err[256];

	(void)state;
	assert_int_equal(pol_registry_check(&ops, err, sizeof(err)), 0);
	assert_abi_refused(&ops, BELLOWS_POLICY_ABI + 1);
	/* From the oldest ABI still loaded to this one, a policy loads (ABI
	 * 4 lacks only stats_read: it reads every statistic). */
	for (uint32_t abi = BELLOWS_POLICY_ABI_OLDEST;
	     abi <= BELLOWS_POLICY_ABI; abi++) {
		ops.abi_version = abi;
		assert_int_equal(pol_registry_check(&ops, err, sizeof(err)), 0);
	}
	/* Older plug-ins step through the layers by an old size. */
	for (uint32_t abi = 1; abi < BELLOWS_POLICY_ABI_OLDEST; abi++)
		assert_abi_refused(&ops, abi);
	assert_abi_refused(&ops, 0);
	assert_check_fails(NULL, "no ops");
}

/* Layers as a host whose bellows_window_layer has grown by 16 bytes would
 * lay them out: an ABI 6 policy steps by layer_size and gets them as they
 * are; an ABI 5 one gets a copy at its own stride with the same prefix. */
static void
test_registry_window_hands_old_policies_layers_at_their_stride(void **state)
{
	enum {
		N = 3,
		GROWN = sizeof(bellows_window_layer) + 16
	};
	_Alignas(bellows_window_layer) char big[N * GROWN] = { 0 };
	bellows_window w = { .n_layers = N, .layer_size = GROWN };
	bellows_policy_ops ops = probe_ops;
	bellows_window tmp;
	const bellows_window *got;
	void *buf = NULL;
	size_t cap = 0;

	(void)state;
	for (uint32_t i = 0; i < N; i++) {
		bellows_window_layer *l = (void *)(big + i * GROWN);

		l->numel = 100 + i;
		l->level_applied = i + 0.5;
	}
	w.layers = (const void *)big;
	assert_ptr_equal(pol_registry_window(&ops, &w, &tmp, &buf, &cap), &w);
	for (uint32_t i = 0; i < N; i++)
		assert_int_equal(bellows_window_layer_at(&w, i)->numel,
		    100 + i);
	ops.abi_version = 5;
	got = pol_registry_window(&ops, &w, &tmp, &buf, &cap);
	assert_ptr_equal(got, &tmp);
	assert_int_equal(got->layer_size, BELLOWS_WINDOW_LAYER_SIZE_5);
	for (uint32_t i = 0; i < N; i++) {
		assert_int_equal(got->layers[i].numel, 100 + i);
		assert_true(got->layers[i].level_applied == i + 0.5);
	}
	/* At the old stride already, nothing is copied. */
	w.layer_size = BELLOWS_WINDOW_LAYER_SIZE_5;
	assert_ptr_equal(pol_registry_window(&ops, &w, &tmp, &buf, &cap), &w);
	free(buf);
}

static void
test_registry_check_refuses_a_bad_name(void **state)
{
	static const char *const bad[] = { "", "Probe", "pro-be", "pro be",
		"probé",
		"x01234567890123456789012345678901234567890123456789"
		"0123456789012345" };
	bellows_policy_ops ops = probe_ops;

	(void)state;
	ops.name = NULL;
	assert_check_fails(&ops, "policy name must be");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ops.name = bad[i];
		assert_check_fails(&ops, "policy name must be");
	}
}

static void
test_registry_check_refuses_missing_functions(void **state)
{
	bellows_policy_ops ops = probe_ops;

	(void)state;
	ops.init = NULL;
	assert_check_fails(&ops, "lacks init or on_window");
	ops = probe_ops;
	ops.on_window = NULL;
	assert_check_fails(&ops, "lacks init or on_window");
	ops = probe_ops;
	ops.knobs = 0;
	assert_check_fails(&ops, "owns no knob");
}

static void
test_registry_check_refuses_a_param_outside_the_config(void **state)
{
	bellows_param params[3];
	bellows_policy_ops ops = probe_ops;

	(void)state;
	memcpy(params, probe_params, sizeof(params));
	ops.params = params;

	/* The INT ends exactly at config_size: fine. One byte further is
	 * not, nor is a huge offset that wraps around. */
	params[1].offset = sizeof(probe_config) - sizeof(int64_t);
	assert_int_equal(pol_registry_check(&ops, NULL, 0), 0);
	params[1].offset = sizeof(probe_config) - sizeof(int64_t) + 1;
	assert_check_fails(&ops, "parameter 'span': bad type or offset");
	params[1].offset = SIZE_MAX - 3;
	assert_check_fails(&ops, "parameter 'span': bad type or offset");

	memcpy(params, probe_params, sizeof(params));
	ops.config_size = sizeof(double);
	assert_check_fails(&ops, "parameter 'span': bad type or offset");

	memcpy(params, probe_params, sizeof(params));
	ops.config_size = sizeof(probe_config);
	params[0].type = (bellows_param_type)42;
	assert_check_fails(&ops, "parameter 'gain': bad type or offset");

	memcpy(params, probe_params, sizeof(params));
	params[0].def = 11;
	assert_check_fails(&ops, "parameter 'gain': default outside");
}

static void
test_steps_at_takes_the_last_piece_started(void **state)
{
	bellows_steps st = { .n = 3,
		.from = { 0, 3, 6 },
		.value = { 2, 1, 2 } };
	bellows_steps late = { .n = 1, .from = { 5 }, .value = { 7 } };
	bellows_steps none = { .n = 0 };

	(void)state;
	assert_true(pol_steps_at(&st, 0, -1) == 2);
	assert_true(pol_steps_at(&st, 2, -1) == 2);
	assert_true(pol_steps_at(&st, 3, -1) == 1);
	assert_true(pol_steps_at(&st, 5, -1) == 1);
	assert_true(pol_steps_at(&st, 6, -1) == 2);
	assert_true(pol_steps_at(&st, UINT64_MAX, -1) == 2);
	assert_true(pol_steps_at(&late, 4, -1) == -1);
	assert_true(pol_steps_at(&late, 5, -1) == 7);
	assert_true(pol_steps_at(&none, 5, 0.5) == 0.5);
}

/* ---- fixed ------------------------------------------------------------ */

static void
test_fixed_sets_every_selected_layer_and_never_changes(void **state)
{
	fixture *f = *state;
	char policies[64], reason[256];

	load(f,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: fixed\n"
	    "        params: {level: 3}\n");
	assert_int_equal(start(f), 0);
	/* The 1-D bias is not selected (min_ndim 2 by default). */
	assert_levels(&f->state, 3, 0, 3, 3);
	assert_string_equal(f->reason, "fixed level 3");

	for (uint64_t w = 0; w < 5; w++) {
		assert_int_equal(run(f, w, policies, sizeof(policies), reason,
				     sizeof(reason)),
		    0);
		assert_levels(&f->state, 3, 0, 3, 3);
		assert_string_equal(policies, "");
		assert_string_equal(reason, "");
	}
	assert_int_equal(f->state.batch_size, 0);
	assert_true(f->state.lr_scale == 1.0);
}

static void
test_fixed_acts_on_the_layers_its_selector_picks(void **state)
{
	fixture *f = *state;

	load(f,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: fixed\n"
	    "        layers: {match: \"^conv\", min_numel: 1000, "
	    "min_ndim: 1}\n"
	    "        params: {level: 0.5}\n");
	assert_int_equal(start(f), 0);
	assert_levels(&f->state, 0.5, 0, 0.5, 0);
}

/* ---- schedule --------------------------------------------------------- */

static void
test_schedule_closing_window_w_decides_level_of_w_plus_1(void **state)
{
	/* levels {0: 2, 3: 1, 6: 2}: the decision closing window w holds
	 * the level for window w + 1. */
	static const struct {
		uint64_t w;
		double level;
		const char *reason;
	} expect[] = {
		{ 0, 2, "" },
		{ 1, 2, "" },
		{ 2, 1, "schedule: level 2 -> 1 from window 3" },
		{ 3, 1, "" },
		{ 4, 1, "" },
		{ 5, 2, "schedule: level 1 -> 2 from window 6" },
		{ 6, 2, "" },
		{ 7, 2, "" },
		{ 100, 2, "" },
	};
	fixture *f = *state;
	char policies[64], reason[256];

	load(f,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: schedule\n"
	    "        name: plan\n"
	    "        params:\n"
	    "          levels: {0: 2, 3: 1, 6: 2}\n");
	assert_int_equal(start(f), 0);
	assert_levels(&f->state, 2, 0, 2, 2);
	assert_string_equal(f->reason, "schedule: level 2 from window 0");

	for (size_t i = 0; i < sizeof(expect) / sizeof(expect[0]); i++) {
		double lv = expect[i].level;

		assert_int_equal(run(f, expect[i].w, policies, sizeof(policies),
				     reason, sizeof(reason)),
		    0);
		/* Unselected 1-D layers stay raw. */
		assert_levels(&f->state, lv, 0, lv, lv);
		assert_string_equal(reason, expect[i].reason);
		assert_string_equal(policies,
		    expect[i].reason[0] != '\0' ? "plan" : "");
	}
}

static void
test_schedule_starts_raw_before_its_first_piece(void **state)
{
	fixture *f = *state;
	char policies[64], reason[256];

	load(f,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: schedule\n"
	    "        params:\n"
	    "          levels: {2: 4}\n");
	assert_int_equal(start(f), 0);
	assert_levels(&f->state, 0, 0, 0, 0);
	assert_int_equal(run(f, 0, policies, sizeof(policies), reason,
			     sizeof(reason)),
	    0);
	assert_levels(&f->state, 0, 0, 0, 0);
	assert_int_equal(run(f, 1, policies, sizeof(policies), reason,
			     sizeof(reason)),
	    0);
	assert_levels(&f->state, 4, 0, 4, 4);
	assert_string_equal(reason, "schedule: level 0 -> 4 from window 2");
	assert_string_equal(policies, "schedule");
}

/* ---- the host's handling of failing and foreign policies ------------- */

typedef struct probe_state {
	int windows; /* on_window calls */
} probe_state;

static int probe_fini_calls;

static int
probe_init_batch(void *st, const void *config, const bellows_job_info *job,
    bellows_proposal *initial)
{
	const probe_config *cfg = config;

	initial->batch_size = (uint32_t)cfg->span;
	initial->level[0] = 99; /* not its knob: must be ignored */
	snprintf(initial->reason, sizeof(initial->reason), "batch %u",
	    initial->batch_size);
	return 0;
}

static int
probe_on_window_fails_odd(void *st, const void *config, const bellows_window *w,
    bellows_proposal *out)
{
	probe_state *ps = st;

	ps->windows++;
	out->batch_size = 1000; /* must not leak through on failure */
	if (w->window % 2 == 1)
		return BELLOWS_EINVAL;
	out->batch_size = 32 + (uint32_t)w->window;
	snprintf(out->reason, sizeof(out->reason), "window %llu",
	    (unsigned long long)w->window);
	return 0;
}

static void
probe_fini(void *st, const void *config)
{
	probe_fini_calls++;
}

static int
probe_init_fails(void *st, const void *config, const bellows_job_info *job,
    bellows_proposal *initial)
{
	return BELLOWS_ENOTFOUND;
}

static void
test_host_merges_owned_knobs_and_counts_failures(void **state)
{
	fixture *f = *state;
	bellows_policy_ops ops = probe_ops;
	probe_config pcfg = { .gain = 1, .span = 16 };
	ctl_job_conf jc;
	ctl_policy_conf pcs[2];
	char policies[64], reason[256];

	load(f,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: fixed\n"
	    "        params: {level: 2}\n");
	ops.state_size = sizeof(probe_state);
	ops.init = probe_init_batch;
	ops.on_window = probe_on_window_fails_odd;
	ops.fini = probe_fini;
	pcs[0] = f->cfg->jobs[0].policies[0];
	pcs[1] = (ctl_policy_conf){ .name = "batcher",
		.ops = &ops,
		.config = &pcfg,
		.selector = { .min_ndim = 2 } };
	jc = (ctl_job_conf){ .match = "*", .n_policies = 2, .policies = pcs };

	probe_fini_calls = 0;
	assert_int_equal(start_with(f, &jc), 0);
	assert_levels(&f->state, 2, 0, 2, 2);
	assert_int_equal(f->state.batch_size, 16);
	assert_string_equal(f->reason, "fixed level 2; batch 16");
	ctl_policy_set_names(f->set, policies, sizeof(policies));
	assert_string_equal(policies, "fixed,batcher");

	assert_int_equal(run(f, 0, policies, sizeof(policies), reason,
			     sizeof(reason)),
	    0);
	assert_int_equal(f->state.batch_size, 32);
	assert_levels(&f->state, 2, 0, 2, 2);
	assert_string_equal(policies, "batcher");
	assert_string_equal(reason, "window 0");

	/* A failing policy changes nothing and is counted. */
	assert_int_equal(run(f, 1, policies, sizeof(policies), reason,
			     sizeof(reason)),
	    1);
	assert_int_equal(f->state.batch_size, 32);
	assert_string_equal(policies, "");

	ctl_policy_set_destroy(&f->set);
	assert_null(f->set);
	assert_int_equal(probe_fini_calls, 1);
}

/* The set of the loaded configuration's first job: its stats_skip. */
static uint64_t
skip_of(fixture *f, const char *text)
{
	uint64_t skip;

	load(f, text);
	assert_int_equal(start(f), 0);
	skip = ctl_policy_set_stats_skip(f->set);
	ctl_policy_set_destroy(&f->set);
	com_decision_fini(&f->state);
	ctl_config_destroy(&f->cfg);
	return skip;
}

static void
test_host_skips_the_statistics_no_policy_of_the_set_reads(void **state)
{
	fixture *f = *state;
	const uint64_t all = (UINT64_C(1) << BELLOWS_STAT_INDEX_N_) - 1;
	const uint64_t acc = BELLOWS_STAT_READ(acc_norm);
	const uint64_t sends = BELLOWS_STAT_READ(comm_raw_ms) |
	    BELLOWS_STAT_READ(comm_raw_n) | BELLOWS_STAT_READ(comm_comp_ms) |
	    BELLOWS_STAT_READ(comm_comp_n) | BELLOWS_STAT_READ(codec_ms);
	bellows_policy_ops ops = probe_ops;
	probe_config pcfg = { .gain = 1, .span = 16 };
	ctl_policy_conf pc;
	ctl_job_conf jc;

	/* fixed reads nothing: every layer statistic may be skipped. */
	assert_true(skip_of(f,
			"jobs:\n"
			"  - policies:\n"
			"      - type: fixed\n"
			"        params: {level: 3}\n") == all);
	/* accordion reads acc_norm, slimgc its timed sends. */
	assert_true(skip_of(f,
			"jobs:\n"
			"  - policies:\n"
			"      - type: accordion\n"
			"      - type: slimgc\n") == (all & ~(acc | sends)));
	/* A job without policies reads nothing. */
	assert_true(ctl_policy_set_stats_skip(NULL) == all);
	/* all_stats: true keeps every statistic for the history. */
	assert_true(skip_of(f,
			"jobs:\n"
			"  - all_stats: true\n"
			"    policies:\n"
			"      - type: fixed\n"
			"        params: {level: 3}\n") == 0);

	/* A policy that declares nothing reads everything: ABI 4 ops end
	 * before stats_read, an ABI 5 one may leave it 0. */
	ops.stats_read = BELLOWS_STATS_DECLARED;
	pc = (ctl_policy_conf){ .name = "probe",
		.ops = &ops,
		.config = &pcfg,
		.selector = { .min_ndim = 2 } };
	jc = (ctl_job_conf){ .match = "*", .n_policies = 1, .policies = &pc };
	assert_int_equal(start_with(f, &jc), 0);
	assert_true(ctl_policy_set_stats_skip(f->set) == all);
	ops.abi_version = 4;
	assert_true(ctl_policy_set_stats_skip(f->set) == 0);
	ops.abi_version = BELLOWS_POLICY_ABI;
	ops.stats_read = 0;
	assert_true(ctl_policy_set_stats_skip(f->set) == 0);
	/* Before pc and ops go out of scope. */
	ctl_policy_set_destroy(&f->set);
}

static void
test_host_refuses_a_set_whose_init_fails_and_names_it(void **state)
{
	fixture *f = *state;
	bellows_policy_ops ops = probe_ops;
	probe_config pcfg = { .gain = 1, .span = 16 };
	ctl_policy_conf pcs[2];
	ctl_job_conf jc;

	load(f,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: fixed\n");
	ops.init = probe_init_fails;
	ops.fini = probe_fini;
	pcs[0] = f->cfg->jobs[0].policies[0];
	pcs[1] = (ctl_policy_conf){ .name = "broken",
		.ops = &ops,
		.config = &pcfg };
	jc = (ctl_job_conf){ .match = "*", .n_policies = 2, .policies = pcs };

	probe_fini_calls = 0;
	assert_int_equal(start_with(f, &jc), BELLOWS_ENOTFOUND);
	assert_null(f->set);
	assert_string_equal(f->reason,
	    "policy 'broken' failed to start: not found");
	/* fini only for instances whose init succeeded. */
	assert_int_equal(probe_fini_calls, 0);
}

/* ---- calibration and metrics ------------------------------------------ */

/* A size-threshold policy: asks for a 10-step calibration from the
 * start, a 40-step one in window 0 and none after, and reports metrics,
 * some of them invalid. It fails (a counted failure) when the host did
 * not hand it a proposal with calibrate_steps and n_metrics 0. */
static int
probe_init_noop(void *st, const void *config, const bellows_job_info *job,
    bellows_proposal *initial)
{
	return 0;
}

static int
calib_init(void *st, const void *config, const bellows_job_info *job,
    bellows_proposal *initial)
{
	initial->calibrate_steps = 10;
	initial->n_metrics = 1; /* dropped: init has no window */
	snprintf(initial->metrics[0].name, BELLOWS_METRIC_NAME_MAX, "x");
	return 0;
}

static int
calib_on_window(void *st, const void *config, const bellows_window *w,
    bellows_proposal *out)
{
	static const bellows_metric m[] = {
		{ .name = "threshold_bytes", .layer = -1, .value = 2.2e6 },
		{ .name = "ratio", .layer = 3, .value = 1.25 },
		{ .name = "Bad-Name", .layer = -1, .value = 1 },
		{ .name = "ratio", .layer = 4, .value = 1 },
		{ .name = "ratio", .layer = -2, .value = 1 },
		{ .name = "", .layer = -1, .value = 1 },
		{ .name = "nan_value", .layer = -1, .value = NAN },
		{ .name = "inf_value", .layer = 0, .value = INFINITY },
	};

	if (out->calibrate_steps != 0 || out->n_metrics != 0)
		return BELLOWS_ESTATE;
	if (w->window == 0) {
		out->calibrate_steps = 40;
		snprintf(out->reason, sizeof(out->reason), "calibrate");
	}
	out->n_metrics = sizeof(m) / sizeof(m[0]);
	memcpy(out->metrics, m, sizeof(m));
	/* An unterminated name: dropped too. */
	memset(out->metrics[5].name, 'a', BELLOWS_METRIC_NAME_MAX);
	return 0;
}

/* Not the owner of SIZE_THRESHOLD: its calibrate_steps is ignored. Its
 * metric comes after the first instance's. */
static int
other_on_window(void *st, const void *config, const bellows_window *w,
    bellows_proposal *out)
{
	out->calibrate_steps = 999;
	out->n_metrics = 1;
	out->metrics[0] = (bellows_metric){ .name = "alpha_ms",
		.layer = -1,
		.value = 0.5 };
	return 0;
}

static void
test_host_takes_calibration_from_the_threshold_owner_only(void **state)
{
	fixture *f = *state;
	bellows_policy_ops calib = probe_ops, other = probe_ops;
	probe_config pcfg = { .gain = 1, .span = 16 };
	ctl_policy_conf pcs[2];
	char policies[64], reason[256];
	ctl_job_conf jc;

	calib.knobs = BELLOWS_KNOB_SIZE_THRESHOLD;
	calib.init = calib_init;
	calib.on_window = calib_on_window;
	other.knobs = BELLOWS_KNOB_COMPRESSION;
	other.init = probe_init_noop;
	other.on_window = other_on_window;
	pcs[0] = (ctl_policy_conf){ .name = "slim",
		.ops = &calib,
		.config = &pcfg };
	pcs[1] = (ctl_policy_conf){ .name = "perf",
		.ops = &other,
		.config = &pcfg };
	jc = (ctl_job_conf){ .match = "*", .n_policies = 2, .policies = pcs };
	assert_int_equal(start_with(f, &jc), 0);
	/* The owner's initial proposal may start with a calibration. */
	assert_int_equal(f->state.calibrate_steps, 10);

	/* Window 0: the only change is a calibration; it is still a reason
	 * to publish, and it goes into the state. */
	assert_int_equal(run(f, 0, policies, sizeof(policies), reason,
			     sizeof(reason)),
	    0);
	assert_int_equal(f->state.calibrate_steps, 40);
	assert_string_equal(policies, "slim");
	assert_string_equal(reason, "calibrate");
	/* Window 1: asked anew, and nothing asked: none. The owner did not
	 * fail: it was handed 0 and no metrics, although the state in force
	 * held 40. */
	assert_int_equal(run(f, 1, policies, sizeof(policies), reason,
			     sizeof(reason)),
	    0);
	assert_int_equal(f->state.calibrate_steps, 0);
	assert_string_equal(policies, "");
	/* The ops live on this stack: the set goes first. */
	ctl_policy_set_destroy(&f->set);
}

/* The codec_table owner: window 0 builds a 3-byte table, window 1 keeps
 * it (checking the pre-fill), window 2 proposes one too long, window 3 a
 * 64 KiB one. */
static int
table_on_window(void *st, const void *config, const bellows_window *w,
    bellows_proposal *out)
{
	switch (w->window) {
	case 0:
		if (out->codec_table_len != 0)
			return BELLOWS_ESTATE;
		memcpy(out->codec_table, "abc", 3);
		out->codec_table_len = 3;
		snprintf(out->reason, sizeof(out->reason), "table");
		break;
	case 1:
		if (out->codec_table_len != 3 ||
		    memcmp(out->codec_table, "abc", 3) != 0)
			return BELLOWS_ESTATE;
		break;
	case 2:
		out->codec_table_len = BELLOWS_CODEC_TABLE_MAX + 1;
		break;
	default:
		memset(out->codec_table, 0x5a, BELLOWS_CODEC_TABLE_MAX);
		out->codec_table_len = BELLOWS_CODEC_TABLE_MAX;
		break;
	}
	return 0;
}

/* Not the owner: whatever it writes into the table is ignored. */
static int
scribble_on_window(void *st, const void *config, const bellows_window *w,
    bellows_proposal *out)
{
	memcpy(out->codec_table, "zzzz", 4);
	out->codec_table_len = 4;
	return 0;
}

static void
test_host_takes_a_bounded_codec_table_from_its_owner_only(void **state)
{
	fixture *f = *state;
	bellows_policy_ops table = probe_ops, other = probe_ops;
	probe_config pcfg = { .gain = 1, .span = 16 };
	ctl_policy_conf pcs[2];
	char policies[64], reason[256];
	ctl_job_conf jc;

	table.knobs = BELLOWS_KNOB_CODEC_TABLE;
	table.init = probe_init_noop;
	table.on_window = table_on_window;
	other.knobs = BELLOWS_KNOB_COMPRESSION;
	other.init = probe_init_noop;
	other.on_window = scribble_on_window;
	pcs[0] = (ctl_policy_conf){ .name = "tbl",
		.ops = &table,
		.config = &pcfg };
	pcs[1] = (ctl_policy_conf){ .name = "other",
		.ops = &other,
		.config = &pcfg };
	jc = (ctl_job_conf){ .match = "*", .n_policies = 2, .policies = pcs };
	assert_int_equal(start_with(f, &jc), 0);
	assert_int_equal(f->state.codec_table_len, 0);
	for (uint64_t w = 0; w < 3; w++) {
		assert_int_equal(run(f, w, policies, sizeof(policies), reason,
				     sizeof(reason)),
		    0);
		/* Built at window 0, kept at 1, the oversize one refused at
		 * 2; the other policy's scribbles never count. */
		assert_int_equal(f->state.codec_table_len, 3);
		assert_memory_equal(f->state.codec_table, "abc", 3);
	}
	assert_int_equal(run(f, 3, policies, sizeof(policies), reason,
			     sizeof(reason)),
	    0);
	assert_int_equal(f->state.codec_table_len, BELLOWS_CODEC_TABLE_MAX);
	assert_int_equal(f->state.codec_table[BELLOWS_CODEC_TABLE_MAX - 1],
	    0x5a);
	ctl_policy_set_destroy(&f->set);
}

static void
test_host_prefills_and_keeps_only_valid_metrics_named_by_instance(void **state)
{
	fixture *f = *state;
	bellows_policy_ops calib = probe_ops, other = probe_ops;
	probe_config pcfg = { .gain = 1, .span = 16 };
	ctl_policy_conf pcs[2];
	char policies[64], reason[256];
	const com_metric *m;
	ctl_job_conf jc;
	uint32_t n = 99;

	calib.knobs = BELLOWS_KNOB_SIZE_THRESHOLD;
	calib.init = calib_init;
	calib.on_window = calib_on_window;
	other.knobs = BELLOWS_KNOB_COMPRESSION;
	other.init = probe_init_noop;
	other.on_window = other_on_window;
	pcs[0] = (ctl_policy_conf){ .name = "slim",
		.ops = &calib,
		.config = &pcfg };
	pcs[1] = (ctl_policy_conf){ .name = "perf",
		.ops = &other,
		.config = &pcfg };
	jc = (ctl_job_conf){ .match = "*", .n_policies = 2, .policies = pcs };
	assert_int_equal(start_with(f, &jc), 0);
	/* Nothing before the first window (init's metric is dropped). */
	m = ctl_policy_set_metrics(f->set, &n);
	assert_int_equal(n, 0);
	for (uint64_t w = 0; w < 2; w++) {
		assert_int_equal(run(f, w, policies, sizeof(policies), reason,
				     sizeof(reason)),
		    0);
		m = ctl_policy_set_metrics(f->set, &n);
		assert_int_equal(n, 3);
		assert_string_equal(m[0].policy, "slim");
		assert_string_equal(m[0].name, "threshold_bytes");
		assert_int_equal(m[0].layer, -1);
		assert_true(m[0].value == 2.2e6);
		assert_string_equal(m[1].name, "ratio");
		assert_int_equal(m[1].layer, 3);
		assert_true(m[1].value == 1.25);
		assert_string_equal(m[2].policy, "perf");
		assert_string_equal(m[2].name, "alpha_ms");
	}
	/* Each window's list is its own (3, not 6 after two windows). */
	m = ctl_policy_set_metrics(NULL, &n);
	assert_null(m);
	assert_int_equal(n, 0);
	ctl_policy_set_destroy(&f->set);
}

/* ---- LR changes ---------------------------------------------------- */

#define EVENTS_MAX 8

static bellows_event events_seen[EVENTS_MAX];    /* what on_event was told */
static uint32_t n_events_seen;                   /* entries used */
static uint64_t event_before_window[EVENTS_MAX]; /* on_window calls made
						  * before each event */
static uint64_t windows_run;                     /* on_window calls */

static int
record_on_window(void *st, const void *config, const bellows_window *w,
    bellows_proposal *out)
{
	windows_run++;
	return 0;
}

static int
record_on_event(void *st, const void *config, const bellows_event *ev)
{
	if (n_events_seen < EVENTS_MAX) {
		event_before_window[n_events_seen] = windows_run;
		events_seen[n_events_seen++] = *ev;
	}
	return 0;
}

/* Runs the set on window `index` whose first step used learning rate lr. */
static void
run_lr(fixture *f, uint64_t index, double lr)
{
	bellows_window w = window(f, index);
	char policies[64], reason[256];
	uint32_t failed = 99;

	w.lr = lr;
	assert_int_equal(ctl_policy_set_run(f->set, &w, &f->state, policies,
			     sizeof(policies), reason, sizeof(reason), &failed),
	    0);
	assert_int_equal(failed, 0);
}

static void
test_host_tells_policies_of_an_lr_change_before_the_window(void **state)
{
	fixture *f = *state;
	bellows_policy_ops ops = probe_ops;
	probe_config pcfg = { .gain = 1, .span = 16 };
	ctl_policy_conf pc;
	ctl_job_conf jc;
	ctl_policy_set *next = NULL;
	char note[128];

	ops.init = probe_init_batch;
	ops.on_window = record_on_window;
	ops.on_event = record_on_event;
	pc = (ctl_policy_conf){ .name = "recorder",
		.ops = &ops,
		.config = &pcfg,
		.selector = { .min_ndim = 0 } };
	jc = (ctl_job_conf){ .match = "*", .n_policies = 1, .policies = &pc };
	n_events_seen = 0;
	windows_run = 0;
	assert_int_equal(start_with(f, &jc), 0);

	/* The first window has no previous LR; an unchanged LR and an
	 * unknown (NAN) one are no change. */
	run_lr(f, 0, 0.1);
	run_lr(f, 1, 0.1);
	run_lr(f, 2, NAN);
	assert_int_equal(n_events_seen, 0);
	run_lr(f, 3, 0.01);
	assert_int_equal(n_events_seen, 1);
	assert_int_equal(events_seen[0].type, BELLOWS_EVENT_LR_CHANGE);
	assert_int_equal(events_seen[0].window, 3);
	assert_true(events_seen[0].lr_old == 0.1);
	assert_true(events_seen[0].lr_new == 0.01);
	assert_int_equal(events_seen[0].ranks_alive, 4);
	assert_int_equal(event_before_window[0], 3); /* before window 3's */

	/* A reload keeps the instance (a RELOAD event) and the LR seen
	 * last: a change right after it is still told. */
	assert_int_equal(ctl_policy_set_prepare(f->set, &jc, "job", 4, layers,
			     N_LAYERS, &f->state, f->reason, sizeof(f->reason),
			     &next),
	    0);
	assert_int_equal(ctl_policy_set_commit(next, &f->set, 4, 4, note,
			     sizeof(note)),
	    0);
	f->set = next;
	assert_int_equal(n_events_seen, 2);
	assert_int_equal(events_seen[1].type, BELLOWS_EVENT_RELOAD);
	run_lr(f, 4, 0.02);
	assert_int_equal(n_events_seen, 3);
	assert_int_equal(events_seen[2].type, BELLOWS_EVENT_LR_CHANGE);
	assert_int_equal(events_seen[2].window, 4);
	assert_true(events_seen[2].lr_old == 0.01);
	assert_true(events_seen[2].lr_new == 0.02);
	run_lr(f, 5, 0.02);
	assert_int_equal(n_events_seen, 3);
	ctl_policy_set_destroy(&f->set); /* before jc leaves scope */
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_registry_finds_the_builtins_by_name),
		cmocka_unit_test(test_registry_accepts_every_builtin),
		cmocka_unit_test(
		    test_registry_check_refuses_another_abi_version),
		cmocka_unit_test(
		    test_registry_window_hands_old_policies_layers_at_their_stride),
		cmocka_unit_test(test_registry_check_refuses_a_bad_name),
		cmocka_unit_test(test_registry_check_refuses_missing_functions),
		cmocka_unit_test(
		    test_registry_check_refuses_a_param_outside_the_config),
		cmocka_unit_test(test_steps_at_takes_the_last_piece_started),
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
		T(test_fixed_sets_every_selected_layer_and_never_changes),
		T(test_fixed_acts_on_the_layers_its_selector_picks),
		T(test_schedule_closing_window_w_decides_level_of_w_plus_1),
		T(test_schedule_starts_raw_before_its_first_piece),
		T(test_host_merges_owned_knobs_and_counts_failures),
		T(test_host_skips_the_statistics_no_policy_of_the_set_reads),
		T(test_host_refuses_a_set_whose_init_fails_and_names_it),
		T(test_host_takes_calibration_from_the_threshold_owner_only),
		T(test_host_takes_a_bounded_codec_table_from_its_owner_only),
		T(test_host_prefills_and_keeps_only_valid_metrics_named_by_instance),
		T(test_host_tells_policies_of_an_lr_change_before_the_window),
#undef T
	};

	return cmocka_run_group_tests_name("policies", tests, NULL, NULL);
}
